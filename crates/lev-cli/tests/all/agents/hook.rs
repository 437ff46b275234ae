//! `lev hook claude-code` fed Claude Code's hook events (the committed
//! fixtures under `tests/fixtures/claude-code/`), printing SPEC section 10's
//! outputs: a person's decision through lev's API, a malformed event (exit 2,
//! the reason on stderr) and an unreachable server.

use std::path::PathBuf;

use lev_protocol::{ApprovalScope, InteractionResponse};
use serde_json::{Value, json};

use super::served::Served;
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

/// A hook run in the background: the event goes in now, the output comes
/// out once someone decides.
struct Pending(std::thread::JoinHandle<Run>);

impl Pending {
    fn start(served: &Served, event: &Value, args: &[&str]) -> Self {
        let url = served.url.clone();
        let token = served.worker.clone();
        let stdin = event.to_string().into_bytes();
        let args: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
        Self(std::thread::spawn(move || {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            hook(&url, &token, &args, &stdin)
        }))
    }

    fn output(self) -> Value {
        let run = self.0.join().unwrap();
        assert_eq!(run.code, 0, "{run:?}");
        run.json()
    }
}

/// The committed event `name` in its own session and with its own call id.
fn event_in(name: &str, session: &str, tool_use_id: &str, input: Value) -> Value {
    let mut e = event(name);
    e["session_id"] = json!(session);
    e["tool_use_id"] = json!(tool_use_id);
    e["tool_input"] = input;
    e
}

/// The tool approval pending in `session`, checked against the event.
fn asked(served: &Served, e: &Value) -> lev_protocol::Interaction {
    let session = e["session_id"].as_str().unwrap();
    let asked = served.pending(session);
    match &asked.request.kind {
        lev_protocol::InteractionKind::ToolApproval {
            tool_name,
            args_json,
            sandbox_mode,
            ..
        } => {
            assert_eq!(tool_name, e["tool_name"].as_str().unwrap());
            assert_eq!(args_json, &e["tool_input"].to_string());
            assert_eq!(sandbox_mode, e["permission_mode"].as_str().unwrap());
        }
        other => panic!("expected a tool approval, found {other:?}"),
    }
    assert_eq!(asked.request.conversation_id.as_deref(), Some(session));
    asked
}

#[test]
fn pre_tool_use_gets_each_decision_as_spec_section_10_shapes_it() {
    let served = Served::start("hook-pre", None);

    // Approve with an edit and injected context.
    let e = event_in(
        "pre_tool_use.json",
        "pre-edit",
        "toolu_edit",
        json!({"command": "rm -rf build"}),
    );
    let run = Pending::start(&served, &e, &[]);
    let a = asked(&served, &e);
    let mut answer = InteractionResponse::approval(a.id(), true, ApprovalScope::Once);
    answer.modified_args_json = Some(r#"{"command":"rm -rf build/tmp"}"#.into());
    answer.injected_context = Some("build/ is shared with the nightly job".into());
    served.respond(&a, &answer);
    assert_eq!(
        run.output(),
        json!({"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "allow",
            "permissionDecisionReason": "approved in lev by pat",
            "updatedInput": {"command": "rm -rf build/tmp"},
            "additionalContext": "build/ is shared with the nightly job"}})
    );

    // Approve as it is.
    let input = json!({"command": "cargo test", "description": "Run the tests"});
    let e = event_in("pre_tool_use.json", "pre-once", "toolu_once", input.clone());
    let run = Pending::start(&served, &e, &[]);
    let a = asked(&served, &e);
    served.respond(
        &a,
        &InteractionResponse::approval(a.id(), true, ApprovalScope::Once),
    );
    assert_eq!(
        run.output(),
        json!({"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "allow",
            "permissionDecisionReason": "approved in lev by pat", "updatedInput": input}})
    );

    // Deny with feedback.
    let e = event_in(
        "pre_tool_use.json",
        "pre-deny",
        "toolu_deny",
        json!({"command": "git push -f"}),
    );
    let run = Pending::start(&served, &e, &[]);
    let a = asked(&served, &e);
    served.respond(
        &a,
        &InteractionResponse::deny_with_feedback(a.id(), "open a PR instead"),
    );
    assert_eq!(
        run.output(),
        json!({"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny",
            "permissionDecisionReason": "The person denied the call to Bash; it was not run.\nFeedback: open a PR instead"}})
    );

    // Approve for the session: the next call in the session is allowed at once.
    let input = json!({"command": "ls"});
    let e = event_in(
        "pre_tool_use.json",
        "pre-session",
        "toolu_s1",
        input.clone(),
    );
    let run = Pending::start(&served, &e, &[]);
    let a = asked(&served, &e);
    served.respond(
        &a,
        &InteractionResponse::approval(a.id(), true, ApprovalScope::Session),
    );
    assert_eq!(
        run.output()["hookSpecificOutput"]["permissionDecision"],
        "allow"
    );
    let e = event_in(
        "pre_tool_use.json",
        "pre-session",
        "toolu_s2",
        json!({"command": "ls -la"}),
    );
    let again = hook(&served.url, &served.worker, &[], e.to_string().as_bytes());
    assert_eq!(again.code, 0, "{again:?}");
    assert_eq!(
        again.json(),
        json!({"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "allow",
            "permissionDecisionReason": "approved in lev by pat", "updatedInput": {"command": "ls -la"}}})
    );
}

