//! Slack as an outbox endpoint: the Slack endpoint's deliveries (written
//! with each interaction event, like a webhook's) become Web API calls.
//! `interaction.created` posts the message (`chat.postMessage`) and keeps
//! its channel and `ts`; a decision, expiry or cancel updates it
//! (`chat.update`) whoever decided and through whatever channel; a reminder
//! replies in the message's thread. Each call is retried by the outbox:
//! Slack's 429 `Retry-After` is honoured, and a failed call is in the
//! delivery log (`lev webhook deliveries wh_slack`).

use std::time::Duration;

use lev_protocol::api::InteractionView;
use lev_store::{DueDelivery, Endpoint, EndpointKind};
use serde_json::{Value, json};
use time::OffsetDateTime;

use super::SlackConfig;
use crate::outbound::client::{ANSWER_BYTES, Sent, from_response, read_capped};
use crate::state::AppState;

/// The Slack endpoint's id.
pub const ENDPOINT_ID: &str = "wh_slack";

/// The events Slack is sent.
pub const EVENTS: &[&str] = &[
    "interaction.created",
    "interaction.answered",
    "interaction.expired",
    "interaction.cancelled",
    "interaction.reminder",
    "interaction.voted",
    "interaction.escalated",
];

/// What a posted message is remembered by when it was not posted (the
/// config's filters did not want the interaction).
const SKIPPED: &str = "-";

/// Register the Slack endpoint at start (with a config), or disable it
/// (without one), so the outbox writes Slack deliveries only while some
/// server can send them.
///
/// # Errors
/// When the store refuses.
pub async fn register(state: &AppState) -> Result<(), String> {
    let store = state.store();
    let existing = store
        .endpoints()
        .await
        .map_err(|e| e.to_string())?
        .into_iter()
        .find(|e| e.id == ENDPOINT_ID);
    match state.settings().slack.as_deref() {
        Some(config) => {
            let events: Vec<String> = EVENTS.iter().map(|e| (*e).to_owned()).collect();
            let current = existing.as_ref().is_some_and(|e| {
                e.disabled_at.is_none() && e.url == config.api_url && e.events == events
            });
            if !current {
                store
                    .put_endpoint(Endpoint {
                        id: ENDPOINT_ID.into(),
                        kind: EndpointKind::Slack,
                        url: config.api_url.clone(),
                        events,
                        secret: String::new(),
                        created_by: "system".into(),
                        created_at: existing.map_or_else(OffsetDateTime::now_utc, |e| e.created_at),
                        disabled_at: None,
                        disabled_reason: None,
                    })
                    .await
                    .map_err(|e| e.to_string())?;
            }
        }
        None => {
            if existing.is_some_and(|e| e.disabled_at.is_none()) {
                store
                    .disable_endpoint(
                        ENDPOINT_ID,
                        "a server started without --slack-config: give every server the same one",
                    )
                    .await
                    .map_err(|e| e.to_string())?;
            }
        }
    }
    state.webhooks_changed();
    Ok(())
}

/// Call Slack's Web API method with a JSON body.
async fn call(client: &reqwest::Client, config: &SlackConfig, method: &str, body: &Value) -> Sent {
    let response = client
        .post(config.method_url(method))
        .header("content-type", "application/json; charset=utf-8")
        .bearer_auth(&config.bot_token)
        .body(body.to_string())
        .send()
        .await;
    let r = match response {
        Ok(r) => r,
        Err(e) => return Sent::failed(format!("{method}: {e}")),
    };
    let status = r.status().as_u16();
    if !r.status().is_success() {
        let mut sent = from_response(r).await;
        sent.gone = false; // a 410 from Slack is no reason to stop posting
        sent.error = sent.error.map(|e| format!("{method}: {e}"));
        return sent;
    }
    let bytes = match read_capped(r, ANSWER_BYTES).await {
        Ok(b) => b,
        Err(e) => return Sent::failed(format!("{method}: reading the answer: {e}")),
    };
    let answer: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    if answer["ok"] == Value::Bool(true) {
        Sent {
            status: Some(status),
            error: None,
            retry_after: None,
            ok: true,
            gone: false,
            answer: None,
        }
        .with_answer(answer)
    } else {
        let error = answer["error"].as_str().unwrap_or("not a Slack answer");
        Sent {
            status: Some(status),
            error: Some(format!("{method}: {error}")),
            retry_after: None,
            ok: false,
            gone: false,
            answer: None,
        }
    }
}

/// Send one Slack delivery.
pub async fn deliver(state: &AppState, client: &reqwest::Client, d: &DueDelivery) -> Sent {
    let Some(config) = state.settings().slack.clone() else {
        return Sent::failed("this server has no --slack-config".into());
    };
    if let Err(e) = state
        .settings()
        .webhooks
        .outbound_policy()
        .check_before_send(&config.api_url)
        .await
    {
        return Sent::failed(format!("refused: api_url: {e}"));
    }
    let body: Value = serde_json::from_str(&d.body).unwrap_or(Value::Null);
    let Some(id) = body["data"]["request"]["id"]
        .as_str()
        .or_else(|| body["data"]["id"].as_str())
    else {
        return Sent::ok_nothing();
    };
    let view = match state.store().get_interaction(id).await {
        Ok(Some(view)) => view,
        Ok(None) => return Sent::ok_nothing(),
        Err(e) => return Sent::failed(format!("reading {id}: {e}")),
    };
    let posted = match state.store().message_ref(&d.endpoint_id, id).await {
        Ok(r) => r,
        Err(e) => return Sent::failed(format!("reading {id}'s message: {e}")),
    };
    let delivery = Delivery {
        state,
        client,
        config: &config,
        d,
        id,
        view: &view,
        posted: posted.as_deref(),
    };
    match d.event_kind.as_str() {
        "interaction.created" => delivery.post().await,
        "interaction.reminder" | "interaction.escalated" => delivery.reply_in_thread().await,
        // A vote that decided: the decision's own event updates the message.
        "interaction.voted" if view.request.status.is_final() => Sent::ok_nothing(),
        _ => delivery.update().await,
    }
}

