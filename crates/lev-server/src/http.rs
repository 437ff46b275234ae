//! The HTTP/1.1 connection loop: accept, serve each connection in its own
//! task with hyper, and on shutdown stop accepting, let every connection
//! finish the request it is on, then return once all have closed.
//!
//! It does what `axum::serve(listener, router).with_graceful_shutdown(..)`
//! does, less two costs per connection that matter when thousands of
//! workers hold a long-poll `wait` open (each one a connection):
//!
//! - `axum::serve` given a `Router` rebuilds the router's route tables for
//!   every connection (about 19 KiB each); here every connection shares the
//!   one router (a reference count).
//! - its protocol-detecting connection (HTTP/1 or HTTP/2) reads the first
//!   bytes apart and hands them back to hyper, which then grows its read
//!   buffer from 8 to 16 KiB; lev speaks HTTP/1.1 only, so the connection
//!   is hyper's HTTP/1 one from the start.
//!
//! Held open, a connection costs hyper's 8 KiB read and 8 KiB write buffers
//! (hyper's smallest) and the request's own state.
//!
//! # Connections nobody finishes
//!
//! About 20,000 half-sent requests once filled the file-descriptor limit
//! and `/v1/health` stopped answering. So ([`ConnectionSettings`]):
//!
//! - **Caps.** At most `max_connections` at once, and at most
//!   `max_per_address` from one address (an IPv6 address counts by its
//!   /64, where one host has its many addresses), counted from the accept,
//!   TLS handshake and WebSockets included. At a cap a new connection
//!   replaces the one that has waited longest without a request in flight
//!   (a half-sent head, an idle keep-alive), of its own address at the
//!   per-address cap; only when every one is serving a request is it
//!   answered 503 and closed at once. A health check, which sends its
//!   request at once, so gets in under a flood of unfinished requests, from
//!   any address.
//! - **Timeouts.** A request's head (and the TLS handshake before the first
//!   one) must arrive within `header_timeout`, counted from its first byte
//!   (from the accept for the first request); a kept-alive connection may
//!   wait `idle_timeout` for its next request. A request in flight has no
//!   such limit: a long-poll (`/wait`, the event stream, a WebSocket) waits
//!   as long as it needs. Its body must arrive within `body_timeout`
//!   ([`BodyDeadline`], read by `body.rs`: 408, then the connection
//!   closes). A write that the peer does not take within `write_timeout`
//!   (it stopped reading) ends the connection, so a client that never
//!   reads its event stream is dropped and what was queued for it freed.
//! - **Buffers.** A request head is at most 32 KiB (431 past it), and a
//!   connection's buffers grow to 64 KiB at most (hyper's default let a
//!   slow head fill about 400 KiB per connection).
//! - **Accept errors** (out of file descriptors) back off, from 10 ms to
//!   1 s, instead of spinning.

use std::collections::HashMap;
use std::convert::Infallible;
use std::future::Future;
use std::net::IpAddr;
use std::pin::{Pin, pin};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use hyper::body::{Body as HttpBody, Frame, Incoming, SizeHint};
use hyper::server::conn::http1;
use hyper::service::Service;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, watch};
use tokio::time::{Instant, Sleep};
use tokio_rustls::TlsAcceptor;

/// Limits on connections, and on how long each part of a request may take.
#[derive(Debug, Clone)]
pub struct ConnectionSettings {
    /// Most connections at once (`--max-connections`).
    pub max_connections: usize,
    /// Most connections from one address (`--max-connections-per-address`;
    /// IPv6 by /64).
    pub max_per_address: usize,
    /// A request's head must arrive within this (`--header-timeout`).
    pub header_timeout: Duration,
    /// A kept-alive connection's wait for its next request (`--idle-timeout`).
    pub idle_timeout: Duration,
    /// A request's body must arrive within this (`--body-timeout`).
    pub body_timeout: Duration,
    /// A write the peer does not take within this ends the connection
    /// (`--write-timeout`).
    pub write_timeout: Duration,
}

