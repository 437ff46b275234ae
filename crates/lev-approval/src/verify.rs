//! Verification: from an envelope to a [`VerifiedResponse`], and the checks a
//! verifier makes before it runs a call.

use ed25519_dalek::Signature;
use lev_protocol::{APPROVAL_PAYLOAD_TYPE, APPROVAL_PAYLOAD_TYPE_V2, Envelope};
use serde::ser::SerializeStruct as _;
use serde::{Serialize, Serializer};
use time::OffsetDateTime;

use crate::CLOCK_SKEW;
use crate::b64::{decode_base64, encode_base64url};
use crate::keys::{TrustedKeys, key_id};
use crate::payload::{ApprovalPayload, PAYLOAD_VERSION, PAYLOAD_VERSION_VOTES};

/// Why an envelope is not a genuine, currently valid approval.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VerifyError {
    /// Not a DSSE envelope.
    #[error("malformed envelope: {0}")]
    Malformed(String),
    /// The payload type is not one of lev's approval types.
    #[error("expected payload type {expected:?} (or version=2), found {found:?}")]
    PayloadType {
        /// lev's type.
        expected: &'static str,
        /// What the envelope says.
        found: String,
    },
    /// No signature is by a trusted key.
    #[error("no signature by a trusted key (key ids {0})")]
    UntrustedKey(String),
    /// A trusted key's signature does not verify.
    #[error("bad signature: the envelope was altered or not signed by key {0}")]
    BadSignature(String),
    /// The signed payload is not a valid approval payload.
    #[error("invalid payload: {0}")]
    Payload(String),
    /// The payload's version is unknown, or not the one its payload type
    /// names (1 without votes, 2 with them).
    #[error(
        "expected payload version 1 (no votes) or 2 (votes), as its payload type says; found {0}"
    )]
    Version(u32),
    /// Past `expires_at` (plus skew).
    #[error("expired at {expires_at} (now {now})")]
    Expired {
        /// The payload's `expires_at`.
        expires_at: String,
        /// The verifier's clock.
        now: String,
    },
    /// Before `issued_at` (minus skew).
    #[error("issued in the future at {issued_at} (now {now})")]
    NotYetValid {
        /// The payload's `issued_at`.
        issued_at: String,
        /// The verifier's clock.
        now: String,
    },
}

impl VerifyError {
    /// A stable snake_case name for the kind of failure, as test vectors and
    /// scripts name it: `malformed`, `payload_type`, `untrusted_key`,
    /// `bad_signature`, `payload`, `version`, `expired` or `not_yet_valid`.
    pub fn class(&self) -> &'static str {
        match self {
            Self::Malformed(_) => "malformed",
            Self::PayloadType { .. } => "payload_type",
            Self::UntrustedKey(_) => "untrusted_key",
            Self::BadSignature(_) => "bad_signature",
            Self::Payload(_) => "payload",
            Self::Version(_) => "version",
            Self::Expired { .. } => "expired",
            Self::NotYetValid { .. } => "not_yet_valid",
        }
    }
}

/// An approval payload after signature verification: the signed
/// [`ApprovalPayload`] as it was read (strictly), and the key that signed it.
///
/// As JSON (what `lev verify` prints) it is the payload's fields without
/// `v`, with `signer_public_key` (base64url) before `issued_at`: the shape
/// of the seed's `VerifiedResponse`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifiedResponse {
    /// The signed payload: the call it is bound to (`request_id`,
    /// `tool_name`, `args_json` byte for byte), the decision, its context
    /// and its validity.
    pub payload: ApprovalPayload,
    /// The verified signer's raw public key (base64url in JSON).
    pub signer_public_key: Vec<u8>,
}

impl Serialize for VerifiedResponse {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        /// A time as RFC 3339, as the payload writes it.
        struct Time(OffsetDateTime);
        impl Serialize for Time {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                time::serde::rfc3339::serialize(&self.0, s)
            }
        }
        let p = &self.payload;
        let mut out = s.serialize_struct("VerifiedResponse", 19)?;
        out.serialize_field("turn_id", &p.turn_id)?;
        out.serialize_field("request_id", &p.request_id)?;
        out.serialize_field("tool_name", &p.tool_name)?;
        out.serialize_field("args_json", &p.args_json)?;
        out.serialize_field("modified_args_json", &p.modified_args_json)?;
        out.serialize_field("approved", &p.approved)?;
        out.serialize_field("approved_for_session", &p.approved_for_session)?;
        out.serialize_field("covered_capabilities", &p.covered_capabilities)?;
        out.serialize_field("caller", &p.caller)?;
        out.serialize_field("approver", &p.approver)?;
        out.serialize_field("sandbox_mode", &p.sandbox_mode)?;
        out.serialize_field("reason", &p.reason)?;
        out.serialize_field("injected_context", &p.injected_context)?;
        out.serialize_field("conversation_id", &p.conversation_id)?;
        out.serialize_field("nonce", &p.nonce)?;
        out.serialize_field(
            "signer_public_key",
            &encode_base64url(&self.signer_public_key),
        )?;
        out.serialize_field("issued_at", &Time(p.issued_at))?;
        out.serialize_field("expires_at", &Time(p.expires_at))?;
        if let Some(votes) = &p.votes {
            out.serialize_field("votes", votes)?;
        }
        out.end()
    }
}

