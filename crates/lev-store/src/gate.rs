//! What the tool-call gate keeps (SPEC sections 5 and 6): the decision of
//! every gate call (idempotency by session and request id), session and
//! always grants, and spent nonces.
//!
//! # Invariants
//! - A gate decision, the interaction it opens (when it asks), its audit
//!   entry and its idempotency record commit in one transaction: a retry
//!   finds either all of them or none.
//! - An answer to a tool approval and the grant it records commit in one
//!   transaction, and only when the answer wins.
//! - A nonce spent once is refused for ever (the table is never pruned).
//! - The store decides nothing: the server works out the decision, the
//!   store keeps it.

use async_trait::async_trait;
use lev_protocol::api::{GateResponse, Grant, InteractionView};
use serde_json::Value;
use time::OffsetDateTime;

use crate::{AuditRecord, NewAnswer, NewInteraction, Result, TransitionOutcome};

/// A gate call as it was decided, kept for idempotency.
#[derive(Debug, Clone, PartialEq)]
pub struct GateCallRecord {
    /// The session: with `request_id`, the idempotency key.
    pub session_id: String,
    /// The tool-call id.
    pub request_id: String,
    /// The call as the gate saw it (caller resolved, capabilities sorted):
    /// a later call under the same key is the same call when this is equal.
    pub call: Value,
    /// What the gate answered.
    pub decision: GateResponse,
    /// When it was decided.
    pub created_at: OffsetDateTime,
}

/// A gate decision to record.
#[derive(Debug, Clone)]
pub struct NewGateDecision {
    /// The call and its decision.
    pub record: GateCallRecord,
    /// The interaction to open when the decision is `ask`.
    pub interaction: Option<NewInteraction>,
    /// What decided it, for the audit log.
    pub audit: AuditRecord,
}

/// Outcome of [`GateStore::record_gate_decision`].
#[derive(Debug, Clone)]
pub enum GateRecordOutcome {
    /// Recorded now, with the interaction it opened.
    Recorded {
        /// The record as stored.
        record: Box<GateCallRecord>,
        /// The interaction, when the decision is `ask`.
        interaction: Option<Box<InteractionView>>,
    },
    /// The same call was decided before: its decision stands.
    Existing(Box<GateCallRecord>),
    /// Another call was decided under the same session and request id.
    Conflict(Box<GateCallRecord>),
    /// Asking would pass the session's limit of pending interactions.
    TooManyPending,
}

/// A grant to record beside the answer that makes it.
#[derive(Debug, Clone, PartialEq)]
pub struct NewGrant {
    /// The grant (`id` `gr_...`, assigned by the server).
    pub grant: Grant,
    /// Who made it, for the audit log.
    pub actor: String,
}

/// Outcome of [`GateStore::consume_nonce`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NonceOutcome {
    /// Spent now.
    Spent,
    /// Spent before: refuse.
    AlreadySpent,
}

/// The gate's storage. Every [`crate::Store`] is one.
#[async_trait]
pub trait GateStore: Send + Sync + 'static {
    /// Record a gate decision, idempotently by (session, request id).
    async fn record_gate_decision(&self, new: NewGateDecision) -> Result<GateRecordOutcome>;

    /// The gate call that opened interaction `interaction_id`, if a gate did.
    async fn gate_call_by_interaction(
        &self,
        interaction_id: &str,
    ) -> Result<Option<GateCallRecord>>;

    /// Compare-and-set a tool approval `pending` -> `answered`, recording
    /// `grant` in the same transaction when the answer wins.
    async fn answer_tool_approval(
        &self,
        answer: NewAnswer,
        grant: Option<NewGrant>,
    ) -> Result<TransitionOutcome>;

    /// The grants in force that may cover a call of `caller` to `tool_name`
    /// under `sandbox_mode`: always grants and the session grants of
    /// `conversation_id`. Oldest first.
    async fn grants_for(
        &self,
        caller: &str,
        conversation_id: &str,
        sandbox_mode: &str,
        tool_name: &str,
    ) -> Result<Vec<Grant>>;

    /// Every grant in force, oldest first.
    async fn list_grants(&self) -> Result<Vec<Grant>>;

    /// Revoke a grant; `None` when there is no such grant in force.
    async fn revoke_grant(&self, id: &str, actor: &str) -> Result<Option<Grant>>;

    /// Spend `nonce`, for ever.
    async fn consume_nonce(&self, nonce: &str, actor: &str) -> Result<NonceOutcome>;
}
