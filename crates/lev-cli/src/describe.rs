//! Interactions and answers as people read them on a terminal. Every piece
//! of agent- or person-supplied text goes through [`term`] on its way out.

use std::fmt::Write as _;

use lev_protocol::api::InteractionView;
use lev_protocol::{Interaction, InteractionKind, InteractionStatus, StoredResponse};

use crate::term::{self, Style};

/// The one-line summary of what an interaction asks.
pub fn summary(interaction: &Interaction) -> String {
    let request = &interaction.request;
    let what = match &request.kind {
        InteractionKind::FreeText { prompt }
        | InteractionKind::InteractionPoints { prompt, .. } => prompt.clone(),
        InteractionKind::Form { prompt, schema } => {
            let names: Vec<&str> = schema
                .properties
                .0
                .iter()
                .map(|(n, _)| n.as_str())
                .collect();
            format!("{prompt} {{{}}}", names.join(", "))
        }
        InteractionKind::MultipleChoice { prompt, options } => {
            format!("{prompt} [{}]", options.join(" | "))
        }
        InteractionKind::ToolApproval {
            tool_name,
            args_json,
            ..
        } => format!("{tool_name} {}", compact_json(args_json)),
    };
    match &request.title {
        Some(title) if !title.is_empty() => format!("{title}: {what}"),
        _ => what,
    }
}

/// A tool approval's tally for listings, when more than one person must
/// approve or votes were cast: `1/2 approvals`.
pub fn tally(interaction: &Interaction) -> Option<String> {
    let needed = interaction.approvals_needed();
    (needed > 1 || !interaction.votes.is_empty())
        .then(|| format!("{}/{needed} approvals", interaction.approvals()))
}

/// A kind's short name for listings.
pub fn kind_label(kind: &InteractionKind) -> &'static str {
    match kind {
        InteractionKind::FreeText { .. } => "text",
        InteractionKind::MultipleChoice { .. } => "choice",
        InteractionKind::ToolApproval { .. } => "approval",
        InteractionKind::InteractionPoints { .. } => "points",
        InteractionKind::Form { .. } => "form",
    }
}

/// A form's fields, one a line: name, type and constraints, label, help.
fn form_fields(out: &mut String, style: Style, schema: &lev_protocol::form::FormSchema) {
    let Ok(form) = lev_protocol::form::parse_schema(schema, &lev_protocol::Limits::default())
    else {
        let _ = writeln!(out, "  {}", style.red("(the form's schema does not read)"));
        return;
    };
    for field in &form.fields {
        let mut line = format!(
            "  - {} ({}){}",
            style.bold(&term::one_line(&field.name)),
            field_type_text(&field.ty),
            if field.required { ", required" } else { "" }
        );
        if field.title.is_some() {
            let _ = write!(line, ": {}", term::one_line(field.label()));
        }
        if let Some(default) = &field.default {
            let _ = write!(
                line,
                " {}",
                style.dim(&format!(
                    "[default {}]",
                    term::one_line(&default.to_string())
                ))
            );
        }
        let _ = writeln!(out, "{line}");
        if let Some(help) = &field.description {
            let _ = writeln!(out, "      {}", style.dim(&term::one_line(help)));
        }
    }
}

