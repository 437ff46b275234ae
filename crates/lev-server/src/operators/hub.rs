//! The operators' hub: per session, the connected operator (at most one) and
//! the messages waiting for its reply, by `req_id`.
//!
//! A request that needs the operator ([`OperatorHub::submit`]) registers a
//! pending entry and gets a [`Ticket`]; the entry's frame goes to the
//! operator now, or to the next one that connects. A reply resolves the entry
//! exactly once: the entry leaves the map under the hub's lock and its
//! oneshot carries the reply to the ticket. A ticket that stops waiting (an
//! escalation, the caller's deadline, a dropped request) withdraws its entry
//! under the same lock, so a reply and a withdrawal never both win.
//!
//! Pending entries live in memory only: a restart forgets them, and the
//! workers waiting on them lose their HTTP requests with it.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use axum::extract::ws::Utf8Bytes;
use lev_protocol::{ClientMsg, ServerMsg};
use tokio::sync::{mpsc, oneshot, watch};
use tokio::time::Instant;

use super::OperatorSettings;

/// How many resolved req_ids a session remembers, to tell a late reply
/// (`already_resolved`) from a made-up one (`unknown_req_id`).
const RESOLVED_MEMORY: usize = 4096;

/// What a pending entry waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// An `ask`, replied to by `answer`.
    Ask,
    /// A `hook_before`, replied to by `hook_ack`.
    Hook,
    /// A `spawn`, replied to by `spawn_ack`.
    Spawn,
}

impl Kind {
    /// The reply type this kind expects.
    pub fn reply_type(self) -> &'static str {
        match self {
            Self::Ask => "answer",
            Self::Hook => "hook_ack",
            Self::Spawn => "spawn_ack",
        }
    }

    fn sent_type(self) -> &'static str {
        match self {
            Self::Ask => "ask",
            Self::Hook => "hook_before",
            Self::Spawn => "spawn",
        }
    }
}

/// An operator's reply, with the operator's token name.
#[derive(Debug, Clone)]
pub struct Reply {
    /// The reply.
    pub msg: ClientMsg,
    /// The operator's token name.
    pub by: String,
}

/// What goes out on a connection.
#[derive(Debug, Clone)]
pub enum Outbound {
    /// A text frame.
    Text(Utf8Bytes),
    /// Close with this code and reason.
    Close(u16, &'static str),
}

/// Why a reply was refused: the `error` frame's code and message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// `unknown_req_id`, `already_resolved`, `wrong_reply_kind`.
    pub code: &'static str,
    /// For a person.
    pub message: String,
}

struct Entry {
    kind: Kind,
    frame: Utf8Bytes,
    sent_at: Option<Instant>,
    reply: oneshot::Sender<Reply>,
}

struct Conn {
    id: u64,
    out: mpsc::UnboundedSender<Outbound>,
    /// The operator's token name.
    operator: String,
}

struct Session {
    conn: Option<Conn>,
    /// Disconnected since (or, never connected, first needed since).
    since: Instant,
    ever_connected: bool,
    pending: BTreeMap<u64, Entry>,
    resolved: HashSet<u64>,
    resolved_order: VecDeque<u64>,
    /// Bumped whenever the connection changes or an entry is (re)sent.
    changed: watch::Sender<u64>,
}

impl Session {
    fn new() -> Self {
        Self {
            conn: None,
            since: Instant::now(),
            ever_connected: false,
            pending: BTreeMap::new(),
            resolved: HashSet::new(),
            resolved_order: VecDeque::new(),
            changed: watch::channel(0).0,
        }
    }

    fn remember_resolved(&mut self, n: u64) {
        if self.resolved.insert(n) {
            self.resolved_order.push_back(n);
        }
        while self.resolved_order.len() > RESOLVED_MEMORY {
            if let Some(old) = self.resolved_order.pop_front() {
                self.resolved.remove(&old);
            }
        }
    }

    fn bump(&self) {
        self.changed.send_modify(|g| *g = g.wrapping_add(1));
    }

