//! Claude Code's contracts (SPEC section 10): the hook events lev reads, the
//! hook outputs and the permission-prompt result lev writes, and the one pure
//! mapping from a lev decision to what the agent reads.
//!
//! Both `lev hook claude-code` (the CLI) and `POST /v1/hooks/claude-code` (the
//! server) shape their answers here, and `lev mcp`'s `approval_prompt` too, so
//! the three never drift apart. Claude Code parses these outputs strictly: an
//! answer it cannot read counts as a deny, so every shape is a typed struct
//! with its exact field names, and the tests in `tests/all/claude_code.rs`
//! pin the JSON byte for byte.
//!
//! # What each lev decision becomes
//!
//! | lev | `approval_prompt` | PreToolUse | PermissionRequest |
//! | --- | --- | --- | --- |
//! | allow | `behavior: allow`, `updatedInput` = the input | `permissionDecision: allow` | `behavior: allow` |
//! | allow with an edit | `updatedInput` = the edited args | `updatedInput` = the edited args | `updatedInput` = the edited args |
//! | session grant (a person's answer, no `grant_args`) | `updatedPermissions`: add a session rule for the tool | (lev's grant answers the next call) | (same) |
//! | injected context | (no field: lost) | `additionalContext` | (no field: lost) |
//! | deny, with feedback | `behavior: deny`, `message` = the sentence and `Feedback:` | `permissionDecision: deny`, `permissionDecisionReason` | `behavior: deny`, `message` |
//! | nobody decided in time | a deny that says so | a deny that says so | a deny that says so |
//! | lev unreachable | (the tool call fails) | `permissionDecision: ask` | no output (or a deny with `--fail-closed`) |

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The name of lev's permission-prompt tool, as Claude Code's
/// `--permission-prompt-tool mcp__lev__approval_prompt` names it.
pub const APPROVAL_PROMPT_TOOL: &str = "approval_prompt";

/// The name of lev's question tool.
pub const ASK_HUMAN_TOOL: &str = "ask_human";

/// The hook events lev answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum HookEventName {
    /// Before every tool call: may allow, deny, ask, edit and add context.
    PreToolUse,
    /// When Claude Code would show its permission dialog: may allow or deny.
    PermissionRequest,
}

impl HookEventName {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::PreToolUse => "PreToolUse",
            Self::PermissionRequest => "PermissionRequest",
        }
    }

    fn parse(name: &str) -> Option<Self> {
        match name {
            "PreToolUse" => Some(Self::PreToolUse),
            "PermissionRequest" => Some(Self::PermissionRequest),
            _ => None,
        }
    }
}

/// A Claude Code hook event, as a command hook reads it on stdin and an
/// `http` hook receives it as the request body. Fields lev does not use
/// (`transcript_path`, `permission_suggestions`, ...) are ignored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct HookEvent {
    /// `PreToolUse` or `PermissionRequest`.
    pub hook_event_name: HookEventName,
    /// Claude Code's session: lev's session and conversation.
    #[cfg_attr(feature = "openapi", schema(pattern = r"^[A-Za-z0-9._:-]{1,128}$"))]
    pub session_id: String,
    /// The working directory of the session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// The tool about to run, such as `Bash` or `mcp__github__create_issue`.
    pub tool_name: String,
    /// The tool's arguments.
    pub tool_input: Map<String, Value>,
    /// The tool call's id: the gate's request id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_use_id: Option<String>,
    /// Claude Code's permission mode (`default`, `plan`, `acceptEdits`, ...):
    /// lev's sandbox mode.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub permission_mode: Option<String>,
}

/// Why a hook event cannot be answered: the agent's blocking error.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HookEventError {
    /// Not one JSON object.
    #[error("malformed hook event: expected one JSON object, {0}")]
    NotJson(String),
    /// No `hook_event_name`, or not a string.
    #[error("malformed hook event: expected a string `hook_event_name`, found {0}")]
    NoEventName(String),
    /// An event lev does not answer.
    #[error(
        "unsupported hook event {0:?}: lev answers PreToolUse and PermissionRequest\nhint: register `lev hook claude-code` under those two events only"
    )]
    Unsupported(String),
    /// A supported event with a missing or mistyped field.
    #[error("malformed {event} event: {reason}")]
    Malformed {
        /// The event's name.
        event: &'static str,
        /// What is wrong, as serde says it (`missing field `tool_name``).
        reason: String,
    },
}

