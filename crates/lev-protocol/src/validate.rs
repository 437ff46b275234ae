//! Validation of requests and of answers against their request.
//!
//! Every error names the field at fault, so a client (or a person reading the
//! HTTP 422) knows what to fix. [`ValidationErrorKind::TooLarge`] maps to 413,
//! [`ValidationErrorKind::Invalid`] to 422.

use crate::ids::{is_valid_capability, is_valid_id, is_valid_tool_name};
use crate::interaction::{InteractionKind, InteractionRequest, OnTimeout};
use crate::response::InteractionResponse;

/// Size limits that [`validate_request`] enforces (SPEC section 9).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Longest prompt (and title), in bytes.
    pub prompt_bytes: usize,
    /// Longest `args_json`, in bytes.
    pub args_json_bytes: usize,
    /// Most options of a question.
    pub options: usize,
    /// Longest option, in bytes.
    pub option_bytes: usize,
    /// Most points of an `interaction_points` question.
    pub points: usize,
    /// Largest serialised `metadata`, in bytes.
    pub metadata_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            prompt_bytes: 64 * 1024,
            args_json_bytes: 256 * 1024,
            options: 64,
            option_bytes: 1024,
            points: 64,
            metadata_bytes: 16 * 1024,
        }
    }
}

/// Longest text field of an answer (`value`, `feedback`, `reason`,
/// `injected_context`), in bytes (SPEC section 9).
pub const ANSWER_TEXT_BYTES: usize = 64 * 1024;

/// The most an agent's `reason` (on an interaction or a gate call) may weigh.
pub const REASON_BYTES: usize = 4 * 1024;
/// Most `grant_args` patterns of one answer: each is compiled for every gate
/// call the grant is tried on.
pub const GRANT_ARGS_MAX: usize = 16;
/// Longest `grant_args` pointer or pattern, in bytes.
pub const GRANT_ARGS_PATTERN_BYTES: usize = 1024;

/// Why a request or a response is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct ValidationError {
    /// The field at fault, as a dotted path (`kind.options`).
    pub field: String,
    /// Too large (413) or otherwise invalid (422).
    pub kind: ValidationErrorKind,
    /// What was expected and what was found.
    pub message: String,
    /// A form answer's failing properties, each with why (empty otherwise).
    pub fields: std::collections::BTreeMap<String, String>,
}

/// The class of a [`ValidationError`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ValidationErrorKind {
    /// Over a size limit: HTTP 413.
    TooLarge,
    /// Anything else: HTTP 422.
    Invalid,
}

fn invalid(field: &str, message: impl Into<String>) -> ValidationError {
    ValidationError {
        field: field.to_owned(),
        kind: ValidationErrorKind::Invalid,
        message: message.into(),
        fields: std::collections::BTreeMap::new(),
    }
}

fn too_large(field: &str, limit: usize, found: usize) -> ValidationError {
    ValidationError {
        field: field.to_owned(),
        kind: ValidationErrorKind::TooLarge,
        message: format!("at most {limit} bytes allowed, found {found}"),
        fields: std::collections::BTreeMap::new(),
    }
}

/// Check an identifier field.
///
/// # Errors
/// When `value` is not 1 to 128 of `A-Z a-z 0-9 . _ : -`.
pub fn check_id(field: &str, value: &str) -> Result<(), ValidationError> {
    if is_valid_id(value) {
        Ok(())
    } else {
        Err(invalid(
            field,
            format!(
                "expected 1 to 128 characters of A-Z a-z 0-9 . _ : -, found {:?}",
                truncate(value, 64)
            ),
        ))
    }
}

fn check_opt_id(field: &str, value: Option<&str>) -> Result<(), ValidationError> {
    value.map_or(Ok(()), |v| check_id(field, v))
}

fn check_len(field: &str, value: &str, limit: usize) -> Result<(), ValidationError> {
    if value.len() > limit {
        Err(too_large(field, limit, value.len()))
    } else {
        Ok(())
    }
}

