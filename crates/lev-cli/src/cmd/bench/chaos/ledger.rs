//! What the servers acknowledged, kept outside them: the bottom of `lev
//! bench chaos`, which the workers write and the checks read.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use lev_protocol::api::GateRequest;

/// What the server acknowledged, kept outside it.
#[derive(Debug, Default)]
pub(super) struct Ledger {
    pub(super) created: Vec<String>,
    pub(super) answered: HashMap<String, String>,
    /// Gate calls allowed, with the nonce of the signed decision given.
    pub(super) gated: Vec<(GateRequest, String)>,
    pub(super) spent: Vec<String>,
    /// Session ids given a session grant for `deploy`.
    pub(super) granted: Vec<String>,
    /// Results a sub-agent posted (`POST /v1/worker/result`), by task.
    pub(super) results: Vec<(String, serde_json::Value)>,
    /// Spawns that finished (200), with the result they returned.
    pub(super) spawned: Vec<(String, serde_json::Value)>,
    /// How many acknowledged writes were checked, in all.
    pub(super) checked: usize,
    /// A wrong answer met outside a worker's loop (the operator's).
    pub(super) wrong: Option<String>,
}

pub(super) type Shared = Arc<Mutex<Ledger>>;

pub(super) fn ledger(shared: &Shared) -> std::sync::MutexGuard<'_, Ledger> {
    shared.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Whether an error means "not acknowledged" (the server went away, or is
/// going away) rather than a wrong answer.
pub(super) fn unacknowledged(e: &lev_client::Error) -> bool {
    match e.status() {
        None => true,
        Some(status) => status == 503,
    }
}
