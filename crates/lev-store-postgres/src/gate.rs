//! The gate's tables: `gate_calls`, `grants`, `nonces`, `nonce_owners`.

use async_trait::async_trait;
use lev_protocol::api::{GateResponse, Grant};
use serde_json::Value;
use time::OffsetDateTime;
use tokio_postgres::Row;

use crate::sql::{Cols, Tx, col, corrupt, rfc3339};
use crate::{
    InsertOutcome, PostgresStore, VIEW_COLUMNS, answer_in, insert_interaction, session_lock, sql,
    view_from_row,
};
use lev_protocol::api::InteractionView;
use lev_store::gate::{
    GateCallRecord, GateRecordOutcome, GateSigner, GateStore, NewGateDecision, NewGrant, NewVote,
    NonceOutcome, NonceOwner, VoteAuthority, VoteOutcome,
};
use lev_store::record::{self, AuditAction, GATE_COLUMNS, GRANT_COLUMNS};
use lev_store::{NewInteraction, Result, TransitionOutcome};

/// Note whose approval `approval`'s nonce is (its session and caller), in
/// the transaction that stores it; nothing for a denial.
pub(crate) async fn note_nonce(
    tx: &Tx<'_>,
    approval: &lev_protocol::Envelope,
    session_id: &str,
) -> Result<()> {
    if let Some(payload) = lev_approval::approving_payload(approval) {
        tx.execute(
            "INSERT INTO nonce_owners (nonce, session_id, caller) VALUES ($1, $2, $3)
             ON CONFLICT (nonce) DO NOTHING",
            &[&payload.nonce, &session_id, &payload.caller],
        )
        .await?;
    }
    Ok(())
}

