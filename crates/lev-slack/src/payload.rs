//! What Slack POSTs to the interactivity URL: an
//! `application/x-www-form-urlencoded` body whose one field `payload` holds
//! JSON (a `block_actions` for a button click, a `view_submission` for a
//! modal's submit). Only the fields lev acts on are read; Slack sends many
//! more, and they are ignored.

use std::collections::BTreeMap;
use std::fmt;

use serde::Deserialize;

/// Largest body accepted, in bytes. A `block_actions` payload carries the
/// whole message clicked; the largest message lev posts (every text at its
/// limit, in characters that weigh most once JSON- and percent-encoded)
/// comes back as about 60 KB, and this leaves room for what Slack adds.
pub const MAX_BODY_BYTES: usize = 128 * 1024;

/// What a person did in Slack.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SlackAction {
    /// A button was clicked (`type: block_actions`, its first action).
    Button {
        /// The Slack user who clicked (`user.id`).
        user_id: String,
        /// The button's `action_id` (`approve_once`, `choice_3`, …).
        action_id: String,
        /// The button's `value` (lev puts the interaction id there); empty
        /// when the element carried none.
        value: String,
        /// Opens a modal with `views.open` (valid for 3 seconds).
        trigger_id: String,
        /// Posts back to where the click came from (ephemeral replies).
        response_url: String,
        /// The channel of the message clicked, when the click came from one.
        channel_id: Option<String>,
        /// The `ts` of the message clicked, when the click came from one.
        message_ts: Option<String>,
    },
    /// A modal was submitted (`type: view_submission`).
    Submission {
        /// The Slack user who submitted (`user.id`).
        user_id: String,
        /// The modal's `callback_id` (`lev_deny_feedback`, `lev_reply`).
        callback_id: String,
        /// The modal's `private_metadata` (lev puts the interaction id there).
        private_metadata: String,
        /// Each text input's value, keyed `"{block_id}.{action_id}"`
        /// (`feedback.text`); an input left empty is `""`.
        values: BTreeMap<String, String>,
    },
    /// Any other payload (`view_closed`, shortcuts, …): nothing to do.
    Other {
        /// The payload's `type`.
        kind: String,
    },
}

/// Why a body is not a payload lev can act on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PayloadError {
    /// The body is over [`MAX_BODY_BYTES`].
    TooLarge {
        /// The body's size in bytes.
        len: usize,
    },
    /// The form has no `payload` field, or has it twice.
    NoPayload,
    /// `payload` is not the JSON expected (the parser's message).
    BadJson(String),
    /// A field lev needs is absent (`user.id`, `actions[0].action_id`, …).
    Missing(&'static str),
}

impl fmt::Display for PayloadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::TooLarge { len } => {
                write!(
                    f,
                    "payload: body of {len} bytes is over the {MAX_BODY_BYTES}-byte limit"
                )
            }
            Self::NoPayload => {
                write!(f, "payload: expected one form field named payload")
            }
            Self::BadJson(e) => write!(f, "payload: not the JSON expected: {e}"),
            Self::Missing(field) => write!(f, "payload: missing {field}"),
        }
    }
}

impl std::error::Error for PayloadError {}

#[derive(Debug, Deserialize)]
struct Envelope {
    #[serde(rename = "type")]
    kind: Option<String>,
    user: Option<User>,
    trigger_id: Option<String>,
    response_url: Option<String>,
    channel: Option<Channel>,
    container: Option<Container>,
    message: Option<Message>,
    actions: Option<Vec<Action>>,
    view: Option<View>,
}

#[derive(Debug, Deserialize)]
struct User {
    id: Option<String>,
}

#[derive(Debug, Deserialize)]
struct Channel {
    id: Option<String>,
}

#[derive(Debug, Deserialize)]
struct Container {
    channel_id: Option<String>,
    message_ts: Option<String>,
}

#[derive(Debug, Deserialize)]
struct Message {
    ts: Option<String>,
}

