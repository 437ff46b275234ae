//! `lev run -- CMD ARGS...`: ask for approval through the gate, verify the
//! signed decision, run the approved command (SPEC section 7).
//!
//! The gate sees tool `shell` with args `{"argv":[...],"cwd":"..."}` and the
//! capability `proc-exec`. The decision is verified against the keys given
//! with `--key` (or `LEV_TRUSTED_KEYS`), else against those the server
//! published when the run started (pinned for the run); it must authorize
//! exactly this call in this session, and its nonce is spent before anything
//! runs. What runs is the effective argv: the person's edit
//! when there is one. It takes lev's place (`exec`), so a signal for `lev
//! run` reaches the command and nothing is left running without its parent.
//!
//! Exit codes, kept out of the command's way like `timeout` and the shells:
//! the command's own code when it ran (128 + N for a signal); 126 denied; 124
//! nobody decided in time (or the question was cancelled); 127 the approved
//! program does not exist; 130 interrupted while waiting (Ctrl-C, SIGTERM,
//! SIGHUP: the question is cancelled); 1 any other error.

use std::io::Write as _;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context as _, bail};
use lev_client::gate::{ApprovedCall, GateOutcome, Gatekeeper, RefusalKind, Submitted, ToolCall};
use serde_json::{Value, json};

use crate::connect::{ClientArgs, runtime};
use crate::deadline::Deadline;
use crate::term;
use crate::trust::TrustArgs;

/// Denied by a person or a rule.
const DENIED: u8 = 126;
/// Nobody decided in time, or the question was cancelled.
const TIMED_OUT: u8 = 124;
/// The approved program was not found.
const NOT_FOUND: u8 = 127;
/// Interrupted (Ctrl-C) while waiting.
const INTERRUPTED: u8 = 130;

/// Ask approval for a command through the gate, verify it, then run it.
///
/// The command runs with stdin, stdout and stderr passed through and lev
/// exits with its code. lev's own messages go to stderr. Exit 126 when
/// denied (the feedback on stderr), 124 when nobody decided in time.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Trust: without --key (or LEV_TRUSTED_KEYS) the signing keys come from the server lev run talks to, so whoever answers at --url can approve anything; pin your server's keys (curl URL/v1/keys > jwks.json; lev run --key jwks.json) to refuse approvals signed by any other key.\n\nExamples:\n  lev run -- cargo publish\n  lev run --key jwks.json --timeout 300 -- git push origin main\n  lev run --session deploy-42 --sandbox-mode danger-full-access -- ./deploy.sh"
)]
pub struct Args {
    /// The session, also the conversation; a session grant holds within it
    /// [default: cli-<parent process id>: one shell, one session].
    #[arg(long, value_name = "SESSION")]
    session: Option<String>,
    /// The sandbox mode the command runs under (the policy says what it grants).
    #[arg(long, default_value = "workspace-write", value_name = "MODE")]
    sandbox_mode: String,
    /// Give up after this many seconds without a decision (exit 124); a
    /// server that does not answer (hangs, trickles) counts as no decision
    /// by then and a tenth of it (1 to 15 s).
    #[arg(long, value_name = "SECS", value_parser = clap::value_parser!(u64).range(1..))]
    timeout: Option<u64>,
    /// The command and its arguments.
    #[arg(
        required = true,
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "CMD"
    )]
    command: Vec<String>,
    #[command(flatten)]
    trust: TrustArgs,
    #[command(flatten)]
    client: ClientArgs,
}

/// Run `lev run`.
///
/// # Errors
/// No server, a bad token, a decision that does not verify or authorize this
/// call, a spent nonce, args that are not a command.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let cwd = std::env::current_dir().context("reading the current directory")?;
    let cwd = cwd
        .to_str()
        .context("the current directory's path is not UTF-8; lev run needs it as JSON text")?
        .to_owned();
    let args_json = serde_json::to_string(&json!({"argv": args.command, "cwd": cwd}))?;
    let session = match &args.session {
        Some(s) => s.clone(),
        None => format!("cli-{}", parent_pid()),
    };
    let nonce = lev_approval::new_nonce().context("making a request id")?;
    let call = ToolCall {
        conversation_id: session.clone(),
        sandbox_mode: args.sandbox_mode.clone(),
        required_capabilities: vec!["proc-exec".to_owned()],
        timeout: args.timeout.map(Duration::from_secs),
        ..ToolCall::new(session, format!("run-{nonce}"), "shell", args_json)
    };
    let pinned = args.trust.pinned()?;
    let client = args.client.client()?;
    let rt = runtime()?;
    // With --timeout, one deadline for all of it from the start: a lev that
    // hangs or trickles is "nobody decided in time", not a wait for ever.
    let deadline = args
        .timeout
        .map(|t| Deadline::from_start(Duration::from_secs(t)));
    let decided = async {
        let gatekeeper = match pinned {
            Some(keys) => Gatekeeper::new(client, keys),
            None => Gatekeeper::pinned(client)
                .await
                .context("fetching the server's keys")?,
        };
        let submitted = gatekeeper.submit(&call).await.context("asking the gate")?;
        match submitted.interaction_id() {
            Some(id) => wait(&gatekeeper, &call, submitted.clone(), id.to_owned()).await,
            None => gatekeeper
                .settle(&call, submitted)
                .await
                .map(Some)
                .context("checking the decision"),
        }
    };
    let outcome = match deadline {
        Some(deadline) => match rt.block_on(deadline.run(decided)) {
            Some(outcome) => outcome?,
            None => {
                say(&format!(
                    "{}; the command was not run (the question, if lev holds one, ends at --timeout)",
                    deadline.missed()
                ));
                return Ok(ExitCode::from(TIMED_OUT));
            }
        },
        None => rt.block_on(decided)?,
    };
    let Some(outcome) = outcome else {
        return Ok(ExitCode::from(INTERRUPTED));
    };
    match outcome {
        GateOutcome::Run(approved) => execute(&approved, &cwd),
        GateOutcome::Refused(refusal) => {
            say(&refusal.text);
            Ok(ExitCode::from(match refusal.kind {
                RefusalKind::Policy | RefusalKind::Denied => DENIED,
                RefusalKind::Expired | RefusalKind::Cancelled | RefusalKind::TimedOut => TIMED_OUT,
            }))
        }
    }
}

