//! Operators and the worker side of a session (SPEC section 4).
//!
//! - [`Operator`] connects to `/v1/operators/{sid}/ws`, hands each `ask`,
//!   `hook_before` and `spawn` to an [`OperatorHandler`], sends the replies
//!   for it, and reconnects with backoff when the connection drops. A message
//!   the server sends again after a reconnect (same `req_id`) is not handled
//!   twice: a handler still running replies once, and a reply already made is
//!   sent again.
//! - [`Session`] is the worker's side: [`Session::ask`] and [`Session::spawn`]
//!   block until the operator (or a person, when it is late) answers;
//!   [`post_worker_result`] is what a sub-agent calls with its task token
//!   (a [`Client`] from [`SpawnOrder::sub_agent`], which shares the
//!   operator's connection pool).
//!
//! There is one HTTP stack: an [`Operator`] is made from (or makes) a
//! [`Client`], and its WebSocket uses that client's URL, token and TLS
//! configuration; [`Session`] and [`post_worker_result`] call through the
//! client, so a refusal is the same [`Error::Api`] as from any [`Client`]
//! method. A refused WebSocket handshake carries that error too
//! ([`OperatorError::Refused`]).
//!
//! `ws://` to loopback, or `wss://` with rustls (see [`ConnectOptions`]).
//!
//! # Example
//! ```no_run
//! use std::sync::Arc;
//! use lev_client::operator::{Ask, Hook, HookDecision, Operator, OperatorHandler, SpawnOrder, SpawnOutcome};
//! use serde_json::{Value, json};
//!
//! struct Main;
//!
//! impl OperatorHandler for Main {
//!     async fn ask(&self, ask: Ask) -> Value {
//!         json!({"answer": format!("you asked {}", ask.question)})
//!     }
//!     async fn hook_before(&self, _hook: Hook) -> HookDecision {
//!         HookDecision::Allow
//!     }
//!     async fn spawn(&self, order: SpawnOrder) -> SpawnOutcome {
//!         SpawnOutcome::value(json!({"ran": order.spawn}))
//!     }
//! }
//!
//! # async fn f() -> Result<(), lev_client::operator::OperatorError> {
//! let operator = Operator::new("http://127.0.0.1:7420", "operator-secret", "s-1")?;
//! operator.run(Arc::new(Main)).await?;
//! # Ok(()) }
//! ```
//!
//! A sub-agent posts its result with its task's token, over the pool of a
//! client made once:
//! ```no_run
//! # use lev_client::operator::{SpawnOrder, post_worker_result};
//! # use lev_protocol::WorkerResult;
//! # async fn f(client: &lev_client::Client, order: SpawnOrder) -> lev_client::Result<()> {
//! let sub_agent = order.sub_agent(client);
//! let result = WorkerResult {
//!     task_id: order.task_id.clone(),
//!     value: serde_json::json!({"done": true}),
//!     ok: true,
//!     error: None,
//!     output_tail: None,
//! };
//! post_worker_result(&sub_agent, &result).await?;
//! # Ok(()) }
//! ```

use std::collections::{HashMap, HashSet, VecDeque};
use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures_util::{SinkExt as _, StreamExt as _};
use lev_protocol::api::{AskRequest, AskResponse, SpawnRequest, SpawnResponse, Task};
use lev_protocol::{ClientMsg, ServerMsg, WorkerResult};
use reqwest::Method;
use serde_json::Value;
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest as _;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;

use crate::backoff::Backoff;
use crate::client::{api_error, segment};

/// The longest the WebSocket's opening (TCP, TLS, the upgrade) may take.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(30);
/// A connection on which nothing came for this long (not even the server's
/// pings, every 15 s) is dropped and made again.
const SILENCE: Duration = Duration::from_secs(90);
use crate::{Client, ConnectOptions, Error};

/// Replies remembered, to send again for a message re-sent after a reconnect.
const REMEMBERED_REPLIES: usize = 1024;
/// How long a worker's call may run past its `timeout_s` before the SDK gives up.
const CALL_SLACK: Duration = Duration::from_secs(15);
/// How long a worker's call may run when it names no timeout.
const DEFAULT_CALL: Duration = Duration::from_secs(3600);

