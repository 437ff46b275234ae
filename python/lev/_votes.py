"""Votes people sign with their own keys (SPEC section 13), checked as the
Rust verifier checks them (`crates/lev-approval/src/votes.rs`).

A vote is a DSSE envelope of type `application/vnd.lev.vote+json; version=1`
over `{"v":1, "request_id", "tool_name", "args_sha256",
"effective_args_sha256", "conversation_id", "caller", "sandbox_mode",
"approved", "scope", "voter", "issued_at"}`, signed either

- by an Ed25519 key of `lev key init`: a plain (strict) signature over the
  pre-authentication encoding (PAE), or
- by a passkey: a WebAuthn assertion whose challenge is the SHA-256 of the
  PAE; the signature entry carries the authenticator data and the client data
  JSON, and the signature (ES256 in DER, or EdDSA) is over
  `authenticator_data || SHA-256(client_data_json)`.

People's public keys are the JWKS of `GET /v1/people/keys` (`PeopleKeys`),
each `kid` `person:NAME:N`. A vote verifies only under a key registered to
the voter it names, so a server that holds no person's private key cannot
make one up, and one person's key cannot vote for another.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from . import _json
from ._errors import KeyRefused, NotEnoughVotes, VoteError
from ._verify import (
    _decompress,
    _is_small_order,
    _time,
    decode_base64,
    ed25519_verify_strict,
    pae,
    parse_timestamp,
    read_envelope,
    shorten,
)

if TYPE_CHECKING:
    from ._verify import VerifiedResponse

VOTE_PAYLOAD_TYPE = "application/vnd.lev.vote+json; version=1"
VOTE_VERSION = 1
# The most signatures a vote envelope may carry (each is tried against the
# voter's keys only).
MAX_VOTE_SIGNATURES = 4
# The most keys one person may have registered; more are refused when the
# key set is read.
MAX_KEYS_PER_PERSON = 16
CLOCK_SKEW_NS = 60 * 1_000_000_000
SCOPES = ("once", "session", "always")


def sha256_hex(data: bytes) -> str:
    """Lowercase hex SHA-256."""
    return hashlib.sha256(data).hexdigest()


# ---- people's keys -----------------------------------------------------------

_F = _json.Field
_OPT_TEXT = _json.optional(_json.text)
_PERSON_JWK = _json.struct(
    "PersonJwk",
    [
        _F("kty", _json.text),
        _F("crv", _json.text),
        _F("x", _json.text),
        _F("y", _OPT_TEXT, True),
        _F("kid", _json.text, True, ""),
        _F("alg", _OPT_TEXT, True),
        _F("use", _OPT_TEXT, True),
        _F("rp_id", _OPT_TEXT, True),
        _F("credential_id", _OPT_TEXT, True),
    ],
    strict=False,
)
_PEOPLE_JWKS = _json.struct("PeopleJwks", [_F("keys", _json.seq(_PERSON_JWK))], strict=False)

_ID = re.compile(r"\A[A-Za-z0-9._:\-]{1,128}\Z")


def parse_person_kid(kid: str) -> tuple[str, int] | None:
    """The person a key id `person:NAME:N` names, and N (1 or more, written
    without a sign or leading zeros); None for any other key id."""
    if not kid.startswith("person:"):
        return None
    name, sep, n = kid[len("person:") :].rpartition(":")
    if not sep or not (n.isascii() and n.isdigit()) or len(n) > 10 or n != str(int(n)):
        return None
    number = int(n)
    if not 1 <= number <= 0xFFFF_FFFF or not _ID.match(name):
        return None
    return name, number


@dataclass(frozen=True)
class PersonKey:
    """One registered key of one person. `public_key` is the raw Ed25519 key
    (32 bytes) or the uncompressed P-256 point (65 bytes); `rp_id` is a
    passkey's relying party (None for a `lev key init` key)."""

    kid: str
    person: str
    kty: str
    public_key: bytes
    rp_id: str | None = None
    credential_id: str | None = None
    _ed25519: Ed25519PublicKey | None = field(default=None, repr=False, compare=False)
    _p256: ec.EllipticCurvePublicKey | None = field(default=None, repr=False, compare=False)

    @property
    def is_passkey(self) -> bool:
        """Whether its votes are WebAuthn assertions."""
        return self.rp_id is not None

    def verify_plain(self, message: bytes, sig: bytes) -> bool:
        """A signature by this key over `message`: strict Ed25519, or ES256 in DER."""
        if self._ed25519 is not None:
            return ed25519_verify_strict(self._ed25519, message, sig)
        if self._p256 is None:
            # A point off the curve: such a key never verifies a vote.
            return False
        try:
            self._p256.verify(sig, message, ec.ECDSA(hashes.SHA256()))
        except InvalidSignature:
            return False
        return True


