//! `lev demo`: a server on a temporary data dir and a simulated agent that
//! keeps asking every kind of question, its tool calls through the gate, so
//! a newcomer can answer from a second terminal or the dashboard and see
//! what the agent receives.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use anyhow::Context as _;
use lev_client::gate::{GateOutcome, Gatekeeper, RefusalKind, ToolCall};
use lev_client::{Answer, Client, Outcome};
use lev_protocol::api::{GateResponse, Role, TokenCreate};
use lev_protocol::{InteractionKind, InteractionRequest, Point};

use crate::connect::DEFAULT_URL;
use crate::term::{self, Style};

/// How many questions wait at once.
const IN_FLIGHT: usize = 2;

/// Run a demo server with an agent asking questions; answer them from another terminal.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Address to listen on [default: 127.0.0.1:7420, or a free port when it is taken].
    #[arg(long, value_name = "HOST:PORT")]
    listen: Option<String>,
    /// Stop after this many answers (for tests and scripted tours).
    #[arg(long, value_name = "N", hide = true)]
    exit_after: Option<usize>,
}

/// Run `lev demo`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the async runtime")?
        .block_on(demo(args))
}

async fn demo(args: Args) -> anyhow::Result<ExitCode> {
    // SIGINT, SIGTERM and SIGHUP (the terminal closed) all stop the demo and
    // delete its data dir, admin token included.
    let mut signals = crate::signals::Terminating::new().context("listening for signals")?;
    let data = tempfile::Builder::new()
        .prefix("lev-demo-")
        .tempdir()
        .context("making a temporary data dir")?;
    let server = bind(data.path(), args.listen.as_deref()).await?;
    let base = server.base_url();
    let admin = server
        .admin_token()
        .context("the demo server wrote no admin token")?
        .to_owned();
    let dashboard = server.dashboard_url();
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let mut stop_server = stop_rx.clone();
    let serving = tokio::spawn(server.serve(async move {
        let _ = stop_server.wait_for(|s| *s).await;
    }));

    let admin_client = Client::new(&base, Some(admin.clone()))?;
    let worker = admin_client
        .create_token(&TokenCreate {
            name: "demo-agent".into(),
            role: Role::Worker,
            caller: None,
            sessions: None,
        })
        .await
        .context("making the demo agent's token")?;
    let agent = admin_client.with_token(Some(worker.token));
    let gatekeeper = Gatekeeper::pinned(agent.clone())
        .await
        .context("pinning the demo server's keys")?;

    // Only a demo that fell back from the default port says why its URL differs.
    let fell_back = args.listen.is_none() && base != DEFAULT_URL;
    print_intro(&dashboard, &base, &admin, fell_back);

    let parts_dir = data.path().join("agent-parts");
    let answered = Arc::new(AtomicUsize::new(0));
    let agent_slot = Slot {
        agent,
        gatekeeper,
        next: Arc::new(AtomicUsize::new(0)),
        answered: answered.clone(),
        parts_dir,
        exit_after: args.exit_after,
    };
    let mut slots = tokio::task::JoinSet::new();
    for slot in 0..IN_FLIGHT {
        slots.spawn(agent_slot.clone().ask_until_stopped(slot, stop_rx.clone()));
    }

    let finished = async {
        match args.exit_after {
            Some(max) => {
                while answered.load(Ordering::Relaxed) < max {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
            None => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        _ = signals.recv() => {}
        () = finished => {}
    }
    let _ = stop_tx.send(true);
    slots.abort_all();
    let _ = serving.await;
    println!("lev demo: stopped; removed {}", data.path().display());
    Ok(ExitCode::SUCCESS)
}

/// What the demo prints first: the dashboard, and what to run in a second
/// terminal to answer the agent.
fn print_intro(dashboard: &str, base: &str, admin: &str, fell_back: bool) {
    let style = Style::stdout();
    println!(
        "{}",
        style.bold("lev demo: a server on a temporary data dir, and an agent asking questions")
    );
    println!();
    println!("  dashboard   {dashboard}");
    println!();
    println!("In a second terminal:");
    println!();
    let lev = lev_command();
    println!("  export LEV_URL={base} LEV_TOKEN={admin}");
    println!("  {lev} ls");
    println!("  {lev} show ID");
    println!(
        "  {lev} respond ID --text \"...\"   (or --choice N, --approve, --deny --feedback \"...\")"
    );
    if lev != "lev" {
        println!();
        println!(
            "{}",
            style.dim("(`lev` is not on your PATH: these lines name this binary by its full path)")
        );
    }
    if fell_back {
        println!();
        println!(
            "{}",
            style.dim(&format!(
                "(port 7420 was taken: this demo listens on {base})"
            ))
        );
    }
    println!();
    println!("Ctrl-C stops the demo and deletes its data.");
    println!();
}

/// One of the demo agent's slots: each asks the script's next question,
/// waits for its answer, and asks again.
#[derive(Clone)]
struct Slot {
    agent: Client,
    gatekeeper: Gatekeeper,
    /// The next question of the script, shared by the slots.
    next: Arc<AtomicUsize>,
    /// Questions answered, by every slot.
    answered: Arc<AtomicUsize>,
    parts_dir: PathBuf,
    exit_after: Option<usize>,
}

impl Slot {
    /// Ask, one question after another, until `stop` (or `--exit-after`
    /// answers in all).
    async fn ask_until_stopped(self, slot: usize, mut stop: tokio::sync::watch::Receiver<bool>) {
        // Stagger the first questions a little, as an agent would.
        tokio::time::sleep(Duration::from_millis(400 * slot as u64)).await;
        // After an error, wait longer each time (with jitter) up to 30 s.
        let mut backoff =
            lev_client::backoff::Backoff::new(Duration::from_secs(2), Duration::from_secs(30));
        loop {
            let n = self.next.fetch_add(1, Ordering::Relaxed);
            let script = &SCRIPT[n % SCRIPT.len()];
            let outcome = tokio::select! {
                r = async {
                    if let Some(call) = script.tool_call(n) {
                        gate(&self.gatekeeper, &call, script).await
                    } else {
                        ask(&self.agent, &script.request(n), script, &self.parts_dir).await
                    }
                } => r,
                _ = stop.wait_for(|s| *s) => return,
            };
            match outcome {
                Ok(()) => {
                    backoff.reset();
                    let done = self.answered.fetch_add(1, Ordering::Relaxed) + 1;
                    if self.exit_after.is_some_and(|max| done >= max) {
                        // Nothing more to ask; the demo stops.
                        return;
                    }
                }
                Err(e) => {
                    eprintln!("lev demo: agent: {}", term::one_line(&format!("{e:#}")));
                    tokio::select! {
                        () = tokio::time::sleep(backoff.next_delay()) => {}
                        _ = stop.wait_for(|s| *s) => return,
                    }
                }
            }
            tokio::select! {
                () = tokio::time::sleep(Duration::from_millis(1500)) => {}
                _ = stop.wait_for(|s| *s) => return,
            }
        }
    }
}

/// How a second terminal runs this very binary: `lev` when that name on PATH
/// is this binary, else its absolute path (shell-quoted when it needs it).
fn lev_command() -> String {
    let Ok(me) = std::env::current_exe().and_then(std::fs::canonicalize) else {
        return "lev".into();
    };
    // The first `lev` on PATH is the one a shell runs.
    let on_path = std::env::var_os("PATH")
        .and_then(|path| {
            std::env::split_paths(&path)
                .map(|dir| dir.join("lev"))
                .find(|candidate| candidate.is_file())
        })
        .and_then(|found| std::fs::canonicalize(found).ok())
        .is_some_and(|found| found == me);
    if on_path {
        return "lev".into();
    }
    let shown = me.display().to_string();
    if shown
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "/._-+,:@".contains(c))
    {
        shown
    } else {
        format!("'{}'", shown.replace('\'', "'\\''"))
    }
}

/// The demo's gate policy: the example policy (destructive commands denied,
/// a push asks a person) and `git status` allowed, so the demo shows each
/// way a call is decided.
const DEMO_POLICY_RULE: &str = r#"
[[rule]]
tool = "shell"
args = { "/argv/0" = "^(.*/)?git$", "/argv/1" = "^(status|diff|log)$" }
decision = "allow"
reason = "git status, diff and log only read"
"#;

async fn bind(data_dir: &Path, listen: Option<&str>) -> anyhow::Result<lev_server::Server> {
    let mut config = lev_server::Config::new(data_dir.to_path_buf());
    let policy = data_dir.join("demo-policy.toml");
    std::fs::create_dir_all(data_dir).context("making the demo's data dir")?;
    std::fs::write(
        &policy,
        format!("{}{DEMO_POLICY_RULE}", lev_approval::policy::EXAMPLE_POLICY),
    )
    .context("writing the demo's policy")?;
    config.policy = Some(policy);
    if let Some(listen) = listen {
        config.listen = listen.to_owned();
        return lev_server::Server::bind(config)
            .await
            .context("starting the demo server");
    }
    match lev_server::Server::bind(config.clone()).await {
        Ok(server) => Ok(server),
        Err(lev_server::ServeError::Listen { .. }) => {
            config.listen = "127.0.0.1:0".into();
            lev_server::Server::bind(config)
                .await
                .context("starting the demo server")
        }
        Err(e) => Err(e).context("starting the demo server"),
    }
}

/// Ask one question, wait for its outcome, and print what the model would read.
async fn ask(
    agent: &Client,
    request: &InteractionRequest,
    script: &Question,
    parts_dir: &Path,
) -> anyhow::Result<()> {
    let interaction = agent.create_interaction(request).await?;
    let id = interaction.id().to_owned();
    let style = Style::stdout();
    println!(
        "{} asks {} {}",
        style.bold("agent"),
        style.cyan(&term::one_line(&id)),
        term::one_line(script.title)
    );
    let outcome = agent.wait_for_answer(&id, None).await?;
    let answer = Answer {
        interaction,
        outcome: outcome.outcome,
    };
    let tool_output = match (&answer.outcome, &script.kind) {
        (Outcome::Answered { response, .. }, Kind::Tool { output, args, .. })
            if response.approved == Some(true) =>
        {
            let ran_with = response.modified_args_json.as_deref().unwrap_or(args);
            Some(format!(
                "{output}\n(simulated: the demo agent ran nothing; args {ran_with})"
            ))
        }
        _ => None,
    };
    let dir: PathBuf = parts_dir.join(&id);
    let text = agent
        .tool_result(&answer, tool_output.as_deref(), Some(&dir))
        .await?;
    println!(
        "{} {} {}; the model reads:",
        style.bold("agent"),
        style.green("got an answer to"),
        style.cyan(&term::one_line(&id)),
    );
    for line in term::multi_line(&text).lines() {
        println!("  {} {line}", style.dim("│"));
    }
    println!();
    Ok(())
}

/// A tool call through the gate, as a real agent makes it: the policy may
/// allow or deny it outright, a grant ("approve for this session") may allow
/// it, else a person decides. Prints how it was decided and what the model
/// reads.
async fn gate(gatekeeper: &Gatekeeper, call: &ToolCall, script: &Question) -> anyhow::Result<()> {
    let style = Style::stdout();
    let what = format!(
        "{} {}",
        term::one_line(&call.tool_name),
        term::one_line(&call_line(&call.args_json))
    );
    let submitted = gatekeeper.submit(call).await?;
    match submitted.response() {
        GateResponse::Ask { interaction_id } => println!(
            "{} asks {} {} {}",
            style.bold("agent"),
            style.cyan(&term::one_line(interaction_id)),
            term::one_line(script.title),
            style.dim(&format!("(the gate asks a person: {what})"))
        ),
        GateResponse::Allow { .. } | GateResponse::Deny { .. } => {}
    }
    let outcome = gatekeeper.settle(call, submitted).await?;
    let text = match outcome {
        GateOutcome::Run(approved) => {
            let verified = approved.verified();
            let how = if approved.answer().is_some() {
                format!("approved by {}", verified.payload.approver)
            } else if verified.payload.approved_for_session {
                format!(
                    "allowed by a grant from {} (no question asked)",
                    verified.payload.approver
                )
            } else if verified.payload.reason.is_empty() {
                "allowed by the policy".to_owned()
            } else {
                format!("allowed by the policy: {}", verified.payload.reason)
            };
            println!(
                "{} {} {what}: {}",
                style.bold("agent"),
                style.green("runs"),
                term::one_line(&how)
            );
            let output = match &script.kind {
                Kind::Tool { output, .. } => *output,
                _ => "",
            };
            approved.tool_result_text(&format!(
                "{output}\n(simulated: the demo agent ran nothing; args {})",
                approved.args_json()
            ))
        }
        GateOutcome::Refused(refusal) => {
            let why = match refusal.kind {
                RefusalKind::Policy => "denied by the policy",
                RefusalKind::Denied => "denied by a person",
                RefusalKind::Expired | RefusalKind::TimedOut => "nobody decided in time",
                RefusalKind::Cancelled => "cancelled",
            };
            println!(
                "{} {} {what}: {why}",
                style.bold("agent"),
                style.red("does not run"),
            );
            refusal.text
        }
    };
    println!("  {} the model reads:", style.dim("│"));
    for line in term::multi_line(&text).lines() {
        println!("  {} {line}", style.dim("│"));
    }
    println!();
    Ok(())
}

/// A call's args in one line: the command line of an `argv`, else the JSON.
fn call_line(args_json: &str) -> String {
    let argv = serde_json::from_str::<serde_json::Value>(args_json)
        .ok()
        .and_then(|v| v.get("argv").and_then(|a| a.as_array()).cloned());
    match argv {
        Some(words) if words.iter().all(serde_json::Value::is_string) => words
            .iter()
            .filter_map(serde_json::Value::as_str)
            .map(|w| {
                if !w.is_empty()
                    && w.chars()
                        .all(|c| c.is_ascii_alphanumeric() || "/._-+,:@=".contains(c))
                {
                    w.to_owned()
                } else {
                    format!("'{}'", w.replace('\'', "'\\''"))
                }
            })
            .collect::<Vec<_>>()
            .join(" "),
        _ => term::clip(args_json, 100),
    }
}

/// One question the demo agent asks.
struct Question {
    title: &'static str,
    kind: Kind,
}

enum Kind {
    Text(&'static str),
    Choice(&'static str, &'static [&'static str]),
    Points(&'static str, &'static [(&'static str, &'static str)]),
    Tool {
        tool: &'static str,
        args: &'static str,
        missing: &'static [&'static str],
        sandbox: &'static str,
        output: &'static str,
    },
}

impl Question {
    /// The gate call of a tool question; `None` for the other kinds.
    fn tool_call(&self, n: usize) -> Option<ToolCall> {
        let Kind::Tool {
            tool,
            args,
            missing,
            sandbox,
            ..
        } = &self.kind
        else {
            return None;
        };
        let mut call = ToolCall::new("demo", format!("call-{}", n + 1), *tool, *args);
        call.conversation_id = "demo-conversation".into();
        call.turn_id = format!("turn-{}", n + 1);
        call.caller = "demo-user".into();
        call.sandbox_mode = (*sandbox).into();
        call.required_capabilities = missing.iter().map(|m| (*m).to_owned()).collect();
        Some(call)
    }

    fn request(&self, n: usize) -> InteractionRequest {
        let kind = match &self.kind {
            Kind::Text(prompt) => InteractionKind::FreeText {
                prompt: (*prompt).into(),
            },
            Kind::Choice(prompt, options) => InteractionKind::MultipleChoice {
                prompt: (*prompt).into(),
                options: options.iter().map(|o| (*o).to_owned()).collect(),
            },
            Kind::Points(prompt, points) => InteractionKind::InteractionPoints {
                prompt: (*prompt).into(),
                points: points
                    .iter()
                    .map(|(id, text)| Point {
                        id: (*id).into(),
                        text: (*text).into(),
                    })
                    .collect(),
            },
            Kind::Tool {
                tool,
                args,
                missing,
                sandbox,
                ..
            } => InteractionKind::ToolApproval {
                tool_name: (*tool).into(),
                args_json: (*args).into(),
                missing_capabilities: missing.iter().map(|m| (*m).to_owned()).collect(),
                sandbox_mode: (*sandbox).into(),
                options: Vec::new(),
            },
        };
        let mut request = InteractionRequest::new("demo", kind);
        request.conversation_id = Some("demo-conversation".into());
        request.turn_id = Some(format!("turn-{}", n + 1));
        request.caller = Some("demo-user".into());
        request.title = Some(self.title.into());
        request
    }
}

const SCRIPT: &[Question] = &[
    Question {
        title: "Release notes for v0.4",
        kind: Kind::Text(
            "I'm drafting the v0.4 changelog. Please attach the release notes you want me to \
             start from (lev respond ID --text \"here @notes.md\"), or tell me what to highlight.",
        ),
    },
    Question {
        title: "Push the login fix",
        kind: Kind::Tool {
            tool: "shell",
            args: r#"{"argv":["git","push","--force-with-lease","origin","fix/login-redirect"],"cwd":"/home/dev/shop"}"#,
            missing: &["net"],
            sandbox: "workspace-write",
            output: "To github.com:acme/shop.git\n + 3f2a9c1...8d41e07 fix/login-redirect -> fix/login-redirect (forced update)",
        },
    },
    Question {
        title: "Check the working tree",
        kind: Kind::Tool {
            tool: "shell",
            args: r#"{"argv":["git","status","--short"],"cwd":"/home/dev/shop"}"#,
            missing: &[],
            sandbox: "workspace-write",
            output: " M src/login.rs\n?? notes/",
        },
    },
    Question {
        title: "Staging database",
        kind: Kind::Choice(
            "Which database should the staging deployment use?",
            &[
                "SQLite on the app server",
                "PostgreSQL 16 (managed)",
                "Keep what is configured now",
            ],
        ),
    },
    Question {
        title: "Refund a duplicate charge",
        kind: Kind::Tool {
            tool: "http.request",
            args: r#"{"method":"POST","url":"https://api.stripe.com/v1/refunds","body":{"charge":"ch_3PdemoX2eZvKYlo2","amount":1299,"reason":"duplicate"}}"#,
            missing: &["net", "payments"],
            sandbox: "workspace-write",
            output: "HTTP 200 {\"id\":\"re_3Pdemo\",\"status\":\"succeeded\",\"amount\":1299}",
        },
    },
    Question {
        title: "Review of PR #482",
        kind: Kind::Points(
            "I reviewed PR #482 (session cookies). Which points should I fix before merging? \
             Answer with the ids and any notes.",
            &[
                ("p1", "The cookie lacks SameSite=Strict"),
                (
                    "p2",
                    "Session ids come from rand::thread_rng, not a CSPRNG seeded per process",
                ),
                ("p3", "No test covers logout invalidating the session"),
            ],
        ),
    },
    Question {
        title: "Rewrite the config loader",
        kind: Kind::Tool {
            tool: "fs.write",
            args: r#"{"path":"src/config.rs","content":"pub fn load() -> Config {\n    Config::from_env().unwrap_or_default()\n}\n"}"#,
            missing: &["fs-write"],
            sandbox: "read-only",
            output: "wrote 62 bytes to src/config.rs",
        },
    },
    Question {
        title: "Flaky test on CI",
        kind: Kind::Text(
            "payments::refund_twice fails on CI only (3 of the last 10 runs). Could you paste \
             or attach the CI log of a failing run?",
        ),
    },
    Question {
        title: "Clean the build cache",
        kind: Kind::Tool {
            tool: "shell",
            args: r#"{"argv":["rm","-rf","target/","node_modules/.cache"],"cwd":"/home/dev/shop"}"#,
            missing: &["proc-exec"],
            sandbox: "workspace-write",
            output: "",
        },
    },
];
