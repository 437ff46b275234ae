/**
 * The operator client (SPEC section 4): a supervising program that answers a
 * session's workers over the WebSocket `/v1/operators/{session}/ws`, as
 * python/lev/operator.py.
 *
 *     const op = new Operator("s-1", { url, token: operatorToken });
 *     op.onAsk(async (ask) => (ask.question === "6 * 7?" ? 42 : new Defer("a person should say")));
 *     op.onHook((hook) => (hook.spawn?.agent === "tests" ? true : new Reject("tests only")));
 *     await op.run();   // until op.stop(), or another connection replaces it
 *
 * What comes in, and what its handler returns:
 * - `ask`: `onAsk(Ask)` returns any JSON value (the answer), or `Defer`;
 * - an `ask` of an interaction to triage: `onTriage(Triage)` (else `onAsk`)
 *   returns an InteractionResponse (the operator decides), or `Defer`;
 * - `hook_before`: `onHook(Hook)` returns `true` (allow), `false` or
 *   `new Reject(reason)`, or `Defer`;
 * - `spawn`: `onSpawn(SpawnOrder)` returns a `SpawnOutcome`, or `Defer`.
 *
 * `Defer` means: a triage is escalated to people at once (`{"escalate":
 * reason}`); an ask or a hook gets no reply, so the server hands it to people
 * after its `--operator-reply-timeout`; a spawn's result is the one the
 * sub-agent posted (`spawn_ack` value `{}`). A handler that throws counts as
 * `Defer`, except for a spawn, which then fails with the error.
 *
 * Each message is handled once: the server sends every unresolved message
 * again (same `req_id`) after a reconnect, and the operator does not call the
 * handler again for one it has handled or is handling; it sends the reply it
 * made again instead (the first may have been lost with the connection), or,
 * for one it deferred, nothing.
 *
 * The WebSocket is the runtime's global `WebSocket` when it can send the
 * `Authorization` header (Node 22's, Bun's, Deno's), else the `ws` package
 * (an optional dependency; Node 20 has no global WebSocket).
 */

import { Client, DEFAULT_URL, seg, USER_AGENT } from "./client.js";
import { ApiError, apiError, FrameRefused, LevError, ServerUnreachable } from "./errors.js";
import type { Interaction, ResponseInput, Task } from "./types.js";

export const REPLACED_CLOSE_CODE = 4000;
/** How often a reply the server could not record (`store_unavailable`) is sent again. */
export const STORE_RETRIES = 5;

/**
 * The operator will not decide this one: people do (an ask, a hook, a triage),
 * or, for a spawn, the sub-agent's posted result is the result. `reason` is
 * noted on a triaged interaction.
 */
export class Defer {
  constructor(readonly reason = "the operator deferred it to people") {}
}

/** Reject a spawn in `onHook`: the worker gets 403 `rejected_by_middleware` with `reason`. */
export class Reject {
  constructor(readonly reason = "") {}
}

/** The result of a spawn, sent as `spawn_ack`. */
export class SpawnOutcome {
  constructor(
    readonly value: unknown = null,
    readonly ok = true,
    readonly error: string | null = null,
  ) {}
  /** Succeeded with `value` (which must not be `{}`: that defers). */
  static done(value: unknown): SpawnOutcome {
    return new SpawnOutcome(value);
  }
  /** Failed with `error`: the worker's spawn gets 502 `spawn_failed`. */
  static failed(error: string): SpawnOutcome {
    return new SpawnOutcome(null, false, error);
  }
}

/** A connection was made: the session, and the `req_id`s the server sends again now. */
export interface Hello {
  sessionId: string;
  pending: string[];
}

/** A worker's question (`POST /v1/sessions/{sid}/ask`), any JSON. */
export interface Ask {
  reqId: string;
  question: unknown;
}