def _person_key(jwk: dict[str, Any]) -> PersonKey:
    kid: str = jwk["kid"]
    parsed = parse_person_kid(kid)
    if parsed is None:
        raise KeyRefused("malformed_key", f"kid: expected person:NAME:N, found {kid[:140]!r}")

    def field_bytes(name: str, text: str) -> bytes:
        try:
            return decode_base64(text)
        except ValueError as e:
            raise KeyRefused("malformed_key", f"{kid}: {name}: {e}") from None

    kty, crv, alg = jwk["kty"], jwk["crv"], jwk["alg"]
    common = {
        "kid": kid,
        "person": parsed[0],
        "kty": kty,
        "rp_id": jwk["rp_id"],
        "credential_id": jwk["credential_id"],
    }
    if (kty, crv) == ("OKP", "Ed25519"):
        if alg is not None and alg != "EdDSA":
            raise KeyRefused("malformed_key", f"{kid}: alg: an Ed25519 key is EdDSA")
        raw = field_bytes("x", jwk["x"])
        if len(raw) != 32:
            raise KeyRefused("invalid_key", f"{kid}: x: not 32 bytes")
        point = _decompress(raw)
        if point is None:
            raise KeyRefused("invalid_key", f"{kid}: bytes that are not a curve point")
        if _is_small_order(point):
            raise KeyRefused(
                "weak_key",
                f"weak (small-order) public key {kid} refused: signatures under it can be forged",
            )
        return PersonKey(public_key=raw, _ed25519=Ed25519PublicKey.from_public_bytes(raw), **common)
    if (kty, crv) == ("EC", "P-256"):
        if alg is not None and alg != "ES256":
            raise KeyRefused("malformed_key", f"{kid}: alg: a P-256 key is ES256")
        x = field_bytes("x", jwk["x"])
        y = field_bytes("y", jwk["y"] or "")
        if len(x) != 32 or len(y) != 32:
            raise KeyRefused("invalid_key", f"{kid}: x and y of a P-256 key are 32 bytes each")
        encoded = b"\x04" + x + y
        try:
            p256: ec.EllipticCurvePublicKey | None = ec.EllipticCurvePublicKey.from_encoded_point(
                ec.SECP256R1(), encoded
            )
        except ValueError:
            p256 = None
        return PersonKey(public_key=encoded, _p256=p256, **common)
    raise KeyRefused(
        "malformed_key",
        f"{kid}: expected an Ed25519 (OKP) or P-256 (EC) key, "
        f"found kty {shorten(kty, 20)!r} and crv {shorten(crv, 20)!r}",
    )


class PeopleKeys:
    """People's registered public keys, as `GET /v1/people/keys` serves them
    (`Client.people_keys()`): a JWKS dict, or its JSON text.

    Raises `KeyRefused` for a key set that is not such a JWKS
    (`malformed_key`), a `kid` that is not `person:NAME:N`, a key that is not
    a valid Ed25519 (`invalid_key`, or `weak_key` for a small-order one) or
    P-256 key, or a person with more than 16 keys. A P-256 point off the
    curve is kept, and never verifies a vote, as in the Rust verifier.
    """

    def __init__(self, jwks: Mapping[str, Any] | str | bytes | None = None) -> None:
        self._keys: list[PersonKey] = []
        if jwks is None:
            return
        if isinstance(jwks, (str, bytes)):
            text = jwks.decode("utf-8", "surrogateescape") if isinstance(jwks, bytes) else jwks
            try:
                value: Any = _json.load(text.strip(_json.RUST_WHITESPACE))
            except _json.JsonError as e:
                raise KeyRefused(
                    "malformed_key", f"expected the people keys JWKS of GET /v1/people/keys, {e}"
                ) from None
        else:
            value = jwks
        try:
            entries = _PEOPLE_JWKS(value)["keys"]
        except _json.JsonError as e:
            raise KeyRefused(
                "malformed_key", f"expected the people keys JWKS of GET /v1/people/keys, {e}"
            ) from None
        for jwk in entries:
            key = _person_key(jwk)
            if sum(1 for _ in self.of(key.person)) >= MAX_KEYS_PER_PERSON:
                raise KeyRefused(
                    "malformed_key", f"{key.person} has more than {MAX_KEYS_PER_PERSON} keys"
                )
            if not any(k.kid == key.kid for k in self._keys):
                self._keys.append(key)

    @classmethod
    def from_jwks(cls, jwks: Mapping[str, Any] | str | bytes) -> PeopleKeys:
        """The keys of a people JWKS (`{"keys": [...]}`), or its JSON text."""
        return cls(jwks)

    def of(self, person: str) -> Iterator[PersonKey]:
        """The keys registered to `person`."""
        return (k for k in self._keys if k.person == person)

    @property
    def keys(self) -> list[PersonKey]:
        return list(self._keys)

    @property
    def kids(self) -> list[str]:
        return [k.kid for k in self._keys]

    def __len__(self) -> int:
        return len(self._keys)

    def __iter__(self) -> Iterator[PersonKey]:
        return iter(list(self._keys))

    def __repr__(self) -> str:
        return f"PeopleKeys({self.kids!r})"


