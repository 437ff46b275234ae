//! Traces: OpenTelemetry spans of an interaction's life, exported over
//! OTLP/HTTP (protobuf) to a collector (`--otlp-endpoint`, or the standard
//! `OTEL_EXPORTER_OTLP_*` variables).
//!
//! One trace per interaction: `interaction.create` (a child of the agent's
//! span when its request carried a W3C `traceparent`), and under it
//! `interaction.notify` (each webhook or Slack delivery attempt; a webhook
//! gets the `traceparent` of its span), `interaction.vote` (each answer or
//! vote), `interaction.decision` (answered, expired, cancelled) and
//! `interaction.wait` (a worker's wait returning the final state). The
//! trace of an interaction created by this process is remembered here
//! (bounded); for any other, the trace id is derived from the interaction's
//! id, so every replica's spans of it still share one trace.
//!
//! Exporting never slows a request: a span is handed to a bounded queue
//! (`try_send`), a background task sends batches; a span that finds the
//! queue full, or whose batch the collector refused, is counted in
//! `lev_trace_spans_dropped_total`.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use lev_protocol::Interaction;
use sha2::{Digest, Sha256};
use tokio::sync::{mpsc, watch};

use crate::metrics::{Metrics, Outcome};

/// Spans waiting to be sent, at most.
const QUEUE: usize = 4096;
/// Spans per request to the collector, at most.
const BATCH: usize = 512;
/// How long a span may wait for its batch to fill.
const LINGER: Duration = Duration::from_secs(1);
/// Interactions whose trace this process remembers, at most.
const REMEMBERED: usize = 10_000;

/// Where spans go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OtlpConfig {
    /// The traces URL (`.../v1/traces`).
    pub url: String,
    /// Headers sent with each export (`OTEL_EXPORTER_OTLP_HEADERS`).
    pub headers: Vec<(String, String)>,
    /// `service.name` (`OTEL_SERVICE_NAME`, default `lev`).
    pub service: String,
}

impl OtlpConfig {
    /// From the flag `--otlp-endpoint` (a base URL: `/v1/traces` is added)
    /// and the environment as OpenTelemetry names it:
    /// `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` (used as is),
    /// `OTEL_EXPORTER_OTLP_ENDPOINT` (a base), `OTEL_EXPORTER_OTLP_HEADERS`
    /// and `OTEL_EXPORTER_OTLP_TRACES_HEADERS` (`k=v,k2=v2`, values
    /// percent-decoded), `OTEL_SERVICE_NAME`. `None` when no endpoint is set.
    ///
    /// # Errors
    /// A URL that is not http(s), or a header that is not `key=value`.
    pub fn from_flag_and_env(
        flag: Option<&str>,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Option<Self>, String> {
        let base = |b: &str| format!("{}/v1/traces", b.trim_end_matches('/'));
        let url = match (
            flag.filter(|f| !f.is_empty()),
            env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT").filter(|v| !v.is_empty()),
            env("OTEL_EXPORTER_OTLP_ENDPOINT").filter(|v| !v.is_empty()),
        ) {
            (Some(f), _, _) => base(f),
            (None, Some(t), _) => t,
            (None, None, Some(b)) => base(&b),
            (None, None, None) => return Ok(None),
        };
        let parsed = url::Url::parse(&url).map_err(|e| format!("{url:?}: {e}"))?;
        if !matches!(parsed.scheme(), "http" | "https") {
            return Err(format!("{url:?}: expected an http:// or https:// URL"));
        }
        let mut headers = Vec::new();
        for var in [
            "OTEL_EXPORTER_OTLP_HEADERS",
            "OTEL_EXPORTER_OTLP_TRACES_HEADERS",
        ] {
            for pair in env(var).unwrap_or_default().split(',') {
                if pair.trim().is_empty() {
                    continue;
                }
                let (k, v) = pair
                    .split_once('=')
                    .ok_or_else(|| format!("{var}: expected key=value pairs, found {pair:?}"))?;
                let value: String =
                    url::form_urlencoded::parse(format!("v={}", v.trim()).as_bytes())
                        .map(|(_, v)| v.into_owned())
                        .next()
                        .unwrap_or_default();
                headers.push((k.trim().to_owned(), value));
            }
        }
        let service = env("OTEL_SERVICE_NAME")
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| "lev".to_owned());
        Ok(Some(Self {
            url,
            headers,
            service,
        }))
    }
}

