//! Bodies of the HTTP API (SPEC section 3) that are not interactions or answers.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use time::OffsetDateTime;

use crate::envelope::Envelope;
use crate::interaction::{Interaction, InteractionStatus};
use crate::response::StoredResponse;

/// Every error body: `{"error": {"code", "message"}}`, with the winning answer
/// beside it on a 409 `already_answered`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ErrorBody {
    /// The error.
    pub error: ErrorDetail,
    /// The answer that won, on 409 `already_answered`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response: Option<StoredResponse>,
}

/// The inside of an [`ErrorBody`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ErrorDetail {
    /// A stable snake_case code.
    pub code: String,
    /// What went wrong, for a person.
    pub message: String,
    /// On a refused form answer: each failing property and why.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub fields: std::collections::BTreeMap<String, String>,
}

/// `GET /v1/health`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Health {
    /// Always `ok` when the server answers.
    pub status: String,
    /// The server's version.
    pub version: String,
    /// `sqlite` or `postgres`.
    pub store: String,
    /// The answering server's id among the replicas sharing its store,
    /// made when it started (empty from a server that predates it).
    #[serde(default)]
    pub replica_id: String,
}

/// `GET /v1/keys`: the trusted public keys.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Jwks {
    /// The keys, newest first.
    pub keys: Vec<Jwk>,
}

/// One Ed25519 public key as a JWK.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Jwk {
    /// `OKP`.
    pub kty: String,
    /// `Ed25519`.
    pub crv: String,
    /// The raw public key, base64url without padding.
    pub x: String,
    /// The key id (16 hex digits).
    #[serde(default)]
    pub kid: String,
    /// `EdDSA`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alg: Option<String>,
    /// `sig`.
    #[serde(default, rename = "use", skip_serializing_if = "Option::is_none")]
    pub use_: Option<String>,
}

/// `GET /v1/people/keys`: every person's registered public keys (SPEC
/// section 13), with which votes are checked offline.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct PeopleJwks {
    /// The keys, by person and number.
    pub keys: Vec<PersonJwk>,
}

/// A person's public key as a JWK: Ed25519 (`OKP`, from `lev key init`, or
/// a passkey's EdDSA) or P-256 (`EC`, a passkey's ES256). Its `kid` is
/// `person:NAME:N`, NAME the person's token name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct PersonJwk {
    /// `OKP` or `EC`.
    pub kty: String,
    /// `Ed25519` or `P-256`.
    pub crv: String,
    /// The public key (Ed25519), or its x coordinate (P-256), base64url.
    pub x: String,
    /// The y coordinate of a P-256 key, base64url.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub y: Option<String>,
    /// `person:NAME:N`; empty when registering.
    #[serde(default)]
    pub kid: String,
    /// `EdDSA` or `ES256`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alg: Option<String>,
    /// `sig`.
    #[serde(default, rename = "use", skip_serializing_if = "Option::is_none")]
    pub use_: Option<String>,
    /// A passkey's relying party id (the dashboard's host): its votes are
    /// WebAuthn assertions for it. Absent: a key of `lev key init`, whose
    /// votes are plain Ed25519 signatures.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rp_id: Option<String>,
    /// A passkey's credential id, base64url.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credential_id: Option<String>,
}

/// `POST /v1/people/keys` and `POST /v1/people/passkeys`: 201.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct PersonKeyRegistered {
    /// The key as `GET /v1/people/keys` serves it, with its `kid`.
    pub key: PersonJwk,
    /// The person it is registered to (the token's name).
    pub person: String,
}

/// `GET /v1/people/passkeys/options`: what the dashboard needs to make a
/// passkey (WebAuthn `navigator.credentials.create`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct PasskeyOptions {
    /// The registration challenge, base64url: bound to this login session.
    pub challenge: String,
    /// The relying party id: the host the dashboard is opened on.
    pub rp_id: String,
    /// The relying party's name, shown by the authenticator.
    pub rp_name: String,
    /// The user handle, base64url.
    pub user_id: String,
    /// The person's token name.
    pub user_name: String,
    /// Credential ids already registered to this person, base64url.
    pub exclude_credentials: Vec<String>,
}

