"""The shapes of lev's JSON (SPEC sections 2 and 3), as TypedDicts."""

from __future__ import annotations

from typing import Any, Literal, TypedDict


class _Signature(TypedDict):
    keyid: str
    sig: str


class Signature(_Signature, total=False):
    """One signature of an envelope; a passkey's vote (SPEC section 13) also
    carries its WebAuthn authenticator data and client data JSON (base64)."""

    authenticator_data: str
    client_data_json: str


class Envelope(TypedDict):
    payloadType: str
    payload: str
    signatures: list[Signature]


class _StoredPart(TypedDict):
    name: str
    media_type: str
    size: int
    sha256: str


class StoredPart(_StoredPart, total=False):
    """An attachment as the server stores and returns it: never its bytes,
    which are at `GET /v1/blobs/{sha256}` (`Client.blob`). `name` is reduced
    to a plain file name; `original_name` is the name sent, when it differed."""

    original_name: str


class InboundPart(TypedDict):
    """An attachment as a respond sends it (`data`: the bytes, base64)."""

    name: str
    media_type: str
    data: str


class Response(TypedDict, total=False):
    """An InteractionResponse as the server stores and returns it."""

    request_id: str
    value: str | None
    choice_index: int | None
    approved: bool | None
    scope: str | None
    feedback: str | None
    parts: list[StoredPart]
    modified_args_json: str | None
    injected_context: str | None
    reason: str | None
    grant_args: dict[str, str] | None
    vote: Envelope | None
    fields: dict[str, Any] | None


class GateNote(TypedDict, total=False):
    """Why lev's gate stopped a call for a person (set by the server only)."""

    rule_line: int
    rule_tool: str
    rule_reason: str
    risk: Literal["high"]
    policy: str


class VoteBinding(TypedDict):
    """What a vote on a tool approval binds (SPEC section 13); `args_sha256`
    is the lowercase hex SHA-256 of the exact `args_json` bytes."""

    request_id: str
    tool_name: str
    args_sha256: str
    conversation_id: str
    caller: str
    sandbox_mode: str


class Interaction(TypedDict, total=False):
    """An InteractionRequest with what the server adds."""

    id: str
    session_id: str
    conversation_id: str | None
    turn_id: str | None
    caller: str | None
    title: str | None
    kind: dict[str, Any]
    timeout_s: int | None
    on_timeout: Any
    route: list[str] | None
    reason: str | None
    metadata: Any
    gate: GateNote
    approvals_needed: int
    vote_binding: VoteBinding
    status: Literal["pending", "answered", "expired", "cancelled"]
    created_at: str
    expires_at: str | None
    answered_at: str | None
    answered_by: str | None


class InteractionRecord(TypedDict):
    request: Interaction
    response: Response | None
    approval: Envelope | None


class Page(TypedDict):
    """What every list route answers: `items` (in each page type below) and
    `next_cursor`, None on the last page, else the `cursor` of the next."""

    next_cursor: str | None


class InteractionPage(Page):
    """`GET /v1/interactions`, newest first."""

    items: list[InteractionRecord]


# The older name of InteractionPage.
InteractionList = InteractionPage


class _WaitStatus(TypedDict):
    status: Literal["pending", "answered", "expired", "cancelled"]


class WaitResult(_WaitStatus, total=False):
    response: Response
    approval: Envelope | None


class RespondResult(TypedDict):
    response: Response
    approval: Envelope | None


class _GateDecision(TypedDict):
    decision: Literal["allow", "deny", "ask"]


class GateResult(_GateDecision, total=False):
    approval: Envelope
    reason: str
    interaction_id: str


class Jwk(TypedDict, total=False):
    kty: str
    crv: str
    x: str
    kid: str
    alg: str
    use: str


class Jwks(TypedDict):
    keys: list[Jwk]


class PersonJwk(TypedDict, total=False):
    """A person's public key (SPEC section 13): Ed25519 (`OKP`, from `lev key
    init` or a passkey's EdDSA) or P-256 (`EC`, a passkey's ES256); `kid` is
    `person:NAME:N`; `rp_id` and `credential_id` only on a passkey."""

    kty: str
    crv: str
    x: str
    y: str
    kid: str
    alg: str
    use: str
    rp_id: str
    credential_id: str


class PeopleJwks(TypedDict):
    """`GET /v1/people/keys`: every person's keys in force."""

    keys: list[PersonJwk]


class PersonKeyRegistered(TypedDict):
    """`POST /v1/people/keys`: the key as served, with its `kid`, and its person."""

    key: PersonJwk
    person: str


class Health(TypedDict):
    status: str
    version: str
    store: str


class Grant(TypedDict, total=False):
    id: str
    scope: str
    caller: str
    conversation_id: str
    sandbox_mode: str
    tool_name: str
    covered_capabilities: list[str]
    approver: str
    grant_args: dict[str, str] | None
    vote: Envelope | None
    created_at: str


class Task(TypedDict, total=False):
    id: str
    session_id: str
    status: Literal["pending", "running", "succeeded", "failed"]
    spawn: Any
    last_result: Any
    output_tail: str | None
    error: str | None
    caller: str | None
    created_at: str
    updated_at: str


class TaskPage(Page):
    """`GET /v1/tasks`, newest first."""

    items: list[Task]


class TokenInfo(TypedDict, total=False):
    name: str
    role: str
    caller: str | None
    token: str
    sessions: list[str]
    created_at: str


class OperatorPresence(TypedDict, total=False):
    """The data of `operator.connected` and `operator.disconnected` events."""

    session_id: str
    operator: str


class AskResult(TypedDict):
    answer: Any
    answered_by: str


class SpawnResult(TypedDict):
    task_id: str
    ok: bool
    value: Any
    error: str | None


class AuditEntry(TypedDict):
    seq: int
    at: str
    action: str
    actor: str
    data: Any
    prev_hash: str
    hash: str


class AuditHead(TypedDict):
    seq: int
    hash: str
    signature: Envelope


class AuditPage(Page):
    """`GET /v1/audit`: entries after `after` (or `cursor`), oldest first,
    and the signed head of the whole chain."""

    items: list[AuditEntry]
    head: AuditHead
