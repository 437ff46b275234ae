//! Votes on tool approvals, people's keys and the quorum's escalation
//! (SPEC section 13).

use std::sync::Arc;

use lev_protocol::api::PersonJwk;
use lev_protocol::{ApprovalScope, InteractionResponse, InteractionStatus, Vote};
use serde_json::json;
use time::OffsetDateTime;

use super::Backend;
use super::fixtures::tool_approval;
use super::interactions::handles;
use crate::{
    AlikeNames, NewAnswer, NewPersonKey, NewVote, PersonKeyOutcome, Store, TransitionOutcome,
    VoteAuthority, VoteOutcome,
};

fn vote(id: &str, voter: &str, approved: bool, seen: &[Vote]) -> NewVote {
    let response: lev_protocol::StoredResponse = if approved {
        InteractionResponse::approval(id, true, ApprovalScope::Once)
    } else {
        InteractionResponse::deny_with_feedback(id, "not now")
    };
    NewVote {
        id: id.into(),
        vote: Vote {
            voter: voter.into(),
            approved,
            at: OffsetDateTime::now_utc(),
            signed: false,
            response,
            envelope: None,
        },
        seen_votes: seen.to_vec(),
        authority: VoteAuthority::default(),
        audit: Default::default(),
        decision: None,
    }
}

fn deciding(mut v: NewVote) -> NewVote {
    v.decision = Some((
        NewAnswer {
            id: v.id.clone(),
            response: v.vote.response.clone(),
            approval: None,
            answered_by: v.vote.voter.clone(),
            answered_at: v.vote.at,
            audit: Default::default(),
        },
        None,
    ));
    v
}

fn voters(v: &lev_protocol::api::InteractionView) -> Vec<&str> {
    v.request.votes.iter().map(|v| v.voter.as_str()).collect()
}

pub async fn votes_count_once_each_against_the_votes_seen(b: &dyn Backend) {
    let store = b.open().await;
    store
        .create_interaction(tool_approval("ir_v1", "s-v"))
        .await
        .unwrap();
    let VoteOutcome::Recorded(view) = store
        .cast_vote(vote("ir_v1", "ann", true, &[]))
        .await
        .unwrap()
    else {
        panic!("ann's vote is recorded")
    };
    assert_eq!(voters(&view), ["ann"]);
    assert_eq!(view.request.status, InteractionStatus::Pending);
    let seen = view.request.votes.clone();
    // The same person twice, and a vote counted against stale votes.
    assert!(matches!(
        store
            .cast_vote(vote("ir_v1", "ann", true, &seen))
            .await
            .unwrap(),
        VoteOutcome::AlreadyVoted(_)
    ));
    let VoteOutcome::Stale(now) = store
        .cast_vote(vote("ir_v1", "bob", true, &[]))
        .await
        .unwrap()
    else {
        panic!("bob counted no votes, there is one")
    };
    assert_eq!(voters(&now), ["ann"]);
    // As many votes as there are, but not those: stale too.
    let mut other = seen.clone();
    other[0].voter = "zed".into();
    assert!(matches!(
        store
            .cast_vote(vote("ir_v1", "bob", true, &other))
            .await
            .unwrap(),
        VoteOutcome::Stale(_)
    ));
    // The vote that decides commits the answer with it.
    let VoteOutcome::Recorded(decided) = store
        .cast_vote(deciding(vote("ir_v1", "bob", true, &seen)))
        .await
        .unwrap()
    else {
        panic!("bob's vote decides")
    };
    assert_eq!(decided.request.status, InteractionStatus::Answered);
    assert_eq!(decided.request.answered_by.as_deref(), Some("bob"));
    assert_eq!(voters(&decided), ["ann", "bob"]);
    assert!(matches!(
        store
            .cast_vote(vote("ir_v1", "carol", true, &decided.request.votes))
            .await
            .unwrap(),
        VoteOutcome::Closed(TransitionOutcome::AlreadyAnswered(_))
    ));
    assert!(matches!(
        store
            .cast_vote(vote("ir_nope", "carol", true, &[]))
            .await
            .unwrap(),
        VoteOutcome::Closed(TransitionOutcome::NotFound)
    ));
    // Each vote has its event and its audit entry, before the answer's.
    let kinds: Vec<String> = store
        .events_after(0, 100)
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.kind)
        .collect();
    assert_eq!(
        kinds,
        [
            "interaction.created",
            "interaction.voted",
            "interaction.voted",
            "interaction.answered"
        ]
    );
    let audit: Vec<(String, String)> = store
        .audit_after(0, 100)
        .await
        .unwrap()
        .into_iter()
        .map(|e| (e.action, e.actor))
        .collect();
    let voted: Vec<&(String, String)> = audit
        .iter()
        .filter(|(a, _)| a == "interaction.voted")
        .collect();
    assert_eq!(
        voted
            .iter()
            .map(|(_, who)| who.as_str())
            .collect::<Vec<_>>(),
        ["ann", "bob"]
    );
    // The votes are stored: another handle (or a restart) reads them.
    drop(store);
    let store = b.open().await;
    let view = store.get_interaction("ir_v1").await.unwrap().unwrap();
    assert_eq!(voters(&view), ["ann", "bob"]);
    assert!(view.request.votes.iter().all(|v| v.approved && !v.signed));
}

