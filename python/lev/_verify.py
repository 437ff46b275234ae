"""Offline verification of lev's signed approvals (SPEC sections 5 and 13).

The same checks, in the same order, as the Rust verifier
(`crates/lev-approval/src/verify.rs`): exact payload type (version 1, or
version 2 for a decision carrying its votes), at most 16 signatures, a strict
Ed25519 signature by a trusted key over DSSE's pre-authentication encoding, a
strict payload parse, the version its payload type names (1 without `votes`,
2 with them), and the clock within `issued_at` and `expires_at` give or take
60 s. People's own signed votes inside a version 2 payload are checked by
`lev._votes` (`VerifiedResponse.require_signed_votes`).

`cryptography` (OpenSSL) verifies Ed25519 without refusing small-order keys
or small-order `R`: this module refuses both itself, as `verify_strict` does.
JSON is read as serde_json reads the Rust types (`lev._json`).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import itertools
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from . import _json
from ._errors import KeyRefused, NotAuthorizedError, VerificationError

if TYPE_CHECKING:
    from ._votes import PeopleKeys, PeopleKeysLike, VoteCheck

APPROVAL_PAYLOAD_TYPE = "application/vnd.lev.approval+json; version=1"
APPROVAL_PAYLOAD_TYPE_V2 = "application/vnd.lev.approval+json; version=2"
PAYLOAD_VERSION = 1
PAYLOAD_VERSION_VOTES = 2
MAX_SIGNATURES = 16
CLOCK_SKEW_NS = 60 * 1_000_000_000

# ---- base64 ----------------------------------------------------------------

_STD = re.compile(r"\A[A-Za-z0-9+/]*\Z")
_URL = re.compile(r"\A[A-Za-z0-9\-_]*\Z")


def decode_base64(text: str) -> bytes:
    """Decode standard or URL-safe base64, padded or not; anything else raises ValueError.

    Like the Rust decoder: canonical only (no stray bits after the last byte).
    """
    if not isinstance(text, str):
        raise ValueError("not a string")
    body = text.rstrip("=")
    pad = len(text) - len(body)
    if pad and (pad > 2 or len(text) % 4 != 0):
        raise ValueError("bad padding")
    if len(body) % 4 == 1:
        raise ValueError("bad length")
    if _STD.match(body):
        alt = None
    elif _URL.match(body):
        alt = b"-_"
    else:
        raise ValueError("not base64")
    padded = body + "=" * (-len(body) % 4)
    try:
        raw = base64.b64decode(padded, altchars=alt, validate=True)
    except (binascii.Error, ValueError) as e:
        raise ValueError(str(e)) from None
    again = base64.b64encode(raw, altchars=alt).decode().rstrip("=")
    if again != body:
        raise ValueError("non-canonical base64")
    return raw


def encode_base64url(raw: bytes) -> str:
    """Base64url without padding: public keys and nonces."""
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


# ---- Ed25519 points: only what the strict checks need ----------------------

_P = 2**255 - 19
_D = (-121665 * pow(121666, _P - 2, _P)) % _P
_SQRT_M1 = pow(2, (_P - 1) // 4, _P)
_L = 2**252 + 27742317777372353535851937790883648493


def _decompress(raw: bytes) -> tuple[int, int] | None:
    """The affine point a 32-byte encoding names, or None when it names none."""
    if len(raw) != 32:
        return None
    n = int.from_bytes(raw, "little")
    sign = n >> 255
    y = n & ((1 << 255) - 1)
    y %= _P
    u = (y * y - 1) % _P
    v = (_D * y * y + 1) % _P
    x2 = u * pow(v, _P - 2, _P) % _P
    x = pow(x2, (_P + 3) // 8, _P)
    if (x * x - x2) % _P != 0:
        x = x * _SQRT_M1 % _P
    if (x * x - x2) % _P != 0:
        return None
    # x = 0 with the sign bit set decodes to x = 0, as curve25519-dalek
    # does: such a point is small-order, so a key is refused as weak.
    if x != 0 and (x & 1) != sign:
        x = _P - x
    return x, y


def _double(pt: tuple[int, int]) -> tuple[int, int]:
    x, y = pt
    xx, yy, xy = x * x % _P, y * y % _P, x * y % _P
    dxxyy = _D * xx % _P * yy % _P
    x3 = 2 * xy * pow(1 + dxxyy, _P - 2, _P) % _P
    y3 = (yy + xx) * pow((1 - dxxyy) % _P, _P - 2, _P) % _P
    return x3, y3


def _is_small_order(pt: tuple[int, int]) -> bool:
    for _ in range(3):
        pt = _double(pt)
    return pt == (0, 1)


def key_id(raw: bytes) -> str:
    """The first 16 lowercase hex digits of the SHA-256 of the raw public key."""
    return hashlib.sha256(raw).hexdigest()[:16]


# ---- trusted keys ------------------------------------------------------------


@dataclass(frozen=True)
class _Key:
    kid: str
    raw: bytes
    key: Ed25519PublicKey


class TrustedKeys:
    """The public keys a verifier trusts. Weak (small-order) keys never get in."""

    def __init__(self, keys: Iterable[bytes | str] = ()) -> None:
        self._keys: list[_Key] = []
        for k in keys:
            self.add(k)

    def add(self, key: bytes | str) -> None:
        """Trust a raw 32-byte key (or its base64); refuse weak or invalid ones."""
        if isinstance(key, str):
            try:
                raw = decode_base64(key)
            except ValueError:
                raise KeyRefused(
                    "malformed_key", "expected a base64url Ed25519 public key"
                ) from None
        else:
            raw = bytes(key)
        if len(raw) != 32:
            raise KeyRefused(
                "invalid_key", f"expected a 32-byte Ed25519 public key, found {len(raw)} bytes"
            )
        point = _decompress(raw)
        if point is None:
            raise KeyRefused(
                "invalid_key",
                "expected a 32-byte Ed25519 public key, found bytes that are not a curve point",
            )
        kid = key_id(raw)
        if _is_small_order(point):
            raise KeyRefused(
                "weak_key",
                f"weak (small-order) public key {kid} refused: signatures under it can be forged",
            )
        if any(k.kid == kid for k in self._keys):
            return
        self._keys.append(_Key(kid, raw, Ed25519PublicKey.from_public_bytes(raw)))

    @classmethod
    def from_jwks(cls, jwks: Mapping[str, Any] | str) -> TrustedKeys:
        """A JWKS (`{"keys": [...]}`, as `GET /v1/keys` serves it), one JWK, or its JSON text."""
        if isinstance(jwks, str):
            text = jwks.strip(_json.RUST_WHITESPACE)
            if not text.startswith("{"):
                return cls([text])
            try:
                jwks = _json.load(text)
            except ValueError as e:
                raise KeyRefused("malformed_key", f"expected a JWKS or a JWK, {e}") from None
        if not isinstance(jwks, Mapping):
            raise KeyRefused("malformed_key", "expected a JWKS or a JWK")
        entries = jwks["keys"] if "keys" in jwks else [jwks]
        if not isinstance(entries, list):
            raise KeyRefused("malformed_key", "expected a JWKS: keys is not a list")
        out = cls()
        for jwk in entries:
            if (
                not isinstance(jwk, Mapping)
                or jwk.get("kty") != "OKP"
                or jwk.get("crv") != "Ed25519"
                or not isinstance(jwk.get("x"), str)
            ):
                raise KeyRefused("malformed_key", "expected kty OKP and crv Ed25519 with x")
            out.add(jwk["x"])
        if not out._keys:
            raise KeyRefused("malformed_key", "the key set holds no key")
        return out

    def __len__(self) -> int:
        return len(self._keys)

    def contains_kid(self, kid: str) -> bool:
        return any(k.kid == kid for k in self._keys)

    def candidates(self, kid: str) -> Iterator[_Key]:
        """Every key, the one with id `kid` first: a hint, never a restriction."""
        yield from (k for k in self._keys if k.kid == kid)
        yield from (k for k in self._keys if k.kid != kid)

    @property
    def kids(self) -> list[str]:
        return [k.kid for k in self._keys]


def ed25519_verify_strict(key: Ed25519PublicKey, message: bytes, sig: bytes) -> bool:
    """`verify_strict`: a 64-byte signature, `R` not small-order, `s` below
    the group order, over `message` by `key` (whose own point the caller
    has checked is not small-order)."""
    if len(sig) != 64:
        return False
    r_point = _decompress(sig[:32])
    if r_point is None or _is_small_order(r_point):
        return False
    if int.from_bytes(sig[32:], "little") >= _L:
        return False
    try:
        key.verify(sig, message)
    except InvalidSignature:
        return False
    return True


def _verify_strict(key: _Key, message: bytes, sig: bytes) -> bool:
    return ed25519_verify_strict(key.key, message, sig)


def pae(payload_type: str, payload: bytes) -> bytes:
    """DSSE's pre-authentication encoding."""
    t = payload_type.encode()
    return b"DSSEv1 %d %s %d %s" % (len(t), t, len(payload), payload)


