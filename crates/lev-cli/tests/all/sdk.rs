//! The Rust SDK (lev-client) against a real `lev serve`: a full
//! create -> answer -> wait cycle, the 409 winner, attachments stored under
//! safe names, the worker's deadline, and the event stream.

use std::time::Duration;

use lev_client::{Outcome, inbound_part};
use lev_protocol::api::{Role, TokenCreate};
use lev_protocol::{ApprovalScope, InteractionRequest, InteractionResponse, InteractionStatus};

use crate::client_env::{LevServer, block_on, shell, text};

#[test]
fn create_answer_wait_cycle_and_tool_result_text() {
    let server = LevServer::start("sdk-cycle");
    let admin = server.client();
    block_on(async {
        let health = admin.health().await.unwrap();
        assert_eq!(health.status, "ok");
        assert!(!admin.keys().await.unwrap().keys.is_empty());

        let worker_secret = admin
            .create_token(&TokenCreate {
                name: "w1".into(),
                role: Role::Worker,
                caller: None,
                sessions: None,
            })
            .await
            .unwrap()
            .token;
        let approver_secret = admin
            .create_token(&TokenCreate {
                name: "alice".into(),
                role: Role::Approver,
                caller: None,
                sessions: None,
            })
            .await
            .unwrap()
            .token;
        let worker = admin.with_token(Some(worker_secret));
        let approver = admin.with_token(Some(approver_secret));

        // A tool approval, denied with feedback while the worker waits.
        let request = InteractionRequest::new("sdk", shell(r#"["rm","-rf","/tmp/x"]"#));
        let ask = tokio::spawn({
            let worker = worker.clone();
            async move { worker.ask(&request, Some(Duration::from_secs(30))).await }
        });
        let id = loop {
            let page = approver
                .list_interactions(&lev_client::ListQuery {
                    session_id: Some("sdk".into()),
                    ..Default::default()
                })
                .await
                .unwrap();
            if let Some(v) = page.items.first() {
                break v.request.id().to_owned();
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        let deny = InteractionResponse::deny_with_feedback(&id, "  use trash-cli instead  ");
        let decided = approver.respond(&id, &deny).await.unwrap();
        assert!(
            decided.approval.is_some(),
            "a decided tool approval is signed"
        );
        let answer = ask.await.unwrap().unwrap();
        assert!(answer.is_denied());
        assert_eq!(
            answer.tool_result_text(None, &[]),
            "The person denied the call to shell; it was not run.\nFeedback: use trash-cli instead"
        );

        // The first answer won: a second one gets 409 with the winner.
        let late = InteractionResponse::approval(&id, true, ApprovalScope::Once);
        let err = approver.respond(&id, &late).await.unwrap_err();
        assert_eq!(err.status(), Some(409));
        assert_eq!(err.code(), Some("already_answered"));
        assert_eq!(err.winner().and_then(|w| w.approved), Some(false));

        // A worker may not answer.
        let created = worker
            .create_interaction(&InteractionRequest::new("sdk", text("notes?")))
            .await
            .unwrap();
        let err = worker
            .respond(created.id(), &InteractionResponse::text(created.id(), "x"))
            .await
            .unwrap_err();
        assert_eq!(err.status(), Some(403), "{err}");

        // An answer with attachments, one with a hostile name, stored safely.
        let parts = vec![
            inbound_part("notes.md", "text/markdown", b"# notes\n"),
            inbound_part("../../.bashrc", "text/plain", b"echo pwned\n"),
        ];
        approver
            .respond(
                created.id(),
                &InteractionResponse::text(created.id(), "here").with_parts(parts),
            )
            .await
            .unwrap();
        let answer = worker
            .wait_for_answer(created.id(), Some(Duration::from_secs(10)))
            .await
            .unwrap();
        let dir = server.dir.path("parts");
        let rendered = worker.tool_result(&answer, None, Some(&dir)).await.unwrap();
        let stored: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(stored.len(), 2, "{stored:?}");
        assert!(
            stored
                .iter()
                .all(|n| !n.starts_with('.') && !n.contains('/'))
        );
        assert_eq!(std::fs::read(dir.join("notes.md")).unwrap(), b"# notes\n");
        assert!(
            rendered.starts_with("here\n\nAttached files:\n- "),
            "{rendered}"
        );
        assert!(
            rendered.contains(&format!(
                "{} (text/markdown, 8 bytes)",
                dir.join("notes.md").display()
            )),
            "{rendered}"
        );

        // The worker's own deadline cancels the question.
        let request = InteractionRequest::new("sdk", text("anyone?"));
        let answer = worker
            .ask(&request, Some(Duration::from_secs(1)))
            .await
            .unwrap();
        assert!(matches!(answer.outcome, Outcome::TimedOut { .. }));
        let view = worker
            .get_interaction(answer.interaction.id())
            .await
            .unwrap();
        assert_eq!(view.request.status, InteractionStatus::Cancelled);
    });
}

#[test]
fn events_stream_sees_creates_and_answers() {
    let server = LevServer::start("sdk-events");
    let client = server.client();
    block_on(async {
        let mut events = client.events(None).await.unwrap();
        let created = client
            .create_interaction(&InteractionRequest::new("ev", text("hi")))
            .await
            .unwrap();
        client
            .respond(created.id(), &InteractionResponse::text(created.id(), "yo"))
            .await
            .unwrap();
        let mut seen = Vec::new();
        while seen.len() < 2 {
            let event = tokio::time::timeout(Duration::from_secs(10), events.next())
                .await
                .expect("an event in time")
                .unwrap()
                .expect("the stream stays open");
            if event.event.starts_with("interaction.") {
                assert!(event.id.is_some());
                assert!(event.json().is_ok());
                seen.push(event.event);
            }
        }
        assert_eq!(seen, ["interaction.created", "interaction.answered"]);
    });
}

#[test]
fn unreachable_server_and_bad_token_say_so() {
    let server = LevServer::start("sdk-errors");
    let bad = server.client().with_token(Some("lev_not_a_token".into()));
    block_on(async {
        let err = bad
            .list_interactions(&Default::default())
            .await
            .unwrap_err();
        assert_eq!(err.status(), Some(401));
        let nobody = lev_client::Client::new("http://127.0.0.1:9", None).unwrap();
        let err = nobody.health().await.unwrap_err();
        assert!(err.is_connect(), "{err}");
        assert!(err.to_string().contains("could not connect"), "{err}");
    });
}
