//! [`Client`]: one method per route of the HTTP API, and the one HTTP stack
//! of the SDK: every request (the operator's WebSocket handshake aside) goes
//! through [`Client::call`], and every refusal becomes [`Error::Api`] the
//! same way.

use std::sync::Arc;
use std::time::Duration;

use lev_protocol::api::{
    AuditPage, ErrorBody, Health, InteractionView, Jwks, Page, PeopleJwks, PersonJwk,
    PersonKeyRegistered, RespondResult, Task, TaskStatus, TokenCreate, TokenCreated, TokenInfo,
    WaitResponse, Webhook, WebhookCreate, WebhookDelivery,
};
use lev_protocol::{
    Interaction, InteractionRequest, InteractionResponse, InteractionStatus, WorkerResult,
};
use reqwest::{Method, StatusCode};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::error::{Error, Result};
use crate::events::EventStream;
use crate::tls::{ConnectOptions, check_url, client_config_for};

/// How long an ordinary request may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a long-poll may run past the time the server was asked to wait.
const WAIT_SLACK: Duration = Duration::from_secs(15);
/// The most a server waits in one long-poll (SPEC section 9).
pub const MAX_WAIT_S: u64 = 300;

/// The most pages [`Client`] reads to gather a whole list.
const MAX_PAGES: usize = 10_000;

/// A client of one lev server, with one token.
///
/// Cheap to clone: clones (and [`Client::with_token`]) share one connection
/// pool, built once.
///
/// # Example
/// ```no_run
/// # async fn f() -> lev_client::Result<()> {
/// let client = lev_client::Client::new("http://127.0.0.1:7420", Some("secret".into()))?;
/// println!("{}", client.health().await?.version);
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Client {
    http: reqwest::Client,
    /// The TLS configuration `http` was built with, for the operator's
    /// WebSocket.
    tls: Arc<rustls::ClientConfig>,
    base: String,
    token: Option<String>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("base", &self.base)
            .field("token", &self.token.as_ref().map(|_| "<hidden>"))
            .finish()
    }
}

/// The filter of [`Client::list_interactions`].
#[derive(Debug, Clone, Default)]
pub struct ListQuery {
    /// `None` lists pending interactions (the server's default); `Some(None)`
    /// is not needed: use [`ListQuery::all`] for every status.
    pub status: Option<StatusFilter>,
    /// Only this session's.
    pub session_id: Option<String>,
    /// At most this many.
    pub limit: Option<u32>,
    /// The `next_cursor` of the page before.
    pub cursor: Option<String>,
}

impl ListQuery {
    /// Interactions of every status.
    pub fn all() -> Self {
        Self {
            status: Some(StatusFilter::All),
            ..Self::default()
        }
    }
}

/// The filter of [`Client::list_tasks`].
#[derive(Debug, Clone, Default)]
pub struct TaskQuery {
    /// Only this session's.
    pub session_id: Option<String>,
    /// Only tasks in this state; `None` for every state.
    pub status: Option<TaskStatus>,
    /// At most this many (the server's default is 50).
    pub limit: Option<u32>,
    /// The `next_cursor` of the page before.
    pub cursor: Option<String>,
}

/// Which statuses a listing shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatusFilter {
    /// Only this status.
    Only(InteractionStatus),
    /// Every status.
    All,
}

impl StatusFilter {
    fn as_str(self) -> &'static str {
        match self {
            Self::Only(s) => s.as_str(),
            Self::All => "all",
        }
    }
}

/// An attachment's bytes, as `GET /v1/blobs/{sha256}` serves them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Blob {
    /// Its media type.
    pub media_type: String,
    /// The bytes.
    pub bytes: Vec<u8>,
}

impl Client {
    /// A client of the server at `base_url` (such as `http://127.0.0.1:7420`
    /// or `https://lev.example.com`), sending `token` as a bearer token, with
    /// the default [`ConnectOptions`]: the system's roots for `https://`, and
    /// plain `http://` only to loopback.
    ///
    /// # Errors
    /// [`Error::InvalidUrl`] when the URL is not `http(s)://host[:port][/prefix]`,
    /// or is plain `http://` to a host that is not loopback.
    pub fn new(base_url: &str, token: Option<String>) -> Result<Self> {
        Self::with_options(base_url, token, &ConnectOptions::default())
    }

