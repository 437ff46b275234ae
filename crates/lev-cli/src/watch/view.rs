//! The screen: [`draw`] renders an [`App`] into a ratatui frame. Pure: the
//! same state draws the same screen.
//!
//! Colours are the terminal's own ANSI ones on its own background (so a light
//! and a dark theme both read), and none at all under `NO_COLOR`: then
//! bold, reverse video and underline carry the meaning.

use lev_protocol::api::InteractionView;
use lev_protocol::{InteractionKind, InteractionStatus};
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span, Text};
use ratatui::widgets::{Block, Borders, Clear, List, ListItem, ListState, Paragraph, Wrap};

use super::call::{self, Call};
use super::model::{App, Conn, Field, Mode, Outcome};
use crate::{describe, term};

/// Colours on or off.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Theme {
    /// Whether colours are used (off under `NO_COLOR`).
    pub color: bool,
}

impl Theme {
    /// Colour unless `NO_COLOR` is set (to anything).
    pub fn from_env() -> Self {
        Self {
            color: std::env::var_os("NO_COLOR").is_none(),
        }
    }

    fn fg(self, color: Color, fallback: Modifier) -> Style {
        if self.color {
            Style::new().fg(color)
        } else {
            Style::new().add_modifier(fallback)
        }
    }

    fn ok(self) -> Style {
        self.fg(Color::Green, Modifier::BOLD)
    }
    fn bad(self) -> Style {
        self.fg(Color::Red, Modifier::BOLD)
    }
    fn warn(self) -> Style {
        self.fg(Color::Yellow, Modifier::BOLD)
    }
    fn accent(self) -> Style {
        self.fg(Color::Cyan, Modifier::empty())
    }
    fn dim(self) -> Style {
        Style::new().add_modifier(Modifier::DIM)
    }
    fn bold(self) -> Style {
        Style::new().add_modifier(Modifier::BOLD)
    }
    /// A character spelled out: reverse video, in the warning colour.
    fn spelled(self) -> Style {
        self.fg(Color::Yellow, Modifier::empty())
            .add_modifier(Modifier::REVERSED)
    }
    fn key(self) -> Style {
        self.bold().add_modifier(Modifier::UNDERLINED)
    }
}

/// Draw the whole screen.
pub fn draw(frame: &mut Frame<'_>, app: &App, theme: Theme) {
    let area = frame.area();
    let footer_text = footer_lines(app, area.width, theme);
    let footer_height = u16::try_from(footer_text.len())
        .unwrap_or(u16::MAX)
        .clamp(2, area.height.saturating_sub(4).max(2));
    let [header, body, footer] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Min(3),
        Constraint::Length(footer_height),
    ])
    .areas(area);
    frame.render_widget(Paragraph::new(header_line(app, theme)), header);
    match &app.mode {
        Mode::Grants | Mode::ConfirmRevoke(_) => draw_grants(frame, body, app, theme),
        _ => draw_inbox(frame, body, app, theme),
    }
    frame.render_widget(Paragraph::new(footer_text), footer);
    if app.mode == Mode::Help {
        draw_help(frame, body, theme);
    }
}

fn header_line(app: &App, theme: Theme) -> Line<'static> {
    let mut spans = vec![
        Span::styled(" lev watch ", theme.bold().add_modifier(Modifier::REVERSED)),
        Span::raw(" "),
    ];
    match &app.conn {
        Conn::Live => spans.push(Span::styled("● live", theme.ok())),
        Conn::Connecting => spans.push(Span::styled("◌ connecting…", theme.warn())),
        Conn::Reconnecting { attempt, .. } => spans.push(Span::styled(
            format!("◌ reconnecting… (try {attempt})"),
            theme.warn(),
        )),
    }
    let n = app.pending_count();
    spans.push(Span::raw(format!("  {n} pending")));
    if !app.filter.is_empty() {
        spans.push(Span::styled("  filter: ", theme.dim()));
        spans.push(Span::raw(term::clip(&app.filter, 30)));
    }
    spans.push(Span::styled(format!("  {}", app.url), theme.dim()));
    Line::from(spans)
}

