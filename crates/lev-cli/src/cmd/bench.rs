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
    /// (signed, audited, recorded); decisions/s and latency (bench_gate.rs).
    Gate(super::bench_gate::GateArgs),
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
        Mode::Gate(_) => Some(super::bench_gate::POLICY),
        _ => None,
    };
    let server = ServerChild::start(policy)?;
    eprintln!(
        "lev bench: server pid {} at {} (open-file limit {limit})",
        server.pid(),
        server.url
    );
    let result = rt.block_on(async {
        let admin = Client::new(&server.url, Some(server.admin_token.clone()))?;
        let worker = token(&admin, "bench-worker", Role::Worker).await?;
        let approver = token(&admin, "bench-approver", Role::Approver).await?;
        match args.mode {
            Mode::Cycles {
                workers,
                duration,
                warmup,
            } => cycles(&server, worker, approver, workers, duration, warmup).await,
            Mode::Gate(gate) => super::bench_gate::gate(worker, &gate).await,
            Mode::Waiters { count, concurrency } => {
                waiters(&server, worker, approver, count, concurrency).await
            }
        }
    });
    drop(server);
    result.map(|()| ExitCode::SUCCESS)
}

async fn token(admin: &Client, name: &str, role: Role) -> anyhow::Result<Client> {
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

fn question(session: String, n: usize) -> InteractionRequest {
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
    server: &ServerChild,
    worker: Client,
    approver: Client,
    workers: usize,
    duration: u64,
    warmup: u64,
) -> anyhow::Result<()> {
    let start = Instant::now();
    let measure_from = start + Duration::from_secs(warmup);
    let end = measure_from + Duration::from_secs(duration);
    let mut tasks = tokio::task::JoinSet::new();
    for w in 0..workers {
        let worker = worker.clone();
        let approver = approver.clone();
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
        "cycles: {workers} workers, {duration} s measured after {warmup} s warm-up: {} cycles, {:.0} cycles/s, p50 {}, p99 {}, max {}; server RSS {}",
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
    server: &ServerChild,
    worker: Client,
    approver: Client,
    count: usize,
    concurrency: usize,
) -> anyhow::Result<()> {
    let base = Instant::now();
    let since = move || u64::try_from(base.elapsed().as_nanos()).unwrap_or(u64::MAX);
    let rss_idle = server.rss_kib();

    // 1. Create them.
    let t = Instant::now();
    let ids = Arc::new(
        run_bounded(count, concurrency, {
            let worker = worker.clone();
            move |i| {
                let worker = worker.clone();
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
        let worker = worker.clone();
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
    let admin = approver.with_token(Some(server.admin_token.clone()));
    let t = Instant::now();
    loop {
        let waiting = gauge(&admin.metrics().await?, "lev_waiters");
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
        let approver = approver.clone();
        let ids = ids.clone();
        let sent = sent.clone();
        move |i| {
            let approver = approver.clone();
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
        "waiters: {count} waiting; server RSS {} idle, {} with all waiting (peak {}); answered all in {:.2} s ({:.0}/s); wake latency (respond sent -> waiter woken) p50 {}, p99 {}, max {}; {} wait retries",
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

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = ((sorted.len() as f64 * p).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

fn ms(d: Duration) -> String {
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

/// `lev serve` on a temporary data dir and port 0, killed when dropped.
struct ServerChild {
    child: Spawned,
    url: String,
    admin_token: String,
    _data: tempfile::TempDir,
}

impl ServerChild {
    fn start(policy: Option<&str>) -> anyhow::Result<Self> {
        let data = tempfile::Builder::new()
            .prefix("lev-bench-")
            .tempdir()
            .context("making a temporary data dir")?;
        if let Some(policy) = policy {
            std::fs::write(data.path().join("policy.toml"), policy)
                .context("writing the bench policy")?;
        }
        let exe = std::env::current_exe().context("finding the lev binary")?;
        let child = Spawned::builder(exe, data.path()).start()?;
        let url = child.url().to_owned();
        let admin_token = child.admin_token()?;
        Ok(Self {
            child,
            url,
            admin_token,
            _data: data,
        })
    }

    fn pid(&self) -> u32 {
        self.child.pid()
    }

    fn status_field(&self, field: &str) -> Option<u64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid())).ok()?;
        status
            .lines()
            .find_map(|l| l.strip_prefix(field))
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|n| n.parse().ok())
    }

    fn rss_kib(&self) -> Option<u64> {
        self.status_field("VmRSS:")
    }

    fn peak_rss_kib(&self) -> Option<u64> {
        self.status_field("VmHWM:")
    }
}
