//! Messages on the operator WebSocket `/v1/operators/{sid}/ws`, and the
//! result a sub-agent posts to `POST /v1/worker/result` (SPEC section 4).

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Client -> server reply messages, one JSON object per text frame.
///
/// Each variant resolves the pending entry registered under its `req_id`,
/// exactly once.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ClientMsg {
    /// Reply to [`ServerMsg::Ask`].
    Answer {
        /// Correlation key copied from the originating `ask`.
        req_id: String,
        /// The answer payload returned to the asking worker.
        value: Value,
    },
    /// Ack for [`ServerMsg::HookBefore`]. `ok: false` rejects the spawn.
    HookAck {
        /// Correlation key copied from the originating `hook_before`.
        req_id: String,
        /// `true` allows the spawn; `false` rejects it.
        ok: bool,
        /// Rejection reason surfaced to the worker when `ok` is false.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    /// Ack for [`ServerMsg::Spawn`]: the sub-agent's outcome.
    ///
    /// `value` `{}` defers to the result the sub-agent posted over HTTP
    /// (`POST /v1/worker/result`); any other value is the result. When `error`
    /// is set, the spawn fails with it.
    SpawnAck {
        /// Correlation key copied from the originating `spawn`.
        req_id: String,
        /// The worker result's value; `{}` defers to the HTTP-path result.
        #[serde(default)]
        value: Value,
        /// The worker result's `ok`; defaults to true when omitted.
        #[serde(default = "default_true")]
        ok: bool,
        /// When set, the spawn fails with this error.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<String>,
    },
}

impl ClientMsg {
    /// The `req_id` the reply resolves.
    pub fn req_id(&self) -> &str {
        match self {
            Self::Answer { req_id, .. }
            | Self::HookAck { req_id, .. }
            | Self::SpawnAck { req_id, .. } => req_id,
        }
    }

    /// The message's `type` tag.
    pub fn type_name(&self) -> &'static str {
        match self {
            Self::Answer { .. } => "answer",
            Self::HookAck { .. } => "hook_ack",
            Self::SpawnAck { .. } => "spawn_ack",
        }
    }
}

fn default_true() -> bool {
    true
}

/// Server -> client messages.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ServerMsg {
    /// Sent on connect: the req_ids still waiting for a reply, each sent again next.
    Hello {
        /// The session this connection operates.
        session_id: String,
        /// Unresolved req_ids.
        pending: Vec<String>,
    },
    /// A worker's question; reply with [`ClientMsg::Answer`].
    Ask {
        /// Correlation key.
        req_id: String,
        /// The question, any JSON (`{"interaction": ...}` for triage).
        question: Value,
    },
    /// A spawn to vet; reply with [`ClientMsg::HookAck`].
    HookBefore {
        /// Correlation key.
        req_id: String,
        /// The spawn as the worker sent it.
        spawn: Value,
    },
    /// A spawn to run; reply with [`ClientMsg::SpawnAck`].
    Spawn {
        /// Correlation key.
        req_id: String,
        /// The task created for it.
        task_id: String,
        /// A token that only lets the sub-agent post this task's result.
        task_token: String,
        /// The spawn as the worker sent it.
        spawn: Value,
    },
    /// Something the client sent was refused; the connection stays up.
    Error {
        /// The req_id concerned, when there is one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        req_id: Option<String>,
        /// A snake_case code: `unknown_req_id`, `already_resolved`, `wrong_reply_kind`,
        /// `malformed`, `unknown_type`.
        code: String,
        /// What went wrong, for a person.
        message: String,
    },
}

/// A sub-agent's result, posted to `POST /v1/worker/result`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct WorkerResult {
    /// The task this result belongs to.
    #[cfg_attr(feature = "openapi", schema(pattern = r"^[A-Za-z0-9._:-]{1,128}$"))]
    pub task_id: String,
    /// The result's value.
    #[serde(default)]
    pub value: Value,
    /// Whether the task succeeded; defaults to true.
    #[serde(default = "default_true")]
    pub ok: bool,
    /// An error, when the task failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The last lines of the sub-agent's output.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_tail: Option<String>,
}