fn draw_inbox(frame: &mut Frame<'_>, area: Rect, app: &App, theme: Theme) {
    let visible = app.visible();
    let wide = area.width >= 110;
    let (list_area, detail_area) = if wide {
        let [l, d] =
            Layout::horizontal([Constraint::Percentage(38), Constraint::Min(40)]).areas(area);
        (l, d)
    } else {
        let rows = u16::try_from(visible.len()).unwrap_or(u16::MAX).max(1);
        let max = (area.height / 3).max(3);
        let [l, d] = Layout::vertical([Constraint::Length(rows.min(max) + 2), Constraint::Min(3)])
            .areas(area);
        (l, d)
    };

    // The list.
    let width = usize::from(list_area.width.saturating_sub(4));
    let items: Vec<ListItem<'_>> = visible
        .iter()
        .map(|v| ListItem::new(list_row(app, v, width, theme)))
        .collect();
    let mut state = ListState::default();
    state.select(
        app.selected
            .as_deref()
            .and_then(|s| visible.iter().position(|v| v.request.id() == s)),
    );
    let title = if visible.is_empty() {
        " inbox ".to_owned()
    } else {
        format!(" inbox ({}) ", visible.len())
    };
    let list = List::new(items)
        .block(Block::new().borders(Borders::ALL).title(title))
        .highlight_style(Style::new().add_modifier(Modifier::REVERSED))
        .highlight_symbol("▶ ");
    if visible.is_empty() {
        let empty = if matches!(app.conn, Conn::Connecting) {
            "Connecting…"
        } else if app.filter.is_empty() {
            "All caught up: nothing waits for an answer."
        } else {
            "Nothing matches the filter (/ to change it)."
        };
        frame.render_widget(
            Paragraph::new(Span::styled(empty, theme.dim()))
                .block(Block::new().borders(Borders::ALL).title(" inbox ")),
            list_area,
        );
    } else {
        frame.render_stateful_widget(list, list_area, &mut state);
    }

    // The detail.
    let (title, lines) = match (app.mode == Mode::Review, app.current()) {
        (true, Some(view)) => (
            " review the edit ".to_owned(),
            review_lines(app, view, theme),
        ),
        (false, Some(view)) => (
            format!(" {} ", term::one_line(view.request.id())),
            detail_lines(app, view, theme),
        ),
        (_, None) => (" detail ".to_owned(), Vec::new()),
    };
    frame.render_widget(
        Paragraph::new(Text::from(lines))
            .wrap(Wrap { trim: false })
            .scroll((app.scroll, 0))
            .block(Block::new().borders(Borders::ALL).title(title)),
        detail_area,
    );
}

fn list_row(app: &App, v: &InteractionView, width: usize, theme: Theme) -> Line<'static> {
    let i = &v.request;
    let age = age(app, i.created_at);
    let kind = describe::kind_label(&i.request.kind);
    let mark = match i.status {
        InteractionStatus::Pending => Span::raw(" "),
        _ => Span::styled("✓", theme.ok()),
    };
    let head = format!("{age:>3} {kind:<8} ");
    let session = term::clip(&i.request.session_id, 12);
    let room = width.saturating_sub(head.chars().count() + session.chars().count() + 3);
    let summary = term::clip(&one_call_line(i), room.max(8));
    Line::from(vec![
        mark,
        Span::styled(head, theme.dim()),
        Span::styled(session, theme.accent()),
        Span::raw("  "),
        Span::raw(summary),
    ])
}

/// An interaction on one line: the command line for a shell call.
fn one_call_line(i: &lev_protocol::Interaction) -> String {
    if let InteractionKind::ToolApproval {
        tool_name,
        args_json,
        ..
    } = &i.request.kind
    {
        let what = match call::describe(args_json) {
            Some(Call::Shell { line, .. }) => format!("$ {line}"),
            Some(Call::Write { path, .. }) => format!("write {path}"),
            Some(Call::Http { method, url, .. }) => format!("{method} {url}"),
            None => describe::compact_json(args_json),
        };
        return match &i.request.title {
            Some(t) if !t.is_empty() => format!("{t}: {tool_name} {what}"),
            _ => format!("{tool_name} {what}"),
        };
    }
    describe::summary(i)
}

fn age(app: &App, then: time::OffsetDateTime) -> String {
    let secs = (app.now - then).whole_seconds().max(0);
    match secs {
        s if s < 60 => format!("{s}s"),
        s if s < 3600 => format!("{}m", s / 60),
        s if s < 86_400 => format!("{}h", s / 3600),
        s => format!("{}d", s / 86_400),
    }
}

/// `text` as lines with every hidden character spelled out by
/// [`term::escape_char`] and marked; tabs as spaces.
fn vis(text: &str, style: Style, theme: Theme) -> Vec<Line<'static>> {
    text.split('\n')
        .map(|line| Line::from(vis_spans(line, style, theme)))
        .collect()
}

/// One line of `text` (newlines spelled out too).
fn vis_one(text: &str, style: Style, theme: Theme) -> Vec<Span<'static>> {
    let mut spans = Vec::new();
    let mut plain = String::new();
    for c in text.chars() {
        match term::escape_char(c, false) {
            Some(shown) => {
                if !plain.is_empty() {
                    spans.push(Span::styled(std::mem::take(&mut plain), style));
                }
                spans.push(Span::styled(shown, theme.spelled()));
            }
            None => plain.push(c),
        }
    }
    if !plain.is_empty() {
        spans.push(Span::styled(plain, style));
    }
    spans
}

