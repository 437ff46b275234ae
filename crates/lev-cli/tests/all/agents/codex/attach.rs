//! `lev codex attach` to the real Codex terminal UI, run in a pseudo-terminal
//! (tmux): lev answers one approval, the person answers the next in the UI
//! first, and lev records what the UI decided (an approval, a refusal); an
//! approval already waiting when lev attaches is answered from lev. The UI starts a shared
//! app-server daemon (and an updater) that outlive it: both are stopped
//! when the test ends.

use std::path::PathBuf;
use std::process::Command;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use lev_protocol::{ApprovalScope, InteractionKind, InteractionResponse, InteractionStatus};
use serde_json::Value;

use super::fake_model::{escalated, say};
use super::harness::{CodexEnv, Running, codex_bin};
use super::offline::NO_PROXY;
use crate::agents::served::block_on;

/// What every start of the terminal UI asks of the network (its tooltip's
/// `https://raw.githubusercontent.com/openai/codex/main/announcement_tip.toml`),
/// through the proxy variables: stopped by the tripwire.
const ANNOUNCEMENT: &str = "CONNECT raw.githubusercontent.com:443 HTTP/1.1";

/// One terminal UI at a time: each starts a daemon that first copies Codex.
static ONE_UI: Mutex<()> = Mutex::new(());

/// Codex's terminal UI in a tmux server of its own.
struct Tui {
    socket: String,
    home: PathBuf,
    codex_home: PathBuf,
    _one: MutexGuard<'static, ()>,
}

impl Tui {
    /// The UI in tmux server `name` of this test process.
    fn start(env: &CodexEnv, name: &str) -> Self {
        let one = ONE_UI.lock().unwrap_or_else(PoisonError::into_inner);
        let socket = format!("lev-codex-{}-{name}", std::process::id());
        let quote =
            |p: &std::path::Path| format!("'{}'", p.display().to_string().replace('\'', r"'\''"));
        let (home, codex_home) = (env.scratch.path("home"), env.codex_home());
        // The proxy variables on the tripwire, as for every Codex test.
        let proxies: String = env
            .tripwire
            .vars(NO_PROXY)
            .iter()
            .map(|(name, value)| format!("{name}={} ", quote(std::path::Path::new(value))))
            .collect();
        let line = format!(
            "cd {} && exec env -u OPENAI_API_KEY -u LEV_URL -u LEV_TOKEN HOME={} CODEX_HOME={} FAKE_API_KEY=dummy {proxies}{}",
            quote(&env.ws()),
            quote(&home),
            quote(&codex_home),
            quote(&codex_bin())
        );
        let status = Command::new("tmux")
            .args([
                "-L",
                &socket,
                "new-session",
                "-d",
                "-x",
                "160",
                "-y",
                "45",
                &line,
            ])
            .status()
            .expect("tmux (apt-get install tmux) runs");
        assert!(status.success(), "tmux new-session failed");
        Self {
            socket,
            home,
            codex_home,
            _one: one,
        }
    }

