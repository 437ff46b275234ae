//! `POST /v1/sessions/{sid}/ask` and `POST /v1/sessions/{sid}/spawn`: a
//! worker's requests to its session's operator (SPEC section 4).
//!
//! Both wait for the operator (up to the grace time when none is connected,
//! up to the reply timeout once one has the message); an ask or a hook the
//! operator does not answer in time goes to people. The caller's `timeout_s`
//! bounds the whole call: past it, 504.

use lev_protocol::api::ErrorBody;
use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::extract::State;
use lev_protocol::api::{
    AskRequest, AskResponse, Role, SpawnRequest, SpawnResponse, Task, TaskStatus,
};
use lev_protocol::{ClientMsg, InteractionKind, InteractionStatus, ServerMsg};
use lev_store::tasks::{NewTask, TaskFinish};
use serde_json::{Value, json};
use time::OffsetDateTime;
use tokio::time::Instant;

use super::PathParam;
use crate::auth::Principal;
use crate::body::JsonBody;
use crate::error::{ApiError, ApiResult};
use crate::operators::hub::{Kind, Ticket, Waited};
use crate::operators::people::{Escalation, PeopleOutcome, ask_people, question_text};
use crate::operators::secs;
use crate::state::AppState;

/// An ask's `timeout_s` when it names none.
const DEFAULT_ASK_TIMEOUT_S: u64 = 600;
/// A spawn's `timeout_s` when it names none: sub-agents take a while.
const DEFAULT_SPAWN_TIMEOUT_S: u64 = 3600;
/// The longest `timeout_s` taken; longer is clamped.
const MAX_TIMEOUT_S: u64 = 7 * 24 * 3600;

fn deadline(timeout_s: Option<u64>, default: u64) -> Instant {
    Instant::now() + Duration::from_secs(timeout_s.unwrap_or(default).min(MAX_TIMEOUT_S))
}

/// Wait on a ticket, or 503 when the server begins to shut down.
async fn wait(state: &AppState, ticket: &mut Ticket, deadline: Instant) -> ApiResult<Waited> {
    let mut shutdown = state.shutdown_signal();
    tokio::select! {
        waited = ticket.wait(deadline) => Ok(waited),
        () = crate::shutdown::stopped(&mut shutdown) => Err(ApiError::ShuttingDown),
    }
}

fn timed_out(what: &str, timeout_s: Option<u64>, default: u64) -> ApiError {
    ApiError::Timeout(format!(
        "{what} got no answer within timeout_s ({} s)",
        timeout_s.unwrap_or(default).min(MAX_TIMEOUT_S)
    ))
}

/// Why a message goes to people instead, or `None` when it should not.
fn escalation_reason(state: &AppState, session_id: &str, waited: &Waited) -> Option<String> {
    let settings = state.operators().settings();
    match waited {
        Waited::NoOperator => Some(format!(
            "no operator was connected to session {session_id} for {}",
            secs(settings.grace)
        )),
        Waited::ReplyTimeout => Some(format!(
            "the operator of session {session_id} did not answer within {}",
            secs(settings.reply_timeout)
        )),
        _ => None,
    }
}

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

/// Finishes the task as failed if the spawn's caller goes away mid-way.
struct TaskGuard {
    state: AppState,
    task_id: String,
    armed: bool,
}

impl Drop for TaskGuard {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let (state, task_id) = (self.state.clone(), self.task_id.clone());
        self.state.spawn(async move {
            let _ = finish(
                &state,
                &task_id,
                TaskStatus::Failed,
                None,
                Some("the spawn's caller stopped waiting".into()),
                "system",
            )
            .await;
        });
    }
}

