//! One operator connection's outgoing queue, bounded by frames and bytes.
//!
//! Two lanes go out through the connection's writer:
//!
//! - **messages** from the hub (`hello`, `ask`, `hook_before`, `spawn`):
//!   what does not fit stays in the store, and the writer asks the hub for
//!   more as it drains ([`Outbox::offer`], [`OutboxReader::wants_more`]), so
//!   a session with thousands of pending messages is sent them as fast as
//!   its operator reads, never all at once;
//! - **errors** for frames the peer sent: when this lane is full the
//!   connection's reader waits for room before it reads the peer's next
//!   frame, so a peer that sends what gets an error faster than it reads is
//!   slowed to the pace it reads at, and one that does not read at all is
//!   closed ([`NOT_READING`]) by the writer's write timeout, instead of
//!   growing the server (the unbounded queue this replaced grew 392 to
//!   771 MB in 12 s).
//!
//! A close ([`Outbox::close`]) overtakes whatever is queued; the first one
//! given wins.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use axum::extract::ws::Utf8Bytes;
use tokio::sync::{mpsc, watch};

/// Why a connection is closed: the WebSocket close code and reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Closing {
    /// The close code.
    pub code: u16,
    /// The reason (at most 123 bytes, as a close frame allows).
    pub reason: &'static str,
}

/// The peer did not read what the server sent (a queue toward it filled,
/// or a write waited past the write timeout).
pub const NOT_READING: Closing = Closing {
    code: 1008,
    reason: "the operator did not read what the server sent in time; reconnect and read",
};

/// Most frames and bytes of a lane.
#[derive(Debug, Clone, Copy)]
pub struct LaneLimits {
    /// Frames queued at most.
    pub frames: usize,
    /// Bytes queued at most (one frame is taken whatever its size when the
    /// lane is empty).
    pub bytes: usize,
}

/// The hub's messages: a few MiB, then the rest waits in the store.
pub const MESSAGES: LaneLimits = LaneLimits {
    frames: 64,
    bytes: 4 * 1024 * 1024,
};
/// Error frames for what the peer sent: each is at most about 1.2 KiB
/// (`ws.rs` caps what they quote), so 64 of them stay under 80 KiB.
pub const ERRORS: LaneLimits = LaneLimits {
    frames: 64,
    bytes: 128 * 1024,
};

struct Lane {
    tx: mpsc::Sender<Utf8Bytes>,
    bytes: AtomicUsize,
    max_bytes: usize,
}

impl Lane {
    fn new(limits: LaneLimits) -> (Self, mpsc::Receiver<Utf8Bytes>) {
        let (tx, rx) = mpsc::channel(limits.frames.max(1));
        (
            Self {
                tx,
                bytes: AtomicUsize::new(0),
                max_bytes: limits.bytes,
            },
            rx,
        )
    }

    /// Queue `text` when it fits; false otherwise (and when the reader is
    /// gone).
    fn try_push(&self, text: Utf8Bytes) -> bool {
        let len = text.len();
        let before = self.bytes.fetch_add(len, Ordering::AcqRel);
        if before > 0 && before + len > self.max_bytes {
            self.bytes.fetch_sub(len, Ordering::AcqRel);
            return false;
        }
        if self.tx.try_send(text).is_err() {
            self.bytes.fetch_sub(len, Ordering::AcqRel);
            return false;
        }
        true
    }

    fn took(&self, text: &Utf8Bytes) {
        self.bytes.fetch_sub(text.len(), Ordering::AcqRel);
    }
}

/// The sending side, shared by the hub and the connection's reader.
pub struct Outbox {
    messages: Lane,
    errors: Lane,
    closing: watch::Sender<Option<Closing>>,
    wants_more: AtomicBool,
}

impl std::fmt::Debug for Outbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Outbox")
            .field(
                "message_bytes",
                &self.messages.bytes.load(Ordering::Relaxed),
            )
            .field("error_bytes", &self.errors.bytes.load(Ordering::Relaxed))
            .field("closing", &*self.closing.borrow())
            .finish_non_exhaustive()
    }
}

