/** The strict JSON reader: what serde_json refuses is refused, and no number loses a digit. */

import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { JsonError, strictParse } from "../src/index.js";
import { type JNum, parse } from "../src/json.js";

describe("strict JSON", () => {
  test("big integers keep every digit", () => {
    const v = strictParse(
      '{"a":18446744073709551615,"b":-9223372036854775808,"c":9007199254740993,"d":1}',
    ) as Record<string, unknown>;
    assert.equal(v.a, 18446744073709551615n);
    assert.equal(v.b, -9223372036854775808n);
    assert.equal(v.c, 9007199254740993n);
    assert.equal(v.d, 1);
    const n = (parse("[123456789012345678901234567890]") as JNum[])[0];
    assert.equal(n?.raw, "123456789012345678901234567890");
    assert.equal(n?.isInteger, false); // beyond u64: a float to serde_json, never rounded here
  });

  test("duplicate keys, lone surrogates, bad numbers and trailing text are refused", () => {
    for (const bad of [
      '{"a":1,"a":2}',
      '{"a":{"b":1,"b":1}}',
      '{"\\ud800":1}',
      '"\\udc00"',
      "[01]",
      "[1.]",
      "[1e400]",
      "[NaN]",
      "{} x",
      "[1,]",
      '{"a":1,}',
      '"a\u0001"',
      "'a'",
    ]) {
      assert.throws(() => strictParse(bad), JsonError, bad);
    }
  });

  test("bytes that are not UTF-8 are refused where read", () => {
    const bytes = new Uint8Array([0x22, 0xff, 0x22]); // "\xff"
    assert.throws(() => strictParse(bytes), JsonError);
    assert.equal(strictParse(new TextEncoder().encode('"é"')), "é");
  });

  test("nesting past serde_json's limit is refused", () => {
    assert.throws(() => strictParse(`${"[".repeat(200)}${"]".repeat(200)}`), JsonError);
    assert.deepEqual(Array.isArray(strictParse(`${"[".repeat(100)}${"]".repeat(100)}`)), true);
  });
});
