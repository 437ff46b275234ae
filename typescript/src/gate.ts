/**
 * The gate helper for a tool executor (SPEC sections 5 and 6), as
 * python/lev/_gate.py and crates/lev-client/src/gate.rs.
 *
 * Gate the call, wait for a person when the gate asks, verify the signed
 * decision against pinned keys, check that it authorizes exactly this call in
 * this context (and, for the tools `requireSignedVotes` names, that enough
 * people signed their votes with their own keys), spend its nonce, and only
 * then hand over the args to run. The args come only from an `ApprovedCall`,
 * made only after every check passed; a refusal is thrown as `Denied`, with
 * the text the model reads.
 */

import type { Client } from "./client.js";
import { ApiError, Denied, LevError, NonceSpent, TimedOut } from "./errors.js";
import type { GateRequest, GateResult, Interaction, Response, WaitResult } from "./types.js";
import { type Clock, TrustedKeys, type VerifiedResponse, verifyEnvelope } from "./verify.js";
import { PeopleKeys, type PeopleKeysInput, requireSignedVotes } from "./votes.js";

export const INTERNAL_OPEN =
  '<internal source="approver" note="context added by the person who approved this call; not output of the tool">';
export const INTERNAL_CLOSE = "</internal>";

/** A call that passed every check. Run it with `args` (or `argsJson`). */
export class ApprovedCall {
  constructor(
    readonly verified: VerifiedResponse,
    readonly response: Response | null = null,
  ) {}

  /** The args to run: the approver's edit when there is one, else the proposed args. */
  get argsJson(): string {
    return this.verified.resolveApprovedCall();
  }

  get args(): unknown {
    return JSON.parse(this.argsJson);
  }

  get wasEdited(): boolean {
    return this.verified.modifiedArgsJson !== "";
  }

  get injectedContext(): string | null {
    const c = this.verified.injectedContext;
    return c.trim() ? c : null;
  }

  get approver(): string {
    return this.verified.approver;
  }

  /**
   * What the model reads after the tool ran: injected context first (marked
   * internal), a note when the person edited the args, then the output.
   */
  toolResultText(output: string): string {
    const blocks: string[] = [];
    if (this.injectedContext)
      blocks.push(`${INTERNAL_OPEN}\n${this.injectedContext}\n${INTERNAL_CLOSE}`);
    if (this.wasEdited) {
      blocks.push(
        `The person edited the arguments before approving; the call ran with: ${this.verified.modifiedArgsJson}`,
      );
    }
    blocks.push(output);
    return blocks.join("\n\n");
  }
}

function policyDenial(tool: string, reason: string): Denied {
  let text = `The call to ${tool} was denied by lev's policy; it was not run.`;
  if (reason.trim()) text += `\nReason: ${reason.trim()}`;
  return new Denied("policy", text);
}

/** The `Denied` of a final wait result that is not an approval. */
export function refusal(tool: string, record: Interaction | null, result: WaitResult): Denied {
  if (result.status === "expired") {
    return new Denied(
      "expired",
      `The call to ${tool} was denied: nobody approved it in time. It was not run.`,
    );
  }
  if (result.status === "cancelled") {
    return new Denied(
      "cancelled",
      `The approval request for ${tool} was cancelled before anyone decided; the call was not run.`,
    );
  }
  const response = result.response;
  const blocks: string[] = [];
  const context = response?.injected_context ?? "";
  if (context.trim()) blocks.push(`${INTERNAL_OPEN}\n${context}\n${INTERNAL_CLOSE}`);
  const kind = record?.kind;
  const options =
    kind && (kind.type === "tool_approval" || kind.type === "multiple_choice")
      ? (kind.options ?? [])
      : [];
  const index = response?.choice_index;
  if (index !== undefined && index !== null && index >= 0 && index < options.length) {
    blocks.push(`The person chose: ${options[index]}`);
  }
  let text = `The person denied the call to ${tool}; it was not run.`;
  const feedback = (response?.feedback ?? "").trim() || undefined;
  if (feedback) text += `\nFeedback: ${feedback}`;
  blocks.push(text);
  return new Denied("denied", blocks.join("\n\n"), feedback);
}

function timedOut(tool: string, waitedMs: number): Denied {
  return new Denied(
    "timed_out",
    `Nobody decided on the call to ${tool} within ${Math.floor(waitedMs / 1000)} s; it was not run.`,
  );
}

