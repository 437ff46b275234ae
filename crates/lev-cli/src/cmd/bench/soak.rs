//! `lev bench soak`: a bounded soak. Mixed load for N minutes against one
//! `lev serve` (or replicas): workers looping create -> respond -> wait,
//! workers gating calls a rule allows, workers asking a session's operator
//! (a real operator on the WebSocket answers), and event-stream clients that
//! connect, read a few events and drop. Each minute it samples the server's
//! RSS and open files and every operation's latency, and prints one line;
//! at the end, whether RSS and open files levelled off (the last third's
//! growth against the first third's).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::Context as _;
use lev_client::Client;
use lev_client::operator::{
    Ask, Hook, HookDecision, Operator, OperatorHandler, Session, SpawnOrder, SpawnOutcome,
};
use lev_protocol::api::{GateRequest, GateResponse, Role};
use lev_protocol::{InteractionResponse, InteractionStatus};
use serde_json::{Value, json};
use tokio::sync::Mutex;
use tokio::time::Instant;

use super::common::{ms, percentile, question, token};
use super::servers::Servers;

/// `lev bench soak` flags.
#[derive(Debug, clap::Args)]
pub struct SoakArgs {
    /// Minutes of load.
    #[arg(long, default_value_t = 30, value_name = "N")]
    minutes: u64,
    /// Seconds per sample (60: one line a minute).
    #[arg(long, default_value_t = 60, value_name = "SECS")]
    sample: u64,
    /// Workers of each kind (cycles, gate, operator asks); event-stream
    /// clients are half as many.
    #[arg(long, default_value_t = 8, value_name = "N")]
    workers: usize,
}

const OPS: [&str; 4] = ["cycle", "gate", "ask", "events"];

#[derive(Default)]
struct Window {
    latencies: [Vec<Duration>; 4],
    errors: [u64; 4],
}

struct Answerer;

impl OperatorHandler for Answerer {
    async fn ask(&self, ask: Ask) -> Value {
        json!({ "answer": format!("read: {}", ask.req_id) })
    }
    async fn hook_before(&self, _hook: Hook) -> HookDecision {
        HookDecision::Allow
    }
    async fn spawn(&self, _order: SpawnOrder) -> SpawnOutcome {
        SpawnOutcome::failed("the soak's operator runs no spawns")
    }
}

/// Run the soak against started servers.
pub async fn soak(server: &Servers, admin: &Client, args: &SoakArgs) -> anyhow::Result<()> {
    let worker = token(admin, &server.name("soak-worker"), Role::Worker).await?;
    let approver = token(admin, &server.name("soak-approver"), Role::Approver).await?;
    let operator = token(admin, &server.name("soak-operator"), Role::Operator).await?;
    let window = Arc::new(Mutex::new(Window::default()));
    let stop = Arc::new(AtomicBool::new(false));
    let mut tasks = tokio::task::JoinSet::new();
    let session = "soak-op".to_owned();
    // The operator, on the last replica; asks go to the first.
    let op = Operator::new(
        &server.urls[server.urls.len() - 1],
        operator.token().unwrap_or_default(),
        &session,
    )
    .context("the soak's operator")?;
    tokio::spawn(async move {
        let _ = op.run(Arc::new(Answerer)).await;
    });
    tokio::time::sleep(Duration::from_millis(500)).await;

    for w in 0..args.workers {
        let load = || Load {
            window: window.clone(),
            stop: stop.clone(),
        };
        let (cw, ca) = (server.on(&worker, w)?, server.on(&approver, w + 1)?);
        tasks.spawn(load().cycles(w, cw, ca));
        tasks.spawn(load().gates(w, server.on(&worker, w)?));
        tasks.spawn(load().asks(Session::new(&server.on(&worker, 0)?, &session)));
        if w % 2 == 0 {
            tasks.spawn(load().event_streams(server.on(admin, w)?));
        }
    }

    let (rows, failed) = sample(server, &window, args).await;
    stop.store(true, Ordering::Relaxed);
    tasks.abort_all();
    report(server, &rows, failed)
}

/// What every load task shares: the window it records into, and when to stop.
#[derive(Clone)]
struct Load {
    window: Arc<Mutex<Window>>,
    stop: Arc<AtomicBool>,
}

impl Load {
    fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    /// Create -> respond -> wait, again and again (operation 0).
    async fn cycles(self, w: usize, cw: Client, ca: Client) {
        let mut n = 0;
        while !self.stopped() {
            let t = Instant::now();
            let ok = async {
                let created = cw
                    .create_interaction(&question(format!("soak-{w}"), n))
                    .await?;
                let id = created.id().to_owned();
                ca.respond(&id, &InteractionResponse::text(id.clone(), "ok"))
                    .await?;
                let waited = cw.wait(&id, 30).await?;
                anyhow::ensure!(waited.status == InteractionStatus::Answered, "not answered");
                anyhow::Ok(())
            }
            .await;
            record(&self.window, 0, t, ok.is_ok()).await;
            n += 1;
        }
    }

