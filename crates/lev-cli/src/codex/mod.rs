//! OpenAI's Codex CLI, answered by lev (`lev codex run`, `lev codex attach`,
//! `lev hook codex`, `lev codex install-hooks`).
//!
//! - [`wire`]: one app-server message told apart (pure).
//! - [`rpc`]: the app-server's JSON-RPC connection (stdio lines, WebSocket frames).
//! - [`connection`]: a connection's reader, the `initialize` handshake and
//!   the version check.
//! - [`shell`]: the shell command of a call, and the argv a policy reads.
//! - [`approval`]: Codex's approval requests as lev tool calls, lev's
//!   decisions as Codex's answers (pure).
//! - [`bridge`]: deciding each request through lev's gate and answering it.
//! - [`hooks`]: Codex's hook events (`lev hook codex`) and the config that
//!   registers and trusts them (`lev codex install-hooks`).

pub mod approval;
pub mod bridge;
pub mod connection;
pub mod hooks;
pub mod rpc;
pub mod shell;
pub mod wire;

use sha2::{Digest as _, Sha256};

/// The first 16 hex digits of the SHA-256 of `text`.
pub fn short_hash(text: &str) -> String {
    let digest = Sha256::digest(text.as_bytes());
    digest.iter().take(8).map(|b| format!("{b:02x}")).collect()
}
