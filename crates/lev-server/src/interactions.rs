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

use lev_protocol::api::{InteractionView, RespondResult};
use lev_protocol::validate::validate_response;
use lev_protocol::{
    Interaction, InteractionKind, InteractionRequest, InteractionResponse, InteractionStatus,
};
use lev_store::{CreateOutcome, NewAnswer, NewInteraction, TransitionOutcome};
use serde_json::json;
use time::OffsetDateTime;

use crate::auth::Principal;
use crate::blobs::{decode_parts, store_parts};
use crate::error::{ApiError, ApiResult};
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
/// an `ir_` id when it has none, and its expiry.
///
/// # Errors
/// 422 for a timeout too far ahead; 500 without randomness.
pub fn prepare(
    state: &AppState,
    mut request: InteractionRequest,
    actor: &str,
    now: OffsetDateTime,
) -> ApiResult<NewInteraction> {
    if request.id.is_none() {
        request.id = Some(
            crate::ids::new_id("ir_", now)
                .map_err(|e| ApiError::Internal(format!("no randomness: {e}")))?,
        );
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
    match state.store().create_interaction(new).await? {
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
        .store()
        .get_interaction(id)
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
            .store()
            .get_interaction(id)
            .await?
            .ok_or_else(|| ApiError::NotFound(format!("no interaction {id:?}")))?;
        check(&view)?;
        Ok(view)
    };
    let finished = crate::hub::wait_for(
        state.hub(),
        state.shutdown_signal(),
        id,
        deadline,
        || async {
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

/// Decide interaction `id` with `answer` by `approver` (a token's name, the
/// identity signed into a tool approval): validate the answer against its
/// request, store its parts, sign a tool approval (with its grant), then the
/// store's compare-and-set. `via` is the dashboard session a person answered
/// from (for `@path` attachments); `None` for the API, an operator or Slack.
///
/// # Errors
/// 404, 409 `already_answered` (with the winner), 410, 413, 422, and for a
/// tool approval 403 `self_approval` or 422 for an edit the policy denies.
pub async fn answer(
    state: &AppState,
    id: &str,
    answer: InteractionResponse,
    approver: &str,
    via: Option<&SessionInfo>,
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
    crate::attach::expand_at_paths(state.settings(), via, &mut answer)?;
    let inbound = std::mem::take(&mut answer.parts);
    let decoded = decode_parts(inbound, state.settings().max_part_bytes)?;
    let parts = store_parts(state.store(), decoded).await?;
    let response = answer.map_parts(parts);
    let now = OffsetDateTime::now_utc();
    let outcome = if let InteractionKind::ToolApproval { .. } = &request.kind {
        // Checked against the policy, signed, with its grant: the gate's part.
        let prepared = crate::gate::answer::prepare(state, approver, &view, &response).await?;
        state
            .store()
            .answer_tool_approval(
                NewAnswer {
                    id: id.to_owned(),
                    response: response.clone(),
                    approval: Some(prepared.approval),
                    answered_by: approver.to_owned(),
                    answered_at: now,
                    audit: prepared.audit,
                },
                prepared.grant,
            )
            .await?
    } else {
        let audit = BTreeMap::from([("approver".to_owned(), json!(approver))]);
        state
            .store()
            .answer_interaction(NewAnswer {
                id: id.to_owned(),
                response: response.clone(),
                approval: None,
                answered_by: approver.to_owned(),
                answered_at: now,
                audit,
            })
            .await?
    };
    match outcome {
        TransitionOutcome::Done(view) => {
            state.metrics().answered();
            Ok(RespondResult {
                response: view.response.unwrap_or(response),
                approval: view.approval,
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
    match state.store().cancel_interaction(id, actor).await? {
        TransitionOutcome::Done(view) => Ok(*view),
        TransitionOutcome::AlreadyAnswered(view) => Err(already_answered(*view)),
        TransitionOutcome::Gone(view) if view.request.status == InteractionStatus::Cancelled => {
            Ok(*view)
        }
        TransitionOutcome::Gone(view) => Err(gone(&view)),
        TransitionOutcome::NotFound => Err(ApiError::NotFound(format!("no interaction {id:?}"))),
    }
}

/// 409 `already_answered` carrying the winner.
pub fn already_answered(view: InteractionView) -> ApiError {
    match view.response {
        Some(winner) => ApiError::AlreadyAnswered(Box::new(winner)),
        None => ApiError::Conflict {
            code: "already_answered",
            message: "the interaction was already answered".into(),
        },
    }
}

/// 410 for an expired or cancelled interaction.
pub fn gone(view: &InteractionView) -> ApiError {
    ApiError::Gone(format!(
        "interaction {} is {}; it takes no answer",
        view.request.id(),
        view.request.status.as_str()
    ))
}
