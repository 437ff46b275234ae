/**
 * Tool approvals of the Vercel AI SDK (`ai`, v6), decided through lev.
 *
 *     import { generateText } from "ai";
 *     import { LevApprovals } from "lev-sdk/ai";
 *
 *     const lev = new LevApprovals({ client, sessionId: "chat-1", caller: "alice" });
 *     const tools = lev.tools({ shell });          // needsApproval: true, execute guarded
 *     const { result } = await lev.run((messages) => generateText({ model, tools, messages }), [
 *       { role: "user", content: "clean up the build dir" },
 *     ]);
 *
 * `lev.tools()` marks each tool `needsApproval`, so the AI SDK stops at each
 * call with a `tool-approval-request`. `lev.decide(result)` gates every such
 * call through lev (request id: the tool call's id; args: the call's input as
 * JSON), waits for the decision (a person, the session's operator, a grant or
 * the policy), verifies the signed envelope against the server's pinned keys,
 * checks the exact call and its context, spends the nonce, and answers with
 * the tool message of `tool-approval-response`s to append. A denial's text
 * (with the person's feedback) is the response's `reason`, which the AI SDK
 * gives the model as the denied call's result. `lev.run()` loops
 * generate / decide until no approval is pending.
 *
 * The guarded `execute` runs a call only when lev approved that very tool
 * call, and with the args lev verified: the person's edit when they edited
 * (the SDK would run the model's proposed input), never anything else. An
 * approval response that did not come from `decide` (one forged, or one
 * whose envelope did not verify) finds no verified call and the tool throws
 * instead of running. `ai` is an optional peer dependency: only its types are
 * used here.
 */

import type { ModelMessage, Tool, ToolApprovalResponse, ToolExecutionOptions, ToolSet } from "ai";
import { Denied, LevError } from "./errors.js";
import { type ApprovedCall, Gatekeeper, type GatekeeperOptions, levId } from "./gate.js";

export { levId };

/** Per tool: the capabilities the call needs (on top of the policy's), and what the person reads. */
export interface GateConfig {
  requiredCapabilities?: string[];
  description?: string;
}

export interface LevApprovalsOptions extends Omit<GatekeeperOptions, "sessionId"> {
  /** The lev session (and, unless `conversationId` is given, conversation) of the chat. */
  sessionId: string;
  /** The tools lev gates, by name (default: every tool given to `tools()`). */
  gate?: Record<string, boolean | GateConfig>;
}

/** A step's result as `generateText` gives it: what `decide` reads. */
export interface StepResult {
  content: ReadonlyArray<{ type: string }>;
  response: { messages: ReadonlyArray<ModelMessage> };
}

interface ApprovalRequestPart {
  type: "tool-approval-request";
  approvalId: string;
  toolCall: { toolCallId: string; toolName: string; input: unknown };
}

/** The tool approvals of one chat, decided through lev; see the module docs. */
export class LevApprovals {
  readonly gatekeeper: Gatekeeper;
  private readonly gated: Record<string, boolean | GateConfig> | undefined;
  /** toolCallId -> the verified call, until the tool runs it (once). */
  private readonly approved = new Map<string, ApprovedCall>();

  constructor(opts: LevApprovalsOptions) {
    const { gate, ...rest } = opts;
    this.gatekeeper = new Gatekeeper({ ...rest, sessionId: levId(opts.sessionId) });
    this.gated = gate;
  }

  private config(name: string): GateConfig | null {
    if (this.gated === undefined) return {};
    const c = this.gated[name];
    if (c === undefined || c === false) return null;
    return c === true ? {} : c;
  }

