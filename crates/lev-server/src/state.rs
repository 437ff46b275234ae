//! What every handler shares: the store, the signing keys, the waiter hub,
//! the expiry task's handle, the counters and the shutdown flag.

use std::sync::Arc;
use std::time::Duration;

use lev_store::Store;
use tokio::sync::watch;
use tokio_util::task::{TaskTracker, task_tracker::TaskTrackerToken};

use crate::config::Settings;
use crate::expiry::Expiry;
use crate::hub::Hub;
use crate::keys::KeyRing;
use crate::metrics::Metrics;

/// The state shared by every handler. Cheap to clone.
#[derive(Clone)]
pub struct AppState(Arc<Inner>);

struct Inner {
    /// This process's id among the servers sharing a store (`/v1/health`).
    replica_id: String,
    store: Arc<dyn Store>,
    keys: KeyRing,
    hub: Arc<Hub>,
    operators: Arc<crate::operators::hub::OperatorHub>,
    expiry: Arc<Expiry>,
    metrics: Arc<Metrics>,
    tracer: Arc<crate::trace::Tracer>,
    settings: Settings,
    shutdown_tx: watch::Sender<bool>,
    shutdown: watch::Receiver<bool>,
    /// Wakes the webhook dispatcher (endpoints changed, an attempt ended).
    webhooks: Arc<tokio::sync::Notify>,
    /// The client for outbound calls (webhooks, Slack), made on first use.
    outbound: std::sync::OnceLock<reqwest::Client>,
    /// Every task that holds the state or the store (the waiter hub,
    /// expiry, the operators' follower, triage, event-stream pumps, operator
    /// connections, webhook deliveries, reminders): a server that stops
    /// waits for them all, so that when it returns nothing of it still runs
    /// and its store (with the SQLite data dir's lock) is closed.
    tasks: TaskTracker,
}

impl std::fmt::Debug for AppState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AppState")
            .field("store", &self.0.store.kind())
            .field("kid", &self.0.keys.active().kid())
            .finish_non_exhaustive()
    }
}

impl AppState {
    /// The state, with its waiter hub, expiry task and operators' follower
    /// started on the current tokio runtime (the tasks of the floors above
    /// are started by `boot`).
    pub fn start(store: Arc<dyn Store>, keys: KeyRing, settings: Settings) -> Self {
        let (shutdown_tx, shutdown) = watch::channel(false);
        let hub = Arc::new(Hub::default());
        let tasks = TaskTracker::new();
        let operators = Arc::new(crate::operators::hub::OperatorHub::new(
            settings.operators.clone(),
            Arc::clone(&store),
            tasks.clone(),
        ));
        tasks.spawn(Arc::clone(&operators).follow(store.operator_signals(), shutdown.clone()));
        let expiry = Arc::new(Expiry::default());
        tasks.spawn(Arc::clone(&hub).run(store.subscribe(), shutdown.clone()));
        tasks.spawn(Arc::clone(&expiry).follow(store.subscribe(), shutdown.clone()));
        // Another replica's rotation or removal, read again here.
        tasks.spawn(keys.clone().follow(shutdown.clone()));
        // Without randomness the id is still this process's own.
        let replica_id = crate::ids::new_id("rp_", time::OffsetDateTime::now_utc())
            .unwrap_or_else(|_| format!("rp_pid{}", std::process::id()));
        let metrics = Arc::new(Metrics::new(&replica_id, store.kind()));
        let tracer = match settings.otlp.clone() {
            None => crate::trace::Tracer::off(Arc::clone(&metrics)),
            Some(config) => {
                let spawner = tasks.clone();
                crate::trace::Tracer::start(config, Arc::clone(&metrics), shutdown.clone(), |f| {
                    drop(spawner.spawn(f));
                })
                .unwrap_or_else(|e| {
                    crate::log::error(&format!("otlp: {e}; traces are off"));
                    crate::trace::Tracer::off(Arc::clone(&metrics))
                })
            }
        };
        let tracer = Arc::new(tracer);
        tasks.spawn(Arc::clone(&expiry).run(
            Arc::clone(&store),
            Arc::clone(&metrics),
            Arc::clone(&tracer),
            shutdown.clone(),
        ));
        Self(Arc::new(Inner {
            replica_id,
            store,
            keys,
            hub,
            operators,
            expiry,
            metrics,
            tracer,
            settings,
            shutdown_tx,
            shutdown,
            webhooks: Arc::new(tokio::sync::Notify::new()),
            outbound: std::sync::OnceLock::new(),
            tasks,
        }))
    }

