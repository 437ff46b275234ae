//! The state of `lev watch` and how it changes: messages from the server
//! ([`Msg`]) and keys in, [`Action`]s for the IO edge out. No IO here.

use std::collections::HashMap;

use crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use lev_protocol::api::{Grant, InteractionView};
use lev_protocol::{
    ApprovalScope, InteractionKind, InteractionResponse, InteractionStatus, StoredResponse,
};
use time::OffsetDateTime;

use crate::describe;

/// The most interactions kept (pending ones; answered ones are dropped once
/// nobody looks at them).
const MAX_ITEMS: usize = 2000;

/// What the IO edge tells the model.
#[derive(Debug, Clone)]
pub enum Msg {
    /// The event stream is open.
    Connected,
    /// The event stream dropped (or could not open); it is being retried.
    Disconnected {
        /// Why, for a person.
        error: String,
        /// How many tries in a row failed.
        attempt: u32,
    },
    /// The pending interactions, read when the stream first opened.
    Listed(Vec<InteractionView>),
    /// One event of `/v1/events` about an interaction.
    Event {
        /// Its durable id, for `Last-Event-ID`.
        id: Option<String>,
        /// The interaction, as the event carries it.
        view: Box<InteractionView>,
    },
    /// The answer to a [`Action::Respond`].
    Responded {
        /// The interaction answered.
        id: String,
        /// The stored answer, or why not.
        result: Result<StoredResponse, RespondError>,
    },
    /// A vote on a tool approval recorded while more approvals are needed.
    Voted {
        /// The interaction, still pending.
        id: String,
        /// Its votes now.
        votes: Vec<lev_protocol::Vote>,
        /// How many must approve.
        needed: u32,
    },
    /// The grants in force (or why they could not be read).
    Grants(Result<Vec<Grant>, String>),
    /// A grant revoked (or why not).
    Revoked(Result<Grant, String>),
    /// `$EDITOR` is done with an interaction's args.
    Edited {
        /// The interaction.
        id: String,
        /// The file's text, or why the editor failed.
        result: Result<String, String>,
    },
}

/// Why an answer was refused.
#[derive(Debug, Clone)]
pub struct RespondError {
    /// What went wrong, for a person.
    pub message: String,
    /// The answer that won, when somebody answered first.
    pub winner: Option<StoredResponse>,
}

/// What the model asks the IO edge to do.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// `POST /v1/interactions/{id}/respond`.
    Respond {
        /// The interaction.
        id: String,
        /// The answer (`@path` words in a text answer still to attach).
        response: Box<InteractionResponse>,
    },
    /// Open `$EDITOR` on these args.
    Edit {
        /// The interaction.
        id: String,
        /// The text to edit (pretty JSON).
        text: String,
    },
    /// `GET /v1/grants`.
    LoadGrants,
    /// `DELETE /v1/grants/{id}`.
    Revoke(String),
    /// Leave.
    Quit,
}

/// The event stream's state, shown in the header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Conn {
    /// Not yet open.
    Connecting,
    /// Open: events arrive live.
    Live,
    /// Dropped; being retried.
    Reconnecting {
        /// Why it dropped.
        error: String,
        /// Failed tries in a row.
        attempt: u32,
    },
}

/// What the keys act on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mode {
    /// The inbox and the selected interaction.
    Inbox,
    /// A line of text being typed.
    Input {
        /// What it is for.
        field: Field,
        /// The text so far.
        buffer: String,
    },
    /// The args edited in `$EDITOR`, their diff shown before sending.
    Review,
    /// The grants in force.
    Grants,
    /// Revoke this grant? (y/n)
    ConfirmRevoke(String),
    /// The keys.
    Help,
}

/// What a typed line is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Field {
    /// The answer to a text question (Enter sends).
    Reply,
    /// Deny feedback (Enter denies).
    Feedback,
    /// Context injected before the tool runs (Enter keeps it).
    Inject,
    /// The inbox filter.
    Filter,
    /// A form's field, by its place in the form (Enter keeps it and goes
    /// to the next; after the last, the form is sent).
    FormEntry(usize),
}

