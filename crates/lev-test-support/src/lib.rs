//! Starting lev servers for tests and load generators, in one place:
//!
//! - [`Spawned`]: a real `lev serve` process on port 0, whose address is
//!   read from its "listening on" line; its log is kept, it is killed when
//!   dropped, and it can be killed with SIGKILL mid-flight (crash tests).
//! - [`InProcess`] (feature `in-process`): a `lev_server::Server` in this
//!   process, on port 0 in a temporary data dir.
//! - [`Stalling`]: an HTTP server that misbehaves on purpose (never answers,
//!   trickles, closes mid-answer), for the tests of clients' deadlines.
//!
//! Errors are returned, not panicked on, so the load generators of the
//! shipped binary (`lev bench`) use it too.

mod spawned;
mod stalling;

#[cfg(feature = "in-process")]
mod in_process;

#[cfg(feature = "in-process")]
pub use in_process::InProcess;
pub use spawned::{SpawnError, Spawned, SpawnedBuilder, read_token};
pub use stalling::{Stall, Stalling};
