//! The signed payload of an approval, and the votes a payload of version 2
//! carries ([`PayloadVote`], each with the voter's own [`VoteEnvelope`]): the
//! shapes only. Checking a vote is `votes`'s, a layer above.

use lev_protocol::{Envelope, EnvelopeSignature};
use serde::{Deserialize, Deserializer, Serialize};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use crate::b64::encode_base64url;

/// The payload version of a decision by one person without a signed vote.
pub const PAYLOAD_VERSION: u32 = 1;

/// The payload version of a decision that carries its votes: more than one,
/// or signed ones (SPEC section 13).
pub const PAYLOAD_VERSION_VOTES: u32 = 2;

/// What an approval envelope signs. A verified envelope gives it back inside
/// a [`crate::VerifiedResponse`], beside the key that signed it.
///
/// Parsing is strict: an unknown field, a duplicated key, a wrong type or a
/// missing field is refused. Strings may be empty.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApprovalPayload {
    /// Payload version: 1, or 2 for a decision carrying its votes.
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
    /// When it was signed (strict RFC 3339, see [`parse_timestamp`]).
    #[serde(with = "strict_rfc3339")]
    pub issued_at: OffsetDateTime,
    /// When it stops being valid (strict RFC 3339, see [`parse_timestamp`]).
    #[serde(with = "strict_rfc3339")]
    pub expires_at: OffsetDateTime,
    /// Version 2 only, and there required: the votes that made the
    /// decision, each with the voter's own signed vote or null.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub votes: Option<Vec<PayloadVote>>,
}

impl ApprovalPayload {
    /// The payload's canonical bytes (compact JSON, fields in declaration order).
    ///
    /// # Errors
    /// When a field cannot be written as the payload requires (a time past
    /// year 9999): such a payload is never signed.
    pub fn to_bytes(&self) -> Result<Vec<u8>, serde_json::Error> {
        serde_json::to_vec(self)
    }

    /// The DSSE payload type this payload is signed under: version 1's, or
    /// version 2's for one carrying votes.
    pub fn payload_type(&self) -> &'static str {
        if self.votes.is_some() {
            lev_protocol::APPROVAL_PAYLOAD_TYPE_V2
        } else {
            lev_protocol::APPROVAL_PAYLOAD_TYPE
        }
    }

    /// Strictly parse payload bytes.
    ///
    /// # Errors
    /// serde's message naming the unknown, duplicated, missing or mistyped field.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, serde_json::Error> {
        serde_json::from_slice(bytes)
    }
}

/// A vote inside an approval payload of version 2.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PayloadVote {
    /// The voter's token name.
    pub voter: String,
    /// Approve or deny.
    pub approved: bool,
    /// When the server recorded it (strict RFC 3339).
    #[serde(with = "strict_rfc3339")]
    pub at: OffsetDateTime,
    /// The voter's own signed vote, or null for an unsigned vote. Always
    /// written; a payload without it is refused.
    #[serde(deserialize_with = "required")]
    pub envelope: Option<VoteEnvelope>,
}

/// A field that must be present, `null` allowed.
fn required<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Option<T>, D::Error> {
    Option::<T>::deserialize(d)
}

/// A vote envelope inside a signed payload: the DSSE envelope's shape,
/// read strictly (an unknown field is refused, as everywhere in a payload).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VoteEnvelope {
    /// [`VOTE_PAYLOAD_TYPE`](lev_protocol::VOTE_PAYLOAD_TYPE).
    #[serde(rename = "payloadType")]
    pub payload_type: String,
    /// The vote payload, base64.
    pub payload: String,
    /// Its signatures.
    pub signatures: Vec<VoteSignature>,
}

/// One signature of a [`VoteEnvelope`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VoteSignature {
    /// The key id hint, `person:NAME:N`.
    pub keyid: String,
    /// The signature, base64.
    pub sig: String,
    /// A passkey's authenticator data, base64.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub authenticator_data: Option<String>,
    /// A passkey's client data JSON, base64.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_data_json: Option<String>,
}

impl From<&Envelope> for VoteEnvelope {
    fn from(e: &Envelope) -> Self {
        Self {
            payload_type: e.payload_type.clone(),
            payload: e.payload.clone(),
            signatures: e
                .signatures
                .iter()
                .map(|s| VoteSignature {
                    keyid: s.keyid.clone(),
                    sig: s.sig.clone(),
                    authenticator_data: s.authenticator_data.clone(),
                    client_data_json: s.client_data_json.clone(),
                })
                .collect(),
        }
    }
}

