//! `lev demo`: it prints the dashboard URL and the export lines, its agent
//! asks, and each answer comes back as the text its model reads.

use std::io::{BufRead as _, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use lev_client::{Client, ListQuery};
use lev_protocol::{InteractionKind, InteractionResponse};

use crate::client_env::block_on;

#[test]
fn demo_agent_asks_and_prints_what_its_model_reads() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_lev"))
        .args(["demo", "--listen", "127.0.0.1:0", "--exit-after", "2"])
        .env_remove("NO_COLOR")
        .env_remove("CLICOLOR_FORCE")
        // `lev` is not on this PATH, as after `cargo run`.
        .env("PATH", "/usr/bin:/bin")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start lev demo");
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let mut out = String::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    let (url, token) = loop {
        let line = rx
            .recv_timeout(deadline.saturating_duration_since(Instant::now()))
            .unwrap_or_else(|_| panic!("no export line in:\n{out}"));
        out.push_str(&line);
        out.push('\n');
        if let Some(rest) = line.trim().strip_prefix("export LEV_URL=") {
            let (url, token) = rest.split_once(" LEV_TOKEN=").unwrap();
            break (url.to_owned(), token.to_owned());
        }
    };
    assert!(
        out.contains(&format!("dashboard   {url}/#token={token}")),
        "{out}"
    );
    // The next lines are commands to paste: they work as printed, in a shell
    // where `lev` is not on PATH.
    let export = format!("export LEV_URL={url} LEV_TOKEN={token}");
    let ls = rx.recv_timeout(Duration::from_secs(10)).unwrap();
    out.push_str(&ls);
    out.push('\n');
    let shell = Command::new("sh")
        .arg("-c")
        .arg(format!("{export}\n{}", ls.trim()))
        .env("PATH", "/usr/bin:/bin")
        .env_remove("LEV_URL")
        .env_remove("LEV_TOKEN")
        .output()
        .unwrap();
    assert!(
        shell.status.success(),
        "`{}` as printed: {}\n{out}",
        ls.trim(),
        String::from_utf8_lossy(&shell.stderr)
    );
    assert!(ls.trim().ends_with(" ls"), "{out}");

    // Answer the first two questions as a person would.
    let client = Client::new(&url, Some(token)).unwrap();
    block_on(async {
        let mut answered = 0;
        while answered < 2 {
            let page = client
                .list_interactions(&ListQuery::default())
                .await
                .unwrap();
            for view in page.items {
                let id = view.request.id().to_owned();
                let response = match view.request.request.kind {
                    InteractionKind::ToolApproval { .. } => {
                        InteractionResponse::deny_with_feedback(&id, "not today")
                    }
                    InteractionKind::MultipleChoice { .. } => InteractionResponse::choice(&id, 0),
                    _ => InteractionResponse::text(&id, "answer from the test"),
                };
                if client.respond(&id, &response).await.is_ok() {
                    answered += 1;
                }
                if answered == 2 {
                    break;
                }
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    });
    let status = child.wait().unwrap();
    while let Ok(line) = rx.recv_timeout(Duration::from_secs(5)) {
        out.push_str(&line);
        out.push('\n');
    }
    assert!(status.success(), "{out}");
    assert!(out.contains("the model reads:"), "{out}");
    assert!(out.contains("answer from the test"), "{out}");
    assert!(out.contains("Feedback: not today"), "{out}");
    assert!(out.contains("lev demo: stopped; removed"), "{out}");
}

/// With `lev` on PATH (this very binary), the demo prints plain `lev`.
#[test]
fn demo_prints_plain_lev_when_it_is_on_path() {
    let dir = crate::support::Scratch::new("demo-path");
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_lev"), dir.path("lev")).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_lev"))
        .args(["demo", "--listen", "127.0.0.1:0", "--exit-after", "0"])
        .env("PATH", format!("{}:/usr/bin:/bin", dir.path("").display()))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let mut out = String::new();
    for line in BufReader::new(stdout).lines().map_while(Result::ok) {
        out.push_str(&line);
        out.push('\n');
        if line.contains("lev demo: stopped") {
            break;
        }
    }
    let _ = child.wait();
    assert!(out.contains("\n  lev ls\n"), "{out}");
    assert!(!out.contains("is not on your PATH"), "{out}");
}