/** `text` as a lev identifier: 1 to 128 of `A-Z a-z 0-9 . _ : -` (others become `_`). */
export function levId(text: string): string {
  const out = text.replace(/[^A-Za-z0-9._:-]/g, "_").slice(0, 128);
  return out || "_";
}

/** A tool-name glob as lev's policy reads one: `*` any run, `?` one character. */
export function glob(pattern: string): RegExp {
  const body = [...pattern]
    .map((c) => (c === "*" ? ".*" : c === "?" ? "." : c.replace(/[.*+?^${}()|[\]\\/-]/g, "\\$&")))
    .join("");
  return new RegExp(`^${body}$`, "s");
}

export interface GatekeeperOptions {
  client: Client;
  sessionId: string;
  caller?: string | undefined;
  /** Default: the session id. */
  conversationId?: string | undefined;
  sandboxMode?: string | undefined;
  /** The server's keys; default: `GET /v1/keys`, pinned on first use. */
  keys?: TrustedKeys | Record<string, unknown> | string | undefined;
  /** The interaction's lifetime on the server when the gate asks a person. */
  timeoutS?: number | undefined;
  route?: string[] | undefined;
  /** The clock envelopes are checked against (default: now). */
  now?: Clock | (() => Clock) | undefined;
  /** Glob of tool names -> how many people's own signed votes a decision needs. */
  requireSignedVotes?: Record<string, number> | undefined;
  /** People's keys; default: `GET /v1/people/keys`, pinned on first need. */
  peopleKeys?: PeopleKeysInput | undefined;
}

export interface GateCall {
  requestId: string;
  toolName: string;
  /** The exact args text, or a value (sent as compact JSON). */
  args: string | unknown;
  requiredCapabilities?: string[];
  turnId?: string;
  /** Why the agent wants this (shown to the person). */
  reason?: string;
  /** Stops waiting (the call is then refused: `Denied` `timed_out`). */
  signal?: AbortSignal;
}

/**
 * Gates tool calls through lev and verifies their decisions against pinned keys:
 * `new Gatekeeper({ client, sessionId, caller, conversationId, sandboxMode }).gate({ requestId, toolName, args })`.
 *
 * `requireSignedVotes: {"deploy*": 2}` also requires, for a tool matching a
 * glob, that many distinct people's own signed votes to verify under their
 * keys and bind the call; fewer throw `NotEnoughVotes` and the call does not run.
 */
export class Gatekeeper {
  readonly client: Client;
  readonly sessionId: string;
  readonly caller: string | undefined;
  readonly conversationId: string;
  readonly sandboxMode: string;
  readonly timeoutS: number | undefined;
  readonly route: string[] | undefined;
  private pinned: TrustedKeys | null;
  private people: PeopleKeys | null;
  private readonly now: GatekeeperOptions["now"];
  private readonly voteGlobs: [RegExp, number][];

  constructor(opts: GatekeeperOptions) {
    this.client = opts.client;
    this.sessionId = opts.sessionId;
    this.caller = opts.caller || undefined;
    this.conversationId = opts.conversationId ?? opts.sessionId;
    this.sandboxMode = opts.sandboxMode ?? "";
    this.timeoutS = opts.timeoutS;
    this.route = opts.route;
    this.now = opts.now;
    this.pinned =
      opts.keys === undefined
        ? null
        : opts.keys instanceof TrustedKeys
          ? opts.keys
          : TrustedKeys.fromJwks(opts.keys);
    this.people =
      opts.peopleKeys === undefined
        ? null
        : opts.peopleKeys instanceof PeopleKeys
          ? opts.peopleKeys
          : new PeopleKeys(opts.peopleKeys);
    this.voteGlobs = Object.entries(opts.requireSignedVotes ?? {}).map(([pattern, n]) => {
      if (!Number.isInteger(n) || n < 0) {
        throw new TypeError(
          `requireSignedVotes[${JSON.stringify(pattern)}] must be an integer, 0 or more`,
        );
      }
      return [glob(pattern), n];
    });
  }

  /** The server's keys (pinned on first use). */
  async keys(): Promise<TrustedKeys> {
    if (this.pinned === null) this.pinned = TrustedKeys.fromJwks(await this.client.keys());
    return this.pinned;
  }

  /** People's keys votes are checked with (pinned on first use). */
  async peopleKeys(): Promise<PeopleKeys> {
    if (this.people === null) this.people = new PeopleKeys(await this.client.peopleKeys());
    return this.people;
  }

