//! `lev ask`: a script asks, a person answers through the API; exit 0, 3, 4.

use std::time::Duration;

use lev_client::ListQuery;
use lev_protocol::{InteractionResponse, InteractionStatus};

use crate::client_env::{LevServer, assert_code, block_on};

/// Answer the first pending question of `session` with `answer(id)`, from
/// another thread, as a person would.
pub(crate) fn answer_when_asked(
    server: &LevServer,
    session: &'static str,
    answer: impl Fn(&str) -> InteractionResponse + Send + 'static,
) -> std::thread::JoinHandle<()> {
    let client = server.client();
    std::thread::spawn(move || {
        block_on(async {
            for _ in 0..500 {
                let page = client
                    .list_interactions(&ListQuery {
                        session_id: Some(session.into()),
                        ..Default::default()
                    })
                    .await
                    .unwrap();
                if let Some(view) = page.items.first() {
                    let id = view.request.id().to_owned();
                    client.respond(&id, &answer(&id)).await.unwrap();
                    return;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            panic!("nothing was asked in session {session}");
        });
    })
}

#[test]
fn ask_prints_the_answer_and_exits_0() {
    let server = LevServer::start("ask-ok");
    let person = answer_when_asked(&server, "ask-text", |id| {
        InteractionResponse::text(id, "deploy main\nafter lunch")
    });
    let run = server.lev(&[
        "ask",
        "Which branch?",
        "--session",
        "ask-text",
        "--timeout",
        "60",
    ]);
    person.join().unwrap();
    assert_code(&run, 0);
    assert_eq!(run.stdout, "deploy main\nafter lunch\n");
    // Off a terminal: one plain line on stderr, no spinner frames.
    assert!(
        run.stderr.starts_with("lev: waiting for an answer to ir_"),
        "{}",
        run.stderr
    );
    assert!(
        !run.stderr.contains('\r') && !run.stderr.contains('\u{1b}'),
        "{:?}",
        run.stderr
    );

    let person = answer_when_asked(&server, "ask-choice", |id| {
        InteractionResponse::choice(id, 1)
    });
    let run = server.lev(&[
        "ask",
        "Ship it?",
        "--choice",
        "yes",
        "--choice",
        "no",
        "--session",
        "ask-choice",
    ]);
    person.join().unwrap();
    assert_code(&run, 0);
    assert_eq!(run.stdout, "no\n");

    // The default session is `cli`, and --json gives the whole outcome.
    let person = answer_when_asked(&server, "cli", |id| InteractionResponse::text(id, "ok"));
    let run = server.lev(&["ask", "Ready?", "--json"]);
    person.join().unwrap();
    assert_code(&run, 0);
    let json = run.json();
    assert_eq!(json["status"], "answered");
    assert_eq!(json["text"], "ok");
    assert_eq!(json["response"]["value"], "ok");
}

#[test]
fn ask_times_out_with_4_and_declines_with_3() {
    let server = LevServer::start("ask-timeout");
    let run = server.lev(&["ask", "Anyone?", "--session", "ask-t", "--timeout", "1"]);
    assert_code(&run, 4);
    assert_eq!(run.stdout, "");
    assert!(
        run.stderr.contains("cancelled before anyone answered"),
        "{}",
        run.stderr
    );
    let items = block_on(
        server
            .client()
            .list_interactions(&lev_client::ListQuery::all()),
    )
    .unwrap()
    .items;
    assert_eq!(items[0].request.status, InteractionStatus::Cancelled);

    let run = server.lev(&[
        "ask",
        "Go?",
        "--session",
        "ask-d",
        "--timeout",
        "1",
        "--on-timeout",
        "deny",
    ]);
    assert_code(&run, 3);
    assert!(run.stderr.contains("counts as declined"), "{}", run.stderr);

    // Cancelled by the worker side while waiting: 4 as well.
    let client = server.client();
    let canceller = std::thread::spawn(move || {
        block_on(async {
            for _ in 0..500 {
                let page = client
                    .list_interactions(&ListQuery {
                        session_id: Some("ask-c".into()),
                        ..Default::default()
                    })
                    .await
                    .unwrap();
                if let Some(view) = page.items.first() {
                    client.cancel(view.request.id()).await.unwrap();
                    return;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        });
    });
    let run = server.lev(&["ask", "Hello?", "--session", "ask-c"]);
    canceller.join().unwrap();
    assert_code(&run, 4);

    // Usage errors exit 2.
    let run = server.lev(&["ask", "x", "--timeout", "0"]);
    assert_code(&run, 2);
    let run = server.lev(&["ask", "x", "--on-timeout", "deny"]);
    assert_code(&run, 2);
}

/// SIGHUP (the terminal gone) and SIGTERM end a waiting `lev ask` as Ctrl-C
/// does: the question is cancelled, not left for someone to answer after
/// nobody waits for it (exit 130).
#[test]
fn a_hangup_or_sigterm_cancels_the_question() {
    let server = LevServer::start("ask-hup");
    for (signal, session) in [("HUP", "ask-hup"), ("TERM", "ask-term")] {
        let child = std::process::Command::new(env!("CARGO_BIN_EXE_lev"))
            .args(["ask", "Still there?", "--session", session])
            .env("LEV_URL", &server.url)
            .env("LEV_TOKEN", &server.admin)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let client = server.client();
        let id = block_on(async {
            for _ in 0..500 {
                let page = client
                    .list_interactions(&ListQuery {
                        session_id: Some(session.into()),
                        ..Default::default()
                    })
                    .await
                    .unwrap();
                if let Some(view) = page.items.first() {
                    return view.request.id().to_owned();
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            panic!("nothing was asked in session {session}");
        });
        // Past the point where it waits (its line on stderr).
        std::thread::sleep(Duration::from_millis(300));
        let sent = std::process::Command::new("kill")
            .args([&format!("-{signal}"), &child.id().to_string()])
            .status()
            .unwrap();
        assert!(sent.success());
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(130), "SIG{signal}: {stderr}");
        assert!(
            stderr.contains("interrupted; cancelled"),
            "SIG{signal}: {stderr}"
        );
        let status = block_on(client.get_interaction(&id))
            .unwrap()
            .request
            .status;
        assert_eq!(status, InteractionStatus::Cancelled, "SIG{signal}");
    }
}
