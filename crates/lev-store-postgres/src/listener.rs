//! Announcing committed events on every process: a dedicated connection
//! LISTENs on `lev_events` (the sequencer notifies it as each pass
//! commits); on each notification, every second as a safety net, and after
//! every reconnect, it reads the events after the last one it announced and
//! broadcasts them in seq order. So a commit on any process wakes the
//! subscribers of every process, after the commit, without a gap.
//!
//! The same tick sequences rows a crashed writer left behind (committed,
//! but its process died before its sequencer pass).
//!
//! This process's own sequencer passes announce what they sequenced right
//! after their commit, through the same [`Announcer`] (module `announcer`,
//! below both), before the writers
//! they serve return: a local waiter is woken without a round trip, and a
//! subscriber that subscribes after a local write returned is never told
//! of it. The announcer keeps one order for both: each event once, by seq,
//! without a gap.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{broadcast, mpsc, watch};
use tokio_postgres::{AsyncMessage, Client};

use crate::announcer::Announcer;
use crate::sequencer::Sequencer;
use crate::sql::describe;

/// The channel of the operators' relay.
const OPERATORS: &str = "lev_operators";

/// How often the listener looks without being notified.
const TICK: Duration = Duration::from_secs(1);
/// Most events read at once.
const PAGE: i64 = 1000;

pub(crate) struct Listener {
    /// Told once the first LISTEN is in place (the store waits for it, so
    /// nothing committed after it opens goes unheard).
    pub(crate) listening: Option<tokio::sync::oneshot::Sender<()>>,
    /// Where the operators' relay's signals go (channel `lev_operators`).
    pub(crate) operators: broadcast::Sender<lev_store::OperatorSignal>,
    pub(crate) config: tokio_postgres::Config,
    /// The URL's TLS, as for the pool.
    pub(crate) tls: crate::tls::MakeRustls,
    pub(crate) announcer: Arc<Announcer>,
    pub(crate) sequencer: Arc<Sequencer>,
    /// Ends the listener when the store's last handle is dropped.
    pub(crate) shutdown: watch::Receiver<()>,
}

impl Listener {
    pub(crate) async fn run(mut self) {
        let mut backoff = Duration::from_millis(50);
        let mut warned = false;
        loop {
            let connected = tokio::select! {
                _ = self.shutdown.changed() => return,
                c = self.config.connect(self.tls.clone()) => c,
            };
            let (client, mut connection) = match connected {
                Ok(c) => {
                    backoff = Duration::from_millis(50);
                    warned = false;
                    c
                }
                Err(e) => {
                    if !warned {
                        eprintln!(
                            "lev: warning: the event listener cannot reach PostgreSQL ({}); retrying",
                            describe(&e)
                        );
                        warned = true;
                    }
                    tokio::select! {
                        _ = self.shutdown.changed() => return,
                        () = tokio::time::sleep(backoff) => {}
                    }
                    backoff = (backoff * 2).min(Duration::from_secs(2));
                    continue;
                }
            };
            // Drive the connection; forward its notifications.
            let (notify, mut notified) = mpsc::unbounded_channel::<()>();
            let operators = self.operators.clone();
            let driver = tokio::spawn(async move {
                while let Some(message) =
                    futures_util::future::poll_fn(|cx| connection.poll_message(cx)).await
                {
                    match message {
                        Ok(AsyncMessage::Notification(n)) if n.channel() == OPERATORS => {
                            if let Some(signal) = crate::operators::decode(n.payload()) {
                                let _ = operators.send(signal);
                            }
                        }
                        Ok(AsyncMessage::Notification(_)) => {
                            if notify.send(()).is_err() {
                                break;
                            }
                        }
                        Ok(_) => {}
                        Err(_) => break,
                    }
                }
            });
            let ended = self.listen(&client, &mut notified).await;
            driver.abort();
            if ended {
                return;
            }
            tokio::select! {
                _ = self.shutdown.changed() => return,
                () = tokio::time::sleep(backoff) => {}
            }
        }
    }

    /// Follow one connection until it fails (`false`) or the store is
    /// dropped (`true`).
    async fn listen(
        &mut self,
        client: &Client,
        notified: &mut mpsc::UnboundedReceiver<()>,
    ) -> bool {
        if client
            .batch_execute("LISTEN lev_events; LISTEN lev_operators")
            .await
            .is_err()
        {
            return false;
        }
        if let Some(listening) = self.listening.take() {
            let _ = listening.send(());
        }
        // Whatever committed while this connection was not listening.
        if self.fetch(client).await.is_err() {
            return false;
        }
        let mut tick = tokio::time::interval(TICK);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = self.shutdown.changed() => return true,
                n = notified.recv() => {
                    if n.is_none() {
                        return false;
                    }
                    while notified.try_recv().is_ok() {}
                }
                _ = tick.tick() => {
                    if self.behind(client).await.unwrap_or(false) {
                        let sequencer = Arc::clone(&self.sequencer);
                        tokio::spawn(async move { sequencer.run().await });
                    }
                }
            }
            if self.fetch(client).await.is_err() {
                return false;
            }
        }
    }

    /// Whether committed rows wait for a sequencer pass.
    async fn behind(&self, client: &Client) -> Result<bool, tokio_postgres::Error> {
        let row = client
            .query_one(
                "SELECT EXISTS (SELECT 1 FROM events WHERE seq IS NULL)
                     OR EXISTS (SELECT 1 FROM audit WHERE seq IS NULL)",
                &[],
            )
            .await?;
        row.try_get(0)
    }

    /// Announce every sequenced event after the last announced one.
    async fn fetch(&self, client: &Client) -> Result<(), tokio_postgres::Error> {
        loop {
            let last = self.announcer.last();
            let rows = client
                .query(
                    "SELECT seq, kind, data_json FROM events WHERE seq > $1 ORDER BY seq LIMIT $2",
                    &[&last, &PAGE],
                )
                .await?;
            let n = rows.len();
            let rows = rows
                .iter()
                .map(|row| Ok((row.try_get(0)?, row.try_get(1)?, row.try_get(2)?)))
                .collect::<Result<Vec<_>, tokio_postgres::Error>>()?;
            self.announcer.announce(rows);
            if i64::try_from(n).unwrap_or(i64::MAX) < PAGE {
                return Ok(());
            }
        }
    }
}
