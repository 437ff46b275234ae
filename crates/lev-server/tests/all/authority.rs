//! Votes, keys and nonces that outlive their authority (issue 28, items 4
//! and 12): a revoked token's or key's vote no longer counts, the server
//! never signs a decision its own offline check refuses, no signing key of
//! the server's (past or present) nor another person's key becomes a
//! person's, and an approval's nonce is spent only by a worker that may act
//! for its caller and session.

use std::sync::Arc;

use lev_approval::policy::Policy;
use lev_approval::{PeopleKeys, SigningKeyPair, VerifiedResponse, VotePayload, sign_vote, verify};
use lev_protocol::{Envelope, VoteBinding};
use lev_server::Settings;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use time::OffsetDateTime;

use crate::support::{TestServer, code, message};

const POLICY: &str = r#"
self_approval = false
default = "ask"

[groups]
oncall = ["ann", "bob", "carol", "ops"]

[[rule]]
tool = "deploy*"
decision = "ask"
approvals = 2
approvers = ["group:oncall"]

[[rule]]
tool = "pay"
decision = "ask"
approvals = 2
approvers = ["group:oncall"]
require_signed_votes = true

[[rule]]
tool = "ls"
decision = "allow"
"#;

async fn start() -> TestServer {
    TestServer::start_with(Settings {
        policy: Arc::new(Policy::parse(POLICY).unwrap()),
        policy_source: "authority.toml".into(),
        ..Settings::default()
    })
    .await
}

fn call(tool: &str, request_id: &str, session: &str) -> Value {
    json!({
        "session_id": session,
        "conversation_id": "c-a",
        "turn_id": "t-1",
        "request_id": request_id,
        "caller": "erin",
        "tool_name": tool,
        "args_json": "{}",
        "sandbox_mode": "prod",
    })
}

async fn ask(s: &TestServer, worker: &str, body: &Value) -> String {
    let (status, v) = s.post("/v1/gate", worker, body).await;
    assert_eq!(status, StatusCode::OK, "{v}");
    assert_eq!(v["decision"], "ask", "{v}");
    v["interaction_id"].as_str().unwrap().to_owned()
}

fn approve(id: &str) -> Value {
    json!({"request_id": id, "approved": true, "scope": "once"})
}

async fn binding(s: &TestServer, id: &str) -> VoteBinding {
    let (_, v) = s.get(&format!("/v1/interactions/{id}"), &s.admin).await;
    serde_json::from_value(v["request"]["vote_binding"].clone()).unwrap()
}

fn signed(id: &str, binding: &VoteBinding, voter: &str, key: &SigningKeyPair, kid: &str) -> Value {
    let vote = VotePayload::for_call(binding, true, "once", "", voter, OffsetDateTime::now_utc());
    let envelope = sign_vote(&vote, key, kid).unwrap();
    json!({"request_id": id, "approved": true, "scope": "once", "vote": envelope})
}

async fn register(s: &TestServer, token: &str, key: &SigningKeyPair) -> (StatusCode, Value) {
    let jwk = json!({"kty": "OKP", "crv": "Ed25519", "x": key.public_base64url()});
    s.post("/v1/people/keys", token, &jwk).await
}

async fn kid_of(s: &TestServer, token: &str, key: &SigningKeyPair) -> String {
    let (status, v) = register(s, token, key).await;
    assert_eq!(status, StatusCode::CREATED, "{v}");
    v["key"]["kid"].as_str().unwrap().to_owned()
}

async fn people_keys(s: &TestServer) -> PeopleKeys {
    let (_, jwks) = s.get("/v1/people/keys", "").await;
    PeopleKeys::parse(&jwks.to_string()).unwrap()
}

async fn verified(s: &TestServer, approval: &Value) -> VerifiedResponse {
    let envelope: Envelope = serde_json::from_value(approval.clone()).unwrap();
    verify(
        &envelope,
        &s.trusted_keys().await,
        OffsetDateTime::now_utc(),
    )
    .unwrap()
}

async fn audit_of(s: &TestServer, action: &str) -> Vec<Value> {
    let (_, page) = s.get("/v1/audit", &s.admin).await;
    page["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["action"] == action)
        .cloned()
        .collect()
}

async fn revoke_token(s: &TestServer, name: &str) {
    let (status, v) = s
        .call(
            Method::DELETE,
            &format!("/v1/tokens/{name}"),
            &s.admin,
            None,
        )
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT, "{v}");
}

