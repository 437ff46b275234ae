/**
 * `Client`: every route of SPEC section 3, on `fetch` (Node 20 and later,
 * Bun, Deno, edge runtimes: nothing Node-only here).
 *
 * Errors are `ApiError` (the server's `code` and `message`, and the HTTP
 * status), `ServerUnreachable` (no answer), or `LevError("bad_response")`.
 */

import { encodeBase64url } from "./bytes.js";
import { ApiError, apiError, Denied, LevError, ServerUnreachable, TimedOut } from "./errors.js";
import { EventStream, type EventsOptions } from "./events.js";
import { type Attachment, inboundParts } from "./parts.js";
import type {
  AskResult,
  AuditPage,
  GateRequest,
  GateResult,
  Grant,
  Health,
  Interaction,
  InteractionRecord,
  InteractionRequest,
  InteractionStatus,
  Jwks,
  Page,
  PeopleJwks,
  PersonJwk,
  PersonKeyRegistered,
  RespondResult,
  ResponseInput,
  Role,
  SpawnResult,
  Task,
  TaskStatus,
  TokenInfo,
  WaitResult,
} from "./types.js";

export const DEFAULT_URL = "http://127.0.0.1:7420";
/** Longest single long-poll the server allows. */
export const MAX_WAIT_S = 300;
/** The most pages read to gather a whole list. */
export const MAX_PAGES = 10_000;

export const USER_AGENT = "lev-sdk-typescript/0.1";

function env(name: string): string | undefined {
  // `process` exists on Node, Bun and Deno (compat); not on every edge runtime.
  const p = (globalThis as { process?: { env?: Record<string, string | undefined> } }).process;
  return p?.env?.[name];
}

/** A path segment, percent-encoded (ids are `A-Z a-z 0-9 . _ : -`, but be safe). */
export function seg(s: string): string {
  return encodeURIComponent(s).replace(/%3A/gi, ":");
}

export interface ClientOptions {
  /** Per-request timeout in ms (default 30000); long polls get their own wait plus 15 s. */
  timeoutMs?: number;
  /** The `fetch` to use (default: the global one). */
  fetch?: typeof fetch;
  /** Extra headers for every request. */
  headers?: Record<string, string>;
}

interface Req {
  method: string;
  path: string;
  body?: unknown;
  params?: Record<string, string | number | boolean | null | undefined>;
  timeoutMs?: number;
  raw?: boolean;
}

export interface AskOptions {
  sessionId?: string;
  options?: string[];
  title?: string;
  timeoutS?: number;
  conversationId?: string;
  caller?: string;
  route?: string[];
  id?: string;
}

export interface ListOptions {
  status?: InteractionStatus | "all";
  sessionId?: string;
  limit?: number;
  cursor?: string;
}

export interface TaskListOptions {
  status?: TaskStatus;
  sessionId?: string;
  limit?: number;
  cursor?: string;
}

function clean<T extends Record<string, unknown>>(d: T): Partial<T> {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(d)) if (v !== undefined && v !== null) out[k] = v;
  return out as Partial<T>;
}

function randomHex(bytes: number): string {
  const raw = new Uint8Array(bytes);
  crypto.getRandomValues(raw);
  return [...raw].map((b) => b.toString(16).padStart(2, "0")).join("");
}

/** The InteractionRequest `ask` creates: free text, or a multiple choice with `options`. */
export function question(prompt: string, opts: AskOptions = {}): InteractionRequest {
  const kind: InteractionRequest["kind"] =
    opts.options !== undefined
      ? { type: "multiple_choice", prompt, options: [...opts.options] }
      : { type: "free_text", prompt };
  return clean({
    id: opts.id ?? `ts-${randomHex(16)}`,
    session_id: opts.sessionId ?? "ts",
    conversation_id: opts.conversationId,
    caller: opts.caller,
    title: opts.title,
    kind,
    timeout_s: opts.timeoutS,
    route: opts.route,
  }) as InteractionRequest;
}

/** The text of a final wait result; throws for an expired or cancelled question, or a denial. */
export function answerOf(record: Interaction, result: WaitResult): string {
  if (result.status === "expired") {
    throw new TimedOut("expired", "nobody answered in time; the question expired");
  }
  if (result.status === "cancelled") {
    throw new TimedOut("cancelled", "the question was cancelled before anyone answered it");
  }
  const response = result.response;
  const kind = record.kind;
  const index = response?.choice_index;
  if (kind.type === "multiple_choice" && index !== undefined && index !== null) {
    const options = kind.options;
    return index >= 0 && index < options.length ? String(options[index]) : `option #${index + 1}`;
  }
  if (kind.type === "tool_approval") {
    if (response?.approved) return "approved";
    const feedback = (response?.feedback ?? "").trim();
    throw new Denied("denied", "the person denied the call", feedback || undefined);
  }
  return response?.value ?? "";
}

