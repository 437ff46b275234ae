//! `lev codex`: OpenAI's Codex CLI, with every approval it asks for decided
//! in lev (signed, verified, audited). See docs/agents/codex.md.
//!
//! - `run`: lev starts `codex app-server` on stdio, opens a thread with the
//!   approval policy `untrusted`, runs one turn and answers every approval
//!   request through lev's gate ([`crate::codex::bridge`]).
//! - `attach`: the same bridge on the shared app-server socket of Codex's
//!   terminal UI; the person may still answer in the UI.
//! - `install-hooks`: register `lev hook codex` in Codex's `config.toml`,
//!   with the trust hashes Codex requires.

use std::collections::{HashSet, VecDeque};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context as _, anyhow, bail};
use serde_json::{Value, json};
use tokio::io::AsyncBufReadExt as _;

use crate::codex::bridge::{Bridge, Event, Settings, say};
use crate::codex::connection::{self, Read};
use crate::codex::hooks::{self, EventName};
use crate::codex::rpc::{self, CallError, Peer};
use crate::codex::shell;
use crate::connect::{ClientArgs, runtime};
use crate::gatekeep;
use crate::report;
use crate::trust::TrustArgs;

/// Exit code of a usage error (clap's own too).
const USAGE: u8 = 2;

/// `lev codex` flags.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, clap::Subcommand)]
enum Command {
    /// Run Codex on PROMPT; every approval it asks for is decided in lev.
    ///
    /// Starts `codex app-server` (the `codex` on PATH, or --codex) on stdio,
    /// opens a thread with the approval policy `untrusted` (or
    /// --approval-policy) and the chosen sandbox, runs one turn and streams it to the terminal (the agent's
    /// messages on stdout, its commands and lev's decisions on stderr).
    /// Each approval request goes through lev's gate as a tool call:
    /// `codex.exec` {"command","argv","cwd"}, `codex.apply_patch`
    /// {"files","changes"} (with the diff), MCP tools by name; session = the
    /// Codex thread, request id = the item id, reason = the model's
    /// justification. The signed decision is verified (pinned keys, the
    /// exact call, nonce) before lev answers Codex.
    ///
    /// Exit 0 when the turn completes; 1 when it fails or is cancelled
    /// (a question cancelled or not decided in time cancels the turn);
    /// 2 for usage errors.
    #[command(
        after_help = "Examples:\n  lev codex run \"fix the failing test\"\n  lev codex run --sandbox read-only --timeout 300 \"explain src/main.rs\"\n  lev codex run \"bump the version\" -- -c model='\"gpt-5.5\"'\n\nSee docs/agents/codex.md."
    )]
    Run(RunArgs),
    /// Answer the approvals of Codex's terminal UI from lev.
    ///
    /// Connects as a second client to the UI's shared app-server
    /// ($CODEX_HOME/app-server-control/app-server-control.sock), follows
    /// every thread it has loaded (pending approvals are replayed to lev),
    /// and decides each approval request in lev, as `lev codex run` does.
    /// The person may still answer in the UI: the first answer wins, and
    /// lev records what the UI decided on its own question (answered, with
    /// an admin token; else cancelled). Runs until
    /// Ctrl-C (pending questions are cancelled) or the app-server closes.
    #[command(
        after_help = "Start Codex's terminal UI (`codex`) first, then in another terminal:\n  lev codex attach\n\nSee docs/agents/codex.md."
    )]
    Attach(AttachArgs),
    /// Register `lev hook codex` in Codex's config.toml, trusted.
    ///
    /// Appends (or replaces) a block of lev's in $CODEX_HOME/config.toml
    /// (default ~/.codex/config.toml): a PreToolUse hook (and, with --events,
    /// a PermissionRequest hook) running `lev hook codex`, and the
    /// [hooks.state] trust hashes Codex requires before it runs a hook.
    /// Prints what it wrote. The hook reads LEV_URL and LEV_TOKEN from the
    /// environment Codex runs in.
    InstallHooks(InstallArgs),
}

