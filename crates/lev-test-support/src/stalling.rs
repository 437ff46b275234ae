//! HTTP servers that misbehave on purpose, for the tests of deadlines: a
//! client with a time limit must give its fail behaviour in time whatever
//! the server does. Each listens on `127.0.0.1:0`, serves every connection
//! on a thread of its own, and stops when dropped.

use std::io::{Read as _, Write as _};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// What the server does with each request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stall {
    /// Accepts the connection, reads the request, never answers.
    Silent,
    /// Sends a 200 with a long `content-length`, then one byte of the body
    /// (a space: valid JSON whitespace) every 100 ms, never finishing.
    TrickleBody,
    /// Sends a status line, then one byte of a header every 100 ms, never
    /// finishing the headers.
    TrickleHeaders,
    /// Sends a 200 and part of its body, then closes the connection.
    CloseMidResponse,
}

/// A running misbehaving server.
#[derive(Debug)]
pub struct Stalling {
    url: String,
    stop: Arc<AtomicBool>,
}

impl Stalling {
    /// Start one.
    ///
    /// # Errors
    /// When it cannot listen.
    pub fn start(stall: Stall) -> std::io::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let url = format!("http://{}", listener.local_addr()?);
        let stop = Arc::new(AtomicBool::new(false));
        listener.set_nonblocking(true)?;
        let stopping = Arc::clone(&stop);
        std::thread::spawn(move || {
            while !stopping.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((stream, _)) => {
                        let stopping = Arc::clone(&stopping);
                        std::thread::spawn(move || serve(stream, stall, &stopping));
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(10)),
                }
            }
        });
        Ok(Self { url, stop })
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> &str {
        &self.url
    }
}

impl Drop for Stalling {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// One connection.
fn serve(mut stream: TcpStream, stall: Stall, stop: &AtomicBool) {
    let _ = stream.set_nonblocking(false);
    let _ = stream.set_read_timeout(Some(Duration::from_millis(100)));
    // The request's head (a body, if any, is read and ignored below).
    let mut head = Vec::new();
    let mut buf = [0u8; 4096];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        if stop.load(Ordering::Relaxed) {
            return;
        }
        match stream.read(&mut buf) {
            Ok(0) => return,
            Ok(n) => head.extend_from_slice(&buf[..n]),
            Err(e) if is_timeout(&e) => {}
            Err(_) => return,
        }
    }
    let tick = Duration::from_millis(100);
    match stall {
        Stall::Silent => {
            // Read whatever comes, answer nothing, until the client goes.
            while !stop.load(Ordering::Relaxed) {
                match stream.read(&mut buf) {
                    Ok(0) => return,
                    Ok(_) => {}
                    Err(e) if is_timeout(&e) => {}
                    Err(_) => return,
                }
            }
        }
        Stall::TrickleBody => {
            let head = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 10000000\r\n\r\n";
            if stream.write_all(head).is_err() {
                return;
            }
            drip(&mut stream, b" ", tick, stop);
        }
        Stall::TrickleHeaders => {
            if stream.write_all(b"HTTP/1.1 200 OK\r\nx-slow: ").is_err() {
                return;
            }
            drip(&mut stream, b"a", tick, stop);
        }
        Stall::CloseMidResponse => {
            let _ = stream.write_all(
                b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 1000\r\n\r\n{\"keys\": [",
            );
            let _ = stream.flush();
            // Dropped here: closed mid-body.
        }
    }
}

/// `byte` every `tick` until the client goes or the server stops.
fn drip(stream: &mut TcpStream, byte: &[u8], tick: Duration, stop: &AtomicBool) {
    while !stop.load(Ordering::Relaxed) {
        if stream
            .write_all(byte)
            .and_then(|()| stream.flush())
            .is_err()
        {
            return;
        }
        std::thread::sleep(tick);
    }
}

fn is_timeout(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
    )
}
