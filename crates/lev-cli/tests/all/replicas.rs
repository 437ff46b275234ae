//! Several `lev serve` replicas on one PostgreSQL database (SPEC section
//! 11), as processes: an answer given on one wakes the waiter on another;
//! the operator connected to one answers the asks of workers on the other;
//! when its replica is killed it reconnects to the other, gets `hello` with
//! the unresolved req_ids, and its reply completes the waiting call. Under
//! load, a replica killed with SIGKILL and PostgreSQL itself crashed and
//! restarted lose nothing acknowledged; while the database is down requests
//! answer 503 `store_unavailable`, and the servers reconnect by themselves.
//! Nothing one replica keeps to itself outlives a change on another: a token
//! revoked on A is refused on B within 100 ms (also when B's notification
//! connection was cut as it happened), a key rotated on A signs on B within
//! a second, and a Slack request A took is a replay on B.

use std::process::Command;
use std::time::{Duration, Instant};

use futures_util::{SinkExt as _, StreamExt as _};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest as _;

use crate::spawned::Spawned;
use crate::support::{Scratch, lev};

/// The server the tests may create databases on.
pub(crate) fn admin_url() -> String {
    std::env::var("LEV_TEST_POSTGRES_URL")
        .ok()
        .filter(|u| !u.is_empty())
        .unwrap_or_else(|| "postgres://postgres@127.0.0.1:5432/postgres".to_owned())
}

/// A database of the test's own, dropped when done.
pub(crate) struct Database {
    name: String,
    pub(crate) url: String,
}

fn psql(sql: &str) {
    let out = Command::new("psql")
        .args([admin_url().as_str(), "-v", "ON_ERROR_STOP=1", "-qc", sql])
        .output()
        .expect("psql runs (PostgreSQL's client; bash scripts/services.sh starts the server)");
    assert!(
        out.status.success(),
        "psql {sql:?}: {}\nhint: bash scripts/services.sh starts PostgreSQL",
        String::from_utf8_lossy(&out.stderr)
    );
}

impl Database {
    pub(crate) fn new(tag: &str) -> Self {
        let name = format!(
            "lev_r_{tag}_{}_{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .subsec_nanos()
        );
        psql(&format!("CREATE DATABASE {name}"));
        let admin = admin_url();
        let (scheme, rest) = admin.split_once("://").unwrap();
        let authority = rest.split('/').next().unwrap();
        Self {
            url: format!("{scheme}://{authority}/{name}"),
            name,
        }
    }
}

impl Drop for Database {
    fn drop(&mut self) {
        if self.name.is_empty() {
            return;
        }
        let _ = Command::new("psql")
            .args([
                admin_url().as_str(),
                "-qc",
                &format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.name),
            ])
            .output();
    }
}

/// Two replicas on one database, with one key-encryption key.
struct Cluster {
    a: Spawned,
    b: Spawned,
    admin: String,
    http: reqwest::Client,
    _db: Database,
    _dir: Scratch,
}

fn replica(dir: &Scratch, name: &str, db: &Database) -> Spawned {
    replica_with(dir, name, db, &[])
}

fn replica_with(dir: &Scratch, name: &str, db: &Database, extra: &[&str]) -> Spawned {
    Spawned::builder(env!("CARGO_BIN_EXE_lev"), dir.path(name))
        .args(["--database", db.url.as_str(), "--key-encryption-key-file"])
        .arg(dir.path("kek"))
        .args(["--operator-grace", "30", "--operator-reply-timeout", "60"])
        // Webhook receivers listen on loopback.
        .args(["--webhook-allow", "127.0.0.0/8"])
        .args(extra)
        .start()
        .unwrap()
}

/// reqwest over plain HTTP, with the ring provider the workspace builds.
fn plain_http_client() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder().no_proxy().build().unwrap()
}

impl Cluster {
    fn start(tag: &str) -> Self {
        Self::start_with(tag, |_| Vec::new())
    }

    /// Two replicas given the same `extra` flags, made in the scratch dir.
    fn start_with(tag: &str, extra: impl Fn(&Scratch) -> Vec<String>) -> Self {
        let dir = Scratch::new(tag);
        let kek = lev(["keys", "kek", "--out", dir.path("kek").to_str().unwrap()]);
        assert_eq!(kek.code, 0, "{kek:?}");
        let db = Database::new(tag);
        let extra = extra(&dir);
        let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
        let a = replica_with(&dir, "a", &db, &extra);
        let b = replica_with(&dir, "b", &db, &extra);
        // The first replica on the empty database made the admin token.
        let admin = a
            .admin_token()
            .or_else(|_| b.admin_token())
            .expect("one replica wrote admin.token");
        Self {
            a,
            b,
            admin,
            http: plain_http_client(),
            _db: db,
            _dir: dir,
        }
    }

    async fn call(
        &self,
        base: &str,
        method: &str,
        path: &str,
        token: &str,
        body: Option<Value>,
    ) -> (u16, Value) {
        let mut rb = self
            .http
            .request(method.parse().unwrap(), format!("{base}{path}"))
            .bearer_auth(token);
        if let Some(body) = body {
            rb = rb.json(&body);
        }
        let resp = rb.send().await.unwrap();
        let status = resp.status().as_u16();
        (status, resp.json().await.unwrap_or(Value::Null))
    }

    async fn token(&self, name: &str, role: &str) -> String {
        self.token_at(self.a.url(), name, role).await
    }

