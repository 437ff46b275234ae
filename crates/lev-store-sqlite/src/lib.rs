//! lev's SQLite backend of the [`lev_store::Store`] contract: one file in the
//! data dir, WAL, `synchronous=FULL`, one writer thread with group commit, a
//! small pool of read connections.
//!
//! How it keeps the contract's multi-writer rules: there is one writer (a
//! thread that owns the only read-write connection), so event `seq` (the
//! rowid) is assigned in commit order, the audit chain's head is appended
//! under that one writer, and "count, then insert" limits run inside one
//! write transaction that nobody else can interleave with. Several processes
//! never share one SQLite file: the data dir is locked by the server.

mod gate;
mod keys;
mod migrations;
mod operators;
mod people;
mod sessions;
mod tasks;
mod webhooks;
mod writer;

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use async_trait::async_trait;
use lev_approval::audit::GENESIS_HASH;
use lev_protocol::api::{AuditEntry, InteractionView, Role, TokenInfo};
use lev_protocol::{Envelope, InteractionStatus, StoredResponse};
use rusqlite::{Connection, OpenFlags, OptionalExtension, Row, params};
use serde_json::Value;
use time::OffsetDateTime;

use crate::writer::{Tx, Writer};
pub(crate) use lev_store::codec::{corrupt, millis, rfc3339};
use lev_store::record::{self, AUDIT_COLUMNS, EVENT_COLUMNS, TOKEN_COLUMNS, VIEW_COLUMNS};
use lev_store::{
    AlikeNames, AuditRecord, AuditStore, BlobStore, CreateOutcome, EventStore, InteractionStore,
    ListFilter, ListPage, NewAnswer, NewInteraction, Store, StoreError, StoredEvent,
    TokenCreateOutcome, TokenRecord, TokenStore, TransitionOutcome,
};

/// A SQLite error in the store's terms: what every function of this crate
/// returns, so that `?` maps the driver's errors (the store's error type
/// knows no driver).
#[derive(Debug)]
pub(crate) struct SqlError(pub(crate) StoreError);

/// Result of this crate's functions; [`lev_store::Result`] at the trait.
pub(crate) type Result<T, E = SqlError> = std::result::Result<T, E>;

impl From<StoreError> for SqlError {
    fn from(e: StoreError) -> Self {
        Self(e)
    }
}

impl From<SqlError> for StoreError {
    fn from(e: SqlError) -> Self {
        e.0
    }
}

impl From<rusqlite::Error> for SqlError {
    fn from(e: rusqlite::Error) -> Self {
        use rusqlite::ErrorCode;
        Self(match e.sqlite_error_code() {
            // Out of disk or memory, an IO error, a file that cannot be
            // opened (no file handles left), or a lock held past the busy
            // timeout: the database cannot serve now, and nothing committed.
            Some(
                ErrorCode::DiskFull
                | ErrorCode::SystemIoFailure
                | ErrorCode::OutOfMemory
                | ErrorCode::CannotOpen
                | ErrorCode::DatabaseBusy
                | ErrorCode::DatabaseLocked,
            ) => StoreError::Unavailable(e.to_string()),
            _ => StoreError::Database(e.to_string()),
        })
    }
}

/// A row as the shared decoders ([`lev_store::record`]) read it.
pub(crate) struct Cols<'a, 'b>(pub(crate) &'a Row<'b>);

impl record::Columns for Cols<'_, '_> {
    fn text(&self, i: usize) -> lev_store::Result<String> {
        Ok(self.0.get(i).map_err(SqlError::from)?)
    }
    fn text_opt(&self, i: usize) -> lev_store::Result<Option<String>> {
        Ok(self.0.get(i).map_err(SqlError::from)?)
    }
    fn int(&self, i: usize) -> lev_store::Result<i64> {
        Ok(self.0.get(i).map_err(SqlError::from)?)
    }
}

/// Write `change`'s event and audit entry in the open transaction.
pub(crate) fn write_change(tx: &mut Tx<'_>, change: record::Change) -> Result<()> {
    if let Some(event) = change.event {
        tx.event(event.kind.as_str(), event.data)?;
    }
    if let Some(audit) = change.audit {
        tx.audit(audit)?;
    }
    Ok(())
}

