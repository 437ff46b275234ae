//! lev's PostgreSQL backend of the [`lev_store::Store`] contract: several
//! `lev serve` processes on one database (SPEC section 11).
//!
//! How it keeps the contract's multi-writer rules across processes, under
//! READ COMMITTED:
//!
//! - **Compare-and-set**: answers, cancels, expiry and a task's finish are
//!   `UPDATE ... WHERE status = 'pending' ... RETURNING`: a concurrent
//!   writer waits for the row and re-checks the condition, so exactly one
//!   wins. Nonces are `INSERT ... ON CONFLICT DO NOTHING`; token names are
//!   a primary key.
//! - **Limits**: "count pending, then insert" and gate idempotency run under
//!   a transaction-scoped advisory lock on the session
//!   (`pg_advisory_xact_lock(hashtextextended('lev:session:' || id, 0))`), so
//!   they are serialised per session on every process; requests and calls
//!   are compared as JSON values.
//! - **Event order and the audit chain**: a write transaction stages its
//!   events and audit entries and writes them last, just before its commit,
//!   with `lev_append` (migration 7): it locks the one row of `lev_heads`
//!   (the greatest event seq, the audit chain's head) until the commit,
//!   numbers the events and chains the entries after it, and notifies each
//!   event. Writers run in parallel up to that statement; their tails (the
//!   statement and the commit) queue on the row, so seqs commit in order,
//!   without gaps: once seq N is seen no lower seq appears later, and the
//!   chain always verifies. No second pass.
//! - **Announced after commit**: a writer announces the events it wrote
//!   right after its commit, before it returns; a listener (module
//!   `listener`) per process LISTENs for every process's commits and
//!   announces them from the notifications' payloads. One announcer (module
//!   `announcer`, below both) keeps one order: each event once, in seq
//!   order, without a gap.
//!
//! - **What a process keeps**: the tokens it looked up, dropped when a
//!   trigger notifies their change to every process (module `cache`); the
//!   signing keys' changes are notified the same way.
//!
//! Connections per process: a pool ([`Options::max_connections`], 16 by
//! default) and one that listens; migrations use one more, briefly. TLS
//! (module `tls`, rustls) as the URL's `sslmode` and `sslrootcert` say, for
//! every one of them.
//!
//! Errors: a server that cannot be reached (refused, reset, no connection
//! within [`Options::wait`]) is [`StoreError::Unavailable`], and the pool
//! reconnects by itself once it is back.
//!
//! Schema: times are RFC 3339 text as in SQLite (exact to the nanosecond)
//! beside integer milliseconds where they are compared; JSON is text,
//! compared as values in Rust; a task's output tail and error (free text
//! that may hold a NUL, which `text` refuses) are JSON strings.

mod announcer;
mod cache;
mod gate;
mod keys;
mod listener;
mod migrations;
mod operators;
mod people;
mod sessions;
mod sql;
mod tasks;
mod tls;
mod webhooks;

pub use migrations::{MigrateReport, schema_version};

use std::str::FromStr as _;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use deadpool_postgres::{GenericClient, Manager, ManagerConfig, Pool, RecyclingMethod, Runtime};
use lev_approval::audit::GENESIS_HASH;
use lev_protocol::api::{AuditEntry, InteractionView, Role, TokenInfo};
use lev_protocol::{Envelope, InteractionRequest, InteractionStatus, StoredResponse};
use serde_json::Value;
use time::OffsetDateTime;
use tokio::sync::{broadcast, watch};
use tokio_postgres::Row;

use crate::announcer::Announcer;
use crate::sql::{Cols, Staged, Tx, chain, col, corrupt, describe, millis, rfc3339};
pub(crate) use lev_store::record::VIEW_COLUMNS;
use lev_store::record::{self, AUDIT_COLUMNS, EVENT_COLUMNS, TOKEN_COLUMNS};
use lev_store::{
    AlikeNames, AuditRecord, AuditStore, BlobStore, CreateOutcome, EventStore, InteractionStore,
    ListFilter, ListPage, NewAnswer, NewInteraction, Result, Store, StoreError, StoredEvent,
    TokenCreateOutcome, TokenRecord, TokenStore, TransitionOutcome,
};

/// How a [`PostgresStore`] connects.
#[derive(Debug, Clone)]
pub struct Options {
    /// Most pooled connections of this process (one more listens).
    pub max_connections: usize,
    /// How long a call waits for a pooled connection before it fails as
    /// [`StoreError::Unavailable`].
    pub wait: Duration,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            max_connections: 16,
            wait: Duration::from_secs(5),
        }
    }
}

