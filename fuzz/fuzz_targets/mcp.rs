//! Arbitrary bytes as what an MCP client sends `lev mcp`: JSON-RPC messages
//! as rmcp decodes them, the opening of a lifecycle, and the arguments of
//! lev's tools: nothing may panic (see `fuzz/body/mcp.rs`).
//!
//! Run: `bash scripts/fuzz.sh 5 mcp`. On stable, `cargo test -p lev-cli`
//! runs the same body over its seeds, the committed corpus and a few
//! thousand mutations.

#![no_main]

// lev-cli's modules, compiled here on their own.
#[allow(dead_code)]
#[path = "../../crates/lev-cli/src/mcp"]
mod mcp {
    pub mod args;
    pub mod opening;
}

#[path = "../body/mcp.rs"]
mod body;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    body::run(data);
});
