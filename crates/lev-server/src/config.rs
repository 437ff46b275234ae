//! Settings: what `lev serve` was asked for ([`Config`], its flags checked
//! together by [`check_config`]) and what the running server's parts are
//! given ([`Settings`], with the operators' and the webhooks' own).
//!
//! A floor below the state: it names only the leaf types the settings hold.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use lev_protocol::Limits;
use time::OffsetDateTime;

use crate::kek::Kek;
use crate::outbound::{Cidr, OutboundPolicy};

/// What `lev serve` was asked for.
#[derive(Debug, Clone)]
pub struct Config {
    /// Address to listen on (`host:port`; port 0 picks a free one).
    pub listen: String,
    /// The data dir: database, keys, attachments, `admin.token`.
    pub data_dir: PathBuf,
    /// A postgres:// URL to keep everything in PostgreSQL (several servers
    /// may share it); `None` for SQLite in the data dir.
    pub database: Option<String>,
    /// The key-encryption key's file: signing keys are stored sealed with
    /// it (required with PostgreSQL; optional with SQLite).
    pub key_encryption_key: Option<PathBuf>,
    /// The gate's policy file; `None`: `policy.toml` in the data dir when
    /// there is one, else [`Settings::policy`] (the built-in ask-everything
    /// policy unless set).
    pub policy: Option<PathBuf>,
    /// How long an ask waits for an operator to connect.
    pub operator_grace: Duration,
    /// How long a connected operator has to reply.
    pub operator_reply_timeout: Duration,
    /// Limits and lifetimes.
    pub settings: Settings,
    /// PEM certificate chain and key, to serve HTTPS.
    pub tls: Option<(PathBuf, PathBuf)>,
    /// Allow plain HTTP beyond loopback.
    pub insecure_http: bool,
    /// `--slack-config`: the Slack integration's file.
    pub slack_config: Option<PathBuf>,
    /// `--metrics-listen`: an address serving `/metrics` without a token.
    pub metrics_listen: Option<String>,
}

impl Config {
    /// Defaults for a data dir: loopback port 7420, SQLite, no TLS.
    pub fn new(data_dir: PathBuf) -> Self {
        Self {
            listen: "127.0.0.1:7420".into(),
            data_dir,
            database: None,
            key_encryption_key: None,
            policy: None,
            operator_grace: Duration::from_secs(30),
            operator_reply_timeout: Duration::from_secs(120),
            settings: Settings::default(),
            tls: None,
            insecure_http: false,
            slack_config: None,
            metrics_listen: None,
        }
    }
}

/// Longest approval lifetime and operator wait (SPEC section 9).
pub const MAX_LIFETIME: Duration = Duration::from_secs(7 * 24 * 3600);

/// The flags' values, checked together before anything is created.
pub(crate) fn check_config(config: &Config) -> Result<(), String> {
    let ttl = config.settings.approval_ttl;
    if ttl < Duration::from_secs(1) || ttl > MAX_LIFETIME {
        return Err(format!(
            "--approval-ttl: expected 1 to {} seconds (7 days), found {}",
            MAX_LIFETIME.as_secs(),
            ttl.as_secs()
        ));
    }
    for (flag, d) in [
        ("--operator-grace", config.operator_grace),
        ("--operator-reply-timeout", config.operator_reply_timeout),
    ] {
        if d > MAX_LIFETIME {
            return Err(format!(
                "{flag}: expected at most {} seconds (7 days), found {}",
                MAX_LIFETIME.as_secs(),
                d.as_secs()
            ));
        }
    }
    if let Some(url) = &config.settings.public_url {
        check_public_url(url)?;
    }
    Ok(())
}

