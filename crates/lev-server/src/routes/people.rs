//! People's keys (SPEC section 13): `GET /v1/people/keys` (no token),
//! `POST /v1/people/keys` (`lev key init`), `DELETE /v1/people/keys/{kid}`,
//! and the dashboard's passkeys: `GET /v1/people/passkeys/options`,
//! `POST /v1/people/passkeys`.

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use lev_protocol::api::{
    ErrorBody, PasskeyOptions, PasskeyRegistration, PeopleJwks, PersonJwk, PersonKeyRegistered,
};

use crate::auth::Principal;
use crate::body::JsonBody;
use crate::error::ApiResult;
use crate::session_auth::CurrentSession;
use crate::state::AppState;

fn created(new: bool) -> StatusCode {
    if new {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    }
}

/// `GET /v1/people/keys` (no token): every person's keys in force, with
/// which signed votes are checked offline.
#[utoipa::path(
    get, path = "/v1/people/keys", tag = "people", security(()),
    responses((status = 200, description = "People's public keys in force, by person; kid person:NAME:N", body = PeopleJwks))
)]
pub async fn keys(State(state): State<AppState>) -> ApiResult<Json<PeopleJwks>> {
    Ok(Json(crate::people::jwks(&state).await?))
}

/// `POST /v1/people/keys` (approver): register an Ed25519 public key to
/// the token's own name (what `lev key init` sends).
#[utoipa::path(
    post, path = "/v1/people/keys", tag = "people", request_body = PersonJwk,
    responses(
        (status = 201, description = "Registered", body = PersonKeyRegistered),
        (status = 200, description = "Registered to this person before", body = PersonKeyRegistered),
        (status = 409, description = "A key that is or was someone else's, or one of the server's signing keys, present or past (key_taken); this person's own revoked key (key_revoked)", body = ErrorBody),
        (status = 429, description = "The person holds the most keys one may", body = ErrorBody),
    )
)]
pub async fn register(
    State(state): State<AppState>,
    principal: Principal,
    JsonBody(jwk): JsonBody<PersonJwk>,
) -> ApiResult<(StatusCode, Json<PersonKeyRegistered>)> {
    let (new, key) = crate::people::register(&state, &principal, jwk).await?;
    Ok((created(new), Json(key)))
}

/// `DELETE /v1/people/keys/{kid}` (the key's person, or admin): 204.
#[utoipa::path(
    delete, path = "/v1/people/keys/{kid}", tag = "people",
    params(("kid" = String, Path, description = "person:NAME:N")),
    responses(
        (status = 204, description = "Revoked"),
        (status = 404, description = "No such key in force", body = ErrorBody),
    )
)]
pub async fn revoke(
    State(state): State<AppState>,
    principal: Principal,
    super::PathParam(kid): super::PathParam,
) -> ApiResult<StatusCode> {
    crate::people::revoke(&state, &principal, &kid).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// `GET /v1/people/passkeys/options` (approver, in the dashboard): what
/// `navigator.credentials.create` needs.
#[utoipa::path(
    get, path = "/v1/people/passkeys/options", tag = "people",
    responses(
        (status = 200, description = "The registration options", body = PasskeyOptions),
        (status = 403, description = "Not in a dashboard session (dashboard_only)", body = ErrorBody),
        (status = 422, description = "The dashboard is not opened on a domain name", body = ErrorBody),
    )
)]
pub async fn passkey_options(
    State(state): State<AppState>,
    principal: Principal,
    session: CurrentSession,
    headers: HeaderMap,
) -> ApiResult<Json<PasskeyOptions>> {
    Ok(Json(
        crate::people::passkey_options(&state, &principal, session.0.as_ref(), &headers).await?,
    ))
}

/// `POST /v1/people/passkeys` (approver, in the dashboard): register the
/// passkey just made.
#[utoipa::path(
    post, path = "/v1/people/passkeys", tag = "people", request_body = PasskeyRegistration,
    responses(
        (status = 201, description = "Registered", body = PersonKeyRegistered),
        (status = 200, description = "Registered to this person before", body = PersonKeyRegistered),
        (status = 403, description = "Not in a dashboard session, or made on another origin", body = ErrorBody),
        (status = 409, description = "A key that is or was someone else's, or one of the server's signing keys, present or past (key_taken); this person's own revoked key (key_revoked)", body = ErrorBody),
        (status = 429, description = "The person holds the most keys one may", body = ErrorBody),
    )
)]
pub async fn register_passkey(
    State(state): State<AppState>,
    principal: Principal,
    session: CurrentSession,
    headers: HeaderMap,
    JsonBody(reg): JsonBody<PasskeyRegistration>,
) -> ApiResult<(StatusCode, Json<PersonKeyRegistered>)> {
    let (new, key) =
        crate::people::register_passkey(&state, &principal, session.0.as_ref(), &headers, reg)
            .await?;
    Ok((created(new), Json(key)))
}
