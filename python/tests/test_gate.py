"""The Gatekeeper against a real `lev serve`: a person approves, edits or denies
over HTTP while the call waits; tampered or replayed envelopes are refused."""

from __future__ import annotations

import base64
import json
import uuid
from typing import Any

import pytest
from conftest import Server, answer_when_pending

import lev

ARGS = json.dumps({"argv": ["echo", "hi"], "cwd": "/tmp"}, separators=(",", ":"))


def keeper(worker: lev.Client, sid: str, **kw: Any) -> lev.Gatekeeper:
    return lev.Gatekeeper(
        client=worker, session_id=sid, caller="alice", sandbox_mode="workspace-write", **kw
    )


def test_approved_call_runs_the_args(worker: lev.Client, approver: lev.Client, sid: str) -> None:
    th = answer_when_pending(approver, sid, {"approved": True})
    call = keeper(worker, sid).gate(request_id="c1", tool_name="shell", args_json=ARGS)
    th.join()
    assert call.args_json == ARGS and not call.was_edited
    assert call.verified.caller == "alice" and call.verified.conversation_id == sid


def test_edit_runs_the_edited_signed_args(
    worker: lev.Client, approver: lev.Client, sid: str
) -> None:
    edited = json.dumps({"argv": ["echo", "bye"], "cwd": "/tmp"})
    th = answer_when_pending(
        approver,
        sid,
        {"approved": True, "modified_args_json": edited, "injected_context": "be brief"},
    )
    call = keeper(worker, sid).gate(request_id="c1", tool_name="shell", args_json=ARGS)
    th.join()
    assert call.args_json == edited and call.was_edited
    assert call.args == {"argv": ["echo", "bye"], "cwd": "/tmp"}
    text = call.tool_result_text("bye")
    assert "be brief" in text and text.endswith("bye")


def test_deny_with_feedback(worker: lev.Client, approver: lev.Client, sid: str) -> None:
    th = answer_when_pending(approver, sid, {"approved": False, "feedback": "  use ls  "})
    with pytest.raises(lev.Denied) as e:
        keeper(worker, sid).gate(request_id="c1", tool_name="shell", args_json=ARGS)
    th.join()
    assert e.value.kind == "denied" and e.value.feedback == "use ls"
    assert "Feedback: use ls" in e.value.text


def test_plain_deny_has_no_empty_feedback(
    worker: lev.Client, approver: lev.Client, sid: str
) -> None:
    th = answer_when_pending(approver, sid, {"approved": False, "feedback": "   "})
    with pytest.raises(lev.Denied) as e:
        keeper(worker, sid).gate(request_id="c1", tool_name="shell", args_json=ARGS)
    th.join()
    assert e.value.feedback is None and "Feedback" not in e.value.text


def test_expired_is_a_deny(worker: lev.Client, sid: str) -> None:
    with pytest.raises(lev.Denied) as e:
        keeper(worker, sid, timeout_s=1).gate(request_id="c1", tool_name="shell", args_json=ARGS)
    assert e.value.kind in ("expired", "timed_out")


def test_policy_allow_and_deny(tmp_path: Any) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "policy.toml").write_text(
        '[[rule]]\ntool = "fs.read"\ndecision = "allow"\n\n'
        '[[rule]]\ntool = "shell"\nargs = { "/argv/0" = "^rm$" }\ndecision = "deny"\n'
        'reason = "never rm"\n'
    )
    s = Server(data)
    try:
        with s.client(s.token("worker")) as w:
            g = lev.Gatekeeper(client=w, session_id="p1")
            call = g.gate(request_id="r1", tool_name="fs.read", args_json={"path": "/etc/hosts"})
            assert call.approver == "policy"
            assert call.args == {"path": "/etc/hosts"}
            with pytest.raises(lev.Denied) as e:
                g.gate(request_id="r2", tool_name="shell", args_json={"argv": ["rm", "-rf"]})
            assert e.value.kind == "policy" and "never rm" in e.value.text
            # The same call again gets the same decision: the same envelope, its nonce
            # spent already: refused, never run twice.
            with pytest.raises(lev.NonceSpent):
                g.gate(request_id="r1", tool_name="fs.read", args_json={"path": "/etc/hosts"})
    finally:
        s.stop()