/// A signature's 64 bytes, or why it has none.
fn decode_signature(text: &str) -> Result<[u8; 64], String> {
    let raw = decode_base64(text).map_err(|_| "not valid base64".to_owned())?;
    <[u8; 64]>::try_from(raw.as_slice())
        .map_err(|_| format!("not 64 bytes (found {} bytes)", raw.len()))
}

/// What the signature cannot show: the payload's own consistency.
fn check_payload(p: &ApprovalPayload) -> Result<(), VerifyError> {
    if !p.covered_capabilities.windows(2).all(|w| w[0] < w[1]) {
        return Err(VerifyError::Payload(
            "covered_capabilities is not sorted without duplicates".into(),
        ));
    }
    if p.expires_at < p.issued_at {
        return Err(VerifyError::Payload(
            "expires_at is before issued_at".into(),
        ));
    }
    Ok(())
}

/// The envelope's key ids for a message: the first few, each cut short, and
/// how many more there are.
fn list_key_ids(envelope: &Envelope) -> String {
    let mut listed: Vec<String> = envelope
        .signatures
        .iter()
        .take(LISTED_KEY_IDS)
        .map(|s| shorten(&s.keyid, 32))
        .collect();
    let more = envelope.signatures.len().saturating_sub(LISTED_KEY_IDS);
    if more > 0 {
        listed.push(format!("and {more} more"));
    }
    listed.join(", ")
}

/// `text` cut to `max` characters (an ellipsis marks the cut), control
/// characters escaped: envelope text is attacker-written.
fn shorten(text: &str, max: usize) -> String {
    let mut out = String::new();
    for (i, c) in text.chars().enumerate() {
        if i == max {
            out.push('…');
            break;
        }
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

/// The context a verifier runs a call in: what the approval must be scoped to.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("approval is for {field} {signed:?}, not {actual:?}")]
pub struct ContextMismatch {
    /// `conversation_id`, `caller` or `sandbox_mode` (or, from
    /// [`VerifiedResponse::check_call`], `request_id`, `tool_name`, `args_json`).
    pub field: &'static str,
    /// What the approval says.
    pub signed: String,
    /// What the verifier runs under.
    pub actual: String,
}

/// The call a verifier is about to run, and as much of its turn as it knows.
///
/// `args_json` is bytes because it is compared byte for byte: text read from a
/// file is checked as it is, never decoded and re-encoded first. A context
/// field left `None` is not checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Call<'a> {
    /// The tool-call id.
    pub request_id: &'a str,
    /// The tool.
    pub tool_name: &'a str,
    /// The proposed args, exactly as the model emitted them.
    pub args_json: &'a [u8],
    /// The conversation the call runs in, when known.
    pub conversation_id: Option<&'a str>,
    /// Whom the call acts for, when known.
    pub caller: Option<&'a str>,
    /// The sandbox mode the call runs under, when known.
    pub sandbox_mode: Option<&'a str>,
}

impl<'a> Call<'a> {
    /// The call `(request_id, tool_name, args_json)` with no context to check.
    pub fn new(request_id: &'a str, tool_name: &'a str, args_json: &'a str) -> Self {
        Self {
            request_id,
            tool_name,
            args_json: args_json.as_bytes(),
            conversation_id: None,
            caller: None,
            sandbox_mode: None,
        }
    }
}

/// Why a genuine approval does not authorize a call.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotAuthorized {
    /// The approval is bound to another call, or scoped to another turn.
    #[error(transparent)]
    Mismatch(#[from] ContextMismatch),
    /// The approval is a denial: it authorizes nothing.
    #[error("{}", denial_message(.reason))]
    Denied {
        /// The signed reason, possibly empty.
        reason: String,
    },
}

fn denial_message(reason: &str) -> String {
    if reason.is_empty() {
        "the call was denied".to_owned()
    } else {
        format!("the call was denied: {reason}")
    }
}

impl NotAuthorized {
    /// A stable snake_case name: `denied`, or the field that differs
    /// (`request_id`, `tool_name`, `args_json`, `conversation_id`, `caller`,
    /// `sandbox_mode`).
    pub fn reason(&self) -> &'static str {
        match self {
            Self::Mismatch(m) => m.field,
            Self::Denied { .. } => "denied",
        }
    }
}

