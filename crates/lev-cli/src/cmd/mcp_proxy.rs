//! `lev mcp proxy`: lev between an MCP client and an MCP server, every tool
//! call gated. The relay is in `crate::mcp::proxy`; this module turns flags
//! into its configuration.

use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context as _;
use reqwest::header::HeaderMap;

use crate::connect::{ClientArgs, runtime};
use crate::mcp::proxy::{self, Upstream, http_upstream};

/// `lev mcp proxy` flags.
#[derive(Debug, clap::Args)]
#[command(
    group(clap::ArgGroup::new("upstream").required(true).args(["upstream_url", "command"])),
    after_help = "Examples:\n  \
lev mcp proxy --name fs -- npx -y @modelcontextprotocol/server-filesystem /srv\n  \
lev mcp proxy --name tracker --upstream-url https://mcp.example.com/mcp --header 'Authorization: Bearer ...'\n  \
lev mcp proxy --name fs --listen 127.0.0.1:7430 -- npx -y @modelcontextprotocol/server-filesystem /srv\n\n\
Each tools/call goes through lev's gate as tool mcp__NAME__TOOL and reaches the server only \
after a signed decision verified; a denial is a tool error carrying the person's feedback. \
Everything else passes through unchanged. Tools not annotated readOnlyHint: true require the \
capability mcp-write, and mcp-destructive unless destructiveHint: false (the server's own word). \
See docs/agents/mcp-proxy.md."
)]
pub struct Args {
    /// The server's name: its tools are `mcp__NAME__TOOL` to lev's policy
    /// (as Claude Code names MCP tools). Letters, digits, `_` and `-`.
    #[arg(long, value_name = "NAME")]
    name: String,
    /// The upstream MCP server over Streamable HTTP (its endpoint, such as
    /// https://host/mcp), instead of a command after `--`.
    #[arg(long, value_name = "URL")]
    upstream_url: Option<String>,
    /// A header of every request to --upstream-url, as 'NAME: VALUE' (its
    /// auth, say). May be given more than once.
    #[arg(
        long = "header",
        value_name = "'NAME: VALUE'",
        requires = "upstream_url"
    )]
    headers: Vec<String>,
    /// Serve MCP's Streamable HTTP transport on this address (at /mcp)
    /// instead of stdio: each MCP session gets its own upstream. A loopback
    /// address, unless --listen-token-file is given.
    #[arg(long, value_name = "ADDR")]
    listen: Option<SocketAddr>,
    /// With --listen: clients must send the token in this file as
    /// `Authorization: Bearer TOKEN` (else 401). Required to bind an address
    /// other than loopback.
    #[arg(long, value_name = "FILE", requires = "listen")]
    listen_token_file: Option<std::path::PathBuf>,
    /// The session of every gate call [default: the MCP session, else one
    /// made for this process]. Session grants hold within it.
    #[arg(long, value_name = "SESSION")]
    session: Option<String>,
    /// The conversation [default: the session].
    #[arg(long, value_name = "CONVERSATION")]
    conversation: Option<String>,
    /// The person the agent acts for, when the token is not bound to one.
    #[arg(long, value_name = "CALLER")]
    caller: Option<String>,
    /// The sandbox mode of gate calls, as the policy names it.
    #[arg(long, default_value = "default", value_name = "MODE")]
    sandbox_mode: String,
    /// Who sees the questions, in order: `--route operator,human` lets the
    /// session's operator triage first [default: human].
    #[arg(long, value_delimiter = ',', value_name = "ROUTE")]
    route: Option<Vec<String>>,
    /// How long a tool call waits for a decision; then it is a tool error
    /// that says so, and the server is not called.
    #[arg(long, default_value_t = 600, value_name = "SECS",
          value_parser = clap::value_parser!(u64).range(1..))]
    timeout: u64,
    /// While a call with a progress token waits for a person, send the
    /// client a progress notification this often, so its request timeout
    /// does not end the wait.
    #[arg(long, default_value_t = 10, value_name = "SECS",
          value_parser = clap::value_parser!(u64).range(1..))]
    progress_every: u64,
    /// Answer a request the server has not answered in this long with an
    /// error (and cancel it on the server) [default: wait as long as the
    /// client does].
    #[arg(long, value_name = "SECS", value_parser = clap::value_parser!(u64).range(1..))]
    upstream_timeout: Option<u64>,
    /// Where the client declares elicitation, also put each call lev asks
    /// a person about to the client's own user (approve, or deny with
    /// feedback); their answer is recorded in lev with --elicit-token, so it
    /// is that person's decision. lev's other channels may answer first.
    #[arg(long, requires = "elicit_token")]
    elicit: bool,
    /// The approver token of the client's user, for --elicit.
    #[arg(
        long,
        env = "LEV_ELICIT_TOKEN",
        hide_env_values = true,
        value_name = "TOKEN"
    )]
    elicit_token: Option<String>,
    #[command(flatten)]
    trust: crate::trust::TrustArgs,
    #[command(flatten)]
    client: ClientArgs,
    /// The upstream MCP server on stdio: its command and arguments.
    #[arg(last = true, value_name = "COMMAND")]
    command: Vec<String>,
}

/// Run `lev mcp proxy` until the client goes away (stdio) or a signal
/// (`--listen`).
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    anyhow::ensure!(
        proxy::is_valid_name(&args.name),
        "--name {:?}: 1 to 64 letters, digits, `_` or `-`",
        args.name
    );
    if let Some(session) = &args.session {
        anyhow::ensure!(
            lev_protocol::ids::is_valid_id(session),
            "--session {session:?}: 1 to 128 of A-Z a-z 0-9 . _ : -"
        );
    }
    let upstream = match args.upstream_url {
        Some(url) => {
            let mut headers = HeaderMap::new();
            for text in &args.headers {
                let (name, value) = http_upstream::header(text)?;
                headers.append(name, value);
            }
            reqwest::Url::parse(&url).with_context(|| format!("--upstream-url {url:?}"))?;
            Upstream::Http(http_upstream::Target { url, headers })
        }
        None => Upstream::Command(args.command),
    };
    let listen = match args.listen {
        Some(addr) => {
            let token = match &args.listen_token_file {
                Some(path) => Some(
                    std::fs::read_to_string(path)
                        .with_context(|| format!("--listen-token-file {}", path.display()))?,
                ),
                None => None,
            };
            Some(proxy::http_downstream::Listen::new(addr, token.as_deref())?)
        }
        None => None,
    };
    let client = args.client.client()?;
    let elicit = args
        .elicit
        .then(|| client.with_token(args.elicit_token.clone()));
    let config = proxy::Config {
        client,
        elicit,
        process_session: proxy::process_session(&args.name),
        name: args.name,
        session: args.session,
        conversation: args.conversation,
        caller: args.caller,
        sandbox_mode: args.sandbox_mode,
        route: args.route,
        timeout: Duration::from_secs(args.timeout),
        pinned: args.trust.pinned()?,
        progress_every: Duration::from_secs(args.progress_every),
        upstream_timeout: args.upstream_timeout.map(Duration::from_secs),
    };
    runtime()?.block_on(proxy::serve(config, upstream, listen))?;
    Ok(ExitCode::SUCCESS)
}
