//! `lev serve` and `lev migrate` on PostgreSQL over TLS, as a user runs
//! them: `--database 'postgres://...?sslmode=verify-full&sslrootcert=CA'`
//! migrates, starts and serves, every connection of the server on TLS
//! (pg_stat_ssl); with a CA that did not sign the server's certificate, or a
//! host name it is not for, both exit non-zero with a message naming the
//! check, the host, and never the password. The test server is set up to
//! serve a certificate from a CA the test makes (lev-store-postgres's
//! `server_tls`, which this binary includes).

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::replicas::{Database, admin_url};
use crate::server_tls::{ServerTls, server_tls};
use crate::spawned::Spawned;
use crate::support::{Scratch, lev};

/// `db`'s URL on `host` (with a password the server does not need, to see
/// that no message prints it), with `query`.
fn url(db: &Database, host: &str, query: &str) -> String {
    let name = db.url.rsplit('/').next().unwrap();
    format!("postgres://postgres:hunter2@{host}:5432/{name}?{query}")
}

/// `lev ARGS` that must exit by itself within 30 s: (code, stderr).
fn exits(args: &[&str]) -> (i32, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_lev"))
        .args(args)
        .env_remove("LEV_DATABASE_URL")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            let mut stderr = String::new();
            std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
            return (status.code().unwrap_or(-1), stderr);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("lev {args:?} did not exit within 30 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// pg_stat_ssl for the connections of application `app`: (all, on TLS).
fn ssl_of(app: &str) -> (u32, u32) {
    let out = Command::new("psql")
        .args([
            "-X",
            "-At",
            "-d",
            &admin_url(),
            "-c",
            &format!(
                "SELECT count(*), count(*) FILTER (WHERE s.ssl) FROM pg_stat_ssl s \
                 JOIN pg_stat_activity a USING (pid) WHERE a.application_name = '{app}'"
            ),
        ])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let (all, tls) = text.trim().split_once('|').expect("count|count");
    (all.parse().unwrap(), tls.parse().unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_and_migrate_over_verified_tls() {
    let admin = admin_url();
    let ServerTls { ca, other_ca } = tokio::task::spawn_blocking(move || server_tls(&admin))
        .await
        .unwrap();
    let (ca, other_ca) = (ca.display().to_string(), other_ca.display().to_string());
    let db = Database::new("tls");
    let dir = Scratch::new("postgres-tls");
    let kek = lev(["keys", "kek", "--out", dir.path("kek").to_str().unwrap()]);
    assert_eq!(kek.code, 0, "{kek:?}");
    let kek = dir.path("kek").display().to_string();
    let app = format!("lev_cli_tls_{}", std::process::id());

    let good = url(
        &db,
        "127.0.0.1",
        &format!("sslmode=verify-full&sslrootcert={ca}&application_name={app}"),
    );
    let (code, stderr) = exits(&["migrate", "--database", &good]);
    assert_eq!(code, 0, "{stderr}");

    let server = Spawned::builder(env!("CARGO_BIN_EXE_lev"), dir.path("a"))
        .args([
            "--database",
            good.as_str(),
            "--key-encryption-key-file",
            &kek,
        ])
        .start()
        .unwrap();
    let _ = rustls::crypto::ring::default_provider().install_default();
    let http = reqwest::Client::builder().no_proxy().build().unwrap();
    let health: serde_json::Value = http
        .get(format!("{}/v1/health", server.url()))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(health["store"], "postgres", "{health}");
    // A write, through the pool.
    let admin_token = server.admin_token().unwrap();
    let created = http
        .post(format!("{}/v1/tokens", server.url()))
        .bearer_auth(&admin_token)
        .json(&serde_json::json!({"name": "ci", "role": "worker"}))
        .send()
        .await
        .unwrap();
    assert_eq!(created.status().as_u16(), 201);
    let (all, tls) = ssl_of(&app);
    assert!(all >= 2, "{all} connections of the server");
    assert_eq!(tls, all, "{tls} of {all} connections on TLS");
    drop(server);

    // A CA that did not sign the server's certificate.
    let wrong_ca = url(
        &db,
        "127.0.0.1",
        &format!("sslmode=verify-full&sslrootcert={other_ca}"),
    );
    for args in [
        vec!["migrate", "--database", &wrong_ca],
        vec![
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--data-dir",
            dir.path("b").to_str().unwrap(),
            "--key-encryption-key-file",
            &kek,
            "--database",
            &wrong_ca,
        ],
    ] {
        let (code, stderr) = exits(&args);
        assert_ne!(code, 0, "lev {}: {stderr}", args[0]);
        for needle in [
            "127.0.0.1:5432",
            "certificate check failed",
            "not trusted",
            &other_ca,
        ] {
            assert!(
                stderr.contains(needle),
                "lev {}: {needle:?} not in {stderr}",
                args[0]
            );
        }
        assert!(!stderr.contains("hunter2"), "the password in {stderr}");
    }

    // A host name the certificate is not for (hostaddr: still 127.0.0.1).
    let wrong_name = url(
        &db,
        "lev-wrong-name.invalid",
        &format!("hostaddr=127.0.0.1&sslmode=verify-full&sslrootcert={ca}"),
    );
    let (code, stderr) = exits(&["migrate", "--database", &wrong_name]);
    assert_ne!(code, 0, "{stderr}");
    assert!(stderr.contains("host name check failed"), "{stderr}");
    assert!(stderr.contains("lev-wrong-name.invalid"), "{stderr}");
    assert!(!stderr.contains("hunter2"), "the password in {stderr}");
}
