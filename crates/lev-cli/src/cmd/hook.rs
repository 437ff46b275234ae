//! `lev hook claude-code` and `lev hook codex`: command hooks of coding
//! agents (SPEC section 10, docs/agents/codex.md).
//!
//! Each reads one PreToolUse or PermissionRequest event on stdin, runs the
//! call through lev's gate (a person decides when the policy asks), and
//! prints the event's output. Exit 0 with that JSON (or nothing: no
//! decision); exit 2 with the reason on stderr for an event it cannot
//! answer, which both agents take as a blocking error.
//!
//! Each has one deadline from the start of the process ([`Deadline`]):
//! when it passes undecided, whatever holds lev up, the hook prints its fail
//! behaviour and exits, before the agent's own hook timeout.

use std::process::ExitCode;
use std::time::Duration;

use lev_protocol::claude_code::{HookEvent, Verdict, hook_output};

use crate::connect::{ClientArgs, runtime};
use crate::deadline::Deadline;
use crate::gatekeep::{self, GateCall};
use crate::report;

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
    /// over; with --fail-closed both deny. Claude Code decides by itself on
    /// a hook it had to kill, so the hook has one deadline from its start,
    /// --timeout plus a tenth of it (1 to 15 s): a lev that does not answer
    /// by then (down, hanging, trickling, closing mid-answer) is treated as
    /// unreachable.
    ///
    /// Set the hook's own `timeout` in settings.json above that (the example
    /// gives 60 s more).
    #[command(
        after_help = "settings.json:\n  {\"hooks\": {\"PreToolUse\": [{\"matcher\": \"*\", \"hooks\": [\n    {\"type\": \"command\", \"command\": \"lev hook claude-code --timeout 600\", \"timeout\": 660}]}]}}\n\
See docs/agents/claude-code.md."
    )]
    ClaudeCode(ClaudeCodeArgs),
    /// Answer a Codex hook event (PreToolUse, PermissionRequest) read on stdin.
    ///
    /// The call goes through lev's gate as `lev codex run` gates it
    /// (`codex.exec` {"command","argv","cwd"}, `codex.apply_patch`
    /// {"files","patch"}, MCP tools by name): session = the event's
    /// session_id, request id = its tool_use_id, sandbox mode = --sandbox-mode
    /// (else its permission_mode). Codex acts only on a block or a rewrite:
    /// PreToolUse prints nothing on an approve (Codex runs the call), rewrites
    /// the command on an edit, and blocks on a deny with the feedback as the
    /// reason; PermissionRequest allows (without updatedInput) or denies.
    /// When lev cannot be reached both block (Codex would run a call whose
    /// hook said nothing), unless --fail-open. An event it cannot read exits
    /// 2 with the reason on stderr (Codex blocks the call). Codex runs a
    /// call whose hook it had to kill, so the hook has one deadline from its
    /// start, --timeout plus a tenth of it (1 to 15 s): when it passes
    /// undecided, it blocks (with --fail-open, says nothing) and exits.
    ///
    /// `lev codex install-hooks` registers it, trusted, with Codex's hook
    /// `timeout` 30 s above --timeout.
    #[command(after_help = "See docs/agents/codex.md.")]
    Codex(CodexHookArgs),
}

#[derive(Debug, clap::Args)]
struct CodexHookArgs {
    /// How long to wait for a person; then a deny that says so.
    #[arg(long, default_value_t = 600, value_name = "SECS",
          value_parser = clap::value_parser!(u64).range(1..))]
    timeout: u64,
    /// The person the agent acts for, when the token is not bound to one.
    #[arg(long, value_name = "CALLER")]
    caller: Option<String>,
    /// The sandbox mode the calls run under, for lev's policy [default: the
    /// event's permission_mode].
    #[arg(long, value_name = "MODE")]
    sandbox_mode: Option<String>,
    /// When lev cannot be reached, say nothing instead of blocking: Codex
    /// then runs the call (PreToolUse) or asks its own prompt
    /// (PermissionRequest).
    #[arg(long)]
    fail_open: bool,
    /// Who sees the question, in order: `--route operator,human` lets the
    /// session's operator triage first [default: human].
    #[arg(long, value_delimiter = ',', value_name = "ROUTE")]
    route: Option<Vec<String>>,
    #[command(flatten)]
    trust: crate::trust::TrustArgs,
    #[command(flatten)]
    client: ClientArgs,
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
        Agent::Codex(args) => codex(args),
    }
}

