//! lev's wire types.
//!
//! Every type here is a promise of backward compatibility: a `derive(Deserialize)`
//! must keep accepting what older clients wrote. Committed fixtures under
//! `tests/fixtures/` hold one message of each kind and variant, old ones included.
//!
//! This crate knows nothing of storage, HTTP, signatures or policy. It holds the
//! shapes that cross the wire, the identifier rules, and the validation of an
//! answer against the question it answers (a pure function of the two).

pub mod api;
pub mod claude_code;
pub mod envelope;
pub mod form;
pub mod ids;
pub mod interaction;
pub mod json;
pub mod operator;
pub mod response;
pub mod stats;
pub mod text;
pub mod validate;
pub mod validate_gate;

pub use envelope::{Envelope, EnvelopeSignature};
pub use interaction::{
    GateNote, Interaction, InteractionKind, InteractionRequest, InteractionStatus, OnTimeout,
    Point, Quorum, Vote, VoteBinding,
};
pub use operator::{ClientMsg, ServerMsg, WorkerResult};
pub use response::{ApprovalScope, InboundPart, InteractionResponse, StoredPart, StoredResponse};
pub use validate::{Limits, ValidationError, ValidationErrorKind};

/// The approval envelope's DSSE payload type for a decision by one person
/// without a signed vote (payload version 1).
pub const APPROVAL_PAYLOAD_TYPE: &str = "application/vnd.lev.approval+json; version=1";

/// The approval envelope's DSSE payload type for a decision that carries its
/// votes (payload version 2): more than one vote, or signed votes.
pub const APPROVAL_PAYLOAD_TYPE_V2: &str = "application/vnd.lev.approval+json; version=2";

/// A person's own signed vote (SPEC section 13).
pub const VOTE_PAYLOAD_TYPE: &str = "application/vnd.lev.vote+json; version=1";
