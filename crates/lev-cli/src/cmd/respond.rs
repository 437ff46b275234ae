//! `lev respond ID`: answer an interaction from the terminal.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context as _, bail};
use clap::ValueEnum;
use lev_client::files;
use lev_protocol::{ApprovalScope, InboundPart, InteractionResponse};

use crate::connect::{ClientArgs, runtime};
use crate::describe;
use crate::report::HINT;
use crate::term::{self, Style};

/// Answer an interaction: text (with files), a choice, a form's fields, or a
/// decision on a tool call.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  lev respond ir_01 --text \"main, after the tests pass\"\n  lev respond ir_01 --text \"see @notes.md\"          (attaches ./notes.md)\n  lev respond ir_01 --text \"the logs\" --attach build.log --attach test.log\n  lev respond ir_01 --choice 1\n  lev respond ir_01 --field name=Ada --field age=36 --field subscribe=true\n  lev respond ir_01 --fields-json '{\"name\":\"Ada\",\"age\":36}'\n  lev respond ir_01 --approve --scope session\n  lev respond ir_01 --approve --edit-args '{\"argv\":[\"ls\",\"-la\"]}'\n  lev respond ir_01 --deny --feedback \"use git status instead\""
)]
#[command(group(clap::ArgGroup::new("answer").required(true).multiple(true)
    .args(["text", "choice", "approve", "deny", "field", "fields_json"])))]
pub struct Args {
    /// The interaction's id (ir_...).
    id: String,

    /// Answer a free-text or interaction-points question. Every `@PATH` word
    /// naming a file on this machine attaches that file.
    #[arg(long, value_name = "TEXT", conflicts_with_all = ["choice", "approve", "deny"])]
    text: Option<String>,
    /// Attach a file to a text answer (repeatable).
    #[arg(long, value_name = "FILE", requires = "text", conflicts_with_all = ["choice", "approve", "deny"])]
    attach: Vec<PathBuf>,

    /// Answer one field of a form: NAME=VALUE (repeatable). The value is read
    /// as the field's type says: a number, true/false, an enum's value (or
    /// its label), or text; the server checks it against the form's schema.
    #[arg(long, value_name = "NAME=VALUE", conflicts_with_all = ["text", "choice", "approve", "deny", "fields_json"])]
    field: Vec<String>,
    /// Answer a form with a JSON object of its fields: JSON text, or @FILE.
    #[arg(long, value_name = "JSON|@FILE", conflicts_with_all = ["text", "choice", "approve", "deny"])]
    fields_json: Option<String>,

    /// Pick option N (as numbered by `lev show` and the dashboard, from 1) of
    /// a multiple choice, or of a tool approval's options beside --approve/--deny.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    choice: Option<u32>,

    /// Approve a tool call.
    #[arg(long, conflicts_with = "deny")]
    approve: bool,
    /// How long the approval lasts: this call, the rest of the session, or
    /// until revoked.
    #[arg(
        long,
        value_enum,
        requires = "approve",
        conflicts_with_all = ["deny", "text"],
        value_name = "SCOPE"
    )]
    scope: Option<Scope>,
    /// Run the call with these args instead: JSON text, or @FILE to read it.
    #[arg(
        long,
        value_name = "JSON|@FILE",
        requires = "approve",
        conflicts_with_all = ["deny", "text"]
    )]
    edit_args: Option<String>,
    /// Narrow a session or always grant to calls whose args match: POINTER=REGEX
    /// (repeatable), such as /argv/0=^git$. With --edit-args and no
    /// --grant-arg, the grant covers only calls exactly like the edited one.
    #[arg(
        long,
        value_name = "POINTER=REGEX",
        requires = "approve",
        conflicts_with_all = ["deny", "text"]
    )]
    grant_arg: Vec<String>,

    /// Deny a tool call.
    #[arg(long)]
    deny: bool,
    /// Tell the model what to do instead (with --deny).
    #[arg(
        long,
        value_name = "TEXT",
        requires = "deny",
        conflicts_with_all = ["approve", "text"]
    )]
    feedback: Option<String>,

    /// Context for the model, put before the tool's result and marked internal
    /// (with --approve or --deny).
    #[arg(long, value_name = "TEXT", conflicts_with = "text")]
    inject: Option<String>,
    /// A reason for the record (audit log, dashboard); the model is not told
    /// (with --approve or --deny).
    #[arg(long, value_name = "TEXT", conflicts_with = "text")]
    reason: Option<String>,

    /// Send the vote without signing it, though you have a key (lev key
    /// init); by default a decision on a tool call is signed with your key
    /// when you have one.
    #[arg(long, conflicts_with = "text")]
    unsigned: bool,
    #[command(flatten)]
    key: super::key::KeyFile,

    /// Print the stored answer and its signed decision as JSON.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    client: ClientArgs,
}

