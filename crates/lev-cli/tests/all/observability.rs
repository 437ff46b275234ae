//! What an operator's tools read from a real `lev serve`: its JSON log lines
//! (parsed line by line: one per request, with its fields, and no token's
//! secret anywhere), and `/metrics` parsed by `prometheus_client`'s
//! OpenMetrics parser (the Prometheus project's Python library) against a
//! run whose counts the test knows.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::spawned::Spawned;
use crate::support::{Scratch, repo_root};

const SETUP: &str = "run scripts/python-env.sh (it makes .venv with the pinned packages of scripts/requirements-test.txt, prometheus-client among them), or set LEV_TEST_PYTHON to a python3 that has them";

/// The Python interpreter with `prometheus_client`.
fn python() -> PathBuf {
    let candidate = std::env::var_os("LEV_TEST_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join(".venv/bin/python"));
    assert!(
        candidate.exists(),
        "no Python interpreter at {}\nhint: {SETUP}",
        candidate.display()
    );
    candidate
}

/// reqwest over plain HTTP, with the ring provider the workspace builds.
fn http_client() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder().no_proxy().build().unwrap()
}

/// A server, an HTTP client, and the tokens of a worker and an approver.
struct Run {
    server: Spawned,
    http: reqwest::Client,
    admin: String,
    worker: String,
    approver: String,
}

impl Run {
    async fn start(scratch: &Scratch, args: &[&str]) -> Self {
        let server = Spawned::builder(env!("CARGO_BIN_EXE_lev"), scratch.path("data"))
            .args(args.iter().copied())
            .start()
            .unwrap();
        let admin = server.admin_token().unwrap();
        let mut run = Self {
            server,
            http: http_client(),
            admin,
            worker: String::new(),
            approver: String::new(),
        };
        run.worker = run.token("w-obs", "worker").await;
        run.approver = run.token("a-obs", "approver").await;
        run
    }

    async fn token(&self, name: &str, role: &str) -> String {
        let (status, v) = self
            .call(
                "POST",
                "/v1/tokens",
                &self.admin,
                Some(json!({"name": name, "role": role})),
            )
            .await;
        assert_eq!(status, StatusCode::CREATED, "{v}");
        v["token"].as_str().unwrap().to_owned()
    }

    async fn call(
        &self,
        method: &str,
        path: &str,
        token: &str,
        body: Option<Value>,
    ) -> (StatusCode, Value) {
        let mut req = self
            .http
            .request(
                method.parse().unwrap(),
                format!("{}{path}", self.server.url()),
            )
            .bearer_auth(token);
        if let Some(body) = body {
            req = req.json(&body);
        }
        let resp = req.send().await.unwrap();
        let status = resp.status();
        (status, resp.json().await.unwrap_or(Value::Null))
    }

    async fn create(&self, body: Value) -> String {
        let (status, v) = self
            .call("POST", "/v1/interactions", &self.worker, Some(body))
            .await;
        assert_eq!(status, StatusCode::CREATED, "{v}");
        v["id"].as_str().unwrap().to_owned()
    }

    async fn respond(&self, id: &str, answer: Value) {
        let (status, v) = self
            .call(
                "POST",
                &format!("/v1/interactions/{id}/respond"),
                &self.approver,
                Some(answer),
            )
            .await;
        assert_eq!(status, StatusCode::OK, "{v}");
    }
}

fn tool(session: &str) -> Value {
    json!({
        "session_id": session,
        "kind": {"type": "tool_approval", "tool_name": "shell", "args_json": "{\"cmd\":\"ls\"}"}
    })
}

fn text(session: &str) -> Value {
    json!({"session_id": session, "kind": {"type": "free_text", "prompt": "?"}})
}

