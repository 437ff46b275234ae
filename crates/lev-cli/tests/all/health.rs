//! `lev health`: the container image's HEALTHCHECK. Exit 0 with one line
//! when the server answers, 1 naming the URL when it does not; and a client
//! of a plain http:// server works on a system without certificate roots
//! (a `FROM scratch` image), while https:// there says why it cannot.

use std::process::Command;

use crate::client_env::LevServer;
use crate::support::{Run, lev};

/// `lev health ARGS` with the system's certificate roots pointed at nothing,
/// as in a `FROM scratch` image without a CA bundle.
fn lev_without_roots(args: &[&str]) -> Run {
    let missing = env!("CARGO_TARGET_TMPDIR").to_owned() + "/no-such-ca-bundle";
    let output = Command::new(env!("CARGO_BIN_EXE_lev"))
        .args(args)
        .env_remove("LEV_URL")
        .env("SSL_CERT_FILE", &missing)
        .env("SSL_CERT_DIR", &missing)
        .output()
        .expect("run lev");
    Run {
        code: output.status.code().expect("lev exited"),
        stdout: String::from_utf8(output.stdout).expect("UTF-8"),
        stderr: String::from_utf8(output.stderr).expect("UTF-8"),
    }
}

#[test]
fn health_answers_zero_when_the_server_is_up_and_one_when_it_is_not() {
    let server = LevServer::start("health-up");
    let up = lev(["health", "--url", &server.url]);
    assert_eq!(up.code, 0, "{up:?}");
    assert!(
        up.stdout.starts_with(&format!(
            "ok: lev {} on sqlite, replica rp_",
            env!("CARGO_PKG_VERSION")
        )),
        "{up:?}"
    );

    let url = server.url.clone();
    drop(server);
    let down = lev(["health", "--url", &url]);
    assert_eq!(down.code, 1, "{down:?}");
    assert!(down.stdout.is_empty(), "{down:?}");
    assert!(down.stderr.contains(&url), "{down:?}");
}

#[test]
fn plain_http_needs_no_certificate_roots_and_https_says_it_has_none() {
    let server = LevServer::start("health-no-roots");
    let plain = lev_without_roots(&["health", "--url", &server.url]);
    assert_eq!(plain.code, 0, "{plain:?}");
    assert!(plain.stdout.starts_with("ok: lev "), "{plain:?}");

    let tls = lev_without_roots(&["health", "--url", "https://127.0.0.1:9"]);
    assert_eq!(tls.code, 1, "{tls:?}");
    assert!(tls.stderr.contains("certificate roots"), "{tls:?}");
}