/// `--scope`.
#[derive(Debug, Clone, Copy, ValueEnum)]
enum Scope {
    /// This call only.
    Once,
    /// This call and the same tool for the rest of the conversation.
    Session,
    /// Like session, in every conversation, until revoked.
    Always,
}

impl From<Scope> for ApprovalScope {
    fn from(s: Scope) -> Self {
        match s {
            Scope::Once => Self::Once,
            Scope::Session => Self::Session,
            Scope::Always => Self::Always,
        }
    }
}

/// Run `lev respond`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let client = args.client.client()?;
    let shown_id = term::one_line(&args.id);
    let rt = runtime()?;
    // Refuse an answer that does not fit the question before sending it,
    // saying what to type instead.
    let view = rt.block_on(client.get_interaction(&args.id)).ok();
    let mut response = match &view {
        Some(view) if !args.field.is_empty() => form_answer(&args, &view.request.request.kind)?,
        None if !args.field.is_empty() => {
            // Without the form, values are sent as text; the server checks them.
            let mut fields = serde_json::Map::new();
            for pair in &args.field {
                let (name, value) = split_field(pair)?;
                fields.insert(name.to_owned(), serde_json::Value::from(value));
            }
            InteractionResponse::form(args.id.clone(), fields)
        }
        _ => build(&args)?,
    };
    if let Some(view) = &view
        && let Some(problem) = misfit(&args, &view.request.request.kind)
    {
        clap::Error::raw(
            clap::error::ErrorKind::ArgumentConflict,
            format!("{shown_id}: {problem}\n"),
        )
        .exit();
    }
    // A decision on a tool call is the person's vote: signed with their own
    // key when they have one.
    let mut signed_with = None;
    if (args.approve || args.deny)
        && !args.unsigned
        && let Some(view) = &view
        && let Some((path, key)) = args.key.load()?
    {
        let kid = rt.block_on(super::key::sign_vote(
            &client,
            view,
            &mut response,
            &path,
            &key,
        ))?;
        signed_with = Some(kid);
    }
    let result = rt.block_on(client.respond(&args.id, &response));
    let result = match result {
        Ok(result) => result,
        Err(e) if e.code() == Some("already_answered") => {
            return Err(lost_race(&rt, &client, &args.id, &e));
        }
        Err(e) => return Err(e).with_context(|| format!("respond {shown_id}")),
    };
    if args.json {
        crate::out::print_json(&result)?;
        return Ok(ExitCode::SUCCESS);
    }
    print_answered(&rt, &client, &args.id, &result, signed_with.as_deref());
    Ok(ExitCode::SUCCESS)
}

/// The error of an answer that lost the race: the answer that won, as the
/// question's kind reads it.
fn lost_race(
    rt: &tokio::runtime::Runtime,
    client: &lev_client::Client,
    id: &str,
    e: &lev_client::Error,
) -> anyhow::Error {
    let shown_id = term::one_line(id);
    let winner = match e.winner() {
        Some(w) => {
            let kind = rt
                .block_on(client.get_interaction(id))
                .map(|v| v.request.request.kind)
                .ok();
            match kind {
                Some(kind) => describe::answer_summary(&kind, w),
                None => "another answer".to_owned(),
            }
        }
        None => "another answer".to_owned(),
    };
    anyhow::anyhow!(
        "respond {shown_id}: already answered, the first answer won: {}",
        term::one_line(&winner)
    )
}

