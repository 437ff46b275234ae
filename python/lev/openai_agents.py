"""Tool approvals of the OpenAI Agents SDK, decided through lev.

    import lev
    from lev.openai_agents import run_sync

    result = run_sync(agent, "clean up the build dir", client=lev.Client(url, token))

Runs the agent with `Runner.run`; every approval interruption (a tool with
`needs_approval`) goes through lev's gate: a person, the session's operator, a
grant or the policy decides. The signed envelope is verified against the
server's pinned keys and checked against the exact call (the tool call's id,
name and argument text) before the call is approved, and its nonce is spent;
a rejection sends the person's feedback to the model as the tool's result.
An approval with edited args is not run as proposed: the Agents SDK cannot
approve a call with other arguments, so the model is told the edited args and
calls the tool again (which lev gates again).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from typing import Any

from agents import Agent, Runner
from agents.items import ToolApprovalItem
from agents.result import RunResult

from ._client import Client
from ._errors import Denied, LevError
from ._gate import Gatekeeper
from ._verify import TrustedKeys
from .langgraph import lev_id


def _call_of(item: ToolApprovalItem) -> tuple[str, str, str]:
    raw = item.raw_item
    get = raw.get if isinstance(raw, dict) else lambda k, d=None: getattr(raw, k, d)
    call_id = str(get("call_id") or get("id") or "")
    name = str(item.name or get("name") or "")
    args = get("arguments")
    if not isinstance(args, str):
        args = json.dumps(args or {}, separators=(",", ":"))
    return call_id, name, args


async def run(
    agent: Agent[Any],
    input: Any,
    *,
    client: Client,
    session_id: str = "openai-agents",
    conversation_id: str | None = None,
    caller: str | None = None,
    sandbox_mode: str | None = None,
    keys: TrustedKeys | None = None,
    timeout_s: int | None = None,
    route: Sequence[str] | None = None,
    max_rounds: int = 32,
    **runner_kwargs: Any,
) -> RunResult:
    """`Runner.run`, with each approval interruption resolved through lev; the final result."""
    gatekeeper = Gatekeeper(
        client=client,
        session_id=lev_id(session_id),
        conversation_id=lev_id(conversation_id) if conversation_id else None,
        caller=caller,
        sandbox_mode=sandbox_mode,
        keys=keys,
        timeout_s=timeout_s,
        route=route,
    )
    result = await Runner.run(agent, input, **runner_kwargs)
    for _ in range(max_rounds):
        if not result.interruptions:
            return result
        state = result.to_state()
        for item in result.interruptions:
            if not isinstance(item, ToolApprovalItem):
                continue
            call_id, name, args = _call_of(item)
            try:
                approved = await asyncio.to_thread(
                    gatekeeper.gate,
                    request_id=lev_id(call_id or name),
                    tool_name=name,
                    args_json=args,
                )
            except Denied as refusal:
                state.reject(item, rejection_message=refusal.text)
                continue
            except LevError as e:
                state.reject(item, rejection_message=f"The call to {name} was not run: lev: {e}")
                continue
            if approved.was_edited:
                # The Agents SDK binds an approval to the call's own arguments
                # and cannot run an edited call: the edit goes back to the model.
                state.reject(
                    item,
                    rejection_message=(
                        f"The person approved the call to {name} only with edited arguments: "
                        f"{approved.args_json}. It was not run as proposed; call {name} again "
                        "with these arguments."
                    ),
                )
                continue
            state.approve(item)
        result = await Runner.run(agent, state, **runner_kwargs)
    raise LevError("too_many_rounds", f"still interrupted after {max_rounds} rounds of approvals")


def run_sync(agent: Agent[Any], input: Any, *, client: Client, **kwargs: Any) -> RunResult:
    """`run`, blocking."""
    return asyncio.run(run(agent, input, client=client, **kwargs))
