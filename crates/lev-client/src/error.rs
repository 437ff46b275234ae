//! The SDK's one error type.

use std::path::PathBuf;

use lev_protocol::StoredResponse;

/// Everything that can go wrong talking to a lev server.
///
/// A refusal by the server keeps its `{"error": {"code", "message"}}` body
/// ([`Error::Api`]), and on a 409 `already_answered` the answer that won.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The base URL cannot be used.
    #[error("invalid server url {url:?}: {reason}")]
    InvalidUrl {
        /// The URL as given.
        url: String,
        /// What is wrong with it.
        reason: String,
    },
    /// Nothing answered at the server's address.
    #[error(
        "could not connect to the lev server at {url}\nhint: is `lev serve` running? set --url or LEV_URL"
    )]
    Connect {
        /// The base URL.
        url: String,
        /// The transport's error.
        #[source]
        source: reqwest::Error,
    },
    /// The TLS handshake failed: most often a certificate this client does
    /// not trust.
    #[error(
        "TLS with the lev server at {url} failed: {reason}\nhint: for a private CA or a self-signed certificate, trust it with --ca-cert FILE or LEV_CA_CERT"
    )]
    Tls {
        /// The base URL.
        url: String,
        /// rustls's reason, such as an unknown issuer.
        reason: String,
        /// The transport's error.
        #[source]
        source: reqwest::Error,
    },
    /// The request failed on the way (timed out, connection dropped, ...).
    #[error("{method} {path}: {source}")]
    Transport {
        /// The HTTP method.
        method: &'static str,
        /// The path asked for.
        path: String,
        /// The transport's error.
        #[source]
        source: reqwest::Error,
    },
    /// The server refused the request with an error body.
    #[error("{message} ({status} {code})")]
    Api {
        /// The HTTP status.
        status: u16,
        /// The stable snake_case code, such as `already_answered`.
        code: String,
        /// What went wrong, for a person.
        message: String,
        /// The answer that won, on a 409 `already_answered`.
        winner: Option<Box<StoredResponse>>,
    },
    /// The server answered something this client cannot read.
    #[error("{path}: expected {expected}, found {found}")]
    Decode {
        /// The path asked for.
        path: String,
        /// What the client expected.
        expected: &'static str,
        /// What it found instead.
        found: String,
    },
    /// An attachment's bytes differ from what the answer says of them.
    #[error("attachment {name:?}: {reason}")]
    Part {
        /// The part's name.
        name: String,
        /// What is wrong with it.
        reason: String,
    },
    /// Reading or writing a local file failed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
}

impl Error {
    /// The HTTP status of a refusal.
    pub fn status(&self) -> Option<u16> {
        match self {
            Self::Api { status, .. } => Some(*status),
            _ => None,
        }
    }

    /// The server's error code of a refusal, such as `already_answered`.
    pub fn code(&self) -> Option<&str> {
        match self {
            Self::Api { code, .. } => Some(code),
            _ => None,
        }
    }

    /// The answer that won, when this answer lost the race (409).
    pub fn winner(&self) -> Option<&StoredResponse> {
        match self {
            Self::Api { winner, .. } => winner.as_deref(),
            _ => None,
        }
    }

    /// Whether the server could not be reached at all.
    pub fn is_connect(&self) -> bool {
        matches!(self, Self::Connect { .. })
    }

    /// Whether the request timed out in transit.
    pub fn is_timeout(&self) -> bool {
        match self {
            Self::Transport { source, .. } | Self::Connect { source, .. } => source.is_timeout(),
            _ => false,
        }
    }
}

/// The SDK's result.
pub type Result<T, E = Error> = std::result::Result<T, E>;
