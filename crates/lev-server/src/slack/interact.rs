//! `POST /v1/integrations/slack/interactions`: the clicks and modal
//! submissions Slack sends. Nothing here trusts a lev token: the request
//! must carry Slack's v0 signature over its exact bytes, with a timestamp
//! within five minutes, seen once (a replay is refused, on every replica:
//! the signature's bytes are spent in the store's nonce ledger). The clicking Slack
//! user must be mapped in `[users]` to an approver token that still exists;
//! their answer then goes through the same path as the dashboard's, signed
//! with that person's name. Anything refused changes nothing, and the person
//! is told why with an ephemeral message.

use axum::Json;
use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use lev_protocol::api::{ErrorBody, Role};
use lev_protocol::{ApprovalScope, InteractionResponse};
use lev_slack::blocks::{
    APPROVE_ONCE, APPROVE_SESSION, DENY, DENY_FEEDBACK, FEEDBACK_CALLBACK_ID, FEEDBACK_VALUE_KEY,
    OPEN, REPLY, REPLY_CALLBACK_ID, REPLY_VALUE_KEY, choice_index,
};
use lev_slack::payload::{MAX_BODY_BYTES, SlackAction};
use lev_slack::verify::{SIGNATURE_HEADER, TIMESTAMP_HEADER};
use lev_slack::{SlackConfig, feedback_modal, reply_modal};
use serde_json::{Value, json};
use time::OffsetDateTime;

use crate::error::ApiError;
use crate::log;
use crate::state::AppState;

/// The body Slack posts, as the document describes it (the route reads the
/// exact bytes, which the signature covers).
#[derive(Debug, utoipa::ToSchema)]
#[allow(dead_code)]
struct SlackForm {
    /// The interaction payload: a JSON object (`block_actions`, `view_submission`).
    payload: String,
}

/// The route.
#[utoipa::path(post, path = "/v1/integrations/slack/interactions", tag = "integrations", security(()),
    request_body(content = SlackForm, content_type = "application/x-www-form-urlencoded",
        description = "Slack's interactivity request: `payload=<JSON>`, signed with `X-Slack-Signature` and `X-Slack-Request-Timestamp`"),
    responses(
        (status = 200, description = "Taken (Slack shows nothing more)"),
        (status = 404, description = "Slack is not set up on this server", body = ErrorBody),
    ))]
pub async fn interactions(State(state): State<AppState>, request: Request) -> Response {
    let Some(config) = state.settings().slack.clone() else {
        return ApiError::NotFound(
            "Slack is not set up on this server (lev serve --slack-config)".into(),
        )
        .into_response();
    };
    let action = match verified_action(&state, &config, request).await {
        Ok(action) => action,
        Err(e) => return e.into_response(),
    };
    match action {
        SlackAction::Button {
            user_id,
            action_id,
            value,
            trigger_id,
            channel_id,
            ..
        } => {
            let channel = channel_id.unwrap_or_else(|| config.channel.clone());
            button(
                &state,
                &config,
                &user_id,
                &action_id,
                &value,
                &trigger_id,
                &channel,
            )
            .await;
            StatusCode::OK.into_response()
        }
        SlackAction::Submission {
            user_id,
            callback_id,
            private_metadata,
            values,
        } => {
            let submitted = Submitted {
                user_id: &user_id,
                callback_id: &callback_id,
                private_metadata: &private_metadata,
                values: &values,
            };
            submitted.take(&state, &config).await
        }
        SlackAction::Other { .. } => StatusCode::OK.into_response(),
    }
}