/// Check an agent's `reason` (interaction or gate call): at most 4 KiB.
///
/// # Errors
/// A reason over [`REASON_BYTES`].
pub fn check_reason(field: &str, reason: Option<&str>) -> Result<(), ValidationError> {
    reason.map_or(Ok(()), |r| check_len(field, r, REASON_BYTES))
}

/// Check a tool name: 1 to 256 characters, no control character.
///
/// # Errors
/// When the name is empty, too long or holds a control character.
pub fn check_tool_name(field: &str, value: &str) -> Result<(), ValidationError> {
    if is_valid_tool_name(value) {
        Ok(())
    } else {
        Err(invalid(
            field,
            format!(
                "expected 1 to 256 characters without control characters, found {:?}",
                truncate(value, 64)
            ),
        ))
    }
}

/// Check a list of capability names.
///
/// # Errors
/// When a name is not kebab-case (`^[a-z][a-z0-9]*(-[a-z0-9]+)*$`).
pub fn check_capabilities(field: &str, caps: &[String]) -> Result<(), ValidationError> {
    match caps.iter().find(|c| !is_valid_capability(c)) {
        Some(bad) => Err(invalid(
            field,
            format!(
                "expected kebab-case capability names such as \"fs-write\", found {:?}",
                truncate(bad, 64)
            ),
        )),
        None => Ok(()),
    }
}

/// Check `args_json`: within the size limit, JSON, no object with a duplicated key.
///
/// # Errors
/// 413 past the limit, 422 when it is not JSON or repeats a key.
pub fn check_args_json(
    field: &str,
    args_json: &str,
    limits: &Limits,
) -> Result<(), ValidationError> {
    check_len(field, args_json, limits.args_json_bytes)?;
    crate::json::check_strict_json(args_json).map_err(|e| invalid(field, e))
}

fn check_options(
    field: &str,
    options: &[String],
    min: usize,
    limits: &Limits,
) -> Result<(), ValidationError> {
    if options.len() < min || options.len() > limits.options {
        return Err(invalid(
            field,
            format!(
                "expected {min} to {} options, found {}",
                limits.options,
                options.len()
            ),
        ));
    }
    if let Some((i, o)) = options
        .iter()
        .enumerate()
        .find(|(_, o)| o.len() > limits.option_bytes)
    {
        return Err(invalid(
            &format!("{field}[{i}]"),
            format!(
                "an option is at most {} bytes, found {}",
                limits.option_bytes,
                o.len()
            ),
        ));
    }
    Ok(())
}

/// Validate a request a worker wants to create.
///
/// # Errors
/// The first field that breaks a rule of SPEC sections 1, 2 and 9.
pub fn validate_request(req: &InteractionRequest, limits: &Limits) -> Result<(), ValidationError> {
    check_opt_id("id", req.id.as_deref())?;
    check_id("session_id", &req.session_id)?;
    check_opt_id("conversation_id", req.conversation_id.as_deref())?;
    check_opt_id("turn_id", req.turn_id.as_deref())?;
    check_opt_id("caller", req.caller.as_deref())?;
    if let Some(title) = &req.title {
        check_len("title", title, limits.option_bytes)?;
    }
    check_reason("reason", req.reason.as_deref())?;
    check_kind(&req.kind, limits)?;
    if req.timeout_s == Some(0) {
        return Err(invalid("timeout_s", "expected at least 1 second, found 0"));
    }
    check_on_timeout(req)?;
    if let Some(route) = &req.route {
        if route.is_empty() || route.len() > 8 {
            return Err(invalid(
                "route",
                format!("expected 1 to 8 entries, found {}", route.len()),
            ));
        }
        for (i, r) in route.iter().enumerate() {
            check_id(&format!("route[{i}]"), r)?;
        }
    }
    if let Some(meta) = &req.metadata {
        let size = serde_json::to_string(meta)
            .map(|s| s.len())
            .unwrap_or(usize::MAX);
        if size > limits.metadata_bytes {
            return Err(too_large("metadata", limits.metadata_bytes, size));
        }
    }
    Ok(())
}

