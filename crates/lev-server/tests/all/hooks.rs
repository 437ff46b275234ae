//! `POST /v1/hooks/claude-code`: Claude Code's `http` hook type, the same
//! events and outputs as `lev hook claude-code` (SPEC section 10), the gate's
//! decisions behind them, and the refusals of what it cannot answer.

use std::sync::Arc;
use std::time::Duration;

use lev_approval::policy::Policy;
use lev_server::Settings;
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::support::{TestServer, code};

/// A Claude Code event of `kind` in `session`, for call `tool_use_id`.
fn event(kind: &str, session: &str, tool_use_id: &str, input: Value) -> Value {
    json!({
        "session_id": session,
        "transcript_path": "/home/dev/.claude/projects/x/t.jsonl",
        "cwd": "/srv/app",
        "permission_mode": "acceptEdits",
        "hook_event_name": kind,
        "tool_name": "Bash",
        "tool_input": input,
        "tool_use_id": tool_use_id,
    })
}

/// Post `event` and, when the gate asks, answer the pending approval of
/// `session` with `answer` as the approver.
async fn decided(
    s: &TestServer,
    worker: &str,
    approver: &str,
    event: &Value,
    answer: Value,
) -> (StatusCode, Value) {
    let session = event["session_id"].as_str().unwrap().to_owned();
    let posting = {
        let http = s.http.clone();
        let url = s.path("/v1/hooks/claude-code?timeout_s=30");
        let worker = worker.to_owned();
        let body = event.clone();
        tokio::spawn(async move {
            let resp = http
                .post(url)
                .bearer_auth(worker)
                .json(&body)
                .send()
                .await
                .unwrap();
            let status = resp.status();
            (status, resp.json::<Value>().await.unwrap_or(Value::Null))
        })
    };
    let id = loop {
        let (_, page) = s
            .get(&format!("/v1/interactions?session_id={session}"), approver)
            .await;
        if let Some(item) = page["items"].as_array().and_then(|a| a.first()) {
            let request = &item["request"];
            assert_eq!(request["kind"]["type"], "tool_approval");
            assert_eq!(request["kind"]["tool_name"], "Bash");
            assert_eq!(request["kind"]["sandbox_mode"], "acceptEdits");
            assert_eq!(
                request["kind"]["args_json"],
                event["tool_input"].to_string()
            );
            assert_eq!(request["conversation_id"], session.as_str());
            break request["id"].as_str().unwrap().to_owned();
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let mut answer = answer;
    answer["request_id"] = json!(id);
    let (status, v) = s.respond(approver, &id, &answer).await;
    assert_eq!(status, StatusCode::OK, "{v}");
    posting.await.unwrap()
}

#[tokio::test]
async fn pre_tool_use_gets_each_decision_of_a_person() {
    let s = TestServer::start().await;
    let (worker, approver) = s.worker_and_approver().await;

    let e = event(
        "PreToolUse",
        "h-edit",
        "toolu_1",
        json!({"command": "rm -rf build"}),
    );
    let answer = json!({"approved": true, "scope": "once",
        "modified_args_json": "{\"command\":\"rm -rf build/tmp\"}",
        "injected_context": "build/ is shared"});
    assert_eq!(
        decided(&s, &worker, &approver, &e, answer).await,
        (
            StatusCode::OK,
            json!({"hookSpecificOutput": {"hookEventName": "PreToolUse",
                "permissionDecision": "allow",
                "permissionDecisionReason": "approved in lev by alice-approver",
                "updatedInput": {"command": "rm -rf build/tmp"},
                "additionalContext": "build/ is shared"}})
        )
    );

    let e = event(
        "PreToolUse",
        "h-deny",
        "toolu_2",
        json!({"command": "git push -f"}),
    );
    let answer = json!({"approved": false, "feedback": "open a PR"});
    assert_eq!(
        decided(&s, &worker, &approver, &e, answer).await,
        (
            StatusCode::OK,
            json!({"hookSpecificOutput": {"hookEventName": "PreToolUse",
                "permissionDecision": "deny",
                "permissionDecisionReason": "The person denied the call to Bash; it was not run.\nFeedback: open a PR"}})
        )
    );
}

#[tokio::test]
async fn permission_request_gets_each_decision_and_a_session_grant_answers_the_next_call() {
    let s = TestServer::start().await;
    let (worker, approver) = s.worker_and_approver().await;

    let input = json!({"command": "cargo publish"});
    let e = event("PermissionRequest", "h-perm", "toolu_3", input.clone());
    let answer = json!({"approved": true, "scope": "session"});
    assert_eq!(
        decided(&s, &worker, &approver, &e, answer).await,
        (
            StatusCode::OK,
            json!({"hookSpecificOutput": {"hookEventName": "PermissionRequest",
                "decision": {"behavior": "allow", "updatedInput": input}}})
        )
    );
    // The grant decides the next call at once.
    let e = event(
        "PermissionRequest",
        "h-perm",
        "toolu_4",
        json!({"command": "cargo yank"}),
    );
    let (status, v) = s.post("/v1/hooks/claude-code", &worker, &e).await;
    assert_eq!(status, StatusCode::OK, "{v}");
    assert_eq!(
        v,
        json!({"hookSpecificOutput": {"hookEventName": "PermissionRequest",
            "decision": {"behavior": "allow", "updatedInput": {"command": "cargo yank"}}}})
    );

    let e = event(
        "PermissionRequest",
        "h-perm-deny",
        "toolu_5",
        json!({"command": "make"}),
    );
    let answer = json!({"approved": false});
    assert_eq!(
        decided(&s, &worker, &approver, &e, answer).await.1,
        json!({"hookSpecificOutput": {"hookEventName": "PermissionRequest",
            "decision": {"behavior": "deny", "message": "The person denied the call to Bash; it was not run."}}})
    );
}

#[tokio::test]
async fn policy_rules_answer_at_once_and_nobody_deciding_is_a_deny_that_says_so() {
    let policy = r#"
[[rule]]
tool = "Bash"
args = { "/command" = "^rm -rf /$" }
decision = "deny"
reason = "nothing deletes the root"

[[rule]]
tool = "Read"
decision = "allow"

[[rule]]
tool = "*"
decision = "ask"
"#;
    let s = TestServer::start_with(Settings {
        policy: Arc::new(Policy::parse(policy).unwrap()),
        policy_source: "hooks-policy.toml".into(),
        ..Settings::default()
    })
    .await;
    let worker = s.token("agent", "worker", None).await;

    let e = event(
        "PreToolUse",
        "h-rule",
        "toolu_6",
        json!({"command": "rm -rf /"}),
    );
    let (status, v) = s.post("/v1/hooks/claude-code", &worker, &e).await;
    assert_eq!(status, StatusCode::OK, "{v}");
    assert_eq!(
        v,
        json!({"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny",
            "permissionDecisionReason": "lev's policy denies the call to Bash: nothing deletes the root. It was not run."}})
    );

    let mut e = event(
        "PreToolUse",
        "h-rule",
        "toolu_7",
        json!({"file_path": "/srv/app/a.rs"}),
    );
    e["tool_name"] = json!("Read");
    let (_, v) = s.post("/v1/hooks/claude-code", &worker, &e).await;
    assert_eq!(
        v,
        json!({"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "allow",
            "permissionDecisionReason": "allowed by lev's policy",
            "updatedInput": {"file_path": "/srv/app/a.rs"}}})
    );

    let e = event(
        "PermissionRequest",
        "h-late",
        "toolu_8",
        json!({"command": "make"}),
    );
    let (status, v) = s
        .post("/v1/hooks/claude-code?timeout_s=1", &worker, &e)
        .await;
    assert_eq!(status, StatusCode::OK, "{v}");
    let decision = &v["hookSpecificOutput"]["decision"];
    assert_eq!(decision["behavior"], "deny", "{v}");
    let message = decision["message"].as_str().unwrap();
    assert!(
        message.contains("in time") || message.contains("within 1 s"),
        "{message}"
    );
}

