//! `lev hook claude-code`: a Claude Code command hook (SPEC section 10).
//!
//! Reads one PreToolUse or PermissionRequest event on stdin, runs the call
//! through lev's gate (a person decides when the policy asks), and prints the
//! event's output. Exit 0 with that JSON (or nothing: no decision); exit 2
//! with the reason on stderr for an event it cannot answer, which Claude Code
//! takes as a blocking error.

use std::io::{Read as _, Write as _};
use std::process::ExitCode;
use std::time::Duration;

use lev_protocol::claude_code::{HookEvent, Verdict, hook_output};

use crate::connect::{ClientArgs, runtime};
use crate::gatekeep::{self, GateCall};
use crate::report;

/// The most a hook event may weigh: a JSON body's limit (SPEC section 9).
const MAX_EVENT_BYTES: u64 = 1024 * 1024;
/// Exit code of an event the hook cannot answer: Claude Code's blocking error.
const BLOCKING_ERROR: u8 = 2;

/// `lev hook` flags.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    agent: Agent,
}

#[derive(Debug, clap::Subcommand)]
enum Agent {
    /// Answer a Claude Code hook event (PreToolUse, PermissionRequest) read on stdin.
    ///
    /// The call goes through lev's gate: session = the event's session_id,
    /// sandbox mode = its permission_mode, request id = its tool_use_id.
    /// Prints the event's hook output on stdout and exits 0. An event it
    /// cannot read exits 2 with the reason on stderr (Claude Code blocks the
    /// call). When lev cannot be reached, PreToolUse answers "ask" and
    /// PermissionRequest prints nothing, so Claude Code's own prompt takes
    /// over; with --fail-closed both deny.
    ///
    /// Set the hook's own `timeout` in settings.json above --timeout.
    #[command(
        after_help = "settings.json:\n  {\"hooks\": {\"PreToolUse\": [{\"matcher\": \"*\", \"hooks\": [\n    {\"type\": \"command\", \"command\": \"lev hook claude-code --timeout 600\", \"timeout\": 660}]}]}}\n\
See docs/agents/claude-code.md."
    )]
    ClaudeCode(ClaudeCodeArgs),
}

#[derive(Debug, clap::Args)]
struct ClaudeCodeArgs {
    /// How long to wait for a person; then a deny that says so.
    #[arg(long, default_value_t = 600, value_name = "SECS",
          value_parser = clap::value_parser!(u64).range(1..))]
    timeout: u64,
    /// The person the agent acts for, when the token is not bound to one.
    #[arg(long, value_name = "CALLER")]
    caller: Option<String>,
    /// Deny when lev cannot be reached, instead of leaving the decision to
    /// Claude Code's own permission prompt.
    #[arg(long)]
    fail_closed: bool,
    /// Who sees the question, in order: `--route operator,human` lets the
    /// session's operator triage first [default: human].
    #[arg(long, value_delimiter = ',', value_name = "ROUTE")]
    route: Option<Vec<String>>,
    #[command(flatten)]
    trust: crate::trust::TrustArgs,
    #[command(flatten)]
    client: ClientArgs,
}

/// Run `lev hook`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    match args.agent {
        Agent::ClaudeCode(args) => claude_code(args),
    }
}

fn claude_code(args: ClaudeCodeArgs) -> anyhow::Result<ExitCode> {
    let mut bytes = Vec::new();
    if let Err(e) = std::io::stdin()
        .take(MAX_EVENT_BYTES + 1)
        .read_to_end(&mut bytes)
    {
        report::message(&format!("cannot read the hook event on stdin: {e}"));
        return Ok(ExitCode::from(BLOCKING_ERROR));
    }
    if bytes.len() as u64 > MAX_EVENT_BYTES {
        report::message(&format!(
            "malformed hook event: expected at most {MAX_EVENT_BYTES} bytes on stdin, found more"
        ));
        return Ok(ExitCode::from(BLOCKING_ERROR));
    }
    let event = match HookEvent::parse(&bytes) {
        Ok(event) => event,
        Err(e) => {
            report::message(&e.to_string());
            return Ok(ExitCode::from(BLOCKING_ERROR));
        }
    };
    let call = GateCall {
        session: event.session_id.clone(),
        conversation: event.session_id.clone(),
        caller: args.caller.clone(),
        sandbox_mode: event
            .permission_mode
            .clone()
            .unwrap_or_else(|| "default".to_owned()),
        request_id: event.tool_use_id.clone(),
        tool_name: event.tool_name.clone(),
        input: event.tool_input.clone(),
        route: args.route.clone(),
        timeout: Duration::from_secs(args.timeout),
    };
    // Pinned keys that cannot be read are a broken configuration: a
    // blocking error, never a fallback to the server's keys.
    let pinned = match args.trust.pinned() {
        Ok(pinned) => pinned,
        Err(e) => {
            report::message(&format!("{e:#}"));
            return Ok(ExitCode::from(BLOCKING_ERROR));
        }
    };
    let mut verdict = match args.client.client() {
        Ok(client) => {
            runtime()?.block_on(gatekeep::verdict(&client, pinned.as_ref(), &call, |_| {}))
        }
        // No usable URL or token: lev cannot be asked, as if it were down.
        Err(e) => Verdict::Defer {
            reason: format!(
                "lev is not configured, so it did not decide on the call to {}: {}",
                call.tool_name,
                e.to_string().lines().next().unwrap_or_default()
            ),
        },
    };
    if let Verdict::Defer { reason } = &verdict {
        report::message(reason);
        if args.fail_closed {
            verdict = Verdict::Deny {
                message: format!("{reason} (the hook fails closed); the call was not run."),
            };
        }
    }
    if let Some(output) = hook_output(event.hook_event_name, &verdict) {
        let mut stdout = std::io::stdout().lock();
        serde_json::to_writer(&mut stdout, &output)?;
        writeln!(stdout)?;
        stdout.flush()?;
    }
    Ok(ExitCode::SUCCESS)
}
