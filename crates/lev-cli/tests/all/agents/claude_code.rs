//! The real Claude Code CLI (pinned by `scripts/claude-code-env.sh`) with
//! `--mcp-config` pointing at `lev mcp proxy` in front of the reference
//! `server-everything`, offline: the model is a fake Anthropic Messages API on
//! loopback, every other address goes to the Codex tests' tripwire.
//!
//! The fake answers each `POST /v1/messages` with the next scripted turn (a
//! `tool_use` of an MCP tool, then text once the tool's result is in), and
//! keeps every request, so the test reads what Claude Code told the model
//! the tool returned: the server's result for an allowed or approved call, a
//! tool error with the person's feedback for a denied one.

use std::collections::VecDeque;
use std::io::Write as _;
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::sync::{Arc, Mutex};

use lev_protocol::InteractionResponse;
use serde_json::{Value, json};

use super::codex::offline::{NO_PROXY, Tripwire};
use super::loopback::{Request, serve_each};
use super::served::Served;
use crate::mcp_proxy::{EVERYTHING_POLICY, approve, everything, pending, proxy};

const SETUP: &str = "run `bash scripts/claude-code-env.sh` and export LEV_TEST_CLAUDE_CODE \
                     to the path it prints (scripts/test.sh does both)";

/// The pinned Claude Code binary.
fn claude_bin() -> PathBuf {
    let bin = std::env::var_os("LEV_TEST_CLAUDE_CODE")
        .map(PathBuf::from)
        .unwrap_or_else(|| panic!("LEV_TEST_CLAUDE_CODE is not set\nhint: {SETUP}"));
    assert!(bin.exists(), "no {}\nhint: {SETUP}", bin.display());
    bin
}

/// One model turn.
#[derive(Debug, Clone)]
enum Turn {
    /// Call the tool `name` with `input`.
    Tool { name: String, input: Value },
    /// Say `text` (ends the turn).
    Text(String),
}

#[derive(Debug, Default)]
struct State {
    script: VecDeque<Turn>,
    requests: Vec<Value>,
    strays: Vec<String>,
}

/// A fake Anthropic Messages API, serving until dropped.
#[derive(Debug)]
struct FakeAnthropic {
    port: u16,
    state: Arc<Mutex<State>>,
}

impl FakeAnthropic {
    fn start(script: Vec<Turn>) -> Self {
        let state = Arc::new(Mutex::new(State {
            script: script.into(),
            ..State::default()
        }));
        let port = serve_each(state.clone(), serve);
        Self { port, state }
    }

    fn base_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn requests(&self) -> Vec<Value> {
        self.state.lock().unwrap().requests.clone()
    }

    fn strays(&self) -> Vec<String> {
        self.state.lock().unwrap().strays.clone()
    }

    /// The `tool_result` blocks of the conversation Claude Code sent last
    /// (the whole history), in order.
    fn tool_results(&self) -> Vec<Value> {
        let requests = self.requests();
        let Some(last) = requests.last() else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for message in last["messages"].as_array().into_iter().flatten() {
            for block in message["content"].as_array().into_iter().flatten() {
                if block["type"] == "tool_result" {
                    out.push(block.clone());
                }
            }
        }
        out
    }
}

