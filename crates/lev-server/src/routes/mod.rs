//! The HTTP routes of SPEC section 3, and what wraps them all: the shutdown
//! gate (503 once shutdown begins), request counting, JSON 404 and 405.

mod approvals;
mod audit;
mod events;
mod hooks;
mod interactions;
mod misc;
pub(crate) mod openapi;
mod people;
pub(crate) mod respond;
mod sessions;
mod stats;
mod tasks;
mod tokens;
mod wait;
mod webhooks;

use axum::Router;
use axum::extract::{MatchedPath, Request, State};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post};

use axum::http::HeaderValue;

use crate::error::ApiError;
pub(crate) use crate::extract::{PathParam, Q};
use crate::log::{NotedInteraction, RequestNote};
use crate::state::AppState;

/// The router over `state`.
pub fn router(state: AppState) -> Router {
    Router::new()
        .route("/v1/health", get(misc::health))
        .route("/v1/keys", get(misc::keys))
        .route("/v1/people/keys", get(people::keys).post(people::register))
        .route("/v1/people/keys/{kid}", delete(people::revoke))
        .route("/v1/people/passkeys/options", get(people::passkey_options))
        .route("/v1/people/passkeys", post(people::register_passkey))
        .route("/v1/openapi.json", get(openapi::openapi_json))
        .route(
            "/v1/interactions",
            post(interactions::create).get(interactions::list),
        )
        .route("/v1/interactions/{id}", get(interactions::get_one))
        .route("/v1/interactions/{id}/wait", get(wait::wait))
        .route("/v1/interactions/{id}/respond", post(respond::respond))
        .route("/v1/interactions/{id}/cancel", post(interactions::cancel))
        .route("/v1/blobs/{sha256}", get(misc::blob))
        .route("/v1/events", get(events::events))
        .route("/v1/tokens", post(tokens::create).get(tokens::list))
        .route("/v1/tokens/{name}", delete(tokens::revoke))
        .route("/v1/webhooks", post(webhooks::create).get(webhooks::list))
        .route("/v1/webhooks/{id}", delete(webhooks::delete))
        .route("/v1/webhooks/{id}/deliveries", get(webhooks::deliveries))
        .route(
            "/v1/integrations/slack/interactions",
            post(crate::slack::interact::interactions),
        )
        .route("/v1/audit", get(audit::audit))
        .route("/v1/stats", get(stats::stats))
        .route("/v1/hooks/claude-code", post(hooks::claude_code))
        .route("/v1/gate", post(approvals::gate))
        .route("/v1/grants", get(approvals::list_grants))
        .route("/v1/grants/{id}", delete(approvals::revoke_grant))
        .route("/v1/nonces/consume", post(approvals::consume_nonce))
        .route("/v1/keys/rotate", post(approvals::rotate_key))
        .route("/v1/keys/{kid}", delete(approvals::remove_key))
        .route("/v1/operators/{sid}/ws", get(crate::operators::ws::upgrade))
        .route("/v1/sessions/{sid}/ask", post(sessions::ask))
        .route("/v1/sessions/{sid}/spawn", post(sessions::spawn))
        .route("/v1/worker/result", post(tasks::post_result))
        .route("/v1/tasks", get(tasks::list))
        .route("/v1/tasks/{id}", get(tasks::get_one))
        .route("/metrics", get(misc::metrics))
        .merge(crate::dashboard::routes())
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(middleware::from_fn_with_state(state.clone(), gate))
        .with_state(state)
}

/// `--metrics-listen`'s router: `GET /metrics` without a token, nothing
/// else.
pub fn metrics_only(state: AppState) -> Router {
    Router::new()
        .route(
            "/metrics",
            get(|State(state): State<AppState>| async move { misc::exposition(&state).await }),
        )
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .with_state(state)
}

async fn not_found() -> ApiError {
    ApiError::NotFound("no such route".into())
}

async fn method_not_allowed() -> Response {
    let mut response =
        ApiError::Malformed("this route does not take that method".into()).into_response();
    *response.status_mut() = axum::http::StatusCode::METHOD_NOT_ALLOWED;
    response
}

/// The header a request's id comes in and goes back in.
const REQUEST_ID: &str = "x-request-id";

/// The client's `x-request-id` when it is 1 to 128 of `A-Z a-z 0-9 . _ : -`,
/// else a new one.
fn request_id(req: &Request) -> String {
    req.headers()
        .get(REQUEST_ID)
        .and_then(|v| v.to_str().ok())
        .filter(|v| {
            (1..=128).contains(&v.len())
                && v.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"._:-".contains(&b))
        })
        .map_or_else(
            || {
                crate::ids::new_id("rq_", time::OffsetDateTime::now_utc())
                    .unwrap_or_else(|_| "rq_none".to_owned())
            },
            str::to_owned,
        )
}

/// The interaction a path names (`/v1/interactions/{id}...`).
fn path_interaction(route: &str, path: &str) -> Option<String> {
    route
        .starts_with("/v1/interactions/{id}")
        .then(|| path.split('/').nth(3).map(str::to_owned))
        .flatten()
}

/// Refuse new requests once shutdown began; count, time and log every
/// request once, under its `x-request-id` (the client's, else a new one),
/// returned in the response.
async fn gate(State(state): State<AppState>, mut req: Request, next: Next) -> Response {
    let started = std::time::Instant::now();
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map_or_else(|| "other".to_owned(), |p| p.as_str().to_owned());
    // The method is the client's word: any token. Only the methods routes
    // take are counted by name, so a client cannot add a counter (kept for
    // the process's life) per request with a new made-up method.
    let method = match req.method().as_str() {
        m @ ("GET" | "POST" | "PUT" | "PATCH" | "DELETE" | "HEAD" | "OPTIONS") => m,
        _ => "other",
    }
    .to_owned();
    let request_id = request_id(&req);
    let mut interaction = path_interaction(&route, req.uri().path());
    let note = RequestNote::new();
    req.extensions_mut().insert(std::sync::Arc::clone(&note));
    let mut response = if state.is_shutting_down() {
        ApiError::ShuttingDown.into_response()
    } else {
        next.run(req).await
    };
    if let Ok(value) = HeaderValue::from_str(&request_id) {
        response.headers_mut().insert(REQUEST_ID, value);
    }
    if let Some(NotedInteraction(id)) = response.extensions().get::<NotedInteraction>() {
        interaction = Some(id.clone());
    }
    let elapsed = started.elapsed();
    let status = response.status().as_u16();
    state.metrics().request(&method, &route, status, elapsed);
    tracing::info!(
        target: crate::log::REQUEST_TARGET,
        method,
        route,
        status,
        duration_ms = (elapsed.as_secs_f64() * 1e6).round() / 1e3,
        request_id,
        token = note.token(),
        interaction_id = interaction.as_deref(),
        "request"
    );
    response
}
