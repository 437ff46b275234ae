//! The web dashboard: its page and assets (embedded in the binary, no build
//! step), and its login, logout and `me` routes.
//!
//! - `GET /`: the page, under a strict Content-Security-Policy (no inline
//!   script or style, nothing from elsewhere, no framing).
//! - `GET /assets/app.js`, `GET /assets/app.css`: the script and styles. The
//!   script gets [`lev_protocol::text::HIDDEN`] written into it when first
//!   served, so the page flags exactly the characters the CLI flags.
//! - `POST /v1/login {token}`: an approver or admin token opens a session
//!   (see [`crate::session_auth`]); answers `{name, role, csrf_token,
//!   attach_root}` and sets the session cookie.
//! - `POST /v1/logout`: ends the session (CSRF token required) and clears the
//!   cookie.
//! - `GET /v1/me`: who is logged in: `{name, role, csrf_token, attach_root}`
//!   (`csrf_token` null when authenticated by a bearer token).
//! - `GET /v1/operators?sessions=a,b` (approver): which of those sessions have
//!   an operator connected now, `{"sessions": [{"session_id", "connected"}]}`,
//!   so the page knows the state before the first `operator.*` event.

use std::sync::{Arc, LazyLock};

use axum::body::Body;
use axum::extract::State;
use axum::http::header::{
    CACHE_CONTROL, CONTENT_SECURITY_POLICY, CONTENT_TYPE, ETAG, IF_NONE_MATCH, REFERRER_POLICY,
    SET_COOKIE, X_CONTENT_TYPE_OPTIONS, X_FRAME_OPTIONS,
};
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Extension, Json, Router};
use lev_protocol::api::{
    ErrorBody, LoggedOut, LoginRequest, Me, OperatorPresence, Role, SessionPresence,
};
use serde::Deserialize;
use sha2::{Digest, Sha256};

use crate::auth::{Principal, token_hash};
use crate::body::JsonBody;
use crate::error::{ApiError, ApiResult};
use crate::session_auth::{CurrentSession, Sessions, session_cookie};
use crate::state::AppState;

/// The page's Content-Security-Policy.
pub const CSP: &str = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' \
                       data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; \
                       form-action 'self'";

const INDEX_HTML: &str = include_str!("../assets/index.html");
const APP_JS_SOURCE: &str = include_str!("../assets/app.js");
const APP_CSS: &str = include_str!("../assets/app.css");

/// Where app.js takes the table of hidden characters.
const HIDDEN_PLACEHOLDER: &str = "[/* lev_protocol::text::HIDDEN */]";

/// app.js with [`lev_protocol::text::HIDDEN`] in place of its placeholder:
/// one definition of hidden characters for every interface, no second copy.
static APP_JS: LazyLock<String> = LazyLock::new(|| {
    APP_JS_SOURCE.replacen(
        HIDDEN_PLACEHOLDER,
        &lev_protocol::text::hidden_ranges_json(),
        1,
    )
});
/// The dashboard's routes (merged into the API router).
pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/", get(index))
        .route("/assets/app.js", get(app_js))
        .route("/assets/app.css", get(app_css))
        .route("/v1/login", post(login))
        .route("/v1/logout", post(logout))
        .route("/v1/me", get(me))
        .route("/v1/operators", get(operators))
}

fn etag(body: &str) -> String {
    let digest = Sha256::digest(body.as_bytes());
    format!("\"{}\"", crate::ids::hex(&digest[..12]))
}

/// An embedded file with its type, security headers and a validator.
fn asset(
    headers: &HeaderMap,
    body: &'static str,
    content_type: &'static str,
    page: bool,
) -> Response {
    let tag = etag(body);
    let fresh = headers
        .get(IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(',').any(|t| t.trim() == tag));
    let mut response = if fresh {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        Response::new(Body::from(body))
    };
    let h = response.headers_mut();
    h.insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    h.insert(X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    h.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    if let Ok(v) = HeaderValue::from_str(&tag) {
        h.insert(ETAG, v);
    }
    if page {
        h.insert(CONTENT_SECURITY_POLICY, HeaderValue::from_static(CSP));
        h.insert(X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
        h.insert(REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
        h.insert(
            HeaderName::from_static("cross-origin-opener-policy"),
            HeaderValue::from_static("same-origin"),
        );
        h.insert(
            HeaderName::from_static("permissions-policy"),
            HeaderValue::from_static("camera=(), microphone=(), geolocation=(), payment=()"),
        );
    }
    h.insert(
        HeaderName::from_static("cross-origin-resource-policy"),
        HeaderValue::from_static("same-origin"),
    );
    response
}

#[utoipa::path(get, path = "/", tag = "dashboard", security(()),
    responses((status = 200, description = "The dashboard's page", content_type = "text/html", body = String),
        (status = 304, description = "Not modified (`If-None-Match`)")))]
async fn index(headers: HeaderMap) -> Response {
    asset(&headers, INDEX_HTML, "text/html; charset=utf-8", true)
}

#[utoipa::path(get, path = "/assets/app.js", tag = "dashboard", security(()),
    responses((status = 200, description = "The dashboard's script", content_type = "text/javascript", body = String),
        (status = 304, description = "Not modified (`If-None-Match`)")))]