/// A field's type and constraints, for a person: `integer 1..=10`,
/// `string, email`, `one of: a | b`.
pub fn field_type_text(ty: &lev_protocol::form::FieldType) -> String {
    use lev_protocol::form::FieldType;
    match ty {
        FieldType::String {
            min_length,
            max_length,
            format,
        } => {
            let mut s = "string".to_owned();
            if let Some(f) = format {
                let _ = write!(s, ", {}", f.as_str());
            }
            match (min_length, max_length) {
                (Some(lo), Some(hi)) => {
                    let _ = write!(s, ", {lo} to {hi} characters");
                }
                (Some(lo), None) => {
                    let _ = write!(s, ", at least {lo} characters");
                }
                (None, Some(hi)) => {
                    let _ = write!(s, ", at most {hi} characters");
                }
                (None, None) => {}
            }
            s
        }
        FieldType::Enum { values, .. } => {
            format!("one of: {}", term::one_line(&values.join(" | ")))
        }
        FieldType::Number {
            integer,
            minimum,
            maximum,
        } => {
            let mut s = if *integer { "integer" } else { "number" }.to_owned();
            match (minimum, maximum) {
                (Some(lo), Some(hi)) => {
                    let _ = write!(s, " {lo} to {hi}");
                }
                (Some(lo), None) => {
                    let _ = write!(s, " >= {lo}");
                }
                (None, Some(hi)) => {
                    let _ = write!(s, " <= {hi}");
                }
                (None, None) => {}
            }
            s
        }
        FieldType::Boolean => "true or false".to_owned(),
    }
}

/// A status, coloured.
pub fn status(style: Style, status: InteractionStatus) -> String {
    let s = status.as_str();
    match status {
        InteractionStatus::Pending => style.yellow(s),
        InteractionStatus::Answered => style.green(s),
        InteractionStatus::Expired | InteractionStatus::Cancelled => style.dim(s),
    }
}

/// JSON text on one line when it is JSON, else as sent. Only whitespace
/// changes: numbers, escapes and key order stay as written (a reading
/// through `serde_json::Value` would round big numbers and sort keys).
pub fn compact_json(text: &str) -> String {
    reformat_json(text, false)
}

/// JSON text re-spaced with a two-space indent (see [`compact_json`]).
pub fn pretty_json(text: &str) -> String {
    reformat_json(text, true)
}

/// `text` re-spaced (two-space indent when `pretty`, none otherwise) when it
/// is one JSON value; else `text` itself.
fn reformat_json(text: &str, pretty: bool) -> String {
    if lev_protocol::json::check_strict_json(text).is_err() {
        return text.to_owned();
    }
    let mut out = String::with_capacity(text.len() * 2);
    let mut depth = 0usize;
    let mut chars = text.chars().peekable();
    let newline = |out: &mut String, depth: usize| {
        if pretty {
            out.push('\n');
            out.push_str(&"  ".repeat(depth));
        }
    };
    while let Some(c) = chars.next() {
        match c {
            '"' => {
                out.push(c);
                let mut escaped = false;
                for c in chars.by_ref() {
                    out.push(c);
                    match c {
                        _ if escaped => escaped = false,
                        '\\' => escaped = true,
                        '"' => break,
                        _ => {}
                    }
                }
            }
            ' ' | '\n' | '\r' | '\t' => {}
            '{' | '[' => {
                out.push(c);
                while chars.peek().is_some_and(|c| c.is_ascii_whitespace()) {
                    chars.next();
                }
                if matches!(chars.peek(), Some('}' | ']')) {
                    if let Some(close) = chars.next() {
                        out.push(close);
                    }
                } else {
                    depth += 1;
                    newline(&mut out, depth);
                }
            }
            '}' | ']' => {
                depth = depth.saturating_sub(1);
                newline(&mut out, depth);
                out.push(c);
            }
            ',' => {
                out.push(c);
                newline(&mut out, depth);
            }
            ':' => out.push_str(if pretty { ": " } else { ":" }),
            c => out.push(c),
        }
    }
    out
}

