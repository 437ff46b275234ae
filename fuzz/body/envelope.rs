//! The body of the `envelope` fuzz target, shared with lev-approval's smoke
//! test (`crates/lev-approval/tests/all/fuzz_smoke.rs`), which runs it on
//! stable Rust.
//!
//! Untrusted bytes reach these decoders: the envelope (`verify_json`), a key
//! set (`TrustedKeys::parse`), and, by signing the bytes with a trusted key so
//! that the signature check passes, the strict payload parse and time checks
//! behind it; and people's signed votes (SPEC section 13): a vote envelope
//! (`verify_vote`, a passkey's assertion included) against fixed people's
//! keys, a people key set (`PeopleKeys::parse`), a passkey's public key as
//! the dashboard registers it (`votes::passkey_jwk`), the bytes signed as a
//! person's vote payload, and the votes a verified decision carries. The bytes also pick an `issued_at`, an `expires_at` and a
//! verifier's clock anywhere in the representable range (extreme years and
//! offsets included), for a signed grant and for the envelopes above. None
//! may panic, and what verifies must keep the binding's invariants and be
//! inside its validity window.

use lev_approval::{
    ApprovalPayload, CLOCK_SKEW, Call, PeopleKeys, SigningKeyPair, TrustedKeys, VerifyError,
    VotePayload, sign_envelope, sign_payload, verify, verify_json, verify_vote,
};
use lev_protocol::api::PeopleJwks;
use lev_protocol::{APPROVAL_PAYLOAD_TYPE, Envelope, VOTE_PAYLOAD_TYPE};
use time::{OffsetDateTime, UtcOffset};

/// What one run reached, so a smoke test can tell that its inputs go deep.
#[derive(Debug, Clone, Copy, Default)]
pub struct Reached {
    /// The bytes were a genuine, valid envelope.
    pub verified_envelope: bool,
    /// The bytes were a key set.
    pub parsed_keys: bool,
    /// The bytes, signed, were a valid approval payload.
    pub verified_payload: bool,
    /// The grant signed with the times the bytes picked verified.
    pub verified_times: bool,
    /// The bytes were a vote envelope that verified under a person's key.
    pub verified_vote: bool,
    /// The bytes, signed by a person, were a valid vote payload.
    pub verified_vote_payload: bool,
}

/// The person whose CLI key signs the fuzzed vote payloads (the vote
/// vectors' ann).
pub fn person_key() -> SigningKeyPair {
    SigningKeyPair::from_seed(&[0x44; 32])
}

