//! A real `lev serve` on port 0 for the client-command tests, and `lev`
//! runs pointed at it.

use std::io::Write as _;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use lev_client::Client;
use lev_protocol::{Interaction, InteractionKind, InteractionRequest};

use crate::spawned::Spawned;
use crate::support::{Run, Scratch};

/// `lev serve --listen 127.0.0.1:0 --data-dir <scratch>`, killed when dropped.
pub struct LevServer {
    server: Spawned,
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    /// The admin token from `admin.token`.
    pub admin: String,
    /// The data dir (and room for other files).
    pub dir: Scratch,
    /// Extra `lev serve` flags, kept across restarts.
    args: Vec<String>,
}

impl LevServer {
    pub fn start(name: &str) -> Self {
        Self::start_in(Scratch::new(name), Vec::new())
    }

    /// With extra `lev serve` flags.
    pub fn start_with(name: &str, args: &[&str]) -> Self {
        Self::start_in(
            Scratch::new(name),
            args.iter().map(|a| (*a).to_owned()).collect(),
        )
    }

    fn start_in(dir: Scratch, args: Vec<String>) -> Self {
        let server = Spawned::builder(env!("CARGO_BIN_EXE_lev"), dir.path("data"))
            .args(&args)
            .start()
            .unwrap();
        let url = server.url().to_owned();
        let admin = std::fs::read_to_string(dir.path("data").join("admin.token"))
            .expect("admin.token")
            .trim()
            .to_owned();
        Self {
            server,
            url,
            admin,
            dir,
            args,
        }
    }

    /// Stop the server (SIGKILL), then start it again on the same data dir.
    pub fn restart(mut self) -> Self {
        self.server.kill();
        let dir = std::mem::replace(&mut self.dir, Scratch::new("unused"));
        Self::start_in(dir, std::mem::take(&mut self.args))
    }

    /// Stop the server and keep its data dir.
    pub fn stop(&mut self) {
        self.server.kill();
    }

    pub fn data_dir(&self) -> PathBuf {
        self.dir.path("data")
    }

    /// The SQLite file.
    pub fn db(&self) -> PathBuf {
        self.data_dir().join("lev.db")
    }

    #[allow(dead_code)]
    pub fn stderr(&self) -> String {
        self.server.log()
    }

    /// An SDK client with the admin token.
    pub fn client(&self) -> Client {
        Client::new(&self.url, Some(self.admin.clone())).expect("client")
    }

    /// `lev ARGS` with LEV_URL and LEV_TOKEN (admin) set.
    pub fn lev(&self, args: &[&str]) -> Run {
        self.lev_with(args, &[], b"")
    }

    /// `lev ARGS` with LEV_URL, LEV_TOKEN and these extra variables.
    pub fn lev_with(&self, args: &[&str], env: &[(&str, &str)], stdin: &[u8]) -> Run {
        let mut all = vec![
            ("LEV_URL", self.url.as_str()),
            ("LEV_TOKEN", self.admin.as_str()),
        ];
        all.extend_from_slice(env);
        lev_env(args, &all, stdin)
    }

    /// Ask a question as a worker (the admin token may do everything).
    pub fn create(&self, session: &str, kind: InteractionKind) -> Interaction {
        let request = InteractionRequest::new(session, kind);
        block_on(self.client().create_interaction(&request)).expect("create")
    }
}

/// Run `lev ARGS` with exactly these LEV_* / colour variables (others unset)
/// and a HOME of its own, so no real data dir is ever read.
pub fn lev_env(args: &[&str], env: &[(&str, &str)], stdin: &[u8]) -> Run {
    let home = Scratch::new("home");
    let mut command = Command::new(env!("CARGO_BIN_EXE_lev"));
    command
        .args(args)
        .env("HOME", home.path(""))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for var in [
        "LEV_URL",
        "LEV_TOKEN",
        "LEV_DATA_DIR",
        "LEV_PERSON_KEY",
        "XDG_DATA_HOME",
        "XDG_CONFIG_HOME",
        "NO_COLOR",
        "CLICOLOR_FORCE",
    ] {
        command.env_remove(var);
    }
    for (k, v) in env {
        command.env(k, v);
    }
    let mut child = command.spawn().expect("start lev");
    child
        .stdin
        .take()
        .expect("piped stdin")
        .write_all(stdin)
        .expect("write stdin");
    let output = child.wait_with_output().expect("wait for lev");
    Run {
        code: output.status.code().expect("lev exited, not killed"),
        stdout: String::from_utf8(output.stdout).expect("stdout is UTF-8"),
        stderr: String::from_utf8(output.stderr).expect("stderr is UTF-8"),
    }
}

/// Run a future on a runtime of its own.
pub fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
        .block_on(f)
}

/// A free-text question.
pub fn text(prompt: &str) -> InteractionKind {
    InteractionKind::FreeText {
        prompt: prompt.into(),
    }
}

/// A tool approval for `shell`.
pub fn shell(argv: &str) -> InteractionKind {
    InteractionKind::ToolApproval {
        tool_name: "shell".into(),
        args_json: format!(r#"{{"argv":{argv}}}"#),
        missing_capabilities: vec!["proc-exec".into()],
        sandbox_mode: "workspace-write".into(),
        options: vec![],
    }
}

/// A multiple choice.
pub fn choice(prompt: &str, options: &[&str]) -> InteractionKind {
    InteractionKind::MultipleChoice {
        prompt: prompt.into(),
        options: options.iter().map(|o| (*o).to_owned()).collect(),
    }
}

/// Assert a run's exit code, showing its output when it differs.
#[track_caller]
pub fn assert_code(run: &Run, code: i32) {
    assert_eq!(
        run.code, code,
        "expected exit {code}\nstdout:\n{}\nstderr:\n{}",
        run.stdout, run.stderr
    );
}
