//! Votes people sign with their own keys (SPEC section 13).
//!
//! A vote is a DSSE envelope of type [`VOTE_PAYLOAD_TYPE`] over a
//! [`VotePayload`]: the call it approves or denies (request id, tool, the
//! SHA-256 of the exact args and of the args to run, conversation, caller,
//! sandbox mode), the decision, its scope, the voter and the time. It is
//! signed either
//!
//! - by an Ed25519 key of `lev key init`: a plain signature over the
//!   pre-authentication encoding (PAE), or
//! - by a passkey: a WebAuthn assertion whose challenge is the SHA-256 of
//!   the PAE. The signature entry then carries the authenticator data and
//!   the client data JSON, and the signature (ES256 in DER, or EdDSA) is
//!   over `authenticator_data || SHA-256(client_data_json)`.
//!
//! People's public keys are a JWKS ([`PeopleKeys`], `GET /v1/people/keys`),
//! each `kid` `person:NAME:N`. A vote verifies only under a key registered
//! to the voter it names, so a server that holds no person's private key
//! cannot make one up, and one person's key cannot vote for another.
//!
//! A decision with more than one vote, or with signed votes, is an approval
//! payload of version 2 whose `votes` carry each vote with its envelope
//! ([`PayloadVote`]); [`VerifiedResponse::signed_approvers`] counts the
//! distinct voters whose signed votes verify and bind the exact decision.

use std::collections::BTreeSet;

use ed25519_dalek::{Signature, VerifyingKey};
use lev_protocol::api::{PeopleJwks, PersonJwk};
use lev_protocol::{Envelope, EnvelopeSignature, VOTE_PAYLOAD_TYPE, VoteBinding};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use time::OffsetDateTime;

use crate::CLOCK_SKEW;
use crate::b64::{decode_base64, encode_base64, encode_base64url};
use crate::keys::{KeyError, SigningKeyPair};
use crate::pae::pae;
use crate::payload::ApprovalPayload;
pub use crate::payload::{PayloadVote, VoteEnvelope, VoteSignature};
use crate::verify::{VerifiedResponse, resolve_approved_call};

/// The only vote payload version this code knows.
pub const VOTE_VERSION: u32 = 1;

/// The most signatures a vote envelope may carry (each is tried against
/// the voter's keys only).
pub const MAX_VOTE_SIGNATURES: usize = 4;

/// The most keys one person may have registered that a vote is tried
/// against; more are refused when the key set is read.
pub const MAX_KEYS_PER_PERSON: usize = 16;

/// Lowercase hex SHA-256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// What a voter signs. Parsing is strict, as for approval payloads.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VotePayload {
    /// Version, 1.
    pub v: u32,
    /// The gate call's `request_id` (the interaction's id for a tool
    /// approval created directly).
    pub request_id: String,
    /// The tool.
    pub tool_name: String,
    /// Lowercase hex SHA-256 of the exact proposed args.
    pub args_sha256: String,
    /// Lowercase hex SHA-256 of the args to run: the voter's edit, else the
    /// proposed args.
    pub effective_args_sha256: String,
    /// The conversation, or empty.
    pub conversation_id: String,
    /// The caller, or empty.
    pub caller: String,
    /// The sandbox mode, or empty.
    pub sandbox_mode: String,
    /// Approve or deny.
    pub approved: bool,
    /// `once`, `session` or `always` (`once` on a deny).
    pub scope: String,
    /// The voter's token name.
    pub voter: String,
    /// When the vote was made (strict RFC 3339).
    #[serde(with = "crate::payload::strict_rfc3339")]
    pub issued_at: OffsetDateTime,
}

impl VotePayload {
    /// The vote `voter` casts on the call `binding` describes: `edit` is the
    /// voter's edit of the args (empty: none).
    pub fn for_call(
        binding: &VoteBinding,
        approved: bool,
        scope: &str,
        edit: &str,
        voter: &str,
        issued_at: OffsetDateTime,
    ) -> Self {
        let effective = if approved && !edit.is_empty() {
            sha256_hex(edit.as_bytes())
        } else {
            binding.args_sha256.clone()
        };
        Self {
            v: VOTE_VERSION,
            request_id: binding.request_id.clone(),
            tool_name: binding.tool_name.clone(),
            args_sha256: binding.args_sha256.clone(),
            effective_args_sha256: effective,
            conversation_id: binding.conversation_id.clone(),
            caller: binding.caller.clone(),
            sandbox_mode: binding.sandbox_mode.clone(),
            approved,
            scope: if approved {
                scope.to_owned()
            } else {
                "once".to_owned()
            },
            voter: voter.to_owned(),
            issued_at,
        }
    }

    /// The payload's bytes (compact JSON, fields in declaration order).
    ///
    /// # Errors
    /// A time that cannot be written.
    pub fn to_bytes(&self) -> Result<Vec<u8>, serde_json::Error> {
        serde_json::to_vec(self)
    }

    /// The pre-authentication encoding a signature covers.
    ///
    /// # Errors
    /// As [`Self::to_bytes`].
    pub fn pae(&self) -> Result<Vec<u8>, serde_json::Error> {
        Ok(pae(VOTE_PAYLOAD_TYPE, &self.to_bytes()?))
    }

    /// The WebAuthn challenge of this vote: the SHA-256 of its PAE.
    ///
    /// # Errors
    /// As [`Self::to_bytes`].
    pub fn challenge(&self) -> Result<[u8; 32], serde_json::Error> {
        Ok(Sha256::digest(self.pae()?).into())
    }
}