fn vis_spans(line: &str, style: Style, theme: Theme) -> Vec<Span<'static>> {
    let mut spans = Vec::new();
    let mut plain = String::new();
    for c in line.chars() {
        if c == '\t' {
            plain.push_str("    ");
            continue;
        }
        match term::escape_char(c, true) {
            Some(shown) => {
                if !plain.is_empty() {
                    spans.push(Span::styled(std::mem::take(&mut plain), style));
                }
                spans.push(Span::styled(shown, theme.spelled()));
            }
            None => plain.push(c),
        }
    }
    if !plain.is_empty() || spans.is_empty() {
        spans.push(Span::styled(plain, style));
    }
    spans
}

fn field<'a>(name: &str, value: Vec<Span<'a>>, theme: Theme) -> Line<'a> {
    let mut spans = vec![Span::styled(format!("{name:<10} "), theme.dim())];
    spans.extend(value);
    Line::from(spans)
}

fn detail_lines(app: &App, view: &InteractionView, theme: Theme) -> Vec<Line<'static>> {
    let i = &view.request;
    let mut out: Vec<Line<'static>> = Vec::new();

    // What it is, whose, when.
    out.extend(heading_lines(app, i, theme));

    // How it was settled, first: a lost race shows the answer that won.
    if i.status != InteractionStatus::Pending {
        out.push(Line::default());
        out.extend(outcome_lines(app, view, theme));
    }

    // Hidden characters, flagged as the dashboard flags them.
    let texts = lev_protocol::text::agent_texts(&i.request);
    if texts.iter().any(|t| lev_protocol::text::has_hidden(t)) {
        out.push(Line::from(Span::styled(
            "⚠ holds hidden characters, spelled out below as \\u{…}",
            theme.warn(),
        )));
        let tags: String = texts
            .iter()
            .flat_map(|t| lev_protocol::text::tag_chars(t))
            .collect();
        if !tags.is_empty() {
            let mut line = vec![Span::styled("⚠ hidden tag text: ", theme.warn())];
            line.extend(vis_one(&format!("“{tags}”"), theme.warn(), theme));
            out.push(Line::from(line));
        }
    }
    out.push(Line::default());

    out.extend(kind_lines(app, i, theme));

    out
}

/// The question itself, by kind: the prompt and its choices; for a tool
/// approval, the call (see [`tool_approval_lines`]).
fn kind_lines(app: &App, i: &lev_protocol::Interaction, theme: Theme) -> Vec<Line<'static>> {
    let r = &i.request;
    let plain = Style::new();
    let mut out: Vec<Line<'static>> = Vec::new();
    match &r.kind {
        InteractionKind::FreeText { prompt } => out.extend(vis(prompt, plain, theme)),
        InteractionKind::MultipleChoice { prompt, options } => {
            out.extend(vis(prompt, plain, theme));
            out.push(Line::default());
            for (n, option) in options.iter().enumerate() {
                let mut spans = vec![Span::styled(format!("  {:>2}. ", n + 1), theme.key())];
                spans.extend(vis_one(option, plain, theme));
                out.push(Line::from(spans));
            }
        }
        InteractionKind::InteractionPoints { prompt, points } => {
            out.extend(vis(prompt, plain, theme));
            out.push(Line::default());
            for p in points {
                let mut spans = vec![Span::raw("  - ")];
                spans.extend(vis_one(&p.id, theme.dim(), theme));
                spans.push(Span::raw(": "));
                spans.extend(vis_one(&p.text, plain, theme));
                out.push(Line::from(spans));
            }
        }
        InteractionKind::ToolApproval { .. } => out.extend(tool_approval_lines(app, i, theme)),
        InteractionKind::Form { prompt, schema } => {
            out.extend(vis(prompt, plain, theme));
            out.push(Line::default());
            out.extend(form_lines(app, i.id(), schema, theme));
        }
    }

    out
}

/// A form's fields, one a line: a marker on the one being typed, its label,
/// type and constraints, what is kept for it (else its default), its help.
fn form_lines(
    app: &App,
    id: &str,
    schema: &lev_protocol::form::FormSchema,
    theme: Theme,
) -> Vec<Line<'static>> {
    let mut out = Vec::new();
    let form = match lev_protocol::form::parse_schema(schema, &lev_protocol::Limits::default()) {
        Ok(form) => form,
        Err(e) => {
            out.push(Line::from(Span::styled(
                format!("the form's schema does not read: {e}"),
                theme.warn(),
            )));
            return out;
        }
    };
    let typing = match &app.mode {
        Mode::Input {
            field: Field::FormEntry(n),
            ..
        } => Some(*n),
        _ => None,
    };
    let draft = app.draft(id);
    for (n, field) in form.fields.iter().enumerate() {
        let marker = if typing == Some(n) { "▸ " } else { "  " };
        let mut spans = vec![Span::styled(marker.to_owned(), theme.key())];
        spans.extend(vis_one(field.label(), theme.bold(), theme));
        if field.title.is_some() {
            spans.push(Span::raw(" ("));
            spans.extend(vis_one(&field.name, theme.dim(), theme));
            spans.push(Span::raw(")"));
        }
        let mut about = format!(" {}", crate::describe::field_type_text(&field.ty));
        if field.required {
            about.push_str(", required");
        }
        spans.push(Span::styled(about, theme.dim()));
        match (draft.form.get(&field.name), &field.default) {
            (Some(value), _) => {
                spans.push(Span::raw(" = "));
                spans.extend(vis_one(&value.to_string(), Style::new(), theme));
            }
            (None, Some(default)) => {
                spans.push(Span::styled(" default ", theme.dim()));
                spans.extend(vis_one(&default.to_string(), theme.dim(), theme));
            }
            (None, None) => {}
        }
        out.push(Line::from(spans));
        if let Some(help) = &field.description {
            let mut spans = vec![Span::raw("    ")];
            spans.extend(vis_one(help, theme.dim(), theme));
            out.push(Line::from(spans));
        }
        // Why the value typed for this field was refused, under it.
        if typing == Some(n)
            && let Some(notice) = app.notice.as_ref().filter(|n| !n.ok)
        {
            let mut spans = vec![Span::raw("    ")];
            spans.extend(vis_one(&notice.text, theme.bad(), theme));
            out.push(Line::from(spans));
        }
    }
    out
}

