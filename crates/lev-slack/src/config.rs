//! `lev serve --slack-config slack.toml`: where to post, with which
//! credentials, what to post, and who in Slack answers as whom.
//!
//! ```toml
//! bot_token_file = "slack-bot-token"          # relative to this file
//! signing_secret_file = "slack-signing-secret"
//! channel = "C0123456789"
//! # api_url = "https://slack.com/api/"        # the default
//! # sessions = ["deploy-bot", "ci-*"]         # only these sessions (default: all)
//! # routes = ["human"]                        # only these routes (default: all)
//! # dashboard_url = "https://lev.example.com" # adds an "Open in lev" button
//!
//! [users]
//! U012ABCDEF = "alice"                        # Slack user id = approver token name
//! ```

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use lev_protocol::api::InteractionView;
use serde::Deserialize;

/// Slack's Web API, when `api_url` is not set.
pub const DEFAULT_API_URL: &str = "https://slack.com/api/";

/// Largest config file read, in bytes.
const MAX_CONFIG_BYTES: u64 = 1024 * 1024;
/// Largest token or secret file read, in bytes.
const MAX_SECRET_BYTES: u64 = 64 * 1024;
/// Longest URL accepted (Slack's own limit on a button's `url`).
const MAX_URL_LEN: usize = 3000;

/// The Slack integration's settings, secrets read.
///
/// `Debug` prints `<secret>` for the token and the signing secret.
#[derive(Clone, PartialEq, Eq)]
pub struct SlackConfig {
    /// The bot token (`xoxb-…`), trimmed: sent as `Authorization: Bearer`.
    pub bot_token: String,
    /// The app's signing secret, trimmed: the HMAC key of [`super::verify::verify`].
    pub signing_secret: Vec<u8>,
    /// The channel every message is posted to (an id such as `C0123456789`).
    pub channel: String,
    /// The Web API's base URL, ending in `/`; method names are appended.
    pub api_url: String,
    /// Only interactions of sessions matching one of these session
    /// patterns (ids, `*` matching any run) are posted; empty: all.
    pub sessions: Vec<String>,
    /// Only interactions whose effective route holds one of these are
    /// posted; empty: all.
    pub routes: Vec<String>,
    /// The dashboard's base URL (no trailing `/`), for "Open in lev" links.
    pub dashboard_url: Option<String>,
    /// Slack user id -> the approver token name a click by that user answers as.
    pub users: BTreeMap<String, String>,
}

impl fmt::Debug for SlackConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SlackConfig")
            .field("bot_token", &format_args!("<secret>"))
            .field("signing_secret", &format_args!("<secret>"))
            .field("channel", &self.channel)
            .field("api_url", &self.api_url)
            .field("sessions", &self.sessions)
            .field("routes", &self.routes)
            .field("dashboard_url", &self.dashboard_url)
            .field("users", &self.users)
            .finish()
    }
}

/// The file as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    bot_token_file: String,
    signing_secret_file: String,
    channel: String,
    #[serde(default)]
    api_url: Option<String>,
    #[serde(default)]
    sessions: Vec<String>,
    #[serde(default)]
    routes: Vec<String>,
    #[serde(default)]
    dashboard_url: Option<String>,
    #[serde(default)]
    users: BTreeMap<String, String>,
}

impl SlackConfig {
    /// Read `path` (TOML) and the token and secret files it names (relative
    /// paths are relative to `path`'s directory).
    ///
    /// # Errors
    /// A message naming the config file and the field at fault, such as
    /// `slack.toml: bot_token_file /x/y: No such file or directory (os error 2)`.
    pub fn from_file(path: &Path) -> Result<SlackConfig, String> {
        let name = path.display().to_string();
        let bytes = read_limited(path, MAX_CONFIG_BYTES).map_err(|e| format!("{name}: {e}"))?;
        let text = String::from_utf8(bytes).map_err(|_| format!("{name}: not UTF-8 text"))?;
        let raw: RawConfig = toml::from_str(&text).map_err(|e| {
            let line = e.span().map_or(1, |span| {
                1 + text
                    .get(..span.start)
                    .map_or(0, |before| before.matches('\n').count())
            });
            format!("{name}:{line}: {}", e.message().trim())
        })?;
        let base = path.parent().unwrap_or_else(|| Path::new(""));
        Self::from_raw(raw, &name, base)
    }

