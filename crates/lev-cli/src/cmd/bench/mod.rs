//! `lev bench`: the load generator. It starts `lev serve` as a child process
//! on a temporary data dir and port 0, and drives it over HTTP from this
//! process, so client and server costs are apart (both share the machine).
//!
//! - `cycles`: N workers each loop create -> respond -> wait, durable at each
//!   step; prints cycles/s and the cycle latency's p50 and p99.
//! - `gate`: N workers gating calls that a policy rule allows (signed,
//!   audited, recorded for idempotency); prints decisions/s, p50 and p99.
//! - `waiters`: N interactions with a waiter blocked on each, then all
//!   answered; prints the server's RSS while they wait and the wake latency
//!   (respond sent -> waiter woken) p50 and p99.
//! - `soak`: mixed load for N minutes, RSS, open files and latency sampled
//!   each minute (`bench_soak.rs`).
//! - `chaos`: the server killed with SIGKILL under load and restarted, again
//!   and again; every acknowledged write checked after each restart.
//!
//! With `--database postgres://...` the servers keep everything in that
//! PostgreSQL database, and `--replicas N` starts N of them on it (one
//! key-encryption key): a worker creates and waits on one replica and its
//! answer is given on the next, so `waiters` measures the cross-replica
//! wake. `gate` drives the first replica.
//!
//! Run it by hand on a release build; CI may smoke-run it with small numbers.
//! It is never a pass/fail test of speed.

use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use anyhow::{Context as _, bail};
use clap::Subcommand;
use lev_client::Client;
use lev_protocol::api::{Role, TokenCreate};
use lev_protocol::{InteractionKind, InteractionRequest, InteractionResponse, InteractionStatus};
use lev_test_support::Spawned;
use tokio::time::Instant;

/// Load generator: cycles per second, or many waiting workers.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    mode: Mode,
    /// Client runtime threads in this process.
    #[arg(long, global = true, default_value_t = 1, value_name = "N")]
    client_threads: usize,
    /// Keep everything in this PostgreSQL database (a scratch one: the
    /// bench's rows stay) instead of SQLite in a temporary data dir.
    #[arg(long, global = true, value_name = "URL")]
    database: Option<String>,
    /// How many `lev serve` replicas share the database (needs --database).
    #[arg(long, global = true, default_value_t = 1, value_name = "N")]
    replicas: usize,
    /// With --database: the key-encryption key the database's signing key
    /// is sealed with (from an earlier run on it); unset, a new one, which
    /// needs a database no server has used.
    #[arg(long, global = true, value_name = "FILE")]
    key_encryption_key_file: Option<std::path::PathBuf>,
}

#[derive(Debug, Subcommand)]
enum Mode {
    /// N concurrent workers, each looping create -> respond -> wait.
    Cycles {
        /// Concurrent workers.
        #[arg(long, default_value_t = 64, value_name = "N")]
        workers: usize,
        /// Seconds measured, after the warm-up.
        #[arg(long, default_value_t = 10, value_name = "SECS")]
        duration: u64,
        /// Seconds run before measuring.
        #[arg(long, default_value_t = 2, value_name = "SECS")]
        warmup: u64,
    },
    /// The gate's allow path: N workers gating calls a policy rule allows
    /// (signed, audited, recorded); decisions/s and latency.
    Gate(super::bench_gate::GateArgs),
    /// Crash consistency: the server killed with SIGKILL under load, again
    /// and again, every acknowledged write checked after each restart.
    /// With --database and --replicas, a random replica each time.
    Chaos(super::bench_chaos::ChaosArgs),
    /// A bounded soak: mixed load (cycles, gate, operator asks, event
    /// streams that connect and drop) for N minutes, with the server's RSS,
    /// open files and each operation's latency sampled every minute.
    Soak(super::bench_soak::SoakArgs),
    /// N workers blocked in wait at once; then every one answered.
    Waiters {
        /// Waiting workers.
        #[arg(long, default_value_t = 10_000, value_name = "N")]
        count: usize,
        /// Concurrent creates and responds.
        #[arg(long, default_value_t = 64, value_name = "N")]
        concurrency: usize,
    },
}