/// The database file's name inside the data dir.
pub const DB_FILE: &str = "lev.db";
/// The lock file that keeps a second process off the same data dir.
pub const LOCK_FILE: &str = "lev.lock";

/// lev's state in a SQLite file.
#[derive(Debug, Clone)]
pub struct SqliteStore {
    writer: Writer,
    readers: Arc<Readers>,
    events: lev_store::EventFeed,
    blob_dir: PathBuf,
    keys: keys::SharedKeyDir,
    operators: Arc<operators::InProcessOperators>,
    /// The data dir's lock (`lev.lock`), held while any clone lives: one
    /// process per SQLite file, since only that process would announce its
    /// commits to its waiters.
    _lock: Arc<std::fs::File>,
}

#[derive(Debug)]
struct Readers {
    path: PathBuf,
    idle: Mutex<Vec<Connection>>,
}

impl Readers {
    fn take(&self) -> Result<Connection> {
        if let Some(conn) = self
            .idle
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pop()
        {
            return Ok(conn);
        }
        let conn = Connection::open_with_flags(
            &self.path,
            OpenFlags::SQLITE_OPEN_READ_ONLY
                | OpenFlags::SQLITE_OPEN_NO_MUTEX
                | OpenFlags::SQLITE_OPEN_URI,
        )?;
        conn.busy_timeout(std::time::Duration::from_secs(5))?;
        Ok(conn)
    }

    fn put(&self, conn: Connection) {
        let mut idle = self.idle.lock().unwrap_or_else(PoisonError::into_inner);
        if idle.len() < 16 {
            idle.push(conn);
        }
    }
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> StoreError + '_ {
    move |source| StoreError::io(path.display().to_string(), source)
}

/// Take the data dir's lock, or say which other process holds it.
fn lock_data_dir(data_dir: &Path) -> Result<std::fs::File> {
    let path = data_dir.join(LOCK_FILE);
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(io_err(&path))?;
    match file.try_lock() {
        Ok(()) => Ok(file),
        Err(std::fs::TryLockError::WouldBlock) => Err(SqlError(StoreError::Database(format!(
            "{} is in use by another lev process (it holds {}); several servers share \
             state only on PostgreSQL (--database postgres://...)",
            data_dir.display(),
            path.display()
        )))),
        Err(std::fs::TryLockError::Error(e)) => Err(io_err(&path)(e).into()),
    }
}

impl SqliteStore {
    /// Open (creating if needed) the database in `data_dir`, migrate it, and
    /// start the writer.
    ///
    /// # Errors
    /// When the directory or database cannot be opened or migrated.
    pub fn open(data_dir: &Path) -> lev_store::Result<Self> {
        Ok(Self::open_here(data_dir)?)
    }

    fn open_here(data_dir: &Path) -> Result<Self> {
        std::fs::create_dir_all(data_dir).map_err(io_err(data_dir))?;
        let lock = lock_data_dir(data_dir)?;
        let path = data_dir.join(DB_FILE);
        let mut conn = Connection::open(&path)?;
        conn.busy_timeout(std::time::Duration::from_secs(5))?;
        conn.pragma_update(None, "journal_mode", "WAL")?;
        conn.pragma_update(None, "synchronous", "FULL")?;
        conn.pragma_update(None, "foreign_keys", "ON")?;
        migrations::migrate(&mut conn)?;
        let events = lev_store::EventFeed::default();
        let writer = Writer::start(conn, events.clone())?;
        let blob_dir = data_dir.join("blobs");
        std::fs::create_dir_all(&blob_dir).map_err(io_err(&blob_dir))?;
        Ok(Self {
            writer,
            readers: Arc::new(Readers {
                path,
                idle: Mutex::new(Vec::new()),
            }),
            events,
            blob_dir,
            keys: Arc::new(keys::KeyDir::open(data_dir)?),
            operators: Arc::new(operators::InProcessOperators::default()),
            _lock: Arc::new(lock),
        })
    }

