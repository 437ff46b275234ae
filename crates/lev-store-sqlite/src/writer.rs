//! The one writer thread: jobs arrive on a channel, and every job waiting at
//! that moment commits in one transaction (group commit). Each job runs in its
//! own savepoint, so one job's failure rolls back that job alone. Replies and
//! event announcements go out only after the commit.

use std::sync::mpsc;

use lev_approval::audit::{GENESIS_HASH, entry_hash};
use lev_protocol::api::AuditEntry;
use lev_store::EventFeed;
use rusqlite::{Connection, params};
use time::OffsetDateTime;
use tokio::sync::oneshot;

pub(crate) use lev_store::codec::rfc3339;
use lev_store::{AuditRecord, StoreError, StoredEvent};

use crate::{Result, SqlError};

/// Most jobs in one transaction.
const MAX_BATCH: usize = 256;

type Reply = Box<dyn FnOnce(std::result::Result<(), Failed>) + Send>;

/// Why a batch did not commit, for every job in it: a disk that is full or
/// failing (and the like) is [`StoreError::Unavailable`], so a client
/// retries; anything else a database fault.
#[derive(Debug, Clone)]
pub(crate) struct Failed {
    message: String,
    unavailable: bool,
}

impl From<StoreError> for Failed {
    fn from(e: StoreError) -> Self {
        Self {
            unavailable: matches!(e, StoreError::Unavailable(_)),
            message: e.to_string(),
        }
    }
}

impl From<rusqlite::Error> for Failed {
    fn from(e: rusqlite::Error) -> Self {
        SqlError::from(e).0.into()
    }
}

impl From<SqlError> for Failed {
    fn from(e: SqlError) -> Self {
        e.0.into()
    }
}

impl Failed {
    fn into_error(self) -> StoreError {
        let message = format!("commit failed: {}", self.message);
        if self.unavailable {
            StoreError::Unavailable(message)
        } else {
            StoreError::Database(message)
        }
    }
}
pub(crate) type Job = Box<dyn FnOnce(&mut Tx<'_>) -> (bool, Reply) + Send>;

/// What a job sees: the connection inside the open transaction, and helpers
/// that append events and audit entries in it.
pub(crate) struct Tx<'a> {
    pub(crate) conn: &'a Connection,
    state: &'a mut ChainState,
}

/// The audit chain's head and the events staged in the open transaction. The
/// head is read again inside every write transaction (the contract: never
/// cached outside the appending transaction), so even a second process
/// writing the same file could not fork the chain.
struct ChainState {
    audit_seq: u64,
    audit_hash: String,
    staged: Vec<StoredEvent>,
    /// Whether an enabled webhook endpoint exists (read per transaction): when
    /// none does, an event writes no delivery and builds no body.
    endpoints: bool,
}

impl ChainState {
    fn load(conn: &Connection) -> Result<Self> {
        let head = conn
            .prepare_cached("SELECT seq, hash FROM audit ORDER BY seq DESC LIMIT 1")?
            .query_row([], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?)))
            .map(Some)
            .or_else(|e| match e {
                rusqlite::Error::QueryReturnedNoRows => Ok(None),
                e => Err(e),
            })?;
        let (audit_seq, audit_hash) = match head {
            Some((seq, hash)) => (u64::try_from(seq).unwrap_or_default(), hash),
            None => (0, GENESIS_HASH.to_owned()),
        };
        let endpoints = conn
            .prepare_cached("SELECT EXISTS (SELECT 1 FROM webhooks WHERE disabled_at IS NULL)")?
            .query_row([], |r| r.get::<_, bool>(0))?;
        Ok(Self {
            audit_seq,
            audit_hash,
            staged: Vec::new(),
            endpoints,
        })
    }
}

impl Tx<'_> {
    /// Append an event; it is announced once the transaction commits.
    pub(crate) fn event(&mut self, kind: &str, data: serde_json::Value) -> Result<i64> {
        let text = data.to_string();
        self.conn
            .prepare_cached("INSERT INTO events (kind, data_json) VALUES (?1, ?2)")?
            .execute(params![kind, text])?;
        let seq = self.conn.last_insert_rowid();
        if self.state.endpoints {
            // The outbox: one delivery per enabled endpoint that wants this
            // kind, in this transaction.
            let now = OffsetDateTime::now_utc();
            let body = lev_store::webhooks::delivery_body(kind, &rfc3339(now), &text);
            self.conn
                .prepare_cached(
                    "INSERT INTO webhook_deliveries (id, endpoint_id, event_seq, event_kind, body, \
                     state, created_at, created_at_ms, next_attempt_ms) \
                     SELECT 'msg_' || lower(hex(randomblob(16))), id, ?1, ?2, ?3, 'pending', ?4, \
                     ?5, ?5 FROM webhooks WHERE disabled_at IS NULL \
                     AND (events = '' OR instr(events, ',' || ?2 || ',') > 0)",
                )?
                .execute(params![seq, kind, body, rfc3339(now), crate::millis(now)])?;
        }
        self.state.staged.push(StoredEvent {
            seq,
            kind: kind.to_owned(),
            data,
        });
        Ok(seq)
    }

    /// Note that the set of enabled webhook endpoints changed in this
    /// transaction.
    pub(crate) fn endpoints_changed(&mut self) -> Result<()> {
        self.state.endpoints = self
            .conn
            .prepare_cached("SELECT EXISTS (SELECT 1 FROM webhooks WHERE disabled_at IS NULL)")?
            .query_row([], |r| r.get::<_, bool>(0))?;
        Ok(())
    }

    /// Append an audit entry, chained to the one before.
    pub(crate) fn audit(&mut self, record: AuditRecord) -> Result<AuditEntry> {
        let seq = self.state.audit_seq + 1;
        let at = rfc3339(OffsetDateTime::now_utc());
        let hash = entry_hash(
            seq,
            &at,
            &record.action,
            &record.actor,
            &record.data,
            &self.state.audit_hash,
        );
        self.conn.prepare_cached(
            "INSERT INTO audit (seq, at, action, actor, data_json, prev_hash, hash) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
        )?.execute(
            params![
                i64::try_from(seq).unwrap_or(i64::MAX),
                at,
                record.action,
                record.actor,
                record.data.to_string(),
                self.state.audit_hash,
                hash
            ],
        )?;
        let entry = AuditEntry {
            seq,
            at,
            action: record.action,
            actor: record.actor,
            data: record.data,
            prev_hash: std::mem::replace(&mut self.state.audit_hash, hash.clone()),
            hash,
        };
        self.state.audit_seq = seq;
        Ok(entry)
    }
}

