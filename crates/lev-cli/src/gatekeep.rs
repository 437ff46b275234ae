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

use lev_approval::TrustedKeys;
use lev_client::Client;
use lev_client::gate::{GateError as SdkGateError, GateOutcome, Gatekeeper, RefusalKind, ToolCall};
use lev_protocol::ApprovalScope;
use lev_protocol::api::{GateRequest, GateResponse};
use lev_protocol::claude_code::{Decision, Verdict};
use serde_json::{Map, Value};

use crate::deadline::Deadline;

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
    /// Why the agent wants the call (its justification), shown to the
    /// person; not signed.
    pub reason: Option<String>,
    /// Capabilities the call needs on top of the policy's for the tool.
    pub required_capabilities: Vec<String>,
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
            required_capabilities: self.required_capabilities.clone(),
            timeout_s: Some(self.timeout.as_secs().max(1)),
            route: self.route.clone(),
            reason: self.reason.clone(),
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
    /// lev did not decide before the call's deadline (its timeout and a
    /// margin): a server that hangs, trickles or stalls counts as unreachable.
    Deadline(String),
}

impl std::fmt::Display for GateError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Unreachable(e) => write!(f, "lev could not be reached: {e}"),
            Self::Refused(e) => write!(f, "lev refused the call: {e}"),
            Self::Unverified(why) => write!(f, "lev's decision did not verify: {why}"),
            Self::Deadline(missed) => write!(f, "{missed}"),
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
    Gatekeeper::pinned(client.clone())
        .await
        .map(|g| g.keys().clone())
        .map_err(GateError::from)
}

/// How the gate settled a call, verified: what [`decide`] and the Codex
/// bridge build their answers on.
#[derive(Debug)]
pub enum Settled {
    /// A policy rule denied it at the gate (nothing was signed).
    PolicyDenied {
        /// The rule's reason.
        reason: String,
    },
    /// The gate allowed it, or a person decided.
    Outcome {
        /// Run it (verified, nonce spent) or not.
        outcome: GateOutcome,
        /// The interaction a person answered, when the gate asked.
        interaction: Option<String>,
    },
}

/// Settle `call` with the SDK's [`Gatekeeper`]: the gate, a person if it
/// asks, then the checks of a verifier against `keys` (see [`pinned_keys`]):
/// the envelope verifies, authorizes exactly this call in this conversation
/// and sandbox mode (and for this caller when one was named), and its nonce
/// is spent. Only then is the outcome a [`GateOutcome::Run`].
///
/// `waiting_for` is told the interaction's id when a person must decide, so
/// that the caller can cancel it if its own client goes away.
///
/// All of it within [`Deadline::from_now`]`(call.timeout)`: whatever the
/// server does (hangs, trickles a body, stalls mid-answer), the call is
/// settled or [`GateError::Deadline`] by then.
///
/// # Errors
/// [`GateError`]: unreachable, refused, a decision that did not verify, or
/// the deadline.
pub async fn settle(
    client: &Client,
    keys: &TrustedKeys,
    call: &GateCall,
    waiting_for: impl FnMut(&str),
) -> Result<Settled, GateError> {
    let deadline = Deadline::from_now(call.timeout);
    deadline
        .run(settle_now(client, keys, call, waiting_for))
        .await
        .unwrap_or_else(|| Err(GateError::Deadline(deadline.missed())))
}

async fn settle_now(
    client: &Client,
    keys: &TrustedKeys,
    call: &GateCall,
    mut waiting_for: impl FnMut(&str),
) -> Result<Settled, GateError> {
    let gatekeeper = Gatekeeper::new(client.clone(), keys.clone());
    let request = call.gate_request();
    let tool_call = ToolCall {
        session_id: request.session_id,
        conversation_id: request.conversation_id,
        turn_id: request.turn_id,
        request_id: request.request_id,
        caller: request.caller,
        tool_name: request.tool_name,
        args_json: request.args_json,
        sandbox_mode: request.sandbox_mode,
        required_capabilities: request.required_capabilities,
        timeout: Some(call.timeout),
        route: request.route,
        reason: request.reason,
    };
    let submitted = gatekeeper.submit(&tool_call).await?;
    if let GateResponse::Deny { reason, .. } = submitted.response() {
        return Ok(Settled::PolicyDenied {
            reason: reason.clone(),
        });
    }
    let interaction = submitted.interaction_id().map(str::to_owned);
    if let Some(id) = &interaction {
        waiting_for(id);
    }
    let outcome = gatekeeper.settle(&tool_call, submitted).await?;
    Ok(Settled::Outcome {
        outcome,
        interaction,
    })
}

