//! Coding agents (SPEC section 10): `lev mcp` driven by the official MCP
//! Python SDK in both protocol eras, `lev hook claude-code` fed Claude
//! Code's hook events, and the real Codex CLI through `lev codex` and
//! `lev hook codex`, against a real `lev serve` with a person answering
//! through lev's API.

mod codex;
pub(crate) mod driver;
pub(crate) mod hook;
mod mcp;
pub(crate) mod served;
