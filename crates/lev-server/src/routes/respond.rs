//! `POST /v1/interactions/{id}/respond`: the first answer wins, exactly once
//! ([`crate::interactions::answer`]); a loser gets 409 with the winner.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use lev_protocol::InboundPart;
use lev_protocol::InteractionResponse;
use lev_protocol::api::ErrorBody;
use lev_protocol::api::{RespondResult, Role};

use crate::auth::Principal;
use crate::body::{JSON_LIMIT, RESPOND_LIMIT, parse_json_off_executor, read_limited};
use crate::error::{ApiError, ApiResult};
use crate::state::AppState;

/// `POST /v1/interactions/{id}/respond` (approver).
#[utoipa::path(
    post, path = "/v1/interactions/{id}/respond", tag = "interactions",
    params(("id" = String, Path, description = "The interaction's id")),
    request_body = InteractionResponse<InboundPart>,
    responses(
        (status = 200, description = "The answer won (for a tool approval: the vote decided)", body = RespondResult),
        (status = 202, description = "A vote on a tool approval, recorded; more approvals are needed (status pending)", body = RespondResult),
        (status = 403, description = "The policy does not let this person vote on the call (vote_not_allowed), or forbids self-approval", body = ErrorBody),
        (status = 422, description = "Invalid answer, or a signed vote that does not verify or bind this call (invalid_vote), or none where one is required (signed_vote_required)", body = ErrorBody),
        (status = 404, description = "No such interaction", body = ErrorBody),
        (status = 409, description = "Already answered (the winning answer is beside the error), or this person voted already (already_voted)", body = ErrorBody),
        (status = 410, description = "Expired or cancelled", body = ErrorBody),
    )
)]
pub async fn respond(
    State(state): State<AppState>,
    principal: Principal,
    via: crate::session_auth::CurrentSession,
    super::PathParam(id): super::PathParam,
    request: axum::extract::Request,
) -> ApiResult<(StatusCode, Json<RespondResult>)> {
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
    let by = crate::interactions::By::person(&principal.name, via.0.as_ref());
    let result = crate::interactions::answer(&state, &id, answer, by).await?;
    // A vote recorded while more are needed: accepted, not yet decided.
    let status = if result.status.is_some() {
        StatusCode::ACCEPTED
    } else {
        StatusCode::OK
    };
    Ok((status, Json(result)))
}
