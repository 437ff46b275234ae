//! Dashboard sessions in the `dashboard_sessions` table (only hashes of the
//! cookie).

use async_trait::async_trait;
use lev_store::{DashboardSession, DashboardSessionStore, Result};
use time::OffsetDateTime;

use crate::sql::{Tx, col, millis, parse_time, rfc3339};
use crate::{PostgresStore, sql};

#[async_trait]
impl DashboardSessionStore for PostgresStore {
    async fn create_dashboard_session(&self, session: DashboardSession, max: u32) -> Result<()> {
        let mut client = self.client().await?;
        let tx = Tx::begin(&mut client).await?;
        // Count, trim, insert: one server at a time, so the most holds.
        tx.lock("lev:dashboard-sessions").await?;
        let row = tx
            .query_one("SELECT COUNT(*) FROM dashboard_sessions", &[])
            .await?;
        let count: i64 = col(&row, 0)?;
        let excess = count.saturating_add(1).saturating_sub(i64::from(max));
        if excess > 0 {
            tx.execute(
                "DELETE FROM dashboard_sessions WHERE id_hash IN
                 (SELECT id_hash FROM dashboard_sessions ORDER BY last_seen_ms, id_hash LIMIT $1)",
                &[&excess],
            )
            .await?;
        }
        tx.execute(
            "INSERT INTO dashboard_sessions
                 (id_hash, token_hash, csrf, created_at, created_at_ms, last_seen, last_seen_ms)
             VALUES ($1, $2, $3, $4, $5, $6, $7)
             ON CONFLICT (id_hash) DO UPDATE SET token_hash = EXCLUDED.token_hash,
                 csrf = EXCLUDED.csrf, created_at = EXCLUDED.created_at,
                 created_at_ms = EXCLUDED.created_at_ms, last_seen = EXCLUDED.last_seen,
                 last_seen_ms = EXCLUDED.last_seen_ms",
            &[
                &session.id_hash,
                &session.token_hash,
                &session.csrf,
                &rfc3339(session.created_at),
                &millis(session.created_at),
                &rfc3339(session.last_seen),
                &millis(session.last_seen),
            ],
        )
        .await?;
        tx.commit().await?;
        Ok(())
    }

    async fn dashboard_session(&self, id_hash: &str) -> Result<Option<DashboardSession>> {
        let client = self.client().await?;
        let Some(row) = sql::query_opt(
            &client,
            "SELECT token_hash, csrf, created_at, last_seen FROM dashboard_sessions
             WHERE id_hash = $1",
            &[&id_hash],
        )
        .await?
        else {
            return Ok(None);
        };
        Ok(Some(DashboardSession {
            id_hash: id_hash.to_owned(),
            token_hash: col(&row, 0)?,
            csrf: col(&row, 1)?,
            created_at: parse_time("dashboard session", &col::<String>(&row, 2)?)?,
            last_seen: parse_time("dashboard session", &col::<String>(&row, 3)?)?,
        }))
    }

    async fn touch_dashboard_session(&self, id_hash: &str, at: OffsetDateTime) -> Result<()> {
        let client = self.client().await?;
        sql::execute(
            &client,
            "UPDATE dashboard_sessions SET last_seen = $2, last_seen_ms = $3 WHERE id_hash = $1",
            &[&id_hash, &rfc3339(at), &millis(at)],
        )
        .await
        .map(drop)
    }

    async fn delete_dashboard_session(&self, id_hash: &str) -> Result<()> {
        let client = self.client().await?;
        sql::execute(
            &client,
            "DELETE FROM dashboard_sessions WHERE id_hash = $1",
            &[&id_hash],
        )
        .await
        .map(drop)
    }

    async fn delete_stale_dashboard_sessions(
        &self,
        seen_before: OffsetDateTime,
        created_before: OffsetDateTime,
    ) -> Result<u64> {
        let client = self.client().await?;
        sql::execute(
            &client,
            "DELETE FROM dashboard_sessions WHERE last_seen_ms < $1 OR created_at_ms < $2",
            &[&millis(seen_before), &millis(created_before)],
        )
        .await
    }
}
