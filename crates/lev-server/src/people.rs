//! People's keys (SPEC section 13): the keys people sign their votes with,
//! registered under their token's name.
//!
//! - `lev key init` registers an Ed25519 key made on the person's machine
//!   ([`register`]), with the person's own token.
//! - The dashboard registers a passkey ([`passkey_options`],
//!   [`register_passkey`]): its registration's client data must carry this
//!   login session's challenge, come from the dashboard's own origin, and
//!   be of type `webauthn.create`; the relying party is that origin's host.
//! - `GET /v1/people/keys` serves every key in force ([`jwks`]); revoking a
//!   token revokes its keys (in the store), and [`revoke`] one key.
//!
//! The server keeps only public keys: it cannot sign a person's vote.

use axum::http::HeaderMap;
use axum::http::header::{HOST, ORIGIN};
use lev_approval::{PersonKey, decode_base64, encode_base64url};
use lev_protocol::api::{
    PasskeyOptions, PasskeyRegistration, PeopleJwks, PersonJwk, PersonKeyRegistered, Role,
};
use lev_store::{NewPersonKey, PersonKeyOutcome};
use serde::Deserialize;
use sha2::{Digest as _, Sha256};
use time::OffsetDateTime;

use crate::auth::Principal;
use crate::error::{ApiError, ApiResult};
use crate::session_auth::SessionInfo;
use crate::state::AppState;

/// The most keys one person may hold in force (CLI keys and passkeys).
pub const MAX_KEYS_PER_PERSON: usize = lev_approval::votes::MAX_KEYS_PER_PERSON;

/// Every key in force, as a JWKS.
///
/// # Errors
/// The store's.
pub async fn jwks(state: &AppState) -> ApiResult<PeopleJwks> {
    let keys = state.store().person_keys(None).await?;
    Ok(PeopleJwks {
        keys: keys.into_iter().map(|k| k.jwk).collect(),
    })
}

fn registering(principal: &Principal) -> ApiResult<()> {
    principal.require(&[Role::Approver])?;
    Ok(())
}

/// Store `jwk` (checked) as a key of `person`: `true` when new. A key the
/// server signs with, or ever did (`/v1/keys`), is refused: the server
/// holds its private half and could sign the person's votes. So is a key
/// that is, or was, another person's, and one of the person's own that
/// was revoked (its old signatures would count again).
async fn add(
    state: &AppState,
    person: &str,
    jwk: PersonJwk,
) -> ApiResult<(bool, PersonKeyRegistered)> {
    let fingerprint =
        PersonKey::fingerprint_of(&jwk).map_err(|e| ApiError::Invalid(format!("the key: {e}")))?;
    let signing_key = |kid: &str| ApiError::Conflict {
        code: "key_taken",
        message: format!(
            "this public key is the server's signing key {kid} (GET /v1/keys), or was: the \
             server holds its private half, so it can never stand for a person; make a key of \
             your own (lev key init)"
        ),
    };
    // The keys in force now, also those another replica just rotated in
    // and this one serves; the store refuses every one ever noted.
    if let Some(own) = state
        .keys()
        .jwks()
        .keys
        .into_iter()
        .find(|k| fingerprint.starts_with(&k.kid))
    {
        return Err(signing_key(&own.kid));
    }
    let outcome = state
        .store()
        .add_person_key(NewPersonKey {
            person: person.to_owned(),
            jwk,
            fingerprint,
            max_keys: MAX_KEYS_PER_PERSON,
            actor: person.to_owned(),
            at: OffsetDateTime::now_utc(),
        })
        .await?;
    let registered = |k: lev_store::PersonKeyRecord| PersonKeyRegistered {
        key: k.jwk,
        person: k.person,
    };
    match outcome {
        PersonKeyOutcome::Added(k) => Ok((true, registered(*k))),
        PersonKeyOutcome::Existing(k) => Ok((false, registered(*k))),
        PersonKeyOutcome::Taken { person: owner } => Err(ApiError::Conflict {
            code: "key_taken",
            message: format!(
                "this public key is (or was) registered to {owner:?}; a key belongs to one person"
            ),
        }),
        PersonKeyOutcome::SigningKey { kid } => Err(signing_key(&kid)),
        PersonKeyOutcome::Revoked { kid } => Err(ApiError::Conflict {
            code: "key_revoked",
            message: format!(
                "this public key was {kid}, and was revoked: a revoked key stays revoked (its \
                 old signatures would count again); make a new key (move the old key file \
                 away, then lev key init)"
            ),
        }),
        PersonKeyOutcome::TooMany => Err(ApiError::TooMany(format!(
            "{person} has {MAX_KEYS_PER_PERSON} keys registered, the most one person may hold; \
             revoke one first (lev key revoke KID)"
        ))),
    }
}

