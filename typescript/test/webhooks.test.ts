/** A real delivery from `lev serve` to a receiver on loopback verifies; a tampered one does not. */

import assert from "node:assert/strict";
import { createServer, type IncomingHttpHeaders } from "node:http";
import { after, before, test } from "node:test";
import { signWebhook, verifyWebhook, WebhookError } from "../src/index.js";
import { Server, sleep, uid } from "./helpers.js";

let server: Server;
before(async () => {
  server = await Server.start({ extra: ["--webhook-allow", "127.0.0.0/8"] });
});
after(async () => {
  await server?.close();
});

test("a delivery lev signed verifies; a tampered or stale one is refused", async () => {
  const got: { headers: IncomingHttpHeaders; body: Buffer }[] = [];
  const receiver = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      got.push({ headers: req.headers, body: Buffer.concat(chunks) });
      res.writeHead(204).end();
    });
  });
  await new Promise<void>((r) => receiver.listen(0, "127.0.0.1", r));
  try {
    const addr = receiver.address();
    const port = typeof addr === "object" && addr ? addr.port : 0;
    const admin = server.client();
    const hook = await admin.createWebhook(`http://127.0.0.1:${port}/hook`, {
      events: ["interaction.created"],
    });
    const secret = String(hook.secret);
    assert.match(secret, /^whsec_/);
    const sid = uid();
    const worker = server.client(await server.token("worker"));
    await worker.createInteraction({
      session_id: sid,
      kind: { type: "free_text", prompt: "hooked?" },
    });
    const until = Date.now() + 20_000;
    while (got.length === 0 && Date.now() < until) await sleep(50);
    const delivery = got[0];
    assert.ok(delivery, "no delivery");
    const event = verifyWebhook(secret, delivery.headers, delivery.body);
    assert.equal(event.type, "interaction.created");
    const tampered = Buffer.from(delivery.body.toString().replace("hooked?", "hacked!"));
    assert.throws(
      () => verifyWebhook(secret, delivery.headers, tampered),
      (e: unknown) => {
        return e instanceof WebhookError && e.code === "signature";
      },
    );
    assert.throws(
      () =>
        verifyWebhook(secret, delivery.headers, delivery.body, { now: Date.now() / 1000 + 3600 }),
      (e: unknown) => e instanceof WebhookError && e.code === "timestamp",
    );
    // What signWebhook makes is what lev sent.
    const ts = Number(delivery.headers["webhook-timestamp"]);
    assert.ok(
      String(delivery.headers["webhook-signature"]).includes(
        signWebhook(secret, String(delivery.headers["webhook-id"]), ts, delivery.body),
      ),
    );
  } finally {
    receiver.close();
  }
});
