//! Webhook endpoints and the outbox in the `webhooks`, `webhook_deliveries`,
//! `webhook_attempts`, `message_refs` and `reminders` tables. Deliveries are
//! written by the writer beside each event (see `writer.rs`); claims go
//! through the one writer, so a claim and a concurrent record never
//! interleave.

use async_trait::async_trait;
use lev_store::webhooks::filter_text;
use lev_store::{
    AttemptOutcome, AttemptRecord, DeliveryAttempt, DeliveryRecord, DeliveryState, DueDelivery,
    Endpoint, EndpointKind, WebhookStore,
};
use rusqlite::{OptionalExtension as _, Row, params};
use time::OffsetDateTime;

use crate::writer::rfc3339;
use crate::{Cols, Result, SqliteStore, corrupt, millis, write_change};
use lev_store::codec::from_millis;
use lev_store::codec::parse_time;
use lev_store::record::{self, ENDPOINT_COLUMNS};

fn endpoint_from_row(row: &Row<'_>) -> Result<Endpoint> {
    Ok(record::decode_endpoint(&Cols(row))?)
}

#[async_trait]
impl WebhookStore for SqliteStore {
    async fn put_endpoint(&self, endpoint: Endpoint) -> lev_store::Result<()> {
        self.writer
            .write(move |tx| {
                tx.conn
                    .prepare_cached(
                        "INSERT INTO webhooks (id, kind, url, events, secret, created_by, \
                         created_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) \
                         ON CONFLICT (id) DO UPDATE SET kind = excluded.kind, url = excluded.url, \
                         events = excluded.events, secret = excluded.secret, \
                         disabled_at = NULL, disabled_reason = NULL",
                    )?
                    .execute(params![
                        endpoint.id,
                        endpoint.kind.as_str(),
                        endpoint.url,
                        filter_text(&endpoint.events),
                        endpoint.secret,
                        endpoint.created_by,
                        rfc3339(endpoint.created_at),
                    ])?;
                tx.endpoints_changed()?;
                write_change(tx, record::webhook_created(&endpoint))?;
                Ok(())
            })
            .await
    }

    async fn endpoints(&self) -> lev_store::Result<Vec<Endpoint>> {
        self.read(|conn| {
            let mut stmt = conn.prepare_cached(&format!(
                "SELECT {ENDPOINT_COLUMNS} FROM webhooks ORDER BY seq"
            ))?;
            let mut rows = stmt.query([])?;
            let mut out = Vec::new();
            while let Some(row) = rows.next()? {
                out.push(endpoint_from_row(row)?);
            }
            Ok(out)
        })
        .await
    }

    async fn delete_endpoint(&self, id: &str, actor: &str) -> lev_store::Result<bool> {
        let (id, actor) = (id.to_owned(), actor.to_owned());
        self.writer
            .write(move |tx| {
                let n = tx
                    .conn
                    .prepare_cached("DELETE FROM webhooks WHERE id = ?1")?
                    .execute([&id])?;
                if n == 0 {
                    return Ok(false);
                }
                tx.conn
                    .prepare_cached(
                        "DELETE FROM webhook_attempts WHERE delivery_id IN \
                         (SELECT id FROM webhook_deliveries WHERE endpoint_id = ?1)",
                    )?
                    .execute([&id])?;
                tx.conn
                    .prepare_cached("DELETE FROM webhook_deliveries WHERE endpoint_id = ?1")?
                    .execute([&id])?;
                tx.conn
                    .prepare_cached("DELETE FROM message_refs WHERE endpoint_id = ?1")?
                    .execute([&id])?;
                tx.endpoints_changed()?;
                write_change(tx, record::webhook_deleted(&id, &actor))?;
                Ok(true)
            })
            .await
    }