/// The people's keys the fuzz target knows: ann's CLI key, and carol's
/// EdDSA passkey for lev.example.com (as in the vote vectors).
pub fn people() -> PeopleKeys {
    let mut ann = lev_approval::votes::ed25519_jwk(person_key().verifying_key().as_bytes());
    ann.kid = "person:ann:1".into();
    let mut carol = lev_approval::votes::ed25519_jwk(
        SigningKeyPair::from_seed(&[0x66; 32])
            .verifying_key()
            .as_bytes(),
    );
    carol.kid = "person:carol:1".into();
    carol.rp_id = Some("lev.example.com".into());
    carol.credential_id = Some("Y2Fyb2wtY3JlZGVudGlhbA".into());
    PeopleKeys::from_jwks(&PeopleJwks {
        keys: vec![ann, carol],
    })
    .unwrap_or_else(|e| panic!("the fuzz people keys: {e}"))
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

    let people = people();
    if let Ok(v) = verify_json(data, &keys, now()) {
        reached.verified_envelope = true;
        check_invariants(&v);
        check_votes(&v, &people);
    }
    if let Ok(vote) = serde_json::from_slice::<Envelope>(data)
        && let Ok(verified) = verify_vote(&vote, &people)
    {
        reached.verified_vote = true;
        let owner = lev_approval::votes::parse_person_kid(&verified.kid).map(|(p, _)| p);
        assert_eq!(
            owner,
            Some(verified.payload.voter.as_str()),
            "a vote verified under a key of someone else than its voter"
        );
    }
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = PeopleKeys::parse(text);
    }
    // The bytes as a passkey's public key (SPKI DER) the dashboard
    // registers: a key that parses is one a people key set takes.
    for alg in [-7, -8] {
        if let Ok(mut jwk) = lev_approval::votes::passkey_jwk(data, alg) {
            jwk.kid = "person:ann:1".into();
            jwk.rp_id = Some("lev.example.com".into());
            jwk.credential_id = Some("Y3JlZA".into());
            let set = serde_json::json!({"keys": [jwk]}).to_string();
            assert!(
                PeopleKeys::parse(&set).is_ok(),
                "a registered passkey no set takes: {set}"
            );
        }
    }
    let vote = sign_envelope(VOTE_PAYLOAD_TYPE, data, &person_key());
    let mut vote = vote;
    vote.signatures[0].keyid = "person:ann:1".into();
    match verify_vote(&vote, &people) {
        Ok(v) => {
            reached.verified_vote_payload = true;
            assert!(
                serde_json::from_slice::<VotePayload>(data).is_ok(),
                "verify_vote accepted a payload the strict parse refuses"
            );
            assert_eq!(
                v.payload.voter, "ann",
                "ann's key verified another voter's vote"
            );
        }
        Err(e) => assert!(
            e.class() != "not_signed"
                || serde_json::from_slice::<VotePayload>(data).is_ok_and(|p| p.voter != "ann"),
            "ann's signature refused on her own vote: {e}"
        ),
    }

    if let Ok(text) = std::str::from_utf8(data)
        && let Ok(set) = TrustedKeys::parse(text)
    {
        reached.parsed_keys = true;
        assert!(!set.is_empty(), "a parsed key set holds a key");
    }

    let clock = any_time(data, 16);
    if let Ok(v) = verify_json(data, &keys, clock) {
        check_invariants(&v);
        check_window(&v, clock);
    }
    let issued_at = any_time(data, 0);
    let expires_at = any_time(data, 8);
    let grant = ApprovalPayload {
        v: 1,
        turn_id: "t-1".into(),
        request_id: "call-1".into(),
        tool_name: "shell".into(),
        args_json: "{}".into(),
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
        issued_at,
        expires_at,
        votes: None,
    };
    let Ok(envelope) = sign_payload(&grant, &key) else {
        return reached;
    };
    match verify(&envelope, &keys, clock) {
        Ok(v) => {
            reached.verified_times = true;
            check_invariants(&v);
            check_window(&v, clock);
        }
        Err(VerifyError::NotYetValid { .. }) => {
            assert!(
                nanos(clock) < nanos(issued_at) - skew_nanos(),
                "not yet valid, but it is"
            );
        }
        Err(VerifyError::Expired { .. }) => {
            assert!(
                nanos(clock) > nanos(expires_at) + skew_nanos(),
                "expired, but it is not"
            );
        }
        Err(VerifyError::Payload(_)) => {
            assert!(expires_at < issued_at, "a well-formed grant refused");
        }
        Err(e) => panic!("a grant signed by a trusted key refused: {e}"),
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

/// The first second RFC 3339 can write, 0000-01-01T00:00:00Z.
const FIRST: i64 = -62_167_219_200;
/// The last, 9999-12-31T23:59:59Z.
const LAST: i64 = 253_402_300_799;

/// A time picked by the 8 bytes of `data` at `at` (zeros past the end):
/// often one of the extremes, else anywhere from year 0 to 9999, in a
/// whole-minute offset that keeps it writable, with nanoseconds.
fn any_time(data: &[u8], at: usize) -> OffsetDateTime {
    let mut b = [0u8; 8];
    for (i, byte) in b.iter_mut().enumerate() {
        *byte = data.get(at + i).copied().unwrap_or(0);
    }
    let n = u64::from_le_bytes(b);
    let span = u64::try_from(LAST - FIRST).unwrap_or(u64::MAX);
    let seconds = match n % 8 {
        0 => FIRST,
        1 => LAST,
        2 => 1_767_269_100 + i64::from(i8::from_le_bytes([b[1]])),
        _ => FIRST.saturating_add(i64::try_from((n >> 3) % span).unwrap_or(0)),
    };
    let utc = OffsetDateTime::from_unix_timestamp(seconds).unwrap_or(OffsetDateTime::UNIX_EPOCH);
    let utc = utc
        .replace_nanosecond(u32::from(b[2]) * 3_900_000)
        .unwrap_or(utc);
    let minutes = i32::from(i16::from_le_bytes([b[3], b[4]])) % (24 * 60);
    UtcOffset::from_whole_seconds(minutes * 60)
        .ok()
        .and_then(|offset| utc.checked_to_offset(offset))
        .filter(|t| (0..=9999).contains(&t.year()))
        .unwrap_or(utc)
}

fn nanos(t: OffsetDateTime) -> i128 {
    t.unix_timestamp_nanos()
}

fn skew_nanos() -> i128 {
    CLOCK_SKEW.whole_nanoseconds()
}

/// What verified is inside its window at `now`, skew allowed, and well ordered.
fn check_window(v: &lev_approval::VerifiedResponse, now: OffsetDateTime) {
    assert!(
        v.payload.issued_at <= v.payload.expires_at,
        "verified with expires_at before issued_at"
    );
    assert!(
        nanos(v.payload.issued_at) - skew_nanos() <= nanos(now),
        "verified before issued_at - skew"
    );
    assert!(
        nanos(now) <= nanos(v.payload.expires_at) + skew_nanos(),
        "verified after expires_at + skew"
    );
}

/// The votes of a verified decision: checking them never panics, and
/// those that count are among the votes it lists, each voter once.
fn check_votes(v: &lev_approval::VerifiedResponse, people: &PeopleKeys) {
    let listed: Vec<&str> = v
        .payload
        .votes
        .iter()
        .flatten()
        .map(|vote| vote.voter.as_str())
        .collect();
    let signed = v.signed_voters(people);
    assert!(
        signed.iter().all(|s| listed.contains(&s.as_str())),
        "a signed voter the decision does not list"
    );
    let needed = signed.len() + 1;
    assert!(v.require_signed_votes(people, needed).is_err());
    if v.payload.approved && !signed.is_empty() {
        assert!(v.require_signed_votes(people, signed.len()).is_ok());
    }
}

fn check_invariants(v: &lev_approval::VerifiedResponse) {
    let call = Call::new(
        &v.payload.request_id,
        &v.payload.tool_name,
        &v.payload.args_json,
    );
    assert_eq!(v.check_call(&call).is_ok(), v.payload.approved);
    assert_eq!(
        v.authorizes_call(
            &v.payload.request_id,
            &v.payload.tool_name,
            &v.payload.args_json
        ),
        v.payload.approved
    );
    let effective = v.resolve_approved_call();
    if v.payload.modified_args_json.is_empty() {
        assert_eq!(effective, v.payload.args_json);
    } else {
        assert_eq!(effective, v.payload.modified_args_json);
    }
}
