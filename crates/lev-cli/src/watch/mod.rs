//! `lev watch`: the terminal UI (SPEC section 16).
//!
//! - [`model`]: the state, changed by server messages and keys; keys turn
//!   into [`model::Action`]s. Pure.
//! - [`view`]: the state drawn into a ratatui frame. Pure.
//! - [`call`]: what a tool call will do, read from its args.
//! - `cmd::watch`: the IO edge (terminal, event stream, answers, `$EDITOR`).

pub mod call;
pub mod model;
pub mod view;

#[cfg(test)]
mod tests;