#[tokio::test]
async fn what_it_cannot_answer_is_refused_with_lev_s_error_body() {
    let s = TestServer::start().await;
    let (worker, approver) = s.worker_and_approver().await;
    let e = event("PreToolUse", "h-bad", "toolu_9", json!({"command": "ls"}));

    let (status, v) = s.post("/v1/hooks/claude-code", &approver, &e).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{v}");
    let (status, _) = s.post("/v1/hooks/claude-code", "", &e).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);

    let resp = s
        .req(reqwest::Method::POST, "/v1/hooks/claude-code", &worker)
        .header("content-type", "application/json")
        .body("{\"hook_event_name\": ")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::BAD_REQUEST);
    let v: Value = resp.json().await.unwrap();
    assert_eq!(code(&v), "malformed", "{v}");

    let mut post = e.clone();
    post["hook_event_name"] = json!("PostToolUse");
    let (status, v) = s.post("/v1/hooks/claude-code", &worker, &post).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("unsupported hook event"),
        "{v}"
    );

    let mut no_input = e.clone();
    no_input.as_object_mut().unwrap().remove("tool_input");
    let (status, v) = s.post("/v1/hooks/claude-code", &worker, &no_input).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("tool_input"),
        "{v}"
    );

    let (status, v) = s
        .post("/v1/hooks/claude-code?timeout_s=0", &worker, &e)
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{v}");

    // A session id Claude Code never sends (not an identifier): the gate's 422.
    let mut bad_session = e.clone();
    bad_session["session_id"] = json!("has spaces");
    let (status, v) = s.post("/v1/hooks/claude-code", &worker, &bad_session).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{v}");
}