/// What was answered, and with a quorum, how many approvals it still needs
/// and who may still vote.
fn print_answered(
    rt: &tokio::runtime::Runtime,
    client: &lev_client::Client,
    id: &str,
    result: &lev_protocol::api::RespondResult,
    signed_with: Option<&str>,
) {
    let shown_id = term::one_line(id);
    let style = Style::stdout();
    let kind = rt
        .block_on(client.get_interaction(id))
        .map(|v| v.request.request.kind)
        .ok();
    let summary = match &kind {
        Some(kind) => describe::answer_summary(kind, &result.response),
        None => "answered".to_owned(),
    };
    let mut notes = Vec::new();
    if let Some(kid) = signed_with {
        notes.push(format!("your vote signed with {}", term::one_line(kid)));
    }
    if result.approval.is_some() {
        notes.push(
            if notes.is_empty() {
                "signed"
            } else {
                "decision signed"
            }
            .to_owned(),
        );
    }
    let notes = if notes.is_empty() {
        String::new()
    } else {
        format!(" {}", style.dim(&format!("({})", notes.join(", "))))
    };
    if result.status == Some(lev_protocol::InteractionStatus::Pending) {
        let needed = result.approvals_needed.unwrap_or(1);
        let approvals = result.votes.iter().filter(|v| v.approved).count();
        let still = rt
            .block_on(client.get_interaction(id))
            .ok()
            .and_then(|v| v.request.may_still_vote(time::OffsetDateTime::now_utc()))
            .map(|names| format!("; may still vote: {}", term::one_line(&names.join(", "))))
            .unwrap_or_default();
        println!(
            "{} {}: {}{notes}; {approvals} of {needed} approvals{still}",
            style.green("voted"),
            style.cyan(&shown_id),
            term::one_line(&summary)
        );
        return;
    }
    println!(
        "{} {}: {}{notes}",
        style.green("answered"),
        style.cyan(&shown_id),
        term::one_line(&summary)
    );
}

/// `--field NAME=VALUE`, split at the first `=`.
fn split_field(pair: &str) -> anyhow::Result<(&str, &str)> {
    match pair.split_once('=') {
        Some((name, value)) if !name.is_empty() => Ok((name, value)),
        _ => bail!(
            "--field: expected NAME=VALUE, found {:?}",
            term::clip(pair, 60)
        ),
    }
}

/// A form's answer from `--field NAME=VALUE` flags, each value read as its
/// field's type says; a name the form does not have is refused here, with
/// the form's names.
fn form_answer(
    args: &Args,
    kind: &lev_protocol::InteractionKind,
) -> anyhow::Result<InteractionResponse> {
    let lev_protocol::InteractionKind::Form { schema, .. } = kind else {
        // misfit() says what to type instead.
        return Ok(InteractionResponse::form(
            args.id.clone(),
            serde_json::Map::new(),
        ));
    };
    let form = lev_protocol::form::parse_schema(schema, &lev_protocol::Limits::default())
        .map_err(|e| anyhow::anyhow!("the form's schema does not read: {e}"))?;
    let mut fields = serde_json::Map::new();
    let mut problems = Vec::new();
    for pair in &args.field {
        let (name, text) = split_field(pair)?;
        let Some(field) = form.fields.iter().find(|f| f.name == name) else {
            let names: Vec<&str> = form.fields.iter().map(|f| f.name.as_str()).collect();
            problems.push(format!(
                "{}: not a field of this form (its fields: {})",
                term::one_line(name),
                names.join(", ")
            ));
            continue;
        };
        match lev_protocol::form::value_from_text(field, text) {
            Ok(value) => {
                fields.insert(name.to_owned(), value);
            }
            Err(why) => problems.push(format!(
                "{}: {}",
                term::one_line(name),
                term::one_line(&why)
            )),
        }
    }
    if !problems.is_empty() {
        bail!("--field: {}", problems.join("; "));
    }
    Ok(InteractionResponse::form(args.id.clone(), fields))
}

