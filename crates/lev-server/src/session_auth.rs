//! The dashboard's login sessions: a session cookie as an alternative to the
//! bearer token on `/v1`, with a CSRF token on every state change.
//!
//! `POST /v1/login {token}` checks an approver or admin token and opens a
//! session: a random 256-bit id in an `HttpOnly; SameSite=Strict; Path=/`
//! cookie (`Secure` when served over TLS) and a random CSRF token returned in
//! the body. Sessions are kept in the store (so every server sharing it knows
//! them, and they survive a restart), keyed by the SHA-256 of their id, and
//! map to the token's hash, never to its secret.
//!
//! [`middleware`] runs in front of every route: a request without an
//! `Authorization` header but with a live session cookie is authenticated as
//! the session's token, looked up in the store on every request (so a
//! revoked token ends its sessions at once: within 100 ms on the other
//! replicas), and a cookie-authenticated
//! POST, PUT, PATCH or DELETE must carry the session's CSRF token in
//! `X-CSRF-Token`, else 403 `csrf`. A bearer token always wins over a cookie,
//! and is never subject to the CSRF check (a browser does not send it on its
//! own).

use std::sync::Arc;
use std::time::Duration;

use axum::extract::{FromRequestParts, Request, State};
use axum::http::header::{AUTHORIZATION, COOKIE, HOST, ORIGIN, UPGRADE};
use axum::http::request::Parts;
use axum::http::{HeaderMap, Method};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use lev_store::{DashboardSession, Store};
use sha2::{Digest, Sha256};
use time::OffsetDateTime;

use crate::auth::Principal;
use crate::error::ApiError;
use crate::state::AppState;

/// The session cookie's name.
pub const COOKIE_NAME: &str = "lev_session";
/// The header that carries the CSRF token.
pub const CSRF_HEADER: &str = "x-csrf-token";
/// A session unused this long ends.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(12 * 3600);
/// A session ends this long after login, used or not (also the cookie's Max-Age).
pub const MAX_AGE: Duration = Duration::from_secs(7 * 24 * 3600);
/// Most live sessions; past it, the least recently used is dropped.
const MAX_SESSIONS: u32 = 10_000;
/// A session's last use is written at most this often (a read per request,
/// not a write).
const TOUCH_EVERY: Duration = Duration::from_secs(60);

/// The dashboard sessions, kept in the store so that every server sharing
/// it knows them.
pub struct Sessions {
    store: Arc<dyn Store>,
    secure: bool,
}

impl std::fmt::Debug for Sessions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sessions")
            .field("store", &self.store.kind())
            .field("secure", &self.secure)
            .finish()
    }
}

/// What a request knows of its dashboard session (a request extension).
#[derive(Debug, Clone)]
pub struct SessionInfo {
    /// The session's CSRF token, for `GET /v1/me`.
    pub csrf: String,
}

/// A fresh session: the cookie's value and the CSRF token.
#[derive(Debug)]
pub struct NewSession {
    /// The session id (the cookie's value).
    pub id: String,
    /// The CSRF token.
    pub csrf: String,
}

fn random_token() -> Result<String, ApiError> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).map_err(|e| ApiError::Internal(format!("no randomness: {e}")))?;
    Ok(lev_approval::encode_base64url(&bytes))
}

fn id_hash(id: &str) -> String {
    let digest: [u8; 32] = Sha256::digest(id.as_bytes()).into();
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// Equal in time independent of where the first difference is.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn live(session: &DashboardSession, now: OffsetDateTime) -> bool {
    now - session.last_seen < IDLE_TIMEOUT && now - session.created_at < MAX_AGE
}

impl Sessions {
    /// The sessions kept in `store`; `secure` marks cookies `Secure`
    /// (served over TLS).
    pub fn new(store: Arc<dyn Store>, secure: bool) -> Arc<Self> {
        Arc::new(Self { store, secure })
    }

    /// Open a session for the token whose hash is `token_hash`.
    ///
    /// # Errors
    /// When the system has no randomness to give, or the store refuses.
    pub async fn create(&self, token_hash: &str) -> Result<NewSession, ApiError> {
        let id = random_token()?;
        let csrf = random_token()?;
        let now = OffsetDateTime::now_utc();
        self.store
            .delete_stale_dashboard_sessions(now - IDLE_TIMEOUT, now - MAX_AGE)
            .await?;
        self.store
            .create_dashboard_session(
                DashboardSession {
                    id_hash: id_hash(&id),
                    token_hash: token_hash.to_owned(),
                    csrf: csrf.clone(),
                    created_at: now,
                    last_seen: now,
                },
                MAX_SESSIONS,
            )
            .await?;
        Ok(NewSession { id, csrf })
    }

