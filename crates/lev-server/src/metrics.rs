//! The metrics of `/metrics`, kept with `prometheus-client` (the Prometheus
//! project's Rust library) and written as OpenMetrics text.
//!
//! Every family carries the `replica` label (this process's id among the
//! servers sharing a store). Names follow Prometheus' conventions: the unit
//! in the name (`_seconds`), counters ending `_total`. README's
//! "Observability" lists them; docs/grafana/lev.json is built on them.

use std::borrow::Cow;
use std::fmt::Write as _;
use std::time::Duration;

use lev_protocol::{Interaction, InteractionStatus};
use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue, LabelValueEncoder};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::{Registry, Unit};

/// A label value, escaped as the text format requires (`\`, `"`, newline):
/// the library writes values as they are.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Text(pub String);

impl EncodeLabelValue for Text {
    fn encode(&self, encoder: &mut LabelValueEncoder) -> Result<(), std::fmt::Error> {
        for c in self.0.chars() {
            match c {
                '\\' => encoder.write_str("\\\\")?,
                '"' => encoder.write_str("\\\"")?,
                '\n' => encoder.write_str("\\n")?,
                c => encoder.write_char(c)?,
            }
        }
        Ok(())
    }
}

impl From<&str> for Text {
    fn from(s: &str) -> Self {
        Self(s.to_owned())
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct RequestLabels {
    method: Text,
    route: Text,
    status: u16,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct RouteLabels {
    method: Text,
    route: Text,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct StoreLabels {
    backend: Text,
    operation: Text,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct BackendLabels {
    backend: Text,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct DecisionLabels {
    kind: Text,
    rule: Text,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct OutcomeLabels {
    outcome: Text,
    kind: Text,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct PendingLabels {
    session: Text,
    kind: Text,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct ChannelLabels {
    channel: Text,
}

type Histograms<L> = Family<L, Histogram, fn() -> Histogram>;

/// Request and store latencies: 0.5 ms to about 16 s.
fn latency() -> Histogram {
    Histogram::new(prometheus_client::metrics::histogram::exponential_buckets(
        0.0005, 2.0, 16,
    ))
}

/// Time to a decision: 1 s to about 9 h.
fn decision() -> Histogram {
    Histogram::new([
        1.0, 5.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0, 7200.0, 14400.0, 32400.0,
    ])
}

/// Where a decision's outcome came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// A tool approval approved.
    Approved,
    /// A tool approval denied (by a person, or its timeout's deny).
    Denied,
    /// Another kind answered.
    Answered,
    /// Timed out with `on_timeout: deny`.
    Expired,
    /// Cancelled (by its worker, or a timeout's cancel).
    Cancelled,
}

impl Outcome {
    /// The `outcome` label.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Approved => "approved",
            Self::Denied => "denied",
            Self::Answered => "answered",
            Self::Expired => "expired",
            Self::Cancelled => "cancelled",
        }
    }

    /// The outcome of an interaction out of `pending`; `None` while pending.
    pub fn of(interaction: &Interaction, approved: Option<bool>) -> Option<Self> {
        match interaction.status {
            InteractionStatus::Pending => None,
            InteractionStatus::Expired => Some(Self::Expired),
            InteractionStatus::Cancelled => Some(Self::Cancelled),
            InteractionStatus::Answered => Some(match approved {
                Some(true) => Self::Approved,
                Some(false) => Self::Denied,
                None => Self::Answered,
            }),
        }
    }
}

/// The policy rule an interaction was asked by: `line N` of the policy
/// file, else `none` (asked directly, not through the gate).
pub fn rule_of(interaction: &Interaction) -> String {
    match interaction.request.gate.as_ref().and_then(|g| g.rule_line) {
        Some(line) => format!("line {line}"),
        None => "none".to_owned(),
    }
}

/// The server's metrics.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    backend: Text,
    requests: Family<RequestLabels, Counter>,
    request_seconds: Histograms<RouteLabels>,
    store_seconds: Histograms<StoreLabels>,
    store_errors: Family<BackendLabels, Counter>,
    created: Counter,
    answered: Counter,
    decisions: Family<OutcomeLabels, Counter>,
    decision_seconds: Histograms<DecisionLabels>,
    escalations: Counter,
    delivery_attempts: Family<ChannelLabels, Counter>,
    delivery_failures: Family<ChannelLabels, Counter>,
    operator_connections: Gauge,
    spans_dropped: Counter,
    waiters: Gauge,
    pending: Family<PendingLabels, Gauge>,
    /// One scrape at a time sets the scrape-time gauges and renders them.
    render: std::sync::Mutex<()>,
}

impl Metrics {
    /// The metrics of replica `replica` over a `backend` store.
    pub fn new(replica: &str, backend: &str) -> Self {
        let mut registry = Registry::with_prefix_and_labels(
            "lev",
            [(Cow::Borrowed("replica"), Cow::Owned(replica.to_owned()))].into_iter(),
        );
        let m = Self {
            registry: Registry::default(),
            backend: Text::from(backend),
            requests: Family::default(),
            request_seconds: Family::new_with_constructor(latency),
            store_seconds: Family::new_with_constructor(latency),
            store_errors: Family::default(),
            created: Counter::default(),
            answered: Counter::default(),
            decisions: Family::default(),
            decision_seconds: Family::new_with_constructor(decision),
            escalations: Counter::default(),
            delivery_attempts: Family::default(),
            delivery_failures: Family::default(),
            operator_connections: Gauge::default(),
            spans_dropped: Counter::default(),
            waiters: Gauge::default(),
            pending: Family::default(),
            render: std::sync::Mutex::new(()),
        };
        registry.register(
            "http_requests",
            "HTTP requests by method, route (the matched pattern) and status",
            m.requests.clone(),
        );
        registry.register_with_unit(
            "http_request_duration",
            "Time to answer an HTTP request (to its response's head), by method and route",
            Unit::Seconds,
            m.request_seconds.clone(),
        );
        registry.register_with_unit(
            "store_operation_duration",
            "Time of the store's interaction operations, by backend and operation",
            Unit::Seconds,
            m.store_seconds.clone(),
        );
        registry.register(
            "store_errors",
            "Store calls that failed, by backend",
            m.store_errors.clone(),
        );
        registry.register(
            "interactions_created",
            "Interactions created through this process",
            m.created.clone(),
        );
        registry.register(
            "interactions_answered",
            "Interactions answered through this process",
            m.answered.clone(),
        );
        registry.register(
            "decisions",
            "Interactions out of pending through this process, by outcome \
             (approved, denied, answered, expired, cancelled) and kind",
            m.decisions.clone(),
        );
        registry.register_with_unit(
            "decision_duration",
            "Time from an interaction's creation to its decision, by kind and policy rule",
            Unit::Seconds,
            m.decision_seconds.clone(),
        );
        registry.register(
            "escalations",
            "Escalations recorded (a quorum's escalate_after, an operator's escalation to people)",
            m.escalations.clone(),
        );
        registry.register(
            "delivery_attempts",
            "Outbound delivery attempts by channel (webhook, slack)",
            m.delivery_attempts.clone(),
        );
        registry.register(
            "delivery_failures",
            "Outbound delivery attempts that failed, by channel",
            m.delivery_failures.clone(),
        );
        registry.register(
            "operator_connections",
            "Operator WebSocket connections open on this process",
            m.operator_connections.clone(),
        );
        registry.register(
            "trace_spans_dropped",
            "Trace spans dropped because the export queue was full or the collector failed",
            m.spans_dropped.clone(),
        );
        registry.register(
            "waiters",
            "Requests waiting for an answer on this process now",
            m.waiters.clone(),
        );
        registry.register(
            "interactions_pending",
            "Pending interactions in the store, by session and kind",
            m.pending.clone(),
        );
        // Series that start at zero, so a rate over them is never absent.
        drop(m.store_error_series());
        for channel in ["webhook", "slack"] {
            let labels = ChannelLabels {
                channel: channel.into(),
            };
            drop(m.delivery_attempts.get_or_create(&labels));
            drop(m.delivery_failures.get_or_create(&labels));
        }
        Self { registry, ..m }
    }

    /// Count one request answered `status` in `elapsed`.
    pub fn request(&self, method: &str, route: &str, status: u16, elapsed: Duration) {
        self.requests
            .get_or_create(&RequestLabels {
                method: method.into(),
                route: route.into(),
                status,
            })
            .inc();
        self.request_seconds
            .get_or_create(&RouteLabels {
                method: method.into(),
                route: route.into(),
            })
            .observe(elapsed.as_secs_f64());
    }

    /// One store operation took `elapsed`; `ok` is whether it succeeded.
    pub fn store_call(&self, operation: &'static str, elapsed: Duration, ok: bool) {
        self.store_seconds
            .get_or_create(&StoreLabels {
                backend: self.backend.clone(),
                operation: operation.into(),
            })
            .observe(elapsed.as_secs_f64());
        if !ok {
            self.store_error();
        }
    }

    /// One store call failed.
    pub fn store_error(&self) {
        self.store_error_series().inc();
    }

    fn store_error_series(&self) -> Counter {
        self.store_errors.get_or_create_owned(&BackendLabels {
            backend: self.backend.clone(),
        })
    }

    /// Count one created interaction.
    pub fn created(&self) {
        self.created.inc();
    }

    /// Count one answered interaction.
    pub fn answered(&self) {
        self.answered.inc();
    }

    /// `interaction` just left `pending` through this process.
    pub fn decided(&self, interaction: &Interaction, approved: Option<bool>) {
        let Some(outcome) = Outcome::of(interaction, approved) else {
            return;
        };
        let kind = Text::from(interaction.request.kind.type_name());
        self.decisions
            .get_or_create(&OutcomeLabels {
                outcome: outcome.as_str().into(),
                kind: kind.clone(),
            })
            .inc();
        let at = interaction
            .answered_at
            .unwrap_or_else(time::OffsetDateTime::now_utc);
        let seconds = (at - interaction.created_at).as_seconds_f64().max(0.0);
        self.decision_seconds
            .get_or_create(&DecisionLabels {
                kind,
                rule: Text(rule_of(interaction)),
            })
            .observe(seconds);
    }

    /// Count one escalation.
    pub fn escalated(&self) {
        self.escalations.inc();
    }

    /// One outbound delivery attempt on `channel` (`webhook`, `slack`);
    /// `ok` is whether it was delivered.
    pub fn delivery(&self, channel: &'static str, ok: bool) {
        let labels = ChannelLabels {
            channel: channel.into(),
        };
        self.delivery_attempts.get_or_create(&labels).inc();
        if !ok {
            self.delivery_failures.get_or_create(&labels).inc();
        }
    }

    /// An operator connection opened (`true`) or closed.
    pub fn operator_connection(&self, open: bool) {
        if open {
            self.operator_connections.inc();
        } else {
            self.operator_connections.dec();
        }
    }

    /// `n` trace spans were dropped.
    pub fn spans_dropped(&self, n: u64) {
        self.spans_dropped.inc_by(n);
    }

    /// The text exposition (OpenMetrics), with the scrape-time gauges:
    /// `waiters`, and `pending` as (session, kind, count).
    pub fn render(&self, waiters: i64, pending: &[(String, String, i64)]) -> String {
        let _one = self
            .render
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        self.waiters.set(waiters);
        self.pending.clear();
        for (session, kind, n) in pending {
            self.pending
                .get_or_create(&PendingLabels {
                    session: Text(session.clone()),
                    kind: Text(kind.clone()),
                })
                .set(*n);
        }
        let mut out = String::new();
        if prometheus_client::encoding::text::encode(&mut out, &self.registry).is_err() {
            out.clear();
            let _ = writeln!(out, "# EOF");
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_values_are_escaped() {
        let m = Metrics::new("rp_1", "sqlite");
        m.request("GET", "a\"b\\c\nd", 200, Duration::from_millis(3));
        let text = m.render(0, &[]);
        assert!(text.contains(r#"route="a\"b\\c\nd""#), "{text}");
        assert!(text.ends_with("# EOF\n"), "{text}");
    }
}