/** A client of one lev server: `new Client(url, token)`. */
export class Client {
  readonly url: string;
  readonly token: string | undefined;
  readonly timeoutMs: number;
  private readonly fetchFn: typeof fetch;
  private readonly extraHeaders: Record<string, string>;

  /** `url` and `token` default to `LEV_URL` and `LEV_TOKEN` (where the runtime has an environment). */
  constructor(url?: string, token?: string, opts: ClientOptions = {}) {
    this.url = (url ?? env("LEV_URL") ?? DEFAULT_URL).replace(/\/+$/, "");
    this.token = token ?? env("LEV_TOKEN");
    this.timeoutMs = opts.timeoutMs ?? 30_000;
    this.fetchFn = opts.fetch ?? globalThis.fetch.bind(globalThis);
    this.extraHeaders = { ...(opts.headers ?? {}) };
  }

  headers(): Record<string, string> {
    const h: Record<string, string> = {
      Accept: "application/json",
      "User-Agent": USER_AGENT,
      ...this.extraHeaders,
    };
    if (this.token) h.Authorization = `Bearer ${this.token}`;
    return h;
  }

  private async send<T>(req: Req): Promise<T> {
    let url = `${this.url}${req.path}`;
    if (req.params) {
      const q = new URLSearchParams();
      for (const [k, v] of Object.entries(req.params)) {
        if (v !== undefined && v !== null) q.set(k, String(v));
      }
      const s = q.toString();
      if (s) url += `?${s}`;
    }
    const headers = this.headers();
    if (req.body !== undefined) headers["Content-Type"] = "application/json";
    const timeoutMs = req.timeoutMs ?? this.timeoutMs;
    const ctl = new AbortController();
    const timer = setTimeout(
      () => ctl.abort(new Error(`no answer within ${timeoutMs} ms`)),
      timeoutMs,
    );
    let resp: globalThis.Response;
    let body: Uint8Array;
    try {
      resp = await this.fetchFn(url, {
        method: req.method,
        headers,
        body: req.body === undefined ? null : JSON.stringify(req.body),
        signal: ctl.signal,
      });
      body = new Uint8Array(await resp.arrayBuffer());
    } catch (e) {
      throw new ServerUnreachable(
        "unreachable",
        `cannot reach lev at ${this.url}: ${describe(e, ctl.signal)}`,
      );
    } finally {
      clearTimeout(timer);
    }
    if (resp.status >= 400) {
      throw apiError(resp.status, new TextDecoder().decode(body), resp.statusText);
    }
    if (req.raw) {
      return new Blob([body as BlobPart], {
        type: resp.headers.get("content-type") ?? "application/octet-stream",
      }) as T;
    }
    if (body.length === 0) return undefined as T;
    try {
      return JSON.parse(new TextDecoder().decode(body)) as T;
    } catch {
      throw new LevError(
        "bad_response",
        `the server's answer to ${req.method} ${req.path} is not JSON`,
      );
    }
  }

  /** Every item of a list, page after page (following `next_cursor`). */
  private async all<T>(req: Req): Promise<T[]> {
    const items: T[] = [];
    for await (const item of this.pages<T>(req)) items.push(item);
    return items;
  }

  /** The items of a list, page after page, as an async iterator. */
  private async *pages<T>(req: Req): AsyncGenerator<T, void, undefined> {
    let params = { ...(req.params ?? {}) };
    for (let n = 0; n < MAX_PAGES; n++) {
      const page = await this.send<Page<T>>({ ...req, params });
      if (typeof page !== "object" || page === null || !Array.isArray(page.items)) {
        throw new LevError(
          "bad_response",
          `the server's answer to ${req.method} ${req.path} is not a page`,
        );
      }
      yield* page.items;
      const cursor = page.next_cursor;
      if (!cursor) return;
      if (params.cursor === cursor) {
        throw new LevError("bad_response", `${req.path}: the same next_cursor ${cursor} again`);
      }
      params = { ...params, cursor };
    }
    throw new LevError("bad_response", `${req.path}: more than ${MAX_PAGES} pages`);
  }

  // ---- routes ----

  /** `GET /v1/health` (no token needed). */
  health(): Promise<Health> {
    return this.send({ method: "GET", path: "/v1/health" });
  }

