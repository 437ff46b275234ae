//! The sequencer: gives committed events their `seq` and chains committed
//! audit entries, after the transactions that wrote them commit.
//!
//! Writers insert event and audit rows unsequenced (`seq` NULL) in their own
//! transaction, so concurrent writers commit in parallel (one fsync each,
//! group-committed by PostgreSQL) instead of queueing behind one lock held
//! across every commit. After a writer commits, a *pass* runs: in one
//! transaction, under an advisory lock that every process takes (blocking,
//! so no pass ever skips rows because another held the lock), it numbers
//! every unsequenced event after the current greatest seq in id order,
//! chains every unchained audit row to the head in id order, notifies
//! `lev_events` and commits. Readers see only sequenced rows, so `seq` order
//! is the order rows became visible to readers: once seq N is seen, no lower
//! seq appears later, and the chain always verifies.
//!
//! Passes are coalesced per process: at most one runs at a time, and
//! whoever committed while one ran asks for one more. A writer returns once
//! a pass that started after its commit finished. A pass that fails leaves
//! the rows for the next pass, on any process.

use std::sync::{Arc, Mutex, PoisonError};

use deadpool_postgres::{Pool, Transaction};
use lev_approval::audit::{GENESIS_HASH, entry_hash};
use lev_store::{Result, StoreError};
use tokio::sync::watch;

use crate::announcer::Announcer;
use crate::sql::{col, corrupt, pg, pool};

/// The advisory lock key of the sequencer (`lev:sequencer`), the same on
/// every process.
pub(crate) const SEQUENCER_LOCK: i64 = 0x6c65_7673_6571_0001;

#[derive(Debug, Default)]
struct State {
    /// A pass is running (its task will look at `wanted` when done).
    running: bool,
    /// A writer committed since the running pass started.
    wanted: bool,
    /// The number the next pass to start will have.
    next: u64,
}

/// The latest pass that finished, and the latest that succeeded.
#[derive(Debug, Default, Clone, Copy)]
struct Done {
    finished: u64,
    succeeded: u64,
}

/// One per store handle (per process, in a server).
#[derive(Debug)]
pub(crate) struct Sequencer {
    pool: Pool,
    announcer: Arc<Announcer>,
    state: Mutex<State>,
    done: watch::Sender<Done>,
}

impl Sequencer {
    pub(crate) fn new(pool: Pool, announcer: Arc<Announcer>) -> Arc<Self> {
        Arc::new(Self {
            pool,
            announcer,
            state: Mutex::new(State {
                next: 1,
                ..State::default()
            }),
            done: watch::Sender::new(Done::default()),
        })
    }

    /// Sequence everything committed so far: returns once a pass that
    /// started after this call finished; `Ok(false)` when it failed (the
    /// rows stay for a later pass).
    pub(crate) async fn run(self: &Arc<Self>) -> Result<bool> {
        let target = {
            let mut s = self.state.lock().unwrap_or_else(PoisonError::into_inner);
            s.wanted = true;
            if !s.running {
                s.running = true;
                let me = Arc::clone(self);
                tokio::spawn(async move { me.passes().await });
            }
            s.next
        };
        let mut rx = self.done.subscribe();
        let done = rx
            .wait_for(|d| d.finished >= target)
            .await
            .map(|d| *d)
            .map_err(|_| StoreError::Closed)?;
        Ok(done.succeeded >= target)
    }

    /// Run passes while someone wants one.
    async fn passes(self: Arc<Self>) {
        loop {
            let number = {
                let mut s = self.state.lock().unwrap_or_else(PoisonError::into_inner);
                if !s.wanted {
                    s.running = false;
                    return;
                }
                s.wanted = false;
                s.next += 1;
                s.next - 1
            };
            let ok = match pass(&self.pool, &self.announcer).await {
                Ok(_) => true,
                Err(e) => {
                    // The rows are committed: the next pass (here or on any
                    // other process) sequences them. The message is the
                    // database's, never a row's content.
                    eprintln!("lev: warning: sequencing committed events failed (will retry): {e}");
                    false
                }
            };
            self.done.send_modify(|d| {
                d.finished = number;
                if ok {
                    d.succeeded = number;
                }
            });
        }
    }
}

/// Most events a pass reads to announce them itself (more are left to the
/// listener).
const CATCH_UP: i64 = 10_000;

