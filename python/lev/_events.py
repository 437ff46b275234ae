"""`GET /v1/events` (SPEC section 3): Server-Sent Events whose ids are the
server's durable sequence numbers.

`Client.events()` gives an `EventStream` (a blocking iterator),
`AsyncClient.events()` an `AsyncEventStream` (an async iterator). Both yield
`Event`s in the server's order and, when the connection drops, connect again
with `Last-Event-ID` set to the last event they yielded: the server replays
what it committed after it, so nothing is missed and nothing is seen twice
(an event the server sends again anyway, at or below that id, is skipped).
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
import socket
import threading
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Any, cast

import httpx

from . import types as t
from ._errors import LevError, ServerUnreachable, api_error

log = logging.getLogger("lev.events")

PATH = "/v1/events"

# Event types the server sends (SPEC section 3); others may come, and are
# yielded as they are.
INTERACTION_EVENTS = (
    "interaction.created",
    "interaction.answered",
    "interaction.expired",
    "interaction.cancelled",
    "interaction.escalated",
)
TASK_EVENTS = ("task.updated",)
OPERATOR_EVENTS = ("operator.connected", "operator.disconnected")


@dataclass(frozen=True)
class Event:
    """One event of `GET /v1/events`.

    `seq` is the durable sequence number (the SSE id; pass it back as
    `after=` to resume from here, also after a restart), `type` is
    `interaction.created`, `interaction.answered`, `interaction.expired`,
    `interaction.cancelled`, `interaction.escalated`, `task.updated`,
    `operator.connected`, `operator.disconnected` (or a type this SDK does not
    know yet), and `data` the JSON object concerned. `interaction`, `task` and
    `operator` give `data` typed, for the events that carry one."""

    seq: int
    type: str
    data: Any = field(hash=False)

    @property
    def interaction(self) -> t.InteractionRecord | None:
        """For `interaction.*`: the interaction with its response and signed
        approval (`{"request", "response", "approval"}`, as `GET
        /v1/interactions/{id}` answers)."""
        if self.type.startswith("interaction.") and isinstance(self.data, dict):
            if isinstance(self.data.get("request"), dict):
                return cast(t.InteractionRecord, self.data)
        return None

    @property
    def task(self) -> t.Task | None:
        """For `task.*`: the task as `GET /v1/tasks/{id}` answers."""
        if self.type.startswith("task.") and isinstance(self.data, dict):
            return cast(t.Task, self.data)
        return None

    @property
    def operator(self) -> t.OperatorPresence | None:
        """For `operator.*`: `{"session_id", "operator"}`."""
        if self.type.startswith("operator.") and isinstance(self.data, dict):
            return cast(t.OperatorPresence, self.data)
        return None

    @property
    def session_id(self) -> str | None:
        """The session the event concerns, when it names one."""
        record = self.interaction
        if record is not None:
            return record["request"].get("session_id")
        if isinstance(self.data, dict):
            sid = self.data.get("session_id")
            return sid if isinstance(sid, str) else None
        return None


class _Parser:
    """The SSE line protocol (WHATWG HTML, "event stream interpretation"):
    fed one line at a time (without its line break), it gives a finished
    event at each blank line. An event cut off by a dropped connection is
    never given: it has no blank line yet."""

    def __init__(self) -> None:
        self.last_id: str | None = None
        self.retry_ms: int | None = None
        self._type = ""
        self._data: list[str] = []

    def reset(self) -> None:
        """Forget a half-read event (a new connection starts afresh)."""
        self._type = ""
        self._data = []

    def line(self, line: str) -> tuple[str | None, str, str] | None:
        """Feed one line; at a blank line ending an event, its `(id, type, data)`."""
        if line == "":
            data, kind = self._data, self._type or "message"
            self.reset()
            if not data:
                return None
            return self.last_id, kind, "\n".join(data)
        if line.startswith(":"):
            return None  # a comment: the server's keep-alive
        field, colon, value = line.partition(":")
        if colon and value.startswith(" "):
            value = value[1:]
        if field == "event":
            self._type = value
        elif field == "data":
            self._data.append(value)
        elif field == "id":
            if "\0" not in value:
                self.last_id = value
        elif field == "retry":
            if value.isdigit():
                self.retry_ms = int(value)
        return None


class _Dropped(Exception):
    """The connection could not be made or was lost; another may work."""


class _State:
    """What both streams share: where they are, the request that resumes
    from there, what each answer and line means, and when to try again."""

    def __init__(
        self,
        url: str,
        after: int | None,
        reconnect: bool,
        backoff: tuple[float, float],
        give_up_after: float | None,
        idle_timeout: float,
        connect_timeout: float,
    ) -> None:
        if after is not None and after < 0:
            raise ValueError(f"after: expected an event seq (0 or more), found {after}")
        self.url = url
        self.last_seq: int | None = after
        self.reconnect = reconnect
        first, most = backoff
        self.first_backoff = max(first, 0.01)
        self.max_backoff = max(most, self.first_backoff)
        self.backoff = self.first_backoff
        self.give_up_after = give_up_after
        self.timeout = httpx.Timeout(connect_timeout, read=idle_timeout)
        self.parser = _Parser()
        self.connected_once = False
        self.down_since: float | None = None
        self.closed = False

    def request(self, http: httpx.Client | httpx.AsyncClient) -> httpx.Request:
        headers = {"Accept": "text/event-stream", "Cache-Control": "no-cache"}
        if self.last_seq is not None:
            headers["Last-Event-ID"] = str(self.last_seq)
        return http.build_request("GET", PATH, headers=headers, timeout=self.timeout)

    def unreachable(self, e: object) -> ServerUnreachable:
        return ServerUnreachable("unreachable", f"cannot reach lev at {self.url}: {e}")

    def check(self, resp: httpx.Response, body: str) -> None:
        """Raise for an answer that is not the stream: `ApiError` (the
        server's code and message) when no later try can succeed, `_Dropped`
        when one may (503 shutting down, 502/504 from a proxy, 429)."""
        if resp.status_code >= 400:
            error = api_error(resp.status_code, body, resp.reason_phrase)
            if self.connected_once and (resp.status_code >= 500 or resp.status_code == 429):
                raise _Dropped(str(error))
            raise error
        content_type = resp.headers.get("content-type", "")
        if not content_type.startswith("text/event-stream"):
            raise LevError(
                "bad_response",
                f"GET {PATH}: expected text/event-stream, found {content_type or 'no type'}"
                f" (HTTP {resp.status_code})",
            )

    def opened(self) -> None:
        self.connected_once = True
        self.down_since = None
        self.parser.reset()

    def line(self, line: str) -> Event | None:
        """Feed one line; a new event to yield, or None."""
        # The server is talking: the next drop waits the shortest time again
        # (not at a mere 200, so that a server taking connections and closing
        # them at once is not asked again and again without backoff).
        self.backoff = self.first_backoff
        got = self.parser.line(line)
        if got is None:
            return None
        id, kind, data = got
        try:
            seq = int(id) if id is not None else -1
        except ValueError:
            seq = -1
        if seq < 0:
            raise LevError("bad_response", f"GET {PATH}: an event without a sequence id: {id!r}")
        if self.last_seq is not None and seq <= self.last_seq:
            return None  # seen already
        try:
            value = json.loads(data)
        except ValueError:
            raise LevError(
                "bad_response", f"GET {PATH}: event {seq} ({kind}): its data is not JSON"
            ) from None
        self.last_seq = seq
        return Event(seq, kind, value)

    def dropped(self, e: object, now: float) -> float:
        """The connection is gone: how long to wait before the next try, or
        raise `ServerUnreachable` when there is to be none."""
        if not self.connected_once or not self.reconnect:
            raise self.unreachable(e)
        self.down_since = now if self.down_since is None else self.down_since
        if self.give_up_after is not None and now - self.down_since > self.give_up_after:
            raise ServerUnreachable(
                "unreachable",
                f"no connection to lev at {self.url} for {self.give_up_after:g} s: {e}",
            )
        retry = self.parser.retry_ms
        base = max(self.backoff, retry / 1000.0) if retry is not None else self.backoff
        self.backoff = min(self.backoff * 2, self.max_backoff)
        log.info("events: reconnecting after seq %s: %s", self.last_seq, e)
        return base * (1.0 + random.random() / 4)


def _shut_down(resp: httpx.Response | None) -> None:
    """Shut down the socket `resp` is read from, so a read blocked on it in
    another thread returns."""
    stream = resp.extensions.get("network_stream") if resp is not None else None
    sock = stream.get_extra_info("socket") if stream is not None else None
    if isinstance(sock, socket.socket):
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


def _ended(resp: httpx.Response) -> str:
    return f"the server ended the stream (HTTP {resp.status_code})"


class EventStream(Iterator[Event]):
    """The events of `GET /v1/events`, as a blocking iterator; made by
    `Client.events()`, which connects before returning it.

    `last_seq` is the seq of the last event yielded (or the `after` given):
    keep it to resume later with `Client.events(after=last_seq)`. `close()`
    (also from another thread, or by leaving a `with` block) ends the
    iteration."""

    def __init__(self, http: httpx.Client, state: _State) -> None:
        self._http = http
        self._state = state
        self._resp: httpx.Response | None = None
        self._lines: Iterator[str] | None = None
        self._wake = threading.Event()
        self._reading = False
        self._connect()

    @property
    def last_seq(self) -> int | None:
        return self._state.last_seq

    def __enter__(self) -> EventStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._state.closed = True
        self._wake.set()
        if self._reading:
            # Another thread is blocked reading: wake it by shutting the
            # socket down; it hangs up and ends the iteration itself.
            _shut_down(self._resp)
        else:
            self._hang_up()

    def _hang_up(self) -> None:
        resp, self._resp, self._lines = self._resp, None, None
        if resp is not None:
            try:
                resp.close()
            except Exception:  # closing a connection another thread reads
                pass

    def _open(self) -> None:
        req = self._state.request(self._http)
        try:
            resp = self._http.send(req, stream=True)
        except httpx.TransportError as e:
            raise _Dropped(e) from None
        if resp.status_code >= 400:
            try:
                body = resp.read().decode("utf-8", "replace")
            except httpx.TransportError:
                body = ""
            finally:
                resp.close()
            self._state.check(resp, body)
        try:
            self._state.check(resp, "")
        except BaseException:
            resp.close()
            raise
        self._resp, self._lines = resp, resp.iter_lines()
        self._state.opened()

    def _connect(self) -> None:
        """Connect, trying again after a drop as the state says."""
        while not self._state.closed:
            try:
                self._open()
                return
            except _Dropped as e:
                self._wake.wait(self._state.dropped(e, time.monotonic()))

    def __iter__(self) -> EventStream:
        return self

    def __next__(self) -> Event:
        try:
            return self._next()
        finally:
            self._reading = False

    def _next(self) -> Event:
        while True:
            if self._state.closed:
                self._hang_up()
                raise StopIteration
            if self._lines is None:
                self._connect()
                continue
            self._reading = True
            try:
                line = next(self._lines)
            except StopIteration:
                reason: object = _ended(self._resp) if self._resp is not None else "closed"
            except httpx.TransportError as e:
                reason = e
            except Exception:
                if self._state.closed:  # close() from another thread
                    continue
                raise
            else:
                event = self._state.line(line)
                if event is not None:
                    return event
                continue
            self._hang_up()
            if self._state.closed:
                continue
            if not self._state.reconnect and isinstance(reason, str):
                self._state.closed = True
                continue
            self._wake.wait(self._state.dropped(reason, time.monotonic()))


class AsyncEventStream(AsyncIterator[Event]):
    """The events of `GET /v1/events`, as an async iterator; made by
    `AsyncClient.events()`. It connects on `async with`, on `await
    stream.connect()`, or at the first event asked for.

    `last_seq` is the seq of the last event yielded (or the `after` given):
    keep it to resume later with `AsyncClient.events(after=last_seq)`.
    `aclose()` (or leaving the `async with` block) ends the iteration."""

    def __init__(self, http: httpx.AsyncClient, state: _State) -> None:
        self._http = http
        self._state = state
        self._resp: httpx.Response | None = None
        self._lines: AsyncIterator[str] | None = None
        self._wake: asyncio.Event | None = None

    @property
    def last_seq(self) -> int | None:
        return self._state.last_seq

    async def __aenter__(self) -> AsyncEventStream:
        await self.connect()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        self._state.closed = True
        if self._wake is not None:
            self._wake.set()
        await self._hang_up()

    async def _hang_up(self) -> None:
        resp, self._resp, self._lines = self._resp, None, None
        if resp is not None:
            try:
                await resp.aclose()
            except Exception:
                pass

    async def _open(self) -> None:
        req = self._state.request(self._http)
        try:
            resp = await self._http.send(req, stream=True)
        except httpx.TransportError as e:
            raise _Dropped(e) from None
        if resp.status_code >= 400:
            try:
                body = (await resp.aread()).decode("utf-8", "replace")
            except httpx.TransportError:
                body = ""
            finally:
                await resp.aclose()
            self._state.check(resp, body)
        try:
            self._state.check(resp, "")
        except BaseException:
            await resp.aclose()
            raise
        self._resp, self._lines = resp, resp.aiter_lines()
        self._state.opened()

    async def _sleep(self, delay: float) -> None:
        if self._wake is None:
            self._wake = asyncio.Event()
        try:
            await asyncio.wait_for(self._wake.wait(), timeout=delay)
        except asyncio.TimeoutError:
            pass

    async def connect(self) -> AsyncEventStream:
        """Connect now (once): raises `ApiError` when the server refuses
        (401, 403, 422 for a bad `after`), `ServerUnreachable` when it
        cannot be reached."""
        while self._lines is None and not self._state.closed:
            try:
                await self._open()
            except _Dropped as e:
                await self._sleep(self._state.dropped(e, time.monotonic()))
        return self

    def __aiter__(self) -> AsyncEventStream:
        return self

    async def __anext__(self) -> Event:
        while True:
            if self._state.closed:
                await self._hang_up()
                raise StopAsyncIteration
            if self._lines is None:
                await self.connect()
                continue
            try:
                line = await self._lines.__anext__()
            except StopAsyncIteration:
                reason: object = _ended(self._resp) if self._resp is not None else "closed"
            except httpx.TransportError as e:
                reason = e
            except Exception:
                if self._state.closed:  # aclose() from another task
                    continue
                raise
            else:
                event = self._state.line(line)
                if event is not None:
                    return event
                continue
            await self._hang_up()
            if self._state.closed:
                continue
            if not self._state.reconnect and isinstance(reason, str):
                self._state.closed = True
                continue
            await self._sleep(self._state.dropped(reason, time.monotonic()))
