//! One side of the relay as two channels, whatever carries it: stdio lines
//! (lev's own stdin and stdout, or an upstream child process), or Streamable
//! HTTP ([`super::http_upstream`], [`super::http_downstream`]).

use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt as _, AsyncRead, AsyncWrite, AsyncWriteExt as _, BufReader};
use tokio::sync::{mpsc, watch};

use super::message::Message;

/// The longest one message may be (an image or a file's content fits).
pub const MAX_MESSAGE: usize = 64 * 1024 * 1024;

/// What comes from one side.
#[derive(Debug)]
pub enum Incoming {
    /// A message.
    Message(Message),
    /// Text that is not JSON (the error).
    Unparsable(String),
    /// The side is gone, and why.
    Closed(String),
}

/// One side of the relay: what to send it, and what it sent.
#[derive(Debug)]
pub struct Link {
    /// Messages for it (unbounded: the relay never waits on a slow side
    /// while the other waits on the relay).
    pub tx: mpsc::UnboundedSender<Message>,
    /// Messages from it.
    pub rx: mpsc::Receiver<Incoming>,
}

/// The messages of one line or body, as [`Incoming`]s.
pub fn parse(text: String) -> Vec<Incoming> {
    match serde_json::from_str(&text) {
        Ok(value) => Message::split(value, text)
            .into_iter()
            .map(Incoming::Message)
            .collect(),
        Err(e) => vec![Incoming::Unparsable(e.to_string())],
    }
}

/// Newline-delimited JSON-RPC on `reader` and `writer` (MCP's stdio
/// transport). `closed` says why the reader ended, given the time to say it.
pub fn lines<R, W>(reader: R, writer: W, closed: ClosedReason) -> Link
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (tx, mut outgoing) = mpsc::unbounded_channel::<Message>();
    let (incoming, rx) = mpsc::channel(64);
    tokio::spawn(async move {
        let mut writer = writer;
        while let Some(message) = outgoing.recv().await {
            let mut text = message.text();
            text.push('\n');
            if writer.write_all(text.as_bytes()).await.is_err() || writer.flush().await.is_err() {
                break;
            }
        }
        // Dropped: the other side reads its end of input.
    });
    tokio::spawn(async move {
        let mut reader = BufReader::new(reader);
        let why = loop {
            match read_line(&mut reader).await {
                Ok(Some(line)) => {
                    if line.trim().is_empty() {
                        continue;
                    }
                    for item in parse(line) {
                        if incoming.send(item).await.is_err() {
                            return;
                        }
                    }
                }
                Ok(None) => break closed.reason().await,
                Err(e) => break format!("{}: {e}", closed.reason().await),
            }
        };
        let _ = incoming.send(Incoming::Closed(why)).await;
    });
    Link { tx, rx }
}

/// One line of at most [`MAX_MESSAGE`] bytes, without its newline; `None`
/// at the end of input.
async fn read_line<R: AsyncRead + Unpin>(
    reader: &mut BufReader<R>,
) -> std::io::Result<Option<String>> {
    let mut line = Vec::new();
    loop {
        let buf = reader.fill_buf().await?;
        if buf.is_empty() {
            return if line.is_empty() {
                Ok(None)
            } else {
                Ok(Some(String::from_utf8_lossy(&line).into_owned()))
            };
        }
        let (taken, done) = match buf.iter().position(|b| *b == b'\n') {
            Some(n) => (n + 1, true),
            None => (buf.len(), false),
        };
        line.extend_from_slice(&buf[..taken]);
        reader.consume(taken);
        if line.len() > MAX_MESSAGE + 1 {
            return Err(std::io::Error::other(format!(
                "a message longer than {MAX_MESSAGE} bytes"
            )));
        }
        if done {
            line.pop();
            return Ok(Some(String::from_utf8_lossy(&line).into_owned()));
        }
    }
}

/// Why a stdio side ended: the end of its input, or a child's exit status.
#[derive(Debug)]
pub enum ClosedReason {
    /// Fixed text.
    Text(&'static str),
    /// An upstream process: its exit status, once it has one.
    Child(watch::Receiver<Option<String>>),
}

impl ClosedReason {
    async fn reason(self) -> String {
        match self {
            Self::Text(text) => text.to_owned(),
            Self::Child(mut status) => {
                // Its stdout closes just before it exits.
                let exited =
                    tokio::time::timeout(Duration::from_secs(2), status.wait_for(Option::is_some))
                        .await;
                match exited {
                    Ok(Ok(status)) => status.clone().unwrap_or_default(),
                    _ => "the upstream closed its stdout".to_owned(),
                }
            }
        }
    }
}

/// lev's own stdin and stdout: the client of `lev mcp proxy` on stdio.
pub fn stdio() -> Link {
    lines(
        tokio::io::stdin(),
        tokio::io::stdout(),
        ClosedReason::Text("the client closed stdin"),
    )
}

/// An upstream MCP server run as a child process: `command`, its stdin and
/// stdout the relay's, its stderr lev's. It ends when the returned
/// [`ChildGuard`] is dropped or stopped.
///
/// # Errors
/// When it cannot be started.
pub fn child(command: &[String]) -> anyhow::Result<(Link, ChildGuard)> {
    let (program, args) = command
        .split_first()
        .ok_or_else(|| anyhow::anyhow!("no upstream command after --"))?;
    let mut child = tokio::process::Command::new(program)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| anyhow::anyhow!("cannot start the upstream {program:?}: {e}"))?;
    let (stdin, stdout) = match (child.stdin.take(), child.stdout.take()) {
        (Some(stdin), Some(stdout)) => (stdin, stdout),
        _ => anyhow::bail!("the upstream {program:?} has no stdin or stdout"),
    };
    let (status_tx, status_rx) = watch::channel(None);
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let program = program.clone();
    let waiter = tokio::spawn(async move {
        let exited = tokio::select! {
            status = child.wait() => Some(status),
            _ = stop_rx => None,
        };
        let status = match exited {
            Some(status) => status,
            // Its stdin is closed: a moment to exit, then killed.
            None => match tokio::time::timeout(Duration::from_secs(2), child.wait()).await {
                Ok(status) => status,
                Err(_) => {
                    let _ = child.start_kill();
                    child.wait().await
                }
            },
        };
        let text = match status {
            Ok(status) => format!("the upstream {program:?} exited ({status})"),
            Err(e) => format!("the upstream {program:?} could not be waited for: {e}"),
        };
        let _ = status_tx.send(Some(text));
    });
    let link = lines(stdout, stdin, ClosedReason::Child(status_rx));
    Ok((
        link,
        ChildGuard {
            stop: Some(stop_tx),
            waiter: Some(waiter),
        },
    ))
}

/// Owns an upstream child process.
#[derive(Debug)]
pub struct ChildGuard {
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    waiter: Option<tokio::task::JoinHandle<()>>,
}

impl ChildGuard {
    /// Let it exit (its stdin is closed by then), killing it after a moment.
    pub async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(waiter) = self.waiter.take() {
            let _ = waiter.await;
        }
    }
}
