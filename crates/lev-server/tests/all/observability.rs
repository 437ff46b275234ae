//! The audit log (a verifiable chain with a signed head) and the metrics.

use lev_approval::audit::verify_chain;
use lev_protocol::api::AuditPage;
use reqwest::StatusCode;
use serde_json::json;

use crate::support::{TestServer, free_text, tool_approval};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_audit_chain_verifies_and_records_every_change() {
    let s = TestServer::start().await;
    let (worker, approver) = s.worker_and_approver().await;
    let id = s.create(&worker, &tool_approval("s-1", r#"{"x":1}"#)).await;
    s.respond(
        &approver,
        &id,
        &json!({"request_id": id, "approved": true, "scope": "once", "modified_args_json": r#"{"x":2}"#}),
    )
    .await;
    let id2 = s.create(&worker, &free_text("s-1", "?")).await;
    s.post(
        &format!("/v1/interactions/{id2}/cancel"),
        &worker,
        &json!({}),
    )
    .await;
    s.call(
        reqwest::Method::DELETE,
        "/v1/tokens/worker-1",
        &s.admin,
        None,
    )
    .await;

    let (status, v) = s.get("/v1/audit", &s.admin).await;
    assert_eq!(status, StatusCode::OK);
    let page: AuditPage = serde_json::from_value(v).unwrap();
    let keys = s.trusted_keys().await;
    verify_chain(&page.page.items, &page.head, &keys, None).unwrap();
    let actions: Vec<&str> = page.page.items.iter().map(|e| e.action.as_str()).collect();
    assert_eq!(
        actions,
        [
            "token.created",
            "token.created",
            "token.created",
            "interaction.created",
            "interaction.voted",
            "interaction.answered",
            "interaction.created",
            "interaction.cancelled",
            "token.revoked"
        ]
    );
    let voted = &page.page.items[4];
    assert_eq!(voted.actor, "alice-approver");
    assert_eq!(voted.data["voter"], "alice-approver");
    assert_eq!(voted.data["decides"], true);
    let answered = &page.page.items[5];
    assert_eq!(answered.actor, "alice-approver");
    assert_eq!(answered.data["approver"], "alice-approver");
    assert_eq!(answered.data["modified_args_json"], r#"{"x":2}"#);
    assert_eq!(answered.data["args_json"], r#"{"x":1}"#);

    // A tampered entry is caught.
    let mut tampered = page.page.items.clone();
    tampered[5].data["modified_args_json"] = json!("{}");
    assert!(verify_chain(&tampered, &page.head, &keys, None).is_err());

    // ?after= gives the tail, with the same head.
    let (_, v) = s.get("/v1/audit?after=6", &s.admin).await;
    let tail: AuditPage = serde_json::from_value(v).unwrap();
    assert_eq!(
        tail.page.items.iter().map(|e| e.seq).collect::<Vec<_>>(),
        [7, 8, 9]
    );
    assert_eq!(tail.head.seq, 9);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_count_requests_interactions_and_pending() {
    let s = TestServer::start().await;
    let (worker, approver) = s.worker_and_approver().await;
    let id = s.create(&worker, &free_text("s-1", "?")).await;
    s.create(&worker, &free_text("s-1", "?")).await;
    s.respond(&approver, &id, &json!({"request_id": id, "value": "v"}))
        .await;
    s.get("/v1/interactions/ir_none", &worker).await;
    let resp = s
        .req(reqwest::Method::GET, "/metrics", &s.admin)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    assert!(
        resp.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/plain")
    );
    let text = resp.text().await.unwrap();
    for line in [
        r#"lev_http_requests_total{method="POST",route="/v1/interactions",status="201"} 2"#,
        r#"lev_http_requests_total{method="GET",route="/v1/interactions/{id}",status="404"} 1"#,
        "lev_interactions_created_total 2",
        "lev_interactions_answered_total 1",
        "lev_interactions_pending 1",
        "lev_waiters 0",
    ] {
        assert!(
            text.lines().any(|l| l == line),
            "missing {line:?} in\n{text}"
        );
    }
    let (status, _) = s.get("/metrics", &approver).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
}