    async fn read<T, F>(&self, f: F) -> lev_store::Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> Result<T> + Send + 'static,
    {
        let readers = Arc::clone(&self.readers);
        tokio::task::spawn_blocking(move || {
            let conn = readers.take()?;
            let result = f(&conn);
            readers.put(conn);
            Ok(result?)
        })
        .await
        .map_err(|e| StoreError::Database(format!("read task failed: {e}")))?
    }

    /// A short indexed read on the calling thread, for lookups so small that
    /// moving them to the blocking pool costs more than the read.
    fn read_inline<T>(&self, f: impl FnOnce(&Connection) -> Result<T>) -> lev_store::Result<T> {
        let conn = self.readers.take()?;
        let result = f(&conn);
        self.readers.put(conn);
        Ok(result?)
    }

    fn blob_path(&self, sha256: &str) -> PathBuf {
        let prefix = sha256.get(..2).unwrap_or("xx");
        self.blob_dir.join(prefix).join(sha256)
    }
}

/// `Connection::execute` through the statement cache: the writer runs the same
/// few statements thousands of times a second, and parsing them showed in its profile.
fn exec(conn: &Connection, sql: &str, params: impl rusqlite::Params) -> rusqlite::Result<usize> {
    conn.prepare_cached(sql)?.execute(params)
}

/// `Connection::query_row` through the statement cache.
fn query_one<T>(
    conn: &Connection,
    sql: &str,
    params: impl rusqlite::Params,
    f: impl FnOnce(&Row<'_>) -> rusqlite::Result<T>,
) -> rusqlite::Result<T> {
    conn.prepare_cached(sql)?.query_row(params, f)
}

/// A row of [`VIEW_COLUMNS`], decoded.
fn view_from_row(row: &Row<'_>) -> Result<(i64, InteractionView)> {
    Ok(record::decode_view(&Cols(row))?)
}

fn load_view(conn: &Connection, id: &str) -> Result<Option<InteractionView>> {
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT {VIEW_COLUMNS} FROM interactions WHERE id = ?1"
    ))?;
    let mut rows = stmt.query([id])?;
    match rows.next()? {
        Some(row) => Ok(Some(view_from_row(row)?.1)),
        None => Ok(None),
    }
}

fn set_final(
    tx: &mut Tx<'_>,
    id: &str,
    status: InteractionStatus,
    answered_by: Option<&str>,
    response: Option<&StoredResponse>,
    approval: Option<&Envelope>,
    at: OffsetDateTime,
) -> Result<InteractionView> {
    // A value that cannot be written is an error, never an empty column.
    let response_json = response
        .map(serde_json::to_string)
        .transpose()
        .map_err(|e| corrupt(id, e))?;
    let approval_json = approval
        .map(serde_json::to_string)
        .transpose()
        .map_err(|e| corrupt(id, e))?;
    exec(tx.conn,
        "UPDATE interactions SET status = ?2, answered_at = ?3, answered_by = ?4, response_json = ?5, approval_json = ?6
         WHERE id = ?1 AND status = 'pending'",
        params![id, status.as_str(), rfc3339(at), answered_by, response_json, approval_json],
    )?;
    Ok(load_view(tx.conn, id)?.ok_or_else(|| corrupt(id, "vanished during its own update"))?)
}

/// Compare-and-set `pending` -> `answered` inside the open transaction, with
/// its event and audit entry: the one answer path every kind of answer takes.
pub(crate) fn answer_in(tx: &mut Tx<'_>, answer: NewAnswer) -> Result<TransitionOutcome> {
    if let Err(outcome) = precheck(load_view(tx.conn, &answer.id)?) {
        return Ok(outcome);
    }
    let view = set_final(
        tx,
        &answer.id,
        InteractionStatus::Answered,
        Some(&answer.answered_by),
        Some(&answer.response),
        answer.approval.as_ref(),
        answer.answered_at,
    )?;
    // The winner's attachments become servable with it; a loser's bytes
    // were written, but no row ever points at them.
    for part in &answer.response.parts {
        exec(
            tx.conn,
            "INSERT OR IGNORE INTO blobs (sha256, media_type, size) VALUES (?1, ?2, ?3)",
            params![
                part.sha256,
                part.media_type,
                i64::try_from(part.size).unwrap_or(i64::MAX)
            ],
        )?;
    }
    if let Some(approval) = &answer.approval {
        crate::gate::note_nonce(tx, approval, &view.request.request.session_id)?;
    }
    let change =
        record::interaction_answered(&view, &answer.answered_by, &answer.response, answer.audit)?;
    write_change(tx, change)?;
    Ok(TransitionOutcome::Done(Box::new(view)))
}