# ---- timestamps --------------------------------------------------------------

_TS = re.compile(
    r"\A(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?(Z|[+-]\d{2}:\d{2})\Z"
)


def _days_from_civil(y: int, m: int, d: int) -> int:
    y -= m <= 2
    era = (y if y >= 0 else y - 399) // 400
    yoe = y - era * 400
    doy = (153 * (m + (-3 if m > 2 else 9)) + 2) // 5 + d - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146097 + doe - 719468


def parse_timestamp(text: str) -> int:
    """Strict RFC 3339 (upper-case T and Z) to nanoseconds since the epoch."""
    m = _TS.match(text) if isinstance(text, str) else None
    if not m:
        raise ValueError(f"expected an RFC 3339 time such as 2026-01-01T12:00:00Z, found {text!r}")
    y, mo, d, hh, mi, ss = (int(m.group(i)) for i in range(1, 7))
    leap = y % 4 == 0 and (y % 100 != 0 or y % 400 == 0)
    month_days = [31, 29 if leap else 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31]
    if not (1 <= mo <= 12 and 1 <= d <= month_days[mo - 1] and hh < 24 and mi < 60 and ss < 60):
        raise ValueError(f"a date or time that does not exist: {text!r}")
    frac = m.group(7) or ""
    ns = int((frac + "000000000")[:9])
    zone = m.group(8)
    offset = 0
    if zone != "Z":
        oh, om = int(zone[1:3]), int(zone[4:6])
        if oh > 23 or om > 59:
            raise ValueError(f"a zone offset that does not exist: {text!r}")
        offset = (oh * 3600 + om * 60) * (1 if zone[0] == "+" else -1)
    secs = _days_from_civil(y, mo, d) * 86400 + hh * 3600 + mi * 60 + ss - offset
    return secs * 1_000_000_000 + ns


