//! Load generator for operator asks: workers `POST /v1/sessions/{sid}/ask`,
//! operators (the SDK's [`Operator`]) answer on their WebSockets, and this
//! process measures each round trip. It starts `lev serve` as a child on a
//! temporary data dir (or uses `--url` and `--admin`), so the server runs in a
//! process of its own.
//!
//! ```sh
//! cargo build --release -p lev-cli --example ask_bench -p lev-client
//! target/release/examples/ask_bench --lev target/release/lev --sessions 1 --workers 1
//! target/release/examples/ask_bench --lev target/release/lev --sessions 64 --workers 4
//! ```
//!
//! `--workers` is per session: that many asks in flight on each session.
//! `--rate N` paces the workers to offer N asks/s in all (default: each asks
//! again as soon as it has its answer).
//! Prints asks/s and the round trip's p50, p90, p99. Run it by hand; it is
//! never a pass/fail test of speed.

use std::io::{BufRead as _, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use lev_client::Client;
use lev_client::operator::{
    Ask, Hook, HookDecision, Operator, OperatorError, OperatorHandler, Session, SpawnOrder,
    SpawnOutcome, Stopped,
};
use lev_protocol::api::{Role, TokenCreate};
use serde_json::{Value, json};

struct Echo;

impl OperatorHandler for Echo {
    async fn ask(&self, ask: Ask) -> Value {
        ask.question
    }
    async fn hook_before(&self, _hook: Hook) -> HookDecision {
        HookDecision::Allow
    }
    async fn spawn(&self, _order: SpawnOrder) -> SpawnOutcome {
        SpawnOutcome::value(Value::Null)
    }
}

#[derive(Debug)]
struct Args {
    lev: String,
    url: Option<String>,
    admin: Option<String>,
    sessions: usize,
    workers: usize,
    duration: u64,
    warmup: u64,
    threads: usize,
    rate: u64,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        lev: "target/release/lev".into(),
        url: None,
        admin: None,
        sessions: 64,
        workers: 4,
        duration: 10,
        warmup: 2,
        threads: 1,
        rate: 0,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{flag} needs a value"));
        let number = |v: String| v.parse::<u64>().map_err(|e| format!("{flag}: {e}"));
        match flag.as_str() {
            "--lev" => args.lev = value()?,
            "--url" => args.url = Some(value()?),
            "--admin" => args.admin = Some(value()?),
            "--sessions" => args.sessions = usize::try_from(number(value()?)?).unwrap_or(1),
            "--workers" => args.workers = usize::try_from(number(value()?)?).unwrap_or(1),
            "--duration" => args.duration = number(value()?)?,
            "--warmup" => args.warmup = number(value()?)?,
            "--threads" => args.threads = usize::try_from(number(value()?)?).unwrap_or(1),
            "--rate" => args.rate = number(value()?)?,
            other => return Err(format!("unknown flag {other}")),
        }
    }
    Ok(args)
}

/// `lev serve` on port 0 in a temporary data dir; its URL and admin token.
fn start_server(lev: &str) -> Result<(Child, String, String, tempfile::TempDir), String> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let mut child = Command::new(lev)
        .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(dir.path())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start {lev}: {e}\nhint: cargo build --release -p lev-cli"))?;
    let stderr = child.stderr.take().ok_or("no stderr")?;
    let mut lines = BufReader::new(stderr).lines();
    let url = loop {
        match lines.next() {
            Some(Ok(line)) => {
                if let Some(url) = line.strip_prefix("lev: listening on ") {
                    break url.trim().to_owned();
                }
            }
            _ => return Err("lev serve stopped before it listened".into()),
        }
    };
    // Keep draining its stderr so it never blocks on a full pipe.
    std::thread::spawn(move || for _ in lines {});
    let admin = std::fs::read_to_string(dir.path().join("admin.token"))
        .map_err(|e| e.to_string())?
        .trim()
        .to_owned();
    Ok((child, url, admin, dir))
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

