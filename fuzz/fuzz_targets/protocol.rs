//! Arbitrary bytes as strict JSON, an operator frame, a Claude Code hook
//! event, an interaction request and an answer: nothing may panic.
//!
//! Run (nightly): `cargo +nightly fuzz run protocol`, seeded from the
//! committed fixtures: `mkdir -p fuzz/corpus/protocol && cp
//! crates/lev-protocol/tests/fixtures/*/*.json fuzz/corpus/protocol/`.
//! On stable, `cargo test -p lev-protocol` runs the same body over the
//! fixtures and a few thousand mutations of them (`tests/all/fuzz_smoke.rs`).

#![no_main]

#[path = "../body/protocol.rs"]
mod body;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    body::run(data);
});
