//! Triage: an interaction whose `route` starts with `operator`, created in a
//! session with a connected operator, goes to that operator first as an
//! `ask` whose question is `{"interaction": <InteractionRequest>}`.
//!
//! The operator's answer is either an `InteractionResponse` (it decides,
//! through the respond route's own path: validation, signing with the
//! operator's token name as the approver, the store's compare-and-set) or
//! `{"escalate": "why"}`, which hands it to people with the reason noted in
//! the interaction's `metadata.escalation` and on the `interaction.escalated`
//! event. No reply within the reply timeout, or no operator for the grace
//! time, hands it to people the same way. People see the interaction from the
//! start; whoever answers first wins.

use lev_protocol::api::InteractionView;
use lev_protocol::{Interaction, InteractionResponse, ServerMsg};
use lev_store::{EventReceiver, PageSizer, StoredEvent};
use serde_json::{Value, json};
use tokio::sync::broadcast;
use tokio::time::Instant;

use super::hub::{Kind, Waited};
use super::secs;
use crate::error::ApiError;
use crate::state::AppState;

/// Follow the store's committed events and start the triage of every new
/// interaction routed to the operator first. Whoever created it (a worker,
/// the gate) need not know of triage. After the event stream lagged, the
/// missed events are read back from the store, and only interactions still
/// pending are triaged.
pub async fn follow(state: AppState, mut events: EventReceiver) {
    let mut shutdown = state.shutdown_signal();
    let mut last_seq = 0i64;
    loop {
        let received = tokio::select! {
            received = events.recv() => received,
            () = crate::shutdown::stopped(&mut shutdown) => return,
        };
        match received {
            Ok(event) => {
                last_seq = last_seq.max(event.seq);
                if let Some(view) = created(&event) {
                    on_created(&state, &view.request);
                }
            }
            Err(broadcast::error::RecvError::Lagged(_)) => {
                // Read back in pages of about a MiB (a page of 10,000 events
                // of 256 KiB args was 2.5 GB), to the end.
                let mut pages = PageSizer::default();
                loop {
                    let Ok(missed) = state.store().events_after(last_seq, pages.limit()).await
                    else {
                        break;
                    };
                    if missed.is_empty() {
                        break;
                    }
                    pages.observe(&missed);
                    for event in missed {
                        last_seq = last_seq.max(event.seq);
                        let Some(view) = created(&event) else {
                            continue;
                        };
                        let still_pending = matches!(
                            state.store().get_interaction(view.request.id()).await,
                            Ok(Some(v)) if !v.request.status.is_final()
                        );
                        if still_pending {
                            on_created(&state, &view.request);
                        }
                    }
                }
            }
            Err(broadcast::error::RecvError::Closed) => return,
        }
    }
}

/// The interaction an `interaction.created` event carries.
fn created(event: &StoredEvent) -> Option<InteractionView> {
    if event.kind != "interaction.created" {
        return None;
    }
    serde_json::from_value(event.data.clone()).ok()
}

/// Start the triage of a new interaction when it is routed to the operator
/// first and the session has one connected. Every replica sees the
/// creation; one triages it ([`claim`]).
fn on_created(state: &AppState, interaction: &Interaction) {
    if !interaction.request.routes_to_operator_first() {
        return;
    }
    let (task_state, interaction) = (state.clone(), interaction.clone());
    state.spawn(async move {
        let state = task_state;
        let session_id = &interaction.request.session_id;
        if matches!(state.operators().is_connected(session_id).await, Ok(true))
            && claim(&state, interaction.id()).await
        {
            run(state, interaction).await;
        }
    });
}

/// Whether this replica triages interaction `id`: the first to spend its
/// triage key in the store's nonce ledger does, once across every replica
/// and restart (the key holds a blank, which no approval's nonce does, so no
/// worker can spend it). A store that cannot be reached triages nothing:
/// people answer it as they would.
async fn claim(state: &AppState, id: &str) -> bool {
    matches!(
        state
            .store()
            .consume_nonce(&format!("triage {id}"), "triage")
            .await,
        Ok(lev_store::NonceOutcome::Spent)
    )
}

/// The latest instant an interaction can matter: its expiry, else far away.
fn deadline_of(interaction: &Interaction) -> Instant {
    let far = Instant::now() + std::time::Duration::from_secs(365 * 24 * 3600);
    interaction.expires_at.map_or(far, |at| {
        let left = at - time::OffsetDateTime::now_utc();
        std::time::Duration::try_from(left).map_or_else(|_| Instant::now(), |d| Instant::now() + d)
    })
}

