//! What a measured window cost: CPU time of the `lev serve` children and,
//! with `--database`, of the PostgreSQL processes serving the database
//! (its backends and PostgreSQL's background processes), and the
//! transactions committed in it (`pg_stat_database.xact_commit`). Read from
//! `/proc` and the database at the window's start and end.

use std::collections::BTreeMap;

/// Clock ticks per second of `/proc/<pid>/stat` (`USER_HZ`, 100 on Linux).
const TICKS: f64 = 100.0;

/// One reading.
#[derive(Debug, Clone, Default)]
pub(crate) struct Reading {
    /// CPU ticks of each server child.
    lev: BTreeMap<u32, u64>,
    /// CPU ticks of each PostgreSQL process; none without a database.
    postgres: BTreeMap<u32, u64>,
    /// Committed transactions in the database.
    xact_commit: Option<i64>,
}

/// Take a reading of `servers` (process ids) and `database`.
pub(crate) async fn read(servers: &[u32], database: Option<&str>) -> Reading {
    let mut reading = Reading {
        lev: servers.iter().map(|&pid| (pid, cpu_ticks(pid))).collect(),
        ..Reading::default()
    };
    if let Some(url) = database {
        match lev_server::database_activity(url).await {
            Ok(activity) => {
                reading.xact_commit = Some(activity.xact_commit);
                reading.postgres = activity
                    .pids
                    .iter()
                    .map(|&pid| (pid, cpu_ticks(pid)))
                    .collect();
            }
            Err(e) => eprintln!("lev bench: cannot read the database's activity: {e}"),
        }
    }
    reading
}

/// What happened between `start` and `end`, per `n` operations (`what`),
/// as one line.
pub(crate) async fn report(
    start: &Reading,
    servers: &[u32],
    database: Option<&str>,
    n: usize,
    what: &str,
) -> String {
    let end = read(servers, database).await;
    let per = |x: f64| x / n.max(1) as f64;
    let lev = spent(&start.lev, &end.lev);
    let mut line = format!("per {what}: lev CPU {:.3} ms", per(lev) * 1000.0);
    if database.is_some() {
        let postgres = spent(&start.postgres, &end.postgres);
        line.push_str(&format!(
            ", PostgreSQL CPU {:.3} ms",
            per(postgres) * 1000.0
        ));
        if let (Some(a), Some(b)) = (start.xact_commit, end.xact_commit) {
            line.push_str(&format!(
                ", {:.2} transactions (pg_stat_database.xact_commit)",
                per((b - a) as f64)
            ));
        }
    }
    line
}

/// CPU seconds spent between two readings by the processes of the later
/// one (a process that started between them counts from zero).
fn spent(start: &BTreeMap<u32, u64>, end: &BTreeMap<u32, u64>) -> f64 {
    let ticks: u64 = end
        .iter()
        .map(|(pid, t)| t.saturating_sub(start.get(pid).copied().unwrap_or(0)))
        .sum();
    ticks as f64 / TICKS
}

/// User plus system CPU ticks of process `pid` (0 when gone).
fn cpu_ticks(pid: u32) -> u64 {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return 0;
    };
    // The command name is in parentheses and may hold spaces: fields are
    // counted after its closing one (state is field 3, utime 14, stime 15).
    let Some((_, rest)) = stat.rsplit_once(')') else {
        return 0;
    };
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let field = |n: usize| fields.get(n - 3).and_then(|f| f.parse::<u64>().ok());
    field(14).unwrap_or(0) + field(15).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_spends_cpu() {
        let me = std::process::id();
        let before = cpu_ticks(me);
        let mut x = 0_u64;
        let t = std::time::Instant::now();
        while t.elapsed() < std::time::Duration::from_millis(100) {
            x = x.wrapping_add(std::hint::black_box(1));
        }
        assert!(x > 0);
        assert!(cpu_ticks(me) > before, "100 ms of work shows in /proc");
        assert_eq!(cpu_ticks(u32::MAX), 0);
    }
}
