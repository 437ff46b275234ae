//! The operators' relay ([`OperatorStore`]) in PostgreSQL: the messages
//! waiting for a session's operator (`operator_requests`), where each
//! session's operator is connected (`operator_presence`), and a signal per
//! change on channel `lev_operators` (`pg_notify` in the changing
//! transaction, so it is delivered on commit, to every server's listener).
//!
//! A reply and a withdrawal are both `UPDATE ... WHERE state = 'pending'`
//! on the row: whichever commits first wins, the other finds it resolved.
//! Resolved rows are kept an hour, so a late reply is told
//! `already_resolved`, then pruned as new messages are posted.

use async_trait::async_trait;
use lev_store::{
    OperatorPresence, OperatorReply, OperatorRequest, OperatorSignal, OperatorStore,
    ResolveOutcome, Result, WithdrawOutcome,
};
use serde_json::{Value, json};
use time::OffsetDateTime;
use tokio::sync::broadcast;
use tokio_postgres::Row;

use crate::PostgresStore;
use crate::sql::{Tx, col, corrupt, millis, parse_time, query, query_opt, rfc3339};

/// How long a resolved message is remembered.
const KEEP_RESOLVED_MS: i64 = 3_600_000;
/// A notification's payload must stay under PostgreSQL's 8000 bytes.
const MAX_PAYLOAD: usize = 7900;

/// A signal as the `lev_operators` payload.
fn encode(signal: &OperatorSignal) -> String {
    match signal {
        OperatorSignal::Posted { session_id, req_id } => {
            json!({"k": "posted", "s": session_id, "r": req_id})
        }
        OperatorSignal::Resolved { session_id, req_id } => {
            json!({"k": "resolved", "s": session_id, "r": req_id})
        }
        OperatorSignal::Presence { session_id } => json!({"k": "presence", "s": session_id}),
        OperatorSignal::Notice { session_id, frame } => {
            json!({"k": "notice", "s": session_id, "f": frame})
        }
    }
    .to_string()
}

/// A `lev_operators` payload as a signal (`None` when it is not one).
pub(crate) fn decode(payload: &str) -> Option<OperatorSignal> {
    let v: Value = serde_json::from_str(payload).ok()?;
    let s = v["s"].as_str()?.to_owned();
    let r = || v["r"].as_str().map(str::to_owned);
    Some(match v["k"].as_str()? {
        "posted" => OperatorSignal::Posted {
            session_id: s,
            req_id: r()?,
        },
        "resolved" => OperatorSignal::Resolved {
            session_id: s,
            req_id: r()?,
        },
        "presence" => OperatorSignal::Presence { session_id: s },
        "notice" => OperatorSignal::Notice {
            session_id: s,
            frame: v["f"].as_str()?.to_owned(),
        },
        _ => return None,
    })
}

async fn notify(tx: &Tx<'_>, signal: &OperatorSignal) -> Result<()> {
    let payload = encode(signal);
    tx.execute("SELECT pg_notify('lev_operators', $1)", &[&payload])
        .await
        .map(drop)
}

fn request_of(row: &Row) -> Result<OperatorRequest> {
    let posted_at: String = col(row, 4)?;
    Ok(OperatorRequest {
        req_id: col(row, 0)?,
        session_id: col(row, 1)?,
        reply_type: col(row, 2)?,
        frame: col(row, 3)?,
        posted_at: parse_time("operator request", &posted_at)?,
    })
}

const REQUEST_COLUMNS: &str = "req_id, session_id, reply_type, frame, posted_at";

fn reply_of(
    req_id: &str,
    json: Option<String>,
    by: Option<String>,
) -> Result<Option<OperatorReply>> {
    match (json, by) {
        (Some(json), Some(by)) => Ok(Some(OperatorReply {
            msg: serde_json::from_str(&json).map_err(|e| corrupt(req_id, e))?,
            by,
        })),
        _ => Ok(None),
    }
}

fn presence_of(session_id: &str, row: &Row) -> Result<OperatorPresence> {
    let since: String = col(row, 2)?;
    Ok(OperatorPresence {
        session_id: session_id.to_owned(),
        conn: col(row, 0)?,
        operator: col(row, 1)?,
        since: parse_time("operator presence", &since)?,
    })
}

#[async_trait]
impl OperatorStore for PostgresStore {
    fn operator_signals(&self) -> broadcast::Receiver<OperatorSignal> {
        self.inner.operators.subscribe()
    }