/// A request's kind: its prompt, options, tool call or points, each within
/// its limit.
fn check_kind(kind: &InteractionKind, limits: &Limits) -> Result<(), ValidationError> {
    match kind {
        InteractionKind::FreeText { prompt } => {
            check_len("kind.prompt", prompt, limits.prompt_bytes)?
        }
        InteractionKind::MultipleChoice { prompt, options } => {
            check_len("kind.prompt", prompt, limits.prompt_bytes)?;
            check_options("kind.options", options, 1, limits)?;
        }
        InteractionKind::ToolApproval {
            tool_name,
            args_json,
            missing_capabilities,
            sandbox_mode,
            options,
        } => {
            check_tool_name("kind.tool_name", tool_name)?;
            check_args_json("kind.args_json", args_json, limits)?;
            check_capabilities("kind.missing_capabilities", missing_capabilities)?;
            if !sandbox_mode.is_empty() {
                check_id("kind.sandbox_mode", sandbox_mode)?;
            }
            check_options("kind.options", options, 0, limits)?;
        }
        InteractionKind::Form { prompt, schema } => {
            check_len("kind.prompt", prompt, limits.prompt_bytes)?;
            crate::form::parse_schema(schema, limits)?;
        }
        InteractionKind::InteractionPoints { prompt, points } => {
            check_len("kind.prompt", prompt, limits.prompt_bytes)?;
            if points.is_empty() || points.len() > limits.points {
                return Err(invalid(
                    "kind.points",
                    format!(
                        "expected 1 to {} points, found {}",
                        limits.points,
                        points.len()
                    ),
                ));
            }
            let mut total = prompt.len();
            for (i, p) in points.iter().enumerate() {
                check_id(&format!("kind.points[{i}].id"), &p.id)?;
                if points[..i].iter().any(|q| q.id == p.id) {
                    return Err(invalid(
                        &format!("kind.points[{i}].id"),
                        format!("point id {:?} is used twice", p.id),
                    ));
                }
                total += p.text.len();
            }
            if total > limits.prompt_bytes {
                return Err(too_large("kind.points", limits.prompt_bytes, total));
            }
        }
    }
    Ok(())
}

