//! Bearer tokens: who is calling, with which role, acting for which caller.
//!
//! A token is `lev_` + 32 random bytes in base64url. Only its SHA-256 (hex) is
//! stored, and every request looks it up in the store
//! ([`lev_store::TokenStore::token_by_hash`]: on PostgreSQL from the
//! replica's cache, told of every change over LISTEN), so a revocation takes
//! effect on the very next request on the replica that revoked, and within
//! 100 ms on every other.

use std::path::Path;

use axum::extract::FromRequestParts;
use axum::http::header::AUTHORIZATION;
use axum::http::request::Parts;
use lev_protocol::api::{Role, TokenInfo};
use lev_store::{Store, TokenCreateOutcome, TokenRecord};
use sha2::{Digest, Sha256};
use time::OffsetDateTime;

use crate::error::{ApiError, ApiResult};
use crate::state::AppState;

/// The admin token file's name in the data dir.
pub const ADMIN_TOKEN_FILE: &str = "admin.token";

/// Who is calling: the token's name (the identity written into decisions),
/// its role, and the caller it is bound to.
#[derive(Debug, Clone)]
pub struct Principal {
    /// The token's name.
    pub name: String,
    /// Its role.
    pub role: Role,
    /// For a worker token bound to one caller: that caller.
    pub caller: Option<String>,
    /// The session patterns the token is limited to; `None`, any session
    /// (but an operator token without patterns acts in none).
    pub sessions: Option<Vec<String>>,
}

impl Principal {
    /// Allow the call when the role is one of `roles` (admin always may).
    ///
    /// # Errors
    /// 403 otherwise.
    pub fn require(&self, roles: &[Role]) -> ApiResult<()> {
        if self.role == Role::Admin || roles.contains(&self.role) {
            return Ok(());
        }
        let wanted: Vec<&str> = roles.iter().map(|r| r.as_str()).collect();
        Err(ApiError::forbidden(format!(
            "a {} token may not do this; it needs the role {} (or admin)",
            self.role.as_str(),
            wanted.join(" or ")
        )))
    }

    /// The caller a request acts for: the bound caller when the token has one
    /// (naming another is 403), else what the request names.
    ///
    /// # Errors
    /// 403 `caller_mismatch` when a bound token names another caller.
    pub fn effective_caller(&self, named: Option<&str>) -> ApiResult<Option<String>> {
        match (&self.caller, named) {
            (Some(bound), Some(named)) if bound != named => Err(ApiError::Forbidden {
                code: "caller_mismatch",
                message: format!(
                    "this token acts for caller {bound:?} only, the request names {named:?}"
                ),
            }),
            (Some(bound), _) => Ok(Some(bound.clone())),
            (None, named) => Ok(named.map(str::to_owned)),
        }
    }

    /// Whether the token may act in `session_id` (SPEC section 12). Admin
    /// tokens act everywhere; an operator token must name its sessions.
    ///
    /// # Errors
    /// 403 `session_scope` otherwise.
    pub fn check_session(&self, session_id: &str) -> ApiResult<()> {
        if self.role == Role::Admin {
            return Ok(());
        }
        match &self.sessions {
            Some(patterns)
                if patterns
                    .iter()
                    .any(|p| lev_protocol::ids::session_pattern_matches(p, session_id)) =>
            {
                Ok(())
            }
            None if self.role != Role::Operator => Ok(()),
            None => Err(ApiError::Forbidden {
                code: "session_scope",
                message: format!(
                    "operator token {:?} names no sessions; create one with --sessions \
                     (e.g. lev token create NAME --role operator --sessions 'ci-*')",
                    self.name
                ),
            }),
            Some(patterns) => Err(ApiError::Forbidden {
                code: "session_scope",
                message: format!(
                    "token {:?} may act only in sessions matching {}, not in {session_id:?}",
                    self.name,
                    describe_patterns(patterns)
                ),
            }),
        }
    }

    /// Whether a bound worker token may touch an interaction acting for `caller`.
    ///
    /// # Errors
    /// 403 `caller_mismatch` when the token is bound to another caller.
    pub fn check_owns(&self, caller: Option<&str>) -> ApiResult<()> {
        match &self.caller {
            Some(bound) if self.role == Role::Worker && caller != Some(bound.as_str()) => {
                Err(ApiError::Forbidden {
                    code: "caller_mismatch",
                    message: format!("this token acts for caller {bound:?} only"),
                })
            }
            _ => Ok(()),
        }
    }
}