#[derive(Debug, Deserialize)]
struct Action {
    action_id: Option<String>,
    value: Option<String>,
}

#[derive(Debug, Deserialize)]
struct View {
    callback_id: Option<String>,
    private_metadata: Option<String>,
    state: Option<State>,
}

#[derive(Debug, Deserialize)]
struct State {
    values: Option<BTreeMap<String, BTreeMap<String, StateValue>>>,
}

/// One input's state. `value` is read as any JSON: only a
/// `plain_text_input`'s is used, and another element's must not fail the parse.
#[derive(Debug, Deserialize)]
struct StateValue {
    #[serde(rename = "type")]
    kind: Option<String>,
    value: Option<serde_json::Value>,
}

/// Decode the body of a request to the interactivity URL (after its
/// signature was checked).
///
/// # Errors
/// A [`PayloadError`]: too large, no `payload` field, not JSON, or a field
/// lev needs is missing (named, as in `payload: missing user.id`).
pub fn parse(body: &[u8]) -> Result<SlackAction, PayloadError> {
    if body.len() > MAX_BODY_BYTES {
        return Err(PayloadError::TooLarge { len: body.len() });
    }
    let mut payload = None;
    for (key, value) in form_urlencoded::parse(body) {
        if key == "payload" {
            if payload.is_some() {
                return Err(PayloadError::NoPayload);
            }
            payload = Some(value);
        }
    }
    let payload = payload.ok_or(PayloadError::NoPayload)?;
    let mut env: Envelope =
        serde_json::from_str(&payload).map_err(|e| PayloadError::BadJson(e.to_string()))?;
    let kind = env.kind.take().ok_or(PayloadError::Missing("type"))?;
    match kind.as_str() {
        "block_actions" => button(env),
        "view_submission" => submission(env),
        _ => Ok(SlackAction::Other { kind }),
    }
}

fn user_id(user: Option<User>) -> Result<String, PayloadError> {
    user.and_then(|u| u.id)
        .filter(|id| !id.is_empty())
        .ok_or(PayloadError::Missing("user.id"))
}

fn button(env: Envelope) -> Result<SlackAction, PayloadError> {
    let user_id = user_id(env.user)?;
    let action = env
        .actions
        .and_then(|a| a.into_iter().next())
        .ok_or(PayloadError::Missing("actions[0]"))?;
    let action_id = action
        .action_id
        .ok_or(PayloadError::Missing("actions[0].action_id"))?;
    let trigger_id = env.trigger_id.ok_or(PayloadError::Missing("trigger_id"))?;
    let response_url = env
        .response_url
        .ok_or(PayloadError::Missing("response_url"))?;
    let (container_channel, container_ts) = match env.container {
        Some(c) => (c.channel_id, c.message_ts),
        None => (None, None),
    };
    Ok(SlackAction::Button {
        user_id,
        action_id,
        value: action.value.unwrap_or_default(),
        trigger_id,
        response_url,
        channel_id: env.channel.and_then(|c| c.id).or(container_channel),
        message_ts: container_ts.or(env.message.and_then(|m| m.ts)),
    })
}

