//! `lev ls`: the interactions waiting for an answer (or all of them).

use std::process::ExitCode;

use lev_client::{ListQuery, StatusFilter};
use lev_protocol::InteractionStatus;
use lev_protocol::api::InteractionView;

use crate::connect::{ClientArgs, runtime};
use crate::describe;
use crate::term::{self, Style};

/// List interactions, newest first: pending ones unless told otherwise.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Every status, not only pending.
    #[arg(long, conflicts_with = "status")]
    all: bool,
    /// Only this status.
    #[arg(long, value_parser = ["pending", "answered", "expired", "cancelled"])]
    status: Option<String>,
    /// Only this session's.
    #[arg(long, value_name = "SESSION")]
    session: Option<String>,
    /// At most this many.
    #[arg(long, default_value_t = 200, value_name = "N")]
    limit: usize,
    /// Print JSON: an array of {"request", "response", "approval"}.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    client: ClientArgs,
}

/// Run `lev ls`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let client = args.client.client()?;
    let status = if args.all {
        Some(StatusFilter::All)
    } else {
        args.status
            .as_deref()
            .and_then(InteractionStatus::parse)
            .map(StatusFilter::Only)
    };
    let items = runtime()?.block_on(async {
        let mut items: Vec<InteractionView> = Vec::new();
        let mut cursor = None;
        // The server takes 1 to 500 a page: --limit 0 asks for nothing.
        while items.len() < args.limit {
            let page = client
                .list_interactions(&ListQuery {
                    status,
                    session_id: args.session.clone(),
                    limit: Some(u32::try_from((args.limit - items.len()).min(500)).unwrap_or(500)),
                    cursor: cursor.take(),
                })
                .await?;
            items.extend(page.items);
            match page.next_cursor {
                Some(next) if items.len() < args.limit => cursor = Some(next),
                _ => break,
            }
        }
        items.truncate(args.limit);
        anyhow::Ok(items)
    })?;
    if args.json {
        crate::out::print_json(&items)?;
        return Ok(ExitCode::SUCCESS);
    }
    let style = Style::stdout();
    if items.is_empty() {
        let what = if args.all {
            "no interactions"
        } else {
            "nothing pending"
        };
        println!("{}", style.dim(what));
        return Ok(ExitCode::SUCCESS);
    }
    let show_status = args.all || args.status.is_some();
    let id_width = items
        .iter()
        .map(|v| term::one_line(v.request.id()).chars().count())
        .max()
        .unwrap_or(2)
        .max(2);
    let session_width = items
        .iter()
        .map(|v| {
            term::clip(&v.request.request.session_id, 24)
                .chars()
                .count()
        })
        .max()
        .unwrap_or(7)
        .max(7);
    let mut header = format!(
        "{:<id_width$}  {:>4}  {:<session_width$}  {:<8}  ",
        "ID", "AGE", "SESSION", "KIND"
    );
    if show_status {
        header.push_str(&format!("{:<9}  ", "STATUS"));
    }
    header.push_str("QUESTION");
    println!("{}", style.bold(&header));
    for view in &items {
        let i = &view.request;
        let id = term::one_line(i.id());
        let mut line = format!(
            "{}  {:>4}  {:<session_width$}  {:<8}  ",
            style.cyan(&format!("{id:<id_width$}")),
            term::age(i.created_at),
            term::clip(&i.request.session_id, 24),
            describe::kind_label(&i.request.kind),
        );
        if show_status {
            let padded = format!("{:<9}", i.status.as_str());
            let coloured = describe::status(style, i.status);
            line.push_str(&padded.replacen(i.status.as_str(), &coloured, 1));
            line.push_str("  ");
        }
        if let Some(tally) = describe::tally(i) {
            line.push_str(&style.yellow(&format!("[{tally}] ")));
        }
        line.push_str(&term::clip(&describe::summary(i), 100));
        println!("{line}");
    }
    Ok(ExitCode::SUCCESS)
}
