//! The dispatcher: claims due deliveries from the store (a lease, so one
//! server sends each at a time), sends them concurrently on tasks of their
//! own, and records every attempt. It runs beside the request path and never
//! holds it up: a slow receiver only keeps its own deliveries waiting, a
//! dead one is retried with backoff until the retry horizon, and a 410
//! disables its endpoint.
//!
//! It wakes when events commit (they carry new deliveries), when the next
//! retry is due, and when endpoints change; with no endpoint it only checks
//! now and then whether one was added on another server.

use std::sync::Arc;
use std::time::{Duration, Instant};

use lev_store::{AttemptOutcome, DeliveryAttempt, DueDelivery, EndpointKind};
use time::OffsetDateTime;
use tokio::sync::Semaphore;

use crate::log;
use crate::outbound::client::{Sent, describe, from_response};
use crate::state::AppState;

/// How long a claim keeps a delivery from other servers: longer than an
/// attempt's timeout and its recording.
const LEASE: Duration = Duration::from_secs(60);
/// Attempts in flight at once.
const IN_FLIGHT: usize = 32;
/// How often to look for endpoints when there are none, and the longest
/// sleep between checks when there are.
const POLL: Duration = Duration::from_secs(5);
/// How long to gather events before claiming.
const DEBOUNCE: Duration = Duration::from_millis(25);
/// Finished deliveries are kept this long for the delivery log.
const KEEP: Duration = Duration::from_secs(7 * 24 * 3600);
/// Run the dispatcher until shutdown.
pub async fn run(state: AppState) {
    let store = Arc::clone(state.store_arc());
    let mut events = store.subscribe();
    let mut shutdown = state.shutdown_signal();
    let permits = Arc::new(Semaphore::new(IN_FLIGHT));
    let changed = state.webhooks_notify();
    let mut last_prune: Option<Instant> = None;
    let mut last_error: Option<Instant> = None;
    // Whether an enabled endpoint exists: read again when endpoints change
    // here, and every POLL for those added on another server.
    let mut any: Option<(bool, Instant)> = None;
    loop {
        if *shutdown.borrow() {
            return;
        }
        if any.is_none_or(|(_, at)| at.elapsed() >= POLL) {
            any = Some(match store.endpoints().await {
                Ok(list) => (list.iter().any(|e| e.disabled_at.is_none()), Instant::now()),
                Err(e) => {
                    note_error(
                        &mut last_error,
                        &format!("webhooks: listing endpoints: {e}"),
                    );
                    (true, Instant::now())
                }
            });
        }
        let active = any.is_some_and(|(a, _)| a);
        if !active {
            tokio::select! {
                () = tokio::time::sleep(POLL) => {}
                () = changed.notified() => any = None,
                _ = shutdown.changed() => {}
            }
            continue;
        }
        // Made on first need (loading the system's roots takes a moment, and
        // a server without endpoints never needs it).
        let client = match state.outbound() {
            Ok(c) => c.clone(),
            Err(e) => {
                note_error(&mut last_error, &format!("webhooks: cannot send: {e}"));
                tokio::select! {
                    () = tokio::time::sleep(POLL) => {}
                    _ = shutdown.changed() => {}
                }
                continue;
            }
        };
        claim_and_send(&state, &client, &permits, &mut last_error).await;
        if last_prune.is_none_or(|t| t.elapsed() > Duration::from_secs(3600)) {
            last_prune = Some(Instant::now());
            let _ = store
                .prune_deliveries(OffsetDateTime::now_utc() - KEEP)
                .await;
        }
        let wait = match store.next_delivery_at().await {
            Ok(Some(at)) => {
                let d = at - OffsetDateTime::now_utc();
                Duration::try_from(d).unwrap_or(Duration::ZERO).min(POLL)
            }
            Ok(None) => POLL,
            Err(_) => Duration::from_secs(1),
        };
        if wait.is_zero() && permits.available_permits() > 0 {
            // More are due now: claim again (after a breath, so a store that
            // keeps failing is not hammered).
            tokio::time::sleep(DEBOUNCE).await;
            continue;
        }
        tokio::select! {
            r = events.recv() => {
                if let Err(tokio::sync::broadcast::error::RecvError::Closed) = r {
                    tokio::time::sleep(POLL).await;
                }
                // Gather what commits meanwhile: one claim serves them all.
                tokio::time::sleep(DEBOUNCE).await;
                events.skip_to_end();
            }
            () = tokio::time::sleep(wait) => {}
            () = changed.notified() => any = None,
            _ = shutdown.changed() => {}
        }
    }
}

fn note_error(last: &mut Option<Instant>, message: &str) {
    if last.is_none_or(|t| t.elapsed() > Duration::from_secs(30)) {
        *last = Some(Instant::now());
        log::info(message);
    }
}

