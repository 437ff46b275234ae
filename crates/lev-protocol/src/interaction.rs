//! Questions a worker asks: [`InteractionRequest`] and its stored form [`Interaction`].

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

/// A question or approval request from a worker.
///
/// On create, `id` is optional (the server assigns an `ir_` id); the same id with
/// an identical body is idempotent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct InteractionRequest {
    /// The interaction's id; the server assigns one when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(pattern = r"^[A-Za-z0-9._:-]{1,128}$"))]
    pub id: Option<String>,
    /// The session this question belongs to. Required.
    #[cfg_attr(feature = "openapi", schema(pattern = r"^[A-Za-z0-9._:-]{1,128}$"))]
    pub session_id: String,
    /// The conversation inside the session, if the worker tracks one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(pattern = r"^[A-Za-z0-9._:-]{1,128}$"))]
    pub conversation_id: Option<String>,
    /// The turn that asked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(pattern = r"^[A-Za-z0-9._:-]{1,128}$"))]
    pub turn_id: Option<String>,
    /// The person the run acts for (set by the control plane for bound tokens).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(pattern = r"^[A-Za-z0-9._:-]{1,128}$"))]
    pub caller: Option<String>,
    /// One line shown above the question.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// What is asked.
    pub kind: InteractionKind,
    /// Seconds until the server applies `on_timeout`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(minimum = 1))]
    pub timeout_s: Option<u64>,
    /// What happens past `timeout_s`; default `deny` for tool approvals, `cancel` otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_timeout: Option<OnTimeout>,
    /// Who sees it, in order; default `["human"]`. A route starting with
    /// `operator` lets the session's operator triage it first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub route: Option<Vec<String>>,
    /// Why the agent wants this (a tool call, mostly): agent text, at most
    /// 4 KiB, shown beside the call; not signed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Opaque data for the worker's own use, at most 16 KiB serialised.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<serde_json::Value>,
    /// Why the gate stopped the call for a person: set by lev's gate on the
    /// tool approvals it opens, refused on a request a client sends.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gate: Option<GateNote>,
    /// How many distinct people must approve a tool approval (SPEC section
    /// 13): set by the server on every tool approval it stores (1 unless
    /// the policy asks for more), refused on a request a client sends.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approvals_needed: Option<u32>,
    /// Who may vote on it, and its escalation, from the policy: set by the
    /// server, refused on a request a client sends. Absent: any approver.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quorum: Option<Quorum>,
    /// What a vote on this tool approval binds, so that a client signs a
    /// vote without rebuilding it: set by the server, refused on a request
    /// a client sends.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vote_binding: Option<VoteBinding>,
}

/// Who may vote on a tool approval beyond "any approver", from the policy
/// rule (or `[[tool]]` entry) that asked for it, groups already expanded.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Quorum {
    /// The token names who may vote; empty: any approver.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub approvers: Vec<String>,
    /// Seconds after creation when `escalate_to` may vote too, and are notified.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub escalate_after_s: Option<u64>,
    /// Who may vote once the interaction has escalated.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub escalate_to: Vec<String>,
    /// Every vote must be signed by the voter's own key.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub require_signed_votes: bool,
    /// The policy line the rule or `[[tool]]` entry starts on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule_line: Option<u64>,
}

/// The call a vote on a tool approval is bound to (SPEC section 13): the
/// fields a voter's signed vote repeats, so a client signs without
/// rebuilding them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct VoteBinding {
    /// The gate call's `request_id` (the tool-call id), or the interaction's
    /// id for a tool approval created directly.
    pub request_id: String,
    /// The tool.
    pub tool_name: String,
    /// Lowercase hex SHA-256 of the exact `args_json` bytes.
    pub args_sha256: String,
    /// The conversation, or empty.
    pub conversation_id: String,
    /// The caller, or empty.
    pub caller: String,
    /// The sandbox mode, or empty.
    pub sandbox_mode: String,
}

/// One person's approve or deny on a tool approval.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Vote {
    /// The voter's token name.
    pub voter: String,
    /// Approve or deny.
    pub approved: bool,
    /// When it was cast.
    #[serde(with = "time::serde::rfc3339")]
    pub at: OffsetDateTime,
    /// Whether the voter signed it with their own key.
    pub signed: bool,
    /// The voter's answer (scope, edit, feedback, ...).
    pub response: crate::StoredResponse,
    /// The voter's signed vote, when signed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub envelope: Option<crate::Envelope>,
}

/// Why the gate asked a person about a call (the policy's side; the
/// missing capabilities are the kind's own).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct GateNote {
    /// The `ask` rule that matched: its line in the policy file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule_line: Option<u64>,
    /// That rule's tool glob.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule_tool: Option<String>,
    /// That rule's reason.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule_reason: Option<String>,
    /// `high` when the rule marks the call high risk.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub risk: Option<String>,
    /// The policy file it came from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<String>,
    /// The rule's `remind_after_s`: approvers are reminded after this many
    /// seconds of waiting, and every such interval after.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remind_after_s: Option<u64>,
}

