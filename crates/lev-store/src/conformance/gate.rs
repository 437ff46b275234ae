//! The gate's records: idempotent decisions, asks under the pending limit,
//! grants that commit only with a winning answer, nonces spent once.

use std::sync::Arc;

use lev_protocol::api::{GateResponse, Grant};
use lev_protocol::{ApprovalScope, InteractionStatus};
use serde_json::json;
use time::OffsetDateTime;

use super::Backend;
use super::fixtures::{answer, answer_tool_approval, tool_approval};
use super::interactions::handles;
use crate::{
    AuditRecord, GateRecordOutcome, GateSigner, GateStore, NewGateDecision, NewGrant, NonceOutcome,
    TransitionOutcome,
};

fn decision(
    request_id: &str,
    call: serde_json::Value,
    ask: Option<&str>,
) -> (NewGateDecision, GateSigner) {
    let (decision, interaction) = match ask {
        Some(id) => (
            GateResponse::Ask {
                interaction_id: id.into(),
            },
            Some(tool_approval(id, "s-g")),
        ),
        None => (
            GateResponse::Deny {
                reason: "no".into(),
                approval: None,
            },
            None,
        ),
    };
    (
        NewGateDecision {
            session_id: "s-g".into(),
            request_id: request_id.into(),
            call,
            created_at: OffsetDateTime::now_utc(),
            interaction,
            audit: AuditRecord {
                action: "gate.decided".into(),
                actor: "worker".into(),
                data: json!({"request_id": request_id}),
            },
        },
        crate::decided(decision),
    )
}

/// Record a decision and its signer.
#[async_trait::async_trait]
trait RecordPair {
    async fn record_pair(
        &self,
        d: (NewGateDecision, GateSigner),
    ) -> crate::Result<GateRecordOutcome>;
}

#[async_trait::async_trait]
impl<T: GateStore + ?Sized> RecordPair for T {
    async fn record_pair(
        &self,
        (new, sign): (NewGateDecision, GateSigner),
    ) -> crate::Result<GateRecordOutcome> {
        self.record_gate_decision(new, sign).await
    }
}

