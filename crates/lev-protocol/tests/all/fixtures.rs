//! Committed fixtures: each parses into the value built here, and
//! re-serialising then re-parsing gives that value again.
//!
//! The fixtures are hand-written, never generated. A released fixture is what
//! some client wrote once; it must keep parsing, with the same meaning, forever.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Debug;
use std::path::{Path, PathBuf};

use lev_protocol::api::{
    AuditEntry, AuditHead, AuditPage, ErrorBody, ErrorDetail, GateRequest, GateResponse, Grant,
    Page, Role, Task, TaskStatus, TokenCreate,
};
use lev_protocol::{
    ApprovalScope, ClientMsg, Envelope, EnvelopeSignature, InboundPart, Interaction,
    InteractionKind, InteractionRequest, InteractionResponse, InteractionStatus, OnTimeout, Point,
    ServerMsg, StoredPart, StoredResponse, WorkerResult,
};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::json;
use time::macros::datetime;

/// Said by every failing fixture test.
const NOTE: &str = "\
NOTE: the fixtures under crates/lev-protocol/tests/fixtures/ are hand-written; no \
command regenerates them. A released fixture must never be edited: it stands for \
what an older client wrote, and it must keep parsing with the same meaning forever. \
Fix the code, not the fixture; a new shape gets a new fixture file.";

fn s(v: &str) -> String {
    v.to_owned()
}

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|x| s(x)).collect()
}

fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

/// Parse `dir/name.json` as `T`, compare it with `expected`, then round-trip it.
fn check<T>(dir: &str, name: &str, expected: &T) -> Result<(), String>
where
    T: Serialize + DeserializeOwned + PartialEq + Debug,
{
    let file = format!("{dir}/{name}.json");
    let text = std::fs::read_to_string(fixtures_dir().join(&file))
        .map_err(|e| format!("{file}: cannot read it: {e}"))?;
    let parsed: T =
        serde_json::from_str(&text).map_err(|e| format!("{file}: does not parse: {e}"))?;
    if parsed != *expected {
        return Err(format!(
            "{file}: parses into\n{parsed:#?}\nbut the expected value is\n{expected:#?}"
        ));
    }
    let again = serde_json::to_string(&parsed)
        .map_err(|e| format!("{file}: does not serialise again: {e}"))?;
    let reparsed: T = serde_json::from_str(&again)
        .map_err(|e| format!("{file}: its re-serialised form {again} does not parse: {e}"))?;
    if reparsed != parsed {
        return Err(format!(
            "{file}: the round trip changed it: re-serialised as {again}, re-parsed as\n{reparsed:#?}"
        ));
    }
    Ok(())
}

/// Check every case of one fixture directory; report all failures at once.
fn run<T>(dir: &str, cases: &[(&str, T)])
where
    T: Serialize + DeserializeOwned + PartialEq + Debug,
{
    let failures: Vec<String> = cases
        .iter()
        .filter_map(|(name, expected)| check(dir, name, expected).err())
        .collect();
    assert!(
        failures.is_empty(),
        "{} fixture(s) failed:\n\n{}\n\n{NOTE}",
        failures.len(),
        failures.join("\n\n")
    );
}

/// Read a fixture as `T` (for the tests that look at a parsed value's meaning).
fn load<T: DeserializeOwned>(dir: &str, name: &str) -> T {
    let file = format!("{dir}/{name}.json");
    let text = std::fs::read_to_string(fixtures_dir().join(&file))
        .unwrap_or_else(|e| panic!("{file}: cannot read it: {e}\n\n{NOTE}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{file}: does not parse: {e}\n\n{NOTE}"))
}

// ---------------------------------------------------------------- cases

