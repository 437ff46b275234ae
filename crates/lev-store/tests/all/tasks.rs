//! TaskStore on a real SQLite file: tasks survive a reopen, results stop at
//! the finish, the finish is a compare-and-set, events and audit commit with
//! each change, and an escalation note keeps creates idempotent.

use std::sync::Arc;

use lev_protocol::api::{Task, TaskStatus};
use lev_protocol::{Interaction, InteractionKind, InteractionRequest, InteractionStatus};
use lev_store::tasks::{NewTask, TaskChange, TaskFilter, TaskFinish, TaskResult};
use lev_store::{CreateOutcome, NewInteraction, SqliteStore, Store, TaskStore};
use serde_json::json;
use time::OffsetDateTime;

fn task(id: &str, session: &str) -> NewTask {
    let now = OffsetDateTime::now_utc();
    NewTask {
        task: Task {
            id: id.into(),
            session_id: session.into(),
            status: TaskStatus::Pending,
            spawn: json!({"agent": id}),
            last_result: None,
            output_tail: None,
            error: None,
            caller: None,
            created_at: now,
            updated_at: now,
        },
        token_hash: format!("hash-{id}"),
        actor: "worker-1".into(),
    }
}

fn result(id: &str, value: serde_json::Value) -> TaskResult {
    TaskResult {
        task_id: id.into(),
        last_result: json!({"value": value, "ok": true, "error": null}),
        output_tail: Some("tail".into()),
        actor: format!("task:{id}"),
    }
}

fn finish(id: &str, status: TaskStatus) -> TaskFinish {
    TaskFinish {
        task_id: id.into(),
        status,
        result: Some(json!("final")),
        error: None,
        actor: "main-ai".into(),
    }
}

#[tokio::test]
async fn a_task_lives_from_create_to_finish_and_survives_a_reopen() {
    let dir = tempfile::tempdir().unwrap();
    {
        let store = Arc::new(SqliteStore::open(dir.path()).unwrap());
        let created = store.create_task(task("tk_1", "s-1")).await.unwrap();
        assert_eq!(created.status, TaskStatus::Pending);
        store.create_task(task("tk_2", "s-2")).await.unwrap();
        let found = store
            .task_by_token_hash("hash-tk_1")
            .await
            .unwrap()
            .unwrap();
        assert_eq!(found.id, "tk_1");
        assert!(store.task_by_token_hash("nope").await.unwrap().is_none());
        let TaskChange::Done(t) = store.start_task("tk_1", "lev").await.unwrap() else {
            panic!("started")
        };
        assert_eq!(t.status, TaskStatus::Running);
        let TaskChange::Done(t) = store
            .post_task_result(result("tk_1", json!(1)))
            .await
            .unwrap()
        else {
            panic!("result stored")
        };
        assert_eq!(t.last_result.unwrap()["value"], 1);
        assert_eq!(t.output_tail.as_deref(), Some("tail"));
        assert!(matches!(
            store
                .finish_task(finish("tk_1", TaskStatus::Succeeded))
                .await
                .unwrap(),
            TaskChange::Done(_)
        ));
        // Finished: no more results, no second finish.
        assert!(matches!(
            store
                .post_task_result(result("tk_1", json!(2)))
                .await
                .unwrap(),
            TaskChange::Finished(_)
        ));
        assert!(matches!(
            store
                .finish_task(finish("tk_1", TaskStatus::Failed))
                .await
                .unwrap(),
            TaskChange::Finished(_)
        ));
        assert!(matches!(
            store
                .post_task_result(result("tk_none", json!(2)))
                .await
                .unwrap(),
            TaskChange::NotFound
        ));
    }
    let store = SqliteStore::open(dir.path()).unwrap();
    let t = store.get_task("tk_1").await.unwrap().unwrap();
    assert_eq!(t.status, TaskStatus::Succeeded);
    assert_eq!(
        t.last_result.unwrap()["value"],
        1,
        "the HTTP-path result stays"
    );
    let page = store
        .list_tasks(TaskFilter {
            limit: 10,
            ..TaskFilter::default()
        })
        .await
        .unwrap();
    let ids: Vec<_> = page.items.iter().map(|t| t.id.as_str()).collect();
    assert_eq!(ids, ["tk_2", "tk_1"], "newest first");
    let page = store
        .list_tasks(TaskFilter {
            session_id: Some("s-2".into()),
            limit: 10,
            ..TaskFilter::default()
        })
        .await
        .unwrap();
    assert_eq!(page.items.len(), 1);
    let page = store
        .list_tasks(TaskFilter {
            caller: Some("alice".into()),
            limit: 10,
            ..TaskFilter::default()
        })
        .await
        .unwrap();
    assert!(page.items.is_empty(), "no task was spawned for alice");
    let events = store.events_after(0, 100).await.unwrap();
    let task_events = events.iter().filter(|e| e.kind == "task.updated").count();
    assert_eq!(task_events, 5, "two creates, start, result, finish");
    let audit = store.audit_after(0, 100).await.unwrap();
    let actions: Vec<_> = audit.iter().map(|a| a.action.as_str()).collect();
    for action in [
        "task.created",
        "task.started",
        "task.result",
        "task.finished",
    ] {
        assert!(actions.contains(&action), "{action} in {actions:?}");
    }
}

