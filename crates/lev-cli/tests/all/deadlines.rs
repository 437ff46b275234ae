//! Fail-closed means within the agent's timeout: every command an agent runs
//! with a time limit answers by its deadline (`--timeout` and a tenth of it,
//! 1 to 15 s, from its start) with its configured fail behaviour, against a
//! lev that never answers, one that trickles its answer byte by byte (body or
//! headers), and one that closes mid-answer. `--timeout 1` gives a deadline
//! of 2 s; each run must be over well before an ordinary request's 60 s.

use std::io::{BufRead as _, BufReader, Write as _};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use lev_test_support::{Stall, Stalling};
use serde_json::{Value, json};

use crate::agents::hook::fixture;
use crate::support::{Run, lev_with_stdin};

const STALLS: [Stall; 4] = [
    Stall::Silent,
    Stall::TrickleBody,
    Stall::TrickleHeaders,
    Stall::CloseMidResponse,
];

/// The 2 s deadline of `--timeout 1` and room for a loaded machine.
const WITHIN: Duration = Duration::from_secs(2 + 4);

/// `lev ARGS` (with `--url` of `stall`'s server), timed; each stall kind on a
/// thread of its own, so that the cases run side by side.
fn each_stall(args: &'static [&'static str], stdin: Vec<u8>) -> Vec<(Stall, Run, Duration)> {
    let threads: Vec<_> = STALLS
        .into_iter()
        .map(|stall| {
            let stdin = stdin.clone();
            std::thread::spawn(move || {
                let server = Stalling::start(stall).unwrap();
                let mut all: Vec<&str> = args.to_vec();
                all.extend(["--url", server.url(), "--token", "lev_x"]);
                let started = Instant::now();
                let run = lev_with_stdin(all, &stdin);
                (stall, run, started.elapsed())
            })
        })
        .collect();
    threads.into_iter().map(|t| t.join().unwrap()).collect()
}

#[test]
fn claude_code_hook_fails_closed_within_its_deadline_whatever_lev_does() {
    let pre = fixture("pre_tool_use.json");
    for (stall, run, took) in each_stall(
        &["hook", "claude-code", "--timeout", "1", "--fail-closed"],
        pre,
    ) {
        assert!(took < WITHIN, "{stall:?}: answered after {took:?}: {run:?}");
        assert_eq!(run.code, 0, "{stall:?}: {run:?}");
        let out = run.json();
        let specific = &out["hookSpecificOutput"];
        assert_eq!(specific["permissionDecision"], "deny", "{stall:?}: {out}");
        let reason = specific["permissionDecisionReason"].as_str().unwrap();
        assert!(
            reason.contains("fails closed") && reason.contains("the call was not run"),
            "{stall:?}: {reason}"
        );
        if stall != Stall::CloseMidResponse {
            assert!(
                reason.contains("lev did not decide within 2 s"),
                "{stall:?}: {reason}"
            );
        }
    }

    // A PermissionRequest is denied the same way.
    let perm = fixture("permission_request.json");
    for (stall, run, took) in each_stall(
        &["hook", "claude-code", "--timeout", "1", "--fail-closed"],
        perm,
    ) {
        assert!(took < WITHIN, "{stall:?}: answered after {took:?}: {run:?}");
        let out = run.json();
        assert_eq!(
            out["hookSpecificOutput"]["decision"]["behavior"], "deny",
            "{stall:?}: {out}"
        );
    }
}

#[test]
fn claude_code_hook_fails_open_within_its_deadline_whatever_lev_does() {
    let pre = fixture("pre_tool_use.json");
    for (stall, run, took) in each_stall(&["hook", "claude-code", "--timeout", "1"], pre) {
        assert!(took < WITHIN, "{stall:?}: answered after {took:?}: {run:?}");
        assert_eq!(run.code, 0, "{stall:?}: {run:?}");
        let out = run.json();
        // Claude Code's own permission prompt decides.
        assert_eq!(
            out["hookSpecificOutput"]["permissionDecision"], "ask",
            "{stall:?}: {out}"
        );
    }
    let perm = fixture("permission_request.json");
    for (stall, run, took) in each_stall(&["hook", "claude-code", "--timeout", "1"], perm) {
        assert!(took < WITHIN, "{stall:?}: answered after {took:?}: {run:?}");
        assert_eq!(
            (run.code, run.stdout.as_str()),
            (0, ""),
            "{stall:?}: {run:?}"
        );
    }
}

