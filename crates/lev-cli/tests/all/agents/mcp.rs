//! `lev mcp` driven by the official MCP Python SDK, in both protocol eras:
//! 2025-11-25 (`initialize`) and 2026-07-28 (`server/discover`, per-request
//! `_meta`), with a person answering through lev's API.

use std::io::{BufRead as _, BufReader, Write as _};
use std::process::{Command, Stdio};
use std::time::Duration;

use lev_protocol::{ApprovalScope, InteractionResponse, InteractionStatus};
use serde_json::{Value, json};

use super::driver::Driver;
use super::served::{Served, choice, text};

/// The SDK's connect modes and the version each must end up speaking.
const ERAS: [(&str, &str); 3] = [
    ("legacy", "2025-11-25"),
    ("2026-07-28", "2026-07-28"),
    // Probes server/discover, finds a modern server, stays modern.
    ("auto", "2026-07-28"),
];

#[test]
fn both_eras_list_the_two_tools_with_their_schemas() {
    let served = Served::start("mcp-tools", None);
    for (mode, version) in ERAS {
        let mut mcp = Driver::start(mode, &served, &["--session", "tools"]);
        assert_eq!(mcp.ready["protocol_version"], version, "{mode}");
        let tools = mcp.tools();
        let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
        assert_eq!(names, ["approval_prompt", "ask_human"], "{mode}");

        let approval = &tools[0];
        let schema = &approval["inputSchema"];
        assert_eq!(schema["type"], "object");
        assert_eq!(schema["required"], json!(["tool_name", "input"]));
        assert_eq!(schema["properties"]["tool_name"]["type"], "string");
        assert_eq!(schema["properties"]["input"]["type"], "object");
        assert_eq!(schema["properties"]["tool_use_id"]["type"], "string");
        let description = approval["description"].as_str().unwrap();
        for needle in [
            "mcp__lev__approval_prompt",
            "{\"behavior\":\"allow\",\"updatedInput\":{...}}",
            "{\"behavior\":\"deny\",\"message\":\"...\"}",
            "at most 10 minutes",
        ] {
            assert!(description.contains(needle), "{needle}: {description}");
        }

        let ask = &tools[1];
        let schema = &ask["inputSchema"];
        assert_eq!(schema["required"], json!(["question"]));
        assert_eq!(schema["properties"]["question"]["type"], "string");
        assert_eq!(schema["properties"]["options"]["type"], "array");
        assert_eq!(schema["properties"]["options"]["items"]["type"], "string");
        assert_eq!(schema["properties"]["options"]["maxItems"], 64);
        assert!(
            ask["description"]
                .as_str()
                .unwrap()
                .contains("Ask a person a question and wait for the answer"),
            "{ask}"
        );
    }
}

#[test]
fn ask_human_returns_the_answer_text_in_both_eras() {
    let served = Served::start("mcp-ask", None);
    for (mode, _) in ERAS {
        let session = format!("ask-{mode}");
        let mut mcp = Driver::start(mode, &served, &["--session", &session, "--caller", "carol"]);

        mcp.call(
            "free",
            "ask_human",
            json!({"question": "Which branch should I deploy?"}),
        );
        let asked = served.pending(&session);
        assert_eq!(
            asked.request.conversation_id.as_deref(),
            Some(session.as_str())
        );
        assert_eq!(asked.request.caller.as_deref(), Some("carol"));
        assert_eq!(asked.request.timeout_s, Some(600));
        match &asked.request.kind {
            lev_protocol::InteractionKind::FreeText { prompt } => {
                assert_eq!(prompt, "Which branch should I deploy?");
            }
            other => panic!("expected free text, found {other:?}"),
        }
        served.respond(&asked, &text(&asked, "release-2.3"));
        assert_eq!(
            mcp.result("free"),
            (vec!["release-2.3".to_owned()], false),
            "{mode}"
        );

        mcp.call(
            "pick",
            "ask_human",
            json!({"question": "Ship it?", "options": ["yes", "not yet"]}),
        );
        let asked = served.pending(&session);
        match &asked.request.kind {
            lev_protocol::InteractionKind::MultipleChoice { options, .. } => {
                assert_eq!(options, &["yes", "not yet"]);
            }
            other => panic!("expected multiple choice, found {other:?}"),
        }
        served.respond(&asked, &choice(&asked, 1));
        assert_eq!(
            mcp.result("pick"),
            (vec!["not yet".to_owned()], false),
            "{mode}"
        );

        // A question with no text is the model's mistake, told as a tool error.
        mcp.call("empty", "ask_human", json!({"question": "  "}));
        let (texts, is_error) = mcp.result("empty");
        assert!(is_error, "{texts:?}");
        assert!(texts[0].contains("question"), "{texts:?}");
    }
}

