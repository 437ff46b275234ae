"""`lev.webhooks.verify_webhook` on what a real `lev serve` delivers to a
Python receiver, and on forgeries."""

from __future__ import annotations

import json
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

import pytest
from conftest import Server, lev_bin

import lev
from lev.webhooks import WebhookError, sign, verify_webhook

# The Standard Webhooks reference vector.
VECTOR_SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
VECTOR_SIG = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="


def test_the_reference_vector() -> None:
    body = b'{"test": 2432232314}'
    assert sign(VECTOR_SECRET, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, body) == VECTOR_SIG
    headers = {
        "Webhook-Id": "msg_p5jXN8AQM9LWM0D4loKWxJek",
        "Webhook-Timestamp": "1614265330",
        "Webhook-Signature": "v1,bm9wZQ== " + VECTOR_SIG,
    }
    assert verify_webhook(VECTOR_SECRET, headers, body, now=1614265330) == {"test": 2432232314}
    for bad_headers, bad_body, now, code in [
        (headers, b'{"test": 2432232315}', 1614265330, "signature"),
        (headers, body, 1614265330 + 301, "timestamp"),
        ({**headers, "Webhook-Timestamp": "soon"}, body, 1614265330, "timestamp"),
        ({"Webhook-Id": "x"}, body, 1614265330, "missing_header"),
    ]:
        with pytest.raises(WebhookError) as e:
            verify_webhook(VECTOR_SECRET, bad_headers, bad_body, now=now)
        assert e.value.code == code
    with pytest.raises(WebhookError) as e:
        verify_webhook("nope", headers, body)
    assert e.value.code == "secret"


def test_deliveries_from_a_real_server_verify(tmp_path: Path) -> None:
    received: list[tuple[dict[str, str], bytes]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("content-length", "0"))
            received.append((dict(self.headers.items()), self.rfile.read(length)))
            self.send_response(204)
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    httpd = HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    # The receiver listens on loopback, which webhooks reach only when allowed.
    server = Server(tmp_path / "data", "--webhook-allow", "127.0.0.0/8")
    try:
        url = f"http://127.0.0.1:{httpd.server_address[1]}/lev"
        out = subprocess.run(
            [lev_bin(), "webhook", "add", url, "--events", "interaction.created", "--json"],
            env={"LEV_URL": server.url, "LEV_TOKEN": server.admin, "HOME": str(tmp_path)},
            capture_output=True,
            text=True,
            check=True,
        )
        secret = json.loads(out.stdout)["secret"]
        with server.client() as admin:
            created = admin.create_interaction(
                {"session_id": "s-py-hook", "kind": {"type": "free_text", "prompt": "hi"}}
            )
        deadline = time.time() + 30
        while not received and time.time() < deadline:
            time.sleep(0.05)
        assert received, "no delivery within 30 s"
        headers, body = received[0]
        event = verify_webhook(secret, headers, body)
        assert event["type"] == "interaction.created"
        assert event["data"]["request"]["id"] == created["id"]
        with pytest.raises(WebhookError):
            verify_webhook(secret, headers, body.replace(b"hi", b"ho"))
        other = "whsec_" + "A" * 32
        with pytest.raises(WebhookError):
            verify_webhook(other, headers, body)
    finally:
        server.stop()
        httpd.shutdown()


def test_exported() -> None:
    assert lev.webhooks.verify_webhook is verify_webhook
