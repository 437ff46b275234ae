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
mod codex;
mod connect;
mod deadline;
mod describe;
mod exit;
#[cfg(test)]
mod fuzz_smoke;
mod gatekeep;
mod mcp;
mod out;
mod report;
mod signals;
mod term;
mod trust;
mod watch;

use std::process::ExitCode;

use clap::error::{ContextKind, ContextValue};
use clap::{CommandFactory as _, Parser, Subcommand};

/// lev: agents ask people for answers and tool-call approvals; approvals are signed.
#[derive(Debug, Parser)]
#[command(name = "lev", version, propagate_version = true, max_term_width = 100)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// The server: the HTTP API, the signing key, the audit log.
    ///
    /// On first start it makes the data dir, the signing key and the admin
    /// token (`admin.token`, mode 0600), and prints the admin's dashboard URL.
    /// SIGINT or SIGTERM stops it gracefully.
    Serve(cmd::serve::Args),
    /// Check a signed approval offline: does it authorize exactly this call?
    ///
    /// Exit 0 (and the verified approval as JSON on stdout) when it authorizes
    /// the call; 3 when it is genuine but does not (a denial, another call,
    /// conversation, caller or sandbox mode); 1 when it is not genuine or not
    /// valid now. On 3 and 1 stdout stays empty (with --json: a verdict
    /// object, never the args) and the reason is on stderr. The nonce is not
    /// spent: that is the verifier's own ledger's job.
    Verify(cmd::verify::Args),
    /// The server's signing keys: list (the default), rotate, remove KID;
    /// and generate, which writes a new key file.
    Keys(cmd::keys::Args),
    /// Your own signing key, with which `lev respond` signs your votes:
    /// init (make it once and register it with your token), ls, revoke KID.
    Key(cmd::key::Args),
    /// Run a command once a person (or the policy, or a grant) approves it.
    ///
    /// Gates tool `shell` with {"argv":[...],"cwd":"..."}, waits for the
    /// decision (spinner on stderr), verifies the signed approval, then runs
    /// the approved argv (the approver's edit, if any) with stdio passed
    /// through. Exit: the command's code; 126 denied (the feedback on
    /// stderr); 124 nobody decided in time.
    Run(cmd::run::Args),
    /// Session and always grants: list them, revoke one.
    Grants(cmd::grants::Args),
    /// The gate's policy file: print the example, check a file.
    Policy(cmd::policy::Args),
    /// A server on a temporary data dir and an agent asking every kind of question.
    ///
    /// Prints the dashboard URL and the `export LEV_URL=... LEV_TOKEN=...`
    /// lines for a second terminal, where `lev ls` and `lev respond` answer
    /// the agent; prints what the agent's model reads for each answer. The
    /// agent's tool calls go through the gate (the example policy, plus
    /// `git status` allowed), so rules and session grants decide some.
    Demo(cmd::demo::Args),
    /// List interactions waiting for an answer (--all for every status).
    ///
    /// Newest first. Agent-written text is shown with control characters
    /// made visible.
    Ls(cmd::ls::Args),
    /// Show one interaction: the question, its answer, its signed decision.
    Show(cmd::show::Args),
    /// Answer an interaction: --text, --choice, --approve or --deny.
    ///
    /// The first answer wins: a later one is refused with the winner named.
    Respond(cmd::respond::Args),
    /// Ask a person a question and wait for the answer (for scripts).
    ///
    /// The answer is printed on stdout. With a spinner on stderr when it is a
    /// terminal; one plain line there otherwise. Ctrl-C (or SIGTERM, SIGHUP)
    /// cancels the question. With --timeout, lev gives up by then (and a
    /// tenth of it) whatever the server does.
    ///
    /// Exit codes: 0 answered; 3 declined (expired with --on-timeout deny);
    /// 4 timed out or cancelled; 1 error; 2 usage.
    Ask(cmd::ask::Args),
    /// The live inbox in the terminal: see and answer interactions as they come.
    ///
    /// Follows the server's event stream (resuming after a drop), shows what
    /// each tool call will do with hidden characters spelled out, and answers
    /// every kind with the dashboard's keys. Needs an approver or admin token.
    Watch(cmd::watch::Args),
    /// API tokens: create, list, revoke.
    Token(cmd::token::Args),
    /// Webhooks: signed deliveries of lev's events to other systems.
    ///
    /// Standard Webhooks (webhook-id, webhook-timestamp, webhook-signature
    /// v1 HMAC-SHA256), written with each event and retried with backoff;
    /// `lev webhook deliveries ID` shows every attempt. Needs an admin token.
    Webhook(cmd::webhook::Args),
    /// The audit log, and --verify to check its hash chain and signed head.
    ///
    /// The log holds every create, answer, expiry, cancel and token change,
    /// hash-chained. With --verify, lev reads the whole log, checks every
    /// entry's hash and link and the head signed by the server's key (from
    /// GET /v1/keys), and exits 1 naming the first defect. A chain cut short
    /// and re-signed by the server still verifies alone: keep the head with
    /// --save-head and check later with --head, so the cut shows.
    Audit(cmd::audit::Args),
    /// How human review performed over a window (GET /v1/stats).
    ///
    /// Per kind and policy rule: how many were asked, still pending,
    /// approval and denial rates, median and 95th percentile time to a
    /// decision, expired, who answered most. Needs an admin or approver token.
    Stats(cmd::stats::Args),
    /// An MCP server on stdio for coding agents: ask_human and approval_prompt.
    ///
    /// approval_prompt is Claude Code's --permission-prompt-tool
    /// (mcp__lev__approval_prompt): every tool call goes through lev's gate,
    /// and an allow is answered only after its signed approval verified.
    /// Speaks MCP 2025-11-25 (initialize) and 2026-07-28 (server/discover).
    /// `lev mcp proxy` puts lev between any MCP client and any MCP server,
    /// every tools/call gated (docs/agents/mcp-proxy.md).
    Mcp(cmd::mcp::Args),
    /// Answer a coding agent's hook event through lev's gate (Claude Code, Codex).
    ///
    /// `lev hook claude-code` and `lev hook codex` read a PreToolUse or
    /// PermissionRequest event on stdin and print the decision for the agent
    /// to act on.
    Hook(cmd::hook::Args),
    /// OpenAI's Codex CLI with every approval decided in lev: run, attach, install-hooks.
    ///
    /// `lev codex run PROMPT` starts Codex's app-server and answers its
    /// approval requests through lev's gate; `lev codex attach` does the same
    /// for Codex's terminal UI; `lev codex install-hooks` registers `lev hook
    /// codex` (for `codex exec`, which never asks). See docs/agents/codex.md.
    Codex(cmd::codex::Args),
    /// Migrate a PostgreSQL database to this lev's schema, without serving.
    ///
    /// `lev serve --database URL` migrates at start too (under an advisory
    /// lock, so replicas starting at once are safe); run this first in a
    /// deploy that migrates before it starts servers. A schema newer than
    /// this lev is refused.
    Migrate(cmd::migrate::Args),
    /// Is a server up? `GET /v1/health` once; exit 0 when it answers healthy.
    ///
    /// For a container's HEALTHCHECK (the image runs `lev health`) or a
    /// probe script. Needs no token.
    Health(cmd::health::Args),
    /// Load generator: starts `lev serve` as a child and drives it over HTTP.
    ///
    /// `lev bench cycles --workers 64` loops create -> respond -> wait and
    /// prints cycles/s, p50 and p99; `lev bench waiters --count 10000` holds
    /// that many waiting workers and prints the server's RSS and the wake
    /// latency; `lev bench chaos --kills 50` kills the server under load and
    /// checks every acknowledged write after each restart; `lev bench soak
    /// --minutes 30` runs mixed load and prints RSS, open files and latency
    /// each minute. With `--database
    /// postgres://... --replicas 2`, replicas share a scratch database. Use
    /// a release build for speed figures.
    #[command(hide = true)]
    Bench(cmd::bench::Args),
}

