/**
 * `GET /v1/events` (SPEC section 3): Server-Sent Events whose ids are the
 * server's durable sequence numbers, as an async iterator.
 *
 * `client.events()` yields `Event`s in the server's order and, when the
 * connection drops, connects again (backoff with jitter) with
 * `Last-Event-ID` set to the last event it yielded: the server replays what it
 * committed after it, so nothing is missed, and an event at or below that id
 * sent again anyway is skipped, so nothing is seen twice.
 */

import { apiError, LevError, ServerUnreachable } from "./errors.js";
import type { InteractionRecord, OperatorPresence, Task } from "./types.js";

export const EVENTS_PATH = "/v1/events";

/** One event of `GET /v1/events`. */
export class Event {
  constructor(
    /** The durable sequence number (the SSE id): pass it back as `after` to resume from here. */
    readonly seq: number,
    /** `interaction.created`, `.answered`, `.expired`, `.cancelled`, `.escalated`, `task.updated`, `operator.connected`, `operator.disconnected`, or a newer type. */
    readonly type: string,
    /** The JSON object concerned. */
    readonly data: unknown,
  ) {}

  /** For `interaction.*`: `{request, response, approval}`. */
  get interaction(): InteractionRecord | null {
    if (
      this.type.startsWith("interaction.") &&
      isObject(this.data) &&
      isObject(this.data.request)
    ) {
      return this.data as unknown as InteractionRecord;
    }
    return null;
  }

  /** For `task.*`: the task. */
  get task(): Task | null {
    return this.type.startsWith("task.") && isObject(this.data)
      ? (this.data as unknown as Task)
      : null;
  }

  /** For `operator.*`: `{session_id, operator}`. */
  get operator(): OperatorPresence | null {
    return this.type.startsWith("operator.") && isObject(this.data)
      ? (this.data as unknown as OperatorPresence)
      : null;
  }

  /** The session the event concerns, when it names one. */
  get sessionId(): string | null {
    const record = this.interaction;
    if (record !== null) return record.request.session_id ?? null;
    if (isObject(this.data) && typeof this.data.session_id === "string")
      return this.data.session_id;
    return null;
  }
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/**
 * The SSE line protocol (WHATWG HTML, "event stream interpretation"): fed
 * one line at a time, it gives a finished event at each blank line. An event
 * cut off by a dropped connection is never given: it has no blank line yet.
 */
export class SseParser {
  lastId: string | null = null;
  retryMs: number | null = null;
  private type = "";
  private data: string[] = [];

  reset(): void {
    this.type = "";
    this.data = [];
  }

  line(line: string): { id: string | null; type: string; data: string } | null {
    if (line === "") {
      const data = this.data;
      const type = this.type || "message";
      this.reset();
      if (data.length === 0) return null;
      return { id: this.lastId, type, data: data.join("\n") };
    }
    if (line.startsWith(":")) return null; // a comment: the server's keep-alive
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (field === "event") this.type = value;
    else if (field === "data") this.data.push(value);
    else if (field === "id") {
      if (!value.includes("\0")) this.lastId = value;
    } else if (field === "retry" && /^[0-9]+$/.test(value)) this.retryMs = Number(value);
    return null;
  }
}

export interface EventsOptions {
  /** Replay what the server holds after this event seq (0: everything), then follow live. Undefined: only new events. */
  after?: number;
  /** Connect again when the connection drops (default true). */
  reconnect?: boolean;
  /** The first and the longest wait between tries, in ms (default [100, 10000]). */
  backoffMs?: [number, number];
  /** Give up after this long without a connection, in ms (default: never, once connected). */
  giveUpAfterMs?: number;
  /** No byte for this long counts as a dropped connection (default 60000; the server sends a keep-alive every 15 s). */
  idleTimeoutMs?: number;
  /** Ends the iteration when aborted. */
  signal?: AbortSignal;
}

/** What `EventStream` needs of the client. */
export interface EventsTransport {
  url: string;
  fetch: typeof fetch;
  headers(): Record<string, string>;
  connectTimeoutMs: number;
}

class Dropped extends Error {}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      signal.removeEventListener("abort", done);
      resolve();
    }
    signal.addEventListener("abort", done, { once: true });
  });
}