pub async fn concurrent_votes_never_count_the_same_votes(b: &dyn Backend) {
    let stores = handles(b).await;
    stores[0]
        .create_interaction(tool_approval("ir_v2", "s-v"))
        .await
        .unwrap();
    // Eight people vote at once, each having seen no vote: one is recorded,
    // every other is told to count again. Then each recounts until in.
    let mut tasks = Vec::new();
    for i in 0..8 {
        let store: Arc<dyn Store> = Arc::clone(&stores[i % stores.len()]);
        tasks.push(tokio::spawn(async move {
            let voter = format!("p{i}");
            let first = store
                .cast_vote(vote("ir_v2", &voter, true, &[]))
                .await
                .unwrap();
            let first_in = matches!(first, VoteOutcome::Recorded(_));
            let mut outcome = first;
            while let VoteOutcome::Stale(view) = outcome {
                outcome = store
                    .cast_vote(vote("ir_v2", &voter, true, &view.request.votes))
                    .await
                    .unwrap();
            }
            assert!(matches!(outcome, VoteOutcome::Recorded(_)), "{outcome:?}");
            first_in
        }));
    }
    let mut first_in = 0;
    for t in tasks {
        first_in += usize::from(t.await.unwrap());
    }
    assert_eq!(first_in, 1, "exactly one vote counted the empty list");
    let view = stores[0].get_interaction("ir_v2").await.unwrap().unwrap();
    let mut names = voters(&view);
    names.sort_unstable();
    assert_eq!(names, ["p0", "p1", "p2", "p3", "p4", "p5", "p6", "p7"]);
}

fn key(x: u8) -> PersonJwk {
    PersonJwk {
        kty: "OKP".into(),
        crv: "Ed25519".into(),
        x: format!("key-{x}"),
        y: None,
        kid: String::new(),
        alg: Some("EdDSA".into()),
        use_: Some("sig".into()),
        rp_id: None,
        credential_id: None,
    }
}

fn register(person: &str, x: u8, max: usize) -> NewPersonKey {
    NewPersonKey {
        person: person.into(),
        jwk: key(x),
        fingerprint: format!("fp-{x}"),
        max_keys: max,
        actor: person.into(),
        at: OffsetDateTime::now_utc(),
    }
}

async fn kids(store: &dyn Store, person: Option<&str>) -> Vec<String> {
    store
        .person_keys(person)
        .await
        .unwrap()
        .into_iter()
        .map(|k| k.jwk.kid)
        .collect()
}

