//! Server-sent events as Streamable HTTP carries MCP messages: each event's
//! `data` lines are one JSON-RPC message. Pure: fed bytes, gives events.

use super::transport::MAX_MESSAGE;

/// Reads events out of a stream's bytes as they come.
#[derive(Debug, Default)]
pub struct Reader {
    /// Bytes of a line not yet ended.
    line: Vec<u8>,
    /// The `data` of the event being read.
    data: String,
    /// Whether the event has a `data` field yet.
    has_data: bool,
    /// The last byte was a `\r` (a `\n` right after it ends nothing more).
    after_cr: bool,
}

/// An event too large to hold.
#[derive(Debug, PartialEq, Eq)]
pub struct TooLarge;

impl Reader {
    /// Feed `bytes`: the data of every event they complete.
    ///
    /// # Errors
    /// [`TooLarge`] when one event or line passes [`MAX_MESSAGE`].
    pub fn feed(&mut self, bytes: &[u8]) -> Result<Vec<String>, TooLarge> {
        let mut events = Vec::new();
        for &b in bytes {
            let after_cr = std::mem::replace(&mut self.after_cr, b == b'\r');
            match b {
                b'\n' if after_cr => {}
                b'\n' | b'\r' => {
                    let line = std::mem::take(&mut self.line);
                    if let Some(event) = self.end_line(&line) {
                        events.push(event);
                    }
                }
                _ => {
                    self.line.push(b);
                    if self.line.len() > MAX_MESSAGE {
                        return Err(TooLarge);
                    }
                }
            }
            if self.data.len() > MAX_MESSAGE {
                return Err(TooLarge);
            }
        }
        Ok(events)
    }

    fn end_line(&mut self, line: &[u8]) -> Option<String> {
        if line.is_empty() {
            self.has_data = false;
            let data = std::mem::take(&mut self.data);
            return (!data.trim().is_empty()).then_some(data);
        }
        let line = String::from_utf8_lossy(line);
        let (field, value) = match line.split_once(':') {
            Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
            None => (line.as_ref(), ""),
        };
        if field == "data" {
            if self.has_data {
                self.data.push('\n');
            }
            self.data.push_str(value);
            self.has_data = true;
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_across_chunks_and_line_ends() {
        let mut r = Reader::default();
        assert!(
            r.feed(b": comment\nevent: message\nid: 1\ndata: {\"a\"")
                .unwrap()
                .is_empty()
        );
        assert_eq!(r.feed(b":1}\n\n").unwrap(), ["{\"a\":1}"]);
        assert_eq!(r.feed(b"data: x\r\ndata: y\r\n\r\n").unwrap(), ["x\ny"]);
        assert_eq!(r.feed(b"data:z\r\r").unwrap(), ["z"]);
        // An event without data (a priming event) is none.
        assert!(r.feed(b"id: 7\ndata:\n\n").unwrap().is_empty());
    }
}
