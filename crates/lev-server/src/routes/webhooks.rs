//! `POST /v1/webhooks`, `GET /v1/webhooks`, `DELETE /v1/webhooks/{id}` and
//! `GET /v1/webhooks/{id}/deliveries` (admin).

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use lev_protocol::api::ErrorBody;
use lev_protocol::api::{Page, Role, Webhook, WebhookCreate, WebhookDelivery};
use serde::Deserialize;

use crate::auth::Principal;
use crate::body::JsonBody;
use crate::error::{ApiError, ApiResult};
use crate::state::AppState;

/// Add an endpoint: 201 with its secret, shown this once.
#[utoipa::path(
    post, path = "/v1/webhooks", tag = "webhooks", request_body = WebhookCreate,
    responses(
        (status = 201, description = "Added; the secret is shown this once", body = Webhook),
        (status = 429, description = "Too many endpoints", body = ErrorBody),
    )
)]
pub async fn create(
    State(state): State<AppState>,
    principal: Principal,
    JsonBody(req): JsonBody<WebhookCreate>,
) -> ApiResult<(StatusCode, Json<Webhook>)> {
    principal.require(&[Role::Admin])?;
    let created = crate::webhooks::add(&state, req, &principal.name).await?;
    Ok((StatusCode::CREATED, Json(created)))
}

/// Every endpoint (never its secret), oldest first, on one page.
#[utoipa::path(
    get, path = "/v1/webhooks", tag = "webhooks",
    responses((status = 200, description = "Every endpoint (never a secret)", body = Page<Webhook>))
)]
pub async fn list(
    State(state): State<AppState>,
    principal: Principal,
) -> ApiResult<Json<Page<Webhook>>> {
    principal.require(&[Role::Admin])?;
    let endpoints = state.store().endpoints().await?;
    Ok(Json(Page::last(
        endpoints.iter().map(crate::webhooks::view).collect(),
    )))
}

/// Remove an endpoint and its deliveries: 204; 404 when none.
#[utoipa::path(
    delete, path = "/v1/webhooks/{id}", tag = "webhooks",
    params(("id" = String, Path, description = "The endpoint's id")),
    responses(
        (status = 204, description = "Removed"),
        (status = 404, description = "No such endpoint", body = ErrorBody),
    )
)]
pub async fn delete(
    State(state): State<AppState>,
    principal: Principal,
    super::PathParam(id): super::PathParam,
) -> ApiResult<StatusCode> {
    principal.require(&[Role::Admin])?;
    if state.store().delete_endpoint(&id, &principal.name).await? {
        state.webhooks_changed();
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(ApiError::NotFound(format!("no webhook {id:?}")))
    }
}

/// `?limit=` of the delivery log.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct DeliveriesQuery {
    /// At most this many, newest first (1 to 500, default 50).
    #[serde(default)]
    #[param(minimum = 1, maximum = 500)]
    limit: Option<u32>,
}

/// An endpoint's deliveries with their attempts, newest first.
#[utoipa::path(
    get, path = "/v1/webhooks/{id}/deliveries", tag = "webhooks",
    params(("id" = String, Path, description = "The endpoint's id"), DeliveriesQuery),
    responses(
        (status = 200, description = "Deliveries with their attempts, newest first", body = Page<WebhookDelivery>),
        (status = 404, description = "No such endpoint", body = ErrorBody),
    )
)]
pub async fn deliveries(
    State(state): State<AppState>,
    principal: Principal,
    super::PathParam(id): super::PathParam,
    super::Q(q): super::Q<DeliveriesQuery>,
) -> ApiResult<Json<Page<WebhookDelivery>>> {
    principal.require(&[Role::Admin])?;
    let limit = crate::extract::page_limit(q.limit, 50, 500)?;
    if !state.store().endpoints().await?.iter().any(|e| e.id == id) {
        return Err(ApiError::NotFound(format!("no webhook {id:?}")));
    }
    let list = state.store().deliveries(&id, limit).await?;
    Ok(Json(Page::last(
        list.into_iter()
            .map(crate::webhooks::delivery_view)
            .collect(),
    )))
}
