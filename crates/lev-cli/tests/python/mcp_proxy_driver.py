"""Drive an MCP server, directly or through `lev mcp proxy`, with the official
MCP Python SDK (`mcp`, pinned in scripts/requirements-test.txt).

Usage: mcp_proxy_driver.py MODE -- COMMAND ARGS...   (stdio: the SDK starts it)
       mcp_proxy_driver.py MODE URL                  (Streamable HTTP)

MODE is the SDK's connect mode ("legacy", "auto", "2026-07-28"). The whole
environment is passed to a stdio server (LEV_URL and LEV_TOKEN for lev).
With MCP_DRIVER_CLIENT_FEATURES=1 the client also declares sampling (it
answers "sampled: " and the first message's text) and roots (one root,
file:///srv/test-root). With MCP_DRIVER_ELICIT=1 it declares elicitation
and answers each one: deny with feedback "not five" when the message holds
"a":5, else approve.

One command per line on stdin, one JSON object per line on stdout:

  {"op": "list_tools"}            -> {"event": "tools", "tools": [...]}
  {"op": "list_resources"}        -> {"event": "resources", "resources": [...]}
  {"op": "read_resource", "uri": U} -> {"event": "resource", "contents": [...]}
  {"op": "list_prompts"}          -> {"event": "prompts", "prompts": [...]}
  {"op": "get_prompt", "name": N, "arguments": {...}}
                                  -> {"event": "prompt", "messages": [...]}
  {"op": "call", "id": ID, "name": N, "arguments": {...}, "progress": bool}
                                  -> {"event": "started", "id": ID}, then maybe
                                     {"event": "progress", "id": ID, "progress": p, "total": t, "message": m}
                                     and {"event": "result", "id": ID, "is_error": b,
                                          "texts": [...], "structured": ...}
                                     or {"event": "error", "id": ID, "error": "..."}
  {"op": "cancel", "id": ID}      -> {"event": "cancelled", "id": ID}
  {"op": "quit"}                  -> closes the session and exits

Every failure of a list/read/get is {"event": "error", "op": OP, "error": "..."}.
First it prints {"event": "ready", "protocol_version": ..., "server_name": ...}.
"""

import json
import os
import sys

import anyio
import mcp_types as types
from mcp import Client, StdioServerParameters


def emit(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def dump(items):
    return [i.model_dump(mode="json", by_alias=True, exclude_none=True) for i in items]


async def main(mode, target):
    if isinstance(target, list):
        server = StdioServerParameters(command=target[0], args=target[1:], env=dict(os.environ))
    else:
        server = target
    extra = {}
    if os.environ.get("MCP_DRIVER_CLIENT_FEATURES") == "1":
        # Sampling and roots: the server's own requests to the client.
        async def sampling(context, params):
            asked = params.messages[0].content.text
            return types.CreateMessageResult(
                role="assistant",
                content=types.TextContent(type="text", text=f"sampled: {asked}"),
                model="test-model",
                stop_reason="endTurn",
            )

        async def roots(context):
            return types.ListRootsResult(roots=[types.Root(uri="file:///srv/test-root", name="test")])

        extra = {"sampling_callback": sampling, "list_roots_callback": roots}
    if os.environ.get("MCP_DRIVER_ELICIT") == "1":
        # The client's user answers elicitations: a call with "a":5 in it is
        # denied with feedback, one with "a":9 left unanswered until the
        # proxy withdraws it (lev decided elsewhere), any other approved.
        async def elicit(context, params):
            if '"a":9' in params.message.replace(" ", ""):
                emit({"event": "elicit_waiting"})
                try:
                    await anyio.sleep_forever()
                except anyio.get_cancelled_exc_class():
                    emit({"event": "elicit_withdrawn"})
                    raise
            if '"a":5' in params.message.replace(" ", ""):
                return types.ElicitResult(
                    action="accept", content={"decision": "deny", "feedback": "not five"}
                )
            return types.ElicitResult(action="accept", content={"decision": "approve"})

        extra["elicitation_callback"] = elicit
    async with Client(server, mode=mode, **extra) as client:
        info = client.server_info
        emit(
            {
                "event": "ready",
                "protocol_version": client.protocol_version,
                "server_name": info.name if info is not None else None,
            }
        )
        scopes = {}
        async with anyio.create_task_group() as tg:

            async def call(call_id, name, arguments, progress):
                async def on_progress(p, total, message):
                    emit(
                        {
                            "event": "progress",
                            "id": call_id,
                            "progress": p,
                            "total": total,
                            "message": message,
                        }
                    )

                with anyio.CancelScope() as scope:
                    scopes[call_id] = scope
                    try:
                        result = await client.call_tool(
                            name, arguments, progress_callback=on_progress if progress else None
                        )
                    except Exception as e:  # the test reads what went wrong
                        emit({"event": "error", "id": call_id, "error": repr(e)})
                        return
                    emit(
                        {
                            "event": "result",
                            "id": call_id,
                            "is_error": bool(result.is_error),
                            "texts": [c.text for c in result.content if c.type == "text"],
                            "structured": result.structured_content,
                        }
                    )
                if scope.cancelled_caught:
                    emit({"event": "cancelled", "id": call_id})

            async def listing(op, run):
                try:
                    emit(await run())
                except Exception as e:
                    emit({"event": "error", "op": op, "error": repr(e)})

            while True:
                line = await anyio.to_thread.run_sync(sys.stdin.readline, abandon_on_cancel=True)
                if not line:
                    break
                cmd = json.loads(line)
                op = cmd["op"]
                if op == "list_tools":

                    async def run():
                        tools = await client.list_tools(cache_mode="bypass")
                        return {"event": "tools", "tools": dump(tools.tools)}

                    await listing(op, run)
                elif op == "list_resources":

                    async def run():
                        found = await client.list_resources(cache_mode="bypass")
                        return {"event": "resources", "resources": dump(found.resources)}

                    await listing(op, run)
                elif op == "read_resource":

                    async def run(uri=cmd["uri"]):
                        found = await client.read_resource(uri, cache_mode="bypass")
                        return {"event": "resource", "contents": dump(found.contents)}

                    await listing(op, run)
                elif op == "list_prompts":

                    async def run():
                        found = await client.list_prompts(cache_mode="bypass")
                        return {"event": "prompts", "prompts": dump(found.prompts)}

                    await listing(op, run)
                elif op == "get_prompt":

                    async def run(name=cmd["name"], arguments=cmd.get("arguments")):
                        found = await client.get_prompt(name, arguments)
                        return {"event": "prompt", "messages": dump(found.messages)}

                    await listing(op, run)
                elif op == "call":
                    tg.start_soon(
                        call,
                        cmd["id"],
                        cmd["name"],
                        cmd.get("arguments", {}),
                        bool(cmd.get("progress")),
                    )
                    emit({"event": "started", "id": cmd["id"]})
                elif op == "cancel":
                    scope = scopes.get(cmd["id"])
                    if scope is not None:
                        scope.cancel()
                elif op == "quit":
                    break
            tg.cancel_scope.cancel()


if __name__ == "__main__":
    if len(sys.argv) >= 4 and sys.argv[2] == "--":
        anyio.run(main, sys.argv[1], sys.argv[3:])
    elif len(sys.argv) == 3:
        anyio.run(main, sys.argv[1], sys.argv[2])
    else:
        sys.exit("usage: mcp_proxy_driver.py MODE -- COMMAND ARGS... | MODE URL")
