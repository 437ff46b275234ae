"""Human-in-the-loop for LangChain / LangGraph agents, decided through lev.

Configured like LangChain's `HumanInTheLoopMiddleware`::

    from langchain.agents import create_agent
    from lev.langgraph import LevHumanInTheLoopMiddleware

    agent = create_agent(
        model, tools,
        middleware=[LevHumanInTheLoopMiddleware(
            interrupt_on={"shell": True, "read_file": False,
                          "send_email": {"allowed_decisions": ["approve", "reject"]}},
            client=lev.Client(url, token),
        )],
        checkpointer=checkpointer,
    )

Each gated tool call goes through lev's gate (session and conversation: the
graph's `thread_id`; request id: the tool call's id) and the middleware waits
inside the run for lev's decision: a person in the dashboard or `lev respond`,
the session's operator, a grant or the policy. The signed envelope is verified
against the server's pinned keys and checked against the exact call, its nonce
is spent, and only then does the tool run, with the edited args when the
person edited them. A reject reaches the model as the tool's result, with the
person's feedback.

The gate is idempotent by (session, request id): a durable graph whose
process restarts while it waits resumes the same wait (`invoke(None, config)`
with the same `thread_id`), and never runs a call twice (the nonce is spent).
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Literal, TypedDict

from langchain.agents.middleware.types import AgentMiddleware, ToolCallRequest
from langchain_core.messages import ToolCall, ToolMessage
from langgraph.config import get_config
from langgraph.types import Command

from ._client import Client
from ._errors import Denied, LevError
from ._gate import ApprovedCall, Gatekeeper
from ._verify import TrustedKeys

Decision = Literal["approve", "edit", "reject"]
ALL_DECISIONS: tuple[Decision, ...] = ("approve", "edit", "reject")

_ID_BAD = re.compile(r"[^A-Za-z0-9._:-]")


class InterruptOnConfig(TypedDict, total=False):
    """Per tool: the decisions allowed, a description for the person, the
    capabilities the call needs (on top of the policy's)."""

    allowed_decisions: list[Decision]
    description: str
    required_capabilities: list[str]


def lev_id(text: str) -> str:
    """`text` as a lev identifier: 1 to 128 of `A-Z a-z 0-9 . _ : -`."""
    out = _ID_BAD.sub("_", text)[:128]
    return out or "_"


class LevHumanInTheLoopMiddleware(AgentMiddleware):
    """`HumanInTheLoopMiddleware`, with lev deciding; see the module docs."""

    def __init__(
        self,
        interrupt_on: Mapping[str, bool | InterruptOnConfig],
        *,
        client: Client,
        caller: str | None = None,
        sandbox_mode: str | None = None,
        keys: TrustedKeys | None = None,
        timeout_s: int | None = None,
        route: Sequence[str] | None = None,
        session_id: str | None = None,
    ) -> None:
        super().__init__()
        self.interrupt_on: dict[str, InterruptOnConfig] = {}
        for tool, cfg in interrupt_on.items():
            if cfg is True:
                self.interrupt_on[tool] = {"allowed_decisions": list(ALL_DECISIONS)}
            elif isinstance(cfg, Mapping):
                self.interrupt_on[tool] = cfg
        self.client = client
        self.caller = caller
        self.sandbox_mode = sandbox_mode
        self._keys = keys
        self.timeout_s = timeout_s
        self.route = route
        self.session_id = session_id

    def _keyring(self) -> TrustedKeys:
        if self._keys is None:
            self._keys = TrustedKeys.from_jwks(dict(self.client.keys()))
        return self._keys

    def _thread(self) -> str:
        if self.session_id:
            return self.session_id
        try:
            configurable = get_config().get("configurable") or {}
        except RuntimeError:
            configurable = {}
        thread = configurable.get("thread_id")
        return lev_id(str(thread)) if thread else "langgraph"

    def _decide(
        self, request: ToolCallRequest
    ) -> tuple[ToolCallRequest, ApprovedCall | None] | ToolMessage:
        """Gate the call and wait: the request to run (edited args applied), or
        the ToolMessage the model reads instead."""
        call = request.tool_call
        name = call["name"]
        cfg = self.interrupt_on.get(name)
        if cfg is None:
            return request, None
        allowed = cfg.get("allowed_decisions") or list(ALL_DECISIONS)
        thread = self._thread()
        gatekeeper = Gatekeeper(
            client=self.client,
            session_id=thread,
            conversation_id=thread,
            caller=self.caller,
            sandbox_mode=self.sandbox_mode,
            keys=self._keyring(),
            timeout_s=self.timeout_s,
            route=self.route,
        )
        args_json = json.dumps(call["args"], separators=(",", ":"), ensure_ascii=False)
        try:
            approved = gatekeeper.gate(
                request_id=lev_id(str(call.get("id") or name)),
                tool_name=name,
                args_json=args_json,
                required_capabilities=cfg.get("required_capabilities") or (),
                reason=cfg.get("description"),
            )
        except Denied as refusal:
            return self._message(request, refusal.text)
        except LevError as e:
            # Not verified, not authorized, nonce spent, server refused: never run.
            return self._message(request, f"The call to {name} was not run: lev: {e}")
        kind: Decision = "edit" if approved.was_edited else "approve"
        if kind not in allowed:
            return self._message(
                request,
                f"The call to {name} was not run: the decision ({kind}) is not allowed "
                f"for this tool (allowed: {', '.join(allowed)}).",
            )
        edited: ToolCall = {**call, "args": approved.args}
        return request.override(tool_call=edited), approved

    @staticmethod
    def _message(request: ToolCallRequest, text: str) -> ToolMessage:
        call = request.tool_call
        return ToolMessage(content=text, name=call["name"], tool_call_id=call["id"], status="error")

    @staticmethod
    def _finish(approved: ApprovedCall | None, result: ToolMessage | Command[Any]) -> Any:
        if approved is None or not isinstance(result, ToolMessage):
            return result
        if isinstance(result.content, str) and (approved.was_edited or approved.injected_context):
            result.content = approved.tool_result_text(result.content)
        return result

    def wrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], ToolMessage | Command[Any]],
    ) -> ToolMessage | Command[Any]:
        decided = self._decide(request)
        if isinstance(decided, ToolMessage):
            return decided
        run, approved = decided
        result: ToolMessage | Command[Any] = self._finish(approved, handler(run))
        return result

    async def awrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], Awaitable[ToolMessage | Command[Any]]],
    ) -> ToolMessage | Command[Any]:
        decided = await asyncio.to_thread(self._decide, request)
        if isinstance(decided, ToolMessage):
            return decided
        run, approved = decided
        result: ToolMessage | Command[Any] = self._finish(approved, await handler(run))
        return result
