//! The parts servers share beside interactions: signing keys, dashboard
//! sessions; and a second handle (another server) seeing every write.

use std::sync::Arc;

use time::{Duration, OffsetDateTime};

use lev_protocol::api::Role;

use super::Backend;
use super::fixtures::{answer, free_text, token};
use crate::{
    AlikeNames, DashboardSession, KeyRemoveOutcome, SIGNING_KEYS_SEEN_WITHIN, Store,
    StoredSigningKey, TOKEN_CHANGES_SEEN_WITHIN, TransitionOutcome,
};

fn key(kid: &str) -> StoredSigningKey {
    StoredSigningKey {
        kid: kid.into(),
        material: format!("{{\"secret\":\"{kid}\"}}"),
        active: false,
    }
}

pub async fn signing_keys_init_rotate_remove(b: &dyn Backend) {
    let store = b.open().await;
    assert!(store.signing_keys().await.unwrap().is_empty());
    let (k1, k2, k3) = ("1111111111111111", "2222222222222222", "3333333333333333");
    let active = store.init_signing_key(key(k1)).await.unwrap();
    assert_eq!((active.kid.as_str(), active.active), (k1, true));
    // A second first start (another server) keeps the first key.
    let active = store.init_signing_key(key(k2)).await.unwrap();
    assert_eq!(active.kid, k1);
    assert_eq!(active.material, key(k1).material);
    assert_eq!(store.signing_keys().await.unwrap().len(), 1);
    assert_eq!(
        store
            .rotate_signing_key(key(k3), "admin")
            .await
            .unwrap()
            .as_deref(),
        Some(k1)
    );
    let keys = store.signing_keys().await.unwrap();
    let listed: Vec<_> = keys.iter().map(|k| (k.kid.as_str(), k.active)).collect();
    assert_eq!(listed, [(k3, true), (k1, false)], "the active key first");
    assert_eq!(
        store.remove_signing_key(k3, "admin").await.unwrap(),
        KeyRemoveOutcome::Active
    );
    assert_eq!(
        store.remove_signing_key(k1, "admin").await.unwrap(),
        KeyRemoveOutcome::Removed
    );
    assert_eq!(
        store.remove_signing_key(k1, "admin").await.unwrap(),
        KeyRemoveOutcome::NotFound
    );
    assert_eq!(
        store
            .remove_signing_key("../../etc/passwd", "admin")
            .await
            .unwrap(),
        KeyRemoveOutcome::NotFound
    );
    drop(store);
    let store = b.open().await;
    let keys = store.signing_keys().await.unwrap();
    assert_eq!(keys.len(), 1);
    assert_eq!((keys[0].kid.as_str(), keys[0].active), (k3, true));
    assert_eq!(keys[0].material, key(k3).material);
}

fn session(id: &str, seen: OffsetDateTime) -> DashboardSession {
    DashboardSession {
        id_hash: id.into(),
        token_hash: format!("token-{id}"),
        csrf: format!("csrf-{id}"),
        created_at: seen,
        last_seen: seen,
    }
}

pub async fn dashboard_sessions_live_in_the_store(b: &dyn Backend) {
    let store = b.open().await;
    let now = OffsetDateTime::now_utc();
    store
        .create_dashboard_session(session("a", now - Duration::minutes(3)), 2)
        .await
        .unwrap();
    store
        .create_dashboard_session(session("b", now - Duration::minutes(2)), 2)
        .await
        .unwrap();
    let got = store.dashboard_session("a").await.unwrap().unwrap();
    assert_eq!(got.csrf, "csrf-a");
    assert_eq!(got.token_hash, "token-a");
    assert_eq!(
        got.created_at.unix_timestamp(),
        (now - Duration::minutes(3)).unix_timestamp()
    );
    store.touch_dashboard_session("a", now).await.unwrap();
    assert_eq!(
        store
            .dashboard_session("a")
            .await
            .unwrap()
            .unwrap()
            .last_seen
            .unix_timestamp(),
        now.unix_timestamp()
    );
    // Past the most: the least recently seen ("b" now) goes.
    store
        .create_dashboard_session(session("c", now), 2)
        .await
        .unwrap();
    assert!(store.dashboard_session("b").await.unwrap().is_none());
    assert!(store.dashboard_session("a").await.unwrap().is_some());
    store.delete_dashboard_session("a").await.unwrap();
    store.delete_dashboard_session("a").await.unwrap();
    assert!(store.dashboard_session("a").await.unwrap().is_none());
    store
        .create_dashboard_session(session("old", now - Duration::hours(20)), 10)
        .await
        .unwrap();
    let removed = store
        .delete_stale_dashboard_sessions(now - Duration::hours(12), now - Duration::days(7))
        .await
        .unwrap();
    assert_eq!(removed, 1);
    assert!(store.dashboard_session("old").await.unwrap().is_none());
    assert!(store.dashboard_session("c").await.unwrap().is_some());
}

