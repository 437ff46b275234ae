//! Passkeys in the real browser (SPEC section 13): a person registers a
//! passkey in the dashboard (Chromium's virtual authenticator, through the
//! DevTools protocol's WebAuthn domain) and votes with it; the decision,
//! made of her passkey vote and another person's CLI-key vote, verifies
//! offline with nothing but the server's and the people's public keys.

use std::sync::Arc;

use lev_approval::policy::Policy;
use lev_approval::{PeopleKeys, SigningKeyPair, VotePayload, sign_vote, verify};
use lev_protocol::{Envelope, VoteBinding};
use lev_server::Settings;
use reqwest::StatusCode;
use serde_json::{Value, json};
use time::OffsetDateTime;

use super::browser_support::Browser;
use crate::support::TestServer;

const POLICY: &str = r#"
default = "ask"

[[rule]]
tool = "pay"
decision = "ask"
approvals = 2
approvers = ["ann", "bob"]
require_signed_votes = true
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_passkey_registered_in_the_dashboard_signs_a_vote_that_verifies_offline() {
    passkey_vote(None).await;
}

/// The same with an EdDSA (Ed25519) passkey: the page offers ES256 first, so
/// the test has the page ask the authenticator for EdDSA alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_eddsa_passkey_signs_a_vote_that_verifies_offline() {
    passkey_vote(Some(("EdDSA", -8))).await;
}