PeopleKeysLike = PeopleKeys | Mapping[str, Any] | str | bytes


def people_keys_of(people: PeopleKeysLike) -> PeopleKeys:
    return people if isinstance(people, PeopleKeys) else PeopleKeys(people)


# ---- votes -------------------------------------------------------------------

_VOTE_PAYLOAD = _json.struct(
    "VotePayload",
    [
        _F("v", _json.u32),
        *(
            _F(name, _json.text)
            for name in (
                "request_id",
                "tool_name",
                "args_sha256",
                "effective_args_sha256",
                "conversation_id",
                "caller",
                "sandbox_mode",
            )
        ),
        _F("approved", _json.boolean),
        _F("scope", _json.text),
        _F("voter", _json.text),
        _F("issued_at", _time),
    ],
    strict=True,
)
# What a passkey's client data must say; other fields are ignored.
_CLIENT_DATA = _json.struct(
    "ClientData",
    [_F("type", _json.text), _F("challenge", _json.text), _F("origin", _json.text, True, "")],
    strict=False,
)


@dataclass(frozen=True)
class VotePayload:
    """What a voter signs."""

    v: int
    request_id: str
    tool_name: str
    args_sha256: str
    effective_args_sha256: str
    conversation_id: str
    caller: str
    sandbox_mode: str
    approved: bool
    scope: str
    voter: str
    issued_at: str


@dataclass(frozen=True)
class VerifiedVote:
    """A vote whose signature verified: what the voter signed, and the key."""

    payload: VotePayload
    kid: str


def _origin_on(origin: str, rp_id: str) -> bool:
    """Whether `origin` (`scheme://host[:port]`) is on `rp_id` or a subdomain."""
    _, sep, rest = origin.partition("://")
    if not sep:
        return False
    host, colon, port = rest.rpartition(":")
    if not (colon and port and port.isascii() and port.isdigit()):
        host = rest
    return host == rp_id or (host.endswith(rp_id) and host[: len(host) - len(rp_id)].endswith("."))


def _check_assertion(
    key: PersonKey, message: bytes, sig: bytes, authenticator_data: str, client_data_json: str
) -> bool:
    """A passkey's assertion over `message` (the vote's PAE) by `key`: False
    when only the signature fails, VoteError `assertion` when the rest does."""

    def bad(why: str) -> VoteError:
        return VoteError("assertion", f"the passkey assertion does not hold: {why}")

    rp_id = key.rp_id or ""
    try:
        auth = decode_base64(authenticator_data)
    except ValueError:
        raise bad("authenticator_data is not base64") from None
    try:
        client = decode_base64(client_data_json)
    except ValueError:
        raise bad("client_data_json is not base64") from None
    if len(auth) < 37:
        raise bad("authenticator_data is shorter than 37 bytes")
    if auth[:32] != hashlib.sha256(rp_id.encode()).digest():
        raise bad(f"authenticator_data is for another relying party than {rp_id!r}")
    if not auth[32] & 0x01:
        raise bad("the authenticator did not see the user present (UP flag)")
    try:
        text = client.decode("utf-8")
    except UnicodeDecodeError:
        raise bad("client_data_json is not UTF-8") from None
    try:
        value = _json.load(text)
        _json.check_strict(value)
        data = _CLIENT_DATA(value)
    except _json.JsonError as e:
        raise bad(f"client_data_json: {e}") from None
    if data["type"] != "webauthn.get":
        raise bad(f'client_data_json type is {data["type"][:40]!r}, not "webauthn.get"')
    try:
        challenge = decode_base64(data["challenge"])
    except ValueError:
        raise bad("the challenge is not base64url") from None
    if challenge != hashlib.sha256(message).digest():
        raise bad("the challenge is not this vote's (the SHA-256 of its PAE)")
    if not _origin_on(data["origin"], rp_id):
        raise bad(f"origin {data['origin'][:100]!r} is not on {rp_id!r}")
    return key.verify_plain(auth + hashlib.sha256(client).digest(), sig)


