//! The committed test vectors: their file format, the program that makes them,
//! and the reference verifier that judges them.
//!
//! Shared by the test binary (`tests/all.rs`) and the generator
//! (`cargo run -p lev-approval --example gen_vectors`), so both read and write
//! exactly one format. Everything here is deterministic: fixed key seeds, fixed
//! times, fixed nonces. Ed25519 signing is deterministic too, so the generator
//! writes the same bytes every time.

use lev_approval::{
    ApprovalPayload, Call, SigningKeyPair, TrustedKeys, decode_base64, encode_base64url, key_id,
    sign_envelope, sign_payload, verify_json,
};
use lev_protocol::{APPROVAL_PAYLOAD_TYPE, Envelope, EnvelopeSignature};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

/// The command that rewrites the committed vectors.
pub const REGENERATE: &str = "cargo run -p lev-approval --example gen_vectors";

/// Where the vectors live, relative to the lev-approval crate.
pub const DIR: &str = "tests/vectors";

/// One vector: a key set, an envelope, a call, a clock, and the verdict.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Vector {
    /// What the vector shows, for a person.
    pub description: String,
    /// The trusted public keys, raw 32 bytes in base64url without padding.
    pub trusted_keys: Vec<String>,
    /// The envelope, as JSON (not always a well-formed one).
    pub envelope: Value,
    /// The call the verifier is about to run.
    pub call: VectorCall,
    /// The turn the call runs in; a field left out is not checked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<VectorContext>,
    /// The verifier's clock, RFC 3339.
    pub now: String,
    /// People's keys (the JWKS of `GET /v1/people/keys`), for a vector
    /// that requires people's own signed votes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub people_keys: Option<Value>,
    /// How many distinct people's signed votes must verify and bind the
    /// call (`lev verify --require-votes N`); a shortfall is not_authorized
    /// with reason `votes`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub require_votes: Option<usize>,
    /// One person's vote envelope on its own, byte for byte, for a vector
    /// whose decision carries it: what the vote's signature covers and
    /// whether it verifies under `people_keys`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vote: Option<VoteVector>,
    /// The verdict.
    pub expect: Verdict,
}

/// A vote envelope (SPEC section 13) and the exact bytes it signs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VoteVector {
    /// The DSSE envelope of type `application/vnd.lev.vote+json; version=1`,
    /// as the person sent it (and as the decision carries it).
    pub envelope: Value,
    /// Its payload, decoded: the vote's exact bytes, as text.
    pub payload_json: String,
    /// The DSSE pre-authentication encoding of the payload under the
    /// envelope's payload type, in hex: the bytes an Ed25519 key signs,
    /// `DSSEv1 <len(type)> <type> <len(payload)> <payload>`.
    pub pae_hex: String,
    /// The SHA-256 of those bytes, in hex: a passkey's WebAuthn challenge.
    pub pae_sha256: String,
    /// The verdict on the envelope alone, under the vector's `people_keys`.
    pub expect: VoteVerdict,
}

/// What a verifier concludes about a vote envelope on its own.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "verdict", rename_all = "snake_case", deny_unknown_fields)]
pub enum VoteVerdict {
    /// A signature verifies under a key registered to the voter it names.
    Valid {
        /// The voter the payload names.
        voter: String,
        /// The key that verified it.
        kid: String,
    },
    /// It does not count.
    Invalid {
        /// [`lev_approval::VoteError::class`], or `malformed_key` for
        /// people's keys that cannot be read.
        error: String,
    },
}

/// The people's keys of a vector, when it has usable ones.
fn people_of(vector: &Vector) -> Option<lev_approval::PeopleKeys> {
    vector
        .people_keys
        .clone()
        .and_then(|v| serde_json::from_value::<lev_protocol::api::PeopleJwks>(v).ok())
        .and_then(|jwks| lev_approval::PeopleKeys::from_jwks(&jwks).ok())
}

