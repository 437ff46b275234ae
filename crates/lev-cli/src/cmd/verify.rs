//! `lev verify`: offline verification of a signed approval (SPEC sections 5 and 7).

use std::process::ExitCode;

use anyhow::{Context as _, anyhow};
use lev_approval::{
    Call, Clock as _, NotAuthorized, PeopleKeys, SystemClock, TrustedKeys, VerifiedResponse,
    VerifyError, verify_json,
};
use lev_client::files;
use time::OffsetDateTime;

use crate::exit;
use crate::report::{self, HINT};

/// `lev verify ENVELOPE --key KEY --request-id R --tool T (--args-file F | --args JSON)`
#[derive(Debug, clap::Args)]
#[command(group = clap::ArgGroup::new("call_args").required(true).args(["args_file", "args"]))]
pub struct Args {
    /// The envelope file, or `-` for standard input.
    #[arg(value_name = "ENVELOPE")]
    envelope: String,
    /// The trusted key(s): a JWKS (or JWK) file, or one public key in base64url.
    /// May be given more than once. A key may start with `-` (base64url).
    #[arg(long, value_name = "KEY", required = true, allow_hyphen_values = true)]
    key: Vec<String>,
    /// The tool-call id of the call about to run.
    #[arg(long, value_name = "R")]
    request_id: String,
    /// The tool of the call about to run.
    #[arg(long, value_name = "T")]
    tool: String,
    /// A file holding the call's args; its bytes are compared exactly, a final
    /// newline included. `-` reads standard input.
    #[arg(long, value_name = "F")]
    args_file: Option<String>,
    /// The call's args inline, compared exactly.
    #[arg(long, value_name = "JSON")]
    args: Option<String>,
    /// The conversation the call runs in (checked when given).
    #[arg(long, value_name = "C")]
    conversation: Option<String>,
    /// The caller the call acts for (checked when given).
    #[arg(long, value_name = "U")]
    caller: Option<String>,
    /// The sandbox mode the call runs under (checked when given).
    #[arg(long, value_name = "M")]
    sandbox_mode: Option<String>,
    /// Check validity at this RFC 3339 time (such as 2026-01-01T12:00:00Z)
    /// instead of now.
    #[arg(long, value_name = "TIME", value_parser = parse_time)]
    at: Option<OffsetDateTime>,
    /// Also require at least N distinct people's signed votes (SPEC section
    /// 13): each verifies under a key registered to its voter in
    /// --people-keys and binds this exact call. Fewer: exit 3.
    #[arg(long, value_name = "N", requires = "people_keys")]
    require_votes: Option<usize>,
    /// People's keys, as `GET /v1/people/keys` serves them (a JWKS file).
    #[arg(long, value_name = "FILE", requires = "require_votes")]
    people_keys: Option<String>,
    /// On exit 3 or 1, also print a verdict object on stdout
    /// (`{"verdict": "not_authorized" | "invalid", "reason" | "error", "message"}`),
    /// never any args. Exit 0 prints the verified approval either way.
    #[arg(long)]
    json: bool,
}

fn parse_time(text: &str) -> Result<OffsetDateTime, String> {
    lev_approval::parse_timestamp(text).map_err(|e| e.to_string())
}

/// Run `lev verify`.
///
/// # Errors
/// Anything that makes the envelope not genuine or not valid now, and any
/// input that cannot be read: exit 1.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    if args.envelope == "-" && args.args_file.as_deref() == Some("-") {
        return Err(anyhow!(
            "the envelope and --args-file cannot both be read from standard input"
        ));
    }
    let keys = crate::trust::load_keys(&args.key)?;
    let envelope =
        read_input(&args.envelope, files::limit::ENVELOPE).context("reading the envelope")?;
    let call_args = match (&args.args_file, &args.args) {
        (Some(file), _) => read_input(file, files::limit::ARGS).context("reading --args-file")?,
        (None, Some(inline)) => inline.clone().into_bytes(),
        (None, None) => return Err(anyhow!("expected --args-file or --args")),
    };
    let now = args.at.unwrap_or_else(|| SystemClock.now());
    let people = match &args.people_keys {
        Some(file) => {
            let text = read_input(file, files::limit::KEYS).context("reading --people-keys")?;
            let text = String::from_utf8(text).context("--people-keys: not UTF-8")?;
            Some(PeopleKeys::parse(&text).context("--people-keys")?)
        }
        None => None,
    };

    let verified = match verify_json(&envelope, &keys, now) {
        Ok(verified) => verified,
        Err(e) => {
            let err = invalid(&e, &envelope, &keys).context("the envelope is not a valid approval");
            if args.json {
                print_verdict(&Verdict::Invalid {
                    error: e.class(),
                    message: e.to_string(),
                })?;
            }
            report::error(&err);
            return Ok(ExitCode::from(exit::ERROR));
        }
    };

    let call = Call {
        request_id: &args.request_id,
        tool_name: &args.tool,
        args_json: &call_args,
        conversation_id: args.conversation.as_deref(),
        caller: args.caller.as_deref(),
        sandbox_mode: args.sandbox_mode.as_deref(),
    };
    match verified.check_call(&call) {
        Ok(()) => {
            if let (Some(needed), Some(people)) = (args.require_votes, &people)
                && let Err(e) = verified.require_signed_votes(people, needed)
            {
                if args.json {
                    print_verdict(&Verdict::NotAuthorized {
                        reason: "votes",
                        message: e.to_string(),
                    })?;
                }
                report::message(&format!(
                    "genuine approval of this call, but not by enough people's own signed votes: {e}{HINT}the decision must carry at least {needed} signed votes (payload version 2); people sign with `lev key init` and `lev respond`, or a passkey in the dashboard"
                ));
                return Ok(ExitCode::from(exit::DENIED));
            }
            println!("{}", output(&verified)?);
            Ok(ExitCode::SUCCESS)
        }
        Err(why) => {
            // Nothing a script could run: no approval, no args on stdout.
            if args.json {
                print_verdict(&Verdict::NotAuthorized {
                    reason: why.reason(),
                    message: match &why {
                        NotAuthorized::Denied { .. } => why.to_string(),
                        NotAuthorized::Mismatch(m) => {
                            format!("the approval is for another {}", m.field)
                        }
                    },
                })?;
            }
            report::message(&format!(
                "genuine approval, but it does not authorize this call: {why}{}",
                not_authorized_hint(&why, &verified, &call_args)
            ));
            Ok(ExitCode::from(exit::DENIED))
        }
    }
}

