//! One connection to a Codex app-server: the task that reads it, the
//! `initialize` handshake, and the check that it is a Codex lev speaks to.

use std::time::Duration;

use anyhow::{Context as _, bail};
use futures_util::StreamExt as _;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::rpc::{self, Incoming, Messages, Peer};

/// The Codex release lev was built and tested against.
pub const TESTED_VERSION: &str = "0.171.0";
/// The oldest Codex lev speaks to: its app-server protocol v2 with
/// `turn/steer`, `serverRequest/resolved` and `thread/items/list`.
const MIN_VERSION: (u64, u64, u64) = (0, 171, 0);

/// What the reader passes on.
#[derive(Debug)]
pub enum Read {
    /// A request or a notification (responses go to their requests).
    Message(Incoming),
    /// Text that is not a message of the protocol, and why.
    Garbage {
        /// The text (clipped).
        text: String,
        /// What is wrong with it.
        why: String,
    },
    /// The connection ended (with the read error, if one ended it).
    Closed(Option<String>),
}

/// Read `messages` on a task of its own: responses resolve `peer`'s
/// requests; everything else comes out of the returned channel, which ends
/// with [`Read::Closed`].
pub fn spawn_reader(mut messages: Messages, peer: Peer) -> mpsc::UnboundedReceiver<Read> {
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        let end = loop {
            match messages.next().await {
                None => break None,
                Some(Err(e)) => break Some(e.to_string()),
                Some(Ok(text)) => match rpc::parse(&text) {
                    Ok(Incoming::Response { id, outcome }) => peer.resolve(&id, outcome),
                    Ok(message) => {
                        let _ = tx.send(Read::Message(message));
                    }
                    Err(why) => {
                        let _ = tx.send(Read::Garbage {
                            text: crate::term::clip(&text, 200),
                            why,
                        });
                    }
                },
            }
        };
        peer.close();
        let _ = tx.send(Read::Closed(end));
    });
    rx
}

/// The version in an `initialize` result's `userAgent`
/// (`<client>/<version> (<os>; <arch>) ...`).
pub fn version_of(user_agent: &str) -> Option<(String, (u64, u64, u64))> {
    let product = user_agent.split_whitespace().next()?;
    let version = product.rsplit_once('/')?.1;
    let core = version.split(['-', '+']).next()?;
    let mut parts = core.split('.').map(|p| p.parse::<u64>().ok());
    let triple = (parts.next()??, parts.next()??, parts.next()??);
    if parts.next().is_some() {
        return None;
    }
    Some((version.to_owned(), triple))
}

/// Whether lev speaks to a Codex of `version`: `Ok` with a warning for a
/// release newer than the tested one.
///
/// # Errors
/// A release older than the oldest lev speaks to, or of another major version.
pub fn check_version(version: &str, triple: (u64, u64, u64)) -> Result<Option<String>, String> {
    if triple.0 != MIN_VERSION.0 || triple < MIN_VERSION {
        return Err(format!(
            "unsupported Codex version {version}: lev speaks the app-server protocol of Codex {}.{}.{} and later {}.x releases (tested with {TESTED_VERSION})",
            MIN_VERSION.0, MIN_VERSION.1, MIN_VERSION.2, MIN_VERSION.0
        ));
    }
    let tested = version_of(&format!("x/{TESTED_VERSION}")).map(|(_, t)| t);
    Ok((Some(triple) > tested).then(|| {
        format!("Codex {version} is newer than the release lev was tested with ({TESTED_VERSION}); an approval request lev cannot map is declined")
    }))
}

