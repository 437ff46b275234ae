//! Tokens and roles: 401 without a known token, 403 for the wrong role or
//! another caller, token management, the admin token file.

use reqwest::{Method, StatusCode};
use serde_json::json;

use crate::support::{TestServer, code, free_text, tool_approval};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_token_or_an_unknown_one_is_401() {
    let s = TestServer::start().await;
    let (status, v) = s.get("/v1/interactions", "").await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert_eq!(code(&v), "unauthorized");
    let (status, _) = s.get("/v1/interactions", "lev_not-a-real-token").await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let resp = s
        .http
        .get(s.path("/v1/interactions"))
        .header("authorization", "Basic YTpi")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::UNAUTHORIZED);
    // Health and keys need no token.
    let (status, v) = s.get("/v1/health", "").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(v["status"], "ok");
    assert_eq!(v["store"], "sqlite");
    assert!(v["version"].is_string());
    let (status, v) = s.get("/v1/keys", "").await;
    assert_eq!(status, StatusCode::OK);
    let key = &v["keys"][0];
    assert_eq!(
        (key["kty"].as_str(), key["crv"].as_str()),
        (Some("OKP"), Some("Ed25519"))
    );
    assert_eq!(
        (key["alg"].as_str(), key["use"].as_str()),
        (Some("EdDSA"), Some("sig"))
    );
    assert_eq!(key["kid"].as_str().unwrap().len(), 16);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_route_checks_the_role() {
    let s = TestServer::start().await;
    let (worker, approver) = s.worker_and_approver().await;
    let operator = s.token("op", "operator", None).await;
    let id = s.create(&worker, &free_text("s-1", "?")).await;
    let answer = json!({"request_id": id, "value": "v"});
    let forbidden: Vec<(&str, Method, String, Option<serde_json::Value>)> = vec![
        (
            &approver,
            Method::POST,
            "/v1/interactions".into(),
            Some(free_text("s-1", "?")),
        ),
        (&worker, Method::GET, "/v1/interactions".into(), None),
        (
            &worker,
            Method::POST,
            format!("/v1/interactions/{id}/respond"),
            Some(answer.clone()),
        ),
        (
            &approver,
            Method::GET,
            format!("/v1/interactions/{id}/wait?timeout_s=0"),
            None,
        ),
        (
            &approver,
            Method::POST,
            format!("/v1/interactions/{id}/cancel"),
            Some(json!({})),
        ),
        (
            &operator,
            Method::GET,
            format!("/v1/interactions/{id}"),
            None,
        ),
        (&worker, Method::GET, "/v1/events".into(), None),
        (&approver, Method::GET, "/v1/tokens".into(), None),
        (
            &worker,
            Method::POST,
            "/v1/tokens".into(),
            Some(json!({"name": "x", "role": "admin"})),
        ),
        (
            &approver,
            Method::DELETE,
            "/v1/tokens/worker-1".into(),
            None,
        ),
        (&approver, Method::GET, "/v1/audit".into(), None),
        (&worker, Method::GET, "/metrics".into(), None),
        (
            &operator,
            Method::GET,
            format!("/v1/blobs/{}", "a".repeat(64)),
            None,
        ),
    ];
    for (token, method, path, body) in forbidden {
        let (status, v) = s.call(method.clone(), &path, token, body.as_ref()).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{method} {path} -> {v}");
        assert_eq!(code(&v), "forbidden");
    }
    // The admin may do everything.
    let (status, _) = s.get("/v1/interactions", &s.admin).await;
    assert_eq!(status, StatusCode::OK);
    let (status, v) = s.respond(&s.admin, &id, &answer).await;
    assert_eq!(status, StatusCode::OK, "{v}");
    let (_, view) = s.get(&format!("/v1/interactions/{id}"), &s.admin).await;
    assert_eq!(view["request"]["answered_by"], "admin");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bound_worker_acts_for_its_caller_only() {
    let s = TestServer::start().await;
    let bound = s.token("alice-agent", "worker", Some("alice")).await;
    let free = s.token("shared-agent", "worker", None).await;
    let (status, v) = s
        .post("/v1/interactions", &bound, &free_text("s-1", "?"))
        .await;
    assert_eq!(status, StatusCode::CREATED);
    assert_eq!(v["caller"], "alice", "filled in by the server");
    let mut body = tool_approval("s-1", "{}");
    body["caller"] = json!("alice");
    let (status, _) = s.post("/v1/interactions", &bound, &body).await;
    assert_eq!(status, StatusCode::CREATED);
    body["caller"] = json!("bob");
    let (status, v) = s.post("/v1/interactions", &bound, &body).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{v}");
    assert_eq!(code(&v), "caller_mismatch");
    // An unbound worker names the caller; the bound one cannot touch bob's.
    let (status, bobs) = s.post("/v1/interactions", &free, &body).await;
    assert_eq!(status, StatusCode::CREATED);
    let bob_id = bobs["id"].as_str().unwrap();
    let (status, _) = s.get(&format!("/v1/interactions/{bob_id}"), &bound).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let (status, _) = s
        .post(
            &format!("/v1/interactions/{bob_id}/cancel"),
            &bound,
            &json!({}),
        )
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_are_created_listed_and_revoked_at_once() {
    let s = TestServer::start().await;
    let (status, v) = s
        .post(
            "/v1/tokens",
            &s.admin,
            &json!({"name": "ci", "role": "worker", "caller": "ci-bot"}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{v}");
    assert_eq!(v["name"], "ci");
    assert_eq!(v["role"], "worker");
    let secret = v["token"].as_str().unwrap().to_owned();
    assert!(
        secret.starts_with("lev_") && secret.len() == 4 + 43,
        "{secret}"
    );
    let (status, _) = s
        .post("/v1/interactions", &secret, &free_text("s-1", "?"))
        .await;
    assert_eq!(status, StatusCode::CREATED);

    let (status, list) = s.get("/v1/tokens", &s.admin).await;
    assert_eq!(status, StatusCode::OK);
    let names: Vec<&str> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["admin", "ci"]);
    assert!(
        !list.to_string().contains(&secret),
        "secrets are never listed"
    );
    assert_eq!(list["items"][1]["caller"], "ci-bot");

    let (status, v) = s
        .post(
            "/v1/tokens",
            &s.admin,
            &json!({"name": "ci", "role": "approver"}),
        )
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{v}");
    assert_eq!(code(&v), "name_taken");
    for bad in [
        json!({"name": "has space", "role": "worker"}),
        json!({"name": "x", "role": "root"}),
        json!({"name": "x", "role": "approver", "caller": "alice"}),
        json!({"role": "worker"}),
    ] {
        let (status, v) = s.post("/v1/tokens", &s.admin, &bad).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{bad} -> {v}");
    }

    let (status, _) = s
        .call(Method::DELETE, "/v1/tokens/ci", &s.admin, None)
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (status, _) = s
        .post("/v1/interactions", &secret, &free_text("s-1", "?"))
        .await;
    assert_eq!(
        status,
        StatusCode::UNAUTHORIZED,
        "revocation takes effect at once"
    );
    let (status, _) = s
        .call(Method::DELETE, "/v1/tokens/ci", &s.admin, None)
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_admin_token_file_is_private_and_kept_across_restarts() {
    let s = TestServer::start().await;
    let path = s.data_dir().join("admin.token");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let keys = std::fs::read_dir(s.data_dir().join("keys")).unwrap();
        for entry in keys {
            let mode = entry.unwrap().metadata().unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o600);
        }
    }
    let admin = s.admin.clone();
    let kid = s.get("/v1/keys", "").await.1["keys"][0]["kid"].clone();
    let dir = s.stop().await;
    let s = TestServer::start_in(dir, lev_server::Settings::default()).await;
    assert_eq!(s.admin, admin, "the same admin token after a restart");
    assert_eq!(
        s.get("/v1/keys", "").await.1["keys"][0]["kid"],
        kid,
        "the same key"
    );
    let (status, _) = s.get("/v1/tokens", &admin).await;
    assert_eq!(status, StatusCode::OK);
}