/// The reference verifier on a vector's vote envelope alone, if it has one.
pub fn evaluate_vote(vector: &Vector) -> Option<VoteVerdict> {
    let vote = vector.vote.as_ref()?;
    let invalid = |error: &str| VoteVerdict::Invalid {
        error: error.to_owned(),
    };
    let Some(people) = people_of(vector) else {
        return Some(invalid("malformed_key"));
    };
    let Ok(envelope) = serde_json::from_value::<Envelope>(vote.envelope.clone()) else {
        return Some(invalid("malformed"));
    };
    Some(match lev_approval::verify_vote(&envelope, &people) {
        Ok(verified) => VoteVerdict::Valid {
            voter: verified.payload.voter,
            kid: verified.kid,
        },
        Err(e) => invalid(e.class()),
    })
}

/// Lowercase hex.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Whether a vote vector's bytes are what its envelope says: the payload
/// decoded, its PAE and the PAE's SHA-256.
///
/// # Errors
/// What differs.
pub fn check_vote_bytes(vote: &VoteVector) -> Result<(), String> {
    let envelope: Envelope =
        serde_json::from_value(vote.envelope.clone()).map_err(|e| format!("envelope: {e}"))?;
    let payload = decode_base64(&envelope.payload).map_err(|e| format!("payload: {e}"))?;
    if payload != vote.payload_json.as_bytes() {
        return Err("payload_json is not the envelope's payload".into());
    }
    let pae = lev_approval::pae(&envelope.payload_type, &payload);
    if hex(&pae) != vote.pae_hex {
        return Err(format!("pae_hex is not the PAE: {}", hex(&pae)));
    }
    if lev_approval::sha256_hex(&pae) != vote.pae_sha256 {
        return Err("pae_sha256 is not the PAE's SHA-256".into());
    }
    Ok(())
}

/// The exact call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VectorCall {
    /// The tool-call id.
    pub request_id: String,
    /// The tool name.
    pub tool: String,
    /// The proposed args, compared byte for byte.
    pub args_json: String,
}

/// The turn a call runs in.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VectorContext {
    /// The conversation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conversation: Option<String>,
    /// Whom the call acts for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub caller: Option<String>,
    /// The sandbox mode.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox_mode: Option<String>,
}

/// What a verifier must conclude.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "verdict", rename_all = "snake_case", deny_unknown_fields)]
pub enum Verdict {
    /// Genuine, valid now, and authorizes exactly this call: run these args.
    Authorized {
        /// What `resolve_approved_call` gives.
        effective_args_json: String,
    },
    /// Genuine and valid now, but not for this call (`lev verify` exits 3).
    NotAuthorized {
        /// `denied`, or the field that differs.
        reason: String,
    },
    /// Not genuine or not valid now (`lev verify` exits 1).
    Invalid {
        /// [`lev_approval::VerifyError::class`] or [`lev_approval::KeyError::class`].
        error: String,
    },
}

/// The reference verifier: what lev concludes about `vector`.
pub fn evaluate(vector: &Vector) -> Verdict {
    let invalid = |error: &str| Verdict::Invalid {
        error: error.to_owned(),
    };
    let mut keys = TrustedKeys::new();
    for text in &vector.trusted_keys {
        let Ok(raw) = decode_base64(text) else {
            return invalid("malformed_key");
        };
        if let Err(e) = keys.insert_bytes(&raw) {
            return invalid(e.class());
        }
    }
    let Ok(now) = OffsetDateTime::parse(&vector.now, &Rfc3339) else {
        return invalid("bad_vector_clock");
    };
    let Ok(bytes) = serde_json::to_vec(&vector.envelope) else {
        return invalid("bad_vector_envelope");
    };
    let verified = match verify_json(&bytes, &keys, now) {
        Ok(v) => v,
        Err(e) => return invalid(e.class()),
    };
    let context = vector.context.clone().unwrap_or_default();
    let call = Call {
        conversation_id: context.conversation.as_deref(),
        caller: context.caller.as_deref(),
        sandbox_mode: context.sandbox_mode.as_deref(),
        ..Call::new(
            &vector.call.request_id,
            &vector.call.tool,
            &vector.call.args_json,
        )
    };
    if let Err(e) = verified.check_call(&call) {
        return Verdict::NotAuthorized {
            reason: e.reason().to_owned(),
        };
    }
    if let Some(needed) = vector.require_votes {
        let Some(people) = people_of(vector) else {
            return invalid("malformed_key");
        };
        if verified.require_signed_votes(&people, needed).is_err() {
            return Verdict::NotAuthorized {
                reason: "votes".into(),
            };
        }
    }
    Verdict::Authorized {
        effective_args_json: verified.resolve_approved_call().to_owned(),
    }
}

