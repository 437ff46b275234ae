//! Block Kit for lev's Slack messages and modals.
//!
//! Every piece of agent text is shown the way lev shows it everywhere:
//! hidden characters ([`lev_protocol::text`]) spelled out as `\u{…}` and
//! flagged, and in `mrkdwn` the three characters Slack parses (`&`, `<`,
//! `>`) escaped, so no text can mention `@channel`, a user or a link. Every
//! text is cut to Slack's limit for its place, counted in UTF-16 code units
//! (never fewer than characters), and a cut says how much is missing.

use std::fmt::Write as _;

use lev_protocol::api::InteractionView;
use lev_protocol::text::{agent_texts, is_hidden, tag_chars};
use lev_protocol::{ApprovalScope, InteractionKind, InteractionStatus, StoredResponse};
use serde_json::{Value, json};

/// Most blocks in one message (Slack's limit).
pub const MAX_BLOCKS: usize = 50;
/// Longest text of a section block (Slack's limit).
pub const MAX_SECTION_CHARS: usize = 3000;
/// Longest text of a header block (Slack's limit).
pub const MAX_HEADER_CHARS: usize = 150;
/// Longest text of a button (Slack's limit).
pub const MAX_BUTTON_CHARS: usize = 75;
/// Most elements in one actions block (Slack's limit).
pub const MAX_ACTIONS_PER_BLOCK: usize = 25;
/// Longest text a modal's input takes (Slack's limit on `max_length`).
pub const MAX_INPUT_CHARS: usize = 3000;
/// Longest modal title, submit or close text (Slack's limit).
pub const MAX_MODAL_TITLE_CHARS: usize = 24;

/// `block_id` of the (first) actions block; the next are `lev_actions_2`, ….
pub const ACTIONS_BLOCK_ID: &str = "lev_actions";
/// Button: approve this call.
pub const APPROVE_ONCE: &str = "approve_once";
/// Button: approve for the session.
pub const APPROVE_SESSION: &str = "approve_session";
/// Button: deny.
pub const DENY: &str = "deny";
/// Button: deny with feedback (opens [`feedback_modal`]).
pub const DENY_FEEDBACK: &str = "deny_feedback";
/// Button: answer a text question (opens [`reply_modal`]).
pub const REPLY: &str = "reply";
/// Link button to the dashboard (Slack sends a click on it too: ignore it).
pub const OPEN: &str = "open";
/// Prefix of a multiple-choice button's `action_id`: `choice_0`, `choice_1`, ….
pub const CHOICE_PREFIX: &str = "choice_";
/// `callback_id` of the deny-with-feedback modal.
pub const FEEDBACK_CALLBACK_ID: &str = "lev_deny_feedback";
/// `callback_id` of the reply modal.
pub const REPLY_CALLBACK_ID: &str = "lev_reply";
/// Key of the feedback text in a [`super::SlackAction::Submission`]'s values.
pub const FEEDBACK_VALUE_KEY: &str = "feedback.text";
/// Key of the reply text in a [`super::SlackAction::Submission`]'s values.
pub const REPLY_VALUE_KEY: &str = "reply.text";

/// Most multiple-choice buttons: three actions blocks.
const MAX_CHOICE_BUTTONS: usize = 3 * MAX_ACTIONS_PER_BLOCK;
/// Longest text of a context element.
const MAX_CONTEXT_CHARS: usize = 2000;
/// Longest notification (`text`) of a message.
const MAX_FALLBACK_CHARS: usize = 300;
/// Longest button `value` and modal `private_metadata` (Slack: 2000, 3000).
const MAX_VALUE_CHARS: usize = 2000;
/// Longest button `url` (Slack's limit).
const MAX_URL_CHARS: usize = 3000;
/// Deepest indentation of pretty-printed arguments, in levels.
const MAX_INDENT: usize = 16;

/// The 0-based option index of a multiple-choice button's `action_id`
/// (`choice_2` -> 2).
pub fn choice_index(action_id: &str) -> Option<usize> {
    let digits = action_id.strip_prefix(CHOICE_PREFIX)?;
    if digits.is_empty() || digits.len() > 10 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// `s` with `&`, `<` and `>` as `&amp;`, `&lt;` and `&gt;`: the escaping
/// Slack's `mrkdwn` needs, which also defuses `<!channel>`, `<@U…>` and links.
pub fn escape_mrkdwn(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        push_escaped(c, &mut out);
    }
    out
}

/// `s` when it fits in `max_chars`, else its start (cut on a character
/// boundary) and `… (N more characters)`, all within `max_chars` (just `…`
/// when even the note does not fit). Lengths count UTF-16 code units, as
/// Slack's limits may, so the result never has more than `max_chars` characters.
pub fn shorten(s: &str, max_chars: usize) -> String {
    fit_with(s, max_chars, || |c: char, out: &mut String| out.push(c))
}

/// The message for `chat.postMessage` / `chat.update`, less `channel` and
/// `ts`: `{"text": notification, "blocks": [...]}`. While the interaction
/// is pending it carries the buttons; once decided, the outcome instead.
/// `dashboard_url` adds an "Open in lev" link to `{dashboard_url}/#/i/{id}`.
pub fn message(view: &InteractionView, dashboard_url: Option<&str>) -> Value {
    let interaction = &view.request;
    let request = &interaction.request;
    let mut blocks = Vec::new();

    let header = header_text(view);
    blocks.push(json!({"type": "header", "text": plain(&header)}));

    if let Some(warning) = hidden_warning(view) {
        blocks.push(json!({"type": "context", "elements": [mrkdwn(&warning)]}));
    }

    for text in body_sections(&request.kind) {
        blocks.push(section(&text));
    }
    if let Some(reason) = request.reason.as_deref().filter(|r| !r.trim().is_empty()) {
        let head = "*Reason:* ";
        blocks.push(section(&format!(
            "{head}{}",
            fit(reason, MAX_SECTION_CHARS - units(head), Mode::Lines)
        )));
    }

    let context: Vec<Value> = context_texts(view).iter().map(|t| mrkdwn(t)).collect();
    if !context.is_empty() {
        blocks.push(json!({"type": "context", "elements": context}));
    }

    let outcome = outcome_text(view);
    match &outcome {
        None => blocks.extend(action_blocks(interaction, dashboard_url)),
        Some(text) => blocks.push(section(text)),
    }
    blocks.truncate(MAX_BLOCKS);

    let mut fallback = fit(&header, MAX_FALLBACK_CHARS, Mode::Line);
    if let Some(first) = outcome.as_deref().and_then(|o| o.lines().next()) {
        fallback.push_str(" · ");
        fallback.push_str(first.trim_end_matches(':'));
        fallback = clamp(&fallback, MAX_FALLBACK_CHARS * 2);
    }
    json!({"text": fallback, "blocks": blocks})
}

/// The `view` of `views.open` for "Deny with feedback": submitted, it comes
/// back with `callback_id` [`FEEDBACK_CALLBACK_ID`], the interaction id as
/// `private_metadata`, and the text under [`FEEDBACK_VALUE_KEY`].
pub fn feedback_modal(interaction_id: &str, tool_name: &str) -> Value {
    let intro = format!(
        "Deny `{}` and tell the agent what to do instead.",
        fit(tool_name, 300, Mode::InlineCode)
    );
    modal(
        FEEDBACK_CALLBACK_ID,
        interaction_id,
        "Deny with feedback",
        "Deny",
        &intro,
        "feedback",
        "What should the agent do instead?",
    )
}

