//! `lev health`: is a server up? `GET /v1/health` once, for a container's
//! HEALTHCHECK, a load balancer's probe script or a deploy step. Needs no
//! token.

use std::process::ExitCode;
use std::time::Duration;

use crate::connect::{ClientArgs, DEFAULT_URL, runtime};

/// Ask a server whether it is up: exit 0 when it answers healthy, 1 otherwise.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The lev server's URL: http:// to this machine (loopback), or https://.
    #[arg(long, env = "LEV_URL", default_value = DEFAULT_URL, value_name = "URL")]
    url: String,
    /// Trust the certificates in this PEM file for https:// instead of the
    /// system's roots.
    #[arg(long, env = "LEV_CA_CERT", value_name = "FILE")]
    ca_cert: Option<std::path::PathBuf>,
    /// Allow plain http:// to a host that is not loopback.
    #[arg(long)]
    insecure_http: bool,
    /// Give up after this many seconds.
    #[arg(long, default_value_t = 5, value_name = "SECONDS")]
    timeout: u64,
}

/// Run `lev health`.
///
/// # Errors
/// A bad URL, no answer in time, or an answer that is not healthy.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let client = ClientArgs {
        url: args.url.clone(),
        ca_cert: args.ca_cert,
        insecure_http: args.insecure_http,
        token: None,
        data_dir: None,
    }
    .anonymous_client()?;
    let health = runtime()?.block_on(async {
        tokio::time::timeout(Duration::from_secs(args.timeout), client.health()).await
    });
    let health = match health {
        Ok(answer) => answer?,
        Err(_) => anyhow::bail!(
            "{}: expected an answer within {} s, found none",
            args.url,
            args.timeout
        ),
    };
    if health.status != "ok" {
        anyhow::bail!(
            "{}: expected status \"ok\", found {:?}",
            args.url,
            health.status
        );
    }
    let replica = if health.replica_id.is_empty() {
        String::new()
    } else {
        format!(", replica {}", health.replica_id)
    };
    println!("ok: lev {} on {}{replica}", health.version, health.store);
    Ok(ExitCode::SUCCESS)
}
