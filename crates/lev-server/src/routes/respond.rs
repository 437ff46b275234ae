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
        (status = 409, description = "Already answered (the winning answer is beside the error), this person voted already (already_voted), or the votes would make a decision that does not verify under the people's keys in force (decision_unverifiable)", body = ErrorBody),
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
    let started = std::time::SystemTime::now();
    let bytes = read_limited(request, RESPOND_LIMIT).await?;
    let size = bytes.len();
    if size <= JSON_LIMIT {
        check_vote_shape(&bytes)?;
    }
    let answer: InteractionResponse = parse_json_off_executor(bytes).await?;
    // Only attachments may make a respond body large (SPEC section 9).
    if answer.vote.is_some() && size > JSON_LIMIT {
        return Err(ApiError::TooLarge(format!(
            "a respond body with a vote may be at most {} KiB (a vote answers a tool approval, \
             which takes no attachments), found {} KiB",
            JSON_LIMIT / 1024,
            size.div_ceil(1024)
        )));
    }
    if answer.parts.is_empty() && size > JSON_LIMIT {
        return Err(ApiError::TooLarge(format!(
            "a respond body without parts may be at most {} KiB, found {} KiB",
            JSON_LIMIT / 1024,
            size.div_ceil(1024)
        )));
    }
    let by = crate::interactions::By::person(&principal.name, via.0.as_ref());
    let result = crate::interactions::answer(&state, &id, answer, by).await?;
    let mut attributes = vec![("lev.voter", principal.name.clone())];
    if let Some(approved) = result.response.approved {
        attributes.push(("lev.approved", approved.to_string()));
    }
    state.tracer().child(
        &id,
        "interaction.vote",
        crate::trace::SERVER,
        started,
        attributes,
    );
    // A vote recorded while more are needed: accepted, not yet decided.
    let status = if result.status.is_some() {
        StatusCode::ACCEPTED
    } else {
        StatusCode::OK
    };
    Ok((status, Json(result)))
}

/// A signed vote must be written as the DSSE envelope it is: serde would
/// also fill the envelope (or one of its signatures) from an array of its
/// fields, by position, which no client means. A body that is not a JSON
/// object is left to the parser's own error.
fn check_vote_shape(bytes: &[u8]) -> Result<(), ApiError> {
    #[derive(serde::Deserialize)]
    struct Shape {
        #[serde(default)]
        vote: Option<serde_json::Value>,
    }
    let kind = |v: &serde_json::Value| match v {
        serde_json::Value::Array(_) => "an array",
        serde_json::Value::Object(_) => "an object",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Null => "null",
    };
    // A body that is not an object is the parser's to refuse (serde would
    // read this struct, too, from an array).
    if bytes.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'{') {
        return Ok(());
    }
    let Ok(Shape { vote: Some(vote) }) = serde_json::from_slice::<Shape>(bytes) else {
        return Ok(());
    };
    if !vote.is_object() {
        return Err(ApiError::Invalid(format!(
            "vote: expected a DSSE envelope, a JSON object {{\"payloadType\", \"payload\", \
             \"signatures\"}}, found {}",
            kind(&vote)
        )));
    }
    if let Some(signatures) = vote.get("signatures").and_then(|s| s.as_array()) {
        for (i, sig) in signatures.iter().enumerate() {
            if !sig.is_object() {
                return Err(ApiError::Invalid(format!(
                    "vote.signatures[{i}]: expected a JSON object {{\"keyid\", \"sig\"}}, found {}",
                    kind(sig)
                )));
            }
        }
    }
    Ok(())
}
