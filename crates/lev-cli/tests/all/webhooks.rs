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

/// The receivers here listen on loopback, which webhooks may reach only
/// when the server is told so.
const LOOPBACK: &str = "127.0.0.0/8";

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
    let server = LevServer::start_with(
        "webhooks",
        &[
            "--webhook-retry",
            "200ms,1s,1h",
            "--webhook-allow",
            LOOPBACK,
        ],
    );
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
    let server = LevServer::start_with(
        "webhooks-gone",
        &[
            "--webhook-retry",
            "200ms,1s,1h",
            "--webhook-allow",
            LOOPBACK,
        ],
    );
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

fn reminders(all: &[Request], id: &str) -> Vec<u64> {
    let mut out: Vec<u64> = all
        .iter()
        .filter(|r| r.status == 200)
        .map(Request::json)
        .filter(|b| b["type"] == "interaction.reminder" && b["data"]["request"]["id"] == id)
        .map(|b| b["data"]["reminder"]["n"].as_u64().unwrap())
        .collect();
    out.sort_unstable();
    out
}

#[test]
fn pending_interactions_are_reminded_once_per_interval_until_answered() {
    let rx = Receiver::start(fail_first(0));
    // An ask rule with its own interval; the server default for the rest.
    let dir = crate::support::Scratch::new("remind-policy");
    std::fs::write(
        dir.path("policy.toml"),
        "[[rule]]\ntool = \"deploy\"\ndecision = \"ask\"\nremind_after_s = 1\n",
    )
    .unwrap();
    let server = LevServer::start_with(
        "webhooks-remind",
        &[
            "--remind-after",
            "2s",
            "--policy",
            dir.path("policy.toml").to_str().unwrap(),
            "--webhook-retry",
            "200ms,1s,1h",
            "--webhook-allow",
            LOOPBACK,
        ],
    );
    server.lev(&[
        "webhook",
        "add",
        &rx.url("/"),
        "--events",
        "interaction.reminder",
    ]);
    let q = server.create("s-remind", free_text("ready?"));
    let gate = lev_protocol::api::GateRequest {
        session_id: "s-remind".into(),
        conversation_id: "c-1".into(),
        turn_id: "t-1".into(),
        request_id: "call-1".into(),
        caller: "alice".into(),
        tool_name: "deploy".into(),
        args_json: r#"{"env":"prod"}"#.into(),
        sandbox_mode: "read-only".into(),
        required_capabilities: vec![],
        timeout_s: None,
        route: None,
        reason: None,
    };
    let deploy = match block_on(server.client().gate(&gate)).unwrap() {
        lev_protocol::api::GateResponse::Ask { interaction_id } => interaction_id,
        other => panic!("expected an ask, found {other:?}"),
    };
    // The rule's 1 s: reminders 1, 2, 3 come before the default's first.
    let all = rx.wait_for("three reminders of the deploy", |all| {
        reminders(all, &deploy).len() >= 3
    });
    assert_eq!(reminders(&all, &deploy)[..3], [1, 2, 3]);
    assert!(reminders(&all, q.id()).len() <= 1, "every 2 s: {all:#?}");
    let all = rx.wait_for("the question's first reminder", |all| {
        !reminders(all, q.id()).is_empty()
    });
    let body = all
        .iter()
        .map(Request::json)
        .find(|b| b["type"] == "interaction.reminder" && b["data"]["request"]["id"] == q.id())
        .unwrap();
    assert!(body["data"]["reminder"]["pending_s"].as_u64().unwrap() >= 2);

    // Answered: no more reminders; each number was sent once.
    block_on(
        server
            .client()
            .respond(q.id(), &InteractionResponse::text(q.id(), "yes")),
    )
    .unwrap();
    assert_code(&server.lev(&["respond", &deploy, "--deny"]), 0);
    std::thread::sleep(std::time::Duration::from_millis(300));
    let settled = rx.requests().len();
    std::thread::sleep(std::time::Duration::from_millis(2500));
    let all = rx.requests();
    assert_eq!(all.len(), settled, "no reminder after the answer");
    for id in [q.id(), deploy.as_str()] {
        let ns = reminders(&all, id);
        let mut unique = ns.clone();
        unique.dedup();
        assert_eq!(ns, unique, "each reminder once: {ns:?}");
    }
}

