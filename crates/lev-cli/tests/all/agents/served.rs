//! A real `lev serve` on 127.0.0.1:0, its tokens, and a person answering
//! through lev's API with the Rust SDK.

use std::io::{BufRead as _, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

use lev_client::{Client, ListQuery, StatusFilter};
use lev_protocol::api::{Role, TokenCreate};
use lev_protocol::{Interaction, InteractionResponse, InteractionStatus};

use crate::support::Scratch;

/// A running `lev serve` and the tokens of its parties.
pub struct Served {
    child: Child,
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    /// A worker token (bound to no caller).
    pub worker: String,
    /// The approver's client ("pat").
    pub approver: Client,
    stderr: Arc<Mutex<String>>,
    _scratch: Scratch,
}

pub fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(f)
}

impl Served {
    /// Start `lev serve` with an optional policy file's text.
    pub fn start(name: &str, policy: Option<&str>) -> Self {
        let scratch = Scratch::new(name);
        let data = scratch.path("data");
        let mut command = Command::new(env!("CARGO_BIN_EXE_lev"));
        command
            .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
            .arg(&data)
            .env_remove("LEV_DATABASE_URL")
            .env_remove("LEV_URL")
            .env_remove("LEV_TOKEN")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        if let Some(policy) = policy {
            command
                .arg("--policy")
                .arg(scratch.write("policy.toml", policy));
        }
        let mut child = command.spawn().expect("start lev serve");
        let stderr = child.stderr.take().expect("piped stderr");
        let (tx, rx) = mpsc::channel::<String>();
        let log = Arc::new(Mutex::new(String::new()));
        let keep = Arc::clone(&log);
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                keep.lock().unwrap().push_str(&format!("{line}\n"));
                let _ = tx.send(line);
            }
        });
        let deadline = Instant::now() + Duration::from_secs(60);
        let url = loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = rx
                .recv_timeout(left)
                .unwrap_or_else(|_| panic!("no listening line; stderr:\n{}", log.lock().unwrap()));
            if let Some(addr) = line.strip_prefix("lev: listening on ") {
                break addr.trim().to_owned();
            }
        };
        let admin_token = read_admin_token(&data);
        let admin = Client::new(&url, Some(admin_token)).unwrap();
        let token = |name: &str, role: Role| {
            block_on(admin.create_token(&TokenCreate {
                name: name.to_owned(),
                role,
                caller: None,
                sessions: (role == Role::Operator).then(|| vec!["*".into()]),
            }))
            .unwrap()
            .token
        };
        let worker = token("agent", Role::Worker);
        let approver = Client::new(&url, Some(token("pat", Role::Approver))).unwrap();
        Self {
            child,
            url,
            worker,
            approver,
            stderr: log,
            _scratch: scratch,
        }
    }

    /// The server's log so far.
    pub fn log(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// The pending interaction of `session`, once there is exactly one
    /// (waiting up to 30 s).
    pub fn pending(&self, session: &str) -> Interaction {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let page = block_on(self.approver.list_interactions(&ListQuery {
                session_id: Some(session.to_owned()),
                ..ListQuery::default()
            }))
            .unwrap();
            if let [one] = page.items.as_slice() {
                return one.request.clone();
            }
            assert!(page.items.len() < 2, "more than one pending in {session}");
            assert!(
                Instant::now() < deadline,
                "nothing pending in session {session}; server log:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Every interaction of `session`, whatever its status, newest first.
    pub fn all(&self, session: &str) -> Vec<Interaction> {
        block_on(self.approver.list_interactions(&ListQuery {
            status: Some(StatusFilter::All),
            session_id: Some(session.to_owned()),
            ..ListQuery::default()
        }))
        .unwrap()
        .items
        .into_iter()
        .map(|v| v.request)
        .collect()
    }

    /// Wait until the interaction `id` has `status`.
    pub fn wait_status(&self, session: &str, id: &str, status: InteractionStatus) {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let found = self.all(session).into_iter().find(|i| i.id() == id);
            if found.as_ref().is_some_and(|i| i.status == status) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "{id} is not {status:?}: {found:?}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Answer as the approver.
    pub fn respond(&self, interaction: &Interaction, response: &InteractionResponse) {
        block_on(self.approver.respond(interaction.id(), response)).unwrap();
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn read_admin_token(data: &Path) -> String {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Ok(text) = std::fs::read_to_string(data.join("admin.token"))
            && !text.trim().is_empty()
        {
            return text.trim().to_owned();
        }
        assert!(
            Instant::now() < deadline,
            "no admin.token in {}",
            data.display()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A free-text answer.
pub fn text(interaction: &Interaction, value: &str) -> InteractionResponse {
    InteractionResponse::text(interaction.id(), value)
}

/// A multiple-choice answer.
pub fn choice(interaction: &Interaction, index: usize) -> InteractionResponse {
    InteractionResponse::choice(interaction.id(), index)
}
