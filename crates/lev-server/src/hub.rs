//! Waking waiters: one task follows the store's committed events and bumps a
//! per-interaction (and per-task) generation counter that waiters watch.
//!
//! A waiter registers before it reads the interaction's state, so an answer
//! committed between its read and its sleep still wakes it. It is woken with
//! the event that woke it (the latest of its subject's), which carries the
//! interaction as committed: a waiter for a final state takes it from there
//! without reading it back. When the event stream lags, every waiter is
//! woken without an event and reads again: nobody is missed, some read
//! twice.

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
    tx: watch::Sender<Woken>,
    count: usize,
}

/// What woke a waiter: the latest committed event of its subject, or
/// nothing (the stream lagged: read again).
pub type Woken = Option<Arc<StoredEvent>>;

/// A registered waiter. Dropping it unregisters.
#[derive(Debug)]
pub struct WaitGuard {
    hub: Arc<Hub>,
    id: String,
    /// Changes whenever the interaction may have changed.
    pub rx: watch::Receiver<Woken>,
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
            tx: watch::channel(None).0,
            count: 0,
        });
        slot.count += 1;
        WaitGuard {
            hub: Arc::clone(self),
            id: id.to_owned(),
            rx: slot.tx.subscribe(),
        }
    }

    /// Wake the waiters of interaction (or task) `id` with `event`.
    pub fn wake(&self, id: &str, event: Woken) {
        let slots = self.slots.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(slot) = slots.get(id) {
            slot.tx.send_replace(event);
        }
    }

    /// Wake every waiter (after the event stream lagged), without an event.
    pub fn wake_all(&self) {
        let slots = self.slots.lock().unwrap_or_else(PoisonError::into_inner);
        for slot in slots.values() {
            slot.tx.send_replace(None);
        }
    }

    /// How many requests are waiting now.
    pub fn waiting(&self) -> i64 {
        self.waiting.load(Ordering::Relaxed)
    }

    /// Follow committed events until the store closes or shutdown begins.
    pub async fn run(
        self: Arc<Self>,
        mut events: lev_store::EventReceiver,
        mut shutdown: watch::Receiver<bool>,
    ) {
        loop {
            tokio::select! {
                received = events.recv() => match received {
                    Ok(event) => {
                        if let Some(id) = subject_id(&event).map(str::to_owned) {
                            self.wake(&id, Some(Arc::new(event)));
                        }
                    }
                    Err(broadcast::error::RecvError::Lagged(_)) => self.wake_all(),
                    Err(broadcast::error::RecvError::Closed) => return,
                },
                () = crate::shutdown::stopped(&mut shutdown) => return,
            }
        }
    }
}

/// The interaction or task an event concerns: waiters on either are woken
/// from committed events alone, never by hand.
fn subject_id(event: &StoredEvent) -> Option<&str> {
    if event.kind.starts_with("interaction.") {
        return event.data.get("request")?.get("id")?.as_str();
    }
    if event.kind == "task.updated" {
        return event.data.get("id")?.as_str();
    }
    None
}

/// The one wait loop: register on `key` (an interaction's or a task's id),
/// then run `probe` on every committed change of it (with the event that
/// woke it; `None` the first time and after a lag) until `probe` finds what
/// it waits for, or `deadline` passes (`None`). Registering before the
/// first probe means no change is missed between a read and the sleep.
///
/// # Errors
/// `probe`'s, and 503 `shutting_down` once `shutdown` says so.
pub async fn wait_for<T, F, Fut>(
    hub: &Arc<Hub>,
    mut shutdown: watch::Receiver<bool>,
    key: &str,
    deadline: tokio::time::Instant,
    mut probe: F,
) -> crate::error::ApiResult<Option<T>>
where
    F: FnMut(Woken) -> Fut,
    Fut: std::future::Future<Output = crate::error::ApiResult<Option<T>>>,
{
    let mut guard = hub.register(key);
    let mut woken = None;
    loop {
        if let Some(found) = probe(woken.take()).await? {
            return Ok(Some(found));
        }
        tokio::select! {
            changed = guard.rx.changed() => {
                if changed.is_err() {
                    return Err(crate::error::ApiError::ShuttingDown);
                }
                woken = guard.rx.borrow_and_update().clone();
            }
            () = tokio::time::sleep_until(deadline) => return Ok(None),
            () = crate::shutdown::stopped(&mut shutdown) => {
                return Err(crate::error::ApiError::ShuttingDown);
            }
        }
    }
}
