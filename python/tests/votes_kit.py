"""Signed votes and version 2 decisions for the tests, made as lev makes them:
a trusted key that signs decisions, people's `lev key init` keys (Ed25519) and
passkeys (EdDSA and ES256) with WebAuthn assertions, all from fixed seeds."""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Callable
from typing import Any

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

import lev
from lev._verify import pae

RP_ID = "lev.example.com"
ORIGIN = "https://lev.example.com"
ISSUED_AT = "2026-01-01T12:00:00Z"
VOTED_AT = "2026-01-01T11:59:20Z"
NOW = "2026-01-01T12:05:00Z"
ARGS = '{"argv":["cargo","test","--workspace"],"cwd":"/home/alice/project"}'
EDITED = '{"argv":["cargo","test","--offline"],"cwd":"/home/alice/project"}'
CALL = {"request_id": "call-1", "tool_name": "shell", "args_json": ARGS}
CONTEXT = {"conversation_id": "c-1", "caller": "alice", "sandbox_mode": "workspace-write"}


def b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode()


def b64url(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def compact(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


def ed25519(seed: int) -> Ed25519PrivateKey:
    return Ed25519PrivateKey.from_private_bytes(bytes([seed]) * 32)


def raw_public(key: Ed25519PrivateKey) -> bytes:
    return key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


SERVER = ed25519(0x11)
ANN = ed25519(0x44)
BOB = ed25519(0x55)
CAROL = ed25519(0x66)  # a passkey, EdDSA
DANA = ec.derive_private_key(int.from_bytes(b"\x07" * 32, "big"), ec.SECP256R1())  # ES256
TRUSTED = b64url(raw_public(SERVER))


def cli_jwk(key: Ed25519PrivateKey, kid: str) -> dict[str, Any]:
    x = b64url(raw_public(key))
    return {"kty": "OKP", "crv": "Ed25519", "x": x, "kid": kid, "alg": "EdDSA", "use": "sig"}


def dana_jwk() -> dict[str, Any]:
    point = DANA.public_key().public_bytes(
        serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint
    )
    return {
        "kty": "EC",
        "crv": "P-256",
        "x": b64url(point[1:33]),
        "y": b64url(point[33:]),
        "kid": "person:dana:1",
        "alg": "ES256",
        "use": "sig",
        "rp_id": RP_ID,
        "credential_id": b64url(b"dana-credential"),
    }


def people() -> dict[str, Any]:
    carol = {
        **cli_jwk(CAROL, "person:carol:1"),
        "rp_id": RP_ID,
        "credential_id": b64url(b"carol-credential"),
    }
    return {
        "keys": [
            cli_jwk(ANN, "person:ann:1"),
            cli_jwk(BOB, "person:bob:1"),
            carol,
            dana_jwk(),
        ]
    }


def sha256_hex(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def vote(voter: str, **changes: Any) -> dict[str, Any]:
    """The vote payload `voter` signs on the call, approving it once."""
    out: dict[str, Any] = {
        "v": 1,
        "request_id": CALL["request_id"],
        "tool_name": CALL["tool_name"],
        "args_sha256": sha256_hex(ARGS),
        "effective_args_sha256": sha256_hex(ARGS),
        "conversation_id": CONTEXT["conversation_id"],
        "caller": CONTEXT["caller"],
        "sandbox_mode": CONTEXT["sandbox_mode"],
        "approved": True,
        "scope": "once",
        "voter": voter,
        "issued_at": VOTED_AT,
    }
    out.update(changes)
    return out


def cli_vote(payload: dict[str, Any] | bytes, key: Ed25519PrivateKey, kid: str) -> dict[str, Any]:
    raw = payload if isinstance(payload, bytes) else compact(payload)
    sig = key.sign(pae(lev.VOTE_PAYLOAD_TYPE, raw))
    return {
        "payloadType": lev.VOTE_PAYLOAD_TYPE,
        "payload": b64(raw),
        "signatures": [{"keyid": kid, "sig": b64(sig)}],
    }


def client_data(challenge: str, origin: str = ORIGIN) -> bytes:
    return compact(
        {"type": "webauthn.get", "challenge": challenge, "origin": origin, "crossOrigin": False}
    )


def passkey_vote(
    payload: dict[str, Any] | bytes,
    key: Ed25519PrivateKey | ec.EllipticCurvePrivateKey,
    kid: str,
    *,
    rp_id: str = RP_ID,
    flags: int = 0x05,
    origin: str = ORIGIN,
    challenge_of: bytes | None = None,
    client: Callable[[str], bytes] | None = None,
    auth: bytes | None = None,
) -> dict[str, Any]:
    """A vote signed by a passkey, as a browser makes one; the keyword
    arguments make it wrong in one way."""
    raw = payload if isinstance(payload, bytes) else compact(payload)
    challenge = b64url(hashlib.sha256(pae(lev.VOTE_PAYLOAD_TYPE, challenge_of or raw)).digest())
    data = client(challenge) if client is not None else client_data(challenge, origin)
    authenticator = (
        auth
        if auth is not None
        else (hashlib.sha256(rp_id.encode()).digest() + bytes([flags]) + b"\x00\x00\x00\x01")
    )
    signed = authenticator + hashlib.sha256(data).digest()
    if isinstance(key, Ed25519PrivateKey):
        sig = key.sign(signed)
    else:
        sig = key.sign(signed, ec.ECDSA(hashes.SHA256()))
    return {
        "payloadType": lev.VOTE_PAYLOAD_TYPE,
        "payload": b64(raw),
        "signatures": [
            {
                "keyid": kid,
                "sig": b64(sig),
                "authenticator_data": b64(authenticator),
                "client_data_json": b64(data),
            }
        ],
    }


def entry(voter: str, envelope: dict[str, Any] | None, approved: bool = True) -> dict[str, Any]:
    return {"voter": voter, "approved": approved, "at": VOTED_AT, "envelope": envelope}


def decision(votes: list[Any] | None, **changes: Any) -> dict[str, Any]:
    """The approval payload of the call: version 2 with `votes`, or 1 (None)."""
    out: dict[str, Any] = {
        "v": 1 if votes is None else 2,
        "turn_id": "t-7",
        "request_id": CALL["request_id"],
        "tool_name": CALL["tool_name"],
        "args_json": ARGS,
        "modified_args_json": "",
        "approved": True,
        "approved_for_session": False,
        "covered_capabilities": ["proc-exec"],
        "caller": CONTEXT["caller"],
        "approver": "bob",
        "sandbox_mode": CONTEXT["sandbox_mode"],
        "reason": "",
        "injected_context": "",
        "conversation_id": CONTEXT["conversation_id"],
        "nonce": "ICEiIyQlJicoKSorLC0uLw",
        "issued_at": ISSUED_AT,
        "expires_at": "2026-01-01T12:10:00Z",
    }
    if votes is not None:
        out["votes"] = votes
    out.update(changes)
    return out


def signed(
    payload: dict[str, Any] | list[Any] | bytes, payload_type: str | None = None
) -> dict[str, Any]:
    """An envelope of `payload` signed by the trusted key."""
    raw = payload if isinstance(payload, bytes) else compact(payload)
    if payload_type is None:
        v2 = isinstance(payload, dict) and "votes" in payload
        payload_type = lev.APPROVAL_PAYLOAD_TYPE_V2 if v2 else lev.APPROVAL_PAYLOAD_TYPE
    sig = SERVER.sign(pae(payload_type, raw))
    kid = lev.key_id(raw_public(SERVER))
    return {
        "payloadType": payload_type,
        "payload": b64(raw),
        "signatures": [{"keyid": kid, "sig": b64(sig)}],
    }