def _now_ns(now: datetime | str | None) -> int:
    if now is None:
        now = datetime.now(timezone.utc)
    if isinstance(now, str):
        return parse_timestamp(now)
    if now.tzinfo is None:
        raise ValueError("now must be timezone-aware")
    delta = now - datetime(1970, 1, 1, tzinfo=timezone.utc)
    return (delta.days * 86400 + delta.seconds) * 1_000_000_000 + delta.microseconds * 1000


# ---- the payload -------------------------------------------------------------


def _time(v: Any) -> str:
    """A strict RFC 3339 time, kept as its text."""
    text = _json.text(v)
    try:
        parse_timestamp(text)
    except ValueError as e:
        raise _json.JsonError(str(e)) from None
    return text


_F = _json.Field
_TEXT = _json.text
_OPT_TEXT = _json.optional(_json.text)

# A vote envelope inside a signed payload: read strictly, as everything there.
_VOTE_SIGNATURE = _json.struct(
    "VoteSignature",
    [
        _F("keyid", _TEXT),
        _F("sig", _TEXT),
        _F("authenticator_data", _OPT_TEXT, True),
        _F("client_data_json", _OPT_TEXT, True),
    ],
    strict=True,
)
_VOTE_ENVELOPE = _json.struct(
    "VoteEnvelope",
    [
        _F("payloadType", _TEXT),
        _F("payload", _TEXT),
        _F("signatures", _json.seq(_VOTE_SIGNATURE)),
    ],
    strict=True,
)
# `envelope` must be present; null is an unsigned vote.
_PAYLOAD_VOTE = _json.struct(
    "PayloadVote",
    [
        _F("voter", _TEXT),
        _F("approved", _json.boolean),
        _F("at", _time),
        _F("envelope", _json.optional(_VOTE_ENVELOPE)),
    ],
    strict=True,
)
# In declaration order: serde reads a struct from an array of its fields too.
_APPROVAL_PAYLOAD = _json.struct(
    "ApprovalPayload",
    [
        _F("v", _json.u32),
        _F("turn_id", _TEXT),
        _F("request_id", _TEXT),
        _F("tool_name", _TEXT),
        _F("args_json", _TEXT),
        _F("modified_args_json", _TEXT),
        _F("approved", _json.boolean),
        _F("approved_for_session", _json.boolean),
        _F("covered_capabilities", _json.seq(_TEXT)),
        _F("caller", _TEXT),
        _F("approver", _TEXT),
        _F("sandbox_mode", _TEXT),
        _F("reason", _TEXT),
        _F("injected_context", _TEXT),
        _F("conversation_id", _TEXT),
        _F("nonce", _TEXT),
        _F("issued_at", _time),
        _F("expires_at", _time),
        # Version 2 only, and there required (absent and null are the same).
        _F("votes", _json.optional(_json.seq(_PAYLOAD_VOTE)), True),
    ],
    strict=True,
)
# The envelope itself is read leniently (unknown fields ignored), as
# lev_protocol's `Envelope`.
_ENVELOPE_SIGNATURE = _json.struct(
    "EnvelopeSignature",
    [
        _F("keyid", _TEXT, True, ""),
        _F("sig", _TEXT),
        _F("authenticator_data", _OPT_TEXT, True),
        _F("client_data_json", _OPT_TEXT, True),
    ],
    strict=False,
)
_ENVELOPE = _json.struct(
    "Envelope",
    [
        _F("payloadType", _TEXT),
        _F("payload", _TEXT),
        _F("signatures", _json.seq(_ENVELOPE_SIGNATURE)),
    ],
    strict=False,
)