/// Why an operator connection could not be made or kept.
#[derive(Debug, thiserror::Error)]
pub enum OperatorError {
    /// The base URL cannot be used.
    #[error("invalid server url {url:?}: {reason}")]
    InvalidUrl {
        /// The URL as given.
        url: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The server refused the token (401) or its role or session scope
    /// (403): retrying will not help.
    #[error(
        "the server refused the operator connection: {error}\nhint: the token needs the operator role and sessions that cover this one (lev token create NAME --role operator --sessions PATTERNS)"
    )]
    Refused {
        /// The HTTP status.
        status: u16,
        /// The refusal as any [`Client`] call reports it: [`Error::Api`]
        /// with the server's code and message.
        #[source]
        error: Box<Error>,
    },
    /// The WebSocket failed.
    #[error("operator websocket: {0}")]
    WebSocket(#[from] tokio_tungstenite::tungstenite::Error),
}

/// An `ask` to answer.
#[derive(Debug, Clone)]
pub struct Ask {
    /// Its correlation key.
    pub req_id: String,
    /// The question, any JSON (`{"interaction": ...}` for triage).
    pub question: Value,
}

/// A spawn to vet before it runs.
#[derive(Debug, Clone)]
pub struct Hook {
    /// Its correlation key.
    pub req_id: String,
    /// The spawn as the worker sent it.
    pub spawn: Value,
}

/// The decision on a [`Hook`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HookDecision {
    /// Let the spawn run.
    Allow,
    /// Reject it; the worker gets 403 `rejected_by_middleware` with the reason.
    Reject(String),
}

/// A spawn to run.
#[derive(Debug, Clone)]
pub struct SpawnOrder {
    /// Its correlation key.
    pub req_id: String,
    /// The task made for it.
    pub task_id: String,
    /// The token that lets the sub-agent post this task's result (and nothing else).
    pub task_token: String,
    /// The spawn as the worker sent it.
    pub spawn: Value,
}

impl SpawnOrder {
    /// A client for the sub-agent: `client`'s server and connection pool
    /// with this task's token (which may only post this task's result, with
    /// [`post_worker_result`]). No new HTTP client is built.
    pub fn sub_agent(&self, client: &Client) -> Client {
        client.with_token(Some(self.task_token.clone()))
    }
}

/// The outcome of a [`SpawnOrder`], sent as `spawn_ack`.
#[derive(Debug, Clone, PartialEq)]
pub struct SpawnOutcome {
    /// The result; `{}` defers to the result the sub-agent posted.
    pub value: Value,
    /// Whether it succeeded.
    pub ok: bool,
    /// An error: the spawn fails with it.
    pub error: Option<String>,
}

impl SpawnOutcome {
    /// Succeeded with `value`.
    pub fn value(value: Value) -> Self {
        Self {
            value,
            ok: true,
            error: None,
        }
    }

    /// The result is what the sub-agent posted to `POST /v1/worker/result`.
    pub fn deferred() -> Self {
        Self::value(Value::Object(serde_json::Map::new()))
    }

    /// Failed with `error`.
    pub fn failed(error: impl Into<String>) -> Self {
        Self {
            value: Value::Null,
            ok: false,
            error: Some(error.into()),
        }
    }
}

/// What an operator does with each message. Every method runs in a task of
/// its own, so a long spawn does not hold up the next ask; the reply is sent
/// for you when it returns.
pub trait OperatorHandler: Send + Sync + 'static {
    /// Answer a worker's question (or triage an interaction).
    fn ask(&self, ask: Ask) -> impl Future<Output = Value> + Send;
    /// Vet a spawn before it runs.
    fn hook_before(&self, hook: Hook) -> impl Future<Output = HookDecision> + Send;
    /// Run a spawn.
    fn spawn(&self, order: SpawnOrder) -> impl Future<Output = SpawnOutcome> + Send;
    /// The server refused something this connection sent (an `error` frame).
    fn on_error(&self, _req_id: Option<&str>, _code: &str, _message: &str) {}
    /// A connection was made (`hello`), with the req_ids the server will send again.
    fn on_connect(&self, _pending: &[String]) {}
}

/// How [`Operator::run`] ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stopped {
    /// Another connection for the session replaced this one (close 4000).
    Replaced,
}

/// An operator of one session: connects, dispatches, reconnects.
#[derive(Debug, Clone)]
pub struct Operator {
    /// The HTTP stack: server, token, TLS configuration.
    client: Client,
    ws_url: String,
    first_backoff: Duration,
    max_backoff: Duration,
}

/// Replies made, by req_id (bounded), and handlers still running.
#[derive(Default)]
struct Memory {
    running: HashSet<String>,
    replies: HashMap<String, String>,
    order: VecDeque<String>,
}

