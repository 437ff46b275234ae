//! The relay between one MCP client (downstream) and one MCP server
//! (upstream): JSON-RPC messages passed on as they came, except
//!
//! - `tools/call`, which goes through lev's gate first ([`super::gate`]) and
//!   reaches the upstream only after a decision that verified, with the
//!   approved (perhaps edited, signed) arguments; a denial is answered to the
//!   client as a tool error, the upstream never called;
//! - `tools/list` results, read (never changed) for the tools' annotations;
//! - `initialize`'s params, read for the client's capabilities;
//! - the ids of the server's requests to the client (sampling, roots,
//!   elicitation), remapped so that a request the relay makes itself can
//!   never collide with one of the server's; responses go back to the side
//!   that asked.
//!
//! A client request forwarded upstream is answered by the upstream's
//! response, or by an error when the upstream exits or does not answer in
//! time: never by a success the upstream did not send.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio::task::AbortHandle;

use super::gate;
use super::message::{self, Kind, Message, code, id_key};
use super::transport::{Incoming, Link};

/// How long cancelling the questions still waiting may take when the client
/// goes away.
const CANCEL_WITHIN: Duration = Duration::from_secs(5);

/// The tool annotations an upstream declared in `tools/list`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Hints {
    /// `readOnlyHint`.
    pub read_only: Option<bool>,
    /// `destructiveHint`.
    pub destructive: Option<bool>,
}

/// What is relayed now.
#[derive(Debug, Default)]
struct State {
    /// Client requests sent upstream and not yet answered, by id.
    forwarded: HashMap<String, Forwarded>,
    /// `tools/call`s waiting for lev, by id.
    gating: HashMap<String, Gating>,
    /// How many progress notifications lev sent on a waiting call's token,
    /// by the call's id: the upstream's own progress then counts on from
    /// there, so that what the client sees keeps increasing.
    progress_lead: HashMap<String, u64>,
    /// The server's requests to the client: the relay's id -> the server's.
    server_requests: HashMap<String, Value>,
    next_server_request: u64,
    /// The relay's own requests to the client (elicitations), by id.
    own_requests: HashMap<String, tokio::sync::oneshot::Sender<Value>>,
    /// Each tool's annotations, from the upstream's `tools/list` results.
    tools: HashMap<String, Hints>,
    /// Why the upstream is gone, once it is.
    upstream_gone: Option<String>,
}

#[derive(Debug)]
struct Forwarded {
    method: String,
    /// The upstream's deadline for it.
    timer: Option<AbortHandle>,
    /// Its progress token and the lead lev's own progress took on it.
    progress: Option<(String, u64)>,
}

#[derive(Debug)]
struct Gating {
    task: AbortHandle,
    /// The lev interaction it waits for, once there is one.
    interaction: Arc<Mutex<Option<String>>>,
}

/// The relay's side of everything: shared with the gate's tasks.
#[derive(Debug)]
pub struct Shared {
    pub(super) config: Arc<super::Config>,
    state: Mutex<State>,
    up: mpsc::UnboundedSender<Message>,
    down: mpsc::UnboundedSender<Message>,
    /// The MCP session id, when a transport has one.
    pub(super) mcp_session: Arc<Mutex<Option<String>>>,
    /// The client declared `elicitation` in `initialize`.
    client_elicitation: Mutex<bool>,
    /// The server's keys, fetched at the first call and pinned.
    pub(super) keys: tokio::sync::OnceCell<lev_approval::TrustedKeys>,
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Send `message` to the client. A client gone is the relay's end, seen
    /// by its loop.
    pub(super) fn to_client(&self, message: Message) {
        let _ = self.down.send(message);
    }

    /// The lev session of the calls: `--session`, else the MCP session,
    /// else the one made for this process.
    pub(super) fn session(&self) -> String {
        if let Some(session) = &self.config.session {
            return session.clone();
        }
        let mcp = self
            .mcp_session
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        match mcp {
            Some(mcp) => super::session_of(&mcp),
            None => self.config.process_session.clone(),
        }
    }