def strict_json(text: str | bytes) -> Any:
    """JSON as serde_json reads it into a strict struct: a duplicated key, NaN,
    a lone surrogate or text that is not UTF-8 is refused (raises ValueError)."""
    if isinstance(text, bytes):
        text = text.decode("utf-8")
    value = _json.load(text)
    _json.check_strict(value)
    return value


def _envelope_json(raw: Mapping[str, Any]) -> dict[str, Any]:
    """A read envelope as JSON: the passkey fields only when set."""
    return {
        "payloadType": raw["payloadType"],
        "payload": raw["payload"],
        "signatures": [
            {k: v for k, v in s.items() if v is not None or k in ("keyid", "sig")}
            for s in raw["signatures"]
        ],
    }


@dataclass(frozen=True)
class PayloadVote:
    """One vote of a version 2 decision (SPEC section 13): the voter's token
    name, their approve or deny, when the server recorded it, and their own
    signed vote envelope (None for an unsigned vote). Only what
    `VerifiedResponse.require_signed_votes` checks is the person's word;
    the rest is the server's."""

    voter: str
    approved: bool
    at: str
    envelope: dict[str, Any] | None

    @property
    def signed(self) -> bool:
        """Whether it carries a signed vote (not whether that verifies)."""
        return self.envelope is not None