// ---- generation ----

pub(crate) const ISSUED_AT: &str = "2026-01-01T12:00:00Z";
const EXPIRES_AT: &str = "2026-01-01T12:10:00Z";
const NOW: &str = "2026-01-01T12:05:00Z";
pub(crate) const ARGS: &str =
    r#"{"argv":["cargo","test","--workspace"],"cwd":"/home/alice/project"}"#;
pub(crate) const EDITED_ARGS: &str =
    r#"{"argv":["cargo","test","--workspace","--offline"],"cwd":"/home/alice/project"}"#;

/// The trusted signing key of most vectors.
pub fn key_a() -> SigningKeyPair {
    SigningKeyPair::from_seed(&[0x11; 32])
}

/// A second trusted key.
fn key_b() -> SigningKeyPair {
    SigningKeyPair::from_seed(&[0x22; 32])
}

/// A key nobody trusts.
pub(crate) fn key_untrusted() -> SigningKeyPair {
    SigningKeyPair::from_seed(&[0x33; 32])
}

/// The identity point: a small-order ("weak") public key.
pub const WEAK_KEY: [u8; 32] = {
    let mut k = [0u8; 32];
    k[0] = 1;
    k
};

/// The Ed25519 group order L, little-endian.
const GROUP_ORDER: [u8; 32] = [
    0xed, 0xd3, 0xf5, 0x5c, 0x1a, 0x63, 0x12, 0x58, 0xd6, 0x9c, 0xf7, 0xa2, 0xde, 0xf9, 0xde, 0x14,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x10,
];

pub(crate) fn at(text: &str) -> OffsetDateTime {
    OffsetDateTime::parse(text, &Rfc3339).expect("fixed RFC 3339 time")
}

pub(crate) fn shifted(text: &str, seconds: i64) -> String {
    (at(text) + time::Duration::seconds(seconds))
        .format(&Rfc3339)
        .expect("formattable time")
}

/// A grant of the call `call-1` / `shell` / [`ARGS`], for alice in `c-1`.
pub(crate) fn grant() -> ApprovalPayload {
    ApprovalPayload {
        v: 1,
        turn_id: "t-7".into(),
        request_id: "call-1".into(),
        tool_name: "shell".into(),
        args_json: ARGS.into(),
        modified_args_json: String::new(),
        approved: true,
        approved_for_session: false,
        covered_capabilities: vec!["proc-exec".into()],
        caller: "alice".into(),
        approver: "bob".into(),
        sandbox_mode: "workspace-write".into(),
        reason: String::new(),
        injected_context: String::new(),
        conversation_id: "c-1".into(),
        nonce: "AAECAwQFBgcICQoLDA0ODw".into(),
        issued_at: at(ISSUED_AT),
        expires_at: at(EXPIRES_AT),
        votes: None,
    }
}

fn denial() -> ApprovalPayload {
    ApprovalPayload {
        approved: false,
        covered_capabilities: vec![],
        reason: "not on a shared runner".into(),
        nonce: "EBESExQVFhcYGRobHB0eHw".into(),
        ..grant()
    }
}

fn the_call() -> VectorCall {
    VectorCall {
        request_id: "call-1".into(),
        tool: "shell".into(),
        args_json: ARGS.into(),
    }
}

fn full_context() -> Option<VectorContext> {
    Some(VectorContext {
        conversation: Some("c-1".into()),
        caller: Some("alice".into()),
        sandbox_mode: Some("workspace-write".into()),
    })
}