/// A two-person rule: one approver's token is revoked after her approval.
/// One live approver does not complete it; a second live one does, and the
/// decision carries only live votes. The revocation is audited with the
/// vote it voided.
#[tokio::test]
async fn a_revoked_tokens_vote_no_longer_counts() {
    let s = start().await;
    let worker = s.token("worker-a", "worker", None).await;
    let ann = s.token("ann", "approver", None).await;
    let bob = s.token("bob", "approver", None).await;
    let carol = s.token("carol", "approver", None).await;
    let id = ask(&s, &worker, &call("deploy-web", "rq-1", "s-a")).await;
    let (status, r) = s.respond(&ann, &id, &approve(&id)).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{r}");

    revoke_token(&s, "ann").await;
    let (_, v) = s.get(&format!("/v1/interactions/{id}"), &s.admin).await;
    assert!(
        v["request"]["votes"].as_array().is_none_or(Vec::is_empty),
        "ann's vote is voided: {v}"
    );
    let revoked = audit_of(&s, "token.revoked").await;
    assert_eq!(revoked.len(), 1);
    assert_eq!(
        revoked[0]["data"]["votes_voided"],
        json!([{"interaction": id, "voter": "ann", "approved": true, "signed": false,
                "at": revoked[0]["data"]["votes_voided"][0]["at"]}]),
        "{}",
        revoked[0]
    );

    // One live approver is one approval of two.
    let (status, r) = s.respond(&bob, &id, &approve(&id)).await;
    assert_eq!(
        status,
        StatusCode::ACCEPTED,
        "one live approver decided: {r}"
    );
    assert_eq!(r["status"], "pending");
    // The revoked token votes no more.
    let (status, _) = s.respond(&ann, &id, &approve(&id)).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    // A second live one decides, with live votes only.
    let (status, r) = s.respond(&carol, &id, &approve(&id)).await;
    assert_eq!(status, StatusCode::OK, "{r}");
    let decision = verified(&s, &r["approval"]).await;
    let voters: Vec<String> = decision
        .payload
        .votes
        .unwrap()
        .into_iter()
        .map(|v| v.voter)
        .collect();
    assert_eq!(voters, ["bob", "carol"]);
}

/// A vote already stored for a token that no longer exists (or that no
/// longer votes: a worker's now) counts for nothing at decision time, also
/// when no revocation voided it (a vote recorded before this version).
#[tokio::test]
async fn the_tally_counts_only_votes_whose_token_still_votes() {
    let s = start().await;
    let worker = s.token("worker-a", "worker", None).await;
    let bob = s.token("bob", "approver", None).await;
    let _ops = s.token("ops", "worker", None).await;
    let id = ask(&s, &worker, &call("deploy-api", "rq-2", "s-a")).await;
    // ann's and ops's votes as an older server stored them.
    for voter in ["ann", "ops"] {
        let view = s.state.store().get_interaction(&id).await.unwrap().unwrap();
        let vote = lev_protocol::Vote {
            voter: voter.into(),
            approved: true,
            at: OffsetDateTime::now_utc(),
            signed: false,
            response: lev_protocol::InteractionResponse::approval(
                &id,
                true,
                lev_protocol::ApprovalScope::Once,
            ),
            envelope: None,
        };
        let outcome = s
            .state
            .store()
            .cast_vote(lev_store::NewVote {
                id: id.clone(),
                vote,
                seen_votes: view.request.votes.clone(),
                authority: lev_store::VoteAuthority::default(),
                audit: Default::default(),
                decision: None,
            })
            .await
            .unwrap();
        assert!(matches!(outcome, lev_store::VoteOutcome::Recorded(_)));
    }
    let (status, r) = s.respond(&bob, &id, &approve(&id)).await;
    assert_eq!(
        status,
        StatusCode::ACCEPTED,
        "a vote with no live token counted: {r}"
    );
}

