//! The operator WebSocket with a real WebSocket client against the real
//! server: ask, hook and spawn, replies resolved exactly once, error frames
//! for hostile frames, replacement (close 4000) and re-send, escalation to
//! people, tasks and results (the `{}` deferral both ways), triage.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::{SinkExt as _, StreamExt as _};
use lev_server::{AppState, ConnectionSettings, OperatorSettings, Settings};
use lev_test_support::InProcess;
use reqwest::StatusCode;
use serde_json::{Value, json};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest as _;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

use crate::support::{code, message};

type Ws = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// A server with operator timings chosen by the test.
struct OpServer {
    url: String,
    admin: String,
    http: reqwest::Client,
    state: AppState,
    _server: InProcess,
}

fn timings(grace_ms: u64, reply_ms: u64) -> OperatorSettings {
    OperatorSettings {
        grace: Duration::from_millis(grace_ms),
        reply_timeout: Duration::from_millis(reply_ms),
        ping_interval: Duration::from_secs(15),
        dead_peer_timeout: Duration::from_secs(45),
    }
}

impl OpServer {
    async fn start(ops: OperatorSettings) -> Self {
        Self::start_with(ops, ConnectionSettings::default()).await
    }

    async fn start_with(ops: OperatorSettings, connections: ConnectionSettings) -> Self {
        let dir = Arc::new(tempfile::tempdir().unwrap());
        let server = InProcess::start_in(dir, |config| {
            config.operator_grace = ops.grace;
            config.operator_reply_timeout = ops.reply_timeout;
            config.settings = Settings {
                operators: ops,
                connections,
                ..Settings::default()
            };
        })
        .await
        .unwrap();
        Self {
            url: server.url.clone(),
            admin: server.admin.clone(),
            http: plain_http_client(),
            state: server.state.clone(),
            _server: server,
        }
    }

    async fn token(&self, name: &str, role: &str) -> String {
        let (status, v) = self
            .post(
                "/v1/tokens",
                &self.admin,
                &if role == "operator" {
                    json!({"name": name, "role": role, "sessions": ["*"]})
                } else {
                    json!({"name": name, "role": role})
                },
            )
            .await;
        assert_eq!(status, StatusCode::CREATED, "{v}");
        v["token"].as_str().unwrap().to_owned()
    }

    async fn post(&self, path: &str, token: &str, body: &Value) -> (StatusCode, Value) {
        let resp = self
            .http
            .post(format!("{}{path}", self.url))
            .bearer_auth(token)
            .json(body)
            .send()
            .await
            .unwrap();
        let status = resp.status();
        (status, resp.json().await.unwrap_or(Value::Null))
    }

    async fn get(&self, path: &str, token: &str) -> (StatusCode, Value) {
        let resp = self
            .http
            .get(format!("{}{path}", self.url))
            .bearer_auth(token)
            .send()
            .await
            .unwrap();
        let status = resp.status();
        (status, resp.json().await.unwrap_or(Value::Null))
    }

    /// POST in the background; the join handle yields status and body.
    fn post_later(
        &self,
        path: &str,
        token: &str,
        body: Value,
    ) -> tokio::task::JoinHandle<(StatusCode, Value)> {
        let (http, url, token) = (
            self.http.clone(),
            format!("{}{path}", self.url),
            token.to_owned(),
        );
        tokio::spawn(async move {
            let resp = http
                .post(url)
                .bearer_auth(token)
                .json(&body)
                .send()
                .await
                .unwrap();
            let status = resp.status();
            (status, resp.json().await.unwrap_or(Value::Null))
        })
    }

    async fn connect(&self, session: &str, token: &str) -> Ws {
        let url = format!(
            "{}/v1/operators/{session}/ws",
            self.url.replacen("http", "ws", 1)
        );
        let mut req = url.into_client_request().unwrap();
        req.headers_mut()
            .insert("authorization", format!("Bearer {token}").parse().unwrap());
        let (ws, _) = tokio_tungstenite::connect_async(req).await.unwrap();
        ws
    }

    /// Pending interactions of `session`.
    async fn pending(&self, session: &str) -> Vec<Value> {
        let (_, v) = self
            .get(
                &format!("/v1/interactions?session_id={session}"),
                &self.admin,
            )
            .await;
        v["items"].as_array().cloned().unwrap_or_default()
    }

