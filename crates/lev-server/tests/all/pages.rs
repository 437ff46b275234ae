//! Every list route answers one shape, `lev_protocol::api::Page`:
//! `{"items": [...], "next_cursor": ...}`, `next_cursor` always written
//! (`null` on the last page); the audit log's page carries its signed head
//! beside them.

use lev_protocol::api::{AuditPage, Grant, InteractionView, Page, Task, TokenInfo};
use reqwest::StatusCode;
use serde_json::Value;

use crate::support::{TestServer, code, free_text};

/// `v` as a page: `items` an array, `next_cursor` present, no older names.
fn assert_page(path: &str, v: &Value) {
    let object = v
        .as_object()
        .unwrap_or_else(|| panic!("{path}: not an object: {v}"));
    assert!(object["items"].is_array(), "{path}: {v}");
    assert!(object.contains_key("next_cursor"), "{path}: {v}");
    for old in ["tokens", "grants", "entries"] {
        assert!(
            !object.contains_key(old),
            "{path} still writes {old:?}: {v}"
        );
    }
}

#[tokio::test]
async fn every_list_route_answers_a_page() {
    let s = TestServer::start().await;
    let (worker, approver) = s.worker_and_approver().await;
    s.create(&worker, &free_text("s-1", "which branch?")).await;

    let (status, v) = s.get("/v1/interactions?status=all", &approver).await;
    assert_eq!(status, StatusCode::OK, "{v}");
    assert_page("/v1/interactions", &v);
    let page: Page<InteractionView> = serde_json::from_value(v).unwrap();
    assert_eq!(page.items.len(), 1);
    assert_eq!(page.next_cursor, None);

    let (status, v) = s.get("/v1/tasks", &approver).await;
    assert_eq!(status, StatusCode::OK, "{v}");
    assert_page("/v1/tasks", &v);
    let page: Page<Task> = serde_json::from_value(v).unwrap();
    assert!(page.items.is_empty() && page.next_cursor.is_none());

    // Tokens and grants come whole: one page, next_cursor null.
    let (status, v) = s.get("/v1/tokens", &s.admin).await;
    assert_eq!(status, StatusCode::OK, "{v}");
    assert_page("/v1/tokens", &v);
    assert_eq!(v["next_cursor"], Value::Null);
    let page: Page<TokenInfo> = serde_json::from_value(v).unwrap();
    let names: Vec<&str> = page.items.iter().map(|t| t.name.as_str()).collect();
    assert!(names.contains(&"worker-1") && names.contains(&"alice-approver"));

    let (status, v) = s.get("/v1/grants", &approver).await;
    assert_eq!(status, StatusCode::OK, "{v}");
    assert_page("/v1/grants", &v);
    assert_eq!(v["next_cursor"], Value::Null);
    let page: Page<Grant> = serde_json::from_value(v).unwrap();
    assert!(page.items.is_empty());

    let (status, v) = s.get("/v1/audit", &s.admin).await;
    assert_eq!(status, StatusCode::OK, "{v}");
    assert_page("/v1/audit", &v);
    assert!(v["head"]["signature"].is_object(), "{v}");
    let audit: AuditPage = serde_json::from_value(v).unwrap();
    assert_eq!(audit.page.next_cursor, None, "one page reaches the head");
    assert_eq!(audit.page.items.last().map(|e| e.seq), Some(audit.head.seq));
}