/// What Slack posted, once its signature, its window and its freshness
/// (never seen before, by the signature's bytes) are checked.
///
/// # Errors
/// 413 past the body's limit, 401 for a bad signature or a replay, 400
/// for a payload that cannot be read; the store's.
async fn verified_action(
    state: &AppState,
    config: &SlackConfig,
    request: Request,
) -> Result<SlackAction, ApiError> {
    let (timestamp, signature) = {
        let header = |name: &str| {
            request
                .headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
        };
        (header(TIMESTAMP_HEADER), header(SIGNATURE_HEADER))
    };
    let body = crate::body::read_limited(request, MAX_BODY_BYTES).await?;
    let now = OffsetDateTime::now_utc().unix_timestamp();
    let tag = lev_slack::verify::verify_tag(
        &config.signing_secret,
        timestamp.as_deref(),
        signature.as_deref(),
        &body,
        now,
    )
    .map_err(|e| ApiError::Unauthorized(format!("Slack request refused: {e}")))?;
    // Seen once, by the signature's bytes (not its spelling: upper-case hex
    // is the same request), in the store's nonce ledger: every replica and
    // every restart refuses it again.
    match state
        .store()
        .consume_nonce(&lev_slack::verify::replay_key(&tag), "slack")
        .await?
    {
        lev_store::NonceOutcome::Spent => {}
        lev_store::NonceOutcome::AlreadySpent => {
            return Err(ApiError::Unauthorized(
                "Slack request refused: this signed request was already received (a replay)".into(),
            ));
        }
    }
    lev_slack::payload::parse(&body).map_err(|e| ApiError::Malformed(e.to_string()))
}

/// A modal submitted: feedback on a deny, or a free-text reply.
struct Submitted<'a> {
    user_id: &'a str,
    callback_id: &'a str,
    private_metadata: &'a str,
    values: &'a std::collections::BTreeMap<String, String>,
}

impl Submitted<'_> {
    /// The answer the modal gives, by its user's mapped approver; an empty
    /// 200 closes the modal, an error is shown in its block.
    async fn take(&self, state: &AppState, config: &SlackConfig) -> Response {
        let (block, answer) = match self.callback_id {
            FEEDBACK_CALLBACK_ID => (
                "feedback",
                InteractionResponse::deny_with_feedback(
                    self.private_metadata,
                    self.values
                        .get(FEEDBACK_VALUE_KEY)
                        .map_or("", String::as_str),
                ),
            ),
            REPLY_CALLBACK_ID => (
                "reply",
                InteractionResponse::text(
                    self.private_metadata,
                    self.values
                        .get(REPLY_VALUE_KEY)
                        .cloned()
                        .unwrap_or_default(),
                ),
            ),
            _ => return StatusCode::OK.into_response(),
        };
        let outcome = match approver(state, config, self.user_id).await {
            Ok(name) => decide(state, self.private_metadata, answer, &name).await,
            Err(refusal) => Err(refusal),
        };
        match outcome {
            // An empty 200 closes the modal.
            Ok(_) => StatusCode::OK.into_response(),
            Err(message) => Json(json!({
                "response_action": "errors",
                "errors": { block: message },
            }))
            .into_response(),
        }
    }
}

async fn button(
    state: &AppState,
    config: &SlackConfig,
    user: &str,
    action_id: &str,
    id: &str,
    trigger_id: &str,
    channel: &str,
) {
    if action_id == OPEN {
        return;
    }
    let name = match approver(state, config, user).await {
        Ok(name) => name,
        Err(refusal) => return ephemeral(state, config, channel, user, &refusal).await,
    };
    let answer = match action_id {
        APPROVE_ONCE => InteractionResponse::approval(id, true, ApprovalScope::Once),
        APPROVE_SESSION => InteractionResponse::approval(id, true, ApprovalScope::Session),
        DENY => InteractionResponse::approval(id, false, ApprovalScope::Once),
        DENY_FEEDBACK | REPLY => {
            let view = match state.store().get_interaction(id).await {
                Ok(Some(v)) => v,
                _ => {
                    return ephemeral(state, config, channel, user, "That interaction is gone.")
                        .await;
                }
            };
            if view.request.status.is_final() {
                return ephemeral(state, config, channel, user, &decided_text(&view)).await;
            }
            let modal = match &view.request.request.kind {
                lev_protocol::InteractionKind::ToolApproval { tool_name, .. } => {
                    feedback_modal(id, tool_name)
                }
                lev_protocol::InteractionKind::FreeText { prompt }
                | lev_protocol::InteractionKind::InteractionPoints { prompt, .. } => {
                    reply_modal(id, prompt)
                }
                lev_protocol::InteractionKind::MultipleChoice { .. }
                | lev_protocol::InteractionKind::Form { .. } => return,
            };
            let body = json!({ "trigger_id": trigger_id, "view": modal });
            if let Err(e) = api(state, config, "views.open", &body).await {
                log::info(&format!("slack: views.open: {e}"));
            }
            return;
        }
        other => match choice_index(other) {
            Some(i) => InteractionResponse::choice(id, i),
            None => {
                return ephemeral(
                    state,
                    config,
                    channel,
                    user,
                    "lev does not know that button.",
                )
                .await;
            }
        },
    };
    match decide(state, id, answer, &name).await {
        Ok(Some(note)) | Err(note) => ephemeral(state, config, channel, user, &note).await,
        Ok(None) => {}
    }
}