fn indent(text: &str, by: &str) -> String {
    text.lines()
        .map(|l| format!("{by}{l}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// An answer in a few words: `"yes"`, `choice 1: PostgreSQL`, `approved (session)`,
/// `denied: use git status`.
pub fn answer_summary(kind: &InteractionKind, response: &StoredResponse) -> String {
    let options: &[String] = match kind {
        InteractionKind::MultipleChoice { options, .. }
        | InteractionKind::ToolApproval { options, .. } => options,
        _ => &[],
    };
    let mut parts = Vec::new();
    if let Some(approved) = response.approved {
        if approved {
            let scope = response.scope.unwrap_or_default().as_str();
            let mut s = format!("approved ({scope})");
            if response.modified_args_json.is_some() {
                s.push_str(", args edited");
            }
            parts.push(s);
        } else {
            match response.deny_feedback() {
                Some(feedback) => parts.push(format!("denied: {feedback}")),
                None => parts.push("denied".to_owned()),
            }
        }
    }
    if let Some(i) = response.choice_index {
        // People count options from 1; the wire's index is 0-based.
        let n = i + 1;
        match options.get(i) {
            Some(option) => parts.push(format!("choice {n}: {option}")),
            None => parts.push(format!("choice {n}")),
        }
    }
    if let Some(value) = &response.value {
        parts.push(format!("{value:?}"));
    }
    if let Some(fields) = &response.fields {
        let pairs: Vec<String> = fields.iter().map(|(k, v)| format!("{k}={v}")).collect();
        parts.push(pairs.join(" "));
    }
    if !response.parts.is_empty() {
        parts.push(format!("{} attachment(s)", response.parts.len()));
    }
    if parts.is_empty() {
        "answered".to_owned()
    } else {
        parts.join(", ")
    }
}

/// Everything about one interaction, for `lev show`.
pub fn detail(style: Style, view: &InteractionView, base_url: &str) -> String {
    let i = &view.request;
    let r = &i.request;
    let mut out = String::new();
    header(&mut out, style, i);
    out.push('\n');
    question(&mut out, style, i);
    if let Some(response) = &view.response {
        out.push('\n');
        let _ = writeln!(out, "{}", style.bold("answer"));
        let _ = writeln!(
            out,
            "{}",
            indent(&response_detail(style, &r.kind, response, base_url), "  ")
        );
    }
    if let Some(envelope) = &view.approval {
        let kids: Vec<&str> = envelope
            .signatures
            .iter()
            .map(|s| s.keyid.as_str())
            .collect();
        let _ = writeln!(
            out,
            "\n{} DSSE envelope signed by key {} ({})",
            style.bold("signed"),
            term::one_line(&kids.join(", ")),
            term::one_line(&envelope.payload_type)
        );
    }
    if i.status == InteractionStatus::Pending {
        let id = term::one_line(i.id());
        let how = match &r.kind {
            InteractionKind::FreeText { .. } | InteractionKind::InteractionPoints { .. } => {
                format!("lev respond {id} --text TEXT [--attach FILE]")
            }
            InteractionKind::MultipleChoice { .. } => format!("lev respond {id} --choice N"),
            InteractionKind::Form { .. } => {
                format!("lev respond {id} --field NAME=VALUE ... | --fields-json JSON")
            }
            InteractionKind::ToolApproval { .. } => {
                format!("lev respond {id} --approve | --deny [--feedback TEXT]")
            }
        };
        let _ = writeln!(out, "\n{} {how}", style.dim("answer with:"));
    }
    out
}

/// The interaction's id and status, then one field a line: kind, session,
/// conversation, turn, caller, title, times, who answered.
fn header(out: &mut String, style: Style, i: &Interaction) {
    let r = &i.request;
    let _ = writeln!(
        out,
        "{} {}  {}",
        style.bold("interaction"),
        style.cyan(&term::one_line(i.id())),
        status(style, i.status)
    );
    let mut field = |name: &str, value: &str| {
        let padded = format!("{name:<13}");
        let _ = writeln!(out, "  {} {}", style.dim(&padded), term::one_line(value));
    };
    field("kind", i.request.kind.type_name());
    field("session", &r.session_id);
    for (name, value) in [
        ("conversation", &r.conversation_id),
        ("turn", &r.turn_id),
        ("caller", &r.caller),
        ("title", &r.title),
    ] {
        if let Some(value) = value {
            field(name, value);
        }
    }
    field("created", &term::rfc3339(Some(i.created_at)));
    if i.expires_at.is_some() {
        field("expires", &term::rfc3339(i.expires_at));
    }
    if i.answered_at.is_some() {
        field("answered", &term::rfc3339(i.answered_at));
    }
    if let Some(by) = &i.answered_by {
        field("answered by", by);
    }
}

/// The question: its prompt and choices, or a tool call (tool, sandbox
/// mode, needs, args, options) and its votes.
fn question(out: &mut String, style: Style, i: &Interaction) {
    let r = &i.request;
    match &r.kind {
        InteractionKind::FreeText { prompt } => {
            let _ = writeln!(out, "{}", indent(&term::multi_line(prompt), "  "));
        }
        InteractionKind::MultipleChoice { prompt, options } => {
            let _ = writeln!(out, "{}", indent(&term::multi_line(prompt), "  "));
            for (n, option) in (1..).zip(options) {
                let _ = writeln!(out, "  [{n}] {}", term::one_line(option));
            }
        }
        InteractionKind::Form { prompt, schema } => {
            let _ = writeln!(out, "{}", indent(&term::multi_line(prompt), "  "));
            form_fields(out, style, schema);
        }
        InteractionKind::InteractionPoints { prompt, points } => {
            let _ = writeln!(out, "{}", indent(&term::multi_line(prompt), "  "));
            for point in points {
                let _ = writeln!(
                    out,
                    "  - {}: {}",
                    term::one_line(&point.id),
                    term::one_line(&point.text)
                );
            }
        }
        InteractionKind::ToolApproval {
            tool_name,
            args_json,
            missing_capabilities,
            sandbox_mode,
            options,
        } => {
            let mut row = |name: &str, value: &str| {
                let padded = format!("{name:<13}");
                let _ = writeln!(out, "  {} {}", style.dim(&padded), term::one_line(value));
            };
            row("tool", tool_name);
            if !sandbox_mode.is_empty() {
                row("sandbox mode", sandbox_mode);
            }
            if !missing_capabilities.is_empty() {
                row("needs", &missing_capabilities.join(", "));
            }
            let _ = writeln!(out, "  {}", style.dim("args"));
            let _ = writeln!(
                out,
                "{}",
                indent(&term::multi_line(&pretty_json(args_json)), "    ")
            );
            for (n, option) in (1..).zip(options) {
                let _ = writeln!(out, "  [{n}] {}", term::one_line(option));
            }
            votes(out, style, i);
        }
    }
}

/// A tool approval's votes (SPEC section 13): how many must approve, each
/// vote, who may still vote and when the escalation opens.
fn votes(out: &mut String, style: Style, i: &lev_protocol::Interaction) {
    let needed = i.approvals_needed();
    let q = i.request.quorum.as_ref();
    if needed <= 1 && q.is_none() && i.votes.is_empty() {
        return;
    }
    let now = time::OffsetDateTime::now_utc();
    let pad = |name: &str| style.dim(&format!("{name:<13}"));
    let mut head = format!("{} of {needed} approvals", i.approvals());
    if q.is_some_and(|q| q.require_signed_votes) {
        head.push_str(", each signed by the voter's own key");
    }
    let _ = writeln!(out, "  {} {head}", pad("votes"));
    for v in &i.votes {
        let what = if v.approved {
            let scope = v.response.scope.unwrap_or_default().as_str();
            match v.response.modified_args_json.as_deref() {
                Some(edit) => format!("approve ({scope}) with args {}", compact_json(edit)),
                None => format!("approve ({scope})"),
            }
        } else {
            "deny".to_owned()
        };
        let signed = if v.signed { "signed" } else { "unsigned" };
        let _ = writeln!(
            out,
            "    {:<12} {}  {}  {}",
            term::one_line(&v.voter),
            if v.approved {
                style.green(&what)
            } else {
                style.red(&what)
            },
            style.dim(signed),
            style.dim(&term::rfc3339(Some(v.at)))
        );
    }
    if i.status != InteractionStatus::Pending {
        return;
    }
    let may = match i.may_still_vote(now) {
        None => "any approver (not those who voted)".to_owned(),
        Some(names) if names.is_empty() => "nobody".to_owned(),
        Some(names) => names.join(", "),
    };
    let _ = writeln!(out, "  {} {}", pad("may vote"), term::one_line(&may));
    if let (Some(at), Some(q)) = (i.escalates_at(), q) {
        let when = if now < at {
            let left = (at - now).whole_seconds().max(0);
            format!("in {left} s ({})", term::rfc3339(Some(at)))
        } else {
            format!("since {}", term::rfc3339(Some(at)))
        };
        let _ = writeln!(
            out,
            "  {} {} may vote too, {when}",
            pad("escalates"),
            term::one_line(&q.escalate_to.join(", "))
        );
    }
}

fn response_detail(
    style: Style,
    kind: &InteractionKind,
    response: &StoredResponse,
    base_url: &str,
) -> String {
    let mut out = String::new();
    let options: &[String] = match kind {
        InteractionKind::MultipleChoice { options, .. }
        | InteractionKind::ToolApproval { options, .. } => options,
        _ => &[],
    };
    if let Some(approved) = response.approved {
        if approved {
            let _ = writeln!(
                out,
                "{} ({})",
                style.green("approved"),
                response.scope.unwrap_or_default().as_str()
            );
        } else {
            let _ = writeln!(out, "{}", style.red("denied"));
        }
    }
    if let Some(i) = response.choice_index {
        let option = options
            .get(i)
            .map(|o| term::one_line(o))
            .unwrap_or_default();
        let _ = writeln!(out, "choice [{}] {option}", i + 1);
    }
    if let Some(value) = &response.value {
        let _ = writeln!(out, "{}", term::multi_line(value));
    }
    if let Some(feedback) = response.deny_feedback() {
        let _ = writeln!(
            out,
            "{} {}",
            style.dim("feedback:"),
            term::multi_line(feedback)
        );
    }
    if let Some(args) = &response.modified_args_json {
        let _ = writeln!(
            out,
            "{} {}",
            style.dim("edited args:"),
            term::one_line(&compact_json(args))
        );
    }
    if let Some(context) = &response.injected_context {
        let _ = writeln!(
            out,
            "{} {}",
            style.dim("injected context:"),
            term::multi_line(context)
        );
    }
    if let Some(reason) = &response.reason {
        let _ = writeln!(out, "{} {}", style.dim("reason:"), term::multi_line(reason));
    }
    if let Some(grant_args) = &response.grant_args {
        for (pointer, regex) in grant_args {
            let _ = writeln!(
                out,
                "{} {} ~ {}",
                style.dim("grant args:"),
                term::one_line(pointer),
                term::one_line(regex)
            );
        }
    }
    for part in &response.parts {
        let _ = writeln!(
            out,
            "{} {} ({}, {} bytes) {}/v1/blobs/{}",
            style.dim("attachment:"),
            term::one_line(&part.name),
            term::one_line(&part.media_type),
            part.size,
            base_url,
            term::one_line(&part.sha256)
        );
    }
    out.trim_end().to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_is_respaced_never_reread() {
        let text = r#"{"cmd": "ls", "amount":9007199254740993,"id":123456789012345678901234567890,
            "z": 1.0, "a": [], "s": "x, \\\" {y}: \u00e9", "o": {"b": [1, {}]}}"#;
        assert_eq!(
            compact_json(text),
            r#"{"cmd":"ls","amount":9007199254740993,"id":123456789012345678901234567890,"z":1.0,"a":[],"s":"x, \\\" {y}: \u00e9","o":{"b":[1,{}]}}"#
        );
        assert_eq!(
            pretty_json(r#"{"b":[1,2],"a":{},"n":123456789012345678901234567890}"#),
            "{\n  \"b\": [\n    1,\n    2\n  ],\n  \"a\": {},\n  \"n\": 123456789012345678901234567890\n}"
        );
        assert_eq!(compact_json("not json {"), "not json {");
    }
}
