"""The Python verifier gives every committed test vector the Rust verifier's verdict."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import lev
from lev._verify import _decompress, _is_small_order

VECTORS = Path(__file__).resolve().parents[2] / "crates" / "lev-approval" / "tests" / "vectors"
FILES = sorted(VECTORS.glob("*.json"))


def evaluate(vector: dict[str, Any]) -> dict[str, Any]:
    """What the Python verifier concludes, as `vector_set.rs`'s `evaluate` does:
    `people_keys` are read only when `require_votes` is set, after the call
    checks; an unusable people JWKS (or none) is invalid `malformed_key`."""
    try:
        keys = lev.TrustedKeys(vector["trusted_keys"])
    except lev.KeyRefused as e:
        return {"verdict": "invalid", "error": e.code}
    ctx = vector.get("context") or {}
    call = vector["call"]
    try:
        verified = lev.verify(
            json.dumps(vector["envelope"]),
            keys,
            request_id=call["request_id"],
            tool_name=call["tool"],
            args_json=call["args_json"],
            conversation_id=ctx.get("conversation"),
            caller=ctx.get("caller"),
            sandbox_mode=ctx.get("sandbox_mode"),
            now=vector["now"],
            people_keys=vector.get("people_keys"),
            require_votes=vector.get("require_votes"),
        )
    except lev.VerificationError as e:
        return {"verdict": "invalid", "error": e.code}
    except lev.NotAuthorizedError as e:
        return {"verdict": "not_authorized", "reason": e.code}
    except lev.KeyRefused:
        return {"verdict": "invalid", "error": "malformed_key"}
    return {"verdict": "authorized", "effective_args_json": verified.effective_args_json}


def test_there_are_vectors() -> None:
    assert len(FILES) >= 62
    assert any(f.stem.startswith("v2_") for f in FILES)
    verdicts = {json.loads(f.read_text())["expect"]["verdict"] for f in FILES}
    assert verdicts == {"authorized", "not_authorized", "invalid"}


@pytest.mark.parametrize("path", FILES, ids=[f.stem for f in FILES])
def test_vector(path: Path) -> None:
    vector = json.loads(path.read_text())
    assert evaluate(vector) == vector["expect"], vector["description"]


VOTE_FILES = [f for f in FILES if "vote" in json.loads(f.read_text())]


def _independent_pae(payload_type: str, payload: bytes) -> bytes:
    """DSSE's pre-authentication encoding, written out here (not lev's)."""
    t = payload_type.encode("utf-8")
    return b"DSSEv1 %d %s %d %s" % (len(t), t, len(payload), payload)


def _b64(text: str) -> bytes:
    import base64

    text = text.replace("-", "+").replace("_", "/")
    return base64.b64decode(text + "=" * (-len(text) % 4), validate=True)


def test_there_are_vote_envelope_vectors() -> None:
    names = {f.stem for f in VOTE_FILES}
    assert {"vote_envelope_cli_key", "vote_envelope_payload_edited", "v2_denial"} <= names
    assert any(f.stem == "v2_denial" for f in FILES)


@pytest.mark.parametrize("path", VOTE_FILES, ids=[f.stem for f in VOTE_FILES])
def test_vote_envelope(path: Path) -> None:
    """A vote envelope on its own: its payload, PAE bytes and their SHA-256
    computed here, its Ed25519 signature checked with `cryptography` alone
    over those bytes, and the SDK's `verify_vote` giving the committed verdict."""
    import hashlib

    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    vector = json.loads(path.read_text())
    vote = vector["vote"]
    env = vote["envelope"]
    assert env["payloadType"] == "application/vnd.lev.vote+json; version=1"
    payload = _b64(env["payload"])
    assert payload == vote["payload_json"].encode("utf-8")
    message = _independent_pae(env["payloadType"], payload)
    assert message.hex() == vote["pae_hex"]
    assert hashlib.sha256(message).hexdigest() == vote["pae_sha256"]

    voter = json.loads(payload)["voter"]
    verified_by = []
    for jwk in vector["people_keys"]["keys"]:
        if not jwk["kid"].startswith(f"person:{voter}:") or jwk["kty"] != "OKP":
            continue
        key = Ed25519PublicKey.from_public_bytes(_b64(jwk["x"]))
        for sig in env["signatures"]:
            try:
                key.verify(_b64(sig["sig"]), message)
            except InvalidSignature:
                continue
            verified_by.append(jwk["kid"])
    expect = vote["expect"]
    if expect["verdict"] == "valid":
        assert voter == expect["voter"]
        assert verified_by == [expect["kid"]]
    else:
        assert verified_by == []

    try:
        verified = lev.verify_vote(env, vector["people_keys"])
    except lev.VoteError as e:
        got = {"verdict": "invalid", "error": e.code}
    else:
        got = {"verdict": "valid", "voter": verified.payload.voter, "kid": verified.kid}
    assert got == expect, vector["description"]


def test_the_weak_key_forgery_fools_openssl_but_not_lev() -> None:
    """The weak-key vector's forgery is real: OpenSSL accepts it; the SDK refuses the key."""
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    vector = json.loads((VECTORS / "weak_key.json").read_text())
    raw = lev._verify.decode_base64(vector["trusted_keys"][0])
    point = _decompress(raw)
    assert point is not None and _is_small_order(point)
    env = vector["envelope"]
    message = lev._verify.pae(env["payloadType"], lev._verify.decode_base64(env["payload"]))
    sig = lev._verify.decode_base64(env["signatures"][0]["sig"])
    Ed25519PublicKey.from_public_bytes(raw).verify(sig, message)  # no exception: accepted
    with pytest.raises(lev.KeyRefused) as e:
        lev.TrustedKeys([raw])
    assert e.value.code == "weak_key"


def test_every_small_order_point_is_refused() -> None:
    from lev._verify import _P

    # The eight small-order points: y in {1, -1, 0, ±sqrt(...)}; check a few encodings.
    for y in (1, _P - 1, 0):
        for sign in (0, 1):
            raw = (y | (sign << 255)).to_bytes(32, "little")
            with pytest.raises(lev.KeyRefused):
                lev.TrustedKeys([raw])


def test_base64_forms() -> None:
    d = lev._verify.decode_base64
    for text in ["+/+/AQ==", "+/+/AQ", "-_-_AQ==", "-_-_AQ"]:
        assert d(text) == bytes([0xFB, 0xFF, 0xBF, 0x01])
    for bad in ["not base64!", "AQ=", "AR=="]:
        with pytest.raises(ValueError):
            d(bad)
