//! `lev mcp proxy` between the official MCP Python SDK's client
//! (`tests/python/mcp_proxy_driver.py`), and the TypeScript SDK's
//! (`tests/node/mcp_ts_client.mjs`), and the reference MCP servers from
//! npm (`@modelcontextprotocol/server-everything`, `server-filesystem`,
//! pinned and installed by `scripts/mcp-servers-env.sh`: set
//! LEV_TEST_MCP_SERVERS to its output), against a real `lev serve` with a
//! person answering through lev's API.

use std::io::{BufRead as _, BufReader, Write as _};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

use lev_protocol::{
    ApprovalScope, Interaction, InteractionKind, InteractionResponse, InteractionStatus,
};
use serde_json::{Value, json};

use crate::agents::driver::python;
use crate::agents::served::Served;

const SETUP: &str = "run `export LEV_TEST_MCP_SERVERS=\"$(bash scripts/mcp-servers-env.sh)\"` (it installs the pinned reference MCP servers from npm)";

/// The entry script of a reference server (`server-everything`, ...).
fn server_script(name: &str) -> PathBuf {
    let dir = std::env::var_os("LEV_TEST_MCP_SERVERS")
        .map(PathBuf::from)
        .unwrap_or_else(|| panic!("LEV_TEST_MCP_SERVERS is not set\nhint: {SETUP}"));
    let script = dir.join(format!(
        "node_modules/@modelcontextprotocol/{name}/dist/index.js"
    ));
    assert!(script.exists(), "no {} \nhint: {SETUP}", script.display());
    script
}

/// `node server-everything stdio`.
pub(crate) fn everything() -> Vec<String> {
    vec![
        "node".into(),
        server_script("server-everything").display().to_string(),
        "stdio".into(),
    ]
}

/// `node server-filesystem DIR`.
fn filesystem(dir: &std::path::Path) -> Vec<String> {
    vec![
        "node".into(),
        server_script("server-filesystem").display().to_string(),
        dir.display().to_string(),
    ]
}

/// `lev mcp proxy ARGS -- UPSTREAM`.
pub(crate) fn proxy(args: &[&str], upstream: &[String]) -> Vec<String> {
    let mut all = vec![
        env!("CARGO_BIN_EXE_lev").to_owned(),
        "mcp".into(),
        "proxy".into(),
    ];
    all.extend(args.iter().map(|a| (*a).to_owned()));
    if !upstream.is_empty() {
        all.push("--".into());
        all.extend(upstream.iter().cloned());
    }
    all
}

/// One MCP client session (the Python SDK) on a stdio server or a URL.
struct Driver {
    child: Child,
    stdin: ChildStdin,
    events: mpsc::Receiver<Value>,
    stderr: Arc<Mutex<String>>,
    ready: Value,
}

