//! Sub-agent tasks: they survive a restart, results stop at the finish,
//! the finish is a compare-and-set, events and audit commit with each
//! change, and an escalation note keeps creates idempotent.

use std::sync::Arc;

use lev_protocol::api::TaskStatus;
use lev_protocol::{Interaction, InteractionKind, InteractionRequest, InteractionStatus};
use serde_json::json;
use time::OffsetDateTime;

use super::Backend;
use super::fixtures::{finish, result, task};
use super::interactions::handles;
use crate::tasks::{TaskChange, TaskFilter};
use crate::{CreateOutcome, NewInteraction};

pub async fn a_task_lives_from_create_to_finish_and_survives_a_reopen(b: &dyn Backend) {
    {
        let store = b.open().await;
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
    let store = b.open().await;
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

pub async fn an_escalation_note_keeps_the_create_idempotent(b: &dyn Backend) {
    let store = b.open().await;
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
            votes: Vec::new(),
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

pub async fn bare_events_commit_with_their_audit_entry(b: &dyn Backend) {
    let store = b.open().await;
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

pub async fn a_task_finishes_once(b: &dyn Backend) {
    let stores = handles(b).await;
    stores[0].create_task(task("tk_r", "s-1")).await.unwrap();
    let mut tasks = Vec::new();
    for i in 0..16 {
        let store = Arc::clone(&stores[i % stores.len()]);
        tasks.push(tokio::spawn(async move {
            let status = if i % 2 == 0 {
                TaskStatus::Succeeded
            } else {
                TaskStatus::Failed
            };
            store.finish_task(finish("tk_r", status)).await.unwrap()
        }));
    }
    let mut done = Vec::new();
    for t in tasks {
        match t.await.unwrap() {
            TaskChange::Done(task) => done.push(task.status),
            TaskChange::Finished(_) => {}
            TaskChange::NotFound => panic!("the task vanished"),
        }
    }
    assert_eq!(done.len(), 1, "one finish wins");
    let stored = stores[0].get_task("tk_r").await.unwrap().unwrap();
    assert_eq!(stored.status, done[0]);
}

/// Free text a sub-agent or a worker sends may hold any character, a NUL
/// too (which some databases' text types refuse): it comes back as it went.
pub async fn any_text_comes_back_as_it_went(b: &dyn Backend) {
    let store = b.open().await;
    let odd = "nul:\u{0} bell:\u{7} emoji:\u{1F600} rtl:\u{202E} quote:\"'\\";
    let mut new = crate::conformance::fixtures::free_text("ir_odd");
    new.interaction.request.metadata = Some(json!({ "text": odd }));
    new.interaction.request.kind = InteractionKind::FreeText { prompt: odd.into() };
    assert!(matches!(
        store.create_interaction(new).await.unwrap(),
        CreateOutcome::Created(_)
    ));
    let view = store.get_interaction("ir_odd").await.unwrap().unwrap();
    assert_eq!(view.request.request.metadata.unwrap()["text"], odd);
    store
        .answer_interaction(crate::conformance::fixtures::answer("ir_odd", odd, "bob"))
        .await
        .unwrap();
    let view = store.get_interaction("ir_odd").await.unwrap().unwrap();
    assert_eq!(view.response.unwrap().value.as_deref(), Some(odd));
    store.create_task(task("tk_odd", "s-1")).await.unwrap();
    let mut posted = result("tk_odd", json!(odd));
    posted.output_tail = Some(odd.into());
    store.post_task_result(posted).await.unwrap();
    let mut done = finish("tk_odd", TaskStatus::Failed);
    done.error = Some(odd.into());
    store.finish_task(done).await.unwrap();
    let t = store.get_task("tk_odd").await.unwrap().unwrap();
    assert_eq!(t.output_tail.as_deref(), Some(odd));
    assert_eq!(t.error.as_deref(), Some(odd));
    assert_eq!(t.last_result.unwrap()["value"], odd);
    let audit = store.audit_after(0, 100).await.unwrap();
    assert!(
        audit.iter().any(|e| e.data["error"] == odd),
        "the audit entry keeps it too"
    );
    let events = store.events_after(0, 100).await.unwrap();
    assert_eq!(events.last().unwrap().data["error"], odd);
}
