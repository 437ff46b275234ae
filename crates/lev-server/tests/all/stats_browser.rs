//! `GET /v1/stats` and the dashboard's Stats page: the report over a run
//! whose counts the test knows, its bad inputs (each a 4xx naming the
//! problem), and the page in a real headless Chromium with its inline SVG
//! chart (a screenshot saved to `target/screenshots/` for a person to look
//! at).

use reqwest::StatusCode;
use serde_json::json;

use super::browser_support::Browser;
use crate::support::{TestServer, free_text, tool_approval};

/// Two tool approvals approved and one denied (by alice and bob), one
/// pending; two free texts, one answered; one cancelled.
async fn a_known_run(s: &TestServer, worker: &str, alice: &str, bob: &str) {
    for (who, approved) in [(alice, true), (alice, true), (bob, false)] {
        let id = s.create(worker, &tool_approval("s-1", r#"{"x":1}"#)).await;
        let body = if approved {
            json!({"request_id": id, "approved": true, "scope": "once"})
        } else {
            json!({"request_id": id, "approved": false})
        };
        let (status, v) = s.respond(who, &id, &body).await;
        assert_eq!(status, StatusCode::OK, "{v}");
    }
    s.create(worker, &tool_approval("s-1", r#"{"x":2}"#)).await;
    let id = s.create(worker, &free_text("s-2", "?")).await;
    let (status, _) = s
        .respond(bob, &id, &json!({"request_id": id, "value": "yes"}))
        .await;
    assert_eq!(status, StatusCode::OK);
    s.create(worker, &free_text("s-2", "?")).await;
    let id = s.create(worker, &free_text("s-2", "?")).await;
    let (status, _) = s
        .post(&format!("/v1/interactions/{id}/cancel"), worker, &json!({}))
        .await;
    assert_eq!(status, StatusCode::OK);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stats_report_the_window_and_refuse_bad_windows() {
    let s = TestServer::start().await;
    let worker = s.token("agent-1", "worker", None).await;
    let alice = s.token("alice", "approver", None).await;
    let bob = s.token("bob", "approver", None).await;
    a_known_run(&s, &worker, &alice, &bob).await;

    let (status, v) = s.get("/v1/stats?since=1h", &alice).await;
    assert_eq!(status, StatusCode::OK, "{v}");
    assert_eq!(v["total"]["asked"], 7);
    assert_eq!(v["total"]["pending"], 2);
    let tools = &v["groups"][0];
    assert_eq!(tools["kind"], "tool_approval");
    assert_eq!(tools["rule"], "none");
    assert_eq!(tools["asked"], 4);
    assert_eq!(tools["approved"], 2);
    assert_eq!(tools["denied"], 1);
    assert_eq!(tools["approval_rate"], 2.0 / 3.0);
    assert_eq!(
        tools["top_answerers"][0],
        json!({"name": "alice", "count": 2})
    );
    let texts = &v["groups"][1];
    assert_eq!(texts["kind"], "free_text");
    assert!(texts.get("approval_rate").is_none(), "{texts}");
    assert_eq!(v["total"]["approval_rate"], 2.0 / 3.0);
    assert_eq!(
        (&texts["asked"], &texts["answered"], &texts["cancelled"]),
        (&json!(3), &json!(1), &json!(1))
    );
    // The default window is 7 days; an explicit one before the run is empty.
    let (_, all) = s.get("/v1/stats", &s.admin).await;
    assert_eq!(all["total"]["asked"], 7);
    let (status, empty) = s
        .get(
            "/v1/stats?from=2020-01-01T00:00:00Z&to=2020-01-02T00:00:00Z",
            &alice,
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{empty}");
    assert_eq!(empty["total"]["asked"], 0);
    assert_eq!(empty["groups"], json!([]));

    for (query, says) in [
        ("since=soon", "since: expected a duration"),
        ("since=400d", "since: expected at most 366d"),
        ("from=yesterday", "from: expected an RFC 3339 time"),
        ("since=1h&from=2020-01-01T00:00:00Z", "since and from"),
        (
            "from=2020-01-02T00:00:00Z&to=2020-01-01T00:00:00Z",
            "from: expected a time before to",
        ),
        (
            "from=2020-01-01T00:00:00Z&to=2022-01-01T00:00:00Z",
            "at most 366 days",
        ),
    ] {
        let (status, v) = s.get(&format!("/v1/stats?{query}"), &alice).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{query}: {v}");
        assert!(
            v["error"]["message"].as_str().unwrap().contains(says),
            "{query}: {v}"
        );
    }
    let (status, _) = s.get("/v1/stats", &worker).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_stats_page_shows_the_report_with_its_chart() {
    let s = TestServer::start().await;
    let worker = s.token("agent-1", "worker", None).await;
    let alice = s.token("alice", "approver", None).await;
    let bob = s.token("bob", "approver", None).await;
    a_known_run(&s, &worker, &alice, &bob).await;

    let b = Browser::start().await;
    b.goto(&format!("{}/#token={alice}", s.url)).await;
    b.wait_text("#me-name", "alice").await;
    b.click("#tabs a[data-view='stats']").await;
    b.wait_css("#stats-body svg.stats-chart").await;
    // One bar per (kind, rule), split by outcome, to scale.
    assert_eq!(b.count("#stats-body table.stats tbody tr").await, 2);
    assert_eq!(
        b.count("svg.stats-chart rect[data-part='approved']").await,
        1
    );
    assert_eq!(b.count("svg.stats-chart rect[data-part='denied']").await, 1);
    assert_eq!(
        b.count("svg.stats-chart rect[data-part='pending']").await,
        2
    );
    let widths = b
        .js(
            "return ['approved', 'denied'].map((p) => \
             Number(document.querySelector(`svg.stats-chart rect[data-part='${p}']`).getAttribute('width')))",
        )
        .await;
    let (approved, denied) = (widths[0].as_f64().unwrap(), widths[1].as_f64().unwrap());
    assert!((approved / denied - 2.0).abs() < 0.01, "{widths}");
    let first_row = b.text("#stats-body table.stats tbody tr").await;
    for part in ["tool_approval", "none", "67%", "33%", "alice (2)"] {
        assert!(first_row.contains(part), "{part:?} in {first_row:?}");
    }
    // The totals (labels are shown upper-case by the style sheet).
    let cards = b.text("#stats-body .stats-cards").await.to_lowercase();
    for card in [
        "asked\n7",
        "pending\n2",
        "approval rate\n67%",
        "denial rate\n33%",
    ] {
        assert!(cards.contains(card), "{card:?} in {cards:?}");
    }
    // The page draws from no other origin: no external resource loaded.
    let external = b
        .js(
            "return performance.getEntriesByType('resource').map((e) => e.name)\
             .filter((n) => !n.startsWith(location.origin))",
        )
        .await;
    assert_eq!(external, json!([]));
    let shot = b.screenshot("stats-desktop").await;
    assert!(shot.exists());
    // Another window reloads the report.
    b.click("#stats-body button[data-since='24h']").await;
    b.wait_css("#stats-body button.on[data-since='24h']").await;
    b.close().await;
}
