//! Slack's request signing, version `v0`.
//!
//! Slack signs every request it sends to the app: `X-Slack-Signature:
//! v0=<hex>` is the HMAC-SHA256, keyed by the app's signing secret, of
//! `v0:{X-Slack-Request-Timestamp}:{raw body}`. A request is taken only when
//! the signature matches (compared in constant time) and the timestamp is
//! within [`MAX_SKEW_S`] of the server's clock, either way, so a captured
//! request cannot be replayed later.

use std::fmt;

use ring::hmac;

/// How far the request's timestamp may be from the server's clock, in
/// seconds, in either direction (Slack's recommendation: five minutes).
pub const MAX_SKEW_S: i64 = 300;

/// The header holding the request's Unix time.
pub const TIMESTAMP_HEADER: &str = "X-Slack-Request-Timestamp";

/// The header holding the signature.
pub const SIGNATURE_HEADER: &str = "X-Slack-Signature";

/// Why a request is refused. The `Display` text names the header at fault
/// and holds no secret: fit for a 401 body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VerifyError {
    /// No `X-Slack-Request-Timestamp` header.
    MissingTimestamp,
    /// No `X-Slack-Signature` header.
    MissingSignature,
    /// The timestamp is not a whole number of seconds.
    BadTimestamp,
    /// The timestamp is more than [`MAX_SKEW_S`] from the server's clock.
    Stale {
        /// The server's time minus the request's, in seconds (negative for
        /// a timestamp in the future).
        age_s: i64,
    },
    /// The signature is malformed or does not match the body.
    BadSignature,
}

impl fmt::Display for VerifyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::MissingTimestamp => write!(f, "missing {TIMESTAMP_HEADER} header"),
            Self::MissingSignature => write!(f, "missing {SIGNATURE_HEADER} header"),
            Self::BadTimestamp => {
                write!(f, "{TIMESTAMP_HEADER} is not a Unix time in seconds")
            }
            Self::Stale { age_s } if *age_s < 0 => write!(
                f,
                "{TIMESTAMP_HEADER} is {} s ahead of the server's clock \
                 (at most {MAX_SKEW_S} s either way)",
                age_s.unsigned_abs()
            ),
            Self::Stale { age_s } => write!(
                f,
                "{TIMESTAMP_HEADER} is {age_s} s old (at most {MAX_SKEW_S} s either way)"
            ),
            Self::BadSignature => write!(
                f,
                "{SIGNATURE_HEADER} does not match the request (expected v0= and the \
                 HMAC-SHA256 of v0:TIMESTAMP:BODY in hex)"
            ),
        }
    }
}

impl std::error::Error for VerifyError {}

/// Check a request Slack sent: `timestamp` and `signature` are the values
/// of the `X-Slack-Request-Timestamp` and `X-Slack-Signature` headers (if
/// present), `body` the raw body as received, `now_unix` the server's clock.
///
/// # Errors
/// A [`VerifyError`] saying which check failed.
pub fn verify(
    secret: &[u8],
    timestamp: Option<&str>,
    signature: Option<&str>,
    body: &[u8],
    now_unix: i64,
) -> Result<(), VerifyError> {
    verify_tag(secret, timestamp, signature, body, now_unix).map(|_| ())
}

/// [`verify`], yielding the 32 bytes the signature carries: what a replay
/// guard remembers, since the same request may come back with its hex in
/// upper case or with blanks around the header (each accepted), but never
/// with other bytes (the HMAC of the same timestamp and body).
///
/// # Errors
/// A [`VerifyError`] saying which check failed.
pub fn verify_tag(
    secret: &[u8],
    timestamp: Option<&str>,
    signature: Option<&str>,
    body: &[u8],
    now_unix: i64,
) -> Result<[u8; 32], VerifyError> {
    let timestamp = timestamp.ok_or(VerifyError::MissingTimestamp)?;
    let signature = signature.ok_or(VerifyError::MissingSignature)?;
    let ts = parse_timestamp(timestamp).ok_or(VerifyError::BadTimestamp)?;
    let age_s = now_unix.saturating_sub(ts);
    if age_s.unsigned_abs() > MAX_SKEW_S.unsigned_abs() {
        return Err(VerifyError::Stale { age_s });
    }
    let tag = parse_signature(signature).ok_or(VerifyError::BadSignature)?;
    let key = hmac::Key::new(hmac::HMAC_SHA256, secret);
    hmac::verify(&key, &base_string(timestamp.trim(), body), &tag)
        .map_err(|_| VerifyError::BadSignature)?;
    Ok(tag)
}

