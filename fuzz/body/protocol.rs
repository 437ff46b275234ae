//! The body of the `protocol` fuzz target, shared with lev-protocol's smoke
//! test (`crates/lev-protocol/tests/all/fuzz_smoke.rs`), which runs it on
//! stable Rust.
//!
//! Untrusted bytes reach these decoders of lev-protocol: the strict JSON
//! check (duplicate keys, nesting), an operator's WebSocket frame
//! (`ClientMsg`), a Claude Code hook event (`HookEvent::parse`), an
//! interaction request and its validation, and an answer validated against
//! each kind of request. None may panic; what validates must keep the rules
//! the validators promise.

use lev_protocol::claude_code::HookEvent;
use lev_protocol::json::check_strict_json;
use lev_protocol::operator::ClientMsg;
use lev_protocol::validate::{Limits, validate_request, validate_response};
use lev_protocol::{InboundPart, InteractionKind, InteractionRequest, InteractionResponse, Point};

/// What one run reached, so a smoke test can tell that its inputs go deep.
#[derive(Debug, Clone, Copy, Default)]
pub struct Reached {
    /// The bytes were strict JSON.
    pub strict_json: bool,
    /// The bytes were an operator frame.
    pub client_msg: bool,
    /// The bytes were a hook event lev answers.
    pub hook_event: bool,
    /// The bytes were a valid interaction request.
    pub valid_request: bool,
    /// The bytes were a valid answer to one of the requests below.
    pub valid_response: bool,
}

/// One request of each kind, for answers to be validated against.
fn requests() -> Vec<InteractionRequest> {
    let kinds = [
        InteractionKind::FreeText {
            prompt: "why?".into(),
        },
        InteractionKind::MultipleChoice {
            prompt: "which?".into(),
            options: vec!["a".into(), "b".into(), "c".into()],
        },
        InteractionKind::ToolApproval {
            tool_name: "shell".into(),
            args_json: r#"{"argv":["git","push"]}"#.into(),
            missing_capabilities: vec!["net".into()],
            sandbox_mode: "read-only".into(),
            options: vec![],
        },
        InteractionKind::InteractionPoints {
            prompt: "review".into(),
            points: vec![Point {
                id: "p1".into(),
                text: "one".into(),
            }],
        },
    ];
    kinds
        .into_iter()
        .map(|kind| {
            let mut r = InteractionRequest::new("s-1", kind);
            r.id = Some("ir_1".into());
            r
        })
        .collect()
}

/// Run every decoder on `data`.
pub fn run(data: &[u8]) -> Reached {
    let mut reached = Reached::default();
    if let Ok(text) = std::str::from_utf8(data) {
        reached.strict_json = check_strict_json(text).is_ok();
    }
    reached.client_msg = serde_json::from_slice::<ClientMsg>(data).is_ok();
    reached.hook_event = HookEvent::parse(data).is_ok();
    if let Ok(req) = serde_json::from_slice::<InteractionRequest>(data) {
        reached.valid_request = validate_request(&req, &Limits::default()).is_ok();
    }
    if let Ok(resp) = serde_json::from_slice::<InteractionResponse<InboundPart>>(data) {
        for req in requests() {
            if let Ok(valid) = validate_response(&req, resp.clone()) {
                reached.valid_response = true;
                // A validated answer names its request, and feedback never
                // rides on a grant.
                assert_eq!(valid.request_id, "ir_1");
                assert!(!(valid.approved == Some(true) && valid.feedback.is_some()));
            }
        }
    }
    reached
}