impl Memory {
    fn remember(&mut self, req_id: String, reply: String) {
        self.running.remove(&req_id);
        if self.replies.insert(req_id.clone(), reply).is_none() {
            self.order.push_back(req_id);
        }
        while self.order.len() > REMEMBERED_REPLIES {
            if let Some(old) = self.order.pop_front() {
                self.replies.remove(&old);
            }
        }
    }
}

/// `base_url` as the `http(s)://` URL a [`Client`] takes: `ws://` and
/// `wss://` stand for `http://` and `https://`.
fn http_base(base_url: &str) -> String {
    let trimmed = base_url.trim();
    if let Some(rest) = trimmed.strip_prefix("ws://") {
        format!("http://{rest}")
    } else if let Some(rest) = trimmed.strip_prefix("wss://") {
        format!("https://{rest}")
    } else {
        trimmed.to_owned()
    }
}

/// The WebSocket URL of `session_id`'s operator on the server at `base`
/// (a [`Client::base_url`], `http(s)://...`).
fn ws_url(base: &str, session_id: &str) -> String {
    let base = if let Some(rest) = base.strip_prefix("https://") {
        format!("wss://{rest}")
    } else {
        format!("ws://{}", base.strip_prefix("http://").unwrap_or(base))
    };
    format!("{base}/v1/operators/{}/ws", segment(session_id))
}

impl Operator {
    /// An operator of `session_id` on the server at `base_url`, with an
    /// operator `token`, and the default [`ConnectOptions`].
    ///
    /// # Errors
    /// [`OperatorError::InvalidUrl`] for anything but `http(s)://` (or
    /// `ws(s)://`), and for plain `http://` beyond loopback.
    pub fn new(base_url: &str, token: &str, session_id: &str) -> Result<Self, OperatorError> {
        Self::with_options(base_url, token, session_id, &ConnectOptions::default())
    }

    /// [`Operator::new`] with `options`: the CA to trust over `https://`,
    /// and whether plain `http://` may go beyond loopback.
    ///
    /// # Errors
    /// As [`Operator::new`], and when the CA certificate is not PEM.
    pub fn with_options(
        base_url: &str,
        token: &str,
        session_id: &str,
        options: &ConnectOptions,
    ) -> Result<Self, OperatorError> {
        let client = Client::with_options(&http_base(base_url), Some(token.to_owned()), options)
            .map_err(|e| OperatorError::InvalidUrl {
                url: base_url.to_owned(),
                reason: match e {
                    Error::InvalidUrl { reason, .. } => reason,
                    other => other.to_string(),
                },
            })?;
        Ok(Self::from_client(&client, session_id))
    }

    /// An operator of `session_id` over `client`: its server, its (operator)
    /// token and its TLS configuration. The client's connection pool is
    /// shared, so [`Operator::client`] can serve the sub-agents' results.
    pub fn from_client(client: &Client, session_id: &str) -> Self {
        Self {
            client: client.clone(),
            ws_url: ws_url(client.base_url(), session_id),
            first_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_secs(10),
        }
    }

    /// The operator's HTTP client (with the operator's token); see
    /// [`SpawnOrder::sub_agent`].
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// Reconnect after `first`, doubling up to `max`.
    pub fn with_backoff(mut self, first: Duration, max: Duration) -> Self {
        self.first_backoff = first;
        self.max_backoff = max.max(first);
        self
    }

    /// Serve the session until replaced by another connection, reconnecting
    /// with backoff whenever the connection drops.
    ///
    /// # Errors
    /// [`OperatorError::Refused`] when the server refuses the token; other
    /// failures are retried.
    pub async fn run<H: OperatorHandler>(&self, handler: Arc<H>) -> Result<Stopped, OperatorError> {
        let memory = Arc::new(Mutex::new(Memory::default()));
        let (reply_tx, mut reply_rx) = mpsc::unbounded_channel::<String>();
        let mut backoff = Backoff::new(self.first_backoff, self.max_backoff);
        loop {
            let started = tokio::time::Instant::now();
            match self
                .connection(&handler, &memory, &reply_tx, &mut reply_rx)
                .await
            {
                Ok(Some(stopped)) => return Ok(stopped),
                // Up and dropped: from the first delay again, unless it
                // dropped at once (a server that accepts and closes).
                Ok(None) => backoff.reset_if_lasted(started.elapsed()),
                Err(e @ OperatorError::Refused { .. }) => return Err(e),
                Err(_) => {}
            }
            tokio::time::sleep(backoff.next_delay()).await;
        }
    }

