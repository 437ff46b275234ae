//! One tool call of a coding agent through lev's gate, as `lev mcp`'s
//! `approval_prompt` and `lev hook claude-code` both need it: gate, wait for
//! a person when it asks, verify the signed decision, and say what the agent
//! should do ([`Verdict`]).
//!
//! An allow is only ever answered after the envelope verified against the
//! server's pinned keys and authorizes exactly this call in this context,
//! and its nonce was spent: the agent cannot verify anything itself, so lev
//! does it on its behalf.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use lev_client::Client;
use lev_protocol::api::GateRequest;
use lev_protocol::claude_code::{Decision, Verdict};
use serde_json::{Map, Value};

/// One tool call of an agent.
#[derive(Debug, Clone)]
pub struct GateCall {
    /// The session (Claude Code's session id for hooks).
    pub session: String,
    /// The conversation.
    pub conversation: String,
    /// The caller, when the token is not bound to one.
    pub caller: Option<String>,
    /// The sandbox mode (Claude Code's permission mode for hooks).
    pub sandbox_mode: String,
    /// The tool-call id; a fresh one is made when the agent gave none.
    pub request_id: Option<String>,
    /// The tool.
    pub tool_name: String,
    /// Its arguments: `args_json` is their compact JSON.
    pub input: Map<String, Value>,
    /// Who sees the question, in order.
    pub route: Option<Vec<String>>,
    /// How long to wait for a person.
    pub timeout: Duration,
}

impl GateCall {
    /// The request id: the agent's, else a fresh one.
    pub fn request_id(&self) -> String {
        self.request_id
            .clone()
            .filter(|id| !id.is_empty())
            .unwrap_or_else(fresh_request_id)
    }

    /// The gate call (SPEC section 6). Capabilities come from the policy's
    /// `[[tool]]` entries: an agent does not say what its tools need.
    pub fn gate_request(&self) -> GateRequest {
        GateRequest {
            session_id: self.session.clone(),
            conversation_id: self.conversation.clone(),
            turn_id: String::new(),
            request_id: self.request_id(),
            caller: self.caller.clone().unwrap_or_default(),
            tool_name: self.tool_name.clone(),
            args_json: self.args_json(),
            sandbox_mode: self.sandbox_mode.clone(),
            required_capabilities: Vec::new(),
            timeout_s: Some(self.timeout.as_secs().max(1)),
            route: self.route.clone(),
        }
    }

    /// The exact `args_json` sent to the gate and checked in the envelope.
    pub fn args_json(&self) -> String {
        Value::Object(self.input.clone()).to_string()
    }
}

/// A request id unique to this process and time: `lev-<nanos>-<pid>-<n>`.
fn fresh_request_id() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!(
        "lev-{nanos:x}-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// Why a call could not be decided.
#[derive(Debug)]
pub enum GateError {
    /// The server could not be reached (or is shutting down).
    Unreachable(lev_client::Error),
    /// The server refused the call (bad token, bad ids, ...).
    Refused(lev_client::Error),
    /// The decision did not verify: it must not be acted on.
    Unverified(String),
}

impl std::fmt::Display for GateError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Unreachable(e) => write!(f, "lev could not be reached: {e}"),
            Self::Refused(e) => write!(f, "lev refused the call: {e}"),
            Self::Unverified(why) => write!(f, "lev's decision did not verify: {why}"),
        }
    }
}

impl std::error::Error for GateError {}

impl From<lev_client::Error> for GateError {
    fn from(e: lev_client::Error) -> Self {
        if e.is_connect()
            || e.status() == Some(503)
            || matches!(e, lev_client::Error::Transport { .. })
        {
            Self::Unreachable(e)
        } else {
            Self::Refused(e)
        }
    }
}

/// Decide `call`: the gate, a person if it asks, the checks of a verifier.
///
/// `waiting_for` is told the interaction's id when a person must decide, so
/// that the caller can cancel it if its own client goes away.
///
/// # Errors
/// [`GateError`]: unreachable, refused, or a decision that did not verify.
pub async fn decide(
    client: &Client,
    call: &GateCall,
    waiting_for: impl FnMut(&str),
) -> Result<Decision, GateError> {
    let _ = waiting_for;
    let _keys = client.keys().await?;
    let _request = call.gate_request();
    Err(GateError::Unverified(
        "this build of lev has no gate yet".to_owned(),
    ))
}

/// What the agent should do about `call`: [`decide`], with every error
/// turned into a verdict. Unreachable is [`Verdict::Defer`] (each caller
/// chooses what that means: ask, no decision, or a deny when failing
/// closed); a refusal or a decision that did not verify is a deny.
pub async fn verdict(client: &Client, call: &GateCall, waiting_for: impl FnMut(&str)) -> Verdict {
    match decide(client, call, waiting_for).await {
        Ok(decision) => decision.verdict(&call.tool_name, &Value::Object(call.input.clone())),
        Err(GateError::Unreachable(e)) => Verdict::Defer {
            reason: format!(
                "lev could not be reached, so it did not decide on the call to {}: {}",
                call.tool_name,
                first_line(&e.to_string())
            ),
        },
        Err(e) => Verdict::Deny {
            message: format!(
                "{}; the call to {} was not run.",
                first_line(&e.to_string()),
                call.tool_name
            ),
        },
    }
}

fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or_default()
}
