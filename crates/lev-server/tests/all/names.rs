//! Names that read alike (issue 28, item 9): token names are compared
//! folded (case, and runs of `. _ : -` at the ends or between words), for
//! the names lev writes itself and for names already taken; a look-alike
//! made before this check keeps working; a caller that reads like the
//! approver is the approver's own call.

use std::sync::Arc;

use lev_approval::policy::Policy;
use lev_protocol::api::{Role, TokenInfo};
use lev_server::Settings;
use lev_store::{AlikeNames, TokenCreateOutcome, TokenRecord};
use reqwest::StatusCode;
use serde_json::json;
use time::OffsetDateTime;

use crate::support::{TestServer, code, message};

async fn create(s: &TestServer, name: &str) -> (StatusCode, serde_json::Value) {
    s.post(
        "/v1/tokens",
        &s.admin,
        &json!({"name": name, "role": "approver"}),
    )
    .await
}

#[tokio::test]
async fn names_that_read_like_reserved_ones_are_refused() {
    let s = TestServer::start().await;
    for name in [
        "Policy",
        "policy.",
        "POLICY",
        "_policy_",
        "Timeout",
        "system-",
        "Operator",
        "lev",
        "LEV.",
        "Person:ann",
        ".person:ann",
        "Group:oncall",
        "TASK:1",
    ] {
        let (status, e) = create(&s, name).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{name}: {e}");
        assert!(message(&e).contains("reserved"), "{name}: {e}");
    }
    // Names that merely start like one are names like any other.
    for name in ["policy-bot", "person-ann", "task-runner", "levy"] {
        let (status, e) = create(&s, name).await;
        assert_eq!(status, StatusCode::CREATED, "{name}: {e}");
    }
}

#[tokio::test]
async fn a_name_that_reads_like_a_taken_one_is_refused() {
    let s = TestServer::start().await;
    let (status, _) = create(&s, "ops").await;
    assert_eq!(status, StatusCode::CREATED);
    for name in ["OPS", "Ops.", "ops-", "_ops"] {
        let (status, e) = create(&s, name).await;
        assert_eq!(status, StatusCode::CONFLICT, "{name}: {e}");
        assert_eq!(code(&e), "name_taken");
        assert!(message(&e).contains("\"ops\""), "{name}: {e}");
    }
    let (status, _) = create(&s, "ops-team").await;
    assert_eq!(status, StatusCode::CREATED);
    for name in ["OPS_team", "ops.team", "ops--team"] {
        let (status, e) = create(&s, name).await;
        assert_eq!(status, StatusCode::CONFLICT, "{name}: {e}");
    }
    // The admin token lev made itself is a name like the others.
    let (status, e) = create(&s, "Admin").await;
    assert_eq!(status, StatusCode::CONFLICT, "{e}");
    // Revoked, the name is free again, in any spelling.
    let (status, _) = s
        .call(reqwest::Method::DELETE, "/v1/tokens/ops", &s.admin, None)
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (status, e) = create(&s, "OPS").await;
    assert_eq!(status, StatusCode::CREATED, "{e}");
}

/// Tokens whose names collide folded, made before names were compared so
/// (written here straight to the store), keep working: each authenticates
/// as itself and is listed.
#[tokio::test]
async fn look_alikes_made_before_keep_working() {
    let s = TestServer::start().await;
    let mut secrets = Vec::new();
    for (i, name) in ["Policy", "OPS", "ops"].iter().enumerate() {
        let secret = format!("lev_legacy-{i}");
        let record = TokenRecord {
            info: TokenInfo {
                name: (*name).into(),
                role: Role::Approver,
                caller: None,
                sessions: None,
                created_at: OffsetDateTime::now_utc(),
            },
            hash: lev_approval::sha256_hex(secret.as_bytes()),
        };
        assert_eq!(
            s.state
                .store()
                .create_token(record, "system", AlikeNames::Allow)
                .await
                .unwrap(),
            TokenCreateOutcome::Created
        );
        secrets.push(((*name).to_owned(), secret));
    }
    for (name, secret) in &secrets {
        let (status, me) = s.get("/v1/me", secret).await;
        assert_eq!(status, StatusCode::OK, "{name}: {me}");
        assert_eq!(me["name"], name.as_str(), "{me}");
    }
    let (_, list) = s.get("/v1/tokens", &s.admin).await;
    let names: Vec<&str> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    for (name, _) in &secrets {
        assert!(names.contains(&name.as_str()), "{names:?}");
    }
}

/// `self_approval = false` holds for a caller spelled like the approver.
#[tokio::test]
async fn a_caller_that_reads_like_the_approver_is_their_own_call() {
    let s = TestServer::start_with(Settings {
        policy: Arc::new(Policy::parse("self_approval = false\ndefault = \"ask\"\n").unwrap()),
        ..Settings::default()
    })
    .await;
    let worker = s.token("worker-n", "worker", None).await;
    let ann = s.token("ann", "approver", None).await;
    for (i, caller) in ["Ann", "ann.", "ANN"].iter().enumerate() {
        let (status, v) = s
            .post(
                "/v1/gate",
                &worker,
                &json!({"session_id": "s-n", "request_id": format!("rq-{i}"),
                        "caller": caller, "tool_name": "deploy", "args_json": "{}"}),
            )
            .await;
        assert_eq!(status, StatusCode::OK, "{v}");
        let id = v["interaction_id"].as_str().unwrap().to_owned();
        let (status, e) = s
            .respond(
                &ann,
                &id,
                &json!({"request_id": id, "approved": true, "scope": "once"}),
            )
            .await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{caller}: {e}");
        assert_eq!(code(&e), "self_approval");
    }
}
