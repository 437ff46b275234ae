"""People's own signed votes (SPEC section 13): `lev.PeopleKeys`,
`lev.verify_vote`, `lev.check_vote_binding`, `VerifiedResponse.votes` and
`require_signed_votes`, `lev.verify(require_votes=)`, and the Gatekeeper's
`require_signed_votes` against a real `lev serve` where people vote with
their own keys."""

from __future__ import annotations

import base64
import json
import uuid
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
import votes_kit as k
from conftest import Server

import lev


def verified(payload: dict[str, Any]) -> lev.VerifiedResponse:
    return lev.verify_envelope(k.signed(payload), lev.TrustedKeys([k.TRUSTED]), k.NOW)


def vote_error(envelope: Any, people: Any = None) -> lev.VoteError:
    with pytest.raises(lev.VoteError) as e:
        lev.verify_vote(envelope, people if people is not None else k.people())
    return e.value


def reencoded(envelope: dict[str, Any], change: Any) -> dict[str, Any]:
    """`envelope` with its first signature's client data JSON changed by `change(dict)`."""
    sig = dict(envelope["signatures"][0])
    data = json.loads(base64.b64decode(sig["client_data_json"]))
    change(data)
    sig["client_data_json"] = k.b64(k.compact(data))
    return {**envelope, "signatures": [sig]}


# ---- people's keys ----


def test_people_keys_read_the_jwks_of_get_people_keys() -> None:
    people = lev.PeopleKeys(k.people())
    assert people.kids == ["person:ann:1", "person:bob:1", "person:carol:1", "person:dana:1"]
    assert [key.is_passkey for key in people] == [False, False, True, True]
    assert [key.kid for key in people.of("dana")] == ["person:dana:1"]
    assert lev.PeopleKeys.from_jwks(json.dumps(k.people())).kids == people.kids
    # The same kid twice is one key.
    twice = {"keys": [*k.people()["keys"], k.people()["keys"][0]]}
    assert len(lev.PeopleKeys(twice)) == 4


@pytest.mark.parametrize(
    ("jwk", "code"),
    [
        ({"kid": "alice:1"}, "malformed_key"),
        ({"kid": "person:ann:01"}, "malformed_key"),
        ({"kid": "person:a n:1"}, "malformed_key"),
        ({"alg": "ES256"}, "malformed_key"),
        ({"kty": "RSA"}, "malformed_key"),
        ({"x": "not base64!"}, "malformed_key"),
        ({"x": k.b64url(b"\x01" * 31)}, "invalid_key"),
        ({"x": k.b64url((1).to_bytes(32, "little"))}, "weak_key"),
        ({"x": 7}, "malformed_key"),
    ],
)
def test_people_keys_refuse_a_bad_key(jwk: dict[str, Any], code: str) -> None:
    keys = k.people()["keys"]
    with pytest.raises(lev.KeyRefused) as e:
        lev.PeopleKeys({"keys": [{**keys[0], **jwk}, *keys[1:]]})
    assert e.value.code == code


def test_people_keys_refuse_what_is_not_a_people_jwks() -> None:
    for bad in ["", "[]", '{"keys": {}}', '{"keys": [1]}', "{}", '{"keys": [], "keys": []}']:
        with pytest.raises(lev.KeyRefused) as e:
            lev.PeopleKeys(bad)
        assert e.value.code == "malformed_key", bad


def test_one_person_has_at_most_sixteen_keys() -> None:
    ann = k.cli_jwk(k.ANN, "")
    keys = [{**ann, "kid": f"person:ann:{n}"} for n in range(1, 17)]
    assert len(lev.PeopleKeys({"keys": keys})) == 16
    with pytest.raises(lev.KeyRefused) as e:
        lev.PeopleKeys({"keys": [*keys, {**ann, "kid": "person:ann:17"}]})
    assert "more than 16" in e.value.message


# ---- one vote ----


