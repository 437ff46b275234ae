//! The Standard Webhooks signature: `v1,` and base64 of HMAC-SHA256 over
//! `{webhook-id}.{webhook-timestamp}.{body}`, keyed by the secret's bytes.
//! [`verify`] is what a receiver runs (the tests' receiver does).

use lev_approval::{decode_base64, encode_base64};
use ring::hmac;

/// The `webhook-signature` header's value for one delivery attempt.
#[must_use]
pub fn sign(key: &[u8], id: &str, timestamp: i64, body: &[u8]) -> String {
    let key = hmac::Key::new(hmac::HMAC_SHA256, key);
    let mut ctx = hmac::Context::with_key(&key);
    ctx.update(id.as_bytes());
    ctx.update(b".");
    ctx.update(timestamp.to_string().as_bytes());
    ctx.update(b".");
    ctx.update(body);
    format!("v1,{}", encode_base64(ctx.sign().as_ref()))
}

/// Why a delivery does not verify.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VerifyError {
    /// The timestamp is not a number, or too far from now.
    #[error("webhook-timestamp: {0}")]
    Timestamp(String),
    /// No `v1,` signature in the header matches.
    #[error("webhook-signature: no v1 signature matches")]
    Signature,
}

/// Check a delivery as a receiver does: the timestamp within `tolerance_s`
/// of `now`, and one of the header's space-separated `v1,` signatures
/// (constant-time) over id, timestamp and body.
///
/// # Errors
/// [`VerifyError`] naming the header at fault.
pub fn verify(
    key: &[u8],
    id: &str,
    timestamp: &str,
    signatures: &str,
    body: &[u8],
    now: i64,
    tolerance_s: i64,
) -> Result<(), VerifyError> {
    let ts: i64 = timestamp
        .parse()
        .map_err(|_| VerifyError::Timestamp(format!("expected seconds, found {timestamp:?}")))?;
    if (now - ts).abs() > tolerance_s {
        return Err(VerifyError::Timestamp(format!(
            "{} s from now, more than {tolerance_s} s",
            now - ts
        )));
    }
    let key = hmac::Key::new(hmac::HMAC_SHA256, key);
    let mut message = Vec::with_capacity(id.len() + timestamp.len() + body.len() + 2);
    message.extend_from_slice(id.as_bytes());
    message.push(b'.');
    message.extend_from_slice(timestamp.as_bytes());
    message.push(b'.');
    message.extend_from_slice(body);
    for candidate in signatures.split(' ') {
        let Some(b64) = candidate.strip_prefix("v1,") else {
            continue;
        };
        let Ok(tag) = decode_base64(b64) else {
            continue;
        };
        if hmac::verify(&key, &message, &tag).is_ok() {
            return Ok(());
        }
    }
    Err(VerifyError::Signature)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// The Standard Webhooks specification's test vector (its reference
    /// libraries use it): secret, id, timestamp, payload and signature.
    #[test]
    fn the_standard_webhooks_vector() {
        let key = super::super::secret_key("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap();
        let body = br#"{"test": 2432232314}"#;
        let sig = sign(&key, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1_614_265_330, body);
        assert_eq!(sig, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=");
        verify(
            &key,
            "msg_p5jXN8AQM9LWM0D4loKWxJek",
            "1614265330",
            &format!("v1,bm9wZQ== {sig}"),
            body,
            1_614_265_330,
            300,
        )
        .unwrap();
    }

    #[test]
    fn a_changed_byte_or_a_stale_time_fails() {
        let key = [7u8; 32];
        let sig = sign(&key, "msg_1", 1000, b"{}");
        assert_eq!(
            verify(&key, "msg_1", "1000", &sig, b"{ }", 1000, 300),
            Err(VerifyError::Signature)
        );
        assert_eq!(
            verify(&key, "msg_2", "1000", &sig, b"{}", 1000, 300),
            Err(VerifyError::Signature)
        );
        assert!(matches!(
            verify(&key, "msg_1", "1000", &sig, b"{}", 1301, 300),
            Err(VerifyError::Timestamp(_))
        ));
        assert!(matches!(
            verify(&key, "msg_1", "x", &sig, b"{}", 1000, 300),
            Err(VerifyError::Timestamp(_))
        ));
        assert!(verify(&key, "msg_1", "1000", &sig, b"{}", 1299, 300).is_ok());
    }
}
