//! Arbitrary bytes as a policy file: nothing may panic.
//!
//! Run (nightly): `cargo +nightly fuzz run policy`, seeded with the example
//! policy: `mkdir -p fuzz/corpus/policy && cp examples/policy.toml
//! fuzz/corpus/policy/`. On stable, `cargo test -p lev-approval` runs the
//! same body over the example policy and a few thousand mutations of it
//! (`tests/all/fuzz_smoke_policy.rs`).

#![no_main]

#[path = "../body/policy.rs"]
mod body;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    body::run(data);
});
