"""`lev.operator` against a real `lev serve`: workers ask and spawn over HTTP
while the Python operator answers; deferrals reach people; a dropped
connection or a restarted server is reconnected to, and a message re-sent
after the reconnect is handled once; refusals are typed errors."""

from __future__ import annotations

import asyncio
import json
import threading
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar

import pytest
from conftest import Server

import lev
from lev.operator import (
    DEFER,
    Ask,
    Defer,
    FrameRefused,
    Hello,
    Hook,
    Operator,
    Reject,
    SpawnOrder,
    SpawnOutcome,
    Stopped,
    Triage,
)

T = TypeVar("T")
LIMIT = 30.0


@pytest.fixture(scope="module")
def quick_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """An operator that has not replied within 1 s hands the ask to people."""
    s = Server(tmp_path_factory.mktemp("lev-quick") / "data", "--operator-reply-timeout", "1")
    yield s
    s.stop()


def named_token(server: Server, role: str, **kw: Any) -> tuple[str, str]:
    """A new token of `role`: its name and its secret."""
    name = f"{role}-{uuid.uuid4().hex[:8]}"
    if role == "operator":
        kw.setdefault("sessions", ["*"])
    with server.client() as admin:
        return name, str(admin.create_token(name, role, **kw)["token"])


def run(main: Callable[[], Awaitable[T]]) -> T:
    return asyncio.run(asyncio.wait_for(main(), 4 * LIMIT))


async def until(check: Callable[[], bool], what: str, limit: float = LIMIT) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + limit
    while not check():
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.02)


@asynccontextmanager
async def serving(op: Operator, hellos: list[Hello]) -> AsyncIterator[asyncio.Task[Stopped]]:
    """`op` running in a task, connected (its first hello seen), stopped at the end."""
    op.on_connect(hellos.append)
    task = asyncio.ensure_future(op.run())
    try:
        await until(lambda: bool(hellos) or task.done(), "the operator's hello")
        if task.done():
            task.result()
        yield task
    finally:
        op.stop()
        assert await asyncio.wait_for(task, LIMIT) == "stopped"


async def pending_interaction(
    approver: lev.AsyncClient, session_id: str, limit: float = LIMIT
) -> lev.types.InteractionRecord:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + limit
    while loop.time() < deadline:
        items = (await approver.list_interactions("pending", session_id=session_id))["items"]
        if items:
            return items[0]
        await asyncio.sleep(0.05)
    raise AssertionError(f"no pending interaction in {session_id}")


class Proxy:
    """A TCP relay between the operator and the server, whose connections the
    test can cut (as a network does) and which can refuse new ones a while."""

    def __init__(self, target: str) -> None:
        host, port = target.rsplit(":", 1)
        self.target = (host, int(port))
        self.down = False
        self.accepted = 0
        self.links: list[tuple[asyncio.StreamWriter, asyncio.StreamWriter]] = []

    async def start(self) -> str:
        self.server = await asyncio.start_server(self.serve, "127.0.0.1", 0)
        port = self.server.sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}"

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.down:
            writer.transport.abort()
            return
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.target)
        except OSError:
            writer.transport.abort()
            return
        self.accepted += 1
        self.links.append((writer, up_writer))

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            try:
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
            except (OSError, asyncio.IncompleteReadError):
                pass
            finally:
                dst.transport.abort()

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))

    def cut(self) -> None:
        for a, b in self.links:
            a.transport.abort()
            b.transport.abort()
        self.links.clear()

    def close(self) -> None:
        self.cut()
        self.server.close()


# ---- answers ----


def test_a_workers_ask_is_answered_by_the_python_operator(server: Server, sid: str) -> None:
    op_name, op_token = named_token(server, "operator", sessions=[sid])
    _, worker_token = named_token(server, "worker")
    seen: list[Ask] = []

    async def main() -> None:
        op = Operator(sid, url=server.url, token=op_token)

        @op.on_ask
        async def answer(ask: Ask) -> Any:
            seen.append(ask)
            return {"echo": ask.question, "n": len(seen)}

        hellos: list[Hello] = []
        async with serving(op, hellos), lev.AsyncClient(server.url, worker_token) as w:
            assert hellos[0] == Hello(session_id=sid, pending=())
            got = await w.ask_operator(sid, {"q": "how many?"}, timeout_s=20)
            assert got == {"answer": {"echo": {"q": "how many?"}, "n": 1}, "answered_by": op_name}
            # Another, concurrently: each gets its own answer.
            both = await asyncio.gather(
                w.ask_operator(sid, "a", timeout_s=20), w.ask_operator(sid, "b", timeout_s=20)
            )
            assert sorted(r["answer"]["echo"] for r in both) == ["a", "b"]
        assert len(seen) == 3
        assert len({a.req_id for a in seen}) == 3

    run(main)