async fn claim_and_send(
    state: &AppState,
    client: &reqwest::Client,
    permits: &Arc<Semaphore>,
    last_error: &mut Option<Instant>,
) {
    let free = permits.available_permits();
    if free == 0 {
        return;
    }
    let now = OffsetDateTime::now_utc();
    let due = match state
        .store()
        .claim_deliveries(now, now + LEASE, u32::try_from(free).unwrap_or(1))
        .await
    {
        Ok(due) => due,
        Err(e) => {
            note_error(last_error, &format!("webhooks: claiming deliveries: {e}"));
            return;
        }
    };
    for delivery in due {
        let Ok(permit) = Arc::clone(permits).acquire_owned().await else {
            return;
        };
        let (task_state, client) = (state.clone(), client.clone());
        state.spawn(async move {
            let state = task_state;
            let mut shutdown = state.shutdown_signal();
            tokio::select! {
                () = attempt(&state, &client, delivery) => {}
                // A stopping server does not wait for a slow receiver: the
                // attempt is not recorded, its lease runs out, and it is sent
                // again (at least once) after the restart.
                () = crate::shutdown::stopped(&mut shutdown) => {}
            }
            drop(permit);
            state.webhooks_notify().notify_one();
        });
    }
}

/// Make one attempt and record it.
/// The interaction a delivery's event is about (`data.id` of an
/// `interaction.*` event), for its trace.
fn interaction_of(d: &DueDelivery) -> Option<String> {
    if !d.event_kind.starts_with("interaction.") {
        return None;
    }
    let body: serde_json::Value = serde_json::from_str(&d.body).ok()?;
    // `data` is the interaction, or its view (`{"request": ...}`).
    let data = &body["data"];
    data["id"]
        .as_str()
        .or_else(|| data["request"]["id"].as_str())
        .map(str::to_owned)
}

async fn attempt(state: &AppState, client: &reqwest::Client, d: DueDelivery) {
    let started = Instant::now();
    let at = OffsetDateTime::now_utc();
    let traced = if state.tracer().enabled() {
        interaction_of(&d).and_then(|id| Some((state.tracer().begin(&id)?, id)))
    } else {
        None
    };
    let began = std::time::SystemTime::now();
    let sent = match d.kind {
        EndpointKind::Http => post(state, client, &d, traced.as_ref().map(|t| t.0)).await,
        EndpointKind::Slack => crate::slack::deliver::deliver(state, client, &d).await,
    };
    let channel = match d.kind {
        EndpointKind::Http => "webhook",
        EndpointKind::Slack => "slack",
    };
    state.metrics().delivery(channel, sent.ok);
    if let Some((ctx, id)) = &traced {
        state.tracer().finish(
            id,
            *ctx,
            "interaction.notify",
            crate::trace::CLIENT,
            began,
            vec![
                ("lev.channel", channel.to_owned()),
                ("lev.event", d.event_kind.clone()),
                ("lev.delivered", sent.ok.to_string()),
            ],
        );
    }
    let settings = &state.settings().webhooks;
    let outcome = if sent.ok {
        AttemptOutcome::Delivered
    } else if sent.gone {
        AttemptOutcome::Disable("the receiver answered 410 Gone".into())
    } else {
        match settings.retry.next(
            d.attempts + 1,
            d.created_at,
            OffsetDateTime::now_utc(),
            sent.retry_after,
            jitter(),
        ) {
            Some(next) => AttemptOutcome::Retry(next),
            None => AttemptOutcome::GiveUp,
        }
    };
    let record = DeliveryAttempt {
        delivery_id: d.id.clone(),
        at,
        status: sent.status,
        error: sent.error,
        duration_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
        outcome,
    };
    // Not recorded (the store is down): the lease runs out and the
    // delivery is sent again, which at-least-once allows.
    if let Err(e) = state.store().record_attempt(record).await {
        log::info(&format!("webhooks: recording an attempt of {}: {e}", d.id));
    }
}

fn jitter() -> f64 {
    let mut b = [0u8; 4];
    if getrandom::fill(&mut b).is_err() {
        return 0.5;
    }
    f64::from(u32::from_le_bytes(b)) / f64::from(u32::MAX)
}

/// POST a Standard Webhooks delivery, with the `traceparent` of its span
/// when traced.
async fn post(
    state: &AppState,
    client: &reqwest::Client,
    d: &DueDelivery,
    trace: Option<crate::trace::Ctx>,
) -> Sent {
    let secret = match super::open_secret(
        &state.settings().webhooks.secret_keys,
        &d.endpoint_id,
        &d.secret,
    )
    .and_then(|s| super::secret_key(&s))
    {
        Ok(key) => key,
        Err(e) => return Sent::failed(format!("the endpoint's secret: {e}")),
    };
    // The endpoint may predate this server's settings, or come from a
    // replica with others: judged again, as this server sees it.
    if let Err(e) = state
        .settings()
        .webhooks
        .outbound_policy()
        .check_before_send(&d.url)
        .await
    {
        return Sent::failed(format!("refused: {e}"));
    }
    let timestamp = OffsetDateTime::now_utc().unix_timestamp();
    let signature = super::sign::sign(&secret, &d.id, timestamp, d.body.as_bytes());
    let mut request = client.post(&d.url);
    if let Some(ctx) = trace {
        request = request.header("traceparent", ctx.traceparent());
    }
    let response = request
        .header("content-type", "application/json")
        .header("webhook-id", &d.id)
        .header("webhook-timestamp", timestamp.to_string())
        .header("webhook-signature", signature)
        .body(d.body.clone())
        .send()
        .await;
    match response {
        Ok(r) => from_response(r).await,
        Err(e) => Sent::failed(describe(&e)),
    }
}