/// `POST /v1/people/passkeys`: a passkey made by the dashboard.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct PasskeyRegistration {
    /// The credential id, base64url.
    pub credential_id: String,
    /// The credential's public key as SubjectPublicKeyInfo DER, base64
    /// (`AuthenticatorAttestationResponse.getPublicKey()`).
    pub public_key: String,
    /// Its COSE algorithm: -7 (ES256) or -8 (EdDSA).
    pub alg: i64,
    /// The registration's client data JSON, base64.
    pub client_data_json: String,
}

/// One page of a list: every list route answers this shape.
///
/// `GET /v1/interactions` (`Page<InteractionView>`, newest first),
/// `GET /v1/tasks` (`Page<Task>`, newest first), `GET /v1/tokens`
/// (`Page<TokenInfo>`, by name), `GET /v1/grants` (`Page<Grant>`, oldest
/// first), and, with the chain's signed head beside it, `GET /v1/audit`
/// ([`AuditPage`]).
///
/// `next_cursor` is always written: `null` on the last page, else the value
/// to pass as `?cursor=` for the next one. A list the server answers whole
/// (tokens, grants) always has `null`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Page<T> {
    /// This page's items.
    pub items: Vec<T>,
    /// Pass as `cursor` for the next page; `null` on the last.
    #[serde(default)]
    pub next_cursor: Option<String>,
}

impl<T> Page<T> {
    /// A page with nothing after it.
    pub fn last(items: Vec<T>) -> Self {
        Self {
            items,
            next_cursor: None,
        }
    }

    /// Whether a page follows this one.
    pub fn has_more(&self) -> bool {
        self.next_cursor.is_some()
    }
}

impl<T> Default for Page<T> {
    fn default() -> Self {
        Self::last(Vec::new())
    }
}

/// `GET /v1/interactions/{id}`, and an item of a listing.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct InteractionView {
    /// The stored interaction.
    pub request: Interaction,
    /// Its answer, once answered.
    #[serde(default)]
    pub response: Option<StoredResponse>,
    /// The signed decision, for a decided tool approval.
    #[serde(default)]
    pub approval: Option<Envelope>,
}

/// `GET /v1/interactions/{id}/wait`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct WaitResponse {
    /// `pending` when the wait timed out, else the final status.
    pub status: InteractionStatus,
    /// The answer, when answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response: Option<StoredResponse>,
    /// The signed decision, for a decided tool approval.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval: Option<Envelope>,
    /// Who answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answered_by: Option<String>,
}

/// `POST /v1/interactions/{id}/respond`: 200.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RespondResult {
    /// The stored answer; for a vote that did not decide yet, the vote's.
    pub response: StoredResponse,
    /// The signed decision, for a tool approval once decided.
    #[serde(default)]
    pub approval: Option<Envelope>,
    /// `pending` (answered 202) when the answer was a vote recorded while
    /// more approvals are needed; absent when it decided.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<crate::InteractionStatus>,
    /// A tool approval's votes so far, this one included.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub votes: Vec<crate::Vote>,
    /// How many distinct people must approve the tool approval.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approvals_needed: Option<u32>,
}

/// `POST /v1/gate`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct GateRequest {
    /// The session.
    #[cfg_attr(feature = "openapi", schema(pattern = r"^[A-Za-z0-9._:-]{1,128}$"))]
    pub session_id: String,
    /// The conversation the call belongs to.
    #[serde(default)]
    pub conversation_id: String,
    /// The turn that made the call.
    #[serde(default)]
    pub turn_id: String,
    /// The tool-call id; with the session, the idempotency key.
    #[cfg_attr(feature = "openapi", schema(pattern = r"^[A-Za-z0-9._:-]{1,128}$"))]
    pub request_id: String,
    /// The person the run acts for.
    #[serde(default)]
    pub caller: String,
    /// The tool.
    pub tool_name: String,
    /// The proposed args, exact JSON text.
    pub args_json: String,
    /// The sandbox (permission) mode the call runs under.
    #[serde(default)]
    pub sandbox_mode: String,
    /// Capabilities the call needs, on top of the policy's for the tool.
    #[serde(default)]
    pub required_capabilities: Vec<String>,
    /// How long a person has to answer, when it asks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_s: Option<u64>,
    /// As for interactions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub route: Option<Vec<String>>,
    /// Why the agent wants the call: agent text, at most 4 KiB, carried to
    /// the interaction when the gate asks a person; not signed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// The gate's answer (always 200).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(tag = "decision", rename_all = "snake_case")]