/// `--fields-json`: a JSON object, as text or `@FILE`.
fn fields_json(value: &str) -> anyhow::Result<serde_json::Map<String, serde_json::Value>> {
    let text = match value.strip_prefix('@') {
        Some(path) => {
            files::read_text(Path::new(path), files::limit::ARGS).context("--fields-json")?
        }
        None => value.to_owned(),
    };
    match serde_json::from_str::<serde_json::Value>(&text) {
        Ok(serde_json::Value::Object(map)) => Ok(map),
        Ok(_) => bail!(
            "--fields-json: expected a JSON object of the form's fields, found {:?}",
            term::clip(&text, 60)
        ),
        Err(e) => bail!(
            "--fields-json: expected JSON text, found {:?}: {e}",
            term::clip(&text, 60)
        ),
    }
}

fn build(args: &Args) -> anyhow::Result<InteractionResponse> {
    let id = args.id.clone();
    if let Some(json) = &args.fields_json {
        return Ok(InteractionResponse::form(id, fields_json(json)?));
    }
    if let Some(text) = &args.text {
        let mut files: Vec<PathBuf> = at_paths(text)?;
        files.extend(args.attach.iter().cloned());
        let parts = files
            .iter()
            .map(|f| read_part(f))
            .collect::<anyhow::Result<Vec<_>>>()?;
        return Ok(InteractionResponse::text(id, text.clone()).with_parts(parts));
    }
    if !args.approve && !args.deny {
        // A plain choice.
        if args.inject.is_some() || args.reason.is_some() {
            clap::Error::raw(
                clap::error::ErrorKind::MissingRequiredArgument,
                "--inject and --reason need --approve or --deny, found --choice alone\n",
            )
            .exit();
        }
        let choice = args
            .choice
            .context("expected --text, --choice, --approve or --deny")?;
        return Ok(InteractionResponse::choice(id, wire_index(choice)));
    }
    let mut response = if args.approve {
        let mut r = InteractionResponse::approval(
            id,
            true,
            args.scope.map_or(ApprovalScope::Once, Into::into),
        );
        r.modified_args_json = args.edit_args.as_deref().map(edited_args).transpose()?;
        if !args.grant_arg.is_empty() {
            r.grant_args = Some(grant_args(&args.grant_arg)?);
        } else if let Some(edit) = &r.modified_args_json
            && r.scope.is_some_and(ApprovalScope::is_grant_scope)
        {
            // After an edit, the grant covers calls like the edited one, not
            // any call of the tool; --grant-arg says otherwise.
            r.grant_args = Some(exact_patterns(edit)?).filter(|p| !p.is_empty());
        }
        r
    } else {
        match &args.feedback {
            Some(feedback) => InteractionResponse::deny_with_feedback(id, feedback),
            None => InteractionResponse::approval(id, false, ApprovalScope::Once),
        }
    };
    response.choice_index = args.choice.map(wire_index);
    response.injected_context = args.inject.clone();
    response.reason = args.reason.clone();
    Ok(response)
}