def test_a_cli_vote_verifies_under_the_voters_key_only() -> None:
    good = k.cli_vote(k.vote("ann"), k.ANN, "person:ann:1")
    vote = lev.verify_vote(good, k.people())
    assert vote.kid == "person:ann:1" and vote.payload.voter == "ann"
    assert vote.payload.args_sha256 == k.sha256_hex(k.ARGS)
    # ann's key is not bob's: a vote naming bob signed by ann does not count.
    forged = k.cli_vote(k.vote("bob"), k.ANN, "person:bob:1")
    assert vote_error(forged).code == "not_signed"
    # Without ann's key registered, her vote does not count.
    others = {"keys": k.people()["keys"][1:]}
    err = vote_error(good, others)
    assert err.code == "not_signed" and "registered none" in err.message
    # A tampered payload.
    tampered = {**good, "payload": k.b64(k.compact(k.vote("ann", approved=False)))}
    assert vote_error(tampered).code == "not_signed"


def test_a_vote_signed_by_another_persons_key_does_not_count() -> None:
    """bob's registered key signs a vote naming ann: it verifies under no key of ann's."""
    by_bob = k.cli_vote(k.vote("ann"), k.BOB, "person:bob:1")
    err = vote_error(by_bob)
    assert err.code == "not_signed" and "'ann' (1 registered)" in err.message
    decision = verified(k.decision([k.entry("ann", by_bob)]))
    assert decision.signed_voters(k.people()) == frozenset()
    with pytest.raises(lev.NotEnoughVotes) as e:
        decision.require_signed_votes(k.people(), 1)
    assert e.value.code == "votes" and e.value.found == 0 and e.value.needed == 1
    assert e.value.problems[0].startswith("ann: the vote is not signed")


def test_a_passkey_vote_verifies_with_its_assertion() -> None:
    for key, kid in ((k.CAROL, "person:carol:1"), (k.DANA, "person:dana:1")):
        voter = kid.split(":")[1]
        vote = lev.verify_vote(k.passkey_vote(k.vote(voter), key, kid), k.people())
        assert vote.kid == kid


def test_a_passkey_vote_with_a_tampered_challenge_does_not_count() -> None:
    good = k.passkey_vote(k.vote("dana"), k.DANA, "person:dana:1")

    def flip(data: dict[str, Any]) -> None:
        c = data["challenge"]
        data["challenge"] = ("B" if c[0] == "A" else "A") + c[1:]

    # The challenge edited after signing: the assertion's signature breaks,
    # and so does the challenge.
    assert vote_error(reencoded(good, flip)).code == "assertion"
    # Signed over a tampered challenge: the signature holds, the challenge does not.
    signed_tampered = k.passkey_vote(
        k.vote("dana"), k.DANA, "person:dana:1", challenge_of=k.compact(k.vote("dana", v=9))
    )
    err = vote_error(signed_tampered)
    assert err.code == "assertion" and "challenge" in err.message
    # The assertion of another vote does not carry over to this one.
    other = k.passkey_vote(k.vote("dana", approved=False), k.DANA, "person:dana:1")
    swapped = {**other, "payload": good["payload"]}
    assert "challenge" in vote_error(swapped).message


@pytest.mark.parametrize(
    ("kw", "words"),
    [
        ({"rp_id": "evil.test"}, "relying party"),
        ({"origin": "https://evil.test"}, "origin"),
        ({"origin": "https://lev.example.com.evil.net"}, "origin"),
        ({"flags": 0x04}, "UP flag"),
        ({"auth": b"\x00" * 36}, "shorter than 37 bytes"),
        (
            {"client": lambda c: b'{"type":"webauthn.create","challenge":"' + c.encode() + b'"}'},
            "type",
        ),
        ({"client": lambda c: k.client_data(c)[:-1] + b',"type":"webauthn.get"}'}, "duplicate"),
    ],
)
def test_a_passkey_assertion_wrong_in_one_way(kw: dict[str, Any], words: str) -> None:
    err = vote_error(k.passkey_vote(k.vote("carol"), k.CAROL, "person:carol:1", **kw))
    assert err.code == "assertion" and words in err.message, err


