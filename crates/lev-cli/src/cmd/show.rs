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
    #[arg(long, conflicts_with = "approval")]
    json: bool,
    /// Print the signed decision alone (the DSSE envelope, as `lev verify`
    /// reads it): `lev show ID --approval > approval.json`. Exit 1 when
    /// there is none yet.
    #[arg(long)]
    approval: bool,
    #[command(flatten)]
    client: ClientArgs,
}

/// Run `lev show`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let client = args.client.client()?;
    let view = runtime()?
        .block_on(client.get_interaction(&args.id))
        .with_context(|| format!("show {}", term::one_line(&args.id)))?;
    if args.approval {
        let Some(envelope) = &view.approval else {
            anyhow::bail!(
                "show {}: expected a signed decision, found none ({}){}only a decided tool approval has one",
                term::one_line(&args.id),
                view.request.status.as_str(),
                crate::report::HINT
            );
        };
        crate::out::print_json(envelope)?;
    } else if args.json {
        crate::out::print_json(&view)?;
    } else {
        print!(
            "{}",
            describe::detail(Style::stdout(), &view, client.base_url())
        );
    }
    Ok(ExitCode::SUCCESS)
}