impl HookEvent {
    /// Read one hook event.
    ///
    /// # Errors
    /// [`HookEventError`] saying what is wrong: not JSON, no event name, an
    /// event lev does not answer, a missing or mistyped field.
    ///
    /// # Example
    /// ```
    /// use lev_protocol::claude_code::{HookEvent, HookEventName};
    /// let event = HookEvent::parse(br#"{"hook_event_name":"PreToolUse","session_id":"s",
    ///     "tool_name":"Bash","tool_input":{"command":"ls"}}"#).unwrap();
    /// assert_eq!(event.hook_event_name, HookEventName::PreToolUse);
    /// ```
    pub fn parse(bytes: &[u8]) -> Result<Self, HookEventError> {
        let value: Value =
            serde_json::from_slice(bytes).map_err(|e| HookEventError::NotJson(e.to_string()))?;
        let Value::Object(object) = &value else {
            return Err(HookEventError::NotJson(format!(
                "found {}",
                json_kind(&value)
            )));
        };
        let name = match object.get("hook_event_name") {
            Some(Value::String(name)) => name,
            Some(other) => return Err(HookEventError::NoEventName(json_kind(other).to_owned())),
            None => return Err(HookEventError::NoEventName("none".to_owned())),
        };
        let Some(event) = HookEventName::parse(name) else {
            return Err(HookEventError::Unsupported(name.clone()));
        };
        serde_json::from_value(value).map_err(|e| HookEventError::Malformed {
            event: event.as_str(),
            reason: e.to_string(),
        })
    }

    /// The gate's `args_json`: the tool input as compact JSON.
    pub fn args_json(&self) -> String {
        Value::Object(self.tool_input.clone()).to_string()
    }
}

fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// What lev decided about one tool call, as the agent's outputs need it.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// Run it.
    Allow(Allowed),
    /// Do not run it; `message` is what the model reads.
    Deny {
        /// The sentence, with the person's feedback when there is one.
        message: String,
    },
    /// lev could not decide (it is unreachable): let the agent ask its user
    /// (PreToolUse), or give no decision (PermissionRequest).
    Defer {
        /// Why, for the agent's log and its permission prompt.
        reason: String,
    },
}

/// An allowed call.
#[derive(Debug, Clone, PartialEq)]
pub struct Allowed {
    /// The input to run with: the approver's edit, else the original input.
    pub updated_input: Value,
    /// Who or what allowed it, for `permissionDecisionReason`.
    pub reason: String,
    /// Text to put before the tool runs (`additionalContext`).
    pub additional_context: Option<String>,
    /// Whether the agent may remember the approval for its session
    /// (`updatedPermissions`): a person's session or always grant that
    /// covers any args of the tool.
    pub remember_for_session: bool,
}

/// How a tool call was decided, as lev saw it: the input of [`Decision::verdict`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Allowed by the policy, a grant or a person; the envelope was verified.
    Allowed {
        /// `policy`, a grant's approver or the person's token name.
        approver: String,
        /// The approver's edit (JSON text), if any.
        modified_args_json: Option<String>,
        /// Text to put before the tool runs, if any.
        injected_context: Option<String>,
        /// Whether the answer made a session or always grant for any args of
        /// the tool (so the agent may stop asking for this tool).
        remember_for_session: bool,
    },
    /// Denied by a person (or the operator), perhaps with feedback.
    DeniedByPerson {
        /// What the person wants the model to do instead.
        feedback: Option<String>,
    },
    /// Denied by a policy rule.
    DeniedByPolicy {
        /// The rule's reason.
        reason: String,
    },
    /// Past the interaction's own timeout (`on_timeout: deny`).
    Expired,
    /// Cancelled before anyone decided.
    Cancelled,
    /// This waiter gave up after `waited_s` seconds with nothing decided.
    TimedOut {
        /// How long it waited.
        waited_s: u64,
    },
}

