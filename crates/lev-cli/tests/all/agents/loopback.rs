//! The plumbing of the fake model APIs the coding-agent tests serve on
//! loopback (Codex's Responses API, Claude Code's Messages API): a listener
//! on 127.0.0.1:0 that serves each connection on a thread of its own, and
//! one HTTP/1.1 request read off a connection.

use std::io::{BufRead as _, BufReader, Read as _};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::time::Duration;

/// Serve every connection to a new loopback port with `serve(stream,
/// state)`, each on a thread (detached; idle once the test is done). The
/// port.
pub fn serve_each<S: Send + Sync + 'static>(
    state: Arc<S>,
    serve: fn(TcpStream, &S) -> std::io::Result<()>,
) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind a loopback port");
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let state = state.clone();
            std::thread::spawn(move || {
                let _ = serve(stream, &state);
            });
        }
    });
    port
}

/// One request as it came.
#[derive(Debug)]
pub struct Request {
    /// `POST /v1/messages?beta=true HTTP/1.1`, trimmed.
    pub line: String,
    /// Its headers, names lowercased.
    pub headers: Vec<(String, String)>,
    /// Its body, de-chunked.
    pub body: Vec<u8>,
}

impl Request {
    /// Read one request off `stream` (a body by `Content-Length` or
    /// chunked).
    pub fn read(stream: &TcpStream) -> std::io::Result<Self> {
        stream.set_read_timeout(Some(Duration::from_secs(30)))?;
        let mut reader = BufReader::new(stream.try_clone()?);
        let mut line = String::new();
        reader.read_line(&mut line)?;
        let mut headers = Vec::new();
        loop {
            let mut header = String::new();
            if reader.read_line(&mut header)? == 0 || header == "\r\n" {
                break;
            }
            if let Some((name, value)) = header.trim_end().split_once(':') {
                headers.push((name.trim().to_ascii_lowercase(), value.trim().to_owned()));
            }
        }
        let mut request = Self {
            line: line.trim_end().to_owned(),
            headers,
            body: Vec::new(),
        };
        if request
            .header("transfer-encoding")
            .is_some_and(|v| v.eq_ignore_ascii_case("chunked"))
        {
            loop {
                let mut size = String::new();
                reader.read_line(&mut size)?;
                let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
                let mut chunk = vec![0; n + 2];
                reader.read_exact(&mut chunk)?;
                if n == 0 {
                    break;
                }
                request.body.extend_from_slice(&chunk[..n]);
            }
        } else {
            let length = request
                .header("content-length")
                .and_then(|v| v.parse().ok())
                .unwrap_or(0);
            request.body.resize(length, 0);
            reader.read_exact(&mut request.body)?;
        }
        Ok(request)
    }

    /// The value of header `name` (lowercase), when it came.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// The method.
    pub fn method(&self) -> &str {
        self.line.split_whitespace().next().unwrap_or_default()
    }

    /// The path, without its query.
    pub fn path(&self) -> &str {
        let target = self.line.split_whitespace().nth(1).unwrap_or_default();
        target.split('?').next().unwrap_or_default()
    }
}
