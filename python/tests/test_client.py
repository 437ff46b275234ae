"""The client against a real `lev serve`: routes, typed results, errors."""

from __future__ import annotations

import asyncio
import json
import threading
import uuid

import httpx
import pytest
from conftest import Server, answer_when_pending

import lev


def test_health_and_keys(server: Server) -> None:
    c = lev.Client(server.url)
    assert c.health()["status"] == "ok"
    keys = c.keys()["keys"]
    assert keys and keys[0]["crv"] == "Ed25519"
    assert lev.key_id(lev._verify.decode_base64(keys[0]["x"])) == keys[0]["kid"]


def test_ask_free_text_answered_over_http(
    worker: lev.Client, approver: lev.Client, sid: str
) -> None:
    th = answer_when_pending(approver, sid, {"value": "ship it"})
    assert worker.ask("Deploy?", session_id=sid, timeout_s=60) == "ship it"
    th.join()


def test_ask_choice(worker: lev.Client, approver: lev.Client, sid: str) -> None:
    th = answer_when_pending(approver, sid, {"choice_index": 1})
    assert worker.ask("Which?", session_id=sid, options=["red", "blue"]) == "blue"
    th.join()


def test_ask_expired_raises(worker: lev.Client, sid: str) -> None:
    with pytest.raises(lev.TimedOut) as e:
        worker.ask("Anyone?", session_id=sid, timeout_s=1)
    assert e.value.code in ("cancelled", "expired")


def test_async_client(server: Server, approver: lev.Client, sid: str) -> None:
    async def main() -> str:
        async with lev.AsyncClient(server.url, server.token("worker")) as c:
            assert (await c.health())["status"] == "ok"
            return await c.ask("Async?", session_id=sid)

    th = answer_when_pending(approver, sid, {"value": "yes"})
    assert asyncio.run(main()) == "yes"
    th.join()


def test_server_down_is_a_lev_error() -> None:
    with pytest.raises(lev.ServerUnreachable) as e:
        lev.Client("http://127.0.0.1:9", "x").health()
    assert e.value.code == "unreachable"
    assert "127.0.0.1:9" in e.value.message


def test_wrong_token(server: Server) -> None:
    with pytest.raises(lev.ApiError) as e:
        lev.Client(server.url, "not-a-token").list_interactions()
    assert e.value.status == 401 and e.value.code and e.value.message


def test_wrong_role(worker: lev.Client) -> None:
    with pytest.raises(lev.ApiError) as e:
        worker.create_token("x", "admin")
    assert e.value.status == 403


def test_answer_that_does_not_fit(worker: lev.Client, approver: lev.Client, sid: str) -> None:
    record = worker.create_interaction(
        {
            "session_id": sid,
            "kind": {"type": "multiple_choice", "prompt": "?", "options": ["a", "b"]},
        }
    )
    with pytest.raises(lev.ApiError) as e:
        approver.respond(record["id"], {"choice_index": 7})
    assert e.value.status == 422 and "choice_index" in e.value.message
    with pytest.raises(lev.ApiError) as e:
        approver.respond(record["id"], {"value": "free text to a choice"})
    assert e.value.status == 422
    # The first answer wins; a later one is a 409 carrying the winner.
    approver.respond(record["id"], {"choice_index": 0})
    with pytest.raises(lev.ApiError) as e:
        approver.respond(record["id"], {"choice_index": 1})
    assert e.value.status == 409 and e.value.code == "already_answered"
    assert e.value.body["response"]["choice_index"] == 0


def test_interaction_routes(worker: lev.Client, approver: lev.Client, sid: str) -> None:
    iid = f"ir-py-{uuid.uuid4().hex[:8]}"
    created = worker.create_interaction(
        {"id": iid, "session_id": sid, "kind": {"type": "free_text", "prompt": "hi"}}
    )
    assert created["id"] == iid and created["status"] == "pending"
    assert worker.get_interaction(iid)["response"] is None
    assert worker.wait(iid, 1)["status"] == "pending"
    listed = approver.list_interactions(session_id=sid)["items"]
    assert [i["request"]["id"] for i in listed] == [iid]
    worker.cancel(iid)
    assert worker.wait(iid, 1)["status"] == "cancelled"
    with pytest.raises(lev.ApiError) as e:
        approver.respond(iid, {"value": "late"})
    assert e.value.status == 410
    with pytest.raises(lev.ApiError) as e:
        worker.get_interaction("ir_nope")
    assert e.value.status == 404


