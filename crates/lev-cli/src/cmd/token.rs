//! `lev token create|ls|revoke`: API tokens (admin).

use std::process::ExitCode;

use anyhow::Context as _;
use clap::{Subcommand, ValueEnum};
use lev_protocol::api::{Role, TokenCreate};

use crate::connect::{ClientArgs, runtime};
use crate::term::{self, Style};

/// API tokens: who may ask, answer, operate or administer (needs an admin token).
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: TokenCommand,
}

#[derive(Debug, Subcommand)]
enum TokenCommand {
    /// Make a token and print its secret (shown this once; only its hash is
    /// stored). An approver's or admin's dashboard login URL is printed too.
    ///
    /// Examples: lev token create alice --role approver
    ///           lev token create main-ai --role operator --sessions 'ci-*,build-7'
    Create {
        /// The token's name: the identity written into signed decisions.
        /// Names lev writes itself (policy, timeout, system, operator, lev,
        /// person:..., group:..., task:...) are refused, and so is a name
        /// that reads like one of them or like an existing token's: names
        /// are compared ignoring case and the . _ : - at their ends or
        /// between words (OPS, ops. and ops read alike).
        name: String,
        /// What the token may do.
        #[arg(long, value_enum)]
        role: RoleArg,
        /// Bind a worker token to one caller: its requests act for that
        /// person, and may not name another.
        #[arg(long, value_name = "CALLER")]
        caller: Option<String>,
        /// The sessions the token may act in, comma-separated patterns
        /// (`*` matches any run of characters; '*' for every session).
        /// Required for operator tokens; optional for workers.
        #[arg(long, value_name = "PATTERNS", value_delimiter = ',')]
        sessions: Option<Vec<String>>,
        /// Print JSON: {"name", "role", "token", "login_url"}.
        #[arg(long)]
        json: bool,
        /// Write the token straight into the PostgreSQL database that
        /// servers share (a postgres:// URL), with no server running: the
        /// first admin of a new deployment, or a way back in. Not read from
        /// the environment.
        #[arg(long, value_name = "URL")]
        database: Option<String>,
        #[command(flatten)]
        client: ClientArgs,
    },
    /// List tokens (names, roles, callers; never secrets).
    #[command(alias = "list")]
    Ls {
        /// Print JSON: an array of {"name", "role", "caller", "sessions", "created_at"}.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        client: ClientArgs,
    },
    /// Revoke a token; it stops working at once.
    Revoke {
        /// The token's name.
        name: String,
        #[command(flatten)]
        client: ClientArgs,
    },
}

/// `--role`.
#[derive(Debug, Clone, Copy, ValueEnum)]
enum RoleArg {
    /// Creates interactions, calls the gate, waits (an agent run).
    Worker,
    /// Connects as a session's operator (a supervising AI).
    Operator,
    /// Answers interactions (a person).
    Approver,
    /// May do everything.
    Admin,
}

impl From<RoleArg> for Role {
    fn from(r: RoleArg) -> Self {
        match r {
            RoleArg::Worker => Self::Worker,
            RoleArg::Operator => Self::Operator,
            RoleArg::Approver => Self::Approver,
            RoleArg::Admin => Self::Admin,
        }
    }
}

/// Run `lev token`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let style = Style::stdout();
    match args.command {
        TokenCommand::Create {
            name,
            role,
            caller,
            sessions,
            json,
            database,
            client,
        } => {
            let role = Role::from(role);
            let req = TokenCreate {
                name,
                role,
                caller,
                sessions: sessions.map(|list| {
                    list.into_iter()
                        .map(|p| p.trim().to_owned())
                        .filter(|p| !p.is_empty())
                        .collect()
                }),
            };
            create(req, json, database, client, style)?;
        }
        TokenCommand::Ls { json, client } => ls(json, client, style)?,
        TokenCommand::Revoke { name, client } => {
            let client = client.client()?;
            runtime()?
                .block_on(client.revoke_token(&name))
                .with_context(|| format!("token revoke {}", term::one_line(&name)))?;
            println!("revoked token {}", style.bold(&term::one_line(&name)));
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `lev token create`: through the API, or written into `database`.
fn create(
    req: TokenCreate,
    json: bool,
    database: Option<String>,
    client: ClientArgs,
    style: Style,
) -> anyhow::Result<()> {
    let name = req.name.clone();
    let role = req.role;
    let context = || format!("token create {}", term::one_line(&name));
    let (created, base) = match database {
        Some(url) => {
            let created = runtime()?
                .block_on(lev_server::create_token_in_database(&url, req))
                .map_err(|message| anyhow::anyhow!(message))
                .with_context(context)?;
            (created, None)
        }
        None => {
            let client = client.client()?;
            let created = runtime()?
                .block_on(client.create_token(&req))
                .with_context(context)?;
            (created, Some(client.base_url().to_owned()))
        }
    };
    let dashboard = matches!(role, Role::Approver | Role::Admin);
    let login_url = base
        .filter(|_| dashboard)
        .map(|base| format!("{base}/#token={}", created.token));
    if json {
        let out = serde_json::json!({
            "name": created.name,
            "role": created.role,
            "token": created.token,
            "login_url": login_url,
        });
        crate::out::print_json(&out)?;
    } else {
        println!(
            "created {} token {}",
            created.role.as_str(),
            style.bold(&term::one_line(&created.name))
        );
        println!("secret (shown once): {}", created.token);
        if let Some(url) = login_url {
            println!("dashboard login: {url}");
        } else if dashboard {
            println!(
                "dashboard login: any server's URL followed by /#token={}",
                created.token
            );
        }
    }
    Ok(())
}

/// `lev token ls`.
fn ls(json: bool, client: ClientArgs, style: Style) -> anyhow::Result<()> {
    let client = client.client()?;
    let tokens = runtime()?
        .block_on(client.list_tokens())
        .context("token ls")?;
    if json {
        crate::out::print_json(&tokens)?;
    } else {
        let width = tokens
            .iter()
            .map(|t| term::one_line(&t.name).chars().count())
            .max()
            .unwrap_or(4)
            .max(4);
        println!(
            "{}",
            style.bold(&format!(
                "{:<width$}  {:<8}  {:<16}  {:<20}  CREATED",
                "NAME", "ROLE", "CALLER", "SESSIONS"
            ))
        );
        for t in &tokens {
            let sessions = t.sessions.as_ref().map_or_else(
                || {
                    if t.role == Role::Operator {
                        "(none)".to_owned()
                    } else {
                        "*".to_owned()
                    }
                },
                |s| s.join(","),
            );
            println!(
                "{:<width$}  {:<8}  {:<16}  {:<20}  {}",
                term::one_line(&t.name),
                t.role.as_str(),
                term::one_line(t.caller.as_deref().unwrap_or("-")),
                term::one_line(&sessions),
                term::rfc3339(Some(t.created_at))
            );
        }
    }
    Ok(())
}