/// lev's state in PostgreSQL. Clones share one pool; the listener stops
/// when the last clone is dropped.
#[derive(Debug, Clone)]
pub struct PostgresStore {
    inner: Arc<Inner>,
}

struct Inner {
    pool: Pool,
    /// `host:port/db`, for messages.
    target: String,
    announcer: Arc<Announcer>,
    events: lev_store::EventFeed,
    operators: broadcast::Sender<lev_store::OperatorSignal>,
    /// The tokens this process looked up, and the signing keys' changes.
    changes: Arc<cache::Changes>,
    /// Dropped with the last handle: ends the listener.
    _shutdown: watch::Sender<()>,
}

impl std::fmt::Debug for Inner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresStore").finish_non_exhaustive()
    }
}

/// `host:port/db` of a parsed URL, for messages (never the password).
fn target_of(config: &tokio_postgres::Config) -> String {
    let hosts: Vec<String> = config
        .get_hosts()
        .iter()
        .enumerate()
        .map(|(i, host)| {
            let name = match host {
                tokio_postgres::config::Host::Tcp(name) => name.clone(),
                #[cfg(unix)]
                tokio_postgres::config::Host::Unix(path) => path.display().to_string(),
            };
            let port = config
                .get_ports()
                .get(i)
                .or_else(|| config.get_ports().first())
                .copied()
                .unwrap_or(5432);
            format!("{name}:{port}")
        })
        .collect();
    let hosts = if hosts.is_empty() {
        "localhost:5432".to_owned()
    } else {
        hosts.join(",")
    };
    match config.get_dbname() {
        Some(db) => format!("{hosts}/{db}"),
        None => hosts,
    }
}

/// The host part of a URL that does not parse, for its error message: what
/// follows the scheme and any `user:password@`, up to the path.
fn host_of_unparsed(url: &str) -> String {
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    let authority = rest.split(['/', '?']).next().unwrap_or_default();
    let host = authority
        .rsplit_once('@')
        .map_or(authority, |(_, host)| host);
    if host.is_empty() {
        "(no host)".to_owned()
    } else {
        host.to_owned()
    }
}

/// Parse `url`, with lev's defaults for what it leaves unset, and make the
/// TLS connector its `sslmode` and `sslrootcert` ask for.
fn parse_url(url: &str) -> Result<(tokio_postgres::Config, tls::MakeRustls, String)> {
    const HINT: &str = "hint: postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE";
    if let Some((scheme, _)) = url.split_once("://")
        && scheme != "postgres"
        && scheme != "postgresql"
    {
        return Err(StoreError::Database(format!(
            "not a PostgreSQL URL (host {}): the scheme is {scheme:?}, not postgres://\n{HINT}",
            host_of_unparsed(url),
        )));
    }
    let (rest, tls_params) = tls::take_params(url).map_err(|e| {
        StoreError::Database(format!(
            "not a PostgreSQL URL lev can use (host {}): {e}\n{HINT}",
            host_of_unparsed(url)
        ))
    })?;
    let mut config = tokio_postgres::Config::from_str(&rest).map_err(|e| {
        StoreError::Database(format!(
            "not a PostgreSQL URL (host {}): {}\n{HINT}",
            host_of_unparsed(url),
            chain(&e)
        ))
    })?;
    if config.get_connect_timeout().is_none() {
        config.connect_timeout(Duration::from_secs(5));
    }
    if config.get_application_name().is_none() {
        config.application_name("lev");
    }
    config.keepalives(true);
    config.keepalives_idle(Duration::from_secs(30));
    let target = target_of(&config);
    let (ssl_mode, tls) = tls::connector(&tls_params)
        .map_err(|e| StoreError::Database(format!("PostgreSQL at {target}: {e}")))?;
    config.ssl_mode(ssl_mode);
    Ok((config, tls, target))
}

fn build_pool(
    config: &tokio_postgres::Config,
    tls: &tls::MakeRustls,
    size: usize,
    wait: Duration,
) -> Result<Pool> {
    let manager = Manager::from_config(
        config.clone(),
        tls.clone(),
        ManagerConfig {
            recycling_method: RecyclingMethod::Fast,
        },
    );
    Pool::builder(manager)
        .max_size(size)
        .runtime(Runtime::Tokio1)
        .wait_timeout(Some(wait))
        .create_timeout(Some(Duration::from_secs(5)))
        .recycle_timeout(Some(Duration::from_secs(5)))
        .build()
        .map_err(|e| StoreError::Database(format!("connection pool: {e}")))
}

