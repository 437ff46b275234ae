//! Tokens: making one, checked the same way whether an admin asks over
//! HTTP (`POST /v1/tokens`) or `lev token create --database` writes it
//! straight into a shared database, with no server (SPEC section 11).

use lev_protocol::api::{Role, TokenCreate, TokenCreated, TokenInfo};
use lev_protocol::validate::check_id;
use lev_store::{Store, TokenCreateOutcome, TokenRecord};
use time::OffsetDateTime;

use crate::auth::{new_secret, token_hash};
use crate::error::{ApiError, ApiResult};

/// Make the token `req` describes, written to the audit log as made by
/// `by`; its secret is in the answer, and only its hash is stored.
///
/// # Errors
/// A name or session pattern that is not valid, a reserved name (or one
/// that reads like it), a caller on a token that is not a worker's (422);
/// a name taken, or one that reads like a token's name (409).
pub async fn create(store: &dyn Store, req: TokenCreate, by: &str) -> ApiResult<TokenCreated> {
    check_id("name", &req.name)?;
    if lev_protocol::ids::is_reserved_token_name(&req.name) {
        return Err(ApiError::Invalid(format!(
            "name: {:?} is reserved or reads like a reserved name (policy, timeout, system, \
             operator, lev, and names starting with person:, group: or task:, are written by \
             lev itself; names are compared ignoring case and the . _ : - at their ends); \
             choose another",
            req.name
        )));
    }
    check_sessions(req.role, req.sessions.as_deref())?;
    if let Some(caller) = &req.caller {
        check_id("caller", caller)?;
        if req.role != Role::Worker {
            return Err(ApiError::Invalid(format!(
                "caller: only a worker token is bound to a caller, found role {}",
                req.role.as_str()
            )));
        }
    }
    let secret = new_secret().map_err(|e| ApiError::Internal(format!("no randomness: {e}")))?;
    let record = TokenRecord {
        info: TokenInfo {
            name: req.name.clone(),
            role: req.role,
            caller: req.caller,
            sessions: req.sessions,
            created_at: OffsetDateTime::now_utc(),
        },
        hash: token_hash(&secret),
    };
    match store
        .create_token(record, by, lev_store::AlikeNames::Refuse)
        .await?
    {
        TokenCreateOutcome::Created => Ok(TokenCreated {
            name: req.name,
            role: req.role,
            token: secret,
        }),
        TokenCreateOutcome::NameTaken => Err(ApiError::Conflict {
            code: "name_taken",
            message: format!("a token named {:?} exists; revoke it first", req.name),
        }),
        TokenCreateOutcome::LooksLike(existing) => Err(ApiError::Conflict {
            code: "name_taken",
            message: format!(
                "a token named {existing:?} exists, and {:?} reads the same (names are compared \
                 ignoring case, and each run of . _ : - counts as one, none at the ends); \
                 choose another name, or revoke {existing:?} first",
                req.name
            ),
        }),
    }
}

/// Make a token in the PostgreSQL database at `url`, with no server
/// running (`lev token create --database URL`); migrates it first, as a
/// server would at start. Audited as made by `system`.
///
/// # Errors
/// A URL that is not PostgreSQL's or does not connect, or what
/// [`create`] refuses; the message says which.
pub async fn create_in_database(url: &str, req: TokenCreate) -> Result<TokenCreated, String> {
    crate::store::check_url(url)?;
    // A PostgreSQL store keeps nothing in the data dir.
    let store = crate::store::open(Some(url), std::path::Path::new(".")).await?;
    create(store.as_ref(), req, "system")
        .await
        .map_err(|e| format!("{e} ({})", e.code()))
}

/// Session patterns: required for operators, allowed for workers, refused
/// for other roles (an approver or admin acts across sessions).
fn check_sessions(role: Role, sessions: Option<&[String]>) -> ApiResult<()> {
    use lev_protocol::ids::{MAX_SESSION_PATTERNS, is_valid_session_pattern};
    match (role, sessions) {
        (Role::Operator, None) => Err(ApiError::Invalid(
            "sessions: an operator token needs the session patterns it may operate \
             (e.g. [\"ci-*\", \"build-7\"]; [\"*\"] for every session)"
                .into(),
        )),
        (Role::Approver | Role::Admin, Some(_)) => Err(ApiError::Invalid(format!(
            "sessions: only operator and worker tokens are limited to sessions, found role {}",
            role.as_str()
        ))),
        (_, Some([])) => Err(ApiError::Invalid(
            "sessions: expected at least one session pattern".into(),
        )),
        (_, Some(list)) if list.len() > MAX_SESSION_PATTERNS => Err(ApiError::Invalid(format!(
            "sessions: at most {MAX_SESSION_PATTERNS} patterns, found {}",
            list.len()
        ))),
        (_, Some(list)) => {
            for (i, p) in list.iter().enumerate() {
                if !is_valid_session_pattern(p) {
                    return Err(ApiError::Invalid(format!(
                        "sessions[{i}]: expected 1 to 128 characters of A-Z a-z 0-9 . _ : - *, found {:?}",
                        p.chars().take(64).collect::<String>()
                    )));
                }
            }
            Ok(())
        }
        _ => Ok(()),
    }
}
