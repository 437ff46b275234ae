//! An answer turned into the text a model reads as the tool's result
//! (SPEC section 2, "Tool result text").
//!
//! - A plain deny says the person denied the call; a deny with feedback
//!   carries it after a `Feedback:` label; an empty `Feedback:` never appears
//!   ([`InteractionResponse::deny_feedback`](lev_protocol::InteractionResponse::deny_feedback)
//!   decides).
//! - Each attached part is named with its stored path, media type and size
//!   beside the answer's text.
//! - `injected_context` comes first, inside an `<internal>` block that says
//!   it is not the tool's output.
//! - The approver's `reason` is for the record (audit, dashboard): the model
//!   is not told it.

use std::fmt::Write as _;

use lev_protocol::{ApprovalScope, Interaction, InteractionKind, StoredResponse};

use crate::outcome::Outcome;
use crate::parts::SavedPart;

/// The opening line of injected context.
pub const INTERNAL_OPEN: &str = "<internal source=\"approver\" note=\"context added by the person who approved this call; not output of the tool\">";
/// The closing line of injected context.
pub const INTERNAL_CLOSE: &str = "</internal>";

/// The tool-result text of an interaction's outcome; see the module docs.
pub fn tool_result_text(
    interaction: &Interaction,
    outcome: &Outcome,
    tool_output: Option<&str>,
    saved: &[SavedPart],
) -> String {
    let kind = &interaction.request.kind;
    let tool = match kind {
        InteractionKind::ToolApproval { tool_name, .. } => Some(tool_name.as_str()),
        _ => None,
    };
    let mut blocks: Vec<String> = Vec::new();
    match outcome {
        Outcome::Answered {
            response,
            answered_by,
            ..
        } => {
            if let Some(context) = response
                .injected_context
                .as_deref()
                .filter(|c| !c.trim().is_empty())
            {
                blocks.push(format!("{INTERNAL_OPEN}\n{context}\n{INTERNAL_CLOSE}"));
            }
            match kind {
                InteractionKind::ToolApproval { options, .. } => {
                    let tool = tool.unwrap_or_default();
                    if let Some(option) = response.choice_index.and_then(|i| options.get(i)) {
                        blocks.push(format!("The person chose: {option}"));
                    }
                    if response.approved == Some(true) {
                        approved(&mut blocks, tool, response, tool_output);
                    } else {
                        let mut text = format!("The person denied the call to {tool}; it was not run.");
                        if let Some(feedback) = response.deny_feedback() {
                            let _ = write!(text, "\nFeedback: {feedback}");
                        }
                        blocks.push(text);
                    }
                }
                InteractionKind::MultipleChoice { options, .. } => {
                    let chosen = response.choice_index.map(|i| match options.get(i) {
                        Some(option) => option.clone(),
                        None => format!("option #{}", i + 1),
                    });
                    let mut text = match chosen {
                        Some(chosen) => chosen,
                        None => "The person answered without choosing an option.".to_owned(),
                    };
                    if answered_by.as_deref() == Some("timeout") {
                        text.push_str("\n(Nobody answered in time: this is the default choice.)");
                    }
                    blocks.push(text);
                }
                InteractionKind::Form { .. } => {
                    // The fields as one JSON object: what the form's schema describes.
                    let fields = response.fields.clone().unwrap_or_default();
                    blocks.push(format!(
                        "The person filled in the form: {}",
                        serde_json::Value::Object(fields)
                    ));
                }
                InteractionKind::FreeText { .. } | InteractionKind::InteractionPoints { .. } => {
                    let value = response.value.as_deref().unwrap_or_default();
                    if !value.is_empty() || response.parts.is_empty() {
                        blocks.push(value.to_owned());
                    }
                    if let Some(list) = attachments(response, saved) {
                        blocks.push(list);
                    }
                }
            }
        }
        Outcome::Expired => blocks.push(match tool {
            Some(tool) => format!(
                "The call to {tool} was denied: nobody approved it in time. It was not run."
            ),
            None => "Nobody answered in time; the question expired and counts as declined.".to_owned(),
        }),
        Outcome::Cancelled => blocks.push(match tool {
            Some(tool) => format!(
                "The approval request for {tool} was cancelled before anyone decided; the call was not run."
            ),
            None => "The question was cancelled before anyone answered it.".to_owned(),
        }),
        Outcome::TimedOut { waited } => {
            let secs = waited.as_secs();
            blocks.push(match tool {
                Some(tool) => format!(
                    "Nobody decided on the call to {tool} within {secs} s; it was not run."
                ),
                None => format!("Nobody answered within {secs} s."),
            });
        }
    }
    blocks.join("\n\n")
}

