//! One HTTP stack: a refusal reads the same from every call, and the calls a
//! session or a sub-agent makes share the pool of the client they came from.
//!
//! The server is canned: it answers every request with one status and body,
//! keeps connections alive, and counts the connections it accepted.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use lev_client::operator::{
    Ask, Hook, HookDecision, Operator, OperatorError, OperatorHandler, Session, SpawnOrder,
    SpawnOutcome, post_worker_result,
};
use lev_client::{Client, Error, ListQuery};
use lev_protocol::WorkerResult;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt as _, AsyncReadExt as _, AsyncWriteExt as _, BufReader};
use tokio::net::TcpListener;

/// A server that answers every request with `status` and `body`.
struct Canned {
    url: String,
    connections: Arc<AtomicUsize>,
    /// `METHOD PATH authorization` of every request, in order.
    requests: Arc<Mutex<Vec<String>>>,
}

impl Canned {
    async fn start(status: u16, body: &str) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let connections = Arc::new(AtomicUsize::new(0));
        let requests = Arc::new(Mutex::new(Vec::new()));
        let response = format!(
            "HTTP/1.1 {status} Canned\r\ncontent-type: {}\r\ncontent-length: {}\r\n\r\n{body}",
            if body.starts_with('{') {
                "application/json"
            } else {
                "text/plain"
            },
            body.len()
        );
        let (count, log) = (Arc::clone(&connections), Arc::clone(&requests));
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                count.fetch_add(1, Ordering::SeqCst);
                let (response, log) = (response.clone(), Arc::clone(&log));
                tokio::spawn(async move {
                    let mut stream = BufReader::new(stream);
                    loop {
                        let mut head = String::new();
                        if stream.read_line(&mut head).await.unwrap_or(0) == 0 {
                            return;
                        }
                        let mut length = 0usize;
                        let mut auth = String::from("-");
                        loop {
                            let mut line = String::new();
                            if stream.read_line(&mut line).await.unwrap_or(0) == 0 {
                                return;
                            }
                            let line = line.trim_end();
                            if line.is_empty() {
                                break;
                            }
                            let (name, value) = line.split_once(':').unwrap_or((line, ""));
                            match name.to_ascii_lowercase().as_str() {
                                "content-length" => length = value.trim().parse().unwrap_or(0),
                                "authorization" => value.trim().clone_into(&mut auth),
                                _ => {}
                            }
                        }
                        let mut body = vec![0u8; length];
                        if stream.read_exact(&mut body).await.is_err() {
                            return;
                        }
                        let target = head.split(' ').take(2).collect::<Vec<_>>().join(" ");
                        log.lock().unwrap().push(format!("{target} {auth}"));
                        if stream
                            .get_mut()
                            .write_all(response.as_bytes())
                            .await
                            .is_err()
                        {
                            return;
                        }
                    }
                });
            }
        });
        Self {
            url,
            connections,
            requests,
        }
    }

    fn requests(&self) -> Vec<String> {
        self.requests.lock().unwrap().clone()
    }
}

/// An operator that is never asked anything (its connection is refused).
struct Idle;

impl OperatorHandler for Idle {
    async fn ask(&self, _ask: Ask) -> Value {
        Value::Null
    }
    async fn hook_before(&self, _hook: Hook) -> HookDecision {
        HookDecision::Allow
    }
    async fn spawn(&self, _order: SpawnOrder) -> SpawnOutcome {
        SpawnOutcome::deferred()
    }
}

fn result(task_id: &str) -> WorkerResult {
    WorkerResult {
        task_id: task_id.into(),
        value: json!({"done": true}),
        ok: true,
        error: None,
        output_tail: None,
    }
}

fn order(task_token: &str) -> SpawnOrder {
    SpawnOrder {
        req_id: "r-1".into(),
        task_id: "tk_1".into(),
        task_token: task_token.into(),
        spawn: json!({}),
    }
}

/// The error of every kind of call against a server that refuses them all
/// with `status` and `body`, as `(call, error)`; every one must be an
/// [`Error::Api`].
async fn refusals(status: u16, body: &str) -> Vec<(&'static str, Error)> {
    let server = Canned::start(status, body).await;
    let client = Client::new(&server.url, Some("worker-secret".into())).unwrap();
    let session = Session::new(&client, "s-2");
    let quick = Some(Duration::from_secs(5));
    let sub_agent = order("task-secret").sub_agent(&client);
    vec![
        (
            "Client::list_interactions",
            client
                .list_interactions(&ListQuery::all())
                .await
                .unwrap_err(),
        ),
        (
            "Client::list_tokens",
            client.list_tokens().await.unwrap_err(),
        ),
        ("Client::grants", client.grants().await.unwrap_err()),
        (
            "Client::get_task",
            client.get_task("tk_1").await.unwrap_err(),
        ),
        (
            "Session::ask",
            session
                .ask(json!("which branch?"), quick)
                .await
                .unwrap_err(),
        ),
        (
            "Session::spawn",
            session
                .spawn(json!({"agent": "a"}), quick)
                .await
                .unwrap_err(),
        ),
        (
            "post_worker_result",
            post_worker_result(&sub_agent, &result("tk_1"))
                .await
                .unwrap_err(),
        ),
        (
            "Client::post_worker_result",
            client
                .post_worker_result(&result("tk_1"))
                .await
                .unwrap_err(),
        ),
    ]
}

