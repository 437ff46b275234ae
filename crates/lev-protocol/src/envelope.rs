//! The DSSE envelope that carries a signed approval (SPEC section 5).
//!
//! Only the shape lives here; signing and verification are `lev-approval`'s.

use serde::{Deserialize, Serialize};

/// A DSSE envelope: a typed payload and its signatures.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Envelope {
    /// The payload's media type; lev's is [`crate::APPROVAL_PAYLOAD_TYPE`].
    #[serde(rename = "payloadType")]
    pub payload_type: String,
    /// The payload bytes in base64 (lev writes standard base64 with padding).
    pub payload: String,
    /// One or more signatures over the pre-authentication encoding.
    pub signatures: Vec<EnvelopeSignature>,
}

/// One signature of an [`Envelope`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct EnvelopeSignature {
    /// Key id hint: the first 16 hex digits of SHA-256 of the raw public key.
    #[serde(default)]
    pub keyid: String,
    /// The signature in base64: Ed25519 over the pre-authentication
    /// encoding; for a passkey, the WebAuthn assertion's signature (ES256 in
    /// DER, or EdDSA) over `authenticator_data` and the SHA-256 of
    /// `client_data_json`.
    pub sig: String,
    /// A passkey's authenticator data (base64), for a vote signed in a
    /// browser; absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub authenticator_data: Option<String>,
    /// A passkey's client data JSON (base64), whose `challenge` is the
    /// base64url SHA-256 of the pre-authentication encoding; absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_data_json: Option<String>,
}

impl EnvelopeSignature {
    /// A plain signature (no passkey data).
    pub fn new(keyid: impl Into<String>, sig: impl Into<String>) -> Self {
        Self {
            keyid: keyid.into(),
            sig: sig.into(),
            authenticator_data: None,
            client_data_json: None,
        }
    }
}