    async fn post_operator_request(&self, request: OperatorRequest) -> Result<()> {
        let mut client = self.client().await?;
        let tx = Tx::begin(&mut client).await?;
        let now = millis(OffsetDateTime::now_utc());
        tx.execute(
            "DELETE FROM operator_requests WHERE state <> 'pending' AND resolved_ms < $1",
            &[&(now - KEEP_RESOLVED_MS)],
        )
        .await?;
        tx.execute(
            "INSERT INTO operator_requests
                 (req_id, session_id, reply_type, frame, posted_at, posted_ms, state)
             VALUES ($1, $2, $3, $4, $5, $6, 'pending')",
            &[
                &request.req_id,
                &request.session_id,
                &request.reply_type,
                &request.frame,
                &rfc3339(request.posted_at),
                &millis(request.posted_at),
            ],
        )
        .await?;
        notify(
            &tx,
            &OperatorSignal::Posted {
                session_id: request.session_id.clone(),
                req_id: request.req_id.clone(),
            },
        )
        .await?;
        tx.commit().await?;
        Ok(())
    }

    async fn operator_request(&self, req_id: &str) -> Result<Option<OperatorRequest>> {
        let client = self.client().await?;
        query_opt(
            &client,
            &format!(
                "SELECT {REQUEST_COLUMNS} FROM operator_requests
                 WHERE req_id = $1 AND state = 'pending'"
            ),
            &[&req_id],
        )
        .await?
        .map(|row| request_of(&row))
        .transpose()
    }

    async fn pending_operator_requests(&self, session_id: &str) -> Result<Vec<OperatorRequest>> {
        let client = self.client().await?;
        query(
            &client,
            &format!(
                "SELECT {REQUEST_COLUMNS} FROM operator_requests
                 WHERE session_id = $1 AND state = 'pending' ORDER BY posted_ms, req_id"
            ),
            &[&session_id],
        )
        .await?
        .iter()
        .map(request_of)
        .collect()
    }

    async fn resolve_operator_request(
        &self,
        session_id: &str,
        req_id: &str,
        reply_type: &str,
        reply: OperatorReply,
    ) -> Result<ResolveOutcome> {
        let mut client = self.client().await?;
        let tx = Tx::begin(&mut client).await?;
        let Some(row) = tx
            .query_opt(
                "SELECT session_id, reply_type, state FROM operator_requests
                 WHERE req_id = $1 FOR UPDATE",
                &[&req_id],
            )
            .await?
        else {
            return Ok(ResolveOutcome::Unknown);
        };
        let (owner, expected, state): (String, String, String) =
            (col(&row, 0)?, col(&row, 1)?, col(&row, 2)?);
        if owner != session_id {
            return Ok(ResolveOutcome::Unknown);
        }
        if state != "pending" {
            return Ok(ResolveOutcome::AlreadyResolved);
        }
        if expected != reply_type {
            return Ok(ResolveOutcome::WrongKind(expected));
        }
        tx.execute(
            "UPDATE operator_requests
             SET state = 'replied', reply_json = $2, replied_by = $3, resolved_ms = $4
             WHERE req_id = $1",
            &[
                &req_id,
                &reply.msg.to_string(),
                &reply.by,
                &millis(OffsetDateTime::now_utc()),
            ],
        )
        .await?;
        notify(
            &tx,
            &OperatorSignal::Resolved {
                session_id: session_id.to_owned(),
                req_id: req_id.to_owned(),
            },
        )
        .await?;
        tx.commit().await?;
        Ok(ResolveOutcome::Resolved)
    }

    async fn operator_reply(&self, req_id: &str) -> Result<Option<OperatorReply>> {
        let client = self.client().await?;
        let Some(row) = query_opt(
            &client,
            "SELECT reply_json, replied_by FROM operator_requests
             WHERE req_id = $1 AND state = 'replied'",
            &[&req_id],
        )
        .await?
        else {
            return Ok(None);
        };
        reply_of(req_id, col(&row, 0)?, col(&row, 1)?)
    }

