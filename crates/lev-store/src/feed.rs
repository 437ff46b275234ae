//! The live feed of committed events ([`crate::EventStore::subscribe`]): a
//! broadcast whose memory is bounded by bytes as well as by count.
//!
//! tokio's broadcast channel keeps its last N values whole until every
//! receiver has read them, so one receiver that falls behind (an event
//! stream whose client stopped reading, a task that reads only now and
//! then) kept the last 4,096 events in memory: about 250 MB when workers
//! sent 60 KiB prompts, about 1 GB with 256 KiB args. Here the ring keeps
//! at most [`FEED_EVENTS`] events and at most [`FEED_BYTES`] of them
//! (estimated as they sit in memory), whatever the receivers do; a receiver
//! that falls further behind gets `Lagged` and reads what it missed back
//! from the store, as every subscriber already does.
//!
//! Receivers get [`tokio::sync::broadcast::error::RecvError`], so code
//! written for tokio's channel reads the same.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, PoisonError};

use serde_json::Value;
use tokio::sync::broadcast::error::{RecvError, TryRecvError};
use tokio::sync::watch;

use crate::StoredEvent;

/// Most events the feed keeps for receivers that fall behind.
pub const FEED_EVENTS: usize = 4096;
/// Most bytes (estimated in memory) the feed keeps for them.
pub const FEED_BYTES: usize = 8 * 1024 * 1024;

/// The sending side: cheap to clone. Once every clone is dropped, receivers
/// read what is left, then get `Closed`.
#[derive(Clone)]
pub struct EventFeed {
    ring: Arc<Mutex<Ring>>,
    tail: Arc<watch::Sender<u64>>,
}

impl std::fmt::Debug for EventFeed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let ring = lock(&self.ring);
        f.debug_struct("EventFeed")
            .field("events", &ring.events.len())
            .field("bytes", &ring.bytes)
            .finish_non_exhaustive()
    }
}

/// One subscriber: every event sent after it subscribed, in order, unless
/// it falls behind the ring (then `Lagged` with how many it missed).
pub struct EventReceiver {
    ring: Arc<Mutex<Ring>>,
    tail: watch::Receiver<u64>,
    /// The position of the next event to read.
    next: u64,
}

impl std::fmt::Debug for EventReceiver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventReceiver")
            .field("next", &self.next)
            .finish_non_exhaustive()
    }
}

#[derive(Debug)]
struct Ring {
    /// Each event with its estimated size.
    events: VecDeque<(Arc<StoredEvent>, usize)>,
    /// The position of `events[0]`: positions count every event ever sent.
    first: u64,
    bytes: usize,
    max_events: usize,
    max_bytes: usize,
}

fn lock(ring: &Mutex<Ring>) -> std::sync::MutexGuard<'_, Ring> {
    ring.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Default for EventFeed {
    fn default() -> Self {
        Self::with_budget(FEED_EVENTS, FEED_BYTES)
    }
}

impl EventFeed {
    /// A feed that keeps at most `max_events` events and `max_bytes` of
    /// them (the newest event is kept even when it alone is larger).
    pub fn with_budget(max_events: usize, max_bytes: usize) -> Self {
        Self {
            ring: Arc::new(Mutex::new(Ring {
                events: VecDeque::new(),
                first: 0,
                bytes: 0,
                max_events: max_events.max(1),
                max_bytes,
            })),
            tail: Arc::new(watch::channel(0).0),
        }
    }

    /// Announce `event` to every receiver; the oldest events kept go first
    /// when the ring is over its budget.
    pub fn send(&self, event: StoredEvent) {
        let size = event_size(&event);
        let end = {
            let mut ring = lock(&self.ring);
            ring.events.push_back((Arc::new(event), size));
            ring.bytes += size;
            while ring.events.len() > 1
                && (ring.events.len() > ring.max_events || ring.bytes > ring.max_bytes)
            {
                if let Some((_, old)) = ring.events.pop_front() {
                    ring.bytes -= old;
                    ring.first += 1;
                }
            }
            ring.first + ring.events.len() as u64
        };
        self.tail.send_replace(end);
    }

    /// A receiver of the events sent from now on.
    pub fn subscribe(&self) -> EventReceiver {
        let ring = lock(&self.ring);
        // Under the ring's lock: no event is sent between reading the end
        // and subscribing to its changes.
        let tail = self.tail.subscribe();
        let next = ring.first + ring.events.len() as u64;
        drop(ring);
        EventReceiver {
            ring: Arc::clone(&self.ring),
            tail,
            next,
        }
    }

