//! `GET /v1/events`: a Server-Sent Events reader.

use crate::error::{Error, Result};

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
            if let Some(event) = self.parser.next_event() {
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
    id: Option<String>,
    event: Option<String>,
    data: Vec<String>,
}

impl Parser {
    fn feed(&mut self, bytes: &[u8]) {
        self.buffer.extend_from_slice(bytes);
    }

    fn next_event(&mut self) -> Option<Event> {
        while let Some(end) = self.buffer.iter().position(|&b| b == b'\n') {
            let mut line: Vec<u8> = self.buffer.drain(..=end).collect();
            line.pop();
            if line.last() == Some(&b'\r') {
                line.pop();
            }
            let line = String::from_utf8_lossy(&line).into_owned();
            if line.is_empty() {
                if self.data.is_empty() && self.event.is_none() {
                    continue;
                }
                let event = Event {
                    id: self.id.clone(),
                    event: self.event.take().unwrap_or_else(|| "message".into()),
                    data: std::mem::take(&mut self.data).join("\n"),
                };
                return Some(event);
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
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_events_split_across_chunks() {
        let mut p = Parser::default();
        p.feed(b": keep-alive\n\nid: 7\nevent: interaction.created\ndata: {\"a\":");
        assert_eq!(p.next_event(), None);
        p.feed(b"1}\r\n\r\ndata: x\ndata: y\n\n");
        let e = p.next_event();
        assert_eq!(
            e,
            Some(Event {
                id: Some("7".into()),
                event: "interaction.created".into(),
                data: "{\"a\":1}".into()
            })
        );
        let e = p.next_event();
        assert_eq!(e.as_ref().map(|e| e.data.as_str()), Some("x\ny"));
        assert_eq!(e.as_ref().and_then(|e| e.id.as_deref()), Some("7"));
        assert_eq!(p.next_event(), None);
    }
}
