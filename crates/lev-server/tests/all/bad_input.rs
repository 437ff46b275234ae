//! Bad input gets its documented status and the JSON error body, never a 500.

use std::time::Duration;

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

use crate::support::{TestServer, code, free_text, message, tool_approval};

async fn raw_post(s: &TestServer, path: &str, token: &str, body: &str) -> (StatusCode, Value) {
    let resp = s
        .req(Method::POST, path, token)
        .header("content-type", "application/json")
        .body(body.to_owned())
        .send()
        .await
        .unwrap();
    let status = resp.status();
    (status, resp.json().await.unwrap_or(Value::Null))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_json_is_400_and_a_wrong_shape_is_422_naming_the_field() {
    let s = TestServer::start().await;
    let (worker, _) = s.worker_and_approver().await;
    for body in [
        "{",
        "",
        "not json",
        r#"{"session_id": "s-1",}"#,
        r#"{"a":1} trailing"#,
    ] {
        let (status, v) = raw_post(&s, "/v1/interactions", &worker, body).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body:?} -> {v}");
        assert_eq!(code(&v), "malformed");
    }
    let cases = [
        (
            json!({"session_id": 5, "kind": {"type": "free_text", "prompt": "?"}}),
            "session_id",
        ),
        (
            json!({"kind": {"type": "free_text", "prompt": "?"}}),
            "session_id",
        ),
        (json!({"session_id": "s-1"}), "kind"),
        (
            json!({"session_id": "s-1", "kind": {"type": "telepathy", "prompt": "?"}}),
            "kind",
        ),
        (
            json!({"session_id": "s-1", "kind": {"type": "free_text", "prompt": 5}}),
            "kind.prompt",
        ),
        (
            json!({"session_id": "s-1", "kind": {"type": "multiple_choice", "prompt": "?", "options": "a"}}),
            "kind.options",
        ),
        (
            json!({"session_id": "s-1", "kind": {"type": "tool_approval", "tool_name": "sh", "args_json": "{}", "missing_capabilities": 7}}),
            "kind.missing_capabilities",
        ),
        (
            json!({"session_id": "s-1", "kind": {"type": "free_text"}}),
            "prompt",
        ),
        (
            json!({"session_id": "s-1", "kind": {"type": "free_text", "prompt": "?"}, "timeout_s": "soon"}),
            "timeout_s",
        ),
        (
            json!({"session_id": "s 1", "kind": {"type": "free_text", "prompt": "?"}}),
            "session_id",
        ),
        (
            json!({"session_id": "s-1", "kind": {"type": "multiple_choice", "prompt": "?", "options": []}}),
            "kind.options",
        ),
        (
            json!({"session_id": "s-1", "kind": {"type": "tool_approval", "tool_name": "sh", "args_json": "{\"a\":1,\"a\":2}"}}),
            "kind.args_json",
        ),
        (
            json!({"session_id": "s-1", "kind": {"type": "free_text", "prompt": "?"}, "on_timeout": {"choice": 1}}),
            "on_timeout",
        ),
        (
            json!({"session_id": "s-1", "kind": {"type": "free_text", "prompt": "?"}, "on_timeout": "explode"}),
            "on_timeout",
        ),
    ];
    for (body, field) in cases {
        let (status, v) = s.post("/v1/interactions", &worker, &body).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body} -> {v}");
        assert_eq!(code(&v), "invalid");
        assert!(
            message(&v).contains(field),
            "{}: should name {field}",
            message(&v)
        );
    }
    // Unknown fields are ignored (forward compatibility).
    let mut body = free_text("s-1", "?");
    body["future_field"] = json!({"x": 1});
    let (status, _) = s.post("/v1/interactions", &worker, &body).await;
    assert_eq!(status, StatusCode::CREATED);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_size_fields_are_413() {
    let s = TestServer::start().await;
    let (worker, approver) = s.worker_and_approver().await;
    let prompt = "p".repeat(64 * 1024 + 1);
    let (status, v) = s
        .post("/v1/interactions", &worker, &free_text("s-1", &prompt))
        .await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE, "{v}");
    assert!(message(&v).contains("kind.prompt"));
    let args = format!("\"{}\"", "a".repeat(256 * 1024));
    let (status, v) = s
        .post("/v1/interactions", &worker, &tool_approval("s-1", &args))
        .await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE, "{v}");
    assert!(message(&v).contains("kind.args_json"));
    // A body over 1 MiB, sent whole.
    let big = free_text("s-1", &"x".repeat(1024 * 1024));
    let (status, v) = s.post("/v1/interactions", &worker, &big).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE, "{v}");
    assert_eq!(code(&v), "too_large");

    // A part over 10 MiB, inside a respond body under 40 MiB.
    let id = s.create(&worker, &free_text("s-1", "file?")).await;
    let data = lev_approval::encode_base64url(&vec![7u8; 10 * 1024 * 1024 + 1]);
    let (status, v) = s
        .respond(&approver, &id, &json!({"request_id": id, "value": "v",
            "parts": [{"name": "big.bin", "media_type": "application/octet-stream", "data": data}]}))
        .await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE, "{v}");
    assert!(message(&v).contains("parts[0]"));
    // Exactly 10 MiB is fine.
    let data = lev_approval::encode_base64url(&vec![7u8; 10 * 1024 * 1024]);
    let (status, v) = s
        .respond(
            &approver,
            &id,
            &json!({"request_id": id, "value": "v",
            "parts": [{"name": "ok.bin", "media_type": "application/octet-stream", "data": data}]}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{v}");
}

/// Send raw HTTP and read the status line and body within `wait`.
async fn raw_http(s: &TestServer, head: &str, body: &[u8], wait: Duration) -> String {
    let addr = s.url.trim_start_matches("http://");
    let mut conn = tokio::net::TcpStream::connect(addr).await.unwrap();
    conn.write_all(head.as_bytes()).await.unwrap();
    conn.write_all(body).await.unwrap();
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    let _ = tokio::time::timeout(wait, async {
        loop {
            match conn.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    out.extend_from_slice(&buf[..n]);
                    if String::from_utf8_lossy(&out).contains("}}") {
                        break;
                    }
                }
            }
        }
    })
    .await;
    String::from_utf8_lossy(&out).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_over_size_body_is_refused_before_it_is_read() {
    let s = TestServer::start().await;
    let (worker, approver) = s.worker_and_approver().await;
    // Declares 2 GB, sends 20 bytes and keeps the connection open: the 413
    // can only come from the declared length.
    let head = format!(
        "POST /v1/interactions HTTP/1.1\r\nhost: x\r\nauthorization: Bearer {worker}\r\n\
         content-type: application/json\r\ncontent-length: 2000000000\r\n\r\n"
    );
    let reply = raw_http(
        &s,
        &head,
        br#"{"session_id": "s-1""#,
        Duration::from_secs(5),
    )
    .await;
    assert!(reply.starts_with("HTTP/1.1 413"), "{reply}");
    assert!(reply.contains(r#""code":"too_large""#), "{reply}");
    // The respond limit is 40 MiB: 41 MiB declared is refused at once too.
    let head = format!(
        "POST /v1/interactions/ir_x/respond HTTP/1.1\r\nhost: x\r\nauthorization: Bearer {approver}\r\n\
         content-length: {}\r\n\r\n",
        41 * 1024 * 1024
    );
    let reply = raw_http(&s, &head, b"{", Duration::from_secs(5)).await;
    assert!(reply.starts_with("HTTP/1.1 413"), "{reply}");
    // A chunked body is cut off once it passes the limit.
    let head = format!(
        "POST /v1/interactions HTTP/1.1\r\nhost: x\r\nauthorization: Bearer {worker}\r\n\
         transfer-encoding: chunked\r\n\r\n"
    );
    let chunk = vec![b' '; 64 * 1024];
    let mut body = Vec::new();
    for _ in 0..17 {
        body.extend_from_slice(format!("{:x}\r\n", chunk.len()).as_bytes());
        body.extend_from_slice(&chunk);
        body.extend_from_slice(b"\r\n");
    }
    // No final chunk: the server must answer without the end of the body.
    let reply = raw_http(&s, &head, &body, Duration::from_secs(5)).await;
    assert!(reply.starts_with("HTTP/1.1 413"), "{reply}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_routes_and_methods_answer_json() {
    let s = TestServer::start().await;
    let (status, v) = s.get("/v1/nothing-here", &s.admin).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(code(&v), "not_found");
    let (status, v) = s
        .call(Method::DELETE, "/v1/interactions", &s.admin, None)
        .await;
    assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED);
    assert!(v["error"]["message"].is_string());
    // A path parameter that is not UTF-8 is malformed, in the JSON body too.
    let (status, v) = s.get("/v1/interactions/%FF%FE", &s.admin).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{v}");
    assert_eq!(code(&v), "malformed");
}

/// A create body whose `kind` holds `n` extra keys and a field of the wrong
/// type that sorts after them all: the shape that once made error narrowing
/// re-read the whole body once per key.
fn wide_kind_body(n: usize) -> String {
    let mut kind = String::from(r#"{"type":"tool_approval","tool_name":7,"args_json":"{}""#);
    for i in 0..n {
        kind.push_str(&format!(r#","k{i:06}":0"#));
    }
    kind.push('}');
    format!(r#"{{"session_id":"s-1","kind":{kind}}}"#)
}

/// The least time of a few posts of `body`, and its answer.
async fn fastest(s: &TestServer, token: &str, body: &str) -> (Duration, StatusCode) {
    let mut best = Duration::MAX;
    let mut status = StatusCode::OK;
    for _ in 0..3 {
        let started = std::time::Instant::now();
        let (st, v) = raw_post(s, "/v1/interactions", token, body).await;
        best = best.min(started.elapsed());
        assert_eq!(code(&v), "invalid", "{v}");
        status = st;
    }
    (best, status)
}

/// Parsing and validation are linear in the body's size: eight times the
/// keys costs about eight times the time, not sixty-four (the quadratic
/// narrowing took 10+ s on 16,000 keys). A ratio, not a timer, so a slow
/// machine does not fail it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wide_hostile_body_costs_time_linear_in_its_size() {
    let s = TestServer::start().await;
    let (worker, _) = s.worker_and_approver().await;
    let small = wide_kind_body(8_000);
    let large = wide_kind_body(64_000);
    assert!(large.len() < 1024 * 1024, "{}", large.len());
    // Warm up (connection, allocator).
    let _ = fastest(&s, &worker, &small).await;
    let (t_small, st) = fastest(&s, &worker, &small).await;
    assert_eq!(st, StatusCode::UNPROCESSABLE_ENTITY);
    // The quadratic path took minutes here: bound the wait, fail clearly.
    let (t_large, st) = tokio::time::timeout(Duration::from_secs(60), fastest(&s, &worker, &large))
        .await
        .expect("64,000 keys parsed in under a minute: a superlinear path otherwise");
    assert_eq!(st, StatusCode::UNPROCESSABLE_ENTITY);
    let ratio = t_large.as_secs_f64() / t_small.as_secs_f64().max(1e-4);
    assert!(
        ratio < 24.0,
        "8x the keys took {ratio:.1}x the time ({t_small:?} -> {t_large:?}): a superlinear path"
    );
    // A small body still names the field inside `kind`.
    let (status, v) = raw_post(&s, "/v1/interactions", &worker, &wide_kind_body(2)).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(message(&v).contains("kind.tool_name"), "{v}");
    // And the server answers others meanwhile.
    let (status, _) = s.get("/v1/health", "").await;
    assert_eq!(status, StatusCode::OK);
}

/// JSON nested deeper than 64 levels is 400, on every route, before any
/// parser recurses into it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nesting_past_64_levels_is_400() {
    let s = TestServer::start().await;
    let (worker, _) = s.worker_and_approver().await;
    let deep = format!(
        r#"{{"session_id":"s-1","kind":{{"type":"free_text","prompt":"?"}},"metadata":{}1{}}}"#,
        "[".repeat(70),
        "]".repeat(70)
    );
    let (status, v) = raw_post(&s, "/v1/interactions", &worker, &deep).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{v}");
    assert!(message(&v).contains("64 levels"), "{v}");
    // Brackets inside strings do not count.
    let in_string = format!(
        r#"{{"session_id":"s-1","kind":{{"type":"free_text","prompt":"{}"}}}}"#,
        "[".repeat(100)
    );
    let (status, v) = raw_post(&s, "/v1/interactions", &worker, &in_string).await;
    assert_eq!(status, StatusCode::CREATED, "{v}");
}

/// SPEC section 9: an answer's text fields are at most 64 KiB each, a
/// respond body without parts at most 1 MiB, and `GET /v1/audit` pages.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answers_are_capped_and_the_audit_log_pages() {
    let s = TestServer::start().await;
    let (worker, approver) = s.worker_and_approver().await;
    let big = "x".repeat(64 * 1024 + 1);
    let id = s
        .create(&worker, &tool_approval("s-1", r#"{"cmd":"ls"}"#))
        .await;
    for (field, body) in [
        (
            "injected_context",
            json!({"request_id": id, "approved": true, "injected_context": big}),
        ),
        (
            "reason",
            json!({"request_id": id, "approved": true, "reason": big}),
        ),
        (
            "feedback",
            json!({"request_id": id, "approved": false, "feedback": big}),
        ),
    ] {
        let (status, v) = s.respond(&approver, &id, &body).await;
        assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE, "{field}: {v}");
        assert!(message(&v).starts_with(field), "{field}: {v}");
    }
    let text = s.create(&worker, &free_text("s-1", "why?")).await;
    let (status, v) = s
        .respond(&approver, &text, &json!({"request_id": text, "value": big}))
        .await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE, "{v}");
    // Many small fields adding up past 1 MiB, without parts: 413.
    let padded = json!({
        "request_id": text,
        "value": "ok",
        "metadata_that_is_ignored": "y".repeat(1024 * 1024)
    });
    let (status, v) = s.respond(&approver, &text, &padded).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE, "{v}");
    // grant_args: a bounded number of bounded patterns.
    let many: serde_json::Map<String, Value> = (0..17)
        .map(|i| (format!("/argv/{i}"), json!("^x$")))
        .collect();
    let (status, v) = s
        .respond(
            &approver,
            &id,
            &json!({"request_id": id, "approved": true, "scope": "session", "grant_args": many}),
        )
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{v}");
    // Nothing of the refused answers was kept: still pending.
    let (_, v) = s.get(&format!("/v1/interactions/{id}"), &worker).await;
    assert_eq!(v["request"]["status"], "pending");

    // Pages of the audit log, in order, each carrying the head.
    for i in 0..5 {
        s.create(&worker, &free_text("s-2", &format!("q{i}"))).await;
    }
    let (status, first) = s.get("/v1/audit?limit=2", &s.admin).await;
    assert_eq!(status, StatusCode::OK);
    let entries = first["items"].as_array().unwrap();
    assert_eq!(entries.len(), 2);
    let last = entries[1]["seq"].as_u64().unwrap();
    let (_, next) = s
        .get(&format!("/v1/audit?after={last}&limit=2"), &s.admin)
        .await;
    assert_eq!(next["items"][0]["seq"].as_u64(), Some(last + 1));
    assert!(next["head"]["seq"].as_u64().unwrap() >= last + 2);
}