/// One connection for migrations, outside the pool.
async fn connect_one(
    config: &tokio_postgres::Config,
    tls: &tls::MakeRustls,
    target: &str,
) -> Result<(tokio_postgres::Client, tokio::task::JoinHandle<()>)> {
    let (client, connection) = config.connect(tls.clone()).await.map_err(|e| {
        let message = format!("cannot connect to PostgreSQL at {target}: {}", describe(&e));
        if sql::is_unavailable(&e) {
            StoreError::Unavailable(message)
        } else {
            StoreError::Database(message)
        }
    })?;
    let driver = tokio::spawn(async move {
        let _ = connection.await;
    });
    Ok((client, driver))
}

/// Run the migrations alone (`lev migrate --database URL`).
///
/// # Errors
/// A URL that does not parse or connect (the message names the host and the
/// cause), a schema newer than this build, or a migration that fails.
pub async fn migrate(url: &str) -> Result<MigrateReport> {
    let (config, tls, target) = parse_url(url)?;
    let (mut client, driver) = connect_one(&config, &tls, &target).await?;
    let report = migrations::run(&mut client).await;
    drop(client);
    let _ = driver.await;
    report
}

/// A database's activity, for `lev bench`: its committed transactions so
/// far (`pg_stat_database.xact_commit`, which each server process reports
/// up to a second late), and the process ids of its backends and of
/// PostgreSQL's own background processes (WAL writer, checkpointer, ...).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Activity {
    /// Transactions committed in the database.
    pub xact_commit: i64,
    /// The processes that serve it.
    pub pids: Vec<u32>,
}

/// Read `url`'s [`Activity`] (one connection, two statements).
///
/// # Errors
/// A URL that does not parse or connect, a failed query.
pub async fn activity(url: &str) -> Result<Activity> {
    let (config, tls, target) = parse_url(url)?;
    let (client, driver) = connect_one(&config, &tls, &target).await?;
    let read = async {
        let row = client
            .query_one(
                "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()",
                &[],
            )
            .await
            .map_err(sql::pg)?;
        let xact_commit = col::<i64>(&row, 0)?;
        let pids = client
            .query(
                "SELECT pid FROM pg_stat_activity
                 WHERE (datname = current_database() OR backend_type <> 'client backend')
                   AND pid <> pg_backend_pid()",
                &[],
            )
            .await
            .map_err(sql::pg)?
            .iter()
            .map(|row| col::<i32>(row, 0).map(|pid| u32::try_from(pid).unwrap_or_default()))
            .collect::<Result<Vec<_>>>()?;
        Ok(Activity { xact_commit, pids })
    };
    let activity = read.await;
    drop(client);
    let _ = driver.await;
    activity
}

impl PostgresStore {
    /// Connect to `url` with the default [`Options`], migrate, and start
    /// listening for other processes' events.
    ///
    /// # Errors
    /// See [`PostgresStore::connect_with`].
    pub async fn connect(url: &str) -> Result<Self> {
        Self::connect_with(url, Options::default()).await
    }

    /// Connect to `url`, migrate (under an advisory lock: several servers may
    /// start at once), and start listening for other processes' events.
    ///
    /// # Errors
    /// A URL that does not parse, a server that cannot be reached
    /// ([`StoreError::Unavailable`]; the message names the host and the
    /// cause), a schema newer than this build, a migration that fails.
    pub async fn connect_with(url: &str, options: Options) -> Result<Self> {
        let (config, tls, target) = parse_url(url)?;
        {
            let (mut client, driver) = connect_one(&config, &tls, &target).await?;
            let report = migrations::run(&mut client).await;
            drop(client);
            let _ = driver.await;
            report.map_err(|e| match e {
                StoreError::Unavailable(m) => {
                    StoreError::Unavailable(format!("PostgreSQL at {target}: {m}"))
                }
                other => other,
            })?;
        }
        let pool = build_pool(&config, &tls, options.max_connections.max(1), options.wait)?;
        // Where announcing starts: what is committed now.
        let last = {
            let client = pool.get().await.map_err(sql::pool)?;
            let row =
                sql::query_one(&client, "SELECT COALESCE(MAX(seq), 0) FROM events", &[]).await?;
            col::<i64>(&row, 0)?
        };
        let events = lev_store::EventFeed::default();
        let announcer = Arc::new(Announcer::new(last, events.clone()));
        let (shutdown, shutdown_rx) = watch::channel(());
        let (operators, _) = broadcast::channel(4096);
        let (listening, listened) = tokio::sync::oneshot::channel();
        let changes = Arc::new(cache::Changes::new());
        let listener = listener::Listener {
            listening: Some(listening),
            operators: operators.clone(),
            changes: Arc::clone(&changes),
            config,
            tls,
            announcer: Arc::clone(&announcer),
            shutdown: shutdown_rx,
        };
        tokio::spawn(listener.run());
        // Listening before the store is handed out; a server that cannot be
        // listened to now is retried in the background.
        let _ = tokio::time::timeout(options.wait, listened).await;
        Ok(Self {
            inner: Arc::new(Inner {
                pool,
                target,
                announcer,
                events,
                operators,
                changes,
                _shutdown: shutdown,
            }),
        })
    }

