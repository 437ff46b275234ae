//! Answers of every kind, signed approvals, validation naming the field, and
//! the first answer winning exactly once.

use std::sync::Arc;

use lev_approval::{Call, verify};
use lev_protocol::Envelope;
use reqwest::StatusCode;
use serde_json::{Value, json};
use time::OffsetDateTime;

use crate::support::{TestServer, code, free_text, message, tool_approval};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_kind_takes_its_answer() {
    let s = TestServer::start().await;
    let (worker, approver) = s.worker_and_approver().await;

    let id = s.create(&worker, &free_text("s-1", "notes?")).await;
    let (status, v) = s
        .respond(
            &approver,
            &id,
            &json!({"request_id": id, "value": "see attached"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{v}");
    assert_eq!(v["response"]["value"], "see attached");
    assert!(v["approval"].is_null(), "only tool approvals are signed");

    let mc = json!({"session_id": "s-1", "kind": {"type": "multiple_choice", "prompt": "pick", "options": ["x", "y"]}});
    let id = s.create(&worker, &mc).await;
    let (status, v) = s
        .respond(
            &approver,
            &id,
            &json!({"request_id": id, "choice_index": 1}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{v}");
    assert_eq!(v["response"]["choice_index"], 1);

    let points = json!({"session_id": "s-1", "kind": {"type": "interaction_points", "prompt": "review",
        "points": [{"id": "p1", "text": "naming"}, {"id": "p2", "text": "tests"}]}});
    let id = s.create(&worker, &points).await;
    let (status, v) = s
        .respond(
            &approver,
            &id,
            &json!({"request_id": id, "value": "p1 ok, p2 missing"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{v}");

    let id = s.create(&worker, &tool_approval("s-1", "{}")).await;
    let (status, v) = s
        .respond(
            &approver,
            &id,
            &json!({"request_id": id, "approved": false, "feedback": "  use the staging host  "}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{v}");
    assert_eq!(v["response"]["feedback"], "use the staging host", "trimmed");
    let keys = s.trusted_keys().await;
    let env: Envelope = serde_json::from_value(v["approval"].clone()).unwrap();
    let verified = verify(&env, &keys, OffsetDateTime::now_utc()).unwrap();
    assert!(!verified.payload.approved);
    assert!(
        !verified.authorizes_call(&id, "shell", "{}"),
        "a denial authorizes nothing"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_approval_is_signed_with_every_field() {
    let s = TestServer::start().await;
    let worker = s.token("agent", "worker", Some("carol")).await;
    let approver = s.token("dave", "approver", None).await;
    let args = r#"{"argv": ["curl",  "example.invalid"]}"#;
    let id = s.create(&worker, &tool_approval("s-1", args)).await;
    let (status, v) = s
        .respond(
            &approver,
            &id,
            &json!({
                "request_id": id,
                "approved": true,
                "scope": "session",
                "modified_args_json": r#"{"argv":["curl","--fail","example.invalid"]}"#,
                "injected_context": "the proxy is down",
                "reason": "needed for the fix",
                "approver": "mallory"
            }),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{v}");
    let env: Envelope = serde_json::from_value(v["approval"].clone()).unwrap();
    let keys = s.trusted_keys().await;
    let now = OffsetDateTime::now_utc();
    let vr = verify(&env, &keys, now).unwrap();
    assert!(
        vr.authorizes_call(&id, "shell", args),
        "args bound byte for byte"
    );
    assert!(vr.check_call(&Call::new(&id, "shell", args)).is_ok());
    assert_eq!(vr.payload.request_id, id);
    assert_eq!(vr.payload.turn_id, "t-7");
    assert_eq!(vr.payload.conversation_id, "c-1");
    assert_eq!(
        vr.payload.caller, "carol",
        "the bound caller, set by the server"
    );
    assert_eq!(
        vr.payload.approver, "dave",
        "the token's name, never a client-sent name"
    );
    assert_eq!(vr.payload.sandbox_mode, "workspace-write");
    assert_eq!(
        vr.payload.covered_capabilities,
        ["net", "proc-exec"],
        "sorted"
    );
    assert!(vr.payload.approved && vr.payload.approved_for_session);
    assert_eq!(
        vr.payload.modified_args_json,
        r#"{"argv":["curl","--fail","example.invalid"]}"#
    );
    assert_eq!(vr.payload.injected_context, "the proxy is down");
    assert_eq!(vr.payload.reason, "needed for the fix");
    assert!(vr.payload.nonce.len() >= 22, "{}", vr.payload.nonce);
    let lifetime = vr.payload.expires_at - vr.payload.issued_at;
    assert_eq!(
        lifetime,
        time::Duration::seconds(600),
        "default approval ttl"
    );
    // The stored answer and the waiter see the same envelope.
    let (_, view) = s.get(&format!("/v1/interactions/{id}"), &approver).await;
    assert_eq!(view["approval"], v["approval"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answers_that_do_not_fit_name_the_field() {
    let s = TestServer::start().await;
    let (worker, approver) = s.worker_and_approver().await;
    let mc = json!({"session_id": "s-1", "kind": {"type": "multiple_choice", "prompt": "pick", "options": ["x", "y"]}});
    let mc_id = s.create(&worker, &mc).await;
    let tool_id = s.create(&worker, &tool_approval("s-1", "{}")).await;
    let text_id = s.create(&worker, &free_text("s-1", "?")).await;
    let cases = [
        (
            &mc_id,
            json!({"request_id": mc_id, "value": "x"}),
            "choice_index",
        ),
        (
            &mc_id,
            json!({"request_id": mc_id, "choice_index": 1, "value": "x"}),
            "value",
        ),
        (
            &mc_id,
            json!({"request_id": mc_id, "choice_index": 2}),
            "choice_index",
        ),
        (
            &tool_id,
            json!({"request_id": tool_id, "approved": true, "feedback": "no"}),
            "feedback",
        ),
        (
            &tool_id,
            json!({"request_id": tool_id, "approved": true, "modified_args_json": "{not json"}),
            "modified_args_json",
        ),
        (
            &tool_id,
            json!({"request_id": tool_id, "approved": false, "modified_args_json": "{}"}),
            "modified_args_json",
        ),
        (&tool_id, json!({"request_id": tool_id}), "approved"),
        (&text_id, json!({"request_id": text_id}), "value"),
        (
            &text_id,
            json!({"request_id": "ir_other", "value": "v"}),
            "request_id",
        ),
        (
            &text_id,
            json!({"request_id": text_id, "value": 5}),
            "value",
        ),
        (
            &text_id,
            json!({"request_id": text_id, "value": "v", "parts": [{"name": "a", "media_type": "text/plain", "data": "!!!"}]}),
            "parts[0].data",
        ),
        (
            &text_id,
            json!({"request_id": text_id, "value": "v", "parts": [{"name": "a", "media_type": "text/html\r\nx: y", "data": "aGk="}]}),
            "parts[0].media_type",
        ),
    ];
    for (id, body, field) in cases {
        let (status, v) = s.respond(&approver, id, &body).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body} -> {v}");
        assert_eq!(code(&v), "invalid");
        assert!(
            message(&v).contains(field),
            "{body}: {} should name {field}",
            message(&v)
        );
    }
    // Still pending: a refused answer changes nothing.
    let (_, view) = s.get(&format!("/v1/interactions/{mc_id}"), &approver).await;
    assert_eq!(view["request"]["status"], "pending");
    let (status, _) = s
        .respond(
            &approver,
            "ir_missing",
            &json!({"request_id": "ir_missing", "value": "v"}),
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_answer_gets_409_with_the_winner() {
    let s = TestServer::start().await;
    let (worker, approver) = s.worker_and_approver().await;
    let id = s.create(&worker, &free_text("s-1", "?")).await;
    let (status, first) = s
        .respond(&approver, &id, &json!({"request_id": id, "value": "first"}))
        .await;
    assert_eq!(status, StatusCode::OK);
    let (status, second) = s
        .respond(
            &approver,
            &id,
            &json!({"request_id": id, "value": "second"}),
        )
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{second}");
    assert_eq!(code(&second), "already_answered");
    assert_eq!(second["response"], first["response"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_responders_exactly_one_wins() {
    let s = Arc::new(TestServer::start().await);
    let (worker, approver) = s.worker_and_approver().await;
    for round in 0..3 {
        let id = s
            .create(&worker, &tool_approval(&format!("s-race-{round}"), "{}"))
            .await;
        let mut tasks = Vec::new();
        for i in 0..20 {
            let (s, approver, id) = (Arc::clone(&s), approver.clone(), id.clone());
            tasks.push(tokio::spawn(async move {
                let body = json!({"request_id": id, "approved": i % 2 == 0, "reason": format!("responder {i}")});
                s.respond(&approver, &id, &body).await
            }));
        }
        let mut wins = Vec::new();
        let mut losers = Vec::new();
        for t in tasks {
            let (status, v) = t.await.unwrap();
            match status {
                StatusCode::OK => wins.push(v),
                StatusCode::CONFLICT => losers.push(v),
                other => panic!("unexpected {other}: {v}"),
            }
        }
        assert_eq!(wins.len(), 1, "exactly one 200");
        assert_eq!(losers.len(), 19);
        let winner = &wins[0]["response"];
        for l in &losers {
            assert_eq!(&l["response"], winner, "every loser sees the winner");
        }
        let (_, view) = s.get(&format!("/v1/interactions/{id}"), &approver).await;
        assert_eq!(&view["response"], winner);
        assert_eq!(view["approval"], wins[0]["approval"]);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parts_are_stored_and_served_as_attachments() {
    let s = TestServer::start().await;
    let (worker, approver) = s.worker_and_approver().await;
    let id = s.create(&worker, &free_text("s-1", "files?")).await;
    let html = "<script>alert(1)</script>";
    let data = lev_approval::encode_base64url(html.as_bytes());
    let (status, v) = s
        .respond(
            &approver,
            &id,
            &json!({"request_id": id, "value": "here", "parts": [
                {"name": "../../../etc/.passwd", "media_type": "text/html", "data": data},
                {"name": "notes\u{202e}dm.exe", "media_type": "text/markdown", "data": "aGVsbG8="},
                {"name": "...", "media_type": "text/plain", "data": ""}
            ]}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{v}");
    let parts = v["response"]["parts"].as_array().unwrap();
    assert_eq!(parts[0]["name"], "passwd");
    assert_eq!(parts[0]["original_name"], "../../../etc/.passwd");
    assert_eq!(parts[0]["size"], html.len());
    assert!(parts[0].get("data").is_none(), "the bytes are never echoed");
    assert_eq!(parts[1]["name"], "notesdm.exe");
    assert_eq!(parts[2]["name"], "attachment");
    let sha = parts[0]["sha256"].as_str().unwrap();
    assert_eq!(sha.len(), 64);

    for token in [&worker, &approver] {
        let resp = s
            .req(reqwest::Method::GET, &format!("/v1/blobs/{sha}"), token)
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), StatusCode::OK);
        let h = resp.headers();
        assert_eq!(h["x-content-type-options"], "nosniff");
        assert!(
            h["content-disposition"]
                .to_str()
                .unwrap()
                .starts_with("attachment")
        );
        assert_eq!(h["content-type"], "text/html");
        assert_eq!(resp.text().await.unwrap(), html);
    }
    let (status, _) = s
        .get(&format!("/v1/blobs/{}", "0".repeat(64)), &worker)
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _) = s.get("/v1/blobs/not-hex", &worker).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _) = s.get(&format!("/v1/blobs/{sha}"), "").await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    // The waiter sees the stored parts, never the data.
    let (_, w) = s.get(&format!("/v1/interactions/{id}/wait"), &worker).await;
    assert_eq!(w["response"]["parts"], Value::Array(parts.clone()));
}
