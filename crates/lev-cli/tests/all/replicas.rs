//! Several `lev serve` replicas on one PostgreSQL database (SPEC section
//! 11), as processes: an answer given on one wakes the waiter on the other;
//! the operator connected to one answers the asks of workers on the other;
//! when its replica is killed it reconnects to the other, gets `hello` with
//! the unresolved req_ids, and its reply completes the waiting call.

use std::process::Command;
use std::time::{Duration, Instant};

use futures_util::{SinkExt as _, StreamExt as _};
use lev_test_support::Spawned;
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest as _;

use crate::support::{Scratch, lev};

/// The server the tests may create databases on.
fn admin_url() -> String {
    std::env::var("LEV_TEST_POSTGRES_URL")
        .ok()
        .filter(|u| !u.is_empty())
        .unwrap_or_else(|| "postgres://postgres@127.0.0.1:5432/postgres".to_owned())
}

/// A database of the test's own, dropped when done.
struct Database {
    name: String,
    url: String,
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
    fn new(tag: &str) -> Self {
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
    Spawned::builder(env!("CARGO_BIN_EXE_lev"), dir.path(name))
        .args(["--database", db.url.as_str(), "--key-encryption-key-file"])
        .arg(dir.path("kek"))
        .args(["--operator-grace", "30", "--operator-reply-timeout", "60"])
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
        let dir = Scratch::new(tag);
        let kek = lev(["keys", "kek", "--out", dir.path("kek").to_str().unwrap()]);
        assert_eq!(kek.code, 0, "{kek:?}");
        let db = Database::new(tag);
        let a = replica(&dir, "a", &db);
        let b = replica(&dir, "b", &db);
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
        let mut body = json!({"name": name, "role": role});
        if role == "operator" {
            body["sessions"] = json!(["*"]);
        }
        let (status, v) = self
            .call(self.a.url(), "POST", "/v1/tokens", &self.admin, Some(body))
            .await;
        assert_eq!(status, 201, "{v}");
        v["token"].as_str().unwrap().to_owned()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_answer_on_one_replica_wakes_the_waiter_on_the_other() {
    let c = Cluster::start("wake");
    let worker = c.token("agent", "worker").await;
    let alice = c.token("alice", "approver").await;
    // Both replicas publish the one signing key.
    let (_, keys_a) = c.call(c.a.url(), "GET", "/v1/keys", "", None).await;
    let (_, keys_b) = c.call(c.b.url(), "GET", "/v1/keys", "", None).await;
    assert_eq!(keys_a, keys_b);
    let (_, health) = c.call(c.b.url(), "GET", "/v1/health", "", None).await;
    assert_eq!(health["store"], "postgres", "{health}");

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
        let (http, base, token) = (c.http.clone(), c.a.url().to_owned(), worker.clone());
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
