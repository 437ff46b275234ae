/** The TypeScript verifier gives every committed test vector the Rust verifier's verdict. */

import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, test } from "node:test";
import { ed25519 } from "@noble/curves/ed25519.js";
import { sha256 } from "@noble/hashes/sha2.js";
import { bytesEqual, hex } from "../src/bytes.js";
import { decompress, isSmallOrder } from "../src/ed25519.js";
import {
  decodeBase64,
  KeyRefused,
  NotAuthorizedError,
  pae,
  TrustedKeys,
  VerificationError,
  VoteError,
  verify,
  verifyVote,
} from "../src/index.js";
import { ROOT } from "./helpers.js";

const VECTORS = join(ROOT, "crates", "lev-approval", "tests", "vectors");
const FILES = readdirSync(VECTORS)
  .filter((f) => f.endsWith(".json"))
  .sort();

// biome-ignore lint/suspicious/noExplicitAny: test vectors are free-form JSON
type Vector = any;

function load(name: string): Vector {
  return JSON.parse(readFileSync(join(VECTORS, name), "utf8"));
}

/** What this verifier concludes, as `vector_set.rs`'s `evaluate` does. */
function evaluate(vector: Vector): Record<string, string> {
  let keys: TrustedKeys;
  try {
    keys = new TrustedKeys(vector.trusted_keys);
  } catch (e) {
    if (e instanceof KeyRefused) return { verdict: "invalid", error: e.code };
    throw e;
  }
  const ctx = vector.context ?? {};
  try {
    const verified = verify(JSON.stringify(vector.envelope), keys, {
      requestId: vector.call.request_id,
      toolName: vector.call.tool,
      argsJson: vector.call.args_json,
      conversationId: ctx.conversation,
      caller: ctx.caller,
      sandboxMode: ctx.sandbox_mode,
      now: vector.now,
      peopleKeys: vector.people_keys,
      requireVotes: vector.require_votes,
    });
    return { verdict: "authorized", effective_args_json: verified.effectiveArgsJson };
  } catch (e) {
    if (e instanceof VerificationError) return { verdict: "invalid", error: e.code };
    if (e instanceof NotAuthorizedError) return { verdict: "not_authorized", reason: e.code };
    if (e instanceof KeyRefused) return { verdict: "invalid", error: "malformed_key" };
    throw e;
  }
}

describe("test vectors", () => {
  test("there are vectors of every verdict", () => {
    assert.ok(FILES.length >= 62, `only ${FILES.length} vectors`);
    assert.ok(FILES.some((f) => f.startsWith("v2_")));
    const verdicts = new Set(FILES.map((f) => load(f).expect.verdict));
    assert.deepEqual([...verdicts].sort(), ["authorized", "invalid", "not_authorized"]);
  });

  for (const file of FILES) {
    test(file.replace(/\.json$/, ""), () => {
      const vector = load(file);
      assert.deepEqual(evaluate(vector), vector.expect, vector.description);
    });
  }

  // The same envelopes given as objects and as UTF-8 bytes get the same verdicts.
  test("an envelope as an object or as bytes gets the same verdict as its text", () => {
    for (const file of FILES) {
      const vector = load(file);
      let keys: TrustedKeys;
      try {
        keys = new TrustedKeys(vector.trusted_keys);
      } catch {
        continue;
      }
      const run = (env: unknown) => {
        try {
          verify(env, keys, {
            requestId: vector.call.request_id,
            toolName: vector.call.tool,
            argsJson: vector.call.args_json,
            now: vector.now,
          });
          return "ok";
        } catch (e) {
          return (e as VerificationError).code;
        }
      };
      const text = JSON.stringify(vector.envelope);
      assert.equal(run(vector.envelope), run(text), file);
      assert.equal(run(new TextEncoder().encode(text)), run(text), file);
    }
  });
});