    /// [`Client::new`] with `options`: the CA to trust over `https://`
    /// instead of the system's roots, and whether plain `http://` may go
    /// beyond loopback (the token would travel in clear).
    ///
    /// # Errors
    /// As [`Client::new`], and when the CA certificate is not PEM.
    pub fn with_options(
        base_url: &str,
        token: Option<String>,
        options: &ConnectOptions,
    ) -> Result<Self> {
        let base = normalise_base(base_url, options.insecure_http)?;
        let bad = |reason: String| Error::InvalidUrl {
            url: base_url.to_owned(),
            reason,
        };
        let (scheme, _) = check_url(&base, options.insecure_http).map_err(bad)?;
        let tls = Arc::new(client_config_for(scheme, options.ca_cert_pem.as_deref()).map_err(bad)?);
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .tcp_nodelay(true)
            .no_proxy()
            // The API never redirects; following one could carry the token
            // somewhere else, or down to plain HTTP.
            .redirect(reqwest::redirect::Policy::none())
            .tls_backend_preconfigured(rustls::ClientConfig::clone(&tls))
            .build()
            .map_err(|e| bad(format!("cannot build an HTTP client: {e}")))?;
        Ok(Self {
            http,
            tls,
            base,
            token: token.filter(|t| !t.is_empty()),
        })
    }

    /// The same server and connection pool with another token (a task's
    /// token for a sub-agent, say): no new HTTP client is built.
    pub fn with_token(&self, token: Option<String>) -> Self {
        Self {
            http: self.http.clone(),
            tls: Arc::clone(&self.tls),
            base: self.base.clone(),
            token: token.filter(|t| !t.is_empty()),
        }
    }

    /// The TLS configuration of the connection pool.
    pub(crate) fn tls(&self) -> &Arc<rustls::ClientConfig> {
        &self.tls
    }

