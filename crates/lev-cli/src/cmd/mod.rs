//! One module per subcommand.

pub mod ask;
pub mod audit;
pub mod bench;
pub mod codex;
pub mod demo;
pub mod grants;
pub mod health;
pub mod hook;
pub mod key;
pub mod keys;
pub mod ls;
pub mod mcp;
pub mod mcp_proxy;
pub mod migrate;
pub mod policy;
pub mod respond;
pub mod run;
pub mod serve;
pub mod show;
pub mod stats;
pub mod token;
pub mod verify;
pub mod watch;
pub mod webhook;