impl Default for ConnectionSettings {
    fn default() -> Self {
        Self {
            max_connections: 10_000,
            max_per_address: 2_000,
            header_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(120),
            body_timeout: Duration::from_secs(60),
            write_timeout: Duration::from_secs(30),
        }
    }
}

/// The deadline of a request's body, put in its extensions when its head
/// arrived.
#[derive(Debug, Clone, Copy)]
pub struct BodyDeadline(pub Instant);

/// The largest request head (line and headers): 431 past it. hyper's own
/// limit was its whole buffer, about 400 KiB a connection.
const MAX_HEAD: usize = 32 * 1024;
/// The most a connection's read or write buffer grows to (hyper's default
/// is about 400 KiB): bodies stream through it in pieces.
const MAX_BUFFER: usize = 64 * 1024;

/// How much longer than the write timeout a WebSocket's socket waits on a
/// write before it fails: its writer closes a peer that does not read
/// itself first (with a close frame, which takes a few seconds' chance).
const UPGRADED_WRITE_EXTRA: Duration = Duration::from_secs(10);

/// Connections replaced at the global cap may still be closing: at most
/// this many over the cap.
const EVICTION_SLACK: usize = 64;

/// Serve `app` on `listener` (TLS when `tls` is given) until `signal`
/// resolves; then stop accepting, shut every connection down gracefully
/// (the request in flight finishes, an idle keep-alive connection closes)
/// and return when all have closed.
pub async fn serve<F>(
    listener: TcpListener,
    tls: Option<TlsAcceptor>,
    app: Router,
    limits: ConnectionSettings,
    signal: F,
) where
    F: Future<Output = ()>,
{
    let registry = Arc::new(Registry::new(limits));
    // `true` once shutdown begins; each connection task watches it.
    let (stop_tx, stop_rx) = watch::channel(false);
    // Each connection task holds a receiver; all dropped: all closed.
    let (closed_tx, closed_rx) = watch::channel(());
    let mut signal = pin!(signal);
    let mut backoff = Duration::ZERO;
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            () = &mut signal => break,
        };
        let (stream, addr) = match accepted {
            Ok(pair) => {
                backoff = Duration::ZERO;
                pair
            }
            // The peer gave up before the accept: nothing is wrong here.
            Err(e) if is_connection_error(&e) => continue,
            Err(e) => {
                // Out of file descriptors, memory: retrying at once would
                // spin. Back off, doubling up to a second.
                backoff = (backoff * 2).clamp(Duration::from_millis(10), Duration::from_secs(1));
                registry.note(&format!(
                    "cannot accept connections: {e}; retrying in {} ms",
                    backoff.as_millis()
                ));
                tokio::select! {
                    () = tokio::time::sleep(backoff) => continue,
                    () = &mut signal => break,
                }
            }
        };
        let slot = match registry.admit(addr.ip()) {
            Ok(slot) => slot,
            Err(why) => {
                registry.note(&format!("connection from {addr} refused: {why}"));
                refuse(&stream, why, tls.is_some());
                continue;
            }
        };
        let service = Tracked {
            inner: TowerToHyperService::new(app.clone()),
            conn: Arc::clone(&slot.conn),
            origin: registry.origin,
            body_timeout: registry.limits.body_timeout,
        };
        let limits = registry.limits.clone();
        let origin = registry.origin;
        let stop = stop_rx.clone();
        let closed = closed_rx.clone();
        let tls = tls.clone();
        tokio::spawn(async move {
            // The connection (and the router's state it holds) is dropped at
            // the end of this block, before the server is told it closed.
            {
                let conn = Arc::clone(&slot.conn);
                let io = Guarded {
                    io: stream,
                    conn: Arc::clone(&conn),
                    origin,
                    write_timeout: limits.write_timeout,
                    stall: None,
                    _slot: slot,
                };
                match tls {
                    None => drive(io, service, &conn, &limits, origin, stop).await,
                    Some(acceptor) => {
                        let handshake = tokio::select! {
                            tls = acceptor.accept(io) => tls,
                            () = watchdog(&conn, &limits, origin) => return drop(closed),
                        };
                        if let Ok(tls) = handshake {
                            drive(tls, service, &conn, &limits, origin, stop).await;
                        }
                    }
                }
            }
            drop(closed);
        });
    }
    drop(listener);
    stop_tx.send_replace(true);
    drop(closed_rx);
    closed_tx.closed().await;
}