    /// The live session of cookie value `id`, touched; an ended one is removed.
    ///
    /// # Errors
    /// When the store refuses.
    async fn get(&self, id: &str) -> Result<Option<DashboardSession>, ApiError> {
        let key = id_hash(id);
        let Some(session) = self.store.dashboard_session(&key).await? else {
            return Ok(None);
        };
        let now = OffsetDateTime::now_utc();
        if !live(&session, now) {
            self.store.delete_dashboard_session(&key).await?;
            return Ok(None);
        }
        if now - session.last_seen >= TOUCH_EVERY {
            self.store.touch_dashboard_session(&key, now).await?;
        }
        Ok(Some(session))
    }

    /// Whether cookie value `id` names a live session.
    ///
    /// # Errors
    /// When the store refuses.
    pub async fn is_live(&self, id: &str) -> Result<bool, ApiError> {
        Ok(self.get(id).await?.is_some())
    }

    /// End the session of cookie value `id`.
    ///
    /// # Errors
    /// When the store refuses.
    pub async fn remove(&self, id: &str) -> Result<(), ApiError> {
        Ok(self.store.delete_dashboard_session(&id_hash(id)).await?)
    }

    /// The `Set-Cookie` value that stores session `id`.
    pub fn cookie(&self, id: &str) -> String {
        format!(
            "{COOKIE_NAME}={id}; HttpOnly; SameSite=Strict; Path=/; Max-Age={}{}",
            MAX_AGE.as_secs(),
            if self.secure { "; Secure" } else { "" }
        )
    }

    /// The `Set-Cookie` value that deletes the cookie.
    pub fn clear_cookie(&self) -> String {
        format!(
            "{COOKIE_NAME}=; HttpOnly; SameSite=Strict; Path=/; Max-Age=0{}",
            if self.secure { "; Secure" } else { "" }
        )
    }

    /// Check the CSRF header of a state change against session `id`'s token.
    ///
    /// # Errors
    /// 403 `csrf` when the session is unknown or the header is missing or wrong.
    pub async fn check_csrf(&self, id: &str, headers: &HeaderMap) -> Result<(), ApiError> {
        let session = self.get(id).await?.ok_or_else(csrf_error)?;
        check_csrf_header(&session.csrf, headers)
    }
}

fn csrf_error() -> ApiError {
    ApiError::Forbidden {
        code: "csrf",
        message: format!(
            "a change made with the dashboard's session cookie needs the session's CSRF token in \
             the {} header",
            "X-CSRF-Token"
        ),
    }
}

fn check_csrf_header(expected: &str, headers: &HeaderMap) -> Result<(), ApiError> {
    let sent = headers
        .get(CSRF_HEADER)
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
        .unwrap_or_default();
    if !sent.is_empty() && constant_time_eq(sent.as_bytes(), expected.as_bytes()) {
        Ok(())
    } else {
        Err(csrf_error())
    }
}

/// The session cookie's value, when the request has one.
pub fn session_cookie(headers: &HeaderMap) -> Option<String> {
    headers
        .get_all(COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == COOKIE_NAME)
        .map(|(_, value)| value.trim().to_owned())
        .filter(|v| !v.is_empty())
}

fn changes_state(method: &Method) -> bool {
    !matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS)
}

/// What [`middleware`] needs.
#[derive(Debug, Clone)]
pub struct SessionLayer {
    /// The server's state (for the token store).
    pub state: AppState,
    /// The sessions.
    pub sessions: Arc<Sessions>,
}

