//! Interactions, as the server's domain: one way to open one, one answer
//! path, one wait for the final state. Routes, hooks, escalation to people
//! and the operator's triage are adapters that call these.
//!
//! - [`prepare`] turns a request into what the store keeps: its id (when the
//!   worker sent none) and its `expires_at` (the one place it is computed).
//! - [`open`] stores a new interaction; [`opened`] is what follows any new
//!   interaction's commit (metrics, expiry), also one the gate stored with its
//!   decision. Triage follows the store's committed `interaction.created`
//!   events, so no creator calls it.
//! - [`answer`] decides an interaction: the answer validated against its
//!   request, parts stored, a tool approval checked and signed by the gate,
//!   then the store's compare-and-set.
//! - [`wait_final`] waits for the final state, woken by committed events.

use std::collections::BTreeMap;

use lev_approval::policy::QuorumRule;
use lev_protocol::api::{InteractionView, RespondResult};
use lev_protocol::validate::validate_response;
use lev_protocol::{
    Interaction, InteractionKind, InteractionRequest, InteractionResponse, InteractionStatus,
    Quorum, VoteBinding,
};
use lev_store::{CreateOutcome, NewAnswer, NewInteraction, TransitionOutcome};
use serde_json::{Value, json};
use time::OffsetDateTime;

use crate::auth::Principal;
use crate::blobs::{decode_parts, store_parts};
use crate::error::{ApiError, ApiResult, already_answered, gone};
use crate::session_auth::SessionInfo;
use crate::state::AppState;

/// When an interaction of `timeout_s` made at `now` expires.
///
/// # Errors
/// 422 when that is past what a timestamp can hold.
pub fn expires_at(
    now: OffsetDateTime,
    timeout_s: Option<u64>,
) -> ApiResult<Option<OffsetDateTime>> {
    let Some(s) = timeout_s else {
        return Ok(None);
    };
    i64::try_from(s)
        .ok()
        .and_then(|s| now.checked_add(time::Duration::seconds(s)))
        .filter(|t| t.year() < 9999)
        .map(Some)
        .ok_or_else(|| {
            ApiError::Invalid(format!("timeout_s: {s} seconds is too far in the future"))
        })
}

/// A new pending interaction of `request` by `actor`, ready for the store:
/// an `ir_` id when it has none, its expiry, and for a tool approval what
/// its votes need (SPEC section 13): how many must approve and who may
/// vote, from the policy, and what a vote binds. `request_id` is the gate
/// call's tool-call id when the gate opens it (a vote binds that id), else
/// the interaction's own id.
///
/// # Errors
/// 422 for a timeout too far ahead; 500 without randomness.
pub fn prepare(
    state: &AppState,
    request: InteractionRequest,
    actor: &str,
    now: OffsetDateTime,
    request_id: Option<&str>,
) -> ApiResult<NewInteraction> {
    let quorum = match &request.kind {
        InteractionKind::ToolApproval {
            tool_name,
            args_json,
            ..
        } => {
            // Validated JSON already; a request that is not (an operator's
            // escalation) matches no args pattern.
            let args: Value = serde_json::from_str(args_json).unwrap_or(Value::Null);
            state.settings().policy.quorum_for(tool_name, &args)
        }
        _ => None,
    };
    prepare_under(state, request, actor, now, request_id, quorum)
}

/// [`prepare`], for a tool approval under `quorum`, the policy's
/// ([`lev_approval::policy::Policy::quorum_for`]) already found (the gate's
/// decision carries it).
///
/// # Errors
/// As [`prepare`].
pub fn prepare_under(
    state: &AppState,
    mut request: InteractionRequest,
    actor: &str,
    now: OffsetDateTime,
    request_id: Option<&str>,
    quorum: Option<&QuorumRule>,
) -> ApiResult<NewInteraction> {
    if request.id.is_none() {
        request.id = Some(
            crate::ids::new_id("ir_", now)
                .map_err(|e| ApiError::Internal(format!("no randomness: {e}")))?,
        );
    }
    if let InteractionKind::ToolApproval {
        tool_name,
        args_json,
        sandbox_mode,
        ..
    } = &request.kind
    {
        let rule = quorum;
        request.approvals_needed = Some(rule.map_or(1, |q| q.approvals));
        request.quorum = rule.map(|q| Quorum {
            approvers: q.approvers.clone(),
            escalate_after_s: q.escalate_after_s,
            escalate_to: q.escalate_to.clone(),
            require_signed_votes: q.require_signed_votes,
            rule_line: u64::try_from(q.line).ok(),
        });
        request.vote_binding = Some(VoteBinding {
            request_id: request_id
                .or(request.id.as_deref())
                .unwrap_or_default()
                .to_owned(),
            tool_name: tool_name.clone(),
            args_sha256: lev_approval::sha256_hex(args_json.as_bytes()),
            conversation_id: request.conversation_id.clone().unwrap_or_default(),
            caller: request.caller.clone().unwrap_or_default(),
            sandbox_mode: sandbox_mode.clone(),
        });
    }
    let expires_at = expires_at(now, request.timeout_s)?;
    Ok(NewInteraction {
        interaction: Interaction {
            request,
            status: InteractionStatus::Pending,
            created_at: now,
            expires_at,
            answered_at: None,
            answered_by: None,
            votes: Vec::new(),
        },
        max_pending_per_session: state.settings().max_pending_per_session,
        actor: actor.to_owned(),
    })
}

