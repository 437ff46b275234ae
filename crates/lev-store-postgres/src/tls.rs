//! TLS to PostgreSQL, with rustls (the `ring` provider, as everywhere in
//! lev): `sslmode` and `sslrootcert` in the database URL, read as libpq
//! reads them.
//!
//! | `sslmode` | TLS | the server's certificate |
//! |-----------|-----|--------------------------|
//! | `disable` | never | - |
//! | `prefer` (the default) | when the server offers it, else plain | not checked |
//! | `require` | always | not checked; with `sslrootcert`, as `verify-ca` |
//! | `verify-ca` | always | signed by a CA in `sslrootcert` (no host name check) |
//! | `verify-full` | always | signed by a CA in `sslrootcert`, and valid for the URL's host |
//!
//! `sslrootcert` is a PEM file of CA certificates, or `system` for the
//! platform's roots (what `verify-ca` and `verify-full` use when it is not
//! given). tokio-postgres reads neither `verify-*` nor `sslrootcert`, so
//! [`take_params`] takes both out of the URL before it parses the rest, and
//! [`connector`] sets its `sslmode` (`require` for the `verify-*` modes: the
//! check is this module's verifier's).
//!
//! A failed check is a [`StoreError::Database`](lev_store::StoreError), not
//! `Unavailable`: retrying does not help. Its message names the check that
//! failed (the certificate's, or the host name's) and where the roots came
//! from. No channel binding (`tls-server-end-point`) is offered: SCRAM runs
//! without it, as tokio-postgres's default `channel_binding=prefer` allows.

use std::future::Future;
use std::io;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{
    CertificateError, ClientConfig, DigitallySignedStruct, OtherError, RootCertStore,
    SignatureScheme,
};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio_postgres::Socket;
use tokio_postgres::config::SslMode;
use tokio_postgres::tls::{ChannelBinding, MakeTlsConnect, TlsConnect, TlsStream};

/// The values `sslmode` may take, for messages.
const MODES: &str = "disable, prefer, require, verify-ca or verify-full";

/// `sslmode`, as libpq names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    Disable,
    Prefer,
    Require,
    VerifyCa,
    VerifyFull,
}

impl Mode {
    fn parse(value: &str) -> Result<Self, String> {
        Ok(match value {
            "disable" => Self::Disable,
            "prefer" => Self::Prefer,
            "require" => Self::Require,
            "verify-ca" => Self::VerifyCa,
            "verify-full" => Self::VerifyFull,
            "allow" => {
                return Err(format!(
                    "sslmode=allow is not supported (it tries without TLS first): use {MODES}"
                ));
            }
            other => return Err(format!("sslmode={other:?} is not one of {MODES}")),
        })
    }

    fn name(self) -> &'static str {
        match self {
            Self::Disable => "disable",
            Self::Prefer => "prefer",
            Self::Require => "require",
            Self::VerifyCa => "verify-ca",
            Self::VerifyFull => "verify-full",
        }
    }
}

/// The TLS settings of a database URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Params {
    pub(crate) mode: Mode,
    /// `sslrootcert`, decoded: a path, or `system`.
    pub(crate) root_cert: Option<String>,
}

/// `url` without its `sslmode` and `sslrootcert` (the rest of its query
/// kept as written), and what they say (`prefer` when unset, as libpq).
///
/// # Errors
/// An `sslmode` lev does not know, or a value that is not UTF-8 once
/// percent-decoded. The message never holds the URL (it may hold a
/// password).
pub(crate) fn take_params(url: &str) -> Result<(String, Params), String> {
    let mut params = Params {
        mode: Mode::Prefer,
        root_cert: None,
    };
    let Some((base, query)) = url.split_once('?') else {
        return Ok((url.to_owned(), params));
    };
    let mut kept: Vec<&str> = Vec::new();
    for pair in query.split('&') {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        match decode(key)?.as_str() {
            "sslmode" => params.mode = Mode::parse(&decode(value)?)?,
            "sslrootcert" => {
                let value = decode(value)?;
                if value.is_empty() {
                    return Err("sslrootcert is empty: give a PEM file of CA certificates, \
                                or `system`"
                        .to_owned());
                }
                params.root_cert = Some(value);
            }
            _ => kept.push(pair),
        }
    }
    let rest = if kept.is_empty() {
        base.to_owned()
    } else {
        format!("{base}?{}", kept.join("&"))
    };
    Ok((rest, params))
}

