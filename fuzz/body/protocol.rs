//! The body of the `protocol` fuzz target, shared with lev-protocol's smoke
//! test (`crates/lev-protocol/tests/all/fuzz_smoke.rs`), which runs it on
//! stable Rust.
//!
//! Untrusted bytes reach these decoders of lev-protocol: the strict JSON
//! check (duplicate keys, nesting), an operator's WebSocket frame
//! (`ClientMsg`), a Claude Code hook event (`HookEvent::parse`), an
//! interaction request and its validation (a form's schema against the
//! subset), and an answer validated against each kind of request (a form's
//! fields against its schema). None may panic; what validates must keep the rules
//! the validators promise.

use lev_protocol::claude_code::HookEvent;
use lev_protocol::form::{FormSchema, check_answer, parse_schema};
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
    let form = serde_json::json!({"type": "object", "properties": {
        "name": {"type": "string", "minLength": 1, "maxLength": 8},
        "mail": {"type": "string", "format": "email"},
        "day": {"type": "string", "format": "date-time"},
        "n": {"type": "integer", "minimum": 0, "maximum": 9},
        "x": {"type": "number"},
        "ok": {"type": "boolean"},
        "pick": {"type": "string", "enum": ["a", "b"]}
    }, "required": ["name"]});
    let form = serde_json::from_value::<FormSchema>(form)
        .ok()
        .map(|schema| InteractionKind::Form {
            prompt: "details".into(),
            schema,
        });
    kinds
        .into_iter()
        .chain(form)
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
        // A form that validates reads, and checks any answer without panicking.
        if reached.valid_request
            && let InteractionKind::Form { schema, .. } = &req.kind
        {
            let form = parse_schema(schema, &Limits::default());
            assert!(form.is_ok(), "a valid form reads");
            if let Ok(form) = form {
                let _ = check_answer(&form, &serde_json::Map::new());
            }
        }
    }
    if let Ok(schema) = serde_json::from_slice::<FormSchema>(data) {
        let _ = parse_schema(&schema, &Limits::default());
    }
    if let Ok(resp) = serde_json::from_slice::<InteractionResponse<InboundPart>>(data) {
        for req in requests() {
            if let Ok(valid) = validate_response(&req, resp.clone()) {
                reached.valid_response = true;
                // A validated answer names its request, and feedback never
                // rides on a grant.
                assert_eq!(valid.request_id, "ir_1");
                assert!(!(valid.approved == Some(true) && valid.feedback.is_some()));
                // A form's answer is its fields, and only a form's.
                assert_eq!(
                    valid.fields.is_some(),
                    matches!(req.kind, InteractionKind::Form { .. })
                );
            }
        }
    }
    reached
}
