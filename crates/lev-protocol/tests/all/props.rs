//! Property tests: JSON round trips, strict JSON, feedback normalisation.

use lev_protocol::json::check_strict_json;
use lev_protocol::validate::validate_response;
use lev_protocol::{
    ApprovalScope, InboundPart, Interaction, InteractionKind, InteractionRequest,
    InteractionResponse, InteractionStatus, OnTimeout, Point, StoredPart, StoredResponse,
};
use proptest::prelude::*;
use proptest::sample::Index;
use serde_json::Value;
use time::OffsetDateTime;

// ---------------------------------------------------------------- strategies

/// Any JSON value, a few levels deep. Floats are multiples of 1/8, which JSON
/// text holds exactly (serde_json without `float_roundtrip` may be one ulp off
/// on arbitrary floats, which is not what these tests are about).
fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        (-1_000_000_i32..1_000_000).prop_map(|n| Value::from(f64::from(n) / 8.0)),
        any::<String>().prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::btree_map(any::<String>(), inner, 0..6)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn opt_string() -> impl Strategy<Value = Option<String>> {
    prop::option::of(any::<String>())
}

fn strings(max: usize) -> impl Strategy<Value = Vec<String>> {
    prop::collection::vec(any::<String>(), 0..max)
}

fn scope() -> impl Strategy<Value = ApprovalScope> {
    prop_oneof![
        Just(ApprovalScope::Once),
        Just(ApprovalScope::Session),
        Just(ApprovalScope::Always),
    ]
}

fn inbound_part() -> impl Strategy<Value = InboundPart> {
    (
        any::<String>(),
        any::<String>(),
        "[A-Za-z0-9+/]{0,24}={0,2}",
    )
        .prop_map(|(name, media_type, data)| InboundPart {
            name,
            media_type,
            data,
        })
}

fn stored_part() -> impl Strategy<Value = StoredPart> {
    (
        any::<String>(),
        any::<String>(),
        any::<u64>(),
        "[0-9a-f]{64}",
        opt_string(),
    )
        .prop_map(
            |(name, media_type, size, sha256, original_name)| StoredPart {
                name,
                media_type,
                size,
                sha256,
                original_name,
            },
        )
}

/// Any answer, whatever its fields say (valid or not: the wire carries both).
fn response<P: std::fmt::Debug + Clone>(
    part: impl Strategy<Value = P>,
) -> impl Strategy<Value = InteractionResponse<P>> {
    let decision = (
        any::<String>(),
        opt_string(),
        prop::option::of(any::<usize>()),
        prop::option::of(any::<bool>()),
        prop::option::of(scope()),
        opt_string(),
    );
    let extras = (
        prop::collection::vec(part, 0..3),
        opt_string(),
        opt_string(),
        opt_string(),
        prop::option::of(prop::collection::btree_map(
            any::<String>(),
            any::<String>(),
            0..4,
        )),
    );
    (decision, extras).prop_map(
        |(
            (request_id, value, choice_index, approved, scope, feedback),
            (parts, modified_args_json, injected_context, reason, grant_args),
        )| InteractionResponse {
            request_id,
            value,
            choice_index,
            approved,
            scope,
            feedback,
            parts,
            modified_args_json,
            injected_context,
            reason,
            grant_args,
            vote: None,
            fields: None,
        },
    )
}

fn kind() -> impl Strategy<Value = InteractionKind> {
    prop_oneof![
        any::<String>().prop_map(|prompt| InteractionKind::FreeText { prompt }),
        (any::<String>(), strings(5))
            .prop_map(|(prompt, options)| InteractionKind::MultipleChoice { prompt, options }),
        (
            any::<String>(),
            any::<String>(),
            strings(3),
            any::<String>(),
            strings(3)
        )
            .prop_map(
                |(tool_name, args_json, missing_capabilities, sandbox_mode, options)| {
                    InteractionKind::ToolApproval {
                        tool_name,
                        args_json,
                        missing_capabilities,
                        sandbox_mode,
                        options,
                    }
                }
            ),
        (
            any::<String>(),
            prop::collection::vec(
                (any::<String>(), any::<String>()).prop_map(|(id, text)| Point { id, text }),
                0..4
            )
        )
            .prop_map(|(prompt, points)| InteractionKind::InteractionPoints { prompt, points }),
    ]
}