#[tokio::test]
async fn audit_pages_follow_next_cursor_to_the_head() {
    let s = TestServer::start().await;
    let (worker, _) = s.worker_and_approver().await;
    for i in 0..5 {
        s.create(&worker, &free_text("s-1", &format!("q{i}"))).await;
    }
    let (_, whole) = s.get("/v1/audit", &s.admin).await;
    let whole: AuditPage = serde_json::from_value(whole).unwrap();
    let head = whole.head.seq;
    assert!(head >= 7, "tokens and interactions are logged: {head}");

    let mut seqs = Vec::new();
    let mut path = "/v1/audit?limit=2".to_owned();
    for _ in 0..head {
        let (status, v) = s.get(&path, &s.admin).await;
        assert_eq!(status, StatusCode::OK, "{v}");
        let page: AuditPage = serde_json::from_value(v).unwrap();
        assert!(page.page.items.len() <= 2);
        seqs.extend(page.page.items.iter().map(|e| e.seq));
        match page.page.next_cursor {
            Some(cursor) => {
                // The cursor is the last entry's seq: `?after=` takes it too.
                assert_eq!(Some(cursor.clone()), seqs.last().map(u64::to_string));
                path = format!("/v1/audit?limit=2&cursor={cursor}");
            }
            None => break,
        }
    }
    assert_eq!(seqs, (1..=head).collect::<Vec<_>>());

    // `after` and `cursor` name the same place; told apart, they are refused.
    let (_, by_after) = s.get("/v1/audit?after=2&limit=1", &s.admin).await;
    let (_, by_cursor) = s.get("/v1/audit?cursor=2&limit=1", &s.admin).await;
    assert_eq!(by_after["items"], by_cursor["items"]);
    assert_eq!(by_after["items"][0]["seq"], 3);
    let (_, both) = s.get("/v1/audit?after=2&cursor=2&limit=1", &s.admin).await;
    assert_eq!(both["items"], by_after["items"]);
    for bad in [
        "/v1/audit?cursor=x",
        "/v1/audit?cursor=-1",
        "/v1/audit?after=1&cursor=2",
    ] {
        let (status, v) = s.get(bad, &s.admin).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{bad}: {v}");
        assert_eq!(code(&v), "invalid", "{bad}: {v}");
    }
}

/// Every list route's `limit` is 1 to its most, as the OpenAPI document
/// says, and every numeric query parameter refuses zero where it means
/// nothing, negatives, huge values and words: 422 naming the parameter,
/// never a page of another size.
#[tokio::test]
async fn every_limit_and_numeric_query_outside_its_range_is_refused() {
    let s = TestServer::start().await;
    let (worker, approver) = s.worker_and_approver().await;
    for i in 0..3 {
        s.create(&worker, &free_text("s-1", &format!("q{i}"))).await;
    }
    let (status, hook) = s
        .post(
            "/v1/webhooks",
            &s.admin,
            &serde_json::json!({"url": "https://example.invalid/hook"}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{hook}");
    let deliveries = format!("/v1/webhooks/{}/deliveries", hook["id"].as_str().unwrap());
    let routes: [(&str, &str, u32); 4] = [
        ("/v1/interactions?status=all&", &approver, 500),
        ("/v1/tasks?", &approver, 500),
        ("/v1/audit?", &s.admin, 10_000),
        (&format!("{deliveries}?"), &s.admin, 500),
    ];
    for (route, token, most) in routes {
        for bad in [
            "0".to_owned(),
            (most + 1).to_string(),
            "-1".into(),
            "99999999999999999999".into(),
            "many".into(),
            "1.5".into(),
        ] {
            let path = format!("{route}limit={bad}");
            let (status, e) = s.get(&path, token).await;
            assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{path}: {e}");
            assert_eq!(code(&e), "invalid", "{path}: {e}");
            assert!(
                e["error"]["message"].as_str().unwrap().contains("limit"),
                "{path}: {e}"
            );
        }
        for good in ["1", &most.to_string()] {
            let path = format!("{route}limit={good}");
            let (status, v) = s.get(&path, token).await;
            assert_eq!(status, StatusCode::OK, "{path}: {v}");
            assert!(v["items"].as_array().unwrap().len() <= good.parse().unwrap());
        }
    }
    for path in [
        "/v1/interactions?status=all&cursor=-5",
        "/v1/interactions?status=all&cursor=0",
        "/v1/tasks?cursor=-1",
        "/v1/audit?cursor=-1",
        "/v1/audit?cursor=%2B3",
        "/v1/audit?after=-1",
        "/v1/events?after=-1",
        "/v1/events?after=x",
    ] {
        let token = if path.starts_with("/v1/audit") {
            &s.admin
        } else {
            &approver
        };
        let (status, e) = s.get(path, token).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{path}: {e}");
    }
    // The OpenAPI document says what the routes take.
    let (_, doc) = s.get("/v1/openapi.json", "").await;
    for (path, most) in [
        ("/v1/interactions", 500),
        ("/v1/tasks", 500),
        ("/v1/audit", 10_000),
        ("/v1/webhooks/{id}/deliveries", 500),
    ] {
        let limit = doc["paths"][path]["get"]["parameters"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == "limit")
            .unwrap_or_else(|| panic!("{path}: no limit"));
        assert_eq!(limit["schema"]["minimum"], 1, "{path}: {limit}");
        assert_eq!(limit["schema"]["maximum"], most, "{path}: {limit}");
    }
}
