/**
 * Ask a question and gate a tool call through lev, then run the approved args.
 *
 * Start `lev demo` and paste the LEV_URL / LEV_TOKEN lines it prints, then
 * (from typescript/, after `npm run build`):
 *
 *     node dist/examples/ask-and-gate.js
 *
 * Answer in the dashboard, or with `lev respond ID ...` in another terminal.
 */

import { execFileSync } from "node:child_process";
import { randomUUID } from "node:crypto";
import { Client, Denied, Gatekeeper } from "../src/index.js";

const client = new Client(); // LEV_URL and LEV_TOKEN from the environment
const sessionId = process.env.LEV_EXAMPLE_SESSION ?? "ts-example";

console.log("asking; answer in the dashboard or with `lev respond`");
const answer = await client.ask("Which directory should I list?", { sessionId });
console.log("the person answered:", answer);

const gatekeeper = new Gatekeeper({ client, sessionId, sandboxMode: "workspace-write" });
try {
  const call = await gatekeeper.gate({
    requestId: `call-${randomUUID().slice(0, 8)}`,
    toolName: "shell",
    args: { argv: ["ls", answer || "."], cwd: "." },
  });
  // Verified, checked against this call, nonce spent: run what was approved
  // (the person's edit when they edited it).
  const { argv } = call.args as { argv: string[] };
  const out = execFileSync(argv[0] as string, argv.slice(1), { encoding: "utf8" });
  console.log(call.toolResultText(out));
} catch (e) {
  if (!(e instanceof Denied)) throw e;
  console.log(e.text); // what the model would read, the person's feedback included
}
