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
//!   its caster saw (compare-and-set on the list) and the tokens and keys
//!   it relies on still hold, so two concurrent votes can never both miss
//!   (or both make) the quorum, and no revocation is outlived. The vote
//!   that decides commits with the answer and the grant it records, in one
//!   transaction.
//! - A nonce spent once is refused for ever (the table is never pruned).
//!   Every approving decision stored (a gate allow, an answer's approval)
//!   notes its nonce's owner (session and caller) in the same transaction.
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

/// A gate decision to record: the call, and what the decision opens and
/// audits; the decision itself comes from its [`GateSigner`].
#[derive(Debug, Clone)]
pub struct NewGateDecision {
    /// The session: with `request_id`, the idempotency key.
    pub session_id: String,
    /// The tool-call id.
    pub request_id: String,
    /// The call as the gate saw it (see [`GateCallRecord::call`]).
    pub call: Value,
    /// When it was decided.
    pub created_at: OffsetDateTime,
    /// The interaction to open when the decision is `ask`.
    pub interaction: Option<NewInteraction>,
    /// What decided it, for the audit log.
    pub audit: AuditRecord,
}

impl NewGateDecision {
    /// The record kept for idempotency, with the decision the signer gave.
    #[must_use]
    pub fn record(&self, decision: GateResponse) -> GateCallRecord {
        GateCallRecord {
            session_id: self.session_id.clone(),
            request_id: self.request_id.clone(),
            call: self.call.clone(),
            decision,
            created_at: self.created_at,
        }
    }
}

/// Gives a gate call's decision (signing its envelope) once the store knows
/// it will record it: called at most once, inside the recording
/// transaction, after the store found no earlier decision under the same
/// (session, request id), so a repeat signs nothing. It may add to the
/// audit entry (the envelope's nonce). An error aborts the recording.
pub type GateSigner = Box<dyn FnOnce(&mut AuditRecord) -> Result<GateResponse> + Send>;

/// A [`GateSigner`] for a decision that needs no signing (an ask), or one
/// made before.
#[must_use]
pub fn decided(decision: GateResponse) -> GateSigner {
    Box::new(move |_| Ok(decision))
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
    /// The votes the interaction held when the caster read it: the vote is
    /// recorded only if it holds exactly these still (compare-and-set on the
    /// whole list, so a vote voided by a revocation and another cast since
    /// are not taken for the same state).
    pub seen_votes: Vec<lev_protocol::Vote>,
    /// What the vote and the decision it makes rely on: recorded only while
    /// all of it still holds.
    pub authority: VoteAuthority,
    /// Extra details for the `interaction.voted` audit entry.
    pub audit: std::collections::BTreeMap<String, Value>,
    /// The answer this vote decides (quorum reached, or a deny), with the
    /// grant it records; `None` while votes are still needed.
    pub decision: Option<(NewAnswer, Option<NewGrant>)>,
}

/// The tokens and people's keys a vote relies on (SPEC section 13): the
/// caster's, and when the vote decides, those of every vote it counts. The
/// store records the vote only while each token exists with a role that
/// votes (approver, admin or operator) and each key is in force, checked in
/// the recording transaction, so a revocation that commits first is never
/// outlived by a vote or a decision counted before it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VoteAuthority {
    /// Token names.
    pub tokens: Vec<String>,
    /// People's key ids (`person:NAME:N`).
    pub keys: Vec<String>,
}

/// The votes of `votes` that `void` strikes out: the interaction `id`'s
/// votes after, and the voided ones as the revocation's audit entry lists
/// them (`{"interaction", "voter", "approved", "signed", "at"}`). Shared by
/// every backend, so the audit reads the same on each.
#[must_use]
pub fn void_votes(
    id: &str,
    votes: &[lev_protocol::Vote],
    void: impl Fn(&lev_protocol::Vote) -> bool,
) -> (Vec<lev_protocol::Vote>, Vec<Value>) {
    let mut kept = Vec::with_capacity(votes.len());
    let mut voided = Vec::new();
    for v in votes {
        if void(v) {
            voided.push(serde_json::json!({
                "interaction": id,
                "voter": v.voter,
                "approved": v.approved,
                "signed": v.signed,
                "at": crate::codec::rfc3339(v.at),
            }));
        } else {
            kept.push(v.clone());
        }
    }
    (kept, voided)
}

/// Whether `vote` carries a signature under key `kid` (the server keeps
/// only the signature that verified, its `keyid` the key's).
#[must_use]
pub fn signed_with(vote: &lev_protocol::Vote, kid: &str) -> bool {
    vote.envelope
        .as_ref()
        .is_some_and(|e| e.signatures.iter().any(|s| s.keyid == kid))
}

/// Outcome of [`GateStore::cast_vote`].
#[derive(Debug, Clone)]
pub enum VoteOutcome {
    /// Recorded; the view holds it (and the decision, when it made one).
    Recorded(Box<InteractionView>),
    /// The voter had voted on it before: nothing changed.
    AlreadyVoted(Box<InteractionView>),
    /// The votes changed since the caster read the interaction (another
    /// vote came in, or a revocation voided one), or a token or key in its
    /// [`VoteAuthority`] is gone: nothing changed; read it again and
    /// recount.
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
    /// Record a gate decision, idempotently by (session, request id): a
    /// repeat of the same call answers with the decision first recorded,
    /// and `sign` is called only when this call records (after the repeat
    /// check, in the recording transaction).
    async fn record_gate_decision(
        &self,
        new: NewGateDecision,
        sign: GateSigner,
    ) -> Result<GateRecordOutcome>;

    /// The gate call that opened interaction `interaction_id`, if a gate did.
    async fn gate_call_by_interaction(
        &self,
        interaction_id: &str,
    ) -> Result<Option<GateCallRecord>>;

    /// Record a vote on a pending tool approval, once per voter, only when
    /// it still holds exactly `seen_votes` and every token and key of the
    /// vote's `authority` still holds (compare-and-set), with its event
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

    /// Whose approval `nonce` is: the session and caller of the approving
    /// decision that carries it (noted by the transaction that stored the
    /// decision); `None` for a nonce no stored approval carries (one signed
    /// before lev noted them, or not lev's).
    async fn nonce_owner(&self, nonce: &str) -> Result<Option<NonceOwner>>;
}

/// The session and caller an approval names, noted beside its nonce.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NonceOwner {
    /// The session of the gate call or interaction it decides.
    pub session_id: String,
    /// The caller it was made for (empty for none).
    pub caller: String,
}
