//! What every part of the backend shares: error mapping, statements through
//! the connection's statement cache, row decoding, and [`Tx`], a write
//! transaction that stages its events and audit entries and writes them,
//! numbered and chained, just before it commits.

use deadpool_postgres::GenericClient;
use lev_protocol::api::AuditEntry;
pub(crate) use lev_store::codec::{corrupt, millis, parse_time, rfc3339};
use lev_store::record::{Change, Columns};
use lev_store::{AuditRecord, Result, StoreError};
use time::OffsetDateTime;
use tokio_postgres::Row;
use tokio_postgres::types::{FromSql, ToSql};

/// Parameters of a statement.
pub(crate) type Params<'a> = &'a [&'a (dyn ToSql + Sync)];

/// SQLSTATE classes and codes that mean "the server cannot serve now":
/// connection exceptions (08), insufficient resources (53: disk full
/// 53100, out of memory 53200, too many connections 53300), operator
/// intervention (57P01..57P03: shut down, crashed, starting up; 57P05 idle
/// session timeout), an IO error (58030), a read-only transaction on a
/// standby after a failover (25006), and a transaction rolled back by a
/// serialization failure or a deadlock (40001, 40P01): in each, nothing
/// committed and a retry may succeed.
fn unavailable_code(code: &str) -> bool {
    code.starts_with("08")
        || code.starts_with("53")
        || matches!(
            code,
            "57P01" | "57P02" | "57P03" | "57P05" | "58030" | "25006" | "40001" | "40P01"
        )
}

/// `e` and its causes, as one line.
pub(crate) fn chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        let more = cause.to_string();
        if !text.contains(&more) {
            text.push_str(": ");
            text.push_str(&more);
        }
        source = cause.source();
    }
    text
}

/// A database error's text: severity, message, SQLSTATE (never a parameter).
pub(crate) fn describe(e: &tokio_postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => format!("{}: {} ({})", db.severity(), db.message(), db.code().code()),
        None => chain(e),
    }
}

/// Whether `e` means the server could not be reached or went away.
pub(crate) fn is_unavailable(e: &tokio_postgres::Error) -> bool {
    if let Some(db) = e.as_db_error() {
        return unavailable_code(db.code().code());
    }
    if e.is_closed() {
        return true;
    }
    let mut source = std::error::Error::source(e);
    while let Some(cause) = source {
        if cause.is::<std::io::Error>() {
            return true;
        }
        source = cause.source();
    }
    let text = e.to_string();
    text.starts_with("error communicating")
        || text.starts_with("error connecting")
        || text.starts_with("timeout")
}

/// A `tokio_postgres` error as the contract's: unreachable is
/// [`StoreError::Unavailable`], the rest a database fault.
pub(crate) fn pg(e: tokio_postgres::Error) -> StoreError {
    if is_unavailable(&e) {
        StoreError::Unavailable(describe(&e))
    } else {
        StoreError::Database(describe(&e))
    }
}

/// A pool error: no connection in time, or none could be made, is
/// [`StoreError::Unavailable`].
pub(crate) fn pool(e: deadpool_postgres::PoolError) -> StoreError {
    use deadpool_postgres::PoolError;
    match e {
        PoolError::Timeout(kind) => StoreError::Unavailable(format!(
            "no database connection in time ({})",
            match kind {
                deadpool_postgres::TimeoutType::Wait => "all connections busy",
                deadpool_postgres::TimeoutType::Create => "connecting",
                deadpool_postgres::TimeoutType::Recycle => "checking a connection",
            }
        )),
        PoolError::Backend(e) => {
            StoreError::Unavailable(format!("cannot connect: {}", describe(&e)))
        }
        PoolError::Closed => StoreError::Closed,
        PoolError::NoRuntimeSpecified => StoreError::Database("the pool has no runtime".into()),
        PoolError::PostCreateHook(e) => StoreError::Unavailable(format!("cannot connect: {e}")),
    }
}

/// Column `i` of `row`, or a [`StoreError::Corrupt`] (never a panic).
pub(crate) fn col<'a, T: FromSql<'a>>(row: &'a Row, i: usize) -> Result<T> {
    row.try_get(i).map_err(|e| corrupt("row", chain(&e)))
}

