//! DSSE: the pre-authentication encoding and envelope signing.

use lev_protocol::{Envelope, EnvelopeSignature};

use crate::b64::encode_base64;
use crate::keys::SigningKeyPair;
use crate::payload::ApprovalPayload;

/// DSSE's pre-authentication encoding:
/// `"DSSEv1" SP LEN(type) SP type SP LEN(body) SP body`, lengths in ASCII decimal.
pub fn pae(payload_type: &str, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(
        payload_type
            .len()
            .saturating_add(payload.len())
            .saturating_add(32),
    );
    out.extend_from_slice(b"DSSEv1 ");
    out.extend_from_slice(payload_type.len().to_string().as_bytes());
    out.push(b' ');
    out.extend_from_slice(payload_type.as_bytes());
    out.push(b' ');
    out.extend_from_slice(payload.len().to_string().as_bytes());
    out.push(b' ');
    out.extend_from_slice(payload);
    out
}

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

#[cfg(test)]
mod tests {
    use super::pae;

    #[test]
    fn pae_matches_the_dsse_spec_example() {
        // From the DSSE protocol description.
        assert_eq!(
            pae("http://example.com/HelloWorld", b"hello world"),
            b"DSSEv1 29 http://example.com/HelloWorld 11 hello world".to_vec()
        );
        assert_eq!(pae("", b""), b"DSSEv1 0  0 ".to_vec());
    }
}
