//! The test server (`LEV_TEST_POSTGRES_URL`) serving TLS with a certificate
//! from a CA the tests make, for the TLS tests of lev-store-postgres and of
//! lev-cli (which includes this file).
//!
//! Set up once and shared: the CA, the server's certificate (for
//! `localhost`, 127.0.0.1 and ::1) and its key are written into
//! `<data_directory>/lev-test-tls/` (the key 0600, owned by the server's
//! user: the tests run as root on the server's machine), the server is
//! pointed at them (`ALTER SYSTEM SET ssl_cert_file, ssl_key_file, ssl = on`,
//! `pg_reload_conf()`), and psql (libpq) checks that a `verify-full`
//! connection works before anything is handed out. A file lock in that
//! directory serialises processes; a server already set up is left as it
//! is, so TLS tests running at once (or again) agree on one CA. The files
//! stay where the server reads them: a restarted server finds them. Tests
//! without TLS are not affected (`prefer` checks nothing).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// What a TLS test needs to know.
#[derive(Debug, Clone)]
pub struct ServerTls {
    /// The CA that signed the server's certificate (PEM).
    pub ca: PathBuf,
    /// Another CA with the same name, which signed nothing the server has.
    pub other_ca: PathBuf,
}

/// `sql`'s result as psql prints it unaligned (`-At`), or a panic with its
/// error.
fn psql(url: &str, sql: &str) -> Result<String, String> {
    let out = Command::new("psql")
        .args(["-X", "-At", "-v", "ON_ERROR_STOP=1", "-d", url, "-c", sql])
        .output()
        .map_err(|e| format!("psql: {e} (Debian's postgresql-client)"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).trim().to_owned())
    }
}

fn must(url: &str, sql: &str) -> String {
    psql(url, sql).unwrap_or_else(|e| panic!("{sql}: {e}"))
}

/// The server at `admin_url` serving TLS with [`ServerTls::ca`]'s
/// certificate; set up when it is not yet.
pub fn server_tls(admin_url: &str) -> ServerTls {
    use std::os::unix::fs::MetadataExt as _;

    let data = PathBuf::from(must(admin_url, "SHOW data_directory"));
    let owner = std::fs::metadata(&data).unwrap_or_else(|e| {
        panic!(
            "the TLS tests write the server's certificate into its data directory {}, which \
             this test cannot see ({e}): run them on the machine of the server, as root",
            data.display()
        )
    });
    let dir = data.join("lev-test-tls");
    std::fs::create_dir_all(&dir).unwrap();
    let lock = std::fs::File::create(dir.join("lock")).unwrap();
    lock.lock().unwrap();
    let ca = dir.join("ca.crt");
    let other_ca = dir.join("other-ca.crt");
    let cert = dir.join("server.crt");
    let key = dir.join("server.key");
    let shown = |p: &Path| p.display().to_string();
    let set_up = [&ca, &other_ca, &cert, &key].iter().all(|p| p.exists())
        && must(admin_url, "SHOW ssl") == "on"
        && must(admin_url, "SHOW ssl_cert_file") == shown(&cert)
        && must(admin_url, "SHOW ssl_key_file") == shown(&key);
    if !set_up {
        let (ca_pem, cert_pem, key_pem) = issue();
        let (other_pem, _, _) = issue();
        write(&ca, &ca_pem, 0o644, None);
        write(&other_ca, &other_pem, 0o644, None);
        write(&cert, &cert_pem, 0o644, None);
        // PostgreSQL refuses a key others may read, and wants it its own.
        write(&key, &key_pem, 0o600, Some((owner.uid(), owner.gid())));
        must(
            admin_url,
            &format!("ALTER SYSTEM SET ssl_cert_file = '{}'", shown(&cert)),
        );
        must(
            admin_url,
            &format!("ALTER SYSTEM SET ssl_key_file = '{}'", shown(&key)),
        );
        must(admin_url, "ALTER SYSTEM SET ssl = on");
        must(admin_url, "SELECT pg_reload_conf()");
    }
    // libpq's own verify-full, until the reloaded server presents the
    // certificate (the postmaster reloads asynchronously).
    let check = format!(
        "{admin_url}{}sslmode=verify-full&sslrootcert={}",
        if admin_url.contains('?') { '&' } else { '?' },
        shown(&ca)
    );
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        match psql(
            &check,
            "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()",
        ) {
            Ok(ssl) if ssl == "t" => break,
            Ok(other) => panic!("pg_stat_ssl says ssl = {other} for a verify-full connection"),
            Err(e) if Instant::now() > deadline => panic!(
                "the server does not serve the test certificate ({e}); its log says why \
                 (a key it cannot read?)"
            ),
            Err(_) => std::thread::sleep(Duration::from_millis(100)),
        }
    }
    drop(lock);
    ServerTls { ca, other_ca }
}

/// A new CA's certificate, and a certificate it signed for `localhost`,
/// 127.0.0.1 and ::1 with its key (PEM).
fn issue() -> (String, String, String) {
    use rcgen::{
        BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose,
    };

    let ca_key = KeyPair::generate().unwrap();
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    ca.distinguished_name
        .push(DnType::CommonName, "lev test CA");
    let ca_cert = ca.self_signed(&ca_key).unwrap();
    let key = KeyPair::generate().unwrap();
    let mut server = CertificateParams::new(vec![
        "localhost".to_owned(),
        "127.0.0.1".to_owned(),
        "::1".to_owned(),
    ])
    .unwrap();
    server
        .distinguished_name
        .push(DnType::CommonName, "localhost");
    let cert = server.signed_by(&key, &Issuer::new(ca, ca_key)).unwrap();
    (ca_cert.pem(), cert.pem(), key.serialize_pem())
}

/// Write `text` to `path` whole (a new file renamed over the old), with
/// `mode` and, when given, that owner.
fn write(path: &Path, text: &str, mode: u32, owner: Option<(u32, u32)>) {
    use std::os::unix::fs::PermissionsExt as _;

    let new = path.with_extension("new");
    let _ = std::fs::remove_file(&new);
    std::fs::write(&new, text).unwrap();
    std::fs::set_permissions(&new, std::fs::Permissions::from_mode(mode)).unwrap();
    if let Some((uid, gid)) = owner {
        std::os::unix::fs::chown(&new, Some(uid), Some(gid)).unwrap_or_else(|e| {
            panic!(
                "{}: cannot give it to the server's user ({e}): run the TLS tests as root",
                new.display()
            )
        });
    }
    std::fs::rename(&new, path).unwrap();
}
