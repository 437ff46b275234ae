/**
 * The operator against a real `lev serve`: asks, hooks, spawns, triage,
 * deferral to people, reconnects (each req_id handled once), refusals.
 */

import assert from "node:assert/strict";
import { connect, createServer, type Server as NetServer, type Socket } from "node:net";
import { after, before, describe, test } from "node:test";
import {
  ApiError,
  type Ask,
  type Client,
  Defer,
  type FrameRefused,
  type Hello,
  Operator,
  type OperatorOptions,
  Reject,
  ServerUnreachable,
  SpawnOutcome,
  type Stopped,
} from "../src/index.js";
import { pendingIn, Server, sleep, uid } from "./helpers.js";

let server: Server;
let quick: Server;

before(async () => {
  [server, quick] = await Promise.all([
    Server.start(),
    // Operators that do not reply hand their messages to people after 1 s.
    Server.start({ extra: ["--operator-reply-timeout", "1", "--operator-grace", "1"] }),
  ]);
});
after(async () => {
  await Promise.all([server?.close(), quick?.close()]);
});

async function until(check: () => boolean, what: string, ms = 15_000): Promise<void> {
  const end = Date.now() + ms;
  while (!check()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(20);
  }
}

async function named(
  s: Server,
  role: "operator" | "worker" | "approver",
): Promise<[string, string]> {
  const name = uid(role);
  const info = await s
    .client()
    .createToken(name, role, role === "operator" ? { sessions: ["*"] } : {});
  return [name, info.token as string];
}

/** Run `op` while `body` runs; its hellos are collected. */
async function serving<T>(op: Operator, hellos: Hello[], body: () => Promise<T>): Promise<T> {
  op.onConnect((h) => hellos.push(h));
  const running = op.run();
  let ended: Stopped | unknown;
  running.then(
    (v) => {
      ended = v;
    },
    (e) => {
      ended = e;
    },
  );
  await until(() => hellos.length > 0 || ended !== undefined, "the operator's first connection");
  if (ended instanceof Error) throw ended;
  try {
    return await body();
  } finally {
    op.stop();
    await running.catch(() => {});
  }
}

/** A TCP relay the test can cut (as a network does), and refuse new connections through. */
class Relay {
  down = false;
  private readonly links = new Set<Socket>();
  private srv: NetServer | null = null;
  constructor(private readonly target: string) {}
  start(): Promise<string> {
    const [host, port] = this.target.split(":");
    this.srv = createServer((client) => {
      if (this.down) return client.destroy();
      const up = connect(Number(port), host as string);
      for (const s of [client, up]) {
        this.links.add(s);
        s.on("error", () => {});
        s.on("close", () => {
          this.links.delete(s);
          client.destroy();
          up.destroy();
        });
      }
      client.pipe(up);
      up.pipe(client);
    });
    return new Promise((resolve) => {
      this.srv?.listen(0, "127.0.0.1", () => {
        const addr = this.srv?.address();
        resolve(`http://127.0.0.1:${typeof addr === "object" && addr ? addr.port : 0}`);
      });
    });
  }
  cut(): void {
    for (const s of this.links) s.destroy();
    this.links.clear();
  }
  close(): void {
    this.cut();
    this.srv?.close();
  }
}

function operator(s: Server, sid: string, token: string, opts: OperatorOptions = {}): Operator {
  return new Operator(sid, { url: s.url, token, backoffMs: [50, 200], ...opts });
}

