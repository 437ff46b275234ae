//! `lev mcp proxy --listen ADDR`: MCP's Streamable HTTP transport for the
//! client side, on axum, at `/mcp`.
//!
//! An `initialize` POST without a session opens an MCP session
//! (`Mcp-Session-Id` in the answer) with an upstream connection of its own
//! (a child process each, for a stdio upstream) and its own relay; `DELETE`
//! ends it. A POST of requests is answered with an SSE stream carrying their
//! responses and what belongs to them (progress on their tokens); the GET
//! stream carries everything else the server sends (its requests,
//! notifications), kept until one opens. A POST of notifications or
//! responses alone is `202 Accepted`.
//!
//! A POST with no `Mcp-Session-Id` that does not open a session (a stateless
//! 2026-07-28 client: `server/discover`, then requests carrying their
//! version in `_meta`) goes to one shared upstream connection opened for
//! such requests; its request ids and progress tokens are renamed on the way
//! up (two clients may both use id 1) and restored on the way back, and its
//! gate calls are in `--session`, else the proxy process's session.
//!
//! Requests from a browser page of another
//! origin are refused (`Origin` must be loopback), as the transport's rules
//! ask of a local server; with a token (`--listen-token-file`), every request
//! must carry it as `Authorization: Bearer`, and without one only a loopback
//! address may be bound.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::{Value, json};
use sha2::Digest as _;
use tokio::sync::mpsc;

use super::message::{self, Kind, Message, code, id_key};
use super::transport::{Incoming, Link, MAX_MESSAGE};
use super::{Config, Upstream, relay};

const SESSION: &str = "mcp-session-id";
/// Messages for a session with no stream open, kept until a GET opens one.
const BACKLOG: usize = 1024;

/// Where `--listen` serves, and the bearer token clients must show.
#[derive(Debug, Clone)]
pub struct Listen {
    pub addr: SocketAddr,
    /// SHA-256 of the token, when there is one.
    token: Option<[u8; 32]>,
}

impl Listen {
    /// Serve on `addr`; with `token`, only to clients that show it. Without
    /// one, `addr` must be loopback: an MCP endpoint that runs tools for
    /// anyone who reaches it is not served to a network.
    ///
    /// # Errors
    /// A non-loopback address without a token, or an empty token.
    pub fn new(addr: SocketAddr, token: Option<&str>) -> anyhow::Result<Self> {
        let token = match token.map(str::trim) {
            Some("") => anyhow::bail!("--listen-token-file: the file is empty"),
            Some(token) => Some(sha2::Sha256::digest(token.as_bytes()).into()),
            None if addr.ip().is_loopback() => None,
            None => anyhow::bail!(
                "--listen {addr} is not a loopback address: give --listen-token-file, \
                 so that only clients with the token reach the tools"
            ),
        };
        Ok(Self { addr, token })
    }

    /// Whether `headers` carry the token (always, when there is none).
    fn admits(&self, headers: &HeaderMap) -> bool {
        let Some(want) = self.token else {
            return true;
        };
        let shown = headers
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| {
                v.split_once(' ')
                    .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
            })
            .map(|(_, token)| token.trim());
        // Digests of equal length compared whole: how much of the token
        // matched does not show in the time taken.
        shown.is_some_and(|token| {
            let got: [u8; 32] = sha2::Sha256::digest(token.as_bytes()).into();
            got.iter()
                .zip(want.iter())
                .fold(0u8, |acc, (a, b)| acc | (a ^ b))
                == 0
        })
    }
}

#[derive(Debug)]
struct Hub {
    listen: Listen,
    config: Arc<Config>,
    upstream: Upstream,
    sessions: Mutex<HashMap<String, Arc<Session>>>,
    /// The upstream connection of stateless requests, once one came.
    stateless: Mutex<Option<Arc<Session>>>,
    next: AtomicU64,
}