/// Serve one connection with hyper until it ends, its watchdog ends it
/// (a timeout, or replaced at the cap), or shutdown.
async fn drive<IO>(
    io: IO,
    service: Tracked,
    conn: &Conn,
    limits: &ConnectionSettings,
    origin: Instant,
    mut stop: watch::Receiver<bool>,
) where
    IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let mut http = pin!(
        http1::Builder::new()
            .max_header_size(MAX_HEAD)
            .max_buf_size(MAX_BUFFER)
            .serve_connection(TokioIo::new(io), service)
            .with_upgrades()
    );
    tokio::select! {
        // A connection that fails (the peer went away, a malformed
        // request) just ends; hyper answered what it could.
        _ = http.as_mut() => {}
        // Dropping it closes the socket.
        () = watchdog(conn, limits, origin) => {}
        // It only ever turns `true`; a dropped sender means the same.
        _ = stop.changed() => {
            http.as_mut().graceful_shutdown();
            let _ = http.await;
        }
    }
}

fn is_connection_error(e: &std::io::Error) -> bool {
    use std::io::ErrorKind;
    matches!(
        e.kind(),
        ErrorKind::ConnectionRefused | ErrorKind::ConnectionAborted | ErrorKind::ConnectionReset
    )
}

/// Answer a refused connection 503 (plain HTTP only: it is one small write
/// that never waits) and close it.
fn refuse(stream: &TcpStream, why: &str, tls: bool) {
    if tls {
        return;
    }
    let body = format!(
        "{{\"error\":{{\"code\":\"too_many_connections\",\"message\":\"{why}; retry shortly\"}}}}"
    );
    let response = format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\n\
         content-length: {}\r\nretry-after: 1\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = stream.try_write(response.as_bytes());
}

/// Every connection of this server, by address.
struct Registry {
    limits: ConnectionSettings,
    origin: Instant,
    conns: Mutex<Conns>,
    /// When the last note was logged, and how many were not since.
    noted: Mutex<(Option<Instant>, u64)>,
}

#[derive(Default)]
struct Conns {
    next_id: u64,
    live: HashMap<u64, Arc<Conn>>,
    /// Live connections by address, and how many of those are closing to
    /// make room.
    per_address: HashMap<IpAddr, (usize, usize)>,
    /// Live connections told to close to make room.
    evicting: usize,
}

impl Conns {
    /// Tell the connection that has waited longest without a request in
    /// flight, among those `which` picks, to close (a linear scan, only at
    /// a cap). False when every one is serving a request.
    fn evict(&mut self, which: impl Fn(&Conn) -> bool) -> bool {
        let victim = self
            .live
            .values()
            .filter(|c| which(c) && c.evictable())
            .min_by_key(|c| c.idle_since.load(Ordering::Acquire))
            .cloned();
        let Some(victim) = victim else {
            return false;
        };
        victim.evicted.store(true, Ordering::Release);
        victim.wake.notify_one();
        self.evicting += 1;
        if let Some((_, evicting)) = self.per_address.get_mut(&victim.address) {
            *evicting += 1;
        }
        true
    }
}

/// One connection's state, shared by its IO, its requests and its watchdog.
struct Conn {
    id: u64,
    address: IpAddr,
    /// Requests being served.
    in_flight: AtomicUsize,
    /// Handed to a WebSocket: it keeps its own time.
    upgraded: AtomicBool,
    /// A request has started on it.
    served: AtomicBool,
    /// Milliseconds from the registry's origin when it last had no request
    /// in flight.
    idle_since: AtomicU64,
    /// Milliseconds (plus one; 0: none) when the head of its next request
    /// began to arrive.
    head_since: AtomicU64,
    /// Told to close to make room for a new connection.
    evicted: AtomicBool,
    /// Wakes its watchdog: a request started or ended, or it was evicted.
    wake: Notify,
}