def test_hooks_vet_spawns_and_spawns_report_results(server: Server, sid: str) -> None:
    _, op_token = named_token(server, "operator")
    _, worker_token = named_token(server, "worker")

    # A plain function runs in a thread; `Reject` carries the reason to the worker.
    def vet(hook: Hook) -> bool | Reject:
        if hook.spawn.get("agent") == "rm-rf":
            return Reject("no destructive sub-agents")
        return bool(hook.spawn.get("agent") != "silent-no")

    async def spawn(order: SpawnOrder) -> SpawnOutcome | Defer:
        if order.spawn["agent"] == "lint":
            # The sub-agent posts its result with the task's token; the ack defers to it.
            task = await order.post_result({"lint": "clean"}, output_tail="0 warnings\n")
            assert task["id"] == order.task_id
            return DEFER
        if order.spawn["agent"] == "boom":
            raise RuntimeError("the sub-agent crashed")
        return SpawnOutcome.done({"ran": order.spawn["agent"]})

    async def main() -> None:
        op = Operator(sid, url=server.url, token=op_token, on_hook=vet, on_spawn=spawn)
        async with serving(op, []), lev.AsyncClient(server.url, worker_token) as w:
            linted = await w.spawn(sid, {"agent": "lint"}, timeout_s=20)
            assert linted["ok"] and linted["value"] == {"lint": "clean"}
            task = await w.task(linted["task_id"])
            assert task["status"] == "succeeded"
            assert task["output_tail"] == "0 warnings\n"

            tested = await w.spawn(sid, {"agent": "tests"}, timeout_s=20)
            assert tested["value"] == {"ran": "tests"}

            with pytest.raises(lev.ApiError) as refused:
                await w.spawn(sid, {"agent": "rm-rf"}, timeout_s=20)
            assert refused.value.status == 403
            assert refused.value.code == "rejected_by_middleware"
            assert refused.value.message == "no destructive sub-agents"

            with pytest.raises(lev.ApiError) as silent:
                await w.spawn(sid, {"agent": "silent-no"}, timeout_s=20)
            assert silent.value.code == "rejected_by_middleware"

            with pytest.raises(lev.ApiError) as crashed:
                await w.spawn(sid, {"agent": "boom"}, timeout_s=20)
            assert crashed.value.status == 502 and crashed.value.code == "spawn_failed"
            assert "the sub-agent crashed" in crashed.value.message

    run(main)


def test_triage_decides_or_escalates_to_people(server: Server, sid: str) -> None:
    op_name, op_token = named_token(server, "operator")
    _, worker_token = named_token(server, "worker")
    approver_name, approver_token = named_token(server, "approver")
    refused: list[FrameRefused] = []

    async def triage(item: Triage) -> Any:
        prompt = item.interaction["kind"]["prompt"]
        if "billing" in prompt:
            return Defer("needs a human: billing")
        if "pick" in prompt:
            return {"choice_index": 9}  # not an option: the server refuses it
        return {"value": "ACME"}

    async def main() -> None:
        op = Operator(
            sid, url=server.url, token=op_token, on_triage=triage, on_error=refused.append
        )
        async with (
            serving(op, []),
            lev.AsyncClient(server.url, worker_token) as w,
            lev.AsyncClient(server.url, approver_token) as people,
        ):

            def routed(prompt: str, **kind: Any) -> dict[str, Any]:
                return {
                    "session_id": sid,
                    "kind": {"type": "free_text", "prompt": prompt, **kind},
                    "route": ["operator", "human"],
                }

            decided = await w.create_interaction(routed("which customer?"))
            got = await w.wait_for_answer(decided["id"], LIMIT)
            assert got["status"] == "answered" and got["response"]["value"] == "ACME"
            record = await w.get_interaction(decided["id"])
            assert record["request"]["answered_by"] == op_name

            escalated = await w.create_interaction(routed("refund for billing?"))
            for _ in range(100):
                item = await people.get_interaction(escalated["id"])
                if item["request"].get("metadata"):
                    break
                await asyncio.sleep(0.05)
            assert item["request"]["metadata"]["escalation"]["reason"] == "needs a human: billing"
            await people.respond(escalated["id"], {"value": "refund it"})
            got = await w.wait_for_answer(escalated["id"], LIMIT)
            assert got["response"]["value"] == "refund it"
            record = await w.get_interaction(escalated["id"])
            assert record["request"]["answered_by"] == approver_name

            bad = await w.create_interaction(
                {
                    "session_id": sid,
                    "kind": {"type": "multiple_choice", "prompt": "pick", "options": ["a"]},
                    "route": ["operator"],
                }
            )
            await until(lambda: bool(refused), "the invalid_answer error frame")
            assert refused[0].code == "invalid_answer" and refused[0].req_id
            await people.respond(bad["id"], {"choice_index": 0})

    run(main)