def _verify_read_vote(env: Mapping[str, Any], people: PeopleKeys) -> VerifiedVote:
    if env["payloadType"] != VOTE_PAYLOAD_TYPE:
        raise VoteError(
            "malformed",
            f"malformed vote: expected payload type {VOTE_PAYLOAD_TYPE!r}, "
            f"found {env['payloadType'][:100]!r}",
        )
    sigs: list[Mapping[str, Any]] = env["signatures"]
    if not 1 <= len(sigs) <= MAX_VOTE_SIGNATURES:
        raise VoteError(
            "malformed",
            f"malformed vote: expected 1 to {MAX_VOTE_SIGNATURES} signatures, found {len(sigs)}",
        )
    try:
        raw = decode_base64(env["payload"])
    except ValueError as e:
        raise VoteError("malformed", f"malformed vote: payload: {e}") from None
    try:
        p = _VOTE_PAYLOAD(_json.load(raw))
    except _json.JsonError as e:
        raise VoteError("payload", f"invalid vote payload: {e}") from None
    if p["v"] != VOTE_VERSION:
        raise VoteError("payload", f"invalid vote payload: expected vote version 1, found {p['v']}")
    if p["scope"] not in SCOPES:
        raise VoteError(
            "payload",
            "invalid vote payload: scope: expected once, session or always, "
            f"found {p['scope'][:20]!r}",
        )
    payload = VotePayload(**p)
    message = pae(VOTE_PAYLOAD_TYPE, raw)
    keys = list(people.of(payload.voter))
    assertion_error: VoteError | None = None
    for s in sigs:
        try:
            sig = decode_base64(s["sig"])
        except ValueError:
            continue
        hinted = [k for k in keys if k.kid == s["keyid"]]
        others = [k for k in keys if k.kid != s["keyid"]]
        auth, client = s.get("authenticator_data"), s.get("client_data_json")
        for key in hinted + others:
            ok = False
            if auth is not None and client is not None and key.is_passkey:
                try:
                    ok = _check_assertion(key, message, sig, auth, client)
                except VoteError as e:
                    assertion_error = assertion_error or e
            elif auth is None and client is None and not key.is_passkey:
                ok = key.verify_plain(message, sig)
            # Otherwise: a passkey signs only through WebAuthn, a CLI key never does.
            if ok:
                return VerifiedVote(payload, key.kid)
    if assertion_error is not None:
        raise assertion_error
    registered = f" ({len(keys)} registered)" if keys else " (they have registered none)"
    raise VoteError(
        "not_signed",
        f"the vote is not signed by a key registered to {payload.voter[:128]!r}{registered}",
    )


def verify_vote(
    envelope: Mapping[str, Any] | str | bytes, people_keys: PeopleKeysLike
) -> VerifiedVote:
    """Verify a vote envelope's signature under the keys of the voter it names
    (a strict payload parse, version 1, a known scope). Whether it binds a
    given decision is `check_vote_binding`'s. Raises `VoteError`."""
    people = people_keys_of(people_keys)
    try:
        env = read_envelope(envelope)
    except _json.JsonError as e:
        raise VoteError("malformed", f"malformed vote: {e}") from None
    return _verify_read_vote(env, people)


def _mismatch(field: str, signed: str, expected: str) -> VoteError:
    return VoteError(
        "mismatch", f"the vote is for {field} {signed!r}, not {expected!r}", field=field
    )


