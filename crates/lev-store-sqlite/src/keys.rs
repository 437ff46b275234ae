//! Signing keys in the data dir, as lev has always kept them beside the
//! SQLite file: `keys/<kid>.json` holds a key's material (mode 0600),
//! `keys/active` the kid that signs. Changes are serialised in this process
//! (the data dir is locked to one process) and each file is written
//! durably before the next step.
//!
//! A rotation or a removal runs as a job of the writer, with its audit entry:
//! the new key's file, then the entry, then `active` naming the new key (a
//! removal: the entry, then the file deleted), inside the job's savepoint, so
//! a file that cannot be written rolls the entry back. The files are not
//! SQLite's: a commit that fails after them (a full disk) leaves the change
//! without its entry, which is as far as files and a database go together.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use lev_store::record;
use lev_store::{KeyRemoveOutcome, KeyStore, Result, StoreError, StoredSigningKey};
use tokio::sync::watch;

use lev_store::files::write_secret_file;

use crate::{SqliteStore, write_change};

/// The key directory and the lock that serialises changes to it.
#[derive(Debug)]
pub(crate) struct KeyDir {
    dir: PathBuf,
    changing: tokio::sync::Mutex<()>,
    /// Bumped after every change (one process: this one makes them all).
    changes: watch::Sender<u64>,
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> StoreError + '_ {
    move |source| StoreError::io(path.display().to_string(), source)
}

fn is_kid(kid: &str) -> bool {
    kid.len() == 16 && kid.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

impl KeyDir {
    /// The key directory of `data_dir`, made (mode 0700) when missing.
    pub(crate) fn open(data_dir: &Path) -> Result<Self> {
        let dir = data_dir.join("keys");
        std::fs::create_dir_all(&dir).map_err(io(&dir))?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700))
                .map_err(io(&dir))?;
        }
        Ok(Self {
            dir,
            changing: tokio::sync::Mutex::new(()),
            changes: watch::channel(0).0,
        })
    }

    fn active_kid(dir: &Path) -> Result<Option<String>> {
        let path = dir.join("active");
        match std::fs::read_to_string(&path) {
            Ok(text) => Ok(Some(text.trim().to_owned()).filter(|k| !k.is_empty())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(io(&path)(e)),
        }
    }

    fn list(dir: &Path) -> Result<Vec<StoredSigningKey>> {
        let active = Self::active_kid(dir)?;
        let mut keys = Vec::new();
        for entry in std::fs::read_dir(dir).map_err(io(dir))? {
            let path = entry.map_err(io(dir))?.path();
            let Some(kid) = path
                .file_name()
                .and_then(|n| n.to_str())
                .and_then(|n| n.strip_suffix(".json"))
                .filter(|k| is_kid(k))
                .map(str::to_owned)
            else {
                continue;
            };
            let material = std::fs::read_to_string(&path).map_err(io(&path))?;
            keys.push(StoredSigningKey {
                active: active.as_deref() == Some(kid.as_str()),
                kid,
                material,
            });
        }
        if let Some(active) = &active
            && !keys.iter().any(|k| &k.kid == active)
        {
            return Err(StoreError::Corrupt {
                what: dir.join("active").display().to_string(),
                message: format!("names key {active}, which has no file"),
            });
        }
        keys.sort_by(|a, b| b.active.cmp(&a.active).then_with(|| a.kid.cmp(&b.kid)));
        Ok(keys)
    }

    async fn blocking<T, F>(&self, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&Path) -> Result<T> + Send + 'static,
    {
        let dir = self.dir.clone();
        tokio::task::spawn_blocking(move || f(&dir))
            .await
            .map_err(|e| StoreError::Database(format!("key file task failed: {e}")))?
    }
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

#[async_trait]
impl KeyStore for SqliteStore {
    async fn signing_keys(&self) -> lev_store::Result<Vec<StoredSigningKey>> {
        self.keys.blocking(KeyDir::list).await
    }

    async fn init_signing_key(&self, key: StoredSigningKey) -> lev_store::Result<StoredSigningKey> {
        check_kid(&key.kid)?;
        let _changing = self.keys.changing.lock().await;
        self.keys
            .blocking(move |dir| {
                if let Some(active) = KeyDir::list(dir)?.into_iter().find(|k| k.active) {
                    return Ok(active);
                }
                let path = dir.join(format!("{}.json", key.kid));
                write_secret_file(&path, &key.material).map_err(io(&path))?;
                let active_path = dir.join("active");
                write_secret_file(&active_path, &format!("{}\n", key.kid))
                    .map_err(io(&active_path))?;
                Ok(StoredSigningKey {
                    active: true,
                    ..key
                })
            })
            .await
    }

    async fn rotate_signing_key(
        &self,
        key: StoredSigningKey,
        actor: &str,
    ) -> lev_store::Result<Option<String>> {
        check_kid(&key.kid)?;
        let _changing = self.keys.changing.lock().await;
        let dir = self.keys.dir.clone();
        let actor = actor.to_owned();
        let previous = self
            .writer
            .write(move |tx| {
                let previous = KeyDir::active_kid(&dir)?;
                let path = dir.join(format!("{}.json", key.kid));
                write_secret_file(&path, &key.material).map_err(io(&path))?;
                write_change(
                    tx,
                    record::key_rotated(&key.kid, previous.as_deref(), &actor),
                )?;
                let active_path = dir.join("active");
                write_secret_file(&active_path, &format!("{}\n", key.kid))
                    .map_err(io(&active_path))?;
                Ok(previous)
            })
            .await?;
        self.keys.changes.send_modify(|n| *n = n.wrapping_add(1));
        Ok(previous)
    }

    async fn remove_signing_key(
        &self,
        kid: &str,
        actor: &str,
    ) -> lev_store::Result<KeyRemoveOutcome> {
        if !is_kid(kid) {
            return Ok(KeyRemoveOutcome::NotFound);
        }
        let (kid, actor) = (kid.to_owned(), actor.to_owned());
        let _changing = self.keys.changing.lock().await;
        let dir = self.keys.dir.clone();
        let outcome = self
            .writer
            .write(move |tx| {
                if KeyDir::active_kid(&dir)?.as_deref() == Some(kid.as_str()) {
                    return Ok(KeyRemoveOutcome::Active);
                }
                let path = dir.join(format!("{kid}.json"));
                if !path.exists() {
                    return Ok(KeyRemoveOutcome::NotFound);
                }
                write_change(tx, record::key_removed(&kid, &actor))?;
                // An error rolls the entry back.
                std::fs::remove_file(&path).map_err(io(&path))?;
                std::fs::File::open(&dir)
                    .and_then(|d| d.sync_all())
                    .map_err(io(&dir))?;
                Ok(KeyRemoveOutcome::Removed)
            })
            .await?;
        if outcome == KeyRemoveOutcome::Removed {
            self.keys.changes.send_modify(|n| *n = n.wrapping_add(1));
        }
        Ok(outcome)
    }

    fn signing_key_changes(&self) -> watch::Receiver<u64> {
        self.keys.changes.subscribe()
    }
}

pub(crate) type SharedKeyDir = Arc<KeyDir>;