    /// Whether `other` shares this client's connection pool (it was cloned
    /// from it, or made by [`Client::with_token`]).
    pub fn shares_pool_with(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.tls, &other.tls)
    }

    /// The base URL, without a trailing slash.
    pub fn base_url(&self) -> &str {
        &self.base
    }

    /// The token this client sends, if any.
    pub fn token(&self) -> Option<&str> {
        self.token.as_deref()
    }

    /// `GET /v1/health`.
    ///
    /// # Errors
    /// Any [`Error`].
    pub async fn health(&self) -> Result<Health> {
        self.call(Method::GET, "/v1/health", None::<&()>, None)
            .await
    }

    /// `GET /v1/keys`: the server's trusted public keys.
    ///
    /// # Errors
    /// Any [`Error`].
    pub async fn keys(&self) -> Result<Jwks> {
        self.call(Method::GET, "/v1/keys", None::<&()>, None).await
    }

    /// `GET /v1/people/keys`: people's public keys, with which their signed
    /// votes are checked (SPEC section 13).
    ///
    /// # Errors
    /// Any [`Error`].
    pub async fn people_keys(&self) -> Result<PeopleJwks> {
        self.call(Method::GET, "/v1/people/keys", None::<&()>, None)
            .await
    }

    /// `POST /v1/people/keys`: register a public key to this token's name.
    ///
    /// # Errors
    /// 409 `key_taken` when it is registered to someone else, 403 for a
    /// token that is not an approver's, ...
    pub async fn register_person_key(&self, key: &PersonJwk) -> Result<PersonKeyRegistered> {
        self.call(Method::POST, "/v1/people/keys", Some(key), None)
            .await
    }

    /// `DELETE /v1/people/keys/{kid}`.
    ///
    /// # Errors
    /// 404 when no such key is in force, 403 for another person's key, ...
    pub async fn revoke_person_key(&self, kid: &str) -> Result<()> {
        let path = format!("/v1/people/keys/{}", segment(kid));
        self.send(Method::DELETE, &path, None::<&()>, None)
            .await
            .map(drop)
    }

    /// `POST /v1/interactions`: ask a question. The same id with the same
    /// body again returns the stored interaction (idempotent create).
    ///
    /// # Errors
    /// 422 for an invalid request, 409 for an id reused with another body, ...
    pub async fn create_interaction(&self, request: &InteractionRequest) -> Result<Interaction> {
        self.create_interaction_within(request, None).await
    }

    /// [`Client::create_interaction`] in at most `timeout` (60 s when `None`).
    pub(crate) async fn create_interaction_within(
        &self,
        request: &InteractionRequest,
        timeout: Option<Duration>,
    ) -> Result<Interaction> {
        self.call(Method::POST, "/v1/interactions", Some(request), timeout)
            .await
    }

    /// `GET /v1/interactions`, newest first.
    ///
    /// # Errors
    /// Any [`Error`].
    pub async fn list_interactions(&self, query: &ListQuery) -> Result<Page<InteractionView>> {
        let mut params = Vec::new();
        if let Some(status) = query.status {
            params.push(("status", status.as_str().to_owned()));
        }
        if let Some(session) = &query.session_id {
            params.push(("session_id", session.clone()));
        }
        if let Some(limit) = query.limit {
            params.push(("limit", limit.to_string()));
        }
        if let Some(cursor) = &query.cursor {
            params.push(("cursor", cursor.clone()));
        }
        let path = format!("/v1/interactions{}", query_string(&params));
        self.call(Method::GET, &path, None::<&()>, None).await
    }

    /// `GET /v1/interactions/{id}`: the interaction, its answer and its signed decision.
    ///
    /// # Errors
    /// 404 for an unknown id, ...
    pub async fn get_interaction(&self, id: &str) -> Result<InteractionView> {
        self.get_interaction_within(id, None).await
    }

    /// [`Client::get_interaction`] in at most `timeout` (60 s when `None`).
    pub(crate) async fn get_interaction_within(
        &self,
        id: &str,
        timeout: Option<Duration>,
    ) -> Result<InteractionView> {
        let path = format!("/v1/interactions/{}", segment(id));
        self.call(Method::GET, &path, None::<&()>, timeout).await
    }

    /// `GET /v1/interactions/{id}/wait`: wait up to `timeout_s` seconds
    /// (at most [`MAX_WAIT_S`]) for an answer. Status `pending` means the time
    /// was up; see [`Client::wait_for_answer`] to wait longer.
    ///
    /// # Errors
    /// Any [`Error`].
    pub async fn wait(&self, id: &str, timeout_s: u64) -> Result<WaitResponse> {
        self.wait_within(id, timeout_s, None).await
    }

    /// [`Client::wait`], the whole exchange in at most `within` (else the
    /// wait and a slack).
    pub(crate) async fn wait_within(
        &self,
        id: &str,
        timeout_s: u64,
        within: Option<Duration>,
    ) -> Result<WaitResponse> {
        let timeout_s = timeout_s.min(MAX_WAIT_S);
        let path = format!(
            "/v1/interactions/{}/wait?timeout_s={timeout_s}",
            segment(id)
        );
        let timeout = Duration::from_secs(timeout_s).saturating_add(WAIT_SLACK);
        let timeout = within.map_or(timeout, |w| w.min(timeout));
        self.call(Method::GET, &path, None::<&()>, Some(timeout))
            .await
    }

    /// `POST /v1/interactions/{id}/respond`.
    ///
    /// # Errors
    /// 409 `already_answered` when another answer won: [`Error::winner`]
    /// holds it. 410 when the interaction expired or was cancelled, 422 for
    /// an answer that does not fit the question.
    pub async fn respond(&self, id: &str, response: &InteractionResponse) -> Result<RespondResult> {
        let path = format!("/v1/interactions/{}/respond", segment(id));
        self.call(
            Method::POST,
            &path,
            Some(response),
            Some(REQUEST_TIMEOUT * 2),
        )
        .await
    }

    /// `POST /v1/interactions/{id}/cancel`.
    ///
    /// # Errors
    /// 409 when it was answered first, 410 when it is already over, ...
    pub async fn cancel(&self, id: &str) -> Result<()> {
        self.cancel_within(id, None).await
    }

    /// [`Client::cancel`] in at most `timeout` (60 s when `None`).
    pub(crate) async fn cancel_within(&self, id: &str, timeout: Option<Duration>) -> Result<()> {
        let path = format!("/v1/interactions/{}/cancel", segment(id));
        self.call::<serde::de::IgnoredAny>(Method::POST, &path, None::<&()>, timeout)
            .await
            .map(drop)
    }

    /// `GET /v1/blobs/{sha256}`: an attachment's bytes.
    ///
    /// # Errors
    /// 404 for an unknown digest, ...
    pub async fn blob(&self, sha256: &str) -> Result<Blob> {
        let path = format!("/v1/blobs/{}", segment(sha256));
        let response = self.send(Method::GET, &path, None::<&()>, None).await?;
        let media_type = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("application/octet-stream")
            .to_owned();
        let bytes = response.bytes().await.map_err(|source| Error::Transport {
            method: "GET",
            path: path.clone(),
            source,
        })?;
        Ok(Blob {
            media_type,
            bytes: bytes.to_vec(),
        })
    }

    /// `POST /v1/tokens`: a new API token. The secret is in the answer only.
    ///
    /// # Errors
    /// 409 for a name in use, 422 for a bad name or a caller on a non-worker token, ...
    pub async fn create_token(&self, token: &TokenCreate) -> Result<TokenCreated> {
        self.call(Method::POST, "/v1/tokens", Some(token), None)
            .await
    }

    /// `GET /v1/tokens` (never the secrets), every page.
    ///
    /// # Errors
    /// Any [`Error`].
    pub async fn list_tokens(&self) -> Result<Vec<TokenInfo>> {
        self.all_pages("/v1/tokens").await
    }

    /// `DELETE /v1/tokens/{name}`.
    ///
    /// # Errors
    /// 404 for an unknown name, ...
    pub async fn revoke_token(&self, name: &str) -> Result<()> {
        let path = format!("/v1/tokens/{}", segment(name));
        self.send(Method::DELETE, &path, None::<&()>, None)
            .await
            .map(drop)
    }

    /// `POST /v1/webhooks` (admin): the endpoint, with its secret this once.
    ///
    /// # Errors
    /// 422 naming the field for a bad URL, event or secret, ...
    pub async fn create_webhook(&self, req: &WebhookCreate) -> Result<Webhook> {
        self.call(Method::POST, "/v1/webhooks", Some(req), None)
            .await
    }

    /// `GET /v1/webhooks` (admin), every page.
    ///
    /// # Errors
    /// Any [`Error`].
    pub async fn list_webhooks(&self) -> Result<Vec<Webhook>> {
        self.all_pages("/v1/webhooks").await
    }

    /// `DELETE /v1/webhooks/{id}` (admin).
    ///
    /// # Errors
    /// 404 for an unknown id, ...
    pub async fn delete_webhook(&self, id: &str) -> Result<()> {
        let path = format!("/v1/webhooks/{}", segment(id));
        self.send(Method::DELETE, &path, None::<&()>, None)
            .await
            .map(drop)
    }

    /// `GET /v1/webhooks/{id}/deliveries?limit=N` (admin): newest first,
    /// with every attempt.
    ///
    /// # Errors
    /// 404 for an unknown id, ...
    pub async fn webhook_deliveries(&self, id: &str, limit: u32) -> Result<Vec<WebhookDelivery>> {
        let path = format!("/v1/webhooks/{}/deliveries?limit={limit}", segment(id));
        let page: Page<WebhookDelivery> = self.call(Method::GET, &path, None::<&()>, None).await?;
        Ok(page.items)
    }

    /// `GET /v1/audit?after=SEQ`: one page of the audit log and the signed
    /// head; its `next_cursor` is the `after` of the next page.
    ///
    /// # Errors
    /// Any [`Error`].
    pub async fn audit_page(&self, after: u64) -> Result<AuditPage> {
        let path = format!("/v1/audit?after={after}");
        self.call(Method::GET, &path, None::<&()>, None).await
    }

    /// The whole audit log from entry 1, page after page, with the head of
    /// the last page read.
    ///
    /// # Errors
    /// Any [`Error`]; [`Error::Decode`] when the server does not move forward.
    pub async fn audit_all(&self) -> Result<AuditPage> {
        self.audit_from(0).await
    }

    /// The audit log after entry `after`, page after page (following
    /// `next_cursor`), with the head of the last page read; `next_cursor`
    /// of the result is `null`.
    ///
    /// # Errors
    /// Any [`Error`]; [`Error::Decode`] when the server does not move forward.
    pub async fn audit_from(&self, after: u64) -> Result<AuditPage> {
        let mut page = self.audit_page(after).await?;
        let mut entries = std::mem::take(&mut page.page.items);
        while let Some(cursor) = page.page.next_cursor.take() {
            let last = entries.last().map_or(after, |e| e.seq);
            let path = format!("/v1/audit?after={cursor}");
            let next_after = cursor.parse::<u64>().map_err(|_| Error::Decode {
                path: path.clone(),
                expected: "a next_cursor of digits",
                found: format!("{cursor:?}"),
            })?;
            let mut next = self.audit_page(next_after).await?;
            match next.page.items.first() {
                // Nothing more after all: the log ends here.
                None => next.page.next_cursor = None,
                Some(first) if first.seq <= last => {
                    return Err(Error::Decode {
                        path,
                        expected: "entries after the seq asked for",
                        found: format!("entry {}", first.seq),
                    });
                }
                Some(_) => entries.append(&mut next.page.items),
            }
            page = next;
        }
        page.page.items = entries;
        Ok(page)
    }

    /// `GET /v1/tasks`: a page of sub-agent tasks, newest first.
    ///
    /// # Errors
    /// 422 for a bad filter or cursor, 403 for a session the token may not see, ...
    pub async fn list_tasks(&self, query: &TaskQuery) -> Result<Page<Task>> {
        let mut params = Vec::new();
        if let Some(session) = &query.session_id {
            params.push(("session_id", session.clone()));
        }
        if let Some(status) = query.status {
            params.push(("status", task_status(status).to_owned()));
        }
        if let Some(limit) = query.limit {
            params.push(("limit", limit.to_string()));
        }
        if let Some(cursor) = &query.cursor {
            params.push(("cursor", cursor.clone()));
        }
        let path = format!("/v1/tasks{}", query_string(&params));
        self.call(Method::GET, &path, None::<&()>, None).await
    }

    /// `GET /v1/tasks/{id}`.
    ///
    /// # Errors
    /// 404 for an unknown id, 403 for a task the token may not see, ...
    pub async fn get_task(&self, id: &str) -> Result<Task> {
        let path = format!("/v1/tasks/{}", segment(id));
        self.call(Method::GET, &path, None::<&()>, None).await
    }

    /// `POST /v1/worker/result`: a sub-agent's result, sent with its task's
    /// token (see [`Client::with_token`]) or a worker token.
    ///
    /// # Errors
    /// 409 `task_finished` once the task is finished, 403 for another task's id, ...
    pub async fn post_worker_result(&self, result: &WorkerResult) -> Result<Task> {
        self.call(Method::POST, "/v1/worker/result", Some(result), None)
            .await
    }

    /// Every item of the list at `path` (which has no query yet), page
    /// after page while the server gives a `next_cursor`.
    ///
    /// # Errors
    /// Any [`Error`]; [`Error::Decode`] when the pages do not end.
    pub(crate) async fn all_pages<T: DeserializeOwned>(&self, path: &str) -> Result<Vec<T>> {
        let mut items = Vec::new();
        let mut cursor: Option<String> = None;
        for _ in 0..MAX_PAGES {
            let at = match &cursor {
                None => path.to_owned(),
                Some(c) => format!("{path}{}", query_string(&[("cursor", c.clone())])),
            };
            let mut page: Page<T> = self.call(Method::GET, &at, None::<&()>, None).await?;
            items.append(&mut page.items);
            match page.next_cursor {
                Some(next) if cursor.as_deref() != Some(next.as_str()) => cursor = Some(next),
                Some(next) => {
                    return Err(Error::Decode {
                        path: at,
                        expected: "a next_cursor that moves on",
                        found: format!("the same cursor {next:?} again"),
                    });
                }
                None => return Ok(items),
            }
        }
        Err(Error::Decode {
            path: path.to_owned(),
            expected: "a list that ends",
            found: format!("more than {MAX_PAGES} pages"),
        })
    }

    /// `GET /v1/stats` (admin, approvers): the report over the interactions
    /// created in a window. `query` is the query string without `?`:
    /// `since=7d`, or `from=...&to=...` (RFC 3339).
    ///
    /// # Errors
    /// Any [`Error`].
    pub async fn stats(&self, query: &str) -> Result<lev_protocol::stats::Stats> {
        let path = if query.is_empty() {
            "/v1/stats".to_owned()
        } else {
            format!("/v1/stats?{query}")
        };
        self.call(Method::GET, &path, None::<&()>, None).await
    }

    /// `GET /metrics` (admin): the server's metrics in OpenMetrics text format.
    ///
    /// # Errors
    /// Any [`Error`].
    pub async fn metrics(&self) -> Result<String> {
        let response = self
            .send(Method::GET, "/metrics", None::<&()>, None)
            .await?;
        response.text().await.map_err(|source| Error::Transport {
            method: "GET",
            path: "/metrics".into(),
            source,
        })
    }

    /// `GET /v1/events`: the Server-Sent Events stream, from after
    /// `last_event_id` when given.
    ///
    /// # Errors
    /// Any [`Error`] before the stream starts.
    pub async fn events(&self, last_event_id: Option<&str>) -> Result<EventStream> {
        let url = format!("{}/v1/events", self.base);
        let mut request = self
            .http
            .get(&url)
            .header(reqwest::header::ACCEPT, "text/event-stream");
        if let Some(id) = last_event_id {
            request = request.header("Last-Event-ID", id);
        }
        if let Some(token) = &self.token {
            request = request.bearer_auth(token);
        }
        let response = request
            .send()
            .await
            .map_err(|e| self.transport("GET", "/v1/events", e))?;
        let response = check_status(response).await?;
        Ok(EventStream::new(response))
    }

    /// Send a request and decode a JSON answer. `timeout` bounds the whole
    /// exchange (60 s when `None`): connecting, sending, the headers and the
    /// whole body, however slowly it comes (reqwest's total timeout, never a
    /// per-read one that a trickle of bytes would keep resetting).
    pub(crate) async fn call<T: DeserializeOwned>(
        &self,
        method: Method,
        path: &str,
        body: Option<&(impl Serialize + ?Sized)>,
        timeout: Option<Duration>,
    ) -> Result<T> {
        let method_name = method_name(&method);
        let response = self.send(method, path, body, timeout).await?;
        let status = response.status();
        let bytes = response.bytes().await.map_err(|e| Error::Transport {
            method: method_name,
            path: path.to_owned(),
            source: e,
        })?;
        serde_json::from_slice(&bytes).map_err(|e| Error::Decode {
            path: path.to_owned(),
            expected: std::any::type_name::<T>()
                .rsplit("::")
                .next()
                .unwrap_or("JSON"),
            found: format!("{e} in a {status} answer: {}", snippet(&bytes)),
        })
    }

    /// Send a request; a non-2xx answer becomes [`Error::Api`].
    async fn send(
        &self,
        method: Method,
        path: &str,
        body: Option<&(impl Serialize + ?Sized)>,
        timeout: Option<Duration>,
    ) -> Result<reqwest::Response> {
        let method_name = method_name(&method);
        let mut request = self
            .http
            .request(method, format!("{}{path}", self.base))
            .timeout(timeout.unwrap_or(REQUEST_TIMEOUT));
        if let Some(token) = &self.token {
            request = request.bearer_auth(token);
        }
        if let Some(body) = body {
            request = request.json(body);
        }
        let response = request
            .send()
            .await
            .map_err(|e| self.transport(method_name, path, e))?;
        check_status(response).await
    }

    fn transport(&self, method: &'static str, path: &str, source: reqwest::Error) -> Error {
        if let Some(reason) = tls_failure(&source) {
            Error::Tls {
                url: self.base.clone(),
                reason,
                source,
            }
        } else if source.is_connect() {
            Error::Connect {
                url: self.base.clone(),
                source,
            }
        } else {
            Error::Transport {
                method,
                path: path.to_owned(),
                source,
            }
        }
    }
}