/// Sign `vote` with a person's Ed25519 key registered under `kid`.
///
/// # Errors
/// When the payload cannot be written.
pub fn sign_vote(
    vote: &VotePayload,
    key: &SigningKeyPair,
    kid: &str,
) -> Result<Envelope, serde_json::Error> {
    let bytes = vote.to_bytes()?;
    let sig = key.sign(&pae(VOTE_PAYLOAD_TYPE, &bytes));
    Ok(Envelope {
        payload_type: VOTE_PAYLOAD_TYPE.to_owned(),
        payload: encode_base64(&bytes),
        signatures: vec![EnvelopeSignature::new(kid, encode_base64(&sig))],
    })
}

/// A person's public key.
#[derive(Debug, Clone, PartialEq, Eq)]
enum PersonPublic {
    Ed25519(VerifyingKey),
    /// An uncompressed P-256 point: 0x04, x, y.
    P256(Vec<u8>),
}

/// One registered key of one person.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PersonKey {
    /// `person:NAME:N`.
    pub kid: String,
    /// NAME: the person's token name.
    pub person: String,
    key: PersonPublic,
    /// A passkey's relying party id; `None` for a `lev key init` key.
    pub rp_id: Option<String>,
    /// A passkey's credential id, base64url.
    pub credential_id: Option<String>,
}

/// The person a key id `person:NAME:N` names, and N.
pub fn parse_person_kid(kid: &str) -> Option<(&str, u32)> {
    let rest = kid.strip_prefix("person:")?;
    let (name, n) = rest.rsplit_once(':')?;
    let n: u32 = n.parse().ok().filter(|n| *n >= 1)?;
    (lev_protocol::ids::is_valid_id(name) && n.to_string().len() == rest.len() - name.len() - 1)
        .then_some((name, n))
}

/// The DER prefix of a P-256 SubjectPublicKeyInfo, before its 65-byte point.
const P256_SPKI_PREFIX: [u8; 26] = [
    0x30, 0x59, 0x30, 0x13, 0x06, 0x07, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01, 0x06, 0x08, 0x2a,
    0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07, 0x03, 0x42, 0x00,
];
/// The DER prefix of an Ed25519 SubjectPublicKeyInfo, before its 32 bytes.
const ED25519_SPKI_PREFIX: [u8; 12] = [
    0x30, 0x2a, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x03, 0x21, 0x00,
];

/// The JWK (without `kid`) of a passkey's public key, from its
/// SubjectPublicKeyInfo DER and COSE algorithm (-7 ES256, -8 EdDSA).
///
/// # Errors
/// Another algorithm, or DER that is not such a key.
pub fn passkey_jwk(spki: &[u8], alg: i64) -> Result<PersonJwk, KeyError> {
    let jwk = match alg {
        -7 => {
            let point = spki
                .strip_prefix(&P256_SPKI_PREFIX[..])
                .filter(|p| p.len() == 65 && p[0] == 0x04)
                .ok_or_else(|| {
                    KeyError::Malformed(
                        "public_key: expected the SubjectPublicKeyInfo of a P-256 key".into(),
                    )
                })?;
            PersonJwk {
                kty: "EC".into(),
                crv: "P-256".into(),
                x: encode_base64url(&point[1..33]),
                y: Some(encode_base64url(&point[33..])),
                kid: String::new(),
                alg: Some("ES256".into()),
                use_: Some("sig".into()),
                rp_id: None,
                credential_id: None,
            }
        }
        -8 => {
            let raw = spki
                .strip_prefix(&ED25519_SPKI_PREFIX[..])
                .filter(|p| p.len() == 32)
                .ok_or_else(|| {
                    KeyError::Malformed(
                        "public_key: expected the SubjectPublicKeyInfo of an Ed25519 key".into(),
                    )
                })?;
            ed25519_jwk(raw)
        }
        other => {
            return Err(KeyError::Malformed(format!(
                "alg: expected -7 (ES256) or -8 (EdDSA), found {other}"
            )));
        }
    };
    // The point itself is checked as any registered key is.
    PersonKey::public_of(&jwk)?;
    Ok(jwk)
}

/// The JWK (without `kid`) of a raw Ed25519 public key.
pub fn ed25519_jwk(raw: &[u8]) -> PersonJwk {
    PersonJwk {
        kty: "OKP".into(),
        crv: "Ed25519".into(),
        x: encode_base64url(raw),
        y: None,
        kid: String::new(),
        alg: Some("EdDSA".into()),
        use_: Some("sig".into()),
        rp_id: None,
        credential_id: None,
    }
}

