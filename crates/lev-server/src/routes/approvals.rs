//! The routes of signed approvals: the gate, grants, nonces, and the
//! signing keys' rotation.
//!
//! - `POST /v1/gate` (worker): SPEC section 6, in [`crate::gate`].
//! - `GET /v1/grants`, `DELETE /v1/grants/{id}` (approver).
//! - `POST /v1/nonces/consume` (worker): 200 the first time, 409
//!   `nonce_spent` ever after; 403 for a worker that may not act for the
//!   approval's caller or session.
//! - `POST /v1/keys/rotate`, `DELETE /v1/keys/{kid}` (admin): a new active
//!   key; an old key no longer trusted. Both answer the JWKS as it is after.

use axum::Json;
use axum::extract::State;
use lev_protocol::api::ErrorBody;
use lev_protocol::api::{
    GateRequest, GateResponse, Grant, Jwks, NonceConsume, NonceSpent, Page, Role,
};
use lev_store::{KeyRemoveOutcome, NonceOutcome};

use super::PathParam;
use crate::auth::Principal;
use crate::body::JsonBody;
use crate::error::{ApiError, ApiResult};
use crate::state::AppState;

/// Longest nonce accepted (lev's own are 22 characters).
const MAX_NONCE_LEN: usize = 256;

/// `POST /v1/gate` (worker): always 200 with the decision, once the call is valid.
#[utoipa::path(
    post, path = "/v1/gate", tag = "approvals", request_body = GateRequest,
    responses(
        (status = 200, description = "allow (with the signed approval), deny, or ask (wait on the interaction)", body = GateResponse),
        (status = 409, description = "The request id was used with another call", body = ErrorBody),
        (status = 429, description = "Too many pending interactions in the session", body = ErrorBody),
    )
)]
pub async fn gate(
    State(state): State<AppState>,
    principal: Principal,
    headers: axum::http::HeaderMap,
    JsonBody(req): JsonBody<GateRequest>,
) -> ApiResult<(
    Option<axum::Extension<crate::log::NotedInteraction>>,
    Json<GateResponse>,
)> {
    principal.require(&[Role::Worker])?;
    let agent = crate::trace::Ctx::from_headers(&headers);
    let response = crate::gate::decide(&state, &principal, req, agent).await?;
    // The request's log line names the question it opened (or repeats).
    let noted = match &response {
        GateResponse::Ask { interaction_id } => Some(axum::Extension(
            crate::log::NotedInteraction(interaction_id.clone()),
        )),
        _ => None,
    };
    Ok((noted, Json(response)))
}

/// `GET /v1/grants` (approver): the session and always grants in force,
/// oldest first, on one page.
#[utoipa::path(
    get, path = "/v1/grants", tag = "approvals",
    responses((status = 200, description = "Grants in force, oldest first", body = Page<Grant>))
)]
pub async fn list_grants(
    State(state): State<AppState>,
    principal: Principal,
) -> ApiResult<Json<Page<Grant>>> {
    principal.require(&[Role::Approver])?;
    Ok(Json(Page::last(state.store().list_grants().await?)))
}

/// `DELETE /v1/grants/{id}` (approver): 200 with the revoked grant, 404.
#[utoipa::path(
    delete, path = "/v1/grants/{id}", tag = "approvals",
    params(("id" = String, Path, description = "The grant's id")),
    responses(
        (status = 200, description = "Revoked: the grant as it was", body = Grant),
        (status = 404, description = "No such grant", body = ErrorBody),
    )
)]
pub async fn revoke_grant(
    State(state): State<AppState>,
    principal: Principal,
    PathParam(id): PathParam,
) -> ApiResult<Json<Grant>> {
    principal.require(&[Role::Approver])?;
    state
        .store()
        .revoke_grant(&id, &principal.name)
        .await?
        .map(Json)
        .ok_or_else(|| ApiError::NotFound(format!("no grant {id:?} in force")))
}

