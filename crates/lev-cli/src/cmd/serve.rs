//! `lev serve`: the server (SPEC sections 3, 7 and 8).
//!
//! Everything but flag parsing lives in `lev-server`; this module turns flags
//! into a [`lev_server::Config`], runs it on a tokio runtime, and stops it
//! gracefully on SIGINT or SIGTERM (new requests get 503, waiters are told to
//! retry, then exit 0).

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context as _;

/// `lev serve` flags.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Address to listen on; port 0 picks a free port (printed at start).
    ///
    /// Beyond loopback only with --tls-cert and --tls-key, or --insecure-http.
    #[arg(long, default_value = "127.0.0.1:7420", value_name = "HOST:PORT")]
    pub listen: String,
    /// The data dir: database, signing keys, attachments, admin.token
    /// [default: $XDG_DATA_HOME/lev, else ~/.local/share/lev].
    #[arg(long, env = "LEV_DATA_DIR", value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
    /// A postgres:// URL to keep everything in PostgreSQL, where several
    /// servers may share it; unset, SQLite in the data dir.
    // The URL may hold a password: --help does not show its value.
    #[arg(
        long,
        env = "LEV_DATABASE_URL",
        hide_env_values = true,
        value_name = "URL"
    )]
    pub database: Option<String>,
    /// The key-encryption key (32 random bytes, base64; `lev keys kek --out
    /// FILE` makes one): signing keys are stored sealed with it. Every server
    /// sharing a database is given the same file.
    #[arg(long, env = "LEV_KEY_ENCRYPTION_KEY_FILE", value_name = "FILE")]
    pub key_encryption_key_file: Option<PathBuf>,
    /// The policy file for the tool-call gate [default: policy.toml in the data dir].
    #[arg(long, value_name = "FILE")]
    pub policy: Option<PathBuf>,
    /// How long an ask waits for a session's operator to connect.
    #[arg(long, default_value_t = 30, value_name = "SECONDS")]
    pub operator_grace: u64,
    /// How long a connected operator has to reply before people are asked.
    #[arg(long, default_value_t = 120, value_name = "SECONDS")]
    pub operator_reply_timeout: u64,
    /// Lifetime of a signed approval: 1 second to 7 days.
    #[arg(long, default_value_t = 600, value_name = "SECONDS")]
    pub approval_ttl: u64,
    /// The dashboard's origin as browsers see it, behind a proxy
    /// (e.g. https://lev.example.com): requests made with the dashboard's
    /// cookie from any other origin are refused.
    #[arg(long, value_name = "URL")]
    pub public_url: Option<String>,
    /// Let a dashboard reply attach files named by `@path`, read on this
    /// machine from below this directory only (off unless set).
    #[arg(long, value_name = "DIR")]
    pub attach_root: Option<PathBuf>,
    /// PEM certificate chain, to serve HTTPS.
    #[arg(long, requires = "tls_key", value_name = "FILE")]
    pub tls_cert: Option<PathBuf>,
    /// PEM private key of --tls-cert.
    #[arg(long, requires = "tls_cert", value_name = "FILE")]
    pub tls_key: Option<PathBuf>,
    /// Serve plain HTTP beyond loopback: tokens and answers cross the network
    /// in clear text. Only behind a TLS-terminating proxy on a trusted network.
    #[arg(long)]
    pub insecure_http: bool,
    /// Webhook retries: the first delay (doubling each time), the longest
    /// delay, and how long after its event a delivery is still tried.
    #[arg(long, default_value = "5s,1h,24h", value_name = "BASE,CAP,HORIZON")]
    pub webhook_retry: String,
    /// Address ranges webhooks and Slack's api_url may reach that are
    /// refused by default: loopback, this host's own addresses, link-local,
    /// cloud metadata (e.g. 127.0.0.1/32 for a receiver on this machine).
    /// Private ranges (10/8, 172.16/12, 192.168/16, fc00::/7) need nothing;
    /// lev's own listener is never reached. Repeat, or separate by commas.
    #[arg(
        long,
        env = "LEV_WEBHOOK_ALLOW",
        value_name = "CIDR",
        value_delimiter = ','
    )]
    pub webhook_allow: Vec<String>,
    /// Notify a pending interaction again (webhooks' interaction.reminder,
    /// a reply in its Slack thread) after this long, and every such interval
    /// after, e.g. 15m; an ask rule's remind_after_s comes first. Off unless
    /// set.
    #[arg(long, value_name = "DURATION")]
    pub remind_after: Option<String>,
    /// Post new interactions to Slack and take approvals from its buttons:
    /// a TOML file with bot_token_file, signing_secret_file, channel and
    /// [users] (Slack user id = approver token name). See the README.
    #[arg(long, value_name = "FILE")]
    pub slack_config: Option<PathBuf>,
}

/// `$XDG_DATA_HOME/lev`, else `~/.local/share/lev`.
fn default_data_dir() -> anyhow::Result<PathBuf> {
    if let Some(xdg) = std::env::var_os("XDG_DATA_HOME").filter(|v| !v.is_empty()) {
        return Ok(PathBuf::from(xdg).join("lev"));
    }
    match std::env::var_os("HOME").filter(|v| !v.is_empty()) {
        Some(home) => Ok(PathBuf::from(home).join(".local/share/lev")),
        None => anyhow::bail!(
            "no data dir: expected HOME or XDG_DATA_HOME to be set, found neither\n\
             hint: give one with --data-dir or LEV_DATA_DIR"
        ),
    }
}

/// Run the server until SIGINT or SIGTERM.
///
/// # Errors
/// A bad flag, an unusable data dir, a socket that cannot be bound.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let data_dir = match args.data_dir {
        Some(dir) => dir,
        None => default_data_dir()?,
    };
    let mut config = lev_server::Config::new(data_dir);
    config.listen = args.listen;
    config.database = args.database.filter(|d| !d.is_empty());
    config.key_encryption_key = args.key_encryption_key_file;
    config.policy = args.policy;
    config.operator_grace = Duration::from_secs(args.operator_grace);
    config.operator_reply_timeout = Duration::from_secs(args.operator_reply_timeout);
    config.settings.approval_ttl = Duration::from_secs(args.approval_ttl);
    config.settings.attach_root = args.attach_root;
    config.settings.public_url = args.public_url.map(|u| u.trim_end_matches('/').to_owned());
    config.tls = args.tls_cert.zip(args.tls_key);
    config.insecure_http = args.insecure_http;
    config.slack_config = args.slack_config;
    config.settings.webhooks.remind_after = match args.remind_after.as_deref() {
        Some(text) => {
            let d = lev_server::webhooks::parse_duration(text)
                .map_err(|e| anyhow::anyhow!("--remind-after: {e}"))?;
            if d.is_zero() {
                anyhow::bail!("--remind-after: expected more than 0, found {text:?}");
            }
            Some(d)
        }
        None => None,
    };
    config.settings.webhooks.retry = lev_server::webhooks::RetryPolicy::parse(&args.webhook_retry)
        .map_err(anyhow::Error::msg)?;
    config.settings.webhooks.allow = args
        .webhook_allow
        .iter()
        .filter(|c| !c.trim().is_empty())
        .map(|c| lev_server::outbound::Cidr::parse(c))
        .collect::<Result<_, _>>()
        .map_err(|e| anyhow::anyhow!("--webhook-allow: {e}"))?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(lev_server::run(config, lev_server::shutdown_signal()))?;
    Ok(ExitCode::SUCCESS)
}
