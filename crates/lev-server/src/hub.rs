//! Waking waiters: one task follows the store's committed events and bumps a
//! per-interaction generation counter that `wait` handlers watch.
//!
//! A waiter registers before it reads the interaction's state, so an answer
//! committed between its read and its sleep still wakes it; when woken it just
//! reads the state again. When the event stream lags, every waiter is woken
//! and re-reads: nobody is missed, some read twice.

use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use lev_store::StoredEvent;
use tokio::sync::{broadcast, watch};

/// The waiters, by interaction id.
#[derive(Debug, Default)]
pub struct Hub {
    slots: Mutex<HashMap<String, Slot>>,
    waiting: AtomicI64,
}

#[derive(Debug)]
struct Slot {
    tx: watch::Sender<u64>,
    count: usize,
}

/// A registered waiter. Dropping it unregisters.
#[derive(Debug)]
pub struct WaitGuard {
    hub: Arc<Hub>,
    id: String,
    /// Changes whenever the interaction may have changed.
    pub rx: watch::Receiver<u64>,
}

impl Drop for WaitGuard {
    fn drop(&mut self) {
        self.hub.waiting.fetch_sub(1, Ordering::Relaxed);
        let mut slots = self
            .hub
            .slots
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(slot) = slots.get_mut(&self.id) {
            slot.count -= 1;
            if slot.count == 0 {
                slots.remove(&self.id);
            }
        }
    }
}

impl Hub {
    /// Register a waiter on interaction `id`.
    pub fn register(self: &Arc<Self>, id: &str) -> WaitGuard {
        self.waiting.fetch_add(1, Ordering::Relaxed);
        let mut slots = self.slots.lock().unwrap_or_else(PoisonError::into_inner);
        let slot = slots.entry(id.to_owned()).or_insert_with(|| Slot {
            tx: watch::channel(0).0,
            count: 0,
        });
        slot.count += 1;
        WaitGuard {
            hub: Arc::clone(self),
            id: id.to_owned(),
            rx: slot.tx.subscribe(),
        }
    }

    /// Wake the waiters of interaction `id`.
    pub fn wake(&self, id: &str) {
        let slots = self.slots.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(slot) = slots.get(id) {
            slot.tx.send_modify(|g| *g += 1);
        }
    }

    /// Wake every waiter (after the event stream lagged).
    pub fn wake_all(&self) {
        let slots = self.slots.lock().unwrap_or_else(PoisonError::into_inner);
        for slot in slots.values() {
            slot.tx.send_modify(|g| *g += 1);
        }
    }

    /// How many requests are waiting now.
    pub fn waiting(&self) -> i64 {
        self.waiting.load(Ordering::Relaxed)
    }

    /// Follow committed events until the store closes or shutdown begins.
    pub async fn run(
        self: Arc<Self>,
        mut events: broadcast::Receiver<StoredEvent>,
        mut shutdown: watch::Receiver<bool>,
    ) {
        loop {
            tokio::select! {
                received = events.recv() => match received {
                    Ok(event) => {
                        if let Some(id) = interaction_id(&event) {
                            self.wake(id);
                        }
                    }
                    Err(broadcast::error::RecvError::Lagged(_)) => self.wake_all(),
                    Err(broadcast::error::RecvError::Closed) => return,
                },
                () = crate::state::stopped(&mut shutdown) => return,
            }
        }
    }
}

/// The interaction an event concerns.
fn interaction_id(event: &StoredEvent) -> Option<&str> {
    if !event.kind.starts_with("interaction.") {
        return None;
    }
    event.data.get("request")?.get("id")?.as_str()
}