  /** `GET /v1/keys`: the server's trusted public keys, a JWKS (no token needed). */
  keys(): Promise<Jwks> {
    return this.send({ method: "GET", path: "/v1/keys" });
  }

  /** `GET /v1/openapi.json` (no token needed). */
  openapi(): Promise<Record<string, unknown>> {
    return this.send({ method: "GET", path: "/v1/openapi.json" });
  }

  /** `POST /v1/interactions` (worker): the stored request. */
  createInteraction(request: InteractionRequest): Promise<Interaction> {
    return this.send({ method: "POST", path: "/v1/interactions", body: request });
  }

  /** `GET /v1/interactions` (approver): one page, newest first. */
  listInteractions(opts: ListOptions = {}): Promise<Page<InteractionRecord>> {
    return this.send({
      method: "GET",
      path: "/v1/interactions",
      params: {
        status: opts.status,
        session_id: opts.sessionId,
        limit: opts.limit,
        cursor: opts.cursor,
      },
    });
  }

  /** Every interaction (of `status`, default pending; of `sessionId`), page after page. */
  interactions(
    opts: Omit<ListOptions, "cursor"> = {},
  ): AsyncGenerator<InteractionRecord, void, undefined> {
    return this.pages({
      method: "GET",
      path: "/v1/interactions",
      params: { status: opts.status, session_id: opts.sessionId, limit: opts.limit },
    });
  }

  /** `GET /v1/interactions/{id}`: the request, its response and its signed approval. */
  getInteraction(id: string): Promise<InteractionRecord> {
    return this.send({ method: "GET", path: `/v1/interactions/${seg(id)}` });
  }

  /** One long poll (1 to 300 s): `{status: "pending"}` when the time is up. */
  wait(id: string, timeoutS = 30): Promise<WaitResult> {
    const t = Math.min(Math.max(Math.trunc(timeoutS), 1), MAX_WAIT_S);
    return this.send({
      method: "GET",
      path: `/v1/interactions/${seg(id)}/wait`,
      params: { timeout_s: t },
      timeoutMs: (t + 15) * 1000,
    });
  }

  /**
   * Long-poll until the interaction is answered, expired or cancelled;
   * `TimedOut` past `timeoutMs` (undefined: for ever).
   */
  async waitForAnswer(id: string, timeoutMs?: number, signal?: AbortSignal): Promise<WaitResult> {
    const until = timeoutMs === undefined ? undefined : Date.now() + timeoutMs;
    for (;;) {
      if (signal?.aborted) throw new TimedOut("aborted", `stopped waiting for ${id}`);
      const left = until === undefined ? MAX_WAIT_S : Math.floor((until - Date.now()) / 1000);
      if (left <= 0)
        throw new TimedOut("timed_out", `nobody answered ${id} within ${timeoutMs} ms`);
      const result = await this.wait(id, Math.min(left, 60));
      if (result.status !== "pending") return result;
    }
  }

  /**
   * `POST /v1/interactions/{id}/respond` (approver). `attachments` go with a
   * text answer as its `parts`; the result's parts are the stored ones
   * (`name`, `media_type`, `size`, `sha256`), and `blob(sha256)` reads the
   * bytes back.
   */
  async respond(
    id: string,
    response: ResponseInput,
    opts: { attachments?: Iterable<Attachment> } = {},
  ): Promise<RespondResult> {
    const body: Record<string, unknown> = { request_id: id, ...response };
    if (opts.attachments !== undefined) {
      body.parts = [...(response.parts ?? []), ...(await inboundParts(opts.attachments))];
    }
    return this.send({
      method: "POST",
      path: `/v1/interactions/${seg(id)}/respond`,
      body: clean(body),
    });
  }

  /** `POST /v1/interactions/{id}/cancel` (worker). */
  cancel(id: string): Promise<Interaction> {
    return this.send({ method: "POST", path: `/v1/interactions/${seg(id)}/cancel`, body: {} });
  }

  /** `GET /v1/blobs/{sha256}`: an attachment's bytes, as a `Blob` whose `type` is its media type. */
  blob(sha256: string): Promise<Blob> {
    return this.send({ method: "GET", path: `/v1/blobs/${seg(sha256)}`, raw: true });
  }

  /**
   * `GET /v1/events` (approver) as an async iterator of `Event`s, resuming
   * with `Last-Event-ID` after a drop without a gap or a repeat. It connects
   * on `await stream.connect()` or at the first step of `for await`: connect
   * before making the changes you want to see, or pass `after`.
   */
  events(opts: EventsOptions = {}): EventStream {
    return new EventStream(
      {
        url: this.url,
        fetch: this.fetchFn,
        headers: () => this.headers(),
        connectTimeoutMs: this.timeoutMs,
      },
      opts,
    );
  }

