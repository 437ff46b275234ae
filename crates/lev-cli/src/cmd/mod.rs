//! One module per subcommand.

pub mod ask;
pub mod audit;
pub mod bench;
pub mod demo;
pub mod hook;
pub mod keys;
pub mod ls;
pub mod mcp;
pub mod respond;
pub mod serve;
pub mod show;
pub mod token;
pub mod verify;
