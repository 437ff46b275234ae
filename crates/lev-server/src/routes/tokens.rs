//! `POST /v1/tokens`, `GET /v1/tokens`, `DELETE /v1/tokens/{name}` (admin).

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use lev_protocol::api::{Page, Role, TokenCreate, TokenCreated, TokenInfo};
use lev_protocol::validate::check_id;
use lev_store::{TokenCreateOutcome, TokenRecord};
use time::OffsetDateTime;

use crate::auth::{Principal, new_secret, token_hash};
use crate::body::JsonBody;
use crate::error::{ApiError, ApiResult};
use crate::state::AppState;

/// Create a token: 201 with its secret, shown this once.
pub async fn create(
    State(state): State<AppState>,
    principal: Principal,
    JsonBody(req): JsonBody<TokenCreate>,
) -> ApiResult<(StatusCode, Json<TokenCreated>)> {
    principal.require(&[Role::Admin])?;
    check_id("name", &req.name)?;
    if lev_protocol::ids::is_reserved_token_name(&req.name) {
        return Err(ApiError::Invalid(format!(
            "name: {:?} is reserved (policy, timeout, system, operator and names starting \
             with person:, group: or task: are written by lev itself); choose another",
            req.name
        )));
    }
    check_sessions(req.role, req.sessions.as_deref())?;
    if let Some(caller) = &req.caller {
        check_id("caller", caller)?;
        if req.role != Role::Worker {
            return Err(ApiError::Invalid(format!(
                "caller: only a worker token is bound to a caller, found role {}",
                req.role.as_str()
            )));
        }
    }
    let secret = new_secret().map_err(|e| ApiError::Internal(format!("no randomness: {e}")))?;
    let record = TokenRecord {
        info: TokenInfo {
            name: req.name.clone(),
            role: req.role,
            caller: req.caller,
            sessions: req.sessions,
            created_at: OffsetDateTime::now_utc(),
        },
        hash: token_hash(&secret),
    };
    match state.store().create_token(record, &principal.name).await? {
        TokenCreateOutcome::Created => Ok((
            StatusCode::CREATED,
            Json(TokenCreated {
                name: req.name,
                role: req.role,
                token: secret,
            }),
        )),
        TokenCreateOutcome::NameTaken => Err(ApiError::Conflict {
            code: "name_taken",
            message: format!("a token named {:?} exists; revoke it first", req.name),
        }),
    }
}

/// List tokens (never their secrets), by name, on one page.
pub async fn list(
    State(state): State<AppState>,
    principal: Principal,
) -> ApiResult<Json<Page<TokenInfo>>> {
    principal.require(&[Role::Admin])?;
    Ok(Json(Page::last(state.store().list_tokens().await?)))
}

/// Revoke a token: 204, effective on the next request; 404 when none.
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

/// Session patterns: required for operators, allowed for workers, refused
/// for other roles (an approver or admin acts across sessions).
fn check_sessions(role: Role, sessions: Option<&[String]>) -> ApiResult<()> {
    use lev_protocol::ids::{MAX_SESSION_PATTERNS, is_valid_session_pattern};
    match (role, sessions) {
        (Role::Operator, None) => Err(ApiError::Invalid(
            "sessions: an operator token needs the session patterns it may operate \
             (e.g. [\"ci-*\", \"build-7\"]; [\"*\"] for every session)"
                .into(),
        )),
        (Role::Approver | Role::Admin, Some(_)) => Err(ApiError::Invalid(format!(
            "sessions: only operator and worker tokens are limited to sessions, found role {}",
            role.as_str()
        ))),
        (_, Some([])) => Err(ApiError::Invalid(
            "sessions: expected at least one session pattern".into(),
        )),
        (_, Some(list)) if list.len() > MAX_SESSION_PATTERNS => Err(ApiError::Invalid(format!(
            "sessions: at most {MAX_SESSION_PATTERNS} patterns, found {}",
            list.len()
        ))),
        (_, Some(list)) => {
            for (i, p) in list.iter().enumerate() {
                if !is_valid_session_pattern(p) {
                    return Err(ApiError::Invalid(format!(
                        "sessions[{i}]: expected 1 to 128 characters of A-Z a-z 0-9 . _ : - *, found {:?}",
                        p.chars().take(64).collect::<String>()
                    )));
                }
            }
            Ok(())
        }
        _ => Ok(()),
    }
}