impl Conn {
    fn evictable(&self) -> bool {
        self.in_flight.load(Ordering::Acquire) == 0
            && !self.upgraded.load(Ordering::Acquire)
            && !self.evicted.load(Ordering::Acquire)
    }
}

/// A connection's place in the registry; dropping it (with the socket)
/// frees the place.
struct Slot {
    registry: Arc<Registry>,
    conn: Arc<Conn>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut conns = self.registry.lock();
        conns.live.remove(&self.conn.id);
        let evicted = self.conn.evicted.load(Ordering::Acquire);
        if evicted {
            conns.evicting = conns.evicting.saturating_sub(1);
        }
        if let Some((live, evicting)) = conns.per_address.get_mut(&self.conn.address) {
            *live = live.saturating_sub(1);
            if evicted {
                *evicting = evicting.saturating_sub(1);
            }
            if *live == 0 {
                conns.per_address.remove(&self.conn.address);
            }
        }
    }
}

/// The key an address is counted under: an IPv4 address (also written as
/// IPv6), or an IPv6 address's /64.
fn address_key(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(v4) => IpAddr::V4(v4),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let mut octets = v6.octets();
                octets[8..].fill(0);
                IpAddr::V6(octets.into())
            }
        },
    }
}

fn millis_since(origin: Instant) -> u64 {
    u64::try_from(origin.elapsed().as_millis()).unwrap_or(u64::MAX)
}

