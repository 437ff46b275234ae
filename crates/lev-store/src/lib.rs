//! lev's store contract: the [`Store`] traits, the types they take and
//! give, and (feature `conformance`) the suite every backend must pass.
//! Backends live in their own crates (`lev-store-sqlite`, ...); the server
//! sees only `Arc<dyn Store>`.
//!
//! # The contract
//!
//! Every backend keeps these rules, also when several processes write to one
//! database at once (the conformance suite checks each of them):
//!
//! - **Committed means durable.** A write that returns `Ok` is committed: it
//!   survives the process being killed at any instant.
//! - **A change commits with its trace.** Every state change commits its
//!   event (for `GET /v1/events`) and its audit entry in the same
//!   transaction as the change itself, so the log never misses or invents a
//!   change.
//! - **Compare-and-set.** Answers, cancels and expiry move an interaction out
//!   of `pending` only if it is still pending: exactly one wins, the others
//!   get the winner ([`TransitionOutcome::AlreadyAnswered`] / `Gone`). The
//!   same holds for finishing a task and spending a nonce. A vote is
//!   recorded only if the votes are still those its caster counted, and
//!   the tokens and keys they rely on still hold; revoking a token or a
//!   person's key voids, in its own transaction, the votes it backed on
//!   pending interactions.
//! - **Limits are atomic.** "At most N pending per session" and gate
//!   idempotency (one decision per session and request id) are decided in
//!   the transaction that inserts, serialised per session, so two writers
//!   can never both pass a check that only one of them may pass. Idempotency
//!   compares the requests as JSON values, not as text.
//! - **Events in one order.** Event `seq` increases in commit order: once a
//!   reader has seen event N, no event with a seq below N becomes visible
//!   later. So `events_after(last_seen)` (SSE `Last-Event-ID`) never skips an
//!   event that a concurrent transaction committed late, and never repeats
//!   one.
//! - **One audit chain.** Audit entries are appended one at a time, each
//!   hashing the previous entry's hash, under a lock that every writer takes
//!   (the head is read inside the appending transaction, never cached
//!   outside it), so the chain verifies after any number of concurrent
//!   writers.
//! - **Announced after commit.** Committed events are announced on
//!   [`EventStore::subscribe`] only after the commit, on every process sharing
//!   the database, so nobody is woken by something that could still roll
//!   back, and a waiter on one server is woken by an answer given on another.
//! - **Shared state is stored.** Everything two servers must agree on is a
//!   store part: interactions, answers, events, audit, grants, nonces,
//!   tokens, tasks, attachments, signing keys ([`KeyStore`]), dashboard
//!   sessions ([`DashboardSessionStore`]), the messages waiting for
//!   sessions' operators ([`OperatorStore`]) with where each operator is
//!   connected, webhook endpoints with their outbox ([`WebhookStore`]),
//!   and people's keys ([`PeopleKeyStore`]).
//! - **Deliveries commit with their event.** Every event writes, in its own
//!   transaction, one delivery per enabled endpoint that wants its kind;
//!   a delivery is sent by one server at a time (a lease), and recorded
//!   attempt by attempt.
//! - **Knows no policy.** The store knows nothing of HTTP, auth or policy: it
//!   keeps what the server decided. Migrations are per backend and never
//!   edited once released.
//! - **Errors say whose fault.** [`StoreError::Unavailable`] means "the
//!   database cannot serve now, retry" (503): unreachable, or out of disk,
//!   memory or file handles, or an IO error ([`StoreError::io`] and each
//!   backend's driver errors classify them); the others are faults.

use std::collections::BTreeMap;

use async_trait::async_trait;
use lev_protocol::api::{AuditEntry, InteractionView, Role, TokenInfo};
use lev_protocol::{Envelope, Interaction, InteractionStatus, StoredResponse};
use serde_json::Value;
use time::OffsetDateTime;

pub mod codec;
#[cfg(feature = "conformance")]
pub mod conformance;
pub mod feed;
pub mod files;
pub mod gate;
pub mod keys;
pub mod operators;
pub mod people;
pub mod record;
pub mod sessions;
pub mod stats;
pub mod tasks;
pub mod webhooks;

pub use feed::{EventFeed, EventReceiver, PageSizer};
pub use gate::{
    GateCallRecord, GateRecordOutcome, GateSigner, GateStore, NewGateDecision, NewGrant, NewVote,
    NonceOutcome, NonceOwner, VoteAuthority, VoteOutcome, decided, signed_with, void_votes,
};
pub use keys::{KeyRemoveOutcome, KeyStore, SIGNING_KEYS_SEEN_WITHIN, StoredSigningKey};
pub use operators::{
    OperatorPresence, OperatorReply, OperatorRequest, OperatorSignal, OperatorStore,
    ResolveOutcome, WithdrawOutcome,
};
pub use people::{NewPersonKey, PeopleKeyStore, PersonKeyOutcome, PersonKeyRecord};
pub use record::{AuditAction, Change, Event, EventKind, audit_summary, view_json};
pub use sessions::{DashboardSession, DashboardSessionStore};
pub use tasks::TaskStore;
pub use webhooks::{
    AttemptOutcome, AttemptRecord, DeliveryAttempt, DeliveryRecord, DeliveryState, DueDelivery,
    Endpoint, EndpointKind, WebhookStore,
};