    async fn disable_endpoint(&self, id: &str, reason: &str) -> lev_store::Result<bool> {
        let (id, reason) = (id.to_owned(), reason.to_owned());
        self.writer
            .write(move |tx| {
                let n = tx
                    .conn
                    .prepare_cached(
                        "UPDATE webhooks SET disabled_at = ?2, disabled_reason = ?3 \
                         WHERE id = ?1 AND disabled_at IS NULL",
                    )?
                    .execute(params![id, rfc3339(OffsetDateTime::now_utc()), reason])?;
                if n == 0 {
                    return Ok(false);
                }
                tx.endpoints_changed()?;
                write_change(tx, record::webhook_disabled(&id, &reason, "system"))?;
                Ok(true)
            })
            .await
    }

    async fn claim_deliveries(
        &self,
        now: OffsetDateTime,
        lease_until: OffsetDateTime,
        limit: u32,
    ) -> lev_store::Result<Vec<DueDelivery>> {
        self.writer
            .write(move |tx| {
                let mut stmt = tx.conn.prepare_cached(
                    "UPDATE webhook_deliveries SET lease_until_ms = ?2 WHERE id IN ( \
                     SELECT d.id FROM webhook_deliveries d JOIN webhooks w ON w.id = d.endpoint_id \
                     WHERE d.state = 'pending' AND d.next_attempt_ms <= ?1 \
                     AND (d.lease_until_ms IS NULL OR d.lease_until_ms <= ?1) \
                     AND w.disabled_at IS NULL ORDER BY d.next_attempt_ms, d.seq LIMIT ?3) \
                     RETURNING id",
                )?;
                let ids = stmt
                    .query_map(params![millis(now), millis(lease_until), limit], |r| {
                        r.get::<_, String>(0)
                    })?
                    .collect::<rusqlite::Result<Vec<String>>>()?;
                let mut out = Vec::with_capacity(ids.len());
                let mut get = tx.conn.prepare_cached(
                    "SELECT d.id, d.endpoint_id, w.kind, w.url, w.secret, d.event_kind, d.body, \
                     d.attempts, d.created_at FROM webhook_deliveries d \
                     JOIN webhooks w ON w.id = d.endpoint_id WHERE d.id = ?1",
                )?;
                for id in ids {
                    let row = get.query_row([&id], |r| {
                        Ok((
                            r.get::<_, String>(0)?,
                            r.get::<_, String>(1)?,
                            r.get::<_, String>(2)?,
                            r.get::<_, String>(3)?,
                            r.get::<_, String>(4)?,
                            r.get::<_, String>(5)?,
                            r.get::<_, String>(6)?,
                            r.get::<_, i64>(7)?,
                            r.get::<_, String>(8)?,
                        ))
                    })?;
                    let what = format!("webhook delivery {}", row.0);
                    out.push(DueDelivery {
                        kind: EndpointKind::parse(&row.2)
                            .ok_or_else(|| corrupt(&what, "unknown kind"))?,
                        created_at: parse_time(&what, &row.8)?,
                        attempts: u32::try_from(row.7).unwrap_or(u32::MAX),
                        id: row.0,
                        endpoint_id: row.1,
                        url: row.3,
                        secret: row.4,
                        event_kind: row.5,
                        body: row.6,
                    });
                }
                Ok(out)
            })
            .await
    }

