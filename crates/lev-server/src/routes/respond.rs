//! `POST /v1/interactions/{id}/respond`: the first answer wins, exactly once.
//!
//! The answer is validated against its request and its parts stored; a tool
//! approval goes on to the gate's answer path (`crate::gate::answer`: policy
//! checks, signature, grant). Then the store's compare-and-set decides. The
//! winner is committed before any waiter is woken (the store announces only
//! committed changes); a loser gets 409 with the winner.

use std::collections::BTreeMap;

use axum::Json;
use axum::extract::State;
use lev_protocol::api::{RespondResult, Role};
use lev_protocol::validate::validate_response;
use lev_protocol::{InteractionKind, InteractionResponse, InteractionStatus};
use lev_store::{NewAnswer, TransitionOutcome};
use serde_json::json;
use time::OffsetDateTime;

use super::interactions::{already_answered, gone};
use crate::auth::Principal;
use crate::blobs::{decode_parts, store_parts};
use crate::body::{JSON_LIMIT, RESPOND_LIMIT, parse_json_off_executor, read_limited};
use crate::error::{ApiError, ApiResult};
use crate::state::AppState;

/// `POST /v1/interactions/{id}/respond` (approver).
pub async fn respond(
    State(state): State<AppState>,
    principal: Principal,
    via: crate::session_auth::CurrentSession,
    super::PathParam(id): super::PathParam,
    request: axum::extract::Request,
) -> ApiResult<Json<RespondResult>> {
    principal.require(&[Role::Approver])?;
    let bytes = read_limited(request, RESPOND_LIMIT).await?;
    let size = bytes.len();
    let answer: InteractionResponse = parse_json_off_executor(bytes).await?;
    // Only attachments may make a respond body large (SPEC section 9).
    if answer.parts.is_empty() && size > JSON_LIMIT {
        return Err(ApiError::TooLarge(format!(
            "a respond body without parts may be at most {} KiB, found {} KiB",
            JSON_LIMIT / 1024,
            size.div_ceil(1024)
        )));
    }
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
    if let InteractionKind::ToolApproval { .. } = &request.kind {
        // Checked against the policy, signed, with its grant: the gate's part.
        return super::approvals::answer_tool_approval(state, &view, response, approver).await;
    }
    let now = OffsetDateTime::now_utc();
    let audit = BTreeMap::from([("approver".to_owned(), json!(approver))]);
    let outcome = state
        .store()
        .answer_interaction(NewAnswer {
            id: id.to_owned(),
            response: response.clone(),
            approval: None,
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