    async fn token_at(&self, base: &str, name: &str, role: &str) -> String {
        let mut body = json!({"name": name, "role": role});
        if role == "operator" {
            body["sessions"] = json!(["*"]);
        }
        let (status, v) = self
            .call(base, "POST", "/v1/tokens", &self.admin, Some(body))
            .await;
        assert_eq!(status, 201, "{v}");
        v["token"].as_str().unwrap().to_owned()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_answer_on_one_replica_wakes_the_waiter_on_another() {
    let c = Cluster::start("wake");
    let worker = c.token("agent", "worker").await;
    let alice = c.token("alice", "approver").await;
    // Both replicas publish the one signing key.
    let (_, keys_a) = c.call(c.a.url(), "GET", "/v1/keys", "", None).await;
    let (_, keys_b) = c.call(c.b.url(), "GET", "/v1/keys", "", None).await;
    assert_eq!(keys_a, keys_b);
    let (_, health) = c.call(c.b.url(), "GET", "/v1/health", "", None).await;
    assert_eq!(health["store"], "postgres", "{health}");

    let third = replica(&c._dir, "c", &c._db);
    let mut waits = Vec::new();
    for i in 0..5 {
        let (status, created) = c
            .call(
                c.a.url(),
                "POST",
                "/v1/interactions",
                &worker,
                Some(json!({"session_id": "s-r", "kind": {"type": "free_text", "prompt": format!("q{i}")}})),
            )
            .await;
        assert_eq!(status, 201, "{created}");
        let id = created["id"].as_str().unwrap().to_owned();
        // Created on A, waited for on C, answered on B.
        let (http, base, token) = (c.http.clone(), third.url().to_owned(), worker.clone());
        let wid = id.clone();
        waits.push((
            id,
            tokio::spawn(async move {
                let r = http
                    .get(format!("{base}/v1/interactions/{wid}/wait?timeout_s=30"))
                    .bearer_auth(token)
                    .send()
                    .await
                    .unwrap();
                let v: Value = r.json().await.unwrap();
                (Instant::now(), v)
            }),
        ));
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut latencies = Vec::new();
    for (id, wait) in waits {
        let answered_at = Instant::now();
        let (status, v) = c
            .call(
                c.b.url(),
                "POST",
                &format!("/v1/interactions/{id}/respond"),
                &alice,
                Some(json!({"request_id": id, "value": "from b"})),
            )
            .await;
        assert_eq!(status, 200, "{v}");
        // The same answer again, on the other replica: the first won.
        let (status, v) = c
            .call(
                c.a.url(),
                "POST",
                &format!("/v1/interactions/{id}/respond"),
                &alice,
                Some(json!({"request_id": id, "value": "from a"})),
            )
            .await;
        assert_eq!(status, 409, "{v}");
        assert_eq!(v["response"]["value"], "from b");
        let (woke, v) = wait.await.unwrap();
        assert_eq!(v["status"], "answered", "{v}");
        assert_eq!(v["response"]["value"], "from b");
        latencies.push(woke.saturating_duration_since(answered_at));
    }
    eprintln!("cross-replica wake latencies: {latencies:?}");

    // Three answers race on three replicas: one wins, the others see it.
    for i in 0..10 {
        let (_, created) = c
            .call(
                c.a.url(),
                "POST",
                "/v1/interactions",
                &worker,
                Some(json!({"session_id": "s-race", "kind": {"type": "free_text", "prompt": format!("r{i}")}})),
            )
            .await;
        let id = created["id"].as_str().unwrap().to_owned();
        let path = format!("/v1/interactions/{id}/respond");
        let body = |v: &str| Some(json!({"request_id": id, "value": v}));
        let (ra, rb, rc) = tokio::join!(
            c.call(c.a.url(), "POST", &path, &alice, body("a")),
            c.call(c.b.url(), "POST", &path, &alice, body("b")),
            c.call(third.url(), "POST", &path, &alice, body("c")),
        );
        let all = [ra, rb, rc];
        let winners: Vec<&Value> = all
            .iter()
            .filter(|(s, _)| *s == 200)
            .map(|(_, v)| v)
            .collect();
        assert_eq!(winners.len(), 1, "{all:?}");
        let won = winners[0]["response"]["value"].clone();
        for (status, v) in &all {
            if *status != 200 {
                assert_eq!(*status, 409, "{v}");
                assert_eq!(v["response"]["value"], won, "{v}");
            }
        }
    }
    // One audit chain that verifies, read through either replica.
    let out = Command::new(env!("CARGO_BIN_EXE_lev"))
        .args(["audit", "--verify", "--url", c.b.url(), "--token", &c.admin])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

async fn operator_socket(base: &str, session: &str, token: &str) -> Socket {
    let url = format!(
        "{}/v1/operators/{session}/ws",
        base.replacen("http", "ws", 1)
    );
    let mut req = url.into_client_request().unwrap();
    req.headers_mut()
        .insert("authorization", format!("Bearer {token}").parse().unwrap());
    tokio_tungstenite::connect_async(req).await.unwrap().0
}

/// The next JSON text frame of `type`, skipping others.
async fn next_of(ws: &mut Socket, kind: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let frame = tokio::time::timeout(left, ws.next())
            .await
            .unwrap_or_else(|_| panic!("no {kind} frame within 20 s"))
            .expect("the socket stays open")
            .unwrap();
        if let Message::Text(text) = frame {
            let v: Value = serde_json::from_str(&text).unwrap();
            if v["type"] == kind {
                return v;
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_operator_on_one_replica_answers_workers_on_the_other_and_survives_its_replica() {
    let mut c = Cluster::start("ops");
    let worker = c.token("agent", "worker").await;
    let operator = c.token("main-ai", "operator").await;

    // The operator on A; a worker's ask on B reaches it; its answer
    // completes the call on B.
    let mut ws = operator_socket(c.a.url(), "s-op", &operator).await;
    let hello = next_of(&mut ws, "hello").await;
    assert_eq!(hello["pending"], json!([]), "{hello}");
    let (http, base, token) = (c.http.clone(), c.b.url().to_owned(), worker.clone());
    let ask = |question: &'static str| {
        let (http, base, token) = (http.clone(), base.clone(), token.clone());
        tokio::spawn(async move {
            let r = http
                .post(format!("{base}/v1/sessions/s-op/ask"))
                .bearer_auth(token)
                .json(&json!({"question": question, "timeout_s": 60}))
                .send()
                .await
                .unwrap();
            let status = r.status().as_u16();
            (status, r.json::<Value>().await.unwrap_or(Value::Null))
        })
    };
    let first = ask("deploy?");
    let asked = next_of(&mut ws, "ask").await;
    assert_eq!(asked["question"], "deploy?");
    ws.send(Message::text(
        json!({"type": "answer", "req_id": asked["req_id"], "value": "yes"}).to_string(),
    ))
    .await
    .unwrap();
    let (status, v) = first.await.unwrap();
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["answer"], "yes");
    assert_eq!(v["answered_by"], "main-ai");

    // An ask the operator has not answered when its replica dies: it
    // reconnects to B, `hello` names it, it is sent again, and the reply
    // completes the call still waiting on B.
    let second = ask("roll back?");
    let asked = next_of(&mut ws, "ask").await;
    let req_id = asked["req_id"].clone();
    c.a.kill();
    drop(ws);
    let mut ws = operator_socket(c.b.url(), "s-op", &operator).await;
    let hello = next_of(&mut ws, "hello").await;
    assert_eq!(hello["pending"], json!([req_id]), "{hello}");
    let again = next_of(&mut ws, "ask").await;
    assert_eq!(again["req_id"], req_id);
    ws.send(Message::text(
        json!({"type": "answer", "req_id": req_id, "value": "no"}).to_string(),
    ))
    .await
    .unwrap();
    let (status, v) = second.await.unwrap();
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["answer"], "no");
    // A second reply to it is refused: resolved once, cluster-wide.
    ws.send(Message::text(
        json!({"type": "answer", "req_id": req_id, "value": "again"}).to_string(),
    ))
    .await
    .unwrap();
    let refused = next_of(&mut ws, "error").await;
    assert_eq!(refused["code"], "already_resolved", "{refused}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn tokens_made_without_a_server_and_replicas_that_must_agree_on_their_key() {
    let c = Cluster::start("cfg");
    // Each replica names itself in /v1/health.
    let (_, a) = c.call(c.a.url(), "GET", "/v1/health", "", None).await;
    let (_, b) = c.call(c.b.url(), "GET", "/v1/health", "", None).await;
    let (ra, rb) = (
        a["replica_id"].as_str().unwrap(),
        b["replica_id"].as_str().unwrap(),
    );
    assert!(ra.starts_with("rp_") && rb.starts_with("rp_"), "{a} {b}");
    assert_ne!(ra, rb);
    assert!(c.a.log().contains(ra), "{}", c.a.log());

    // `lev token create --database` writes into the shared database with no
    // server; both replicas take the token at once.
    let out = lev([
        "token",
        "create",
        "bob",
        "--role",
        "approver",
        "--json",
        "--database",
        c._db.url.as_str(),
    ]);
    assert_eq!(out.code, 0, "{out:?}");
    let made: Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(made["login_url"], Value::Null, "no server URL is known");
    let bob = made["token"].as_str().unwrap();
    for base in [c.a.url(), c.b.url()] {
        let (status, v) = c.call(base, "GET", "/v1/interactions", bob, None).await;
        assert_eq!(status, 200, "{v}");
    }
    // The name is taken now, on the server and offline alike.
    let again = lev([
        "token",
        "create",
        "bob",
        "--role",
        "approver",
        "--database",
        c._db.url.as_str(),
    ]);
    assert_ne!(again.code, 0);
    assert!(again.stderr.contains("name_taken"), "{again:?}");
    let (status, v) = c
        .call(
            c.b.url(),
            "POST",
            "/v1/tokens",
            &c.admin,
            Some(json!({"name": "bob", "role": "approver"})),
        )
        .await;
    assert_eq!(
        (status, v["error"]["code"].as_str()),
        (409, Some("name_taken"))
    );
    // Bad input offline is refused as the API refuses it.
    let bad = lev([
        "token",
        "create",
        "policy",
        "--role",
        "admin",
        "--database",
        c._db.url.as_str(),
    ]);
    assert!(bad.stderr.contains("reserved"), "{bad:?}");

    // A third replica given another key-encryption key cannot open the
    // shared signing key: it refuses to start and says why.
    let dir = Scratch::new("cfg-other-kek");
    let kek = lev(["keys", "kek", "--out", dir.path("kek").to_str().unwrap()]);
    assert_eq!(kek.code, 0, "{kek:?}");
    let refused = Command::new(env!("CARGO_BIN_EXE_lev"))
        .args(["serve", "--listen", "127.0.0.1:0", "--database", &c._db.url])
        .arg("--key-encryption-key-file")
        .arg(dir.path("kek"))
        .arg("--data-dir")
        .arg(dir.path("data"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(1), "{err}");
    assert!(
        err.contains("does not open with this key-encryption key"),
        "{err}"
    );
}

/// What the load told its workers was committed, kept outside lev.
#[derive(Default)]
struct Ledger {
    created: Vec<String>,
    answered: Vec<(String, String)>,
    /// Responses by status and error code, e.g. `201`, `503 store_unavailable`.
    seen: std::collections::BTreeMap<String, u64>,
    /// Requests that got no HTTP response (a replica gone).
    unreachable: u64,
}

impl Ledger {
    fn count(&mut self, status: u16, v: &Value) {
        let key = match v["error"]["code"].as_str() {
            Some(code) => format!("{status} {code}"),
            None => status.to_string(),
        };
        *self.seen.entry(key).or_default() += 1;
    }

    /// Responses no client may ever see: a 5xx other than 503.
    fn faults(&self) -> Vec<String> {
        self.seen
            .iter()
            .filter(|(k, _)| k.starts_with('5') && !k.starts_with("503"))
            .map(|(k, n)| format!("{k} x{n}"))
            .collect()
    }
}

/// Workers that create on one replica and answer on the next, round robin,
/// until `stop`; every acknowledged write goes into the ledger.
fn load(
    bases: Vec<String>,
    worker: String,
    approver: String,
    ledger: std::sync::Arc<std::sync::Mutex<Ledger>>,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> Vec<tokio::task::JoinHandle<()>> {
    use std::sync::atomic::Ordering;
    let http = reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(15))
        .build()
        .unwrap();
    (0..6)
        .map(|w| {
            let (http, bases, worker, approver, ledger, stop) = (
                http.clone(),
                bases.clone(),
                worker.clone(),
                approver.clone(),
                ledger.clone(),
                stop.clone(),
            );
            tokio::spawn(async move {
                let mut i = w;
                while !stop.load(Ordering::Relaxed) {
                    i += 1;
                    let create_on = &bases[i % bases.len()];
                    let answer_on = &bases[(i + 1) % bases.len()];
                    let sent = http
                        .post(format!("{create_on}/v1/interactions"))
                        .bearer_auth(&worker)
                        .json(&json!({"session_id": format!("load-{w}"),
                            "kind": {"type": "free_text", "prompt": format!("q {w} {i}")}}))
                        .send()
                        .await;
                    let Ok(resp) = sent else {
                        ledger.lock().unwrap().unreachable += 1;
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    };
                    let status = resp.status().as_u16();
                    let v: Value = resp.json().await.unwrap_or(Value::Null);
                    ledger.lock().unwrap().count(status, &v);
                    if status != 201 {
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                    let id = v["id"].as_str().unwrap().to_owned();
                    ledger.lock().unwrap().created.push(id.clone());
                    let value = format!("a {w} {i}");
                    let sent = http
                        .post(format!("{answer_on}/v1/interactions/{id}/respond"))
                        .bearer_auth(&approver)
                        .json(&json!({"request_id": id, "value": value}))
                        .send()
                        .await;
                    let Ok(resp) = sent else {
                        ledger.lock().unwrap().unreachable += 1;
                        continue;
                    };
                    let status = resp.status().as_u16();
                    let v: Value = resp.json().await.unwrap_or(Value::Null);
                    let mut ledger = ledger.lock().unwrap();
                    ledger.count(status, &v);
                    if status == 200 {
                        ledger.answered.push((id, value));
                    }
                }
            })
        })
        .collect()
}

/// Every acknowledged create is there, every acknowledged answer is the
/// one answer its interaction has, and the audit chain verifies.
async fn check_ledger(c: &Cluster, base: &str, ledger: &Ledger) {
    let approver = c.token_at(base, "checker", "approver").await;
    let answered: std::collections::HashMap<&str, &str> = ledger
        .answered
        .iter()
        .map(|(id, v)| (id.as_str(), v.as_str()))
        .collect();
    for id in &ledger.created {
        let (status, v) = c
            .call(
                base,
                "GET",
                &format!("/v1/interactions/{id}"),
                &approver,
                None,
            )
            .await;
        assert_eq!(status, 200, "acknowledged {id} is lost: {v}");
        if let Some(value) = answered.get(id.as_str()) {
            assert_eq!(v["request"]["status"], "answered", "{v}");
            assert_eq!(v["response"]["value"], *value, "{v}");
        }
    }
    let out = Command::new(env!("CARGO_BIN_EXE_lev"))
        .args(["audit", "--verify", "--url", base, "--token", &c.admin])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_replica_killed_under_load_loses_nothing_acknowledged() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{Arc, Mutex};
    let mut c = Cluster::start("kill");
    let worker = c.token("agent", "worker").await;
    let approver = c.token("alice", "approver").await;
    let ledger = Arc::new(Mutex::new(Ledger::default()));
    let stop = Arc::new(AtomicBool::new(false));
    let tasks = load(
        vec![c.a.url().to_owned(), c.b.url().to_owned()],
        worker,
        approver,
        ledger.clone(),
        stop.clone(),
    );
    tokio::time::sleep(Duration::from_millis(1500)).await;
    c.a.kill();
    let before = ledger.lock().unwrap().created.len();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    stop.store(true, Ordering::Relaxed);
    for t in tasks {
        t.await.unwrap();
    }
    let ledger = Arc::try_unwrap(ledger).ok().unwrap().into_inner().unwrap();
    eprintln!(
        "kill -9 of a replica: {} created, {} answered, {} unreachable, {:?}",
        ledger.created.len(),
        ledger.answered.len(),
        ledger.unreachable,
        ledger.seen
    );
    assert!(ledger.faults().is_empty(), "{:?}", ledger.seen);
    assert!(ledger.unreachable > 0, "the killed replica was in the load");
    // Creates on B go on (their answers, sent to A, do not).
    assert!(
        ledger.created.len() > before,
        "the other replica kept working"
    );
    let b = c.b.url().to_owned();
    check_ledger(&c, &b, &ledger).await;
}

/// A PostgreSQL of the test's own, on its own port, so that it may be
/// stopped and started without disturbing other tests.
struct PrivatePostgres {
    dir: tempfile::TempDir,
    bin: std::path::PathBuf,
    port: u16,
}

impl PrivatePostgres {
    fn bin_dir() -> std::path::PathBuf {
        if let Ok(dir) = std::env::var("LEV_TEST_POSTGRES_BIN") {
            return dir.into();
        }
        let mut found: Vec<_> = std::fs::read_dir("/usr/lib/postgresql")
            .expect("PostgreSQL's server programs under /usr/lib/postgresql (Debian's postgresql package), or LEV_TEST_POSTGRES_BIN")
            .filter_map(Result::ok)
            .map(|e| e.path().join("bin"))
            .filter(|p| p.join("initdb").is_file())
            .collect();
        found.sort();
        found.pop().expect("initdb under /usr/lib/postgresql/*/bin")
    }

    /// Run a server program, as `postgres` when this is root (PostgreSQL
    /// refuses to run as root).
    fn run(&self, program: &str, args: &[&str]) {
        let path = self.bin.join(program);
        let root = Command::new("id")
            .arg("-u")
            .output()
            .map(|o| o.stdout == b"0\n")
            .unwrap_or(false);
        let mut cmd = if root {
            let mut cmd = Command::new("runuser");
            cmd.args(["-u", "postgres", "--"]).arg(&path);
            cmd
        } else {
            Command::new(&path)
        };
        let out = cmd.args(args).output().unwrap();
        assert!(
            out.status.success(),
            "{program} {args:?}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }

    fn new() -> Self {
        let dir = tempfile::Builder::new()
            .prefix("lev-pg-")
            .tempdir()
            .unwrap();
        let _ = Command::new("chown")
            .args(["-R", "postgres"])
            .arg(dir.path())
            .output();
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let pg = Self {
            dir,
            bin: Self::bin_dir(),
            port,
        };
        let data = pg.data();
        pg.run(
            "initdb",
            &["-D", &data, "--auth=trust", "-U", "postgres", "--no-sync"],
        );
        pg.start();
        pg
    }

    fn data(&self) -> String {
        self.dir.path().join("data").display().to_string()
    }

    fn start(&self) {
        let opts = format!(
            "-p {} -c listen_addresses=127.0.0.1 -k {} -c max_connections=60",
            self.port,
            self.dir.path().display()
        );
        let log = self.dir.path().join("log").display().to_string();
        self.run(
            "pg_ctl",
            &["-D", &self.data(), "-o", &opts, "-l", &log, "-w", "start"],
        );
    }

    /// Stop as a crash would: no checkpoint, recovery from the WAL at the
    /// next start.
    fn crash(&self) {
        self.run(
            "pg_ctl",
            &["-D", &self.data(), "-m", "immediate", "-w", "stop"],
        );
    }

    fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }

    /// A shell command that crashes this server and starts it again (as
    /// `lev bench chaos --postgres-crash` runs it).
    fn crash_command(&self) -> String {
        let root = Command::new("id")
            .arg("-u")
            .output()
            .map(|o| o.stdout == b"0\n")
            .unwrap_or(false);
        let as_postgres = if root { "runuser -u postgres -- " } else { "" };
        let pg_ctl = self.bin.join("pg_ctl").display().to_string();
        let opts = format!(
            "-p {} -c listen_addresses=127.0.0.1 -k {} -c max_connections=60",
            self.port,
            self.dir.path().display()
        );
        let log = self.dir.path().join("log").display().to_string();
        let data = self.data();
        format!(
            "{as_postgres}{pg_ctl} -D '{data}' -m immediate -w stop && \
             {as_postgres}{pg_ctl} -D '{data}' -o '{opts}' -l '{log}' -w start"
        )
    }
}

impl Drop for PrivatePostgres {
    fn drop(&mut self) {
        let path = self.bin.join("pg_ctl");
        let data = self.data();
        let _ = Command::new("runuser")
            .args(["-u", "postgres", "--"])
            .arg(&path)
            .args(["-D", &data, "-m", "immediate", "stop"])
            .output();
        let _ = Command::new(&path)
            .args(["-D", &data, "-m", "immediate", "stop"])
            .output();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_restarted_under_load_answers_503_then_recovers_and_loses_nothing() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{Arc, Mutex};
    let pg = PrivatePostgres::new();
    let dir = Scratch::new("pgrestart");
    let kek = lev(["keys", "kek", "--out", dir.path("kek").to_str().unwrap()]);
    assert_eq!(kek.code, 0, "{kek:?}");
    let db = Database {
        name: String::new(),
        url: pg.url(),
    };
    let a = replica(&dir, "a", &db);
    let b = replica(&dir, "b", &db);
    let admin = a.admin_token().or_else(|_| b.admin_token()).unwrap();
    let c = Cluster {
        a,
        b,
        admin,
        http: plain_http_client(),
        _db: db,
        _dir: dir,
    };
    let worker = c.token("agent", "worker").await;
    let approver = c.token("alice", "approver").await;
    let ledger = Arc::new(Mutex::new(Ledger::default()));
    let stop = Arc::new(AtomicBool::new(false));
    let tasks = load(
        vec![c.a.url().to_owned(), c.b.url().to_owned()],
        worker,
        approver,
        ledger.clone(),
        stop.clone(),
    );
    tokio::time::sleep(Duration::from_millis(1500)).await;
    pg.crash();
    tokio::time::sleep(Duration::from_millis(2000)).await;
    let while_down = ledger.lock().unwrap().seen.clone();
    pg.start();
    let after_restart = ledger.lock().unwrap().answered.len();
    // The servers reconnect by themselves: answers flow again.
    let deadline = Instant::now() + Duration::from_secs(30);
    while ledger.lock().unwrap().answered.len() < after_restart + 20 {
        assert!(
            Instant::now() < deadline,
            "no answers after PostgreSQL came back: {:?}",
            ledger.lock().unwrap().seen
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    stop.store(true, Ordering::Relaxed);
    for t in tasks {
        t.await.unwrap();
    }
    let ledger = Arc::try_unwrap(ledger).ok().unwrap().into_inner().unwrap();
    eprintln!(
        "PostgreSQL restarted: {} created, {} answered, {:?}",
        ledger.created.len(),
        ledger.answered.len(),
        ledger.seen
    );
    assert!(ledger.faults().is_empty(), "{:?}", ledger.seen);
    assert!(
        while_down.keys().any(|k| k == "503 store_unavailable"),
        "requests while PostgreSQL was down answer 503 store_unavailable: {while_down:?}"
    );
    assert_eq!(ledger.unreachable, 0, "the servers stayed up");
    let base = c.b.url().to_owned();
    check_ledger(&c, &base, &ledger).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn replicas_started_together_on_an_empty_database_make_one_admin_token() {
    let dir = Scratch::new("together");
    let kek = lev(["keys", "kek", "--out", dir.path("kek").to_str().unwrap()]);
    assert_eq!(kek.code, 0, "{kek:?}");
    let http = plain_http_client();
    // A race: a few rounds, each on an empty database of its own.
    for round in 0..4 {
        let db = Database::new("together");
        let started: Vec<Spawned> = std::thread::scope(|s| {
            let handles: Vec<_> = ["a", "b", "c"]
                .iter()
                .map(|name| {
                    let name = format!("{round}{name}");
                    let (dir, db) = (&dir, &db);
                    s.spawn(move || replica(dir, &name, db))
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let tokens: Vec<String> = started
            .iter()
            .filter_map(|r| r.admin_token().ok())
            .collect();
        assert_eq!(tokens.len(), 1, "exactly one replica keeps an admin.token");
        for r in &started {
            let resp = http
                .get(format!("{}/v1/tokens", r.url()))
                .bearer_auth(&tokens[0])
                .send()
                .await
                .unwrap();
            assert_eq!(resp.status().as_u16(), 200);
            let page: Value = resp.json().await.unwrap();
            let admins = page["items"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|t| t["role"] == "admin")
                .count();
            assert_eq!(admins, 1, "{page}");
        }
    }
}

/// Chaos on two replicas of a private PostgreSQL: three replicas killed
/// under load, then PostgreSQL itself crashed under load.
#[test]
fn chaos_on_two_replicas_finds_everything_acknowledged() {
    let pg = PrivatePostgres::new();
    let crash = pg.crash_command();
    let out = Command::new(env!("CARGO_BIN_EXE_lev"))
        .args([
            "bench",
            "chaos",
            "--kills",
            "4",
            "--workers",
            "4",
            "--max-run-ms",
            "1000",
            "--replicas",
            "2",
            "--database",
            pg.url().as_str(),
            "--postgres-crash",
            crash.as_str(),
        ])
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{stdout}{stderr}");
    assert!(
        stdout.starts_with("chaos: 3 SIGKILLs and 1 PostgreSQL crashes")
            && stdout.contains("(PostgreSQL, 2 replicas)"),
        "{stdout}"
    );
    assert_eq!(stderr.matches("all there").count(), 4, "{stderr}");
    assert_eq!(stderr.matches("kill 4 (PostgreSQL)").count(), 1, "{stderr}");
    assert!(
        super::bench::acknowledged(&stdout, "task results") > 0,
        "{stdout}"
    );
}

/// Both replicas run a dispatcher over one outbox: every event written on
/// either reaches the receiver, each delivery sent once (claims are
/// leased), signed with the one secret both replicas open with the shared
/// key-encryption key.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn webhook_deliveries_are_shared_by_replicas_and_sent_once() {
    use std::sync::Arc;

    use crate::receiver::{Receiver, Request};

    let c = Cluster::start("webhooks");
    let rx = Receiver::start(Arc::new(|_: &Request, _: &[Request]| (200, vec![], vec![])));
    let (status, added) = c
        .call(
            c.b.url(),
            "POST",
            "/v1/webhooks",
            &c.admin,
            Some(json!({"url": rx.url("/"), "events": ["interaction.created"]})),
        )
        .await;
    assert_eq!(status, 201, "{added}");
    let key = lev_server::webhooks::secret_key(added["secret"].as_str().unwrap()).unwrap();
    let worker = c.token("agent", "worker").await;
    let mut ids = Vec::new();
    for i in 0..40 {
        let base = if i % 2 == 0 { c.a.url() } else { c.b.url() };
        let (status, created) = c
            .call(
                base,
                "POST",
                "/v1/interactions",
                &worker,
                Some(json!({"session_id": "s-wh", "kind": {"type": "free_text", "prompt": format!("q{i}")}})),
            )
            .await;
        assert_eq!(status, 201, "{created}");
        ids.push(created["id"].as_str().unwrap().to_owned());
    }
    let all = tokio::task::spawn_blocking(move || {
        rx.wait_for("40 deliveries", |all| all.len() >= 40);
        std::thread::sleep(Duration::from_millis(1500));
        rx.requests()
    })
    .await
    .unwrap();
    assert_eq!(all.len(), 40, "each delivery sent once");
    let now = time::OffsetDateTime::now_utc().unix_timestamp();
    let mut got: Vec<String> = Vec::new();
    for r in &all {
        lev_server::webhooks::sign::verify(
            &key,
            r.header("webhook-id").unwrap(),
            r.header("webhook-timestamp").unwrap(),
            r.header("webhook-signature").unwrap(),
            &r.body,
            now,
            300,
        )
        .unwrap();
        got.push(
            r.json()["data"]["request"]["id"]
                .as_str()
                .unwrap()
                .to_owned(),
        );
    }
    got.sort();
    ids.sort();
    assert_eq!(got, ids);
}

/// `sql` on the test's own database (not the admin one).
fn psql_on(db: &Database, sql: &str) {
    let out = Command::new("psql")
        .args([db.url.as_str(), "-v", "ON_ERROR_STOP=1", "-qc", sql])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "psql {sql:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Call `base` with `token` until it answers 401; how long that took after
/// `since`. Fails past `within`, and on anything but 200 or 401 before.
async fn refused_within(
    c: &Cluster,
    base: &str,
    token: &str,
    since: Instant,
    within: Duration,
    also_ok: &[u16],
) -> Duration {
    loop {
        let (status, v) = c.call(base, "GET", "/v1/interactions", token, None).await;
        let took = since.elapsed();
        if status == 401 {
            return took;
        }
        assert!(status == 200 || also_ok.contains(&status), "{status} {v}");
        assert!(
            took < within,
            "still accepted {took:?} after the revocation"
        );
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_token_revoked_on_one_replica_is_refused_on_the_other_within_100_ms() {
    let c = Cluster::start("revoke");
    let mut took = Vec::new();
    for round in 0..5 {
        let name = format!("agent{round}");
        let worker = c.token(&name, "approver").await;
        // Used on both, so both keep it.
        for base in [c.a.url(), c.b.url(), c.a.url(), c.b.url()] {
            let (status, v) = c.call(base, "GET", "/v1/interactions", &worker, None).await;
            assert_eq!(status, 200, "{v}");
        }
        let (status, v) = c
            .call(
                c.a.url(),
                "DELETE",
                &format!("/v1/tokens/{name}"),
                &c.admin,
                None,
            )
            .await;
        assert_eq!(status, 204, "{v}");
        let revoked = Instant::now();
        // Where it was revoked: the very next request.
        let (status, v) = c
            .call(c.a.url(), "GET", "/v1/interactions", &worker, None)
            .await;
        assert_eq!(status, 401, "{v}");
        let on_b = refused_within(
            &c,
            c.b.url(),
            &worker,
            revoked,
            Duration::from_millis(100),
            &[],
        )
        .await;
        took.push(on_b);
        // And it stays refused.
        for _ in 0..5 {
            let (status, _) = c
                .call(c.b.url(), "GET", "/v1/interactions", &worker, None)
                .await;
            assert_eq!(status, 401);
        }
    }
    eprintln!("revoked on A, first 401 on B after: {took:?}");

    // A token deleted by hand in the database while every connection of the
    // replicas is cut (so no replica hears of it): refused once they are
    // back, and never served from what they kept before.
    let worker = c.token("agent-cut", "approver").await;
    for base in [c.a.url(), c.b.url(), c.b.url()] {
        let (status, v) = c.call(base, "GET", "/v1/interactions", &worker, None).await;
        assert_eq!(status, 200, "{v}");
    }
    psql_on(
        &c._db,
        "BEGIN;
         SELECT pg_terminate_backend(pid) FROM pg_stat_activity
             WHERE datname = current_database() AND pid <> pg_backend_pid();
         DELETE FROM tokens WHERE name = 'agent-cut';
         COMMIT;",
    );
    let cut = Instant::now();
    for base in [c.a.url(), c.b.url()] {
        // The pools find their connections gone: 503 until they reconnect.
        let after = refused_within(&c, base, &worker, cut, Duration::from_secs(10), &[503]).await;
        eprintln!("deleted while cut off: 401 on {base} after {after:?}");
        for _ in 0..5 {
            let (status, _) = c.call(base, "GET", "/v1/interactions", &worker, None).await;
            assert_eq!(status, 401);
        }
    }
}

/// The kid of the first (signing) key `base` publishes.
async fn signing_kid(c: &Cluster, base: &str) -> (String, Value) {
    let (status, jwks) = c.call(base, "GET", "/v1/keys", "", None).await;
    assert_eq!(status, 200, "{jwks}");
    (jwks["keys"][0]["kid"].as_str().unwrap().to_owned(), jwks)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_key_rotated_on_one_replica_signs_on_the_other_within_a_second() {
    let c = Cluster::start("rotate");
    let worker = c.token("agent", "worker").await;
    let alice = c.token("alice", "approver").await;
    let (first, _) = signing_kid(&c, c.b.url()).await;
    let (status, rotated) = c
        .call(c.a.url(), "POST", "/v1/keys/rotate", &c.admin, None)
        .await;
    assert_eq!(status, 200, "{rotated}");
    let rotated_at = Instant::now();
    let new = rotated["keys"][0]["kid"].as_str().unwrap().to_owned();
    assert_ne!(new, first);
    let jwks = loop {
        let (kid, jwks) = signing_kid(&c, c.b.url()).await;
        if kid == new {
            break jwks;
        }
        assert!(
            rotated_at.elapsed() < Duration::from_secs(1),
            "B still signs with {kid} {:?} after the rotation on A",
            rotated_at.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    };
    eprintln!("rotated on A, served by B after {:?}", rotated_at.elapsed());
    assert_eq!(
        jwks["keys"][1]["kid"],
        first.as_str(),
        "the old key still trusted: {jwks}"
    );

    // A decision made on B: signed with the new key, verified with it alone.
    let (status, created) = c
        .call(
            c.b.url(),
            "POST",
            "/v1/interactions",
            &worker,
            Some(
                json!({"session_id": "s-key", "kind": {"type": "tool_approval",
                "tool_name": "shell", "args_json": "{\"argv\":[\"ls\"]}",
                "missing_capabilities": ["exec"], "sandbox_mode": "workspace-write",
                "options": []}}),
            ),
        )
        .await;
    assert_eq!(status, 201, "{created}");
    let id = created["id"].as_str().unwrap();
    let (status, answered) = c
        .call(
            c.b.url(),
            "POST",
            &format!("/v1/interactions/{id}/respond"),
            &alice,
            Some(json!({"request_id": id, "approved": true})),
        )
        .await;
    assert_eq!(status, 200, "{answered}");
    let approval = answered["approval"].to_string();
    let only_new = json!({"keys": [jwks["keys"][0].clone()]}).to_string();
    let keys = lev_approval::TrustedKeys::parse(&only_new).unwrap();
    lev_approval::verify::verify_json(approval.as_bytes(), &keys, time::OffsetDateTime::now_utc())
        .unwrap_or_else(|e| panic!("B's decision verifies with the new key: {e}\n{answered}"));

    // The old key removed on A: B stops publishing it within a second.
    let (status, v) = c
        .call(
            c.a.url(),
            "DELETE",
            &format!("/v1/keys/{first}"),
            &c.admin,
            None,
        )
        .await;
    assert_eq!(status, 200, "{v}");
    let removed_at = Instant::now();
    loop {
        let (_, jwks) = signing_kid(&c, c.b.url()).await;
        if jwks["keys"].as_array().unwrap().len() == 1 {
            break;
        }
        assert!(
            removed_at.elapsed() < Duration::from_secs(1),
            "B still trusts {first}: {jwks}"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // Each change is in the one audit chain, once, by the admin.
    let (status, audit) = c
        .call(c.b.url(), "GET", "/v1/audit?limit=1000", &c.admin, None)
        .await;
    assert_eq!(status, 200, "{audit}");
    let keyed: Vec<(String, Value)> = audit["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["action"].as_str().unwrap().starts_with("key."))
        .map(|e| (e["action"].as_str().unwrap().to_owned(), e["data"].clone()))
        .collect();
    assert_eq!(
        keyed,
        [
            (
                "key.rotated".to_owned(),
                json!({"kid": new, "previous": first})
            ),
            ("key.removed".to_owned(), json!({"kid": first})),
        ],
        "{audit}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_slack_request_taken_by_one_replica_is_a_replay_on_the_other() {
    const SECRET: &str = "8f742231b10e8888abcd99yyyzzz85a5";
    let c = Cluster::start_with("slackreplay", |dir| {
        std::fs::write(dir.path("bot.token"), "xoxb-test-token\n").unwrap();
        std::fs::write(dir.path("signing.secret"), format!("{SECRET}\n")).unwrap();
        std::fs::write(
            dir.path("slack.toml"),
            "bot_token_file = \"bot.token\"\nsigning_secret_file = \"signing.secret\"\n\
             channel = \"C0APPROVE\"\napi_url = \"http://127.0.0.1:9/api/\"\n\n\
             [users]\nU0ALICE = \"alice\"\n",
        )
        .unwrap();
        vec![
            "--slack-config".to_owned(),
            dir.path("slack.toml").display().to_string(),
        ]
    });
    let worker = c.token("agent", "worker").await;
    c.token("alice", "approver").await;
    let (status, created) = c
        .call(
            c.a.url(),
            "POST",
            "/v1/interactions",
            &worker,
            Some(
                json!({"session_id": "s-slack", "kind": {"type": "tool_approval",
                "tool_name": "shell", "args_json": "{\"argv\":[\"ls\"]}",
                "missing_capabilities": ["exec"], "sandbox_mode": "workspace-write",
                "options": []}}),
            ),
        )
        .await;
    assert_eq!(status, 201, "{created}");
    let id = created["id"].as_str().unwrap();
    let payload = json!({
        "type": "block_actions",
        "user": {"id": "U0ALICE", "username": "alice", "team_id": "T0TEAM"},
        "team": {"id": "T0TEAM"},
        "channel": {"id": "C0APPROVE"},
        "container": {"type": "message", "message_ts": "1700000000.1", "channel_id": "C0APPROVE"},
        "trigger_id": "1.2.3",
        "response_url": "https://hooks.slack.com/actions/T0TEAM/1/abc",
        "actions": [{"action_id": "approve_once", "block_id": "lev_actions", "value": id,
                     "type": "button", "action_ts": "1700000001.1"}]
    });
    let mut body = String::from("payload=");
    for b in payload.to_string().bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            body.push(char::from(b));
        } else {
            body.push_str(&format!("%{b:02X}"));
        }
    }
    let ts = time::OffsetDateTime::now_utc().unix_timestamp().to_string();
    let sig = lev_slack::sign(SECRET.as_bytes(), &ts, body.as_bytes());
    let post = |base: String| {
        let (http, body, ts, sig) = (c.http.clone(), body.clone(), ts.clone(), sig.clone());
        async move {
            let r = http
                .post(format!("{base}/v1/integrations/slack/interactions"))
                .header("content-type", "application/x-www-form-urlencoded")
                .header("x-slack-request-timestamp", ts)
                .header("x-slack-signature", sig)
                .body(body)
                .send()
                .await
                .unwrap();
            (r.status().as_u16(), r.text().await.unwrap())
        }
    };
    let (status, text) = post(c.a.url().to_owned()).await;
    assert_eq!(status, 200, "A takes the signed request: {text}");
    let (_, view) = c
        .call(
            c.b.url(),
            "GET",
            &format!("/v1/interactions/{id}"),
            &c.admin,
            None,
        )
        .await;
    assert_eq!(view["request"]["answered_by"], "alice", "{view}");
    let (status, text) = post(c.b.url().to_owned()).await;
    assert_eq!(status, 401, "{text}");
    assert!(text.contains("replay"), "{text}");
    // And A too, of course.
    let (status, text) = post(c.a.url().to_owned()).await;
    assert_eq!((status, text.contains("replay")), (401, true), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_interaction_routed_to_the_operator_is_triaged_once_across_replicas() {
    let c = Cluster::start("triage");
    let worker = c.token("agent", "worker").await;
    let operator = c.token("main-ai", "operator").await;
    let mut ws = operator_socket(c.a.url(), "s-tri", &operator).await;
    next_of(&mut ws, "hello").await;
    // Both replicas see every creation; each interaction reaches the
    // operator once, whichever replica created it.
    let mut ids = Vec::new();
    for i in 0..6 {
        let base = if i % 2 == 0 { c.a.url() } else { c.b.url() };
        let (status, created) = c
            .call(
                base,
                "POST",
                "/v1/interactions",
                &worker,
                Some(
                    json!({"session_id": "s-tri", "route": ["operator", "human"],
                    "kind": {"type": "free_text", "prompt": format!("t{i}")}}),
                ),
            )
            .await;
        assert_eq!(status, 201, "{created}");
        ids.push(created["id"].as_str().unwrap().to_owned());
    }
    let mut asked = Vec::new();
    while asked.len() < ids.len() {
        let ask = next_of(&mut ws, "ask").await;
        asked.push(
            ask["question"]["interaction"]["id"]
                .as_str()
                .unwrap()
                .to_owned(),
        );
    }
    // Nothing more comes: no second ask for any of them.
    let quiet = tokio::time::timeout(Duration::from_millis(1500), async {
        loop {
            match ws.next().await {
                Some(Ok(Message::Text(t))) => {
                    let v: Value = serde_json::from_str(&t).unwrap();
                    if v["type"] == "ask" {
                        return v;
                    }
                }
                Some(Ok(_)) => {}
                other => panic!("the socket ended: {other:?}"),
            }
        }
    })
    .await;
    assert!(quiet.is_err(), "a second ask: {quiet:?}");
    asked.sort();
    ids.sort();
    assert_eq!(asked, ids, "each interaction asked once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn interactions_of_a_dead_replica_expire_on_time_on_the_other() {
    let mut c = Cluster::start("expiry");
    let worker = c.token("agent", "worker").await;
    // B is up and idle (its own next deadline: none) when A takes a
    // 2-second interaction and dies.
    let (status, created) = c
        .call(
            c.a.url(),
            "POST",
            "/v1/interactions",
            &worker,
            Some(json!({"session_id": "s-exp", "timeout_s": 2,
                "kind": {"type": "free_text", "prompt": "soon"}})),
        )
        .await;
    assert_eq!(status, 201, "{created}");
    let id = created["id"].as_str().unwrap().to_owned();
    let made = Instant::now();
    c.a.kill();
    loop {
        let (status, v) = c
            .call(
                c.b.url(),
                "GET",
                &format!("/v1/interactions/{id}"),
                &worker,
                None,
            )
            .await;
        assert_eq!(status, 200, "{v}");
        if v["request"]["status"] != "pending" {
            assert!(
                v["request"]["status"] == "expired" || v["request"]["status"] == "cancelled",
                "{v}"
            );
            break;
        }
        assert!(
            made.elapsed() < Duration::from_secs(5),
            "still pending {:?} after its 2 s timeout, its replica dead",
            made.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    eprintln!("expired by B {:?} after creation on A", made.elapsed());
}
