//! What every Codex test sets up: the pinned Codex binary, a Codex home of
//! its own that keeps Codex offline (the fake model on loopback, every
//! network feature off), a HOME of its own (so nothing of the user's, not
//! even a login shell's profile, leaks in), a workspace, and `lev` runs
//! pointed at a real `lev serve`.
//!
//! Offline is checked, not assumed: every process a test starts through
//! [`CodexEnv::command`] has its proxy variables on a [`Tripwire`], and when
//! the test's world is dropped it fails if anything connected to the
//! tripwire (somewhere beyond loopback) or asked the fake model for anything
//! but `POST .../responses`.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

use lev_client::ListQuery;
use lev_protocol::{Interaction, InteractionResponse};

use super::super::served::{Served, block_on};
use super::fake_model::FakeModel;
use super::offline::{NO_PROXY, Tripwire};
use crate::support::{Run, Scratch};

/// The pinned Codex CLI's native binary: `LEV_TEST_CODEX`, which
/// `scripts/codex-env.sh` installs and `scripts/test.sh` exports. A test
/// without it fails, never skips.
pub fn codex_bin() -> PathBuf {
    let path = std::env::var_os("LEV_TEST_CODEX")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            panic!(
                "LEV_TEST_CODEX is not set: the Codex tests need the pinned Codex CLI\n\
             run: export LEV_TEST_CODEX=\"$(bash scripts/codex-env.sh)\""
            )
        });
    assert!(
        path.is_file(),
        "LEV_TEST_CODEX={} is not a file; run scripts/codex-env.sh",
        path.display()
    );
    path
}

/// At most this many Codex tests at once: each runs a Codex, a lev server
/// and lev itself.
const AT_ONCE: usize = 3;

static RUNNING: Mutex<usize> = Mutex::new(0);
static FREED: Condvar = Condvar::new();

/// A slot among the Codex tests running at once, freed when dropped.
#[derive(Debug)]
pub struct Slot;

impl Slot {
    pub fn take() -> Self {
        let mut running = RUNNING.lock().unwrap_or_else(|e| e.into_inner());
        while *running >= AT_ONCE {
            running = FREED.wait(running).unwrap_or_else(|e| e.into_inner());
        }
        *running += 1;
        Self
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut running = RUNNING.lock().unwrap_or_else(|e| e.into_inner());
        *running -= 1;
        FREED.notify_one();
    }
}

/// The offline Codex configuration, pointed at `base_url`.
pub fn config_toml(base_url: &str) -> String {
    format!(
        r#"# gpt-5.5 is in Codex 0.171's bundled catalog, so Codex offers it its
# real tools (apply_patch among them); the provider routes it to the fake.
model = "gpt-5.5"
model_provider = "fake"
check_for_update_on_startup = false
web_search = "disabled"

[model_providers.fake]
name = "Fake Responses"
base_url = "{base_url}"
wire_api = "responses"
env_key = "FAKE_API_KEY"
request_max_retries = 0
stream_max_retries = 0
stream_idle_timeout_ms = 60000

# Off: each of these reaches the network (plugins clone a git repository).
[features]
plugins = false
apps = false
remote_plugin = false
plugin_sharing = false
tool_suggest = false
skill_mcp_dependency_install = false
api_key_model_discovery = false
in_app_updates = false

[analytics]
enabled = false

[feedback]
enabled = false
"#
    )
}

/// A directory outside the repository (Codex treats a workspace inside a
/// git repository as part of that project: its trust prompt, its
/// AGENTS.md), removed when dropped.
#[derive(Debug)]
pub struct Outside(tempfile::TempDir);

impl Outside {
    pub fn new(name: &str) -> Self {
        Self(
            tempfile::Builder::new()
                .prefix(&format!("lev-{name}-"))
                .tempdir_in(std::env::temp_dir())
                .expect("a temporary directory"),
        )
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.0.path().join(name)
    }

    /// Write `bytes` to `name` and return its path.
    pub fn write(&self, name: &str, bytes: impl AsRef<[u8]>) -> PathBuf {
        let path = self.path(name);
        std::fs::write(&path, bytes).expect("write a scratch file");
        path
    }
}

/// One test's world: lev, the fake model, a Codex home, a workspace.
pub struct CodexEnv {
    pub served: Served,
    pub model: FakeModel,
    /// Where every request beyond loopback lands (the proxy variables).
    pub tripwire: Tripwire,
    pub scratch: Outside,
    /// Connections to the tripwire the test expects (by their first line).
    allowed: std::cell::RefCell<Vec<String>>,
    _slot: Slot,
}

impl CodexEnv {
    /// Start lev (with `policy`, if any) and the fake model with `script`.
    pub fn start(name: &str, policy: Option<&str>, script: Vec<super::fake_model::Turn>) -> Self {
        let slot = Slot::take();
        let served = Served::start(&format!("codex-{name}"), policy);
        let model = FakeModel::start(script);
        let scratch = Outside::new(&format!("codex-{name}"));
        for dir in ["codex-home", "home", "ws"] {
            std::fs::create_dir_all(scratch.path(dir)).unwrap();
        }
        std::fs::write(
            scratch.path("codex-home").join("config.toml"),
            config_toml(&model.base_url()),
        )
        .unwrap();
        Self {
            served,
            model,
            tripwire: Tripwire::start(),
            scratch,
            allowed: std::cell::RefCell::default(),
            _slot: slot,
        }
    }

    /// A connection to the tripwire that this test expects, by its first
    /// line (`CONNECT host:443 HTTP/1.1`): stopped there, never a failure.
    pub fn allow_at_tripwire(&self, line: &str) {
        self.allowed.borrow_mut().push(line.to_owned());
    }

