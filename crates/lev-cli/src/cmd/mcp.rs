//! `lev mcp`: an MCP server on stdio for coding agents (SPEC section 10).
//! The server itself is in `crate::mcp`; this module turns flags into its
//! configuration.

use std::process::ExitCode;
use std::time::Duration;

use crate::connect::{ClientArgs, runtime};
use crate::mcp;

/// `lev mcp` flags.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Claude Code:\n  claude --mcp-config lev-mcp.json --permission-prompt-tool mcp__lev__approval_prompt\n\
with lev-mcp.json:\n  {\"mcpServers\": {\"lev\": {\"command\": \"lev\", \"args\": [\"mcp\"],\n    \"env\": {\"LEV_URL\": \"http://127.0.0.1:7420\", \"LEV_TOKEN\": \"<a worker token>\"}}}}\n\
See docs/agents/claude-code.md and docs/agents/mcp-clients.md."
)]
#[command(args_conflicts_with_subcommands = true)]
pub struct Args {
    /// `lev mcp proxy`; without one, `lev mcp` itself.
    #[command(subcommand)]
    command: Option<Sub>,
    /// The session its questions and gate calls belong to [default: mcp- and
    /// the parent process id: one agent process, one session].
    #[arg(long, value_name = "SESSION")]
    session: Option<String>,
    /// The conversation [default: the session].
    #[arg(long, value_name = "CONVERSATION")]
    conversation: Option<String>,
    /// The person the agent acts for, when the token is not bound to one.
    #[arg(long, value_name = "CALLER")]
    caller: Option<String>,
    /// The sandbox mode of gate calls, as the policy names it (Claude Code's
    /// permission modes `default`, `plan`, `acceptEdits` ... may be used).
    #[arg(long, default_value = "default", value_name = "MODE")]
    sandbox_mode: String,
    /// Who sees the questions, in order: `--route operator,human` lets the
    /// session's operator triage first [default: human].
    #[arg(long, value_delimiter = ',', value_name = "ROUTE")]
    route: Option<Vec<String>>,
    /// How long a tool call waits for an answer; then it is a deny that says so.
    #[arg(long, default_value_t = 600, value_name = "SECS",
          value_parser = clap::value_parser!(u64).range(1..))]
    timeout: u64,
    #[command(flatten)]
    trust: crate::trust::TrustArgs,
    #[command(flatten)]
    client: ClientArgs,
}

/// What `lev mcp` also runs.
#[derive(Debug, clap::Subcommand)]
enum Sub {
    /// Put lev between any MCP client and any MCP server: every tools/call gated.
    ///
    /// The client is pointed at `lev mcp proxy --name NAME -- SERVER ARGS`
    /// (or --upstream-url for a Streamable HTTP server); each tools/call goes
    /// through lev's gate as tool mcp__NAME__TOOL and reaches the server only
    /// after a decision that verified, with the approved (perhaps edited)
    /// arguments. Everything else passes through unchanged.
    Proxy(Box<super::mcp_proxy::Args>),
}

/// Run `lev mcp` until the client closes stdin.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    if let Some(Sub::Proxy(proxy)) = args.command {
        return super::mcp_proxy::run(*proxy);
    }
    let client = args.client.client()?;
    let pinned = args.trust.pinned()?;
    let session = args
        .session
        .unwrap_or_else(|| format!("mcp-{}", parent_pid()));
    let config = mcp::Config {
        client,
        conversation: args.conversation.unwrap_or_else(|| session.clone()),
        session,
        caller: args.caller,
        sandbox_mode: args.sandbox_mode,
        route: args.route,
        timeout: Duration::from_secs(args.timeout),
        pinned,
    };
    runtime()?.block_on(mcp::serve(config))?;
    Ok(ExitCode::SUCCESS)
}

#[cfg(unix)]
fn parent_pid() -> u32 {
    std::os::unix::process::parent_id()
}

#[cfg(not(unix))]
fn parent_pid() -> u32 {
    std::process::id()
}