# ---- deferral to people ----


def test_a_deferred_ask_reaches_people_and_their_answer_completes_the_call(
    quick_server: Server, sid: str
) -> None:
    _, op_token = named_token(quick_server, "operator")
    _, worker_token = named_token(quick_server, "worker")
    approver_name, approver_token = named_token(quick_server, "approver")
    calls: list[Ask] = []

    def decline(ask: Ask) -> Any:
        calls.append(ask)
        if ask.question == "crash":
            raise RuntimeError("the model is down")
        return Defer("a person should say")

    async def main() -> None:
        op = Operator(sid, url=quick_server.url, token=op_token, on_ask=decline)
        async with (
            serving(op, []),
            lev.AsyncClient(quick_server.url, worker_token) as w,
            lev.AsyncClient(quick_server.url, approver_token) as people,
        ):
            call = asyncio.ensure_future(w.ask_operator(sid, "ship on friday?", timeout_s=20))
            item = await pending_interaction(people, sid)
            req = item["request"]
            assert req["kind"]["type"] == "free_text"
            assert "ship on friday?" in req["kind"]["prompt"]
            assert "did not answer" in req["metadata"]["escalation"]["reason"]
            assert not call.done()
            await people.respond(req["id"], {"value": "not on a friday"})
            got = await asyncio.wait_for(call, LIMIT)
            assert got == {"answer": "not on a friday", "answered_by": approver_name}

            # A handler that raises defers too: people answer, the operator goes on.
            call = asyncio.ensure_future(w.ask_operator(sid, "crash", timeout_s=20))
            item = await pending_interaction(people, sid)
            assert "crash" in item["request"]["kind"]["prompt"]
            await people.respond(item["request"]["id"], {"value": "a person covers"})
            got = await asyncio.wait_for(call, LIMIT)
            assert got["answer"] == "a person covers"
            assert op.connected
        assert [a.question for a in calls] == ["ship on friday?", "crash"]

    run(main)


def test_a_deferred_hook_is_a_spawn_approval_for_people(quick_server: Server, sid: str) -> None:
    _, op_token = named_token(quick_server, "operator")
    _, worker_token = named_token(quick_server, "worker")
    _, approver_token = named_token(quick_server, "approver")

    async def main() -> None:
        op = Operator(
            sid,
            url=quick_server.url,
            token=op_token,
            on_hook=lambda hook: DEFER,
            on_spawn=lambda order: SpawnOutcome.done({"ran": order.spawn}),
        )
        async with (
            serving(op, []),
            lev.AsyncClient(quick_server.url, worker_token) as w,
            lev.AsyncClient(quick_server.url, approver_token) as people,
        ):
            call = asyncio.ensure_future(w.spawn(sid, {"agent": "deploy"}, timeout_s=20))
            item = await pending_interaction(people, sid)
            kind = item["request"]["kind"]
            assert kind["type"] == "tool_approval" and kind["tool_name"] == "spawn"
            await people.respond(item["request"]["id"], {"approved": True})
            got = await asyncio.wait_for(call, LIMIT)
            assert got["ok"] and got["value"] == {"ran": {"agent": "deploy"}}

    run(main)


# ---- reconnects ----


