//! The server's signing keys as a store part, so that every server sharing a
//! database signs with the same active key and trusts the same older ones.
//!
//! The store keeps each key's material as the server hands it over (a
//! private JWK, or that JWK sealed with a key-encryption key): it never
//! looks inside.

use async_trait::async_trait;
use tokio::sync::watch;

use crate::Result;

/// One signing key as stored.
#[derive(Clone, PartialEq, Eq)]
pub struct StoredSigningKey {
    /// The key id (16 lowercase hex digits).
    pub kid: String,
    /// The private key, opaque to the store.
    pub material: String,
    /// Whether this is the key that signs. Exactly one key is active once
    /// any key is stored.
    pub active: bool,
}

impl std::fmt::Debug for StoredSigningKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoredSigningKey")
            .field("kid", &self.kid)
            .field("material", &"<secret>")
            .field("active", &self.active)
            .finish()
    }
}

/// Outcome of [`KeyStore::remove_signing_key`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyRemoveOutcome {
    /// The key is gone: it no longer verifies.
    Removed,
    /// The key is the active one: rotate first.
    Active,
    /// No such key.
    NotFound,
}

/// Where the signing keys are kept.
#[async_trait]
pub trait KeyStore: Send + Sync + 'static {
    /// Every stored key, the active one first, the others by kid.
    async fn signing_keys(&self) -> Result<Vec<StoredSigningKey>>;

    /// Store `key` as the active key when no key is active yet (a first
    /// start); otherwise store nothing. Returns the active key: `key`, or
    /// the one another process stored first.
    async fn init_signing_key(&self, key: StoredSigningKey) -> Result<StoredSigningKey>;

    /// Store `key` and make it the active key, in one step with its
    /// `key.rotated` audit entry (`{"kid", "previous"}`, by `actor`); the
    /// previously active key stays, inactive (it keeps verifying). Returns
    /// the previous active kid.
    async fn rotate_signing_key(
        &self,
        key: StoredSigningKey,
        actor: &str,
    ) -> Result<Option<String>>;

    /// Delete an inactive key, in one step with its `key.removed` audit
    /// entry (`{"kid"}`, by `actor`); the active key and an unknown one are
    /// refused with nothing written.
    async fn remove_signing_key(&self, kid: &str, actor: &str) -> Result<KeyRemoveOutcome>;

    /// Changes whenever the stored keys may have changed: after a rotation
    /// or a removal committed by any process sharing the database (within
    /// [`SIGNING_KEYS_SEEN_WITHIN`]), and whenever this process may have
    /// missed one (its notification connection came back). A server reads
    /// the keys again on each change, so every replica signs with the
    /// active key and publishes the trusted ones.
    fn signing_key_changes(&self) -> watch::Receiver<u64>;
}

/// How soon every process sharing the database is told of a change of the
/// signing keys ([`KeyStore::signing_key_changes`]) after it committed.
pub const SIGNING_KEYS_SEEN_WITHIN: std::time::Duration = std::time::Duration::from_secs(1);
