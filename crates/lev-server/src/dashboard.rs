//! The web dashboard: its page and assets (embedded in the binary, no build
//! step), and its login, logout and `me` routes.
//!
//! - `GET /`: the page, under a strict Content-Security-Policy (no inline
//!   script or style, nothing from elsewhere, no framing).
//! - `GET /assets/{name}`: the style sheet (`app.css`) and the script's ES
//!   modules ([`MODULES`], a fixed list: `main.js`, the page's one script,
//!   and the modules it imports, which the page preloads). `text.js` gets
//!   [`lev_protocol::text::HIDDEN`] written into it when first served, so the
//!   page flags exactly the characters the CLI flags.
//!
//! Every answer carries an ETag and the page is revalidated on each load
//! (`no-cache`). The page and the modules name the assets with this
//! binary's version (`?v=`, written in when first served, like the table of
//! hidden characters), and an asset asked for with that version may be kept
//! (`immutable`): a page load revalidates the page alone, not each of its
//! nineteen modules, and a new binary's assets are new addresses. Asked for
//! without it, an asset is `no-cache` as the page is.
//! - `POST /v1/login {token}`: an approver or admin token opens a session
//!   (see [`crate::session_auth`]); answers `{name, role, csrf_token,
//!   attach_root}` and sets the session cookie.
//! - `POST /v1/logout`: ends the session (CSRF token required) and clears the
//!   cookie.
//! - `GET /v1/me`: who is logged in: `{name, role, csrf_token, attach_root}`
//!   (`csrf_token` null when authenticated by a bearer token).
//! - `GET /v1/operators?sessions=a,b` (approver): which of those sessions have
//!   an operator connected now, `{"sessions": [{"session_id", "connected"}]}`,
//!   so the page knows the state before the first `operator.*` event.

use std::sync::{Arc, LazyLock};

use axum::body::Body;
use axum::extract::State;
use axum::http::header::{
    CACHE_CONTROL, CONTENT_SECURITY_POLICY, CONTENT_TYPE, ETAG, IF_NONE_MATCH, REFERRER_POLICY,
    SET_COOKIE, X_CONTENT_TYPE_OPTIONS, X_FRAME_OPTIONS,
};
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Extension, Json, Router};
use lev_protocol::api::{
    ErrorBody, LoggedOut, LoginRequest, Me, OperatorPresence, Role, SessionPresence,
};
use serde::Deserialize;
use sha2::{Digest, Sha256};

use crate::auth::{Principal, token_hash};
use crate::body::JsonBody;
use crate::error::{ApiError, ApiResult};
use crate::extract::{PathParam, Q};
use crate::session_auth::{CurrentSession, Sessions, session_cookie};
use crate::state::AppState;

/// The page's Content-Security-Policy.
pub const CSP: &str = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' \
                       data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; \
                       form-action 'self'";

const INDEX_HTML: &str = include_str!("../assets/index.html");
const APP_CSS: &str = include_str!("../assets/app.css");

/// Where a script module sits. A base module imports no view; a view
/// imports base modules and views listed before it; `main.js`, the page,
/// imports views. A call that must go up a layer goes through `bus.js` (a
/// table `main.js` fills at boot), never through an import.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Layer {
    Base,
    View,
    Page,
}

/// A module of `assets/`: its name, its layer and its text.
macro_rules! module {
    ($name:literal, $layer:ident) => {
        (
            $name,
            Layer::$layer,
            include_str!(concat!("../assets/", $name)),
        )
    };
}

/// The page's script modules, each served as `/assets/NAME`, in an order in
/// which every module imports only modules before it (the tests below read
/// their `import` lines and hold this): no import loop, and no base module
/// importing a view.
const MODULES: &[(&str, Layer, &str)] = &[
    module!("bus.js", Base),
    module!("state.js", Base),
    module!("json.js", Base),
    module!("text.js", Base),
    module!("dom.js", Base),
    module!("api.js", Base),
    module!("votes.js", View),
    module!("outcomes.js", View),
    module!("tasks.js", View),
    module!("grants.js", View),
    module!("audit.js", View),
    module!("stats.js", View),
    module!("answer.js", View),
    module!("detail.js", View),
    module!("inbox.js", View),
    module!("notify.js", View),
    module!("history.js", View),
    module!("live.js", View),
    module!("login.js", View),
    module!("main.js", Page),
];

