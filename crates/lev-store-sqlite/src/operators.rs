//! The operators' relay: in this process's memory. One process opens a
//! SQLite data dir (`lev.lock`), so every waiter and every operator
//! connection is here, and nothing of it outlives the HTTP requests that
//! wait on it.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Mutex, PoisonError};

use async_trait::async_trait;
use lev_store::{
    OperatorPresence, OperatorReply, OperatorRequest, OperatorSignal, OperatorStore,
    ResolveOutcome, WithdrawOutcome,
};
use time::OffsetDateTime;
use tokio::sync::broadcast;

use crate::SqliteStore;

#[async_trait]
impl OperatorStore for SqliteStore {
    fn operator_signals(&self) -> broadcast::Receiver<OperatorSignal> {
        self.operators.operator_signals()
    }

    async fn post_operator_request(&self, request: OperatorRequest) -> lev_store::Result<()> {
        self.operators.post_operator_request(request).await
    }

    async fn operator_request(&self, req_id: &str) -> lev_store::Result<Option<OperatorRequest>> {
        self.operators.operator_request(req_id).await
    }

    async fn pending_operator_requests(
        &self,
        session_id: &str,
    ) -> lev_store::Result<Vec<OperatorRequest>> {
        self.operators.pending_operator_requests(session_id).await
    }

    async fn resolve_operator_request(
        &self,
        session_id: &str,
        req_id: &str,
        reply_type: &str,
        reply: OperatorReply,
    ) -> lev_store::Result<ResolveOutcome> {
        self.operators
            .resolve_operator_request(session_id, req_id, reply_type, reply)
            .await
    }

    async fn operator_reply(&self, req_id: &str) -> lev_store::Result<Option<OperatorReply>> {
        self.operators.operator_reply(req_id).await
    }

    async fn withdraw_operator_request(&self, req_id: &str) -> lev_store::Result<WithdrawOutcome> {
        self.operators.withdraw_operator_request(req_id).await
    }

    async fn connect_operator(
        &self,
        session_id: &str,
        conn: &str,
        operator: &str,
    ) -> lev_store::Result<Option<OperatorPresence>> {
        self.operators
            .connect_operator(session_id, conn, operator)
            .await
    }

    async fn disconnect_operator(&self, session_id: &str, conn: &str) -> lev_store::Result<bool> {
        self.operators.disconnect_operator(session_id, conn).await
    }

    async fn operator_presence(
        &self,
        session_id: &str,
    ) -> lev_store::Result<Option<OperatorPresence>> {
        self.operators.operator_presence(session_id).await
    }

    async fn notify_operator(&self, session_id: &str, frame: String) -> lev_store::Result<()> {
        self.operators.notify_operator(session_id, frame).await
    }
}

/// How many resolved req_ids are remembered, to tell a late reply
/// (`already_resolved`) from a made-up one.
const RESOLVED_MEMORY: usize = 65_536;
/// Most bytes of replies kept (estimated in memory) for waiters that have
/// not read theirs yet: an operator's reply may be a whole frame (1 MiB),
/// and counting replies alone let 65,536 of them hold 64 GiB. A waiter
/// reads its reply as soon as it is resolved; past this, the oldest bodies
/// are dropped (their req_ids are still remembered).
const REPLY_BYTES: usize = 64 * 1024 * 1024;
/// Most sessions whose operator's presence is kept: an operator token
/// whose patterns cover many sessions could otherwise add one entry per
/// session id it connects to, for as long as the process lives. Past this,
/// the sessions whose operator left longest ago are forgotten first.
const PRESENCE_MEMORY: usize = 65_536;

/// The relay in this process's memory, for a backend only one process
/// opens (SQLite): every waiter and every connection is in this process.
#[derive(Debug)]
pub struct InProcessOperators {
    state: Mutex<State>,
    signals: broadcast::Sender<OperatorSignal>,
}

#[derive(Debug, Default)]
struct State {
    pending: HashMap<String, OperatorRequest>,
    by_session: HashMap<String, VecDeque<String>>,
    /// Each reply with its estimated size.
    replies: HashMap<String, (OperatorReply, usize)>,
    /// The req_ids of `replies`, oldest first (some may be gone already).
    reply_order: VecDeque<String>,
    reply_bytes: usize,
    resolved: HashSet<String>,
    resolved_order: VecDeque<String>,
    presence: HashMap<String, OperatorPresence>,
}

impl State {
    fn remember(&mut self, req_id: &str) {
        if self.resolved.insert(req_id.to_owned()) {
            self.resolved_order.push_back(req_id.to_owned());
        }
        while self.resolved_order.len() > RESOLVED_MEMORY {
            if let Some(old) = self.resolved_order.pop_front() {
                self.resolved.remove(&old);
                self.forget_reply(&old);
            }
        }
    }

