"""lev's Python SDK: ask people (or a supervising AI), gate tool calls, and
verify the signed approvals offline.

    import lev
    client = lev.Client("http://127.0.0.1:7420", token)
    answer = client.ask("Deploy now?", session_id="s-1")
"""

from . import operator, types, webhooks
from ._client import AsyncClient, Client
from ._errors import (
    ApiError,
    Denied,
    KeyRefused,
    LevError,
    NonceSpent,
    NotAuthorizedError,
    NotEnoughVotes,
    ServerUnreachable,
    TimedOut,
    VerificationError,
    VoteError,
)
from ._events import AsyncEventStream, Event, EventStream
from ._gate import ApprovedCall, AsyncGatekeeper, Gatekeeper
from ._parts import Attachment
from ._verify import (
    APPROVAL_PAYLOAD_TYPE,
    APPROVAL_PAYLOAD_TYPE_V2,
    PayloadVote,
    TrustedKeys,
    VerifiedResponse,
    key_id,
    verify,
    verify_envelope,
)
from ._votes import (
    VOTE_PAYLOAD_TYPE,
    PeopleKeys,
    PersonKey,
    VerifiedVote,
    VoteCheck,
    VotePayload,
    check_vote_binding,
    verify_vote,
)

__version__ = "0.1.0"

__all__ = [
    "APPROVAL_PAYLOAD_TYPE",
    "APPROVAL_PAYLOAD_TYPE_V2",
    "VOTE_PAYLOAD_TYPE",
    "ApiError",
    "ApprovedCall",
    "AsyncClient",
    "AsyncEventStream",
    "AsyncGatekeeper",
    "Attachment",
    "Client",
    "Denied",
    "Event",
    "EventStream",
    "Gatekeeper",
    "KeyRefused",
    "LevError",
    "NonceSpent",
    "NotAuthorizedError",
    "NotEnoughVotes",
    "PayloadVote",
    "PeopleKeys",
    "PersonKey",
    "ServerUnreachable",
    "TimedOut",
    "TrustedKeys",
    "VerificationError",
    "VerifiedResponse",
    "VerifiedVote",
    "VoteCheck",
    "VoteError",
    "VotePayload",
    "check_vote_binding",
    "key_id",
    "operator",
    "types",
    "verify",
    "verify_envelope",
    "verify_vote",
    "webhooks",
]