impl Field {
    /// Whether it takes several lines (an answer does; the filter does not).
    pub fn multi_line(self) -> bool {
        !matches!(self, Self::Filter | Self::FormEntry(_))
    }

    /// Its label on screen.
    pub fn label(self) -> &'static str {
        match self {
            Self::Reply => "reply",
            Self::Feedback => "deny feedback",
            Self::Inject => "inject context",
            Self::Filter => "filter",
            Self::FormEntry(_) => "field",
        }
    }
}

/// An answer being put together for one tool approval.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Draft {
    /// The scope an approval gets.
    pub scope: ApprovalScope,
    /// The option chosen (0-based), if any.
    pub choice: Option<usize>,
    /// Context to inject before the tool runs.
    pub injected: String,
    /// The edited args, when they differ from the call's.
    pub edited: Option<String>,
    /// A form's answers so far, by field name.
    pub form: serde_json::Map<String, serde_json::Value>,
}

/// How an interaction the watcher showed was settled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// This watcher's answer won.
    Mine,
    /// Somebody else answered first.
    Raced,
}

/// A line at the bottom: what just happened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notice {
    /// Good news (else a warning or an error).
    pub ok: bool,
    /// The text.
    pub text: String,
}

/// The whole state of `lev watch`.
#[derive(Debug, Clone)]
pub struct App {
    /// The server's URL, for the header.
    pub url: String,
    /// Interactions known, newest first.
    pub items: Vec<InteractionView>,
    /// The interaction selected.
    pub selected: Option<String>,
    /// What keys act on.
    pub mode: Mode,
    /// Answers being put together, by interaction.
    pub drafts: HashMap<String, Draft>,
    /// How settled interactions were settled.
    pub outcomes: HashMap<String, Outcome>,
    /// The inbox filter: `session:S`, `kind:K` and words.
    pub filter: String,
    /// The event stream.
    pub conn: Conn,
    /// The last event id seen.
    pub last_event_id: Option<String>,
    /// What just happened.
    pub notice: Option<Notice>,
    /// The grants, once loaded.
    pub grants: Option<Vec<Grant>>,
    /// The grant selected.
    pub grant_selected: usize,
    /// Answers sent and not yet acknowledged.
    pub sending: Option<String>,
    /// Lines the detail pane is scrolled by.
    pub scroll: u16,
    /// The clock, for ages (set by the IO edge).
    pub now: OffsetDateTime,
    /// Set when the watcher should exit.
    pub quit: bool,
}

impl App {
    /// A watcher of the server at `url`, nothing loaded yet.
    pub fn new(url: &str, now: OffsetDateTime) -> Self {
        Self {
            url: url.to_owned(),
            items: Vec::new(),
            selected: None,
            mode: Mode::Inbox,
            drafts: HashMap::new(),
            outcomes: HashMap::new(),
            filter: String::new(),
            conn: Conn::Connecting,
            last_event_id: None,
            notice: None,
            grants: None,
            grant_selected: 0,
            sending: None,
            scroll: 0,
            now,
            quit: false,
        }
    }

    // ------------------------------------------------------------ reading

    /// The interactions the inbox lists: pending ones matching the filter,
    /// and the selected one whatever its status (so an answer that won a
    /// race stays on screen).
    pub fn visible(&self) -> Vec<&InteractionView> {
        let filter = Filter::parse(&self.filter);
        self.items
            .iter()
            .filter(|v| {
                Some(v.request.id()) == self.selected.as_deref()
                    || (v.request.status == InteractionStatus::Pending && filter.matches(v))
            })
            .collect()
    }

    /// How many interactions wait for an answer.
    pub fn pending_count(&self) -> usize {
        self.items
            .iter()
            .filter(|v| v.request.status == InteractionStatus::Pending)
            .count()
    }

    /// The selected interaction.
    pub fn current(&self) -> Option<&InteractionView> {
        let id = self.selected.as_deref()?;
        self.items.iter().find(|v| v.request.id() == id)
    }

    fn current_view(&self, id: &str) -> Option<&InteractionView> {
        self.items.iter().find(|v| v.request.id() == id)
    }

