//! [`TaskStore`] on SQLite: the `tasks` table (migration 3), events with no
//! row of their own, and the escalation note on an interaction.

use async_trait::async_trait;
use lev_protocol::api::{InteractionView, Task, TaskStatus};
use rusqlite::{Connection, OptionalExtension, Row, params};
use serde_json::{Value, json};
use time::OffsetDateTime;

use crate::writer::{Tx, rfc3339};
use crate::{Cols, SqliteStore, corrupt, load_view};
use lev_store::record::{self, AuditAction};
use lev_store::tasks::{
    NewTask, TaskChange, TaskFilter, TaskFinish, TaskPage, TaskResult, TaskStore,
};

use crate::{Result, write_change};

const TASK_COLUMNS: &str = "seq, id, session_id, status, spawn_json, last_result_json, output_tail, error, created_at, updated_at, caller";

use lev_store::record::task_status_str as status_str;

fn task_from_row(row: &Row<'_>) -> Result<(i64, Task)> {
    Ok(record::decode_task(&Cols(row), |_, text| Ok(text))?)
}

fn load_task(conn: &Connection, id: &str) -> Result<Option<Task>> {
    let mut stmt =
        conn.prepare_cached(&format!("SELECT {TASK_COLUMNS} FROM tasks WHERE id = ?1"))?;
    let mut rows = stmt.query([id])?;
    match rows.next()? {
        Some(row) => Ok(Some(task_from_row(row)?.1)),
        None => Ok(None),
    }
}

/// Reload `id` after a change, commit its `task.updated` event and its audit
/// entry `action`.
fn announce(
    tx: &mut Tx<'_>,
    id: &str,
    action: AuditAction,
    actor: String,
    data: Value,
) -> Result<Task> {
    let task =
        load_task(tx.conn, id)?.ok_or_else(|| corrupt(id, "vanished during its own update"))?;
    write_change(tx, record::task_changed(&task, action, actor, data)?)?;
    Ok(task)
}

#[async_trait]
impl TaskStore for SqliteStore {
    async fn create_task(&self, new: NewTask) -> lev_store::Result<Task> {
        self.writer
            .write(move |tx| {
                let t = &new.task;
                let spawn = serde_json::to_string(&t.spawn).map_err(|e| corrupt(&t.id, e))?;
                tx.conn.execute(
                    "INSERT INTO tasks (id, session_id, status, spawn_json, token_hash, created_at, updated_at, caller)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?6, ?7)",
                    params![t.id, t.session_id, status_str(t.status), spawn, new.token_hash, rfc3339(t.created_at), t.caller],
                )?;
                announce(tx, &t.id, AuditAction::TaskCreated, new.actor, json!({"spawn": t.spawn}))
            })
            .await
    }

    async fn get_task(&self, id: &str) -> lev_store::Result<Option<Task>> {
        let id = id.to_owned();
        self.read(move |conn| load_task(conn, &id)).await
    }

