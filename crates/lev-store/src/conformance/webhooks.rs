//! Webhook endpoints and the outbox: deliveries commit with their events,
//! filtered per endpoint, survive a reopen, are claimed by one handle at a
//! time, and keep every attempt; reminders are recorded once.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use time::OffsetDateTime;

use super::Backend;
use super::fixtures::{answer, free_text};
use super::interactions::handles;
use crate::webhooks::delivery_body;
use crate::{
    AttemptOutcome, DeliveryAttempt, DeliveryState, Endpoint, EndpointKind, Store,
    TransitionOutcome,
};

fn endpoint(id: &str, events: &[&str]) -> Endpoint {
    Endpoint {
        id: id.to_owned(),
        kind: EndpointKind::Http,
        url: format!("http://127.0.0.1:9/{id}"),
        events: events.iter().map(|e| (*e).to_owned()).collect(),
        secret: format!("secret-{id}"),
        created_by: "admin".into(),
        created_at: OffsetDateTime::now_utc(),
        disabled_at: None,
        disabled_reason: None,
    }
}

fn far() -> OffsetDateTime {
    OffsetDateTime::now_utc() + Duration::from_secs(3600)
}

async fn claim_all(store: &Arc<dyn Store>) -> Vec<crate::DueDelivery> {
    let now = OffsetDateTime::now_utc();
    store
        .claim_deliveries(now, now + Duration::from_secs(60), 1000)
        .await
        .unwrap()
}

fn attempt(id: &str, status: Option<u16>, outcome: AttemptOutcome) -> DeliveryAttempt {
    DeliveryAttempt {
        delivery_id: id.to_owned(),
        at: OffsetDateTime::now_utc(),
        status,
        error: status.is_none().then(|| "connection refused".to_owned()),
        duration_ms: 3,
        outcome,
    }
}

pub async fn deliveries_commit_with_their_events(b: &dyn Backend) {
    {
        let store = b.open().await;
        // Before any endpoint: no delivery, ever.
        store.create_interaction(free_text("ir_w0")).await.unwrap();
        store
            .put_endpoint(endpoint("wh_created", &["interaction.created"]))
            .await
            .unwrap();
        store.put_endpoint(endpoint("wh_all", &[])).await.unwrap();
        assert_eq!(store.endpoints().await.unwrap().len(), 2);
        store.create_interaction(free_text("ir_w1")).await.unwrap();
        assert!(matches!(
            store
                .answer_interaction(answer("ir_w1", "yes", "alice"))
                .await
                .unwrap(),
            TransitionOutcome::Done(_)
        ));
        // A rolled-back change writes nothing: a second answer loses.
        assert!(matches!(
            store
                .answer_interaction(answer("ir_w1", "no", "bob"))
                .await
                .unwrap(),
            TransitionOutcome::AlreadyAnswered(_)
        ));
    }
    // Reopened (a restart): the outbox is still there.
    let store = b.open().await;
    let created = store.deliveries("wh_created", 100).await.unwrap();
    let kinds: Vec<&str> = created.iter().map(|d| d.event_kind.as_str()).collect();
    assert_eq!(kinds, ["interaction.created"], "filtered to created");
    let all = store.deliveries("wh_all", 100).await.unwrap();
    let kinds: Vec<&str> = all.iter().map(|d| d.event_kind.as_str()).collect();
    assert_eq!(
        kinds,
        ["interaction.answered", "interaction.created"],
        "newest first, one per event"
    );
    assert!(
        all.iter()
            .all(|d| d.state == DeliveryState::Pending && d.attempts.is_empty())
    );
    // The body: the event's kind, a time, and its data.
    let claimed = claim_all(&store).await;
    assert_eq!(claimed.len(), 3);
    let ids: HashSet<&str> = claimed.iter().map(|d| d.id.as_str()).collect();
    assert_eq!(ids.len(), 3, "every delivery has its own id");
    for d in &claimed {
        assert!(d.id.starts_with("msg_"), "{}", d.id);
        let body: Value = serde_json::from_str(&d.body).unwrap();
        assert_eq!(body["type"], Value::from(d.event_kind.as_str()));
        assert_eq!(body["data"]["request"]["id"], "ir_w1");
        let ts = body["timestamp"].as_str().unwrap();
        OffsetDateTime::parse(ts, &time::format_description::well_known::Rfc3339).unwrap();
        let data = serde_json::to_string(&body["data"]).unwrap();
        assert_eq!(
            serde_json::from_str::<Value>(&delivery_body(&d.event_kind, ts, &data)).unwrap(),
            body
        );
        let expected_secret = format!("secret-{}", d.endpoint_id);
        assert_eq!(d.secret, expected_secret);
        assert_eq!(d.attempts, 0);
    }
}

