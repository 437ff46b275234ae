"""The Python verifier and `lev verify --require-votes N --people-keys FILE`
reach the same verdict on decisions the committed vectors do not hold: JSON
read the way serde_json reads it (structs as arrays, `null` for an absent
optional field, `-0`, duplicated keys, lone surrogates, nesting), passkey
assertions wrong in one way each, and votes that bind the call or not."""

from __future__ import annotations

import base64
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import votes_kit as k
from conftest import lev_bin
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature

import lev

P256_ORDER = 0xFFFFFFFF00000000FFFFFFFFFFFFFFFFBCE6FAADA7179E84F3B9CAC2FC632551


def python_verdict(envelope: Any, people: Any, needed: int | None) -> dict[str, Any]:
    try:
        verified = lev.verify(
            envelope if isinstance(envelope, (str, bytes)) else json.dumps(envelope),
            [k.TRUSTED],
            **k.CALL,
            **k.CONTEXT,
            now=k.NOW,
            people_keys=people,
            require_votes=needed,
        )
    except lev.VerificationError as e:
        return {"verdict": "invalid", "error": e.code}
    except lev.NotAuthorizedError as e:
        return {"verdict": "not_authorized", "reason": e.code}
    return {"verdict": "authorized", "effective_args_json": verified.effective_args_json}


def rust_verdict(envelope: Any, people: Any, needed: int | None, tmp: Path) -> dict[str, Any]:
    text = envelope if isinstance(envelope, bytes) else str(envelope).encode()
    if not isinstance(envelope, (str, bytes)):
        text = json.dumps(envelope).encode()
    args = [
        lev_bin(),
        "verify",
        "--json",
        "--key",
        k.TRUSTED,
        "--request-id",
        k.CALL["request_id"],
        "--tool",
        k.CALL["tool_name"],
        "--args",
        k.CALL["args_json"],
        "--conversation",
        k.CONTEXT["conversation_id"],
        "--caller",
        k.CONTEXT["caller"],
        "--sandbox-mode",
        k.CONTEXT["sandbox_mode"],
        "--at",
        k.NOW,
    ]
    if needed is not None:
        keys = tmp / "people.json"
        keys.write_text(json.dumps(people))
        args += ["--require-votes", str(needed), "--people-keys", str(keys)]
    done = subprocess.run([*args, "-"], input=text, capture_output=True, timeout=60)
    if done.returncode == 0:
        verified = json.loads(done.stdout)
        effective = verified["modified_args_json"] or verified["args_json"]
        return {"verdict": "authorized", "effective_args_json": effective}
    try:
        out = json.loads(done.stdout)
    except ValueError:
        pytest.fail(f"lev verify exited {done.returncode}: {done.stderr.decode()}")
    out.pop("message", None)
    return dict(out)


def edit(payload: dict[str, Any], old: str, new: str) -> bytes:
    text = k.compact(payload).decode()
    assert old in text, old
    return text.replace(old, new, 1).encode()


def ann_vote(**changes: Any) -> dict[str, Any]:
    return k.cli_vote(k.vote("ann", **changes), k.ANN, "person:ann:1")


def carol(**kw: Any) -> dict[str, Any]:
    return k.passkey_vote(k.vote("carol"), k.CAROL, "person:carol:1", **kw)


def carol_client(make: Any) -> dict[str, Any]:
    """carol's passkey vote whose client data JSON is `make(challenge)`."""
    return carol(client=lambda c: make(c).encode())


def dana_with_sig(change: Any) -> dict[str, Any]:
    """dana's ES256 vote with its DER signature changed by `change(r, s)`."""
    env = k.passkey_vote(k.vote("dana"), k.DANA, "person:dana:1")
    r, s = decode_dss_signature(base64.b64decode(env["signatures"][0]["sig"]))
    env["signatures"][0]["sig"] = k.b64(change(r, s))
    return env


