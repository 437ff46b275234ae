/** The client against a real `lev serve`: routes, typed errors, pages, attachments, events. */

import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { after, before, describe, test } from "node:test";
import {
  ApiError,
  Client,
  type Event,
  type LevError,
  ServerUnreachable,
  TimedOut,
  TrustedKeys,
} from "../src/index.js";
import { answerWhenPending, pendingIn, Server, sleep, uid } from "./helpers.js";

let server: Server;
let worker: Client;
let approver: Client;

before(async () => {
  server = await Server.start();
  worker = server.client(await server.token("worker"));
  approver = server.client(await server.token("approver"));
});
after(async () => {
  await server?.close();
});

describe("client", () => {
  test("health and keys need no token; the keys load as trusted keys", async () => {
    const anon = new Client(server.url, "");
    const health = await anon.health();
    assert.equal(health.status, "ok");
    assert.equal(health.store, "sqlite");
    const keys = TrustedKeys.fromJwks(await anon.keys());
    assert.equal(keys.size, 1);
  });

  test("ask: free text and multiple choice, answered by a person", async () => {
    const sid = uid();
    const answering = answerWhenPending(approver, sid, { value: "staging" });
    assert.equal(await worker.ask("Which database?", { sessionId: sid }), "staging");
    await answering;
    const chose = answerWhenPending(approver, sid, { choice_index: 1 });
    assert.equal(await worker.ask("Deploy?", { sessionId: sid, options: ["no", "yes"] }), "yes");
    await chose;
  });

  test("ask: an expired question is TimedOut", async () => {
    await assert.rejects(worker.ask("anyone?", { sessionId: uid(), timeoutS: 1 }), (e: unknown) => {
      return e instanceof TimedOut && (e.code === "cancelled" || e.code === "expired");
    });
  });

  test("errors carry the server's code, message and status", async () => {
    await assert.rejects(new Client(server.url, "lev_wrong").listInteractions(), (e: unknown) => {
      assert.ok(e instanceof ApiError);
      assert.equal(e.status, 401);
      assert.match(e.code, /^[a-z_]+$/);
      assert.ok(e.message.length > 0);
      return true;
    });
    await assert.rejects(
      worker.getInteraction("ir_nope"),
      (e: unknown) => e instanceof ApiError && e.status === 404,
    );
    await assert.rejects(
      worker.listInteractions(),
      (e: unknown) => e instanceof ApiError && e.status === 403,
    );
    await assert.rejects(
      worker.createInteraction({ session_id: "bad id!", kind: { type: "free_text", prompt: "x" } }),
      (e: unknown) => e instanceof ApiError && e.status === 422,
    );
  });

  test("a server that is down is ServerUnreachable", async () => {
    const down = new Client("http://127.0.0.1:9", "t", { timeoutMs: 2000 });
    await assert.rejects(
      down.health(),
      (e: unknown) => e instanceof ServerUnreachable && e.code === "unreachable",
    );
  });

  test("lists follow next_cursor", async () => {
    const sid = uid();
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) {
      const r = await worker.createInteraction({
        session_id: sid,
        kind: { type: "free_text", prompt: `q${i}` },
      });
      ids.push(r.id);
    }
    const first = await approver.listInteractions({ sessionId: sid, limit: 2 });
    assert.equal(first.items.length, 2);
    assert.ok(first.next_cursor);
    const seen: string[] = [];
    for await (const record of approver.interactions({ sessionId: sid, limit: 2 }))
      seen.push(record.request.id);
    assert.deepEqual([...seen].sort(), [...ids].sort());
    assert.equal(new Set(seen).size, 5);
    const tokens = await server.client().tokens();
    assert.ok(tokens.length >= 2);
    for (const id of ids) await worker.cancel(id);
  });

  test("attachments go as parts; blob() reads the bytes back", async () => {
    const sid = uid();
    const created = await worker.createInteraction({
      session_id: sid,
      kind: { type: "free_text", prompt: "the logs?" },
    });
    const bytes = new Uint8Array([0, 1, 2, 250, 251, 252]);
    const result = await approver.respond(
      created.id,
      { value: "here" },
      {
        attachments: [
          { name: "notes.md", data: "# notes\n" },
          { name: "trace.bin", data: bytes, mediaType: "application/octet-stream" },
        ],
      },
    );
    const parts = result.response.parts ?? [];
    assert.equal(parts.length, 2);
    const [md, bin] = parts;
    assert.equal(md?.media_type, "text/markdown");
    assert.equal(bin?.size, 6);
    assert.equal(bin?.sha256, createHash("sha256").update(bytes).digest("hex"));
    const blob = await worker.blob(bin?.sha256 as string);
    assert.deepEqual(new Uint8Array(await blob.arrayBuffer()), bytes);
    assert.equal(blob.type, "application/octet-stream");
    const got = await worker.getInteraction(created.id);
    assert.equal((got.response?.parts ?? [])[0]?.name, "notes.md");
    // A part on an answer that takes none is the server's 422.
    const choice = await worker.createInteraction({
      session_id: sid,
      kind: { type: "multiple_choice", prompt: "?", options: ["a"] },
    });
    await assert.rejects(
      approver.respond(
        choice.id,
        { choice_index: 0 },
        { attachments: [{ name: "x.txt", data: "x" }] },
      ),
      (e: unknown) => e instanceof ApiError && e.status === 422,
    );
  });

  test("a second answer gets 409 already_answered", async () => {
    const sid = uid();
    const created = await worker.createInteraction({
      session_id: sid,
      kind: { type: "free_text", prompt: "?" },
    });
    await approver.respond(created.id, { value: "first" });
    await assert.rejects(approver.respond(created.id, { value: "second" }), (e: unknown) => {
      return e instanceof ApiError && e.status === 409 && e.code === "already_answered";
    });
  });
});