/// A URL query's percent-decoding (`+` stays `+`, as tokio-postgres reads it).
fn decode(text: &str) -> Result<String, String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| char::from(b).to_digit(16);
        match (
            bytes[i],
            bytes.get(i + 1).copied(),
            bytes.get(i + 2).copied(),
        ) {
            (b'%', Some(h), Some(l)) if hex(h).is_some() && hex(l).is_some() => {
                let value = hex(h).unwrap_or_default() * 16 + hex(l).unwrap_or_default();
                out.push(u8::try_from(value).unwrap_or_default());
                i += 3;
            }
            (b, _, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8(out)
        .map_err(|_| "a TLS setting of the URL is not UTF-8 once percent-decoded".to_owned())
}

/// Where the roots of a verifying mode come from.
enum Roots {
    File(PathBuf),
    System,
}

impl Roots {
    fn describe(&self) -> String {
        match self {
            Self::File(path) => format!("sslrootcert {}", path.display()),
            Self::System => "the system's roots".to_owned(),
        }
    }
}

/// tokio-postgres's `sslmode` for `params`, and the connector that makes
/// the handshake and checks what `params` asks.
///
/// # Errors
/// An `sslrootcert` that cannot be read or holds no certificate (the
/// message names the path), or system roots that cannot be loaded.
pub(crate) fn connector(params: &Params) -> Result<(SslMode, MakeRustls), String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let roots = match (params.mode, params.root_cert.as_deref()) {
        (Mode::Disable | Mode::Prefer, _) | (Mode::Require, None) => None,
        (_, None | Some("system")) => Some(Roots::System),
        (_, Some(path)) => Some(Roots::File(PathBuf::from(path))),
    };
    let verifier: Arc<dyn ServerCertVerifier> = match roots {
        None => Arc::new(Unverified {
            provider: Arc::clone(&provider),
        }),
        Some(roots) => {
            let inner: Arc<dyn ServerCertVerifier> = match &roots {
                Roots::File(path) => {
                    let store = root_store(path)?;
                    WebPkiServerVerifier::builder_with_provider(
                        Arc::new(store),
                        Arc::clone(&provider),
                    )
                    .build()
                    .map_err(|e| format!("sslrootcert {}: {e}", path.display()))?
                }
                Roots::System => Arc::new(
                    rustls_platform_verifier::Verifier::new(Arc::clone(&provider))
                        .map_err(|e| format!("the system's certificate roots: {e}"))?,
                ),
            };
            let mode = if params.mode == Mode::Require {
                Mode::VerifyCa
            } else {
                params.mode
            };
            Arc::new(Checked {
                inner,
                host_name: mode == Mode::VerifyFull,
                mode: params.mode,
                roots: roots.describe(),
            })
        }
    };
    let mut config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS: {e}"))?
        .dangerous()
        .with_custom_certificate_verifier(verifier)
        .with_no_client_auth();
    // PostgreSQL 17 refuses any other protocol a client proposes.
    config.alpn_protocols = vec![b"postgresql".to_vec()];
    let ssl_mode = match params.mode {
        Mode::Disable => SslMode::Disable,
        Mode::Prefer => SslMode::Prefer,
        Mode::Require | Mode::VerifyCa | Mode::VerifyFull => SslMode::Require,
    };
    Ok((
        ssl_mode,
        MakeRustls {
            config: Arc::new(config),
        },
    ))
}

/// The CA certificates of the PEM file at `path`.
fn root_store(path: &std::path::Path) -> Result<RootCertStore, String> {
    let pem = lev_io::files::read(path, lev_io::files::limit::PEM)
        .map_err(|e| format!("sslrootcert {e}"))?;
    let mut store = RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(&pem) {
        let cert = cert.map_err(|e| format!("sslrootcert {}: {e}", path.display()))?;
        store
            .add(cert)
            .map_err(|e| format!("sslrootcert {}: {e}", path.display()))?;
    }
    if store.is_empty() {
        return Err(format!(
            "sslrootcert {}: expected PEM certificates (-----BEGIN CERTIFICATE-----), found none",
            path.display()
        ));
    }
    Ok(store)
}

/// `prefer`, and `require` without roots: encrypted, the certificate not
/// checked (as libpq), the handshake's signatures still verified.
#[derive(Debug)]
struct Unverified {
    provider: Arc<CryptoProvider>,
}