impl PersonKey {
    fn public_of(jwk: &PersonJwk) -> Result<PersonPublic, KeyError> {
        let field = |name: &str, text: &str| {
            decode_base64(text).map_err(|e| KeyError::Malformed(format!("{name}: {e}")))
        };
        match (jwk.kty.as_str(), jwk.crv.as_str()) {
            ("OKP", "Ed25519") => {
                if jwk.alg.as_deref().is_some_and(|a| a != "EdDSA") {
                    return Err(KeyError::Malformed("alg: an Ed25519 key is EdDSA".into()));
                }
                let raw: [u8; 32] = field("x", &jwk.x)?
                    .as_slice()
                    .try_into()
                    .map_err(|_| KeyError::Invalid("x: not 32 bytes".into()))?;
                let key = VerifyingKey::from_bytes(&raw)
                    .map_err(|_| KeyError::Invalid("bytes that are not a curve point".into()))?;
                if key.is_weak() {
                    return Err(KeyError::Weak {
                        kid: jwk.kid.clone(),
                    });
                }
                Ok(PersonPublic::Ed25519(key))
            }
            ("EC", "P-256") => {
                if jwk.alg.as_deref().is_some_and(|a| a != "ES256") {
                    return Err(KeyError::Malformed("alg: a P-256 key is ES256".into()));
                }
                let x = field("x", &jwk.x)?;
                let y = field("y", jwk.y.as_deref().unwrap_or_default())?;
                if x.len() != 32 || y.len() != 32 {
                    return Err(KeyError::Invalid(
                        "x and y of a P-256 key are 32 bytes each".into(),
                    ));
                }
                let mut point = Vec::with_capacity(65);
                point.push(0x04);
                point.extend_from_slice(&x);
                point.extend_from_slice(&y);
                // A point off the curve is refused by ring at every
                // verification: such a key never verifies a vote.
                Ok(PersonPublic::P256(point))
            }
            (kty, crv) => Err(KeyError::Malformed(format!(
                "expected an Ed25519 (OKP) or P-256 (EC) key, found kty {kty:?} and crv {crv:?}"
            ))),
        }
    }

    /// Read one key of a people JWKS.
    ///
    /// # Errors
    /// A `kid` that is not `person:NAME:N`, or a key that is not a valid
    /// Ed25519 (not weak) or P-256 public key.
    pub fn from_jwk(jwk: &PersonJwk) -> Result<Self, KeyError> {
        let (person, _) = parse_person_kid(&jwk.kid).ok_or_else(|| {
            KeyError::Malformed(format!(
                "kid: expected person:NAME:N, found {:?}",
                jwk.kid.chars().take(140).collect::<String>()
            ))
        })?;
        Ok(Self {
            kid: jwk.kid.clone(),
            person: person.to_owned(),
            key: Self::public_of(jwk)?,
            rp_id: jwk.rp_id.clone(),
            credential_id: jwk.credential_id.clone(),
        })
    }

    /// Check a registration's key (its `kid` unset) and return the
    /// fingerprint that keeps one key from being registered to two people:
    /// the SHA-256 of the public key bytes, hex.
    ///
    /// # Errors
    /// As [`Self::from_jwk`], for the key.
    pub fn fingerprint_of(jwk: &PersonJwk) -> Result<String, KeyError> {
        Ok(match Self::public_of(jwk)? {
            PersonPublic::Ed25519(k) => sha256_hex(k.as_bytes()),
            PersonPublic::P256(point) => sha256_hex(&point),
        })
    }

    /// Whether this is a passkey (its votes are WebAuthn assertions).
    pub fn is_passkey(&self) -> bool {
        self.rp_id.is_some()
    }

    /// Whether `raw` (32 bytes) is this key's Ed25519 public key.
    pub fn is_ed25519(&self, raw: &[u8]) -> bool {
        matches!(&self.key, PersonPublic::Ed25519(k) if k.as_bytes().as_slice() == raw)
    }

    fn verify_plain(&self, message: &[u8], sig: &[u8]) -> bool {
        match &self.key {
            PersonPublic::Ed25519(k) => <[u8; 64]>::try_from(sig)
                .is_ok_and(|s| k.verify_strict(message, &Signature::from_bytes(&s)).is_ok()),
            PersonPublic::P256(point) => ring::signature::UnparsedPublicKey::new(
                &ring::signature::ECDSA_P256_SHA256_ASN1,
                point,
            )
            .verify(message, sig)
            .is_ok(),
        }
    }
}

/// People's registered public keys, as `GET /v1/people/keys` serves them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PeopleKeys {
    keys: Vec<PersonKey>,
}

impl PeopleKeys {
    /// From a parsed JWKS.
    ///
    /// # Errors
    /// The first key that is not valid (see [`PersonKey::from_jwk`]), or a
    /// person with more than [`MAX_KEYS_PER_PERSON`] keys.
    pub fn from_jwks(jwks: &PeopleJwks) -> Result<Self, KeyError> {
        let mut set = Self::default();
        for jwk in &jwks.keys {
            let key = PersonKey::from_jwk(jwk)?;
            if set.of(&key.person).count() >= MAX_KEYS_PER_PERSON {
                return Err(KeyError::Malformed(format!(
                    "{} has more than {MAX_KEYS_PER_PERSON} keys",
                    key.person
                )));
            }
            if !set.keys.iter().any(|k| k.kid == key.kid) {
                set.keys.push(key);
            }
        }
        Ok(set)
    }

    /// Parse a people JWKS (`{"keys": [...]}`).
    ///
    /// # Errors
    /// Text that is not such a JWKS, or as [`Self::from_jwks`].
    pub fn parse(text: &str) -> Result<Self, KeyError> {
        let jwks: PeopleJwks = serde_json::from_str(text.trim()).map_err(|e| {
            KeyError::Malformed(format!(
                "expected the people keys JWKS of GET /v1/people/keys, {e}"
            ))
        })?;
        Self::from_jwks(&jwks)
    }

    /// The keys registered to `person`.
    pub fn of<'a>(&'a self, person: &'a str) -> impl Iterator<Item = &'a PersonKey> + 'a {
        self.keys.iter().filter(move |k| k.person == person)
    }

    /// Every key.
    pub fn keys(&self) -> &[PersonKey] {
        &self.keys
    }

    /// How many keys.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }
}

