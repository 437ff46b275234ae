//! Coding agents (SPEC section 10): `lev mcp` driven by the official MCP
//! Python SDK in both protocol eras, `lev hook claude-code` fed Claude
//! Code's hook events, the real Claude Code CLI with `--mcp-config` on `lev
//! mcp proxy`, and the real Codex CLI through `lev codex` and `lev hook
//! codex`, against a real `lev serve` with a person answering through lev's
//! API.

mod claude_code;
mod codex;
pub(crate) mod driver;
pub(crate) mod hook;
mod loopback;
mod mcp;
pub(crate) mod served;
