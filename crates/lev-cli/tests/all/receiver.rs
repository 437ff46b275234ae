//! A real HTTP/1.1 receiver on loopback for the webhook and Slack tests:
//! every request is recorded, and a function chosen by the test answers it
//! (so it can fail the first attempts, answer 410, or play Slack's API).

use std::io::{Read as _, Write as _};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// One request as received.
#[derive(Debug, Clone)]
pub struct Request {
    pub method: String,
    pub path: String,
    /// Names lowercased.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// The status it was answered with.
    pub status: u16,
}

impl Request {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).expect("a JSON body")
    }
}

/// What to answer: status, extra headers, body. Given the request and
/// every request received before it.
pub type Respond =
    dyn Fn(&Request, &[Request]) -> (u16, Vec<(String, String)>, Vec<u8>) + Send + Sync;

pub struct Receiver {
    pub port: u16,
    requests: Arc<Mutex<Vec<Request>>>,
    stop: Arc<AtomicBool>,
    /// Connections accepted so far (counted before any request is read).
    pub accepted: Arc<AtomicUsize>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Receiver {
    pub fn start(respond: Arc<Respond>) -> Self {
        Self::start_on(0, respond)
    }

    /// On this port (0: any), e.g. again where a stopped one was.
    pub fn start_on(port: u16, respond: Arc<Respond>) -> Self {
        let deadline = Instant::now() + Duration::from_secs(10);
        let listener = loop {
            match TcpListener::bind(("127.0.0.1", port)) {
                Ok(l) => break l,
                Err(e) if Instant::now() < deadline => {
                    let _ = e;
                    std::thread::sleep(Duration::from_millis(50));
                }
                Err(e) => panic!("bind 127.0.0.1:{port}: {e}"),
            }
        };
        let port = listener.local_addr().unwrap().port();
        listener.set_nonblocking(true).unwrap();
        let requests = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let accepted = Arc::new(AtomicUsize::new(0));
        let (r, s, a) = (
            Arc::clone(&requests),
            Arc::clone(&stop),
            Arc::clone(&accepted),
        );
        let thread = std::thread::spawn(move || {
            while !s.load(Ordering::SeqCst) {
                match listener.accept() {
                    Ok((stream, _)) => {
                        a.fetch_add(1, Ordering::SeqCst);
                        let (r, respond) = (Arc::clone(&r), Arc::clone(&respond));
                        std::thread::spawn(move || serve(stream, &r, respond.as_ref()));
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(5)),
                }
            }
        });
        Self {
            port,
            requests,
            stop,
            accepted,
            thread: Some(thread),
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    pub fn requests(&self) -> Vec<Request> {
        self.requests.lock().unwrap().clone()
    }

    /// Wait until `done` holds for the requests so far.
    pub fn wait_for(&self, what: &str, done: impl Fn(&[Request]) -> bool) -> Vec<Request> {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let all = self.requests();
            if done(&all) {
                return all;
            }
            assert!(
                Instant::now() < deadline,
                "timed out waiting for {what}; received:\n{all:#?}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Close the listener: connections are refused from now on.
    pub fn stop(mut self) -> Vec<Request> {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        self.requests()
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

fn serve(mut stream: TcpStream, requests: &Mutex<Vec<Request>>, respond: &Respond) {
    let _ = stream.set_nonblocking(false);
    let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i;
        }
        match stream.read(&mut chunk) {
            Ok(0) | Err(_) => return,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_string();
    let mut lines = head.split("\r\n");
    let mut first = lines.next().unwrap_or_default().split(' ');
    let method = first.next().unwrap_or_default().to_owned();
    let path = first.next().unwrap_or_default().to_owned();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let len: usize = headers
        .iter()
        .find(|(n, _)| n == "content-length")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    let mut body = buf[head_end + 4..].to_vec();
    while body.len() < len {
        match stream.read(&mut chunk) {
            Ok(0) | Err(_) => return,
            Ok(n) => body.extend_from_slice(&chunk[..n]),
        }
    }
    let mut request = Request {
        method,
        path,
        headers,
        body,
        status: 0,
    };
    let (status, extra, out) = {
        let before = requests.lock().unwrap().clone();
        respond(&request, &before)
    };
    request.status = status;
    requests.lock().unwrap().push(request);
    let mut response = format!(
        "HTTP/1.1 {status} X\r\ncontent-length: {}\r\nconnection: close\r\n",
        out.len()
    );
    for (n, v) in extra {
        response.push_str(&format!("{n}: {v}\r\n"));
    }
    response.push_str("\r\n");
    let _ = stream.write_all(response.as_bytes());
    let _ = stream.write_all(&out);
}
