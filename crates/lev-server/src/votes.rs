//! Votes on tool approvals (SPEC section 13): every answer to a tool
//! approval is a vote, and the vote that completes the quorum (or a deny)
//! decides.
//!
//! - Who may vote: anyone when the policy names nobody, else the rule's
//!   `approvers`, and `escalate_to` once the interaction has waited
//!   `escalate_after_s`. An operator votes only where the rule names it.
//!   Nobody votes twice; `self_approval = false` holds for every vote.
//! - A signed vote is the voter's own DSSE envelope over exactly this
//!   call, this decision and this voter, verified here against the keys
//!   registered to the voter (`GET /v1/people/keys`); a rule with
//!   `require_signed_votes` takes no other.
//! - Approvals count together when they agree on what runs (the same edit,
//!   or none, and the same `grant_args`): `approvals` distinct voters
//!   agreeing decide, with the narrowest scope among them. One deny by an
//!   allowed voter decides.
//! - The store records a vote only against the votes it was counted with
//!   (compare-and-set on their number): a vote that raced another is
//!   counted again, so two concurrent approvals can neither both miss nor
//!   both make the quorum.
//! - A decision with more than one vote, or with a signed vote, is signed
//!   as payload version 2, carrying its votes.

use lev_approval::{PayloadVote, PeopleKeys, VoteEnvelope, VotePayload, verify_vote};
use lev_protocol::api::{InteractionView, PeopleJwks, RespondResult};
use lev_protocol::{
    ApprovalScope, Envelope, Interaction, InteractionStatus, StoredResponse, Vote, VoteBinding,
};
use lev_store::{NewAnswer, NewVote, TransitionOutcome, VoteOutcome};
use serde_json::json;
use time::OffsetDateTime;

use crate::error::{ApiError, ApiResult};
use crate::state::AppState;

/// How often a vote is counted again when other votes keep coming in
/// between its read and its write.
const MAX_RECOUNTS: usize = 16;

/// Who casts a vote.
#[derive(Debug, Clone, Copy)]
pub struct Voter<'a> {
    /// The token's name: the identity every vote and decision carries.
    pub name: &'a str,
    /// Whether it is a session's operator (triage), which votes only where
    /// the rule names it.
    pub operator: bool,
}

/// What a decided vote, or a recorded one, answers.
fn result_of(view: InteractionView, vote: &Vote) -> RespondResult {
    let approvals_needed = Some(view.request.approvals_needed());
    let votes = view.request.votes.clone();
    if view.request.status == InteractionStatus::Pending {
        RespondResult {
            response: vote.response.clone(),
            approval: None,
            status: Some(InteractionStatus::Pending),
            votes,
            approvals_needed,
        }
    } else {
        RespondResult {
            response: view.response.unwrap_or_else(|| vote.response.clone()),
            approval: view.approval,
            status: None,
            votes,
            approvals_needed,
        }
    }
}

/// A list of names for a message.
fn names(list: &[String]) -> String {
    if list.is_empty() {
        "nobody".to_owned()
    } else {
        list.join(", ")
    }
}

/// A time for a person: RFC 3339 to the second.
fn rfc3339(t: OffsetDateTime) -> String {
    t.replace_nanosecond(0)
        .unwrap_or(t)
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default()
}

/// Whether `voter` may vote on `interaction` now.
fn check_voter(
    interaction: &Interaction,
    voter: Voter<'_>,
    response: &StoredResponse,
    signed: bool,
    now: OffsetDateTime,
) -> ApiResult<()> {
    let quorum = interaction.request.quorum.as_ref();
    let named = |name: &str| {
        quorum.is_some_and(|q| {
            q.approvers.iter().any(|a| a == name)
                || (q.escalate_to.iter().any(|a| a == name)
                    && interaction.escalates_at().is_some_and(|t| now >= t))
        })
    };
    let strict = quorum.is_some() || interaction.approvals_needed() > 1;
    let allowed = if voter.operator && strict {
        named(voter.name)
    } else {
        interaction.may_vote(voter.name, now)
    };
    if !allowed {
        let q = quorum.cloned().unwrap_or_default();
        let line = q
            .rule_line
            .map_or_else(String::new, |l| format!(" (policy line {l})"));
        let mut message = format!(
            "{:?} may not vote on this call: the policy{line} lets {} vote",
            voter.name,
            if q.approvers.is_empty() {
                "people, not operators,".to_owned()
            } else {
                names(&q.approvers)
            }
        );
        if let Some(at) = interaction.escalates_at() {
            if now < at {
                message.push_str(&format!(
                    ", and {} from {}",
                    names(&q.escalate_to),
                    rfc3339(at)
                ));
            } else {
                message.push_str(&format!(
                    ", and {} since {}",
                    names(&q.escalate_to),
                    rfc3339(at)
                ));
            }
        }
        return Err(ApiError::Forbidden {
            code: "vote_not_allowed",
            message,
        });
    }
    if let Some(before) = interaction.votes.iter().find(|v| v.voter == voter.name) {
        return Err(ApiError::Conflict {
            code: "already_voted",
            message: format!(
                "{:?} voted on this call already ({} at {}); one vote per person",
                voter.name,
                if before.approved { "approve" } else { "deny" },
                rfc3339(before.at)
            ),
        });
    }
    if quorum.is_some_and(|q| q.require_signed_votes) && !signed {
        return Err(ApiError::Unprocessable {
            code: "signed_vote_required",
            message: "this call needs votes signed with the voter's own key: `lev key init` \
                      once, then `lev respond` signs; or register a passkey in the dashboard"
                .into(),
        });
    }
    if !interaction.grants_may_decide()
        && response.approved == Some(true)
        && response.scope.is_some_and(ApprovalScope::is_grant_scope)
    {
        return Err(ApiError::Invalid(format!(
            "scope: this call needs {} approval{} for each call, so a session or always grant \
             cannot stand in for them; approve once",
            interaction.approvals_needed(),
            if interaction.approvals_needed() == 1 {
                ", signed,"
            } else {
                "s"
            }
        )));
    }
    Ok(())
}

