//! [`TaskStore`]: the `tasks` table, events with no row of their own, and
//! the escalation note on an interaction.

use async_trait::async_trait;
use lev_protocol::api::{InteractionView, Task};
use serde_json::{Value, json};
use time::OffsetDateTime;
use tokio_postgres::Row;

use crate::sql::{Cols, Tx, col, corrupt, rfc3339, text_in, text_out};
use crate::{PostgresStore, sql, view_from_row};
use lev_store::record::{self, AuditAction};
use lev_store::tasks::{
    NewTask, TaskChange, TaskFilter, TaskFinish, TaskPage, TaskResult, TaskStore,
};
use lev_store::{AuditRecord, Result};

const TASK_COLUMNS: &str = "seq, id, session_id, status, spawn_json, last_result_json, output_tail_json, error_json, created_at, updated_at, caller";

use lev_store::record::task_status_str as status_str;

fn task_from_row(row: &Row) -> Result<(i64, Task)> {
    record::decode_task(&Cols(row), text_out)
}

async fn load_task(tx: &Tx<'_>, id: &str) -> Result<Option<Task>> {
    tx.query_opt(
        &format!("SELECT {TASK_COLUMNS} FROM tasks WHERE id = $1"),
        &[&id],
    )
    .await?
    .as_ref()
    .map(|row| task_from_row(row).map(|(_, t)| t))
    .transpose()
}

/// Commit the `task.updated` event of `task` as it now is, and its audit
/// entry `action`.
async fn announce(
    tx: &mut Tx<'_>,
    task: &Task,
    action: AuditAction,
    actor: String,
    data: Value,
) -> Result<()> {
    tx.record(record::task_changed(task, action, actor, data)?);
    Ok(())
}

/// Why a conditional update of task `id` changed nothing.
async fn unchanged(tx: &Tx<'_>, id: &str) -> Result<TaskChange> {
    Ok(match load_task(tx, id).await? {
        None => TaskChange::NotFound,
        Some(task) if task.status.is_finished() => TaskChange::Finished(Box::new(task)),
        Some(task) => TaskChange::Done(Box::new(task)),
    })
}

impl PostgresStore {
    /// Run `update` (returning [`TASK_COLUMNS`], or no row when its
    /// condition failed), then announce the change.
    async fn change_task(
        &self,
        id: &str,
        update: &str,
        params: sql::Params<'_>,
        action: AuditAction,
        actor: &str,
        data: Value,
    ) -> Result<TaskChange> {
        let mut client = self.client().await?;
        let mut tx = Tx::begin(&mut client).await?;
        let Some(row) = tx.query_opt(update, params).await? else {
            let outcome = unchanged(&tx, id).await?;
            tx.commit().await?;
            return Ok(outcome);
        };
        let (_, task) = task_from_row(&row)?;
        announce(&mut tx, &task, action, actor.to_owned(), data).await?;
        let staged = tx.commit().await?;
        drop(client);
        self.sequenced(staged).await;
        Ok(TaskChange::Done(Box::new(task)))
    }
}

#[async_trait]
impl TaskStore for PostgresStore {
    async fn create_task(&self, new: NewTask) -> Result<Task> {
        let t = &new.task;
        let spawn = serde_json::to_string(&t.spawn).map_err(|e| corrupt(&t.id, e))?;
        let mut client = self.client().await?;
        let mut tx = Tx::begin(&mut client).await?;
        let row = tx
            .query_one(
                &format!(
                    "INSERT INTO tasks (id, session_id, status, spawn_json, token_hash, created_at, updated_at, caller)
                     VALUES ($1, $2, $3, $4, $5, $6, $6, $7)
                     RETURNING {TASK_COLUMNS}"
                ),
                &[
                    &t.id,
                    &t.session_id,
                    &status_str(t.status),
                    &spawn,
                    &new.token_hash,
                    &rfc3339(t.created_at),
                    &t.caller,
                ],
            )
            .await?;
        let (_, task) = task_from_row(&row)?;
        announce(
            &mut tx,
            &task,
            AuditAction::TaskCreated,
            new.actor.clone(),
            json!({"spawn": t.spawn}),
        )
        .await?;
        let staged = tx.commit().await?;
        drop(client);
        self.sequenced(staged).await;
        Ok(task)
    }

    async fn get_task(&self, id: &str) -> Result<Option<Task>> {
        let client = self.client().await?;
        sql::query_opt(
            &client,
            &format!("SELECT {TASK_COLUMNS} FROM tasks WHERE id = $1"),
            &[&id],
        )
        .await?
        .as_ref()
        .map(|row| task_from_row(row).map(|(_, t)| t))
        .transpose()
    }

    async fn list_tasks(&self, filter: TaskFilter) -> Result<TaskPage> {
        let limit = i64::from(filter.limit.clamp(1, 500));
        let status = filter.status.map(status_str);
        let before = filter.before.unwrap_or(i64::MAX);
        let client = self.client().await?;
        let rows = sql::query(
            &client,
            &format!(
                "SELECT {TASK_COLUMNS} FROM tasks
                 WHERE seq < $1 AND ($2::text IS NULL OR status = $2)
                   AND ($3::text IS NULL OR session_id = $3)
                   AND ($5::text IS NULL OR caller = $5)
                 ORDER BY seq DESC LIMIT $4"
            ),
            &[
                &before,
                &status,
                &filter.session_id,
                &(limit + 1),
                &filter.caller,
            ],
        )
        .await?;
        let mut items = Vec::new();
        let mut last_seq = None;
        for row in &rows {
            if items.len() as i64 == limit {
                return Ok(TaskPage {
                    items,
                    next_before: last_seq,
                });
            }
            let (seq, task) = task_from_row(row)?;
            last_seq = Some(seq);
            items.push(task);
        }
        Ok(TaskPage {
            items,
            next_before: None,
        })
    }

