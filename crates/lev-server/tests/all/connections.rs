//! Connections nobody finishes (issue 28, item 2): bounded local floods of
//! half-sent requests against small caps and timeouts. `/v1/health` still
//! answers, a half-sent head is closed after the header timeout, an idle
//! keep-alive after the idle timeout, a trickled body gets 408, and a
//! long-poll in flight is never cut by any of them.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};

use lev_server::{ConnectionSettings, Settings};
use reqwest::StatusCode;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpSocket, TcpStream};

use crate::support::{TestServer, free_text};

fn settings(connections: ConnectionSettings) -> Settings {
    Settings {
        connections,
        ..Settings::default()
    }
}

fn addr_of(s: &TestServer) -> SocketAddr {
    s.url.trim_start_matches("http://").parse().unwrap()
}

/// A connection from `127.0.0.N` (Linux routes all of 127/8 to loopback).
async fn connect_from(server: SocketAddr, n: u8) -> std::io::Result<TcpStream> {
    let socket = TcpSocket::new_v4()?;
    socket.bind(SocketAddr::new(IpAddr::V4(Ipv4Addr::new(127, 0, 0, n)), 0))?;
    socket.connect(server).await
}

/// A request head cut short: no blank line ever comes.
const HALF: &[u8] = b"GET /v1/health HTTP/1.1\r\nhost: lev\r\nx-slow: ";

/// `GET /v1/health` on a new connection from 127.0.0.N: the status line.
async fn health_from(server: SocketAddr, n: u8) -> String {
    let mut stream = connect_from(server, n).await.unwrap();
    stream
        .write_all(b"GET /v1/health HTTP/1.1\r\nhost: lev\r\nconnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut response = String::new();
    tokio::time::timeout(Duration::from_secs(5), stream.read_to_string(&mut response))
        .await
        .expect("/v1/health answered within 5 s")
        .unwrap();
    response.lines().next().unwrap_or_default().to_owned()
}

/// Whether the server closed `stream` (EOF or reset) within `within`;
/// whatever it wrote first is returned too.
async fn closed_within(stream: &mut TcpStream, within: Duration) -> (bool, String) {
    let mut seen = Vec::new();
    let deadline = tokio::time::Instant::now() + within;
    loop {
        let mut buf = [0u8; 4096];
        match tokio::time::timeout_at(deadline, stream.read(&mut buf)).await {
            Err(_) => return (false, String::from_utf8_lossy(&seen).into_owned()),
            Ok(Ok(0) | Err(_)) => return (true, String::from_utf8_lossy(&seen).into_owned()),
            Ok(Ok(n)) => seen.extend_from_slice(&buf[..n]),
        }
    }
}

/// A few hundred half-sent requests from one address: it never holds more
/// than its cap (each new one replaces its oldest unfinished one), the
/// server keeps answering `/v1/health` from that address and from another,
/// and the half-sent ones left are closed once the header timeout passes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_from_one_address_hits_its_cap_and_health_still_answers() {
    let s = TestServer::start_with(settings(ConnectionSettings {
        max_connections: 1_000,
        max_per_address: 50,
        header_timeout: Duration::from_secs(2),
        ..ConnectionSettings::default()
    }))
    .await;
    let server = addr_of(&s);
    let mut held = Vec::new();
    for _ in 0..300 {
        let mut stream = connect_from(server, 1).await.unwrap();
        // One closed to make room may already be gone: a failed write is fine.
        let _ = stream.write_all(HALF).await;
        held.push(stream);
    }
    let started = Instant::now();
    assert_eq!(health_from(server, 2).await, "HTTP/1.1 200 OK");
    assert_eq!(health_from(server, 1).await, "HTTP/1.1 200 OK");
    let mut open = 0;
    for stream in &mut held {
        let (closed, said) = closed_within(stream, Duration::from_millis(20)).await;
        assert!(said.is_empty(), "a half-sent request was answered: {said}");
        if !closed {
            open += 1;
        }
    }
    assert!(
        (40..=50).contains(&open),
        "{open} half-sent requests from one address held open (cap 50)"
    );
    // The rest close as the header timeout passes.
    for stream in &mut held {
        let (closed, said) = closed_within(stream, Duration::from_secs(5)).await;
        assert!(closed, "a half-sent request was still open");
        assert!(said.is_empty(), "{said}");
    }
    let elapsed = started.elapsed();
    assert!(
        elapsed >= Duration::from_millis(1500),
        "closed after {elapsed:?}"
    );
    assert_eq!(health_from(server, 1).await, "HTTP/1.1 200 OK");
}

