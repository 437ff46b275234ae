//! The web dashboard: its page under a strict CSP, login with a token into a
//! cookie session, CSRF on every cookie-authenticated change, `@path` below
//! the attach root; and, in `browser`, the page itself in a real headless
//! Chromium (`passkeys_browser` and `votes_browser`: votes on a quorum;
//! `forms_browser`: a form filled in field by field; `stats_browser`: `GET
//! /v1/stats` and the Stats page with its chart).

#[path = "dashboard_browser.rs"]
mod browser;
#[path = "browser_support.rs"]
mod browser_support;
#[path = "forms_browser.rs"]
mod forms_browser;
#[path = "passkeys_browser.rs"]
mod passkeys_browser;
#[path = "stats_browser.rs"]
mod stats_browser;
#[path = "votes_browser.rs"]
mod votes_browser;

use lev_server::Settings;
use reqwest::header::{CONTENT_TYPE, COOKIE, SET_COOKIE};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::support::{TestServer, code, free_text, tool_approval};

/// A dashboard login: the cookie's value, the CSRF token, the body.
struct Login {
    cookie: String,
    csrf: String,
    set_cookie: String,
    body: Value,
}

async fn login(s: &TestServer, token: &str) -> Login {
    let resp = s
        .http
        .post(s.path("/v1/login"))
        .json(&json!({"token": token}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    let set_cookie = resp
        .headers()
        .get(SET_COOKIE)
        .expect("a session cookie")
        .to_str()
        .unwrap()
        .to_owned();
    let cookie = set_cookie
        .split(';')
        .next()
        .and_then(|kv| kv.strip_prefix("lev_session="))
        .expect("the lev_session cookie")
        .to_owned();
    let body: Value = resp.json().await.unwrap();
    let csrf = body["csrf_token"].as_str().unwrap().to_owned();
    Login {
        cookie,
        csrf,
        set_cookie,
        body,
    }
}

/// A request with the session cookie (and the CSRF header when given).
async fn with_cookie(
    s: &TestServer,
    method: Method,
    path: &str,
    cookie: &str,
    csrf: Option<&str>,
    body: Option<&Value>,
) -> (StatusCode, Value) {
    let mut rb = s
        .http
        .request(method, s.path(path))
        .header(COOKIE, format!("other=1; lev_session={cookie}"));
    if let Some(csrf) = csrf {
        rb = rb.header("x-csrf-token", csrf);
    }
    if let Some(b) = body {
        rb = rb.json(b);
    }
    let resp = rb.send().await.unwrap();
    let status = resp.status();
    let text = resp.text().await.unwrap();
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_and_its_assets_are_served_with_a_strict_policy() {
    let s = TestServer::start().await;
    let resp = s.http.get(s.path("/")).send().await.unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    let h = resp.headers().clone();
    assert_eq!(h[CONTENT_TYPE], "text/html; charset=utf-8");
    assert_eq!(
        h["content-security-policy"],
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
         connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"
    );
    assert_eq!(h["x-frame-options"], "DENY");
    assert_eq!(h["x-content-type-options"], "nosniff");
    assert_eq!(h["referrer-policy"], "no-referrer");
    let html = resp.text().await.unwrap();
    assert!(html.contains(r#"<script type="module" src="assets/main.js?v="#));
    assert_eq!(h["cache-control"], "no-cache");

    // Every asset the page names (its script, the modules it preloads, its
    // style sheet, each with the assets' version) is served with its type,
    // may be kept, and revalidates; asked for without the version, it is
    // revalidated on each use, as the page is.
    let mut assets: Vec<String> = Vec::new();
    for attr in ["src=\"assets/", "href=\"assets/"] {
        for rest in html.split(attr).skip(1) {
            assets.push(format!("/assets/{}", rest.split('"').next().unwrap()));
        }
    }
    assert!(assets.len() > 10, "{assets:?}");
    for path in &assets {
        let ty = if path.contains(".css?") {
            "text/css; charset=utf-8"
        } else {
            "text/javascript; charset=utf-8"
        };
        assert!(
            path.contains(".js?v=") || path.contains(".css?v="),
            "{path}"
        );
        let resp = s.http.get(s.path(path)).send().await.unwrap();
        assert_eq!(resp.status(), StatusCode::OK, "{path}");
        assert_eq!(resp.headers()[CONTENT_TYPE], ty, "{path}");
        assert_eq!(
            resp.headers()["cache-control"],
            "public, max-age=31536000, immutable",
            "{path}"
        );
        assert_eq!(resp.headers()["x-content-type-options"], "nosniff");
        let etag = resp.headers()["etag"].to_str().unwrap().to_owned();
        assert!(!resp.bytes().await.unwrap().is_empty());
        // Revalidation: the same version is 304 without a body.
        let again = s
            .http
            .get(s.path(path))
            .header("if-none-match", &etag)
            .send()
            .await
            .unwrap();
        assert_eq!(again.status(), StatusCode::NOT_MODIFIED, "{path}");
        let unversioned = path.split('?').next().unwrap();
        for other in [unversioned.to_owned(), format!("{unversioned}?v=0")] {
            let resp = s.http.get(s.path(&other)).send().await.unwrap();
            assert_eq!(resp.status(), StatusCode::OK, "{other}");
            assert_eq!(resp.headers()["cache-control"], "no-cache", "{other}");
            assert_eq!(resp.headers()["etag"].to_str().unwrap(), etag, "{other}");
        }
    }
    let (status, v) = s.get("/assets/nope.js", "").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(code(&v), "not_found");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_login_opens_a_cookie_session_that_the_api_accepts() {
    let s = TestServer::start().await;
    let (worker, approver) = s.worker_and_approver().await;

    // Bad tokens, wrong roles, wrong content type.
    let (status, v) = s.post("/v1/login", "", &json!({"token": "lev_nope"})).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{v}");
    let (status, v) = s.post("/v1/login", "", &json!({"token": worker})).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{v}");
    let resp = s
        .http
        .post(s.path("/v1/login"))
        .header(CONTENT_TYPE, "text/plain")
        .body(json!({"token": approver}).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::BAD_REQUEST);

    let l = login(&s, &approver).await;
    assert_eq!(l.body["name"], "alice-approver");
    assert_eq!(l.body["role"], "approver");
    assert_eq!(l.body["attach_root"], false);
    for flag in ["HttpOnly", "SameSite=Strict", "Path=/"] {
        assert!(l.set_cookie.contains(flag), "{}", l.set_cookie);
    }
    assert!(
        !l.set_cookie.contains("Secure"),
        "plain HTTP: {}",
        l.set_cookie
    );
    assert!(l.cookie.len() >= 40 && l.csrf.len() >= 40);

    // The cookie works on /v1; /v1/me hands the CSRF token back.
    let (status, me) = with_cookie(&s, Method::GET, "/v1/me", &l.cookie, None, None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(me["name"], "alice-approver");
    assert_eq!(me["csrf_token"], l.csrf.as_str());
    let (status, _) = with_cookie(&s, Method::GET, "/v1/interactions", &l.cookie, None, None).await;
    assert_eq!(status, StatusCode::OK);
    // A bearer token's /v1/me has no CSRF token.
    let (status, me) = s.get("/v1/me", &approver).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(me["csrf_token"], Value::Null);
    // No cookie, no token: 401; a made-up cookie is no session.
    let (status, _) = s.get("/v1/me", "").await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let (status, _) = with_cookie(&s, Method::GET, "/v1/me", "made-up", None, None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    // Public routes do not care about a stale cookie.
    let (status, _) = with_cookie(&s, Method::GET, "/v1/health", "made-up", None, None).await;
    assert_eq!(status, StatusCode::OK);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cookie_changes_need_the_csrf_token_and_answer_under_the_tokens_name() {
    let s = TestServer::start().await;
    let (worker, approver) = s.worker_and_approver().await;
    let l = login(&s, &approver).await;
    let id = s.create(&worker, &free_text("s-1", "name it")).await;
    let path = format!("/v1/interactions/{id}/respond");
    let answer = json!({"request_id": id, "value": "Nimbus"});

    for csrf in [None, Some("wrong"), Some("")] {
        let (status, v) =
            with_cookie(&s, Method::POST, &path, &l.cookie, csrf, Some(&answer)).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{csrf:?}: {v}");
        assert_eq!(code(&v), "csrf");
    }
    // Another session's token does not fit this one.
    let other = login(&s, &approver).await;
    let (status, v) = with_cookie(
        &s,
        Method::POST,
        &path,
        &l.cookie,
        Some(&other.csrf),
        Some(&answer),
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert_eq!(code(&v), "csrf");

    let (status, v) = with_cookie(
        &s,
        Method::POST,
        &path,
        &l.cookie,
        Some(&l.csrf),
        Some(&answer),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{v}");
    let (_, got) = s
        .get(&format!("/v1/interactions/{id}/wait?timeout_s=1"), &worker)
        .await;
    assert_eq!(got["status"], "answered");
    assert_eq!(got["response"]["value"], "Nimbus");
    let (_, view) = s.get(&format!("/v1/interactions/{id}"), &worker).await;
    assert_eq!(view["request"]["answered_by"], "alice-approver");

    // A bearer token beside a cookie wins, and needs no CSRF token.
    let id2 = s.create(&worker, &free_text("s-1", "again")).await;
    let resp = s
        .http
        .post(s.path(&format!("/v1/interactions/{id2}/respond")))
        .bearer_auth(&approver)
        .header(COOKIE, format!("lev_session={}", l.cookie))
        .json(&json!({"request_id": id2, "value": "x"}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn logout_and_revocation_end_the_session() {
    let s = TestServer::start().await;
    let (_, approver) = s.worker_and_approver().await;
    let l = login(&s, &approver).await;

    // Logging out takes the CSRF token too.
    let (status, v) = with_cookie(&s, Method::POST, "/v1/logout", &l.cookie, None, None).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{v}");
    let resp = s
        .http
        .post(s.path("/v1/logout"))
        .header(COOKIE, format!("lev_session={}", l.cookie))
        .header("x-csrf-token", &l.csrf)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    let cleared = resp.headers()[SET_COOKIE].to_str().unwrap();
    assert!(
        cleared.starts_with("lev_session=;") && cleared.contains("Max-Age=0"),
        "{cleared}"
    );
    let (status, _) = with_cookie(&s, Method::GET, "/v1/me", &l.cookie, None, None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);

    // Revoking the token ends its sessions at once.
    let l = login(&s, &approver).await;
    let (status, _) = with_cookie(&s, Method::GET, "/v1/me", &l.cookie, None, None).await;
    assert_eq!(status, StatusCode::OK);
    let (status, _) = s
        .call(Method::DELETE, "/v1/tokens/alice-approver", &s.admin, None)
        .await;
    assert!(status.is_success());
    let (status, _) = with_cookie(&s, Method::GET, "/v1/me", &l.cookie, None, None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_path_in_a_dashboard_reply_attaches_a_file_below_the_attach_root_only() {
    let root = tempfile::tempdir().unwrap();
    std::fs::write(root.path().join("notes.md"), "# the notes\n").unwrap();
    let s = TestServer::start_with(Settings {
        attach_root: Some(root.path().to_path_buf()),
        ..Settings::default()
    })
    .await;
    let (worker, approver) = s.worker_and_approver().await;
    let l = login(&s, &approver).await;
    assert_eq!(l.body["attach_root"], true);

    let id = s.create(&worker, &free_text("s-1", "notes?")).await;
    let path = format!("/v1/interactions/{id}/respond");
    // Outside the root: refused, the interaction stays pending.
    let bad = json!({"request_id": id, "value": "see @../lev-outside-secret/x"});
    let (status, v) = with_cookie(
        &s,
        Method::POST,
        &path,
        &l.cookie,
        Some(&l.csrf),
        Some(&bad),
    )
    .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{v}");
    let answer = json!({"request_id": id, "value": "see @notes.md, thanks @bob"});
    let (status, v) = with_cookie(
        &s,
        Method::POST,
        &path,
        &l.cookie,
        Some(&l.csrf),
        Some(&answer),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{v}");
    let parts = v["response"]["parts"].as_array().unwrap();
    assert_eq!(parts.len(), 1, "{v}");
    assert_eq!(parts[0]["name"], "notes.md");
    assert_eq!(parts[0]["media_type"], "text/markdown");
    assert_eq!(parts[0]["size"], 12);
    assert_eq!(v["response"]["value"], "see @notes.md, thanks @bob");

    // Through a bearer token (the CLI reads @path on its own machine), the
    // server attaches nothing.
    let id = s.create(&worker, &free_text("s-1", "again")).await;
    let (status, v) = s
        .respond(
            &approver,
            &id,
            &json!({"request_id": id, "value": "see @notes.md"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{v}");
    assert!(v["response"].get("parts").is_none(), "{v}");

    // Without an attach root, @path stays text in a dashboard reply too.
    let plain = TestServer::start().await;
    let (worker, approver) = plain.worker_and_approver().await;
    let l = login(&plain, &approver).await;
    let id = plain
        .create(&worker, &tool_approval("s-1", r#"{"argv":["ls"]}"#))
        .await;
    let (status, _) = with_cookie(
        &plain,
        Method::POST,
        &format!("/v1/interactions/{id}/respond"),
        &l.cookie,
        Some(&l.csrf),
        Some(&json!({"request_id": id, "approved": true, "scope": "once"})),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let id = plain.create(&worker, &free_text("s-1", "x")).await;
    let (status, v) = with_cookie(
        &plain,
        Method::POST,
        &format!("/v1/interactions/{id}/respond"),
        &l.cookie,
        Some(&l.csrf),
        Some(&json!({"request_id": id, "value": "see @notes.md"})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{v}");
    assert!(v["response"].get("parts").is_none(), "{v}");
}

/// A page on another origin (another localhost port is same-site, so the
/// SameSite=Strict cookie goes along) may not use the dashboard's cookie:
/// API requests, WebSocket upgrades and logins from it get 403 `origin`;
/// the server's own origin, under any loopback name, is accepted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cookie_requests_and_upgrades_from_another_origin_are_refused() {
    use tokio_tungstenite::tungstenite::client::IntoClientRequest as _;
    let s = TestServer::start().await;
    let l = login(&s, &s.admin).await;
    let base = s.path("");
    let port = base
        .rsplit(':')
        .next()
        .unwrap()
        .trim_end_matches('/')
        .to_owned();
    let other = if port == "8080" { "8081" } else { "8080" };
    let get = |origin: Option<String>| {
        let mut rb = s
            .http
            .get(s.path("/v1/interactions"))
            .header(COOKIE, format!("lev_session={}", l.cookie));
        if let Some(o) = origin {
            rb = rb.header("origin", o);
        }
        rb.send()
    };
    for (origin, want) in [
        (Some(format!("http://localhost:{other}")), 403),
        (Some(format!("http://127.0.0.1:{other}")), 403),
        (Some("null".to_owned()), 403),
        (Some(format!("https://127.0.0.1:{port}")), 403),
        (Some(format!("http://127.0.0.1:{port}")), 200),
        (Some(format!("http://localhost:{port}")), 200),
        (None, 200),
    ] {
        let resp = get(origin.clone()).await.unwrap();
        assert_eq!(resp.status().as_u16(), want, "{origin:?}");
        if want == 403 {
            let v: Value = resp.json().await.unwrap();
            assert_eq!(code(&v), "origin", "{v}");
        }
    }
    // A bearer token is not a browser's ambient credential: no Origin check.
    let resp = s
        .req(Method::GET, "/v1/interactions", &s.admin)
        .header("origin", format!("http://localhost:{other}"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);

    // The operator socket, opened with the cookie.
    let ws_url = format!("{}/v1/operators/s-1/ws", base.replacen("http", "ws", 1));
    let upgrade = |origin: Option<String>| {
        let mut req = ws_url.clone().into_client_request().unwrap();
        req.headers_mut().insert(
            "cookie",
            format!("lev_session={}", l.cookie).parse().unwrap(),
        );
        if let Some(o) = origin {
            req.headers_mut().insert("origin", o.parse().unwrap());
        }
        tokio_tungstenite::connect_async(req)
    };
    for origin in [Some(format!("http://localhost:{other}")), None] {
        match upgrade(origin.clone()).await {
            Err(tokio_tungstenite::tungstenite::Error::Http(resp)) => {
                assert_eq!(resp.status().as_u16(), 403, "{origin:?}");
                let v: Value = serde_json::from_slice(resp.body().as_deref().unwrap()).unwrap();
                assert_eq!(code(&v), "origin", "{v}");
            }
            other => panic!("{origin:?}: expected 403, found {:?}", other.map(|_| ())),
        }
    }
    assert!(
        upgrade(Some(format!("http://127.0.0.1:{port}")))
            .await
            .is_ok(),
        "the dashboard's own origin may open it"
    );

    // Nor may another origin log a browser in.
    let resp = s
        .http
        .post(s.path("/v1/login"))
        .header("origin", format!("http://localhost:{other}"))
        .json(&json!({"token": s.admin}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::FORBIDDEN);
}

/// A passkey registration is checked before anything is kept: a bearer
/// token (not the dashboard) is 403 `dashboard_only`; client data of
/// another type, challenge or origin, an algorithm other than ES256 or
/// EdDSA, a key that is not one, an empty credential id: each a 4xx that
/// names the problem, and the person holds no key afterwards. The same
/// registration done right is taken.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn passkey_registrations_that_do_not_fit_are_refused_and_keep_nothing() {
    use lev_approval::{decode_base64, encode_base64, encode_base64url};

    let s = TestServer::start().await;
    let bob = s.token("bob", "approver", None).await;
    let l = login(&s, &bob).await;
    let port = s.url.rsplit(':').next().unwrap().to_owned();
    let host = format!("localhost:{port}");
    let origin = format!("http://{host}");
    // The dashboard's own requests: on a domain name, from its origin.
    let dashboard = |method: Method, path: &str, body: Option<&Value>| {
        let mut rb = s
            .http
            .request(method, s.path(path))
            .header("host", &host)
            .header("origin", &origin)
            .header(COOKIE, format!("lev_session={}", l.cookie))
            .header("x-csrf-token", &l.csrf);
        if let Some(b) = body {
            rb = rb.json(b);
        }
        async move {
            let resp = rb.send().await.unwrap();
            let status = resp.status();
            (status, resp.json::<Value>().await.unwrap_or(Value::Null))
        }
    };
    let (status, options) = dashboard(Method::GET, "/v1/people/passkeys/options", None).await;
    assert_eq!(status, StatusCode::OK, "{options}");
    assert_eq!(options["rp_id"], "localhost");
    let challenge = options["challenge"].as_str().unwrap().to_owned();
    // An Ed25519 public key as SubjectPublicKeyInfo DER.
    let mut spki = decode_base64("MCowBQYDK2VwAyEA").unwrap();
    let key = lev_approval::SigningKeyPair::from_seed(&[0x42; 32]);
    spki.extend(decode_base64(&key.public_base64url()).unwrap());
    let client_data = |kind: &str, challenge: &str, origin: &str| {
        encode_base64(
            json!({"type": kind, "challenge": challenge, "origin": origin})
                .to_string()
                .as_bytes(),
        )
    };
    let good = json!({
        "credential_id": encode_base64url(b"credential-1"),
        "public_key": encode_base64(&spki),
        "alg": -8,
        "client_data_json": client_data("webauthn.create", &challenge, &origin),
    });
    let with = |key: &str, value: Value| {
        let mut body = good.clone();
        body[key] = value;
        body
    };
    let other_challenge = encode_base64url(&[9u8; 32]);
    let cases = [
        (
            with(
                "client_data_json",
                json!(client_data("webauthn.get", &challenge, &origin)),
            ),
            StatusCode::UNPROCESSABLE_ENTITY,
            "webauthn.create",
        ),
        (
            with(
                "client_data_json",
                json!(client_data("webauthn.create", &other_challenge, &origin)),
            ),
            StatusCode::UNPROCESSABLE_ENTITY,
            "challenge",
        ),
        (
            with(
                "client_data_json",
                json!(client_data(
                    "webauthn.create",
                    &challenge,
                    "http://evil.example"
                )),
            ),
            StatusCode::FORBIDDEN,
            "",
        ),
        (
            with(
                "client_data_json",
                json!(encode_base64(br#"{"type":"webauthn.create","type":"x"}"#)),
            ),
            StatusCode::UNPROCESSABLE_ENTITY,
            "client_data_json",
        ),
        (
            with("alg", json!(-257)),
            StatusCode::UNPROCESSABLE_ENTITY,
            "alg",
        ),
        (
            with("public_key", json!(encode_base64(b"not a key"))),
            StatusCode::UNPROCESSABLE_ENTITY,
            "public_key",
        ),
        (
            with("alg", json!(-7)),
            StatusCode::UNPROCESSABLE_ENTITY,
            "P-256",
        ),
        (
            with("credential_id", json!("")),
            StatusCode::UNPROCESSABLE_ENTITY,
            "credential_id",
        ),
    ];
    for (body, status, says) in cases {
        let (got, v) = dashboard(Method::POST, "/v1/people/passkeys", Some(&body)).await;
        assert_eq!(got, status, "{body}: {v}");
        assert!(v["error"]["code"].is_string(), "{v}");
        assert!(
            v["error"]["message"].as_str().unwrap().contains(says),
            "{body}: {v}"
        );
        let (_, keys) = s.get("/v1/people/keys", "").await;
        assert_eq!(
            keys["keys"],
            json!([]),
            "a refused registration kept a key: {keys}"
        );
    }
    // A bearer token is not the dashboard.
    let (status, v) = s.post("/v1/people/passkeys", &bob, &good).await;
    assert_eq!(
        (status, code(&v)),
        (StatusCode::FORBIDDEN, "dashboard_only"),
        "{v}"
    );
    // Done right, it is taken.
    let (status, v) = dashboard(Method::POST, "/v1/people/passkeys", Some(&good)).await;
    assert_eq!(status, StatusCode::CREATED, "{v}");
    let (_, keys) = s.get("/v1/people/keys", "").await;
    assert_eq!(keys["keys"][0]["kid"], "person:bob:1", "{keys}");
    assert_eq!(keys["keys"][0]["alg"], "EdDSA", "{keys}");
}
