//! Answers: [`InteractionResponse`], as written by the dashboard, `lev respond`,
//! an operator, a grant or the policy.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// A response written by the dashboard (or `lev respond`) to answer the worker.
///
/// `P` is the attachment type: [`InboundPart`] (with the bytes) on the way in,
/// [`StoredPart`] (name, type, size, digest; never the bytes) on the way out.
/// Every field but `request_id` may be absent, so an answer written before a
/// field existed keeps parsing with the meaning it had.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(bound(serialize = "P: Serialize", deserialize = "P: Deserialize<'de>"))]
pub struct InteractionResponse<P = InboundPart> {
    /// Must match `InteractionRequest.id`.
    pub request_id: String,
    /// The person's free-text value (free text, interaction points).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    /// Index into `options` for multiple choice and tool approval.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub choice_index: Option<usize>,
    /// Whether a tool approval was granted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approved: Option<bool>,
    /// Scope of a tool approval decision.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<ApprovalScope>,
    /// What the person wants the model to do instead, on a denied tool approval.
    ///
    /// Absent (the default) is the plain deny every existing client sends. Only
    /// ever read alongside `approved: Some(false)`; see [`Self::deny_feedback`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub feedback: Option<String>,
    /// Files attached to a text answer. Absent on every answer written before
    /// parts existed, and on every answer that is not text.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub parts: Vec<P>,
    /// The approver's edit of the proposed args (valid JSON text); grants only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub modified_args_json: Option<String>,
    /// Text to put before the tool runs, marked as internal.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub injected_context: Option<String>,
    /// Free-form reason for the decision.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Narrows a session or always grant to calls whose args match: JSON
    /// pointer -> regex. Absent: the grant covers any args of that tool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grant_args: Option<BTreeMap<String, String>>,
    /// The voter's own signed vote on a tool approval (SPEC section 13): a
    /// DSSE envelope of type [`crate::VOTE_PAYLOAD_TYPE`] signed by a key
    /// registered to the answering person. Kept with the vote, not in the
    /// stored answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vote: Option<crate::Envelope>,
    /// The answer to a `form`: property name to value, as its schema accepts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Object>))]
    pub fields: Option<serde_json::Map<String, serde_json::Value>>,
}

/// A response as the server returns it: parts are stored references.
pub type StoredResponse = InteractionResponse<StoredPart>;

impl<P> InteractionResponse<P> {
    fn empty(request_id: String) -> Self {
        Self {
            request_id,
            value: None,
            choice_index: None,
            approved: None,
            scope: None,
            feedback: None,
            parts: Vec::new(),
            modified_args_json: None,
            injected_context: None,
            reason: None,
            grant_args: None,
            vote: None,
            fields: None,
        }
    }

    /// The same answer, with files attached.
    pub fn with_parts(mut self, parts: Vec<P>) -> Self {
        self.parts = parts;
        self
    }

    /// Build a simple text response.
    pub fn text(request_id: impl Into<String>, value: impl Into<String>) -> Self {
        Self {
            value: Some(value.into()),
            ..Self::empty(request_id.into())
        }
    }

    /// Build a choice response (0-based index).
    pub fn choice(request_id: impl Into<String>, index: usize) -> Self {
        Self {
            choice_index: Some(index),
            ..Self::empty(request_id.into())
        }
    }

    /// Build a form's answer.
    pub fn form(
        request_id: impl Into<String>,
        fields: serde_json::Map<String, serde_json::Value>,
    ) -> Self {
        Self {
            fields: Some(fields),
            ..Self::empty(request_id.into())
        }
    }

    /// Build an approval response.
    pub fn approval(request_id: impl Into<String>, approved: bool, scope: ApprovalScope) -> Self {
        Self {
            approved: Some(approved),
            scope: Some(scope),
            ..Self::empty(request_id.into())
        }
    }

    /// Build a deny that tells the model what to do instead.
    ///
    /// The text is trimmed, and an answer that is all whitespace is the plain
    /// deny: the tool result must not carry an empty "Feedback:" for the model
    /// to puzzle over.
    pub fn deny_with_feedback(request_id: impl Into<String>, feedback: &str) -> Self {
        let trimmed = feedback.trim();
        Self {
            approved: Some(false),
            scope: Some(ApprovalScope::Once),
            feedback: (!trimmed.is_empty()).then(|| trimmed.to_owned()),
            ..Self::empty(request_id.into())
        }
    }

    /// The redirect a denied tool approval carries, if the person wrote one.
    ///
    /// `None` on a grant, whatever the field says: feedback beside
    /// `approved: true` is a client bug, and the model must not be told the
    /// call it just ran was refused. All-whitespace feedback is `None` too.
    pub fn deny_feedback(&self) -> Option<&str> {
        if self.approved != Some(false) {
            return None;
        }
        self.feedback
            .as_deref()
            .map(str::trim)
            .filter(|f| !f.is_empty())
    }

    /// Whether this answer approves a tool call.
    pub fn is_grant(&self) -> bool {
        self.approved == Some(true)
    }

    /// The same answer with other parts: how the server turns what it received
    /// into what it returns.
    pub fn map_parts<Q>(self, parts: Vec<Q>) -> InteractionResponse<Q> {
        InteractionResponse {
            request_id: self.request_id,
            value: self.value,
            choice_index: self.choice_index,
            approved: self.approved,
            scope: self.scope,
            feedback: self.feedback,
            parts,
            modified_args_json: self.modified_args_json,
            injected_context: self.injected_context,
            reason: self.reason,
            grant_args: self.grant_args,
            vote: self.vote,
            fields: self.fields,
        }
    }
}

/// How long a tool approval lasts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum ApprovalScope {
    /// This call only.
    #[default]
    Once,
    /// This call, and the same tool with a covered shortfall for the rest of
    /// the conversation.
    Session,
    /// Like `session`, in every conversation, until revoked.
    Always,
}

impl ApprovalScope {
    /// Whether the scope records a grant.
    pub fn is_grant_scope(self) -> bool {
        matches!(self, Self::Session | Self::Always)
    }

    /// The wire form.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Once => "once",
            Self::Session => "session",
            Self::Always => "always",
        }
    }
}

/// A file attached to an answer, as sent: its bytes in base64.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct InboundPart {
    /// The file's name as the person gave it; the server keeps a plain file name.
    pub name: String,
    /// Its media type, such as `text/markdown`.
    pub media_type: String,
    /// The bytes, standard base64.
    pub data: String,
}

/// A file attached to an answer, as stored: the bytes are at `GET /v1/blobs/{sha256}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct StoredPart {
    /// A plain file name (no directory, no control character).
    pub name: String,
    /// Its media type.
    pub media_type: String,
    /// Size in bytes.
    pub size: u64,
    /// SHA-256 of the bytes, lowercase hex.
    pub sha256: String,
    /// The name exactly as sent, when the server had to reduce it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub original_name: Option<String>,
}
