//! The gate (SPEC sections 5 and 6) against the real server: decisions,
//! signed envelopes, grants, nonces, keys, and each hostile case of section 5.

use std::sync::Arc;

use lev_approval::policy::Policy;
use lev_approval::{TrustedKeys, VerifiedResponse, verify};
use lev_protocol::Envelope;
use lev_server::{Config, Server, Settings};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use time::OffsetDateTime;

use crate::support::{TestServer, code, message};

const POLICY: &str = r#"
self_approval = true

[sandbox_modes]
"read-only" = ["fs-read"]
"workspace-write" = ["fs-read", "fs-write"]
"danger-full-access" = ["*"]

[[tool]]
name = "shell"
requires = ["proc-exec"]

[[rule]]
tool = "shell"
args = { "/argv/0" = "^(rm|dd)$" }
decision = "deny"
reason = "destructive commands are never run by agents"

[[rule]]
tool = "fs.read"
decision = "allow"
reason = "reading is fine"
"#;

fn settings(policy: &str) -> Settings {
    Settings {
        policy: Arc::new(Policy::parse(policy).unwrap()),
        policy_source: "test-policy.toml".into(),
        ..Settings::default()
    }
}

async fn start(policy: &str) -> TestServer {
    TestServer::start_with(settings(policy)).await
}

/// A gate call of `shell` in session `s-1`, conversation `c-1`, caller alice.
fn shell_call(request_id: &str, argv: &[&str]) -> Value {
    json!({
        "session_id": "s-1",
        "conversation_id": "c-1",
        "turn_id": "t-1",
        "request_id": request_id,
        "caller": "alice",
        "tool_name": "shell",
        "args_json": json!({"argv": argv, "cwd": "/work"}).to_string(),
        "sandbox_mode": "workspace-write",
    })
}

async fn gate(s: &TestServer, token: &str, body: &Value) -> (StatusCode, Value) {
    s.post("/v1/gate", token, body).await
}

fn envelope(v: &Value) -> Envelope {
    serde_json::from_value(v.clone()).unwrap()
}

async fn verified(s: &TestServer, v: &Value) -> VerifiedResponse {
    verify(
        &envelope(v),
        &s.trusted_keys().await,
        OffsetDateTime::now_utc(),
    )
    .unwrap()
}

async fn wait(s: &TestServer, token: &str, id: &str) -> Value {
    let (status, v) = s
        .get(&format!("/v1/interactions/{id}/wait?timeout_s=5"), token)
        .await;
    assert_eq!(status, StatusCode::OK, "{v}");
    v
}

async fn consume(s: &TestServer, token: &str, nonce: &str) -> StatusCode {
    s.post("/v1/nonces/consume", token, &json!({"nonce": nonce}))
        .await
        .0
}

async fn audit(s: &TestServer) -> Vec<Value> {
    let (status, v) = s.get("/v1/audit", &s.admin).await;
    assert_eq!(status, StatusCode::OK, "{v}");
    v["items"].as_array().unwrap().clone()
}

/// Ask through the gate, answer with `answer`, and return the wait's approval.
async fn ask_and_answer(
    s: &TestServer,
    worker: &str,
    approver: &str,
    call: &Value,
    answer: Value,
) -> Value {
    let (status, v) = gate(s, worker, call).await;
    assert_eq!(status, StatusCode::OK, "{v}");
    assert_eq!(v["decision"], "ask", "{v}");
    let id = v["interaction_id"].as_str().unwrap();
    let mut body = answer;
    body["request_id"] = json!(id);
    let (status, r) = s.respond(approver, id, &body).await;
    assert_eq!(status, StatusCode::OK, "{r}");
    let w = wait(s, worker, id).await;
    assert_eq!(w["status"], "answered", "{w}");
    assert_eq!(w["approval"], r["approval"]);
    w["approval"].clone()
}

