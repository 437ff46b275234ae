//! A deadline holds whatever the server does: against a server that never
//! answers, one that trickles its answer byte by byte and one that closes
//! mid-answer, `wait_for_answer`, `ask` and a `Gatekeeper` with a timeout
//! return by their deadline (and the two seconds they allow past it), never
//! at the 60 s of an ordinary call.

use std::time::{Duration, Instant};

use lev_client::Client;
use lev_protocol::{InteractionKind, InteractionRequest};
use lev_test_support::{Stall, Stalling};

const STALLS: [Stall; 4] = [
    Stall::Silent,
    Stall::TrickleBody,
    Stall::TrickleHeaders,
    Stall::CloseMidResponse,
];

/// The deadline, the two seconds past it, and room for a loaded machine.
const WITHIN: Duration = Duration::from_secs(1 + 2 + 3);

#[tokio::test]
async fn wait_for_answer_ends_by_its_deadline_whatever_the_server_does() {
    for stall in STALLS {
        let server = Stalling::start(stall).unwrap();
        let client = Client::new(server.url(), Some("lev_x".into())).unwrap();
        let started = Instant::now();
        let result = client
            .wait_for_answer("ir_x", Some(Duration::from_secs(1)))
            .await;
        let took = started.elapsed();
        assert!(result.is_err(), "{stall:?}: {result:?}");
        assert!(took < WITHIN, "{stall:?}: returned after {took:?}");
    }
}

#[tokio::test]
async fn ask_ends_by_its_deadline_whatever_the_server_does() {
    for stall in STALLS {
        let server = Stalling::start(stall).unwrap();
        let client = Client::new(server.url(), Some("lev_x".into())).unwrap();
        let request = InteractionRequest::new(
            "s-1",
            InteractionKind::FreeText {
                prompt: "still there?".into(),
            },
        );
        let started = Instant::now();
        let result = client.ask(&request, Some(Duration::from_secs(1))).await;
        let took = started.elapsed();
        assert!(result.is_err(), "{stall:?}: {result:?}");
        assert!(took < WITHIN, "{stall:?}: returned after {took:?}");
    }
}

#[tokio::test]
async fn a_gatekeeper_with_a_timeout_is_not_held_by_the_gate_call() {
    use lev_client::gate::{Gatekeeper, ToolCall};
    for stall in STALLS {
        let server = Stalling::start(stall).unwrap();
        let client = Client::new(server.url(), Some("lev_x".into())).unwrap();
        let gatekeeper = Gatekeeper::new(client, lev_approval::TrustedKeys::new());
        let call = ToolCall {
            timeout: Some(Duration::from_secs(1)),
            ..ToolCall::new("s-1", "call-1", "shell", r#"{"argv":["ls"]}"#)
        };
        let started = Instant::now();
        let result = gatekeeper.decide(&call).await;
        let took = started.elapsed();
        assert!(result.is_err(), "{stall:?}: {result:?}");
        assert!(took < WITHIN, "{stall:?}: returned after {took:?}");
    }
}
