use std::sync::Arc;

use lev_approval::audit::{GENESIS_HASH, entry_hash};
use lev_protocol::api::{Role, TokenInfo};
use lev_protocol::{
    Interaction, InteractionKind, InteractionRequest, InteractionResponse, InteractionStatus,
    OnTimeout,
};
use lev_store::{
    CreateOutcome, ListFilter, NewAnswer, NewInteraction, SqliteStore, Store, TokenCreateOutcome,
    TokenRecord, TransitionOutcome,
};
use time::OffsetDateTime;

fn interaction(id: &str, session: &str, kind: InteractionKind) -> Interaction {
    let mut request = InteractionRequest::new(session, kind);
    request.id = Some(id.to_owned());
    Interaction {
        request,
        status: InteractionStatus::Pending,
        created_at: OffsetDateTime::now_utc(),
        expires_at: None,
        answered_at: None,
        answered_by: None,
    }
}

fn free_text(id: &str) -> NewInteraction {
    NewInteraction {
        interaction: interaction(
            id,
            "s-1",
            InteractionKind::FreeText {
                prompt: "why?".into(),
            },
        ),
        max_pending_per_session: 10_000,
        actor: "worker".into(),
    }
}

fn answer(id: &str, text: &str, by: &str) -> NewAnswer {
    NewAnswer {
        id: id.to_owned(),
        response: InteractionResponse::text(id, text),
        approval: None,
        answered_by: by.to_owned(),
        answered_at: OffsetDateTime::now_utc(),
        audit: Default::default(),
    }
}

fn open() -> (tempfile::TempDir, Arc<SqliteStore>) {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(SqliteStore::open(dir.path()).unwrap());
    (dir, store)
}

#[tokio::test]
async fn create_is_idempotent_by_id() {
    let (_dir, store) = open();
    assert!(matches!(
        store.create_interaction(free_text("ir_1")).await.unwrap(),
        CreateOutcome::Created(_)
    ));
    assert!(matches!(
        store.create_interaction(free_text("ir_1")).await.unwrap(),
        CreateOutcome::Existing(_)
    ));
    let mut other = free_text("ir_1");
    other.interaction.request.kind = InteractionKind::FreeText {
        prompt: "something else".into(),
    };
    assert!(matches!(
        store.create_interaction(other).await.unwrap(),
        CreateOutcome::Conflict(_)
    ));
}

#[tokio::test]
async fn pending_limit_per_session() {
    let (_dir, store) = open();
    for i in 0..3 {
        let mut new = free_text(&format!("ir_{i}"));
        new.max_pending_per_session = 2;
        let outcome = store.create_interaction(new).await.unwrap();
        assert_eq!(
            matches!(outcome, CreateOutcome::TooManyPending),
            i == 2,
            "create {i}"
        );
    }
}

