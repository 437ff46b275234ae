//! One module per subcommand.

pub mod keys;
pub mod verify;