#[test]
fn cancelling_a_call_cancels_its_pending_question_in_both_eras() {
    let served = Served::start("mcp-cancel", None);
    for (mode, _) in ERAS {
        let session = format!("cancel-{mode}");
        let mut mcp = Driver::start(mode, &served, &["--session", &session]);
        mcp.call("q", "ask_human", json!({"question": "Still there?"}));
        let asked = served.pending(&session);
        mcp.cancel("q");
        served.wait_status(&session, asked.id(), InteractionStatus::Cancelled);
    }
}

#[test]
fn a_call_unanswered_in_time_says_so_and_drops_the_question() {
    let served = Served::start("mcp-timeout", None);
    let mut mcp = Driver::start("legacy", &served, &["--session", "late", "--timeout", "2"]);
    mcp.call("q", "ask_human", json!({"question": "Anyone?"}));
    let asked = served.pending("late");
    let (texts, is_error) = mcp.result("q");
    assert!(!is_error);
    assert!(
        texts[0].contains("Nobody answered") || texts[0].contains("cancelled"),
        "{texts:?}"
    );
    let status = served
        .all("late")
        .into_iter()
        .find(|i| i.id() == asked.id())
        .unwrap()
        .status;
    assert_ne!(status, InteractionStatus::Pending);
}

/// `lev mcp` fed raw JSON-RPC lines, one reply line read per request.
struct Raw {
    child: std::process::Child,
    stdin: std::process::ChildStdin,
    replies: std::sync::mpsc::Receiver<Value>,
}

impl Raw {
    fn start(served: &Served) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_lev"))
            .args(["mcp", "--session", "raw"])
            .env("LEV_URL", &served.url)
            .env("LEV_TOKEN", &served.worker)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, replies) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let _ = tx.send(serde_json::from_str(&line).unwrap_or(Value::String(line)));
            }
        });
        Self {
            child,
            stdin,
            replies,
        }
    }

    fn send(&mut self, message: &Value) {
        writeln!(self.stdin, "{message}").unwrap();
    }

    fn reply(&self) -> Value {
        self.replies
            .recv_timeout(Duration::from_secs(30))
            .expect("a reply from lev mcp")
    }
}

impl Drop for Raw {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn modern_meta() -> Value {
    json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
           "io.modelcontextprotocol/clientCapabilities": {},
           "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"}})
}

#[test]
fn unknown_and_stray_messages_get_errors_never_a_closed_connection() {
    let served = Served::start("mcp-raw", None);

    // 2026-07-28: a stray notification first (a dual-era client cancelling a
    // probe), then discover, an unknown method, and a request without _meta.
    let mut raw = Raw::start(&served);
    raw.send(
        &json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 0}}),
    );
    raw.send(&json!({"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": modern_meta()}}));
    let discover = raw.reply();
    assert_eq!(discover["id"], 1);
    let result = &discover["result"];
    assert_eq!(result["resultType"], "complete");
    let versions = result["supportedVersions"].as_array().unwrap();
    assert!(versions.contains(&json!("2026-07-28")) && versions.contains(&json!("2025-11-25")));
    assert!(result["capabilities"]["tools"].is_object(), "{discover}");
    assert_eq!(
        result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"],
        "lev"
    );
    assert!(
        result["ttlMs"].is_u64() && result["cacheScope"].is_string(),
        "{discover}"
    );

    raw.send(&json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {"_meta": modern_meta()}}));
    let list = raw.reply();
    assert_eq!(list["id"], 2);
    assert_eq!(list["result"]["tools"].as_array().unwrap().len(), 2);
    assert_eq!(list["result"]["resultType"], "complete");

    raw.send(&json!({"jsonrpc": "2.0", "id": 3, "method": "lev/nothing", "params": {"_meta": modern_meta()}}));
    let unknown = raw.reply();
    assert_eq!(unknown["id"], 3);
    assert_eq!(unknown["error"]["code"], -32601, "{unknown}");

    raw.send(&json!({"jsonrpc": "2.0", "id": 4, "method": "tools/list", "params": {}}));
    let bare = raw.reply();
    assert_eq!(bare["id"], 4);
    assert!(bare["error"]["code"].is_i64(), "{bare}");

    raw.send(&json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call",
        "params": {"_meta": modern_meta(), "name": "no_such_tool", "arguments": {}}}));
    let no_tool = raw.reply();
    assert_eq!(no_tool["id"], 5);
    assert_eq!(no_tool["error"]["code"], -32602, "{no_tool}");

    // Still up: the same connection answers again.
    raw.send(&json!({"jsonrpc": "2.0", "id": 6, "method": "server/discover", "params": {"_meta": modern_meta()}}));
    assert_eq!(raw.reply()["id"], 6);
    drop(raw);

    // 2025-11-25: initialize, then an unknown method, then tools/list.
    let mut raw = Raw::start(&served);
    raw.send(
        &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "raw", "version": "1"}}}),
    );
    let init = raw.reply();
    assert_eq!(init["result"]["protocolVersion"], "2025-11-25", "{init}");
    assert_eq!(init["result"]["serverInfo"]["name"], "lev");
    raw.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    raw.send(&json!({"jsonrpc": "2.0", "id": 2, "method": "lev/nothing"}));
    let unknown = raw.reply();
    assert_eq!(unknown["id"], 2);
    assert_eq!(unknown["error"]["code"], -32601, "{unknown}");
    raw.send(&json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list"}));
    let list = raw.reply();
    assert_eq!(
        list["result"]["tools"].as_array().unwrap().len(),
        2,
        "{list}"
    );
    // Handshake-era results carry no resultType.
    assert!(list["result"].get("resultType").is_none(), "{list}");

    // An older client is offered its own version.
    let mut raw = Raw::start(&served);
    raw.send(
        &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "raw", "version": "1"}}}),
    );
    assert_eq!(raw.reply()["result"]["protocolVersion"], "2025-06-18");
}