/// What `lev verify --json` prints on exit 3 or 1: the verdict, never args.
#[derive(serde::Serialize)]
#[serde(tag = "verdict", rename_all = "snake_case")]
enum Verdict {
    /// Exit 3: genuine, but not for this call.
    NotAuthorized {
        /// `denied`, or the field that differs.
        reason: &'static str,
        message: String,
    },
    /// Exit 1: not genuine, or not valid now.
    Invalid {
        /// The class of failure (`expired`, `bad_signature`, ...).
        error: &'static str,
        message: String,
    },
}

fn print_verdict(verdict: &Verdict) -> anyhow::Result<()> {
    crate::out::print_json(verdict).context("writing the verdict as JSON")
}

/// What `lev verify` prints: the verified approval and the args to run.
#[derive(serde::Serialize)]
struct Output<'a> {
    #[serde(flatten)]
    approval: &'a VerifiedResponse,
    /// The edit when there is one, else the proposed args.
    effective_args_json: &'a str,
}

/// The verified approval as JSON, with the args to run in `effective_args_json`.
fn output(verified: &VerifiedResponse) -> anyhow::Result<String> {
    crate::out::json_pretty(&Output {
        approval: verified,
        effective_args_json: verified.resolve_approved_call(),
    })
    .context("writing the approval as JSON")
}

/// Standard input for `-`, else the file's bytes; at most `limit` of them.
fn read_input(path: &str, limit: u64) -> anyhow::Result<Vec<u8>> {
    Ok(files::read_or_stdin(std::path::Path::new(path), limit)?)
}

/// The verification error, with a hint where one helps.
fn invalid(err: &VerifyError, envelope: &[u8], keys: &TrustedKeys) -> anyhow::Error {
    let hint = match err {
        VerifyError::UntrustedKey(_) => {
            let trusted: Vec<String> = keys.to_jwks().keys.into_iter().map(|k| k.kid).collect();
            format!("{HINT}trusted key ids: {}", trusted.join(", "))
        }
        VerifyError::Malformed(_) if looks_like_a_wrapper(envelope) => format!(
            "{HINT}this looks like a gate or wait answer: save its \"approval\" object as the envelope"
        ),
        _ => String::new(),
    };
    anyhow!("{err}{hint}")
}

fn looks_like_a_wrapper(bytes: &[u8]) -> bool {
    serde_json::from_slice::<serde_json::Value>(bytes)
        .ok()
        .and_then(|v| v.get("approval").cloned())
        .is_some_and(|a| a.is_object())
}

fn not_authorized_hint(why: &NotAuthorized, verified: &VerifiedResponse, args: &[u8]) -> String {
    if why.reason() != "args_json" {
        return String::new();
    }
    let signed = verified.payload.args_json.as_bytes();
    if args.strip_suffix(b"\n") == Some(signed) || args.strip_suffix(b"\r\n") == Some(signed) {
        format!(
            "{HINT}the args end with a newline that the signed args do not have; they are compared byte for byte"
        )
    } else if !verified.payload.modified_args_json.is_empty()
        && args == verified.payload.modified_args_json.as_bytes()
    {
        format!(
            "{HINT}these are the approver's edited args; the approval is bound to the proposed args (`args_json`): verify with those, and run the `effective_args_json` that lev verify prints"
        )
    } else {
        String::new()
    }
}
