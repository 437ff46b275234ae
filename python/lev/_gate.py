"""The gate helper for a tool executor (SPEC sections 5 and 6).

Gate the call, wait for a person when the gate asks, verify the signed
decision against pinned keys, check that it authorizes exactly this call in
this context (and, for the tools `require_signed_votes` names, that enough
people signed their votes with their own keys), spend its nonce, and only then
hand over the args to run. The args come only from an `ApprovedCall`, made
only after every check passed; a refusal is raised as `Denied`, with the text
the model reads.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from . import types as t
from ._client import AsyncClient, Client
from ._errors import ApiError, Denied, LevError, NonceSpent, TimedOut
from ._verify import TrustedKeys, VerifiedResponse, _votes_needed, verify_envelope
from ._votes import PeopleKeys

INTERNAL_OPEN = (
    '<internal source="approver" note="context added by the person who approved this call; '
    'not output of the tool">'
)
INTERNAL_CLOSE = "</internal>"


@dataclass
class ApprovedCall:
    """A call that passed every check. Run it with `args` (or `args_json`)."""

    verified: VerifiedResponse
    response: t.Response | None = None
    _used: bool = field(default=False, repr=False)

    @property
    def args_json(self) -> str:
        """The args to run: the approver's edit when there is one, else the proposed args."""
        return self.verified.resolve_approved_call()

    @property
    def args(self) -> Any:
        return json.loads(self.args_json)

    @property
    def was_edited(self) -> bool:
        return bool(self.verified.modified_args_json)

    @property
    def injected_context(self) -> str | None:
        c = self.verified.injected_context
        return c if c.strip() else None

    @property
    def approver(self) -> str:
        return self.verified.approver

    def tool_result_text(self, output: str) -> str:
        """What the model reads after the tool ran: injected context first
        (marked internal), a note when the person edited the args, then the output."""
        blocks = []
        if self.injected_context:
            blocks.append(f"{INTERNAL_OPEN}\n{self.injected_context}\n{INTERNAL_CLOSE}")
        if self.was_edited:
            blocks.append(
                "The person edited the arguments before approving; the call ran with: "
                + self.verified.modified_args_json
            )
        blocks.append(output)
        return "\n\n".join(blocks)


def _policy_denial(tool: str, reason: str) -> Denied:
    text = f"The call to {tool} was denied by lev's policy; it was not run."
    if reason.strip():
        text += f"\nReason: {reason.strip()}"
    return Denied("policy", text)


def _refusal(tool: str, record: t.Interaction | None, result: t.WaitResult) -> Denied:
    status = result["status"]
    if status == "expired":
        return Denied(
            "expired", f"The call to {tool} was denied: nobody approved it in time. It was not run."
        )
    if status == "cancelled":
        return Denied(
            "cancelled",
            f"The approval request for {tool} was cancelled before anyone decided; "
            "the call was not run.",
        )
    response = result.get("response") or {}
    blocks = []
    context = response.get("injected_context") or ""
    if context.strip():
        blocks.append(f"{INTERNAL_OPEN}\n{context}\n{INTERNAL_CLOSE}")
    options = ((record or {}).get("kind") or {}).get("options") or []
    index = response.get("choice_index")
    if index is not None and 0 <= index < len(options):
        blocks.append(f"The person chose: {options[index]}")
    text = f"The person denied the call to {tool}; it was not run."
    feedback = (response.get("feedback") or "").strip() or None
    if feedback:
        text += f"\nFeedback: {feedback}"
    blocks.append(text)
    return Denied("denied", "\n\n".join(blocks), feedback)


def _timed_out(tool: str, waited: float) -> Denied:
    return Denied(
        "timed_out", f"Nobody decided on the call to {tool} within {int(waited)} s; it was not run."
    )


