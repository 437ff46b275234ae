"""Receiving lev's webhooks: check a delivery's Standard Webhooks signature.

    from lev.webhooks import verify_webhook

    event = verify_webhook(secret, request.headers, request.body)
    if event["type"] == "interaction.created": ...

`secret` is the `whsec_...` that `lev webhook add` printed. The signature is
`v1,` and base64 of HMAC-SHA256 over `{webhook-id}.{webhook-timestamp}.{body}`
keyed by the secret's decoded bytes; the timestamp must be within
`tolerance_s` of now, which bounds replays (keep the `webhook-id`s you have
handled to refuse them for good: lev retries with the same id).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import time
from collections.abc import Mapping
from typing import Any

from ._errors import LevError

SECRET_PREFIX = "whsec_"


class WebhookError(LevError):
    """The delivery is not genuine or not fresh. `code` is one of `secret`,
    `missing_header`, `timestamp`, `signature`, `body`."""


def _header(headers: Mapping[str, str], name: str) -> str:
    for key, value in headers.items():
        if key.lower() == name:
            return value
    raise WebhookError("missing_header", f"no {name} header")


def secret_key(secret: str) -> bytes:
    """The HMAC key of a `whsec_` secret."""
    body = secret.strip()
    if not body.startswith(SECRET_PREFIX):
        raise WebhookError("secret", "expected whsec_ followed by base64")
    try:
        key = base64.b64decode(body[len(SECRET_PREFIX) :], validate=True)
    except (binascii.Error, ValueError) as e:
        raise WebhookError("secret", f"not base64: {e}") from None
    if not 24 <= len(key) <= 64:
        raise WebhookError("secret", f"expected 24 to 64 bytes, found {len(key)}")
    return key


def sign(secret: str, webhook_id: str, timestamp: int, body: bytes) -> str:
    """The `webhook-signature` value lev sends (for tests of receivers)."""
    mac = hmac.new(secret_key(secret), f"{webhook_id}.{timestamp}.".encode() + body, hashlib.sha256)
    return "v1," + base64.b64encode(mac.digest()).decode()


def verify_webhook(
    secret: str,
    headers: Mapping[str, str],
    body: bytes,
    *,
    tolerance_s: int = 300,
    now: float | None = None,
) -> dict[str, Any]:
    """Check a delivery and return its parsed body (`type`, `timestamp`,
    `data`). Raises `WebhookError` when it does not verify."""
    key = secret_key(secret)
    webhook_id = _header(headers, "webhook-id")
    timestamp = _header(headers, "webhook-timestamp")
    signatures = _header(headers, "webhook-signature")
    try:
        ts = int(timestamp)
    except ValueError:
        raise WebhookError("timestamp", f"not a number: {timestamp!r}") from None
    current = time.time() if now is None else now
    if abs(current - ts) > tolerance_s:
        raise WebhookError("timestamp", f"{int(current - ts)} s from now")
    expected = hmac.new(key, f"{webhook_id}.{timestamp}.".encode() + body, hashlib.sha256)
    for candidate in signatures.split(" "):
        version, _, b64 = candidate.partition(",")
        if version != "v1":
            continue
        try:
            given = base64.b64decode(b64, validate=True)
        except (binascii.Error, ValueError):
            continue
        if hmac.compare_digest(given, expected.digest()):
            break
    else:
        raise WebhookError("signature", "no v1 signature matches")
    try:
        parsed = json.loads(body)
    except ValueError as e:
        raise WebhookError("body", f"not JSON: {e}") from None
    if not isinstance(parsed, dict):
        raise WebhookError("body", "not a JSON object")
    return parsed