/// When every connection of an address is serving a request (long-polls),
/// one more from it is answered 503 `too_many_connections` and closed;
/// another address is served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_address_whose_connections_are_all_busy_gets_503() {
    let s = TestServer::start_with(settings(ConnectionSettings {
        max_per_address: 3,
        ..ConnectionSettings::default()
    }))
    .await;
    let server = addr_of(&s);
    let (worker, _) = s.worker_and_approver().await;
    let id = s.create(&worker, &free_text("s-busy", "wait")).await;
    let mut polls = Vec::new();
    for _ in 0..3 {
        let mut stream = connect_from(server, 7).await.unwrap();
        let request = format!(
            "GET /v1/interactions/{id}/wait?timeout_s=20 HTTP/1.1\r\nhost: lev\r\n\
             authorization: Bearer {worker}\r\n\r\n"
        );
        stream.write_all(request.as_bytes()).await.unwrap();
        polls.push(stream);
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut stream = connect_from(server, 7).await.unwrap();
    let _ = stream
        .write_all(b"GET /v1/health HTTP/1.1\r\nhost: lev\r\n\r\n")
        .await;
    let (closed, said) = closed_within(&mut stream, Duration::from_secs(5)).await;
    assert!(closed, "{said}");
    assert!(said.starts_with("HTTP/1.1 503"), "{said}");
    assert!(said.contains("\"too_many_connections\""), "{said}");
    assert_eq!(health_from(server, 8).await, "HTTP/1.1 200 OK");
    // The long-polls are still waiting.
    for poll in &mut polls {
        assert!(!closed_within(poll, Duration::from_millis(20)).await.0);
    }
}