/// The server's log lines, each parsed as JSON (every line must be).
fn json_lines(log: &str) -> Vec<Value> {
    log.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not a JSON line ({e}): {l:?}")))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_logs_have_one_line_per_request_with_its_fields_and_no_secret() {
    let scratch = Scratch::new("obs-logs");
    let run = Run::start(&scratch, &["--log-format", "json"]).await;
    // The client's request id is kept and returned.
    let resp = run
        .http
        .post(format!("{}/v1/interactions", run.server.url()))
        .bearer_auth(&run.worker)
        .header("x-request-id", "agent-req-42")
        .json(&text("s-log"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::CREATED);
    assert_eq!(resp.headers()["x-request-id"], "agent-req-42");
    let id = resp.json::<Value>().await.unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    // One it cannot keep (a space, too long) is replaced by lev's own.
    let resp = run
        .http
        .get(format!("{}/v1/interactions/{id}", run.server.url()))
        .bearer_auth(&run.approver)
        .header("x-request-id", "has space")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    let given = resp.headers()["x-request-id"].to_str().unwrap().to_owned();
    assert!(given.starts_with("rq_"), "{given}");
    run.respond(&id, json!({"request_id": id, "value": "yes"}))
        .await;
    // Unauthenticated: no token name.
    let (status, _) = run.call("GET", "/v1/interactions", "wrong", None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);

    // The request line is written once the response is; wait for the last.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let lines = loop {
        let lines = json_lines(&run.server.log());
        let requests = lines
            .iter()
            .filter(|l| l["target"] == "lev_server::request")
            .count();
        if requests >= 6 || std::time::Instant::now() > deadline {
            break lines;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    };
    let log = run.server.log();
    for secret in [&run.admin, &run.worker, &run.approver] {
        assert!(!log.contains(secret.as_str()), "a token in the log:\n{log}");
    }
    for line in &lines {
        for field in ["timestamp", "level", "target", "message"] {
            assert!(line.get(field).is_some(), "no {field} in {line}");
        }
    }
    assert!(
        lines.iter().any(|l| l["message"]
            .as_str()
            .unwrap()
            .starts_with("listening on http://")),
        "{log}"
    );
    let requests: Vec<&Value> = lines
        .iter()
        .filter(|l| l["target"] == "lev_server::request")
        .collect();
    // Two tokens made, create, get, respond, the 401: one line each.
    assert_eq!(requests.len(), 6, "{log}");
    for r in &requests {
        assert_eq!(r["level"], "INFO");
        assert!(r["duration_ms"].as_f64().unwrap() >= 0.0, "{r}");
        assert!(!r["request_id"].as_str().unwrap().is_empty(), "{r}");
    }
    let tokens = &requests[0];
    assert_eq!(tokens["method"], "POST");
    assert_eq!(tokens["route"], "/v1/tokens");
    assert_eq!(tokens["status"], 201);
    assert_eq!(tokens["token"], "admin");
    let create = &requests[2];
    assert_eq!(create["route"], "/v1/interactions");
    assert_eq!(create["status"], 201);
    assert_eq!(create["token"], "w-obs");
    assert_eq!(create["request_id"], "agent-req-42");
    assert_eq!(create["interaction_id"], id.as_str());
    let get = &requests[3];
    assert_eq!(get["method"], "GET");
    assert_eq!(get["route"], "/v1/interactions/{id}");
    assert_eq!(get["token"], "a-obs");
    assert_eq!(get["interaction_id"], id.as_str());
    assert_eq!(get["request_id"], given.as_str());
    let respond = &requests[4];
    assert_eq!(respond["route"], "/v1/interactions/{id}/respond");
    assert_eq!(respond["status"], 200);
    assert_eq!(respond["interaction_id"], id.as_str());
    let refused = &requests[5];
    assert_eq!(refused["status"], 401);
    assert!(refused.get("token").is_none(), "{refused}");
    assert!(refused.get("interaction_id").is_none(), "{refused}");
}

#[test]
fn a_bad_log_flag_is_named() {
    let scratch = Scratch::new("obs-flags");
    let dir = scratch.path("data").to_str().unwrap().to_owned();
    for (args, says) in [
        (
            vec!["--log-format", "xml"],
            "--log-format: expected text or json",
        ),
        (vec!["--log", "lev_server=loud"], "--log: "),
    ] {
        let mut all = vec!["serve", "--listen", "127.0.0.1:0", "--data-dir", &dir];
        all.extend(args);
        let run = crate::support::lev(&all);
        assert_eq!(run.code, 1, "{run:?}");
        assert!(run.stderr.contains(says), "{run:?}");
    }
}

/// The samples of `/metrics` as prometheus_client parses them.
fn parse_metrics(text: &str) -> Value {
    let mut child = Command::new(python())
        .arg(repo_root().join("crates/lev-cli/tests/python/metrics_parse.py"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "prometheus_client refused the exposition: {}\nhint: {SETUP}\n{text}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The value of the one sample named `name` whose labels include `labels`.
fn sample(parsed: &Value, name: &str, labels: &[(&str, &str)]) -> f64 {
    let found: Vec<f64> = parsed["samples"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s[0] == name && labels.iter().all(|(k, v)| s[1][k].as_str() == Some(v)))
        .map(|s| s[2].as_f64().unwrap())
        .collect();
    assert_eq!(found.len(), 1, "{name} {labels:?}: {found:?}");
    found[0]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_parse_as_openmetrics_and_count_what_happened() {
    let scratch = Scratch::new("obs-metrics");
    let run = Run::start(&scratch, &["--metrics-listen", "127.0.0.1:0"]).await;
    let approved = run.create(tool("s-a")).await;
    let denied = run.create(tool("s-a")).await;
    run.create(tool("s-a")).await;
    let answered = run.create(text("s-b")).await;
    let cancelled = run.create(text("s-b")).await;
    run.create(text("s-b")).await;
    run.create(text("s-c")).await;
    run.respond(
        &approved,
        json!({"request_id": approved, "approved": true, "scope": "once"}),
    )
    .await;
    run.respond(&denied, json!({"request_id": denied, "approved": false}))
        .await;
    run.respond(&answered, json!({"request_id": answered, "value": "v"}))
        .await;
    let (status, _) = run
        .call(
            "POST",
            &format!("/v1/interactions/{cancelled}/cancel"),
            &run.worker,
            Some(json!({})),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    let (status, _) = run
        .call("GET", "/v1/interactions/ir_none", &run.worker, None)
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (_, health) = run.call("GET", "/v1/health", "", None).await;
    let replica = health["replica_id"].as_str().unwrap().to_owned();

    // --metrics-listen: no token; its address is in the log.
    let log = run.server.log();
    let metrics_url = log
        .lines()
        .find_map(|l| l.strip_prefix("lev: metrics: "))
        .unwrap_or_else(|| panic!("no metrics line in\n{log}"))
        .to_owned();
    let resp = run.http.get(&metrics_url).send().await.unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    assert!(
        resp.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("application/openmetrics-text"),
    );
    let text = resp.text().await.unwrap();
    // On --listen it takes the admin token.
    let (status, _) = run.call("GET", "/metrics", &run.approver, None).await;
    assert_eq!(status, StatusCode::FORBIDDEN);

    let parsed = parse_metrics(&text);
    let types = &parsed["families"];
    for (family, kind) in [
        ("lev_http_requests", "counter"),
        ("lev_http_request_duration_seconds", "histogram"),
        ("lev_store_operation_duration_seconds", "histogram"),
        ("lev_decisions", "counter"),
        ("lev_decision_duration_seconds", "histogram"),
        ("lev_interactions_pending", "gauge"),
        ("lev_waiters", "gauge"),
        ("lev_operator_connections", "gauge"),
        ("lev_escalations", "counter"),
        ("lev_trace_spans_dropped", "counter"),
    ] {
        assert_eq!(types[family], kind, "{family} in\n{text}");
    }
    // Every sample names this replica.
    for s in parsed["samples"].as_array().unwrap() {
        assert_eq!(s[1]["replica"], replica.as_str(), "{s}");
    }
    let created = [
        ("method", "POST"),
        ("route", "/v1/interactions"),
        ("status", "201"),
    ];
    assert_eq!(sample(&parsed, "lev_http_requests_total", &created), 7.0);
    let missing = [
        ("method", "GET"),
        ("route", "/v1/interactions/{id}"),
        ("status", "404"),
    ];
    assert_eq!(sample(&parsed, "lev_http_requests_total", &missing), 1.0);
    let timed = [("method", "POST"), ("route", "/v1/interactions")];
    assert_eq!(
        sample(&parsed, "lev_http_request_duration_seconds_count", &timed),
        7.0
    );
    assert_eq!(sample(&parsed, "lev_interactions_created_total", &[]), 7.0);
    for (outcome, kind) in [
        ("approved", "tool_approval"),
        ("denied", "tool_approval"),
        ("answered", "free_text"),
        ("cancelled", "free_text"),
    ] {
        assert_eq!(
            sample(
                &parsed,
                "lev_decisions_total",
                &[("outcome", outcome), ("kind", kind)]
            ),
            1.0,
            "{outcome}"
        );
    }
    let decided = |kind| {
        sample(
            &parsed,
            "lev_decision_duration_seconds_count",
            &[("kind", kind), ("rule", "none")],
        )
    };
    assert_eq!(decided("tool_approval"), 2.0);
    assert_eq!(decided("free_text"), 2.0);
    let pending: BTreeMap<(String, String), f64> = parsed["samples"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s[0] == "lev_interactions_pending")
        .map(|s| {
            (
                (
                    s[1]["session"].as_str().unwrap().to_owned(),
                    s[1]["kind"].as_str().unwrap().to_owned(),
                ),
                s[2].as_f64().unwrap(),
            )
        })
        .collect();
    let want: BTreeMap<(String, String), f64> = [
        (("s-a".to_owned(), "tool_approval".to_owned()), 1.0),
        (("s-b".to_owned(), "free_text".to_owned()), 1.0),
        (("s-c".to_owned(), "free_text".to_owned()), 1.0),
    ]
    .into();
    assert_eq!(pending, want);
    assert_eq!(sample(&parsed, "lev_waiters", &[]), 0.0);
    // docs/grafana/lev.json queries only families this exposition has.
    let dashboard: Value = serde_json::from_str(
        &std::fs::read_to_string(repo_root().join("docs/grafana/lev.json")).unwrap(),
    )
    .unwrap();
    let mut queried = 0;
    for panel in dashboard["panels"].as_array().unwrap() {
        for target in panel["targets"].as_array().into_iter().flatten() {
            let expr = target["expr"].as_str().unwrap();
            let mut rest = expr;
            while let Some(at) = rest.find("lev_") {
                let name: String = rest[at..]
                    .chars()
                    .take_while(|c| c.is_ascii_lowercase() || *c == '_')
                    .collect();
                rest = &rest[at + name.len()..];
                let family = ["_total", "_bucket", "_count", "_sum"]
                    .iter()
                    .find_map(|suffix| name.strip_suffix(suffix))
                    .unwrap_or(&name);
                // A family with no series yet has only its metadata.
                assert!(
                    text.contains(&format!("# TYPE {family} ")),
                    "the dashboard queries {name}, not in /metrics: {expr}"
                );
                queried += 1;
            }
        }
    }
    assert!(queried >= 15, "{queried}");
    let store = [("backend", "sqlite"), ("operation", "create_interaction")];
    assert_eq!(
        sample(
            &parsed,
            "lev_store_operation_duration_seconds_count",
            &store
        ),
        7.0
    );
}

/// The Python OTLP and webhook receiver: what it printed, line by line.
struct Receiver {
    child: std::process::Child,
    lines: std::sync::Arc<std::sync::Mutex<Vec<Value>>>,
    port: u16,
}

impl Receiver {
    fn start() -> Self {
        use std::io::BufRead as _;
        let mut child = Command::new(python())
            .arg(repo_root().join("crates/lev-cli/tests/python/otlp_receiver.py"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let mut out = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
        let first: Value = serde_json::from_str(&out.next().unwrap().unwrap())
            .unwrap_or_else(|e| panic!("the receiver did not start ({e})\nhint: {SETUP}"));
        let port = u16::try_from(first["port"].as_u64().unwrap()).unwrap();
        let lines = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let keep = std::sync::Arc::clone(&lines);
        std::thread::spawn(move || {
            for line in out.map_while(Result::ok) {
                keep.lock()
                    .unwrap()
                    .push(serde_json::from_str(&line).unwrap());
            }
        });
        Self { child, lines, port }
    }

    fn spans(&self) -> Vec<Value> {
        self.lines
            .lock()
            .unwrap()
            .iter()
            .filter_map(|l| l.get("span").cloned())
            .collect()
    }

    fn webhooks(&self) -> Vec<Value> {
        self.lines
            .lock()
            .unwrap()
            .iter()
            .filter_map(|l| l.get("webhook").cloned())
            .collect()
    }

    fn stop(&mut self) {
        drop(self.child.stdin.take());
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Poll `check` until it holds, for at most 15 s.
async fn eventually(what: &str, log: impl Fn() -> String, mut check: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(15);
    while !check() {
        assert!(
            std::time::Instant::now() < deadline,
            "never: {what}\n{}",
            log()
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

const AGENT_TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const AGENT_SPAN: &str = "00f067aa0ba902b7";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interaction_is_one_trace_joined_to_the_agents_and_passed_to_webhooks() {
    let mut receiver = Receiver::start();
    let scratch = Scratch::new("obs-traces");
    let endpoint = format!("http://127.0.0.1:{}", receiver.port);
    let server = Spawned::builder(env!("CARGO_BIN_EXE_lev"), scratch.path("data"))
        .args(["--otlp-endpoint", endpoint.as_str()])
        .args(["--webhook-allow", "127.0.0.1/32"])
        .env("OTEL_EXPORTER_OTLP_HEADERS", "x-otlp-key=k%201")
        .start()
        .unwrap();
    let admin = server.admin_token().unwrap();
    let mut run = Run {
        server,
        http: http_client(),
        admin,
        worker: String::new(),
        approver: String::new(),
    };
    run.worker = run.token("w-trace", "worker").await;
    run.approver = run.token("a-trace", "approver").await;
    let (status, v) = run
        .call(
            "POST",
            "/v1/webhooks",
            &run.admin,
            Some(json!({"url": format!("{endpoint}/hook"), "events": ["interaction.created"]})),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{v}");

    // The agent's request carries its span.
    let resp = run
        .http
        .post(format!("{}/v1/interactions", run.server.url()))
        .bearer_auth(&run.worker)
        .header("traceparent", format!("00-{AGENT_TRACE}-{AGENT_SPAN}-01"))
        .json(&tool("s-trace"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::CREATED);
    let id = resp.json::<Value>().await.unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let waiting = tokio::spawn({
        let http = run.http.clone();
        let url = format!(
            "{}/v1/interactions/{id}/wait?timeout_s=30",
            run.server.url()
        );
        let worker = run.worker.clone();
        async move {
            let r = http.get(url).bearer_auth(worker).send().await.unwrap();
            r.json::<Value>().await.unwrap()
        }
    });
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    run.respond(
        &id,
        json!({"request_id": id, "approved": true, "scope": "once"}),
    )
    .await;
    assert_eq!(waiting.await.unwrap()["status"], "answered");

    let names = [
        "interaction.create",
        "interaction.notify",
        "interaction.vote",
        "interaction.decision",
        "interaction.wait",
    ];
    eventually(
        "every span of the interaction exported",
        || format!("{:?}\n{}", receiver.lines.lock().unwrap(), run.server.log()),
        || {
            let spans = receiver.spans();
            names.iter().all(|n| {
                spans.iter().any(|s| {
                    s["name"] == *n && s["attributes"]["lev.interaction.id"] == id.as_str()
                })
            })
        },
    )
    .await;
    let spans: Vec<Value> = receiver
        .spans()
        .into_iter()
        .filter(|s| s["attributes"]["lev.interaction.id"] == id.as_str())
        .collect();
    let create = spans
        .iter()
        .find(|s| s["name"] == "interaction.create")
        .unwrap();
    // One trace, the agent's; lev's create span is a child of the agent's.
    for s in &spans {
        assert_eq!(s["trace_id"], AGENT_TRACE, "{s}");
        assert_eq!(s["service"], "lev", "{s}");
        assert_eq!(s["auth"], "k 1", "OTEL_EXPORTER_OTLP_HEADERS: {s}");
        assert!(s["end"].as_u64() >= s["start"].as_u64(), "{s}");
        if s["name"] != "interaction.create" {
            assert_eq!(s["parent_span_id"], create["span_id"], "{s}");
        }
    }
    assert_eq!(create["parent_span_id"], AGENT_SPAN);
    assert_eq!(create["kind"], 2, "SERVER");
    assert_eq!(create["attributes"]["lev.session.id"], "s-trace");
    assert_eq!(
        create["attributes"]["lev.interaction.kind"],
        "tool_approval"
    );
    let decision = spans
        .iter()
        .find(|s| s["name"] == "interaction.decision")
        .unwrap();
    assert_eq!(decision["attributes"]["lev.outcome"], "approved");
    assert_eq!(decision["attributes"]["lev.answered_by"], "a-trace");
    let vote = spans
        .iter()
        .find(|s| s["name"] == "interaction.vote")
        .unwrap();
    assert_eq!(vote["attributes"]["lev.voter"], "a-trace");

    // The webhook got the traceparent of its delivery's span: the agent's
    // trace, and a notify span the collector has.
    let hooks = receiver.webhooks();
    assert_eq!(hooks.len(), 1, "{hooks:?}");
    let tp = hooks[0]["traceparent"].as_str().unwrap();
    let parts: Vec<&str> = tp.split('-').collect();
    assert_eq!(parts[0], "00");
    assert_eq!(parts[1], AGENT_TRACE, "{tp}");
    let notify = spans
        .iter()
        .find(|s| s["name"] == "interaction.notify")
        .unwrap();
    assert_eq!(notify["span_id"], parts[2], "{tp}");
    assert_eq!(notify["kind"], 3, "CLIENT");
    assert_eq!(notify["attributes"]["lev.channel"], "webhook");

    // Without a traceparent: lev's own trace, the create span its root.
    let other = run.create(text("s-trace")).await;
    eventually(
        "the second interaction's create span",
        || run.server.log(),
        || {
            receiver
                .spans()
                .iter()
                .any(|s| s["attributes"]["lev.interaction.id"] == other.as_str())
        },
    )
    .await;
    let root = receiver
        .spans()
        .into_iter()
        .find(|s| {
            s["attributes"]["lev.interaction.id"] == other.as_str()
                && s["name"] == "interaction.create"
        })
        .unwrap();
    assert_eq!(root["parent_span_id"], "");
    assert_ne!(root["trace_id"], AGENT_TRACE);
    assert_eq!(root["trace_id"].as_str().unwrap().len(), 32);

    // A gate call that asks joins the agent's trace the same way; its
    // repeat opens nothing and starts no second trace.
    let gate = json!({
        "session_id": "s-gate", "conversation_id": "c-1", "turn_id": "t-1",
        "request_id": "call-1", "caller": "alice", "tool_name": "shell",
        "args_json": "{\"argv\":[\"ls\"]}", "sandbox_mode": "read-only",
        "required_capabilities": ["proc-exec"],
    });
    const GATE_SPAN: &str = "00f067aa0ba902b8";
    let mut asked = Vec::new();
    for _ in 0..2 {
        let resp = run
            .http
            .post(format!("{}/v1/gate", run.server.url()))
            .bearer_auth(&run.worker)
            .header("traceparent", format!("00-{AGENT_TRACE}-{GATE_SPAN}-01"))
            .json(&gate)
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), StatusCode::OK);
        let v = resp.json::<Value>().await.unwrap();
        assert_eq!(v["decision"], "ask", "{v}");
        asked.push(v["interaction_id"].as_str().unwrap().to_owned());
    }
    assert_eq!(asked[0], asked[1], "a repeat answers as the first did");
    let gated = asked[0].clone();
    eventually(
        "the gate's create span",
        || run.server.log(),
        || {
            receiver
                .spans()
                .iter()
                .any(|s| s["attributes"]["lev.interaction.id"] == gated.as_str())
        },
    )
    .await;
    // Time for a second span to arrive, were there one.
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    let creates: Vec<Value> = receiver
        .spans()
        .into_iter()
        .filter(|s| {
            s["attributes"]["lev.interaction.id"] == gated.as_str()
                && s["name"] == "interaction.create"
        })
        .collect();
    assert_eq!(creates.len(), 1, "{creates:?}");
    assert_eq!(creates[0]["trace_id"], AGENT_TRACE);
    assert_eq!(creates[0]["parent_span_id"], GATE_SPAN);
    assert_eq!(creates[0]["attributes"]["lev.session.id"], "s-gate");

    // The collector gone: spans are dropped and counted, requests still
    // answered.
    receiver.stop();
    let started = std::time::Instant::now();
    run.create(text("s-trace")).await;
    assert!(started.elapsed() < std::time::Duration::from_secs(2));
    let mut dropped = 0.0;
    for _ in 0..100 {
        let resp = run
            .http
            .get(format!("{}/metrics", run.server.url()))
            .bearer_auth(&run.admin)
            .send()
            .await
            .unwrap();
        let parsed = parse_metrics(&resp.text().await.unwrap());
        dropped = sample(&parsed, "lev_trace_spans_dropped_total", &[]);
        if dropped > 0.0 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    assert!(dropped >= 1.0, "no dropped span counted");
}
