//! `lev serve`: the server (SPEC sections 3, 7 and 8).
//!
//! Everything but flag parsing lives in `lev-server`; this module turns flags
//! into a [`lev_server::Config`], runs it on a tokio runtime, and stops it
//! gracefully on SIGINT or SIGTERM (new requests get 503, waiters are told to
//! retry, then exit 0), and, with the hidden `--exit-on-stdin-close`, when
//! its standard input ends (its parent gone).

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
    /// servers may share it; unset, SQLite in the data dir. TLS as its
    /// sslmode and sslrootcert say (`?sslmode=verify-full&sslrootcert=ca.pem`).
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
    /// Most connections at once; at the cap a new connection replaces the
    /// one idle longest, and is refused (503) only when every connection is
    /// serving a request. Lowered to fit the open-file limit.
    #[arg(
        long,
        env = "LEV_MAX_CONNECTIONS",
        default_value_t = 10_000,
        value_name = "N"
    )]
    pub max_connections: usize,
    /// Most connections from one address (an IPv6 address counts by its
    /// /64); past it a new one replaces that address's connection idle
    /// longest, or gets 503 when all are serving requests. Behind a proxy
    /// every client has the proxy's address: raise it there.
    #[arg(
        long,
        env = "LEV_MAX_CONNECTIONS_PER_ADDRESS",
        default_value_t = 2_000,
        value_name = "N"
    )]
    pub max_connections_per_address: usize,
    /// A request's head (and a TLS handshake) must arrive within this.
    #[arg(
        long,
        env = "LEV_HEADER_TIMEOUT",
        default_value_t = 10,
        value_name = "SECONDS"
    )]
    pub header_timeout: u64,
    /// How long a kept-alive connection may wait for its next request. A
    /// request in flight (a long-poll wait, the event stream, a WebSocket)
    /// is never cut by it.
    #[arg(
        long,
        env = "LEV_IDLE_TIMEOUT",
        default_value_t = 120,
        value_name = "SECONDS"
    )]
    pub idle_timeout: u64,
    /// A request's body must arrive whole within this (408 otherwise).
    #[arg(
        long,
        env = "LEV_BODY_TIMEOUT",
        default_value_t = 60,
        value_name = "SECONDS"
    )]
    pub body_timeout: u64,
    /// A client that does not take what the server writes (an event stream
    /// or an operator that stopped reading) within this is disconnected.
    #[arg(
        long,
        env = "LEV_WRITE_TIMEOUT",
        default_value_t = 30,
        value_name = "SECONDS"
    )]
    pub write_timeout: u64,
    /// How log lines are written to stderr: text (`lev: message key=value`)
    /// or json (one object per line: timestamp, level, target, message and
    /// the fields). Every request is one line (target lev_server::request).
    #[arg(
        long,
        env = "LEV_LOG_FORMAT",
        default_value = "text",
        value_name = "text|json"
    )]
    pub log_format: String,
    /// Which log lines to write, as RUST_LOG filters: a level (error, warn,
    /// info, debug, trace), or target=level pairs separated by commas, e.g.
    /// `info,lev_server::request=warn` to leave out the request lines.
    #[arg(
        long = "log",
        env = "LEV_LOG",
        default_value = "info",
        value_name = "FILTER"
    )]
    pub log: String,
    /// Also serve GET /metrics (OpenMetrics text) without a token on this
    /// address, for a Prometheus scraper; without it /metrics takes the
    /// admin token on --listen.
    #[arg(long, env = "LEV_METRICS_LISTEN", value_name = "HOST:PORT")]
    pub metrics_listen: Option<String>,
    /// Send traces (OpenTelemetry, OTLP/HTTP protobuf) to this collector,
    /// e.g. http://localhost:4318 (`/v1/traces` is added): one trace per
    /// interaction, joined to the agent's own when its request carried a
    /// W3C traceparent. Unset, the standard OTEL_EXPORTER_OTLP_ENDPOINT or
    /// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT; OTEL_EXPORTER_OTLP_HEADERS and
    /// OTEL_SERVICE_NAME are read too.
    #[arg(long, value_name = "URL")]
    pub otlp_endpoint: Option<String>,
    /// Stop (as on SIGTERM) when standard input ends: the process that
    /// started this server holds the other end of a pipe, so the server
    /// stops with it however it ends, SIGKILL included (`lev bench`, tests).
    #[arg(long, hide = true)]
    pub exit_on_stdin_close: bool,
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