    /// The selected interaction when it is waiting for an answer.
    fn current_pending(&self) -> Option<&InteractionView> {
        self.current()
            .filter(|v| v.request.status == InteractionStatus::Pending)
    }

    /// The draft of `id` (a default one when none).
    pub fn draft(&self, id: &str) -> Draft {
        self.drafts.get(id).cloned().unwrap_or_default()
    }

    // ------------------------------------------------------------ messages

    /// Apply what the IO edge reports.
    pub fn on_msg(&mut self, msg: Msg) {
        match msg {
            Msg::Connected => {
                if matches!(self.conn, Conn::Reconnecting { .. }) {
                    self.notify(true, "reconnected: caught up with what happened meanwhile");
                }
                self.conn = Conn::Live;
            }
            Msg::Disconnected { error, attempt } => {
                self.conn = Conn::Reconnecting { error, attempt };
            }
            Msg::Listed(views) => {
                for view in views {
                    self.upsert(view, false);
                }
                self.ensure_selection();
            }
            Msg::Event { id, view } => {
                if id.is_some() {
                    self.last_event_id = id;
                }
                let id = view.request.id().to_owned();
                let new_pending = view.request.status == InteractionStatus::Pending
                    && !self.items.iter().any(|v| v.request.id() == id);
                self.upsert(*view, true);
                // A new question while the one shown is settled: show it, as
                // the dashboard does.
                if new_pending && self.current_pending().is_none() {
                    let filter = Filter::parse(&self.filter);
                    if self.current_view(&id).is_some_and(|v| filter.matches(v)) {
                        self.select(Some(id));
                    }
                }
                self.ensure_selection();
            }
            Msg::Responded { id, result } => {
                if self.sending.as_deref() == Some(id.as_str()) {
                    self.sending = None;
                }
                self.on_responded(&id, result);
            }
            Msg::Voted { id, votes, needed } => {
                if self.sending.as_deref() == Some(id.as_str()) {
                    self.sending = None;
                }
                let approvals = votes.iter().filter(|v| v.approved).count();
                if let Some(view) = self.items.iter_mut().find(|v| v.request.id() == id) {
                    view.request.votes = votes;
                }
                self.drafts.remove(&id);
                self.notify(
                    true,
                    &format!("vote recorded: {approvals} of {needed} approvals, waiting for more"),
                );
            }
            Msg::Grants(Ok(grants)) => {
                self.grant_selected = self.grant_selected.min(grants.len().saturating_sub(1));
                self.grants = Some(grants);
            }
            Msg::Grants(Err(e)) => self.notify(false, &format!("grants: {e}")),
            Msg::Revoked(Ok(grant)) => {
                if let Some(grants) = &mut self.grants {
                    grants.retain(|g| g.id != grant.id);
                    self.grant_selected = self.grant_selected.min(grants.len().saturating_sub(1));
                }
                self.notify(
                    true,
                    &format!(
                        "revoked {}: {} calls ask again",
                        grant.id,
                        crate::term::one_line(&grant.tool_name)
                    ),
                );
                self.mode = Mode::Grants;
            }
            Msg::Revoked(Err(e)) => {
                self.notify(false, &format!("revoke: {e}"));
                self.mode = Mode::Grants;
            }
            Msg::Edited { id, result } => self.on_edited(&id, result),
        }
    }

    fn upsert(&mut self, view: InteractionView, live: bool) {
        let id = view.request.id().to_owned();
        let is_selected = self.selected.as_deref() == Some(id.as_str());
        let fin = view.request.status != InteractionStatus::Pending;
        if let Some(slot) = self.items.iter_mut().find(|v| v.request.id() == id) {
            // A final status never goes back to pending (a late list read).
            if slot.request.status != InteractionStatus::Pending && !fin {
                return;
            }
            *slot = view;
        } else {
            if fin && !is_selected {
                return;
            }
            let at = self
                .items
                .iter()
                .position(|v| newer(&view, v))
                .unwrap_or(self.items.len());
            self.items.insert(at, view);
        }
        if fin {
            if is_selected {
                if live && !self.outcomes.contains_key(&id) && self.sending.as_deref() != Some(&id)
                {
                    self.outcomes.insert(id.clone(), Outcome::Raced);
                }
            } else {
                self.items.retain(|v| v.request.id() != id);
            }
        }
        if self.items.len() > MAX_ITEMS {
            self.prune();
        }
    }