    async fn record_attempt(&self, attempt: DeliveryAttempt) -> lev_store::Result<()> {
        self.writer
            .write(move |tx| {
                let endpoint: Option<(String, i64)> = tx
                    .conn
                    .prepare_cached(
                        "SELECT endpoint_id, attempts FROM webhook_deliveries WHERE id = ?1",
                    )?
                    .query_row([&attempt.delivery_id], |r| Ok((r.get(0)?, r.get(1)?)))
                    .optional()?;
                // Deleted with its endpoint meanwhile: nothing to record.
                let Some((endpoint_id, attempts)) = endpoint else {
                    return Ok(());
                };
                tx.conn
                    .prepare_cached(
                        "INSERT OR REPLACE INTO webhook_attempts \
                         (delivery_id, n, at, status, error, duration_ms) \
                         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                    )?
                    .execute(params![
                        attempt.delivery_id,
                        attempts + 1,
                        rfc3339(attempt.at),
                        attempt.status,
                        attempt.error,
                        i64::try_from(attempt.duration_ms).unwrap_or(i64::MAX),
                    ])?;
                let (state, next) = match &attempt.outcome {
                    AttemptOutcome::Delivered => (DeliveryState::Delivered, None),
                    AttemptOutcome::Retry(at) => (DeliveryState::Pending, Some(millis(*at))),
                    AttemptOutcome::GiveUp | AttemptOutcome::Disable(_) => {
                        (DeliveryState::Failed, None)
                    }
                };
                tx.conn
                    .prepare_cached(
                        "UPDATE webhook_deliveries SET attempts = attempts + 1, state = ?2, \
                         next_attempt_ms = ?3, lease_until_ms = NULL WHERE id = ?1",
                    )?
                    .execute(params![attempt.delivery_id, state.as_str(), next])?;
                if let AttemptOutcome::Disable(reason) = &attempt.outcome {
                    let n = tx
                        .conn
                        .prepare_cached(
                            "UPDATE webhooks SET disabled_at = ?2, disabled_reason = ?3 \
                             WHERE id = ?1 AND disabled_at IS NULL",
                        )?
                        .execute(params![endpoint_id, rfc3339(attempt.at), reason])?;
                    if n > 0 {
                        tx.endpoints_changed()?;
                        write_change(tx, record::webhook_disabled(&endpoint_id, reason, "system"))?;
                    }
                }
                Ok(())
            })
            .await
    }

    async fn deliveries(
        &self,
        endpoint_id: &str,
        limit: u32,
    ) -> lev_store::Result<Vec<DeliveryRecord>> {
        let endpoint_id = endpoint_id.to_owned();
        self.read(move |conn| {
            let mut stmt = conn.prepare_cached(
                "SELECT id, event_kind, state, created_at, next_attempt_ms FROM webhook_deliveries \
                 WHERE endpoint_id = ?1 ORDER BY seq DESC LIMIT ?2",
            )?;
            let rows = stmt
                .query_map(params![endpoint_id, limit], |r| {
                    Ok((
                        r.get::<_, String>(0)?,
                        r.get::<_, String>(1)?,
                        r.get::<_, String>(2)?,
                        r.get::<_, String>(3)?,
                        r.get::<_, Option<i64>>(4)?,
                    ))
                })?
                .collect::<rusqlite::Result<Vec<_>>>()?;
            let mut attempts = conn.prepare_cached(
                "SELECT at, status, error, duration_ms FROM webhook_attempts \
                 WHERE delivery_id = ?1 ORDER BY n",
            )?;
            let mut out = Vec::with_capacity(rows.len());
            for (id, event_kind, state, created_at, next) in rows {
                let what = format!("webhook delivery {id}");
                let state =
                    DeliveryState::parse(&state).ok_or_else(|| corrupt(&what, "unknown state"))?;
                let list = attempts
                    .query_map([&id], |r| {
                        Ok((
                            r.get::<_, String>(0)?,
                            r.get::<_, Option<u16>>(1)?,
                            r.get::<_, Option<String>>(2)?,
                            r.get::<_, i64>(3)?,
                        ))
                    })?
                    .collect::<rusqlite::Result<Vec<_>>>()?
                    .into_iter()
                    .map(|(at, status, error, ms)| {
                        Ok(AttemptRecord {
                            at: parse_time(&what, &at)?,
                            status,
                            error,
                            duration_ms: u64::try_from(ms).unwrap_or_default(),
                        })
                    })
                    .collect::<Result<Vec<_>>>()?;
                out.push(DeliveryRecord {
                    created_at: parse_time(&what, &created_at)?,
                    next_attempt_at: match (state, next) {
                        (DeliveryState::Pending, Some(ms)) => Some(from_millis(&what, ms)?),
                        _ => None,
                    },
                    attempts: list,
                    id,
                    event_kind,
                    state,
                });
            }
            Ok(out)
        })
        .await
    }

    async fn next_delivery_at(&self) -> lev_store::Result<Option<OffsetDateTime>> {
        self.read(|conn| {
            let ms: Option<i64> = conn
                .prepare_cached(
                    "SELECT min(max(d.next_attempt_ms, coalesce(d.lease_until_ms, 0))) \
                     FROM webhook_deliveries d JOIN webhooks w ON w.id = d.endpoint_id \
                     WHERE d.state = 'pending' AND w.disabled_at IS NULL",
                )?
                .query_row([], |r| r.get(0))?;
            Ok(ms
                .map(|ms| from_millis("webhook deliveries", ms))
                .transpose()?)
        })
        .await
    }

    async fn prune_deliveries(&self, before: OffsetDateTime) -> lev_store::Result<u64> {
        self.writer
            .write(move |tx| {
                tx.conn
                    .prepare_cached(
                        "DELETE FROM webhook_attempts WHERE delivery_id IN (SELECT id FROM \
                         webhook_deliveries WHERE state <> 'pending' AND created_at_ms < ?1)",
                    )?
                    .execute([millis(before)])?;
                let n = tx
                    .conn
                    .prepare_cached(
                        "DELETE FROM webhook_deliveries WHERE state <> 'pending' \
                         AND created_at_ms < ?1",
                    )?
                    .execute([millis(before)])?;
                Ok(u64::try_from(n).unwrap_or_default())
            })
            .await
    }

    async fn set_message_ref(
        &self,
        endpoint_id: &str,
        interaction_id: &str,
        r: &str,
    ) -> lev_store::Result<()> {
        let (e, i, r) = (
            endpoint_id.to_owned(),
            interaction_id.to_owned(),
            r.to_owned(),
        );
        self.writer
            .write(move |tx| {
                tx.conn
                    .prepare_cached(
                        "INSERT OR REPLACE INTO message_refs (endpoint_id, interaction_id, \
                         message_ref) VALUES (?1, ?2, ?3)",
                    )?
                    .execute(params![e, i, r])?;
                Ok(())
            })
            .await
    }

    async fn message_ref(
        &self,
        endpoint_id: &str,
        interaction_id: &str,
    ) -> lev_store::Result<Option<String>> {
        let (e, i) = (endpoint_id.to_owned(), interaction_id.to_owned());
        self.read(move |conn| {
            Ok(conn
                .prepare_cached(
                    "SELECT message_ref FROM message_refs WHERE endpoint_id = ?1 \
                     AND interaction_id = ?2",
                )?
                .query_row(params![e, i], |r| r.get(0))
                .optional()?)
        })
        .await
    }

    async fn remind(
        &self,
        interaction_id: &str,
        n: u32,
        data: serde_json::Value,
    ) -> lev_store::Result<bool> {
        let id = interaction_id.to_owned();
        self.writer
            .write(move |tx| {
                if !notice_once(tx, &id, n)? {
                    return Ok(false);
                }
                write_change(tx, record::reminded(data))?;
                Ok(true)
            })
            .await
    }

    async fn escalate_once(
        &self,
        interaction_id: &str,
        data: serde_json::Value,
    ) -> lev_store::Result<bool> {
        let id = interaction_id.to_owned();
        self.writer
            .write(move |tx| {
                // Notice 0 is the escalation: reminders count from 1.
                if !notice_once(tx, &id, 0)? {
                    return Ok(false);
                }
                write_change(tx, record::escalated_once(data))?;
                Ok(true)
            })
            .await
    }
}

/// Record notice `n` of interaction `id` (a reminder, or 0 for the
/// escalation) inside the open transaction: true when it is pending and
/// the notice was not recorded before.
fn notice_once(tx: &mut crate::writer::Tx<'_>, id: &str, n: u32) -> Result<bool> {
    let pending = tx
        .conn
        .prepare_cached("SELECT status = 'pending' FROM interactions WHERE id = ?1")?
        .query_row([id], |r| r.get::<_, bool>(0))
        .optional()?
        .unwrap_or(false);
    if !pending {
        return Ok(false);
    }
    let fresh = tx
        .conn
        .prepare_cached(
            "INSERT OR IGNORE INTO reminders (interaction_id, n, at) VALUES (?1, ?2, ?3)",
        )?
        .execute(params![id, n, rfc3339(OffsetDateTime::now_utc())])?;
    Ok(fresh > 0)
}
