"""The operator client (SPEC section 4): a supervising program that answers a
session's workers over the WebSocket `/v1/operators/{session}/ws`.

    from lev.operator import Defer, Operator, Reject

    op = Operator("s-1", url="http://127.0.0.1:7420", token=operator_token)

    @op.on_ask
    async def answer(ask):
        if "deploy" in str(ask.question):
            return Defer("deploys are for people")   # a person answers instead
        return {"answer": 42}

    @op.on_hook
    def vet(hook):                                  # plain functions run in a thread
        return True if hook.spawn.get("agent") == "tests" else Reject("tests only")

    await op.run()          # or op.run_sync(); op.stop() ends it

What comes in, and what its handler returns:

- `ask`: `on_ask(Ask)` returns any JSON value (the answer), or `Defer`;
- an `ask` of an interaction to triage: `on_triage(Triage)` (else `on_ask`)
  returns an InteractionResponse (the operator decides), or `Defer`;
- `hook_before`: `on_hook(Hook)` returns `True` (allow), `False` or
  `Reject(reason)`, or `Defer`;
- `spawn`: `on_spawn(SpawnOrder)` returns a `SpawnOutcome`, or `Defer`.

`Defer` is the operator declining to decide, and means what the protocol
allows for each kind:

- a triage: the answer `{"escalate": reason}`; people decide at once, with the
  reason noted on the interaction;
- an ask or a hook: no reply at all. The protocol has no reply that hands a
  plain ask or hook to people, so the server does when the operator has not
  replied within its `--operator-reply-timeout` (default 120 s): the ask
  becomes a `free_text` interaction, the hook a `tool_approval` of tool
  `spawn`, and a person's answer completes the worker's call;
- a spawn: `spawn_ack` with value `{}`: the result is the one the sub-agent
  posts to `POST /v1/worker/result` (`SpawnOrder.post_result`).

A handler that raises is logged and counts as `Defer` (people decide), except
for a spawn, which then fails with the exception's text.

Each message is handled once: the server sends every unresolved message again
(same `req_id`) after a reconnect, and the operator does not call the handler
again for one it has handled or is handling. It sends the reply it made again
instead (the first may have been lost with the connection), or, for one it
deferred, nothing.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
import os
import random
import ssl as _ssl
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, TypeVar, cast
from urllib.parse import urlsplit

from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import (
    ConnectionClosed,
    InvalidStatus,
    InvalidURI,
    WebSocketException,
)
from websockets.protocol import State

from . import types as t
from ._client import DEFAULT_URL, AsyncClient, Client, _seg
from ._errors import FrameRefused, LevError, ServerUnreachable, api_error

__all__ = [
    "DEFER",
    "Ask",
    "Defer",
    "FrameRefused",
    "Hello",
    "Hook",
    "HookDecision",
    "Operator",
    "Reject",
    "SpawnOrder",
    "SpawnOutcome",
    "Stopped",
    "Triage",
]

log = logging.getLogger("lev.operator")

# How the operator's `run` ended: `stop()` was called, or another connection
# for the session replaced this one (close code 4000).
Stopped = Literal["stopped", "replaced"]

REPLACED_CLOSE_CODE = 4000
# How often a reply the server could not record (`store_unavailable`) is sent again.
STORE_RETRIES = 5


@dataclass(frozen=True)
class Defer:
    """The operator will not decide this one: people do (an ask, a hook, a
    triage), or, for a spawn, the sub-agent's posted result is the result.
    `reason` is noted on a triaged interaction (`metadata.escalation`)."""

    reason: str = "the operator deferred it to people"


DEFER = Defer()


@dataclass(frozen=True)
class Reject:
    """Reject a spawn in `on_hook`: the worker gets 403 `rejected_by_middleware`
    with `reason`."""

    reason: str = ""


HookDecision = bool | Reject | Defer


@dataclass(frozen=True)
class SpawnOutcome:
    """The result of a spawn, sent as `spawn_ack`. `SpawnOutcome.done(value)`,
    `SpawnOutcome.failed(error)`; `Defer` stands for the value `{}` (the result
    the sub-agent posted)."""

    value: Any = None
    ok: bool = True
    error: str | None = None

    @classmethod
    def done(cls, value: Any) -> SpawnOutcome:
        """Succeeded with `value` (which must not be `{}`: that defers)."""
        return cls(value=value)

    @classmethod
    def failed(cls, error: str) -> SpawnOutcome:
        """Failed with `error`: the worker's spawn gets 502 `spawn_failed`."""
        return cls(value=None, ok=False, error=error)