    /// Drop settled interactions nobody looks at.
    fn prune(&mut self) {
        let selected = self.selected.clone();
        self.items.retain(|v| {
            v.request.status == InteractionStatus::Pending
                || Some(v.request.id()) == selected.as_deref()
        });
        self.items.truncate(MAX_ITEMS);
    }

    fn ensure_selection(&mut self) {
        let keep = self.current().is_some_and(|v| {
            v.request.status == InteractionStatus::Pending
                || self.outcomes.contains_key(v.request.id())
        });
        if keep {
            return;
        }
        let first = self.visible().first().map(|v| v.request.id().to_owned());
        if first.is_some() || self.current().is_none() {
            self.select(first);
        }
    }

    fn select(&mut self, id: Option<String>) {
        if id != self.selected {
            self.selected = id;
            self.scroll = 0;
            self.prune();
        }
    }

    fn on_responded(&mut self, id: &str, result: Result<StoredResponse, RespondError>) {
        match result {
            Ok(response) => {
                self.outcomes.insert(id.to_owned(), Outcome::Mine);
                let summary = self.settle(id, response);
                self.drafts.remove(id);
                self.notify(true, &format!("sent: {summary}"));
                // On to the next question, as the dashboard does.
                if self.selected.as_deref() == Some(id) {
                    let next = self.next_pending_after(id);
                    self.select(next.or_else(|| Some(id.to_owned())));
                }
            }
            Err(RespondError {
                winner: Some(winner),
                ..
            }) => {
                self.outcomes.insert(id.to_owned(), Outcome::Raced);
                let summary = self.settle(id, winner);
                self.notify(
                    false,
                    &format!("already answered by someone else: {summary}"),
                );
            }
            Err(RespondError {
                message,
                winner: None,
            }) => {
                self.notify(false, &format!("not sent: {message}"));
            }
        }
    }

    /// Mark `id` answered with `response`; its summary.
    fn settle(&mut self, id: &str, response: StoredResponse) -> String {
        let Some(view) = self.items.iter_mut().find(|v| v.request.id() == id) else {
            return "answered".to_owned();
        };
        let summary = describe::answer_summary(&view.request.request.kind, &response);
        if view.request.status == InteractionStatus::Pending {
            view.request.status = InteractionStatus::Answered;
        }
        view.response = Some(response);
        crate::term::one_line(&summary)
    }

    fn next_pending_after(&self, id: &str) -> Option<String> {
        let visible = self.visible();
        let at = visible.iter().position(|v| v.request.id() == id)?;
        visible
            .iter()
            .skip(at + 1)
            .chain(visible.iter().take(at))
            .find(|v| v.request.status == InteractionStatus::Pending)
            .map(|v| v.request.id().to_owned())
    }

    fn on_edited(&mut self, id: &str, result: Result<String, String>) {
        let text = match result {
            Ok(text) => text,
            Err(e) => {
                self.notify(false, &format!("editor: {e}"));
                return;
            }
        };
        let Some(original) =
            self.items
                .iter()
                .find(|v| v.request.id() == id)
                .and_then(|v| match &v.request.request.kind {
                    InteractionKind::ToolApproval { args_json, .. } => Some(args_json.clone()),
                    _ => None,
                })
        else {
            return;
        };
        let trimmed = text.trim();
        if let Err(e) = lev_protocol::json::check_strict_json(trimmed) {
            self.notify(
                false,
                &format!("the edited args are not JSON ({e}); press e to edit again"),
            );
            return;
        }
        if same_json(trimmed, &original) {
            self.drafts.entry(id.to_owned()).or_default().edited = None;
            self.notify(true, "args unchanged");
            self.mode = Mode::Inbox;
            return;
        }
        self.drafts.entry(id.to_owned()).or_default().edited = Some(trimmed.to_owned());
        self.mode = Mode::Review;
        self.scroll = 0;
    }

    fn notify(&mut self, ok: bool, text: &str) {
        self.notice = Some(Notice {
            ok,
            text: text.to_owned(),
        });
    }

