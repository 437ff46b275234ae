//! Where this process announces committed events: in seq order, each once,
//! without a gap. Both the sequencer (right after each pass's commit) and
//! the listener (for every process's passes) announce through the one
//! [`Announcer`]; it depends on neither, and they both on it.

use std::sync::{Mutex, PoisonError};

use lev_store::{EventFeed, StoredEvent};

/// Where committed events are announced, in seq order, each once.
#[derive(Debug)]
pub(crate) struct Announcer {
    /// The last seq announced (or known when the store opened).
    last: Mutex<i64>,
    events: EventFeed,
}

impl Announcer {
    pub(crate) fn new(last: i64, events: EventFeed) -> Self {
        Self {
            last: Mutex::new(last),
            events,
        }
    }

    /// The last seq announced.
    pub(crate) fn last(&self) -> i64 {
        *self.last.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Announce `rows` (`seq`, kind, data as stored), in seq order: those
    /// already announced are skipped, and a gap stops the run (the listener
    /// reads on from the last announced one). An event whose data does not
    /// parse is passed over (it stays readable, as an error, through
    /// `events_after`).
    pub(crate) fn announce(&self, mut rows: Vec<(i64, String, String)>) {
        rows.sort_by_key(|(seq, _, _)| *seq);
        let mut last = self.last.lock().unwrap_or_else(PoisonError::into_inner);
        for (seq, kind, data) in rows {
            if seq <= *last {
                continue;
            }
            if Some(seq) != last.checked_add(1) {
                break;
            }
            *last = seq;
            if let Ok(data) = serde_json::from_str(&data) {
                self.events.send(StoredEvent { seq, kind, data });
            }
        }
    }
}
