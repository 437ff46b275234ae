//! Webhook endpoints and the outbox: the `webhooks`, `webhook_deliveries`,
//! `webhook_attempts`, `message_refs` and `reminders` tables. Deliveries are
//! inserted with their events (see `sql.rs`); a claim takes due rows with
//! `FOR UPDATE SKIP LOCKED` and leases them, so each delivery is sent by one
//! server at a time.

use async_trait::async_trait;
use lev_store::webhooks::filter_text;
use lev_store::{
    AttemptOutcome, AttemptRecord, DeliveryAttempt, DeliveryRecord, DeliveryState, DueDelivery,
    Endpoint, EndpointKind, Result, WebhookStore,
};
use time::OffsetDateTime;
use tokio_postgres::Row;

use crate::sql::{Cols, Tx, col, corrupt, millis, parse_time, rfc3339};
use crate::{PostgresStore, sql};
use lev_store::codec::from_millis;
use lev_store::record::{self, ENDPOINT_COLUMNS};

fn endpoint_from_row(row: &Row) -> Result<Endpoint> {
    record::decode_endpoint(&Cols(row))
}

#[async_trait]
impl WebhookStore for PostgresStore {
    async fn put_endpoint(&self, endpoint: Endpoint) -> Result<()> {
        let mut client = self.client().await?;
        let mut tx = Tx::begin(&mut client).await?;
        tx.execute(
            "INSERT INTO webhooks (id, kind, url, events, secret, created_by, created_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7)
             ON CONFLICT (id) DO UPDATE SET kind = EXCLUDED.kind, url = EXCLUDED.url,
                 events = EXCLUDED.events, secret = EXCLUDED.secret,
                 disabled_at = NULL, disabled_reason = NULL",
            &[
                &endpoint.id,
                &endpoint.kind.as_str(),
                &endpoint.url,
                &filter_text(&endpoint.events),
                &endpoint.secret,
                &endpoint.created_by,
                &rfc3339(endpoint.created_at),
            ],
        )
        .await?;
        tx.record(record::webhook_created(&endpoint));
        let staged = tx.commit().await?;
        drop(client);
        self.sequenced(staged).await;
        Ok(())
    }

    async fn endpoints(&self) -> Result<Vec<Endpoint>> {
        let client = self.client().await?;
        sql::query(
            &client,
            &format!("SELECT {ENDPOINT_COLUMNS} FROM webhooks ORDER BY seq"),
            &[],
        )
        .await?
        .iter()
        .map(endpoint_from_row)
        .collect()
    }

    async fn delete_endpoint(&self, id: &str, actor: &str) -> Result<bool> {
        let mut client = self.client().await?;
        let mut tx = Tx::begin(&mut client).await?;
        if tx
            .execute("DELETE FROM webhooks WHERE id = $1", &[&id])
            .await?
            == 0
        {
            tx.rollback().await?;
            return Ok(false);
        }
        tx.execute(
            "DELETE FROM webhook_attempts WHERE delivery_id IN
             (SELECT id FROM webhook_deliveries WHERE endpoint_id = $1)",
            &[&id],
        )
        .await?;
        tx.execute(
            "DELETE FROM webhook_deliveries WHERE endpoint_id = $1",
            &[&id],
        )
        .await?;
        tx.execute("DELETE FROM message_refs WHERE endpoint_id = $1", &[&id])
            .await?;
        tx.record(record::webhook_deleted(id, actor));
        let staged = tx.commit().await?;
        drop(client);
        self.sequenced(staged).await;
        Ok(true)
    }

    async fn disable_endpoint(&self, id: &str, reason: &str) -> Result<bool> {
        let mut client = self.client().await?;
        let mut tx = Tx::begin(&mut client).await?;
        let n = tx
            .execute(
                "UPDATE webhooks SET disabled_at = $2, disabled_reason = $3
                 WHERE id = $1 AND disabled_at IS NULL",
                &[&id, &rfc3339(OffsetDateTime::now_utc()), &reason],
            )
            .await?;
        if n == 0 {
            tx.rollback().await?;
            return Ok(false);
        }
        tx.record(record::webhook_disabled(id, reason, "system"));
        let staged = tx.commit().await?;
        drop(client);
        self.sequenced(staged).await;
        Ok(true)
    }