/**
 * The events of `GET /v1/events`, as an async iterator (`for await`).
 * `lastSeq` is the seq of the last event yielded (or the `after` given): keep
 * it to resume later with `client.events({ after: lastSeq })`. `close()` (or
 * breaking out of the loop) ends it.
 */
export class EventStream implements AsyncIterableIterator<Event> {
  private last: number | null;
  private readonly reconnect: boolean;
  private readonly firstBackoff: number;
  private readonly maxBackoff: number;
  private backoff: number;
  private readonly giveUpAfterMs: number | undefined;
  private readonly idleTimeoutMs: number;
  private readonly parser = new SseParser();
  private readonly stop = new AbortController();
  private connectedOnce = false;
  private downSince: number | null = null;
  private reader: ReadableStreamDefaultReader<string> | null = null;
  private conn: AbortController | null = null;
  private buffer = "";
  private pendingCr = false;

  constructor(
    private readonly t: EventsTransport,
    opts: EventsOptions = {},
  ) {
    if (opts.after !== undefined && (!Number.isInteger(opts.after) || opts.after < 0)) {
      throw new TypeError(`after: expected an event seq (0 or more), found ${opts.after}`);
    }
    this.last = opts.after ?? null;
    this.reconnect = opts.reconnect ?? true;
    const [first, most] = opts.backoffMs ?? [100, 10_000];
    this.firstBackoff = Math.max(first, 10);
    this.maxBackoff = Math.max(most, this.firstBackoff);
    this.backoff = this.firstBackoff;
    this.giveUpAfterMs = opts.giveUpAfterMs;
    this.idleTimeoutMs = opts.idleTimeoutMs ?? 60_000;
    if (opts.signal !== undefined) {
      if (opts.signal.aborted) this.stop.abort();
      else opts.signal.addEventListener("abort", () => this.close(), { once: true });
    }
  }

  /** The seq of the last event yielded, or the `after` given. */
  get lastSeq(): number | null {
    return this.last;
  }

  get closed(): boolean {
    return this.stop.signal.aborted;
  }

  /** End the iteration (from anywhere): the connection is dropped. */
  close(): void {
    this.stop.abort();
    this.hangUp();
  }

  private hangUp(): void {
    const reader = this.reader;
    const conn = this.conn;
    this.reader = null;
    this.conn = null;
    this.buffer = "";
    this.pendingCr = false;
    if (reader !== null) reader.cancel().catch(() => {});
    if (conn !== null) conn.abort();
  }

  private unreachable(e: unknown): ServerUnreachable {
    return new ServerUnreachable("unreachable", `cannot reach lev at ${this.t.url}: ${message(e)}`);
  }

  private async open(): Promise<void> {
    const conn = new AbortController();
    const onStop = () => conn.abort();
    this.stop.signal.addEventListener("abort", onStop, { once: true });
    const headers: Record<string, string> = {
      ...this.t.headers(),
      Accept: "text/event-stream",
      "Cache-Control": "no-cache",
    };
    if (this.last !== null) headers["Last-Event-ID"] = String(this.last);
    const timer = setTimeout(() => conn.abort(), this.t.connectTimeoutMs);
    let resp: globalThis.Response;
    try {
      resp = await this.t.fetch(`${this.t.url}${EVENTS_PATH}`, { headers, signal: conn.signal });
    } catch (e) {
      throw new Dropped(message(e));
    } finally {
      clearTimeout(timer);
      this.stop.signal.removeEventListener("abort", onStop);
    }
    if (resp.status >= 400) {
      const body = await resp.text().catch(() => "");
      const err = apiError(resp.status, body, resp.statusText);
      if (this.connectedOnce && (resp.status >= 500 || resp.status === 429))
        throw new Dropped(err.message);
      throw err;
    }
    const type = resp.headers.get("content-type") ?? "";
    if (!type.startsWith("text/event-stream") || resp.body === null) {
      conn.abort();
      throw new LevError(
        "bad_response",
        `GET ${EVENTS_PATH}: expected text/event-stream, found ${type || "no type"} (HTTP ${resp.status})`,
      );
    }
    this.conn = conn;
    this.reader = resp.body.pipeThrough(new TextDecoderStream()).getReader();
    this.connectedOnce = true;
    this.downSince = null;
    this.parser.reset();
  }

