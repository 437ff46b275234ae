"""Attachments sent with an answer: the `parts` of an InteractionResponse
(SPEC section 2), each `{"name", "media_type", "data": <base64>}`.

The server checks them (a part is at most 10 MiB, a respond body with parts
at most 40 MiB: 413 past either; a media type that is not `type/subtype`
or data that is not base64: 422) and reduces each name to a plain file name.
The SDK sends what it is given and lets the server decide, so a refusal is
the server's `ApiError`.
"""

from __future__ import annotations

import base64
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Union

from . import types as t

# A file to read (its name is the file's name, its media type guessed), or
# `(name, bytes)` (media type guessed from the name), or `(name, bytes,
# media_type)`.
Attachment = Union[
    str,
    "os.PathLike[str]",
    tuple[str, bytes],
    tuple[str, bytes, str],
]

# As `lev respond --attach` guesses (crates/lev-cli/src/cmd/respond.rs).
_BY_EXTENSION = {
    "md": "text/markdown",
    "markdown": "text/markdown",
    "txt": "text/plain",
    "log": "text/plain",
    "text": "text/plain",
    "csv": "text/csv",
    "html": "text/html",
    "htm": "text/html",
    "json": "application/json",
    "yaml": "application/yaml",
    "yml": "application/yaml",
    "toml": "application/toml",
    "xml": "application/xml",
    "pdf": "application/pdf",
    "zip": "application/zip",
    "gz": "application/gzip",
    "tgz": "application/gzip",
    "tar": "application/x-tar",
    "png": "image/png",
    "jpg": "image/jpeg",
    "jpeg": "image/jpeg",
    "gif": "image/gif",
    "webp": "image/webp",
    "svg": "image/svg+xml",
    "diff": "text/x-diff",
    "patch": "text/x-diff",
    **{ext: "text/plain" for ext in ("rs", "py", "js", "ts", "go", "c", "h", "sh", "rb", "java")},
}


def media_type(name: str, data: bytes) -> str:
    """A media type from the name's extension, else `text/plain` for UTF-8
    text and `application/octet-stream` for the rest (as the CLI guesses)."""
    _, dot, ext = name.rpartition(".")
    found = _BY_EXTENSION.get(ext.lower()) if dot else None
    if found is not None:
        return found
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return "application/octet-stream"
    return "text/plain"


def inbound_part(attachment: Attachment) -> t.InboundPart:
    """The part to send for one attachment. A path is read now (`OSError`
    when it cannot be)."""
    if isinstance(attachment, tuple):
        if len(attachment) == 3:
            name, data, kind = attachment
        elif len(attachment) == 2:
            name, data = attachment
            kind = None
        else:
            raise TypeError(
                "attachments: expected a path, (name, bytes) or (name, bytes, media_type), "
                f"found a tuple of {len(attachment)}"
            )
        if not isinstance(name, str):
            raise TypeError(f"attachments: expected the name as str, found {type(name).__name__}")
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise TypeError(f"attachments: {name}: expected the bytes, found {type(data).__name__}")
        raw = bytes(data)
    elif isinstance(attachment, (str, os.PathLike)):
        path = Path(os.fspath(attachment))
        raw = path.read_bytes()
        name, kind = path.name or "attachment", None
    else:
        raise TypeError(
            "attachments: expected a path, (name, bytes) or (name, bytes, media_type), "
            f"found {type(attachment).__name__}"
        )
    return {
        "name": name,
        "media_type": kind if kind is not None else media_type(name, raw),
        "data": base64.b64encode(raw).decode("ascii"),
    }


def inbound_parts(attachments: Iterable[Attachment]) -> list[t.InboundPart]:
    single = isinstance(attachments, (str, bytes, os.PathLike)) or (
        isinstance(attachments, tuple)
        and len(attachments) in (2, 3)
        and isinstance(attachments[1], (bytes, bytearray, memoryview))
    )
    if single:
        # One attachment given alone: a str would be taken as its characters.
        raise TypeError("attachments: expected a list of attachments, found a single one")
    return [inbound_part(a) for a in attachments]
