//! Interactions: idempotent create, pending limits, the answer
//! compare-and-set, expiry, listing, events and the audit chain.

use std::collections::BTreeSet;
use std::sync::Arc;

use lev_approval::audit::GENESIS_HASH;
use lev_protocol::api::Role;
use lev_protocol::{InteractionKind, InteractionStatus, OnTimeout};
use time::OffsetDateTime;

use super::Backend;
use super::fixtures::{answer, check_chain, free_text, free_text_in, interaction, token};
use crate::{
    AlikeNames, CreateOutcome, ListFilter, NewInteraction, Store, TokenCreateOutcome,
    TransitionOutcome,
};

pub async fn create_is_idempotent_by_id(b: &dyn Backend) {
    let store = b.open().await;
    assert!(matches!(
        store.create_interaction(free_text("ir_1")).await.unwrap(),
        CreateOutcome::Created(_)
    ));
    // The same request again, made anew (another timestamp): the same.
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

pub async fn pending_limit_per_session(b: &dyn Backend) {
    let store = b.open().await;
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
    // Another session has its own limit.
    let mut new = free_text_in("ir_other", "s-2");
    new.max_pending_per_session = 2;
    assert!(matches!(
        store.create_interaction(new).await.unwrap(),
        CreateOutcome::Created(_)
    ));
}

/// Handles to race on: two when the backend allows it (two servers), else one.
pub(crate) async fn handles(b: &dyn Backend) -> Vec<Arc<dyn Store>> {
    let first = b.open().await;
    if b.many_handles() {
        vec![first, b.open().await]
    } else {
        vec![first]
    }
}

pub async fn pending_limit_holds_under_concurrent_creates(b: &dyn Backend) {
    let stores = handles(b).await;
    let mut tasks = Vec::new();
    for i in 0..40 {
        let store = Arc::clone(&stores[i % stores.len()]);
        tasks.push(tokio::spawn(async move {
            let mut new = free_text(&format!("ir_c{i}"));
            new.max_pending_per_session = 7;
            store.create_interaction(new).await.unwrap()
        }));
    }
    let mut created = 0;
    for t in tasks {
        match t.await.unwrap() {
            CreateOutcome::Created(_) => created += 1,
            CreateOutcome::TooManyPending => {}
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(created, 7, "exactly the limit, never more");
    let page = stores[0]
        .list_interactions(ListFilter {
            status: Some(InteractionStatus::Pending),
            limit: 100,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(page.items.len(), 7);
}

pub async fn racing_answers_exactly_one_wins(b: &dyn Backend) {
    let stores = handles(b).await;
    stores[0]
        .create_interaction(free_text("ir_race"))
        .await
        .unwrap();
    let mut tasks = Vec::new();
    for i in 0..32 {
        let store = Arc::clone(&stores[i % stores.len()]);
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
            TransitionOutcome::AlreadyAnswered(v) => {
                assert!(v.response.is_some(), "a loser is told the winner");
                losers += 1;
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(winners.len(), 1);
    assert_eq!(losers, 31);
    let stored = stores[0].get_interaction("ir_race").await.unwrap().unwrap();
    assert_eq!(stored.response, winners[0].response);
    assert_eq!(stored.request.status, InteractionStatus::Answered);
    let answered = stores[0]
        .events_after(0, 1000)
        .await
        .unwrap()
        .into_iter()
        .filter(|e| e.kind == "interaction.answered")
        .count();
    assert_eq!(answered, 1, "one answered event");
}

pub async fn events_are_announced_after_commit_and_replayable(b: &dyn Backend) {
    let store = b.open().await;
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
    assert_eq!(store.last_event_seq().await.unwrap(), second.seq);
    drop(rx);
    drop(store);
    // After a restart: the same durable ids.
    let reopened = b.open().await;
    let replay = reopened.events_after(0, 100).await.unwrap();
    assert_eq!(
        replay.iter().map(|e| e.seq).collect::<Vec<_>>(),
        vec![first.seq, second.seq]
    );
    assert_eq!(replay[1].data, second.data);
    assert_eq!(
        reopened.events_after(first.seq, 100).await.unwrap().len(),
        1
    );
}

/// Many writers commit while a reader follows `events_after` from the last
/// seq it saw, as an SSE stream resuming with `Last-Event-ID` does: it must
/// see every event exactly once, in increasing seq.
pub async fn events_from_concurrent_writers_resume_without_gaps(b: &dyn Backend) {
    let stores = handles(b).await;
    let reader = Arc::clone(&stores[0]);
    let writers = 8;
    let per_writer = 25;
    let mut tasks = Vec::new();
    for w in 0..writers {
        let store = Arc::clone(&stores[w % stores.len()]);
        tasks.push(tokio::spawn(async move {
            for i in 0..per_writer {
                store
                    .create_interaction(free_text_in(&format!("ir_{w}_{i}"), &format!("s-{w}")))
                    .await
                    .unwrap();
            }
        }));
    }
    let total = writers * per_writer;
    let follow = tokio::spawn(async move {
        let mut last = 0;
        let mut seen = Vec::new();
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(60);
        while seen.len() < total {
            assert!(
                tokio::time::Instant::now() < deadline,
                "events stopped coming"
            );
            let page = reader.events_after(last, 7).await.unwrap();
            for e in &page {
                assert!(e.seq > last, "seq {} after {last}", e.seq);
                last = e.seq;
                seen.push(e.data["request"]["id"].as_str().unwrap().to_owned());
            }
            if page.is_empty() {
                tokio::task::yield_now().await;
            }
        }
        seen
    });
    for t in tasks {
        t.await.unwrap();
    }
    let seen = follow.await.unwrap();
    let unique: BTreeSet<_> = seen.iter().collect();
    assert_eq!(seen.len(), total, "no event repeated");
    assert_eq!(unique.len(), total, "no event missed");
}

pub async fn expiry_applies_on_timeout(b: &dyn Backend) {
    let store = b.open().await;
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
    let mut later = free_text("ir_later");
    later.interaction.expires_at = Some(OffsetDateTime::now_utc() + time::Duration::hours(1));
    store.create_interaction(later).await.unwrap();
    assert!(store.next_expiry().await.unwrap().unwrap() <= OffsetDateTime::now_utc());
    let moved = store.expire_due(OffsetDateTime::now_utc()).await.unwrap();
    assert_eq!(moved.len(), 3);
    for (id, _, _, status) in &cases {
        let v = store.get_interaction(id).await.unwrap().unwrap();
        assert_eq!(v.request.status, *status, "{id}");
    }
    let choice = store.get_interaction("ir_choice").await.unwrap().unwrap();
    assert_eq!(choice.response.unwrap().choice_index, Some(1));
    assert_eq!(choice.request.answered_by.as_deref(), Some("timeout"));
    assert!(store.next_expiry().await.unwrap().unwrap() > OffsetDateTime::now_utc());
    assert_eq!(store.count_pending().await.unwrap(), 1);
    // A second sweep moves nothing; a late answer finds it gone.
    assert!(
        store
            .expire_due(OffsetDateTime::now_utc())
            .await
            .unwrap()
            .is_empty()
    );
    assert!(matches!(
        store
            .answer_interaction(answer("ir_cancel", "late", "bob"))
            .await
            .unwrap(),
        TransitionOutcome::Gone(_)
    ));
}

pub async fn cancel_is_a_compare_and_set(b: &dyn Backend) {
    let store = b.open().await;
    store.create_interaction(free_text("ir_x")).await.unwrap();
    assert!(matches!(
        store.cancel_interaction("ir_x", "w").await.unwrap(),
        TransitionOutcome::Done(_)
    ));
    assert!(matches!(
        store.cancel_interaction("ir_x", "w").await.unwrap(),
        TransitionOutcome::Gone(_)
    ));
    assert!(matches!(
        store.cancel_interaction("ir_none", "w").await.unwrap(),
        TransitionOutcome::NotFound
    ));
    store.create_interaction(free_text("ir_y")).await.unwrap();
    store
        .answer_interaction(answer("ir_y", "done", "alice"))
        .await
        .unwrap();
    assert!(matches!(
        store.cancel_interaction("ir_y", "w").await.unwrap(),
        TransitionOutcome::AlreadyAnswered(_)
    ));
    assert!(matches!(
        store
            .answer_interaction(answer("ir_none", "x", "a"))
            .await
            .unwrap(),
        TransitionOutcome::NotFound
    ));
}

pub async fn list_pages_newest_first(b: &dyn Backend) {
    let store = b.open().await;
    for i in 0..5 {
        store
            .create_interaction(free_text(&format!("ir_{i}")))
            .await
            .unwrap();
    }
    store
        .create_interaction(free_text_in("ir_s2", "s-2"))
        .await
        .unwrap();
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
                session_id: Some("s-1".into()),
                limit: 2,
                before,
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
    let all = store
        .list_interactions(ListFilter {
            limit: 100,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(all.items.len(), 6);
    assert_eq!(all.next_before, None);
}

pub async fn audit_chain_is_whole(b: &dyn Backend) {
    let store = b.open().await;
    assert_eq!(
        store.audit_head().await.unwrap(),
        (0, GENESIS_HASH.to_owned())
    );
    store.create_interaction(free_text("ir_a")).await.unwrap();
    store
        .answer_interaction(answer("ir_a", "fine", "alice"))
        .await
        .unwrap();
    let bob = token("bob", Role::Approver, &"ab".repeat(32));
    assert_eq!(
        store
            .create_token(bob, "admin", AlikeNames::Refuse)
            .await
            .unwrap(),
        TokenCreateOutcome::Created
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
    let head = check_chain(&entries, GENESIS_HASH.to_owned());
    assert_eq!(store.audit_head().await.unwrap(), (4, head));
    assert_eq!(store.audit_after(2, 100).await.unwrap().len(), 2);
    assert_eq!(store.audit_after(0, 1).await.unwrap().len(), 1);
}

pub async fn audit_chain_verifies_after_concurrent_writers(b: &dyn Backend) {
    let stores = handles(b).await;
    let mut tasks = Vec::new();
    for w in 0..8 {
        let store = Arc::clone(&stores[w % stores.len()]);
        tasks.push(tokio::spawn(async move {
            for i in 0..15 {
                store
                    .append_audit(crate::AuditRecord {
                        action: "test.entry".into(),
                        actor: format!("w{w}"),
                        data: serde_json::json!({"i": i}),
                    })
                    .await
                    .unwrap();
                store
                    .create_interaction(free_text_in(&format!("ir_{w}_{i}"), "s-a"))
                    .await
                    .unwrap();
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let entries = stores[0].audit_after(0, 1000).await.unwrap();
    assert_eq!(entries.len(), 8 * 15 * 2);
    for (i, e) in entries.iter().enumerate() {
        assert_eq!(e.seq, u64::try_from(i).unwrap() + 1, "seqs are 1, 2, 3...");
    }
    let head = check_chain(&entries, GENESIS_HASH.to_owned());
    assert_eq!(
        stores[stores.len() - 1].audit_head().await.unwrap(),
        (u64::try_from(entries.len()).unwrap(), head)
    );
}

pub async fn blobs_are_served_only_for_a_winning_answer(b: &dyn Backend) {
    let store = b.open().await;
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
        size: 5,
        sha256: sha.into(),
        original_name: None,
    };
    let bytes = b"hello".to_vec();
    let sha_hello = "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824";
    store
        .put_blob(sha_hello, "text/plain", bytes.clone())
        .await
        .unwrap();
    let mut winner = answer("ir_b", "first", "alice");
    winner.response.parts = vec![part(sha_hello)];
    let loser_sha = "a".repeat(64);
    store
        .put_blob(&loser_sha, "text/plain", b"other".to_vec())
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
        store.get_blob(sha_hello).await.unwrap(),
        Some(("text/plain".into(), bytes))
    );
    assert_eq!(store.get_blob(&"0".repeat(64)).await.unwrap(), None);
}

pub async fn tokens_have_one_owner_per_name(b: &dyn Backend) {
    let stores = handles(b).await;
    assert!(!stores[0].has_token_with_role(Role::Admin).await.unwrap());
    let mut tasks = Vec::new();
    for i in 0..10 {
        let store = Arc::clone(&stores[i % stores.len()]);
        tasks.push(tokio::spawn(async move {
            let record = token("carol", Role::Approver, &format!("{i:064x}"));
            store
                .create_token(record, "admin", AlikeNames::Refuse)
                .await
                .unwrap()
        }));
    }
    let mut created = 0;
    for t in tasks {
        if t.await.unwrap() == TokenCreateOutcome::Created {
            created += 1;
        }
    }
    assert_eq!(created, 1, "one token per name");
    let mut admin = token("root", Role::Admin, &"cd".repeat(32));
    admin.info.sessions = Some(vec!["ci-*".into()]);
    admin.info.caller = Some("alice".into());
    stores[0]
        .create_token(admin.clone(), "system", AlikeNames::Allow)
        .await
        .unwrap();
    assert!(stores[0].has_token_with_role(Role::Admin).await.unwrap());
    let found = stores[0]
        .token_by_hash(&"cd".repeat(32))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(found.info.name, "root");
    assert_eq!(found.info.sessions, admin.info.sessions);
    assert_eq!(found.info.caller, admin.info.caller);
    let names: Vec<_> = stores[0]
        .list_tokens()
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.name)
        .collect();
    assert_eq!(names, ["carol", "root"]);
    // Names that read alike (case, punctuation at the ends or between
    // words) are one name: made at once on every handle, one of them is.
    let spellings = [
        "ops-team",
        "OPS-team",
        "ops_team.",
        "Ops.Team",
        "_ops--team",
    ];
    let mut tasks = Vec::new();
    for (i, name) in spellings.iter().enumerate() {
        let store = Arc::clone(&stores[i % stores.len()]);
        let record = token(name, Role::Approver, &format!("{:064x}", 100 + i));
        tasks.push(tokio::spawn(async move {
            store
                .create_token(record, "admin", AlikeNames::Refuse)
                .await
                .unwrap()
        }));
    }
    let mut outcomes = Vec::new();
    for t in tasks {
        outcomes.push(t.await.unwrap());
    }
    let made: Vec<_> = outcomes
        .iter()
        .filter(|o| **o == TokenCreateOutcome::Created)
        .collect();
    assert_eq!(made.len(), 1, "{outcomes:?}");
    assert!(
        outcomes.iter().all(|o| match o {
            TokenCreateOutcome::Created => true,
            TokenCreateOutcome::LooksLike(n) => spellings.contains(&n.as_str()),
            TokenCreateOutcome::NameTaken => false,
        }),
        "{outcomes:?}"
    );
    // Asked to, a store makes a look-alike (the first start's `admin`
    // beside an `Admin` made before names were folded), and both work.
    assert_eq!(
        stores[0]
            .create_token(
                token("Carol.", Role::Approver, &"ee".repeat(32)),
                "system",
                AlikeNames::Allow
            )
            .await
            .unwrap(),
        TokenCreateOutcome::Created
    );
    assert!(
        stores[0]
            .token_by_hash(&"ee".repeat(32))
            .await
            .unwrap()
            .is_some()
    );
    assert!(stores[0].revoke_token("root", "admin").await.unwrap());
    assert!(!stores[0].revoke_token("root", "admin").await.unwrap());
    assert!(
        stores[0]
            .token_by_hash(&"cd".repeat(32))
            .await
            .unwrap()
            .is_none()
    );
}

/// A form, and its answer's fields, are kept whole: the schema's properties
/// in the order they were written, the answer's values with their types,
/// across a restart; the same form again is the same request.
pub async fn forms_keep_their_schema_order_and_answer(b: &dyn Backend) {
    let schema: lev_protocol::form::FormSchema = serde_json::from_str(
        r#"{"type":"object","properties":{"zeta":{"type":"string","format":"email"},
            "alpha":{"type":"integer","minimum":1,"default":2},"mid":{"type":"boolean"}},
            "required":["zeta"]}"#,
    )
    .unwrap();
    let kind = InteractionKind::Form {
        prompt: "details".into(),
        schema,
    };
    let new = || NewInteraction {
        interaction: super::fixtures::interaction("ir_form", "s-1", kind.clone()),
        max_pending_per_session: 10_000,
        actor: "worker".into(),
    };
    {
        let store = b.open().await;
        assert!(matches!(
            store.create_interaction(new()).await.unwrap(),
            CreateOutcome::Created(_)
        ));
        assert!(matches!(
            store.create_interaction(new()).await.unwrap(),
            CreateOutcome::Existing(_)
        ));
        let fields = serde_json::json!({"zeta": "a@example.org", "alpha": 3, "mid": false});
        let mut a = answer("ir_form", "", "alice");
        a.response = lev_protocol::InteractionResponse::form(
            "ir_form",
            fields.as_object().cloned().unwrap(),
        );
        assert!(matches!(
            store.answer_interaction(a).await.unwrap(),
            TransitionOutcome::Done(_)
        ));
    }
    let store = b.open().await;
    let view = store.get_interaction("ir_form").await.unwrap().unwrap();
    let InteractionKind::Form { schema, .. } = &view.request.request.kind else {
        panic!("a form: {view:?}")
    };
    let names: Vec<&str> = schema
        .properties
        .0
        .iter()
        .map(|(n, _)| n.as_str())
        .collect();
    assert_eq!(names, ["zeta", "alpha", "mid"]);
    assert_eq!(view.request.request.kind, kind);
    let fields = view.response.unwrap().fields.unwrap();
    assert_eq!(
        serde_json::Value::Object(fields),
        serde_json::json!({"zeta": "a@example.org", "alpha": 3, "mid": false})
    );
}
