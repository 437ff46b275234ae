//! `lev watch` without a terminal: keys in, actions out, and every screen
//! rendered on ratatui's `TestBackend` and compared with its snapshot
//! (`src/watch/snapshots/`). Each screen is also written as text under
//! `target/watch-screens/` for review.

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use lev_protocol::api::InteractionView;
use lev_protocol::{ApprovalScope, InteractionResponse, StoredResponse};
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::style::Color;
use serde_json::json;
use time::OffsetDateTime;

use super::model::{Action, App, Conn, Msg, RespondError};
use super::view::{self, Theme};

const NOW: &str = "2026-03-01T12:10:00Z";

fn now() -> OffsetDateTime {
    OffsetDateTime::parse(NOW, &time::format_description::well_known::Rfc3339).unwrap()
}

fn view(id: &str, session: &str, minute: u32, kind: serde_json::Value) -> InteractionView {
    serde_json::from_value(json!({
        "request": {
            "id": id,
            "session_id": session,
            "caller": "alice",
            "kind": kind,
            "status": "pending",
            "created_at": format!("2026-03-01T12:{minute:02}:00Z"),
            "expires_at": "2026-03-01T12:20:00Z",
        },
        "response": null,
        "approval": null,
    }))
    .unwrap()
}

fn shell() -> InteractionView {
    view(
        "ir_shell",
        "build-7",
        9,
        json!({"type": "tool_approval", "tool_name": "shell",
               "args_json": r#"{"argv":["rm","-rf","build dir"],"cwd":"/home/alice/src"}"#,
               "missing_capabilities": ["proc-exec"], "sandbox_mode": "workspace-write"}),
    )
}

fn text() -> InteractionView {
    view(
        "ir_text",
        "docs",
        8,
        json!({"type": "free_text", "prompt": "Which branch should I release from?\nmain or release/2.x"}),
    )
}

fn choice() -> InteractionView {
    view(
        "ir_choice",
        "db",
        7,
        json!({"type": "multiple_choice", "prompt": "Which database?", "options": ["PostgreSQL", "SQLite", "both"]}),
    )
}

