//! Claude Code's contracts (SPEC section 10), byte for byte: what each lev
//! decision prints for PreToolUse, PermissionRequest and `approval_prompt`,
//! and which hook events are refused and why.

// The helpers below are test code too: a value that does not serialise has failed the test.
#![allow(clippy::unwrap_used)]

use lev_protocol::claude_code::{
    Decision, HookEvent, HookEventError, HookEventName, PermissionPromptResult, Verdict,
    hook_output,
};
use serde_json::{Value, json};

fn input() -> Value {
    json!({"command": "rm -rf build", "description": "clean"})
}

fn allowed(edit: Option<&str>, context: Option<&str>, session: bool) -> Verdict {
    Decision::Allowed {
        approver: "alice".into(),
        modified_args_json: edit.map(str::to_owned),
        injected_context: context.map(str::to_owned),
        remember_for_session: session,
    }
    .verdict("Bash", &input())
}

fn pre(verdict: &Verdict) -> Value {
    serde_json::to_value(hook_output(HookEventName::PreToolUse, verdict)).unwrap()
}

fn perm(verdict: &Verdict) -> Value {
    serde_json::to_value(hook_output(HookEventName::PermissionRequest, verdict)).unwrap()
}

fn prompt(verdict: &Verdict) -> Value {
    serde_json::from_str(&PermissionPromptResult::from_verdict("Bash", verdict).to_json_text())
        .unwrap()
}

#[test]
fn an_approval_keeps_the_input_and_names_the_approver() {
    let v = allowed(None, None, false);
    assert_eq!(
        pre(&v),
        json!({"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "allow",
            "permissionDecisionReason": "approved in lev by alice", "updatedInput": input()}})
    );
    assert_eq!(
        perm(&v),
        json!({"hookSpecificOutput": {"hookEventName": "PermissionRequest",
            "decision": {"behavior": "allow", "updatedInput": input()}}})
    );
    assert_eq!(
        prompt(&v),
        json!({"behavior": "allow", "updatedInput": input()})
    );
}

#[test]
fn an_edit_becomes_the_updated_input_and_context_the_additional_context() {
    let v = allowed(
        Some(r#"{"command":"rm -rf build/tmp"}"#),
        Some("the build dir is shared"),
        false,
    );
    let edited = json!({"command": "rm -rf build/tmp"});
    assert_eq!(
        pre(&v),
        json!({"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "allow",
            "permissionDecisionReason": "approved in lev by alice", "updatedInput": edited,
            "additionalContext": "the build dir is shared"}})
    );
    assert_eq!(
        perm(&v)["hookSpecificOutput"]["decision"],
        json!({"behavior": "allow", "updatedInput": edited})
    );
    // The permission-prompt contract has no field for context.
    assert_eq!(
        prompt(&v),
        json!({"behavior": "allow", "updatedInput": edited})
    );
}

#[test]
fn a_session_grant_adds_a_session_rule_for_the_tool() {
    let v = allowed(None, None, true);
    assert_eq!(
        prompt(&v),
        json!({"behavior": "allow", "updatedInput": input(), "updatedPermissions": [
            {"type": "addRules", "rules": [{"toolName": "Bash"}], "behavior": "allow",
             "destination": "session"}]})
    );
    // Hooks have no such field: lev's own grant answers the next call at once.
    assert_eq!(pre(&v), pre(&allowed(None, None, false)));
}

#[test]
fn a_policy_allow_says_so() {
    let v = Decision::Allowed {
        approver: "policy".into(),
        modified_args_json: None,
        injected_context: Some("  ".into()),
        remember_for_session: false,
    }
    .verdict("Bash", &input());
    assert_eq!(
        pre(&v)["hookSpecificOutput"]["permissionDecisionReason"],
        "allowed by lev's policy"
    );
    assert!(
        pre(&v)["hookSpecificOutput"]
            .get("additionalContext")
            .is_none()
    );
}

#[test]
fn a_deny_carries_the_feedback_after_a_label_and_never_an_empty_one() {
    let with = Decision::DeniedByPerson {
        feedback: Some("  use `cargo clean`  ".into()),
    }
    .verdict("Bash", &input());
    let message =
        "The person denied the call to Bash; it was not run.\nFeedback: use `cargo clean`";
    assert_eq!(
        pre(&with),
        json!({"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny",
            "permissionDecisionReason": message}})
    );
    assert_eq!(
        perm(&with),
        json!({"hookSpecificOutput": {"hookEventName": "PermissionRequest",
            "decision": {"behavior": "deny", "message": message}}})
    );
    assert_eq!(
        prompt(&with),
        json!({"behavior": "deny", "message": message})
    );

    for feedback in [None, Some(" \n ".to_owned())] {
        let plain = Decision::DeniedByPerson { feedback }.verdict("Bash", &input());
        assert_eq!(
            prompt(&plain),
            json!({"behavior": "deny", "message": "The person denied the call to Bash; it was not run."})
        );
    }
}

