//! `POST /v1/interactions/{id}/respond`: the first answer wins, exactly once.
//!
//! The answer is validated against its request, its parts stored, a tool
//! approval signed; then the store's compare-and-set decides. The winner is
//! committed before any waiter is woken (the store announces only committed
//! changes); a loser gets 409 with the winner.

use std::collections::BTreeMap;

use axum::Json;
use axum::extract::State;
use lev_approval::{ApprovalPayload, PAYLOAD_VERSION, new_nonce, sign_payload};
use lev_protocol::api::{RespondResult, Role};
use lev_protocol::validate::validate_response;
use lev_protocol::{
    Envelope, InteractionKind, InteractionRequest, InteractionResponse, InteractionStatus,
};
use lev_store::{NewAnswer, TransitionOutcome};
use serde_json::{Value, json};
use time::OffsetDateTime;

use super::interactions::{already_answered, gone};
use crate::auth::Principal;
use crate::blobs::{decode_parts, store_parts};
use crate::body::{JsonBody, RESPOND_LIMIT};
use crate::error::{ApiError, ApiResult};
use crate::state::AppState;

/// `POST /v1/interactions/{id}/respond` (approver).
pub async fn respond(
    State(state): State<AppState>,
    principal: Principal,
    via: crate::session_auth::CurrentSession,
    super::PathParam(id): super::PathParam,
    JsonBody(answer): JsonBody<InteractionResponse, RESPOND_LIMIT>,
) -> ApiResult<Json<RespondResult>> {
    principal.require(&[Role::Approver])?;
    decide(&state, &id, answer, &principal.name, &via)
        .await
        .map(Json)
}

/// Decide interaction `id` with `answer` by `approver` (a token's name, the
/// identity signed into a tool approval): validate the answer against its
/// request, store its parts, sign a tool approval, then the store's
/// compare-and-set. The respond route's path, shared with an operator's
/// triage answer (which passes no dashboard session, so no `@path`).
///
/// # Errors
/// 404, 409 `already_answered` (with the winner), 410, 413, 422, as respond.
pub async fn decide(
    state: &AppState,
    id: &str,
    answer: InteractionResponse,
    approver: &str,
    via: &crate::session_auth::CurrentSession,
) -> ApiResult<RespondResult> {
    let view = state
        .store()
        .get_interaction(id)
        .await?
        .ok_or_else(|| ApiError::NotFound(format!("no interaction {id:?}")))?;
    match view.request.status {
        InteractionStatus::Pending => {}
        InteractionStatus::Answered => return Err(already_answered(view)),
        InteractionStatus::Expired | InteractionStatus::Cancelled => return Err(gone(&view)),
    }
    let request = &view.request.request;
    let mut answer = validate_response(request, answer)?;
    crate::attach::expand_at_paths(state.settings(), via, &mut answer)?;
    let inbound = std::mem::take(&mut answer.parts);
    let decoded = decode_parts(inbound, state.settings().max_part_bytes)?;
    let parts = store_parts(state.store(), decoded).await?;
    let response = answer.map_parts(parts);
    let now = OffsetDateTime::now_utc();
    let approval = sign_approval(state, request, &response, approver, now)?;
    let mut audit = BTreeMap::new();
    audit.insert("approver".to_owned(), json!(approver));
    if let InteractionKind::ToolApproval { .. } = &request.kind {
        audit.insert("approved".to_owned(), json!(response.approved));
        audit.insert(
            "scope".to_owned(),
            json!(response.scope.map(|s| s.as_str())),
        );
        if let Some(edit) = &response.modified_args_json {
            audit.insert("modified_args_json".to_owned(), json!(edit));
        }
        if let Some(env) = &approval {
            audit.insert(
                "approval_payload".to_owned(),
                Value::String(env.payload.clone()),
            );
        }
    }
    let outcome = state
        .store()
        .answer_interaction(NewAnswer {
            id: id.to_owned(),
            response: response.clone(),
            approval,
            answered_by: approver.to_owned(),
            answered_at: now,
            audit,
        })
        .await?;
    match outcome {
        TransitionOutcome::Done(view) => {
            state.metrics().answered();
            Ok(RespondResult {
                response: view.response.unwrap_or(response),
                approval: view.approval,
            })
        }
        TransitionOutcome::AlreadyAnswered(view) => Err(already_answered(*view)),
        TransitionOutcome::Gone(view) => Err(gone(&view)),
        TransitionOutcome::NotFound => Err(ApiError::NotFound(format!("no interaction {id:?}"))),
    }
}

/// Sign the decision on a tool approval; `None` for other kinds.
fn sign_approval<P>(
    state: &AppState,
    request: &InteractionRequest,
    response: &InteractionResponse<P>,
    approver: &str,
    now: OffsetDateTime,
) -> ApiResult<Option<Envelope>> {
    let InteractionKind::ToolApproval {
        tool_name,
        args_json,
        missing_capabilities,
        sandbox_mode,
        ..
    } = &request.kind
    else {
        return Ok(None);
    };
    let approved = response.approved == Some(true);
    let mut covered = missing_capabilities.clone();
    covered.sort();
    covered.dedup();
    let ttl = time::Duration::try_from(state.settings().approval_ttl)
        .map_err(|e| ApiError::Internal(format!("approval ttl: {e}")))?;
    let payload = ApprovalPayload {
        v: PAYLOAD_VERSION,
        turn_id: request.turn_id.clone().unwrap_or_default(),
        request_id: request.id.clone().unwrap_or_default(),
        tool_name: tool_name.clone(),
        args_json: args_json.clone(),
        modified_args_json: response.modified_args_json.clone().unwrap_or_default(),
        approved,
        approved_for_session: approved && response.scope.is_some_and(|s| s.is_grant_scope()),
        covered_capabilities: covered,
        caller: request.caller.clone().unwrap_or_default(),
        approver: approver.to_owned(),
        sandbox_mode: sandbox_mode.clone(),
        reason: response.reason.clone().unwrap_or_default(),
        injected_context: response.injected_context.clone().unwrap_or_default(),
        conversation_id: request.conversation_id.clone().unwrap_or_default(),
        nonce: new_nonce().map_err(|e| ApiError::Internal(format!("no randomness: {e}")))?,
        issued_at: now,
        expires_at: now + ttl,
    };
    Ok(Some(sign_payload(&payload, &state.keys().active)))
}
