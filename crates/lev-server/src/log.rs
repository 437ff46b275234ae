//! Minimal logging to stderr: the server's only diagnostics channel.
//!
//! A line reads `lev: LEVEL: message`. Kept tiny on purpose: the server logs
//! its own faults and its lifecycle, nothing per request.

/// Log a server fault (a 5xx, a failed background task).
pub fn error(message: &str) {
    eprintln!("lev: error: {message}");
}

/// Log a lifecycle event (start, shutdown).
pub fn info(message: &str) {
    eprintln!("lev: {message}");
}