/// Why these flags cannot answer a question of this kind, and what to type
/// instead; `None` when they fit.
fn misfit(args: &Args, kind: &lev_protocol::InteractionKind) -> Option<String> {
    use lev_protocol::InteractionKind as K;
    let decision = args.approve || args.deny;
    let form_flags = !args.field.is_empty() || args.fields_json.is_some();
    if form_flags && !matches!(kind, K::Form { .. }) {
        return Some(format!(
            "--field and --fields-json answer a form; this is a {} question",
            kind.type_name()
        ));
    }
    match kind {
        K::Form { .. } => (!form_flags).then(|| {
            format!(
                "a form is answered with --field NAME=VALUE (repeatable) or --fields-json JSON, not {}",
                given(args)
            )
        }),
        K::FreeText { .. } | K::InteractionPoints { .. } => (args.choice.is_some() || decision)
            .then(|| {
                format!(
                    "a {} question is answered with --text TEXT (and --attach FILE), not {}",
                    kind.type_name(),
                    given(args)
                )
            }),
        K::MultipleChoice { options, .. } => {
            if args.text.is_some() || decision {
                return Some(format!(
                    "a multiple choice is answered with --choice N (1 to {}, as `lev show` numbers them), not {}",
                    options.len(),
                    given(args)
                ));
            }
            out_of_range(args.choice, options.len())
        }
        K::ToolApproval { options, .. } => {
            if args.text.is_some() {
                return Some(
                    "a tool approval is answered with --approve or --deny \
                     (--deny --feedback TEXT tells the agent what to do instead), not --text"
                        .to_owned(),
                );
            }
            if args.choice.is_some() && options.is_empty() {
                return Some(
                    "this tool approval has no options: answer with --approve or --deny, without --choice"
                        .to_owned(),
                );
            }
            if !decision {
                return Some(
                    "a tool approval is answered with --approve or --deny; --choice N picks one of its options beside them"
                        .to_owned(),
                );
            }
            out_of_range(args.choice, options.len())
        }
    }
}

fn out_of_range(choice: Option<u32>, len: usize) -> Option<String> {
    let n = choice?;
    (usize::try_from(n).unwrap_or(usize::MAX) > len)
        .then(|| format!("--choice {n}: there are {len} options, numbered 1 to {len}"))
}

/// The answer flags given, as typed.
fn given(args: &Args) -> String {
    let mut flags = Vec::new();
    if args.text.is_some() {
        flags.push("--text");
    }
    if args.choice.is_some() {
        flags.push("--choice");
    }
    if args.approve {
        flags.push("--approve");
    }
    if args.deny {
        flags.push("--deny");
    }
    flags.join(" ")
}

/// `--choice N` counts from 1, as `lev show` prints; the wire counts from 0.
fn wire_index(n: u32) -> usize {
    usize::try_from(n.saturating_sub(1)).unwrap_or(usize::MAX)
}

/// `--edit-args`: JSON text, or `@FILE`; checked to be JSON here so a typo
/// is caught before it reaches the server.
fn edited_args(value: &str) -> anyhow::Result<String> {
    let text = match value.strip_prefix('@') {
        Some(path) => {
            files::read_text(Path::new(path), files::limit::ARGS).context("--edit-args")?
        }
        None => value.to_owned(),
    };
    if let Err(e) = serde_json::from_str::<serde_json::Value>(&text) {
        bail!(
            "--edit-args: expected JSON text, found {:?}: {e}",
            term::clip(&text, 60)
        );
    }
    Ok(text.trim().to_owned())
}

/// Every leaf of `args` (JSON text) as a pointer and an anchored regex
/// matching exactly its value, as the dashboard's "Only calls like this one".
fn exact_patterns(args: &str) -> anyhow::Result<BTreeMap<String, String>> {
    fn walk(value: &serde_json::Value, pointer: String, out: &mut BTreeMap<String, String>) {
        match value {
            serde_json::Value::Array(items) if !items.is_empty() => {
                for (i, item) in items.iter().enumerate() {
                    walk(item, format!("{pointer}/{i}"), out);
                }
            }
            serde_json::Value::Object(map) if !map.is_empty() => {
                for (key, item) in map {
                    let key = key.replace('~', "~0").replace('/', "~1");
                    walk(item, format!("{pointer}/{key}"), out);
                }
            }
            serde_json::Value::String(text) => {
                out.insert(pointer, format!("^{}$", regex_escape(text)));
            }
            other => {
                out.insert(pointer, format!("^{}$", regex_escape(&other.to_string())));
            }
        }
    }
    let value: serde_json::Value = serde_json::from_str(args).context("--edit-args")?;
    let mut out = BTreeMap::new();
    walk(&value, String::new(), &mut out);
    Ok(out)
}

fn regex_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if "\\.+*?()|[]{}^$#&-~".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