pub(crate) fn json(envelope: &Envelope) -> Value {
    serde_json::to_value(envelope).expect("an envelope is JSON")
}

pub(crate) fn signed(payload: &ApprovalPayload) -> Value {
    json(&sign_payload(payload, &key_a()).unwrap())
}

fn signed_bytes(payload: &[u8]) -> Value {
    json(&sign_envelope(APPROVAL_PAYLOAD_TYPE, payload, &key_a()))
}

/// The payload's compact JSON with `edit` applied to its text.
pub(crate) fn edited_text(
    payload: &ApprovalPayload,
    edit: impl FnOnce(String) -> String,
) -> Vec<u8> {
    let text = String::from_utf8(payload.to_bytes().unwrap()).expect("payload JSON is UTF-8");
    let out = edit(text.clone());
    assert_ne!(out, text, "the edit changed nothing");
    out.into_bytes()
}

pub(crate) fn authorized(args: &str) -> Verdict {
    Verdict::Authorized {
        effective_args_json: args.into(),
    }
}

pub(crate) fn not_authorized(reason: &str) -> Verdict {
    Verdict::NotAuthorized {
        reason: reason.into(),
    }
}

pub(crate) fn invalid(error: &str) -> Verdict {
    Verdict::Invalid {
        error: error.into(),
    }
}

/// A vector with the usual key, call, full context and clock.
pub(crate) fn vector(description: &str, envelope: Value, expect: Verdict) -> Vector {
    Vector {
        description: description.into(),
        trusted_keys: vec![key_a().public_base64url()],
        envelope,
        call: the_call(),
        context: full_context(),
        now: NOW.into(),
        people_keys: None,
        require_votes: None,
        vote: None,
        expect,
    }
}

/// Add the group order L to the scalar half of a signature.
fn malleate(sig: &[u8; 64]) -> [u8; 64] {
    let mut out = *sig;
    let mut carry = 0u16;
    for i in 0..32 {
        let sum = u16::from(sig[32 + i]) + u16::from(GROUP_ORDER[i]) + carry;
        out[32 + i] = (sum & 0xff) as u8;
        carry = sum >> 8;
    }
    assert_eq!(carry, 0, "s + L fits in 32 bytes since s < L < 2^253");
    out
}

fn signature_bytes(envelope: &Envelope) -> [u8; 64] {
    decode_base64(&envelope.signatures[0].sig)
        .expect("lev writes base64")
        .try_into()
        .expect("a 64-byte signature")
}

