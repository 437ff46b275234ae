//! `lev webhook` and the deliveries a real receiver gets: Standard Webhooks
//! signatures, the same id on every retry, retries through a receiver that
//! fails and one that is down across a server restart, 410 disabling the
//! endpoint, and bad input named.

use std::collections::BTreeMap;
use std::sync::Arc;

use lev_protocol::{InteractionKind, InteractionResponse};
use lev_server::webhooks::{secret_key, sign};
use serde_json::Value;

use crate::client_env::{LevServer, assert_code, block_on};
use crate::receiver::{Receiver, Request};

fn free_text(prompt: &str) -> InteractionKind {
    InteractionKind::FreeText {
        prompt: prompt.into(),
    }
}

/// Check a delivery as a receiver would.
fn verify(r: &Request, key: &[u8]) {
    let now = time::OffsetDateTime::now_utc().unix_timestamp();
    sign::verify(
        key,
        r.header("webhook-id").expect("webhook-id"),
        r.header("webhook-timestamp").expect("webhook-timestamp"),
        r.header("webhook-signature").expect("webhook-signature"),
        &r.body,
        now,
        300,
    )
    .unwrap_or_else(|e| panic!("{e}: {r:?}"));
    assert_eq!(r.header("content-type"), Some("application/json"));
}

/// Fail the first `n` attempts of every webhook-id with 503.
fn fail_first(n: usize) -> Arc<crate::receiver::Respond> {
    Arc::new(move |req: &Request, before: &[Request]| {
        let id = req.header("webhook-id").unwrap_or_default();
        let seen = before
            .iter()
            .filter(|r| r.header("webhook-id") == Some(id))
            .count();
        if seen < n {
            (503, vec![], b"busy, try later".to_vec())
        } else {
            (200, vec![], Vec::new())
        }
    })
}

fn delivered(all: &[Request]) -> BTreeMap<String, Request> {
    all.iter()
        .filter(|r| r.status == 200)
        .map(|r| {
            (
                r.header("webhook-id").unwrap_or_default().to_owned(),
                r.clone(),
            )
        })
        .collect()
}

