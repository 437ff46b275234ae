//! A person's (or an operator's) vote on a `tool_approval` interaction, and
//! the decision the deciding vote makes, before the store's compare-and-set:
//! who may approve, the edited call checked against the policy again, the
//! grant it records, the signed decision.

use std::collections::{BTreeMap, BTreeSet};

use lev_approval::policy::{QuorumRule, RuleDecision};
use lev_approval::{ArgsMatcher, PayloadVote};
use lev_protocol::api::{Grant, InteractionView};
use lev_protocol::validate::check_args_json;
use lev_protocol::{ApprovalScope, Envelope, InteractionKind, StoredResponse};
use lev_store::NewGrant;
use serde_json::{Value, json};
use time::OffsetDateTime;

use crate::error::{ApiError, ApiResult};
use crate::signing::{Decision, grant_conversation, sign};
use crate::state::AppState;

/// What the answer commits with: its signed decision, the grant it makes,
/// and what the audit entry says beside the answer.
#[derive(Debug)]
pub struct Prepared {
    /// The signed decision.
    pub approval: Envelope,
    /// A session or always grant, for the same transaction as the answer.
    pub grant: Option<NewGrant>,
    /// Merged into the `interaction.answered` audit entry.
    pub audit: BTreeMap<String, Value>,
}

/// The parts of a tool approval a vote is checked against.
struct ToolCall<'a> {
    tool_name: &'a str,
    args_json: &'a str,
    missing_capabilities: &'a [String],
    sandbox_mode: &'a str,
}

fn tool_call(view: &InteractionView) -> ApiResult<ToolCall<'_>> {
    match &view.request.request.kind {
        InteractionKind::ToolApproval {
            tool_name,
            args_json,
            missing_capabilities,
            sandbox_mode,
            ..
        } => Ok(ToolCall {
            tool_name,
            args_json,
            missing_capabilities,
            sandbox_mode,
        }),
        _ => Err(ApiError::Internal(
            "a tool approval's vote on an interaction that is not one".into(),
        )),
    }
}

/// The approver's edit of an approval, if any (an edit on a deny means
/// nothing and was refused by validation).
pub fn edit_of(response: &StoredResponse) -> Option<&str> {
    if response.approved == Some(true) {
        response
            .modified_args_json
            .as_deref()
            .filter(|e| !e.is_empty())
    } else {
        None
    }
}

/// Check one vote by `voter` (already validated against the request):
/// self-approval, an edit the policy denies, grant patterns that do not
/// compile. Every vote passes these, not only the one that decides.
///
/// # Errors
/// 403 `self_approval` when the policy forbids approving one's own call;
/// 422 for an edit that is not JSON or that a deny rule matches, and for
/// `grant_args` that do not compile. Nothing is recorded.
pub fn check_vote(
    state: &AppState,
    voter: &str,
    view: &InteractionView,
    response: &StoredResponse,
) -> ApiResult<()> {
    let call = tool_call(view)?;
    let settings = state.settings();
    let policy = &settings.policy;
    let caller = view.request.request.caller.as_deref().unwrap_or_default();
    let approved = response.approved == Some(true);
    // Compared folded: a caller spelled `Ann` or `ann.` is ann's own call.
    if approved
        && !policy.self_approval
        && !caller.is_empty()
        && lev_protocol::ids::names_alike(caller, voter)
    {
        return Err(ApiError::Forbidden {
            code: "self_approval",
            message: format!(
                "the policy forbids self-approval: {voter:?} may not approve a call made on \
                 their own behalf; another person must decide"
            ),
        });
    }
    if let Some(edit) = edit_of(response) {
        check_args_json("modified_args_json", edit, &settings.limits)?;
        let edited: Value = serde_json::from_str(edit).map_err(|e| {
            ApiError::Invalid(format!("modified_args_json: expected JSON text, {e}"))
        })?;
        // The edited call's rule, found once for the deny and the quorum.
        let rule = policy.first_matching_rule(call.tool_name, &edited);
        if let Some(rule) = rule.filter(|r| r.decision == RuleDecision::Deny) {
            return Err(ApiError::Invalid(format!(
                "modified_args_json: the policy denies the edited call (rule at line {} of {}): {}",
                rule.line, settings.policy_source, rule.reason
            )));
        }
        // An edit may not slip under a lighter quorum: the edited call must
        // need no more than the call that was asked about.
        if let Some(edited_quorum) = policy.quorum_of(rule, call.tool_name)
            && let Some(why) = stricter(edited_quorum, &view.request.request)
        {
            return Err(ApiError::Invalid(format!(
                "modified_args_json: the edited call needs {why} (rule at line {} of {}), more \
                 than this call was asked under; deny it with feedback, and let the agent ask \
                 for the edited call itself",
                edited_quorum.line, settings.policy_source
            )));
        }
    }
    if approved
        && response.scope.unwrap_or_default().is_grant_scope()
        && let Some(patterns) = &response.grant_args
    {
        ArgsMatcher::compile(patterns)
            .map_err(|e| ApiError::Invalid(format!("grant_args: {e}")))?;
    }
    Ok(())
}