pub async fn gate_decisions_are_idempotent_by_request(b: &dyn Backend) {
    let stores = handles(b).await;
    let call = json!({"tool_name": "shell", "args": {"argv": ["ls"]}});
    // Concurrent retries of one ask: one interaction, one record.
    let mut tasks = Vec::new();
    for i in 0..12 {
        let store = Arc::clone(&stores[i % stores.len()]);
        let call = call.clone();
        tasks.push(tokio::spawn(async move {
            store
                .record_pair(decision("rq-1", call, Some("ir_g1")))
                .await
                .unwrap()
        }));
    }
    let mut recorded = 0;
    for t in tasks {
        match t.await.unwrap() {
            GateRecordOutcome::Recorded { interaction, .. } => {
                assert!(interaction.is_some(), "an ask opens its interaction");
                recorded += 1;
            }
            GateRecordOutcome::Existing(existing) => assert_eq!(existing.call, call),
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(recorded, 1);
    // The same request id with another call: a conflict, nothing written.
    let other = json!({"tool_name": "shell", "args": {"argv": ["rm", "-rf", "/"]}});
    assert!(matches!(
        stores[0]
            .record_pair(decision("rq-1", other, None))
            .await
            .unwrap(),
        GateRecordOutcome::Conflict(_)
    ));
    // Keys compared as JSON values, not text.
    let reordered = json!({"args": {"argv": ["ls"]}, "tool_name": "shell"});
    assert!(matches!(
        stores[0]
            .record_pair(decision("rq-1", reordered, Some("ir_g1")))
            .await
            .unwrap(),
        GateRecordOutcome::Existing(_)
    ));
    let found = stores[0]
        .gate_call_by_interaction("ir_g1")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(found.request_id, "rq-1");
    assert!(
        stores[0]
            .gate_call_by_interaction("ir_none")
            .await
            .unwrap()
            .is_none()
    );
    // A decision without an interaction, and its replay.
    let deny = || decision("rq-2", json!({"tool_name": "x"}), None);
    assert!(matches!(
        stores[0].record_pair(deny()).await.unwrap(),
        GateRecordOutcome::Recorded {
            interaction: None,
            ..
        }
    ));
    assert!(matches!(
        stores[0].record_pair(deny()).await.unwrap(),
        GateRecordOutcome::Existing(_)
    ));
    let created = stores[0]
        .events_after(0, 100)
        .await
        .unwrap()
        .into_iter()
        .filter(|e| e.kind == "interaction.created")
        .count();
    assert_eq!(created, 1, "retries open no second interaction");
    let gate_audits = stores[0]
        .audit_after(0, 100)
        .await
        .unwrap()
        .into_iter()
        .filter(|e| e.action == "gate.decided")
        .count();
    assert_eq!(gate_audits, 2, "one audit entry per recorded decision");
}

pub async fn gate_asks_respect_the_pending_limit(b: &dyn Backend) {
    let stores = handles(b).await;
    let mut tasks = Vec::new();
    for i in 0..20 {
        let store = Arc::clone(&stores[i % stores.len()]);
        tasks.push(tokio::spawn(async move {
            let mut new = decision(
                &format!("rq-{i}"),
                json!({"i": i}),
                Some(&format!("ir_p{i}")),
            );
            if let Some(interaction) = &mut new.0.interaction {
                interaction.max_pending_per_session = 5;
            }
            store.record_pair(new).await.unwrap()
        }));
    }
    let (mut recorded, mut refused) = (0, 0);
    for t in tasks {
        match t.await.unwrap() {
            GateRecordOutcome::Recorded { .. } => recorded += 1,
            GateRecordOutcome::TooManyPending => refused += 1,
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!((recorded, refused), (5, 15));
    assert_eq!(stores[0].count_pending().await.unwrap(), 5);
}

fn grant(
    id: &str,
    interaction_id: &str,
    scope: ApprovalScope,
    conversation: Option<&str>,
) -> Grant {
    Grant {
        id: id.into(),
        scope,
        caller: "alice".into(),
        conversation_id: conversation.map(str::to_owned),
        sandbox_mode: "read-only".into(),
        tool_name: "shell".into(),
        covered_capabilities: vec!["exec".into()],
        grant_args: None,
        approver: "bob".into(),
        interaction_id: Some(interaction_id.into()),
        created_at: OffsetDateTime::now_utc(),
    }
}

pub async fn grants_commit_only_with_the_winning_answer(b: &dyn Backend) {
    let store = b.open().await;
    store
        .create_interaction(tool_approval("ir_t1", "s-g"))
        .await
        .unwrap();
    let first = NewGrant {
        grant: grant("gr_1", "ir_t1", ApprovalScope::Session, Some("conv-1")),
        actor: "bob".into(),
    };
    let late = NewGrant {
        grant: grant("gr_2", "ir_t1", ApprovalScope::Always, None),
        actor: "carol".into(),
    };
    assert!(matches!(
        answer_tool_approval(&*store, answer("ir_t1", "yes", "bob"), Some(first)).await,
        TransitionOutcome::Done(_)
    ));
    assert!(matches!(
        answer_tool_approval(&*store, answer("ir_t1", "yes too", "carol"), Some(late)).await,
        TransitionOutcome::AlreadyAnswered(_)
    ));
    let grants = store.list_grants().await.unwrap();
    assert_eq!(
        grants.iter().map(|g| g.id.as_str()).collect::<Vec<_>>(),
        ["gr_1"],
        "the loser's grant is not kept"
    );
    // Session grants hold in their conversation only; always grants everywhere.
    let found = |conv: &str| {
        let store = Arc::clone(&store);
        let conv = conv.to_owned();
        async move {
            store
                .grants_for("alice", &conv, "read-only", "shell")
                .await
                .unwrap()
                .into_iter()
                .map(|g| g.id)
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(found("conv-1").await, ["gr_1"]);
    assert!(found("conv-2").await.is_empty());
    assert!(
        store
            .grants_for("mallory", "conv-1", "read-only", "shell")
            .await
            .unwrap()
            .is_empty()
    );
    assert!(
        store
            .grants_for("alice", "conv-1", "danger", "shell")
            .await
            .unwrap()
            .is_empty()
    );
    store
        .create_interaction(tool_approval("ir_t2", "s-g"))
        .await
        .unwrap();
    let always = NewGrant {
        grant: grant("gr_3", "ir_t2", ApprovalScope::Always, None),
        actor: "bob".into(),
    };
    answer_tool_approval(&*store, answer("ir_t2", "ok", "bob"), Some(always)).await;
    assert_eq!(found("conv-2").await, ["gr_3"]);
    let revoked = store.revoke_grant("gr_3", "admin").await.unwrap().unwrap();
    assert_eq!(revoked.id, "gr_3");
    assert!(store.revoke_grant("gr_3", "admin").await.unwrap().is_none());
    assert!(found("conv-2").await.is_empty());
    let view = store.get_interaction("ir_t1").await.unwrap().unwrap();
    assert_eq!(view.request.status, InteractionStatus::Answered);
    let actions: Vec<_> = store
        .audit_after(0, 100)
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.action)
        .collect();
    assert!(actions.contains(&"grant.revoked".to_owned()), "{actions:?}");
}

/// A nonce is remembered by its bytes: spent in the URL-safe spelling lev
/// signs, it is spent in the standard alphabet, padded, over-padded, and
/// with stray bits in its last character (decoders that ignore them read the
/// same bytes), across a restart; a different nonce is not.
pub async fn nonces_are_spent_once_in_any_spelling(b: &dyn Backend) {
    let store = b.open().await;
    // 16 bytes whose base64 holds both alphabet-specific characters.
    let bytes: Vec<u8> = (0..16u8).map(|i| 0xfb ^ i.wrapping_mul(37)).collect();
    let url = lev_approval::encode_base64url(&bytes);
    let standard = lev_approval::encode_base64(&bytes);
    assert!(
        url.contains(['-', '_']) && standard.contains(['+', '/']),
        "{url} {standard}"
    );
    // The last of 22 characters carries 4 unused bits: set them.
    const ALPHABET: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let last = url.chars().last().and_then(|c| ALPHABET.find(c)).unwrap();
    let stray = format!(
        "{}{}",
        &url[..url.len() - 1],
        ALPHABET.chars().nth(last | 0b1111).unwrap()
    );
    assert_eq!(
        store.consume_nonce(&url, "w").await.unwrap(),
        NonceOutcome::Spent
    );
    let spellings = [
        standard.clone(),
        standard.trim_end_matches('=').to_owned(),
        format!("{url}=="),
        url.replace('-', "+"),
        stray,
    ];
    for spelling in &spellings {
        assert_eq!(
            store.consume_nonce(spelling, "w").await.unwrap(),
            NonceOutcome::AlreadySpent,
            "{spelling} spells the spent {url}"
        );
    }
    drop(store);
    let store = b.open().await;
    assert_eq!(
        store.consume_nonce(&standard, "w").await.unwrap(),
        NonceOutcome::AlreadySpent,
        "across a restart"
    );
    let other = lev_approval::encode_base64(&[7u8; 16]);
    assert_eq!(
        store.consume_nonce(&other, "w").await.unwrap(),
        NonceOutcome::Spent
    );
    assert_eq!(
        store
            .consume_nonce(&lev_approval::encode_base64url(&[7u8; 16]), "w")
            .await
            .unwrap(),
        NonceOutcome::AlreadySpent
    );
}

pub async fn nonces_are_spent_once(b: &dyn Backend) {
    let stores = handles(b).await;
    let mut tasks = Vec::new();
    for i in 0..24 {
        let store = Arc::clone(&stores[i % stores.len()]);
        tasks.push(tokio::spawn(async move {
            store
                .consume_nonce("nonce-1", &format!("w{i}"))
                .await
                .unwrap()
        }));
    }
    let mut spent = 0;
    for t in tasks {
        if t.await.unwrap() == NonceOutcome::Spent {
            spent += 1;
        }
    }
    assert_eq!(spent, 1);
    drop(stores);
    let store = b.open().await;
    assert_eq!(
        store.consume_nonce("nonce-1", "w").await.unwrap(),
        NonceOutcome::AlreadySpent,
        "spent for ever, across a restart"
    );
    assert_eq!(
        store.consume_nonce("nonce-2", "w").await.unwrap(),
        NonceOutcome::Spent
    );
}

/// An approval signed by a test key: `approved`, for `caller`, its nonce.
fn approval(approved: bool, caller: &str, nonce: &str) -> lev_protocol::Envelope {
    let now = OffsetDateTime::now_utc();
    let payload = lev_approval::ApprovalPayload {
        v: 1,
        turn_id: String::new(),
        request_id: "rq".into(),
        tool_name: "shell".into(),
        args_json: "{}".into(),
        modified_args_json: String::new(),
        approved,
        approved_for_session: false,
        covered_capabilities: vec![],
        caller: caller.into(),
        approver: "policy".into(),
        sandbox_mode: String::new(),
        reason: String::new(),
        injected_context: String::new(),
        conversation_id: String::new(),
        nonce: nonce.into(),
        issued_at: now,
        expires_at: now + time::Duration::minutes(10),
        votes: None,
    };
    lev_approval::sign_payload(&payload, &lev_approval::SigningKeyPair::from_seed(&[7; 32]))
        .unwrap()
}

pub async fn approvals_note_whose_nonce_they_carry(b: &dyn Backend) {
    let store = b.open().await;
    // A gate's allow.
    let mut allow = decision("rq-n1", json!({"n": 1}), None);
    allow.1 = crate::decided(GateResponse::Allow {
        approval: approval(true, "alice", "nonce-allow"),
    });
    store.record_pair(allow).await.unwrap();
    // A gate's deny: its nonce guards nothing.
    let mut deny = decision("rq-n2", json!({"n": 2}), None);
    deny.1 = crate::decided(GateResponse::Deny {
        reason: "no".into(),
        approval: Some(approval(false, "alice", "nonce-deny")),
    });
    store.record_pair(deny).await.unwrap();
    // A person's answer to a tool approval in another session.
    store
        .create_interaction(tool_approval("ir_n1", "s-other"))
        .await
        .unwrap();
    let mut answered = answer("ir_n1", "ok", "ann");
    answered.response =
        lev_protocol::InteractionResponse::approval("ir_n1", true, ApprovalScope::Once);
    answered.approval = Some(approval(true, "bob", "nonce-answer"));
    assert!(matches!(
        answer_tool_approval(&*store, answered, None).await,
        TransitionOutcome::Done(_)
    ));
    // Noted in the same transactions, for every handle.
    drop(store);
    let store = b.open().await;
    let owner = |session: &str, caller: &str| {
        Some(crate::NonceOwner {
            session_id: session.into(),
            caller: caller.into(),
        })
    };
    assert_eq!(
        store.nonce_owner("nonce-allow").await.unwrap(),
        owner("s-g", "alice")
    );
    assert_eq!(
        store.nonce_owner("nonce-answer").await.unwrap(),
        owner("s-other", "bob")
    );
    assert_eq!(store.nonce_owner("nonce-deny").await.unwrap(), None);
    assert_eq!(store.nonce_owner("nonce-unknown").await.unwrap(), None);
}

/// A repeat of a gate call signs nothing: the signer runs once, for the
/// call that records, and every repeat (concurrent, on any server) answers
/// with the envelope first recorded, byte for byte.
pub async fn a_repeated_gate_call_signs_nothing_new(b: &dyn Backend) {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let stores = handles(b).await;
    let signed = Arc::new(AtomicUsize::new(0));
    let call = json!({"tool_name": "shell", "args": {"argv": ["ls"]}});
    let mut tasks = Vec::new();
    for i in 0..12 {
        let store = Arc::clone(&stores[i % stores.len()]);
        let (new, _) = decision("rq-s", call.clone(), None);
        let signed = Arc::clone(&signed);
        let sign: GateSigner = Box::new(move |audit: &mut AuditRecord| {
            let n = signed.fetch_add(1, Ordering::SeqCst);
            let nonce = format!("nonce-{i}-{n}");
            if let Some(data) = audit.data.as_object_mut() {
                data.insert("nonce".into(), json!(nonce));
            }
            Ok(GateResponse::Allow {
                approval: approval(true, "alice", &nonce),
            })
        });
        tasks.push(tokio::spawn(async move {
            store.record_gate_decision(new, sign).await.unwrap()
        }));
    }
    let mut first = None;
    let mut answers = Vec::new();
    for t in tasks {
        match t.await.unwrap() {
            GateRecordOutcome::Recorded { record, .. } => {
                assert!(
                    first.replace(record.decision.clone()).is_none(),
                    "one records"
                );
                answers.push(record.decision);
            }
            GateRecordOutcome::Existing(existing) => answers.push(existing.decision),
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(
        signed.load(Ordering::SeqCst),
        1,
        "one signature for 12 calls"
    );
    let first = serde_json::to_string(&first.expect("one call records")).unwrap();
    for answer in answers {
        assert_eq!(serde_json::to_string(&answer).unwrap(), first);
    }
    // A later repeat on a reopened handle: still no signing.
    drop(stores);
    let store = b.open().await;
    let (new, _) = decision("rq-s", call, None);
    let never: GateSigner = Box::new(|_| panic!("a repeat must not sign"));
    match store.record_gate_decision(new, never).await.unwrap() {
        GateRecordOutcome::Existing(existing) => {
            assert_eq!(serde_json::to_string(&existing.decision).unwrap(), first);
        }
        other => panic!("unexpected {other:?}"),
    }
    // The one audit entry carries the one nonce signed.
    let nonces: Vec<_> = store
        .audit_after(0, 100)
        .await
        .unwrap()
        .into_iter()
        .filter(|e| e.action == "gate.decided")
        .map(|e| e.data["nonce"].clone())
        .collect();
    assert_eq!(nonces.len(), 1);
    let nonce = nonces[0].as_str().expect("the audit entry names the nonce");
    assert!(store.nonce_owner(nonce).await.unwrap().is_some());
}
