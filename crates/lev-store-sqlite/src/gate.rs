//! The gate's tables in SQLite (migration 2): `gate_calls`, `grants`,
//! `nonces`; and `nonce_owners` (migration 8).

use async_trait::async_trait;
use lev_protocol::api::{GateResponse, Grant};
use rusqlite::{Connection, OptionalExtension as _, Row, params};
use serde_json::Value;
use time::OffsetDateTime;

use crate::writer::{Tx, rfc3339};
use crate::{SqliteStore, corrupt, load_view, millis};
use lev_store::gate::{
    GateCallRecord, GateRecordOutcome, GateSigner, GateStore, NewGateDecision, NewGrant, NewVote,
    NonceOutcome, NonceOwner, VoteAuthority, VoteOutcome,
};
use lev_store::record::{self, AuditAction, GATE_COLUMNS, GRANT_COLUMNS};
use lev_store::{NewInteraction, TransitionOutcome};

use crate::{Cols, Result, write_change};

/// Note whose approval `approval`'s nonce is (its session and caller), in
/// the transaction that stores it; nothing for a denial.
pub(crate) fn note_nonce(
    tx: &mut Tx<'_>,
    approval: &lev_protocol::Envelope,
    session_id: &str,
) -> Result<()> {
    if let Some(payload) = lev_approval::approving_payload(approval) {
        tx.conn
            .prepare_cached(
                "INSERT INTO nonce_owners (nonce, session_id, caller) VALUES (?1, ?2, ?3)
                 ON CONFLICT (nonce) DO NOTHING",
            )?
            .execute(params![payload.nonce, session_id, payload.caller])?;
    }
    Ok(())
}

