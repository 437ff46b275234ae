//! What `lev codex` does with what it cannot work with: no Codex, a program
//! that is not Codex, a Codex too old, an approval request it cannot map (a
//! scripted stand-in for Codex speaking the protocol), a sandbox and policy
//! under which Codex would ask nothing.

use std::os::unix::fs::PermissionsExt as _;
use std::path::PathBuf;

use serde_json::{Value, json};

use super::harness::{CodexEnv, Running};
use crate::support::{Run, Scratch, lev};

/// An executable shell script `name` in `dir` with `body`.
fn script(dir: &Scratch, name: &str, body: &str) -> PathBuf {
    let path = dir.write(name, format!("#!/bin/sh\n{body}"));
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

/// `lev codex run` with `codex` against a lev that is never reached before
/// Codex answers (the keys are pinned).
fn run_with(codex: &str, extra: &[&str]) -> Run {
    // Any valid public key: the run fails before anything is signed.
    let key = "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo";
    let mut args = vec![
        "codex",
        "run",
        "--key",
        key,
        "--url",
        "http://127.0.0.1:9",
        "--token",
        "lev_x",
    ];
    args.extend_from_slice(extra);
    args.extend_from_slice(&["--codex", codex, "do it"]);
    lev(args)
}

#[test]
fn codex_run_without_codex_says_so() {
    let run = lev([
        "codex",
        "run",
        "--key",
        "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo",
        "--url",
        "http://127.0.0.1:9",
        "--token",
        "lev_x",
        "--codex",
        "/nonexistent/codex",
        "do it",
    ]);
    assert_eq!(run.code, 1, "{run:?}");
    assert!(
        run.stderr
            .contains("cannot start Codex: --codex /nonexistent/codex: no such file"),
        "{}",
        run.stderr
    );
}

#[test]
fn codex_run_without_codex_on_path_says_how_to_get_it() {
    // A PATH with no `codex` on it (nor anything else).
    let empty = Scratch::new("codex-no-path");
    let path = empty.path("bin");
    std::fs::create_dir_all(&path).unwrap();
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_lev"));
    command
        .args([
            "codex",
            "run",
            "--key",
            "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo",
            "--url",
            "http://127.0.0.1:9",
            "--token",
            "lev_x",
            "do it",
        ])
        .env("PATH", &path);
    let output = command.output().unwrap();
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("cannot start Codex: no `codex` on PATH"),
        "{stderr}"
    );
    assert!(
        stderr.contains("install it (npm install -g @openai/codex) or give its path with --codex"),
        "{stderr}"
    );
}

#[test]
fn codex_run_of_something_that_is_not_codex_names_what_it_found() {
    let dir = Scratch::new("codex-notcodex");
    let fake = script(
        &dir,
        "codex",
        "echo 'Usage: frobnicate [options]'\nsleep 5\n",
    );
    let run = run_with(fake.to_str().unwrap(), &[]);
    assert_eq!(run.code, 1, "{run:?}");
    assert!(run.stderr.contains("is not a Codex app-server: expected JSON-RPC messages, found \"Usage: frobnicate [options]\""), "{}", run.stderr);

    let dies = script(
        &dir,
        "dies",
        "echo 'error: unknown subcommand app-server' >&2\nexit 2\n",
    );
    let run = run_with(dies.to_str().unwrap(), &[]);
    assert_eq!(run.code, 1, "{run:?}");
    assert!(
        run.stderr
            .contains("closed the connection before answering initialize"),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr.contains("error: unknown subcommand app-server"),
        "its stderr is shown: {}",
        run.stderr
    );
}

#[test]
fn codex_run_refuses_a_codex_too_old_naming_its_version() {
    let dir = Scratch::new("codex-old");
    let old = script(
        &dir,
        "codex",
        "read -r line\necho '{\"id\":1,\"result\":{\"userAgent\":\"lev/0.100.2 (Debian 12; x86_64) xterm (lev; 0.1.0)\"}}'\nsleep 5\n",
    );
    let run = run_with(old.to_str().unwrap(), &[]);
    assert_eq!(run.code, 1, "{run:?}");
    assert!(
        run.stderr.contains("unsupported Codex version 0.100.2"),
        "{}",
        run.stderr
    );
}