/// A tool approval's call: the tool, its sandbox and needs, the votes, the
/// call as read and its exact args, the options, and the draft answer.
fn tool_approval_lines(
    app: &App,
    i: &lev_protocol::Interaction,
    theme: Theme,
) -> Vec<Line<'static>> {
    let InteractionKind::ToolApproval {
        tool_name,
        args_json,
        missing_capabilities,
        sandbox_mode,
        options,
    } = &i.request.kind
    else {
        return Vec::new();
    };
    let plain = Style::new();
    let draft = app.draft(i.id());
    let mut out: Vec<Line<'static>> = Vec::new();
    let mut tool = vis_one(tool_name, theme.bold(), theme);
    if !sandbox_mode.is_empty() {
        tool.push(Span::styled("  sandbox ", theme.dim()));
        tool.extend(vis_one(sandbox_mode, plain, theme));
    }
    if !missing_capabilities.is_empty() {
        tool.push(Span::styled("  needs ", theme.dim()));
        tool.extend(vis_one(
            &missing_capabilities.join(", "),
            theme.warn(),
            theme,
        ));
    }
    out.push(field("tool", tool, theme));
    out.extend(vote_lines(app, i, theme));
    out.push(Line::default());
    out.extend(call_lines(args_json, theme));
    out.push(Line::default());
    out.push(Line::from(Span::styled("args (exact)", theme.dim())));
    for line in vis(&describe::pretty_json(args_json), plain, theme) {
        let mut spans = vec![Span::raw("  ")];
        spans.extend(line.spans);
        out.push(Line::from(spans));
    }
    if !options.is_empty() {
        out.push(Line::default());
        for (n, option) in options.iter().enumerate() {
            let on = draft.choice == Some(n);
            let mut spans = vec![
                Span::styled(format!("  {:>2}. ", n + 1), theme.key()),
                Span::raw(if on { "(•) " } else { "( ) " }),
            ];
            spans.extend(vis_one(
                option,
                if on { theme.bold() } else { plain },
                theme,
            ));
            out.push(Line::from(spans));
        }
    }
    if i.status == InteractionStatus::Pending {
        out.push(Line::default());
        out.extend(draft_lines(&draft, args_json, theme));
    }
    out
}

/// The heading: the kind and title; the session, caller, age and, while
/// pending, the time left.
fn heading_lines(app: &App, i: &lev_protocol::Interaction, theme: Theme) -> [Line<'static>; 2] {
    let r = &i.request;
    let plain = Style::new();
    let mut head = vec![Span::styled(
        format!("{} ", r.kind.type_name().replace('_', " ")),
        theme.bold(),
    )];
    if let Some(title) = r.title.as_deref().filter(|t| !t.is_empty()) {
        head.extend(vis_one(title, theme.bold(), theme));
    }
    let mut who = vis_one(&r.session_id, theme.accent(), theme);
    if let Some(c) = &r.caller {
        who.push(Span::styled("  caller ", theme.dim()));
        who.extend(vis_one(c, plain, theme));
    }
    who.push(Span::styled(
        format!("  {} ago", age(app, i.created_at)),
        theme.dim(),
    ));
    if let (Some(expires), InteractionStatus::Pending) = (i.expires_at, i.status) {
        let left = (expires - app.now).whole_seconds().max(0);
        who.push(Span::styled(
            format!("  expires in {}", short_secs(left)),
            theme.dim(),
        ));
    }
    [Line::from(head), field("session", who, theme)]
}

