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
    /// The Ed25519 signature in base64.
    pub sig: String,
}