/// Whether every token of `authority` exists with a role that votes and
/// every key of it is in force. Each row is read `FOR SHARE`, before the
/// interaction's row is locked: a revocation (which changes these rows
/// first, then the interactions) either commits before and is seen, or
/// waits for this vote and then voids it; and both take the locks in the
/// same order, so neither waits for the other in a circle.
async fn authority_holds(tx: &Tx<'_>, authority: &VoteAuthority) -> Result<bool> {
    let mut tokens: Vec<&String> = authority.tokens.iter().collect();
    tokens.sort();
    tokens.dedup();
    for name in tokens {
        let row = tx
            .query_opt("SELECT role FROM tokens WHERE name = $1 FOR SHARE", &[name])
            .await?;
        let role = row.as_ref().map(|r| col::<String>(r, 0)).transpose()?;
        if !role.is_some_and(|r| record::role_votes(&r)) {
            return Ok(false);
        }
    }
    let mut keys: Vec<&String> = authority.keys.iter().collect();
    keys.sort();
    keys.dedup();
    for kid in keys {
        let row = tx
            .query_opt(
                "SELECT 1 FROM people_keys WHERE kid = $1 AND revoked_at IS NULL FOR SHARE",
                &[kid],
            )
            .await?;
        if row.is_none() {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Void the votes `void` strikes out on every pending interaction, inside
/// the open transaction (a revocation's, after it changed the token or key
/// rows): each changed interaction's `interaction.voted` event, and the
/// voided votes for the audit entry.
pub(crate) async fn void_pending_votes(
    tx: &mut Tx<'_>,
    void: impl Fn(&lev_protocol::Vote) -> bool,
) -> Result<Vec<Value>> {
    let rows = tx
        .query(
            &format!(
                "SELECT {VIEW_COLUMNS} FROM interactions WHERE status = 'pending'
                 AND votes_json IS NOT NULL AND votes_json <> '[]' ORDER BY id FOR UPDATE"
            ),
            &[],
        )
        .await?;
    let mut all = Vec::new();
    for row in rows {
        let (_, view) = view_from_row(&row)?;
        let id = view.request.id().to_owned();
        let (kept, voided) = lev_store::void_votes(&id, &view.request.votes, &void);
        if voided.is_empty() {
            continue;
        }
        let text = serde_json::to_string(&kept).map_err(|e| corrupt(&id, e))?;
        let row = tx
            .query_one(
                &format!(
                    "UPDATE interactions SET votes_json = $2 WHERE id = $1 RETURNING {VIEW_COLUMNS}"
                ),
                &[&id, &text],
            )
            .await?;
        let (_, after) = view_from_row(&row)?;
        tx.record(record::votes_voided(&after)?);
        all.extend(voided);
    }
    Ok(all)
}

fn gate_from_row(row: &Row) -> Result<GateCallRecord> {
    record::decode_gate_call(&Cols(row))
}

async fn load_gate(
    tx: &Tx<'_>,
    session_id: &str,
    request_id: &str,
) -> Result<Option<GateCallRecord>> {
    tx.query_opt(
        &format!("SELECT {GATE_COLUMNS} FROM gate_calls WHERE session_id = $1 AND request_id = $2"),
        &[&session_id, &request_id],
    )
    .await?
    .as_ref()
    .map(gate_from_row)
    .transpose()
}

fn grant_from_row(row: &Row) -> Result<Grant> {
    record::decode_grant(&Cols(row))
}

async fn insert_grant(tx: &mut Tx<'_>, new: &NewGrant) -> Result<()> {
    let g = &new.grant;
    let (covered, grant_args) = record::grant_json(g)?;
    // One grant per key, also when two approvals of it commit at once on
    // two servers: look for the twin under a lock on the key.
    let key = serde_json::json!([
        g.scope.as_str(),
        g.caller,
        g.conversation_id,
        g.sandbox_mode,
        g.tool_name,
        covered,
        grant_args
    ]);
    tx.lock(&format!("lev:grant:{key}")).await?;
    // The same approval again renews the grant in force (its approver,
    // interaction and time) rather than adding a twin.
    let twin = tx
        .query_opt(
            "SELECT id FROM grants WHERE revoked_at IS NULL AND scope = $1 AND caller = $2
               AND conversation_id IS NOT DISTINCT FROM $3 AND sandbox_mode = $4 AND tool_name = $5
               AND covered_json = $6 AND grant_args_json IS NOT DISTINCT FROM $7
             ORDER BY seq LIMIT 1",
            &[
                &g.scope.as_str(),
                &g.caller,
                &g.conversation_id,
                &g.sandbox_mode,
                &g.tool_name,
                &covered,
                &grant_args,
            ],
        )
        .await?;
    if let Some(twin) = twin {
        let twin: String = col(&twin, 0)?;
        tx.execute(
            "UPDATE grants SET approver = $2, interaction_id = $3, created_at = $4 WHERE id = $1",
            &[
                &twin,
                &g.approver,
                &g.interaction_id,
                &rfc3339(g.created_at),
            ],
        )
        .await?;
        let mut renewed = g.clone();
        renewed.id = twin;
        tx.record(record::grant_changed(
            AuditAction::GrantRenewed,
            &renewed,
            &new.actor,
        )?);
        return Ok(());
    }
    tx.execute(
        &format!(
            "INSERT INTO grants ({GRANT_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)"
        ),
        &[
            &g.id,
            &g.scope.as_str(),
            &g.caller,
            &g.conversation_id,
            &g.sandbox_mode,
            &g.tool_name,
            &covered,
            &grant_args,
            &g.approver,
            &g.interaction_id,
            &rfc3339(g.created_at),
        ],
    )
    .await?;
    tx.record(record::grant_changed(
        AuditAction::GrantCreated,
        g,
        &new.actor,
    )?);
    Ok(())
}

/// Take the advisory locks of the idempotency key's session and the new
/// interaction's, in one order (they are the same in practice).
async fn lock_sessions(
    tx: &Tx<'_>,
    session_id: &str,
    interaction: Option<&NewInteraction>,
) -> Result<()> {
    let mut sessions = vec![session_id];
    if let Some(i) = interaction {
        sessions.push(i.interaction.request.session_id.as_str());
    }
    sessions.sort_unstable();
    sessions.dedup();
    for session in sessions {
        tx.lock(&session_lock(session)).await?;
    }
    Ok(())
}

/// Open the interaction an ask opens, inside the gate's transaction (its
/// session locked): the view, or `Err` with the outcome when the session
/// is at its limit.
async fn open_interaction(
    tx: &mut Tx<'_>,
    new: &NewInteraction,
) -> Result<std::result::Result<Box<InteractionView>, GateRecordOutcome>> {
    let request_json = serde_json::to_string(&new.interaction.request)
        .map_err(|e| corrupt(new.interaction.id(), e))?;
    match insert_interaction(tx, new, &request_json).await? {
        InsertOutcome::Created(view) => Ok(Ok(view)),
        InsertOutcome::TooManyPending => Ok(Err(GateRecordOutcome::TooManyPending)),
        InsertOutcome::IdTaken => Err(corrupt(
            new.interaction.id(),
            "a gate's new interaction id is taken",
        )),
    }
}

/// Insert the gate call (its call and decision as JSON text); false when
/// its key was taken.
async fn insert_gate_call(
    tx: &Tx<'_>,
    record: &GateCallRecord,
    call_json: &str,
    decision_json: &str,
) -> Result<bool> {
    let interaction_id = match &record.decision {
        GateResponse::Ask { interaction_id } => Some(interaction_id.as_str()),
        _ => None,
    };
    let inserted = tx
        .execute(
            "INSERT INTO gate_calls (session_id, request_id, call_json, decision_json, interaction_id, created_at)
             VALUES ($1, $2, $3, $4, $5, $6)
             ON CONFLICT (session_id, request_id) DO NOTHING",
            &[
                &record.session_id,
                &record.request_id,
                &call_json,
                &decision_json,
                &interaction_id,
                &rfc3339(record.created_at),
            ],
        )
        .await?;
    Ok(inserted > 0)
}

/// A replay of `call`'s key: the same call (idempotent) or another.
fn replay(call: &Value, existing: GateCallRecord) -> GateRecordOutcome {
    if existing.call == *call {
        GateRecordOutcome::Existing(Box::new(existing))
    } else {
        GateRecordOutcome::Conflict(Box::new(existing))
    }
}

#[async_trait]
impl GateStore for PostgresStore {
    async fn record_gate_decision(
        &self,
        new: NewGateDecision,
        sign: GateSigner,
    ) -> Result<GateRecordOutcome> {
        let NewGateDecision {
            session_id,
            request_id,
            call,
            created_at,
            interaction,
            mut audit,
        } = new;
        let mut client = self.client().await?;
        let mut tx = Tx::begin(&mut client).await?;
        lock_sessions(&tx, &session_id, interaction.as_ref()).await?;
        // Look for a replay first, so a retry signs nothing and never opens
        // a second interaction (nor hits the pending limit).
        if let Some(existing) = load_gate(&tx, &session_id, &request_id).await? {
            tx.commit().await?;
            return Ok(replay(&call, existing));
        }
        let decision = sign(&mut audit)?;
        let record = GateCallRecord {
            session_id,
            request_id,
            call,
            decision,
            created_at,
        };
        let call_json = record.call.to_string();
        let decision_json =
            serde_json::to_string(&record.decision).map_err(|e| corrupt(&record.request_id, e))?;
        let opened = match &interaction {
            Some(i) => match open_interaction(&mut tx, i).await? {
                Ok(view) => Some(view),
                Err(outcome) => {
                    tx.commit().await?;
                    return Ok(outcome);
                }
            },
            None => None,
        };
        if !insert_gate_call(&tx, &record, &call_json, &decision_json).await? {
            // Under the session's lock nobody else records this key, so
            // only an edit of the database gets here; roll back whatever
            // this transaction opened, and answer with the record.
            tx.rollback().await?;
            drop(client);
            let client = self.client().await?;
            let row = sql::query_opt(
                &client,
                &format!(
                    "SELECT {GATE_COLUMNS} FROM gate_calls WHERE session_id = $1 AND request_id = $2"
                ),
                &[&record.session_id, &record.request_id],
            )
            .await?
            .ok_or_else(|| corrupt(&record.request_id, "conflicting gate call vanished"))?;
            return Ok(replay(&record.call, gate_from_row(&row)?));
        }
        if let GateResponse::Allow { approval } = &record.decision {
            note_nonce(&tx, approval, &record.session_id).await?;
        }
        tx.audit(&audit);
        let staged = tx.commit().await?;
        drop(client);
        self.sequenced(staged).await;
        Ok(GateRecordOutcome::Recorded {
            record: Box::new(record),
            interaction: opened,
        })
    }

    async fn gate_call_by_interaction(
        &self,
        interaction_id: &str,
    ) -> Result<Option<GateCallRecord>> {
        let client = self.client().await?;
        sql::query_opt(
            &client,
            &format!("SELECT {GATE_COLUMNS} FROM gate_calls WHERE interaction_id = $1 LIMIT 1"),
            &[&interaction_id],
        )
        .await?
        .as_ref()
        .map(gate_from_row)
        .transpose()
    }

    async fn cast_vote(&self, new: NewVote) -> Result<VoteOutcome> {
        let mut client = self.client().await?;
        let mut tx = Tx::begin(&mut client).await?;
        let authority = authority_holds(&tx, &new.authority).await?;
        // The row lock orders concurrent votes (and answers) on one
        // interaction: each reads the votes the one before it committed.
        let row = tx
            .query_opt(
                &format!("SELECT {VIEW_COLUMNS} FROM interactions WHERE id = $1 FOR UPDATE"),
                &[&new.id],
            )
            .await?;
        let Some(row) = row else {
            tx.rollback().await?;
            return Ok(VoteOutcome::Closed(TransitionOutcome::NotFound));
        };
        let (_, view) = view_from_row(&row)?;
        if let Some(outcome) = record::vote_refused(&view, &new, authority) {
            tx.rollback().await?;
            return Ok(outcome);
        }
        let mut all = view.request.votes.clone();
        all.push(new.vote.clone());
        let text = serde_json::to_string(&all).map_err(|e| corrupt(&new.id, e))?;
        let row = tx
            .query_one(
                &format!(
                    "UPDATE interactions SET votes_json = $2 WHERE id = $1 RETURNING {VIEW_COLUMNS}"
                ),
                &[&new.id, &text],
            )
            .await?;
        let (_, voted) = view_from_row(&row)?;
        tx.record(record::interaction_voted(&voted, &new)?);
        let outcome = match new.decision {
            None => VoteOutcome::Recorded(Box::new(voted)),
            Some((answer, grant)) => match answer_in(&mut tx, answer).await? {
                TransitionOutcome::Done(decided) => {
                    if let Some(grant) = &grant {
                        insert_grant(&mut tx, grant).await?;
                    }
                    VoteOutcome::Recorded(decided)
                }
                other => VoteOutcome::Closed(other),
            },
        };
        let staged = tx.commit().await?;
        drop(client);
        self.sequenced(staged).await;
        Ok(outcome)
    }

    async fn grants_for(
        &self,
        caller: &str,
        conversation_id: &str,
        sandbox_mode: &str,
        tool_name: &str,
    ) -> Result<Vec<Grant>> {
        let client = self.client().await?;
        sql::query(
            &client,
            &format!(
                "SELECT {GRANT_COLUMNS} FROM grants
                 WHERE caller = $1 AND tool_name = $4 AND sandbox_mode = $3 AND revoked_at IS NULL
                   AND (conversation_id IS NULL OR conversation_id = $2)
                 ORDER BY seq"
            ),
            &[&caller, &conversation_id, &sandbox_mode, &tool_name],
        )
        .await?
        .iter()
        .map(grant_from_row)
        .collect()
    }

    async fn list_grants(&self) -> Result<Vec<Grant>> {
        let client = self.client().await?;
        sql::query(
            &client,
            &format!("SELECT {GRANT_COLUMNS} FROM grants WHERE revoked_at IS NULL ORDER BY seq"),
            &[],
        )
        .await?
        .iter()
        .map(grant_from_row)
        .collect()
    }

    async fn revoke_grant(&self, id: &str, actor: &str) -> Result<Option<Grant>> {
        let mut client = self.client().await?;
        let mut tx = Tx::begin(&mut client).await?;
        // Compare-and-set: of two revokes, one revokes and audits.
        let Some(row) = tx
            .query_opt(
                &format!(
                    "UPDATE grants SET revoked_at = $2, revoked_by = $3
                     WHERE id = $1 AND revoked_at IS NULL
                     RETURNING {GRANT_COLUMNS}"
                ),
                &[&id, &rfc3339(OffsetDateTime::now_utc()), &actor],
            )
            .await?
        else {
            tx.commit().await?;
            return Ok(None);
        };
        let grant = grant_from_row(&row)?;
        tx.record(record::grant_changed(
            AuditAction::GrantRevoked,
            &grant,
            actor,
        )?);
        let staged = tx.commit().await?;
        drop(client);
        self.sequenced(staged).await;
        Ok(Some(grant))
    }

    async fn consume_nonce(&self, nonce: &str, actor: &str) -> Result<NonceOutcome> {
        // Remembered by its bytes: every spelling of a spent nonce is spent.
        let nonce = lev_approval::nonce_key(nonce);
        let client = self.client().await?;
        let n = sql::execute(
            &client,
            "INSERT INTO nonces (nonce, spent_at, spent_by) VALUES ($1, $2, $3)
             ON CONFLICT (nonce) DO NOTHING",
            &[&nonce, &rfc3339(OffsetDateTime::now_utc()), &actor],
        )
        .await?;
        Ok(if n == 1 {
            NonceOutcome::Spent
        } else {
            NonceOutcome::AlreadySpent
        })
    }

    async fn nonce_owner(&self, nonce: &str) -> Result<Option<NonceOwner>> {
        let client = self.client().await?;
        sql::query_opt(
            &client,
            "SELECT session_id, caller FROM nonce_owners WHERE nonce = $1",
            &[&nonce],
        )
        .await?
        .map(|row| {
            Ok(NonceOwner {
                session_id: col(&row, 0)?,
                caller: col(&row, 1)?,
            })
        })
        .transpose()
    }
}
