/**
 * The OpenAI Agents SDK for JavaScript (`@openai/agents`) with a scripted
 * model of its own `Model` interface (no network): approval interruptions
 * approved or rejected through lev, and the run resumed from its state.
 */

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import {
  Agent,
  type Model,
  type ModelRequest,
  type ModelResponse,
  RunState,
  run as runAgent,
  setTracingDisabled,
  tool,
  Usage,
} from "@openai/agents";
import { z } from "zod";
import type { Client } from "../src/index.js";
import { run } from "../src/openai-agents.js";
import { answerWhenPending, Server, uid } from "./helpers.js";

setTracingDisabled(true);

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

/** Calls `shell` once, then says what it read back. */
class ScriptedModel implements Model {
  readonly calls: ModelRequest[] = [];
  constructor(private readonly args: unknown) {}
  async getResponse(request: ModelRequest): Promise<ModelResponse> {
    this.calls.push(request);
    if (this.calls.length === 1) {
      return {
        usage: new Usage(),
        output: [
          {
            type: "function_call",
            id: "fc_1",
            callId: "call_1",
            name: "shell",
            arguments: JSON.stringify(this.args),
            status: "completed",
          },
        ],
      };
    }
    const input = JSON.stringify(request.input);
    return {
      usage: new Usage(),
      output: [
        {
          type: "message",
          role: "assistant",
          status: "completed",
          content: [{ type: "output_text", text: `I read: ${input}` }],
        },
      ],
    };
  }
  // biome-ignore lint/correctness/useYield: the tests do not stream
  async *getStreamedResponse(): AsyncIterable<never> {
    throw new Error("not streamed in these tests");
  }
}

function agent(model: Model, runs: string[][]) {
  const shell = tool({
    name: "shell",
    description: "run a command",
    parameters: z.object({ argv: z.array(z.string()) }),
    needsApproval: true,
    execute: async ({ argv }) => {
      runs.push(argv);
      return `ran ${argv.join(" ")}`;
    },
  });
  return new Agent({ name: "ops", instructions: "help", model, tools: [shell] });
}

describe("OpenAI Agents SDK", () => {
  test("an interruption a person approves runs, and the run finishes", async () => {
    const sid = uid();
    const runs: string[][] = [];
    const model = new ScriptedModel({ argv: ["ls", "-la"] });
    const answering = answerWhenPending(approver, sid, { approved: true });
    const result = await run(agent(model, runs), "list files", { client: worker, sessionId: sid });
    await answering;
    assert.deepEqual(runs, [["ls", "-la"]]);
    assert.match(String(result.finalOutput), /ran ls -la/);
    const item = (await approver.listInteractions({ status: "all", sessionId: sid })).items[0];
    assert.equal(
      item?.request.kind.type === "tool_approval" ? item.request.kind.args_json : "",
      '{"argv":["ls","-la"]}',
    );
  });

  test("a rejection's feedback reaches the model, and the tool does not run", async () => {
    const sid = uid();
    const runs: string[][] = [];
    const model = new ScriptedModel({ argv: ["rm", "-rf", "build"] });
    const answering = answerWhenPending(approver, sid, {
      approved: false,
      feedback: "use make clean",
    });
    const result = await run(agent(model, runs), "clean", { client: worker, sessionId: sid });
    await answering;
    assert.deepEqual(runs, []);
    assert.match(JSON.stringify(model.calls[1]?.input), /Feedback: use make clean/);
    assert.match(String(result.finalOutput), /denied/);
  });

  test("an edit is not run as proposed: the model is told the edited args", async () => {
    const sid = uid();
    const runs: string[][] = [];
    const model = new ScriptedModel({ argv: ["rm", "-rf", "build"] });
    const answering = answerWhenPending(approver, sid, {
      approved: true,
      modified_args_json: '{"argv":["make","clean"]}',
    });
    await run(agent(model, runs), "clean", { client: worker, sessionId: sid });
    await answering;
    assert.deepEqual(runs, []);
    assert.match(JSON.stringify(model.calls[1]?.input), /edited arguments/);
  });

  test("a decision that does not verify is a rejection", async () => {
    const sid = uid();
    const runs: string[][] = [];
    const answering = answerWhenPending(approver, sid, { approved: true });
    const model = new ScriptedModel({ argv: ["ls"] });
    await run(agent(model, runs), "list", {
      client: worker,
      sessionId: sid,
      keys: "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo",
    });
    await answering;
    assert.deepEqual(runs, []);
    assert.match(JSON.stringify(model.calls[1]?.input), /not run: lev: untrusted_key/);
  });

  test("a serialized state, restored, is resumed through lev", async () => {
    const sid = uid();
    const runs: string[][] = [];
    const model = new ScriptedModel({ argv: ["ls"] });
    const a = agent(model, runs);
    const first = await runAgent(a, "list");
    assert.equal(first.interruptions.length, 1);
    const saved = first.state.toString();
    const restored = await RunState.fromString(a, saved);
    const answering = answerWhenPending(approver, sid, { approved: true });
    const result = await run(a, restored, { client: worker, sessionId: sid });
    await answering;
    assert.deepEqual(runs, [["ls"]]);
    assert.match(String(result.finalOutput), /ran ls/);
  });
});
