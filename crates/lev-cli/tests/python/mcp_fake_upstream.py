"""A broken MCP server on stdio for `lev mcp proxy`'s tests: raw JSON-RPC
lines, no SDK. It answers `initialize` and `tools/list` (tools `crash` and
`hang`, both annotated read-only), then on `tools/call` of `crash` exits with
status 3 without answering, and of `hang` never answers. Any other request
gets a JSON-RPC error.
"""

import json
import sys

TOOLS = [
    {
        "name": name,
        "description": f"{name}s",
        "inputSchema": {"type": "object"},
        "annotations": {"readOnlyHint": True},
    }
    for name in ("crash", "hang")
]


def send(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


for line in sys.stdin:
    if not line.strip():
        continue
    msg = json.loads(line)
    method, mid = msg.get("method"), msg.get("id")
    if mid is None:
        continue
    if method == "initialize":
        send(
            {
                "jsonrpc": "2.0",
                "id": mid,
                "result": {
                    "protocolVersion": msg["params"]["protocolVersion"],
                    "capabilities": {"tools": {}},
                    "serverInfo": {"name": "broken", "version": "1"},
                },
            }
        )
    elif method == "tools/list":
        send({"jsonrpc": "2.0", "id": mid, "result": {"tools": TOOLS}})
    elif method == "tools/call" and msg["params"]["name"] == "crash":
        sys.stderr.write("broken: crashing\n")
        sys.exit(3)
    elif method == "tools/call":
        pass  # hangs: never answers
    else:
        send({"jsonrpc": "2.0", "id": mid, "error": {"code": -32601, "message": "no such method"}})
