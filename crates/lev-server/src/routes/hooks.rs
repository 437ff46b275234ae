//! `POST /v1/hooks/claude-code` (worker): Claude Code's `http` hook type
//! (SPEC section 10). The body is the hook event `lev hook claude-code` reads
//! on stdin, and the answer is the output it prints, shaped by
//! `lev_protocol::claude_code` for both.
//!
//! The call goes through [`crate::gate::decide`] like any gate call (session
//! = the event's `session_id`, also the conversation; sandbox mode = its
//! `permission_mode`; request id = its `tool_use_id`), and when the gate asks,
//! the request is held open until someone decides or `timeout_s` passes. An
//! allow's nonce is spent here: Claude Code cannot verify an envelope, so the
//! server, which issued it, acts as the verifier that runs the call once.
//!
//! Query: `timeout_s` (default 600, at most a day), `caller` (for a token
//! bound to no caller), `route` (`operator,human`).

use lev_protocol::claude_code::HookOutput;
use std::time::Duration;

use axum::Json;
use axum::extract::{Request, State};
use lev_approval::TrustedKeys;
use lev_protocol::api::{GateRequest, GateResponse, InteractionView, Role};
use lev_protocol::claude_code::{Decision, HookEvent, HookEventError, hook_output};
use lev_protocol::{ApprovalScope, Envelope, InteractionStatus};
use lev_store::NonceOutcome;
use serde::Deserialize;
use serde_json::Value;
use time::OffsetDateTime;

use super::Q;
use crate::auth::Principal;
use crate::body::{JSON_LIMIT, read_limited};
use crate::error::{ApiError, ApiResult};
use crate::state::AppState;

/// How long a person has by default: ten minutes, as `lev hook claude-code`.
const DEFAULT_TIMEOUT_S: u64 = 600;
/// The longest a hook request may be held open.
const MAX_TIMEOUT_S: u64 = 24 * 60 * 60;

/// The query of `POST /v1/hooks/claude-code`.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct HookQuery {
    /// Seconds a person has to decide (default 600, at most a day).
    timeout_s: Option<u64>,
    /// The person the run acts for, for a token bound to no caller.
    caller: Option<String>,
    /// Who sees the question, comma-separated, such as `operator,human`.
    route: Option<String>,
}

/// `POST /v1/hooks/claude-code` (worker).
#[utoipa::path(
    post, path = "/v1/hooks/claude-code", tag = "agents", params(HookQuery),
    request_body = HookEvent,
    responses((status = 200, description = "The hook's output; `{}` lets the agent decide", body = HookOutput))
)]
pub async fn claude_code(
    State(state): State<AppState>,
    principal: Principal,
    Q(query): Q<HookQuery>,
    request: Request,
) -> ApiResult<Json<Value>> {
    principal.require(&[Role::Worker])?;
    let agent = crate::trace::Ctx::from_headers(request.headers());
    let bytes = read_limited(request, JSON_LIMIT).await?;
    crate::body::check_depth(&bytes)?;
    let event = HookEvent::parse(&bytes).map_err(|e| match e {
        HookEventError::NotJson(_) => ApiError::Malformed(e.to_string()),
        _ => ApiError::Invalid(e.to_string()),
    })?;
    let timeout_s = match query.timeout_s {
        None => DEFAULT_TIMEOUT_S,
        Some(0) => return Err(ApiError::Invalid("timeout_s: expected at least 1".into())),
        Some(n) => n.min(MAX_TIMEOUT_S),
    };
    let route = query.route.map(|r| {
        r.split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect::<Vec<_>>()
    });
    let gate = GateRequest {
        session_id: event.session_id.clone(),
        conversation_id: event.session_id.clone(),
        turn_id: String::new(),
        request_id: match event.tool_use_id.clone().filter(|id| !id.is_empty()) {
            Some(id) => id,
            None => crate::ids::new_id("hk_", OffsetDateTime::now_utc())
                .map_err(|e| ApiError::Internal(format!("a request id: {e}")))?,
        },
        caller: query.caller.unwrap_or_default(),
        tool_name: event.tool_name.clone(),
        args_json: event.args_json(),
        sandbox_mode: event
            .permission_mode
            .clone()
            .unwrap_or_else(|| "default".to_owned()),
        required_capabilities: Vec::new(),
        timeout_s: Some(timeout_s),
        route,
        reason: None,
    };
    let decision = gate_and_wait(
        &state,
        &principal,
        gate,
        agent,
        Duration::from_secs(timeout_s),
    )
    .await?;
    let input = Value::Object(event.tool_input.clone());
    let verdict = decision.verdict(&event.tool_name, &input);
    Ok(Json(
        hook_output(event.hook_event_name, &verdict)
            .and_then(|o| serde_json::to_value(o).ok())
            .unwrap_or_else(|| Value::Object(serde_json::Map::new())),
    ))
}

