//! `GET /v1/operators/{sid}/ws`: one operator connection.
//!
//! A writer task sends what the hub queues for the connection, and pings; the
//! reader parses each text frame and hands replies to the hub. Anything it
//! cannot use gets an `error` frame and the connection stays up. No frame
//! from the peer (a pong included) for the dead-peer timeout ends it.
//!
//! Everything toward the peer is bounded ([`super::outbox`]): while its
//! error frames fill their lane the peer's next frame is not read, and a
//! peer that does not read (a write waits past the server's write timeout)
//! is closed with 1008 and a reason saying so, and the close is audited
//! (`operator.dropped`, with the session, the operator and why).

use std::time::Duration;

use axum::extract::State;
use axum::extract::ws::rejection::WebSocketUpgradeRejection;
use axum::extract::ws::{CloseFrame, Message, Utf8Bytes, WebSocket, WebSocketUpgrade};
use axum::response::Response;
use futures_util::stream::SplitSink;
use futures_util::{SinkExt as _, StreamExt as _};
use lev_protocol::api::Role;
use lev_protocol::{ClientMsg, ServerMsg};
use serde_json::{Value, json};

use super::hub::OperatorHub;
use super::outbox::{Closing, NOT_READING, Next, Outbox, OutboxReader};
use crate::auth::Principal;
use crate::error::{ApiError, ApiResult};
use crate::extract::PathParam;
use crate::state::AppState;

/// Largest frame an operator may send.
const MAX_FRAME: usize = 1024 * 1024;
/// The read buffer: tungstenite zeroes up to this much on every read, so
/// its 128 KiB default costs more than a whole small frame (larger frames
/// still arrive whole, over several reads).
const READ_BUFFER: usize = 16 * 1024;

/// The upgrade (operator role).
#[utoipa::path(get, path = "/v1/operators/{sid}/ws", tag = "operators",
    params(("sid" = String, Path, description = "The session to operate")),
    responses(
        (status = 101, description = "Switching to the operator WebSocket (SPEC section 4)"),
    ))]
pub async fn upgrade(
    State(state): State<AppState>,
    principal: Principal,
    PathParam(session_id): PathParam,
    ws: Result<WebSocketUpgrade, WebSocketUpgradeRejection>,
) -> ApiResult<Response> {
    principal.require(&[Role::Operator])?;
    lev_protocol::validate::check_id("session_id", &session_id)?;
    // Only a token that covers the session may operate it, and so replace
    // its operator (SPEC section 12).
    principal.check_session(&session_id)?;
    // axum's own rejection is text; every error here is the JSON body.
    let ws = ws.map_err(|e| {
        ApiError::Malformed(format!("expected a WebSocket upgrade: {}", e.body_text()))
    })?;
    Ok(ws
        .max_message_size(MAX_FRAME)
        .max_frame_size(MAX_FRAME)
        .read_buffer_size(READ_BUFFER)
        .on_upgrade(move |socket| {
            // axum spawns the upgraded connection; it counts as one of the
            // server's tasks while it runs.
            let token = state.task_token();
            async move {
                state.metrics().operator_connection(true);
                serve(state.clone(), session_id, principal.name, socket).await;
                state.metrics().operator_connection(false);
                drop(token);
            }
        }))
}

/// Longest message of an error frame, and longest req_id echoed back: an
/// error frame quotes what the peer sent, so without a cap a 1 MiB frame
/// got a 1 MiB (or larger) error back.
const ERROR_MESSAGE_BYTES: usize = 1024;
const ECHOED_REQ_ID_BYTES: usize = 128;

fn error_frame(req_id: Option<String>, code: &str, mut message: String) -> Utf8Bytes {
    if message.len() > ERROR_MESSAGE_BYTES {
        let mut end = ERROR_MESSAGE_BYTES;
        while !message.is_char_boundary(end) {
            end -= 1;
        }
        message.truncate(end);
        message.push_str("...");
    }
    let msg = ServerMsg::Error {
        req_id: req_id.filter(|id| id.len() <= ECHOED_REQ_ID_BYTES),
        code: code.to_owned(),
        message,
    };
    serde_json::to_string(&msg).unwrap_or_default().into()
}

