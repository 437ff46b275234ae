//! `GET /v1/events`: Server-Sent Events with durable ids.
//!
//! An event's id is its sequence number in the store, so `Last-Event-ID` (or
//! `?after=`) resumes across restarts: the stream replays what the store holds
//! after that id, then follows live events. A gap or a lag in the live feed is
//! filled by reading the store again, so no event is skipped or repeated.

use std::convert::Infallible;

use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::sse::{Event, KeepAlive, Sse};
use futures_util::Stream;
use lev_protocol::api::Role;
use lev_store::StoredEvent;
use serde::Deserialize;
use tokio::sync::{broadcast, mpsc};

use super::Q;
use crate::auth::Principal;
use crate::error::{ApiError, ApiResult};
use crate::state::AppState;

/// Events read from the store at a time.
const PAGE: u32 = 500;

/// The query of `GET /v1/events`.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct EventsQuery {
    /// Events after this id, 0 for all (`Last-Event-ID` wins when both
    /// are sent); absent, only new events.
    #[param(minimum = 0)]
    after: Option<u64>,
}

/// One event of the stream, as the OpenAPI document describes it.
#[derive(utoipa::ToSchema)]
#[allow(dead_code)] // only described
pub struct SseEvent {
    /// The event's seq: resume after it with `Last-Event-ID`.
    #[schema(pattern = "^[0-9]+$")]
    id: String,
    /// Its kind, such as `interaction.created`.
    event: String,
    /// Its data: one JSON value.
    data: String,
}

/// `GET /v1/events` (approver).
#[utoipa::path(
    get, path = "/v1/events", tag = "interactions", params(EventsQuery,
        ("Last-Event-ID" = Option<i64>, Header, description = "Resume after this event id")),
    responses((status = 200, description = "Server-sent events, each with `id` (its seq), `event` (its kind) and `data` (its JSON); comments keep the connection alive", content_type = "text/event-stream", body = SseEvent))
)]
pub async fn events(
    State(state): State<AppState>,
    principal: Principal,
    headers: HeaderMap,
    Q(query): Q<EventsQuery>,
) -> ApiResult<Sse<impl Stream<Item = Result<Event, Infallible>>>> {
    principal.require(&[Role::Approver])?;
    let from_header = match headers.get("last-event-id") {
        None => None,
        Some(v) => Some(
            v.to_str()
                .ok()
                .and_then(|s| s.trim().parse::<u64>().ok())
                .ok_or_else(|| {
                    ApiError::Invalid("Last-Event-ID: expected an event id this server sent".into())
                })?,
        ),
    };
    // Subscribe before reading the store: nothing committed in between is lost.
    let live = state.store().subscribe();
    let start = match from_header.or(query.after) {
        Some(seq) => i64::try_from(seq).map_err(|_| {
            ApiError::Invalid(format!(
                "after: expected an event id this server sent, found {seq}"
            ))
        })?,
        None => state.store().last_event_seq().await?,
    };
    let (tx, rx) = mpsc::channel::<Event>(64);
    state.clone().spawn(pump(state, live, start, tx));
    let stream = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|event| (Ok(event), rx))
    });
    Ok(Sse::new(stream).keep_alive(KeepAlive::default()))
}

fn to_sse(event: &StoredEvent) -> Event {
    Event::default()
        .id(event.seq.to_string())
        .event(event.kind.as_str())
        .data(event.data.to_string())
}

/// Send the store's events after `*last`; false when the client left or the
/// store failed.
async fn catch_up(state: &AppState, last: &mut i64, tx: &mpsc::Sender<Event>) -> bool {
    loop {
        let batch = match state.store().events_after(*last, PAGE).await {
            Ok(batch) => batch,
            Err(e) => {
                crate::log::error(&format!("events: cannot read the event log: {e}"));
                return false;
            }
        };
        if batch.is_empty() {
            return true;
        }
        for event in &batch {
            if tx.send(to_sse(event)).await.is_err() {
                return false;
            }
            *last = event.seq;
        }
    }
}

async fn pump(
    state: AppState,
    mut live: broadcast::Receiver<StoredEvent>,
    mut last: i64,
    tx: mpsc::Sender<Event>,
) {
    let mut shutdown = state.shutdown_signal();
    if !catch_up(&state, &mut last, &tx).await {
        return;
    }
    loop {
        tokio::select! {
            received = live.recv() => match received {
                Ok(event) if event.seq <= last => {}
                Ok(event) if event.seq == last + 1 => {
                    if tx.send(to_sse(&event)).await.is_err() {
                        return;
                    }
                    last = event.seq;
                }
                Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => {
                    if !catch_up(&state, &mut last, &tx).await {
                        return;
                    }
                }
                Err(broadcast::error::RecvError::Closed) => return,
            },
            () = tx.closed() => return,
            () = crate::shutdown::stopped(&mut shutdown) => return,
        }
    }
}