    fn screen(&self) -> String {
        let out = Command::new("tmux")
            .args(["-L", &self.socket, "capture-pane", "-p"])
            .output()
            .expect("tmux capture-pane");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Wait (up to 60 s) for any of `texts` on the screen.
    fn wait_for(&self, texts: &[&str]) {
        if self.within(texts, Duration::from_secs(60)).is_none() {
            panic!("none of {texts:?} on the screen:\n{}", self.screen());
        }
    }

    /// The first of `texts` on the screen within `time`.
    fn within(&self, texts: &[&str], time: Duration) -> Option<String> {
        let deadline = Instant::now() + time;
        loop {
            let screen = self.screen();
            if let Some(found) = texts.iter().find(|t| screen.contains(*t)) {
                return Some((*found).to_owned());
            }
            if Instant::now() > deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn keys(&self, keys: &[&str]) {
        let mut args = vec!["-L", &self.socket, "send-keys"];
        args.extend_from_slice(keys);
        assert!(Command::new("tmux").args(&args).status().unwrap().success());
    }

    /// Type `text` and submit it, until any of `then` is on the screen. The
    /// UI takes an Enter that comes right after typed text as a pasted
    /// newline: Enter is pressed only once the text shows, and again while
    /// nothing of `then` shows (an extra newline in the prompt is harmless).
    fn submit(&self, text: &str, then: &[&str]) {
        self.keys(&["-l", text]);
        self.wait_for(&[&format!("› {text}")]);
        std::thread::sleep(Duration::from_millis(500));
        for _ in 0..3 {
            self.keys(&["Enter"]);
            if self.within(then, Duration::from_secs(20)).is_some() {
                return;
            }
        }
        panic!(
            "submitted {text:?}; none of {then:?} on the screen:\n{}",
            self.screen()
        );
    }
}

impl Drop for Tui {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .args(["-L", &self.socket, "kill-server"])
            .status();
        // The daemon and its updater outlive the UI.
        let _ = Command::new(codex_bin())
            .args(["app-server", "daemon", "stop"])
            .env("HOME", &self.home)
            .env("CODEX_HOME", &self.codex_home)
            .output();
        let updater = self.codex_home.join("app-server-daemon/daemon-updater.pid");
        if let Some(pid) = std::fs::read_to_string(updater)
            .ok()
            .and_then(|t| serde_json::from_str::<Value>(&t).ok())
            .and_then(|v| v["pid"].as_u64())
        {
            let _ = Command::new("kill").arg(pid.to_string()).status();
        }
    }
}

fn wait_until(what: &str, done: impl Fn() -> bool, context: impl Fn() -> String) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !done() {
        assert!(
            Instant::now() < deadline,
            "{what} did not happen within 30 s:\n{}",
            context()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A world whose UI asks about commands run outside the sandbox (its own
/// policy), the model playing `script`.
fn ui_world(name: &str, script: Vec<super::fake_model::Turn>) -> CodexEnv {
    let env = CodexEnv::start(name, None, script);
    let config = env.codex_home().join("config.toml");
    let text = std::fs::read_to_string(&config).unwrap();
    // Codex 0.171 offers gpt-5.5's users another model in a notice over the
    // prompt, some seconds after it starts (it would take the keys typed
    // then); this is what it writes once the notice is answered.
    std::fs::write(
        &config,
        format!(
            "approval_policy = \"on-request\"\nsandbox_mode = \"workspace-write\"\n{text}\n[notice.model_migrations]\n\"gpt-5.5\" = \"gpt-6-sol\"\n"
        ),
    )
    .unwrap();
    env
}

/// Start the terminal UI, once its app-server listens.
fn open(env: &CodexEnv, name: &str) -> Tui {
    let tui = Tui::start(env, name);
    // Each start of Codex 0.171's terminal UI fetches an announcement from
    // GitHub, and no setting turns that off: the tripwire stops it.
    env.allow_at_tripwire(ANNOUNCEMENT);
    let socket = env
        .codex_home()
        .join("app-server-control/app-server-control.sock");
    // The UI's daemon first installs its own copy of Codex (about 400 MB)
    // under CODEX_HOME/packages.
    let deadline = Instant::now() + Duration::from_secs(120);
    while !socket.exists() {
        assert!(
            Instant::now() < deadline,
            "the UI's app-server socket did not appear within 120 s:\n{}",
            tui.screen()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    tui
}

/// `lev codex attach` to the UI's app-server, once it says it attached.
fn attach(env: &CodexEnv) -> Running {
    let home = env.codex_home();
    let mut command = env.lev(&["codex", "attach", "--codex-home", home.to_str().unwrap()]);
    // An admin token may answer lev's question with the UI's decision.
    command.env("LEV_TOKEN", &env.served.admin);
    let attach = Running::spawn(command);
    wait_until(
        "lev attached",
        || {
            attach
                .stderr_now()
                .contains("its approvals are decided in lev")
        },
        || attach.stderr_now(),
    );
    attach
}

/// Wait for the UI's prompt.
fn prompt_ready(tui: &Tui) {
    tui.wait_for(&["Ask Codex to do anything"]);
}

#[test]
fn codex_attach_answers_the_terminal_uis_approvals_and_records_the_uis_own() {
    let env = ui_world(
        "attach",
        vec![
            escalated("call_ta", "touch ../a.txt", "needs a.txt"),
            say("first done"),
            escalated("call_tb", "touch ../b.txt", "needs b.txt"),
            say("second done"),
        ],
    );
    let tui = open(&env, "both");
    let attach = attach(&env);
    let said = || attach.stderr_now();
    prompt_ready(&tui);
    let outside = env.ws().parent().unwrap().to_path_buf();

    // 1. lev answers: the UI's prompt goes away and the command runs.
    tui.submit("first", &["Yes, proceed"]);
    wait_until("lev asked", || said().contains("waits for a person"), said);
    let first = env.pending();
    assert_eq!(first.request.reason.as_deref(), Some("needs a.txt"));
    match &first.request.kind {
        InteractionKind::ToolApproval {
            tool_name,
            args_json,
            sandbox_mode,
            ..
        } => {
            assert_eq!(tool_name, "codex.exec");
            assert!(
                args_json.contains(r#""argv":["touch","../a.txt"]"#),
                "{args_json}"
            );
            // Under on-request what Codex asks about is what the model
            // asked to run outside the sandbox (here: writing beside the
            // workspace), so lev's policy judges it with full access.
            assert_eq!(sandbox_mode, "danger-full-access");
        }
        other => panic!("{other:?}"),
    }
    env.respond(
        &first,
        &InteractionResponse::approval(first.id(), true, ApprovalScope::Once),
    );
    wait_until("a.txt written", || outside.join("a.txt").exists(), said);
    tui.wait_for(&["first done"]);

    // 2. The person answers in the UI first: lev stops waiting and records it.
    tui.submit("second", &["Yes, proceed"]);
    wait_until(
        "lev asked again",
        || said().matches("waits for a person").count() == 2,
        said,
    );
    let second = env.pending();
    tui.keys(&["y"]);
    wait_until("b.txt written", || outside.join("b.txt").exists(), said);
    env.served.wait_status(
        &second.request.session_id,
        second.id(),
        InteractionStatus::Answered,
    );
    let view = block_on(env.served.approver.get_interaction(second.id())).unwrap();
    let response = view.response.expect("recorded");
    assert_eq!(response.approved, Some(true));
    assert_eq!(
        response.reason.as_deref(),
        Some("decided in Codex: accepted, the call ran")
    );
    tui.wait_for(&["second done"]);

    attach.interrupt();
    let run = attach.wait();
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stderr
            .contains("`touch ../a.txt`: approved by pat -> accept"),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr
            .contains("`touch ../b.txt`: answered in Codex first"),
        "{}",
        run.stderr
    );
    assert!(run.stderr.contains("records it"), "{}", run.stderr);
    drop(tui);
}

#[test]
fn codex_attach_answers_an_approval_pending_before_it_attached() {
    let env = ui_world(
        "attach-pending",
        vec![
            escalated("call_tp", "touch ../p.txt", "needs p.txt"),
            say("done after all"),
        ],
    );
    let tui = open(&env, "pending");
    prompt_ready(&tui);
    tui.submit("go", &["Yes, proceed"]);
    // Only now lev attaches: resuming the thread, it is sent the approval
    // the UI is waiting on.
    let attach = attach(&env);
    let said = || attach.stderr_now();
    wait_until("lev asked", || said().contains("waits for a person"), said);
    let asked = env.pending();
    assert_eq!(asked.request.reason.as_deref(), Some("needs p.txt"));
    match &asked.request.kind {
        InteractionKind::ToolApproval {
            tool_name,
            args_json,
            ..
        } => {
            assert_eq!(tool_name, "codex.exec");
            assert!(
                args_json.contains(r#""argv":["touch","../p.txt"]"#),
                "{args_json}"
            );
        }
        other => panic!("{other:?}"),
    }
    let outside = env.ws().parent().unwrap().join("p.txt");
    assert!(!outside.exists(), "ran before anyone approved");
    env.respond(
        &asked,
        &InteractionResponse::approval(asked.id(), true, ApprovalScope::Once),
    );
    wait_until("p.txt written", || outside.exists(), said);
    tui.wait_for(&["done after all"]);
    attach.interrupt();
    let run = attach.wait();
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.stderr.contains("following thread "), "{}", run.stderr);
    assert!(
        run.stderr
            .contains("`touch ../p.txt`: approved by pat -> accept"),
        "{}",
        run.stderr
    );
    drop(tui);
}

#[test]
fn codex_attach_records_a_refusal_in_the_terminal_ui() {
    let env = ui_world(
        "attach-refuse",
        vec![
            escalated("call_tr", "touch ../r.txt", "needs r.txt"),
            say("unreachable: the refusal ends the turn"),
        ],
    );
    let tui = open(&env, "refuse");
    let attach = attach(&env);
    let said = || attach.stderr_now();
    prompt_ready(&tui);
    tui.submit("go", &["Yes, proceed"]);
    wait_until("lev asked", || said().contains("waits for a person"), said);
    let asked = env.pending();
    // Codex 0.171's UI offers one refusal here, "No, and tell Codex what to
    // do differently (esc)": it declines the call and interrupts the turn.
    tui.keys(&["Escape"]);
    tui.wait_for(&["You canceled the request to run touch ../r.txt"]);
    env.served.wait_status(
        &asked.request.session_id,
        asked.id(),
        InteractionStatus::Answered,
    );
    let view = block_on(env.served.approver.get_interaction(asked.id())).unwrap();
    let response = view.response.expect("recorded");
    assert_eq!(response.approved, Some(false));
    assert_eq!(
        response.reason.as_deref(),
        Some("decided in Codex: declined, the call did not run")
    );
    assert!(!env.ws().parent().unwrap().join("r.txt").exists());
    assert_eq!(env.model.requests().len(), 1, "the turn went on");
    attach.interrupt();
    let run = attach.wait();
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stderr
            .contains("`touch ../r.txt`: answered in Codex first"),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr
            .contains("declined, the call did not run; lev's question"),
        "{}",
        run.stderr
    );
    drop(tui);
}