/// Two servers on one database: what one writes, the other reads, and an
/// answer given on one wakes a subscriber of the other.
pub async fn a_second_handle_sees_every_write(b: &dyn Backend) {
    if !b.many_handles() {
        return;
    }
    let one = b.open().await;
    let two = b.open().await;
    let mut live = two.subscribe();
    one.create_interaction(free_text("ir_two")).await.unwrap();
    assert!(two.get_interaction("ir_two").await.unwrap().is_some());
    assert!(matches!(
        two.answer_interaction(answer("ir_two", "from two", "bob"))
            .await
            .unwrap(),
        TransitionOutcome::Done(_)
    ));
    assert!(matches!(
        one.answer_interaction(answer("ir_two", "from one", "alice"))
            .await
            .unwrap(),
        TransitionOutcome::AlreadyAnswered(_)
    ));
    let mut kinds = Vec::new();
    while kinds.len() < 2 {
        let event = tokio::time::timeout(std::time::Duration::from_secs(10), live.recv())
            .await
            .expect("an event of the other handle within 10 s")
            .unwrap();
        kinds.push(event.kind);
    }
    assert_eq!(kinds, ["interaction.created", "interaction.answered"]);
    let mut one_live = one.subscribe();
    two.append_event(
        "operator.connected",
        serde_json::json!({"session_id": "s"}),
        None,
    )
    .await
    .unwrap();
    // The other server's earlier events may still be on their way to this
    // one's subscribers (relayed after their commit, in seq order): a
    // subscriber skips what it has seen, by seq.
    let mut last = 0;
    loop {
        let event = tokio::time::timeout(std::time::Duration::from_secs(10), one_live.recv())
            .await
            .expect("woken by the other server's commit")
            .unwrap();
        assert!(event.seq > last, "seq {} after {last}", event.seq);
        last = event.seq;
        if event.kind == "operator.connected" {
            break;
        }
        assert!(
            event.kind.starts_with("interaction."),
            "only the earlier events before it: {}",
            event.kind
        );
    }
    let _ = Arc::clone(&one);
}

/// The audit entries after `seq`, as (action, actor, data).
async fn entries_after(store: &dyn Store, seq: u64) -> Vec<(String, String, serde_json::Value)> {
    store
        .audit_after(seq, 100)
        .await
        .unwrap()
        .into_iter()
        .map(|e| (e.action, e.actor, e.data))
        .collect()
}

/// Wait until `rx` is told of a change, at most `within`; how long it took.
async fn told(
    rx: &mut tokio::sync::watch::Receiver<u64>,
    within: std::time::Duration,
) -> std::time::Duration {
    let started = std::time::Instant::now();
    tokio::time::timeout(within, rx.changed())
        .await
        .unwrap_or_else(|_| panic!("told of the change within {within:?}"))
        .unwrap();
    started.elapsed()
}