/// The module the server writes [`lev_protocol::text::HIDDEN`] into.
const TEXT_MODULE: &str = "text.js";

/// Where text.js takes the table of hidden characters.
const HIDDEN_PLACEHOLDER: &str = "[/* lev_protocol::text::HIDDEN */]";

const JS: &str = "text/javascript; charset=utf-8";
const CSS: &str = "text/css; charset=utf-8";
const HTML: &str = "text/html; charset=utf-8";

/// A file as served: its text and content type, and its validator.
#[derive(Debug)]
struct Served {
    body: String,
    content_type: &'static str,
    etag: String,
}

impl Served {
    fn new(body: String, content_type: &'static str) -> Self {
        let digest = Sha256::digest(body.as_bytes());
        let etag = format!("\"{}\"", crate::ids::hex(&digest[..12]));
        Served {
            body,
            content_type,
            etag,
        }
    }
}

/// The assets' version: a digest of everything served under `/assets/`.
static VERSION: LazyLock<String> = LazyLock::new(|| {
    let mut digest = Sha256::new();
    digest.update(lev_protocol::text::hidden_ranges_json());
    for (name, _, source) in MODULES {
        digest.update(name);
        digest.update(source);
    }
    digest.update(APP_CSS);
    crate::ids::hex(&digest.finalize()[..8])
});

/// `name` as the page and the modules name it: with this binary's version.
fn versioned(name: &str) -> String {
    format!("{name}?v={}", VERSION.as_str())
}

/// A module as served: each `import ... from './x.js';` line naming
/// `./x.js?v=VERSION`, and text.js with [`lev_protocol::text::HIDDEN`] in
/// place of its placeholder (one definition of hidden characters for every
/// interface, no second copy).
fn serve_module(name: &str, source: &str) -> String {
    let mut out = String::with_capacity(source.len() + 512);
    for line in source.split_inclusive('\n') {
        let import = line.starts_with("import ") || line.starts_with("export ");
        match line.trim_end().strip_suffix(".js';") {
            Some(head) if import && line.contains(" from './") => {
                out.push_str(head);
                out.push_str(&format!(".js?v={}';", VERSION.as_str()));
                out.push_str(&line[line.trim_end().len()..]);
            }
            _ => out.push_str(line),
        }
    }
    if name == TEXT_MODULE {
        out = out.replacen(
            HIDDEN_PLACEHOLDER,
            &lev_protocol::text::hidden_ranges_json(),
            1,
        );
    }
    out
}

/// The page as served: every asset it names with this binary's version.
static PAGE: LazyLock<Served> = LazyLock::new(|| {
    let mut page = INDEX_HTML.to_owned();
    let names = MODULES.iter().map(|(name, ..)| *name).chain(["app.css"]);
    for name in names {
        page = page.replace(
            &format!("\"assets/{name}\""),
            &format!("\"assets/{}\"", versioned(name)),
        );
    }
    Served::new(page, HTML)
});

/// Every asset as served, by name.
static ASSETS: LazyLock<Vec<(&'static str, Served)>> = LazyLock::new(|| {
    MODULES
        .iter()
        .map(|(name, _, source)| (*name, Served::new(serve_module(name, source), JS)))
        .chain([("app.css", Served::new(APP_CSS.to_owned(), CSS))])
        .collect()
});

/// The asset called `name` as served; `None` for a name not on the fixed
/// list.
fn served(name: &str) -> Option<&'static Served> {
    ASSETS.iter().find(|(n, _)| *n == name).map(|(_, s)| s)
}

/// The dashboard's routes (merged into the API router).
pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/", get(index))
        .route("/assets/{name}", get(assets))
        .route("/v1/login", post(login))
        .route("/v1/logout", post(logout))
        .route("/v1/me", get(me))
        .route("/v1/operators", get(operators))
}

/// How long a browser may keep an asset asked for with this version.
const IMMUTABLE: &str = "public, max-age=31536000, immutable";