/// Free text that may hold any character (a NUL, which PostgreSQL's `text`
/// refuses), kept as a JSON string.
pub(crate) fn text_in(s: Option<&str>) -> Option<String> {
    s.map(|s| serde_json::Value::from(s).to_string())
}

/// The inverse of [`text_in`].
pub(crate) fn text_out(what: &str, s: Option<String>) -> Result<Option<String>> {
    s.map(|s| serde_json::from_str::<String>(&s).map_err(|e| corrupt(what, e)))
        .transpose()
}

/// Run `sql` (through the statement cache), returning its rows.
pub(crate) async fn query<C: GenericClient>(
    c: &C,
    sql: &str,
    params: Params<'_>,
) -> Result<Vec<Row>> {
    let stmt = c.prepare_cached(sql).await.map_err(pg)?;
    c.query(&stmt, params).await.map_err(pg)
}

/// Run `sql`, returning its first row, if any.
pub(crate) async fn query_opt<C: GenericClient>(
    c: &C,
    sql: &str,
    params: Params<'_>,
) -> Result<Option<Row>> {
    Ok(query(c, sql, params).await?.into_iter().next())
}

/// Run `sql`, which must return a row.
pub(crate) async fn query_one<C: GenericClient>(
    c: &C,
    sql: &str,
    params: Params<'_>,
) -> Result<Row> {
    query_opt(c, sql, params)
        .await?
        .ok_or_else(|| StoreError::Database(format!("no row from: {sql}")))
}

/// Run `sql`, returning how many rows it changed.
pub(crate) async fn execute<C: GenericClient>(c: &C, sql: &str, params: Params<'_>) -> Result<u64> {
    let stmt = c.prepare_cached(sql).await.map_err(pg)?;
    c.execute(&stmt, params).await.map_err(pg)
}

/// A row as the shared decoders ([`lev_store::record`]) read it.
pub(crate) struct Cols<'a>(pub(crate) &'a Row);

impl Columns for Cols<'_> {
    fn text(&self, i: usize) -> Result<String> {
        col(self.0, i)
    }
    fn text_opt(&self, i: usize) -> Result<Option<String>> {
        col(self.0, i)
    }
    fn int(&self, i: usize) -> Result<i64> {
        col(self.0, i)
    }
}

/// A write transaction (READ COMMITTED). Its events and audit entries are
/// staged, and written by one call of `lev_append` just before the commit:
/// it numbers the events and chains the audit entries after the heads it
/// locks until the commit, so rows become visible in seq order and no
/// second pass is needed.
pub(crate) struct Tx<'a> {
    t: deadpool_postgres::Transaction<'a>,
    events: Vec<(String, String)>,
    audit: Vec<(String, String, String, String)>,
}

/// What a committed transaction wrote: its events (seq, kind, data as
/// stored, in seq order) and its last audit entry.
#[derive(Debug, Default)]
pub(crate) struct Staged {
    pub(crate) events: Vec<(i64, String, String)>,
    pub(crate) audit: Option<AuditEntry>,
}

impl<'a> Tx<'a> {
    pub(crate) async fn begin(client: &'a mut deadpool_postgres::Object) -> Result<Self> {
        let t = client.transaction().await.map_err(pg)?;
        Ok(Self {
            t,
            events: Vec::new(),
            audit: Vec::new(),
        })
    }