/// The event on stdin, or the exit code of a blocking error (said on stderr).
fn read_event() -> Result<Vec<u8>, ExitCode> {
    lev_client::files::read_stdin(lev_client::files::limit::EVENT).map_err(|e| {
        report::message(&format!("malformed hook event: {e}"));
        ExitCode::from(BLOCKING_ERROR)
    })
}

fn claude_code(args: ClaudeCodeArgs) -> anyhow::Result<ExitCode> {
    let deadline = Deadline::from_start(Duration::from_secs(args.timeout));
    let fail_closed = args.fail_closed;
    // Claude Code decides by itself once its hook timeout passes: the hook
    // answers before, with its fail behaviour, whatever holds it up.
    let missed = format!(
        "{} (the hook's deadline, under Claude Code's hook timeout)",
        deadline.missed()
    );
    answer::arm(
        deadline,
        format!(
            "{missed}{}",
            if fail_closed {
                ", so the call was not run"
            } else {
                "; Claude Code's own permission prompt decides"
            }
        ),
        // Not even the event was read: with --fail-closed a blocking error,
        // else no decision.
        if fail_closed { BLOCKING_ERROR } else { 0 },
    );
    let bytes = match read_event() {
        Ok(bytes) => bytes,
        Err(code) => return answer::exit(code),
    };
    let event = match HookEvent::parse(&bytes) {
        Ok(event) => event,
        Err(e) => {
            report::message(&e.to_string());
            return answer::exit(ExitCode::from(BLOCKING_ERROR));
        }
    };
    answer::at_deadline(hook_output(
        event.hook_event_name,
        &fail_verdict(missed, fail_closed),
    ));
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
        reason: None,
        required_capabilities: Vec::new(),
    };
    // Pinned keys that cannot be read are a broken configuration: a
    // blocking error, never a fallback to the server's keys.
    let pinned = match args.trust.pinned() {
        Ok(pinned) => pinned,
        Err(e) => {
            report::message(&format!("{e:#}"));
            return answer::exit(ExitCode::from(BLOCKING_ERROR));
        }
    };
    let verdict = match args.client.client() {
        Ok(client) => runtime()?.block_on(gatekeep::verdict(
            &client,
            pinned.as_ref(),
            &call,
            deadline,
            |_| {},
        )),
        // No usable URL or token: lev cannot be asked, as if it were down.
        Err(e) => Verdict::Defer {
            reason: format!(
                "lev is not configured, so it did not decide on the call to {}: {}",
                call.tool_name,
                e.to_string().lines().next().unwrap_or_default()
            ),
        },
    };
    let verdict = match verdict {
        Verdict::Defer { reason } => {
            report::message(&reason);
            fail_verdict(reason, fail_closed)
        }
        decided => decided,
    };
    answer::give(hook_output(event.hook_event_name, &verdict).as_ref())?;
    Ok(ExitCode::SUCCESS)
}

/// What Claude Code gets when lev did not decide (`reason`): a deny when
/// failing closed, else the decision left to Claude Code.
fn fail_verdict(reason: String, fail_closed: bool) -> Verdict {
    if fail_closed {
        Verdict::Deny {
            message: format!("{reason} (the hook fails closed); the call was not run."),
        }
    } else {
        Verdict::Defer { reason }
    }
}

/// A hook's output: `output` as one line on stdout.
fn print_json(output: &impl serde::Serialize) -> std::io::Result<()> {
    crate::out::print_json_line(output)
}

/// A hook's answer, written once: by the hook when it has decided, or by its
/// deadline when it has not. The deadline counts from the process's start and
/// covers everything (reading the event, the keys, a server that hangs,
/// trickles or closes mid-answer); an agent acts by itself on a hook it had
/// to kill, so the hook never runs past it.
mod answer {
    use std::process::ExitCode;
    use std::sync::{Mutex, OnceLock, PoisonError};

