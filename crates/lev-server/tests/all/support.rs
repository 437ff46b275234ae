//! Start a real server on port 0 in a temporary data dir, and talk to it.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::Arc;

use lev_server::{AppState, ServeError, Settings};
use lev_test_support::InProcess;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use tokio::task::JoinHandle;

/// A server under test: lev-test-support's in-process server, and an
/// HTTP client for it.
pub struct TestServer {
    pub url: String,
    pub admin: String,
    pub dir: Arc<tempfile::TempDir>,
    pub http: reqwest::Client,
    pub state: AppState,
    server: InProcess,
}

impl TestServer {
    /// A fresh server with default settings.
    pub async fn start() -> Self {
        Self::start_with(Settings::default()).await
    }

    /// A fresh server with `settings`.
    pub async fn start_with(settings: Settings) -> Self {
        let dir = Arc::new(tempfile::tempdir().unwrap());
        Self::start_in(dir, settings).await
    }

    /// A server on an existing data dir (a restart).
    pub async fn start_in(dir: Arc<tempfile::TempDir>, settings: Settings) -> Self {
        let server = InProcess::start_in(dir, |config| config.settings = settings)
            .await
            .unwrap();
        let admin = std::fs::read_to_string(server.data_dir().join("admin.token"))
            .unwrap()
            .trim()
            .to_owned();
        assert_eq!(server.admin, admin);
        Self {
            url: server.url.clone(),
            admin,
            dir: Arc::clone(&server.dir),
            http: plain_http_client(),
            state: server.state.clone(),
            server,
        }
    }

    /// Shut down gracefully and wait until the server stopped.
    pub async fn stop(self) -> Arc<tempfile::TempDir> {
        self.server.stop().await.unwrap()
    }

    /// Begin shutdown without waiting for it.
    pub fn begin_stop(&mut self) -> JoinHandle<Result<(), ServeError>> {
        self.server.begin_stop().unwrap()
    }

    pub fn data_dir(&self) -> &Path {
        self.dir.path()
    }

    pub fn path(&self, p: &str) -> String {
        format!("{}{p}", self.url)
    }

    /// A request with `token` (none when empty).
    pub fn req(&self, method: Method, path: &str, token: &str) -> reqwest::RequestBuilder {
        let mut rb = self.http.request(method, self.path(path));
        if !token.is_empty() {
            rb = rb.bearer_auth(token);
        }
        rb
    }

    /// Send and return status and JSON body (Null when not JSON).
    pub async fn call(
        &self,
        method: Method,
        path: &str,
        token: &str,
        body: Option<&Value>,
    ) -> (StatusCode, Value) {
        let mut rb = self.req(method, path, token);
        if let Some(b) = body {
            rb = rb.json(b);
        }
        let resp = rb.send().await.unwrap();
        let status = resp.status();
        let text = resp.text().await.unwrap();
        (status, serde_json::from_str(&text).unwrap_or(Value::Null))
    }

    pub async fn get(&self, path: &str, token: &str) -> (StatusCode, Value) {
        self.call(Method::GET, path, token, None).await
    }

    pub async fn post(&self, path: &str, token: &str, body: &Value) -> (StatusCode, Value) {
        self.call(Method::POST, path, token, Some(body)).await
    }

    /// A new token of `role`, optionally bound to `caller`.
    pub async fn token(&self, name: &str, role: &str, caller: Option<&str>) -> String {
        let mut body = json!({"name": name, "role": role});
        if let Some(c) = caller {
            body["caller"] = json!(c);
        }
        if role == "operator" {
            body["sessions"] = json!(["*"]);
        }
        let (status, v) = self.post("/v1/tokens", &self.admin, &body).await;
        assert_eq!(status, StatusCode::CREATED, "{v}");
        v["token"].as_str().unwrap().to_owned()
    }

    /// A worker and an approver token.
    pub async fn worker_and_approver(&self) -> (String, String) {
        (
            self.token("worker-1", "worker", None).await,
            self.token("alice-approver", "approver", None).await,
        )
    }

    /// Create an interaction; returns its id.
    pub async fn create(&self, token: &str, body: &Value) -> String {
        let (status, v) = self.post("/v1/interactions", token, body).await;
        assert_eq!(status, StatusCode::CREATED, "{v}");
        v["id"].as_str().unwrap().to_owned()
    }

    /// Answer an interaction.
    pub async fn respond(&self, token: &str, id: &str, body: &Value) -> (StatusCode, Value) {
        self.post(&format!("/v1/interactions/{id}/respond"), token, body)
            .await
    }

    /// The trusted keys from `/v1/keys`.
    pub async fn trusted_keys(&self) -> lev_approval::TrustedKeys {
        let text = self
            .http
            .get(self.path("/v1/keys"))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        lev_approval::TrustedKeys::parse(&text).unwrap()
    }
}

/// A free-text question in `session`.
pub fn free_text(session: &str, prompt: &str) -> Value {
    json!({"session_id": session, "kind": {"type": "free_text", "prompt": prompt}})
}

/// A tool approval in `session`.
pub fn tool_approval(session: &str, args_json: &str) -> Value {
    json!({
        "session_id": session,
        "conversation_id": "c-1",
        "turn_id": "t-7",
        "kind": {
            "type": "tool_approval",
            "tool_name": "shell",
            "args_json": args_json,
            "missing_capabilities": ["proc-exec", "net"],
            "sandbox_mode": "workspace-write"
        }
    })
}

/// The error code of an error body.
pub fn code(v: &Value) -> &str {
    v["error"]["code"].as_str().unwrap_or_default()
}

/// The error message of an error body.
pub fn message(v: &Value) -> &str {
    v["error"]["message"].as_str().unwrap_or_default()
}

pub fn tmp_path(dir: &Path, name: &str) -> PathBuf {
    dir.join(name)
}

/// A reqwest client for plain HTTP. Built with the rest of the workspace,
/// reqwest has lev-client's rustls without a default crypto provider; ring
/// (the server's provider) is installed so that building a client works.
fn plain_http_client() -> reqwest::Client {
    let _ = tokio_rustls::rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::new()
}