@dataclass(frozen=True)
class VerifiedResponse:
    """A decoded approval payload after signature verification (the seed's type).

    `votes` is None for a payload of version 1, and the decision's votes for
    version 2 (`version`)."""

    turn_id: str
    request_id: str
    tool_name: str
    args_json: str
    modified_args_json: str
    approved: bool
    approved_for_session: bool
    covered_capabilities: list[str]
    caller: str
    approver: str
    sandbox_mode: str
    reason: str
    injected_context: str
    conversation_id: str
    nonce: str
    signer_public_key: bytes
    issued_at: str
    expires_at: str
    votes: list[PayloadVote] | None = None
    effective_args_json: str = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "effective_args_json", self.resolve_approved_call())

    @property
    def version(self) -> int:
        """The payload version: 2 when it carries votes, else 1."""
        return PAYLOAD_VERSION if self.votes is None else PAYLOAD_VERSION_VOTES

    def authorizes_call(self, request_id: str, tool_name: str, args_json: str | bytes) -> bool:
        """The exact call (args byte for byte); never true for a denial."""
        args = args_json.encode() if isinstance(args_json, str) else args_json
        return (
            self.approved
            and self.request_id == request_id
            and self.tool_name == tool_name
            and self.args_json.encode() == args
        )

    def check_call(
        self,
        request_id: str,
        tool_name: str,
        args_json: str | bytes,
        *,
        conversation_id: str | None = None,
        caller: str | None = None,
        sandbox_mode: str | None = None,
    ) -> None:
        """Raise NotAuthorizedError naming the first field that differs, or `denied`."""
        args = args_json.encode() if isinstance(args_json, str) else args_json
        for name, signed, actual in (
            ("request_id", self.request_id, request_id),
            ("tool_name", self.tool_name, tool_name),
        ):
            if signed != actual:
                raise NotAuthorizedError(name, f"approval is for {name} {signed!r}, not {actual!r}")
        if self.args_json.encode() != args:
            raise NotAuthorizedError(
                "args_json",
                f"approval is for args_json {self.args_json!r}, "
                f"not {args.decode('utf-8', 'replace')!r}",
            )
        for name, signed, ctx in (
            ("conversation_id", self.conversation_id, conversation_id),
            ("caller", self.caller, caller),
            ("sandbox_mode", self.sandbox_mode, sandbox_mode),
        ):
            if ctx is not None and signed != ctx:
                raise NotAuthorizedError(name, f"approval is for {name} {signed!r}, not {ctx!r}")
        if not self.approved:
            msg = "the call was denied"
            raise NotAuthorizedError("denied", f"{msg}: {self.reason}" if self.reason else msg)

    def resolve_approved_call(self) -> str:
        """The args to execute: the edit when there is one, else the proposed args."""
        return self.modified_args_json or self.args_json

    @property
    def signer_kid(self) -> str:
        return key_id(self.signer_public_key)

    def check_votes(self, people_keys: PeopleKeysLike) -> list[VoteCheck]:
        """Every vote this decision carries, checked: its envelope verifies under
        a key registered to the voter the decision names, names that voter,
        agrees with the vote's `approved`, and binds this exact decision. A
        version 1 payload carries none."""
        from ._votes import check_votes

        return check_votes(self, people_keys)

    def signed_voters(self, people_keys: PeopleKeysLike) -> frozenset[str]:
        """The distinct people whose signed votes verify and bind this decision."""
        return frozenset(c.voter for c in self.check_votes(people_keys) if c.ok)

    def require_signed_votes(self, people_keys: PeopleKeysLike, n: int) -> frozenset[str]:
        """At least `n` distinct people's signed votes verify and bind this
        decision, which must be an approval: those people. Raises
        `NotEnoughVotes` (a `NotAuthorizedError`, code `votes`) otherwise;
        a denial never passes."""
        from ._votes import require_signed_votes

        return require_signed_votes(self, people_keys, n)


def _parse_payload(raw: bytes) -> tuple[dict[str, Any], int, int]:
    try:
        p = _APPROVAL_PAYLOAD(_json.load(raw))
    except _json.JsonError as e:
        raise VerificationError("payload", f"invalid payload: {e}") from None
    return p, parse_timestamp(p["issued_at"]), parse_timestamp(p["expires_at"])