/// What follows the commit of a new interaction, however it was stored.
pub fn opened(state: &AppState, interaction: &Interaction) {
    state.metrics().created();
    if let Some(at) = interaction.expires_at {
        state.expiry().schedule(at);
    }
}

/// Store a new interaction (validated by the caller): the stored view, and
/// whether this call created it (`false`: the same id and request existed).
///
/// # Errors
/// 409 `id_conflict` for the same id with another request, 429 past the
/// session's pending limit, and the store's errors.
pub async fn open(state: &AppState, new: NewInteraction) -> ApiResult<(InteractionView, bool)> {
    let session = new.interaction.request.session_id.clone();
    match state
        .timed("create_interaction", state.store().create_interaction(new))
        .await?
    {
        CreateOutcome::Created(view) => {
            opened(state, &view.request);
            Ok((*view, true))
        }
        CreateOutcome::Existing(view) => Ok((*view, false)),
        CreateOutcome::Conflict(view) => Err(ApiError::Conflict {
            code: "id_conflict",
            message: format!(
                "interaction {} exists with a different request; use a new id",
                view.request.id()
            ),
        }),
        CreateOutcome::TooManyPending => Err(too_many_pending(state, &session)),
    }
}

/// 429: the session holds the most pending interactions it may.
pub fn too_many_pending(state: &AppState, session: &str) -> ApiError {
    ApiError::TooMany(format!(
        "session {session} has {} pending interactions, the most it may hold",
        state.settings().max_pending_per_session
    ))
}

/// Read an interaction for `principal`: 404 when there is none, 403 for a
/// worker bound to another caller or limited to other sessions.
///
/// # Errors
/// As above.
pub async fn load(state: &AppState, principal: &Principal, id: &str) -> ApiResult<InteractionView> {
    let view = state
        .timed("get_interaction", state.store().get_interaction(id))
        .await?
        .ok_or_else(|| ApiError::NotFound(format!("no interaction {id:?}")))?;
    check_access(principal, &view)?;
    Ok(view)
}

/// Whether `principal` may see `view`: a worker bound to a caller only that
/// caller's, a token limited to sessions only theirs.
///
/// # Errors
/// 403 `caller_mismatch` or `session_scope`.
pub fn check_access(principal: &Principal, view: &InteractionView) -> ApiResult<()> {
    principal.check_owns(view.request.request.caller.as_deref())?;
    principal.check_session(&view.request.request.session_id)
}

/// Wait until interaction `id` is final or `deadline` passes: its view then
/// (still pending at the deadline). `check` runs on every read (an access
/// check). Woken by the store's committed events: the waiter registers
/// before it reads, so no change is missed.
///
/// # Errors
/// 503 when the server shuts down; 404 when it does not exist; `check`'s.
pub async fn wait_final(
    state: &AppState,
    id: &str,
    deadline: tokio::time::Instant,
    check: impl Fn(&InteractionView) -> ApiResult<()>,
) -> ApiResult<InteractionView> {
    let read = || async {
        let view = state
            .timed("get_interaction", state.store().get_interaction(id))
            .await?
            .ok_or_else(|| ApiError::NotFound(format!("no interaction {id:?}")))?;
        check(&view)?;
        Ok(view)
    };
    let (read, check) = (&read, &check);
    let finished = crate::hub::wait_for(
        state.hub(),
        state.shutdown_signal(),
        id,
        deadline,
        |woken| async move {
            // The event that woke it carries the interaction as committed:
            // a final state is taken from there, without reading it back.
            if let Some(view) = woken.as_deref().and_then(final_view_of) {
                check(&view)?;
                return Ok(Some(view));
            }
            let view = read().await?;
            Ok(view.request.status.is_final().then_some(view))
        },
    )
    .await?;
    match finished {
        Some(view) => Ok(view),
        None => read().await,
    }
}

