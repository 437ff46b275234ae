//! lev's HTTP server: workers' questions wait here, people's answers land
//! here, and every decided tool approval leaves signed.
//!
//! [`app`] builds the router over an [`AppState`], apart from startup, so
//! tests can drive it; [`Server::bind`] opens the data dir (store, signing
//! key, admin token) and the socket; [`Server::serve`] serves until shutdown;
//! [`run`] does both and prints where it listens.
//!
//! # Invariants
//! - A 2xx on a write means the store committed it.
//! - The first answer wins exactly once (the store's compare-and-set), and it
//!   is committed before any waiter or event stream hears of it.
//! - Client input never gets a 500; a 5xx's details go to the log only.
//! - Bodies are refused past their limit before being read whole.
//! - The server knows nothing of the CLI or the SDK: they speak HTTP to it.

mod attach;
mod auth;
mod blobs;
mod body;
mod boot;
mod config;
mod dashboard;
mod error;
mod expiry;
mod extract;
mod gate;
mod http;
mod hub;
mod ids;
mod interactions;
pub mod kek;
mod keys;
mod log;
mod metrics;
mod operators;
pub mod outbound;
mod people;
mod reminders;
mod routes;
mod session_auth;
mod shutdown;
mod signing;
pub mod slack;
mod state;
mod store;
mod tasks;
mod tls;
mod tokens;
mod trace;
mod votes;
pub mod webhooks;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use tokio::net::TcpListener;

pub use auth::{ADMIN_TOKEN_FILE, Principal};
pub use config::{Config, MAX_LIFETIME, OperatorSettings, Settings};
pub use error::ApiError;
pub use http::ConnectionSettings;
pub use kek::Kek;
pub use keys::KeyRing;
pub use lev_store_postgres::Activity as DatabaseActivity;
pub use log::{LogFormat, init as init_logging};
pub use state::AppState;
pub use store::activity as database_activity;
pub use store::migrate as migrate_database;
pub use tokens::create_in_database as create_token_in_database;
pub use trace::OtlpConfig;

/// How long shutdown waits for requests in flight before giving up on them.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

/// The router of the whole API over `state`.
pub fn app(state: AppState) -> Router {
    let sessions = session_auth::Sessions::new(
        Arc::clone(state.store_arc()),
        state.settings().secure_cookies,
    );
    let layer = session_auth::SessionLayer {
        state: state.clone(),
        sessions: Arc::clone(&sessions),
    };
    routes::router(state)
        .layer(axum::middleware::from_fn_with_state(
            layer,
            session_auth::middleware,
        ))
        .layer(axum::Extension(sessions))
}

/// Why the server could not start or stopped badly.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// A flag or its combination is wrong.
    #[error("{0}")]
    Config(String),
    /// The data dir could not be opened.
    #[error("data dir {path}: {message}")]
    DataDir {
        /// The data dir.
        path: String,
        /// What went wrong.
        message: String,
    },
    /// The socket could not be opened or served.
    #[error("listen on {addr}: {source}")]
    Listen {
        /// The address.
        addr: String,
        /// The cause.
        source: std::io::Error,
    },
}

/// A server bound to its socket, with its state loaded, not yet serving.
pub struct Server {
    tcp: TcpListener,
    tls: Option<tokio_rustls::TlsAcceptor>,
    local_addr: SocketAddr,
    state: AppState,
    admin_token: Option<String>,
    scheme: &'static str,
    /// `--metrics-listen`'s socket: `/metrics` without a token.
    metrics_tcp: Option<TcpListener>,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("local_addr", &self.local_addr)
            .finish_non_exhaustive()
    }
}

/// The flags checked together, and the key-encryption key read.
fn check_flags(config: &Config) -> Result<Option<Arc<kek::Kek>>, ServeError> {
    config::check_config(config).map_err(ServeError::Config)?;
    if let Some(url) = &config.database {
        store::check_url(url).map_err(ServeError::Config)?;
        // A dump of a shared database alone must not be able to sign.
        if config.key_encryption_key.is_none() {
            return Err(ServeError::Config(
                "--database: signing keys kept in PostgreSQL are sealed with a \
                 key-encryption key: give every server the same \
                 --key-encryption-key-file\nhint: lev keys kek --out FILE makes one"
                    .into(),
            ));
        }
    }
    config
        .key_encryption_key
        .as_deref()
        .map(kek::Kek::from_file)
        .transpose()
        .map(|k| k.map(Arc::new))
        .map_err(ServeError::Config)
}

