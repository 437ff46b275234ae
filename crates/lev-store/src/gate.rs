//! What the tool-call gate keeps (SPEC sections 5 and 6): the decision of
//! every gate call (idempotency by session and request id), session and
//! always grants, and spent nonces.
//!
//! # Invariants
//! - A gate decision, the interaction it opens (when it asks), its audit
//!   entry and its idempotency record commit in one transaction: a retry
//!   finds either all of them or none.
//! - A vote on a tool approval is recorded only while the interaction is
//!   pending, once per voter, and only when the votes are still the ones
//!   its caster saw (compare-and-set on their number), so two concurrent
//!   votes can never both miss (or both make) the quorum. The vote that
//!   decides commits with the answer and the grant it records, in one
//!   transaction.
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

/// A vote to record (SPEC section 13), and the decision it makes, if any.
#[derive(Debug, Clone)]
pub struct NewVote {
    /// The interaction.
    pub id: String,
    /// The vote.
    pub vote: lev_protocol::Vote,
    /// How many votes the interaction held when the caster read it: the
    /// vote is recorded only if it holds exactly these many still.
    pub seen_votes: usize,
    /// Extra details for the `interaction.voted` audit entry.
    pub audit: std::collections::BTreeMap<String, Value>,
    /// The answer this vote decides (quorum reached, or a deny), with the
    /// grant it records; `None` while votes are still needed.
    pub decision: Option<(NewAnswer, Option<NewGrant>)>,
}

/// Outcome of [`GateStore::cast_vote`].
#[derive(Debug, Clone)]
pub enum VoteOutcome {
    /// Recorded; the view holds it (and the decision, when it made one).
    Recorded(Box<InteractionView>),
    /// The voter had voted on it before: nothing changed.
    AlreadyVoted(Box<InteractionView>),
    /// Another vote came in since the caster read the interaction: nothing
    /// changed; read it again and recount.
    Stale(Box<InteractionView>),
    /// It is no longer pending (or does not exist): nothing changed.
    Closed(TransitionOutcome),
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

    /// Record a vote on a pending tool approval, once per voter, only when
    /// it still holds `seen_votes` votes (compare-and-set), with its event
    /// (`interaction.voted`) and audit entry; and, when it carries the
    /// decision, the answer (compare-and-set `pending` -> `answered`) and
    /// its grant, all in one transaction.
    async fn cast_vote(&self, vote: NewVote) -> Result<VoteOutcome>;

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

    /// Spend `nonce`, for ever, in every spelling: the store remembers
    /// `lev_approval::nonce_key` of it (its bytes, whether written in
    /// standard or URL-safe base64, padded or not), never the text given.
    async fn consume_nonce(&self, nonce: &str, actor: &str) -> Result<NonceOutcome>;
}