  /** `POST /v1/gate` (worker): allow (with the envelope), deny, or ask. */
  gate(body: GateRequest): Promise<GateResult> {
    return this.send({ method: "POST", path: "/v1/gate", body: clean({ ...body }) });
  }

  /** `POST /v1/nonces/consume` (worker): `ApiError` 409 `nonce_spent` once spent. */
  async consumeNonce(nonce: string): Promise<void> {
    await this.send({ method: "POST", path: "/v1/nonces/consume", body: { nonce } });
  }

  /** `GET /v1/grants` (approver): every grant, page after page. */
  grants(): Promise<Grant[]> {
    return this.all({ method: "GET", path: "/v1/grants" });
  }

  /** `DELETE /v1/grants/{id}`. */
  revokeGrant(id: string): Promise<Grant> {
    return this.send({ method: "DELETE", path: `/v1/grants/${seg(id)}` });
  }

  /** `POST /v1/sessions/{sid}/ask` (worker): ask the session's operator; 504 when nobody answered. */
  askOperator(
    sessionId: string,
    question: unknown,
    opts: { timeoutS?: number } = {},
  ): Promise<AskResult> {
    return this.send({
      method: "POST",
      path: `/v1/sessions/${seg(sessionId)}/ask`,
      body: clean({ question, timeout_s: opts.timeoutS }),
      timeoutMs: ((opts.timeoutS ?? MAX_WAIT_S) + 15) * 1000,
    });
  }

  /** `POST /v1/sessions/{sid}/spawn` (worker): hook, then spawn. */
  spawn(sessionId: string, spawn: unknown, opts: { timeoutS?: number } = {}): Promise<SpawnResult> {
    return this.send({
      method: "POST",
      path: `/v1/sessions/${seg(sessionId)}/spawn`,
      body: clean({ spawn, timeout_s: opts.timeoutS }),
      timeoutMs: ((opts.timeoutS ?? MAX_WAIT_S) + 15) * 1000,
    });
  }

  /** `POST /v1/worker/result` (a sub-agent with the task's token, a worker, an admin). */
  workerResult(
    taskId: string,
    value: unknown = null,
    opts: { ok?: boolean; error?: string; outputTail?: string } = {},
  ): Promise<Task> {
    return this.send({
      method: "POST",
      path: "/v1/worker/result",
      body: {
        ...clean({
          task_id: taskId,
          ok: opts.ok ?? true,
          error: opts.error,
          output_tail: opts.outputTail,
        }),
        value: value === undefined ? null : value,
      },
    });
  }

  /** Every task (of `sessionId`, in `status`), newest first, page after page. */
  tasks(opts: { sessionId?: string; status?: TaskStatus } = {}): Promise<Task[]> {
    return this.all({
      method: "GET",
      path: "/v1/tasks",
      params: { status: opts.status, session_id: opts.sessionId },
    });
  }

  /** One page of tasks, newest first. */
  listTasks(opts: TaskListOptions = {}): Promise<Page<Task>> {
    return this.send({
      method: "GET",
      path: "/v1/tasks",
      params: {
        status: opts.status,
        session_id: opts.sessionId,
        limit: opts.limit,
        cursor: opts.cursor,
      },
    });
  }

  /** `GET /v1/tasks/{id}`. */
  task(id: string): Promise<Task> {
    return this.send({ method: "GET", path: `/v1/tasks/${seg(id)}` });
  }

  /** `POST /v1/tokens` (admin): the secret is in `token`, shown this once. */
  createToken(
    name: string,
    role: Role,
    opts: { caller?: string; sessions?: string[] } = {},
  ): Promise<TokenInfo> {
    return this.send({
      method: "POST",
      path: "/v1/tokens",
      body: clean({ name, role, caller: opts.caller, sessions: opts.sessions }),
    });
  }

  /** `GET /v1/tokens` (admin): every token, page after page. */
  tokens(): Promise<TokenInfo[]> {
    return this.all({ method: "GET", path: "/v1/tokens" });
  }

  /** `DELETE /v1/tokens/{name}` (admin). */
  async revokeToken(name: string): Promise<void> {
    await this.send({ method: "DELETE", path: `/v1/tokens/${seg(name)}` });
  }