def der(r: int, s: int, pad: int = 0) -> bytes:
    """An ECDSA signature in DER, `r` with `pad` needless leading zero bytes."""

    def integer(n: int, pad: int = 0) -> bytes:
        raw = b"\x00" * pad + n.to_bytes((n.bit_length() + 8) // 8, "big")
        return b"\x02" + bytes([len(raw)]) + raw

    body = integer(r, pad) + integer(s)
    return b"\x30" + bytes([len(body)]) + body


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


def one(envelope: dict[str, Any]) -> dict[str, Any]:
    """A decision carrying one vote, listed under the voter its payload names."""
    payload = json.loads(base64.b64decode(envelope["payload"]))
    voter = payload[10] if isinstance(payload, list) else payload["voter"]
    return k.signed(k.decision([k.entry(voter, envelope)]))


def client_json(challenge: str, extra: str = "", origin: str = k.ORIGIN) -> str:
    return f'{{"type":"webauthn.get","challenge":"{challenge}","origin":"{origin}"{extra}}}'


def carol_extra(extra: str) -> dict[str, Any]:
    """A decision with carol's passkey vote whose client data has `extra` fields."""
    return one(carol_client(lambda c: client_json(c, extra)))


def ann_as(envelope: Any) -> dict[str, Any]:
    """A decision with one vote listed as ann's, whose envelope is `envelope`."""
    return k.signed(k.decision([k.entry("ann", envelope)]))


def ann_signed(payload: dict[str, Any] | bytes) -> dict[str, Any]:
    """A decision with one vote, `payload` signed by ann's key."""
    return one(k.cli_vote(payload, k.ANN, "person:ann:1"))


Case = tuple[str, Any, "int | None"]


def cases() -> list[Case]:
    good = ann_vote()
    sig = good["signatures"][0]
    entry = k.entry("ann", good)
    v2 = k.decision([entry])
    v1_votes_null = {**k.decision(None), "votes": None}
    v2_text = json.dumps(k.signed(v2))[:-1]
    as_array = [good["payloadType"], good["payload"], [list(sig.values())]]
    edited = ann_vote(effective_args_sha256=k.sha256_hex(k.EDITED))
    deny = k.entry("ann", ann_vote(approved=False), approved=False)
    client = [
        ("client data as an array", lambda c: json.dumps(["webauthn.get", c, k.ORIGIN])),
        ("client data without origin", lambda c: f'{{"type":"webauthn.get","challenge":"{c}"}}'),
        ("client data with origin null", lambda c: client_json(c).replace(f'"{k.ORIGIN}"', "null")),
        ("client data of another type", lambda c: client_json(c).replace(".get", ".create")),
        ("client data with trailing text", lambda c: client_json(c) + " x"),
        (
            "a challenge in padded standard base64",
            lambda c: client_json(base64.b64encode(base64.urlsafe_b64decode(c + "=")).decode()),
        ),
    ]
    out: list[Case] = [
        ("a cli vote", k.signed(v2), 1),
        ("two votes, two required", k.signed(k.decision([entry, k.entry("carol", carol())])), 2),
        ("the same person twice counts once", k.signed(k.decision([entry, entry])), 2),
        ("version 2 without requiring votes", k.signed(v2), None),
        ("zero votes required", k.signed(k.decision([])), 0),
        ("no votes, one required", k.signed(k.decision([])), 1),
        ("version 1 with one required", k.signed(k.decision(None)), 1),
        ("votes null under version 1", k.signed(v1_votes_null, lev.APPROVAL_PAYLOAD_TYPE), None),
        ("votes null under version 2", k.signed(v1_votes_null, lev.APPROVAL_PAYLOAD_TYPE_V2), None),
        ("v is -0", k.signed(edit(k.decision(None), '"v":1', '"v":-0')), None),
        ("v is 1.0", k.signed(edit(k.decision(None), '"v":1', '"v":1.0')), None),
        ("the payload as an array", k.signed(list(k.decision(None).values())), None),
        ("version 2 as an array", k.signed(list(v2.values()), lev.APPROVAL_PAYLOAD_TYPE_V2), 1),
        ("a vote entry as an array", k.signed(k.decision([list(entry.values())])), 1),
        ("a vote entry one field too long", k.signed(k.decision([[*entry.values(), 1]])), 1),
        ("a vote envelope as an array", ann_as(as_array), 1),
        (
            "a vote signature without keyid",
            ann_as({**good, "signatures": [{"sig": sig["sig"]}]}),
            1,
        ),
        (
            "a vote signature with a field too many",
            ann_as({**good, "signatures": [{**sig, "x": 1}]}),
            1,
        ),
        (
            "a vote signature with null passkey fields",
            ann_as(
                {
                    **good,
                    "signatures": [{**sig, "authenticator_data": None, "client_data_json": None}],
                }
            ),
            1,
        ),
        (
            "a vote entry's at not RFC 3339",
            k.signed(k.decision([{**entry, "at": "2026-01-01 11:59:20Z"}])),
            1,
        ),
        (
            "a duplicated key in a vote entry",
            k.signed(
                edit(v2, '"voter":"ann"', '"voter":"ann","voter":"ann"'),
                lev.APPROVAL_PAYLOAD_TYPE_V2,
            ),
            1,
        ),
        ("a lone surrogate in an ignored envelope field", v2_text + ',"x":"\\ud800"}', 1),
        ("a lone surrogate in an envelope key", v2_text + ',"\\ud800":1}', 1),
        ("a known envelope field twice", v2_text + ',"payloadType":"x"}', 1),
        ("an unknown envelope field twice", v2_text + ',"x":1,"x":2}', 1),
        ("bytes that are not UTF-8 in an ignored field", v2_text.encode() + b',"x":"\xff"}', 1),
        ("the envelope as an array", json.dumps(list(k.signed(v2).values())), 1),
        ("1e400 in an ignored envelope field", v2_text + ',"x":1e400}', 1),
        ("a vote payload as an array", ann_signed(k.compact(list(k.vote("ann").values()))), 1),
        ("a vote payload with v -0", ann_signed(edit(k.vote("ann"), '"v":1', '"v":-0')), 1),
        ("a vote payload of version 2", ann_signed(k.vote("ann", v=2)), 1),
        ("a vote payload with an unknown scope", ann_signed(k.vote("ann", scope="forever")), 1),
        ("a vote payload with a field too many", ann_signed({**k.vote("ann"), "weight": 2}), 1),
        (
            "a vote payload with a duplicated key",
            ann_signed(edit(k.vote("ann"), '"scope":"once"', '"scope":"once","scope":"once"')),
            1,
        ),
        (
            "a vote of the wrong payload type",
            ann_as({**good, "payloadType": lev.APPROVAL_PAYLOAD_TYPE}),
            1,
        ),
        ("a vote with five signatures", ann_as({**good, "signatures": [sig] * 5}), 1),
        (
            "a vote with four signatures, the last good",
            ann_as({**good, "signatures": [{"keyid": "person:ann:1", "sig": "AAAA"}] * 3 + [sig]}),
            1,
        ),
        (
            "a vote whose key id hint is wrong",
            one({**good, "signatures": [{**sig, "keyid": "person:bob:1"}]}),
            1,
        ),
        (
            "a cli vote carrying passkey fields",
            one(
                {
                    **good,
                    "signatures": [
                        {**sig, "authenticator_data": "AAAA", "client_data_json": "AAAA"}
                    ],
                }
            ),
            1,
        ),
        (
            "a vote issued 60 s after the decision",
            one(ann_vote(issued_at="2026-01-01T12:01:00Z")),
            1,
        ),
        (
            "a vote issued 61 s after the decision",
            one(ann_vote(issued_at="2026-01-01T12:01:01Z")),
            1,
        ),
        (
            "a vote in another zone, the same instant",
            one(ann_vote(issued_at="2026-01-01T13:01:00+01:00")),
            1,
        ),
        (
            "a vote for once on a session decision",
            k.signed(k.decision([entry], approved_for_session=True)),
            1,
        ),
        (
            "a vote for always on a session decision",
            k.signed(
                k.decision([k.entry("ann", ann_vote(scope="always"))], approved_for_session=True)
            ),
            1,
        ),
        (
            "an entry saying deny for an approving vote",
            k.signed(k.decision([k.entry("ann", good, approved=False)])),
            1,
        ),
        (
            "a vote for the proposed args, not the edit",
            k.signed(k.decision([entry], modified_args_json=k.EDITED)),
            1,
        ),
        (
            "a vote for the edit",
            k.signed(k.decision([k.entry("ann", edited)], modified_args_json=k.EDITED)),
            1,
        ),
        ("a vote for another caller", one(ann_vote(caller="mallory")), 1),
        ("a denial carrying deny votes", k.signed(k.decision([deny], approved=False)), 1),
        ("an eddsa passkey vote", one(carol()), 1),
        ("a passkey vote for another relying party", one(carol(rp_id="evil.test")), 1),
        ("a passkey vote from another origin", one(carol(origin="https://evil.test")), 1),
        (
            "a passkey vote from a subdomain and port",
            one(carol(origin="https://a.lev.example.com:8443")),
            1,
        ),
        (
            "a passkey vote from a look-alike host",
            one(carol(origin="https://badlev.example.com")),
            1,
        ),
        ("a passkey vote whose origin has no scheme", one(carol(origin="lev.example.com")), 1),
        ("a passkey vote without the UP flag", one(carol(flags=0x04)), 1),
        ("a passkey vote with short authenticator data", one(carol(auth=b"\x00" * 36)), 1),
        (
            "a passkey vote with another vote's challenge",
            one(carol(challenge_of=k.compact(k.vote("carol", v=3)))),
            1,
        ),
        (
            "a passkey vote signed without WebAuthn",
            one(k.cli_vote(k.vote("carol"), k.CAROL, "person:carol:1")),
            1,
        ),
        *((name, one(carol_client(make)), 1) for name, make in client),
        ("client data with a duplicated key", carol_extra(',"x":1,"x":1'), 1),
        ("client data with a duplicated key deep down", carol_extra(',"x":[{"a":1,"a":1}]'), 1),
        ("client data with a lone surrogate", carol_extra(',"x":"\\ud800"'), 1),
        ("client data with 1e400", carol_extra(',"x":1e400'), 1),
        ("client data with a huge integer", carol_extra(',"x":' + "9" * 400), 1),
        ("client data nested 126 deep", carol_extra(',"x":' + nested(125)), 1),
        ("client data nested 127 deep", carol_extra(',"x":' + nested(126)), 1),
        ("client data nested 128 deep", carol_extra(',"x":' + nested(127)), 1),
        ("an es256 passkey vote", one(k.passkey_vote(k.vote("dana"), k.DANA, "person:dana:1")), 1),
        (
            "an es256 signature with high s",
            one(dana_with_sig(lambda r, s: der(r, P256_ORDER - s))),
            1,
        ),
        (
            "an es256 signature with non-minimal DER",
            one(dana_with_sig(lambda r, s: der(r, s, pad=1))),
            1,
        ),
        ("an es256 signature in DER by hand", one(dana_with_sig(lambda r, s: der(r, s))), 1),
        (
            "an es256 signature with trailing bytes",
            one(dana_with_sig(lambda r, s: der(r, s) + b"\0")),
            1,
        ),
        (
            "an es256 signature as raw r || s",
            one(dana_with_sig(lambda r, s: r.to_bytes(32, "big") + s.to_bytes(32, "big"))),
            1,
        ),
    ]
    return out


CASES = cases()


@pytest.mark.parametrize(("name", "envelope", "needed"), CASES, ids=[c[0] for c in CASES])
def test_the_same_verdict_as_lev_verify(
    name: str, envelope: Any, needed: int | None, tmp_path: Path
) -> None:
    people = k.people()
    assert python_verdict(envelope, people, needed) == rust_verdict(
        envelope, people, needed, tmp_path
    )


def test_off_curve_p256_keys_load_and_never_verify(tmp_path: Path) -> None:
    jwks = k.people()
    # y + 1: a point off the curve, registered to dana beside her real key.
    real = k.dana_jwk()
    y = int.from_bytes(base64.urlsafe_b64decode(real["y"] + "="), "big") + 1
    jwks["keys"].insert(0, {**real, "kid": "person:dana:9", "y": k.b64url(y.to_bytes(32, "big"))})
    assert len(lev.PeopleKeys(jwks)) == 5
    for envelope in (
        one(k.passkey_vote(k.vote("dana"), k.DANA, "person:dana:9")),
        one(k.passkey_vote(k.vote("dana"), k.DANA, "person:dana:1")),
    ):
        assert python_verdict(envelope, jwks, 1) == rust_verdict(envelope, jwks, 1, tmp_path)
