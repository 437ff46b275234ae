//! `POST /v1/sessions/{sid}/ask` and `POST /v1/sessions/{sid}/spawn`: a
//! worker's requests to its session's operator (SPEC section 4).
//!
//! Both wait for the operator (up to the grace time when none is connected,
//! up to the reply timeout once one has the message); an ask or a hook the
//! operator does not answer in time goes to people. The caller's `timeout_s`
//! bounds the whole call: past it, 504. A spawn's task lifecycle is the
//! domain module `tasks`.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use lev_protocol::api::ErrorBody;
use lev_protocol::api::{AskRequest, AskResponse, Role, SpawnRequest, SpawnResponse};
use lev_protocol::{ClientMsg, InteractionKind, InteractionStatus, ServerMsg};
use serde_json::Value;

use super::PathParam;
use crate::auth::Principal;
use crate::body::JsonBody;
use crate::error::{ApiError, ApiResult};
use crate::operators::hub::{Kind, Waited};
use crate::operators::people::{Escalation, PeopleOutcome, ask_people, question_text};
use crate::operators::{deadline, escalation_reason, timed_out, wait};
use crate::state::AppState;

/// An ask's `timeout_s` when it names none.
const DEFAULT_ASK_TIMEOUT_S: u64 = 600;

/// `POST /v1/sessions/{sid}/ask` (worker).
#[utoipa::path(
    post, path = "/v1/sessions/{sid}/ask", tag = "operators",
    params(("sid" = String, Path, description = "The session")),
    request_body = AskRequest,
    responses(
        (status = 200, description = "The operator's (or a person's) answer", body = AskResponse),
        (status = 409, description = "Nobody can answer", body = ErrorBody),
        (status = 410, description = "The question was cancelled", body = ErrorBody),
        (status = 429, description = "Too many pending", body = ErrorBody),
        (status = 502, description = "The operator failed", body = ErrorBody),
        (status = 504, description = "No answer in time", body = ErrorBody),
    )
)]
pub async fn ask(
    State(state): State<AppState>,
    principal: Principal,
    PathParam(session_id): PathParam,
    JsonBody(req): JsonBody<AskRequest>,
) -> ApiResult<Json<AskResponse>> {
    principal.require(&[Role::Worker])?;
    lev_protocol::validate::check_id("session_id", &session_id)?;
    principal.check_session(&session_id)?;
    let deadline = deadline(req.timeout_s, DEFAULT_ASK_TIMEOUT_S);
    let too_late = || timed_out("the ask", req.timeout_s, DEFAULT_ASK_TIMEOUT_S);
    let hub = Arc::clone(state.operators());
    let question = req.question.clone();
    let mut ticket = hub
        .submit(&session_id, Kind::Ask, |req_id| ServerMsg::Ask {
            req_id,
            question,
        })
        .await?;
    let waited = wait(&state, &mut ticket, deadline).await?;
    let reason = match waited {
        Waited::Replied(reply) => {
            return match reply.msg {
                ClientMsg::Answer { value, .. } => Ok(Json(AskResponse {
                    answer: value,
                    answered_by: reply.by,
                })),
                other => Err(ApiError::Internal(format!(
                    "the hub resolved an ask with a {}",
                    other.type_name()
                ))),
            };
        }
        ref other => escalation_reason(&state, &session_id, other).ok_or_else(too_late)?,
    };
    drop(ticket);
    let escalation = Escalation {
        session_id: session_id.clone(),
        caller: principal.caller.clone(),
        actor: principal.name.clone(),
        from: "ask",
        title: format!("A question from session {session_id} that its operator did not answer"),
        kind: InteractionKind::FreeText {
            prompt: question_text(&req.question, state.settings().limits.prompt_bytes),
        },
        reason,
    };
    match ask_people(&state, escalation, deadline).await? {
        PeopleOutcome::Answered { response, by, .. } => Ok(Json(AskResponse {
            answer: Value::String(response.value.clone().unwrap_or_default()),
            answered_by: by,
        })),
        PeopleOutcome::Closed {
            interaction_id,
            status: InteractionStatus::Cancelled,
        } => Err(ApiError::Gone(format!(
            "the question went to people as {interaction_id}, and was cancelled"
        ))),
        PeopleOutcome::Closed { interaction_id, .. }
        | PeopleOutcome::Deadline { interaction_id } => Err(ApiError::Timeout(format!(
            "{}; it went to people as {interaction_id}, who did not answer in time",
            too_late()
        ))),
    }
}

/// `POST /v1/sessions/{sid}/spawn` (worker): hook, task, spawn, result.
#[utoipa::path(
    post, path = "/v1/sessions/{sid}/spawn", tag = "operators",
    params(("sid" = String, Path, description = "The session")),
    request_body = SpawnRequest,
    responses(
        (status = 200, description = "The task's outcome", body = SpawnResponse),
        (status = 409, description = "No operator", body = ErrorBody),
        (status = 502, description = "The operator refused or failed", body = ErrorBody),
        (status = 504, description = "No result in time", body = ErrorBody),
    )
)]
pub async fn spawn(
    State(state): State<AppState>,
    principal: Principal,
    PathParam(session_id): PathParam,
    JsonBody(req): JsonBody<SpawnRequest>,
) -> ApiResult<Json<SpawnResponse>> {
    principal.require(&[Role::Worker])?;
    lev_protocol::validate::check_id("session_id", &session_id)?;
    principal.check_session(&session_id)?;
    Ok(Json(
        crate::tasks::spawn(&state, &principal, &session_id, req).await?,
    ))
}