/// Why a store call failed. None of these is the client's fault: the server
/// answers them with 500 (or 503) and logs the details.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The database said no.
    #[error("database: {0}")]
    Database(String),
    /// A file of the data dir could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The cause.
        source: std::io::Error,
    },
    /// Stored data does not parse: the database was edited or is corrupt.
    #[error("corrupt record {what}: {message}")]
    Corrupt {
        /// Which record.
        what: String,
        /// What is wrong.
        message: String,
    },
    /// The store is shutting down.
    #[error("the store is closed")]
    Closed,
    /// The database cannot serve right now (down, restarting, no
    /// connection in time, its disk full, out of memory or file handles, an
    /// IO error): nothing was committed, and a retry may succeed.
    #[error("the database is unavailable: {0}")]
    Unavailable(String),
}

impl StoreError {
    /// A file of the data dir that could not be read or written:
    /// [`StoreError::Unavailable`] when the cause may pass (a full disk or
    /// quota, an IO error, no memory or file handles left), else
    /// [`StoreError::Io`].
    #[must_use]
    pub fn io(path: impl Into<String>, source: std::io::Error) -> Self {
        let path = path.into();
        if io_may_pass(&source) {
            Self::Unavailable(format!("{path}: {source}"))
        } else {
            Self::Io { path, source }
        }
    }
}

/// Whether an IO error is the machine's state rather than a fault of lev or
/// of its data: out of space (`ENOSPC`, `EDQUOT`, `EFBIG`), an IO error
/// (`EIO`), out of memory or file handles (`ENOMEM`, `EMFILE`, `ENFILE`),
/// or a file system gone read-only (`EROFS`).
#[must_use]
pub fn io_may_pass(e: &std::io::Error) -> bool {
    use std::io::ErrorKind;
    if matches!(
        e.kind(),
        ErrorKind::StorageFull
            | ErrorKind::QuotaExceeded
            | ErrorKind::FileTooLarge
            | ErrorKind::OutOfMemory
            | ErrorKind::ReadOnlyFilesystem
    ) {
        return true;
    }
    // The kinds above cover ENOSPC, EDQUOT, EFBIG and EROFS; these have no
    // kind of their own: EIO 5, ENOMEM 12, ENFILE 23, EMFILE 24 (the same
    // numbers on Linux, the BSDs and macOS).
    matches!(e.raw_os_error(), Some(5 | 12 | 23 | 24))
}

/// Result of a store call.
pub type Result<T, E = StoreError> = std::result::Result<T, E>;

/// A committed event, as `GET /v1/events` streams it.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredEvent {
    /// Durable, increasing sequence number: the SSE event id.
    pub seq: i64,
    /// `interaction.created`, `interaction.answered`, ...
    pub kind: String,
    /// The object concerned.
    pub data: Value,
}

/// What to append to the audit log beside a change.
#[derive(Debug, Clone, PartialEq)]
pub struct AuditRecord {
    /// What happened (`interaction.answered`, `token.created`, ...).
    pub action: String,
    /// Who did it: a token name, `policy`, `timeout`, `system`.
    pub actor: String,
    /// The details.
    pub data: Value,
}

/// A new interaction, already validated, with its id and times assigned.
#[derive(Debug, Clone)]
pub struct NewInteraction {
    /// The interaction as it will be stored (`status` pending).
    pub interaction: Interaction,
    /// The most pending interactions its session may hold (429 past it).
    pub max_pending_per_session: u64,
    /// Who created it (the token's name).
    pub actor: String,
}

/// Outcome of [`InteractionStore::create_interaction`].
#[derive(Debug, Clone)]
pub enum CreateOutcome {
    /// Stored now.
    Created(Box<InteractionView>),
    /// The same id with an identical request was stored before: idempotent.
    Existing(Box<InteractionView>),
    /// The same id with a different request was stored before.
    Conflict(Box<InteractionView>),
    /// The session has too many pending interactions.
    TooManyPending,
}

/// An answer to store.
#[derive(Debug, Clone)]
pub struct NewAnswer {
    /// The interaction.
    pub id: String,
    /// The answer, parts already stored as blobs.
    pub response: StoredResponse,
    /// The signed decision, for a tool approval.
    pub approval: Option<Envelope>,
    /// Who answered (token name, `timeout`, an operator's name).
    pub answered_by: String,
    /// When.
    pub answered_at: OffsetDateTime,
    /// Extra audit details (approver, caller, edit, grant...), merged into the
    /// `interaction.answered` entry.
    pub audit: BTreeMap<String, Value>,
}