/// Say hello: `initialize`, check the version, `initialized`. `what` names
/// the other end in errors (`/usr/bin/codex app-server`). Returns Codex's
/// version.
///
/// # Errors
/// The other end closes, writes something that is not the protocol, does not
/// answer within 30 s, refuses, or is a Codex of a version lev does not
/// speak to; each says what was found.
pub async fn initialize(
    peer: &Peer,
    reads: &mut mpsc::UnboundedReceiver<Read>,
    what: &str,
    stderr_tail: impl Fn() -> String,
) -> anyhow::Result<String> {
    let params = json!({
        "clientInfo": {"name": "lev", "title": "lev", "version": env!("CARGO_PKG_VERSION")},
        "capabilities": {"experimentalApi": false},
    });
    let hello = peer.request("initialize", params);
    tokio::pin!(hello);
    let deadline = tokio::time::sleep(Duration::from_secs(30));
    tokio::pin!(deadline);
    // The answer, or the end of the connection (with the read error, if any).
    let result: Result<Result<Value, super::rpc::CallError>, Option<String>> = loop {
        tokio::select! {
            result = &mut hello => break Ok(result),
            read = reads.recv() => match read.unwrap_or(Read::Closed(None)) {
                Read::Message(_) => {}
                Read::Garbage { text, why } => bail!(
                    "{what} is not a Codex app-server: expected JSON-RPC messages, found {text:?} ({why}){}",
                    tail_note(&stderr_tail())
                ),
                Read::Closed(e) => break Err(e),
            },
            () = &mut deadline => bail!("{what} did not answer initialize within 30 s"),
        }
    };
    let result = match result {
        Ok(Ok(result)) => result,
        Ok(Err(super::rpc::CallError::Closed { .. })) | Err(None) => {
            closed(what, None, &stderr_tail).await?
        }
        Err(Some(e)) => closed(what, Some(e), &stderr_tail).await?,
        Ok(Err(e)) => return Err(e).with_context(|| format!("{what}: initialize")),
    };
    let user_agent = result
        .get("userAgent")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let Some((version, triple)) = version_of(user_agent) else {
        bail!(
            "{what} answered initialize without a Codex version: expected a userAgent such as \"lev/{TESTED_VERSION} (...)\", found {}",
            result
        );
    };
    match check_version(&version, triple) {
        Ok(Some(warning)) => super::bridge::say(&warning),
        Ok(None) => {}
        Err(e) => bail!("{what}: {e}"),
    }
    peer.notify("initialized", None);
    Ok(version)
}

/// The error of a connection that closed before answering `initialize`,
/// with what the other end said on its way out (given a moment to arrive).
async fn closed(
    what: &str,
    error: Option<String>,
    stderr_tail: impl Fn() -> String,
) -> anyhow::Result<Value> {
    tokio::time::sleep(Duration::from_millis(200)).await;
    bail!(
        "{what} closed the connection before answering initialize{}{}",
        error.map(|e| format!(" ({e})")).unwrap_or_default(),
        tail_note(&stderr_tail())
    )
}

fn tail_note(tail: &str) -> String {
    let tail = tail.trim();
    if tail.is_empty() {
        String::new()
    } else {
        format!("; it printed on stderr:\n{}", crate::term::multi_line(tail))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_come_from_the_user_agent() {
        assert_eq!(
            version_of("lev/0.171.0 (Debian 12.0.0; x86_64) xterm (lev; 0.1.0)"),
            Some(("0.171.0".into(), (0, 171, 0)))
        );
        assert_eq!(
            version_of("codex-tui/0.172.1-alpha.2 (Mac OS 15; arm64)"),
            Some(("0.172.1-alpha.2".into(), (0, 172, 1)))
        );
        for bad in ["", "lev", "lev/", "lev/x.y.z", "lev/1.2", "lev/1.2.3.4"] {
            assert_eq!(version_of(bad), None, "{bad}");
        }
    }

    #[test]
    fn old_and_other_major_versions_are_refused() {
        assert_eq!(check_version("0.171.0", (0, 171, 0)), Ok(None));
        assert!(check_version("0.180.2", (0, 180, 2)).unwrap().is_some());
        for (v, t) in [
            ("0.170.9", (0, 170, 9)),
            ("0.100.0", (0, 100, 0)),
            ("1.0.0", (1, 0, 0)),
        ] {
            let e = check_version(v, t).unwrap_err();
            assert!(e.contains(&format!("unsupported Codex version {v}")), "{e}");
        }
    }
}
