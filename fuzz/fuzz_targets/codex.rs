//! Arbitrary bytes as Codex's app-server messages and approval requests, its
//! hook events and an approver's edit, and shell command lines: nothing may
//! panic, and rewrites, exact edits and argv keep their promises (see
//! `fuzz/body/codex.rs`).
//!
//! Run: `bash scripts/fuzz.sh 5 codex`. On stable, `cargo test -p lev-cli`
//! runs the same body over its seeds, the committed corpus and a few
//! thousand mutations.

#![no_main]

// lev-cli's modules, compiled here on their own (what the target does not
// call is unused).
#[allow(dead_code)]
#[path = "../../crates/lev-cli/src/codex"]
mod codex {
    pub mod approval;
    pub mod hooks;
    pub mod shell;
    pub mod wire;

    /// As `lev_cli::codex::short_hash`.
    pub fn short_hash(text: &str) -> String {
        use sha2::{Digest as _, Sha256};
        let digest = Sha256::digest(text.as_bytes());
        digest.iter().take(8).map(|b| format!("{b:02x}")).collect()
    }
}
#[allow(dead_code)]
mod report {
    pub const HINT: &str = "\nhint: ";
}

#[path = "../body/codex.rs"]
mod body;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    body::run(data);
});