fn dispatch(command: Command) -> anyhow::Result<ExitCode> {
    match command {
        Command::Serve(args) => cmd::serve::run(args),
        Command::Verify(args) => cmd::verify::run(args),
        Command::Keys(args) => cmd::keys::run(args),
        Command::Key(args) => cmd::key::run(args),
        Command::Run(args) => cmd::run::run(args),
        Command::Grants(args) => cmd::grants::run(args),
        Command::Policy(args) => cmd::policy::run(args),
        Command::Demo(args) => cmd::demo::run(args),
        Command::Ls(args) => cmd::ls::run(args),
        Command::Show(args) => cmd::show::run(args),
        Command::Respond(args) => cmd::respond::run(args),
        Command::Ask(args) => cmd::ask::run(args),
        Command::Token(args) => cmd::token::run(args),
        Command::Webhook(args) => cmd::webhook::run(args),
        Command::Watch(args) => cmd::watch::run(args),
        Command::Audit(args) => cmd::audit::run(args),
        Command::Stats(args) => cmd::stats::run(args),
        Command::Mcp(args) => cmd::mcp::run(args),
        Command::Hook(args) => cmd::hook::run(args),
        Command::Codex(args) => cmd::codex::run(args),
        Command::Migrate(args) => cmd::migrate::run(args),
        Command::Health(args) => cmd::health::run(args),
        Command::Bench(args) => cmd::bench::run(args),
    }
}