pub async fn deliveries_are_claimed_once_and_keep_their_attempts(b: &dyn Backend) {
    let stores = handles(b).await;
    let store = &stores[0];
    store.put_endpoint(endpoint("wh_1", &[])).await.unwrap();
    for i in 0..20 {
        store
            .create_interaction(free_text(&format!("ir_c{i}")))
            .await
            .unwrap();
    }
    // Claims from every handle at once: each delivery goes to one claim.
    let mut tasks = Vec::new();
    for i in 0..8 {
        let store = Arc::clone(&stores[i % stores.len()]);
        tasks.push(tokio::spawn(async move {
            let now = OffsetDateTime::now_utc();
            store
                .claim_deliveries(now, now + Duration::from_secs(60), 3)
                .await
                .unwrap()
        }));
    }
    let mut seen = HashSet::new();
    for t in tasks {
        for d in t.await.unwrap() {
            assert!(seen.insert(d.id.clone()), "{} claimed twice", d.id);
        }
    }
    let rest = claim_all(store).await;
    for d in &rest {
        assert!(seen.insert(d.id.clone()), "{} claimed twice", d.id);
    }
    assert_eq!(seen.len(), 20, "every delivery claimed once");
    // Leased: nothing is due until the lease runs out.
    assert!(claim_all(store).await.is_empty());
    let next = store.next_delivery_at().await.unwrap().unwrap();
    assert!(next > OffsetDateTime::now_utc() + Duration::from_secs(30));

    let ids: Vec<String> = seen.into_iter().collect();
    // One delivered, one retried (due now), one given up.
    store
        .record_attempt(attempt(&ids[0], Some(200), AttemptOutcome::Delivered))
        .await
        .unwrap();
    store
        .record_attempt(attempt(
            &ids[1],
            None,
            AttemptOutcome::Retry(OffsetDateTime::now_utc()),
        ))
        .await
        .unwrap();
    store
        .record_attempt(attempt(&ids[2], Some(400), AttemptOutcome::GiveUp))
        .await
        .unwrap();
    let again = claim_all(store).await;
    assert_eq!(again.len(), 1, "only the retry is due: {again:?}");
    assert_eq!(again[0].id, ids[1]);
    assert_eq!(again[0].attempts, 1);
    let later = far();
    store
        .record_attempt(attempt(&ids[1], Some(503), AttemptOutcome::Retry(later)))
        .await
        .unwrap();

    let log = stores[stores.len() - 1]
        .deliveries("wh_1", 100)
        .await
        .unwrap();
    assert_eq!(log.len(), 20);
    let by_id = |id: &str| log.iter().find(|d| d.id == id).unwrap();
    assert_eq!(by_id(&ids[0]).state, DeliveryState::Delivered);
    assert_eq!(by_id(&ids[0]).attempts[0].status, Some(200));
    assert_eq!(by_id(&ids[2]).state, DeliveryState::Failed);
    let retried = by_id(&ids[1]);
    assert_eq!(retried.state, DeliveryState::Pending);
    assert_eq!(retried.attempts.len(), 2);
    assert_eq!(retried.attempts[0].status, None);
    assert_eq!(
        retried.attempts[0].error.as_deref(),
        Some("connection refused")
    );
    assert_eq!(retried.attempts[1].status, Some(503));
    let next = retried.next_attempt_at.unwrap();
    assert!((next - later).abs() < time::Duration::seconds(1));
    assert!(by_id(&ids[0]).next_attempt_at.is_none());

    // Pruning keeps pending deliveries.
    let pruned = store.prune_deliveries(far()).await.unwrap();
    assert_eq!(pruned, 2);
    assert_eq!(store.deliveries("wh_1", 100).await.unwrap().len(), 18);
}

