//! TLS to PostgreSQL as the URL's `sslmode` and `sslrootcert` say, against
//! the test server serving a certificate from a CA the test made
//! (`server_tls`): `verify-full` works and is TLS (pg_stat_ssl says so for
//! every connection of the store), a wrong CA and a wrong host name are
//! refused naming the check, `verify-ca` passes the wrong name, `require`
//! works without roots, `disable` is plain, and bad settings are clear
//! errors that never print the password.

use lev_store::{EventStore, StoreError};
use lev_store_postgres::{Options, PostgresStore, migrate};

use super::db::{TestDb, admin, admin_url};
use super::server_tls::{ServerTls, server_tls};

/// `db.url` (postgres://postgres@127.0.0.1:5432/NAME) with `host` for the
/// host, a password, an application name to find its connections by, and
/// `query`.
fn url(db: &TestDb, host: &str, app: &str, query: &str) -> String {
    let rest = db
        .url
        .split_once("@127.0.0.1:5432/")
        .expect("the test URL")
        .1;
    format!(
        "postgres://postgres:hunter2@{host}:5432/{rest}?application_name={app}&{query}",
        rest = rest.split('?').next().unwrap_or_default()
    )
}

async fn connect(url: &str) -> Result<PostgresStore, StoreError> {
    PostgresStore::connect_with(
        url,
        Options {
            max_connections: 2,
            ..Options::default()
        },
    )
    .await
}

/// `(connections, of them on TLS)` of application `app`, and a TLS version.
async fn ssl_of(app: &str) -> (i64, i64, Option<String>) {
    let row = admin()
        .await
        .query_one(
            "SELECT count(*), count(*) FILTER (WHERE s.ssl), max(s.version) \
             FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid) \
             WHERE a.application_name = $1",
            &[&app],
        )
        .await
        .unwrap();
    (row.get(0), row.get(1), row.get(2))
}

/// Connects, works, and every connection it holds is (or is not) TLS.
async fn works(url: &str, app: &str, tls: bool) {
    let store = connect(url).await.unwrap_or_else(|e| panic!("{app}: {e}"));
    store.last_event_seq().await.unwrap();
    let (all, encrypted, version) = ssl_of(app).await;
    assert!(all >= 2, "{app}: {all} connections (a pool and a listener)");
    if tls {
        assert_eq!(encrypted, all, "{app}: only {encrypted} of {all} on TLS");
        let version = version.unwrap_or_default();
        assert!(version.starts_with("TLSv1."), "{app}: {version}");
    } else {
        assert_eq!(encrypted, 0, "{app}: {encrypted} of {all} on TLS");
    }
    drop(store);
}

/// Refused, as a database error (not "unavailable": retrying does not
/// help), with a message holding each of `needles` and never the password.
async fn refused(url: &str, needles: &[&str]) -> String {
    let e = connect(url).await.expect_err("refused");
    let message = e.to_string();
    assert!(matches!(e, StoreError::Database(_)), "{e:?}");
    for needle in needles {
        assert!(message.contains(needle), "{needle:?} not in: {message}");
    }
    assert!(!message.contains("hunter2"), "the password in: {message}");
    message
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_as_sslmode_and_sslrootcert_say() {
    let admin = admin_url();
    let ServerTls { ca, other_ca } = tokio::task::spawn_blocking(move || server_tls(&admin))
        .await
        .unwrap();
    let (ca, other_ca) = (ca.display().to_string(), other_ca.display().to_string());
    let db = TestDb::new().await;
    let app = |case: &str| format!("{}_{case}", db.name);

    // verify-full: the chain and the host name, by IP and by name.
    let q = format!("sslmode=verify-full&sslrootcert={ca}");
    works(
        &url(&db, "127.0.0.1", &app("full_ip"), &q),
        &app("full_ip"),
        true,
    )
    .await;
    works(
        &url(&db, "localhost", &app("full_dns"), &q),
        &app("full_dns"),
        true,
    )
    .await;
    // `lev migrate`'s own connection too.
    migrate(&url(&db, "127.0.0.1", &app("migrate"), &q))
        .await
        .unwrap();

    // A CA that did not sign the server's certificate.
    let wrong_ca = format!("sslmode=verify-full&sslrootcert={other_ca}");
    let message = refused(
        &url(&db, "127.0.0.1", &app("wrong_ca"), &wrong_ca),
        &[
            "certificate check failed",
            "not trusted",
            &other_ca,
            "127.0.0.1:5432",
        ],
    )
    .await;
    eprintln!("a wrong CA: {message}");
    let message = migrate(&url(&db, "127.0.0.1", &app("wrong_ca"), &wrong_ca))
        .await
        .expect_err("refused")
        .to_string();
    assert!(message.contains("not trusted"), "{message}");
    // verify-ca checks the CA too.
    refused(
        &url(
            &db,
            "127.0.0.1",
            &app("wrong_ca2"),
            &format!("sslmode=verify-ca&sslrootcert={other_ca}"),
        ),
        &["certificate check failed", "not trusted"],
    )
    .await;
    // `require` with roots checks them (as libpq does).
    refused(
        &url(
            &db,
            "127.0.0.1",
            &app("wrong_ca3"),
            &format!("sslmode=require&sslrootcert={other_ca}"),
        ),
        &["not trusted"],
    )
    .await;
    // The system's roots do not hold the test's CA.
    refused(
        &url(
            &db,
            "127.0.0.1",
            &app("system"),
            "sslmode=verify-full&sslrootcert=system",
        ),
        &["certificate check failed", "the system's roots"],
    )
    .await;

    // A name the certificate is not for (the connection still goes to
    // 127.0.0.1: hostaddr).
    let wrong_name = |mode: &str, case: &str| {
        url(
            &db,
            "lev-wrong-name.invalid",
            &app(case),
            &format!("hostaddr=127.0.0.1&sslmode={mode}&sslrootcert={ca}"),
        )
    };
    let message = refused(
        &wrong_name("verify-full", "wrong_name"),
        &[
            "host name check failed",
            "lev-wrong-name.invalid",
            "localhost",
        ],
    )
    .await;
    eprintln!("a wrong host name: {message}");
    // verify-ca does not check the name.
    works(&wrong_name("verify-ca", "ca_only"), &app("ca_only"), true).await;

    // require: encrypted, nothing checked; prefer (the default): encrypted
    // when the server offers it; disable: plain.
    works(
        &url(&db, "127.0.0.1", &app("require"), "sslmode=require"),
        &app("require"),
        true,
    )
    .await;
    works(
        &url(
            &db,
            "lev-wrong-name.invalid",
            &app("require_name"),
            "hostaddr=127.0.0.1&sslmode=require",
        ),
        &app("require_name"),
        true,
    )
    .await;
    works(
        &url(&db, "127.0.0.1", &app("prefer"), "connect_timeout=5"),
        &app("prefer"),
        true,
    )
    .await;
    works(
        &url(&db, "127.0.0.1", &app("disable"), "sslmode=disable"),
        &app("disable"),
        false,
    )
    .await;

    // Settings that cannot work, said before connecting.
    refused(
        &url(&db, "127.0.0.1", &app("bad"), "sslmode=verify_full"),
        &[
            "sslmode=\"verify_full\" is not one of disable, prefer, require, verify-ca or verify-full",
            "127.0.0.1:5432",
        ],
    )
    .await;
    refused(
        &url(
            &db,
            "127.0.0.1",
            &app("missing"),
            "sslmode=verify-full&sslrootcert=/nonexistent/lev-ca.pem",
        ),
        &["sslrootcert /nonexistent/lev-ca.pem", "No such file"],
    )
    .await;
}