/// Authenticate `/v1` requests by session cookie when they carry no bearer
/// token; refuse a cookie-authenticated state change without its CSRF token.
pub async fn middleware(
    State(layer): State<SessionLayer>,
    mut req: Request,
    next: Next,
) -> Response {
    let path = req.uri().path();
    // Login and logout handle the cookie themselves.
    let own = path == "/v1/login" || path == "/v1/logout";
    if !path.starts_with("/v1/") || own || req.headers().contains_key(AUTHORIZATION) {
        return next.run(req).await;
    }
    let Some(id) = session_cookie(req.headers()) else {
        return next.run(req).await;
    };
    // An unknown or ended session: as if there were no cookie (401 where a
    // token is needed, public routes unaffected).
    let session = match layer.sessions.get(&id).await {
        Ok(Some(session)) => session,
        Ok(None) => return next.run(req).await,
        Err(e) => return e.into_response(),
    };
    // SameSite does not tell ports apart: a page on another localhost port
    // is same-site, and its requests carry the cookie. Only the server's own
    // origin may use it (WebSocket upgrades included).
    if let Err(e) = check_origin(req.headers(), layer.state.settings()) {
        return e.into_response();
    }
    if changes_state(req.method())
        && let Err(e) = check_csrf_header(&session.csrf, req.headers())
    {
        return e.into_response();
    }
    let record = match layer.state.store().token_by_hash(&session.token_hash).await {
        Ok(Some(record)) => record,
        Ok(None) => {
            // The token was revoked: its sessions end with it.
            if let Err(e) = layer.sessions.remove(&id).await {
                return e.into_response();
            }
            return next.run(req).await;
        }
        Err(e) => return ApiError::from(e).into_response(),
    };
    req.extensions_mut().insert(Principal {
        name: record.info.name,
        role: record.info.role,
        caller: record.info.caller,
        sessions: record.info.sessions,
    });
    req.extensions_mut()
        .insert(SessionInfo { csrf: session.csrf });
    next.run(req).await
}

/// Whether a cookie-authenticated request comes from the server's own
/// origin (SPEC section 12): its `Origin` names the host it was sent to
/// (`Host`), over this server's scheme, or `--public-url`; on loopback,
/// `localhost`, `127.0.0.1` and `[::1]` at the same port are all the
/// server's own. Without `Origin`, a WebSocket upgrade is refused (browsers
/// always send one), and so is a request the browser marks as cross-origin
/// (`Sec-Fetch-Site`).
///
/// # Errors
/// 403 `origin`.
pub fn check_origin(
    headers: &HeaderMap,
    settings: &crate::config::Settings,
) -> Result<(), ApiError> {
    let refuse = |why: String| ApiError::Forbidden {
        code: "origin",
        message: why,
    };
    let Some(origin) = headers.get(ORIGIN) else {
        let upgrade = headers
            .get(UPGRADE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.eq_ignore_ascii_case("websocket"));
        if upgrade {
            return Err(refuse(
                "a WebSocket opened with the dashboard's cookie must carry an Origin".into(),
            ));
        }
        let site = headers
            .get("sec-fetch-site")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("none");
        if !matches!(site, "same-origin" | "none") {
            return Err(refuse(format!(
                "a {site} request may not use the dashboard's cookie"
            )));
        }
        return Ok(());
    };
    let origin = origin
        .to_str()
        .map_err(|_| refuse("the Origin header is not text".into()))?;
    let own = |candidate: &str| origin.eq_ignore_ascii_case(candidate.trim_end_matches('/'));
    if settings.public_url.as_deref().is_some_and(own) {
        return Ok(());
    }
    let scheme = if settings.secure_cookies {
        "https"
    } else {
        "http"
    };
    if let Some(host) = headers.get(HOST).and_then(|v| v.to_str().ok()) {
        if own(&format!("{scheme}://{host}")) {
            return Ok(());
        }
        if let (Some((ohost, oport)), Some((hhost, hport))) = (
            origin
                .strip_prefix(scheme)
                .and_then(|o| o.strip_prefix("://"))
                .and_then(split_host_port),
            split_host_port(host),
        ) && is_loopback_name(ohost)
            && is_loopback_name(hhost)
            && oport == hport
        {
            return Ok(());
        }
    }
    Err(refuse(format!(
        "requests made with the dashboard's cookie must come from the dashboard's own origin, \
         not {:?}{}",
        origin.chars().take(200).collect::<String>(),
        if settings.public_url.is_none() {
            "; behind a proxy, name the public origin with --public-url"
        } else {
            ""
        }
    )))
}

/// `host:port` (or `[v6]:port`) split; `None` without a port.
fn split_host_port(s: &str) -> Option<(&str, &str)> {
    let i = s.rfind(':')?;
    let (host, port) = (&s[..i], &s[i + 1..]);
    if port.is_empty() || !port.bytes().all(|b| b.is_ascii_digit()) || host.ends_with(':') {
        return None;
    }
    Some((host, port))
}