/// `--listen`'s addresses, and whether they are all loopback (beyond it,
/// TLS or `--insecure-http`).
async fn listen_addrs(config: &Config) -> Result<(Vec<SocketAddr>, bool), ServeError> {
    let addrs: Vec<SocketAddr> = tokio::net::lookup_host(config.listen.as_str())
        .await
        .map_err(|e| {
            ServeError::Config(format!(
                "--listen: expected host:port, found {:?}: {e}",
                config.listen
            ))
        })?
        .collect();
    let loopback = !addrs.is_empty() && addrs.iter().all(|a| a.ip().is_loopback());
    if !loopback && config.tls.is_none() && !config.insecure_http {
        return Err(ServeError::Config(format!(
            "--listen {}: listening beyond loopback needs --tls-cert and --tls-key\nhint: \
             --insecure-http allows it without TLS, if you must",
            config.listen
        )));
    }
    Ok((addrs, loopback))
}

/// The policy in force (with where it came from) and the Slack
/// integration's file, read and checked; the policy's warnings logged.
#[allow(clippy::type_complexity)]
fn read_files(
    config: &Config,
) -> Result<
    (
        Option<(lev_approval::policy::Policy, String)>,
        Option<Arc<lev_slack::SlackConfig>>,
    ),
    ServeError,
> {
    let policy = gate::load_policy(config.policy.as_deref(), &config.data_dir)
        .map_err(ServeError::Config)?;
    let slack = config
        .slack_config
        .as_deref()
        .map(|path| {
            lev_slack::SlackConfig::from_file(path).map_err(|e| format!("--slack-config: {e}"))
        })
        .transpose()
        .map_err(ServeError::Config)?
        .map(Arc::new);
    if let Some((policy, source)) = &policy {
        for warning in policy.warnings() {
            log::info(&format!("policy {source}: warning: {warning}"));
        }
    }
    Ok((policy, slack))
}

/// The data dir, made when missing, kept to its owner (0700).
fn make_data_dir(dir: &std::path::Path) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700));
    }
    Ok(())
}

/// What the data dir (or the database) holds, opened.
struct Opened {
    store: Arc<dyn lev_store::Store>,
    secret_keys: Vec<Arc<kek::Kek>>,
    keys: KeyRing,
    admin_token: Option<String>,
}

/// The store, the keys sealing webhook secrets, the signing keys and the
/// admin token (made on first start). A database that cannot be opened is
/// a flag's fault when it is a URL (the message names its host), the data
/// dir's otherwise.
async fn open_data(config: &Config, kek: Option<Arc<kek::Kek>>) -> Result<Opened, ServeError> {
    let data_err = |message: String| ServeError::DataDir {
        path: config.data_dir.display().to_string(),
        message,
    };
    let store = store::open(config.database.as_deref(), &config.data_dir)
        .await
        .map_err(|message| match config.database {
            Some(_) => ServeError::Config(message),
            None => data_err(message),
        })?;
    let secret_keys = webhooks::secret_keys(
        kek.clone(),
        config
            .database
            .is_none()
            .then_some(config.data_dir.as_path()),
    )
    .map_err(data_err)?;
    let keys = keys::load_or_create(Arc::clone(&store), kek)
        .await
        .map_err(|e| match config.database {
            Some(_) => ServeError::Config(format!("--database: {e}")),
            None => data_err(e.to_string()),
        })?;
    let admin_token = auth::ensure_admin_token(store.as_ref(), &config.data_dir)
        .await
        .map_err(|e| data_err(e.to_string()))?;
    Ok(Opened {
        store,
        secret_keys,
        keys,
        admin_token,
    })
}