fn submission(env: Envelope) -> Result<SlackAction, PayloadError> {
    let user_id = user_id(env.user)?;
    let view = env.view.ok_or(PayloadError::Missing("view"))?;
    let callback_id = view
        .callback_id
        .ok_or(PayloadError::Missing("view.callback_id"))?;
    let mut values = BTreeMap::new();
    for (block_id, actions) in view.state.and_then(|s| s.values).unwrap_or_default() {
        for (action_id, state) in actions {
            if state.kind.as_deref() != Some("plain_text_input") {
                continue;
            }
            let text = match state.value {
                Some(serde_json::Value::String(s)) => s,
                _ => String::new(),
            };
            values.insert(format!("{block_id}.{action_id}"), text);
        }
    }
    Ok(SlackAction::Submission {
        user_id,
        callback_id,
        private_metadata: view.private_metadata.unwrap_or_default(),
        values,
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    /// `payload=` and `json` form-encoded, as Slack sends it.
    fn form(json: &str) -> Vec<u8> {
        form_urlencoded::Serializer::new(String::new())
            .append_pair("payload", json)
            .finish()
            .into_bytes()
    }

    /// Modelled on the block_actions example of Slack's reference, for a
    /// click on one of lev's buttons in a channel message.
    const BLOCK_ACTIONS: &str = r#"{
      "type": "block_actions",
      "team": {"id": "T9TK3CUKW", "domain": "example"},
      "user": {"id": "UA8RXUSPL", "username": "jtorrance", "name": "jtorrance", "team_id": "T9TK3CUKW"},
      "api_app_id": "AABA1ABCD",
      "token": "9s8d9as89d8as9d8as989",
      "container": {
        "type": "message",
        "message_ts": "1548261231.000200",
        "channel_id": "CBR2V3XEX",
        "is_ephemeral": false
      },
      "trigger_id": "12321423423.333649436676.d8c1bb837935619ccad0f624c448ffb3",
      "channel": {"id": "CBR2V3XEX", "name": "review-updates"},
      "message": {
        "bot_id": "BAH5CA16Z",
        "type": "message",
        "text": "Approve `Bash`?",
        "user": "UAJ2RU415",
        "ts": "1548261231.000200",
        "blocks": [{"type": "actions", "block_id": "lev_actions", "elements": []}]
      },
      "state": {"values": {}},
      "response_url": "https://hooks.slack.com/actions/AABA1ABCD/1232321423432/D09sSasdasdAS9091209",
      "actions": [
        {
          "action_id": "approve_once",
          "block_id": "lev_actions",
          "text": {"type": "plain_text", "text": "Approve once", "emoji": true},
          "value": "ir_01HZX3",
          "style": "primary",
          "type": "button",
          "action_ts": "1548426417.840180"
        }
      ]
    }"#;

    /// Modelled on the view_submission example of Slack's reference, for
    /// lev's deny-with-feedback modal.
    const VIEW_SUBMISSION: &str = r#"{
      "type": "view_submission",
      "team": {"id": "T9TK3CUKW", "domain": "example"},
      "user": {"id": "UA8RXUSPL", "username": "jtorrance", "name": "jtorrance", "team_id": "T9TK3CUKW"},
      "api_app_id": "AABA1ABCD",
      "token": "9s8d9as89d8as9d8as989",
      "trigger_id": "12321423423.333649436676.d8c1bb837935619ccad0f624c448ffb3",
      "view": {
        "id": "VNHU13V36",
        "team_id": "T9TK3CUKW",
        "type": "modal",
        "blocks": [],
        "private_metadata": "ir_01HZX3",
        "callback_id": "lev_deny_feedback",
        "state": {
          "values": {
            "feedback": {
              "text": {"type": "plain_text_input", "value": "Use git status & <nothing> else"}
            },
            "pick": {
              "choice": {"type": "static_select", "selected_option": {"value": "a"}}
            },
            "note": {
              "text": {"type": "plain_text_input", "value": null}
            }
          }
        },
        "hash": "156663117.cd33ad1f",
        "title": {"type": "plain_text", "text": "Deny with feedback"},
        "clear_on_close": false,
        "notify_on_close": false,
        "close": null,
        "submit": {"type": "plain_text", "text": "Deny"},
        "previous_view_id": null,
        "root_view_id": "VNHU13V36",
        "app_id": "AABA1ABCD",
        "external_id": "",
        "app_installed_team_id": "T9TK3CUKW",
        "bot_id": "BAH5CA16Z"
      },
      "response_urls": [],
      "is_enterprise_install": false,
      "enterprise": null
    }"#;

    #[test]
    fn a_button_click_decodes() {
        let action = parse(&form(BLOCK_ACTIONS)).unwrap();
        assert_eq!(
            action,
            SlackAction::Button {
                user_id: "UA8RXUSPL".into(),
                action_id: "approve_once".into(),
                value: "ir_01HZX3".into(),
                trigger_id: "12321423423.333649436676.d8c1bb837935619ccad0f624c448ffb3".into(),
                response_url:
                    "https://hooks.slack.com/actions/AABA1ABCD/1232321423432/D09sSasdasdAS9091209"
                        .into(),
                channel_id: Some("CBR2V3XEX".into()),
                message_ts: Some("1548261231.000200".into()),
            }
        );
    }

    #[test]
    fn the_channel_and_ts_fall_back_to_the_container_and_message() {
        let mut v: serde_json::Value = serde_json::from_str(BLOCK_ACTIONS).unwrap();
        v.as_object_mut().unwrap().remove("channel");
        v["container"].as_object_mut().unwrap().remove("message_ts");
        v["message"]["ts"] = "1.5".into();
        let SlackAction::Button {
            channel_id,
            message_ts,
            ..
        } = parse(&form(&v.to_string())).unwrap()
        else {
            panic!("not a button")
        };
        assert_eq!(channel_id.as_deref(), Some("CBR2V3XEX"));
        assert_eq!(message_ts.as_deref(), Some("1.5"));

        for key in ["container", "message"] {
            v.as_object_mut().unwrap().remove(key);
        }
        v["actions"][0].as_object_mut().unwrap().remove("value");
        let SlackAction::Button {
            channel_id,
            message_ts,
            value,
            ..
        } = parse(&form(&v.to_string())).unwrap()
        else {
            panic!("not a button")
        };
        assert_eq!((channel_id, message_ts, value.as_str()), (None, None, ""));
    }

    #[test]
    fn a_modal_submission_decodes() {
        let action = parse(&form(VIEW_SUBMISSION)).unwrap();
        let SlackAction::Submission {
            user_id,
            callback_id,
            private_metadata,
            values,
        } = action
        else {
            panic!("not a submission: {action:?}")
        };
        assert_eq!(user_id, "UA8RXUSPL");
        assert_eq!(callback_id, "lev_deny_feedback");
        assert_eq!(private_metadata, "ir_01HZX3");
        assert_eq!(
            values,
            BTreeMap::from([
                (
                    "feedback.text".to_owned(),
                    "Use git status & <nothing> else".to_owned()
                ),
                ("note.text".to_owned(), String::new()),
            ])
        );
    }

    #[test]
    fn other_payloads_are_other() {
        let closed = r#"{"type":"view_closed","user":{"id":"U1"},"view":{"callback_id":"lev_reply"},"is_cleared":false}"#;
        assert_eq!(
            parse(&form(closed)).unwrap(),
            SlackAction::Other {
                kind: "view_closed".into()
            }
        );
        let shortcut = r#"{"type":"shortcut","callback_id":"x","trigger_id":"1"}"#;
        assert_eq!(
            parse(&form(shortcut)).unwrap(),
            SlackAction::Other {
                kind: "shortcut".into()
            }
        );
    }

    #[test]
    fn errors_name_what_is_missing() {
        let missing = |edit: &dyn Fn(&mut serde_json::Value), base: &str| {
            let mut v: serde_json::Value = serde_json::from_str(base).unwrap();
            edit(&mut v);
            parse(&form(&v.to_string())).unwrap_err().to_string()
        };
        let rm = |path: &'static [&'static str]| {
            move |v: &mut serde_json::Value| {
                let mut at = v;
                for p in &path[..path.len() - 1] {
                    at = if let Ok(i) = p.parse::<usize>() {
                        &mut at[i]
                    } else {
                        &mut at[*p]
                    };
                }
                at.as_object_mut().unwrap().remove(path[path.len() - 1]);
            }
        };
        assert_eq!(
            missing(&rm(&["user", "id"]), BLOCK_ACTIONS),
            "payload: missing user.id"
        );
        assert_eq!(
            missing(&rm(&["user"]), VIEW_SUBMISSION),
            "payload: missing user.id"
        );
        assert_eq!(
            missing(&rm(&["type"]), BLOCK_ACTIONS),
            "payload: missing type"
        );
        assert_eq!(
            missing(&rm(&["trigger_id"]), BLOCK_ACTIONS),
            "payload: missing trigger_id"
        );
        assert_eq!(
            missing(&rm(&["response_url"]), BLOCK_ACTIONS),
            "payload: missing response_url"
        );
        assert_eq!(
            missing(&rm(&["actions", "0", "action_id"]), BLOCK_ACTIONS),
            "payload: missing actions[0].action_id"
        );
        assert_eq!(
            missing(&|v| v["actions"] = serde_json::json!([]), BLOCK_ACTIONS),
            "payload: missing actions[0]"
        );
        assert_eq!(
            missing(&rm(&["view"]), VIEW_SUBMISSION),
            "payload: missing view"
        );
        assert_eq!(
            missing(&rm(&["view", "callback_id"]), VIEW_SUBMISSION),
            "payload: missing view.callback_id"
        );
        let e = missing(&|v| v["user"]["id"] = 7.into(), BLOCK_ACTIONS);
        assert!(
            e.starts_with("payload: not the JSON expected: invalid type"),
            "{e}"
        );
    }

    #[test]
    fn bad_bodies_are_refused() {
        assert_eq!(parse(b""), Err(PayloadError::NoPayload));
        assert_eq!(parse(b"token=1&x=2"), Err(PayloadError::NoPayload));
        assert_eq!(
            parse(b"payload=%7B%7D&payload=%7B%7D"),
            Err(PayloadError::NoPayload)
        );
        assert!(matches!(
            parse(b"payload=not+json"),
            Err(PayloadError::BadJson(_))
        ));
        assert!(matches!(
            parse(b"payload=%5B%5D"),
            Err(PayloadError::BadJson(_))
        ));
        assert!(matches!(
            parse(b"payload=%FF%FE"),
            Err(PayloadError::BadJson(_))
        ));
        let big = vec![b'a'; MAX_BODY_BYTES + 1];
        assert_eq!(
            parse(&big),
            Err(PayloadError::TooLarge {
                len: MAX_BODY_BYTES + 1
            })
        );
        assert_eq!(
            PayloadError::TooLarge { len: 140_000 }.to_string(),
            "payload: body of 140000 bytes is over the 131072-byte limit"
        );
        // Deep nesting neither overflows the stack where it is skipped nor
        // where it is read.
        for field in ["x", "user"] {
            let deep = format!(
                "{{\"type\":\"block_actions\",\"{field}\":{}{}}}",
                "[".repeat(5_000),
                "]".repeat(5_000)
            );
            assert!(parse(&form(&deep)).is_err());
        }
    }

    proptest::proptest! {
        #[test]
        fn parse_never_panics(body in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..400)) {
            let _ = parse(&body);
        }

        #[test]
        fn parse_never_panics_on_json(json in "[{}\\[\\]\":,a-z0-9_ .]{0,200}") {
            let _ = parse(&form(&json));
        }

        #[test]
        fn submitted_text_comes_back_as_typed(text in "\\PC{0,200}", block in "[a-z_]{1,10}") {
            let v = serde_json::json!({
                "type": "view_submission",
                "user": {"id": "U1"},
                "view": {
                    "callback_id": "lev_reply",
                    "private_metadata": "ir_1",
                    "state": {"values": {block.clone(): {"text": {"type": "plain_text_input", "value": text.clone()}}}}
                }
            });
            let SlackAction::Submission { values, .. } = parse(&form(&v.to_string())).unwrap() else {
                panic!("not a submission")
            };
            proptest::prop_assert_eq!(values.get(&format!("{block}.text")), Some(&text));
        }
    }
}
