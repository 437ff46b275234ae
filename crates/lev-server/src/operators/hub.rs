//! The operators' hub: this server's side of the store's operator relay
//! ([`lev_store::OperatorStore`]).
//!
//! A request that needs a session's operator ([`OperatorHub::submit`])
//! posts its message to the store and gets a [`Ticket`]. Whichever server
//! holds the session's operator connection sends it (this one at once, when
//! it is here; another when the store's `Posted` signal reaches it). A reply
//! is resolved in the store exactly once, against a withdrawal by the
//! ticket (an escalation, the caller's deadline, a dropped request), and the
//! store's `Resolved` signal wakes the ticket, wherever it waits.
//!
//! What is kept here: this server's operator connections (what was sent on
//! each), and the wake-ups of this server's tickets. The grace and reply
//! times are read from the store's presence of the session's operator, so
//! they hold whichever server the operator is on.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use lev_protocol::{ClientMsg, ServerMsg};
use lev_store::{
    OperatorPresence, OperatorReply, OperatorRequest, OperatorSignal, ResolveOutcome, Store,
    WithdrawOutcome,
};
use time::OffsetDateTime;
use tokio::sync::{broadcast, watch};
use tokio::time::Instant;
use tokio_util::task::TaskTracker;

use super::outbox::{Closing, Outbox, OutboxReader};
use crate::config::OperatorSettings;
use crate::error::ApiError;

/// How often the hub looks again without a signal.
const SAFETY_NET: Duration = Duration::from_secs(2);

/// What a pending message waits for.
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

    fn sent_type_of(reply_type: &str) -> &'static str {
        match reply_type {
            "answer" => "ask",
            "hook_ack" => "hook_before",
            "spawn_ack" => "spawn",
            _ => "message",
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

/// Why a reply was refused: the `error` frame's code and message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// `unknown_req_id`, `already_resolved`, `wrong_reply_kind`.
    pub code: &'static str,
    /// For a person.
    pub message: String,
}

/// One operator connection on this server.
struct Conn {
    id: String,
    /// Its queue, bounded: what does not fit is offered again when the
    /// connection has drained it.
    out: Arc<Outbox>,
    /// The req_ids queued on it and still pending (so a message is sent once
    /// per connection). A resolved one is dropped: it is never sent again,
    /// and keeping it grew the set for as long as the connection lived.
    sent: HashSet<String>,
    /// Whether `hello` went out: nothing else is sent before it.
    ready: bool,
}

/// Every session's operator on this server, and this server's waiters.
pub struct OperatorHub {
    settings: OperatorSettings,
    store: Arc<dyn Store>,
    /// Makes req_ids and connection ids of this process unlike any other's.
    boot: String,
    next: AtomicU64,
    conns: Mutex<HashMap<String, Conn>>,
    /// Wakes this server's tickets, by req_id.
    tickets: Mutex<HashMap<String, watch::Sender<u64>>>,
    /// Wakes this server's tickets of a session when its presence changes.
    presence: Mutex<HashMap<String, watch::Sender<u64>>>,
    /// The server's tasks: a dropped ticket's withdrawal runs as one.
    tasks: TaskTracker,
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
    /// An operator is connected to take the message (only when the ticket
    /// asked to hear of it); wait again for the reply.
    Sent,
    /// No operator was connected for the grace time; the message is withdrawn.
    NoOperator,
    /// The connected operator did not reply within the reply timeout; the
    /// message is withdrawn.
    ReplyTimeout,
    /// The caller's deadline passed; the message is withdrawn.
    Deadline,
}

