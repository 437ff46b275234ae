//! A real `lev serve` on 127.0.0.1:0, its tokens, and a person answering
//! through lev's API with the Rust SDK.

use std::time::{Duration, Instant};

use lev_client::{Client, ListQuery, StatusFilter};
use lev_protocol::api::{Role, TokenCreate};
use lev_protocol::{Interaction, InteractionResponse, InteractionStatus};

use crate::spawned::Spawned;
use crate::support::Scratch;

/// A running `lev serve` and the tokens of its parties.
pub struct Served {
    server: Spawned,
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    /// A worker token (bound to no caller).
    pub worker: String,
    /// The admin token.
    #[allow(dead_code)]
    pub admin: String,
    /// The approver's client ("pat").
    pub approver: Client,
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
        let mut builder = Spawned::builder(env!("CARGO_BIN_EXE_lev"), &data);
        if let Some(policy) = policy {
            builder = builder
                .arg("--policy")
                .arg(scratch.write("policy.toml", policy));
        }
        let server = builder.start().unwrap();
        let url = server.url().to_owned();
        let admin_token = server.admin_token().unwrap();
        let admin = Client::new(&url, Some(admin_token.clone())).unwrap();
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
            server,
            url,
            worker,
            admin: admin_token,
            approver,
            _scratch: scratch,
        }
    }

    /// The server's log so far.
    pub fn log(&self) -> String {
        self.server.log()
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

/// A free-text answer.
pub fn text(interaction: &Interaction, value: &str) -> InteractionResponse {
    InteractionResponse::text(interaction.id(), value)
}

/// A multiple-choice answer.
pub fn choice(interaction: &Interaction, index: usize) -> InteractionResponse {
    InteractionResponse::choice(interaction.id(), index)
}