    fn keep_reply(&mut self, req_id: &str, reply: OperatorReply) {
        let size = reply_size(&reply);
        if let Some((_, old)) = self.replies.insert(req_id.to_owned(), (reply, size)) {
            self.reply_bytes -= old;
        }
        self.reply_bytes += size;
        self.reply_order.push_back(req_id.to_owned());
        while self.reply_bytes > REPLY_BYTES && self.replies.len() > 1 {
            let Some(old) = self.reply_order.pop_front() else {
                break;
            };
            self.forget_reply(&old);
        }
        // Ids of replies already gone are dropped now and then.
        if self.reply_order.len() > 2 * self.replies.len() + 1024 {
            let replies = &self.replies;
            self.reply_order.retain(|id| replies.contains_key(id));
        }
    }

    fn forget_reply(&mut self, req_id: &str) {
        if let Some((_, size)) = self.replies.remove(req_id) {
            self.reply_bytes -= size;
        }
    }

    /// Forget the oldest departed operators' presence past
    /// [`PRESENCE_MEMORY`] sessions (a quarter at a time, so the sort is paid
    /// once per many connections).
    fn bound_presence(&mut self) {
        if self.presence.len() <= PRESENCE_MEMORY {
            return;
        }
        let mut gone: Vec<(OffsetDateTime, String)> = self
            .presence
            .values()
            .filter(|p| p.conn.is_none())
            .map(|p| (p.since, p.session_id.clone()))
            .collect();
        gone.sort();
        let excess = self.presence.len() - PRESENCE_MEMORY * 3 / 4;
        for (_, session_id) in gone.into_iter().take(excess) {
            self.presence.remove(&session_id);
        }
    }

    fn unlink(&mut self, request: &OperatorRequest) {
        if let Some(queue) = self.by_session.get_mut(&request.session_id) {
            queue.retain(|r| r != &request.req_id);
            if queue.is_empty() {
                self.by_session.remove(&request.session_id);
            }
        }
    }
}

impl Default for InProcessOperators {
    fn default() -> Self {
        Self {
            state: Mutex::new(State::default()),
            signals: broadcast::channel(4096).0,
        }
    }
}

impl InProcessOperators {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn signal(&self, signal: OperatorSignal) {
        let _ = self.signals.send(signal);
    }
}

#[async_trait]
impl OperatorStore for InProcessOperators {
    fn operator_signals(&self) -> broadcast::Receiver<OperatorSignal> {
        self.signals.subscribe()
    }

    async fn post_operator_request(&self, request: OperatorRequest) -> lev_store::Result<()> {
        let signal = OperatorSignal::Posted {
            session_id: request.session_id.clone(),
            req_id: request.req_id.clone(),
        };
        {
            let mut state = self.state();
            state
                .by_session
                .entry(request.session_id.clone())
                .or_default()
                .push_back(request.req_id.clone());
            state.pending.insert(request.req_id.clone(), request);
        }
        self.signal(signal);
        Ok(())
    }

    async fn operator_request(&self, req_id: &str) -> lev_store::Result<Option<OperatorRequest>> {
        Ok(self.state().pending.get(req_id).cloned())
    }

    async fn pending_operator_requests(
        &self,
        session_id: &str,
    ) -> lev_store::Result<Vec<OperatorRequest>> {
        let state = self.state();
        Ok(state
            .by_session
            .get(session_id)
            .map(|queue| {
                queue
                    .iter()
                    .filter_map(|id| state.pending.get(id).cloned())
                    .collect()
            })
            .unwrap_or_default())
    }

    async fn resolve_operator_request(
        &self,
        session_id: &str,
        req_id: &str,
        reply_type: &str,
        reply: OperatorReply,
    ) -> lev_store::Result<ResolveOutcome> {
        {
            let mut state = self.state();
            let Some(request) = state.pending.get(req_id) else {
                return Ok(if state.resolved.contains(req_id) {
                    ResolveOutcome::AlreadyResolved
                } else {
                    ResolveOutcome::Unknown
                });
            };
            if request.session_id != session_id {
                return Ok(ResolveOutcome::Unknown);
            }
            if request.reply_type != reply_type {
                return Ok(ResolveOutcome::WrongKind(request.reply_type.clone()));
            }
            let Some(request) = state.pending.remove(req_id) else {
                return Ok(ResolveOutcome::Unknown);
            };
            state.unlink(&request);
            state.remember(req_id);
            state.keep_reply(req_id, reply);
        }
        self.signal(OperatorSignal::Resolved {
            session_id: session_id.to_owned(),
            req_id: req_id.to_owned(),
        });
        Ok(ResolveOutcome::Resolved)
    }

    async fn operator_reply(&self, req_id: &str) -> lev_store::Result<Option<OperatorReply>> {
        Ok(self.state().replies.get(req_id).map(|(r, _)| r.clone()))
    }

