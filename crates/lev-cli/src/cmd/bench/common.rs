//! What the bench's modes share: their tokens, their questions, running
//! many at a time, and latencies summed up and printed.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use anyhow::Context as _;
use lev_client::Client;
use lev_protocol::api::{Role, TokenCreate};
use lev_protocol::{InteractionKind, InteractionRequest};

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

/// Run `f(0..count)` with at most `concurrency` at once; results in order.
pub(crate) async fn run_bounded<T, F, Fut>(
    count: usize,
    concurrency: usize,
    f: F,
) -> anyhow::Result<Vec<T>>
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
pub(crate) fn gauge(text: &str, name: &str) -> u64 {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .find_map(|l| {
            let rest = l.strip_prefix(name)?;
            // Labels (`{replica="..."}`) between the name and the value.
            let rest = match rest.strip_prefix('{') {
                Some(labels) => &labels[labels.find('}')? + 1..],
                None => rest,
            };
            rest.strip_prefix(' ')
        })
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

pub(crate) fn mib(kib: Option<u64>) -> String {
    match kib {
        Some(k) => format!("{:.1} MiB", k as f64 / 1024.0),
        None => "unknown".into(),
    }
}