/// The sandbox Codex runs commands in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Sandbox {
    /// Read files only.
    ReadOnly,
    /// Write inside the workspace.
    WorkspaceWrite,
    /// No sandbox.
    DangerFullAccess,
}

impl Sandbox {
    fn as_str(self) -> &'static str {
        match self {
            Self::ReadOnly => "read-only",
            Self::WorkspaceWrite => "workspace-write",
            Self::DangerFullAccess => "danger-full-access",
        }
    }
}

/// lev's sandbox mode name for Codex's sandbox policy type (`workspaceWrite`).
fn sandbox_name(policy_type: &str) -> String {
    match policy_type {
        "readOnly" => "read-only".to_owned(),
        "workspaceWrite" => "workspace-write".to_owned(),
        "dangerFullAccess" => "danger-full-access".to_owned(),
        other => other.to_owned(),
    }
}

/// When Codex asks for approval.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Policy {
    /// Every command that is not known to be read-only, and every file change.
    Untrusted,
    /// Only what the model asks to run outside the sandbox.
    OnRequest,
}

impl Policy {
    fn as_str(self) -> &'static str {
        match self {
            Self::Untrusted => "untrusted",
            Self::OnRequest => "on-request",
        }
    }
}

/// How calls are decided: shared by `run` and `attach`.
#[derive(Debug, Clone, clap::Args)]
struct Decide {
    /// How long a person has to decide on each call; past it the question
    /// expires and lev cancels Codex's turn.
    #[arg(long, default_value_t = 600, value_name = "SECS",
          value_parser = clap::value_parser!(u64).range(1..))]
    timeout: u64,
    /// The person the agent acts for, when the token is not bound to one.
    #[arg(long, value_name = "CALLER")]
    caller: Option<String>,
    /// Who sees each question, in order: `--route operator,human` lets the
    /// session's operator triage first [default: human].
    #[arg(long, value_delimiter = ',', value_name = "ROUTE")]
    route: Option<Vec<String>>,
    /// On an "always" approval of a command, also give Codex the prefix rule
    /// it proposes (its permanent execpolicy amendment), so Codex stops
    /// asking about matching commands in every later session. Off by
    /// default: Codex then runs those without asking lev.
    #[arg(long)]
    codex_rules: bool,
    #[command(flatten)]
    trust: TrustArgs,
    #[command(flatten)]
    client: ClientArgs,
}

impl Decide {
    fn settings(&self, progress: bool, default_sandbox: &str) -> Settings {
        Settings {
            caller: self.caller.clone(),
            route: self.route.clone(),
            timeout: Duration::from_secs(self.timeout),
            codex_rules: self.codex_rules,
            progress,
            default_sandbox: default_sandbox.to_owned(),
        }
    }
}

#[derive(Debug, clap::Args)]
struct RunArgs {
    /// What Codex should do.
    #[arg(value_name = "PROMPT")]
    prompt: String,
    /// The Codex binary [default: `codex` on PATH].
    #[arg(long, value_name = "PATH")]
    codex: Option<PathBuf>,
    /// The sandbox Codex runs commands in.
    #[arg(
        long,
        value_enum,
        default_value = "workspace-write",
        value_name = "MODE"
    )]
    sandbox: Sandbox,
    /// When Codex asks: `untrusted` (every command not known read-only, every
    /// file change) or `on-request` (only what the model asks to run outside
    /// the sandbox; refused with danger-full-access, where nothing would ask).
    #[arg(long, value_enum, default_value = "untrusted", value_name = "POLICY")]
    approval_policy: Policy,
    /// The workspace: the thread's working directory [default: the current
    /// directory].
    #[arg(short = 'C', long = "cd", value_name = "DIR")]
    cd: Option<PathBuf>,
    #[command(flatten)]
    decide: Decide,
    /// Options for `codex app-server` (such as `-c key=value`), after `--`.
    #[arg(last = true, value_name = "CODEX OPTIONS")]
    codex_args: Vec<String>,
}