    /// Nothing to remember: no operator ever, nothing pending.
    fn is_idle(&self) -> bool {
        self.conn.is_none() && !self.ever_connected && self.pending.is_empty()
    }
}

/// Every session's operator and pending messages.
pub struct OperatorHub {
    settings: OperatorSettings,
    sessions: Mutex<HashMap<String, Session>>,
    /// Makes req_ids of this process unlike those of an earlier one.
    boot: String,
    next_req: AtomicU64,
    next_conn: AtomicU64,
}

impl std::fmt::Debug for OperatorHub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OperatorHub")
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

/// How a [`Ticket::wait`] ended.
#[derive(Debug)]
pub enum Waited {
    /// The operator replied.
    Replied(Reply),
    /// The entry was handed to an operator for the first time (only when the
    /// ticket asked to hear of it); wait again for the reply.
    Sent,
    /// No operator was connected for the grace time; the entry is withdrawn.
    NoOperator,
    /// The connected operator did not reply within the reply timeout; the
    /// entry is withdrawn.
    ReplyTimeout,
    /// The caller's deadline passed; the entry is withdrawn.
    Deadline,
}

/// A registered pending entry. Dropping it withdraws the entry.
pub struct Ticket {
    hub: Arc<OperatorHub>,
    session_id: String,
    n: u64,
    req_id: String,
    kind: Kind,
    rx: oneshot::Receiver<Reply>,
    changed: watch::Receiver<u64>,
    report_sent: bool,
    done: bool,
}

impl std::fmt::Debug for Ticket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ticket")
            .field("session_id", &self.session_id)
            .field("req_id", &self.req_id)
            .finish_non_exhaustive()
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

fn frame(msg: &ServerMsg) -> Utf8Bytes {
    Utf8Bytes::from(serde_json::to_string(msg).unwrap_or_default())
}

impl OperatorHub {
    /// An empty hub.
    pub fn new(settings: OperatorSettings) -> Self {
        let mut random = [0u8; 4];
        let _ = getrandom::fill(&mut random);
        Self {
            settings,
            sessions: Mutex::new(HashMap::new()),
            boot: crate::ids::hex(&random),
            next_req: AtomicU64::new(1),
            next_conn: AtomicU64::new(1),
        }
    }

    /// The settings.
    pub fn settings(&self) -> &OperatorSettings {
        &self.settings
    }

    fn req_id(&self, n: u64) -> String {
        format!("rq_{}_{n}", self.boot)
    }

    fn parse_req_id(&self, req_id: &str) -> Option<u64> {
        let rest = req_id
            .strip_prefix("rq_")?
            .strip_prefix(self.boot.as_str())?;
        rest.strip_prefix('_')?.parse().ok()
    }

    /// Whether `session_id` has an operator connected now.
    pub fn is_connected(&self, session_id: &str) -> bool {
        lock(&self.sessions)
            .get(session_id)
            .is_some_and(|s| s.conn.is_some())
    }

    /// Register a message that expects a reply, and send it when an operator
    /// is connected. `make` builds the message from its req_id.
    pub fn submit(
        self: &Arc<Self>,
        session_id: &str,
        kind: Kind,
        make: impl FnOnce(String) -> ServerMsg,
    ) -> Ticket {
        let n = self.next_req.fetch_add(1, Ordering::Relaxed);
        let req_id = self.req_id(n);
        let text = frame(&make(req_id.clone()));
        let (tx, rx) = oneshot::channel();
        let mut sessions = lock(&self.sessions);
        let session = sessions
            .entry(session_id.to_owned())
            .or_insert_with(Session::new);
        let mut sent_at = None;
        if let Some(conn) = &session.conn
            && conn.out.send(Outbound::Text(text.clone())).is_ok()
        {
            sent_at = Some(Instant::now());
        }
        session.pending.insert(
            n,
            Entry {
                kind,
                frame: text,
                sent_at,
                reply: tx,
            },
        );
        let changed = session.changed.subscribe();
        drop(sessions);
        Ticket {
            hub: Arc::clone(self),
            session_id: session_id.to_owned(),
            n,
            req_id,
            kind,
            rx,
            changed,
            report_sent: false,
            done: false,
        }
    }

