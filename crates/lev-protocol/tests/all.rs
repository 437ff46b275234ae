//! The one integration test binary of `lev-protocol`.
//!
//! - `fixtures`: every committed JSON fixture under `tests/fixtures/` parses
//!   into the value it stands for, and round-trips.
//! - `seeds`: the rules the seed documents state (`deny_with_feedback`,
//!   `deny_feedback`, `approval(id, false, scope)`, `spawn_ack`'s `ok`).
//! - `validation`: `validate_request` and `validate_response` against the
//!   SPEC (section 2's table, section 9's limits).
//! - `form`: the `form` kind's schema subset and answers, each type and
//!   constraint accepted and refused, bounds by property tests, limits linear.
//! - `props`: property tests (JSON round trips, strict JSON, feedback).
//! - `fuzz_smoke`: the `protocol` fuzz target's body over the fixtures and
//!   their mutations.
//! - `claude_code`: the hook outputs and permission-prompt results of SPEC
//!   section 10, byte for byte, and the refused hook events.

#[path = "all/claude_code.rs"]
mod claude_code;
#[path = "all/fixtures.rs"]
mod fixtures;
#[path = "all/form.rs"]
mod form;
#[path = "all/fuzz_smoke.rs"]
mod fuzz_smoke;
#[path = "all/props.rs"]
mod props;
#[path = "all/seeds.rs"]
mod seeds;
#[path = "all/validation.rs"]
mod validation;