#[derive(Debug, clap::Args)]
struct AttachArgs {
    /// Codex's home, whose app-server-control/app-server-control.sock the
    /// terminal UI listens on [default: $CODEX_HOME, else ~/.codex].
    #[arg(long, value_name = "DIR")]
    codex_home: Option<PathBuf>,
    /// The app-server socket itself, instead of the one under --codex-home.
    #[arg(long, value_name = "PATH", conflicts_with = "codex_home")]
    socket: Option<PathBuf>,
    #[command(flatten)]
    decide: Decide,
}

/// A hook event `install-hooks` registers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum HookEventArg {
    /// Before every tool call (the only one `codex exec` runs through).
    PreToolUse,
    /// When Codex would ask for approval (interactive Codex, app-server).
    PermissionRequest,
}

#[derive(Debug, clap::Args)]
struct InstallArgs {
    /// Codex's home, whose config.toml gets the hooks [default:
    /// $CODEX_HOME, else ~/.codex].
    #[arg(long, value_name = "DIR")]
    codex_home: Option<PathBuf>,
    /// The events to register `lev hook codex` under. Both at once ask lev
    /// twice about a call Codex would prompt for (PreToolUse, then
    /// PermissionRequest).
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "pre-tool-use",
        value_name = "EVENTS"
    )]
    events: Vec<HookEventArg>,
    /// lev's --timeout for each call; Codex's own timeout for the hook is
    /// set 30 s above it (Codex runs the command when a hook times out).
    #[arg(long, default_value_t = 600, value_name = "SECS",
          value_parser = clap::value_parser!(u64).range(1..))]
    timeout: u64,
    /// The lev binary the hook runs [default: this one].
    #[arg(long, value_name = "PATH")]
    lev: Option<PathBuf>,
    /// Put --url URL in the hook's command (else it reads LEV_URL).
    #[arg(long, value_name = "URL")]
    url: Option<String>,
    /// Put --sandbox-mode MODE in the hook's command.
    #[arg(long, value_name = "MODE")]
    sandbox_mode: Option<String>,
    /// Put --caller CALLER in the hook's command.
    #[arg(long, value_name = "CALLER")]
    caller: Option<String>,
    /// Put --fail-open in the hook's command: when lev cannot be reached,
    /// Codex goes on as if there were no hook (PreToolUse: the command runs).
    #[arg(long)]
    fail_open: bool,
    /// Print what would be written, and write nothing.
    #[arg(long)]
    dry_run: bool,
}

/// Run `lev codex`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    match args.command {
        Command::Run(args) => codex_run(args),
        Command::Attach(args) => attach(args),
        Command::InstallHooks(args) => install_hooks(&args),
    }
}

/// `$CODEX_HOME`, else `~/.codex`.
fn codex_home(given: Option<&Path>) -> anyhow::Result<PathBuf> {
    if let Some(dir) = given {
        return Ok(dir.to_path_buf());
    }
    if let Some(dir) = std::env::var_os("CODEX_HOME").filter(|d| !d.is_empty()) {
        return Ok(PathBuf::from(dir));
    }
    match std::env::var_os("HOME").filter(|h| !h.is_empty()) {
        Some(home) => Ok(PathBuf::from(home).join(".codex")),
        None => bail!(
            "no Codex home: expected CODEX_HOME or HOME to be set, found neither{}give one with --codex-home",
            report::HINT
        ),
    }
}

fn usage(message: &str) -> ExitCode {
    report::message(message);
    ExitCode::from(USAGE)
}

