//! `lev audit [--verify]`: the audit log, and a check that its hash chain is
//! whole, done here on the client with the server's published keys.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context as _, bail};
use lev_approval::TrustedKeys;
use lev_approval::audit::{verify_chain, verify_head_signature};
use lev_protocol::api::AuditHead;
use serde::{Deserialize, Serialize};

use crate::connect::{ClientArgs, runtime};
use crate::report::HINT;
use crate::term::{self, Style};

/// The audit log: every create, answer, expiry, cancel and token change, hash-chained.
///
/// With --verify, reads the whole log, checks every entry's hash and link and
/// the head signed by the server's key (from GET /v1/keys), and exits 1 naming
/// the first defect. A chain cut short and re-signed still verifies alone:
/// keep the head with --save-head and check later with --head, so the cut shows.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  lev audit --after 100\n  lev audit --verify --save-head audit-head.json\n  lev audit --verify --head audit-head.json --save-head audit-head.json"
)]
pub struct Args {
    /// Check the chain and its signed head instead of listing entries.
    #[arg(long)]
    verify: bool,
    /// A head saved earlier (by --save-head): the chain must still hold it.
    #[arg(long, value_name = "FILE", requires = "verify")]
    head: Option<PathBuf>,
    /// After a successful check, write the current signed head to FILE.
    #[arg(long, value_name = "FILE", requires = "verify")]
    save_head: Option<PathBuf>,
    /// List only entries after this seq.
    #[arg(
        long,
        value_name = "SEQ",
        default_value_t = 0,
        conflicts_with = "verify"
    )]
    after: u64,
    /// Print JSON: the page (`items`, `next_cursor`) and the signed head (with --verify: the result).
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    client: ClientArgs,
}

/// A head as saved by --save-head: the server's signed head.
#[derive(Debug, Serialize, Deserialize)]
#[serde(untagged)]
enum SavedHead {
    Signed(AuditHead),
    Bare { seq: u64, hash: String },
}

/// Run `lev audit`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let client = args.client.client()?;
    let rt = runtime()?;
    let style = Style::stdout();
    if !args.verify {
        let page = rt
            .block_on(client.audit_from(args.after))
            .context("audit")?;
        if args.json {
            crate::out::print_json(&page)?;
            return Ok(ExitCode::SUCCESS);
        }
        for e in &page.page.items {
            let data = serde_json::to_string(&e.data).unwrap_or_default();
            println!(
                "{:>6}  {}  {:<24}  {:<16}  {}",
                e.seq,
                term::one_line(&e.at),
                style.bold(&term::one_line(&e.action)),
                term::clip(&e.actor, 16),
                term::clip(&data, 120)
            );
        }
        println!(
            "{}",
            style.dim(&format!(
                "head: entry {} {} (signed by key {})",
                page.head.seq,
                page.head.hash,
                signer(&page.head)
            ))
        );
        return Ok(ExitCode::SUCCESS);
    }

    let saved = args.head.as_deref().map(read_head).transpose()?;
    let (jwks, page) = rt
        .block_on(async { tokio::try_join!(client.keys(), client.audit_all()) })
        .context("audit --verify: reading the log")?;
    let keys_text = serde_json::to_string(&jwks)?;
    let keys = TrustedKeys::parse(&keys_text)
        .context("audit --verify: the server's keys (GET /v1/keys)")?;
    if let Some(SavedHead::Signed(head)) = &saved {
        verify_head_signature(head, &keys).with_context(|| {
            format!(
                "audit --verify: the saved head in {}",
                args.head
                    .as_deref()
                    .map(Path::display)
                    .map(|d| d.to_string())
                    .unwrap_or_default()
            )
        })?;
    }
    let saved_pair = saved.as_ref().map(|s| match s {
        SavedHead::Signed(h) => (h.seq, h.hash.as_str()),
        SavedHead::Bare { seq, hash } => (*seq, hash.as_str()),
    });
    if let Err(defect) = verify_chain(&page.page.items, &page.head, &keys, saved_pair) {
        if args.json {
            let out = serde_json::json!({
                "ok": false,
                "entries": page.page.items.len(),
                "defect": defect.to_string(),
            });
            crate::out::print_json(&out)?;
        }
        bail!("audit log is not whole: {defect}");
    }
    if let Some(path) = &args.save_head {
        let text = crate::out::json_pretty(&page.head)? + "\n";
        std::fs::write(path, text)
            .with_context(|| format!("--save-head: writing {}", path.display()))?;
    }
    if args.json {
        let out = serde_json::json!({
            "ok": true,
            "entries": page.page.items.len(),
            "head": {"seq": page.head.seq, "hash": page.head.hash},
            "signed_by": signer(&page.head),
            "extends_saved_head": saved_pair.map(|(seq, _)| seq),
        });
        crate::out::print_json(&out)?;
    } else {
        println!(
            "{}: {} entries, head {} {}, signed by key {}",
            style.green("audit log whole"),
            page.page.items.len(),
            page.head.seq,
            page.head.hash,
            signer(&page.head)
        );
        if let Some((seq, _)) = saved_pair {
            println!("extends the saved head at entry {seq}");
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn signer(head: &AuditHead) -> String {
    let kids: Vec<String> = head
        .signature
        .signatures
        .iter()
        .map(|s| term::one_line(&s.keyid))
        .collect();
    kids.join(", ")
}

fn read_head(path: &Path) -> anyhow::Result<SavedHead> {
    let text =
        lev_client::files::read_text(path, lev_client::files::limit::HEAD).context("--head")?;
    serde_json::from_str(&text).map_err(|e| {
        anyhow::anyhow!(
            "--head {}: expected a head saved by --save-head ({{\"seq\", \"hash\", \"signature\"}}), found {e}{HINT}save one with lev audit --verify --save-head FILE",
            path.display()
        )
    })
}
