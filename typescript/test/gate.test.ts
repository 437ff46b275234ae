/**
 * The Gatekeeper against a real `lev serve`: a person approves, edits or
 * denies while the call waits; tampered, replayed, expired and misplaced
 * envelopes are refused; an edit the policy refuses never runs; a server that
 * is down runs nothing.
 */

import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import {
  ApiError,
  type ApprovedCall,
  type Client,
  Denied,
  decodeBase64,
  encodeBase64,
  Gatekeeper,
  type GatekeeperOptions,
  NonceSpent,
  NotAuthorizedError,
  ServerUnreachable,
  TrustedKeys,
  VerificationError,
  verify,
} from "../src/index.js";
import { answerWhenPending, pendingIn, Server, sleep, uid } from "./helpers.js";

const ARGS = JSON.stringify({ argv: ["echo", "hi"], cwd: "/tmp" });
const POLICY = `
[[rule]]
tool = "fs.read"
decision = "allow"

[[rule]]
tool = "shell"
args = { "/argv/0" = "^rm$" }
decision = "deny"
reason = "never rm"

[[rule]]
tool = "*"
decision = "ask"
`;

let server: Server;
let worker: Client;
let approver: Client;

before(async () => {
  const dataDir = join(mkdtempSync(join(tmpdir(), "lev-ts-gate-")), "data");
  mkdirSync(dataDir);
  writeFileSync(join(dataDir, "policy.toml"), POLICY);
  server = await Server.start({ dataDir });
  worker = server.client(await server.token("worker"));
  approver = server.client(await server.token("approver"));
});
after(async () => {
  await server?.close();
});

function keeper(sid: string, extra: Partial<GatekeeperOptions> = {}): Gatekeeper {
  return new Gatekeeper({
    client: worker,
    sessionId: sid,
    caller: "alice",
    sandboxMode: "workspace-write",
    ...extra,
  });
}

/** A tool that records each run: what the tests check never happened. */
function recorder() {
  const runs: unknown[] = [];
  return {
    runs,
    async run(gk: Gatekeeper, requestId: string, args: string = ARGS): Promise<ApprovedCall> {
      const call = await gk.gate({ requestId, toolName: "shell", args });
      runs.push(call.args);
      return call;
    },
  };
}

