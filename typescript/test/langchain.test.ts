/**
 * LangChain.js `createAgent` with its own fake model and lev's
 * human-in-the-loop middleware: approve, edit and reject through lev, a
 * decision that does not verify, and a LangGraph graph with a checkpointer
 * that survives a restart of its Node process while it waits.
 */

import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { after, before, describe, test } from "node:test";
import { fileURLToPath } from "node:url";
import { MemorySaver } from "@langchain/langgraph";
import { AIMessage, type BaseMessage, createAgent, fakeModel, tool } from "langchain";
import { z } from "zod";
import type { Client } from "../src/index.js";
import { type InterruptOnConfig, levHumanInTheLoopMiddleware } from "../src/langchain.js";
import { answerWhenPending, pendingIn, Server, sleep, uid } from "./helpers.js";

let server: Server;
let worker: Client;
let workerToken: string;
let approver: Client;

before(async () => {
  server = await Server.start();
  workerToken = await server.token("worker");
  worker = server.client(workerToken);
  approver = server.client(await server.token("approver"));
});
after(async () => {
  await server?.close();
});

function agentFor(
  runs: string[][],
  cfg: boolean | InterruptOnConfig = true,
  extra: { keys?: string } = {},
) {
  const shell = tool(
    async ({ argv }: { argv: string[] }) => {
      runs.push(argv);
      return `ran ${argv.join(" ")}`;
    },
    {
      name: "shell",
      description: "run a command",
      schema: z.object({ argv: z.array(z.string()) }),
    },
  );
  const model = fakeModel()
    .respondWithTools([{ name: "shell", args: { argv: ["rm", "-rf", "build"] }, id: "call_1" }])
    .respond(
      (messages: BaseMessage[]) => new AIMessage(`I read: ${String(messages.at(-1)?.content)}`),
    );
  const agent = createAgent({
    model,
    tools: [shell],
    middleware: [
      levHumanInTheLoopMiddleware({ interruptOn: { shell: cfg }, client: worker, ...extra }),
    ],
    checkpointer: new MemorySaver(),
  });
  return { agent, model };
}

async function invoke(
  agent: ReturnType<typeof agentFor>["agent"],
  thread: string,
): Promise<string> {
  const result = await agent.invoke(
    { messages: [{ role: "user", content: "clean" }] },
    { configurable: { thread_id: thread } },
  );
  return String(result.messages.at(-1)?.content);
}

describe("LangChain human-in-the-loop", () => {
  test("approve: the tool runs with the proposed args", async () => {
    const thread = uid("t");
    const runs: string[][] = [];
    const { agent } = agentFor(runs);
    const answering = answerWhenPending(approver, thread, { approved: true });
    const text = await invoke(agent, thread);
    await answering;
    assert.deepEqual(runs, [["rm", "-rf", "build"]]);
    assert.match(text, /ran rm -rf build/);
    const item = (await approver.listInteractions({ status: "all", sessionId: thread })).items[0];
    assert.equal(item?.request.conversation_id, thread);
  });

  test("edit: the tool runs with the edited, signed args", async () => {
    const thread = uid("t");
    const runs: string[][] = [];
    const { agent } = agentFor(runs);
    const answering = answerWhenPending(approver, thread, {
      approved: true,
      modified_args_json: '{"argv":["make","clean"]}',
      injected_context: "keep the cache",
    });
    const text = await invoke(agent, thread);
    await answering;
    assert.deepEqual(runs, [["make", "clean"]]);
    assert.match(text, /keep the cache/);
    assert.match(text, /ran make clean/);
  });

  test("reject: the feedback reaches the model, the tool does not run", async () => {
    const thread = uid("t");
    const runs: string[][] = [];
    const { agent } = agentFor(runs);
    const answering = answerWhenPending(approver, thread, {
      approved: false,
      feedback: "use make clean",
    });
    const text = await invoke(agent, thread);
    await answering;
    assert.deepEqual(runs, []);
    assert.match(text, /Feedback: use make clean/);
  });

  test("an edit where only approve and reject are allowed does not run", async () => {
    const thread = uid("t");
    const runs: string[][] = [];
    const { agent } = agentFor(runs, { allowedDecisions: ["approve", "reject"] });
    const answering = answerWhenPending(approver, thread, {
      approved: true,
      modified_args_json: '{"argv":["ls"]}',
    });
    const text = await invoke(agent, thread);
    await answering;
    assert.deepEqual(runs, []);
    assert.match(text, /decision \(edit\) is not allowed/);
  });

  test("a decision that does not verify never runs the tool", async () => {
    const thread = uid("t");
    const runs: string[][] = [];
    const { agent } = agentFor(runs, true, { keys: "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo" });
    const answering = answerWhenPending(approver, thread, { approved: true });
    const text = await invoke(agent, thread);
    await answering;
    assert.deepEqual(runs, []);
    assert.match(text, /not run: lev: untrusted_key/);
  });

  test("a tool not in interruptOn runs without lev", async () => {
    const runs: string[][] = [];
    const { agent } = agentFor(runs, false);
    const text = await invoke(agent, uid("t"));
    assert.deepEqual(runs, [["rm", "-rf", "build"]]);
    assert.match(text, /ran rm -rf build/);
  });
});

