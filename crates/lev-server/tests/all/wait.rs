//! The long-poll: answers before and during a wait, timeouts, expiry with
//! each `on_timeout`, and waiters released at shutdown.

use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::json;

use crate::support::{TestServer, code, free_text, tool_approval};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_given_before_the_wait_is_not_missed() {
    let s = TestServer::start().await;
    let (worker, approver) = s.worker_and_approver().await;
    let id = s.create(&worker, &free_text("s-1", "fast?")).await;
    s.respond(&approver, &id, &json!({"request_id": id, "value": "yes"}))
        .await;
    let started = Instant::now();
    let (status, v) = s
        .get(&format!("/v1/interactions/{id}/wait?timeout_s=10"), &worker)
        .await;
    assert_eq!(status, StatusCode::OK);
    assert!(started.elapsed() < Duration::from_secs(2));
    assert_eq!(v["status"], "answered");
    assert_eq!(v["response"]["value"], "yes");
    assert_eq!(v["answered_by"], "alice-approver");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_is_woken_by_the_answer() {
    let s = TestServer::start().await;
    let (worker, approver) = s.worker_and_approver().await;
    let id = s
        .create(&worker, &tool_approval("s-1", r#"{"argv":["ls"]}"#))
        .await;
    let waiter = {
        let (http, url, worker) = (
            s.http.clone(),
            s.path(&format!("/v1/interactions/{id}/wait?timeout_s=20")),
            worker.clone(),
        );
        tokio::spawn(async move {
            let started = Instant::now();
            let v: serde_json::Value = http
                .get(url)
                .bearer_auth(worker)
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            (v, started.elapsed())
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (status, _) = s
        .respond(&approver, &id, &json!({"request_id": id, "approved": true}))
        .await;
    assert_eq!(status, StatusCode::OK);
    let (v, took) = waiter.await.unwrap();
    assert!(
        took < Duration::from_secs(5),
        "woken, not timed out: {took:?}"
    );
    assert_eq!(v["status"], "answered");
    assert_eq!(v["response"]["approved"], true);
    assert_eq!(
        v["approval"]["payloadType"],
        "application/vnd.lev.approval+json; version=1"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wait_that_times_out_says_pending() {
    let s = TestServer::start().await;
    let (worker, _) = s.worker_and_approver().await;
    let id = s.create(&worker, &free_text("s-1", "slow?")).await;
    let started = Instant::now();
    let (status, v) = s
        .get(&format!("/v1/interactions/{id}/wait?timeout_s=1"), &worker)
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(v, json!({"status": "pending"}));
    let took = started.elapsed();
    assert!(
        took >= Duration::from_millis(900) && took < Duration::from_secs(5),
        "{took:?}"
    );
    let (status, _) = s
        .get("/v1/interactions/ir_missing/wait?timeout_s=1", &worker)
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expiry_applies_each_on_timeout_and_wakes_the_waiter() {
    let s = TestServer::start().await;
    let (worker, approver) = s.worker_and_approver().await;

    // A tool approval defaults to deny: expired.
    let mut deny = tool_approval("s-1", "{}");
    deny["timeout_s"] = json!(1);
    let deny_id = s.create(&worker, &deny).await;
    // Free text defaults to cancel.
    let mut cancel = free_text("s-1", "anyone?");
    cancel["timeout_s"] = json!(1);
    let cancel_id = s.create(&worker, &cancel).await;
    // A multiple choice may answer itself.
    let choice = json!({
        "session_id": "s-1",
        "kind": {"type": "multiple_choice", "prompt": "which?", "options": ["a", "b", "c"]},
        "timeout_s": 1,
        "on_timeout": {"choice": 2}
    });
    let choice_id = s.create(&worker, &choice).await;

    let wait = |id: String| {
        let (http, url, worker) = (
            s.http.clone(),
            s.path(&format!("/v1/interactions/{id}/wait?timeout_s=15")),
            worker.clone(),
        );
        tokio::spawn(async move {
            let started = Instant::now();
            let v: serde_json::Value = http
                .get(url)
                .bearer_auth(worker)
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            (v, started.elapsed())
        })
    };
    let (d, c, ch) = (
        wait(deny_id.clone()),
        wait(cancel_id.clone()),
        wait(choice_id.clone()),
    );
    let (d, took) = d.await.unwrap();
    assert!(took < Duration::from_secs(5), "{took:?}");
    assert_eq!(d["status"], "expired");
    let (c, _) = c.await.unwrap();
    assert_eq!(c["status"], "cancelled");
    let (ch, _) = ch.await.unwrap();
    assert_eq!(ch["status"], "answered");
    assert_eq!(ch["response"]["choice_index"], 2);
    assert_eq!(ch["answered_by"], "timeout");

    // Past expiry no answer is taken.
    let (status, v) = s
        .respond(
            &approver,
            &deny_id,
            &json!({"request_id": deny_id, "approved": true}),
        )
        .await;
    assert_eq!(status, StatusCode::GONE, "{v}");
    let (status, v) = s
        .respond(
            &approver,
            &choice_id,
            &json!({"request_id": choice_id, "choice_index": 0}),
        )
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{v}");
    assert_eq!(v["response"]["choice_index"], 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_earlier_deadline_wakes_the_expiry_task() {
    let s = TestServer::start().await;
    let (worker, _) = s.worker_and_approver().await;
    let mut late = free_text("s-1", "later");
    late["timeout_s"] = json!(3600);
    s.create(&worker, &late).await;
    // Give the expiry task time to go to sleep towards the hour.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mut soon = free_text("s-1", "soon");
    soon["timeout_s"] = json!(1);
    let id = s.create(&worker, &soon).await;
    let (_, v) = s
        .get(&format!("/v1/interactions/{id}/wait?timeout_s=10"), &worker)
        .await;
    assert_eq!(v["status"], "cancelled");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_releases_waiters_with_503_and_refuses_new_requests() {
    let mut s = TestServer::start().await;
    let (worker, _) = s.worker_and_approver().await;
    let id = s.create(&worker, &free_text("s-1", "forever?")).await;
    let waiter = {
        let (http, url, worker) = (
            s.http.clone(),
            s.path(&format!("/v1/interactions/{id}/wait?timeout_s=60")),
            worker.clone(),
        );
        tokio::spawn(async move {
            let resp = http.get(url).bearer_auth(worker).send().await.unwrap();
            let status = resp.status();
            (status, resp.json::<serde_json::Value>().await.unwrap())
        })
    };
    // An open event stream must not hold the shutdown up either.
    let approver = s.token("watcher", "approver", None).await;
    let mut events = s
        .req(reqwest::Method::GET, "/v1/events", &approver)
        .send()
        .await
        .unwrap();
    assert_eq!(events.status(), StatusCode::OK);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let started = Instant::now();
    let stopping = s.begin_stop();
    let (status, v) = waiter.await.unwrap();
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{v}");
    assert_eq!(code(&v), "shutting_down");
    stopping.await.unwrap().unwrap();
    assert!(started.elapsed() < Duration::from_secs(5));
    // The event stream ended rather than being cut.
    while let Ok(Some(_)) = events.chunk().await {}
    // Nothing listens any more.
    assert!(s.http.get(s.path("/v1/health")).send().await.is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_during_shutdown_get_503() {
    let s = TestServer::start().await;
    s.state.begin_shutdown();
    let (status, v) = s.get("/v1/health", "").await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{v}");
    assert_eq!(code(&v), "shutting_down");
}
