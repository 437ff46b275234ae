//! Deadlines of the commands an agent runs with a time limit (`lev hook`,
//! `lev mcp`'s tool calls, the Codex bridge, `lev run --timeout`, `lev ask
//! --timeout`).
//!
//! An agent that runs a hook with a timeout decides by itself once that
//! timeout passes (Claude Code asks its own prompt, Codex runs the call), so
//! lev must have answered before: one deadline for everything lev does, from
//! the start of the process (a hook) or of the call (a tool call of `lev
//! mcp`, an approval request of Codex), covering connect, the request, the
//! response's headers, a body that trickles in and a server that closes
//! mid-answer. When it passes, the command gives its configured fail
//! behaviour. The deadline is the person's `--timeout` plus a margin for
//! everything else ([`allowance`]).

use std::future::Future;
use std::sync::OnceLock;
use std::time::Duration;

use tokio::time::Instant;

/// When this process started (set first thing in `main`).
static START: OnceLock<std::time::Instant> = OnceLock::new();

/// Remember now as the process's start; later calls change nothing.
pub fn mark_start() {
    let _ = START.get_or_init(std::time::Instant::now);
}

/// The process's start.
fn started() -> Instant {
    Instant::from_std(*START.get_or_init(std::time::Instant::now))
}

/// How long a command waiting `timeout` for a person may take in all:
/// `timeout`, and a tenth of it (1 to 15 s) for the rest (the gate call,
/// fetching keys, verifying, spending the nonce). `lev codex install-hooks`
/// gives Codex's hook timeout 30 s more, and the docs tell Claude Code's
/// settings to give 60 s more: the hook answers first.
pub fn allowance(timeout: Duration) -> Duration {
    let margin = Duration::from_secs((timeout.as_secs() / 10).clamp(1, 15));
    timeout.saturating_add(margin)
}

/// A point in time past which lev stops waiting and gives its fail behaviour.
#[derive(Debug, Clone, Copy)]
pub struct Deadline {
    at: Instant,
    allowed: Duration,
}

impl Deadline {
    /// [`allowance`]`(timeout)` from the start of the process.
    pub fn from_start(timeout: Duration) -> Self {
        Self::after(started(), allowance(timeout))
    }

    /// [`allowance`]`(timeout)` from now.
    pub fn from_now(timeout: Duration) -> Self {
        Self::after(Instant::now(), allowance(timeout))
    }

    fn after(start: Instant, allowed: Duration) -> Self {
        // A deadline past what the clock can hold is a day away instead.
        let at = start
            .checked_add(allowed)
            .unwrap_or_else(|| start + Duration::from_secs(86_400));
        Self { at, allowed }
    }

    /// The whole time allowed, in seconds (for messages).
    pub fn secs(&self) -> u64 {
        self.allowed.as_secs()
    }

    /// What is left of it.
    pub fn left(&self) -> Duration {
        self.at.saturating_duration_since(Instant::now())
    }

    /// `work`, or `None` when the deadline passes first (`work` is dropped
    /// then: its requests are abandoned).
    pub async fn run<F: Future>(&self, work: F) -> Option<F::Output> {
        tokio::time::timeout_at(self.at, work).await.ok()
    }

    /// "lev did not decide within N s".
    pub fn missed(&self) -> String {
        format!("lev did not decide within {} s", self.secs())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_margin_is_a_tenth_between_1_and_15_seconds() {
        let s = Duration::from_secs;
        assert_eq!(allowance(s(1)), s(2));
        assert_eq!(allowance(s(5)), s(6));
        assert_eq!(allowance(s(30)), s(33));
        assert_eq!(allowance(s(600)), s(615));
        assert_eq!(allowance(s(u64::MAX)), Duration::MAX);
    }

    #[test]
    fn work_past_the_deadline_is_dropped() {
        let rt = crate::connect::runtime().unwrap();
        assert_eq!(Deadline::from_now(Duration::from_secs(1)).secs(), 2);
        let deadline = Deadline::after(Instant::now(), Duration::from_millis(50));
        assert_eq!(rt.block_on(deadline.run(async { 7 })), Some(7));
        let never = rt.block_on(deadline.run(std::future::pending::<()>()));
        assert_eq!(never, None);
        assert_eq!(deadline.left(), Duration::ZERO);
    }
}