/// An embedded file with its type, security headers and a validator.
fn asset(headers: &HeaderMap, file: &'static Served, cache: &'static str, page: bool) -> Response {
    let fresh = headers
        .get(IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(',').any(|t| t.trim() == file.etag));
    let mut response = if fresh {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        Response::new(Body::from(file.body.as_str()))
    };
    let h = response.headers_mut();
    h.insert(CONTENT_TYPE, HeaderValue::from_static(file.content_type));
    h.insert(X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    h.insert(CACHE_CONTROL, HeaderValue::from_static(cache));
    if let Ok(v) = HeaderValue::from_str(&file.etag) {
        h.insert(ETAG, v);
    }
    if page {
        h.insert(CONTENT_SECURITY_POLICY, HeaderValue::from_static(CSP));
        h.insert(X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
        h.insert(REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
        h.insert(
            HeaderName::from_static("cross-origin-opener-policy"),
            HeaderValue::from_static("same-origin"),
        );
        h.insert(
            HeaderName::from_static("permissions-policy"),
            HeaderValue::from_static("camera=(), microphone=(), geolocation=(), payment=()"),
        );
    }
    h.insert(
        HeaderName::from_static("cross-origin-resource-policy"),
        HeaderValue::from_static("same-origin"),
    );
    response
}

#[utoipa::path(get, path = "/", tag = "dashboard", security(()),
    responses((status = 200, description = "The dashboard's page", content_type = "text/html", body = String),
        (status = 304, description = "Not modified (`If-None-Match`)")))]
async fn index(headers: HeaderMap) -> Response {
    asset(&headers, &PAGE, "no-cache", true)
}

/// `GET /assets/{name}?v=`.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct AssetQuery {
    /// The assets' version, as the page names them: asked for with this
    /// server's, the answer may be kept (`immutable`); else it is
    /// `no-cache`.
    #[serde(default)]
    pub v: Option<String>,
}

/// `GET /assets/{name}`: `app.css`, or one of [`MODULES`].
#[utoipa::path(get, path = "/assets/{name}", tag = "dashboard", security(()),
    params(("name" = String, Path, description = "`app.css`, or a module of the dashboard's script: `main.js` and the modules it imports"), AssetQuery),
    responses((status = 200, description = "The dashboard's style sheet or one of its script's modules",
            content((String = "text/javascript"), (String = "text/css"))),
        (status = 304, description = "Not modified (`If-None-Match`)"),
        (status = 404, description = "No such asset", body = ErrorBody)))]
async fn assets(
    headers: HeaderMap,
    PathParam(name): PathParam,
    Q(query): Q<AssetQuery>,
) -> ApiResult<Response> {
    let file = served(&name).ok_or_else(|| ApiError::NotFound("no such asset".into()))?;
    let cache = if query.v.as_deref() == Some(VERSION.as_str()) {
        IMMUTABLE
    } else {
        "no-cache"
    };
    Ok(asset(&headers, file, cache, false))
}

fn sessions_of(ext: Option<Extension<Arc<Sessions>>>) -> ApiResult<Arc<Sessions>> {
    ext.map(|Extension(s)| s)
        .ok_or_else(|| ApiError::Internal("the dashboard's session store is not installed".into()))
}

/// `POST /v1/login`: an approver's or admin's token for a session cookie.
#[utoipa::path(post, path = "/v1/login", tag = "dashboard", security(()), request_body = LoginRequest,
    responses((status = 200, description = "Logged in: the session cookie is set", body = Me),
        (status = 401, description = "An unknown or revoked token", body = ErrorBody),
        (status = 403, description = "Not an approver or admin token, or another origin", body = ErrorBody)))]
