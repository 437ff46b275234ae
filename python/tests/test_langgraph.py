"""LangChain `create_agent` with lev's human-in-the-loop middleware, a fake
model (no network) and the real lev server: a person answers over HTTP while
the agent waits."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT, Server, answer_when_pending
from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

import lev
from lev.langgraph import LevHumanInTheLoopMiddleware

RAN: list[dict[str, Any]] = []


@tool
def shell(command: str) -> str:
    """Run a shell command."""
    RAN.append({"command": command})
    return f"ran {command}"


@tool
def lookup(word: str) -> str:
    """Look a word up."""
    return f"{word}: a word"


class FakeModel(FakeMessagesListChatModel):
    """A scripted model that accepts tools."""

    def bind_tools(self, tools: Any, **kw: Any) -> Any:
        return self


def script(*calls: tuple[str, dict[str, Any]]) -> FakeModel:
    first = AIMessage(
        content="",
        tool_calls=[
            {"name": n, "args": a, "id": f"call_{uuid.uuid4().hex[:8]}", "type": "tool_call"}
            for n, a in calls
        ],
    )
    return FakeModel(responses=[first, AIMessage(content="done")])


def agent(worker: lev.Client, *calls: tuple[str, dict[str, Any]], **kw: Any) -> Any:
    return create_agent(
        script(*calls),
        [shell, lookup],
        middleware=[
            LevHumanInTheLoopMiddleware(
                interrupt_on={"shell": True, "lookup": False}, client=worker, **kw
            )
        ],
        checkpointer=InMemorySaver(),
    )


def tool_messages(result: dict[str, Any]) -> list[ToolMessage]:
    return [m for m in result["messages"] if isinstance(m, ToolMessage)]


def run(graph: Any, sid: str) -> dict[str, Any]:
    out: dict[str, Any] = graph.invoke(
        {"messages": [{"role": "user", "content": "go"}]},
        {"configurable": {"thread_id": sid}},
    )
    return out


def test_approve_runs_the_call(worker: lev.Client, approver: lev.Client, sid: str) -> None:
    RAN.clear()
    th = answer_when_pending(approver, sid, {"approved": True})
    result = run(agent(worker, ("shell", {"command": "ls"}), ("lookup", {"word": "x"})), sid)
    th.join()
    assert RAN == [{"command": "ls"}]
    texts = [m.content for m in tool_messages(result)]
    assert "ran ls" in texts and "x: a word" in texts


def test_edit_runs_the_edited_signed_args(
    worker: lev.Client, approver: lev.Client, sid: str
) -> None:
    RAN.clear()
    th = answer_when_pending(
        approver, sid, {"approved": True, "modified_args_json": '{"command":"ls -l"}'}
    )
    result = run(agent(worker, ("shell", {"command": "rm -rf /"})), sid)
    th.join()
    assert RAN == [{"command": "ls -l"}]
    (msg,) = tool_messages(result)
    assert "ran ls -l" in str(msg.content) and "edited" in str(msg.content)


def test_reject_feedback_reaches_the_model(
    worker: lev.Client, approver: lev.Client, sid: str
) -> None:
    RAN.clear()
    th = answer_when_pending(approver, sid, {"approved": False, "feedback": "use ls instead"})
    result = run(agent(worker, ("shell", {"command": "rm x"})), sid)
    th.join()
    assert RAN == []
    (msg,) = tool_messages(result)
    assert msg.status == "error" and "Feedback: use ls instead" in str(msg.content)
    assert result["messages"][-1].content == "done"


def test_edit_refused_when_not_allowed(worker: lev.Client, approver: lev.Client, sid: str) -> None:
    RAN.clear()
    th = answer_when_pending(
        approver, sid, {"approved": True, "modified_args_json": '{"command":"ls -l"}'}
    )
    graph = create_agent(
        script(("shell", {"command": "ls"})),
        [shell],
        middleware=[
            LevHumanInTheLoopMiddleware(
                interrupt_on={"shell": {"allowed_decisions": ["approve", "reject"]}},
                client=worker,
            )
        ],
    )
    result = run(graph, sid)
    th.join()
    assert RAN == []
    (msg,) = tool_messages(result)
    assert "not allowed" in str(msg.content)


def test_async_agent(worker: lev.Client, approver: lev.Client, sid: str) -> None:
    import asyncio

    RAN.clear()
    th = answer_when_pending(approver, sid, {"approved": True})
    graph = agent(worker, ("shell", {"command": "pwd"}))
    asyncio.run(
        graph.ainvoke(
            {"messages": [{"role": "user", "content": "go"}]},
            {"configurable": {"thread_id": sid}},
        )
    )
    th.join()
    assert RAN == [{"command": "pwd"}]


DURABLE = r'''
import json, sys
from typing import Any
from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.sqlite import SqliteSaver
import lev
from lev.langgraph import LevHumanInTheLoopMiddleware

url, token, db, sid, ran, mode = sys.argv[1:]

@tool
def shell(command: str) -> str:
    """Run a shell command."""
    with open(ran, "a") as f:
        f.write(command + "\n")
    return f"ran {command}"

class FakeModel(FakeMessagesListChatModel):
    def bind_tools(self, tools: Any, **kw: Any) -> Any:
        return self

model = FakeModel(responses=[
    AIMessage(content="", tool_calls=[{"name": "shell", "args": {"command": "make"},
                                       "id": "call_durable", "type": "tool_call"}]),
    AIMessage(content="done"),
])
# The scripted model has asked for the call already when the run resumes.
model.i = 0 if mode == "start" else 1
with SqliteSaver.from_conn_string(db) as saver:
    graph = create_agent(model, [shell], checkpointer=saver, middleware=[
        LevHumanInTheLoopMiddleware(interrupt_on={"shell": True},
                                    client=lev.Client(url, token))])
    config = {"configurable": {"thread_id": sid}}
    inp = {"messages": [{"role": "user", "content": "build"}]} if mode == "start" else None
    out = graph.invoke(inp, config)
    print(json.dumps([m.content for m in out["messages"] if isinstance(m, ToolMessage)]))
'''


def test_durable_graph_survives_a_restart_while_waiting(
    server: Server, approver: lev.Client, sid: str, tmp_path: Path
) -> None:
    script_path = tmp_path / "durable.py"
    script_path.write_text(DURABLE)
    token = server.token("worker")
    db, ran = str(tmp_path / "graph.sqlite"), tmp_path / "ran.txt"
    argv = [sys.executable, str(script_path), server.url, token, db, sid, str(ran)]
    env = {**os.environ, "PYTHONPATH": str(ROOT / "python")}
    first = subprocess.Popen([*argv, "start"], env=env, stdout=subprocess.PIPE, text=True)
    # Wait until it is waiting on lev, then kill the Python process.
    until = time.monotonic() + 60
    while not approver.list_interactions("pending", session_id=sid)["items"]:
        assert time.monotonic() < until and first.poll() is None
        time.sleep(0.1)
    first.kill()
    first.wait()
    assert not ran.exists()
    # A person approves while no process runs the graph.
    (pending,) = approver.list_interactions("pending", session_id=sid)["items"]
    approver.respond(pending["request"]["id"], {"approved": True})
    # The restarted process resumes from its checkpoint and runs the call once.
    done = subprocess.run([*argv, "resume"], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1]) == ["ran make"]
    assert ran.read_text() == "make\n"
    # Resuming again never runs it twice: the nonce is spent.
    again = subprocess.run([*argv, "resume"], env=env, capture_output=True, text=True, timeout=120)
    assert again.returncode == 0, again.stderr
    assert ran.read_text() == "make\n"
    assert "nonce" not in again.stdout


@pytest.mark.parametrize("bad", ["server_down"])
def test_server_down_never_runs_the_tool(bad: str, sid: str) -> None:
    RAN.clear()
    client = lev.Client("http://127.0.0.1:9", "x")
    graph = create_agent(
        script(("shell", {"command": "ls"})),
        [shell],
        middleware=[
            LevHumanInTheLoopMiddleware(
                interrupt_on={"shell": True}, client=client, keys=lev.TrustedKeys()
            )
        ],
    )
    result = run(graph, sid)
    assert RAN == []
    (msg,) = tool_messages(result)
    assert "unreachable" in str(msg.content)
