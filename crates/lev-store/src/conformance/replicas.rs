//! What several writers (and, where the backend allows, several servers on
//! one database) must agree on beyond a single compare-and-set: the live
//! stream's order, the numbers a write returns, one signing key, one grant
//! per key, and expiry racing answers. A backend that numbers events or
//! chains audit entries after its commits, or decides "one per key" with a
//! read before a write, fails these where it goes wrong.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use lev_protocol::api::Grant;
use lev_protocol::{ApprovalScope, InteractionStatus};
use serde_json::json;
use time::OffsetDateTime;

use super::Backend;
use super::fixtures::{answer, answer_tool_approval, free_text_in, tool_approval};
use super::interactions::handles;
use crate::{AuditRecord, NewGrant, StoredEvent, StoredSigningKey, TransitionOutcome};

/// Every handle's subscriber sees every event of every writer (on any
/// handle) exactly once, in increasing seq, and the same run
/// `events_after` gives: the live stream has no gap a late commit opened.
pub async fn the_live_stream_is_one_gapless_order(b: &dyn Backend) {
    let stores = handles(b).await;
    let mut live: Vec<_> = stores.iter().map(|s| s.subscribe()).collect();
    let (writers, per_writer) = (6, 20);
    let mut tasks = Vec::new();
    for w in 0..writers {
        let store = Arc::clone(&stores[w % stores.len()]);
        tasks.push(tokio::spawn(async move {
            for i in 0..per_writer {
                if i % 4 == 3 {
                    store
                        .append_event("test.bare", json!({"w": w, "i": i}), None)
                        .await
                        .unwrap();
                } else {
                    store
                        .create_interaction(free_text_in(&format!("ir_{w}_{i}"), &format!("s-{w}")))
                        .await
                        .unwrap();
                }
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let total = writers * per_writer;
    let stored: Vec<i64> = stores[0]
        .events_after(0, 10_000)
        .await
        .unwrap()
        .iter()
        .map(|e| e.seq)
        .collect();
    assert_eq!(stored.len(), total);
    for (h, rx) in live.iter_mut().enumerate() {
        let mut seen: Vec<StoredEvent> = Vec::new();
        while seen.len() < total {
            let event = tokio::time::timeout(Duration::from_secs(30), rx.recv())
                .await
                .unwrap_or_else(|_| panic!("handle {h}: {} of {total} events came", seen.len()))
                .unwrap();
            if let Some(last) = seen.last() {
                assert!(
                    event.seq > last.seq,
                    "handle {h}: seq {} after {}",
                    event.seq,
                    last.seq
                );
            }
            seen.push(event);
        }
        let seqs: Vec<i64> = seen.iter().map(|e| e.seq).collect();
        assert_eq!(seqs, stored, "handle {h} streamed what is stored, in order");
    }
}

/// `append_audit` returns the entry as it stays in the chain, and
/// `append_event` the seq its event keeps, also under concurrent writers.
pub async fn appended_entries_are_returned_as_stored(b: &dyn Backend) {
    let stores = handles(b).await;
    let start = Arc::new(tokio::sync::Barrier::new(12));
    let mut tasks = Vec::new();
    for i in 0..12 {
        let store = Arc::clone(&stores[i % stores.len()]);
        let start = Arc::clone(&start);
        tasks.push(tokio::spawn(async move {
            start.wait().await;
            let entry = store
                .append_audit(AuditRecord {
                    action: "test.appended".into(),
                    actor: format!("w{i}"),
                    data: json!({"i": i}),
                })
                .await
                .unwrap();
            let seq = store
                .append_event("test.event", json!({"i": i}), Some("w"))
                .await
                .unwrap();
            (i, entry, seq)
        }));
    }
    let mut returned = Vec::new();
    for t in tasks {
        returned.push(t.await.unwrap());
    }
    let chain: BTreeMap<u64, _> = stores[0]
        .audit_after(0, 1000)
        .await
        .unwrap()
        .into_iter()
        .map(|e| (e.seq, e))
        .collect();
    let events: BTreeMap<i64, _> = stores[stores.len() - 1]
        .events_after(0, 1000)
        .await
        .unwrap()
        .into_iter()
        .map(|e| (e.seq, e))
        .collect();
    for (i, entry, seq) in returned {
        assert_eq!(
            chain.get(&entry.seq),
            Some(&entry),
            "entry {i} as returned is the entry stored"
        );
        let event = events.get(&seq).expect("the returned seq is stored");
        assert_eq!(event.data, json!({"i": i}), "seq {seq} is event {i}'s");
    }
}

fn key(kid: &str) -> StoredSigningKey {
    StoredSigningKey {
        kid: kid.into(),
        material: format!("{{\"secret\":\"{kid}\"}}"),
        active: false,
    }
}

/// Servers starting at once on an empty database: exactly one key becomes
/// the active one, and every caller is told it.
pub async fn first_starts_at_once_make_one_signing_key(b: &dyn Backend) {
    let stores = handles(b).await;
    let start = Arc::new(tokio::sync::Barrier::new(12));
    let mut tasks = Vec::new();
    for i in 0..12 {
        let store = Arc::clone(&stores[i % stores.len()]);
        let start = Arc::clone(&start);
        tasks.push(tokio::spawn(async move {
            start.wait().await;
            store
                .init_signing_key(key(&format!("{:016x}", i + 1)))
                .await
                .unwrap()
        }));
    }
    let mut told = BTreeSet::new();
    for t in tasks {
        let active = t.await.unwrap();
        assert!(active.active);
        assert_eq!(active.material, key(&active.kid).material);
        told.insert(active.kid);
    }
    assert_eq!(told.len(), 1, "one key for everybody: {told:?}");
    for store in &stores {
        let keys = store.signing_keys().await.unwrap();
        assert_eq!(keys.len(), 1, "no second key kept");
        assert!(keys[0].active);
        assert!(told.contains(&keys[0].kid));
    }
}

fn grant(id: &str, interaction_id: &str) -> Grant {
    Grant {
        id: id.into(),
        scope: ApprovalScope::Always,
        caller: "alice".into(),
        conversation_id: None,
        sandbox_mode: "read-only".into(),
        tool_name: "shell".into(),
        covered_capabilities: vec!["exec".into()],
        grant_args: Some([("path".to_owned(), "/tmp".to_owned())].into()),
        approver: "bob".into(),
        interaction_id: Some(interaction_id.into()),
        created_at: OffsetDateTime::now_utc(),
    }
}

/// The same approval given at once on several interactions (on several
/// servers) keeps one grant: the first creates it, the others renew it.
/// Of two revokes at once, one revokes.
pub async fn one_grant_per_key_under_concurrent_approvals(b: &dyn Backend) {
    let stores = handles(b).await;
    let n = 16;
    for i in 0..n {
        stores[0]
            .create_interaction(tool_approval(&format!("ir_a{i}"), "s-g"))
            .await
            .unwrap();
    }
    // All at once, so that the approvals overlap.
    let start = Arc::new(tokio::sync::Barrier::new(n));
    let mut tasks = Vec::new();
    for i in 0..n {
        let store = Arc::clone(&stores[i % stores.len()]);
        let start = Arc::clone(&start);
        tasks.push(tokio::spawn(async move {
            let id = format!("ir_a{i}");
            start.wait().await;
            let g = NewGrant {
                grant: grant(&format!("gr_{i}"), &id),
                actor: "bob".into(),
            };
            answer_tool_approval(&*store, answer(&id, "yes", "bob"), Some(g)).await
        }));
    }
    for t in tasks {
        assert!(matches!(t.await.unwrap(), TransitionOutcome::Done(_)));
    }
    let grants = stores[0].list_grants().await.unwrap();
    assert_eq!(grants.len(), 1, "one grant per key: {grants:?}");
    let actions: Vec<String> = stores[0]
        .audit_after(0, 1000)
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.action)
        .collect();
    let count = |a: &str| actions.iter().filter(|x| *x == a).count();
    assert_eq!((count("grant.created"), count("grant.renewed")), (1, n - 1));
    let id = grants[0].id.clone();
    let mut tasks = Vec::new();
    for i in 0..6 {
        let store = Arc::clone(&stores[i % stores.len()]);
        let id = id.clone();
        tasks.push(tokio::spawn(async move {
            store.revoke_grant(&id, "admin").await.unwrap()
        }));
    }
    let mut revoked = 0;
    for t in tasks {
        if t.await.unwrap().is_some() {
            revoked += 1;
        }
    }
    assert_eq!(revoked, 1, "one revoke revokes");
    assert!(stores[0].list_grants().await.unwrap().is_empty());
}

/// Sweeps on every server race answers on every server: each interaction
/// ends once (answered or timed out), with one final event, and every
/// sweep reports only what it moved.
pub async fn expiry_races_answers_once(b: &dyn Backend) {
    let stores = handles(b).await;
    let n = 24;
    let past = OffsetDateTime::now_utc() - time::Duration::seconds(1);
    for i in 0..n {
        let mut new = free_text_in(&format!("ir_x{i}"), "s-x");
        new.interaction.expires_at = Some(past);
        stores[0].create_interaction(new).await.unwrap();
    }
    let mut sweeps = Vec::new();
    for s in 0..4 {
        let store = Arc::clone(&stores[s % stores.len()]);
        sweeps.push(tokio::spawn(async move {
            store.expire_due(OffsetDateTime::now_utc()).await.unwrap()
        }));
    }
    let mut answers = Vec::new();
    for i in 0..n {
        let store = Arc::clone(&stores[(i + 1) % stores.len()]);
        answers.push(tokio::spawn(async move {
            let id = format!("ir_x{i}");
            (
                id.clone(),
                store
                    .answer_interaction(answer(&id, "late?", "bob"))
                    .await
                    .unwrap(),
            )
        }));
    }
    let mut ended: BTreeMap<String, InteractionStatus> = BTreeMap::new();
    for s in sweeps {
        for view in s.await.unwrap() {
            assert_eq!(view.request.status, InteractionStatus::Cancelled);
            let previous = ended.insert(view.request.id().to_owned(), view.request.status);
            assert!(previous.is_none(), "{} swept twice", view.request.id());
        }
    }
    for a in answers {
        let (id, outcome) = a.await.unwrap();
        match outcome {
            TransitionOutcome::Done(view) => {
                let previous = ended.insert(id.clone(), view.request.status);
                assert!(previous.is_none(), "{id} answered after it was swept");
            }
            TransitionOutcome::Gone(view) => {
                assert_eq!(ended.get(&id), Some(&view.request.status), "{id}");
            }
            other => panic!("{id}: {other:?}"),
        }
    }
    assert_eq!(ended.len(), n, "each ended once");
    for (id, status) in &ended {
        let stored = stores[stores.len() - 1]
            .get_interaction(id)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(stored.request.status, *status, "{id}");
    }
    let finals = stores[0]
        .events_after(0, 1000)
        .await
        .unwrap()
        .into_iter()
        .filter(|e| e.kind != "interaction.created")
        .count();
    assert_eq!(finals, n, "one final event each");
    assert_eq!(stores[0].count_pending().await.unwrap(), 0);
}