async fn login(
    State(state): State<AppState>,
    sessions: Option<Extension<Arc<Sessions>>>,
    headers: HeaderMap,
    JsonBody(body): JsonBody<LoginRequest>,
) -> ApiResult<Response> {
    let sessions = sessions_of(sessions)?;
    // Another origin (another localhost port, say) may not log a browser in.
    crate::session_auth::check_origin(&headers, state.settings())?;
    // A cross-site form cannot send this type without a CORS preflight,
    // which this server never grants: no login CSRF.
    let json = headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.trim_start()
                .to_ascii_lowercase()
                .starts_with("application/json")
        });
    if !json {
        return Err(ApiError::Malformed(
            "expected Content-Type: application/json".into(),
        ));
    }
    let secret = body.token.trim();
    let record = if secret.is_empty() {
        None
    } else {
        state.store().token_by_hash(&token_hash(secret)).await?
    };
    let record = record.ok_or_else(|| ApiError::Unauthorized("unknown or revoked token".into()))?;
    if !matches!(record.info.role, Role::Approver | Role::Admin) {
        return Err(ApiError::forbidden(format!(
            "the dashboard is for approver and admin tokens; {:?} is a {} token",
            record.info.name,
            record.info.role.as_str()
        )));
    }
    // A login replaces the session the browser had, if any.
    if let Some(old) = session_cookie(&headers) {
        sessions.remove(&old).await?;
    }
    let session = sessions.create(&record.hash).await?;
    let cookie = HeaderValue::from_str(&sessions.cookie(&session.id))
        .map_err(|e| ApiError::Internal(format!("session cookie: {e}")))?;
    let me = Me {
        name: record.info.name,
        role: record.info.role,
        csrf_token: Some(session.csrf),
        attach_root: state.settings().attach_root.is_some(),
    };
    let mut response = Json(me).into_response();
    response.headers_mut().insert(SET_COOKIE, cookie);
    response
        .headers_mut()
        .insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    Ok(response)
}

/// `POST /v1/logout`: ends the browser's session (CSRF token required).
#[utoipa::path(post, path = "/v1/logout", tag = "dashboard", security(()),
    responses((status = 200, description = "Logged out: the cookie is cleared", body = LoggedOut),
        (status = 403, description = "A live session without its CSRF token", body = ErrorBody)))]
async fn logout(
    sessions: Option<Extension<Arc<Sessions>>>,
    headers: HeaderMap,
) -> ApiResult<Response> {
    let sessions = sessions_of(sessions)?;
    if let Some(id) = session_cookie(&headers) {
        // Only the page itself may log its person out; an already ended
        // session has nothing to protect, and its cookie is just cleared.
        if sessions.is_live(&id).await? {
            sessions.check_csrf(&id, &headers).await?;
            sessions.remove(&id).await?;
        }
    }
    let mut response = Json(LoggedOut::default()).into_response();
    let clear = HeaderValue::from_str(&sessions.clear_cookie())
        .map_err(|e| ApiError::Internal(format!("session cookie: {e}")))?;
    response.headers_mut().insert(SET_COOKIE, clear);
    Ok(response)
}

/// `GET /v1/me`: who the token or session is.
#[utoipa::path(get, path = "/v1/me", tag = "dashboard",
    responses((status = 200, description = "The caller", body = Me)))]
async fn me(
    State(state): State<AppState>,
    principal: Principal,
    CurrentSession(session): CurrentSession,
) -> Json<Me> {
    Json(Me {
        name: principal.name,
        role: principal.role,
        csrf_token: session.map(|s| s.csrf),
        attach_root: state.settings().attach_root.is_some(),
    })
}

/// `GET /v1/operators?sessions=`.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct OperatorsQuery {
    /// Comma-separated session ids.
    #[serde(default)]
    pub sessions: String,
}

/// Most sessions one `GET /v1/operators` asks about.
const MAX_OPERATOR_QUERY: usize = 1000;

/// `GET /v1/operators?sessions=a,b` (approver).
#[utoipa::path(get, path = "/v1/operators", tag = "operators", params(OperatorsQuery),
    responses((status = 200, description = "Whether each session has an operator connected", body = OperatorPresence)))]