impl VerifiedResponse {
    /// Whether this verified, approved token authorizes the exact call
    /// (`request_id`, `tool_name`, `args_json`), matched byte for byte.
    /// A denial authorizes nothing.
    pub fn authorizes_call(&self, request_id: &str, tool_name: &str, args_json: &str) -> bool {
        self.payload.approved
            && self.payload.request_id == request_id
            && self.payload.tool_name == tool_name
            && self.payload.args_json.as_bytes() == args_json.as_bytes()
    }

    /// Check that this approval authorizes `call`, and say why not: the call's
    /// identity (request id, tool, args byte for byte) first, then the context
    /// fields the call names, then the decision itself.
    ///
    /// `check_call(&Call::new(r, t, a)).is_ok()` equals `authorizes_call(r, t, a)`.
    ///
    /// # Errors
    /// The first field that differs, or [`NotAuthorized::Denied`].
    pub fn check_call(&self, call: &Call<'_>) -> Result<(), NotAuthorized> {
        let mismatch = |field, signed: &str, actual: &[u8]| ContextMismatch {
            field,
            signed: signed.to_owned(),
            actual: String::from_utf8_lossy(actual).into_owned(),
        };
        if self.payload.request_id != call.request_id {
            return Err(mismatch(
                "request_id",
                &self.payload.request_id,
                call.request_id.as_bytes(),
            )
            .into());
        }
        if self.payload.tool_name != call.tool_name {
            return Err(mismatch(
                "tool_name",
                &self.payload.tool_name,
                call.tool_name.as_bytes(),
            )
            .into());
        }
        if self.payload.args_json.as_bytes() != call.args_json {
            return Err(mismatch("args_json", &self.payload.args_json, call.args_json).into());
        }
        for (field, signed, actual) in [
            (
                "conversation_id",
                &self.payload.conversation_id,
                call.conversation_id,
            ),
            ("caller", &self.payload.caller, call.caller),
            (
                "sandbox_mode",
                &self.payload.sandbox_mode,
                call.sandbox_mode,
            ),
        ] {
            if let Some(actual) = actual
                && signed != actual
            {
                return Err(mismatch(field, signed, actual.as_bytes()).into());
            }
        }
        if !self.payload.approved {
            return Err(NotAuthorized::Denied {
                reason: self.payload.reason.clone(),
            });
        }
        Ok(())
    }

    /// The args to execute: the edit when there is one, else the proposed args.
    pub fn resolve_approved_call(&self) -> &str {
        resolve_approved_call(&self.payload.args_json, &self.payload.modified_args_json)
    }

    /// Check the approval is scoped to the turn the verifier runs.
    ///
    /// # Errors
    /// The first of conversation, caller and sandbox mode that differs.
    pub fn check_context(
        &self,
        conversation_id: &str,
        caller: &str,
        sandbox_mode: &str,
    ) -> Result<(), ContextMismatch> {
        for (field, signed, actual) in [
            (
                "conversation_id",
                &self.payload.conversation_id,
                conversation_id,
            ),
            ("caller", &self.payload.caller, caller),
            ("sandbox_mode", &self.payload.sandbox_mode, sandbox_mode),
        ] {
            if signed != actual {
                return Err(ContextMismatch {
                    field,
                    signed: signed.clone(),
                    actual: actual.to_owned(),
                });
            }
        }
        Ok(())
    }

    /// The key id of the signer.
    pub fn signer_kid(&self) -> String {
        <[u8; 32]>::try_from(self.signer_public_key.as_slice())
            .map(|k| key_id(&k))
            .unwrap_or_default()
    }
}

/// The args to execute: `modified_args_json` when not empty, else `args_json`.
pub fn resolve_approved_call<'a>(args_json: &'a str, modified_args_json: &'a str) -> &'a str {
    if modified_args_json.is_empty() {
        args_json
    } else {
        modified_args_json
    }
}