    use crate::deadline::Deadline;

    /// Whether the answer is out.
    static ANSWERED: Mutex<bool> = Mutex::new(false);
    /// What the deadline writes once the event is read (`None`: nothing).
    static AT_DEADLINE: OnceLock<Option<serde_json::Value>> = OnceLock::new();

    /// Start the deadline: when it passes undecided, `missed` is said on
    /// stderr and the output set by [`at_deadline`] is written (exit 0), or,
    /// before the event was read, the process exits with `unread`.
    pub fn arm(deadline: Deadline, missed: String, unread: u8) {
        std::thread::spawn(move || {
            std::thread::sleep(deadline.left());
            passed(&missed, unread)
        });
    }

    /// What the deadline writes for this event (`None`: nothing).
    pub fn at_deadline(output: Option<impl serde::Serialize>) {
        let value = output.and_then(|o| serde_json::to_value(o).ok());
        let _ = AT_DEADLINE.set(value);
    }

    /// Write `output` (nothing for "no decision") unless the answer is
    /// already out; afterwards nothing more is written.
    pub fn give(output: Option<&impl serde::Serialize>) -> std::io::Result<()> {
        let mut answered = ANSWERED.lock().unwrap_or_else(PoisonError::into_inner);
        if *answered {
            return Ok(());
        }
        *answered = true;
        output.map_or(Ok(()), super::print_json)
    }

    /// End with `code` (an error said on stderr already) unless the deadline
    /// answered first.
    pub fn exit(code: ExitCode) -> anyhow::Result<ExitCode> {
        let answered = ANSWERED.lock().unwrap_or_else(PoisonError::into_inner);
        if *answered {
            drop(answered);
            // The deadline is writing its answer, and ends the process.
            loop {
                std::thread::park();
            }
        }
        // Held until the process ends: the deadline writes nothing now.
        std::mem::forget(answered);
        Ok(code)
    }

    /// At the deadline: its answer unless one is out, then the process ends,
    /// holding the answer so that nothing else is written.
    fn passed(missed: &str, unread: u8) -> ! {
        let mut answered = ANSWERED.lock().unwrap_or_else(PoisonError::into_inner);
        if *answered {
            drop(answered);
            // The hook is writing or has written its answer: it ends itself.
            loop {
                std::thread::park();
            }
        }
        *answered = true;
        crate::report::message(missed);
        let code = match AT_DEADLINE.get() {
            Some(output) => {
                if let Some(output) = output {
                    let _ = super::print_json(output);
                }
                0
            }
            None => unread.into(),
        };
        std::process::exit(code)
    }
}

fn codex(args: CodexHookArgs) -> anyhow::Result<ExitCode> {
    use crate::codex::hooks;
    // Codex runs a call whose hook it had to kill: the hook answers before.
    let deadline = Deadline::from_start(Duration::from_secs(args.timeout));
    let fail_open = args.fail_open;
    let missed = format!(
        "{} (the hook's deadline, under Codex's hook timeout){}",
        deadline.missed(),
        if fail_open {
            "; with --fail-open the hook says nothing and Codex goes on"
        } else {
            ", so the call was not run"
        }
    );
    // Not even the event was read: a blocking error, or nothing (--fail-open).
    answer::arm(
        deadline,
        missed.clone(),
        if fail_open { 0 } else { BLOCKING_ERROR },
    );
    let bytes = match read_event() {
        Ok(bytes) => bytes,
        Err(code) => return answer::exit(code),
    };
    let parsed = hooks::parse_event(&bytes);
    // The shell Codex runs commands with: the argv of a compound command
    // starts with its name, as lev codex run's does.
    let shell = std::env::var("SHELL").unwrap_or_else(|_| "sh".to_owned());
    let (event, call) = match parsed.and_then(|e| hooks::call_of(&e, &shell).map(|c| (e, c))) {
        Ok(both) => both,
        Err(e) => {
            report::message(&e);
            return answer::exit(ExitCode::from(BLOCKING_ERROR));
        }
    };
    answer::at_deadline((!fail_open).then(|| hooks::deny_output(event.name, &missed)));
    let gate_call = codex_gate_call(&args, &event, &call);
    let pinned = match args.trust.pinned() {
        Ok(pinned) => pinned,
        Err(e) => {
            report::message(&format!("{e:#}"));
            return answer::exit(ExitCode::from(BLOCKING_ERROR));
        }
    };
    let verdict = match args.client.client() {
        Ok(client) => runtime()?.block_on(gatekeep::verdict(
            &client,
            pinned.as_ref(),
            &gate_call,
            deadline,
            |_| {},
        )),
        Err(e) => Verdict::Defer {
            reason: format!(
                "lev is not configured, so it did not decide on the call to {}: {}",
                call.tool,
                e.to_string().lines().next().unwrap_or_default()
            ),
        },
    };
    let output = codex_output(verdict, event.name, &call, &shell, fail_open);
    answer::give(output.as_ref())?;
    Ok(ExitCode::SUCCESS)
}