/// Run `lev bench`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let limit = raise_open_files();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(args.client_threads.max(1))
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let policy = match &args.mode {
        Mode::Gate(_) | Mode::Soak(_) => Some(super::bench_gate::POLICY),
        _ => None,
    };
    if args.replicas == 0 || (args.replicas > 1 && args.database.is_none()) {
        bail!(
            "--replicas {}: expected 1, or more with --database postgres://... (replicas share \
             a PostgreSQL database)",
            args.replicas
        );
    }
    // SIGINT, SIGTERM and SIGHUP stop the bench: what it was doing is
    // dropped, so every server it started is killed and its data dir removed
    // (and a server whose bench died anyway stops when its stdin closes).
    let mut signals = rt
        .block_on(async { crate::signals::Terminating::new() })
        .context("listening for signals")?;
    if let Mode::Chaos(chaos) = &args.mode {
        let run = super::bench_chaos::chaos(
            chaos,
            args.database.as_deref(),
            args.replicas,
            args.key_encryption_key_file,
        );
        return match until_signal(&rt, &mut signals, run) {
            Ok(done) => done.map(|()| ExitCode::SUCCESS),
            Err(code) => Ok(code),
        };
    }
    let started = Servers::start(
        policy,
        args.database.as_deref(),
        args.replicas,
        args.key_encryption_key_file,
    );
    let server = match until_signal(&rt, &mut signals, started) {
        Ok(server) => server?,
        Err(code) => return Ok(code),
    };
    for (child, url) in server.children.iter().zip(&server.urls) {
        eprintln!(
            "lev bench: server pid {} at {url} (open-file limit {limit})",
            child.pid()
        );
    }
    let result = until_signal(&rt, &mut signals, async {
        let admin = Client::new(&server.urls[0], Some(server.admin_token.clone()))?;
        let worker = token(&admin, &server.name("bench-worker"), Role::Worker).await?;
        let approver = token(&admin, &server.name("bench-approver"), Role::Approver).await?;
        match args.mode {
            Mode::Cycles {
                workers,
                duration,
                warmup,
            } => cycles(&server, &worker, &approver, workers, duration, warmup).await,
            Mode::Gate(gate) => super::bench_gate::gate(worker, &gate).await,
            Mode::Soak(soak) => super::bench_soak::soak(&server, &admin, &soak).await,
            Mode::Waiters { count, concurrency } => {
                waiters(&server, &worker, &approver, count, concurrency).await
            }
            Mode::Chaos(_) => bail!("lev bench chaos starts its own server"),
        }
    });
    drop(server);
    match result {
        Ok(done) => done.map(|()| ExitCode::SUCCESS),
        Err(code) => Ok(code),
    }
}

/// `work` on `rt`, or, when a terminating signal comes first, `work`
/// dropped (its servers killed, its data dirs removed) and the exit code
/// that says which signal.
fn until_signal<F: std::future::Future>(
    rt: &tokio::runtime::Runtime,
    signals: &mut crate::signals::Terminating,
    work: F,
) -> Result<F::Output, ExitCode> {
    rt.block_on(async {
        tokio::select! {
            done = work => Ok(done),
            (name, code) = signals.recv() => {
                eprintln!("lev bench: stopped by {name}; stopping the servers it started");
                Err(ExitCode::from(code))
            }
        }
    })
}

pub(crate) async fn token(admin: &Client, name: &str, role: Role) -> anyhow::Result<Client> {
    let created = admin
        .create_token(&TokenCreate {
            name: name.into(),
            role,
            caller: None,
            sessions: (role == Role::Operator).then(|| vec!["*".into()]),
        })
        .await
        .with_context(|| format!("making the {name} token"))?;
    Ok(admin.with_token(Some(created.token)))
}

pub(crate) fn question(session: String, n: usize) -> InteractionRequest {
    let mut r = InteractionRequest::new(
        session,
        InteractionKind::FreeText {
            prompt: format!("bench question {n}"),
        },
    );
    r.timeout_s = Some(3600);
    r
}

