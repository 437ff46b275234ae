//! Verification: from an envelope to a [`VerifiedResponse`], and the checks a
//! verifier makes before it runs a call.

use ed25519_dalek::Signature;
use lev_protocol::{APPROVAL_PAYLOAD_TYPE, Envelope};
use serde::{Serialize, Serializer};
use time::OffsetDateTime;

use crate::CLOCK_SKEW;
use crate::b64::{decode_base64, encode_base64url};
use crate::keys::{TrustedKeys, key_id};
use crate::payload::{ApprovalPayload, PAYLOAD_VERSION};

/// Why an envelope is not a genuine, currently valid approval.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VerifyError {
    /// Not a DSSE envelope.
    #[error("malformed envelope: {0}")]
    Malformed(String),
    /// The payload type is not lev's approval type.
    #[error("expected payload type {expected:?}, found {found:?}")]
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
    /// The payload's version is unknown.
    #[error("expected payload version 1, found {0}")]
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

/// A decoded approval payload after signature verification.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct VerifiedResponse {
    /// Turn that emitted this occurrence.
    pub turn_id: String,
    /// The tool-call id this response answers.
    pub request_id: String,
    /// The bound tool name: the approval applies only to this exact call.
    pub tool_name: String,
    /// The bound args: the model's proposed args, matched byte for byte.
    pub args_json: String,
    /// The approver's edit: the args to execute, or empty for none.
    pub modified_args_json: String,
    /// Whether the request was approved.
    pub approved: bool,
    /// Whether the approval is remembered for the rest of the session.
    pub approved_for_session: bool,
    /// The capability shortfall this approval covered.
    pub covered_capabilities: Vec<String>,
    /// The caller the approval is scoped to.
    pub caller: String,
    /// Who actually decided.
    pub approver: String,
    /// The sandbox mode the call ran under.
    pub sandbox_mode: String,
    /// Free-form reason.
    pub reason: String,
    /// Context to inject before the tool runs, or empty.
    pub injected_context: String,
    /// The conversation the approval holds in.
    pub conversation_id: String,
    /// Single-use value; spend it once before running.
    pub nonce: String,
    /// The verified signer's raw public key (base64url in JSON).
    #[serde(serialize_with = "as_base64url")]
    pub signer_public_key: Vec<u8>,
    /// When it was signed.
    #[serde(with = "time::serde::rfc3339")]
    pub issued_at: OffsetDateTime,
    /// When it stops being valid.
    #[serde(with = "time::serde::rfc3339")]
    pub expires_at: OffsetDateTime,
}

fn as_base64url<S: Serializer>(bytes: &[u8], s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&encode_base64url(bytes))
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
        self.approved
            && self.request_id == request_id
            && self.tool_name == tool_name
            && self.args_json.as_bytes() == args_json.as_bytes()
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
        if self.request_id != call.request_id {
            return Err(
                mismatch("request_id", &self.request_id, call.request_id.as_bytes()).into(),
            );
        }
        if self.tool_name != call.tool_name {
            return Err(mismatch("tool_name", &self.tool_name, call.tool_name.as_bytes()).into());
        }
        if self.args_json.as_bytes() != call.args_json {
            return Err(mismatch("args_json", &self.args_json, call.args_json).into());
        }
        for (field, signed, actual) in [
            (
                "conversation_id",
                &self.conversation_id,
                call.conversation_id,
            ),
            ("caller", &self.caller, call.caller),
            ("sandbox_mode", &self.sandbox_mode, call.sandbox_mode),
        ] {
            if let Some(actual) = actual
                && signed != actual
            {
                return Err(mismatch(field, signed, actual.as_bytes()).into());
            }
        }
        if !self.approved {
            return Err(NotAuthorized::Denied {
                reason: self.reason.clone(),
            });
        }
        Ok(())
    }

    /// The args to execute: the edit when there is one, else the proposed args.
    pub fn resolve_approved_call(&self) -> &str {
        resolve_approved_call(&self.args_json, &self.modified_args_json)
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
            ("conversation_id", &self.conversation_id, conversation_id),
            ("caller", &self.caller, caller),
            ("sandbox_mode", &self.sandbox_mode, sandbox_mode),
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

/// Verify an approval envelope: exact payload type, a strict Ed25519 signature
/// by a trusted key over the PAE, a strict payload parse, a known version, and
/// `now` within `issued_at` and `expires_at` give or take 60 s.
///
/// # Errors
/// The first check that fails.
pub fn verify(
    envelope: &Envelope,
    keys: &TrustedKeys,
    now: OffsetDateTime,
) -> Result<VerifiedResponse, VerifyError> {
    if envelope.payload_type != APPROVAL_PAYLOAD_TYPE {
        return Err(VerifyError::PayloadType {
            expected: APPROVAL_PAYLOAD_TYPE,
            found: envelope.payload_type.clone(),
        });
    }
    let payload = decode_base64(&envelope.payload)
        .map_err(|e| VerifyError::Malformed(format!("payload: {e}")))?;
    if envelope.signatures.is_empty() {
        return Err(VerifyError::Malformed("no signatures".into()));
    }
    let message = crate::dsse::pae(&envelope.payload_type, &payload);
    let mut signer = None;
    let mut tried_trusted = None;
    'sigs: for s in &envelope.signatures {
        let Ok(raw) = decode_base64(&s.sig) else {
            continue;
        };
        let Ok(bytes) = <[u8; 64]>::try_from(raw.as_slice()) else {
            continue;
        };
        let sig = Signature::from_bytes(&bytes);
        for key in keys.candidates(&s.keyid) {
            if key.verify_strict(&message, &sig).is_ok() {
                signer = Some(key.to_bytes().to_vec());
                break 'sigs;
            }
        }
        if keys.contains_kid(&s.keyid) {
            tried_trusted = Some(s.keyid.clone());
        }
    }
    let Some(signer_public_key) = signer else {
        return Err(match tried_trusted {
            Some(kid) => VerifyError::BadSignature(kid),
            None => VerifyError::UntrustedKey(
                envelope
                    .signatures
                    .iter()
                    .map(|s| s.keyid.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
            ),
        });
    };
    let p =
        ApprovalPayload::from_bytes(&payload).map_err(|e| VerifyError::Payload(e.to_string()))?;
    if p.v != PAYLOAD_VERSION {
        return Err(VerifyError::Version(p.v));
    }
    let fmt = |t: OffsetDateTime| {
        t.format(&time::format_description::well_known::Rfc3339)
            .unwrap_or_default()
    };
    if now < p.issued_at - CLOCK_SKEW {
        return Err(VerifyError::NotYetValid {
            issued_at: fmt(p.issued_at),
            now: fmt(now),
        });
    }
    if now > p.expires_at + CLOCK_SKEW {
        return Err(VerifyError::Expired {
            expires_at: fmt(p.expires_at),
            now: fmt(now),
        });
    }
    Ok(VerifiedResponse {
        turn_id: p.turn_id,
        request_id: p.request_id,
        tool_name: p.tool_name,
        args_json: p.args_json,
        modified_args_json: p.modified_args_json,
        approved: p.approved,
        approved_for_session: p.approved_for_session,
        covered_capabilities: p.covered_capabilities,
        caller: p.caller,
        approver: p.approver,
        sandbox_mode: p.sandbox_mode,
        reason: p.reason,
        injected_context: p.injected_context,
        conversation_id: p.conversation_id,
        nonce: p.nonce,
        signer_public_key,
        issued_at: p.issued_at,
        expires_at: p.expires_at,
    })
}