/// Why a vote does not count.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VoteError {
    /// Not a vote envelope.
    #[error("malformed vote: {0}")]
    Malformed(String),
    /// The payload is not a valid vote payload.
    #[error("invalid vote payload: {0}")]
    Payload(String),
    /// No signature verifies under a key registered to the voter.
    #[error("the vote is not signed by a key registered to {voter:?}{}", known(.keys))]
    NotSigned {
        /// The voter the payload names.
        voter: String,
        /// How many keys that voter has.
        keys: usize,
    },
    /// A passkey's assertion does not hold (challenge, type, origin, flags).
    #[error("the passkey assertion does not hold: {0}")]
    Assertion(String),
    /// The vote is for another call, voter, decision or scope.
    #[error("the vote is for {field} {signed:?}, not {expected:?}")]
    Mismatch {
        /// The field that differs.
        field: &'static str,
        /// What the vote says.
        signed: String,
        /// What it should say.
        expected: String,
    },
}

fn known(keys: &usize) -> String {
    if *keys == 0 {
        " (they have registered none)".to_owned()
    } else {
        format!(" ({keys} registered)")
    }
}

impl VoteError {
    /// A stable snake_case name: `malformed`, `payload`, `not_signed`,
    /// `assertion` or `mismatch`.
    pub fn class(&self) -> &'static str {
        match self {
            Self::Malformed(_) => "malformed",
            Self::Payload(_) => "payload",
            Self::NotSigned { .. } => "not_signed",
            Self::Assertion(_) => "assertion",
            Self::Mismatch { .. } => "mismatch",
        }
    }
}

/// A vote whose signature verified.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifiedVote {
    /// What the voter signed.
    pub payload: VotePayload,
    /// The key that verified it.
    pub kid: String,
}

/// The parts of a passkey's client data that the check reads.
#[derive(Deserialize)]
struct ClientData {
    #[serde(rename = "type")]
    kind: String,
    challenge: String,
    #[serde(default)]
    origin: String,
}

/// Whether `origin` (`scheme://host[:port]`) is on `rp_id` or a subdomain.
fn origin_on(origin: &str, rp_id: &str) -> bool {
    let Some((_, rest)) = origin.split_once("://") else {
        return false;
    };
    let host = match rest.rsplit_once(':') {
        Some((h, port)) if !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit()) => h,
        _ => rest,
    };
    host == rp_id
        || host
            .strip_suffix(rp_id)
            .is_some_and(|head| head.ends_with('.'))
}

/// Check a passkey assertion over `message` (the vote's PAE) by `key`.
fn check_assertion(
    key: &PersonKey,
    message: &[u8],
    sig: &[u8],
    authenticator_data: &str,
    client_data_json: &str,
) -> Result<bool, VoteError> {
    let bad = |m: &str| VoteError::Assertion(m.to_owned());
    let rp_id = key.rp_id.as_deref().unwrap_or_default();
    let auth =
        decode_base64(authenticator_data).map_err(|_| bad("authenticator_data is not base64"))?;
    let client =
        decode_base64(client_data_json).map_err(|_| bad("client_data_json is not base64"))?;
    if auth.len() < 37 {
        return Err(bad("authenticator_data is shorter than 37 bytes"));
    }
    if auth[..32] != Sha256::digest(rp_id.as_bytes())[..] {
        return Err(VoteError::Assertion(format!(
            "authenticator_data is for another relying party than {rp_id:?}"
        )));
    }
    if auth[32] & 0x01 == 0 {
        return Err(bad(
            "the authenticator did not see the user present (UP flag)",
        ));
    }
    let text = std::str::from_utf8(&client).map_err(|_| bad("client_data_json is not UTF-8"))?;
    lev_protocol::json::check_strict_json(text)
        .map_err(|e| VoteError::Assertion(format!("client_data_json: {e}")))?;
    let data: ClientData = serde_json::from_str(text)
        .map_err(|e| VoteError::Assertion(format!("client_data_json: {e}")))?;
    if data.kind != "webauthn.get" {
        return Err(VoteError::Assertion(format!(
            "client_data_json type is {:?}, not \"webauthn.get\"",
            data.kind.chars().take(40).collect::<String>()
        )));
    }
    let challenge =
        decode_base64(&data.challenge).map_err(|_| bad("the challenge is not base64url"))?;
    if challenge != Sha256::digest(message)[..] {
        return Err(bad(
            "the challenge is not this vote's (the SHA-256 of its PAE)",
        ));
    }
    if !origin_on(&data.origin, rp_id) {
        return Err(VoteError::Assertion(format!(
            "origin {:?} is not on {rp_id:?}",
            data.origin.chars().take(100).collect::<String>()
        )));
    }
    let mut signed = auth;
    signed.extend_from_slice(&Sha256::digest(&client));
    Ok(key.verify_plain(&signed, sig))
}

