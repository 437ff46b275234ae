//! One JSON-RPC message as the relay sees it: its value, and the text it came
//! in as while nothing changed it, so that what the relay does not touch goes
//! on byte for byte (numbers beyond `f64`, key order, escapes included).
//! Pure: no IO.

use serde_json::Value;

/// What a message is, by JSON-RPC 2.0's rules.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    /// A request: `method` and `id`.
    Request,
    /// A notification: `method`, no `id`.
    Notification,
    /// A response: `id` and `result` or `error`, no `method`.
    Response,
    /// None of these (a batch is split before it gets here).
    Invalid,
}

/// One JSON-RPC message.
#[derive(Debug, Clone)]
pub struct Message {
    value: Value,
    /// The text it was read from, while the value is unchanged.
    raw: Option<String>,
}

impl Message {
    /// A message read from `raw`, whose parse is `value`.
    pub fn read(value: Value, raw: String) -> Self {
        Self {
            value,
            raw: Some(raw),
        }
    }

    /// A message the relay writes itself.
    pub fn new(value: Value) -> Self {
        Self { value, raw: None }
    }

    /// The messages of one line or body: a batch (an array) is its elements,
    /// each written anew; anything else is one message, kept as it came.
    pub fn split(value: Value, raw: String) -> Vec<Self> {
        match value {
            Value::Array(items) => items.into_iter().map(Self::new).collect(),
            value => vec![Self::read(value, raw)],
        }
    }

    /// The value.
    pub fn value(&self) -> &Value {
        &self.value
    }

    /// The value, to change: the message is written anew from then on.
    pub fn value_mut(&mut self) -> &mut Value {
        self.raw = None;
        &mut self.value
    }

    /// The text to send, on one line: as it came when unchanged (and one
    /// line), else compact JSON with hidden characters written as `\uXXXX`
    /// (the same value).
    pub fn text(&self) -> String {
        match self.raw.as_deref().map(str::trim) {
            Some(raw) if !raw.contains(['\n', '\r']) => raw.to_owned(),
            _ => lev_protocol::json::to_string_inert(&self.value, false)
                .unwrap_or_else(|_| self.value.to_string()),
        }
    }

    /// What kind of message it is.
    pub fn kind(&self) -> Kind {
        let Some(object) = self.value.as_object() else {
            return Kind::Invalid;
        };
        let has_id = object.get("id").is_some_and(|id| !id.is_null());
        match (object.get("method").and_then(Value::as_str), has_id) {
            (Some(_), true) => Kind::Request,
            (Some(_), false) => Kind::Notification,
            (None, true) if object.contains_key("result") || object.contains_key("error") => {
                Kind::Response
            }
            // An error response to a request whose id could not be read.
            (None, false) if object.contains_key("error") => Kind::Response,
            (None, _) => Kind::Invalid,
        }
    }

    /// The method of a request or notification.
    pub fn method(&self) -> Option<&str> {
        self.value.get("method").and_then(Value::as_str)
    }

    /// The id, when there is one.
    pub fn id(&self) -> Option<&Value> {
        self.value.get("id").filter(|id| !id.is_null())
    }

    /// The params, when they are an object.
    pub fn params(&self) -> Option<&serde_json::Map<String, Value>> {
        self.value.get("params").and_then(Value::as_object)
    }

    /// `params._meta.progressToken`, when the sender asked for progress.
    pub fn progress_token(&self) -> Option<&Value> {
        self.params()?
            .get("_meta")?
            .get("progressToken")
            .filter(|t| t.is_string() || t.is_number())
    }

    /// Replace the id (a request's, when the relay remaps it).
    pub fn set_id(&mut self, id: Value) {
        if let Some(object) = self.value_mut().as_object_mut() {
            object.insert("id".into(), id);
        }
    }
}

/// A key for an id: ids are strings or numbers, and `1` and `"1"` differ.
pub fn id_key(id: &Value) -> String {
    id.to_string()
}

/// A JSON-RPC error response to `id`.
pub fn error(id: Value, code: i64, message: impl Into<String>) -> Message {
    Message::new(serde_json::json!({
        "jsonrpc": "2.0",
        "id": id,
        "error": {"code": code, "message": message.into()},
    }))
}

/// A `tools/call` result that is a tool error the model reads: `text` as its
/// one text block, `isError: true`.
pub fn tool_error(id: Value, text: impl Into<String>) -> Message {
    Message::new(serde_json::json!({
        "jsonrpc": "2.0",
        "id": id,
        "result": {
            "content": [{"type": "text", "text": text.into()}],
            "isError": true,
        },
    }))
}

/// A notification.
pub fn notification(method: &str, params: Value) -> Message {
    Message::new(serde_json::json!({"jsonrpc": "2.0", "method": method, "params": params}))
}

/// JSON-RPC's error codes the relay answers with.
pub mod code {
    /// The text was not JSON.
    pub const PARSE_ERROR: i64 = -32700;
    /// Not a JSON-RPC message.
    pub const INVALID_REQUEST: i64 = -32600;
    /// The params were wrong.
    pub const INVALID_PARAMS: i64 = -32602;
    /// The relay could not do it: the upstream is gone or did not answer.
    pub const INTERNAL_ERROR: i64 = -32603;
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn read(text: &str) -> Message {
        Message::read(serde_json::from_str(text).unwrap(), text.to_owned())
    }

    #[test]
    fn kinds() {
        assert_eq!(
            read(r#"{"jsonrpc":"2.0","id":1,"method":"x"}"#).kind(),
            Kind::Request
        );
        assert_eq!(
            read(r#"{"jsonrpc":"2.0","method":"x"}"#).kind(),
            Kind::Notification
        );
        assert_eq!(
            read(r#"{"jsonrpc":"2.0","id":"a","result":{}}"#).kind(),
            Kind::Response
        );
        assert_eq!(
            read(r#"{"jsonrpc":"2.0","id":null,"error":{"code":1,"message":""}}"#).kind(),
            Kind::Response
        );
        assert_eq!(read(r#"[1]"#).kind(), Kind::Invalid);
        assert_eq!(read(r#"{"id":1}"#).kind(), Kind::Invalid);
    }

    /// What the relay does not change goes on as it came: a number beyond
    /// f64 and the key order too.
    #[test]
    fn unchanged_is_byte_for_byte() {
        let text = r#"{"jsonrpc":"2.0","method":"x/y","params":{"z":123456789012345678901234567890,"a":"\u00e9"}}"#;
        assert_eq!(read(text).text(), text);
        let mut changed = read(r#"{"jsonrpc":"2.0","id":7,"method":"m"}"#);
        changed.set_id(json!(1));
        assert_eq!(changed.value()["id"], 1);
        assert!(changed.text().contains(r#""id":1"#));
        // A body written over several lines is sent on one.
        let pretty = "{\n  \"jsonrpc\": \"2.0\",\n  \"method\": \"m\"\n}";
        assert_eq!(read(pretty).text(), r#"{"jsonrpc":"2.0","method":"m"}"#);
    }

    #[test]
    fn progress_token() {
        let m = read(
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{"progressToken":"t"}}}"#,
        );
        assert_eq!(m.progress_token(), Some(&json!("t")));
        let m = read(r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{}}"#);
        assert_eq!(m.progress_token(), None);
    }
}
