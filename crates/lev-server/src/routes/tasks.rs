//! Sub-agent tasks: `GET /v1/tasks`, `GET /v1/tasks/{id}`, and
//! `POST /v1/worker/result`, where a sub-agent posts its result with the token
//! scoped to its task. HTTP glue around the domain module `tasks`.

use axum::Json;
use axum::extract::{FromRequestParts, State};
use axum::http::header::AUTHORIZATION;
use axum::http::request::Parts;
use lev_protocol::WorkerResult;
use lev_protocol::api::ErrorBody;
use lev_protocol::api::{Page, Role, Task, TaskStatus};
use lev_store::tasks::TaskFilter;
use serde::Deserialize;
use serde_json::json;

use super::{PathParam, Q};
use crate::auth::{Principal, token_hash};
use crate::body::JsonBody;
use crate::error::{ApiError, ApiResult};
use crate::state::AppState;
use crate::tasks;

/// The query of `GET /v1/tasks`.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ListQuery {
    /// Only this session's.
    #[param(pattern = r"^[A-Za-z0-9._:-]{1,128}$")]
    session_id: Option<String>,
    /// Only tasks in this status: `pending`, `running`, `succeeded` or `failed`.
    #[param(value_type = Option<lev_protocol::api::TaskStatus>)]
    status: Option<String>,
    /// At most this many (1 to 500, default 50; outside that, 422).
    #[param(minimum = 1, maximum = 500)]
    limit: Option<u32>,
    /// The `next_cursor` of the page before.
    #[param(pattern = "^[1-9][0-9]*$")]
    cursor: Option<String>,
}

fn parse_status(s: &str) -> Option<TaskStatus> {
    serde_json::from_value(json!(s)).ok()
}

/// `GET /v1/tasks` (worker, approver): newest first, a page at a time.
#[utoipa::path(
    get, path = "/v1/tasks", tag = "operators", params(ListQuery),
    responses((status = 200, description = "Newest first", body = Page<Task>))
)]
pub async fn list(
    State(state): State<AppState>,
    principal: Principal,
    Q(query): Q<ListQuery>,
) -> ApiResult<Json<Page<Task>>> {
    principal.require(&[Role::Worker, Role::Approver])?;
    if let Some(session) = &query.session_id {
        lev_protocol::validate::check_id("session_id", session)?;
        principal.check_session(session)?;
    }
    let status = match query.status.as_deref() {
        None | Some("all") => None,
        Some(s) => Some(parse_status(s).ok_or_else(|| {
            ApiError::Invalid(format!(
                "status: expected pending, running, succeeded, failed or all, found {s:?}"
            ))
        })?),
    };
    let limit = crate::extract::page_limit(query.limit, 50, 500)?;
    let before = crate::extract::page_cursor(query.cursor.as_deref())?;
    let filter = TaskFilter {
        caller: tasks::list_caller(&principal),
        session_id: query.session_id,
        status,
        limit,
        before,
    };
    Ok(Json(tasks::list(&state, &principal, filter).await?))
}

/// `GET /v1/tasks/{id}` (worker, approver).
#[utoipa::path(
    get, path = "/v1/tasks/{id}", tag = "operators",
    params(("id" = String, Path, description = "The task's id")),
    responses(
        (status = 200, description = "The task", body = Task),
        (status = 404, description = "No such task", body = ErrorBody),
    )
)]
pub async fn get_one(
    State(state): State<AppState>,
    principal: Principal,
    PathParam(id): PathParam,
) -> ApiResult<Json<Task>> {
    principal.require(&[Role::Worker, Role::Approver])?;
    Ok(Json(tasks::get(&state, &principal, &id).await?))
}

/// Who posts a result: a task's scoped token (for that task only), or a
/// worker (or admin) token.
#[derive(Debug)]
pub enum ResultPoster {
    /// The token scoped to this task.
    Task(Box<Task>),
    /// An API token.
    Principal(Principal),
}

impl FromRequestParts<AppState> for ResultPoster {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> ApiResult<Self> {
        if parts.extensions.get::<Principal>().is_none() {
            let secret = parts
                .headers
                .get(AUTHORIZATION)
                .and_then(|h| h.to_str().ok())
                .and_then(|h| {
                    h.strip_prefix("Bearer ")
                        .or_else(|| h.strip_prefix("bearer "))
                })
                .map(str::trim)
                .filter(|s| !s.is_empty());
            if let Some(secret) = secret
                && let Some(task) = state
                    .store()
                    .task_by_token_hash(&token_hash(secret))
                    .await?
            {
                return Ok(Self::Task(Box::new(task)));
            }
        }
        Ok(Self::Principal(
            Principal::from_request_parts(parts, state).await?,
        ))
    }
}

/// `POST /v1/worker/result` (the task's token, worker, admin): set the task's
/// `last_result` (`{"value","ok","error"}`) and output tail; 409 once the
/// task is finished.
#[utoipa::path(
    post, path = "/v1/worker/result", tag = "operators", request_body = WorkerResult,
    responses(
        (status = 200, description = "Recorded", body = Task),
        (status = 404, description = "No such task", body = ErrorBody),
        (status = 409, description = "The task is finished", body = ErrorBody),
    )
)]
pub async fn post_result(
    State(state): State<AppState>,
    poster: ResultPoster,
    JsonBody(result): JsonBody<WorkerResult>,
) -> ApiResult<Json<Task>> {
    let actor = match &poster {
        ResultPoster::Task(task) => {
            if task.id != result.task_id {
                return Err(ApiError::forbidden(format!(
                    "this token may only post the result of task {}",
                    task.id
                )));
            }
            format!("task:{}", task.id)
        }
        ResultPoster::Principal(principal) => {
            principal.require(&[Role::Worker])?;
            lev_protocol::validate::check_id("task_id", &result.task_id)?;
            if let Some(task) = state.store().get_task(&result.task_id).await? {
                tasks::check_may_touch(principal, &task)?;
            }
            principal.name.clone()
        }
    };
    lev_protocol::validate::check_id("task_id", &result.task_id)?;
    Ok(Json(tasks::post_result(&state, result, actor).await?))
}