/// Parse one text frame; the error frame to answer otherwise.
fn parse(text: &str) -> Result<ClientMsg, Utf8Bytes> {
    if let Err(e) = crate::body::check_depth(text.as_bytes()) {
        return Err(error_frame(None, "malformed", e.to_string()));
    }
    if let Err(e) = lev_protocol::json::check_strict_json(text) {
        return Err(error_frame(
            None,
            "malformed",
            format!("expected one JSON object per text frame: {e}"),
        ));
    }
    if let Ok(msg) = serde_json::from_str::<ClientMsg>(text) {
        return Ok(msg);
    }
    // Not a reply: read it again, to say precisely why.
    let value: Value = serde_json::from_str(text).map_err(|e| {
        error_frame(
            None,
            "malformed",
            format!("expected one JSON object per text frame: {e}"),
        )
    })?;
    let req_id = value
        .get("req_id")
        .and_then(Value::as_str)
        .map(str::to_owned);
    let Some(kind) = value.get("type") else {
        return Err(error_frame(
            req_id,
            "malformed",
            "expected a JSON object with a \"type\"".into(),
        ));
    };
    match kind.as_str() {
        Some("answer" | "hook_ack" | "spawn_ack") => {}
        Some(other) => {
            return Err(error_frame(
                req_id,
                "unknown_type",
                format!("unknown message type {other:?}; expected answer, hook_ack or spawn_ack"),
            ));
        }
        None => {
            return Err(error_frame(
                req_id,
                "malformed",
                format!("\"type\" must be a string, found {kind}"),
            ));
        }
    }
    serde_json::from_value(value).map_err(|e| error_frame(req_id, "malformed", e.to_string()))
}

async fn serve(state: AppState, session_id: String, name: String, socket: WebSocket) {
    let hub = std::sync::Arc::clone(state.operators());
    let settings = hub.settings().clone();
    let write_timeout = state.settings().connections.write_timeout;
    let Some((conn_id, outbox, queue)) = connect(&state, &session_id, &name).await else {
        close_unreachable(socket).await;
        return;
    };
    let (sink, mut stream) = socket.split();
    let mut writer = tokio::spawn(write(
        sink,
        queue,
        std::sync::Arc::clone(&hub),
        session_id.clone(),
        settings.ping_interval,
        write_timeout,
    ));
    let mut shutdown = state.shutdown_signal();
    // How the writer ended, once it did (a finished JoinHandle must not be
    // polled again).
    let mut ended: Option<Option<Closing>> = None;
    // The close for not reading is audited once, as soon as it is seen.
    let mut audited = false;
    // The peer closed or its socket failed.
    let mut peer_gone = false;
    loop {
        if !audited && outbox.closing() == Some(NOT_READING) {
            audited = true;
            audit_dropped(&state, &session_id, &name, &outbox).await;
        }
        let frame = tokio::select! {
            done = &mut writer => {
                ended = Some(done.unwrap_or(None));
                break;
            }
            () = crate::shutdown::stopped(&mut shutdown) => {
                outbox.close(Closing { code: 1001, reason: "the server is shutting down" });
                break;
            }
            frame = tokio::time::timeout(settings.dead_peer_timeout, stream.next()) => frame,
        };
        let message = match frame {
            Err(_elapsed) => {
                outbox.close(Closing {
                    code: 1001,
                    reason: "no frame from the peer in time",
                });
                break;
            }
            Ok(None | Some(Err(_))) => {
                peer_gone = true;
                break;
            }
            Ok(Some(Ok(message))) => message,
        };
        // Once closing, what the peer still sends is not answered.
        if outbox.closing().is_some() {
            continue;
        }
        let peer = Peer {
            hub: &hub,
            session_id: &session_id,
            name: &name,
            outbox: &outbox,
        };
        if !peer.take(message, &mut shutdown).await {
            peer_gone = true;
            break;
        }
    }
    // Let the writer send its close frame, briefly.
    let closing = match ended {
        Some(closing) => closing,
        None => close_writer(&outbox, &mut writer).await,
    };
    if closing == Some(NOT_READING) && !audited {
        audit_dropped(&state, &session_id, &name, &outbox).await;
    }
    if hub.disconnect(&session_id, &conn_id).await.unwrap_or(false) {
        let _ = state
            .store()
            .append_event(
                "operator.disconnected",
                json!({"session_id": session_id, "operator": name}),
                Some(&name),
            )
            .await;
    }
    if !peer_gone {
        drain(&mut stream).await;
    }
}