def test_a_dropped_connection_is_reconnected_and_the_ask_answered_once(
    server: Server, sid: str
) -> None:
    op_name, op_token = named_token(server, "operator")
    _, worker_token = named_token(server, "worker")
    calls: list[str] = []

    async def main() -> None:
        proxy = Proxy(server.listen)
        release = asyncio.Event()

        async def slow(ask: Ask) -> Any:
            calls.append(ask.req_id)
            await release.wait()
            return f"answered {ask.question}"

        op = Operator(
            sid, url=await proxy.start(), token=op_token, on_ask=slow, backoff=(0.05, 0.2)
        )
        hellos: list[Hello] = []
        try:
            async with serving(op, hellos), lev.AsyncClient(server.url, worker_token) as w:
                # 1. The handler is still running when the connection drops: the
                #    server re-sends the ask after the reconnect; it is not handled again.
                call = asyncio.ensure_future(w.ask_operator(sid, "one", timeout_s=25))
                await until(lambda: len(calls) == 1, "the ask")
                proxy.cut()
                await until(lambda: len(hellos) == 2, "the reconnect")
                assert hellos[1].pending == (calls[0],)
                await asyncio.sleep(0.3)  # the re-sent ask has arrived
                assert len(calls) == 1
                release.set()
                got = await asyncio.wait_for(call, LIMIT)
                assert got == {"answer": "answered one", "answered_by": op_name}

                # 2. The handler finishes while there is no connection: its reply
                #    goes out when the server re-sends the ask after the reconnect.
                release.clear()
                call = asyncio.ensure_future(w.ask_operator(sid, "two", timeout_s=25))
                await until(lambda: len(calls) == 2, "the second ask")
                proxy.down = True
                proxy.cut()
                await until(lambda: not op.connected, "the drop")
                release.set()
                await asyncio.sleep(0.3)  # the handler has returned, offline
                assert not call.done()
                proxy.down = False
                got = await asyncio.wait_for(call, LIMIT)
                assert got == {"answer": "answered two", "answered_by": op_name}
                assert hellos[-1].pending == (calls[1],)
                assert len(calls) == 2
        finally:
            proxy.close()

    run(main)


def test_the_operator_reconnects_to_a_restarted_server(fresh_server: Server, sid: str) -> None:
    _, op_token = named_token(fresh_server, "operator")
    _, worker_token = named_token(fresh_server, "worker")

    async def main() -> None:
        op = Operator(
            sid,
            url=fresh_server.url,
            token=op_token,
            on_ask=lambda ask: {"from": "operator", "q": ask.question},
            backoff=(0.05, 0.5),
        )
        hellos: list[Hello] = []
        async with serving(op, hellos):
            async with lev.AsyncClient(fresh_server.url, worker_token) as w:
                got = await w.ask_operator(sid, "before", timeout_s=20)
                assert got["answer"] == {"from": "operator", "q": "before"}
            await asyncio.to_thread(fresh_server.stop)
            await until(lambda: not op.connected, "the drop")
            await asyncio.to_thread(fresh_server.start)
            await until(lambda: len(hellos) == 2, "the reconnect")
            async with lev.AsyncClient(fresh_server.url, worker_token) as w:
                got = await w.ask_operator(sid, "after", timeout_s=20)
                assert got["answer"] == {"from": "operator", "q": "after"}

    run(main)


def test_a_new_connection_replaces_the_old_one(server: Server, sid: str) -> None:
    first_name, first_token = named_token(server, "operator", sessions=[sid])
    # A `*`-scoped token operates any session by name.
    second_name, second_token = named_token(server, "operator", sessions=["*"])
    _, worker_token = named_token(server, "worker")

    async def main() -> None:
        first = Operator(sid, url=server.url, token=first_token, on_ask=lambda a: "first")
        hellos: list[Hello] = []
        first.on_connect(hellos.append)
        first_run = asyncio.ensure_future(first.run())
        await until(lambda: bool(hellos), "the first operator")
        second = Operator(sid, url=server.url, token=second_token, on_ask=lambda a: "second")
        async with serving(second, []):
            assert await asyncio.wait_for(first_run, LIMIT) == "replaced"
            async with lev.AsyncClient(server.url, worker_token) as w:
                got = await w.ask_operator(sid, "who?", timeout_s=20)
            assert got == {"answer": "second", "answered_by": second_name}
        assert first_name != second_name

    run(main)


def test_stop_from_another_thread_ends_run_sync(server: Server, sid: str) -> None:
    _, op_token = named_token(server, "operator")
    op = Operator(sid, url=server.url, token=op_token)
    hellos: list[Hello] = []
    op.on_connect(hellos.append)
    ended: list[Stopped] = []
    th = threading.Thread(target=lambda: ended.append(op.run_sync()))
    th.start()
    deadline = time.monotonic() + LIMIT
    while not hellos and time.monotonic() < deadline and th.is_alive():
        time.sleep(0.02)
    assert hellos and op.connected
    op.stop()
    th.join(LIMIT)
    assert ended == ["stopped"] and not op.connected


