//! `validate_request` and `validate_response` against SPEC section 2 ("What a
//! response may carry, by request kind") and section 9 (limits).

use lev_protocol::validate::{validate_request, validate_response};
use lev_protocol::{
    InteractionKind, InteractionRequest, InteractionResponse, Limits, OnTimeout, Point,
    ValidationError, ValidationErrorKind,
};
use serde_json::{Value, json};

const KIB: usize = 1024;

// ---------------------------------------------------------------- requests

fn request(kind: InteractionKind) -> InteractionRequest {
    InteractionRequest {
        id: Some("ir_1".to_owned()),
        ..InteractionRequest::new("s-1", kind)
    }
}

fn free_text() -> InteractionRequest {
    request(InteractionKind::FreeText {
        prompt: "Which branch?".to_owned(),
    })
}

fn multiple_choice(options: usize) -> InteractionRequest {
    request(InteractionKind::MultipleChoice {
        prompt: "Which one?".to_owned(),
        options: (0..options).map(|i| format!("option {i}")).collect(),
    })
}

fn tool_approval(options: usize) -> InteractionRequest {
    request(InteractionKind::ToolApproval {
        tool_name: "shell".to_owned(),
        args_json: r#"{"cmd":"ls"}"#.to_owned(),
        missing_capabilities: vec!["net".to_owned()],
        sandbox_mode: "workspace-write".to_owned(),
        options: (0..options).map(|i| format!("option {i}")).collect(),
    })
}

fn interaction_points(points: usize) -> InteractionRequest {
    request(InteractionKind::InteractionPoints {
        prompt: "Review these".to_owned(),
        points: (0..points)
            .map(|i| Point {
                id: format!("p{i}"),
                text: format!("point {i}"),
            })
            .collect(),
    })
}

/// `base` changed by `edit`.
fn with(
    mut base: InteractionRequest,
    edit: impl FnOnce(&mut InteractionRequest),
) -> InteractionRequest {
    edit(&mut base);
    base
}

/// `base` with its kind changed by `edit`.
fn with_kind(
    base: InteractionRequest,
    edit: impl FnOnce(&mut InteractionKind),
) -> InteractionRequest {
    with(base, |r| edit(&mut r.kind))
}

// ---------------------------------------------------------------- outcomes

