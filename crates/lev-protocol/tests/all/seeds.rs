//! The rules the seed documents state (`seeds/interaction-response.txt`,
//! `seeds/operator-client-msg.txt`).

use lev_protocol::validate::validate_response;
use lev_protocol::{
    ApprovalScope, ClientMsg, InboundPart, InteractionKind, InteractionRequest,
    InteractionResponse, OnTimeout,
};
use serde_json::json;

const SCOPES: [ApprovalScope; 3] = [
    ApprovalScope::Once,
    ApprovalScope::Session,
    ApprovalScope::Always,
];

fn tool_approval() -> InteractionRequest {
    InteractionRequest {
        id: Some("ir_1".to_owned()),
        ..InteractionRequest::new(
            "s-1",
            InteractionKind::ToolApproval {
                tool_name: "shell".to_owned(),
                args_json: r#"{"cmd":"ls"}"#.to_owned(),
                missing_capabilities: vec![],
                sandbox_mode: String::new(),
                options: vec![],
            },
        )
    }
}

#[test]
fn deny_with_feedback_trims_and_whitespace_is_the_plain_deny() {
    let cases: &[(&str, Option<&str>)] = &[
        ("use rg instead", Some("use rg instead")),
        ("  use rg instead \n", Some("use rg instead")),
        ("\tline one\nline two\t", Some("line one\nline two")),
        ("\u{3000}全角\u{a0}", Some("全角")),
        ("", None),
        (" ", None),
        ("\t\r\n ", None),
        ("\u{a0}\u{2003}\u{3000}", None),
    ];
    for &(input, expected) in cases {
        let r = InteractionResponse::<InboundPart>::deny_with_feedback("ir_1", input);
        assert_eq!(r.feedback.as_deref(), expected, "input {input:?}");
        assert_eq!(r.deny_feedback(), expected, "input {input:?}");
        assert_eq!(r.approved, Some(false), "input {input:?}");
        assert!(!r.is_grant());
        assert_eq!(r.request_id, "ir_1");
        assert_eq!(r.value, None);
        assert_eq!(r.choice_index, None);
        assert!(r.parts.is_empty());
        assert_eq!(r.modified_args_json, None);
    }
    // All-whitespace feedback is exactly the plain deny.
    assert_eq!(
        InteractionResponse::<InboundPart>::deny_with_feedback("ir_1", " \n "),
        InteractionResponse::approval("ir_1", false, ApprovalScope::Once)
    );
}

#[test]
fn deny_feedback_is_read_on_a_deny_only() {
    // (approved, feedback as sent, deny_feedback())
    let cases: &[(Option<bool>, Option<&str>, Option<&str>)] = &[
        (Some(false), Some("try staging"), Some("try staging")),
        (Some(false), Some("  try staging\n"), Some("try staging")),
        (Some(false), Some("   "), None),
        (Some(false), Some(""), None),
        (Some(false), None, None),
        (Some(true), Some("try staging"), None),
        (Some(true), None, None),
        (None, Some("try staging"), None),
        (None, None, None),
    ];
    for &(approved, feedback, expected) in cases {
        let r = InteractionResponse::<InboundPart> {
            approved,
            feedback: feedback.map(str::to_owned),
            ..InteractionResponse::text("ir_1", "x")
        };
        assert_eq!(
            r.deny_feedback(),
            expected,
            "approved {approved:?}, feedback {feedback:?}"
        );
    }
}

#[test]
fn approval_false_with_any_scope_is_a_valid_deny() {
    for scope in SCOPES {
        let r = InteractionResponse::<InboundPart>::approval("ir_1", false, scope);
        let checked = validate_response(&tool_approval(), r)
            .unwrap_or_else(|e| panic!("approval(id, false, {scope:?}) refused: {e}"));
        assert_eq!(checked.approved, Some(false));
        // The scope means nothing on a deny, and is dropped.
        assert_eq!(checked.scope, None, "{scope:?}");
        assert_eq!(checked.deny_feedback(), None);
    }
}

#[test]
fn approval_true_with_any_scope_is_a_valid_grant() {
    for scope in SCOPES {
        let r = InteractionResponse::<InboundPart>::approval("ir_1", true, scope);
        assert!(r.is_grant());
        let checked = validate_response(&tool_approval(), r.clone())
            .unwrap_or_else(|e| panic!("approval(id, true, {scope:?}) refused: {e}"));
        assert_eq!(checked, r);
    }
}

#[test]
fn deny_with_feedback_validates_and_keeps_its_feedback() {
    let r = InteractionResponse::<InboundPart>::deny_with_feedback("ir_1", "  use rg  ");
    let checked = validate_response(&tool_approval(), r).unwrap();
    assert_eq!(checked.deny_feedback(), Some("use rg"));
    assert_eq!(checked.feedback.as_deref(), Some("use rg"));
}

#[test]
fn builders_set_only_their_fields() {
    let text = InteractionResponse::<InboundPart>::text("ir_1", "hello");
    assert_eq!(
        serde_json::to_value(&text).unwrap(),
        json!({"request_id": "ir_1", "value": "hello"})
    );
    let choice = InteractionResponse::<InboundPart>::choice("ir_1", 3);
    assert_eq!(
        serde_json::to_value(&choice).unwrap(),
        json!({"request_id": "ir_1", "choice_index": 3})
    );
    let approval =
        InteractionResponse::<InboundPart>::approval("ir_1", true, ApprovalScope::Always);
    assert_eq!(
        serde_json::to_value(&approval).unwrap(),
        json!({"request_id": "ir_1", "approved": true, "scope": "always"})
    );
    let part = InboundPart {
        name: "notes.md".to_owned(),
        media_type: "text/markdown".to_owned(),
        data: "aGk=".to_owned(),
    };
    let with_parts = text.clone().with_parts(vec![part.clone()]);
    assert_eq!(with_parts.parts, vec![part]);
    assert_eq!(with_parts.value, text.value);
}