def check_vote_binding(vote: VotePayload, approval: VerifiedResponse) -> None:
    """Check that `vote` binds the decision `approval`: the same call, the same
    args to run, the same context, the same decision, a scope that covers it,
    made no later than the decision (give or take 60 s). Raises VoteError
    `mismatch` naming the first field that differs."""
    args = sha256_hex(approval.args_json.encode())
    effective = sha256_hex(approval.resolve_approved_call().encode())
    for name, signed, expected in (
        ("request_id", vote.request_id, approval.request_id),
        ("tool_name", vote.tool_name, approval.tool_name),
        ("args_sha256", vote.args_sha256, args),
        ("conversation_id", vote.conversation_id, approval.conversation_id),
        ("caller", vote.caller, approval.caller),
        ("sandbox_mode", vote.sandbox_mode, approval.sandbox_mode),
        ("approved", str(vote.approved).lower(), str(approval.approved).lower()),
    ):
        if signed != expected:
            raise _mismatch(name, signed[:200], expected)
    if approval.approved and vote.effective_args_sha256 != effective:
        raise _mismatch("effective_args_sha256", vote.effective_args_sha256[:80], effective)
    if (
        approval.approved
        and approval.approved_for_session
        and vote.scope not in ("session", "always")
    ):
        raise _mismatch("scope", vote.scope, "session or always")
    if parse_timestamp(vote.issued_at) - CLOCK_SKEW_NS > parse_timestamp(approval.issued_at):
        raise _mismatch("issued_at", vote.issued_at, "no later than the decision")


@dataclass(frozen=True)
class VoteCheck:
    """One vote of a decision, checked: the voter the decision names, and the
    key whose signature verified (`kid`) or why the vote does not count
    (`error`; an unsigned vote is `not_signed`)."""

    voter: str
    kid: str | None
    error: VoteError | None

    @property
    def ok(self) -> bool:
        return self.error is None


def _check_one(
    voter: str,
    approved: bool,
    env: Mapping[str, Any] | None,
    verified: VerifiedResponse,
    people: PeopleKeys,
) -> str:
    if env is None:
        raise VoteError(
            "not_signed",
            f"the vote is not signed by a key registered to {voter!r} (it carries no signature)",
        )
    vote = _verify_read_vote(env, people)
    if vote.payload.voter != voter:
        raise _mismatch("voter", vote.payload.voter, voter)
    if vote.payload.approved != approved:
        raise _mismatch("approved", str(vote.payload.approved).lower(), str(approved).lower())
    check_vote_binding(vote.payload, verified)
    return vote.kid


def check_votes(verified: VerifiedResponse, people_keys: PeopleKeysLike) -> list[VoteCheck]:
    """Every vote `verified` carries, checked (none for a version 1 payload)."""
    people = people_keys_of(people_keys)
    out = []
    for v in verified.votes or []:
        try:
            kid = _check_one(v.voter, v.approved, v.envelope, verified, people)
        except VoteError as e:
            out.append(VoteCheck(v.voter, None, e))
        else:
            out.append(VoteCheck(v.voter, kid, None))
    return out


def require_signed_votes(
    verified: VerifiedResponse, people_keys: PeopleKeysLike, needed: int
) -> frozenset[str]:
    """At least `needed` distinct people's signed votes verify and bind
    `verified`, an approval: those people. Raises NotEnoughVotes."""
    if type(needed) is not int or needed < 0:
        raise ValueError(f"the count of votes must be an int, 0 or more, not {needed!r}")
    voters: set[str] = set()
    problems: list[str] = []
    for c in check_votes(verified, people_keys):
        if c.error is not None:
            problems.append(f"{c.voter}: {c.error.message}")
        elif verified.approved:
            voters.add(c.voter)
        else:
            problems.append(f"{c.voter}: the decision is a denial")
    if verified.approved and len(voters) >= needed:
        return frozenset(voters)
    raise NotEnoughVotes(len(voters) if verified.approved else 0, needed, problems)


__all__ = [
    "MAX_KEYS_PER_PERSON",
    "MAX_VOTE_SIGNATURES",
    "VOTE_PAYLOAD_TYPE",
    "PeopleKeys",
    "PersonKey",
    "VerifiedVote",
    "VoteCheck",
    "VotePayload",
    "check_vote_binding",
    "check_votes",
    "parse_person_kid",
    "require_signed_votes",
    "sha256_hex",
    "verify_vote",
]
