//! Signing keys in the `signing_keys` table: every server sharing the
//! database signs with the one active key and trusts the others. The
//! material is kept as the server hands it over (opaque here). A change
//! commits with its audit entry; the table's trigger (migration 6) notifies
//! `lev_keys`, which every process's listener turns into
//! [`KeyStore::signing_key_changes`].

use async_trait::async_trait;
use lev_store::record;
use lev_store::{KeyRemoveOutcome, KeyStore, Result, StoreError, StoredSigningKey};
use tokio::sync::watch;

use crate::sql::{Tx, col};
use crate::{PostgresStore, sql};

/// The advisory lock every change of the keys takes.
const KEYS_LOCK: &str = "lev:signing-keys";

fn is_kid(kid: &str) -> bool {
    kid.len() == 16 && kid.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

fn check_kid(kid: &str) -> Result<()> {
    if is_kid(kid) {
        Ok(())
    } else {
        Err(StoreError::Database(format!(
            "{kid:?} is not a key id (16 lowercase hex digits)"
        )))
    }
}

fn key_from_row(row: &tokio_postgres::Row) -> Result<StoredSigningKey> {
    Ok(StoredSigningKey {
        kid: col(row, 0)?,
        material: col(row, 1)?,
        active: col(row, 2)?,
    })
}

#[async_trait]
impl KeyStore for PostgresStore {
    async fn signing_keys(&self) -> Result<Vec<StoredSigningKey>> {
        let client = self.client().await?;
        sql::query(
            &client,
            "SELECT kid, material, active FROM signing_keys ORDER BY active DESC, kid",
            &[],
        )
        .await?
        .iter()
        .map(key_from_row)
        .collect()
    }

    async fn init_signing_key(&self, key: StoredSigningKey) -> Result<StoredSigningKey> {
        check_kid(&key.kid)?;
        let mut client = self.client().await?;
        let tx = Tx::begin(&mut client).await?;
        // Two first starts at once: the second waits, then finds the first's.
        tx.lock(KEYS_LOCK).await?;
        if let Some(row) = tx
            .query_opt(
                "SELECT kid, material, active FROM signing_keys WHERE active",
                &[],
            )
            .await?
        {
            let active = key_from_row(&row)?;
            tx.commit().await?;
            return Ok(active);
        }
        tx.execute(
            "INSERT INTO signing_keys (kid, material, active) VALUES ($1, $2, true)
             ON CONFLICT (kid) DO UPDATE SET material = EXCLUDED.material, active = true",
            &[&key.kid, &key.material],
        )
        .await?;
        tx.commit().await?;
        Ok(StoredSigningKey {
            active: true,
            ..key
        })
    }

    async fn rotate_signing_key(
        &self,
        key: StoredSigningKey,
        actor: &str,
    ) -> Result<Option<String>> {
        check_kid(&key.kid)?;
        let mut client = self.client().await?;
        let mut tx = Tx::begin(&mut client).await?;
        tx.lock(KEYS_LOCK).await?;
        let previous = tx
            .query_opt("SELECT kid FROM signing_keys WHERE active", &[])
            .await?
            .map(|row| col::<String>(&row, 0))
            .transpose()?;
        tx.execute("UPDATE signing_keys SET active = false WHERE active", &[])
            .await?;
        tx.execute(
            "INSERT INTO signing_keys (kid, material, active) VALUES ($1, $2, true)
             ON CONFLICT (kid) DO UPDATE SET material = EXCLUDED.material, active = true",
            &[&key.kid, &key.material],
        )
        .await?;
        tx.record(record::key_rotated(&key.kid, previous.as_deref(), actor));
        let staged = tx.commit().await?;
        drop(client);
        self.inner_changes().keys_changed();
        self.sequenced(staged).await;
        Ok(previous)
    }

    async fn remove_signing_key(&self, kid: &str, actor: &str) -> Result<KeyRemoveOutcome> {
        if !is_kid(kid) {
            return Ok(KeyRemoveOutcome::NotFound);
        }
        let mut client = self.client().await?;
        let mut tx = Tx::begin(&mut client).await?;
        tx.lock(KEYS_LOCK).await?;
        let outcome = match tx
            .query_opt("SELECT active FROM signing_keys WHERE kid = $1", &[&kid])
            .await?
        {
            None => KeyRemoveOutcome::NotFound,
            Some(row) if col::<bool>(&row, 0)? => KeyRemoveOutcome::Active,
            Some(_) => {
                tx.execute("DELETE FROM signing_keys WHERE kid = $1", &[&kid])
                    .await?;
                tx.record(record::key_removed(kid, actor));
                KeyRemoveOutcome::Removed
            }
        };
        let staged = tx.commit().await?;
        drop(client);
        if outcome == KeyRemoveOutcome::Removed {
            self.inner_changes().keys_changed();
        }
        self.sequenced(staged).await;
        Ok(outcome)
    }

    fn signing_key_changes(&self) -> watch::Receiver<u64> {
        self.inner_changes().subscribe_keys()
    }
}