fn codex_run(args: RunArgs) -> anyhow::Result<ExitCode> {
    if args.approval_policy == Policy::OnRequest && args.sandbox == Sandbox::DangerFullAccess {
        return Ok(usage(&format!(
            "refusing --approval-policy on-request with --sandbox danger-full-access: Codex would ask for nothing, so lev would decide nothing{}use --approval-policy untrusted (the default), or a sandbox",
            report::HINT
        )));
    }
    if let Some(flag) = args
        .codex_args
        .iter()
        .find(|a| matches!(a.as_str(), "--listen" | "--stdio") || a.starts_with("--listen="))
    {
        return Ok(usage(&format!(
            "refusing the Codex option {flag}: lev runs `codex app-server` on stdio itself"
        )));
    }
    let cwd = match &args.cd {
        Some(dir) => {
            std::fs::canonicalize(dir).with_context(|| format!("--cd {}", dir.display()))?
        }
        None => std::env::current_dir().context("reading the current directory")?,
    };
    let cwd = cwd
        .to_str()
        .context("the workspace's path is not UTF-8; Codex's protocol needs it as JSON text")?
        .to_owned();
    let pinned = args.decide.trust.pinned()?;
    let client = args.decide.client.client()?;
    runtime()?.block_on(async move {
        let keys = match pinned {
            Some(keys) => keys,
            None => gatekeep::pinned_keys(&client)
                .await
                .map_err(|e| anyhow!("fetching the server's keys: {e}"))?,
        };
        drive_run(&args, &cwd, client, keys).await
    })
}

/// The last lines a child printed on stderr.
#[derive(Debug, Clone, Default)]
struct Tail(Arc<Mutex<VecDeque<String>>>);

impl Tail {
    const LINES: usize = 40;

    fn follow(&self, stderr: tokio::process::ChildStderr) {
        let tail = self.clone();
        tokio::spawn(async move {
            let mut lines = tokio::io::BufReader::new(stderr).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                if let Ok(mut t) = tail.0.lock() {
                    if t.len() == Self::LINES {
                        t.pop_front();
                    }
                    t.push_back(line);
                }
            }
        });
    }

    fn text(&self) -> String {
        self.0
            .lock()
            .map(|t| t.iter().cloned().collect::<Vec<_>>().join("\n"))
            .unwrap_or_default()
    }
}

async fn drive_run(
    args: &RunArgs,
    cwd: &str,
    client: lev_client::Client,
    keys: lev_approval::TrustedKeys,
) -> anyhow::Result<ExitCode> {
    let program = args.codex.clone().unwrap_or_else(|| PathBuf::from("codex"));
    let what = format!("{} app-server", program.display());
    let mut command = tokio::process::Command::new(&program);
    command
        .arg("app-server")
        .args(&args.codex_args)
        .current_dir(cwd)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    // Its own process group: Ctrl-C reaches lev, which interrupts the turn
    // and cancels its questions, rather than killing Codex mid-call.
    #[cfg(unix)]
    command.process_group(0);
    let mut child = command.spawn().map_err(|e| {
        if e.kind() == std::io::ErrorKind::NotFound {
            match &args.codex {
                None => anyhow!(
                    "cannot start Codex: no `codex` on PATH{}install it (npm install -g @openai/codex) or give its path with --codex",
                    report::HINT
                ),
                Some(path) => anyhow!("cannot start Codex: --codex {}: no such file", path.display()),
            }
        } else {
            anyhow!("cannot start Codex ({what}): {e}")
        }
    })?;
    let (Some(stdin), Some(stdout), Some(stderr)) =
        (child.stdin.take(), child.stdout.take(), child.stderr.take())
    else {
        bail!("starting {what}: its stdio was not piped");
    };
    let tail = Tail::default();
    tail.follow(stderr);
    let (peer, outgoing) = Peer::new();
    let mut reads = connection::spawn_reader(rpc::stdio(stdout, stdin, outgoing), peer.clone());
    let result = session(args, cwd, &peer, &mut reads, &what, &tail, client, keys).await;
    peer.hang_up();
    if tokio::time::timeout(Duration::from_secs(5), child.wait())
        .await
        .is_err()
    {
        let _ = child.start_kill();
        let _ = child.wait().await;
    }
    result
}