/// Parse and verify envelope JSON bytes.
///
/// # Errors
/// As [`verify`], and [`VerifyError::Malformed`] when the bytes are not an envelope.
pub fn verify_json(
    bytes: &[u8],
    keys: &TrustedKeys,
    now: OffsetDateTime,
) -> Result<VerifiedResponse, VerifyError> {
    let envelope: Envelope =
        serde_json::from_slice(bytes).map_err(|e| VerifyError::Malformed(e.to_string()))?;
    verify(&envelope, keys, now)
}

/// The most signatures one envelope may carry. Each is checked against every
/// trusted key, so an envelope with more is refused before any is examined:
/// a hostile envelope cannot make verification cost grow without bound.
pub const MAX_SIGNATURES: usize = 16;

/// How many key ids a "no signature by a trusted key" message lists.
const LISTED_KEY_IDS: usize = 5;

/// Verify an approval envelope: exact payload type, at most
/// [`MAX_SIGNATURES`] signatures, a strict Ed25519 signature by a trusted key
/// over the PAE, a strict payload parse (timestamps in strict RFC 3339,
/// `covered_capabilities` sorted, `expires_at` not before `issued_at`), a
/// known version, and `now` within `issued_at` and `expires_at` give or take
/// 60 s.
///
/// # Errors
/// The first check that fails.
pub fn verify(
    envelope: &Envelope,
    keys: &TrustedKeys,
    now: OffsetDateTime,
) -> Result<VerifiedResponse, VerifyError> {
    let version = match envelope.payload_type.as_str() {
        APPROVAL_PAYLOAD_TYPE => PAYLOAD_VERSION,
        APPROVAL_PAYLOAD_TYPE_V2 => PAYLOAD_VERSION_VOTES,
        _ => 0,
    };
    if version == 0 {
        return Err(VerifyError::PayloadType {
            expected: APPROVAL_PAYLOAD_TYPE,
            found: shorten(&envelope.payload_type, 100),
        });
    }
    if envelope.signatures.is_empty() {
        return Err(VerifyError::Malformed("no signatures".into()));
    }
    if envelope.signatures.len() > MAX_SIGNATURES {
        return Err(VerifyError::Malformed(format!(
            "{} signatures, more than the {MAX_SIGNATURES} a verifier examines",
            envelope.signatures.len()
        )));
    }
    let payload = decode_base64(&envelope.payload)
        .map_err(|e| VerifyError::Malformed(format!("payload: {e}")))?;
    let message = crate::pae::pae(&envelope.payload_type, &payload);
    let mut signer = None;
    let mut tried_trusted = None;
    let mut undecodable = None;
    'sigs: for (index, s) in envelope.signatures.iter().enumerate() {
        let bytes = match decode_signature(&s.sig) {
            Ok(bytes) => bytes,
            Err(cause) => {
                if undecodable.is_none() && keys.contains_kid(&s.keyid) {
                    undecodable = Some(format!(
                        "signature {index} by key {}: {cause}",
                        shorten(&s.keyid, 32)
                    ));
                }
                continue;
            }
        };
        let sig = Signature::from_bytes(&bytes);
        for key in keys.candidates(&s.keyid) {
            if key.verify_strict(&message, &sig).is_ok() {
                signer = Some(key.to_bytes().to_vec());
                break 'sigs;
            }
        }
        if tried_trusted.is_none() && keys.contains_kid(&s.keyid) {
            tried_trusted = Some(s.keyid.clone());
        }
    }
    let Some(signer_public_key) = signer else {
        return Err(match (tried_trusted, undecodable) {
            (Some(kid), _) => VerifyError::BadSignature(kid),
            (None, Some(cause)) => VerifyError::Malformed(cause),
            (None, None) => VerifyError::UntrustedKey(list_key_ids(envelope)),
        });
    };
    let p =
        ApprovalPayload::from_bytes(&payload).map_err(|e| VerifyError::Payload(e.to_string()))?;
    // The version is the one the payload type names, and only version 2
    // carries votes (and must).
    if p.v != version || p.votes.is_some() != (version == PAYLOAD_VERSION_VOTES) {
        return Err(VerifyError::Version(p.v));
    }
    check_payload(&p)?;
    let fmt = |t: OffsetDateTime| {
        t.format(&time::format_description::well_known::Rfc3339)
            .unwrap_or_default()
    };
    // Checked: a signed time near the end (or start) of the representable
    // range must not overflow. Past the range, the bound is no bound.
    if p.issued_at.checked_sub(CLOCK_SKEW).is_some_and(|t| now < t) {
        return Err(VerifyError::NotYetValid {
            issued_at: fmt(p.issued_at),
            now: fmt(now),
        });
    }
    if p.expires_at
        .checked_add(CLOCK_SKEW)
        .is_some_and(|t| now > t)
    {
        return Err(VerifyError::Expired {
            expires_at: fmt(p.expires_at),
            now: fmt(now),
        });
    }
    Ok(VerifiedResponse {
        payload: p,
        signer_public_key,
    })
}

