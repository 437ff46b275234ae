//! `lev ask TEXT`: ask a person from a script, wait, print the answer.

use std::io::IsTerminal as _;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context as _;
use clap::ValueEnum;
use lev_client::{Answer, Client, Outcome};
use lev_protocol::{InteractionKind, InteractionRequest, OnTimeout};

use crate::connect::{ClientArgs, runtime};
use crate::deadline::Deadline;
use crate::exit;
use crate::report;
use crate::term;

/// Ask a person a question and wait for the answer, printed on stdout.
///
/// Exit codes: 0 answered; 3 declined (the question expired with
/// --on-timeout deny); 4 timed out or cancelled; 1 error; 2 usage.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  lev ask \"Which branch should I deploy?\"\n  lev ask \"Ship it?\" --choice yes --choice no --timeout 600\n  lev ask \"Release?\" --schema '{\"type\":\"object\",\"properties\":{\"version\":{\"type\":\"string\"}}}'\n  answer=$(lev ask \"Release notes?\" --timeout 3600) || exit"
)]
pub struct Args {
    /// The question.
    text: String,
    /// An option to pick from (repeat for each; 1 to 64): makes it a multiple choice.
    #[arg(long = "choice", value_name = "OPTION")]
    choices: Vec<String>,
    /// Make it a form: a JSON Schema (MCP elicitation's flat subset), as
    /// text or @FILE. The answer's fields print as one JSON object.
    #[arg(long, value_name = "JSON|@FILE", conflicts_with = "choices")]
    schema: Option<String>,
    /// The session the question belongs to.
    #[arg(long, default_value = "cli", value_name = "SESSION")]
    session: String,
    /// One line shown above the question.
    #[arg(long, value_name = "TEXT")]
    title: Option<String>,
    /// Give up after this many seconds (the server drops the question then
    /// too); a server that does not answer (hangs, trickles) is given up on
    /// by then and a tenth of it (1 to 15 s): exit 4.
    #[arg(long, value_name = "SECS", value_parser = clap::value_parser!(u64).range(1..))]
    timeout: Option<u64>,
    /// What the server does with the question past --timeout.
    #[arg(long, value_enum, default_value_t = TimeoutAction::Cancel, requires = "timeout")]
    on_timeout: TimeoutAction,
    /// Store attached files of the answer in DIR and name their paths in the
    /// output (else they are named, not downloaded).
    #[arg(long, value_name = "DIR")]
    save_dir: Option<PathBuf>,
    /// Print the outcome as JSON: {"id", "status", "response", "text"}.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    client: ClientArgs,
}

/// `--schema`: JSON text or `@FILE`, a JSON object (the server checks the subset).
fn read_schema(value: &str) -> anyhow::Result<lev_protocol::form::FormSchema> {
    let text = match value.strip_prefix('@') {
        Some(path) => std::fs::read_to_string(path).with_context(|| format!("--schema {path}"))?,
        None => value.to_owned(),
    };
    serde_json::from_str(&text).map_err(|e| {
        anyhow::anyhow!(
            "--schema: expected a JSON Schema object such as {{\"type\": \"object\", \"properties\": {{...}}}}: {e}"
        )
    })
}

/// `--on-timeout`.
#[derive(Debug, Clone, Copy, ValueEnum)]
enum TimeoutAction {
    /// Cancelled: exit 4.
    Cancel,
    /// Expired, a plain deny: exit 3.
    Deny,
}

