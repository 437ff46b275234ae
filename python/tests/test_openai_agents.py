"""The OpenAI Agents SDK with a scripted model (no network): tools with
`needs_approval` are decided through lev while the run waits."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

from agents import Agent, function_tool
from agents.items import ModelResponse
from agents.models.interface import Model
from agents.usage import Usage
from conftest import answer_when_pending
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)

import lev
from lev.openai_agents import run_sync

RAN: list[str] = []


@function_tool(needs_approval=True)
def shell(command: str) -> str:
    """Run a shell command."""
    RAN.append(command)
    return f"ran {command}"


class Scripted(Model):
    """Calls `shell` once, then answers with the last tool output it saw."""

    def __init__(self, command: str) -> None:
        self.command = command
        self.call_id = f"call_{uuid.uuid4().hex[:8]}"
        self.seen: list[Any] = []

    async def get_response(self, system_instructions: Any, input: Any, *a: Any, **kw: Any) -> Any:
        items = input if isinstance(input, list) else []
        outputs = [
            i for i in items if isinstance(i, dict) and i.get("type") == "function_call_output"
        ]
        self.seen = outputs
        if not outputs:
            out: Any = ResponseFunctionToolCall(
                type="function_call",
                call_id=self.call_id,
                name="shell",
                arguments=f'{{"command":"{self.command}"}}',
                id="fc_1",
                status="completed",
            )
        else:
            out = ResponseOutputMessage(
                id="msg_1",
                type="message",
                role="assistant",
                status="completed",
                content=[
                    ResponseOutputText(
                        type="output_text", annotations=[], text=str(outputs[-1].get("output"))
                    )
                ],
            )
        return ModelResponse(output=[out], usage=Usage(), response_id=None)

    def stream_response(self, *a: Any, **kw: Any) -> AsyncIterator[Any]:
        raise NotImplementedError


def agent(command: str) -> Agent[Any]:
    return Agent(name="a", instructions="", tools=[shell], model=Scripted(command))


def test_approved_through_lev(worker: lev.Client, approver: lev.Client, sid: str) -> None:
    RAN.clear()
    th = answer_when_pending(approver, sid, {"approved": True})
    result = run_sync(agent("ls"), "go", client=worker, session_id=sid)
    th.join()
    assert RAN == ["ls"]
    assert result.final_output == "ran ls"


def test_rejected_feedback_reaches_the_model(
    worker: lev.Client, approver: lev.Client, sid: str
) -> None:
    RAN.clear()
    th = answer_when_pending(approver, sid, {"approved": False, "feedback": "not today"})
    result = run_sync(agent("rm -rf /"), "go", client=worker, session_id=sid)
    th.join()
    assert RAN == []
    assert "Feedback: not today" in str(result.final_output)


def test_edited_args_go_back_to_the_model(
    worker: lev.Client, approver: lev.Client, sid: str
) -> None:
    RAN.clear()
    th = answer_when_pending(
        approver, sid, {"approved": True, "modified_args_json": '{"command":"ls -l"}'}
    )
    result = run_sync(agent("ls"), "go", client=worker, session_id=sid)
    th.join()
    # Not run as proposed; the model is told the edited args.
    assert RAN == []
    assert '{"command":"ls -l"}' in str(result.final_output)


def test_unverifiable_decision_never_runs(
    worker: lev.Client, approver: lev.Client, sid: str
) -> None:
    RAN.clear()
    th = answer_when_pending(approver, sid, {"approved": True})
    # Trusting another key: the server's genuine envelope is not trusted here.
    other = lev.TrustedKeys(
        [bytes.fromhex("d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a")]
    )
    result = run_sync(agent("ls"), "go", client=worker, session_id=sid, keys=other)
    th.join()
    assert RAN == []
    assert "untrusted_key" in str(result.final_output)
