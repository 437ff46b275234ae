//! The audit log (a verifiable chain with a signed head) and the metrics.

use lev_approval::audit::verify_chain;
use lev_protocol::api::AuditPage;
use reqwest::StatusCode;
use serde_json::{Value, json};

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
            .starts_with("application/openmetrics-text")
    );
    let text = resp.text().await.unwrap();
    assert!(text.ends_with("# EOF\n"), "{text}");
    // Each (name, labels it has, value): labels in any order, `replica`
    // among them.
    for (name, labels, value) in [
        (
            "lev_http_requests_total",
            &[
                ("method", "POST"),
                ("route", "/v1/interactions"),
                ("status", "201"),
            ][..],
            "2",
        ),
        (
            "lev_http_requests_total",
            &[
                ("method", "GET"),
                ("route", "/v1/interactions/{id}"),
                ("status", "404"),
            ][..],
            "1",
        ),
        ("lev_interactions_created_total", &[][..], "2"),
        ("lev_interactions_answered_total", &[][..], "1"),
        (
            "lev_interactions_pending",
            &[("session", "s-1"), ("kind", "free_text")][..],
            "1",
        ),
        (
            "lev_decisions_total",
            &[("outcome", "answered"), ("kind", "free_text")][..],
            "1",
        ),
        ("lev_waiters", &[][..], "0"),
    ] {
        let found = text.lines().any(|l| {
            let Some(rest) = l.strip_prefix(name).and_then(|r| r.strip_prefix('{')) else {
                return false;
            };
            let Some((labels_text, v)) = rest.split_once("} ") else {
                return false;
            };
            v == value
                && labels_text.contains("replica=\"rp_")
                && labels
                    .iter()
                    .all(|(k, want)| labels_text.contains(&format!("{k}=\"{want}\"")))
        });
        assert!(found, "missing {name} {labels:?} {value} in\n{text}");
    }
    let (status, _) = s.get("/metrics", &approver).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
}

/// The OpenAPI document names every route with every method it answers, and
/// nothing else, as the running router sees it: each documented method of a
/// path is served (not 404 or 405), every other method gets the JSON 405.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_openapi_document_names_exactly_the_methods_the_router_serves() {
    let s = TestServer::start().await;
    let (status, doc) = s.get("/v1/openapi.json", "").await;
    assert_eq!(status, StatusCode::OK, "{doc}");
    let methods = ["get", "post", "put", "patch", "delete"];
    let mut checked = 0;
    for (path, item) in doc["paths"].as_object().unwrap() {
        // Every path parameter filled with a plain value.
        let mut concrete = String::new();
        let mut rest = path.as_str();
        while let Some(open) = rest.find('{') {
            concrete.push_str(&rest[..open]);
            concrete.push_str("x1");
            rest = &rest[rest[open..].find('}').unwrap() + open + 1..];
        }
        concrete.push_str(rest);
        for method in methods {
            let resp = s
                .req(
                    reqwest::Method::from_bytes(method.to_uppercase().as_bytes()).unwrap(),
                    &concrete,
                    &s.admin,
                )
                .header("content-type", "application/json")
                .body("{}")
                .timeout(std::time::Duration::from_secs(2))
                .send()
                .await;
            // A documented method may hold the request (a wait, an event
            // stream): it is served, whatever it answers later.
            let Ok(resp) = resp else {
                assert!(
                    item.get(method).is_some(),
                    "{method} {path} hung without being documented"
                );
                continue;
            };
            let status = resp.status();
            let body: Value = resp.json().await.unwrap_or(Value::Null);
            if item.get(method).is_some() {
                // A 404 about the thing named is fine; one about the route
                // is not.
                let unrouted =
                    status == StatusCode::NOT_FOUND && body["error"]["message"] == "no such route";
                assert!(
                    status != StatusCode::METHOD_NOT_ALLOWED && !unrouted,
                    "{method} {path} is documented but answered {status} {body}"
                );
            } else {
                assert_eq!(
                    status,
                    StatusCode::METHOD_NOT_ALLOWED,
                    "{method} {path} is served but not documented: {body}"
                );
                assert!(body["error"]["code"].is_string(), "{body}");
            }
            checked += 1;
        }
    }
    assert!(checked > 150, "{checked}");
}

/// A plain request to the operator WebSocket route (no upgrade) is the JSON
/// 400 that names what is missing, as every other error is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plain_request_to_the_operator_socket_is_the_json_400() {
    let s = TestServer::start().await;
    let operator = s.token("main-ai", "operator", None).await;
    let (status, body) = s.get("/v1/operators/s-1/ws", &operator).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert!(body["error"]["code"].is_string(), "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("expected a WebSocket upgrade"),
        "{body}"
    );
}
