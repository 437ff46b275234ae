//! The signals that end a command: SIGINT, SIGTERM and SIGHUP (the terminal
//! or the SSH session gone). A command that started something it must stop
//! (`lev bench`'s servers, `lev demo`'s data dir) listens for all three from
//! its start until it ends: once tokio listens for a signal, its default
//! action (ending the process) is gone for good, so a listener made late or
//! dropped early would let a signal through unheard.

use std::io;

/// SIGINT, SIGTERM and SIGHUP, listened for from [`Terminating::new`] on.
#[derive(Debug)]
pub struct Terminating {
    #[cfg(unix)]
    int: tokio::signal::unix::Signal,
    #[cfg(unix)]
    term: tokio::signal::unix::Signal,
    #[cfg(unix)]
    hup: tokio::signal::unix::Signal,
}

impl Terminating {
    /// Listen (inside a tokio runtime, whose signal driver is used).
    ///
    /// # Errors
    /// When a handler cannot be installed.
    pub fn new() -> io::Result<Self> {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            Ok(Self {
                int: signal(SignalKind::interrupt())?,
                term: signal(SignalKind::terminate())?,
                hup: signal(SignalKind::hangup())?,
            })
        }
        #[cfg(not(unix))]
        {
            Ok(Self {})
        }
    }

    /// The next of them: its name and the exit code that says it (128 + its
    /// number, as the shells do).
    pub async fn recv(&mut self) -> (&'static str, u8) {
        #[cfg(unix)]
        {
            tokio::select! {
                _ = self.int.recv() => ("SIGINT", 128 + 2),
                _ = self.term.recv() => ("SIGTERM", 128 + 15),
                _ = self.hup.recv() => ("SIGHUP", 128 + 1),
            }
        }
        #[cfg(not(unix))]
        {
            let _ = tokio::signal::ctrl_c().await;
            ("Ctrl-C", 128 + 2)
        }
    }
}
