//! The operators' relay: messages posted on one server, replied to through
//! another, resolved once against a racing withdrawal; where the operator
//! is; every server told.

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use time::OffsetDateTime;

use super::Backend;
use super::interactions::handles;
use crate::{
    OperatorReply, OperatorRequest, OperatorSignal, ResolveOutcome, Store, WithdrawOutcome,
};

fn request(req_id: &str, session: &str, reply_type: &str) -> OperatorRequest {
    OperatorRequest {
        req_id: req_id.into(),
        session_id: session.into(),
        reply_type: reply_type.into(),
        frame: json!({"type": "ask", "req_id": req_id, "question": "?"}).to_string(),
        posted_at: OffsetDateTime::now_utc(),
    }
}

fn reply(by: &str) -> OperatorReply {
    OperatorReply {
        msg: json!({"type": "answer", "req_id": "x", "answer": by}),
        by: by.into(),
    }
}

pub async fn operator_messages_resolve_once(b: &dyn Backend) {
    let store = b.open().await;
    store
        .post_operator_request(request("rq_1", "s-op", "answer"))
        .await
        .unwrap();
    store
        .post_operator_request(request("rq_2", "s-op", "hook_ack"))
        .await
        .unwrap();
    store
        .post_operator_request(request("rq_3", "s-other", "answer"))
        .await
        .unwrap();
    let pending: Vec<_> = store
        .pending_operator_requests("s-op")
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.req_id)
        .collect();
    assert_eq!(pending, ["rq_1", "rq_2"], "the session's, oldest first");
    let stored = store.operator_request("rq_1").await.unwrap().unwrap();
    let posted = request("rq_1", "s-op", "answer");
    assert_eq!(
        (&stored.session_id, &stored.reply_type, &stored.frame),
        (&posted.session_id, &posted.reply_type, &posted.frame)
    );
    assert!((stored.posted_at - posted.posted_at).abs() < time::Duration::seconds(5));
    assert_eq!(
        store
            .resolve_operator_request("s-op", "rq_1", "hook_ack", reply("a"))
            .await
            .unwrap(),
        ResolveOutcome::WrongKind("answer".into())
    );
    assert_eq!(
        store
            .resolve_operator_request("s-other", "rq_1", "answer", reply("a"))
            .await
            .unwrap(),
        ResolveOutcome::Unknown,
        "another session's operator cannot resolve it"
    );
    assert_eq!(
        store
            .resolve_operator_request("s-op", "rq_none", "answer", reply("a"))
            .await
            .unwrap(),
        ResolveOutcome::Unknown
    );
    assert!(store.operator_reply("rq_1").await.unwrap().is_none());
    assert_eq!(
        store
            .resolve_operator_request("s-op", "rq_1", "answer", reply("main"))
            .await
            .unwrap(),
        ResolveOutcome::Resolved
    );
    assert_eq!(
        store
            .resolve_operator_request("s-op", "rq_1", "answer", reply("late"))
            .await
            .unwrap(),
        ResolveOutcome::AlreadyResolved
    );
    assert_eq!(
        store.operator_reply("rq_1").await.unwrap(),
        Some(reply("main"))
    );
    assert_eq!(
        store.withdraw_operator_request("rq_1").await.unwrap(),
        WithdrawOutcome::Replied(reply("main"))
    );
    assert_eq!(
        store.withdraw_operator_request("rq_2").await.unwrap(),
        WithdrawOutcome::Withdrawn
    );
    assert_eq!(
        store.withdraw_operator_request("rq_2").await.unwrap(),
        WithdrawOutcome::Gone
    );
    assert_eq!(
        store
            .resolve_operator_request("s-op", "rq_2", "hook_ack", reply("a"))
            .await
            .unwrap(),
        ResolveOutcome::AlreadyResolved,
        "a withdrawn message is resolved"
    );
    assert!(
        store
            .pending_operator_requests("s-op")
            .await
            .unwrap()
            .is_empty()
    );
    assert!(store.operator_request("rq_2").await.unwrap().is_none());
}

