"""Make what scripts/api-check.sh's operations on one thing need to find:
an interaction to read and wait on, one to answer, one to cancel, a grant,
a webhook and an attachment, on the server at URL with the admin TOKEN.
Prints schemathesis settings (TOML) that hand each operation its thing's id,
so that those operations reach their 2xx answers and not only 404.

Usage: seed.py URL TOKEN
"""

import base64
import json
import sys

import requests

url, token = sys.argv[1], sys.argv[2]
http = requests.Session()
http.headers["Authorization"] = f"Bearer {token}"


def call(method: str, path: str, body: object = None) -> dict:
    response = http.request(method, url + path, json=body, timeout=10)
    if response.status_code >= 300:
        sys.exit(f"seed: {method} {path}: {response.status_code} {response.text}")
    return response.json() if response.content else {}


def question(prompt: str) -> str:
    body = {"session_id": "s-api-check", "kind": {"type": "free_text", "prompt": prompt}}
    return call("POST", "/v1/interactions", body)["id"]


read = question("read me")
answer = question("answer me")
cancel = question("cancel me")
attached = question("answer me with a file")
reply = call(
    "POST",
    f"/v1/interactions/{attached}/respond",
    {
        "request_id": attached,
        "value": "see the file",
        "parts": [
            {
                "name": "notes.txt",
                "media_type": "text/plain",
                "data": base64.b64encode(b"hello\n").decode(),
            }
        ],
    },
)


def find(value: object, key: str) -> str:
    """The first `key` anywhere in `value`."""
    if isinstance(value, dict):
        if isinstance(value.get(key), str):
            return value[key]
        value = list(value.values())
    if isinstance(value, list):
        for item in value:
            found = find(item, key)
            if found:
                return found
    return ""


blob = find(reply, "sha256") or sys.exit(f"seed: no stored part in {reply}")

# A grant: a gated call the built-in policy asks about, approved for the
# session.
gate = call(
    "POST",
    "/v1/gate",
    {
        "session_id": "s-api-check",
        "request_id": "api-check-1",
        "tool_name": "deploy",
        "args_json": "{}",
        "sandbox_mode": "read-only",
        "required_capabilities": [],
    },
)
asked = gate["interaction_id"]
call(
    "POST",
    f"/v1/interactions/{asked}/respond",
    {"request_id": asked, "approved": True, "scope": "session"},
)
grant = call("GET", "/v1/grants")["items"][0]["id"]

webhook = call(
    "POST",
    "/v1/webhooks",
    {"url": "http://127.0.0.1:9/api-check", "events": ["interaction.created"]},
)["id"]

# DELETE /v1/webhooks/{id} takes no fixed id: the stateful phase deletes
# the webhook its own POST made (a fixed id, deleted once by the fuzzing
# phase, made every later delete a 404 for a webhook just created), and the
# seeded webhook stays for its deliveries.
settings = [
    ("/v1/interactions/{id}", "id", read),
    ("/v1/interactions/{id}/wait", "id", read),
    ("/v1/interactions/{id}/respond", "id", answer),
    ("/v1/interactions/{id}/cancel", "id", cancel),
    ("/v1/blobs/{sha256}", "sha256", blob),
    ("/v1/grants/{id}", "id", grant),
    ("/v1/webhooks/{id}/deliveries", "id", webhook),
]
for path, name, value in settings:
    print()
    print("[[operations]]")
    print(f"include-path = {json.dumps(path)}")
    print(f"parameters = {{ {json.dumps(name)} = {json.dumps(value)} }}")
