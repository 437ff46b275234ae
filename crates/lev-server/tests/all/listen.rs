//! Listening: HTTPS with rustls, and no plain HTTP beyond loopback unless
//! asked for.

use std::path::PathBuf;
use std::sync::Arc;

use lev_server::{Config, ServeError, Server};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio_rustls::TlsConnector;
use tokio_rustls::rustls::pki_types::pem::PemObject as _;
use tokio_rustls::rustls::pki_types::{CertificateDer, ServerName};
use tokio_rustls::rustls::{ClientConfig, RootCertStore};

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/tls")
        .join(name)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serves_https_with_the_given_certificate() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = Config::new(dir.path().to_path_buf());
    config.listen = "127.0.0.1:0".into();
    config.tls = Some((fixture("cert.pem"), fixture("key.pem")));
    let server = Server::bind(config).await.unwrap();
    let url = server.base_url();
    assert!(url.starts_with("https://127.0.0.1:"), "{url}");
    let addr = server.local_addr();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let serving = tokio::spawn(server.serve(async move {
        let _ = stopped.await;
    }));

    let mut roots = RootCertStore::empty();
    for cert in CertificateDer::pem_file_iter(fixture("cert.pem")).unwrap() {
        roots.add(cert.unwrap()).unwrap();
    }
    let provider = Arc::new(tokio_rustls::rustls::crypto::ring::default_provider());
    let client = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let name = ServerName::try_from("localhost").unwrap();
    let mut tls = TlsConnector::from(Arc::new(client))
        .connect(name, tcp)
        .await
        .unwrap();
    tls.write_all(b"GET /v1/health HTTP/1.1\r\nhost: localhost\r\nconnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut reply = String::new();
    tls.read_to_string(&mut reply).await.unwrap();
    assert!(reply.starts_with("HTTP/1.1 200"), "{reply}");
    assert!(reply.contains(r#""status":"ok""#), "{reply}");

    // A plain-HTTP client gets no answer from the TLS port.
    let mut plain = tokio::net::TcpStream::connect(addr).await.unwrap();
    plain
        .write_all(b"GET /v1/health HTTP/1.1\r\nhost: x\r\n\r\n")
        .await
        .unwrap();
    let mut buf = Vec::new();
    let _ = tokio::time::timeout(
        std::time::Duration::from_secs(3),
        plain.read_to_end(&mut buf),
    )
    .await;
    assert!(!String::from_utf8_lossy(&buf).contains("200 OK"));

    let _ = stop.send(());
    serving.await.unwrap().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refuses_plain_http_beyond_loopback_and_bad_setups() {
    let dir = tempfile::tempdir().unwrap();
    let base = Config::new(dir.path().to_path_buf());
    let refused = |r: Result<Server, ServeError>| match r {
        Err(ServeError::Config(message)) => message,
        Err(other) => panic!("expected a config error, found {other}"),
        Ok(_) => panic!("expected a config error, the server started"),
    };
    let mut config = base.clone();
    config.listen = "0.0.0.0:0".into();
    let message = refused(Server::bind(config).await);
    assert!(
        message.contains("--tls-cert") && message.contains("--insecure-http"),
        "{message}"
    );

    // PostgreSQL without a key-encryption key: refused before connecting.
    let mut config = base.clone();
    config.database = Some("postgres://lev@127.0.0.1:1/lev".into());
    let message = refused(Server::bind(config.clone()).await);
    assert!(
        message.contains("--key-encryption-key-file") && message.contains("lev keys kek"),
        "{message}"
    );
    let kek = dir.path().join("kek");
    std::fs::write(&kek, lev_server::Kek::generate_base64().unwrap()).unwrap();
    config.key_encryption_key = Some(kek);
    let message = refused(Server::bind(config).await);
    assert!(
        message.contains("127.0.0.1:1") && message.contains("refused"),
        "{message}"
    );

    let mut config = base.clone();
    config.database = Some("mysql://db.example/lev".into());
    assert!(refused(Server::bind(config).await).contains("expected a postgres:// URL"));

    let mut config = base.clone();
    config.listen = "127.0.0.1:0".into();
    config.tls = Some((fixture("missing.pem"), fixture("key.pem")));
    assert!(refused(Server::bind(config).await).contains("--tls-cert"));

    let mut config = base;
    config.listen = "not an address".into();
    assert!(refused(Server::bind(config).await).contains("--listen"));
}