impl Registry {
    fn new(limits: ConnectionSettings) -> Self {
        Self {
            limits,
            origin: Instant::now(),
            conns: Mutex::new(Conns::default()),
            noted: Mutex::new((None, 0)),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Conns> {
        self.conns.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A place for a new connection from `ip`, or why not.
    fn admit(self: &Arc<Self>, ip: IpAddr) -> Result<Slot, &'static str> {
        let address = address_key(ip);
        let mut conns = self.lock();
        let (here, here_evicting) = conns.per_address.get(&address).copied().unwrap_or((0, 0));
        // Those closing to make room are gone in moments; until then at
        // most a few more than the caps are open.
        if here >= self.limits.max_per_address + EVICTION_SLACK {
            return Err("too many connections from this address");
        }
        if conns.live.len() >= self.limits.max_connections + EVICTION_SLACK {
            return Err("the server is at its connection limit");
        }
        // At a cap, the connection waiting longest without a request in
        // flight (of this address, at its cap) makes room.
        if here - here_evicting >= self.limits.max_per_address {
            if !conns.evict(|c| c.address == address) {
                return Err("too many connections from this address");
            }
        } else if conns.live.len() - conns.evicting >= self.limits.max_connections
            && !conns.evict(|_| true)
        {
            return Err("the server is at its connection limit");
        }
        conns.next_id += 1;
        let conn = Arc::new(Conn {
            id: conns.next_id,
            address,
            in_flight: AtomicUsize::new(0),
            upgraded: AtomicBool::new(false),
            served: AtomicBool::new(false),
            idle_since: AtomicU64::new(millis_since(self.origin)),
            head_since: AtomicU64::new(0),
            evicted: AtomicBool::new(false),
            wake: Notify::new(),
        });
        conns.live.insert(conn.id, Arc::clone(&conn));
        conns.per_address.entry(address).or_default().0 += 1;
        Ok(Slot {
            registry: Arc::clone(self),
            conn,
        })
    }

    /// Log `message`, at most once every 30 s (with how many were not).
    fn note(&self, message: &str) {
        let mut noted = self.noted.lock().unwrap_or_else(PoisonError::into_inner);
        let (last, skipped) = &mut *noted;
        if last.is_some_and(|t| t.elapsed() < Duration::from_secs(30)) {
            *skipped += 1;
            return;
        }
        if *skipped > 0 {
            crate::log::info(&format!("{message} (and {skipped} more such notes)"));
        } else {
            crate::log::info(message);
        }
        *last = Some(Instant::now());
        *skipped = 0;
    }
}

/// Resolves when `conn` must close: its head came too slowly, it was idle
/// too long between requests, or it was replaced at the cap. Never while a
/// request is in flight, nor once it became a WebSocket.
async fn watchdog(conn: &Conn, limits: &ConnectionSettings, origin: Instant) {
    loop {
        let woken = conn.wake.notified();
        if conn.evicted.load(Ordering::Acquire) {
            return;
        }
        if conn.upgraded.load(Ordering::Acquire) {
            return std::future::pending().await;
        }
        if conn.in_flight.load(Ordering::Acquire) > 0 {
            woken.await;
            continue;
        }
        let head = conn.head_since.load(Ordering::Acquire);
        let idle = conn.idle_since.load(Ordering::Acquire);
        let deadline = if head > 0 {
            origin + Duration::from_millis(head - 1) + limits.header_timeout
        } else if !conn.served.load(Ordering::Acquire) {
            origin + Duration::from_millis(idle) + limits.header_timeout
        } else {
            origin + Duration::from_millis(idle) + limits.idle_timeout
        };
        if Instant::now() >= deadline {
            return;
        }
        tokio::select! {
            () = tokio::time::sleep_until(deadline) => {}
            () = woken => {}
        }
    }
}

/// The router, with each request counted on its connection.
struct Tracked {
    inner: TowerToHyperService<Router>,
    conn: Arc<Conn>,
    origin: Instant,
    body_timeout: Duration,
}

/// A request in flight on a connection; dropped with its response's body.
struct InFlight {
    conn: Arc<Conn>,
    origin: Instant,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.conn
            .idle_since
            .store(millis_since(self.origin), Ordering::Release);
        self.conn.head_since.store(0, Ordering::Release);
        self.conn.in_flight.fetch_sub(1, Ordering::AcqRel);
        self.conn.wake.notify_one();
    }
}

impl Service<Request<Incoming>> for Tracked {
    type Response = Response<TrackedBody>;
    type Error = Infallible;
    type Future =
        Pin<Box<dyn Future<Output = Result<Response<TrackedBody>, Infallible>> + Send + 'static>>;

    fn call(&self, mut req: Request<Incoming>) -> Self::Future {
        self.conn.in_flight.fetch_add(1, Ordering::AcqRel);
        self.conn.served.store(true, Ordering::Release);
        self.conn.head_since.store(0, Ordering::Release);
        self.conn.wake.notify_one();
        let in_flight = InFlight {
            conn: Arc::clone(&self.conn),
            origin: self.origin,
        };
        req.extensions_mut()
            .insert(BodyDeadline(Instant::now() + self.body_timeout));
        let response = self.inner.call(req);
        let conn = Arc::clone(&self.conn);
        Box::pin(async move {
            let response = response.await?;
            if response.status() == hyper::StatusCode::SWITCHING_PROTOCOLS {
                conn.upgraded.store(true, Ordering::Release);
            }
            Ok(response.map(|inner| TrackedBody {
                inner,
                _in_flight: in_flight,
            }))
        })
    }
}

/// A response's body; the request counts as in flight until it is dropped.
struct TrackedBody {
    inner: axum::body::Body,
    _in_flight: InFlight,
}

impl HttpBody for TrackedBody {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// The socket, noting when a request's head begins, and failing a write
/// that waits past the write timeout (the peer stopped reading). It holds
/// the connection's place in the registry, so a WebSocket that outlives
/// hyper's part still counts.
struct Guarded {
    io: TcpStream,
    conn: Arc<Conn>,
    origin: Instant,
    write_timeout: Duration,
    /// Running while a write waits.
    stall: Option<Pin<Box<Sleep>>>,
    _slot: Slot,
}

impl Guarded {
    /// Note a write's outcome: a write that waits starts (or goes on
    /// with) the stall timer; past it, the write fails.
    fn track<T>(
        &mut self,
        cx: &mut Context<'_>,
        polled: Poll<std::io::Result<T>>,
    ) -> Poll<std::io::Result<T>> {
        if polled.is_ready() {
            self.stall = None;
            return polled;
        }
        // A WebSocket's writer closes a peer that does not read itself (with
        // a close frame and an audit entry); this is the backstop.
        let limit = if self.conn.upgraded.load(Ordering::Acquire) {
            self.write_timeout + UPGRADED_WRITE_EXTRA
        } else {
            self.write_timeout
        };
        let stall = self
            .stall
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(limit)));
        if stall.as_mut().poll(cx).is_ready() {
            return Poll::Ready(Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "the peer did not read what was written within the write timeout",
            )));
        }
        Poll::Pending
    }
}

