//! People's keys in the `people_keys` table.

use async_trait::async_trait;
use lev_store::record::{self, PERSON_KEY_COLUMNS as COLUMNS};
use lev_store::{NewPersonKey, PeopleKeyStore, PersonKeyOutcome, PersonKeyRecord};
use rusqlite::{Connection, OptionalExtension as _, Row, params};
use time::OffsetDateTime;

use crate::writer::{Tx, rfc3339};
use crate::{Cols, Result, SqliteStore, corrupt, write_change};

fn from_row(row: &Row<'_>) -> Result<PersonKeyRecord> {
    Ok(record::decode_person_key(&Cols(row))?)
}

fn in_force(conn: &Connection, person: Option<&str>) -> Result<Vec<PersonKeyRecord>> {
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT {COLUMNS} FROM people_keys WHERE revoked_at IS NULL \
         AND (?1 IS NULL OR person = ?1) ORDER BY person, n"
    ))?;
    let mut rows = stmt.query([person])?;
    let mut out = Vec::new();
    while let Some(row) = rows.next()? {
        out.push(from_row(row)?);
    }
    Ok(out)
}

/// Revoke every key of `person` in force, inside the open transaction (a
/// token's revocation): the kids revoked.
pub(crate) fn revoke_all_of(tx: &mut Tx<'_>, person: &str, actor: &str) -> Result<Vec<String>> {
    let kids: Vec<String> = in_force(tx.conn, Some(person))?
        .into_iter()
        .map(|k| k.jwk.kid)
        .collect();
    if !kids.is_empty() {
        tx.conn
            .prepare_cached(
                "UPDATE people_keys SET revoked_at = ?2, revoked_by = ?3 \
                 WHERE person = ?1 AND revoked_at IS NULL",
            )?
            .execute(params![person, rfc3339(OffsetDateTime::now_utc()), actor])?;
    }
    Ok(kids)
}

#[async_trait]
impl PeopleKeyStore for SqliteStore {
    async fn add_person_key(&self, new: NewPersonKey) -> lev_store::Result<PersonKeyOutcome> {
        self.writer
            .write(move |tx| {
                // The signing key ids noted are the fingerprints' first 16.
                let signing: Option<String> = tx
                    .conn
                    .prepare_cached("SELECT kid FROM signing_kids WHERE kid = ?1")?
                    .query_row([new.fingerprint.get(..16).unwrap_or_default()], |r| r.get(0))
                    .optional()?;
                if let Some(kid) = signing {
                    return Ok(PersonKeyOutcome::SigningKey { kid });
                }
                // Every row of this key, in force first: one in force for
                // this person is the registration again; any other refuses.
                let rows: Vec<(String, String, bool)> = {
                    let mut stmt = tx.conn.prepare_cached(
                        "SELECT kid, person, revoked_at IS NULL FROM people_keys \
                         WHERE fingerprint = ?1 ORDER BY revoked_at IS NULL DESC, created_at",
                    )?;
                    let rows = stmt.query_map([&new.fingerprint], |r| {
                        Ok((r.get(0)?, r.get(1)?, r.get(2)?))
                    })?;
                    rows.collect::<rusqlite::Result<_>>()?
                };
                match rows.into_iter().next() {
                    Some((_, person, true)) if person == new.person => {
                        let existing = in_force(tx.conn, Some(&person))?
                            .into_iter()
                            .find(|k| k.fingerprint == new.fingerprint)
                            .ok_or_else(|| corrupt(&person, "a key vanished"))?;
                        return Ok(PersonKeyOutcome::Existing(Box::new(existing)));
                    }
                    Some((kid, person, _)) if person == new.person => {
                        return Ok(PersonKeyOutcome::Revoked { kid });
                    }
                    Some((_, person, _)) => return Ok(PersonKeyOutcome::Taken { person }),
                    None => {}
                }
                if in_force(tx.conn, Some(&new.person))?.len() >= new.max_keys {
                    return Ok(PersonKeyOutcome::TooMany);
                }
                let n: i64 = tx
                    .conn
                    .prepare_cached("SELECT COALESCE(MAX(n), 0) + 1 FROM people_keys WHERE person = ?1")?
                    .query_row([&new.person], |r| r.get(0))?;
                let kid = format!("person:{}:{n}", new.person);
                let mut jwk = new.jwk.clone();
                jwk.kid = String::new();
                let text = serde_json::to_string(&jwk).map_err(|e| corrupt(&kid, e))?;
                tx.conn
                    .prepare_cached(
                        "INSERT INTO people_keys (kid, person, n, fingerprint, jwk_json, created_at) \
                         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                    )?
                    .execute(params![kid, new.person, n, new.fingerprint, text, rfc3339(new.at)])?;
                jwk.kid = kid.clone();
                let change =
                    record::person_key_added(&jwk, &new.person, &new.fingerprint, &new.actor)?;
                write_change(tx, change)?;
                Ok(PersonKeyOutcome::Added(Box::new(PersonKeyRecord {
                    jwk,
                    person: new.person,
                    fingerprint: new.fingerprint,
                    created_at: new.at,
                    revoked_at: None,
                })))
            })
            .await
    }

    async fn person_keys(&self, person: Option<&str>) -> lev_store::Result<Vec<PersonKeyRecord>> {
        let person = person.map(str::to_owned);
        self.read(move |conn| in_force(conn, person.as_deref()))
            .await
    }

    async fn revoke_person_key(
        &self,
        kid: &str,
        actor: &str,
    ) -> lev_store::Result<Option<PersonKeyRecord>> {
        let (kid, actor) = (kid.to_owned(), actor.to_owned());
        self.writer
            .write(move |tx| {
                let found = tx
                    .conn
                    .prepare_cached(&format!(
                        "SELECT {COLUMNS} FROM people_keys WHERE kid = ?1 AND revoked_at IS NULL"
                    ))?
                    .query_row([&kid], |r| Ok(from_row(r)))
                    .optional()?
                    .transpose()?;
                let Some(mut key) = found else {
                    return Ok(None);
                };
                let now = OffsetDateTime::now_utc();
                tx.conn
                    .prepare_cached(
                        "UPDATE people_keys SET revoked_at = ?2, revoked_by = ?3 WHERE kid = ?1",
                    )?
                    .execute(params![kid, rfc3339(now), actor])?;
                let voided = crate::gate::void_pending_votes(tx, |v| {
                    v.voter == key.person && lev_store::signed_with(v, &kid)
                })?;
                write_change(
                    tx,
                    record::person_key_revoked(&kid, &key.person, &actor, &voided),
                )?;
                key.revoked_at = Some(now);
                Ok(Some(key))
            })
            .await
    }

    async fn note_signing_keys(&self, kids: &[String]) -> lev_store::Result<()> {
        let kids = kids.to_vec();
        self.writer
            .write(move |tx| {
                for kid in &kids {
                    tx.conn
                        .prepare_cached(
                            "INSERT INTO signing_kids (kid) VALUES (?1) ON CONFLICT (kid) DO NOTHING",
                        )?
                        .execute([kid])?;
                }
                Ok(())
            })
            .await
    }
}