    /// Send the client a request of the relay's own: its id, and its
    /// response once it comes.
    pub(super) fn ask_client(
        &self,
        method: &str,
        params: Value,
    ) -> (Value, tokio::sync::oneshot::Receiver<Value>) {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let id = {
            let mut state = self.lock();
            state.next_server_request += 1;
            let id = json!(state.next_server_request);
            state.own_requests.insert(id_key(&id), tx);
            id
        };
        self.to_client(Message::new(json!({
            "jsonrpc": "2.0",
            "id": id,
            "method": method,
            "params": params,
        })));
        (id, rx)
    }

    /// Withdraw a request of the relay's own the client has not answered.
    pub(super) fn withdraw_client_request(&self, id: &Value, reason: &str) {
        if self.lock().own_requests.remove(&id_key(id)).is_some() {
            self.to_client(message::notification(
                "notifications/cancelled",
                json!({"requestId": id, "reason": reason}),
            ));
        }
    }

    /// Whether the client declared `elicitation` in `initialize`.
    pub(super) fn client_elicits(&self) -> bool {
        *self
            .client_elicitation
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The annotations of `tool`, when the upstream listed it.
    pub(super) fn hints(&self, tool: &str) -> Option<Hints> {
        self.lock().tools.get(tool).copied()
    }

    /// Send the client's request `message` upstream and remember it until
    /// the upstream answers; `method` is what it asked.
    pub(super) fn forward(self: &Arc<Self>, message: Message, method: &str) {
        self.forward_after(message, method, 0);
    }

    /// [`Self::forward`], after lev sent `lead` progress notifications on
    /// the request's token.
    fn forward_after(self: &Arc<Self>, message: Message, method: &str, lead: u64) {
        let progress = message
            .progress_token()
            .filter(|_| lead > 0)
            .map(|token| (id_key(token), lead));
        let Some(id) = message.id().cloned() else {
            return;
        };
        let key = id_key(&id);
        let mut state = self.lock();
        if let Some(why) = &state.upstream_gone {
            let why = why.clone();
            drop(state);
            self.to_client(upstream_error(id, method, &why));
            return;
        }
        let timer = self.config.upstream_timeout.map(|limit| {
            let shared = Arc::clone(self);
            let key = key.clone();
            tokio::spawn(async move {
                tokio::time::sleep(limit).await;
                shared.upstream_missed(&key, limit);
            })
            .abort_handle()
        });
        if let Some(old) = state.forwarded.insert(
            key,
            Forwarded {
                method: method.to_owned(),
                timer,
                progress,
            },
        ) {
            // The client reused an id still in flight: the older one's
            // answer is the upstream's to give, and goes to the client.
            if let Some(timer) = old.timer {
                timer.abort();
            }
        }
        drop(state);
        if self.up.send(message).is_err() {
            self.upstream_closed("the upstream connection is closed".into());
        }
    }

    /// The upstream did not answer `key` within `limit`: an error to the
    /// client, and a cancel upstream.
    fn upstream_missed(&self, key: &str, limit: Duration) {
        let Some(forwarded) = self.lock().forwarded.remove(key) else {
            return;
        };
        let Ok(id) = serde_json::from_str::<Value>(key) else {
            return;
        };
        let why = format!("the upstream did not answer within {} s", limit.as_secs());
        self.to_client(upstream_error(id.clone(), &forwarded.method, &why));
        let _ = self.up.send(message::notification(
            "notifications/cancelled",
            json!({"requestId": id, "reason": why}),
        ));
    }

    /// The upstream is gone: every request it was to answer gets an error,
    /// and so does every request after.
    fn upstream_closed(&self, why: String) {
        let mut state = self.lock();
        if state.upstream_gone.is_some() {
            return;
        }
        state.upstream_gone = Some(why.clone());
        let forwarded: Vec<(String, Forwarded)> = state.forwarded.drain().collect();
        drop(state);
        for (key, forwarded) in forwarded {
            if let Some(timer) = forwarded.timer {
                timer.abort();
            }
            if let Ok(id) = serde_json::from_str::<Value>(&key) {
                self.to_client(upstream_error(id, &forwarded.method, &why));
            }
        }
    }

    /// A message from the client.
    fn on_client(self: &Arc<Self>, mut message: Message) {
        match message.kind() {
            Kind::Request => {
                let method = message.method().unwrap_or_default().to_owned();
                match method.as_str() {
                    "tools/call" => self.gate(message),
                    "initialize" => {
                        let elicitation = message
                            .params()
                            .and_then(|p| p.get("capabilities"))
                            .and_then(|c| c.get("elicitation"))
                            .is_some();
                        *self
                            .client_elicitation
                            .lock()
                            .unwrap_or_else(std::sync::PoisonError::into_inner) = elicitation;
                        self.forward(message, &method);
                    }
                    _ => self.forward(message, &method),
                }
            }
            Kind::Notification => {
                if message.method() == Some("notifications/progress") {
                    self.count_on(&mut message);
                }
                if message.method() == Some("notifications/cancelled") {
                    let id = message
                        .params()
                        .and_then(|p| p.get("requestId"))
                        .cloned()
                        .unwrap_or(Value::Null);
                    if self.cancel_gating(&id) {
                        // The upstream never saw the call.
                        return;
                    }
                    if let Some(forwarded) = self.lock().forwarded.remove(&id_key(&id))
                        && let Some(timer) = forwarded.timer
                    {
                        timer.abort();
                    }
                }
                let _ = self.up.send(message);
            }
            Kind::Response => {
                // The client's answer to a server's request: its own id back.
                let Some(id) = message.id().cloned() else {
                    return;
                };
                let own = self.lock().own_requests.remove(&id_key(&id));
                if let Some(own) = own {
                    let _ = own.send(message.value().clone());
                    return;
                }
                let original = self.lock().server_requests.remove(&id_key(&id));
                if let Some(original) = original {
                    message.set_id(original);
                    let _ = self.up.send(message);
                }
            }
            Kind::Invalid => {
                let id = message.id().cloned().unwrap_or(Value::Null);
                self.to_client(message::error(
                    id,
                    code::INVALID_REQUEST,
                    "not a JSON-RPC 2.0 request, notification or response",
                ));
            }
        }
    }

    /// A message from the upstream.
    fn on_upstream(&self, mut message: Message) {
        match message.kind() {
            Kind::Response => {
                let Some(id) = message.id() else {
                    // An error without an id: nothing to route it to.
                    return;
                };
                let Some(forwarded) = self.lock().forwarded.remove(&id_key(id)) else {
                    // Answered already (timed out, cancelled): dropped.
                    return;
                };
                if let Some(timer) = forwarded.timer {
                    timer.abort();
                }
                if forwarded.method == "tools/list" {
                    self.learn_tools(message.value());
                }
                self.to_client(message);
            }
            Kind::Request => {
                let Some(original) = message.id().cloned() else {
                    return;
                };
                let mine = {
                    let mut state = self.lock();
                    state.next_server_request += 1;
                    let mine = json!(state.next_server_request);
                    state.server_requests.insert(id_key(&mine), original);
                    mine
                };
                message.set_id(mine);
                self.to_client(message);
            }
            Kind::Notification => {
                if message.method() == Some("notifications/progress") {
                    self.count_on(&mut message);
                }
                if message.method() == Some("notifications/cancelled")
                    && let Some(theirs) = message.params().and_then(|p| p.get("requestId")).cloned()
                {
                    // The server withdrew a request it made: under the id
                    // the client knows.
                    let mine = {
                        let mut state = self.lock();
                        let found = state
                            .server_requests
                            .iter()
                            .find(|(_, original)| **original == theirs)
                            .map(|(mine, _)| mine.clone());
                        if let Some(mine) = &found {
                            state.server_requests.remove(mine);
                        }
                        found
                    };
                    if let Some(mine) = mine.and_then(|m| serde_json::from_str::<Value>(&m).ok())
                        && let Some(params) = message
                            .value_mut()
                            .get_mut("params")
                            .and_then(Value::as_object_mut)
                    {
                        params.insert("requestId".into(), mine);
                    }
                }
                self.to_client(message);
            }
            Kind::Invalid => {}
        }
    }

    /// Remember each listed tool's annotations.
    fn learn_tools(&self, response: &Value) {
        let Some(tools) = response.pointer("/result/tools").and_then(Value::as_array) else {
            return;
        };
        let mut state = self.lock();
        for tool in tools {
            let Some(name) = tool.get("name").and_then(Value::as_str) else {
                continue;
            };
            let annotations = tool.get("annotations");
            let hint = |key: &str| {
                annotations
                    .and_then(|a| a.get(key))
                    .and_then(Value::as_bool)
            };
            state.tools.insert(
                name.to_owned(),
                Hints {
                    read_only: hint("readOnlyHint"),
                    destructive: hint("destructiveHint"),
                },
            );
        }
    }

    /// Start deciding a `tools/call` in lev, on a task of its own.
    fn gate(self: &Arc<Self>, message: Message) {
        let Some(id) = message.id().cloned() else {
            return;
        };
        let gone = self.lock().upstream_gone.clone();
        if let Some(why) = gone {
            // Nobody is asked about a call that cannot run.
            self.to_client(upstream_error(id, "tools/call", &why));
            return;
        }
        let interaction = Arc::new(Mutex::new(None));
        let shared = Arc::clone(self);
        let slot = Arc::clone(&interaction);
        // Registered before the task runs, so that it sees itself.
        let mut state = self.lock();
        let task = tokio::spawn(async move { gate::call(shared, message, slot).await });
        state.gating.insert(
            id_key(&id),
            Gating {
                task: task.abort_handle(),
                interaction,
            },
        );
    }

    /// Lev told the client, on the token of the call `id` that waits for
    /// it, progress `sent` (1, 2, ...).
    pub(super) fn progress_sent(&self, id: &Value, sent: u64) {
        let key = id_key(id);
        let mut state = self.lock();
        if state.gating.contains_key(&key) {
            state.progress_lead.insert(key, sent);
        }
    }

    /// An upstream progress notification on a call lev sent progress for
    /// first: counted on from lev's last (`lead + 1 + progress`, and its
    /// total likewise), as MCP wants progress to increase on a token.
    fn count_on(&self, message: &mut Message) {
        let Some(token) = message
            .params()
            .and_then(|p| p.get("progressToken"))
            .map(id_key)
        else {
            return;
        };
        let lead = self.lock().forwarded.values().find_map(|f| {
            f.progress
                .as_ref()
                .filter(|(t, _)| *t == token)
                .map(|(_, lead)| *lead)
        });
        let Some(lead) = lead else {
            return;
        };
        let shift = |v: &mut Value| {
            if let Some(n) = v.as_f64() {
                #[allow(clippy::cast_precision_loss)]
                let shifted = n + (lead + 1) as f64;
                if let Some(number) = serde_json::Number::from_f64(shifted) {
                    *v = if shifted.fract() == 0.0 && shifted < 9.0e15 {
                        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
                        Value::from(shifted as u64)
                    } else {
                        Value::Number(number)
                    };
                }
            }
        };
        if let Some(params) = message
            .value_mut()
            .get_mut("params")
            .and_then(Value::as_object_mut)
        {
            for field in ["progress", "total"] {
                if let Some(v) = params.get_mut(field) {
                    shift(v);
                }
            }
        }
    }

    /// The gate's task for `id` is done: whether the client still waits
    /// for it (it did not cancel it), with the progress lev sent on it.
    /// Only then is it forwarded or answered.
    fn gated(&self, id: &Value) -> Option<u64> {
        let key = id_key(id);
        let mut state = self.lock();
        let lead = state.progress_lead.remove(&key).unwrap_or(0);
        state.gating.remove(&key).map(|_| lead)
    }

    /// Forward a `tools/call` lev approved (with its approved arguments),
    /// unless the client cancelled it meanwhile.
    pub(super) fn forward_approved(self: &Arc<Self>, message: Message) {
        if let Some(lead) = message.id().and_then(|id| self.gated(id)) {
            self.forward_after(message, "tools/call", lead);
        }
    }

    /// Answer a `tools/call` lev did not approve, unless the client
    /// cancelled it meanwhile.
    pub(super) fn answer_gated(&self, id: &Value, answer: Message) {
        if self.gated(id).is_some() {
            self.to_client(answer);
        }
    }

    /// The client cancelled `id`: when it still waits for lev, stop waiting
    /// and take the question off people's lists. Whether it was waiting.
    fn cancel_gating(&self, id: &Value) -> bool {
        let gating = {
            let mut state = self.lock();
            state.progress_lead.remove(&id_key(id));
            state.gating.remove(&id_key(id))
        };
        let Some(gating) = gating else {
            return false;
        };
        gating.task.abort();
        let interaction = gating
            .interaction
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        if let Some(interaction) = interaction {
            let client = self.config.client.clone();
            tokio::spawn(async move {
                let _ = tokio::time::timeout(CANCEL_WITHIN, client.cancel(&interaction)).await;
            });
        }
        true
    }

    /// The client is gone: cancel every question still waiting, all at once
    /// and for at most [`CANCEL_WITHIN`].
    async fn cancel_all(&self) {
        let (gating, forwarded) = {
            let mut state = self.lock();
            state.progress_lead.clear();
            let gating: Vec<Gating> = state.gating.drain().map(|(_, g)| g).collect();
            let forwarded: Vec<Forwarded> = state.forwarded.drain().map(|(_, f)| f).collect();
            (gating, forwarded)
        };
        // Nobody is left to tell that the upstream was late.
        for timer in forwarded.into_iter().filter_map(|f| f.timer) {
            timer.abort();
        }
        let mut ids = Vec::new();
        for gating in gating {
            gating.task.abort();
            if let Some(id) = gating
                .interaction
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .take()
            {
                ids.push(id);
            }
        }
        let client = &self.config.client;
        let all = futures_util::future::join_all(ids.iter().map(|id| client.cancel(id)));
        let _ = tokio::time::timeout(CANCEL_WITHIN, all).await;
    }
}

/// The error a client gets for `method` when the upstream cannot answer.
fn upstream_error(id: Value, method: &str, why: &str) -> Message {
    message::error(
        id,
        code::INTERNAL_ERROR,
        format!("lev mcp proxy: {method} got no answer: {why}"),
    )
}

/// Relay between `client` and `upstream` until the client goes away (or,
/// for an HTTP client, its session ends).
pub async fn run(
    config: Arc<super::Config>,
    client: Link,
    upstream: Link,
    mcp_session: Arc<Mutex<Option<String>>>,
) {
    let Link {
        tx: down,
        rx: mut from_client,
    } = client;
    let Link {
        tx: up,
        rx: mut from_upstream,
    } = upstream;
    let shared = Arc::new(Shared {
        config,
        state: Mutex::new(State::default()),
        up,
        down,
        mcp_session,
        client_elicitation: Mutex::new(false),
        keys: tokio::sync::OnceCell::new(),
    });
    let mut upstream_open = true;
    loop {
        tokio::select! {
            incoming = from_client.recv() => match incoming {
                Some(Incoming::Message(message)) => shared.on_client(message),
                Some(Incoming::Unparsable(why)) => shared.to_client(message::error(
                    Value::Null,
                    code::PARSE_ERROR,
                    format!("not JSON: {why}"),
                )),
                Some(Incoming::Closed(_)) | None => break,
            },
            incoming = from_upstream.recv(), if upstream_open => match incoming {
                Some(Incoming::Message(message)) => shared.on_upstream(message),
                Some(Incoming::Unparsable(why)) => {
                    eprintln!("lev mcp proxy: the upstream wrote a line that is not JSON ({why}); dropped");
                }
                Some(Incoming::Closed(why)) => {
                    eprintln!("lev mcp proxy: {why}");
                    shared.upstream_closed(why);
                    upstream_open = false;
                }
                None => {
                    shared.upstream_closed("the upstream connection closed".into());
                    upstream_open = false;
                }
            },
        }
    }
    shared.cancel_all().await;
}