/// A two-person rule of signed votes: ann's key is revoked after her signed
/// vote. bob's signed vote does not decide (the server would have signed a
/// decision `lev verify --require-votes 2` refuses); ann signs again with a
/// new key and it decides, verifying offline under the keys in force.
#[tokio::test]
async fn a_revoked_keys_vote_no_longer_counts_and_every_decision_verifies() {
    let s = start().await;
    let worker = s.token("worker-a", "worker", None).await;
    let ann = s.token("ann", "approver", None).await;
    let bob = s.token("bob", "approver", None).await;
    let ann_key = SigningKeyPair::from_seed(&[1; 32]);
    let bob_key = SigningKeyPair::from_seed(&[2; 32]);
    let ann_kid = kid_of(&s, &ann, &ann_key).await;
    let bob_kid = kid_of(&s, &bob, &bob_key).await;
    let id = ask(&s, &worker, &call("pay", "rq-3", "s-a")).await;
    let b = binding(&s, &id).await;
    let (status, r) = s
        .respond(&ann, &id, &signed(&id, &b, "ann", &ann_key, &ann_kid))
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{r}");

    let (status, v) = s
        .call(
            Method::DELETE,
            &format!("/v1/people/keys/{ann_kid}"),
            &ann,
            None,
        )
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT, "{v}");
    let revoked = audit_of(&s, "person_key.revoked").await;
    assert_eq!(revoked[0]["data"]["votes_voided"][0]["voter"], "ann");
    assert_eq!(revoked[0]["data"]["votes_voided"][0]["signed"], true);

    let (status, r) = s
        .respond(&bob, &id, &signed(&id, &b, "bob", &bob_key, &bob_kid))
        .await;
    assert_eq!(
        status,
        StatusCode::ACCEPTED,
        "a revoked key's vote completed the quorum: {r}"
    );
    // Her vote was voided, so she may vote again, with a new key.
    let new_key = SigningKeyPair::from_seed(&[3; 32]);
    let new_kid = kid_of(&s, &ann, &new_key).await;
    let (status, r) = s
        .respond(&ann, &id, &signed(&id, &b, "ann", &new_key, &new_kid))
        .await;
    assert_eq!(status, StatusCode::OK, "{r}");
    let decision = verified(&s, &r["approval"]).await;
    let voters = decision
        .require_signed_votes(&people_keys(&s).await, 2)
        .unwrap();
    assert_eq!(voters.len(), 2);
}

/// A signed vote is stored with the one signature that verified, its key
/// id that key's: a misleading key id hint cannot hide a vote from the
/// revocation of the key that signed it.
#[tokio::test]
async fn a_vote_signed_under_a_misleading_key_id_is_voided_with_its_key() {
    let s = start().await;
    let worker = s.token("worker-a", "worker", None).await;
    let ann = s.token("ann", "approver", None).await;
    let ann_key = SigningKeyPair::from_seed(&[4; 32]);
    let other_key = SigningKeyPair::from_seed(&[5; 32]);
    let ann_kid = kid_of(&s, &ann, &ann_key).await;
    let other_kid = kid_of(&s, &ann, &other_key).await;
    let id = ask(&s, &worker, &call("pay", "rq-4", "s-a")).await;
    let b = binding(&s, &id).await;
    // Signed by her first key, the hint naming her second.
    let (status, r) = s
        .respond(&ann, &id, &signed(&id, &b, "ann", &ann_key, &other_kid))
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{r}");
    let (_, v) = s.get(&format!("/v1/interactions/{id}"), &s.admin).await;
    assert_eq!(
        v["request"]["votes"][0]["envelope"]["signatures"][0]["keyid"], ann_kid,
        "{v}"
    );
    let (status, _) = s
        .call(
            Method::DELETE,
            &format!("/v1/people/keys/{ann_kid}"),
            &ann,
            None,
        )
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (_, v) = s.get(&format!("/v1/interactions/{id}"), &s.admin).await;
    assert!(
        v["request"]["votes"].as_array().is_none_or(Vec::is_empty),
        "{v}"
    );
}