/// Files the server keeps open besides its connections (database, WAL,
/// blobs, outbound calls), below the open-file limit.
const RESERVED_FILES: u64 = 256;

/// The connection flags, checked, with `--max-connections` lowered to fit
/// the open-file limit (raised to its hard limit first): a cap above it
/// would let connections take the descriptors the server needs to answer.
fn connection_settings(args: &Args) -> anyhow::Result<lev_server::ConnectionSettings> {
    for (flag, n) in [
        ("--max-connections", args.max_connections),
        (
            "--max-connections-per-address",
            args.max_connections_per_address,
        ),
    ] {
        if n == 0 {
            anyhow::bail!("{flag}: expected at least 1, found 0");
        }
    }
    for (flag, secs) in [
        ("--header-timeout", args.header_timeout),
        ("--idle-timeout", args.idle_timeout),
        ("--body-timeout", args.body_timeout),
        ("--write-timeout", args.write_timeout),
    ] {
        if !(1..=86_400).contains(&secs) {
            anyhow::bail!("{flag}: expected 1 to 86400 seconds, found {secs}");
        }
    }
    let files = rlimit::increase_nofile_limit(u64::MAX).unwrap_or_else(|_| {
        rlimit::getrlimit(rlimit::Resource::NOFILE).map_or(u64::MAX, |(soft, _)| soft)
    });
    let fits = usize::try_from(files.saturating_sub(RESERVED_FILES).max(16)).unwrap_or(usize::MAX);
    let mut max_connections = args.max_connections;
    if max_connections > fits {
        eprintln!(
            "lev serve: --max-connections {max_connections} lowered to {fits}: the open-file \
             limit is {files} (raise it with ulimit -n)"
        );
        max_connections = fits;
    }
    Ok(lev_server::ConnectionSettings {
        max_connections,
        max_per_address: args.max_connections_per_address.min(max_connections),
        header_timeout: Duration::from_secs(args.header_timeout),
        idle_timeout: Duration::from_secs(args.idle_timeout),
        body_timeout: Duration::from_secs(args.body_timeout),
        write_timeout: Duration::from_secs(args.write_timeout),
    })
}

/// Run the server until SIGINT or SIGTERM.
///
/// # Errors
/// A bad flag, an unusable data dir, a socket that cannot be bound.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let format = lev_server::LogFormat::parse(&args.log_format)
        .map_err(|e| anyhow::anyhow!("--log-format: {e}"))?;
    lev_server::init_logging(format, Some(&args.log)).map_err(|e| anyhow::anyhow!("--log: {e}"))?;
    let connections = connection_settings(&args)?;
    let data_dir = match args.data_dir {
        Some(dir) => dir,
        None => default_data_dir()?,
    };
    let mut config = lev_server::Config::new(data_dir);
    config.settings.connections = connections;
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
    config.metrics_listen = args.metrics_listen.filter(|a| !a.is_empty());
    config.settings.otlp =
        lev_server::OtlpConfig::from_flag_and_env(args.otlp_endpoint.as_deref(), |name| {
            std::env::var(name).ok()
        })
        .map_err(|e| anyhow::anyhow!("--otlp-endpoint: {e}"))?;
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
    let stdin_closed = args.exit_on_stdin_close.then(stdin_closed);
    runtime.block_on(lev_server::run(config, async move {
        match stdin_closed {
            Some(closed) => tokio::select! {
                () = lev_server::shutdown_signal() => {}
                _ = closed => {}
            },
            None => lev_server::shutdown_signal().await,
        }
    }))?;
    Ok(ExitCode::SUCCESS)
}

/// Resolves when standard input reaches its end (or fails): a thread reads
/// and drops whatever comes, so a parent that writes cannot fill the pipe.
fn stdin_closed() -> tokio::sync::oneshot::Receiver<()> {
    let (tx, rx) = tokio::sync::oneshot::channel();
    std::thread::spawn(move || {
        let _ = std::io::copy(&mut std::io::stdin().lock(), &mut std::io::sink());
        let _ = tx.send(());
    });
    rx
}
