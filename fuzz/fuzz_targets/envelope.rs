//! Arbitrary bytes as an approval envelope, a trusted key set, and a signed
//! payload: nothing may panic.
//!
//! Run (nightly): `cargo +nightly fuzz run envelope`. To start from real
//! envelopes, seed the corpus with the test vectors' envelopes:
//! `mkdir -p fuzz/corpus/envelope && for f in crates/lev-approval/tests/vectors/*.json;
//! do jq -c .envelope "$f" > "fuzz/corpus/envelope/$(basename "$f")"; done`.
//! On stable, `cargo test -p lev-approval` runs the same body over a few
//! thousand inputs (`tests/all/fuzz_smoke.rs`).

#![no_main]

#[path = "../body/envelope.rs"]
mod body;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    body::run(data);
});