/// One MCP session: its relay's input, and where its output goes.
#[derive(Debug)]
struct Session {
    to_relay: mpsc::Sender<Incoming>,
    routes: Arc<Mutex<Routes>>,
    /// The relay's task, ending once `to_relay` is dropped.
    relay: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

#[derive(Debug, Default)]
struct Routes {
    /// POST streams waiting for the response to a request, by its id.
    waiting: HashMap<String, mpsc::UnboundedSender<Message>>,
    /// Progress tokens of waiting requests -> their ids.
    tokens: HashMap<String, String>,
    /// The GET stream, when one is open.
    get: Option<mpsc::UnboundedSender<Message>>,
    /// Messages with no stream to go to yet.
    backlog: Vec<Message>,
}

impl Routes {
    /// Send a message of the relay's to the stream it belongs on.
    fn route(&mut self, message: Message) {
        if message.kind() == Kind::Response
            && let Some(key) = message.id().map(id_key)
            && let Some(stream) = self.waiting.remove(&key)
        {
            self.tokens.retain(|_, id| *id != key);
            let _ = stream.send(message);
            return;
        }
        if message.method() == Some("notifications/progress")
            && let Some(token) = message
                .params()
                .and_then(|p| p.get("progressToken"))
                .map(id_key)
            && let Some(stream) = self.tokens.get(&token).and_then(|id| self.waiting.get(id))
            && stream.send(message.clone()).is_ok()
        {
            return;
        }
        let message = match &self.get {
            Some(get) => match get.send(message) {
                Ok(()) => return,
                Err(mpsc::error::SendError(message)) => {
                    self.get = None;
                    message
                }
            },
            None => message,
        };
        // No GET stream: any POST stream still open, else kept.
        if let Some(stream) = self.waiting.values().find(|s| !s.is_closed()) {
            let _ = stream.send(message);
        } else if self.backlog.len() < BACKLOG {
            self.backlog.push(message);
        }
    }
}

/// Serve MCP on `addr` until SIGINT or SIGTERM.
///
/// # Errors
/// When the address cannot be bound.
pub async fn serve(config: Arc<Config>, upstream: Upstream, listen: Listen) -> anyhow::Result<()> {
    let addr = listen.addr;
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| anyhow::anyhow!("--listen {addr}: {e}"))?;
    let local = listener.local_addr()?;
    eprintln!("lev mcp proxy: MCP on http://{local}/mcp");
    let hub = Arc::new(Hub {
        listen,
        config,
        upstream,
        sessions: Mutex::new(HashMap::new()),
        stateless: Mutex::new(None),
        next: AtomicU64::new(0),
    });
    let app = Router::new()
        .route(
            "/mcp",
            post(handle_post).get(handle_get).delete(handle_delete),
        )
        .with_state(Arc::clone(&hub));
    let mut signals = crate::signals::Terminating::new()?;
    tokio::select! {
        served = axum::serve(listener, app) => served?,
        _ = signals.recv() => {}
    }
    // Each session's relay ends with its input: their questions cancelled,
    // their upstreams stopped.
    let mut sessions: Vec<Arc<Session>> = hub
        .sessions
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .drain()
        .map(|(_, s)| s)
        .collect();
    sessions.extend(
        hub.stateless
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take(),
    );
    let relays: Vec<_> = sessions
        .into_iter()
        .filter_map(|s| {
            s.relay
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .take()
        })
        .collect();
    let _ = tokio::time::timeout(
        std::time::Duration::from_secs(8),
        futures_util::future::join_all(relays),
    )
    .await;
    Ok(())
}

fn plain(status: StatusCode, text: &str) -> Response {
    (status, text.to_owned()).into_response()
}

/// Why a request may not be served, as its response: from a page of
/// another origin, or without the token.
fn refused(hub: &Hub, headers: &HeaderMap) -> Option<Response> {
    if foreign_origin(headers) {
        return Some(plain(StatusCode::FORBIDDEN, "Origin not allowed"));
    }
    if !hub.listen.admits(headers) {
        let mut response = plain(
            StatusCode::UNAUTHORIZED,
            "this MCP endpoint needs its token: Authorization: Bearer TOKEN",
        );
        response.headers_mut().insert(
            "www-authenticate",
            HeaderValue::from_static("Bearer realm=\"lev mcp proxy\""),
        );
        return Some(response);
    }
    None
}

/// Whether `headers` come from a page of another origin than loopback.
fn foreign_origin(headers: &HeaderMap) -> bool {
    let Some(origin) = headers.get("origin").and_then(|v| v.to_str().ok()) else {
        return false;
    };
    let host = origin
        .split_once("://")
        .map_or(origin, |(_, rest)| rest)
        .split('/')
        .next()
        .unwrap_or_default();
    let host = match host.rsplit_once(':') {
        Some((h, port)) if port.bytes().all(|b| b.is_ascii_digit()) => h,
        _ => host,
    };
    !matches!(host, "localhost" | "127.0.0.1" | "[::1]")
}

impl Hub {
    fn session(&self, headers: &HeaderMap) -> Option<(String, Arc<Session>)> {
        let id = headers.get(SESSION)?.to_str().ok()?.to_owned();
        let session = self
            .sessions
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(&id)
            .cloned()?;
        Some((id, session))
    }