#[test]
fn timeouts_expiries_cancels_and_rules_are_denies_that_say_so() {
    let cases = [
        (
            Decision::TimedOut { waited_s: 600 },
            "Nobody decided on the call to Bash within 600 s; it was not run.",
        ),
        (
            Decision::Expired,
            "The call to Bash was denied: nobody approved it in time. It was not run.",
        ),
        (
            Decision::Cancelled,
            "The approval request for Bash was cancelled before anyone decided; the call was not run.",
        ),
        (
            Decision::DeniedByPolicy {
                reason: "destructive commands are never run by agents".into(),
            },
            "lev's policy denies the call to Bash: destructive commands are never run by agents. It was not run.",
        ),
    ];
    for (decision, message) in cases {
        let v = decision.verdict("Bash", &input());
        assert_eq!(prompt(&v), json!({"behavior": "deny", "message": message}));
        assert_eq!(pre(&v)["hookSpecificOutput"]["permissionDecision"], "deny");
    }
}

#[test]
fn an_edit_that_is_not_an_object_is_a_deny_never_the_original_args() {
    for edit in ["[1,2]", "not json"] {
        let v = allowed(Some(edit), None, false);
        assert!(matches!(v, Verdict::Deny { .. }), "{edit}: {v:?}");
    }
}

#[test]
fn an_undecided_call_asks_in_pre_tool_use_and_prints_nothing_for_permission_request() {
    let v = Verdict::Defer {
        reason: "lev is unreachable".into(),
    };
    assert_eq!(
        pre(&v),
        json!({"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "ask",
            "permissionDecisionReason": "lev is unreachable"}})
    );
    assert_eq!(hook_output(HookEventName::PermissionRequest, &v), None);
    assert_eq!(
        prompt(&v),
        json!({"behavior": "deny", "message": "lev is unreachable"})
    );
}

#[test]
fn hook_events_parse_and_give_compact_args() {
    let event = HookEvent::parse(
        br#"{"session_id":"abc-123","transcript_path":"/t.jsonl","cwd":"/w",
            "permission_mode":"acceptEdits","hook_event_name":"PermissionRequest",
            "tool_name":"Bash","tool_input":{"command":"ls -la", "timeout": 5},
            "tool_use_id":"toolu_01","permission_suggestions":[]}"#,
    )
    .unwrap();
    assert_eq!(event.hook_event_name, HookEventName::PermissionRequest);
    assert_eq!(event.permission_mode.as_deref(), Some("acceptEdits"));
    assert_eq!(event.tool_use_id.as_deref(), Some("toolu_01"));
    assert_eq!(event.args_json(), r#"{"command":"ls -la","timeout":5}"#);
}

#[test]
fn bad_hook_events_say_what_is_wrong() {
    let cases: [(&[u8], &str); 6] = [
        (b"not json", "malformed hook event: expected one JSON object"),
        (b"[1]", "malformed hook event: expected one JSON object, found an array"),
        (b"{}", "expected a string `hook_event_name`, found none"),
        (
            br#"{"hook_event_name":"PostToolUse"}"#,
            "unsupported hook event \"PostToolUse\"",
        ),
        (
            br#"{"hook_event_name":"PreToolUse","session_id":"s","tool_input":{}}"#,
            "malformed PreToolUse event: missing field `tool_name`",
        ),
        (
            br#"{"hook_event_name":"PreToolUse","session_id":"s","tool_name":"Bash","tool_input":"ls"}"#,
            "malformed PreToolUse event: invalid type: string \"ls\", expected a map",
        ),
    ];
    for (bytes, expected) in cases {
        let err = HookEvent::parse(bytes).unwrap_err();
        assert!(
            err.to_string().contains(expected),
            "{}: {err}",
            String::from_utf8_lossy(bytes)
        );
    }
    assert!(matches!(
        HookEvent::parse(br#"{"hook_event_name":"Stop"}"#),
        Err(HookEventError::Unsupported(_))
    ));
}