  /** How many people's signed votes a decision on `toolName` needs. */
  votesNeeded(toolName: string): number {
    return Math.max(0, ...this.voteGlobs.filter(([g]) => g.test(toolName)).map(([, n]) => n));
  }

  /** The body of `POST /v1/gate` for a call. */
  request(call: GateCall): GateRequest {
    const argsJson = typeof call.args === "string" ? call.args : JSON.stringify(call.args);
    if (argsJson === undefined) throw new TypeError("args: not JSON");
    const body: GateRequest = {
      session_id: this.sessionId,
      conversation_id: this.conversationId,
      turn_id: call.turnId ?? "",
      request_id: call.requestId,
      caller: this.caller ?? "",
      tool_name: call.toolName,
      args_json: argsJson,
      sandbox_mode: this.sandboxMode,
      required_capabilities: [...(call.requiredCapabilities ?? [])],
    };
    if (this.timeoutS !== undefined) body.timeout_s = this.timeoutS;
    if (this.route !== undefined) body.route = [...this.route];
    if (call.reason !== undefined) body.reason = call.reason;
    return body;
  }

  /** `POST /v1/gate` only: the call's body and the gate's first answer. */
  async submit(call: GateCall): Promise<[GateRequest, GateResult]> {
    const body = this.request(call);
    return [body, await this.client.gate(body)];
  }

  /** Gate, wait, verify, check, spend: the approved call, or `Denied` (or another `LevError`). */
  async gate(call: GateCall): Promise<ApprovedCall> {
    const keys = await this.keys();
    const [body, first] = await this.submit(call);
    return this.settle(body, first, keys, call.signal);
  }

  /** After `submit`: wait for the decision when the gate asked, and check it. */
  async settle(
    body: GateRequest,
    first: GateResult,
    keys?: TrustedKeys,
    signal?: AbortSignal,
  ): Promise<ApprovedCall> {
    const trusted = keys ?? (await this.keys());
    if (first.decision === "deny") throw policyDenial(body.tool_name, first.reason ?? "");
    if (first.decision === "allow") return this.approve(body, first.approval, null, trusted);
    if (first.decision !== "ask" || typeof first.interaction_id !== "string") {
      throw new LevError(
        "bad_response",
        `the gate answered ${JSON.stringify(first).slice(0, 200)}`,
      );
    }
    const iid = first.interaction_id;
    const started = Date.now();
    let result: WaitResult;
    try {
      const deadline = this.timeoutS === undefined ? undefined : (this.timeoutS + 2) * 1000;
      result = await this.client.waitForAnswer(iid, deadline, signal);
    } catch (e) {
      if (e instanceof TimedOut) throw timedOut(body.tool_name, Date.now() - started);
      throw e;
    }
    const response = result.response;
    if (result.status === "answered" && response?.approved) {
      return this.approve(body, result.approval ?? null, response, trusted);
    }
    const record =
      result.status === "answered" ? (await this.client.getInteraction(iid)).request : null;
    throw refusal(body.tool_name, record, result);
  }

  /** Verify the envelope against the call and this context; throws when it does not authorize it. */
  async check(body: GateRequest, envelope: unknown, keys?: TrustedKeys): Promise<VerifiedResponse> {
    const now = typeof this.now === "function" ? this.now() : this.now;
    const verified = verifyEnvelope(envelope, keys ?? (await this.keys()), now);
    verified.checkCall(body.request_id, body.tool_name, body.args_json, {
      conversationId: this.conversationId,
      caller: this.caller,
      sandboxMode: this.sandboxMode,
    });
    const needed = this.votesNeeded(body.tool_name);
    if (needed > 0) requireSignedVotes(verified, await this.peopleKeys(), needed);
    return verified;
  }

  private async approve(
    body: GateRequest,
    envelope: unknown,
    response: Response | null,
    keys: TrustedKeys,
  ): Promise<ApprovedCall> {
    if (envelope === null || envelope === undefined) {
      throw new LevError(
        "no_approval",
        "the server approved the call without a signed approval; refusing to run it",
      );
    }
    const verified = await this.check(body, envelope, keys);
    try {
      await this.client.consumeNonce(verified.nonce);
    } catch (e) {
      if (e instanceof ApiError && e.code === "nonce_spent") throw new NonceSpent();
      throw e;
    }
    return new ApprovedCall(verified, response);
  }
}
