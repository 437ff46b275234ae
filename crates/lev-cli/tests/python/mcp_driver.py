"""Drive `lev mcp` with the official MCP Python SDK (`mcp`, pinned in
scripts/requirements-test.txt): an MCP client no one in this project wrote.

Usage: mcp_driver.py MODE -- COMMAND ARGS...

MODE is the SDK's connect mode: "legacy" (the 2025-11-25 `initialize`
handshake), "auto" (probe `server/discover`, fall back to `initialize`) or a
modern version such as "2026-07-28" (per-request `_meta`, no handshake).
Environment variables starting with LEV_ are passed to the server.

It prints one JSON object per line on stdout and reads one command per line
on stdin, so the Rust test can answer lev's questions between a call and its
result:

  {"op": "list_tools"}                  -> {"event": "tools", "tools": [...]}
  {"op": "call", "id": ID, "name": N, "arguments": {...}}
                                        -> {"event": "started", "id": ID}, later
                                           {"event": "result", "id": ID, "is_error": b, "texts": [...]}
                                           or {"event": "error", "id": ID, "error": "..."}
  {"op": "cancel", "id": ID}            -> the SDK cancels the call (it sends
                                           notifications/cancelled), then
                                           {"event": "cancelled", "id": ID}
  {"op": "quit"}                        -> closes the session and exits

First it prints {"event": "ready", "protocol_version": ..., "server_name": ...}.
"""

import json
import os
import sys

import anyio
from mcp import Client, StdioServerParameters


def emit(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


async def main(mode, command):
    env = {k: v for k, v in os.environ.items() if k.startswith("LEV_")}
    params = StdioServerParameters(command=command[0], args=command[1:], env=env)
    async with Client(params, mode=mode) as client:
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

            async def call(call_id, name, arguments):
                with anyio.CancelScope() as scope:
                    scopes[call_id] = scope
                    try:
                        result = await client.call_tool(name, arguments)
                    except Exception as e:  # the test reads what went wrong
                        emit({"event": "error", "id": call_id, "error": repr(e)})
                        return
                    emit(
                        {
                            "event": "result",
                            "id": call_id,
                            "is_error": bool(result.is_error),
                            "texts": [c.text for c in result.content if c.type == "text"],
                        }
                    )
                if scope.cancelled_caught:
                    emit({"event": "cancelled", "id": call_id})

            while True:
                line = await anyio.to_thread.run_sync(sys.stdin.readline, abandon_on_cancel=True)
                if not line:
                    break
                cmd = json.loads(line)
                op = cmd["op"]
                if op == "list_tools":
                    tools = await client.list_tools(cache_mode="bypass")
                    emit(
                        {
                            "event": "tools",
                            "tools": [
                                t.model_dump(mode="json", by_alias=True, exclude_none=True)
                                for t in tools.tools
                            ],
                        }
                    )
                elif op == "call":
                    tg.start_soon(call, cmd["id"], cmd["name"], cmd.get("arguments", {}))
                    emit({"event": "started", "id": cmd["id"]})
                elif op == "cancel":
                    scope = scopes.get(cmd["id"])
                    if scope is not None:
                        scope.cancel()
                elif op == "quit":
                    break
            tg.cancel_scope.cancel()


if __name__ == "__main__":
    if len(sys.argv) < 4 or sys.argv[2] != "--":
        sys.exit("usage: mcp_driver.py MODE -- COMMAND ARGS...")
    anyio.run(main, sys.argv[1], sys.argv[3:])