pub enum GateResponse {
    /// Allowed: run it after verifying the envelope.
    Allow {
        /// The signed approval.
        approval: Envelope,
    },
    /// Denied by a rule.
    Deny {
        /// Why.
        reason: String,
        /// The signed denial, when one was made.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        approval: Option<Envelope>,
    },
    /// A person (or the operator) must decide: wait on the interaction.
    Ask {
        /// The interaction to wait on.
        interaction_id: String,
    },
}

/// `POST /v1/nonces/consume`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct NonceConsume {
    /// The approval's nonce.
    #[cfg_attr(feature = "openapi", schema(pattern = r"^[!-~]{1,256}$"))]
    pub nonce: String,
}

/// A session or always grant, as `GET /v1/grants` lists it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Grant {
    /// `gr_...`.
    pub id: String,
    /// `session` or `always`.
    pub scope: crate::response::ApprovalScope,
    /// Whose calls it approves.
    pub caller: String,
    /// The conversation, for a session grant.
    #[serde(default)]
    pub conversation_id: Option<String>,
    /// The sandbox mode it holds under.
    pub sandbox_mode: String,
    /// The tool it approves.
    pub tool_name: String,
    /// The shortfall it covers (sorted).
    pub covered_capabilities: Vec<String>,
    /// JSON pointer -> regex the args must match, if narrowed.
    #[serde(default)]
    pub grant_args: Option<BTreeMap<String, String>>,
    /// Who granted it.
    pub approver: String,
    /// The interaction whose answer made it.
    #[serde(default)]
    pub interaction_id: Option<String>,
    /// When it was made.
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: OffsetDateTime,
}

/// A task's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum TaskStatus {
    /// Created, not yet started.
    Pending,
    /// The operator is running it.
    Running,
    /// Finished well.
    Succeeded,
    /// Finished badly.
    Failed,
}

impl TaskStatus {
    /// Whether the task is finished.
    pub fn is_finished(self) -> bool {
        matches!(self, Self::Succeeded | Self::Failed)
    }
}

/// A sub-agent task.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Task {
    /// `tk_...`.
    pub id: String,
    /// The session that spawned it.
    pub session_id: String,
    /// Where it stands.
    pub status: TaskStatus,
    /// The spawn as the worker sent it.
    pub spawn: Value,
    /// The last result posted over HTTP.
    #[serde(default)]
    pub last_result: Option<Value>,
    /// The last lines of output.
    #[serde(default)]
    pub output_tail: Option<String>,
    /// The error, when it failed.
    #[serde(default)]
    pub error: Option<String>,
    /// The caller the spawning worker acted for, when it named one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub caller: Option<String>,
    /// When it was created.
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: OffsetDateTime,
    /// When it last changed.
    #[serde(with = "time::serde::rfc3339")]
    pub updated_at: OffsetDateTime,
}

/// `POST /v1/sessions/{sid}/ask`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AskRequest {
    /// The question, any JSON.
    pub question: Value,
    /// How long to wait for the answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_s: Option<u64>,
}

/// The answer to an [`AskRequest`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AskResponse {
    /// The answer, any JSON.
    pub answer: Value,
    /// The operator's or the person's token name.
    pub answered_by: String,
}

/// `POST /v1/sessions/{sid}/spawn`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SpawnRequest {
    /// What to spawn, any JSON.
    pub spawn: Value,
    /// Bound on the whole call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_s: Option<u64>,
}

/// The outcome of a [`SpawnRequest`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SpawnResponse {
    /// The task that ran it.
    pub task_id: String,
    /// Whether it succeeded.
    pub ok: bool,
    /// Its result.
    #[serde(default)]
    pub value: Value,
    /// Its error, when it failed.
    #[serde(default)]
    pub error: Option<String>,
}

