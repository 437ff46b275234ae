//! Create, list, read and cancel interactions.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use lev_protocol::api::{InteractionPage, InteractionView, Role};
use lev_protocol::validate::validate_request;
use lev_protocol::{Interaction, InteractionRequest, InteractionStatus};
use lev_store::{CreateOutcome, ListFilter, NewInteraction, TransitionOutcome};
use serde::Deserialize;
use time::OffsetDateTime;

use super::Q;
use crate::auth::Principal;
use crate::body::JsonBody;
use crate::error::{ApiError, ApiResult};
use crate::state::AppState;

/// `POST /v1/interactions` (worker): 201 with the stored request; the same
/// id and body again 200; the same id with another body 409.
pub async fn create(
    State(state): State<AppState>,
    principal: Principal,
    JsonBody(mut req): JsonBody<InteractionRequest>,
) -> ApiResult<(StatusCode, Json<Interaction>)> {
    principal.require(&[Role::Worker])?;
    principal.check_session(&req.session_id)?;
    req.caller = principal.effective_caller(req.caller.as_deref())?;
    validate_request(&req, &state.settings().limits)?;
    let now = OffsetDateTime::now_utc();
    if req.id.is_none() {
        req.id = Some(
            crate::ids::new_id("ir_", now)
                .map_err(|e| ApiError::Internal(format!("no randomness: {e}")))?,
        );
    }
    let expires_at = match req.timeout_s {
        None => None,
        Some(s) => Some(
            i64::try_from(s)
                .ok()
                .and_then(|s| now.checked_add(time::Duration::seconds(s)))
                .filter(|t| t.year() < 9999)
                .ok_or_else(|| {
                    ApiError::Invalid(format!("timeout_s: {s} seconds is too far in the future"))
                })?,
        ),
    };
    let interaction = Interaction {
        request: req,
        status: InteractionStatus::Pending,
        created_at: now,
        expires_at,
        answered_at: None,
        answered_by: None,
    };
    let outcome = state
        .store()
        .create_interaction(NewInteraction {
            interaction,
            max_pending_per_session: state.settings().max_pending_per_session,
            actor: principal.name,
        })
        .await?;
    match outcome {
        CreateOutcome::Created(view) => {
            state.metrics().created();
            if let Some(at) = view.request.expires_at {
                state.expiry().schedule(at);
            }
            crate::operators::triage::on_created(&state, &view.request);
            Ok((StatusCode::CREATED, Json(view.request)))
        }
        CreateOutcome::Existing(view) => Ok((StatusCode::OK, Json(view.request))),
        CreateOutcome::Conflict(view) => Err(ApiError::Conflict {
            code: "id_conflict",
            message: format!(
                "interaction {} exists with a different request; use a new id",
                view.request.id()
            ),
        }),
        CreateOutcome::TooManyPending => Err(ApiError::TooMany(format!(
            "the session has {} pending interactions, the most it may hold",
            state.settings().max_pending_per_session
        ))),
    }
}

/// The query of `GET /v1/interactions`.
#[derive(Debug, Deserialize)]
pub struct ListQuery {
    status: Option<String>,
    session_id: Option<String>,
    limit: Option<u32>,
    cursor: Option<String>,
}

/// `GET /v1/interactions` (approver): newest first, a page at a time.
pub async fn list(
    State(state): State<AppState>,
    principal: Principal,
    Q(query): Q<ListQuery>,
) -> ApiResult<Json<InteractionPage>> {
    principal.require(&[Role::Approver])?;
    let status = match query.status.as_deref().unwrap_or("pending") {
        "all" => None,
        s => Some(InteractionStatus::parse(s).ok_or_else(|| {
            ApiError::Invalid(format!(
                "status: expected pending, answered, expired, cancelled or all, found {s:?}"
            ))
        })?),
    };
    if let Some(session) = &query.session_id {
        lev_protocol::validate::check_id("session_id", session)?;
    }
    let before = match &query.cursor {
        None => None,
        Some(c) => Some(c.parse::<i64>().map_err(|_| {
            ApiError::Invalid("cursor: expected a next_cursor from a previous page".into())
        })?),
    };
    let page = state
        .store()
        .list_interactions(ListFilter {
            status,
            session_id: query.session_id,
            limit: query.limit.unwrap_or(50).clamp(1, 500),
            before,
        })
        .await?;
    Ok(Json(InteractionPage {
        items: page.items,
        next_cursor: page.next_before.map(|n| n.to_string()),
    }))
}

/// Read an interaction, 404 when there is none, 403 for a worker bound to
/// another caller or limited to other sessions.
pub async fn load(state: &AppState, principal: &Principal, id: &str) -> ApiResult<InteractionView> {
    let view = state
        .store()
        .get_interaction(id)
        .await?
        .ok_or_else(|| ApiError::NotFound(format!("no interaction {id:?}")))?;
    principal.check_owns(view.request.request.caller.as_deref())?;
    principal.check_session(&view.request.request.session_id)?;
    Ok(view)
}

/// `GET /v1/interactions/{id}` (worker, approver).
pub async fn get_one(
    State(state): State<AppState>,
    principal: Principal,
    super::PathParam(id): super::PathParam,
) -> ApiResult<Json<InteractionView>> {
    principal.require(&[Role::Worker, Role::Approver])?;
    Ok(Json(load(&state, &principal, &id).await?))
}

/// `POST /v1/interactions/{id}/cancel` (worker): 200 with the cancelled
/// interaction (also when it was cancelled before), 409 with the winner when
/// it was answered, 410 when it expired.
pub async fn cancel(
    State(state): State<AppState>,
    principal: Principal,
    super::PathParam(id): super::PathParam,
) -> ApiResult<Json<InteractionView>> {
    principal.require(&[Role::Worker])?;
    load(&state, &principal, &id).await?;
    match state
        .store()
        .cancel_interaction(&id, &principal.name)
        .await?
    {
        TransitionOutcome::Done(view) => Ok(Json(*view)),
        TransitionOutcome::AlreadyAnswered(view) => Err(already_answered(*view)),
        TransitionOutcome::Gone(view) if view.request.status == InteractionStatus::Cancelled => {
            Ok(Json(*view))
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
