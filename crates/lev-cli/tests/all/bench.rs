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

/// Whether process `pid` is gone (or a zombie waiting to be reaped).
fn gone(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit(") ")
            .next()
            .is_some_and(|rest| rest.starts_with('Z')),
    }
}

/// `lev bench cycles` for a minute, and the pid of the `lev serve` it
/// started (from its "server pid N" line).
fn bench_with_server() -> (std::process::Child, u32) {
    use std::io::{BufRead as _, BufReader};
    let mut bench = std::process::Command::new(env!("CARGO_BIN_EXE_lev"))
        .args([
            "bench",
            "cycles",
            "--workers",
            "1",
            "--duration",
            "60",
            "--warmup",
            "0",
        ])
        .env_remove("LEV_URL")
        .env_remove("LEV_TOKEN")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = bench.stderr.take().unwrap();
    let mut lines = BufReader::new(stderr).lines();
    let pid = loop {
        let line = lines
            .next()
            .expect("lev bench says its server's pid")
            .unwrap();
        if let Some(rest) = line.strip_prefix("lev bench: server pid ") {
            break rest.split(' ').next().unwrap().parse::<u32>().unwrap();
        }
    };
    // Keep draining its stderr so that it never blocks on the pipe.
    std::thread::spawn(move || lines.for_each(drop));
    (bench, pid)
}

fn wait_gone(pid: u32, within: std::time::Duration) -> bool {
    let deadline = std::time::Instant::now() + within;
    while std::time::Instant::now() < deadline {
        if gone(pid) {
            return true;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    gone(pid)
}

/// `lev bench` stopped by SIGTERM, SIGINT or SIGHUP stops the `lev serve` it
/// started (and says so, exit 128 + the signal); killed outright (SIGKILL,
/// no handler runs), its server stops by itself when its stdin closes.
#[test]
fn a_stopped_bench_leaves_no_server_running() {
    for (signal, code) in [
        ("TERM", Some(143)),
        ("INT", Some(130)),
        ("HUP", Some(129)),
        ("KILL", None),
    ] {
        let (mut bench, server) = bench_with_server();
        assert!(!gone(server), "the server runs");
        let sent = std::process::Command::new("kill")
            .args([&format!("-{signal}"), &bench.id().to_string()])
            .status()
            .unwrap();
        assert!(sent.success());
        let status = bench.wait().unwrap();
        assert_eq!(status.code(), code, "SIG{signal}: {status:?}");
        let stopped = wait_gone(server, std::time::Duration::from_secs(10));
        if !stopped {
            let _ = std::process::Command::new("kill")
                .args(["-KILL", &server.to_string()])
                .status();
        }
        assert!(
            stopped,
            "SIG{signal}: lev serve {server} still runs after its bench ended"
        );
    }
}
