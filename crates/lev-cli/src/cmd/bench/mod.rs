//! `lev bench`: the load generator. It starts `lev serve` as a child process
//! on a temporary data dir and port 0, and drives it over HTTP from this
//! process, so client and server costs are apart (both share the machine).
//!
//! - `cycles`: N workers each loop create -> respond -> wait, durable at each
//!   step; prints cycles/s, the cycle latency's p50 and p99, and the CPU
//!   each cycle cost the servers (and, with `--database`, PostgreSQL, and
//!   the transactions it committed per cycle).
//! - `gate`: N workers gating calls that a policy rule allows (signed,
//!   audited, recorded for idempotency); prints decisions/s, p50 and p99,
//!   and the same costs per decision.
//! - `waiters`: N interactions with a waiter blocked on each, then all
//!   answered; prints the server's RSS while they wait and the wake latency
//!   (respond sent -> waiter woken) p50 and p99.
//! - `soak`: mixed load for N minutes, RSS, open files and latency sampled
//!   each minute (`soak.rs`).
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

//!
//! The modules, each using only those listed after it:
//!
//! - `mod.rs` (here): the flags and the dispatch to a mode, stopped by a
//!   terminating signal.
//! - `cycles`, `waiters`, `gate`, `soak`, `chaos`: one mode each.
//! - `servers`: the bench's `lev serve` children ([`servers::Servers`]) and
//!   what is read of them (`/proc`: RSS, open files).
//! - `meter`: what a measured window cost (`/proc`: CPU of the servers and
//!   of PostgreSQL; the database's committed transactions).
//! - `spawned`: one `lev serve` child process ([`spawned::Spawned`]); the
//!   integration tests start their servers with this same file.
//! - `common`: tokens, questions, latency percentiles and their printing.

mod chaos;
mod common;
mod cycles;
mod gate;
mod meter;
mod servers;
mod soak;
// Shared with the integration tests (tests/all.rs includes this file), which
// use more of it than the bench does.
#[allow(dead_code)]
pub(crate) mod spawned;
mod waiters;

use std::process::ExitCode;

use anyhow::{Context as _, bail};
use clap::Subcommand;
use lev_client::Client;
use lev_protocol::api::Role;

use common::token;
use servers::Servers;

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
    Gate(gate::GateArgs),
    /// Crash consistency: the server killed with SIGKILL under load, again
    /// and again, every acknowledged write checked after each restart.
    /// With --database and --replicas, a random replica each time.
    Chaos(chaos::ChaosArgs),
    /// A bounded soak: mixed load (cycles, gate, operator asks, event
    /// streams that connect and drop) for N minutes, with the server's RSS,
    /// open files and each operation's latency sampled every minute.
    Soak(soak::SoakArgs),
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
        Mode::Gate(_) | Mode::Soak(_) => Some(gate::POLICY),
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
        let run = chaos::chaos(
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
    for (pid, url) in server.pids().zip(&server.urls) {
        eprintln!("lev bench: server pid {pid} at {url} (open-file limit {limit})");
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
            } => cycles::cycles(&server, &worker, &approver, workers, duration, warmup).await,
            Mode::Gate(flags) => gate::gate(&server, worker, &flags).await,
            Mode::Soak(flags) => soak::soak(&server, &admin, &flags).await,
            Mode::Waiters { count, concurrency } => {
                waiters::waiters(&server, &worker, &approver, count, concurrency).await
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
