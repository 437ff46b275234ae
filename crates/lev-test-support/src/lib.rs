//! Starting lev servers for tests, in one place:
//!
//! - [`InProcess`] (feature `in-process`): a `lev_server::Server` in this
//!   process, on port 0 in a temporary data dir.
//! - [`Stalling`]: an HTTP server that misbehaves on purpose (never answers,
//!   trickles, closes mid-answer), for the tests of clients' deadlines.
//!
//! A real `lev serve` process (`Spawned`) is lev-cli's own
//! (`crates/lev-cli/src/cmd/bench/spawned.rs`): `lev bench` starts its
//! servers with it, and lev-cli's tests include that file, so the shipped
//! binary does not link this crate.

mod stalling;

#[cfg(feature = "in-process")]
mod in_process;

#[cfg(feature = "in-process")]
pub use in_process::InProcess;
pub use stalling::{Stall, Stalling};