/// A tool approval's votes (SPEC section 13): how many must approve, who
/// voted, who may still vote, when the escalation opens. Nothing for one
/// person's decision without votes.
fn vote_lines(app: &App, i: &lev_protocol::Interaction, theme: Theme) -> Vec<Line<'static>> {
    let needed = i.approvals_needed();
    let quorum = i.request.quorum.as_ref();
    if needed <= 1 && quorum.is_none() && i.votes.is_empty() {
        return Vec::new();
    }
    let plain = Style::new();
    let mut out = Vec::new();
    let mut head = format!("{} of {needed} approvals", i.approvals());
    if quorum.is_some_and(|q| q.require_signed_votes) {
        head.push_str(", signed");
    }
    out.push(field(
        "votes",
        vec![Span::styled(head, theme.bold())],
        theme,
    ));
    for v in &i.votes {
        let mut spans = vec![Span::raw("  ")];
        spans.extend(vis_one(&v.voter, plain, theme));
        spans.push(Span::raw(" "));
        if v.approved {
            let scope = v.response.scope.unwrap_or_default().as_str();
            spans.push(Span::styled(format!("approve ({scope})"), theme.ok()));
            if v.response.modified_args_json.is_some() {
                spans.push(Span::styled(" with edited args", theme.warn()));
            }
        } else {
            spans.push(Span::styled("deny", theme.bad()));
        }
        spans.push(Span::styled(
            if v.signed { "  signed" } else { "  unsigned" },
            theme.dim(),
        ));
        out.push(Line::from(spans));
    }
    if i.status == InteractionStatus::Pending {
        let may = match i.may_still_vote(app.now) {
            None => "any approver".to_owned(),
            Some(names) if names.is_empty() => "nobody".to_owned(),
            Some(names) => names.join(", "),
        };
        out.push(field("may vote", vis_one(&may, plain, theme), theme));
        if let (Some(at), Some(q)) = (i.escalates_at(), quorum) {
            let left = (at - app.now).whole_seconds();
            let when = if left > 0 {
                format!(" in {}", short_secs(left))
            } else {
                " now".to_owned()
            };
            let mut spans = vis_one(&q.escalate_to.join(", "), plain, theme);
            spans.push(Span::styled(format!(" may vote{when}"), theme.dim()));
            out.push(field("escalates", spans, theme));
        }
    }
    out
}

fn short_secs(s: i64) -> String {
    match s {
        s if s < 60 => format!("{s}s"),
        s if s < 3600 => format!("{}m", s / 60),
        s => format!("{}h", s / 3600),
    }
}

/// What the call will do: a command line, a file's new text, a request.
fn call_lines(args_json: &str, theme: Theme) -> Vec<Line<'static>> {
    let plain = Style::new();
    let mut out = Vec::new();
    match call::describe(args_json) {
        Some(Call::Shell { line, cwd }) => {
            let mut spans = vec![Span::styled("$ ", theme.dim())];
            spans.extend(vis_one(&line, theme.bold(), theme));
            out.push(field("runs", spans, theme));
            if let Some(cwd) = cwd {
                out.push(field("in", vis_one(&cwd, plain, theme), theme));
            }
        }
        Some(Call::Write { path, text }) => {
            let n = text.lines().count();
            let mut spans = vis_one(&path, theme.bold(), theme);
            spans.push(Span::styled(
                format!("  ({n} line{})", if n == 1 { "" } else { "s" }),
                theme.dim(),
            ));
            out.push(field("writes", spans, theme));
            for line in vis(&text, plain, theme) {
                let mut spans = vec![Span::styled("  │ ", theme.dim())];
                spans.extend(line.spans);
                out.push(Line::from(spans));
            }
        }
        Some(Call::Http { method, url, body }) => {
            let mut spans = vec![Span::styled(format!("{method} "), theme.bold())];
            spans.extend(vis_one(&url, theme.bold(), theme));
            out.push(field("requests", spans, theme));
            if let Some(body) = body {
                out.push(Line::from(Span::styled("body", theme.dim())));
                for line in vis(&body, plain, theme) {
                    let mut spans = vec![Span::styled("  │ ", theme.dim())];
                    spans.extend(line.spans);
                    out.push(Line::from(spans));
                }
            }
        }
        None => out.push(field(
            "does",
            vec![Span::styled("see the exact args below", theme.dim())],
            theme,
        )),
    }
    out
}

fn draft_lines(draft: &super::model::Draft, args_json: &str, theme: Theme) -> Vec<Line<'static>> {
    let plain = Style::new();
    let mut out = Vec::new();
    let scope = match draft.scope {
        lev_protocol::ApprovalScope::Once => "once: this call only",
        lev_protocol::ApprovalScope::Session => "session: this tool, the rest of the conversation",
        lev_protocol::ApprovalScope::Always => "always: this tool, for this caller, until revoked",
    };
    out.push(field(
        "approve",
        vec![Span::styled(scope, theme.bold())],
        theme,
    ));
    if !draft.injected.is_empty() {
        let mut spans = vec![];
        spans.extend(vis_one(&draft.injected, plain, theme));
        out.push(field("inject", spans, theme));
    }
    if let Some(edited) = &draft.edited {
        out.push(Line::from(Span::styled(
            "edited args (sent with the approval; u undoes):",
            theme.warn(),
        )));
        out.extend(diff_lines(args_json, edited, theme));
    }
    out
}