/// Every call reports the refusal as the very same `Error::Api`.
async fn assert_same_everywhere(status: u16, body: &str, code: &str, message: &str) {
    let errors = refusals(status, body).await;
    for (call, e) in &errors {
        assert!(
            matches!(e, Error::Api { .. }),
            "{call}: expected Error::Api, found {e:?}"
        );
        assert_eq!(e.status(), Some(status), "{call}: {e:?}");
        assert_eq!(e.code(), Some(code), "{call}: {e:?}");
        assert_eq!(
            e.to_string(),
            format!("{message} ({status} {code})"),
            "{call}"
        );
    }
    let (first_call, first) = &errors[0];
    for (call, e) in &errors[1..] {
        assert_eq!(
            format!("{e:?}"),
            format!("{first:?}"),
            "{call} and {first_call} differ"
        );
    }
}

#[tokio::test]
async fn a_session_scope_refusal_reads_the_same_from_every_call() {
    assert_same_everywhere(
        403,
        r#"{"error":{"code":"session_scope","message":"this token may not act in session \"s-2\""}}"#,
        "session_scope",
        "this token may not act in session \"s-2\"",
    )
    .await;
}

#[tokio::test]
async fn an_unknown_token_reads_the_same_from_every_call() {
    assert_same_everywhere(
        401,
        r#"{"error":{"code":"unauthorized","message":"unknown or revoked token"}}"#,
        "unauthorized",
        "unknown or revoked token",
    )
    .await;
}

/// A refusal without lev's error body (a proxy's page, say) is still an
/// `Error::Api` named after the status, from a session call as from any.
#[tokio::test]
async fn a_refusal_without_an_error_body_reads_the_same_from_every_call() {
    assert_same_everywhere(
        502,
        "upstream went away",
        "bad_gateway",
        "upstream went away",
    )
    .await;
}

/// The operator's WebSocket handshake, refused, carries the same error as a
/// `Client` call refused with that answer.
#[tokio::test]
async fn a_refused_operator_handshake_carries_the_clients_error() {
    for (status, body) in [
        (
            403,
            r#"{"error":{"code":"session_scope","message":"this token may not act in session \"s-2\""}}"#,
        ),
        (
            401,
            r#"{"error":{"code":"unauthorized","message":"unknown or revoked token"}}"#,
        ),
    ] {
        let server = Canned::start(status, body).await;
        let client = Client::new(&server.url, Some("operator-secret".into())).unwrap();
        let from_client = client.grants().await.unwrap_err();
        let operator = Operator::from_client(&client, "s-2");
        let stopped = tokio::time::timeout(Duration::from_secs(10), operator.run(Arc::new(Idle)))
            .await
            .expect("a refused operator stops at once");
        let Err(OperatorError::Refused {
            status: refused,
            error,
        }) = stopped
        else {
            panic!("expected a refusal, found {stopped:?}");
        };
        assert_eq!(refused, status);
        assert_eq!(format!("{error:?}"), format!("{from_client:?}"));
        let upgrade = server
            .requests()
            .into_iter()
            .find(|r| r.starts_with("GET /v1/operators/s-2/ws "))
            .expect("the handshake reached the server");
        assert!(upgrade.ends_with("Bearer operator-secret"), "{upgrade}");
    }
}

/// A sub-agent's client is the operator's server and pool with the task's
/// token: its results travel over the connection already open, no new HTTP
/// client is built per result.
#[tokio::test]
async fn post_worker_result_reuses_the_clients_pool() {
    let task = json!({
        "id": "tk_1", "session_id": "s-1", "status": "running", "spawn": {},
        "created_at": "2025-03-01T10:00:00Z", "updated_at": "2025-03-01T10:00:00Z"
    });
    let server = Canned::start(200, &task.to_string()).await;
    let client = Client::new(&server.url, Some("operator-secret".into())).unwrap();
    let operator = Operator::from_client(&client, "s-1");
    assert!(operator.client().shares_pool_with(&client));

    let sub_agent = order("task-secret").sub_agent(operator.client());
    assert!(sub_agent.shares_pool_with(&client));
    assert_eq!(sub_agent.token(), Some("task-secret"));
    assert_eq!(sub_agent.base_url(), client.base_url());

    client.get_task("tk_1").await.unwrap();
    for _ in 0..3 {
        let posted = post_worker_result(&sub_agent, &result("tk_1"))
            .await
            .unwrap();
        assert_eq!(posted.id, "tk_1");
    }
    assert_eq!(
        server.connections.load(Ordering::SeqCst),
        1,
        "every call over the one kept-alive connection: {:?}",
        server.requests()
    );
    assert_eq!(
        server.requests(),
        [
            "GET /v1/tasks/tk_1 Bearer operator-secret",
            "POST /v1/worker/result Bearer task-secret",
            "POST /v1/worker/result Bearer task-secret",
            "POST /v1/worker/result Bearer task-secret",
        ]
    );

    // A client made apart has a pool of its own.
    let apart = Client::new(&server.url, Some("task-secret".into())).unwrap();
    assert!(!apart.shares_pool_with(&client));
}