impl InteractionRequest {
    /// A request of `kind` in `session_id`, every optional field absent.
    pub fn new(session_id: impl Into<String>, kind: InteractionKind) -> Self {
        Self {
            id: None,
            session_id: session_id.into(),
            conversation_id: None,
            turn_id: None,
            caller: None,
            title: None,
            kind,
            timeout_s: None,
            on_timeout: None,
            route: None,
            reason: None,
            metadata: None,
            gate: None,
            approvals_needed: None,
            quorum: None,
            vote_binding: None,
        }
    }

    /// The `on_timeout` in force: the request's own, else the kind's default.
    pub fn effective_on_timeout(&self) -> OnTimeout {
        self.on_timeout.clone().unwrap_or(match self.kind {
            InteractionKind::ToolApproval { .. } => OnTimeout::Deny,
            _ => OnTimeout::Cancel,
        })
    }

    /// The route in force: the request's own, else `["human"]`.
    pub fn effective_route(&self) -> Vec<String> {
        self.route
            .clone()
            .unwrap_or_else(|| vec!["human".to_owned()])
    }

    /// Whether the session's operator should see this first.
    pub fn routes_to_operator_first(&self) -> bool {
        self.route
            .as_ref()
            .and_then(|r| r.first())
            .is_some_and(|first| first.starts_with("operator"))
    }
}

/// What an interaction asks, tagged by `type`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum InteractionKind {
    /// A question answered with text (and optionally files).
    FreeText {
        /// The question.
        prompt: String,
    },
    /// A question answered by picking one option.
    MultipleChoice {
        /// The question.
        prompt: String,
        /// 1 to 64 options, each at most 1 KiB.
        options: Vec<String>,
    },
    /// A tool call that needs approval.
    ToolApproval {
        /// The tool to run.
        tool_name: String,
        /// The proposed arguments, as the exact JSON text the worker sent.
        args_json: String,
        /// Capabilities the call needs that its sandbox mode does not grant.
        #[serde(default)]
        missing_capabilities: Vec<String>,
        /// The sandbox (permission) mode the call runs under.
        #[serde(default)]
        sandbox_mode: String,
        /// Optional labelled answers (0 to 64).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        options: Vec<String>,
    },
    /// A form: answered with a JSON object that its schema (the flat subset
    /// MCP elicitation allows) accepts, checked by the server.
    Form {
        /// The question.
        prompt: String,
        /// The fields: `{"type": "object", "properties": {...}, "required": [...]}`.
        #[cfg_attr(feature = "openapi", schema(value_type = Object))]
        schema: crate::form::FormSchema,
    },
    /// Points to look at; answered with text.
    InteractionPoints {
        /// The question.
        prompt: String,
        /// The points, each shown to the person.
        points: Vec<Point>,
    },
}

impl InteractionKind {
    /// The kind's tag as it appears on the wire.
    pub fn type_name(&self) -> &'static str {
        match self {
            Self::FreeText { .. } => "free_text",
            Self::MultipleChoice { .. } => "multiple_choice",
            Self::ToolApproval { .. } => "tool_approval",
            Self::InteractionPoints { .. } => "interaction_points",
            Self::Form { .. } => "form",
        }
    }
}

/// One point of an `interaction_points` question.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Point {
    /// The point's id, unique within the question.
    #[cfg_attr(feature = "openapi", schema(pattern = r"^[A-Za-z0-9._:-]{1,128}$"))]
    pub id: String,
    /// What the point says.
    pub text: String,
}

/// What happens to an interaction past its `timeout_s`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OnTimeout {
    /// Status `expired`; a waiter treats it as a plain deny.
    Deny,
    /// Status `cancelled`.
    Cancel,
    /// Answered with this `choice_index` (multiple choice only), `answered_by` `timeout`.
    Choice(usize),
}

impl Serialize for OnTimeout {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct ChoiceRepr {
            choice: usize,
        }
        match self {
            Self::Deny => s.serialize_str("deny"),
            Self::Cancel => s.serialize_str("cancel"),
            Self::Choice(choice) => ChoiceRepr { choice: *choice }.serialize(s),
        }
    }
}

impl<'de> Deserialize<'de> for OnTimeout {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Repr {
            Word(String),
            Choice { choice: usize },
        }
        match Repr::deserialize(d).map_err(|_| {
            serde::de::Error::custom(r#"expected "deny", "cancel" or {"choice": N}"#)
        })? {
            Repr::Word(w) if w == "deny" => Ok(Self::Deny),
            Repr::Word(w) if w == "cancel" => Ok(Self::Cancel),
            Repr::Word(w) => Err(serde::de::Error::custom(format!(
                r#"expected "deny", "cancel" or {{"choice": N}}, found "{w}""#
            ))),
            Repr::Choice { choice } => Ok(Self::Choice(choice)),
        }
    }
}

