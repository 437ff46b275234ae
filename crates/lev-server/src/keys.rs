//! The server's signing keys, kept in the store ([`lev_store::KeyStore`]):
//! every server sharing a database signs with the same active key and
//! publishes the same JWKS. The first start makes the first key; a rotation
//! adds a key and makes it active, older keys keep verifying until removed.
//! The active key is never removed.
//!
//! Each server follows the store's [`Store::signing_key_changes`]: a
//! rotation or a removal on any replica is read again here (within
//! [`lev_store::SIGNING_KEYS_SEEN_WITHIN`]), so every replica signs with the
//! new key and publishes the trusted ones without a restart.

use std::sync::{Arc, PoisonError, RwLock};

use lev_approval::SigningKeyPair;
use lev_protocol::api::Jwks;
use lev_store::{KeyRemoveOutcome, Store, StoreError, StoredSigningKey};

use crate::kek::Kek;

/// The signing key and the public keys to publish; reloaded from the store
/// after every change, so every clone sees it at once.
#[derive(Clone)]
pub struct KeyRing(Arc<RingInner>);

impl std::fmt::Debug for KeyRing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeyRing")
            .field("active", &self.active().kid())
            .finish_non_exhaustive()
    }
}

struct RingInner {
    store: Arc<dyn Store>,
    kek: Option<Arc<Kek>>,
    loaded: RwLock<Arc<Loaded>>,
}

struct Loaded {
    active: Arc<SigningKeyPair>,
    jwks: Jwks,
}

/// Why the keys could not be loaded or changed.
#[derive(Debug, thiserror::Error)]
pub enum KeyStoreError {
    /// The store refused.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A stored key is not a key.
    #[error("signing key {kid}: {message}")]
    Bad {
        /// The key id.
        kid: String,
        /// What is wrong.
        message: String,
    },
}

fn generate() -> Result<SigningKeyPair, KeyStoreError> {
    SigningKeyPair::generate().map_err(|e| KeyStoreError::Bad {
        kid: "(new)".into(),
        message: e.to_string(),
    })
}

/// The key as the store keeps it: sealed with the key-encryption key when
/// there is one.
fn stored(key: &SigningKeyPair, kek: Option<&Kek>) -> Result<StoredSigningKey, KeyStoreError> {
    let jwk = key.to_private_jwk();
    let material = match kek {
        Some(kek) => kek
            .seal(key.kid(), &jwk)
            .map_err(|message| KeyStoreError::Bad {
                kid: key.kid().to_owned(),
                message,
            })?,
        None => jwk,
    };
    Ok(StoredSigningKey {
        kid: key.kid().to_owned(),
        material,
        active: false,
    })
}

/// Read the stored keys, making the first one when there is none. With a
/// key-encryption key, new keys are stored sealed and sealed keys opened;
/// without one, a sealed key is refused with a hint.
///
/// # Errors
/// When the store refuses, a stored key is bad, or a sealed key does not
/// open with `kek` (another server was given another key-encryption key).
pub async fn load_or_create(
    store: Arc<dyn Store>,
    kek: Option<Arc<Kek>>,
) -> Result<KeyRing, KeyStoreError> {
    let mut keys = store.signing_keys().await?;
    if !keys.iter().any(|k| k.active) {
        store
            .init_signing_key(stored(&generate()?, kek.as_deref())?)
            .await?;
        keys = store.signing_keys().await?;
    }
    let loaded = parse(keys, kek.as_deref())?;
    note(store.as_ref(), &loaded).await?;
    Ok(KeyRing(Arc::new(RingInner {
        store,
        kek,
        loaded: RwLock::new(Arc::new(loaded)),
    })))
}

/// Note every signing key id in `loaded` with the people's keys, before
/// it is served: no person may register a key the server signs with (or
/// once did), whose private half the server holds.
async fn note(store: &dyn Store, loaded: &Loaded) -> Result<(), KeyStoreError> {
    let kids: Vec<String> = loaded.jwks.keys.iter().map(|k| k.kid.clone()).collect();
    store.note_signing_keys(&kids).await?;
    Ok(())
}

