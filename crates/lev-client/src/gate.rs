//! The gate helper for a tool executor (SPEC sections 5 and 6): gate the
//! call, wait for a person when the gate asks, verify the signed decision
//! against pinned keys, check that it authorizes exactly this call in this
//! context, spend its nonce, and only then hand over the args to run.
//!
//! The types make the order impossible to skip: the args to run come only
//! from an [`ApprovedCall`], and an `ApprovedCall` is made only here, after
//! every check passed. A refusal comes back as [`Refusal`], with the text the
//! model reads (the person's feedback included).
//!
//! # Example
//! ```no_run
//! use lev_client::Client;
//! use lev_client::gate::{Gatekeeper, GateOutcome, ToolCall};
//!
//! # async fn f() -> Result<(), lev_client::gate::GateError> {
//! let client = Client::new("http://127.0.0.1:7420", Some("worker-secret".into()))?;
//! // Pin the server's keys once (or load them from configuration).
//! let gatekeeper = Gatekeeper::pinned(client).await?;
//! let call = ToolCall::new("s-1", "call-1", "shell", r#"{"argv":["ls"],"cwd":"/tmp"}"#);
//! match gatekeeper.decide(&call).await? {
//!     GateOutcome::Run(approved) => {
//!         let args = approved.args()?; // the edited args when the person edited them
//!         let output = format!("ran {args}");
//!         println!("{}", approved.tool_result_text(&output));
//!     }
//!     GateOutcome::Refused(refusal) => println!("{}", refusal.text),
//! }
//! # Ok(()) }
//! ```

use std::sync::Arc;
use std::time::Duration;

use lev_approval::{
    Call, Clock, NotAuthorized, PeopleKeys, SystemClock, ToolGlob, TrustedKeys, VerifiedResponse,
    VerifyError, verify,
};
use lev_protocol::Envelope;
use lev_protocol::api::{GateRequest, GateResponse, Grant, Jwks, NonceConsume};
use reqwest::Method;
use serde_json::Value;

use crate::client::Client;
use crate::error::Error;
use crate::render::{INTERNAL_CLOSE, INTERNAL_OPEN};
use crate::worker::{Answer, Outcome};

/// The longest the gate call itself may take (an ordinary request's time).
const GATE_TIMEOUT: Duration = Duration::from_secs(60);