/// `approval_prompt`'s text, parsed (it must be exactly one text block of JSON).
fn decision(mcp: &Driver, id: &str) -> Value {
    let (texts, is_error) = mcp.result(id);
    assert!(!is_error, "{texts:?}");
    assert_eq!(texts.len(), 1, "one text block: {texts:?}");
    serde_json::from_str(&texts[0]).unwrap_or_else(|e| panic!("not JSON ({e}): {}", texts[0]))
}

/// The tool approval pending in `session`, checked against the call made.
fn pending_approval(
    served: &Served,
    session: &str,
    tool: &str,
    input: &Value,
) -> lev_protocol::Interaction {
    let asked = served.pending(session);
    match &asked.request.kind {
        lev_protocol::InteractionKind::ToolApproval {
            tool_name,
            args_json,
            sandbox_mode,
            ..
        } => {
            assert_eq!(tool_name, tool);
            assert_eq!(
                args_json,
                &input.to_string(),
                "args_json is the input as compact JSON"
            );
            assert_eq!(sandbox_mode, "default");
        }
        other => panic!("expected a tool approval, found {other:?}"),
    }
    assert_eq!(asked.request.conversation_id.as_deref(), Some(session));
    asked
}

fn approve(asked: &lev_protocol::Interaction, scope: ApprovalScope) -> InteractionResponse {
    InteractionResponse::approval(asked.id(), true, scope)
}