fn outcome_lines(app: &App, view: &InteractionView, theme: Theme) -> Vec<Line<'static>> {
    let i = &view.request;
    let mut out = Vec::new();
    let outcome = app.outcomes.get(i.id());
    let head = match (i.status, outcome) {
        (InteractionStatus::Answered, Some(Outcome::Raced)) => Span::styled(
            "Answered elsewhere first. The answer that won:",
            theme.warn(),
        ),
        (InteractionStatus::Answered, _) => Span::styled("Answered:", theme.ok()),
        (InteractionStatus::Expired, _) => {
            Span::styled("Expired without an answer (a deny).", theme.bad())
        }
        (InteractionStatus::Cancelled, _) => Span::styled("Cancelled.", theme.dim()),
        (InteractionStatus::Pending, _) => Span::raw(""),
    };
    out.push(Line::from(head));
    if let Some(response) = &view.response {
        let summary = describe::answer_summary(&i.request.kind, response);
        let style = match response.approved {
            Some(true) => theme.ok(),
            Some(false) => theme.bad(),
            None => Style::new(),
        };
        let mut spans = vec![Span::raw("  ")];
        spans.extend(vis_one(&summary, style, theme));
        out.push(Line::from(spans));
        if let Some(by) = &i.answered_by {
            let mut spans = vec![Span::styled("  by ", theme.dim())];
            spans.extend(vis_one(by, Style::new(), theme));
            out.push(Line::from(spans));
        }
    }
    out.push(Line::from(Span::styled(
        "j/k: the next question",
        theme.dim(),
    )));
    out
}

fn review_lines(app: &App, view: &InteractionView, theme: Theme) -> Vec<Line<'static>> {
    let mut out = Vec::new();
    let draft = app.draft(view.request.id());
    let InteractionKind::ToolApproval { args_json, .. } = &view.request.request.kind else {
        return out;
    };
    let Some(edited) = &draft.edited else {
        return out;
    };
    out.push(Line::from(Span::styled(
        "The call will run with these args instead of the agent's:",
        theme.bold(),
    )));
    out.push(Line::default());
    out.extend(diff_lines(args_json, edited, theme));
    out.push(Line::default());
    out.extend(call_lines(edited, theme));
    out.push(Line::default());
    let scope = draft.scope.as_str();
    out.push(Line::from(vec![
        Span::styled("a", theme.key()),
        Span::raw(format!(" approve {scope} with this edit  ")),
        Span::styled("s", theme.key()),
        Span::raw(" scope  "),
        Span::styled("e", theme.key()),
        Span::raw(" edit again  "),
        Span::styled("u", theme.key()),
        Span::raw(" undo the edit  "),
        Span::styled("Esc", theme.key()),
        Span::raw(" back"),
    ]));
    out
}

/// A line diff of two JSON texts, both pretty-printed.
fn diff_lines(before: &str, after: &str, theme: Theme) -> Vec<Line<'static>> {
    let a = describe::pretty_json(before);
    let b = describe::pretty_json(after);
    let a: Vec<&str> = a.lines().collect();
    let b: Vec<&str> = b.lines().collect();
    let plain = Style::new();
    line_diff(&a, &b)
        .into_iter()
        .map(|(op, text)| {
            let (mark, style) = match op {
                '-' => ("- ", theme.bad()),
                '+' => ("+ ", theme.ok()),
                _ => ("  ", plain),
            };
            let mut spans = vec![Span::styled(mark, style)];
            spans.extend(vis_spans(text, style, theme));
            Line::from(spans)
        })
        .collect()
}

/// The lines of `a` and `b` as `-`, `+` and ` ` (a longest common
/// subsequence; past a few hundred lines, all of `a` out and all of `b` in).
pub fn line_diff<'a>(a: &[&'a str], b: &[&'a str]) -> Vec<(char, &'a str)> {
    if a.len().saturating_mul(b.len()) > 250_000 {
        return a
            .iter()
            .map(|l| ('-', *l))
            .chain(b.iter().map(|l| ('+', *l)))
            .collect();
    }
    let (n, m) = (a.len(), b.len());
    let mut lcs = vec![vec![0u32; m + 1]; n + 1];
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            lcs[i][j] = if a[i] == b[j] {
                lcs[i + 1][j + 1] + 1
            } else {
                lcs[i + 1][j].max(lcs[i][j + 1])
            };
        }
    }
    let (mut i, mut j) = (0, 0);
    let mut out = Vec::new();
    while i < n || j < m {
        if i < n && j < m && a[i] == b[j] {
            out.push((' ', a[i]));
            i += 1;
            j += 1;
        } else if i < n && (j == m || lcs[i + 1][j] >= lcs[i][j + 1]) {
            out.push(('-', a[i]));
            i += 1;
        } else {
            out.push(('+', b[j]));
            j += 1;
        }
    }
    out
}