/// `--public-url`: an origin, `http(s)://host[:port]`, nothing after it.
fn check_public_url(url: &str) -> Result<(), String> {
    let rest = url
        .strip_prefix("https://")
        .or_else(|| url.strip_prefix("http://"))
        .ok_or_else(|| format!("--public-url: expected http:// or https://, found {url:?}"))?;
    let rest = rest.strip_suffix('/').unwrap_or(rest);
    if rest.is_empty()
        || !rest
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b':' | b'[' | b']'))
    {
        return Err(format!(
            "--public-url: expected an origin such as https://lev.example.com (no path), found {url:?}"
        ));
    }
    Ok(())
}

/// Settings handlers need.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Lifetime of a signed approval (`--approval-ttl`).
    pub approval_ttl: Duration,
    /// Most pending interactions per session (429 past it).
    pub max_pending_per_session: u64,
    /// Size limits of requests.
    pub limits: Limits,
    /// Largest part of an answer, decoded.
    pub max_part_bytes: usize,
    /// `--attach-root`: `@path` in a dashboard reply attaches that file from
    /// below this directory (off when `None`).
    pub attach_root: Option<std::path::PathBuf>,
    /// Mark the dashboard's session cookie `Secure` (set when serving TLS).
    pub secure_cookies: bool,
    /// `--public-url`: the dashboard's origin as people's browsers see it
    /// (behind a proxy), e.g. `https://lev.example.com`.
    pub public_url: Option<String>,
    /// How operators are waited for (`--operator-grace`, ...).
    pub operators: OperatorSettings,
    /// The gate's policy (`--policy`); without a file, every call asks.
    pub policy: Arc<lev_approval::policy::Policy>,
    /// Where the policy came from, for the audit log: its path, or `built-in`.
    pub policy_source: String,
    /// Webhook retries, and the listener a webhook may not point at.
    pub webhooks: WebhookSettings,
    /// `--slack-config`: post interactions to Slack and take its clicks.
    pub slack: Option<Arc<lev_slack::SlackConfig>>,
    /// Connection caps and timeouts (`--max-connections`, ...).
    pub connections: crate::http::ConnectionSettings,
    /// Where trace spans go (`--otlp-endpoint`, `OTEL_EXPORTER_OTLP_*`);
    /// `None`, no traces.
    pub otlp: Option<crate::trace::OtlpConfig>,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            approval_ttl: Duration::from_secs(600),
            max_pending_per_session: 10_000,
            limits: Limits::default(),
            max_part_bytes: 10 * 1024 * 1024,
            attach_root: None,
            secure_cookies: false,
            public_url: None,
            operators: OperatorSettings::default(),
            policy: Arc::new(lev_approval::policy::Policy::default()),
            policy_source: "built-in".into(),
            webhooks: WebhookSettings::default(),
            slack: None,
            connections: crate::http::ConnectionSettings::default(),
            otlp: None,
        }
    }
}

/// How operators are waited for.
#[derive(Debug, Clone)]
pub struct OperatorSettings {
    /// How long a session may be without an operator before what waits for
    /// one goes to people (`--operator-grace`).
    pub grace: Duration,
    /// How long a connected operator has to reply to an ask or a hook before
    /// it goes to people (`--operator-reply-timeout`).
    pub reply_timeout: Duration,
    /// How often the server pings an operator.
    pub ping_interval: Duration,
    /// No frame from an operator (a pong included) for this long ends its
    /// connection.
    pub dead_peer_timeout: Duration,
}

impl Default for OperatorSettings {
    fn default() -> Self {
        Self {
            grace: Duration::from_secs(30),
            reply_timeout: Duration::from_secs(120),
            ping_interval: Duration::from_secs(15),
            dead_peer_timeout: Duration::from_secs(45),
        }
    }
}

/// When deliveries are retried (`--webhook-retry BASE,CAP,HORIZON`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Delay before the first retry; each next one doubles it.
    pub base: Duration,
    /// The longest delay between two attempts.
    pub cap: Duration,
    /// How long after its event a delivery is still tried.
    pub horizon: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            base: Duration::from_secs(5),
            cap: Duration::from_secs(3600),
            horizon: Duration::from_secs(24 * 3600),
        }
    }
}