    async fn list_tasks(&self, filter: TaskFilter) -> lev_store::Result<TaskPage> {
        self.read(move |conn| {
            let limit = i64::from(filter.limit.clamp(1, 500));
            let mut sql = format!("SELECT {TASK_COLUMNS} FROM tasks WHERE seq < ?1");
            if filter.status.is_some() {
                sql.push_str(" AND status = ?2");
            }
            if filter.session_id.is_some() {
                sql.push_str(" AND session_id = ?3");
            }
            // Always named, so the statement takes all five parameters.
            sql.push_str(" AND (?5 IS NULL OR caller = ?5)");
            sql.push_str(" ORDER BY seq DESC LIMIT ?4");
            let mut stmt = conn.prepare_cached(&sql)?;
            let status = filter.status.map(status_str);
            let before = filter.before.unwrap_or(i64::MAX);
            let mut rows = stmt.query(params![
                before,
                status,
                filter.session_id,
                limit + 1,
                filter.caller
            ])?;
            let mut items = Vec::new();
            let mut last_seq = None;
            while let Some(row) = rows.next()? {
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
        })
        .await
    }

    async fn task_by_token_hash(&self, hash: &str) -> lev_store::Result<Option<Task>> {
        let hash = hash.to_owned();
        self.read(move |conn| {
            let id: Option<String> = conn
                .query_row("SELECT id FROM tasks WHERE token_hash = ?1", [&hash], |r| {
                    r.get(0)
                })
                .optional()?;
            match id {
                Some(id) => load_task(conn, &id),
                None => Ok(None),
            }
        })
        .await
    }

    async fn start_task(&self, id: &str, actor: &str) -> lev_store::Result<TaskChange> {
        let (id, actor) = (id.to_owned(), actor.to_owned());
        self.writer
            .write(move |tx| {
                let Some(task) = load_task(tx.conn, &id)? else {
                    return Ok(TaskChange::NotFound);
                };
                if task.status != TaskStatus::Pending {
                    return Ok(if task.status.is_finished() {
                        TaskChange::Finished(Box::new(task))
                    } else {
                        TaskChange::Done(Box::new(task))
                    });
                }
                tx.conn.execute(
                    "UPDATE tasks SET status = 'running', updated_at = ?2 WHERE id = ?1",
                    params![id, rfc3339(OffsetDateTime::now_utc())],
                )?;
                let task = announce(tx, &id, AuditAction::TaskStarted, actor, json!({}))?;
                Ok(TaskChange::Done(Box::new(task)))
            })
            .await
    }

    async fn post_task_result(&self, result: TaskResult) -> lev_store::Result<TaskChange> {
        self.writer
            .write(move |tx| {
                let Some(task) = load_task(tx.conn, &result.task_id)? else {
                    return Ok(TaskChange::NotFound);
                };
                if task.status.is_finished() {
                    return Ok(TaskChange::Finished(Box::new(task)));
                }
                let text = result.last_result.to_string();
                tx.conn.execute(
                    "UPDATE tasks SET last_result_json = ?2, output_tail = COALESCE(?3, output_tail), updated_at = ?4
                     WHERE id = ?1",
                    params![result.task_id, text, result.output_tail, rfc3339(OffsetDateTime::now_utc())],
                )?;
                let task = announce(
                    tx,
                    &result.task_id,
                    AuditAction::TaskResult,
                    result.actor,
                    json!({"last_result": result.last_result}),
                )?;
                Ok(TaskChange::Done(Box::new(task)))
            })
            .await
    }

    async fn finish_task(&self, finish: TaskFinish) -> lev_store::Result<TaskChange> {
        self.writer
            .write(move |tx| {
                let Some(task) = load_task(tx.conn, &finish.task_id)? else {
                    return Ok(TaskChange::NotFound);
                };
                if task.status.is_finished() {
                    return Ok(TaskChange::Finished(Box::new(task)));
                }
                let result = finish.result.as_ref().map(Value::to_string);
                tx.conn.execute(
                    "UPDATE tasks SET status = ?2, result_json = ?3, error = ?4, updated_at = ?5
                     WHERE id = ?1",
                    params![
                        finish.task_id,
                        status_str(finish.status),
                        result,
                        finish.error,
                        rfc3339(OffsetDateTime::now_utc())
                    ],
                )?;
                let task = announce(
                    tx,
                    &finish.task_id,
                    AuditAction::TaskFinished,
                    finish.actor,
                    json!({"result": finish.result, "error": finish.error}),
                )?;
                Ok(TaskChange::Done(Box::new(task)))
            })
            .await
    }

    async fn append_event(
        &self,
        kind: &str,
        data: Value,
        actor: Option<&str>,
    ) -> lev_store::Result<i64> {
        let (kind, actor) = (kind.to_owned(), actor.map(str::to_owned));
        self.writer
            .write(move |tx| {
                let seq = tx.event(&kind, data.clone())?;
                if let Some(actor) = actor {
                    tx.audit(lev_store::AuditRecord {
                        action: kind,
                        actor,
                        data,
                    })?;
                }
                Ok(seq)
            })
            .await
    }

    async fn escalate_interaction(
        &self,
        id: &str,
        reason: &str,
        actor: &str,
    ) -> lev_store::Result<Option<InteractionView>> {
        let (id, reason, actor) = (id.to_owned(), reason.to_owned(), actor.to_owned());
        self.writer
            .write(move |tx| {
                let Some(view) = load_view(tx.conn, &id)? else {
                    return Ok(None);
                };
                if view.request.status != lev_protocol::InteractionStatus::Pending {
                    return Ok(None);
                }
                let request = record::with_escalation_note(
                    view.request.request.clone(),
                    &reason,
                    &actor,
                    &rfc3339(OffsetDateTime::now_utc()),
                );
                let text = serde_json::to_string(&request).map_err(|e| corrupt(&id, e))?;
                tx.conn.execute(
                    "UPDATE interactions
                     SET original_request_json = COALESCE(original_request_json, request_json),
                         request_json = ?2
                     WHERE id = ?1 AND status = 'pending'",
                    params![id, text],
                )?;
                let view = load_view(tx.conn, &id)?.ok_or_else(|| corrupt(&id, "vanished"))?;
                write_change(tx, record::interaction_escalated(&view, &reason, &actor)?)?;
                Ok(Some(view))
            })
            .await
    }
}