fn on_timeout() -> impl Strategy<Value = OnTimeout> {
    prop_oneof![
        Just(OnTimeout::Deny),
        Just(OnTimeout::Cancel),
        any::<usize>().prop_map(OnTimeout::Choice),
    ]
}

fn request() -> impl Strategy<Value = InteractionRequest> {
    let who = (
        opt_string(),
        any::<String>(),
        opt_string(),
        opt_string(),
        opt_string(),
        opt_string(),
    );
    let what = (
        kind(),
        prop::option::of(any::<u64>()),
        prop::option::of(on_timeout()),
        prop::option::of(strings(4)),
        // `"metadata": null` reads as no metadata, so `Some(Null)` is not a
        // value a request can carry; every other value can.
        prop::option::of(json_value().prop_filter("null is absent", |v| !v.is_null())),
    );
    (who, what).prop_map(
        |(
            (id, session_id, conversation_id, turn_id, caller, title),
            (kind, timeout_s, on_timeout, route, metadata),
        )| InteractionRequest {
            id,
            session_id,
            conversation_id,
            turn_id,
            caller,
            reason: title.clone(),
            title,
            kind,
            timeout_s,
            on_timeout,
            route,
            metadata,
            gate: None,
            approvals_needed: None,
            quorum: None,
            vote_binding: None,
        },
    )
}

/// A time RFC 3339 can write: years 1 to 9999, UTC, nanoseconds included.
fn timestamp() -> impl Strategy<Value = OffsetDateTime> {
    // 0001-01-01T00:00:00Z to 9999-12-31T23:59:59Z.
    (-62_135_596_800_i64..253_402_300_800, 0..1_000_000_000_i64).prop_filter_map(
        "a time the time crate holds",
        |(secs, nanos)| {
            OffsetDateTime::from_unix_timestamp_nanos(
                i128::from(secs) * 1_000_000_000 + i128::from(nanos),
            )
            .ok()
        },
    )
}

fn interaction() -> impl Strategy<Value = Interaction> {
    (
        request(),
        prop_oneof![
            Just(InteractionStatus::Pending),
            Just(InteractionStatus::Answered),
            Just(InteractionStatus::Expired),
            Just(InteractionStatus::Cancelled),
        ],
        timestamp(),
        prop::option::of(timestamp()),
        prop::option::of(timestamp()),
        opt_string(),
    )
        .prop_map(
            |(request, status, created_at, expires_at, answered_at, answered_by)| Interaction {
                request,
                status,
                created_at,
                expires_at,
                answered_at,
                answered_by,
                votes: Vec::new(),
            },
        )
}

/// Some text with whitespace around and inside, or any string at all.
fn feedback_text() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<String>(),
        "[ \t\r\n\u{a0}\u{2003}\u{3000}]{0,4}[a-zé ]{0,8}[ \t\r\n\u{a0}\u{2003}\u{3000}]{0,4}",
        "[ \t\r\n\u{b}\u{c}\u{85}\u{a0}\u{2028}\u{3000}]{0,6}",
    ]
}

// ---------------------------------------------------------------- helpers

fn round_trip<T>(value: &T) -> Result<(), TestCaseError>
where
    T: serde::Serialize + serde::de::DeserializeOwned + PartialEq + std::fmt::Debug,
{
    let text = serde_json::to_string(value).map_err(|e| TestCaseError::fail(e.to_string()))?;
    let again: T = serde_json::from_str(&text)
        .map_err(|e| TestCaseError::fail(format!("{text} does not parse back: {e}")))?;
    prop_assert_eq!(&again, value, "written as {}", text);
    Ok(())
}

/// `s` as a JSON string with every character written as `\uXXXX`.
fn escape_every_char(s: &str) -> String {
    let mut out = String::from("\"");
    for unit in s.encode_utf16() {
        out.push_str(&format!("\\u{unit:04x}"));
    }
    out.push('"');
    out
}

fn tool_approval() -> InteractionRequest {
    InteractionRequest {
        id: Some("ir_1".to_owned()),
        ..InteractionRequest::new(
            "s-1",
            InteractionKind::ToolApproval {
                tool_name: "shell".to_owned(),
                args_json: "{}".to_owned(),
                missing_capabilities: vec![],
                sandbox_mode: String::new(),
                options: vec![],
            },
        )
    }
}