/// Whether every token of `authority` exists with a role that votes and
/// every key of it is in force, read in the open transaction.
fn authority_holds(conn: &Connection, authority: &VoteAuthority) -> Result<bool> {
    for name in &authority.tokens {
        let role: Option<String> = conn
            .prepare_cached("SELECT role FROM tokens WHERE name = ?1")?
            .query_row([name], |r| r.get(0))
            .optional()?;
        if !role.is_some_and(|r| record::role_votes(&r)) {
            return Ok(false);
        }
    }
    for kid in &authority.keys {
        let found = conn
            .prepare_cached("SELECT 1 FROM people_keys WHERE kid = ?1 AND revoked_at IS NULL")?
            .query_row([kid], |_| Ok(()))
            .optional()?;
        if found.is_none() {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Void the votes `void` strikes out on every pending interaction, inside
/// the open transaction (a revocation's): each changed interaction's
/// `interaction.voted` event, and the voided votes for the audit entry.
pub(crate) fn void_pending_votes(
    tx: &mut Tx<'_>,
    void: impl Fn(&lev_protocol::Vote) -> bool,
) -> Result<Vec<Value>> {
    let ids: Vec<String> = {
        let mut stmt = tx.conn.prepare_cached(
            "SELECT id FROM interactions WHERE status = 'pending' \
             AND votes_json IS NOT NULL AND votes_json <> '[]' ORDER BY seq",
        )?;
        let rows = stmt.query_map([], |r| r.get(0))?;
        rows.collect::<rusqlite::Result<_>>()?
    };
    let mut all = Vec::new();
    for id in ids {
        let Some(view) = load_view(tx.conn, &id)? else {
            continue;
        };
        let (kept, voided) = lev_store::void_votes(&id, &view.request.votes, &void);
        if voided.is_empty() {
            continue;
        }
        let text = serde_json::to_string(&kept).map_err(|e| corrupt(&id, e))?;
        tx.conn
            .prepare_cached("UPDATE interactions SET votes_json = ?2 WHERE id = ?1")?
            .execute(params![id, text])?;
        let after = load_view(tx.conn, &id)?.ok_or_else(|| corrupt(&id, "vanished"))?;
        write_change(tx, record::votes_voided(&after)?)?;
        all.extend(voided);
    }
    Ok(all)
}

fn gate_from_row(row: &Row<'_>) -> Result<GateCallRecord> {
    Ok(record::decode_gate_call(&Cols(row))?)
}

fn load_gate(
    conn: &Connection,
    session_id: &str,
    request_id: &str,
) -> Result<Option<GateCallRecord>> {
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT {GATE_COLUMNS} FROM gate_calls WHERE session_id = ?1 AND request_id = ?2"
    ))?;
    let mut rows = stmt.query(params![session_id, request_id])?;
    match rows.next()? {
        Some(row) => Ok(Some(gate_from_row(row)?)),
        None => Ok(None),
    }
}

fn grant_from_row(row: &Row<'_>) -> Result<Grant> {
    Ok(record::decode_grant(&Cols(row))?)
}

fn collect_grants(mut rows: rusqlite::Rows<'_>) -> Result<Vec<Grant>> {
    let mut out = Vec::new();
    while let Some(row) = rows.next()? {
        out.push(grant_from_row(row)?);
    }
    Ok(out)
}

/// Open a new interaction inside the gate's transaction (the gate's ids are
/// fresh, so there is no idempotent replay to handle here).
fn insert_interaction(
    tx: &mut Tx<'_>,
    new: &NewInteraction,
) -> Result<Option<lev_protocol::api::InteractionView>> {
    let i = &new.interaction;
    let id = i.id().to_owned();
    let pending: i64 = tx.conn.query_row(
        "SELECT COUNT(*) FROM interactions WHERE session_id = ?1 AND status = 'pending'",
        [&i.request.session_id],
        |r| r.get(0),
    )?;
    if u64::try_from(pending).unwrap_or(u64::MAX) >= new.max_pending_per_session {
        return Ok(None);
    }
    let request_json = serde_json::to_string(&i.request).map_err(|e| corrupt(&id, e))?;
    tx.conn.prepare_cached(
        "INSERT INTO interactions (id, session_id, request_json, status, created_at, expires_at, expires_at_ms)
         VALUES (?1, ?2, ?3, 'pending', ?4, ?5, ?6)",
    )?.execute(
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
    Ok(Some(view))
}

fn insert_grant(tx: &mut Tx<'_>, new: &NewGrant) -> Result<()> {
    let g = &new.grant;
    let (covered, grant_args) = record::grant_json(g)?;
    // One grant per key: the same approval again renews the grant in force
    // (its approver, interaction and time) rather than adding a twin.
    let twin: Option<String> = tx
        .conn
        .query_row(
            "SELECT id FROM grants WHERE revoked_at IS NULL AND scope = ?1 AND caller = ?2
               AND conversation_id IS ?3 AND sandbox_mode = ?4 AND tool_name = ?5
               AND covered_json = ?6 AND grant_args_json IS ?7
             ORDER BY seq LIMIT 1",
            params![
                g.scope.as_str(),
                g.caller,
                g.conversation_id,
                g.sandbox_mode,
                g.tool_name,
                covered,
                grant_args
            ],
            |row| row.get(0),
        )
        .map(Some)
        .or_else(|e| match e {
            rusqlite::Error::QueryReturnedNoRows => Ok(None),
            e => Err(e),
        })?;
    if let Some(twin) = twin {
        tx.conn.execute(
            "UPDATE grants SET approver = ?2, interaction_id = ?3, created_at = ?4 WHERE id = ?1",
            params![twin, g.approver, g.interaction_id, rfc3339(g.created_at)],
        )?;
        let mut renewed = g.clone();
        renewed.id = twin;
        write_change(
            tx,
            record::grant_changed(AuditAction::GrantRenewed, &renewed, &new.actor)?,
        )?;
        return Ok(());
    }
    tx.conn.execute(
        &format!("INSERT INTO grants ({GRANT_COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)"),
        params![
            g.id,
            g.scope.as_str(),
            g.caller,
            g.conversation_id,
            g.sandbox_mode,
            g.tool_name,
            covered,
            grant_args,
            g.approver,
            g.interaction_id,
            rfc3339(g.created_at)
        ],
    )?;
    write_change(
        tx,
        record::grant_changed(AuditAction::GrantCreated, g, &new.actor)?,
    )?;
    Ok(())
}

#[async_trait]
impl GateStore for SqliteStore {
    async fn record_gate_decision(
        &self,
        new: NewGateDecision,
        sign: GateSigner,
    ) -> lev_store::Result<GateRecordOutcome> {
        let created_at = rfc3339(new.created_at);
        self.writer
            .write(move |tx| {
                let NewGateDecision {
                    session_id,
                    request_id,
                    call,
                    created_at: at,
                    interaction,
                    mut audit,
                } = new;
                // Look for a replay first, so a retry signs nothing and
                // never opens a second interaction (nor hits the pending
                // limit).
                if let Some(existing) = load_gate(tx.conn, &session_id, &request_id)? {
                    return Ok(if existing.call == call {
                        GateRecordOutcome::Existing(Box::new(existing))
                    } else {
                        GateRecordOutcome::Conflict(Box::new(existing))
                    });
                }
                let opened = match &interaction {
                    Some(i) => match insert_interaction(tx, i)? {
                        Some(view) => Some(Box::new(view)),
                        None => return Ok(GateRecordOutcome::TooManyPending),
                    },
                    None => None,
                };
                let decision = sign(&mut audit)?;
                let record = GateCallRecord {
                    session_id,
                    request_id,
                    call,
                    decision,
                    created_at: at,
                };
                let call_json = record.call.to_string();
                let decision_json = serde_json::to_string(&record.decision)
                    .map_err(|e| corrupt(&record.request_id, e))?;
                let interaction_id = match &record.decision {
                    GateResponse::Ask { interaction_id } => Some(interaction_id.as_str()),
                    _ => None,
                };
                // The key is free: the one writer looked above, in this
                // same transaction.
                tx.conn
                    .prepare_cached(
                        "INSERT INTO gate_calls (session_id, request_id, call_json, decision_json, interaction_id, created_at)
                         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                    )?
                    .execute(params![
                        record.session_id,
                        record.request_id,
                        call_json,
                        decision_json,
                        interaction_id,
                        created_at
                    ])?;
                if let GateResponse::Allow { approval } = &record.decision {
                    note_nonce(tx, approval, &record.session_id)?;
                }
                tx.audit(audit)?;
                Ok(GateRecordOutcome::Recorded {
                    record: Box::new(record),
                    interaction: opened,
                })
            })
            .await
    }

    async fn gate_call_by_interaction(
        &self,
        interaction_id: &str,
    ) -> lev_store::Result<Option<GateCallRecord>> {
        let id = interaction_id.to_owned();
        self.read(move |conn| {
            let mut stmt = conn.prepare_cached(&format!(
                "SELECT {GATE_COLUMNS} FROM gate_calls WHERE interaction_id = ?1"
            ))?;
            let mut rows = stmt.query([&id])?;
            match rows.next()? {
                Some(row) => Ok(Some(gate_from_row(row)?)),
                None => Ok(None),
            }
        })
        .await
    }

    async fn cast_vote(&self, new: NewVote) -> lev_store::Result<VoteOutcome> {
        self.writer
            .write(move |tx| {
                let view = match crate::precheck(load_view(tx.conn, &new.id)?) {
                    Ok(view) => view,
                    Err(closed) => return Ok(VoteOutcome::Closed(closed)),
                };
                // The authority is read only when the rest would record it.
                if let Some(refused) = record::vote_refused(&view, &new, true) {
                    return Ok(refused);
                }
                if !authority_holds(tx.conn, &new.authority)? {
                    return Ok(VoteOutcome::Stale(Box::new(view)));
                }
                let mut all = view.request.votes.clone();
                all.push(new.vote.clone());
                let text = serde_json::to_string(&all).map_err(|e| corrupt(&new.id, e))?;
                tx.conn
                    .prepare_cached(
                        "UPDATE interactions SET votes_json = ?2 WHERE id = ?1 AND status = 'pending'",
                    )?
                    .execute(params![new.id, text])?;
                let voted = load_view(tx.conn, &new.id)?
                    .ok_or_else(|| corrupt(&new.id, "vanished during its own vote"))?;
                write_change(tx, record::interaction_voted(&voted, &new)?)?;
                let Some((answer, grant)) = new.decision else {
                    return Ok(VoteOutcome::Recorded(Box::new(voted)));
                };
                match crate::answer_in(tx, answer)? {
                    TransitionOutcome::Done(decided) => {
                        if let Some(grant) = &grant {
                            insert_grant(tx, grant)?;
                        }
                        Ok(VoteOutcome::Recorded(decided))
                    }
                    other => Ok(VoteOutcome::Closed(other)),
                }
            })
            .await
    }

    async fn grants_for(
        &self,
        caller: &str,
        conversation_id: &str,
        sandbox_mode: &str,
        tool_name: &str,
    ) -> lev_store::Result<Vec<Grant>> {
        let key = (
            caller.to_owned(),
            conversation_id.to_owned(),
            sandbox_mode.to_owned(),
            tool_name.to_owned(),
        );
        self.read(move |conn| {
            let mut stmt = conn.prepare_cached(&format!(
                "SELECT {GRANT_COLUMNS} FROM grants
                 WHERE caller = ?1 AND tool_name = ?4 AND sandbox_mode = ?3 AND revoked_at IS NULL
                   AND (conversation_id IS NULL OR conversation_id = ?2)
                 ORDER BY seq"
            ))?;
            collect_grants(stmt.query(params![key.0, key.1, key.2, key.3])?)
        })
        .await
    }

    async fn list_grants(&self) -> lev_store::Result<Vec<Grant>> {
        self.read(|conn| {
            let mut stmt = conn.prepare_cached(&format!(
                "SELECT {GRANT_COLUMNS} FROM grants WHERE revoked_at IS NULL ORDER BY seq"
            ))?;
            collect_grants(stmt.query([])?)
        })
        .await
    }

    async fn revoke_grant(&self, id: &str, actor: &str) -> lev_store::Result<Option<Grant>> {
        let (id, actor) = (id.to_owned(), actor.to_owned());
        self.writer
            .write(move |tx| {
                let grant = {
                    let mut stmt = tx.conn.prepare_cached(&format!(
                        "SELECT {GRANT_COLUMNS} FROM grants WHERE id = ?1 AND revoked_at IS NULL"
                    ))?;
                    let mut rows = stmt.query([&id])?;
                    match rows.next()? {
                        Some(row) => grant_from_row(row)?,
                        None => return Ok(None),
                    }
                };
                tx.conn.execute(
                    "UPDATE grants SET revoked_at = ?2, revoked_by = ?3 WHERE id = ?1",
                    params![id, rfc3339(OffsetDateTime::now_utc()), actor],
                )?;
                write_change(
                    tx,
                    record::grant_changed(AuditAction::GrantRevoked, &grant, &actor)?,
                )?;
                Ok(Some(grant))
            })
            .await
    }

    async fn consume_nonce(&self, nonce: &str, actor: &str) -> lev_store::Result<NonceOutcome> {
        // Remembered by its bytes: every spelling of a spent nonce is spent.
        let (nonce, actor) = (lev_approval::nonce_key(nonce), actor.to_owned());
        self.writer
            .write(move |tx| {
                let n = tx
                    .conn
                    .prepare_cached(
                        "INSERT INTO nonces (nonce, spent_at, spent_by) VALUES (?1, ?2, ?3)
                         ON CONFLICT (nonce) DO NOTHING",
                    )?
                    .execute(params![nonce, rfc3339(OffsetDateTime::now_utc()), actor])?;
                Ok(if n == 1 {
                    NonceOutcome::Spent
                } else {
                    NonceOutcome::AlreadySpent
                })
            })
            .await
    }

    async fn nonce_owner(&self, nonce: &str) -> lev_store::Result<Option<NonceOwner>> {
        let nonce = nonce.to_owned();
        self.read(move |conn| {
            Ok(conn
                .prepare_cached("SELECT session_id, caller FROM nonce_owners WHERE nonce = ?1")?
                .query_row([&nonce], |r| {
                    Ok(NonceOwner {
                        session_id: r.get(0)?,
                        caller: r.get(1)?,
                    })
                })
                .optional()?)
        })
        .await
    }
}