    /// Open a session: its upstream, its relay, its router.
    fn open(&self) -> anyhow::Result<(String, Arc<Session>)> {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let digest = sha2::Sha256::digest(format!("{nanos}-{}-{n}", std::process::id()));
        let id: String = digest.iter().take(16).map(|b| format!("{b:02x}")).collect();
        let session = self.start(Some(id.clone()))?;
        self.sessions
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(id.clone(), Arc::clone(&session));
        Ok((id, session))
    }

    /// The shared connection of stateless requests, opened at the first.
    fn stateless(&self) -> anyhow::Result<Arc<Session>> {
        let mut stateless = self
            .stateless
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(session) = &*stateless {
            return Ok(Arc::clone(session));
        }
        let session = self.start(None)?;
        *stateless = Some(Arc::clone(&session));
        Ok(session)
    }

    /// An upstream connection, its relay and its router, for the MCP
    /// session `mcp_session` (none: stateless requests).
    fn start(&self, mcp_session: Option<String>) -> anyhow::Result<Arc<Session>> {
        let mcp_session = Arc::new(Mutex::new(mcp_session));
        let (upstream, guard) = super::open(&self.upstream, Arc::clone(&mcp_session))?;
        let (to_relay, from_client) = mpsc::channel(64);
        let (down, mut out) = mpsc::unbounded_channel::<Message>();
        let routes = Arc::new(Mutex::new(Routes::default()));
        let router = Arc::clone(&routes);
        tokio::spawn(async move {
            while let Some(message) = out.recv().await {
                router
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .route(message);
            }
        });
        let config = Arc::clone(&self.config);
        let relay = tokio::spawn(async move {
            let client = Link {
                tx: down,
                rx: from_client,
            };
            relay::run(config, client, upstream, mcp_session).await;
            if let Some(guard) = guard {
                guard.stop().await;
            }
        });
        Ok(Arc::new(Session {
            to_relay,
            routes,
            relay: Mutex::new(Some(relay)),
        }))
    }
}

/// A stateless POST's request ids and progress tokens, renamed so that
/// clients sharing one upstream connection cannot collide: the new id's key
/// -> the client's id, and the new token's key -> the client's token.
#[derive(Debug, Default)]
struct Renamed {
    ids: HashMap<String, Value>,
    tokens: HashMap<String, Value>,
}

impl Renamed {
    /// Rename `messages`' request ids (and their progress tokens) to ones
    /// drawn from `next`.
    fn rename(messages: &mut [Message], next: &AtomicU64) -> Self {
        let mut renamed = Self::default();
        for m in messages.iter_mut() {
            if m.kind() != Kind::Request {
                continue;
            }
            let Some(original) = m.id().cloned() else {
                continue;
            };
            let mine = json!(format!("lev-{}", next.fetch_add(1, Ordering::Relaxed)));
            if let Some(token) = m.progress_token().cloned()
                && let Some(meta) = m
                    .value_mut()
                    .get_mut("params")
                    .and_then(|p| p.get_mut("_meta"))
                    .and_then(Value::as_object_mut)
            {
                meta.insert("progressToken".into(), mine.clone());
                renamed.tokens.insert(id_key(&mine), token);
            }
            m.set_id(mine.clone());
            renamed.ids.insert(id_key(&mine), original);
        }
        renamed
    }

    /// The client's names back in a message for it.
    fn restore(&self, mut message: Message) -> Message {
        if message.kind() == Kind::Response
            && let Some(original) = message.id().map(id_key).and_then(|k| self.ids.get(&k))
        {
            message.set_id(original.clone());
        } else if message.method() == Some("notifications/progress")
            && let Some(original) = message
                .params()
                .and_then(|p| p.get("progressToken"))
                .map(id_key)
                .and_then(|k| self.tokens.get(&k))
                .cloned()
            && let Some(params) = message
                .value_mut()
                .get_mut("params")
                .and_then(Value::as_object_mut)
        {
            params.insert("progressToken".into(), original);
        }
        message
    }
}

/// An SSE response of the messages `rx` gets, ending when every sender is
/// gone; with the client's names restored where they were `renamed`.
fn stream(rx: mpsc::UnboundedReceiver<Message>, renamed: Option<Renamed>) -> Response {
    let events = futures_util::stream::unfold((rx, renamed), |(mut rx, renamed)| async move {
        let mut message = rx.recv().await?;
        if let Some(renamed) = &renamed {
            message = renamed.restore(message);
        }
        Some((
            Ok::<_, std::convert::Infallible>(Event::default().data(message.text())),
            (rx, renamed),
        ))
    });
    Sse::new(events)
        .keep_alive(KeepAlive::default())
        .into_response()
}