/// No person may register a key the server signs with, signed with before
/// (rotated out, even removed), nor one that is or was another person's,
/// nor their own revoked key.
#[tokio::test]
async fn no_signing_key_nor_anothers_key_becomes_a_persons() {
    let s = start().await;
    let ann = s.token("ann", "approver", None).await;
    let bob = s.token("bob", "approver", None).await;
    let jwk_of = |jwk: &Value| json!({"kty": "OKP", "crv": "Ed25519", "x": jwk["x"]});
    let (_, keys) = s.get("/v1/keys", "").await;
    let first = keys["keys"][0].clone();
    for token in [&s.admin, &ann] {
        let (status, e) = s.post("/v1/people/keys", token, &jwk_of(&first)).await;
        assert_eq!(status, StatusCode::CONFLICT, "the active signing key: {e}");
        assert_eq!(code(&e), "key_taken");
        assert!(message(&e).contains("signing key"), "{e}");
    }
    // Rotated out, then removed: still the server's, for ever.
    let (status, _) = s.post("/v1/keys/rotate", &s.admin, &json!({})).await;
    assert_eq!(status, StatusCode::OK);
    let (status, e) = s.post("/v1/people/keys", &s.admin, &jwk_of(&first)).await;
    assert_eq!(status, StatusCode::CONFLICT, "a rotated-out key: {e}");
    let kid = first["kid"].as_str().unwrap();
    let (status, v) = s
        .call(Method::DELETE, &format!("/v1/keys/{kid}"), &s.admin, None)
        .await;
    assert_eq!(status, StatusCode::OK, "{v}");
    let (status, e) = s.post("/v1/people/keys", &s.admin, &jwk_of(&first)).await;
    assert_eq!(status, StatusCode::CONFLICT, "a removed key: {e}");
    assert!(people_keys(&s).await.is_empty());

    // Another person's key, in force or revoked; one's own revoked key.
    let key = SigningKeyPair::from_seed(&[6; 32]);
    let kid = kid_of(&s, &ann, &key).await;
    let (status, e) = register(&s, &bob, &key).await;
    assert_eq!(status, StatusCode::CONFLICT, "{e}");
    assert_eq!(code(&e), "key_taken");
    let (status, _) = s
        .call(
            Method::DELETE,
            &format!("/v1/people/keys/{kid}"),
            &ann,
            None,
        )
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (status, e) = register(&s, &bob, &key).await;
    assert_eq!(status, StatusCode::CONFLICT, "another's revoked key: {e}");
    assert_eq!(code(&e), "key_taken");
    let (status, e) = register(&s, &ann, &key).await;
    assert_eq!(status, StatusCode::CONFLICT, "one's own revoked key: {e}");
    assert_eq!(code(&e), "key_revoked");
}

/// An approval's nonce is spent only by a worker that may act for the
/// approval's caller and in its session; anyone else gets 403 and the
/// nonce stays unspent for its owner.
#[tokio::test]
async fn a_nonce_is_spent_only_by_a_worker_of_its_caller_and_session() {
    let s = start().await;
    let erin = s.token("erin-worker", "worker", Some("erin")).await;
    let (status, v) = s
        .post("/v1/gate", &erin, &call("ls", "rq-n1", "s-erin"))
        .await;
    assert_eq!(status, StatusCode::OK, "{v}");
    assert_eq!(v["decision"], "allow", "{v}");
    let nonce = verified(&s, &v["approval"]).await.payload.nonce;
    let spend = |token: String| {
        let nonce = nonce.clone();
        let s = &s;
        async move {
            s.post("/v1/nonces/consume", &token, &json!({"nonce": nonce}))
                .await
        }
    };
    // Bound to another caller; limited to other sessions.
    let frank = s.token("frank-worker", "worker", Some("frank")).await;
    let (status, e) = spend(frank).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{e}");
    assert_eq!(code(&e), "caller_mismatch");
    let (status, v) = s
        .post(
            "/v1/tokens",
            &s.admin,
            &json!({"name": "elsewhere", "role": "worker", "sessions": ["other-*"]}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{v}");
    let (status, e) = spend(v["token"].as_str().unwrap().to_owned()).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{e}");
    assert_eq!(code(&e), "session_scope");
    // Still unspent: its own worker spends it, once.
    let (status, v) = spend(erin.clone()).await;
    assert_eq!(status, StatusCode::OK, "{v}");
    let (status, e) = spend(erin).await;
    assert_eq!(status, StatusCode::CONFLICT, "{e}");
    assert_eq!(code(&e), "nonce_spent");
}
