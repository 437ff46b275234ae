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

use tokio::time::Instant;

use crate::error::{ApiError, ApiResult};
use crate::state::AppState;
pub use hub::OperatorHub;
use hub::{Ticket, Waited};

/// Whole seconds, for messages.
pub(crate) fn secs(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s.fract() == 0.0 {
        format!("{} s", d.as_secs())
    } else {
        format!("{s:.1} s")
    }
}

/// When a worker's call to its session's operator (an ask, a spawn) stops
/// waiting: after its `timeout_s`, else `default` seconds, at most
/// [`MAX_TIMEOUT_S`].
pub(crate) fn deadline(timeout_s: Option<u64>, default: u64) -> Instant {
    Instant::now() + Duration::from_secs(timeout_s.unwrap_or(default).min(MAX_TIMEOUT_S))
}

/// The longest `timeout_s` an ask or a spawn takes; longer is clamped.
pub(crate) const MAX_TIMEOUT_S: u64 = 7 * 24 * 3600;

/// Wait on a ticket, or 503 when the server begins to shut down.
pub(crate) async fn wait(
    state: &AppState,
    ticket: &mut Ticket,
    deadline: Instant,
) -> ApiResult<Waited> {
    let mut shutdown = state.shutdown_signal();
    tokio::select! {
        waited = ticket.wait(deadline) => Ok(waited),
        () = crate::shutdown::stopped(&mut shutdown) => Err(ApiError::ShuttingDown),
    }
}

/// 504 for `what` past its `timeout_s`.
pub(crate) fn timed_out(what: &str, timeout_s: Option<u64>, default: u64) -> ApiError {
    ApiError::Timeout(format!(
        "{what} got no answer within timeout_s ({} s)",
        timeout_s.unwrap_or(default).min(MAX_TIMEOUT_S)
    ))
}

/// Why a message goes to people instead, or `None` when it should not.
pub(crate) fn escalation_reason(
    state: &AppState,
    session_id: &str,
    waited: &Waited,
) -> Option<String> {
    let settings = state.operators().settings();
    match waited {
        Waited::NoOperator => Some(format!(
            "no operator was connected to session {session_id} for {}",
            secs(settings.grace)
        )),
        Waited::ReplyTimeout => Some(format!(
            "the operator of session {session_id} did not answer within {}",
            secs(settings.reply_timeout)
        )),
        _ => None,
    }
}