pub async fn an_operator_reply_races_a_withdrawal(b: &dyn Backend) {
    let stores = handles(b).await;
    for round in 0..20 {
        let id = format!("rq_race_{round}");
        stores[0]
            .post_operator_request(request(&id, "s-race", "answer"))
            .await
            .unwrap();
        let replier = Arc::clone(&stores[round % stores.len()]);
        let waiter = Arc::clone(&stores[(round + 1) % stores.len()]);
        let (rid, wid) = (id.clone(), id.clone());
        let replied = tokio::spawn(async move {
            replier
                .resolve_operator_request("s-race", &rid, "answer", reply("op"))
                .await
                .unwrap()
        });
        let withdrawn =
            tokio::spawn(async move { waiter.withdraw_operator_request(&wid).await.unwrap() });
        let (replied, withdrawn) = (replied.await.unwrap(), withdrawn.await.unwrap());
        match (replied, withdrawn) {
            (ResolveOutcome::Resolved, WithdrawOutcome::Replied(r)) => assert_eq!(r, reply("op")),
            (ResolveOutcome::AlreadyResolved, WithdrawOutcome::Withdrawn) => {
                assert!(stores[0].operator_reply(&id).await.unwrap().is_none());
            }
            other => panic!("round {round}: not exactly one winner: {other:?}"),
        }
    }
}

pub async fn operator_presence_follows_connections(b: &dyn Backend) {
    let stores = handles(b).await;
    let (one, two) = (&stores[0], &stores[stores.len() - 1]);
    assert!(one.operator_presence("s-p").await.unwrap().is_none());
    assert!(
        one.connect_operator("s-p", "c-1", "main-ai")
            .await
            .unwrap()
            .is_none()
    );
    let replaced = two
        .connect_operator("s-p", "c-2", "other-ai")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(replaced.conn.as_deref(), Some("c-1"));
    assert_eq!(replaced.operator, "main-ai");
    assert!(
        !one.disconnect_operator("s-p", "c-1").await.unwrap(),
        "a replaced connection ending changes nothing"
    );
    let now = one.operator_presence("s-p").await.unwrap().unwrap();
    assert_eq!(
        (now.conn.as_deref(), now.operator.as_str()),
        (Some("c-2"), "other-ai")
    );
    assert!(two.disconnect_operator("s-p", "c-2").await.unwrap());
    let gone = one.operator_presence("s-p").await.unwrap().unwrap();
    assert_eq!(gone.conn, None);
    assert!(gone.since >= now.since);
}

/// Every server hears of every change, after it is made.
pub async fn operator_signals_reach_every_server(b: &dyn Backend) {
    let stores = handles(b).await;
    let listener: &Arc<dyn Store> = &stores[stores.len() - 1];
    let mut signals = listener.operator_signals();
    let actor = &stores[0];
    actor
        .post_operator_request(request("rq_s", "s-sig", "answer"))
        .await
        .unwrap();
    actor
        .connect_operator("s-sig", "c-9", "main-ai")
        .await
        .unwrap();
    actor
        .notify_operator("s-sig", "{\"type\":\"error\"}".into())
        .await
        .unwrap();
    actor
        .resolve_operator_request("s-sig", "rq_s", "answer", reply("main-ai"))
        .await
        .unwrap();
    let mut seen = Vec::new();
    while seen.len() < 4 {
        let signal = tokio::time::timeout(Duration::from_secs(10), signals.recv())
            .await
            .expect("a signal within 10 s")
            .unwrap();
        seen.push(signal);
    }
    assert_eq!(
        seen,
        [
            OperatorSignal::Posted {
                session_id: "s-sig".into(),
                req_id: "rq_s".into()
            },
            OperatorSignal::Presence {
                session_id: "s-sig".into()
            },
            OperatorSignal::Notice {
                session_id: "s-sig".into(),
                frame: "{\"type\":\"error\"}".into()
            },
            OperatorSignal::Resolved {
                session_id: "s-sig".into(),
                req_id: "rq_s".into()
            },
        ]
    );
    // And the reply is there to read on the listening server.
    assert_eq!(
        listener.operator_reply("rq_s").await.unwrap(),
        Some(reply("main-ai"))
    );
}
