//! `lev bench` smoke runs: both modes finish and report. Never a speed test.

use crate::client_env::{assert_code, lev_env};

#[test]
fn bench_modes_run_and_report() {
    let run = lev_env(
        &[
            "bench",
            "cycles",
            "--workers",
            "2",
            "--duration",
            "1",
            "--warmup",
            "0",
        ],
        &[],
        b"",
    );
    assert_code(&run, 0);
    assert!(
        run.stdout.starts_with("cycles: 2 workers"),
        "{}",
        run.stdout
    );
    assert!(run.stdout.contains("cycles/s, p50 "), "{}", run.stdout);

    let run = lev_env(
        &["bench", "waiters", "--count", "20", "--concurrency", "4"],
        &[],
        b"",
    );
    assert_code(&run, 0);
    assert!(
        run.stdout.starts_with("waiters: 20 waiting; server RSS "),
        "{}",
        run.stdout
    );
    assert!(run.stdout.contains("wake latency"), "{}", run.stdout);
}

/// The crash-consistency harness, short: three SIGKILLs under load, every
/// acknowledged create, answer, gate decision, spent nonce, grant, task
/// result and spawn checked after each restart (the long run is by hand: README, Proof under faults).
#[test]
fn chaos_kills_the_server_under_load_and_finds_everything_acknowledged() {
    let run = lev_env(
        &[
            "bench",
            "chaos",
            "--kills",
            "3",
            "--workers",
            "4",
            "--max-run-ms",
            "800",
        ],
        &[],
        b"",
    );
    assert_code(&run, 0);
    assert!(
        run.stdout.starts_with("chaos: 3 SIGKILLs"),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout.contains("nothing acknowledged lost or doubled"),
        "{}",
        run.stdout
    );
    assert_eq!(run.stderr.matches("all there").count(), 3, "{}", run.stderr);
    assert!(
        acknowledged(&run.stdout, "task results") > 0,
        "{}",
        run.stdout
    );
    assert!(acknowledged(&run.stdout, "spawns") > 0, "{}", run.stdout);
}

/// The count before `what` in chaos's summary line ("..., 12 task results, ...").
pub fn acknowledged(summary: &str, what: &str) -> u64 {
    summary
        .split([',', ':', ';'])
        .find_map(|part| {
            let (n, rest) = part.trim().split_once(' ')?;
            rest.starts_with(what).then(|| n.parse().ok()).flatten()
        })
        .unwrap_or(0)
}

#[test]
fn bench_refuses_replicas_without_a_database() {
    let run = lev_env(&["bench", "cycles", "--replicas", "2"], &[], b"");
    assert_code(&run, 1);
    assert!(
        run.stderr.contains("--database postgres://"),
        "{}",
        run.stderr
    );
}

/// The soak, for one minute in samples of ten seconds: mixed load (cycles,
/// gate calls, operator asks, event streams that connect and drop), a line a
/// sample with RSS and open files, the growth summary, and no request
/// failed (the 30-minute run is by hand: README, Proof under faults).
#[test]
fn a_short_soak_samples_and_reports_no_errors() {
    let run = lev_env(
        &[
            "bench",
            "soak",
            "--minutes",
            "1",
            "--sample",
            "10",
            "--workers",
            "2",
        ],
        &[],
        b"",
    );
    assert_code(&run, 0);
    let samples = run
        .stdout
        .lines()
        .filter(|l| l.trim_start().starts_with(|c: char| c.is_ascii_digit()) && l.contains(" MiB "))
        .count();
    assert_eq!(samples, 6, "{}", run.stdout);
    let summary = run.stdout.lines().last().unwrap_or_default();
    assert!(
        summary.starts_with("soak")
            && summary.contains("open files")
            && summary.ends_with("; 0 errors"),
        "{}",
        run.stdout
    );
}
