//! Proof that nothing reaches the network: every Codex test gives Codex (and
//! the `lev` it runs, and what they start) `HTTP_PROXY`, `HTTPS_PROXY` and
//! `ALL_PROXY` (and the lowercase spellings) pointing at a [`Tripwire`], a
//! listener on loopback that keeps every connection it gets and forwards
//! none; only loopback (`NO_PROXY`), where the fake model and lev listen,
//! goes direct. Codex's HTTP clients (reqwest) follow these variables, so a
//! request for anywhere else (OpenAI, an update check, analytics, a plugin
//! registry) lands on the tripwire instead of the network, and the test that
//! made it fails when its world is dropped ([`super::harness::CodexEnv`]).
//!
//! The tests here prove the check can fail: with loopback taken out of
//! `NO_PROXY`, Codex's model request goes through the tripwire (so Codex
//! follows the variables); and a connection to the tripwire or a stray
//! request to the fake model fails the check.

use std::io::{BufRead as _, BufReader, Write as _};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::fake_model::say;
use super::harness::{CodexEnv, Running, codex_bin};

/// What goes direct: loopback only.
pub const NO_PROXY: &str = "127.0.0.1,localhost,::1";

/// A listener that records every connection made to it (its first line:
/// `CONNECT host:443 HTTP/1.1` for HTTPS through a proxy, `GET http://...`
/// for plain HTTP) and answers 403.
#[derive(Debug)]
pub struct Tripwire {
    port: u16,
    seen: Arc<Mutex<Vec<String>>>,
}

impl Tripwire {
    /// A connection whose first line is not read yet.
    pub const UNREAD: &str = "a connection (nothing read yet)";

    pub fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the tripwire");
        let port = listener.local_addr().unwrap().port();
        let seen: Arc<Mutex<Vec<String>>> = Arc::default();
        let shared = seen.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                // Counted the moment it is accepted, whatever it says next.
                let at = {
                    let mut seen = shared.lock().unwrap();
                    seen.push(Self::UNREAD.to_owned());
                    seen.len() - 1
                };
                let shared = shared.clone();
                std::thread::spawn(move || {
                    let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
                    let mut line = String::new();
                    if let Ok(clone) = stream.try_clone() {
                        let _ = BufReader::new(clone).read_line(&mut line);
                    }
                    if !line.trim().is_empty() {
                        shared.lock().unwrap()[at] = line.trim_end().to_owned();
                    }
                    let mut stream = stream;
                    let _ = stream.write_all(
                        b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                    );
                });
            }
        });
        Self { port, seen }
    }

    /// The proxy URL.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Every connection so far, by its first line.
    pub fn seen(&self) -> Vec<String> {
        self.seen.lock().unwrap().clone()
    }

    /// Point every proxy variable of `command` at the tripwire, loopback
    /// excepted (`no_proxy`).
    pub fn arm(&self, command: &mut std::process::Command, no_proxy: &str) {
        for (name, value) in self.vars(no_proxy) {
            command.env(name, value);
        }
    }

    /// The variables [`Self::arm`] sets.
    pub fn vars(&self, no_proxy: &str) -> Vec<(&'static str, String)> {
        let url = self.url();
        let mut vars = Vec::new();
        for name in [
            "HTTP_PROXY",
            "HTTPS_PROXY",
            "ALL_PROXY",
            "http_proxy",
            "https_proxy",
            "all_proxy",
        ] {
            vars.push((name, url.clone()));
        }
        vars.push(("NO_PROXY", no_proxy.to_owned()));
        vars.push(("no_proxy", no_proxy.to_owned()));
        vars
    }
}

#[test]
fn codex_requests_for_anywhere_but_loopback_go_through_the_tripwire() {
    // The same world every test gets, but with loopback proxied too: Codex's
    // call to the fake model must then reach the tripwire, not the fake.
    let env = CodexEnv::start("tripwire", None, vec![say("unreachable")]);
    let mut command = env.command(&codex_bin());
    env.tripwire.arm(&mut command, "");
    command.args(["exec", "--skip-git-repo-check", "say hello"]);
    let run = Running::spawn(command).wait();
    assert_ne!(run.code, 0, "the model answered through a 403: {run:?}");
    let seen = env.tripwire.seen();
    let model = env.model.base_url();
    let expected = format!("POST {model}/responses HTTP/1.1");
    assert!(
        seen.iter().any(|line| line == &expected),
        "expected {expected:?} at the tripwire, found {seen:?}; Codex does not follow the proxy variables, so the tripwire proves nothing\n{}",
        run.stderr
    );
    assert!(
        env.model.requests().is_empty(),
        "the fake was reached directly"
    );
    env.allow_at_tripwire(&expected);
}

#[test]
fn codex_tests_fail_on_a_connection_beyond_loopback_or_a_stray_request() {
    let env = CodexEnv::start("tripwire-check", None, vec![]);
    env.assert_offline();
    // What a client that followed the proxy variables to GitHub, and one
    // that asked the model's server for its model list, would send.
    let send = |port_of: &str, text: &str| {
        let address = port_of.trim_start_matches("http://");
        let address = address.split('/').next().unwrap();
        let mut stream = std::net::TcpStream::connect(address).unwrap();
        stream.write_all(text.as_bytes()).unwrap();
        let mut answer = String::new();
        let _ = std::io::Read::read_to_string(&mut stream, &mut answer);
        answer
    };
    let connect = "CONNECT api.github.com:443 HTTP/1.1";
    let answer = send(
        &env.tripwire.url(),
        &format!("{connect}\r\nHost: api.github.com:443\r\n\r\n"),
    );
    assert!(answer.starts_with("HTTP/1.1 403"), "{answer}");
    let answer = send(
        &env.model.base_url(),
        "GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n",
    );
    assert!(answer.starts_with("HTTP/1.1 404"), "{answer}");
    let failed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| env.assert_offline()))
        .expect_err("the check passed with a connection beyond loopback");
    let message = failed.downcast_ref::<String>().cloned().unwrap_or_default();
    assert!(message.contains(connect), "{message}");
    env.allow_at_tripwire(connect);
    let failed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| env.assert_offline()))
        .expect_err("the check passed with a stray request to the model");
    let message = failed.downcast_ref::<String>().cloned().unwrap_or_default();
    assert!(message.contains("GET /v1/models HTTP/1.1"), "{message}");
    assert_eq!(env.model.take_strays(), ["GET /v1/models HTTP/1.1"]);
    env.assert_offline();
}