describe("vote envelopes", () => {
  const voteFiles = FILES.filter((f) => "vote" in load(f));
  test("there are vote envelope vectors", () => {
    for (const n of [
      "vote_envelope_cli_key.json",
      "vote_envelope_payload_edited.json",
      "v2_denial.json",
    ]) {
      assert.ok(voteFiles.includes(n), n);
    }
  });
  for (const file of voteFiles) {
    test(file, () => {
      const vector = load(file);
      const vote = vector.vote;
      const env = vote.envelope;
      const payload = decodeBase64(env.payload);
      assert.equal(new TextDecoder().decode(payload), vote.payload_json);
      const message = pae(env.payloadType, payload);
      assert.equal(hex(message), vote.pae_hex);
      assert.equal(hex(sha256(message)), vote.pae_sha256);
      let got: Record<string, string>;
      try {
        const v = verifyVote(env, vector.people_keys);
        got = { verdict: "valid", voter: v.payload.voter, kid: v.kid };
      } catch (e) {
        if (!(e instanceof VoteError)) throw e;
        got = { verdict: "invalid", error: e.code };
      }
      assert.deepEqual(got, vote.expect, vector.description);
    });
  }
});

describe("strict Ed25519", () => {
  test("the weak-key forgery passes non-strict verification, and the key is refused", () => {
    const vector = load("weak_key.json");
    const raw = decodeBase64(vector.trusted_keys[0]);
    const pt = decompress(raw);
    assert.ok(pt !== null && isSmallOrder(pt));
    const env = vector.envelope;
    const message = pae(env.payloadType, decodeBase64(env.payload));
    const sig = decodeBase64(env.signatures[0].sig);
    // ZIP-215 (as batch and lenient verifiers) accepts the forgery ...
    assert.equal(ed25519.verify(sig, message, raw, { zip215: true }), true);
    // ... and the SDK never lets the key in.
    assert.throws(
      () => new TrustedKeys([raw]),
      (e: unknown) => e instanceof KeyRefused && e.code === "weak_key",
    );
  });

  test("every small-order encoding is refused as a weak key", () => {
    const P = 2n ** 255n - 19n;
    for (const y of [1n, P - 1n, 0n]) {
      for (const sign of [0n, 1n]) {
        const n = y | (sign << 255n);
        const raw = new Uint8Array(32);
        for (let i = 0; i < 32; i++) raw[i] = Number((n >> BigInt(8 * i)) & 0xffn);
        assert.throws(() => new TrustedKeys([raw]), KeyRefused);
      }
    }
  });

  test("a signature with s not below the group order is refused", () => {
    const vector = load("valid_grant.json");
    const env = vector.envelope;
    const sig = decodeBase64(env.signatures[0].sig);
    const L = 2n ** 252n + 27742317777372353535851937790883648493n;
    let s = 0n;
    for (let i = 31; i >= 0; i--) s = (s << 8n) | BigInt(sig[32 + i] as number);
    const t = s + L;
    const forged = new Uint8Array(sig);
    for (let i = 0; i < 32; i++) forged[32 + i] = Number((t >> BigInt(8 * i)) & 0xffn);
    assert.ok(!bytesEqual(forged, sig));
    const b64 = btoa(String.fromCharCode(...forged));
    const tampered = { ...env, signatures: [{ ...env.signatures[0], sig: b64 }] };
    assert.throws(
      () =>
        verify(tampered, vector.trusted_keys, {
          requestId: vector.call.request_id,
          toolName: vector.call.tool,
          argsJson: vector.call.args_json,
          now: vector.now,
        }),
      (e: unknown) => e instanceof VerificationError && e.code === "bad_signature",
    );
  });
});

describe("base64", () => {
  test("standard and url-safe, padded or not; non-canonical refused", () => {
    for (const text of ["+/+/AQ==", "+/+/AQ", "-_-_AQ==", "-_-_AQ"]) {
      assert.deepEqual([...decodeBase64(text)], [0xfb, 0xff, 0xbf, 0x01]);
    }
    for (const bad of ["not base64!", "AQ=", "AR==", "+/-_"]) {
      assert.throws(() => decodeBase64(bad));
    }
  });
});
