//! `lev bench chaos`: crash consistency under load. Workers create, answer,
//! gate (allowed by a rule, and asked then approved for the session, which
//! makes a grant), spend nonces and spawn sub-agents (through a real
//! operator on the WebSocket, whose sub-agents post their results over HTTP)
//! against `lev serve`, while it is killed
//! with SIGKILL at random instants and restarted on the same data dir and
//! port, again and again. Every acknowledged write goes into a ledger kept
//! here, outside lev; after each restart the harness checks that every
//! acknowledged create, answer, gate decision, grant, spent nonce, task
//! result and finished spawn is there exactly once, that no interaction was
//! answered twice and no task took two results, and that the audit chain
//! verifies. Any response other than the expected ones (a 5xx, a
//! refusal of a valid request) fails the run at once.
//!
//! The load goes on while a server is down and while it restarts, so the
//! others (and the restarted one) serve under it. With `--database
//! postgres://... --replicas N`, N replicas share the database; each kill
//! takes a random replica while the others keep serving, and the checks go
//! through another replica. With `--postgres-crash CMD` as well, every
//! fourth round crashes PostgreSQL itself under the load instead (CMD, run
//! by `sh -c`, stops it as a crash would and starts it again, e.g.
//! `pg_ctlcluster 15 main restart -m immediate`); the replicas reconnect by
//! themselves.
//!
//! Its modules, each using only those after it: `mod.rs` (here: the flags,
//! the servers, the rounds of kills), `work` (the workers' load and the
//! spawn session's operator), `check` (what is checked after each restart),
//! `ledger` (what was acknowledged).

mod check;
mod ledger;
mod work;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::{Context as _, bail};
use lev_approval::TrustedKeys;
use lev_client::Client;
use lev_client::operator::{Operator, OperatorError, Session, Stopped};
use lev_protocol::api::{Role, TokenCreate};
use tokio::time::Instant;

use super::spawned::Spawned;
use check::check;
use ledger::{Ledger, Shared, ledger, unacknowledged};
use work::{ChaosOperator, spawn_session, work};

/// The server's policy: reads are allowed, deploys ask.
const POLICY: &str = "[[rule]]\ntool = \"fs.read\"\ndecision = \"allow\"\nreason = \"chaos: reads are allowed\"\n\n[[rule]]\ntool = \"deploy\"\ndecision = \"ask\"\nreason = \"chaos: deploys ask\"\n";

/// `lev bench chaos` flags.
#[derive(Debug, Clone, clap::Args)]
pub struct ChaosArgs {
    /// How many times the server is killed.
    #[arg(long, default_value_t = 50, value_name = "N")]
    kills: usize,
    /// Concurrent workers.
    #[arg(long, default_value_t = 8, value_name = "N")]
    workers: usize,
    /// The longest run between two kills, in milliseconds (each is random,
    /// from a tenth of it up to it).
    #[arg(long, default_value_t = 2000, value_name = "MS")]
    max_run_ms: u64,
    /// With --database: a command (run by `sh -c`) that crashes PostgreSQL
    /// and starts it again; every fourth round runs it under the load
    /// instead of killing a replica.
    #[arg(long, value_name = "CMD")]
    postgres_crash: Option<String>,
}

/// Run `command` (by `sh -c`), which crashes PostgreSQL and starts it again.
async fn crash_postgres(command: &str) -> anyhow::Result<()> {
    // Killed if the bench is stopped meanwhile.
    let out = tokio::process::Command::new("sh")
        .arg("-c")
        .arg(command)
        .kill_on_drop(true)
        .output()
        .await
        .context("running --postgres-crash")?;
    succeeded(&out).with_context(|| format!("--postgres-crash `{command}` failed"))
}

/// Whether a command that ran succeeded: else its exit status and output.
fn succeeded(out: &std::process::Output) -> anyhow::Result<()> {
    if !out.status.success() {
        bail!(
            "exit {}: {}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(())
}

/// Run `lev audit --verify` against `url` with `admin`'s token: with the
/// head saved last time (`--head`) when there is one, saving the new one.
async fn audit_verify(
    exe: &std::path::Path,
    url: &str,
    admin: &Client,
    head: &std::path::Path,
) -> anyhow::Result<()> {
    let mut cmd = tokio::process::Command::new(exe);
    // Killed if the bench is stopped meanwhile.
    cmd.kill_on_drop(true)
        .args(["audit", "--verify", "--url", url])
        .env("LEV_TOKEN", admin.token().unwrap_or_default())
        .arg("--save-head")
        .arg(head);
    if head.exists() {
        cmd.arg("--head").arg(head);
    }
    let out = cmd.output().await.context("running lev audit --verify")?;
    succeeded(&out)
}

/// Wait (up to a minute) until `admin`'s server reads its store again.
async fn ready(admin: &Client) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        match admin.grants().await {
            Ok(_) => return Ok(()),
            Err(e) if unacknowledged(&e) && Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => bail!("the server does not read its store again: {e}"),
        }
    }
}

