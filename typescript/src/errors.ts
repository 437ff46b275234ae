/**
 * Every error the SDK throws: a `LevError` with a stable snake_case `code`
 * and a `message` for a person (as python/lev/_errors.py).
 */

/** Base of every error the SDK throws. */
export class LevError extends Error {
  readonly code: string;
  constructor(code: string, message: string) {
    super(message);
    this.name = new.target.name;
    this.code = code;
  }
  override toString(): string {
    return `${this.name}: ${this.code}: ${this.message}`;
  }
}

/** The server refused a request: its `{"error": {"code", "message"}}`, and the HTTP status. */
export class ApiError extends LevError {
  readonly status: number;
  readonly body: Record<string, unknown>;
  constructor(status: number, code: string, message: string, body?: Record<string, unknown>) {
    super(code, message);
    this.status = status;
    this.body = body ?? {};
  }
  override toString(): string {
    return `ApiError: ${this.code} (HTTP ${this.status}): ${this.message}`;
  }
}

/**
 * The `ApiError` of a refusal whose body is `text`: the server's `{"error":
 * {"code", "message"}}`, else `http_<status>` and the start of the body.
 */
export function apiError(status: number, text: string, reason = ""): ApiError {
  try {
    const body: unknown = JSON.parse(text);
    if (typeof body === "object" && body !== null && !Array.isArray(body)) {
      const err = (body as Record<string, unknown>).error;
      if (typeof err === "object" && err !== null) {
        const { code, message } = err as Record<string, unknown>;
        if (code !== undefined && message !== undefined) {
          return new ApiError(
            status,
            String(code),
            String(message),
            body as Record<string, unknown>,
          );
        }
      }
    }
  } catch {
    // not JSON: below
  }
  return new ApiError(status, `http_${status}`, text.slice(0, 300) || reason);
}

/** The server could not be reached (down, wrong address, TLS failure). */
export class ServerUnreachable extends LevError {}

/**
 * The envelope is not a genuine, currently valid approval. `code` is one of
 * `malformed`, `payload_type`, `untrusted_key`, `bad_signature`, `payload`,
 * `version`, `expired`, `not_yet_valid`.
 */
export class VerificationError extends LevError {}

/** A public key was refused: `weak_key`, `invalid_key` or `malformed_key`. */
export class KeyRefused extends LevError {}

/**
 * The envelope is genuine but does not authorize this call here. `code` is
 * `denied`, the field that differs (`request_id`, `tool_name`, `args_json`,
 * `conversation_id`, `caller`, `sandbox_mode`), or `votes` (`NotEnoughVotes`).
 */
export class NotAuthorizedError extends LevError {}

/**
 * Fewer distinct people's signed votes verify and bind the call than
 * required (SPEC section 13); `code` is `votes`. `found` were counted (0 for
 * a denial), `needed` required; `problems` say why each other vote does not
 * count (`"voter: reason"`).
 */
export class NotEnoughVotes extends NotAuthorizedError {
  readonly found: number;
  readonly needed: number;
  readonly problems: string[];
  constructor(found: number, needed: number, problems: string[]) {
    const why = problems.length > 0 ? ` (${problems.join("; ")})` : "";
    super(
      "votes",
      `${found} distinct signed votes verify and bind this call, ${needed} needed${why}`,
    );
    this.found = found;
    this.needed = needed;
    this.problems = problems;
  }
}

/**
 * A person's signed vote does not count. `code` is `malformed`, `payload`,
 * `not_signed`, `assertion` or `mismatch` (`field` names what differs).
 */
export class VoteError extends LevError {
  readonly field: string | undefined;
  constructor(code: string, message: string, field?: string) {
    super(code, message);
    this.field = field;
  }
}

/** The approval was used before: its nonce is spent. */
export class NonceSpent extends LevError {
  constructor() {
    super(
      "nonce_spent",
      "the approval was used before (its nonce is spent): refusing to run the call again",
    );
  }
}

/**
 * A tool call that must not run. `kind` is `policy`, `denied`, `expired`,
 * `cancelled` or `timed_out`; `text` is what the model should read;
 * `feedback` is the person's feedback, if any.
 */
export class Denied extends LevError {
  readonly kind: string;
  readonly text: string;
  readonly feedback: string | undefined;
  constructor(kind: string, text: string, feedback?: string) {
    super(kind, text);
    this.kind = kind;
    this.text = text;
    this.feedback = feedback;
  }
}

/** Nobody answered in time (an ask, or a wait). */
export class TimedOut extends LevError {}

/**
 * The server refused a frame an operator sent: its `error` frame's `code`
 * (`already_resolved`, `unknown_req_id`, `wrong_reply_kind`, `malformed`, ...),
 * `message`, and the `req_id` it concerns (undefined when the frame had none).
 */
export class FrameRefused extends LevError {
  readonly reqId: string | undefined;
  constructor(code: string, message: string, reqId?: string) {
    super(code, message);
    this.reqId = reqId;
  }
}