    // ------------------------------------------------------------ keys

    /// Handle a key; what the IO edge must do, if anything.
    pub fn on_key(&mut self, key: KeyEvent) -> Option<Action> {
        if key.kind == KeyEventKind::Release {
            return None;
        }
        if key.modifiers.contains(KeyModifiers::CONTROL) && key.code == KeyCode::Char('c') {
            self.quit = true;
            return Some(Action::Quit);
        }
        match self.mode.clone() {
            Mode::Input { field, buffer } => self.key_input(key, field, buffer),
            Mode::Review => self.key_review(key),
            Mode::Grants => self.key_grants(key),
            Mode::ConfirmRevoke(id) => {
                self.mode = Mode::Grants;
                match key.code {
                    KeyCode::Char('y') => Some(Action::Revoke(id)),
                    _ => None,
                }
            }
            Mode::Help => {
                self.mode = Mode::Inbox;
                None
            }
            Mode::Inbox => self.key_inbox(key),
        }
    }

    fn key_inbox(&mut self, key: KeyEvent) -> Option<Action> {
        match key.code {
            KeyCode::Char('q') => {
                self.quit = true;
                return Some(Action::Quit);
            }
            KeyCode::Char('j') | KeyCode::Down => self.move_by(1),
            KeyCode::Char('k') | KeyCode::Up => self.move_by(-1),
            KeyCode::PageDown | KeyCode::Char(' ') => self.scroll = self.scroll.saturating_add(10),
            KeyCode::PageUp => self.scroll = self.scroll.saturating_sub(10),
            KeyCode::Char('?') => self.mode = Mode::Help,
            KeyCode::Esc => {
                self.notice = None;
            }
            KeyCode::Char('/') => {
                self.mode = Mode::Input {
                    field: Field::Filter,
                    buffer: self.filter.clone(),
                };
            }
            KeyCode::Char('g') => {
                self.mode = Mode::Grants;
                return Some(Action::LoadGrants);
            }
            _ if self.sending.is_some() => {}
            code => return self.key_answer(code),
        }
        None
    }

    /// A key that answers the selected pending question, by its kind.
    fn key_answer(&mut self, code: KeyCode) -> Option<Action> {
        let pending = self.current_pending().cloned();
        let kind = pending.as_ref().map(|v| &v.request.request.kind);
        let id = pending.as_ref().map(|v| v.request.id().to_owned());
        match code {
            KeyCode::Char('r') if matches!(kind, Some(InteractionKind::Form { .. })) => {
                if let Some(id) = id {
                    self.start_field(&id, 0);
                }
            }
            KeyCode::Char('r') => {
                if matches!(
                    kind,
                    Some(
                        InteractionKind::FreeText { .. }
                            | InteractionKind::InteractionPoints { .. }
                    )
                ) {
                    self.mode = Mode::Input {
                        field: Field::Reply,
                        buffer: String::new(),
                    };
                }
            }
            KeyCode::Char(c @ '1'..='9') => {
                let n = c as usize - '1' as usize;
                match (kind, id) {
                    (Some(InteractionKind::MultipleChoice { options, .. }), Some(id))
                        if n < options.len() =>
                    {
                        return self.send(id.clone(), InteractionResponse::choice(id, n));
                    }
                    (Some(InteractionKind::ToolApproval { options, .. }), Some(id))
                        if n < options.len() =>
                    {
                        let draft = self.drafts.entry(id).or_default();
                        draft.choice = if draft.choice == Some(n) {
                            None
                        } else {
                            Some(n)
                        };
                    }
                    _ => {}
                }
            }
            _ if is_tool(kind) => return self.key_tool(code, kind, id),
            _ => {}
        }
        None
    }