impl ServerCertVerifier for Unverified {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

/// `verify-ca` and `verify-full`: the chain to the roots (webpki's check,
/// or the platform's), the host name only for `verify-full`; a failure
/// explained (see [`Explained`]).
#[derive(Debug)]
struct Checked {
    inner: Arc<dyn ServerCertVerifier>,
    /// Whether the host name is checked (`verify-full`).
    host_name: bool,
    /// As given, for messages (`require` with roots checks as `verify-ca`).
    mode: Mode,
    roots: String,
}

impl ServerCertVerifier for Checked {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        // webpki checks the chain first and the name last: a name error
        // means the chain was good.
        let error = match self.inner.verify_server_cert(
            end_entity,
            intermediates,
            server_name,
            ocsp_response,
            now,
        ) {
            Ok(verified) => return Ok(verified),
            Err(e) => e,
        };
        let mode = self.mode.name();
        let message = match &error {
            rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            ) if !self.host_name => return Ok(ServerCertVerified::assertion()),
            rustls::Error::InvalidCertificate(CertificateError::NotValidForNameContext {
                presented,
                ..
            }) => format!(
                "the host name check failed: the server's certificate is not valid for the \
                 host name {} (it names {}); sslmode={mode} checks the host name, verify-ca \
                 does not",
                server_name.to_str(),
                if presented.is_empty() {
                    "no name".to_owned()
                } else {
                    presented
                        .iter()
                        .map(|p| bare(p))
                        .collect::<Vec<_>>()
                        .join(", ")
                },
            ),
            rustls::Error::InvalidCertificate(CertificateError::NotValidForName) => format!(
                "the host name check failed: the server's certificate is not valid for the \
                 host name {}; sslmode={mode} checks the host name, verify-ca does not",
                server_name.to_str(),
            ),
            // No root of that name, or one of that name that did not sign
            // it (another CA under the same name).
            rustls::Error::InvalidCertificate(
                kind @ (CertificateError::UnknownIssuer | CertificateError::BadSignature),
            ) => format!(
                "the certificate check failed: the server's certificate is not trusted: no \
                 certificate authority in {} signed it ({kind:?}; sslmode={mode})",
                self.roots
            ),
            other => format!(
                "the certificate check failed: {other} (sslmode={mode}, roots: {})",
                self.roots
            ),
        };
        Err(rustls::Error::InvalidCertificate(CertificateError::Other(
            OtherError(Arc::new(Explained(message))),
        )))
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.inner.supported_verify_schemes()
    }

    fn requires_raw_public_keys(&self) -> bool {
        self.inner.requires_raw_public_keys()
    }

    fn root_hint_subjects(&self) -> Option<&[rustls::DistinguishedName]> {
        self.inner.root_hint_subjects()
    }
}

/// A name as rustls presents it (`DnsName("localhost")`, `IpAddress(::1)`),
/// bare.
fn bare(presented: &str) -> &str {
    let inner = presented
        .strip_prefix("DnsName(")
        .or_else(|| presented.strip_prefix("IpAddress("))
        .and_then(|rest| rest.strip_suffix(')'))
        .unwrap_or(presented);
    inner.trim_matches('"')
}

/// A failed check, said for people: the whole message of a handshake error
/// (see [`RustlsConnect`]).
#[derive(Debug)]
pub(crate) struct Explained(String);

impl std::fmt::Display for Explained {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Explained {}

/// tokio-postgres's TLS connector over tokio-rustls (cheap to clone: the
/// pool and the listener each hold one).
#[derive(Debug, Clone)]
pub(crate) struct MakeRustls {
    config: Arc<ClientConfig>,
}

impl MakeTlsConnect<Socket> for MakeRustls {
    type Stream = RustlsStream;
    type TlsConnect = RustlsConnect;
    type Error = Explained;

    fn make_tls_connect(&mut self, domain: &str) -> Result<RustlsConnect, Explained> {
        // A Unix socket has no host name (tokio-postgres passes ""), and
        // never gets as far as a handshake: PostgreSQL offers no TLS there.
        let name = if domain.is_empty() {
            ServerName::try_from("localhost").map(|n| n.to_owned())
        } else {
            ServerName::try_from(domain.to_owned())
        }
        .map_err(|_| {
            Explained(format!(
                "the host name {domain:?} is neither a DNS name nor an IP address TLS can check"
            ))
        })?;
        Ok(RustlsConnect {
            config: Arc::clone(&self.config),
            name,
        })
    }
}

/// One connection's handshake.
#[derive(Debug)]
pub(crate) struct RustlsConnect {
    config: Arc<ClientConfig>,
    name: ServerName<'static>,
}

type Handshake = Pin<
    Box<dyn Future<Output = Result<RustlsStream, Box<dyn std::error::Error + Send + Sync>>> + Send>,
>;

impl TlsConnect<Socket> for RustlsConnect {
    type Stream = RustlsStream;
    type Error = Box<dyn std::error::Error + Send + Sync>;
    type Future = Handshake;