/// What the quorum `edited` (of an edited call) asks beyond the quorum the
/// interaction `asked` was opened under, if anything: more approvals,
/// signed votes, or fewer people allowed to vote.
fn stricter(edited: &QuorumRule, asked: &lev_protocol::InteractionRequest) -> Option<String> {
    let approvals = asked.approvals_needed.unwrap_or(1);
    if edited.approvals > approvals {
        return Some(format!("{} approvals, not {approvals}", edited.approvals));
    }
    let quorum = asked.quorum.as_ref();
    if edited.require_signed_votes && !quorum.is_some_and(|q| q.require_signed_votes) {
        return Some("votes signed with the voters' own keys".to_owned());
    }
    // Who may vote: everyone the asked quorum lets vote must be allowed by
    // the edited one (empty: any approver).
    let asked_voters: Vec<&String> = quorum.map_or_else(Vec::new, |q| {
        if q.approvers.is_empty() {
            Vec::new()
        } else {
            q.approvers.iter().chain(&q.escalate_to).collect()
        }
    });
    if !edited.approvers.is_empty() {
        let mut edited_voters = edited.approvers.clone();
        edited_voters.extend(edited.escalate_to.iter().cloned());
        if asked_voters.is_empty() {
            return Some(format!("votes from {} only", edited.approvers.join(", ")));
        }
        if let Some(outsider) = asked_voters.iter().find(|v| !edited_voters.contains(v)) {
            return Some(format!(
                "votes from {} only (not {outsider})",
                edited.approvers.join(", ")
            ));
        }
    }
    None
}