/// Handshake, thread, turn, and the turn's approvals until it ends.
#[allow(clippy::too_many_arguments)]
async fn session(
    args: &RunArgs,
    cwd: &str,
    peer: &Peer,
    reads: &mut tokio::sync::mpsc::UnboundedReceiver<Read>,
    what: &str,
    tail: &Tail,
    client: lev_client::Client,
    keys: lev_approval::TrustedKeys,
) -> anyhow::Result<ExitCode> {
    let version = connection::initialize(peer, reads, what, || tail.text()).await?;
    let sandbox = args.sandbox.as_str();
    let policy = args.approval_policy.as_str();
    let started = start_thread(peer, cwd, sandbox, policy).await?;
    let Some(thread) = started
        .pointer("/thread/id")
        .and_then(Value::as_str)
        .map(str::to_owned)
    else {
        bail!("Codex started a thread without an id: {started}");
    };
    let model = started.get("model").and_then(Value::as_str).unwrap_or("?");
    say(&format!(
        "Codex {version}, thread {thread} (model {model}, sandbox {sandbox}, approvals {policy}): every approval goes to lev"
    ));
    let bridge = Bridge::new(
        peer.clone(),
        client,
        keys,
        args.decide
            .settings(true, &crate::codex::bridge::gated_sandbox(sandbox, policy)),
    );
    bridge.add_thread(&thread, sandbox, policy);
    let turn = peer
        .request(
            "turn/start",
            json!({"threadId": thread, "input": [{"type": "text", "text": args.prompt}]}),
        )
        .await
        .context("starting the turn")?;
    let Some(turn) = turn
        .pointer("/turn/id")
        .and_then(Value::as_str)
        .map(str::to_owned)
    else {
        bail!("Codex started a turn without an id: {turn}");
    };
    let ended = until_turn_ends(peer, reads, &bridge, (&thread, &turn), what, tail).await;
    bridge.shutdown().await;
    let (status, error) = ended?;
    let _ = std::io::stdout().flush();
    if status == "completed" {
        return Ok(ExitCode::SUCCESS);
    }
    let mut why = match (status.as_str(), error) {
        (_, Some(error)) => format!("the turn {status}: {}", crate::term::one_line(&error)),
        ("interrupted", None) => "the turn was cancelled".to_owned(),
        (other, None) => format!("the turn ended {other}"),
    };
    if let Some(unreachable) = bridge.unreachable() {
        why = format!("{why}: {unreachable}");
    }
    report::message(&why);
    Ok(ExitCode::from(crate::exit::ERROR))
}

/// Start a Codex thread in `cwd` with `sandbox` and approval `policy`,
/// approvals reviewed by the user; refused when Codex starts another kind
/// (managed configuration may override what was asked): lev runs only a
/// thread that asks it. What `thread/start` answered.
async fn start_thread(
    peer: &Peer,
    cwd: &str,
    sandbox: &str,
    policy: &str,
) -> anyhow::Result<Value> {
    let started = peer
        .request(
            "thread/start",
            json!({
                "cwd": cwd,
                "approvalPolicy": policy,
                "approvalsReviewer": "user",
                "sandbox": sandbox,
            }),
        )
        .await
        .context("starting a Codex thread")?;
    let got_policy = started
        .get("approvalPolicy")
        .cloned()
        .unwrap_or(Value::Null);
    let got_reviewer = started
        .get("approvalsReviewer")
        .cloned()
        .unwrap_or(Value::Null);
    let got_sandbox = started
        .pointer("/sandbox/type")
        .and_then(Value::as_str)
        .map(sandbox_name);
    if got_policy != json!(policy)
        || got_reviewer != json!("user")
        || got_sandbox.as_deref() != Some(sandbox)
    {
        bail!(
            "Codex did not start the thread lev asked for: expected approval policy {policy:?}, approvals reviewed by the user, sandbox {sandbox:?}; found {got_policy}, {got_reviewer}, {}; lev will not run a thread whose approvals it does not see",
            got_sandbox.unwrap_or_else(|| "none".into())
        );
    }
    Ok(started)
}

