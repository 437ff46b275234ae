//! Signed approvals: the proof that what runs is exactly what was approved.
//!
//! A decision on a tool call is an [`ApprovalPayload`] signed with Ed25519 inside
//! a DSSE [`Envelope`](lev_protocol::Envelope). A verifier checks it with
//! [`verify`] against a set of [`TrustedKeys`] and a [`Clock`], gets a
//! [`VerifiedResponse`], asks it whether it [`authorizes_call`](VerifiedResponse::authorizes_call)
//! the exact call at hand, checks the context, and spends the nonce once in a
//! [`NonceLedger`].
//!
//! # Invariants
//! - No IO: no files, no network, no system clock except through [`SystemClock`].
//! - Only `verify_strict`: plain and batch Ed25519 verification accept forgeries
//!   under small-order keys; weak keys are never trusted.
//! - The payload parse is strict: an unknown field, a duplicated key, a wrong type
//!   or a missing field is refused; timestamps are strict RFC 3339
//!   ([`parse_timestamp`]), `covered_capabilities` sorted, and `expires_at`
//!   not before `issued_at`.
//! - No panic on any input: time and size arithmetic is checked, and the work
//!   per envelope is bounded ([`MAX_SIGNATURES`]).

pub mod audit;
mod b64;
pub mod clock;
pub mod dsse;
pub mod glob;
pub mod grant;
pub mod keys;
pub mod ledger;
mod pae;
pub mod payload;
pub mod policy;
pub mod verify;
pub mod votes;

pub use b64::{decode_base64, encode_base64, encode_base64url};
pub use clock::{Clock, FixedClock, SystemClock};
pub use dsse::{pae, sign_envelope, sign_payload};
pub use glob::{GlobError, ToolGlob};
pub use grant::{ArgsMatcher, GrantMatch, GrantRule, PatternError, shortfall};
pub use keys::{KeyError, SigningKeyPair, TrustedKeys, key_id};
pub use ledger::{InMemoryNonceLedger, NonceLedger, NonceSpent, nonce_key};
pub use payload::{
    ApprovalPayload, PAYLOAD_VERSION, PAYLOAD_VERSION_VOTES, TimestampError, approving_payload,
    new_nonce, parse_timestamp,
};
pub use verify::{
    Call, ContextMismatch, MAX_SIGNATURES, NotAuthorized, VerifiedResponse, VerifyError,
    resolve_approved_call, verify, verify_json,
};
pub use votes::{
    NotEnoughVotes, PayloadVote, PeopleKeys, PersonKey, VerifiedVote, VoteCheck, VoteEnvelope,
    VoteError, VotePayload, check_vote_binding, sha256_hex, sign_vote, verify_vote,
};

/// Allowed clock skew when checking `issued_at` and `expires_at`.
pub const CLOCK_SKEW: time::Duration = time::Duration::seconds(60);