/// Every vector, by file stem.
#[allow(clippy::vec_init_then_push)] // one push per vector reads best with the blocks between them
pub fn generate() -> Vec<(&'static str, Vector)> {
    let a = key_a();
    let mut v: Vec<(&'static str, Vector)> = Vec::new();

    // ---- authorized ----
    v.push((
        "valid_grant",
        vector(
            "a one-shot grant of exactly this call, in its conversation, for its caller and sandbox mode",
            signed(&grant()),
            authorized(ARGS),
        ),
    ));
    v.push((
        "valid_grant_without_context",
        Vector {
            context: None,
            ..vector(
                "a verifier that names no context checks only the call",
                signed(&grant()),
                authorized(ARGS),
            )
        },
    ));
    v.push((
        "valid_session_grant",
        vector(
            "a session grant covering two capabilities authorizes the call that asked",
            signed(&ApprovalPayload {
                approved_for_session: true,
                covered_capabilities: vec!["net".into(), "proc-exec".into()],
                ..grant()
            }),
            authorized(ARGS),
        ),
    ));
    v.push((
        "empty_edit_means_proposed_args",
        vector(
            "an empty modified_args_json means the proposed args run unchanged",
            signed(&ApprovalPayload {
                modified_args_json: String::new(),
                injected_context: "the user prefers offline builds".into(),
                ..grant()
            }),
            authorized(ARGS),
        ),
    ));
    v.push((
        "edit_resolves_to_edit",
        vector(
            "the approver edited the args: the call is still matched on the proposed args, and the edit is what runs",
            signed(&ApprovalPayload {
                modified_args_json: EDITED_ARGS.into(),
                ..grant()
            }),
            authorized(EDITED_ARGS),
        ),
    ));
    v.push((
        "edit_presented_as_the_call",
        Vector {
            call: VectorCall {
                args_json: EDITED_ARGS.into(),
                ..the_call()
            },
            ..vector(
                "the approval is bound to the proposed args, not to the edit: presenting the edited args as the call is another call",
                signed(&ApprovalPayload {
                    modified_args_json: EDITED_ARGS.into(),
                    ..grant()
                }),
                not_authorized("args_json"),
            )
        },
    ));
    {
        // Args whose base64 holds '+' and '/', so the URL-safe text differs.
        let payload = ApprovalPayload {
            args_json: r#"{"argv":["echo","~~~???>>>"],"cwd":"/"}"#.into(),
            ..grant()
        };
        let bytes = payload.to_bytes().unwrap();
        let envelope = sign_payload(&payload, &a).unwrap();
        let sig = signature_bytes(&envelope);
        let url_payload = encode_base64url(&bytes);
        let url_sig = encode_base64url(&sig);
        assert!(
            !bytes.len().is_multiple_of(3)
                && url_payload.contains(['-', '_'])
                && url_sig.contains(['-', '_']),
            "pick args whose base64url differs from standard base64 and needs padding"
        );
        v.push((
            "base64url_unpadded",
            Vector {
                call: VectorCall {
                    args_json: payload.args_json.clone(),
                    ..the_call()
                },
                ..vector(
                    "payload and signature in URL-safe base64 without padding are accepted",
                    json(&Envelope {
                        payload: url_payload,
                        signatures: vec![EnvelopeSignature::new(a.kid(), url_sig)],
                        ..envelope
                    }),
                    authorized(&payload.args_json),
                )
            },
        ));
    }
    {
        let b = key_b();
        let mut envelope = sign_payload(&grant(), &b).unwrap();
        envelope.signatures[0].keyid = a.kid().into();
        v.push((
            "key_id_is_only_a_hint",
            Vector {
                trusted_keys: vec![a.public_base64url(), b.public_base64url()],
                ..vector(
                    "signed by trusted key B under key A's id: the id is a hint, any trusted key is accepted",
                    json(&envelope),
                    authorized(ARGS),
                )
            },
        ));
    }
    {
        let mut envelope = sign_payload(&grant(), &key_untrusted()).unwrap();
        let trusted = sign_payload(&grant(), &a).unwrap();
        envelope.signatures.extend(trusted.signatures);
        v.push((
            "one_of_two_signatures_trusted",
            vector(
                "an untrusted signature beside a trusted one: the trusted one suffices",
                json(&envelope),
                authorized(ARGS),
            ),
        ));
    }
    v.push((
        "expired_within_skew",
        Vector {
            now: shifted(EXPIRES_AT, 60),
            ..vector(
                "60 s past expires_at is still inside the allowed skew",
                signed(&grant()),
                authorized(ARGS),
            )
        },
    ));
    v.push((
        "issued_in_future_within_skew",
        Vector {
            now: shifted(ISSUED_AT, -60),
            ..vector(
                "60 s before issued_at is still inside the allowed skew",
                signed(&grant()),
                authorized(ARGS),
            )
        },
    ));

    // ---- genuine, but not for this call ----
    v.push((
        "valid_denial",
        vector(
            "a genuine denial of exactly this call authorizes nothing",
            signed(&denial()),
            not_authorized("denied"),
        ),
    ));
    v.push((
        "args_one_byte_changed",
        Vector {
            call: VectorCall {
                args_json: ARGS.replace("--workspace", "--workspacf"),
                ..the_call()
            },
            ..vector(
                "the call's args differ from the signed args in one byte",
                signed(&grant()),
                not_authorized("args_json"),
            )
        },
    ));
    v.push((
        "args_reformatted",
        Vector {
            call: VectorCall {
                args_json: ARGS.replace(',', ", "),
                ..the_call()
            },
            ..vector(
                "the same JSON value written with other whitespace is other bytes: not authorized",
                signed(&grant()),
                not_authorized("args_json"),
            )
        },
    ));
    v.push((
        "args_trailing_newline",
        Vector {
            call: VectorCall {
                args_json: format!("{ARGS}\n"),
                ..the_call()
            },
            ..vector(
                "a trailing newline is a byte too",
                signed(&grant()),
                not_authorized("args_json"),
            )
        },
    ));
    v.push((
        "other_request_id",
        Vector {
            call: VectorCall {
                request_id: "call-2".into(),
                ..the_call()
            },
            ..vector(
                "the same tool and args under another tool-call id",
                signed(&grant()),
                not_authorized("request_id"),
            )
        },
    ));
    v.push((
        "other_tool",
        Vector {
            call: VectorCall {
                tool: "shell_unsandboxed".into(),
                ..the_call()
            },
            ..vector(
                "the same id and args for another tool",
                signed(&grant()),
                not_authorized("tool_name"),
            )
        },
    ));
    let with_context = |conversation: &str, caller: &str, sandbox_mode: &str| {
        Some(VectorContext {
            conversation: Some(conversation.into()),
            caller: Some(caller.into()),
            sandbox_mode: Some(sandbox_mode.into()),
        })
    };
    v.push((
        "other_conversation",
        Vector {
            context: with_context("c-2", "alice", "workspace-write"),
            ..vector(
                "replayed into another conversation",
                signed(&grant()),
                not_authorized("conversation_id"),
            )
        },
    ));
    v.push((
        "other_caller",
        Vector {
            context: with_context("c-1", "mallory", "workspace-write"),
            ..vector(
                "presented for another caller",
                signed(&grant()),
                not_authorized("caller"),
            )
        },
    ));
    v.push((
        "other_sandbox_mode",
        Vector {
            context: with_context("c-1", "alice", "danger-full-access"),
            ..vector(
                "presented under another sandbox mode",
                signed(&grant()),
                not_authorized("sandbox_mode"),
            )
        },
    ));

    // ---- not genuine, or not valid now ----
    v.push((
        "payload_type_swapped",
        vector(
            "a correct signature over the same payload under another payload type",
            json(&sign_envelope(
                "application/vnd.in-toto+json",
                &grant().to_bytes().unwrap(),
                &a,
            )),
            invalid("payload_type"),
        ),
    ));
    {
        let mut envelope = sign_payload(&grant(), &a).unwrap();
        envelope.payload_type = "application/vnd.lev.approval+json;version=1".into();
        v.push((
            "payload_type_edited",
            vector(
                "the payload type rewritten after signing (one space removed): the exact type is required",
                json(&envelope),
                invalid("payload_type"),
            ),
        ));
    }
    v.push((
        "unknown_payload_field",
        vector(
            "a signed payload with a field lev does not know",
            signed_bytes(&edited_text(&grant(), |t| {
                t.replacen('{', r#"{"run_as":"root","#, 1)
            })),
            invalid("payload"),
        ),
    ));
    v.push((
        "duplicated_payload_key",
        vector(
            "a signed denial with `approved` written twice, the last true: a last-wins parser would see a grant",
            signed_bytes(&edited_text(&denial(), |t| {
                let body = t.strip_suffix('}').expect("a JSON object").to_owned();
                format!(r#"{body},"approved":true}}"#)
            })),
            invalid("payload"),
        ),
    ));
    v.push((
        "missing_payload_field",
        vector(
            "a signed payload without injected_context: every field must be present",
            signed_bytes(&edited_text(&grant(), |t| {
                t.replace(r#""injected_context":"","#, "")
            })),
            invalid("payload"),
        ),
    ));
    v.push((
        "wrong_type_payload_field",
        vector(
            "a signed payload with approved as a string",
            signed_bytes(&edited_text(&grant(), |t| {
                t.replace(r#""approved":true"#, r#""approved":"true""#)
            })),
            invalid("payload"),
        ),
    ));
    v.push((
        "unknown_version",
        vector(
            "a signed payload of version 2",
            signed(&ApprovalPayload { v: 2, ..grant() }),
            invalid("version"),
        ),
    ));
    v.push((
        "untrusted_key",
        vector(
            "correctly signed by a key that is not trusted",
            json(&sign_payload(&grant(), &key_untrusted()).unwrap()),
            invalid("untrusted_key"),
        ),
    ));
    {
        let mut envelope = sign_payload(&grant(), &key_untrusted()).unwrap();
        envelope.signatures[0].keyid = a.kid().into();
        v.push((
            "untrusted_key_claims_trusted_id",
            vector(
                "signed by an untrusted key under the trusted key's id",
                json(&envelope),
                invalid("bad_signature"),
            ),
        ));
    }
    {
        // R = identity, s = 0: [s]B = R + [k]A holds for A = identity and any
        // message, so non-strict verification accepts this "signature".
        let mut forged = [0u8; 64];
        forged[0] = 1;
        let envelope = Envelope {
            payload_type: APPROVAL_PAYLOAD_TYPE.into(),
            payload: lev_approval::encode_base64(&grant().to_bytes().unwrap()),
            signatures: vec![EnvelopeSignature::new(
                key_id(&WEAK_KEY),
                lev_approval::encode_base64(&forged),
            )],
        };
        v.push((
            "weak_key",
            Vector {
                trusted_keys: vec![encode_base64url(&WEAK_KEY)],
                ..vector(
                    "a forgery under the small-order identity key, which non-strict verification accepts: the key set must refuse the key",
                    json(&envelope),
                    invalid("weak_key"),
                )
            },
        ));
    }
    {
        let mut envelope = sign_payload(&grant(), &a).unwrap();
        let sig = malleate(&signature_bytes(&envelope));
        envelope.signatures[0].sig = lev_approval::encode_base64(&sig);
        v.push((
            "malleated_signature",
            vector(
                "the signature's s replaced by s + L: same value mod L, refused as non-canonical",
                json(&envelope),
                invalid("bad_signature"),
            ),
        ));
    }
    {
        let mut envelope = sign_payload(&grant(), &a).unwrap();
        let bytes = decode_base64(&envelope.payload).expect("lev writes base64");
        let text = String::from_utf8(bytes).expect("payload JSON is UTF-8");
        envelope.payload =
            lev_approval::encode_base64(text.replace("--workspace", "--workspacf").as_bytes());
        v.push((
            "payload_one_byte_changed",
            vector(
                "one byte of the signed args changed after signing (still valid JSON)",
                json(&envelope),
                invalid("bad_signature"),
            ),
        ));
    }
    v.push((
        "expired",
        Vector {
            now: shifted(EXPIRES_AT, 61),
            ..vector(
                "61 s past expires_at: beyond the 60 s skew",
                signed(&grant()),
                invalid("expired"),
            )
        },
    ));
    v.push((
        "issued_in_future",
        Vector {
            now: shifted(ISSUED_AT, -61),
            ..vector(
                "61 s before issued_at: beyond the 60 s skew",
                signed(&grant()),
                invalid("not_yet_valid"),
            )
        },
    ));
    v.push((
        "expires_at_end_of_time",
        vector(
            "a genuine grant expiring at 9999-12-31T23:59:59Z, the last second RFC 3339 can write: valid now (adding the skew must not overflow)",
            signed(&ApprovalPayload {
                expires_at: at("9999-12-31T23:59:59Z"),
                ..grant()
            }),
            authorized(ARGS),
        ),
    ));
    v.push((
        "expires_at_end_of_time_checked_then",
        Vector {
            now: "9999-12-31T23:59:59Z".into(),
            ..vector(
                "the same grant checked at its last second",
                signed(&ApprovalPayload {
                    expires_at: at("9999-12-31T23:59:59Z"),
                    ..grant()
                }),
                authorized(ARGS),
            )
        },
    ));
    v.push((
        "issued_at_start_of_time",
        vector(
            "a genuine grant issued at 0000-01-01T00:00:00Z, the first second RFC 3339 can write (subtracting the skew must not overflow)",
            signed(&ApprovalPayload {
                issued_at: at("0000-01-01T00:00:00Z"),
                ..grant()
            }),
            authorized(ARGS),
        ),
    ));
    v.push((
        "expires_before_issued",
        Vector {
            now: shifted(ISSUED_AT, -30),
            ..vector(
                "a signed payload whose expires_at is before its issued_at, checked inside both skews",
                signed(&ApprovalPayload {
                    expires_at: at("2026-01-01T11:59:30Z"),
                    ..grant()
                }),
                invalid("payload"),
            )
        },
    ));
    v.push((
        "timestamp_with_space",
        vector(
            "a signed payload whose issued_at has a space instead of the T: strict RFC 3339 only",
            signed_bytes(&edited_text(&grant(), |t| {
                t.replace(ISSUED_AT, "2026-01-01 12:00:00Z")
            })),
            invalid("payload"),
        ),
    ));
    v.push((
        "timestamp_lower_case",
        vector(
            "a signed payload whose expires_at is written with a lower-case t and z",
            signed_bytes(&edited_text(&grant(), |t| {
                t.replace(EXPIRES_AT, "2026-01-01t12:10:00z")
            })),
            invalid("payload"),
        ),
    ));
    v.push((
        "covered_capabilities_unsorted",
        vector(
            "a signed payload whose covered_capabilities are not sorted",
            signed(&ApprovalPayload {
                covered_capabilities: vec!["proc-exec".into(), "net".into()],
                ..grant()
            }),
            invalid("payload"),
        ),
    ));
    {
        let mut envelope = sign_payload(&grant(), &a).unwrap();
        envelope.signatures[0].sig = "not base64!".into();
        v.push((
            "signature_not_base64",
            vector(
                "the only signature, under the trusted key's id, is not base64: malformed, not an untrusted key",
                json(&envelope),
                invalid("malformed"),
            ),
        ));
    }
    {
        let mut envelope = sign_payload(&grant(), &a).unwrap();
        let sig = signature_bytes(&envelope);
        envelope.signatures[0].sig = lev_approval::encode_base64(&sig[..63]);
        v.push((
            "signature_wrong_length",
            vector(
                "the only signature, under the trusted key's id, is 63 bytes: malformed, not an untrusted key",
                json(&envelope),
                invalid("malformed"),
            ),
        ));
    }
    {
        let mut envelope = sign_payload(&grant(), &key_untrusted()).unwrap();
        let trusted = sign_payload(&grant(), &a).unwrap();
        let junk = envelope.signatures[0].clone();
        envelope.signatures = vec![junk; lev_approval::MAX_SIGNATURES];
        envelope.signatures.extend(trusted.signatures);
        v.push((
            "too_many_signatures",
            vector(
                "17 signatures, the last by the trusted key: more than a verifier examines, refused",
                json(&envelope),
                invalid("malformed"),
            ),
        ));
    }
    {
        let mut envelope = sign_payload(&grant(), &a).unwrap();
        envelope.signatures.clear();
        v.push((
            "no_signatures",
            vector(
                "an envelope with no signature",
                json(&envelope),
                invalid("malformed"),
            ),
        ));
    }
    {
        let mut envelope = sign_payload(&grant(), &a).unwrap();
        envelope.payload = "not base64!".into();
        v.push((
            "payload_not_base64",
            vector(
                "a payload that is not base64",
                json(&envelope),
                invalid("malformed"),
            ),
        ));
    }
    v.push((
        "not_an_envelope",
        vector(
            "JSON that is not a DSSE envelope",
            serde_json::json!({ "decision": "allow" }),
            invalid("malformed"),
        ),
    ));
    super::vector_votes::generate(&mut v);
    v
}

/// The text of a vector file.
pub fn to_file_text(vector: &Vector) -> String {
    serde_json::to_string_pretty(vector).expect("a vector is JSON") + "\n"
}