/// The servers under test: one on SQLite, or replicas on one PostgreSQL
/// database, each on a port of its own that it keeps across restarts.
struct Fleet {
    exe: std::path::PathBuf,
    dirs: Vec<std::path::PathBuf>,
    listens: Vec<String>,
    flags: Vec<std::ffi::OsString>,
    running: Vec<Spawned>,
}

impl Fleet {
    /// `replicas` servers (at least one) in `data`, each with the chaos
    /// policy, on `database` when given (sealed with `kek`, or a new
    /// key-encryption key).
    fn start(
        data: &std::path::Path,
        database: Option<&str>,
        kek: Option<std::path::PathBuf>,
        replicas: usize,
    ) -> anyhow::Result<Self> {
        let mut flags: Vec<std::ffi::OsString> = Vec::new();
        if let Some(url) = database {
            let kek = match kek {
                Some(file) => file,
                None => {
                    let file = data.join("kek");
                    let key = lev_server::Kek::generate_base64().map_err(anyhow::Error::msg)?;
                    std::fs::write(&file, key).context("writing the key-encryption key")?;
                    file
                }
            };
            flags.extend([
                "--database".into(),
                url.into(),
                "--key-encryption-key-file".into(),
            ]);
            flags.push(kek.into_os_string());
        }
        let mut fleet = Self {
            exe: std::env::current_exe().context("finding the lev binary")?,
            dirs: Vec::new(),
            listens: Vec::new(),
            flags,
            running: Vec::new(),
        };
        for r in 0..replicas.max(1) {
            let dir = data.join(format!("replica-{r}"));
            std::fs::create_dir_all(&dir).context("making a data dir")?;
            std::fs::write(dir.join("policy.toml"), POLICY).context("writing the policy")?;
            let port = std::net::TcpListener::bind("127.0.0.1:0")?
                .local_addr()?
                .port();
            fleet.dirs.push(dir);
            fleet.listens.push(format!("127.0.0.1:{port}"));
        }
        for r in 0..fleet.dirs.len() {
            let started = fleet.start_one(r)?;
            fleet.running.push(started);
        }
        Ok(fleet)
    }

    fn start_one(&self, r: usize) -> anyhow::Result<Spawned> {
        Ok(Spawned::builder(&self.exe, &self.dirs[r])
            .listen(&self.listens[r])
            .args(self.flags.iter().cloned())
            .start()?)
    }

    /// The admin token a server wrote; on a database used before, where no
    /// replica made one, one the bench writes into the database.
    async fn admin_token(&self, database: Option<&str>) -> anyhow::Result<String> {
        if let Some(token) = self.running.iter().find_map(|s| s.admin_token().ok()) {
            return Ok(token);
        }
        let Some(url) = database else {
            bail!("the server wrote no admin token");
        };
        let suffix = std::process::id();
        Ok(lev_server::create_token_in_database(
            url,
            TokenCreate {
                name: format!("chaos-admin-{suffix}"),
                role: Role::Admin,
                caller: None,
                sessions: None,
            },
        )
        .await
        .map_err(anyhow::Error::msg)?
        .token)
    }
}

async fn token(
    admin: &Client,
    name: &str,
    role: Role,
    sessions: Option<Vec<String>>,
) -> anyhow::Result<Client> {
    let created = admin
        .create_token(&TokenCreate {
            name: name.into(),
            role,
            caller: None,
            sessions,
        })
        .await?;
    Ok(admin.with_token(Some(created.token)))
}