/// Most lines of a typed answer shown at once.
const INPUT_LINES: usize = 6;

fn footer_lines(app: &App, width: u16, theme: Theme) -> Vec<Line<'static>> {
    let k = |key: &str, what: &str| key_hint(key, what, theme);
    let mut keys: Vec<Span<'static>> = Vec::new();
    match &app.mode {
        Mode::Input { field, buffer } => return input_lines(*field, buffer, theme),
        Mode::Grants => {
            keys.extend(k("j/k", "move"));
            keys.extend(k("x", "revoke"));
            keys.extend(k("r", "reload"));
            keys.extend(k("Esc", "inbox"));
            keys.extend(k("q", "quit"));
        }
        Mode::ConfirmRevoke(id) => {
            return vec![
                Line::from(vec![Span::styled(
                    format!(
                        "Revoke {}? calls it approved will ask again.",
                        term::one_line(id)
                    ),
                    theme.warn(),
                )]),
                Line::from(vec![
                    Span::styled("y", theme.key()),
                    Span::raw(" revoke  "),
                    Span::styled("any other key", theme.key()),
                    Span::raw(" keep it"),
                ]),
            ];
        }
        Mode::Review => {
            keys.extend(k("a", "approve with the edit"));
            keys.extend(k("e", "edit again"));
            keys.extend(k("u", "undo"));
            keys.extend(k("Esc", "back"));
        }
        Mode::Help => keys.extend(k("any key", "back")),
        Mode::Inbox => keys = inbox_keys(app, width, theme),
    }
    vec![Line::from(keys), status_line(app, theme)]
}

/// A key and what it does, in the footer.
fn key_hint(key: &str, what: &str, theme: Theme) -> Vec<Span<'static>> {
    vec![
        Span::styled(key.to_owned(), theme.key()),
        Span::raw(format!(" {what}  ")),
    ]
}

/// The answer being typed into `field`: its lines, the last few when it is
/// long (the label before the first shown, the cursor after the last), and
/// the field's keys.
fn input_lines(field: Field, buffer: &str, theme: Theme) -> Vec<Line<'static>> {
    let all: Vec<&str> = buffer.split('\n').collect();
    let first_shown = all.len().saturating_sub(INPUT_LINES);
    let mut lines: Vec<Line<'static>> = Vec::new();
    for (i, text) in all.iter().enumerate().skip(first_shown) {
        let mut line = if i == first_shown {
            let label = if first_shown > 0 {
                format!("{} (+{first_shown} lines above): ", field.label())
            } else {
                format!("{}: ", field.label())
            };
            vec![Span::styled(label, theme.bold())]
        } else {
            vec![Span::raw("  ")]
        };
        line.extend(vis_one(text, Style::new(), theme));
        if i + 1 == all.len() {
            line.push(Span::styled(
                "█",
                Style::new().add_modifier(Modifier::SLOW_BLINK),
            ));
        }
        lines.push(Line::from(line));
    }
    let hint = match field {
        Field::Reply => "Enter sends · Alt+Enter/Ctrl+J new line · @path attaches · Esc",
        Field::Feedback => "Enter denies with this feedback · Alt+Enter/Ctrl+J new line · Esc",
        Field::Inject => "Enter keeps it · Alt+Enter/Ctrl+J new line · Esc cancels",
        Field::Filter => "session:S kind:K words · Enter keeps · Esc",
        Field::FormEntry(_) => {
            "Enter keeps it and goes to the next field (sends after the last) · Esc"
        }
    };
    lines.push(Line::from(Span::styled(hint, theme.dim())));
    lines
}

/// The inbox's keys: those that answer the selected question by its kind,
/// then the moves and views when they fit beside them.
fn inbox_keys(app: &App, width: u16, theme: Theme) -> Vec<Span<'static>> {
    let k = |key: &str, what: &str| key_hint(key, what, theme);
    let mut keys: Vec<Span<'static>> = Vec::new();
    let pending = app
        .current()
        .filter(|v| v.request.status == InteractionStatus::Pending);
    match pending.map(|v| &v.request.request.kind) {
        Some(InteractionKind::ToolApproval { .. }) => {
            let scope = pending
                .map(|v| app.draft(v.request.id()).scope.as_str())
                .unwrap_or("once");
            keys.extend(k("a", &format!("approve {scope}")));
            keys.extend(k("s", "scope"));
            keys.extend(k("d", "deny"));
            keys.extend(k("f", "feedback"));
            keys.extend(k("e", "edit"));
            keys.extend(k("i", "inject"));
        }
        Some(InteractionKind::MultipleChoice { options, .. }) => {
            let last = options.len().min(9);
            keys.extend(k(&format!("1-{last}"), "choose"));
        }
        Some(InteractionKind::Form { .. }) => keys.extend(k("r", "fill in")),
        Some(_) => keys.extend(k("r", "reply")),
        None => {}
    }
    // The moves and views when they fit beside the answer keys.
    let used: usize = keys.iter().map(|s| s.content.chars().count()).sum();
    if used + 54 <= usize::from(width) {
        keys.extend(k("j/k", "move"));
        keys.extend(k("/", "filter"));
        keys.extend(k("g", "grants"));
    }
    keys.extend(k("?", "keys"));
    keys.extend(k("q", "quit"));
    keys
}