#[tokio::test]
async fn a_policy_allow_is_signed_bound_and_audited() {
    let s = start(POLICY).await;
    let (worker, _) = s.worker_and_approver().await;
    let mut call = shell_call("call-1", &[]);
    call["tool_name"] = json!("fs.read");
    call["args_json"] = json!(r#"{"path":"/etc/hosts"}"#);
    let (status, v) = gate(&s, &worker, &call).await;
    assert_eq!(status, StatusCode::OK, "{v}");
    assert_eq!(v["decision"], "allow", "{v}");
    let vr = verified(&s, &v["approval"]).await;
    assert!(vr.authorizes_call("call-1", "fs.read", r#"{"path":"/etc/hosts"}"#));
    assert_eq!(vr.payload.approver, "policy");
    assert_eq!(vr.payload.caller, "alice");
    assert_eq!(vr.payload.conversation_id, "c-1");
    assert_eq!(vr.payload.turn_id, "t-1");
    assert_eq!(vr.payload.sandbox_mode, "workspace-write");
    assert_eq!(vr.payload.reason, "reading is fine");
    assert!(!vr.payload.approved_for_session);
    assert!(vr.payload.nonce.len() >= 22, "128 bits in base64url");
    assert!(vr.payload.expires_at - vr.payload.issued_at == time::Duration::minutes(10));
    // What decided it is in the audit log.
    let entries = audit(&s).await;
    let e = entries
        .iter()
        .find(|e| e["action"] == "gate.allowed")
        .expect("an audit entry for the allow");
    assert_eq!(e["actor"], "policy");
    assert_eq!(e["data"]["decided_by"]["policy"], "test-policy.toml");
    assert_eq!(e["data"]["decided_by"]["rule_tool"], "fs.read");
    assert!(e["data"]["decided_by"]["rule_line"].as_u64().unwrap() > 0);
    assert_eq!(e["data"]["nonce"], json!(vr.payload.nonce));
    // Nothing missing and no rule: allowed too, and audited as such.
    let mut call = shell_call("call-2", &["ls"]);
    call["sandbox_mode"] = json!("danger-full-access");
    let (_, v) = gate(&s, &worker, &call).await;
    assert_eq!(v["decision"], "allow", "{v}");
    let entries = audit(&s).await;
    let e = entries
        .iter()
        .rev()
        .find(|e| e["action"] == "gate.allowed")
        .unwrap();
    assert_eq!(e["data"]["request_id"], "call-2");
    assert!(e["data"]["decided_by"]["rule_line"].is_null(), "{e}");
}

#[tokio::test]
async fn a_deny_rule_denies_with_a_signed_denial_that_authorizes_nothing() {
    let s = start(POLICY).await;
    let (worker, _) = s.worker_and_approver().await;
    let (status, v) = gate(&s, &worker, &shell_call("rm-1", &["rm", "-rf", "/"])).await;
    assert_eq!(status, StatusCode::OK, "{v}");
    assert_eq!(v["decision"], "deny", "{v}");
    assert_eq!(v["reason"], "destructive commands are never run by agents");
    // A deny presented as an approval.
    let vr = verified(&s, &v["approval"]).await;
    assert!(!vr.payload.approved);
    let args = json!({"argv": ["rm", "-rf", "/"], "cwd": "/work"}).to_string();
    assert!(!vr.authorizes_call("rm-1", "shell", &args));
    assert!(audit(&s).await.iter().any(
        |e| e["action"] == "gate.denied" && e["data"]["decided_by"]["rule_decision"] == "deny"
    ));
}

#[tokio::test]
async fn the_built_in_policy_asks_everything() {
    let s = TestServer::start().await;
    let (worker, _) = s.worker_and_approver().await;
    let mut call = shell_call("c", &["ls"]);
    call["sandbox_mode"] = json!("danger-full-access");
    let (_, v) = gate(&s, &worker, &call).await;
    assert_eq!(v["decision"], "ask", "{v}");
    let id = v["interaction_id"].as_str().unwrap();
    let (_, i) = s.get(&format!("/v1/interactions/{id}"), &worker).await;
    let kind = &i["request"]["kind"];
    assert_eq!(kind["type"], "tool_approval");
    assert_eq!(kind["args_json"], call["args_json"]);
    assert_eq!(kind["missing_capabilities"], json!([]));
    assert_eq!(i["request"]["caller"], "alice");
}

#[tokio::test]
async fn an_answered_ask_is_bound_to_the_gate_request_id_and_spent_once_across_restarts() {
    let s = start(POLICY).await;
    let (worker, approver) = s.worker_and_approver().await;
    let call = shell_call("tool-call-7", &["ls", "-l"]);
    let (_, v) = gate(&s, &worker, &call).await;
    assert_eq!(v["decision"], "ask");
    let id = v["interaction_id"].as_str().unwrap().to_owned();
    let (_, i) = s.get(&format!("/v1/interactions/{id}"), &worker).await;
    assert_eq!(
        i["request"]["kind"]["missing_capabilities"],
        json!(["proc-exec"])
    );
    let (status, r) = s
        .respond(
            &approver,
            &id,
            &json!({"request_id": id, "approved": true, "injected_context": "be careful",
                    "reason": "looks fine"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{r}");
    let w = wait(&s, &worker, &id).await;
    let vr = verified(&s, &w["approval"]).await;
    let args = call["args_json"].as_str().unwrap();
    assert!(vr.authorizes_call("tool-call-7", "shell", args));
    assert!(
        !vr.authorizes_call(&id, "shell", args),
        "bound to the tool-call id"
    );
    assert_eq!(vr.payload.approver, "alice-approver");
    assert_eq!(
        vr.payload.covered_capabilities,
        vec!["proc-exec".to_owned()]
    );
    assert_eq!(vr.payload.injected_context, "be careful");
    assert_eq!(vr.payload.reason, "looks fine");
    assert!(vr.check_context("c-1", "alice", "workspace-write").is_ok());
    // An approval for one call presented for another.
    assert!(!vr.authorizes_call("tool-call-8", "shell", args));
    assert!(!vr.authorizes_call("tool-call-7", "shell", r#"{"argv":["ls"],"cwd":"/work"}"#));
    assert!(!vr.authorizes_call("tool-call-7", "fs.read", args));
    // Another conversation, another caller, another sandbox mode.
    assert_eq!(
        vr.check_context("c-2", "alice", "workspace-write")
            .unwrap_err()
            .field,
        "conversation_id"
    );
    assert_eq!(
        vr.check_context("c-1", "bob", "workspace-write")
            .unwrap_err()
            .field,
        "caller"
    );
    assert_eq!(
        vr.check_context("c-1", "alice", "danger-full-access")
            .unwrap_err()
            .field,
        "sandbox_mode"
    );
    // The nonce, once; and a token replayed after a restart is still spent.
    assert_eq!(
        consume(&s, &worker, &vr.payload.nonce).await,
        StatusCode::OK
    );
    let (status, v) = s
        .post(
            "/v1/nonces/consume",
            &worker,
            &json!({"nonce": vr.payload.nonce}),
        )
        .await;
    assert_eq!(status, StatusCode::CONFLICT);
    assert_eq!(code(&v), "nonce_spent");
    let dir = s.stop().await;
    let s = TestServer::start_in(dir, settings(POLICY)).await;
    assert_eq!(
        consume(&s, &worker, &vr.payload.nonce).await,
        StatusCode::CONFLICT
    );
    // The approval itself still verifies (same key), and still authorizes
    // the call: only the ledger stops the replay.
    let vr2 = verified(&s, &w["approval"]).await;
    assert_eq!(vr2.payload.nonce, vr.payload.nonce);
    // The gate's decision is kept too: the same call again is the same interaction.
    let (_, again) = gate(&s, &worker, &call).await;
    assert_eq!(again["interaction_id"], json!(id));
}

/// Issue 28: the ledger remembered the text it was given, so a nonce spent
/// as lev signed it (base64url, no padding) could be spent again in the
/// standard alphabet or padded: two verifiers spelling it differently ran
/// the call twice. Every spelling of the same bytes is one nonce.
#[tokio::test]
async fn a_spent_nonce_is_spent_in_every_spelling() {
    let s = start(POLICY).await;
    let (worker, _) = s.worker_and_approver().await;
    let bytes: Vec<u8> = (0..16u8).map(|i| 0xfb ^ i.wrapping_mul(37)).collect();
    let url = lev_approval::encode_base64url(&bytes);
    let standard = lev_approval::encode_base64(&bytes);
    assert_eq!(consume(&s, &worker, &url).await, StatusCode::OK);
    for spelling in [
        standard.clone(),
        standard.trim_end_matches('=').to_owned(),
        format!("{url}=="),
        url.replace('_', "/"),
    ] {
        let (status, v) = s
            .post("/v1/nonces/consume", &worker, &json!({"nonce": spelling}))
            .await;
        assert_eq!(status, StatusCode::CONFLICT, "{spelling}: {v}");
        assert_eq!(code(&v), "nonce_spent");
    }
    // Spent in the standard spelling first: the URL-safe one is spent too.
    let other = lev_approval::encode_base64(&[9u8; 16]);
    assert_eq!(consume(&s, &worker, &other).await, StatusCode::OK);
    assert_eq!(
        consume(&s, &worker, &lev_approval::encode_base64url(&[9u8; 16])).await,
        StatusCode::CONFLICT
    );
}

#[tokio::test]
async fn the_gate_is_idempotent_by_session_and_request_id() {
    let s = start(POLICY).await;
    let (worker, _) = s.worker_and_approver().await;
    let mut call = shell_call("r-1", &[]);
    call["tool_name"] = json!("fs.read");
    call["args_json"] = json!("{}");
    let (_, first) = gate(&s, &worker, &call).await;
    let (status, second) = gate(&s, &worker, &call).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(first, second, "the same decision, the same envelope");
    // Another call under the same id: 409.
    let mut other = call.clone();
    other["args_json"] = json!(r#"{"path":"x"}"#);
    let (status, v) = gate(&s, &worker, &other).await;
    assert_eq!(status, StatusCode::CONFLICT, "{v}");
    assert_eq!(code(&v), "id_conflict");
    // Another session may use the id.
    other["session_id"] = json!("s-2");
    assert_eq!(gate(&s, &worker, &other).await.0, StatusCode::OK);
    // An ask is idempotent too: the same interaction, one pending.
    let ask = shell_call("r-2", &["ls"]);
    let (_, a1) = gate(&s, &worker, &ask).await;
    let (_, a2) = gate(&s, &worker, &ask).await;
    assert_eq!(a1["decision"], "ask");
    assert_eq!(a1, a2);
    let (_, list) = s.get("/v1/interactions?session_id=s-1", &s.admin).await;
    assert_eq!(list["items"].as_array().unwrap().len(), 1, "{list}");
}

#[tokio::test]
async fn bad_calls_are_refused_before_any_decision() {
    let s = start(POLICY).await;
    let (worker, approver) = s.worker_and_approver().await;
    let bound = s.token("bob-worker", "worker", Some("bob")).await;
    let cases: Vec<(Value, StatusCode, &str)> = vec![
        // Duplicated keys in args_json: two readers could see two calls.
        (
            json!({"args_json": r#"{"argv":["ls"],"argv":["rm","-rf","/"]}"#}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "twice",
        ),
        (
            json!({"args_json": "{not json"}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "args_json",
        ),
        (
            json!({"required_capabilities": ["Net"]}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "required_capabilities",
        ),
        (
            json!({"session_id": "bad session"}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "session_id",
        ),
        (
            json!({"request_id": ""}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "request_id",
        ),
        (
            json!({"tool_name": ""}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "tool_name",
        ),
        (
            json!({"timeout_s": 0}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "timeout_s",
        ),
        (
            json!({"args_json": format!("\"{}\"", "a".repeat(300 * 1024))}),
            StatusCode::PAYLOAD_TOO_LARGE,
            "args_json",
        ),
    ];
    for (patch, status, needle) in cases {
        let mut call = shell_call("bad-1", &["ls"]);
        for (k, v) in patch.as_object().unwrap() {
            call[k] = v.clone();
        }
        let (got, v) = gate(&s, &worker, &call).await;
        assert_eq!(got, status, "{patch}: {v}");
        assert!(message(&v).contains(needle), "{patch}: {v}");
    }
    // A worker bound to bob naming alice: 403; naming nobody acts for bob.
    let (status, v) = gate(&s, &bound, &shell_call("b-1", &["ls"])).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{v}");
    assert_eq!(code(&v), "caller_mismatch");
    let mut call = shell_call("b-2", &[]);
    call["caller"] = json!("");
    call["tool_name"] = json!("fs.read");
    let (_, v) = gate(&s, &bound, &call).await;
    assert_eq!(verified(&s, &v["approval"]).await.payload.caller, "bob");
    // Roles: an approver may not call the gate or spend nonces.
    assert_eq!(
        gate(&s, &approver, &shell_call("x", &[])).await.0,
        StatusCode::FORBIDDEN
    );
    assert_eq!(consume(&s, &approver, "n").await, StatusCode::FORBIDDEN);
    assert_eq!(
        consume(&s, &worker, "").await,
        StatusCode::UNPROCESSABLE_ENTITY
    );
    // Nothing was recorded: the id is still free.
    let (_, v) = gate(&s, &worker, &shell_call("bad-1", &["ls"])).await;
    assert_eq!(v["decision"], "ask", "{v}");
}

#[tokio::test]
async fn a_session_grant_covers_the_same_call_until_the_required_set_grows() {
    let s = start(POLICY).await;
    let (worker, approver) = s.worker_and_approver().await;
    ask_and_answer(
        &s,
        &worker,
        &approver,
        &shell_call("g-1", &["ls"]),
        json!({"approved": true, "scope": "session"}),
    )
    .await;
    // The same call again (a new tool-call id): allowed by the grant.
    let (_, v) = gate(&s, &worker, &shell_call("g-2", &["cat", "x"])).await;
    assert_eq!(v["decision"], "allow", "{v}");
    let vr = verified(&s, &v["approval"]).await;
    assert_eq!(
        vr.payload.approver, "alice-approver",
        "the grant's approver"
    );
    assert!(vr.payload.approved_for_session);
    assert_eq!(
        vr.payload.covered_capabilities,
        vec!["proc-exec".to_owned()]
    );
    let entries = audit(&s).await;
    let e = entries
        .iter()
        .rev()
        .find(|e| e["action"] == "gate.allowed")
        .unwrap();
    assert!(
        e["data"]["decided_by"]["grant_id"]
            .as_str()
            .unwrap()
            .starts_with("gr_")
    );
    assert_eq!(e["actor"], "alice-approver");
    // A grown shortfall asks again.
    let mut grown = shell_call("g-3", &["ls"]);
    grown["required_capabilities"] = json!(["net"]);
    let (_, v) = gate(&s, &worker, &grown).await;
    assert_eq!(v["decision"], "ask", "{v}");
    // Another conversation, caller or sandbox mode: not covered.
    for (field, value) in [
        ("conversation_id", "c-2"),
        ("caller", "bob"),
        ("sandbox_mode", "read-only"),
    ] {
        let mut call = shell_call(&format!("g-{field}"), &["ls"]);
        call[field] = json!(value);
        let (_, v) = gate(&s, &worker, &call).await;
        assert_eq!(v["decision"], "ask", "{field}: {v}");
    }
    // A deny rule still wins over the grant.
    let (_, v) = gate(&s, &worker, &shell_call("g-rm", &["rm", "x"])).await;
    assert_eq!(v["decision"], "deny", "{v}");
}

#[tokio::test]
async fn grants_are_listed_narrowed_and_revoked() {
    let s = start(POLICY).await;
    let (worker, approver) = s.worker_and_approver().await;
    let approval = ask_and_answer(
        &s,
        &worker,
        &approver,
        &shell_call("a-1", &["git", "status"]),
        json!({"approved": true, "scope": "always", "grant_args": {"/argv/0": "^git$"}}),
    )
    .await;
    assert!(
        verified(&s, &approval).await.payload.approved_for_session,
        "always signs for session"
    );
    let (status, v) = s.get("/v1/grants", &approver).await;
    assert_eq!(status, StatusCode::OK, "{v}");
    let grants = v["items"].as_array().unwrap();
    assert_eq!(grants.len(), 1, "{v}");
    let g = &grants[0];
    assert_eq!(g["scope"], "always");
    assert_eq!(g["caller"], "alice");
    assert!(g["conversation_id"].is_null());
    assert_eq!(g["tool_name"], "shell");
    assert_eq!(g["covered_capabilities"], json!(["proc-exec"]));
    assert_eq!(g["grant_args"], json!({"/argv/0": "^git$"}));
    assert_eq!(g["approver"], "alice-approver");
    let id = g["id"].as_str().unwrap().to_owned();
    // An always grant holds in another conversation, for matching args only.
    let mut call = shell_call("a-2", &["git", "log"]);
    call["conversation_id"] = json!("c-9");
    assert_eq!(gate(&s, &worker, &call).await.1["decision"], "allow");
    let (_, v) = gate(&s, &worker, &shell_call("a-3", &["ls"])).await;
    assert_eq!(v["decision"], "ask", "grant_args narrow it: {v}");
    // Revoked: asks again; a second revoke is 404; a worker may not revoke.
    assert_eq!(
        s.call(Method::DELETE, &format!("/v1/grants/{id}"), &worker, None)
            .await
            .0,
        StatusCode::FORBIDDEN
    );
    let (status, v) = s
        .call(Method::DELETE, &format!("/v1/grants/{id}"), &approver, None)
        .await;
    assert_eq!(status, StatusCode::OK, "{v}");
    assert_eq!(v["id"], json!(id));
    assert_eq!(
        s.call(Method::DELETE, &format!("/v1/grants/{id}"), &approver, None)
            .await
            .0,
        StatusCode::NOT_FOUND
    );
    assert_eq!(s.get("/v1/grants", &approver).await.1["items"], json!([]));
    let (_, v) = gate(&s, &worker, &shell_call("a-4", &["git", "log"])).await;
    assert_eq!(v["decision"], "ask", "{v}");
    let actions: Vec<Value> = audit(&s)
        .await
        .iter()
        .map(|e| e["action"].clone())
        .collect();
    assert!(actions.contains(&json!("grant.created")));
    assert!(actions.contains(&json!("grant.revoked")));
    // A grant_args regex that does not compile: 422, still pending.
    let (_, v) = gate(&s, &worker, &shell_call("a-5", &["ls"])).await;
    let iid = v["interaction_id"].as_str().unwrap();
    let (status, v) = s
        .respond(
            &approver,
            iid,
            &json!({"request_id": iid, "approved": true, "scope": "session",
                                          "grant_args": {"/argv/0": "("}}),
        )
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{v}");
    assert!(message(&v).contains("grant_args"), "{v}");
    let (_, i) = s.get(&format!("/v1/interactions/{iid}"), &approver).await;
    assert_eq!(i["request"]["status"], "pending");
}

#[tokio::test]
async fn an_edit_is_checked_against_the_policy_again_and_signed() {
    let s = start(POLICY).await;
    let (worker, approver) = s.worker_and_approver().await;
    let call = shell_call("e-1", &["ls"]);
    let (_, v) = gate(&s, &worker, &call).await;
    let id = v["interaction_id"].as_str().unwrap().to_owned();
    // An edit that escapes the policy: 422, the interaction stays pending.
    let escape = json!({"argv": ["rm", "-rf", "/"], "cwd": "/"}).to_string();
    let (status, v) = s
        .respond(
            &approver,
            &id,
            &json!({"request_id": id, "approved": true, "modified_args_json": escape}),
        )
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{v}");
    assert!(message(&v).contains("destructive"), "{v}");
    // An edit that is not JSON, or repeats a key: 422.
    for bad in ["{nope", r#"{"argv":["ls"],"argv":["rm"]}"#] {
        let (status, v) = s
            .respond(
                &approver,
                &id,
                &json!({"request_id": id, "approved": true, "modified_args_json": bad}),
            )
            .await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{bad}: {v}");
    }
    let (_, i) = s.get(&format!("/v1/interactions/{id}"), &approver).await;
    assert_eq!(i["request"]["status"], "pending");
    // A fine edit: signed, bound to the proposed args, resolving to the edit.
    let edit = r#"{"argv":["ls","-a"],"cwd":"/work"}"#;
    let (status, v) = s
        .respond(
            &approver,
            &id,
            &json!({"request_id": id, "approved": true, "modified_args_json": edit}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{v}");
    let vr = verified(&s, &v["approval"]).await;
    assert!(vr.authorizes_call("e-1", "shell", call["args_json"].as_str().unwrap()));
    assert_eq!(vr.resolve_approved_call(), edit);
    let e = audit(&s)
        .await
        .into_iter()
        .rev()
        .find(|e| e["action"] == "interaction.answered")
        .unwrap();
    assert_eq!(e["data"]["modified_args_json"], edit);
    assert_eq!(e["data"]["gate_request_id"], "e-1");
}

#[tokio::test]
async fn self_approval_is_refused_when_the_policy_forbids_it() {
    let policy = format!(
        "{}\n",
        POLICY.replace("self_approval = true", "self_approval = false")
    );
    let s = start(&policy).await;
    let worker = s.token("w", "worker", Some("alice")).await;
    let alice = s.token("alice", "approver", None).await;
    let bob = s.token("bob", "approver", None).await;
    let mut call = shell_call("s-1", &["ls"]);
    call["caller"] = json!("alice");
    let (_, v) = gate(&s, &worker, &call).await;
    let id = v["interaction_id"].as_str().unwrap().to_owned();
    let (status, v) = s
        .respond(&alice, &id, &json!({"request_id": id, "approved": true}))
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{v}");
    assert_eq!(code(&v), "self_approval");
    // Still pending: another person decides.
    let (status, v) = s
        .respond(&bob, &id, &json!({"request_id": id, "approved": true}))
        .await;
    assert_eq!(status, StatusCode::OK, "{v}");
    assert_eq!(verified(&s, &v["approval"]).await.payload.approver, "bob");
}

#[tokio::test]
async fn a_deny_with_feedback_is_signed_and_waited_for() {
    let s = start(POLICY).await;
    let (worker, approver) = s.worker_and_approver().await;
    let approval = ask_and_answer(
        &s,
        &worker,
        &approver,
        &shell_call("d-1", &["ls"]),
        json!({"approved": false, "feedback": "use git status"}),
    )
    .await;
    let vr = verified(&s, &approval).await;
    assert!(!vr.payload.approved);
    assert!(!vr.authorizes_call(
        "d-1",
        "shell",
        &json!({"argv": ["ls"], "cwd": "/work"}).to_string()
    ));
    assert_eq!(s.get("/v1/grants", &approver).await.1["items"], json!([]));
}

#[tokio::test]
async fn keys_rotate_and_old_keys_verify_until_removed() {
    let s = start(POLICY).await;
    let (worker, approver) = s.worker_and_approver().await;
    let mut call = shell_call("k-1", &[]);
    call["tool_name"] = json!("fs.read");
    let (_, before) = gate(&s, &worker, &call).await;
    let old_kid = s.get("/v1/keys", "").await.1["keys"][0]["kid"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(
        s.post("/v1/keys/rotate", &approver, &json!({})).await.0,
        StatusCode::FORBIDDEN
    );
    let (status, jwks) = s.post("/v1/keys/rotate", &s.admin, &json!({})).await;
    assert_eq!(status, StatusCode::OK, "{jwks}");
    let keys = jwks["keys"].as_array().unwrap();
    assert_eq!(keys.len(), 2);
    let new_kid = keys[0]["kid"].as_str().unwrap().to_owned();
    assert_ne!(new_kid, old_kid);
    assert_eq!(s.get("/v1/keys", "").await.1, jwks);
    // New decisions are signed by the new key; the old one still verifies.
    call["request_id"] = json!("k-2");
    let (_, after) = gate(&s, &worker, &call).await;
    assert_eq!(envelope(&after["approval"]).signatures[0].keyid, new_kid);
    verified(&s, &before["approval"]).await;
    // The active key is never removed; an old one is, and stops verifying.
    let (status, v) = s
        .call(
            Method::DELETE,
            &format!("/v1/keys/{new_kid}"),
            &s.admin,
            None,
        )
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{v}");
    assert_eq!(code(&v), "active_key");
    assert_eq!(
        s.call(Method::DELETE, "/v1/keys/0000000000000000", &s.admin, None)
            .await
            .0,
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        s.call(
            Method::DELETE,
            "/v1/keys/..%2F..%2Fadmin.token",
            &s.admin,
            None
        )
        .await
        .0,
        StatusCode::NOT_FOUND
    );
    let (status, v) = s
        .call(
            Method::DELETE,
            &format!("/v1/keys/{old_kid}"),
            &s.admin,
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{v}");
    assert_eq!(v["keys"].as_array().unwrap().len(), 1);
    let keys: TrustedKeys = s.trusted_keys().await;
    assert!(
        verify(
            &envelope(&before["approval"]),
            &keys,
            OffsetDateTime::now_utc()
        )
        .is_err()
    );
    // A restart keeps the rotation.
    let dir = s.stop().await;
    let s = TestServer::start_in(dir, settings(POLICY)).await;
    assert_eq!(
        s.get("/v1/keys", "").await.1["keys"][0]["kid"],
        json!(new_kid)
    );
    let actions: Vec<Value> = audit(&s)
        .await
        .iter()
        .map(|e| e["action"].clone())
        .collect();
    assert!(actions.contains(&json!("key.rotated")) && actions.contains(&json!("key.removed")));
}

#[tokio::test]
async fn a_bad_policy_file_stops_the_server_naming_the_line() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("policy.toml");
    std::fs::write(
        &file,
        "self_approval = true\n\n[[rule]]\ntool = \"x\"\ndecision = \"maybe\"\n",
    )
    .unwrap();
    // The data dir's policy.toml is read by default...
    let mut config = Config::new(dir.path().to_path_buf());
    config.listen = "127.0.0.1:0".into();
    let err = Server::bind(config.clone()).await.unwrap_err().to_string();
    assert!(err.contains("line 5"), "{err}");
    assert!(err.contains("policy.toml"), "{err}");
    // ... and --policy names another file.
    let other = dir.path().join("other.toml");
    std::fs::write(
        &other,
        "[[rule]]\ntool = \"x\"\ndecision = \"allow\"\nbogus = 1\n",
    )
    .unwrap();
    config.policy = Some(other);
    let err = Server::bind(config.clone()).await.unwrap_err().to_string();
    assert!(
        err.contains("line 4") && err.contains("other.toml"),
        "{err}"
    );
    config.policy = Some(dir.path().join("missing.toml"));
    assert!(Server::bind(config).await.is_err());
}

#[tokio::test]
async fn the_policy_file_of_the_data_dir_is_used() {
    let dir = Arc::new(tempfile::tempdir().unwrap());
    std::fs::write(
        dir.path().join("policy.toml"),
        "[[rule]]\ntool = \"*\"\ndecision = \"allow\"\n",
    )
    .unwrap();
    let s = TestServer::start_in(Arc::clone(&dir), Settings::default()).await;
    let (worker, _) = s.worker_and_approver().await;
    let (_, v) = gate(&s, &worker, &shell_call("p-1", &["ls"])).await;
    assert_eq!(v["decision"], "allow", "{v}");
    let e = audit(&s)
        .await
        .into_iter()
        .rev()
        .find(|e| e["action"] == "gate.allowed")
        .unwrap();
    assert!(
        e["data"]["decided_by"]["policy"]
            .as_str()
            .unwrap()
            .ends_with("policy.toml")
    );
}

pub(crate) type Ws =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

pub(crate) async fn operator_socket(s: &TestServer, session: &str, token: &str) -> Ws {
    use tokio_tungstenite::tungstenite::client::IntoClientRequest as _;
    let url = format!(
        "{}/v1/operators/{session}/ws",
        s.url.replacen("http", "ws", 1)
    );
    let mut req = url.into_client_request().unwrap();
    req.headers_mut()
        .insert("authorization", format!("Bearer {token}").parse().unwrap());
    let (mut ws, _) = tokio_tungstenite::connect_async(req).await.unwrap();
    assert_eq!(next_frame(&mut ws).await["type"], "hello");
    ws
}

pub(crate) async fn next_frame(ws: &mut Ws) -> Value {
    use futures_util::StreamExt as _;
    use tokio_tungstenite::tungstenite::Message;
    loop {
        let msg = tokio::time::timeout(std::time::Duration::from_secs(10), ws.next())
            .await
            .expect("a frame within 10 s")
            .expect("the connection is open")
            .expect("a frame");
        if let Message::Text(text) = msg {
            return serde_json::from_str(text.as_str()).unwrap();
        }
    }
}

#[tokio::test]
async fn an_operator_triages_a_gate_call_through_the_same_checks() {
    use futures_util::SinkExt as _;
    use tokio_tungstenite::tungstenite::Message;
    let s = start(POLICY).await;
    let (worker, _) = s.worker_and_approver().await;
    let op = s.token("main-ai", "operator", None).await;
    let mut ws = operator_socket(&s, "s-1", &op).await;
    let mut call = shell_call("op-1", &["ls"]);
    call["route"] = json!(["operator", "human"]);
    let (_, v) = gate(&s, &worker, &call).await;
    assert_eq!(v["decision"], "ask", "{v}");
    let id = v["interaction_id"].as_str().unwrap().to_owned();
    let ask = next_frame(&mut ws).await;
    assert_eq!(ask["type"], "ask", "{ask}");
    assert_eq!(ask["question"]["interaction"]["id"], json!(id));
    // An edit the policy denies is refused, and people get the question.
    let escape = json!({"argv": ["rm", "-rf", "/"]}).to_string();
    let answer = json!({"type": "answer", "req_id": ask["req_id"],
        "value": {"request_id": id, "approved": true, "modified_args_json": escape}});
    ws.send(Message::Text(answer.to_string().into()))
        .await
        .unwrap();
    let refused = next_frame(&mut ws).await;
    assert_eq!(refused["type"], "error", "{refused}");
    assert!(
        refused["message"].as_str().unwrap().contains("destructive"),
        "{refused}"
    );
    let (_, i) = s.get(&format!("/v1/interactions/{id}"), &worker).await;
    assert_eq!(i["request"]["status"], "pending");
    // A second gate call: the operator approves, signed as the operator.
    let mut call = shell_call("op-2", &["ls", "-l"]);
    call["route"] = json!(["operator"]);
    let (_, v) = gate(&s, &worker, &call).await;
    let id = v["interaction_id"].as_str().unwrap().to_owned();
    let ask = next_frame(&mut ws).await;
    let answer = json!({"type": "answer", "req_id": ask["req_id"],
        "value": {"request_id": id, "approved": true}});
    ws.send(Message::Text(answer.to_string().into()))
        .await
        .unwrap();
    let w = wait(&s, &worker, &id).await;
    let vr = verified(&s, &w["approval"]).await;
    assert_eq!(vr.payload.approver, "main-ai");
    assert!(vr.authorizes_call("op-2", "shell", call["args_json"].as_str().unwrap()));
}

/// An ask rule names itself on the interaction it opens (line, tool,
/// reason, and `risk = "high"`), so people see why the call stopped; a
/// client cannot write that note itself.
#[tokio::test]
async fn an_ask_rule_names_itself_and_its_risk_on_the_interaction() {
    let policy = format!(
        "{POLICY}\n[[rule]]\ntool = \"deploy\"\ndecision = \"ask\"\nreason = \"production changes need a person\"\nrisk = \"high\"\n"
    );
    let line = policy
        .lines()
        .position(|l| l == "tool = \"deploy\"")
        .unwrap(); // the rule's [[rule]] header is the line before: 1-based, that is `line`
    let s = start(&policy).await;
    let worker = s.token("agent", "worker", None).await;
    let mut call = shell_call("rq-deploy", &["x"]);
    call["tool_name"] = json!("deploy");
    call["args_json"] = json!("{\"env\":\"prod\"}");
    let (status, v) = gate(&s, &worker, &call).await;
    assert_eq!(status, StatusCode::OK, "{v}");
    let id = v["interaction_id"].as_str().unwrap().to_owned();
    let (_, view) = s.get(&format!("/v1/interactions/{id}"), &s.admin).await;
    let note = &view["request"]["gate"];
    assert_eq!(note["rule_line"], json!(line), "{view}");
    assert_eq!(note["rule_tool"], "deploy");
    assert_eq!(note["rule_reason"], "production changes need a person");
    assert_eq!(note["risk"], "high");
    assert_eq!(note["policy"], "test-policy.toml");

    // Stopped by missing capabilities alone: no rule to name.
    let (_, v) = gate(&s, &worker, &shell_call("rq-ls", &["ls"])).await;
    let id = v["interaction_id"].as_str().unwrap().to_owned();
    let (_, view) = s.get(&format!("/v1/interactions/{id}"), &s.admin).await;
    assert!(view["request"].get("gate").is_none(), "{view}");

    // A worker cannot forge the note on an interaction of its own.
    let forged = json!({
        "session_id": "s-1",
        "kind": {"type": "tool_approval", "tool_name": "deploy", "args_json": "{}"},
        "gate": {"rule_line": 1, "rule_reason": "approved by security", "risk": "high"},
    });
    let (status, v) = s.post("/v1/interactions", &worker, &forged).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("gate: set by lev"),
        "{v}"
    );
    // Nor what the policy says of its votes (SPEC section 13).
    for (field, value) in [
        ("approvals_needed", json!(1)),
        ("quorum", json!({"approvers": ["mallory"]})),
        (
            "vote_binding",
            json!({"request_id": "x", "tool_name": "deploy", "args_sha256": "00",
                   "conversation_id": "", "caller": "", "sandbox_mode": ""}),
        ),
    ] {
        let mut forged = json!({
            "session_id": "s-1",
            "kind": {"type": "tool_approval", "tool_name": "deploy", "args_json": "{}"},
        });
        forged[field] = value;
        let (status, v) = s.post("/v1/interactions", &worker, &forged).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{v}");
        assert!(
            v["error"]["message"]
                .as_str()
                .unwrap()
                .starts_with(&format!("{field}: set by lev")),
            "{v}"
        );
    }
}
