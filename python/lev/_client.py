"""`Client` and `AsyncClient`: every route of SPEC section 3.

Both build the same requests (`_Routes`); one sends them with `httpx.Client`,
the other with `httpx.AsyncClient`. Errors are `ApiError` (the server's
`code` and `message`, and the HTTP status) or `ServerUnreachable`.
"""

from __future__ import annotations

import base64
import os
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast
from urllib.parse import quote

import httpx

from . import types as t
from ._errors import Denied, LevError, ServerUnreachable, TimedOut, api_error
from ._events import AsyncEventStream, EventStream, _State
from ._forms import form_question, typed
from ._parts import Attachment, inbound_parts

DEFAULT_URL = "http://127.0.0.1:7420"
# Longest single long-poll the server allows.
MAX_WAIT_S = 300
# The most pages read to gather a whole list.
MAX_PAGES = 10_000


def _seg(s: str) -> str:
    return quote(s, safe="-._~:")


@dataclass(frozen=True)
class _Req:
    method: str
    path: str
    json: Any = None
    params: Mapping[str, Any] | None = None
    timeout: float | None = None
    raw: bool = False


def _clean(d: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in d.items() if v is not None}


def _next_page(req: _Req, page: Any, items: list[Any]) -> _Req | None:
    """Add `page`'s items to `items`; the request of the page after it, or
    None when `page` is the last (its `next_cursor` is None)."""
    if not isinstance(page, dict) or not isinstance(page.get("items"), list):
        raise LevError(
            "bad_response", f"the server's answer to {req.method} {req.path} is not a page"
        )
    items.extend(page["items"])
    cursor = page.get("next_cursor")
    if not cursor:
        return None
    if req.params is not None and req.params.get("cursor") == cursor:
        raise LevError("bad_response", f"{req.path}: the same next_cursor {cursor!r} again")
    return _Req(req.method, req.path, req.json, {**(req.params or {}), "cursor": cursor})