#[test]
fn approval_prompt_answers_each_decision_with_the_documented_json_in_both_eras() {
    let served = Served::start("mcp-approval", None);
    for (mode, _) in &ERAS[..2] {
        let session = format!("approve-{mode}");
        let mut mcp = Driver::start(mode, &served, &["--session", &session]);
        let call = |mcp: &mut Driver, id: &str, input: &Value| {
            mcp.call(
                id,
                "approval_prompt",
                json!({"tool_name": "Bash", "input": input, "tool_use_id": format!("toolu_{mode}_{id}")}),
            );
        };

        // Approve: the original input comes back as updatedInput.
        let input = json!({"command": "cargo test", "description": "Run the tests"});
        call(&mut mcp, "once", &input);
        let asked = pending_approval(&served, &session, "Bash", &input);
        served.respond(&asked, &approve(&asked, ApprovalScope::Once));
        assert_eq!(
            decision(&mcp, "once"),
            json!({"behavior": "allow", "updatedInput": input}),
            "{mode}"
        );

        // Approve with an edit: the edit is what runs.
        let input = json!({"command": "rm -rf target"});
        call(&mut mcp, "edit", &input);
        let asked = pending_approval(&served, &session, "Bash", &input);
        let mut edit = approve(&asked, ApprovalScope::Once);
        edit.modified_args_json = Some(r#"{"command":"rm -rf target/debug"}"#.into());
        edit.injected_context = Some("target/release is a colleague's build".into());
        served.respond(&asked, &edit);
        assert_eq!(
            decision(&mcp, "edit"),
            json!({"behavior": "allow", "updatedInput": {"command": "rm -rf target/debug"}}),
            "{mode}: the permission-prompt contract has no field for injected context"
        );

        // Deny with feedback: the feedback reaches the model in the message.
        let input = json!({"command": "git push --force"});
        call(&mut mcp, "deny", &input);
        let asked = pending_approval(&served, &session, "Bash", &input);
        served.respond(
            &asked,
            &InteractionResponse::deny_with_feedback(asked.id(), "push to a branch and open a PR"),
        );
        assert_eq!(
            decision(&mcp, "deny"),
            json!({"behavior": "deny", "message": "The person denied the call to Bash; it was not run.\nFeedback: push to a branch and open a PR"}),
            "{mode}"
        );

        // Approve for the session: Claude Code may remember it...
        let input = json!({"command": "ls -la"});
        call(&mut mcp, "session", &input);
        let asked = pending_approval(&served, &session, "Bash", &input);
        served.respond(&asked, &approve(&asked, ApprovalScope::Session));
        assert_eq!(
            decision(&mcp, "session"),
            json!({"behavior": "allow", "updatedInput": input, "updatedPermissions": [
                {"type": "addRules", "rules": [{"toolName": "Bash"}], "behavior": "allow",
                 "destination": "session"}]}),
            "{mode}"
        );
        // ...and lev's grant answers the next call of the tool at once.
        let input = json!({"command": "cargo build"});
        call(&mut mcp, "granted", &input);
        assert_eq!(
            decision(&mcp, "granted"),
            json!({"behavior": "allow", "updatedInput": input}),
            "{mode}"
        );
        assert!(
            served
                .all(&session)
                .iter()
                .all(|i| i.status != InteractionStatus::Pending),
            "no person was asked"
        );
    }
}

const POLICY: &str = r#"
[[rule]]
tool = "Bash"
args = { "/command" = "^rm -rf /" }
decision = "deny"
reason = "nothing deletes the root"

[[rule]]
tool = "Read"
decision = "allow"

[[rule]]
tool = "*"
decision = "ask"
"#;

#[test]
fn approval_prompt_follows_the_policy_and_says_when_nobody_decided() {
    let served = Served::start("mcp-policy", Some(POLICY));
    let mut mcp = Driver::start(
        "2026-07-28",
        &served,
        &["--session", "policy", "--timeout", "2"],
    );

    mcp.call(
        "rule-allow",
        "approval_prompt",
        json!({"tool_name": "Read", "input": {"file_path": "/srv/app/README.md"}}),
    );
    assert_eq!(
        decision(&mcp, "rule-allow"),
        json!({"behavior": "allow", "updatedInput": {"file_path": "/srv/app/README.md"}})
    );

    mcp.call(
        "rule-deny",
        "approval_prompt",
        json!({"tool_name": "Bash", "input": {"command": "rm -rf /"}, "tool_use_id": "toolu_rm"}),
    );
    assert_eq!(
        decision(&mcp, "rule-deny"),
        json!({"behavior": "deny", "message": "lev's policy denies the call to Bash: nothing deletes the root. It was not run."})
    );

    mcp.call(
        "late",
        "approval_prompt",
        json!({"tool_name": "Bash", "input": {"command": "make"}, "tool_use_id": "toolu_make"}),
    );
    let text = decision(&mcp, "late");
    assert_eq!(text["behavior"], "deny", "{text}");
    let message = text["message"].as_str().unwrap();
    assert!(
        message.contains("nobody approved it in time") || message.contains("Nobody decided"),
        "{message}"
    );
    assert_eq!(text.as_object().unwrap().len(), 2, "{text}");

    // A malformed call is the model's mistake, told as a tool error.
    mcp.call("bad", "approval_prompt", json!({"input": {}}));
    let (texts, is_error) = mcp.result("bad");
    assert!(is_error && texts[0].contains("tool_name"), "{texts:?}");
}

#[test]
fn cancelling_an_approval_prompt_cancels_its_interaction() {
    let served = Served::start("mcp-cancel-approval", None);
    let mut mcp = Driver::start("legacy", &served, &["--session", "cancel-approval"]);
    let input = json!({"command": "terraform apply"});
    mcp.call(
        "apply",
        "approval_prompt",
        json!({"tool_name": "Bash", "input": input, "tool_use_id": "toolu_apply"}),
    );
    let asked = pending_approval(&served, "cancel-approval", "Bash", &input);
    mcp.cancel("apply");
    served.wait_status("cancel-approval", asked.id(), InteractionStatus::Cancelled);
}
