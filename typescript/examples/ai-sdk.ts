/**
 * The Vercel AI SDK with lev deciding its tool approvals. The model here is
 * the AI SDK's own mock (no API key needed): it calls `shell` once, then
 * reports what it read. Swap in a real model to use it for real.
 *
 * Start `lev demo`, paste the LEV_URL / LEV_TOKEN lines it prints, then
 * (from typescript/, after `npm run build`):
 *
 *     node dist/examples/ai-sdk.js
 *
 * Approve, edit (`--edit-args '{"argv":["ls","-la"]}'`) or deny with feedback
 * in the dashboard or with `lev respond`.
 */

import { execFileSync } from "node:child_process";
import { generateText, tool } from "ai";
import { MockLanguageModelV3 } from "ai/test";
import { z } from "zod";
import { LevApprovals } from "../src/ai.js";
import { Client } from "../src/index.js";

const usage = {
  inputTokens: { total: 1, noCache: 1, cacheRead: 0, cacheWrite: 0 },
  outputTokens: { total: 1, text: 1, reasoning: 0 },
};
let turn = 0;
const model = new MockLanguageModelV3({
  doGenerate: async (options) => {
    turn += 1;
    if (turn === 1) {
      return {
        content: [
          {
            type: "tool-call",
            toolCallId: `call-${Date.now()}`,
            toolName: "shell",
            input: '{"argv":["ls"]}',
          },
        ],
        finishReason: { unified: "tool-calls", raw: undefined },
        usage,
        warnings: [],
      };
    }
    return {
      content: [
        { type: "text", text: `The tool said: ${JSON.stringify(options.prompt.at(-1)?.content)}` },
      ],
      finishReason: { unified: "stop", raw: undefined },
      usage,
      warnings: [],
    };
  },
});

const shell = tool({
  description: "run a command",
  inputSchema: z.object({ argv: z.array(z.string()) }),
  execute: async ({ argv }) => execFileSync(argv[0] as string, argv.slice(1), { encoding: "utf8" }),
});

const lev = new LevApprovals({
  client: new Client(),
  sessionId: process.env.LEV_EXAMPLE_SESSION ?? "ts-ai-sdk-example",
  sandboxMode: "danger-full-access",
});
const tools = lev.tools({ shell });
console.log("the model wants to run `ls`; decide it in the dashboard or with `lev respond`");
const { result } = await lev.run(
  (messages) => generateText({ model, tools, messages }),
  [{ role: "user", content: "What is in this directory?" }],
);
console.log(result.text);