    /// A key of a tool approval's answer: its scope, approve, deny,
    /// feedback, injected context, an edit and its undo.
    fn key_tool(
        &mut self,
        code: KeyCode,
        kind: Option<&InteractionKind>,
        id: Option<String>,
    ) -> Option<Action> {
        match code {
            KeyCode::Char('s') => {
                if let Some(id) = id {
                    let draft = self.drafts.entry(id).or_default();
                    draft.scope = match draft.scope {
                        ApprovalScope::Once => ApprovalScope::Session,
                        ApprovalScope::Session => ApprovalScope::Always,
                        ApprovalScope::Always => ApprovalScope::Once,
                    };
                }
            }
            KeyCode::Char('a') => return id.and_then(|id| self.approve(id)),
            KeyCode::Char('d') => return id.and_then(|id| self.deny(id, "")),
            KeyCode::Char('f') => {
                self.mode = Mode::Input {
                    field: Field::Feedback,
                    buffer: String::new(),
                };
            }
            KeyCode::Char('i') => {
                let buffer = id.map(|id| self.draft(&id).injected).unwrap_or_default();
                self.mode = Mode::Input {
                    field: Field::Inject,
                    buffer,
                };
            }
            KeyCode::Char('e') => {
                if let (Some(id), Some(InteractionKind::ToolApproval { args_json, .. })) =
                    (id, kind)
                {
                    let text = self
                        .draft(&id)
                        .edited
                        .unwrap_or_else(|| describe::pretty_json(args_json));
                    return Some(Action::Edit { id, text });
                }
            }
            KeyCode::Char('u') => {
                if let Some(id) = id {
                    self.drafts.entry(id).or_default().edited = None;
                    self.notify(true, "edit discarded: the call runs as asked");
                }
            }
            _ => {}
        }
        None
    }

    fn key_input(&mut self, key: KeyEvent, field: Field, mut buffer: String) -> Option<Action> {
        match key.code {
            KeyCode::Esc => {
                self.mode = Mode::Inbox;
                return None;
            }
            // Alt+Enter (ESC CR) and Ctrl+J (a line feed in raw mode) break
            // the line of an answer; Enter sends it.
            KeyCode::Enter if key.modifiers.contains(KeyModifiers::ALT) && field.multi_line() => {
                buffer.push('\n');
            }
            KeyCode::Char('j')
                if key.modifiers.contains(KeyModifiers::CONTROL) && field.multi_line() =>
            {
                buffer.push('\n');
            }
            KeyCode::Enter => {
                self.mode = Mode::Inbox;
                return self.submit(field, buffer);
            }
            KeyCode::Backspace => {
                buffer.pop();
            }
            KeyCode::Char('u') if key.modifiers.contains(KeyModifiers::CONTROL) => buffer.clear(),
            KeyCode::Char('w') if key.modifiers.contains(KeyModifiers::CONTROL) => {
                let kept = buffer.trim_end().rfind(' ').map_or(0, |i| i + 1);
                buffer.truncate(kept);
            }
            KeyCode::Char(c) if !key.modifiers.contains(KeyModifiers::CONTROL) => buffer.push(c),
            KeyCode::Tab => buffer.push('\t'),
            _ => {}
        }
        if field == Field::Filter {
            // The filter applies as it is typed.
            self.filter = buffer.clone();
            self.ensure_selection_filtered();
        }
        self.mode = Mode::Input { field, buffer };
        None
    }

    fn ensure_selection_filtered(&mut self) {
        let visible: Vec<String> = self
            .visible()
            .iter()
            .map(|v| v.request.id().to_owned())
            .collect();
        let filter = Filter::parse(&self.filter);
        let selected_matches = self.current().is_some_and(|v| filter.matches(v));
        if !selected_matches {
            let first = visible
                .into_iter()
                .find(|id| Some(id.as_str()) != self.selected.as_deref());
            if first.is_some() {
                self.select(first);
            }
        }
    }

    fn submit(&mut self, field: Field, buffer: String) -> Option<Action> {
        let id = self.current_pending().map(|v| v.request.id().to_owned());
        match field {
            Field::Filter => {
                self.filter = buffer.trim().to_owned();
                None
            }
            Field::Reply => {
                let id = id?;
                if buffer.trim().is_empty() {
                    self.notify(false, "an empty reply is not sent");
                    return None;
                }
                self.send(id.clone(), InteractionResponse::text(id, buffer))
            }
            Field::Feedback => self.deny(id?, &buffer),
            Field::FormEntry(n) => self.submit_field(id?, n, &buffer),
            Field::Inject => {
                self.drafts.entry(id?).or_default().injected = buffer;
                None
            }
        }
    }