/// Sign the decision `response` that `approver`'s vote makes on the tool
/// approval `view` (checked by [`check_vote`]), with the grant it records.
/// `votes` are the votes that made it, for a payload of version 2 (`None`:
/// one person's unsigned decision, version 1).
///
/// # Errors
/// 500 without randomness or a signing key; the store's.
pub async fn prepare(
    state: &AppState,
    approver: &str,
    view: &InteractionView,
    response: &StoredResponse,
    votes: Option<Vec<PayloadVote>>,
) -> ApiResult<Prepared> {
    let call = tool_call(view)?;
    let request = &view.request.request;
    let settings = state.settings();
    let id = view.request.id();
    let caller = request.caller.as_deref().unwrap_or_default();
    let approved = response.approved == Some(true);
    let edit = edit_of(response);
    let scope = response.scope.unwrap_or_default();
    let for_session = approved && scope.is_grant_scope();
    let covered: BTreeSet<String> = call.missing_capabilities.iter().cloned().collect();
    let now = OffsetDateTime::now_utc();
    let grant = for_session
        .then(|| grant_of(approver, view, &call, response, &covered, now))
        .transpose()?;
    // A gate call's decision is bound to the tool-call id it was gated under.
    let gate = state.store().gate_call_by_interaction(id).await?;
    let request_id = gate.as_ref().map_or(id, |g| g.request_id.as_str());
    let voters: Option<Vec<String>> = votes
        .as_ref()
        .map(|v| v.iter().map(|v| v.voter.clone()).collect());
    let (approval, nonce) = sign(
        state,
        &Decision {
            request_id,
            turn_id: request.turn_id.as_deref().unwrap_or_default(),
            tool_name: call.tool_name,
            args_json: call.args_json,
            modified_args_json: edit.unwrap_or_default(),
            approved,
            approved_for_session: for_session,
            covered: &covered,
            caller,
            approver,
            sandbox_mode: call.sandbox_mode,
            reason: response.reason.as_deref().unwrap_or_default(),
            injected_context: response.injected_context.as_deref().unwrap_or_default(),
            conversation_id: request.conversation_id.as_deref().unwrap_or_default(),
            votes,
        },
    )?;
    let mut audit = audit_of(approver, response, grant.as_ref(), gate.as_ref(), voters);
    audit.insert("policy".to_owned(), json!(settings.policy_source));
    audit.insert("nonce".to_owned(), json!(nonce));
    audit.insert(
        "approval_payload".to_owned(),
        Value::String(approval.payload.clone()),
    );
    Ok(Prepared {
        approval,
        grant,
        audit,
    })
}

/// The session or always grant an approval with a grant scope records.
fn grant_of(
    approver: &str,
    view: &InteractionView,
    call: &ToolCall<'_>,
    response: &StoredResponse,
    covered: &BTreeSet<String>,
    now: OffsetDateTime,
) -> ApiResult<NewGrant> {
    let request = &view.request.request;
    let scope = response.scope.unwrap_or_default();
    let conversation = (scope == ApprovalScope::Session).then(|| {
        grant_conversation(
            request.conversation_id.as_deref().unwrap_or_default(),
            &request.session_id,
        )
        .to_owned()
    });
    Ok(NewGrant {
        grant: Grant {
            id: crate::ids::new_id("gr_", now)
                .map_err(|e| ApiError::Internal(format!("no randomness: {e}")))?,
            scope,
            caller: request.caller.as_deref().unwrap_or_default().to_owned(),
            conversation_id: conversation,
            sandbox_mode: call.sandbox_mode.to_owned(),
            tool_name: call.tool_name.to_owned(),
            covered_capabilities: covered.iter().cloned().collect(),
            grant_args: response.grant_args.clone(),
            approver: approver.to_owned(),
            interaction_id: Some(view.request.id().to_owned()),
            created_at: now,
        },
        actor: approver.to_owned(),
    })
}

/// What the `interaction.answered` audit entry says of the decision,
/// before its policy, nonce and payload.
fn audit_of(
    approver: &str,
    response: &StoredResponse,
    grant: Option<&NewGrant>,
    gate: Option<&lev_store::GateCallRecord>,
    voters: Option<Vec<String>>,
) -> BTreeMap<String, Value> {
    let approved = response.approved == Some(true);
    let mut audit = BTreeMap::new();
    audit.insert("approver".to_owned(), json!(approver));
    audit.insert("approved".to_owned(), json!(approved));
    audit.insert(
        "scope".to_owned(),
        json!(response.scope.filter(|_| approved).map(|s| s.as_str())),
    );
    if let Some(edit) = edit_of(response) {
        audit.insert("modified_args_json".to_owned(), json!(edit));
    }
    if let Some(g) = grant {
        audit.insert("grant_id".to_owned(), json!(g.grant.id));
    }
    if let Some(g) = gate {
        audit.insert("gate_request_id".to_owned(), json!(g.request_id));
    }
    if let Some(voters) = voters {
        audit.insert("voters".to_owned(), json!(voters));
    }
    audit
}