fn write() -> InteractionView {
    view(
        "ir_write",
        "build-7",
        6,
        json!({"type": "tool_approval", "tool_name": "Write",
               "args_json": r#"{"file_path":"/etc/hosts","content":"127.0.0.1 localhost\n10.0.0.5 db\n"}"#}),
    )
}

fn http() -> InteractionView {
    view(
        "ir_http",
        "deploy",
        5,
        json!({"type": "tool_approval", "tool_name": "http",
               "args_json": r#"{"method":"POST","url":"https://api.example.com/v1/deploys","body":{"env":"prod","ref":"v2.3.1"}}"#,
               "options": ["deploy now", "deploy after 18:00"]}),
    )
}

fn points() -> InteractionView {
    view(
        "ir_points",
        "review",
        4,
        json!({"type": "interaction_points", "prompt": "Review these before I merge:",
               "points": [{"id": "p1", "text": "the migration drops a column"}, {"id": "p2", "text": "the API adds a field"}]}),
    )
}

fn hidden() -> InteractionView {
    // "IGNORE" in tag characters, a right-to-left override, an escape.
    let tags: String = "IGNORE"
        .chars()
        .map(|c| char::from_u32(0xE0000 + u32::from(c)).unwrap())
        .collect();
    view(
        "ir_hidden",
        "evil",
        3,
        json!({"type": "tool_approval", "tool_name": "shell",
               "args_json": format!(r#"{{"argv":["cat","notes{tags}.txt","\u202egpj.exe","\u001b[2J"]}}"#)}),
    )
}

fn app(views: Vec<InteractionView>) -> App {
    let mut app = App::new("http://127.0.0.1:7420", now());
    app.on_msg(Msg::Connected);
    app.on_msg(Msg::Listed(views));
    app
}

fn all() -> App {
    app(vec![shell(), text(), choice(), write(), http(), points()])
}

fn key(c: char) -> KeyEvent {
    KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE)
}

fn code(code: KeyCode) -> KeyEvent {
    KeyEvent::new(code, KeyModifiers::NONE)
}

fn press(app: &mut App, keys: &str) -> Vec<Action> {
    keys.chars().filter_map(|c| app.on_key(key(c))).collect()
}

fn select(app: &mut App, id: &str) {
    for _ in 0..20 {
        app.on_key(key('k'));
    }
    for _ in 0..20 {
        if app.selected.as_deref() == Some(id) {
            return;
        }
        app.on_key(key('j'));
    }
    panic!("{id} not reachable in {:?}", app.visible().len());
}

/// The screen as text, one line per row, trailing blanks cut.
fn render(app: &App, width: u16, height: u16, theme: Theme) -> (String, Terminal<TestBackend>) {
    let mut terminal = Terminal::new(TestBackend::new(width, height)).unwrap();
    terminal.draw(|f| view::draw(f, app, theme)).unwrap();
    let buffer = terminal.backend().buffer().clone();
    let mut out = String::new();
    for y in 0..height {
        let mut line = String::new();
        for x in 0..width {
            line.push_str(buffer[(x, y)].symbol());
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    (out, terminal)
}

/// Compare with the snapshot and keep a copy under target/ for review.
fn check(name: &str, app: &App, width: u16, height: u16) {
    let (text, _) = render(app, width, height, Theme { color: true });
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/watch-screens");
    let _ = std::fs::create_dir_all(&dir);
    let _ = std::fs::write(dir.join(format!("{name}.txt")), &text);
    insta::assert_snapshot!(name, text);
}

#[test]
fn watch_screens_of_each_kind() {
    let mut app = all();
    check("inbox_shell_80x24", &app, 80, 24);
    select(&mut app, "ir_text");
    check("text_80x24", &app, 80, 24);
    select(&mut app, "ir_choice");
    check("choice_80x24", &app, 80, 24);
    select(&mut app, "ir_write");
    check("write_80x24", &app, 80, 24);
    select(&mut app, "ir_http");
    press(&mut app, "2s");
    check("http_option_session_80x24", &app, 80, 24);
    select(&mut app, "ir_points");
    check("points_80x24", &app, 80, 24);
    let mut wide = all();
    check("inbox_wide_140x30", &wide, 140, 30);
    wide.on_key(key('?'));
    check("help_80x24", &wide, 80, 24);
}

#[test]
fn watch_hidden_characters_are_spelled_out_and_flagged() {
    let app = app(vec![hidden()]);
    check("hidden_80x24", &app, 80, 24);
    let (text, _) = render(&app, 80, 24, Theme { color: true });
    assert!(text.contains("hidden tag text: “IGNORE”"), "{text}");
    assert!(text.contains("\\u{202e}gpj.exe"), "{text}");
    assert!(!text.contains('\u{202e}') && !text.contains('\u{1b}'));
}

#[test]
fn watch_states_input_review_race_reconnect_grants() {
    // Typing a reply.
    let mut a = all();
    select(&mut a, "ir_text");
    press(&mut a, "rmain, after the tests");
    check("reply_typing_80x24", &a, 80, 24);

    // Deny feedback being typed.
    let mut a = all();
    press(&mut a, "fuse git clean");
    check("feedback_typing_80x24", &a, 80, 24);

    // The edit's diff, before sending.
    let mut a = all();
    let actions = press(&mut a, "e");
    assert!(matches!(&actions[..], [Action::Edit { id, .. }] if id == "ir_shell"));
    a.on_msg(Msg::Edited {
        id: "ir_shell".into(),
        result: Ok(
            "{\"argv\": [\"rm\", \"-rf\", \"build\"], \"cwd\": \"/home/alice/src\"}\n".into(),
        ),
    });
    check("review_edit_80x24", &a, 80, 24);

    // Lost the race: the winning answer shown.
    let mut a = all();
    let actions = press(&mut a, "a");
    assert_eq!(actions.len(), 1);
    let mut winner = StoredResponse::approval("ir_shell", false, ApprovalScope::Once);
    winner.feedback = Some("not on a Friday".into());
    a.on_msg(Msg::Responded {
        id: "ir_shell".into(),
        result: Err(RespondError {
            message: "already answered".into(),
            winner: Some(winner),
        }),
    });
    check("raced_80x24", &a, 80, 24);

    // Reconnecting.
    let mut a = all();
    a.on_msg(Msg::Disconnected {
        error: "could not connect to the lev server at http://127.0.0.1:7420".into(),
        attempt: 3,
    });
    assert!(matches!(a.conn, Conn::Reconnecting { attempt: 3, .. }));
    check("reconnecting_80x24", &a, 80, 24);

    // Grants, and the revoke question.
    let mut a = all();
    assert_eq!(press(&mut a, "g"), vec![Action::LoadGrants]);
    let grants: Vec<lev_protocol::api::Grant> = serde_json::from_value(json!([
        {"id": "gr_1", "scope": "session", "caller": "alice", "conversation_id": "c-9",
         "sandbox_mode": "workspace-write", "tool_name": "shell", "covered_capabilities": ["proc-exec"],
         "grant_args": {"/argv/0": "^ls$"}, "approver": "bob", "interaction_id": "ir_0",
         "created_at": "2026-03-01T11:00:00Z"},
        {"id": "gr_2", "scope": "always", "caller": "alice",
         "sandbox_mode": "workspace-write", "tool_name": "Write", "covered_capabilities": [],
         "approver": "bob", "created_at": "2026-03-01T11:30:00Z"}
    ]))
    .unwrap();
    a.on_msg(Msg::Grants(Ok(grants)));
    check("grants_80x24", &a, 80, 24);
    press(&mut a, "jx");
    check("grants_revoke_80x24", &a, 80, 24);
    assert_eq!(press(&mut a, "y"), vec![Action::Revoke("gr_2".into())]);

    // Empty and filtered inboxes.
    check("empty_80x24", &app(vec![]), 80, 24);
    let mut a = all();
    press(&mut a, "/kind:choice");
    a.on_key(code(KeyCode::Enter));
    check("filtered_80x24", &a, 80, 24);
    assert_eq!(a.visible().len(), 1);
}

#[test]
fn watch_keys_answer_every_kind_as_the_dashboard_does() {
    let respond = |actions: Vec<Action>| match actions.as_slice() {
        [Action::Respond { id, response }] => (id.clone(), (**response).clone()),
        other => panic!("expected one answer, found {other:?}"),
    };
    // Text: r, type, Enter.
    let mut a = all();
    select(&mut a, "ir_text");
    let mut actions = press(&mut a, "rmain");
    actions.extend(a.on_key(code(KeyCode::Enter)));
    assert_eq!(
        respond(actions),
        (
            "ir_text".into(),
            InteractionResponse::text("ir_text", "main")
        )
    );

    // Choice: numbered from 1 on screen, sent 0-based.
    let mut a = all();
    select(&mut a, "ir_choice");
    assert_eq!(
        respond(press(&mut a, "2")).1,
        InteractionResponse::choice("ir_choice", 1)
    );
    let mut a = all();
    select(&mut a, "ir_choice");
    assert!(press(&mut a, "4").is_empty(), "no fourth option");

    // Approve once, session, always.
    for (keys, scope) in [
        ("a", ApprovalScope::Once),
        ("sa", ApprovalScope::Session),
        ("ssa", ApprovalScope::Always),
    ] {
        let mut a = all();
        let (_, r) = respond(press(&mut a, keys));
        assert_eq!(r.approved, Some(true));
        assert_eq!(r.scope, Some(scope), "{keys}");
    }

    // Deny, and deny with feedback.
    let mut a = all();
    let (_, r) = respond(press(&mut a, "d"));
    assert_eq!(
        r,
        InteractionResponse::approval("ir_shell", false, ApprovalScope::Once)
    );
    let mut a = all();
    let mut actions = press(&mut a, "fuse git clean");
    actions.extend(a.on_key(code(KeyCode::Enter)));
    assert_eq!(
        respond(actions).1,
        InteractionResponse::deny_with_feedback("ir_shell", "use git clean")
    );

    // Inject context, choose an option, edit args: all in the approval.
    let mut a = all();
    select(&mut a, "ir_http");
    press(&mut a, "ikeep the logs");
    a.on_key(code(KeyCode::Enter));
    press(&mut a, "1e");
    a.on_msg(Msg::Edited {
        id: "ir_http".into(),
        result: Ok(r#"{"method":"POST","url":"https://api.example.com/v1/deploys","body":{"env":"staging"}}"#.into()),
    });
    let (_, r) = respond(press(&mut a, "a"));
    assert_eq!(r.injected_context.as_deref(), Some("keep the logs"));
    assert_eq!(r.choice_index, Some(0));
    assert_eq!(
        r.modified_args_json.as_deref(),
        Some(
            r#"{"method":"POST","url":"https://api.example.com/v1/deploys","body":{"env":"staging"}}"#
        )
    );

    // An edit that is not JSON is refused; an unchanged one is no edit.
    let mut a = all();
    a.on_msg(Msg::Edited {
        id: "ir_shell".into(),
        result: Ok("{not json".into()),
    });
    assert!(a.draft("ir_shell").edited.is_none());
    a.on_msg(Msg::Edited {
        id: "ir_shell".into(),
        result: Ok(
            "{\n \"argv\": [\"rm\",\"-rf\",\"build dir\"], \"cwd\":\"/home/alice/src\"}".into(),
        ),
    });
    assert!(a.draft("ir_shell").edited.is_none());

    // Ctrl-C and q quit.
    let mut a = all();
    assert_eq!(
        a.on_key(KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL)),
        Some(Action::Quit)
    );
    assert!(a.quit);
}

#[test]
fn watch_events_keep_the_inbox_live() {
    let mut a = app(vec![text()]);
    // A new question arrives; an answered one elsewhere leaves the inbox.
    a.on_msg(Msg::Event {
        id: Some("5".into()),
        view: Box::new(shell()),
    });
    assert_eq!(a.visible().len(), 2);
    assert_eq!(
        a.selected.as_deref(),
        Some("ir_text"),
        "the selection stays"
    );
    let mut done = shell();
    done.request.status = lev_protocol::InteractionStatus::Answered;
    a.on_msg(Msg::Event {
        id: Some("6".into()),
        view: Box::new(done),
    });
    assert_eq!(a.visible().len(), 1);
    assert_eq!(a.last_event_id.as_deref(), Some("6"));
    // A late list read never brings an answered question back to pending.
    a.on_msg(Msg::Listed(vec![shell()]));
    // (It is gone from the inbox, so the list adds it as new: pending as read.)
    // The selected one answered elsewhere stays, marked as a lost race.
    let mut answered = text();
    answered.request.status = lev_protocol::InteractionStatus::Answered;
    answered.response = Some(StoredResponse::text("ir_text", "release/2.x"));
    a.on_msg(Msg::Event {
        id: Some("7".into()),
        view: Box::new(answered),
    });
    assert_eq!(a.selected.as_deref(), Some("ir_text"));
    let (screen, _) = render(&a, 80, 24, Theme { color: true });
    assert!(screen.contains("Answered elsewhere first"), "{screen}");
    // A new question while the one shown is settled is shown.
    a.on_msg(Msg::Event {
        id: Some("8".into()),
        view: Box::new(choice()),
    });
    assert_eq!(a.selected.as_deref(), Some("ir_choice"));
}

#[test]
fn watch_no_color_means_no_colour_and_every_size_draws() {
    let mut a = all();
    a.on_msg(Msg::Disconnected {
        error: "x".into(),
        attempt: 1,
    });
    let (_, terminal) = render(&a, 80, 24, Theme { color: false });
    for cell in terminal.backend().buffer().content() {
        assert!(
            matches!(cell.fg, Color::Reset) && matches!(cell.bg, Color::Reset),
            "a colour under NO_COLOR: {cell:?}"
        );
    }
    let (_, terminal) = render(&a, 80, 24, Theme { color: true });
    assert!(
        terminal
            .backend()
            .buffer()
            .content()
            .iter()
            .any(|c| c.fg != Color::Reset)
    );
    // Tiny to large: nothing panics.
    for (w, h) in [(20, 5), (40, 10), (80, 24), (100, 40), (200, 60)] {
        for id in ["ir_shell", "ir_http", "ir_write"] {
            select(&mut a, id);
            let _ = render(&a, w, h, Theme { color: true });
        }
    }
}

#[test]
fn watch_replies_take_several_lines() {
    let mut a = all();
    select(&mut a, "ir_text");
    let mut actions = press(&mut a, "rfirst");
    // Alt+Enter (ESC CR) and Ctrl+J (a line feed in raw mode) break the line.
    actions.extend(a.on_key(KeyEvent::new(KeyCode::Enter, KeyModifiers::ALT)));
    actions.extend(press(&mut a, "second"));
    actions.extend(a.on_key(KeyEvent::new(KeyCode::Char('j'), KeyModifiers::CONTROL)));
    actions.extend(press(&mut a, "third"));
    assert!(actions.is_empty(), "nothing sent before Enter: {actions:?}");
    check("input_multi_line", &a, 80, 24);
    let (screen, _) = render(&a, 80, 24, Theme { color: false });
    for line in ["reply: first", "  second", "  third█"] {
        assert!(screen.contains(line), "{line:?} in\n{screen}");
    }
    a.on_key(code(KeyCode::Backspace));
    let sent = a.on_key(code(KeyCode::Enter));
    match sent {
        Some(Action::Respond { response, .. }) => {
            assert_eq!(response.value.as_deref(), Some("first\nsecond\nthir"));
        }
        other => panic!("expected the answer, found {other:?}"),
    }
    // The filter stays one line: Ctrl+J does nothing there.
    let mut a = all();
    press(&mut a, "/x");
    a.on_key(KeyEvent::new(KeyCode::Char('j'), KeyModifiers::CONTROL));
    assert_eq!(a.filter, "x");
    // A long answer shows its last lines and how many are above.
    let mut a = all();
    select(&mut a, "ir_text");
    press(&mut a, "r");
    for i in 0..9 {
        press(&mut a, &format!("line{i}"));
        a.on_key(KeyEvent::new(KeyCode::Enter, KeyModifiers::ALT));
    }
    let (screen, _) = render(&a, 80, 24, Theme { color: false });
    assert!(screen.contains("(+4 lines above)"), "{screen}");
    assert!(!screen.contains("line3"), "{screen}");
}

#[test]
fn watch_shows_votes_who_may_still_vote_and_the_escalation() {
    let mut deploy = view(
        "ir_deploy",
        "release",
        9,
        json!({"type": "tool_approval", "tool_name": "deploy",
               "args_json": r#"{"env":"prod"}"#, "sandbox_mode": "ci"}),
    );
    let extra: lev_protocol::Interaction = serde_json::from_value(json!({
        "id": "ir_deploy",
        "session_id": "release",
        "caller": "alice",
        "kind": {"type": "tool_approval", "tool_name": "deploy",
                 "args_json": r#"{"env":"prod"}"#, "sandbox_mode": "ci"},
        "approvals_needed": 2,
        "quorum": {"approvers": ["ann", "bob", "carol"], "escalate_after_s": 600,
                   "escalate_to": ["dana"], "require_signed_votes": true},
        "status": "pending",
        "created_at": "2026-03-01T12:09:00Z",
        "votes": [{"voter": "ann", "approved": true, "at": "2026-03-01T12:09:30Z",
                   "signed": true,
                   "response": {"request_id": "ir_deploy", "approved": true, "scope": "once"}}],
    }))
    .unwrap();
    deploy.request = extra;
    let app = app(vec![deploy]);
    let (text, _) = render(&app, 100, 30, Theme { color: false });
    for words in [
        "1 of 2 approvals, signed",
        "ann approve (once)  signed",
        "bob, carol",
        "dana may vote in 9m",
    ] {
        assert!(text.contains(words), "{words:?} in\n{text}");
    }
    check("votes_100x30", &app, 100, 30);
}

#[test]
fn watch_a_vote_that_does_not_decide_keeps_the_question_open() {
    let mut app = app(vec![shell()]);
    app.on_msg(Msg::Voted {
        id: "ir_shell".into(),
        votes: vec![
            serde_json::from_value(json!({
            "voter": "alice", "approved": true, "at": NOW, "signed": false,
            "response": {"request_id": "ir_shell", "approved": true, "scope": "once"}}))
            .unwrap(),
        ],
        needed: 2,
    });
    let v = app
        .items
        .iter()
        .find(|v| v.request.id() == "ir_shell")
        .unwrap();
    assert_eq!(v.request.status, lev_protocol::InteractionStatus::Pending);
    assert_eq!(v.request.votes.len(), 1);
    let (text, _) = render(&app, 80, 24, Theme { color: false });
    assert!(text.contains("vote recorded: 1 of 2 approvals"), "{text}");
}