    async fn withdraw_operator_request(&self, req_id: &str) -> lev_store::Result<WithdrawOutcome> {
        let session_id = {
            let mut state = self.state();
            match state.pending.remove(req_id) {
                Some(request) => {
                    state.unlink(&request);
                    state.remember(req_id);
                    // A withdrawn message has no reply to keep.
                    state.forget_reply(req_id);
                    request.session_id
                }
                None => {
                    return Ok(match state.replies.get(req_id) {
                        Some((reply, _)) => WithdrawOutcome::Replied(reply.clone()),
                        None => WithdrawOutcome::Gone,
                    });
                }
            }
        };
        self.signal(OperatorSignal::Resolved {
            session_id,
            req_id: req_id.to_owned(),
        });
        Ok(WithdrawOutcome::Withdrawn)
    }

    async fn connect_operator(
        &self,
        session_id: &str,
        conn: &str,
        operator: &str,
    ) -> lev_store::Result<Option<OperatorPresence>> {
        let previous = {
            let mut state = self.state();
            let previous = state.presence.insert(
                session_id.to_owned(),
                OperatorPresence {
                    session_id: session_id.to_owned(),
                    conn: Some(conn.to_owned()),
                    operator: operator.to_owned(),
                    since: OffsetDateTime::now_utc(),
                },
            );
            state.bound_presence();
            previous
        };
        self.signal(OperatorSignal::Presence {
            session_id: session_id.to_owned(),
        });
        Ok(previous)
    }

    async fn disconnect_operator(&self, session_id: &str, conn: &str) -> lev_store::Result<bool> {
        let was = {
            let mut state = self.state();
            match state.presence.get_mut(session_id) {
                Some(p) if p.conn.as_deref() == Some(conn) => {
                    p.conn = None;
                    p.since = OffsetDateTime::now_utc();
                    true
                }
                _ => false,
            }
        };
        if was {
            self.signal(OperatorSignal::Presence {
                session_id: session_id.to_owned(),
            });
        }
        Ok(was)
    }

    async fn operator_presence(
        &self,
        session_id: &str,
    ) -> lev_store::Result<Option<OperatorPresence>> {
        Ok(self.state().presence.get(session_id).cloned())
    }

    async fn notify_operator(&self, session_id: &str, frame: String) -> lev_store::Result<()> {
        self.signal(OperatorSignal::Notice {
            session_id: session_id.to_owned(),
            frame,
        });
        Ok(())
    }
}

fn reply_size(reply: &OperatorReply) -> usize {
    std::mem::size_of::<OperatorReply>()
        + reply.by.len()
        + lev_store::feed::json_heap_size(&reply.msg)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use serde_json::json;

    use super::*;

    fn request(n: usize) -> OperatorRequest {
        OperatorRequest {
            req_id: format!("rq_{n}"),
            session_id: "s-1".into(),
            reply_type: "answer".into(),
            frame: "{}".into(),
            posted_at: OffsetDateTime::now_utc(),
        }
    }

    /// Replies nobody read are kept by bytes, not only by count: 200
    /// replies of 1 MiB (an operator's largest frame) keep at most
    /// [`REPLY_BYTES`], the newest first; every req_id is still known as
    /// resolved.
    #[tokio::test]
    async fn replies_are_kept_within_a_byte_budget() {
        let relay = InProcessOperators::default();
        let big = "a".repeat(1024 * 1024);
        for n in 0..200 {
            relay.post_operator_request(request(n)).await.unwrap();
            let reply = OperatorReply {
                msg: json!({"type": "answer", "req_id": format!("rq_{n}"), "value": big}),
                by: "op".into(),
            };
            let outcome = relay
                .resolve_operator_request("s-1", &format!("rq_{n}"), "answer", reply)
                .await
                .unwrap();
            assert_eq!(outcome, ResolveOutcome::Resolved);
        }
        {
            let state = relay.state();
            assert!(state.reply_bytes <= REPLY_BYTES, "{}", state.reply_bytes);
            let kept: usize = state.replies.values().map(|(_, s)| s).sum();
            assert_eq!(kept, state.reply_bytes);
            assert!(state.replies.contains_key("rq_199"));
            assert!(!state.replies.contains_key("rq_0"));
            assert!(state.resolved.contains("rq_0"));
        }
        let late = relay
            .resolve_operator_request(
                "s-1",
                "rq_0",
                "answer",
                OperatorReply {
                    msg: json!(null),
                    by: "op".into(),
                },
            )
            .await
            .unwrap();
        assert_eq!(late, ResolveOutcome::AlreadyResolved);
    }

    /// An operator that connects to ever new session ids does not grow the
    /// presence map past its bound; connected operators are never forgotten.
    #[tokio::test]
    async fn presence_of_departed_operators_is_bounded() {
        let relay = InProcessOperators::default();
        relay
            .connect_operator("kept", "c-kept", "op")
            .await
            .unwrap();
        for n in 0..PRESENCE_MEMORY + 10 {
            let session = format!("s-{n}");
            relay.connect_operator(&session, "c", "op").await.unwrap();
            relay.disconnect_operator(&session, "c").await.unwrap();
        }
        let len = relay.state().presence.len();
        assert!(len <= PRESENCE_MEMORY, "{len}");
        let kept = relay.operator_presence("kept").await.unwrap().unwrap();
        assert_eq!(kept.conn.as_deref(), Some("c-kept"));
    }
}
