//! `lev show ID`: one interaction, its answer and its signed decision.

use std::process::ExitCode;

use anyhow::Context as _;

use crate::connect::{ClientArgs, runtime};
use crate::describe;
use crate::term::{self, Style};

/// Show one interaction in full: the question, the answer, the signature.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The interaction's id (ir_...).
    id: String,
    /// Print JSON: {"request", "response", "approval"}.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    client: ClientArgs,
}

/// Run `lev show`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let client = args.client.client()?;
    let view = runtime()?
        .block_on(client.get_interaction(&args.id))
        .with_context(|| format!("show {}", term::one_line(&args.id)))?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&view)?);
    } else {
        print!(
            "{}",
            describe::detail(Style::stdout(), &view, client.base_url())
        );
    }
    Ok(ExitCode::SUCCESS)
}
