//! The one integration test binary of `lev-cli`: the real `lev` binary, run
//! as a user or a script would run it.
//!
//! - `verify`: `lev verify` over every committed test vector of lev-approval
//!   (exit 0 / 3 / 1, JSON on stdout, the reason on stderr), and its inputs.
//! - `keys`: `lev keys generate` (mode 0600, refuses to overwrite, output).
//! - `serve`: `lev serve` as a process: its start lines, SIGTERM (exit 0),
//!   and every acknowledged write kept through a SIGKILL mid-stream.
//! - `python_signer`: envelopes signed by Python's `cryptography` with its own
//!   DSSE code, verified by `lev verify`.

// Test helpers outside `#[test]` functions may panic on a broken setup too.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "all/agents/mod.rs"]
mod agents;
#[path = "all/keys.rs"]
mod keys;
#[path = "all/operators.rs"]
mod operators;
#[path = "all/python_signer.rs"]
mod python_signer;
#[path = "all/run.rs"]
mod run;
#[path = "all/serve.rs"]
mod serve;
#[path = "all/support.rs"]
mod support;
#[path = "all/verify.rs"]
mod verify;
