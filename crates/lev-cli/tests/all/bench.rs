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