    fn from_raw(raw: RawConfig, name: &str, base: &Path) -> Result<SlackConfig, String> {
        let bot_token = read_secret(name, "bot_token_file", &raw.bot_token_file, base)?;
        if let Some(c) = bot_token.chars().find(|c| !c.is_ascii_graphic()) {
            return Err(format!(
                "{name}: bot_token_file {}: the token holds {}, which cannot go in an \
                 HTTP header",
                resolve(base, &raw.bot_token_file).display(),
                describe_char(c)
            ));
        }
        let signing_secret =
            read_secret(name, "signing_secret_file", &raw.signing_secret_file, base)?.into_bytes();

        let channel = raw.channel.trim().to_owned();
        if channel.is_empty() {
            return Err(format!("{name}: channel: must not be empty"));
        }
        if let Some(c) = channel.chars().find(|c| c.is_control()) {
            return Err(format!("{name}: channel: holds {}", describe_char(c)));
        }

        let api_url = match raw.api_url {
            None => DEFAULT_API_URL.to_owned(),
            Some(url) => {
                let url = check_url(&url).map_err(|e| format!("{name}: api_url {url:?}: {e}"))?;
                if url.ends_with('/') {
                    url
                } else {
                    format!("{url}/")
                }
            }
        };
        let dashboard_url = match raw.dashboard_url {
            None => None,
            Some(url) => {
                let checked =
                    check_url(&url).map_err(|e| format!("{name}: dashboard_url {url:?}: {e}"))?;
                Some(checked.trim_end_matches('/').to_owned())
            }
        };

        if let Some(bad) = raw
            .sessions
            .iter()
            .find(|s| !lev_protocol::ids::is_valid_session_pattern(s))
        {
            return Err(format!(
                "{name}: sessions: {bad:?} is not a session id or pattern (1 to 128 of \
                 A-Z a-z 0-9 . _ : - and *)"
            ));
        }
        check_list(name, "routes", &raw.routes)?;

        for (user, approver) in &raw.users {
            if user.is_empty() || !user.bytes().all(|b| b.is_ascii_alphanumeric()) {
                return Err(format!(
                    "{name}: users: {user:?} is not a Slack user id (letters and digits, \
                     such as U012ABCDEF)"
                ));
            }
            if !lev_protocol::ids::is_valid_id(approver) {
                return Err(format!(
                    "{name}: users.{user}: {approver:?} is not a token name (1 to 128 of \
                     A-Z a-z 0-9 . _ : -)"
                ));
            }
            // Exactly lev's own names: a mapping to a token made before
            // look-alikes were refused keeps working (a click answers only
            // as a token that exists, and no new look-alike is made).
            if lev_protocol::ids::is_lev_name(approver) {
                return Err(format!(
                    "{name}: users.{user}: {approver:?} is a name lev keeps for itself"
                ));
            }
        }

        Ok(SlackConfig {
            bot_token,
            signing_secret,
            channel,
            api_url,
            sessions: raw.sessions,
            routes: raw.routes,
            dashboard_url,
            users: raw.users,
        })
    }

    /// The URL of Web API method `method`: `api_url` + `method`, such as
    /// `https://slack.com/api/chat.postMessage`.
    pub fn method_url(&self, method: &str) -> String {
        format!("{}{method}", self.api_url)
    }

    /// The approver token name a click by Slack user `slack_user` answers
    /// as, if that user is mapped.
    pub fn approver_for(&self, slack_user: &str) -> Option<&str> {
        self.users.get(slack_user).map(String::as_str)
    }