#[cfg(unix)]
fn parent_pid() -> u32 {
    std::os::unix::process::parent_id()
}

#[cfg(not(unix))]
fn parent_pid() -> u32 {
    std::process::id()
}

/// Each line of `text` on stderr after `lev: `, control characters made visible.
fn say(text: &str) {
    let mut err = std::io::stderr().lock();
    for line in text.lines() {
        let _ = writeln!(err, "lev: {}", term::one_line(line));
    }
}

/// Wait for a person with a spinner on a terminal (one line otherwise);
/// `None` when interrupted, after cancelling the question.
async fn wait(
    gatekeeper: &Gatekeeper,
    call: &ToolCall,
    submitted: Submitted,
    id: String,
) -> anyhow::Result<Option<GateOutcome>> {
    let shown_id = term::one_line(&id);
    let hint = format!("lev respond {shown_id} --approve | --deny");
    let result = term::wait_with_spinner(
        &format!("approval of {shown_id}"),
        &hint,
        gatekeeper.settle(call, submitted),
    )
    .await;
    match result {
        Some(outcome) => {
            Ok(Some(outcome.with_context(|| {
                format!("checking the decision on {shown_id}")
            })?))
        }
        None => {
            // Bounded: a lev that hangs does not keep an interrupted run alive.
            let cancel = gatekeeper.client().cancel(&id);
            let _ = tokio::time::timeout(Duration::from_secs(5), cancel).await;
            eprintln!("lev: interrupted; cancelled {shown_id}");
            Ok(None)
        }
    }
}

/// Run the approved command with stdio passed through; its exit code.
fn execute(approved: &ApprovedCall, default_cwd: &str) -> anyhow::Result<ExitCode> {
    let args = approved.args()?;
    let (argv, cwd) = command_of(&args, default_cwd)?;
    if approved.was_edited() {
        say(&format!(
            "the approver edited the command; running: {}",
            argv.join(" ")
        ));
    }
    if let Some(context) = approved.injected_context() {
        say(&format!("note from the approver: {context}"));
    }
    let Some((program, rest)) = argv.split_first() else {
        bail!("the approved args hold an empty argv");
    };
    let mut command = std::process::Command::new(program);
    command.args(rest).current_dir(&cwd);
    // The command takes this process's place: nothing of lev is left to do,
    // and a signal for `lev run` (SIGTERM, SIGHUP) reaches the command
    // itself rather than leaving it running without its parent.
    #[cfg(unix)]
    let failed = {
        use std::os::unix::process::CommandExt as _;
        command.exec()
    };
    #[cfg(not(unix))]
    let failed = match command.status() {
        Ok(status) => return Ok(ExitCode::from(exit_code(status))),
        Err(e) => e,
    };
    if failed.kind() == std::io::ErrorKind::NotFound {
        say(&format!("{program}: command not found (in {cwd})"));
        return Ok(ExitCode::from(NOT_FOUND));
    }
    Err(failed).with_context(|| format!("running {program}"))
}

/// The argv and working directory of `{"argv": [...], "cwd": "..."}`; a
/// missing `cwd` (an edit may leave it out) is the directory lev runs in.
fn command_of(args: &Value, default_cwd: &str) -> anyhow::Result<(Vec<String>, String)> {
    let argv = args
        .get("argv")
        .and_then(Value::as_array)
        .context("expected the approved args to hold \"argv\": an array of strings")?
        .iter()
        .map(|a| a.as_str().map(str::to_owned))
        .collect::<Option<Vec<_>>>()
        .context("expected \"argv\" to hold strings only")?;
    if argv.is_empty() {
        bail!("expected \"argv\" to name a command, found an empty array");
    }
    let cwd = match args.get("cwd") {
        None | Some(Value::Null) => default_cwd.to_owned(),
        Some(Value::String(s)) => s.clone(),
        Some(other) => bail!("expected \"cwd\" to be a string, found {other}"),
    };
    Ok((argv, cwd))
}

#[cfg(not(unix))]
fn exit_code(status: std::process::ExitStatus) -> u8 {
    status
        .code()
        .map_or(1, |code| u8::try_from(code & 0xff).unwrap_or(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_from_args() {
        let (argv, cwd) =
            command_of(&json!({"argv": ["echo", "hi"], "cwd": "/tmp"}), "/x").unwrap();
        assert_eq!(argv, ["echo", "hi"]);
        assert_eq!(cwd, "/tmp");
        let (_, cwd) = command_of(&json!({"argv": ["ls"]}), "/x").unwrap();
        assert_eq!(cwd, "/x");
        for bad in [
            json!({"argv": []}),
            json!({"argv": "ls"}),
            json!({"argv": [1]}),
            json!({"cwd": "/"}),
            json!({"argv": ["ls"], "cwd": 3}),
        ] {
            assert!(command_of(&bad, "/x").is_err(), "{bad}");
        }
    }
}