/// What a validation should end in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expect {
    Ok,
    /// 422, naming this field.
    Invalid(&'static str),
    /// 413, naming this field.
    TooLarge(&'static str),
}

fn outcome<T>(result: &Result<T, ValidationError>) -> Result<(), (String, ValidationErrorKind)> {
    match result {
        Ok(_) => Ok(()),
        Err(e) => Err((e.field.clone(), e.kind)),
    }
}

fn expected(expect: Expect) -> Result<(), (String, ValidationErrorKind)> {
    match expect {
        Expect::Ok => Ok(()),
        Expect::Invalid(f) => Err((f.to_owned(), ValidationErrorKind::Invalid)),
        Expect::TooLarge(f) => Err((f.to_owned(), ValidationErrorKind::TooLarge)),
    }
}

/// Run every case; report all mismatches at once.
fn check_all<T>(cases: Vec<(&str, Result<T, ValidationError>, Expect)>) {
    let failures: Vec<String> = cases
        .iter()
        .filter(|(_, got, want)| outcome(got) != expected(*want))
        .map(|(name, got, want)| {
            let got = match got {
                Ok(_) => "Ok".to_owned(),
                Err(e) => format!("{:?} on {:?}: {e}", e.kind, e.field),
            };
            format!("{name}: expected {want:?}, got {got}")
        })
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

// ---------------------------------------------------------------- responses

/// Every field an answer may carry besides `request_id`, with a sample value.
fn sample(field: &str) -> Value {
    match field {
        "value" => json!("an answer"),
        "choice_index" => json!(0),
        "approved" => json!(true),
        "scope" => json!("session"),
        "feedback" => json!("do this instead"),
        "parts" => json!([{"name": "a.txt", "media_type": "text/plain", "data": "aGk="}]),
        "modified_args_json" => json!(r#"{"cmd":"ls -la"}"#),
        "injected_context" => json!("context for the model"),
        "reason" => json!("because"),
        "grant_args" => json!({"/cmd": "^ls"}),
        other => panic!("no sample for {other}"),
    }
}

const FIELDS: [&str; 10] = [
    "value",
    "choice_index",
    "approved",
    "scope",
    "feedback",
    "parts",
    "modified_args_json",
    "injected_context",
    "reason",
    "grant_args",
];

/// An answer to `ir_1` made of `fields` (JSON object members).
fn answer(fields: Value) -> InteractionResponse {
    let mut object = json!({"request_id": "ir_1"});
    if let (Some(o), Value::Object(extra)) = (object.as_object_mut(), fields) {
        o.extend(extra);
    }
    serde_json::from_value(object.clone())
        .unwrap_or_else(|e| panic!("{object} is not an answer: {e}"))
}

/// The table of SPEC section 2: for each kind, a request, a minimal valid
/// answer and the fields an answer may carry.
fn kinds() -> Vec<(
    &'static str,
    InteractionRequest,
    Value,
    &'static [&'static str],
)> {
    vec![
        (
            "free_text",
            free_text(),
            json!({"value": "main"}),
            &["value", "parts"],
        ),
        (
            "interaction_points",
            interaction_points(2),
            json!({"value": "looks fine"}),
            &["value", "parts"],
        ),
        (
            "multiple_choice",
            multiple_choice(3),
            json!({"choice_index": 0}),
            &["choice_index"],
        ),
        (
            "tool_approval",
            tool_approval(2),
            json!({"approved": true, "scope": "session"}),
            &[
                "approved",
                "choice_index",
                "scope",
                "feedback",
                "modified_args_json",
                "injected_context",
                "reason",
                "grant_args",
            ],
        ),
    ]
}

#[test]
fn every_forbidden_field_is_named() {
    let mut cases = Vec::new();
    for (kind, req, base, allowed) in kinds() {
        for field in FIELDS.iter().filter(|f| !allowed.contains(f)) {
            let mut body = base.clone();
            body[*field] = sample(field);
            cases.push((
                format!("{kind} + {field}"),
                validate_response(&req, answer(body)),
                Expect::Invalid(field),
            ));
        }
    }
    assert_eq!(cases.len(), 8 + 8 + 9 + 2, "the table of SPEC section 2");
    check_all(
        cases
            .iter()
            .map(|(name, got, want)| (name.as_str(), got.clone(), *want))
            .collect(),
    );
}

#[test]
fn the_error_message_says_what_is_wrong() {
    let err = validate_response(
        &free_text(),
        answer(json!({"value": "x", "approved": true})),
    )
    .unwrap_err();
    assert_eq!(err.field, "approved");
    assert!(err.message.contains("not allowed"), "{err}");
    assert!(err.message.contains("free_text"), "{err}");
    assert!(err.to_string().starts_with("approved: "), "{err}");
}

#[test]
fn required_fields() {
    let mut cases = Vec::new();
    for (kind, req, _, _) in kinds() {
        let required = match kind {
            "free_text" | "interaction_points" => "value",
            "multiple_choice" => "choice_index",
            _ => "approved",
        };
        cases.push((
            kind,
            validate_response(&req, answer(json!({}))),
            Expect::Invalid(required),
        ));
    }
    // A required field is checked before an extra one.
    cases.push((
        "tool_approval answered with text",
        validate_response(&tool_approval(0), answer(json!({"value": "yes"}))),
        Expect::Invalid("approved"),
    ));
    cases.push((
        "free_text answered with a choice",
        validate_response(&free_text(), answer(json!({"choice_index": 0}))),
        Expect::Invalid("value"),
    ));
    check_all(cases);
}

#[test]
fn allowed_answers_are_accepted() {
    let grant_everything = json!({
        "approved": true,
        "scope": "always",
        "choice_index": 1,
        "modified_args_json": "{\"cmd\":\"ls -la\"}",
        "injected_context": "ctx",
        "reason": "fine",
        "grant_args": {"/cmd": "^ls", "": ".*"}
    });
    let deny_everything = json!({
        "approved": false,
        "scope": "session",
        "choice_index": 0,
        "feedback": "use rg",
        "injected_context": "ctx",
        "reason": "no"
    });
    let cases = vec![
        ("free_text: value", free_text(), json!({"value": "main"})),
        ("free_text: empty value", free_text(), json!({"value": ""})),
        (
            "free_text: value and parts",
            free_text(),
            json!({"value": "x", "parts": sample("parts")}),
        ),
        (
            "interaction_points: value and parts",
            interaction_points(1),
            json!({"value": "x", "parts": sample("parts")}),
        ),
        (
            "multiple_choice: first",
            multiple_choice(3),
            json!({"choice_index": 0}),
        ),
        (
            "multiple_choice: last",
            multiple_choice(3),
            json!({"choice_index": 2}),
        ),
        (
            "tool_approval: bare grant",
            tool_approval(0),
            json!({"approved": true}),
        ),
        (
            "tool_approval: bare deny",
            tool_approval(0),
            json!({"approved": false}),
        ),
        (
            "tool_approval: grant with everything",
            tool_approval(2),
            grant_everything,
        ),
        (
            "tool_approval: deny with everything",
            tool_approval(2),
            deny_everything,
        ),
        (
            "tool_approval: grant_args with session",
            tool_approval(0),
            json!({"approved": true, "scope": "session", "grant_args": {"/cmd": "^ls"}}),
        ),
        (
            "tool_approval: whitespace feedback beside a grant is no feedback",
            tool_approval(0),
            json!({"approved": true, "feedback": " \n "}),
        ),
        (
            "tool_approval: an empty edit on a deny is no edit",
            tool_approval(0),
            json!({"approved": false, "modified_args_json": ""}),
        ),
    ];
    check_all(
        cases
            .into_iter()
            .map(|(name, req, body)| (name, validate_response(&req, answer(body)), Expect::Ok))
            .collect(),
    );
}

#[test]
fn invalid_answers_name_their_field() {
    let cases = vec![
        (
            "choice_index past the options",
            multiple_choice(3),
            json!({"choice_index": 3}),
            Expect::Invalid("choice_index"),
        ),
        (
            "choice_index far past the options",
            multiple_choice(1),
            json!({"choice_index": usize::MAX}),
            Expect::Invalid("choice_index"),
        ),
        (
            "choice_index past a tool approval's options",
            tool_approval(2),
            json!({"approved": true, "choice_index": 2}),
            Expect::Invalid("choice_index"),
        ),
        (
            "choice_index on a tool approval without options",
            tool_approval(0),
            json!({"approved": false, "choice_index": 0}),
            Expect::Invalid("choice_index"),
        ),
        (
            "feedback beside approved: true",
            tool_approval(0),
            json!({"approved": true, "scope": "once", "feedback": "do it differently"}),
            Expect::Invalid("feedback"),
        ),
        (
            "modified_args_json on a deny",
            tool_approval(0),
            json!({"approved": false, "modified_args_json": "{\"cmd\":\"ls\"}"}),
            Expect::Invalid("modified_args_json"),
        ),
        (
            "modified_args_json that is not JSON",
            tool_approval(0),
            json!({"approved": true, "modified_args_json": "{cmd: ls}"}),
            Expect::Invalid("modified_args_json"),
        ),
        (
            "modified_args_json with trailing text",
            tool_approval(0),
            json!({"approved": true, "modified_args_json": "{} {}"}),
            Expect::Invalid("modified_args_json"),
        ),
        (
            "modified_args_json with a duplicated key",
            tool_approval(0),
            json!({"approved": true, "modified_args_json": "{\"cmd\":\"ls\",\"cmd\":\"rm\"}"}),
            Expect::Invalid("modified_args_json"),
        ),
        (
            "grant_args with scope once",
            tool_approval(0),
            json!({"approved": true, "scope": "once", "grant_args": {"/cmd": "^ls"}}),
            Expect::Invalid("grant_args"),
        ),
        (
            "grant_args without a scope",
            tool_approval(0),
            json!({"approved": true, "grant_args": {"/cmd": "^ls"}}),
            Expect::Invalid("grant_args"),
        ),
        (
            "grant_args on a deny",
            tool_approval(0),
            json!({"approved": false, "scope": "session", "grant_args": {"/cmd": "^ls"}}),
            Expect::Invalid("grant_args"),
        ),
        (
            "grant_args keyed by something that is not a JSON pointer",
            tool_approval(0),
            json!({"approved": true, "scope": "always", "grant_args": {"cmd": "^ls"}}),
            Expect::Invalid("grant_args"),
        ),
    ];
    check_all(
        cases
            .into_iter()
            .map(|(name, req, body, want)| (name, validate_response(&req, answer(body)), want))
            .collect(),
    );
}

#[test]
fn request_id_must_be_the_interactions_id() {
    for (req, body) in [
        (free_text(), json!({"value": "x"})),
        (multiple_choice(2), json!({"choice_index": 0})),
        (tool_approval(0), json!({"approved": true})),
        (interaction_points(1), json!({"value": "x"})),
    ] {
        let mut resp = answer(body);
        for wrong in ["ir_2", "", "IR_1", "ir_1 "] {
            resp.request_id = wrong.to_owned();
            let err = validate_response(&req, resp.clone()).unwrap_err();
            assert_eq!(err.field, "request_id", "{wrong:?}");
            assert_eq!(err.kind, ValidationErrorKind::Invalid);
        }
    }
}

#[test]
fn validation_normalises_what_it_accepts() {
    let req = tool_approval(0);

    let deny = validate_response(
        &req,
        answer(json!({"approved": false, "scope": "always", "feedback": "  use rg \n"})),
    )
    .unwrap();
    assert_eq!(deny.feedback.as_deref(), Some("use rg"), "feedback trimmed");
    assert_eq!(deny.scope, None, "scope dropped on a deny");

    let plain =
        validate_response(&req, answer(json!({"approved": false, "feedback": "\t "}))).unwrap();
    assert_eq!(
        plain.feedback, None,
        "all-whitespace feedback is the plain deny"
    );

    let grant = validate_response(
        &req,
        answer(json!({"approved": true, "scope": "session", "modified_args_json": ""})),
    )
    .unwrap();
    assert_eq!(grant.modified_args_json, None, "an empty edit dropped");
    assert_eq!(grant.scope, Some(lev_protocol::ApprovalScope::Session));

    // A valid answer with nothing to normalise comes back unchanged.
    let edited = answer(json!({
        "approved": true, "scope": "always", "modified_args_json": "{\"cmd\": \"ls\"}",
        "reason": "ok", "grant_args": {"/cmd": "^ls$"}
    }));
    assert_eq!(validate_response(&req, edited.clone()).unwrap(), edited);
}

// ---------------------------------------------------------------- request rules

#[test]
fn valid_requests_are_accepted() {
    let limits = Limits::default();
    let cases = vec![
        ("free_text", free_text()),
        ("multiple_choice with 1 option", multiple_choice(1)),
        ("multiple_choice with 64 options", multiple_choice(64)),
        ("tool_approval with 0 options", tool_approval(0)),
        ("tool_approval with 64 options", tool_approval(64)),
        ("interaction_points with 1 point", interaction_points(1)),
        ("interaction_points with 64 points", interaction_points(64)),
        (
            "without an id (the server assigns one)",
            with(free_text(), |r| r.id = None),
        ),
        (
            "every optional field",
            with(multiple_choice(3), |r| {
                r.conversation_id = Some("c-1".into());
                r.turn_id = Some("t.7:x_y-z".into());
                r.caller = Some("alice".into());
                r.title = Some("one line".into());
                r.timeout_s = Some(1);
                r.on_timeout = Some(OnTimeout::Choice(2));
                r.route = Some(vec!["operator".into(), "human".into()]);
                r.metadata = Some(json!({"k": [1, 2, {"x": null}]}));
            }),
        ),
        (
            "a 128-character id",
            with(free_text(), |r| r.id = Some("a".repeat(128))),
        ),
        (
            "a prompt of exactly 64 KiB",
            with_kind(free_text(), |k| {
                *k = InteractionKind::FreeText {
                    prompt: "a".repeat(64 * KIB),
                }
            }),
        ),
        (
            "an option of exactly 1 KiB",
            with_kind(multiple_choice(1), |k| {
                if let InteractionKind::MultipleChoice { options, .. } = k {
                    options[0] = "a".repeat(KIB);
                }
            }),
        ),
        (
            "args_json of exactly 256 KiB",
            with_kind(tool_approval(0), |k| {
                if let InteractionKind::ToolApproval { args_json, .. } = k {
                    *args_json = format!("\"{}\"", "a".repeat(256 * KIB - 2));
                }
            }),
        ),
        (
            "metadata of exactly 16 KiB",
            with(free_text(), |r| {
                // {"k":"..."} is 8 bytes plus the string.
                r.metadata = Some(json!({"k": "a".repeat(16 * KIB - 8)}));
            }),
        ),
        (
            "tool_approval with no sandbox mode",
            with_kind(tool_approval(0), |k| {
                if let InteractionKind::ToolApproval { sandbox_mode, .. } = k {
                    sandbox_mode.clear();
                }
            }),
        ),
        (
            "deny on interaction_points",
            with(interaction_points(1), |r| {
                r.on_timeout = Some(OnTimeout::Deny)
            }),
        ),
        (
            "cancel on a tool approval",
            with(tool_approval(0), |r| r.on_timeout = Some(OnTimeout::Cancel)),
        ),
    ];
    check_all(
        cases
            .into_iter()
            .map(|(name, req)| (name, validate_request(&req, &limits), Expect::Ok))
            .collect(),
    );
}

#[test]
fn limits() {
    use Expect::{Invalid, TooLarge};
    let limits = Limits::default();
    let set_options = |base: InteractionRequest, new: Vec<String>| {
        with_kind(base, move |k| match k {
            InteractionKind::MultipleChoice { options, .. }
            | InteractionKind::ToolApproval { options, .. } => *options = new,
            _ => {}
        })
    };
    let set_args = |args: String| {
        with_kind(tool_approval(0), move |k| {
            if let InteractionKind::ToolApproval { args_json, .. } = k {
                *args_json = args;
            }
        })
    };
    let cases: Vec<(&str, InteractionRequest, Expect)> = vec![
        (
            "free_text prompt over 64 KiB",
            with_kind(free_text(), |k| {
                *k = InteractionKind::FreeText {
                    prompt: "a".repeat(64 * KIB + 1),
                }
            }),
            TooLarge("kind.prompt"),
        ),
        (
            "multiple_choice prompt over 64 KiB",
            with_kind(multiple_choice(2), |k| {
                if let InteractionKind::MultipleChoice { prompt, .. } = k {
                    *prompt = "é".repeat(32 * KIB + 1);
                }
            }),
            TooLarge("kind.prompt"),
        ),
        (
            "interaction_points prompt over 64 KiB",
            with_kind(interaction_points(1), |k| {
                if let InteractionKind::InteractionPoints { prompt, .. } = k {
                    *prompt = "a".repeat(64 * KIB + 1);
                }
            }),
            TooLarge("kind.prompt"),
        ),
        (
            "interaction_points over 64 KiB in all",
            with_kind(interaction_points(2), |k| {
                if let InteractionKind::InteractionPoints { points, .. } = k {
                    points[0].text = "a".repeat(40 * KIB);
                    points[1].text = "a".repeat(40 * KIB);
                }
            }),
            TooLarge("kind.points"),
        ),
        (
            "title over 64 KiB",
            with(free_text(), |r| r.title = Some("a".repeat(64 * KIB + 1))),
            TooLarge("title"),
        ),
        (
            "multiple_choice with 65 options",
            multiple_choice(65),
            Invalid("kind.options"),
        ),
        (
            "tool_approval with 65 options",
            tool_approval(65),
            Invalid("kind.options"),
        ),
        (
            "multiple_choice with no option",
            multiple_choice(0),
            Invalid("kind.options"),
        ),
        (
            "an option over 1 KiB",
            set_options(multiple_choice(0), vec!["ok".into(), "a".repeat(KIB + 1)]),
            Invalid("kind.options[1]"),
        ),
        (
            "a tool approval option over 1 KiB",
            set_options(tool_approval(0), vec!["a".repeat(KIB + 1)]),
            Invalid("kind.options[0]"),
        ),
        (
            "args_json over 256 KiB",
            set_args(format!("\"{}\"", "a".repeat(256 * KIB - 1))),
            TooLarge("kind.args_json"),
        ),
        (
            "metadata over 16 KiB",
            with(free_text(), |r| {
                r.metadata = Some(json!({"k": "a".repeat(16 * KIB - 7)}));
            }),
            TooLarge("metadata"),
        ),
        ("65 points", interaction_points(65), Invalid("kind.points")),
    ];
    check_all(
        cases
            .into_iter()
            .map(|(name, req, want)| (name, validate_request(&req, &limits), want))
            .collect(),
    );
}

#[test]
fn request_fields_are_checked() {
    use Expect::Invalid;
    let limits = Limits::default();
    let tool = |edit: fn(&mut String, &mut String, &mut Vec<String>, &mut String)| {
        with_kind(tool_approval(0), |k| {
            if let InteractionKind::ToolApproval {
                tool_name,
                args_json,
                missing_capabilities,
                sandbox_mode,
                ..
            } = k
            {
                edit(tool_name, args_json, missing_capabilities, sandbox_mode);
            }
        })
    };
    let points = |ids: &[&str]| {
        let ids: Vec<String> = ids.iter().map(|s| (*s).to_owned()).collect();
        with_kind(interaction_points(0), move |k| {
            if let InteractionKind::InteractionPoints { points, .. } = k {
                *points = ids
                    .into_iter()
                    .map(|id| Point {
                        id,
                        text: "t".into(),
                    })
                    .collect();
            }
        })
    };
    let cases: Vec<(&str, InteractionRequest, Expect)> = vec![
        (
            "empty id",
            with(free_text(), |r| r.id = Some(String::new())),
            Invalid("id"),
        ),
        (
            "id with a space",
            with(free_text(), |r| r.id = Some("ir 1".into())),
            Invalid("id"),
        ),
        (
            "id of 129 characters",
            with(free_text(), |r| r.id = Some("a".repeat(129))),
            Invalid("id"),
        ),
        (
            "id with a slash",
            with(free_text(), |r| r.id = Some("ir/1".into())),
            Invalid("id"),
        ),
        (
            "non-ASCII session_id",
            with(free_text(), |r| r.session_id = "sé".into()),
            Invalid("session_id"),
        ),
        (
            "empty session_id",
            with(free_text(), |r| r.session_id = String::new()),
            Invalid("session_id"),
        ),
        (
            "bad conversation_id",
            with(free_text(), |r| r.conversation_id = Some("c 1".into())),
            Invalid("conversation_id"),
        ),
        (
            "bad turn_id",
            with(free_text(), |r| r.turn_id = Some("t\n7".into())),
            Invalid("turn_id"),
        ),
        (
            "bad caller",
            with(free_text(), |r| r.caller = Some("alice@example".into())),
            Invalid("caller"),
        ),
        (
            "empty tool_name",
            tool(|t, _, _, _| t.clear()),
            Invalid("kind.tool_name"),
        ),
        (
            "tool_name with a control character",
            tool(|t, _, _, _| *t = "sh\u{7}ell".into()),
            Invalid("kind.tool_name"),
        ),
        (
            "tool_name over 256 characters",
            tool(|t, _, _, _| *t = "a".repeat(257)),
            Invalid("kind.tool_name"),
        ),
        (
            "args_json that is not JSON",
            tool(|_, a, _, _| *a = "{cmd: ls}".into()),
            Invalid("kind.args_json"),
        ),
        (
            "empty args_json",
            tool(|_, a, _, _| a.clear()),
            Invalid("kind.args_json"),
        ),
        (
            "args_json with a duplicated key",
            tool(|_, a, _, _| *a = r#"{"cmd":"ls","cmd":"rm -rf /"}"#.into()),
            Invalid("kind.args_json"),
        ),
        (
            "a capability that is not kebab-case",
            tool(|_, _, c, _| *c = vec!["net".into(), "FS_write".into()]),
            Invalid("kind.missing_capabilities"),
        ),
        (
            "bad sandbox_mode",
            tool(|_, _, _, s| *s = "workspace write".into()),
            Invalid("kind.sandbox_mode"),
        ),
        ("no points", points(&[]), Invalid("kind.points")),
        (
            "bad point id",
            points(&["p1", "p 2"]),
            Invalid("kind.points[1].id"),
        ),
        (
            "duplicate point id",
            points(&["p1", "p2", "p1"]),
            Invalid("kind.points[2].id"),
        ),
        (
            "timeout_s 0",
            with(free_text(), |r| r.timeout_s = Some(0)),
            Invalid("timeout_s"),
        ),
        (
            "empty route",
            with(free_text(), |r| r.route = Some(vec![])),
            Invalid("route"),
        ),
        (
            "route of 9 entries",
            with(free_text(), |r| r.route = Some(vec!["human".into(); 9])),
            Invalid("route"),
        ),
        (
            "bad route entry",
            with(free_text(), |r| {
                r.route = Some(vec!["operator".into(), "a human".into()])
            }),
            Invalid("route[1]"),
        ),
    ];
    check_all(
        cases
            .into_iter()
            .map(|(name, req, want)| (name, validate_request(&req, &limits), want))
            .collect(),
    );
}

#[test]
fn on_timeout_choice_is_for_multiple_choice_only() {
    use Expect::Invalid;
    let limits = Limits::default();
    let choice =
        |req: InteractionRequest, n| with(req, |r| r.on_timeout = Some(OnTimeout::Choice(n)));
    let cases = vec![
        (
            "multiple_choice, first option",
            choice(multiple_choice(3), 0),
            Expect::Ok,
        ),
        (
            "multiple_choice, last option",
            choice(multiple_choice(3), 2),
            Expect::Ok,
        ),
        (
            "multiple_choice, past the options",
            choice(multiple_choice(3), 3),
            Invalid("on_timeout.choice"),
        ),
        ("free_text", choice(free_text(), 0), Invalid("on_timeout")),
        (
            "tool_approval",
            choice(tool_approval(2), 0),
            Invalid("on_timeout"),
        ),
        (
            "interaction_points",
            choice(interaction_points(1), 0),
            Invalid("on_timeout"),
        ),
    ];
    check_all(
        cases
            .into_iter()
            .map(|(name, req, want)| (name, validate_request(&req, &limits), want))
            .collect(),
    );
    for kind in [
        free_text(),
        multiple_choice(1),
        tool_approval(0),
        interaction_points(1),
    ] {
        for on_timeout in [OnTimeout::Deny, OnTimeout::Cancel] {
            let req = with(kind.clone(), |r| r.on_timeout = Some(on_timeout.clone()));
            assert_eq!(validate_request(&req, &limits), Ok(()), "{req:?}");
        }
    }
}

#[test]
fn limits_can_be_tightened() {
    let tight = Limits {
        options: 2,
        ..Limits::default()
    };
    let err = validate_request(&multiple_choice(3), &tight).unwrap_err();
    assert_eq!(
        (err.field.as_str(), err.kind),
        ("kind.options", ValidationErrorKind::Invalid)
    );
    assert_eq!(validate_request(&multiple_choice(2), &tight), Ok(()));
}