fn grant_args(pairs: &[String]) -> anyhow::Result<BTreeMap<String, String>> {
    pairs
        .iter()
        .map(|pair| match pair.split_once('=') {
            Some((pointer, regex)) if pointer.starts_with('/') || pointer.is_empty() => {
                Ok((pointer.to_owned(), regex.to_owned()))
            }
            _ => bail!(
                "--grant-arg: expected POINTER=REGEX with a JSON pointer such as /argv/0, found {pair:?}"
            ),
        })
        .collect()
}

/// The files a text names with `@PATH` words. A word whose path is not a
/// file stays text (`@alice`), unless it plainly meant one (it has a `/`).
pub(crate) fn at_paths(text: &str) -> anyhow::Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for word in text.split_whitespace() {
        let Some(raw) = word.strip_prefix('@') else {
            continue;
        };
        if raw.is_empty() {
            continue;
        }
        let candidates = [
            raw,
            raw.trim_end_matches(['.', ',', ';', ':', '!', '?', ')']),
        ];
        match candidates
            .iter()
            .find(|c| !c.is_empty() && Path::new(c).is_file())
        {
            Some(path) => {
                let path = PathBuf::from(path);
                if !files.contains(&path) {
                    files.push(path);
                }
            }
            None if raw.contains('/') => bail!(
                "--text: expected @{raw} to name a file on this machine, found none{HINT}a word \
                 that starts with @ and holds a / attaches the file it names"
            ),
            None => {}
        }
    }
    Ok(files)
}

pub(crate) fn read_part(path: &Path) -> anyhow::Result<InboundPart> {
    let meta = std::fs::metadata(path).with_context(|| format!("attach {}", path.display()))?;
    if !meta.is_file() {
        bail!(
            "attach {}: expected a file, found a directory or device",
            path.display()
        );
    }
    // Read under the limit: the file may grow after its size was read.
    let bytes = files::read(path, files::limit::PART).context("attach")?;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "attachment".to_owned());
    Ok(lev_client::inbound_part(
        &name,
        media_type(path, &bytes),
        &bytes,
    ))
}

/// A media type from the file's extension, else `text/plain` for UTF-8
/// text and `application/octet-stream` for the rest.
pub fn media_type(path: &Path, bytes: &[u8]) -> &'static str {
    let ext = path
        .extension()
        .map(|e| e.to_string_lossy().to_ascii_lowercase())
        .unwrap_or_default();
    match ext.as_str() {
        "md" | "markdown" => "text/markdown",
        "txt" | "log" | "text" => "text/plain",
        "csv" => "text/csv",
        "html" | "htm" => "text/html",
        "json" => "application/json",
        "yaml" | "yml" => "application/yaml",
        "toml" => "application/toml",
        "xml" => "application/xml",
        "pdf" => "application/pdf",
        "zip" => "application/zip",
        "gz" | "tgz" => "application/gzip",
        "tar" => "application/x-tar",
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "gif" => "image/gif",
        "webp" => "image/webp",
        "svg" => "image/svg+xml",
        "diff" | "patch" => "text/x-diff",
        "rs" | "py" | "js" | "ts" | "go" | "c" | "h" | "sh" | "rb" | "java" => "text/plain",
        _ if std::str::from_utf8(bytes).is_ok() => "text/plain",
        _ => "application/octet-stream",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn at_words_attach_files_only() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        let file = dir.path().join("notes.md");
        std::fs::write(&file, "x")?;
        let f = file.display().to_string();
        assert_eq!(at_paths(&format!("see @{f}"))?, vec![file.clone()]);
        assert_eq!(
            at_paths(&format!("see @{f}, and @{f}."))?,
            vec![file.clone()]
        );
        assert!(at_paths("thanks @alice, done")?.is_empty());
        assert!(at_paths("a lone @ sign")?.is_empty());
        assert!(at_paths("@/no/such/file").is_err());
        Ok(())
    }

    #[test]
    fn media_types() {
        assert_eq!(media_type(Path::new("a.MD"), b""), "text/markdown");
        assert_eq!(media_type(Path::new("a"), b"hello"), "text/plain");
        assert_eq!(
            media_type(Path::new("a"), &[0xff, 0xfe, 0]),
            "application/octet-stream"
        );
    }
}