    async fn client(&self) -> Result<deadpool_postgres::Object> {
        self.inner.pool.get().await.map_err(|e| match sql::pool(e) {
            StoreError::Unavailable(m) => {
                StoreError::Unavailable(format!("PostgreSQL at {}: {m}", self.inner.target))
            }
            other => other,
        })
    }

    /// The process's caches and change signals (module `cache`).
    fn inner_changes(&self) -> &cache::Changes {
        &self.inner.changes
    }

    /// After a commit: announce the events it wrote, and return once they
    /// are announced here (the rows before them come from this process's
    /// other writers or the listener; if they are slow, the events are
    /// committed all the same and announced when they come).
    async fn sequenced(&self, staged: Staged) {
        let Some(top) = staged.events.last().map(|(seq, _, _)| *seq) else {
            return;
        };
        self.inner.announcer.announce(staged.events);
        let _ = self
            .inner
            .announcer
            .reached(top, std::time::Duration::from_secs(2))
            .await;
    }
}

/// A row of [`VIEW_COLUMNS`], decoded.
pub(crate) fn view_from_row(row: &Row) -> Result<(i64, InteractionView)> {
    record::decode_view(&Cols(row))
}

async fn load_view<C: GenericClient>(c: &C, id: &str) -> Result<Option<InteractionView>> {
    match sql::query_opt(
        c,
        &format!("SELECT {VIEW_COLUMNS} FROM interactions WHERE id = $1"),
        &[&id],
    )
    .await?
    {
        Some(row) => Ok(Some(view_from_row(&row)?.1)),
        None => Ok(None),
    }
}

/// Compare-and-set `pending` -> `status`: the view when this call moved it,
/// `None` when it was not pending (any more).
async fn set_final(
    tx: &Tx<'_>,
    id: &str,
    status: InteractionStatus,
    answered_by: Option<&str>,
    response: Option<&StoredResponse>,
    approval: Option<&Envelope>,
    at: OffsetDateTime,
) -> Result<Option<InteractionView>> {
    // A value that cannot be written is an error, never an empty column.
    let response_json = response
        .map(serde_json::to_string)
        .transpose()
        .map_err(|e| corrupt(id, e))?;
    let approval_json = approval
        .map(serde_json::to_string)
        .transpose()
        .map_err(|e| corrupt(id, e))?;
    let row = tx
        .query_opt(
            &format!(
                "UPDATE interactions SET status = $2, answered_at = $3, answered_by = $4,
                     response_json = $5, approval_json = $6
                 WHERE id = $1 AND status = 'pending'
                 RETURNING {VIEW_COLUMNS}"
            ),
            &[
                &id,
                &status.as_str(),
                &rfc3339(at),
                &answered_by,
                &response_json,
                &approval_json,
            ],
        )
        .await?;
    row.map(|row| view_from_row(&row).map(|(_, v)| v))
        .transpose()
}

/// Why a compare-and-set did not move `id`: it is gone, or was answered.
async fn lost(tx: &Tx<'_>, id: &str) -> Result<TransitionOutcome> {
    match record::still_pending(load_view(tx.client(), id).await?) {
        Err(outcome) => Ok(outcome),
        // Not pending a moment ago, pending now: only an edit of the
        // database does that.
        Ok(_) => Err(corrupt(id, "pending again after its compare-and-set")),
    }
}

