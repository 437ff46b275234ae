//! Create, list, read and cancel interactions.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use lev_protocol::api::ErrorBody;
use lev_protocol::api::{InteractionView, Page, Role};
use lev_protocol::validate::validate_request;
use lev_protocol::{Interaction, InteractionRequest, InteractionStatus};
use lev_store::ListFilter;
use serde::Deserialize;
use time::OffsetDateTime;

use super::Q;
use crate::auth::Principal;
use crate::body::JsonBody;
use crate::error::{ApiError, ApiResult};
use crate::interactions;
use crate::state::AppState;

/// `POST /v1/interactions` (worker): 201 with the stored request; the same
/// id and body again 200; the same id with another body 409.
#[utoipa::path(
    post, path = "/v1/interactions", tag = "interactions",
    request_body = InteractionRequest,
    responses(
        (status = 201, description = "Stored", body = Interaction),
        (status = 200, description = "The same id was stored before with an identical body (idempotent): the stored interaction, as it stands now", body = Interaction),
        (status = 409, description = "The id exists with another body", body = ErrorBody),
        (status = 429, description = "Too many pending interactions in the session", body = ErrorBody),
    )
)]
pub async fn create(
    State(state): State<AppState>,
    principal: Principal,
    headers: axum::http::HeaderMap,
    JsonBody(mut req): JsonBody<InteractionRequest>,
) -> ApiResult<(
    StatusCode,
    axum::Extension<crate::log::NotedInteraction>,
    Json<Interaction>,
)> {
    principal.require(&[Role::Worker])?;
    let started = std::time::SystemTime::now();
    principal.check_session(&req.session_id)?;
    req.caller = principal.effective_caller(req.caller.as_deref())?;
    // What the server sets from its policy is never a client's to say.
    for (field, sent) in [
        ("gate", req.gate.is_some()),
        ("approvals_needed", req.approvals_needed.is_some()),
        ("quorum", req.quorum.is_some()),
        ("vote_binding", req.vote_binding.is_some()),
    ] {
        if sent {
            return Err(ApiError::Invalid(format!(
                "{field}: set by lev from its policy on the tool approvals it stores, never by \
                 a client; leave it out (POST /v1/gate asks through the policy)"
            )));
        }
    }
    validate_request(&req, &state.settings().limits)?;
    let new = interactions::prepare(
        &state,
        req,
        &principal.name,
        OffsetDateTime::now_utc(),
        None,
    )?;
    let (view, created) = interactions::open(&state, new).await?;
    if created {
        // The agent's trace, when its request carried a traceparent.
        let agent = crate::trace::Ctx::from_headers(&headers);
        state
            .tracer()
            .created(view.request.id(), agent, started, &view.request);
    }
    let status = if created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    let noted = crate::log::NotedInteraction(view.request.id().to_owned());
    Ok((status, axum::Extension(noted), Json(view.request)))
}

/// The query of `GET /v1/interactions`.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ListQuery {
    /// Only interactions in this status: `pending`, `answered`, `expired` or `cancelled`.
    #[param(value_type = Option<lev_protocol::InteractionStatus>)]
    status: Option<String>,
    /// Only this session's.
    #[param(pattern = r"^[A-Za-z0-9._:-]{1,128}$")]
    session_id: Option<String>,
    /// At most this many (1 to 500, default 50; outside that, 422).
    #[param(minimum = 1, maximum = 500)]
    limit: Option<u32>,
    /// The `next_cursor` of the page before.
    #[param(pattern = "^[1-9][0-9]*$")]
    cursor: Option<String>,
}

/// `GET /v1/interactions` (approver): newest first, a page at a time.
#[utoipa::path(
    get, path = "/v1/interactions", tag = "interactions", params(ListQuery),
    responses((status = 200, description = "Newest first", body = Page<InteractionView>))
)]
pub async fn list(
    State(state): State<AppState>,
    principal: Principal,
    Q(query): Q<ListQuery>,
) -> ApiResult<Json<Page<InteractionView>>> {
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
    let limit = crate::extract::page_limit(query.limit, 50, 500)?;
    let before = crate::extract::page_cursor(query.cursor.as_deref())?;
    let page = state
        .store()
        .list_interactions(ListFilter {
            status,
            session_id: query.session_id,
            limit,
            before,
        })
        .await?;
    Ok(Json(Page {
        items: page.items,
        next_cursor: page.next_before.map(|n| n.to_string()),
    }))
}

/// `GET /v1/interactions/{id}` (worker, approver).
#[utoipa::path(
    get, path = "/v1/interactions/{id}", tag = "interactions",
    params(("id" = String, Path, description = "The interaction's id")),
    responses(
        (status = 200, description = "The interaction, its answer and signed decision", body = InteractionView),
        (status = 404, description = "No such interaction", body = ErrorBody),
    )
)]
pub async fn get_one(
    State(state): State<AppState>,
    principal: Principal,
    super::PathParam(id): super::PathParam,
) -> ApiResult<Json<InteractionView>> {
    principal.require(&[Role::Worker, Role::Approver])?;
    Ok(Json(interactions::load(&state, &principal, &id).await?))
}

/// `POST /v1/interactions/{id}/cancel` (worker): 200 with the cancelled
/// interaction (also when it was cancelled before), 409 with the winner when
/// it was answered, 410 when it expired.
#[utoipa::path(
    post, path = "/v1/interactions/{id}/cancel", tag = "interactions",
    params(("id" = String, Path, description = "The interaction's id")),
    responses(
        (status = 200, description = "Cancelled", body = InteractionView),
        (status = 404, description = "No such interaction", body = ErrorBody),
        (status = 409, description = "Already answered: the winning answer is beside the error", body = ErrorBody),
        (status = 410, description = "Already expired or cancelled", body = ErrorBody),
    )
)]
pub async fn cancel(
    State(state): State<AppState>,
    principal: Principal,
    super::PathParam(id): super::PathParam,
) -> ApiResult<Json<InteractionView>> {
    principal.require(&[Role::Worker])?;
    interactions::load(&state, &principal, &id).await?;
    Ok(Json(
        interactions::cancel(&state, &id, &principal.name).await?,
    ))
}
