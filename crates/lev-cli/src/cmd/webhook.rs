//! `lev webhook add|ls|rm|deliveries`: webhook endpoints (admin; SPEC
//! section 14).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use clap::Subcommand;
use lev_protocol::api::WebhookCreate;

use crate::connect::{ClientArgs, runtime};
use crate::term::{self, Style};

/// Webhooks: signed HTTP deliveries of lev's events (needs an admin token).
///
/// Each delivery is a POST in the Standard Webhooks scheme: headers
/// webhook-id (the same on every retry), webhook-timestamp and
/// webhook-signature (v1, HMAC-SHA256 of "id.timestamp.body" keyed by the
/// secret), body {"type", "timestamp", "data"}. Deliveries are written with
/// their events and retried with backoff until the server's retry horizon
/// (lev serve --webhook-retry); a 410 answer disables the endpoint.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: WebhookCommand,
}

#[derive(Debug, Subcommand)]
enum WebhookCommand {
    /// Add an endpoint and print its id and secret (the secret is shown
    /// this once).
    ///
    /// Examples: lev webhook add https://hooks.example.com/lev --events interaction.created
    ///           lev webhook add http://10.0.0.5:9000/ --secret-file relay.secret
    ///
    /// Never this lev server itself; loopback, this machine's addresses,
    /// link-local and cloud metadata addresses only when `lev serve
    /// --webhook-allow CIDR` allows them (e.g. 127.0.0.1/32).
    Add {
        /// Where to POST deliveries: an http:// or https:// URL (not this
        /// lev server itself).
        #[arg(value_name = "URL")]
        endpoint: String,
        /// The events to deliver, comma-separated; every event when absent.
        #[arg(long, value_name = "EVENTS", value_delimiter = ',')]
        events: Vec<String>,
        /// Read the secret (whsec_ and base64 of 24 to 64 bytes) from this
        /// file instead of making one; the file is trimmed.
        #[arg(long, value_name = "FILE")]
        secret_file: Option<PathBuf>,
        /// Print JSON: the endpoint with its secret.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        client: ClientArgs,
    },
    /// List endpoints (never their secrets).
    #[command(alias = "list")]
    Ls {
        /// Print JSON: an array of endpoints.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        client: ClientArgs,
    },
    /// Remove an endpoint and its pending deliveries.
    #[command(alias = "delete")]
    Rm {
        /// The endpoint's id (wh_...).
        id: String,
        #[command(flatten)]
        client: ClientArgs,
    },
    /// An endpoint's deliveries, newest first, with every attempt's status
    /// and error.
    Deliveries {
        /// The endpoint's id (wh_...).
        id: String,
        /// At most this many deliveries (1 to 500).
        #[arg(long, default_value_t = 20)]
        limit: u32,
        /// Print JSON: an array of deliveries.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        client: ClientArgs,
    },
}

/// Run `lev webhook`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let style = Style::stdout();
    match args.command {
        WebhookCommand::Add {
            endpoint,
            events,
            secret_file,
            json,
            client,
        } => {
            // Checked here too, so a typo is named before anything is sent.
            lev_protocol::api::check_event_kinds(&events)
                .map_err(|e| anyhow::anyhow!("--{}", term::one_line(&e)))?;
            let secret = match secret_file {
                Some(path) => {
                    let text =
                        lev_client::files::read_text(&path, lev_client::files::limit::SECRET)
                            .context("--secret-file")?;
                    let text = text.trim().to_owned();
                    if text.is_empty() {
                        anyhow::bail!("--secret-file {}: the file is empty", path.display());
                    }
                    Some(text)
                }
                None => None,
            };
            let req = WebhookCreate {
                url: endpoint,
                events: events
                    .into_iter()
                    .map(|e| e.trim().to_owned())
                    .filter(|e| !e.is_empty())
                    .collect(),
                secret,
            };
            let client = client.client()?;
            let created = runtime()?
                .block_on(client.create_webhook(&req))
                .context("webhook add")?;
            if json {
                crate::out::print_json(&created)?;
            } else {
                println!(
                    "added webhook {} -> {}",
                    style.bold(&created.id),
                    term::one_line(&created.url)
                );
                println!("events: {}", events_text(&created.events));
                if let Some(secret) = &created.secret {
                    println!("secret (shown once): {secret}");
                }
            }
        }
        WebhookCommand::Ls { json, client } => ls(json, client, style)?,
        WebhookCommand::Rm { id, client } => {
            let client = client.client()?;
            runtime()?
                .block_on(client.delete_webhook(&id))
                .with_context(|| format!("webhook rm {}", term::one_line(&id)))?;
            println!("removed webhook {}", term::one_line(&id));
        }
        WebhookCommand::Deliveries {
            id,
            limit,
            json,
            client,
        } => deliveries(&id, limit, json, client, style)?,
    }
    Ok(ExitCode::SUCCESS)
}

