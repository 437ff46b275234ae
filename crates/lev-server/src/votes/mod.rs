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
//! - Votes outlive no authority: the tally is made when a vote comes in,
//!   from the votes whose voter's token still exists with a role that
//!   votes and whose signed vote still verifies under the voter's keys in
//!   force now ([`Standing`]). Revoking a token or a key voids, in the
//!   store, the pending votes it backed (audited as `votes_voided`).
//! - The store records a vote only against the votes it was counted with
//!   (compare-and-set on the list) and while the tokens and keys it relies
//!   on hold: a vote that raced another vote or a revocation is counted
//!   again, so two concurrent approvals can neither both miss nor both
//!   make the quorum, and a revocation is never outlived.
//! - A decision with more than one vote, or with a signed vote, is signed
//!   as payload version 2, carrying its votes. Before it is stored, the
//!   server checks it as `lev verify --require-votes` would, under the
//!   people's keys in force ([`check_decision`]): it never signs a
//!   decision its own offline check refuses.
//! - [`decision`]: the checks every vote passes (self-approval, the edited
//!   call checked against the policy again) and the signed decision the
//!   deciding vote makes, with the grant it records.

pub mod decision;

use std::collections::BTreeMap;

use lev_approval::{PayloadVote, PeopleKeys, VoteEnvelope, VotePayload, verify_vote};
use lev_protocol::api::{InteractionView, PeopleJwks, RespondResult, Role};
use lev_protocol::{
    ApprovalScope, Envelope, Interaction, InteractionStatus, StoredResponse, Vote, VoteBinding,
};
use lev_store::{NewAnswer, NewVote, TransitionOutcome, VoteAuthority, VoteOutcome};
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
    let edit = decision::edit_of(response).unwrap_or_default();
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

/// The tokens and people's keys as they stand while a vote is counted:
/// which votes still count, and what the vote relies on.
struct Standing {
    /// Every token's role, by name.
    roles: BTreeMap<String, Role>,
    /// The keys in force of the voters (and the caster) of the interaction.
    people: PeopleKeys,
}

/// Whether a token of `role` votes: a person's (approver, admin) or a
/// session's operator.
fn votes_as(role: Role) -> bool {
    matches!(role, Role::Approver | Role::Admin | Role::Operator)
}

impl Standing {
    /// Read the tokens and the keys in force of everyone who voted on
    /// `interaction` and of `caster`.
    async fn read(state: &AppState, interaction: &Interaction, caster: &str) -> ApiResult<Self> {
        let roles = state
            .store()
            .list_tokens()
            .await?
            .into_iter()
            .map(|t| (t.name, t.role))
            .collect();
        let mut names: Vec<&str> = interaction
            .votes
            .iter()
            .filter(|v| v.envelope.is_some())
            .map(|v| v.voter.as_str())
            .chain([caster])
            .collect();
        names.sort_unstable();
        names.dedup();
        let mut keys = Vec::new();
        for name in names {
            keys.extend(
                state
                    .store()
                    .person_keys(Some(name))
                    .await?
                    .into_iter()
                    .map(|k| k.jwk),
            );
        }
        let people = PeopleKeys::from_jwks(&PeopleJwks { keys })
            .map_err(|e| ApiError::Internal(format!("people's keys in the store: {e}")))?;
        Ok(Self { roles, people })
    }

    /// Whether `name`'s token exists with a role that votes.
    fn votes(&self, name: &str) -> bool {
        self.roles.get(name).is_some_and(|r| votes_as(*r))
    }

    /// The key `envelope` (a vote by `voter`) verifies under now, if any.
    fn key_of(&self, voter: &str, envelope: &Envelope) -> Option<String> {
        verify_vote(envelope, &self.people)
            .ok()
            .filter(|v| v.payload.voter == voter)
            .map(|v| v.kid)
    }

    /// The votes of `votes` that still count, each with the key its
    /// signature verifies under (none for an unsigned vote): the voter's
    /// token exists with a role that votes, and a signed vote verifies
    /// under a key in force.
    fn counting<'v>(&self, votes: &'v [Vote]) -> Vec<(&'v Vote, Option<String>)> {
        votes
            .iter()
            .filter(|v| self.votes(&v.voter))
            .filter_map(|v| match &v.envelope {
                None => Some((v, None)),
                Some(e) => self.key_of(&v.voter, e).map(|kid| (v, Some(kid))),
            })
            .collect()
    }
}

/// `envelope` (a vote by `voter`) with only the signature that verifies
/// under `people`, its `keyid` that key's, and that key's id: what the
/// server stores and signs into a decision, so a revocation finds every
/// vote its key signed by the key id. `None` when no signature verifies.
fn normalized(voter: &str, envelope: &Envelope, people: &PeopleKeys) -> Option<(Envelope, String)> {
    envelope.signatures.iter().find_map(|s| {
        let one = Envelope {
            payload_type: envelope.payload_type.clone(),
            payload: envelope.payload.clone(),
            signatures: vec![s.clone()],
        };
        let verified = verify_vote(&one, people).ok()?;
        if verified.payload.voter != voter {
            return None;
        }
        let mut kept = one;
        if let Some(sig) = kept.signatures.first_mut() {
            sig.keyid.clone_from(&verified.kid);
        }
        Some((kept, verified.kid))
    })
}