#[tokio::test]
async fn an_escalation_note_keeps_the_create_idempotent() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(dir.path()).unwrap();
    let mut request = InteractionRequest::new(
        "s-1",
        InteractionKind::FreeText {
            prompt: "which?".into(),
        },
    );
    request.id = Some("ir_1".into());
    request.metadata = Some(json!("opaque"));
    let new = || NewInteraction {
        interaction: Interaction {
            request: request.clone(),
            status: InteractionStatus::Pending,
            created_at: OffsetDateTime::now_utc(),
            expires_at: None,
            answered_at: None,
            answered_by: None,
        },
        max_pending_per_session: 100,
        actor: "worker-1".into(),
    };
    assert!(matches!(
        store.create_interaction(new()).await.unwrap(),
        CreateOutcome::Created(_)
    ));
    let view = store
        .escalate_interaction("ir_1", "needs a person", "main-ai")
        .await
        .unwrap()
        .unwrap();
    let meta = view.request.request.metadata.unwrap();
    assert_eq!(meta["escalation"]["reason"], "needs a person");
    assert_eq!(meta["escalation"]["by"], "main-ai");
    assert_eq!(meta["metadata"], "opaque", "the worker's metadata is kept");
    assert!(matches!(
        store.create_interaction(new()).await.unwrap(),
        CreateOutcome::Existing(_)
    ));
    let kinds: Vec<_> = store
        .events_after(0, 100)
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.kind)
        .collect();
    assert!(kinds.contains(&"interaction.escalated".to_owned()));
    // Not pending any more: no note.
    store.cancel_interaction("ir_1", "worker-1").await.unwrap();
    assert!(
        store
            .escalate_interaction("ir_1", "late", "main-ai")
            .await
            .unwrap()
            .is_none()
    );
}

#[tokio::test]
async fn bare_events_commit_with_their_audit_entry() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(dir.path()).unwrap();
    let mut live = store.subscribe();
    let seq = store
        .append_event(
            "operator.connected",
            json!({"session_id": "s-1"}),
            Some("main-ai"),
        )
        .await
        .unwrap();
    let event = live.recv().await.unwrap();
    assert_eq!(event.seq, seq);
    assert_eq!(event.kind, "operator.connected");
    let audit = store.audit_after(0, 10).await.unwrap();
    assert_eq!(audit.last().unwrap().action, "operator.connected");
    assert_eq!(audit.last().unwrap().actor, "main-ai");
}