/// A token's role.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// Creates interactions, calls the gate, waits.
    Worker,
    /// Connects to a session's operator WebSocket.
    Operator,
    /// Answers interactions.
    Approver,
    /// May do everything.
    Admin,
}

impl Role {
    /// The wire form.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Worker => "worker",
            Self::Operator => "operator",
            Self::Approver => "approver",
            Self::Admin => "admin",
        }
    }

    /// Parse the wire form.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "worker" => Self::Worker,
            "operator" => Self::Operator,
            "approver" => Self::Approver,
            "admin" => Self::Admin,
            _ => return None,
        })
    }
}

/// `POST /v1/tokens`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TokenCreate {
    /// The token's name: the identity written into decisions.
    #[cfg_attr(feature = "openapi", schema(pattern = r"^[A-Za-z0-9._:-]{1,128}$"))]
    pub name: String,
    /// Its role.
    pub role: Role,
    /// For worker tokens: the caller every request acts for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(pattern = r"^[A-Za-z0-9._:-]{1,128}$"))]
    pub caller: Option<String>,
    /// The sessions the token may act in (patterns, `*` any run of
    /// characters): required for operator tokens, optional for workers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sessions: Option<Vec<String>>,
}

/// The answer to [`TokenCreate`]: the secret, shown once.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TokenCreated {
    /// The name.
    pub name: String,
    /// The role.
    pub role: Role,
    /// The secret.
    pub token: String,
}

/// A token as `GET /v1/tokens` lists it (never the secret).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TokenInfo {
    /// The name.
    pub name: String,
    /// The role.
    pub role: Role,
    /// The bound caller, for worker tokens.
    #[serde(default)]
    pub caller: Option<String>,
    /// The session patterns it is limited to; absent, any session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sessions: Option<Vec<String>>,
    /// When it was made.
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: OffsetDateTime,
}

/// One entry of the audit log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AuditEntry {
    /// Position in the log, from 1.
    pub seq: u64,
    /// When it was written (RFC 3339, as hashed).
    pub at: String,
    /// What happened: `interaction.created`, `interaction.answered`, `token.created`, ...
    pub action: String,
    /// Who did it (a token name, `policy`, `timeout`, `system`).
    pub actor: String,
    /// The details.
    pub data: Value,
    /// The previous entry's hash (64 zeros for the first).
    pub prev_hash: String,
    /// SHA-256 over this entry's canonical form, lowercase hex.
    pub hash: String,
}

/// The chain's head, signed by the server.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AuditHead {
    /// The last entry's seq (0 for an empty log).
    pub seq: u64,
    /// The last entry's hash.
    pub hash: String,
    /// The head signed as a DSSE envelope.
    pub signature: Envelope,
}

/// `GET /v1/audit`: a [`Page`] of entries (oldest first, after `?after=` or
/// `?cursor=`) with the head of the whole chain beside them:
/// `{"items", "next_cursor", "head"}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AuditPage {
    /// The entries, and the cursor of the next page (`null` once a page
    /// reaches the head).
    #[serde(flatten)]
    pub page: Page<AuditEntry>,
    /// The head of the whole chain.
    pub head: AuditHead,
}

/// `POST /v1/nonces/consume`: 200, the first time only.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct NonceSpent {
    /// The nonce, as sent.
    pub nonce: String,
    /// Always `true`: a spent nonce is 409 `nonce_spent` instead.
    pub spent: bool,
}

/// `POST /v1/login` (the dashboard): a token's secret for a session cookie.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct LoginRequest {
    /// The token's secret.
    pub token: String,
}

/// The answer to `POST /v1/login` and to `GET /v1/me`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Me {
    /// The token's name: the identity written into decisions.
    pub name: String,
    /// Its role.
    pub role: Role,
    /// The session's CSRF token (none for a bearer token).
    #[serde(default)]
    pub csrf_token: Option<String>,
    /// Whether `@path` in a text answer attaches a file below the server's
    /// `--attach-root`.
    #[serde(default)]
    pub attach_root: bool,
}

/// `POST /v1/logout`: `{"status": "logged_out"}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct LoggedOut {
    /// Always `logged_out`.
    pub status: String,
}