    /// A new operator connection for `session_id`: it replaces the one
    /// before (closed with 4000), gets `hello` with the pending req_ids, then
    /// every pending message again, in order.
    /// Returns the connection's id, its queue, and the token name of the
    /// operator it replaced, if any.
    pub fn connect(
        &self,
        session_id: &str,
        operator: &str,
    ) -> (u64, mpsc::UnboundedReceiver<Outbound>, Option<String>) {
        let id = self.next_conn.fetch_add(1, Ordering::Relaxed);
        let (out, rx) = mpsc::unbounded_channel();
        let mut sessions = lock(&self.sessions);
        let session = sessions
            .entry(session_id.to_owned())
            .or_insert_with(Session::new);
        let replaced = session.conn.take().map(|old| {
            let _ = old
                .out
                .send(Outbound::Close(4000, "replaced by a newer connection"));
            old.operator
        });
        let hello = ServerMsg::Hello {
            session_id: session_id.to_owned(),
            pending: session.pending.keys().map(|n| self.req_id(*n)).collect(),
        };
        let _ = out.send(Outbound::Text(frame(&hello)));
        let now = Instant::now();
        for entry in session.pending.values_mut() {
            let _ = out.send(Outbound::Text(entry.frame.clone()));
            entry.sent_at = Some(now);
        }
        session.conn = Some(Conn {
            id,
            out,
            operator: operator.to_owned(),
        });
        session.ever_connected = true;
        session.bump();
        (id, rx, replaced)
    }

    /// Connection `conn_id` of `session_id` ended. True when it was the
    /// session's operator (not one already replaced).
    pub fn disconnect(&self, session_id: &str, conn_id: u64) -> bool {
        let mut sessions = lock(&self.sessions);
        let Some(session) = sessions.get_mut(session_id) else {
            return false;
        };
        if session.conn.as_ref().is_none_or(|c| c.id != conn_id) {
            return false;
        }
        session.conn = None;
        session.since = Instant::now();
        session.bump();
        true
    }

    /// Resolve the entry a reply names, exactly once.
    ///
    /// # Errors
    /// The [`Refusal`] to send back; the entry is then untouched.
    pub fn resolve(&self, session_id: &str, msg: ClientMsg, by: &str) -> Result<(), Refusal> {
        let req_id = msg.req_id().to_owned();
        let unknown = || Refusal {
            code: "unknown_req_id",
            message: format!("no message of this session was sent with req_id {req_id:?}"),
        };
        let n = self.parse_req_id(&req_id).ok_or_else(unknown)?;
        let mut sessions = lock(&self.sessions);
        let session = sessions.get_mut(session_id).ok_or_else(unknown)?;
        let Some(entry) = session.pending.get(&n) else {
            return Err(if session.resolved.contains(&n) {
                Refusal {
                    code: "already_resolved",
                    message: format!(
                        "req_id {req_id:?} was already resolved (replied to, escalated to \
                         people, or given up by its caller); this reply changes nothing"
                    ),
                }
            } else {
                unknown()
            });
        };
        if entry.kind.reply_type() != msg.type_name() {
            return Err(Refusal {
                code: "wrong_reply_kind",
                message: format!(
                    "req_id {req_id:?} is a {} and expects a {} reply, found {}",
                    entry.kind.sent_type(),
                    entry.kind.reply_type(),
                    msg.type_name()
                ),
            });
        }
        let Some(entry) = session.pending.remove(&n) else {
            return Err(unknown());
        };
        session.remember_resolved(n);
        drop(sessions);
        // The waiter may be gone (its caller left): the reply still resolved it.
        let _ = entry.reply.send(Reply {
            msg,
            by: by.to_owned(),
        });
        Ok(())
    }

