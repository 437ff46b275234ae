//! The dashboard's login sessions as a store part, so that a session opened
//! on one server is recognised, and ended, on every server.
//!
//! Only hashes of the cookie's value are kept: a database dump does not log
//! anybody in.

use async_trait::async_trait;
use time::OffsetDateTime;

use crate::Result;

/// One dashboard session.
#[derive(Clone, PartialEq, Eq)]
pub struct DashboardSession {
    /// SHA-256 of the cookie's value, hex.
    pub id_hash: String,
    /// The hash of the API token the person logged in with.
    pub token_hash: String,
    /// The session's CSRF token.
    pub csrf: String,
    /// When it was opened.
    pub created_at: OffsetDateTime,
    /// When it was last used (kept to the minute or so: see the server).
    pub last_seen: OffsetDateTime,
}

impl std::fmt::Debug for DashboardSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DashboardSession")
            .field("id_hash", &self.id_hash)
            .field("csrf", &"<secret>")
            .field("created_at", &self.created_at)
            .field("last_seen", &self.last_seen)
            .finish_non_exhaustive()
    }
}

/// Where dashboard sessions are kept.
#[async_trait]
pub trait DashboardSessionStore: Send + Sync + 'static {
    /// Store a new session. When more than `max` sessions would be kept,
    /// the least recently seen ones are deleted first.
    async fn create_dashboard_session(&self, session: DashboardSession, max: u32) -> Result<()>;

    /// The session whose cookie hashes to `id_hash`.
    async fn dashboard_session(&self, id_hash: &str) -> Result<Option<DashboardSession>>;

    /// Record that the session was used at `at`.
    async fn touch_dashboard_session(&self, id_hash: &str, at: OffsetDateTime) -> Result<()>;

    /// End a session (nothing when there is none).
    async fn delete_dashboard_session(&self, id_hash: &str) -> Result<()>;

    /// End every session whose last use or opening is before these times.
    async fn delete_stale_dashboard_sessions(
        &self,
        seen_before: OffsetDateTime,
        created_before: OffsetDateTime,
    ) -> Result<u64>;
}