/// Compare-and-set `pending` -> `answered` inside the open transaction, with
/// its event and audit entry: the one answer path every kind of answer takes.
pub(crate) async fn answer_in(tx: &mut Tx<'_>, answer: NewAnswer) -> Result<TransitionOutcome> {
    let Some(view) = set_final(
        tx,
        &answer.id,
        InteractionStatus::Answered,
        Some(&answer.answered_by),
        Some(&answer.response),
        answer.approval.as_ref(),
        answer.answered_at,
    )
    .await?
    else {
        return lost(tx, &answer.id).await;
    };
    // The winner's attachments become servable with it; a loser's bytes
    // were stored, but no row ever points at them. In digest order, so two
    // answers naming the same attachments never wait for each other in a
    // circle.
    let mut parts: Vec<_> = answer.response.parts.iter().collect();
    parts.sort_by(|a, b| a.sha256.cmp(&b.sha256));
    parts.dedup_by(|a, b| a.sha256 == b.sha256);
    for part in parts {
        tx.execute(
            "INSERT INTO blobs (sha256, media_type, size) VALUES ($1, $2, $3)
             ON CONFLICT (sha256) DO NOTHING",
            &[
                &part.sha256,
                &part.media_type,
                &i64::try_from(part.size).unwrap_or(i64::MAX),
            ],
        )
        .await?;
    }
    if let Some(approval) = &answer.approval {
        crate::gate::note_nonce(tx, approval, &view.request.request.session_id).await?;
    }
    let change =
        record::interaction_answered(&view, &answer.answered_by, &answer.response, answer.audit)?;
    tx.record(change);
    Ok(TransitionOutcome::Done(Box::new(view)))
}

/// The advisory lock key of a session: taken before "count, then insert".
pub(crate) fn session_lock(session_id: &str) -> String {
    format!("lev:session:{session_id}")
}

/// An existing interaction `id`, compared with `request`: `Existing` when
/// equal as JSON values (the request as created, before any escalation
/// note), else `Conflict`.
async fn replay(tx: &Tx<'_>, id: &str, request: &Value) -> Result<Option<CreateOutcome>> {
    let Some(row) = tx
        .query_opt(
            "SELECT COALESCE(original_request_json, request_json) FROM interactions WHERE id = $1",
            &[&id],
        )
        .await?
    else {
        return Ok(None);
    };
    let stored: Value =
        serde_json::from_str(&col::<String>(&row, 0)?).map_err(|e| corrupt(id, e))?;
    let view = load_view(tx.client(), id)
        .await?
        .ok_or_else(|| corrupt(id, "vanished"))?;
    Ok(Some(if &stored == request {
        CreateOutcome::Existing(Box::new(view))
    } else {
        CreateOutcome::Conflict(Box::new(view))
    }))
}

/// Insert a new pending interaction, under its session's lock (taken by the
/// caller), if the session is under its limit: `Ok(None)` when it is not;
/// `Err(())` inside when the id was taken meanwhile.
pub(crate) async fn insert_interaction(
    tx: &mut Tx<'_>,
    new: &NewInteraction,
    request_json: &str,
) -> Result<InsertOutcome> {
    let i = &new.interaction;
    let id = i.id();
    let row = tx
        .query_one(
            "SELECT COUNT(*) FROM interactions WHERE session_id = $1 AND status = 'pending'",
            &[&i.request.session_id],
        )
        .await?;
    let pending: i64 = col(&row, 0)?;
    if u64::try_from(pending).unwrap_or(u64::MAX) >= new.max_pending_per_session {
        return Ok(InsertOutcome::TooManyPending);
    }
    let row = tx
        .query_opt(
            &format!(
                "INSERT INTO interactions (id, session_id, request_json, status, created_at, expires_at, expires_at_ms)
                 VALUES ($1, $2, $3, 'pending', $4, $5, $6)
                 ON CONFLICT (id) DO NOTHING
                 RETURNING {VIEW_COLUMNS}"
            ),
            &[
                &id,
                &i.request.session_id,
                &request_json,
                &rfc3339(i.created_at),
                &i.expires_at.map(rfc3339),
                &i.expires_at.map(millis),
            ],
        )
        .await?;
    let Some(row) = row else {
        return Ok(InsertOutcome::IdTaken);
    };
    let (_, view) = view_from_row(&row)?;
    tx.record(record::interaction_created(&view, &new.actor)?);
    Ok(InsertOutcome::Created(Box::new(view)))
}

/// Outcome of [`insert_interaction`].
pub(crate) enum InsertOutcome {
    Created(Box<InteractionView>),
    TooManyPending,
    /// Another interaction of that id committed meanwhile.
    IdTaken,
}

fn token_from_row(row: &Row) -> Result<TokenRecord> {
    record::decode_token(&Cols(row))
}

fn audit_from_row(row: &Row) -> Result<AuditEntry> {
    record::decode_audit(&Cols(row))
}

impl Store for PostgresStore {
    fn kind(&self) -> &'static str {
        "postgres"
    }
}