/// Register the connection with the hub (audited when it replaces another
/// operator's, announced as `operator.connected`); `None` when the store
/// cannot be reached.
async fn connect(
    state: &AppState,
    session_id: &str,
    name: &str,
) -> Option<(String, std::sync::Arc<Outbox>, OutboxReader)> {
    let hub = state.operators();
    let (conn_id, outbox, queue, replaced) = match hub.connect(session_id, name).await {
        Ok(connected) => connected,
        Err(e) => {
            crate::log::error(&format!("operator of {session_id}: cannot connect: {e}"));
            return None;
        }
    };
    if let Some(previous) = replaced {
        let _ = state
            .store()
            .append_audit(lev_store::AuditRecord {
                action: "operator.replaced".into(),
                actor: name.to_owned(),
                data: json!({"session_id": session_id, "replaced": previous, "by": name}),
            })
            .await;
    }
    let _ = state
        .store()
        .append_event(
            "operator.connected",
            json!({"session_id": session_id, "operator": name}),
            Some(name),
        )
        .await;
    Some((conn_id, outbox, queue))
}

/// Close a connection the hub could not take: the store is unreachable.
async fn close_unreachable(mut socket: WebSocket) {
    let _ = socket
        .send(Message::Close(Some(CloseFrame {
            code: 1011,
            reason: "the server cannot reach its database; reconnect shortly".into(),
        })))
        .await;
}

/// One connected operator, as its frames are taken.
struct Peer<'a> {
    hub: &'a OperatorHub,
    session_id: &'a str,
    name: &'a str,
    outbox: &'a Outbox,
}

impl Peer<'_> {
    /// Take one frame from the peer: a reply resolved in the hub, anything
    /// else answered with an error frame. `false` when the peer closed.
    async fn take(
        &self,
        message: Message,
        shutdown: &mut tokio::sync::watch::Receiver<bool>,
    ) -> bool {
        match message {
            Message::Text(text) => match parse(text.as_str()) {
                Ok(msg) => self.resolve(msg, shutdown).await,
                Err(frame) => answer(self.outbox, frame, shutdown).await,
            },
            Message::Binary(_) => {
                let frame = error_frame(
                    None,
                    "malformed",
                    "expected text frames, each one JSON message".into(),
                );
                answer(self.outbox, frame, shutdown).await;
            }
            Message::Close(_) => return false,
            Message::Ping(_) | Message::Pong(_) => {}
        }
        true
    }

    /// A reply, resolved in the hub; a refusal or a store that cannot
    /// record it is answered with an error frame.
    async fn resolve(&self, msg: ClientMsg, shutdown: &mut tokio::sync::watch::Receiver<bool>) {
        let req_id = msg.req_id().to_owned();
        let frame = match self.hub.resolve(self.session_id, msg, self.name).await {
            Ok(Ok(())) => return,
            Ok(Err(refusal)) => error_frame(Some(req_id), refusal.code, refusal.message),
            Err(e) => error_frame(
                Some(req_id),
                "store_unavailable",
                format!("the reply was not recorded, send it again: {e}"),
            ),
        };
        answer(self.outbox, frame, shutdown).await;
    }
}

/// The writer told to close (when the peer closed or failed: nothing more
/// to say to it) and given a little time to; how it ended.
async fn close_writer(
    outbox: &Outbox,
    writer: &mut tokio::task::JoinHandle<Option<Closing>>,
) -> Option<Closing> {
    if outbox.closing().is_none() {
        outbox.close(Closing {
            code: 1000,
            reason: "",
        });
    }
    match tokio::time::timeout(CLOSE_GRACE + CLOSE_GRACE, &mut *writer).await {
        Ok(done) => done.unwrap_or(None),
        Err(_) => {
            writer.abort();
            outbox.closing()
        }
    }
}