/// The writer's side.
pub struct OutboxReader {
    outbox: Arc<Outbox>,
    messages: mpsc::Receiver<Utf8Bytes>,
    errors: mpsc::Receiver<Utf8Bytes>,
    closing: watch::Receiver<Option<Closing>>,
}

impl std::fmt::Debug for OutboxReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OutboxReader")
            .field("outbox", &self.outbox)
            .finish_non_exhaustive()
    }
}

/// What the writer does next.
#[derive(Debug)]
pub enum Next {
    /// Send this text frame.
    Frame(Utf8Bytes),
    /// Send a close frame and stop.
    Close(Closing),
}

impl Outbox {
    /// A queue with the default limits ([`MESSAGES`], [`ERRORS`]).
    pub fn new() -> (Arc<Self>, OutboxReader) {
        Self::with_limits(MESSAGES, ERRORS)
    }

    /// A queue with these limits.
    pub fn with_limits(messages: LaneLimits, errors: LaneLimits) -> (Arc<Self>, OutboxReader) {
        let (messages, messages_rx) = Lane::new(messages);
        let (errors, errors_rx) = Lane::new(errors);
        let (closing, closing_rx) = watch::channel(None);
        let outbox = Arc::new(Self {
            messages,
            errors,
            closing,
            wants_more: AtomicBool::new(false),
        });
        let reader = OutboxReader {
            outbox: Arc::clone(&outbox),
            messages: messages_rx,
            errors: errors_rx,
            closing: closing_rx,
        };
        (outbox, reader)
    }

    /// Queue a message the hub can send again later (it stays pending in
    /// the store): false when it does not fit now; the writer then asks the
    /// hub for more once it has drained the queue.
    pub fn offer(&self, text: Utf8Bytes) -> bool {
        if self.is_closing() {
            return false;
        }
        if self.messages.try_push(text.clone()) {
            return true;
        }
        // Said before looking once more: either the frame fits now, or the
        // lane still holds a frame, after which the writer sees the flag.
        self.wants_more.store(true, Ordering::Release);
        self.messages.try_push(text)
    }

    /// Queue an error frame, waiting for room (by frames: error frames are
    /// small, so the frames bound the bytes). False when the connection is
    /// closing or its writer is gone.
    pub async fn push_error(&self, text: Utf8Bytes) -> bool {
        let mut closing = self.closing.subscribe();
        if closing.borrow_and_update().is_some() {
            return false;
        }
        let len = text.len();
        self.errors.bytes.fetch_add(len, Ordering::AcqRel);
        let sent = tokio::select! {
            sent = self.errors.tx.send(text) => sent.is_ok(),
            _ = closing.changed() => false,
        };
        if !sent {
            self.errors.bytes.fetch_sub(len, Ordering::AcqRel);
        }
        sent
    }

    /// Queue a message that cannot be sent again later (a notice): when the
    /// messages' lane is full the peer is not keeping up, and the
    /// connection is closed with [`NOT_READING`]. False when not queued.
    pub fn push_notice(&self, text: Utf8Bytes) -> bool {
        if self.is_closing() {
            return false;
        }
        if self.messages.try_push(text) {
            return true;
        }
        self.close(NOT_READING);
        false
    }

    /// Close the connection with `closing`, ahead of what is queued. The
    /// first close given wins.
    pub fn close(&self, closing: Closing) {
        self.closing.send_if_modified(|current| {
            if current.is_none() {
                *current = Some(closing);
                true
            } else {
                false
            }
        });
    }

    /// The close given, if any.
    pub fn closing(&self) -> Option<Closing> {
        *self.closing.borrow()
    }

    fn is_closing(&self) -> bool {
        self.closing.borrow().is_some()
    }

