//! Operators (SPEC section 4): the session WebSocket, the hub of pending
//! messages, escalation to people, and triage of interactions.
//!
//! - [`hub`]: this server's side of the store's operator relay: the
//!   operator connections here, the tickets waiting here, the messages and
//!   replies going through the store, so a worker may wait on one server
//!   while its session's operator is connected to another.
//! - [`ws`]: one connection: hello, re-sent messages, replies, error frames,
//!   pings, the dead-peer timeout, and a peer that does not read closed.
//! - [`outbox`]: a connection's outgoing queue, bounded by frames and bytes.
//! - [`people`]: what the operator could not answer in time becomes an
//!   interaction for people, and its answer comes back to the waiting worker.
//! - [`triage`]: an interaction routed `operator` first goes to the session's
//!   operator as an `ask`, which decides it or hands it to people.

pub mod hub;
pub mod outbox;
pub mod people;
pub mod triage;
pub mod ws;

use std::time::Duration;

pub use hub::OperatorHub;

/// How operators are waited for.
#[derive(Debug, Clone)]
pub struct OperatorSettings {
    /// How long a session may be without an operator before what waits for
    /// one goes to people (`--operator-grace`).
    pub grace: Duration,
    /// How long a connected operator has to reply to an ask or a hook before
    /// it goes to people (`--operator-reply-timeout`).
    pub reply_timeout: Duration,
    /// How often the server pings an operator.
    pub ping_interval: Duration,
    /// No frame from an operator (a pong included) for this long ends its
    /// connection.
    pub dead_peer_timeout: Duration,
}

impl Default for OperatorSettings {
    fn default() -> Self {
        Self {
            grace: Duration::from_secs(30),
            reply_timeout: Duration::from_secs(120),
            ping_interval: Duration::from_secs(15),
            dead_peer_timeout: Duration::from_secs(45),
        }
    }
}

/// Whole seconds, for messages.
pub(crate) fn secs(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s.fract() == 0.0 {
        format!("{} s", d.as_secs())
    } else {
        format!("{s:.1} s")
    }
}
