//! `lev bench waiters`: N interactions with a waiter blocked on each, then
//! all answered; the server's RSS while they wait and the wake latency
//! (respond sent -> waiter woken). With replicas, each is waited on where it
//! was created and answered on the next replica: a cross-replica wake.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use anyhow::bail;
use lev_client::Client;
use lev_protocol::{InteractionResponse, InteractionStatus};
use tokio::time::Instant;

use super::common::{gauge, mib, ms, percentile, question, run_bounded};
use super::servers::Servers;

/// Nanoseconds since `base`: one clock for every task.
fn since(base: Instant) -> u64 {
    u64::try_from(base.elapsed().as_nanos()).unwrap_or(u64::MAX)
}

/// One timestamp per interaction, written by its task.
fn stamps(count: usize) -> Arc<Vec<AtomicU64>> {
    Arc::new((0..count).map(|_| AtomicU64::new(0)).collect())
}

/// Run `lev bench waiters`.
pub(crate) async fn waiters(
    server: &Servers,
    worker: &Client,
    approver: &Client,
    count: usize,
    concurrency: usize,
) -> anyhow::Result<()> {
    let base = Instant::now();
    let rss_idle = server.rss_kib();
    let replicas = server.urls.len();
    let on_each = |client: &Client| -> anyhow::Result<Arc<Vec<Client>>> {
        Ok(Arc::new(
            (0..replicas)
                .map(|r| server.on(client, r))
                .collect::<anyhow::Result<_>>()?,
        ))
    };
    let workers = on_each(worker)?;
    let approvers = on_each(approver)?;

    // 1. Create them.
    let ids = create(&workers, count, concurrency).await?;

    // 2. A waiter on each, each on its own connection.
    let woken = stamps(count);
    let failed = Arc::new(AtomicUsize::new(0));
    let mut waiting = start_waiters(&workers, &ids, &woken, &failed, base).await;
    let t = Instant::now();
    all_waiting(server, &approvers, count).await?;
    // Let the server settle before reading its memory.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let rss_waiting = server.rss_kib();
    eprintln!(
        "lev bench: {count} waiters connected in {:.1} s; server RSS {}",
        t.elapsed().as_secs_f64(),
        mib(rss_waiting)
    );

    // 3. Answer every one, noting when each respond was sent.
    let sent = stamps(count);
    let t = Instant::now();
    answer(&approvers, &ids, &sent, concurrency, base).await?;
    let answering = t.elapsed();
    while waiting.join_next().await.is_some() {}
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

/// `count` interactions, spread over the replicas; their ids in order.
async fn create(
    workers: &Arc<Vec<Client>>,
    count: usize,
    concurrency: usize,
) -> anyhow::Result<Arc<Vec<String>>> {
    let t = Instant::now();
    let replicas = workers.len();
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
    Ok(ids)
}

/// A task waiting on each interaction (on the replica it was created on)
/// until it is answered, noting when in `woken`; failed waits are retried
/// and counted in `failed`.
async fn start_waiters(
    workers: &Arc<Vec<Client>>,
    ids: &Arc<Vec<String>>,
    woken: &Arc<Vec<AtomicU64>>,
    failed: &Arc<AtomicUsize>,
    base: Instant,
) -> tokio::task::JoinSet<()> {
    let replicas = workers.len();
    let mut waiters = tokio::task::JoinSet::new();
    for i in 0..ids.len() {
        let worker = workers[i % replicas].clone();
        let ids = ids.clone();
        let woken = woken.clone();
        let failed = failed.clone();
        waiters.spawn(async move {
            loop {
                match worker.wait(&ids[i], 300).await {
                    Ok(w) if w.status == InteractionStatus::Answered => {
                        woken[i].store(since(base), Ordering::Relaxed);
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
    waiters
}

/// Until every waiter is in: the servers count `count` of them (their
/// `lev_waiters` gauge, summed).
async fn all_waiting(server: &Servers, approvers: &[Client], count: usize) -> anyhow::Result<()> {
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
            return Ok(());
        }
        if t.elapsed() > Duration::from_secs(120) {
            bail!("only {waiting} of {count} waiters reached the server in 120 s");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Answer every interaction on the replica after its own, noting in `sent`
/// when each respond was sent.
async fn answer(
    approvers: &Arc<Vec<Client>>,
    ids: &Arc<Vec<String>>,
    sent: &Arc<Vec<AtomicU64>>,
    concurrency: usize,
    base: Instant,
) -> anyhow::Result<()> {
    let replicas = approvers.len();
    run_bounded(ids.len(), concurrency, {
        let approvers = approvers.clone();
        let ids = ids.clone();
        let sent = sent.clone();
        move |i| {
            // Answered on the next replica: with several, a cross-replica wake.
            let approver = approvers[(i + 1) % replicas].clone();
            let ids = ids.clone();
            let sent = sent.clone();
            async move {
                sent[i].store(since(base), Ordering::Relaxed);
                approver
                    .respond(&ids[i], &InteractionResponse::text(ids[i].clone(), "go"))
                    .await?;
                anyhow::Ok(())
            }
        }
    })
    .await?;
    Ok(())
}
