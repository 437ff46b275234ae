//! Coding agents (SPEC section 10): `lev mcp` driven by the official MCP
//! Python SDK in both protocol eras, and `lev hook claude-code` fed Claude
//! Code's hook events, against a real `lev serve` with a person answering
//! through lev's API.

mod driver;
mod hook;
mod mcp;
mod served;