pub async fn people_keys_belong_to_one_person_and_go_with_the_token(b: &dyn Backend) {
    let store = b.open().await;
    let added = |o: PersonKeyOutcome| match o {
        PersonKeyOutcome::Added(k) => k.jwk.kid,
        other => panic!("expected a new key, found {other:?}"),
    };
    assert_eq!(
        added(store.add_person_key(register("alice", 1, 4)).await.unwrap()),
        "person:alice:1"
    );
    assert!(matches!(
        store.add_person_key(register("alice", 1, 4)).await.unwrap(),
        PersonKeyOutcome::Existing(k) if k.jwk.kid == "person:alice:1"
    ));
    assert_eq!(
        store.add_person_key(register("bob", 1, 4)).await.unwrap(),
        PersonKeyOutcome::Taken {
            person: "alice".into()
        }
    );
    assert_eq!(
        added(store.add_person_key(register("alice", 2, 4)).await.unwrap()),
        "person:alice:2"
    );
    assert_eq!(
        store.add_person_key(register("alice", 3, 2)).await.unwrap(),
        PersonKeyOutcome::TooMany
    );
    // A revoked kid is never given again.
    let revoked = store
        .revoke_person_key("person:alice:1", "admin")
        .await
        .unwrap()
        .unwrap();
    assert!(revoked.revoked_at.is_some());
    assert!(
        store
            .revoke_person_key("person:alice:1", "admin")
            .await
            .unwrap()
            .is_none()
    );
    assert_eq!(
        added(store.add_person_key(register("alice", 3, 4)).await.unwrap()),
        "person:alice:3"
    );
    assert_eq!(
        added(store.add_person_key(register("bob", 4, 4)).await.unwrap()),
        "person:bob:1"
    );
    assert_eq!(
        kids(&*store, None).await,
        ["person:alice:2", "person:alice:3", "person:bob:1"]
    );
    let back = store.person_keys(Some("alice")).await.unwrap();
    assert_eq!(back[0].jwk.x, "key-2", "the key comes back as it went");
    assert_eq!(back[0].fingerprint, "fp-2");
    // Revoking alice's token revokes her keys, in the same transaction.
    store
        .create_token(
            super::fixtures::token("alice", lev_protocol::api::Role::Approver, "h-alice"),
            "admin",
            AlikeNames::Refuse,
        )
        .await
        .unwrap();
    assert!(store.revoke_token("alice", "admin").await.unwrap());
    assert!(kids(&*store, Some("alice")).await.is_empty());
    assert_eq!(kids(&*store, None).await, ["person:bob:1"]);
    // A revoked key stays alice's, and stays revoked: bob may not take it,
    // nor alice register it again (its old signatures would count again).
    assert_eq!(
        store.add_person_key(register("bob", 2, 4)).await.unwrap(),
        PersonKeyOutcome::Taken {
            person: "alice".into()
        }
    );
    assert_eq!(
        store.add_person_key(register("alice", 2, 4)).await.unwrap(),
        PersonKeyOutcome::Revoked {
            kid: "person:alice:2".into()
        }
    );
    assert_eq!(
        added(store.add_person_key(register("bob", 5, 4)).await.unwrap()),
        "person:bob:2"
    );
    let actions: Vec<String> = store
        .audit_after(0, 100)
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.action)
        .filter(|a| a.starts_with("person_key."))
        .collect();
    assert_eq!(
        actions,
        [
            "person_key.added",
            "person_key.added",
            "person_key.revoked",
            "person_key.added",
            "person_key.added",
            "person_key.added"
        ]
    );
}

pub async fn an_escalation_is_recorded_once(b: &dyn Backend) {
    let stores = handles(b).await;
    stores[0]
        .create_interaction(tool_approval("ir_e1", "s-v"))
        .await
        .unwrap();
    let data = json!({"request": {"id": "ir_e1", "session_id": "s-v"},
                      "escalation": {"to": ["dana"]}});
    let mut recorded = 0;
    for store in stores.iter().chain(stores.iter()) {
        recorded += usize::from(store.escalate_once("ir_e1", data.clone()).await.unwrap());
    }
    assert_eq!(recorded, 1);
    let events: Vec<_> = stores[0]
        .events_after(0, 100)
        .await
        .unwrap()
        .into_iter()
        .filter(|e| e.kind == "interaction.escalated")
        .collect();
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].data, data);
    let audit = stores[0].audit_after(0, 100).await.unwrap();
    let entry = audit
        .iter()
        .find(|e| e.action == "interaction.escalated")
        .unwrap();
    assert_eq!(entry.actor, "system");
    assert_eq!(entry.data["escalation"]["to"], json!(["dana"]));
    // Not once it is decided.
    stores[0]
        .create_interaction(tool_approval("ir_e2", "s-v"))
        .await
        .unwrap();
    stores[0]
        .cancel_interaction("ir_e2", "worker")
        .await
        .unwrap();
    assert!(!stores[0].escalate_once("ir_e2", data).await.unwrap());
}

/// A vote signed under `kid` (its envelope is never verified by a store).
fn signed_vote(id: &str, voter: &str, kid: &str, seen: &[Vote]) -> NewVote {
    let mut v = vote(id, voter, true, seen);
    v.vote.signed = true;
    v.vote.envelope = Some(lev_protocol::Envelope {
        payload_type: "application/vnd.lev.vote+json; version=1".into(),
        payload: "e30=".into(),
        signatures: vec![lev_protocol::EnvelopeSignature::new(kid, "c2ln")],
    });
    v
}