/// The `view` of `views.open` for answering a text question: submitted, it
/// comes back with `callback_id` [`REPLY_CALLBACK_ID`], the interaction id
/// as `private_metadata`, and the text under [`REPLY_VALUE_KEY`].
pub fn reply_modal(interaction_id: &str, prompt: &str) -> Value {
    let intro = fit(prompt, MAX_SECTION_CHARS, Mode::Lines);
    modal(
        REPLY_CALLBACK_ID,
        interaction_id,
        "Reply",
        "Send",
        &intro,
        "reply",
        "Your answer",
    )
}

/// The body of `chat.postEphemeral`: `text` (escaped, shortened) shown to
/// `user` alone in `channel`.
pub fn ephemeral(channel: &str, user: &str, text: &str) -> Value {
    json!({
        "channel": channel,
        "user": user,
        "text": nonempty(fit(text, MAX_SECTION_CHARS, Mode::Lines), "…"),
    })
}

// ---------------------------------------------------------------------------
// Text

/// How a character is shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// `plain_text`: hidden characters (newline too) spelled out.
    Plain,
    /// One line of `mrkdwn`: escaped, hidden characters (newline too) spelled out.
    Line,
    /// Several lines of `mrkdwn`: newline and tab kept.
    Lines,
    /// Inside `` `…` ``: as `Line`, and a backtick spelled out.
    InlineCode,
    /// Inside a ```` ``` ```` block: as `Lines`, and every third backtick
    /// in a row spelled out so the block cannot be closed early.
    CodeBlock,
}

/// Renders characters in a [`Mode`], keeping the count of backticks in a row.
#[derive(Debug)]
struct Renderer {
    mode: Mode,
    backticks: usize,
}

impl Renderer {
    fn new(mode: Mode) -> Self {
        Self { mode, backticks: 0 }
    }

    fn push(&mut self, c: char, out: &mut String) {
        let multi_line = matches!(self.mode, Mode::Lines | Mode::CodeBlock);
        if c != '`' {
            self.backticks = 0;
        }
        match c {
            '\n' | '\t' if multi_line => out.push(c),
            c if is_hidden(c) => spell(c, out),
            '`' if self.mode == Mode::InlineCode => spell(c, out),
            '`' if self.mode == Mode::CodeBlock => {
                self.backticks += 1;
                if self.backticks == 3 {
                    self.backticks = 0;
                    spell(c, out);
                } else {
                    out.push(c);
                }
            }
            c if self.mode == Mode::Plain => out.push(c),
            c => push_escaped(c, out),
        }
    }
}

fn push_escaped(c: char, out: &mut String) {
    match c {
        '&' => out.push_str("&amp;"),
        '<' => out.push_str("&lt;"),
        '>' => out.push_str("&gt;"),
        c => out.push(c),
    }
}

/// `c` spelled out: `\n`, `\t`, `\r`, else `\u{202e}`.
fn spell(c: char, out: &mut String) {
    match c {
        '\n' => out.push_str("\\n"),
        '\t' => out.push_str("\\t"),
        '\r' => out.push_str("\\r"),
        c => {
            let _ = write!(out, "\\u{{{:x}}}", u32::from(c));
        }
    }
}

/// Length as Slack may count it: UTF-16 code units.
fn units(s: &str) -> usize {
    s.chars().map(char::len_utf16).sum()
}

/// `s` rendered in `mode`, cut to `max` units (see [`fit_with`]).
fn fit(s: &str, max: usize, mode: Mode) -> String {
    fit_with(s, max, || {
        let mut r = Renderer::new(mode);
        move |c: char, out: &mut String| r.push(c, out)
    })
}

/// `s` with each character rendered by a fresh `make()`, whole when the
/// result fits in `max` units, else as many whole characters as fit before
/// `… (N more characters)` (N counts characters of `s`), or before `…` alone
/// when the note does not fit. Linear: at most `max` units are rendered
/// twice, and the rest of `s` only counted.
fn fit_with<F: FnMut(char, &mut String)>(s: &str, max: usize, make: impl Fn() -> F) -> String {
    let mut out = String::new();
    let mut piece = String::new();
    let mut render = make();
    let mut len = 0usize;
    let mut whole = true;
    for c in s.chars() {
        piece.clear();
        render(c, &mut piece);
        len += units(&piece);
        if len > max {
            whole = false;
            break;
        }
        out.push_str(&piece);
    }
    if whole {
        return out;
    }
    if max == 0 {
        return String::new();
    }
    let total = s.chars().count();
    // "… (" + digits + " more characters)"
    let note = 20 + total.to_string().len();
    let (budget, with_note) = if max > note {
        (max - note, true)
    } else {
        (max - 1, false)
    };
    out.clear();
    let mut render = make();
    let mut len = 0usize;
    let mut shown = 0usize;
    for c in s.chars() {
        piece.clear();
        render(c, &mut piece);
        let n = units(&piece);
        if len + n > budget {
            break;
        }
        out.push_str(&piece);
        len += n;
        shown += 1;
    }
    if with_note {
        let _ = write!(out, "… ({} more characters)", total - shown);
    } else {
        out.push('…');
    }
    out
}

/// Whether `s` rendered in `mode` fits in `max` units (renders at most
/// `max` units).
fn fits(s: &str, max: usize, mode: Mode) -> bool {
    let mut r = Renderer::new(mode);
    let mut piece = String::new();
    let mut len = 0usize;
    for c in s.chars() {
        piece.clear();
        r.push(c, &mut piece);
        len += units(&piece);
        if len > max {
            return false;
        }
    }
    true
}

/// A last guard: `s` cut (on a character boundary) to `max` units with `…`.
fn clamp(s: &str, max: usize) -> String {
    if units(s) <= max {
        return s.to_owned();
    }
    let mut out = String::new();
    let mut len = 0;
    for c in s.chars() {
        if len + c.len_utf16() + 1 > max {
            break;
        }
        out.push(c);
        len += c.len_utf16();
    }
    if max > 0 {
        out.push('…');
    }
    out
}

fn nonempty(s: String, alt: &str) -> String {
    if s.trim().is_empty() {
        alt.to_owned()
    } else {
        s
    }
}

/// Re-spaces JSON text one character at a time (two-space indent, `": "`),
/// changing only whitespace outside strings: numbers, escapes and key order
/// stay as written.
#[derive(Debug, Default)]
struct Pretty {
    in_string: bool,
    escaped: bool,
    depth: usize,
    pending_open: bool,
}

impl Pretty {
    fn feed(&mut self, c: char, emit: &mut impl FnMut(char)) {
        if self.in_string {
            emit(c);
            if self.escaped {
                self.escaped = false;
            } else if c == '\\' {
                self.escaped = true;
            } else if c == '"' {
                self.in_string = false;
            }
            return;
        }
        if matches!(c, ' ' | '\n' | '\r' | '\t') {
            return;
        }
        if self.pending_open {
            self.pending_open = false;
            if matches!(c, '}' | ']') {
                emit(c);
                return;
            }
            self.depth += 1;
            self.newline(emit);
        }
        match c {
            '"' => {
                emit(c);
                self.in_string = true;
            }
            '{' | '[' => {
                emit(c);
                self.pending_open = true;
            }
            '}' | ']' => {
                self.depth = self.depth.saturating_sub(1);
                self.newline(emit);
                emit(c);
            }
            ',' => {
                emit(c);
                self.newline(emit);
            }
            ':' => {
                emit(':');
                emit(' ');
            }
            c => emit(c),
        }
    }