/// Run the chaos mode.
///
/// # Errors
/// The first acknowledged write found lost or doubled, a wrong answer, a
/// server that does not come back.
pub async fn chaos(
    args: &ChaosArgs,
    database: Option<&str>,
    replicas: usize,
    kek: Option<std::path::PathBuf>,
) -> anyhow::Result<()> {
    if args.postgres_crash.is_some() && database.is_none() {
        bail!("--postgres-crash: expected --database postgres://... (it crashes that database)");
    }
    let data = tempfile::Builder::new()
        .prefix("lev-chaos-")
        .tempdir()
        .context("making a temporary data dir")?;
    let fleet = Fleet::start(data.path(), database, kek, replicas)?;
    let urls: Vec<String> = fleet.running.iter().map(|s| s.url().to_owned()).collect();
    let admin = Client::new(&urls[0], Some(fleet.admin_token(database).await?))?;
    let tag = std::process::id();
    let worker = token(&admin, &format!("chaos-worker-{tag}"), Role::Worker, None).await?;
    let approver = token(
        &admin,
        &format!("chaos-approver-{tag}"),
        Role::Approver,
        None,
    )
    .await?;
    let operator = token(
        &admin,
        &format!("chaos-operator-{tag}"),
        Role::Operator,
        Some(vec![spawn_session(tag)]),
    )
    .await?;
    let keys = TrustedKeys::parse(&serde_json::to_string(&admin.keys().await?)?)?;
    let mut run = Run {
        args,
        database,
        fleet,
        urls,
        admin,
        worker,
        approver,
        keys,
        shared: Arc::default(),
        tag,
        head: data.path().join("audit-head.json"),
        next: XorShift(u64::from(tag) ^ 0x9e37_79b9_7f4a_7c15),
        from: [0; 6],
        crashes: 0,
    };
    // Dropped (and so stopped) when this function returns, however.
    let mut operator_task = run.start_operator(&operator)?;
    let t0 = Instant::now();
    for kill in 0..args.kills {
        run.round(kill).await?;
    }
    // A last check of everything, from the start.
    let mut book = std::mem::take(&mut *ledger(&run.shared));
    check(&run.admin, &run.worker, &run.keys, &mut book, [0; 6])
        .await
        .context("the final check")?;
    operator_task.abort_all();
    run.summary(&book, t0.elapsed());
    drop(run);
    Ok(())
}

/// xorshift: the random instants, down times and victims of a run.
struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// A chaos run under way: its servers, its clients, the ledger.
struct Run<'a> {
    args: &'a ChaosArgs,
    database: Option<&'a str>,
    fleet: Fleet,
    urls: Vec<String>,
    admin: Client,
    worker: Client,
    approver: Client,
    keys: TrustedKeys,
    shared: Shared,
    tag: u32,
    /// The audit head `lev audit --verify` saved last.
    head: std::path::PathBuf,
    next: XorShift,
    /// Where the next check starts in the ledger's lists.
    from: [usize; 6],
    /// Rounds that crashed PostgreSQL instead of killing a replica.
    crashes: usize,
}