/// Check a signed vote: it verifies under a key registered to `voter`,
/// names `voter`, and binds exactly this call and this answer.
async fn check_signed(
    state: &AppState,
    interaction: &Interaction,
    response: &StoredResponse,
    voter: &str,
    envelope: &Envelope,
) -> ApiResult<()> {
    let invalid = |message: String| ApiError::Unprocessable {
        code: "invalid_vote",
        message,
    };
    let binding: &VoteBinding = interaction.request.vote_binding.as_ref().ok_or_else(|| {
        invalid(
            "vote: this interaction was stored before votes could be signed; answer without one"
                .into(),
        )
    })?;
    let keys = state.store().person_keys(Some(voter)).await?;
    let people = PeopleKeys::from_jwks(&PeopleJwks {
        keys: keys.into_iter().map(|k| k.jwk).collect(),
    })
    .map_err(|e| ApiError::Internal(format!("the keys of {voter}: {e}")))?;
    let verified = verify_vote(envelope, &people).map_err(|e| {
        invalid(match e {
            lev_approval::VoteError::NotSigned { .. } => format!(
                "vote: {e}; the vote must name you ({voter:?}) and be signed by a key registered \
                 to you (lev key init, or a passkey)"
            ),
            other => format!("vote: {other}"),
        })
    })?;
    let approved = response.approved == Some(true);
    let scope = response.scope.unwrap_or_default().as_str();
    let edit = crate::gate::answer::edit_of(response).unwrap_or_default();
    let expected = VotePayload::for_call(
        binding,
        approved,
        scope,
        edit,
        voter,
        verified.payload.issued_at,
    );
    let p = &verified.payload;
    for (field, signed, want) in [
        ("voter", p.voter.as_str(), expected.voter.as_str()),
        ("request_id", &p.request_id, &expected.request_id),
        ("tool_name", &p.tool_name, &expected.tool_name),
        ("args_sha256", &p.args_sha256, &expected.args_sha256),
        (
            "effective_args_sha256",
            &p.effective_args_sha256,
            &expected.effective_args_sha256,
        ),
        (
            "conversation_id",
            &p.conversation_id,
            &expected.conversation_id,
        ),
        ("caller", &p.caller, &expected.caller),
        ("sandbox_mode", &p.sandbox_mode, &expected.sandbox_mode),
        ("scope", &p.scope, &expected.scope),
    ] {
        if signed != want {
            return Err(invalid(format!(
                "vote: signed for {field} {:?}, but this answer is for {want:?}",
                signed.chars().take(100).collect::<String>()
            )));
        }
    }
    if p.approved != approved {
        return Err(invalid(format!(
            "vote: signed as {}, but this answer {}",
            if p.approved { "an approve" } else { "a deny" },
            if approved { "approves" } else { "denies" }
        )));
    }
    let now = OffsetDateTime::now_utc();
    let skew = lev_approval::CLOCK_SKEW;
    if p.issued_at.checked_sub(skew).is_some_and(|t| t > now)
        || p.issued_at
            .checked_add(skew)
            .is_some_and(|t| t < interaction.created_at)
    {
        return Err(invalid(format!(
            "vote: issued at {}, outside the time this call has been waiting (from {} to now)",
            rfc3339(p.issued_at),
            rfc3339(interaction.created_at)
        )));
    }
    Ok(())
}

/// What approvals agree on: the args to run, the grant's patterns, and the
/// context injected into the agent's conversation with the decision (so no
/// voter's text reaches the model under a decision others made without
/// seeing it).
fn agrees(a: &StoredResponse, b: &StoredResponse) -> bool {
    crate::gate::answer::edit_of(a) == crate::gate::answer::edit_of(b)
        && a.grant_args == b.grant_args
        && a.injected_context == b.injected_context
}

fn scope_rank(s: ApprovalScope) -> u8 {
    match s {
        ApprovalScope::Once => 0,
        ApprovalScope::Session => 1,
        ApprovalScope::Always => 2,
    }
}