def read_envelope(envelope: Mapping[str, Any] | str | bytes) -> dict[str, Any]:
    """The envelope as lev_protocol reads it (raises `_json.JsonError`)."""
    return _ENVELOPE(_json.load(envelope) if isinstance(envelope, (str, bytes)) else envelope)


def _as_envelope(envelope: Mapping[str, Any] | str | bytes) -> dict[str, Any]:
    try:
        return read_envelope(envelope)
    except _json.JsonError as e:
        raise VerificationError("malformed", f"malformed envelope: {e}") from None


def shorten(text: str, n: int) -> str:
    """`text` cut to `n` characters (an ellipsis marks the cut), control
    characters escaped: envelope text is attacker-written."""
    out = "".join(c if c.isprintable() else repr(c)[1:-1] for c in text[:n])
    return out + ("…" if len(text) > n else "")


_PAYLOAD_VERSIONS = {APPROVAL_PAYLOAD_TYPE: PAYLOAD_VERSION, APPROVAL_PAYLOAD_TYPE_V2: 2}


def verify_envelope(
    envelope: Mapping[str, Any] | str | bytes,
    keys: TrustedKeys,
    now: datetime | str | None = None,
) -> VerifiedResponse:
    """Verify an envelope's signature, payload and lifetime; see the module docs.

    Raises VerificationError whose `code` names the first check that failed:
    `malformed`, `payload_type`, `untrusted_key`, `bad_signature`, `payload`,
    `version`, `expired` or `not_yet_valid`.
    """
    env = _as_envelope(envelope)
    version = _PAYLOAD_VERSIONS.get(env["payloadType"])
    if version is None:
        raise VerificationError(
            "payload_type",
            f"expected payload type {APPROVAL_PAYLOAD_TYPE!r} (or version=2), "
            f"found {shorten(env['payloadType'], 100)!r}",
        )
    sigs: list[dict[str, Any]] = env["signatures"]
    if not sigs:
        raise VerificationError("malformed", "malformed envelope: no signatures")
    if len(sigs) > MAX_SIGNATURES:
        raise VerificationError(
            "malformed",
            f"malformed envelope: {len(sigs)} signatures, more than the "
            f"{MAX_SIGNATURES} a verifier examines",
        )
    try:
        payload = decode_base64(env["payload"])
    except ValueError as e:
        raise VerificationError("malformed", f"malformed envelope: payload: {e}") from None
    message = pae(env["payloadType"], payload)
    signer: bytes | None = None
    tried_trusted: str | None = None
    undecodable: str | None = None
    for index, s in enumerate(sigs):
        kid: str = s["keyid"]
        try:
            sig = decode_base64(s["sig"])
            if len(sig) != 64:
                raise ValueError(f"not 64 bytes (found {len(sig)} bytes)")
        except ValueError as e:
            if undecodable is None and keys.contains_kid(kid):
                undecodable = f"signature {index} by key {shorten(kid, 32)}: {e}"
            continue
        for key in keys.candidates(kid):
            if _verify_strict(key, message, sig):
                signer = key.raw
                break
        if signer is not None:
            break
        if tried_trusted is None and keys.contains_kid(kid):
            tried_trusted = kid
    if signer is None:
        if tried_trusted is not None:
            raise VerificationError(
                "bad_signature",
                f"bad signature: the envelope was altered or not signed by key {tried_trusted}",
            )
        if undecodable is not None:
            raise VerificationError("malformed", f"malformed envelope: {undecodable}")
        listed = [shorten(s["keyid"], 32) for s in sigs[:5]]
        if len(sigs) > 5:
            listed.append(f"and {len(sigs) - 5} more")
        raise VerificationError(
            "untrusted_key", f"no signature by a trusted key (key ids {', '.join(listed)})"
        )
    p, issued, expires = _parse_payload(payload)
    # The version is the one the payload type names, and only version 2
    # carries votes (and must).
    if p["v"] != version or (p["votes"] is not None) != (version == PAYLOAD_VERSION_VOTES):
        raise VerificationError(
            "version",
            "expected payload version 1 (no votes) or 2 (votes), as its payload type says; "
            f"found {p['v']}",
        )
    caps: list[str] = p["covered_capabilities"]
    if any(a >= b for a, b in itertools.pairwise(caps)):
        raise VerificationError(
            "payload", "invalid payload: covered_capabilities is not sorted without duplicates"
        )
    if expires < issued:
        raise VerificationError("payload", "invalid payload: expires_at is before issued_at")
    t = _now_ns(now)
    if t < issued - CLOCK_SKEW_NS:
        raise VerificationError(
            "not_yet_valid", f"issued in the future at {p['issued_at']} (now {t // 10**9} s)"
        )
    if t > expires + CLOCK_SKEW_NS:
        raise VerificationError("expired", f"expired at {p['expires_at']}")
    votes = None
    if p["votes"] is not None:
        votes = [
            PayloadVote(
                voter=v["voter"],
                approved=v["approved"],
                at=v["at"],
                envelope=None if v["envelope"] is None else _envelope_json(v["envelope"]),
            )
            for v in p["votes"]
        ]
    return VerifiedResponse(
        turn_id=p["turn_id"],
        request_id=p["request_id"],
        tool_name=p["tool_name"],
        args_json=p["args_json"],
        modified_args_json=p["modified_args_json"],
        approved=p["approved"],
        approved_for_session=p["approved_for_session"],
        covered_capabilities=list(caps),
        caller=p["caller"],
        approver=p["approver"],
        sandbox_mode=p["sandbox_mode"],
        reason=p["reason"],
        injected_context=p["injected_context"],
        conversation_id=p["conversation_id"],
        nonce=p["nonce"],
        signer_public_key=signer,
        issued_at=p["issued_at"],
        expires_at=p["expires_at"],
        votes=votes,
    )