/// One pass; returns the greatest seq it gave (0 when none). After its
/// commit it announces what it sequenced (and what other processes did
/// before it, not yet announced here), in seq order.
pub(crate) async fn pass(pool_: &Pool, announcer: &Announcer) -> Result<i64> {
    let announced = announcer.last();
    let mut client = pool_.get().await.map_err(pool)?;
    let tx = client.transaction().await.map_err(pg)?;
    let stmt = tx
        .prepare_cached("SELECT pg_advisory_xact_lock($1)")
        .await
        .map_err(pg)?;
    tx.execute(&stmt, &[&SEQUENCER_LOCK]).await.map_err(pg)?;
    // Under the lock, each statement's snapshot sees every pass before
    // this one and every writer that committed before it.
    let top = number_events(&tx).await?;
    let sequenced = unannounced(&tx, announced).await?;
    chain_audit(&tx).await?;
    if top > 0 {
        // Delivered at commit, and only if it commits.
        let stmt = tx
            .prepare_cached("SELECT pg_notify('lev_events', $1)")
            .await
            .map_err(pg)?;
        tx.execute(&stmt, &[&top.to_string()]).await.map_err(pg)?;
    }
    tx.commit().await.map_err(pg)?;
    announcer.announce(sequenced);
    Ok(top)
}

/// Number every unsequenced event after the greatest seq, in id order;
/// returns the greatest seq given (0 when none).
async fn number_events(tx: &Transaction<'_>) -> Result<i64> {
    let stmt = tx
        .prepare_cached(
            "WITH base AS (SELECT COALESCE(MAX(seq), 0) AS top FROM events),
                  todo AS (SELECT id, row_number() OVER (ORDER BY id) AS n
                           FROM events WHERE seq IS NULL)
             UPDATE events SET seq = base.top + todo.n
             FROM base, todo WHERE events.id = todo.id
             RETURNING events.seq",
        )
        .await
        .map_err(pg)?;
    let mut top = 0_i64;
    for row in tx.query(&stmt, &[]).await.map_err(pg)? {
        top = top.max(col::<i64>(&row, 0)?);
    }
    Ok(top)
}

/// Every event sequenced and not yet announced here (after `announced`):
/// this pass's, and those other processes' passes sequenced (this
/// process's writers among them), so that a writer returns after its
/// events were announced here.
async fn unannounced(tx: &Transaction<'_>, announced: i64) -> Result<Vec<(i64, String, String)>> {
    let stmt = tx
        .prepare_cached(
            "SELECT seq, kind, data_json FROM events WHERE seq > $1 ORDER BY seq LIMIT $2",
        )
        .await
        .map_err(pg)?;
    let mut sequenced = Vec::new();
    for row in tx
        .query(&stmt, &[&announced, &CATCH_UP])
        .await
        .map_err(pg)?
    {
        sequenced.push((
            col::<i64>(&row, 0)?,
            col::<String>(&row, 1)?,
            col::<String>(&row, 2)?,
        ));
    }
    Ok(sequenced)
}

/// Chain every unchained audit row to the head, in id order.
async fn chain_audit(tx: &Transaction<'_>) -> Result<()> {
    let stmt = tx
        .prepare_cached(
            "SELECT id, at, action, actor, data_json FROM audit WHERE seq IS NULL ORDER BY id",
        )
        .await
        .map_err(pg)?;
    let todo = tx.query(&stmt, &[]).await.map_err(pg)?;
    if todo.is_empty() {
        return Ok(());
    }
    let stmt = tx
        .prepare_cached(
            "SELECT seq, hash FROM audit WHERE seq IS NOT NULL ORDER BY seq DESC LIMIT 1",
        )
        .await
        .map_err(pg)?;
    let (mut seq, mut prev) = match tx.query(&stmt, &[]).await.map_err(pg)?.first() {
        Some(row) => (col::<i64>(row, 0)?, col::<String>(row, 1)?),
        None => (0, GENESIS_HASH.to_owned()),
    };
    let mut ids = Vec::with_capacity(todo.len());
    let mut seqs = Vec::with_capacity(todo.len());
    let mut prevs = Vec::with_capacity(todo.len());
    let mut hashes = Vec::with_capacity(todo.len());
    for row in &todo {
        let id: i64 = col(row, 0)?;
        let data: String = col(row, 4)?;
        let data: serde_json::Value =
            serde_json::from_str(&data).map_err(|e| corrupt(&format!("audit row {id}"), e))?;
        seq += 1;
        let hash = entry_hash(
            u64::try_from(seq).unwrap_or_default(),
            &col::<String>(row, 1)?,
            &col::<String>(row, 2)?,
            &col::<String>(row, 3)?,
            &data,
            &prev,
        );
        ids.push(id);
        seqs.push(seq);
        prevs.push(std::mem::replace(&mut prev, hash.clone()));
        hashes.push(hash);
    }
    let stmt = tx
        .prepare_cached(
            "UPDATE audit SET seq = v.seq, prev_hash = v.prev, hash = v.hash
             FROM unnest($1::bigint[], $2::bigint[], $3::text[], $4::text[]) AS v(id, seq, prev, hash)
             WHERE audit.id = v.id",
        )
        .await
        .map_err(pg)?;
    tx.execute(&stmt, &[&ids, &seqs, &prevs, &hashes])
        .await
        .map_err(pg)?;
    Ok(())
}