def _glob(pattern: str) -> re.Pattern[str]:
    """A tool-name glob as lev's policy reads one: `*` any run, `?` one character."""
    parts = (".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
    return re.compile("".join(parts))


@dataclass
class _Call:
    body: dict[str, Any]

    @property
    def request_id(self) -> str:
        return str(self.body["request_id"])

    @property
    def tool_name(self) -> str:
        return str(self.body["tool_name"])


class _GateBase:
    def __init__(
        self,
        *,
        session_id: str,
        caller: str | None = None,
        conversation_id: str | None = None,
        sandbox_mode: str | None = None,
        keys: TrustedKeys | Mapping[str, Any] | None = None,
        timeout_s: int | None = None,
        route: Sequence[str] | None = None,
        now: datetime | None = None,
        require_signed_votes: Mapping[str, int] | None = None,
        people_keys: PeopleKeys | Mapping[str, Any] | str | None = None,
    ) -> None:
        self.session_id = session_id
        self.caller = caller
        self.conversation_id = conversation_id if conversation_id is not None else session_id
        self.sandbox_mode = sandbox_mode or ""
        if keys is not None and not isinstance(keys, TrustedKeys):
            keys = TrustedKeys.from_jwks(keys)
        self._keys: TrustedKeys | None = keys
        self.timeout_s = timeout_s
        self.route = list(route) if route is not None else None
        self._now = now
        self.require_signed_votes = dict(require_signed_votes or {})
        self._vote_globs = [
            (_glob(pattern), _votes_needed(n, f"require_signed_votes[{pattern!r}]"))
            for pattern, n in self.require_signed_votes.items()
        ]
        if people_keys is not None and not isinstance(people_keys, PeopleKeys):
            people_keys = PeopleKeys(people_keys)
        self._people: PeopleKeys | None = people_keys

    def votes_needed(self, tool_name: str) -> int:
        """How many people's signed votes a decision on `tool_name` needs: the
        most that a matching `require_signed_votes` glob asks for, else 0."""
        return max((n for g, n in self._vote_globs if g.fullmatch(tool_name)), default=0)

    def _call(
        self,
        request_id: str,
        tool_name: str,
        args_json: str | Mapping[str, Any] | Sequence[Any],
        required_capabilities: Sequence[str],
        turn_id: str | None,
        reason: str | None,
    ) -> _Call:
        if not isinstance(args_json, str):
            args_json = json.dumps(args_json, separators=(",", ":"), ensure_ascii=False)
        body: dict[str, Any] = {
            "session_id": self.session_id,
            "conversation_id": self.conversation_id,
            "turn_id": turn_id or "",
            "request_id": request_id,
            "caller": self.caller or "",
            "tool_name": tool_name,
            "args_json": args_json,
            "sandbox_mode": self.sandbox_mode,
            "required_capabilities": list(required_capabilities),
            "timeout_s": self.timeout_s,
            "route": self.route,
            "reason": reason,
        }
        return _Call(body)

    def _check(
        self, call: _Call, envelope: Any, keys: TrustedKeys, people: PeopleKeys | None
    ) -> VerifiedResponse:
        verified = verify_envelope(envelope, keys, self._now)
        verified.check_call(
            call.request_id,
            call.tool_name,
            call.body["args_json"],
            conversation_id=self.conversation_id,
            caller=self.caller or None,
            sandbox_mode=self.sandbox_mode,
        )
        needed = self.votes_needed(call.tool_name)
        if needed:
            assert people is not None
            verified.require_signed_votes(people, needed)
        return verified

    def _deadline(self) -> float | None:
        # A little past the server's own timeout, so its verdict (expired) arrives first.
        return None if self.timeout_s is None else self.timeout_s + 2.0


def _spent(e: ApiError) -> LevError:
    return NonceSpent() if e.code == "nonce_spent" else e


class Gatekeeper(_GateBase):
    """Gates tool calls through lev and verifies their decisions against pinned keys.

    `lev.Gatekeeper(client=, session_id=, caller=, conversation_id=, sandbox_mode=)`;
    the server's keys (`GET /v1/keys`) are pinned on first use unless `keys=` is given.

    `require_signed_votes={"deploy*": 2}` also requires, for a tool matching
    a glob (`*`, `?`), that many distinct people's own signed votes (SPEC
    section 13) to verify under their keys and bind the call; fewer raise
    `lev.NotEnoughVotes` (code `votes`) and the call does not run. People's
    keys are `people_keys=` (the JWKS of `GET /v1/people/keys`, or a
    `lev.PeopleKeys`), else fetched from the server on first need and pinned:
    pass them to hold against a server that would serve keys of its own.
    """

    def __init__(self, *, client: Client, session_id: str, **kw: Any) -> None:
        super().__init__(session_id=session_id, **kw)
        self.client = client

    @property
    def keys(self) -> TrustedKeys:
        if self._keys is None:
            self._keys = TrustedKeys.from_jwks(dict(self.client.keys()))
        return self._keys

    @property
    def people_keys(self) -> PeopleKeys:
        """People's keys votes are checked with (pinned on first use)."""
        if self._people is None:
            self._people = PeopleKeys(dict(self.client.people_keys()))
        return self._people

    def submit(
        self,
        *,
        request_id: str,
        tool_name: str,
        args_json: str | Mapping[str, Any],
        required_capabilities: Sequence[str] = (),
        turn_id: str | None = None,
        reason: str | None = None,
    ) -> tuple[_Call, t.GateResult]:
        """`POST /v1/gate` only: the call and the gate's first answer."""
        call = self._call(request_id, tool_name, args_json, required_capabilities, turn_id, reason)
        return call, self.client.gate(call.body)

    def gate(
        self,
        *,
        request_id: str,
        tool_name: str,
        args_json: str | Mapping[str, Any],
        required_capabilities: Sequence[str] = (),
        turn_id: str | None = None,
        reason: str | None = None,
    ) -> ApprovedCall:
        """Gate, wait, verify, check, spend: the approved call, or `Denied`."""
        call, first = self.submit(
            request_id=request_id,
            tool_name=tool_name,
            args_json=args_json,
            required_capabilities=required_capabilities,
            turn_id=turn_id,
            reason=reason,
        )
        return self.settle(call, first)

    def settle(self, call: _Call, first: t.GateResult) -> ApprovedCall:
        keys = self.keys
        decision = first["decision"]
        if decision == "deny":
            raise _policy_denial(call.tool_name, first.get("reason", ""))
        if decision == "allow":
            return self._approve(call, first.get("approval"), None, keys)
        iid = first.get("interaction_id", "")
        started = time.monotonic()
        try:
            result = self.client.wait_for_answer(iid, self._deadline())
        except TimedOut:
            raise _timed_out(call.tool_name, time.monotonic() - started) from None
        response = result.get("response")
        if result["status"] == "answered" and response and response.get("approved"):
            return self._approve(call, result.get("approval"), response, keys)
        record = (
            self.client.get_interaction(iid)["request"] if result["status"] == "answered" else None
        )
        raise _refusal(call.tool_name, record, result)

    def _approve(
        self, call: _Call, envelope: Any, response: t.Response | None, keys: TrustedKeys
    ) -> ApprovedCall:
        if envelope is None:
            raise LevError(
                "no_approval",
                "the server approved the call without a signed approval; refusing to run it",
            )
        people = self.people_keys if self.votes_needed(call.tool_name) else None
        verified = self._check(call, envelope, keys, people)
        try:
            self.client.consume_nonce(verified.nonce)
        except ApiError as e:
            raise _spent(e) from None
        return ApprovedCall(verified, response)


class AsyncGatekeeper(_GateBase):
    """The asyncio twin of `Gatekeeper`."""

    def __init__(self, *, client: AsyncClient, session_id: str, **kw: Any) -> None:
        super().__init__(session_id=session_id, **kw)
        self.client = client

    async def keys(self) -> TrustedKeys:
        if self._keys is None:
            self._keys = TrustedKeys.from_jwks(dict(await self.client.keys()))
        return self._keys

    async def people_keys(self) -> PeopleKeys:
        """People's keys votes are checked with (pinned on first use)."""
        if self._people is None:
            self._people = PeopleKeys(dict(await self.client.people_keys()))
        return self._people

    async def gate(
        self,
        *,
        request_id: str,
        tool_name: str,
        args_json: str | Mapping[str, Any],
        required_capabilities: Sequence[str] = (),
        turn_id: str | None = None,
        reason: str | None = None,
    ) -> ApprovedCall:
        call = self._call(request_id, tool_name, args_json, required_capabilities, turn_id, reason)
        keys = await self.keys()
        first = await self.client.gate(call.body)
        decision = first["decision"]
        if decision == "deny":
            raise _policy_denial(call.tool_name, first.get("reason", ""))
        if decision == "allow":
            return await self._approve(call, first.get("approval"), None, keys)
        iid = first.get("interaction_id", "")
        started = time.monotonic()
        try:
            result = await self.client.wait_for_answer(iid, self._deadline())
        except TimedOut:
            raise _timed_out(call.tool_name, time.monotonic() - started) from None
        response = result.get("response")
        if result["status"] == "answered" and response and response.get("approved"):
            return await self._approve(call, result.get("approval"), response, keys)
        record = (
            (await self.client.get_interaction(iid))["request"]
            if result["status"] == "answered"
            else None
        )
        raise _refusal(call.tool_name, record, result)

    async def _approve(
        self, call: _Call, envelope: Any, response: t.Response | None, keys: TrustedKeys
    ) -> ApprovedCall:
        if envelope is None:
            raise LevError(
                "no_approval",
                "the server approved the call without a signed approval; refusing to run it",
            )
        people = await self.people_keys() if self.votes_needed(call.tool_name) else None
        verified = self._check(call, envelope, keys, people)
        try:
            await self.client.consume_nonce(verified.nonce)
        except ApiError as e:
            raise _spent(e) from None
        return ApprovedCall(verified, response)
