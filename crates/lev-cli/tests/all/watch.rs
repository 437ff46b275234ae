//! `lev watch` in a real pseudo-terminal (tmux, 80x24) against a real
//! `lev serve`: keys typed as a person types them, and every answer checked
//! through the API. The connection goes through a proxy the test cuts, to
//! see "reconnecting" and the resume with Last-Event-ID.

use std::io::{Read as _, Write as _};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use lev_protocol::{ApprovalScope, InteractionKind, InteractionStatus, StoredResponse};

use crate::client_env::{LevServer, block_on, shell, text};
use crate::support::Scratch;

/// A tmux server of its own (its own socket), killed when dropped.
struct Tmux {
    socket: String,
}

impl Tmux {
    fn start(name: &str, script: &Path) -> Self {
        let socket = format!("lev-watch-test-{name}-{}", std::process::id());
        let tmux = Self { socket };
        let status = tmux
            .cmd()
            .args(["new-session", "-d", "-s", "w", "-x", "80", "-y", "24"])
            .arg(format!("sh {}", script.display()))
            .status()
            .expect("tmux (apt-get install tmux) runs");
        assert!(status.success(), "tmux new-session failed");
        tmux
    }

    fn cmd(&self) -> Command {
        let mut c = Command::new("tmux");
        c.args(["-L", &self.socket, "-f", "/dev/null"]);
        c
    }

    fn screen(&self) -> String {
        let out = self
            .cmd()
            .args(["capture-pane", "-p", "-t", "w"])
            .output()
            .expect("tmux capture-pane");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Wait until the screen shows `want`; the screen.
    fn wait_for(&self, want: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let screen = self.screen();
            if screen.contains(want) {
                return screen;
            }
            assert!(
                Instant::now() < deadline,
                "waited 30s for {want:?}; the screen:\n{screen}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Type text as it is (`-l`: no key names).
    fn type_text(&self, text: &str) {
        let ok = self
            .cmd()
            .args(["send-keys", "-t", "w", "-l", text])
            .status()
            .unwrap()
            .success();
        assert!(ok);
    }

    /// Press a named key (`Enter`, `C-c`).
    fn press(&self, key: &str) {
        let ok = self
            .cmd()
            .args(["send-keys", "-t", "w", key])
            .status()
            .unwrap()
            .success();
        assert!(ok);
    }

    /// Keep a copy of the screen under target/watch-screens/ for review.
    fn keep(&self, name: &str) {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/watch-screens");
        let _ = std::fs::create_dir_all(&dir);
        let _ = std::fs::write(dir.join(format!("pty_{name}.txt")), self.screen());
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.cmd().arg("kill-server").status();
    }
}

/// A TCP proxy to the server that the test can cut and restore.
struct Proxy {
    url: String,
    cut: Arc<AtomicBool>,
    open: Arc<Mutex<Vec<TcpStream>>>,
}

impl Proxy {
    fn start(target: &str) -> Self {
        let target = target.strip_prefix("http://").expect("http url").to_owned();
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let cut = Arc::new(AtomicBool::new(false));
        let open = Arc::new(Mutex::new(Vec::new()));
        let (c, o) = (Arc::clone(&cut), Arc::clone(&open));
        std::thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(client) = client else { continue };
                if c.load(Ordering::SeqCst) {
                    drop(client);
                    continue;
                }
                let Ok(server) = TcpStream::connect(&target) else {
                    continue;
                };
                {
                    let mut o = o.lock().unwrap();
                    o.push(client.try_clone().unwrap());
                    o.push(server.try_clone().unwrap());
                }
                for (mut from, mut to) in [
                    (client.try_clone().unwrap(), server.try_clone().unwrap()),
                    (server, client),
                ] {
                    std::thread::spawn(move || {
                        let mut buf = [0u8; 16 * 1024];
                        while let Ok(n) = from.read(&mut buf) {
                            if n == 0 || to.write_all(&buf[..n]).is_err() {
                                break;
                            }
                        }
                        let _ = to.shutdown(Shutdown::Both);
                    });
                }
            }
        });
        Self { url, cut, open }
    }

    /// Close every connection and refuse new ones.
    fn cut(&self) {
        self.cut.store(true, Ordering::SeqCst);
        for s in self.open.lock().unwrap().drain(..) {
            let _ = s.shutdown(Shutdown::Both);
        }
    }

    fn restore(&self) {
        self.cut.store(false, Ordering::SeqCst);
    }
}