enum Target<'a> {
    Stdio(&'a [String]),
    Url(&'a str),
}

impl Driver {
    fn start(mode: &str, served: &Served, target: Target<'_>) -> Self {
        Self::start_with(mode, served, target, &[])
    }

    /// With `env` for the driver (`MCP_DRIVER_CLIENT_FEATURES=1`: sampling
    /// and roots; `MCP_DRIVER_ELICIT=1`: elicitation).
    fn start_with(mode: &str, served: &Served, target: Target<'_>, env: &[(&str, &str)]) -> Self {
        let script =
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/python/mcp_proxy_driver.py");
        let mut command = Command::new(python());
        command.arg(&script).arg(mode);
        match target {
            Target::Stdio(argv) => command.arg("--").args(argv),
            Target::Url(url) => command.arg(url),
        };
        let mut child = command
            .env("LEV_URL", &served.url)
            .env("LEV_TOKEN", &served.worker)
            .envs(env.iter().copied())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let (stdin, events, log) = crate::agents::driver::pipes(&mut child);
        let mut driver = Self {
            child,
            stdin,
            events,
            stderr: log,
            ready: Value::Null,
        };
        driver.ready = driver.next("ready");
        driver
    }

    fn send(&mut self, command: &Value) {
        writeln!(self.stdin, "{command}").unwrap();
        self.stdin.flush().unwrap();
    }

    /// The driver's next event, or a failed test saying `missing` with the
    /// driver's stderr.
    fn recv(&self, missing: &str) -> Value {
        self.events
            .recv_timeout(Duration::from_secs(60))
            .unwrap_or_else(|_| {
                panic!("{missing}; driver stderr:\n{}", self.stderr.lock().unwrap())
            })
    }

    /// The next event, skipping progress events unless asked for.
    fn next(&self, kind: &str) -> Value {
        loop {
            let event = self.recv(&format!("no {kind:?} event from the MCP driver"));
            if event["event"] == "progress" && kind != "progress" {
                continue;
            }
            assert_eq!(
                event["event"],
                kind,
                "expected a {kind:?} event, found {event}; driver stderr:\n{}",
                self.stderr.lock().unwrap()
            );
            return event;
        }
    }

    /// `op` and its one answer event.
    fn ask(&mut self, op: Value, kind: &str) -> Value {
        self.send(&op);
        self.next(kind)
    }

    fn call(&mut self, id: &str, name: &str, arguments: Value) {
        self.call_with(id, name, arguments, false);
    }

    fn call_with(&mut self, id: &str, name: &str, arguments: Value, progress: bool) {
        self.send(&json!({"op": "call", "id": id, "name": name, "arguments": arguments, "progress": progress}));
        assert_eq!(self.next("started")["id"], id);
    }

    /// The progress events of `id` until its result, and the result.
    fn progress_until_result(&self, id: &str) -> (Vec<Value>, Value) {
        let mut progress = Vec::new();
        loop {
            let event = self.recv(&format!("no result of {id}"));
            assert_eq!(event["id"], id, "{event}");
            if event["event"] == "progress" {
                progress.push(event);
            } else {
                return (progress, event);
            }
        }
    }

    /// Call `id`'s result (texts, is_error), or its error event.
    fn outcome(&self, id: &str) -> Value {
        loop {
            let event = self.recv(&format!("no result of {id}"));
            if event["event"] == "progress" {
                continue;
            }
            assert_eq!(event["id"], id, "{event}");
            return event;
        }
    }

    fn result(&self, id: &str) -> (Vec<String>, bool) {
        let event = self.outcome(id);
        assert_eq!(
            event["event"],
            "result",
            "{event}; driver stderr:\n{}",
            self.stderr.lock().unwrap()
        );
        let texts = event["texts"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t.as_str().unwrap().to_owned())
            .collect();
        (texts, event["is_error"].as_bool().unwrap())
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = writeln!(self.stdin, "{}", json!({"op": "quit"}));
        let _ = self.stdin.flush();
        for _ in 0..50 {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A process the test started, killed at the end.
struct Background(Child);

impl Drop for Background {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `lev mcp proxy ARGS --listen 127.0.0.1:PORT -- UPSTREAM` running as
/// `served`'s worker, and its MCP endpoint once it listens.
fn listening(served: &Served, args: &[&str], upstream: &[String]) -> (Background, String) {
    let port = free_port();
    let listen = format!("127.0.0.1:{port}");
    let mut all = args.to_vec();
    all.extend(["--listen", listen.as_str()]);
    let argv = proxy(&all, upstream);
    let child = Background(
        Command::new(&argv[0])
            .args(&argv[1..])
            .env("LEV_URL", &served.url)
            .env("LEV_TOKEN", &served.worker)
            .stdout(Stdio::null())
            .spawn()
            .unwrap(),
    );
    wait_for_port(port);
    (child, format!("http://{listen}/mcp"))
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn wait_for_port(port: u16) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "nothing listens on {port}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The tool approval pending in `session`, with what it asks about.
pub(crate) fn pending(served: &Served, session: &str) -> (Interaction, String, Value) {
    let asked = served.pending(session);
    match &asked.request.kind {
        InteractionKind::ToolApproval {
            tool_name,
            args_json,
            ..
        } => {
            let args = serde_json::from_str(args_json).unwrap();
            let tool = tool_name.clone();
            (asked, tool, args)
        }
        other => panic!("expected a tool approval, found {other:?}"),
    }
}

pub(crate) fn approve(asked: &Interaction) -> InteractionResponse {
    InteractionResponse::approval(asked.id(), true, ApprovalScope::Once)
}

/// Allow the read-only echo tool; ask about everything else.
pub(crate) const EVERYTHING_POLICY: &str = r#"
[[rule]]
tool = "mcp__everything__echo"
decision = "allow"

[[rule]]
tool = "*"
decision = "ask"
"#;

#[test]
fn tools_resources_and_prompts_pass_through_unchanged() {
    let served = Served::start("proxy-pass", Some(EVERYTHING_POLICY));
    let server = everything();
    let through = proxy(&["--name", "everything", "--session", "pass"], &server);
    let mut direct = Driver::start("legacy", &served, Target::Stdio(&server));
    // `auto` probes server/discover first: the proxy passes it on, the
    // server refuses it, and the client falls back to initialize.
    let mut proxied = Driver::start("auto", &served, Target::Stdio(&through));
    assert_eq!(proxied.ready["protocol_version"], "2025-11-25");
    assert_eq!(proxied.ready["server_name"], direct.ready["server_name"]);

    for (op, kind) in [
        (json!({"op": "list_tools"}), "tools"),
        (json!({"op": "list_resources"}), "resources"),
        (json!({"op": "list_prompts"}), "prompts"),
        (
            json!({"op": "read_resource", "uri": "demo://resource/static/document/architecture.md"}),
            "resource",
        ),
        (
            json!({"op": "get_prompt", "name": "args-prompt", "arguments": {"city": "Lyon"}}),
            "prompt",
        ),
    ] {
        let want = direct.ask(op.clone(), kind);
        let got = proxied.ask(op.clone(), kind);
        assert_eq!(got, want, "{op}");
    }
    let tools = direct.ask(json!({"op": "list_tools"}), "tools");
    assert!(tools["tools"].as_array().unwrap().len() > 5, "{tools}");
    assert!(
        served.all("pass").is_empty(),
        "nothing but a tool call asks lev"
    );
}

/// A `lev serve` with [`EVERYTHING_POLICY`], and a client of the proxy in
/// front of server-everything in `session`, with progress every second and
/// the tools listed (so their annotations are known).
fn everything_with_progress(session: &str) -> (Served, Driver) {
    let served = Served::start(&format!("proxy-{session}"), Some(EVERYTHING_POLICY));
    let through = proxy(
        &[
            "--name",
            "everything",
            "--session",
            session,
            "--progress-every",
            "1",
        ],
        &everything(),
    );
    let mut mcp = Driver::start("legacy", &served, Target::Stdio(&through));
    mcp.ask(json!({"op": "list_tools"}), "tools");
    (served, mcp)
}

#[test]
fn allowed_asked_and_denied_calls_with_progress_while_waiting() {
    let (served, mut mcp) = everything_with_progress("gate");

    // Allowed by a rule: no person, the server's own result.
    mcp.call("echo", "echo", json!({"message": "hi"}));
    assert_eq!(mcp.result("echo"), (vec!["Echo: hi".to_owned()], false));
    assert!(served.all("gate").is_empty());

    // Asked: the call waits for a person, the client hears progress.
    mcp.call_with("sum", "get-sum", json!({"a": 1, "b": 2}), true);
    let (asked, tool, args) = pending(&served, "gate");
    assert_eq!(tool, "mcp__everything__get-sum");
    assert_eq!(args, json!({"a": 1, "b": 2}));
    let progress = mcp.next("progress");
    assert_eq!(progress["id"], "sum");
    assert_eq!(progress["message"], "waiting for a decision in lev");
    served.respond(&asked, &approve(&asked));
    let (texts, is_error) = mcp.result("sum");
    assert!(!is_error, "{texts:?}");
    assert!(texts[0].contains("3"), "{texts:?}");

    // Denied: a tool error with the feedback; the server never called.
    mcp.call("denied", "get-sum", json!({"a": 5, "b": 5}));
    let (asked, _, _) = pending(&served, "gate");
    served.respond(
        &asked,
        &InteractionResponse::deny_with_feedback(asked.id(), "use a calculator"),
    );
    let (texts, is_error) = mcp.result("denied");
    assert!(is_error, "{texts:?}");
    assert_eq!(
        texts,
        [
            "The person denied the call to mcp__everything__get-sum; it was not run.\nFeedback: use a calculator"
        ]
    );

    // Cancelled by the client while waiting: the question is withdrawn.
    mcp.call("cancel", "get-sum", json!({"a": 7, "b": 7}));
    let (asked, _, _) = pending(&served, "gate");
    mcp.send(&json!({"op": "cancel", "id": "cancel"}));
    assert_eq!(mcp.next("cancelled")["id"], "cancel");
    served.wait_status("gate", asked.id(), InteractionStatus::Cancelled);
}

#[test]
fn progress_keeps_increasing_from_the_wait_into_the_servers_own() {
    let (served, mut mcp) = everything_with_progress("progress");
    // The server reports steps 1, 2, 3 on the same token lev used while
    // the call waited for a person.
    mcp.call_with(
        "long",
        "trigger-long-running-operation",
        json!({"duration": 0.6, "steps": 3}),
        true,
    );
    let (asked, _, _) = pending(&served, "progress");
    let first = mcp.next("progress");
    assert_eq!(first["message"], "waiting for a decision in lev");
    let second = mcp.next("progress");
    served.respond(&asked, &approve(&asked));
    let (rest, result) = mcp.progress_until_result("long");
    assert_eq!(result["event"], "result", "{result}");
    assert_eq!(result["is_error"], false, "{result}");

    let mut seen = vec![first, second];
    seen.extend(rest);
    let values: Vec<f64> = seen
        .iter()
        .map(|p| p["progress"].as_f64().unwrap())
        .collect();
    assert!(
        values.windows(2).all(|w| w[0] < w[1]),
        "progress on one token must increase: {values:?}"
    );
    let servers: Vec<&Value> = seen
        .iter()
        .filter(|p| p["message"] != "waiting for a decision in lev")
        .collect();
    assert_eq!(servers.len(), 3, "the server's three steps: {seen:?}");
    // Its total moved with its progress: the last step is the whole.
    let last = servers[2];
    assert_eq!(last["progress"], last["total"], "{last}");
}

#[test]
fn the_servers_own_requests_reach_the_client_and_their_answers_come_back() {
    let policy = "[[rule]]\ntool = \"mcp__everything__*\"\ndecision = \"allow\"\n";
    let served = Served::start("proxy-sampling", Some(policy));
    let through = proxy(
        &["--name", "everything", "--session", "sampling"],
        &everything(),
    );
    let mut mcp = Driver::start_with(
        "legacy",
        &served,
        Target::Stdio(&through),
        &[("MCP_DRIVER_CLIENT_FEATURES", "1")],
    );
    let tools = mcp.ask(json!({"op": "list_tools"}), "tools");
    let names: Vec<&str> = tools["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"trigger-sampling-request"), "{names:?}");

    // roots/list: the server asks the client, under an id the proxy chose.
    mcp.call("roots", "get-roots-list", json!({}));
    let (texts, is_error) = mcp.result("roots");
    assert!(
        !is_error && texts[0].contains("file:///srv/test-root"),
        "{texts:?}"
    );

    // sampling/createMessage in the middle of a gated tool call.
    mcp.call(
        "sample",
        "trigger-sampling-request",
        json!({"prompt": "hi", "maxTokens": 10}),
    );
    let (texts, is_error) = mcp.result("sample");
    assert!(!is_error, "{texts:?}");
    assert!(
        texts[0].contains("sampled: Resource trigger-sampling-request context: hi"),
        "{texts:?}"
    );
}

#[test]
fn elicit_puts_an_asked_call_to_the_clients_user_as_their_decision() {
    let served = Served::start("proxy-elicit", Some(EVERYTHING_POLICY));
    // ellie: the client's user, an approver in lev.
    let admin = lev_client::Client::new(&served.url, Some(served.admin.clone())).unwrap();
    let token =
        crate::agents::served::block_on(admin.create_token(&lev_protocol::api::TokenCreate {
            name: "ellie".into(),
            role: lev_protocol::api::Role::Approver,
            caller: None,
            sessions: None,
        }))
        .unwrap()
        .token;
    let through = proxy(
        &[
            "--name",
            "everything",
            "--session",
            "elicit",
            "--elicit",
            "--elicit-token",
            &token,
        ],
        &everything(),
    );
    let mut mcp = Driver::start_with(
        "legacy",
        &served,
        Target::Stdio(&through),
        &[("MCP_DRIVER_ELICIT", "1")],
    );
    mcp.ask(json!({"op": "list_tools"}), "tools");

    mcp.call("yes", "get-sum", json!({"a": 1, "b": 2}));
    let (texts, is_error) = mcp.result("yes");
    assert!(!is_error && texts[0].contains('3'), "{texts:?}");
    let decided = served.all("elicit");
    assert_eq!(decided.len(), 1);
    assert_eq!(
        decided[0].answered_by.as_deref(),
        Some("ellie"),
        "{decided:?}"
    );

    mcp.call("no", "get-sum", json!({"a": 5, "b": 5}));
    let (texts, is_error) = mcp.result("no");
    assert!(is_error, "{texts:?}");
    assert!(texts[0].ends_with("Feedback: not five"), "{texts:?}");

    // The user leaves the elicitation open; a person answers in lev first:
    // lev's decision counts, and the elicitation is withdrawn.
    mcp.call("elsewhere", "get-sum", json!({"a": 9, "b": 9}));
    assert_eq!(mcp.next("elicit_waiting")["event"], "elicit_waiting");
    let asked = served.pending("elicit");
    served.respond(&asked, &approve(&asked));
    let mut withdrawn = false;
    let mut result = None;
    while !withdrawn || result.is_none() {
        let event = mcp
            .events
            .recv_timeout(Duration::from_secs(60))
            .expect("the withdrawal and the call's result");
        match event["event"].as_str() {
            Some("elicit_withdrawn") => withdrawn = true,
            Some("result") => result = Some(event),
            Some("progress") => {}
            _ => panic!("unexpected {event}"),
        }
    }
    let result = result.unwrap();
    assert_eq!(result["id"], "elsewhere");
    assert_eq!(result["is_error"], false, "{result}");
    assert!(
        result["texts"][0].as_str().unwrap().contains("18"),
        "{result}"
    );
    let decided = served.all("elicit");
    let answered = decided.iter().find(|i| i.id() == asked.id()).unwrap();
    assert_ne!(
        answered.answered_by.as_deref(),
        Some("ellie"),
        "{answered:?}"
    );
}

/// Read-only tools run; non-destructive writes too; destructive ones ask.
const FS_POLICY: &str = r#"
default = "allow"

[sandbox_modes]
default = ["mcp-write"]
"#;

#[test]
fn annotations_reach_the_policy_and_an_edit_changes_what_the_server_writes() {
    let served = Served::start("proxy-fs", Some(FS_POLICY));
    let scratch = crate::support::Scratch::new("proxy-fs-root");
    let root = scratch.path("root");
    std::fs::create_dir_all(&root).unwrap();
    let root = root.canonicalize().unwrap();
    std::fs::write(root.join("notes.txt"), "hello").unwrap();
    let through = proxy(&["--name", "fs", "--session", "fs"], &filesystem(&root));
    let mut mcp = Driver::start("legacy", &served, Target::Stdio(&through));
    mcp.ask(json!({"op": "list_tools"}), "tools");

    // readOnlyHint: nothing required, the policy's default allows.
    let notes = root.join("notes.txt").display().to_string();
    mcp.call("read", "read_text_file", json!({"path": notes}));
    assert_eq!(mcp.result("read"), (vec!["hello".to_owned()], false));
    // destructiveHint false: mcp-write only, which the mode grants.
    let dir = root.join("made").display().to_string();
    mcp.call("mkdir", "create_directory", json!({"path": dir}));
    assert!(!mcp.result("mkdir").1);
    assert!(root.join("made").is_dir());
    assert!(served.all("fs").is_empty(), "no person was asked");

    // destructiveHint true: mcp-destructive is missing, a person decides,
    // and edits the path.
    let asked_path = root.join("asked.txt").display().to_string();
    let edited_path = root.join("edited.txt").display().to_string();
    mcp.call(
        "write",
        "write_file",
        json!({"path": asked_path, "content": "from the model"}),
    );
    let (asked, tool, _) = pending(&served, "fs");
    assert_eq!(tool, "mcp__fs__write_file");
    let InteractionKind::ToolApproval {
        missing_capabilities,
        ..
    } = &asked.request.kind
    else {
        unreachable!()
    };
    assert_eq!(missing_capabilities, &["mcp-destructive"], "{asked:?}");
    let mut edit = approve(&asked);
    edit.modified_args_json =
        Some(json!({"path": edited_path, "content": "from the person"}).to_string());
    served.respond(&asked, &edit);
    let (texts, is_error) = mcp.result("write");
    assert!(!is_error, "{texts:?}");
    assert_eq!(
        std::fs::read_to_string(root.join("edited.txt")).unwrap(),
        "from the person"
    );
    assert!(
        !root.join("asked.txt").exists(),
        "the unedited call never ran"
    );
}

#[test]
fn an_upstream_that_crashes_or_hangs_gives_errors_never_a_success() {
    let served = Served::start("proxy-broken", Some("default = \"allow\"\n"));
    let fake = vec![
        python().display().to_string(),
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("tests/python/mcp_fake_upstream.py")
            .display()
            .to_string(),
    ];
    let through = proxy(
        &[
            "--name",
            "broken",
            "--session",
            "broken",
            "--upstream-timeout",
            "2",
        ],
        &fake,
    );
    let mut mcp = Driver::start("legacy", &served, Target::Stdio(&through));
    mcp.ask(json!({"op": "list_tools"}), "tools");

    mcp.call("hang", "hang", json!({}));
    let hung = mcp.outcome("hang");
    assert_ne!(hung["event"], "result", "a hang is no success: {hung}");
    assert!(
        hung["error"]
            .as_str()
            .unwrap()
            .contains("did not answer within 2 s"),
        "{hung}"
    );

    mcp.call("crash", "crash", json!({}));
    let crashed = mcp.outcome("crash");
    assert_ne!(
        crashed["event"], "result",
        "a crash is no success: {crashed}"
    );
    assert!(
        crashed["error"].as_str().unwrap().contains("exited"),
        "{crashed}"
    );

    // Whatever comes after gets an error too.
    let after = mcp.ask(json!({"op": "list_tools"}), "error");
    assert!(
        after["error"].as_str().unwrap().contains("exited"),
        "{after}"
    );
}

#[test]
fn listen_serves_streamable_http_to_the_client() {
    let served = Served::start("proxy-listen", Some(EVERYTHING_POLICY));
    let (_proxy, url) = listening(&served, &["--name", "everything"], &everything());
    let mut mcp = Driver::start("legacy", &served, Target::Url(&url));
    assert_eq!(mcp.ready["server_name"], "mcp-servers/everything");
    let tools = mcp.ask(json!({"op": "list_tools"}), "tools");
    assert!(
        tools["tools"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["name"] == "get-sum")
    );
    mcp.call("echo", "echo", json!({"message": "over http"}));
    assert_eq!(
        mcp.result("echo"),
        (vec!["Echo: over http".to_owned()], false)
    );

    // The session is the MCP session's.
    mcp.call("sum", "get-sum", json!({"a": 2, "b": 2}));
    let asked = wait_for_any_pending(&served);
    assert!(asked.request.session_id.starts_with("mcp-"), "{asked:?}");
    served.respond(&asked, &approve(&asked));
    let (texts, is_error) = mcp.result("sum");
    assert!(!is_error && texts[0].contains('4'), "{texts:?}");
}

#[test]
fn listen_with_a_token_admits_only_clients_that_show_it() {
    let served = Served::start("proxy-listen-token", Some(EVERYTHING_POLICY));
    let dir = tempfile::tempdir().unwrap();
    let token_file = dir.path().join("mcp-token");
    std::fs::write(&token_file, "s3cret-token\n").unwrap();

    // Without a token, an address other than loopback is refused at once.
    let argv = proxy(
        &["--name", "everything", "--listen", "0.0.0.0:0"],
        &everything(),
    );
    let refused = Command::new(&argv[0])
        .args(&argv[1..])
        .env("LEV_URL", &served.url)
        .env("LEV_TOKEN", &served.worker)
        .output()
        .unwrap();
    assert!(!refused.status.success());
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr.contains("not a loopback address") && stderr.contains("--listen-token-file"),
        "{stderr}"
    );

    let token_arg = token_file.to_str().unwrap();
    let (_proxy, url) = listening(
        &served,
        &["--name", "everything", "--listen-token-file", token_arg],
        &everything(),
    );
    let initialize = json!({
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "t", "version": "1"}}
    });
    let post = |auth: Option<&str>| {
        crate::agents::served::block_on(async {
            let _ = rustls::crypto::ring::default_provider().install_default();
            let mut request = reqwest::Client::builder()
                .no_proxy()
                .build()
                .unwrap()
                .post(&url)
                .header("accept", "application/json, text/event-stream")
                .json(&initialize);
            if let Some(auth) = auth {
                request = request.header("authorization", auth);
            }
            let response = request.send().await.unwrap();
            let status = response.status().as_u16();
            let challenge = response
                .headers()
                .get("www-authenticate")
                .map(|v| v.to_str().unwrap().to_owned());
            let session = response.headers().get("mcp-session-id").is_some();
            (status, challenge, session)
        })
    };
    for auth in [
        None,
        Some("Bearer wrong"),
        Some("Basic s3cret-token"),
        Some("Bearer "),
    ] {
        let (status, challenge, session) = post(auth);
        assert_eq!(status, 401, "{auth:?}");
        assert!(challenge.unwrap().starts_with("Bearer"), "{auth:?}");
        assert!(!session, "no session opened for {auth:?}");
    }
    let (status, _, session) = post(Some("Bearer s3cret-token"));
    assert_eq!(status, 200);
    assert!(session, "the token opens a session");
}

#[test]
fn listen_serves_stateless_clients_without_mixing_their_ids() {
    // The upstream is `lev mcp` itself, which speaks the stateless
    // 2026-07-28 era; the clients never initialize, so they share one
    // upstream connection and both use the same request ids.
    let served = Served::start(
        "proxy-stateless",
        Some("[[rule]]\ntool = \"mcp__lev__*\"\ndecision = \"allow\"\n"),
    );
    let upstream = vec![
        env!("CARGO_BIN_EXE_lev").to_owned(),
        "mcp".to_owned(),
        "--session".to_owned(),
        "asked".to_owned(),
    ];
    let (_proxy, url) = listening(&served, &["--name", "lev"], &upstream);
    let mut first = Driver::start("2026-07-28", &served, Target::Url(&url));
    let mut second = Driver::start("2026-07-28", &served, Target::Url(&url));
    assert_eq!(first.ready["protocol_version"], "2026-07-28");
    for mcp in [&mut first, &mut second] {
        let tools = mcp.ask(json!({"op": "list_tools"}), "tools");
        let names: Vec<&str> = tools["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["approval_prompt", "ask_human"]);
    }
    // Both wait at once, under the same ids; each gets its own answer.
    first.call("q", "ask_human", json!({"question": "first?"}));
    second.call("q", "ask_human", json!({"question": "second?"}));
    let deadline = Instant::now() + Duration::from_secs(30);
    let asked = loop {
        let all = served.all("asked");
        if all.len() == 2 {
            break all;
        }
        assert!(Instant::now() < deadline, "two questions in lev: {all:?}");
        std::thread::sleep(Duration::from_millis(100));
    };
    for question in &asked {
        let InteractionKind::FreeText { prompt, .. } = &question.request.kind else {
            panic!("a free-text question: {question:?}");
        };
        let answer = format!("answer to {prompt}");
        served.respond(question, &crate::agents::served::text(question, &answer));
    }
    assert_eq!(
        first.result("q"),
        (vec!["answer to first?".to_owned()], false)
    );
    assert_eq!(
        second.result("q"),
        (vec!["answer to second?".to_owned()], false)
    );
}

#[test]
fn a_streamable_http_upstream_is_gated_too() {
    let served = Served::start("proxy-upstream-http", Some(EVERYTHING_POLICY));
    let port = free_port();
    let _server = Background(
        Command::new("node")
            .arg(server_script("server-everything"))
            .arg("streamableHttp")
            .env("PORT", port.to_string())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    wait_for_port(port);
    let url = format!("http://127.0.0.1:{port}/mcp");
    let through = proxy(
        &[
            "--name",
            "everything",
            "--upstream-url",
            &url,
            "--header",
            "X-Test: yes",
        ],
        &[],
    );
    let mut mcp = Driver::start("legacy", &served, Target::Stdio(&through));
    assert_eq!(mcp.ready["server_name"], "mcp-servers/everything");
    let tools = mcp.ask(json!({"op": "list_tools"}), "tools");
    assert!(
        tools["tools"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["name"] == "echo")
    );
    mcp.call("echo", "echo", json!({"message": "upstream http"}));
    assert_eq!(
        mcp.result("echo"),
        (vec!["Echo: upstream http".to_owned()], false)
    );

    mcp.call("sum", "get-sum", json!({"a": 3, "b": 4}));
    let asked = wait_for_any_pending(&served);
    // The session is the upstream's MCP session.
    assert!(asked.request.session_id.starts_with("mcp-"), "{asked:?}");
    served.respond(
        &asked,
        &InteractionResponse::deny_with_feedback(asked.id(), "not now"),
    );
    let (texts, is_error) = mcp.result("sum");
    assert!(
        is_error && texts[0].contains("Feedback: not now"),
        "{texts:?}"
    );
}

/// The one pending interaction, whatever its session.
fn wait_for_any_pending(served: &Served) -> Interaction {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let page = crate::agents::served::block_on(
            served
                .approver
                .list_interactions(&lev_client::ListQuery::default()),
        )
        .unwrap();
        if let [one] = page.items.as_slice() {
            return one.request.clone();
        }
        assert!(Instant::now() < deadline, "nothing pending");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The official MCP TypeScript SDK's client (`tests/node/mcp_ts_client.mjs`,
/// the SDK the pinned reference servers are built on) through the proxy:
/// the tools listed as the server lists them, an allowed call passes, an
/// asked one waits for the person who approves it, a denial reaches the
/// client as a tool error with the feedback.
#[test]
fn the_typescript_sdks_client_through_the_proxy() {
    let served = Served::start("proxy-ts", Some(EVERYTHING_POLICY));
    let server = everything();
    let want: Vec<String> = {
        let mut direct = Driver::start("legacy", &served, Target::Stdio(&server));
        let tools = direct.ask(json!({"op": "list_tools"}), "tools");
        tools["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap().to_owned())
            .collect()
    };
    let through = proxy(&["--name", "everything", "--session", "ts"], &server);
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/node/mcp_ts_client.mjs");
    let _ = server_script("server-everything"); // LEV_TEST_MCP_SERVERS is set
    let mut child = Command::new("node")
        .arg(&script)
        .arg("--")
        .args(&through)
        .env("LEV_URL", &served.url)
        .env("LEV_TOKEN", &served.worker)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("node runs (Node.js 20 or later)");
    let stdout = child.stdout.take().unwrap();
    let (tx, events) = mpsc::channel::<Value>();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let event = serde_json::from_str(&line).unwrap_or_else(|_| json!({"garbage": line}));
            if tx.send(event).is_err() {
                break;
            }
        }
    });
    let next = |kind: &str| -> Value {
        let event = events
            .recv_timeout(Duration::from_secs(60))
            .unwrap_or_else(|e| panic!("no {kind} from the TypeScript client: {e}"));
        assert_eq!(event["event"], kind, "{event}");
        event
    };

    next("ready");
    let names: Vec<String> = next("tools")["names"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_str().unwrap().to_owned())
        .collect();
    assert_eq!(names, want, "the tools as the server lists them");

    let echo = next("result");
    assert_eq!(echo["id"], "echo");
    assert_eq!(echo["is_error"], false, "{echo}");
    assert_eq!(echo["texts"], json!(["Echo: from typescript"]));
    assert!(served.all("ts").is_empty(), "an allowed call asks nobody");

    let (asked, tool, args) = pending(&served, "ts");
    assert_eq!(tool, "mcp__everything__get-sum");
    assert_eq!(args, json!({"a": 20, "b": 22}));
    served.respond(&asked, &approve(&asked));
    let sum = next("result");
    assert_eq!(sum["id"], "sum");
    assert_eq!(sum["is_error"], false, "{sum}");
    assert!(sum["texts"][0].as_str().unwrap().contains("42"), "{sum}");

    let (asked, _, _) = pending(&served, "ts");
    served.respond(
        &asked,
        &InteractionResponse::deny_with_feedback(asked.id(), "no more sums"),
    );
    let denied = next("result");
    assert_eq!(denied["id"], "denied");
    assert_eq!(denied["is_error"], true, "{denied}");
    assert!(
        denied["texts"][0]
            .as_str()
            .unwrap()
            .contains("Feedback: no more sums"),
        "{denied}"
    );
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            assert!(status.success(), "the client ended with {status}");
            break;
        }
        assert!(Instant::now() < deadline, "the client did not close");
        std::thread::sleep(Duration::from_millis(50));
    }
}