    fn newline(&self, emit: &mut impl FnMut(char)) {
        emit('\n');
        for _ in 0..self.depth.min(MAX_INDENT) * 2 {
            emit(' ');
        }
    }
}

/// `args_json` pretty-printed (when it is strict JSON) for a code block,
/// cut to `max` units.
fn fit_args(args_json: &str, max: usize) -> String {
    let json = lev_protocol::json::check_strict_json(args_json).is_ok();
    fit_with(args_json, max, || {
        let mut pretty = Pretty::default();
        let mut r = Renderer::new(Mode::CodeBlock);
        move |c: char, out: &mut String| {
            if json {
                pretty.feed(c, &mut |o| r.push(o, out));
            } else {
                r.push(c, out);
            }
        }
    })
}

// ---------------------------------------------------------------------------
// Blocks

fn plain(text: &str) -> Value {
    json!({"type": "plain_text", "text": text, "emoji": true})
}

fn mrkdwn(text: &str) -> Value {
    json!({"type": "mrkdwn", "text": text})
}

fn section(text: &str) -> Value {
    json!({"type": "section", "text": mrkdwn(&clamp(&nonempty(text.to_owned(), "…"), MAX_SECTION_CHARS))})
}

/// The header's text (plain, shortened): the title, else one per kind.
fn header_text(view: &InteractionView) -> String {
    let request = &view.request.request;
    let max = MAX_HEADER_CHARS;
    if let Some(title) = request.title.as_deref().filter(|t| !t.trim().is_empty()) {
        return fit(title, max, Mode::Plain);
    }
    match &request.kind {
        InteractionKind::ToolApproval { tool_name, .. } => {
            format!("Approve `{}`?", fit(tool_name, max - 11, Mode::Plain))
        }
        InteractionKind::FreeText { .. } => "Question from an agent".to_owned(),
        InteractionKind::MultipleChoice { .. } => "Choose an option".to_owned(),
        InteractionKind::InteractionPoints { .. } => "Review these points".to_owned(),
        InteractionKind::Form { .. } => "Fill in a form".to_owned(),
    }
}

/// The flag shown when agent text holds hidden characters, with the text
/// tag characters spell (the way hidden instructions are smuggled).
fn hidden_warning(view: &InteractionView) -> Option<String> {
    let texts = agent_texts(&view.request.request);
    if !texts.iter().any(|t| lev_protocol::text::has_hidden(t)) {
        return None;
    }
    let mut out =
        ":warning: This request holds hidden characters, spelled out below as `\\u{…}`.".to_owned();
    let mut tags = String::new();
    'all: for t in &texts {
        for ascii in tag_chars(t) {
            tags.push(ascii);
            if tags.len() > 600 {
                break 'all;
            }
        }
    }
    if !tags.is_empty() {
        let _ = write!(out, " Hidden tag text: “{}”", fit(&tags, 500, Mode::Line));
    }
    Some(out)
}

/// The section texts describing what is asked.
fn body_sections(kind: &InteractionKind) -> Vec<String> {
    match kind {
        InteractionKind::ToolApproval {
            tool_name,
            args_json,
            missing_capabilities,
            sandbox_mode,
            options,
        } => {
            let mut text = format!("*Tool:* `{}`", fit(tool_name, 300, Mode::InlineCode));
            if !sandbox_mode.is_empty() {
                let _ = write!(
                    text,
                    "\n*Sandbox mode:* `{}`",
                    fit(sandbox_mode, 200, Mode::InlineCode)
                );
            }
            if !missing_capabilities.is_empty() {
                let _ = write!(
                    text,
                    "\n*Missing capabilities:* `{}`",
                    fit(&missing_capabilities.join(", "), 500, Mode::InlineCode)
                );
            }
            let open = "\n*Arguments:*\n```\n";
            let close = "\n```";
            let room = MAX_SECTION_CHARS.saturating_sub(units(&text) + units(open) + units(close));
            let args = if args_json.trim().is_empty() {
                "(empty)".to_owned()
            } else {
                fit_args(args_json, room)
            };
            let _ = write!(text, "{open}{args}{close}");
            let mut out = vec![text];
            if !options.is_empty() {
                let items = options
                    .iter()
                    .enumerate()
                    .map(|(i, o)| (format!("*{}.*", i + 1), o.as_str()));
                out.push(list_text(
                    "*Labelled answers* (pick one in lev):",
                    options.len(),
                    items,
                ));
            }
            out
        }
        InteractionKind::FreeText { prompt } => vec![prompt_text(prompt)],
        InteractionKind::MultipleChoice { prompt, options } => {
            let mut out = vec![prompt_text(prompt)];
            let cut = options.len() > MAX_CHOICE_BUTTONS
                || options
                    .iter()
                    .enumerate()
                    .any(|(i, o)| !fits(&choice_label(i, o), MAX_BUTTON_CHARS, Mode::Plain));
            if cut {
                let items = options
                    .iter()
                    .enumerate()
                    .map(|(i, o)| (format!("*{}.*", i + 1), o.as_str()));
                out.push(list_text("*Options:*", options.len(), items));
            }
            out
        }
        InteractionKind::Form { prompt, schema } => {
            let mut out = vec![prompt_text(prompt)];
            let props = &schema.properties.0;
            if !props.is_empty() {
                let items = props.iter().map(|(name, prop)| {
                    let label = prop
                        .get("title")
                        .and_then(Value::as_str)
                        .unwrap_or(name.as_str());
                    (format!("• *{}*:", fit(name, 64, Mode::Line)), label)
                });
                out.push(list_text("*Fields:*", props.len(), items));
            }
            out
        }
        InteractionKind::InteractionPoints { prompt, points } => {
            let mut out = vec![prompt_text(prompt)];
            if !points.is_empty() {
                let items = points.iter().map(|p| {
                    (
                        format!("• *{}*:", fit(&p.id, 64, Mode::Line)),
                        p.text.as_str(),
                    )
                });
                out.push(list_text("*Points:*", points.len(), items));
            }
            out
        }
    }
}

fn prompt_text(prompt: &str) -> String {
    nonempty(fit(prompt, MAX_SECTION_CHARS, Mode::Lines), "(no prompt)")
}

/// `head` and one line per item (`label text`), each item's text shortened
/// so that all fit in a section, else as many as fit and `… and N more`.
fn list_text<'a>(
    head: &str,
    count: usize,
    items: impl Iterator<Item = (String, &'a str)>,
) -> String {
    const TAIL: usize = 40;
    let room = MAX_SECTION_CHARS - TAIL - units(head);
    let per_item = (room / count.max(1)).clamp(40, 600);
    let mut out = head.to_owned();
    let mut len = units(&out);
    for (i, (label, text)) in items.enumerate() {
        let line = format!(
            "\n{label} {}",
            fit(text, per_item.saturating_sub(units(&label) + 2), Mode::Line)
        );
        let n = units(&line);
        if len + n > MAX_SECTION_CHARS - TAIL {
            let _ = write!(out, "\n… and {} more", count.saturating_sub(i));
            break;
        }
        out.push_str(&line);
        len += n;
    }
    out
}