pub(crate) fn precheck(
    view: Option<InteractionView>,
) -> std::result::Result<InteractionView, TransitionOutcome> {
    record::still_pending(view)
}

fn token_from_row(row: &Row<'_>) -> Result<TokenRecord> {
    Ok(record::decode_token(&Cols(row))?)
}

fn audit_from_row(row: &Row<'_>) -> Result<AuditEntry> {
    Ok(record::decode_audit(&Cols(row))?)
}

impl Store for SqliteStore {
    fn kind(&self) -> &'static str {
        "sqlite"
    }
}

#[async_trait]
impl InteractionStore for SqliteStore {
    async fn create_interaction(&self, new: NewInteraction) -> lev_store::Result<CreateOutcome> {
        self.writer
            .write(move |tx| {
                let i = &new.interaction;
                let id = i.id().to_owned();
                let request = serde_json::to_value(&i.request).map_err(|e| corrupt(&id, e))?;
                // The text keeps the order a form's properties were written in
                // (a Value would sort them); the comparison below is by value.
                let request_json = serde_json::to_string(&i.request).map_err(|e| corrupt(&id, e))?;
                let existing: Option<String> = query_one(
                    tx.conn,
                    "SELECT COALESCE(original_request_json, request_json) FROM interactions WHERE id = ?1",
                    [&id],
                    |r| r.get(0),
                )
                .optional()?;
                if let Some(stored) = existing {
                    let view = load_view(tx.conn, &id)?.ok_or_else(|| corrupt(&id, "vanished"))?;
                    // Compared as JSON values: the same request stays the
                    // same whatever order or spelling its text was kept in.
                    let stored: Value =
                        serde_json::from_str(&stored).map_err(|e| corrupt(&id, e))?;
                    return Ok(if stored == request {
                        CreateOutcome::Existing(Box::new(view))
                    } else {
                        CreateOutcome::Conflict(Box::new(view))
                    });
                }
                let pending: i64 = query_one(tx.conn,
                    "SELECT COUNT(*) FROM interactions WHERE session_id = ?1 AND status = 'pending'",
                    [&i.request.session_id],
                    |r| r.get(0),
                )?;
                if u64::try_from(pending).unwrap_or(u64::MAX) >= new.max_pending_per_session {
                    return Ok(CreateOutcome::TooManyPending);
                }
                exec(tx.conn,
                    "INSERT INTO interactions (id, session_id, request_json, status, created_at, expires_at, expires_at_ms)
                     VALUES (?1, ?2, ?3, 'pending', ?4, ?5, ?6)",
                    params![
                        id,
                        i.request.session_id,
                        request_json,
                        rfc3339(i.created_at),
                        i.expires_at.map(rfc3339),
                        i.expires_at.map(millis)
                    ],
                )?;
                let view = load_view(tx.conn, &id)?.ok_or_else(|| corrupt(&id, "vanished after insert"))?;
                write_change(tx, record::interaction_created(&view, &new.actor)?)?;
                Ok(CreateOutcome::Created(Box::new(view)))
            })
            .await
    }

    async fn get_interaction(&self, id: &str) -> lev_store::Result<Option<InteractionView>> {
        // One row by its unique id: cheaper than a hop to the blocking pool,
        // and in WAL mode a reader never waits for the writer.
        self.read_inline(|conn| load_view(conn, id))
    }