    /// Whether `view` is to be posted: its session matches a listed pattern
    /// (or none is listed), and its effective route holds a listed route (or
    /// none is listed).
    pub fn wants(&self, view: &InteractionView) -> bool {
        let request = &view.request.request;
        let session_ok = self.sessions.is_empty()
            || self
                .sessions
                .iter()
                .any(|p| lev_protocol::ids::session_pattern_matches(p, &request.session_id));
        let route_ok = self.routes.is_empty() || {
            let route = request.effective_route();
            route.iter().any(|r| self.routes.contains(r))
        };
        session_ok && route_ok
    }
}

/// `file` resolved against the config file's directory.
fn resolve(base: &Path, file: &str) -> PathBuf {
    let p = Path::new(file);
    if p.is_absolute() {
        p.to_path_buf()
    } else {
        base.join(p)
    }
}

/// The trimmed text of the secret file named by `field`.
fn read_secret(name: &str, field: &str, file: &str, base: &Path) -> Result<String, String> {
    if file.trim().is_empty() {
        return Err(format!("{name}: {field}: must name a file"));
    }
    let path = resolve(base, file);
    let shown = path.display();
    let bytes = read_limited(&path, MAX_SECRET_BYTES)
        .map_err(|e| format!("{name}: {field} {shown}: {e}"))?;
    let text =
        String::from_utf8(bytes).map_err(|_| format!("{name}: {field} {shown}: not UTF-8 text"))?;
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return Err(format!("{name}: {field} {shown}: the file is empty"));
    }
    Ok(trimmed.to_owned())
}

/// At most `limit` bytes of `path`; a longer file (or a device that never
/// ends) is an error rather than a hang.
fn read_limited(path: &Path, limit: u64) -> Result<Vec<u8>, String> {
    lev_io::files::read(path, limit).map_err(|e| e.reason())
}

/// A non-empty list of non-empty names.
fn check_list(name: &str, field: &str, items: &[String]) -> Result<(), String> {
    for item in items {
        if item.trim().is_empty() {
            return Err(format!("{name}: {field}: an entry is empty"));
        }
        if let Some(c) = item.chars().find(|c| c.is_control()) {
            return Err(format!(
                "{name}: {field}: {item:?} holds {}",
                describe_char(c)
            ));
        }
    }
    Ok(())
}

/// `url` trimmed, when it is an absolute `http://` or `https://` URL with a
/// host and neither query nor fragment.
fn check_url(url: &str) -> Result<String, String> {
    const EXPECTED: &str = "expected an http:// or https:// URL";
    let url = url.trim();
    if url.len() > MAX_URL_LEN {
        return Err(format!("{EXPECTED} of at most {MAX_URL_LEN} bytes"));
    }
    let starts = |scheme: &str| {
        url.as_bytes()
            .get(..scheme.len())
            .is_some_and(|p| p.eq_ignore_ascii_case(scheme.as_bytes()))
    };
    let rest = if starts("http://") {
        url.get(7..)
    } else if starts("https://") {
        url.get(8..)
    } else {
        None
    };
    let Some(rest) = rest else {
        return Err(EXPECTED.to_owned());
    };
    if let Some(c) = url.chars().find(|c| c.is_whitespace() || c.is_control()) {
        return Err(format!("{EXPECTED}; found {}", describe_char(c)));
    }
    if url.contains(['?', '#']) {
        return Err(format!("{EXPECTED} without a query or fragment"));
    }
    let authority = rest.split('/').next().unwrap_or_default();
    if authority.contains('@') {
        return Err(format!("{EXPECTED} without a user name or password"));
    }
    let host = if let Some(v6) = authority.strip_prefix('[') {
        let Some((inside, after)) = v6.split_once(']') else {
            return Err(format!("{EXPECTED} with a host"));
        };
        check_port(after.strip_prefix(':'), after.is_empty())?;
        inside
    } else {
        match authority.split_once(':') {
            Some((host, port)) => {
                check_port(Some(port), false)?;
                host
            }
            None => authority,
        }
    };
    if host.is_empty() {
        return Err(format!("{EXPECTED} with a host"));
    }
    Ok(url.to_owned())
}

