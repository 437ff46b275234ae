//! The one integration test binary of `lev-approval`.
//!
//! - `vectors`: every committed vector under `tests/vectors/` gives its
//!   verdict, and the files are what the generator makes
//!   (`cargo run -p lev-approval --example gen_vectors`).
//! - `vector_set`: the vector format, the generator and the reference verifier
//!   (shared with the example).
//! - `properties`: property tests of the call binding, the signature and grants.
//! - `grant_props`: property tests of grant matching and of the gate's
//!   decision with grants (a grant never overrides a deny rule).
//! - `fuzz_smoke`: the fuzz target's body over a few thousand inputs, on stable.
//! - `fuzz_smoke_policy`: the `policy` fuzz target's body over the example
//!   policy and its mutations.

// Test helpers outside `#[test]` functions may panic on a broken setup too.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "all/fuzz_smoke.rs"]
mod fuzz_smoke;
#[path = "all/fuzz_smoke_policy.rs"]
mod fuzz_smoke_policy;
#[path = "all/grant_props.rs"]
mod grant_props;
/// The smoke tests' mutator, shared with other crates' smoke tests.
#[path = "../../../fuzz/body/mutate.rs"]
mod mutate;
#[path = "all/properties.rs"]
mod properties;
#[path = "all/vector_set.rs"]
mod vector_set;
#[path = "all/vector_votes.rs"]
mod vector_votes;
#[path = "all/vectors.rs"]
mod vectors;