    /// How many events the ring holds now, and their estimated bytes.
    pub fn retained(&self) -> (usize, usize) {
        let ring = lock(&self.ring);
        (ring.events.len(), ring.bytes)
    }
}

impl EventReceiver {
    /// The next event; `Lagged(n)` when `n` events were dropped from the
    /// ring before this receiver read them (it goes on from the oldest kept);
    /// `Closed` once every sender is gone and everything was read.
    ///
    /// # Errors
    /// As above.
    pub async fn recv(&mut self) -> Result<StoredEvent, RecvError> {
        loop {
            if let Some(next) = self.take()? {
                return Ok(next);
            }
            if self.tail.changed().await.is_err() {
                // Every sender is gone: what was sent before is still read.
                return self.take()?.ok_or(RecvError::Closed);
            }
        }
    }

    /// The next event if one was sent, without waiting.
    ///
    /// # Errors
    /// `Empty` when none is there yet, `Lagged` as [`EventReceiver::recv`],
    /// `Closed` once every sender is gone and everything was read.
    pub fn try_recv(&mut self) -> Result<StoredEvent, TryRecvError> {
        match self.take() {
            Ok(Some(event)) => Ok(event),
            Ok(None) if self.tail.has_changed().is_err() => Err(TryRecvError::Closed),
            Ok(None) => Err(TryRecvError::Empty),
            Err(RecvError::Lagged(n)) => Err(TryRecvError::Lagged(n)),
            Err(RecvError::Closed) => Err(TryRecvError::Closed),
        }
    }

    /// Pass over every event sent so far: for a receiver that only needs to
    /// know that something committed, without a copy of each event.
    pub fn skip_to_end(&mut self) {
        let ring = lock(&self.ring);
        self.next = ring.first + ring.events.len() as u64;
        drop(ring);
        self.tail.borrow_and_update();
    }

    fn take(&mut self) -> Result<Option<StoredEvent>, RecvError> {
        let event = {
            let ring = lock(&self.ring);
            if self.next < ring.first {
                let missed = ring.first - self.next;
                self.next = ring.first;
                return Err(RecvError::Lagged(missed));
            }
            let index = usize::try_from(self.next - ring.first).unwrap_or(usize::MAX);
            match ring.events.get(index) {
                Some((event, _)) => Arc::clone(event),
                None => return Ok(None),
            }
        };
        self.next += 1;
        Ok(Some(StoredEvent::clone(&event)))
    }
}

/// The page size for reading back events a receiver missed
/// ([`crate::EventStore::events_after`]), so that a page holds about
/// [`PAGE_BYTES`] whatever the events' size: the next page's count is
/// taken from the size of the events of the page before.
#[derive(Debug, Clone, Copy)]
pub struct PageSizer {
    limit: u32,
}

/// About how many bytes a page of events read back holds.
pub const PAGE_BYTES: usize = 1024 * 1024;
/// Most events of a page read back.
pub const PAGE_EVENTS: u32 = 500;

impl Default for PageSizer {
    /// A first page of a few events, whose size sets the next.
    fn default() -> Self {
        Self { limit: 4 }
    }
}

impl PageSizer {
    /// How many events to ask for next.
    pub fn limit(&self) -> u32 {
        self.limit
    }

    /// Size the next page from this one.
    pub fn observe(&mut self, page: &[StoredEvent]) {
        if page.is_empty() {
            return;
        }
        let bytes: usize = page.iter().map(event_size).sum();
        let each = (bytes / page.len()).max(1);
        self.limit = u32::try_from(PAGE_BYTES / each)
            .unwrap_or(PAGE_EVENTS)
            .clamp(1, PAGE_EVENTS);
    }
}

fn event_size(event: &StoredEvent) -> usize {
    std::mem::size_of::<StoredEvent>() + event.kind.len() + json_heap_size(&event.data)
}

