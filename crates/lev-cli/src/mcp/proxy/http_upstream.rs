//! An upstream MCP server over Streamable HTTP (`--url`): each message a
//! POST (`Accept: application/json, text/event-stream`) answered by a JSON
//! body or an SSE stream; the `Mcp-Session-Id` the server gives at
//! `initialize` and the negotiated `MCP-Protocol-Version` sent on every
//! request after; the GET stream for the server's own messages when it
//! offers one; the session deleted at the end.
//!
//! The POSTs are sent in the order the client wrote its messages (each one's
//! response headers awaited before the next is sent); their bodies are read
//! side by side, so a long tool call holds up nothing else. A request the
//! server refuses or cannot be reached for is answered with a JSON-RPC
//! error, never with a success.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};
use serde_json::Value;
use tokio::sync::mpsc;

use super::message::{self, Message, code};
use super::sse;
use super::transport::{Incoming, Link, MAX_MESSAGE, parse};

const SESSION: &str = "mcp-session-id";
const VERSION: &str = "mcp-protocol-version";

/// Where the upstream is and what every request to it carries.
#[derive(Debug, Clone)]
pub struct Target {
    /// Its MCP endpoint.
    pub url: String,
    /// `--header` values (its auth, say).
    pub headers: HeaderMap,
}

/// Parse `--header 'K: V'`.
///
/// # Errors
/// When it is not `NAME: VALUE` with a valid name and value.
pub fn header(text: &str) -> anyhow::Result<(HeaderName, HeaderValue)> {
    let (name, value) = text
        .split_once(':')
        .ok_or_else(|| anyhow::anyhow!("--header {text:?}: expected 'NAME: VALUE'"))?;
    let name = HeaderName::from_bytes(name.trim().as_bytes())
        .map_err(|e| anyhow::anyhow!("--header {text:?}: bad name: {e}"))?;
    let value = HeaderValue::from_str(value.trim())
        .map_err(|e| anyhow::anyhow!("--header {name}: bad value: {e}"))?;
    Ok((name, value))
}

/// What the connection learnt at `initialize`.
#[derive(Debug, Default)]
struct Learnt {
    session: Option<String>,
    version: Option<String>,
    get_started: bool,
}

#[derive(Debug)]
struct Upstream {
    http: reqwest::Client,
    target: Target,
    learnt: Mutex<Learnt>,
    incoming: mpsc::Sender<Incoming>,
    mcp_session: Arc<Mutex<Option<String>>>,
}

/// Connect to `target`; the session id it gives is written to
/// `mcp_session`. Ends (deleting the session) when the relay drops the link.
///
/// # Errors
/// When the HTTP client cannot be built.
pub fn connect(target: Target, mcp_session: Arc<Mutex<Option<String>>>) -> anyhow::Result<Link> {
    let tls = lev_client::outbound_tls_config().map_err(|e| anyhow::anyhow!("TLS: {e}"))?;
    let http = reqwest::Client::builder()
        .tls_backend_preconfigured(tls)
        .connect_timeout(Duration::from_secs(10))
        .build()
        .map_err(|e| anyhow::anyhow!("the HTTP client: {e}"))?;
    let (tx, mut outgoing) = mpsc::unbounded_channel::<Message>();
    let (incoming, rx) = mpsc::channel(64);
    let upstream = Arc::new(Upstream {
        http,
        target,
        learnt: Mutex::new(Learnt::default()),
        incoming,
        mcp_session,
    });
    tokio::spawn(async move {
        while let Some(message) = outgoing.recv().await {
            // In order: `initialize` wholly (the session and version), any
            // other until its response's headers came (or a moment passed,
            // for a server that sends them only with a slow answer).
            let is_initialize = message.method() == Some("initialize");
            let (sent, headers_in) = tokio::sync::oneshot::channel();
            let post = tokio::spawn(Arc::clone(&upstream).post(message, sent));
            if is_initialize {
                let _ = post.await;
            } else {
                let _ = tokio::time::timeout(Duration::from_millis(500), headers_in).await;
            }
        }
        upstream.delete_session().await;
    });
    Ok(Link { tx, rx })
}

impl Upstream {
    fn learnt(&self) -> std::sync::MutexGuard<'_, Learnt> {
        self.learnt
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn headers(&self) -> HeaderMap {
        let mut headers = self.target.headers.clone();
        let learnt = self.learnt();
        for (name, value) in [(SESSION, &learnt.session), (VERSION, &learnt.version)] {
            if let Some(value) = value.as_deref().and_then(|v| HeaderValue::from_str(v).ok()) {
                headers.insert(HeaderName::from_static(name), value);
            }
        }
        headers
    }

    /// Tell the relay what came, in order.
    async fn give(&self, items: Vec<Incoming>) {
        for item in items {
            let _ = self.incoming.send(item).await;
        }
    }

    /// An error answer to `message` when it is a request.
    async fn fail(&self, message: &Message, why: String) {
        if let (Some(id), Some(_)) = (message.id(), message.method()) {
            let error = message::error(id.clone(), code::INTERNAL_ERROR, why);
            self.give(vec![Incoming::Message(error)]).await;
        } else {
            eprintln!("lev mcp proxy: {why}");
        }
    }