    /// Run `task` on the runtime as one of the server's own: a server that
    /// stops waits for it (see [`AppState::join_background`]). Every task
    /// that holds the state or the store is spawned here.
    pub fn spawn<F>(&self, task: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        drop(self.0.tasks.spawn(task));
    }

    /// A token that counts as one of the server's tasks while it lives, for
    /// work that something else spawned (an upgraded WebSocket connection).
    pub fn task_token(&self) -> TaskTrackerToken {
        self.0.tasks.token()
    }

    /// After shutdown began: wait (at most `limit`) until every task of the
    /// server has ended. Returns whether they all did.
    pub async fn join_background(&self, limit: Duration) -> bool {
        self.0.tasks.close();
        tokio::time::timeout(limit, self.0.tasks.wait())
            .await
            .is_ok()
    }

    /// This server's id among the replicas sharing its store, made at
    /// start.
    pub fn replica_id(&self) -> &str {
        &self.0.replica_id
    }

    /// The store.
    pub fn store(&self) -> &dyn Store {
        self.0.store.as_ref()
    }

    /// The store, shared (for parts that keep a handle of their own).
    pub fn store_arc(&self) -> &Arc<dyn Store> {
        &self.0.store
    }

    /// The signing keys.
    pub fn keys(&self) -> &KeyRing {
        &self.0.keys
    }

    /// The waiter hub.
    pub fn hub(&self) -> &Arc<Hub> {
        &self.0.hub
    }

    /// The operators' hub.
    pub fn operators(&self) -> &Arc<crate::operators::hub::OperatorHub> {
        &self.0.operators
    }

    /// The expiry task's handle.
    pub fn expiry(&self) -> &Expiry {
        &self.0.expiry
    }

    /// The metrics.
    pub fn metrics(&self) -> &Metrics {
        &self.0.metrics
    }

    /// The tracer (OTLP spans of interactions).
    pub fn tracer(&self) -> &crate::trace::Tracer {
        &self.0.tracer
    }

    /// `interaction` just left `pending` through this process: counted and
    /// traced.
    pub fn decided(&self, interaction: &lev_protocol::Interaction, approved: Option<bool>) {
        self.0.metrics.decided(interaction, approved);
        self.0.tracer.decided(interaction, approved);
    }

    /// Run the store call `call`, timed as `operation` in the store's
    /// latency histogram (and counted in its errors when it fails).
    pub async fn timed<T>(
        &self,
        operation: &'static str,
        call: impl Future<Output = lev_store::Result<T>>,
    ) -> lev_store::Result<T> {
        let started = std::time::Instant::now();
        let result = call.await;
        self.0
            .metrics
            .store_call(operation, started.elapsed(), result.is_ok());
        result
    }

    /// The settings.
    pub fn settings(&self) -> &Settings {
        &self.0.settings
    }

    /// The webhook dispatcher's wake-up.
    pub fn webhooks_notify(&self) -> &Arc<tokio::sync::Notify> {
        &self.0.webhooks
    }

    /// The HTTP client for outbound calls (webhooks, Slack).
    ///
    /// # Errors
    /// When TLS cannot be set up (the system's roots do not load).
    pub fn outbound(&self) -> Result<&reqwest::Client, String> {
        if let Some(c) = self.0.outbound.get() {
            return Ok(c);
        }
        let client =
            crate::outbound::client::http_client(self.settings().webhooks.outbound_policy())?;
        Ok(self.0.outbound.get_or_init(|| client))
    }

    /// Tell the webhook dispatcher that endpoints changed.
    pub fn webhooks_changed(&self) {
        self.0.webhooks.notify_one();
    }

    /// Begin shutting down: new requests get 503, waiters and event streams
    /// are released.
    pub fn begin_shutdown(&self) {
        self.0.shutdown_tx.send_replace(true);
    }

    /// Whether shutdown has begun.
    pub fn is_shutting_down(&self) -> bool {
        *self.0.shutdown.borrow()
    }

    /// A receiver that turns `true` when shutdown begins.
    pub fn shutdown_signal(&self) -> watch::Receiver<bool> {
        self.0.shutdown.clone()
    }
}
