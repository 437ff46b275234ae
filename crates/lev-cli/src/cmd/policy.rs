//! `lev policy example`, `lev policy check FILE`: the gate's policy file
//! (SPEC section 6), offline.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use clap::Subcommand;
use lev_approval::policy::{EXAMPLE_POLICY, Policy};

/// The gate's policy: print the example, check a file.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: PolicyCommand,
}

#[derive(Debug, Subcommand)]
enum PolicyCommand {
    /// Print the example policy (a starting point for --policy).
    ///
    /// Example: lev policy example > ~/.local/share/lev/policy.toml
    Example,
    /// Check a policy file: exit 0 when `lev serve --policy FILE` would
    /// start with it (warnings, such as a command pattern that `/bin/rm`
    /// slips past, on stderr), else 1 with the line of the first mistake.
    Check {
        /// The policy file.
        file: PathBuf,
    },
}

/// Run `lev policy ...`.
///
/// # Errors
/// A file that cannot be read or that holds a mistake (its line named).
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    match args.command {
        PolicyCommand::Example => {
            print!("{EXAMPLE_POLICY}");
            Ok(ExitCode::SUCCESS)
        }
        PolicyCommand::Check { file } => {
            let shown = file.display().to_string();
            let text = lev_client::files::read_text(&file, lev_client::files::limit::CONFIG)
                .context("reading the policy")?;
            let policy = Policy::parse(&text).with_context(|| shown.clone())?;
            for warning in policy.warnings() {
                eprintln!("{shown}: warning: {warning}");
            }
            println!(
                "{shown}: ok ({} rules, self-approval {})",
                policy.rules().len(),
                if policy.self_approval {
                    "allowed"
                } else {
                    "forbidden"
                }
            );
            Ok(ExitCode::SUCCESS)
        }
    }
}