/// At the global cap (many addresses), a new connection replaces the one
/// idle longest: health answers, and a long-poll in flight is left alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_the_global_cap_the_idle_longest_makes_room_and_long_polls_stay() {
    let s = TestServer::start_with(settings(ConnectionSettings {
        max_connections: 40,
        max_per_address: 10,
        header_timeout: Duration::from_secs(30),
        ..ConnectionSettings::default()
    }))
    .await;
    let server = addr_of(&s);
    let (worker, approver) = s.worker_and_approver().await;
    let id = s.create(&worker, &free_text("s-cap", "still there?")).await;
    let waiting = {
        let (http, url, worker) = (
            s.http.clone(),
            s.path(&format!("/v1/interactions/{id}/wait?timeout_s=30")),
            worker.clone(),
        );
        tokio::spawn(async move {
            let resp = http.get(url).bearer_auth(worker).send().await.unwrap();
            let status = resp.status();
            (status, resp.json::<Value>().await.unwrap())
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    // Ten addresses, ten half-sent requests each: more than the cap.
    let mut held = Vec::new();
    for n in 10..20u8 {
        for _ in 0..10 {
            let mut stream = connect_from(server, n).await.unwrap();
            let _ = stream.write_all(HALF).await;
            held.push(stream);
        }
    }
    for n in 30..35u8 {
        assert_eq!(health_from(server, n).await, "HTTP/1.1 200 OK");
    }
    let mut closed = 0;
    for stream in &mut held {
        if closed_within(stream, Duration::from_millis(20)).await.0 {
            closed += 1;
        }
    }
    assert!(closed >= 60, "only {closed} of 100 made room");
    // The long-poll was never cut: it gets its answer.
    let (status, v) = s
        .respond(&approver, &id, &json!({"request_id": id, "value": "yes"}))
        .await;
    assert_eq!(status, StatusCode::OK, "{v}");
    let (status, v) = waiting.await.unwrap();
    assert_eq!(status, StatusCode::OK, "{v}");
    assert_eq!(v["response"]["value"], "yes", "{v}");
}

/// The header timeout closes a half-sent head; the idle timeout a
/// kept-alive connection between requests; neither cuts a long-poll that
/// waits longer than both for its answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timeouts_close_unfinished_and_idle_connections_but_not_long_polls() {
    let s = TestServer::start_with(settings(ConnectionSettings {
        header_timeout: Duration::from_millis(500),
        idle_timeout: Duration::from_millis(800),
        ..ConnectionSettings::default()
    }))
    .await;
    let server = addr_of(&s);
    // A head that never ends.
    let mut half = connect_from(server, 1).await.unwrap();
    half.write_all(HALF).await.unwrap();
    let started = Instant::now();
    let (closed, said) = closed_within(&mut half, Duration::from_secs(5)).await;
    assert!(closed && said.is_empty(), "{said}");
    let took = started.elapsed();
    assert!(
        took >= Duration::from_millis(400) && took < Duration::from_secs(3),
        "{took:?}"
    );
    // A head sent a byte at a time, slower than the timeout in all.
    let mut slow = connect_from(server, 1).await.unwrap();
    let started = Instant::now();
    let mut cut = false;
    for byte in b"GET /v1/health HTTP/1.1\r\nhost: lev\r\n\r\n" {
        if slow.write_all(&[*byte]).await.is_err() {
            cut = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    if !cut {
        let (closed, said) = closed_within(&mut slow, Duration::from_secs(3)).await;
        assert!(closed && !said.contains("200"), "{said}");
    }
    assert!(started.elapsed() < Duration::from_secs(5));
    // Kept alive after a request: closed once idle past the idle timeout,
    // not at the header timeout.
    let mut kept = connect_from(server, 1).await.unwrap();
    kept.write_all(b"GET /v1/health HTTP/1.1\r\nhost: lev\r\n\r\n")
        .await
        .unwrap();
    let mut buf = [0u8; 4096];
    let n = kept.read(&mut buf).await.unwrap();
    assert!(buf[..n].starts_with(b"HTTP/1.1 200"));
    let started = Instant::now();
    let (closed, _) = closed_within(&mut kept, Duration::from_secs(5)).await;
    assert!(closed);
    let took = started.elapsed();
    assert!(
        took >= Duration::from_millis(700) && took < Duration::from_secs(3),
        "{took:?}"
    );
    // A long-poll of 2 s, longer than both timeouts, gets its answer.
    let (worker, _) = s.worker_and_approver().await;
    let id = s.create(&worker, &free_text("s-long", "anyone?")).await;
    let started = Instant::now();
    let (status, v) = s
        .get(&format!("/v1/interactions/{id}/wait?timeout_s=2"), &worker)
        .await;
    assert!(started.elapsed() >= Duration::from_millis(1900));
    assert_ne!(status, StatusCode::INTERNAL_SERVER_ERROR, "{v}");
    assert!(
        status == StatusCode::OK || status == StatusCode::GATEWAY_TIMEOUT,
        "{status} {v}"
    );
}

/// A body that trickles past the body timeout gets 408 `request_timeout`
/// and the connection closes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trickled_body_gets_408_and_the_connection_closes() {
    let s = TestServer::start_with(settings(ConnectionSettings {
        body_timeout: Duration::from_millis(600),
        ..ConnectionSettings::default()
    }))
    .await;
    let server = addr_of(&s);
    let (worker, _) = s.worker_and_approver().await;
    let mut stream = connect_from(server, 1).await.unwrap();
    let head = format!(
        "POST /v1/interactions HTTP/1.1\r\nhost: lev\r\nauthorization: Bearer {worker}\r\n\
         content-type: application/json\r\ncontent-length: 1000\r\n\r\n{{\"session_id\""
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    let started = Instant::now();
    let mut said = Vec::new();
    let mut closed = false;
    while started.elapsed() < Duration::from_secs(5) {
        // A byte every 100 ms: never idle long, never done.
        let _ = stream.write_all(b" ").await;
        let mut buf = [0u8; 4096];
        match tokio::time::timeout(Duration::from_millis(100), stream.read(&mut buf)).await {
            Ok(Ok(0) | Err(_)) => {
                closed = true;
                break;
            }
            Ok(Ok(n)) => said.extend_from_slice(&buf[..n]),
            Err(_) => {}
        }
    }
    let said = String::from_utf8_lossy(&said);
    assert!(said.starts_with("HTTP/1.1 408"), "{said}");
    assert!(said.contains("request_timeout"), "{said}");
    assert!(closed, "the connection stayed open after the 408");
    assert!(started.elapsed() < Duration::from_secs(3));
}

/// A request head larger than 32 KiB is refused (431) and the connection
/// closed: a peer no longer fills hyper's 400 KiB buffer per connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_huge_request_head_gets_431() {
    let s = TestServer::start().await;
    let server = addr_of(&s);
    let mut stream = connect_from(server, 1).await.unwrap();
    let filler = "a".repeat(1000);
    let mut head = String::from("GET /v1/health HTTP/1.1\r\nhost: lev\r\n");
    for n in 0..40 {
        head.push_str(&format!("x-filler-{n}: {filler}\r\n"));
    }
    head.push_str("\r\n");
    let _ = stream.write_all(head.as_bytes()).await;
    let (closed, said) = closed_within(&mut stream, Duration::from_secs(5)).await;
    assert!(closed, "{said}");
    assert!(said.starts_with("HTTP/1.1 431"), "{said}");
    assert_eq!(health_from(server, 1).await, "HTTP/1.1 200 OK");
}

/// The request counter is keyed by method: a client inventing methods
/// does not add counters (they were kept for the process's life).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn made_up_methods_do_not_grow_the_request_counters() {
    let s = TestServer::start().await;
    let server = addr_of(&s);
    for n in 0..50 {
        let mut stream = connect_from(server, 1).await.unwrap();
        let request =
            format!("M{n}XYZ /v1/health HTTP/1.1\r\nhost: lev\r\nconnection: close\r\n\r\n");
        stream.write_all(request.as_bytes()).await.unwrap();
        let mut response = String::new();
        let _ = stream.read_to_string(&mut response).await;
    }
    let text = s
        .http
        .get(s.path("/metrics"))
        .bearer_auth(&s.admin)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(!text.contains("M7XYZ"), "{text}");
    let lines = text
        .lines()
        .filter(|l| l.starts_with("lev_http_requests_total{"))
        .count();
    assert!(lines < 10, "{lines} counters:\n{text}");
}