def approved_envelope(worker: lev.Client, approver: lev.Client, sid: str) -> dict[str, Any]:
    gk = keeper(worker, sid)
    _call, first = gk.submit(request_id="c1", tool_name="shell", args_json=ARGS)
    iid = first["interaction_id"]
    return dict(approver.respond(iid, {"approved": True})["approval"] or {})


def test_tampered_envelope_is_refused(worker: lev.Client, approver: lev.Client, sid: str) -> None:
    env = approved_envelope(worker, approver, sid)
    keys = lev.TrustedKeys.from_jwks(dict(worker.keys()))
    payload = json.loads(base64.b64decode(env["payload"]))
    payload["args_json"] = json.dumps({"argv": ["rm", "-rf", "/"]})
    forged = {**env, "payload": base64.b64encode(json.dumps(payload).encode()).decode()}
    with pytest.raises(lev.VerificationError) as e:
        lev.verify(forged, keys, request_id="c1", tool_name="shell", args_json=ARGS)
    assert e.value.code == "bad_signature"
    # The genuine one verifies, but not for another call or context.
    ok = lev.verify(
        env,
        keys,
        request_id="c1",
        tool_name="shell",
        args_json=ARGS,
        conversation_id=sid,
        caller="alice",
        sandbox_mode="workspace-write",
    )
    assert ok.approved and ok.effective_args_json == ARGS
    with pytest.raises(lev.NotAuthorizedError) as na:
        lev.verify(env, keys, request_id="c1", tool_name="shell", args_json=ARGS + " ")
    assert na.value.code == "args_json"
    with pytest.raises(lev.NotAuthorizedError) as na:
        lev.verify(
            env, keys, request_id="c1", tool_name="shell", args_json=ARGS, conversation_id="other"
        )
    assert na.value.code == "conversation_id"
    # Under keys the server does not hold: untrusted.
    other = lev.TrustedKeys(
        [bytes.fromhex("d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a")]
    )
    with pytest.raises(lev.VerificationError) as e:
        lev.verify(env, other, request_id="c1", tool_name="shell", args_json=ARGS)
    assert e.value.code == "untrusted_key"


def test_replayed_envelope_is_refused(worker: lev.Client, approver: lev.Client, sid: str) -> None:
    gk = keeper(worker, sid)
    th = answer_when_pending(approver, sid, {"approved": True})
    gk.gate(request_id="c1", tool_name="shell", args_json=ARGS)
    th.join()
    # The same request id again: the gate returns the same decision; its nonce is spent.
    with pytest.raises(lev.NonceSpent) as e:
        gk.gate(request_id="c1", tool_name="shell", args_json=ARGS)
    assert e.value.code == "nonce_spent"


def test_envelope_for_another_context_is_refused(
    worker: lev.Client, approver: lev.Client, sid: str
) -> None:
    th = answer_when_pending(approver, sid, {"approved": True})
    gk = lev.Gatekeeper(client=worker, session_id=sid, caller="alice", sandbox_mode="ro")
    gk.gate(request_id="c1", tool_name="shell", args_json=ARGS)
    th.join()
    # A verifier running under another sandbox mode refuses the same envelope.
    env = worker.get_interaction(
        approver.list_interactions("all", session_id=sid)["items"][0]["request"]["id"]
    )["approval"]
    with pytest.raises(lev.NotAuthorizedError) as e:
        lev.verify(
            env or {},
            dict(worker.keys()),
            request_id="c1",
            tool_name="shell",
            args_json=ARGS,
            sandbox_mode="danger-full-access",
        )
    assert e.value.code == "sandbox_mode"


def test_async_gatekeeper(server: Server, approver: lev.Client, sid: str) -> None:
    import asyncio

    async def main() -> str:
        async with lev.AsyncClient(server.url, server.token("worker")) as c:
            gk = lev.AsyncGatekeeper(client=c, session_id=sid)
            call = await gk.gate(
                request_id=f"a-{uuid.uuid4().hex[:6]}", tool_name="shell", args_json=ARGS
            )
            return call.args_json

    th = answer_when_pending(approver, sid, {"approved": True})
    assert asyncio.run(main()) == ARGS
    th.join()