async fn operators(
    State(state): State<AppState>,
    principal: Principal,
    crate::extract::Q(query): crate::extract::Q<OperatorsQuery>,
) -> ApiResult<Json<OperatorPresence>> {
    principal.require(&[Role::Approver])?;
    let mut sessions: Vec<&str> = query
        .sessions
        .split(',')
        .filter(|s| !s.is_empty())
        .collect();
    sessions.sort_unstable();
    sessions.dedup();
    if sessions.len() > MAX_OPERATOR_QUERY {
        return Err(ApiError::Invalid(format!(
            "sessions: expected at most {MAX_OPERATOR_QUERY} session ids, found {}",
            sessions.len()
        )));
    }
    for sid in &sessions {
        lev_protocol::validate::check_id("sessions", sid)?;
    }
    let hub = state.operators();
    let mut presence = Vec::with_capacity(sessions.len());
    for sid in &sessions {
        presence.push(SessionPresence {
            session_id: (*sid).to_owned(),
            connected: hub.is_connected(sid).await?,
        });
    }
    Ok(Json(OperatorPresence { sessions: presence }))
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, BTreeSet};
    use std::path::Path;

    use super::*;

    /// Every module as served (text.js with its table written in).
    fn served_modules() -> impl Iterator<Item = (&'static str, &'static str)> {
        MODULES.iter().map(|(name, ..)| {
            let file = served(name).unwrap_or_else(|| panic!("{name} is not served"));
            (*name, file.body.as_str())
        })
    }

    /// The modules `source` imports, read off its `import` lines (and any
    /// `export ... from` line). Each import must be static, on one line, and
    /// name a sibling module (`'./NAME.js'`), so that this reading sees
    /// every one.
    fn imports(name: &str, source: &str) -> Vec<String> {
        let mut out = Vec::new();
        for (n, line) in source.lines().enumerate() {
            let line = line.trim();
            let at = || format!("{name}:{}: {line}", n + 1);
            assert!(!line.contains("import("), "a dynamic import at {}", at());
            let import = line.starts_with("import ") || line.starts_with("import{");
            let reexport = line.starts_with("export ") && line.contains(" from ");
            if !import && !reexport {
                continue;
            }
            let spec = match line.rsplit_once(" from ") {
                Some((_, spec)) => spec,
                None => line.trim_start_matches("import"),
            };
            let spec = spec.trim().trim_end_matches(';').trim_end();
            let target = spec
                .strip_prefix("'./")
                .and_then(|t| t.strip_suffix('\''))
                .filter(|t| !t.contains('/'))
                .unwrap_or_else(|| {
                    panic!(
                        "write each import on one line, from './NAME.js', at {}",
                        at()
                    )
                });
            out.push(target.to_owned());
        }
        out
    }

    /// An import loop of `graph`, as the modules round it, if it has one.
    fn import_loop(graph: &BTreeMap<String, Vec<String>>) -> Option<Vec<String>> {
        #[derive(Clone, Copy, PartialEq)]
        enum Seen {
            Open,
            Done,
        }
        fn walk(
            node: &str,
            graph: &BTreeMap<String, Vec<String>>,
            seen: &mut BTreeMap<String, Seen>,
            path: &mut Vec<String>,
        ) -> Option<Vec<String>> {
            match seen.get(node) {
                Some(Seen::Done) => return None,
                Some(Seen::Open) => {
                    let from = path.iter().position(|n| n == node).unwrap_or(0);
                    let mut cycle = path[from..].to_vec();
                    cycle.push(node.to_owned());
                    return Some(cycle);
                }
                None => {}
            }
            seen.insert(node.to_owned(), Seen::Open);
            path.push(node.to_owned());
            for next in graph.get(node).into_iter().flatten() {
                if let Some(cycle) = walk(next, graph, seen, path) {
                    return Some(cycle);
                }
            }
            path.pop();
            seen.insert(node.to_owned(), Seen::Done);
            None
        }
        let mut seen = BTreeMap::new();
        graph
            .keys()
            .find_map(|node| walk(node, graph, &mut seen, &mut Vec::new()))
    }

    #[test]
    fn the_import_reader_sees_every_import_and_every_loop() {
        let source = "// import nothing from a comment\n\
                      import { a, b } from './a.js';\n\
                      import * as c from './c.js';\n\
                      import './d.js';\n\
                      export { e } from './e.js';\n\
                      const x = 'import';\n";
        assert_eq!(imports("t.js", source), ["a.js", "c.js", "d.js", "e.js"]);
        for bad in [
            "import {\n  a,\n} from './a.js';\n",
            "import { a } from '../a.js';\n",
            "import { a } from 'https://elsewhere/a.js';\n",
            "const m = await import('./a.js');\n",
        ] {
            let read = std::panic::catch_unwind(|| imports("t.js", bad));
            assert!(read.is_err(), "not refused: {bad}");
        }
        let graph = |edges: &[(&str, &str)]| {
            let mut g: BTreeMap<String, Vec<String>> = BTreeMap::new();
            for (from, to) in edges {
                g.entry((*from).to_owned())
                    .or_default()
                    .push((*to).to_owned());
            }
            g
        };
        assert_eq!(
            import_loop(&graph(&[("a", "b"), ("b", "c"), ("c", "a"), ("a", "d")])),
            Some(vec!["a".into(), "b".into(), "c".into(), "a".into()])
        );
        assert_eq!(
            import_loop(&graph(&[("a", "b"), ("b", "c"), ("a", "c")])),
            None
        );
    }

    #[test]
    fn the_modules_import_down_the_layers_without_a_loop() {
        let place: BTreeMap<&str, (usize, Layer)> = MODULES
            .iter()
            .enumerate()
            .map(|(i, (name, layer, _))| (*name, (i, *layer)))
            .collect();
        assert_eq!(place.len(), MODULES.len(), "a module listed twice");
        let mut graph = BTreeMap::new();
        let mut imported = BTreeSet::new();
        let mut later = Vec::new();
        for (i, (name, layer, source)) in MODULES.iter().enumerate() {
            let targets = imports(name, source);
            for target in &targets {
                let &(j, to) = place
                    .get(target.as_str())
                    .unwrap_or_else(|| panic!("{name} imports {target}, which is not served"));
                match layer {
                    Layer::Base => assert_eq!(
                        to,
                        Layer::Base,
                        "the base module {name} imports the view {target}"
                    ),
                    Layer::View => assert_ne!(to, Layer::Page, "{name} imports {target}"),
                    Layer::Page => {}
                }
                later.extend((j >= i).then(|| format!("{name} imports {target}")));
                imported.insert(target.clone());
            }
            graph.insert((*name).to_owned(), targets);
        }
        assert_eq!(import_loop(&graph), None, "an import loop");
        // No loop, and the list reads in order: each module after the ones
        // it imports.
        assert!(later.is_empty(), "listed too early in MODULES: {later:?}");
        // One page: main.js is the page's script and no module imports it;
        // every other module is imported by one.
        let pages: Vec<&str> = MODULES
            .iter()
            .filter(|(_, layer, _)| *layer == Layer::Page)
            .map(|(name, ..)| *name)
            .collect();
        assert_eq!(pages, ["main.js"]);
        for (name, layer, _) in MODULES {
            assert_eq!(
                imported.contains(*name),
                *layer != Layer::Page,
                "{name}: imported, or the page, not both nor neither"
            );
        }
        // The calls up a layer are bound by the page alone.
        for (name, _, source) in MODULES {
            let binds = source.matches("bindUp(").count();
            match *name {
                "bus.js" | "main.js" => assert_eq!(binds, 1, "{name}"),
                _ => assert_eq!(binds, 0, "{name} binds bus.js's calls"),
            }
        }
        // The ones that sit on the base only.
        for base in [
            "bus.js", "state.js", "json.js", "text.js", "dom.js", "api.js",
        ] {
            assert_eq!(place[base].1, Layer::Base, "{base}");
        }
    }

    #[test]
    fn the_page_loads_only_its_own_assets() {
        assert!(INDEX_HTML.contains(r#"<script type="module" src="assets/main.js"></script>"#));
        assert!(INDEX_HTML.contains(r#"href="assets/app.css""#));
        // No inline script or handler: the CSP would refuse them.
        assert_eq!(INDEX_HTML.matches("<script").count(), 1);
        assert!(!INDEX_HTML.contains(" onclick=") && !INDEX_HTML.contains(" onload="));
        assert!(!INDEX_HTML.contains("style="));
        // Everything the page names is served here: its assets, an empty
        // icon, its own fragments.
        for attr in ["src=\"", "href=\""] {
            for value in INDEX_HTML.split(attr).skip(1) {
                let value = value.split('"').next().unwrap_or_default();
                let ours = value
                    .strip_prefix("assets/")
                    .is_some_and(|name| served(name).is_some());
                assert!(
                    ours || value == "data:," || value.starts_with('#'),
                    "index.html names {value}"
                );
            }
        }
        // Every module but the page's script is preloaded, so the browser
        // fetches them all at once rather than import by import.
        let preloaded: BTreeSet<&str> = INDEX_HTML
            .split(r#"<link rel="modulepreload" href="assets/"#)
            .skip(1)
            .filter_map(|rest| rest.split('"').next())
            .collect();
        let modules: BTreeSet<&str> = MODULES
            .iter()
            .map(|(name, ..)| *name)
            .filter(|name| *name != "main.js")
            .collect();
        assert_eq!(preloaded, modules);
        // Every script in assets/ is one of the modules (none forgotten).
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("assets");
        let mut files = BTreeSet::new();
        for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
            let name = entry.map(|e| e.file_name()).unwrap_or_default();
            let name = name.to_string_lossy().into_owned();
            if name.ends_with(".js") {
                files.insert(name);
            }
        }
        let listed: BTreeSet<String> = MODULES.iter().map(|(n, ..)| (*n).to_owned()).collect();
        assert_eq!(files, listed);
    }

    #[test]
    fn each_asset_is_served_with_its_type_and_nothing_else_is() {
        assert_eq!(served("app.css").map(|f| f.content_type), Some(CSS));
        assert_eq!(served("app.css").map(|f| f.body.as_str()), Some(APP_CSS));
        for (name, ..) in MODULES {
            assert_eq!(served(name).map(|f| f.content_type), Some(JS), "{name}");
        }
        for name in [
            "app.js",
            "",
            "index.html",
            "../src/dashboard.rs",
            "main.js/",
            "Main.js",
        ] {
            assert!(served(name).is_none(), "{name:?} is served");
        }
    }

    #[test]
    fn the_page_and_the_modules_name_the_assets_with_their_version() {
        let version = VERSION.as_str();
        assert!(
            version.len() == 16 && version.bytes().all(|b| b.is_ascii_hexdigit()),
            "{version}"
        );
        // The page: each asset it names, and nothing else changed.
        let page = &PAGE.body;
        let mut named = 0;
        for attr in ["src=\"assets/", "href=\"assets/"] {
            for rest in page.split(attr).skip(1) {
                let value = rest.split('"').next().unwrap_or_default();
                let name = value.strip_suffix(&format!("?v={version}"));
                assert!(name.and_then(served).is_some(), "the page names {value}");
                named += 1;
            }
        }
        assert_eq!(
            named,
            MODULES.len() + 1,
            "the script, the preloads, the style"
        );
        assert_eq!(page.replace(&format!("?v={version}"), ""), INDEX_HTML);
        // The modules: each import names the same version, and that is all
        // that changed (but text.js's table).
        for (name, _, source) in MODULES {
            let body = &served(name).unwrap_or_else(|| panic!("{name}")).body;
            let imports = imports(name, source).len();
            assert!(imports > 0 || *name == "bus.js" || *name == "state.js" || *name == "json.js");
            assert_eq!(
                body.matches(&format!(".js?v={version}';")).count(),
                imports,
                "{name}"
            );
            let mut plain = body.replace(&format!("?v={version}"), "");
            if *name == TEXT_MODULE {
                plain = plain.replace(
                    &lev_protocol::text::hidden_ranges_json(),
                    HIDDEN_PLACEHOLDER,
                );
            }
            assert_eq!(plain, *source, "{name}");
        }
    }

    #[test]
    fn the_script_gets_the_table_of_hidden_characters() {
        // Written into text.js, once, and into no other module.
        for (name, _, source) in MODULES {
            let expected = usize::from(*name == TEXT_MODULE);
            assert_eq!(
                source.matches(HIDDEN_PLACEHOLDER).count(),
                expected,
                "{name}"
            );
            if *name != TEXT_MODULE {
                assert!(
                    !source.contains("HIDDEN_RANGES"),
                    "{name} has a table of its own"
                );
            }
        }
        let text_js = served(TEXT_MODULE)
            .map(|f| f.body.as_str())
            .unwrap_or_default();
        assert!(!text_js.contains(HIDDEN_PLACEHOLDER));
        let table = format!(
            "const HIDDEN_RANGES = {};",
            lev_protocol::text::hidden_ranges_json()
        );
        assert_eq!(text_js.matches(&table).count(), 1, "text.js lacks {table}");
        assert!(
            table.contains("[917504,921599]"),
            "tags and selectors: {table}"
        );
    }

    #[test]
    fn the_script_never_renders_html() {
        for (name, body) in served_modules() {
            for banned in [
                ".innerHTML",
                "outerHTML",
                "insertAdjacentHTML",
                "document.write",
                "eval(",
                "new Function",
            ] {
                assert!(!body.contains(banned), "{name} uses {banned}");
            }
            // Agent JSON is read losslessly (json.js's jsonParse).
            assert!(!body.contains("JSON.parse("), "{name} uses JSON.parse");
        }
    }
}