/// Why the helper could not reach a decision it trusts.
#[derive(Debug, thiserror::Error)]
pub enum GateError {
    /// Talking to the server failed, or it refused the call (422, 409, ...).
    #[error(transparent)]
    Client(#[from] Error),
    /// The pinned key set is unusable.
    #[error("the server's keys: {0}")]
    Keys(#[from] lev_approval::KeyError),
    /// The envelope is not a genuine, currently valid approval.
    #[error("the signed approval does not verify: {0}")]
    Unverified(#[from] VerifyError),
    /// The envelope is genuine but does not authorize this call here.
    #[error("the signed approval does not authorize this call: {0}")]
    NotAuthorized(NotAuthorized),
    /// The approval's nonce was spent before: it was used already.
    #[error("the approval was used before (its nonce is spent): refusing to run the call again")]
    NonceSpent,
    /// The server said the call was approved but sent no signed approval.
    #[error("the server approved the call without a signed approval; refusing to run it")]
    NoApproval,
    /// The approved args are not JSON (they always are, when lev signed them).
    #[error("the approved args are not JSON: {0}")]
    Args(#[from] serde_json::Error),
    /// The tool needs people's own signed votes, and the decision does not
    /// carry enough that verify (SPEC section 13).
    #[error("the approval of {tool} lacks people's signed votes: {why}")]
    NotEnoughVotes {
        /// The tool.
        tool: String,
        /// How many counted, how many were needed, and why others did not.
        why: lev_approval::NotEnoughVotes,
    },
}

/// One tool call to gate.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCall {
    /// The session.
    pub session_id: String,
    /// The conversation the call belongs to (may be empty).
    pub conversation_id: String,
    /// The turn that made the call (may be empty).
    pub turn_id: String,
    /// The tool-call id; with the session, the gate's idempotency key.
    pub request_id: String,
    /// The person the run acts for (empty: the token's bound caller, if any).
    pub caller: String,
    /// The tool.
    pub tool_name: String,
    /// The proposed args, exactly as they will be checked.
    pub args_json: String,
    /// The sandbox (permission) mode the call runs under.
    pub sandbox_mode: String,
    /// Capabilities the call needs, on top of the policy's for the tool.
    pub required_capabilities: Vec<String>,
    /// How long a person has to decide; `None` waits for ever.
    pub timeout: Option<Duration>,
    /// Who sees the question, in order.
    pub route: Option<Vec<String>>,
    /// Why the agent wants the call (at most 4 KiB), shown to the person
    /// who decides; not signed.
    pub reason: Option<String>,
}

impl ToolCall {
    /// A call with no conversation, turn, caller, sandbox mode or capabilities.
    pub fn new(
        session_id: impl Into<String>,
        request_id: impl Into<String>,
        tool_name: impl Into<String>,
        args_json: impl Into<String>,
    ) -> Self {
        Self {
            session_id: session_id.into(),
            conversation_id: String::new(),
            turn_id: String::new(),
            request_id: request_id.into(),
            caller: String::new(),
            tool_name: tool_name.into(),
            args_json: args_json.into(),
            sandbox_mode: String::new(),
            required_capabilities: Vec::new(),
            timeout: None,
            route: None,
            reason: None,
        }
    }

    /// The body of `POST /v1/gate`.
    pub fn gate_request(&self) -> GateRequest {
        GateRequest {
            session_id: self.session_id.clone(),
            conversation_id: self.conversation_id.clone(),
            turn_id: self.turn_id.clone(),
            request_id: self.request_id.clone(),
            caller: self.caller.clone(),
            tool_name: self.tool_name.clone(),
            args_json: self.args_json.clone(),
            sandbox_mode: self.sandbox_mode.clone(),
            required_capabilities: self.required_capabilities.clone(),
            timeout_s: self.timeout.map(|t| t.as_secs().max(1)),
            route: self.route.clone(),
            reason: self.reason.clone(),
        }
    }

    /// The call as a verifier checks it: identity byte for byte, and the
    /// context (the caller only when the call names one; a bound token's
    /// caller is set by the server).
    fn as_verified_call(&self) -> Call<'_> {
        Call {
            request_id: &self.request_id,
            tool_name: &self.tool_name,
            args_json: self.args_json.as_bytes(),
            conversation_id: Some(&self.conversation_id),
            caller: (!self.caller.is_empty()).then_some(self.caller.as_str()),
            sandbox_mode: Some(&self.sandbox_mode),
        }
    }
}

/// A call that passed every check: the only way to the args to run.
///
/// Made only by [`Gatekeeper`], after the envelope verified against the
/// pinned keys, authorized exactly this call in this context, and its nonce
/// was spent. Not `Clone`: one approval, one run.
#[derive(Debug)]
pub struct ApprovedCall {
    verified: VerifiedResponse,
    answer: Option<Answer>,
}

impl ApprovedCall {
    /// The args to run: the approver's edit when there is one, else the
    /// proposed args.
    pub fn args_json(&self) -> &str {
        self.verified.resolve_approved_call()
    }

    /// [`Self::args_json`], parsed.
    ///
    /// # Errors
    /// When the args are not JSON (lev refuses such edits before signing).
    pub fn args(&self) -> Result<Value, GateError> {
        Ok(serde_json::from_str(self.args_json())?)
    }

    /// Whether the approver edited the args.
    pub fn was_edited(&self) -> bool {
        !self.verified.payload.modified_args_json.is_empty()
    }

    /// Context the approver attached, to put before the tool runs, marked internal.
    pub fn injected_context(&self) -> Option<&str> {
        Some(self.verified.payload.injected_context.as_str()).filter(|c| !c.trim().is_empty())
    }

    /// The verified, signed decision.
    pub fn verified(&self) -> &VerifiedResponse {
        &self.verified
    }

    /// The person's answer, when a person decided (not a rule or a grant).
    pub fn answer(&self) -> Option<&Answer> {
        self.answer.as_ref()
    }

    /// The text the model reads after the tool ran with `output`: injected
    /// context first, marked internal, then the output (and, when a person
    /// edited the args, that they did).
    pub fn tool_result_text(&self, output: &str) -> String {
        if let Some(answer) = &self.answer {
            return answer.tool_result_text(Some(output), &[]);
        }
        match self.injected_context() {
            Some(context) => format!("{INTERNAL_OPEN}\n{context}\n{INTERNAL_CLOSE}\n\n{output}"),
            None => output.to_owned(),
        }
    }
}

/// Why a call was not run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RefusalKind {
    /// A policy rule denied it.
    Policy,
    /// A person (or the operator) denied it.
    Denied,
    /// Nobody decided in time and the server expired it: a plain deny.
    Expired,
    /// The question was cancelled before anyone decided.
    Cancelled,
    /// This helper's own deadline passed with nobody deciding.
    TimedOut,
}

/// A call that must not run, and what to tell the model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// Why.
    pub kind: RefusalKind,
    /// The tool-result text for the model (the feedback included).
    pub text: String,
    /// The person's feedback (what to do instead), when they wrote some.
    pub feedback: Option<String>,
}

