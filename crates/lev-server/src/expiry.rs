//! Expiry on the server: a task sleeps until the earliest pending deadline,
//! then applies each due interaction's `on_timeout`. The store's events for
//! those changes wake their waiters like any other change.
//!
//! Every replica learns of every deadline: the interactions created here
//! schedule theirs, and [`Expiry::follow`] schedules those another replica
//! created, from their `interaction.created` events; so a replica that dies
//! leaves its interactions to expire on time on the others (the expiry
//! itself is a compare-and-set: one replica applies it).

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use lev_store::Store;
use time::OffsetDateTime;
use tokio::sync::{Notify, watch};

/// Longest the task sleeps without looking again (a safety net only).
const MAX_SLEEP: Duration = Duration::from_secs(60);

/// Tells the expiry task about new deadlines.
#[derive(Debug)]
pub struct Expiry {
    notify: Notify,
    /// The deadline the task sleeps towards, in Unix ms (`i64::MAX`: none).
    next_ms: AtomicI64,
}

impl Default for Expiry {
    fn default() -> Self {
        Self {
            notify: Notify::new(),
            next_ms: AtomicI64::new(i64::MAX),
        }
    }
}

fn millis(t: OffsetDateTime) -> i64 {
    i64::try_from(t.unix_timestamp_nanos() / 1_000_000).unwrap_or(i64::MAX)
}

impl Expiry {
    /// A new interaction expires at `at`: wake the task if that is earlier
    /// than what it sleeps towards.
    pub fn schedule(&self, at: OffsetDateTime) {
        let ms = millis(at);
        if self.next_ms.fetch_min(ms, Ordering::AcqRel) > ms {
            self.notify.notify_one();
        }
    }

    /// Schedule the deadline of every interaction created on any replica,
    /// as its creation commits, until shutdown. A feed that lagged is
    /// caught up by the task's next look at the store (within a minute).
    pub async fn follow(
        self: Arc<Self>,
        mut events: lev_store::EventReceiver,
        mut shutdown: watch::Receiver<bool>,
    ) {
        loop {
            let event = tokio::select! {
                event = events.recv() => event,
                () = crate::shutdown::stopped(&mut shutdown) => return,
            };
            match event {
                Ok(event) if event.kind == "interaction.created" => {
                    if let Some(at) = event.data["request"]["expires_at"].as_str().and_then(|t| {
                        OffsetDateTime::parse(t, &time::format_description::well_known::Rfc3339)
                            .ok()
                    }) {
                        self.schedule(at);
                    }
                }
                Ok(_) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
            }
        }
    }

    /// Run until shutdown.
    pub async fn run(
        self: Arc<Self>,
        store: Arc<dyn Store>,
        metrics: Arc<crate::metrics::Metrics>,
        tracer: Arc<crate::trace::Tracer>,
        mut shutdown: watch::Receiver<bool>,
    ) {
        loop {
            let next = match store.next_expiry().await {
                Ok(next) => next,
                Err(e) => {
                    crate::log::error(&format!("expiry: cannot read the next deadline: {e}"));
                    if sleep_or_shutdown(Duration::from_secs(1), &mut shutdown).await {
                        return;
                    }
                    continue;
                }
            };
            self.next_ms
                .store(next.map_or(i64::MAX, millis), Ordering::Release);
            let now = OffsetDateTime::now_utc();
            let wait = match next {
                Some(at) if at <= now => Duration::ZERO,
                Some(at) => {
                    Duration::try_from(at - now)
                        .unwrap_or(MAX_SLEEP)
                        .min(MAX_SLEEP)
                        + Duration::from_millis(1)
                }
                None => MAX_SLEEP,
            };
            if !wait.is_zero() {
                tokio::select! {
                    () = tokio::time::sleep(wait) => {}
                    () = self.notify.notified() => continue,
                    () = crate::shutdown::stopped(&mut shutdown) => return,
                }
            }
            match store.expire_due(OffsetDateTime::now_utc()).await {
                Ok(expired) => {
                    for view in &expired {
                        let approved = view.response.as_ref().and_then(|r| r.approved);
                        metrics.decided(&view.request, approved);
                        tracer.decided(&view.request, approved);
                    }
                }
                Err(e) => {
                    crate::log::error(&format!("expiry: cannot expire due interactions: {e}"));
                    if sleep_or_shutdown(Duration::from_secs(1), &mut shutdown).await {
                        return;
                    }
                }
            }
        }
    }
}

/// Sleep; true when shutdown began meanwhile.
async fn sleep_or_shutdown(d: Duration, shutdown: &mut watch::Receiver<bool>) -> bool {
    tokio::select! {
        () = tokio::time::sleep(d) => false,
        () = crate::shutdown::stopped(shutdown) => true,
    }
}
