//! Logs: `tracing` events, written to stderr as text or JSON lines.
//!
//! [`init`] installs the subscriber (`lev serve --log-format`, `--log` /
//! `LEV_LOG`, RUST_LOG-style filters). A text line reads
//! `lev: [error: |warning: ]message key=value ...`, the form lev always
//! wrote (`lev: listening on URL` is what scripts wait for); a JSON line is
//! one object with `timestamp`, `level`, `target`, `message` and the
//! event's fields at the top level. Without [`init`] (a server inside a test
//! process) events go nowhere.
//!
//! Every request is one event of target [`REQUEST_TARGET`] (the routes'
//! middleware writes it): method, route, status, duration, request id, the
//! token's name and the interaction concerned, from the [`RequestNote`] the
//! extractors fill in. A token's secret is never a field of any event.

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

use tracing::{Event, Level, Subscriber};
use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;

/// The target of the one event each request logs.
pub const REQUEST_TARGET: &str = "lev_server::request";

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LogFormat {
    /// `lev: message key=value ...`.
    #[default]
    Text,
    /// One JSON object per line.
    Json,
}

impl LogFormat {
    /// `text` or `json`.
    ///
    /// # Errors
    /// Any other word, named.
    pub fn parse(text: &str) -> Result<Self, String> {
        match text {
            "text" => Ok(Self::Text),
            "json" => Ok(Self::Json),
            other => Err(format!("expected text or json, found {other:?}")),
        }
    }
}

static JSON: AtomicBool = AtomicBool::new(false);

/// Whether lines are JSON (read by machines: the start-up lines leave out
/// the admin token's dashboard link).
pub fn is_json() -> bool {
    JSON.load(Ordering::Relaxed)
}

/// Install the process's subscriber: `format`, and `filter` (RUST_LOG
/// syntax, e.g. `info,lev_server::request=warn`; `None` is `info`).
///
/// # Errors
/// A filter that does not parse, or a subscriber already installed.
pub fn init(format: LogFormat, filter: Option<&str>) -> Result<(), String> {
    let filter = match filter.map(str::trim).filter(|f| !f.is_empty()) {
        Some(text) => EnvFilter::builder()
            .parse(text)
            .map_err(|e| format!("{text:?}: {e}"))?,
        None => EnvFilter::new("info"),
    };
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(false);
    let installed = match format {
        LogFormat::Text => builder.event_format(TextLine).try_init(),
        LogFormat::Json => builder
            .json()
            .flatten_event(true)
            .with_current_span(false)
            .with_span_list(false)
            .try_init(),
    };
    installed.map_err(|e| format!("cannot install the log subscriber: {e}"))?;
    JSON.store(format == LogFormat::Json, Ordering::Relaxed);
    Ok(())
}

/// `lev: [error: |warning: ]message key=value ...`.
struct TextLine;

impl<S, N> FormatEvent<S, N> for TextLine
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        writer.write_str("lev: ")?;
        match *event.metadata().level() {
            Level::ERROR => writer.write_str("error: ")?,
            Level::WARN => writer.write_str("warning: ")?,
            _ => {}
        }
        ctx.field_format().format_fields(writer.by_ref(), event)?;
        writeln!(writer)
    }
}

/// Log a server fault (a 5xx, a failed background task).
pub fn error(message: &str) {
    tracing::error!("{message}");
}

/// Log a lifecycle event (start, shutdown).
pub fn info(message: &str) {
    tracing::info!("{message}");
}

/// What a request's extractors learn that its log line reports: the
/// token's name (never its secret). Put in the request's extensions by the
/// routes' middleware; set once.
#[derive(Debug, Default)]
pub struct RequestNote {
    token: OnceLock<String>,
}

impl RequestNote {
    /// A shared note for one request.
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// The authenticated token's name.
    pub fn set_token(&self, name: &str) {
        let _ = self.token.set(name.to_owned());
    }

    /// The token's name, when one was authenticated.
    pub fn token(&self) -> Option<&str> {
        self.token.get().map(String::as_str)
    }
}

/// Note the token named `name` on the request whose extensions are
/// `extensions`.
pub fn note_token(extensions: &axum::http::Extensions, name: &str) {
    if let Some(note) = extensions.get::<Arc<RequestNote>>() {
        note.set_token(name);
    }
}

/// A response extension: the interaction a request created or concerned,
/// for its log line (a path's `{id}` is read by the middleware itself).
#[derive(Debug, Clone)]
pub struct NotedInteraction(pub String);