fn method_name(method: &Method) -> &'static str {
    match *method {
        Method::GET => "GET",
        Method::POST => "POST",
        Method::DELETE => "DELETE",
        Method::PUT => "PUT",
        _ => "request",
    }
}

/// Turn a non-2xx answer into [`Error::Api`], keeping the server's code,
/// message and (on 409) the winning answer.
async fn check_status(response: reqwest::Response) -> Result<reqwest::Response> {
    let status = response.status();
    if status.is_success() {
        return Ok(response);
    }
    let bytes = response.bytes().await.unwrap_or_default();
    Err(api_error(status.as_u16(), &bytes))
}

/// The [`Error::Api`] of a refusal with status `status` and body `bytes`:
/// the server's code and message, or (for a body that is not lev's error
/// JSON) the status's name and the body's start.
pub(crate) fn api_error(status: u16, bytes: &[u8]) -> Error {
    match serde_json::from_slice::<ErrorBody>(bytes) {
        Ok(body) => Error::Api {
            status,
            code: body.error.code,
            message: body.error.message,
            winner: body.response.map(Box::new),
        },
        Err(_) => {
            let text = snippet(bytes);
            let reason = StatusCode::from_u16(status)
                .ok()
                .and_then(|s| s.canonical_reason());
            Error::Api {
                status,
                code: reason
                    .unwrap_or("error")
                    .to_ascii_lowercase()
                    .replace(' ', "_"),
                message: if text.is_empty() {
                    let shown =
                        reason.map_or_else(|| status.to_string(), |r| format!("{status} {r}"));
                    format!("the server answered {shown} with no error body")
                } else {
                    text
                },
                winner: None,
            }
        }
    }
}