/// Verify a vote envelope's signature under the keys of the voter it names
/// (a strict payload parse, version 1). Whether it binds a given call is
/// [`check_vote_binding`]'s.
///
/// # Errors
/// The first check that fails.
pub fn verify_vote(envelope: &Envelope, people: &PeopleKeys) -> Result<VerifiedVote, VoteError> {
    if envelope.payload_type != VOTE_PAYLOAD_TYPE {
        return Err(VoteError::Malformed(format!(
            "expected payload type {VOTE_PAYLOAD_TYPE:?}, found {:?}",
            envelope.payload_type.chars().take(100).collect::<String>()
        )));
    }
    if envelope.signatures.is_empty() || envelope.signatures.len() > MAX_VOTE_SIGNATURES {
        return Err(VoteError::Malformed(format!(
            "expected 1 to {MAX_VOTE_SIGNATURES} signatures, found {}",
            envelope.signatures.len()
        )));
    }
    let bytes = decode_base64(&envelope.payload)
        .map_err(|e| VoteError::Malformed(format!("payload: {e}")))?;
    let payload: VotePayload =
        serde_json::from_slice(&bytes).map_err(|e| VoteError::Payload(e.to_string()))?;
    if payload.v != VOTE_VERSION {
        return Err(VoteError::Payload(format!(
            "expected vote version {VOTE_VERSION}, found {}",
            payload.v
        )));
    }
    if !matches!(payload.scope.as_str(), "once" | "session" | "always") {
        return Err(VoteError::Payload(format!(
            "scope: expected once, session or always, found {:?}",
            payload.scope.chars().take(20).collect::<String>()
        )));
    }
    let message = pae(VOTE_PAYLOAD_TYPE, &bytes);
    let voter = payload.voter.clone();
    let keys: Vec<&PersonKey> = people.of(&voter).collect();
    let mut assertion_error = None;
    for s in &envelope.signatures {
        let Ok(sig) = decode_base64(&s.sig) else {
            continue;
        };
        let hinted = keys.iter().filter(|k| k.kid == s.keyid);
        let others = keys.iter().filter(|k| k.kid != s.keyid);
        for key in hinted.chain(others) {
            let ok = match (&s.authenticator_data, &s.client_data_json, key.is_passkey()) {
                (Some(auth), Some(client), true) => {
                    match check_assertion(key, &message, &sig, auth, client) {
                        Ok(ok) => ok,
                        Err(e) => {
                            assertion_error.get_or_insert(e);
                            false
                        }
                    }
                }
                (None, None, false) => key.verify_plain(&message, &sig),
                // A passkey signs only through WebAuthn, a CLI key never does.
                _ => false,
            };
            if ok {
                return Ok(VerifiedVote {
                    payload,
                    kid: key.kid.clone(),
                });
            }
        }
    }
    Err(assertion_error.unwrap_or(VoteError::NotSigned {
        voter: payload.voter.chars().take(128).collect(),
        keys: keys.len(),
    }))
}

/// Whether a scope of a vote covers the decision's: a session-long (or
/// always) decision needs votes for at least that.
fn scope_covers(vote_scope: &str, for_session: bool) -> bool {
    !for_session || matches!(vote_scope, "session" | "always")
}

/// Check that `vote` binds the decision `approval`: the same call, the
/// same args to run, the same context, the same decision, a scope that
/// covers it, made no later than the decision.
///
/// # Errors
/// The first field that differs.
pub fn check_vote_binding(vote: &VotePayload, approval: &ApprovalPayload) -> Result<(), VoteError> {
    let args = sha256_hex(approval.args_json.as_bytes());
    let effective = sha256_hex(
        resolve_approved_call(&approval.args_json, &approval.modified_args_json).as_bytes(),
    );
    let approved = if approval.approved { "true" } else { "false" };
    for (field, signed, expected) in [
        (
            "request_id",
            vote.request_id.as_str(),
            approval.request_id.as_str(),
        ),
        (
            "tool_name",
            vote.tool_name.as_str(),
            approval.tool_name.as_str(),
        ),
        ("args_sha256", vote.args_sha256.as_str(), args.as_str()),
        (
            "conversation_id",
            vote.conversation_id.as_str(),
            approval.conversation_id.as_str(),
        ),
        ("caller", vote.caller.as_str(), approval.caller.as_str()),
        (
            "sandbox_mode",
            vote.sandbox_mode.as_str(),
            approval.sandbox_mode.as_str(),
        ),
        (
            "approved",
            if vote.approved { "true" } else { "false" },
            approved,
        ),
    ] {
        if signed != expected {
            return Err(VoteError::Mismatch {
                field,
                signed: signed.chars().take(200).collect(),
                expected: expected.to_owned(),
            });
        }
    }
    if approval.approved && vote.effective_args_sha256 != effective {
        return Err(VoteError::Mismatch {
            field: "effective_args_sha256",
            signed: vote.effective_args_sha256.chars().take(80).collect(),
            expected: effective,
        });
    }
    if approval.approved && !scope_covers(&vote.scope, approval.approved_for_session) {
        return Err(VoteError::Mismatch {
            field: "scope",
            signed: vote.scope.clone(),
            expected: "session or always".into(),
        });
    }
    if vote
        .issued_at
        .checked_sub(CLOCK_SKEW)
        .is_some_and(|t| t > approval.issued_at)
    {
        return Err(VoteError::Mismatch {
            field: "issued_at",
            signed: vote
                .issued_at
                .format(&time::format_description::well_known::Rfc3339)
                .unwrap_or_default(),
            expected: "no later than the decision".into(),
        });
    }
    Ok(())
}

/// One vote of a decision, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VoteCheck {
    /// The voter the decision names.
    pub voter: String,
    /// The key whose signature verified, or why the vote does not count
    /// (an unsigned vote is [`VoteError::NotSigned`]).
    pub result: Result<String, VoteError>,
}

