//! `lev hook claude-code` fed Claude Code's hook events (the committed
//! fixtures under `tests/fixtures/claude-code/`), printing SPEC section 10's
//! outputs: a person's decision through lev's API, a malformed event (exit 2,
//! the reason on stderr) and an unreachable server.

use std::path::PathBuf;

use serde_json::{Value, json};

use crate::support::{Run, lev_with_stdin};

/// A committed hook event.
pub fn fixture(name: &str) -> Vec<u8> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/claude-code")
        .join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// A committed event as JSON.
pub fn event(name: &str) -> Value {
    serde_json::from_slice(&fixture(name)).unwrap()
}

/// `lev hook claude-code ARGS` against `url` with `token`, `stdin` on stdin.
pub fn hook(url: &str, token: &str, args: &[&str], stdin: &[u8]) -> Run {
    let mut all = vec!["hook", "claude-code", "--url", url, "--token", token];
    all.extend_from_slice(args);
    lev_with_stdin(all, stdin)
}

/// A URL where nothing listens.
fn nobody_listening() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    format!("http://127.0.0.1:{port}")
}

#[test]
fn a_malformed_or_unsupported_event_exits_2_with_the_reason_on_stderr() {
    let url = nobody_listening();
    let cases: [(Vec<u8>, &str); 5] = [
        (
            fixture("truncated.json"),
            "malformed hook event: expected one JSON object",
        ),
        (
            fixture("missing_tool_input.json"),
            "malformed PreToolUse event: missing field `tool_input`",
        ),
        (
            fixture("post_tool_use.json"),
            "unsupported hook event \"PostToolUse\": lev answers PreToolUse and PermissionRequest",
        ),
        (b"".to_vec(), "malformed hook event"),
        (
            b"{\"tool_name\": \"Bash\"}".to_vec(),
            "expected a string `hook_event_name`",
        ),
    ];
    for (stdin, reason) in cases {
        let run = hook(&url, "lev_x", &[], &stdin);
        assert_eq!(run.code, 2, "{run:?}");
        assert!(run.stdout.is_empty(), "{run:?}");
        assert!(run.stderr.contains(reason), "{reason}: {}", run.stderr);
        assert!(run.stderr.starts_with("lev: "), "{}", run.stderr);
    }
}

#[test]
fn an_unreachable_server_asks_or_gives_no_decision_or_denies_when_failing_closed() {
    let url = nobody_listening();
    let pre = fixture("pre_tool_use.json");
    let perm = fixture("permission_request.json");

    let run = hook(&url, "lev_x", &[], &pre);
    assert_eq!(run.code, 0, "{run:?}");
    let out = run.json();
    let specific = &out["hookSpecificOutput"];
    assert_eq!(specific["hookEventName"], "PreToolUse");
    assert_eq!(specific["permissionDecision"], "ask");
    assert!(
        specific["permissionDecisionReason"]
            .as_str()
            .unwrap()
            .starts_with("lev could not be reached, so it did not decide on the call to Bash"),
        "{out}"
    );
    assert_eq!(out.as_object().unwrap().len(), 1, "{out}");
    assert!(
        run.stderr.contains("could not be reached"),
        "{}",
        run.stderr
    );

    let run = hook(&url, "lev_x", &[], &perm);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(
        run.stdout, "",
        "no decision: Claude Code's own prompt takes over"
    );

    let run = hook(&url, "lev_x", &["--fail-closed"], &pre);
    assert_eq!(run.code, 0, "{run:?}");
    let out = run.json();
    assert_eq!(out["hookSpecificOutput"]["permissionDecision"], "deny");
    assert!(
        out["hookSpecificOutput"]["permissionDecisionReason"]
            .as_str()
            .unwrap()
            .contains("(the hook fails closed); the call was not run."),
        "{out}"
    );

    let run = hook(&url, "lev_x", &["--fail-closed"], &perm);
    assert_eq!(run.code, 0, "{run:?}");
    let out = run.json();
    let decision = &out["hookSpecificOutput"]["decision"];
    assert_eq!(
        out["hookSpecificOutput"]["hookEventName"],
        "PermissionRequest"
    );
    assert_eq!(decision["behavior"], "deny");
    assert!(
        decision["message"]
            .as_str()
            .unwrap()
            .contains("fails closed"),
        "{out}"
    );
    assert_eq!(decision.as_object().unwrap().len(), 2, "{out}");
}

#[test]
fn the_fixtures_are_the_events_claude_code_sends() {
    // The fields lev reads, as Claude Code's hooks reference names them.
    for name in ["pre_tool_use.json", "permission_request.json"] {
        let e = event(name);
        for field in [
            "session_id",
            "cwd",
            "permission_mode",
            "hook_event_name",
            "tool_name",
            "tool_input",
            "tool_use_id",
        ] {
            assert!(e.get(field).is_some(), "{name} lacks {field}");
        }
        assert!(e["tool_input"].is_object());
    }
    assert_eq!(
        event("pre_tool_use.json")["hook_event_name"],
        json!("PreToolUse")
    );
}