async fn run(args: Args) -> Result<(), String> {
    let mut server = None;
    let (url, admin) = match (&args.url, &args.admin) {
        (Some(url), Some(admin)) => (url.clone(), admin.clone()),
        _ => {
            let (child, url, admin, dir) = start_server(&args.lev)?;
            server = Some((child, dir));
            (url, admin)
        }
    };
    let admin_client = Client::new(&url, Some(admin)).map_err(|e| e.to_string())?;
    let stamp = std::process::id();
    let token = |name: String, role| {
        let admin_client = admin_client.clone();
        async move {
            admin_client
                .create_token(&TokenCreate {
                    name,
                    role,
                    caller: None,
                    sessions: (role == Role::Operator).then(|| vec!["*".into()]),
                })
                .await
                .map(|t| t.token)
                .map_err(|e| e.to_string())
        }
    };
    let op_token = token(format!("bench-op-{stamp}"), Role::Operator).await?;
    let worker_token = token(format!("bench-worker-{stamp}"), Role::Worker).await?;
    let worker = Client::new(&url, Some(worker_token)).map_err(|e| e.to_string())?;

    let operators = start_operators(&url, &op_token, &worker, stamp, args.sessions).await?;

    // Paced: each worker asks at most every `pace`, so together they offer
    // `--rate` asks/s (a worker that falls behind just asks back to back).
    let total_workers = (args.sessions * args.workers).max(1);
    let pace =
        (args.rate > 0).then(|| Duration::from_secs_f64(total_workers as f64 / args.rate as f64));
    let measuring = Arc::new(AtomicBool::new(false));
    let stop = Arc::new(AtomicBool::new(false));
    let mut tasks = Vec::new();
    let workers = args.workers;
    for s in 0..args.sessions {
        for w in 0..args.workers {
            let session = Session::new(&worker, &format!("bench-{stamp}-{s}"));
            let (measuring, stop) = (Arc::clone(&measuring), Arc::clone(&stop));
            let question = json!({"w": w});
            // Staggered, so the workers do not all ask at the same instant.
            let index = (s * workers + w) as f64 / total_workers as f64;
            tasks.push(tokio::spawn(ask_loop(
                session, question, index, pace, measuring, stop,
            )));
        }
    }
    tokio::time::sleep(Duration::from_secs(args.warmup)).await;
    measuring.store(true, Ordering::Relaxed);
    let began = Instant::now();
    tokio::time::sleep(Duration::from_secs(args.duration)).await;
    measuring.store(false, Ordering::Relaxed);
    let elapsed = began.elapsed();
    stop.store(true, Ordering::Relaxed);
    let mut all = Vec::new();
    let mut errors = 0;
    for t in tasks {
        let (samples, e) = t.await.map_err(|e| e.to_string())?;
        all.extend(samples);
        errors += e;
    }
    all.sort();
    report(&args, &all, errors, elapsed);
    for op in operators {
        op.abort();
    }
    if let Some((mut child, _dir)) = server {
        let _ = child.kill();
        let _ = child.wait();
    }
    Ok(())
}

/// An operator on each of `sessions` sessions, answering every ask with its
/// question; once each has answered a warm-up ask.
async fn start_operators(
    url: &str,
    op_token: &str,
    worker: &Client,
    stamp: u32,
    sessions: usize,
) -> Result<Vec<tokio::task::JoinHandle<Result<Stopped, OperatorError>>>, String> {
    let mut operators = Vec::new();
    for s in 0..sessions {
        let op = Operator::new(url, op_token, &format!("bench-{stamp}-{s}"))
            .map_err(|e| e.to_string())?;
        operators.push(tokio::spawn(async move { op.run(Arc::new(Echo)).await }));
    }
    // Let every operator connect; a warm-up ask per session makes sure.
    for s in 0..sessions {
        Session::new(worker, &format!("bench-{stamp}-{s}"))
            .ask(json!("warm"), Some(Duration::from_secs(30)))
            .await
            .map_err(|e| format!("warm-up ask: {e}"))?;
    }

    Ok(operators)
}

/// One worker asking `question` in `session` until `stop`, every `pace` (from
/// `index` of a pace on), or back to back: the latencies and errors met
/// while `measuring`.
async fn ask_loop(
    session: Session,
    question: Value,
    index: f64,
    pace: Option<Duration>,
    measuring: Arc<AtomicBool>,
    stop: Arc<AtomicBool>,
) -> (Vec<Duration>, u64) {
    let mut samples = Vec::with_capacity(100_000);
    let mut errors = 0u64;
    let mut ticks = pace.map(|p| {
        let first = tokio::time::Instant::now() + p.mul_f64(index);
        let mut t = tokio::time::interval_at(first, p);
        t.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        t
    });
    while !stop.load(Ordering::Relaxed) {
        if let Some(t) = ticks.as_mut() {
            t.tick().await;
        }
        let started = Instant::now();
        let ok = session
            .ask(question.clone(), Some(Duration::from_secs(30)))
            .await
            .is_ok();
        if measuring.load(Ordering::Relaxed) {
            if ok {
                samples.push(started.elapsed());
            } else {
                errors += 1;
            }
        }
    }
    (samples, errors)
}

/// The run's two lines: what was offered, and what it came to.
fn report(args: &Args, all: &[Duration], errors: u64, elapsed: Duration) {
    let rate = all.len() as f64 / elapsed.as_secs_f64();
    println!(
        "sessions={} workers/session={} in-flight<={} client-threads={} offered={}",
        args.sessions,
        args.workers,
        args.sessions * args.workers,
        args.threads,
        if args.rate > 0 {
            format!("{}/s", args.rate)
        } else {
            "unpaced".into()
        }
    );
    println!(
        "asks={} errors={} asks/s={rate:.0} p50={:?} p90={:?} p99={:?} max={:?}",
        all.len(),
        errors,
        percentile(all, 0.50),
        percentile(all, 0.90),
        percentile(all, 0.99),
        all.last().copied().unwrap_or_default(),
    );
}

fn main() -> std::process::ExitCode {
    let args = match parse_args() {
        Ok(args) => args,
        Err(e) => {
            eprintln!("error: {e}");
            return std::process::ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(args.threads.max(1))
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(args)) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}