def test_admin_routes(server: Server) -> None:
    with server.client() as admin:
        made = admin.create_token(f"t-{uuid.uuid4().hex[:6]}", "worker", caller="alice")
        assert made["token"]
        assert any(t["name"] == made["name"] for t in admin.tokens())
        admin.revoke_token(made["name"])
        page = admin.audit()
        assert isinstance(page, dict)
        assert "lev" in admin.metrics()
        assert isinstance(admin.grants(), list)
        assert isinstance(admin.tasks(), list)


def test_every_list_is_a_page(server: Server, worker: lev.Client, approver: lev.Client) -> None:
    sid = f"s-page-{uuid.uuid4().hex[:8]}"
    worker.create_interaction({"session_id": sid, "kind": {"type": "free_text", "prompt": "?"}})
    listed = approver.list_interactions(session_id=sid)
    assert set(listed) == {"items", "next_cursor"}
    assert listed["next_cursor"] is None and len(listed["items"]) == 1
    tasks = approver.list_tasks(session_id=sid)
    assert tasks == {"items": [], "next_cursor": None}
    with server.client() as admin:
        page = admin.audit()
        assert set(page) == {"items", "next_cursor", "head"}
        # One page reaches the head; a cursor starts after the entry it names.
        assert page["next_cursor"] is None
        assert page["items"][-1]["seq"] == page["head"]["seq"]
        first = page["items"][0]["seq"]
        after = admin.audit(cursor=str(first))
        assert after["items"][0]["seq"] == first + 1
        assert admin.audit(first)["items"] == after["items"]


def test_whole_lists_follow_next_cursor() -> None:
    pages = {
        None: {"items": [{"name": "a"}], "next_cursor": "p2"},
        "p2": {"items": [{"name": "b"}], "next_cursor": "p3"},
        "p3": {"items": [], "next_cursor": None},
    }
    asked: list[str | None] = []

    def handler(request: httpx.Request) -> httpx.Response:
        cursor = request.url.params.get("cursor")
        asked.append(cursor)
        return httpx.Response(200, json=pages[cursor])

    transport = httpx.MockTransport(handler)
    with lev.Client("http://127.0.0.1:7420", "t", transport=transport) as c:
        assert [t["name"] for t in c.tokens()] == ["a", "b"]
    assert asked == [None, "p2", "p3"]

    async def grants() -> list[str]:
        async with lev.AsyncClient(
            "http://127.0.0.1:7420", "t", transport=httpx.MockTransport(handler)
        ) as c:
            return [str(g.get("name")) for g in await c.grants()]

    asked.clear()
    assert asyncio.run(grants()) == ["a", "b"]
    assert asked == [None, "p2", "p3"]


def test_nonce_consume(worker: lev.Client) -> None:
    nonce = uuid.uuid4().hex
    worker.consume_nonce(nonce)
    with pytest.raises(lev.ApiError) as e:
        worker.consume_nonce(nonce)
    assert e.value.status == 409 and e.value.code == "nonce_spent"


def test_ask_operator_escalates_to_people_or_times_out(worker: lev.Client, sid: str) -> None:
    with pytest.raises(lev.ApiError) as e:
        worker.ask_operator(sid, {"q": "anyone?"}, timeout_s=1)
    assert e.value.status == 504


def test_gate_body_round_trip(worker: lev.Client, sid: str) -> None:
    got = worker.gate(
        {
            "session_id": sid,
            "request_id": "c1",
            "tool_name": "shell",
            "args_json": json.dumps({"argv": ["ls"]}),
        }
    )
    assert got["decision"] == "ask" and got["interaction_id"]
    with pytest.raises(lev.ApiError) as e:
        worker.gate(
            {"session_id": sid, "request_id": "c2", "tool_name": "shell", "args_json": "{not json"}
        )
    assert e.value.status == 422
    threading.Thread(target=lambda: None).start()