    /// One connection, until it ends. `Ok(None)`: it was up and dropped.
    async fn connection<H: OperatorHandler>(
        &self,
        handler: &Arc<H>,
        memory: &Arc<Mutex<Memory>>,
        reply_tx: &mpsc::UnboundedSender<String>,
        reply_rx: &mut mpsc::UnboundedReceiver<String>,
    ) -> Result<Option<Stopped>, OperatorError> {
        let mut request = self.ws_url.as_str().into_client_request()?;
        if let Some(token) = self.client.token() {
            let bearer =
                format!("Bearer {token}")
                    .parse()
                    .map_err(|_| OperatorError::InvalidUrl {
                        url: self.ws_url.clone(),
                        reason: "the token is not a valid header value".into(),
                    })?;
            request.headers_mut().insert("authorization", bearer);
        }
        let tls = self
            .ws_url
            .starts_with("wss://")
            .then(|| tokio_tungstenite::Connector::Rustls(Arc::clone(self.client.tls())));
        let handshake =
            tokio_tungstenite::connect_async_tls_with_config(request, Some(ws_config()), true, tls);
        // A server that takes the connection and never finishes the
        // handshake is a failed attempt, tried again after the backoff.
        let Ok(handshake) = tokio::time::timeout(HANDSHAKE_TIMEOUT, handshake).await else {
            return Err(OperatorError::WebSocket(
                tokio_tungstenite::tungstenite::Error::Io(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    format!(
                        "no WebSocket handshake within {} s",
                        HANDSHAKE_TIMEOUT.as_secs()
                    ),
                )),
            ));
        };
        let (mut ws, _) = match handshake {
            Ok(ok) => ok,
            Err(tokio_tungstenite::tungstenite::Error::Http(resp))
                if matches!(resp.status().as_u16(), 401 | 403) =>
            {
                let status = resp.status().as_u16();
                let body = resp.body().as_deref().unwrap_or_default();
                return Err(OperatorError::Refused {
                    status,
                    error: Box::new(api_error(status, body)),
                });
            }
            Err(e) => return Err(e.into()),
        };
        let silence = tokio::time::sleep(SILENCE);
        tokio::pin!(silence);
        loop {
            tokio::select! {
                // The server pings every 15 s: a connection silent for longer
                // than several pings is dead (a peer gone without a FIN).
                () = &mut silence => return Ok(None),
                reply = reply_rx.recv() => {
                    let Some(reply) = reply else { return Ok(None) };
                    if ws.send(Message::Text(reply.clone().into())).await.is_err() {
                        // Sent again when the server re-sends the message.
                        return Ok(None);
                    }
                }
                frame = ws.next() => {
                    let message = match frame {
                        Some(Ok(message)) => message,
                        Some(Err(_)) | None => return Ok(None),
                    };
                    silence.as_mut().reset(tokio::time::Instant::now() + SILENCE);
                    match message {
                        Message::Text(text) => {
                            let Ok(msg) = serde_json::from_str::<ServerMsg>(text.as_str()) else {
                                continue;
                            };
                            dispatch(handler, memory, reply_tx, msg);
                        }
                        Message::Close(frame) => {
                            if frame.is_some_and(|f| f.code == CloseCode::Library(4000)) {
                                return Ok(Some(Stopped::Replaced));
                            }
                            return Ok(None);
                        }
                        _ => {}
                    }
                }
            }
        }
    }
}

/// tungstenite zeroes its whole read buffer on every read: 16 KiB rather
/// than the 128 KiB default keeps a small frame cheap.
fn ws_config() -> WebSocketConfig {
    WebSocketConfig::default().read_buffer_size(16 * 1024)
}

