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

use std::collections::{HashMap, HashSet};

/// A pause after a request the server did not acknowledge (it is down).
const BACK_OFF: Duration = Duration::from_millis(20);
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use anyhow::{Context as _, bail};
use lev_approval::{TrustedKeys, verify};
use lev_client::Client;
use lev_client::operator::{
    Ask, Hook, HookDecision, Operator, OperatorHandler, Session, SpawnOrder, SpawnOutcome,
    post_worker_result,
};
use lev_protocol::api::{GateRequest, GateResponse, Role, TaskStatus, TokenCreate};
use lev_protocol::{
    ApprovalScope, InteractionKind, InteractionRequest, InteractionResponse, WorkerResult,
};
use lev_test_support::Spawned;
use tokio::time::Instant;

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

/// What the server acknowledged, kept outside it.
#[derive(Debug, Default)]
struct Ledger {
    created: Vec<String>,
    answered: HashMap<String, String>,
    /// Gate calls allowed, with the nonce of the signed decision given.
    gated: Vec<(GateRequest, String)>,
    spent: Vec<String>,
    /// Session ids given a session grant for `deploy`.
    granted: Vec<String>,
    /// Results a sub-agent posted (`POST /v1/worker/result`), by task.
    results: Vec<(String, serde_json::Value)>,
    /// Spawns that finished (200), with the result they returned.
    spawned: Vec<(String, serde_json::Value)>,
    /// How many acknowledged writes were checked, in all.
    checked: usize,
    /// A wrong answer met outside a worker's loop (the operator's).
    wrong: Option<String>,
}

type Shared = Arc<Mutex<Ledger>>;

