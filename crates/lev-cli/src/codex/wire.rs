//! Codex's app-server messages as they arrive: one JSON-RPC 2.0 message
//! (without the `"jsonrpc"` field) told apart as a request, a notification
//! or a response. Pure, so that the fuzz target `codex` reaches it.

use serde_json::Value;

/// A message from Codex.
#[derive(Debug, Clone, PartialEq)]
pub enum Incoming {
    /// A request that waits for this client's answer (an approval).
    Request {
        /// Its id, echoed in the answer.
        id: Value,
        /// The method, such as `item/commandExecution/requestApproval`.
        method: String,
        /// Its params (`null` when absent).
        params: Value,
    },
    /// A notification (progress of a turn).
    Notification {
        /// The method, such as `item/started`.
        method: String,
        /// Its params (`null` when absent).
        params: Value,
    },
    /// The answer to one of this client's requests.
    Response {
        /// The id of the request.
        id: Value,
        /// Its result, or the error Codex answered.
        outcome: Result<Value, RpcError>,
    },
}

/// A JSON-RPC error Codex answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RpcError {
    /// The code (-32600 for most of Codex's refusals).
    pub code: i64,
    /// The message, such as `no active turn to steer`.
    pub message: String,
}

impl std::fmt::Display for RpcError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} (code {})", self.message, self.code)
    }
}

impl std::error::Error for RpcError {}

/// Parse one message.
///
/// # Errors
/// Text that is not a JSON object, or an object that is none of a request,
/// a notification or a response; the error says which.
pub fn parse(text: &str) -> Result<Incoming, String> {
    let value: Value = serde_json::from_str(text).map_err(|e| format!("not JSON ({e})"))?;
    let Value::Object(mut object) = value else {
        return Err("not a JSON object".to_owned());
    };
    let params = object.remove("params").unwrap_or(Value::Null);
    match (object.remove("method"), object.remove("id")) {
        (Some(Value::String(method)), Some(id)) => Ok(Incoming::Request { id, method, params }),
        (Some(Value::String(method)), None) => Ok(Incoming::Notification { method, params }),
        (Some(other), _) => Err(format!("\"method\" is not a string but {other}")),
        (None, Some(id)) => {
            let outcome = match (object.remove("result"), object.remove("error")) {
                (Some(result), None) => Ok(result),
                (_, Some(error)) => Err(RpcError {
                    code: error.get("code").and_then(Value::as_i64).unwrap_or(0),
                    message: error
                        .get("message")
                        .and_then(Value::as_str)
                        .unwrap_or("(no message)")
                        .to_owned(),
                }),
                (None, None) => return Err("a response with neither result nor error".into()),
            };
            Ok(Incoming::Response { id, outcome })
        }
        (None, None) => Err("neither a request, a notification nor a response".to_owned()),
    }
}
