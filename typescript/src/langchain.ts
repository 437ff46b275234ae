/**
 * Human-in-the-loop for LangChain.js `createAgent` (and so LangGraph.js)
 * agents, decided through lev; as python's `lev.langgraph`.
 *
 * Configured like LangChain's `humanInTheLoopMiddleware`:
 *
 *     import { createAgent } from "langchain";
 *     import { levHumanInTheLoopMiddleware } from "lev-sdk/langchain";
 *
 *     const agent = createAgent({
 *       model, tools,
 *       middleware: [levHumanInTheLoopMiddleware({
 *         interruptOn: { shell: true, read_file: false,
 *                        send_email: { allowedDecisions: ["approve", "reject"] } },
 *         client,
 *       })],
 *       checkpointer,
 *     });
 *
 * Each gated tool call goes through lev's gate (session and conversation: the
 * graph's `thread_id`; request id: the tool call's id), and the middleware
 * waits inside the run for lev's decision: a person in the dashboard or `lev
 * respond`, the session's operator, a grant or the policy. The signed
 * envelope is verified against the server's pinned keys and checked against
 * the exact call, its nonce is spent, and only then does the tool run, with
 * the edited args when the person edited them (an `edit`). A `reject` reaches
 * the model as the tool's result, with the person's feedback. A decision that
 * does not verify never runs the tool.
 *
 * The gate is idempotent by (session, request id): a graph with a durable
 * checkpointer whose process stops while it waits resumes the same wait
 * (`agent.invoke(null, { configurable: { thread_id } })` in a new process),
 * and never runs a call twice (the nonce is spent).
 */

import { getConfig } from "@langchain/langgraph";
import { createMiddleware, ToolMessage } from "langchain";
import type { Client } from "./client.js";
import { Denied, LevError } from "./errors.js";
import { type ApprovedCall, Gatekeeper, type GatekeeperOptions, levId } from "./gate.js";

export type Decision = "approve" | "edit" | "reject";
export const ALL_DECISIONS: readonly Decision[] = ["approve", "edit", "reject"];

/** Per tool: the decisions allowed, a description for the person, the capabilities the call needs. */
export interface InterruptOnConfig {
  allowedDecisions?: Decision[];
  description?: string;
  requiredCapabilities?: string[];
}

export interface LevHitlOptions
  extends Omit<GatekeeperOptions, "sessionId" | "client" | "conversationId"> {
  /** Per tool name: `true` (every decision), `false` (not gated), or its config. */
  interruptOn: Record<string, boolean | InterruptOnConfig>;
  client: Client;
  /** The lev session; default: the graph's `thread_id`. */
  sessionId?: string;
}

interface ToolCallLike {
  id?: string;
  name: string;
  args: Record<string, unknown>;
}

function threadOf(runtime: unknown): string | undefined {
  const configurable = (runtime as { configurable?: { thread_id?: unknown } } | undefined)
    ?.configurable;
  if (configurable?.thread_id !== undefined) return String(configurable.thread_id);
  try {
    const id = getConfig()?.configurable?.thread_id;
    return id === undefined ? undefined : String(id);
  } catch {
    return undefined;
  }
}

/** The middleware: lev decides each gated tool call; see the module docs. */
export function levHumanInTheLoopMiddleware(opts: LevHitlOptions) {
  const { interruptOn, client, sessionId, ...gk } = opts;
  const config = new Map<string, InterruptOnConfig>();
  for (const [tool, cfg] of Object.entries(interruptOn)) {
    if (cfg === true) config.set(tool, { allowedDecisions: [...ALL_DECISIONS] });
    else if (cfg !== false) config.set(tool, cfg);
  }
  let pinned = gk.keys;

  const message = (call: ToolCallLike, text: string) =>
    new ToolMessage({
      content: text,
      name: call.name,
      tool_call_id: call.id ?? "",
      status: "error",
    });

  return createMiddleware({
    name: "LevHumanInTheLoopMiddleware",
    wrapToolCall: async (request, handler) => {
      const call = request.toolCall as ToolCallLike;
      const cfg = config.get(call.name);
      if (cfg === undefined) return handler(request);
      const allowed = cfg.allowedDecisions?.length ? cfg.allowedDecisions : ALL_DECISIONS;
      const thread = sessionId ?? levId(threadOf(request.runtime) ?? "langgraph");
      const gatekeeper = new Gatekeeper({
        ...gk,
        keys: pinned,
        client,
        sessionId: thread,
        conversationId: thread,
      });
      let approved: ApprovedCall;
      try {
        pinned = pinned ?? (await gatekeeper.keys());
        approved = await gatekeeper.gate({
          requestId: levId(call.id || call.name),
          toolName: call.name,
          args: JSON.stringify(call.args ?? {}),
          ...(cfg.requiredCapabilities ? { requiredCapabilities: cfg.requiredCapabilities } : {}),
          ...(cfg.description !== undefined ? { reason: cfg.description } : {}),
        });
      } catch (e) {
        if (e instanceof Denied) return message(call, e.text);
        if (e instanceof LevError) {
          // Not verified, not authorized, nonce spent, server refused or down: never run.
          return message(
            call,
            `The call to ${call.name} was not run: lev: ${e.code}: ${e.message}`,
          );
        }
        throw e;
      }
      const kind: Decision = approved.wasEdited ? "edit" : "approve";
      if (!allowed.includes(kind)) {
        return message(
          call,
          `The call to ${call.name} was not run: the decision (${kind}) is not allowed for this tool (allowed: ${allowed.join(", ")}).`,
        );
      }
      const result = await handler({
        ...request,
        toolCall: { ...request.toolCall, args: approved.args as Record<string, unknown> },
      });
      if (
        ToolMessage.isInstance(result) &&
        typeof result.content === "string" &&
        (approved.wasEdited || approved.injectedContext)
      ) {
        result.content = approved.toolResultText(result.content);
      }
      return result;
    },
  });
}
