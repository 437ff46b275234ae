//! A fake OpenAI Responses API on 127.0.0.1:0 for the real Codex CLI: Codex
//! (a custom `model_providers` entry, `wire_api = "responses"`) only ever
//! calls `POST /v1/responses`, streamed as server-sent events. Each request
//! takes the next scripted turn; every request body is kept, so a test can
//! assert what the model was told (a command's output, a denial, lev's
//! steered feedback). Anything else asked of it is kept as a stray, which
//! fails the test ([`super::harness::CodexEnv`]).

use std::collections::VecDeque;
use std::io::Write as _;
use std::net::TcpStream;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

use super::super::loopback::{Request, serve_each};

/// One model response.
#[derive(Debug, Clone)]
pub enum Turn {
    /// Run `cmd` with the `exec_command` tool (call id `call_id`).
    Exec { call_id: &'static str, cmd: String },
    /// Run `cmd` outside the sandbox, saying `why` (Codex asks even under
    /// `on-request`).
    Escalated {
        call_id: &'static str,
        cmd: String,
        why: String,
    },
    /// Edit files with the freeform `apply_patch` tool.
    Patch {
        call_id: &'static str,
        patch: String,
    },
    /// Say `text` (ends the turn).
    Text(String),
    /// Fail: the stream ends with `response.failed` carrying `message`.
    Fail(String),
}

/// `exec_command` running `cmd`.
pub fn exec(call_id: &'static str, cmd: &str) -> Turn {
    Turn::Exec {
        call_id,
        cmd: cmd.to_owned(),
    }
}

/// `exec_command` running `cmd` outside the sandbox, justified by `why`.
pub fn escalated(call_id: &'static str, cmd: &str, why: &str) -> Turn {
    Turn::Escalated {
        call_id,
        cmd: cmd.to_owned(),
        why: why.to_owned(),
    }
}

/// `apply_patch` with `patch`.
pub fn patch(call_id: &'static str, patch: &str) -> Turn {
    Turn::Patch {
        call_id,
        patch: patch.to_owned(),
    }
}

/// An assistant message.
pub fn say(text: &str) -> Turn {
    Turn::Text(text.to_owned())
}

/// A response that fails with `message`.
pub fn fail(message: &str) -> Turn {
    Turn::Fail(message.to_owned())
}

impl Turn {
    fn items(&self) -> Vec<Value> {
        match self {
            Self::Exec { call_id, cmd } => vec![json!({
                "type": "function_call", "name": "exec_command", "call_id": call_id,
                "arguments": json!({"cmd": cmd}).to_string(),
            })],
            Self::Escalated { call_id, cmd, why } => vec![json!({
                "type": "function_call", "name": "exec_command", "call_id": call_id,
                "arguments": json!({"cmd": cmd, "sandbox_permissions": "require_escalated", "justification": why}).to_string(),
            })],
            Self::Patch { call_id, patch } => vec![json!({
                "type": "custom_tool_call", "name": "apply_patch", "call_id": call_id, "input": patch,
            })],
            Self::Text(text) => vec![json!({
                "type": "message", "role": "assistant", "id": format!("msg_{}", text.len()),
                "content": [{"type": "output_text", "text": text, "annotations": []}],
            })],
            Self::Fail(_) => Vec::new(),
        }
    }
}

#[derive(Debug, Default)]
struct State {
    script: VecDeque<Turn>,
    requests: Vec<Value>,
    /// Every request that was not `POST .../responses`, by its request line.
    strays: Vec<String>,
}

/// The fake, serving until dropped (its threads are detached and idle).
#[derive(Debug)]
pub struct FakeModel {
    port: u16,
    state: Arc<Mutex<State>>,
}

impl FakeModel {
    /// Serve `script`, one turn per request; past its end, a plain message.
    pub fn start(script: Vec<Turn>) -> Self {
        let state = Arc::new(Mutex::new(State {
            script: script.into(),
            ..State::default()
        }));
        let port = serve_each(state.clone(), serve);
        Self { port, state }
    }