fn main() -> ExitCode {
    // Deadlines of agent-facing commands count from here.
    deadline::mark_start();
    quiet_on_closed_pipe();
    let cli = parse();
    match dispatch(cli.command) {
        Ok(code) => code,
        Err(err) if closed_pipe(&err) => ExitCode::SUCCESS,
        Err(err) => {
            report::error(&err);
            ExitCode::from(exit::ERROR)
        }
    }
}

/// The command line, or exit with clap's usage error. clap's usage line
/// would list the options whose value came from the environment (LEV_URL,
/// LEV_TOKEN) as if they were required; lev shows the command's plain usage.
fn parse() -> Cli {
    match Cli::try_parse() {
        Ok(cli) => cli,
        Err(mut err) => {
            if err.get(ContextKind::Usage).is_some() {
                let mut command = Cli::command();
                command.build();
                let words: Vec<String> = std::env::args().skip(1).collect();
                let usage = usage_of(&mut command, &words);
                err.insert(ContextKind::Usage, ContextValue::StyledStr(usage));
            }
            err.exit()
        }
    }
}

/// The usage of the (sub)command that `words` name.
fn usage_of(command: &mut clap::Command, words: &[String]) -> clap::builder::StyledStr {
    if let Some((first, rest)) = words.split_first() {
        if first.starts_with('-') {
            return usage_of(command, rest);
        }
        if let Some(sub) = command.find_subcommand_mut(first) {
            return usage_of(sub, rest);
        }
    }
    command.render_usage()
}

/// `lev ls | head -2`: when the reader of stdout (or stderr) has gone, lev
/// stops quietly with exit 0, as ripgrep does, rather than panicking in
/// `println!`. Rust ignores SIGPIPE, so a write to a closed pipe fails with
/// EPIPE; `print!` and `eprint!` turn that into a panic, caught here.
fn quiet_on_closed_pipe() {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let payload = info.payload();
        let message = payload
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| payload.downcast_ref::<&str>().copied())
            .unwrap_or_default();
        if message.starts_with("failed printing to std") && message.ends_with("(os error 32)") {
            std::process::exit(0);
        }
        previous(info);
    }));
}

/// An error that is a write to a closed pipe (from `write!` on stdout).
fn closed_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|cause| {
        cause
            .downcast_ref::<std::io::Error>()
            .is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe)
            || cause
                .downcast_ref::<serde_json::Error>()
                .and_then(serde_json::Error::io_error_kind)
                == Some(std::io::ErrorKind::BrokenPipe)
    })
}