    /// Send a frame to the session's operator, if one is connected.
    pub fn send(&self, session_id: &str, msg: &ServerMsg) {
        let sessions = lock(&self.sessions);
        if let Some(conn) = sessions.get(session_id).and_then(|s| s.conn.as_ref()) {
            let _ = conn.out.send(Outbound::Text(frame(msg)));
        }
    }

    /// Withdraw entry `n`; true when it was still pending.
    fn withdraw(&self, session_id: &str, n: u64) -> bool {
        let mut sessions = lock(&self.sessions);
        let Some(session) = sessions.get_mut(session_id) else {
            return false;
        };
        let removed = session.pending.remove(&n).is_some();
        if removed {
            session.remember_resolved(n);
        }
        if session.is_idle() {
            sessions.remove(session_id);
        }
        removed
    }

    /// Entry `n`'s state: `None` when resolved, else (connected, sent_at, since).
    fn status(&self, session_id: &str, n: u64) -> Option<(bool, Option<Instant>, Instant)> {
        let sessions = lock(&self.sessions);
        let session = sessions.get(session_id)?;
        let entry = session.pending.get(&n)?;
        Some((session.conn.is_some(), entry.sent_at, session.since))
    }
}

impl Ticket {
    /// The req_id the operator sees.
    pub fn req_id(&self) -> &str {
        &self.req_id
    }

    /// Make the next [`Ticket::wait`] return [`Waited::Sent`] once the entry
    /// has reached an operator.
    pub fn report_sent(&mut self) {
        self.report_sent = true;
    }

    /// Wait for the reply, until the operator is gone past the grace time,
    /// late past the reply timeout (asks and hooks only: a spawn runs as long
    /// as it takes), or `deadline` passes.
    pub async fn wait(&mut self, deadline: Instant) -> Waited {
        let settings = self.hub.settings.clone();
        loop {
            if self.done {
                return Waited::Deadline;
            }
            let Some((connected, sent_at, since)) = self.hub.status(&self.session_id, self.n)
            else {
                return self.take_reply();
            };
            if self.report_sent && sent_at.is_some() {
                self.report_sent = false;
                return Waited::Sent;
            }
            let now = Instant::now();
            let escalate_at = match (connected, sent_at) {
                (true, Some(sent)) if self.kind != Kind::Spawn => sent
                    .checked_add(settings.reply_timeout)
                    .map(|at| (at, Waited::ReplyTimeout)),
                (true, _) => None,
                (false, _) => since
                    .checked_add(settings.grace)
                    .map(|at| (at, Waited::NoOperator)),
            };
            if now >= deadline {
                return self.give_up(Waited::Deadline);
            }
            let mut wake = deadline;
            if let Some((at, _)) = &escalate_at {
                if now >= *at {
                    let why = escalate_at.map_or(Waited::Deadline, |(_, w)| w);
                    return self.give_up(why);
                }
                wake = wake.min(*at);
            }
            tokio::select! {
                reply = &mut self.rx => {
                    self.done = true;
                    return match reply {
                        Ok(reply) => Waited::Replied(reply),
                        Err(_) => Waited::Deadline,
                    };
                }
                () = tokio::time::sleep_until(wake) => {}
                changed = self.changed.changed() => {
                    if changed.is_err() {
                        // The session's state was dropped with its last entry: look again.
                        tokio::time::sleep(Duration::from_millis(10)).await;
                    }
                }
            }
        }
    }

    fn take_reply(&mut self) -> Waited {
        self.done = true;
        match self.rx.try_recv() {
            Ok(reply) => Waited::Replied(reply),
            Err(_) => Waited::Deadline,
        }
    }

    /// Withdraw the entry, unless a reply won the race.
    fn give_up(&mut self, why: Waited) -> Waited {
        if self.hub.withdraw(&self.session_id, self.n) {
            self.done = true;
            why
        } else {
            self.take_reply()
        }
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        if !self.done {
            self.hub.withdraw(&self.session_id, self.n);
        }
    }
}
