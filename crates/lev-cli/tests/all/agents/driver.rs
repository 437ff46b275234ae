//! The official MCP Python SDK driving `lev mcp` (`tests/python/mcp_driver.py`).
//!
//! The interpreter is `$LEV_TEST_PYTHON`, else `.venv/bin/python` at the
//! repository root (made by `scripts/python-env.sh`). Without one, or without
//! the pinned `mcp` package in it, the tests fail with a hint: a check by an
//! independent client that silently does not run checks nothing.

use std::io::{BufRead as _, BufReader, Write as _};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Arc, Mutex, mpsc};
use std::time::Duration;

use serde_json::{Value, json};

use super::served::Served;
use crate::support::repo_root;

const SETUP: &str = "run scripts/python-env.sh (it makes .venv with the pinned packages of scripts/requirements-test.txt, `mcp` among them), or set LEV_TEST_PYTHON to a python3 that has them";

/// The Python interpreter with the `mcp` package.
pub fn python() -> PathBuf {
    let candidate = std::env::var_os("LEV_TEST_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join(".venv/bin/python"));
    assert!(
        candidate.exists(),
        "no Python interpreter for the MCP client tests at {}\nhint: {SETUP}",
        candidate.display()
    );
    let check = Command::new(&candidate)
        .args(["-c", "import mcp"])
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}\nhint: {SETUP}", candidate.display()));
    assert!(
        check.status.success(),
        "{} has no `mcp` package: {}\nhint: {SETUP}",
        candidate.display(),
        String::from_utf8_lossy(&check.stderr)
    );
    candidate
}

/// One MCP client session over `lev mcp`.
pub struct Driver {
    child: Child,
    stdin: ChildStdin,
    events: mpsc::Receiver<Value>,
    stderr: Arc<Mutex<String>>,
    /// What `ready` said.
    pub ready: Value,
}

impl Driver {
    /// Start the SDK in `mode` (`legacy`, `auto`, `2026-07-28`) on
    /// `lev mcp ARGS` against `served`, as its worker.
    pub fn start(mode: &str, served: &Served, args: &[&str]) -> Self {
        let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/python/mcp_driver.py");
        let mut child = Command::new(python())
            .arg(&script)
            .arg(mode)
            .arg("--")
            .arg(env!("CARGO_BIN_EXE_lev"))
            .arg("mcp")
            .args(args)
            .env("LEV_URL", &served.url)
            .env("LEV_TOKEN", &served.worker)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start the MCP driver: {e}\nhint: {SETUP}"));
        let (stdin, events, log) = pipes(&mut child);
        let mut driver = Self {
            child,
            stdin,
            events,
            stderr: log,
            ready: Value::Null,
        };
        driver.ready = driver.next("ready");
        driver
    }

    fn send(&mut self, command: &Value) {
        writeln!(self.stdin, "{command}").unwrap();
        self.stdin.flush().unwrap();
    }

    /// The next event, which must be `kind`.
    pub fn next(&self, kind: &str) -> Value {
        let event = self
            .events
            .recv_timeout(Duration::from_secs(60))
            .unwrap_or_else(|_| {
                panic!(
                    "no {kind:?} event from the MCP driver; its stderr:\n{}",
                    self.stderr.lock().unwrap()
                )
            });
        assert_eq!(
            event["event"],
            kind,
            "expected a {kind:?} event, found {event}; driver stderr:\n{}",
            self.stderr.lock().unwrap()
        );
        event
    }

    /// `tools/list`: the tools as the SDK parsed them.
    pub fn tools(&mut self) -> Vec<Value> {
        self.send(&json!({"op": "list_tools"}));
        let event = self.next("tools");
        event["tools"].as_array().unwrap().clone()
    }

    /// Start `tools/call` of `name` as call `id`; it runs until answered.
    pub fn call(&mut self, id: &str, name: &str, arguments: Value) {
        self.send(&json!({"op": "call", "id": id, "name": name, "arguments": arguments}));
        let started = self.next("started");
        assert_eq!(started["id"], id);
    }

    /// The result of call `id`: its text blocks, and whether it is an error.
    pub fn result(&self, id: &str) -> (Vec<String>, bool) {
        let event = self.next("result");
        assert_eq!(event["id"], id, "{event}");
        let texts = event["texts"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t.as_str().unwrap().to_owned())
            .collect();
        (texts, event["is_error"].as_bool().unwrap())
    }

    /// Cancel call `id` the way the SDK does (`notifications/cancelled`).
    pub fn cancel(&mut self, id: &str) {
        self.send(&json!({"op": "cancel", "id": id}));
        let event = self.next("cancelled");
        assert_eq!(event["id"], id);
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = writeln!(self.stdin, "{}", json!({"op": "quit"}));
        let _ = self.stdin.flush();
        for _ in 0..50 {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A driver process's pipes: its stdin, its stdout read as one JSON event
/// per line (a line that is not JSON becomes a `garbage` event), and its
/// stderr collected, each read on a thread of its own.
pub(crate) fn pipes(
    child: &mut std::process::Child,
) -> (
    std::process::ChildStdin,
    mpsc::Receiver<Value>,
    Arc<Mutex<String>>,
) {
    let stdin = child.stdin.take().unwrap();
    let stdout = child.stdout.take().unwrap();
    let stderr = child.stderr.take().unwrap();
    let (tx, events) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let event = serde_json::from_str(&line).unwrap_or_else(
                |e| json!({"event": "garbage", "line": line, "error": e.to_string()}),
            );
            if tx.send(event).is_err() {
                break;
            }
        }
    });
    let log = Arc::new(Mutex::new(String::new()));
    let keep = Arc::clone(&log);
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            keep.lock().unwrap().push_str(&format!("{line}\n"));
        }
    });
    (stdin, events, log)
}