    fn connect(self, stream: Socket) -> Handshake {
        Box::pin(async move {
            let connector = tokio_rustls::TlsConnector::from(self.config);
            match connector.connect(self.name, stream).await {
                Ok(stream) => Ok(RustlsStream(Box::new(stream))),
                Err(e) => Err(handshake_error(e)),
            }
        })
    }
}

/// A handshake's failure: a refused certificate (or any TLS error) as its
/// explanation, not an IO error (which would read as "unreachable, retry");
/// an IO error as itself.
fn handshake_error(e: io::Error) -> Box<dyn std::error::Error + Send + Sync> {
    let Some(tls) = e
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<rustls::Error>())
    else {
        return Box::new(e);
    };
    if let rustls::Error::InvalidCertificate(CertificateError::Other(OtherError(other))) = tls
        && let Some(explained) = other.downcast_ref::<Explained>()
    {
        return Box::new(Explained(explained.0.clone()));
    }
    Box::new(Explained(format!("TLS: {tls}")))
}

/// An established TLS connection.
#[derive(Debug)]
pub(crate) struct RustlsStream(Box<tokio_rustls::client::TlsStream<Socket>>);

impl TlsStream for RustlsStream {
    fn channel_binding(&self) -> ChannelBinding {
        ChannelBinding::none()
    }
}

impl AsyncRead for RustlsStream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut *self.0).poll_read(cx, buf)
    }
}

impl AsyncWrite for RustlsStream {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut *self.0).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut *self.0).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut *self.0).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut *self.0).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.0.is_write_vectored()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tls_settings_leave_the_url_and_the_rest_stays() {
        let (rest, p) = take_params(
            "postgres://u:pw@db:5432/lev?application_name=x&sslmode=verify-full&sslrootcert=%2Ftmp%2Fca%20b.pem&connect_timeout=3",
        )
        .unwrap();
        assert_eq!(
            rest,
            "postgres://u:pw@db:5432/lev?application_name=x&connect_timeout=3"
        );
        assert_eq!(p.mode, Mode::VerifyFull);
        assert_eq!(p.root_cert.as_deref(), Some("/tmp/ca b.pem"));
        let (rest, p) = take_params("postgres://db/lev?sslmode=require").unwrap();
        assert_eq!(rest, "postgres://db/lev");
        assert_eq!(p.mode, Mode::Require);
        let (rest, p) = take_params("postgres://db/lev").unwrap();
        assert_eq!(rest, "postgres://db/lev");
        assert_eq!(p.mode, Mode::Prefer);
        assert_eq!(p.root_cert, None);
    }

    #[test]
    fn an_unknown_sslmode_is_named_with_what_is_known() {
        let e = take_params("postgres://u:secret@db/lev?sslmode=verify_full").unwrap_err();
        assert_eq!(
            e,
            "sslmode=\"verify_full\" is not one of disable, prefer, require, verify-ca or verify-full"
        );
        let e = take_params("postgres://db/lev?sslmode=allow").unwrap_err();
        assert!(e.contains("allow is not supported"), "{e}");
        let e = take_params("postgres://db/lev?sslrootcert=").unwrap_err();
        assert!(e.contains("sslrootcert is empty"), "{e}");
    }

    #[test]
    fn a_missing_or_empty_root_file_is_named() {
        let params = |path: &str| Params {
            mode: Mode::VerifyFull,
            root_cert: Some(path.to_owned()),
        };
        let e = connector(&params("/nonexistent/lev-ca.pem")).unwrap_err();
        assert!(
            e.starts_with("sslrootcert /nonexistent/lev-ca.pem: "),
            "{e}"
        );
        let e = connector(&params("/dev/null")).unwrap_err();
        assert!(e.contains("/dev/null") && e.contains("found none"), "{e}");
        let e = connector(&params("/dev/zero")).unwrap_err();
        assert!(
            e.contains("/dev/zero") && e.contains("expected at most"),
            "{e}"
        );
        // Not read where nothing is checked.
        let prefer = Params {
            mode: Mode::Prefer,
            root_cert: Some("/nonexistent/lev-ca.pem".to_owned()),
        };
        assert!(connector(&prefer).is_ok());
    }
}