#[test]
fn codex_run_refuses_what_would_ask_nothing() {
    let run = lev([
        "codex",
        "run",
        "--approval-policy",
        "on-request",
        "--sandbox",
        "danger-full-access",
        "x",
    ]);
    assert_eq!(run.code, 2, "{run:?}");
    assert!(
        run.stderr.contains("Codex would ask for nothing"),
        "{}",
        run.stderr
    );
    let run = lev(["codex", "run", "--approval-policy", "never", "x"]);
    assert_eq!(run.code, 2, "{run:?}");
    assert!(
        run.stderr.contains("invalid value 'never'"),
        "{}",
        run.stderr
    );
    let run = lev(["codex", "run", "x", "--", "--listen", "unix://"]);
    assert_eq!(run.code, 2, "{run:?}");
    assert!(
        run.stderr.contains("refusing the Codex option --listen"),
        "{}",
        run.stderr
    );
}

/// A stand-in for `codex app-server` that answers lev's handshake, starts a
/// thread (`policy`, reviewer `reviewer`) and a turn, sends `request`, logs
/// every line lev sends to `$FAKE_LOG`, then ends the turn.
fn stand_in(dir: &Scratch, policy: &str, reviewer: &str, request: &Value) -> PathBuf {
    let thread = json!({"id": 2, "result": {
        "thread": {"id": "th-1"}, "model": "fake", "approvalPolicy": policy,
        "approvalsReviewer": reviewer, "sandbox": {"type": "workspaceWrite"},
    }});
    script(
        dir,
        "codex",
        &format!(
            r#"log="$FAKE_LOG"
read -r l; echo "$l" >> "$log"; echo '{{"id":1,"result":{{"userAgent":"lev/0.171.0 (test)"}}}}'
read -r l; echo "$l" >> "$log"
read -r l; echo "$l" >> "$log"; echo '{thread}'
read -r l; echo "$l" >> "$log"; echo '{{"id":3,"result":{{"turn":{{"id":"tu-1"}}}}}}'
echo '{request}'
read -r l; echo "$l" >> "$log"; echo '{{"id":4,"result":{{"turnId":"tu-1"}}}}'
read -r l; echo "$l" >> "$log"
echo '{{"method":"turn/completed","params":{{"threadId":"th-1","turn":{{"id":"tu-1","status":"completed"}}}}}}'
read -r l
"#
        ),
    )
}

#[test]
fn codex_run_declines_a_request_it_cannot_map_and_tells_the_model() {
    let env = CodexEnv::start("unmappable", None, vec![]);
    let dir = Scratch::new("codex-unmappable");
    let log = dir.path("lines.jsonl");
    let cases = [
        (
            json!({"id": 0, "method": "item/fileChange/requestApproval", "params": {
                "threadId": "th-1", "turnId": "tu-1", "itemId": "call_unseen", "startedAtMs": 1}}),
            json!({"decision": "decline"}),
            "lev did not see the changes of file change call_unseen",
        ),
        (
            json!({"id": 0, "method": "item/permissions/requestApproval", "params": {
                "threadId": "th-1", "turnId": "tu-1", "itemId": "i1", "cwd": "/", "permissions": {}}}),
            json!({"permissions": {}, "scope": "turn"}),
            "lev does not grant Codex extra sandbox permissions",
        ),
    ];
    for (request, reply, why) in cases {
        let _ = std::fs::remove_file(&log);
        let codex = stand_in(&dir, "untrusted", "user", &request);
        let mut command = env.lev(&["codex", "run", "--codex", codex.to_str().unwrap(), "do it"]);
        command.env("FAKE_LOG", &log);
        let run = Running::spawn(command).wait();
        assert_eq!(run.code, 0, "{}", run.stderr);
        assert!(
            run.stderr
                .contains("declined a Codex request lev cannot gate"),
            "logged: {}",
            run.stderr
        );
        assert!(run.stderr.contains(why), "{}", run.stderr);
        let lines: Vec<Value> = std::fs::read_to_string(&log)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let steer = &lines[4];
        assert_eq!(steer["method"], "turn/steer", "{lines:?}");
        assert_eq!(steer["params"]["expectedTurnId"], "tu-1");
        let text = steer["params"]["input"][0]["text"].as_str().unwrap();
        assert!(
            text.starts_with("lev declined this request: ") && text.contains(why),
            "{text}"
        );
        assert_eq!(
            lines[5],
            json!({"id": 0, "result": reply}),
            "declined, never accepted"
        );
        assert!(
            env.interactions().is_empty(),
            "nothing to ask a person about"
        );
    }
}