/// The gate call of a Codex hook's event: the session's, in the sandbox
/// mode given (else the event's permission mode).
fn codex_gate_call(
    args: &CodexHookArgs,
    event: &crate::codex::hooks::HookEvent,
    call: &crate::codex::hooks::HookCall,
) -> GateCall {
    GateCall {
        session: event.session_id.clone(),
        conversation: event.session_id.clone(),
        caller: args.caller.clone(),
        sandbox_mode: args
            .sandbox_mode
            .clone()
            .or_else(|| event.permission_mode.clone())
            .unwrap_or_else(|| "default".to_owned()),
        request_id: event.tool_use_id.clone(),
        tool_name: call.tool.clone(),
        input: call.args.clone(),
        route: args.route.clone(),
        timeout: Duration::from_secs(args.timeout),
        reason: call.reason.clone(),
        required_capabilities: call.capabilities.clone(),
    }
}

/// What the hook tells Codex of lev's verdict on `call`: nothing more than
/// an allow for the call as made; an edit rewritten into the call
/// (`PreToolUse`) or told to the model (`PermissionRequest`, which cannot
/// change it); a denial; and when lev did not decide, a denial, or nothing
/// with --fail-open.
fn codex_output(
    verdict: Verdict,
    event: crate::codex::hooks::EventName,
    call: &crate::codex::hooks::HookCall,
    shell: &str,
    fail_open: bool,
) -> Option<serde_json::Value> {
    use crate::codex::hooks;
    match verdict {
        Verdict::Allow(allowed)
            if allowed.updated_input == serde_json::Value::Object(call.args.clone()) =>
        {
            hooks::allow_output(event)
        }
        Verdict::Allow(allowed) => Some(match event {
            hooks::EventName::PreToolUse => {
                match hooks::rewrite(call, &allowed.updated_input, shell) {
                    Ok(input) => hooks::rewrite_output(input),
                    Err(why) => hooks::deny_output(
                        event,
                        &format!(
                            "The approver in lev edited the call to {}, but the edit cannot be handed to Codex ({why}); it was not run.",
                            call.tool
                        ),
                    ),
                }
            }
            // PermissionRequest cannot change the call: the model is told
            // what was approved instead, and asks again.
            hooks::EventName::PermissionRequest => hooks::deny_output(
                event,
                &format!(
                    "The approver in lev changed this call before approving it, so it was not run as written. Make this call instead: {}",
                    allowed.updated_input
                ),
            ),
        }),
        Verdict::Deny { message } => Some(hooks::deny_output(event, &message)),
        Verdict::Defer { reason } => {
            if fail_open {
                report::message(&format!(
                    "{reason}; with --fail-open the hook says nothing and Codex goes on"
                ));
            } else {
                report::message(&reason);
            }
            (!fail_open).then(|| {
                hooks::deny_output(
                    event,
                    &format!("{reason} (the hook fails closed); the call was not run."),
                )
            })
        }
    }
}