/// Answer Codex's requests until `turn` of `thread` completes: its status
/// and error. Ctrl-C interrupts the turn (once); Codex closing first is an
/// error, with what it printed on stderr.
async fn until_turn_ends(
    peer: &Peer,
    reads: &mut tokio::sync::mpsc::UnboundedReceiver<Read>,
    bridge: &Bridge,
    (thread, turn): (&str, &str),
    what: &str,
    tail: &Tail,
) -> anyhow::Result<(String, Option<String>)> {
    let mut interrupted = false;
    loop {
        tokio::select! {
            read = reads.recv() => match read.unwrap_or(Read::Closed(None)) {
                Read::Message(message) => {
                    if let Event::TurnCompleted { thread: t, turn: u, status, error } = bridge.handle(message)
                        && t == thread && u == turn
                    {
                        break Ok((status, error));
                    }
                }
                Read::Garbage { text, why } => say(&format!("ignored a line from Codex ({why}): {text}")),
                Read::Closed(e) => break Err(anyhow!(
                    "{what} closed before the turn ended{}{}",
                    e.map(|e| format!(" ({e})")).unwrap_or_default(),
                    match tail.text() {
                        t if t.trim().is_empty() => String::new(),
                        t => format!("; it printed on stderr:\n{}", crate::term::multi_line(&t)),
                    }
                )),
            },
            _ = tokio::signal::ctrl_c(), if !interrupted => {
                interrupted = true;
                say("interrupting the turn (Ctrl-C)");
                bridge.interrupting();
                let peer = peer.clone();
                let params = json!({"threadId": thread, "turnId": turn});
                tokio::spawn(async move { let _ = peer.request("turn/interrupt", params).await; });
            }
        }
    }
}

fn attach(args: AttachArgs) -> anyhow::Result<ExitCode> {
    let socket = match &args.socket {
        Some(socket) => socket.clone(),
        None => codex_home(args.codex_home.as_deref())?
            .join("app-server-control")
            .join("app-server-control.sock"),
    };
    if !socket.exists() {
        bail!(
            "no Codex app-server socket at {}{}start Codex's terminal UI first (`codex`): it starts the shared app-server that lev attaches to",
            socket.display(),
            report::HINT
        );
    }
    let pinned = args.decide.trust.pinned()?;
    let client = args.decide.client.client()?;
    runtime()?.block_on(async move {
        let keys = match pinned {
            Some(keys) => keys,
            None => gatekeep::pinned_keys(&client)
                .await
                .map_err(|e| anyhow!("fetching the server's keys: {e}"))?,
        };
        let (peer, outgoing) = Peer::new();
        let messages = connect_socket(&socket, outgoing).await?;
        let mut reads = connection::spawn_reader(messages, peer.clone());
        let what = format!("the app-server at {}", socket.display());
        let version = connection::initialize(&peer, &mut reads, &what, String::new).await?;
        let bridge = Bridge::new(
            peer.clone(),
            client,
            keys,
            args.decide.settings(false, "unknown"),
        );
        say(&format!(
            "attached to Codex {version} at {}: its approvals are decided in lev (Ctrl-C to stop)",
            socket.display()
        ));
        let closed = follow_threads(&peer, &bridge, &mut reads).await?;
        if let Some(e) = closed {
            say(&format!("the app-server closed the connection ({e})"));
        }
        bridge.shutdown().await;
        peer.hang_up();
        Ok(ExitCode::SUCCESS)
    })
}