  /** The wait before the next try, or throw when there is to be none. */
  private dropped(e: unknown): number {
    if (!this.connectedOnce || !this.reconnect) {
      if (e instanceof LevError) throw e;
      throw this.unreachable(e);
    }
    const now = Date.now();
    this.downSince = this.downSince ?? now;
    if (this.giveUpAfterMs !== undefined && now - this.downSince > this.giveUpAfterMs) {
      throw new ServerUnreachable(
        "unreachable",
        `no connection to lev at ${this.t.url} for ${this.giveUpAfterMs} ms: ${message(e)}`,
      );
    }
    const retry = this.parser.retryMs;
    const base = retry !== null ? Math.max(this.backoff, retry) : this.backoff;
    this.backoff = Math.min(this.backoff * 2, this.maxBackoff);
    return base * (1 + Math.random() / 4);
  }

  /** Connect now (once): throws `ApiError` when the server refuses, `ServerUnreachable` when it cannot be reached. */
  async connect(): Promise<this> {
    while (this.reader === null && !this.closed) {
      try {
        await this.open();
      } catch (e) {
        if (!(e instanceof Dropped)) throw e;
        await sleep(this.dropped(e), this.stop.signal);
      }
    }
    return this;
  }

  /** The next line of the stream, or null when the stream ended. */
  private async readLine(): Promise<string | null> {
    for (;;) {
      const at = this.buffer.search(/[\r\n]/);
      if (at >= 0) {
        const line = this.buffer.slice(0, at);
        const ch = this.buffer[at];
        this.buffer = this.buffer.slice(at + 1);
        if (ch === "\r") this.pendingCr = true;
        return line;
      }
      const reader = this.reader;
      if (reader === null) return null;
      let timer: ReturnType<typeof setTimeout> | undefined;
      const idle = new Promise<"idle">((resolve) => {
        timer = setTimeout(() => resolve("idle"), this.idleTimeoutMs);
      });
      let got: ReadableStreamReadResult<string> | "idle";
      try {
        got = await Promise.race([reader.read(), idle]);
      } finally {
        clearTimeout(timer);
      }
      if (got === "idle") throw new Dropped(`no byte for ${this.idleTimeoutMs} ms`);
      if (got.done) return null;
      let chunk = got.value;
      if (this.pendingCr && chunk.startsWith("\n")) chunk = chunk.slice(1);
      this.pendingCr = false;
      this.buffer += chunk;
      // The server is talking: the next drop waits the shortest time again.
      this.backoff = this.firstBackoff;
    }
  }

  private event(line: string): Event | null {
    const got = this.parser.line(line);
    if (got === null) return null;
    const seq = got.id !== null && /^[0-9]+$/.test(got.id) ? Number(got.id) : -1;
    if (seq < 0) {
      throw new LevError(
        "bad_response",
        `GET ${EVENTS_PATH}: an event without a sequence id: ${got.id}`,
      );
    }
    if (this.last !== null && seq <= this.last) return null; // seen already
    let value: unknown;
    try {
      value = JSON.parse(got.data);
    } catch {
      throw new LevError(
        "bad_response",
        `GET ${EVENTS_PATH}: event ${seq} (${got.type}): its data is not JSON`,
      );
    }
    this.last = seq;
    return new Event(seq, got.type, value);
  }

  async next(): Promise<IteratorResult<Event, undefined>> {
    for (;;) {
      if (this.closed) {
        this.hangUp();
        return { done: true, value: undefined };
      }
      if (this.reader === null) {
        await this.connect();
        continue;
      }
      let reason: unknown;
      try {
        const line = await this.readLine();
        if (line !== null) {
          const ev = this.event(line);
          if (ev !== null) return { done: false, value: ev };
          continue;
        }
        reason = "the server ended the stream";
        if (!this.reconnect) {
          this.close();
          continue;
        }
      } catch (e) {
        if (this.closed) continue;
        if (e instanceof LevError) {
          this.hangUp();
          throw e;
        }
        reason = e;
      }
      this.hangUp();
      if (this.closed) continue;
      await sleep(this.dropped(reason), this.stop.signal);
    }
  }

  async return(): Promise<IteratorResult<Event, undefined>> {
    this.close();
    return { done: true, value: undefined };
  }

  [Symbol.asyncIterator](): this {
    return this;
  }
}

function message(e: unknown): string {
  if (e instanceof Error) {
    const cause = (e as Error & { cause?: unknown }).cause;
    return cause instanceof Error ? `${e.message} (${cause.message})` : e.message;
  }
  return String(e);
}
