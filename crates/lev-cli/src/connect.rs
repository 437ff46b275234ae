//! What every client command takes: the server's URL, the token, and where
//! the local data dir is (for its `admin.token` when no token is given).

use std::path::PathBuf;

use anyhow::Context as _;
use lev_client::{Client, ConnectOptions, files};

/// The default server address (SPEC section 3).
pub const DEFAULT_URL: &str = "http://127.0.0.1:7420";

/// The connection options of every client command.
#[derive(Debug, Clone, clap::Args)]
pub struct ClientArgs {
    /// The lev server's URL: http:// to this machine (loopback), or https://.
    #[arg(long, env = "LEV_URL", default_value = DEFAULT_URL, value_name = "URL")]
    pub url: String,
    /// Trust the certificates in this PEM file for https:// instead of the
    /// system's roots (a private CA, or the server's self-signed certificate).
    #[arg(long, env = "LEV_CA_CERT", value_name = "FILE")]
    pub ca_cert: Option<PathBuf>,
    /// Allow plain http:// to a host that is not loopback. The token and
    /// every answer then travel in clear: only on a network you trust.
    #[arg(long)]
    pub insecure_http: bool,
    /// API token. Without one, the admin token of the local data dir is used
    /// (`<data-dir>/admin.token`, written by `lev serve` on first start).
    #[arg(long, env = "LEV_TOKEN", hide_env_values = true, value_name = "TOKEN")]
    pub token: Option<String>,
    /// The local data dir whose admin.token to use when no token is given
    /// [default: $XDG_DATA_HOME/lev, else ~/.local/share/lev].
    #[arg(long, env = "LEV_DATA_DIR", value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
}

impl ClientArgs {
    /// A client of the server with the token in force.
    ///
    /// # Errors
    /// A bad URL, or no token given and none readable in the data dir.
    pub fn client(&self) -> anyhow::Result<Client> {
        let token = self.resolve_token()?;
        self.client_with(Some(token))
    }

    /// A client of the server without a token (for public routes).
    ///
    /// # Errors
    /// A bad URL, or a CA file that cannot be read.
    pub fn anonymous_client(&self) -> anyhow::Result<Client> {
        self.client_with(None)
    }

    fn client_with(&self, token: Option<String>) -> anyhow::Result<Client> {
        let mut options = ConnectOptions::default().with_insecure_http(self.insecure_http);
        if let Some(path) = &self.ca_cert {
            let pem = files::read(path, files::limit::PEM).context("--ca-cert")?;
            options = options.with_ca_cert_pem(pem);
        }
        Client::with_options(&self.url, token, &options).context("--url")
    }

    fn resolve_token(&self) -> anyhow::Result<String> {
        if let Some(token) = self
            .token
            .as_deref()
            .map(str::trim)
            .filter(|t| !t.is_empty())
        {
            return Ok(token.to_owned());
        }
        let dir = match &self.data_dir {
            Some(dir) => dir.clone(),
            None => default_data_dir()?,
        };
        let file = dir.join("admin.token");
        match files::read_text(&file, files::limit::TOKEN) {
            Ok(text) if !text.trim().is_empty() => Ok(text.trim().to_owned()),
            Ok(_) => anyhow::bail!(
                "no token: expected a token in {}, found an empty file{}give one with --token or LEV_TOKEN",
                file.display(),
                crate::report::HINT
            ),
            Err(files::FileError::Io { source, .. }) => anyhow::bail!(
                "no token: --token and LEV_TOKEN are unset and {} cannot be read ({source}){}give one with --token or LEV_TOKEN, or point --data-dir at the server's data dir",
                file.display(),
                crate::report::HINT
            ),
            Err(e) => Err(e).context("no token"),
        }
    }
}

/// `$XDG_DATA_HOME/lev`, else `~/.local/share/lev`.
///
/// # Errors
/// When neither `XDG_DATA_HOME` nor `HOME` is set.
pub fn default_data_dir() -> anyhow::Result<PathBuf> {
    if let Some(xdg) = std::env::var_os("XDG_DATA_HOME").filter(|v| !v.is_empty()) {
        return Ok(PathBuf::from(xdg).join("lev"));
    }
    match std::env::var_os("HOME").filter(|v| !v.is_empty()) {
        Some(home) => Ok(PathBuf::from(home).join(".local/share/lev")),
        None => anyhow::bail!(
            "no data dir: expected HOME or XDG_DATA_HOME to be set, found neither{}give one with --data-dir or LEV_DATA_DIR",
            crate::report::HINT
        ),
    }
}

/// A current-thread runtime for one command.
///
/// # Errors
/// When the runtime cannot start.
pub fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")
}
