//! `lev codex attach` to the real Codex terminal UI, run in a pseudo-terminal
//! (tmux): lev answers one approval, the person answers the next in the UI
//! first, and lev records what the UI decided. The UI starts a shared
//! app-server daemon (and an updater) that outlive it: both are stopped
//! when the test ends.

use std::path::PathBuf;
use std::process::Command;
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

/// Codex's terminal UI in a tmux server of its own.
struct Tui {
    socket: String,
    home: PathBuf,
    codex_home: PathBuf,
}

impl Tui {
    fn start(env: &CodexEnv) -> Self {
        let socket = format!("lev-codex-{}", std::process::id());
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
        }
    }

    fn screen(&self) -> String {
        let out = Command::new("tmux")
            .args(["-L", &self.socket, "capture-pane", "-p"])
            .output()
            .expect("tmux capture-pane");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Wait (up to 30 s) for any of `texts` on the screen.
    fn wait_for(&self, texts: &[&str]) {
        if self.within(texts, Duration::from_secs(30)).is_none() {
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

    /// Type `text`, then Enter on its own (the UI takes a fast Enter as a
    /// pasted newline).
    fn submit(&self, text: &str) {
        self.keys(&["-l", text]);
        std::thread::sleep(Duration::from_millis(400));
        self.keys(&["Enter"]);
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

#[test]
fn codex_attach_answers_the_terminal_uis_approvals_and_records_the_uis_own() {
    let env = CodexEnv::start(
        "attach",
        None,
        vec![
            escalated("call_ta", "touch ../a.txt", "needs a.txt"),
            say("first done"),
            escalated("call_tb", "touch ../b.txt", "needs b.txt"),
            say("second done"),
        ],
    );
    // The UI's own policy: it asks about commands run outside the sandbox.
    let config = env.codex_home().join("config.toml");
    let text = std::fs::read_to_string(&config).unwrap();
    std::fs::write(
        &config,
        format!("approval_policy = \"on-request\"\nsandbox_mode = \"workspace-write\"\n{text}"),
    )
    .unwrap();
    let tui = Tui::start(&env);
    // Each start of Codex 0.171's terminal UI fetches an announcement from
    // GitHub, and no setting turns that off: the tripwire stops it.
    env.allow_at_tripwire(ANNOUNCEMENT);
    let socket = env
        .codex_home()
        .join("app-server-control/app-server-control.sock");
    wait_until(
        "the UI's app-server socket",
        || socket.exists(),
        || tui.screen(),
    );
    let home = env.codex_home();
    let mut command = env.lev(&["codex", "attach", "--codex-home", home.to_str().unwrap()]);
    // An admin token may answer lev's question with the UI's decision.
    command.env("LEV_TOKEN", &env.served.admin);
    let attach = Running::spawn(command);
    let said = || attach.stderr_now();
    wait_until(
        "lev attached",
        || said().contains("its approvals are decided in lev"),
        said,
    );
    // Codex 0.171 first offers another model (a notice over the prompt).
    if tui
        .within(&["Use existing model"], Duration::from_secs(15))
        .is_some()
    {
        tui.keys(&["2"]);
        std::thread::sleep(Duration::from_millis(300));
        tui.keys(&["Enter"]);
    }
    tui.wait_for(&["Ask Codex to do anything"]);
    let outside = env.ws().parent().unwrap().to_path_buf();

    // 1. lev answers: the UI's prompt goes away and the command runs.
    tui.submit("first");
    tui.wait_for(&["Yes, proceed"]);
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
            assert_eq!(sandbox_mode, "workspace-write");
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
    tui.submit("second");
    tui.wait_for(&["Yes, proceed"]);
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
