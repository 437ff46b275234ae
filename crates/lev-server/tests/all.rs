//! lev-server through the front door: the real server bound on 127.0.0.1:0
//! with a real SQLite file in a temporary data dir, driven over HTTP.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a test that cannot unwrap has failed

#[path = "all/support.rs"]
mod support;

// What the fuzz bodies name: lev-slack's modules, lev-server's webhook
// signatures, and the stable smoke tests' mutator.
mod slack {
    pub use lev_slack::{blocks, payload, verify};
}
use lev_server::webhooks::sign as webhook_sign;
#[path = "all/fuzz_smoke_notify.rs"]
mod fuzz_smoke_notify;
#[path = "../../../fuzz/body/mutate.rs"]
mod mutate;

#[path = "all/auth.rs"]
mod auth;
#[path = "all/authority.rs"]
mod authority;
#[path = "all/bad_input.rs"]
mod bad_input;
#[path = "all/connections.rs"]
mod connections;
#[path = "all/dashboard.rs"]
mod dashboard;
#[path = "all/events.rs"]
mod events;
#[path = "all/floors.rs"]
mod floors;
#[path = "all/forms.rs"]
mod forms;
#[path = "all/full_disk.rs"]
mod full_disk;
#[path = "all/gate.rs"]
mod gate;
#[path = "all/hooks.rs"]
mod hooks;
#[path = "all/interactions.rs"]
mod interactions;
#[path = "all/listen.rs"]
mod listen;
#[path = "all/names.rs"]
mod names;
#[path = "all/observability.rs"]
mod observability;
#[path = "all/operators.rs"]
mod operators;
#[path = "all/pages.rs"]
mod pages;
#[path = "all/quorum.rs"]
mod quorum;
#[path = "all/respond.rs"]
mod respond;
#[path = "all/restart.rs"]
mod restart;
#[path = "all/wait.rs"]
mod wait;