/// The footer's last line: an answer being sent, a notice, a lost
/// connection, or nothing.
fn status_line(app: &App, theme: Theme) -> Line<'static> {
    if let Some(id) = &app.sending {
        Line::from(Span::styled(
            format!("sending the answer to {}…", term::one_line(id)),
            theme.dim(),
        ))
    } else if let Some(notice) = &app.notice {
        let style = if notice.ok { theme.ok() } else { theme.bad() };
        Line::from(vis_one(&notice.text, style, theme))
    } else if let Conn::Reconnecting { error, .. } = &app.conn {
        Line::from(vis_one(
            &format!("connection lost: {error}; resuming where it left off"),
            theme.warn(),
            theme,
        ))
    } else {
        Line::default()
    }
}

fn draw_grants(frame: &mut Frame<'_>, area: Rect, app: &App, theme: Theme) {
    let block = Block::new()
        .borders(Borders::ALL)
        .title(" grants: calls approved without asking ");
    let Some(grants) = &app.grants else {
        frame.render_widget(Paragraph::new("Loading…").block(block), area);
        return;
    };
    if grants.is_empty() {
        frame.render_widget(
            Paragraph::new(Span::styled(
                "No grants in force: every call not allowed by the policy asks.",
                theme.dim(),
            ))
            .block(block),
            area,
        );
        return;
    }
    let width = usize::from(area.width.saturating_sub(6));
    let items: Vec<ListItem<'_>> = grants
        .iter()
        .map(|g| {
            let mut first = vec![
                Span::styled(format!("{:<8}", g.scope.as_str()), theme.bold()),
                Span::styled(term::clip(&g.tool_name, 24), theme.accent()),
                Span::styled("  for ", theme.dim()),
                Span::raw(term::clip(&g.caller, 16)),
            ];
            if let Some(c) = &g.conversation_id {
                first.push(Span::styled("  in ", theme.dim()));
                first.push(Span::raw(term::clip(c, 16)));
            }
            let args = match &g.grant_args {
                Some(ga) => ga
                    .iter()
                    .map(|(p, r)| format!("{p} ~ {r}"))
                    .collect::<Vec<_>>()
                    .join(", "),
                None => "any args".to_owned(),
            };
            let second = Line::from(vec![
                Span::styled(
                    format!("        {} by {} · ", g.id, term::clip(&g.approver, 16)),
                    theme.dim(),
                ),
                Span::raw(term::clip(&args, width.saturating_sub(40).max(10))),
            ]);
            ListItem::new(vec![Line::from(first), second])
        })
        .collect();
    let mut state = ListState::default();
    state.select(Some(app.grant_selected));
    frame.render_stateful_widget(
        List::new(items)
            .block(block)
            .highlight_style(Style::new().add_modifier(Modifier::REVERSED))
            .highlight_symbol("▶ "),
        area,
        &mut state,
    );
}

fn draw_help(frame: &mut Frame<'_>, area: Rect, theme: Theme) {
    let rows: &[(&str, &str)] = &[
        ("j k ↑ ↓", "move in the inbox"),
        ("PgUp PgDn", "scroll the detail"),
        ("r", "reply (Enter sends, Alt+Enter or Ctrl+J: new line)"),
        ("1-9", "choose an option (as numbered on screen)"),
        ("a", "approve a tool call with the scope shown"),
        ("s", "scope: once, session, always"),
        ("d", "deny"),
        ("f", "deny with feedback"),
        ("e", "edit the args in $EDITOR (diff shown before sending)"),
        ("i", "context injected before the tool runs"),
        ("/", "filter: session:S kind:K words"),
        ("g", "grants: list, x revokes"),
        ("q Ctrl-C", "quit"),
    ];
    let lines: Vec<Line<'_>> = rows
        .iter()
        .map(|(key, what)| {
            Line::from(vec![
                Span::styled(format!("{key:>10}  "), theme.key()),
                Span::raw(*what),
            ])
        })
        .collect();
    let h = u16::try_from(lines.len() + 2)
        .unwrap_or(u16::MAX)
        .min(area.height);
    let w = 64.min(area.width);
    let popup = Rect {
        x: area.x + (area.width - w) / 2,
        y: area.y + (area.height - h) / 2,
        width: w,
        height: h,
    };
    frame.render_widget(Clear, popup);
    frame.render_widget(
        Paragraph::new(lines).block(Block::new().borders(Borders::ALL).title(" keys ")),
        popup,
    );
}