/// What the gate decided, verified.
#[derive(Debug)]
pub enum GateOutcome {
    /// Run it with [`ApprovedCall::args_json`].
    Run(Box<ApprovedCall>),
    /// Do not run it; give the model [`Refusal::text`].
    Refused(Refusal),
}

/// The gate's first answer, before any wait.
#[derive(Debug, Clone, PartialEq)]
pub struct Submitted(GateResponse);

impl Submitted {
    /// The interaction a person answers, when the gate asked.
    pub fn interaction_id(&self) -> Option<&str> {
        match &self.0 {
            GateResponse::Ask { interaction_id } => Some(interaction_id),
            _ => None,
        }
    }

    /// The gate's answer as it came.
    pub fn response(&self) -> &GateResponse {
        &self.0
    }
}

/// Gates tool calls and verifies their decisions against pinned keys.
#[derive(Clone)]
pub struct Gatekeeper {
    client: Client,
    keys: TrustedKeys,
    clock: Arc<dyn Clock>,
    votes: Arc<Vec<VoteRule>>,
}

/// Tools whose approvals must carry people's own signed votes, and the
/// people's keys to check them with; the first rule whose glob matches the
/// tool applies.
#[derive(Debug, Clone)]
struct VoteRule {
    /// The tool glob; `None` when it is too large to compile, and then the
    /// rule applies to every tool (it fails closed).
    tool: Option<ToolGlob>,
    needed: usize,
    people: PeopleKeys,
}

impl std::fmt::Debug for Gatekeeper {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gatekeeper")
            .field("client", &self.client)
            .field("keys", &self.keys.len())
            .field("signed_votes", &*self.votes)
            .finish_non_exhaustive()
    }
}

impl Gatekeeper {
    /// A gatekeeper trusting exactly `keys` (from configuration, say).
    pub fn new(client: Client, keys: TrustedKeys) -> Self {
        Self {
            client,
            keys,
            clock: Arc::new(SystemClock),
            votes: Arc::new(Vec::new()),
        }
    }

    /// The same gatekeeper requiring, for tools matching `tool` (a
    /// [`ToolGlob`], as the policy's: `*` any run of characters, `?` one;
    /// one too large to compile matches every tool), at least `needed`
    /// distinct people's own signed votes in each approval (payload
    /// version 2), verified against `people` (the JWKS of `GET
    /// /v1/people/keys`, pinned like the server's keys) and bound to the
    /// exact call. A server that holds none of those people's private keys
    /// cannot make such an approval. Called again, it adds a rule with its
    /// own people's keys; the first matching rule applies.
    pub fn require_signed_votes(mut self, tool: &str, needed: usize, people: PeopleKeys) -> Self {
        Arc::make_mut(&mut self.votes).push(VoteRule {
            tool: ToolGlob::new(tool).ok(),
            needed,
            people,
        });
        self
    }