/// The demo's agent goes through the gate: the policy allows `git status`
/// and denies `rm -rf`, and a call approved for the session comes back
/// allowed by the grant, without a question.
#[test]
fn demo_agent_goes_through_the_gate() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_lev"))
        .args(["demo", "--listen", "127.0.0.1:0", "--exit-after", "12"])
        .env("NO_COLOR", "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start lev demo");
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let mut out = String::new();
    let (url, token) = loop {
        let line = rx.recv_timeout(Duration::from_secs(60)).unwrap();
        out.push_str(&line);
        out.push('\n');
        if let Some(rest) = line.trim().strip_prefix("export LEV_URL=") {
            let (url, token) = rest.split_once(" LEV_TOKEN=").unwrap();
            break (url.to_owned(), token.to_owned());
        }
    };
    let client = Client::new(&url, Some(token)).unwrap();
    let deadline = Instant::now() + Duration::from_secs(90);
    block_on(async {
        loop {
            if let Ok(Some(status)) = child.try_wait() {
                assert!(status.success(), "{out}");
                break;
            }
            assert!(Instant::now() < deadline, "the demo did not finish:\n{out}");
            // The demo may stop (and its server with it) between two looks.
            let Ok(page) = client.list_interactions(&ListQuery::default()).await else {
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            };
            for view in page.items {
                let id = view.request.id().to_owned();
                let response = match view.request.request.kind {
                    InteractionKind::ToolApproval { .. } => InteractionResponse::approval(
                        &id,
                        true,
                        lev_protocol::ApprovalScope::Session,
                    ),
                    InteractionKind::MultipleChoice { .. } => InteractionResponse::choice(&id, 0),
                    _ => InteractionResponse::text(&id, "ok"),
                };
                let _ = client.respond(&id, &response).await;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    });
    while let Ok(line) = rx.recv_timeout(Duration::from_secs(5)) {
        out.push_str(&line);
        out.push('\n');
    }
    assert!(
        out.contains("runs shell git status --short: allowed by the policy"),
        "{out}"
    );
    assert!(
        out.contains("does not run shell rm -rf target/ node_modules/.cache: denied by the policy"),
        "{out}"
    );
    assert!(
        out.contains(
            "runs shell git push --force-with-lease origin fix/login-redirect: allowed by a grant"
        ),
        "{out}"
    );
}

/// The terminal closed (SIGHUP), like Ctrl-C and SIGTERM, stops the demo and
/// deletes its data dir, admin token included.
#[test]
fn demo_stops_and_deletes_its_data_on_a_hangup() {
    for signal in ["HUP", "TERM"] {
        let mut child = Command::new(env!("CARGO_BIN_EXE_lev"))
            .args(["demo", "--listen", "127.0.0.1:0"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let mut lines = BufReader::new(stdout).lines().map_while(Result::ok);
        for line in lines.by_ref() {
            if line.contains("Ctrl-C stops the demo") {
                break;
            }
        }
        let sent = Command::new("kill")
            .args([&format!("-{signal}"), &child.id().to_string()])
            .status()
            .unwrap();
        assert!(sent.success());
        let status = child.wait().unwrap();
        let rest: Vec<String> = lines.collect();
        let removed = rest
            .iter()
            .find_map(|l| l.strip_prefix("lev demo: stopped; removed "))
            .unwrap_or_else(|| panic!("SIG{signal}: {status:?} {rest:?}"));
        assert!(status.success(), "SIG{signal}: {status:?}");
        assert!(
            !std::path::Path::new(removed).exists(),
            "SIG{signal}: {removed} is still there"
        );
    }
}