    /// The provider's `base_url`.
    pub fn base_url(&self) -> String {
        format!("http://127.0.0.1:{}/v1", self.port)
    }

    /// Every request body the model got, in order.
    pub fn requests(&self) -> Vec<Value> {
        self.state.lock().unwrap().requests.clone()
    }

    /// Every request that was not `POST .../responses` (answered 404), by
    /// its request line: Codex asked the model's server for something else.
    pub fn strays(&self) -> Vec<String> {
        self.state.lock().unwrap().strays.clone()
    }

    /// The strays so far, forgotten (a test that made them on purpose).
    pub fn take_strays(&self) -> Vec<String> {
        std::mem::take(&mut self.state.lock().unwrap().strays)
    }

    /// The `input` items of request `n` (from 0): the whole history Codex
    /// sends, instructions and prompt first.
    pub fn input_of(&self, n: usize) -> Vec<Value> {
        let requests = self.requests();
        let request = requests
            .get(n)
            .unwrap_or_else(|| panic!("the model got {} requests, not {}", requests.len(), n + 1));
        request["input"].as_array().cloned().unwrap_or_default()
    }
}

/// The text of every tool output and user message in `input` items.
pub fn said(items: &[Value]) -> String {
    let mut out = String::new();
    for item in items {
        if let Some(output) = item.get("output").and_then(Value::as_str) {
            out.push_str(output);
            out.push('\n');
        }
        for part in item
            .get("content")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if let Some(text) = part.get("text").and_then(Value::as_str) {
                out.push_str(text);
                out.push('\n');
            }
        }
    }
    out
}

fn serve(mut stream: TcpStream, state: &Mutex<State>) -> std::io::Result<()> {
    let request = Request::read(&stream)?;
    if request.method() != "POST" || !request.path().ends_with("/responses") {
        state.lock().unwrap().strays.push(request.line.clone());
        stream.write_all(
            b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
        )?;
        return Ok(());
    }
    // The terminal UI's title generator: answered aside of the script.
    let title = request
        .header("x-codex-turn-metadata")
        .is_some_and(|v| v.contains("\"thread_title\""));
    let parsed: Value = match request.header("content-encoding") {
        Some(e) => json!({"unreadable_body": format!("content-encoding {e}")}),
        None => serde_json::from_slice(&request.body)
            .unwrap_or_else(|e| json!({"unreadable_body": e.to_string()})),
    };
    let turn = if title {
        Turn::Text(json!({"title": "Fake title"}).to_string())
    } else {
        let mut state = state.lock().unwrap();
        state.requests.push(parsed);
        state
            .script
            .pop_front()
            .unwrap_or_else(|| Turn::Text("fake: no more scripted turns".into()))
    };
    stream.write_all(
        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\nConnection: close\r\n\r\n",
    )?;
    let id = format!("resp_{}", std::process::id());
    let mut events = vec![
        json!({"type": "response.created", "response": {"id": id, "object": "response", "status": "in_progress"}}),
    ];
    for (index, item) in turn.items().into_iter().enumerate() {
        events.push(
            json!({"type": "response.output_item.added", "output_index": index, "item": item}),
        );
        events.push(
            json!({"type": "response.output_item.done", "output_index": index, "item": item}),
        );
    }
    if let Turn::Fail(message) = &turn {
        // A request the API refuses: not one Codex retries.
        events.push(json!({"type": "response.failed", "response": {
            "id": id, "object": "response", "status": "failed",
            "error": {"code": "invalid_prompt", "message": message},
        }}));
    } else {
        events.push(json!({"type": "response.completed", "response": {
        "id": id, "object": "response", "status": "completed",
        "usage": {"input_tokens": 10, "input_tokens_details": {"cached_tokens": 0},
                  "output_tokens": 5, "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 15},
        }}));
    }
    for event in events {
        let kind = event["type"].as_str().unwrap_or_default().to_owned();
        write!(stream, "event: {kind}\ndata: {event}\n\n")?;
    }
    stream.flush()
}