impl Default for LoggedOut {
    fn default() -> Self {
        Self {
            status: "logged_out".into(),
        }
    }
}

/// `GET /v1/operators?sessions=a,b`: which sessions have an operator
/// connected (an answer about the sessions asked for, not a list to page).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct OperatorPresence {
    /// One row per session asked about, sorted, without duplicates.
    pub sessions: Vec<SessionPresence>,
}

/// One row of [`OperatorPresence`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SessionPresence {
    /// The session.
    pub session_id: String,
    /// Whether an operator is connected to it.
    pub connected: bool,
}

/// The kinds of event `GET /v1/events` streams and webhooks deliver.
pub const EVENT_KINDS: &[&str] = &[
    "interaction.created",
    "interaction.answered",
    "interaction.expired",
    "interaction.cancelled",
    "interaction.escalated",
    "interaction.voted",
    "interaction.reminder",
    "task.updated",
    "operator.connected",
    "operator.disconnected",
];

/// Check an event filter: known kinds ([`EVENT_KINDS`]), each once; `*`
/// (all) gives the empty filter. The server and `lev webhook add` both use it.
///
/// # Errors
/// A message naming the unknown kind.
pub fn check_event_kinds(events: &[String]) -> Result<Vec<String>, String> {
    let mut out: Vec<String> = Vec::new();
    for e in events {
        let e = e.trim();
        if e == "*" {
            return Ok(Vec::new());
        }
        if !EVENT_KINDS.contains(&e) {
            return Err(format!(
                "events: unknown event {:?}; expected some of {}",
                e.chars().take(80).collect::<String>(),
                EVENT_KINDS.join(", ")
            ));
        }
        if !out.iter().any(|o| o == e) {
            out.push(e.to_owned());
        }
    }
    Ok(out)
}

/// `POST /v1/webhooks` (admin).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct WebhookCreate {
    /// Where deliveries go: `http://` or `https://`.
    #[cfg_attr(feature = "openapi", schema(pattern = r"^[Hh][Tt][Tt][Pp][Ss]?://"))]
    pub url: String,
    /// The event kinds to deliver ([`EVENT_KINDS`]); empty or absent for
    /// every kind.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub events: Vec<String>,
    /// The signing secret, `whsec_` and base64 of 24 to 64 random bytes;
    /// absent, the server makes one and returns it this once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret: Option<String>,
}

/// A webhook endpoint, as `GET /v1/webhooks` lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Webhook {
    /// `wh_...`.
    pub id: String,
    /// `http` (Standard Webhooks) or `slack` (the Slack integration).
    pub kind: String,
    /// Where deliveries go.
    pub url: String,
    /// The kinds delivered; empty for every kind.
    #[serde(default)]
    pub events: Vec<String>,
    /// Who added it.
    pub created_by: String,
    /// When.
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: OffsetDateTime,
    /// When it was disabled (the receiver answered 410 Gone), if it was.
    #[serde(default, with = "time::serde::rfc3339::option")]
    pub disabled_at: Option<OffsetDateTime>,
    /// Why it was disabled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disabled_reason: Option<String>,
    /// The signing secret: only in the answer to [`WebhookCreate`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret: Option<String>,
}

/// One attempt to deliver.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct WebhookAttempt {
    /// When.
    #[serde(with = "time::serde::rfc3339")]
    pub at: OffsetDateTime,
    /// The receiver's HTTP status, when it answered.
    #[serde(default)]
    pub status: Option<u16>,
    /// What went wrong, when something did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// How long it took.
    pub duration_ms: u64,
}

/// A delivery, as `GET /v1/webhooks/{id}/deliveries` lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct WebhookDelivery {
    /// The `webhook-id` header: the same on every attempt.
    pub id: String,
    /// The event's kind.
    pub event: String,
    /// `pending`, `delivered` or `failed`.
    pub state: String,
    /// When it was written, with its event.
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: OffsetDateTime,
    /// When the next attempt is due, while pending.
    #[serde(default, with = "time::serde::rfc3339::option")]
    pub next_attempt_at: Option<OffsetDateTime>,
    /// Every attempt, oldest first.
    #[serde(default)]
    pub attempts: Vec<WebhookAttempt>,
}
