//! Codex's app-server protocol on the wire: JSON-RPC 2.0 messages without
//! the `"jsonrpc"` field, one JSON object per line on stdio (`codex
//! app-server`) or per WebSocket text frame on the control socket. Either
//! side sends requests; the server's requests (approvals) carry their own
//! ids, starting at 0.

use std::collections::HashMap;
use std::path::Path;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use futures_util::{SinkExt as _, Stream, StreamExt as _};
use serde_json::{Map, Value, json};
use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _};
use tokio::sync::{mpsc, oneshot};

pub use super::wire::{Incoming, RpcError, parse};

/// Why a request got no result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CallError {
    /// Codex answered with an error.
    Refused {
        /// The request's method.
        method: String,
        /// What Codex said.
        error: RpcError,
    },
    /// The connection closed before the answer came.
    Closed {
        /// The request's method.
        method: String,
    },
}

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Refused { method, error } => write!(f, "Codex refused {method}: {error}"),
            Self::Closed { method } => {
                write!(f, "Codex closed the connection before answering {method}")
            }
        }
    }
}

impl std::error::Error for CallError {}

/// What the writer sends: a message, or the end of the connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outgoing {
    /// One message's text.
    Message(String),
    /// Close the connection (stdin's EOF, a WebSocket close).
    Close,
}

type Waiters = HashMap<u64, (String, oneshot::Sender<Result<Value, RpcError>>)>;

/// This client's side of the connection: send requests and wait for their
/// answers, notify, and answer Codex's requests. Cheap to clone; every clone
/// writes to the same connection.
#[derive(Debug, Clone)]
pub struct Peer {
    out: mpsc::UnboundedSender<Outgoing>,
    waiting: Arc<Mutex<Waiters>>,
    next_id: Arc<AtomicU64>,
    closed: Arc<AtomicBool>,
}

impl Peer {
    /// A peer, and the messages it writes (to hand to the transport).
    pub fn new() -> (Self, mpsc::UnboundedReceiver<Outgoing>) {
        let (out, rx) = mpsc::unbounded_channel();
        (
            Self {
                out,
                waiting: Arc::default(),
                next_id: Arc::new(AtomicU64::new(1)),
                closed: Arc::default(),
            },
            rx,
        )
    }

    fn send(&self, message: &Value) {
        // A closed writer means the connection is gone; the reader sees it.
        let _ = self.out.send(Outgoing::Message(message.to_string()));
    }

    /// Close the connection once what was sent before is written: `codex
    /// app-server` exits on its stdin's end, ending what it runs.
    pub fn hang_up(&self) {
        let _ = self.out.send(Outgoing::Close);
    }

    /// Send `method` and wait for its answer.
    ///
    /// # Errors
    /// [`CallError`]: Codex's error, or the connection closed first.
    pub async fn request(&self, method: &str, params: Value) -> Result<Value, CallError> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        if let Ok(mut waiting) = self.waiting.lock() {
            // Checked under the lock `close` takes: no request waits on a
            // closed connection.
            if self.closed.load(Ordering::SeqCst) {
                return Err(CallError::Closed {
                    method: method.to_owned(),
                });
            }
            waiting.insert(id, (method.to_owned(), tx));
        }
        self.send(&json!({"id": id, "method": method, "params": params}));
        match rx.await {
            Ok(Ok(result)) => Ok(result),
            Ok(Err(error)) => Err(CallError::Refused {
                method: method.to_owned(),
                error,
            }),
            Err(_) => Err(CallError::Closed {
                method: method.to_owned(),
            }),
        }
    }

    /// Send a notification.
    pub fn notify(&self, method: &str, params: Option<Value>) {
        let mut message = Map::new();
        message.insert("method".into(), Value::String(method.to_owned()));
        if let Some(params) = params {
            message.insert("params".into(), params);
        }
        self.send(&Value::Object(message));
    }

    /// Answer Codex's request `id` with `result`.
    pub fn reply(&self, id: &Value, result: Value) {
        self.send(&json!({"id": id, "result": result}));
    }

    /// Answer Codex's request `id` with an error.
    pub fn reply_error(&self, id: &Value, code: i64, message: &str) {
        self.send(&json!({"id": id, "error": {"code": code, "message": message}}));
    }

    /// Hand a response to the request waiting for it.
    pub fn resolve(&self, id: &Value, outcome: Result<Value, RpcError>) {
        let Some(id) = id.as_u64() else { return };
        let waiter = self.waiting.lock().ok().and_then(|mut w| w.remove(&id));
        if let Some((_, tx)) = waiter {
            let _ = tx.send(outcome);
        }
    }

    /// The connection is gone: every waiting request fails with
    /// [`CallError::Closed`].
    pub fn close(&self) {
        if let Ok(mut waiting) = self.waiting.lock() {
            self.closed.store(true, Ordering::SeqCst);
            waiting.clear();
        }
    }
}

/// The messages read from Codex, one text each.
pub type Messages = Pin<Box<dyn Stream<Item = std::io::Result<String>> + Send>>;