pub async fn a_gone_endpoint_is_disabled_and_a_deleted_one_forgotten(b: &dyn Backend) {
    let store = b.open().await;
    store.put_endpoint(endpoint("wh_gone", &[])).await.unwrap();
    store.put_endpoint(endpoint("wh_del", &[])).await.unwrap();
    store.create_interaction(free_text("ir_g1")).await.unwrap();
    let claimed = claim_all(&store).await;
    assert_eq!(claimed.len(), 2);
    let gone = claimed.iter().find(|d| d.endpoint_id == "wh_gone").unwrap();
    store
        .record_attempt(attempt(
            &gone.id,
            Some(410),
            AttemptOutcome::Disable("the receiver answered 410 Gone".into()),
        ))
        .await
        .unwrap();
    let endpoints = store.endpoints().await.unwrap();
    let e = endpoints.iter().find(|e| e.id == "wh_gone").unwrap();
    assert!(e.disabled_at.is_some());
    assert_eq!(
        e.disabled_reason.as_deref(),
        Some("the receiver answered 410 Gone")
    );
    // A disabled endpoint gets no new deliveries.
    store.create_interaction(free_text("ir_g2")).await.unwrap();
    assert_eq!(store.deliveries("wh_gone", 100).await.unwrap().len(), 1);
    assert_eq!(store.deliveries("wh_del", 100).await.unwrap().len(), 2);
    // Put again: enabled again.
    store.put_endpoint(endpoint("wh_gone", &[])).await.unwrap();
    assert!(
        store.endpoints().await.unwrap()[0].disabled_at.is_none(),
        "re-put enables"
    );
    assert!(store.delete_endpoint("wh_del", "admin").await.unwrap());
    assert!(!store.delete_endpoint("wh_del", "admin").await.unwrap());
    assert!(store.deliveries("wh_del", 100).await.unwrap().is_empty());
    // Recording an attempt for a deleted delivery changes nothing.
    let del = claimed.iter().find(|d| d.endpoint_id == "wh_del").unwrap();
    store
        .record_attempt(attempt(&del.id, Some(200), AttemptOutcome::Delivered))
        .await
        .unwrap();
    assert!(store.disable_endpoint("wh_gone", "paused").await.unwrap());
    assert!(!store.disable_endpoint("wh_gone", "paused").await.unwrap());
    assert!(
        claim_all(&store).await.is_empty(),
        "disabled endpoints wait"
    );
    // Audited.
    let audit = store.audit_after(0, 1000).await.unwrap();
    let actions: Vec<&str> = audit.iter().map(|e| e.action.as_str()).collect();
    for action in ["webhook.created", "webhook.disabled", "webhook.deleted"] {
        assert!(actions.contains(&action), "{action} in {actions:?}");
    }
    // Message refs.
    assert_eq!(store.message_ref("wh_gone", "ir_g1").await.unwrap(), None);
    store
        .set_message_ref("wh_gone", "ir_g1", "C1/123.456")
        .await
        .unwrap();
    store
        .set_message_ref("wh_gone", "ir_g1", "C1/123.457")
        .await
        .unwrap();
    assert_eq!(
        store
            .message_ref("wh_gone", "ir_g1")
            .await
            .unwrap()
            .as_deref(),
        Some("C1/123.457")
    );
}

pub async fn reminders_are_recorded_once_and_reach_the_outbox(b: &dyn Backend) {
    let stores = handles(b).await;
    let store = &stores[0];
    store
        .put_endpoint(endpoint("wh_r", &["interaction.reminder"]))
        .await
        .unwrap();
    store.create_interaction(free_text("ir_r1")).await.unwrap();
    let mut tasks = Vec::new();
    for i in 0..6 {
        let store = Arc::clone(&stores[i % stores.len()]);
        tasks.push(tokio::spawn(async move {
            store
                .remind("ir_r1", 1, json!({"id": "ir_r1", "n": 1}))
                .await
                .unwrap()
        }));
    }
    let mut won = 0;
    for t in tasks {
        won += usize::from(t.await.unwrap());
    }
    assert_eq!(won, 1, "reminder 1 recorded once");
    assert!(store.remind("ir_r1", 2, json!({"n": 2})).await.unwrap());
    assert!(
        !store.remind("ir_nope", 1, json!({})).await.unwrap(),
        "no such interaction"
    );
    store
        .answer_interaction(answer("ir_r1", "done", "alice"))
        .await
        .unwrap();
    assert!(
        !store.remind("ir_r1", 3, json!({})).await.unwrap(),
        "answered: no reminder"
    );
    let log = store.deliveries("wh_r", 100).await.unwrap();
    assert_eq!(log.len(), 2);
    assert!(log.iter().all(|d| d.event_kind == "interaction.reminder"));
    let events = store.events_after(0, 1000).await.unwrap();
    assert_eq!(
        events
            .iter()
            .filter(|e| e.kind == "interaction.reminder")
            .count(),
        2
    );
}