def test_a_passkey_never_signs_a_plain_vote_nor_a_cli_key_an_assertion() -> None:
    assert vote_error(k.cli_vote(k.vote("carol"), k.CAROL, "person:carol:1")).code == "not_signed"
    as_passkey = k.passkey_vote(k.vote("ann"), k.ANN, "person:ann:1")
    assert vote_error(as_passkey).code == "not_signed"


def test_hostile_vote_envelopes_are_refused() -> None:
    good = k.cli_vote(k.vote("ann"), k.ANN, "person:ann:1")
    sig = good["signatures"][0]
    text = k.compact(k.vote("ann")).decode()
    cases: list[tuple[Any, str]] = [
        ({**good, "payloadType": lev.APPROVAL_PAYLOAD_TYPE}, "malformed"),
        ({**good, "signatures": []}, "malformed"),
        ({**good, "signatures": [sig] * 5}, "malformed"),
        ({**good, "payload": "not base64!"}, "malformed"),
        ("not json", "malformed"),
        ({**good, "payload": k.b64(b'{"v":1}')}, "payload"),
        ({**good, "payload": k.b64(text.replace("{", '{"extra":1,', 1).encode())}, "payload"),
        ({**good, "payload": k.b64(text.replace('"v":1', '"v":2').encode())}, "payload"),
        ({**good, "payload": k.b64(text.replace('"once"', '"forever"').encode())}, "payload"),
        ({**good, "signatures": [{**sig, "sig": "AAAA"}]}, "not_signed"),
        ({**good, "signatures": [{**sig, "authenticator_data": "AAAA"}]}, "not_signed"),
    ]
    for envelope, code in cases:
        assert vote_error(envelope).code == code, envelope


# ---- a vote and the decision it binds ----


def test_a_vote_binds_the_call_its_args_its_decision_and_scope() -> None:
    vote = lev.verify_vote(k.cli_vote(k.vote("ann"), k.ANN, "person:ann:1"), k.people()).payload
    lev.check_vote_binding(vote, verified(k.decision([])))

    def field(**changes: Any) -> str | None:
        with pytest.raises(lev.VoteError) as e:
            lev.check_vote_binding(vote, verified(k.decision([], **changes)))
        assert e.value.code == "mismatch"
        field: str | None = e.value.field
        return field

    assert field(request_id="call-2") == "request_id"
    assert field(tool_name="deploy") == "tool_name"
    assert field(args_json='{"argv":[]}') == "args_sha256"
    assert field(conversation_id="c-2") == "conversation_id"
    assert field(caller="mallory") == "caller"
    assert field(sandbox_mode="danger-full-access") == "sandbox_mode"
    assert field(approved=False) == "approved"
    assert field(modified_args_json=k.EDITED) == "effective_args_sha256"
    assert field(approved_for_session=True) == "scope"
    # Made more than 60 s after the decision was signed.
    assert field(issued_at="2026-01-01T11:58:19Z") == "issued_at"
    lev.check_vote_binding(vote, verified(k.decision([], issued_at="2026-01-01T11:58:20Z")))
    # An edit voted for, for the session, binds the edited session decision.
    edit = k.vote("ann", effective_args_sha256=k.sha256_hex(k.EDITED), scope="session")
    edited = lev.verify_vote(k.cli_vote(edit, k.ANN, "person:ann:1"), k.people()).payload
    session = verified(k.decision([], modified_args_json=k.EDITED, approved_for_session=True))
    lev.check_vote_binding(edited, session)