/// Outcome of [`InteractionStore::answer_interaction`] and [`InteractionStore::cancel_interaction`].
#[derive(Debug, Clone)]
pub enum TransitionOutcome {
    /// This call moved it out of `pending`.
    Done(Box<InteractionView>),
    /// It was already answered: the winner.
    AlreadyAnswered(Box<InteractionView>),
    /// It had expired or was cancelled.
    Gone(Box<InteractionView>),
    /// No such interaction.
    NotFound,
}

/// Which interactions to list.
#[derive(Debug, Clone, Default)]
pub struct ListFilter {
    /// `None` for every status.
    pub status: Option<InteractionStatus>,
    /// Only this session.
    pub session_id: Option<String>,
    /// Page size.
    pub limit: u32,
    /// Continue below this position (from a previous page's `next_cursor`).
    pub before: Option<i64>,
}

/// A page of interactions, newest first.
#[derive(Debug, Clone)]
pub struct ListPage {
    /// The page.
    pub items: Vec<InteractionView>,
    /// Where the next page starts, when there is one.
    pub next_before: Option<i64>,
}

/// An API token as stored (only the secret's hash).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenRecord {
    /// The public part.
    pub info: TokenInfo,
    /// SHA-256 of the secret, hex.
    pub hash: String,
}

/// Outcome of [`TokenStore::create_token`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TokenCreateOutcome {
    /// Stored.
    Created,
    /// A token of that name exists.
    NameTaken,
    /// A token whose name reads alike exists
    /// ([`lev_protocol::ids::fold_name`]): its name.
    LooksLike(String),
}

/// Whether [`TokenStore::create_token`] refuses a name that reads like an
/// existing token's ([`lev_protocol::ids::fold_name`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AlikeNames {
    /// Refuse it ([`TokenCreateOutcome::LooksLike`]): every token people
    /// make.
    Refuse,
    /// Allow it: the first start's `admin`, which must not fail on a token
    /// someone named `Admin` before names were compared folded.
    Allow,
}

/// Where lev keeps its state: every part below, one implementation per
/// backend.
///
/// Every write is committed before it returns `Ok` and before its events are
/// announced on [`EventStore::subscribe`].
pub trait Store:
    InteractionStore
    + EventStore
    + TokenStore
    + AuditStore
    + BlobStore
    + TaskStore
    + GateStore
    + KeyStore
    + DashboardSessionStore
    + OperatorStore
    + WebhookStore
    + PeopleKeyStore
    + Send
    + Sync
    + 'static
{
    /// `sqlite` or `postgres`, as `/v1/health` reports it.
    fn kind(&self) -> &'static str;
}

/// Interactions: created idempotently, read, listed, and moved out of
/// `pending` by compare-and-set. Every [`Store`] is one.
#[async_trait]
pub trait InteractionStore: Send + Sync + 'static {
    /// Store a new interaction, idempotently by id.
    async fn create_interaction(&self, new: NewInteraction) -> Result<CreateOutcome>;

    /// One interaction with its answer and approval.
    async fn get_interaction(&self, id: &str) -> Result<Option<InteractionView>>;

    /// A page of interactions, newest first.
    async fn list_interactions(&self, filter: ListFilter) -> Result<ListPage>;

    /// Compare-and-set `pending` -> `answered`.
    async fn answer_interaction(&self, answer: NewAnswer) -> Result<TransitionOutcome>;

    /// Compare-and-set `pending` -> `cancelled`, by `actor`.
    async fn cancel_interaction(&self, id: &str, actor: &str) -> Result<TransitionOutcome>;

    /// Apply `on_timeout` to every pending interaction whose `expires_at` is at
    /// or before `now`; returns those it moved.
    async fn expire_due(&self, now: OffsetDateTime) -> Result<Vec<InteractionView>>;

    /// How many interactions are pending (all sessions), for metrics.
    async fn count_pending(&self) -> Result<u64>;

    /// How human review performed for the interactions created in
    /// `[from, to)` (`GET /v1/stats`), per kind and policy rule. Provided:
    /// computed from [`InteractionStore::list_interactions`], the same on
    /// every backend.
    async fn interaction_stats(
        &self,
        from: OffsetDateTime,
        to: OffsetDateTime,
    ) -> Result<lev_protocol::stats::Stats> {
        stats::by_listing(self, from, to).await
    }

    /// The earliest `expires_at` among pending interactions.
    async fn next_expiry(&self) -> Result<Option<OffsetDateTime>>;
}

