//! Webhooks (SPEC section 14): endpoints added by an admin, deliveries
//! written by the store in the same transaction as their event, and a
//! dispatcher ([`dispatch`]) that sends them with Standard Webhooks
//! signatures ([`sign`]), retrying with backoff and jitter until the retry
//! horizon.
//!
//! A secret is `whsec_` and base64 of its bytes; the HMAC key is the bytes.
//! It is stored sealed (the endpoint's id as associated data) with the
//! key-encryption key when the server has one, else with `secrets.key` in the
//! data dir (made on first start, mode 0600), so a copy of the database alone
//! holds no usable secret; it is shown once, when it is made.

pub mod dispatch;
pub mod sign;

use lev_approval::{decode_base64, encode_base64};
use lev_protocol::api::{Webhook, WebhookAttempt, WebhookCreate, WebhookDelivery};
use lev_store::{DeliveryRecord, Endpoint, EndpointKind};
use time::OffsetDateTime;

pub use crate::config::{RetryPolicy, WebhookSettings, parse_duration};
use crate::error::ApiError;
use crate::kek::Kek;
use crate::outbound::OutboundPolicy;
use crate::state::AppState;

/// Most endpoints a server keeps.
const MAX_ENDPOINTS: usize = 100;
/// The secret's prefix (Standard Webhooks).
pub const SECRET_PREFIX: &str = "whsec_";

/// The file in the data dir that seals webhook secrets when the server has
/// no key-encryption key.
pub const SECRETS_KEY_FILE: &str = "secrets.key";

/// The keys that seal and open webhook secrets: the key-encryption key
/// first when given; with SQLite, also the data dir's `secrets.key`, made
/// (0600) when missing.
///
/// # Errors
/// When the data dir's key cannot be read or written.
pub fn secret_keys(
    kek: Option<std::sync::Arc<Kek>>,
    data_dir: Option<&std::path::Path>,
) -> Result<Vec<std::sync::Arc<Kek>>, String> {
    let mut keys: Vec<std::sync::Arc<Kek>> = kek.into_iter().collect();
    if let Some(dir) = data_dir {
        let path = dir.join(SECRETS_KEY_FILE);
        if !path.exists() {
            let text = Kek::generate_base64()?;
            let mut options = std::fs::OpenOptions::new();
            options.write(true).create_new(true);
            #[cfg(unix)]
            {
                use std::os::unix::fs::OpenOptionsExt as _;
                options.mode(0o600);
            }
            match options.open(&path) {
                Ok(mut f) => {
                    use std::io::Write as _;
                    f.write_all(format!("{text}\n").as_bytes())
                        .and_then(|()| f.sync_all())
                        .map_err(|e| format!("{}: {e}", path.display()))?;
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(format!("{}: {e}", path.display())),
            }
        }
        let local =
            Kek::from_file(&path).map_err(|e| e.replace("--key-encryption-key-file ", ""))?;
        keys.push(std::sync::Arc::new(local));
    }
    Ok(keys)
}

/// A new secret: `whsec_` and base64 of 32 random bytes.
///
/// # Errors
/// When the system has no randomness.
pub fn new_secret() -> Result<String, String> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).map_err(|e| format!("no randomness: {e}"))?;
    Ok(format!("{SECRET_PREFIX}{}", encode_base64(&bytes)))
}

/// The HMAC key of a `whsec_` secret.
///
/// # Errors
/// A message saying what the secret should look like.
pub fn secret_key(secret: &str) -> Result<Vec<u8>, String> {
    let expected = "expected whsec_ followed by base64 of 24 to 64 random bytes";
    let body = secret
        .trim()
        .strip_prefix(SECRET_PREFIX)
        .ok_or_else(|| format!("{expected}, found no whsec_ prefix"))?;
    let bytes =
        decode_base64(body).map_err(|_| format!("{expected}, found text that is not base64"))?;
    if !(24..=64).contains(&bytes.len()) {
        return Err(format!("{expected}, found {} bytes", bytes.len()));
    }
    Ok(bytes)
}