fn answer(server: &LevServer, id: &str) -> (InteractionStatus, Option<StoredResponse>) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let view = block_on(server.client().get_interaction(id)).unwrap();
        if view.request.status != InteractionStatus::Pending || Instant::now() > deadline {
            return (view.request.status, view.response);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn watch_in_a_terminal_answers_exactly_what_was_typed() {
    let server = LevServer::start("watch");
    let proxy = Proxy::start(&server.url);
    let scratch = Scratch::new("watch-pty");
    let editor = scratch.write(
        "editor.sh",
        "#!/bin/sh\nsed -i 's/\"hello\"/\"edited\"/' \"$1\"\n",
    );
    let script = scratch.write(
        "watch.sh",
        format!(
            "export LEV_URL='{}' LEV_TOKEN='{}' EDITOR='sh {}' HOME='{}' TERM=xterm-256color\n\
             unset NO_COLOR LEV_DATA_DIR VISUAL\n\
             '{}' watch\n\
             echo \"watch exited $?\"\n\
             sleep 600\n",
            proxy.url,
            server.admin,
            editor.display(),
            scratch.path("").display(),
            env!("CARGO_BIN_EXE_lev"),
        ),
    );

    // Three questions; the newest is selected first.
    let choice = server.create(
        "s-choice",
        InteractionKind::MultipleChoice {
            prompt: "Which database?".into(),
            options: vec!["PostgreSQL".into(), "SQLite".into()],
        },
    );
    let question = server.create("s-text", text("Which branch should I release from?"));
    let call = server.create(
        "s-shell",
        InteractionKind::ToolApproval {
            tool_name: "shell".into(),
            args_json: r#"{"argv":["echo","hello"],"cwd":"/tmp"}"#.into(),
            missing_capabilities: vec!["proc-exec".into()],
            sandbox_mode: "workspace-write".into(),
            options: vec![],
        },
    );

    let tmux = Tmux::start("answers", &script);
    tmux.wait_for("3 pending");
    tmux.wait_for("$ echo hello");
    tmux.keep("inbox");

    // Edit the args in $EDITOR: the diff shows before anything is sent.
    tmux.type_text("e");
    let screen = tmux.wait_for("review the edit");
    assert!(
        screen.contains("+ ") && screen.contains("\"edited\""),
        "{screen}"
    );
    tmux.keep("review");
    assert_eq!(answer_now(&server, call.id()), InteractionStatus::Pending);
    tmux.type_text("a");
    let (_, r) = answer(&server, call.id());
    let r = r.expect("answered");
    assert_eq!(r.approved, Some(true));
    assert_eq!(r.scope, Some(ApprovalScope::Once));
    let edited: serde_json::Value =
        serde_json::from_str(r.modified_args_json.as_deref().unwrap()).unwrap();
    assert_eq!(
        edited,
        serde_json::json!({"argv": ["echo", "edited"], "cwd": "/tmp"})
    );

    // On to the next: the text question, once the detail pane shows it (the
    // selection moves on when the answer above is acknowledged, which may be
    // after the next key). r, type, Enter.
    tmux.wait_for(&format!("┌ {}", question.id()));
    tmux.type_text("r");
    tmux.wait_for("reply:");
    tmux.type_text("main, after the tests");
    tmux.press("Enter");
    let (_, r) = answer(&server, question.id());
    assert_eq!(
        r.expect("answered").value.as_deref(),
        Some("main, after the tests")
    );

    // The choice, numbered from 1 on screen.
    tmux.wait_for("2. SQLite");
    tmux.type_text("2");
    let (_, r) = answer(&server, choice.id());
    assert_eq!(r.expect("answered").choice_index, Some(1));

    // Deny with feedback.
    let deny = server.create("s-deny", shell(r#"["rm","-rf","/"]"#));
    tmux.wait_for("$ rm -rf /");
    tmux.type_text("f");
    tmux.wait_for("deny feedback:");
    tmux.type_text("use git clean instead");
    tmux.press("Enter");
    let (_, r) = answer(&server, deny.id());
    let r = r.expect("answered");
    assert_eq!(r.approved, Some(false));
    assert_eq!(r.deny_feedback(), Some("use git clean instead"));

    // Approve for the session, then revoke the grant it made.
    let grant = server.create("s-grant", shell(r#"["ls","-la"]"#));
    tmux.wait_for("$ ls -la");
    tmux.type_text("s");
    tmux.wait_for("approve session");
    tmux.type_text("a");
    let (_, r) = answer(&server, grant.id());
    assert_eq!(r.expect("answered").scope, Some(ApprovalScope::Session));
    assert_eq!(block_on(server.client().grants()).unwrap().len(), 1);
    tmux.type_text("g");
    tmux.wait_for("by admin ·");
    tmux.keep("grants");
    tmux.type_text("x");
    tmux.wait_for("Revoke gr_");
    tmux.type_text("y");
    tmux.wait_for("revoked gr_");
    assert!(block_on(server.client().grants()).unwrap().is_empty());
    tmux.press("Escape");

    // A lost race: somebody else answers first; the winner is shown.
    let raced = server.create("s-race", text("Who wins?"));
    tmux.wait_for("Who wins?");
    block_on(server.client().respond(
        raced.id(),
        &lev_protocol::InteractionResponse::text(raced.id(), "the API did"),
    ))
    .unwrap();
    let screen = tmux.wait_for("Answered elsewhere first");
    assert!(screen.contains("the API did"), "{screen}");
    tmux.keep("raced");

    // The connection drops: "reconnecting" shows; what was asked meanwhile
    // arrives once it is back (resumed with Last-Event-ID).
    proxy.cut();
    tmux.wait_for("reconnecting");
    tmux.keep("reconnecting");
    let meanwhile = server.create("s-later", text("Asked while you were away"));
    proxy.restore();
    tmux.wait_for("● live");
    tmux.wait_for("Asked while you were away");
    // Select it until the detail pane shows it: j moves down, k up.
    let detail = format!("┌ {}", meanwhile.id());
    for key in ["j", "k", "k", "k", "j", "j", "j", "j", "j"] {
        std::thread::sleep(Duration::from_millis(300));
        if tmux.screen().contains(&detail) {
            break;
        }
        tmux.type_text(key);
    }
    tmux.wait_for(&detail);
    tmux.type_text("r");
    tmux.type_text("back now");
    tmux.press("Enter");
    let (_, r) = answer(&server, meanwhile.id());
    assert_eq!(r.expect("answered").value.as_deref(), Some("back now"));

    // Ctrl-C: the terminal is restored (the shell's own screen, no TUI).
    tmux.press("C-c");
    let screen = tmux.wait_for("watch exited 0");
    assert!(
        !screen.contains("lev watch "),
        "the TUI is still on screen:\n{screen}"
    );
}

fn answer_now(server: &LevServer, id: &str) -> InteractionStatus {
    block_on(server.client().get_interaction(id))
        .unwrap()
        .request
        .status
}

/// SIGHUP (the SSH session gone) and a panic both leave the terminal as
/// `lev watch` found it: the main screen back, the line discipline restored
/// (the same `stty -g` before and after), the cursor shown, and a panic's
/// message readable on the main screen.
#[test]
fn watch_restores_the_terminal_on_hangup_and_on_a_panic() {
    let server = LevServer::start("watch-restore");
    server.create("s-hup", text("Still there?"));
    let scratch = Scratch::new("watch-restore-pty");
    let script = scratch.write(
        "watch.sh",
        format!(
            "export LEV_URL='{url}' LEV_TOKEN='{token}' HOME='{home}' TERM=xterm-256color\n\
             unset NO_COLOR LEV_DATA_DIR VISUAL RUST_BACKTRACE RUST_LIB_BACKTRACE\n\
             before=$(stty -g)\n\
             '{lev}' watch\n\
             echo \"hup exit $?\"\n\
             [ \"$(stty -g)\" = \"$before\" ] && echo 'hup: tty restored'\n\
             LEV_WATCH_TEST_PANIC=1 '{lev}' watch\n\
             echo \"panic exit $?\"\n\
             [ \"$(stty -g)\" = \"$before\" ] && echo 'panic: tty restored'\n\
             sleep 600\n",
            url = server.url,
            token = server.admin,
            home = scratch.path("").display(),
            lev = env!("CARGO_BIN_EXE_lev"),
        ),
    );
    let tmux = Tmux::start("restore", &script);
    tmux.wait_for("1 pending");
    let display = |format: &str| {
        let out = tmux
            .cmd()
            .args(["display", "-p", "-t", "w", format])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    };
    assert_eq!(
        display("#{alternate_on}"),
        "1",
        "watch draws on the alternate screen"
    );
    let shell = display("#{pane_pid}");
    let out = Command::new("pgrep").args(["-P", &shell]).output().unwrap();
    let watch = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    assert!(!watch.is_empty(), "lev watch runs under the pane's shell");
    let sent = Command::new("kill")
        .args(["-HUP", &watch])
        .status()
        .unwrap();
    assert!(sent.success());
    let screen = tmux.wait_for("hup: tty restored");
    assert!(screen.contains("hup exit 0"), "{screen}");
    tmux.keep("after_hangup");

    let screen = tmux.wait_for("panic: tty restored");
    assert!(screen.contains("panic exit 101"), "{screen}");
    assert_eq!(display("#{alternate_on}"), "0", "back on the main screen");
    assert_eq!(display("#{cursor_flag}"), "1", "the cursor is shown");
    // Printed after the restore, so it stays on the main screen to be read.
    assert!(
        screen.contains("LEV_WATCH_TEST_PANIC is set"),
        "the panic's message is on the screen: {screen}"
    );
    tmux.keep("after_panic");
}

/// Whether process `pid` is gone (or a zombie waiting to be reaped).
fn gone(pid: &str) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit(") ")
            .next()
            .is_some_and(|rest| rest.starts_with('Z')),
    }
}

/// A terminal that goes away with nobody sending SIGHUP (the tmux server
/// killed outright, its lev server gone too) reads end-of-file for ever:
/// `lev watch` stops within a few seconds instead of spinning on it at 100%
/// CPU. The pane's shell leads the session, so the kernel's SIGHUP goes to
/// it alone, not to `lev watch`.
#[test]
fn watch_exits_when_its_terminal_goes_away_without_a_sighup() {
    let mut server = LevServer::start("watch-gone");
    server.create("s-gone", text("Anyone there?"));
    let scratch = Scratch::new("watch-gone-pty");
    let script = scratch.write(
        "watch.sh",
        format!(
            "export LEV_URL='{url}' LEV_TOKEN='{token}' HOME='{home}' TERM=xterm-256color\n\
             unset NO_COLOR LEV_DATA_DIR VISUAL\n\
             '{lev}' watch\n\
             sleep 600\n",
            url = server.url,
            token = server.admin,
            home = scratch.path("").display(),
            lev = env!("CARGO_BIN_EXE_lev"),
        ),
    );
    let tmux = Tmux::start("gone", &script);
    tmux.wait_for("1 pending");
    let display = |format: &str| {
        let out = tmux
            .cmd()
            .args(["display", "-p", "-t", "w", format])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    };
    let shell = display("#{pane_pid}");
    let tmux_server = display("#{pid}");
    let out = Command::new("pgrep").args(["-P", &shell]).output().unwrap();
    let watch = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    assert!(!watch.is_empty(), "lev watch runs under the pane's shell");

    // The server goes first (the watcher is now reconnecting), then the
    // terminal, with no signal from tmux.
    server.stop();
    let killed = Command::new("kill")
        .args(["-KILL", &tmux_server])
        .status()
        .unwrap();
    assert!(killed.success());
    let deadline = Instant::now() + Duration::from_secs(10);
    while !gone(&watch) {
        if Instant::now() > deadline {
            let stat = std::fs::read_to_string(format!("/proc/{watch}/stat")).unwrap_or_default();
            let _ = Command::new("kill").args(["-KILL", &watch]).status();
            panic!("lev watch still runs 10 s after its terminal went away: {stat}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn watch_fills_in_a_form_field_by_field() {
    let server = LevServer::start("watch-form");
    let scratch = Scratch::new("watch-form");
    let script = scratch.write(
        "watch.sh",
        format!(
            "export LEV_URL='{}' LEV_TOKEN='{}' HOME='{}' TERM=xterm-256color\n\
             unset NO_COLOR LEV_DATA_DIR VISUAL\n\
             '{}' watch\n\
             echo \"watch exited $?\"\n\
             sleep 600\n",
            server.url,
            server.admin,
            scratch.path("").display(),
            env!("CARGO_BIN_EXE_lev"),
        ),
    );
    let tmux = Tmux::start("form", &script);
    tmux.wait_for("0 pending");
    // Created once watch follows the events, its fields in the order written.
    let schema = serde_json::from_str(
        r#"{"type": "object", "properties": {
            "version": {"type": "string", "title": "Version", "minLength": 5},
            "replicas": {"type": "integer", "minimum": 1, "maximum": 9, "default": 3},
            "canary": {"type": "boolean", "description": "Roll out to one host first"}
        }, "required": ["version"]}"#,
    )
    .unwrap();
    let form = server.create(
        "s-form",
        InteractionKind::Form {
            prompt: "Release details?".into(),
            schema,
        },
    );
    let screen = tmux.wait_for("Roll out to one host first");
    let at = |s: &str| {
        screen
            .find(s)
            .unwrap_or_else(|| panic!("{s} missing:\n{screen}"))
    };
    assert!(
        at("Version (version)") < at("replicas integer")
            && at("replicas integer") < at("canary true"),
        "{screen}"
    );
    assert!(screen.contains("default 3"), "{screen}");
    tmux.keep("form");

    // r: the first field; a value the field refuses stays on that field.
    tmux.type_text("r");
    tmux.wait_for("▸ Version");
    tmux.type_text("1.0");
    tmux.press("Enter");
    tmux.wait_for("version: at least 5 characters");
    tmux.press("C-u");
    tmux.type_text("1.4.0");
    tmux.press("Enter");
    // The next field starts from its default; Enter keeps it.
    tmux.wait_for("▸ replicas");
    tmux.press("BSpace");
    tmux.type_text("5");
    tmux.press("Enter");
    tmux.wait_for("▸ canary");
    tmux.keep("form-typing");
    tmux.type_text("yes");
    tmux.press("Enter");
    let (_, r) = answer(&server, form.id());
    assert_eq!(
        serde_json::Value::Object(r.expect("answered").fields.expect("fields")),
        serde_json::json!({"version": "1.4.0", "replicas": 5, "canary": true})
    );
}
