//! `GET /v1/events`: Server-Sent Events with durable ids.
//!
//! An event's id is its sequence number in the store, so `Last-Event-ID` (or
//! `?after=`) resumes across restarts: the stream replays what the store holds
//! after that id, then follows live events. A gap or a lag in the live feed is
//! filled by reading the store again, so no event is skipped or repeated.

use std::collections::VecDeque;
use std::convert::Infallible;

use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::sse::{Event, KeepAlive, Sse};
use futures_util::Stream;
use lev_protocol::api::Role;
use lev_store::{EventReceiver, PageSizer, StoredEvent};
use serde::Deserialize;
use tokio::sync::broadcast::error::RecvError;
use tokio::sync::watch;

use super::Q;
use crate::auth::Principal;
use crate::error::{ApiError, ApiResult};
use crate::state::AppState;

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
    let shutdown = state.shutdown_signal();
    let feed = Feed {
        state,
        live,
        last: start,
        page: VecDeque::new(),
        behind: true,
        pages: PageSizer::default(),
        shutdown,
    };
    // The stream is read only as fast as the client takes it: nothing is
    // queued for a client beyond one page read back from the store (about
    // a MiB) and hyper's write buffer. A client that stops reading while
    // events are due is cut off by the connection's write timeout.
    let stream = futures_util::stream::unfold(feed, |mut feed| async move {
        feed.next().await.map(|event| (Ok(event), feed))
    });
    Ok(Sse::new(stream).keep_alive(KeepAlive::default()))
}

fn to_sse(event: &StoredEvent) -> Event {
    Event::default()
        .id(event.seq.to_string())
        .event(event.kind.as_str())
        .data(event.data.to_string())
}

/// One client's place in the event log.
struct Feed {
    state: AppState,
    live: EventReceiver,
    /// The last event sent.
    last: i64,
    /// Events read back from the store, not yet sent.
    page: VecDeque<StoredEvent>,
    /// The store may hold events after `last` that the live feed will not
    /// bring (at the start, after a lag or a gap).
    behind: bool,
    pages: PageSizer,
    shutdown: watch::Receiver<bool>,
}

impl Feed {
    /// The next event for the client; `None` ends the stream (shutdown, the
    /// store failed or closed).
    async fn next(&mut self) -> Option<Event> {
        loop {
            if *self.shutdown.borrow() {
                return None;
            }
            if let Some(event) = self.page.pop_front() {
                self.last = event.seq;
                return Some(to_sse(&event));
            }
            if self.behind {
                let batch = match self
                    .state
                    .store()
                    .events_after(self.last, self.pages.limit())
                    .await
                {
                    Ok(batch) => batch,
                    Err(e) => {
                        crate::log::error(&format!("events: cannot read the event log: {e}"));
                        return None;
                    }
                };
                if batch.is_empty() {
                    self.behind = false;
                } else {
                    self.pages.observe(&batch);
                    self.page = batch.into();
                }
                continue;
            }
            tokio::select! {
                received = self.live.recv() => match received {
                    Ok(event) if event.seq <= self.last => {}
                    Ok(event) if event.seq == self.last + 1 => {
                        self.last = event.seq;
                        return Some(to_sse(&event));
                    }
                    Ok(_) | Err(RecvError::Lagged(_)) => self.behind = true,
                    Err(RecvError::Closed) => return None,
                },
                () = crate::shutdown::stopped(&mut self.shutdown) => return None,
            }
        }
    }
}