/// `lev webhook ls`.
fn ls(json: bool, client: ClientArgs, style: Style) -> anyhow::Result<()> {
    let client = client.client()?;
    let list = runtime()?
        .block_on(client.list_webhooks())
        .context("webhook ls")?;
    if json {
        crate::out::print_json(&list)?;
    } else if list.is_empty() {
        println!("no webhooks (lev webhook add URL adds one)");
    } else {
        println!(
            "{}",
            style.bold(&format!(
                "{:<29}  {:<5}  {:<8}  {:<40}  EVENTS",
                "ID", "KIND", "STATE", "URL"
            ))
        );
        for w in &list {
            let state = if w.disabled_at.is_some() {
                style.red("disabled")
            } else {
                style.green("enabled ")
            };
            println!(
                "{:<29}  {:<5}  {state}  {:<40}  {}",
                w.id,
                w.kind,
                term::clip(&term::one_line(&w.url), 40),
                events_text(&w.events)
            );
            if let Some(reason) = &w.disabled_reason {
                println!("  {}", style.dim(&term::one_line(reason)));
            }
        }
    }
    Ok(())
}

/// `lev webhook deliveries ID`: each delivery, and each of its attempts.
fn deliveries(
    id: &str,
    limit: u32,
    json: bool,
    client: ClientArgs,
    style: Style,
) -> anyhow::Result<()> {
    let client = client.client()?;
    let list = runtime()?
        .block_on(client.webhook_deliveries(id, limit))
        .with_context(|| format!("webhook deliveries {}", term::one_line(id)))?;
    if json {
        crate::out::print_json(&list)?;
        return Ok(());
    }
    if list.is_empty() {
        println!("no deliveries yet");
    }
    for d in &list {
        let state = match d.state.as_str() {
            "delivered" => style.green(&d.state),
            "failed" => style.red(&d.state),
            _ => style.yellow(&d.state),
        };
        let next = d
            .next_attempt_at
            .map(|t| format!(", next attempt {}", term::rfc3339(Some(t))))
            .unwrap_or_default();
        println!(
            "{}  {}  {state}  {} attempt{}{next}",
            d.id,
            d.event,
            d.attempts.len(),
            if d.attempts.len() == 1 { "" } else { "s" }
        );
        for a in &d.attempts {
            let status = a
                .status
                .map_or_else(|| "no answer".to_owned(), |s| format!("HTTP {s}"));
            let error = a
                .error
                .as_deref()
                .map(|e| format!("  {}", term::clip(&term::one_line(e), 120)))
                .unwrap_or_default();
            println!(
                "  {}  {status}  {} ms{}",
                term::rfc3339(Some(a.at)),
                a.duration_ms,
                style.dim(&error)
            );
        }
    }
    Ok(())
}

fn events_text(events: &[String]) -> String {
    if events.is_empty() {
        "every event".to_owned()
    } else {
        events.join(",")
    }
}