/// The approver token name a Slack user answers as, when they may.
async fn approver(state: &AppState, config: &SlackConfig, user: &str) -> Result<String, String> {
    let Some(name) = config.approver_for(user) else {
        return Err(format!(
            "You are not a lev approver: ask an admin to map your Slack user id {user} to \
             an approver token name in [users] of slack.toml. Nothing was decided."
        ));
    };
    let tokens = state
        .store()
        .list_tokens()
        .await
        .map_err(|_| "lev cannot reach its database now; try again shortly.".to_owned())?;
    match tokens.iter().find(|t| t.name == name) {
        Some(t) if matches!(t.role, Role::Approver | Role::Admin) => Ok(name.to_owned()),
        Some(_) => Err(format!(
            "Your lev token {name} may not answer (it is not an approver). Nothing was decided."
        )),
        None => Err(format!(
            "Your lev token {name} was revoked or never made. Nothing was decided."
        )),
    }
}

/// Answer as `name`, through the dashboard's path: a note for the person
/// when their vote was recorded but more are needed; the refusal as text.
async fn decide(
    state: &AppState,
    id: &str,
    answer: InteractionResponse,
    name: &str,
) -> Result<Option<String>, String> {
    match crate::interactions::answer(
        state,
        id,
        answer,
        crate::interactions::By::person(name, None),
    )
    .await
    {
        Ok(r) if r.status.is_some() => {
            let approvals = r.votes.iter().filter(|v| v.approved).count();
            Ok(Some(format!(
                "Your vote is in: {approvals} of {} approvals. The call waits for more.",
                r.approvals_needed.unwrap_or(1)
            )))
        }
        Ok(_) => Ok(None),
        Err(ApiError::AlreadyAnswered(_) | ApiError::Gone(_)) => {
            let text = match state.store().get_interaction(id).await {
                Ok(Some(view)) => decided_text(&view),
                _ => "That interaction was already decided.".to_owned(),
            };
            Err(text)
        }
        Err(ApiError::Internal(e)) => {
            log::error(&format!("slack: answering {id}: {e}"));
            Err("lev failed to record the answer; see its log.".into())
        }
        Err(e) => Err(format!("lev refused: {e}")),
    }
}

fn decided_text(view: &lev_protocol::api::InteractionView) -> String {
    let by = view.request.answered_by.as_deref().unwrap_or("nobody");
    format!(
        "Already decided: {} by {by}. Nothing was changed.",
        view.request.status.as_str()
    )
}

async fn ephemeral(state: &AppState, config: &SlackConfig, channel: &str, user: &str, text: &str) {
    let body = lev_slack::ephemeral(channel, user, text);
    if let Err(e) = api(state, config, "chat.postEphemeral", &body).await {
        log::info(&format!("slack: chat.postEphemeral: {e}"));
    }
}

/// A Web API call made while Slack waits for our answer.
async fn api(
    state: &AppState,
    config: &SlackConfig,
    method: &str,
    body: &Value,
) -> Result<(), String> {
    state
        .settings()
        .webhooks
        .outbound_policy()
        .check_before_send(&config.api_url)
        .await
        .map_err(|e| format!("refused: api_url: {e}"))?;
    let client = state.outbound()?;
    let r = client
        .post(config.method_url(method))
        .header("content-type", "application/json; charset=utf-8")
        .bearer_auth(&config.bot_token)
        .timeout(std::time::Duration::from_secs(3))
        .body(body.to_string())
        .send()
        .await
        .map_err(|e| e.to_string())?;
    let status = r.status();
    let answer: Value =
        crate::outbound::client::read_capped(r, crate::outbound::client::ANSWER_BYTES)
            .await
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or(Value::Null);
    if status.is_success() && answer["ok"] == Value::Bool(true) {
        Ok(())
    } else {
        Err(format!(
            "HTTP {status}: {}",
            answer["error"].as_str().unwrap_or("no ok in the answer")
        ))
    }
}
