//! Sub-agent tasks (SPEC section 4), as the server's domain: a worker's
//! spawn (the operator's hook, the task stored, handed to the operator,
//! finished with its result), the result a sub-agent posts, and who may see
//! a task. The routes (`routes/sessions.rs`, `routes/tasks.rs`) are HTTP glue
//! around these.
//!
//! - [`spawn`]: hook, task, spawn, result; the task is finished as failed
//!   when the caller stops waiting mid-way ([`TaskGuard`]).
//! - [`post_result`]: a task's `last_result` and output tail; 409 once the
//!   task is finished.
//! - [`list`], [`get`]: what a token may see of the tasks.

use std::sync::Arc;

use lev_protocol::api::{Page, Role, SpawnRequest, SpawnResponse, Task, TaskStatus};
use lev_protocol::{ClientMsg, InteractionKind, ServerMsg, WorkerResult};
use lev_store::tasks::{NewTask, TaskChange, TaskFilter, TaskFinish, TaskResult};
use serde_json::{Value, json};
use time::OffsetDateTime;
use tokio::time::Instant;

use crate::auth::Principal;
use crate::error::{ApiError, ApiResult};
use crate::operators::hub::{Kind, Ticket, Waited};
use crate::operators::people::{Escalation, PeopleOutcome, ask_people};
use crate::operators::{deadline, escalation_reason, secs, timed_out, wait};
use crate::state::AppState;

/// A spawn's `timeout_s` when it names none: sub-agents take a while.
const DEFAULT_SPAWN_TIMEOUT_S: u64 = 3600;
/// The most of `output_tail` kept: its last 64 KiB.
const OUTPUT_TAIL_BYTES: usize = 64 * 1024;

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