  /**
   * The tools, each gated one with `needsApproval: true` and an `execute`
   * that runs only a call lev approved, with the args lev verified.
   */
  tools<T extends ToolSet>(tools: T): T {
    const out: Record<string, Tool> = {};
    for (const [name, tool] of Object.entries(tools)) {
      if (this.config(name) === null) {
        out[name] = tool;
        continue;
      }
      const execute = tool.execute;
      out[name] = {
        ...tool,
        needsApproval: true,
        ...(execute === undefined
          ? {}
          : {
              execute: async (_input: unknown, options: ToolExecutionOptions) => {
                const call = this.approved.get(options.toolCallId);
                if (call === undefined || call.verified.toolName !== name) {
                  throw new LevError(
                    "not_approved",
                    `lev did not approve the call ${options.toolCallId} to ${name}: it was not run`,
                  );
                }
                this.approved.delete(options.toolCallId);
                const output = await execute(call.args as never, options);
                if (typeof output === "string" && (call.wasEdited || call.injectedContext)) {
                  return call.toolResultText(output);
                }
                return output;
              },
            }),
      } as Tool;
    }
    return out as T;
  }

  /** Decide one approval request through lev: the response to send. */
  async decideOne(
    request: ApprovalRequestPart,
    signal?: AbortSignal,
  ): Promise<ToolApprovalResponse> {
    const { toolCallId, toolName, input } = request.toolCall;
    const cfg = this.config(toolName) ?? {};
    try {
      const call = await this.gatekeeper.gate({
        requestId: levId(toolCallId || toolName),
        toolName,
        args: JSON.stringify(input ?? {}),
        ...(cfg.requiredCapabilities ? { requiredCapabilities: cfg.requiredCapabilities } : {}),
        ...(cfg.description !== undefined ? { reason: cfg.description } : {}),
        ...(signal ? { signal } : {}),
      });
      this.approved.set(toolCallId, call);
      return { type: "tool-approval-response", approvalId: request.approvalId, approved: true };
    } catch (e) {
      if (e instanceof Denied) {
        return {
          type: "tool-approval-response",
          approvalId: request.approvalId,
          approved: false,
          reason: e.text,
        };
      }
      if (e instanceof LevError) {
        // Not verified, not authorized, nonce spent, server refused or down: never run.
        return {
          type: "tool-approval-response",
          approvalId: request.approvalId,
          approved: false,
          reason: `The call to ${toolName} was not run: lev: ${e.code}: ${e.message}`,
        };
      }
      throw e;
    }
  }

  /** The approval requests of a step's result. */
  static requests(result: Pick<StepResult, "content">): ApprovalRequestPart[] {
    return result.content.filter(
      (p) => p.type === "tool-approval-request",
    ) as unknown as ApprovalRequestPart[];
  }

  /**
   * Decide every approval request of `result` through lev: the tool message
   * of approval responses to append after `result.response.messages`
   * (null when there is none).
   */
  async decide(
    result: Pick<StepResult, "content">,
    signal?: AbortSignal,
  ): Promise<ModelMessage | null> {
    const requests = LevApprovals.requests(result);
    if (requests.length === 0) return null;
    const content: ToolApprovalResponse[] = [];
    for (const r of requests) content.push(await this.decideOne(r, signal));
    return { role: "tool", content };
  }

  /**
   * Generate, decide the approvals through lev, generate again with the
   * responses, until a step asks for none: the last step's result, and the
   * whole conversation (`messages`, to continue it).
   */
  async run<R extends StepResult>(
    generate: (messages: ModelMessage[]) => PromiseLike<R>,
    messages: ModelMessage[],
    opts: { maxRounds?: number; signal?: AbortSignal } = {},
  ): Promise<{ result: R; messages: ModelMessage[] }> {
    const history = [...messages];
    const rounds = opts.maxRounds ?? 32;
    for (let i = 0; i <= rounds; i++) {
      const result = await generate([...history]);
      history.push(...result.response.messages);
      const answer = await this.decide(result, opts.signal);
      if (answer === null) return { result, messages: history };
      history.push(answer);
    }
    throw new LevError("too_many_rounds", `still asking for approvals after ${rounds} rounds`);
  }
}
