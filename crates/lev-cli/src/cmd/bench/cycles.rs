//! `lev bench cycles`: N workers each looping create -> respond -> wait.

use std::time::Duration;

use anyhow::{Context as _, bail};
use lev_client::Client;
use lev_protocol::{InteractionResponse, InteractionStatus};
use tokio::time::Instant;

use super::common::{mib, ms, percentile, question};
use super::servers::Servers;

pub(crate) async fn cycles(
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
    let started = server.meter_at(measure_from);
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
    let cost = server
        .cost(&started.await.context("the meter")?, all.len(), "cycle")
        .await;
    let rss = server.rss_kib();
    all.sort();
    println!(
        "cycles: {workers} workers, {duration} s measured after {warmup} s warm-up{}: {} cycles, {:.0} cycles/s, p50 {}, p99 {}, max {}; server RSS {}; {cost}",
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
