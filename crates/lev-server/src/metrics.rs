//! Prometheus counters, hand-written: requests by route and status,
//! interactions created and answered, waiters, pending interactions.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};

/// The server's counters.
#[derive(Debug, Default)]
pub struct Metrics {
    requests: Mutex<BTreeMap<(String, String, u16), u64>>,
    created: AtomicU64,
    answered: AtomicU64,
}

impl Metrics {
    /// Count one request to `route` (the matched path pattern) answered `status`.
    pub fn request(&self, method: &str, route: &str, status: u16) {
        let mut map = self.requests.lock().unwrap_or_else(PoisonError::into_inner);
        *map.entry((method.to_owned(), route.to_owned(), status))
            .or_default() += 1;
    }

    /// Count one created interaction.
    pub fn created(&self) {
        self.created.fetch_add(1, Ordering::Relaxed);
    }

    /// Count one answered interaction.
    pub fn answered(&self) {
        self.answered.fetch_add(1, Ordering::Relaxed);
    }

    /// The text exposition.
    pub fn render(&self, waiters: i64, pending: u64) -> String {
        let mut out = String::new();
        out.push_str("# HELP lev_http_requests_total HTTP requests by route and status.\n");
        out.push_str("# TYPE lev_http_requests_total counter\n");
        let map = self.requests.lock().unwrap_or_else(PoisonError::into_inner);
        for ((method, route, status), n) in map.iter() {
            let _ = writeln!(
                out,
                "lev_http_requests_total{{method=\"{method}\",route=\"{}\",status=\"{status}\"}} {n}",
                escape(route)
            );
        }
        drop(map);
        let _ = write!(
            out,
            "# HELP lev_interactions_created_total Interactions created by this process.\n\
             # TYPE lev_interactions_created_total counter\n\
             lev_interactions_created_total {}\n\
             # HELP lev_interactions_answered_total Interactions answered through this process.\n\
             # TYPE lev_interactions_answered_total counter\n\
             lev_interactions_answered_total {}\n\
             # HELP lev_waiters Requests waiting for an answer now.\n\
             # TYPE lev_waiters gauge\n\
             lev_waiters {waiters}\n\
             # HELP lev_interactions_pending Pending interactions in the store.\n\
             # TYPE lev_interactions_pending gauge\n\
             lev_interactions_pending {pending}\n",
            self.created.load(Ordering::Relaxed),
            self.answered.load(Ordering::Relaxed),
        );
        out
    }
}

fn escape(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}
