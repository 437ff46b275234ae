#!/usr/bin/env python3
"""An independent DSSE + Ed25519 signer, to check that `lev verify` accepts
envelopes made by any correct signer, not only by lev's own code.

Nothing here comes from lev: the pre-authentication encoding, the key id and
the base64 are written from the DSSE and SPEC texts, and the signature is made
by Python's `cryptography` package.

Reads a JSON request on stdin:
    {"seed_hex": "<64 hex digits>",       the Ed25519 private key seed
     "payload": {...},                    the approval payload, any JSON object
     "payload_type": "...",               optional, lev's type by default
     "tamper": false,                     change one payload byte after signing
     "encoding": "standard"}              or "urlsafe_nopad"
Writes on stdout:
    {"public_key": "<base64url>", "keyid": "<16 hex>", "envelope": {...}}
"""

import base64
import hashlib
import json
import sys

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

LEV_PAYLOAD_TYPE = "application/vnd.lev.approval+json; version=1"


def pae(payload_type: str, payload: bytes) -> bytes:
    """DSSE v1 pre-authentication encoding."""
    t = payload_type.encode("utf-8")
    return b"DSSEv1 %d %s %d %s" % (len(t), t, len(payload), payload)


def b64(data: bytes, encoding: str) -> str:
    if encoding == "standard":
        return base64.b64encode(data).decode("ascii")
    if encoding == "urlsafe_nopad":
        return base64.urlsafe_b64encode(data).decode("ascii").rstrip("=")
    raise SystemExit(f"unknown encoding {encoding!r}")


def main() -> None:
    request = json.load(sys.stdin)
    key = Ed25519PrivateKey.from_private_bytes(bytes.fromhex(request["seed_hex"]))
    public = key.public_key().public_bytes(
        serialization.Encoding.Raw, serialization.PublicFormat.Raw
    )
    keyid = hashlib.sha256(public).hexdigest()[:16]
    payload_type = request.get("payload_type", LEV_PAYLOAD_TYPE)
    # Python's own JSON writer: sorted keys and ", " / ": " separators, unlike lev's.
    payload = json.dumps(request["payload"], sort_keys=True).encode("utf-8")
    signature = key.sign(pae(payload_type, payload))
    if request.get("tamper"):
        # One byte of the signed args changed, the JSON still valid.
        tampered = payload.replace(b"--workspace", b"--workspacf", 1)
        assert tampered != payload, "nothing to tamper with"
        payload = tampered
    encoding = request.get("encoding", "standard")
    envelope = {
        "payloadType": payload_type,
        "payload": b64(payload, encoding),
        "signatures": [{"keyid": keyid, "sig": b64(signature, encoding)}],
    }
    json.dump(
        {
            "public_key": base64.urlsafe_b64encode(public).decode("ascii").rstrip("="),
            "keyid": keyid,
            "envelope": envelope,
        },
        sys.stdout,
    )


if __name__ == "__main__":
    main()