describe("events", () => {
  test("an async iterator of events, resuming with after", async () => {
    const sid = uid();
    const stream = approver.events();
    await stream.connect();
    const created = await worker.createInteraction({
      session_id: sid,
      kind: { type: "free_text", prompt: "hi" },
    });
    await approver.respond(created.id, { value: "yo" });
    const seen: Event[] = [];
    for await (const ev of stream) {
      if (ev.sessionId !== sid) continue;
      seen.push(ev);
      if (ev.type === "interaction.answered") break;
    }
    assert.deepEqual(
      seen.map((e) => e.type),
      ["interaction.created", "interaction.answered"],
    );
    assert.equal(seen[1]?.interaction?.response?.value, "yo");
    assert.ok((seen[1]?.seq ?? 0) > (seen[0]?.seq ?? 0));
    // Resuming after the first replays the second only.
    const again = approver.events({ after: seen[0]?.seq as number });
    for await (const ev of again) {
      if (ev.sessionId !== sid) continue;
      assert.equal(ev.type, "interaction.answered");
      assert.equal(ev.seq, seen[1]?.seq);
      break;
    }
    assert.ok(again.closed);
  });

  test("a refused stream is an ApiError", async () => {
    await assert.rejects(
      worker.events().connect(),
      (e: unknown) => e instanceof ApiError && e.status === 403,
    );
  });

  test("across a restart of the server: no gap, no repeat", async () => {
    const s = await Server.start();
    try {
      const w = s.client(await s.token("worker"));
      const a = s.client(await s.token("approver"));
      const sid = uid();
      const stream = a.events({ after: 0, backoffMs: [50, 200] });
      const seen: number[] = [];
      const prompts: string[] = [];
      const reading = (async () => {
        for await (const ev of stream) {
          seen.push(ev.seq);
          if (ev.type === "interaction.created" && ev.sessionId === sid) {
            const kind = ev.interaction?.request.kind;
            prompts.push(kind?.type === "free_text" ? kind.prompt : "");
            if (prompts.length === 6) break;
          }
        }
      })();
      for (let i = 0; i < 3; i++) {
        await w.createInteraction({
          session_id: sid,
          kind: { type: "free_text", prompt: `p${i}` },
        });
      }
      while (prompts.length < 3) await sleep(20);
      await s.stop();
      await s.start();
      const w2 = s.client(w.token);
      for (let i = 3; i < 6; i++) {
        await w2.createInteraction({
          session_id: sid,
          kind: { type: "free_text", prompt: `p${i}` },
        });
      }
      await reading;
      assert.deepEqual(prompts, ["p0", "p1", "p2", "p3", "p4", "p5"]);
      assert.equal(new Set(seen).size, seen.length, "an event seen twice");
      for (let i = 1; i < seen.length; i++)
        assert.ok((seen[i] as number) > (seen[i - 1] as number));
    } finally {
      await s.close();
    }
  });

  test("reconnect: false ends the iteration when the server goes", async () => {
    const s = await Server.start();
    try {
      const a = s.client(await s.token("approver"));
      const stream = a.events({ reconnect: false });
      await stream.connect();
      const ending = (async () => {
        try {
          for await (const _ of stream) {
            // nothing comes
          }
          return "ended";
        } catch (e) {
          return (e as LevError).code;
        }
      })();
      await sleep(100);
      await s.stop();
      assert.ok(["ended", "unreachable"].includes(await ending));
    } finally {
      await s.close();
    }
  });

  test("pending interactions can be waited on while events flow", async () => {
    const sid = uid();
    const created = await worker.createInteraction({
      session_id: sid,
      kind: { type: "free_text", prompt: "w" },
    });
    const id = await pendingIn(approver, sid);
    assert.equal(id, created.id);
    const waiting = worker.wait(id, 1);
    assert.equal((await waiting).status, "pending");
    await approver.respond(id, { value: "done" });
    const final = await worker.waitForAnswer(id, 5000);
    assert.equal(final.status, "answered");
    assert.equal(final.response?.value, "done");
  });
});