class _Base:
    def __init__(
        self, url: str | None = None, token: str | None = None, *, timeout: float = 30.0
    ) -> None:
        self.url = (url or os.environ.get("LEV_URL") or DEFAULT_URL).rstrip("/")
        self.token = token if token is not None else os.environ.get("LEV_TOKEN")
        self.timeout = timeout

    def _headers(self) -> dict[str, str]:
        h = {"Accept": "application/json", "User-Agent": "lev-sdk-python/0.1"}
        if self.token:
            h["Authorization"] = f"Bearer {self.token}"
        return h

    def _timeout(self, req: _Req) -> float:
        return (req.timeout + 15.0) if req.timeout is not None else self.timeout

    def _unreachable(self, e: Exception) -> ServerUnreachable:
        return ServerUnreachable("unreachable", f"cannot reach lev at {self.url}: {e}")

    @staticmethod
    def _result(resp: httpx.Response, req: _Req) -> Any:
        if resp.status_code >= 400:
            raise api_error(resp.status_code, resp.text, resp.reason_phrase)
        if req.raw:
            return resp.content
        if not resp.content:
            return None
        try:
            return resp.json()
        except ValueError:
            raise LevError(
                "bad_response", f"the server's answer to {req.method} {req.path} is not JSON"
            ) from None

    # ---- the requests, shared by both clients ----

    @staticmethod
    def _r_health() -> _Req:
        return _Req("GET", "/v1/health")

    @staticmethod
    def _r_keys() -> _Req:
        return _Req("GET", "/v1/keys")

    @staticmethod
    def _r_create(request: Mapping[str, Any]) -> _Req:
        return _Req("POST", "/v1/interactions", dict(request))

    @staticmethod
    def _r_list(
        status: str | None, session_id: str | None, limit: int | None, cursor: str | None
    ) -> _Req:
        params = _clean(
            {"status": status, "session_id": session_id, "limit": limit, "cursor": cursor}
        )
        return _Req("GET", "/v1/interactions", params=params)

    @staticmethod
    def _r_get(id: str) -> _Req:
        return _Req("GET", f"/v1/interactions/{_seg(id)}")

    @staticmethod
    def _r_wait(id: str, timeout_s: int) -> _Req:
        return _Req(
            "GET",
            f"/v1/interactions/{_seg(id)}/wait",
            params={"timeout_s": timeout_s},
            timeout=float(timeout_s),
        )

    @staticmethod
    def _r_respond(
        id: str, response: Mapping[str, Any], attachments: Iterable[Attachment] | None
    ) -> _Req:
        body = {"request_id": id, **response}
        if attachments is not None:
            body["parts"] = [*(response.get("parts") or ()), *inbound_parts(attachments)]
        return _Req("POST", f"/v1/interactions/{_seg(id)}/respond", _clean(body))

    def _events_state(
        self,
        after: int | None,
        reconnect: bool,
        backoff: tuple[float, float],
        give_up_after: float | None,
        idle_timeout: float,
    ) -> _State:
        return _State(
            self.url, after, reconnect, backoff, give_up_after, idle_timeout, self.timeout
        )

    @staticmethod
    def _r_cancel(id: str) -> _Req:
        return _Req("POST", f"/v1/interactions/{_seg(id)}/cancel", {})

    @staticmethod
    def _r_blob(sha256: str) -> _Req:
        return _Req("GET", f"/v1/blobs/{_seg(sha256)}", raw=True)

    @staticmethod
    def _r_gate(body: Mapping[str, Any]) -> _Req:
        return _Req("POST", "/v1/gate", _clean(body))

    @staticmethod
    def _r_consume(nonce: str) -> _Req:
        return _Req("POST", "/v1/nonces/consume", {"nonce": nonce})

    @staticmethod
    def _r_grants() -> _Req:
        return _Req("GET", "/v1/grants")

    @staticmethod
    def _r_revoke_grant(id: str) -> _Req:
        return _Req("DELETE", f"/v1/grants/{_seg(id)}")

    @staticmethod
    def _r_ask_operator(session_id: str, question: Any, timeout_s: int | None) -> _Req:
        body = _clean({"question": question, "timeout_s": timeout_s})
        return _Req(
            "POST",
            f"/v1/sessions/{_seg(session_id)}/ask",
            body,
            timeout=float(timeout_s or MAX_WAIT_S),
        )

    @staticmethod
    def _r_spawn(session_id: str, spawn: Any, timeout_s: int | None) -> _Req:
        body = _clean({"spawn": spawn, "timeout_s": timeout_s})
        return _Req(
            "POST",
            f"/v1/sessions/{_seg(session_id)}/spawn",
            body,
            timeout=float(timeout_s or MAX_WAIT_S),
        )

    @staticmethod
    def _r_worker_result(
        task_id: str, value: Any, ok: bool, error: str | None, output_tail: str | None
    ) -> _Req:
        body = _clean(
            {
                "task_id": task_id,
                "value": value,
                "ok": ok,
                "error": error,
                "output_tail": output_tail,
            }
        )
        body.setdefault("value", None)
        return _Req("POST", "/v1/worker/result", body)

    @staticmethod
    def _r_tasks(
        status: str | None = None,
        session_id: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> _Req:
        params = _clean(
            {"status": status, "session_id": session_id, "limit": limit, "cursor": cursor}
        )
        return _Req("GET", "/v1/tasks", params=params)

    @staticmethod
    def _r_task(id: str) -> _Req:
        return _Req("GET", f"/v1/tasks/{_seg(id)}")

    @staticmethod
    def _r_create_token(
        name: str, role: str, caller: str | None, sessions: Sequence[str] | None
    ) -> _Req:
        body = _clean(
            {
                "name": name,
                "role": role,
                "caller": caller,
                "sessions": list(sessions) if sessions is not None else None,
            }
        )
        return _Req("POST", "/v1/tokens", body)

    @staticmethod
    def _r_tokens() -> _Req:
        return _Req("GET", "/v1/tokens")

    @staticmethod
    def _r_revoke_token(name: str) -> _Req:
        return _Req("DELETE", f"/v1/tokens/{_seg(name)}")

    @staticmethod
    def _r_audit(after: int | None, cursor: str | None = None) -> _Req:
        return _Req("GET", "/v1/audit", params=_clean({"after": after, "cursor": cursor}))

    @staticmethod
    def _r_rotate_key() -> _Req:
        return _Req("POST", "/v1/keys/rotate", {})

    @staticmethod
    def _r_remove_key(kid: str) -> _Req:
        return _Req("DELETE", f"/v1/keys/{_seg(kid)}")

    @staticmethod
    def _r_metrics() -> _Req:
        return _Req("GET", "/metrics", raw=True)

    @staticmethod
    def _r_people_keys() -> _Req:
        return _Req("GET", "/v1/people/keys")

    @staticmethod
    def _r_register_person_key(key: Mapping[str, Any] | bytes) -> _Req:
        if isinstance(key, (bytes, bytearray)):
            x = base64.urlsafe_b64encode(bytes(key)).decode().rstrip("=")
            key = {"kty": "OKP", "crv": "Ed25519", "x": x}
        return _Req("POST", "/v1/people/keys", dict(key))

    @staticmethod
    def _r_revoke_person_key(kid: str) -> _Req:
        return _Req("DELETE", f"/v1/people/keys/{_seg(kid)}")


def question(
    prompt: str,
    *,
    session_id: str,
    options: Sequence[str] | None = None,
    title: str | None = None,
    timeout_s: int | None = None,
    conversation_id: str | None = None,
    caller: str | None = None,
    route: Sequence[str] | None = None,
    id: str | None = None,
    form: Any = None,
) -> dict[str, Any]:
    """The InteractionRequest `ask` creates: free text, a multiple choice with
    `options`, or a form of `form`'s fields (a schema dict, a dataclass or a
    pydantic model)."""
    kind: dict[str, Any] = {"type": "free_text", "prompt": prompt}
    if options is not None:
        kind = {"type": "multiple_choice", "prompt": prompt, "options": list(options)}
    if form is not None:
        kind = form_question(prompt, form)
    return _clean(
        {
            "id": id or f"py-{uuid.uuid4().hex}",
            "session_id": session_id,
            "conversation_id": conversation_id,
            "caller": caller,
            "title": title,
            "kind": kind,
            "timeout_s": timeout_s,
            "route": list(route) if route is not None else None,
        }
    )


def answer_of(record: t.Interaction, result: t.WaitResult) -> str:
    """The text of a final wait result; raises for an expired or cancelled question."""
    status = result["status"]
    if status == "expired":
        raise TimedOut("expired", "nobody answered in time; the question expired")
    if status == "cancelled":
        raise TimedOut("cancelled", "the question was cancelled before anyone answered it")
    response = result.get("response") or {}
    kind = record.get("kind") or {}
    index = response.get("choice_index")
    if kind.get("type") == "multiple_choice" and index is not None:
        options = kind.get("options") or []
        return str(options[index]) if 0 <= index < len(options) else f"option #{index + 1}"
    if kind.get("type") == "tool_approval":
        if response.get("approved"):
            return "approved"
        feedback = (response.get("feedback") or "").strip()
        raise Denied("denied", "the person denied the call", feedback or None)
    return response.get("value") or ""


def fields_of(result: t.WaitResult) -> dict[str, Any]:
    """A form's answer (its fields) from a final wait result; raises for an
    expired or cancelled form."""
    status = result["status"]
    if status == "expired":
        raise TimedOut("expired", "nobody answered in time; the form expired")
    if status == "cancelled":
        raise TimedOut("cancelled", "the form was cancelled before anyone filled it in")
    response = result.get("response") or {}
    return dict(response.get("fields") or {})


class Client(_Base):
    """A blocking client: `lev.Client(url, token)`."""

    def __init__(
        self,
        url: str | None = None,
        token: str | None = None,
        *,
        timeout: float = 30.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        super().__init__(url, token, timeout=timeout)
        self._http = httpx.Client(base_url=self.url, headers=self._headers(), transport=transport)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _all(self, req: _Req) -> list[Any]:
        """Every item of a list, page after page."""
        items: list[Any] = []
        page_req = req
        for _ in range(MAX_PAGES):
            following = _next_page(page_req, self._send(page_req), items)
            if following is None:
                return items
            page_req = following
        raise LevError("bad_response", f"{req.path}: more than {MAX_PAGES} pages")

    def _send(self, req: _Req) -> Any:
        try:
            resp = self._http.request(
                req.method,
                req.path,
                json=req.json,
                params=req.params,
                timeout=self._timeout(req),
            )
        except httpx.HTTPError as e:
            raise self._unreachable(e) from None
        return self._result(resp, req)

    def health(self) -> t.Health:
        return cast(t.Health, self._send(self._r_health()))

    def keys(self) -> t.Jwks:
        return cast(t.Jwks, self._send(self._r_keys()))

    def create_interaction(self, request: Mapping[str, Any]) -> t.Interaction:
        return cast(t.Interaction, self._send(self._r_create(request)))

    def list_interactions(
        self,
        status: str | None = None,
        *,
        session_id: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> t.InteractionPage:
        return cast(t.InteractionPage, self._send(self._r_list(status, session_id, limit, cursor)))

    def get_interaction(self, id: str) -> t.InteractionRecord:
        return cast(t.InteractionRecord, self._send(self._r_get(id)))

    def wait(self, id: str, timeout_s: int = 30) -> t.WaitResult:
        """One long poll: `{"status": "pending"}` when the time is up."""
        return cast(t.WaitResult, self._send(self._r_wait(id, min(max(timeout_s, 1), MAX_WAIT_S))))

    def wait_for_answer(self, id: str, timeout: float | None = None) -> t.WaitResult:
        """Long-poll until the interaction is answered, expired or cancelled;
        `TimedOut` past `timeout` seconds (None: for ever)."""
        until = None if timeout is None else time.monotonic() + timeout
        while True:
            left = MAX_WAIT_S if until is None else int(until - time.monotonic())
            if left <= 0:
                raise TimedOut("timed_out", f"nobody answered {id} within {timeout} s")
            result = self.wait(id, min(left, 60))
            if result["status"] != "pending":
                return result

    def respond(
        self,
        id: str,
        response: Mapping[str, Any],
        *,
        attachments: Iterable[Attachment] | None = None,
    ) -> t.RespondResult:
        """Answer an interaction. `attachments` go with a text answer as its
        `parts`: paths (read now), `(name, bytes)` or `(name, bytes,
        media_type)`. The result's parts are the stored ones (`name`,
        `media_type`, `size`, `sha256`); `blob(sha256)` reads the bytes back."""
        return cast(t.RespondResult, self._send(self._r_respond(id, response, attachments)))

    def cancel(self, id: str) -> t.Interaction:
        return cast(t.Interaction, self._send(self._r_cancel(id)))

    def blob(self, sha256: str) -> bytes:
        """`GET /v1/blobs/{sha256}`: an attachment's bytes (a stored part's `sha256`)."""
        return cast(bytes, self._send(self._r_blob(sha256)))

    def events(
        self,
        after: int | None = None,
        *,
        reconnect: bool = True,
        backoff: tuple[float, float] = (0.1, 10.0),
        give_up_after: float | None = None,
        idle_timeout: float = 60.0,
    ) -> EventStream:
        """`GET /v1/events`: connect, and iterate over the events, in order.

        `after`: the seq of the last event already seen (0: from the
        first); None starts with the next event committed. Once connected,
        a dropped connection (or a server restart) is reconnected to with
        backoff, resuming after the last event yielded: no gap, no repeat.
        `reconnect=False` ends the iteration when the server closes the
        stream and raises `ServerUnreachable` when the connection breaks.
        No byte for `idle_timeout` seconds (the server sends a keep-alive
        every 15) counts as a broken connection.

        Raises `ApiError` when the server refuses (401 bad token, 403 not an
        approver, 422 bad `after`), `ServerUnreachable` when the first
        connection cannot be made, or no new one for `give_up_after`
        seconds (None: keep trying)."""
        state = self._events_state(after, reconnect, backoff, give_up_after, idle_timeout)
        return EventStream(self._http, state)

    def gate(self, body: Mapping[str, Any]) -> t.GateResult:
        return cast(t.GateResult, self._send(self._r_gate(body)))

    def consume_nonce(self, nonce: str) -> None:
        self._send(self._r_consume(nonce))

    def grants(self) -> list[t.Grant]:
        return cast(list[t.Grant], self._all(self._r_grants()))

    def revoke_grant(self, id: str) -> t.Grant:
        return cast(t.Grant, self._send(self._r_revoke_grant(id)))

    def ask_operator(
        self, session_id: str, question: Any, *, timeout_s: int | None = None
    ) -> t.AskResult:
        return cast(t.AskResult, self._send(self._r_ask_operator(session_id, question, timeout_s)))

    def spawn(self, session_id: str, spawn: Any, *, timeout_s: int | None = None) -> t.SpawnResult:
        return cast(t.SpawnResult, self._send(self._r_spawn(session_id, spawn, timeout_s)))

    def worker_result(
        self,
        task_id: str,
        value: Any = None,
        *,
        ok: bool = True,
        error: str | None = None,
        output_tail: str | None = None,
    ) -> t.Task:
        return cast(
            t.Task, self._send(self._r_worker_result(task_id, value, ok, error, output_tail))
        )

    def tasks(self, *, session_id: str | None = None, status: str | None = None) -> list[t.Task]:
        """Every task (of `session_id`, in `status`), newest first, page after page."""
        return cast(list[t.Task], self._all(self._r_tasks(status, session_id)))

    def list_tasks(
        self,
        status: str | None = None,
        *,
        session_id: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> t.TaskPage:
        """One page of tasks, newest first."""
        return cast(t.TaskPage, self._send(self._r_tasks(status, session_id, limit, cursor)))

    def task(self, id: str) -> t.Task:
        return cast(t.Task, self._send(self._r_task(id)))

    def create_token(
        self,
        name: str,
        role: str,
        *,
        caller: str | None = None,
        sessions: Sequence[str] | None = None,
    ) -> t.TokenInfo:
        return cast(t.TokenInfo, self._send(self._r_create_token(name, role, caller, sessions)))

    def tokens(self) -> list[t.TokenInfo]:
        return cast(list[t.TokenInfo], self._all(self._r_tokens()))

    def revoke_token(self, name: str) -> None:
        self._send(self._r_revoke_token(name))

    def audit(self, after: int | None = None, *, cursor: str | None = None) -> t.AuditPage:
        """One page of the audit log after entry `after` (or the `next_cursor`
        of the page before), with the chain's signed head."""
        return cast(t.AuditPage, self._send(self._r_audit(after, cursor)))

    def rotate_key(self) -> t.Jwks:
        return cast(t.Jwks, self._send(self._r_rotate_key()))

    def remove_key(self, kid: str) -> t.Jwks:
        return cast(t.Jwks, self._send(self._r_remove_key(kid)))

    def metrics(self) -> str:
        return cast(bytes, self._send(self._r_metrics())).decode()

    def people_keys(self) -> t.PeopleJwks:
        """`GET /v1/people/keys` (no token needed): every person's public keys in
        force, with which signed votes are checked (`lev.PeopleKeys(...)`)."""
        return cast(t.PeopleJwks, self._send(self._r_people_keys()))

    def register_person_key(self, key: Mapping[str, Any] | bytes) -> t.PersonKeyRegistered:
        """`POST /v1/people/keys` (approver): register an Ed25519 public key
        (a JWK without `kid`, or the raw 32 bytes) to the token's own name,
        as `lev key init` does; its votes can then be signed by that key."""
        return cast(t.PersonKeyRegistered, self._send(self._r_register_person_key(key)))

    def revoke_person_key(self, kid: str) -> None:
        """`DELETE /v1/people/keys/{kid}`: the key's person, or an admin."""
        self._send(self._r_revoke_person_key(kid))

    def ask(
        self,
        prompt: str,
        *,
        session_id: str = "py",
        options: Sequence[str] | None = None,
        title: str | None = None,
        timeout_s: int | None = None,
        conversation_id: str | None = None,
        caller: str | None = None,
        route: Sequence[str] | None = None,
    ) -> str:
        """Ask a person (or the session's operator, with `route`) and wait: the
        answer's text, or the chosen option. `TimedOut` when it expired or was
        cancelled."""
        record = self.create_interaction(
            question(
                prompt,
                session_id=session_id,
                options=options,
                title=title,
                timeout_s=timeout_s,
                conversation_id=conversation_id,
                caller=caller,
                route=route,
            )
        )
        deadline = None if timeout_s is None else timeout_s + 5.0
        return answer_of(record, self.wait_for_answer(record["id"], deadline))

    def ask_form(
        self,
        prompt: str,
        form: Any,
        *,
        session_id: str = "py",
        title: str | None = None,
        timeout_s: int | None = None,
        conversation_id: str | None = None,
        caller: str | None = None,
    ) -> Any:
        """Ask a person to fill in a form and wait. `form` is a JSON Schema
        dict (the answer is a dict), a dataclass or a pydantic model class
        (the answer is an instance of it). `TimedOut` when it expired or was
        cancelled."""
        record = self.create_interaction(
            question(
                prompt,
                session_id=session_id,
                title=title,
                timeout_s=timeout_s,
                conversation_id=conversation_id,
                caller=caller,
                form=form,
            )
        )
        deadline = None if timeout_s is None else timeout_s + 5.0
        return typed(form, fields_of(self.wait_for_answer(record["id"], deadline)))


class AsyncClient(_Base):
    """The asyncio twin of `Client`, with the same methods."""

    def __init__(
        self,
        url: str | None = None,
        token: str | None = None,
        *,
        timeout: float = 30.0,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        super().__init__(url, token, timeout=timeout)
        self._http = httpx.AsyncClient(
            base_url=self.url, headers=self._headers(), transport=transport
        )

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def _all(self, req: _Req) -> list[Any]:
        """Every item of a list, page after page."""
        items: list[Any] = []
        page_req = req
        for _ in range(MAX_PAGES):
            following = _next_page(page_req, await self._send(page_req), items)
            if following is None:
                return items
            page_req = following
        raise LevError("bad_response", f"{req.path}: more than {MAX_PAGES} pages")

    async def _send(self, req: _Req) -> Any:
        try:
            resp = await self._http.request(
                req.method,
                req.path,
                json=req.json,
                params=req.params,
                timeout=self._timeout(req),
            )
        except httpx.HTTPError as e:
            raise self._unreachable(e) from None
        return self._result(resp, req)

    async def health(self) -> t.Health:
        return cast(t.Health, await self._send(self._r_health()))

    async def keys(self) -> t.Jwks:
        return cast(t.Jwks, await self._send(self._r_keys()))

    async def create_interaction(self, request: Mapping[str, Any]) -> t.Interaction:
        return cast(t.Interaction, await self._send(self._r_create(request)))

    async def list_interactions(
        self,
        status: str | None = None,
        *,
        session_id: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> t.InteractionPage:
        return cast(
            t.InteractionPage, await self._send(self._r_list(status, session_id, limit, cursor))
        )

    async def get_interaction(self, id: str) -> t.InteractionRecord:
        return cast(t.InteractionRecord, await self._send(self._r_get(id)))

    async def wait(self, id: str, timeout_s: int = 30) -> t.WaitResult:
        req = self._r_wait(id, min(max(timeout_s, 1), MAX_WAIT_S))
        return cast(t.WaitResult, await self._send(req))

    async def wait_for_answer(self, id: str, timeout: float | None = None) -> t.WaitResult:
        until = None if timeout is None else time.monotonic() + timeout
        while True:
            left = MAX_WAIT_S if until is None else int(until - time.monotonic())
            if left <= 0:
                raise TimedOut("timed_out", f"nobody answered {id} within {timeout} s")
            result = await self.wait(id, min(left, 60))
            if result["status"] != "pending":
                return result

    async def respond(
        self,
        id: str,
        response: Mapping[str, Any],
        *,
        attachments: Iterable[Attachment] | None = None,
    ) -> t.RespondResult:
        """Answer an interaction; `attachments` as `Client.respond` takes them."""
        req = self._r_respond(id, response, attachments)
        return cast(t.RespondResult, await self._send(req))

    async def cancel(self, id: str) -> t.Interaction:
        return cast(t.Interaction, await self._send(self._r_cancel(id)))

    async def blob(self, sha256: str) -> bytes:
        """`GET /v1/blobs/{sha256}`: an attachment's bytes (a stored part's `sha256`)."""
        return cast(bytes, await self._send(self._r_blob(sha256)))

    def events(
        self,
        after: int | None = None,
        *,
        reconnect: bool = True,
        backoff: tuple[float, float] = (0.1, 10.0),
        give_up_after: float | None = None,
        idle_timeout: float = 60.0,
    ) -> AsyncEventStream:
        """`GET /v1/events` as an async iterator; arguments, resuming and
        errors as `Client.events`. It connects on `async with`, on `await
        stream.connect()`, or at the first `async for` step: connect before
        making the changes you want to see, or pass `after`."""
        state = self._events_state(after, reconnect, backoff, give_up_after, idle_timeout)
        return AsyncEventStream(self._http, state)

    async def gate(self, body: Mapping[str, Any]) -> t.GateResult:
        return cast(t.GateResult, await self._send(self._r_gate(body)))

    async def consume_nonce(self, nonce: str) -> None:
        await self._send(self._r_consume(nonce))

    async def grants(self) -> list[t.Grant]:
        return cast(list[t.Grant], await self._all(self._r_grants()))

    async def revoke_grant(self, id: str) -> t.Grant:
        return cast(t.Grant, await self._send(self._r_revoke_grant(id)))

    async def ask_operator(
        self, session_id: str, question: Any, *, timeout_s: int | None = None
    ) -> t.AskResult:
        req = self._r_ask_operator(session_id, question, timeout_s)
        return cast(t.AskResult, await self._send(req))

    async def spawn(
        self, session_id: str, spawn: Any, *, timeout_s: int | None = None
    ) -> t.SpawnResult:
        return cast(t.SpawnResult, await self._send(self._r_spawn(session_id, spawn, timeout_s)))

    async def worker_result(
        self,
        task_id: str,
        value: Any = None,
        *,
        ok: bool = True,
        error: str | None = None,
        output_tail: str | None = None,
    ) -> t.Task:
        req = self._r_worker_result(task_id, value, ok, error, output_tail)
        return cast(t.Task, await self._send(req))

    async def tasks(
        self, *, session_id: str | None = None, status: str | None = None
    ) -> list[t.Task]:
        """Every task (of `session_id`, in `status`), newest first, page after page."""
        return cast(list[t.Task], await self._all(self._r_tasks(status, session_id)))

    async def list_tasks(
        self,
        status: str | None = None,
        *,
        session_id: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> t.TaskPage:
        """One page of tasks, newest first."""
        req = self._r_tasks(status, session_id, limit, cursor)
        return cast(t.TaskPage, await self._send(req))

    async def task(self, id: str) -> t.Task:
        return cast(t.Task, await self._send(self._r_task(id)))

    async def create_token(
        self,
        name: str,
        role: str,
        *,
        caller: str | None = None,
        sessions: Sequence[str] | None = None,
    ) -> t.TokenInfo:
        req = self._r_create_token(name, role, caller, sessions)
        return cast(t.TokenInfo, await self._send(req))

    async def tokens(self) -> list[t.TokenInfo]:
        return cast(list[t.TokenInfo], await self._all(self._r_tokens()))

    async def revoke_token(self, name: str) -> None:
        await self._send(self._r_revoke_token(name))

    async def audit(self, after: int | None = None, *, cursor: str | None = None) -> t.AuditPage:
        """One page of the audit log after entry `after` (or the `next_cursor`
        of the page before), with the chain's signed head."""
        return cast(t.AuditPage, await self._send(self._r_audit(after, cursor)))

    async def rotate_key(self) -> t.Jwks:
        return cast(t.Jwks, await self._send(self._r_rotate_key()))

    async def remove_key(self, kid: str) -> t.Jwks:
        return cast(t.Jwks, await self._send(self._r_remove_key(kid)))

    async def metrics(self) -> str:
        return cast(bytes, await self._send(self._r_metrics())).decode()

    async def people_keys(self) -> t.PeopleJwks:
        """`GET /v1/people/keys`, as `Client.people_keys`."""
        return cast(t.PeopleJwks, await self._send(self._r_people_keys()))

    async def register_person_key(self, key: Mapping[str, Any] | bytes) -> t.PersonKeyRegistered:
        """`POST /v1/people/keys`, as `Client.register_person_key`."""
        req = self._r_register_person_key(key)
        return cast(t.PersonKeyRegistered, await self._send(req))

    async def revoke_person_key(self, kid: str) -> None:
        """`DELETE /v1/people/keys/{kid}`, as `Client.revoke_person_key`."""
        await self._send(self._r_revoke_person_key(kid))

    async def ask(
        self,
        prompt: str,
        *,
        session_id: str = "py",
        options: Sequence[str] | None = None,
        title: str | None = None,
        timeout_s: int | None = None,
        conversation_id: str | None = None,
        caller: str | None = None,
        route: Sequence[str] | None = None,
    ) -> str:
        record = await self.create_interaction(
            question(
                prompt,
                session_id=session_id,
                options=options,
                title=title,
                timeout_s=timeout_s,
                conversation_id=conversation_id,
                caller=caller,
                route=route,
            )
        )
        deadline = None if timeout_s is None else timeout_s + 5.0
        return answer_of(record, await self.wait_for_answer(record["id"], deadline))

    async def ask_form(
        self,
        prompt: str,
        form: Any,
        *,
        session_id: str = "py",
        title: str | None = None,
        timeout_s: int | None = None,
        conversation_id: str | None = None,
        caller: str | None = None,
    ) -> Any:
        """`Client.ask_form`, awaited."""
        record = await self.create_interaction(
            question(
                prompt,
                session_id=session_id,
                title=title,
                timeout_s=timeout_s,
                conversation_id=conversation_id,
                caller=caller,
                form=form,
            )
        )
        deadline = None if timeout_s is None else timeout_s + 5.0
        return typed(form, fields_of(await self.wait_for_answer(record["id"], deadline)))
