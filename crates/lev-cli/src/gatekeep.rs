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

use lev_approval::{Call, NotAuthorized, TrustedKeys};
use lev_client::{Client, Outcome};
use lev_protocol::ApprovalScope;
use lev_protocol::api::{ErrorBody, GateRequest, GateResponse, NonceConsume};
use lev_protocol::claude_code::{Decision, Verdict};
use serde_json::{Map, Value};
use time::OffsetDateTime;

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

/// The server's trusted keys, fetched once and then pinned: a verifier
/// trusts the keys it started with, not whatever a later answer claims.
///
/// # Errors
/// [`GateError`] when the keys cannot be fetched or none is usable.
pub async fn pinned_keys(client: &Client) -> Result<TrustedKeys, GateError> {
    let jwks = client.keys().await?;
    let mut trusted = TrustedKeys::new();
    for jwk in &jwks.keys {
        if let Ok(raw) = lev_approval::decode_base64(&jwk.x) {
            let _ = trusted.insert_bytes(&raw);
        }
    }
    if trusted.is_empty() {
        return Err(GateError::Unverified(
            "GET /v1/keys lists no usable Ed25519 key".to_owned(),
        ));
    }
    Ok(trusted)
}

/// Decide `call`: the gate, a person if it asks, the checks of a verifier
/// against `keys` (see [`pinned_keys`]).
///
/// `waiting_for` is told the interaction's id when a person must decide, so
/// that the caller can cancel it if its own client goes away.
///
/// # Errors
/// [`GateError`]: unreachable, refused, or a decision that did not verify.
pub async fn decide(
    client: &Client,
    keys: &TrustedKeys,
    call: &GateCall,
    mut waiting_for: impl FnMut(&str),
) -> Result<Decision, GateError> {
    let request = call.gate_request();
    let (envelope, response) = match post_gate(client, &request).await? {
        GateResponse::Allow { approval } => (approval, None),
        GateResponse::Deny { reason, .. } => return Ok(Decision::DeniedByPolicy { reason }),
        GateResponse::Ask { interaction_id } => {
            waiting_for(&interaction_id);
            let answer = client
                .wait_for_answer(&interaction_id, Some(call.timeout))
                .await?;
            match answer.outcome {
                Outcome::Answered {
                    response, approval, ..
                } => {
                    if response.approved != Some(true) {
                        return Ok(Decision::DeniedByPerson {
                            feedback: response.deny_feedback().map(str::to_owned),
                        });
                    }
                    let Some(approval) = approval else {
                        return Err(GateError::Unverified(
                            "the call was approved without a signed approval".to_owned(),
                        ));
                    };
                    (approval, Some(response))
                }
                Outcome::Expired => return Ok(Decision::Expired),
                Outcome::Cancelled => return Ok(Decision::Cancelled),
                Outcome::TimedOut { waited } => {
                    return Ok(Decision::TimedOut {
                        waited_s: waited.as_secs(),
                    });
                }
            }
        }
    };
    let verified = lev_approval::verify(&envelope, keys, OffsetDateTime::now_utc())
        .map_err(|e| GateError::Unverified(e.to_string()))?;
    let checked = verified.check_call(&Call {
        request_id: &request.request_id,
        tool_name: &request.tool_name,
        args_json: request.args_json.as_bytes(),
        conversation_id: Some(&request.conversation_id),
        // A token bound to a caller makes the server name that caller; only
        // a caller this side named itself can be checked here.
        caller: call.caller.as_deref(),
        sandbox_mode: Some(&request.sandbox_mode),
    });
    match checked {
        Ok(()) => {}
        Err(NotAuthorized::Denied { reason }) => return Ok(Decision::DeniedByPolicy { reason }),
        Err(e) => return Err(GateError::Unverified(e.to_string())),
    }
    spend_nonce(client, &verified.nonce).await?;
    // A person's session or always grant for any args lets the agent stop
    // asking about the tool; an allow by an earlier grant or a rule does not.
    let remember_for_session = response.as_ref().is_some_and(|r| {
        matches!(
            r.scope,
            Some(ApprovalScope::Session | ApprovalScope::Always)
        ) && r.grant_args.is_none()
    });
    Ok(Decision::Allowed {
        approver: verified.approver,
        modified_args_json: Some(verified.modified_args_json).filter(|m| !m.is_empty()),
        injected_context: Some(verified.injected_context).filter(|c| !c.is_empty()),
        remember_for_session,
    })
}

