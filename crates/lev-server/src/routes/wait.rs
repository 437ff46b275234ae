//! `GET /v1/interactions/{id}/wait`: the long-poll a worker blocks on.
//!
//! [`crate::interactions::wait_final`] with the caller's access check; a
//! reconnecting waiter is simply a new one.

use lev_protocol::api::ErrorBody;
use std::time::Duration;

use axum::Json;
use axum::extract::State;
use lev_protocol::InteractionStatus;
use lev_protocol::api::{InteractionView, Role, WaitResponse};
use serde::Deserialize;

use super::Q;
use crate::auth::Principal;
use crate::error::ApiResult;
use crate::interactions;
use crate::state::AppState;

/// Default long-poll length.
const DEFAULT_WAIT: u64 = 30;
/// Longest long-poll; longer asks are clamped.
const MAX_WAIT: u64 = 300;

/// The query of `wait`.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct WaitQuery {
    /// Seconds to hold the request open (default 30, at most 300).
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
#[utoipa::path(
    get, path = "/v1/interactions/{id}/wait", tag = "interactions",
    params(("id" = String, Path, description = "The interaction's id"), WaitQuery),
    responses(
        (status = 200, description = "The final state, or `pending` when the wait timed out", body = WaitResponse),
        (status = 404, description = "No such interaction", body = ErrorBody),
    )
)]
pub async fn wait(
    State(state): State<AppState>,
    principal: Principal,
    super::PathParam(id): super::PathParam,
    Q(query): Q<WaitQuery>,
) -> ApiResult<Json<WaitResponse>> {
    principal.require(&[Role::Worker])?;
    let started = std::time::SystemTime::now();
    let deadline = tokio::time::Instant::now() + wait_length(query.timeout_s);
    let view = interactions::wait_final(&state, &id, deadline, |view| {
        interactions::check_access(&principal, view)
    })
    .await?;
    if view.request.status.is_final() {
        state.tracer().child(
            &id,
            "interaction.wait",
            crate::trace::SERVER,
            started,
            vec![("lev.status", view.request.status.as_str().to_owned())],
        );
    }
    Ok(Json(if view.request.status.is_final() {
        report(view)
    } else {
        WaitResponse {
            status: InteractionStatus::Pending,
            response: None,
            approval: None,
            answered_by: None,
        }
    }))
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
