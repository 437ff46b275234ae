//! The operators' relay as a store part: the messages waiting for a
//! session's operator (an `ask`, a `hook_before`, a `spawn`), their replies,
//! and which server the session's operator is connected to now.
//!
//! A worker's request may wait on one server while the session's operator
//! is connected to another: the waiting server posts the message here, the
//! operator's server is told ([`OperatorSignal::Posted`]) and sends it, the
//! reply is resolved here exactly once (compare-and-set against a
//! withdrawal by the waiter's deadline or escalation), and the waiting
//! server is told ([`OperatorSignal::Resolved`]).
//!
//! Nothing here outlives the requests waiting on it: a message is only
//! useful while its worker's HTTP request is held. A backend whose database
//! only one process may open keeps it in memory (SQLite's);
//! one that several servers share keeps it in the database and signals
//! every server.

use async_trait::async_trait;
use serde_json::Value;
use time::OffsetDateTime;
use tokio::sync::broadcast;

use crate::Result;

/// A message waiting for its operator's reply.
#[derive(Debug, Clone, PartialEq)]
pub struct OperatorRequest {
    /// Unique across servers.
    pub req_id: String,
    /// The session whose operator must reply.
    pub session_id: String,
    /// The reply type it expects (`answer`, `hook_ack`, `spawn_ack`).
    pub reply_type: String,
    /// The frame sent to the operator (a JSON message).
    pub frame: String,
    /// When it was posted.
    pub posted_at: OffsetDateTime,
}

/// An operator's reply.
#[derive(Debug, Clone, PartialEq)]
pub struct OperatorReply {
    /// The reply message, as the operator sent it (parsed).
    pub msg: Value,
    /// The operator's token name.
    pub by: String,
}

/// Outcome of [`OperatorStore::resolve_operator_request`].
#[derive(Debug, Clone, PartialEq)]
pub enum ResolveOutcome {
    /// This reply resolved it.
    Resolved,
    /// It was resolved before (replied to, or withdrawn by its waiter).
    AlreadyResolved,
    /// It expects another reply type (given here); nothing changed.
    WrongKind(String),
    /// No such message in this session.
    Unknown,
}

/// Outcome of [`OperatorStore::withdraw_operator_request`].
#[derive(Debug, Clone, PartialEq)]
pub enum WithdrawOutcome {
    /// Withdrawn now: no reply will resolve it.
    Withdrawn,
    /// A reply won the race.
    Replied(OperatorReply),
    /// Withdrawn before, or unknown.
    Gone,
}

/// Where a session's operator is connected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OperatorPresence {
    /// The session.
    pub session_id: String,
    /// The connection (unique across servers), `None` when disconnected.
    pub conn: Option<String>,
    /// The operator's token name (of the last connection).
    pub operator: String,
    /// Connected, or disconnected, since.
    pub since: OffsetDateTime,
}

/// What every server sharing the store is told, after the change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OperatorSignal {
    /// A message was posted for the session's operator.
    Posted {
        /// The session.
        session_id: String,
        /// The message.
        req_id: String,
    },
    /// A message was replied to or withdrawn.
    Resolved {
        /// The session.
        session_id: String,
        /// The message.
        req_id: String,
    },
    /// The session's operator connected or disconnected.
    Presence {
        /// The session.
        session_id: String,
    },
    /// A frame for the session's operator that needs no reply (an error
    /// about its reply), for whichever server holds its connection.
    Notice {
        /// The session.
        session_id: String,
        /// The frame.
        frame: String,
    },
}

/// The relay between workers' requests and sessions' operators.
#[async_trait]
pub trait OperatorStore: Send + Sync + 'static {
    /// Signals of every change, on every server sharing the store.
    fn operator_signals(&self) -> broadcast::Receiver<OperatorSignal>;

    /// Post a message for a session's operator.
    async fn post_operator_request(&self, request: OperatorRequest) -> Result<()>;

    /// One message, while it waits for its reply.
    async fn operator_request(&self, req_id: &str) -> Result<Option<OperatorRequest>>;

    /// The session's messages waiting for a reply, oldest first.
    async fn pending_operator_requests(&self, session_id: &str) -> Result<Vec<OperatorRequest>>;

    /// Resolve a message with its reply, exactly once; the reply's type
    /// must be the one the message expects.
    async fn resolve_operator_request(
        &self,
        session_id: &str,
        req_id: &str,
        reply_type: &str,
        reply: OperatorReply,
    ) -> Result<ResolveOutcome>;

    /// The reply that resolved a message, once there is one.
    async fn operator_reply(&self, req_id: &str) -> Result<Option<OperatorReply>>;

    /// Stop waiting for a message's reply, unless a reply won the race.
    async fn withdraw_operator_request(&self, req_id: &str) -> Result<WithdrawOutcome>;

    /// Connection `conn` is now the session's operator; returns the
    /// presence it replaced (its `conn` set when that one was connected).
    async fn connect_operator(
        &self,
        session_id: &str,
        conn: &str,
        operator: &str,
    ) -> Result<Option<OperatorPresence>>;

    /// Connection `conn` ended; true when it was the session's operator.
    async fn disconnect_operator(&self, session_id: &str, conn: &str) -> Result<bool>;

    /// Where the session's operator is (`None`: never connected).
    async fn operator_presence(&self, session_id: &str) -> Result<Option<OperatorPresence>>;

    /// Send a frame that needs no reply to the session's operator, on
    /// whichever server holds its connection.
    async fn notify_operator(&self, session_id: &str, frame: String) -> Result<()>;
}
