//! `lev mcp proxy`: lev between any MCP client and any MCP server.
//!
//! A JSON-RPC relay, not an MCP client and server of its own: whatever is
//! not a tool call passes through as it came (unknown methods, fields and
//! protocol versions included), so both MCP protocol eras work as the two
//! ends speak them. Every `tools/call` goes through lev's gate first
//! ([`gate`]); see [`relay`] for what else it reads.
//!
//! Each side has a transport ([`transport::Link`]): downstream, lev's stdin
//! and stdout, or Streamable HTTP with `--listen` ([`http_downstream`], one
//! upstream connection per MCP session); upstream, a child process
//! (`-- CMD ARGS`) or Streamable HTTP ([`http_upstream`]).

pub mod elicit;
pub mod gate;
pub mod http_downstream;
pub mod http_upstream;
pub mod message;
pub mod relay;
pub mod sse;
pub mod transport;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use lev_approval::TrustedKeys;
use lev_client::Client;
use sha2::Digest as _;

/// What the proxy's gate calls carry, and how long things may take.
#[derive(Debug, Clone)]
pub struct Config {
    /// The lev server, with the worker's token.
    pub client: Client,
    /// The upstream's name: its tools are `mcp__NAME__TOOL` to the gate.
    pub name: String,
    /// `--session`: the session of every gate call.
    pub session: Option<String>,
    /// `--conversation` [default: the session].
    pub conversation: Option<String>,
    /// The session when neither `--session` nor an MCP session id is there.
    pub process_session: String,
    /// The caller, when the token is not bound to one.
    pub caller: Option<String>,
    /// The sandbox mode of every gate call.
    pub sandbox_mode: String,
    /// Who sees the questions, in order.
    pub route: Option<Vec<String>>,
    /// How long a tool call waits for a decision.
    pub timeout: Duration,
    /// Keys given with `--key`; `None`: the server's, pinned at first use.
    pub pinned: Option<TrustedKeys>,
    /// How often a waiting call with a progress token gets a progress
    /// notification.
    pub progress_every: Duration,
    /// How long a request forwarded upstream may go unanswered.
    pub upstream_timeout: Option<Duration>,
    /// `--elicit`: lev, with the approver token of the client's user, to
    /// record that user's answer to an elicitation as their decision.
    pub elicit: Option<Client>,
}

/// Where the upstream server is.
#[derive(Debug, Clone)]
pub enum Upstream {
    /// A process on stdio: the command and its arguments.
    Command(Vec<String>),
    /// Streamable HTTP.
    Http(http_upstream::Target),
}

/// The lev session of an MCP session id: `mcp-` and the id, or a digest of
/// it when the id is not a lev identifier.
pub fn session_of(mcp_session: &str) -> String {
    let plain = format!("mcp-{mcp_session}");
    if lev_protocol::ids::is_valid_id(&plain) {
        return plain;
    }
    let digest = sha2::Sha256::digest(mcp_session.as_bytes());
    let hex: String = digest.iter().take(16).map(|b| format!("{b:02x}")).collect();
    format!("mcp-{hex}")
}

/// A session id for this process: `mcp-NAME-PID-TIME`.
pub fn process_session(name: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let id = format!("mcp-{name}-{}-{nanos:x}", std::process::id());
    id.chars().take(lev_protocol::ids::MAX_ID_LEN).collect()
}

/// Whether `name` may name an upstream: 1 to 64 of `A-Z a-z 0-9 _ -`.
pub fn is_valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// Open the upstream: its link, and the child process to stop at the end.
///
/// # Errors
/// When the command cannot be started or the HTTP client built.
pub fn open(
    upstream: &Upstream,
    mcp_session: Arc<Mutex<Option<String>>>,
) -> anyhow::Result<(transport::Link, Option<transport::ChildGuard>)> {
    match upstream {
        Upstream::Command(command) => {
            let (link, guard) = transport::child(command)?;
            Ok((link, Some(guard)))
        }
        Upstream::Http(target) => Ok((http_upstream::connect(target.clone(), mcp_session)?, None)),
    }
}

/// Relay until the client goes away: on stdio, or on `listen` as a
/// Streamable HTTP server.
///
/// # Errors
/// When the upstream cannot be started, or the address not bound.
pub async fn serve(
    config: Config,
    upstream: Upstream,
    listen: Option<http_downstream::Listen>,
) -> anyhow::Result<()> {
    let config = Arc::new(config);
    if let Some(listen) = listen {
        return http_downstream::serve(config, upstream, listen).await;
    }
    let mcp_session = Arc::new(Mutex::new(None));
    let (link, guard) = open(&upstream, Arc::clone(&mcp_session))?;
    relay::run(config, transport::stdio(), link, mcp_session).await;
    if let Some(guard) = guard {
        guard.stop().await;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sessions() {
        assert_eq!(session_of("abc-123"), "mcp-abc-123");
        let odd = session_of("a b/c");
        assert!(lev_protocol::ids::is_valid_id(&odd), "{odd}");
        assert_eq!(odd.len(), 4 + 32);
        assert!(lev_protocol::ids::is_valid_id(&process_session("fs")));
        assert!(is_valid_name("server-everything_2"));
        assert!(!is_valid_name("a.b") && !is_valid_name("") && !is_valid_name("a__b c"));
    }
}
