//! TLS for listening beyond loopback: rustls with the `ring` provider.
//!
//! Handshakes run in each connection's own task (`http.rs`), so a slow or
//! silent client cannot hold up the accept loop; the handshake counts
//! against the connection caps and must finish within the header timeout.

use std::path::Path;
use std::sync::Arc;

use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls::ServerConfig;
use tokio_rustls::rustls::pki_types::pem::PemObject as _;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};

/// Load a certificate chain and its key (PEM files) into a server config.
///
/// # Errors
/// A message naming the file that could not be read or used.
pub fn acceptor(cert: &Path, key: &Path) -> Result<TlsAcceptor, String> {
    use lev_io::files::{limit, read};
    let cert_pem = read(cert, limit::PEM).map_err(|e| format!("--tls-cert {e}"))?;
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&cert_pem)
        .collect::<Result<_, _>>()
        .map_err(|e| format!("--tls-cert {}: {e}", cert.display()))?;
    if certs.is_empty() {
        return Err(format!(
            "--tls-cert {}: expected PEM certificates, found none",
            cert.display()
        ));
    }
    let key_pem = read(key, limit::PEM).map_err(|e| format!("--tls-key {e}"))?;
    let key = PrivateKeyDer::from_pem_slice(&key_pem)
        .map_err(|e| format!("--tls-key {}: {e}", key.display()))?;
    let provider = Arc::new(tokio_rustls::rustls::crypto::ring::default_provider());
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("tls: {e}"))?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|e| format!("--tls-cert/--tls-key: {e}"))?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}