@dataclass(frozen=True)
class Hello:
    """A connection was made: the session, and the `req_id`s of the unresolved
    messages the server sends again now."""

    session_id: str
    pending: tuple[str, ...]


@dataclass(frozen=True)
class Ask:
    """A worker's question (`POST /v1/sessions/{sid}/ask`), any JSON."""

    req_id: str
    question: Any


@dataclass(frozen=True)
class Triage:
    """An interaction routed to the operator first (`route: ["operator", ...]`):
    answer it with an InteractionResponse (`{"value": ...}`, `{"choice_index":
    ...}`, `{"approved": true, ...}`), signed with the operator's token name as
    the approver, or `Defer(reason)` to hand it to people."""

    req_id: str
    interaction: t.Interaction


@dataclass(frozen=True)
class Hook:
    """A spawn to vet before it runs (`hook_before`)."""

    req_id: str
    spawn: Any


@dataclass(frozen=True)
class SpawnOrder:
    """A spawn to run: its task, and the task-scoped token that lets the
    sub-agent post that task's result, and nothing else."""

    req_id: str
    task_id: str
    task_token: str
    spawn: Any
    url: str

    def sub_agent(self) -> Client:
        """A blocking client with the task's token, for the sub-agent."""
        return Client(self.url, self.task_token)

    async def post_result(
        self,
        value: Any = None,
        *,
        ok: bool = True,
        error: str | None = None,
        output_tail: str | None = None,
    ) -> t.Task:
        """`POST /v1/worker/result` with the task's token, as the sub-agent does."""
        async with AsyncClient(self.url, self.task_token) as sub_agent:
            return await sub_agent.worker_result(
                self.task_id, value, ok=ok, error=error, output_tail=output_tail
            )


AskHandler = Callable[[Ask], Any]
TriageHandler = Callable[[Triage], Mapping[str, Any] | Defer | Awaitable[Mapping[str, Any] | Defer]]
HookHandler = Callable[[Hook], HookDecision | Awaitable[HookDecision]]
SpawnHandler = Callable[[SpawnOrder], SpawnOutcome | Defer | Awaitable[SpawnOutcome | Defer]]
ErrorHandler = Callable[[FrameRefused], None]
ConnectHandler = Callable[[Hello], None]

AskH = TypeVar("AskH", bound=AskHandler)
TriageH = TypeVar("TriageH", bound=TriageHandler)
HookH = TypeVar("HookH", bound=HookHandler)
SpawnH = TypeVar("SpawnH", bound=SpawnHandler)
ErrorH = TypeVar("ErrorH", bound=ErrorHandler)
ConnectH = TypeVar("ConnectH", bound=ConnectHandler)


class _Dropped(Exception):
    """A connection could not be made or was lost; worth another try."""


def _ws_url(url: str, session_id: str) -> str:
    parts = urlsplit(url)
    scheme = {"http": "ws", "https": "wss", "ws": "ws", "wss": "wss"}.get(parts.scheme)
    if scheme is None or not parts.netloc:
        raise LevError(
            "invalid_url",
            f"expected an http(s):// or ws(s):// server url, found {url!r}",
        )
    base = f"{scheme}://{parts.netloc}{parts.path.rstrip('/')}"
    return f"{base}/v1/operators/{_seg(session_id)}/ws"


