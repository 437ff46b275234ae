//! The body of the `notify` fuzz target, shared with lev-server's smoke
//! test (`crates/lev-server/tests/all/fuzz_smoke_notify.rs`), which runs it
//! on stable Rust.
//!
//! Untrusted bytes where notifications meet the outside: what Slack posts
//! to the interactivity URL (a form with a `payload` of JSON), Slack's and
//! Standard Webhooks' signature headers, and an interaction an agent wrote
//! rendered as a Slack message. Nothing may panic; a rendered message stays
//! within Slack's limits, whatever the interaction holds.
//!
//! The including crate provides `crate::slack::{payload, verify, blocks}`
//! (lev-slack's modules) and `crate::webhook_sign` (lev-server's).

use crate::slack::{blocks, payload, verify};
use crate::webhook_sign;

/// Run one input; whether it decoded as a Slack payload.
pub fn run(data: &[u8]) -> bool {
    let parsed = payload::parse(data).is_ok();
    // The first two lines as the signature headers, the rest as the body.
    let mut parts = data.splitn(3, |&b| b == b'\n');
    let ts = parts.next().map(String::from_utf8_lossy);
    let sig = parts.next().map(String::from_utf8_lossy);
    let body = parts.next().unwrap_or_default();
    let _ = verify::verify(
        b"8f742231b10e8888abcd99yyyzzz85a5",
        ts.as_deref(),
        sig.as_deref(),
        body,
        1_531_420_618,
    );
    let _ = webhook_sign::verify(
        &[7u8; 32],
        "msg_1",
        ts.as_deref().unwrap_or_default(),
        sig.as_deref().unwrap_or_default(),
        body,
        1_614_265_330,
        300,
    );
    if let Ok(view) = serde_json::from_slice::<lev_protocol::api::InteractionView>(data) {
        let message = blocks::message(&view, Some("https://lev.example.com"));
        let blocks = message["blocks"].as_array().map_or(0, Vec::len);
        assert!(blocks <= blocks::MAX_BLOCKS, "{blocks} blocks");
        assert!(serde_json::to_string(&message).is_ok());
        let _ = blocks::feedback_modal(view.request.id(), "tool");
        let _ = blocks::reply_modal(view.request.id(), "prompt");
    }
    parsed
}