/// Decide `call`: [`settle`] it, then say what it came to as a [`Decision`].
///
/// # Errors
/// [`GateError`]: unreachable, refused, or a decision that did not verify.
pub async fn decide(
    client: &Client,
    keys: &TrustedKeys,
    call: &GateCall,
    waiting_for: impl FnMut(&str),
) -> Result<Decision, GateError> {
    let outcome = match settle(client, keys, call, waiting_for).await? {
        Settled::PolicyDenied { reason } => return Ok(Decision::DeniedByPolicy { reason }),
        Settled::Outcome { outcome, .. } => outcome,
    };
    match outcome {
        GateOutcome::Run(approved) => {
            let verified = approved.verified();
            // A person's session or always grant for any args lets the agent
            // stop asking about the tool; an allow by an earlier grant or a
            // rule does not.
            let remember_for_session =
                approved
                    .answer()
                    .and_then(|a| a.response())
                    .is_some_and(|r| {
                        matches!(
                            r.scope,
                            Some(ApprovalScope::Session | ApprovalScope::Always)
                        ) && r.grant_args.is_none()
                    });
            Ok(Decision::Allowed {
                approver: verified.payload.approver.clone(),
                modified_args_json: Some(verified.payload.modified_args_json.clone())
                    .filter(|m| !m.is_empty()),
                injected_context: approved.injected_context().map(str::to_owned),
                remember_for_session,
            })
        }
        GateOutcome::Refused(refusal) => Ok(match refusal.kind {
            // The gate's own deny was answered above; a rule can only deny here
            // through a signed denial, whose reason is in the text.
            RefusalKind::Policy => Decision::DeniedByPolicy {
                reason: String::new(),
            },
            RefusalKind::Denied => Decision::DeniedByPerson {
                feedback: refusal.feedback,
            },
            RefusalKind::Expired => Decision::Expired,
            RefusalKind::Cancelled => Decision::Cancelled,
            RefusalKind::TimedOut => Decision::TimedOut {
                waited_s: call.timeout.as_secs(),
            },
        }),
    }
}

impl From<SdkGateError> for GateError {
    fn from(e: SdkGateError) -> Self {
        match e {
            SdkGateError::Client(e) => e.into(),
            other => Self::Unverified(other.to_string()),
        }
    }
}

/// What the agent should do about `call`: [`decide`], with every error
/// turned into a verdict, by `deadline` (fetching the keys included).
/// Unreachable and the deadline are [`Verdict::Defer`] (each caller chooses
/// what that means: ask, no decision, or a deny when failing closed); a
/// refusal or a decision that did not verify is a deny.
pub async fn verdict(
    client: &Client,
    keys: Option<&TrustedKeys>,
    call: &GateCall,
    deadline: Deadline,
    waiting_for: impl FnMut(&str),
) -> Verdict {
    let decided = deadline
        .run(async {
            match keys {
                Some(keys) => decide(client, keys, call, waiting_for).await,
                None => match pinned_keys(client).await {
                    Ok(keys) => decide(client, &keys, call, waiting_for).await,
                    Err(e) => Err(e),
                },
            }
        })
        .await
        .unwrap_or_else(|| Err(GateError::Deadline(deadline.missed())));
    match decided {
        Err(GateError::Deadline(missed)) => Verdict::Defer {
            reason: format!("{missed} on the call to {}", call.tool_name),
        },
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

/// The first line of `text`.
pub fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use lev_test_support::{Stall, Stalling};

    use super::*;

    /// The Codex bridge settles each approval request through `settle`: a
    /// lev that takes the call and never answers (or trickles) is the
    /// deadline's error by `--timeout` and its margin, never a request held
    /// for a minute while Codex waits.
    #[test]
    fn settle_ends_at_its_deadline_whatever_the_server_does() {
        let rt = crate::connect::runtime().unwrap();
        for stall in [Stall::Silent, Stall::TrickleBody, Stall::TrickleHeaders] {
            let server = Stalling::start(stall).unwrap();
            let client = Client::new(server.url(), Some("lev_x".into())).unwrap();
            let call = GateCall {
                session: "s".into(),
                conversation: "s".into(),
                caller: None,
                sandbox_mode: "default".into(),
                request_id: Some("r-1".into()),
                tool_name: "shell".into(),
                input: Map::new(),
                route: None,
                timeout: Duration::from_secs(1),
                reason: None,
                required_capabilities: Vec::new(),
            };
            let started = Instant::now();
            let settled = rt.block_on(settle(&client, &TrustedKeys::new(), &call, |_| {}));
            let took = started.elapsed();
            assert!(
                matches!(&settled, Err(GateError::Deadline(m)) if m == "lev did not decide within 2 s"),
                "{stall:?}: {settled:?}"
            );
            assert!(took < Duration::from_secs(6), "{stall:?}: after {took:?}");
        }
    }
}
