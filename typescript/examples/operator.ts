/**
 * A session's operator (its supervising AI) and a worker asking it.
 *
 * Start `lev demo`, paste the LEV_URL / LEV_TOKEN lines it prints, then
 * (from typescript/, after `npm run build`):
 *
 *     node dist/examples/operator.js
 *
 * The operator answers arithmetic itself, and defers anything else to
 * people: answer that one in the dashboard or with `lev respond`.
 */

import { Client, Defer, Operator, Reject, SpawnOutcome } from "../src/index.js";

const sessionId = process.env.LEV_EXAMPLE_SESSION ?? "ts-operator-example";
const client = new Client();

const op = Operator.fromClient(client, sessionId, {
  onAsk: (ask) => {
    const m = /^(\d+) \* (\d+)\?$/.exec(String(ask.question));
    return m ? Number(m[1]) * Number(m[2]) : new Defer("not arithmetic: a person should say");
  },
  onHook: (hook) => (hook.spawn?.agent === "tests" ? true : new Reject("tests only")),
  onSpawn: (order) => SpawnOutcome.done({ ran: order.spawn.agent, passed: 12 }),
  onConnect: (hello) => console.log(`operator of ${hello.sessionId} connected`),
});
const running = op.run();

await new Promise((r) => setTimeout(r, 500));
console.log("6 * 7? ->", (await client.askOperator(sessionId, "6 * 7?", { timeoutS: 30 })).answer);
console.log(
  "spawn tests ->",
  (await client.spawn(sessionId, { agent: "tests" }, { timeoutS: 30 })).value,
);
console.log("asking something the operator defers; answer it with `lev respond` ...");
const got = await client.askOperator(sessionId, "Ship it today?", { timeoutS: 290 });
console.log(`${got.answered_by} answered:`, got.answer);

op.stop();
await running;