/// A duration such as `5s`, `250ms`, `10m`, `1h`, `2d`, or plain seconds.
///
/// # Errors
/// A message naming what was found.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (digits, unit) = t.split_at(split);
    let n: u64 = digits
        .parse()
        .map_err(|_| format!("expected a duration such as 5s, 10m or 1h, found {text:?}"))?;
    let ms = match unit {
        "ms" => 1,
        "" | "s" => 1000,
        "m" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        _ => {
            return Err(format!(
                "expected a duration such as 5s, 10m or 1h, found {text:?} (units: ms, s, m, h, d)"
            ));
        }
    };
    n.checked_mul(ms)
        .map(Duration::from_millis)
        .ok_or_else(|| format!("{text:?} is too long"))
}

impl RetryPolicy {
    /// `BASE,CAP,HORIZON`, e.g. `5s,1h,24h`.
    ///
    /// # Errors
    /// A message naming the part that is wrong.
    pub fn parse(text: &str) -> Result<Self, String> {
        let parts: Vec<&str> = text.split(',').collect();
        let [base, cap, horizon] = parts.as_slice() else {
            return Err(format!(
                "--webhook-retry: expected BASE,CAP,HORIZON such as 5s,1h,24h, found {text:?}"
            ));
        };
        let d = |name: &str, t: &str| {
            parse_duration(t).map_err(|e| format!("--webhook-retry: {name}: {e}"))
        };
        let policy = Self {
            base: d("BASE", base)?,
            cap: d("CAP", cap)?,
            horizon: d("HORIZON", horizon)?,
        };
        if policy.base.is_zero() || policy.cap < policy.base {
            return Err(format!(
                "--webhook-retry: expected 0 < BASE <= CAP, found {text:?}"
            ));
        }
        if policy.horizon > MAX_LIFETIME {
            return Err("--webhook-retry: HORIZON is at most 7 days".into());
        }
        Ok(policy)
    }

    /// When to try again after `attempts` attempts (at least one), or `None`
    /// past the horizon. `jitter` in [0, 1) spreads retries over ±20%; a
    /// receiver's `Retry-After` is honoured when longer (up to the cap).
    #[must_use]
    pub fn next(
        &self,
        attempts: u32,
        created_at: OffsetDateTime,
        now: OffsetDateTime,
        retry_after: Option<Duration>,
        jitter: f64,
    ) -> Option<OffsetDateTime> {
        let doublings = attempts.saturating_sub(1).min(30);
        let delay = self
            .base
            .saturating_mul(1u32 << doublings)
            .min(self.cap)
            .mul_f64(0.8 + 0.4 * jitter.clamp(0.0, 1.0));
        let delay = match retry_after {
            Some(after) => delay.max(after.min(self.cap)),
            None => delay,
        };
        let at = now + delay;
        (at <= created_at + self.horizon).then_some(at)
    }
}

/// What the webhook part of the server is given at start.
#[derive(Debug, Clone, Default)]
pub struct WebhookSettings {
    /// Retries.
    pub retry: RetryPolicy,
    /// The server's own listener, which a webhook may not point at.
    pub own_addr: Option<SocketAddr>,
    /// `--webhook-allow`: address ranges outbound calls may reach that are
    /// refused by default (loopback, this host, link-local, metadata).
    pub allow: Vec<Cidr>,
    /// `--remind-after`: notify pending interactions again after this long
    /// (an ask rule's `remind_after_s` comes first); off when `None`.
    pub remind_after: Option<Duration>,
    /// What seals new secrets (the key-encryption key, else the data dir's
    /// `secrets.key`), and every key a stored secret may be opened with.
    pub secret_keys: Vec<Arc<Kek>>,
}

impl WebhookSettings {
    /// Where webhooks and Slack's Web API calls may go.
    #[must_use]
    pub fn outbound_policy(&self) -> OutboundPolicy {
        OutboundPolicy {
            allow: self.allow.clone(),
            own: self.own_addr,
        }
    }
}