#[test]
fn deliveries_are_signed_retried_and_survive_a_restart() {
    let rx = Receiver::start(fail_first(2));
    let server = LevServer::start_with("webhooks", &["--webhook-retry", "200ms,1s,1h"]);
    let add = server
        .lev(&[
            "webhook",
            "add",
            &rx.url("/hook"),
            "--events",
            "interaction.created,interaction.answered",
            "--json",
        ])
        .json();
    let id = add["id"].as_str().unwrap().to_owned();
    let secret = add["secret"].as_str().unwrap().to_owned();
    assert!(secret.starts_with("whsec_"), "{secret}");
    let key = secret_key(&secret).unwrap();

    let q = server.create("s-wh", free_text("deploy?"));
    block_on(
        server
            .client()
            .respond(q.id(), &InteractionResponse::text(q.id(), "yes")),
    )
    .unwrap();
    // A kind the endpoint did not ask for is not delivered.
    block_on(
        server
            .client()
            .cancel(server.create("s-wh", free_text("x")).id()),
    )
    .unwrap();

    let all = rx.wait_for("two deliveries taken", |all| delivered(all).len() == 3);
    let ok = delivered(&all);
    let kinds: Vec<String> = ok
        .values()
        .map(|r| r.json()["type"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        kinds.iter().filter(|k| *k == "interaction.created").count(),
        2,
        "{kinds:?}"
    );
    assert_eq!(
        kinds
            .iter()
            .filter(|k| *k == "interaction.answered")
            .count(),
        1
    );
    for (wid, last) in &ok {
        // Three attempts, each signed, same id, same bytes.
        let attempts: Vec<&Request> = all
            .iter()
            .filter(|r| r.header("webhook-id") == Some(wid.as_str()))
            .collect();
        assert_eq!(attempts.len(), 3, "{attempts:#?}");
        for a in &attempts {
            verify(a, &key);
            assert_eq!(a.body, last.body, "the same body on every retry");
            assert_eq!(a.method, "POST");
            assert_eq!(a.path, "/hook");
        }
        let body = last.json();
        assert!(body["timestamp"].is_string());
        if body["type"] == "interaction.answered" {
            assert_eq!(body["data"]["request"]["id"], q.id());
            assert_eq!(body["data"]["response"]["value"], "yes");
        }
    }

    // The delivery log shows every attempt.
    let log = server.lev(&["webhook", "deliveries", &id, "--json"]).json();
    let log = log.as_array().unwrap();
    assert_eq!(log.len(), 3);
    for d in log {
        assert_eq!(d["state"], "delivered", "{d}");
        let statuses: Vec<&Value> = d["attempts"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| &a["status"])
            .collect();
        assert_eq!(
            statuses,
            [&Value::from(503), &Value::from(503), &Value::from(200)]
        );
        assert!(
            d["attempts"][0]["error"]
                .as_str()
                .unwrap()
                .contains("busy, try later")
        );
    }
    let text = server.lev(&["webhook", "deliveries", &id]);
    assert_code(&text, 0);
    assert!(text.stdout.contains("HTTP 503"), "{}", text.stdout);

    // The receiver goes down; an event commits; the server is killed and
    // restarted; the receiver comes back: the delivery arrives, once taken.
    let port = rx.port;
    let before = rx.stop();
    let q2 = server.create("s-wh", free_text("still there?"));
    std::thread::sleep(std::time::Duration::from_millis(700));
    let server = server.restart();
    let rx = Receiver::start_on(port, fail_first(0));
    let all = rx.wait_for("the delivery after the restart", |all| {
        all.iter()
            .any(|r| r.json()["data"]["request"]["id"] == q2.id())
    });
    let got = all
        .iter()
        .find(|r| r.json()["data"]["request"]["id"] == q2.id())
        .unwrap();
    verify(got, &key);
    assert!(
        before
            .iter()
            .all(|r| r.header("webhook-id") != got.header("webhook-id")),
        "a new delivery, not an old one"
    );
    let log = server.lev(&["webhook", "deliveries", &id, "--json"]).json();
    let d = log
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["id"].as_str() == got.header("webhook-id"))
        .unwrap()
        .clone();
    // Wait for the success to be recorded.
    let mut state = d["state"].clone();
    for _ in 0..100 {
        if state == "delivered" {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
        let log = server.lev(&["webhook", "deliveries", &id, "--json"]).json();
        state = log[0]["state"].clone();
    }
    assert_eq!(state, "delivered");
    let log = server.lev(&["webhook", "deliveries", &id, "--json"]).json();
    let attempts = log[0]["attempts"].as_array().unwrap();
    assert!(
        attempts.iter().any(|a| a["status"].is_null()),
        "a refused connection is an attempt: {attempts:?}"
    );
    assert_eq!(attempts.last().unwrap()["status"], 200);
}

#[test]
fn a_gone_receiver_disables_its_endpoint_and_removal_stops_deliveries() {
    let gone = Receiver::start(Arc::new(|_: &Request, _: &[Request]| (410, vec![], vec![])));
    let server = LevServer::start_with("webhooks-gone", &["--webhook-retry", "200ms,1s,1h"]);
    let add = server
        .lev(&["webhook", "add", &gone.url("/"), "--json"])
        .json();
    let id = add["id"].as_str().unwrap().to_owned();
    assert_eq!(add["events"], serde_json::json!([]), "every event");
    server.create("s-gone", free_text("one"));
    gone.wait_for("the first delivery", |all| !all.is_empty());
    let mut listed = Value::Null;
    for _ in 0..100 {
        listed = server.lev(&["webhook", "ls", "--json"]).json();
        if !listed[0]["disabled_at"].is_null() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert_eq!(listed[0]["id"], id.as_str());
    assert!(!listed[0]["disabled_at"].is_null(), "{listed}");
    assert!(
        listed[0]["disabled_reason"]
            .as_str()
            .unwrap()
            .contains("410")
    );
    let text = server.lev(&["webhook", "ls"]);
    assert!(text.stdout.contains("disabled"), "{}", text.stdout);
    // Disabled: later events are not delivered.
    server.create("s-gone", free_text("two"));
    std::thread::sleep(std::time::Duration::from_millis(600));
    assert_eq!(gone.requests().len(), 1);
    assert!(
        listed[0].get("secret").is_none(),
        "secrets are never listed"
    );

    // Removed: gone from the list, its log 404.
    assert_code(&server.lev(&["webhook", "rm", &id]), 0);
    assert_eq!(
        server.lev(&["webhook", "ls", "--json"]).json(),
        serde_json::json!([])
    );
    let run = server.lev(&["webhook", "deliveries", &id]);
    assert_code(&run, 1);
    assert!(run.stderr.contains("404"), "{}", run.stderr);
    let run = server.lev(&["webhook", "rm", &id]);
    assert_code(&run, 1);

    // The audit log has the endpoint's life.
    let audit = server.lev(&["audit", "--json"]);
    for action in ["webhook.created", "webhook.disabled", "webhook.deleted"] {
        assert!(audit.stdout.contains(action), "{action}: {}", audit.stdout);
    }
}

#[test]
fn bad_webhooks_are_refused_with_the_field_named() {
    let server = LevServer::start("webhooks-bad");
    let bad = |args: &[&str], expected: &str| {
        let mut all = vec!["webhook", "add"];
        all.extend_from_slice(args);
        let run = server.lev(&all);
        assert_code(&run, 1);
        assert!(
            run.stderr.contains(expected),
            "{args:?}: expected {expected:?} in:\n{}",
            run.stderr
        );
    };
    bad(&["ftp://example.com/x"], "http:// or https://");
    bad(&["example.com/hook"], "http:// or https://");
    bad(&["https://user:pw@example.com/"], "passwords");
    bad(&["http://"], "host");
    let own = format!("{}/v1/health", server.url);
    bad(&[&own], "own listener");
    let own_localhost = server.url.replace("127.0.0.1", "localhost");
    bad(&[&own_localhost], "own listener");
    bad(
        &[
            "https://example.com/",
            "--events",
            "interaction.created,nope",
        ],
        "unknown event \"nope\"",
    );
    let missing = server.dir.path("no-such-secret");
    bad(
        &[
            "https://example.com/",
            "--secret-file",
            missing.to_str().unwrap(),
        ],
        "--secret-file",
    );
    let weak = server.dir.path("weak.secret");
    std::fs::write(&weak, "whsec_c2hvcnQ=\n").unwrap();
    bad(
        &[
            "https://example.com/",
            "--secret-file",
            weak.to_str().unwrap(),
        ],
        "secret: expected whsec_",
    );
    // A given secret is kept (trimmed) and works.
    let good = server.dir.path("good.secret");
    std::fs::write(&good, "  whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw \n").unwrap();
    let add = server
        .lev(&[
            "webhook",
            "add",
            "https://example.com/",
            "--secret-file",
            good.to_str().unwrap(),
            "--events",
            "*",
            "--json",
        ])
        .json();
    assert_eq!(add["secret"], "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw");
    // Only an admin may manage webhooks.
    let approver = server
        .lev(&["token", "create", "ann", "--role", "approver", "--json"])
        .json();
    let run = server.lev_with(
        &["webhook", "ls"],
        &[("LEV_TOKEN", approver["token"].as_str().unwrap())],
        b"",
    );
    assert_code(&run, 1);
    assert!(run.stderr.contains("403"), "{}", run.stderr);
    // Nothing half-made.
    assert_eq!(
        server
            .lev(&["webhook", "ls", "--json"])
            .json()
            .as_array()
            .unwrap()
            .len(),
        1
    );
}