/// Where an interaction stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum InteractionStatus {
    /// Waiting for an answer.
    Pending,
    /// Answered (by a person, an operator, a grant or a timeout's `choice`).
    Answered,
    /// Timed out with `on_timeout: deny`.
    Expired,
    /// Cancelled by the worker, or timed out with `on_timeout: cancel`.
    Cancelled,
}

impl InteractionStatus {
    /// The status as written on the wire and in storage.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Answered => "answered",
            Self::Expired => "expired",
            Self::Cancelled => "cancelled",
        }
    }

    /// Parse the wire form.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "pending" => Self::Pending,
            "answered" => Self::Answered,
            "expired" => Self::Expired,
            "cancelled" => Self::Cancelled,
            _ => return None,
        })
    }

    /// Whether no answer can change it any more.
    pub fn is_final(self) -> bool {
        self != Self::Pending
    }
}

/// An interaction as the server stores and returns it: the request with its
/// assigned id and the fields the server adds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Interaction {
    /// The request, `id` always set.
    #[serde(flatten)]
    pub request: InteractionRequest,
    /// Where it stands.
    pub status: InteractionStatus,
    /// When the server stored it.
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: OffsetDateTime,
    /// When `on_timeout` applies, if it has a timeout.
    #[serde(default, with = "time::serde::rfc3339::option")]
    pub expires_at: Option<OffsetDateTime>,
    /// When it was answered.
    #[serde(default, with = "time::serde::rfc3339::option")]
    pub answered_at: Option<OffsetDateTime>,
    /// Who answered: a token name, `policy`, `timeout`, or an operator's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answered_by: Option<String>,
    /// The votes cast on a tool approval, in the order they were cast.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub votes: Vec<Vote>,
}

impl Interaction {
    /// The interaction's id (the server always sets it).
    pub fn id(&self) -> &str {
        self.request.id.as_deref().unwrap_or_default()
    }

    /// How many distinct people must approve (1 unless the policy asked for more).
    pub fn approvals_needed(&self) -> u32 {
        self.request.approvals_needed.unwrap_or(1).max(1)
    }

    /// When `escalate_to` may vote too, if the policy escalates it.
    pub fn escalates_at(&self) -> Option<OffsetDateTime> {
        let q = self.request.quorum.as_ref()?;
        let s = i64::try_from(q.escalate_after_s?).ok()?;
        self.created_at.checked_add(time::Duration::seconds(s))
    }

    /// Whether `name` may vote at `now`: anyone when no approvers are named,
    /// else the approvers, and `escalate_to` once escalated.
    pub fn may_vote(&self, name: &str, now: OffsetDateTime) -> bool {
        let Some(q) = &self.request.quorum else {
            return true;
        };
        if q.approvers.is_empty() || q.approvers.iter().any(|a| a == name) {
            return true;
        }
        q.escalate_to.iter().any(|a| a == name) && self.escalates_at().is_some_and(|t| now >= t)
    }

    /// Who may still vote at `now`, by name: `None` when any approver may.
    /// Those who voted are left out; `escalate_to` are in once escalated.
    pub fn may_still_vote(&self, now: OffsetDateTime) -> Option<Vec<String>> {
        let q = self.request.quorum.as_ref()?;
        if q.approvers.is_empty() {
            return None;
        }
        let mut names = q.approvers.clone();
        if self.escalates_at().is_some_and(|t| now >= t) {
            names.extend(q.escalate_to.iter().cloned());
        }
        names.sort();
        names.dedup();
        names.retain(|n| !self.votes.iter().any(|v| &v.voter == n));
        Some(names)
    }

    /// How many approving votes it holds.
    pub fn approvals(&self) -> usize {
        self.votes.iter().filter(|v| v.approved).count()
    }

    /// Whether a grant may stand in for this decision: not when more than
    /// one person must approve, nor when votes must be signed.
    pub fn grants_may_decide(&self) -> bool {
        self.approvals_needed() <= 1
            && !self
                .request
                .quorum
                .as_ref()
                .is_some_and(|q| q.require_signed_votes)
    }
}

/// Arbitrary key/value metadata, for callers who want a typed map.
pub type Metadata = BTreeMap<String, serde_json::Value>;

/// `"deny"`, `"cancel"` or `{"choice": N}`, as [`OnTimeout`]'s serde writes it.
#[cfg(feature = "openapi")]
impl utoipa::PartialSchema for OnTimeout {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        use utoipa::openapi::schema::{ObjectBuilder, OneOfBuilder, Type};
        let word = ObjectBuilder::new()
            .schema_type(Type::String)
            .enum_values(Some(["deny", "cancel"]));
        let choice = ObjectBuilder::new()
            .schema_type(Type::Object)
            .property(
                "choice",
                ObjectBuilder::new()
                    .schema_type(Type::Integer)
                    .minimum(Some(0)),
            )
            .required("choice");
        OneOfBuilder::new()
            .item(word)
            .item(choice)
            .description(Some(
                "What happens past `timeout_s`: `deny`, `cancel`, or `{\"choice\": N}` (multiple choice only).",
            ))
            .into()
    }
}

#[cfg(feature = "openapi")]
impl utoipa::ToSchema for OnTimeout {}