describe("operator", () => {
  test("a worker's ask is answered by the operator", async () => {
    const sid = uid();
    const [opName, opToken] = await named(server, "operator");
    const w: Client = server.client((await named(server, "worker"))[1]);
    const op = operator(server, sid, opToken, {
      onAsk: (ask) => (ask.question === "6 * 7?" ? 42 : { echo: ask.question }),
    });
    await serving(op, [], async () => {
      assert.deepEqual(await w.askOperator(sid, "6 * 7?", { timeoutS: 20 }), {
        answer: 42,
        answered_by: opName,
      });
      const got = await w.askOperator(sid, { big: "question" }, { timeoutS: 20 });
      assert.deepEqual(got.answer, { echo: { big: "question" } });
    });
  });

  test("hooks vet spawns; spawns report results", async () => {
    const sid = uid();
    const [, opToken] = await named(server, "operator");
    const w = server.client((await named(server, "worker"))[1]);
    const op = operator(server, sid, opToken, {
      onHook: (hook) => (hook.spawn?.agent === "tests" ? true : new Reject("tests only")),
      onSpawn: async (order) => {
        if (order.spawn.mode === "posted") {
          await order.postResult({ passed: 12 }, { outputTail: "ok" });
          return new Defer();
        }
        return SpawnOutcome.done({ ran: order.spawn.agent });
      },
    });
    await serving(op, [], async () => {
      const ran = await w.spawn(sid, { agent: "tests" }, { timeoutS: 20 });
      assert.equal(ran.ok, true);
      assert.deepEqual(ran.value, { ran: "tests" });
      const posted = await w.spawn(sid, { agent: "tests", mode: "posted" }, { timeoutS: 20 });
      assert.deepEqual(posted.value, { passed: 12 });
      const task = await w.task(posted.task_id);
      assert.equal(task.status, "succeeded");
      await assert.rejects(w.spawn(sid, { agent: "deploy" }, { timeoutS: 20 }), (e: unknown) => {
        return (
          e instanceof ApiError &&
          e.status === 403 &&
          e.code === "rejected_by_middleware" &&
          /tests only/.test(e.message)
        );
      });
    });
  });

  test("triage decides, or escalates to people", async () => {
    const sid = uid();
    const [opName, opToken] = await named(server, "operator");
    const w = server.client((await named(server, "worker"))[1]);
    const [personName, personToken] = await named(server, "approver");
    const people = server.client(personToken);
    const refused: FrameRefused[] = [];
    const op = operator(server, sid, opToken, {
      onTriage: (item) => {
        const kind = item.interaction.kind;
        const prompt = "prompt" in kind ? kind.prompt : "";
        if (prompt.includes("billing")) return new Defer("needs a human: billing");
        if (prompt.includes("pick")) return { choice_index: 9 };
        return { value: "ACME" };
      },
      onError: (e) => refused.push(e),
    });
    await serving(op, [], async () => {
      const routed = (prompt: string) =>
        w.createInteraction({
          session_id: sid,
          kind: { type: "free_text", prompt },
          route: ["operator", "human"],
        });
      const decided = await routed("which customer?");
      const got = await w.waitForAnswer(decided.id, 20_000);
      assert.equal(got.response?.value, "ACME");
      assert.equal((await w.getInteraction(decided.id)).request.answered_by, opName);

      const escalated = await routed("refund for billing?");
      await until(() => true, "");
      let meta: unknown;
      for (let i = 0; i < 200 && !meta; i++) {
        meta = (await people.getInteraction(escalated.id)).request.metadata;
        if (!meta) await sleep(50);
      }
      assert.equal(
        (meta as { escalation: { reason: string } }).escalation.reason,
        "needs a human: billing",
      );
      await people.respond(escalated.id, { value: "refund it" });
      assert.equal((await w.waitForAnswer(escalated.id, 20_000)).response?.value, "refund it");
      assert.equal((await w.getInteraction(escalated.id)).request.answered_by, personName);

      const bad = await w.createInteraction({
        session_id: sid,
        kind: { type: "multiple_choice", prompt: "pick", options: ["a"] },
        route: ["operator"],
      });
      await until(() => refused.length > 0, "the invalid_answer error frame");
      assert.equal(refused[0]?.code, "invalid_answer");
      assert.ok(refused[0]?.reqId);
      await people.respond(bad.id, { choice_index: 0 });
    });
  });

  test("a deferred ask reaches people, and their answer completes the call", async () => {
    const sid = uid();
    const [, opToken] = await named(quick, "operator");
    const w = quick.client((await named(quick, "worker"))[1]);
    const [personName, personToken] = await named(quick, "approver");
    const people = quick.client(personToken);
    const op = operator(quick, sid, opToken, { onAsk: () => new Defer() });
    await serving(op, [], async () => {
      const call = w.askOperator(sid, "deploy now?", { timeoutS: 20 });
      const iid = await pendingIn(people, sid);
      await people.respond(iid, { value: "not today" });
      const got = await call;
      assert.equal(got.answered_by, personName);
      assert.equal(got.answer, "not today");
    });
  });

  test("a deferred hook is a spawn approval for people", async () => {
    const sid = uid();
    const [, opToken] = await named(quick, "operator");
    const w = quick.client((await named(quick, "worker"))[1]);
    const people = quick.client((await named(quick, "approver"))[1]);
    const op = operator(quick, sid, opToken, {
      onHook: () => new Defer(),
      onSpawn: (order) => SpawnOutcome.done({ ran: order.spawn }),
    });
    await serving(op, [], async () => {
      const call = w.spawn(sid, { agent: "deploy" }, { timeoutS: 20 });
      const iid = await pendingIn(people, sid);
      const kind = (await people.getInteraction(iid)).request.kind;
      assert.equal(kind.type, "tool_approval");
      assert.equal(kind.type === "tool_approval" ? kind.tool_name : "", "spawn");
      await people.respond(iid, { approved: true });
      const got = await call;
      assert.ok(got.ok);
      assert.deepEqual(got.value, { ran: { agent: "deploy" } });
    });
  });

  test("a dropped connection is reconnected, and the ask answered once", async () => {
    const sid = uid();
    const [opName, opToken] = await named(server, "operator");
    const w = server.client((await named(server, "worker"))[1]);
    const proxy = new Relay(server.listen);
    const calls: string[] = [];
    let release: () => void = () => {};
    let released = new Promise<void>((r) => {
      release = r;
    });
    const slow = async (ask: Ask) => {
      calls.push(ask.reqId);
      await released;
      return `answered ${ask.question}`;
    };
    const url = await proxy.start();
    const op = new Operator(sid, { url, token: opToken, onAsk: slow, backoffMs: [50, 200] });
    const hellos: Hello[] = [];
    try {
      await serving(op, hellos, async () => {
        // 1. The handler still runs when the connection drops: the server sends
        //    the ask again after the reconnect; it is not handled again.
        const call = w.askOperator(sid, "one", { timeoutS: 25 });
        await until(() => calls.length === 1, "the ask");
        proxy.cut();
        await until(() => hellos.length === 2, "the reconnect");
        assert.deepEqual(hellos[1]?.pending, [calls[0]]);
        await sleep(300);
        assert.equal(calls.length, 1);
        release();
        assert.deepEqual(await call, { answer: "answered one", answered_by: opName });

        // 2. The handler finishes while there is no connection: its reply goes
        //    out when the server sends the ask again after the reconnect.
        released = new Promise<void>((r) => {
          release = r;
        });
        let settled = false;
        const second = w.askOperator(sid, "two", { timeoutS: 25 }).finally(() => {
          settled = true;
        });
        await until(() => calls.length === 2, "the second ask");
        proxy.down = true;
        proxy.cut();
        await until(() => !op.connected, "the drop");
        release();
        await sleep(300);
        assert.equal(settled, false);
        proxy.down = false;
        assert.deepEqual(await second, { answer: "answered two", answered_by: opName });
        assert.deepEqual(hellos.at(-1)?.pending, [calls[1]]);
        assert.equal(calls.length, 2);
      });
    } finally {
      proxy.close();
    }
  });

  test("a new connection replaces the old one", async () => {
    const sid = uid();
    const [, opToken] = await named(server, "operator");
    const first = operator(server, sid, opToken, { onAsk: () => "first" });
    const hellos: Hello[] = [];
    first.onConnect((h) => hellos.push(h));
    const running = first.run();
    await until(() => hellos.length === 1, "the first connection");
    const second = operator(server, sid, opToken, { onAsk: () => "second" });
    await serving(second, [], async () => {
      assert.equal(await running, "replaced");
      const w = server.client((await named(server, "worker"))[1]);
      assert.equal((await w.askOperator(sid, "who?", { timeoutS: 20 })).answer, "second");
    });
  });

  test("a wrong token is the server's ApiError; a server that is down is ServerUnreachable", async () => {
    const sid = uid();
    await assert.rejects(operator(server, sid, "lev_wrong").run(), (e: unknown) => {
      return e instanceof ApiError && e.status === 401;
    });
    const scoped = await server
      .client()
      .createToken(uid("operator"), "operator", { sessions: ["other-*"] });
    await assert.rejects(operator(server, sid, scoped.token as string).run(), (e: unknown) => {
      return e instanceof ApiError && e.status === 403 && e.code === "session_scope";
    });
    const worker = (await named(server, "worker"))[1];
    await assert.rejects(
      operator(server, sid, worker).run(),
      (e: unknown) => e instanceof ApiError && e.status === 403,
    );
    await assert.rejects(
      new Operator(sid, { url: "http://127.0.0.1:9", token: "t" }).run(),
      (e: unknown) => e instanceof ServerUnreachable,
    );
  });

  test("the operator reconnects to a restarted server, and gives up when told to", async () => {
    const s = await Server.start();
    try {
      const sid = uid();
      const [, opToken] = await named(s, "operator");
      const workerToken = (await named(s, "worker"))[1];
      const op = operator(s, sid, opToken, {
        onAsk: (ask) => ({ q: ask.question }),
        giveUpAfterMs: 1500,
      });
      const hellos: Hello[] = [];
      op.onConnect((h) => hellos.push(h));
      const running = op.run().then(
        (v) => v,
        (e: unknown) => e,
      );
      await until(() => hellos.length === 1, "the connection");
      assert.deepEqual(
        (await s.client(workerToken).askOperator(sid, "before", { timeoutS: 20 })).answer,
        { q: "before" },
      );
      await s.stop();
      await until(() => !op.connected, "the drop");
      await s.start();
      await until(() => hellos.length === 2, "the reconnect");
      assert.deepEqual(
        (await s.client(workerToken).askOperator(sid, "after", { timeoutS: 20 })).answer,
        { q: "after" },
      );
      await s.stop();
      assert.ok((await running) instanceof ServerUnreachable);
    } finally {
      await s.close();
    }
  });
});