impl Run<'_> {
    /// `client`'s token, against replica `r` (modulo their number).
    fn on(&self, client: &Client, r: usize) -> anyhow::Result<Client> {
        Ok(Client::new(
            &self.urls[r % self.urls.len()],
            client.token().map(str::to_owned),
        )?)
    }

    /// The spawn session's operator, on the last replica: it reconnects by
    /// itself after each kill.
    fn start_operator(
        &self,
        operator: &Client,
    ) -> anyhow::Result<tokio::task::JoinSet<Result<Stopped, OperatorError>>> {
        let operator = Operator::from_client(
            &self.on(operator, self.urls.len().saturating_sub(1))?,
            &spawn_session(self.tag),
        )
        .with_backoff(Duration::from_millis(20), Duration::from_millis(200));
        let handler = Arc::new(ChaosOperator {
            client: self.on(&self.worker, 0)?,
            shared: Arc::clone(&self.shared),
        });
        let mut task = tokio::task::JoinSet::new();
        task.spawn(async move { operator.run(handler).await });
        Ok(task)
    }

    /// Round `kill`: the workers' load, a kill (or a crash of PostgreSQL)
    /// under it, then every acknowledged write checked.
    async fn round(&mut self, kill: usize) -> anyhow::Result<()> {
        let stop = Arc::new(AtomicBool::new(false));
        let mut tasks = tokio::task::JoinSet::new();
        for w in 0..self.args.workers {
            // Asking on one replica, answered on the next.
            tasks.spawn(work(
                w,
                format!("{}-{kill}", self.tag),
                self.on(&self.worker, w)?,
                self.on(&self.approver, w + 1)?,
                Session::new(&self.on(&self.worker, w + 2)?, &spawn_session(self.tag)),
                self.keys.clone(),
                Arc::clone(&self.shared),
                Arc::clone(&stop),
            ));
        }
        let (what, run, victim) = self.strike(kill).await?;
        stop.store(true, Ordering::Relaxed);
        while let Some(joined) = tasks.join_next().await {
            joined.context("a worker task")??;
        }
        // Checked through another replica than the one that died, if any,
        // once it reaches the store again.
        self.check_through((victim + 1) % self.urls.len(), kill)
            .await?;
        let l = ledger(&self.shared);
        eprintln!(
            "lev bench chaos: kill {} ({what}) after {run} ms: {} created, {} answered, {} gated, {} nonces spent, {} grants, {} task results, {} spawns acknowledged so far; all there",
            kill + 1,
            l.created.len(),
            l.answered.len(),
            l.gated.len(),
            l.spent.len(),
            l.granted.len(),
            l.results.len(),
            l.spawned.len()
        );
        Ok(())
    }

    /// At a random instant, from a tenth of --max-run-ms up to it: a random
    /// replica killed, down for a random time up to half as long, under the
    /// load; or every fourth round with --postgres-crash, PostgreSQL
    /// crashed. What was struck, after how many ms, and the replica drawn.
    async fn strike(&mut self, kill: usize) -> anyhow::Result<(String, u64, usize)> {
        let max = self.args.max_run_ms.max(10);
        let run = max / 10 + self.next.next() % (max - max / 10 + 1);
        let down = self.next.next() % (run / 2 + 1);
        let replicas = self.urls.len();
        let victim = usize::try_from(self.next.next() % replicas as u64).unwrap_or(0);
        tokio::time::sleep(Duration::from_millis(run)).await;
        let crash = match &self.args.postgres_crash {
            Some(command) if self.database.is_some() && kill % 4 == 3 => Some(command.clone()),
            _ => None,
        };
        let what = if let Some(command) = crash {
            crash_postgres(&command)
                .await
                .with_context(|| format!("crashing PostgreSQL at round {}", kill + 1))?;
            self.crashes += 1;
            "PostgreSQL".to_owned()
        } else {
            self.fleet.running[victim].kill();
            tokio::time::sleep(Duration::from_millis(down)).await;
            self.fleet.running[victim] = self
                .fleet
                .start_one(victim)
                .with_context(|| format!("restarting replica {victim} after kill {}", kill + 1))?;
            format!("replica {victim}")
        };
        Ok((what, run, victim))
    }

    /// Every write acknowledged since the last check, checked through
    /// replica `through` once it reads its store again; then `lev audit
    /// --verify`.
    async fn check_through(&mut self, through: usize, kill: usize) -> anyhow::Result<()> {
        ready(&self.on(&self.admin, through)?).await?;
        let mut book = std::mem::take(&mut *ledger(&self.shared));
        let checked = check(
            &self.on(&self.admin, through)?,
            &self.on(&self.worker, through)?,
            &self.keys,
            &mut book,
            self.from,
        )
        .await;
        *ledger(&self.shared) = book;
        self.from = checked.with_context(|| format!("after kill {}", kill + 1))?;
        // And as a person would: `lev audit --verify`, holding the head it
        // saw last time, so a chain cut short and re-signed would show.
        audit_verify(
            &self.fleet.exe,
            &self.urls[through],
            &self.admin,
            &self.head,
        )
        .await
        .with_context(|| format!("lev audit --verify after kill {}", kill + 1))
    }

    /// The run's last line.
    fn summary(&self, book: &Ledger, took: Duration) {
        let on_what = match (self.database, self.urls.len()) {
            (None, _) => "SQLite".to_owned(),
            (Some(_), n) => format!("PostgreSQL, {n} replicas"),
        };
        let kills = if self.crashes == 0 {
            format!("{} SIGKILLs", self.args.kills)
        } else {
            format!(
                "{} SIGKILLs and {} PostgreSQL crashes",
                self.args.kills - self.crashes,
                self.crashes
            )
        };
        println!(
            "chaos: {kills} in {:.0} s ({on_what}), {} workers: {} creates, {} answers, {} gate decisions, {} nonces spent, {} session grants, {} task results, {} spawns acknowledged; {} checks after restarts; nothing acknowledged lost or doubled, the audit chain verifies",
            took.as_secs_f64(),
            self.args.workers,
            book.created.len(),
            book.answered.len(),
            book.gated.len(),
            book.spent.len(),
            book.granted.len(),
            book.results.len(),
            book.spawned.len(),
            book.checked,
        );
    }
}
