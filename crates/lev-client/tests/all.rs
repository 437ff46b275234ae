//! The one integration test binary of `lev-client`.
//!
//! - `deadlines`: `wait_for_answer` and `ask` end by their deadline against
//!   servers that never answer, trickle, or close mid-answer.
//! - `http_stack`: every call (a `Client` method, a session's ask and spawn,
//!   a sub-agent's result, the operator's handshake) maps a refusal to the
//!   same error, over one connection pool, against a canned HTTP server.

// A test that cannot unwrap has failed.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "all/deadlines.rs"]
mod deadlines;
#[path = "all/http_stack.rs"]
mod http_stack;