    async fn list_interactions(&self, filter: ListFilter) -> lev_store::Result<ListPage> {
        self.read(move |conn| {
            let limit = i64::from(filter.limit.clamp(1, 500));
            let mut sql = format!("SELECT {VIEW_COLUMNS} FROM interactions WHERE seq < ?1");
            if filter.status.is_some() {
                sql.push_str(" AND status = ?2");
            }
            if filter.session_id.is_some() {
                sql.push_str(" AND session_id = ?3");
            }
            sql.push_str(" ORDER BY seq DESC LIMIT ?4");
            let mut stmt = conn.prepare_cached(&sql)?;
            let before = filter.before.unwrap_or(i64::MAX);
            let status = filter.status.map(InteractionStatus::as_str);
            let mut rows = stmt.query(params![before, status, filter.session_id, limit + 1])?;
            let rows = std::iter::from_fn(|| match rows.next() {
                Ok(row) => row.map(|row| record::decode_view(&Cols(row))),
                Err(e) => Some(Err(SqlError::from(e).0)),
            });
            Ok(record::page_of(limit, rows)?)
        })
        .await
    }

    async fn answer_interaction(&self, answer: NewAnswer) -> lev_store::Result<TransitionOutcome> {
        self.writer.write(move |tx| answer_in(tx, answer)).await
    }

    async fn cancel_interaction(
        &self,
        id: &str,
        actor: &str,
    ) -> lev_store::Result<TransitionOutcome> {
        let (id, actor) = (id.to_owned(), actor.to_owned());
        self.writer
            .write(move |tx| {
                if let Err(outcome) = precheck(load_view(tx.conn, &id)?) {
                    return Ok(outcome);
                }
                let view = set_final(
                    tx,
                    &id,
                    InteractionStatus::Cancelled,
                    None,
                    None,
                    None,
                    OffsetDateTime::now_utc(),
                )?;
                write_change(tx, record::interaction_cancelled(&view, &actor)?)?;
                Ok(TransitionOutcome::Done(Box::new(view)))
            })
            .await
    }

    async fn expire_due(&self, now: OffsetDateTime) -> lev_store::Result<Vec<InteractionView>> {
        self.writer
            .write(move |tx| {
                let due: Vec<String> = {
                    let mut stmt = tx.conn.prepare_cached(
                        "SELECT id FROM interactions WHERE status = 'pending' AND expires_at_ms <= ?1
                         ORDER BY expires_at_ms LIMIT 512",
                    )?;
                    let rows = stmt.query_map([millis(now)], |r| r.get::<_, String>(0))?;
                    rows.collect::<rusqlite::Result<_>>()?
                };
                let mut moved = Vec::with_capacity(due.len());
                for id in due {
                    let Some(view) = load_view(tx.conn, &id)? else { continue };
                    let (status, response) = record::timeout_outcome(&id, &view.request.request);
                    let by = response.as_ref().map(|_| "timeout");
                    let view = set_final(tx, &id, status, by, response.as_ref(), None, now)?;
                    write_change(tx, record::interaction_timed_out(&view, status)?)?;
                    moved.push(view);
                }
                Ok(moved)
            })
            .await
    }

    async fn count_pending(&self) -> lev_store::Result<u64> {
        self.read(|conn| {
            let n: i64 = conn.query_row(
                "SELECT COUNT(*) FROM interactions WHERE status = 'pending'",
                [],
                |r| r.get(0),
            )?;
            Ok(u64::try_from(n).unwrap_or_default())
        })
        .await
    }

    async fn next_expiry(&self) -> lev_store::Result<Option<OffsetDateTime>> {
        self.read(|conn| {
            let ms: Option<i64> = conn.query_row(
                "SELECT MIN(expires_at_ms) FROM interactions WHERE status = 'pending' AND expires_at_ms IS NOT NULL",
                [],
                |r| r.get(0),
            )?;
            Ok(ms.and_then(|ms| OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000).ok()))
        })
        .await
    }
}

#[async_trait]
impl EventStore for SqliteStore {
    fn subscribe(&self) -> lev_store::EventReceiver {
        self.events.subscribe()
    }