/// What the replay guard remembers of a verified request: `slack v0 ` and
/// the signature's bytes in lowercase hex. It holds blanks, which a nonce
/// given to `POST /v1/nonces/consume` never does, so no worker can spend a
/// Slack request's key, and the store's nonce ledger keeps it as written.
#[must_use]
pub fn replay_key(tag: &[u8; 32]) -> String {
    let mut out = String::with_capacity(9 + 64);
    out.push_str("slack v0 ");
    for b in tag {
        out.push(hex_digit(b >> 4));
        out.push(hex_digit(b & 0x0f));
    }
    out
}

/// The `X-Slack-Signature` value Slack would send for `body` at `timestamp`:
/// `v0=` and 64 lowercase hex digits.
pub fn sign(secret: &[u8], timestamp: &str, body: &[u8]) -> String {
    let key = hmac::Key::new(hmac::HMAC_SHA256, secret);
    let tag = hmac::sign(&key, &base_string(timestamp, body));
    let mut out = String::with_capacity(3 + 64);
    out.push_str("v0=");
    for b in tag.as_ref() {
        out.push(hex_digit(b >> 4));
        out.push(hex_digit(b & 0x0f));
    }
    out
}

/// `v0:{timestamp}:{body}`.
fn base_string(timestamp: &str, body: &[u8]) -> Vec<u8> {
    let mut base = Vec::with_capacity(4 + timestamp.len() + body.len());
    base.extend_from_slice(b"v0:");
    base.extend_from_slice(timestamp.as_bytes());
    base.push(b':');
    base.extend_from_slice(body);
    base
}