    /// Fail when anything reached for the network (a connection to the
    /// tripwire the test did not expect) or asked the fake model for
    /// anything but a response. Run when the world is dropped.
    pub fn assert_offline(&self) {
        let allowed = self.allowed.borrow();
        let mut seen = self.tripwire.seen();
        // A connection just made may not have said its first line yet.
        let deadline = Instant::now() + Duration::from_secs(10);
        while seen.iter().any(|s| s == Tripwire::UNREAD) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
            seen = self.tripwire.seen();
        }
        let unexpected: Vec<&String> = seen.iter().filter(|s| !allowed.contains(s)).collect();
        assert!(
            unexpected.is_empty(),
            "something reached for the network (stopped by the proxy variables' tripwire): {unexpected:?}"
        );
        let strays = self.model.strays();
        assert!(
            strays.is_empty(),
            "the fake model was asked for something other than POST .../responses: {strays:?}"
        );
    }

    /// The workspace (the thread's cwd), canonical as Codex reports it.
    pub fn ws(&self) -> PathBuf {
        std::fs::canonicalize(self.scratch.path("ws")).unwrap()
    }

    pub fn codex_home(&self) -> PathBuf {
        self.scratch.path("codex-home")
    }

    /// A command with the environment every Codex test gives: its own HOME
    /// and CODEX_HOME, the fake's key, the proxy variables on the tripwire,
    /// nothing of lev's or OpenAI's.
    pub fn command(&self, program: &Path) -> Command {
        let mut command = Command::new(program);
        command
            .current_dir(self.ws())
            .env("HOME", self.scratch.path("home"))
            .env("CODEX_HOME", self.codex_home())
            .env("FAKE_API_KEY", "dummy")
            .env_remove("XDG_DATA_HOME")
            .env_remove("XDG_CONFIG_HOME")
            .env_remove("NO_COLOR");
        self.tripwire.arm(&mut command, NO_PROXY);
        for var in [
            "LEV_URL",
            "LEV_TOKEN",
            "LEV_DATA_DIR",
            "LEV_TRUSTED_KEYS",
            "OPENAI_API_KEY",
            "OPENAI_BASE_URL",
            "CODEX_API_KEY",
        ] {
            command.env_remove(var);
        }
        command
    }

    /// `lev ARGS` with LEV_URL and LEV_TOKEN (the worker's) in this world.
    pub fn lev(&self, args: &[&str]) -> Command {
        let mut command = self.command(Path::new(env!("CARGO_BIN_EXE_lev")));
        command
            .args(args)
            .env("LEV_URL", &self.served.url)
            .env("LEV_TOKEN", &self.served.worker);
        command
    }

    /// Start `lev codex run PROMPT` with the pinned Codex and `extra` flags.
    pub fn spawn_run(&self, prompt: &str, extra: &[&str]) -> Running {
        let codex = codex_bin();
        let mut args = vec!["codex", "run", "--codex", codex.to_str().unwrap()];
        args.extend_from_slice(extra);
        args.push(prompt);
        Running::spawn(self.lev(&args))
    }

    /// The one pending interaction (of any session), once there is one.
    pub fn pending(&self) -> Interaction {
        pending_one(&self.served)
    }

    /// Every interaction, whatever its status.
    pub fn interactions(&self) -> Vec<Interaction> {
        block_on(self.served.approver.list_interactions(&ListQuery::all()))
            .unwrap()
            .items
            .into_iter()
            .map(|v| v.request)
            .collect()
    }

    pub fn respond(&self, interaction: &Interaction, response: &InteractionResponse) {
        self.served.respond(interaction, response);
    }
}

impl Drop for CodexEnv {
    fn drop(&mut self) {
        // A test that failed already says why; this is the check of one that
        // passed.
        if !std::thread::panicking() {
            self.assert_offline();
        }
    }
}

/// The one pending interaction on `served`, waiting up to 30 s.
pub fn pending_one(served: &Served) -> Interaction {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let page = block_on(served.approver.list_interactions(&ListQuery::default())).unwrap();
        if let [one] = page.items.as_slice() {
            return one.request.clone();
        }
        assert!(
            page.items.len() < 2,
            "more than one pending: {:?}",
            page.items
        );
        assert!(
            Instant::now() < deadline,
            "nothing pending after 30 s; server log:\n{}",
            served.log()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A `lev` process running in the background, its output kept.
pub struct Running {
    child: Option<Child>,
    stdout: PathBuf,
    stderr: PathBuf,
    _dir: Scratch,
}

impl Running {
    pub fn spawn(mut command: Command) -> Self {
        let dir = Scratch::new("lev-out");
        let (stdout, stderr) = (dir.path("stdout"), dir.path("stderr"));
        let child = command
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&stdout).unwrap())
            .stderr(std::fs::File::create(&stderr).unwrap())
            .spawn()
            .expect("start lev");
        Self {
            child: Some(child),
            stdout,
            stderr,
            _dir: dir,
        }
    }

    /// What it printed on stderr so far.
    pub fn stderr_now(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }

    /// Wait (up to 60 s) for it to exit.
    pub fn wait(mut self) -> Run {
        let mut child = self.child.take().unwrap();
        let deadline = Instant::now() + Duration::from_secs(60);
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                panic!(
                    "lev did not exit within 60 s; stderr:\n{}",
                    self.stderr_now()
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        Run {
            code: status.code().unwrap_or(-1),
            stdout: std::fs::read_to_string(&self.stdout).unwrap_or_default(),
            stderr: std::fs::read_to_string(&self.stderr).unwrap_or_default(),
        }
    }

    /// Send SIGINT, as Ctrl-C does.
    pub fn interrupt(&self) {
        if let Some(child) = &self.child {
            let _ = Command::new("kill")
                .args(["-INT", &child.id().to_string()])
                .status();
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