/// The interaction an `interaction.*` event carries, when it is final.
fn final_view_of(event: &lev_store::StoredEvent) -> Option<InteractionView> {
    use serde::Deserialize as _;
    let view = InteractionView::deserialize(&event.data).ok()?;
    view.request.status.is_final().then_some(view)
}

/// Who answers: a token's name (the identity signed into a tool
/// approval), whether it is a session's operator, and the dashboard
/// session a person answered from (for `@path` attachments; `None` for the
/// API, an operator or Slack).
#[derive(Debug, Clone, Copy)]
pub struct By<'a> {
    /// The token's name.
    pub name: &'a str,
    /// A session's operator (triage).
    pub operator: bool,
    /// The dashboard session, for a person in the dashboard.
    pub via: Option<&'a SessionInfo>,
}

impl<'a> By<'a> {
    /// A person (or a program) answering with their own token.
    pub fn person(name: &'a str, via: Option<&'a SessionInfo>) -> Self {
        Self {
            name,
            operator: false,
            via,
        }
    }
}

/// Answer interaction `id` with `answer` by `by`: validate the answer
/// against its request and store its parts; a tool approval's answer is a
/// vote ([`crate::votes::cast`]: who may vote, the signed vote, the quorum,
/// the signed decision), any other answer decides through the store's
/// compare-and-set.
///
/// # Errors
/// 404, 409 `already_answered` (with the winner), 410, 413, 422, and for a
/// tool approval those of [`crate::votes::cast`].
pub async fn answer(
    state: &AppState,
    id: &str,
    answer: InteractionResponse,
    by: By<'_>,
) -> ApiResult<RespondResult> {
    let view = state
        .store()
        .get_interaction(id)
        .await?
        .ok_or_else(|| ApiError::NotFound(format!("no interaction {id:?}")))?;
    match view.request.status {
        InteractionStatus::Pending => {}
        InteractionStatus::Answered => return Err(already_answered(view)),
        InteractionStatus::Expired | InteractionStatus::Cancelled => return Err(gone(&view)),
    }
    let request = &view.request.request;
    let mut answer = validate_response(request, answer)?;
    crate::attach::expand_at_paths(state.settings(), by.via, &mut answer)?;
    let inbound = std::mem::take(&mut answer.parts);
    let decoded = decode_parts(inbound, state.settings().max_part_bytes)?;
    let parts = store_parts(state.store(), decoded).await?;
    let response = answer.map_parts(parts);
    if let InteractionKind::ToolApproval { .. } = &request.kind {
        let voter = crate::votes::Voter {
            name: by.name,
            operator: by.operator,
        };
        return crate::votes::cast(state, view, response, voter).await;
    }
    let audit = BTreeMap::from([("approver".to_owned(), json!(by.name))]);
    let answer = NewAnswer {
        id: id.to_owned(),
        response: response.clone(),
        approval: None,
        answered_by: by.name.to_owned(),
        answered_at: OffsetDateTime::now_utc(),
        audit,
    };
    let outcome = state
        .timed(
            "answer_interaction",
            state.store().answer_interaction(answer),
        )
        .await?;
    match outcome {
        TransitionOutcome::Done(view) => {
            state.metrics().answered();
            state.decided(&view.request, None);
            Ok(RespondResult {
                response: view.response.unwrap_or(response),
                approval: view.approval,
                status: None,
                votes: Vec::new(),
                approvals_needed: None,
            })
        }
        TransitionOutcome::AlreadyAnswered(view) => Err(already_answered(*view)),
        TransitionOutcome::Gone(view) => Err(gone(&view)),
        TransitionOutcome::NotFound => Err(ApiError::NotFound(format!("no interaction {id:?}"))),
    }
}

/// Cancel interaction `id` by `actor`: the cancelled view (also when it was
/// cancelled before).
///
/// # Errors
/// 409 with the winner when it was answered, 410 when it expired, 404.
pub async fn cancel(state: &AppState, id: &str, actor: &str) -> ApiResult<InteractionView> {
    match state
        .timed(
            "cancel_interaction",
            state.store().cancel_interaction(id, actor),
        )
        .await?
    {
        TransitionOutcome::Done(view) => {
            state.decided(&view.request, None);
            Ok(*view)
        }
        TransitionOutcome::AlreadyAnswered(view) => Err(already_answered(*view)),
        TransitionOutcome::Gone(view) if view.request.status == InteractionStatus::Cancelled => {
            Ok(*view)
        }
        TransitionOutcome::Gone(view) => Err(gone(&view)),
        TransitionOutcome::NotFound => Err(ApiError::NotFound(format!("no interaction {id:?}"))),
    }
}