/// A Unix time in seconds: 1 to 19 ASCII digits (surrounding blanks allowed).
fn parse_timestamp(s: &str) -> Option<i64> {
    let s = s.trim();
    if s.is_empty() || s.len() > 19 || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// The 32 bytes of `v0=<64 hex digits>`.
fn parse_signature(s: &str) -> Option<[u8; 32]> {
    let hex = s.trim().strip_prefix("v0=")?.as_bytes();
    if hex.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    for (byte, pair) in out.iter_mut().zip(hex.chunks_exact(2)) {
        let (hi, lo) = match pair {
            [hi, lo] => (hex_value(*hi)?, hex_value(*lo)?),
            _ => return None,
        };
        *byte = (hi << 4) | lo;
    }
    Some(out)
}

fn hex_value(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

fn hex_digit(n: u8) -> char {
    char::from(b"0123456789abcdef"[usize::from(n & 0x0f)])
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    // The worked example of Slack's "Verifying requests from Slack" guide.
    const DOC_SECRET: &[u8] = b"8f742231b10e8888abcd99yyyzzz85a5";
    const DOC_TS: &str = "1531420618";
    const DOC_BODY: &str = "token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c";
    const DOC_SIG: &str = "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503";
    const DOC_NOW: i64 = 1_531_420_618;

    fn check(ts: Option<&str>, sig: Option<&str>, body: &str, now: i64) -> Result<(), VerifyError> {
        verify(DOC_SECRET, ts, sig, body.as_bytes(), now)
    }

    #[test]
    fn slacks_documented_example_signs_and_verifies() {
        assert_eq!(sign(DOC_SECRET, DOC_TS, DOC_BODY.as_bytes()), DOC_SIG);
        assert_eq!(
            check(Some(DOC_TS), Some(DOC_SIG), DOC_BODY, DOC_NOW),
            Ok(())
        );
        // Upper-case hex and surrounding blanks are the same signature.
        let upper = format!(" v0={} ", DOC_SIG[3..].to_ascii_uppercase());
        assert_eq!(check(Some(DOC_TS), Some(&upper), DOC_BODY, DOC_NOW), Ok(()));
    }

    #[test]
    fn the_window_is_five_minutes_either_way() {
        for now in [DOC_NOW - 300, DOC_NOW + 300, DOC_NOW + 1, DOC_NOW - 1] {
            assert_eq!(
                check(Some(DOC_TS), Some(DOC_SIG), DOC_BODY, now),
                Ok(()),
                "{now}"
            );
        }
        assert_eq!(
            check(Some(DOC_TS), Some(DOC_SIG), DOC_BODY, DOC_NOW + 301),
            Err(VerifyError::Stale { age_s: 301 })
        );
        let future = check(Some(DOC_TS), Some(DOC_SIG), DOC_BODY, DOC_NOW - 301);
        assert_eq!(future, Err(VerifyError::Stale { age_s: -301 }));
        assert!(future.unwrap_err().to_string().contains("301 s ahead"));
        // Far past and far future do not overflow.
        assert!(matches!(
            check(Some(DOC_TS), Some(DOC_SIG), DOC_BODY, i64::MIN),
            Err(VerifyError::Stale { .. })
        ));
        assert!(matches!(
            check(
                Some("999999999999999999"),
                Some(DOC_SIG),
                DOC_BODY,
                i64::MIN
            ),
            Err(VerifyError::Stale { .. })
        ));
    }

    #[test]
    fn a_changed_body_secret_or_timestamp_is_refused() {
        let tampered = DOC_BODY.replace("roadrunner", "wilecoyote");
        assert_eq!(
            check(Some(DOC_TS), Some(DOC_SIG), &tampered, DOC_NOW),
            Err(VerifyError::BadSignature)
        );
        assert_eq!(
            verify(
                b"another secret",
                Some(DOC_TS),
                Some(DOC_SIG),
                DOC_BODY.as_bytes(),
                DOC_NOW
            ),
            Err(VerifyError::BadSignature)
        );
        // Another timestamp inside the window: the signature covers it.
        assert_eq!(
            check(Some("1531420619"), Some(DOC_SIG), DOC_BODY, DOC_NOW),
            Err(VerifyError::BadSignature)
        );
        // A trailing byte is another body.
        assert_eq!(
            check(
                Some(DOC_TS),
                Some(DOC_SIG),
                &format!("{DOC_BODY}&"),
                DOC_NOW
            ),
            Err(VerifyError::BadSignature)
        );
    }

    #[test]
    fn missing_and_malformed_headers_are_refused() {
        assert_eq!(
            check(None, Some(DOC_SIG), DOC_BODY, DOC_NOW),
            Err(VerifyError::MissingTimestamp)
        );
        assert_eq!(
            check(Some(DOC_TS), None, DOC_BODY, DOC_NOW),
            Err(VerifyError::MissingSignature)
        );
        for ts in [
            "",
            " ",
            "-1531420618",
            "+1531420618",
            "1531420618.5",
            "0x5b47",
            "1e9",
            "１２",
        ] {
            assert_eq!(
                check(Some(ts), Some(DOC_SIG), DOC_BODY, DOC_NOW),
                Err(VerifyError::BadTimestamp),
                "{ts:?}"
            );
        }
        assert_eq!(
            check(
                Some("99999999999999999999"),
                Some(DOC_SIG),
                DOC_BODY,
                DOC_NOW
            ),
            Err(VerifyError::BadTimestamp)
        );
        let hex = &DOC_SIG[3..];
        for sig in [
            String::new(),
            hex.to_owned(),
            format!("v1={hex}"),
            format!("v0={}", &hex[1..]),
            format!("v0={hex}0"),
            format!("v0={}g", &hex[1..]),
            format!("v0=={hex}"),
            format!("v0={}é", &hex[2..]),
            "v0=".to_owned(),
        ] {
            assert_eq!(
                check(Some(DOC_TS), Some(&sig), DOC_BODY, DOC_NOW),
                Err(VerifyError::BadSignature),
                "{sig:?}"
            );
        }
    }

    #[test]
    fn messages_name_the_header_and_hold_no_secret() {
        let all = [
            VerifyError::MissingTimestamp,
            VerifyError::MissingSignature,
            VerifyError::BadTimestamp,
            VerifyError::Stale { age_s: 900 },
            VerifyError::BadSignature,
        ];
        for e in all {
            let msg = e.to_string();
            assert!(msg.contains("X-Slack-"), "{msg}");
            assert!(!msg.contains("8f742231"), "{msg}");
        }
        assert_eq!(
            VerifyError::Stale { age_s: 900 }.to_string(),
            "X-Slack-Request-Timestamp is 900 s old (at most 300 s either way)"
        );
    }

    proptest::proptest! {
        #[test]
        fn a_signature_verifies_its_own_body_only(
            secret in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..80),
            body in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..300),
            ts in 0i64..4_000_000_000,
            skew in -300i64..=300,
            flip in proptest::prelude::any::<usize>(),
        ) {
            let t = ts.to_string();
            let sig = sign(&secret, &t, &body);
            proptest::prop_assert_eq!(sig.len(), 67);
            proptest::prop_assert_eq!(verify(&secret, Some(&t), Some(&sig), &body, ts + skew), Ok(()));
            if !body.is_empty() {
                let mut other = body.clone();
                let i = flip % other.len();
                other[i] ^= 1;
                proptest::prop_assert_eq!(
                    verify(&secret, Some(&t), Some(&sig), &other, ts),
                    Err(VerifyError::BadSignature)
                );
            }
        }

        #[test]
        fn verify_never_panics(
            ts in proptest::option::of(".{0,30}"),
            sig in proptest::option::of(".{0,80}"),
            now in proptest::prelude::any::<i64>(),
        ) {
            let _ = verify(b"k", ts.as_deref(), sig.as_deref(), b"body", now);
        }
    }
}