#[test]
fn bad_reminder_and_retry_flags_stop_the_server_with_the_flag_named() {
    let dir = crate::support::Scratch::new("remind-bad");
    let data = dir.path("data");
    for (args, expected) in [
        (vec!["--remind-after", "soon"], "--remind-after"),
        (vec!["--remind-after", "0s"], "--remind-after"),
        (vec!["--webhook-retry", "5s,1h"], "--webhook-retry"),
        (vec!["--webhook-retry", "5s,1s,1h"], "BASE <= CAP"),
    ] {
        let mut all = vec![
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--data-dir",
            data.to_str().unwrap(),
        ];
        all.extend(args.iter());
        let run = crate::support::lev(all);
        assert_ne!(run.code, 0);
        assert!(run.stderr.contains(expected), "{args:?}: {}", run.stderr);
    }
    std::fs::write(
        dir.path("p.toml"),
        "[[rule]]\ntool = \"x\"\ndecision = \"allow\"\nremind_after_s = 5\n",
    )
    .unwrap();
    let run = crate::support::lev(["policy", "check", dir.path("p.toml").to_str().unwrap()]);
    assert_ne!(run.code, 0);
    assert!(
        run.stderr.contains("remind_after_s") && run.stderr.contains("line 1"),
        "{}",
        run.stderr
    );
}

#[test]
fn a_hanging_receiver_does_not_slow_requests() {
    // Answers after 8 s: every delivery hangs that long.
    let slow = Receiver::start(Arc::new(|_: &Request, _: &[Request]| {
        std::thread::sleep(std::time::Duration::from_secs(8));
        (200, vec![], vec![])
    }));
    let server = LevServer::start_with("webhooks-slow", &["--webhook-allow", LOOPBACK]);
    server.lev(&["webhook", "add", &slow.url("/")]);
    let client = server.client();
    let started = std::time::Instant::now();
    let mut slowest = std::time::Duration::ZERO;
    for i in 0..60 {
        let t = std::time::Instant::now();
        let q = block_on(
            client.create_interaction(&lev_protocol::InteractionRequest::new(
                "s-slow",
                free_text(&format!("q{i}")),
            )),
        )
        .unwrap();
        block_on(client.respond(q.id(), &InteractionResponse::text(q.id(), "ok"))).unwrap();
        slowest = slowest.max(t.elapsed());
    }
    // 120 deliveries wait on a receiver that takes 8 s each, 32 at a time;
    // the requests did not wait for them.
    assert!(
        started.elapsed() < std::time::Duration::from_secs(6),
        "60 create+answer took {:?}",
        started.elapsed()
    );
    assert!(
        slowest < std::time::Duration::from_secs(2),
        "slowest {slowest:?}"
    );
    // And the deliveries were under way meanwhile: 32 held connections.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while slow.accepted.load(std::sync::atomic::Ordering::SeqCst) < 32 {
        assert!(
            std::time::Instant::now() < deadline,
            "deliveries never started"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// A copy of the database alone holds no usable webhook secret: it is
/// sealed with the data dir's secrets.key (0600), and still works after a
/// restart.
#[test]
fn webhook_secrets_are_sealed_at_rest() {
    let rx = Receiver::start(fail_first(0));
    let server = LevServer::start_with("webhooks-sealed", &["--webhook-allow", LOOPBACK]);
    let add = server
        .lev(&["webhook", "add", &rx.url("/"), "--json"])
        .json();
    let secret = add["secret"].as_str().unwrap().to_owned();
    let key_file = server.data_dir().join("secrets.key");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(&key_file).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "secrets.key is the owner's alone");
    }
    let db = std::fs::read(server.db()).unwrap();
    let wal = std::fs::read(server.db().with_extension("db-wal")).unwrap_or_default();
    let needle = secret.trim_start_matches("whsec_").as_bytes();
    for (name, bytes) in [("lev.db", &db), ("lev.db-wal", &wal)] {
        assert!(
            !bytes.windows(needle.len()).any(|w| w == needle),
            "the secret is in {name} in clear"
        );
    }
    let server = server.restart();
    server.create("s-sealed", free_text("after a restart"));
    let all = rx.wait_for("a delivery after the restart", |all| !all.is_empty());
    verify(&all[0], &secret_key(&secret).unwrap());
}