impl Decision {
    /// The verdict for a call of `tool_name` with `input`.
    ///
    /// An edit that is not a JSON object cannot be given to the agent as
    /// `updatedInput`, so it becomes a deny that says so: running the original
    /// args instead would run what nobody approved.
    pub fn verdict(&self, tool_name: &str, input: &Value) -> Verdict {
        let deny = |message: String| Verdict::Deny { message };
        match self {
            Self::Allowed {
                approver,
                modified_args_json,
                injected_context,
                remember_for_session,
            } => {
                let updated_input = match modified_args_json.as_deref().filter(|t| !t.is_empty()) {
                    None => input.clone(),
                    Some(text) => match serde_json::from_str::<Value>(text) {
                        Ok(value @ Value::Object(_)) => value,
                        _ => {
                            return deny(format!(
                                "The approved edit of the call to {tool_name} is not a JSON object, so it cannot be run; the call was not run."
                            ));
                        }
                    },
                };
                let reason = match approver.as_str() {
                    "policy" => "allowed by lev's policy".to_owned(),
                    "" => "approved in lev".to_owned(),
                    who => format!("approved in lev by {who}"),
                };
                Verdict::Allow(Allowed {
                    updated_input,
                    reason,
                    additional_context: injected_context
                        .as_deref()
                        .filter(|c| !c.trim().is_empty())
                        .map(str::to_owned),
                    remember_for_session: *remember_for_session,
                })
            }
            Self::DeniedByPerson { feedback } => {
                let mut message =
                    format!("The person denied the call to {tool_name}; it was not run.");
                if let Some(feedback) = feedback.as_deref().map(str::trim).filter(|f| !f.is_empty())
                {
                    message.push_str("\nFeedback: ");
                    message.push_str(feedback);
                }
                deny(message)
            }
            Self::DeniedByPolicy { reason } => {
                let reason = reason.trim();
                if reason.is_empty() {
                    deny(format!(
                        "lev's policy denies the call to {tool_name}; it was not run."
                    ))
                } else {
                    deny(format!(
                        "lev's policy denies the call to {tool_name}: {reason}. It was not run."
                    ))
                }
            }
            Self::Expired => deny(format!(
                "The call to {tool_name} was denied: nobody approved it in time. It was not run."
            )),
            Self::Cancelled => deny(format!(
                "The approval request for {tool_name} was cancelled before anyone decided; the call was not run."
            )),
            Self::TimedOut { waited_s } => deny(format!(
                "Nobody decided on the call to {tool_name} within {waited_s} s; it was not run."
            )),
        }
    }
}

/// The JSON object a hook prints (command hook) or answers (http hook).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct HookOutput {
    /// The event's decision.
    #[serde(rename = "hookSpecificOutput")]
    pub hook_specific_output: HookSpecificOutput,
}

/// The event-specific part of a [`HookOutput`], tagged by `hookEventName`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(tag = "hookEventName")]
pub enum HookSpecificOutput {
    /// The answer to a PreToolUse event.
    PreToolUse {
        /// `allow`, `deny` or `ask`.
        #[serde(rename = "permissionDecision")]
        permission_decision: PermissionDecision,
        /// Shown to the model on a deny, to the user on an ask.
        #[serde(rename = "permissionDecisionReason")]
        permission_decision_reason: String,
        /// The input to run with, on an allow.
        #[serde(
            rename = "updatedInput",
            default,
            skip_serializing_if = "Option::is_none"
        )]
        updated_input: Option<Value>,
        /// The approver's injected context, on an allow.
        #[serde(
            rename = "additionalContext",
            default,
            skip_serializing_if = "Option::is_none"
        )]
        additional_context: Option<String>,
    },
    /// The answer to a PermissionRequest event.
    PermissionRequest {
        /// Allow (with the input to run) or deny (with the message).
        decision: PermissionRequestDecision,
    },
}

/// PreToolUse's `permissionDecision`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "lowercase")]
pub enum PermissionDecision {
    /// Run it without asking.
    Allow,
    /// Do not run it.
    Deny,
    /// Let the agent ask its user.
    Ask,
}

/// PermissionRequest's `decision`, tagged by `behavior`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(tag = "behavior", rename_all = "lowercase")]
pub enum PermissionRequestDecision {
    /// Run it.
    Allow {
        /// The input to run with.
        #[serde(rename = "updatedInput")]
        updated_input: Value,
    },
    /// Do not run it.
    Deny {
        /// What the model reads.
        message: String,
    },
}

