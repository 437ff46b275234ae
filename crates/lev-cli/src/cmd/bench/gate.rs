//! `lev bench gate`: the gate's allow path under load. The server child runs
//! [`POLICY`] (a rule allows `fs.read`), so every call is decided by a rule,
//! signed, audited and recorded for idempotency: one group-committed
//! transaction per decision. N workers, each on its own session, post calls
//! with fresh request ids over keep-alive HTTP from this process.
//!
//! A sample of the envelopes is verified against the server's keys, so the
//! numbers are those of real, signed decisions.

use std::time::Duration;

use anyhow::{Context as _, bail};
use lev_approval::{Call, TrustedKeys, verify};
use lev_client::Client;
use lev_protocol::api::{GateRequest, GateResponse};
use tokio::time::Instant;

/// The server child's policy for this mode.
pub const POLICY: &str =
    "[[rule]]\ntool = \"fs.read\"\ndecision = \"allow\"\nreason = \"bench: reads are allowed\"\n";

/// `lev bench gate` flags.
#[derive(Debug, Clone, clap::Args)]
pub struct GateArgs {
    /// Concurrent workers.
    #[arg(long, default_value_t = 64, value_name = "N")]
    workers: usize,
    /// Seconds measured, after the warm-up.
    #[arg(long, default_value_t = 10, value_name = "SECS")]
    duration: u64,
    /// Seconds run before measuring.
    #[arg(long, default_value_t = 2, value_name = "SECS")]
    warmup: u64,
}

fn call(worker: usize, n: usize) -> GateRequest {
    GateRequest {
        session_id: format!("bench-{worker}"),
        conversation_id: format!("bench-{worker}"),
        turn_id: format!("t-{n}"),
        request_id: format!("r-{n}"),
        caller: "bench".into(),
        tool_name: "fs.read".into(),
        args_json: format!(r#"{{"path":"/srv/data/file-{n}.txt"}}"#),
        sandbox_mode: "read-only".into(),
        required_capabilities: vec!["fs-read".into()],
        timeout_s: None,
        route: None,
        reason: None,
    }
}

/// Run the gate mode against the server at `worker`'s URL (a worker token).
///
/// # Errors
/// A call that fails, a decision other than allow, an envelope that does not
/// verify.
pub(crate) async fn gate(
    server: &super::servers::Servers,
    worker: Client,
    args: &GateArgs,
) -> anyhow::Result<()> {
    let jwks = worker.keys().await.context("reading the server's keys")?;
    let keys = TrustedKeys::parse(&serde_json::to_string(&jwks)?)?;
    let start = Instant::now();
    let measure_from = start + Duration::from_secs(args.warmup);
    let end = measure_from + Duration::from_secs(args.duration);
    let mut tasks = tokio::task::JoinSet::new();
    let started = server.meter_at(measure_from);
    for w in 0..args.workers {
        let worker = worker.clone();
        let keys = keys.clone();
        tasks.spawn(async move {
            let mut latencies = Vec::new();
            let mut n = 0usize;
            loop {
                let t0 = Instant::now();
                if t0 >= end {
                    break;
                }
                let request = call(w, n);
                let decision = worker.gate(&request).await?;
                let elapsed = t0.elapsed();
                let GateResponse::Allow { approval } = decision else {
                    bail!("{}: expected allow, found {decision:?}", request.request_id);
                };
                if n.is_multiple_of(512) {
                    let verified = verify(&approval, &keys, time::OffsetDateTime::now_utc())?;
                    verified.check_call(&Call::new(
                        &request.request_id,
                        &request.tool_name,
                        &request.args_json,
                    ))?;
                }
                if t0 >= measure_from {
                    latencies.push(elapsed);
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
    let cost = server
        .cost(&started.await.context("the meter")?, all.len(), "decision")
        .await;
    all.sort();
    let pct = |p: f64| -> String {
        if all.is_empty() {
            return "-".into();
        }
        let rank = ((all.len() as f64 * p).ceil() as usize).clamp(1, all.len());
        format!("{:.2} ms", all[rank - 1].as_secs_f64() * 1000.0)
    };
    println!(
        "gate: {} workers, {} s measured after {} s warm-up{}: {} decisions (allow by rule, signed, audited), {:.0} decisions/s, p50 {}, p99 {}, p99.9 {}, max {}; {cost}",
        args.workers,
        args.duration,
        args.warmup,
        server.describe(),
        all.len(),
        all.len() as f64 / args.duration.max(1) as f64,
        pct(0.50),
        pct(0.99),
        pct(0.999),
        pct(1.0),
    );
    Ok(())
}