/// Who asks, where, which interaction, and why the gate stopped the call.
fn context_texts(view: &InteractionView) -> Vec<String> {
    let interaction = &view.request;
    let r = &interaction.request;
    let max = MAX_CONTEXT_CHARS;
    let mut out = Vec::new();
    if let Some(caller) = r.caller.as_deref().filter(|c| !c.is_empty()) {
        out.push(format!("Asked by *{}*", fit(caller, 200, Mode::Line)));
    }
    out.push(format!(
        "Session `{}`",
        fit(&r.session_id, 200, Mode::InlineCode)
    ));
    out.push(format!(
        "Interaction `{}`",
        fit(interaction.id(), 200, Mode::InlineCode)
    ));
    if let Some(gate) = &r.gate {
        if let Some(risk) = gate.risk.as_deref().filter(|s| !s.is_empty()) {
            out.push(format!("Risk: *{}*", fit(risk, 100, Mode::Line)));
        }
        let mut rule = String::new();
        if let Some(line) = gate.rule_line {
            let _ = write!(rule, "line {line}");
        }
        if let Some(tool) = gate.rule_tool.as_deref().filter(|s| !s.is_empty()) {
            let _ = write!(rule, " `{}`", fit(tool, 200, Mode::InlineCode));
        }
        if let Some(reason) = gate.rule_reason.as_deref().filter(|s| !s.is_empty()) {
            let _ = write!(rule, ": {}", fit(reason, 600, Mode::Line));
        }
        if !rule.is_empty() {
            out.push(format!("Rule: {}", rule.trim_start()));
        }
    }
    let needed = interaction.approvals_needed();
    if needed > 1 || !interaction.votes.is_empty() {
        let voters: Vec<String> = interaction
            .votes
            .iter()
            .map(|v| {
                format!(
                    "{} {}",
                    fit(&v.voter, 100, Mode::Line),
                    if v.approved { "approved" } else { "denied" }
                )
            })
            .collect();
        let mut text = format!("Votes: *{} of {needed}* approvals", interaction.approvals());
        if !voters.is_empty() {
            let _ = write!(text, " ({})", voters.join(", "));
        }
        out.push(text);
    }
    if let Some(q) = &r.quorum {
        if q.require_signed_votes {
            out.push("Each vote must be signed with the voter's own key: vote in the lev dashboard (passkey) or with `lev respond`".into());
        }
        if !q.approvers.is_empty() {
            out.push(format!(
                "May vote: {}",
                fit(&q.approvers.join(", "), 600, Mode::Line)
            ));
        }
    }
    if interaction.status == InteractionStatus::Pending
        && let Some(expires) = interaction.expires_at
        && let Ok(at) = expires.format(&time::format_description::well_known::Rfc3339)
    {
        out.push(format!("Expires {at}"));
    }
    out.into_iter().map(|t| clamp(&t, max)).collect()
}

fn button(action_id: &str, text: &str, value: &str, style: Option<&str>) -> Value {
    let mut b = json!({
        "type": "button",
        "action_id": action_id,
        "text": plain(&nonempty(fit(text, MAX_BUTTON_CHARS, Mode::Plain), "…")),
        "value": clamp(value, MAX_VALUE_CHARS),
    });
    if let (Some(style), Some(obj)) = (style, b.as_object_mut()) {
        obj.insert("style".to_owned(), Value::from(style));
    }
    b
}

fn choice_label(i: usize, option: &str) -> String {
    format!("{}. {}", i + 1, option)
}

/// The buttons of a pending interaction, in actions blocks of at most 25.
fn action_blocks(
    interaction: &lev_protocol::Interaction,
    dashboard_url: Option<&str>,
) -> Vec<Value> {
    let id = interaction.id();
    let mut elements = match &interaction.request.kind {
        // Where several people (or signed votes) must approve each call, no
        // session grant can stand in for them.
        InteractionKind::ToolApproval { .. } if !interaction.grants_may_decide() => vec![
            button(APPROVE_ONCE, "Approve once", id, Some("primary")),
            button(DENY, "Deny", id, Some("danger")),
            button(DENY_FEEDBACK, "Deny with feedback", id, None),
        ],
        InteractionKind::ToolApproval { .. } => vec![
            button(APPROVE_ONCE, "Approve once", id, Some("primary")),
            button(APPROVE_SESSION, "Approve for session", id, None),
            button(DENY, "Deny", id, Some("danger")),
            button(DENY_FEEDBACK, "Deny with feedback", id, None),
        ],
        InteractionKind::MultipleChoice { options, .. } => options
            .iter()
            .take(MAX_CHOICE_BUTTONS)
            .enumerate()
            .map(|(i, o)| {
                button(
                    &format!("{CHOICE_PREFIX}{i}"),
                    &choice_label(i, o),
                    id,
                    None,
                )
            })
            .collect(),
        InteractionKind::FreeText { .. } | InteractionKind::InteractionPoints { .. } => {
            vec![button(REPLY, "Reply", id, Some("primary"))]
        }
        // Answered in the dashboard (the link below) or with `lev respond`.
        InteractionKind::Form { .. } => Vec::new(),
    };
    if let Some(url) = dashboard_url.and_then(|base| dashboard_link(base, id)) {
        let mut link = button(OPEN, "Open in lev", id, None);
        if let Some(obj) = link.as_object_mut() {
            obj.insert("url".to_owned(), Value::from(url));
        }
        elements.push(link);
    }
    elements
        .chunks(MAX_ACTIONS_PER_BLOCK)
        .enumerate()
        .map(|(n, chunk)| {
            let block_id = if n == 0 {
                ACTIONS_BLOCK_ID.to_owned()
            } else {
                format!("{ACTIONS_BLOCK_ID}_{}", n + 1)
            };
            json!({"type": "actions", "block_id": block_id, "elements": chunk})
        })
        .collect()
}

/// `{base}/#/i/{id}` (the id percent-encoded), when `base` is http(s) and
/// the URL fits Slack's limit.
fn dashboard_link(base: &str, id: &str) -> Option<String> {
    let lower = base.get(..8).unwrap_or(base).to_ascii_lowercase();
    if !(lower.starts_with("http://") || lower.starts_with("https://")) {
        return None;
    }
    let mut url = base.trim_end_matches('/').to_owned();
    url.push_str("/#/i/");
    for b in id.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~' | b':') {
            url.push(char::from(b));
        } else {
            let _ = write!(url, "%{b:02X}");
        }
        if url.len() > MAX_URL_CHARS {
            return None;
        }
    }
    Some(url)
}

/// How the interaction was settled, once it is; `None` while pending.
fn outcome_text(view: &InteractionView) -> Option<String> {
    let interaction = &view.request;
    let is_tool = matches!(
        interaction.request.kind,
        InteractionKind::ToolApproval { .. }
    );
    match interaction.status {
        InteractionStatus::Pending => None,
        InteractionStatus::Expired => Some(if is_tool {
            ":hourglass: Expired without an answer: denied".to_owned()
        } else {
            ":hourglass: Expired without an answer".to_owned()
        }),
        InteractionStatus::Cancelled => Some(":heavy_multiplication_x: Cancelled".to_owned()),
        InteractionStatus::Answered => {
            let by = format!(
                "*{}*",
                fit(
                    interaction.answered_by.as_deref().unwrap_or("someone"),
                    200,
                    Mode::Line
                )
            );
            Some(match &view.response {
                None => format!(":speech_balloon: Answered by {by}"),
                Some(r) => answer_text(&interaction.request.kind, r, &by),
            })
        }
    }
}