/// Not enough signed votes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{found} distinct signed votes verify and bind this call, {needed} needed{}", why(.problems))]
pub struct NotEnoughVotes {
    /// Distinct voters counted.
    pub found: usize,
    /// Required.
    pub needed: usize,
    /// Why the others do not count: `voter: reason`.
    pub problems: Vec<String>,
}

fn why(problems: &[String]) -> String {
    if problems.is_empty() {
        String::new()
    } else {
        format!(" ({})", problems.join("; "))
    }
}

impl VerifiedResponse {
    /// Check every vote the decision carries: its envelope verifies under a
    /// key registered to the voter the decision names, it names that voter
    /// and agrees with the decision's `approved`, and it binds this exact
    /// decision. A version 1 payload carries none.
    pub fn check_votes(&self, people: &PeopleKeys) -> Vec<VoteCheck> {
        let Some(votes) = &self.payload.votes else {
            return Vec::new();
        };
        votes
            .iter()
            .map(|v| {
                let result = match &v.envelope {
                    None => Err(VoteError::NotSigned {
                        voter: v.voter.clone(),
                        keys: 0,
                    }),
                    Some(env) => verify_vote(&Envelope::from(env), people).and_then(|verified| {
                        if verified.payload.voter != v.voter {
                            return Err(VoteError::Mismatch {
                                field: "voter",
                                signed: verified.payload.voter.clone(),
                                expected: v.voter.clone(),
                            });
                        }
                        if verified.payload.approved != v.approved {
                            return Err(VoteError::Mismatch {
                                field: "approved",
                                signed: verified.payload.approved.to_string(),
                                expected: v.approved.to_string(),
                            });
                        }
                        check_vote_binding(&verified.payload, &self.payload)?;
                        Ok(verified.kid)
                    }),
                };
                VoteCheck {
                    voter: v.voter.clone(),
                    result,
                }
            })
            .collect()
    }

    /// The distinct people whose signed votes verify and bind this decision.
    pub fn signed_voters(&self, people: &PeopleKeys) -> BTreeSet<String> {
        self.check_votes(people)
            .into_iter()
            .filter(|c| c.result.is_ok())
            .map(|c| c.voter)
            .collect()
    }