describe("gatekeeper", () => {
  test("an approved call runs its args", async () => {
    const sid = uid();
    const answering = answerWhenPending(approver, sid, { approved: true });
    const call = await keeper(sid).gate({ requestId: "c1", toolName: "shell", args: ARGS });
    await answering;
    assert.equal(call.argsJson, ARGS);
    assert.equal(call.wasEdited, false);
    assert.equal(call.verified.caller, "alice");
    assert.equal(call.verified.conversationId, sid);
  });

  test("an edit runs the edited, signed args", async () => {
    const sid = uid();
    const edited = JSON.stringify({ argv: ["echo", "bye"], cwd: "/tmp" });
    const answering = answerWhenPending(approver, sid, {
      approved: true,
      modified_args_json: edited,
      injected_context: "be brief",
    });
    const call = await keeper(sid).gate({ requestId: "c1", toolName: "shell", args: ARGS });
    await answering;
    assert.equal(call.argsJson, edited);
    assert.ok(call.wasEdited);
    assert.deepEqual(call.args, { argv: ["echo", "bye"], cwd: "/tmp" });
    const text = call.toolResultText("bye");
    assert.ok(text.includes("be brief") && text.endsWith("bye"));
  });

  test("a deny carries the trimmed feedback; a blank one is the plain deny", async () => {
    const sid = uid();
    const tool = recorder();
    const answering = answerWhenPending(approver, sid, { approved: false, feedback: "  use ls  " });
    await assert.rejects(tool.run(keeper(sid), "c1"), (e: unknown) => {
      assert.ok(e instanceof Denied);
      assert.equal(e.kind, "denied");
      assert.equal(e.feedback, "use ls");
      assert.ok(e.text.includes("Feedback: use ls"));
      return true;
    });
    await answering;
    const sid2 = uid();
    const plain = answerWhenPending(approver, sid2, { approved: false, feedback: "   " });
    await assert.rejects(tool.run(keeper(sid2), "c1"), (e: unknown) => {
      return e instanceof Denied && e.feedback === undefined && !e.text.includes("Feedback");
    });
    await plain;
    assert.deepEqual(tool.runs, []);
  });

  test("nobody answering in time is a deny", async () => {
    const tool = recorder();
    await assert.rejects(tool.run(keeper(uid(), { timeoutS: 1 }), "c1"), (e: unknown) => {
      return e instanceof Denied && (e.kind === "expired" || e.kind === "timed_out");
    });
    assert.deepEqual(tool.runs, []);
  });

  test("policy allow and deny; the same call again is refused (its nonce is spent)", async () => {
    const g = new Gatekeeper({ client: worker, sessionId: uid() });
    const call = await g.gate({
      requestId: "r1",
      toolName: "fs.read",
      args: { path: "/etc/hosts" },
    });
    assert.equal(call.approver, "policy");
    assert.deepEqual(call.args, { path: "/etc/hosts" });
    await assert.rejects(
      g.gate({ requestId: "r2", toolName: "shell", args: { argv: ["rm", "-rf"] } }),
      (e: unknown) => {
        return e instanceof Denied && e.kind === "policy" && e.text.includes("never rm");
      },
    );
    await assert.rejects(
      g.gate({ requestId: "r1", toolName: "fs.read", args: { path: "/etc/hosts" } }),
      (e: unknown) => e instanceof NonceSpent && e.code === "nonce_spent",
    );
  });

  test("a replayed approval is refused: the tool runs once", async () => {
    const sid = uid();
    const tool = recorder();
    const gk = keeper(sid);
    const answering = answerWhenPending(approver, sid, { approved: true });
    await tool.run(gk, "c1");
    await answering;
    await assert.rejects(tool.run(gk, "c1"), NonceSpent);
    assert.equal(tool.runs.length, 1);
  });

  test("an edit the policy refuses is refused to the person, and the tool never runs", async () => {
    const sid = uid();
    const tool = recorder();
    const running = tool.run(keeper(sid), "c1").then(
      () => "ran",
      (e: unknown) => e,
    );
    const iid = await pendingIn(approver, sid);
    await assert.rejects(
      approver.respond(iid, {
        approved: true,
        modified_args_json: JSON.stringify({ argv: ["rm", "-rf", "/"] }),
      }),
      (e: unknown) => e instanceof ApiError && e.status === 422,
    );
    // Still pending; the person denies in the end.
    assert.equal((await approver.getInteraction(iid)).request.status, "pending");
    await approver.respond(iid, { approved: false, feedback: "no" });
    const outcome = await running;
    assert.ok(outcome instanceof Denied);
    assert.deepEqual(tool.runs, []);
  });

  test("a tampered envelope is refused; a genuine one only for its own call and context", async () => {
    const sid = uid();
    const gk = keeper(sid);
    const [, first] = await gk.submit({ requestId: "c1", toolName: "shell", args: ARGS });
    assert.equal(first.decision, "ask");
    const iid = first.decision === "ask" ? first.interaction_id : "";
    const env = (await approver.respond(iid, { approved: true })).approval;
    assert.ok(env);
    const keys = TrustedKeys.fromJwks(await worker.keys());
    const payload = JSON.parse(new TextDecoder().decode(decodeBase64(env.payload)));
    payload.args_json = JSON.stringify({ argv: ["rm", "-rf", "/"] });
    const forged = {
      ...env,
      payload: encodeBase64(new TextEncoder().encode(JSON.stringify(payload))),
    };
    assert.throws(
      () => verify(forged, keys, { requestId: "c1", toolName: "shell", argsJson: ARGS }),
      (e: unknown) => e instanceof VerificationError && e.code === "bad_signature",
    );
    const ok = verify(env, keys, {
      requestId: "c1",
      toolName: "shell",
      argsJson: ARGS,
      conversationId: sid,
      caller: "alice",
      sandboxMode: "workspace-write",
    });
    assert.ok(ok.approved && ok.effectiveArgsJson === ARGS);
    for (const [opts, code] of [
      [{ argsJson: `${ARGS} ` }, "args_json"],
      [{ conversationId: "other" }, "conversation_id"],
      [{ sandboxMode: "danger-full-access" }, "sandbox_mode"],
      [{ caller: "mallory" }, "caller"],
      [{ requestId: "c2" }, "request_id"],
    ] as const) {
      assert.throws(
        () =>
          verify(env, keys, { ...{ requestId: "c1", toolName: "shell", argsJson: ARGS }, ...opts }),
        (e: unknown) => e instanceof NotAuthorizedError && e.code === code,
      );
    }
    // Expired: the same envelope checked an hour later.
    assert.throws(
      () =>
        verify(env, keys, {
          requestId: "c1",
          toolName: "shell",
          argsJson: ARGS,
          now: Date.now() + 3_600_000,
        }),
      (e: unknown) => e instanceof VerificationError && e.code === "expired",
    );
    // Under keys the server does not hold: untrusted.
    const other = new TrustedKeys(["11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"]);
    assert.throws(
      () => verify(env, other, { requestId: "c1", toolName: "shell", argsJson: ARGS }),
      (e: unknown) => e instanceof VerificationError && e.code === "untrusted_key",
    );
  });

  test("a gatekeeper whose pinned keys are not the server's never runs the call", async () => {
    const sid = uid();
    const tool = recorder();
    const gk = keeper(sid, { keys: "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo" });
    const answering = answerWhenPending(approver, sid, { approved: true });
    await assert.rejects(
      tool.run(gk, "c1"),
      (e: unknown) => e instanceof VerificationError && e.code === "untrusted_key",
    );
    await answering;
    assert.deepEqual(tool.runs, []);
  });

  test("an expired envelope (a clock past its lifetime) never runs the call", async () => {
    const sid = uid();
    const tool = recorder();
    const gk = keeper(sid, { now: () => Date.now() + 3_600_000 });
    const answering = answerWhenPending(approver, sid, { approved: true });
    await assert.rejects(
      tool.run(gk, "c1"),
      (e: unknown) => e instanceof VerificationError && e.code === "expired",
    );
    await answering;
    assert.deepEqual(tool.runs, []);
  });

  test("a server that is down runs nothing", async () => {
    const tool = recorder();
    const { Client } = await import("../src/index.js");
    const gk = new Gatekeeper({
      client: new Client("http://127.0.0.1:9", "t", { timeoutMs: 2000 }),
      sessionId: uid(),
    });
    await assert.rejects(tool.run(gk, "c1"), ServerUnreachable);
    assert.deepEqual(tool.runs, []);
  });

  test("a server that goes down while the call waits runs nothing", async () => {
    const s = await Server.start();
    try {
      const w = s.client(await s.token("worker"));
      const tool = recorder();
      const running = tool.run(new Gatekeeper({ client: w, sessionId: uid() }), "c1").then(
        () => "ran",
        (e: unknown) => e,
      );
      const a = s.client();
      while ((await a.listInteractions()).items.length === 0) await sleep(50);
      await s.stop();
      assert.ok((await running) instanceof ServerUnreachable);
      assert.deepEqual(tool.runs, []);
    } finally {
      await s.close();
    }
  });
});