def test_votes_of_a_decision() -> None:
    ann = k.cli_vote(k.vote("ann"), k.ANN, "person:ann:1")
    dana = k.passkey_vote(k.vote("dana"), k.DANA, "person:dana:1")
    decision = verified(
        k.decision([k.entry("ann", ann), k.entry("dana", dana), k.entry("bob", None)])
    )
    assert decision.version == 2
    assert decision.votes is not None
    assert [(v.voter, v.signed) for v in decision.votes] == [
        ("ann", True),
        ("dana", True),
        ("bob", False),
    ]
    assert decision.votes[0].envelope == ann
    checks = decision.check_votes(k.people())
    assert [(c.voter, c.kid, c.ok) for c in checks] == [
        ("ann", "person:ann:1", True),
        ("dana", "person:dana:1", True),
        ("bob", None, False),
    ]
    assert checks[2].error is not None and checks[2].error.code == "not_signed"
    assert decision.signed_voters(k.people()) == {"ann", "dana"}
    assert decision.require_signed_votes(k.people(), 2) == {"ann", "dana"}
    with pytest.raises(lev.NotEnoughVotes) as e:
        decision.require_signed_votes(k.people(), 3)
    assert (e.value.found, e.value.needed) == (2, 3)
    assert "bob: the vote is not signed" in e.value.message


def test_a_vote_listed_under_another_voter_counts_for_nobody() -> None:
    ann = k.cli_vote(k.vote("ann"), k.ANN, "person:ann:1")
    decision = verified(k.decision([k.entry("ann", ann), k.entry("bob", ann)]))
    assert decision.signed_voters(k.people()) == {"ann"}
    bob = decision.check_votes(k.people())[1]
    assert bob.error is not None and bob.error.field == "voter"


def test_a_denial_never_passes() -> None:
    no = k.cli_vote(k.vote("ann", approved=False), k.ANN, "person:ann:1")
    denial = verified(k.decision([k.entry("ann", no, approved=False)], approved=False))
    assert denial.signed_voters(k.people()) == {"ann"}
    for needed in (0, 1):
        with pytest.raises(lev.NotEnoughVotes) as e:
            denial.require_signed_votes(k.people(), needed)
        assert e.value.found == 0 and "the decision is a denial" in e.value.message


def test_version_1_carries_no_votes() -> None:
    v1 = verified(k.decision(None))
    assert v1.votes is None and v1.version == 1
    assert v1.check_votes(k.people()) == [] and v1.signed_voters(k.people()) == frozenset()
    v1.require_signed_votes(k.people(), 0)
    with pytest.raises(lev.NotEnoughVotes):
        v1.require_signed_votes(k.people(), 1)


def test_verify_requires_votes_when_asked() -> None:
    ann = k.cli_vote(k.vote("ann"), k.ANN, "person:ann:1")
    envelope = k.signed(k.decision([k.entry("ann", ann)]))

    def check(**kw: Any) -> lev.VerifiedResponse:
        return lev.verify(envelope, [k.TRUSTED], **k.CALL, **k.CONTEXT, now=k.NOW, **kw)

    assert check().votes is not None
    assert check(people_keys=k.people(), require_votes=1).approver == "bob"
    assert check(people_keys=lev.PeopleKeys(k.people()), require_votes=1)
    assert check(people_keys=json.dumps(k.people()), require_votes=0)
    with pytest.raises(lev.NotAuthorizedError) as e:
        check(people_keys=k.people(), require_votes=2)
    assert e.value.code == "votes"
    with pytest.raises(lev.KeyRefused) as refused:
        check(require_votes=1)
    assert refused.value.code == "malformed_key"
    with pytest.raises(lev.KeyRefused):
        check(people_keys={"keys": [{"kty": "OKP"}]}, require_votes=1)
    for bad in (-1, True, 1.0):
        with pytest.raises(ValueError):
            check(people_keys=k.people(), require_votes=bad)
    # Without require_votes, people keys are not read.
    assert check(people_keys="not a jwks")