fn answer_text(kind: &InteractionKind, r: &StoredResponse, by: &str) -> String {
    let mut out = match r.approved {
        Some(true) => match r.scope {
            Some(ApprovalScope::Once) => format!(":white_check_mark: Approved once by {by}"),
            Some(ApprovalScope::Session) => {
                format!(":white_check_mark: Approved for the session by {by}")
            }
            Some(ApprovalScope::Always) => format!(":white_check_mark: Approved always by {by}"),
            None => format!(":white_check_mark: Approved by {by}"),
        },
        Some(false) => {
            let mut out = format!(":no_entry_sign: Denied by {by}");
            if let Some(feedback) = r.deny_feedback() {
                out.push_str(" with feedback:");
                out.push_str(&quote(feedback));
            }
            out
        }
        None => {
            let options: &[String] = match kind {
                InteractionKind::MultipleChoice { options, .. }
                | InteractionKind::ToolApproval { options, .. } => options,
                _ => &[],
            };
            match (r.choice_index, r.value.as_deref()) {
                (Some(i), _) => match options.get(i) {
                    Some(o) => format!(
                        ":speech_balloon: Answered by {by}: *{}*",
                        fit(&choice_label(i, o), 600, Mode::Line)
                    ),
                    None => format!(
                        ":speech_balloon: Answered by {by}: option {}",
                        i.saturating_add(1)
                    ),
                },
                (None, Some(v)) => format!(":speech_balloon: Answered by {by}:{}", quote(v)),
                (None, None) => format!(":speech_balloon: Answered by {by}"),
            }
        }
    };
    if !r.parts.is_empty() {
        let n = r.parts.len();
        let _ = write!(
            out,
            "\n_{n} attached file{}: open lev to see {}._",
            if n == 1 { "" } else { "s" },
            if n == 1 { "it" } else { "them" }
        );
    }
    out
}

/// `text` as a `mrkdwn` quote on new lines (escaped, shortened).
fn quote(text: &str) -> String {
    let body = fit(text, 1400, Mode::Lines);
    let mut out = String::with_capacity(body.len() + 8);
    for line in body.split('\n') {
        out.push_str("\n>");
        out.push_str(line);
    }
    out
}