/// Check the decision `approval` (signed, not yet stored) as an offline
/// verifier would with the people's keys in force: every vote it carries
/// that is signed verifies and binds this call, and where the rule asks
/// for signed votes, an approval carries `approvals_needed` of them. The
/// server never stores a decision `lev verify --require-votes` would
/// refuse.
///
/// # Errors
/// 409 `decision_unverifiable`, naming each vote that fails; nothing is
/// recorded.
fn check_decision(
    state: &AppState,
    approval: &Envelope,
    people: &PeopleKeys,
    interaction: &Interaction,
) -> ApiResult<()> {
    let mut trusted = lev_approval::TrustedKeys::new();
    for jwk in state.keys().jwks().keys {
        if let Ok(raw) = lev_approval::decode_base64(&jwk.x) {
            let _ = trusted.insert_bytes(&raw);
        }
    }
    let decision =
        lev_approval::verify(approval, &trusted, OffsetDateTime::now_utc()).map_err(|e| {
            ApiError::Internal(format!("the decision just signed does not verify: {e}"))
        })?;
    let refuse = |why: String| ApiError::Conflict {
        code: "decision_unverifiable",
        message: format!(
            "the votes would make a decision that does not verify offline under the people's \
             keys in force ({why}); nothing was signed or recorded: vote again"
        ),
    };
    let votes = decision.payload.votes.clone().unwrap_or_default();
    let checks = decision.check_votes(people);
    let failed: Vec<String> = votes
        .iter()
        .zip(&checks)
        .filter(|(v, c)| v.envelope.is_some() && c.result.is_err())
        .map(|(v, c)| match &c.result {
            Err(e) => format!("{}: {e}", v.voter),
            Ok(_) => v.voter.clone(),
        })
        .collect();
    if !failed.is_empty() {
        return Err(refuse(failed.join("; ")));
    }
    let signed_required = interaction
        .request
        .quorum
        .as_ref()
        .is_some_and(|q| q.require_signed_votes);
    if signed_required && decision.payload.approved {
        let needed = usize::try_from(interaction.approvals_needed()).unwrap_or(usize::MAX);
        decision
            .require_signed_votes(people, needed)
            .map_err(|e| refuse(e.to_string()))?;
    }
    Ok(())
}

/// What approvals agree on: the args to run, the grant's patterns, and the
/// context injected into the agent's conversation with the decision (so no
/// voter's text reaches the model under a decision others made without
/// seeing it).
fn agrees(a: &StoredResponse, b: &StoredResponse) -> bool {
    decision::edit_of(a) == decision::edit_of(b)
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

/// The decision `vote` makes on `interaction`, counting the votes of
/// `standing` (those that still count), if it makes one: the answer to
/// store and the votes that made it.
fn tally(
    interaction: &Interaction,
    standing: &[&Vote],
    vote: &Vote,
) -> Option<(StoredResponse, Vec<Vote>)> {
    if !vote.approved {
        let mut all: Vec<Vote> = standing.iter().map(|v| (*v).clone()).collect();
        all.push(vote.clone());
        return Some((vote.response.clone(), all));
    }
    let mut counted: Vec<Vote> = standing
        .iter()
        .filter(|v| v.approved && agrees(&v.response, &vote.response))
        .map(|v| (*v).clone())
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
/// 401 when the voter's token was revoked meanwhile; 403 `vote_not_allowed`
/// or `self_approval`; 409 `already_voted`, `decision_unverifiable`, or
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
    decision::check_vote(state, voter.name, &view, &response)?;
    if let Some(envelope) = &envelope {
        check_signed(state, &view.request, &response, voter.name, envelope).await?;
    }
    let id = view.request.id().to_owned();
    for _ in 0..MAX_RECOUNTS {
        let interaction = &view.request;
        let now = OffsetDateTime::now_utc();
        check_voter(interaction, voter, &response, envelope.is_some(), now)?;
        // Tokens and keys as they stand now: the caster's own, and which
        // of the votes cast before still count.
        let standing = Standing::read(state, interaction, voter.name).await?;
        if !standing.votes(voter.name) {
            return Err(ApiError::Unauthorized(format!(
                "the token {:?} was revoked (or no longer votes) while its vote was counted; \
                 nothing was recorded",
                voter.name
            )));
        }
        let signed = still_signed(voter.name, envelope.as_ref(), &standing.people)?;
        let vote = Vote {
            voter: voter.name.to_owned(),
            approved: response.approved == Some(true),
            at: now,
            signed: signed.is_some(),
            response: response.clone(),
            envelope: signed.as_ref().map(|(e, _)| e.clone()),
        };
        let mut authority = VoteAuthority {
            tokens: vec![voter.name.to_owned()],
            keys: signed.iter().map(|(_, kid)| kid.clone()).collect(),
        };
        let counted = Counted {
            view: &view,
            standing: &standing,
            vote: &vote,
            now,
        };
        let decision = counted.decision(state, voter.name, &mut authority).await?;
        let mut audit = std::collections::BTreeMap::new();
        if voter.operator {
            audit.insert("operator".to_owned(), json!(true));
        }
        let new_vote = NewVote {
            id: id.clone(),
            vote: vote.clone(),
            seen_votes: interaction.votes.clone(),
            authority,
            audit,
            decision,
        };
        let outcome = state
            .timed("cast_vote", state.store().cast_vote(new_vote))
            .await?;
        match settled(state, &id, outcome, &vote) {
            Ok(done) => return done,
            Err(again) => view = *again,
        }
    }
    Err(ApiError::Conflict {
        code: "busy",
        message: format!("votes on {id} kept coming in while this one was counted; send it again"),
    })
}

/// The voter's signed vote, normalized, with the id of the key in force
/// that still verifies it; `None` for an unsigned vote.
///
/// # Errors
/// 422 `invalid_vote` when no key of the voter's in force verifies it any
/// more (revoked while the vote was counted).
fn still_signed(
    voter: &str,
    envelope: Option<&Envelope>,
    people: &PeopleKeys,
) -> ApiResult<Option<(Envelope, String)>> {
    let Some(e) = envelope else {
        return Ok(None);
    };
    normalized(voter, e, people)
        .map(Some)
        .ok_or_else(|| ApiError::Unprocessable {
            code: "invalid_vote",
            message: format!(
                "vote: no key in force of {voter:?} verifies it any more (revoked while the \
                 vote was counted); nothing was recorded"
            ),
        })
}

/// A vote counted with the votes standing before it.
struct Counted<'a> {
    view: &'a InteractionView,
    standing: &'a Standing,
    vote: &'a Vote,
    now: OffsetDateTime,
}