/// POST /v1/webhooks as the admin: the status and the body.
fn post_webhook(server: &LevServer, url: &str) -> (u16, Value) {
    block_on(async {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let r = reqwest::Client::builder()
            .no_proxy()
            .build()
            .unwrap()
            .post(format!("{}/v1/webhooks", server.url))
            .bearer_auth(&server.admin)
            .json(&serde_json::json!({"url": url, "events": ["*"]}))
            .send()
            .await
            .unwrap();
        (r.status().as_u16(), r.json().await.unwrap_or(Value::Null))
    })
}

/// Issue 28: the own-listener check compared the URL's text, so `127.1`,
/// `0x7f000001`, `2130706433`, `0177.0.0.1`, `[::ffff:127.0.0.1]` and
/// percent-encoded hosts passed and deliveries reached lev. Hosts are read
/// as the URL standard reads them: every spelling of lev's own listener,
/// of loopback, of this host, of link-local and metadata addresses is 422
/// naming the problem, through the API and `lev webhook add`; nothing is
/// added.
#[test]
fn every_spelling_of_loopback_metadata_and_lev_itself_is_refused() {
    let server = LevServer::start("webhooks-spellings");
    let port = server.url.rsplit(':').next().unwrap().to_owned();
    let loopbacks = [
        "127.0.0.1",
        "127.1",
        "0x7f000001",
        "2130706433",
        "0177.0.0.1",
        "0x7f.0.0.1",
        "127.0.0.1.",
        "%31%32%37.0.0.1",
        "%31%32%37%2E0%2E0%2E1",
        "\u{ff11}\u{ff12}\u{ff17}.\u{ff10}.\u{ff10}.\u{ff11}",
        "[::1]",
        "[::ffff:127.0.0.1]",
        "[::ffff:7f00:1]",
        "[::127.0.0.1]",
        "[64:ff9b::7f00:1]",
        "[2002:7f00:1::]",
        "localhost",
        "LocalHost.",
        "hooks.localhost",
    ];
    for host in loopbacks {
        // lev itself, on its own port.
        let url = format!("http://{host}:{port}/v1/health");
        let (status, v) = post_webhook(&server, &url);
        assert_eq!(status, 422, "{url}: {v}");
        let message = v["error"]["message"].as_str().unwrap();
        assert!(message.contains("own listener"), "{url}: {message}");
        // Any other port on loopback.
        let url = format!("http://{host}:9/hook");
        let (status, v) = post_webhook(&server, &url);
        assert_eq!(status, 422, "{url}: {v}");
        assert_eq!(v["error"]["code"], "invalid", "{v}");
        let message = v["error"]["message"].as_str().unwrap();
        assert!(
            message.contains("loopback") && message.contains("--webhook-allow"),
            "{url}: {message}"
        );
    }
    for (url, what) in [
        ("http://0.0.0.0:9/", "unspecified"),
        ("http://0:9/", "unspecified"),
        ("http://[::]:9/", "unspecified"),
        (&format!("http://0.0.0.0:{port}/") as &str, "own listener"),
        ("http://169.254.169.254/latest/meta-data/", "metadata"),
        ("http://0xa9fea9fe/", "metadata"),
        ("http://[::ffff:169.254.169.254]/", "metadata"),
        ("http://[fd00:ec2::254]/", "metadata"),
        ("http://100.100.100.200/", "metadata"),
        (
            "http://metadata.google.internal/computeMetadata/v1/",
            "metadata",
        ),
        ("http://169.254.10.1/", "link-local"),
        ("http://[fe80::1]/", "link-local"),
        ("http://224.0.0.1/", "multicast"),
    ] {
        let (status, v) = post_webhook(&server, url);
        assert_eq!(status, 422, "{url}: {v}");
        let message = v["error"]["message"].as_str().unwrap();
        assert!(message.contains(what), "{url}: {message}");
    }
    // The CLI says the same.
    let run = server.lev(&["webhook", "add", "http://0x7f000001:9/"]);
    assert_code(&run, 1);
    assert!(
        run.stderr
            .contains("0x7f000001:9 reaches 127.0.0.1, a loopback address"),
        "{}",
        run.stderr
    );
    // Nothing was added; a private address is fine.
    assert_eq!(
        server.lev(&["webhook", "ls", "--json"]).json(),
        serde_json::json!([])
    );
    let (status, v) = post_webhook(&server, "http://10.20.30.40:8080/hook");
    assert_eq!(status, 201, "{v}");
}