#[test]
fn codex_run_refuses_a_thread_whose_approvals_it_would_not_see() {
    let env = CodexEnv::start("reviewer", None, vec![]);
    let dir = Scratch::new("codex-reviewer");
    let request = json!({"method": "noop", "params": {}});
    for (policy, reviewer) in [("never", "user"), ("untrusted", "auto_review")] {
        let codex = stand_in(&dir, policy, reviewer, &request);
        let mut command = env.lev(&["codex", "run", "--codex", codex.to_str().unwrap(), "do it"]);
        command.env("FAKE_LOG", dir.path("log"));
        let run = Running::spawn(command).wait();
        assert_eq!(run.code, 1, "{}", run.stderr);
        assert!(
            run.stderr
                .contains("Codex did not start the thread lev asked for"),
            "{}",
            run.stderr
        );
        assert!(
            run.stderr
                .contains(&format!("\"{policy}\", \"{reviewer}\"")),
            "{}",
            run.stderr
        );
    }
}

/// A lev that takes connections and never answers.
fn silent_server() -> (std::net::TcpListener, String) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    (listener, url)
}

/// Codex ignores a hook it has to kill for its timeout, and runs the call:
/// `lev hook codex` answers before that, whatever stalls it. Against a lev
/// that never answers, --timeout 1 gives a deny after 2 s (1 s and the
/// margin), well under the 31 s Codex would wait.
#[test]
fn codex_hook_blocks_at_its_deadline_when_lev_never_answers() {
    let (listener, url) = silent_server();
    let event = json!({
        "session_id": "s-deadline", "cwd": "/ws", "hook_event_name": "PreToolUse",
        "tool_name": "Bash", "tool_use_id": "call_d1", "tool_input": {"command": "rm -rf build"}
    });
    let started = std::time::Instant::now();
    let run = crate::support::lev_with_stdin(
        [
            "hook",
            "codex",
            "--timeout",
            "1",
            "--url",
            &url,
            "--token",
            "lev_x",
        ],
        event.to_string().as_bytes(),
    );
    let took = started.elapsed();
    drop(listener);
    assert_eq!(run.code, 0, "{run:?}");
    let out: Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(
        out["hookSpecificOutput"]["permissionDecision"], "deny",
        "{out}"
    );
    let reason = out["hookSpecificOutput"]["permissionDecisionReason"]
        .as_str()
        .unwrap();
    assert!(
        reason.contains("lev did not decide within 2 s") && reason.contains("was not run"),
        "{reason}"
    );
    assert!(
        took < std::time::Duration::from_secs(10),
        "answered after {took:?}"
    );
    // With --fail-open it says nothing at the deadline (Codex goes on).
    let (listener, url) = silent_server();
    let run = crate::support::lev_with_stdin(
        [
            "hook",
            "codex",
            "--timeout",
            "1",
            "--fail-open",
            "--url",
            &url,
            "--token",
            "lev_x",
        ],
        event.to_string().as_bytes(),
    );
    drop(listener);
    assert_eq!((run.code, run.stdout.as_str()), (0, ""), "{run:?}");
    assert!(run.stderr.contains("--fail-open"), "{}", run.stderr);
}

/// An event that never finishes arriving is a blocking error at the deadline.
#[test]
fn codex_hook_with_an_event_that_never_ends_exits_2_at_its_deadline() {
    use std::io::Write as _;
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_lev"))
        .args([
            "hook",
            "codex",
            "--timeout",
            "1",
            "--url",
            "http://127.0.0.1:9",
            "--token",
            "lev_x",
        ])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin
        .write_all(br#"{"session_id": "s", "hook_event_name": "PreToolUse""#)
        .unwrap();
    let started = std::time::Instant::now();
    let output = child.wait_with_output().unwrap();
    drop(stdin);
    assert!(started.elapsed() < std::time::Duration::from_secs(10));
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    assert!(output.stdout.is_empty());
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(stderr.contains("lev did not decide within 2 s"), "{stderr}");
}