/// A posted message this server waits on. Dropping it withdraws the message.
pub struct Ticket {
    hub: Arc<OperatorHub>,
    session_id: String,
    req_id: String,
    kind: Kind,
    posted_at: OffsetDateTime,
    changed: watch::Receiver<u64>,
    presence_changed: watch::Receiver<u64>,
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

/// The close of a connection that a newer one replaced.
const REPLACED: Closing = Closing {
    code: 4000,
    reason: "replaced by a newer connection",
};

impl Conn {
    /// Queue `pending` (in order) not yet queued, until the queue is full.
    fn queue(&mut self, pending: Vec<OperatorRequest>) {
        for request in pending {
            if self.sent.contains(&request.req_id) {
                continue;
            }
            if !self.out.offer(request.frame.into()) {
                break;
            }
            self.sent.insert(request.req_id);
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

fn frame(msg: &ServerMsg) -> Result<String, ApiError> {
    serde_json::to_string(msg)
        .map_err(|e| ApiError::Internal(format!("an operator message does not serialise: {e}")))
}

fn bump(tx: &watch::Sender<u64>) {
    tx.send_modify(|g| *g = g.wrapping_add(1));
}

impl OperatorHub {
    /// The hub of this server over `store`; [`OperatorHub::follow`] must run
    /// for messages and replies of other servers to arrive.
    pub fn new(settings: OperatorSettings, store: Arc<dyn Store>, tasks: TaskTracker) -> Self {
        let mut random = [0u8; 6];
        let _ = getrandom::fill(&mut random);
        Self {
            settings,
            store,
            boot: crate::ids::hex(&random),
            next: AtomicU64::new(1),
            conns: Mutex::new(HashMap::new()),
            tickets: Mutex::new(HashMap::new()),
            presence: Mutex::new(HashMap::new()),
            tasks,
        }
    }

    /// The settings.
    pub fn settings(&self) -> &OperatorSettings {
        &self.settings
    }

    fn next_id(&self, prefix: &str) -> String {
        format!(
            "{prefix}_{}_{}",
            self.boot,
            self.next.fetch_add(1, Ordering::Relaxed)
        )
    }

    /// Follow the store's signals until shutdown: send what is posted for an
    /// operator connected here, wake the tickets waiting here.
    pub async fn follow(
        self: Arc<Self>,
        mut signals: broadcast::Receiver<OperatorSignal>,
        mut shutdown: watch::Receiver<bool>,
    ) {
        // A safety net for a signal lost on the way (a backend's listening
        // connection dropped): look again now and then, as after a lag.
        let mut tick = tokio::time::interval(SAFETY_NET);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            let signal = tokio::select! {
                s = signals.recv() => s,
                _ = tick.tick() => Err(broadcast::error::RecvError::Lagged(0)),
                () = crate::shutdown::stopped(&mut shutdown) => return,
            };
            match signal {
                Ok(OperatorSignal::Posted { session_id, .. }) => {
                    self.send_pending(&session_id).await;
                }
                Ok(OperatorSignal::Resolved { session_id, req_id }) => {
                    if let Some(tx) = lock(&self.tickets).get(&req_id) {
                        bump(tx);
                    }
                    if let Some(conn) = lock(&self.conns).get_mut(&session_id) {
                        conn.sent.remove(&req_id);
                    }
                }
                Ok(OperatorSignal::Presence { session_id }) => {
                    self.on_presence(&session_id).await;
                }
                Ok(OperatorSignal::Notice { session_id, frame }) => {
                    if let Some(conn) = lock(&self.conns).get(&session_id) {
                        conn.out.push_notice(frame.into());
                    }
                }
                Err(broadcast::error::RecvError::Lagged(_)) => {
                    // Some signals were lost: wake everything, resend what
                    // each connection here has not had.
                    for tx in lock(&self.tickets).values() {
                        bump(tx);
                    }
                    for tx in lock(&self.presence).values() {
                        bump(tx);
                    }
                    let sessions: Vec<String> = lock(&self.conns).keys().cloned().collect();
                    for session_id in sessions {
                        self.send_pending(&session_id).await;
                    }
                }
                Err(broadcast::error::RecvError::Closed) => return,
            }
        }
    }

    /// The session's presence changed: wake its tickets here, and close a
    /// connection here that another replaced (on any server).
    async fn on_presence(&self, session_id: &str) {
        if let Some(tx) = lock(&self.presence).get(session_id) {
            bump(tx);
        }
        let Some(local) = lock(&self.conns).get(session_id).map(|c| c.id.clone()) else {
            return;
        };
        let current = match self.store.operator_presence(session_id).await {
            Ok(presence) => presence.and_then(|p| p.conn),
            Err(e) => {
                crate::log::error(&format!("operator presence of {session_id}: {e}"));
                return;
            }
        };
        if current.as_deref() != Some(local.as_str()) {
            let mut conns = lock(&self.conns);
            if conns.get(session_id).is_some_and(|c| c.id == local)
                && let Some(old) = conns.remove(session_id)
            {
                old.out.close(REPLACED);
            }
        }
    }

    /// Send the session's pending messages not yet sent to its connection
    /// here, if there is one and it had its `hello`, as many as its queue
    /// takes (its writer calls this again once it drained them).
    pub async fn send_pending(&self, session_id: &str) {
        if !lock(&self.conns).get(session_id).is_some_and(|c| c.ready) {
            return;
        }
        let pending = match self.store.pending_operator_requests(session_id).await {
            Ok(pending) => pending,
            Err(e) => {
                crate::log::error(&format!("operator messages of {session_id}: {e}"));
                return;
            }
        };
        let mut conns = lock(&self.conns);
        if let Some(conn) = conns.get_mut(session_id) {
            // What is no longer pending was resolved: forget it (also when
            // its Resolved signal was lost).
            let still: HashSet<&str> = pending.iter().map(|r| r.req_id.as_str()).collect();
            conn.sent.retain(|id| still.contains(id.as_str()));
            conn.queue(pending);
        }
    }

    /// Whether `session_id` has an operator connected now (on any server).
    ///
    /// # Errors
    /// When the store cannot say.
    pub async fn is_connected(&self, session_id: &str) -> Result<bool, ApiError> {
        Ok(self
            .store
            .operator_presence(session_id)
            .await?
            .is_some_and(|p| p.conn.is_some()))
    }

    /// Post a message that expects a reply; it goes to the session's
    /// operator now, or when one connects. `make` builds it from its req_id.
    ///
    /// # Errors
    /// When the store refuses.
    pub async fn submit(
        self: &Arc<Self>,
        session_id: &str,
        kind: Kind,
        make: impl FnOnce(String) -> ServerMsg,
    ) -> Result<Ticket, ApiError> {
        let req_id = self.next_id("rq");
        let text = frame(&make(req_id.clone()))?;
        let posted_at = OffsetDateTime::now_utc();
        // Registered before the post: a reply can never come before the
        // ticket can hear of it.
        let changed = lock(&self.tickets)
            .entry(req_id.clone())
            .or_insert_with(|| watch::channel(0).0)
            .subscribe();
        let presence_changed = lock(&self.presence)
            .entry(session_id.to_owned())
            .or_insert_with(|| watch::channel(0).0)
            .subscribe();
        let mut ticket = Ticket {
            hub: Arc::clone(self),
            session_id: session_id.to_owned(),
            req_id: req_id.clone(),
            kind,
            posted_at,
            changed,
            presence_changed,
            report_sent: false,
            done: false,
        };
        let request = OperatorRequest {
            req_id,
            session_id: session_id.to_owned(),
            reply_type: kind.reply_type().to_owned(),
            frame: text,
            posted_at,
        };
        if let Err(e) = self.store.post_operator_request(request).await {
            ticket.done = true;
            return Err(e.into());
        }
        // The operator is here: send it now rather than on the signal.
        self.send_pending(session_id).await;
        Ok(ticket)
    }

    /// A new operator connection for `session_id` on this server: it
    /// replaces the one before (closed with 4000, on whichever server), gets
    /// `hello` with the pending req_ids, then every pending message, in order.
    /// Returns the connection's id, its queue, and the token name of the
    /// operator it replaced, if one was connected.
    ///
    /// # Errors
    /// When the store refuses.
    pub async fn connect(
        &self,
        session_id: &str,
        operator: &str,
    ) -> Result<(String, Arc<Outbox>, OutboxReader, Option<String>), ApiError> {
        let id = self.next_id("op");
        let (out, rx) = Outbox::new();
        if let Some(old) = lock(&self.conns).insert(
            session_id.to_owned(),
            Conn {
                id: id.clone(),
                out: Arc::clone(&out),
                sent: HashSet::new(),
                ready: false,
            },
        ) {
            old.out.close(REPLACED);
        }
        let replaced = self
            .store
            .connect_operator(session_id, &id, operator)
            .await?
            .and_then(|p: OperatorPresence| p.conn.map(|_| p.operator));
        let pending = self.store.pending_operator_requests(session_id).await?;
        let hello = ServerMsg::Hello {
            session_id: session_id.to_owned(),
            pending: pending.iter().map(|r| r.req_id.clone()).collect(),
        };
        let hello = frame(&hello)?;
        {
            let mut conns = lock(&self.conns);
            if let Some(conn) = conns.get_mut(session_id).filter(|c| c.id == id) {
                // An empty queue takes one frame of any size.
                conn.out.offer(hello.into());
                conn.queue(pending);
                conn.ready = true;
            }
        }
        // What was posted while the list was read.
        self.send_pending(session_id).await;
        Ok((id, out, rx, replaced))
    }

    /// Connection `conn_id` of `session_id` ended. True when it was the
    /// session's operator (not one already replaced).
    ///
    /// # Errors
    /// When the store refuses.
    pub async fn disconnect(&self, session_id: &str, conn_id: &str) -> Result<bool, ApiError> {
        {
            let mut conns = lock(&self.conns);
            if conns.get(session_id).is_some_and(|c| c.id == conn_id) {
                conns.remove(session_id);
            }
        }
        Ok(self.store.disconnect_operator(session_id, conn_id).await?)
    }

    /// Resolve the message a reply names, exactly once.
    ///
    /// # Errors
    /// The [`Refusal`] to send back; the message is then untouched. A store
    /// that cannot be reached is an `Err(Err(..))`.
    pub async fn resolve(
        &self,
        session_id: &str,
        msg: ClientMsg,
        by: &str,
    ) -> Result<Result<(), Refusal>, ApiError> {
        let req_id = msg.req_id().to_owned();
        let reply_type = msg.type_name();
        let value = serde_json::to_value(&msg)
            .map_err(|e| ApiError::Internal(format!("a reply does not serialise: {e}")))?;
        let outcome = self
            .store
            .resolve_operator_request(
                session_id,
                &req_id,
                reply_type,
                OperatorReply {
                    msg: value,
                    by: by.to_owned(),
                },
            )
            .await?;
        Ok(match outcome {
            ResolveOutcome::Resolved => Ok(()),
            ResolveOutcome::AlreadyResolved => Err(Refusal {
                code: "already_resolved",
                message: format!(
                    "req_id {req_id:?} was already resolved (replied to, escalated to people, \
                     or given up by its caller); this reply changes nothing"
                ),
            }),
            ResolveOutcome::WrongKind(expected) => Err(Refusal {
                code: "wrong_reply_kind",
                message: format!(
                    "req_id {req_id:?} is a {} and expects a {expected} reply, found {reply_type}",
                    Kind::sent_type_of(&expected),
                ),
            }),
            ResolveOutcome::Unknown => Err(Refusal {
                code: "unknown_req_id",
                message: format!("no message of this session was sent with req_id {req_id:?}"),
            }),
        })
    }

    /// Send a frame that needs no reply to the session's operator, on
    /// whichever server it is connected to.
    ///
    /// # Errors
    /// When the store refuses.
    pub async fn send(&self, session_id: &str, msg: &ServerMsg) -> Result<(), ApiError> {
        let text = frame(msg)?;
        if let Some(conn) = lock(&self.conns).get(session_id) {
            conn.out.push_notice(text.into());
            return Ok(());
        }
        Ok(self.store.notify_operator(session_id, text).await?)
    }

    fn forget(&self, ticket: &Ticket) {
        lock(&self.tickets).remove(&ticket.req_id);
        let mut presence = lock(&self.presence);
        // Keep the session's wake-up while a ticket or a connection uses it.
        if presence
            .get(&ticket.session_id)
            .is_some_and(|tx| tx.receiver_count() <= 1)
            && !lock(&self.conns).contains_key(&ticket.session_id)
        {
            presence.remove(&ticket.session_id);
        }
    }
}

fn reply_of(reply: OperatorReply) -> Option<Reply> {
    let msg: ClientMsg = serde_json::from_value(reply.msg).ok()?;
    Some(Reply { msg, by: reply.by })
}

impl Ticket {
    /// The req_id the operator sees.
    pub fn req_id(&self) -> &str {
        &self.req_id
    }

    /// Make the next [`Ticket::wait`] return [`Waited::Sent`] once an
    /// operator is connected to take the message.
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
            let store = &self.hub.store;
            match store.operator_reply(&self.req_id).await {
                Ok(Some(reply)) => {
                    self.done = true;
                    return reply_of(reply).map_or(Waited::Deadline, Waited::Replied);
                }
                Ok(None) => {}
                Err(e) => crate::log::error(&format!("operator reply {}: {e}", self.req_id)),
            }
            let presence = match store.operator_presence(&self.session_id).await {
                Ok(p) => p,
                Err(e) => {
                    crate::log::error(&format!("operator presence: {e}"));
                    None
                }
            };
            let (connected, since) = match &presence {
                Some(p) => (p.conn.is_some(), p.since.max(self.posted_at)),
                None => (false, self.posted_at),
            };
            if self.report_sent && connected {
                self.report_sent = false;
                return Waited::Sent;
            }
            let escalate_at = match (connected, self.kind) {
                (true, Kind::Spawn) => None,
                (true, _) => Some((since + settings.reply_timeout, Waited::ReplyTimeout)),
                (false, _) => Some((since + settings.grace, Waited::NoOperator)),
            };
            let now = Instant::now();
            if now >= deadline {
                return self.give_up(Waited::Deadline).await;
            }
            let mut wake = deadline;
            if let Some((at, why)) = escalate_at {
                // Compared on the wall clock the store's times are on.
                let left = at - OffsetDateTime::now_utc();
                let Ok(left) = Duration::try_from(left) else {
                    return self.give_up(why).await;
                };
                if left.is_zero() {
                    return self.give_up(why).await;
                }
                wake = wake.min(now + left);
            }
            tokio::select! {
                () = tokio::time::sleep_until(wake) => {}
                _ = self.changed.changed() => {}
                _ = self.presence_changed.changed() => {}
            }
        }
    }