const CHILD = join(dirname(fileURLToPath(import.meta.url)), "fixtures", "langgraph-child.js");

function child(mode: "start" | "resume", env: Record<string, string>) {
  const proc = spawn(process.execPath, [CHILD], {
    env: { ...process.env, ...env, MODE: mode },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  let err = "";
  proc.stdout.setEncoding("utf8").on("data", (c: string) => {
    out += c;
  });
  proc.stderr.setEncoding("utf8").on("data", (c: string) => {
    err += c;
  });
  const exited = new Promise<number | null>((resolve) => proc.on("exit", (code) => resolve(code)));
  return { proc, exited, out: () => out, err: () => err };
}

describe("LangGraph checkpointer across a restart", () => {
  test("the process dies while it waits; a new one resumes the same wait, and the tool runs once", async () => {
    const dir = mkdtempSync(join(tmpdir(), "lev-ts-lg-"));
    try {
      const thread = uid("t");
      const env = {
        LEV_URL: server.url,
        LEV_TOKEN: workerToken,
        THREAD: thread,
        STATE_FILE: join(dir, "checkpoints.json"),
        RUNS_FILE: join(dir, "runs.txt"),
      };
      const first = child("start", env);
      const iid = await pendingIn(approver, thread, 30_000);
      await sleep(200); // the graph waits inside the tool call
      first.proc.kill("SIGKILL");
      await first.exited;
      assert.ok(existsSync(env.STATE_FILE), `no checkpoint was written: ${first.err()}`);
      assert.equal(existsSync(env.RUNS_FILE), false);

      const second = child("resume", env);
      await sleep(500);
      // Still the one interaction: the resumed call waits on it, nothing new asked.
      const all = await approver.listInteractions({ status: "all", sessionId: thread });
      assert.equal(all.items.length, 1);
      await approver.respond(iid, {
        approved: true,
        modified_args_json: '{"argv":["make","deploy","--dry-run"]}',
      });
      const code = await second.exited;
      assert.equal(code, 0, second.err());
      assert.match(second.out(), /ran make deploy --dry-run/);
      assert.deepEqual(readFileSync(env.RUNS_FILE, "utf8").trim().split("\n"), [
        '["make","deploy","--dry-run"]',
      ]);

      // Resuming again finds the call done: nothing runs twice.
      const third = child("resume", env);
      await third.exited;
      assert.deepEqual(readFileSync(env.RUNS_FILE, "utf8").trim().split("\n"), [
        '["make","deploy","--dry-run"]',
      ]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
