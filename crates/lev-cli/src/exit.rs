//! Exit codes (SPEC section 7). Usage errors (2) are clap's.

/// Not done: the error is on stderr.
pub const ERROR: u8 = 1;
/// Denied, or (for `lev verify`) genuine but not authorizing this call.
pub const DENIED: u8 = 3;
/// Timed out or cancelled: nobody answered.
pub const TIMED_OUT: u8 = 4;