    async fn events_after(&self, seq: i64, limit: u32) -> lev_store::Result<Vec<StoredEvent>> {
        self.read(move |conn| {
            let mut stmt = conn.prepare_cached(&format!(
                "SELECT {EVENT_COLUMNS} FROM events WHERE seq > ?1 ORDER BY seq LIMIT ?2"
            ))?;
            let mut rows = stmt.query(params![seq, i64::from(limit)])?;
            let mut out = Vec::new();
            while let Some(row) = rows.next()? {
                out.push(record::decode_event(&Cols(row))?);
            }
            Ok(out)
        })
        .await
    }

    async fn last_event_seq(&self) -> lev_store::Result<i64> {
        self.read(|conn| {
            Ok(conn.query_row("SELECT COALESCE(MAX(seq), 0) FROM events", [], |r| r.get(0))?)
        })
        .await
    }
}

#[async_trait]
impl TokenStore for SqliteStore {
    async fn create_token(
        &self,
        token: TokenRecord,
        actor: &str,
        alike: AlikeNames,
    ) -> lev_store::Result<TokenCreateOutcome> {
        let actor = actor.to_owned();
        self.writer
            .write(move |tx| {
                let exists: bool = tx
                    .conn
                    .query_row("SELECT 1 FROM tokens WHERE name = ?1", [&token.info.name], |_| Ok(true))
                    .optional()?
                    .unwrap_or(false);
                if exists {
                    return Ok(TokenCreateOutcome::NameTaken);
                }
                if alike == AlikeNames::Refuse {
                    let folded = lev_protocol::ids::fold_name(&token.info.name);
                    let mut stmt = tx.conn.prepare_cached("SELECT name FROM tokens ORDER BY name")?;
                    let mut rows = stmt.query([])?;
                    while let Some(row) = rows.next()? {
                        let name: String = row.get(0)?;
                        if lev_protocol::ids::fold_name(&name) == folded {
                            return Ok(TokenCreateOutcome::LooksLike(name));
                        }
                    }
                }
                let info = &token.info;
                let sessions = info
                    .sessions
                    .as_ref()
                    .map(serde_json::to_string)
                    .transpose()
                    .map_err(|e| corrupt("token sessions", e))?;
                exec(tx.conn,
                    "INSERT INTO tokens (name, role, caller, hash, created_at, sessions_json) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                    params![info.name, info.role.as_str(), info.caller, token.hash, rfc3339(info.created_at), sessions],
                )?;
                write_change(tx, record::token_created(info, &actor))?;
                Ok(TokenCreateOutcome::Created)
            })
            .await
    }

    async fn list_tokens(&self) -> lev_store::Result<Vec<TokenInfo>> {
        self.read(|conn| {
            let mut stmt =
                conn.prepare_cached(&format!("SELECT {TOKEN_COLUMNS} FROM tokens ORDER BY name"))?;
            let mut rows = stmt.query([])?;
            let mut out = Vec::new();
            while let Some(row) = rows.next()? {
                out.push(token_from_row(row)?.info);
            }
            Ok(out)
        })
        .await
    }

    async fn revoke_token(&self, name: &str, actor: &str) -> lev_store::Result<bool> {
        let (name, actor) = (name.to_owned(), actor.to_owned());
        self.writer
            .write(move |tx| {
                let n = tx
                    .conn
                    .execute("DELETE FROM tokens WHERE name = ?1", [&name])?;
                if n > 0 {
                    let keys = crate::people::revoke_all_of(tx, &name, &actor)?;
                    let voided = crate::gate::void_pending_votes(tx, |v| v.voter == name)?;
                    write_change(tx, record::token_revoked(&name, &actor, &keys, &voided))?;
                }
                Ok(n > 0)
            })
            .await
    }

    async fn token_by_hash(&self, hash: &str) -> lev_store::Result<Option<TokenRecord>> {
        // Every request makes this lookup: run it here, not on the blocking
        // pool, whose thread hand-off costs several times the indexed read
        // (a WAL reader never waits for the writer).
        self.read_inline(|conn| {
            let mut stmt = conn.prepare_cached(&format!(
                "SELECT {TOKEN_COLUMNS} FROM tokens WHERE hash = ?1"
            ))?;
            let mut rows = stmt.query([hash])?;
            rows.next()?.map(token_from_row).transpose()
        })
    }