/// After the host: nothing, or `:` and a port number.
fn check_port(port: Option<&str>, nothing_after: bool) -> Result<(), String> {
    match port {
        None if nothing_after => Ok(()),
        Some(p) if !p.is_empty() && p.len() <= 5 && p.bytes().all(|b| b.is_ascii_digit()) => {
            match p.parse::<u32>() {
                Ok(n) if n <= 65_535 => Ok(()),
                _ => Err(format!("port {p} is out of range")),
            }
        }
        _ => Err("expected an http:// or https:// URL with host[:port]".to_owned()),
    }
}

/// `U+0009` and the like, for a message.
fn describe_char(c: char) -> String {
    if c == ' ' {
        "a space".to_owned()
    } else {
        format!("U+{:04X}", u32::from(c))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    /// A fresh directory under the system's temporary one.
    struct Dir(PathBuf);

    impl Dir {
        fn new() -> Self {
            static N: AtomicUsize = AtomicUsize::new(0);
            let n = N.fetch_add(1, Ordering::Relaxed);
            let p =
                std::env::temp_dir().join(format!("lev-slack-config-{}-{n}", std::process::id()));
            let _ = std::fs::remove_dir_all(&p);
            std::fs::create_dir_all(&p).unwrap();
            Dir(p)
        }

        fn write(&self, name: &str, text: &str) -> PathBuf {
            let p = self.0.join(name);
            std::fs::write(&p, text).unwrap();
            p
        }

        /// slack.toml with `extra` appended to a valid base, secrets written.
        fn config(&self, extra: &str) -> PathBuf {
            self.write("bot-token", "xoxb-123-456-abc\n");
            self.write("signing-secret", "  8f742231b10e8888abcd99yyyzzz85a5 \n");
            self.write(
                "slack.toml",
                &format!(
                    "bot_token_file = \"bot-token\"\nsigning_secret_file = \"signing-secret\"\n\
                     channel = \"C0123456789\"\n{extra}"
                ),
            )
        }
    }

    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn err(dir: &Dir, extra: &str) -> String {
        SlackConfig::from_file(&dir.config(extra)).unwrap_err()
    }

    #[test]
    fn a_minimal_file_reads_with_defaults() {
        let dir = Dir::new();
        let c = SlackConfig::from_file(&dir.config("")).unwrap();
        assert_eq!(c.bot_token, "xoxb-123-456-abc");
        assert_eq!(c.signing_secret, b"8f742231b10e8888abcd99yyyzzz85a5");
        assert_eq!(c.channel, "C0123456789");
        assert_eq!(c.api_url, "https://slack.com/api/");
        assert_eq!(
            c.method_url("chat.postMessage"),
            "https://slack.com/api/chat.postMessage"
        );
        assert!(c.sessions.is_empty() && c.routes.is_empty() && c.users.is_empty());
        assert_eq!(c.dashboard_url, None);
    }

    #[test]
    fn every_field_reads() {
        let dir = Dir::new();
        let c = SlackConfig::from_file(&dir.config(
            "api_url = \"http://127.0.0.1:9999/api\"\nsessions = [\"s1\", \"s2\"]\n\
             routes = [\"human\"]\ndashboard_url = \"https://lev.example.com/\"\n\
             [users]\nU012ABCDEF = \"alice\"\nW0BOB = \"bob\"\n",
        ))
        .unwrap();
        assert_eq!(c.api_url, "http://127.0.0.1:9999/api/");
        assert_eq!(
            c.method_url("views.open"),
            "http://127.0.0.1:9999/api/views.open"
        );
        assert_eq!(c.sessions, ["s1", "s2"]);
        assert_eq!(c.routes, ["human"]);
        assert_eq!(c.dashboard_url.as_deref(), Some("https://lev.example.com"));
        assert_eq!(c.approver_for("U012ABCDEF"), Some("alice"));
        assert_eq!(c.approver_for("W0BOB"), Some("bob"));
        assert_eq!(c.approver_for("U999"), None);
    }

    #[test]
    fn debug_hides_the_secrets() {
        let dir = Dir::new();
        let c = SlackConfig::from_file(&dir.config("")).unwrap();
        let shown = format!("{c:?}");
        assert!(shown.contains("<secret>"), "{shown}");
        assert!(!shown.contains("xoxb"), "{shown}");
        assert!(!shown.contains("8f742231"), "{shown}");
        assert!(shown.contains("C0123456789"), "{shown}");
    }

    #[test]
    fn secret_paths_are_relative_to_the_config_file_or_absolute() {
        let dir = Dir::new();
        let other = Dir::new();
        let abs = other.write("tok", "xoxb-abs");
        dir.write("secret", "s");
        let path = dir.write(
            "slack.toml",
            &format!(
                "bot_token_file = {:?}\nsigning_secret_file = \"secret\"\nchannel = \"C1\"\n",
                abs.display().to_string()
            ),
        );
        let c = SlackConfig::from_file(&path).unwrap();
        assert_eq!(c.bot_token, "xoxb-abs");
        assert_eq!(c.signing_secret, b"s");
    }

    #[test]
    fn errors_name_the_file_and_the_field() {
        let dir = Dir::new();
        let e = err(&dir, "api_url = \"ftp://x\"\n");
        assert!(
            e.contains("slack.toml: api_url \"ftp://x\": expected an http:// or https:// URL"),
            "{e}"
        );
        for bad in [
            "https://",
            "https:///path",
            "http://:80/",
            "http://host:99999/",
            "http://host:port/",
            "http://us er@host/",
            "http://user@host/",
            "https://host/?q=1",
            "https://host/#f",
            "https//host",
            "slack.com/api",
            "",
            "http://[::1/",
        ] {
            let e = err(&dir, &format!("api_url = {bad:?}\n"));
            assert!(e.contains("slack.toml: api_url"), "{bad}: {e}");
        }
        for good in [
            "HTTPS://Slack.com/api/",
            "http://[::1]:8080/api",
            "http://localhost",
            "http://é.example",
        ] {
            let c = SlackConfig::from_file(&dir.config(&format!("api_url = {good:?}\n"))).unwrap();
            assert!(c.api_url.ends_with('/'), "{good}");
        }
        let e = err(&dir, "dashboard_url = \"javascript:alert(1)\"\n");
        assert!(e.contains("slack.toml: dashboard_url"), "{e}");

        let e = err(&dir, "colour = \"blue\"\n");
        assert!(e.contains("slack.toml:4: unknown field `colour`"), "{e}");
        let e = err(&dir, "channel = 5\n");
        assert!(
            e.starts_with(&format!("{}:", dir.0.join("slack.toml").display())),
            "{e}"
        );

        let e = err(&dir, "[users]\nU1 = \"policy\"\n");
        assert!(e.contains("slack.toml: users.U1"), "{e}");
        let e = err(&dir, "[users]\nU1 = \"has space\"\n");
        assert!(e.contains("slack.toml: users.U1"), "{e}");
        let e = err(&dir, "[users]\n\"<@U1>\" = \"alice\"\n");
        assert!(e.contains("slack.toml: users"), "{e}");
        let e = err(&dir, "sessions = [\"a b\"]\n");
        assert!(e.contains("slack.toml: sessions: \"a b\""), "{e}");
        let e = err(&dir, "sessions = [\"\"]\n");
        assert!(e.contains("slack.toml: sessions"), "{e}");
        let e = err(&dir, "routes = [\"ok\", \" \"]\n");
        assert!(e.contains("slack.toml: routes"), "{e}");
    }

    #[test]
    fn missing_fields_and_bad_secrets_are_named() {
        let dir = Dir::new();
        dir.write("bot-token", "xoxb-1");
        dir.write("signing-secret", "s");
        let path = dir.write(
            "slack.toml",
            "bot_token_file = \"bot-token\"\nchannel = \"C1\"\n",
        );
        let e = SlackConfig::from_file(&path).unwrap_err();
        assert!(
            e.contains("slack.toml") && e.contains("signing_secret_file"),
            "{e}"
        );

        let path = dir.write(
            "slack.toml",
            "bot_token_file = \"bot-token\"\nsigning_secret_file = \"signing-secret\"\nchannel = \" \"\n",
        );
        let e = SlackConfig::from_file(&path).unwrap_err();
        assert!(e.ends_with("slack.toml: channel: must not be empty"), "{e}");

        let path = dir.write(
            "slack.toml",
            "bot_token_file = \"nope\"\nsigning_secret_file = \"signing-secret\"\nchannel = \"C1\"\n",
        );
        let e = SlackConfig::from_file(&path).unwrap_err();
        let want = format!(
            "slack.toml: bot_token_file {}: ",
            dir.0.join("nope").display()
        );
        assert!(e.contains(&want) && e.contains("No such file"), "{e}");

        dir.write("empty", " \n\t");
        let path = dir.write(
            "slack.toml",
            "bot_token_file = \"bot-token\"\nsigning_secret_file = \"empty\"\nchannel = \"C1\"\n",
        );
        let e = SlackConfig::from_file(&path).unwrap_err();
        assert!(
            e.contains("slack.toml: signing_secret_file") && e.contains("empty"),
            "{e}"
        );

        dir.write("two-words", "xoxb one");
        let path = dir.write(
            "slack.toml",
            "bot_token_file = \"two-words\"\nsigning_secret_file = \"bot-token\"\nchannel = \"C1\"\n",
        );
        let e = SlackConfig::from_file(&path).unwrap_err();
        assert!(
            e.contains("slack.toml: bot_token_file") && e.contains("HTTP header"),
            "{e}"
        );

        let big = "x".repeat(70 * 1024);
        dir.write("big", &big);
        let path = dir.write(
            "slack.toml",
            "bot_token_file = \"big\"\nsigning_secret_file = \"bot-token\"\nchannel = \"C1\"\n",
        );
        let e = SlackConfig::from_file(&path).unwrap_err();
        assert!(
            e.contains("expected at most") && e.contains("found 71680 bytes"),
            "{e}"
        );

        let e = SlackConfig::from_file(&dir.0.join("absent.toml")).unwrap_err();
        assert!(e.contains("absent.toml: "), "{e}");
        let path = dir.write("broken.toml", "bot_token_file = ");
        let e = SlackConfig::from_file(&path).unwrap_err();
        assert!(e.starts_with(&format!("{}:1: ", path.display())), "{e}");
    }

    fn view(session: &str, route: Option<&[&str]>) -> InteractionView {
        let mut request = serde_json::json!({
            "id": "ir_1",
            "session_id": session,
            "kind": {"type": "free_text", "prompt": "?"},
            "status": "pending",
            "created_at": "2026-01-01T00:00:00Z",
        });
        if let Some(route) = route {
            request["route"] = serde_json::json!(route);
        }
        serde_json::from_value(serde_json::json!({ "request": request })).unwrap()
    }

    #[test]
    fn wants_applies_the_session_and_route_filters() {
        let dir = Dir::new();
        let all = SlackConfig::from_file(&dir.config("")).unwrap();
        assert!(all.wants(&view("s1", None)));
        assert!(all.wants(&view("s9", Some(&["operator"]))));

        let some =
            SlackConfig::from_file(&dir.config("sessions = [\"s1\"]\nroutes = [\"human\"]\n"))
                .unwrap();
        assert!(some.wants(&view("s1", None)), "no route is [\"human\"]");
        assert!(some.wants(&view("s1", Some(&["operator", "human"]))));
        assert!(!some.wants(&view("s1", Some(&["operator"]))));
        assert!(!some.wants(&view("s2", None)));
        assert!(!some.wants(&view("s1x", None)), "sessions match whole ids");

        let pattern =
            SlackConfig::from_file(&dir.config("sessions = [\"ci-*\", \"s1\"]\n")).unwrap();
        assert!(pattern.wants(&view("ci-42", None)));
        assert!(pattern.wants(&view("s1", None)));
        assert!(!pattern.wants(&view("xci-42", None)));
    }
}