def test_a_reply_the_server_could_not_record_is_sent_again() -> None:
    """Against a stand-in server (a real one cannot lose its database on cue):
    `store_unavailable` for a reply makes the operator send it again; frames it
    cannot use (not JSON, an unknown type) change nothing; close 4000 ends run()."""
    from websockets.asyncio.server import ServerConnection, serve

    received: list[Any] = []
    asked: list[Any] = []
    refusals: list[FrameRefused] = []

    async def stand_in(ws: ServerConnection) -> None:
        assert ws.request is not None
        assert ws.request.headers["Authorization"] == "Bearer tok"
        assert ws.request.path == "/v1/operators/s-1/ws"
        await ws.send(json.dumps({"type": "hello", "session_id": "s-1", "pending": []}))
        await ws.send(json.dumps({"type": "ask", "req_id": "r1", "question": "one"}))
        received.append(json.loads(await ws.recv()))
        await ws.send(
            json.dumps(
                {
                    "type": "error",
                    "req_id": "r1",
                    "code": "store_unavailable",
                    "message": "the reply was not recorded, send it again",
                }
            )
        )
        received.append(json.loads(await ws.recv()))
        await ws.send("not json")
        await ws.send(json.dumps({"type": "from_the_future", "req_id": "r9"}))
        await ws.send(json.dumps({"type": "ask", "req_id": "r1", "question": "one"}))
        received.append(json.loads(await ws.recv()))  # the remembered reply, not a new call
        await ws.send(json.dumps({"type": "ask", "req_id": "r2", "question": "two"}))
        received.append(json.loads(await ws.recv()))
        await ws.close(4000, "replaced by another connection")

    async def main() -> None:
        async with serve(stand_in, "127.0.0.1", 0) as server:
            port = server.sockets[0].getsockname()[1]

            def answer(ask: Ask) -> Any:
                asked.append(ask.question)
                return f"re: {ask.question}"

            op = Operator(
                "s-1",
                url=f"http://127.0.0.1:{port}",
                token="tok",
                on_ask=answer,
                on_error=refusals.append,
                backoff=(0.01, 0.05),
            )
            assert await asyncio.wait_for(op.run(), LIMIT) == "replaced"

    run(main)
    one = {"type": "answer", "req_id": "r1", "value": "re: one"}
    assert received == [one, one, one, {"type": "answer", "req_id": "r2", "value": "re: two"}]
    assert asked == ["one", "two"]
    assert [r.code for r in refusals] == ["store_unavailable"]


# ---- errors ----


def test_a_wrong_token_raises_the_servers_error(server: Server, sid: str) -> None:
    _, worker_token = named_token(server, "worker")
    _, elsewhere = named_token(server, "operator", sessions=["other-*"])

    async def refused(token: str) -> lev.ApiError:
        with pytest.raises(lev.ApiError) as e:
            await Operator(sid, url=server.url, token=token).run()
        return e.value

    async def main() -> None:
        wrong = await refused("lev_not_a_token")
        assert wrong.status == 401 and wrong.code and wrong.message
        role = await refused(worker_token)
        assert role.status == 403 and role.code and role.message
        scope = await refused(elsewhere)
        assert scope.status == 403 and scope.code == "session_scope"

    run(main)


def test_a_server_that_is_down_raises_unreachable(sid: str) -> None:
    with pytest.raises(lev.ServerUnreachable) as e:
        Operator(sid, url="http://127.0.0.1:9", token="x").run_sync()
    assert e.value.code == "unreachable" and "127.0.0.1:9" in e.value.message


def test_a_bad_url_is_refused_at_once(sid: str) -> None:
    with pytest.raises(lev.LevError) as e:
        Operator(sid, url="ftp://example.com", token="x")
    assert e.value.code == "invalid_url"


def test_giving_up_after_the_server_is_gone(tmp_path: Path, sid: str) -> None:
    s = Server(tmp_path / "data")
    _, op_token = named_token(s, "operator")

    async def main() -> None:
        op = Operator(sid, url=s.url, token=op_token, backoff=(0.05, 0.1), give_up_after=1.0)
        hellos: list[Hello] = []
        op.on_connect(hellos.append)
        task = asyncio.ensure_future(op.run())
        await until(lambda: bool(hellos), "the hello")
        await asyncio.to_thread(s.stop)
        with pytest.raises(lev.ServerUnreachable):
            await asyncio.wait_for(task, LIMIT)

    try:
        run(main)
    finally:
        s.stop()
