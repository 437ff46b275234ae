//! Dashboard sessions in the `dashboard_sessions` table.

use async_trait::async_trait;
use lev_store::{DashboardSession, DashboardSessionStore};

use rusqlite::{OptionalExtension as _, params};
use time::OffsetDateTime;

use crate::writer::rfc3339;
use crate::{SqliteStore, millis};
use lev_store::codec::parse_time;

#[async_trait]
impl DashboardSessionStore for SqliteStore {
    async fn create_dashboard_session(
        &self,
        session: DashboardSession,
        max: u32,
    ) -> lev_store::Result<()> {
        self.writer
            .write(move |tx| {
                let count: i64 = tx
                    .conn
                    .prepare_cached("SELECT COUNT(*) FROM dashboard_sessions")?
                    .query_row([], |r| r.get(0))?;
                let excess = count.saturating_add(1).saturating_sub(i64::from(max));
                if excess > 0 {
                    tx.conn
                        .prepare_cached(
                            "DELETE FROM dashboard_sessions WHERE id_hash IN \
                             (SELECT id_hash FROM dashboard_sessions ORDER BY last_seen_ms LIMIT ?1)",
                        )?
                        .execute([excess])?;
                }
                tx.conn
                    .prepare_cached(
                        "INSERT OR REPLACE INTO dashboard_sessions \
                         (id_hash, token_hash, csrf, created_at, created_at_ms, last_seen, \
                         last_seen_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                    )?
                    .execute(params![
                        session.id_hash,
                        session.token_hash,
                        session.csrf,
                        rfc3339(session.created_at),
                        millis(session.created_at),
                        rfc3339(session.last_seen),
                        millis(session.last_seen),
                    ])?;
                Ok(())
            })
            .await
    }

    async fn dashboard_session(
        &self,
        id_hash: &str,
    ) -> lev_store::Result<Option<DashboardSession>> {
        let id_hash = id_hash.to_owned();
        self.read(move |conn| {
            let row = conn
                .prepare_cached(
                    "SELECT token_hash, csrf, created_at, last_seen FROM dashboard_sessions \
                     WHERE id_hash = ?1",
                )?
                .query_row([&id_hash], |r| {
                    Ok((
                        r.get::<_, String>(0)?,
                        r.get::<_, String>(1)?,
                        r.get::<_, String>(2)?,
                        r.get::<_, String>(3)?,
                    ))
                })
                .optional()?;
            row.map(|(token_hash, csrf, created_at, last_seen)| {
                Ok(DashboardSession {
                    created_at: parse_time("dashboard session", &created_at)?,
                    last_seen: parse_time("dashboard session", &last_seen)?,
                    id_hash,
                    token_hash,
                    csrf,
                })
            })
            .transpose()
        })
        .await
    }

    async fn touch_dashboard_session(
        &self,
        id_hash: &str,
        at: OffsetDateTime,
    ) -> lev_store::Result<()> {
        let id_hash = id_hash.to_owned();
        self.writer
            .write(move |tx| {
                tx.conn
                    .prepare_cached(
                        "UPDATE dashboard_sessions SET last_seen = ?2, last_seen_ms = ?3 \
                         WHERE id_hash = ?1",
                    )?
                    .execute(params![id_hash, rfc3339(at), millis(at)])?;
                Ok(())
            })
            .await
    }

    async fn delete_dashboard_session(&self, id_hash: &str) -> lev_store::Result<()> {
        let id_hash = id_hash.to_owned();
        self.writer
            .write(move |tx| {
                tx.conn
                    .prepare_cached("DELETE FROM dashboard_sessions WHERE id_hash = ?1")?
                    .execute([id_hash])?;
                Ok(())
            })
            .await
    }

    async fn delete_stale_dashboard_sessions(
        &self,
        seen_before: OffsetDateTime,
        created_before: OffsetDateTime,
    ) -> lev_store::Result<u64> {
        self.writer
            .write(move |tx| {
                let n = tx
                    .conn
                    .prepare_cached(
                        "DELETE FROM dashboard_sessions WHERE last_seen_ms < ?1 OR created_at_ms < ?2",
                    )?
                    .execute(params![millis(seen_before), millis(created_before)])?;
                Ok(u64::try_from(n).unwrap_or_default())
            })
            .await
    }
}