/// A span's place: its trace and its own id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ctx {
    /// The trace id.
    pub trace: [u8; 16],
    /// The span id.
    pub span: [u8; 8],
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex<const N: usize>(text: &str) -> Option<[u8; N]> {
    if text.len() != 2 * N || !text.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
        return None;
    }
    let mut out = [0u8; N];
    for (i, o) in out.iter_mut().enumerate() {
        *o = u8::from_str_radix(&text[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(out)
}

impl Ctx {
    /// A W3C `traceparent` (version 00; ids not all zero), else `None`.
    pub fn parse_traceparent(text: &str) -> Option<Self> {
        let mut parts = text.trim().split('-');
        let (version, trace, span, flags) =
            (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
        if version != "00" || parts.next().is_some() || unhex::<1>(flags).is_none() {
            return None;
        }
        let trace = unhex::<16>(trace).filter(|t| t.iter().any(|b| *b != 0))?;
        let span = unhex::<8>(span).filter(|s| s.iter().any(|b| *b != 0))?;
        Some(Self { trace, span })
    }

    /// The `traceparent` header of a request, when it carries a valid one.
    pub fn from_headers(headers: &axum::http::HeaderMap) -> Option<Self> {
        headers
            .get("traceparent")
            .and_then(|v| v.to_str().ok())
            .and_then(Self::parse_traceparent)
    }

    /// This span as a `traceparent` (sampled).
    pub fn traceparent(&self) -> String {
        format!("00-{}-{}-01", hex(&self.trace), hex(&self.span))
    }
}

fn random<const N: usize>() -> [u8; N] {
    let mut b = [0u8; N];
    if getrandom::fill(&mut b).is_err() || b.iter().all(|x| *x == 0) {
        // Never all zero (an invalid id): the clock's nanoseconds.
        let n = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos())
            .to_le_bytes();
        for (i, o) in b.iter_mut().enumerate() {
            *o = n[i % n.len()] | 1;
        }
    }
    b
}

/// A new span id.
pub fn span_id() -> [u8; 8] {
    random()
}

/// The trace an interaction's spans share when this process has no record
/// of it: derived from its id, the same on every replica.
fn derived(id: &str) -> Ctx {
    let digest = Sha256::digest(format!("lev trace {id}").as_bytes());
    let mut trace = [0u8; 16];
    trace.copy_from_slice(&digest[..16]);
    let mut span = [0u8; 8];
    span.copy_from_slice(&digest[16..24]);
    Ctx { trace, span }
}

/// What a span says: its name, kind, times and attributes.
#[derive(Debug, Clone)]
pub struct Span {
    /// Its place.
    pub ctx: Ctx,
    /// Its parent, when it has one.
    pub parent: Option<[u8; 8]>,
    /// `interaction.create`, ...
    pub name: &'static str,
    /// OTLP's SpanKind: 1 internal, 2 server, 3 client.
    pub kind: i32,
    /// When it started.
    pub start: SystemTime,
    /// When it ended.
    pub end: SystemTime,
    /// Its attributes.
    pub attributes: Vec<(&'static str, String)>,
}

/// OTLP span kinds.
pub const INTERNAL: i32 = 1;
/// The span of a request served.
pub const SERVER: i32 = 2;
/// The span of a request made.
pub const CLIENT: i32 = 3;

/// The server's tracer: off (every call a no-op) unless configured.
#[derive(Debug)]
pub struct Tracer {
    queue: Option<mpsc::Sender<Span>>,
    metrics: Arc<Metrics>,
    /// The create span of interactions made here, oldest first out.
    remembered: Mutex<(HashMap<String, Ctx>, VecDeque<String>)>,
}

impl Tracer {
    /// A tracer that records nothing.
    pub fn off(metrics: Arc<Metrics>) -> Self {
        Self {
            queue: None,
            metrics,
            remembered: Mutex::default(),
        }
    }

    /// A tracer exporting to `config`, its exporter spawned with `spawn`
    /// (the server's task tracker); it sends what is queued and ends at
    /// shutdown.
    ///
    /// # Errors
    /// When the HTTP client cannot be built (TLS roots).
    pub fn start(
        config: OtlpConfig,
        metrics: Arc<Metrics>,
        shutdown: watch::Receiver<bool>,
        spawn: impl FnOnce(std::pin::Pin<Box<dyn Future<Output = ()> + Send>>),
    ) -> Result<Self, String> {
        let client = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(5))
            .timeout(Duration::from_secs(10))
            .no_proxy()
            .user_agent(concat!("lev/", env!("CARGO_PKG_VERSION")))
            .tls_backend_preconfigured(lev_io::outbound_tls_config()?)
            .build()
            .map_err(|e| format!("cannot build the OTLP HTTP client: {e}"))?;
        let (tx, rx) = mpsc::channel(QUEUE);
        spawn(Box::pin(export(
            rx,
            client,
            config,
            Arc::clone(&metrics),
            shutdown,
        )));
        Ok(Self {
            queue: Some(tx),
            metrics,
            remembered: Mutex::default(),
        })
    }

    /// Whether spans are recorded.
    pub fn enabled(&self) -> bool {
        self.queue.is_some()
    }

    /// Queue `span`; dropped (and counted) when the queue is full.
    pub fn record(&self, span: Span) {
        if let Some(q) = &self.queue
            && q.try_send(span).is_err()
        {
            self.metrics.spans_dropped(1);
        }
    }

    /// The create span of interaction `id`: remembered, else derived.
    pub fn of(&self, id: &str) -> Ctx {
        let map = self
            .remembered
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        map.0.get(id).copied().unwrap_or_else(|| derived(id))
    }

    /// Interaction `id` was created by a request that started at `start`,
    /// under the agent's span `agent` (its `traceparent`) when given.
    pub fn created(&self, id: &str, agent: Option<Ctx>, start: SystemTime, i: &Interaction) {
        if !self.enabled() {
            return;
        }
        let ctx = match agent {
            Some(a) => Ctx {
                trace: a.trace,
                span: span_id(),
            },
            None => derived(id),
        };
        {
            let mut map = self
                .remembered
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            if map.0.insert(id.to_owned(), ctx).is_none() {
                map.1.push_back(id.to_owned());
            }
            while map.1.len() > REMEMBERED {
                if let Some(old) = map.1.pop_front() {
                    map.0.remove(&old);
                }
            }
        }
        self.record(Span {
            ctx,
            parent: agent.map(|a| a.span),
            name: "interaction.create",
            kind: SERVER,
            start,
            end: SystemTime::now(),
            attributes: attributes(id, i),
        });
    }

    /// The place of a new span under interaction `id`'s create span (to
    /// pass on as a `traceparent` before [`Tracer::finish`] records it);
    /// `None` when tracing is off.
    pub fn begin(&self, id: &str) -> Option<Ctx> {
        if !self.enabled() {
            return None;
        }
        Some(Ctx {
            trace: self.of(id).trace,
            span: span_id(),
        })
    }

    /// Record the span at `ctx` (from [`Tracer::begin`]) under interaction
    /// `id`'s create span, from `start` to now.
    pub fn finish(
        &self,
        id: &str,
        ctx: Ctx,
        name: &'static str,
        kind: i32,
        start: SystemTime,
        attributes: Vec<(&'static str, String)>,
    ) {
        let parent = self.of(id);
        let mut all = vec![("lev.interaction.id", id.to_owned())];
        all.extend(attributes);
        self.record(Span {
            ctx,
            parent: Some(parent.span),
            name,
            kind,
            start,
            end: SystemTime::now(),
            attributes: all,
        });
    }

    /// A span under interaction `id`'s create span, from `start` to now.
    pub fn child(
        &self,
        id: &str,
        name: &'static str,
        kind: i32,
        start: SystemTime,
        attributes: Vec<(&'static str, String)>,
    ) {
        if let Some(ctx) = self.begin(id) {
            self.finish(id, ctx, name, kind, start, attributes);
        }
    }

    /// `interaction` left pending (answered, expired, cancelled).
    pub fn decided(&self, interaction: &Interaction, approved: Option<bool>) {
        if !self.enabled() {
            return;
        }
        let Some(outcome) = Outcome::of(interaction, approved) else {
            return;
        };
        let id = interaction.id();
        let mut attrs = vec![("lev.outcome", outcome.as_str().to_owned())];
        if let Some(by) = &interaction.answered_by {
            attrs.push(("lev.answered_by", by.clone()));
        }
        // The create span stays remembered for the worker's wait, which may
        // return after this; the oldest go first once there are too many.
        self.child(
            id,
            "interaction.decision",
            INTERNAL,
            SystemTime::now(),
            attrs,
        );
    }
}

fn attributes(id: &str, i: &Interaction) -> Vec<(&'static str, String)> {
    vec![
        ("lev.interaction.id", id.to_owned()),
        ("lev.session.id", i.request.session_id.clone()),
        (
            "lev.interaction.kind",
            i.request.kind.type_name().to_owned(),
        ),
        ("lev.rule", crate::metrics::rule_of(i)),
    ]
}

/// The exporter: batches from `rx` to the collector until shutdown, then
/// what is left.
async fn export(
    mut rx: mpsc::Receiver<Span>,
    client: reqwest::Client,
    config: OtlpConfig,
    metrics: Arc<Metrics>,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut batch: Vec<Span> = Vec::new();
    loop {
        let stop = tokio::select! {
            got = rx.recv() => match got {
                Some(span) => {
                    batch.push(span);
                    false
                }
                None => true,
            },
            () = tokio::time::sleep(LINGER), if !batch.is_empty() => false,
            () = crate::shutdown::stopped(&mut shutdown) => true,
        };
        while batch.len() < BATCH {
            match rx.try_recv() {
                Ok(span) => batch.push(span),
                Err(_) => break,
            }
        }
        if !batch.is_empty() && (stop || batch.len() >= BATCH || linger_over(&batch)) {
            send(&client, &config, &metrics, std::mem::take(&mut batch)).await;
        }
        if stop {
            rx.close();
            while let Ok(span) = rx.try_recv() {
                batch.push(span);
            }
            if !batch.is_empty() {
                send(&client, &config, &metrics, batch).await;
            }
            return;
        }
    }
}

/// Whether the oldest span of `batch` ended a linger ago.
fn linger_over(batch: &[Span]) -> bool {
    batch
        .first()
        .and_then(|s| s.end.elapsed().ok())
        .is_none_or(|waited| waited >= LINGER)
}

async fn send(client: &reqwest::Client, config: &OtlpConfig, metrics: &Metrics, batch: Vec<Span>) {
    let n = batch.len() as u64;
    let body = prost::Message::encode_to_vec(&proto::request(&config.service, batch));
    let mut req = client
        .post(&config.url)
        .header("content-type", "application/x-protobuf")
        .body(body);
    for (k, v) in &config.headers {
        req = req.header(k, v);
    }
    let ok = match req.send().await {
        Ok(r) if r.status().is_success() => true,
        Ok(r) => {
            crate::log::error(&format!("otlp: the collector answered {}", r.status()));
            false
        }
        Err(e) => {
            crate::log::error(&format!("otlp: {e}"));
            false
        }
    };
    if !ok {
        metrics.spans_dropped(n);
    }
}

fn nanos(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

/// The OTLP trace messages (opentelemetry/proto/trace/v1 and
/// collector/trace/v1), the fields lev sends, declared with prost.
#[allow(missing_docs, clippy::doc_markdown)]
mod proto {
    use crate::trace::{Span, nanos};

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct ExportTraceServiceRequest {
        #[prost(message, repeated, tag = "1")]
        pub resource_spans: Vec<ResourceSpans>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct ResourceSpans {
        #[prost(message, optional, tag = "1")]
        pub resource: Option<Resource>,
        #[prost(message, repeated, tag = "2")]
        pub scope_spans: Vec<ScopeSpans>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Resource {
        #[prost(message, repeated, tag = "1")]
        pub attributes: Vec<KeyValue>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct ScopeSpans {
        #[prost(message, optional, tag = "1")]
        pub scope: Option<InstrumentationScope>,
        #[prost(message, repeated, tag = "2")]
        pub spans: Vec<OtlpSpan>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct InstrumentationScope {
        #[prost(string, tag = "1")]
        pub name: String,
        #[prost(string, tag = "2")]
        pub version: String,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct OtlpSpan {
        #[prost(bytes = "vec", tag = "1")]
        pub trace_id: Vec<u8>,
        #[prost(bytes = "vec", tag = "2")]
        pub span_id: Vec<u8>,
        #[prost(bytes = "vec", tag = "4")]
        pub parent_span_id: Vec<u8>,
        #[prost(string, tag = "5")]
        pub name: String,
        #[prost(int32, tag = "6")]
        pub kind: i32,
        #[prost(fixed64, tag = "7")]
        pub start_time_unix_nano: u64,
        #[prost(fixed64, tag = "8")]
        pub end_time_unix_nano: u64,
        #[prost(message, repeated, tag = "9")]
        pub attributes: Vec<KeyValue>,
        #[prost(fixed32, tag = "16")]
        pub flags: u32,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct KeyValue {
        #[prost(string, tag = "1")]
        pub key: String,
        #[prost(message, optional, tag = "2")]
        pub value: Option<AnyValue>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct AnyValue {
        #[prost(oneof = "Value", tags = "1")]
        pub value: Option<Value>,
    }

    #[derive(Clone, PartialEq, prost::Oneof)]
    pub enum Value {
        #[prost(string, tag = "1")]
        StringValue(String),
    }

    fn kv(key: &str, value: String) -> KeyValue {
        KeyValue {
            key: key.to_owned(),
            value: Some(AnyValue {
                value: Some(Value::StringValue(value)),
            }),
        }
    }

    pub fn request(service: &str, spans: Vec<Span>) -> ExportTraceServiceRequest {
        let spans = spans
            .into_iter()
            .map(|s| OtlpSpan {
                trace_id: s.ctx.trace.to_vec(),
                span_id: s.ctx.span.to_vec(),
                parent_span_id: s.parent.map(|p| p.to_vec()).unwrap_or_default(),
                name: s.name.to_owned(),
                kind: s.kind,
                start_time_unix_nano: nanos(s.start),
                end_time_unix_nano: nanos(s.end),
                attributes: s.attributes.into_iter().map(|(k, v)| kv(k, v)).collect(),
                // W3C trace flags: sampled.
                flags: 0x01,
            })
            .collect();
        ExportTraceServiceRequest {
            resource_spans: vec![ResourceSpans {
                resource: Some(Resource {
                    attributes: vec![kv("service.name", service.to_owned())],
                }),
                scope_spans: vec![ScopeSpans {
                    scope: Some(InstrumentationScope {
                        name: "lev".to_owned(),
                        version: env!("CARGO_PKG_VERSION").to_owned(),
                    }),
                    spans,
                }],
            }],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn traceparent_round_trips_and_refuses_bad_ones() {
        let tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let ctx = Ctx::parse_traceparent(tp).unwrap();
        assert_eq!(ctx.traceparent(), tp);
        for bad in [
            "",
            "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x",
        ] {
            assert!(Ctx::parse_traceparent(bad).is_none(), "{bad}");
        }
    }

    #[test]
    fn the_endpoint_comes_from_the_flag_then_the_environment() {
        let env = |vars: &'static [(&'static str, &'static str)]| {
            move |k: &str| {
                vars.iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| (*v).to_owned())
            }
        };
        assert_eq!(OtlpConfig::from_flag_and_env(None, env(&[])).unwrap(), None);
        let c = OtlpConfig::from_flag_and_env(Some("http://c:4318/"), env(&[]))
            .unwrap()
            .unwrap();
        assert_eq!(c.url, "http://c:4318/v1/traces");
        let c = OtlpConfig::from_flag_and_env(
            None,
            env(&[
                ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://base:4318"),
                ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://t:1/custom"),
                ("OTEL_EXPORTER_OTLP_HEADERS", "api-key=a%20b, x=1"),
                ("OTEL_SERVICE_NAME", "lev-eu"),
            ]),
        )
        .unwrap()
        .unwrap();
        assert_eq!(c.url, "http://t:1/custom");
        assert_eq!(
            c.headers,
            [
                ("api-key".to_owned(), "a b".to_owned()),
                ("x".to_owned(), "1".to_owned())
            ]
        );
        assert_eq!(c.service, "lev-eu");
        assert!(OtlpConfig::from_flag_and_env(Some("ftp://x"), env(&[])).is_err());
        assert!(
            OtlpConfig::from_flag_and_env(
                Some("http://x"),
                env(&[("OTEL_EXPORTER_OTLP_HEADERS", "novalue")])
            )
            .is_err()
        );
    }
}
