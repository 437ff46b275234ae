//! What a newcomer runs into: output piped into `head`, usage errors, flags
//! that do not fit the question, error messages.

use std::process::{Command, Stdio};

use crate::client_env::{LevServer, choice, shell, text};

/// Run `lev ARGS` against `server` with its stdout a pipe whose reading end
/// is already closed, as `lev ... | head -0` would leave it.
fn into_closed_pipe(server: &LevServer, args: &[&str]) -> (Option<i32>, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_lev"))
        .args(args)
        .env("LEV_URL", &server.url)
        .env("LEV_TOKEN", &server.admin)
        .env("RUST_BACKTRACE", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Close the reading end before lev has printed anything.
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Every command exits quietly when its reader has gone (`| head`).
#[test]
fn every_command_exits_quietly_into_a_closed_pipe() {
    let server = LevServer::start("epipe");
    let q = server.create("s-1", text("Which branch?"));
    server.create("s-1", choice("Which db?", &["SQLite", "PostgreSQL"]));
    server.create("s-1", shell(r#"["ls"]"#));
    let id = q.id().to_owned();
    for args in [
        vec!["ls", "--all"],
        vec!["ls", "--all", "--json"],
        vec!["show", &id],
        vec!["show", &id, "--json"],
        vec!["audit"],
        vec!["audit", "--json"],
        vec!["token", "ls"],
        vec!["keys"],
        vec!["grants"],
        vec!["policy", "example"],
        vec!["--help"],
        vec!["ls", "--help"],
    ] {
        let (code, stderr) = into_closed_pipe(&server, &args);
        assert_eq!(code, Some(0), "lev {args:?} into a closed pipe:\n{stderr}");
        assert!(
            !stderr.contains("panicked") && !stderr.contains("pipe"),
            "lev {args:?}:\n{stderr}"
        );
    }
}