/// JSON lines on a child's stdout; `outgoing` written as lines to its stdin.
pub fn stdio(
    stdout: tokio::process::ChildStdout,
    mut stdin: tokio::process::ChildStdin,
    mut outgoing: mpsc::UnboundedReceiver<Outgoing>,
) -> Messages {
    tokio::spawn(async move {
        while let Some(Outgoing::Message(line)) = outgoing.recv().await {
            if stdin.write_all(line.as_bytes()).await.is_err()
                || stdin.write_all(b"\n").await.is_err()
                || stdin.flush().await.is_err()
            {
                break;
            }
        }
        // Dropping stdin closes it: `codex app-server` exits on EOF.
    });
    let lines = tokio::io::BufReader::new(stdout).lines();
    Box::pin(futures_util::stream::unfold(
        lines,
        |mut lines| async move {
            loop {
                match lines.next_line().await {
                    Ok(Some(line)) if line.trim().is_empty() => {}
                    Ok(Some(line)) => return Some((Ok(line), lines)),
                    Ok(None) => return None,
                    Err(e) => return Some((Err(e), lines)),
                }
            }
        },
    ))
}

/// The control socket of a shared app-server (`app-server-control.sock`): a
/// WebSocket over the Unix socket at `path`, one message per text frame.
///
/// # Errors
/// The socket cannot be reached, or refuses the WebSocket upgrade; the
/// receiver comes back with the error, to try again.
#[allow(clippy::result_large_err)]
pub async fn unix_websocket(
    path: &Path,
    mut outgoing: mpsc::UnboundedReceiver<Outgoing>,
) -> Result<Messages, (anyhow::Error, mpsc::UnboundedReceiver<Outgoing>)> {
    use anyhow::Context as _;
    use tokio_tungstenite::tungstenite::Message;
    let connected = async {
        let stream = tokio::net::UnixStream::connect(path)
            .await
            .with_context(|| format!("connecting to {}", path.display()))?;
        let (socket, _) = tokio_tungstenite::client_async("ws://localhost/", stream)
            .await
            .with_context(|| format!("the WebSocket upgrade on {}", path.display()))?;
        anyhow::Ok(socket)
    }
    .await;
    let socket = match connected {
        Ok(socket) => socket,
        Err(e) => return Err((e, outgoing)),
    };
    let (mut sink, stream) = socket.split();
    tokio::spawn(async move {
        while let Some(Outgoing::Message(text)) = outgoing.recv().await {
            if sink.send(Message::text(text)).await.is_err() {
                break;
            }
        }
        let _ = sink.close().await;
    });
    Ok(Box::pin(stream.filter_map(|frame| async move {
        match frame {
            Ok(Message::Text(text)) => Some(Ok(text.as_str().to_owned())),
            Ok(Message::Binary(bytes)) => Some(Ok(String::from_utf8_lossy(&bytes).into_owned())),
            Ok(_) => None,
            Err(e) => Some(Err(std::io::Error::other(e))),
        }
    })))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_told_apart() {
        assert_eq!(
            parse(r#"{"id":0,"method":"item/fileChange/requestApproval","params":{"itemId":"c"}}"#),
            Ok(Incoming::Request {
                id: json!(0),
                method: "item/fileChange/requestApproval".into(),
                params: json!({"itemId": "c"})
            })
        );
        assert_eq!(
            parse(r#"{"method":"initialized"}"#),
            Ok(Incoming::Notification {
                method: "initialized".into(),
                params: Value::Null
            })
        );
        assert_eq!(
            parse(r#"{"id":3,"result":{"turnId":"u"}}"#),
            Ok(Incoming::Response {
                id: json!(3),
                outcome: Ok(json!({"turnId": "u"}))
            })
        );
        assert_eq!(
            parse(r#"{"error":{"code":-32600,"message":"no active turn to steer"},"id":4}"#),
            Ok(Incoming::Response {
                id: json!(4),
                outcome: Err(RpcError {
                    code: -32600,
                    message: "no active turn to steer".into()
                })
            })
        );
        for bad in [
            "",
            "[1]",
            "{}",
            r#"{"id":1}"#,
            r#"{"method":3}"#,
            "not json",
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }

    #[tokio::test]
    async fn a_request_gets_its_own_answer() {
        let (peer, mut out) = Peer::new();
        let asking = {
            let peer = peer.clone();
            tokio::spawn(async move { peer.request("turn/steer", json!({"x": 1})).await })
        };
        let Some(Outgoing::Message(sent)) = out.recv().await else {
            panic!("nothing sent");
        };
        let sent: Value = serde_json::from_str(&sent).unwrap();
        assert_eq!(sent["method"], "turn/steer");
        assert_eq!(
            sent.get("jsonrpc"),
            None,
            "Codex's wire has no jsonrpc field"
        );
        peer.resolve(&json!(999), Ok(json!("someone else's")));
        peer.resolve(
            &sent["id"],
            Err(RpcError {
                code: -32600,
                message: "no active turn to steer".into(),
            }),
        );
        let err = asking.await.unwrap().unwrap_err();
        assert_eq!(
            err.to_string(),
            "Codex refused turn/steer: no active turn to steer (code -32600)"
        );
    }

    #[tokio::test]
    async fn closing_fails_every_waiting_request() {
        let (peer, _out) = Peer::new();
        let asking = {
            let peer = peer.clone();
            tokio::spawn(async move { peer.request("thread/start", json!({})).await })
        };
        tokio::task::yield_now().await;
        peer.close();
        assert!(matches!(
            asking.await.unwrap(),
            Err(CallError::Closed { .. })
        ));
        // And a request after the close does not wait for ever.
        assert!(matches!(
            peer.request("turn/start", json!({})).await,
            Err(CallError::Closed { .. })
        ));
    }
}
