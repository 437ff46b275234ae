//! `lev grants`, `lev grants revoke ID`: the session and always grants that
//! approve calls without asking (approver).

use std::process::ExitCode;

use anyhow::Context as _;
use clap::Subcommand;
use lev_protocol::api::Grant;

use crate::connect::{ClientArgs, runtime};
use crate::term::{self, Style};

/// Grants: "approve for this session" and "always" answers, in force until
/// revoked (needs an approver or admin token).
#[derive(Debug, clap::Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct Args {
    #[command(subcommand)]
    command: Option<GrantsCommand>,
    /// Print JSON: an array of grants.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    client: ClientArgs,
}

#[derive(Debug, Subcommand)]
enum GrantsCommand {
    /// List the grants in force (the default).
    #[command(alias = "list")]
    Ls {
        /// Print JSON: an array of grants.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        client: ClientArgs,
    },
    /// Revoke a grant: calls it covered ask again.
    Revoke {
        /// The grant's id (gr_...).
        id: String,
        #[command(flatten)]
        client: ClientArgs,
    },
}

/// Run `lev grants ...`.
///
/// # Errors
/// No server, a bad token, an unknown grant.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    match args.command {
        None => list(&args.client, args.json),
        Some(GrantsCommand::Ls { json, client }) => list(&client, json),
        Some(GrantsCommand::Revoke { id, client }) => {
            let grant = runtime()?
                .block_on(client.client()?.revoke_grant(&id))
                .with_context(|| format!("revoking grant {}", term::one_line(&id)))?;
            eprintln!(
                "lev: revoked {}: {} by {} no longer approved without asking",
                term::one_line(&grant.id),
                term::one_line(&grant.tool_name),
                term::one_line(&grant.caller),
            );
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn list(client: &ClientArgs, json: bool) -> anyhow::Result<ExitCode> {
    let grants = runtime()?
        .block_on(client.client()?.grants())
        .context("listing grants")?;
    if json {
        crate::out::print_json(&grants)?;
    } else if grants.is_empty() {
        eprintln!("lev: no grants in force");
    } else {
        let style = Style::stdout();
        for g in &grants {
            println!("{}", describe(g, style));
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// One grant on two lines: what it approves, and who granted it when.
fn describe(g: &Grant, style: Style) -> String {
    let scope = match g.scope {
        lev_protocol::ApprovalScope::Always => "always".to_owned(),
        _ => format!(
            "session {}",
            term::one_line(g.conversation_id.as_deref().unwrap_or("-"))
        ),
    };
    let covered = if g.covered_capabilities.is_empty() {
        "nothing missing".to_owned()
    } else {
        term::one_line(&g.covered_capabilities.join(", "))
    };
    let args = match &g.grant_args {
        Some(patterns) if !patterns.is_empty() => patterns
            .iter()
            .map(|(p, r)| format!("{}~{}", term::one_line(p), term::one_line(r)))
            .collect::<Vec<_>>()
            .join(" "),
        _ => "any args".to_owned(),
    };
    format!(
        "{}  {}  {} for {} in {} ({scope}), covers {covered}, {args}\n    {}",
        style.cyan(&term::one_line(&g.id)),
        style.bold(&term::clip(&g.tool_name, 60)),
        style.dim("caller"),
        term::one_line(if g.caller.is_empty() { "-" } else { &g.caller }),
        term::one_line(if g.sandbox_mode.is_empty() {
            "-"
        } else {
            &g.sandbox_mode
        }),
        style.dim(&format!(
            "granted by {} {} ago",
            term::one_line(&g.approver),
            term::age(g.created_at)
        )),
    )
}