    /// The selected form, read.
    fn current_form(&self) -> Option<lev_protocol::form::Form> {
        match &self.current_pending()?.request.request.kind {
            InteractionKind::Form { schema, .. } => {
                lev_protocol::form::parse_schema(schema, &lev_protocol::Limits::default()).ok()
            }
            _ => None,
        }
    }

    /// Type the form's field `n`: the line starts from what was kept for
    /// it, else its default.
    fn start_field(&mut self, id: &str, n: usize) {
        let Some(form) = self.current_form() else {
            self.notify(false, "the form's schema does not read");
            return;
        };
        let Some(field) = form.fields.get(n) else {
            return;
        };
        let kept = self
            .drafts
            .get(id)
            .and_then(|d| d.form.get(&field.name))
            .or(field.default.as_ref());
        let buffer = match kept {
            Some(serde_json::Value::String(s)) => s.clone(),
            Some(other) => other.to_string(),
            None => String::new(),
        };
        self.mode = Mode::Input {
            field: Field::FormEntry(n),
            buffer,
        };
    }

    /// Keep field `n`'s typed value (an empty line leaves an optional field
    /// out), then type the next field, or send the form after the last.
    fn submit_field(&mut self, id: String, n: usize, buffer: &str) -> Option<Action> {
        let form = self.current_form()?;
        let field = form.fields.get(n)?;
        if buffer.is_empty() {
            if field.required {
                self.notify(false, &format!("{} is required", field.name));
                self.mode = Mode::Input {
                    field: Field::FormEntry(n),
                    buffer: String::new(),
                };
                return None;
            }
            self.notice = None;
            self.drafts
                .entry(id.clone())
                .or_default()
                .form
                .remove(&field.name);
        } else {
            let value = lev_protocol::form::value_from_text(field, buffer)
                .and_then(|v| lev_protocol::form::check_value(field, &v).map(|()| v));
            match value {
                Ok(value) => {
                    self.notice = None;
                    self.drafts
                        .entry(id.clone())
                        .or_default()
                        .form
                        .insert(field.name.clone(), value);
                }
                Err(why) => {
                    self.notify(false, &format!("{}: {why}", field.name));
                    self.mode = Mode::Input {
                        field: Field::FormEntry(n),
                        buffer: buffer.to_owned(),
                    };
                    return None;
                }
            }
        }
        if n + 1 < form.fields.len() {
            self.start_field(&id, n + 1);
            return None;
        }
        let fields = self
            .drafts
            .get(&id)
            .map(|d| d.form.clone())
            .unwrap_or_default();
        self.send(id.clone(), InteractionResponse::form(id, fields))
    }

    fn key_review(&mut self, key: KeyEvent) -> Option<Action> {
        let id = self.current_pending().map(|v| v.request.id().to_owned());
        match key.code {
            KeyCode::Char('a' | 'y') | KeyCode::Enter => {
                self.mode = Mode::Inbox;
                return id.and_then(|id| self.approve(id));
            }
            KeyCode::Char('s') => {
                self.mode = Mode::Inbox;
                let r = self.key_inbox(key);
                self.mode = Mode::Review;
                return r;
            }
            KeyCode::Char('e') => {
                self.mode = Mode::Inbox;
                return self.key_inbox(key);
            }
            KeyCode::Char('u' | 'n') => {
                self.mode = Mode::Inbox;
                if let Some(id) = id {
                    self.drafts.entry(id).or_default().edited = None;
                }
                self.notify(true, "edit discarded: the call runs as asked");
            }
            KeyCode::Esc => self.mode = Mode::Inbox,
            KeyCode::PageDown | KeyCode::Char(' ') => self.scroll = self.scroll.saturating_add(10),
            KeyCode::PageUp => self.scroll = self.scroll.saturating_sub(10),
            KeyCode::Char('q') => {
                self.quit = true;
                return Some(Action::Quit);
            }
            _ => {}
        }
        None
    }

