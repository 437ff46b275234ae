"""Every error the SDK raises: a `LevError` with a stable snake_case `code` and a
`message` for a person."""

from __future__ import annotations

import json
from typing import Any


class LevError(Exception):
    """Base of every error the SDK raises."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


class ApiError(LevError):
    """The server refused a request: its `{"error": {"code", "message"}}`, and the HTTP status."""

    def __init__(
        self, status: int, code: str, message: str, body: dict[str, Any] | None = None
    ) -> None:
        super().__init__(code, message)
        self.status = status
        self.body = body or {}

    def __str__(self) -> str:
        return f"{self.code} (HTTP {self.status}): {self.message}"


def api_error(status: int, text: str, reason: str = "") -> ApiError:
    """The `ApiError` of a refusal whose body is `text`: the server's `{"error":
    {"code", "message"}}`, else `http_<status>` and the start of the body."""
    try:
        body = json.loads(text)
        err = body["error"]
        return ApiError(status, str(err["code"]), str(err["message"]), body)
    except (ValueError, KeyError, TypeError):
        return ApiError(status, f"http_{status}", text[:300] or reason)


class ServerUnreachable(LevError):
    """The server could not be reached (down, wrong address, TLS failure)."""


class VerificationError(LevError):
    """The envelope is not a genuine, currently valid approval. `code` is one of
    `malformed`, `payload_type`, `untrusted_key`, `bad_signature`, `payload`,
    `version`, `expired`, `not_yet_valid`."""


class KeyRefused(LevError):
    """A public key was refused: `weak_key`, `invalid_key` or `malformed_key`."""


class NotAuthorizedError(LevError):
    """The envelope is genuine but does not authorize this call here. `code` is
    `denied`, the field that differs (`request_id`, `tool_name`, `args_json`,
    `conversation_id`, `caller`, `sandbox_mode`), or `votes` (`NotEnoughVotes`)."""


class NotEnoughVotes(NotAuthorizedError):
    """Fewer distinct people's signed votes verify and bind the call than
    required (SPEC section 13); `code` is `votes`. `found` were counted
    (0 for a denial), `needed` required; `problems` say why each other vote
    does not count (`"voter: reason"`)."""

    def __init__(self, found: int, needed: int, problems: list[str]) -> None:
        why = f" ({'; '.join(problems)})" if problems else ""
        super().__init__(
            "votes",
            f"{found} distinct signed votes verify and bind this call, {needed} needed{why}",
        )
        self.found = found
        self.needed = needed
        self.problems = problems


class VoteError(LevError):
    """A person's signed vote does not count. `code` is `malformed` (not a
    vote envelope), `payload` (not a valid vote payload), `not_signed` (no
    signature by a key registered to the voter), `assertion` (a passkey's
    WebAuthn assertion does not hold) or `mismatch` (the vote is for another
    call, voter, decision or scope: `field` names it)."""

    def __init__(self, code: str, message: str, field: str | None = None) -> None:
        super().__init__(code, message)
        self.field = field


class NonceSpent(LevError):
    """The approval was used before: its nonce is spent."""

    def __init__(self) -> None:
        super().__init__(
            "nonce_spent",
            "the approval was used before (its nonce is spent): refusing to run the call again",
        )


class Denied(LevError):
    """A tool call that must not run. `kind` is `policy`, `denied`, `expired`,
    `cancelled` or `timed_out`; `text` is what the model should read;
    `feedback` is the person's feedback, if any."""

    def __init__(self, kind: str, text: str, feedback: str | None = None) -> None:
        super().__init__(kind, text)
        self.kind = kind
        self.text = text
        self.feedback = feedback


class TimedOut(LevError):
    """Nobody answered in time (an ask, or a wait)."""


class FrameRefused(LevError):
    """The server refused a frame an operator sent: its `error` frame's `code`
    (`already_resolved`, `unknown_req_id`, `wrong_reply_kind`, `malformed`,
    `unknown_type`, `invalid_answer`, `store_unavailable`, ...), `message`, and
    the `req_id` it concerns (None when the frame had none)."""

    def __init__(self, code: str, message: str, req_id: str | None = None) -> None:
        super().__init__(code, message)
        self.req_id = req_id