/// This machine's name (it resolves to loopback or to an address of this
/// host, wherever the tests run).
fn this_hosts_name() -> String {
    let name = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|n| n.trim().to_owned())
        .unwrap_or_default();
    assert!(!name.is_empty(), "no host name");
    use std::net::ToSocketAddrs as _;
    let addrs: Vec<_> = (name.as_str(), 80).to_socket_addrs().unwrap().collect();
    assert!(
        addrs
            .iter()
            .all(|a| std::net::UdpSocket::bind((a.ip(), 0)).is_ok()),
        "{name} resolves to {addrs:?}, not only to this host"
    );
    name
}

/// A name is judged by what it resolves to when lev connects: this host's
/// name (here loopback) passes `webhook add`, and every attempt to it,
/// lev's own port included, is recorded as refused; nothing reaches the
/// receiver listening there, nor lev.
#[test]
fn a_name_of_this_host_is_refused_when_connecting() {
    let rx = Receiver::start(fail_first(0));
    let server = LevServer::start_with("webhooks-dns", &["--webhook-retry", "200ms,1s,1h"]);
    let port = server.url.rsplit(':').next().unwrap().to_owned();
    let name = this_hosts_name();
    let mut ids = Vec::new();
    for url in [
        format!("http://{name}:{}/hook", rx.port),
        format!("http://{}:{port}/v1/webhooks", name.to_uppercase()),
    ] {
        let add = server.lev(&["webhook", "add", &url, "--json"]);
        assert_code(&add, 0);
        ids.push(add.json()["id"].as_str().unwrap().to_owned());
    }
    server.create("s-dns", free_text("anyone?"));
    for id in &ids {
        let mut errors = Vec::new();
        for _ in 0..100 {
            let log = server.lev(&["webhook", "deliveries", id, "--json"]).json();
            errors = log[0]["attempts"].as_array().cloned().unwrap_or_default();
            if !errors.is_empty() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        assert!(!errors.is_empty(), "{id}: no attempt recorded");
        for attempt in &errors {
            assert_eq!(attempt["status"], Value::Null, "{id}: {attempt}");
            let error = attempt["error"].as_str().unwrap();
            assert!(
                error.contains("refused: ")
                    && ["loopback", "this host", "own listener"]
                        .iter()
                        .any(|w| error.contains(w)),
                "{id}: {error}"
            );
        }
    }
    std::thread::sleep(std::time::Duration::from_millis(500));
    assert!(rx.requests().is_empty(), "{:?}", rx.requests());
}