    async fn task_by_token_hash(&self, hash: &str) -> Result<Option<Task>> {
        let client = self.client().await?;
        sql::query_opt(
            &client,
            &format!("SELECT {TASK_COLUMNS} FROM tasks WHERE token_hash = $1"),
            &[&hash],
        )
        .await?
        .as_ref()
        .map(|row| task_from_row(row).map(|(_, t)| t))
        .transpose()
    }

    async fn start_task(&self, id: &str, actor: &str) -> Result<TaskChange> {
        self.change_task(
            id,
            &format!(
                "UPDATE tasks SET status = 'running', updated_at = $2
                 WHERE id = $1 AND status = 'pending'
                 RETURNING {TASK_COLUMNS}"
            ),
            &[&id, &rfc3339(OffsetDateTime::now_utc())],
            AuditAction::TaskStarted,
            actor,
            json!({}),
        )
        .await
    }

    async fn post_task_result(&self, result: TaskResult) -> Result<TaskChange> {
        let text = result.last_result.to_string();
        let tail = text_in(result.output_tail.as_deref());
        self.change_task(
            &result.task_id,
            &format!(
                "UPDATE tasks SET last_result_json = $2, output_tail_json = COALESCE($3, output_tail_json),
                     updated_at = $4
                 WHERE id = $1 AND status IN ('pending', 'running')
                 RETURNING {TASK_COLUMNS}"
            ),
            &[
                &result.task_id,
                &text,
                &tail,
                &rfc3339(OffsetDateTime::now_utc()),
            ],
            AuditAction::TaskResult,
            &result.actor,
            json!({"last_result": result.last_result}),
        )
        .await
    }

    async fn finish_task(&self, finish: TaskFinish) -> Result<TaskChange> {
        let result = finish.result.as_ref().map(Value::to_string);
        let error = text_in(finish.error.as_deref());
        self.change_task(
            &finish.task_id,
            &format!(
                "UPDATE tasks SET status = $2, result_json = $3, error_json = $4, updated_at = $5
                 WHERE id = $1 AND status IN ('pending', 'running')
                 RETURNING {TASK_COLUMNS}"
            ),
            &[
                &finish.task_id,
                &status_str(finish.status),
                &result,
                &error,
                &rfc3339(OffsetDateTime::now_utc()),
            ],
            AuditAction::TaskFinished,
            &finish.actor,
            json!({"result": finish.result, "error": finish.error}),
        )
        .await
    }

    async fn append_event(&self, kind: &str, data: Value, actor: Option<&str>) -> Result<i64> {
        let mut client = self.client().await?;
        let mut tx = Tx::begin(&mut client).await?;
        tx.event(kind, &data);
        if let Some(actor) = actor {
            tx.audit(&AuditRecord {
                action: kind.to_owned(),
                actor: actor.to_owned(),
                data,
            });
        }
        let staged = tx.commit().await?;
        drop(client);
        let seq = staged
            .events
            .last()
            .map(|(seq, _, _)| *seq)
            .ok_or_else(|| lev_store::StoreError::Database("the event was not inserted".into()))?;
        self.sequenced(staged).await;
        Ok(seq)
    }

    async fn escalate_interaction(
        &self,
        id: &str,
        reason: &str,
        actor: &str,
    ) -> Result<Option<InteractionView>> {
        let mut client = self.client().await?;
        let mut tx = Tx::begin(&mut client).await?;
        // Locked while pending: an answer waits for this note, or wins first.
        let Some(row) = tx
            .query_opt(
                "SELECT request_json FROM interactions WHERE id = $1 AND status = 'pending' FOR UPDATE",
                &[&id],
            )
            .await?
        else {
            tx.commit().await?;
            return Ok(None);
        };
        let request: lev_protocol::InteractionRequest =
            serde_json::from_str(&col::<String>(&row, 0)?).map_err(|e| corrupt(id, e))?;
        let request = record::with_escalation_note(
            request,
            reason,
            actor,
            &rfc3339(OffsetDateTime::now_utc()),
        );
        let text = serde_json::to_string(&request).map_err(|e| corrupt(id, e))?;
        let row = tx
            .query_one(
                &format!(
                    "UPDATE interactions
                     SET original_request_json = COALESCE(original_request_json, request_json),
                         request_json = $2
                     WHERE id = $1
                     RETURNING {}",
                    crate::VIEW_COLUMNS
                ),
                &[&id, &text],
            )
            .await?;
        let (_, view) = view_from_row(&row)?;
        tx.record(record::interaction_escalated(&view, reason, actor)?);
        let staged = tx.commit().await?;
        drop(client);
        self.sequenced(staged).await;
        Ok(Some(view))
    }
}