#[async_trait]
impl InteractionStore for PostgresStore {
    async fn create_interaction(&self, new: NewInteraction) -> Result<CreateOutcome> {
        let i = &new.interaction;
        let id = i.id().to_owned();
        let request = serde_json::to_value(&i.request).map_err(|e| corrupt(&id, e))?;
        let request_json = request.to_string();
        let mut client = self.client().await?;
        let mut tx = Tx::begin(&mut client).await?;
        tx.lock(&session_lock(&i.request.session_id)).await?;
        if let Some(outcome) = replay(&tx, &id, &request).await? {
            tx.commit().await?;
            return Ok(outcome);
        }
        let outcome = match insert_interaction(&mut tx, &new, &request_json).await? {
            InsertOutcome::Created(view) => CreateOutcome::Created(view),
            InsertOutcome::TooManyPending => CreateOutcome::TooManyPending,
            // Created meanwhile in another session (ours is locked): now
            // committed, so visible to this statement.
            InsertOutcome::IdTaken => replay(&tx, &id, &request)
                .await?
                .ok_or_else(|| corrupt(&id, "taken, yet not there"))?,
        };
        let staged = tx.commit().await?;
        drop(client);
        self.sequenced(staged).await;
        Ok(outcome)
    }

    async fn get_interaction(&self, id: &str) -> Result<Option<InteractionView>> {
        let client = self.client().await?;
        load_view(&client, id).await
    }

    async fn list_interactions(&self, filter: ListFilter) -> Result<ListPage> {
        let limit = i64::from(filter.limit.clamp(1, 500));
        let before = filter.before.unwrap_or(i64::MAX);
        let status = filter.status.map(InteractionStatus::as_str);
        let client = self.client().await?;
        let rows = sql::query(
            &client,
            &format!(
                "SELECT {VIEW_COLUMNS} FROM interactions
                 WHERE seq < $1 AND ($2::text IS NULL OR status = $2)
                   AND ($3::text IS NULL OR session_id = $3)
                 ORDER BY seq DESC LIMIT $4"
            ),
            &[&before, &status, &filter.session_id, &(limit + 1)],
        )
        .await?;
        record::page_of(limit, rows.iter().map(view_from_row))
    }

    async fn answer_interaction(&self, answer: NewAnswer) -> Result<TransitionOutcome> {
        let mut client = self.client().await?;
        let mut tx = Tx::begin(&mut client).await?;
        let outcome = answer_in(&mut tx, answer).await?;
        let staged = tx.commit().await?;
        drop(client);
        self.sequenced(staged).await;
        Ok(outcome)
    }

    async fn cancel_interaction(&self, id: &str, actor: &str) -> Result<TransitionOutcome> {
        let mut client = self.client().await?;
        let mut tx = Tx::begin(&mut client).await?;
        let Some(view) = set_final(
            &tx,
            id,
            InteractionStatus::Cancelled,
            None,
            None,
            None,
            OffsetDateTime::now_utc(),
        )
        .await?
        else {
            let outcome = lost(&tx, id).await?;
            tx.commit().await?;
            return Ok(outcome);
        };
        tx.record(record::interaction_cancelled(&view, actor)?);
        let staged = tx.commit().await?;
        drop(client);
        self.sequenced(staged).await;
        Ok(TransitionOutcome::Done(Box::new(view)))
    }

    async fn expire_due(&self, now: OffsetDateTime) -> Result<Vec<InteractionView>> {
        let mut client = self.client().await?;
        let mut tx = Tx::begin(&mut client).await?;
        // In one order on every process, so two sweeps lock rows alike.
        let due = tx
            .query(
                "SELECT id, request_json FROM interactions
                 WHERE status = 'pending' AND expires_at_ms <= $1
                 ORDER BY expires_at_ms, id LIMIT 512",
                &[&millis(now)],
            )
            .await?;
        let mut moved = Vec::with_capacity(due.len());
        for row in &due {
            let id: String = col(row, 0)?;
            let request: InteractionRequest = serde_json::from_str(&col::<String>(row, 1)?)
                .map_err(|e| corrupt(&format!("interaction {id}"), e))?;
            let (status, response) = record::timeout_outcome(&id, &request);
            let by = response.as_ref().map(|_| "timeout");
            // Answered or cancelled meanwhile (here or elsewhere): skip.
            let Some(view) = set_final(&tx, &id, status, by, response.as_ref(), None, now).await?
            else {
                continue;
            };
            tx.record(record::interaction_timed_out(&view, status)?);
            moved.push(view);
        }
        let staged = tx.commit().await?;
        drop(client);
        self.sequenced(staged).await;
        Ok(moved)
    }

    async fn count_pending(&self) -> Result<u64> {
        let client = self.client().await?;
        let row = sql::query_one(
            &client,
            "SELECT COUNT(*) FROM interactions WHERE status = 'pending'",
            &[],
        )
        .await?;
        Ok(u64::try_from(col::<i64>(&row, 0)?).unwrap_or_default())
    }