    /// Withdraw the message, unless a reply won the race.
    async fn give_up(&mut self, why: Waited) -> Waited {
        self.done = true;
        match self.hub.store.withdraw_operator_request(&self.req_id).await {
            Ok(WithdrawOutcome::Withdrawn) => why,
            Ok(WithdrawOutcome::Replied(reply)) => reply_of(reply).map_or(why, Waited::Replied),
            Ok(WithdrawOutcome::Gone) => Waited::Deadline,
            Err(e) => {
                crate::log::error(&format!("withdrawing {}: {e}", self.req_id));
                why
            }
        }
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        self.hub.forget(self);
        if !self.done {
            let store = Arc::clone(&self.hub.store);
            let req_id = std::mem::take(&mut self.req_id);
            if tokio::runtime::Handle::try_current().is_ok() {
                drop(self.hub.tasks.spawn(async move {
                    let _ = store.withdraw_operator_request(&req_id).await;
                }));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    impl OperatorHub {
        fn sent_len(&self, session_id: &str) -> usize {
            lock(&self.conns)
                .get(session_id)
                .map_or(0, |c| c.sent.len())
        }
    }

    /// A long-lived operator connection answering many asks keeps no trace
    /// of those resolved (the soak found the set growing by every req_id).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_connection_forgets_what_was_resolved() {
        let dir = tempfile::tempdir().unwrap();
        let store: Arc<dyn Store> =
            Arc::new(lev_store_sqlite::SqliteStore::open(dir.path()).unwrap());
        let hub = Arc::new(OperatorHub::new(
            OperatorSettings::default(),
            Arc::clone(&store),
            TaskTracker::new(),
        ));
        let (_stop, shutdown) = watch::channel(false);
        tokio::spawn(Arc::clone(&hub).follow(store.operator_signals(), shutdown));
        let (_conn, _out, mut rx, _) = hub.connect("s-op", "main-ai").await.unwrap();
        for n in 0..200 {
            let ticket = hub
                .submit("s-op", Kind::Ask, |req_id| ServerMsg::Ask {
                    req_id,
                    question: serde_json::json!({ "n": n }),
                })
                .await
                .unwrap();
            let req_id = ticket.req_id.clone();
            let answered = hub
                .resolve(
                    "s-op",
                    ClientMsg::Answer {
                        req_id,
                        value: serde_json::json!("ok"),
                    },
                    "main-ai",
                )
                .await
                .unwrap();
            assert!(answered.is_ok());
            drop(ticket);
        }
        while rx.try_next().is_some() {}
        // The Resolved signals arrive on the follow task.
        for _ in 0..100 {
            if hub.sent_len("s-op") == 0 {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        assert_eq!(hub.sent_len("s-op"), 0, "resolved req_ids are forgotten");
    }
}