/// The running server's settings: the flags', with the policy, the Slack
/// integration (its API URL checked against where outbound calls may go),
/// the webhook secrets' keys and the listener's own address.
fn settings_for(
    config: &Config,
    local_addr: SocketAddr,
    policy: Option<(lev_approval::policy::Policy, String)>,
    slack: Option<Arc<lev_slack::SlackConfig>>,
    secret_keys: Vec<Arc<kek::Kek>>,
) -> Result<Settings, ServeError> {
    let mut settings = config.settings.clone();
    settings.operators.grace = config.operator_grace;
    settings.operators.reply_timeout = config.operator_reply_timeout;
    if let Some((policy, source)) = policy {
        settings.policy = Arc::new(policy);
        settings.policy_source = source;
    }
    settings.secure_cookies |= config.tls.is_some();
    settings.webhooks.own_addr = Some(local_addr);
    if let Some(slack) = &slack {
        settings
            .webhooks
            .outbound_policy()
            .check_url(&slack.api_url)
            .map_err(|e| ServeError::Config(format!("--slack-config: api_url: {e}")))?;
    }
    settings.webhooks.secret_keys = secret_keys;
    settings.slack = slack;
    Ok(settings)
}

impl Server {
    /// Open the data dir (database, signing key, admin token on first start)
    /// and bind the socket.
    ///
    /// # Errors
    /// A bad flag, an unusable data dir, or a socket that cannot be bound.
    pub async fn bind(config: Config) -> Result<Self, ServeError> {
        // Everything that can be checked is checked before any state is made.
        let kek = check_flags(&config)?;
        let (addrs, loopback) = listen_addrs(&config).await?;
        let (policy, slack) = read_files(&config)?;
        let data_err = |message: String| ServeError::DataDir {
            path: config.data_dir.display().to_string(),
            message,
        };
        make_data_dir(&config.data_dir).map_err(data_err)?;
        let acceptor = match &config.tls {
            Some((cert, key)) => Some(tls::acceptor(cert, key).map_err(ServeError::Config)?),
            None => None,
        };
        let opened = open_data(&config, kek).await?;
        let tcp = TcpListener::bind(addrs.as_slice())
            .await
            .map_err(|source| ServeError::Listen {
                addr: config.listen.clone(),
                source,
            })?;
        let local_addr = tcp.local_addr().map_err(|source| ServeError::Listen {
            addr: config.listen.clone(),
            source,
        })?;
        let metrics_tcp = match &config.metrics_listen {
            Some(addr) => Some(TcpListener::bind(addr.as_str()).await.map_err(|source| {
                ServeError::Listen {
                    addr: format!("--metrics-listen {addr}"),
                    source,
                }
            })?),
            None => None,
        };
        let scheme = if acceptor.is_some() { "https" } else { "http" };
        if !loopback && config.tls.is_none() {
            log::info(
                "warning: --insecure-http: tokens, questions and answers cross the network in \
                 clear text; anyone on the path can read them and act as any token they see. \
                 Use --tls-cert and --tls-key",
            );
        }
        let settings = settings_for(&config, local_addr, policy, slack, opened.secret_keys)?;
        let state = boot::start(opened.store, opened.keys, settings)
            .await
            .map_err(data_err)?;
        Ok(Self {
            tcp,
            tls: acceptor,
            local_addr,
            state,
            admin_token: opened.admin_token,
            scheme,
            metrics_tcp,
        })
    }