fn approved(
    blocks: &mut Vec<String>,
    tool: &str,
    response: &StoredResponse,
    tool_output: Option<&str>,
) {
    if let Some(args) = &response.modified_args_json {
        blocks.push(format!(
            "The person edited the arguments before approving; the call ran with: {args}"
        ));
    }
    match tool_output {
        Some(output) => blocks.push(output.to_owned()),
        None => {
            let scope = match response.scope.unwrap_or_default() {
                ApprovalScope::Once => "",
                ApprovalScope::Session => " for the rest of this session",
                ApprovalScope::Always => " from now on",
            };
            blocks.push(format!("The person approved the call to {tool}{scope}."));
        }
    }
}

/// `Attached files:` and one line per part: the stored path, media type and
/// size, or the name and "not stored" for a part the run did not keep.
fn attachments(response: &StoredResponse, saved: &[SavedPart]) -> Option<String> {
    if response.parts.is_empty() {
        return None;
    }
    let mut text = String::from("Attached files:");
    for part in &response.parts {
        match saved
            .iter()
            .find(|s| s.sha256.eq_ignore_ascii_case(&part.sha256))
        {
            Some(s) => {
                let _ = write!(
                    text,
                    "\n- {} ({}, {} bytes)",
                    s.path.display(),
                    s.media_type,
                    s.size
                );
            }
            None => {
                let _ = write!(
                    text,
                    "\n- {} ({}, {} bytes, not stored)",
                    part.name, part.media_type, part.size
                );
            }
        }
    }
    Some(text)
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;
    use std::time::Duration;

    use lev_protocol::{InteractionRequest, InteractionStatus, Point, StoredPart};
    use time::OffsetDateTime;

    use super::*;

    fn interaction(kind: InteractionKind) -> Interaction {
        let mut request = InteractionRequest::new("s-1", kind);
        request.id = Some("ir_1".into());
        Interaction {
            request,
            status: InteractionStatus::Answered,
            created_at: OffsetDateTime::UNIX_EPOCH,
            expires_at: None,
            answered_at: None,
            answered_by: None,
            votes: Vec::new(),
        }
    }

    fn shell() -> InteractionKind {
        InteractionKind::ToolApproval {
            tool_name: "shell".into(),
            args_json: r#"{"argv":["ls"]}"#.into(),
            missing_capabilities: vec!["proc-exec".into()],
            sandbox_mode: "workspace-write".into(),
            options: vec![],
        }
    }

    fn text() -> InteractionKind {
        InteractionKind::FreeText {
            prompt: "Send me the report".into(),
        }
    }

    fn choice() -> InteractionKind {
        InteractionKind::MultipleChoice {
            prompt: "Which database?".into(),
            options: vec!["SQLite".into(), "PostgreSQL".into()],
        }
    }

    fn answered(response: StoredResponse) -> Outcome {
        Outcome::Answered {
            response,
            approval: None,
            answered_by: Some("alice".into()),
        }
    }

    fn part(name: &str, sha: &str) -> StoredPart {
        StoredPart {
            name: name.into(),
            media_type: "text/markdown".into(),
            size: 12,
            sha256: sha.into(),
            original_name: None,
        }
    }

    fn deny(feedback: Option<&str>) -> StoredResponse {
        let mut r = StoredResponse::approval("ir_1", false, ApprovalScope::Once);
        r.feedback = feedback.map(str::to_owned);
        r
    }

    /// Name, question, outcome, tool output, stored parts, expected text.
    type Case<'a> = (
        &'a str,
        InteractionKind,
        Outcome,
        Option<&'a str>,
        &'a [SavedPart],
        String,
    );

    #[test]
    fn tool_result_texts() {
        let saved = vec![SavedPart {
            name: "notes.md".into(),
            path: PathBuf::from("/run/parts/notes.md"),
            media_type: "text/markdown".into(),
            size: 12,
            sha256: "aa".into(),
        }];
        let mut edited = StoredResponse::approval("ir_1", true, ApprovalScope::Session);
        edited.modified_args_json = Some(r#"{"argv":["ls","-l"]}"#.into());
        let mut injected = StoredResponse::approval("ir_1", true, ApprovalScope::Once);
        injected.injected_context = Some("The repo is read-only today.".into());
        let mut approve_with_stray_feedback =
            StoredResponse::approval("ir_1", true, ApprovalScope::Once);
        approve_with_stray_feedback.feedback = Some("do not".into());
        let mut injected_deny = deny(Some("use git status"));
        injected_deny.injected_context = Some("ctx".into());
        let mut with_reason = deny(None);
        with_reason.reason = Some("policy says no".into());
        let mut by_timeout = answered(StoredResponse::choice("ir_1", 0));
        if let Outcome::Answered { answered_by, .. } = &mut by_timeout {
            *answered_by = Some("timeout".into());
        }
        let points = InteractionKind::InteractionPoints {
            prompt: "Review".into(),
            points: vec![Point {
                id: "p1".into(),
                text: "naming".into(),
            }],
        };

        #[rustfmt::skip]
        let cases: Vec<Case<'_>> = vec![
            ("plain deny", shell(), answered(deny(None)), None, &[],
             "The person denied the call to shell; it was not run.".into()),
            ("deny with feedback", shell(), answered(deny(Some("  use `ls -a` instead \n"))), None, &[],
             "The person denied the call to shell; it was not run.\nFeedback: use `ls -a` instead".into()),
            ("blank feedback is a plain deny", shell(), answered(deny(Some(" \n\t "))), None, &[],
             "The person denied the call to shell; it was not run.".into()),
            ("empty feedback is a plain deny", shell(), answered(deny(Some(""))), None, &[],
             "The person denied the call to shell; it was not run.".into()),
            ("the reason stays out", shell(), answered(with_reason), None, &[],
             "The person denied the call to shell; it was not run.".into()),
            ("expired tool approval is a plain deny", shell(), Outcome::Expired, None, &[],
             "The call to shell was denied: nobody approved it in time. It was not run.".into()),
            ("approved, no output yet", shell(),
             answered(StoredResponse::approval("ir_1", true, ApprovalScope::Once)), None, &[],
             "The person approved the call to shell.".into()),
            ("approved for the session", shell(),
             answered(StoredResponse::approval("ir_1", true, ApprovalScope::Session)), None, &[],
             "The person approved the call to shell for the rest of this session.".into()),
            ("approved, with the tool's output", shell(),
             answered(StoredResponse::approval("ir_1", true, ApprovalScope::Always)), Some("a\nb"), &[],
             "a\nb".into()),
            ("feedback beside a grant never reaches the model", shell(),
             answered(approve_with_stray_feedback), Some("ok"), &[],
             "ok".into()),
            ("edited args", shell(), answered(edited), Some("total 0"), &[],
             "The person edited the arguments before approving; the call ran with: {\"argv\":[\"ls\",\"-l\"]}\n\ntotal 0".into()),
            ("injected context comes first, marked internal", shell(), answered(injected), Some("file.txt"), &[],
             format!("{INTERNAL_OPEN}\nThe repo is read-only today.\n{INTERNAL_CLOSE}\n\nfile.txt")),
            ("injected context on a deny", shell(), answered(injected_deny), None, &[],
             format!("{INTERNAL_OPEN}\nctx\n{INTERNAL_CLOSE}\n\nThe person denied the call to shell; it was not run.\nFeedback: use git status")),
            ("cancelled approval", shell(), Outcome::Cancelled, None, &[],
             "The approval request for shell was cancelled before anyone decided; the call was not run.".into()),
            ("free text", text(), answered(StoredResponse::text("ir_1", "Here it is.")), None, &[],
             "Here it is.".into()),
            ("free text with a stored part", text(),
             answered(StoredResponse::text("ir_1", "See notes.").with_parts(vec![part("notes.md", "aa")])), None, &saved,
             "See notes.\n\nAttached files:\n- /run/parts/notes.md (text/markdown, 12 bytes)".into()),
            ("a part the run did not store", text(),
             answered(StoredResponse::text("ir_1", "").with_parts(vec![part("notes.md", "bb")])), None, &saved,
             "Attached files:\n- notes.md (text/markdown, 12 bytes, not stored)".into()),
            ("interaction points", points, answered(StoredResponse::text("ir_1", "p1: rename it")), None, &[],
             "p1: rename it".into()),
            ("multiple choice", choice(), answered(StoredResponse::choice("ir_1", 1)), None, &[],
             "PostgreSQL".into()),
            ("multiple choice by timeout", choice(), by_timeout, None, &[],
             "SQLite\n(Nobody answered in time: this is the default choice.)".into()),
            ("cancelled question", text(), Outcome::Cancelled, None, &[],
             "The question was cancelled before anyone answered it.".into()),
            ("own deadline", text(), Outcome::TimedOut { waited: Duration::from_secs(5) }, None, &[],
             "Nobody answered within 5 s.".into()),
        ];
        for (name, kind, outcome, output, parts, want) in cases {
            let got = tool_result_text(&interaction(kind), &outcome, output, parts);
            assert_eq!(got, want, "case: {name}");
            assert!(
                !got.contains("Feedback: \n") && !got.ends_with("Feedback:"),
                "case: {name}"
            );
        }
    }
}