#[test]
fn approval_scope_wire_forms() {
    for (scope, wire, grant) in [
        (ApprovalScope::Once, "once", false),
        (ApprovalScope::Session, "session", true),
        (ApprovalScope::Always, "always", true),
    ] {
        assert_eq!(scope.as_str(), wire);
        assert_eq!(serde_json::to_value(scope).unwrap(), json!(wire));
        assert_eq!(scope.is_grant_scope(), grant, "{wire}");
    }
    assert_eq!(ApprovalScope::default(), ApprovalScope::Once);
}

#[test]
fn spawn_ack_ok_defaults_to_true() {
    let cases = [
        (
            json!({"type": "spawn_ack", "req_id": "r", "value": 1}),
            true,
        ),
        (
            json!({"type": "spawn_ack", "req_id": "r", "value": {}}),
            true,
        ),
        (
            json!({"type": "spawn_ack", "req_id": "r", "value": 1, "ok": false}),
            false,
        ),
        (
            json!({"type": "spawn_ack", "req_id": "r", "value": 1, "ok": true}),
            true,
        ),
    ];
    for (msg, ok) in cases {
        let parsed: ClientMsg = serde_json::from_value(msg.clone()).unwrap();
        assert!(
            matches!(parsed, ClientMsg::SpawnAck { ok: o, .. } if o == ok),
            "{msg}"
        );
    }
}

#[test]
fn client_msg_tags_and_req_ids() {
    let cases = [
        (
            json!({"type": "answer", "req_id": "a", "value": null}),
            "answer",
            "a",
        ),
        (
            json!({"type": "hook_ack", "req_id": "b", "ok": true}),
            "hook_ack",
            "b",
        ),
        (
            json!({"type": "spawn_ack", "req_id": "c", "value": {}}),
            "spawn_ack",
            "c",
        ),
    ];
    for (msg, tag, req_id) in cases {
        let parsed: ClientMsg = serde_json::from_value(msg.clone()).unwrap();
        assert_eq!(parsed.type_name(), tag, "{msg}");
        assert_eq!(parsed.req_id(), req_id, "{msg}");
        // What it writes carries the same tag.
        assert_eq!(serde_json::to_value(&parsed).unwrap()["type"], json!(tag));
    }
}

#[test]
fn client_msgs_that_are_not_replies_are_refused() {
    for bad in [
        json!({"type": "unknown", "req_id": "a"}),
        json!({"req_id": "a", "value": 1}),
        json!({"type": "hook_ack", "req_id": "a"}),
        json!({"type": "answer", "value": 1}),
        json!({"type": "spawn_ack", "value": {}}),
    ] {
        assert!(
            serde_json::from_value::<ClientMsg>(bad.clone()).is_err(),
            "{bad}"
        );
    }
}

#[test]
fn on_timeout_defaults_and_wire_forms() {
    let kinds = [
        (
            InteractionKind::FreeText { prompt: "?".into() },
            OnTimeout::Cancel,
        ),
        (
            InteractionKind::MultipleChoice {
                prompt: "?".into(),
                options: vec!["a".into()],
            },
            OnTimeout::Cancel,
        ),
        (tool_approval().kind, OnTimeout::Deny),
        (
            InteractionKind::InteractionPoints {
                prompt: "?".into(),
                points: vec![],
            },
            OnTimeout::Cancel,
        ),
    ];
    for (kind, default) in kinds {
        let name = kind.type_name();
        let mut req = InteractionRequest::new("s-1", kind);
        assert_eq!(req.effective_on_timeout(), default, "{name}");
        req.on_timeout = Some(OnTimeout::Choice(0));
        assert_eq!(req.effective_on_timeout(), OnTimeout::Choice(0), "{name}");
    }
    for (value, wire) in [
        (OnTimeout::Deny, json!("deny")),
        (OnTimeout::Cancel, json!("cancel")),
        (OnTimeout::Choice(2), json!({"choice": 2})),
    ] {
        assert_eq!(serde_json::to_value(&value).unwrap(), wire);
        assert_eq!(serde_json::from_value::<OnTimeout>(wire).unwrap(), value);
    }
    for bad in [
        json!("Deny"),
        json!("expire"),
        json!(2),
        json!({"choice": -1}),
        json!({}),
    ] {
        assert!(
            serde_json::from_value::<OnTimeout>(bad.clone()).is_err(),
            "{bad}"
        );
    }
}

#[test]
fn route_defaults_to_human() {
    let mut req = InteractionRequest::new("s-1", InteractionKind::FreeText { prompt: "?".into() });
    assert_eq!(req.effective_route(), vec!["human".to_owned()]);
    assert!(!req.routes_to_operator_first());
    req.route = Some(vec!["operator".into(), "human".into()]);
    assert!(req.routes_to_operator_first());
    req.route = Some(vec!["human".into(), "operator".into()]);
    assert!(!req.routes_to_operator_first());
}