    async fn next_expiry(&self) -> Result<Option<OffsetDateTime>> {
        let client = self.client().await?;
        let row = sql::query_one(
            &client,
            "SELECT MIN(expires_at_ms) FROM interactions WHERE status = 'pending' AND expires_at_ms IS NOT NULL",
            &[],
        )
        .await?;
        let ms: Option<i64> = col(&row, 0)?;
        Ok(ms.and_then(|ms| {
            OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000).ok()
        }))
    }
}

#[async_trait]
impl EventStore for PostgresStore {
    fn subscribe(&self) -> lev_store::EventReceiver {
        self.inner.events.subscribe()
    }

    async fn events_after(&self, seq: i64, limit: u32) -> Result<Vec<StoredEvent>> {
        let client = self.client().await?;
        let rows = sql::query(
            &client,
            &format!("SELECT {EVENT_COLUMNS} FROM events WHERE seq > $1 ORDER BY seq LIMIT $2"),
            &[&seq, &i64::from(limit)],
        )
        .await?;
        rows.iter()
            .map(|row| record::decode_event(&Cols(row)))
            .collect()
    }

    async fn last_event_seq(&self) -> Result<i64> {
        let client = self.client().await?;
        let row = sql::query_one(&client, "SELECT COALESCE(MAX(seq), 0) FROM events", &[]).await?;
        col(&row, 0)
    }
}

#[async_trait]
impl TokenStore for PostgresStore {
    async fn create_token(
        &self,
        token: TokenRecord,
        actor: &str,
        alike: AlikeNames,
    ) -> Result<TokenCreateOutcome> {
        let info = &token.info;
        let sessions = info
            .sessions
            .as_ref()
            .map(serde_json::to_string)
            .transpose()
            .map_err(|e| corrupt("token sessions", e))?;
        let mut client = self.client().await?;
        let mut tx = Tx::begin(&mut client).await?;
        if alike == AlikeNames::Refuse {
            // Names are compared folded under one lock, so two replicas
            // cannot both make `OPS` and `ops`.
            tx.lock("lev:token-names").await?;
            let folded = lev_protocol::ids::fold_name(&info.name);
            for row in tx
                .query("SELECT name FROM tokens ORDER BY name", &[])
                .await?
            {
                let name: String = col(&row, 0)?;
                if name != info.name && lev_protocol::ids::fold_name(&name) == folded {
                    tx.rollback().await?;
                    return Ok(TokenCreateOutcome::LooksLike(name));
                }
            }
        }
        let n = tx
            .execute(
                "INSERT INTO tokens (name, role, caller, hash, created_at, sessions_json)
                 VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (name) DO NOTHING",
                &[
                    &info.name,
                    &info.role.as_str(),
                    &info.caller,
                    &token.hash,
                    &rfc3339(info.created_at),
                    &sessions,
                ],
            )
            .await?;
        if n == 0 {
            tx.commit().await?;
            return Ok(TokenCreateOutcome::NameTaken);
        }
        tx.record(record::token_created(info, actor));
        let staged = tx.commit().await?;
        drop(client);
        self.sequenced(staged).await;
        Ok(TokenCreateOutcome::Created)
    }

    async fn list_tokens(&self) -> Result<Vec<TokenInfo>> {
        let client = self.client().await?;
        let rows = sql::query(
            &client,
            &format!("SELECT {TOKEN_COLUMNS} FROM tokens ORDER BY name"),
            &[],
        )
        .await?;
        rows.iter()
            .map(|row| token_from_row(row).map(|t| t.info))
            .collect()
    }

    async fn revoke_token(&self, name: &str, actor: &str) -> Result<bool> {
        let mut client = self.client().await?;
        let mut tx = Tx::begin(&mut client).await?;
        let revoked = tx
            .query_opt(
                "DELETE FROM tokens WHERE name = $1 RETURNING hash",
                &[&name],
            )
            .await?
            .map(|row| col::<String>(&row, 0))
            .transpose()?;
        if revoked.is_some() {
            let keys = crate::people::revoke_all_of(&mut tx, name, actor).await?;
            let voided = crate::gate::void_pending_votes(&mut tx, |v| v.voter == name).await?;
            tx.record(record::token_revoked(name, actor, &keys, &voided));
        }
        let committed = tx.commit().await;
        // Refused here from the moment the revocation returns; the other
        // processes hear it from the table's trigger (`lev_tokens`).
        if let Some(hash) = &revoked {
            self.inner.changes.forget_token(hash);
        }
        let staged = committed?;
        drop(client);
        self.sequenced(staged).await;
        Ok(revoked.is_some())
    }