/// The gate, then the wait, then the checks of a verifier.
async fn gate_and_wait(
    state: &AppState,
    principal: &Principal,
    gate: GateRequest,
    agent: Option<crate::trace::Ctx>,
    timeout: Duration,
) -> ApiResult<Decision> {
    let started = tokio::time::Instant::now();
    let (envelope, view) = match crate::gate::decide(state, principal, gate, agent).await? {
        GateResponse::Allow { approval } => (approval, None),
        GateResponse::Deny { reason, .. } => return Ok(Decision::DeniedByPolicy { reason }),
        GateResponse::Ask { interaction_id } => {
            let view = wait(state, principal, &interaction_id, started + timeout).await?;
            match view.request.status {
                InteractionStatus::Pending => {
                    return Ok(Decision::TimedOut {
                        waited_s: started.elapsed().as_secs(),
                    });
                }
                InteractionStatus::Expired => return Ok(Decision::Expired),
                InteractionStatus::Cancelled => return Ok(Decision::Cancelled),
                InteractionStatus::Answered => {}
            }
            let Some(response) = view.response.clone() else {
                return Ok(Decision::Cancelled);
            };
            if response.approved != Some(true) {
                return Ok(Decision::DeniedByPerson {
                    feedback: response.feedback.clone(),
                });
            }
            let Some(approval) = view.approval.clone() else {
                return Err(ApiError::Internal(format!(
                    "interaction {} is approved without a signed approval",
                    view.request.id()
                )));
            };
            (approval, Some(view))
        }
    };
    allowed(state, principal, &envelope, view.as_ref()).await
}

/// An allow, read from the envelope this server signed, its nonce spent.
async fn allowed(
    state: &AppState,
    principal: &Principal,
    envelope: &Envelope,
    view: Option<&InteractionView>,
) -> ApiResult<Decision> {
    let mut trusted = TrustedKeys::new();
    for jwk in state.keys().jwks().keys {
        if let Ok(raw) = lev_approval::decode_base64(&jwk.x) {
            let _ = trusted.insert_bytes(&raw);
        }
    }
    let verified = lev_approval::verify(envelope, &trusted, OffsetDateTime::now_utc())
        .map_err(|e| ApiError::Internal(format!("the gate's own approval does not verify: {e}")))?;
    if !verified.payload.approved {
        return Ok(Decision::DeniedByPolicy {
            reason: verified.payload.reason,
        });
    }
    match crate::gate::spend_nonce(state, principal, &verified.payload.nonce).await? {
        NonceOutcome::Spent => {}
        NonceOutcome::AlreadySpent => {
            return Err(ApiError::Conflict {
                code: "nonce_spent",
                message: "this call's approval was used before: an approval runs its call once"
                    .into(),
            });
        }
    }
    // A person's session or always grant for any args: the agent may stop
    // asking about the tool. Not for an allow by an earlier grant or a rule.
    let remember_for_session = view.and_then(|v| v.response.as_ref()).is_some_and(|r| {
        matches!(
            r.scope,
            Some(ApprovalScope::Session | ApprovalScope::Always)
        ) && r.grant_args.is_none()
    });
    Ok(Decision::Allowed {
        approver: verified.payload.approver,
        modified_args_json: Some(verified.payload.modified_args_json).filter(|m| !m.is_empty()),
        injected_context: Some(verified.payload.injected_context).filter(|c| !c.is_empty()),
        remember_for_session,
    })
}

/// Wait until interaction `id` is final or `deadline` passes, as `wait` does.
async fn wait(
    state: &AppState,
    principal: &Principal,
    id: &str,
    deadline: tokio::time::Instant,
) -> ApiResult<InteractionView> {
    crate::interactions::wait_final(state, id, deadline, |view| {
        crate::interactions::check_access(principal, view)
    })
    .await
}