    /// A gatekeeper trusting the keys the server publishes now
    /// (`GET /v1/keys`), pinned for its lifetime: a key the server starts
    /// using later is not trusted by this one.
    ///
    /// # Errors
    /// When the keys cannot be fetched or none is usable.
    pub async fn pinned(client: Client) -> Result<Self, GateError> {
        let jwks = client.keys().await?;
        let text = serde_json::to_string(&jwks).map_err(GateError::Args)?;
        let keys = TrustedKeys::parse(&text)?;
        Ok(Self::new(client, keys))
    }

    /// The same gatekeeper checking times against `clock`.
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// The client it talks through.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// The pinned keys.
    pub fn keys(&self) -> &TrustedKeys {
        &self.keys
    }

    /// The whole flow: [`Self::submit`], then [`Self::settle`].
    ///
    /// # Errors
    /// See [`Self::settle`].
    pub async fn decide(&self, call: &ToolCall) -> Result<GateOutcome, GateError> {
        let submitted = self.submit(call).await?;
        self.settle(call, submitted).await
    }

    /// `POST /v1/gate`: the gate's first answer (allow, deny, or ask with the
    /// interaction to wait on), for callers that show the interaction's id
    /// while they wait.
    ///
    /// # Errors
    /// The server's refusal (403, 409, 413, 422, ...) or a transport error.
    pub async fn submit(&self, call: &ToolCall) -> Result<Submitted, GateError> {
        // The gate answers at once (allow, deny, or ask): with a timeout, a
        // server that holds the call is given no more than it and a little.
        let within = call
            .timeout
            .map(|t| t.saturating_add(Duration::from_secs(2)).min(GATE_TIMEOUT));
        Ok(Submitted(
            self.client
                .gate_within(&call.gate_request(), within)
                .await?,
        ))
    }

    /// Wait for a person when the gate asked (until `call.timeout`), then
    /// verify, check and spend: the [`GateOutcome`].
    ///
    /// # Errors
    /// A transport error, an envelope that does not verify or does not
    /// authorize this call, an approval without an envelope, a spent nonce.
    pub async fn settle(
        &self,
        call: &ToolCall,
        submitted: Submitted,
    ) -> Result<GateOutcome, GateError> {
        match submitted.0 {
            GateResponse::Allow { approval } => self.approve(call, &approval, None).await,
            GateResponse::Deny { reason, .. } => Ok(GateOutcome::Refused(Refusal {
                kind: RefusalKind::Policy,
                text: policy_denial(&call.tool_name, &reason),
                feedback: None,
            })),
            GateResponse::Ask { interaction_id } => {
                // A little past the server's own timeout, so its verdict
                // (expired: a plain deny) arrives first.
                let deadline = call
                    .timeout
                    .map(|t| t.saturating_add(Duration::from_secs(2)));
                let answer = self
                    .client
                    .wait_for_answer(&interaction_id, deadline)
                    .await?;
                self.settle_answer(call, answer).await
            }
        }
    }

    async fn settle_answer(
        &self,
        call: &ToolCall,
        answer: Answer,
    ) -> Result<GateOutcome, GateError> {
        let refused = |kind| {
            let feedback = answer
                .response()
                .and_then(|r| r.deny_feedback())
                .map(str::to_owned);
            Ok(GateOutcome::Refused(Refusal {
                kind,
                text: answer.tool_result_text(None, &[]),
                feedback,
            }))
        };
        match &answer.outcome {
            Outcome::Answered { approval, .. } if answer.is_approved() => match approval.clone() {
                Some(envelope) => self.approve(call, &envelope, Some(answer)).await,
                None => Err(GateError::NoApproval),
            },
            Outcome::Answered { .. } => refused(RefusalKind::Denied),
            Outcome::Expired => refused(RefusalKind::Expired),
            Outcome::Cancelled => refused(RefusalKind::Cancelled),
            Outcome::TimedOut { .. } => refused(RefusalKind::TimedOut),
        }
    }