/// The committed events, as they commit and read back by seq. Every
/// [`Store`] is one.
#[async_trait]
pub trait EventStore: Send + Sync + 'static {
    /// Committed events, as they commit (on any replica sharing the
    /// database), in increasing seq. Another replica's events reach this
    /// one's subscribers shortly after their commit, so a new subscriber may
    /// also be told of events committed just before it subscribed: skip
    /// seqs already seen. The feed keeps a bounded number of events and
    /// bytes ([`feed`]): a subscriber that falls behind gets `Lagged` and
    /// reads what it missed with [`EventStore::events_after`].
    fn subscribe(&self) -> EventReceiver;

    /// Events after `seq`, oldest first, at most `limit`.
    async fn events_after(&self, seq: i64, limit: u32) -> Result<Vec<StoredEvent>>;

    /// The last committed event's seq (0 when none).
    async fn last_event_seq(&self) -> Result<i64>;
}

/// How soon a token revoked (or changed) on one process is refused by
/// [`TokenStore::token_by_hash`] on every other process sharing the
/// database.
pub const TOKEN_CHANGES_SEEN_WITHIN: std::time::Duration = std::time::Duration::from_millis(100);

/// API tokens (only their secrets' hashes). Every [`Store`] is one.
#[async_trait]
pub trait TokenStore: Send + Sync + 'static {
    /// Store a token (its hash only), unless a token of that name exists
    /// or, with [`AlikeNames::Refuse`], one whose name folds alike
    /// ([`lev_protocol::ids::fold_name`]), decided in the inserting
    /// transaction.
    async fn create_token(
        &self,
        token: TokenRecord,
        actor: &str,
        alike: AlikeNames,
    ) -> Result<TokenCreateOutcome>;

    /// Every token, by name.
    async fn list_tokens(&self) -> Result<Vec<TokenInfo>>;

    /// Delete a token, revoke the keys registered to its name, and void its
    /// votes on pending interactions (each such interaction's
    /// `interaction.voted` event, the voided votes listed in the
    /// `token.revoked` audit entry as `votes_voided`), in one transaction;
    /// false when there was none.
    async fn revoke_token(&self, name: &str, actor: &str) -> Result<bool>;

    /// The token whose secret hashes to `hash`. A backend may answer from a
    /// cache of its process (every request makes this lookup), but a token
    /// revoked or changed by any process sharing the database is not
    /// returned once the revocation returned on this process, nor later
    /// than [`TOKEN_CHANGES_SEEN_WITHIN`] after it committed on another.
    async fn token_by_hash(&self, hash: &str) -> Result<Option<TokenRecord>>;

    /// Whether any token of `role` exists.
    async fn has_token_with_role(&self, role: Role) -> Result<bool>;
}

/// The hash-chained audit log. Every [`Store`] is one.
#[async_trait]
pub trait AuditStore: Send + Sync + 'static {
    /// Append an audit entry on its own (for changes with no row of their own).
    async fn append_audit(&self, record: AuditRecord) -> Result<AuditEntry>;

    /// Audit entries after `seq`, oldest first, at most `limit`.
    async fn audit_after(&self, seq: u64, limit: u32) -> Result<Vec<AuditEntry>>;

    /// The chain's head: the last entry's seq and hash (0 and the genesis hash when empty).
    async fn audit_head(&self) -> Result<(u64, String)>;
}

/// Attachments' bytes, by their SHA-256. Every [`Store`] is one.
#[async_trait]
pub trait BlobStore: Send + Sync + 'static {
    /// Store an attachment's bytes under their SHA-256 (hex); idempotent.
    /// They are served (`get_blob`) only once an answer whose parts name
    /// them commits: the winning answer records them in its transaction, so
    /// a losing answer's attachments are never kept as the server's.
    async fn put_blob(&self, sha256: &str, media_type: &str, bytes: Vec<u8>) -> Result<()>;

    /// An attachment's media type and bytes.
    async fn get_blob(&self, sha256: &str) -> Result<Option<(String, Vec<u8>)>>;
}

#[cfg(test)]
mod tests {
    use super::{StoreError, io_may_pass};

    #[test]
    fn io_errors_that_may_pass_are_unavailable() {
        use std::io::{Error, ErrorKind};
        for raw in [5, 12, 23, 24, 28, 30] {
            let e = Error::from_raw_os_error(raw);
            assert!(io_may_pass(&e), "{raw}: {e}");
            assert!(
                matches!(StoreError::io("blobs/x", e), StoreError::Unavailable(m) if m.starts_with("blobs/x: ")),
                "{raw}"
            );
        }
        for e in [
            Error::from(ErrorKind::NotFound),
            Error::from(ErrorKind::PermissionDenied),
            Error::from(ErrorKind::InvalidData),
        ] {
            assert!(!io_may_pass(&e), "{e}");
            assert!(matches!(StoreError::io("x", e), StoreError::Io { .. }));
        }
    }
}