/**
 * An interaction routed to the operator first (`route: ["operator", ...]`):
 * answer it with an InteractionResponse (`{value}`, `{choice_index}`,
 * `{approved: true, ...}`), signed with the operator's token name as the
 * approver, or `new Defer(reason)` to hand it to people.
 */
export interface Triage {
  reqId: string;
  interaction: Interaction;
}

/** A spawn to vet before it runs (`hook_before`). */
export interface Hook {
  reqId: string;
  // biome-ignore lint/suspicious/noExplicitAny: the spawn is any JSON the worker sent
  spawn: any;
}

/**
 * A spawn to run: its task, and the task-scoped token that lets the sub-agent
 * post that task's result, and nothing else.
 */
export class SpawnOrder {
  constructor(
    readonly reqId: string,
    readonly taskId: string,
    readonly taskToken: string,
    // biome-ignore lint/suspicious/noExplicitAny: the spawn is any JSON the worker sent
    readonly spawn: any,
    readonly url: string,
  ) {}

  /** A client with the task's token, for the sub-agent. */
  subAgent(): Client {
    return new Client(this.url, this.taskToken);
  }

  /** `POST /v1/worker/result` with the task's token, as the sub-agent does. */
  postResult(
    value: unknown = null,
    opts: { ok?: boolean; error?: string; outputTail?: string } = {},
  ): Promise<Task> {
    return this.subAgent().workerResult(this.taskId, value, opts);
  }
}

type MaybePromise<T> = T | Promise<T>;
export type AskHandler = (ask: Ask) => MaybePromise<unknown>;
export type TriageHandler = (triage: Triage) => MaybePromise<ResponseInput | Defer>;
export type HookHandler = (hook: Hook) => MaybePromise<boolean | Reject | Defer>;
export type SpawnHandler = (order: SpawnOrder) => MaybePromise<SpawnOutcome | Defer>;
export type ErrorHandler = (error: FrameRefused) => void;
export type ConnectHandler = (hello: Hello) => void;

/** How `run()` ended: `stop()` was called, or another connection replaced this one (close code 4000). */
export type Stopped = "stopped" | "replaced";

/** The part of a WebSocket the operator uses (the WHATWG API, which `ws` also implements). */
export interface WebSocketLike {
  readonly readyState: number;
  send(data: string): void;
  close(code?: number, reason?: string): void;
  addEventListener(type: string, listener: (ev: never) => void): void;
}

/** Makes a WebSocket that sends `headers` on its upgrade. */
export type WebSocketFactory = (
  url: string,
  headers: Record<string, string>,
) => WebSocketLike | Promise<WebSocketLike>;

export interface OperatorOptions {
  /** Default: `LEV_URL`, else http://127.0.0.1:7420. */
  url?: string;
  /** An operator token whose `--sessions` cover the session; default `LEV_TOKEN`. */
  token?: string;
  onAsk?: AskHandler;
  onTriage?: TriageHandler;
  onHook?: HookHandler;
  onSpawn?: SpawnHandler;
  onError?: ErrorHandler;
  onConnect?: ConnectHandler;
  /** First and longest wait between reconnects, in ms (default [100, 10000]); jitter adds up to a quarter. */
  backoffMs?: [number, number];
  /** Give up after this long without a connection, in ms (default: never, once connected). */
  giveUpAfterMs?: number;
  /** How long an upgrade may take, in ms (default 10000). */
  openTimeoutMs?: number;
  /** How many handled `req_id`s to remember (default 1024). */
  remember?: number;
  /** How to open the WebSocket (default: the global one, else the `ws` package). */
  webSocket?: WebSocketFactory;
}

class Dropped extends Error {}

function env(name: string): string | undefined {
  const p = (globalThis as { process?: { env?: Record<string, string | undefined> } }).process;
  return p?.env?.[name];
}