/// The first few patterns, for a message.
fn describe_patterns(patterns: &[String]) -> String {
    let shown: Vec<String> = patterns.iter().take(5).map(|p| format!("{p:?}")).collect();
    if patterns.len() > shown.len() {
        format!(
            "{} and {} more",
            shown.join(", "),
            patterns.len() - shown.len()
        )
    } else {
        shown.join(", ")
    }
}

/// SHA-256 of a token's secret, lowercase hex: what the store keeps.
pub fn token_hash(secret: &str) -> String {
    crate::ids::hex(&Sha256::digest(secret.as_bytes()))
}

/// A fresh token secret.
///
/// # Errors
/// When the system has no randomness to give.
pub fn new_secret() -> Result<String, getrandom::Error> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes)?;
    Ok(format!("lev_{}", lev_approval::encode_base64url(&bytes)))
}

impl FromRequestParts<AppState> for Principal {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> ApiResult<Self> {
        // Authenticated by the dashboard's session cookie (crate::session_auth).
        if let Some(principal) = parts.extensions.get::<Self>() {
            crate::log::note_token(&parts.extensions, &principal.name);
            return Ok(principal.clone());
        }
        let header = parts
            .headers
            .get(AUTHORIZATION)
            .ok_or_else(|| {
                ApiError::Unauthorized(
                    "no token: send the header Authorization: Bearer <token>".into(),
                )
            })?
            .to_str()
            .map_err(|_| ApiError::Unauthorized("the Authorization header is not text".into()))?;
        let secret = header
            .strip_prefix("Bearer ")
            .or_else(|| header.strip_prefix("bearer "))
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .ok_or_else(|| {
                ApiError::Unauthorized("expected Authorization: Bearer <token>".into())
            })?;
        let record = state
            .timed(
                "token_by_hash",
                state.store().token_by_hash(&token_hash(secret)),
            )
            .await?
            .ok_or_else(|| ApiError::Unauthorized("unknown or revoked token".into()))?;
        crate::log::note_token(&parts.extensions, &record.info.name);
        Ok(Self {
            name: record.info.name,
            role: record.info.role,
            caller: record.info.caller,
            sessions: record.info.sessions,
        })
    }
}

/// Why the admin token could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum BootstrapError {
    /// The store refused.
    #[error(transparent)]
    Store(#[from] lev_store::StoreError),
    /// The token file could not be written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The cause.
        source: std::io::Error,
    },
    /// A token named `admin` exists with another role.
    #[error("a token named \"admin\" exists but is not an admin token")]
    NameTaken,
    /// No randomness.
    #[error("no randomness available: {0}")]
    Random(String),
}

/// Make sure an admin token exists: on first start, create token `admin` and
/// write its secret to `<data_dir>/admin.token` (mode 0600). Returns the admin
/// secret from that file, when it is there, for the dashboard URL.
///
/// # Errors
/// When the store or the file system refuses.
pub async fn ensure_admin_token(
    store: &dyn Store,
    data_dir: &Path,
) -> Result<Option<String>, BootstrapError> {
    let path = data_dir.join(ADMIN_TOKEN_FILE);
    if !store.has_token_with_role(Role::Admin).await? {
        let secret = new_secret().map_err(|e| BootstrapError::Random(e.to_string()))?;
        // The file first: a crash between the two leaves a file whose token
        // is unknown, and the next start makes a new one and overwrites it.
        lev_store::files::write_secret_file(&path, &format!("{secret}\n")).map_err(|source| {
            BootstrapError::Io {
                path: path.display().to_string(),
                source,
            }
        })?;
        let record = TokenRecord {
            info: TokenInfo {
                name: "admin".into(),
                role: Role::Admin,
                caller: None,
                sessions: None,
                created_at: OffsetDateTime::now_utc(),
            },
            hash: token_hash(&secret),
        };
        // `admin` is made even beside an `Admin` someone made before names
        // were compared folded: a first start must not fail on it.
        if store
            .create_token(record, "system", lev_store::AlikeNames::Allow)
            .await?
            != TokenCreateOutcome::Created
        {
            // Another server on the same database made it first (both
            // started on an empty database): its admin token stands, and
            // this file would name no token.
            let _ = std::fs::remove_file(&path);
            if store.has_token_with_role(Role::Admin).await? {
                return Ok(None);
            }
            return Err(BootstrapError::NameTaken);
        }
        return Ok(Some(secret));
    }
    Ok(lev_io::files::read_text(&path, lev_io::files::limit::TOKEN)
        .ok()
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty()))
}