/// One outbox delivery of the Slack endpoint, about interaction `id`, with
/// the message already posted for it (`channel ts`, or [`SKIPPED`]).
struct Delivery<'a> {
    state: &'a AppState,
    client: &'a reqwest::Client,
    config: &'a SlackConfig,
    d: &'a DueDelivery,
    id: &'a str,
    view: &'a InteractionView,
    posted: Option<&'a str>,
}

impl Delivery<'_> {
    /// `interaction.created`: post the message (once), unless the config
    /// does not want it; remember where it went.
    async fn post(&self) -> Sent {
        let (state, config, d, id) = (self.state, self.config, self.d, self.id);
        if self.posted.is_some() {
            return Sent::ok_nothing();
        }
        if !config.wants(self.view) {
            return remember(state, d, id, SKIPPED, Sent::ok_nothing()).await;
        }
        let mut message = super::message(self.view, config.dashboard_url.as_deref());
        message["channel"] = Value::from(config.channel.as_str());
        let sent = call(self.client, config, "chat.postMessage", &message).await;
        let posted = sent.answer().map(|answer| {
            let channel = answer["channel"].as_str().unwrap_or(&config.channel);
            answer["ts"].as_str().map(|ts| format!("{channel} {ts}"))
        });
        match posted {
            Some(Some(r)) => remember(state, d, id, &r, sent).await,
            Some(None) => Sent::failed("chat.postMessage: no ts in Slack's answer".into()),
            None => sent,
        }
    }

    /// A reminder or an escalation: a reply in the message's thread while
    /// the interaction is pending.
    async fn reply_in_thread(&self) -> Sent {
        let Some((channel, ts)) = self.posted.and_then(split_ref) else {
            return Sent::ok_nothing();
        };
        let view = self.view;
        if view.request.status.is_final() {
            return Sent::ok_nothing();
        }
        let text = if self.d.event_kind == "interaction.escalated" {
            let to = view
                .request
                .request
                .quorum
                .as_ref()
                .map(|q| q.escalate_to.join(", "))
                .unwrap_or_default();
            format!(
                "Escalated: {} may vote on {} now.",
                super::blocks::escape_mrkdwn(&to),
                super::blocks::escape_mrkdwn(self.id)
            )
        } else {
            let minutes = (OffsetDateTime::now_utc() - view.request.created_at).whole_minutes();
            format!(
                "Still waiting for an answer ({} pending for {minutes} min).",
                super::blocks::escape_mrkdwn(self.id)
            )
        };
        call(
            self.client,
            self.config,
            "chat.postMessage",
            &json!({"channel": channel, "thread_ts": ts, "text": text}),
        )
        .await
    }

    /// Any other change: the posted message updated to the interaction's
    /// state.
    async fn update(&self) -> Sent {
        match self.posted {
            Some(SKIPPED) => Sent::ok_nothing(),
            Some(r) => {
                let Some((channel, ts)) = split_ref(r) else {
                    return Sent::ok_nothing();
                };
                update(self.client, self.config, channel, ts, self.view).await
            }
            // Not posted yet: the post is still being retried (and will show
            // the decision), or the interaction is older than Slack here.
            None => {
                if posted_before_slack(self.state, self.view).await {
                    Sent::ok_nothing()
                } else {
                    let mut sent = Sent::failed("the message is not posted yet".into());
                    sent.retry_after = Some(Duration::from_secs(2));
                    sent
                }
            }
        }
    }
}

/// `chat.update` of a posted message with the interaction as it stands.
pub async fn update(
    client: &reqwest::Client,
    config: &SlackConfig,
    channel: &str,
    ts: &str,
    view: &InteractionView,
) -> Sent {
    let mut message = super::message(view, config.dashboard_url.as_deref());
    message["channel"] = Value::from(channel);
    message["ts"] = Value::from(ts);
    call(client, config, "chat.update", &message).await
}

fn split_ref(r: &str) -> Option<(&str, &str)> {
    r.split_once(' ')
}

async fn remember(state: &AppState, d: &DueDelivery, id: &str, r: &str, sent: Sent) -> Sent {
    match state.store().set_message_ref(&d.endpoint_id, id, r).await {
        Ok(()) => sent,
        // Posted but not remembered: retried, it would post twice, which
        // beats a message that never updates.
        Err(e) => Sent::failed(format!("remembering {id}'s message: {e}")),
    }
}

async fn posted_before_slack(state: &AppState, view: &InteractionView) -> bool {
    match state.store().endpoints().await {
        Ok(list) => list
            .iter()
            .find(|e| e.id == ENDPOINT_ID)
            .is_none_or(|e| view.request.created_at < e.created_at),
        Err(_) => false,
    }
}
