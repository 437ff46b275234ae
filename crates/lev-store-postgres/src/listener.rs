//! Announcing committed events on every process: a dedicated connection
//! LISTENs on `lev_events`, where each write transaction notifies, at its
//! commit and in seq order, every event it wrote with its kind and data
//! (the seq alone when that would not fit a notification). The listener
//! announces them from the payload, without reading them back; it reads
//! from the database only what a payload does not carry, after every
//! reconnect, and every second as a safety net. So a commit on any process
//! wakes the subscribers of every process, after the commit, without a gap.
//!
//! The same connection LISTENs on `lev_tokens` and `lev_keys` for the
//! process's caches (module `cache`): each notification forgets a token or
//! re-reads the keys; a connection lost stops the token cache, one made
//! again starts it empty.
//!
//! This process's writers announce what they wrote right after their
//! commit, through the same [`Announcer`] (module `announcer`, below both),
//! before they return: a local waiter is woken without a round trip, and a
//! subscriber that subscribes after a local write returned is never told
//! of it. The announcer keeps one order for both: each event once, by seq,
//! without a gap.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{broadcast, mpsc, watch};
use tokio_postgres::{AsyncMessage, Client};

use crate::announcer::Announcer;
use crate::cache::Changes;
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
    /// The process's caches, told of changes.
    pub(crate) changes: Arc<Changes>,
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
            let (notify, mut notified) = mpsc::unbounded_channel::<String>();
            let operators = self.operators.clone();
            let changes = Arc::clone(&self.changes);
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
                        Ok(AsyncMessage::Notification(n))
                            if changes.notified(n.channel(), n.payload()) => {}
                        Ok(AsyncMessage::Notification(n)) => {
                            if notify.send(n.payload().to_owned()).is_err() {
                                break;
                            }
                        }
                        Ok(_) => {}
                        Err(_) => break,
                    }
                }
                changes.disconnected();
            });
            let ended = self.listen(&client, &mut notified).await;
            driver.abort();
            self.changes.disconnected();
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
        notified: &mut mpsc::UnboundedReceiver<String>,
    ) -> bool {
        if client
            .batch_execute(
                "LISTEN lev_events; LISTEN lev_operators; LISTEN lev_tokens; LISTEN lev_keys",
            )
            .await
            .is_err()
        {
            return false;
        }
        // Heard from now on; what changed before is unknown.
        self.changes.connected();
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
            let read_back = tokio::select! {
                _ = self.shutdown.changed() => return true,
                n = notified.recv() => {
                    let Some(first) = n else {
                        return false;
                    };
                    let mut rows = Vec::new();
                    let mut short = decode(&first, &mut rows);
                    while let Ok(more) = notified.try_recv() {
                        short |= decode(&more, &mut rows);
                    }
                    self.announcer.announce(rows);
                    short
                }
                _ = tick.tick() => true,
            };
            if read_back && self.fetch(client).await.is_err() {
                return false;
            }
            self.changes.heard();
        }
    }

    /// Announce every event after the last announced one.
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

/// Decode a notification's payload (`SEQ KIND DATA`, or `SEQ` alone) into
/// `rows`; `true` when the event must be read back (the seq alone, or a
/// payload that does not parse).
fn decode(payload: &str, rows: &mut Vec<(i64, String, String)>) -> bool {
    let mut parts = payload.splitn(3, ' ');
    let seq = parts.next().and_then(|s| s.parse::<i64>().ok());
    match (seq, parts.next(), parts.next()) {
        (Some(seq), Some(kind), Some(data)) => {
            rows.push((seq, kind.to_owned(), data.to_owned()));
            false
        }
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::decode;

    #[test]
    fn a_payload_carries_the_event_or_asks_for_a_read() {
        let mut rows = Vec::new();
        assert!(!decode("7 interaction.created {\"a\": \"b c\"}", &mut rows));
        assert_eq!(
            rows,
            vec![(7, "interaction.created".into(), "{\"a\": \"b c\"}".into())]
        );
        assert!(decode("8", &mut rows));
        assert!(decode("", &mut rows));
        assert!(decode("x y z", &mut rows));
        assert_eq!(rows.len(), 1);
    }
}