/// At most 200 characters of a body, for error messages.
fn snippet(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let text = text.trim();
    let mut out: String = text
        .chars()
        .take(200)
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if text.chars().count() > 200 {
        out.push('…');
    }
    out
}

fn normalise_base(url: &str, insecure_http: bool) -> Result<String> {
    let bad = |reason: &str| Error::InvalidUrl {
        url: url.to_owned(),
        reason: reason.to_owned(),
    };
    let trimmed = url.trim().trim_end_matches('/');
    let (_, rest) = check_url(trimmed, insecure_http).map_err(|e| bad(&e))?;
    if rest.contains(['?', '#', ' ']) {
        return Err(bad("expected no query, fragment or space"));
    }
    Ok(trimmed.to_owned())
}

/// What went wrong in the TLS handshake, when that is why `e` failed: the
/// rustls error (an unknown issuer, a name mismatch, an expired certificate).
fn tls_failure(e: &reqwest::Error) -> Option<String> {
    let mut next: Option<&(dyn std::error::Error + 'static)> = Some(e);
    let mut found = None;
    while let Some(err) = next {
        if let Some(tls) = err.downcast_ref::<rustls::Error>() {
            return Some(tls.to_string());
        }
        // The rustls error may sit inside an io::Error boxed by a layer
        // between; its text is the one to show.
        let text = err.to_string();
        if let Some(at) = text.find("invalid peer certificate") {
            found = Some(text[at..].to_owned());
        } else if text.contains("tls handshake") || text.starts_with("received fatal alert") {
            found = found.or(Some(text));
        }
        next = err.source();
    }
    found
}

/// The wire form of a task status.
fn task_status(status: TaskStatus) -> &'static str {
    match status {
        TaskStatus::Pending => "pending",
        TaskStatus::Running => "running",
        TaskStatus::Succeeded => "succeeded",
        TaskStatus::Failed => "failed",
    }
}

