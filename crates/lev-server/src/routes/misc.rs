//! Health, keys, blobs and metrics.

use axum::Json;
use axum::extract::State;
use axum::http::header::{
    CACHE_CONTROL, CONTENT_DISPOSITION, CONTENT_TYPE, X_CONTENT_TYPE_OPTIONS,
};
use axum::http::{HeaderValue, header::CONTENT_SECURITY_POLICY};
use axum::response::{IntoResponse, Response};
use lev_protocol::api::ErrorBody;
use lev_protocol::api::{Health, Jwks, Role};

use crate::auth::Principal;
use crate::blobs::is_sha256_hex;
use crate::error::{ApiError, ApiResult};
use crate::state::AppState;

/// `GET /v1/health` (no token).
#[utoipa::path(
    get, path = "/v1/health", tag = "server", security(()),
    responses((status = 200, description = "The server answers", body = Health))
)]
pub async fn health(State(state): State<AppState>) -> Json<Health> {
    Json(Health {
        status: "ok".into(),
        version: env!("CARGO_PKG_VERSION").into(),
        store: state.store().kind().into(),
        replica_id: state.replica_id().into(),
    })
}

/// `GET /v1/keys` (no token): the trusted public keys as a JWKS.
#[utoipa::path(
    get, path = "/v1/keys", tag = "approvals", security(()),
    responses((status = 200, description = "The trusted public keys, newest first", body = Jwks))
)]
pub async fn keys(State(state): State<AppState>) -> Json<Jwks> {
    Json(state.keys().jwks())
}

/// `GET /v1/blobs/{sha256}` (worker, approver): an attachment's bytes, never
/// rendered by a browser (attachment disposition, nosniff, sandbox CSP).
#[utoipa::path(
    get, path = "/v1/blobs/{sha256}", tag = "interactions",
    params(("sha256" = String, Path, description = "SHA-256 of the bytes, 64 lowercase hex digits")),
    responses(
        (status = 200, description = "The attachment's bytes, as their own media type", content_type = "*/*", body = Vec<u8>),
        (status = 404, description = "No such blob", body = ErrorBody),
    )
)]
pub async fn blob(
    State(state): State<AppState>,
    principal: Principal,
    super::PathParam(sha256): super::PathParam,
) -> ApiResult<Response> {
    principal.require(&[Role::Worker, Role::Approver])?;
    if !is_sha256_hex(&sha256) {
        return Err(ApiError::NotFound(
            "no such blob: expected 64 lowercase hex digits".into(),
        ));
    }
    let (media_type, bytes) = state
        .store()
        .get_blob(&sha256)
        .await?
        .ok_or_else(|| ApiError::NotFound(format!("no blob {sha256}")))?;
    let content_type = HeaderValue::from_str(&media_type)
        .unwrap_or(HeaderValue::from_static("application/octet-stream"));
    Ok((
        [
            (CONTENT_TYPE, content_type),
            (CONTENT_DISPOSITION, HeaderValue::from_static("attachment")),
            (X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff")),
            (
                CONTENT_SECURITY_POLICY,
                HeaderValue::from_static("default-src 'none'; sandbox"),
            ),
            (
                CACHE_CONTROL,
                HeaderValue::from_static("private, max-age=31536000, immutable"),
            ),
        ],
        bytes,
    )
        .into_response())
}

/// `GET /metrics` (admin; `--metrics-listen` serves it without a token on
/// an address of its own): OpenMetrics text.
#[utoipa::path(
    get, path = "/metrics", tag = "server",
    responses((status = 200, description = "OpenMetrics text exposition", content_type = "application/openmetrics-text", body = String))
)]
pub async fn metrics(State(state): State<AppState>, principal: Principal) -> ApiResult<Response> {
    principal.require(&[Role::Admin])?;
    exposition(&state).await
}

/// The most pending interactions `/metrics` reads to count them by session
/// and kind (in pages); past it the gauges count what was read.
const PENDING_READ: usize = 20_000;

/// The metrics' text, with the pending interactions counted by session and
/// kind from the store.
pub async fn exposition(state: &AppState) -> ApiResult<Response> {
    let mut counts: std::collections::BTreeMap<(String, String), i64> = Default::default();
    let mut filter = lev_store::ListFilter {
        status: Some(lev_protocol::InteractionStatus::Pending),
        session_id: None,
        limit: 500,
        before: None,
    };
    let mut read = 0;
    loop {
        let page = state.store().list_interactions(filter.clone()).await?;
        read += page.items.len();
        for view in &page.items {
            let i = &view.request;
            *counts
                .entry((
                    i.request.session_id.clone(),
                    i.request.kind.type_name().to_owned(),
                ))
                .or_default() += 1;
        }
        match page.next_before {
            Some(before) if read < PENDING_READ => filter.before = Some(before),
            _ => break,
        }
    }
    let pending: Vec<(String, String, i64)> = counts
        .into_iter()
        .map(|((session, kind), n)| (session, kind, n))
        .collect();
    let text = state.metrics().render(state.hub().waiting(), &pending);
    Ok((
        [(
            CONTENT_TYPE,
            HeaderValue::from_static("application/openmetrics-text; version=1.0.0; charset=utf-8"),
        )],
        text,
    )
        .into_response())
}