/// The decision `vote` makes on `interaction`, if it makes one: the answer
/// to store and the votes that made it.
fn tally(interaction: &Interaction, vote: &Vote) -> Option<(StoredResponse, Vec<Vote>)> {
    if !vote.approved {
        let mut all = interaction.votes.clone();
        all.push(vote.clone());
        return Some((vote.response.clone(), all));
    }
    let mut counted: Vec<Vote> = interaction
        .votes
        .iter()
        .filter(|v| v.approved && agrees(&v.response, &vote.response))
        .cloned()
        .collect();
    counted.push(vote.clone());
    if counted.len() < usize::try_from(interaction.approvals_needed()).unwrap_or(usize::MAX) {
        return None;
    }
    let mut response = vote.response.clone();
    let narrowest = counted
        .iter()
        .map(|v| v.response.scope.unwrap_or_default())
        .min_by_key(|s| scope_rank(*s))
        .unwrap_or_default();
    response.scope = Some(narrowest);
    if !narrowest.is_grant_scope() {
        response.grant_args = None;
    }
    Some((response, counted))
}

/// The votes a payload of version 2 carries, or `None` for one person's
/// unsigned decision (version 1).
fn payload_votes(votes: &[Vote]) -> Option<Vec<PayloadVote>> {
    (votes.len() > 1 || votes.iter().any(|v| v.signed)).then(|| {
        votes
            .iter()
            .map(|v| PayloadVote {
                voter: v.voter.clone(),
                approved: v.approved,
                at: v.at,
                envelope: v.envelope.as_ref().map(VoteEnvelope::from),
            })
            .collect()
    })
}

/// Cast `voter`'s vote `response` (validated against the request, its
/// parts stored) on the tool approval `view`: recorded, and the decision
/// when it makes one. A vote that did not decide answers with status
/// `pending`.
///
/// # Errors
/// 403 `vote_not_allowed` or `self_approval`; 409 `already_voted`, or
/// `already_answered` with the winner; 410; 422 `invalid_vote`,
/// `signed_vote_required`, or for an edit the policy denies. Nothing is
/// recorded then.
pub async fn cast(
    state: &AppState,
    mut view: InteractionView,
    mut response: StoredResponse,
    voter: Voter<'_>,
) -> ApiResult<RespondResult> {
    let envelope = response.vote.take();
    crate::gate::answer::check_vote(state, voter.name, &view, &response)?;
    if let Some(envelope) = &envelope {
        check_signed(state, &view.request, &response, voter.name, envelope).await?;
    }
    let id = view.request.id().to_owned();
    for _ in 0..MAX_RECOUNTS {
        let interaction = &view.request;
        let now = OffsetDateTime::now_utc();
        check_voter(interaction, voter, &response, envelope.is_some(), now)?;
        let vote = Vote {
            voter: voter.name.to_owned(),
            approved: response.approved == Some(true),
            at: now,
            signed: envelope.is_some(),
            response: response.clone(),
            envelope: envelope.clone(),
        };
        let decision = match tally(interaction, &vote) {
            None => None,
            Some((decided, votes)) => {
                let prepared = crate::gate::answer::prepare(
                    state,
                    voter.name,
                    &view,
                    &decided,
                    payload_votes(&votes),
                )
                .await?;
                Some((
                    NewAnswer {
                        id: id.clone(),
                        response: decided,
                        approval: Some(prepared.approval),
                        answered_by: voter.name.to_owned(),
                        answered_at: now,
                        audit: prepared.audit,
                    },
                    prepared.grant,
                ))
            }
        };
        let mut audit = std::collections::BTreeMap::new();
        if voter.operator {
            audit.insert("operator".to_owned(), json!(true));
        }
        let outcome = state
            .store()
            .cast_vote(NewVote {
                id: id.clone(),
                vote: vote.clone(),
                seen_votes: interaction.votes.len(),
                audit,
                decision,
            })
            .await?;
        match outcome {
            VoteOutcome::Recorded(recorded) => {
                if recorded.request.status == InteractionStatus::Answered {
                    state.metrics().answered();
                }
                return Ok(result_of(*recorded, &vote));
            }
            VoteOutcome::AlreadyVoted(again) => {
                view = *again;
            }
            VoteOutcome::Stale(again) => {
                view = *again;
            }
            VoteOutcome::Closed(TransitionOutcome::AlreadyAnswered(v)) => {
                return Err(crate::interactions::already_answered(*v));
            }
            VoteOutcome::Closed(TransitionOutcome::Gone(v)) => {
                return Err(crate::interactions::gone(&v));
            }
            VoteOutcome::Closed(TransitionOutcome::NotFound) => {
                return Err(ApiError::NotFound(format!("no interaction {id:?}")));
            }
            VoteOutcome::Closed(TransitionOutcome::Done(v)) => {
                return Ok(result_of(*v, &vote));
            }
        }
    }
    Err(ApiError::Conflict {
        code: "busy",
        message: format!("votes on {id} kept coming in while this one was counted; send it again"),
    })
}