async fn app_js(headers: HeaderMap) -> Response {
    asset(&headers, &APP_JS, "text/javascript; charset=utf-8", false)
}

#[utoipa::path(get, path = "/assets/app.css", tag = "dashboard", security(()),
    responses((status = 200, description = "The dashboard's style sheet", content_type = "text/css", body = String),
        (status = 304, description = "Not modified (`If-None-Match`)")))]
async fn app_css(headers: HeaderMap) -> Response {
    asset(&headers, APP_CSS, "text/css; charset=utf-8", false)
}

fn sessions_of(ext: Option<Extension<Arc<Sessions>>>) -> ApiResult<Arc<Sessions>> {
    ext.map(|Extension(s)| s)
        .ok_or_else(|| ApiError::Internal("the dashboard's session store is not installed".into()))
}

/// `POST /v1/login`: an approver's or admin's token for a session cookie.
#[utoipa::path(post, path = "/v1/login", tag = "dashboard", security(()), request_body = LoginRequest,
    responses((status = 200, description = "Logged in: the session cookie is set", body = Me),
        (status = 401, description = "An unknown or revoked token", body = ErrorBody),
        (status = 403, description = "Not an approver or admin token, or another origin", body = ErrorBody)))]
async fn login(
    State(state): State<AppState>,
    sessions: Option<Extension<Arc<Sessions>>>,
    headers: HeaderMap,
    JsonBody(body): JsonBody<LoginRequest>,
) -> ApiResult<Response> {
    let sessions = sessions_of(sessions)?;
    // Another origin (another localhost port, say) may not log a browser in.
    crate::session_auth::check_origin(&headers, state.settings())?;
    // A cross-site form cannot send this type without a CORS preflight,
    // which this server never grants: no login CSRF.
    let json = headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.trim_start()
                .to_ascii_lowercase()
                .starts_with("application/json")
        });
    if !json {
        return Err(ApiError::Malformed(
            "expected Content-Type: application/json".into(),
        ));
    }
    let secret = body.token.trim();
    let record = if secret.is_empty() {
        None
    } else {
        state.store().token_by_hash(&token_hash(secret)).await?
    };
    let record = record.ok_or_else(|| ApiError::Unauthorized("unknown or revoked token".into()))?;
    if !matches!(record.info.role, Role::Approver | Role::Admin) {
        return Err(ApiError::forbidden(format!(
            "the dashboard is for approver and admin tokens; {:?} is a {} token",
            record.info.name,
            record.info.role.as_str()
        )));
    }
    // A login replaces the session the browser had, if any.
    if let Some(old) = session_cookie(&headers) {
        sessions.remove(&old).await?;
    }
    let session = sessions.create(&record.hash).await?;
    let cookie = HeaderValue::from_str(&sessions.cookie(&session.id))
        .map_err(|e| ApiError::Internal(format!("session cookie: {e}")))?;
    let me = Me {
        name: record.info.name,
        role: record.info.role,
        csrf_token: Some(session.csrf),
        attach_root: state.settings().attach_root.is_some(),
    };
    let mut response = Json(me).into_response();
    response.headers_mut().insert(SET_COOKIE, cookie);
    response
        .headers_mut()
        .insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    Ok(response)
}

/// `POST /v1/logout`: ends the browser's session (CSRF token required).
#[utoipa::path(post, path = "/v1/logout", tag = "dashboard", security(()),
    responses((status = 200, description = "Logged out: the cookie is cleared", body = LoggedOut),
        (status = 403, description = "A live session without its CSRF token", body = ErrorBody)))]