async fn cast(store: &dyn Store, v: NewVote) -> lev_protocol::api::InteractionView {
    match store.cast_vote(v).await.unwrap() {
        VoteOutcome::Recorded(view) => *view,
        other => panic!("expected the vote recorded, found {other:?}"),
    }
}

pub async fn revocations_void_the_votes_they_backed(b: &dyn Backend) {
    use lev_protocol::api::Role;
    let store = b.open().await;
    for (name, hash) in [("ann", "h-ann"), ("bob", "h-bob"), ("carol", "h-carol")] {
        store
            .create_token(
                super::fixtures::token(name, Role::Approver, hash),
                "admin",
                AlikeNames::Refuse,
            )
            .await
            .unwrap();
    }
    assert!(matches!(
        store.add_person_key(register("bob", 7, 4)).await.unwrap(),
        PersonKeyOutcome::Added(_)
    ));
    for id in ["ir_r1", "ir_r2", "ir_r3"] {
        store
            .create_interaction(tool_approval(id, "s-r"))
            .await
            .unwrap();
    }
    // ann votes on two, bob (signed) and carol on one each; ir_r3 is then
    // decided, so its votes are history and stay.
    let v = cast(&*store, vote("ir_r1", "ann", true, &[])).await;
    cast(
        &*store,
        signed_vote("ir_r1", "bob", "person:bob:1", &v.request.votes),
    )
    .await;
    cast(&*store, vote("ir_r2", "ann", true, &[])).await;
    let v = cast(&*store, vote("ir_r3", "ann", true, &[])).await;
    let decided = cast(
        &*store,
        deciding(vote("ir_r3", "carol", true, &v.request.votes)),
    )
    .await;
    assert_eq!(decided.request.status, InteractionStatus::Answered);
    let before = store.last_event_seq().await.unwrap();

    // Revoking ann's token voids her votes on what is pending, in one
    // transaction with the revocation, each change an event.
    assert!(store.revoke_token("ann", "admin").await.unwrap());
    let get = |id: &'static str| {
        let store = Arc::clone(&store);
        async move { store.get_interaction(id).await.unwrap().unwrap() }
    };
    assert_eq!(voters(&get("ir_r1").await), ["bob"]);
    assert!(get("ir_r2").await.request.votes.is_empty());
    assert_eq!(
        voters(&get("ir_r3").await),
        ["ann", "carol"],
        "decided: kept"
    );
    let events = store.events_after(before, 100).await.unwrap();
    let voted: Vec<&str> = events
        .iter()
        .filter(|e| e.kind == "interaction.voted")
        .map(|e| e.data["request"]["id"].as_str().unwrap())
        .collect();
    assert_eq!(voted, ["ir_r1", "ir_r2"]);
    let audit = store.audit_after(0, 1000).await.unwrap();
    let revoked = audit.iter().find(|e| e.action == "token.revoked").unwrap();
    let voided: Vec<(&str, &str)> = revoked.data["votes_voided"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| {
            (
                v["interaction"].as_str().unwrap(),
                v["voter"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(voided, [("ir_r1", "ann"), ("ir_r2", "ann")]);

    // Revoking bob's key voids the vote it signed, not his token's others.
    let v = cast(&*store, vote("ir_r2", "bob", true, &[])).await;
    assert_eq!(voters(&v), ["bob"]);
    store
        .revoke_person_key("person:bob:1", "bob")
        .await
        .unwrap()
        .unwrap();
    assert!(get("ir_r1").await.request.votes.is_empty());
    assert_eq!(voters(&get("ir_r2").await), ["bob"], "unsigned: kept");
    let audit = store.audit_after(0, 1000).await.unwrap();
    let revoked = audit
        .iter()
        .find(|e| e.action == "person_key.revoked")
        .unwrap();
    assert_eq!(revoked.data["votes_voided"][0]["interaction"], "ir_r1");
    assert_eq!(revoked.data["votes_voided"][0]["signed"], true);
    assert_eq!(revoked.data["votes_voided"].as_array().unwrap().len(), 1);
}

pub async fn a_vote_is_recorded_only_while_its_authority_holds(b: &dyn Backend) {
    use lev_protocol::api::Role;
    let store = b.open().await;
    for (name, role, hash) in [
        ("ann", Role::Approver, "h-ann"),
        ("ops", Role::Operator, "h-ops"),
        ("w", Role::Worker, "h-w"),
    ] {
        store
            .create_token(
                super::fixtures::token(name, role, hash),
                "admin",
                AlikeNames::Refuse,
            )
            .await
            .unwrap();
    }
    assert!(matches!(
        store.add_person_key(register("ann", 3, 4)).await.unwrap(),
        PersonKeyOutcome::Added(_)
    ));
    store
        .create_interaction(tool_approval("ir_a1", "s-a"))
        .await
        .unwrap();
    let with = |tokens: &[&str], keys: &[&str]| {
        let mut v = signed_vote("ir_a1", "ann", "person:ann:1", &[]);
        v.authority = VoteAuthority {
            tokens: tokens.iter().map(|t| (*t).to_owned()).collect(),
            keys: keys.iter().map(|k| (*k).to_owned()).collect(),
        };
        v
    };
    // A token that is gone, a worker's, a key not in force: nothing
    // recorded.
    for (tokens, keys) in [
        (&["ann", "gone"][..], &["person:ann:1"][..]),
        (&["ann", "w"][..], &[][..]),
        (&["ann"][..], &["person:ann:2"][..]),
    ] {
        assert!(
            matches!(
                store.cast_vote(with(tokens, keys)).await.unwrap(),
                VoteOutcome::Stale(_)
            ),
            "{tokens:?} {keys:?}"
        );
    }
    assert!(
        store
            .get_interaction("ir_a1")
            .await
            .unwrap()
            .unwrap()
            .request
            .votes
            .is_empty()
    );
    // An approver's, an operator's, a key in force: recorded.
    cast(&*store, with(&["ann", "ops"], &["person:ann:1"])).await;
}

pub async fn signing_keys_are_never_a_persons(b: &dyn Backend) {
    let store = b.open().await;
    let kid = "0123456789abcdef".to_owned();
    store
        .note_signing_keys(std::slice::from_ref(&kid))
        .await
        .unwrap();
    store
        .note_signing_keys(std::slice::from_ref(&kid))
        .await
        .unwrap();
    let mut key = register("ann", 1, 4);
    key.fingerprint = format!("{kid}{}", "0".repeat(48));
    assert_eq!(
        store.add_person_key(key).await.unwrap(),
        PersonKeyOutcome::SigningKey { kid }
    );
    assert!(kids(&*store, None).await.is_empty());
    // Noted for ever: another handle (or a restart) still refuses it.
    drop(store);
    let store = b.open().await;
    let mut key = register("bob", 1, 4);
    key.fingerprint = format!("0123456789abcdef{}", "1".repeat(48));
    assert!(matches!(
        store.add_person_key(key).await.unwrap(),
        PersonKeyOutcome::SigningKey { .. }
    ));
}

pub async fn a_revocation_racing_a_vote_is_never_outlived(b: &dyn Backend) {
    use lev_protocol::api::Role;
    let stores = handles(b).await;
    for i in 0..24 {
        let name = format!("racer-{i}");
        let id = format!("ir_race{i}");
        stores[0]
            .create_token(
                super::fixtures::token(&name, Role::Approver, &format!("h-race-{i}")),
                "admin",
                AlikeNames::Refuse,
            )
            .await
            .unwrap();
        stores[0]
            .create_interaction(tool_approval(&id, "s-race"))
            .await
            .unwrap();
        // The vote on one handle, the revocation on the other, at once.
        let voter = Arc::clone(&stores[i % stores.len()]);
        let revoker = Arc::clone(&stores[(i + 1) % stores.len()]);
        let (v_id, v_name) = (id.clone(), name.clone());
        let vote_task = tokio::spawn(async move {
            let mut seen = Vec::new();
            loop {
                let mut v = vote(&v_id, &v_name, true, &seen);
                v.authority.tokens = vec![v_name.clone()];
                match voter.cast_vote(v).await.unwrap() {
                    VoteOutcome::Stale(view) if view.request.votes != seen => {
                        seen = view.request.votes;
                    }
                    // Its token is gone: nothing recorded.
                    VoteOutcome::Stale(_) => return false,
                    VoteOutcome::Recorded(_) => return true,
                    other => panic!("{other:?}"),
                }
            }
        });
        let r_name = name.clone();
        let revoke_task =
            tokio::spawn(async move { revoker.revoke_token(&r_name, "admin").await.unwrap() });
        let recorded = vote_task.await.unwrap();
        assert!(revoke_task.await.unwrap());
        let view = stores[0].get_interaction(&id).await.unwrap().unwrap();
        assert!(
            view.request.votes.iter().all(|v| v.voter != name),
            "a vote outlived its token's revocation (recorded first: {recorded})"
        );
    }
}