    /// The open transaction, for reads.
    pub(crate) fn client(&self) -> &deadpool_postgres::Transaction<'a> {
        &self.t
    }

    pub(crate) async fn query(&self, sql: &str, params: Params<'_>) -> Result<Vec<Row>> {
        query(&self.t, sql, params).await
    }

    pub(crate) async fn query_opt(&self, sql: &str, params: Params<'_>) -> Result<Option<Row>> {
        query_opt(&self.t, sql, params).await
    }

    pub(crate) async fn query_one(&self, sql: &str, params: Params<'_>) -> Result<Row> {
        query_one(&self.t, sql, params).await
    }

    pub(crate) async fn execute(&self, sql: &str, params: Params<'_>) -> Result<u64> {
        execute(&self.t, sql, params).await
    }

    /// Serialise on `key` until this transaction ends (every process).
    pub(crate) async fn lock(&self, key: &str) -> Result<()> {
        self.execute(
            "SELECT pg_advisory_xact_lock(hashtextextended($1, 0))",
            &[&key],
        )
        .await
        .map(drop)
    }

    /// Stage an event, committed with the transaction (its seq is given
    /// just before the commit).
    pub(crate) fn event(&mut self, kind: &str, data: &serde_json::Value) {
        self.events.push((kind.to_owned(), data.to_string()));
    }

    /// Stage an audit entry, committed with the transaction (chained just
    /// before the commit).
    pub(crate) fn audit(&mut self, record: &AuditRecord) {
        self.audit.push((
            rfc3339(OffsetDateTime::now_utc()),
            record.action.clone(),
            record.actor.clone(),
            record.data.to_string(),
        ));
    }

    /// Stage `change`'s event and audit entry.
    pub(crate) fn record(&mut self, change: Change) {
        if let Some(event) = change.event {
            self.event(event.kind.as_str(), &event.data);
        }
        if let Some(audit) = change.audit {
            self.audit(&audit);
        }
    }

    /// Roll back everything this transaction did.
    pub(crate) async fn rollback(self) -> Result<()> {
        self.t.rollback().await.map_err(pg)
    }

    /// Write what was staged (numbered and chained in staging order, with
    /// the outbox's deliveries and the notifications), then commit.
    pub(crate) async fn commit(self) -> Result<Staged> {
        let mut staged = Staged::default();
        if !self.events.is_empty() || !self.audit.is_empty() {
            let (kinds, data): (Vec<&str>, Vec<&str>) = self
                .events
                .iter()
                .map(|(k, d)| (k.as_str(), d.as_str()))
                .unzip();
            let mut at = Vec::with_capacity(self.audit.len());
            let mut action = Vec::with_capacity(self.audit.len());
            let mut actor = Vec::with_capacity(self.audit.len());
            let mut audit_data = Vec::with_capacity(self.audit.len());
            for (a, b, c, d) in &self.audit {
                at.push(a.as_str());
                action.push(b.as_str());
                actor.push(c.as_str());
                audit_data.push(d.as_str());
            }
            // The outbox rides along: one delivery per enabled endpoint that
            // wants the event's kind, with the body lev_store's
            // `delivery_body` makes (the kind and time are plain ASCII, so
            // PostgreSQL's JSON quoting of them is serde_json's).
            let now = OffsetDateTime::now_utc();
            let (now_text, now_ms) = (rfc3339(now), millis(now));
            let row = query_one(
                &self.t,
                "SELECT event_top, audit_top, audit_prev, audit_last
                 FROM lev_append($1::text[], $2::text[], $3::text[], $4::text[], $5::text[],
                                 $6::text[], $7::text, $8::bigint)",
                &[
                    &kinds,
                    &data,
                    &at,
                    &action,
                    &actor,
                    &audit_data,
                    &now_text,
                    &now_ms,
                ],
            )
            .await?;
            let top: i64 = col(&row, 0)?;
            let first = top - i64::try_from(self.events.len()).unwrap_or(i64::MAX) + 1;
            staged.events = self
                .events
                .into_iter()
                .zip(first..)
                .map(|((kind, data), seq)| (seq, kind, data))
                .collect();
            if let Some((at, action, actor, data)) = self.audit.into_iter().last() {
                let seq: i64 = col(&row, 1)?;
                let data = serde_json::from_str(&data).map_err(|e| corrupt("audit entry", e))?;
                staged.audit = Some(AuditEntry {
                    seq: u64::try_from(seq).unwrap_or_default(),
                    at,
                    action,
                    actor,
                    data,
                    prev_hash: col(&row, 2)?,
                    hash: col(&row, 3)?,
                });
            }
        }
        self.t.commit().await.map_err(pg)?;
        Ok(staged)
    }
}

#[cfg(test)]
mod tests {
    use super::unavailable_code;

    #[test]
    fn a_full_disk_and_its_kin_are_unavailable() {
        for code in [
            "08006", "53100", "53200", "53300", "57P01", "57P03", "58030", "25006", "40001",
            "40P01",
        ] {
            assert!(unavailable_code(code), "{code}");
        }
        for code in ["23505", "42P01", "22P02", "XX000", "57014"] {
            assert!(!unavailable_code(code), "{code}");
        }
    }
}
