//! Where this process announces committed events: in seq order, each once,
//! without a gap. Writers (right after their commit, with the rows they
//! wrote) and the listener (from each notification's payload, for every
//! process's commits) announce through the one [`Announcer`]; it depends on
//! neither.
//!
//! Seqs are given under a lock held until the commit, so they commit in
//! order and without gaps; but two announcers of adjacent commits may
//! arrive in either order. A row past a gap is held (up to [`HELD`] of
//! them) until the rows before it arrive; the listener reads from the
//! database whatever it cannot fill from payloads.

use std::collections::BTreeMap;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use lev_store::{EventFeed, StoredEvent};
use tokio::sync::watch;

/// Most rows held past a gap (more are read back by the listener).
const HELD: usize = 10_000;

/// Where committed events are announced, in seq order, each once.
#[derive(Debug)]
pub(crate) struct Announcer {
    state: Mutex<State>,
    /// The last seq announced, for writers waiting for theirs.
    last: watch::Sender<i64>,
    events: EventFeed,
}

#[derive(Debug)]
struct State {
    /// The last seq announced (or known when the store opened).
    last: i64,
    /// Rows past a gap: seq -> (kind, data as stored).
    held: BTreeMap<i64, (String, String)>,
}

impl Announcer {
    pub(crate) fn new(last: i64, events: EventFeed) -> Self {
        Self {
            state: Mutex::new(State {
                last,
                held: BTreeMap::new(),
            }),
            last: watch::Sender::new(last),
            events,
        }
    }

    /// The last seq announced.
    pub(crate) fn last(&self) -> i64 {
        self.state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .last
    }

    /// Announce `rows` (`seq`, kind, data as stored): those already
    /// announced are skipped, those past a gap held until it fills. An event
    /// whose data does not parse is passed over (it stays readable, as an
    /// error, through `events_after`).
    pub(crate) fn announce(&self, rows: Vec<(i64, String, String)>) {
        let mut s = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let before = s.last;
        for (seq, kind, data) in rows {
            if seq > s.last && (s.held.len() < HELD || seq == s.last + 1) {
                s.held.insert(seq, (kind, data));
            }
        }
        loop {
            let next = s.last + 1;
            let Some((kind, data)) = s.held.remove(&next) else {
                break;
            };
            s.last = next;
            if let Ok(data) = serde_json::from_str(&data) {
                self.events.send(StoredEvent {
                    seq: next,
                    kind,
                    data,
                });
            }
        }
        // What a gap held that is now behind (read back meanwhile).
        let last = s.last;
        s.held.retain(|seq, _| *seq > last);
        if last != before {
            self.last.send_replace(last);
        }
    }

    /// Wait until `seq` is announced here (at most `patience`): a writer
    /// returns once its events were announced, unless the rows before them
    /// are slow to arrive.
    pub(crate) async fn reached(&self, seq: i64, patience: Duration) -> bool {
        let mut rx = self.last.subscribe();
        tokio::time::timeout(patience, rx.wait_for(|last| *last >= seq))
            .await
            .is_ok_and(|r| r.is_ok())
    }
}