    /// Frames and bytes queued now, on both lanes.
    pub fn queued(&self) -> (usize, usize) {
        let frames = (self.messages.tx.max_capacity() - self.messages.tx.capacity())
            + (self.errors.tx.max_capacity() - self.errors.tx.capacity());
        let bytes =
            self.messages.bytes.load(Ordering::Acquire) + self.errors.bytes.load(Ordering::Acquire);
        (frames, bytes)
    }
}

impl OutboxReader {
    /// The next thing to do: a close first, then errors and messages as
    /// they come.
    pub async fn next(&mut self) -> Next {
        loop {
            if let Some(closing) = *self.closing.borrow_and_update() {
                return Next::Close(closing);
            }
            tokio::select! {
                biased;
                changed = self.closing.changed() => {
                    if changed.is_err() {
                        // The outbox itself is gone: nothing more will come.
                        return Next::Close(Closing { code: 1011, reason: "" });
                    }
                }
                Some(text) = self.errors.recv() => {
                    self.outbox.errors.took(&text);
                    return Next::Frame(text);
                }
                Some(text) = self.messages.recv() => {
                    self.outbox.messages.took(&text);
                    return Next::Frame(text);
                }
            }
        }
    }

    /// A frame already queued, without waiting (none once closing).
    pub fn try_next(&mut self) -> Option<Utf8Bytes> {
        if self.closing.borrow().is_some() {
            return None;
        }
        if let Ok(text) = self.errors.try_recv() {
            self.outbox.errors.took(&text);
            return Some(text);
        }
        let text = self.messages.try_recv().ok()?;
        self.outbox.messages.took(&text);
        Some(text)
    }

    /// Resolves once a close is given.
    pub async fn closed(&mut self) -> Closing {
        loop {
            if let Some(closing) = *self.closing.borrow_and_update() {
                return closing;
            }
            if self.closing.changed().await.is_err() {
                return Closing {
                    code: 1011,
                    reason: "",
                };
            }
        }
    }

    /// Close with `closing` (the first close given wins).
    pub fn close(&self, closing: Closing) {
        self.outbox.close(closing);
    }

    /// Whether the hub left messages out for lack of room (cleared).
    pub fn wants_more(&self) -> bool {
        self.outbox.wants_more.swap(false, Ordering::AcqRel)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    fn text(n: usize) -> Utf8Bytes {
        "x".repeat(n).into()
    }

    #[tokio::test]
    async fn lanes_are_bounded_by_frames_and_bytes() {
        let limits = LaneLimits {
            frames: 4,
            bytes: 100,
        };
        let (outbox, mut reader) = Outbox::with_limits(limits, limits);
        // Bytes: one frame larger than the budget fits an empty lane only.
        assert!(outbox.offer(text(150)));
        assert!(!outbox.offer(text(1)));
        assert!(matches!(reader.next().await, Next::Frame(t) if t.len() == 150));
        // Frames.
        for _ in 0..4 {
            assert!(outbox.offer(text(1)));
        }
        assert!(!outbox.offer(text(1)));
        assert!(reader.wants_more());
        assert!(!reader.wants_more());
        assert_eq!(outbox.queued(), (4, 4));
        assert!(outbox.closing().is_none(), "a full message lane only waits");
        // A full error lane makes the sender wait; a close frees it.
        for _ in 0..4 {
            assert!(outbox.push_error(text(1)).await);
        }
        let waiting = {
            let outbox = Arc::clone(&outbox);
            tokio::spawn(async move { outbox.push_error(text(1)).await })
        };
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        assert!(!waiting.is_finished(), "a full error lane waits for room");
        // A full message lane with a notice that cannot wait closes, and the
        // close overtakes what is queued.
        assert!(!outbox.push_notice(text(1)));
        assert_eq!(outbox.closing(), Some(NOT_READING));
        assert!(!waiting.await.unwrap());
        assert!(matches!(reader.next().await, Next::Close(c) if c == NOT_READING));
        assert!(reader.try_next().is_none());
        // The first close wins.
        outbox.close(Closing {
            code: 4000,
            reason: "replaced",
        });
        assert_eq!(outbox.closing(), Some(NOT_READING));
    }
}