impl AsyncRead for Guarded {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.io).poll_read(cx, buf);
        if matches!(polled, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            let conn = &self.conn;
            if conn.in_flight.load(Ordering::Acquire) == 0
                && conn.head_since.load(Ordering::Acquire) == 0
            {
                conn.head_since
                    .store(millis_since(self.origin) + 1, Ordering::Release);
            }
        }
        polled
    }
}

impl AsyncWrite for Guarded {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let polled = Pin::new(&mut self.io).poll_write(cx, buf);
        self.track(cx, polled)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let polled = Pin::new(&mut self.io).poll_write_vectored(cx, bufs);
        self.track(cx, polled)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let polled = Pin::new(&mut self.io).poll_flush(cx);
        self.track(cx, polled)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let polled = Pin::new(&mut self.io).poll_shutdown(cx);
        self.track(cx, polled)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use axum::routing::get;
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    use tokio::net::{TcpListener, TcpStream};

    use super::*;

    /// Counts its clones: a route's handler is cloned whenever the route
    /// table holding it is.
    struct CloneCounter(Arc<AtomicUsize>);

    impl Clone for CloneCounter {
        fn clone(&self) -> Self {
            self.0.fetch_add(1, Ordering::SeqCst);
            Self(Arc::clone(&self.0))
        }
    }

    async fn get_over_new_connection(addr: std::net::SocketAddr, path: &str) -> String {
        let mut stream = TcpStream::connect(addr).await.unwrap();
        let request = format!("GET {path} HTTP/1.1\r\nhost: lev\r\nconnection: close\r\n\r\n");
        stream.write_all(request.as_bytes()).await.unwrap();
        let mut response = String::new();
        stream.read_to_string(&mut response).await.unwrap();
        response
    }

    /// A new connection shares the router: it copies no route table (as
    /// `axum::serve` given a `Router` did, about 19 KiB per connection, which
    /// thousands of held long-polls multiplied). Only a request to a route
    /// clones that route's handler.
    #[tokio::test]
    async fn connections_share_the_router() {
        let clones = Arc::new(AtomicUsize::new(0));
        let counted = CloneCounter(Arc::clone(&clones));
        let app = Router::new()
            .route(
                "/counted",
                get(move || {
                    let _held = &counted;
                    async { "counted" }
                }),
            )
            .route("/other", get(|| async { "other" }));
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let server = tokio::spawn(serve(
            listener,
            None,
            app,
            ConnectionSettings::default(),
            async move {
                let _ = stop_rx.await;
            },
        ));
        let before = clones.load(Ordering::SeqCst);
        for _ in 0..20 {
            let response = get_over_new_connection(addr, "/other").await;
            assert!(response.starts_with("HTTP/1.1 200"), "{response}");
        }
        assert_eq!(
            clones.load(Ordering::SeqCst),
            before,
            "20 connections to another route cloned the counted route's handler"
        );
        let response = get_over_new_connection(addr, "/counted").await;
        assert!(response.ends_with("counted"), "{response}");
        assert!(clones.load(Ordering::SeqCst) > before);
        let _ = stop_tx.send(());
        server.await.unwrap();
    }
}