/// About how many bytes `value` takes in memory: every node, every string
/// and key, in one pass without recursion (so any depth is fine).
pub fn json_heap_size(value: &Value) -> usize {
    // A map entry's own cost beyond its key and value, roughly.
    const ENTRY: usize = 32;
    let node = std::mem::size_of::<Value>();
    let mut total = 0usize;
    let mut stack = vec![value];
    while let Some(v) = stack.pop() {
        total = total.saturating_add(node);
        match v {
            Value::String(s) => total = total.saturating_add(s.len()),
            Value::Array(items) => stack.extend(items.iter()),
            Value::Object(map) => {
                for (key, item) in map {
                    total = total.saturating_add(key.len() + ENTRY);
                    stack.push(item);
                }
            }
            Value::Null | Value::Bool(_) | Value::Number(_) => {}
        }
    }
    total
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use serde_json::json;

    use super::*;

    fn event(seq: i64, bytes: usize) -> StoredEvent {
        StoredEvent {
            seq,
            kind: "interaction.created".into(),
            data: json!({"request": {"prompt": "p".repeat(bytes)}}),
        }
    }

    /// The case: 4,096 events of 256 KiB args kept about 1 GB for a
    /// receiver that did not read. The ring stays under its byte budget
    /// whatever the events' size, and a late reader is told it lagged.
    #[tokio::test]
    async fn big_events_stay_within_the_byte_budget() {
        let feed = EventFeed::default();
        let mut idle = feed.subscribe();
        for seq in 1..=4096 {
            feed.send(event(seq, 256 * 1024));
            let (_, bytes) = feed.retained();
            assert!(bytes <= FEED_BYTES, "{bytes} bytes kept after event {seq}");
        }
        let (len, bytes) = feed.retained();
        assert!(len < 40, "{len} events of 256 KiB kept");
        assert!(bytes > FEED_BYTES / 2, "{bytes}");
        match idle.recv().await {
            Err(RecvError::Lagged(n)) => assert_eq!(n, 4096 - len as u64),
            other => panic!("expected Lagged, found {other:?}"),
        }
        // It goes on from the oldest event kept, in order.
        let first = idle.recv().await.unwrap();
        assert_eq!(first.seq, 4096 - len as i64 + 1);
    }

    #[tokio::test]
    async fn small_events_are_bounded_by_count() {
        let feed = EventFeed::with_budget(8, FEED_BYTES);
        let mut rx = feed.subscribe();
        for seq in 1..=20 {
            feed.send(event(seq, 10));
        }
        assert_eq!(feed.retained().0, 8);
        assert!(matches!(rx.recv().await, Err(RecvError::Lagged(12))));
        for seq in 13..=20 {
            assert_eq!(rx.recv().await.unwrap().seq, seq);
        }
    }

    /// The newest event is kept even when it alone passes the budget, so a
    /// reader that keeps up still gets it live.
    #[tokio::test]
    async fn one_event_over_the_budget_is_still_delivered() {
        let feed = EventFeed::with_budget(16, 1024);
        let mut rx = feed.subscribe();
        feed.send(event(1, 4096));
        assert_eq!(rx.recv().await.unwrap().seq, 1);
        feed.send(event(2, 4096));
        assert_eq!(feed.retained().0, 1);
    }

    #[tokio::test]
    async fn receivers_wait_for_new_events_and_see_the_close() {
        let feed = EventFeed::default();
        let mut a = feed.subscribe();
        let mut b = feed.subscribe();
        assert!(matches!(b.try_recv(), Err(TryRecvError::Empty)));
        let waiting = tokio::spawn(async move { a.recv().await.map(|e| e.seq) });
        tokio::task::yield_now().await;
        feed.send(event(7, 1));
        assert_eq!(waiting.await.unwrap().unwrap(), 7);
        // Subscribed after: sees only later events.
        let mut late = feed.subscribe();
        feed.send(event(8, 1));
        drop(feed);
        assert_eq!(b.recv().await.unwrap().seq, 7);
        assert_eq!(b.recv().await.unwrap().seq, 8);
        assert!(matches!(b.recv().await, Err(RecvError::Closed)));
        assert_eq!(late.try_recv().unwrap().seq, 8);
        assert!(matches!(late.try_recv(), Err(TryRecvError::Closed)));
    }

    #[test]
    fn pages_of_big_events_are_small() {
        let mut pages = PageSizer::default();
        pages.observe(&[event(1, 10)]);
        assert_eq!(pages.limit(), PAGE_EVENTS);
        pages.observe(&[event(1, 256 * 1024), event(2, 256 * 1024)]);
        assert_eq!(pages.limit(), 3);
        pages.observe(&[event(1, 4 * 1024 * 1024)]);
        assert_eq!(pages.limit(), 1);
    }

    #[test]
    fn heap_size_counts_strings_keys_and_nodes_at_any_depth() {
        let small = json_heap_size(&json!({"a": 1}));
        let big = json_heap_size(&json!({"a": "x".repeat(100_000)}));
        assert!((100_000..100_000 + 1024).contains(&big), "{big}");
        assert!(small < 200, "{small}");
        let mut deep = Value::Null;
        for _ in 0..100_000 {
            deep = Value::Array(vec![deep]);
        }
        assert!(json_heap_size(&deep) >= 100_000 * std::mem::size_of::<Value>());
        // serde_json's Drop recurses: take it apart without recursion.
        let mut v = deep;
        while let Value::Array(mut items) = v {
            v = items.pop().unwrap_or(Value::Null);
        }
    }
}