/// Register an Ed25519 public key (`lev key init`) to the token's own name.
///
/// # Errors
/// 403 for a token that is not an approver's (or admin's); 422 for a key
/// that is not a valid Ed25519 public key or sets `kid`, `rp_id` or
/// `credential_id`; 409 `key_taken`; 429 past the limit.
pub async fn register(
    state: &AppState,
    principal: &Principal,
    jwk: PersonJwk,
) -> ApiResult<(bool, PersonKeyRegistered)> {
    registering(principal)?;
    if !jwk.kid.is_empty() {
        return Err(ApiError::Invalid(
            "kid: the server names the key (person:NAME:N); leave kid out".into(),
        ));
    }
    if jwk.rp_id.is_some() || jwk.credential_id.is_some() {
        return Err(ApiError::Invalid(
            "rp_id, credential_id: a passkey is registered from the dashboard \
             (POST /v1/people/passkeys)"
                .into(),
        ));
    }
    if (jwk.kty.as_str(), jwk.crv.as_str()) != ("OKP", "Ed25519") {
        return Err(ApiError::Invalid(format!(
            "kty, crv: expected an Ed25519 key (\"OKP\", \"Ed25519\"), found {:?}, {:?}",
            jwk.kty.chars().take(20).collect::<String>(),
            jwk.crv.chars().take(20).collect::<String>()
        )));
    }
    let clean = lev_approval::votes::ed25519_jwk(
        &decode_base64(&jwk.x).map_err(|e| ApiError::Invalid(format!("x: {e}")))?,
    );
    add(state, &principal.name, clean).await
}

/// The registration challenge of a login session: bound to it, and the
/// same on every replica (no state).
fn registration_challenge(session: &SessionInfo) -> Vec<u8> {
    let mut h = Sha256::new();
    h.update(b"lev passkey registration\0");
    h.update(session.csrf.as_bytes());
    h.finalize().to_vec()
}

/// The relying party id a dashboard request is for: its `Host`'s name.
fn rp_id_of(headers: &HeaderMap, state: &AppState) -> ApiResult<String> {
    let host = match state.settings().public_url.as_deref() {
        Some(url) => url
            .split_once("://")
            .map_or(url, |(_, rest)| rest)
            .split('/')
            .next()
            .unwrap_or_default()
            .to_owned(),
        None => headers
            .get(HOST)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned(),
    };
    let name = match host.rsplit_once(':') {
        Some((h, port)) if port.bytes().all(|b| b.is_ascii_digit()) && !h.ends_with(']') => h,
        _ => host.as_str(),
    };
    let is_ip = name.starts_with('[') || name.parse::<std::net::IpAddr>().is_ok();
    if name.is_empty() || is_ip {
        return Err(ApiError::Invalid(format!(
            "passkeys need the dashboard opened on a domain name, not {:?}: open it as \
             http://localhost:PORT (or behind --public-url with a name)",
            name.chars().take(100).collect::<String>()
        )));
    }
    Ok(name.to_ascii_lowercase())
}

fn person_handle(person: &str) -> String {
    let digest = Sha256::digest(format!("lev-person\0{person}").as_bytes());
    encode_base64url(&digest[..16])
}

fn dashboard_only(session: Option<&SessionInfo>) -> ApiResult<&SessionInfo> {
    session.ok_or_else(|| ApiError::Forbidden {
        code: "dashboard_only",
        message: "passkeys are registered in the dashboard, logged in as the person; \
                  from the command line, use lev key init"
            .into(),
    })
}