    async fn withdraw_operator_request(&self, req_id: &str) -> Result<WithdrawOutcome> {
        let mut client = self.client().await?;
        let tx = Tx::begin(&mut client).await?;
        let Some(row) = tx
            .query_opt(
                "SELECT session_id, state, reply_json, replied_by FROM operator_requests
                 WHERE req_id = $1 FOR UPDATE",
                &[&req_id],
            )
            .await?
        else {
            return Ok(WithdrawOutcome::Gone);
        };
        let (session_id, state): (String, String) = (col(&row, 0)?, col(&row, 1)?);
        match state.as_str() {
            "pending" => {}
            "replied" => {
                return Ok(reply_of(req_id, col(&row, 2)?, col(&row, 3)?)?
                    .map_or(WithdrawOutcome::Gone, WithdrawOutcome::Replied));
            }
            _ => return Ok(WithdrawOutcome::Gone),
        }
        tx.execute(
            "UPDATE operator_requests SET state = 'withdrawn', resolved_ms = $2 WHERE req_id = $1",
            &[&req_id, &millis(OffsetDateTime::now_utc())],
        )
        .await?;
        notify(
            &tx,
            &OperatorSignal::Resolved {
                session_id,
                req_id: req_id.to_owned(),
            },
        )
        .await?;
        tx.commit().await?;
        Ok(WithdrawOutcome::Withdrawn)
    }

    async fn connect_operator(
        &self,
        session_id: &str,
        conn: &str,
        operator: &str,
    ) -> Result<Option<OperatorPresence>> {
        let mut client = self.client().await?;
        let tx = Tx::begin(&mut client).await?;
        tx.lock(&format!("lev:operator:{session_id}")).await?;
        let previous = tx
            .query_opt(
                "SELECT conn, operator, since FROM operator_presence WHERE session_id = $1",
                &[&session_id],
            )
            .await?
            .map(|row| presence_of(session_id, &row))
            .transpose()?;
        tx.execute(
            "INSERT INTO operator_presence (session_id, conn, operator, since)
             VALUES ($1, $2, $3, $4)
             ON CONFLICT (session_id) DO UPDATE
                 SET conn = EXCLUDED.conn, operator = EXCLUDED.operator, since = EXCLUDED.since",
            &[
                &session_id,
                &conn,
                &operator,
                &rfc3339(OffsetDateTime::now_utc()),
            ],
        )
        .await?;
        notify(
            &tx,
            &OperatorSignal::Presence {
                session_id: session_id.to_owned(),
            },
        )
        .await?;
        tx.commit().await?;
        Ok(previous)
    }

    async fn disconnect_operator(&self, session_id: &str, conn: &str) -> Result<bool> {
        let mut client = self.client().await?;
        let tx = Tx::begin(&mut client).await?;
        let n = tx
            .execute(
                "UPDATE operator_presence SET conn = NULL, since = $3
                 WHERE session_id = $1 AND conn = $2",
                &[&session_id, &conn, &rfc3339(OffsetDateTime::now_utc())],
            )
            .await?;
        if n == 1 {
            notify(
                &tx,
                &OperatorSignal::Presence {
                    session_id: session_id.to_owned(),
                },
            )
            .await?;
        }
        tx.commit().await?;
        Ok(n == 1)
    }

    async fn operator_presence(&self, session_id: &str) -> Result<Option<OperatorPresence>> {
        let client = self.client().await?;
        query_opt(
            &client,
            "SELECT conn, operator, since FROM operator_presence WHERE session_id = $1",
            &[&session_id],
        )
        .await?
        .map(|row| presence_of(session_id, &row))
        .transpose()
    }

    async fn notify_operator(&self, session_id: &str, frame: String) -> Result<()> {
        let signal = OperatorSignal::Notice {
            session_id: session_id.to_owned(),
            frame,
        };
        if encode(&signal).len() > MAX_PAYLOAD {
            // Too long to relay: a notice is an error frame about a reply,
            // and the reply's fate reaches its waiter anyway.
            return Ok(());
        }
        let mut client = self.client().await?;
        let tx = Tx::begin(&mut client).await?;
        notify(&tx, &signal).await?;
        tx.commit().await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn signals_round_trip_through_their_payload() {
        for signal in [
            OperatorSignal::Posted {
                session_id: "s".into(),
                req_id: "r".into(),
            },
            OperatorSignal::Resolved {
                session_id: "s".into(),
                req_id: "r".into(),
            },
            OperatorSignal::Presence {
                session_id: "s".into(),
            },
            OperatorSignal::Notice {
                session_id: "s".into(),
                frame: "{\"type\":\"error\"}".into(),
            },
        ] {
            assert_eq!(decode(&encode(&signal)), Some(signal));
        }
        assert_eq!(decode("not json"), None);
        assert_eq!(decode("{\"k\":\"posted\",\"s\":\"x\"}"), None);
    }
}