    fn key_grants(&mut self, key: KeyEvent) -> Option<Action> {
        let n = self.grants.as_ref().map_or(0, Vec::len);
        match key.code {
            KeyCode::Esc | KeyCode::Char('g') => self.mode = Mode::Inbox,
            KeyCode::Char('q') => {
                self.quit = true;
                return Some(Action::Quit);
            }
            KeyCode::Char('j') | KeyCode::Down => {
                self.grant_selected = (self.grant_selected + 1).min(n.saturating_sub(1));
            }
            KeyCode::Char('k') | KeyCode::Up => {
                self.grant_selected = self.grant_selected.saturating_sub(1)
            }
            KeyCode::Char('r') => return Some(Action::LoadGrants),
            KeyCode::Char('x' | 'd') | KeyCode::Delete => {
                if let Some(g) = self
                    .grants
                    .as_ref()
                    .and_then(|g| g.get(self.grant_selected))
                {
                    self.mode = Mode::ConfirmRevoke(g.id.clone());
                }
            }
            _ => {}
        }
        None
    }

    fn move_by(&mut self, by: isize) {
        let visible: Vec<String> = self
            .visible()
            .iter()
            .map(|v| v.request.id().to_owned())
            .collect();
        if visible.is_empty() {
            return;
        }
        let at = self
            .selected
            .as_deref()
            .and_then(|s| visible.iter().position(|v| v == s));
        let next = match at {
            None => 0,
            Some(i) => i.saturating_add_signed(by).min(visible.len() - 1),
        };
        self.select(visible.get(next).cloned());
    }

    fn approve(&mut self, id: String) -> Option<Action> {
        let draft = self.draft(&id);
        let mut response = InteractionResponse::approval(id.clone(), true, draft.scope);
        response.choice_index = draft.choice;
        response.modified_args_json = draft.edited;
        if !draft.injected.trim().is_empty() {
            response.injected_context = Some(draft.injected);
        }
        self.send(id, response)
    }

    fn deny(&mut self, id: String, feedback: &str) -> Option<Action> {
        let draft = self.draft(&id);
        let mut response = InteractionResponse::deny_with_feedback(id.clone(), feedback);
        response.choice_index = draft.choice;
        self.send(id, response)
    }

    fn send(&mut self, id: String, response: InteractionResponse) -> Option<Action> {
        self.sending = Some(id.clone());
        self.notice = None;
        Some(Action::Respond {
            id,
            response: Box::new(response),
        })
    }
}

fn is_tool(kind: Option<&InteractionKind>) -> bool {
    matches!(kind, Some(InteractionKind::ToolApproval { .. }))
}

/// Whether `a` sorts before `b` (newest first).
fn newer(a: &InteractionView, b: &InteractionView) -> bool {
    (a.request.created_at, a.request.id()) > (b.request.created_at, b.request.id())
}

/// Whether two JSON texts hold the same value (formatting aside).
fn same_json(a: &str, b: &str) -> bool {
    describe::compact_json(a) == describe::compact_json(b)
}

/// The inbox filter: `session:S` and `kind:K` (substrings), other words
/// matched against the title, the question, the tool and its args.
#[derive(Debug, Default)]
struct Filter {
    session: Vec<String>,
    kind: Vec<String>,
    words: Vec<String>,
}

impl Filter {
    fn parse(text: &str) -> Self {
        let mut filter = Self::default();
        for word in text.split_whitespace() {
            let word = word.to_lowercase();
            if let Some(s) = word.strip_prefix("session:") {
                filter.session.push(s.to_owned());
            } else if let Some(k) = word.strip_prefix("kind:") {
                filter.kind.push(k.to_owned());
            } else {
                filter.words.push(word);
            }
        }
        filter
    }

    fn matches(&self, view: &InteractionView) -> bool {
        let r = &view.request.request;
        let session = r.session_id.to_lowercase();
        let kind = format!("{} {}", describe::kind_label(&r.kind), r.kind.type_name());
        let text = format!(
            "{} {} {}",
            view.request.id(),
            session,
            describe::summary(&view.request)
        )
        .to_lowercase();
        self.session.iter().all(|s| session.contains(s))
            && self.kind.iter().all(|k| kind.contains(k))
            && self.words.iter().all(|w| text.contains(w))
    }
}