/// Closing a socket whose peer's bytes are still unread resets it, and the
/// reset throws away what the peer had not read yet: the close frame too.
/// So what the peer still sends is read and dropped, until its close, its
/// end, or a few seconds.
async fn drain(stream: &mut futures_util::stream::SplitStream<WebSocket>) {
    let _ = tokio::time::timeout(CLOSE_GRACE, async {
        while let Some(Ok(message)) = stream.next().await {
            if matches!(message, Message::Close(_)) {
                break;
            }
        }
    })
    .await;
}

/// Queue an error frame for the peer. Until it fits, the peer's next frame
/// is not read: a peer that sends faster than it reads what comes back is
/// slowed to its reading pace (and one that does not read is closed by the
/// writer's write timeout). Shutdown does not wait for it.
async fn answer(
    outbox: &Outbox,
    frame: Utf8Bytes,
    shutdown: &mut tokio::sync::watch::Receiver<bool>,
) {
    tokio::select! {
        _ = outbox.push_error(frame) => {}
        () = crate::shutdown::stopped(shutdown) => {
            outbox.close(Closing { code: 1001, reason: "the server is shutting down" });
        }
    }
}

/// Audit (and log) that `name`'s connection to `session_id` is closed
/// because it did not read, with what was queued for it then.
async fn audit_dropped(state: &AppState, session_id: &str, name: &str, outbox: &Outbox) {
    let (frames, bytes) = outbox.queued();
    crate::log::info(&format!(
        "operator {name} of {session_id}: closed ({}), it did not read what was sent",
        NOT_READING.code
    ));
    let _ = state
        .store()
        .append_audit(lev_store::AuditRecord {
            action: "operator.dropped".into(),
            actor: "system".into(),
            data: json!({
                "session_id": session_id,
                "operator": name,
                "code": NOT_READING.code,
                "reason": NOT_READING.reason,
                "queued_frames": frames,
                "queued_bytes": bytes,
            }),
        })
        .await;
}

/// How long a close frame may take to go out.
const CLOSE_GRACE: Duration = Duration::from_secs(3);
/// Most frames written with one flush.
const BATCH: usize = 64;

/// The writer: what the outbox gives, and pings, each write (a batch and
/// its flush) within `write_timeout`, else the peer is not reading. Returns
/// the close that ended it; `None` when the socket failed.
async fn write(
    mut sink: SplitSink<WebSocket, Message>,
    mut queue: OutboxReader,
    hub: std::sync::Arc<super::OperatorHub>,
    session_id: String,
    ping_interval: Duration,
    write_timeout: Duration,
) -> Option<Closing> {
    let mut ping = tokio::time::interval(ping_interval);
    ping.reset();
    let closing = loop {
        let mut batch = Vec::new();
        tokio::select! {
            next = queue.next() => match next {
                Next::Close(closing) => break closing,
                Next::Frame(text) => {
                    batch.push(Message::Text(text));
                    while batch.len() < BATCH {
                        let Some(more) = queue.try_next() else { break };
                        batch.push(Message::Text(more));
                    }
                }
            },
            _ = ping.tick() => batch.push(Message::Ping(Default::default())),
        }
        let written = async {
            for message in batch {
                sink.feed(message).await?;
            }
            sink.flush().await
        };
        tokio::select! {
            done = tokio::time::timeout(write_timeout, written) => match done {
                Ok(Ok(())) => {}
                Ok(Err(_)) => return None,
                Err(_elapsed) => {
                    // Said at once, so the reader audits it while the close
                    // frame still has its chance to go out.
                    queue.close(NOT_READING);
                    break NOT_READING;
                }
            },
            closing = queue.closed() => break closing,
        }
        if queue.wants_more() {
            hub.send_pending(&session_id).await;
        }
    };
    if closing.code != 1000 || !closing.reason.is_empty() {
        let _ = tokio::time::timeout(
            CLOSE_GRACE,
            sink.send(Message::Close(Some(CloseFrame {
                code: closing.code,
                reason: closing.reason.into(),
            }))),
        )
        .await;
    }
    Some(closing)
}