/// The output of `event` for `verdict`: `None` means print nothing, so the
/// agent's own flow decides (a PermissionRequest that lev could not decide).
pub fn hook_output(event: HookEventName, verdict: &Verdict) -> Option<HookOutput> {
    let hook_specific_output = match (event, verdict) {
        (HookEventName::PreToolUse, Verdict::Allow(allowed)) => HookSpecificOutput::PreToolUse {
            permission_decision: PermissionDecision::Allow,
            permission_decision_reason: allowed.reason.clone(),
            updated_input: Some(allowed.updated_input.clone()),
            additional_context: allowed.additional_context.clone(),
        },
        (HookEventName::PreToolUse, Verdict::Deny { message }) => HookSpecificOutput::PreToolUse {
            permission_decision: PermissionDecision::Deny,
            permission_decision_reason: message.clone(),
            updated_input: None,
            additional_context: None,
        },
        (HookEventName::PreToolUse, Verdict::Defer { reason }) => HookSpecificOutput::PreToolUse {
            permission_decision: PermissionDecision::Ask,
            permission_decision_reason: reason.clone(),
            updated_input: None,
            additional_context: None,
        },
        (HookEventName::PermissionRequest, Verdict::Allow(allowed)) => {
            HookSpecificOutput::PermissionRequest {
                decision: PermissionRequestDecision::Allow {
                    updated_input: allowed.updated_input.clone(),
                },
            }
        }
        (HookEventName::PermissionRequest, Verdict::Deny { message }) => {
            HookSpecificOutput::PermissionRequest {
                decision: PermissionRequestDecision::Deny {
                    message: message.clone(),
                },
            }
        }
        (HookEventName::PermissionRequest, Verdict::Defer { .. }) => return None,
    };
    Some(HookOutput {
        hook_specific_output,
    })
}

/// The input of `approval_prompt`, Claude Code's permission-prompt contract.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PermissionPromptInput {
    /// The tool Claude wants to call.
    pub tool_name: String,
    /// Its arguments.
    pub input: Map<String, Value>,
    /// The tool call's id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_use_id: Option<String>,
}

/// The JSON text of `approval_prompt`'s one text content block.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "behavior", rename_all = "lowercase")]
pub enum PermissionPromptResult {
    /// Run it.
    Allow {
        /// The input to run with: the edit, else the original input. Always present.
        #[serde(rename = "updatedInput")]
        updated_input: Value,
        /// A session rule for the tool, for a person's session grant.
        #[serde(
            rename = "updatedPermissions",
            default,
            skip_serializing_if = "Option::is_none"
        )]
        updated_permissions: Option<Vec<PermissionUpdate>>,
    },
    /// Do not run it.
    Deny {
        /// What the model reads.
        message: String,
    },
}

/// One entry of `updatedPermissions`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PermissionUpdate {
    /// `addRules`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The rules to add.
    pub rules: Vec<PermissionRule>,
    /// `allow`.
    pub behavior: String,
    /// `session`: the agent forgets it when its session ends.
    pub destination: String,
}

/// A permission rule naming a tool.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PermissionRule {
    /// The tool.
    #[serde(rename = "toolName")]
    pub tool_name: String,
}

impl PermissionPromptResult {
    /// The result for a call of `tool_name` decided as `verdict`. A
    /// [`Verdict::Defer`] is a deny here: the permission-prompt contract has
    /// no "ask", and an answer the agent cannot act on must not run the call.
    pub fn from_verdict(tool_name: &str, verdict: &Verdict) -> Self {
        match verdict {
            Verdict::Allow(allowed) => Self::Allow {
                updated_input: allowed.updated_input.clone(),
                updated_permissions: allowed.remember_for_session.then(|| {
                    vec![PermissionUpdate {
                        kind: "addRules".to_owned(),
                        rules: vec![PermissionRule {
                            tool_name: tool_name.to_owned(),
                        }],
                        behavior: "allow".to_owned(),
                        destination: "session".to_owned(),
                    }]
                }),
            },
            Verdict::Deny { message } => Self::Deny {
                message: message.clone(),
            },
            Verdict::Defer { reason } => Self::Deny {
                message: reason.clone(),
            },
        }
    }

    /// The compact JSON text the tool returns.
    pub fn to_json_text(&self) -> String {
        crate::json::to_string_inert(self, false).unwrap_or_else(|_| {
            r#"{"behavior":"deny","message":"lev could not write its answer; the call was not run."}"#
                .to_owned()
        })
    }
}