#[cfg(test)]
mod tests {
    use lev_protocol::EnvelopeSignature;

    use super::*;
    use crate::keys::SigningKeyPair;
    use crate::payload::parse_timestamp;

    fn untrusted_envelope(signatures: usize) -> Envelope {
        Envelope {
            payload_type: APPROVAL_PAYLOAD_TYPE.into(),
            payload: crate::b64::encode_base64(b"{}"),
            signatures: (0..signatures)
                .map(|i| {
                    EnvelopeSignature::new(
                        format!("{i:016x}"),
                        crate::b64::encode_base64(&[0u8; 64]),
                    )
                })
                .collect(),
        }
    }

    fn trusted() -> (SigningKeyPair, TrustedKeys) {
        let key = SigningKeyPair::from_seed(&[0x11; 32]);
        let mut keys = TrustedKeys::new();
        keys.insert(key.verifying_key()).unwrap();
        (key, keys)
    }

    #[test]
    fn the_untrusted_key_message_lists_at_most_five_ids() {
        let (_, keys) = trusted();
        let err = verify(
            &untrusted_envelope(MAX_SIGNATURES),
            &keys,
            OffsetDateTime::UNIX_EPOCH,
        )
        .unwrap_err();
        let text = err.to_string();
        assert!(text.contains("0000000000000004, and 11 more"), "{text}");
        assert!(!text.contains("0000000000000005"), "{text}");
    }

    #[test]
    fn more_signatures_than_examined_are_refused() {
        let (_, keys) = trusted();
        let err = verify(
            &untrusted_envelope(MAX_SIGNATURES + 1),
            &keys,
            OffsetDateTime::UNIX_EPOCH,
        )
        .unwrap_err();
        assert_eq!(err.class(), "malformed", "{err}");
        assert!(err.to_string().contains("17 signatures"), "{err}");
    }

    #[test]
    fn an_undecodable_signature_under_a_trusted_id_names_its_cause() {
        let (key, keys) = trusted();
        for (sig, cause) in [
            ("not base64!", "not valid base64"),
            ("AAAA", "not 64 bytes (found 3 bytes)"),
        ] {
            let mut envelope = untrusted_envelope(1);
            envelope.signatures[0] = EnvelopeSignature::new(key.kid(), sig);
            let err = verify(&envelope, &keys, OffsetDateTime::UNIX_EPOCH).unwrap_err();
            assert_eq!(
                err.to_string(),
                format!(
                    "malformed envelope: signature 0 by key {}: {cause}",
                    key.kid()
                )
            );
        }
    }

    #[test]
    fn hostile_key_ids_are_cut_and_escaped() {
        let (_, keys) = trusted();
        let mut envelope = untrusted_envelope(1);
        envelope.signatures[0].keyid = format!("\x1b[2J{}", "a".repeat(1000));
        let text = verify(&envelope, &keys, OffsetDateTime::UNIX_EPOCH)
            .unwrap_err()
            .to_string();
        assert!(!text.contains('\x1b') && text.len() < 200, "{text}");
    }

    #[test]
    fn timestamps_are_strict_rfc3339() {
        for good in [
            "2026-01-01T00:00:00Z",
            "2026-01-01T00:00:00.123456789Z",
            "2026-01-01T00:00:00+01:00",
            "9999-12-31T23:59:59-23:59",
            "0000-01-01T00:00:00Z",
        ] {
            assert!(parse_timestamp(good).is_ok(), "{good}");
        }
        for bad in [
            "2026-01-01 00:00:00Z",
            "2026-01-01t00:00:00Z",
            "2026-01-01T00:00:00z",
            "2026-01-01T00:00:00",
            "2026-01-01T00:00:00.Z",
            "2026-01-01T00:00:00+0100",
            "2026-01-01T00:00:00Z ",
            "2026-02-30T00:00:00Z",
            "+2026-01-01T00:00:00Z",
            "2026-1-01T00:00:00Z",
            "",
        ] {
            assert!(parse_timestamp(bad).is_err(), "{bad:?}");
        }
    }
}
