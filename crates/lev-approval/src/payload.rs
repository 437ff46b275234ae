//! The signed payload of an approval.

use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

use crate::b64::encode_base64url;

/// The only payload version this code knows.
pub const PAYLOAD_VERSION: u32 = 1;

/// What an approval envelope signs: every field of the seed's `VerifiedResponse`
/// but `signer_public_key`, plus `v`, `issued_at` and `expires_at`.
///
/// Parsing is strict: an unknown field, a duplicated key, a wrong type or a
/// missing field is refused. Strings may be empty.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApprovalPayload {
    /// Payload version, 1.
    pub v: u32,
    /// The turn that made the call.
    pub turn_id: String,
    /// The tool-call id this decision answers.
    pub request_id: String,
    /// The bound tool name.
    pub tool_name: String,
    /// The proposed args, the exact text the approval is bound to.
    pub args_json: String,
    /// The approver's edit, or empty.
    pub modified_args_json: String,
    /// Granted or denied.
    pub approved: bool,
    /// Remembered for the session (or always).
    pub approved_for_session: bool,
    /// The capability shortfall this approval covered, sorted.
    pub covered_capabilities: Vec<String>,
    /// Whom the call acts for.
    pub caller: String,
    /// Who decided: a token name, `policy`, or a grant's approver.
    pub approver: String,
    /// The sandbox mode the call runs under.
    pub sandbox_mode: String,
    /// Free-form reason.
    pub reason: String,
    /// Context to inject before the tool runs, or empty.
    pub injected_context: String,
    /// The conversation the decision holds in.
    pub conversation_id: String,
    /// Single-use value, at least 128 random bits in base64url.
    pub nonce: String,
    /// When it was signed.
    #[serde(with = "time::serde::rfc3339")]
    pub issued_at: OffsetDateTime,
    /// When it stops being valid.
    #[serde(with = "time::serde::rfc3339")]
    pub expires_at: OffsetDateTime,
}

impl ApprovalPayload {
    /// The payload's canonical bytes (compact JSON, fields in declaration order).
    pub fn to_bytes(&self) -> Vec<u8> {
        serde_json::to_vec(self).unwrap_or_default()
    }

    /// Strictly parse payload bytes.
    ///
    /// # Errors
    /// serde's message naming the unknown, duplicated, missing or mistyped field.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, serde_json::Error> {
        serde_json::from_slice(bytes)
    }
}

/// A fresh nonce: 128 random bits in base64url without padding.
///
/// # Errors
/// When the system has no randomness to give.
pub fn new_nonce() -> Result<String, getrandom::Error> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes)?;
    Ok(encode_base64url(&bytes))
}