/// The handle jobs are sent through.
#[derive(Clone)]
pub(crate) struct Writer {
    jobs: mpsc::Sender<Job>,
}

impl std::fmt::Debug for Writer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Writer")
    }
}

impl Writer {
    /// Start the writer thread on `conn`.
    pub(crate) fn start(conn: Connection, events: EventFeed) -> Result<Self> {
        let state = ChainState::load(&conn)?;
        let (jobs, rx) = mpsc::channel::<Job>();
        std::thread::Builder::new()
            .name("lev-sqlite-writer".into())
            .spawn(move || run(conn, state, rx, events))
            .map_err(|e| StoreError::Database(format!("cannot start the writer thread: {e}")))?;
        Ok(Self { jobs })
    }

    /// Run `f` in the next group commit; resolves once committed.
    pub(crate) async fn write<T, F>(&self, f: F) -> lev_store::Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&mut Tx<'_>) -> Result<T> + Send + 'static,
    {
        let (tx, rx) = oneshot::channel::<lev_store::Result<T>>();
        let job: Job = Box::new(move |t: &mut Tx<'_>| {
            let result = f(t).map_err(StoreError::from);
            let ok = result.is_ok();
            let reply: Reply = Box::new(move |commit: std::result::Result<(), Failed>| {
                let _ = tx.send(match commit {
                    Ok(()) => result,
                    Err(e) => Err(e.into_error()),
                });
            });
            (ok, reply)
        });
        self.jobs.send(job).map_err(|_| StoreError::Closed)?;
        rx.await.map_err(|_| StoreError::Closed)?
    }
}

fn run(conn: Connection, mut state: ChainState, rx: mpsc::Receiver<Job>, events: EventFeed) {
    let mut batch: Vec<Job> = Vec::with_capacity(MAX_BATCH);
    while let Ok(first) = rx.recv() {
        batch.push(first);
        while batch.len() < MAX_BATCH {
            match rx.try_recv() {
                Ok(job) => batch.push(job),
                Err(_) => break,
            }
        }
        let mut replies: Vec<Reply> = Vec::with_capacity(batch.len());
        let outcome = run_batch(&conn, &mut state, &mut batch, &mut replies);
        match &outcome {
            Ok(()) => {
                for event in state.staged.drain(..) {
                    events.send(event);
                }
            }
            Err(_) => {
                let _ = conn.execute_batch("ROLLBACK");
                state.staged.clear();
            }
        }
        for reply in replies {
            reply(outcome.clone());
        }
    }
}

fn run_batch(
    conn: &Connection,
    state: &mut ChainState,
    batch: &mut Vec<Job>,
    replies: &mut Vec<Reply>,
) -> std::result::Result<(), Failed> {
    // Cached statements: parsing these on every job showed in the writer's profile.
    let exec = |sql: &str| -> std::result::Result<(), Failed> {
        conn.prepare_cached(sql)
            .and_then(|mut stmt| stmt.execute([]))
            .map(drop)
            .map_err(Failed::from)
    };
    exec("BEGIN IMMEDIATE")?;
    let head = ChainState::load(conn)?;
    state.audit_seq = head.audit_seq;
    state.audit_hash = head.audit_hash;
    state.endpoints = head.endpoints;
    for job in batch.drain(..) {
        let (seq, hash, staged, endpoints) = (
            state.audit_seq,
            state.audit_hash.clone(),
            state.staged.len(),
            state.endpoints,
        );
        exec("SAVEPOINT job")?;
        let (ok, reply) = job(&mut Tx { conn, state });
        if !ok {
            exec("ROLLBACK TO job")?;
            state.audit_seq = seq;
            state.audit_hash = hash;
            state.staged.truncate(staged);
            state.endpoints = endpoints;
        }
        exec("RELEASE job")?;
        replies.push(reply);
    }
    exec("COMMIT")
}
