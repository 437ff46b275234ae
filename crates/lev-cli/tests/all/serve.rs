//! `lev serve` as a process: it prints where it listens and the admin's
//! dashboard URL, keeps every acknowledged write through a SIGKILL, and stops
//! cleanly (exit 0) on SIGTERM.

use std::io::{Read as _, Write as _};
use std::net::TcpStream;
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::spawned::Spawned;
use crate::support::{Scratch, lev};

/// A running `lev serve` (`Spawned`), and its address.
struct Served {
    server: Spawned,
    addr: String,
}

impl Served {
    /// Start `lev serve` on port 0 in `data_dir` and wait for its address.
    fn start(data_dir: &Path) -> Self {
        let server = Spawned::builder(env!("CARGO_BIN_EXE_lev"), data_dir)
            .start()
            .unwrap();
        let addr = server.addr().to_owned();
        Self { server, addr }
    }

    fn stderr(&self) -> String {
        self.server.log()
    }
}

/// One HTTP/1.1 request on its own connection: the status and JSON body, or
/// an error when the server went away before answering in full.
fn http(
    addr: &str,
    method: &str,
    path: &str,
    token: &str,
    body: Option<&Value>,
) -> std::io::Result<(u16, Value)> {
    let mut conn = TcpStream::connect(addr)?;
    conn.set_read_timeout(Some(Duration::from_secs(30)))?;
    let body = body.map(Value::to_string).unwrap_or_default();
    write!(
        conn,
        "{method} {path} HTTP/1.1\r\nhost: {addr}\r\nauthorization: Bearer {token}\r\n\
         content-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )?;
    let mut raw = Vec::new();
    conn.read_to_end(&mut raw)?;
    let text = String::from_utf8_lossy(&raw);
    let broken = || std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "incomplete response");
    let (head, body) = text.split_once("\r\n\r\n").ok_or_else(broken)?;
    let status: u16 = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(broken)?;
    let length = head
        .lines()
        .find_map(|l| {
            l.to_ascii_lowercase()
                .strip_prefix("content-length:")
                .map(|v| v.trim().to_owned())
        })
        .and_then(|v| v.parse::<usize>().ok());
    if length.is_some_and(|n| n != body.len()) {
        return Err(broken());
    }
    Ok((status, serde_json::from_str(body).unwrap_or(Value::Null)))
}

fn token(addr: &str, admin: &str, name: &str, role: &str) -> String {
    let (status, v) = http(
        addr,
        "POST",
        "/v1/tokens",
        admin,
        Some(&json!({"name": name, "role": role})),
    )
    .unwrap();
    assert_eq!(status, 201, "{v}");
    v["token"].as_str().unwrap().to_owned()
}

#[test]
fn serve_prints_its_address_and_stops_cleanly_on_sigterm() {
    let scratch = Scratch::new("serve-term");
    let data = scratch.path("data");
    let mut served = Served::start(&data);
    let admin = std::fs::read_to_string(data.join("admin.token")).unwrap();
    let admin = admin.trim();
    assert!(admin.starts_with("lev_"));
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(data.join("admin.token"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }
    let (status, health) = http(&served.addr, "GET", "/v1/health", "", None).unwrap();
    assert_eq!(status, 200);
    assert_eq!(health["store"], "sqlite");
    // The dashboard URL carries the admin token (printed after the listening line).
    let deadline = Instant::now() + Duration::from_secs(10);
    while !served.stderr().contains("#token=") && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let dashboard = format!("http://{}/#token={admin}", served.addr);
    assert!(served.stderr().contains(&dashboard), "{}", served.stderr());

    let status = served.server.terminate(Duration::from_secs(30)).unwrap();
    assert_eq!(
        status.code(),
        Some(0),
        "graceful exit; stderr:\n{}",
        served.stderr()
    );
}

#[test]
fn serve_refuses_what_it_cannot_do_safely() {
    let scratch = Scratch::new("serve-refuse");
    let data = scratch.path("data");
    let run = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_lev"))
            .arg("serve")
            .args(args)
            .arg("--data-dir")
            .arg(&data)
            .env_remove("LEV_DATABASE_URL")
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, err) = run(&["--listen", "0.0.0.0:0"]);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("--tls-cert") && err.contains("--insecure-http"),
        "{err}"
    );
    // PostgreSQL needs the key-encryption key the replicas share.
    let (code, err) = run(&["--database", "postgres://lev:hunter2@127.0.0.1:1/lev"]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("--key-encryption-key-file"), "{err}");
    let kek = scratch.path("kek");
    let made = lev(["keys", "kek", "--out", kek.to_str().unwrap()]);
    assert_eq!(made.code, 0, "{made:?}");
    // A database that does not connect: the host and the cause, no secret.
    let (code, err) = run(&[
        "--database",
        "postgres://lev:hunter2@127.0.0.1:1/lev",
        "--key-encryption-key-file",
        kek.to_str().unwrap(),
    ]);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("127.0.0.1:1") && err.contains("refused"),
        "{err}"
    );
    assert!(!err.contains("hunter2"), "{err}");
    let (code, err) = run(&["--database", "mysql://db.example/lev"]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("expected a postgres:// URL"), "{err}");
    let (code, err) = run(&["--tls-cert", "cert.pem"]);
    assert_eq!(code, Some(2), "clap: --tls-cert needs --tls-key: {err}");
}

/// What a stream task was told was committed.
#[derive(Default)]
struct Acked {
    created: Vec<String>,
    answered: Vec<(String, String)>,
}