/// A worker's spawn in `session_id` (checked by the route): the operator's
/// hook, the task, the spawn handed to the operator, and its result.
///
/// # Errors
/// 403 when the hook rejects it, 409 without an operator, 502 when the
/// operator or the sub-agent fails, 504 past `timeout_s`; the store's.
pub async fn spawn(
    state: &AppState,
    principal: &Principal,
    session_id: &str,
    req: SpawnRequest,
) -> ApiResult<SpawnResponse> {
    let deadline = deadline(req.timeout_s, DEFAULT_SPAWN_TIMEOUT_S);
    let too_late = || timed_out("the spawn", req.timeout_s, DEFAULT_SPAWN_TIMEOUT_S);
    hook(state, principal, session_id, &req.spawn, deadline)
        .await?
        .map_err(|_| too_late())?;
    let (task_id, task_token) = create(state, principal, session_id, &req.spawn).await?;
    let mut guard = TaskGuard {
        state: state.clone(),
        task_id: task_id.clone(),
        armed: true,
    };
    let mut ticket = hand_over(state, session_id, &task_id, task_token, &req.spawn).await?;
    let reply = loop {
        match wait(state, &mut ticket, deadline).await? {
            Waited::Sent => {
                if let Err(e) = state.store().start_task(&task_id, "lev").await {
                    crate::log::error(&format!("task {task_id}: cannot mark it running: {e}"));
                }
            }
            Waited::Replied(reply) => break reply,
            Waited::NoOperator | Waited::ReplyTimeout => {
                guard.armed = false;
                return Err(no_operator(state, session_id, &task_id).await);
            }
            Waited::Deadline => {
                guard.armed = false;
                finish(
                    state,
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
        deferred_result(state, &task_id, deadline).await?
    } else {
        (value, ok, None)
    };
    guard.armed = false;
    settle(state, task_id, value, ok, error, &reply.by).await
}

/// The task of a spawn, stored pending: its id and the token scoped to it.
async fn create(
    state: &AppState,
    principal: &Principal,
    session_id: &str,
    spawn: &Value,
) -> ApiResult<(String, String)> {
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
                session_id: session_id.to_owned(),
                status: TaskStatus::Pending,
                spawn: spawn.clone(),
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
    Ok((task_id, task_token))
}

/// The spawn message submitted to the session's operator.
async fn hand_over(
    state: &AppState,
    session_id: &str,
    task_id: &str,
    task_token: String,
    spawn: &Value,
) -> ApiResult<Ticket> {
    let hub = Arc::clone(state.operators());
    // Running from the moment an operator has it: with one connected now,
    // marked before the message goes out, so nobody sees the task pending
    // after the operator does; else when the hub hands it over.
    let connected = hub.is_connected(session_id).await?;
    if connected {
        state.store().start_task(task_id, "lev").await?;
    }
    let spawn_msg = spawn.clone();
    let id_for_msg = task_id.to_owned();
    let mut ticket = hub
        .submit(session_id, Kind::Spawn, |req_id| ServerMsg::Spawn {
            req_id,
            task_id: id_for_msg,
            task_token,
            spawn: spawn_msg,
        })
        .await?;
    if !connected {
        ticket.report_sent();
    }
    Ok(ticket)
}

/// The task failed for want of an operator: 502 `spawn_failed` (or the
/// store's error finishing it).
async fn no_operator(state: &AppState, session_id: &str, task_id: &str) -> ApiError {
    let message = format!(
        "no operator was connected to session {session_id} for {}; the spawn of task \
         {task_id} did not complete",
        secs(state.operators().settings().grace)
    );
    if let Err(e) = finish(
        state,
        task_id,
        TaskStatus::Failed,
        None,
        Some(message.clone()),
        "lev",
    )
    .await
    {
        return e;
    }
    ApiError::Upstream {
        code: "spawn_failed",
        message,
    }
}

/// The task finished with the operator's result.
async fn settle(
    state: &AppState,
    task_id: String,
    value: Value,
    ok: bool,
    error: Option<String>,
    by: &str,
) -> ApiResult<SpawnResponse> {
    let status = if ok && error.is_none() {
        TaskStatus::Succeeded
    } else {
        TaskStatus::Failed
    };
    finish(
        state,
        &task_id,
        status,
        Some(value.clone()),
        error.clone(),
        by,
    )
    .await?;
    if let Some(error) = error {
        return Err(ApiError::Upstream {
            code: "spawn_failed",
            message: format!("task {task_id} failed: {error}"),
        });
    }
    Ok(SpawnResponse {
        task_id,
        ok,
        value,
        error: None,
    })
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
        |_| async {
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

/// The tasks `principal` may see under `filter` (its caller already set for
/// a worker bound to one), newest first.
///
/// # Errors
/// The store's.
pub async fn list(
    state: &AppState,
    principal: &Principal,
    filter: TaskFilter,
) -> ApiResult<Page<Task>> {
    let page = state.store().list_tasks(filter).await?;
    Ok(Page {
        items: page
            .items
            .into_iter()
            .filter(|t| may_see(principal, t))
            .collect(),
        next_cursor: page.next_before.map(|n| n.to_string()),
    })
}

/// The caller a worker's list of tasks is limited to (SPEC section 12): a
/// worker bound to a caller sees only that caller's tasks.
pub fn list_caller(principal: &Principal) -> Option<String> {
    match principal.role {
        Role::Worker => principal.caller.clone(),
        _ => None,
    }
}

/// One task, when `principal` may see it.
///
/// # Errors
/// 404 for no such task, 403 for another caller's or session's; the
/// store's.
pub async fn get(state: &AppState, principal: &Principal, id: &str) -> ApiResult<Task> {
    let task = state
        .store()
        .get_task(id)
        .await?
        .ok_or_else(|| ApiError::NotFound(format!("no task {id:?}")))?;
    check_may_touch(principal, &task)?;
    Ok(task)
}

/// Whether `principal` may see `task`: a worker bound to a caller only its
/// caller's, a worker limited to sessions only theirs.
fn may_see(principal: &Principal, task: &Task) -> bool {
    check_may_touch(principal, task).is_ok()
}

/// 403 unless `principal` may see and touch `task`.
///
/// # Errors
/// 403 for another caller's or session's task.
pub fn check_may_touch(principal: &Principal, task: &Task) -> ApiResult<()> {
    principal.check_session(&task.session_id)?;
    principal.check_owns(task.caller.as_deref())
}

/// Keep the last `OUTPUT_TAIL_BYTES` of `tail`, cut at a character boundary.
fn tail_of(mut tail: String) -> String {
    if tail.len() > OUTPUT_TAIL_BYTES {
        let mut start = tail.len() - OUTPUT_TAIL_BYTES;
        while !tail.is_char_boundary(start) {
            start += 1;
        }
        tail.drain(..start);
    }
    tail
}

/// Record `result` as its task's `last_result` and output tail, by `actor`
/// (already allowed to post it).
///
/// # Errors
/// 404 for no such task, 409 `task_finished` once it is finished; the
/// store's.
pub async fn post_result(state: &AppState, result: WorkerResult, actor: String) -> ApiResult<Task> {
    let change = state
        .store()
        .post_task_result(TaskResult {
            task_id: result.task_id.clone(),
            last_result: json!({
                "value": result.value,
                "ok": result.ok,
                "error": result.error,
            }),
            output_tail: result.output_tail.map(tail_of),
            actor,
        })
        .await?;
    match change {
        // A spawn waiting for this result wakes on the committed task.updated.
        TaskChange::Done(task) => Ok(*task),
        TaskChange::Finished(task) => Err(ApiError::Conflict {
            code: "task_finished",
            message: format!(
                "task {} is {}; it takes no more results",
                task.id,
                if task.status == TaskStatus::Succeeded {
                    "succeeded"
                } else {
                    "failed"
                }
            ),
        }),
        TaskChange::NotFound => Err(ApiError::NotFound(format!("no task {:?}", result.task_id))),
    }
}