async fn cycles(
    server: &Servers,
    worker: &Client,
    approver: &Client,
    workers: usize,
    duration: u64,
    warmup: u64,
) -> anyhow::Result<()> {
    let start = Instant::now();
    let measure_from = start + Duration::from_secs(warmup);
    let end = measure_from + Duration::from_secs(duration);
    let mut tasks = tokio::task::JoinSet::new();
    for w in 0..workers {
        // Created and waited for on one replica, answered on the next.
        let worker = server.on(worker, w)?;
        let approver = server.on(approver, w + 1)?;
        tasks.spawn(async move {
            let mut latencies = Vec::new();
            let mut n = 0usize;
            loop {
                let t0 = Instant::now();
                if t0 >= end {
                    break;
                }
                let created = worker
                    .create_interaction(&question(format!("bench-{w}"), n))
                    .await?;
                let id = created.id().to_owned();
                approver
                    .respond(&id, &InteractionResponse::text(id.clone(), "ok"))
                    .await?;
                let waited = worker.wait(&id, 30).await?;
                if waited.status != InteractionStatus::Answered {
                    bail!("{id}: expected answered, found {}", waited.status.as_str());
                }
                if t0 >= measure_from {
                    latencies.push(t0.elapsed());
                }
                n += 1;
            }
            anyhow::Ok(latencies)
        });
    }
    let mut all = Vec::new();
    while let Some(joined) = tasks.join_next().await {
        all.extend(joined.context("a worker task")??);
    }
    let rss = server.rss_kib();
    all.sort();
    println!(
        "cycles: {workers} workers, {duration} s measured after {warmup} s warm-up{}: {} cycles, {:.0} cycles/s, p50 {}, p99 {}, max {}; server RSS {}",
        server.describe(),
        all.len(),
        all.len() as f64 / duration as f64,
        ms(percentile(&all, 0.50)),
        ms(percentile(&all, 0.99)),
        ms(all.last().copied().unwrap_or_default()),
        mib(rss),
    );
    Ok(())
}