  /** `GET /v1/audit` (admin): one page after entry `after` (or `cursor`), with the chain's signed head. */
  audit(opts: { after?: number; cursor?: string } = {}): Promise<AuditPage> {
    return this.send({
      method: "GET",
      path: "/v1/audit",
      params: { after: opts.after, cursor: opts.cursor },
    });
  }

  /** `POST /v1/keys/rotate` (admin): the key set after the rotation. */
  rotateKey(): Promise<Jwks> {
    return this.send({ method: "POST", path: "/v1/keys/rotate", body: {} });
  }

  /** `DELETE /v1/keys/{kid}` (admin): stop trusting an old key. */
  removeKey(kid: string): Promise<Jwks> {
    return this.send({ method: "DELETE", path: `/v1/keys/${seg(kid)}` });
  }

  /** `GET /metrics` (admin): Prometheus text. */
  async metrics(): Promise<string> {
    const blob = await this.send<Blob>({ method: "GET", path: "/metrics", raw: true });
    return blob.text();
  }

  /** `GET /v1/people/keys` (no token needed): every person's public keys in force. */
  peopleKeys(): Promise<PeopleJwks> {
    return this.send({ method: "GET", path: "/v1/people/keys" });
  }

  /**
   * `POST /v1/people/keys` (approver): register an Ed25519 public key (a JWK
   * without `kid`, or the raw 32 bytes) to the token's own name, as `lev key init` does.
   */
  registerPersonKey(
    key: PersonJwk | Omit<PersonJwk, "kid"> | Uint8Array,
  ): Promise<PersonKeyRegistered> {
    const body =
      key instanceof Uint8Array
        ? { kty: "OKP", crv: "Ed25519", x: encodeBase64url(key) }
        : { ...key };
    return this.send({ method: "POST", path: "/v1/people/keys", body });
  }

  /** `DELETE /v1/people/keys/{kid}`: the key's person, or an admin. */
  async revokePersonKey(kid: string): Promise<void> {
    await this.send({ method: "DELETE", path: `/v1/people/keys/${seg(kid)}` });
  }

  /** `POST /v1/webhooks` (admin): the endpoint, with its secret shown this once. */
  createWebhook(
    url: string,
    opts: { events?: string[]; secret?: string } = {},
  ): Promise<Record<string, unknown>> {
    return this.send({
      method: "POST",
      path: "/v1/webhooks",
      body: clean({ url, events: opts.events, secret: opts.secret }),
    });
  }

  /** `GET /v1/webhooks` (admin): every endpoint (never a secret). */
  webhooks(): Promise<Record<string, unknown>[]> {
    return this.all({ method: "GET", path: "/v1/webhooks" });
  }

  /** `DELETE /v1/webhooks/{id}` (admin). */
  async deleteWebhook(id: string): Promise<void> {
    await this.send({ method: "DELETE", path: `/v1/webhooks/${seg(id)}` });
  }

  /** `GET /v1/webhooks/{id}/deliveries` (admin): deliveries with their attempts, newest first. */
  webhookDeliveries(
    id: string,
    opts: { limit?: number } = {},
  ): Promise<Page<Record<string, unknown>>> {
    return this.send({
      method: "GET",
      path: `/v1/webhooks/${seg(id)}/deliveries`,
      params: { limit: opts.limit },
    });
  }

  /** `POST /v1/hooks/claude-code` (worker): a Claude Code hook event, answered with the hook's output. */
  claudeCodeHook(
    event: Record<string, unknown>,
    opts: { timeoutS?: number } = {},
  ): Promise<Record<string, unknown>> {
    return this.send({
      method: "POST",
      path: "/v1/hooks/claude-code",
      body: event,
      timeoutMs: ((opts.timeoutS ?? 600) + 15) * 1000,
    });
  }

  /**
   * Ask a person (or the session's operator, with `route`) and wait: the
   * answer's text, or the chosen option. `TimedOut` when it expired or was
   * cancelled.
   */
  async ask(prompt: string, opts: AskOptions = {}): Promise<string> {
    const record = await this.createInteraction(question(prompt, opts));
    const deadline = opts.timeoutS === undefined ? undefined : (opts.timeoutS + 5) * 1000;
    return answerOf(record, await this.waitForAnswer(record.id, deadline));
  }
}

function describe(e: unknown, signal: AbortSignal): string {
  if (signal.aborted && signal.reason instanceof Error) return signal.reason.message;
  if (e instanceof Error) {
    const cause = (e as Error & { cause?: unknown }).cause;
    return cause instanceof Error ? `${e.message} (${cause.message})` : e.message;
  }
  return String(e);
}

export { ApiError };