/// What the dashboard needs to make a passkey for the logged-in person.
///
/// # Errors
/// 403 outside a dashboard session; 422 when the dashboard is not opened on
/// a domain name.
pub async fn passkey_options(
    state: &AppState,
    principal: &Principal,
    session: Option<&SessionInfo>,
    headers: &HeaderMap,
) -> ApiResult<PasskeyOptions> {
    registering(principal)?;
    let session = dashboard_only(session)?;
    let rp_id = rp_id_of(headers, state)?;
    let existing = state.store().person_keys(Some(&principal.name)).await?;
    Ok(PasskeyOptions {
        challenge: encode_base64url(&registration_challenge(session)),
        rp_id,
        rp_name: "lev".into(),
        user_id: person_handle(&principal.name),
        user_name: principal.name.clone(),
        exclude_credentials: existing
            .into_iter()
            .filter_map(|k| k.jwk.credential_id)
            .collect(),
    })
}

#[derive(Deserialize)]
struct CreateClientData {
    #[serde(rename = "type")]
    kind: String,
    challenge: String,
    origin: String,
}

/// Register the passkey the dashboard made.
///
/// # Errors
/// 403 outside a dashboard session, or client data from another origin;
/// 422 for client data of another type or challenge, an algorithm other
/// than ES256 or EdDSA, or a key that does not parse; 409 `key_taken`;
/// 429 past the limit.
pub async fn register_passkey(
    state: &AppState,
    principal: &Principal,
    session: Option<&SessionInfo>,
    headers: &HeaderMap,
    reg: PasskeyRegistration,
) -> ApiResult<(bool, PersonKeyRegistered)> {
    registering(principal)?;
    let session = dashboard_only(session)?;
    let invalid = |m: String| ApiError::Invalid(m);
    let client = decode_base64(&reg.client_data_json)
        .map_err(|e| invalid(format!("client_data_json: {e}")))?;
    let text =
        std::str::from_utf8(&client).map_err(|_| invalid("client_data_json: not UTF-8".into()))?;
    lev_protocol::json::check_strict_json(text)
        .map_err(|e| invalid(format!("client_data_json: {e}")))?;
    let data: CreateClientData =
        serde_json::from_str(text).map_err(|e| invalid(format!("client_data_json: {e}")))?;
    if data.kind != "webauthn.create" {
        return Err(invalid(format!(
            "client_data_json: type {:?}, expected \"webauthn.create\"",
            data.kind.chars().take(40).collect::<String>()
        )));
    }
    if decode_base64(&data.challenge).ok() != Some(registration_challenge(session)) {
        return Err(invalid(
            "client_data_json: the challenge is not this login session's; ask for new \
             options (GET /v1/people/passkeys/options)"
                .into(),
        ));
    }
    // The passkey was made on the dashboard's own origin.
    let mut own = headers.clone();
    own.insert(
        ORIGIN,
        data.origin
            .parse()
            .map_err(|_| invalid("client_data_json: the origin is not a header value".into()))?,
    );
    crate::session_auth::check_origin(&own, state.settings())?;
    let rp_id = rp_id_of(headers, state)?;
    let spki = decode_base64(&reg.public_key).map_err(|e| invalid(format!("public_key: {e}")))?;
    let credential =
        decode_base64(&reg.credential_id).map_err(|e| invalid(format!("credential_id: {e}")))?;
    if credential.is_empty() || credential.len() > 1023 {
        return Err(invalid(format!(
            "credential_id: expected 1 to 1023 bytes, found {}",
            credential.len()
        )));
    }
    let mut jwk =
        lev_approval::votes::passkey_jwk(&spki, reg.alg).map_err(|e| invalid(e.to_string()))?;
    jwk.rp_id = Some(rp_id);
    jwk.credential_id = Some(encode_base64url(&credential));
    add(state, &principal.name, jwk).await
}

/// Revoke key `kid`: the person's own, or anyone's by an admin.
///
/// # Errors
/// 404 when no such key is in force; 403 for someone else's key.
pub async fn revoke(state: &AppState, principal: &Principal, kid: &str) -> ApiResult<()> {
    registering(principal)?;
    let owner = lev_approval::votes::parse_person_kid(kid)
        .map(|(name, _)| name)
        .ok_or_else(|| {
            ApiError::NotFound(format!(
                "no key {:?}",
                kid.chars().take(140).collect::<String>()
            ))
        })?;
    if owner != principal.name && principal.role != Role::Admin {
        return Err(ApiError::forbidden(format!(
            "key {kid} is {owner}'s; only they or an admin may revoke it"
        )));
    }
    match state
        .store()
        .revoke_person_key(kid, &principal.name)
        .await?
    {
        Some(_) => Ok(()),
        None => Err(ApiError::NotFound(format!("no key {kid} in force"))),
    }
}