async fn waiters(
    server: &Servers,
    worker: &Client,
    approver: &Client,
    count: usize,
    concurrency: usize,
) -> anyhow::Result<()> {
    let base = Instant::now();
    let since = move || u64::try_from(base.elapsed().as_nanos()).unwrap_or(u64::MAX);
    let rss_idle = server.rss_kib();

    // 1. Create them.
    let t = Instant::now();
    let workers: Arc<Vec<Client>> = Arc::new(
        (0..server.urls.len())
            .map(|r| server.on(worker, r))
            .collect::<anyhow::Result<_>>()?,
    );
    let approvers: Arc<Vec<Client>> = Arc::new(
        (0..server.urls.len())
            .map(|r| server.on(approver, r))
            .collect::<anyhow::Result<_>>()?,
    );
    let replicas = server.urls.len();
    let ids = Arc::new(
        run_bounded(count, concurrency, {
            let workers = workers.clone();
            move |i| {
                let worker = workers[i % replicas].clone();
                async move {
                    let created = worker
                        .create_interaction(&question(format!("wait-{}", i % 64), i))
                        .await?;
                    anyhow::Ok(created.id().to_owned())
                }
            }
        })
        .await?,
    );
    eprintln!(
        "lev bench: created {count} in {:.1} s",
        t.elapsed().as_secs_f64()
    );

    // 2. A waiter on each, each on its own connection.
    let woken: Arc<Vec<AtomicU64>> = Arc::new((0..count).map(|_| AtomicU64::new(0)).collect());
    let failed = Arc::new(AtomicUsize::new(0));
    let mut waiters = tokio::task::JoinSet::new();
    for i in 0..count {
        // Waiting on the replica it was created on.
        let worker = workers[i % replicas].clone();
        let ids = ids.clone();
        let woken = woken.clone();
        let failed = failed.clone();
        waiters.spawn(async move {
            loop {
                match worker.wait(&ids[i], 300).await {
                    Ok(w) if w.status == InteractionStatus::Answered => {
                        woken[i].store(since(), Ordering::Relaxed);
                        return;
                    }
                    Ok(_) => {}
                    Err(_) => {
                        failed.fetch_add(1, Ordering::Relaxed);
                        tokio::time::sleep(Duration::from_millis(200)).await;
                    }
                }
            }
        });
        if i % 500 == 499 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    // Every waiter is in once the server counts it (its `lev_waiters` gauge).
    let admins: Vec<Client> = approvers
        .iter()
        .map(|a| a.with_token(Some(server.admin_token.clone())))
        .collect();
    let t = Instant::now();
    loop {
        let mut waiting = 0;
        for admin in &admins {
            waiting += gauge(&admin.metrics().await?, "lev_waiters");
        }
        if waiting >= count as u64 {
            break;
        }
        if t.elapsed() > Duration::from_secs(120) {
            bail!("only {waiting} of {count} waiters reached the server in 120 s");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Let the server settle before reading its memory.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let rss_waiting = server.rss_kib();
    eprintln!(
        "lev bench: {count} waiters connected in {:.1} s; server RSS {}",
        t.elapsed().as_secs_f64(),
        mib(rss_waiting)
    );

    // 3. Answer every one, noting when each respond was sent.
    let sent: Arc<Vec<AtomicU64>> = Arc::new((0..count).map(|_| AtomicU64::new(0)).collect());
    let t = Instant::now();
    run_bounded(count, concurrency, {
        let approvers = approvers.clone();
        let ids = ids.clone();
        let sent = sent.clone();
        move |i| {
            // Answered on the next replica: with several, a cross-replica wake.
            let approver = approvers[(i + 1) % replicas].clone();
            let ids = ids.clone();
            let sent = sent.clone();
            async move {
                sent[i].store(since(), Ordering::Relaxed);
                approver
                    .respond(&ids[i], &InteractionResponse::text(ids[i].clone(), "go"))
                    .await?;
                anyhow::Ok(())
            }
        }
    })
    .await?;
    let answering = t.elapsed();
    while waiters.join_next().await.is_some() {}
    let mut wakes: Vec<Duration> = (0..count)
        .map(|i| {
            let w = woken[i].load(Ordering::Relaxed);
            let s = sent[i].load(Ordering::Relaxed);
            Duration::from_nanos(w.saturating_sub(s))
        })
        .collect();
    wakes.sort();
    println!(
        "waiters: {count} waiting{}; server RSS {} idle, {} with all waiting (peak {}); answered all in {:.2} s ({:.0}/s); wake latency (respond sent -> waiter woken) p50 {}, p99 {}, max {}; {} wait retries",
        server.describe(),
        mib(rss_idle),
        mib(rss_waiting),
        mib(server.peak_rss_kib()),
        answering.as_secs_f64(),
        count as f64 / answering.as_secs_f64(),
        ms(percentile(&wakes, 0.50)),
        ms(percentile(&wakes, 0.99)),
        ms(wakes.last().copied().unwrap_or_default()),
        failed.load(Ordering::Relaxed),
    );
    Ok(())
}

/// Run `f(0..count)` with at most `concurrency` at once; results in order.
async fn run_bounded<T, F, Fut>(count: usize, concurrency: usize, f: F) -> anyhow::Result<Vec<T>>
where
    T: Send + 'static + Default + Clone,
    F: Fn(usize) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = anyhow::Result<T>> + Send + 'static,
{
    let f = Arc::new(f);
    let next = Arc::new(AtomicUsize::new(0));
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..concurrency.max(1) {
        let f = f.clone();
        let next = next.clone();
        tasks.spawn(async move {
            let mut done = Vec::new();
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= count {
                    break;
                }
                done.push((i, f(i).await?));
            }
            anyhow::Ok(done)
        });
    }
    let mut out = vec![T::default(); count];
    while let Some(joined) = tasks.join_next().await {
        for (i, v) in joined.context("a bench task")?? {
            out[i] = v;
        }
    }
    Ok(out)
}

/// The value of an unlabelled metric in Prometheus text, 0 when absent.
fn gauge(text: &str, name: &str) -> u64 {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
        .and_then(|v| v.trim().parse::<f64>().ok())
        .map_or(0, |v| v as u64)
}

pub(crate) fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = ((sorted.len() as f64 * p).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

pub(crate) fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1000.0)
}

fn mib(kib: Option<u64>) -> String {
    match kib {
        Some(k) => format!("{:.1} MiB", k as f64 / 1024.0),
        None => "unknown".into(),
    }
}

/// Raise this process's open-file soft limit to the hard limit; the server
/// child inherits it.
fn raise_open_files() -> u64 {
    match rlimit::increase_nofile_limit(u64::MAX) {
        Ok(n) => n,
        Err(e) => {
            eprintln!("lev bench: could not raise the open-file limit: {e}");
            rlimit::getrlimit(rlimit::Resource::NOFILE).map_or(0, |(soft, _)| soft)
        }
    }
}

/// `lev serve` on temporary data dirs and port 0, killed when dropped:
/// one on SQLite, or `--replicas` on one PostgreSQL database.
pub(crate) struct Servers {
    children: Vec<Spawned>,
    pub(crate) urls: Vec<String>,
    admin_token: String,
    /// Token names get it, so that a bench may run again on one database.
    suffix: String,
    postgres: bool,
    _data: tempfile::TempDir,
}

impl Servers {
    async fn start(
        policy: Option<&str>,
        database: Option<&str>,
        replicas: usize,
        kek: Option<std::path::PathBuf>,
    ) -> anyhow::Result<Self> {
        let data = tempfile::Builder::new()
            .prefix("lev-bench-")
            .tempdir()
            .context("making a temporary data dir")?;
        let exe = std::env::current_exe().context("finding the lev binary")?;
        let suffix = format!(
            "{:x}",
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap_or_default()
                .as_millis()
        );
        let kek = match kek {
            Some(file) => file,
            None => {
                let file = data.path().join("kek");
                if database.is_some() {
                    let key = lev_server::Kek::generate_base64().map_err(anyhow::Error::msg)?;
                    std::fs::write(&file, key).context("writing the key-encryption key")?;
                }
                file
            }
        };
        let mut children = Vec::new();
        for r in 0..replicas {
            let dir = data.path().join(format!("replica-{r}"));
            std::fs::create_dir_all(&dir).context("making a data dir")?;
            if let Some(policy) = policy {
                std::fs::write(dir.join("policy.toml"), policy)
                    .context("writing the bench policy")?;
            }
            // Every load generator connects from this one address: the
            // per-address cap is the whole cap here (lowered by lev serve to
            // fit the open-file limit).
            let mut builder = Spawned::builder(&exe, &dir).args([
                "--max-connections",
                "1000000",
                "--max-connections-per-address",
                "1000000",
            ]);
            if let Some(url) = database {
                builder = builder
                    .args(["--database", url, "--key-encryption-key-file"])
                    .arg(&kek);
            }
            children.push(builder.start().with_context(|| {
                if database.is_some() {
                    format!(
                        "starting replica {r} (a database an earlier bench used needs that \
                         run's --key-encryption-key-file)"
                    )
                } else {
                    "starting lev serve".to_owned()
                }
            })?);
        }
        let urls = children.iter().map(|c| c.url().to_owned()).collect();
        // On a database used before, no replica made an admin token: the
        // bench writes its own into the database.
        let admin_token = match (children.iter().find_map(|c| c.admin_token().ok()), database) {
            (Some(token), _) => token,
            (None, Some(url)) => {
                lev_server::create_token_in_database(
                    url,
                    TokenCreate {
                        name: format!("bench-admin-{suffix}"),
                        role: Role::Admin,
                        caller: None,
                        sessions: None,
                    },
                )
                .await
                .map_err(anyhow::Error::msg)?
                .token
            }
            (None, None) => bail!("the server wrote no admin token"),
        };
        Ok(Self {
            children,
            urls,
            admin_token,
            suffix,
            postgres: database.is_some(),
            _data: data,
        })
    }

    /// A token name of this run.
    pub(crate) fn name(&self, base: &str) -> String {
        if self.postgres {
            format!("{base}-{}", self.suffix)
        } else {
            base.to_owned()
        }
    }

    /// `client`'s token, against replica `n` (modulo their number).
    pub(crate) fn on(&self, client: &Client, n: usize) -> anyhow::Result<Client> {
        Ok(Client::new(
            &self.urls[n % self.urls.len()],
            client.token().map(str::to_owned),
        )?)
    }

    /// ", 2 replicas on PostgreSQL", or nothing for one server on SQLite.
    pub(crate) fn describe(&self) -> String {
        match (self.postgres, self.urls.len()) {
            (false, _) => String::new(),
            (true, 1) => ", 1 server on PostgreSQL".into(),
            (true, n) => format!(", {n} replicas on PostgreSQL"),
        }
    }

    /// The servers' resident memory, summed.
    pub(crate) fn rss_kib(&self) -> Option<u64> {
        self.sum("VmRSS:")
    }

    fn peak_rss_kib(&self) -> Option<u64> {
        self.sum("VmHWM:")
    }

    /// Open file descriptors of every server, summed.
    pub(crate) fn open_files(&self) -> u64 {
        self.children
            .iter()
            .filter_map(|c| std::fs::read_dir(format!("/proc/{}/fd", c.pid())).ok())
            .map(|d| d.count() as u64)
            .sum()
    }

    fn sum(&self, field: &str) -> Option<u64> {
        self.children
            .iter()
            .map(|c| status_field(c.pid(), field))
            .sum()
    }
}

fn status_field(pid: u32, field: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
}