    /// Verify `envelope` for `call`, then spend its nonce.
    async fn approve(
        &self,
        call: &ToolCall,
        envelope: &Envelope,
        answer: Option<Answer>,
    ) -> Result<GateOutcome, GateError> {
        let verified = verify(envelope, &self.keys, self.clock.now())?;
        verified
            .check_call(&call.as_verified_call())
            .map_err(GateError::NotAuthorized)?;
        if let Some(rule) = self.votes.iter().find(|rule| {
            rule.tool
                .as_ref()
                .is_none_or(|glob| glob.is_match(&call.tool_name))
        }) {
            verified
                .require_signed_votes(&rule.people, rule.needed)
                .map_err(|why| GateError::NotEnoughVotes {
                    tool: call.tool_name.clone(),
                    why,
                })?;
        }
        self.client
            .consume_nonce(&verified.payload.nonce)
            .await
            .map_err(|e| {
                if e.code() == Some("nonce_spent") {
                    GateError::NonceSpent
                } else {
                    GateError::Client(e)
                }
            })?;
        Ok(GateOutcome::Run(Box::new(ApprovedCall {
            verified,
            answer,
        })))
    }
}

/// The tool-result text of a call a policy rule denied.
fn policy_denial(tool: &str, reason: &str) -> String {
    let reason = reason.trim();
    if reason.is_empty() {
        format!("The call to {tool} was denied by lev's policy; it was not run.")
    } else {
        format!("The call to {tool} was denied by lev's policy; it was not run.\nReason: {reason}")
    }
}

impl Client {
    /// `POST /v1/gate`: the gate's decision on a tool call (always 200 once
    /// the call is valid). Prefer [`Gatekeeper`], which also verifies.
    ///
    /// # Errors
    /// 403 for a bound token naming another caller, 409 for another call
    /// under a used request id, 413, 422, ...
    pub async fn gate(&self, request: &GateRequest) -> crate::Result<GateResponse> {
        self.gate_within(request, None).await
    }

    /// [`Client::gate`] in at most `timeout` (60 s when `None`).
    pub(crate) async fn gate_within(
        &self,
        request: &GateRequest,
        timeout: Option<Duration>,
    ) -> crate::Result<GateResponse> {
        self.call(Method::POST, "/v1/gate", Some(request), timeout)
            .await
    }

    /// `POST /v1/nonces/consume`: spend an approval's nonce.
    ///
    /// # Errors
    /// 409 `nonce_spent` when it was spent before.
    pub async fn consume_nonce(&self, nonce: &str) -> crate::Result<()> {
        let body = NonceConsume {
            nonce: nonce.to_owned(),
        };
        self.call::<serde::de::IgnoredAny>(Method::POST, "/v1/nonces/consume", Some(&body), None)
            .await
            .map(drop)
    }

    /// `GET /v1/grants`: the session and always grants in force, oldest
    /// first, every page.
    ///
    /// # Errors
    /// Any [`Error`].
    pub async fn grants(&self) -> crate::Result<Vec<Grant>> {
        self.all_pages("/v1/grants").await
    }

    /// `DELETE /v1/grants/{id}`: revoke a grant; returns it.
    ///
    /// # Errors
    /// 404 when there is no such grant in force.
    pub async fn revoke_grant(&self, id: &str) -> crate::Result<Grant> {
        let path = format!("/v1/grants/{}", encode_segment(id));
        self.call(Method::DELETE, &path, None::<&()>, None).await
    }

    /// `POST /v1/keys/rotate` (admin): a new signing key; returns the JWKS,
    /// the new active key first.
    ///
    /// # Errors
    /// Any [`Error`].
    pub async fn rotate_key(&self) -> crate::Result<Jwks> {
        self.call(Method::POST, "/v1/keys/rotate", None::<&()>, None)
            .await
    }

    /// `DELETE /v1/keys/{kid}` (admin): stop trusting an old key; returns
    /// the JWKS after.
    ///
    /// # Errors
    /// 409 `active_key` for the key that signs, 404 for an unknown one.
    pub async fn remove_key(&self, kid: &str) -> crate::Result<Jwks> {
        let path = format!("/v1/keys/{}", encode_segment(kid));
        self.call(Method::DELETE, &path, None::<&()>, None).await
    }
}

fn encode_segment(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~' | b':') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}