fn interaction_request_cases() -> Vec<(&'static str, InteractionRequest)> {
    let free_text = InteractionKind::FreeText {
        prompt: s("Which branch should I deploy?"),
    };
    let databases = InteractionKind::MultipleChoice {
        prompt: s("Which database?"),
        options: strings(&["sqlite", "postgres"]),
    };
    let review = |points: &[(&str, &str)]| InteractionKind::InteractionPoints {
        prompt: s("Review these before I continue"),
        points: points
            .iter()
            .map(|(id, text)| Point {
                id: s(id),
                text: s(text),
            })
            .collect(),
    };
    vec![
        (
            "free_text_minimal",
            InteractionRequest::new("s-1", free_text.clone()),
        ),
        (
            "free_text_full",
            InteractionRequest {
                id: Some(s("ir_01JABCDEF")),
                conversation_id: Some(s("c-1")),
                turn_id: Some(s("t-7")),
                caller: Some(s("alice")),
                title: Some(s("Deploy target")),
                timeout_s: Some(600),
                on_timeout: Some(OnTimeout::Cancel),
                route: Some(strings(&["operator", "human"])),
                metadata: Some(json!({
                    "ticket": "OPS-42", "attempt": 2, "tags": ["deploy", "prod"],
                    "dry_run": false, "note": null
                })),
                ..InteractionRequest::new("s-1", free_text)
            },
        ),
        (
            "free_text_unknown_fields",
            InteractionRequest::new(
                "s-1",
                InteractionKind::FreeText {
                    prompt: s("Still there?"),
                },
            ),
        ),
        (
            "multiple_choice_minimal",
            InteractionRequest::new("s-1", databases),
        ),
        (
            "multiple_choice_full",
            InteractionRequest {
                id: Some(s("ir_mc_1")),
                conversation_id: Some(s("c-1")),
                turn_id: Some(s("t-8")),
                caller: Some(s("alice")),
                title: Some(s("Pick a database")),
                timeout_s: Some(120),
                on_timeout: Some(OnTimeout::Choice(1)),
                route: Some(strings(&["human"])),
                metadata: Some(json!({"source": "planner"})),
                ..InteractionRequest::new(
                    "s-1",
                    InteractionKind::MultipleChoice {
                        prompt: s("Which database?"),
                        options: strings(&["sqlite", "postgres", "both"]),
                    },
                )
            },
        ),
        (
            "tool_approval_minimal",
            InteractionRequest::new(
                "s-1",
                InteractionKind::ToolApproval {
                    tool_name: s("shell"),
                    args_json: s(r#"{"cmd":"ls -la"}"#),
                    missing_capabilities: vec![],
                    sandbox_mode: s(""),
                    options: vec![],
                },
            ),
        ),
        (
            "tool_approval_full",
            InteractionRequest {
                id: Some(s("ir_ta_1")),
                conversation_id: Some(s("c-1")),
                turn_id: Some(s("t-9")),
                caller: Some(s("alice")),
                title: Some(s("Run a shell command")),
                timeout_s: Some(300),
                on_timeout: Some(OnTimeout::Deny),
                route: Some(strings(&["operator", "human"])),
                metadata: Some(json!({"model": "m-1"})),
                ..InteractionRequest::new(
                    "s-1",
                    InteractionKind::ToolApproval {
                        tool_name: s("shell"),
                        // The exact text, spacing and key order included.
                        args_json: s(r#"{ "cmd" : "curl https://example.com",  "cwd": "/tmp" }"#),
                        missing_capabilities: strings(&["net", "fs-write"]),
                        sandbox_mode: s("workspace-write"),
                        options: strings(&["run it", "run it offline"]),
                    },
                )
            },
        ),
        (
            "interaction_points_minimal",
            InteractionRequest::new("s-1", review(&[("p1", "The migration drops a column")])),
        ),
        (
            "interaction_points_full",
            InteractionRequest {
                id: Some(s("ir_ip_1")),
                conversation_id: Some(s("c-1")),
                turn_id: Some(s("t-10")),
                caller: Some(s("bob")),
                title: Some(s("Review the plan")),
                timeout_s: Some(3600),
                on_timeout: Some(OnTimeout::Cancel),
                route: Some(strings(&["human"])),
                metadata: Some(json!({})),
                ..InteractionRequest::new(
                    "s-1",
                    review(&[
                        ("p1", "The migration drops a column"),
                        ("p2", "Downtime: about 2 minutes"),
                    ]),
                )
            },
        ),
        ("form", form_request()),
    ]
}

/// `interaction_request/form.json`: every type and constraint of the subset,
/// the properties in the order written.
fn form_request() -> InteractionRequest {
    use lev_protocol::form::{FormProperties, FormSchema};
    let props = vec![
        (
            s("version"),
            json!({"type": "string", "title": "Version", "minLength": 5, "maxLength": 20}),
        ),
        (
            s("owner"),
            json!({"type": "string", "format": "email", "description": "Who answers for it"}),
        ),
        (s("date"), json!({"type": "string", "format": "date"})),
        (s("at"), json!({"type": "string", "format": "date-time"})),
        (s("notes"), json!({"type": "string", "format": "uri"})),
        (
            s("replicas"),
            json!({"type": "integer", "minimum": 1, "maximum": 9, "default": 3}),
        ),
        (
            s("ratio"),
            json!({"type": "number", "minimum": 0, "maximum": 1}),
        ),
        (s("canary"), json!({"type": "boolean", "default": true})),
        (
            s("channel"),
            json!({"type": "string", "enum": ["stable", "beta"], "enumNames": ["Stable", "Beta"], "default": "stable"}),
        ),
    ];
    let mut other = BTreeMap::new();
    for (k, v) in [
        (
            "$schema",
            json!("https://json-schema.org/draft/2020-12/schema"),
        ),
        ("type", json!("object")),
        ("title", json!("Release")),
        ("required", json!(["version", "owner"])),
        ("additionalProperties", json!(false)),
    ] {
        other.insert(s(k), v);
    }
    InteractionRequest {
        id: Some(s("ir_01JFORM")),
        title: Some(s("Release details")),
        ..InteractionRequest::new(
            "s-1",
            InteractionKind::Form {
                prompt: s("Fill in the release details"),
                schema: FormSchema {
                    properties: FormProperties(props),
                    other,
                },
            },
        )
    }
}

fn interaction_cases() -> Vec<(&'static str, Interaction)> {
    let stored = |id: &str, request: InteractionRequest, status| Interaction {
        request: InteractionRequest {
            id: Some(s(id)),
            ..request
        },
        status,
        created_at: datetime!(2025-03-01 10:00:00 UTC),
        expires_at: None,
        answered_at: None,
        answered_by: None,
        votes: Vec::new(),
    };
    vec![
        ("pending", {
            let request = InteractionRequest {
                timeout_s: Some(600),
                ..InteractionRequest::new(
                    "s-1",
                    InteractionKind::FreeText {
                        prompt: s("Which branch should I deploy?"),
                    },
                )
            };
            Interaction {
                expires_at: Some(datetime!(2025-03-01 10:10:00 UTC)),
                ..stored("ir_01JPENDING", request, InteractionStatus::Pending)
            }
        }),
        ("answered", {
            let request = InteractionRequest {
                conversation_id: Some(s("c-1")),
                on_timeout: Some(OnTimeout::Choice(0)),
                ..InteractionRequest::new(
                    "s-1",
                    InteractionKind::MultipleChoice {
                        prompt: s("Which database?"),
                        options: strings(&["sqlite", "postgres"]),
                    },
                )
            };
            Interaction {
                created_at: datetime!(2025-03-01 10:00:00.25 UTC),
                answered_at: Some(datetime!(2025-03-01 12:05:30 +02:00)),
                answered_by: Some(s("alice")),
                ..stored("ir_01JANSWERED", request, InteractionStatus::Answered)
            }
        }),
        ("expired", {
            let request = InteractionRequest {
                timeout_s: Some(60),
                ..InteractionRequest::new(
                    "s-1",
                    InteractionKind::ToolApproval {
                        tool_name: s("shell"),
                        args_json: s(r#"{"cmd":"rm -rf build"}"#),
                        missing_capabilities: vec![],
                        sandbox_mode: s("read-only"),
                        options: vec![],
                    },
                )
            };
            Interaction {
                expires_at: Some(datetime!(2025-03-01 10:01:00 UTC)),
                ..stored("ir_01JEXPIRED", request, InteractionStatus::Expired)
            }
        }),
        ("cancelled", {
            let request = InteractionRequest {
                route: Some(strings(&["operator", "human"])),
                ..InteractionRequest::new(
                    "s-2",
                    InteractionKind::InteractionPoints {
                        prompt: s("Review"),
                        points: vec![Point {
                            id: s("p1"),
                            text: s("one"),
                        }],
                    },
                )
            };
            stored("ir_01JCANCELLED", request, InteractionStatus::Cancelled)
        }),
    ]
}

fn interaction_response_cases() -> Vec<(&'static str, InteractionResponse)> {
    type R = InteractionResponse;
    vec![
        ("text", R::text("ir_1", "deploy main")),
        (
            "text_with_parts",
            R::text("ir_1", "see the attached notes").with_parts(vec![
                InboundPart {
                    name: s("notes.md"),
                    media_type: s("text/markdown"),
                    data: s("IyBOb3RlcwoKLSBvbmUK"),
                },
                InboundPart {
                    name: s("shot.png"),
                    media_type: s("image/png"),
                    data: s("iVBORw0KGgo="),
                },
            ]),
        ),
        ("choice", R::choice("ir_1", 1)),
        (
            "approval_once",
            R::approval("ir_1", true, ApprovalScope::Once),
        ),
        (
            "approval_session",
            R::approval("ir_1", true, ApprovalScope::Session),
        ),
        (
            "approval_always",
            R::approval("ir_1", true, ApprovalScope::Always),
        ),
        ("deny", R::approval("ir_1", false, ApprovalScope::Once)),
        (
            "deny_with_feedback",
            R::deny_with_feedback("ir_1", "use ripgrep instead of find"),
        ),
        (
            "approval_edited",
            R {
                choice_index: Some(0),
                modified_args_json: Some(s(r#"{"cmd":"ls -la /tmp"}"#)),
                injected_context: Some(s("The user narrowed the listing to /tmp.")),
                reason: Some(s("only /tmp is safe to list")),
                grant_args: Some(BTreeMap::from([
                    (s("/cmd"), s("^ls( -la)? /tmp$")),
                    (s("/cwd"), s("^/tmp(/.*)?$")),
                ])),
                ..R::approval("ir_1", true, ApprovalScope::Session)
            },
        ),
        (
            "grant_with_stray_feedback",
            R {
                feedback: Some(s("a client bug: feedback beside a grant")),
                ..R::approval("ir_1", true, ApprovalScope::Once)
            },
        ),
        (
            // As the seed's struct wrote it: every field, nulls included. The
            // wire keeps the feedback as sent; trimming is the reader's.
            "seed_deny_with_feedback",
            R {
                feedback: Some(s("  try the staging host first  ")),
                ..R::approval("ir_1", false, ApprovalScope::Once)
            },
        ),
        ("legacy_text", R::text("ir_1", "deploy main")),
        ("legacy_choice", R::choice("ir_1", 2)),
        (
            "legacy_approval",
            R::approval("ir_1", true, ApprovalScope::Session),
        ),
        (
            "legacy_deny",
            R::approval("ir_1", false, ApprovalScope::Once),
        ),
        (
            "legacy_deny_without_scope",
            R {
                scope: None,
                ..R::approval("ir_1", false, ApprovalScope::Once)
            },
        ),
        (
            "form",
            R::form(
                "ir_01JFORM",
                json!({"version": "1.4.0", "owner": "ops@example.org", "replicas": 5,
                    "ratio": 0.25, "canary": false, "channel": "beta"})
                .as_object()
                .cloned()
                .unwrap_or_default(),
            ),
        ),
    ]
}

fn client_msg_cases() -> Vec<(&'static str, ClientMsg)> {
    vec![
        (
            "answer",
            ClientMsg::Answer {
                req_id: s("q-1"),
                value: json!({"text": "use postgres", "confidence": 0.75}),
            },
        ),
        (
            "answer_escalate",
            ClientMsg::Answer {
                req_id: s("q-2"),
                value: json!({"escalate": "needs a person: production data"}),
            },
        ),
        (
            "hook_ack_ok",
            ClientMsg::HookAck {
                req_id: s("h-1"),
                ok: true,
                reason: None,
            },
        ),
        (
            "hook_ack_rejected",
            ClientMsg::HookAck {
                req_id: s("h-2"),
                ok: false,
                reason: Some(s("too many sub-agents running")),
            },
        ),
        (
            "spawn_ack",
            ClientMsg::SpawnAck {
                req_id: s("sp-1"),
                value: json!({"summary": "tests pass", "files": 3}),
                ok: true,
                error: None,
            },
        ),
        (
            "spawn_ack_without_ok",
            ClientMsg::SpawnAck {
                req_id: s("sp-2"),
                value: json!("done"),
                ok: true,
                error: None,
            },
        ),
        (
            "spawn_ack_empty_value",
            ClientMsg::SpawnAck {
                req_id: s("sp-3"),
                value: json!({}),
                ok: true,
                error: None,
            },
        ),
        (
            "spawn_ack_error",
            ClientMsg::SpawnAck {
                req_id: s("sp-4"),
                value: json!(null),
                ok: false,
                error: Some(s("sub-agent crashed: exit 137")),
            },
        ),
    ]
}

fn server_msg_cases() -> Vec<(&'static str, ServerMsg)> {
    let spawn = json!({"agent": "tester", "task": "run the tests"});
    vec![
        (
            "hello",
            ServerMsg::Hello {
                session_id: s("s-1"),
                pending: strings(&["q-1", "h-1"]),
            },
        ),
        (
            "hello_nothing_pending",
            ServerMsg::Hello {
                session_id: s("s-1"),
                pending: vec![],
            },
        ),
        (
            "ask",
            ServerMsg::Ask {
                req_id: s("q-1"),
                question: json!("Which database should the service use?"),
            },
        ),
        (
            "ask_triage",
            ServerMsg::Ask {
                req_id: s("q-3"),
                question: json!({"interaction": {
                    "id": "ir_1",
                    "session_id": "s-1",
                    "kind": {"type": "tool_approval", "tool_name": "shell", "args_json": "{\"cmd\":\"make\"}"},
                    "route": ["operator", "human"]
                }}),
            },
        ),
        (
            "hook_before",
            ServerMsg::HookBefore {
                req_id: s("h-1"),
                spawn: spawn.clone(),
            },
        ),
        (
            "spawn",
            ServerMsg::Spawn {
                req_id: s("sp-1"),
                task_id: s("tk_01JTASK"),
                task_token: s("lev_task_abc123"),
                spawn,
            },
        ),
        (
            "error",
            ServerMsg::Error {
                req_id: Some(s("q-1")),
                code: s("already_resolved"),
                message: s("q-1 was already answered"),
            },
        ),
        (
            "error_without_req_id",
            ServerMsg::Error {
                req_id: None,
                code: s("malformed"),
                message: s("expected JSON text, EOF while parsing at line 1 column 0"),
            },
        ),
    ]
}

fn worker_result_cases() -> Vec<(&'static str, WorkerResult)> {
    vec![
        (
            "full",
            WorkerResult {
                task_id: s("tk_01JTASK"),
                value: json!({"summary": "2 tests fail"}),
                ok: false,
                error: Some(s("tests failed")),
                output_tail: Some(s("test a ... FAILED\ntest b ... FAILED\n")),
            },
        ),
        (
            "without_ok",
            WorkerResult {
                task_id: s("tk_01JTASK"),
                value: json!({"summary": "all green"}),
                ok: true,
                error: None,
                output_tail: None,
            },
        ),
    ]
}

fn envelope(payload: &str, keyid: &str, sig: &str) -> Envelope {
    Envelope {
        payload_type: s(lev_protocol::APPROVAL_PAYLOAD_TYPE),
        payload: s(payload),
        signatures: vec![EnvelopeSignature::new(s(keyid), s(sig))],
    }
}

fn envelope_cases() -> Vec<(&'static str, Envelope)> {
    vec![
        (
            "approval",
            envelope("eyJ2IjoxfQ==", "0123456789abcdef", "c2lnbmF0dXJlLWJ5dGVz"),
        ),
        (
            "without_keyid",
            Envelope {
                signatures: vec![
                    EnvelopeSignature::new(s(""), s("c2lnbmF0dXJlLWJ5dGVz")),
                    EnvelopeSignature::new(s("fedcba9876543210"), s("b3RoZXI=")),
                ],
                ..envelope("eyJ2IjoxfQ==", "", "")
            },
        ),
    ]
}

fn gate_request_cases() -> Vec<(&'static str, GateRequest)> {
    let minimal = GateRequest {
        session_id: s("s-1"),
        conversation_id: s(""),
        turn_id: s(""),
        request_id: s("call_1"),
        caller: s(""),
        tool_name: s("shell"),
        args_json: s(r#"{"cmd":"ls"}"#),
        sandbox_mode: s(""),
        required_capabilities: vec![],
        timeout_s: None,
        route: None,
        reason: None,
    };
    vec![
        ("minimal", minimal.clone()),
        (
            "full",
            GateRequest {
                conversation_id: s("c-1"),
                turn_id: s("t-7"),
                request_id: s("call_2"),
                caller: s("alice"),
                args_json: s(r#"{"cmd": "curl https://example.com"}"#),
                sandbox_mode: s("workspace-write"),
                required_capabilities: strings(&["net"]),
                timeout_s: Some(120),
                route: Some(strings(&["operator", "human"])),
                ..minimal
            },
        ),
    ]
}

fn gate_response_cases() -> Vec<(&'static str, GateResponse)> {
    vec![
        (
            "allow",
            GateResponse::Allow {
                approval: envelope("eyJ2IjoxfQ==", "0123456789abcdef", "c2lnbmF0dXJlLWJ5dGVz"),
            },
        ),
        (
            "deny",
            GateResponse::Deny {
                reason: s("rule deny-net: shell may not use the network"),
                approval: None,
            },
        ),
        (
            "deny_signed",
            GateResponse::Deny {
                reason: s("denied by alice"),
                approval: Some(envelope(
                    "eyJ2IjoxLCJhcHByb3ZlZCI6ZmFsc2V9",
                    "0123456789abcdef",
                    "ZGVueS1zaWc=",
                )),
            },
        ),
        (
            "ask",
            GateResponse::Ask {
                interaction_id: s("ir_01JASK"),
            },
        ),
    ]
}

fn error_body_cases() -> Vec<(&'static str, ErrorBody)> {
    let stored: StoredResponse = InteractionResponse::text("ir_1", "see the attached notes")
        .with_parts(vec![
            StoredPart {
                name: s("notes.md"),
                media_type: s("text/markdown"),
                size: 15,
                sha256: s("2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae"),
                original_name: None,
            },
            StoredPart {
                name: s("passwd"),
                media_type: s("text/plain"),
                size: 3,
                sha256: s("fcde2b2edba56bf408601fb721fe9b5c338d10ee429ea04fae5511b68fbf8fb9"),
                original_name: Some(s("../../etc/passwd")),
            },
        ]);
    vec![
        (
            "plain",
            ErrorBody {
                error: ErrorDetail {
                    code: s("not_found"),
                    message: s("no interaction ir_404"),
                    fields: BTreeMap::new(),
                },
                response: None,
            },
        ),
        (
            "already_answered",
            ErrorBody {
                error: ErrorDetail {
                    code: s("already_answered"),
                    message: s("ir_1 was answered by bob"),
                    fields: BTreeMap::new(),
                },
                response: Some(stored),
            },
        ),
        (
            "form_fields",
            ErrorBody {
                error: ErrorDetail {
                    code: s("invalid"),
                    message: s(
                        "fields: owner: expected an email address, found \"ops\"; replicas: at most 9, found 12",
                    ),
                    fields: [
                        (s("owner"), s("expected an email address, found \"ops\"")),
                        (s("replicas"), s("at most 9, found 12")),
                    ]
                    .into_iter()
                    .collect(),
                },
                response: None,
            },
        ),
    ]
}

fn task_cases() -> Vec<(&'static str, Task)> {
    let task = |id: &str, status, spawn| Task {
        id: s(id),
        session_id: s("s-1"),
        status,
        spawn,
        last_result: None,
        output_tail: None,
        error: None,
        caller: None,
        created_at: datetime!(2025-03-01 10:00:00 UTC),
        updated_at: datetime!(2025-03-01 10:00:00 UTC),
    };
    vec![
        ("pending", task("tk_01JNEW", TaskStatus::Pending, json!({}))),
        (
            "running",
            Task {
                updated_at: datetime!(2025-03-01 10:00:05 UTC),
                ..task(
                    "tk_01JTASK",
                    TaskStatus::Running,
                    json!({"agent": "tester", "task": "run the tests"}),
                )
            },
        ),
        (
            "succeeded",
            Task {
                last_result: Some(json!({"summary": "all green"})),
                output_tail: Some(s("ok: 42 passed")),
                updated_at: datetime!(2025-03-01 10:03:00.5 UTC),
                ..task(
                    "tk_01JDONE",
                    TaskStatus::Succeeded,
                    json!({"agent": "tester"}),
                )
            },
        ),
        (
            "failed",
            Task {
                error: Some(s("operator gone past the grace time")),
                updated_at: datetime!(2025-03-01 10:00:30 UTC),
                ..task("tk_01JFAIL", TaskStatus::Failed, json!("run the tests"))
            },
        ),
    ]
}

fn grant_cases() -> Vec<(&'static str, Grant)> {
    vec![
        (
            "session",
            Grant {
                id: s("gr_01JSESSION"),
                scope: ApprovalScope::Session,
                caller: s("alice"),
                conversation_id: Some(s("c-1")),
                sandbox_mode: s("workspace-write"),
                tool_name: s("shell"),
                covered_capabilities: strings(&["net"]),
                grant_args: None,
                approver: s("bob"),
                interaction_id: Some(s("ir_1")),
                created_at: datetime!(2025-03-01 10:00:00 UTC),
            },
        ),
        (
            "always",
            Grant {
                id: s("gr_01JALWAYS"),
                scope: ApprovalScope::Always,
                caller: s("alice"),
                conversation_id: None,
                sandbox_mode: s("read-only"),
                tool_name: s("shell"),
                covered_capabilities: strings(&["fs-write", "net"]),
                grant_args: Some(BTreeMap::from([(s("/cmd"), s("^ls( .*)?$"))])),
                approver: s("bob"),
                interaction_id: None,
                created_at: datetime!(2025-03-01 10:00:00 UTC),
            },
        ),
    ]
}

fn token_create_cases() -> Vec<(&'static str, TokenCreate)> {
    let token = |name: &str, role| TokenCreate {
        name: s(name),
        role,
        caller: None,
        sessions: None,
    };
    vec![
        (
            "worker",
            TokenCreate {
                caller: Some(s("alice")),
                ..token("ci-runner", Role::Worker)
            },
        ),
        ("approver", token("bob", Role::Approver)),
        ("operator", token("main-ai", Role::Operator)),
        (
            "operator_sessions",
            TokenCreate {
                sessions: Some(vec![s("ci-*"), s("build-7")]),
                ..token("main-ai", Role::Operator)
            },
        ),
        ("admin", token("root", Role::Admin)),
    ]
}

/// `Page<T>`, the shape of every list, with tasks as its items.
fn page_cases() -> Vec<(&'static str, Page<Task>)> {
    let tasks = task_cases();
    let task = |name: &str| {
        tasks
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, t)| t.clone())
            .unwrap_or_else(|| panic!("no task case {name}"))
    };
    vec![
        (
            "tasks_first",
            Page {
                items: vec![task("running"), task("pending")],
                next_cursor: Some(s("41")),
            },
        ),
        ("tasks_last", Page::last(vec![task("pending")])),
        ("empty", Page::default()),
    ]
}

fn audit_page_cases() -> Vec<(&'static str, AuditPage)> {
    vec![(
        "first_of_two",
        AuditPage {
            page: Page {
                items: vec![AuditEntry {
                    seq: 1,
                    at: s("2025-03-01T10:00:00Z"),
                    action: s("token.created"),
                    actor: s("admin"),
                    data: json!({"name": "ci-runner", "role": "worker"}),
                    prev_hash: "0".repeat(64),
                    hash: s("5e2bf6ff5b1bc7d1a3d3f0d3b3b6b3a1e0c9f2a4d7e8b1c2d3e4f5a6b7c8d9e0"),
                }],
                next_cursor: Some(s("1")),
            },
            head: AuditHead {
                seq: 2,
                hash: s("a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f90"),
                signature: Envelope {
                    payload_type: s("application/vnd.lev.audit-head+json; version=1"),
                    ..envelope("eyJzZXEiOjJ9", "0123456789abcdef", "c2lnbmF0dXJlLWJ5dGVz")
                },
            },
        },
    )]
}

// ---------------------------------------------------------------- tests

#[test]
fn interaction_requests() {
    run("interaction_request", &interaction_request_cases());
}

#[test]
fn interactions_in_each_status() {
    run("interaction", &interaction_cases());
}

#[test]
fn interaction_responses() {
    run("interaction_response", &interaction_response_cases());
}

#[test]
fn client_msgs() {
    run("client_msg", &client_msg_cases());
}

#[test]
fn server_msgs() {
    run("server_msg", &server_msg_cases());
}

#[test]
fn worker_results() {
    run("worker_result", &worker_result_cases());
}

#[test]
fn envelopes() {
    run("envelope", &envelope_cases());
}

#[test]
fn gate_requests() {
    run("gate_request", &gate_request_cases());
}

#[test]
fn gate_responses() {
    run("gate_response", &gate_response_cases());
}

#[test]
fn error_bodies() {
    run("error_body", &error_body_cases());
}

#[test]
fn tasks() {
    run("task", &task_cases());
}

#[test]
fn grants() {
    run("grant", &grant_cases());
}

#[test]
fn token_creates() {
    run("token_create", &token_create_cases());
}

#[test]
fn pages() {
    run("page", &page_cases());
}

#[test]
fn audit_pages() {
    run("audit_page", &audit_page_cases());
}

/// A page always writes `next_cursor`, `null` on the last page, and the
/// audit page's entries sit under the same two names as every list's.
#[test]
fn pages_always_write_next_cursor() {
    assert_eq!(
        serde_json::to_value(Page::<Task>::default()).unwrap(),
        json!({"items": [], "next_cursor": null})
    );
    let (_, audit) = audit_page_cases().remove(0);
    let v = serde_json::to_value(&audit).unwrap();
    let mut keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
    keys.sort_unstable();
    assert_eq!(keys, ["head", "items", "next_cursor"]);
    let last = AuditPage {
        page: Page::last(Vec::new()),
        ..audit
    };
    assert_eq!(
        serde_json::to_value(&last).unwrap()["next_cursor"],
        json!(null)
    );
}

/// Every file under `tests/fixtures/` is checked by one of the tests above,
/// so a fixture cannot be added and silently left untested.
#[test]
fn every_fixture_file_is_checked() {
    fn names<T>(dir: &str, cases: Vec<(&'static str, T)>) -> Vec<String> {
        cases
            .into_iter()
            .map(|(name, _)| format!("{dir}/{name}.json"))
            .collect()
    }
    let checked: BTreeSet<String> = [
        names("interaction_request", interaction_request_cases()),
        names("interaction", interaction_cases()),
        names("interaction_response", interaction_response_cases()),
        names("client_msg", client_msg_cases()),
        names("server_msg", server_msg_cases()),
        names("worker_result", worker_result_cases()),
        names("envelope", envelope_cases()),
        names("gate_request", gate_request_cases()),
        names("gate_response", gate_response_cases()),
        names("error_body", error_body_cases()),
        names("task", task_cases()),
        names("grant", grant_cases()),
        names("token_create", token_create_cases()),
        names("page", page_cases()),
        names("audit_page", audit_page_cases()),
    ]
    .concat()
    .into_iter()
    .collect();

    let root = fixtures_dir();
    let mut on_disk = BTreeSet::new();
    let mut dirs = vec![root.clone()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else {
                let rel = path.strip_prefix(&root).unwrap();
                on_disk.insert(rel.to_string_lossy().replace('\\', "/"));
            }
        }
    }
    let unchecked: Vec<_> = on_disk.difference(&checked).collect();
    assert!(
        unchecked.is_empty(),
        "fixtures that no test checks (add each to its *_cases() list): {unchecked:?}\n\n{NOTE}"
    );
    let missing: Vec<_> = checked.difference(&on_disk).collect();
    assert!(
        missing.is_empty(),
        "fixtures that a test expects but that are not on disk: {missing:?}\n\n{NOTE}"
    );
}

// ------------------------------------------- meaning of the older answers

/// An answer written before `feedback`, `parts` and `modified_args_json`
/// existed means what it meant: no feedback, no files, no edit.
#[test]
fn answers_written_before_the_new_fields_keep_their_meaning() {
    for name in [
        "legacy_text",
        "legacy_choice",
        "legacy_approval",
        "legacy_deny",
        "legacy_deny_without_scope",
    ] {
        let r: InteractionResponse = load("interaction_response", name);
        assert_eq!(r.feedback, None, "{name}");
        assert!(r.parts.is_empty(), "{name}");
        assert_eq!(r.modified_args_json, None, "{name}");
        assert_eq!(r.injected_context, None, "{name}");
        assert_eq!(r.reason, None, "{name}");
        assert_eq!(r.grant_args, None, "{name}");
        assert_eq!(r.deny_feedback(), None, "{name}");
    }
}

/// The older answers still validate against the question they answered.
#[test]
fn answers_written_before_the_new_fields_still_validate() {
    use lev_protocol::validate::validate_response;

    let request = |kind| InteractionRequest {
        id: Some(s("ir_1")),
        ..InteractionRequest::new("s-1", kind)
    };
    let free_text = request(InteractionKind::FreeText { prompt: s("?") });
    let choice = request(InteractionKind::MultipleChoice {
        prompt: s("?"),
        options: strings(&["a", "b", "c"]),
    });
    let tool = request(InteractionKind::ToolApproval {
        tool_name: s("shell"),
        args_json: s("{}"),
        missing_capabilities: vec![],
        sandbox_mode: s(""),
        options: vec![],
    });
    for (name, req) in [
        ("legacy_text", &free_text),
        ("legacy_choice", &choice),
        ("legacy_approval", &tool),
        ("legacy_deny", &tool),
        ("legacy_deny_without_scope", &tool),
        ("seed_deny_with_feedback", &tool),
    ] {
        let r: InteractionResponse = load("interaction_response", name);
        if let Err(e) = validate_response(req, r) {
            panic!("{name} no longer validates: {e}\n\n{NOTE}");
        }
    }
}

#[test]
fn fixture_answers_mean_what_they_say() {
    let deny: InteractionResponse = load("interaction_response", "deny");
    assert_eq!(deny.deny_feedback(), None);
    assert!(!deny.is_grant());

    let redirect: InteractionResponse = load("interaction_response", "deny_with_feedback");
    assert_eq!(
        redirect.deny_feedback(),
        Some("use ripgrep instead of find")
    );

    // The seed-era form: feedback as written, read back trimmed.
    let seed: InteractionResponse = load("interaction_response", "seed_deny_with_feedback");
    assert_eq!(seed.deny_feedback(), Some("try the staging host first"));

    // Feedback beside a grant is never read.
    let stray: InteractionResponse = load("interaction_response", "grant_with_stray_feedback");
    assert!(stray.is_grant());
    assert_eq!(stray.deny_feedback(), None);
}

#[test]
fn fixture_spawn_acks_default_ok_to_true() {
    for name in ["spawn_ack_without_ok", "spawn_ack_empty_value"] {
        let msg: ClientMsg = load("client_msg", name);
        assert!(
            matches!(msg, ClientMsg::SpawnAck { ok: true, .. }),
            "{name}: {msg:?}"
        );
    }
    let msg: ClientMsg = load("client_msg", "spawn_ack_empty_value");
    assert!(matches!(&msg, ClientMsg::SpawnAck { value, .. } if *value == json!({})));
    assert_eq!(msg.req_id(), "sp-3");
    assert_eq!(msg.type_name(), "spawn_ack");
}

#[test]
fn fixture_worker_result_defaults_ok_to_true() {
    let r: WorkerResult = load("worker_result", "without_ok");
    assert!(r.ok);
}

/// `args_json` is the exact text the worker sent: never re-serialised.
#[test]
fn fixture_args_json_is_kept_byte_for_byte() {
    let req: InteractionRequest = load("interaction_request", "tool_approval_full");
    let again: InteractionRequest =
        serde_json::from_str(&serde_json::to_string(&req).unwrap()).unwrap();
    match again.kind {
        InteractionKind::ToolApproval { args_json, .. } => assert_eq!(
            args_json,
            r#"{ "cmd" : "curl https://example.com",  "cwd": "/tmp" }"#
        ),
        other => panic!("expected a tool approval, found {other:?}"),
    }
}