def _http_url(url: str) -> str:
    if url.startswith("ws://"):
        return "http://" + url.removeprefix("ws://")
    if url.startswith("wss://"):
        return "https://" + url.removeprefix("wss://")
    return url


def _is_triage(question: Any) -> bool:
    """The shape the server gives a triage: `{"interaction": <InteractionRequest>}`."""
    return (
        isinstance(question, dict)
        and len(question) == 1
        and isinstance(question.get("interaction"), dict)
        and "session_id" in question["interaction"]
        and "kind" in question["interaction"]
    )


def _dumps(msg: Mapping[str, Any]) -> str:
    return json.dumps(msg, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


async def _call(handler: Callable[[Any], Any], arg: Any) -> Any:
    """Await an async handler; run a plain function in a thread, so a slow one
    does not hold up the connection (pings, other messages)."""
    if inspect.iscoroutinefunction(handler):
        return await handler(arg)
    result = await asyncio.to_thread(handler, arg)
    if inspect.isawaitable(result):
        return await result
    return result


class Operator:
    """The operator of one session: connects with an operator token (one whose
    `--sessions` patterns cover the session), hands each message to its
    handler, sends the reply, and reconnects with backoff when the connection
    drops.

    `url` and `token` default to `LEV_URL` and `LEV_TOKEN`, like `lev.Client`.
    Handlers are given here or registered with the decorators `on_ask`,
    `on_triage`, `on_hook` and `on_spawn`; each may be `async` or a plain
    function (run in a thread), and each message runs in a task of its own, so
    a long spawn does not hold up the next ask. Without a handler, asks, hooks
    and triages are deferred to people and spawns fail. `on_error` and
    `on_connect` are plain functions called in the event loop: keep them short.

    Errors: `run()` raises `ApiError` (the server's `code` and `message`, and
    the HTTP status) when the server refuses the connection (a wrong token,
    401; a token without the operator role or the session, 403), and
    `ServerUnreachable` when the first connection cannot be made, or no
    connection could be made again for `give_up_after` seconds (by default
    it tries forever once it has been connected). A frame the server refuses
    (an `error` frame) is passed to `on_error` as a `FrameRefused`, and the
    operator goes on.
    """

    def __init__(
        self,
        session_id: str,
        *,
        url: str | None = None,
        token: str | None = None,
        on_ask: AskHandler | None = None,
        on_triage: TriageHandler | None = None,
        on_hook: HookHandler | None = None,
        on_spawn: SpawnHandler | None = None,
        on_error: ErrorHandler | None = None,
        on_connect: ConnectHandler | None = None,
        backoff: tuple[float, float] = (0.1, 10.0),
        give_up_after: float | None = None,
        open_timeout: float = 10.0,
        ping_interval: float | None = 20.0,
        ssl: _ssl.SSLContext | None = None,
        remember: int = 1024,
    ) -> None:
        self.session_id = session_id
        self.url = _http_url((url or os.environ.get("LEV_URL") or DEFAULT_URL).rstrip("/"))
        self.token = token if token is not None else os.environ.get("LEV_TOKEN")
        self.ws_url = _ws_url(self.url, session_id)
        self._on_ask = on_ask
        self._on_triage = on_triage
        self._on_hook = on_hook
        self._on_spawn = on_spawn
        self._on_error = on_error
        self._on_connect = on_connect
        first, most = backoff
        self._first_backoff = max(first, 0.01)
        self._max_backoff = max(most, self._first_backoff)
        self._give_up_after = give_up_after
        self._open_timeout = open_timeout
        self._ping_interval = ping_interval
        self._ssl = ssl
        self._remember = max(remember, 1)
        # req_id -> the reply sent (None: deferred, nothing sent), oldest first.
        self._done: OrderedDict[str, str | None] = OrderedDict()
        # req_ids whose handler runs now.
        self._running: dict[str, asyncio.Task[None]] = {}
        # req_ids whose remembered reply was sent again after a reconnect: the
        # server's `already_resolved` for one of them is expected.
        self._resent: set[str] = set()
        # req_id -> how often its reply was sent again after `store_unavailable`.
        self._retries: dict[str, int] = {}
        self._ws: ClientConnection | None = None
        self._background: set[asyncio.Task[Any]] = set()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop_event: asyncio.Event | None = None
        self._stop_requested = False
        self._connected_once = False

    @classmethod
    def from_client(cls, client: Client | AsyncClient, session_id: str, **kw: Any) -> Operator:
        """An operator with `client`'s server URL and token."""
        return cls(session_id, url=client.url, token=client.token, **kw)

    # ---- registration ----

    def on_ask(self, handler: AskH) -> AskH:
        """Register the handler of asks (and of triages when `on_triage` is not set)."""
        self._on_ask = handler
        return handler

    def on_triage(self, handler: TriageH) -> TriageH:
        """Register the handler of interactions routed to the operator first."""
        self._on_triage = handler
        return handler

    def on_hook(self, handler: HookH) -> HookH:
        """Register the handler of `hook_before`: vet a spawn."""
        self._on_hook = handler
        return handler

    def on_spawn(self, handler: SpawnH) -> SpawnH:
        """Register the handler of spawns."""
        self._on_spawn = handler
        return handler

    def on_error(self, handler: ErrorH) -> ErrorH:
        """Register what to do with the server's `error` frames (default: log them)."""
        self._on_error = handler
        return handler

    def on_connect(self, handler: ConnectH) -> ConnectH:
        """Register what to do on each connection's `hello`."""
        self._on_connect = handler
        return handler

    # ---- running ----

    @property
    def connected(self) -> bool:
        """Whether a connection is up now."""
        return self._ws is not None

    def stop(self) -> None:
        """End `run()`: close the connection and cancel the handlers still
        running (their messages stay unresolved on the server, which sends them
        to the session's next operator). Safe from any thread."""
        self._stop_requested = True
        loop, event = self._loop, self._stop_event
        if loop is not None and event is not None and not loop.is_closed():
            loop.call_soon_threadsafe(event.set)

    def run_sync(self) -> Stopped:
        """`run()` in a new event loop, for a program without one."""
        return asyncio.run(self.run())

    async def run(self) -> Stopped:
        """Serve the session until `stop()` (`"stopped"`) or until another
        connection replaces this one (`"replaced"`), reconnecting with backoff
        whenever the connection drops.

        Raises `ApiError` when the server refuses the connection, and
        `ServerUnreachable` as the class says."""
        if self._stop_event is not None:
            raise LevError("already_running", "this operator is running already")
        self._loop = asyncio.get_running_loop()
        self._stop_event = asyncio.Event()
        if self._stop_requested:
            self._stop_event.set()
        backoff = self._first_backoff
        down_since: float | None = None
        try:
            while not self._stop_event.is_set():
                try:
                    ended = await self._connection()
                except _Dropped as e:
                    if not self._connected_once:
                        raise ServerUnreachable(
                            "unreachable", f"cannot reach lev at {self.ws_url}: {e}"
                        ) from None
                    now = self._loop.time()
                    down_since = now if down_since is None else down_since
                    if self._give_up_after is not None and now - down_since > self._give_up_after:
                        raise ServerUnreachable(
                            "unreachable",
                            f"no connection to lev at {self.ws_url} for "
                            f"{self._give_up_after:g} s: {e}",
                        ) from None
                    log.info("operator of %s: reconnecting: %s", self.session_id, e)
                else:
                    if ended is not None:
                        return ended
                    backoff, down_since = self._first_backoff, self._loop.time()
                    log.info("operator of %s: connection lost; reconnecting", self.session_id)
                delay = backoff * (1.0 + random.random() / 4)
                backoff = min(backoff * 2, self._max_backoff)
                try:
                    await asyncio.wait_for(self._stop_event.wait(), timeout=delay)
                except asyncio.TimeoutError:
                    pass
            return "stopped"
        finally:
            for task in list(self._running.values()):
                task.cancel()
            self._running.clear()
            for task in list(self._background):
                task.cancel()
            self._stop_event = None
            self._loop = None
            self._stop_requested = False

    async def _open(self) -> ClientConnection:
        headers = {}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        kw: dict[str, Any] = {}
        if self._ssl is not None and self.ws_url.startswith("wss://"):
            kw["ssl"] = self._ssl
        try:
            return await connect(
                self.ws_url,
                additional_headers=headers,
                user_agent_header="lev-sdk-python/0.1",
                open_timeout=self._open_timeout,
                ping_interval=self._ping_interval,
                ping_timeout=self._ping_interval,
                max_size=None,
                **kw,
            )
        except InvalidStatus as e:
            resp = e.response
            body = bytes(resp.body).decode("utf-8", "replace")
            err = api_error(resp.status_code, body, resp.reason_phrase)
            if 400 <= resp.status_code < 500 or not self._connected_once:
                raise err from None
            raise _Dropped(str(err)) from None
        except InvalidURI as e:
            raise LevError("invalid_url", str(e)) from None
        except (OSError, asyncio.TimeoutError, WebSocketException) as e:
            raise _Dropped(str(e) or type(e).__name__) from None

    async def _connection(self) -> Stopped | None:
        """One connection, until it ends: how `run` ends, or None when it
        dropped (or was refused by the server for now)."""
        assert self._stop_event is not None
        stopping = asyncio.ensure_future(self._stop_event.wait())
        opening = asyncio.ensure_future(self._open())
        try:
            await asyncio.wait({opening, stopping}, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            opening.cancel()
            stopping.cancel()
            raise
        if not opening.done():
            opening.cancel()
            return "stopped"
        stopping.cancel()
        ws = opening.result()
        self._connected_once = True
        self._ws = ws
        self._resent.clear()
        stopping = asyncio.ensure_future(self._stop_event.wait())
        receiving: asyncio.Future[str | bytes] | None = None
        try:
            while True:
                receiving = asyncio.ensure_future(ws.recv())
                await asyncio.wait({receiving, stopping}, return_when=asyncio.FIRST_COMPLETED)
                if stopping.done():
                    receiving.cancel()
                    await ws.close(1000, "the operator stopped")
                    return "stopped"
                try:
                    frame = receiving.result()
                except ConnectionClosed as e:
                    if e.rcvd is not None and e.rcvd.code == REPLACED_CLOSE_CODE:
                        log.info("operator of %s: replaced by another connection", self.session_id)
                        return "replaced"
                    if e.rcvd is not None and e.rcvd.code not in (1000, 1001):
                        log.info(
                            "operator of %s: closed by the server: %s %s",
                            self.session_id,
                            e.rcvd.code,
                            e.rcvd.reason,
                        )
                    return None
                if isinstance(frame, str):
                    self._received(frame)
        finally:
            self._ws = None
            stopping.cancel()
            if receiving is not None:
                receiving.cancel()
            if ws.state is not State.CLOSED:
                # Cancelled (the program ends): drop the connection without waiting.
                ws.transport.close()

    # ---- messages ----

    def _received(self, text: str) -> None:
        try:
            msg = json.loads(text)
        except ValueError:
            log.warning("operator of %s: a frame that is not JSON: %.200s", self.session_id, text)
            return
        if not isinstance(msg, dict):
            return
        kind = msg.get("type")
        if kind == "hello":
            pending = msg.get("pending")
            hello = Hello(
                session_id=str(msg.get("session_id", self.session_id)),
                pending=tuple(str(p) for p in pending) if isinstance(pending, list) else (),
            )
            log.info("operator of %s: connected, %d pending", self.session_id, len(hello.pending))
            if self._on_connect is not None:
                self._guard("on_connect", self._on_connect, hello)
        elif kind == "error":
            req_id = msg.get("req_id")
            err = FrameRefused(
                str(msg.get("code", "error")),
                str(msg.get("message", "")),
                req_id if isinstance(req_id, str) else None,
            )
            if err.code == "already_resolved" and err.req_id in self._resent:
                # The reply sent again had reached the server before the drop.
                log.debug("operator of %s: %s", self.session_id, err)
                return
            if err.code == "store_unavailable" and err.req_id is not None:
                # The server could not record the reply and asks for it again.
                self._send_again_later(err.req_id)
            if self._on_error is not None:
                self._guard("on_error", self._on_error, err)
            else:
                log.warning("operator of %s: the server refused a frame: %s", self.session_id, err)
        elif kind in ("ask", "hook_before", "spawn"):
            self._dispatch(msg)
        else:
            # A kind this SDK does not know (a newer server): it expects no reply from us.
            log.debug("operator of %s: ignored a %r frame", self.session_id, kind)

    def _guard(self, name: str, callback: Callable[[Any], None], arg: Any) -> None:
        try:
            callback(arg)
        except Exception:
            log.exception("operator of %s: %s raised", self.session_id, name)

    def _dispatch(self, msg: dict[str, Any]) -> None:
        """Start the handler for `msg`, unless its req_id was handled or runs."""
        req_id = msg.get("req_id")
        if not isinstance(req_id, str):
            log.warning("operator of %s: a %s without a req_id", self.session_id, msg.get("type"))
            return
        if req_id in self._done:
            reply = self._done[req_id]
            if reply is not None:
                self._resent.add(req_id)
                self._send(reply)
            return
        if req_id in self._running:
            return
        task = asyncio.ensure_future(self._handle(req_id, msg))
        self._running[req_id] = task

    async def _handle(self, req_id: str, msg: dict[str, Any]) -> None:
        try:
            reply = await self._reply(req_id, msg)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("operator of %s: no reply made to %s", self.session_id, req_id)
            reply = None
        finally:
            self._running.pop(req_id, None)
        self._done[req_id] = reply
        while len(self._done) > self._remember:
            old, _ = self._done.popitem(last=False)
            self._retries.pop(old, None)
        if reply is not None:
            self._send(reply)

    async def _reply(self, req_id: str, msg: dict[str, Any]) -> str | None:
        """The reply to send for `msg` (None: none, the operator defers)."""
        kind = msg["type"]
        if kind == "ask":
            question = msg.get("question")
            if isinstance(question, dict) and _is_triage(question):
                return await self._triage(req_id, question["interaction"])
            value = await self._run_handler("ask", self._on_ask, Ask(req_id, question))
            if isinstance(value, Defer):
                return None
            return _dumps({"type": "answer", "req_id": req_id, "value": value})
        if kind == "hook_before":
            decision = await self._run_handler(
                "hook", self._on_hook, Hook(req_id, msg.get("spawn"))
            )
            if isinstance(decision, Defer):
                return None
            if isinstance(decision, Reject):
                reply: dict[str, Any] = {"type": "hook_ack", "req_id": req_id, "ok": False}
                if decision.reason:
                    reply["reason"] = decision.reason
                return _dumps(reply)
            if isinstance(decision, bool):
                return _dumps({"type": "hook_ack", "req_id": req_id, "ok": decision})
            log.error(
                "operator of %s: the hook handler returned %r; expected True, False, "
                "Reject or Defer: deferring it to people",
                self.session_id,
                decision,
            )
            return None
        return await self._spawn(req_id, msg)

    async def _triage(self, req_id: str, interaction: dict[str, Any]) -> str:
        if self._on_triage is not None:
            answer = await self._run_handler(
                "triage", self._on_triage, Triage(req_id, cast(t.Interaction, interaction))
            )
        else:
            answer = await self._run_handler(
                "ask", self._on_ask, Ask(req_id, {"interaction": interaction})
            )
        if isinstance(answer, Defer):
            value: Any = {"escalate": answer.reason}
        elif isinstance(answer, Mapping):
            value = dict(answer)
        else:
            value = {
                "escalate": f"the operator's triage answer was not an InteractionResponse: "
                f"{answer!r:.200}"
            }
        try:
            return _dumps({"type": "answer", "req_id": req_id, "value": value})
        except (TypeError, ValueError) as e:
            reason = f"the operator's triage answer is not JSON: {e}"
            return _dumps({"type": "answer", "req_id": req_id, "value": {"escalate": reason}})

    async def _spawn(self, req_id: str, msg: dict[str, Any]) -> str:
        task_id, task_token = msg.get("task_id"), msg.get("task_token")
        if not isinstance(task_id, str) or not isinstance(task_token, str):
            outcome = SpawnOutcome.failed("the spawn frame had no task_id or task_token")
        elif self._on_spawn is None:
            outcome = SpawnOutcome.failed(
                f"the operator of session {self.session_id} runs no spawns"
            )
        else:
            order = SpawnOrder(req_id, task_id, task_token, msg.get("spawn"), self.url)
            try:
                result = await _call(self._on_spawn, order)
            except asyncio.CancelledError:
                raise
            except Exception as e:
                log.exception("operator of %s: the spawn handler raised", self.session_id)
                result = SpawnOutcome.failed(
                    f"the operator's spawn handler failed: {type(e).__name__}: {e}"
                )
            if isinstance(result, Defer):
                outcome = SpawnOutcome(value={})
            elif isinstance(result, SpawnOutcome):
                outcome = result
            else:
                outcome = SpawnOutcome.failed(
                    f"the operator's spawn handler returned {type(result).__name__}, "
                    "expected SpawnOutcome or Defer"
                )
        reply: dict[str, Any] = {
            "type": "spawn_ack",
            "req_id": req_id,
            "value": outcome.value,
            "ok": outcome.ok,
        }
        if outcome.error is not None:
            reply["error"] = outcome.error
        try:
            return _dumps(reply)
        except (TypeError, ValueError) as e:
            return _dumps(
                {
                    "type": "spawn_ack",
                    "req_id": req_id,
                    "value": None,
                    "ok": False,
                    "error": f"the spawn's result is not JSON: {e}",
                }
            )

    async def _run_handler(self, name: str, handler: Callable[[Any], Any] | None, arg: Any) -> Any:
        """The handler's return value; `DEFER` without a handler, when it raises,
        or when what it returned cannot be sent as JSON."""
        if handler is None:
            return DEFER
        try:
            value = await _call(handler, arg)
            if not isinstance(value, (Defer, Reject)):
                _dumps({"v": value})
            return value
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception(
                "operator of %s: the %s handler raised; deferring it to people",
                self.session_id,
                name,
            )
            return Defer(f"the operator's {name} handler failed")

    def _send_again_later(self, req_id: str) -> None:
        """Send the reply to `req_id` again after a pause, a few times at most."""
        reply = self._done.get(req_id)
        tries = self._retries.get(req_id, 0)
        if reply is None or tries >= STORE_RETRIES:
            return
        self._retries[req_id] = tries + 1

        async def later() -> None:
            await asyncio.sleep(self._first_backoff * 2**tries)
            self._send(reply)

        task = asyncio.ensure_future(later())
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    def _send(self, text: str) -> None:
        """Send on the connection up now. Without one, or when the send fails,
        the reply is kept: the server sends the message again after the
        reconnect, and the reply goes out then."""
        ws = self._ws
        if ws is None:
            return

        async def send() -> None:
            try:
                await ws.send(text)
            except ConnectionClosed:
                pass

        task = asyncio.ensure_future(send())
        self._background.add(task)
        task.add_done_callback(self._background.discard)