    /// POST `message`; its response's body is read on a task of its own.
    async fn post(self: Arc<Self>, message: Message, sent: tokio::sync::oneshot::Sender<()>) {
        let is_initialize = message.method() == Some("initialize");
        let what = message.method().unwrap_or("a response").to_owned();
        let response = self
            .http
            .post(&self.target.url)
            .headers(self.headers())
            .header(CONTENT_TYPE, "application/json")
            .header(ACCEPT, "application/json, text/event-stream")
            .body(message.text())
            .send()
            .await;
        let _ = sent.send(());
        let response = match response {
            Ok(response) => response,
            Err(e) => {
                self.fail(
                    &message,
                    format!("the upstream could not be reached for {what}: {e}"),
                )
                .await;
                return;
            }
        };
        let status = response.status();
        if status == reqwest::StatusCode::ACCEPTED {
            return;
        }
        if !status.is_success() {
            let body = read_text(response).await.unwrap_or_default();
            let body: String = body.chars().take(300).collect();
            self.fail(
                &message,
                format!(
                    "the upstream answered {what} with HTTP {status}: {}",
                    body.trim()
                ),
            )
            .await;
            return;
        }
        if is_initialize {
            self.keep_session(&response);
        }
        self.read_answer(response, message, is_initialize, what)
            .await;
    }

    /// The session id the upstream gave with its answer to `initialize`.
    fn keep_session(&self, response: &reqwest::Response) {
        let session = response
            .headers()
            .get(SESSION)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        if let Some(session) = &session {
            *self
                .mcp_session
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(session.clone());
        }
        self.learnt().session = session;
    }

    /// Read the answer to `message` (a JSON body or an event stream) and
    /// hand on what it holds; a request left unanswered fails with why.
    async fn read_answer(
        self: Arc<Self>,
        response: reqwest::Response,
        message: Message,
        is_initialize: bool,
        what: String,
    ) {
        let event_stream = response
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/event-stream"));
        let upstream = self;
        let answered = if event_stream {
            upstream.read_events(response, is_initialize).await
        } else {
            match read_text(response).await {
                Ok(text) if text.trim().is_empty() => Ok(false),
                Ok(text) => {
                    let items = parse(text);
                    upstream.learn(&items, is_initialize);
                    upstream.give(items).await;
                    Ok(true)
                }
                Err(e) => Err(e),
            }
        };
        match answered {
            Ok(true) => {}
            Ok(false) if message.id().is_none() => {}
            Ok(false) => {
                upstream
                    .fail(
                        &message,
                        format!("the upstream's answer to {what} ended without one"),
                    )
                    .await;
            }
            Err(e) => {
                upstream
                    .fail(
                        &message,
                        format!("the upstream's answer to {what} broke off: {e}"),
                    )
                    .await;
            }
        }
        if is_initialize {
            upstream.start_get_stream();
        }
    }

    /// What `initialize`'s result says: the protocol version to send.
    fn learn(&self, items: &[Incoming], is_initialize: bool) {
        if !is_initialize {
            return;
        }
        for item in items {
            if let Incoming::Message(m) = item
                && let Some(version) = m
                    .value()
                    .pointer("/result/protocolVersion")
                    .and_then(Value::as_str)
            {
                self.learnt().version = Some(version.to_owned());
            }
        }
    }

    /// Read an SSE response: whether a response came in it.
    async fn read_events(
        &self,
        mut response: reqwest::Response,
        is_initialize: bool,
    ) -> Result<bool, String> {
        let mut reader = sse::Reader::default();
        let mut answered = false;
        loop {
            let chunk = match response.chunk().await {
                Ok(Some(chunk)) => chunk,
                Ok(None) => return Ok(answered),
                Err(e) => {
                    return if answered {
                        Ok(true)
                    } else {
                        Err(e.to_string())
                    };
                }
            };
            let events = reader
                .feed(&chunk)
                .map_err(|_| format!("an event longer than {MAX_MESSAGE} bytes"))?;
            for data in events {
                let items = parse(data);
                answered |= items.iter().any(|i| {
                    matches!(i, Incoming::Message(m) if m.kind() == super::message::Kind::Response)
                });
                self.learn(&items, is_initialize);
                self.give(items).await;
            }
        }
    }

    /// The GET stream for the server's own messages, once, after
    /// `initialize`: reopened while the server keeps it, never when it does
    /// not offer one (405).
    fn start_get_stream(self: &Arc<Self>) {
        {
            let mut learnt = self.learnt();
            if learnt.get_started {
                return;
            }
            learnt.get_started = true;
        }
        let upstream = Arc::downgrade(self);
        tokio::spawn(async move {
            let mut failures = 0u32;
            while failures < 5 {
                let Some(this) = upstream.upgrade() else {
                    return;
                };
                let response = this
                    .http
                    .get(&this.target.url)
                    .headers(this.headers())
                    .header(ACCEPT, "text/event-stream")
                    .send()
                    .await;
                match response {
                    Ok(r) if r.status().is_success() => {
                        failures = 0;
                        let _ = this.read_events(r, false).await;
                    }
                    // The server offers no stream.
                    Ok(r) if r.status() == reqwest::StatusCode::METHOD_NOT_ALLOWED => return,
                    Ok(_) | Err(_) => failures += 1,
                }
                drop(this);
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        });
    }

    /// End the session on the server (best effort).
    async fn delete_session(&self) {
        if self.learnt().session.is_none() {
            return;
        }
        let _ = tokio::time::timeout(
            Duration::from_secs(2),
            self.http
                .delete(&self.target.url)
                .headers(self.headers())
                .send(),
        )
        .await;
    }
}

/// A whole response body of at most [`MAX_MESSAGE`] bytes, as text.
async fn read_text(mut response: reqwest::Response) -> Result<String, String> {
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(|e| e.to_string())? {
        body.extend_from_slice(&chunk);
        if body.len() > MAX_MESSAGE {
            return Err(format!("a body longer than {MAX_MESSAGE} bytes"));
        }
    }
    Ok(String::from_utf8_lossy(&body).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_parse() {
        let (name, value) = header("Authorization: Bearer x y").unwrap();
        assert_eq!(name, "authorization");
        assert_eq!(value, "Bearer x y");
        assert!(header("no colon").is_err());
        assert!(header("bad name: v").is_err());
    }
}
