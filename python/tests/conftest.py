"""Tests run against the real `lev` binary: `LEV_BIN`, else target/debug/lev."""

from __future__ import annotations

import os
import queue
import subprocess
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

import lev

ROOT = Path(__file__).resolve().parents[2]


def lev_bin() -> str:
    path = os.environ.get("LEV_BIN") or str(ROOT / "target" / "debug" / "lev")
    if not Path(path).is_file():
        pytest.fail(
            f"no lev binary at {path}: build it with `cargo build -p lev-cli` or set LEV_BIN"
        )
    return path


class Server:
    """One `lev serve` on a scratch data dir, on a free port. `stop()` then
    `start()` restarts it on the same data dir and port."""

    def __init__(self, data_dir: Path, *extra: str) -> None:
        self.data_dir = data_dir
        self.extra = extra
        self.listen = "127.0.0.1:0"
        self.lines: list[str] = []
        self.start()

    def start(self) -> None:
        env = {
            k: v
            for k, v in os.environ.items()
            if k not in ("LEV_DATABASE_URL", "LEV_URL", "LEV_TOKEN")
        }
        self.proc = subprocess.Popen(
            [
                lev_bin(),
                "serve",
                "--listen",
                self.listen,
                "--data-dir",
                str(self.data_dir),
                *self.extra,
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        found: queue.Queue[str] = queue.Queue()

        def read() -> None:
            assert self.proc.stderr is not None
            for line in self.proc.stderr:
                self.lines.append(line)
                if line.startswith("lev: listening on "):
                    found.put(line.removeprefix("lev: listening on ").strip())

        threading.Thread(target=read, daemon=True).start()
        try:
            self.url = found.get(timeout=60)
        except queue.Empty:
            self.stop()
            pytest.fail("lev serve did not say where it listens:\n" + "".join(self.lines))
        self.listen = urlsplit(self.url).netloc
        self.admin = (self.data_dir / "admin.token").read_text().strip()

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait()

    def client(self, token: str | None = None) -> lev.Client:
        return lev.Client(self.url, token or self.admin)

    def token(self, role: str, **kw: Any) -> str:
        name = f"{role}-{uuid.uuid4().hex[:8]}"
        if role == "operator":
            kw.setdefault("sessions", ["*"])
        with self.client() as admin:
            return str(admin.create_token(name, role, **kw)["token"])


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    s = Server(tmp_path_factory.mktemp("lev") / "data")
    yield s
    s.stop()


@pytest.fixture
def fresh_server(tmp_path: Path) -> Iterator[Server]:
    s = Server(tmp_path / "data")
    yield s
    s.stop()


@pytest.fixture
def sid() -> str:
    return f"s-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def worker(server: Server) -> Iterator[lev.Client]:
    with server.client(server.token("worker")) as c:
        yield c


@pytest.fixture
def approver(server: Server) -> Iterator[lev.Client]:
    with server.client(server.token("approver")) as c:
        yield c


def answer_when_pending(
    approver: lev.Client, session_id: str, response: dict[str, Any], timeout: float = 30.0
) -> threading.Thread:
    """A person answering through the HTTP API, the first pending interaction of the session."""
    import time

    def run() -> None:
        until = time.monotonic() + timeout
        while time.monotonic() < until:
            items = approver.list_interactions("pending", session_id=session_id)["items"]
            if items:
                approver.respond(items[0]["request"]["id"], response)
                return
            time.sleep(0.1)

    th = threading.Thread(target=run, daemon=True)
    th.start()
    return th
