//! How a question ended, as a waiter sees it: shared by [`crate::worker`]
//! (which waits) and [`crate::render`] (which turns it into a model's text).

use std::time::Duration;

use lev_protocol::{Envelope, StoredResponse};

/// How an interaction ended, as a waiter sees it.
// One outcome per question: its size does not matter, matching on it plainly does.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// Someone answered (a person, an operator, a grant, a timeout's `choice`).
    Answered {
        /// The answer; attached parts are references to `GET /v1/blobs`.
        response: StoredResponse,
        /// The signed decision, for a tool approval.
        approval: Option<Envelope>,
        /// Who answered, when the server says.
        answered_by: Option<String>,
    },
    /// Past its timeout with `on_timeout: deny`: a plain deny.
    Expired,
    /// Cancelled by the worker, or past its timeout with `on_timeout: cancel`.
    Cancelled,
    /// This waiter's own deadline passed with the interaction still pending.
    TimedOut {
        /// How long it waited.
        waited: Duration,
    },
}
