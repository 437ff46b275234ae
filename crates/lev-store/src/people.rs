//! People's public keys (SPEC section 13): the keys people sign their own
//! votes with, each registered to one person (a token name) as
//! `person:NAME:N`.
//!
//! # Invariants
//! - A key (by its fingerprint) belongs to one person for ever: registered
//!   to someone else, revoked or not, it is refused; revoked, it is never
//!   registered again (a revoked key's old signatures would count again).
//! - A key that is, or ever was, one of the server's signing keys (noted
//!   with [`PeopleKeyStore::note_signing_keys`]) is never a person's: the
//!   server holds its private half and could sign that person's votes.
//! - N counts a person's keys from 1 and is never reused, revoked keys
//!   included: a `kid` names one key for ever.
//! - Revoking a token revokes its person's keys in the same transaction
//!   ([`crate::TokenStore::revoke_token`]); a revoked key's row stays. Revoking
//!   a key voids, in the same transaction, the pending votes it signed.
//! - Every registration and revocation is audited.

use async_trait::async_trait;
use lev_protocol::api::PersonJwk;
use time::OffsetDateTime;

use crate::Result;

/// A person's key as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PersonKeyRecord {
    /// The key as served, its `kid` `person:NAME:N`.
    pub jwk: PersonJwk,
    /// NAME.
    pub person: String,
    /// Hex SHA-256 of the public key's bytes.
    pub fingerprint: String,
    /// When it was registered.
    pub created_at: OffsetDateTime,
    /// When it was revoked, if it was.
    pub revoked_at: Option<OffsetDateTime>,
}

/// A key to register.
#[derive(Debug, Clone)]
pub struct NewPersonKey {
    /// The person (a token's name).
    pub person: String,
    /// The key, its `kid` unset (the store assigns `person:NAME:N`).
    pub jwk: PersonJwk,
    /// Hex SHA-256 of the public key's bytes.
    pub fingerprint: String,
    /// The most keys in force the person may hold.
    pub max_keys: usize,
    /// Who registers it, for the audit log.
    pub actor: String,
    /// When.
    pub at: OffsetDateTime,
}

/// Outcome of [`PeopleKeyStore::add_person_key`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PersonKeyOutcome {
    /// Registered, with its `kid`.
    Added(Box<PersonKeyRecord>),
    /// The same key is in force for this person already: that record.
    Existing(Box<PersonKeyRecord>),
    /// The key is (or was) registered to someone else.
    Taken {
        /// Whose it is.
        person: String,
    },
    /// The key was this person's and was revoked: it stays revoked.
    Revoked {
        /// Its kid then.
        kid: String,
    },
    /// The key is, or was, one of the server's signing keys.
    SigningKey {
        /// The signing key's kid.
        kid: String,
    },
    /// The person holds `max_keys` keys in force already.
    TooMany,
}

/// Where people's keys are kept. Every [`crate::Store`] is one.
#[async_trait]
pub trait PeopleKeyStore: Send + Sync + 'static {
    /// Register a key to a person, deciding N and uniqueness atomically.
    async fn add_person_key(&self, new: NewPersonKey) -> Result<PersonKeyOutcome>;

    /// The keys in force: of `person`, or of everyone; by person, then N.
    async fn person_keys(&self, person: Option<&str>) -> Result<Vec<PersonKeyRecord>>;

    /// Revoke one key, and void the votes on pending interactions that it
    /// signed (each such interaction's `interaction.voted` event, the
    /// voided votes listed in the `person_key.revoked` audit entry as
    /// `votes_voided`); `None` when no key of that kid is in force.
    async fn revoke_person_key(&self, kid: &str, actor: &str) -> Result<Option<PersonKeyRecord>>;

    /// Note signing key ids (a key id is the first 16 hex digits of the
    /// SHA-256 of the public key, the fingerprint's first 16), for ever:
    /// a person's key whose fingerprint starts with one is refused
    /// ([`PersonKeyOutcome::SigningKey`]). Idempotent.
    async fn note_signing_keys(&self, kids: &[String]) -> Result<()>;
}
