//! OpenAI's Codex CLI (the real one, pinned by `scripts/codex-env.sh`)
//! answered by lev, offline against a fake Responses API on loopback:
//!
//! - `run`: `lev codex run`: approve (the gate's request id, the progress
//!   on stderr), injected context, for the session, deny with feedback, an
//!   edit, a file change, cancel, a timeout, a failed turn, lev unreachable,
//!   policy rules on the inner argv.
//! - `hooks`: `lev codex install-hooks` (trusted by Codex itself) and
//!   `lev hook codex` under `codex exec`: deny blocks, approve runs, an edit
//!   rewrites, lev unreachable blocks.
//! - `bad_input`: a missing Codex (`--codex`, PATH), something that is not Codex, an old
//!   Codex, a request lev cannot map, a combination that asks nothing.
//! - `attach`: `lev codex attach` to the terminal UI's app-server, in tmux:
//!   lev answers, the UI answers first (approves, refuses), an approval
//!   already waiting when lev attaches.
//! - `offline`: the tripwire every test's proxy variables point at (nothing
//!   may reach beyond loopback), and proof that Codex's requests go through
//!   it.

mod attach;
mod bad_input;
mod fake_model;
mod harness;
mod hooks;
pub(crate) mod offline;
mod run;
