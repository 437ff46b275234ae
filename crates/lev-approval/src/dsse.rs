//! DSSE envelope signing (the pre-authentication encoding itself is `pae`).

use lev_protocol::{Envelope, EnvelopeSignature};

use crate::b64::encode_base64;
use crate::keys::SigningKeyPair;
use crate::payload::ApprovalPayload;

/// Re-exported from the bottom module, where `verify` and `votes` take it from.
pub use crate::pae::pae;

/// Sign `payload` of `payload_type` into an envelope.
pub fn sign_envelope(payload_type: &str, payload: &[u8], key: &SigningKeyPair) -> Envelope {
    let sig = key.sign(&pae(payload_type, payload));
    Envelope {
        payload_type: payload_type.to_owned(),
        payload: encode_base64(payload),
        signatures: vec![EnvelopeSignature::new(
            key.kid().to_owned(),
            encode_base64(&sig),
        )],
    }
}

/// Sign an approval payload, under version 1's payload type or, when it
/// carries votes, version 2's.
///
/// # Errors
/// When the payload cannot be written ([`ApprovalPayload::to_bytes`]).
pub fn sign_payload(
    payload: &ApprovalPayload,
    key: &SigningKeyPair,
) -> Result<Envelope, serde_json::Error> {
    Ok(sign_envelope(
        payload.payload_type(),
        &payload.to_bytes()?,
        key,
    ))
}