fn is_loopback_name(host: &str) -> bool {
    host.eq_ignore_ascii_case("localhost")
        || host == "[::1]"
        || host
            .parse::<std::net::Ipv4Addr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// The request's dashboard session, if it was authenticated by one.
#[derive(Debug, Clone)]
pub struct CurrentSession(pub Option<SessionInfo>);

impl<S: Send + Sync> FromRequestParts<S> for CurrentSession {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        Ok(Self(parts.extensions.get::<SessionInfo>().cloned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    #[test]
    fn cookie_parsing_finds_ours_among_others() {
        let mut h = HeaderMap::new();
        h.insert(
            COOKIE,
            HeaderValue::from_static("a=1; lev_session=abc ; b=2"),
        );
        assert_eq!(session_cookie(&h).as_deref(), Some("abc"));
        h.insert(COOKIE, HeaderValue::from_static("lev_session_x=1; other=2"));
        assert_eq!(session_cookie(&h), None);
        h.insert(COOKIE, HeaderValue::from_static("lev_session="));
        assert_eq!(session_cookie(&h), None);
    }

    fn store() -> (tempfile::TempDir, Arc<dyn Store>) {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(lev_store_sqlite::SqliteStore::open(dir.path()).unwrap());
        (dir, store)
    }

    #[tokio::test]
    async fn sessions_open_check_and_end() -> Result<(), ApiError> {
        let (_dir, store) = store();
        let sessions = Sessions::new(Arc::clone(&store), false);
        let s = sessions.create("hash").await?;
        assert_ne!(s.id, s.csrf);
        let mut h = HeaderMap::new();
        assert!(sessions.check_csrf(&s.id, &h).await.is_err());
        h.insert(
            CSRF_HEADER,
            HeaderValue::from_str(&s.csrf).map_err(|e| ApiError::Internal(e.to_string()))?,
        );
        assert!(sessions.check_csrf(&s.id, &h).await.is_ok());
        // Another server sharing the store knows the session too.
        let other = Sessions::new(Arc::clone(&store), false);
        assert!(other.check_csrf(&s.id, &h).await.is_ok());
        assert!(sessions.check_csrf("other", &h).await.is_err());
        h.insert(CSRF_HEADER, HeaderValue::from_static("wrong"));
        assert!(sessions.check_csrf(&s.id, &h).await.is_err());
        other.remove(&s.id).await?;
        assert!(sessions.get(&s.id).await?.is_none());
        assert!(!sessions.is_live(&s.id).await?);
        Ok(())
    }

    #[test]
    fn cookies_carry_the_flags() {
        let (_dir, store) = store();
        let plain = Sessions::new(Arc::clone(&store), false);
        let c = plain.cookie("x");
        assert!(c.contains("HttpOnly") && c.contains("SameSite=Strict") && c.contains("Path=/"));
        assert!(!c.contains("Secure"));
        assert!(Sessions::new(store, true).cookie("x").ends_with("; Secure"));
        assert!(plain.clear_cookie().contains("Max-Age=0"));
    }

    #[test]
    fn origins_of_the_server_itself_pass_others_do_not() {
        let settings = crate::config::Settings::default();
        let check = |host: &str, origin: Option<&str>, upgrade: bool| {
            let mut h = HeaderMap::new();
            h.insert(HOST, HeaderValue::from_str(host).unwrap());
            if let Some(o) = origin {
                h.insert(ORIGIN, HeaderValue::from_str(o).unwrap());
            }
            if upgrade {
                h.insert(UPGRADE, HeaderValue::from_static("websocket"));
            }
            check_origin(&h, &settings).is_ok()
        };
        assert!(check("127.0.0.1:7420", Some("http://127.0.0.1:7420"), true));
        assert!(check("127.0.0.1:7420", Some("http://localhost:7420"), true));
        assert!(check("localhost:7420", Some("http://[::1]:7420"), false));
        assert!(check("127.0.0.1:7420", None, false));
        assert!(!check("127.0.0.1:7420", None, true));
        assert!(!check(
            "127.0.0.1:7420",
            Some("http://localhost:8080"),
            true
        ));
        assert!(!check(
            "127.0.0.1:7420",
            Some("https://127.0.0.1:7420"),
            false
        ));
        assert!(!check("127.0.0.1:7420", Some("null"), false));
        assert!(!check(
            "lev.example:7420",
            Some("http://evil.example:7420"),
            false
        ));
        assert!(check(
            "lev.example:7420",
            Some("http://lev.example:7420"),
            false
        ));
        let public = crate::config::Settings {
            public_url: Some("https://lev.example".into()),
            ..crate::config::Settings::default()
        };
        let mut h = HeaderMap::new();
        h.insert(HOST, HeaderValue::from_static("10.0.0.5:7420"));
        h.insert(ORIGIN, HeaderValue::from_static("https://lev.example"));
        assert!(check_origin(&h, &public).is_ok());
    }

    #[test]
    fn constant_time_eq_is_eq() {
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"ab"));
    }
}
