//! The body of the `envelope` fuzz target, shared with lev-approval's smoke
//! test (`crates/lev-approval/tests/all/fuzz_smoke.rs`), which runs it on
//! stable Rust.
//!
//! Untrusted bytes reach three decoders: the envelope (`verify_json`), a key
//! set (`TrustedKeys::parse`), and, by signing the bytes with a trusted key so
//! that the signature check passes, the strict payload parse and time checks
//! behind it. None may panic, and what verifies must keep the binding's
//! invariants.

use lev_approval::{
    ApprovalPayload, Call, SigningKeyPair, TrustedKeys, VerifyError, sign_envelope, verify,
    verify_json,
};
use lev_protocol::APPROVAL_PAYLOAD_TYPE;
use time::OffsetDateTime;

/// What one run reached, so a smoke test can tell that its inputs go deep.
#[derive(Debug, Clone, Copy, Default)]
pub struct Reached {
    /// The bytes were a genuine, valid envelope.
    pub verified_envelope: bool,
    /// The bytes were a key set.
    pub parsed_keys: bool,
    /// The bytes, signed, were a valid approval payload.
    pub verified_payload: bool,
}

/// The key the fuzz target trusts: the test vectors' key A, so mutated vectors
/// reach past the signature check.
pub fn trusted_key() -> SigningKeyPair {
    SigningKeyPair::from_seed(&[0x11; 32])
}

/// The clock: the test vectors' "now".
fn now() -> OffsetDateTime {
    // 2026-01-01T12:05:00Z
    OffsetDateTime::from_unix_timestamp(1_767_269_100).unwrap_or(OffsetDateTime::UNIX_EPOCH)
}

/// Run every decoder on `data`. Panics only when an invariant breaks.
pub fn run(data: &[u8]) -> Reached {
    let key = trusted_key();
    let mut keys = TrustedKeys::new();
    if keys.insert(key.verifying_key()).is_err() {
        panic!("the fuzz key is weak");
    }
    let mut reached = Reached::default();

    if let Ok(v) = verify_json(data, &keys, now()) {
        reached.verified_envelope = true;
        check_invariants(&v);
    }

    if let Ok(text) = std::str::from_utf8(data)
        && let Ok(set) = TrustedKeys::parse(text)
    {
        reached.parsed_keys = true;
        assert!(!set.is_empty(), "a parsed key set holds a key");
    }

    let envelope = sign_envelope(APPROVAL_PAYLOAD_TYPE, data, &key);
    match verify(&envelope, &keys, now()) {
        Ok(v) => {
            reached.verified_payload = true;
            assert!(
                ApprovalPayload::from_bytes(data).is_ok(),
                "verify accepted a payload the strict parse refuses"
            );
            check_invariants(&v);
        }
        Err(VerifyError::BadSignature(_) | VerifyError::UntrustedKey(_)) => {
            panic!("a payload signed by a trusted key failed the signature check")
        }
        Err(_) => {}
    }
    reached
}

fn check_invariants(v: &lev_approval::VerifiedResponse) {
    let call = Call::new(&v.request_id, &v.tool_name, &v.args_json);
    assert_eq!(v.check_call(&call).is_ok(), v.approved);
    assert_eq!(
        v.authorizes_call(&v.request_id, &v.tool_name, &v.args_json),
        v.approved
    );
    let effective = v.resolve_approved_call();
    if v.modified_args_json.is_empty() {
        assert_eq!(effective, v.args_json);
    } else {
        assert_eq!(effective, v.modified_args_json);
    }
}
