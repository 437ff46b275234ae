"""`Client.events()` and `AsyncClient.events()` against a real `lev serve`:
events in order, typed; a dropped connection or a restarted server resumed
from the last event seen, with no gap and no repeat; refusals typed."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from conftest import Server

import lev
from lev.operator import Operator

LIMIT = 30.0


def take(
    stream: lev.EventStream,
    n: int,
    keep: Callable[[lev.Event], bool] = lambda e: True,
    limit: float = LIMIT,
) -> list[lev.Event]:
    """The next `n` events of `stream` that `keep` keeps; fewer when `limit`
    seconds pass first (the stream is then closed from this thread)."""
    got: list[lev.Event] = []
    failed: list[BaseException] = []

    def read() -> None:
        try:
            for event in stream:
                if keep(event):
                    got.append(event)
                    if len(got) == n:
                        return
        except BaseException as e:
            failed.append(e)

    th = threading.Thread(target=read, daemon=True)
    th.start()
    th.join(limit)
    if th.is_alive():
        stream.close()
        th.join(5)
        raise AssertionError(f"{len(got)} of {n} events within {limit} s: {got}")
    if failed:
        raise failed[0]
    return got


def of(sid: str) -> Callable[[lev.Event], bool]:
    return lambda e: e.session_id == sid


def free_text(client: lev.Client, sid: str, prompt: str = "?") -> str:
    return client.create_interaction(
        {"session_id": sid, "kind": {"type": "free_text", "prompt": prompt}}
    )["id"]


def test_events_in_order_as_interactions_are_created_and_answered(
    worker: lev.Client, approver: lev.Client, sid: str
) -> None:
    with approver.events() as stream:
        a = free_text(worker, sid, "first")
        approver.respond(a, {"value": "done"})
        b = free_text(worker, sid, "second")
        worker.cancel(b)
        events = take(stream, 4, of(sid))
    assert [
        (e.type, e.interaction["request"]["id"] if e.interaction else None) for e in events
    ] == [
        ("interaction.created", a),
        ("interaction.answered", a),
        ("interaction.created", b),
        ("interaction.cancelled", b),
    ]
    seqs = [e.seq for e in events]
    assert seqs == sorted(set(seqs))
    assert stream.last_seq is not None and stream.last_seq >= seqs[-1]
    created, answered = events[0].interaction, events[1].interaction
    assert created is not None and answered is not None
    assert created["request"]["status"] == "pending" and created["response"] is None
    assert created["request"]["kind"] == {"type": "free_text", "prompt": "first"}
    assert answered["request"]["status"] == "answered"
    assert answered["response"] is not None and answered["response"]["value"] == "done"
    assert events[3].interaction is not None
    assert events[3].interaction["request"]["status"] == "cancelled"
    assert events[0].task is None and events[0].operator is None


def test_after_replays_from_that_seq(worker: lev.Client, approver: lev.Client, sid: str) -> None:
    with approver.events() as stream:
        ids = [free_text(worker, sid) for _ in range(3)]
        first = take(stream, 3, of(sid))
    assert [e.interaction["request"]["id"] for e in first if e.interaction] == ids
    # After the first: the second and third again, the same seqs and data.
    with approver.events(after=first[0].seq) as again:
        assert take(again, 2, of(sid)) == first[1:]
    # From 0: the whole log, the first of this session among it.
    with approver.events(after=0) as everything:
        found = take(everything, 1, of(sid))
    assert found == first[:1]


class Relay:
    """A TCP relay in front of the server whose connections the test cuts,
    and which refuses new ones while `down`. It records the `Last-Event-ID`
    each request sent."""

    def __init__(self, target: str) -> None:
        host, port = target.rsplit(":", 1)
        self.target = (host, int(port))
        self.down = False
        self.refused = 0
        self.resumed_from: list[str | None] = []
        self.links: list[socket.socket] = []
        self.lock = threading.Lock()
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            if self.down:
                self.refused += 1
                conn.close()
                continue
            try:
                up = socket.create_connection(self.target)
            except OSError:
                conn.close()
                continue
            with self.lock:
                self.links += [conn, up]
            threading.Thread(target=self.pipe, args=(conn, up, True), daemon=True).start()
            threading.Thread(target=self.pipe, args=(up, conn, False), daemon=True).start()

    def pipe(self, src: socket.socket, dst: socket.socket, upstream: bool) -> None:
        head = b""
        try:
            while data := src.recv(65536):
                if upstream and b"\r\n\r\n" not in head:
                    head += data
                    if b"\r\n\r\n" in head:
                        self.resumed_from.append(last_event_id(head))
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def cut(self) -> None:
        with self.lock:
            links, self.links = self.links, []
        for s in links:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()

    def close(self) -> None:
        self.listener.close()
        self.cut()


def last_event_id(head: bytes) -> str | None:
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"last-event-id":
            return value.strip().decode()
    return None


@pytest.fixture
def relay(server: Server) -> Iterator[Relay]:
    r = Relay(server.listen)
    yield r
    r.close()


def test_a_dropped_connection_resumes_with_no_gap_and_no_repeat(
    server: Server, worker: lev.Client, relay: Relay, sid: str
) -> None:
    token = server.token("approver")
    seen: list[lev.Event] = []

    def until_seen(n: int) -> None:
        deadline = time.monotonic() + LIMIT
        while len(seen) < n:
            assert time.monotonic() < deadline, f"{len(seen)} of {n} events: {seen}"
            time.sleep(0.02)

    with lev.Client(relay.url, token) as via_relay, via_relay.events(backoff=(0.05, 0.2)) as stream:

        def read() -> None:
            for event in stream:
                if of(sid)(event):
                    seen.append(event)
                    if len(seen) == 7:
                        return

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        before = [free_text(worker, sid) for _ in range(2)]
        until_seen(2)
        # The network drops, and stays down (the stream trying again and
        # again) while more is committed.
        relay.down = True
        relay.cut()
        during = [free_text(worker, sid) for _ in range(3)]
        deadline = time.monotonic() + LIMIT
        while relay.refused < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert relay.refused >= 2 and len(seen) == 2
        relay.down = False
        after = [free_text(worker, sid) for _ in range(2)]
        reader.join(LIMIT)
        if reader.is_alive():
            stream.close()
        assert not reader.is_alive(), f"{len(seen)} of 7 events: {seen}"
    assert [e.interaction["request"]["id"] for e in seen if e.interaction] == (
        before + during + after
    )
    assert all(e.type == "interaction.created" for e in seen)
    seqs = [e.seq for e in seen]
    assert seqs == sorted(set(seqs))
    # The first request started at the live end; the one after the outage
    # resumed after the last event yielded before it, on the wire.
    assert relay.resumed_from == [None, str(seen[1].seq)]
    # Against the server's own log: the same events, none missing.
    with server.client(token) as direct, direct.events(after=seqs[0] - 1) as log:
        assert take(log, 7, of(sid)) == seen


def test_a_restarted_server_is_resumed_from_the_last_event(fresh_server: Server, sid: str) -> None:
    """Killed and started again on the same data dir: ids are durable, and
    what was committed before the stream got back in is replayed to it."""
    token = fresh_server.token("approver")
    worker_token = fresh_server.token("worker")

    async def main() -> list[lev.Event]:
        seen: list[lev.Event] = []
        async with lev.AsyncClient(fresh_server.url, token) as client:
            stream = client.events(backoff=(1.0, 1.0))
            async with stream:
                with fresh_server.client(worker_token) as w:
                    first = [free_text(w, sid) for _ in range(2)]
                seen += await atake(stream, 2)
                fresh_server.stop()
                fresh_server.start()
                with fresh_server.client(worker_token) as w:
                    second = [free_text(w, sid) for _ in range(2)]
                seen += await atake(stream, 2)
        ids = [e.interaction["request"]["id"] for e in seen if e.interaction]
        assert ids == first + second
        return seen

    seen = asyncio.run(asyncio.wait_for(main(), 4 * LIMIT))
    seqs = [e.seq for e in seen]
    assert seqs == sorted(set(seqs))
    with fresh_server.client(token) as c, c.events(after=0) as log:
        assert take(log, 4, of(sid)) == seen


async def atake(stream: lev.AsyncEventStream, n: int, limit: float = LIMIT) -> list[lev.Event]:
    got: list[lev.Event] = []

    async def read() -> None:
        async for event in stream:
            got.append(event)
            if len(got) == n:
                return

    try:
        await asyncio.wait_for(read(), limit)
    except asyncio.TimeoutError:
        raise AssertionError(f"{len(got)} of {n} events within {limit} s: {got}") from None
    return got


def test_async_events_in_order_with_typed_data(server: Server, sid: str) -> None:
    approver_token, worker_token = server.token("approver"), server.token("worker")
    op_token = server.token("operator", sessions=[sid])

    async def main() -> list[lev.Event]:
        async with (
            lev.AsyncClient(server.url, approver_token) as a,
            lev.AsyncClient(server.url, worker_token) as w,
        ):
            stream = await a.events().connect()
            try:
                made = await w.create_interaction(
                    {
                        "session_id": sid,
                        "kind": {"type": "multiple_choice", "prompt": "?", "options": ["x", "y"]},
                    }
                )
                await a.respond(made["id"], {"choice_index": 1})
                op = Operator(sid, url=server.url, token=op_token)
                running = asyncio.ensure_future(op.run())
                events = [e async for e in until_n(stream, 3, sid)]
                op.stop()
                await running
                events += [e async for e in until_n(stream, 1, sid)]
            finally:
                await stream.aclose()
            # Closed: the iteration ends.
            assert [e async for e in stream] == []
            return events

    events = asyncio.run(asyncio.wait_for(main(), 4 * LIMIT))
    assert [e.type for e in events] == [
        "interaction.created",
        "interaction.answered",
        "operator.connected",
        "operator.disconnected",
    ]
    answered = events[1].interaction
    assert answered is not None and answered["response"] is not None
    assert answered["response"]["choice_index"] == 1
    presence = events[2].operator
    assert presence is not None and presence["session_id"] == sid
    assert presence["operator"].startswith("operator-")
    assert events[2].interaction is None and events[2].task is None


async def until_n(stream: lev.AsyncEventStream, n: int, sid: str) -> Any:
    """The next `n` events of session `sid`."""
    count = 0
    async for event in stream:
        if event.session_id == sid:
            yield event
            count += 1
            if count == n:
                return


def test_refusals_are_typed(server: Server, worker: lev.Client) -> None:
    with pytest.raises(lev.ApiError) as e:
        lev.Client(server.url, "not-a-token").events()
    assert e.value.status == 401 and e.value.code == "unauthorized" and e.value.message
    with pytest.raises(lev.ApiError) as e:
        worker.events()
    assert e.value.status == 403 and e.value.code and e.value.message
    with pytest.raises(ValueError):
        worker.events(after=-1)

    async def main() -> None:
        async with lev.AsyncClient(server.url, "not-a-token") as c:
            with pytest.raises(lev.ApiError) as e:
                async for _ in c.events():
                    pass
            assert e.value.status == 401 and e.value.code == "unauthorized"
        async with lev.AsyncClient("http://127.0.0.1:9", "x") as c:
            with pytest.raises(lev.ServerUnreachable):
                async with c.events():
                    pass

    asyncio.run(asyncio.wait_for(main(), LIMIT))


def test_server_down_is_server_unreachable(fresh_server: Server, sid: str) -> None:
    with pytest.raises(lev.ServerUnreachable) as e:
        lev.Client("http://127.0.0.1:9", "x").events()
    assert e.value.code == "unreachable" and "127.0.0.1:9" in e.value.message
    token = fresh_server.token("approver")
    # Told not to reconnect: a broken connection raises...
    with fresh_server.client(token) as c:
        stream = c.events(reconnect=False)
        fresh_server.stop()
        with pytest.raises(lev.ServerUnreachable):
            take(stream, 1)
    # ...and a stream the server ends (a graceful stop) just ends.
    fresh_server.start()
    with fresh_server.client(token) as c:
        stream = c.events(reconnect=False)
        fresh_server.proc.terminate()
        fresh_server.proc.wait(30)
        assert take(stream, 1) == []
    # Reconnecting, it gives up after `give_up_after` seconds without a server.
    fresh_server.start()
    with fresh_server.client(token) as c:
        stream = c.events(backoff=(0.05, 0.2), give_up_after=1.0)
        fresh_server.stop()
        started = time.monotonic()
        with pytest.raises(lev.ServerUnreachable) as e:
            take(stream, 1)
        assert 1.0 <= time.monotonic() - started < LIMIT
        assert "1 s" in e.value.message


def test_close_from_another_thread_ends_the_iteration(approver: lev.Client) -> None:
    stream = approver.events()
    threading.Timer(0.3, stream.close).start()
    started = time.monotonic()
    assert list(stream) == []
    assert time.monotonic() - started < 10


def test_aclose_from_another_task_ends_the_iteration(server: Server) -> None:
    token = server.token("approver")

    async def main() -> tuple[list[lev.Event], float]:
        async with lev.AsyncClient(server.url, token) as c:
            stream = await c.events().connect()
            loop = asyncio.get_running_loop()
            loop.call_later(0.3, lambda: asyncio.ensure_future(stream.aclose()))
            started = time.monotonic()
            return [e async for e in stream], time.monotonic() - started

    got, took = asyncio.run(asyncio.wait_for(main(), LIMIT))
    assert got == [] and took < 10


def test_the_sse_framing() -> None:
    """Comments, CRLF, multi-line data and a retry field, parsed as the
    WHATWG rules say; an event cut off by a dropped connection is never
    given."""
    from lev._events import _Parser

    p = _Parser()
    lines = [
        ": keep-alive",
        "",
        "retry: 2500",
        "id: 7",
        "event: interaction.created",
        'data: {"a":',
        "data: 1}",
        "",
        "id:8",
        "data:x",
    ]
    got = [r for r in (p.line(line) for line in lines) if r is not None]
    assert got == [("7", "interaction.created", '{"a":\n1}')]
    assert p.retry_ms == 2500
    p.reset()  # the connection dropped before the blank line
    assert p.line("") is None
    assert p.line("data: y") is None
    assert p.line("") == ("8", "message", "y")