/// `POST /v1/gate`.
async fn post_gate(client: &Client, request: &GateRequest) -> Result<GateResponse, GateError> {
    let response = http(client, "/v1/gate", request).await?;
    let bytes = response
        .bytes()
        .await
        .map_err(|e| transport("/v1/gate", e))?;
    serde_json::from_slice(&bytes)
        .map_err(|e| GateError::Unverified(format!("POST /v1/gate: expected a gate decision, {e}")))
}

/// `POST /v1/nonces/consume`: 200 the first time; 409 means the approval was
/// used before, and must not be acted on again.
async fn spend_nonce(client: &Client, nonce: &str) -> Result<(), GateError> {
    match http(
        client,
        "/v1/nonces/consume",
        &NonceConsume {
            nonce: nonce.to_owned(),
        },
    )
    .await
    {
        Ok(_) => Ok(()),
        Err(GateError::Refused(e)) if e.status() == Some(409) => Err(GateError::Unverified(
            "the approval's nonce was spent before: it runs its call once".to_owned(),
        )),
        Err(e) => Err(e),
    }
}

/// POST `body` as JSON to `path` with the client's token; a non-2xx answer is
/// [`GateError::Refused`] with the server's error code and message.
async fn http(
    client: &Client,
    path: &'static str,
    body: &impl serde::Serialize,
) -> Result<reqwest::Response, GateError> {
    static HTTP: std::sync::OnceLock<reqwest::Client> = std::sync::OnceLock::new();
    let http = HTTP.get_or_init(|| {
        reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .timeout(Duration::from_secs(60))
            .no_proxy()
            .build()
            .unwrap_or_default()
    });
    let mut request = http.post(format!("{}{path}", client.base_url())).json(body);
    if let Some(token) = client.token() {
        request = request.bearer_auth(token);
    }
    let response = request.send().await.map_err(|e| {
        if e.is_connect() {
            GateError::Unreachable(lev_client::Error::Connect {
                url: client.base_url().to_owned(),
                source: e,
            })
        } else {
            transport(path, e)
        }
    })?;
    let status = response.status();
    if status.is_success() {
        return Ok(response);
    }
    let bytes = response.bytes().await.unwrap_or_default();
    let (code, message) = match serde_json::from_slice::<ErrorBody>(&bytes) {
        Ok(body) => (body.error.code, body.error.message),
        Err(_) => (
            "error".to_owned(),
            format!("the server answered {status} to POST {path}"),
        ),
    };
    Err(lev_client::Error::Api {
        status: status.as_u16(),
        code,
        message,
        winner: None,
    }
    .into())
}

fn transport(path: &'static str, source: reqwest::Error) -> GateError {
    GateError::Unreachable(lev_client::Error::Transport {
        method: "POST",
        path: path.to_owned(),
        source,
    })
}

/// What the agent should do about `call`: [`decide`], with every error
/// turned into a verdict. Unreachable is [`Verdict::Defer`] (each caller
/// chooses what that means: ask, no decision, or a deny when failing
/// closed); a refusal or a decision that did not verify is a deny.
pub async fn verdict(
    client: &Client,
    keys: Option<&TrustedKeys>,
    call: &GateCall,
    waiting_for: impl FnMut(&str),
) -> Verdict {
    let decided = match keys {
        Some(keys) => decide(client, keys, call, waiting_for).await,
        None => match pinned_keys(client).await {
            Ok(keys) => decide(client, &keys, call, waiting_for).await,
            Err(e) => Err(e),
        },
    };
    match decided {
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