def test_the_payload_type_names_the_version() -> None:
    v2 = k.decision([])
    keys = lev.TrustedKeys([k.TRUSTED])
    for envelope in (
        k.signed(v2, lev.APPROVAL_PAYLOAD_TYPE),
        k.signed(k.decision(None), lev.APPROVAL_PAYLOAD_TYPE_V2),
        k.signed({**v2, "v": 1}),
        k.signed({**k.decision(None), "v": 2}),
        k.signed({**v2, "v": 3}, lev.APPROVAL_PAYLOAD_TYPE_V2),
    ):
        with pytest.raises(lev.VerificationError) as e:
            lev.verify_envelope(envelope, keys, k.NOW)
        assert e.value.code == "version"


# ---- the Gatekeeper, against a server where people sign their votes ----


@pytest.fixture
def voting_server(tmp_path: Path) -> Any:
    policy = tmp_path / "policy.toml"
    policy.write_text(
        '[[rule]]\ntool = "deploy*"\ndecision = "ask"\napprovals = 2\nrequire_signed_votes = true\n'
    )
    s = Server(tmp_path / "data", "--policy", str(policy))
    yield s
    s.stop()


def cast_vote(client: lev.Client, name: str, key: Any, iid: str) -> None:
    """`name` approves the interaction with a vote signed by their own key."""
    binding = client.get_interaction(iid)["request"]["vote_binding"]
    now = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    payload = {
        "v": 1,
        **binding,
        "effective_args_sha256": binding["args_sha256"],
        "approved": True,
        "scope": "once",
        "voter": name,
        "issued_at": now,
    }
    order = [
        "v",
        "request_id",
        "tool_name",
        "args_sha256",
        "effective_args_sha256",
        "conversation_id",
        "caller",
        "sandbox_mode",
        "approved",
        "scope",
        "voter",
        "issued_at",
    ]
    envelope = k.cli_vote({f: payload[f] for f in order}, key, f"person:{name}:1")
    client.respond(iid, {"approved": True, "scope": "once", "vote": envelope})


def test_the_gatekeeper_requires_signed_votes(voting_server: Server, sid: str) -> None:
    people: dict[str, lev.Client] = {}
    with voting_server.client() as admin:
        for name in (f"ann-{uuid.uuid4().hex[:6]}", f"bob-{uuid.uuid4().hex[:6]}"):
            people[name] = voting_server.client(str(admin.create_token(name, "approver")["token"]))
        worker = voting_server.client(str(admin.create_token("w", "worker")["token"]))
    keys = dict(zip(people, (k.ANN, k.BOB), strict=True))
    for name, client in people.items():
        registered = client.register_person_key(k.raw_public(keys[name]))
        assert registered["key"]["kid"] == f"person:{name}:1"
    served = worker.people_keys()
    assert sorted(j["kid"] for j in served["keys"]) == sorted(f"person:{n}:1" for n in people)

    def gate(request_id: str, **kw: Any) -> lev.ApprovedCall:
        g = lev.Gatekeeper(client=worker, session_id=sid, caller="alice", **kw)
        call, first = g.submit(request_id=request_id, tool_name="deploy", args_json=k.ARGS)
        assert first["decision"] == "ask"
        for name, client in people.items():
            cast_vote(client, name, keys[name], first["interaction_id"])
        return g.settle(call, first)

    approved = gate("c1", require_signed_votes={"deploy*": 2})
    assert approved.verified.version == 2
    assert approved.verified.signed_voters(served) == set(people)
    # Fetched once and pinned; given keys are used as they are.
    approved = gate("c2", require_signed_votes={"dep?oy": 1, "*": 2}, people_keys=served)
    with pytest.raises(lev.NotEnoughVotes) as e:
        gate("c3", require_signed_votes={"deploy": 3})
    assert e.value.found == 2 and e.value.needed == 3
    # Votes signed by keys nobody registered to them: the server's word alone.
    with pytest.raises(lev.NotEnoughVotes):
        gate("c4", require_signed_votes={"deploy": 1}, people_keys={"keys": []})
    # A tool no glob names needs none.
    assert (
        lev.Gatekeeper(client=worker, session_id=sid, require_signed_votes={"x*": 1}).votes_needed(
            "deploy"
        )
        == 0
    )
    for c in (*people.values(), worker):
        c.close()