    /// Wait until `session` has a pending interaction; returns the first.
    async fn wait_pending(&self, session: &str) -> Value {
        let started = Instant::now();
        loop {
            if let Some(first) = self.pending(session).await.into_iter().next() {
                return first;
            }
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "no interaction for people appeared in {session}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    async fn event_kinds(&self) -> Vec<(String, Value)> {
        self.state
            .store()
            .events_after(0, 1000)
            .await
            .unwrap()
            .into_iter()
            .map(|e| (e.kind, e.data))
            .collect()
    }
}

/// The next JSON text frame (pings are answered by reading).
async fn recv(ws: &mut Ws) -> Value {
    loop {
        let msg = tokio::time::timeout(Duration::from_secs(10), ws.next())
            .await
            .expect("a frame within 10 s")
            .expect("the connection is open")
            .expect("a frame, not an error");
        match msg {
            Message::Text(text) => return serde_json::from_str(text.as_str()).unwrap(),
            Message::Ping(_) | Message::Pong(_) => {}
            other => panic!("expected a text frame, found {other:?}"),
        }
    }
}

async fn send(ws: &mut Ws, v: Value) {
    ws.send(Message::Text(v.to_string().into())).await.unwrap();
}

async fn send_raw(ws: &mut Ws, text: &str) {
    ws.send(Message::Text(text.to_owned().into()))
        .await
        .unwrap();
}

/// Connect and read the hello; returns the socket and the hello's pending list.
async fn operator(s: &OpServer, session: &str, token: &str) -> (Ws, Vec<String>) {
    let mut ws = s.connect(session, token).await;
    let hello = recv(&mut ws).await;
    assert_eq!(hello["type"], "hello", "{hello}");
    assert_eq!(hello["session_id"], session);
    let pending = hello["pending"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_owned())
        .collect();
    (ws, pending)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ask_is_answered_by_the_operator() {
    let s = OpServer::start(timings(5_000, 5_000)).await;
    let worker = s.token("worker-1", "worker").await;
    let op = s.token("main-ai", "operator").await;
    let (mut ws, pending) = operator(&s, "s-1", &op).await;
    assert!(pending.is_empty());
    let call = s.post_later(
        "/v1/sessions/s-1/ask",
        &worker,
        json!({"question": {"which": "branch?"}, "timeout_s": 10}),
    );
    let ask = recv(&mut ws).await;
    assert_eq!(ask["type"], "ask");
    assert_eq!(ask["question"], json!({"which": "branch?"}));
    let req_id = ask["req_id"].as_str().unwrap();
    send(
        &mut ws,
        json!({"type": "answer", "req_id": req_id, "value": {"branch": "main"}}),
    )
    .await;
    let (status, v) = call.await.unwrap();
    assert_eq!(status, StatusCode::OK, "{v}");
    assert_eq!(
        v,
        json!({"answer": {"branch": "main"}, "answered_by": "main-ai"})
    );
    // A second reply to the resolved req_id changes nothing.
    send(
        &mut ws,
        json!({"type": "answer", "req_id": req_id, "value": 2}),
    )
    .await;
    let err = recv(&mut ws).await;
    assert_eq!(err["type"], "error");
    assert_eq!(err["code"], "already_resolved");
    assert_eq!(err["req_id"], req_id);
    drop(ws);
    let started = Instant::now();
    let kinds = loop {
        let kinds = s.event_kinds().await;
        if kinds.iter().any(|(k, _)| k == "operator.disconnected") {
            break kinds;
        }
        assert!(started.elapsed() < Duration::from_secs(5), "{kinds:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let connected = kinds
        .iter()
        .position(|(k, d)| k == "operator.connected" && d["session_id"] == "s-1");
    let disconnected = kinds
        .iter()
        .position(|(k, d)| k == "operator.disconnected" && d["session_id"] == "s-1");
    assert!(connected.is_some() && disconnected > connected, "{kinds:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_operator_tokens_connect() {
    let s = OpServer::start(timings(5_000, 5_000)).await;
    let worker = s.token("worker-1", "worker").await;
    let url = format!("{}/v1/operators/s-1/ws", s.url.replacen("http", "ws", 1));
    for (token, want) in [("", 401), (worker.as_str(), 403), ("lev_nope", 401)] {
        let mut req = url.clone().into_client_request().unwrap();
        if !token.is_empty() {
            req.headers_mut()
                .insert("authorization", format!("Bearer {token}").parse().unwrap());
        }
        match tokio_tungstenite::connect_async(req).await {
            Err(tokio_tungstenite::tungstenite::Error::Http(resp)) => {
                assert_eq!(resp.status().as_u16(), want);
            }
            other => panic!("expected HTTP {want}, found {:?}", other.map(|_| ())),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_frames_get_error_frames_and_change_nothing() {
    let s = OpServer::start(timings(5_000, 5_000)).await;
    let worker = s.token("worker-1", "worker").await;
    let op = s.token("main-ai", "operator").await;
    let (mut ws, _) = operator(&s, "s-1", &op).await;
    let call = s.post_later(
        "/v1/sessions/s-1/ask",
        &worker,
        json!({"question": "ok?", "timeout_s": 20}),
    );
    let ask = recv(&mut ws).await;
    let req_id = ask["req_id"].as_str().unwrap().to_owned();

    let cases: Vec<(String, &str)> = vec![
        ("not json".into(), "malformed"),
        ("[1,2]".into(), "malformed"),
        (r#"{"req_id":"x"}"#.into(), "malformed"),
        (r#"{"type":7}"#.into(), "malformed"),
        (
            r#"{"type":"hello","session_id":"s-1","pending":[]}"#.into(),
            "unknown_type",
        ),
        (r#"{"type":"rm -rf"}"#.into(), "unknown_type"),
        (r#"{"type":"answer","value":1}"#.into(), "malformed"),
        (
            format!(r#"{{"type":"answer","req_id":"{req_id}","req_id":"x","value":1}}"#),
            "malformed",
        ),
        (
            r#"{"type":"answer","req_id":"rq_nope","value":1}"#.into(),
            "unknown_req_id",
        ),
        (
            r#"{"type":"answer","req_id":"","value":1}"#.into(),
            "unknown_req_id",
        ),
        (
            format!(r#"{{"type":"hook_ack","req_id":"{req_id}","ok":true}}"#),
            "wrong_reply_kind",
        ),
        (
            format!(r#"{{"type":"spawn_ack","req_id":"{req_id}","value":{{}}}}"#),
            "wrong_reply_kind",
        ),
        ("{".repeat(5000), "malformed"),
    ];
    for (frame, want) in &cases {
        send_raw(&mut ws, frame).await;
        let err = recv(&mut ws).await;
        assert_eq!(err["type"], "error", "{frame}: {err}");
        assert_eq!(err["code"], *want, "{frame}: {err}");
        assert!(!err["message"].as_str().unwrap().is_empty());
    }
    ws.send(Message::Binary(vec![0xff, 0x00].into()))
        .await
        .unwrap();
    assert_eq!(recv(&mut ws).await["code"], "malformed");
    // The entry is untouched: the right reply still resolves it, once.
    send(
        &mut ws,
        json!({"type": "answer", "req_id": req_id, "value": "yes"}),
    )
    .await;
    let (status, v) = call.await.unwrap();
    assert_eq!(status, StatusCode::OK, "{v}");
    assert_eq!(v["answer"], "yes");
    // And the connection is still up for the next ask.
    let call = s.post_later(
        "/v1/sessions/s-1/ask",
        &worker,
        json!({"question": "again?", "timeout_s": 20}),
    );
    let ask = recv(&mut ws).await;
    send(
        &mut ws,
        json!({"type": "answer", "req_id": ask["req_id"], "value": "again"}),
    )
    .await;
    assert_eq!(call.await.unwrap().1["answer"], "again");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_connection_replaces_the_old_and_gets_every_unresolved_message_again() {
    let s = OpServer::start(timings(5_000, 10_000)).await;
    let worker = s.token("worker-1", "worker").await;
    let op = s.token("main-ai", "operator").await;
    let (mut old, _) = operator(&s, "s-1", &op).await;
    let first = s.post_later(
        "/v1/sessions/s-1/ask",
        &worker,
        json!({"question": "one", "timeout_s": 20}),
    );
    let second = s.post_later(
        "/v1/sessions/s-1/spawn",
        &worker,
        json!({"spawn": {"agent": "tests"}, "timeout_s": 20}),
    );
    let mut seen = vec![recv(&mut old).await, recv(&mut old).await];
    seen.sort_by_key(|m| m["type"].as_str().unwrap().to_owned());
    assert_eq!(seen[0]["type"], "ask");
    assert_eq!(seen[1]["type"], "hook_before");

    let (mut new, pending) = operator(&s, "s-1", &op).await;
    // The old connection is closed with 4000.
    let closed = loop {
        match tokio::time::timeout(Duration::from_secs(5), old.next()).await {
            Ok(Some(Ok(Message::Close(frame)))) => break frame,
            Ok(Some(Ok(_))) => {}
            other => panic!("expected a close frame, found {other:?}"),
        }
    };
    assert_eq!(u16::from(closed.unwrap().code), 4000);
    let mut want: Vec<String> = seen
        .iter()
        .map(|m| m["req_id"].as_str().unwrap().to_owned())
        .collect();
    want.sort();
    let mut got = pending.clone();
    got.sort();
    assert_eq!(got, want, "hello lists the unresolved req_ids");
    let mut again = vec![recv(&mut new).await, recv(&mut new).await];
    again.sort_by_key(|m| m["type"].as_str().unwrap().to_owned());
    assert_eq!(again, seen, "the same messages, under the same req_ids");

    send(
        &mut new,
        json!({"type": "answer", "req_id": again[0]["req_id"], "value": "from the new one"}),
    )
    .await;
    assert_eq!(first.await.unwrap().1["answer"], "from the new one");
    send(
        &mut new,
        json!({"type": "hook_ack", "req_id": again[1]["req_id"], "ok": false, "reason": "not now"}),
    )
    .await;
    let (status, v) = second.await.unwrap();
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert_eq!(code(&v), "rejected_by_middleware");
    assert_eq!(message(&v), "not now");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ask_waits_for_an_operator_to_connect() {
    let s = OpServer::start(timings(5_000, 5_000)).await;
    let worker = s.token("worker-1", "worker").await;
    let op = s.token("main-ai", "operator").await;
    let call = s.post_later(
        "/v1/sessions/s-9/ask",
        &worker,
        json!({"question": "anyone?", "timeout_s": 20}),
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (mut ws, pending) = operator(&s, "s-9", &op).await;
    assert_eq!(pending.len(), 1);
    let ask = recv(&mut ws).await;
    assert_eq!(ask["req_id"], pending[0].as_str());
    send(
        &mut ws,
        json!({"type": "answer", "req_id": pending[0], "value": 42}),
    )
    .await;
    assert_eq!(
        call.await.unwrap().1,
        json!({"answer": 42, "answered_by": "main-ai"})
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_operator_for_the_grace_time_sends_an_ask_to_people() {
    let s = OpServer::start(timings(300, 5_000)).await;
    let worker = s.token("worker-1", "worker").await;
    let approver = s.token("alice", "approver").await;
    let call = s.post_later(
        "/v1/sessions/s-2/ask",
        &worker,
        json!({"question": "deploy to staging?", "timeout_s": 20}),
    );
    let item = s.wait_pending("s-2").await;
    assert_eq!(item["request"]["kind"]["type"], "free_text");
    assert_eq!(item["request"]["kind"]["prompt"], "deploy to staging?");
    let reason = item["request"]["metadata"]["escalation"]["reason"]
        .as_str()
        .unwrap();
    assert!(reason.contains("no operator"), "{reason}");
    let id = item["request"]["id"].as_str().unwrap();
    let (status, v) = s
        .post(
            &format!("/v1/interactions/{id}/respond"),
            &approver,
            &json!({"request_id": id, "value": "yes, go"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{v}");
    let (status, v) = call.await.unwrap();
    assert_eq!(status, StatusCode::OK, "{v}");
    assert_eq!(v, json!({"answer": "yes, go", "answered_by": "alice"}));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_operator_past_the_reply_timeout_sends_an_ask_to_people() {
    let s = OpServer::start(timings(5_000, 300)).await;
    let worker = s.token("worker-1", "worker").await;
    let approver = s.token("alice", "approver").await;
    let op = s.token("main-ai", "operator").await;
    let (mut ws, _) = operator(&s, "s-3", &op).await;
    let call = s.post_later(
        "/v1/sessions/s-3/ask",
        &worker,
        json!({"question": "late?", "timeout_s": 20}),
    );
    let ask = recv(&mut ws).await;
    let item = s.wait_pending("s-3").await;
    assert!(
        item["request"]["metadata"]["escalation"]["reason"]
            .as_str()
            .unwrap()
            .contains("did not answer within")
    );
    // The operator's late answer is refused: people have it now.
    send(
        &mut ws,
        json!({"type": "answer", "req_id": ask["req_id"], "value": "too late"}),
    )
    .await;
    assert_eq!(recv(&mut ws).await["code"], "already_resolved");
    let id = item["request"]["id"].as_str().unwrap();
    s.post(
        &format!("/v1/interactions/{id}/respond"),
        &approver,
        &json!({"request_id": id, "value": "a person says yes"}),
    )
    .await;
    let (status, v) = call.await.unwrap();
    assert_eq!(status, StatusCode::OK, "{v}");
    assert_eq!(v["answered_by"], "alice");
    assert_eq!(v["answer"], "a person says yes");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timeout_s_bounds_the_whole_call_and_the_escalated_interaction_expires_with_it() {
    let s = OpServer::start(timings(200, 5_000)).await;
    let worker = s.token("worker-1", "worker").await;
    let started = Instant::now();
    let (status, v) = s
        .post(
            "/v1/sessions/s-4/ask",
            &worker,
            &json!({"question": "nobody?", "timeout_s": 1}),
        )
        .await;
    assert_eq!(status, StatusCode::GATEWAY_TIMEOUT, "{v}");
    assert_eq!(code(&v), "timeout");
    assert!(started.elapsed() < Duration::from_secs(5));
    let (_, all) = s
        .get("/v1/interactions?session_id=s-4&status=all", &s.admin)
        .await;
    let item = &all["items"][0]["request"];
    assert!(item["expires_at"].is_string(), "{all}");
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(s.pending("s-4").await.is_empty(), "expired with the call");
}

/// Accept the hook, then return the spawn message.
async fn accept_hook(ws: &mut Ws) -> Value {
    let hook = recv(ws).await;
    assert_eq!(hook["type"], "hook_before", "{hook}");
    send(
        ws,
        json!({"type": "hook_ack", "req_id": hook["req_id"], "ok": true}),
    )
    .await;
    let spawn = recv(ws).await;
    assert_eq!(spawn["type"], "spawn", "{spawn}");
    spawn
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spawn_runs_with_a_task_scoped_token_and_the_ack_value_wins() {
    let s = OpServer::start(timings(2_000, 5_000)).await;
    let worker = s.token("worker-1", "worker").await;
    let op = s.token("main-ai", "operator").await;
    let (mut ws, _) = operator(&s, "s-5", &op).await;
    let call = s.post_later(
        "/v1/sessions/s-5/spawn",
        &worker,
        json!({"spawn": {"agent": "reviewer", "prompt": "review #12"}, "timeout_s": 20}),
    );
    let spawn = accept_hook(&mut ws).await;
    assert_eq!(
        spawn["spawn"],
        json!({"agent": "reviewer", "prompt": "review #12"})
    );
    let task_id = spawn["task_id"].as_str().unwrap().to_owned();
    assert!(task_id.starts_with("tk_"));
    let task_token = spawn["task_token"].as_str().unwrap().to_owned();
    let (_, task) = s.get(&format!("/v1/tasks/{task_id}"), &worker).await;
    assert_eq!(task["status"], "running", "{task}");

    // The task token posts this task's result, and nothing else.
    let (status, v) = s
        .post(
            "/v1/worker/result",
            &task_token,
            &json!({"task_id": task_id, "value": {"lgtm": true}, "output_tail": "done\n"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{v}");
    assert_eq!(v["last_result"]["value"], json!({"lgtm": true}));
    let (status, _) = s
        .post(
            "/v1/worker/result",
            &task_token,
            &json!({"task_id": "tk_other", "value": 1}),
        )
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    for path in ["/v1/tasks", "/v1/interactions"] {
        assert_eq!(s.get(path, &task_token).await.0, StatusCode::UNAUTHORIZED);
    }
    let (status, _) = s
        .post("/v1/sessions/s-5/ask", &task_token, &json!({"question": 1}))
        .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);

    send(
        &mut ws,
        json!({"type": "spawn_ack", "req_id": spawn["req_id"], "value": {"summary": "approved"}}),
    )
    .await;
    let (status, v) = call.await.unwrap();
    assert_eq!(status, StatusCode::OK, "{v}");
    assert_eq!(
        v,
        json!({"task_id": task_id, "ok": true, "value": {"summary": "approved"}, "error": null})
    );
    let (_, task) = s.get(&format!("/v1/tasks/{task_id}"), &worker).await;
    assert_eq!(task["status"], "succeeded");
    assert_eq!(
        task["last_result"]["value"],
        json!({"lgtm": true}),
        "the HTTP-path result stays on the task"
    );
    assert_eq!(task["output_tail"], "done\n");
    // Finished: 409, the task token still recognised.
    let (status, v) = s
        .post(
            "/v1/worker/result",
            &task_token,
            &json!({"task_id": task_id, "value": 2}),
        )
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{v}");
    assert_eq!(code(&v), "task_finished");
    let (_, list) = s.get("/v1/tasks?session_id=s-5", &worker).await;
    assert_eq!(list["items"][0]["id"], task_id.as_str());
    let kinds = s.event_kinds().await;
    assert!(
        kinds
            .iter()
            .filter(|(k, d)| k == "task.updated" && d["id"] == task_id.as_str())
            .count()
            >= 4,
        "created, running, result, finished: {kinds:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_ack_defers_to_the_posted_result_in_either_order() {
    let s = OpServer::start(timings(3_000, 5_000)).await;
    let worker = s.token("worker-1", "worker").await;
    let op = s.token("main-ai", "operator").await;
    let (mut ws, _) = operator(&s, "s-6", &op).await;
    for result_first in [true, false] {
        let call = s.post_later(
            "/v1/sessions/s-6/spawn",
            &worker,
            json!({"spawn": {"n": result_first}, "timeout_s": 20}),
        );
        let spawn = accept_hook(&mut ws).await;
        let token = spawn["task_token"].as_str().unwrap().to_owned();
        let result = json!({"task_id": spawn["task_id"], "value": {"from": "http"}, "ok": true});
        let post_result = || s.post("/v1/worker/result", &token, &result);
        let ack = json!({"type": "spawn_ack", "req_id": spawn["req_id"], "value": {}});
        if result_first {
            assert_eq!(post_result().await.0, StatusCode::OK);
            send(&mut ws, ack).await;
        } else {
            send(&mut ws, ack).await;
            tokio::time::sleep(Duration::from_millis(300)).await;
            assert_eq!(post_result().await.0, StatusCode::OK);
        }
        let (status, v) = call.await.unwrap();
        assert_eq!(status, StatusCode::OK, "result first {result_first}: {v}");
        assert_eq!(v["value"], json!({"from": "http"}));
        assert_eq!(v["ok"], true);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_ack_without_a_result_within_the_grace_time_fails() {
    let s = OpServer::start(timings(300, 5_000)).await;
    let worker = s.token("worker-1", "worker").await;
    let op = s.token("main-ai", "operator").await;
    let (mut ws, _) = operator(&s, "s-7", &op).await;
    let call = s.post_later(
        "/v1/sessions/s-7/spawn",
        &worker,
        json!({"spawn": {}, "timeout_s": 20}),
    );
    let spawn = accept_hook(&mut ws).await;
    send(
        &mut ws,
        json!({"type": "spawn_ack", "req_id": spawn["req_id"], "value": {}}),
    )
    .await;
    let (status, v) = call.await.unwrap();
    assert_eq!(status, StatusCode::BAD_GATEWAY, "{v}");
    assert_eq!(code(&v), "spawn_failed");
    assert!(message(&v).contains("got none within"), "{v}");
    let (_, task) = s
        .get(
            &format!("/v1/tasks/{}", spawn["task_id"].as_str().unwrap()),
            &worker,
        )
        .await;
    assert_eq!(task["status"], "failed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spawn_ack_with_an_error_fails_the_spawn() {
    let s = OpServer::start(timings(2_000, 5_000)).await;
    let worker = s.token("worker-1", "worker").await;
    let op = s.token("main-ai", "operator").await;
    let (mut ws, _) = operator(&s, "s-8", &op).await;
    let call = s.post_later(
        "/v1/sessions/s-8/spawn",
        &worker,
        json!({"spawn": {"agent": "x"}, "timeout_s": 20}),
    );
    let spawn = accept_hook(&mut ws).await;
    send(
        &mut ws,
        json!({"type": "spawn_ack", "req_id": spawn["req_id"], "value": null, "ok": false, "error": "agent crashed"}),
    )
    .await;
    let (status, v) = call.await.unwrap();
    assert_eq!(status, StatusCode::BAD_GATEWAY, "{v}");
    assert_eq!(code(&v), "spawn_failed");
    assert!(message(&v).contains("agent crashed"));
    let (_, task) = s
        .get(
            &format!("/v1/tasks/{}", spawn["task_id"].as_str().unwrap()),
            &worker,
        )
        .await;
    assert_eq!(task["status"], "failed");
    assert_eq!(task["error"], "agent crashed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unvetted_hook_goes_to_people_as_a_spawn_approval() {
    let s = OpServer::start(timings(5_000, 300)).await;
    let worker = s.token("worker-1", "worker").await;
    let approver = s.token("alice", "approver").await;
    let op = s.token("main-ai", "operator").await;
    let (mut ws, _) = operator(&s, "s-10", &op).await;
    let spawn_body = json!({"agent": "migrator", "db": "prod"});
    let call = s.post_later(
        "/v1/sessions/s-10/spawn",
        &worker,
        json!({"spawn": spawn_body, "timeout_s": 20}),
    );
    let hook = recv(&mut ws).await;
    assert_eq!(hook["type"], "hook_before");
    let item = s.wait_pending("s-10").await;
    let kind = &item["request"]["kind"];
    assert_eq!(kind["type"], "tool_approval");
    assert_eq!(kind["tool_name"], "spawn");
    assert_eq!(
        serde_json::from_str::<Value>(kind["args_json"].as_str().unwrap()).unwrap(),
        spawn_body
    );
    let id = item["request"]["id"].as_str().unwrap();
    let (status, v) = s
        .post(
            &format!("/v1/interactions/{id}/respond"),
            &approver,
            &json!({"request_id": id, "approved": true}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{v}");
    // Approved by a person: the spawn goes on to the operator.
    let spawn = recv(&mut ws).await;
    assert_eq!(spawn["type"], "spawn");
    send(
        &mut ws,
        json!({"type": "spawn_ack", "req_id": spawn["req_id"], "value": "migrated"}),
    )
    .await;
    let (status, v) = call.await.unwrap();
    assert_eq!(status, StatusCode::OK, "{v}");
    assert_eq!(v["value"], "migrated");

    // A person's deny is a rejection with their feedback.
    let call = s.post_later(
        "/v1/sessions/s-10/spawn",
        &worker,
        json!({"spawn": {"agent": "again"}, "timeout_s": 20}),
    );
    recv(&mut ws).await;
    let item = s.wait_pending("s-10").await;
    let id = item["request"]["id"].as_str().unwrap();
    s.post(
        &format!("/v1/interactions/{id}/respond"),
        &approver,
        &json!({"request_id": id, "approved": false, "feedback": "not on a Friday"}),
    )
    .await;
    let (status, v) = call.await.unwrap();
    assert_eq!(status, StatusCode::FORBIDDEN, "{v}");
    assert_eq!(code(&v), "rejected_by_middleware");
    assert_eq!(message(&v), "not on a Friday");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spawn_whose_operator_is_gone_past_the_grace_time_fails_clearly() {
    let s = OpServer::start(timings(400, 5_000)).await;
    let worker = s.token("worker-1", "worker").await;
    let op = s.token("main-ai", "operator").await;
    let (mut ws, _) = operator(&s, "s-11", &op).await;
    let call = s.post_later(
        "/v1/sessions/s-11/spawn",
        &worker,
        json!({"spawn": {"agent": "x"}, "timeout_s": 20}),
    );
    let spawn = accept_hook(&mut ws).await;
    drop(ws);
    let (status, v) = call.await.unwrap();
    assert_eq!(status, StatusCode::BAD_GATEWAY, "{v}");
    assert_eq!(code(&v), "spawn_failed");
    assert!(message(&v).contains("no operator was connected"), "{v}");
    let (_, task) = s
        .get(
            &format!("/v1/tasks/{}", spawn["task_id"].as_str().unwrap()),
            &worker,
        )
        .await;
    assert_eq!(task["status"], "failed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn triage_lets_the_operator_decide_a_tool_approval_signed_in_its_name() {
    let s = OpServer::start(timings(5_000, 5_000)).await;
    let worker = s.token("worker-1", "worker").await;
    let op = s.token("main-ai", "operator").await;
    let (mut ws, _) = operator(&s, "s-12", &op).await;
    let (status, created) = s
        .post(
            "/v1/interactions",
            &worker,
            &json!({
                "session_id": "s-12",
                "kind": {"type": "tool_approval", "tool_name": "shell",
                         "args_json": "{\"argv\":[\"ls\"]}", "sandbox_mode": "workspace-write"},
                "route": ["operator", "human"],
            }),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    let id = created["id"].as_str().unwrap();
    let ask = recv(&mut ws).await;
    assert_eq!(ask["type"], "ask");
    assert_eq!(ask["question"]["interaction"]["id"], id);
    assert_eq!(ask["question"]["interaction"]["kind"]["tool_name"], "shell");
    send(
        &mut ws,
        json!({"type": "answer", "req_id": ask["req_id"], "value": {"approved": true, "reason": "read-only"}}),
    )
    .await;
    let (_, v) = s
        .get(&format!("/v1/interactions/{id}/wait?timeout_s=5"), &worker)
        .await;
    assert_eq!(v["status"], "answered", "{v}");
    assert_eq!(v["answered_by"], "main-ai");
    let payload = v["approval"]["payload"].as_str().unwrap();
    let payload: Value =
        serde_json::from_slice(&lev_approval::decode_base64(payload).unwrap()).unwrap();
    assert_eq!(payload["approver"], "main-ai");
    assert_eq!(payload["approved"], true);
    assert_eq!(payload["request_id"], id);
    let keys = lev_approval::TrustedKeys::parse(
        &reqwest::get(format!("{}/v1/keys", s.url))
            .await
            .unwrap()
            .text()
            .await
            .unwrap(),
    )
    .unwrap();
    let envelope: lev_protocol::Envelope = serde_json::from_value(v["approval"].clone()).unwrap();
    assert!(
        lev_approval::verify(&envelope, &keys, time::OffsetDateTime::now_utc()).is_ok(),
        "the operator's decision verifies"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn triage_escalation_hands_it_to_people_with_the_reason() {
    let s = OpServer::start(timings(5_000, 5_000)).await;
    let worker = s.token("worker-1", "worker").await;
    let approver = s.token("alice", "approver").await;
    let op = s.token("main-ai", "operator").await;
    let (mut ws, _) = operator(&s, "s-13", &op).await;
    let body = json!({
        "id": "ir_triage_1",
        "session_id": "s-13",
        "kind": {"type": "free_text", "prompt": "which customer?"},
        "route": ["operator", "human"],
        "metadata": {"ticket": 7},
    });
    let (status, _) = s.post("/v1/interactions", &worker, &body).await;
    assert_eq!(status, StatusCode::CREATED);
    let ask = recv(&mut ws).await;
    // An invalid answer is refused with an error frame and goes to people too;
    // here the operator escalates on purpose.
    send(
        &mut ws,
        json!({"type": "answer", "req_id": ask["req_id"], "value": {"escalate": "needs a human: billing"}}),
    )
    .await;
    let started = Instant::now();
    let item = loop {
        let (_, v) = s.get("/v1/interactions/ir_triage_1", &worker).await;
        if v["request"]["metadata"]["escalation"].is_object() {
            break v;
        }
        assert!(started.elapsed() < Duration::from_secs(5), "{v}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let meta = &item["request"]["metadata"];
    assert_eq!(meta["ticket"], 7);
    assert_eq!(meta["escalation"]["reason"], "needs a human: billing");
    assert_eq!(meta["escalation"]["by"], "main-ai");
    assert_eq!(item["request"]["status"], "pending");
    let kinds = s.event_kinds().await;
    assert!(kinds.iter().any(|(k, d)| k == "interaction.escalated"
        && d["request"]["metadata"]["escalation"]["reason"] == "needs a human: billing"));
    // The create stays idempotent for the worker that retries it.
    assert_eq!(
        s.post("/v1/interactions", &worker, &body).await.0,
        StatusCode::OK
    );
    let (status, _) = s
        .post(
            "/v1/interactions/ir_triage_1/respond",
            &approver,
            &json!({"request_id": "ir_triage_1", "value": "ACME"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK);

    // An answer that does not fit the question: an error frame, and people decide.
    s.post(
        "/v1/interactions",
        &worker,
        &json!({"id": "ir_triage_2", "session_id": "s-13",
                "kind": {"type": "multiple_choice", "prompt": "?", "options": ["a"]},
                "route": ["operator"]}),
    )
    .await;
    let ask = recv(&mut ws).await;
    send(
        &mut ws,
        json!({"type": "answer", "req_id": ask["req_id"], "value": {"choice_index": 9}}),
    )
    .await;
    let err = recv(&mut ws).await;
    assert_eq!(err["code"], "invalid_answer", "{err}");
    let started = Instant::now();
    loop {
        let (_, v) = s.get("/v1/interactions/ir_triage_2", &worker).await;
        if let Some(reason) = v["request"]["metadata"]["escalation"]["reason"].as_str() {
            assert!(reason.contains("refused"), "{reason}");
            assert_eq!(v["request"]["status"], "pending");
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(5), "{v}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_that_stops_answering_pings_is_dropped() {
    let s = OpServer::start(OperatorSettings {
        ping_interval: Duration::from_millis(100),
        dead_peer_timeout: Duration::from_millis(400),
        ..timings(5_000, 5_000)
    })
    .await;
    let op = s.token("main-ai", "operator").await;
    // Never read again: no pong goes back.
    let (_ws, _) = operator(&s, "s-14", &op).await;
    assert!(s.state.operators().is_connected("s-14").await.unwrap());
    let started = Instant::now();
    while s.state.operators().is_connected("s-14").await.unwrap() {
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "still connected"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // The event commits just after the hub lets go of the connection.
    while !s
        .event_kinds()
        .await
        .iter()
        .any(|(k, d)| k == "operator.disconnected" && d["session_id"] == "s-14")
    {
        assert!(started.elapsed() < Duration::from_secs(5), "no event");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The issue's flood (392 to 771 MB in 12 s): an operator sends frames
/// that each get an error frame back and never reads its socket. The
/// server's queue toward it stays bounded (its frames are no longer read
/// while their errors wait), it is closed with 1008 and a reason saying it
/// did not read once a write waited past the write timeout, and the close
/// is audited with the session, the operator and why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_that_floods_and_never_reads_is_closed_1008_and_audited() {
    let s = OpServer::start_with(
        timings(5_000, 5_000),
        ConnectionSettings {
            write_timeout: Duration::from_secs(1),
            ..ConnectionSettings::default()
        },
    )
    .await;
    let op = s.token("flooder", "operator").await;
    let addr: std::net::SocketAddr = s.url.trim_start_matches("http://").parse().unwrap();
    // A small receive buffer: the server's writes back up soon.
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    let tcp = socket.connect(addr).await.unwrap();
    let mut req = format!("ws://{addr}/v1/operators/s-flood/ws")
        .into_client_request()
        .unwrap();
    req.headers_mut()
        .insert("authorization", format!("Bearer {op}").parse().unwrap());
    let (ws, _) = tokio_tungstenite::client_async(req, tcp).await.unwrap();
    let (mut tx, mut rx) = ws.split();
    let dropped = || async {
        s.state
            .store()
            .audit_after(0, 10_000)
            .await
            .unwrap()
            .into_iter()
            .find(|e| e.action == "operator.dropped")
    };
    let started = Instant::now();
    let mut sent = 0u64;
    let entry = loop {
        if let Some(entry) = dropped().await {
            break entry;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "still not closed after {sent} bad frames"
        );
        // Frames the server cannot parse, a batch at a time; a batch that
        // stalls means the server stopped reading.
        let batch = async {
            for _ in 0..2_000 {
                tx.feed(Message::Text("x".into())).await?;
            }
            tx.flush().await
        };
        if let Ok(Ok(())) = tokio::time::timeout(Duration::from_secs(1), batch).await {
            sent += 2_000;
        }
    };
    assert_eq!(entry.actor, "system");
    assert_eq!(entry.data["session_id"], "s-flood");
    assert_eq!(entry.data["operator"], "flooder");
    assert_eq!(entry.data["code"], 1008);
    assert!(
        entry.data["reason"]
            .as_str()
            .unwrap()
            .contains("did not read"),
        "{}",
        entry.data
    );
    // What was queued for it was bounded: two lanes of 64 frames.
    assert!(
        entry.data["queued_frames"].as_u64().unwrap() <= 128,
        "{}",
        entry.data
    );
    assert!(
        entry.data["queued_bytes"].as_u64().unwrap() <= 5 * 1024 * 1024,
        "{}",
        entry.data
    );
    // Reading now: the error frames the kernel held, then the close frame.
    let close = tokio::time::timeout(Duration::from_secs(20), async {
        while let Some(msg) = rx.next().await {
            match msg {
                Ok(Message::Close(frame)) => return frame,
                Ok(_) => {}
                Err(e) => panic!("the connection failed before its close frame: {e}"),
            }
        }
        None
    })
    .await
    .expect("the close frame within 20 s")
    .expect("a close frame with a code");
    assert_eq!(u16::from(close.code), 1008);
    assert!(
        close.reason.as_str().contains("did not read"),
        "{}",
        close.reason
    );
    let started = Instant::now();
    while s.state.operators().is_connected("s-flood").await.unwrap() {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "still connected"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// More messages pending than a connection's queue holds (64): the
/// operator still gets every one, in order, as it reads them (what does
/// not fit waits in the store and follows as the queue drains).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn more_pending_messages_than_the_queue_holds_all_arrive() {
    let s = OpServer::start(timings(20_000, 20_000)).await;
    let worker = s.token("worker-1", "worker").await;
    let op = s.token("main-ai", "operator").await;
    let calls: Vec<_> = (0..150)
        .map(|n| {
            s.post_later(
                "/v1/sessions/s-many/ask",
                &worker,
                json!({"question": {"n": n}, "timeout_s": 30}),
            )
        })
        .collect();
    // Let every ask be posted before the operator connects.
    let started = Instant::now();
    while s
        .state
        .store()
        .pending_operator_requests("s-many")
        .await
        .unwrap()
        .len()
        < 150
    {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "asks not posted"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (mut ws, pending) = operator(&s, "s-many", &op).await;
    assert_eq!(pending.len(), 150);
    let mut seen = Vec::new();
    while seen.len() < 150 {
        let ask = recv(&mut ws).await;
        assert_eq!(ask["type"], "ask", "{ask}");
        let req_id = ask["req_id"].as_str().unwrap().to_owned();
        send(
            &mut ws,
            json!({"type": "answer", "req_id": req_id, "value": ask["question"]["n"]}),
        )
        .await;
        seen.push(req_id);
    }
    assert_eq!(seen, pending, "every pending message, once, in order");
    for call in calls {
        let (status, v) = call.await.unwrap();
        assert_eq!(status, StatusCode::OK, "{v}");
    }
}

/// Echoed input is capped: a frame whose `type` is a megabyte long gets an
/// error frame of at most a few KiB (it used to quote it whole).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn error_frames_do_not_echo_large_input() {
    let s = OpServer::start(timings(5_000, 5_000)).await;
    let op = s.token("main-ai", "operator").await;
    let (mut ws, _) = operator(&s, "s-echo", &op).await;
    let long = "t".repeat(900 * 1024);
    send(
        &mut ws,
        json!({"type": long, "req_id": "r".repeat(100_000)}),
    )
    .await;
    let err = recv(&mut ws).await;
    assert_eq!(err["code"], "unknown_type", "{err}");
    assert!(
        err.to_string().len() < 4096,
        "{} bytes",
        err.to_string().len()
    );
    assert!(err.get("req_id").is_none(), "a long req_id is not echoed");
}

/// A reqwest client for plain HTTP. Built with the rest of the workspace,
/// reqwest has lev-client's rustls without a default crypto provider; ring
/// (the server's provider) is installed so that building a client works.
fn plain_http_client() -> reqwest::Client {
    let _ = tokio_rustls::rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::new()
}
