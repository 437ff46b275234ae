//! Operators against the real `lev serve` binary: a worker asks and spawns
//! while an operator answers (the Rust SDK, and a Python program using the
//! `websockets` package); when the operator dies, the next ask waits out the
//! grace time, appears in `lev ls` for a person, and the person's
//! `lev respond` reaches the worker.
//!
//! The Python interpreter is `$LEV_TEST_PYTHON`, else `.venv/bin/python` at
//! the repository root (made by `scripts/python-env.sh`); without one the
//! test fails with a hint rather than skip.

use std::io::{BufRead as _, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

use lev_client::Client;
use lev_client::operator::{
    Ask, Hook, HookDecision, Operator, OperatorHandler, Session, SpawnOrder, SpawnOutcome,
    post_worker_result,
};
use lev_protocol::WorkerResult;
use lev_protocol::api::{Role, TokenCreate};
use serde_json::{Value, json};

use super::support::{Run, Scratch, lev, repo_root};
use crate::spawned::Spawned;

/// `lev serve` on port 0 with short operator timings, killed when dropped.
struct Served {
    server: Spawned,
    url: String,
    admin: String,
    _dir: Scratch,
}

impl Served {
    fn start(name: &str, grace_s: u32, reply_s: u32) -> Self {
        let dir = Scratch::new(name);
        let server = Spawned::builder(env!("CARGO_BIN_EXE_lev"), dir.path("data"))
            .args(["--operator-grace", &grace_s.to_string()])
            .args(["--operator-reply-timeout", &reply_s.to_string()])
            .start()
            .unwrap();
        Self {
            url: server.url().to_owned(),
            admin: server.admin_token().unwrap(),
            server,
            _dir: dir,
        }
    }

    /// What the server wrote on stderr so far.
    fn stderr(&self) -> String {
        self.server.log()
    }

    async fn token(&self, name: &str, role: Role) -> String {
        let admin = Client::new(&self.url, Some(self.admin.clone())).unwrap();
        admin
            .create_token(&TokenCreate {
                name: name.into(),
                role,
                caller: None,
                sessions: (role == Role::Operator).then(|| vec!["*".into()]),
            })
            .await
            .unwrap()
            .token
    }

    /// `lev ARGS --url URL --token TOKEN`, off the async runtime.
    async fn lev(&self, token: &str, args: &[&str]) -> Run {
        let mut all: Vec<String> = args.iter().map(|s| (*s).to_owned()).collect();
        all.extend([
            "--url".into(),
            self.url.clone(),
            "--token".into(),
            token.into(),
        ]);
        tokio::task::spawn_blocking(move || lev(all)).await.unwrap()
    }

    /// Wait until `lev ls --session SESSION --json` lists an interaction; its id.
    async fn pending_in_lev_ls(&self, token: &str, session: &str) -> Value {
        let started = Instant::now();
        loop {
            let run = self
                .lev(token, &["ls", "--session", session, "--json"])
                .await;
            assert_eq!(run.code, 0, "{run:?}");
            if let Some(first) = run.json().as_array().and_then(|a| a.first().cloned()) {
                return first;
            }
            assert!(
                started.elapsed() < Duration::from_secs(20),
                "nothing for people appeared in lev ls"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

/// The operator of the "done when" story: answers, vets, runs sub-agents.
struct SmallOperator {
    url: String,
}

impl OperatorHandler for SmallOperator {
    async fn ask(&self, ask: Ask) -> Value {
        json!({"echo": ask.question})
    }

    async fn hook_before(&self, hook: Hook) -> HookDecision {
        if hook.spawn["reject"] == true {
            HookDecision::Reject("not this one".into())
        } else {
            HookDecision::Allow
        }
    }

    async fn spawn(&self, order: SpawnOrder) -> SpawnOutcome {
        let sub_agent = Client::new(&self.url, Some(order.task_token)).unwrap();
        let posted = post_worker_result(
            &sub_agent,
            &WorkerResult {
                task_id: order.task_id,
                value: json!({"sub_agent_did": order.spawn}),
                ok: true,
                error: None,
                output_tail: Some("ok\n".into()),
            },
        )
        .await;
        match posted {
            Ok(_) => SpawnOutcome::deferred(),
            Err(e) => SpawnOutcome::failed(e.to_string()),
        }
    }
}

/// After the operator is gone: the next ask reaches a person through
/// `lev ls`, who answers with `lev respond`; the worker gets that answer.
async fn a_person_answers_after_the_operator_died(s: &Served, session: &Session, sid: &str) {
    let approver = s.token("alice", Role::Approver).await;
    let asking = {
        let session = session.clone();
        tokio::spawn(async move {
            session
                .ask(
                    json!("is the release ready?"),
                    Some(Duration::from_secs(60)),
                )
                .await
        })
    };
    let item = s.pending_in_lev_ls(&approver, sid).await;
    assert_eq!(item["request"]["kind"]["type"], "free_text");
    assert_eq!(item["request"]["kind"]["prompt"], "is the release ready?");
    let id = item["request"]["id"].as_str().unwrap().to_owned();
    let run = s
        .lev(&approver, &["respond", &id, "--text", "yes, ship it"])
        .await;
    assert_eq!(run.code, 0, "{run:?}");
    let answer = asking.await.unwrap().unwrap();
    assert_eq!(answer.answer, json!("yes, ship it"));
    assert_eq!(answer.answered_by, "alice");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_asks_and_spawns_while_an_sdk_operator_answers_then_a_person_takes_over() {
    let s = Served::start("op-sdk", 1, 30);
    let op_token = s.token("main-ai", Role::Operator).await;
    let worker = Client::new(&s.url, Some(s.token("worker-1", Role::Worker).await)).unwrap();
    let operator = Operator::new(&s.url, &op_token, "s-1")
        .unwrap()
        .with_backoff(Duration::from_millis(50), Duration::from_millis(500));
    let handler = Arc::new(SmallOperator { url: s.url.clone() });
    let running = tokio::spawn(async move { operator.run(handler).await });

    let session = Session::new(&worker, "s-1");
    let answer = session
        .ask(json!({"q": "which branch?"}), Some(Duration::from_secs(20)))
        .await
        .unwrap();
    assert_eq!(answer.answer, json!({"echo": {"q": "which branch?"}}));
    assert_eq!(answer.answered_by, "main-ai");

    let spawned = session
        .spawn(json!({"agent": "tests"}), Some(Duration::from_secs(20)))
        .await
        .unwrap();
    assert!(spawned.ok);
    assert_eq!(spawned.value, json!({"sub_agent_did": {"agent": "tests"}}));
    assert!(spawned.task_id.starts_with("tk_"));

    let refused = session
        .spawn(json!({"reject": true}), Some(Duration::from_secs(20)))
        .await
        .unwrap_err();
    assert_eq!(refused.status(), Some(403));
    assert_eq!(refused.code(), Some("rejected_by_middleware"));

    // Kill the operator: its connection drops.
    running.abort();
    let _ = running.await;
    a_person_answers_after_the_operator_died(&s, &session, "s-1").await;
}

const PYTHON_SETUP: &str = "run scripts/python-env.sh (it makes .venv with the pinned packages, websockets among them), or set LEV_TEST_PYTHON to a python3 that has `websockets`";

fn python() -> PathBuf {
    let candidate = std::env::var_os("LEV_TEST_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join(".venv/bin/python"));
    assert!(
        candidate.exists(),
        "no Python interpreter for the Python operator at {}\nhint: {PYTHON_SETUP}",
        candidate.display()
    );
    candidate
}

/// The Python operator's process and the JSON lines it prints.
struct PythonOperator {
    child: Child,
    lines: mpsc::Receiver<Value>,
}

impl Drop for PythonOperator {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl PythonOperator {
    fn start(s: &Served, session: &str, token: &str) -> Self {
        let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/python/ws_operator.py");
        let ws_url = format!(
            "{}/v1/operators/{session}/ws",
            s.url.replacen("http://", "ws://", 1)
        );
        let mut child = Command::new(python())
            .arg(&script)
            .arg(ws_url)
            .arg(token)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap_or_else(|e| {
                panic!("cannot start the Python operator: {e}\nhint: {PYTHON_SETUP}")
            });
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if let Ok(v) = serde_json::from_str::<Value>(&line) {
                    let _ = tx.send(v);
                }
            }
        });
        Self { child, lines }
    }

    /// The next line the operator printed.
    fn next(&self) -> Value {
        self.lines
            .recv_timeout(Duration::from_secs(20))
            .unwrap_or_else(|_| {
                panic!("the Python operator printed nothing in 20 s\nhint: {PYTHON_SETUP}")
            })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_written_in_python_answers_asks_and_runs_spawns() {
    let s = Served::start("op-python", 1, 30);
    let op_token = s.token("py-operator", Role::Operator).await;
    let worker = Client::new(&s.url, Some(s.token("worker-1", Role::Worker).await)).unwrap();
    let py = PythonOperator::start(&s, "s-py", &op_token);
    let hello = py.next();
    assert_eq!(hello["msg"]["type"], "hello", "{hello}");
    assert_eq!(hello["msg"]["session_id"], "s-py");
    let error = py.next();
    assert_eq!(error["msg"]["type"], "error", "{error}");
    assert_eq!(error["msg"]["code"], "malformed");

    let session = Session::new(&worker, "s-py");
    let answer = session
        .ask(json!(["from", "rust"]), Some(Duration::from_secs(20)))
        .await
        .unwrap();
    assert_eq!(answer.answer, json!({"python": ["from", "rust"]}));
    assert_eq!(answer.answered_by, "py-operator");

    let spawned = session
        .spawn(json!({"task": "lint"}), Some(Duration::from_secs(20)))
        .await
        .unwrap();
    assert_eq!(
        spawned.value,
        json!({"ran_by": "python", "spawn": {"task": "lint"}}),
        "the ack deferred to the result Python posted with the task token"
    );
    let refused = session
        .spawn(json!({"reject": true}), Some(Duration::from_secs(20)))
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Some("rejected_by_middleware"));
    assert!(refused.to_string().contains("python says no"), "{refused}");

    drop(py);
    a_person_answers_after_the_operator_died(&s, &session, "s-py").await;
}

/// Open the operator socket of `session` with `token`: the socket, or the
/// HTTP status and error code of the refusal.
async fn open_operator_socket(
    url: &str,
    session: &str,
    token: &str,
) -> Result<
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>,
    (u16, String),
> {
    use tokio_tungstenite::tungstenite::client::IntoClientRequest as _;
    let ws_url = format!(
        "{}/v1/operators/{session}/ws",
        url.replacen("http", "ws", 1)
    );
    let mut req = ws_url.into_client_request().unwrap();
    req.headers_mut()
        .insert("authorization", format!("Bearer {token}").parse().unwrap());
    match tokio_tungstenite::connect_async(req).await {
        Ok((ws, _)) => Ok(ws),
        Err(tokio_tungstenite::tungstenite::Error::Http(resp)) => {
            let body: Value = resp
                .body()
                .as_deref()
                .and_then(|b| serde_json::from_slice(b).ok())
                .unwrap_or(Value::Null);
            Err((
                resp.status().as_u16(),
                body["error"]["code"].as_str().unwrap_or("").to_owned(),
            ))
        }
        Err(e) => panic!("connect: {e}"),
    }
}

/// Operator takeover, as an attacker tried it: an operator token of one
/// session's team connects to another session. Refused with 403
/// `session_scope`; an operator token without sessions cannot be made; a
/// replacement by a covering token closes the old socket with 4000, is
/// audited with both names, and the server does not panic doing it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operator_tokens_act_only_in_their_sessions_and_replacements_are_audited() {
    use futures_util::StreamExt as _;
    let s = Served::start("op-scope", 5, 30);
    let made = |name: &str, sessions: &str| {
        lev([
            "token",
            "create",
            name,
            "--role",
            "operator",
            "--sessions",
            sessions,
            "--json",
            "--url",
            &s.url,
            "--token",
            &s.admin,
        ])
    };
    let ci = made("ci-ops", "ci-*");
    assert_eq!(ci.code, 0, "{ci:?}");
    let ci = ci.json()["token"].as_str().unwrap().to_owned();
    let ci2 = made("ci-ops-2", "build-7, ci-*").json()["token"]
        .as_str()
        .unwrap()
        .to_owned();
    let build = made("build-ops", "build-7").json()["token"]
        .as_str()
        .unwrap()
        .to_owned();

    // Without --sessions an operator token is refused; so are reserved names.
    let unscoped = lev([
        "token", "create", "any-ops", "--role", "operator", "--url", &s.url, "--token", &s.admin,
    ]);
    assert_eq!(unscoped.code, 1, "{unscoped:?}");
    assert!(unscoped.stderr.contains("sessions"), "{}", unscoped.stderr);
    for reserved in [
        "policy",
        "timeout",
        "system",
        "operator",
        "person:ann",
        "group:oncall",
    ] {
        let run = lev([
            "token", "create", reserved, "--role", "approver", "--url", &s.url, "--token", &s.admin,
        ]);
        assert_eq!(run.code, 1, "{reserved}: {run:?}");
        assert!(
            run.stderr.contains("reserved"),
            "{reserved}: {}",
            run.stderr
        );
    }
    let listed = lev([
        "token", "ls", "--json", "--url", &s.url, "--token", &s.admin,
    ]);
    let ci_row = listed
        .json()
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "ci-ops-2")
        .cloned()
        .unwrap();
    assert_eq!(ci_row["sessions"], json!(["build-7", "ci-*"]));

    // Another team's session: 403 session_scope, before any upgrade.
    assert_eq!(
        open_operator_socket(&s.url, "ci-1", &build).await.err(),
        Some((403, "session_scope".to_owned()))
    );
    // A worker limited to sessions cannot ask outside them either.
    let worker = Client::new(&s.url, Some(s.admin.clone())).unwrap();
    let scoped_worker = worker
        .create_token(&TokenCreate {
            name: "ci-worker".into(),
            role: Role::Worker,
            caller: None,
            sessions: Some(vec!["ci-*".into()]),
        })
        .await
        .unwrap()
        .token;
    let scoped_worker = Client::new(&s.url, Some(scoped_worker)).unwrap();
    let refused = Session::new(&scoped_worker, "build-7")
        .ask(json!("may I?"), Some(Duration::from_secs(1)))
        .await
        .unwrap_err();
    assert!(refused.to_string().contains("session_scope"), "{refused}");

    // The covering token connects; a second covering token replaces it.
    let mut first = open_operator_socket(&s.url, "ci-1", &ci).await.unwrap();
    let hello = first.next().await.unwrap().unwrap();
    assert!(hello.to_text().unwrap().contains("\"hello\""), "{hello:?}");
    let mut second = open_operator_socket(&s.url, "ci-1", &ci2).await.unwrap();
    let _hello = second.next().await.unwrap().unwrap();
    let closed = loop {
        match tokio::time::timeout(Duration::from_secs(5), first.next()).await {
            Ok(Some(Ok(tokio_tungstenite::tungstenite::Message::Close(frame)))) => break frame,
            Ok(Some(Ok(_))) => {}
            other => panic!("expected a close frame, found {other:?}"),
        }
    };
    assert_eq!(u16::from(closed.unwrap().code), 4000);
    // And once more, back to the first token.
    let mut third = open_operator_socket(&s.url, "ci-1", &ci).await.unwrap();
    let _hello = third.next().await.unwrap().unwrap();
    drop(second);
    tokio::time::sleep(Duration::from_millis(300)).await;

    let audit = lev(["audit", "--json", "--url", &s.url, "--token", &s.admin]);
    assert_eq!(audit.code, 0, "{audit:?}");
    let replaced: Vec<(String, String)> = audit.json()["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["action"] == "operator.replaced")
        .map(|e| {
            (
                e["data"]["replaced"].as_str().unwrap().to_owned(),
                e["data"]["by"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        replaced,
        [
            ("ci-ops".to_owned(), "ci-ops-2".to_owned()),
            ("ci-ops-2".to_owned(), "ci-ops".to_owned())
        ]
    );
    let stderr = s.stderr();
    assert!(
        !stderr.contains("panicked"),
        "the server panicked:\n{stderr}"
    );
}
