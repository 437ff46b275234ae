// The official MCP TypeScript SDK's client (@modelcontextprotocol/sdk, the
// version the pinned reference servers are built on, from
// LEV_TEST_MCP_SERVERS's node_modules) through `lev mcp proxy`.
//
// Usage: node mcp_ts_client.mjs -- COMMAND ARGS...
// It connects over stdio, then prints one JSON object per line:
//   {"event":"ready","server":NAME}, {"event":"tools","names":[...]},
//   and for each call of CALLS (below) {"event":"result","id":ID,
//   "is_error":b,"texts":[...]} or {"event":"error","id":ID,"error":...}.
// The calls run one after another: echo (a rule allows it), get-sum
// (asked: the test approves it), get-sum again (asked: the test denies it).
import path from "node:path";
import { pathToFileURL } from "node:url";

const root = process.env.LEV_TEST_MCP_SERVERS;
if (!root) {
  console.error("LEV_TEST_MCP_SERVERS is not set");
  process.exit(2);
}
const sdk = path.join(root, "node_modules/@modelcontextprotocol/sdk/dist/esm");
const { Client } = await import(pathToFileURL(path.join(sdk, "client/index.js")).href);
const { StdioClientTransport } = await import(
  pathToFileURL(path.join(sdk, "client/stdio.js")).href
);

const sep = process.argv.indexOf("--");
const [command, ...args] = process.argv.slice(sep + 1);
const say = (event) => process.stdout.write(`${JSON.stringify(event)}\n`);

const transport = new StdioClientTransport({ command, args, env: process.env, stderr: "inherit" });
const client = new Client({ name: "lev-ts-test-client", version: "1.0.0" });
await client.connect(transport);
say({ event: "ready", server: client.getServerVersion()?.name });
const { tools } = await client.listTools();
say({ event: "tools", names: tools.map((t) => t.name) });

const calls = [
  ["echo", "echo", { message: "from typescript" }],
  ["sum", "get-sum", { a: 20, b: 22 }],
  ["denied", "get-sum", { a: 1, b: 1 }],
];
for (const [id, name, callArgs] of calls) {
  try {
    const result = await client.callTool({ name, arguments: callArgs }, undefined, {
      timeout: 120_000,
    });
    say({
      event: "result",
      id,
      is_error: result.isError === true,
      texts: (result.content ?? []).filter((c) => c.type === "text").map((c) => c.text),
    });
  } catch (e) {
    say({ event: "error", id, error: String(e) });
  }
}
await client.close();
