//! Arbitrary bytes as Slack's interaction payloads and signature headers,
//! Standard Webhooks signatures, and interactions rendered for Slack:
//! nothing may panic (see `fuzz/body/notify.rs`).
//!
//! Run (nightly): `bash scripts/fuzz.sh 5 notify`. On stable, `cargo test
//! -p lev-server` runs the same body over Slack-shaped seeds and the
//! protocol's interaction fixtures, and a few thousand mutations of them.

#![no_main]

// lev-slack's and lev-server's modules, compiled here on their own (what
// the target does not call is unused).
#[allow(dead_code)]
#[path = "../../crates/lev-slack/src"]
mod slack {
    pub mod blocks;
    pub mod payload;
    pub mod verify;
    #[allow(unused_imports)]
    pub use payload::SlackAction;
}
#[allow(dead_code)]
#[path = "../../crates/lev-server/src/webhooks/sign.rs"]
mod webhook_sign;

#[path = "../body/notify.rs"]
mod body;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    body::run(data);
});