/// The text of a `tool_result` block (a string, or text parts).
fn result_text(block: &Value) -> String {
    match &block["content"] {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

fn serve(mut stream: TcpStream, state: &Mutex<State>) -> std::io::Result<()> {
    let request = Request::read(&stream)?;
    if request.method() != "POST" || request.path() != "/v1/messages" {
        state.lock().unwrap().strays.push(request.line.clone());
        stream.write_all(
            b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
        )?;
        return Ok(());
    }
    let request: Value = serde_json::from_slice(&request.body).unwrap_or(Value::Null);
    let (turn, n) = {
        let mut state = state.lock().unwrap();
        state.requests.push(request.clone());
        let turn = state
            .script
            .pop_front()
            .unwrap_or_else(|| Turn::Text("fake: no more scripted turns".into()));
        (turn, state.requests.len())
    };
    let (block, delta, stop) = match &turn {
        Turn::Tool { name, input } => (
            json!({"type": "tool_use", "id": format!("toolu_{n}"), "name": name, "input": {}}),
            json!({"type": "input_json_delta", "partial_json": input.to_string()}),
            "tool_use",
        ),
        Turn::Text(text) => (
            json!({"type": "text", "text": ""}),
            json!({"type": "text_delta", "text": text}),
            "end_turn",
        ),
    };
    let model = request["model"].as_str().unwrap_or("fake").to_owned();
    let events = [
        json!({"type": "message_start", "message": {
            "id": "msg_fake", "type": "message", "role": "assistant", "model": model,
            "content": [], "stop_reason": null, "stop_sequence": null,
            "usage": {"input_tokens": 10, "output_tokens": 1}}}),
        json!({"type": "content_block_start", "index": 0, "content_block": block}),
        json!({"type": "content_block_delta", "index": 0, "delta": delta}),
        json!({"type": "content_block_stop", "index": 0}),
        json!({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": null},
               "usage": {"output_tokens": 5}}),
        json!({"type": "message_stop"}),
    ];
    let mut sse = String::new();
    for event in events {
        let kind = event["type"].as_str().unwrap_or_default().to_owned();
        sse.push_str(&format!("event: {kind}\ndata: {event}\n\n"));
    }
    write!(
        stream,
        "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{sse}",
        sse.len()
    )?;
    stream.flush()
}

/// `claude -p PROMPT` with an MCP server `everything` that is `lev mcp
/// proxy` in front of server-everything, run on a thread; its output.
fn run_claude(
    served: &Served,
    model: &FakeAnthropic,
    tripwire: &Tripwire,
    session: &str,
) -> std::thread::JoinHandle<Output> {
    let dir = tempfile::tempdir().unwrap();
    let argv = proxy(
        &["--name", "everything", "--session", session],
        &everything(),
    );
    let config = json!({"mcpServers": {"everything": {
        "command": argv[0], "args": &argv[1..],
        "env": {"LEV_URL": served.url, "LEV_TOKEN": served.worker},
    }}});
    let config_path = dir.path().join("mcp.json");
    std::fs::write(&config_path, config.to_string()).unwrap();
    let home = dir.path().join("home");
    let work = dir.path().join("work");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::create_dir_all(&work).unwrap();
    let mut command = Command::new(claude_bin());
    command
        .args(["-p", "use the everything server's tools", "--mcp-config"])
        .arg(&config_path)
        .args([
            "--strict-mcp-config",
            "--output-format",
            "json",
            // Claude Code's own prompt is not the question here: lev's is.
            "--allowedTools",
            "mcp__everything__echo,mcp__everything__get-sum",
        ])
        .current_dir(&work)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", &home)
        .env("ANTHROPIC_BASE_URL", model.base_url())
        .env("ANTHROPIC_API_KEY", "sk-ant-fake")
        // MCP tools in the request itself, not behind its tool search.
        .env("ENABLE_TOOL_SEARCH", "false")
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .env("DISABLE_AUTOUPDATER", "1");
    tripwire.arm(&mut command, NO_PROXY);
    command.stdin(Stdio::null());
    std::thread::spawn(move || {
        let output = command.output().unwrap();
        drop(dir);
        output
    })
}

/// Claude Code's final JSON result.
fn finished(run: std::thread::JoinHandle<Output>) -> Value {
    let output = run.join().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "claude failed: {stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{e}: {stdout}"))
}

#[test]
fn claude_code_calls_mcp_tools_through_the_proxy_as_lev_decides() {
    let served = Served::start("claude-code-proxy", Some(EVERYTHING_POLICY));
    let tripwire = Tripwire::start();
    let tool = |name: &str, input: Value| Turn::Tool {
        name: name.to_owned(),
        input,
    };
    let model = FakeAnthropic::start(vec![
        // Allowed by the policy: no person, the server's result.
        tool(
            "mcp__everything__echo",
            json!({"message": "hi from claude"}),
        ),
        // Asked: a person approves.
        tool("mcp__everything__get-sum", json!({"a": 20, "b": 22})),
        // Asked: a person denies, with feedback.
        tool("mcp__everything__get-sum", json!({"a": 1, "b": 1})),
        Turn::Text("all done".into()),
    ]);
    let run = run_claude(&served, &model, &tripwire, "claude-code");

    let (asked, tool_name, args) = pending(&served, "claude-code");
    assert_eq!(tool_name, "mcp__everything__get-sum");
    assert_eq!(args, json!({"a": 20, "b": 22}));
    served.respond(&asked, &approve(&asked));

    let (asked, _, args) = pending(&served, "claude-code");
    assert_eq!(args, json!({"a": 1, "b": 1}));
    served.respond(
        &asked,
        &InteractionResponse::deny_with_feedback(asked.id(), "add them in your head"),
    );

    let result = finished(run);
    assert_eq!(result["result"], "all done", "{result}");
    let results = model.tool_results();
    assert_eq!(results.len(), 3, "{results:?}");
    assert_eq!(result_text(&results[0]), "Echo: hi from claude");
    assert_ne!(results[0]["is_error"], true);
    assert!(result_text(&results[1]).contains("42"), "{:?}", results[1]);
    assert_ne!(results[1]["is_error"], true);
    let denied = result_text(&results[2]);
    assert_eq!(results[2]["is_error"], true, "{:?}", results[2]);
    assert!(
        denied.contains("denied the call to mcp__everything__get-sum")
            && denied.contains("add them in your head"),
        "{denied}"
    );
    // The tools Claude Code offered the model are the server's own.
    let offered: Vec<String> = model.requests()[0]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str().map(str::to_owned))
        .collect();
    assert!(
        offered
            .iter()
            .any(|t| t == "mcp__everything__trigger-long-running-operation"),
        "{offered:?}"
    );
    assert!(model.strays().is_empty(), "{:?}", model.strays());
    assert!(tripwire.seen().is_empty(), "{:?}", tripwire.seen());
}