/// A rotation and a removal commit with their audit entries (a refused
/// removal writes none), and every handle on the database is told of them
/// and reads the new keys.
pub async fn signing_key_changes_are_audited_and_reach_every_handle(b: &dyn Backend) {
    let one = b.open().await;
    let two = if b.many_handles() {
        Some(b.open().await)
    } else {
        None
    };
    let (k1, k2) = ("1111111111111111", "2222222222222222");
    one.init_signing_key(key(k1)).await.unwrap();
    let mut one_told = one.signing_key_changes();
    let mut two_told = two.as_ref().map(|t| t.signing_key_changes());
    let (head, _) = one.audit_head().await.unwrap();
    assert_eq!(
        one.rotate_signing_key(key(k2), "alice").await.unwrap(),
        Some(k1.to_owned())
    );
    // The rotation and its entry are one change: both there once it returns.
    assert_eq!(
        entries_after(one.as_ref(), head).await,
        [(
            "key.rotated".to_owned(),
            "alice".to_owned(),
            serde_json::json!({"kid": k2, "previous": k1})
        )]
    );
    told(&mut one_told, SIGNING_KEYS_SEEN_WITHIN).await;
    if let (Some(two), Some(rx)) = (&two, &mut two_told) {
        told(rx, SIGNING_KEYS_SEEN_WITHIN).await;
        let keys = two.signing_keys().await.unwrap();
        assert_eq!((keys[0].kid.as_str(), keys[0].active), (k2, true));
    }
    // Refused removals write nothing.
    let (head, _) = one.audit_head().await.unwrap();
    assert_eq!(
        one.remove_signing_key(k2, "alice").await.unwrap(),
        KeyRemoveOutcome::Active
    );
    assert_eq!(
        one.remove_signing_key("3333333333333333", "alice")
            .await
            .unwrap(),
        KeyRemoveOutcome::NotFound
    );
    assert!(entries_after(one.as_ref(), head).await.is_empty());
    assert_eq!(
        one.remove_signing_key(k1, "bob").await.unwrap(),
        KeyRemoveOutcome::Removed
    );
    assert_eq!(
        entries_after(one.as_ref(), head).await,
        [(
            "key.removed".to_owned(),
            "bob".to_owned(),
            serde_json::json!({"kid": k1})
        )]
    );
    told(&mut one_told, SIGNING_KEYS_SEEN_WITHIN).await;
    if let (Some(two), Some(rx)) = (&two, &mut two_told) {
        told(rx, SIGNING_KEYS_SEEN_WITHIN).await;
        let kids: Vec<_> = two
            .signing_keys()
            .await
            .unwrap()
            .into_iter()
            .map(|k| k.kid)
            .collect();
        assert_eq!(kids, [k2]);
    }
}

/// A revoked token is not found on the handle that revoked it from the
/// moment the revocation returns, and on every other handle within
/// [`TOKEN_CHANGES_SEEN_WITHIN`], however often it was looked up before
/// (a backend may keep lookups); a token made on one handle is found at
/// once on another, even right after a lookup that missed it.
pub async fn a_revoked_token_is_refused_on_every_handle_at_once(b: &dyn Backend) {
    let one = b.open().await;
    let two = if b.many_handles() {
        b.open().await
    } else {
        Arc::clone(&one)
    };
    let hash = "ab".repeat(32);
    // Missed first, then made: found at once everywhere.
    assert!(two.token_by_hash(&hash).await.unwrap().is_none());
    one.create_token(
        token("dora", Role::Worker, &hash),
        "admin",
        AlikeNames::Refuse,
    )
    .await
    .unwrap();
    for store in [&one, &two] {
        for _ in 0..3 {
            let found = store.token_by_hash(&hash).await.unwrap().unwrap();
            assert_eq!(
                (found.info.name.as_str(), found.info.role),
                ("dora", Role::Worker)
            );
        }
    }
    assert!(one.revoke_token("dora", "admin").await.unwrap());
    let revoked = std::time::Instant::now();
    assert!(
        one.token_by_hash(&hash).await.unwrap().is_none(),
        "refused where it was revoked as soon as the revocation returned"
    );
    loop {
        if two.token_by_hash(&hash).await.unwrap().is_none() {
            break;
        }
        assert!(
            revoked.elapsed() < TOKEN_CHANGES_SEEN_WITHIN,
            "still found on the other handle {:?} after the revocation",
            revoked.elapsed()
        );
        tokio::time::sleep(std::time::Duration::from_millis(2)).await;
    }
    // And it stays refused.
    for _ in 0..3 {
        assert!(two.token_by_hash(&hash).await.unwrap().is_none());
    }
    // A name made again with another secret: the new one, not the old.
    let again = "cd".repeat(32);
    two.create_token(
        token("dora", Role::Approver, &again),
        "admin",
        AlikeNames::Refuse,
    )
    .await
    .unwrap();
    assert!(one.token_by_hash(&hash).await.unwrap().is_none());
    assert_eq!(
        one.token_by_hash(&again).await.unwrap().unwrap().info.role,
        Role::Approver
    );
}