// ---------------------------------------------------------------- properties

proptest! {
    #[test]
    fn any_response_round_trips(r in response(inbound_part())) {
        round_trip(&r)?;
    }

    #[test]
    fn any_stored_response_round_trips(r in response(stored_part())) {
        round_trip::<StoredResponse>(&r)?;
    }

    #[test]
    fn any_request_round_trips(r in request()) {
        round_trip(&r)?;
    }

    #[test]
    fn any_stored_interaction_round_trips(i in interaction()) {
        round_trip(&i)?;
    }

    #[test]
    fn strict_json_accepts_any_serialised_value(v in json_value()) {
        let compact = serde_json::to_string(&v).unwrap();
        prop_assert_eq!(check_strict_json(&compact), Ok(()), "{}", compact);
        let pretty = serde_json::to_string_pretty(&v).unwrap();
        prop_assert_eq!(check_strict_json(&pretty), Ok(()), "{}", pretty);
    }

    /// An object holding a key twice is refused, however the second key is
    /// spelled, wherever it sits and however deep the object is.
    #[test]
    fn strict_json_refuses_any_duplicated_key(
        members in prop::collection::btree_map(any::<String>(), json_value(), 1..5),
        which in any::<Index>(),
        at in any::<Index>(),
        second_value in json_value(),
        escaped in any::<bool>(),
        wrappers in prop::collection::vec(prop::option::of(any::<String>()), 0..4),
    ) {
        let member = |k: &str, v: &Value| format!("{}:{}", serde_json::to_string(k).unwrap(), v);
        let mut texts: Vec<String> = members.iter().map(|(k, v)| member(k, v)).collect();
        let (key, _) = members.iter().nth(which.index(members.len())).unwrap();
        let key_text = if escaped {
            escape_every_char(key)
        } else {
            serde_json::to_string(key).unwrap()
        };
        texts.insert(at.index(texts.len() + 1), format!("{key_text}:{second_value}"));
        let mut text = format!("{{{}}}", texts.join(","));
        // Nest it: `None` in an array, `Some(k)` under key k.
        for wrapper in wrappers {
            text = match wrapper {
                None => format!("[null,{text}]"),
                Some(k) => format!("{{{}:{text}}}", serde_json::to_string(&k).unwrap()),
            };
        }
        // serde_json itself reads it (keeping one of the two): it is JSON.
        prop_assert!(serde_json::from_str::<Value>(&text).is_ok(), "{}", text);
        match check_strict_json(&text) {
            Ok(()) => prop_assert!(false, "accepted a duplicated key {:?}: {}", key, text),
            Err(e) => prop_assert!(e.contains("twice"), "{}: {}", e, text),
        }
    }

    #[test]
    fn deny_with_feedback_is_trimmed_and_never_empty(input in feedback_text()) {
        let r = InteractionResponse::<InboundPart>::deny_with_feedback("ir_1", &input);
        prop_assert_eq!(r.approved, Some(false));
        match r.feedback.as_deref() {
            None => prop_assert!(input.trim().is_empty(), "dropped {:?}", input),
            Some(f) => {
                prop_assert!(!f.is_empty());
                prop_assert_eq!(f, f.trim());
                prop_assert_eq!(f, input.trim());
            }
        }
        prop_assert_eq!(r.deny_feedback(), r.feedback.as_deref());

        // The server reads the raw text as the builder does, and accepts it.
        let raw = InteractionResponse::<InboundPart> {
            feedback: Some(input.clone()),
            ..InteractionResponse::approval("ir_1", false, ApprovalScope::Once)
        };
        prop_assert_eq!(raw.deny_feedback(), r.feedback.as_deref());
        let checked = validate_response(&tool_approval(), raw).unwrap();
        prop_assert_eq!(checked.feedback, r.feedback);
    }

    #[test]
    fn deny_feedback_is_none_on_anything_but_a_deny(
        approved in prop_oneof![Just(None), Just(Some(true))],
        feedback in opt_string(),
    ) {
        let r = InteractionResponse::<InboundPart> {
            approved,
            feedback,
            ..InteractionResponse::text("ir_1", "x")
        };
        prop_assert_eq!(r.deny_feedback(), None);
    }

}