async fn finish(
    state: &AppState,
    task_id: &str,
    status: TaskStatus,
    result: Option<Value>,
    error: Option<String>,
    actor: &str,
) -> ApiResult<()> {
    // Whoever waits on the task wakes on its committed task.updated event;
    // a task already finished stays as it was.
    state
        .store()
        .finish_task(TaskFinish {
            task_id: task_id.to_owned(),
            status,
            result,
            error,
            actor: actor.to_owned(),
        })
        .await?;
    Ok(())
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
    let deadline = deadline(req.timeout_s, DEFAULT_SPAWN_TIMEOUT_S);
    let too_late = || timed_out("the spawn", req.timeout_s, DEFAULT_SPAWN_TIMEOUT_S);
    hook(&state, &principal, &session_id, &req.spawn, deadline)
        .await?
        .map_err(|_| too_late())?;

    let now = OffsetDateTime::now_utc();
    let task_id = crate::ids::new_id("tk_", now)
        .map_err(|e| ApiError::Internal(format!("no randomness: {e}")))?;
    let task_token =
        crate::auth::new_secret().map_err(|e| ApiError::Internal(format!("no randomness: {e}")))?;
    state
        .store()
        .create_task(NewTask {
            task: Task {
                id: task_id.clone(),
                session_id: session_id.clone(),
                status: TaskStatus::Pending,
                spawn: req.spawn.clone(),
                last_result: None,
                output_tail: None,
                error: None,
                caller: principal.caller.clone(),
                created_at: now,
                updated_at: now,
            },
            token_hash: crate::auth::token_hash(&task_token),
            actor: principal.name.clone(),
        })
        .await?;
    let mut guard = TaskGuard {
        state: state.clone(),
        task_id: task_id.clone(),
        armed: true,
    };
    let hub = Arc::clone(state.operators());
    // Running from the moment an operator has it: with one connected now,
    // marked before the message goes out, so nobody sees the task pending
    // after the operator does; else when the hub hands it over.
    let connected = hub.is_connected(&session_id).await?;
    if connected {
        state.store().start_task(&task_id, "lev").await?;
    }
    let spawn_msg = req.spawn.clone();
    let id_for_msg = task_id.clone();
    let mut ticket = hub
        .submit(&session_id, Kind::Spawn, |req_id| ServerMsg::Spawn {
            req_id,
            task_id: id_for_msg,
            task_token,
            spawn: spawn_msg,
        })
        .await?;
    if !connected {
        ticket.report_sent();
    }
    let reply = loop {
        match wait(&state, &mut ticket, deadline).await? {
            Waited::Sent => {
                if let Err(e) = state.store().start_task(&task_id, "lev").await {
                    crate::log::error(&format!("task {task_id}: cannot mark it running: {e}"));
                }
            }
            Waited::Replied(reply) => break reply,
            Waited::NoOperator | Waited::ReplyTimeout => {
                let message = format!(
                    "no operator was connected to session {session_id} for {}; the spawn of \
                     task {task_id} did not complete",
                    secs(state.operators().settings().grace)
                );
                guard.armed = false;
                finish(
                    &state,
                    &task_id,
                    TaskStatus::Failed,
                    None,
                    Some(message.clone()),
                    "lev",
                )
                .await?;
                return Err(ApiError::Upstream {
                    code: "spawn_failed",
                    message,
                });
            }
            Waited::Deadline => {
                guard.armed = false;
                finish(
                    &state,
                    &task_id,
                    TaskStatus::Failed,
                    None,
                    Some("timed out: the spawn's caller stopped waiting after timeout_s".into()),
                    "timeout",
                )
                .await?;
                return Err(too_late());
            }
        }
    };
    drop(ticket);
    let ClientMsg::SpawnAck {
        value, ok, error, ..
    } = reply.msg
    else {
        return Err(ApiError::Internal(
            "the hub resolved a spawn with another reply".into(),
        ));
    };
    let (value, ok, error) = if error.is_some() {
        (value, false, error)
    } else if value == json!({}) {
        deferred_result(&state, &task_id, deadline).await?
    } else {
        (value, ok, None)
    };
    guard.armed = false;
    let status = if ok && error.is_none() {
        TaskStatus::Succeeded
    } else {
        TaskStatus::Failed
    };
    finish(
        &state,
        &task_id,
        status,
        Some(value.clone()),
        error.clone(),
        &reply.by,
    )
    .await?;
    if let Some(error) = error {
        return Err(ApiError::Upstream {
            code: "spawn_failed",
            message: format!("task {task_id} failed: {error}"),
        });
    }
    Ok(Json(SpawnResponse {
        task_id,
        ok,
        value,
        error: None,
    }))
}

