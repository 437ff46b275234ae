"""`respond(..., attachments=)` against a real `lev serve`: the parts arrive,
are stored, and read back byte for byte through `blob()`; the server's
refusals of a part are typed errors."""

from __future__ import annotations

import asyncio
import hashlib
import os
from pathlib import Path

import pytest
from conftest import Server

import lev
from lev._parts import inbound_part, inbound_parts, media_type

MIB = 1024 * 1024


def free_text(worker: lev.Client, sid: str) -> str:
    return worker.create_interaction(
        {"session_id": sid, "kind": {"type": "free_text", "prompt": "the logs?"}}
    )["id"]


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def test_an_answer_with_two_attachments_arrives(
    worker: lev.Client, approver: lev.Client, sid: str, tmp_path: Path
) -> None:
    notes = b"# Notes\n\nship it after the tests\n"
    (tmp_path / "notes.md").write_bytes(notes)
    binary = os.urandom(70_000) + b"\xff\xfe"
    iid = free_text(worker, sid)
    result = approver.respond(
        iid,
        {"value": "see the two files"},
        attachments=[tmp_path / "notes.md", ("trace.bin", binary, "application/x-trace")],
    )
    want = [
        {
            "name": "notes.md",
            "media_type": "text/markdown",
            "size": len(notes),
            "sha256": sha(notes),
        },
        {
            "name": "trace.bin",
            "media_type": "application/x-trace",
            "size": len(binary),
            "sha256": sha(binary),
        },
    ]
    assert result["response"]["parts"] == want
    assert result["response"]["value"] == "see the two files"
    # Read back through the API: the stored response, the wait, and the bytes.
    stored = worker.get_interaction(iid)["response"]
    assert stored is not None and stored["parts"] == want
    waited = worker.wait(iid, 1)
    assert waited["status"] == "answered" and waited["response"]["parts"] == want
    assert worker.blob(sha(notes)) == notes
    assert approver.blob(sha(binary)) == binary


def test_async_respond_with_attachments_and_parts_given_as_well(
    server: Server, worker: lev.Client, sid: str
) -> None:
    """Both clients send the same body; `parts` already in the response come first."""
    token = server.token("approver")
    iid = free_text(worker, sid)
    given = inbound_part(("given.txt", b"given"))

    async def main() -> lev.types.RespondResult:
        async with lev.AsyncClient(server.url, token) as c:
            return await c.respond(
                iid,
                {"value": "two", "parts": [given]},
                attachments=[("../../etc/passwd", b"not really", "text/plain")],
            )

    parts = asyncio.run(main())["response"]["parts"]
    assert [p["name"] for p in parts] == ["given.txt", "passwd"]
    # The server reduced the name to a plain one and kept what was sent.
    assert parts[1].get("original_name") == "../../etc/passwd"
    assert worker.blob(parts[1]["sha256"]) == b"not really"


def test_a_too_large_attachment_is_the_servers_413(
    worker: lev.Client, approver: lev.Client, sid: str
) -> None:
    iid = free_text(worker, sid)
    with pytest.raises(lev.ApiError) as e:
        approver.respond(iid, {"value": "big"}, attachments=[("big.bin", b"\0" * (10 * MIB + 1))])
    assert e.value.status == 413 and e.value.code and "parts[0]" in e.value.message
    # Nothing was stored: the interaction waits for an answer still, and one
    # at the limit is taken.
    assert worker.get_interaction(iid)["response"] is None
    # Parts each within the limit, a body over the 40 MiB a respond may be.
    four = [(f"part{i}.bin", bytes([i]) * (10 * MIB)) for i in range(4)]
    with pytest.raises(lev.ApiError) as e:
        approver.respond(iid, {"value": "big"}, attachments=four)
    assert e.value.status == 413 and e.value.code == "too_large"
    ok = approver.respond(iid, {"value": "big"}, attachments=[("max.bin", b"\1" * (10 * MIB))])
    assert ok["response"]["parts"][0]["size"] == 10 * MIB


def test_bad_attachments_are_the_servers_422(
    worker: lev.Client, approver: lev.Client, sid: str
) -> None:
    iid = free_text(worker, sid)
    with pytest.raises(lev.ApiError) as e:
        approver.respond(iid, {"value": "x"}, attachments=[("a.txt", b"a", "not a media type")])
    assert e.value.status == 422 and "parts[0].media_type" in e.value.message
    with pytest.raises(lev.ApiError) as e:
        approver.respond(
            iid,
            {"value": "x"},
            attachments=[("a.txt", b"a"), ("b.txt", b"b", "text/html\r\nX-Evil: 1")],
        )
    assert e.value.status == 422 and "parts[1].media_type" in e.value.message
    # Attachments belong to text answers: a multiple choice refuses them.
    choice = worker.create_interaction(
        {"session_id": sid, "kind": {"type": "multiple_choice", "prompt": "?", "options": ["a"]}}
    )["id"]
    with pytest.raises(lev.ApiError) as e:
        approver.respond(choice, {"choice_index": 0}, attachments=[("a.txt", b"a")])
    assert e.value.status == 422 and "parts" in e.value.message
    assert worker.get_interaction(iid)["response"] is None
    assert worker.get_interaction(choice)["response"] is None


def test_what_cannot_be_sent_is_refused_before_sending(
    worker: lev.Client, approver: lev.Client, sid: str, tmp_path: Path
) -> None:
    iid = free_text(worker, sid)
    with pytest.raises(FileNotFoundError):
        approver.respond(iid, {"value": "x"}, attachments=[tmp_path / "missing.txt"])
    with pytest.raises(TypeError):
        approver.respond(iid, {"value": "x"}, attachments=[("a.txt", "text, not bytes")])  # type: ignore[list-item]
    with pytest.raises(TypeError):
        approver.respond(iid, {"value": "x"}, attachments=str(tmp_path / "a.txt"))
    with pytest.raises(TypeError):
        approver.respond(iid, {"value": "x"}, attachments=("a.txt", b"a"))  # type: ignore[arg-type]
    assert worker.get_interaction(iid)["response"] is None


def test_blob_errors_are_typed(worker: lev.Client) -> None:
    with pytest.raises(lev.ApiError) as e:
        worker.blob("0" * 64)
    assert e.value.status == 404 and e.value.code
    with pytest.raises(lev.ApiError) as e:
        worker.blob("../etc/passwd")
    assert e.value.status == 404


def test_parts_built_as_the_cli_builds_them(tmp_path: Path) -> None:
    assert media_type("notes.MD", b"") == "text/markdown"
    assert media_type("run.log", b"\xff") == "text/plain"
    assert media_type("Makefile", b"all:\n") == "text/plain"
    assert media_type("blob", b"\xff\xfe\x00") == "application/octet-stream"
    assert media_type("report.pdf", b"%PDF") == "application/pdf"
    (tmp_path / "x.json").write_text("{}")
    parts = inbound_parts([tmp_path / "x.json", str(tmp_path / "x.json"), ("y", b"\x00\xff")])
    assert parts[0] == {"name": "x.json", "media_type": "application/json", "data": "e30="}
    assert parts[1] == parts[0]
    assert parts[2] == {"name": "y", "media_type": "application/octet-stream", "data": "AP8="}
    # A tuple of paths is a list of attachments, not one attachment.
    assert len(inbound_parts((tmp_path / "x.json", tmp_path / "x.json"))) == 2
