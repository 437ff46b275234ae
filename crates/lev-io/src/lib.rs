//! lev's IO helpers shared by the SDK (`lev-client`) and the server
//! (`lev-server`), kept in a crate of their own so that the server does not
//! depend on the SDK:
//!
//! - [`files`]: the one bounded read of a file lev is pointed at (the CLI's
//!   and the server's).
//! - [`tls`]: the rustls client configuration, for the SDK's connections to
//!   a server and for a server's own outbound calls
//!   ([`outbound_tls_config`]: webhooks, Slack).
//!
//! # Invariants
//! - A file read from a path is read under a limit: never more than its kind
//!   may hold, whatever the path names.
//! - TLS is rustls with the `ring` provider (the server's stack), the
//!   system's roots through the platform verifier unless a CA is given.

pub mod files;
pub mod tls;

/// The TLS configuration for calls a server makes to others (webhooks,
/// Slack): the system's roots through the platform verifier, rustls with
/// the `ring` provider, HTTP/1.1.
///
/// # Errors
/// When the system's roots cannot be loaded.
pub fn outbound_tls_config() -> Result<rustls::ClientConfig, String> {
    tls::client_config(None, tls::SystemRoots::Required)
}
