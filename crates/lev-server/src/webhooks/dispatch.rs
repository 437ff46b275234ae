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
use crate::state::AppState;

/// How long a claim keeps a delivery from other servers: longer than an
/// attempt's timeout and its recording.
const LEASE: Duration = Duration::from_secs(60);
/// One attempt's time limit.
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(10);
/// Attempts in flight at once.
const IN_FLIGHT: usize = 32;
/// How often to look for endpoints when there are none, and the longest
/// sleep between checks when there are.
const POLL: Duration = Duration::from_secs(5);
/// How long to gather events before claiming.
const DEBOUNCE: Duration = Duration::from_millis(25);
/// Finished deliveries are kept this long for the delivery log.
const KEEP: Duration = Duration::from_secs(7 * 24 * 3600);
/// Most bytes of a failed response's body kept as its error.
const ERROR_BODY: usize = 300;

/// What one attempt came to.
#[derive(Debug)]
pub struct Sent {
    /// The receiver's status, when it answered.
    pub status: Option<u16>,
    /// What went wrong.
    pub error: Option<String>,
    /// How the receiver wants it retried (`Retry-After`).
    pub retry_after: Option<Duration>,
    /// Taken (2xx).
    pub ok: bool,
    /// Never again for this endpoint (410).
    pub gone: bool,
    /// The receiver's answer, when the sender reads it (Slack's).
    pub answer: Option<serde_json::Value>,
}

impl Sent {
    /// A failure before any answer.
    #[must_use]
    pub fn failed(error: String) -> Self {
        Self {
            status: None,
            error: Some(error),
            retry_after: None,
            ok: false,
            gone: false,
            answer: None,
        }
    }

    /// Done, with nothing to send (an event the receiver does not need).
    #[must_use]
    pub fn ok_nothing() -> Self {
        Self {
            status: None,
            error: None,
            retry_after: None,
            ok: true,
            gone: false,
            answer: None,
        }
    }

    /// With the receiver's answer kept.
    #[must_use]
    pub fn with_answer(mut self, answer: serde_json::Value) -> Self {
        self.answer = Some(answer);
        self
    }

    /// The receiver's answer, when it took the call.
    #[must_use]
    pub fn answer(&self) -> Option<&serde_json::Value> {
        self.answer.as_ref().filter(|_| self.ok)
    }
}

/// The HTTP client for deliveries: the system's roots, no redirects (a
/// redirect could move a signed body elsewhere), no proxy from the
/// environment, and a resolver that leaves out every address `policy`
/// refuses (checked when connecting, so DNS that answers otherwise than
/// when a URL was checked gains nothing).
///
/// # Errors
/// When TLS cannot be set up.
pub fn http_client(policy: crate::outbound::OutboundPolicy) -> Result<reqwest::Client, String> {
    reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(5))
        .dns_resolver(crate::outbound::GuardedResolver::new(Arc::new(policy)))
        .timeout(ATTEMPT_TIMEOUT)
        .no_proxy()
        .redirect(reqwest::redirect::Policy::none())
        .user_agent(concat!("lev/", env!("CARGO_PKG_VERSION")))
        .tls_backend_preconfigured(lev_io::outbound_tls_config()?)
        .build()
        .map_err(|e| format!("cannot build the webhook HTTP client: {e}"))
}

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
async fn attempt(state: &AppState, client: &reqwest::Client, d: DueDelivery) {
    let started = Instant::now();
    let at = OffsetDateTime::now_utc();
    let sent = match d.kind {
        EndpointKind::Http => post(state, client, &d).await,
        EndpointKind::Slack => crate::slack::deliver::deliver(state, client, &d).await,
    };
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

/// POST a Standard Webhooks delivery.
async fn post(state: &AppState, client: &reqwest::Client, d: &DueDelivery) -> Sent {
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
    let response = client
        .post(&d.url)
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

/// Most bytes of an answer read from a service lev calls (Slack's Web
/// API): what it sends past this is not read, so a misbehaving or
/// impersonated endpoint cannot make the server buffer without bound
/// within its attempt's time.
pub const ANSWER_BYTES: usize = 1024 * 1024;

/// The body of `r`, at most `limit` bytes.
///
/// # Errors
/// When it cannot be read, or is longer than `limit`.
pub async fn read_capped(mut r: reqwest::Response, limit: usize) -> Result<Vec<u8>, String> {
    let mut body = Vec::new();
    while let Some(chunk) = r.chunk().await.map_err(|e| e.to_string())? {
        if body.len() + chunk.len() > limit {
            return Err(format!(
                "expected an answer of at most {} KiB, found more",
                limit / 1024
            ));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// What a receiver's answer means; the body is read only on failure, and
/// only its beginning.
pub async fn from_response(mut r: reqwest::Response) -> Sent {
    let status = r.status().as_u16();
    let retry_after = r
        .headers()
        .get("retry-after")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map(Duration::from_secs);
    if r.status().is_success() {
        return Sent {
            status: Some(status),
            error: None,
            retry_after: None,
            ok: true,
            gone: false,
            answer: None,
        };
    }
    let mut body = Vec::new();
    while body.len() < ERROR_BODY {
        match r.chunk().await {
            Ok(Some(chunk)) => body.extend_from_slice(&chunk),
            _ => break,
        }
    }
    body.truncate(ERROR_BODY);
    let text = String::from_utf8_lossy(&body).trim().to_owned();
    Sent {
        status: Some(status),
        error: Some(if text.is_empty() {
            format!("HTTP {status}")
        } else {
            format!("HTTP {status}: {text}")
        }),
        retry_after,
        ok: false,
        gone: status == 410,
        answer: None,
    }
}

/// A transport error as one line: its causes, never a secret (the URL's
/// query is not printed).
fn describe(e: &reqwest::Error) -> String {
    let kind = if e.is_timeout() {
        "timed out"
    } else if e.is_connect() {
        "cannot connect"
    } else if e.is_redirect() {
        "redirected"
    } else {
        "failed"
    };
    let mut text = kind.to_owned();
    let mut source = std::error::Error::source(e);
    while let Some(cause) = source {
        let more = cause.to_string();
        if !text.contains(&more) {
            text.push_str(": ");
            text.push_str(&more);
        }
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    fn response(len: usize) -> reqwest::Response {
        reqwest::Response::from(axum::http::Response::new(vec![b'a'; len]))
    }

    /// An answer (Slack's Web API) is read up to its cap, never whole.
    #[tokio::test]
    async fn answers_are_read_up_to_their_cap() {
        assert_eq!(read_capped(response(1000), 1000).await.unwrap().len(), 1000);
        let e = read_capped(response(1001), 1000).await.unwrap_err();
        assert!(e.contains("at most"), "{e}");
    }
}