    async fn has_token_with_role(&self, role: Role) -> lev_store::Result<bool> {
        self.read(move |conn| {
            Ok(conn
                .query_row(
                    "SELECT 1 FROM tokens WHERE role = ?1 LIMIT 1",
                    [role.as_str()],
                    |_| Ok(()),
                )
                .optional()?
                .is_some())
        })
        .await
    }
}

#[async_trait]
impl AuditStore for SqliteStore {
    async fn append_audit(&self, record: AuditRecord) -> lev_store::Result<AuditEntry> {
        self.writer.write(move |tx| tx.audit(record)).await
    }

    async fn audit_after(&self, seq: u64, limit: u32) -> lev_store::Result<Vec<AuditEntry>> {
        self.read(move |conn| {
            let mut stmt = conn.prepare_cached(&format!(
                "SELECT {AUDIT_COLUMNS} FROM audit WHERE seq > ?1 ORDER BY seq LIMIT ?2"
            ))?;
            let mut rows = stmt.query(params![
                i64::try_from(seq).unwrap_or(i64::MAX),
                i64::from(limit)
            ])?;
            let mut out = Vec::new();
            while let Some(row) = rows.next()? {
                out.push(audit_from_row(row)?);
            }
            Ok(out)
        })
        .await
    }

    async fn audit_head(&self) -> lev_store::Result<(u64, String)> {
        self.read(|conn| {
            let head = conn
                .query_row(
                    "SELECT seq, hash FROM audit ORDER BY seq DESC LIMIT 1",
                    [],
                    |r| {
                        Ok((
                            u64::try_from(r.get::<_, i64>(0)?).unwrap_or_default(),
                            r.get::<_, String>(1)?,
                        ))
                    },
                )
                .optional()?;
            Ok(head.unwrap_or_else(|| (0, GENESIS_HASH.to_owned())))
        })
        .await
    }
}

#[async_trait]
impl BlobStore for SqliteStore {
    async fn put_blob(
        &self,
        sha256: &str,
        _media_type: &str,
        bytes: Vec<u8>,
    ) -> lev_store::Result<()> {
        // The bytes only: the row that serves them is written by the answer
        // that carries them, in its transaction, and only if it wins.
        let path = self.blob_path(sha256);
        tokio::task::spawn_blocking(move || write_durably(&path, &bytes))
            .await
            .map_err(|e| StoreError::Database(format!("blob task failed: {e}")))?
    }

    async fn get_blob(&self, sha256: &str) -> lev_store::Result<Option<(String, Vec<u8>)>> {
        let sha = sha256.to_owned();
        let media: Option<String> = self
            .read(move |conn| {
                Ok(conn
                    .query_row(
                        "SELECT media_type FROM blobs WHERE sha256 = ?1",
                        [&sha],
                        |r| r.get(0),
                    )
                    .optional()?)
            })
            .await?;
        let Some(media) = media else { return Ok(None) };
        let path = self.blob_path(sha256);
        let bytes =
            tokio::task::spawn_blocking(move || std::fs::read(&path).map_err(io_err(&path)))
                .await
                .map_err(|e| StoreError::Database(format!("blob task failed: {e}")))??;
        Ok(Some((media, bytes)))
    }
}

/// Write `bytes` to `path` so that it survives a crash: a temporary file,
/// fsync, rename, fsync of the directory. An existing file is kept (same
/// digest, same bytes).
fn write_durably(path: &Path, bytes: &[u8]) -> lev_store::Result<()> {
    if path.exists() {
        return Ok(());
    }
    let dir = path
        .parent()
        .ok_or_else(|| corrupt("blob path", "no parent"))?;
    std::fs::create_dir_all(dir).map_err(io_err(dir))?;
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    let mut f = std::fs::File::create(&tmp).map_err(io_err(&tmp))?;
    f.write_all(bytes).map_err(io_err(&tmp))?;
    f.sync_all().map_err(io_err(&tmp))?;
    std::fs::rename(&tmp, path).map_err(io_err(path))?;
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io_err(dir))?;
    Ok(())
}
