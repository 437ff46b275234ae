//! `POST /v1/tokens`, `GET /v1/tokens`, `DELETE /v1/tokens/{name}` (admin).

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use lev_protocol::api::ErrorBody;
use lev_protocol::api::{Page, Role, TokenCreate, TokenCreated, TokenInfo};

use crate::auth::Principal;
use crate::body::JsonBody;
use crate::error::{ApiError, ApiResult};
use crate::state::AppState;

/// Create a token: 201 with its secret, shown this once.
#[utoipa::path(
    post, path = "/v1/tokens", tag = "tokens", request_body = TokenCreate,
    responses(
        (status = 201, description = "Made; the secret is shown this once", body = TokenCreated),
        (status = 409, description = "The name is taken, or reads like a token's name (name_taken): names are compared ignoring case and the . _ : - at their ends or between words", body = ErrorBody),
        (status = 422, description = "A name lev writes itself, or one that reads like it (policy, timeout, system, operator, lev, person:, group:, task:)", body = ErrorBody),
    )
)]
pub async fn create(
    State(state): State<AppState>,
    principal: Principal,
    JsonBody(req): JsonBody<TokenCreate>,
) -> ApiResult<(StatusCode, Json<TokenCreated>)> {
    principal.require(&[Role::Admin])?;
    let created = crate::tokens::create(state.store(), req, &principal.name).await?;
    Ok((StatusCode::CREATED, Json(created)))
}

/// List tokens (never their secrets), by name, on one page.
#[utoipa::path(
    get, path = "/v1/tokens", tag = "tokens",
    responses((status = 200, description = "Every token, by name (never a secret)", body = Page<TokenInfo>))
)]
pub async fn list(
    State(state): State<AppState>,
    principal: Principal,
) -> ApiResult<Json<Page<TokenInfo>>> {
    principal.require(&[Role::Admin])?;
    Ok(Json(Page::last(state.store().list_tokens().await?)))
}

/// Revoke a token: 204, effective on the next request; 404 when none.
#[utoipa::path(
    delete, path = "/v1/tokens/{name}", tag = "tokens",
    params(("name" = String, Path, description = "The token's name")),
    responses(
        (status = 204, description = "Revoked"),
        (status = 404, description = "No such token", body = ErrorBody),
    )
)]
pub async fn revoke(
    State(state): State<AppState>,
    principal: Principal,
    super::PathParam(name): super::PathParam,
) -> ApiResult<StatusCode> {
    principal.require(&[Role::Admin])?;
    if state.store().revoke_token(&name, &principal.name).await? {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(ApiError::NotFound(format!("no token named {name:?}")))
    }
}
