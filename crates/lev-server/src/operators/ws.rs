//! `GET /v1/operators/{sid}/ws`: one operator connection.
//!
//! A writer task sends what the hub queues for the connection, and pings; the
//! reader parses each text frame and hands replies to the hub. Anything it
//! cannot use gets an `error` frame and the connection stays up. No frame
//! from the peer (a pong included) for the dead-peer timeout ends it.

use axum::extract::State;
use axum::extract::ws::rejection::WebSocketUpgradeRejection;
use axum::extract::ws::{CloseFrame, Message, WebSocket, WebSocketUpgrade};
use axum::response::Response;
use futures_util::{SinkExt as _, StreamExt as _};
use lev_protocol::api::Role;
use lev_protocol::{ClientMsg, ServerMsg};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::hub::Outbound;
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
                serve(state, session_id, principal.name, socket).await;
                drop(token);
            }
        }))
}

fn error_frame(req_id: Option<String>, code: &str, message: String) -> Outbound {
    let msg = ServerMsg::Error {
        req_id,
        code: code.to_owned(),
        message,
    };
    Outbound::Text(serde_json::to_string(&msg).unwrap_or_default().into())
}

/// Parse one text frame; the error frame to answer otherwise.
fn parse(text: &str) -> Result<ClientMsg, Outbound> {
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
    let (conn_id, mut outbound, replaced) = match hub.connect(&session_id, &name).await {
        Ok(connected) => connected,
        Err(e) => {
            crate::log::error(&format!("operator of {session_id}: cannot connect: {e}"));
            let mut socket = socket;
            let _ = socket
                .send(Message::Close(Some(CloseFrame {
                    code: 1011,
                    reason: "the server cannot reach its database; reconnect shortly".into(),
                })))
                .await;
            return;
        }
    };
    if let Some(previous) = replaced {
        let _ = state
            .store()
            .append_audit(lev_store::AuditRecord {
                action: "operator.replaced".into(),
                actor: name.clone(),
                data: json!({"session_id": session_id, "replaced": previous, "by": name}),
            })
            .await;
    }
    let _ = state
        .store()
        .append_event(
            "operator.connected",
            json!({"session_id": session_id, "operator": name}),
            Some(&name),
        )
        .await;
    let (mut sink, mut stream) = socket.split();
    // Error frames from the reader go out through the writer, in order.
    let (errors_tx, mut errors) = mpsc::unbounded_channel::<Outbound>();
    let mut writer = tokio::spawn(async move {
        let mut ping = tokio::time::interval(settings.ping_interval);
        ping.reset();
        loop {
            let next = tokio::select! {
                out = outbound.recv() => out,
                out = errors.recv() => out,
                _ = ping.tick() => {
                    if sink.send(Message::Ping(Default::default())).await.is_err() {
                        return;
                    }
                    continue;
                }
            };
            match next {
                Some(Outbound::Text(text)) => {
                    // What is queued already goes out with one flush.
                    if sink.feed(Message::Text(text)).await.is_err() {
                        return;
                    }
                    let mut closing = None;
                    while let Ok(more) = outbound.try_recv() {
                        match more {
                            Outbound::Text(text) => {
                                if sink.feed(Message::Text(text)).await.is_err() {
                                    return;
                                }
                            }
                            close @ Outbound::Close(..) => {
                                closing = Some(close);
                                break;
                            }
                        }
                    }
                    if sink.flush().await.is_err() {
                        return;
                    }
                    if let Some(Outbound::Close(code, reason)) = closing {
                        let _ = sink
                            .send(Message::Close(Some(CloseFrame {
                                code,
                                reason: reason.into(),
                            })))
                            .await;
                        return;
                    }
                }
                Some(Outbound::Close(code, reason)) => {
                    let _ = sink
                        .send(Message::Close(Some(CloseFrame {
                            code,
                            reason: reason.into(),
                        })))
                        .await;
                    return;
                }
                None => return,
            }
        }
    });
    let mut shutdown = state.shutdown_signal();
    // A finished JoinHandle must not be polled again.
    let mut writer_done = false;
    loop {
        let frame = tokio::select! {
            _ = &mut writer => {
                writer_done = true;
                break;
            }
            () = crate::shutdown::stopped(&mut shutdown) => {
                let _ = errors_tx.send(Outbound::Close(1001, "the server is shutting down"));
                break;
            }
            frame = tokio::time::timeout(settings.dead_peer_timeout, stream.next()) => frame,
        };
        let message = match frame {
            Err(_elapsed) => {
                let _ = errors_tx.send(Outbound::Close(1001, "no frame from the peer in time"));
                break;
            }
            Ok(None | Some(Err(_))) => break,
            Ok(Some(Ok(message))) => message,
        };
        match message {
            Message::Text(text) => match parse(text.as_str()) {
                Ok(msg) => {
                    let req_id = msg.req_id().to_owned();
                    match hub.resolve(&session_id, msg, &name).await {
                        Ok(Ok(())) => {}
                        Ok(Err(refusal)) => {
                            let _ = errors_tx.send(error_frame(
                                Some(req_id),
                                refusal.code,
                                refusal.message,
                            ));
                        }
                        Err(e) => {
                            let _ = errors_tx.send(error_frame(
                                Some(req_id),
                                "store_unavailable",
                                format!("the reply was not recorded, send it again: {e}"),
                            ));
                        }
                    }
                }
                Err(frame) => {
                    let _ = errors_tx.send(frame);
                }
            },
            Message::Binary(_) => {
                let _ = errors_tx.send(error_frame(
                    None,
                    "malformed",
                    "expected text frames, each one JSON message".into(),
                ));
            }
            Message::Close(_) => break,
            Message::Ping(_) | Message::Pong(_) => {}
        }
    }
    // Let the writer flush a close frame, briefly.
    drop(errors_tx);
    if !writer_done {
        let _ = tokio::time::timeout(std::time::Duration::from_secs(1), &mut writer).await;
        writer.abort();
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
}