/// Percent-encode one path segment.
pub(crate) fn segment(s: &str) -> String {
    encode(s)
}

fn query_string(params: &[(&str, String)]) -> String {
    if params.is_empty() {
        return String::new();
    }
    let joined: Vec<String> = params
        .iter()
        .map(|(k, v)| format!("{k}={}", encode(v)))
        .collect();
    format!("?{}", joined.join("&"))
}

fn encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~' | b':') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base_urls() {
        assert_eq!(
            normalise_base("http://127.0.0.1:7420/", false)
                .ok()
                .as_deref(),
            Some("http://127.0.0.1:7420")
        );
        assert!(normalise_base("https://x", false).is_ok());
        assert!(normalise_base("http://x", false).is_err());
        assert!(normalise_base("http://x", true).is_ok());
        assert!(normalise_base("127.0.0.1:7420", false).is_err());
        assert!(normalise_base("http://", false).is_err());
    }

    #[test]
    fn encoding() {
        assert_eq!(encode("ir_01:a.b-c"), "ir_01:a.b-c");
        assert_eq!(encode("a/b c"), "a%2Fb%20c");
        assert_eq!(
            query_string(&[("status", "all".into()), ("cursor", "x=1".into())]),
            "?status=all&cursor=x%3D1"
        );
    }

    #[test]
    fn error_bodies_keep_code_message_and_winner() {
        let body = br#"{"error":{"code":"already_answered","message":"already answered"},
            "response":{"request_id":"ir_1","value":"yes"}}"#;
        let e = api_error(409, body);
        assert_eq!(e.status(), Some(409));
        assert_eq!(e.code(), Some("already_answered"));
        assert_eq!(e.winner().and_then(|w| w.value.as_deref()), Some("yes"));
        assert_eq!(e.to_string(), "already answered (409 already_answered)");

        let e = api_error(404, b"nope");
        assert_eq!(e.code(), Some("not_found"));
        assert_eq!(e.to_string(), "nope (404 not_found)");
    }
}