/// The hook before a spawn: `Ok(Ok(()))` to go on, `Ok(Err(()))` past the
/// deadline, `Err` for a rejection.
async fn hook(
    state: &AppState,
    principal: &Principal,
    session_id: &str,
    spawn: &Value,
    deadline: Instant,
) -> ApiResult<Result<(), ()>> {
    let hub = Arc::clone(state.operators());
    let spawn_msg = spawn.clone();
    let mut ticket = hub
        .submit(session_id, Kind::Hook, |req_id| ServerMsg::HookBefore {
            req_id,
            spawn: spawn_msg,
        })
        .await?;
    let waited = wait(state, &mut ticket, deadline).await?;
    drop(ticket);
    let reason = match waited {
        Waited::Replied(reply) => {
            return match reply.msg {
                ClientMsg::HookAck { ok: true, .. } => Ok(Ok(())),
                ClientMsg::HookAck {
                    ok: false, reason, ..
                } => Err(rejected(
                    reason.filter(|r| !r.trim().is_empty()),
                    &format!("the operator ({}) rejected the spawn", reply.by),
                )),
                other => Err(ApiError::Internal(format!(
                    "the hub resolved a hook with a {}",
                    other.type_name()
                ))),
            };
        }
        ref other => match escalation_reason(state, session_id, other) {
            Some(reason) => reason,
            None => return Ok(Err(())),
        },
    };
    let escalation = Escalation {
        session_id: session_id.to_owned(),
        caller: principal.caller.clone(),
        actor: principal.name.clone(),
        from: "hook",
        title: format!("A spawn in session {session_id} that its operator did not vet"),
        kind: InteractionKind::ToolApproval {
            tool_name: "spawn".into(),
            args_json: spawn.to_string(),
            missing_capabilities: Vec::new(),
            sandbox_mode: String::new(),
            options: Vec::new(),
        },
        reason,
    };
    match ask_people(state, escalation, deadline).await? {
        PeopleOutcome::Answered { response, by, .. } => {
            if response.approved == Some(true) {
                Ok(Ok(()))
            } else {
                let why = response
                    .feedback
                    .clone()
                    .or_else(|| response.reason.clone())
                    .filter(|r| !r.trim().is_empty());
                Err(rejected(why, &format!("{by} denied the spawn")))
            }
        }
        PeopleOutcome::Closed { .. } | PeopleOutcome::Deadline { .. } => Ok(Err(())),
    }
}

fn rejected(reason: Option<String>, otherwise: &str) -> ApiError {
    ApiError::Forbidden {
        code: "rejected_by_middleware",
        message: reason.unwrap_or_else(|| otherwise.to_owned()),
    }
}

/// `spawn_ack` with value `{}`: the result is the task's `last_result` from
/// `POST /v1/worker/result`, waited for up to the grace time.
async fn deferred_result(
    state: &AppState,
    task_id: &str,
    deadline: Instant,
) -> ApiResult<(Value, bool, Option<String>)> {
    let grace = state.operators().settings().grace;
    let until = deadline.min(Instant::now() + grace);
    let posted = crate::hub::wait_for(
        state.hub(),
        state.shutdown_signal(),
        task_id,
        until,
        || async {
            let task = state
                .store()
                .get_task(task_id)
                .await?
                .ok_or_else(|| ApiError::Internal(format!("task {task_id} vanished")))?;
            Ok(task.last_result)
        },
    )
    .await?;
    if let Some(result) = posted {
        let ok = result.get("ok").and_then(Value::as_bool).unwrap_or(true);
        let error = result
            .get("error")
            .and_then(Value::as_str)
            .map(str::to_owned);
        let value = result.get("value").cloned().unwrap_or(Value::Null);
        return Ok((value, ok && error.is_none(), error));
    }
    let message = format!(
        "the operator's spawn_ack deferred to the sub-agent's result (value {{}}), but task \
         {task_id} got none within {}",
        secs(grace)
    );
    finish(
        state,
        task_id,
        TaskStatus::Failed,
        None,
        Some(message.clone()),
        "lev",
    )
    .await?;
    Err(if until >= deadline {
        ApiError::Timeout(message)
    } else {
        ApiError::Upstream {
            code: "spawn_failed",
            message,
        }
    })
}
