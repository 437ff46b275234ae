//! Create (idempotent by id), list with a cursor, get, cancel, the pending cap.

use lev_server::Settings;
use reqwest::StatusCode;
use serde_json::json;

use crate::support::{TestServer, code, free_text};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_assigns_a_sortable_id_and_returns_the_stored_request() {
    let s = TestServer::start().await;
    let (worker, _) = s.worker_and_approver().await;
    let (status, first) = s
        .post("/v1/interactions", &worker, &free_text("s-1", "why?"))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{first}");
    let id = first["id"].as_str().unwrap();
    assert!(id.starts_with("ir_") && id.len() == 29, "{id}");
    assert_eq!(first["status"], "pending");
    assert_eq!(first["session_id"], "s-1");
    assert_eq!(first["kind"]["prompt"], "why?");
    assert!(first["created_at"].is_string());
    assert!(first["expires_at"].is_null());
    let (_, second) = s
        .post("/v1/interactions", &worker, &free_text("s-1", "and?"))
        .await;
    assert!(
        second["id"].as_str().unwrap() > id,
        "ids sort by creation time"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_id_is_idempotent_and_a_different_body_conflicts() {
    let s = TestServer::start().await;
    let (worker, _) = s.worker_and_approver().await;
    let mut body = free_text("s-1", "deploy?");
    body["id"] = json!("client-id-1");
    body["timeout_s"] = json!(600);
    let (status, first) = s.post("/v1/interactions", &worker, &body).await;
    assert_eq!(status, StatusCode::CREATED, "{first}");
    assert_eq!(first["id"], "client-id-1");
    let (status, again) = s.post("/v1/interactions", &worker, &body).await;
    assert_eq!(status, StatusCode::OK, "{again}");
    assert_eq!(again, first, "the same stored request");
    body["kind"]["prompt"] = json!("deploy now?");
    let (status, conflict) = s.post("/v1/interactions", &worker, &body).await;
    assert_eq!(status, StatusCode::CONFLICT, "{conflict}");
    assert_eq!(code(&conflict), "id_conflict");
    // A client id must follow the identifier rules.
    body["id"] = json!("bad id/with slash");
    let (status, bad) = s.post("/v1/interactions", &worker, &body).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{bad}");
    assert!(bad["error"]["message"].as_str().unwrap().starts_with("id:"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_pages_newest_first_with_a_cursor_and_filters() {
    let s = TestServer::start().await;
    let (worker, approver) = s.worker_and_approver().await;
    let mut ids = Vec::new();
    for i in 0..5 {
        ids.push(
            s.create(&worker, &free_text("s-list", &format!("q{i}")))
                .await,
        );
    }
    s.create(&worker, &free_text("s-other", "elsewhere")).await;
    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let mut path = "/v1/interactions?session_id=s-list&limit=2".to_owned();
        if let Some(c) = &cursor {
            path.push_str(&format!("&cursor={c}"));
        }
        let (status, page) = s.get(&path, &approver).await;
        assert_eq!(status, StatusCode::OK, "{page}");
        let items = page["items"].as_array().unwrap();
        assert!(items.len() <= 2);
        for item in items {
            seen.push(item["request"]["id"].as_str().unwrap().to_owned());
            assert!(item["response"].is_null());
        }
        match page["next_cursor"].as_str() {
            Some(c) => cursor = Some(c.to_owned()),
            None => break,
        }
    }
    ids.reverse();
    assert_eq!(seen, ids, "newest first, each once");

    // Status filter: answer one, then list answered / pending / all.
    let (status, _) = s
        .respond(
            &approver,
            &ids[0],
            &json!({"request_id": ids[0], "value": "ok"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    let count = |v: &serde_json::Value| v["items"].as_array().unwrap().len();
    let (_, answered) = s
        .get(
            "/v1/interactions?status=answered&session_id=s-list",
            &approver,
        )
        .await;
    assert_eq!(count(&answered), 1);
    let (_, pending) = s.get("/v1/interactions?session_id=s-list", &approver).await;
    assert_eq!(count(&pending), 4, "default status is pending");
    let (_, all) = s.get("/v1/interactions?status=all", &approver).await;
    assert_eq!(count(&all), 6);
    let (status, bad) = s.get("/v1/interactions?status=done", &approver).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{bad}");
    let (status, bad) = s.get("/v1/interactions?cursor=xyz", &approver).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{bad}");
    let (status, bad) = s.get("/v1/interactions?limit=many", &approver).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{bad}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_returns_request_response_and_approval() {
    let s = TestServer::start().await;
    let (worker, approver) = s.worker_and_approver().await;
    let id = s.create(&worker, &free_text("s-1", "name?")).await;
    let (status, view) = s.get(&format!("/v1/interactions/{id}"), &worker).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(view["request"]["id"], id.as_str());
    assert!(view["response"].is_null() && view["approval"].is_null());
    s.respond(&approver, &id, &json!({"request_id": id, "value": "Ada"}))
        .await;
    let (_, view) = s.get(&format!("/v1/interactions/{id}"), &approver).await;
    assert_eq!(view["request"]["status"], "answered");
    assert_eq!(view["request"]["answered_by"], "alice-approver");
    assert_eq!(view["response"]["value"], "Ada");
    let (status, missing) = s.get("/v1/interactions/ir_nope", &worker).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(code(&missing), "not_found");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_is_final_and_idempotent() {
    let s = TestServer::start().await;
    let (worker, approver) = s.worker_and_approver().await;
    let id = s.create(&worker, &free_text("s-1", "still there?")).await;
    let cancel = format!("/v1/interactions/{id}/cancel");
    let (status, view) = s.post(&cancel, &worker, &json!({})).await;
    assert_eq!(status, StatusCode::OK, "{view}");
    assert_eq!(view["request"]["status"], "cancelled");
    let (status, _) = s.post(&cancel, &worker, &json!({})).await;
    assert_eq!(status, StatusCode::OK, "cancelling twice changes nothing");
    let (status, gone) = s
        .respond(&approver, &id, &json!({"request_id": id, "value": "late"}))
        .await;
    assert_eq!(status, StatusCode::GONE, "{gone}");
    assert_eq!(code(&gone), "gone");

    // Cancelling an answered interaction: 409 with the winner.
    let id = s.create(&worker, &free_text("s-1", "quick")).await;
    s.respond(&approver, &id, &json!({"request_id": id, "value": "done"}))
        .await;
    let (status, conflict) = s
        .post(
            &format!("/v1/interactions/{id}/cancel"),
            &worker,
            &json!({}),
        )
        .await;
    assert_eq!(status, StatusCode::CONFLICT);
    assert_eq!(code(&conflict), "already_answered");
    assert_eq!(conflict["response"]["value"], "done");
    let (status, _) = s
        .post("/v1/interactions/ir_missing/cancel", &worker, &json!({}))
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn too_many_pending_in_a_session_is_429() {
    let s = TestServer::start_with(Settings {
        max_pending_per_session: 3,
        ..Settings::default()
    })
    .await;
    let (worker, _) = s.worker_and_approver().await;
    for i in 0..3 {
        s.create(&worker, &free_text("s-full", &format!("{i}")))
            .await;
    }
    let (status, v) = s
        .post(
            "/v1/interactions",
            &worker,
            &free_text("s-full", "one more"),
        )
        .await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "{v}");
    assert_eq!(code(&v), "too_many");
    // Another session is not affected.
    s.create(&worker, &free_text("s-free", "fine")).await;
}
