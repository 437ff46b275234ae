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

use std::future::Future;
use std::pin::pin;

use axum::Router;
use axum::serve::Listener;
use hyper::server::conn::http1;
use hyper_util::rt::TokioIo;
use hyper_util::service::TowerToHyperService;
use tokio::sync::watch;

/// Serve `app` on `listener` until `signal` resolves; then stop accepting,
/// shut every connection down gracefully (the request in flight finishes,
/// an idle keep-alive connection closes) and return when all have closed.
pub async fn serve<L, F>(mut listener: L, app: Router, signal: F)
where
    L: Listener,
    F: Future<Output = ()>,
{
    // `true` once shutdown begins; each connection task watches it.
    let (stop_tx, stop_rx) = watch::channel(false);
    // Each connection task holds a receiver; all dropped: all closed.
    let (closed_tx, closed_rx) = watch::channel(());
    let mut signal = pin!(signal);
    loop {
        let (io, _addr) = tokio::select! {
            accepted = listener.accept() => accepted,
            () = &mut signal => break,
        };
        let service = TowerToHyperService::new(app.clone());
        let mut stop = stop_rx.clone();
        let closed = closed_rx.clone();
        tokio::spawn(async move {
            // The connection (and the router's state it holds) is dropped at
            // the end of this block, before the server is told it closed.
            {
                let mut conn = pin!(
                    http1::Builder::new()
                        .serve_connection(TokioIo::new(io), service)
                        .with_upgrades()
                );
                tokio::select! {
                    // A connection that fails (the peer went away, a malformed
                    // request) just ends; hyper answered what it could.
                    _ = conn.as_mut() => {}
                    // It only ever turns `true`; a dropped sender means the same.
                    _ = stop.changed() => {
                        conn.as_mut().graceful_shutdown();
                        let _ = conn.await;
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
        let server = tokio::spawn(serve(listener, app, async move {
            let _ = stop_rx.await;
        }));
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