fn ledger(shared: &Shared) -> std::sync::MutexGuard<'_, Ledger> {
    shared.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Whether an error means "not acknowledged" (the server went away, or is
/// going away) rather than a wrong answer.
fn unacknowledged(e: &lev_client::Error) -> bool {
    match e.status() {
        None => true,
        Some(status) => status == 503,
    }
}

fn gate_call(session: &str, tool: &str, n: usize, w: usize) -> GateRequest {
    let (args, caps) = if tool == "deploy" {
        (
            format!(r#"{{"service":"svc-{w}","build":{n}}}"#),
            vec!["net".to_owned()],
        )
    } else {
        (
            format!(r#"{{"path":"/srv/data/file-{n}.txt"}}"#),
            vec!["fs-read".to_owned()],
        )
    };
    GateRequest {
        session_id: session.to_owned(),
        conversation_id: session.to_owned(),
        turn_id: format!("t-{n}"),
        request_id: format!("{session}-{tool}-{n}"),
        caller: "chaos".into(),
        tool_name: tool.into(),
        args_json: args,
        sandbox_mode: "read-only".into(),
        required_capabilities: caps,
        timeout_s: Some(3600),
        route: None,
        reason: None,
    }
}

/// The session whose operator runs the chaos run's spawns.
fn spawn_session(tag: u32) -> String {
    format!("chaos-spawn-{tag}")
}

/// The operator of the spawn session: lets every spawn run, and runs it as
/// a sub-agent would, posting the task's result over HTTP with the task's
/// token (recorded once acknowledged); the spawn's own result is that one.
#[derive(Debug)]
struct ChaosOperator {
    client: Client,
    shared: Shared,
}

impl OperatorHandler for ChaosOperator {
    async fn ask(&self, ask: Ask) -> serde_json::Value {
        serde_json::json!({"echo": ask.question})
    }

    async fn hook_before(&self, _hook: Hook) -> HookDecision {
        HookDecision::Allow
    }

    async fn spawn(&self, order: SpawnOrder) -> SpawnOutcome {
        let value = serde_json::json!({"ran": order.spawn, "task": order.task_id});
        let result = WorkerResult {
            task_id: order.task_id.clone(),
            value: value.clone(),
            ok: true,
            error: None,
            output_tail: Some(format!("sub-agent of {}", order.task_id)),
        };
        match post_worker_result(&order.sub_agent(&self.client), &result).await {
            Ok(_) => ledger(&self.shared).results.push((order.task_id, value)),
            // Re-sent after a reconnect: the first post was acknowledged.
            Err(e) if e.code() == Some("task_finished") => {}
            Err(e) if unacknowledged(&e) => {}
            Err(e) => {
                let mut l = ledger(&self.shared);
                l.wrong
                    .get_or_insert(format!("worker result of {}: {e}", order.task_id));
            }
        }
        SpawnOutcome::deferred()
    }
}

/// One worker's loop, until `stop`: returns at the first wrong answer.
#[allow(clippy::too_many_arguments)]
async fn work(
    w: usize,
    epoch: String,
    worker: Client,
    approver: Client,
    spawner: Session,
    keys: TrustedKeys,
    shared: Shared,
    stop: Arc<AtomicBool>,
) -> anyhow::Result<()> {
    let session = format!("chaos-{epoch}-{w}");
    let epoch = epoch.replace('-', "_");
    let mut n = 0usize;
    while !stop.load(Ordering::Relaxed) {
        n += 1;
        // A question, and its answer.
        let id = format!("ir_chaos_{epoch}_{w}_{n}");
        let mut q = InteractionRequest::new(
            session.clone(),
            InteractionKind::FreeText {
                prompt: format!("question {n}"),
            },
        );
        q.id = Some(id.clone());
        match worker.create_interaction(&q).await {
            Ok(_) => ledger(&shared).created.push(id.clone()),
            Err(e) if unacknowledged(&e) => {
                tokio::time::sleep(BACK_OFF).await;
                continue;
            }
            Err(e) => bail!("create {id}: {e}"),
        }
        let value = format!("answer {epoch}/{w}/{n}");
        match approver
            .respond(&id, &InteractionResponse::text(id.clone(), value.clone()))
            .await
        {
            Ok(_) => {
                ledger(&shared).answered.insert(id.clone(), value);
            }
            Err(e) if unacknowledged(&e) => {
                tokio::time::sleep(BACK_OFF).await;
                continue;
            }
            Err(e) => bail!("respond {id}: {e}"),
        }
        // A call a rule allows: a signed decision, and its nonce spent.
        let call = gate_call(&session, "fs.read", n, w);
        let nonce = match worker.gate(&call).await {
            Ok(GateResponse::Allow { approval }) => {
                let verified = verify(&approval, &keys, time::OffsetDateTime::now_utc())
                    .with_context(|| format!("gate {}: the approval", call.request_id))?;
                let nonce = verified.payload.nonce;
                ledger(&shared).gated.push((call.clone(), nonce.clone()));
                nonce
            }
            Ok(other) => bail!("gate {}: expected allow, found {other:?}", call.request_id),
            Err(e) if unacknowledged(&e) => {
                tokio::time::sleep(BACK_OFF).await;
                continue;
            }
            Err(e) => bail!("gate {}: {e}", call.request_id),
        };
        match worker.consume_nonce(&nonce).await {
            Ok(()) => ledger(&shared).spent.push(nonce),
            Err(e) if unacknowledged(&e) => {
                tokio::time::sleep(BACK_OFF).await;
                continue;
            }
            Err(e) => bail!("consume {nonce}: {e}"),
        }
        // Now and then a sub-agent, spawned through the session's operator.
        if n % 4 == 2 {
            let order = serde_json::json!({"worker": w, "n": n, "epoch": epoch});
            match spawner.spawn(order, Some(Duration::from_secs(5))).await {
                Ok(done) if done.ok => ledger(&shared).spawned.push((done.task_id, done.value)),
                Ok(done) => bail!("spawn {}: failed: {:?}", done.task_id, done.error),
                Err(e) if unacknowledged(&e) => {
                    tokio::time::sleep(BACK_OFF).await;
                    continue;
                }
                // The operator has not reconnected since the restart, or its
                // connection went with the server that held the spawn.
                Err(e) if matches!(e.code(), Some("timeout" | "spawn_failed")) => {}
                Err(e) => bail!("spawn: {e}"),
            }
        }
        // Now and then a deploy that asks, approved for the session: a grant.
        if n % 8 == 1 {
            let call = gate_call(&session, "deploy", n, w);
            match worker.gate(&call).await {
                Ok(GateResponse::Ask { interaction_id }) => {
                    let approve = InteractionResponse::approval(
                        interaction_id.clone(),
                        true,
                        ApprovalScope::Session,
                    );
                    match approver.respond(&interaction_id, &approve).await {
                        Ok(_) => ledger(&shared).granted.push(session.clone()),
                        Err(e) if unacknowledged(&e) => {
                            tokio::time::sleep(BACK_OFF).await;
                            continue;
                        }
                        Err(e) if e.code() == Some("already_answered") => {}
                        Err(e) => bail!("approve {interaction_id}: {e}"),
                    }
                }
                // A grant from an earlier round covers it.
                Ok(GateResponse::Allow { .. }) => {}
                Ok(other) => bail!("gate {}: found {other:?}", call.request_id),
                Err(e) if unacknowledged(&e) => {
                    tokio::time::sleep(BACK_OFF).await;
                    continue;
                }
                Err(e) => bail!("gate {}: {e}", call.request_id),
            }
        }
    }
    Ok(())
}

/// Check what was acknowledged since `from` (indices into the ledger's
/// lists; maps are checked whole): returns the new `from`.
async fn check(
    admin: &Client,
    worker: &Client,
    keys: &TrustedKeys,
    ledger: &mut Ledger,
    from: [usize; 6],
) -> anyhow::Result<[usize; 6]> {
    if let Some(wrong) = &ledger.wrong {
        bail!("{wrong}");
    }
    let [
        created_from,
        spent_from,
        granted_from,
        gated_from,
        results_from,
        spawned_from,
    ] = from;
    for id in &ledger.created[created_from..] {
        let view = admin
            .get_interaction(id)
            .await
            .with_context(|| format!("acknowledged create {id} is lost"))?;
        if let Some(value) = ledger.answered.get(id) {
            let got = view.response.as_ref().and_then(|r| r.value.as_deref());
            if got != Some(value.as_str()) {
                bail!("acknowledged answer to {id} is lost: found {got:?}, expected {value:?}");
            }
        }
    }
    for nonce in &ledger.spent[spent_from..] {
        match worker.consume_nonce(nonce).await {
            Err(e) if e.code() == Some("nonce_spent") => {}
            Ok(()) => bail!("nonce {nonce} was acknowledged spent, and spent again"),
            Err(e) => bail!("nonce {nonce}: {e}"),
        }
    }
    // Every acknowledged decision is recorded: the same call under its
    // request id gets the same signed decision back.
    for (call, nonce) in &ledger.gated[gated_from..] {
        let request_id = &call.request_id;
        match worker.gate(call).await? {
            GateResponse::Allow { approval } => {
                let payload = verify(&approval, keys, time::OffsetDateTime::now_utc())?.payload;
                if &payload.nonce != nonce {
                    bail!(
                        "gate {request_id}: decided twice (nonce {} then {nonce})",
                        payload.nonce
                    );
                }
            }
            other => bail!("gate {request_id}: the recorded allow became {other:?}"),
        }
    }
    let grants = admin.grants().await?;
    let mut sessions: HashMap<&str, usize> = HashMap::new();
    for grant in grants.iter().filter(|g| g.tool_name == "deploy") {
        if let Some(conversation) = grant.conversation_id.as_deref() {
            *sessions.entry(conversation).or_default() += 1;
        }
    }
    for session in &ledger.granted[granted_from..] {
        match sessions.get(session.as_str()) {
            Some(1) => {}
            None => bail!("the acknowledged session grant of {session} is lost"),
            Some(n) => bail!("the session {session} holds {n} grants for one key"),
        }
    }
    // Every acknowledged result is the task's, and every acknowledged spawn
    // finished with the result it returned.
    for (task_id, value) in &ledger.results[results_from..] {
        let task = admin
            .get_task(task_id)
            .await
            .with_context(|| format!("the task of acknowledged result {task_id} is lost"))?;
        if posted_value(&task) != Some(value) {
            bail!(
                "the acknowledged result of {task_id} is lost: found {:?}",
                task.last_result
            );
        }
    }
    for (task_id, value) in &ledger.spawned[spawned_from..] {
        let task = admin
            .get_task(task_id)
            .await
            .with_context(|| format!("acknowledged spawn {task_id} is lost"))?;
        if task.status != TaskStatus::Succeeded || posted_value(&task) != Some(value) {
            bail!(
                "acknowledged spawn {task_id} is {:?} with {:?}, expected succeeded with {value}",
                task.status,
                task.last_result
            );
        }
    }
    // One answer per interaction, one result per task, and one chain.
    let audit = admin.audit_all().await?;
    lev_approval::audit::verify_chain(&audit.page.items, &audit.head, keys, None)
        .map_err(|e| anyhow::anyhow!("the audit chain does not verify: {e}"))?;
    let mut answered = HashSet::new();
    for entry in &audit.page.items {
        if entry.action != "interaction.answered" {
            continue;
        }
        let id = entry
            .data
            .get("id")
            .and_then(|v| v.as_str())
            .unwrap_or_default();
        if !answered.insert(id.to_owned()) {
            bail!("{id} was answered twice (audit entry {})", entry.seq);
        }
    }
    // Each acknowledged create and gate decision is in the log exactly once.
    let mut created: HashMap<&str, usize> = HashMap::new();
    let mut decided: HashMap<&str, usize> = HashMap::new();
    for entry in &audit.page.items {
        let field = |name: &str| entry.data.get(name).and_then(|v| v.as_str());
        match entry.action.as_str() {
            "interaction.created" => {
                *created.entry(field("id").unwrap_or_default()).or_default() += 1
            }
            "gate.allowed" => {
                *decided
                    .entry(field("nonce").unwrap_or_default())
                    .or_default() += 1
            }
            _ => {}
        }
    }
    for id in &ledger.created[created_from..] {
        let times = created.get(id.as_str()).copied().unwrap_or(0);
        if times != 1 {
            bail!("acknowledged create {id} is in the audit log {times} times");
        }
    }
    for (call, nonce) in &ledger.gated[gated_from..] {
        let times = decided.get(nonce.as_str()).copied().unwrap_or(0);
        if times != 1 {
            bail!(
                "the acknowledged decision of gate {} (nonce {nonce}) is in the audit log {times} times",
                call.request_id
            );
        }
    }
    let mut resulted = HashSet::new();
    for entry in audit
        .page
        .items
        .iter()
        .filter(|e| e.action == "task.result")
    {
        let id = entry
            .data
            .get("task_id")
            .or_else(|| entry.data.get("id"))
            .and_then(|v| v.as_str())
            .unwrap_or_default();
        if !resulted.insert(id.to_owned()) {
            bail!("task {id} took two results (audit entry {})", entry.seq);
        }
    }
    for (task_id, _) in &ledger.results[results_from..] {
        if !resulted.contains(task_id) {
            bail!("the acknowledged result of {task_id} is not in the audit log");
        }
    }
    ledger.checked += ledger.created.len() - created_from + ledger.spent.len() - spent_from
        + ledger.granted.len()
        - granted_from
        + ledger.gated.len()
        - gated_from
        + ledger.results.len()
        - results_from
        + ledger.spawned.len()
        - spawned_from;
    Ok([
        ledger.created.len(),
        ledger.spent.len(),
        ledger.granted.len(),
        ledger.gated.len(),
        ledger.results.len(),
        ledger.spawned.len(),
    ])
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

/// The `value` of the result a task's sub-agent posted.
fn posted_value(task: &lev_protocol::api::Task) -> Option<&serde_json::Value> {
    task.last_result.as_ref().and_then(|r| r.get("value"))
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
    fn start_one(&self, r: usize) -> anyhow::Result<Spawned> {
        Ok(Spawned::builder(&self.exe, &self.dirs[r])
            .listen(&self.listens[r])
            .args(self.flags.iter().cloned())
            .start()?)
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
    let mut flags: Vec<std::ffi::OsString> = Vec::new();
    if let Some(url) = database {
        let kek = match kek {
            Some(file) => file,
            None => {
                let file = data.path().join("kek");
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
    let mut fleet = Fleet {
        exe: std::env::current_exe().context("finding the lev binary")?,
        dirs: Vec::new(),
        listens: Vec::new(),
        flags,
        running: Vec::new(),
    };
    for r in 0..replicas.max(1) {
        let dir = data.path().join(format!("replica-{r}"));
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
    let urls: Vec<String> = fleet.running.iter().map(|s| s.url().to_owned()).collect();
    let admin_token = match fleet.running.iter().find_map(|s| s.admin_token().ok()) {
        Some(token) => token,
        None => match database {
            Some(url) => {
                let suffix = std::process::id();
                lev_server::create_token_in_database(
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
                .token
            }
            None => bail!("the server wrote no admin token"),
        },
    };
    let admin = Client::new(&urls[0], Some(admin_token))?;
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
    let on = |client: &Client, r: usize| -> anyhow::Result<Client> {
        Ok(Client::new(
            &urls[r % urls.len()],
            client.token().map(str::to_owned),
        )?)
    };
    let keys = TrustedKeys::parse(&serde_json::to_string(&admin.keys().await?)?)?;
    let shared: Shared = Arc::default();
    // The spawn session's operator, on the last replica: it reconnects by
    // itself after each kill.
    let operator = Operator::from_client(
        &on(&operator, urls.len().saturating_sub(1))?,
        &spawn_session(tag),
    )
    .with_backoff(Duration::from_millis(20), Duration::from_millis(200));
    let handler = Arc::new(ChaosOperator {
        client: on(&worker, 0)?,
        shared: Arc::clone(&shared),
    });
    // Dropped (and so stopped) when this function returns, however.
    let mut operator_task = tokio::task::JoinSet::new();
    operator_task.spawn(async move { operator.run(handler).await });
    let mut from = [0; 6];
    let t0 = Instant::now();
    let mut seed = u64::from(tag) ^ 0x9e37_79b9_7f4a_7c15;
    let replicas = urls.len();
    let mut next = move || {
        // xorshift
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let mut crashes = 0;
    let head = data.path().join("audit-head.json");
    for kill in 0..args.kills {
        let stop = Arc::new(AtomicBool::new(false));
        let mut tasks = tokio::task::JoinSet::new();
        for w in 0..args.workers {
            // Asking on one replica, answered on the next.
            tasks.spawn(work(
                w,
                format!("{tag}-{kill}"),
                on(&worker, w)?,
                on(&approver, w + 1)?,
                Session::new(&on(&worker, w + 2)?, &spawn_session(tag)),
                keys.clone(),
                Arc::clone(&shared),
                Arc::clone(&stop),
            ));
        }
        // A random instant, from a tenth of --max-run-ms up to it; a random
        // replica, down for a random time up to half as long, under the load.
        let max = args.max_run_ms.max(10);
        let run = max / 10 + next() % (max - max / 10 + 1);
        let down = next() % (run / 2 + 1);
        let victim = usize::try_from(next() % replicas as u64).unwrap_or(0);
        tokio::time::sleep(Duration::from_millis(run)).await;
        let crash = match &args.postgres_crash {
            Some(command) if database.is_some() && kill % 4 == 3 => Some(command.clone()),
            _ => None,
        };
        let what = if let Some(command) = crash {
            crash_postgres(&command)
                .await
                .with_context(|| format!("crashing PostgreSQL at round {}", kill + 1))?;
            crashes += 1;
            "PostgreSQL".to_owned()
        } else {
            fleet.running[victim].kill();
            tokio::time::sleep(Duration::from_millis(down)).await;
            fleet.running[victim] = fleet
                .start_one(victim)
                .with_context(|| format!("restarting replica {victim} after kill {}", kill + 1))?;
            format!("replica {victim}")
        };
        stop.store(true, Ordering::Relaxed);
        while let Some(joined) = tasks.join_next().await {
            joined.context("a worker task")??;
        }
        // Checked through another replica than the one that died, if any,
        // once it reaches the store again.
        let through = (victim + 1) % replicas;
        ready(&on(&admin, through)?).await?;
        let mut book = std::mem::take(&mut *ledger(&shared));
        let checked = check(
            &on(&admin, through)?,
            &on(&worker, through)?,
            &keys,
            &mut book,
            from,
        )
        .await;
        *ledger(&shared) = book;
        from = checked.with_context(|| format!("after kill {}", kill + 1))?;
        // And as a person would: `lev audit --verify`, holding the head it
        // saw last time, so a chain cut short and re-signed would show.
        audit_verify(&fleet.exe, &urls[through], &admin, &head)
            .await
            .with_context(|| format!("lev audit --verify after kill {}", kill + 1))?;
        let l = ledger(&shared);
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
    }
    // A last check of everything, from the start.
    let mut book = std::mem::take(&mut *ledger(&shared));
    check(&admin, &worker, &keys, &mut book, [0; 6])
        .await
        .context("the final check")?;
    operator_task.abort_all();
    let on_what = match (database, replicas) {
        (None, _) => "SQLite".to_owned(),
        (Some(_), n) => format!("PostgreSQL, {n} replicas"),
    };
    let kills = if crashes == 0 {
        format!("{} SIGKILLs", args.kills)
    } else {
        format!(
            "{} SIGKILLs and {crashes} PostgreSQL crashes",
            args.kills - crashes
        )
    };
    println!(
        "chaos: {kills} in {:.0} s ({on_what}), {} workers: {} creates, {} answers, {} gate decisions, {} nonces spent, {} session grants, {} task results, {} spawns acknowledged; {} checks after restarts; nothing acknowledged lost or doubled, the audit chain verifies",
        t0.elapsed().as_secs_f64(),
        args.workers,
        book.created.len(),
        book.answered.len(),
        book.gated.len(),
        book.spent.len(),
        book.granted.len(),
        book.results.len(),
        book.spawned.len(),
        book.checked,
    );
    drop(fleet);
    Ok(())
}