/// Run `lev ask`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let client = args.client.client()?;
    let kind = if let Some(schema) = &args.schema {
        InteractionKind::Form {
            prompt: args.text.clone(),
            schema: read_schema(schema)?,
        }
    } else if args.choices.is_empty() {
        InteractionKind::FreeText {
            prompt: args.text.clone(),
        }
    } else {
        InteractionKind::MultipleChoice {
            prompt: args.text.clone(),
            options: args.choices.clone(),
        }
    };
    let mut request = InteractionRequest::new(args.session.clone(), kind);
    request.title = args.title.clone();
    if let Some(secs) = args.timeout {
        request.timeout_s = Some(secs);
        request.on_timeout = Some(match args.on_timeout {
            TimeoutAction::Cancel => OnTimeout::Cancel,
            TimeoutAction::Deny => OnTimeout::Deny,
        });
    }
    let rt = runtime()?;
    let asked = async {
        let Some(answer) = ask(&client, &request, args.timeout).await? else {
            return Ok(None);
        };
        let text = match answer.response().and_then(|r| r.fields.clone()) {
            // A form's answer, for a script: its fields as one JSON object.
            Some(fields) => serde_json::Value::Object(fields).to_string(),
            None => {
                client
                    .tool_result(&answer, None, args.save_dir.as_deref())
                    .await?
            }
        };
        anyhow::Ok(Some((answer, text)))
    };
    // With --timeout, one deadline for all of it from the start: a lev that
    // hangs or trickles gets "timed out", not a wait for ever.
    let asked = match args.timeout {
        Some(t) => {
            let deadline = Deadline::from_start(Duration::from_secs(t));
            match rt.block_on(deadline.run(asked)) {
                Some(asked) => asked?,
                None => {
                    report::message(&format!(
                        "lev did not answer within {} s; no answer (the question, if lev holds one, ends at --timeout)",
                        deadline.secs()
                    ));
                    return Ok(ExitCode::from(exit::TIMED_OUT));
                }
            }
        }
        None => rt.block_on(asked)?,
    };
    let Some((answer, text)) = asked else {
        return Ok(ExitCode::from(130));
    };
    let code = match &answer.outcome {
        Outcome::Answered { .. } => 0,
        Outcome::Expired => exit::DENIED,
        Outcome::Cancelled | Outcome::TimedOut { .. } => exit::TIMED_OUT,
    };
    if args.json {
        let status = match &answer.outcome {
            Outcome::Answered { .. } => "answered",
            Outcome::Expired => "expired",
            Outcome::Cancelled => "cancelled",
            Outcome::TimedOut { .. } => "timed_out",
        };
        let out = serde_json::json!({
            "id": answer.interaction.id(),
            "status": status,
            "response": answer.response(),
            "text": text,
        });
        crate::out::print_json(&out)?;
    } else if code == 0 {
        println!("{}", shown(&text));
    } else {
        report::message(&text);
    }
    Ok(ExitCode::from(code))
}

/// What the person wrote, escaped when stdout is a terminal; as written on
/// a pipe, where a script reads it.
fn shown(text: &str) -> String {
    if std::io::stdout().is_terminal() {
        term::multi_line(text)
    } else {
        text.to_owned()
    }
}

/// Create, then wait with a spinner (or one plain line off a terminal).
/// `None` when interrupted: the question is cancelled first.
async fn ask(
    client: &Client,
    request: &InteractionRequest,
    timeout: Option<u64>,
) -> anyhow::Result<Option<Answer>> {
    let interaction = client.create_interaction(request).await.context("asking")?;
    let id = interaction.id().to_owned();
    let shown_id = term::one_line(&id);
    let hint = match &interaction.request.kind {
        InteractionKind::MultipleChoice { .. } => format!("lev respond {shown_id} --choice N"),
        InteractionKind::Form { .. } => format!("lev respond {shown_id} --field NAME=VALUE ..."),
        _ => format!("lev respond {shown_id} --text TEXT"),
    };
    // A little past the server's own timeout, so its verdict arrives first.
    let deadline = timeout.map(|t| Duration::from_secs(t) + Duration::from_secs(2));
    let result = term::wait_with_spinner(
        &format!("an answer to {shown_id}"),
        &hint,
        client.wait_for_answer(&id, deadline),
    )
    .await;
    match result {
        Some(answer) => {
            let mut answer = answer.with_context(|| format!("waiting for {shown_id}"))?;
            if let Outcome::TimedOut { .. } = answer.outcome {
                // Our deadline passed first: drop the question, unless an
                // answer beat the cancel.
                if let Err(e) = client.cancel(&id).await
                    && e.status() == Some(409)
                {
                    answer = client
                        .wait_for_answer(&id, Some(Duration::from_secs(5)))
                        .await?;
                }
            }
            answer.interaction = interaction;
            Ok(Some(answer))
        }
        None => {
            // Bounded: a lev that hangs does not keep an interrupted ask alive.
            let cancel = client.cancel(&id);
            let _ = tokio::time::timeout(Duration::from_secs(5), cancel).await;
            eprintln!("lev: interrupted; cancelled {shown_id}");
            Ok(None)
        }
    }
}