fn lock(m: &Mutex<Memory>) -> std::sync::MutexGuard<'_, Memory> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Start the handler for `msg`, unless its req_id is running or answered.
fn dispatch<H: OperatorHandler>(
    handler: &Arc<H>,
    memory: &Arc<Mutex<Memory>>,
    reply_tx: &mpsc::UnboundedSender<String>,
    msg: ServerMsg,
) {
    let req_id = match &msg {
        ServerMsg::Hello { pending, .. } => {
            handler.on_connect(pending);
            return;
        }
        ServerMsg::Error {
            req_id,
            code,
            message,
        } => {
            handler.on_error(req_id.as_deref(), code, message);
            return;
        }
        ServerMsg::Ask { req_id, .. }
        | ServerMsg::HookBefore { req_id, .. }
        | ServerMsg::Spawn { req_id, .. } => req_id.clone(),
    };
    {
        let mut mem = lock(memory);
        if let Some(reply) = mem.replies.get(&req_id) {
            let _ = reply_tx.send(reply.clone());
            return;
        }
        if !mem.running.insert(req_id.clone()) {
            return;
        }
    }
    let (handler, memory, reply_tx) = (Arc::clone(handler), Arc::clone(memory), reply_tx.clone());
    tokio::spawn(async move {
        let reply = match msg {
            ServerMsg::Ask { req_id, question } => {
                let value = handler.ask(Ask {
                    req_id: req_id.clone(),
                    question,
                });
                ClientMsg::Answer {
                    req_id,
                    value: value.await,
                }
            }
            ServerMsg::HookBefore { req_id, spawn } => {
                let decision = handler
                    .hook_before(Hook {
                        req_id: req_id.clone(),
                        spawn,
                    })
                    .await;
                ClientMsg::HookAck {
                    req_id,
                    ok: decision == HookDecision::Allow,
                    reason: match decision {
                        HookDecision::Allow => None,
                        HookDecision::Reject(reason) => Some(reason),
                    },
                }
            }
            ServerMsg::Spawn {
                req_id,
                task_id,
                task_token,
                spawn,
            } => {
                let outcome = handler
                    .spawn(SpawnOrder {
                        req_id: req_id.clone(),
                        task_id,
                        task_token,
                        spawn,
                    })
                    .await;
                ClientMsg::SpawnAck {
                    req_id,
                    value: outcome.value,
                    ok: outcome.ok,
                    error: outcome.error,
                }
            }
            ServerMsg::Hello { .. } | ServerMsg::Error { .. } => return,
        };
        let text = serde_json::to_string(&reply).unwrap_or_default();
        lock(&memory).remember(reply.req_id().to_owned(), text.clone());
        let _ = reply_tx.send(text);
    });
}

/// The worker's side of a session: questions and spawns for its operator.
#[derive(Debug, Clone)]
pub struct Session {
    client: Client,
    session_id: String,
}

impl Session {
    /// Session `session_id` on `client`'s server, with its (worker) token,
    /// over its connection pool.
    pub fn new(client: &Client, session_id: &str) -> Self {
        Self {
            client: client.clone(),
            session_id: session_id.to_owned(),
        }
    }

    /// `POST /v1/sessions/{sid}/ask`: the operator's answer, or a person's
    /// when the operator is gone or late.
    ///
    /// # Errors
    /// 504 `timeout` when nobody answered within `timeout`, ...
    pub async fn ask(
        &self,
        question: Value,
        timeout: Option<Duration>,
    ) -> crate::Result<AskResponse> {
        let body = AskRequest {
            question,
            timeout_s: timeout.map(|t| t.as_secs().max(1)),
        };
        let path = format!("/v1/sessions/{}/ask", segment(&self.session_id));
        self.client
            .call(
                Method::POST,
                &path,
                Some(&body),
                Some(call_timeout(timeout)),
            )
            .await
    }

    /// `POST /v1/sessions/{sid}/spawn`: hook, then spawn; the result.
    ///
    /// # Errors
    /// 403 `rejected_by_middleware`, 502 `spawn_failed`, 504 `timeout`, ...
    pub async fn spawn(
        &self,
        spawn: Value,
        timeout: Option<Duration>,
    ) -> crate::Result<SpawnResponse> {
        let body = SpawnRequest {
            spawn,
            timeout_s: timeout.map(|t| t.as_secs().max(1)),
        };
        let path = format!("/v1/sessions/{}/spawn", segment(&self.session_id));
        self.client
            .call(
                Method::POST,
                &path,
                Some(&body),
                Some(call_timeout(timeout)),
            )
            .await
    }
}

/// How long a session call may take: its `timeout` (an hour when none) and
/// some slack for the server to answer 504 first.
fn call_timeout(timeout: Option<Duration>) -> Duration {
    timeout.unwrap_or(DEFAULT_CALL).saturating_add(CALL_SLACK)
}

/// `POST /v1/worker/result`, as a sub-agent does with its task token (a
/// [`Client`] with that token: [`SpawnOrder::sub_agent`], or
/// [`Client::with_token`], shares the pool of a client made once).
/// The same as [`Client::post_worker_result`].
///
/// # Errors
/// 409 `task_finished` once the task is finished, 403 for another task's id, ...
pub async fn post_worker_result(client: &Client, result: &WorkerResult) -> crate::Result<Task> {
    client.post_worker_result(result).await
}