async fn handle_post(State(hub): State<Arc<Hub>>, headers: HeaderMap, body: Bytes) -> Response {
    if let Some(refusal) = refused(&hub, &headers) {
        return refusal;
    }
    if body.len() > MAX_MESSAGE {
        return plain(StatusCode::PAYLOAD_TOO_LARGE, "body too large");
    }
    let text = String::from_utf8_lossy(&body).into_owned();
    let mut messages = match serde_json::from_str::<Value>(&text) {
        Ok(value) => Message::split(value, text),
        Err(e) => {
            let error = message::error(Value::Null, code::PARSE_ERROR, format!("not JSON: {e}"));
            return (StatusCode::BAD_REQUEST, error.text()).into_response();
        }
    };
    let initialize = messages.iter().any(|m| m.method() == Some("initialize"));
    let mut renamed = None;
    let (id, session) = match hub.session(&headers) {
        Some((id, session)) => (Some(id), session),
        None if headers.contains_key(SESSION) => {
            return plain(StatusCode::NOT_FOUND, "no such MCP session");
        }
        None => {
            let opened = if initialize {
                hub.open().map(|(id, session)| (Some(id), session))
            } else {
                renamed = Some(Renamed::rename(&mut messages, &hub.next));
                hub.stateless().map(|session| (None, session))
            };
            match opened {
                Ok(opened) => opened,
                Err(e) => {
                    return plain(StatusCode::BAD_GATEWAY, &format!("lev mcp proxy: {e:#}"));
                }
            }
        }
    };
    let (tx, rx) = mpsc::unbounded_channel();
    let mut requests = 0;
    {
        let mut routes = session
            .routes
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        for m in &messages {
            if m.kind() == Kind::Request
                && let Some(key) = m.id().map(id_key)
            {
                requests += 1;
                if let Some(token) = m.progress_token().map(id_key) {
                    routes.tokens.insert(token, key.clone());
                }
                routes.waiting.insert(key, tx.clone());
            }
        }
    }
    drop(tx);
    for m in messages {
        if session.to_relay.send(Incoming::Message(m)).await.is_err() {
            return plain(StatusCode::NOT_FOUND, "the MCP session ended");
        }
    }
    let mut response = if requests == 0 {
        StatusCode::ACCEPTED.into_response()
    } else {
        stream(rx, renamed)
    };
    if let Some(value) = id.and_then(|id| HeaderValue::from_str(&id).ok()) {
        response.headers_mut().insert(SESSION, value);
    }
    response
}

async fn handle_get(State(hub): State<Arc<Hub>>, headers: HeaderMap) -> Response {
    if let Some(refusal) = refused(&hub, &headers) {
        return refusal;
    }
    let Some((_, session)) = hub.session(&headers) else {
        return plain(StatusCode::NOT_FOUND, "no such MCP session");
    };
    let (tx, rx) = mpsc::unbounded_channel();
    {
        let mut routes = session
            .routes
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        for message in routes.backlog.drain(..) {
            let _ = tx.send(message);
        }
        routes.get = Some(tx);
    }
    stream(rx, None)
}

async fn handle_delete(State(hub): State<Arc<Hub>>, headers: HeaderMap) -> Response {
    if let Some(refusal) = refused(&hub, &headers) {
        return refusal;
    }
    let Some(id) = headers.get(SESSION).and_then(|v| v.to_str().ok()) else {
        return plain(StatusCode::BAD_REQUEST, "no Mcp-Session-Id");
    };
    let removed = hub
        .sessions
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .remove(id);
    match removed {
        // Dropping it closes the relay's input: the relay ends.
        Some(_) => StatusCode::OK.into_response(),
        None => plain(StatusCode::NOT_FOUND, "no such MCP session"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins() {
        let with = |origin: &str| {
            let mut h = HeaderMap::new();
            h.insert("origin", HeaderValue::from_str(origin).unwrap());
            foreign_origin(&h)
        };
        assert!(!foreign_origin(&HeaderMap::new()));
        assert!(!with("http://localhost:3000"));
        assert!(!with("http://127.0.0.1"));
        assert!(!with("http://[::1]:8080"));
        assert!(with("https://evil.example"));
        assert!(with("http://localhost.evil.example"));
    }
}