impl From<&VoteEnvelope> for Envelope {
    fn from(e: &VoteEnvelope) -> Self {
        Self {
            payload_type: e.payload_type.clone(),
            payload: e.payload.clone(),
            signatures: e
                .signatures
                .iter()
                .map(|s| EnvelopeSignature {
                    keyid: s.keyid.clone(),
                    sig: s.sig.clone(),
                    authenticator_data: s.authenticator_data.clone(),
                    client_data_json: s.client_data_json.clone(),
                })
                .collect(),
        }
    }
}

/// The payload of the approval `envelope` carries, when it parses and
/// approves (a denial authorizes nothing, so its nonce guards nothing). The
/// signature is not checked: this reads an envelope its own signer is about
/// to store, to note whose approval its nonce is.
pub fn approving_payload(envelope: &lev_protocol::Envelope) -> Option<ApprovalPayload> {
    let bytes = crate::decode_base64(&envelope.payload).ok()?;
    let payload = ApprovalPayload::from_bytes(&bytes).ok()?;
    payload.approved.then_some(payload)
}

/// Why a timestamp is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("expected an RFC 3339 time such as 2026-01-01T12:00:00Z, found {found:?}: {why}")]
pub struct TimestampError {
    /// The text, cut to 64 characters.
    pub found: String,
    /// What is wrong with it.
    pub why: String,
}

/// Parse a timestamp strictly, as lev writes them: RFC 3339's `date-time`,
/// `YYYY-MM-DDTHH:MM:SS`, an optional fraction, then `Z` or `+HH:MM`/`-HH:MM`.
/// The separator must be an upper-case `T` (not a space or `t`) and the zone
/// an upper-case `Z` or a numeric offset: one instant has one spelling family,
/// so a verifier and a signer cannot read the same bytes differently.
///
/// # Errors
/// Any other shape, or a date or time that does not exist.
pub fn parse_timestamp(text: &str) -> Result<OffsetDateTime, TimestampError> {
    let refuse = |why: &str| TimestampError {
        found: text.chars().take(64).collect(),
        why: why.to_owned(),
    };
    let b = text.as_bytes();
    let digits = |range: std::ops::Range<usize>| {
        b.get(range)
            .is_some_and(|d| d.iter().all(u8::is_ascii_digit))
    };
    let at = |i: usize, c: u8| b.get(i) == Some(&c);
    if !(digits(0..4)
        && at(4, b'-')
        && digits(5..7)
        && at(7, b'-')
        && digits(8..10)
        && at(10, b'T')
        && digits(11..13)
        && at(13, b':')
        && digits(14..16)
        && at(16, b':')
        && digits(17..19))
    {
        return Err(refuse("not YYYY-MM-DDTHH:MM:SS with an upper-case T"));
    }
    let mut i = 19;
    if at(i, b'.') {
        let start = i + 1;
        i = start;
        while b.get(i).is_some_and(u8::is_ascii_digit) {
            i += 1;
        }
        if i == start {
            return Err(refuse("a '.' without fraction digits"));
        }
    }
    let zone_ok = match b.get(i..) {
        Some([b'Z']) => true,
        Some([b'+' | b'-', h1, h2, b':', m1, m2]) => {
            [h1, h2, m1, m2].iter().all(|d| d.is_ascii_digit())
        }
        _ => false,
    };
    if !zone_ok {
        return Err(refuse(
            "expected the zone as Z or +HH:MM / -HH:MM, and nothing after it",
        ));
    }
    OffsetDateTime::parse(text, &Rfc3339).map_err(|e| refuse(&e.to_string()))
}

/// Serde for the payload's times: written as RFC 3339, read by [`parse_timestamp`].
pub(crate) mod strict_rfc3339 {
    use serde::{Deserialize as _, Deserializer, Serializer};
    use time::OffsetDateTime;

    pub fn serialize<S: Serializer>(t: &OffsetDateTime, s: S) -> Result<S::Ok, S::Error> {
        time::serde::rfc3339::serialize(t, s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<OffsetDateTime, D::Error> {
        let text = std::borrow::Cow::<str>::deserialize(d)?;
        super::parse_timestamp(&text).map_err(serde::de::Error::custom)
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