#[tokio::test]
async fn racing_answers_exactly_one_wins() {
    let (_dir, store) = open();
    store
        .create_interaction(free_text("ir_race"))
        .await
        .unwrap();
    let mut tasks = Vec::new();
    for i in 0..32 {
        let store = Arc::clone(&store);
        tasks.push(tokio::spawn(async move {
            store
                .answer_interaction(answer("ir_race", &format!("answer {i}"), &format!("p{i}")))
                .await
                .unwrap()
        }));
    }
    let mut winners = Vec::new();
    let mut losers = 0;
    for t in tasks {
        match t.await.unwrap() {
            TransitionOutcome::Done(v) => winners.push(v),
            TransitionOutcome::AlreadyAnswered(_) => losers += 1,
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(winners.len(), 1);
    assert_eq!(losers, 31);
    let stored = store.get_interaction("ir_race").await.unwrap().unwrap();
    assert_eq!(stored.response, winners[0].response);
    assert_eq!(stored.request.status, InteractionStatus::Answered);
}

#[tokio::test]
async fn events_are_announced_after_commit_and_replayable() {
    let (dir, store) = open();
    let mut rx = store.subscribe();
    store.create_interaction(free_text("ir_e")).await.unwrap();
    store
        .answer_interaction(answer("ir_e", "ok", "alice"))
        .await
        .unwrap();
    let first = rx.recv().await.unwrap();
    let second = rx.recv().await.unwrap();
    assert_eq!(
        (first.kind.as_str(), second.kind.as_str()),
        ("interaction.created", "interaction.answered")
    );
    assert!(second.seq > first.seq);
    drop(store);
    // A new process sees the same durable ids.
    let reopened = SqliteStore::open(dir.path()).unwrap();
    let replay = reopened.events_after(0, 100).await.unwrap();
    assert_eq!(
        replay.iter().map(|e| e.seq).collect::<Vec<_>>(),
        vec![first.seq, second.seq]
    );
    assert_eq!(
        reopened.events_after(first.seq, 100).await.unwrap().len(),
        1
    );
}

#[tokio::test]
async fn expiry_applies_on_timeout() {
    let (_dir, store) = open();
    let past = OffsetDateTime::now_utc() - time::Duration::seconds(1);
    let cases = [
        (
            "ir_deny",
            InteractionKind::ToolApproval {
                tool_name: "shell".into(),
                args_json: "{}".into(),
                missing_capabilities: vec![],
                sandbox_mode: String::new(),
                options: vec![],
            },
            None,
            InteractionStatus::Expired,
        ),
        (
            "ir_cancel",
            InteractionKind::FreeText { prompt: "?".into() },
            None,
            InteractionStatus::Cancelled,
        ),
        (
            "ir_choice",
            InteractionKind::MultipleChoice {
                prompt: "?".into(),
                options: vec!["a".into(), "b".into()],
            },
            Some(OnTimeout::Choice(1)),
            InteractionStatus::Answered,
        ),
    ];
    for (id, kind, on_timeout, _) in &cases {
        let mut i = interaction(id, "s-x", kind.clone());
        i.request.on_timeout = on_timeout.clone();
        i.expires_at = Some(past);
        store
            .create_interaction(NewInteraction {
                interaction: i,
                max_pending_per_session: 10,
                actor: "w".into(),
            })
            .await
            .unwrap();
    }
    assert!(store.next_expiry().await.unwrap().is_some());
    let moved = store.expire_due(OffsetDateTime::now_utc()).await.unwrap();
    assert_eq!(moved.len(), 3);
    for (id, _, _, status) in &cases {
        let v = store.get_interaction(id).await.unwrap().unwrap();
        assert_eq!(v.request.status, *status, "{id}");
    }
    let choice = store.get_interaction("ir_choice").await.unwrap().unwrap();
    assert_eq!(choice.response.unwrap().choice_index, Some(1));
    assert_eq!(choice.request.answered_by.as_deref(), Some("timeout"));
    assert!(store.next_expiry().await.unwrap().is_none());
    // A late answer finds it gone.
    assert!(matches!(
        store
            .answer_interaction(answer("ir_cancel", "late", "bob"))
            .await
            .unwrap(),
        TransitionOutcome::Gone(_)
    ));
}

#[tokio::test]
async fn list_pages_newest_first() {
    let (_dir, store) = open();
    for i in 0..5 {
        store
            .create_interaction(free_text(&format!("ir_{i}")))
            .await
            .unwrap();
    }
    store
        .answer_interaction(answer("ir_2", "x", "a"))
        .await
        .unwrap();
    let mut seen = Vec::new();
    let mut before = None;
    loop {
        let page = store
            .list_interactions(ListFilter {
                status: Some(InteractionStatus::Pending),
                limit: 2,
                before,
                ..Default::default()
            })
            .await
            .unwrap();
        seen.extend(page.items.iter().map(|v| v.request.id().to_owned()));
        match page.next_before {
            Some(b) => before = Some(b),
            None => break,
        }
    }
    assert_eq!(seen, ["ir_4", "ir_3", "ir_1", "ir_0"]);
}

#[tokio::test]
async fn audit_chain_is_whole_and_append_only() {
    let (dir, store) = open();
    store.create_interaction(free_text("ir_a")).await.unwrap();
    store
        .answer_interaction(answer("ir_a", "fine", "alice"))
        .await
        .unwrap();
    let token = TokenRecord {
        info: TokenInfo {
            name: "bob".into(),
            role: Role::Approver,
            caller: None,
            sessions: None,
            created_at: OffsetDateTime::now_utc(),
        },
        hash: "ab".repeat(32),
    };
    assert_eq!(
        store.create_token(token.clone(), "admin").await.unwrap(),
        TokenCreateOutcome::Created
    );
    assert_eq!(
        store.create_token(token, "admin").await.unwrap(),
        TokenCreateOutcome::NameTaken
    );
    assert!(store.revoke_token("bob", "admin").await.unwrap());
    let entries = store.audit_after(0, 100).await.unwrap();
    let actions: Vec<_> = entries.iter().map(|e| e.action.as_str()).collect();
    assert_eq!(
        actions,
        [
            "interaction.created",
            "interaction.answered",
            "token.created",
            "token.revoked"
        ]
    );
    let mut prev = GENESIS_HASH.to_owned();
    for e in &entries {
        assert_eq!(e.prev_hash, prev);
        assert_eq!(
            entry_hash(e.seq, &e.at, &e.action, &e.actor, &e.data, &e.prev_hash),
            e.hash
        );
        prev.clone_from(&e.hash);
    }
    assert_eq!(store.audit_head().await.unwrap(), (4, prev));
    let conn = rusqlite::Connection::open(dir.path().join("lev.db")).unwrap();
    let err = conn
        .execute("UPDATE audit SET actor = 'mallory' WHERE seq = 1", [])
        .unwrap_err();
    assert!(err.to_string().contains("append-only"), "{err}");
}

#[tokio::test]
async fn blobs_round_trip() {
    let (_dir, store) = open();
    let sha = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
    store.put_blob(sha, "text/plain", Vec::new()).await.unwrap();
    store.put_blob(sha, "text/plain", Vec::new()).await.unwrap();
    assert_eq!(
        store.get_blob(sha).await.unwrap(),
        None,
        "bytes alone are not served: only a committed answer's parts are"
    );
    store.create_interaction(free_text("ir_b")).await.unwrap();
    let part = |sha: &str| lev_protocol::StoredPart {
        name: "a.txt".into(),
        media_type: "text/plain".into(),
        size: 0,
        sha256: sha.into(),
        original_name: None,
    };
    let mut winner = answer("ir_b", "first", "alice");
    winner.response.parts = vec![part(sha)];
    let loser_sha = "a".repeat(64);
    store
        .put_blob(&loser_sha, "text/plain", Vec::new())
        .await
        .unwrap();
    let mut loser = answer("ir_b", "second", "bob");
    loser.response.parts = vec![part(&loser_sha)];
    assert!(matches!(
        store.answer_interaction(winner).await.unwrap(),
        TransitionOutcome::Done(_)
    ));
    assert!(matches!(
        store.answer_interaction(loser).await.unwrap(),
        TransitionOutcome::AlreadyAnswered(_)
    ));
    assert_eq!(
        store.get_blob(&loser_sha).await.unwrap(),
        None,
        "the loser's part is not kept"
    );
    assert_eq!(
        store.get_blob(sha).await.unwrap(),
        Some(("text/plain".into(), Vec::new()))
    );
    assert_eq!(store.get_blob(&"0".repeat(64)).await.unwrap(), None);
}