#[test]
fn every_acknowledged_write_survives_sigkill() {
    let scratch = Scratch::new("serve-crash");
    let data = scratch.path("data");
    let mut served = Served::start(&data);
    let admin = std::fs::read_to_string(data.join("admin.token"))
        .unwrap()
        .trim()
        .to_owned();
    let worker = token(&served.addr, &admin, "crash-worker", "worker");
    let approver = token(&served.addr, &admin, "crash-approver", "approver");

    let stop = Arc::new(AtomicBool::new(false));
    let acked = Arc::new(Mutex::new(Acked::default()));
    let mut streams = Vec::new();
    for t in 0..4 {
        let (addr, worker, approver) = (served.addr.clone(), worker.clone(), approver.clone());
        let (stop, acked) = (Arc::clone(&stop), Arc::clone(&acked));
        streams.push(std::thread::spawn(move || {
            for i in 0.. {
                if stop.load(Ordering::Relaxed) || i >= 5_000 {
                    return;
                }
                let id = format!("crash-{t}-{i}");
                let create = json!({"id": id, "session_id": format!("s-{t}"),
                    "kind": {"type": "free_text", "prompt": format!("question {i}")}});
                match http(&addr, "POST", "/v1/interactions", &worker, Some(&create)) {
                    Ok((201, _)) => acked.lock().unwrap().created.push(id.clone()),
                    Ok((status, v)) => panic!("create {id}: {status} {v}"),
                    Err(_) => return, // the server is gone
                }
                let value = format!("answer {t}/{i}");
                let answer = json!({"request_id": id, "value": value});
                match http(
                    &addr,
                    "POST",
                    &format!("/v1/interactions/{id}/respond"),
                    &approver,
                    Some(&answer),
                ) {
                    Ok((200, _)) => acked.lock().unwrap().answered.push((id, value)),
                    Ok((status, v)) => panic!("respond {id}: {status} {v}"),
                    Err(_) => return,
                }
            }
        }));
    }
    // Let the writes flow, then kill the server mid-stream: no chance to flush.
    let deadline = Instant::now() + Duration::from_secs(20);
    while acked.lock().unwrap().answered.len() < 200 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    served.server.kill();
    stop.store(true, Ordering::Relaxed);
    for s in streams {
        s.join().unwrap();
    }
    let acked = std::mem::take(&mut *acked.lock().unwrap());
    assert!(
        acked.created.len() >= 50,
        "the stream ran: {} creates",
        acked.created.len()
    );
    drop(served);

    let served = Served::start(&data);
    let answers: std::collections::HashMap<_, _> = acked.answered.iter().cloned().collect();
    for id in &acked.created {
        let (status, view) = http(
            &served.addr,
            "GET",
            &format!("/v1/interactions/{id}"),
            &admin,
            None,
        )
        .unwrap();
        assert_eq!(status, 200, "acknowledged create {id} lost: {view}");
        if let Some(value) = answers.get(id) {
            assert_eq!(
                view["request"]["status"], "answered",
                "acknowledged answer to {id} lost"
            );
            assert_eq!(&view["response"]["value"], value);
            assert_eq!(view["request"]["answered_by"], "crash-approver");
        }
    }
    // The tokens and the audit chain came through whole too.
    let (status, audit) = http(&served.addr, "GET", "/v1/audit", &admin, None).unwrap();
    assert_eq!(status, 200);
    let page: lev_protocol::api::AuditPage = serde_json::from_value(audit).unwrap();
    let (_, jwks) = http(&served.addr, "GET", "/v1/keys", "", None).unwrap();
    let keys = lev_approval::TrustedKeys::parse(&jwks.to_string()).unwrap();
    lev_approval::audit::verify_chain(&page.page.items, &page.head, &keys, None).unwrap();
    let answered_in_log = page
        .page
        .items
        .iter()
        .filter(|e| e.action == "interaction.answered")
        .count();
    assert!(answered_in_log >= acked.answered.len());
}

/// The flood: more half-sent requests than the open-file limit
/// (1,024 here) once left `/v1/health` unanswered until they closed.
/// `lev serve` now keeps its connections below the limit (saying so), a
/// new connection replaces the one idle longest, and health answers.
#[test]
fn health_answers_past_the_open_file_limit_of_half_sent_requests() {
    let scratch = Scratch::new("serve-fd-flood");
    // The limit is set by a shell around lev serve (a hard limit may be
    // lowered by anyone).
    let wrapper = scratch.path("lev-1024");
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\nulimit -n 1024 || exit 97\nexec '{}' \"$@\"\n",
            env!("CARGO_BIN_EXE_lev")
        ),
    )
    .unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let data = scratch.path("data");
    let server = Spawned::builder(&wrapper, &data)
        .args(["--max-connections-per-address", "100000"])
        .start()
        .unwrap();
    let addr = server.addr().to_owned();
    let mut held = Vec::new();
    for _ in 0..1_100 {
        let Ok(mut stream) = TcpStream::connect(&addr) else {
            continue;
        };
        let _ = stream.write_all(b"GET /v1/health HTTP/1.1\r\nhost: lev\r\nx-slow: ");
        held.push(stream);
    }
    let started = Instant::now();
    let (status, v) = http(&addr, "GET", "/v1/health", "", None).unwrap();
    assert_eq!(status, 200, "{v}");
    assert!(started.elapsed() < Duration::from_secs(5));
    assert!(
        server
            .log()
            .contains("--max-connections 10000 lowered to 768"),
        "{}",
        server.log()
    );
    drop(held);
}