async fn run(state: AppState, interaction: Interaction) {
    let id = interaction.id().to_owned();
    let session_id = interaction.request.session_id.clone();
    let hub = std::sync::Arc::clone(state.operators());
    let settings = hub.settings().clone();
    let question = json!({ "interaction": interaction.request });
    // Registered before the ask goes out: an answer by a person ends triage.
    let mut watch = state.hub().register(&id);
    let Ok(mut ticket) = hub
        .submit(&session_id, Kind::Ask, |req_id| ServerMsg::Ask {
            req_id,
            question,
        })
        .await
    else {
        // The store cannot be reached: people answer it as they would.
        return;
    };
    let deadline = deadline_of(&interaction);
    let mut shutdown = state.shutdown_signal();
    let outcome = loop {
        tokio::select! {
            waited = ticket.wait(deadline) => break waited,
            // The question stays pending for people; the server stops.
            () = crate::shutdown::stopped(&mut shutdown) => return,
            changed = watch.rx.changed() => {
                let still_pending = matches!(
                    state.store().get_interaction(&id).await,
                    Ok(Some(view)) if !view.request.status.is_final()
                );
                if changed.is_err() || !still_pending {
                    return; // dropping the ticket withdraws the ask
                }
            }
        }
    };
    let (reason, by) = match outcome {
        Waited::Replied(reply) => {
            let lev_protocol::ClientMsg::Answer { value, .. } = reply.msg else {
                return;
            };
            match apply_operator_answer(&state, &id, value, &reply.by).await {
                Ok(()) => return,
                Err(Refusal::Escalate(why)) => (why, reply.by),
                Err(Refusal::Invalid(why)) => {
                    let _ = hub
                        .send(
                            &session_id,
                            &ServerMsg::Error {
                                req_id: Some(ticket.req_id().to_owned()),
                                code: "invalid_answer".into(),
                                message: format!(
                                    "{why}; the interaction was handed to people instead"
                                ),
                            },
                        )
                        .await;
                    (
                        format!("the operator's answer was refused: {why}"),
                        reply.by,
                    )
                }
            }
        }
        Waited::NoOperator => (
            format!(
                "no operator was connected to session {session_id} for {}",
                secs(settings.grace)
            ),
            reply_by_default(),
        ),
        Waited::ReplyTimeout => (
            format!(
                "the operator did not answer within {}",
                secs(settings.reply_timeout)
            ),
            reply_by_default(),
        ),
        Waited::Sent | Waited::Deadline => return,
    };
    match state.store().escalate_interaction(&id, &reason, &by).await {
        Ok(Some(_)) => state.metrics().escalated(),
        Ok(None) => {}
        Err(e) => crate::log::error(&format!("triage of {id}: cannot note the escalation: {e}")),
    }
}

fn reply_by_default() -> String {
    "lev".to_owned()
}

/// Apply the operator's answer. `Ok` when it decided the interaction (or
/// somebody else had); `Err(reason)` when it asked to escalate or its answer
/// was refused.
async fn apply_operator_answer(
    state: &AppState,
    id: &str,
    value: Value,
    by: &str,
) -> Result<(), Refusal> {
    if let Some(why) = value.get("escalate") {
        let why = why.as_str().map_or_else(|| why.to_string(), str::to_owned);
        return Err(Refusal::Escalate(why));
    }
    let mut value = value;
    if let Value::Object(m) = &mut value {
        m.entry("request_id").or_insert_with(|| json!(id));
    }
    let answer: InteractionResponse = serde_json::from_value(value).map_err(|e| {
        Refusal::Invalid(format!(
            "expected an InteractionResponse or {{\"escalate\": \"why\"}}: {e}"
        ))
    })?;
    let by = crate::interactions::By {
        name: by,
        operator: true,
        via: None,
    };
    match crate::interactions::answer(state, id, answer, by).await {
        Ok(_) | Err(ApiError::AlreadyAnswered(_) | ApiError::Gone(_)) => Ok(()),
        Err(ApiError::Conflict { .. } | ApiError::NotFound(_)) => Ok(()),
        // The policy asks people for this call: not the operator's fault.
        Err(ApiError::Forbidden {
            code: "vote_not_allowed" | "self_approval",
            message,
        }) => Err(Refusal::Escalate(message)),
        Err(e) => Err(Refusal::Invalid(e.to_string())),
    }
}

/// Why the operator's answer did not decide the interaction.
#[derive(Debug)]
enum Refusal {
    /// `{"escalate": "why"}`.
    Escalate(String),
    /// Not a valid answer to this interaction.
    Invalid(String),
}