fn parse(keys: Vec<StoredSigningKey>, kek: Option<&Kek>) -> Result<Loaded, KeyStoreError> {
    let mut active = None;
    let mut others = Vec::new();
    for key in keys {
        let jwk = match (crate::kek::is_sealed(&key.material), kek) {
            (false, _) => key.material.clone(),
            (true, Some(kek)) => {
                kek.open(&key.kid, &key.material)
                    .map_err(|message| KeyStoreError::Bad {
                        kid: key.kid.clone(),
                        message,
                    })?
            }
            (true, None) => {
                return Err(KeyStoreError::Bad {
                    kid: key.kid,
                    message: "is sealed with a key-encryption key; give the servers' \
                              --key-encryption-key-file"
                        .into(),
                });
            }
        };
        let pair = SigningKeyPair::from_private_jwk(&jwk).map_err(|e| KeyStoreError::Bad {
            kid: key.kid.clone(),
            message: e.to_string(),
        })?;
        if pair.kid() != key.kid {
            return Err(KeyStoreError::Bad {
                kid: key.kid,
                message: format!("is stored under another key's id ({})", pair.kid()),
            });
        }
        if key.active && active.is_none() {
            active = Some(pair);
        } else {
            others.push(pair.public_jwk());
        }
    }
    let active = active.ok_or_else(|| KeyStoreError::Bad {
        kid: "(active)".into(),
        message: "no key is marked active".into(),
    })?;
    others.sort_by(|a, b| a.kid.cmp(&b.kid));
    let mut jwks = Jwks {
        keys: vec![active.public_jwk()],
    };
    jwks.keys.extend(others);
    Ok(Loaded {
        active: Arc::new(active),
        jwks,
    })
}

impl KeyRing {
    /// The key that signs approvals and audit heads.
    pub fn active(&self) -> Arc<SigningKeyPair> {
        Arc::clone(&self.current().active)
    }

    /// Every trusted public key, the active one first.
    pub fn jwks(&self) -> Jwks {
        self.current().jwks.clone()
    }

    fn current(&self) -> Arc<Loaded> {
        Arc::clone(&self.0.loaded.read().unwrap_or_else(PoisonError::into_inner))
    }

    /// Make a new signing key and make it the active one, committed with its
    /// `key.rotated` audit entry by `actor`; older keys stay trusted.
    /// Returns the new and the previous key ids.
    ///
    /// # Errors
    /// When the store refuses.
    pub async fn rotate(&self, actor: &str) -> Result<(String, Option<String>), KeyStoreError> {
        let key = generate()?;
        let previous = self
            .0
            .store
            .rotate_signing_key(stored(&key, self.0.kek.as_deref())?, actor)
            .await?;
        self.reload().await?;
        Ok((key.kid().to_owned(), previous))
    }

    /// Stop trusting key `kid`, committed with its `key.removed` audit entry
    /// by `actor`. The active key is refused.
    ///
    /// # Errors
    /// When the store refuses.
    pub async fn remove(&self, kid: &str, actor: &str) -> Result<KeyRemoveOutcome, KeyStoreError> {
        let outcome = self.0.store.remove_signing_key(kid, actor).await?;
        self.reload().await?;
        Ok(outcome)
    }

    /// Read the keys again whenever the store says they changed (on any
    /// replica), until shutdown. A reload that fails keeps the keys held
    /// and is tried again every second.
    pub async fn follow(self, mut shutdown: tokio::sync::watch::Receiver<bool>) {
        let mut changes = self.0.store.signing_key_changes();
        // Whatever changed since the keys were loaded at start.
        let mut stale = true;
        loop {
            if stale {
                match self.reload().await {
                    Ok(()) => stale = false,
                    Err(e) => crate::log::error(&format!(
                        "signing keys changed, but cannot be read again: {e}"
                    )),
                }
            }
            tokio::select! {
                changed = changes.changed() => {
                    if changed.is_err() {
                        return;
                    }
                    stale = true;
                }
                () = tokio::time::sleep(std::time::Duration::from_secs(1)), if stale => {}
                () = crate::shutdown::stopped(&mut shutdown) => return,
            }
        }
    }

    /// Read the keys again (another server may have rotated them).
    ///
    /// # Errors
    /// When the store refuses or a stored key is bad.
    pub async fn reload(&self) -> Result<(), KeyStoreError> {
        let loaded = parse(self.0.store.signing_keys().await?, self.0.kek.as_deref())?;
        note(self.0.store.as_ref(), &loaded).await?;
        *self
            .0
            .loaded
            .write()
            .unwrap_or_else(PoisonError::into_inner) = Arc::new(loaded);
        Ok(())
    }
}