    /// The address `--metrics-listen` bound, when given.
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.metrics_tcp.as_ref().and_then(|t| t.local_addr().ok())
    }

    /// The address actually bound.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// `http://HOST:PORT` (or `https`), loopback when bound to every address.
    pub fn base_url(&self) -> String {
        let mut addr = self.local_addr;
        if addr.ip().is_unspecified() {
            addr.set_ip(std::net::Ipv4Addr::LOCALHOST.into());
        }
        format!("{}://{addr}", self.scheme)
    }

    /// The admin token from `admin.token`, when the file is there.
    pub fn admin_token(&self) -> Option<&str> {
        self.admin_token.as_deref()
    }

    /// The dashboard's login URL for the admin.
    pub fn dashboard_url(&self) -> String {
        match &self.admin_token {
            Some(token) => format!("{}/#token={token}", self.base_url()),
            None => format!("{}/", self.base_url()),
        }
    }

    /// The shared state.
    pub fn state(&self) -> &AppState {
        &self.state
    }

    /// Serve until `shutdown` resolves; then refuse new requests (503),
    /// release waiters and event streams, and finish requests in flight
    /// (for at most 10 s).
    ///
    /// # Errors
    /// None yet: a failed accept (out of file descriptors, say) is retried
    /// after a pause, and a failed connection ends alone.
    pub async fn serve<F>(self, shutdown: F) -> Result<(), ServeError>
    where
        F: Future<Output = ()> + Send + 'static,
    {
        if let Some(tcp) = self.metrics_tcp {
            let metrics = self.state.clone();
            let mut stop = self.state.shutdown_signal();
            let app = routes::metrics_only(self.state.clone());
            metrics.spawn(async move {
                let served = axum::serve(tcp, app)
                    .with_graceful_shutdown(async move { shutdown::stopped(&mut stop).await });
                if let Err(e) = served.await {
                    log::error(&format!("--metrics-listen: {e}"));
                }
            });
        }
        let state = self.state.clone();
        let background = self.state.clone();
        let limits = self.state.settings().connections.clone();
        let app = app(self.state);
        let (begun_tx, begun_rx) = tokio::sync::oneshot::channel::<()>();
        let signal = async move {
            shutdown.await;
            log::info("shutting down");
            state.begin_shutdown();
            let _ = begun_tx.send(());
        };
        let served = http::serve(self.tcp, self.tls, app, limits, signal);
        let grace = async move {
            if begun_rx.await.is_err() {
                std::future::pending::<()>().await;
            }
            tokio::time::sleep(SHUTDOWN_GRACE).await;
        };
        tokio::select! {
            () = served => {}
            () = grace => {
                log::info("requests still in flight after the grace period; stopping anyway");
            }
        }
        // Every task that holds the state or the store ends with the server,
        // so a server started next on the same data dir finds it free.
        if !background.join_background(Duration::from_secs(5)).await {
            log::info("some of the server's tasks were still running 5 s after it stopped");
        }
        Ok(())
    }
}

/// Bind, print the listening address and the admin's dashboard URL to
/// stderr, and serve until `shutdown` resolves.
///
/// # Errors
/// As [`Server::bind`] and [`Server::serve`].
pub async fn run<F>(config: Config, shutdown: F) -> Result<(), ServeError>
where
    F: Future<Output = ()> + Send + 'static,
{
    let data_dir = config.data_dir.clone();
    let server = Server::bind(config).await?;
    log::info(&format!(
        "store {}, replica {}",
        server.state().store().kind(),
        server.state().replica_id()
    ));
    log::info(&format!("listening on {}", server.base_url()));
    if let Some(addr) = server.metrics_addr() {
        log::info(&format!("metrics: http://{addr}/metrics"));
    }
    match server.admin_token() {
        // JSON lines go to machines (a log pipeline): the admin token's
        // link stays out of them.
        Some(_) if log::is_json() => log::info(&format!(
            "dashboard: {}/ (log in with the admin token in {})",
            server.base_url(),
            data_dir.join(ADMIN_TOKEN_FILE).display()
        )),
        Some(_) => log::info(&format!("dashboard: {}", server.dashboard_url())),
        None => log::info(&format!(
            "dashboard: {} (log in with the admin token; {} is missing)",
            server.dashboard_url(),
            data_dir.join(ADMIN_TOKEN_FILE).display()
        )),
    }
    server.serve(shutdown).await
}

/// Resolves on SIGINT or SIGTERM (Ctrl-C elsewhere).
pub async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match (
            signal(SignalKind::interrupt()),
            signal(SignalKind::terminate()),
        ) {
            (Ok(mut int), Ok(mut term)) => {
                tokio::select! {
                    _ = int.recv() => {}
                    _ = term.recv() => {}
                }
            }
            _ => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}