/// A modal with an intro and one multi-line text input.
fn modal(
    callback_id: &str,
    interaction_id: &str,
    title: &str,
    submit: &str,
    intro: &str,
    block_id: &str,
    label: &str,
) -> Value {
    let mut blocks = Vec::new();
    if !intro.trim().is_empty() {
        blocks.push(section(intro));
    }
    blocks.push(json!({
        "type": "input",
        "block_id": block_id,
        "label": plain(label),
        "element": {
            "type": "plain_text_input",
            "action_id": "text",
            "multiline": true,
            "max_length": MAX_INPUT_CHARS,
        },
    }));
    json!({
        "type": "modal",
        "callback_id": callback_id,
        "private_metadata": clamp(interaction_id, MAX_VALUE_CHARS),
        "title": plain(&clamp(title, MAX_MODAL_TITLE_CHARS)),
        "submit": plain(submit),
        "close": plain("Cancel"),
        "blocks": blocks,
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use proptest::prelude::*;

    use super::*;

    fn view(kind: Value, status: &str, extra: Value, response: Value) -> InteractionView {
        let mut request = json!({
            "id": "ir_01HZX3",
            "session_id": "sess-1",
            "kind": kind,
            "status": status,
            "created_at": "2026-01-01T00:00:00Z",
        });
        if let (Some(r), Some(e)) = (request.as_object_mut(), extra.as_object()) {
            for (k, v) in e {
                r.insert(k.clone(), v.clone());
            }
        }
        serde_json::from_value(json!({"request": request, "response": response})).unwrap()
    }

    fn tool(args: &str) -> Value {
        json!({
            "type": "tool_approval",
            "tool_name": "Bash",
            "args_json": args,
            "missing_capabilities": ["net", "fs-write"],
            "sandbox_mode": "workspace-write",
        })
    }

    fn blocks(m: &Value) -> &Vec<Value> {
        m["blocks"].as_array().unwrap()
    }

    fn types(m: &Value) -> Vec<&str> {
        blocks(m)
            .iter()
            .map(|b| b["type"].as_str().unwrap())
            .collect()
    }

    fn texts(v: &Value, out: &mut Vec<(String, String)>) {
        match v {
            Value::Object(o) => {
                if let (Some(Value::String(t)), Some(Value::String(text))) =
                    (o.get("type"), o.get("text"))
                {
                    out.push((t.clone(), text.clone()));
                }
                for x in o.values() {
                    texts(x, out);
                }
            }
            Value::Array(a) => a.iter().for_each(|x| texts(x, out)),
            _ => {}
        }
    }

    #[test]
    fn escape_and_shorten() {
        assert_eq!(
            escape_mrkdwn("a & <!channel> <@U1|x> > b"),
            "a &amp; &lt;!channel&gt; &lt;@U1|x&gt; &gt; b"
        );
        assert_eq!(shorten("hello", 5), "hello");
        assert_eq!(shorten("hello", 4), "hel…");
        assert_eq!(shorten("hello", 0), "");
        let long = "x".repeat(100);
        let s = shorten(&long, 40);
        assert_eq!(s, format!("{}… (83 more characters)", "x".repeat(17)));
        assert_eq!(s.chars().count(), 39);
        // Cut on a character boundary, counted in UTF-16 units.
        let emoji = "😀".repeat(30);
        let s = shorten(&emoji, 30);
        assert_eq!(s, format!("{}… (26 more characters)", "😀".repeat(4)));
        assert_eq!(units(&s), 30);
        assert_eq!(choice_index("choice_12"), Some(12));
        for bad in [
            "choice_",
            "choice_+1",
            "choice_-1",
            "choice_1x",
            "reply",
            "choice_99999999999",
        ] {
            assert_eq!(choice_index(bad), None, "{bad}");
        }
    }

    #[test]
    fn hidden_characters_are_spelled_out_and_flagged() {
        assert_eq!(
            fit("a\u{202e}b\nc\td", 100, Mode::Line),
            "a\\u{202e}b\\nc\\td"
        );
        assert_eq!(
            fit("a\u{202e}b\nc\td", 100, Mode::Lines),
            "a\\u{202e}b\nc\td"
        );
        assert_eq!(fit("<b>\u{7}", 100, Mode::Plain), "<b>\\u{7}");
        assert_eq!(fit("a`b", 100, Mode::InlineCode), "a\\u{60}b");
        assert_eq!(
            fit("````x```", 100, Mode::CodeBlock),
            "``\\u{60}`x``\\u{60}"
        );
        let v = view(
            json!({"type": "free_text", "prompt": "ok\u{E0049}\u{E0047}\u{E004E}"}),
            "pending",
            json!({}),
            Value::Null,
        );
        let m = message(&v, None);
        let warning = blocks(&m)[1]["elements"][0]["text"].as_str().unwrap();
        assert!(
            warning.starts_with(":warning: This request holds hidden characters"),
            "{warning}"
        );
        assert!(warning.contains("Hidden tag text: “IGN”"), "{warning}");
        assert_eq!(
            blocks(&m)[2]["text"]["text"],
            "ok\\u{e0049}\\u{e0047}\\u{e004e}"
        );
    }

    #[test]
    fn args_are_pretty_printed_as_written() {
        let pretty = fit_args(
            r#"{"b":1.50,"a":[],"c":{"d":"x, \"y\": z","e":[1,2]},"f":{}}"#,
            3000,
        );
        assert_eq!(
            pretty,
            "{\n  \"b\": 1.50,\n  \"a\": [],\n  \"c\": {\n    \"d\": \"x, \\\"y\\\": z\",\n    \"e\": [\n      1,\n      2\n    ]\n  },\n  \"f\": {}\n}"
        );
        assert_eq!(
            fit_args(r#" [ 123456789012345678901234567890 , "\u00e9" ] "#, 3000),
            "[\n  123456789012345678901234567890,\n  \"\\u00e9\"\n]"
        );
        // Not JSON: as sent.
        assert_eq!(fit_args("{not json <x>", 3000), "{not json &lt;x&gt;");
        // Duplicate keys are not strict JSON: as sent, nothing hidden by a re-read.
        assert_eq!(fit_args(r#"{"a":1,"a":2}"#, 3000), r#"{"a":1,"a":2}"#);
    }

    #[test]
    fn a_pending_tool_approval() {
        let v = view(
            tool(r#"{"command":"rm -rf <dir> && echo ```done```"}"#),
            "pending",
            json!({
                "caller": "alice",
                "reason": "Clean up the <build> dir",
                "gate": {"rule_line": 12, "rule_tool": "Bash", "rule_reason": "deletes files", "risk": "high"},
                "expires_at": "2026-01-01T00:05:00Z",
            }),
            Value::Null,
        );
        let m = message(&v, Some("https://lev.example.com/"));
        assert_eq!(m["text"], "Approve `Bash`?");
        assert_eq!(
            types(&m),
            ["header", "section", "section", "context", "actions"]
        );
        let b = blocks(&m);
        assert_eq!(
            b[0]["text"],
            json!({"type": "plain_text", "text": "Approve `Bash`?", "emoji": true})
        );
        assert_eq!(
            b[1]["text"]["text"],
            "*Tool:* `Bash`\n*Sandbox mode:* `workspace-write`\n*Missing capabilities:* `net, fs-write`\n\
             *Arguments:*\n```\n{\n  \"command\": \"rm -rf &lt;dir&gt; &amp;&amp; echo ``\\u{60}done``\\u{60}\"\n}\n```"
        );
        assert_eq!(
            b[2]["text"]["text"],
            "*Reason:* Clean up the &lt;build&gt; dir"
        );
        let context: Vec<&str> = b[3]["elements"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["text"].as_str().unwrap())
            .collect();
        assert_eq!(
            context,
            [
                "Asked by *alice*",
                "Session `sess-1`",
                "Interaction `ir_01HZX3`",
                "Risk: *high*",
                "Rule: line 12 `Bash`: deletes files",
                "Expires 2026-01-01T00:05:00Z",
            ]
        );
        assert_eq!(
            b[4],
            json!({
                "type": "actions",
                "block_id": "lev_actions",
                "elements": [
                    {"type": "button", "action_id": "approve_once", "style": "primary", "value": "ir_01HZX3",
                     "text": {"type": "plain_text", "text": "Approve once", "emoji": true}},
                    {"type": "button", "action_id": "approve_session", "value": "ir_01HZX3",
                     "text": {"type": "plain_text", "text": "Approve for session", "emoji": true}},
                    {"type": "button", "action_id": "deny", "style": "danger", "value": "ir_01HZX3",
                     "text": {"type": "plain_text", "text": "Deny", "emoji": true}},
                    {"type": "button", "action_id": "deny_feedback", "value": "ir_01HZX3",
                     "text": {"type": "plain_text", "text": "Deny with feedback", "emoji": true}},
                    {"type": "button", "action_id": "open", "value": "ir_01HZX3",
                     "url": "https://lev.example.com/#/i/ir_01HZX3",
                     "text": {"type": "plain_text", "text": "Open in lev", "emoji": true}},
                ],
            })
        );
    }

    #[test]
    fn huge_arguments_are_cut_with_a_count() {
        let args = format!("{{\"content\":\"{}\"}}", "a".repeat(10_000));
        let v = view(tool(&args), "pending", json!({}), Value::Null);
        let m = message(&v, None);
        let text = blocks(&m)[1]["text"]["text"].as_str().unwrap();
        assert!(units(text) <= MAX_SECTION_CHARS, "{}", units(text));
        assert!(
            text.ends_with(" more characters)\n```"),
            "{}",
            &text[text.len() - 60..]
        );
        assert!(text.starts_with("*Tool:* `Bash`"));
    }

    #[test]
    fn decided_tool_approvals_show_the_outcome() {
        let cases = [
            (
                json!({"request_id": "ir_01HZX3", "approved": true, "scope": "once"}),
                ":white_check_mark: Approved once by *alice*",
            ),
            (
                json!({"request_id": "ir_01HZX3", "approved": true, "scope": "session"}),
                ":white_check_mark: Approved for the session by *alice*",
            ),
            (
                json!({"request_id": "ir_01HZX3", "approved": true, "scope": "always"}),
                ":white_check_mark: Approved always by *alice*",
            ),
            (
                json!({"request_id": "ir_01HZX3", "approved": false, "scope": "once"}),
                ":no_entry_sign: Denied by *alice*",
            ),
            (
                json!({"request_id": "ir_01HZX3", "approved": false, "feedback": "use <git status>\nthen stop"}),
                ":no_entry_sign: Denied by *alice* with feedback:\n>use &lt;git status&gt;\n>then stop",
            ),
        ];
        for (response, want) in cases {
            let v = view(
                tool("{}"),
                "answered",
                json!({"answered_by": "alice"}),
                response,
            );
            let m = message(&v, Some("https://lev.example.com"));
            assert_eq!(types(&m), ["header", "section", "context", "section"]);
            assert_eq!(blocks(&m)[3]["text"]["text"], want);
            let first_line = want.lines().next().unwrap();
            let first_line = first_line.trim_end_matches(':');
            assert_eq!(m["text"], format!("Approve `Bash`? · {first_line}"));
        }
        let expired = message(&view(tool("{}"), "expired", json!({}), Value::Null), None);
        assert_eq!(
            blocks(&expired)[3]["text"]["text"],
            ":hourglass: Expired without an answer: denied"
        );
        let cancelled = message(&view(tool("{}"), "cancelled", json!({}), Value::Null), None);
        assert_eq!(
            blocks(&cancelled)[3]["text"]["text"],
            ":heavy_multiplication_x: Cancelled"
        );
    }

    #[test]
    fn multiple_choice_buttons_and_answers() {
        let options: Vec<String> = (0..30).map(|i| format!("option <{i}>")).collect();
        let kind = json!({"type": "multiple_choice", "prompt": "Which *DB*?", "options": options});
        let m = message(
            &view(
                kind.clone(),
                "pending",
                json!({"title": "Pick a database"}),
                Value::Null,
            ),
            Some("http://127.0.0.1:8080"),
        );
        assert_eq!(
            types(&m),
            ["header", "section", "context", "actions", "actions"]
        );
        let b = blocks(&m);
        assert_eq!(b[0]["text"]["text"], "Pick a database");
        assert_eq!(b[1]["text"]["text"], "Which *DB*?");
        assert_eq!(b[3]["block_id"], "lev_actions");
        assert_eq!(b[4]["block_id"], "lev_actions_2");
        let first = &b[3]["elements"][0];
        assert_eq!(first["action_id"], "choice_0");
        assert_eq!(first["text"]["text"], "1. option <0>");
        assert_eq!(first["value"], "ir_01HZX3");
        assert_eq!(b[3]["elements"].as_array().unwrap().len(), 25);
        let second: Vec<&str> = b[4]["elements"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["action_id"].as_str().unwrap())
            .collect();
        assert_eq!(
            second,
            [
                "choice_25",
                "choice_26",
                "choice_27",
                "choice_28",
                "choice_29",
                "open"
            ]
        );

        // Long options: buttons cut at 75, the whole list in a section.
        let long = json!({"type": "multiple_choice", "prompt": "?", "options": ["y".repeat(200), "short"]});
        let m = message(&view(long, "pending", json!({}), Value::Null), None);
        assert_eq!(
            types(&m),
            ["header", "section", "section", "context", "actions"]
        );
        let b = blocks(&m);
        assert_eq!(b[0]["text"]["text"], "Choose an option");
        let button = b[4]["elements"][0]["text"]["text"].as_str().unwrap();
        assert_eq!(units(button), 75);
        assert!(
            button.starts_with("1. yyy") && button.ends_with(" more characters)"),
            "{button}"
        );
        assert!(
            b[2]["text"]["text"]
                .as_str()
                .unwrap()
                .starts_with("*Options:*\n*1.* yyyy")
        );

        let answered = view(
            kind,
            "answered",
            json!({"answered_by": "bob"}),
            json!({"request_id": "ir_01HZX3", "choice_index": 2}),
        );
        let m = message(&answered, None);
        assert_eq!(types(&m), ["header", "section", "context", "section"]);
        assert_eq!(
            blocks(&m)[3]["text"]["text"],
            ":speech_balloon: Answered by *bob*: *3. option &lt;2&gt;*"
        );
    }

    #[test]
    fn text_questions_and_points() {
        let m = message(
            &view(
                json!({"type": "free_text", "prompt": "Deploy <!channel>?"}),
                "pending",
                json!({}),
                Value::Null,
            ),
            None,
        );
        assert_eq!(types(&m), ["header", "section", "context", "actions"]);
        let b = blocks(&m);
        assert_eq!(b[0]["text"]["text"], "Question from an agent");
        assert_eq!(b[1]["text"]["text"], "Deploy &lt;!channel&gt;?");
        assert_eq!(
            b[3],
            json!({"type": "actions", "block_id": "lev_actions", "elements": [
                {"type": "button", "action_id": "reply", "style": "primary", "value": "ir_01HZX3",
                 "text": {"type": "plain_text", "text": "Reply", "emoji": true}}]})
        );

        let points = json!({"type": "interaction_points", "prompt": "Review", "points": [
            {"id": "p1", "text": "First & foremost"}, {"id": "p2", "text": "Second"}]});
        let m = message(
            &view(points.clone(), "pending", json!({}), Value::Null),
            None,
        );
        assert_eq!(
            types(&m),
            ["header", "section", "section", "context", "actions"]
        );
        assert_eq!(blocks(&m)[0]["text"]["text"], "Review these points");
        assert_eq!(
            blocks(&m)[2]["text"]["text"],
            "*Points:*\n• *p1*: First &amp; foremost\n• *p2*: Second"
        );

        let answered = view(
            points,
            "answered",
            json!({"answered_by": "carol"}),
            json!({"request_id": "ir_01HZX3", "value": "Looks <good>\nship it",
                   "parts": [{"name": "a.md", "media_type": "text/markdown", "size": 3, "sha256": "00"}]}),
        );
        let m = message(&answered, None);
        assert_eq!(
            blocks(&m)[4]["text"]["text"],
            ":speech_balloon: Answered by *carol*:\n>Looks &lt;good&gt;\n>ship it\n_1 attached file: open lev to see it._"
        );
        let cancelled = message(
            &view(
                json!({"type": "free_text", "prompt": "?"}),
                "expired",
                json!({}),
                Value::Null,
            ),
            None,
        );
        assert_eq!(
            blocks(&cancelled)[3]["text"]["text"],
            ":hourglass: Expired without an answer"
        );
    }

    #[test]
    fn links_only_to_an_http_dashboard() {
        assert_eq!(
            dashboard_link("https://x.example/lev/", "ir_1"),
            Some("https://x.example/lev/#/i/ir_1".into())
        );
        assert_eq!(
            dashboard_link("https://x", "a b/é"),
            Some("https://x/#/i/a%20b%2F%C3%A9".into())
        );
        assert_eq!(dashboard_link("javascript:alert(1)", "ir_1"), None);
        assert_eq!(dashboard_link("https://x", &"i".repeat(4000)), None);
    }

    /// The largest message lev posts, clicked: Slack sends it back whole in
    /// the `block_actions` payload, which must stay under the body limit,
    /// with room to spare for the fields Slack adds.
    #[test]
    fn a_click_on_the_largest_message_fits_the_body_limit() {
        // Each text at lev's own limit, of one character that weighs the
        // most once escaped, JSON-encoded and percent-encoded.
        for fill in ['語', '"', '😀', '<', '\u{202e}'] {
            let bytes = |n: usize| fill.to_string().repeat(n / fill.len_utf8());
            let chars = |n: usize| fill.to_string().repeat(n);
            let options: Vec<String> = (0..64).map(|_| bytes(1024)).collect();
            let kind = json!({
                "type": "tool_approval", "tool_name": chars(256), "args_json": json!({"k": chars(100_000)}).to_string(),
                "missing_capabilities": vec!["net"; 64], "sandbox_mode": chars(200), "options": options,
            });
            let v = view(
                kind,
                "pending",
                json!({
                    "title": chars(500), "reason": bytes(4096), "caller": "c".repeat(128),
                    "gate": {"rule_line": 1, "rule_tool": chars(300), "rule_reason": chars(2000), "risk": "high"},
                }),
                Value::Null,
            );
            let m = message(&v, Some("https://lev.example.com"));
            let payload = json!({
                "type": "block_actions",
                "user": {"id": "UA8RXUSPL", "username": "jtorrance", "name": "jtorrance", "team_id": "T9TK3CUKW"},
                "api_app_id": "AABA1ABCD", "token": "9s8d9as89d8as9d8as989",
                "container": {"type": "message", "message_ts": "1548261231.000200", "channel_id": "CBR2V3XEX", "is_ephemeral": false},
                "trigger_id": "12321423423.333649436676.d8c1bb837935619ccad0f624c448ffb3",
                "team": {"id": "T9TK3CUKW", "domain": "example"},
                "channel": {"id": "CBR2V3XEX", "name": "review-updates"},
                "message": {"type": "message", "user": "UAJ2RU415", "ts": "1548261231.000200", "bot_id": "BAH5CA16Z",
                            "text": m["text"], "blocks": m["blocks"]},
                "state": {"values": {}},
                "response_url": "https://hooks.slack.com/actions/AABA1ABCD/1232321423432/D09sSasdasdAS9091209",
                "actions": [{"action_id": "approve_once", "block_id": "lev_actions", "value": "ir_01HZX3", "type": "button",
                             "text": {"type": "plain_text", "text": "Approve once", "emoji": true}, "action_ts": "1548426417.840180"}],
            });
            // Slack may write non-ASCII as \uXXXX.
            let ascii_json = payload
                .to_string()
                .chars()
                .fold(String::new(), |mut out, c| {
                    if c.is_ascii() {
                        out.push(c);
                    } else {
                        let mut buf = [0u16; 2];
                        for u in c.encode_utf16(&mut buf) {
                            let _ = write!(out, "\\u{u:04x}");
                        }
                    }
                    out
                });
            for json in [payload.to_string(), ascii_json] {
                let body = form_urlencoded::Serializer::new(String::new())
                    .append_pair("payload", &json)
                    .finish();
                assert!(
                    body.len() <= super::super::payload::MAX_BODY_BYTES / 2,
                    "{fill:?}: {} bytes",
                    body.len()
                );
                assert!(matches!(
                    super::super::payload::parse(body.as_bytes()),
                    Ok(super::super::SlackAction::Button { .. })
                ));
            }
        }
    }

    #[test]
    fn modals_and_ephemeral() {
        assert_eq!(
            feedback_modal("ir_1", "Bash"),
            json!({
                "type": "modal",
                "callback_id": "lev_deny_feedback",
                "private_metadata": "ir_1",
                "title": {"type": "plain_text", "text": "Deny with feedback", "emoji": true},
                "submit": {"type": "plain_text", "text": "Deny", "emoji": true},
                "close": {"type": "plain_text", "text": "Cancel", "emoji": true},
                "blocks": [
                    {"type": "section", "text": {"type": "mrkdwn", "text": "Deny `Bash` and tell the agent what to do instead."}},
                    {"type": "input", "block_id": "feedback",
                     "label": {"type": "plain_text", "text": "What should the agent do instead?", "emoji": true},
                     "element": {"type": "plain_text_input", "action_id": "text", "multiline": true, "max_length": 3000}},
                ],
            })
        );
        let reply = reply_modal("ir_2", "Why <this>?");
        assert_eq!(reply["callback_id"], "lev_reply");
        assert_eq!(reply["private_metadata"], "ir_2");
        assert_eq!(reply["title"]["text"], "Reply");
        assert_eq!(reply["submit"]["text"], "Send");
        assert_eq!(reply["blocks"][0]["text"]["text"], "Why &lt;this&gt;?");
        assert_eq!(reply["blocks"][1]["block_id"], "reply");
        assert_eq!(reply["blocks"][1]["element"]["action_id"], "text");
        assert_eq!(
            reply_modal("ir_2", "")["blocks"].as_array().unwrap().len(),
            1
        );
        assert_eq!(
            ephemeral("C1", "U1", "You are not a lev approver <@U2>"),
            json!({"channel": "C1", "user": "U1", "text": "You are not a lev approver &lt;@U2&gt;"})
        );
    }

    /// Every limit of Slack's that `message` must keep, whatever the view.
    fn check_limits(m: &Value) -> Result<(), TestCaseError> {
        let b = blocks(m);
        prop_assert!(!b.is_empty() && b.len() <= MAX_BLOCKS);
        for block in b {
            match block["type"].as_str().unwrap() {
                "header" => {
                    let t = block["text"]["text"].as_str().unwrap();
                    prop_assert!(
                        !t.is_empty() && units(t) <= MAX_HEADER_CHARS,
                        "header {t:?}"
                    );
                }
                "section" => {
                    let t = block["text"]["text"].as_str().unwrap();
                    prop_assert!(
                        !t.trim().is_empty() && units(t) <= MAX_SECTION_CHARS,
                        "section {}",
                        units(t)
                    );
                }
                "context" => {
                    let e = block["elements"].as_array().unwrap();
                    prop_assert!(!e.is_empty() && e.len() <= 10);
                }
                "actions" => {
                    let e = block["elements"].as_array().unwrap();
                    prop_assert!(!e.is_empty() && e.len() <= MAX_ACTIONS_PER_BLOCK);
                    for el in e {
                        let t = el["text"]["text"].as_str().unwrap();
                        prop_assert!(
                            !t.is_empty() && units(t) <= MAX_BUTTON_CHARS,
                            "button {t:?}"
                        );
                        prop_assert!(units(el["value"].as_str().unwrap()) <= MAX_VALUE_CHARS);
                    }
                }
                other => prop_assert!(false, "block type {other}"),
            }
        }
        let mut all = Vec::new();
        texts(m, &mut all);
        for (kind, text) in &all {
            if kind == "mrkdwn" {
                prop_assert!(!text.contains('<'), "raw < in {text:?}");
            }
        }
        prop_assert!(!m["text"].as_str().unwrap().contains('<'));
        prop_assert!(units(m["text"].as_str().unwrap()) <= 2 * MAX_FALLBACK_CHARS);
        Ok(())
    }

    fn text() -> impl Strategy<Value = String> {
        prop_oneof![
            "\\PC{0,40}",
            ".{0,40}",
            "[<>&`*\n\u{202e}\u{E0041}a😀]{0,400}",
            (1usize..2000).prop_map(|n| "<&>`\u{200b}".repeat(n)),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(96))]

        #[test]
        fn escaped_and_shortened_text_is_safe(s in text(), max in 0usize..400) {
            for mode in [Mode::Line, Mode::Lines, Mode::InlineCode, Mode::CodeBlock] {
                let out = fit(&s, max, mode);
                prop_assert!(units(&out) <= max, "{mode:?} {} > {max}", units(&out));
                prop_assert!(!out.contains('<') && !out.contains('>'));
                prop_assert!(!out.chars().any(|c| c != '\n' && c != '\t' && is_hidden(c)));
            }
            let plain = fit(&s, max, Mode::Plain);
            prop_assert!(units(&plain) <= max);
            let short = shorten(&escape_mrkdwn(&s), max);
            prop_assert!(units(&short) <= max && short.chars().count() <= max);
            prop_assert!(!short.contains('<') && !short.contains('>'));
            if units(&s) <= max {
                prop_assert_eq!(shorten(&s, max), s.clone());
            }
        }

        #[test]
        fn message_keeps_slacks_limits(
            title in proptest::option::of(text()),
            prompt in text(),
            args in prop_oneof![text(), "[\\[\\]{}\",:a<1 ]{0,300}", (1usize..3000).prop_map(|n| format!("{{\"k\":\"{}\"}}", "<`>".repeat(n)))],
            options in proptest::collection::vec(text(), 0..80),
            reason in proptest::option::of(text()),
            caller in proptest::option::of(text()),
            id in text(),
            kind in 0usize..4,
            status in 0usize..4,
            answer in 0usize..5,
            feedback in text(),
            dashboard in proptest::option::of("(https?://[a-z]{1,10}/?|x)"),
        ) {
            let kind = match kind {
                0 => json!({"type": "tool_approval", "tool_name": prompt, "args_json": args,
                            "missing_capabilities": options.iter().take(50).collect::<Vec<_>>(),
                            "sandbox_mode": feedback, "options": options}),
                1 => json!({"type": "free_text", "prompt": prompt}),
                2 => json!({"type": "multiple_choice", "prompt": prompt, "options": options}),
                _ => json!({"type": "interaction_points", "prompt": prompt,
                            "points": options.iter().enumerate().map(|(i, o)| json!({"id": format!("{o}{i}"), "text": o})).collect::<Vec<_>>()}),
            };
            let status = ["pending", "answered", "expired", "cancelled"][status];
            let response = match answer {
                0 => Value::Null,
                1 => json!({"request_id": id, "approved": true, "scope": "session"}),
                2 => json!({"request_id": id, "approved": false, "feedback": feedback}),
                3 => json!({"request_id": id, "choice_index": options.len() / 2}),
                _ => json!({"request_id": id, "value": feedback}),
            };
            let v = view(kind, status, json!({
                "id": id, "title": title, "reason": reason, "caller": caller, "answered_by": caller,
                "gate": {"rule_line": 3, "rule_tool": prompt, "rule_reason": feedback, "risk": "high"},
            }), response);
            let m = message(&v, dashboard.as_deref());
            check_limits(&m)?;
            let f = feedback_modal(&id, &prompt);
            prop_assert!(units(f["blocks"][0]["text"]["text"].as_str().unwrap()) <= MAX_SECTION_CHARS);
            let r = reply_modal(&id, &prompt);
            let mut all = Vec::new();
            texts(&r, &mut all);
            for (kind, text) in &all {
                prop_assert!(units(text) <= MAX_SECTION_CHARS);
                if kind == "mrkdwn" {
                    prop_assert!(!text.contains('<'));
                }
            }
        }
    }
}