/// `on_timeout`'s choice: for a multiple choice only, and one of its options.
fn check_on_timeout(req: &InteractionRequest) -> Result<(), ValidationError> {
    if let Some(OnTimeout::Choice(n)) = &req.on_timeout {
        match &req.kind {
            InteractionKind::MultipleChoice { options, .. } if *n < options.len() => {}
            InteractionKind::MultipleChoice { options, .. } => {
                return Err(invalid(
                    "on_timeout.choice",
                    format!("expected an index below {}, found {n}", options.len()),
                ));
            }
            other => {
                return Err(invalid(
                    "on_timeout",
                    format!(
                        "{{\"choice\": N}} is for multiple_choice only, found {}",
                        other.type_name()
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// Validate an answer against the request it answers, and normalise it:
/// feedback trimmed (all-whitespace is the plain deny), an empty edit dropped,
/// `scope` dropped on a deny.
///
/// # Errors
/// The field that the request's kind does not allow, a missing required field,
/// an out-of-range `choice_index`, feedback beside `approved: true`, an edit
/// without a grant or that is not JSON, `grant_args` without a session or
/// always grant, or a `request_id` that is not the request's id.
pub fn validate_response<P>(
    req: &InteractionRequest,
    mut resp: InteractionResponse<P>,
) -> Result<InteractionResponse<P>, ValidationError> {
    let id = req.id.as_deref().unwrap_or_default();
    if resp.request_id != id {
        return Err(invalid(
            "request_id",
            format!(
                "expected the interaction's id {id:?}, found {:?}",
                truncate(&resp.request_id, 64)
            ),
        ));
    }
    resp.feedback = resp
        .feedback
        .as_deref()
        .map(str::trim)
        .filter(|f| !f.is_empty())
        .map(str::to_owned);
    resp.modified_args_json = resp.modified_args_json.filter(|m| !m.is_empty());
    check_sizes(&resp)?;
    check_fields(req, &resp)?;
    check_choice(req, &resp)?;
    if let InteractionKind::Form { schema, .. } = &req.kind {
        check_form_answer(schema, &resp)?;
    }
    if let InteractionKind::ToolApproval { .. } = &req.kind {
        check_decision(&mut resp)?;
    }
    Ok(resp)
}

/// The answer's texts, vote and grant patterns within their limits.
fn check_sizes<P>(resp: &InteractionResponse<P>) -> Result<(), ValidationError> {
    for (field, text) in [
        ("value", resp.value.as_deref()),
        ("feedback", resp.feedback.as_deref()),
        ("reason", resp.reason.as_deref()),
        ("injected_context", resp.injected_context.as_deref()),
    ] {
        if let Some(text) = text {
            check_len(field, text, ANSWER_TEXT_BYTES)?;
        }
    }
    if let Some(vote) = &resp.vote {
        check_vote_envelope(vote)?;
    }
    if let Some(grant_args) = &resp.grant_args {
        if grant_args.len() > GRANT_ARGS_MAX {
            return Err(invalid(
                "grant_args",
                format!(
                    "at most {GRANT_ARGS_MAX} patterns, found {}",
                    grant_args.len()
                ),
            ));
        }
        for (pointer, pattern) in grant_args {
            check_len("grant_args", pointer, GRANT_ARGS_PATTERN_BYTES)?;
            check_len("grant_args", pattern, GRANT_ARGS_PATTERN_BYTES)?;
        }
    }
    Ok(())
}

/// The fields the request's kind requires and allows, and no other.
fn check_fields<P>(
    req: &InteractionRequest,
    resp: &InteractionResponse<P>,
) -> Result<(), ValidationError> {
    let present = |name: &'static str| -> bool {
        match name {
            "value" => resp.value.is_some(),
            "choice_index" => resp.choice_index.is_some(),
            "approved" => resp.approved.is_some(),
            "scope" => resp.scope.is_some(),
            "feedback" => resp.feedback.is_some(),
            "parts" => !resp.parts.is_empty(),
            "modified_args_json" => resp.modified_args_json.is_some(),
            "injected_context" => resp.injected_context.is_some(),
            "reason" => resp.reason.is_some(),
            "grant_args" => resp.grant_args.is_some(),
            "vote" => resp.vote.is_some(),
            "fields" => resp.fields.is_some(),
            _ => false,
        }
    };
    const ALL: [&str; 12] = [
        "fields",
        "value",
        "choice_index",
        "approved",
        "scope",
        "feedback",
        "parts",
        "modified_args_json",
        "injected_context",
        "reason",
        "grant_args",
        "vote",
    ];
    let (required, allowed): (&str, &[&str]) = match &req.kind {
        InteractionKind::FreeText { .. } | InteractionKind::InteractionPoints { .. } => {
            ("value", &["value", "parts"])
        }
        InteractionKind::MultipleChoice { .. } => ("choice_index", &["choice_index"]),
        InteractionKind::Form { .. } => ("fields", &["fields"]),
        InteractionKind::ToolApproval { .. } => (
            "approved",
            &[
                "approved",
                "choice_index",
                "scope",
                "feedback",
                "modified_args_json",
                "injected_context",
                "reason",
                "grant_args",
                "vote",
            ],
        ),
    };
    let kind = req.kind.type_name();
    if !present(required) {
        return Err(invalid(
            required,
            format!("required to answer a {kind} interaction, found nothing"),
        ));
    }
    if let Some(extra) = ALL.iter().find(|f| present(f) && !allowed.contains(f)) {
        return Err(invalid(
            extra,
            format!("not allowed in an answer to a {kind} interaction"),
        ));
    }
    Ok(())
}

/// A form's answer against its schema: every failing property named.
fn check_form_answer<P>(
    schema: &crate::form::FormSchema,
    resp: &InteractionResponse<P>,
) -> Result<(), ValidationError> {
    // The schema was checked when the form was asked; a stored one that no
    // longer reads (a tighter rule since) refuses every answer, named.
    let form = crate::form::parse_schema(schema, &Limits::default())?;
    let Some(answer) = &resp.fields else {
        return Ok(());
    };
    crate::form::check_answer(&form, answer).map_err(|fields| {
        let message = fields
            .iter()
            .map(|(k, v)| format!("{k}: {v}"))
            .collect::<Vec<_>>()
            .join("; ");
        ValidationError {
            field: "fields".to_owned(),
            kind: ValidationErrorKind::Invalid,
            message,
            fields,
        }
    })
}

/// A `choice_index` within the request's options.
fn check_choice<P>(
    req: &InteractionRequest,
    resp: &InteractionResponse<P>,
) -> Result<(), ValidationError> {
    match &req.kind {
        InteractionKind::MultipleChoice { options, .. }
        | InteractionKind::ToolApproval { options, .. } => {
            if let Some(i) = resp.choice_index
                && i >= options.len()
            {
                return Err(invalid(
                    "choice_index",
                    format!(
                        "expected an index below {} (the number of options), found {i}",
                        options.len()
                    ),
                ));
            }
        }
        _ => {}
    }
    Ok(())
}

/// A decision on a tool call: feedback, an edit and `grant_args` only where
/// they belong (an edit that is JSON, pointers that are pointers); `scope`
/// dropped on a deny.
fn check_decision<P>(resp: &mut InteractionResponse<P>) -> Result<(), ValidationError> {
    let granted = resp.approved == Some(true);
    if granted {
        if resp.feedback.is_some() {
            return Err(invalid(
                "feedback",
                "feedback goes with a deny only, found it beside approved: true",
            ));
        }
        let grant_scope = resp.scope.is_some_and(|s| s.is_grant_scope());
        if resp.grant_args.is_some() && !grant_scope {
            return Err(invalid(
                "grant_args",
                "goes with scope \"session\" or \"always\" only",
            ));
        }
        if let Some(edit) = &resp.modified_args_json {
            check_args_json("modified_args_json", edit, &Limits::default())?;
        }
        if let Some(grant_args) = &resp.grant_args {
            for pointer in grant_args.keys() {
                if !(pointer.is_empty() || pointer.starts_with('/')) {
                    return Err(invalid(
                        "grant_args",
                        format!(
                            "expected JSON pointers such as \"/argv/0\", found {:?}",
                            truncate(pointer, 64)
                        ),
                    ));
                }
            }
        }
    } else {
        if resp.modified_args_json.is_some() {
            return Err(invalid(
                "modified_args_json",
                "an edit goes with approved: true only",
            ));
        }
        if resp.grant_args.is_some() {
            return Err(invalid("grant_args", "goes with approved: true only"));
        }
        resp.scope = None;
    }
    Ok(())
}

/// The most bytes a signed vote's fields may hold: a vote's payload is a few
/// hundred bytes, a passkey's authenticator and client data a few hundred
/// more.
pub const VOTE_FIELD_BYTES: usize = 8 * 1024;

/// A vote envelope's shape, before anyone checks its signature: one to four
/// signatures, every field within [`VOTE_FIELD_BYTES`].
fn check_vote_envelope(vote: &crate::Envelope) -> Result<(), ValidationError> {
    if vote.signatures.is_empty() || vote.signatures.len() > 4 {
        return Err(invalid(
            "vote.signatures",
            format!(
                "expected 1 to 4 signatures, found {}",
                vote.signatures.len()
            ),
        ));
    }
    check_len("vote.payloadType", &vote.payload_type, VOTE_FIELD_BYTES)?;
    check_len("vote.payload", &vote.payload, VOTE_FIELD_BYTES)?;
    for (i, sig) in vote.signatures.iter().enumerate() {
        for (field, text) in [
            ("keyid", Some(sig.keyid.as_str())),
            ("sig", Some(sig.sig.as_str())),
            ("authenticator_data", sig.authenticator_data.as_deref()),
            ("client_data_json", sig.client_data_json.as_deref()),
        ] {
            if let Some(text) = text {
                check_len(
                    &format!("vote.signatures[{i}].{field}"),
                    text,
                    VOTE_FIELD_BYTES,
                )?;
            }
        }
    }
    Ok(())
}

fn truncate(s: &str, max_chars: usize) -> String {
    if s.chars().count() <= max_chars {
        s.to_owned()
    } else {
        let mut t: String = s.chars().take(max_chars).collect();
        t.push('…');
        t
    }
}