fn seal_secret(keys: &[std::sync::Arc<Kek>], id: &str, secret: &str) -> Result<String, ApiError> {
    match keys.first() {
        Some(kek) => kek
            .seal(&format!("webhook:{id}"), secret)
            .map_err(ApiError::Internal),
        None => Ok(secret.to_owned()),
    }
}

/// The secret of a stored endpoint, opened with the first key that opens it.
///
/// # Errors
/// When no key of this server opens it (another key-encryption key, or
/// another data dir's `secrets.key`).
pub fn open_secret(keys: &[std::sync::Arc<Kek>], id: &str, stored: &str) -> Result<String, String> {
    if !crate::kek::is_sealed(stored) {
        return Ok(stored.to_owned());
    }
    let aad = format!("webhook:{id}");
    keys.iter()
        .find_map(|k| k.open(&aad, stored).ok())
        .ok_or_else(|| {
            format!(
                "webhook {id}: its secret does not open with this server's keys: every server \
                 sharing the database needs the same --key-encryption-key-file"
            )
        })
}

/// Check a webhook URL: http(s), a host, not too long, no credentials,
/// and a host lev may reach ([`crate::outbound`]: never its own listener,
/// nor loopback, this host, link-local or cloud metadata addresses unless
/// `--webhook-allow` names them), however the host is spelled.
///
/// # Errors
/// A message naming what is wrong.
pub fn check_url(url: &str, policy: &OutboundPolicy) -> Result<(), String> {
    policy.check_url(url).map(|_| ())
}

/// The wire form of a stored endpoint.
#[must_use]
pub fn view(e: &Endpoint) -> Webhook {
    Webhook {
        id: e.id.clone(),
        kind: e.kind.as_str().to_owned(),
        url: e.url.clone(),
        events: e.events.clone(),
        created_by: e.created_by.clone(),
        created_at: e.created_at,
        disabled_at: e.disabled_at,
        disabled_reason: e.disabled_reason.clone(),
        secret: None,
    }
}

/// The wire form of a delivery.
#[must_use]
pub fn delivery_view(d: DeliveryRecord) -> WebhookDelivery {
    WebhookDelivery {
        id: d.id,
        event: d.event_kind,
        state: d.state.as_str().to_owned(),
        created_at: d.created_at,
        next_attempt_at: d.next_attempt_at,
        attempts: d
            .attempts
            .into_iter()
            .map(|a| WebhookAttempt {
                at: a.at,
                status: a.status,
                error: a.error,
                duration_ms: a.duration_ms,
            })
            .collect(),
    }
}

/// Add an endpoint; the answer carries its secret, this once.
///
/// # Errors
/// 422 naming the field for a bad URL, event or secret; 409 past the most
/// endpoints.
pub async fn add(state: &AppState, req: WebhookCreate, actor: &str) -> Result<Webhook, ApiError> {
    check_url(&req.url, &state.settings().webhooks.outbound_policy()).map_err(ApiError::Invalid)?;
    let events = lev_protocol::api::check_event_kinds(&req.events).map_err(ApiError::Invalid)?;
    let secret = match req.secret {
        Some(s) => {
            let s = s.trim().to_owned();
            secret_key(&s).map_err(|e| ApiError::Invalid(format!("secret: {e}")))?;
            s
        }
        None => new_secret().map_err(ApiError::Internal)?,
    };
    let existing = state.store().endpoints().await?;
    if existing.len() >= MAX_ENDPOINTS {
        return Err(ApiError::TooMany(format!(
            "at most {MAX_ENDPOINTS} webhooks; remove one first"
        )));
    }
    let id = crate::ids::new_id("wh_", OffsetDateTime::now_utc())
        .map_err(|e| ApiError::Internal(format!("no randomness: {e}")))?;
    let endpoint = Endpoint {
        secret: seal_secret(&state.settings().webhooks.secret_keys, &id, &secret)?,
        id,
        kind: EndpointKind::Http,
        url: req.url,
        events,
        created_by: actor.to_owned(),
        created_at: OffsetDateTime::now_utc(),
        disabled_at: None,
        disabled_reason: None,
    };
    state.store().put_endpoint(endpoint.clone()).await?;
    state.webhooks_changed();
    let mut out = view(&endpoint);
    out.secret = Some(secret);
    Ok(out)
}
