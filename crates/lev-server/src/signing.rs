//! Signing a decision (SPEC section 5): the fields a gate call or a vote
//! decides, and every other payload field (nonce, issue and expiry times,
//! payload version) filled here, signed with the active key.

use std::collections::BTreeSet;

use lev_approval::{
    ApprovalPayload, PAYLOAD_VERSION, PAYLOAD_VERSION_VOTES, PayloadVote, new_nonce, sign_payload,
};
use lev_protocol::Envelope;
use time::OffsetDateTime;

use crate::error::{ApiError, ApiResult};
use crate::state::AppState;

/// The fields of a decision to sign; every other payload field is filled here.
#[derive(Debug)]
pub struct Decision<'a> {
    pub request_id: &'a str,
    pub turn_id: &'a str,
    pub tool_name: &'a str,
    pub args_json: &'a str,
    pub modified_args_json: &'a str,
    pub approved: bool,
    pub approved_for_session: bool,
    pub covered: &'a BTreeSet<String>,
    pub caller: &'a str,
    pub approver: &'a str,
    pub sandbox_mode: &'a str,
    pub reason: &'a str,
    pub injected_context: &'a str,
    pub conversation_id: &'a str,
    /// The votes that made the decision, for a payload of version 2; `None`
    /// for one person's unsigned decision (version 1).
    pub votes: Option<Vec<PayloadVote>>,
}

/// Sign a decision with the active key: a fresh nonce, `issued_at` now,
/// `expires_at` after `--approval-ttl`. Returns the envelope and its nonce
/// (for the audit log).
pub fn sign(state: &AppState, d: &Decision<'_>) -> ApiResult<(Envelope, String)> {
    let now = OffsetDateTime::now_utc();
    let ttl = time::Duration::try_from(state.settings().approval_ttl)
        .map_err(|e| ApiError::Internal(format!("approval ttl: {e}")))?;
    let payload = ApprovalPayload {
        v: if d.votes.is_some() {
            PAYLOAD_VERSION_VOTES
        } else {
            PAYLOAD_VERSION
        },
        turn_id: d.turn_id.to_owned(),
        request_id: d.request_id.to_owned(),
        tool_name: d.tool_name.to_owned(),
        args_json: d.args_json.to_owned(),
        modified_args_json: d.modified_args_json.to_owned(),
        approved: d.approved,
        approved_for_session: d.approved_for_session,
        // A BTreeSet iterates sorted: the payload's list is sorted.
        covered_capabilities: d.covered.iter().cloned().collect(),
        caller: d.caller.to_owned(),
        approver: d.approver.to_owned(),
        sandbox_mode: d.sandbox_mode.to_owned(),
        reason: d.reason.to_owned(),
        injected_context: d.injected_context.to_owned(),
        conversation_id: d.conversation_id.to_owned(),
        nonce: new_nonce().map_err(|e| ApiError::Internal(format!("no randomness: {e}")))?,
        issued_at: now,
        expires_at: now.checked_add(ttl).ok_or_else(|| {
            ApiError::Internal("approval ttl: the expiry time is out of range".into())
        })?,
        votes: d.votes.clone(),
    };
    Ok((
        sign_payload(&payload, &state.keys().active())
            .map_err(|e| ApiError::Internal(format!("the approval cannot be written: {e}")))?,
        payload.nonce,
    ))
}

/// The conversation a session grant is keyed on: the call's conversation,
/// or its session when the call names none (so a grant never leaks across
/// sessions through an empty conversation).
pub fn grant_conversation<'a>(conversation_id: &'a str, session_id: &'a str) -> &'a str {
    if conversation_id.is_empty() {
        session_id
    } else {
        conversation_id
    }
}
