//! The rustls client configuration lev's outbound connections use: the SDK's
//! to a server, and a server's own calls to others (webhooks, Slack).

use std::sync::Arc;

use rustls::ClientConfig;
use rustls::RootCertStore;
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject as _;

/// What to do when no CA is given and the system's certificate roots cannot
/// be loaded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SystemRoots {
    /// An error: the configuration is for TLS connections.
    Required,
    /// A configuration that trusts nothing: for a client that never makes
    /// a TLS handshake (one of a plain `http://` server), so that it works
    /// where the system has no roots to load (a `FROM scratch` container, a
    /// minimal system without a CA bundle).
    IfAvailable,
}

/// The rustls client configuration: `ca_cert_pem`'s certificates as the only
/// roots when given, else the system's (through the platform verifier);
/// the `ring` provider, HTTP/1.1.
///
/// # Errors
/// A message naming what is wrong with the certificates, or the system's
/// roots when they are [`SystemRoots::Required`] and cannot be loaded.
pub fn client_config(
    ca_cert_pem: Option<&[u8]>,
    system_roots: SystemRoots,
) -> Result<ClientConfig, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("tls: {e}"))?;
    let mut config = match ca_cert_pem {
        Some(pem) => {
            let mut roots = RootCertStore::empty();
            for cert in CertificateDer::pem_slice_iter(pem) {
                let cert = cert.map_err(|e| format!("the CA certificate: {e}"))?;
                roots
                    .add(cert)
                    .map_err(|e| format!("the CA certificate: {e}"))?;
            }
            if roots.is_empty() {
                return Err("the CA certificate: expected PEM certificates, found none".into());
            }
            builder.with_root_certificates(roots).with_no_client_auth()
        }
        None => match rustls_platform_verifier::Verifier::new(provider) {
            Ok(verifier) => builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(verifier))
                .with_no_client_auth(),
            Err(_) if system_roots == SystemRoots::IfAvailable => builder
                .with_root_certificates(RootCertStore::empty())
                .with_no_client_auth(),
            Err(e) => return Err(format!("the system's certificate roots: {e}")),
        },
    };
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ca_file_without_certificates_is_refused() {
        assert!(client_config(Some(b"not pem"), SystemRoots::Required).is_err());
        assert!(client_config(Some(b"not pem"), SystemRoots::IfAvailable).is_err());
    }
}
