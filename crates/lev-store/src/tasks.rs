//! Sub-agent tasks, the operator's durable traces, and the escalation note on
//! an interaction: the storage side of the operator WebSocket (SPEC section 4).
//!
//! A task is made when an operator accepts a spawn (`hook_ack` ok); the
//! sub-agent it runs posts results with a token scoped to that task (only its
//! hash is kept); the operator's `spawn_ack` finishes it. Every change commits
//! its `task.updated` event and its audit entry in the same transaction.

use async_trait::async_trait;
use lev_protocol::api::{InteractionView, Task, TaskStatus};
use serde_json::Value;

use crate::Result;

/// A task to store, with the hash of its scoped token.
#[derive(Debug, Clone)]
pub struct NewTask {
    /// The task (`status` pending).
    pub task: Task,
    /// SHA-256 (hex) of the task-scoped token's secret.
    pub token_hash: String,
    /// Who asked for it (the worker token's name).
    pub actor: String,
}

/// A sub-agent's result to record as a task's `last_result`.
#[derive(Debug, Clone)]
pub struct TaskResult {
    /// The task.
    pub task_id: String,
    /// What to store as `last_result`.
    pub last_result: Value,
    /// The output's tail, when the sub-agent sent one (kept otherwise).
    pub output_tail: Option<String>,
    /// Who posted it (the task token's or the worker token's name).
    pub actor: String,
}

/// How a task ends.
#[derive(Debug, Clone)]
pub struct TaskFinish {
    /// The task.
    pub task_id: String,
    /// `succeeded` or `failed`.
    pub status: TaskStatus,
    /// The result the spawn returned (the ack's value, or the deferred HTTP
    /// one); kept beside the task, `last_result` is left as it is.
    pub result: Option<Value>,
    /// The error, when it failed.
    pub error: Option<String>,
    /// Who finished it: the operator's token name, `timeout`, `system`.
    pub actor: String,
}

/// Outcome of a change to a task.
#[derive(Debug, Clone)]
pub enum TaskChange {
    /// Changed; the task as it now is.
    Done(Box<Task>),
    /// The task had already finished: nothing changed.
    Finished(Box<Task>),
    /// No such task.
    NotFound,
}

/// Which tasks to list.
#[derive(Debug, Clone, Default)]
pub struct TaskFilter {
    /// Only this session's.
    pub session_id: Option<String>,
    /// Only this status.
    pub status: Option<TaskStatus>,
    /// Only tasks spawned for this caller.
    pub caller: Option<String>,
    /// Page size.
    pub limit: u32,
    /// Continue below this position (a previous page's `next_before`).
    pub before: Option<i64>,
}

/// A page of tasks, newest first.
#[derive(Debug, Clone)]
pub struct TaskPage {
    /// The page.
    pub items: Vec<Task>,
    /// Where the next page starts, when there is one.
    pub next_before: Option<i64>,
}

/// Storage of tasks and of the operator's other durable traces.
#[async_trait]
pub trait TaskStore: Send + Sync + 'static {
    /// Store a new task; commits `task.updated` and `task.created` (audit).
    async fn create_task(&self, new: NewTask) -> Result<Task>;

    /// One task.
    async fn get_task(&self, id: &str) -> Result<Option<Task>>;

    /// A page of tasks, newest first.
    async fn list_tasks(&self, filter: TaskFilter) -> Result<TaskPage>;

    /// The task whose scoped token hashes to `hash`, finished or not.
    async fn task_by_token_hash(&self, hash: &str) -> Result<Option<Task>>;

    /// `pending` -> `running` (the spawn reached an operator). A task already
    /// running is returned unchanged.
    async fn start_task(&self, id: &str, actor: &str) -> Result<TaskChange>;

    /// Record a sub-agent's result; refused once the task is finished.
    async fn post_task_result(&self, result: TaskResult) -> Result<TaskChange>;

    /// Finish a task (compare-and-set from unfinished).
    async fn finish_task(&self, finish: TaskFinish) -> Result<TaskChange>;

    /// Append an event with no row of its own (`operator.connected`, ...),
    /// and its audit entry when `actor` is given; returns the event's seq.
    async fn append_event(&self, kind: &str, data: Value, actor: Option<&str>) -> Result<i64>;

    /// Note on a pending interaction why it was handed to people: the reason
    /// goes into its `metadata.escalation` (the request as created is kept for
    /// idempotent creates), with the event `interaction.escalated`. `None`
    /// when it is no longer pending or does not exist.
    async fn escalate_interaction(
        &self,
        id: &str,
        reason: &str,
        actor: &str,
    ) -> Result<Option<InteractionView>>;
}