impl Counted<'_> {
    /// The answer (and grant) the vote decides, signed and checked, when it
    /// completes the quorum or denies; `authority` gains every token and
    /// key the decision relies on.
    async fn decision(
        &self,
        state: &AppState,
        voter: &str,
        authority: &mut VoteAuthority,
    ) -> ApiResult<Option<(NewAnswer, Option<lev_store::NewGrant>)>> {
        let interaction = &self.view.request;
        let counting = self.standing.counting(&interaction.votes);
        let counted: Vec<&Vote> = counting.iter().map(|(v, _)| *v).collect();
        let Some((decided, votes)) = tally(interaction, &counted, self.vote) else {
            return Ok(None);
        };
        // The decision relies on every vote it carries.
        for v in &votes {
            if v.voter == voter {
                continue;
            }
            authority.tokens.push(v.voter.clone());
            if let Some((_, Some(kid))) = counting.iter().find(|(c, _)| c.voter == v.voter) {
                authority.keys.push(kid.clone());
            }
        }
        let prepared =
            decision::prepare(state, voter, self.view, &decided, payload_votes(&votes)).await?;
        check_decision(
            state,
            &prepared.approval,
            &self.standing.people,
            interaction,
        )?;
        Ok(Some((
            NewAnswer {
                id: interaction.id().to_owned(),
                response: decided,
                approval: Some(prepared.approval),
                answered_by: voter.to_owned(),
                answered_at: self.now,
                audit: prepared.audit,
            },
            prepared.grant,
        )))
    }
}

/// What the store's answer to a vote means: the caller's result (`Ok`), or
/// the interaction as it now stands, to count the vote again (`Err`).
fn settled(
    state: &AppState,
    id: &str,
    outcome: VoteOutcome,
    vote: &Vote,
) -> Result<ApiResult<RespondResult>, Box<InteractionView>> {
    Ok(match outcome {
        VoteOutcome::Recorded(recorded) => {
            if recorded.request.status == InteractionStatus::Answered {
                state.metrics().answered();
                state.decided(&recorded.request, approved_of(&recorded));
            }
            Ok(result_of(*recorded, vote))
        }
        VoteOutcome::AlreadyVoted(again) | VoteOutcome::Stale(again) => return Err(again),
        VoteOutcome::Closed(TransitionOutcome::AlreadyAnswered(v)) => {
            Err(crate::error::already_answered(*v))
        }
        VoteOutcome::Closed(TransitionOutcome::Gone(v)) => Err(crate::error::gone(&v)),
        VoteOutcome::Closed(TransitionOutcome::NotFound) => {
            Err(ApiError::NotFound(format!("no interaction {id:?}")))
        }
        VoteOutcome::Closed(TransitionOutcome::Done(v)) => {
            state.decided(&v.request, approved_of(&v));
            Ok(result_of(*v, vote))
        }
    })
}

/// Whether a decided tool approval was approved, as its answer says.
fn approved_of(view: &InteractionView) -> Option<bool> {
    view.response.as_ref().and_then(|r| r.approved)
}
