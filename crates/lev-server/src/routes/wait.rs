//! `GET /v1/interactions/{id}/wait`: the long-poll a worker blocks on.
//!
//! The waiter registers with the hub before it reads the state, so an answer
//! committed at any moment after registration wakes it; on every wake it just
//! reads the state again. A reconnecting waiter is simply a new one.

use std::time::Duration;

use axum::Json;
use axum::extract::State;
use lev_protocol::InteractionStatus;
use lev_protocol::api::{InteractionView, Role, WaitResponse};
use serde::Deserialize;

use super::Q;
use super::interactions::load;
use crate::auth::Principal;
use crate::error::{ApiError, ApiResult};
use crate::state::AppState;

/// Default long-poll length.
const DEFAULT_WAIT: u64 = 30;
/// Longest long-poll; longer asks are clamped.
const MAX_WAIT: u64 = 300;

/// The query of `wait`.
#[derive(Debug, Deserialize)]
pub struct WaitQuery {
    timeout_s: Option<u64>,
}

/// How long a wait lasts: `timeout_s`, 30 s when absent, clamped to 300 s.
fn wait_length(timeout_s: Option<u64>) -> Duration {
    Duration::from_secs(timeout_s.unwrap_or(DEFAULT_WAIT).min(MAX_WAIT))
}

/// The final state as `wait` reports it.
fn report(view: InteractionView) -> WaitResponse {
    WaitResponse {
        status: view.request.status,
        response: view.response,
        approval: view.approval,
        answered_by: view.request.answered_by,
    }
}

/// `GET /v1/interactions/{id}/wait?timeout_s=` (worker).
pub async fn wait(
    State(state): State<AppState>,
    principal: Principal,
    super::PathParam(id): super::PathParam,
    Q(query): Q<WaitQuery>,
) -> ApiResult<Json<WaitResponse>> {
    principal.require(&[Role::Worker])?;
    let timeout = wait_length(query.timeout_s);
    let deadline = tokio::time::Instant::now() + timeout;
    let mut guard = state.hub().register(&id);
    let mut shutdown = state.shutdown_signal();
    loop {
        let view = load(&state, &principal, &id).await?;
        if view.request.status.is_final() {
            return Ok(Json(report(view)));
        }
        tokio::select! {
            changed = guard.rx.changed() => {
                if changed.is_err() {
                    return Err(ApiError::ShuttingDown);
                }
            }
            () = tokio::time::sleep_until(deadline) => {
                return Ok(Json(WaitResponse {
                    status: InteractionStatus::Pending,
                    response: None,
                    approval: None,
                    answered_by: None,
                }));
            }
            () = crate::state::stopped(&mut shutdown) => return Err(ApiError::ShuttingDown),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wait_length_defaults_and_clamps() {
        assert_eq!(wait_length(None), Duration::from_secs(30));
        assert_eq!(wait_length(Some(0)), Duration::ZERO);
        assert_eq!(wait_length(Some(120)), Duration::from_secs(120));
        assert_eq!(wait_length(Some(301)), Duration::from_secs(300));
        assert_eq!(wait_length(Some(u64::MAX)), Duration::from_secs(300));
    }
}