    async fn token_by_hash(&self, hash: &str) -> Result<Option<TokenRecord>> {
        // Kept while the listener hears every change (module `cache`).
        let changes = &self.inner.changes;
        if let Some(record) = changes.token(hash) {
            return Ok(Some(record));
        }
        let generation = changes.lookup_starts();
        let client = self.client().await?;
        let record = sql::query_opt(
            &client,
            &format!("SELECT {TOKEN_COLUMNS} FROM tokens WHERE hash = $1"),
            &[&hash],
        )
        .await?
        .as_ref()
        .map(token_from_row)
        .transpose()?;
        if let (Some(generation), Some(record)) = (generation, &record) {
            changes.keep(generation, record);
        }
        Ok(record)
    }

    async fn has_token_with_role(&self, role: Role) -> Result<bool> {
        let client = self.client().await?;
        Ok(sql::query_opt(
            &client,
            "SELECT 1 FROM tokens WHERE role = $1 LIMIT 1",
            &[&role.as_str()],
        )
        .await?
        .is_some())
    }
}

#[async_trait]
impl AuditStore for PostgresStore {
    async fn append_audit(&self, record: AuditRecord) -> Result<AuditEntry> {
        let mut client = self.client().await?;
        let mut tx = Tx::begin(&mut client).await?;
        tx.audit(&record);
        let mut staged = tx.commit().await?;
        drop(client);
        let entry = staged
            .audit
            .take()
            .ok_or_else(|| StoreError::Database("the audit entry was not inserted".into()))?;
        self.sequenced(staged).await;
        Ok(entry)
    }

    async fn audit_after(&self, seq: u64, limit: u32) -> Result<Vec<AuditEntry>> {
        let client = self.client().await?;
        let rows = sql::query(
            &client,
            &format!("SELECT {AUDIT_COLUMNS} FROM audit WHERE seq > $1 ORDER BY seq LIMIT $2"),
            &[&i64::try_from(seq).unwrap_or(i64::MAX), &i64::from(limit)],
        )
        .await?;
        rows.iter().map(audit_from_row).collect()
    }

    async fn audit_head(&self) -> Result<(u64, String)> {
        let client = self.client().await?;
        let head = sql::query_opt(
            &client,
            "SELECT seq, hash FROM audit WHERE seq IS NOT NULL ORDER BY seq DESC LIMIT 1",
            &[],
        )
        .await?;
        Ok(match head {
            Some(row) => (
                u64::try_from(col::<i64>(&row, 0)?).unwrap_or_default(),
                col(&row, 1)?,
            ),
            None => (0, GENESIS_HASH.to_owned()),
        })
    }
}

#[async_trait]
impl BlobStore for PostgresStore {
    async fn put_blob(&self, sha256: &str, _media_type: &str, bytes: Vec<u8>) -> Result<()> {
        // The bytes only: the row that serves them is written by the answer
        // that carries them, in its transaction, and only if it wins.
        let client = self.client().await?;
        sql::execute(
            &client,
            "INSERT INTO blob_data (sha256, bytes) VALUES ($1, $2) ON CONFLICT (sha256) DO NOTHING",
            &[&sha256, &bytes],
        )
        .await
        .map(drop)
    }

    async fn get_blob(&self, sha256: &str) -> Result<Option<(String, Vec<u8>)>> {
        let client = self.client().await?;
        let Some(row) = sql::query_opt(
            &client,
            "SELECT b.media_type, d.bytes FROM blobs b LEFT JOIN blob_data d USING (sha256)
             WHERE b.sha256 = $1",
            &[&sha256],
        )
        .await?
        else {
            return Ok(None);
        };
        let media: String = col(&row, 0)?;
        let bytes: Option<Vec<u8>> = col(&row, 1)?;
        let bytes =
            bytes.ok_or_else(|| corrupt(&format!("blob {sha256}"), "its bytes are missing"))?;
        Ok(Some((media, bytes)))
    }
}

#[cfg(test)]
mod tests {
    use super::host_of_unparsed;

    #[test]
    fn the_host_of_a_bad_url_is_named_without_its_password() {
        assert_eq!(
            host_of_unparsed("postgres://u:secret@db.example:5432/lev?x=1"),
            "db.example:5432"
        );
        assert_eq!(host_of_unparsed("postgres:///lev"), "(no host)");
        assert_eq!(host_of_unparsed("nonsense"), "nonsense");
    }
}
