/**
 * The examples in examples/ run as a person runs them against `lev demo`:
 * here against a `lev serve` (the admin token, as `lev demo` prints one),
 * with a person answering over the HTTP API.
 */

import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { dirname, join } from "node:path";
import { after, before, describe, test } from "node:test";
import { fileURLToPath } from "node:url";
import type { Client } from "../src/index.js";
import { answerWhenPending, Server, uid } from "./helpers.js";

const EXAMPLES = join(dirname(fileURLToPath(import.meta.url)), "..", "examples");

let server: Server;
let admin: Client;

before(async () => {
  server = await Server.start({ extra: ["--operator-reply-timeout", "1"] });
  admin = server.client();
});
after(async () => {
  await server?.close();
});

function example(name: string, session: string): Promise<{ code: number | null; out: string }> {
  const proc = spawn(process.execPath, [join(EXAMPLES, name)], {
    env: {
      ...process.env,
      LEV_URL: server.url,
      LEV_TOKEN: server.admin,
      LEV_EXAMPLE_SESSION: session,
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  proc.stdout.setEncoding("utf8").on("data", (c: string) => {
    out += c;
  });
  proc.stderr.setEncoding("utf8").on("data", (c: string) => {
    out += c;
  });
  return new Promise((resolve) => proc.on("exit", (code) => resolve({ code, out })));
}

describe("examples", () => {
  test("ask-and-gate: the answer, then the edited, approved call runs", async () => {
    const sid = uid();
    const running = example("ask-and-gate.js", sid);
    await answerWhenPending(admin, sid, { value: "." });
    await answerWhenPending(admin, sid, {
      approved: true,
      modified_args_json: JSON.stringify({ argv: ["ls", "-d", "/"], cwd: "." }),
    });
    const { code, out } = await running;
    assert.equal(code, 0, out);
    assert.match(out, /the person answered: \./);
    assert.match(out, /edited the arguments[\s\S]*\n\/\n/);
  });

  test("ai-sdk: a denial's feedback reaches the model", async () => {
    const sid = uid();
    const running = example("ai-sdk.js", sid);
    await answerWhenPending(admin, sid, { approved: false, feedback: "use git status" });
    const { code, out } = await running;
    assert.equal(code, 0, out);
    assert.match(out, /execution-denied[\s\S]*Feedback: use git status/);
  });

  test("operator: answers, vets and spawns, and defers the rest to people", async () => {
    const sid = uid();
    const running = example("operator.js", sid);
    await answerWhenPending(admin, sid, { value: "tomorrow" });
    const { code, out } = await running;
    assert.equal(code, 0, out);
    assert.match(out, /6 \* 7\? -> 42/);
    assert.match(out, /passed: 12/);
    assert.match(out, /answered: tomorrow/);
  });
});