#[test]
fn claude_code_hook_with_an_event_that_never_ends_answers_at_its_deadline() {
    for (fail_closed, code) in [(true, Some(2)), (false, Some(0))] {
        let mut args = vec![
            "hook",
            "claude-code",
            "--timeout",
            "1",
            "--url",
            "http://127.0.0.1:9",
            "--token",
            "lev_x",
        ];
        if fail_closed {
            args.push("--fail-closed");
        }
        let mut child = Command::new(env!("CARGO_BIN_EXE_lev"))
            .args(&args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        stdin
            .write_all(br#"{"session_id": "s", "hook_event_name": "PreToolUse""#)
            .unwrap();
        let started = Instant::now();
        let output = child.wait_with_output().unwrap();
        drop(stdin);
        assert!(started.elapsed() < WITHIN, "{output:?}");
        assert_eq!(output.status.code(), code, "{output:?}");
        assert!(output.stdout.is_empty(), "{output:?}");
        let stderr = String::from_utf8(output.stderr).unwrap();
        assert!(stderr.contains("lev did not decide within 2 s"), "{stderr}");
    }
}

#[test]
fn codex_hook_blocks_within_its_deadline_whatever_lev_does() {
    let event = json!({
        "session_id": "s-stall", "cwd": "/ws", "hook_event_name": "PreToolUse",
        "tool_name": "Bash", "tool_use_id": "call_s1", "tool_input": {"command": "rm -rf build"}
    });
    for (stall, run, took) in each_stall(
        &["hook", "codex", "--timeout", "1"],
        event.to_string().into_bytes(),
    ) {
        assert!(took < WITHIN, "{stall:?}: answered after {took:?}: {run:?}");
        assert_eq!(run.code, 0, "{stall:?}: {run:?}");
        let out = run.json();
        assert_eq!(
            out["hookSpecificOutput"]["permissionDecision"], "deny",
            "{stall:?}: {out}"
        );
    }
}

#[test]
fn lev_ask_with_a_timeout_gives_up_within_its_deadline_whatever_lev_does() {
    for (stall, run, took) in each_stall(&["ask", "Anyone?", "--timeout", "1"], Vec::new()) {
        assert!(took < WITHIN, "{stall:?}: exited after {took:?}: {run:?}");
        if stall == Stall::CloseMidResponse {
            // An answer cut short is an error at once.
            assert_eq!(run.code, 1, "{stall:?}: {run:?}");
        } else {
            assert_eq!(run.code, 4, "{stall:?}: timed out: {run:?}");
            assert!(
                run.stderr.contains("lev did not answer within 2 s"),
                "{stall:?}: {}",
                run.stderr
            );
        }
        assert!(run.stdout.is_empty(), "{stall:?}: {run:?}");
    }
}

#[test]
fn lev_run_with_a_timeout_runs_nothing_and_exits_124_within_its_deadline() {
    let scratch = crate::support::Scratch::new("deadline-run");
    let marker = scratch.path("ran").to_str().unwrap().to_owned();
    let runs: Vec<_> = STALLS
        .into_iter()
        .map(|stall| {
            let marker = marker.clone();
            std::thread::spawn(move || {
                let server = Stalling::start(stall).unwrap();
                let args = [
                    "run",
                    "--url",
                    server.url(),
                    "--token",
                    "lev_x",
                    "--timeout",
                    "1",
                    "--",
                    "touch",
                    &marker,
                ];
                let started = Instant::now();
                let run = lev_with_stdin(args, b"");
                (stall, run, started.elapsed())
            })
        })
        .collect();
    for (stall, run, took) in runs.into_iter().map(|t| t.join().unwrap()) {
        assert!(took < WITHIN, "{stall:?}: exited after {took:?}: {run:?}");
        if stall == Stall::CloseMidResponse {
            // An answer cut short is an error at once.
            assert_eq!(run.code, 1, "{stall:?}: {run:?}");
        } else {
            assert_eq!(run.code, 124, "{stall:?}: {run:?}");
            assert!(
                run.stderr.contains("lev did not decide within 2 s"),
                "{stall:?}: {}",
                run.stderr
            );
        }
    }
    assert!(!std::path::Path::new(&marker).exists(), "the command ran");
}

/// `lev mcp --timeout 1` against `url`, fed raw JSON-RPC lines.
struct Mcp {
    child: std::process::Child,
    stdin: std::process::ChildStdin,
    replies: std::sync::mpsc::Receiver<Value>,
}

impl Mcp {
    fn start(url: &str) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_lev"))
            .args(["mcp", "--session", "stall", "--timeout", "1"])
            .env("LEV_URL", url)
            .env("LEV_TOKEN", "lev_x")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, replies) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let _ = tx.send(serde_json::from_str(&line).unwrap_or(Value::String(line)));
            }
        });
        let mut mcp = Self {
            child,
            stdin,
            replies,
        };
        mcp.send(
            &json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "stall", "version": "1"}}}),
        );
        mcp.reply(Duration::from_secs(30));
        mcp.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        mcp
    }

    fn send(&mut self, message: &Value) {
        writeln!(self.stdin, "{message}").unwrap();
    }

    fn reply(&self, within: Duration) -> Value {
        self.replies
            .recv_timeout(within)
            .expect("a reply from lev mcp in time")
    }
}

impl Drop for Mcp {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn mcp_tool_calls_answer_within_their_deadline_whatever_lev_does() {
    let threads: Vec<_> = STALLS
        .into_iter()
        .map(|stall| {
            std::thread::spawn(move || {
                let server = Stalling::start(stall).unwrap();
                let mut mcp = Mcp::start(server.url());
                let started = Instant::now();
                mcp.send(
                    &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
                    "name": "approval_prompt",
                    "arguments": {"tool_name": "Bash", "input": {"command": "rm -rf build"}}}}),
                );
                let approval = mcp.reply(WITHIN + Duration::from_secs(60));
                let approval_took = started.elapsed();
                let started = Instant::now();
                mcp.send(
                    &json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
                    "name": "ask_human", "arguments": {"question": "Still there?"}}}),
                );
                let ask = mcp.reply(WITHIN + Duration::from_secs(60));
                (stall, approval, approval_took, ask, started.elapsed())
            })
        })
        .collect();
    for thread in threads {
        let (stall, approval, approval_took, ask, ask_took) = thread.join().unwrap();
        assert!(
            approval_took < WITHIN,
            "{stall:?}: approval_prompt after {approval_took:?}"
        );
        let text = approval["result"]["content"][0]["text"].as_str().unwrap();
        let decision: Value = serde_json::from_str(text).unwrap();
        assert_eq!(decision["behavior"], "deny", "{stall:?}: {decision}");
        assert!(ask_took < WITHIN, "{stall:?}: ask_human after {ask_took:?}");
        assert_eq!(ask["result"]["isError"], true, "{stall:?}: {ask}");
    }
}
