//! How the client reaches a server: TLS with rustls and the `ring` provider
//! (the server's stack, configured by `lev_io::tls`), and the rule that a
//! token never travels in clear beyond loopback.

use std::net::IpAddr;

use lev_io::tls::SystemRoots;
use rustls::ClientConfig;

/// How to reach a server: which certificates to trust over `https://`, and
/// whether plain `http://` may go beyond loopback.
#[derive(Debug, Clone, Default)]
pub struct ConnectOptions {
    /// PEM certificates to trust instead of the system's roots (a private
    /// CA, or the server's own self-signed certificate).
    pub ca_cert_pem: Option<Vec<u8>>,
    /// Allow `http://` to a host other than loopback: the token and every
    /// answer then travel in clear.
    pub insecure_http: bool,
}

impl ConnectOptions {
    /// Trust the PEM certificates `pem` instead of the system's roots.
    pub fn with_ca_cert_pem(mut self, pem: impl Into<Vec<u8>>) -> Self {
        self.ca_cert_pem = Some(pem.into());
        self
    }

    /// Allow plain `http://` beyond loopback.
    pub fn with_insecure_http(mut self, insecure: bool) -> Self {
        self.insecure_http = insecure;
        self
    }
}

/// A URL's scheme as the client treats it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Scheme {
    /// `http://` (or `ws://`).
    Plain,
    /// `https://` (or `wss://`).
    Tls,
}

/// Split `url` into its scheme and what follows, and refuse plain HTTP to a
/// non-loopback host unless `insecure_http`.
///
/// # Errors
/// A message saying what is wrong with the URL.
pub(crate) fn check_url(url: &str, insecure_http: bool) -> Result<(Scheme, &str), String> {
    let (scheme, rest) = if let Some(rest) = url.strip_prefix("https://") {
        (Scheme::Tls, rest)
    } else if let Some(rest) = url.strip_prefix("http://") {
        (Scheme::Plain, rest)
    } else {
        return Err("expected a URL starting with http:// or https://".into());
    };
    let authority = rest.split('/').next().unwrap_or_default();
    if authority.is_empty() {
        return Err("expected a host after the scheme".into());
    }
    if authority.contains('@') {
        return Err("expected no user or password in the URL; give the token with --token".into());
    }
    if scheme == Scheme::Plain && !insecure_http && !is_loopback(authority) {
        return Err(format!(
            "refusing plain http:// to {authority}, which is not loopback: the token would travel in clear\nhint: use https:// (with --ca-cert for a private CA), or --insecure-http if the network is trusted"
        ));
    }
    Ok((scheme, rest))
}

/// Whether `authority` (`host[:port]`) names this machine: `localhost`,
/// 127.0.0.0/8 or `[::1]`.
pub(crate) fn is_loopback(authority: &str) -> bool {
    let host = if let Some(bracketed) = authority.strip_prefix('[') {
        bracketed.split(']').next().unwrap_or_default()
    } else {
        authority.split(':').next().unwrap_or_default()
    };
    host.eq_ignore_ascii_case("localhost")
        || host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// The rustls client configuration for a client of a server at `scheme`:
/// `ca_cert_pem`'s certificates as the only roots when given, else the
/// system's. A client of a plain `http://` server never makes a TLS
/// handshake (it follows no redirect, and its WebSocket is `ws://` on the
/// same host), so where the system has no certificate roots to load (a
/// `FROM scratch` container, a minimal system without a CA bundle) it gets a
/// configuration that trusts nothing, rather than an error: `lev demo` and
/// `lev health` against loopback work there.
///
/// # Errors
/// A message naming what is wrong with the certificates.
pub(crate) fn client_config_for(
    scheme: Scheme,
    ca_cert_pem: Option<&[u8]>,
) -> Result<ClientConfig, String> {
    let system_roots = match scheme {
        Scheme::Plain => SystemRoots::IfAvailable,
        Scheme::Tls => SystemRoots::Required,
    };
    lev_io::tls::client_config(ca_cert_pem, system_roots)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_hosts() {
        for host in [
            "127.0.0.1:7420",
            "127.1.2.3",
            "localhost:1",
            "LOCALHOST",
            "[::1]:7420",
            "[::1]",
        ] {
            assert!(is_loopback(host), "{host}");
        }
        for host in [
            "10.0.0.1:7420",
            "example.com",
            "localhost.example.com",
            "[::2]:1",
            "127.0.0.1.nip.io",
        ] {
            assert!(!is_loopback(host), "{host}");
        }
    }

    #[test]
    fn plain_http_stays_on_loopback() {
        assert!(check_url("http://127.0.0.1:7420", false).is_ok());
        assert!(check_url("https://lev.example.com", false).is_ok());
        let err = check_url("http://lev.example.com:7420", false).unwrap_err();
        assert!(err.contains("--insecure-http"), "{err}");
        assert!(check_url("http://lev.example.com:7420", true).is_ok());
        assert!(check_url("http://user:pw@127.0.0.1", false).is_err());
        assert!(check_url("ftp://127.0.0.1", false).is_err());
    }
}
