//! Machine output is inert on a screen: every JSON lev prints (`--json`
//! listings and views, `lev verify`'s approval, `lev audit --json`) writes
//! hidden characters (controls, DEL, C1, bidi controls, zero-width
//! characters, tags, line and paragraph separators, ...) as `\uXXXX`, and
//! parses back to exactly the text the agent sent.

use lev_protocol::api::{GateRequest, GateResponse};
use lev_protocol::text::is_hidden;
use lev_protocol::{ApprovalScope, InteractionRequest, InteractionResponse};
use serde_json::Value;

use crate::client_env::{LevServer, assert_code, block_on, text};

/// One or more characters of every class of `lev_protocol::text::HIDDEN`.
const SAMPLE: &str = "c0\u{1}\u{1b}[31m del\u{7f} c1\u{85}\u{9b} \
    bidi\u{202a}\u{202b}\u{202c}\u{202d}\u{202e}\u{2066}\u{2067}\u{2068}\u{2069}\u{200e}\u{200f}\u{61c} \
    zw\u{200b}\u{200c}\u{200d}\u{2060}\u{feff} shy\u{ad} vs\u{fe0f} \
    tags\u{e0001}\u{e0049}\u{e0047}\u{e007f} sep\u{2028}\u{2029} \
    filler\u{3164}\u{115f} math\u{2061}\u{2064} end";

/// No hidden character raw in `stdout` (its own newlines aside), and it
/// parses as JSON.
fn inert(what: &str, stdout: &str) -> Value {
    for (i, c) in stdout.char_indices() {
        assert!(
            c == '\n' || !is_hidden(c),
            "{what}: raw {} at byte {i} of:\n{stdout}",
            lev_protocol::text::code_point(c)
        );
    }
    serde_json::from_str(stdout).unwrap_or_else(|e| panic!("{what}: not JSON ({e}):\n{stdout}"))
}

/// Every string inside `value`.
fn strings(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::String(s) => out.push(s.clone()),
        Value::Array(items) => items.iter().for_each(|v| strings(v, out)),
        Value::Object(map) => map.iter().for_each(|(k, v)| {
            out.push(k.clone());
            strings(v, out);
        }),
        _ => {}
    }
}

fn holds(what: &str, value: &Value, want: &str) {
    let mut all = Vec::new();
    strings(value, &mut all);
    assert!(
        all.iter().any(|s| s.contains(want)),
        "{what}: no string holds the agent's text exactly: {value}"
    );
}

#[test]
fn json_output_escapes_every_hidden_character_and_reads_back_the_same() {
    let server = LevServer::start("hidden-json");
    let client = server.client();
    let prompt = format!("question {SAMPLE}");
    let mut request = InteractionRequest::new("hidden", text(&prompt));
    request.title = Some(format!("title {SAMPLE}"));
    let question = block_on(client.create_interaction(&request)).unwrap();

    // A tool call whose args hold them too, approved with context that does.
    let args = serde_json::json!({"argv": ["echo", SAMPLE], "cwd": "/tmp"}).to_string();
    let gate = GateRequest {
        session_id: "hidden".into(),
        conversation_id: "c-hidden".into(),
        turn_id: String::new(),
        request_id: "call-hidden".into(),
        caller: String::new(),
        tool_name: "shell".into(),
        args_json: args.clone(),
        sandbox_mode: "workspace-write".into(),
        required_capabilities: vec!["proc-exec".into()],
        timeout_s: Some(600),
        route: None,
        reason: Some(format!("because {SAMPLE}")),
    };
    let call = match block_on(client.gate(&gate)).unwrap() {
        GateResponse::Ask { interaction_id } => interaction_id,
        other => panic!("expected the gate to ask, found {other:?}"),
    };

    for (what, argv) in [
        ("ls --json", vec!["ls", "--json"]),
        ("show --json", vec!["show", question.id(), "--json"]),
        ("show (call) --json", vec!["show", &call, "--json"]),
    ] {
        let run = server.lev(&argv);
        assert_code(&run, 0);
        let value = inert(what, &run.stdout);
        if what.starts_with("ls") || what == "show --json" {
            holds(what, &value, &prompt);
        }
        if what != "show --json" {
            holds(what, &value, &args);
        }
    }

    let mut approve = InteractionResponse::approval(&call, true, ApprovalScope::Once);
    approve.injected_context = Some(format!("note {SAMPLE}"));
    block_on(client.respond(&call, &approve)).unwrap();
    let view = block_on(client.get_interaction(&call)).unwrap();
    let envelope = serde_json::to_string(view.approval.as_ref().expect("signed")).unwrap();

    let run = server.lev(&["show", &call, "--json"]);
    assert_code(&run, 0);
    holds(
        "show (answered) --json",
        &inert("show (answered) --json", &run.stdout),
        &format!("note {SAMPLE}"),
    );

    let run = server.lev(&["ls", "--all", "--json"]);
    assert_code(&run, 0);
    holds(
        "ls --all --json",
        &inert("ls --all --json", &run.stdout),
        &args,
    );

    // lev verify prints the verified approval: the signed args and context.
    let keys = server.lev(&["keys", "--json"]);
    assert_code(&keys, 0);
    let keys = server.dir.write("keys.json", &keys.stdout);
    let envelope = server.dir.write("envelope.json", &envelope);
    let args_file = server.dir.write("args.json", &args);
    let run = server.lev(&[
        "verify",
        envelope.to_str().unwrap(),
        "--key",
        keys.to_str().unwrap(),
        "--request-id",
        "call-hidden",
        "--tool",
        "shell",
        "--args-file",
        args_file.to_str().unwrap(),
    ]);
    assert_code(&run, 0);
    let verified = inert("verify", &run.stdout);
    holds("verify", &verified, &args);
    holds("verify", &verified, &format!("note {SAMPLE}"));

    let run = server.lev(&["audit", "--json"]);
    assert_code(&run, 0);
    inert("audit --json", &run.stdout);
}