/// Connect to the terminal UI's app-server socket. A UI that is starting has
/// the socket before it listens: tried for a few seconds.
async fn connect_socket(
    socket: &Path,
    mut outgoing: tokio::sync::mpsc::UnboundedReceiver<rpc::Outgoing>,
) -> anyhow::Result<rpc::Messages> {
    let started = tokio::time::Instant::now();
    loop {
        // Codex's socket path is a symlink to a short one under /tmp (a
        // Unix socket's path is at most about 100 bytes): connect there.
        let target = std::fs::canonicalize(socket).unwrap_or_else(|_| socket.to_owned());
        match rpc::unix_websocket(&target, outgoing).await {
            Ok(messages) => return Ok(messages),
            Err((_, back)) if started.elapsed() < Duration::from_secs(10) => {
                outgoing = back;
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
            Err((e, _)) => {
                return Err(e.context(format!(
                    "attaching to Codex's app-server at {}",
                    socket.display()
                )));
            }
        }
    }
}

/// Follow every thread the app-server has loaded (seen in its messages, or
/// listed every half second), each resumed once, until the connection
/// closes (why, when it says) or Ctrl-C or SIGTERM stops lev (`None`).
async fn follow_threads(
    peer: &Peer,
    bridge: &Bridge,
    reads: &mut tokio::sync::mpsc::UnboundedReceiver<Read>,
) -> anyhow::Result<Option<String>> {
    let resuming: Arc<Mutex<HashSet<String>>> = Arc::default();
    let follow = |thread: String| {
        if bridge.follows(&thread) {
            return;
        }
        if let Ok(mut r) = resuming.lock()
            && !r.insert(thread.clone())
        {
            return;
        }
        let (peer, bridge, resuming) = (peer.clone(), bridge.clone(), resuming.clone());
        tokio::spawn(async move {
            resume(&peer, &bridge, &thread).await;
            if let Ok(mut r) = resuming.lock() {
                r.remove(&thread);
            }
        });
    };
    let mut poll = tokio::time::interval(Duration::from_millis(500));
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .context("listening for SIGTERM")?;
    let closed = loop {
        tokio::select! {
            read = reads.recv() => match read.unwrap_or(Read::Closed(None)) {
                Read::Message(message) => {
                    if let Event::ThreadSeen(thread) = bridge.handle(message) {
                        follow(thread);
                    }
                }
                Read::Garbage { text, why } => say(&format!("ignored a message from Codex ({why}): {text}")),
                Read::Closed(e) => break e,
            },
            _ = poll.tick() => {
                if let Ok(list) = peer.request("thread/loaded/list", json!({})).await {
                    for thread in list.get("data").and_then(Value::as_array).into_iter().flatten() {
                        if let Some(thread) = thread.as_str() {
                            follow(thread.to_owned());
                        }
                    }
                }
            }
            _ = tokio::signal::ctrl_c() => { say("stopping (Ctrl-C)"); break None; }
            _ = terminate.recv() => { say("stopping (SIGTERM)"); break None; }
        }
    };
    Ok(closed)
}

/// Follow `thread`: `thread/resume` subscribes to its events and replays its
/// pending approvals. A thread whose first turn has not started yet cannot
/// be resumed ("no rollout found"): it is tried again when it shows activity.
async fn resume(peer: &Peer, bridge: &Bridge, thread: &str) {
    let resumed = peer
        .request(
            "thread/resume",
            json!({"threadId": thread, "excludeTurns": true}),
        )
        .await;
    let resumed = match resumed {
        Ok(r) => r,
        // Before its first turn a thread has no history to resume ("no
        // rollout found", "list_turns is not supported yet"): it is tried
        // again when it shows activity.
        Err(CallError::Refused { error, .. })
            if error.message.contains("no rollout found")
                || error.message.contains("not supported yet") =>
        {
            return;
        }
        Err(e) => {
            say(&format!("cannot follow thread {thread}: {e}"));
            return;
        }
    };
    let sandbox = resumed
        .pointer("/sandbox/type")
        .and_then(Value::as_str)
        .map_or_else(|| "unknown".to_owned(), sandbox_name);
    let policy = resumed
        .get("approvalPolicy")
        .map(|p| p.as_str().map_or_else(|| p.to_string(), str::to_owned))
        .unwrap_or_default();
    bridge.add_thread(thread, &sandbox, &policy);
    let note = if policy == "never" || (policy == "on-request" && sandbox == "danger-full-access") {
        " - Codex asks for nothing under these, so lev sees none of its calls"
    } else if crate::codex::bridge::gated_sandbox(&sandbox, &policy) != sandbox {
        " - what it asks about runs outside the sandbox, so lev's policy judges it as danger-full-access"
    } else {
        ""
    };
    say(&format!(
        "following thread {thread} (sandbox {sandbox}, approvals {policy}){note}"
    ));
}

fn install_hooks(args: &InstallArgs) -> anyhow::Result<ExitCode> {
    let home = codex_home(args.codex_home.as_deref())?;
    if !home.exists() && !args.dry_run {
        std::fs::create_dir_all(&home)
            .with_context(|| format!("making Codex's home {}", home.display()))?;
    }
    let home = std::fs::canonicalize(&home).unwrap_or(home);
    let config = home.join("config.toml");
    let existing = match lev_client::files::read_text(&config, lev_client::files::limit::CONFIG) {
        Ok(text) => text,
        Err(e) if e.is_not_found() => String::new(),
        Err(e) => return Err(e).context("reading Codex's configuration"),
    };
    let lev = match &args.lev {
        Some(path) => path.clone(),
        None => std::env::current_exe().context("finding this lev binary (give --lev PATH)")?,
    };
    let lev = lev
        .to_str()
        .context("lev's path is not UTF-8; give --lev PATH")?
        .to_owned();
    let mut words = vec![
        lev,
        "hook".into(),
        "codex".into(),
        "--timeout".into(),
        args.timeout.to_string(),
    ];
    for (flag, value) in [
        ("--url", &args.url),
        ("--sandbox-mode", &args.sandbox_mode),
        ("--caller", &args.caller),
    ] {
        if let Some(value) = value {
            words.push(flag.into());
            words.push(value.clone());
        }
    }
    if args.fail_open {
        words.push("--fail-open".into());
    }
    let command = shell::join(&words);
    let codex_timeout = args.timeout + 30;
    let mut events: Vec<EventName> = Vec::new();
    for event in &args.events {
        let event = match event {
            HookEventArg::PreToolUse => EventName::PreToolUse,
            HookEventArg::PermissionRequest => EventName::PermissionRequest,
        };
        if !events.contains(&event) {
            events.push(event);
        }
    }
    let hooks: Vec<(EventName, String, u64)> = events
        .iter()
        .map(|e| (*e, command.clone(), codex_timeout))
        .collect();
    let (text, installed) = hooks::install(&config, &existing, &hooks).map_err(|e| anyhow!(e))?;
    if !args.dry_run {
        write_config(&config, &text)?;
    }
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "{} {} hook{} in {}:",
        if args.dry_run { "would write" } else { "wrote" },
        installed.len(),
        if installed.len() == 1 { "" } else { "s" },
        config.display()
    )?;
    for hook in &installed {
        writeln!(
            out,
            "  {}: {} (Codex's timeout: {} s)\n    trusted: [hooks.state.\"{}\"] trusted_hash = \"{}\"",
            hook.event.as_str(),
            hook.command,
            hook.timeout,
            hook.key,
            hook.hash
        )?;
    }
    writeln!(
        out,
        "The hook reads LEV_URL and LEV_TOKEN from the environment Codex runs in{}.\nlev's block in config.toml is between the lines {:?} and {:?}; running install-hooks again replaces it.",
        if args.url.is_some() {
            " (LEV_TOKEN only: --url is in the command)"
        } else {
            ""
        },
        hooks::BLOCK_BEGIN,
        hooks::BLOCK_END
    )?;
    Ok(ExitCode::SUCCESS)
}

/// Replace `path` with `text` atomically, keeping its permissions (0600 for
/// a new file: it may name a token's environment, and Codex keeps it so).
fn write_config(path: &Path, text: &str) -> anyhow::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut file = tempfile::NamedTempFile::new_in(dir)
        .with_context(|| format!("writing {}", path.display()))?;
    file.write_all(text.as_bytes())
        .with_context(|| format!("writing {}", path.display()))?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(path).map_or(0o600, |m| m.permissions().mode() & 0o7777);
        std::fs::set_permissions(file.path(), std::fs::Permissions::from_mode(mode))
            .with_context(|| format!("writing {}", path.display()))?;
    }
    file.persist(path)
        .map_err(|e| anyhow!("writing {}: {}", path.display(), e.error))?;
    Ok(())
}
