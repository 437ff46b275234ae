/**
 * Tool approvals of the OpenAI Agents SDK for JavaScript (`@openai/agents`),
 * decided through lev, as python's `lev.openai_agents.run`.
 *
 *     import { run } from "lev-sdk/openai-agents";
 *     const result = await run(agent, "clean up the build dir", { client, sessionId: "s-1" });
 *
 * Runs the agent; every approval interruption (a tool with `needsApproval`)
 * goes through lev's gate: a person, the session's operator, a grant or the
 * policy decides. The signed envelope is verified against the server's pinned
 * keys and checked against the exact call (the tool call's id, name and
 * argument text) before the call is approved on the run's state, and its nonce
 * is spent; then the run resumes from that state. A rejection sends the
 * denial's text, with the person's feedback, to the model as the tool's
 * result. An approval with edited args is not run as proposed: the Agents SDK
 * approves a call with its own arguments only, so the model is told the
 * edited args and calls the tool again (which lev gates again).
 *
 * `input` may also be a `RunState` (one serialized while it waited, and
 * restored with `RunState.fromString`): its pending interruptions are decided
 * the same way, and the gate being idempotent by (session, call id), a
 * decision already made is found again rather than asked twice.
 */

import {
  type Agent,
  type AgentInputItem,
  type NonStreamRunOptions,
  type RunResult,
  RunState,
  type RunToolApprovalItem,
  run as runAgent,
} from "@openai/agents";
import { Denied, LevError } from "./errors.js";
import { Gatekeeper, type GatekeeperOptions, levId } from "./gate.js";

export interface LevRunOptions<TContext> extends Omit<GatekeeperOptions, "sessionId"> {
  /** Default `openai-agents`. */
  sessionId?: string;
  /** Rounds of approvals before giving up (default 32). */
  maxRounds?: number;
  /** What the Agents SDK's own `run` takes (context, maxTurns, ...). */
  // biome-ignore lint/suspicious/noExplicitAny: any agent's options
  runOptions?: NonStreamRunOptions<TContext, Agent<TContext, any>>;
}

/** The call an approval item stands for: its id, tool name and exact argument text. */
export function callOf(item: RunToolApprovalItem): { callId: string; name: string; args: string } {
  const raw = item.rawItem as { callId?: string; id?: string; name?: string; arguments?: unknown };
  const callId = String(raw.callId ?? raw.id ?? "");
  const name = String(item.name ?? raw.name ?? "");
  const args =
    typeof raw.arguments === "string" ? raw.arguments : JSON.stringify(raw.arguments ?? {});
  return { callId, name, args };
}

/** Decide one interruption through lev, on `state`. */
export async function decide(
  gatekeeper: Gatekeeper,
  // biome-ignore lint/suspicious/noExplicitAny: a state of any agent
  state: RunState<any, Agent<any, any>>,
  item: RunToolApprovalItem,
): Promise<"approved" | "rejected"> {
  const { callId, name, args } = callOf(item);
  let approved: Awaited<ReturnType<Gatekeeper["gate"]>>;
  try {
    approved = await gatekeeper.gate({ requestId: levId(callId || name), toolName: name, args });
  } catch (e) {
    if (e instanceof Denied) {
      state.reject(item, { message: e.text });
      return "rejected";
    }
    if (e instanceof LevError) {
      // Not verified, not authorized, nonce spent, server refused or down: never run.
      state.reject(item, {
        message: `The call to ${name} was not run: lev: ${e.code}: ${e.message}`,
      });
      return "rejected";
    }
    throw e;
  }
  if (approved.wasEdited) {
    // The Agents SDK binds an approval to the call's own arguments and
    // cannot run an edited call: the edit goes back to the model.
    state.reject(item, {
      message:
        `The person approved the call to ${name} only with edited arguments: ${approved.argsJson}. ` +
        `It was not run as proposed; call ${name} again with these arguments.`,
    });
    return "rejected";
  }
  state.approve(item);
  return "approved";
}

/** The Agents SDK's `run`, with each approval interruption resolved through lev: the final result. */
export async function run<TContext = undefined>(
  // biome-ignore lint/suspicious/noExplicitAny: any agent, as the Agents SDK's own `run` takes
  agent: Agent<TContext, any>,
  // biome-ignore lint/suspicious/noExplicitAny: a state of any agent
  input: string | AgentInputItem[] | RunState<TContext, any>,
  opts: LevRunOptions<TContext>,
  // biome-ignore lint/suspicious/noExplicitAny: the agent's own result type
): Promise<RunResult<TContext, any>> {
  const { maxRounds = 32, runOptions, sessionId = "openai-agents", ...gk } = opts;
  const gatekeeper = new Gatekeeper({
    ...gk,
    sessionId: levId(sessionId),
    ...(gk.conversationId !== undefined ? { conversationId: levId(gk.conversationId) } : {}),
  });
  // biome-ignore lint/suspicious/noExplicitAny: forwarded as given
  const options = (runOptions ?? {}) as any;
  // biome-ignore lint/suspicious/noExplicitAny: the agent's own state type
  let state: RunState<TContext, any> | null = input instanceof RunState ? input : null;
  // biome-ignore lint/suspicious/noExplicitAny: the agent's own result type
  let result: RunResult<TContext, any> | null = null;
  if (state === null) result = await runAgent(agent, input as string | AgentInputItem[], options);
  for (let i = 0; i <= maxRounds; i++) {
    const pending = result !== null ? result.interruptions : (state?.getInterruptions() ?? []);
    if (result !== null && pending.length === 0) return result;
    state = result !== null ? result.state : state;
    if (state === null) throw new LevError("no_state", "the run has no state to resume");
    for (const item of pending) {
      if (item.type !== "tool_approval_item") continue;
      await decide(gatekeeper, state, item);
    }
    result = await runAgent(agent, state, options);
  }
  throw new LevError("too_many_rounds", `still interrupted after ${maxRounds} rounds of approvals`);
}
