//! Server-Sent Events: live events, durable ids, `Last-Event-ID` across a
//! restart.

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::support::{TestServer, free_text};

/// One parsed SSE event.
#[derive(Debug)]
struct Ev {
    id: i64,
    kind: String,
    data: Value,
}

struct Stream {
    resp: reqwest::Response,
    buf: String,
}

impl Stream {
    async fn open(s: &TestServer, token: &str, last_event_id: Option<i64>) -> Self {
        let mut rb = s.req(reqwest::Method::GET, "/v1/events", token);
        if let Some(id) = last_event_id {
            rb = rb.header("last-event-id", id.to_string());
        }
        let resp = rb.send().await.unwrap();
        assert_eq!(resp.status(), StatusCode::OK);
        assert!(
            resp.headers()["content-type"]
                .to_str()
                .unwrap()
                .starts_with("text/event-stream")
        );
        Self {
            resp,
            buf: String::new(),
        }
    }

    async fn next(&mut self) -> Ev {
        loop {
            if let Some(pos) = self.buf.find("\n\n") {
                let block: String = self.buf.drain(..pos + 2).collect();
                let (mut id, mut kind, mut data) = (None, String::new(), String::new());
                for line in block.lines() {
                    if let Some(v) = line.strip_prefix("id:") {
                        id = Some(v.trim().parse().unwrap());
                    } else if let Some(v) = line.strip_prefix("event:") {
                        kind = v.trim().to_owned();
                    } else if let Some(v) = line.strip_prefix("data:") {
                        data.push_str(v.trim_start());
                    }
                }
                if let Some(id) = id {
                    return Ev {
                        id,
                        kind,
                        data: serde_json::from_str(&data).unwrap(),
                    };
                }
                continue;
            }
            let chunk = tokio::time::timeout(Duration::from_secs(10), self.resp.chunk())
                .await
                .expect("an event within 10 s")
                .unwrap()
                .expect("the stream stays open");
            self.buf.push_str(&String::from_utf8_lossy(&chunk));
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn live_events_follow_every_change() {
    let s = TestServer::start().await;
    let (worker, approver) = s.worker_and_approver().await;
    s.create(&worker, &free_text("s-1", "before the stream"))
        .await;
    let mut events = Stream::open(&s, &approver, None).await;
    let id = s.create(&worker, &free_text("s-1", "during")).await;
    let created = events.next().await;
    assert_eq!(
        created.kind, "interaction.created",
        "only events after connecting"
    );
    assert_eq!(created.data["request"]["id"], id.as_str());
    s.respond(&approver, &id, &json!({"request_id": id, "value": "v"}))
        .await;
    let answered = events.next().await;
    assert_eq!(answered.kind, "interaction.answered");
    assert_eq!(answered.id, created.id + 1);
    assert_eq!(answered.data["response"]["value"], "v");
    let id2 = s.create(&worker, &free_text("s-1", "to cancel")).await;
    s.post(
        &format!("/v1/interactions/{id2}/cancel"),
        &worker,
        &json!({}),
    )
    .await;
    assert_eq!(events.next().await.kind, "interaction.created");
    let cancelled = events.next().await;
    assert_eq!(cancelled.kind, "interaction.cancelled");
    assert_eq!(cancelled.data["request"]["status"], "cancelled");
    let mut timed = free_text("s-1", "to expire");
    timed["timeout_s"] = json!(1);
    timed["on_timeout"] = json!("deny");
    s.create(&worker, &timed).await;
    assert_eq!(events.next().await.kind, "interaction.created");
    assert_eq!(events.next().await.kind, "interaction.expired");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn last_event_id_resumes_across_a_restart() {
    let s = TestServer::start().await;
    let (worker, approver) = s.worker_and_approver().await;
    let mut ids = Vec::new();
    for i in 0..3 {
        ids.push(s.create(&worker, &free_text("s-1", &format!("q{i}"))).await);
    }
    let mut events = Stream::open(&s, &approver, Some(0)).await;
    let mut seen = Vec::new();
    for _ in 0..3 {
        seen.push(events.next().await);
    }
    assert_eq!(
        seen.iter()
            .map(|e| e.data["request"]["id"].as_str().unwrap())
            .collect::<Vec<_>>(),
        ids
    );
    let resume_after = seen[1].id;
    drop(events);

    let dir = s.stop().await;
    let s = TestServer::start_in(dir, lev_server::Settings::default()).await;
    let later = s
        .create(&worker, &free_text("s-1", "after the restart"))
        .await;
    let mut events = Stream::open(&s, &approver, Some(resume_after)).await;
    let third = events.next().await;
    assert_eq!(third.id, seen[2].id, "the same durable id after a restart");
    assert_eq!(third.data["request"]["id"], ids[2].as_str());
    let fourth = events.next().await;
    assert!(fourth.id > third.id);
    assert_eq!(fourth.data["request"]["id"], later.as_str());
    // ...and keeps following live.
    s.respond(
        &approver,
        &later,
        &json!({"request_id": later, "value": "v"}),
    )
    .await;
    let live = events.next().await;
    assert_eq!(live.kind, "interaction.answered");
    assert_eq!(live.id, fourth.id + 1);

    let resp = s
        .req(reqwest::Method::GET, "/v1/events", &approver)
        .header("last-event-id", "yesterday")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::UNPROCESSABLE_ENTITY);
}

/// A client that opens the event stream and never reads it is dropped once
/// a write waits past the write timeout (the stream used to stay open,
/// holding its queue of events and, through the broadcast, the last
/// 4,096 events of every kind).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_never_reads_its_stream_is_dropped() {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

    let s = TestServer::start_with(lev_server::Settings {
        connections: lev_server::ConnectionSettings {
            write_timeout: Duration::from_secs(1),
            ..lev_server::ConnectionSettings::default()
        },
        ..lev_server::Settings::default()
    })
    .await;
    let (worker, approver) = s.worker_and_approver().await;
    let addr: std::net::SocketAddr = s.url.trim_start_matches("http://").parse().unwrap();
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    let mut stream = socket.connect(addr).await.unwrap();
    stream
        .write_all(
            format!(
                "GET /v1/events HTTP/1.1\r\nhost: lev\r\nauthorization: Bearer {approver}\r\n\r\n"
            )
            .as_bytes(),
        )
        .await
        .unwrap();
    // Far more than the socket buffers hold.
    let prompt = "p".repeat(60 * 1024);
    for n in 0..300 {
        s.create(&worker, &free_text(&format!("s-{}", n % 4), &prompt))
            .await;
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    let mut read = 0usize;
    let ended = tokio::time::timeout(Duration::from_secs(20), async {
        let mut buf = vec![0u8; 1 << 16];
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => read += n,
            }
        }
    })
    .await;
    assert!(
        ended.is_ok(),
        "the stream of a client that did not read stayed open ({read} bytes read)"
    );
    assert!(read < 300 * 60 * 1024, "{read} bytes: it got every event");
}
