//! `GET /v1/events`: a Server-Sent Events reader.
//!
//! The reader holds at most one event of [`MAX_EVENT_BYTES`]: a server (or
//! anything between) that sends a line without end, or data lines without
//! the blank line that ends an event, gets an error, not this process's
//! memory; each byte is looked at once.

use crate::error::{Error, Result};

/// The most one event (its lines together) may weigh: far above any event
/// lev sends (an interaction holds at most 256 KiB of args).
pub const MAX_EVENT_BYTES: usize = 16 * 1024 * 1024;

/// One event of the stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// The durable sequence number; pass it back as `Last-Event-ID` to resume.
    pub id: Option<String>,
    /// `interaction.created`, `interaction.answered`, ... (`message` when unnamed).
    pub event: String,
    /// The data lines, joined with `\n`.
    pub data: String,
}

impl Event {
    /// The data as JSON.
    ///
    /// # Errors
    /// When the data is not JSON.
    pub fn json(&self) -> serde_json::Result<serde_json::Value> {
        serde_json::from_str(&self.data)
    }
}

/// The events of one `GET /v1/events` connection.
#[derive(Debug)]
pub struct EventStream {
    response: reqwest::Response,
    parser: Parser,
}

impl EventStream {
    pub(crate) fn new(response: reqwest::Response) -> Self {
        Self {
            response,
            parser: Parser::default(),
        }
    }

    /// The next event; `None` when the server closed the stream.
    ///
    /// # Errors
    /// [`Error::Transport`] when the connection fails.
    pub async fn next(&mut self) -> Result<Option<Event>> {
        loop {
            let parsed = self.parser.next_event().map_err(|found| Error::Decode {
                path: "/v1/events".into(),
                expected: "server-sent events of at most 16 MiB each",
                found,
            })?;
            if let Some(event) = parsed {
                return Ok(Some(event));
            }
            let chunk = self
                .response
                .chunk()
                .await
                .map_err(|source| Error::Transport {
                    method: "GET",
                    path: "/v1/events".into(),
                    source,
                })?;
            match chunk {
                Some(bytes) => self.parser.feed(&bytes),
                None => return Ok(None),
            }
        }
    }
}

/// The SSE line protocol, fed bytes as they come.
#[derive(Debug, Default)]
struct Parser {
    buffer: Vec<u8>,
    /// Where the next line starts in `buffer`.
    start: usize,
    /// How far `buffer` was searched for a newline.
    scanned: usize,
    /// The bytes of the event being read so far.
    event_bytes: usize,
    id: Option<String>,
    event: Option<String>,
    data: Vec<String>,
}

impl Parser {
    fn feed(&mut self, bytes: &[u8]) {
        // Drop the lines already read, once per chunk (not once per line).
        self.buffer.drain(..self.start);
        self.scanned -= self.start;
        self.start = 0;
        self.buffer.extend_from_slice(bytes);
    }

    /// The next whole event, if one is in; an error past [`MAX_EVENT_BYTES`].
    fn next_event(&mut self) -> Result<Option<Event>, String> {
        loop {
            let Some(newline) = self.buffer[self.scanned..].iter().position(|&b| b == b'\n') else {
                self.scanned = self.buffer.len();
                let unfinished = self.buffer.len() - self.start;
                if self.event_bytes + unfinished > MAX_EVENT_BYTES {
                    return Err(format!(
                        "more than {MAX_EVENT_BYTES} bytes without the end of an event"
                    ));
                }
                return Ok(None);
            };
            let end = self.scanned + newline;
            let mut line = &self.buffer[self.start..end];
            self.start = end + 1;
            self.scanned = self.start;
            if line.last() == Some(&b'\r') {
                line = &line[..line.len() - 1];
            }
            self.event_bytes += line.len() + 1;
            if self.event_bytes > MAX_EVENT_BYTES {
                return Err(format!("an event of more than {MAX_EVENT_BYTES} bytes"));
            }
            let line = String::from_utf8_lossy(line).into_owned();
            if line.is_empty() {
                self.event_bytes = 0;
                if self.data.is_empty() && self.event.is_none() {
                    continue;
                }
                let event = Event {
                    id: self.id.clone(),
                    event: self.event.take().unwrap_or_else(|| "message".into()),
                    data: std::mem::take(&mut self.data).join("\n"),
                };
                return Ok(Some(event));
            }
            if line.starts_with(':') {
                continue;
            }
            let (field, value) = match line.split_once(':') {
                Some((f, v)) => (f.to_owned(), v.strip_prefix(' ').unwrap_or(v).to_owned()),
                None => (line.clone(), String::new()),
            };
            match field.as_str() {
                "id" => self.id = Some(value),
                "event" => self.event = Some(value),
                "data" => self.data.push(value),
                _ => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_events_split_across_chunks() {
        let mut p = Parser::default();
        p.feed(b": keep-alive\n\nid: 7\nevent: interaction.created\ndata: {\"a\":");
        assert_eq!(p.next_event(), Ok(None));
        p.feed(b"1}\r\n\r\ndata: x\ndata: y\n\n");
        let e = p.next_event().unwrap();
        assert_eq!(
            e,
            Some(Event {
                id: Some("7".into()),
                event: "interaction.created".into(),
                data: "{\"a\":1}".into()
            })
        );
        let e = p.next_event().unwrap();
        assert_eq!(e.as_ref().map(|e| e.data.as_str()), Some("x\ny"));
        assert_eq!(e.as_ref().and_then(|e| e.id.as_deref()), Some("7"));
        assert_eq!(p.next_event(), Ok(None));
    }

    #[test]
    fn a_line_or_an_event_without_end_is_refused_at_the_limit() {
        // One line that never ends, fed in chunks.
        let mut p = Parser::default();
        let chunk = vec![b'x'; 1024 * 1024];
        let mut refused = false;
        for _ in 0..20 {
            p.feed(&chunk);
            if p.next_event().is_err() {
                refused = true;
                break;
            }
        }
        assert!(refused, "a line without end was buffered whole");
        assert!(p.buffer.len() <= MAX_EVENT_BYTES + chunk.len());
        // Data lines without the blank line that ends an event.
        let mut p = Parser::default();
        let line = format!("data: {}\n", "y".repeat(1024 * 1024));
        let mut refused = false;
        for _ in 0..20 {
            p.feed(line.as_bytes());
            if p.next_event().is_err() {
                refused = true;
                break;
            }
        }
        assert!(refused, "an event without end was buffered whole");
    }

    #[test]
    fn many_small_lines_are_read_in_linear_time() {
        let mut p = Parser::default();
        let mut bytes = Vec::new();
        for i in 0..200_000 {
            bytes.extend_from_slice(format!(": keep-alive {i}\n").as_bytes());
        }
        bytes.extend_from_slice(b"data: last\n\n");
        let started = std::time::Instant::now();
        p.feed(&bytes);
        let e = p.next_event().unwrap().unwrap();
        assert_eq!(e.data, "last");
        assert!(started.elapsed() < std::time::Duration::from_secs(5));
    }
}