/// Register a passkey (of `only`'s algorithm when given: `(name, COSE id)`)
/// and vote with it.
async fn passkey_vote(only: Option<(&str, i64)>) {
    let s = TestServer::start_with(Settings {
        policy: Arc::new(Policy::parse(POLICY).unwrap()),
        policy_source: "passkeys.toml".into(),
        ..Settings::default()
    })
    .await;
    let worker = s.token("agent-1", "worker", None).await;
    let ann = s.token("ann", "approver", None).await;
    let bob = s.token("bob", "approver", None).await;
    // Passkeys need a domain name: the dashboard on localhost.
    let base = s.url.replace("127.0.0.1", "localhost");
    let b = Browser::start().await;
    b.cdp("WebAuthn.enable", json!({})).await;
    let added = b
        .cdp(
            "WebAuthn.addVirtualAuthenticator",
            json!({"options": {"protocol": "ctap2", "transport": "internal",
                   "hasResidentKey": true, "hasUserVerification": true,
                   "isUserVerified": true, "automaticPresenceSimulation": true}}),
        )
        .await;
    assert!(
        added["value"]["authenticatorId"].is_string() || added["authenticatorId"].is_string(),
        "{added}"
    );
    b.goto(&format!("{base}/#token={bob}")).await;
    b.wait_text("#me-name", "bob").await;
    b.wait_text("#passkey-btn", "Add a passkey").await;
    if let Some((_, alg)) = only {
        b.js(&format!(
            "const create = navigator.credentials.create.bind(navigator.credentials);
             navigator.credentials.create = (options) => {{
                 options.publicKey.pubKeyCredParams = [{{type: 'public-key', alg: {alg}}}];
                 return create(options);
             }};"
        ))
        .await;
    }

    // Register: the button makes a passkey and the server keeps its public key.
    b.click("#passkey-btn").await;
    b.wait_text("#passkey-btn", "Passkey: on").await;
    let (status, jwks) = s.get("/v1/people/keys", "").await;
    assert_eq!(status, StatusCode::OK);
    let key = jwks["keys"]
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["kid"] == "person:bob:1")
        .unwrap_or_else(|| panic!("bob's passkey in {jwks}"))
        .clone();
    assert_eq!(key["rp_id"], "localhost", "{key}");
    match only {
        Some((name, _)) => assert_eq!(key["alg"], name, "{key}"),
        None => assert!(
            matches!(key["alg"].as_str(), Some("ES256" | "EdDSA")),
            "{key}"
        ),
    }
    assert!(key["credential_id"].is_string());

    // ann votes with her CLI key over the API; bob with his passkey.
    let ann_key = SigningKeyPair::from_seed(&[0x31; 32]);
    let (status, v) = s
        .post(
            "/v1/people/keys",
            &ann,
            &json!({"kty": "OKP", "crv": "Ed25519", "x": ann_key.public_base64url()}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{v}");
    let (_, gated) = s
        .post(
            "/v1/gate",
            &worker,
            &json!({"session_id": "s-pay", "conversation_id": "c-1", "request_id": "pay-1",
                    "caller": "carol", "tool_name": "pay", "args_json": r#"{"amount":250}"#,
                    "sandbox_mode": "prod"}),
        )
        .await;
    let id = gated["interaction_id"].as_str().unwrap().to_owned();
    let (_, view) = s.get(&format!("/v1/interactions/{id}"), &s.admin).await;
    let binding: VoteBinding =
        serde_json::from_value(view["request"]["vote_binding"].clone()).unwrap();
    let vote = VotePayload::for_call(&binding, true, "once", "", "ann", OffsetDateTime::now_utc());
    let envelope = sign_vote(&vote, &ann_key, "person:ann:1").unwrap();
    let (status, r) = s
        .respond(
            &ann,
            &id,
            &json!({"request_id": id, "approved": true, "scope": "once", "vote": envelope}),
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{r}");

    // The dashboard shows the votes so far and who may still vote; only
    // "once" is offered where two people must approve each call.
    let item = format!("#inbox-list li.item[data-id='{id}']");
    let detail = format!("#detail article.detail[data-id='{id}']");
    b.wait_css(&item).await;
    b.click(&item).await;
    b.wait_text(&format!("{detail} .votes"), "1 of 2 approvals")
        .await;
    let votes = b.text(&format!("{detail} .votes")).await;
    assert!(votes.contains("ann") && votes.contains("signed"), "{votes}");
    assert!(
        votes.to_lowercase().contains("may still vote bob"),
        "{votes}"
    );
    assert_eq!(
        b.count(&format!("{detail} .seg input[value='session']"))
            .await,
        0
    );
    b.screenshot("passkey-vote-pending").await;
    b.click(&format!("{detail} .approve-btn")).await;

    // bob's passkey signed the vote that decided.
    let (status, w) = s
        .get(&format!("/v1/interactions/{id}/wait?timeout_s=10"), &worker)
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(w["status"], "answered", "{w}");
    let approval: Envelope = serde_json::from_value(w["approval"].clone()).unwrap();
    let decision = verify(
        &approval,
        &s.trusted_keys().await,
        OffsetDateTime::now_utc(),
    )
    .unwrap();
    assert!(decision.authorizes_call("pay-1", "pay", r#"{"amount":250}"#));
    let votes = decision.payload.votes.clone().unwrap();
    let bob_vote = votes.iter().find(|v| v.voter == "bob").unwrap();
    let sig = &bob_vote.envelope.as_ref().unwrap().signatures[0];
    assert!(sig.authenticator_data.is_some() && sig.client_data_json.is_some());
    let (_, jwks) = s.get("/v1/people/keys", "").await;
    let people = PeopleKeys::parse(&jwks.to_string()).unwrap();
    let voters = decision.require_signed_votes(&people, 2).unwrap();
    assert_eq!(voters.into_iter().collect::<Vec<_>>(), ["ann", "bob"]);
    // Without bob's passkey the decision is one signed vote short.
    let without: Value = json!({"keys": jwks["keys"].as_array().unwrap().iter()
        .filter(|k| k["kid"] != "person:bob:1").cloned().collect::<Vec<_>>()});
    let fewer = PeopleKeys::parse(&without.to_string()).unwrap();
    assert!(decision.require_signed_votes(&fewer, 2).is_err());
    // Decided: it leaves the inbox, as any answered question does.
    b.wait_until(
        "the decided call to leave the inbox",
        &format!("!document.querySelector(\"{}\")", item.replace('"', "\\\"")),
    )
    .await;
    b.screenshot("passkey-vote-decided").await;
}