async fn logout(
    sessions: Option<Extension<Arc<Sessions>>>,
    headers: HeaderMap,
) -> ApiResult<Response> {
    let sessions = sessions_of(sessions)?;
    if let Some(id) = session_cookie(&headers) {
        // Only the page itself may log its person out; an already ended
        // session has nothing to protect, and its cookie is just cleared.
        if sessions.is_live(&id).await? {
            sessions.check_csrf(&id, &headers).await?;
            sessions.remove(&id).await?;
        }
    }
    let mut response = Json(LoggedOut::default()).into_response();
    let clear = HeaderValue::from_str(&sessions.clear_cookie())
        .map_err(|e| ApiError::Internal(format!("session cookie: {e}")))?;
    response.headers_mut().insert(SET_COOKIE, clear);
    Ok(response)
}

/// `GET /v1/me`: who the token or session is.
#[utoipa::path(get, path = "/v1/me", tag = "dashboard",
    responses((status = 200, description = "The caller", body = Me)))]
async fn me(
    State(state): State<AppState>,
    principal: Principal,
    CurrentSession(session): CurrentSession,
) -> Json<Me> {
    Json(Me {
        name: principal.name,
        role: principal.role,
        csrf_token: session.map(|s| s.csrf),
        attach_root: state.settings().attach_root.is_some(),
    })
}

/// `GET /v1/operators?sessions=`.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct OperatorsQuery {
    /// Comma-separated session ids.
    #[serde(default)]
    pub sessions: String,
}

/// Most sessions one `GET /v1/operators` asks about.
const MAX_OPERATOR_QUERY: usize = 1000;

/// `GET /v1/operators?sessions=a,b` (approver).
#[utoipa::path(get, path = "/v1/operators", tag = "operators", params(OperatorsQuery),
    responses((status = 200, description = "Whether each session has an operator connected", body = OperatorPresence)))]
async fn operators(
    State(state): State<AppState>,
    principal: Principal,
    crate::extract::Q(query): crate::extract::Q<OperatorsQuery>,
) -> ApiResult<Json<OperatorPresence>> {
    principal.require(&[Role::Approver])?;
    let mut sessions: Vec<&str> = query
        .sessions
        .split(',')
        .filter(|s| !s.is_empty())
        .collect();
    sessions.sort_unstable();
    sessions.dedup();
    if sessions.len() > MAX_OPERATOR_QUERY {
        return Err(ApiError::Invalid(format!(
            "sessions: expected at most {MAX_OPERATOR_QUERY} session ids, found {}",
            sessions.len()
        )));
    }
    for sid in &sessions {
        lev_protocol::validate::check_id("sessions", sid)?;
    }
    let hub = state.operators();
    let mut presence = Vec::with_capacity(sessions.len());
    for sid in &sessions {
        presence.push(SessionPresence {
            session_id: (*sid).to_owned(),
            connected: hub.is_connected(sid).await?,
        });
    }
    Ok(Json(OperatorPresence { sessions: presence }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_loads_only_its_own_assets() {
        assert!(INDEX_HTML.contains(r#"src="assets/app.js""#));
        assert!(INDEX_HTML.contains(r#"href="assets/app.css""#));
        // No inline script or handler: the CSP would refuse them.
        assert_eq!(INDEX_HTML.matches("<script").count(), 1);
        assert!(!INDEX_HTML.contains(" onclick=") && !INDEX_HTML.contains(" onload="));
        assert!(!INDEX_HTML.contains("style="));
    }

    #[test]
    fn the_script_gets_the_table_of_hidden_characters() {
        assert_eq!(APP_JS_SOURCE.matches(HIDDEN_PLACEHOLDER).count(), 1);
        assert!(!APP_JS.contains(HIDDEN_PLACEHOLDER));
        let table = format!(
            "const HIDDEN_RANGES = {};",
            lev_protocol::text::hidden_ranges_json()
        );
        assert!(APP_JS.contains(&table), "app.js lacks {table}");
        assert!(
            table.contains("[917504,921599]"),
            "tags and selectors: {table}"
        );
    }

    #[test]
    fn the_script_never_renders_html() {
        for banned in [
            ".innerHTML",
            "outerHTML",
            "insertAdjacentHTML",
            "document.write",
            "eval(",
        ] {
            assert!(!APP_JS.contains(banned), "app.js uses {banned}");
        }
    }
}