function wsUrl(url: string, sessionId: string): string {
  const m = /^(https?|wss?):\/\/([^/]+)(.*)$/.exec(url);
  if (!m)
    throw new LevError(
      "invalid_url",
      `expected an http(s):// or ws(s):// server url, found ${JSON.stringify(url)}`,
    );
  const scheme = m[1] === "https" || m[1] === "wss" ? "wss" : "ws";
  return `${scheme}://${m[2]}${(m[3] ?? "").replace(/\/+$/, "")}/v1/operators/${seg(sessionId)}/ws`;
}

function httpUrl(url: string): string {
  return url.replace(/^ws:\/\//, "http://").replace(/^wss:\/\//, "https://");
}

function isTriage(question: unknown): question is { interaction: Interaction } {
  if (typeof question !== "object" || question === null || Array.isArray(question)) return false;
  const keys = Object.keys(question);
  const i = (question as { interaction?: unknown }).interaction;
  return (
    keys.length === 1 &&
    typeof i === "object" &&
    i !== null &&
    !Array.isArray(i) &&
    "session_id" in i &&
    "kind" in i
  );
}

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/** JSON text, or throw when the value cannot be sent as JSON. */
function dumps(msg: unknown): string {
  const text = JSON.stringify(msg, (_k, v) => {
    if (typeof v === "number" && !Number.isFinite(v))
      throw new TypeError("a number that is not finite");
    if (typeof v === "bigint") throw new TypeError("a bigint");
    return v;
  });
  if (text === undefined) throw new TypeError("not JSON");
  return text;
}

let wsModule: Promise<unknown> | null = null;

/** The default factory: the global WebSocket (with headers), else `ws`. */
export const defaultWebSocket: WebSocketFactory = async (url, headers) => {
  const Global = (globalThis as { WebSocket?: new (url: string, init?: unknown) => WebSocketLike })
    .WebSocket;
  const isNode =
    typeof (globalThis as { process?: { versions?: { node?: string } } }).process?.versions
      ?.node === "string";
  const isBun = "Bun" in globalThis;
  // Node's own WebSocket (undici, Node 22 and later), Bun's and Deno's take `{ headers }`.
  if (Global !== undefined && (isNode || isBun || "Deno" in globalThis)) {
    return new Global(url, { headers });
  }
  try {
    wsModule ??= import("ws" as string);
    const mod = (await wsModule) as { WebSocket?: unknown; default?: unknown };
    const Ws = (mod.WebSocket ?? mod.default) as new (
      url: string,
      protocols: string[],
      opts: { headers: Record<string, string> },
    ) => WebSocketLike;
    return new Ws(url, [], { headers });
  } catch {
    if (Global !== undefined) return new Global(url, { headers });
    throw new LevError(
      "no_websocket",
      "this runtime has no WebSocket that can send an Authorization header: use Node 22 or later, or install the `ws` package",
    );
  }
};

/**
 * The operator of one session: connects with an operator token, hands each
 * message to its handler, sends the reply, and reconnects with backoff and
 * jitter when the connection drops.
 *
 * `run()` throws `ApiError` (the server's `code` and `message`, and the HTTP
 * status) when the server refuses the connection (a wrong token, 401; a token
 * without the operator role or the session, 403 `session_scope`), and
 * `ServerUnreachable` when the first connection cannot be made, or none could
 * be made again for `giveUpAfterMs`. The server's `error` frames go to
 * `onError` as `FrameRefused`.
 */
export class Operator {
  readonly sessionId: string;
  readonly url: string;
  readonly token: string | undefined;
  readonly wsUrl: string;
  private askHandler: AskHandler | undefined;
  private triageHandler: TriageHandler | undefined;
  private hookHandler: HookHandler | undefined;
  private spawnHandler: SpawnHandler | undefined;
  private errorHandler: ErrorHandler | undefined;
  private connectHandler: ConnectHandler | undefined;
  private readonly firstBackoff: number;
  private readonly maxBackoff: number;
  private readonly giveUpAfterMs: number | undefined;
  private readonly openTimeoutMs: number;
  private readonly rememberN: number;
  private readonly factory: WebSocketFactory;
  /** req_id -> the reply sent (null: deferred, nothing sent), oldest first. */
  private readonly done = new Map<string, string | null>();
  /** req_ids whose handler runs now. */
  private readonly running = new Set<string>();
  /** req_ids whose remembered reply was sent again after a reconnect. */
  private readonly resent = new Set<string>();
  private readonly retries = new Map<string, number>();
  private ws: WebSocketLike | null = null;
  private stopCtl: AbortController | null = null;
  private stopRequested = false;
  private connectedOnce = false;
  private readonly timers = new Set<ReturnType<typeof setTimeout>>();

  constructor(sessionId: string, opts: OperatorOptions = {}) {
    this.sessionId = sessionId;
    this.url = httpUrl((opts.url ?? env("LEV_URL") ?? DEFAULT_URL).replace(/\/+$/, ""));
    this.token = opts.token ?? env("LEV_TOKEN");
    this.wsUrl = wsUrl(this.url, sessionId);
    this.askHandler = opts.onAsk;
    this.triageHandler = opts.onTriage;
    this.hookHandler = opts.onHook;
    this.spawnHandler = opts.onSpawn;
    this.errorHandler = opts.onError;
    this.connectHandler = opts.onConnect;
    const [first, most] = opts.backoffMs ?? [100, 10_000];
    this.firstBackoff = Math.max(first, 10);
    this.maxBackoff = Math.max(most, this.firstBackoff);
    this.giveUpAfterMs = opts.giveUpAfterMs;
    this.openTimeoutMs = opts.openTimeoutMs ?? 10_000;
    this.rememberN = Math.max(opts.remember ?? 1024, 1);
    this.factory = opts.webSocket ?? defaultWebSocket;
  }

  /** An operator with `client`'s server URL and token. */
  static fromClient(client: Client, sessionId: string, opts: OperatorOptions = {}): Operator {
    return new Operator(sessionId, { ...opts, url: client.url, token: client.token });
  }

  onAsk(handler: AskHandler): this {
    this.askHandler = handler;
    return this;
  }
  onTriage(handler: TriageHandler): this {
    this.triageHandler = handler;
    return this;
  }
  onHook(handler: HookHandler): this {
    this.hookHandler = handler;
    return this;
  }
  onSpawn(handler: SpawnHandler): this {
    this.spawnHandler = handler;
    return this;
  }
  onError(handler: ErrorHandler): this {
    this.errorHandler = handler;
    return this;
  }
  onConnect(handler: ConnectHandler): this {
    this.connectHandler = handler;
    return this;
  }

  /** Whether a connection is up now. */
  get connected(): boolean {
    return this.ws !== null;
  }

  /**
   * End `run()`: close the connection (messages still being handled stay
   * unresolved on the server, which sends them to the session's next operator).
   */
  stop(): void {
    this.stopRequested = true;
    this.stopCtl?.abort();
  }

  /**
   * Serve the session until `stop()` (`"stopped"`) or until another
   * connection replaces this one (`"replaced"`), reconnecting with backoff
   * whenever the connection drops.
   */
  async run(): Promise<Stopped> {
    if (this.stopCtl !== null)
      throw new LevError("already_running", "this operator is running already");
    const stopCtl = new AbortController();
    this.stopCtl = stopCtl;
    if (this.stopRequested) stopCtl.abort();
    let backoff = this.firstBackoff;
    let downSince: number | null = null;
    try {
      while (!stopCtl.signal.aborted) {
        try {
          const ended = await this.connection(stopCtl.signal);
          if (ended !== null) return ended;
          backoff = this.firstBackoff;
          downSince = Date.now();
        } catch (e) {
          if (!(e instanceof Dropped)) throw e;
          if (!this.connectedOnce) {
            throw new ServerUnreachable(
              "unreachable",
              `cannot reach lev at ${this.wsUrl}: ${e.message}`,
            );
          }
          const now = Date.now();
          downSince = downSince ?? now;
          if (this.giveUpAfterMs !== undefined && now - downSince > this.giveUpAfterMs) {
            throw new ServerUnreachable(
              "unreachable",
              `no connection to lev at ${this.wsUrl} for ${this.giveUpAfterMs} ms: ${e.message}`,
            );
          }
        }
        const delay = backoff * (1 + Math.random() / 4);
        backoff = Math.min(backoff * 2, this.maxBackoff);
        await new Promise<void>((resolve) => {
          const t = setTimeout(done, delay);
          function done() {
            clearTimeout(t);
            stopCtl.signal.removeEventListener("abort", done);
            resolve();
          }
          stopCtl.signal.addEventListener("abort", done, { once: true });
        });
      }
      return "stopped";
    } finally {
      for (const t of this.timers) clearTimeout(t);
      this.timers.clear();
      this.stopCtl = null;
      this.stopRequested = false;
    }
  }

  /** Why an upgrade failed: the server's refusal (`ApiError`), or a `Dropped` worth another try. */
  private async refusal(reason: string): Promise<Error> {
    try {
      const resp = await fetch(`${this.url}/v1/operators/${seg(this.sessionId)}/ws`, {
        headers: this.headers(),
        signal: AbortSignal.timeout(this.openTimeoutMs),
      });
      const body = await resp.text();
      if (resp.status >= 400 && resp.status < 500 && resp.status !== 400 && resp.status !== 429) {
        return apiError(resp.status, body, resp.statusText);
      }
    } catch {
      // unreachable: a drop
    }
    return new Dropped(reason);
  }

  private headers(): Record<string, string> {
    const h: Record<string, string> = { "User-Agent": USER_AGENT };
    if (this.token) h.Authorization = `Bearer ${this.token}`;
    return h;
  }

  /** One connection, until it ends: how `run` ends, or null when it dropped. */
  private async connection(stop: AbortSignal): Promise<Stopped | null> {
    let ws: WebSocketLike;
    try {
      ws = await this.factory(this.wsUrl, this.headers());
    } catch (e) {
      if (e instanceof LevError) throw e;
      throw new Dropped(e instanceof Error ? e.message : String(e));
    }
    // Every listener is attached now, before the upgrade completes: a frame
    // that arrives with the upgrade's response is delivered in the same tick
    // as `open`, and must find its listener.
    let opened = false;
    const outcome = await new Promise<Stopped | null | { failed: string }>((resolve) => {
      let done = false;
      const timer = setTimeout(
        () => finish({ failed: `no upgrade within ${this.openTimeoutMs} ms` }),
        this.openTimeoutMs,
      );
      const finish = (how: Stopped | null | { failed: string }) => {
        if (done) return;
        done = true;
        clearTimeout(timer);
        stop.removeEventListener("abort", onStop);
        if (this.ws === ws) this.ws = null;
        resolve(how);
      };
      const onStop = () => {
        try {
          ws.close(1000, "the operator stopped");
        } catch {
          // closing already
        }
        finish("stopped");
      };
      ws.addEventListener("open", () => {
        if (done) return;
        opened = true;
        clearTimeout(timer);
        this.connectedOnce = true;
        this.ws = ws;
        this.resent.clear();
      });
      ws.addEventListener("message", (ev: { data: unknown }) => {
        if (!done && typeof ev.data === "string") this.received(ev.data);
      });
      ws.addEventListener("error", (ev: { message?: string }) => {
        if (!opened)
          finish({ failed: `the WebSocket failed${ev?.message ? `: ${ev.message}` : ""}` });
      });
      ws.addEventListener("close", (ev: { code?: number }) => {
        if (!opened) finish({ failed: `closed before it opened (${ev?.code})` });
        else finish(ev?.code === REPLACED_CLOSE_CODE ? "replaced" : null);
      });
      if (stop.aborted) onStop();
      else stop.addEventListener("abort", onStop, { once: true });
    });
    if (outcome !== null && typeof outcome === "object") {
      try {
        ws.close();
      } catch {
        // not open
      }
      throw await this.refusal(outcome.failed);
    }
    return outcome;
  }

  // ---- messages ----

  private received(text: string): void {
    let msg: unknown;
    try {
      msg = JSON.parse(text);
    } catch {
      return;
    }
    if (!isPlainObject(msg)) return;
    const kind = msg.type;
    if (kind === "hello") {
      const pending = Array.isArray(msg.pending) ? msg.pending.map(String) : [];
      this.guard(() =>
        this.connectHandler?.({
          sessionId: typeof msg.session_id === "string" ? msg.session_id : this.sessionId,
          pending,
        }),
      );
    } else if (kind === "error") {
      const reqId = typeof msg.req_id === "string" ? msg.req_id : undefined;
      const err = new FrameRefused(String(msg.code ?? "error"), String(msg.message ?? ""), reqId);
      // The reply sent again had reached the server before the drop.
      if (err.code === "already_resolved" && reqId !== undefined && this.resent.has(reqId)) return;
      // The server could not record the reply and asks for it again.
      if (err.code === "store_unavailable" && reqId !== undefined) this.sendAgainLater(reqId);
      this.guard(() => this.errorHandler?.(err));
    } else if (kind === "ask" || kind === "hook_before" || kind === "spawn") {
      this.dispatch(msg);
    }
    // A kind this SDK does not know (a newer server) expects no reply from us.
  }

  private guard(f: () => void): void {
    try {
      f();
    } catch {
      // a callback's own failure must not take the connection down
    }
  }

  /** Start the handler for `msg`, unless its req_id was handled or is running. */
  private dispatch(msg: Record<string, unknown>): void {
    const reqId = msg.req_id;
    if (typeof reqId !== "string") return;
    if (this.done.has(reqId)) {
      const reply = this.done.get(reqId);
      if (reply !== null && reply !== undefined) {
        this.resent.add(reqId);
        this.send(reply);
      }
      return;
    }
    if (this.running.has(reqId)) return;
    this.running.add(reqId);
    void this.handle(reqId, msg);
  }

  private async handle(reqId: string, msg: Record<string, unknown>): Promise<void> {
    let reply: string | null;
    try {
      reply = await this.reply(reqId, msg);
    } catch {
      reply = null;
    } finally {
      this.running.delete(reqId);
    }
    this.done.set(reqId, reply);
    while (this.done.size > this.rememberN) {
      const oldest = this.done.keys().next().value as string;
      this.done.delete(oldest);
      this.retries.delete(oldest);
    }
    if (reply !== null) this.send(reply);
  }

  /** The reply to send for `msg` (null: none, the operator defers). */
  private async reply(reqId: string, msg: Record<string, unknown>): Promise<string | null> {
    const kind = msg.type;
    if (kind === "ask") {
      const q = msg.question;
      if (isTriage(q)) return this.triage(reqId, q.interaction);
      const value = await this.runHandler(this.askHandler, { reqId, question: q });
      if (value instanceof Defer) return null;
      return dumps({ type: "answer", req_id: reqId, value: value === undefined ? null : value });
    }
    if (kind === "hook_before") {
      const decision = await this.runHandler(this.hookHandler, { reqId, spawn: msg.spawn });
      if (decision instanceof Defer) return null;
      if (decision instanceof Reject) {
        const reply: Record<string, unknown> = { type: "hook_ack", req_id: reqId, ok: false };
        if (decision.reason) reply.reason = decision.reason;
        return dumps(reply);
      }
      if (typeof decision === "boolean")
        return dumps({ type: "hook_ack", req_id: reqId, ok: decision });
      // Anything else: people decide.
      return null;
    }
    return this.spawn(reqId, msg);
  }

  private async triage(reqId: string, interaction: Interaction): Promise<string> {
    const answer =
      this.triageHandler !== undefined
        ? await this.runHandler(this.triageHandler, { reqId, interaction })
        : await this.runHandler(this.askHandler, { reqId, question: { interaction } });
    let value: unknown;
    if (answer instanceof Defer) value = { escalate: answer.reason };
    else if (isPlainObject(answer)) value = answer;
    else {
      value = {
        escalate: `the operator's triage answer was not an InteractionResponse: ${String(JSON.stringify(answer)).slice(0, 200)}`,
      };
    }
    try {
      return dumps({ type: "answer", req_id: reqId, value });
    } catch (e) {
      return dumps({
        type: "answer",
        req_id: reqId,
        value: { escalate: `the operator's triage answer is not JSON: ${(e as Error).message}` },
      });
    }
  }

  private async spawn(reqId: string, msg: Record<string, unknown>): Promise<string> {
    const { task_id: taskId, task_token: taskToken } = msg;
    let outcome: SpawnOutcome;
    if (typeof taskId !== "string" || typeof taskToken !== "string") {
      outcome = SpawnOutcome.failed("the spawn frame had no task_id or task_token");
    } else if (this.spawnHandler === undefined) {
      outcome = SpawnOutcome.failed(`the operator of session ${this.sessionId} runs no spawns`);
    } else {
      const order = new SpawnOrder(reqId, taskId, taskToken, msg.spawn, this.url);
      let result: unknown;
      try {
        result = await this.spawnHandler(order);
      } catch (e) {
        result = SpawnOutcome.failed(
          `the operator's spawn handler failed: ${e instanceof Error ? `${e.name}: ${e.message}` : String(e)}`,
        );
      }
      if (result instanceof Defer) outcome = new SpawnOutcome({});
      else if (result instanceof SpawnOutcome) outcome = result;
      else {
        outcome = SpawnOutcome.failed(
          `the operator's spawn handler returned ${typeof result}, expected SpawnOutcome or Defer`,
        );
      }
    }
    const reply: Record<string, unknown> = {
      type: "spawn_ack",
      req_id: reqId,
      value: outcome.value === undefined ? null : outcome.value,
      ok: outcome.ok,
    };
    if (outcome.error !== null) reply.error = outcome.error;
    try {
      return dumps(reply);
    } catch (e) {
      return dumps({
        type: "spawn_ack",
        req_id: reqId,
        value: null,
        ok: false,
        error: `the spawn's result is not JSON: ${(e as Error).message}`,
      });
    }
  }

  /** The handler's value; `Defer` without a handler, when it throws, or when its value is not JSON. */
  private async runHandler<A>(
    handler: ((arg: A) => unknown) | undefined,
    arg: A,
  ): Promise<unknown> {
    if (handler === undefined) return new Defer();
    try {
      const value = await handler(arg);
      if (!(value instanceof Defer) && !(value instanceof Reject)) dumps({ v: value ?? null });
      return value;
    } catch {
      return new Defer("the operator's handler failed");
    }
  }

  private sendAgainLater(reqId: string): void {
    const reply = this.done.get(reqId);
    const tries = this.retries.get(reqId) ?? 0;
    if (reply === null || reply === undefined || tries >= STORE_RETRIES) return;
    this.retries.set(reqId, tries + 1);
    const t = setTimeout(
      () => {
        this.timers.delete(t);
        this.send(reply);
      },
      this.firstBackoff * 2 ** tries,
    );
    this.timers.add(t);
  }

  /**
   * Send on the connection up now. Without one, or when the send fails, the
   * reply is kept: the server sends the message again after the reconnect,
   * and the reply goes out then.
   */
  private send(text: string): void {
    const ws = this.ws;
    if (ws === null || ws.readyState !== 1) return;
    try {
      ws.send(text);
    } catch {
      // the connection is going: the reply goes out after the reconnect
    }
  }
}

export { ApiError };
