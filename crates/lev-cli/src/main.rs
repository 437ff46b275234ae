//! `lev`: the command line of the lev control plane (SPEC section 7).
//!
//! One module per subcommand under `cmd/`, each with an `Args` (or a
//! subcommand enum) and a `run` returning the process's exit code. To add a
//! command: write `cmd/NAME.rs`, add a variant to [`Command`] and an arm to
//! [`dispatch`].
//!
//! Errors are printed once, here, in the ripgrep style: `lev: context: cause`,
//! lowercase, with any `hint:` on a line of its own.

mod cmd;
mod exit;
mod report;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// lev: agents ask people for answers and tool-call approvals; approvals are signed.
#[derive(Debug, Parser)]
#[command(name = "lev", version, propagate_version = true, max_term_width = 100)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Check a signed approval offline: does it authorize exactly this call?
    ///
    /// Exit 0 (and the verified approval as JSON on stdout) when it authorizes
    /// the call; 3 when it is genuine but does not (a denial, another call,
    /// conversation, caller or sandbox mode); 1 when it is not genuine or not
    /// valid now. The nonce is not spent: that is the verifier's own ledger's job.
    Verify(cmd::verify::Args),
    /// Signing keys.
    Keys(cmd::keys::Args),
}

fn dispatch(command: Command) -> anyhow::Result<ExitCode> {
    match command {
        Command::Verify(args) => cmd::verify::run(args),
        Command::Keys(args) => cmd::keys::run(args),
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match dispatch(cli.command) {
        Ok(code) => code,
        Err(err) => {
            report::error(&err);
            ExitCode::from(exit::ERROR)
        }
    }
}
