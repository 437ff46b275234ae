//! People's keys in the `people_keys` table.

use async_trait::async_trait;
use lev_store::{NewPersonKey, PeopleKeyStore, PersonKeyOutcome, PersonKeyRecord, Result};
use time::OffsetDateTime;
use tokio_postgres::Row;

use crate::sql::{Cols, Tx, col, corrupt, rfc3339};
use crate::{PostgresStore, sql};
use lev_store::record::{self, PERSON_KEY_COLUMNS as COLUMNS};

/// The lock a person's registrations take (N and the key limit are
/// decided under it), and the one every registration takes for the
/// fingerprint (one key, one person).
fn person_lock(person: &str) -> String {
    format!("lev:person-keys:{person}")
}
const FINGERPRINT_LOCK: &str = "lev:person-keys";

fn from_row(row: &Row) -> Result<PersonKeyRecord> {
    record::decode_person_key(&Cols(row))
}

/// Revoke every key of `person` in force, inside the open transaction (a
/// token's revocation): the kids revoked.
pub(crate) async fn revoke_all_of(
    tx: &mut Tx<'_>,
    person: &str,
    actor: &str,
) -> Result<Vec<String>> {
    let rows = tx
        .query(
            "UPDATE people_keys SET revoked_at = $2, revoked_by = $3
             WHERE person = $1 AND revoked_at IS NULL RETURNING kid",
            &[&person, &rfc3339(OffsetDateTime::now_utc()), &actor],
        )
        .await?;
    let mut kids = rows
        .iter()
        .map(|r| col::<String>(r, 0))
        .collect::<Result<Vec<_>>>()?;
    kids.sort();
    Ok(kids)
}

#[async_trait]
impl PeopleKeyStore for PostgresStore {
    async fn add_person_key(&self, new: NewPersonKey) -> Result<PersonKeyOutcome> {
        let mut client = self.client().await?;
        let mut tx = Tx::begin(&mut client).await?;
        for lock in [FINGERPRINT_LOCK.to_owned(), person_lock(&new.person)] {
            tx.execute(
                "SELECT pg_advisory_xact_lock(hashtextextended($1, 0))",
                &[&lock],
            )
            .await?;
        }
        // The signing key ids noted are the fingerprints' first 16.
        let signing = tx
            .query_opt(
                "SELECT kid FROM signing_kids WHERE kid = $1",
                &[&new.fingerprint.get(..16).unwrap_or_default()],
            )
            .await?
            .map(|r| col::<String>(&r, 0))
            .transpose()?;
        // Every row of this key, in force first: one in force for this
        // person is the registration again; any other refuses.
        let owner = tx
            .query_opt(
                &format!(
                    "SELECT {COLUMNS} FROM people_keys WHERE fingerprint = $1
                     ORDER BY revoked_at IS NULL DESC, created_at LIMIT 1"
                ),
                &[&new.fingerprint],
            )
            .await?
            .as_ref()
            .map(from_row)
            .transpose()?;
        let early = match (signing, owner) {
            (Some(kid), _) => Some(PersonKeyOutcome::SigningKey { kid }),
            (None, Some(key)) if key.person != new.person => {
                Some(PersonKeyOutcome::Taken { person: key.person })
            }
            (None, Some(key)) if key.revoked_at.is_some() => {
                Some(PersonKeyOutcome::Revoked { kid: key.jwk.kid })
            }
            (None, Some(key)) => Some(PersonKeyOutcome::Existing(Box::new(key))),
            (None, None) => None,
        };
        if let Some(outcome) = early {
            tx.rollback().await?;
            return Ok(outcome);
        }
        let row = tx
            .query_one(
                "SELECT COUNT(*) FILTER (WHERE revoked_at IS NULL), COALESCE(MAX(n), 0) + 1
                 FROM people_keys WHERE person = $1",
                &[&new.person],
            )
            .await?;
        let in_force: i64 = col(&row, 0)?;
        let n: i32 = col(&row, 1)?;
        if usize::try_from(in_force).unwrap_or(usize::MAX) >= new.max_keys {
            tx.rollback().await?;
            return Ok(PersonKeyOutcome::TooMany);
        }
        let kid = format!("person:{}:{n}", new.person);
        let mut jwk = new.jwk.clone();
        jwk.kid = String::new();
        let text = serde_json::to_string(&jwk).map_err(|e| corrupt(&kid, e))?;
        tx.execute(
            "INSERT INTO people_keys (kid, person, n, fingerprint, jwk_json, created_at)
             VALUES ($1, $2, $3, $4, $5, $6)",
            &[
                &kid,
                &new.person,
                &n,
                &new.fingerprint,
                &text,
                &rfc3339(new.at),
            ],
        )
        .await?;
        jwk.kid = kid.clone();
        tx.record(record::person_key_added(
            &jwk,
            &new.person,
            &new.fingerprint,
            &new.actor,
        )?);
        let staged = tx.commit().await?;
        drop(client);
        self.sequenced(staged).await;
        Ok(PersonKeyOutcome::Added(Box::new(PersonKeyRecord {
            jwk,
            person: new.person,
            fingerprint: new.fingerprint,
            created_at: new.at,
            revoked_at: None,
        })))
    }

    async fn person_keys(&self, person: Option<&str>) -> Result<Vec<PersonKeyRecord>> {
        let client = self.client().await?;
        sql::query(
            &client,
            &format!(
                "SELECT {COLUMNS} FROM people_keys WHERE revoked_at IS NULL
                 AND ($1::text IS NULL OR person = $1) ORDER BY person, n"
            ),
            &[&person],
        )
        .await?
        .iter()
        .map(from_row)
        .collect()
    }

    async fn revoke_person_key(&self, kid: &str, actor: &str) -> Result<Option<PersonKeyRecord>> {
        let mut client = self.client().await?;
        let mut tx = Tx::begin(&mut client).await?;
        let now = OffsetDateTime::now_utc();
        let row = tx
            .query_opt(
                &format!(
                    "UPDATE people_keys SET revoked_at = $2, revoked_by = $3
                     WHERE kid = $1 AND revoked_at IS NULL RETURNING {COLUMNS}"
                ),
                &[&kid, &rfc3339(now), &actor],
            )
            .await?;
        let Some(row) = row else {
            tx.rollback().await?;
            return Ok(None);
        };
        let key = from_row(&row)?;
        let voided = crate::gate::void_pending_votes(&mut tx, |v| {
            v.voter == key.person && lev_store::signed_with(v, kid)
        })
        .await?;
        tx.record(record::person_key_revoked(kid, &key.person, actor, &voided));
        let staged = tx.commit().await?;
        drop(client);
        self.sequenced(staged).await;
        Ok(Some(key))
    }

    async fn note_signing_keys(&self, kids: &[String]) -> Result<()> {
        let client = self.client().await?;
        for kid in kids {
            sql::execute(
                &client,
                "INSERT INTO signing_kids (kid) VALUES ($1) ON CONFLICT (kid) DO NOTHING",
                &[kid],
            )
            .await?;
        }
        Ok(())
    }
}
