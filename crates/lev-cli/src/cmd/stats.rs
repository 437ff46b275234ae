//! `lev stats`: how human review performed over a window (`GET /v1/stats`):
//! per kind and policy rule, how many were asked, approval and denial
//! rates, median and 95th percentile time to a decision, who answered most,
//! what expired.

use std::process::ExitCode;

use anyhow::Context as _;
use lev_protocol::stats::StatsGroup;

use crate::connect::{ClientArgs, runtime};
use crate::term::{self, Style};

/// How human review performed: per kind and rule, asked, decided, rates,
/// time to decision, top answerers. Needs an admin or approver token.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  lev stats\n  lev stats --since 24h\n  lev stats --from 2026-01-01T00:00:00Z --to 2026-02-01T00:00:00Z --json"
)]
pub struct Args {
    /// The window ends now and starts this long before: 24h, 7d, 30d
    /// (at most 366d) [default: 7d].
    #[arg(long, value_name = "DURATION", conflicts_with = "from")]
    since: Option<String>,
    /// The window's start, RFC 3339 (instead of --since).
    #[arg(long, value_name = "TIME")]
    from: Option<String>,
    /// The window's end, RFC 3339 [default: now].
    #[arg(long, value_name = "TIME")]
    to: Option<String>,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    client: ClientArgs,
}

fn query(args: &Args) -> String {
    let mut pairs = Vec::new();
    for (key, value) in [
        ("since", &args.since),
        ("from", &args.from),
        ("to", &args.to),
    ] {
        if let Some(v) = value {
            pairs.push(format!("{key}={}", encode(v)));
        }
    }
    pairs.join("&")
}

/// `text` percent-encoded for a query string (`+` of an offset included).
fn encode(text: &str) -> String {
    let mut out = String::new();
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~:".contains(&b) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn rate(r: Option<f64>) -> String {
    r.map_or_else(|| "-".to_owned(), |r| format!("{:.0}%", r * 100.0))
}

fn secs(s: Option<f64>) -> String {
    match s {
        None => "-".to_owned(),
        Some(s) if s < 120.0 => format!("{s:.0}s"),
        Some(s) if s < 7200.0 => format!("{:.1}m", s / 60.0),
        Some(s) => format!("{:.1}h", s / 3600.0),
    }
}

fn row(g: &StatsGroup) -> String {
    let top = g
        .top_answerers
        .iter()
        .take(3)
        .map(|a| format!("{} ({})", term::one_line(&a.name), a.count))
        .collect::<Vec<_>>()
        .join(", ");
    format!(
        "{:<16} {:<10} {:>6} {:>7} {:>8} {:>7} {:>7} {:>7} {:>7}  {}",
        term::clip(&g.kind, 16),
        term::clip(&g.rule, 10),
        g.asked,
        g.pending,
        rate(g.approval_rate),
        rate(g.denial_rate),
        g.expired,
        secs(g.p50_decision_s),
        secs(g.p95_decision_s),
        top
    )
}

/// Run `lev stats`.
///
/// # Errors
/// A bad flag, no server, a refused token.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let client = args.client.client()?;
    let stats = runtime()?
        .block_on(client.stats(&query(&args)))
        .context("stats")?;
    if args.json {
        crate::out::print_json(&stats)?;
        return Ok(ExitCode::SUCCESS);
    }
    let style = Style::stdout();
    println!(
        "{} to {}",
        stats
            .from
            .format(&time::format_description::well_known::Rfc3339)?,
        stats
            .to
            .format(&time::format_description::well_known::Rfc3339)?
    );
    println!(
        "{}",
        style.bold(&format!(
            "{:<16} {:<10} {:>6} {:>7} {:>8} {:>7} {:>7} {:>7} {:>7}  {}",
            "KIND",
            "RULE",
            "ASKED",
            "PENDING",
            "APPROVED",
            "DENIED",
            "EXPIRED",
            "P50",
            "P95",
            "TOP ANSWERERS"
        ))
    );
    for g in &stats.groups {
        println!("{}", row(g));
    }
    println!("{}", row(&stats.total));
    if stats.truncated {
        println!(
            "(the window holds more interactions than one report reads: the most recent were counted)"
        );
    }
    Ok(ExitCode::SUCCESS)
}