def _votes_needed(n: Any, what: str) -> int:
    if type(n) is not int or n < 0:
        raise ValueError(f"{what} must be a count of people (an int, 0 or more), not {n!r}")
    return n


def verify(
    envelope: Mapping[str, Any] | str | bytes,
    keys: TrustedKeys | Mapping[str, Any] | Iterable[bytes | str],
    *,
    request_id: str,
    tool_name: str,
    args_json: str | bytes,
    conversation_id: str | None = None,
    caller: str | None = None,
    sandbox_mode: str | None = None,
    now: datetime | str | None = None,
    people_keys: PeopleKeys | Mapping[str, Any] | str | None = None,
    require_votes: int | None = None,
) -> VerifiedResponse:
    """Verify `envelope` and check that it authorizes exactly this call in this context.

    Returns the verified response (`effective_args_json` holds the args to run);
    raises VerificationError when it is not genuine or not valid now, and
    NotAuthorizedError when it is genuine but does not authorize the call (a
    denial, another call, another conversation, caller or sandbox mode). A
    context field left None is not checked.

    `require_votes=N` also requires N distinct people's signed votes that
    verify under their keys in `people_keys` (the JWKS of `GET
    /v1/people/keys`, or a `PeopleKeys`) and bind this call, as `lev verify
    --require-votes N --people-keys FILE` does: fewer raise `NotEnoughVotes`
    (a NotAuthorizedError, code `votes`); unusable people keys (or none)
    raise KeyRefused. Without `require_votes`, `people_keys` is not read.
    """
    if require_votes is not None:
        _votes_needed(require_votes, "require_votes")
    if not isinstance(keys, TrustedKeys):
        keys = TrustedKeys.from_jwks(keys) if isinstance(keys, Mapping) else TrustedKeys(keys)
    verified = verify_envelope(envelope, keys, now)
    verified.check_call(
        request_id,
        tool_name,
        args_json,
        conversation_id=conversation_id,
        caller=caller,
        sandbox_mode=sandbox_mode,
    )
    if require_votes is not None:
        if people_keys is None:
            raise KeyRefused(
                "malformed_key",
                "require_votes needs people_keys: the JWKS of GET /v1/people/keys",
            )
        verified.require_signed_votes(people_keys, require_votes)
    return verified