    async fn claim_deliveries(
        &self,
        now: OffsetDateTime,
        lease_until: OffsetDateTime,
        limit: u32,
    ) -> Result<Vec<DueDelivery>> {
        let client = self.client().await?;
        let rows = sql::query(
            &client,
            "WITH due AS (
                 SELECT d.id FROM webhook_deliveries d JOIN webhooks w ON w.id = d.endpoint_id
                 WHERE d.state = 'pending' AND d.next_attempt_ms <= $1
                   AND (d.lease_until_ms IS NULL OR d.lease_until_ms <= $1)
                   AND w.disabled_at IS NULL
                 ORDER BY d.next_attempt_ms, d.seq LIMIT $3
                 FOR UPDATE OF d SKIP LOCKED)
             UPDATE webhook_deliveries d SET lease_until_ms = $2
             FROM due, webhooks w
             WHERE d.id = due.id AND w.id = d.endpoint_id
             RETURNING d.id, d.endpoint_id, w.kind, w.url, w.secret, d.event_kind, d.body,
                 d.attempts, d.created_at",
            &[&millis(now), &millis(lease_until), &i64::from(limit)],
        )
        .await?;
        rows.iter()
            .map(|row| {
                let id: String = col(row, 0)?;
                let what = format!("webhook delivery {id}");
                let kind: String = col(row, 2)?;
                Ok(DueDelivery {
                    kind: EndpointKind::parse(&kind)
                        .ok_or_else(|| corrupt(&what, "unknown kind"))?,
                    endpoint_id: col(row, 1)?,
                    url: col(row, 3)?,
                    secret: col(row, 4)?,
                    event_kind: col(row, 5)?,
                    body: col(row, 6)?,
                    attempts: u32::try_from(col::<i32>(row, 7)?).unwrap_or_default(),
                    created_at: parse_time(&what, &col::<String>(row, 8)?)?,
                    id,
                })
            })
            .collect()
    }

    async fn record_attempt(&self, attempt: DeliveryAttempt) -> Result<()> {
        let mut client = self.client().await?;
        let mut tx = Tx::begin(&mut client).await?;
        let Some(row) = tx
            .query_opt(
                "SELECT endpoint_id, attempts FROM webhook_deliveries WHERE id = $1 FOR UPDATE",
                &[&attempt.delivery_id],
            )
            .await?
        else {
            // Deleted with its endpoint meanwhile: nothing to record.
            tx.rollback().await?;
            return Ok(());
        };
        let endpoint_id: String = col(&row, 0)?;
        let attempts: i32 = col(&row, 1)?;
        tx.execute(
            "INSERT INTO webhook_attempts (delivery_id, n, at, status, error, duration_ms)
             VALUES ($1, $2, $3, $4, $5, $6)
             ON CONFLICT (delivery_id, n) DO UPDATE SET at = EXCLUDED.at,
                 status = EXCLUDED.status, error = EXCLUDED.error,
                 duration_ms = EXCLUDED.duration_ms",
            &[
                &attempt.delivery_id,
                &(attempts + 1),
                &rfc3339(attempt.at),
                &attempt.status.map(i32::from),
                &attempt
                    .error
                    .as_deref()
                    .map(|e| e.replace('\0', "\u{fffd}")),
                &i64::try_from(attempt.duration_ms).unwrap_or(i64::MAX),
            ],
        )
        .await?;
        let (state, next) = match &attempt.outcome {
            AttemptOutcome::Delivered => (DeliveryState::Delivered, None),
            AttemptOutcome::Retry(at) => (DeliveryState::Pending, Some(millis(*at))),
            AttemptOutcome::GiveUp | AttemptOutcome::Disable(_) => (DeliveryState::Failed, None),
        };
        tx.execute(
            "UPDATE webhook_deliveries SET attempts = attempts + 1, state = $2,
                 next_attempt_ms = $3, lease_until_ms = NULL WHERE id = $1",
            &[&attempt.delivery_id, &state.as_str(), &next],
        )
        .await?;
        if let AttemptOutcome::Disable(reason) = &attempt.outcome {
            let n = tx
                .execute(
                    "UPDATE webhooks SET disabled_at = $2, disabled_reason = $3
                     WHERE id = $1 AND disabled_at IS NULL",
                    &[&endpoint_id, &rfc3339(attempt.at), reason],
                )
                .await?;
            if n > 0 {
                tx.record(record::webhook_disabled(&endpoint_id, reason, "system"));
            }
        }
        let staged = tx.commit().await?;
        drop(client);
        self.sequenced(staged).await;
        Ok(())
    }

    async fn deliveries(&self, endpoint_id: &str, limit: u32) -> Result<Vec<DeliveryRecord>> {
        let client = self.client().await?;
        let rows = sql::query(
            &client,
            "SELECT id, event_kind, state, created_at, next_attempt_ms FROM webhook_deliveries
             WHERE endpoint_id = $1 ORDER BY seq DESC LIMIT $2",
            &[&endpoint_id, &i64::from(limit)],
        )
        .await?;
        let ids: Vec<String> = rows
            .iter()
            .map(|r| col::<String>(r, 0))
            .collect::<Result<_>>()?;
        let attempt_rows = sql::query(
            &client,
            "SELECT delivery_id, at, status, error, duration_ms FROM webhook_attempts
             WHERE delivery_id = ANY($1) ORDER BY delivery_id, n",
            &[&ids],
        )
        .await?;
        let mut attempts: std::collections::HashMap<String, Vec<AttemptRecord>> =
            std::collections::HashMap::new();
        for row in &attempt_rows {
            let id: String = col(row, 0)?;
            let what = format!("webhook delivery {id}");
            let record = AttemptRecord {
                at: parse_time(&what, &col::<String>(row, 1)?)?,
                status: col::<Option<i32>>(row, 2)?.and_then(|s| u16::try_from(s).ok()),
                error: col(row, 3)?,
                duration_ms: u64::try_from(col::<i64>(row, 4)?).unwrap_or_default(),
            };
            attempts.entry(id).or_default().push(record);
        }
        rows.iter()
            .map(|row| {
                let id: String = col(row, 0)?;
                let what = format!("webhook delivery {id}");
                let state = DeliveryState::parse(&col::<String>(row, 2)?)
                    .ok_or_else(|| corrupt(&what, "unknown state"))?;
                let next: Option<i64> = col(row, 4)?;
                Ok(DeliveryRecord {
                    event_kind: col(row, 1)?,
                    created_at: parse_time(&what, &col::<String>(row, 3)?)?,
                    next_attempt_at: match (state, next) {
                        (DeliveryState::Pending, Some(ms)) => Some(from_millis(&what, ms)?),
                        _ => None,
                    },
                    attempts: attempts.remove(&id).unwrap_or_default(),
                    state,
                    id,
                })
            })
            .collect()
    }

    async fn next_delivery_at(&self) -> Result<Option<OffsetDateTime>> {
        let client = self.client().await?;
        let row = sql::query_one(
            &client,
            "SELECT min(greatest(d.next_attempt_ms, coalesce(d.lease_until_ms, 0)))
             FROM webhook_deliveries d JOIN webhooks w ON w.id = d.endpoint_id
             WHERE d.state = 'pending' AND w.disabled_at IS NULL",
            &[],
        )
        .await?;
        col::<Option<i64>>(&row, 0)?
            .map(|ms| from_millis("webhook deliveries", ms))
            .transpose()
    }

    async fn prune_deliveries(&self, before: OffsetDateTime) -> Result<u64> {
        let mut client = self.client().await?;
        let tx = Tx::begin(&mut client).await?;
        tx.execute(
            "DELETE FROM webhook_attempts WHERE delivery_id IN (SELECT id FROM
             webhook_deliveries WHERE state <> 'pending' AND created_at_ms < $1)",
            &[&millis(before)],
        )
        .await?;
        let n = tx
            .execute(
                "DELETE FROM webhook_deliveries WHERE state <> 'pending' AND created_at_ms < $1",
                &[&millis(before)],
            )
            .await?;
        tx.commit().await?;
        Ok(n)
    }

    async fn set_message_ref(
        &self,
        endpoint_id: &str,
        interaction_id: &str,
        r: &str,
    ) -> Result<()> {
        let client = self.client().await?;
        sql::execute(
            &client,
            "INSERT INTO message_refs (endpoint_id, interaction_id, message_ref)
             VALUES ($1, $2, $3)
             ON CONFLICT (endpoint_id, interaction_id) DO UPDATE
                 SET message_ref = EXCLUDED.message_ref",
            &[&endpoint_id, &interaction_id, &r],
        )
        .await?;
        Ok(())
    }

    async fn message_ref(&self, endpoint_id: &str, interaction_id: &str) -> Result<Option<String>> {
        let client = self.client().await?;
        sql::query_opt(
            &client,
            "SELECT message_ref FROM message_refs WHERE endpoint_id = $1 AND interaction_id = $2",
            &[&endpoint_id, &interaction_id],
        )
        .await?
        .map(|row| col(&row, 0))
        .transpose()
    }

    async fn remind(&self, interaction_id: &str, n: u32, data: serde_json::Value) -> Result<bool> {
        let mut client = self.client().await?;
        let mut tx = Tx::begin(&mut client).await?;
        if !notice_once(&tx, interaction_id, n).await? {
            tx.rollback().await?;
            return Ok(false);
        }
        tx.record(record::reminded(data));
        let staged = tx.commit().await?;
        drop(client);
        self.sequenced(staged).await;
        Ok(true)
    }

    async fn escalate_once(&self, interaction_id: &str, data: serde_json::Value) -> Result<bool> {
        let mut client = self.client().await?;
        let mut tx = Tx::begin(&mut client).await?;
        // Notice 0 is the escalation: reminders count from 1.
        if !notice_once(&tx, interaction_id, 0).await? {
            tx.rollback().await?;
            return Ok(false);
        }
        tx.record(record::escalated_once(data));
        let staged = tx.commit().await?;
        drop(client);
        self.sequenced(staged).await;
        Ok(true)
    }
}

/// Record notice `n` of `interaction_id` (a reminder, or 0 for the
/// escalation) inside the open transaction: true when it is pending and the
/// notice was not recorded before. The row lock orders this against an
/// answer's compare-and-set.
async fn notice_once(tx: &Tx<'_>, interaction_id: &str, n: u32) -> Result<bool> {
    let pending = tx
        .query_opt(
            "SELECT 1 FROM interactions WHERE id = $1 AND status = 'pending' FOR UPDATE",
            &[&interaction_id],
        )
        .await?
        .is_some();
    Ok(pending
        && tx
            .execute(
                "INSERT INTO reminders (interaction_id, n, at) VALUES ($1, $2, $3)
                 ON CONFLICT DO NOTHING",
                &[
                    &interaction_id,
                    &i32::try_from(n).unwrap_or(i32::MAX),
                    &rfc3339(OffsetDateTime::now_utc()),
                ],
            )
            .await?
            == 1)
}
