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
    /// start with it, else 1 with the line of the first mistake.
    ///
    /// Warnings go to stderr, each with its rule's line: a command pattern
    /// that `/bin/rm` slips past, and a deny or ask rule that a wrapper walks
    /// around into an allow (`env rm`, `sudo rm`, `exec rm`, `sh -c`,
    /// `git -C . push`, `git  push` under `default = "allow"`). A deny rule
    /// is no sandbox: keep `default = "ask"` (or "deny") and allow what may
    /// run. Warnings exit 0 unless --strict.
    Check {
        /// The policy file.
        file: PathBuf,
        /// Exit 1 when there is any warning (for CI).
        #[arg(long)]
        strict: bool,
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
        PolicyCommand::Check { file, strict } => {
            let shown = file.display().to_string();
            let text = lev_client::files::read_text(&file, lev_client::files::limit::CONFIG)
                .context("reading the policy")?;
            let policy = Policy::parse(&text).with_context(|| shown.clone())?;
            let warnings = policy.warnings();
            for warning in &warnings {
                eprintln!("{shown}: warning: {warning}");
            }
            if strict && !warnings.is_empty() {
                eprintln!(
                    "{shown}: {} warning{} (--strict)",
                    warnings.len(),
                    if warnings.len() == 1 { "" } else { "s" }
                );
                return Ok(ExitCode::FAILURE);
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