#[test]
fn permission_request_gets_each_decision_as_spec_section_10_shapes_it() {
    let served = Served::start("hook-perm", None);

    let input = json!({"command": "cargo publish", "description": "Publish the crate"});
    let e = event_in(
        "permission_request.json",
        "perm-once",
        "toolu_p1",
        input.clone(),
    );
    let run = Pending::start(&served, &e, &[]);
    let a = asked(&served, &e);
    served.respond(
        &a,
        &InteractionResponse::approval(a.id(), true, ApprovalScope::Once),
    );
    assert_eq!(
        run.output(),
        json!({"hookSpecificOutput": {"hookEventName": "PermissionRequest",
            "decision": {"behavior": "allow", "updatedInput": input}}})
    );

    let e = event_in(
        "permission_request.json",
        "perm-edit",
        "toolu_p2",
        json!({"command": "cargo publish"}),
    );
    let run = Pending::start(&served, &e, &[]);
    let a = asked(&served, &e);
    let mut answer = InteractionResponse::approval(a.id(), true, ApprovalScope::Once);
    answer.modified_args_json = Some(r#"{"command":"cargo publish --dry-run"}"#.into());
    served.respond(&a, &answer);
    assert_eq!(
        run.output(),
        json!({"hookSpecificOutput": {"hookEventName": "PermissionRequest",
            "decision": {"behavior": "allow", "updatedInput": {"command": "cargo publish --dry-run"}}}})
    );

    let e = event_in(
        "permission_request.json",
        "perm-deny",
        "toolu_p3",
        json!({"command": "cargo yank"}),
    );
    let run = Pending::start(&served, &e, &[]);
    let a = asked(&served, &e);
    served.respond(
        &a,
        &InteractionResponse::deny_with_feedback(a.id(), "never yank"),
    );
    assert_eq!(
        run.output(),
        json!({"hookSpecificOutput": {"hookEventName": "PermissionRequest",
            "decision": {"behavior": "deny", "message": "The person denied the call to Bash; it was not run.\nFeedback: never yank"}}})
    );

    let e = event_in(
        "permission_request.json",
        "perm-session",
        "toolu_p4",
        json!({"command": "cargo fmt"}),
    );
    let run = Pending::start(&served, &e, &[]);
    let a = asked(&served, &e);
    served.respond(
        &a,
        &InteractionResponse::approval(a.id(), true, ApprovalScope::Session),
    );
    assert_eq!(
        run.output()["hookSpecificOutput"]["decision"]["behavior"],
        "allow"
    );
    let e = event_in(
        "permission_request.json",
        "perm-session",
        "toolu_p5",
        json!({"command": "cargo fmt --check"}),
    );
    let again = hook(&served.url, &served.worker, &[], e.to_string().as_bytes());
    assert_eq!(
        again.json(),
        json!({"hookSpecificOutput": {"hookEventName": "PermissionRequest",
            "decision": {"behavior": "allow", "updatedInput": {"command": "cargo fmt --check"}}}})
    );

    // Nobody decides within --timeout: a deny that says so.
    let e = event_in(
        "permission_request.json",
        "perm-late",
        "toolu_p6",
        json!({"command": "make"}),
    );
    let late = hook(
        &served.url,
        &served.worker,
        &["--timeout", "1"],
        e.to_string().as_bytes(),
    );
    let out = late.json();
    assert_eq!(
        out["hookSpecificOutput"]["decision"]["behavior"], "deny",
        "{out}"
    );
    // The server's own expiry (a plain deny) or this side's deadline.
    let message = out["hookSpecificOutput"]["decision"]["message"]
        .as_str()
        .unwrap();
    assert!(
        message == "The call to Bash was denied: nobody approved it in time. It was not run."
            || message.starts_with("Nobody decided on the call to Bash within"),
        "{out}"
    );
}

/// `lev hook --key` pins the keys a decision must be signed with: an allow
/// signed by the server's own key is refused when another key is pinned
/// (a deny that says why), accepted when the server's key is.
#[test]
fn pinned_keys_refuse_a_decision_signed_by_any_other_key() {
    let served = Served::start(
        "hook-pinned",
        Some("[[rule]]\ntool = \"Bash\"\ndecision = \"allow\"\n"),
    );
    let scratch = crate::support::Scratch::new("hook-pinned-keys");
    let other = scratch.path("other.key");
    let made = crate::support::lev(["keys", "generate", "--out", other.to_str().unwrap()]);
    assert_eq!(made.code, 0, "{made:?}");
    let e = event_in(
        "pre_tool_use.json",
        "pinned",
        "toolu_pinned_1",
        json!({"command": "ls"}),
    );
    let run = hook(
        &served.url,
        &served.worker,
        &["--key", other.to_str().unwrap()],
        e.to_string().as_bytes(),
    );
    assert_eq!(run.code, 0, "{run:?}");
    let out = run.json();
    assert_eq!(
        out["hookSpecificOutput"]["permissionDecision"], "deny",
        "{out}"
    );
    // The server's own keys, pinned: allowed.
    let jwks = scratch.write(
        "server.jwks",
        crate::support::lev(["keys", "--json", "--url", &served.url]).stdout,
    );
    let e = event_in(
        "pre_tool_use.json",
        "pinned",
        "toolu_pinned_2",
        json!({"command": "ls"}),
    );
    let run = hook(
        &served.url,
        &served.worker,
        &["--key", jwks.to_str().unwrap()],
        e.to_string().as_bytes(),
    );
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(
        run.json()["hookSpecificOutput"]["permissionDecision"],
        "allow",
        "{run:?}"
    );
    // A pin that cannot be read is a blocking error, not the server's keys.
    let run = hook(
        &served.url,
        &served.worker,
        &["--key", "/nonexistent/keys.json"],
        e.to_string().as_bytes(),
    );
    assert_eq!(run.code, 2, "{run:?}");
}