    /// Calls a rule allows (operation 1).
    async fn gates(self, w: usize, gate_client: Client) {
        let mut n = 0u64;
        while !self.stopped() {
            let t = Instant::now();
            let req = GateRequest {
                session_id: format!("soak-gate-{w}"),
                conversation_id: "c".into(),
                turn_id: format!("t{n}"),
                request_id: format!("g{w}-{n}"),
                caller: "soak".into(),
                tool_name: "fs.read".into(),
                args_json: format!(r#"{{"n":{n}}}"#),
                sandbox_mode: "read-only".into(),
                required_capabilities: vec![],
                timeout_s: None,
                route: None,
                reason: None,
            };
            let ok = matches!(gate_client.gate(&req).await, Ok(GateResponse::Allow { .. }));
            record(&self.window, 1, t, ok).await;
            n += 1;
        }
    }

    /// Questions to the session's operator (operation 2).
    async fn asks(self, asker: Session) {
        let mut n = 0u64;
        while !self.stopped() {
            let t = Instant::now();
            let ok = asker
                .ask(json!({"n": n}), Some(Duration::from_secs(30)))
                .await
                .is_ok();
            record(&self.window, 2, t, ok).await;
            n += 1;
        }
    }

    /// Event streams that connect, read up to 20 events and drop
    /// (operation 3).
    async fn event_streams(self, watcher: Client) {
        while !self.stopped() {
            let t = Instant::now();
            let ok = async {
                let mut stream = watcher.events(None).await?;
                for _ in 0..20 {
                    if tokio::time::timeout(Duration::from_secs(5), stream.next())
                        .await
                        .is_err()
                    {
                        break;
                    }
                }
                anyhow::Ok(())
            }
            .await;
            record(&self.window, 3, t, ok.is_ok()).await;
        }
    }
}

/// Every `--sample` seconds for `--minutes`, one line: the servers' RSS and
/// open files, each operation's rate, p50, p99 and errors. The samples
/// (RSS in KiB, open files), and each operation's errors in all.
async fn sample(
    server: &Servers,
    window: &Mutex<Window>,
    args: &SoakArgs,
) -> (Vec<(u64, u64)>, [u64; 4]) {
    let samples = (args.minutes * 60).div_ceil(args.sample.max(1));
    let mut rows: Vec<(u64, u64)> = Vec::new();
    println!(
        "{:>5}  {:>9}  {:>5}  {}",
        "t",
        "RSS",
        "files",
        OPS.map(|op| format!(
            "{:>10} {:>10} {:>10} {:>3}",
            format!("{op}/s"),
            "p50",
            "p99",
            "err"
        ))
        .join("  ")
    );
    let mut failed = [0u64; 4];
    for i in 1..=samples {
        tokio::time::sleep(Duration::from_secs(args.sample)).await;
        let w = std::mem::take(&mut *window.lock().await);
        for (total, errors) in failed.iter_mut().zip(w.errors) {
            *total += errors;
        }
        let rss = server.rss_kib().unwrap_or_default();
        let files = server.open_files();
        rows.push((rss, files));
        let ops = (0..4)
            .map(|k| {
                let mut l = w.latencies[k].clone();
                l.sort();
                format!(
                    "{:>8.0} {:>10} {:>10} {:>3}",
                    l.len() as f64 / args.sample as f64,
                    ms(percentile(&l, 0.50)),
                    ms(percentile(&l, 0.99)),
                    w.errors[k]
                )
            })
            .collect::<Vec<_>>()
            .join("  ");
        println!(
            "{:>4}s  {:>6} MiB  {files:>5}  {ops}",
            i * args.sample,
            rss / 1024
        );
    }
    (rows, failed)
}

/// The last line: whether RSS and open files levelled off (the last third's
/// growth against the first third's); an error when any request failed.
fn report(server: &Servers, rows: &[(u64, u64)], failed: [u64; 4]) -> anyhow::Result<()> {
    let third = (rows.len() / 3).max(1);
    let growth = |pick: fn(&(u64, u64)) -> u64, from: usize, to: usize| -> i64 {
        let a = rows.get(from).map_or(0, pick);
        let b = rows
            .get(to.min(rows.len().saturating_sub(1)))
            .map_or(0, pick);
        i64::try_from(b).unwrap_or(0) - i64::try_from(a).unwrap_or(0)
    };
    let last = rows.len().saturating_sub(1);
    let errors: u64 = failed.iter().sum();
    println!(
        "soak{}: RSS {} MiB -> {} MiB (first third {:+} MiB, last third {:+} MiB); open files \
         first third {:+}, last third {:+}; {errors} errors",
        server.describe(),
        rows.first().map_or(0, |r| r.0 / 1024),
        rows.last().map_or(0, |r| r.0 / 1024),
        growth(|r| r.0, 0, third) / 1024,
        growth(|r| r.0, last.saturating_sub(third), last) / 1024,
        growth(|r| r.1, 0, third),
        growth(|r| r.1, last.saturating_sub(third), last),
    );
    if errors > 0 {
        anyhow::bail!(
            "soak: {errors} requests failed ({})",
            OPS.iter()
                .zip(failed)
                .map(|(op, n)| format!("{op} {n}"))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    Ok(())
}

async fn record(window: &Mutex<Window>, k: usize, t: Instant, ok: bool) {
    let elapsed = t.elapsed();
    let mut w = window.lock().await;
    if ok {
        w.latencies[k].push(elapsed);
    } else {
        w.errors[k] += 1;
    }
}