/// `POST /v1/nonces/consume` (worker): only by a worker that may act for
/// the approval's caller and session (a token bound to another caller, or
/// limited to sessions that do not cover it, gets 403 and the nonce stays
/// unspent).
#[utoipa::path(
    post, path = "/v1/nonces/consume", tag = "approvals", request_body = NonceConsume,
    responses(
        (status = 200, description = "Spent, the first time", body = NonceSpent),
        (status = 403, description = "The approval is another caller's or session's (`caller_mismatch`, `session_scope`); the nonce stays unspent", body = ErrorBody),
        (status = 409, description = "Already spent (`nonce_spent`)", body = ErrorBody),
    )
)]
pub async fn consume_nonce(
    State(state): State<AppState>,
    principal: Principal,
    JsonBody(body): JsonBody<NonceConsume>,
) -> ApiResult<Json<NonceSpent>> {
    principal.require(&[Role::Worker])?;
    let nonce = body.nonce;
    if nonce.is_empty()
        || nonce.len() > MAX_NONCE_LEN
        || !nonce.bytes().all(|b| b.is_ascii_graphic())
    {
        return Err(ApiError::Invalid(format!(
            "nonce: expected 1 to {MAX_NONCE_LEN} printable ASCII characters (an approval's nonce)"
        )));
    }
    match crate::gate::spend_nonce(&state, &principal, &nonce).await? {
        NonceOutcome::Spent => Ok(Json(NonceSpent { nonce, spent: true })),
        NonceOutcome::AlreadySpent => Err(ApiError::Conflict {
            code: "nonce_spent",
            message: "this approval's nonce was spent before: an approval runs its call once"
                .into(),
        }),
    }
}

/// `POST /v1/keys/rotate` (admin): a new active signing key.
#[utoipa::path(
    post, path = "/v1/keys/rotate", tag = "approvals",
    responses((status = 200, description = "A new signing key; the old one stays trusted", body = Jwks))
)]
pub async fn rotate_key(
    State(state): State<AppState>,
    principal: Principal,
) -> ApiResult<Json<Jwks>> {
    principal.require(&[Role::Admin])?;
    // The rotation commits with its audit entry; every replica follows.
    state
        .keys()
        .rotate(&principal.name)
        .await
        .map_err(key_error)?;
    Ok(Json(state.keys().jwks()))
}

/// `DELETE /v1/keys/{kid}` (admin): stop trusting an old key; 409
/// `active_key` for the key that signs.
#[utoipa::path(
    delete, path = "/v1/keys/{kid}", tag = "approvals",
    params(("kid" = String, Path, description = "The key id")),
    responses(
        (status = 200, description = "Removed: the keys still trusted", body = Jwks),
        (status = 404, description = "No such key", body = ErrorBody),
        (status = 409, description = "The key signs today", body = ErrorBody),
    )
)]
pub async fn remove_key(
    State(state): State<AppState>,
    principal: Principal,
    PathParam(kid): PathParam,
) -> ApiResult<Json<Jwks>> {
    principal.require(&[Role::Admin])?;
    let outcome = state
        .keys()
        .remove(&kid, &principal.name)
        .await
        .map_err(key_error)?;
    match outcome {
        KeyRemoveOutcome::Removed => Ok(Json(state.keys().jwks())),
        KeyRemoveOutcome::Active => Err(ApiError::Conflict {
            code: "active_key",
            message: format!(
                "key {kid} is the one that signs; rotate first (lev keys rotate), then remove it"
            ),
        }),
        KeyRemoveOutcome::NotFound => Err(ApiError::NotFound(format!("no trusted key {kid:?}"))),
    }
}

fn key_error(e: crate::keys::KeyStoreError) -> ApiError {
    match e {
        crate::keys::KeyStoreError::Store(e) => e.into(),
        other => ApiError::Internal(format!("signing keys: {other}")),
    }
}
