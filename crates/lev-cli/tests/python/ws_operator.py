"""An operator written in Python with the `websockets` package, to show the
operator protocol is usable from outside Rust (SPEC section 4).

    python ws_operator.py WS_URL TOKEN

It connects with `Authorization: Bearer TOKEN`, first sends one malformed
frame and checks the `error` frame it gets back, then answers every `ask`
with {"python": <question>}, accepts every `hook_before` except spawns with
"reject" set, and runs each `spawn` by posting the sub-agent's result over
HTTP with the task token and acking `{}` (the deferral). Everything it sees
is printed to stdout as one JSON object per line, so the test can follow.
"""

import asyncio
import json
import sys
import urllib.request

from websockets.asyncio.client import connect


def say(**event):
    print(json.dumps(event), flush=True)


def post_result(http_base, task_token, task_id, value):
    body = json.dumps({"task_id": task_id, "value": value, "ok": True,
                       "output_tail": "python sub-agent done\n"}).encode()
    req = urllib.request.Request(
        f"{http_base}/v1/worker/result", data=body, method="POST",
        headers={"Authorization": f"Bearer {task_token}",
                 "Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as resp:
        return resp.status


async def main(ws_url, token):
    http_base = ws_url.split("/v1/")[0].replace("ws://", "http://", 1)
    async with connect(ws_url, additional_headers={"Authorization": f"Bearer {token}"}) as ws:
        hello = json.loads(await ws.recv())
        say(event="hello", msg=hello)
        await ws.send("this is not json")
        err = json.loads(await ws.recv())
        say(event="error", msg=err)
        async for frame in ws:
            msg = json.loads(frame)
            say(event="received", msg=msg)
            kind = msg.get("type")
            if kind == "ask":
                reply = {"type": "answer", "req_id": msg["req_id"],
                         "value": {"python": msg["question"]}}
            elif kind == "hook_before":
                reject = isinstance(msg["spawn"], dict) and msg["spawn"].get("reject")
                reply = {"type": "hook_ack", "req_id": msg["req_id"], "ok": not reject}
                if reject:
                    reply["reason"] = "python says no"
            elif kind == "spawn":
                status = await asyncio.to_thread(
                    post_result, http_base, msg["task_token"], msg["task_id"],
                    {"ran_by": "python", "spawn": msg["spawn"]})
                say(event="posted", status=status)
                reply = {"type": "spawn_ack", "req_id": msg["req_id"], "value": {}}
            else:
                continue
            await ws.send(json.dumps(reply))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
