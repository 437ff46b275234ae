//! The body of the `mcp` fuzz target, shared with lev-cli's smoke test
//! (`crates/lev-cli/src/fuzz_smoke.rs`), which runs it on stable Rust.
//!
//! Untrusted bytes an MCP client sends `lev mcp` on stdio: one JSON-RPC
//! message as rmcp decodes it, whether it may open a lifecycle
//! (`opening::Opening`), and the arguments of lev's two tools
//! (`args::approval_prompt`, `args::ask_human`), whose question must then be
//! one the server accepts or refuses with a validation error. Nothing may
//! panic.
//!
//! The including crate provides `crate::mcp::{args, opening}` (lev-cli's
//! modules).

use std::borrow::Cow;

use lev_protocol::InteractionRequest;
use lev_protocol::validate::{Limits, validate_request};
use rmcp::RoleServer;
use rmcp::model::ProtocolVersion;
use rmcp::service::RxJsonRpcMessage;
use serde_json::Value;

use crate::mcp::{args, opening::Opening};

/// What one run reached, so a smoke test can tell that its inputs go deep.
#[derive(Debug, Clone, Copy, Default)]
pub struct Reached {
    /// A JSON-RPC message rmcp decodes.
    pub message: bool,
    /// One that opens a lifecycle.
    pub opens: bool,
    /// `approval_prompt` arguments that fit.
    pub approval_prompt: bool,
    /// `ask_human` arguments that fit.
    pub ask_human: bool,
}

/// Run one input.
pub fn run(data: &[u8]) -> Reached {
    let mut reached = Reached::default();
    if let Ok(message) = serde_json::from_slice::<RxJsonRpcMessage<RoleServer>>(data) {
        reached.message = true;
        let opening = Opening::new((), Cow::Borrowed(ProtocolVersion::KNOWN_VERSIONS));
        reached.opens = opening.opens(&message);
        // What rmcp decoded, it can write back.
        assert!(serde_json::to_vec(&message).is_ok());
    }
    let Ok(value) = serde_json::from_slice::<Value>(data) else {
        return reached;
    };
    // The arguments themselves, or those inside a `tools/call` request.
    let arguments = value.pointer("/params/arguments").cloned().unwrap_or(value);
    if let Ok(input) = args::approval_prompt(arguments.clone()) {
        reached.approval_prompt = true;
        assert!(serde_json::to_string(&input.input).is_ok());
    }
    if let Ok(kind) = args::ask_human(arguments) {
        reached.ask_human = true;
        let request = InteractionRequest::new("s-mcp".to_owned(), kind);
        let _ = validate_request(&request, &Limits::default());
    }
    reached
}