    /// At least `needed` distinct people's signed votes verify and bind this
    /// decision (which must be an approval).
    ///
    /// # Errors
    /// Fewer, with why each other vote does not count.
    pub fn require_signed_votes(
        &self,
        people: &PeopleKeys,
        needed: usize,
    ) -> Result<BTreeSet<String>, NotEnoughVotes> {
        let checks = self.check_votes(people);
        let mut voters = BTreeSet::new();
        let mut problems = Vec::new();
        for c in checks {
            match c.result {
                Ok(_) if self.payload.approved => {
                    voters.insert(c.voter);
                }
                Ok(_) => problems.push(format!("{}: the decision is a denial", c.voter)),
                Err(e) => problems.push(format!("{}: {e}", c.voter)),
            }
        }
        if voters.len() >= needed && self.payload.approved {
            Ok(voters)
        } else {
            Err(NotEnoughVotes {
                found: if self.payload.approved {
                    voters.len()
                } else {
                    0
                },
                needed,
                problems,
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn person_kids() {
        assert_eq!(parse_person_kid("person:alice:1"), Some(("alice", 1)));
        assert_eq!(parse_person_kid("person:a:b:12"), Some(("a:b", 12)));
        for bad in [
            "person:alice:0",
            "person:alice:01",
            "person:alice",
            "alice:1",
            "person::1",
            "person:al ice:1",
            "person:alice:+1",
        ] {
            assert_eq!(parse_person_kid(bad), None, "{bad}");
        }
    }

    #[test]
    fn origins() {
        assert!(origin_on("http://localhost:7420", "localhost"));
        assert!(origin_on("https://lev.example.com", "example.com"));
        assert!(origin_on("https://example.com", "example.com"));
        assert!(!origin_on("https://badexample.com", "example.com"));
        assert!(!origin_on("https://example.com.evil.net", "example.com"));
        assert!(!origin_on("localhost", "localhost"));
    }

    use lev_protocol::api::PeopleJwks;
    use ring::signature::KeyPair as _;

    fn binding() -> VoteBinding {
        VoteBinding {
            request_id: "call-1".into(),
            tool_name: "deploy".into(),
            args_sha256: sha256_hex(br#"{"env":"prod"}"#),
            conversation_id: "c-1".into(),
            caller: "carol".into(),
            sandbox_mode: "read-only".into(),
        }
    }

    fn at(s: &str) -> OffsetDateTime {
        crate::parse_timestamp(s).unwrap()
    }

    fn approval(approved: bool, for_session: bool, edit: &str) -> ApprovalPayload {
        ApprovalPayload {
            v: 2,
            turn_id: String::new(),
            request_id: "call-1".into(),
            tool_name: "deploy".into(),
            args_json: r#"{"env":"prod"}"#.into(),
            modified_args_json: edit.into(),
            approved,
            approved_for_session: for_session,
            covered_capabilities: vec![],
            caller: "carol".into(),
            approver: "bob".into(),
            sandbox_mode: "read-only".into(),
            reason: String::new(),
            injected_context: String::new(),
            conversation_id: "c-1".into(),
            nonce: "n".into(),
            issued_at: at("2026-06-01T12:00:10Z"),
            expires_at: at("2026-06-01T12:10:10Z"),
            votes: Some(vec![]),
        }
    }

    fn cli_key(seed: u8, kid: &str) -> (SigningKeyPair, PersonJwk) {
        let key = SigningKeyPair::from_seed(&[seed; 32]);
        let mut jwk = ed25519_jwk(key.verifying_key().as_bytes());
        jwk.kid = kid.into();
        (key, jwk)
    }

    fn people(jwks: Vec<PersonJwk>) -> PeopleKeys {
        PeopleKeys::from_jwks(&PeopleJwks { keys: jwks }).unwrap()
    }

    #[test]
    fn a_cli_vote_verifies_under_the_voters_key_only() {
        let (alice, alice_jwk) = cli_key(1, "person:alice:1");
        let (_, bob_jwk) = cli_key(2, "person:bob:1");
        let vote = VotePayload::for_call(
            &binding(),
            true,
            "once",
            "",
            "alice",
            at("2026-06-01T12:00:00Z"),
        );
        let env = sign_vote(&vote, &alice, "person:alice:1").unwrap();
        let keys = people(vec![alice_jwk.clone(), bob_jwk.clone()]);
        let verified = verify_vote(&env, &keys).unwrap();
        assert_eq!(verified.kid, "person:alice:1");
        check_vote_binding(&verified.payload, &approval(true, false, "")).unwrap();
        // The same bytes claimed by bob: alice's key is not bob's.
        let mut as_bob = vote.clone();
        as_bob.voter = "bob".into();
        let forged = sign_vote(&as_bob, &alice, "person:bob:1").unwrap();
        assert_eq!(
            verify_vote(&forged, &keys).unwrap_err().class(),
            "not_signed"
        );
        // Without alice's key registered, her vote does not count.
        assert_eq!(
            verify_vote(&env, &people(vec![bob_jwk]))
                .unwrap_err()
                .class(),
            "not_signed"
        );
        // A tampered payload.
        let mut tampered = env.clone();
        let mut other = vote.clone();
        other.approved = false;
        tampered.payload = encode_base64(&other.to_bytes().unwrap());
        assert_eq!(
            verify_vote(&tampered, &keys).unwrap_err().class(),
            "not_signed"
        );
    }

    #[test]
    fn a_vote_binds_the_call_its_args_its_decision_and_scope() {
        let vote = VotePayload::for_call(
            &binding(),
            true,
            "once",
            "",
            "alice",
            at("2026-06-01T12:00:00Z"),
        );
        assert!(check_vote_binding(&vote, &approval(true, false, "")).is_ok());
        let field = |a: &ApprovalPayload| match check_vote_binding(&vote, a) {
            Err(VoteError::Mismatch { field, .. }) => field,
            other => panic!("{other:?}"),
        };
        let mut other_args = approval(true, false, "");
        other_args.args_json = r#"{"env":"staging"}"#.into();
        assert_eq!(field(&other_args), "args_sha256");
        assert_eq!(
            field(&approval(true, false, r#"{"env":"dev"}"#)),
            "effective_args_sha256"
        );
        assert_eq!(field(&approval(true, true, "")), "scope");
        assert_eq!(field(&approval(false, false, "")), "approved");
        let mut other_caller = approval(true, false, "");
        other_caller.caller = "mallory".into();
        assert_eq!(field(&other_caller), "caller");
        let mut early = approval(true, false, "");
        early.issued_at = at("2026-06-01T11:58:00Z");
        assert_eq!(field(&early), "issued_at");
        // An edit voted for binds the edit.
        let edited = VotePayload::for_call(
            &binding(),
            true,
            "session",
            r#"{"env":"dev"}"#,
            "alice",
            at("2026-06-01T12:00:00Z"),
        );
        assert!(check_vote_binding(&edited, &approval(true, true, r#"{"env":"dev"}"#)).is_ok());
    }

    /// A passkey's assertion over a vote, as a browser makes one.
    fn assert_with(
        pair: &ring::signature::EcdsaKeyPair,
        vote: &VotePayload,
        rp_id: &str,
        origin: &str,
        flags: u8,
    ) -> Envelope {
        let rng = ring::rand::SystemRandom::new();
        let challenge = encode_base64url(&vote.challenge().unwrap());
        let client = format!(
            r#"{{"type":"webauthn.get","challenge":"{challenge}","origin":"{origin}","crossOrigin":false}}"#
        );
        let mut auth = Sha256::digest(rp_id.as_bytes()).to_vec();
        auth.push(flags);
        auth.extend_from_slice(&[0, 0, 0, 7]);
        let mut signed = auth.clone();
        signed.extend_from_slice(&Sha256::digest(client.as_bytes()));
        let sig = pair.sign(&rng, &signed).unwrap();
        let bytes = vote.to_bytes().unwrap();
        Envelope {
            payload_type: VOTE_PAYLOAD_TYPE.into(),
            payload: encode_base64(&bytes),
            signatures: vec![EnvelopeSignature {
                keyid: "person:dana:2".into(),
                sig: encode_base64(sig.as_ref()),
                authenticator_data: Some(encode_base64(&auth)),
                client_data_json: Some(encode_base64(client.as_bytes())),
            }],
        }
    }

    fn p256_pair() -> (ring::signature::EcdsaKeyPair, PersonJwk) {
        let rng = ring::rand::SystemRandom::new();
        let alg = &ring::signature::ECDSA_P256_SHA256_ASN1_SIGNING;
        let pkcs8 = ring::signature::EcdsaKeyPair::generate_pkcs8(alg, &rng).unwrap();
        let pair = ring::signature::EcdsaKeyPair::from_pkcs8(alg, pkcs8.as_ref(), &rng).unwrap();
        let mut spki = P256_SPKI_PREFIX.to_vec();
        spki.extend_from_slice(pair.public_key().as_ref());
        let mut jwk = passkey_jwk(&spki, -7).unwrap();
        jwk.kid = "person:dana:2".into();
        jwk.rp_id = Some("localhost".into());
        (pair, jwk)
    }

    #[test]
    fn a_passkey_vote_verifies_with_its_assertion() {
        let (pair, jwk) = p256_pair();
        let keys = people(vec![jwk]);
        let vote = VotePayload::for_call(
            &binding(),
            true,
            "once",
            "",
            "dana",
            at("2026-06-01T12:00:00Z"),
        );
        let good = assert_with(&pair, &vote, "localhost", "http://localhost:7420", 0x05);
        assert_eq!(verify_vote(&good, &keys).unwrap().kid, "person:dana:2");
        for (env, class, words) in [
            (
                assert_with(&pair, &vote, "evil.test", "http://localhost:7420", 0x05),
                "assertion",
                "relying party",
            ),
            (
                assert_with(&pair, &vote, "localhost", "http://evil.test", 0x05),
                "assertion",
                "origin",
            ),
            (
                assert_with(&pair, &vote, "localhost", "http://localhost:7420", 0x04),
                "assertion",
                "UP flag",
            ),
        ] {
            let err = verify_vote(&env, &keys).unwrap_err();
            assert_eq!(err.class(), class, "{err}");
            assert!(err.to_string().contains(words), "{err}");
        }
        // The assertion of another vote does not carry over.
        let other = VotePayload::for_call(
            &binding(),
            false,
            "once",
            "",
            "dana",
            at("2026-06-01T12:00:00Z"),
        );
        let mut swapped = assert_with(&pair, &other, "localhost", "http://localhost:7420", 0x05);
        swapped.payload = good.payload.clone();
        let err = verify_vote(&swapped, &keys).unwrap_err();
        assert!(err.to_string().contains("challenge"), "{err}");
        // A passkey never signs a plain vote.
        let mut plain = good.clone();
        plain.signatures[0].authenticator_data = None;
        plain.signatures[0].client_data_json = None;
        assert_eq!(
            verify_vote(&plain, &keys).unwrap_err().class(),
            "not_signed"
        );
    }

    #[test]
    fn hostile_vote_envelopes_are_refused_without_panic() {
        let keys = people(vec![cli_key(1, "person:alice:1").1]);
        let base = sign_vote(
            &VotePayload::for_call(
                &binding(),
                true,
                "once",
                "",
                "alice",
                at("2026-06-01T12:00:00Z"),
            ),
            &SigningKeyPair::from_seed(&[1; 32]),
            "person:alice:1",
        )
        .unwrap();
        let mut cases = Vec::new();
        let mut e = base.clone();
        e.payload_type = "application/vnd.lev.approval+json; version=1".into();
        cases.push((e, "malformed"));
        let mut e = base.clone();
        e.signatures.clear();
        cases.push((e, "malformed"));
        let mut e = base.clone();
        e.signatures = vec![e.signatures[0].clone(); 5];
        cases.push((e, "malformed"));
        let mut e = base.clone();
        e.payload = "not base64!".into();
        cases.push((e, "malformed"));
        let mut e = base.clone();
        e.payload = encode_base64(br#"{"v":1}"#);
        cases.push((e, "payload"));
        let mut e = base.clone();
        let text = String::from_utf8(decode_base64(&base.payload).unwrap()).unwrap();
        e.payload = encode_base64(text.replacen("{", r#"{"extra":1,"#, 1).as_bytes());
        cases.push((e, "payload"));
        let mut e = base.clone();
        e.payload = encode_base64(text.replace(r#""v":1"#, r#""v":2"#).as_bytes());
        cases.push((e, "payload"));
        let mut e = base.clone();
        e.signatures[0].sig = "AAAA".into();
        cases.push((e, "not_signed"));
        let mut e = base;
        e.signatures[0].authenticator_data = Some("AAAA".into());
        cases.push((e, "not_signed"));
        for (env, class) in cases {
            assert_eq!(
                verify_vote(&env, &keys).unwrap_err().class(),
                class,
                "{env:?}"
            );
        }
    }

    #[test]
    fn registrations_read_spki_and_refuse_the_rest() {
        let (_, jwk) = p256_pair();
        assert_eq!(jwk.kty, "EC");
        let raw = SigningKeyPair::from_seed(&[3; 32])
            .verifying_key()
            .to_bytes();
        let mut spki = ED25519_SPKI_PREFIX.to_vec();
        spki.extend_from_slice(&raw);
        assert_eq!(passkey_jwk(&spki, -8).unwrap().crv, "Ed25519");
        assert!(passkey_jwk(&spki, -7).is_err());
        assert!(passkey_jwk(&spki, -257).is_err());
        assert!(passkey_jwk(&spki[..20], -8).is_err());
        // A weak key never registers.
        let mut weak = ed25519_jwk(&[0u8; 32]);
        weak.kid = "person:x:1".into();
        assert!(PersonKey::from_jwk(&weak).is_err());
        assert!(PersonKey::fingerprint_of(&ed25519_jwk(&[0u8; 32])).is_err());
    }
}
