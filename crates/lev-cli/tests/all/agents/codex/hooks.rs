//! `lev codex install-hooks` and `lev hook codex` with the real Codex:
//! Codex itself reports the hooks trusted, and `codex exec` (which never
//! asks for approval) is gated by the PreToolUse hook alone.

use std::io::{BufRead as _, BufReader, Write as _};
use std::process::Stdio;

use lev_protocol::{ApprovalScope, InteractionResponse};
use serde_json::{Value, json};

use super::fake_model::{escalated, exec, said, say};
use super::harness::{CodexEnv, Running, codex_bin};
use crate::support::Run;

/// `lev codex install-hooks --codex-home <this world's> ARGS`.
fn install(env: &CodexEnv, args: &[&str]) -> Run {
    let home = env.codex_home();
    let mut all = vec![
        "codex",
        "install-hooks",
        "--codex-home",
        home.to_str().unwrap(),
    ];
    all.extend_from_slice(args);
    let output = env.lev(&all).output().unwrap();
    Run {
        code: output.status.code().unwrap_or(-1),
        stdout: String::from_utf8(output.stdout).unwrap(),
        stderr: String::from_utf8(output.stderr).unwrap(),
    }
}

/// What `codex app-server` answers to `hooks/list` for the workspace.
fn hooks_list(env: &CodexEnv) -> Value {
    let mut child = env
        .command(&codex_bin())
        .arg("app-server")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut ask = |id: u64, method: &str, params: Value| -> Value {
        writeln!(
            stdin,
            "{}",
            json!({"id": id, "method": method, "params": params})
        )
        .unwrap();
        loop {
            let line = lines.next().expect("app-server answered").unwrap();
            let message: Value = serde_json::from_str(&line).unwrap();
            if message.get("id") == Some(&json!(id)) && message.get("method").is_none() {
                return message;
            }
        }
    };
    ask(
        1,
        "initialize",
        json!({"clientInfo": {"name": "lev-test", "version": "1"}}),
    );
    let ws = env.ws();
    let listed = ask(2, "hooks/list", json!({"cwds": [ws]}));
    drop(stdin);
    let _ = child.wait();
    listed
}

/// Every object in `value` (at any depth) whose `key` is `key`.
fn entries_with_key<'a>(value: &'a Value, key: &str, out: &mut Vec<&'a Value>) {
    match value {
        Value::Object(map) => {
            if map.get("key").and_then(Value::as_str) == Some(key) {
                out.push(value);
            }
            map.values().for_each(|v| entries_with_key(v, key, out));
        }
        Value::Array(items) => items.iter().for_each(|v| entries_with_key(v, key, out)),
        _ => {}
    }
}

#[test]
fn codex_install_hooks_writes_hooks_codex_itself_trusts() {
    let env = CodexEnv::start("install", None, vec![]);
    let config = env.codex_home().join("config.toml");
    let before = std::fs::read_to_string(&config).unwrap();
    let run = install(
        &env,
        &[
            "--events",
            "pre-tool-use,permission-request",
            "--timeout",
            "300",
        ],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let home = std::fs::canonicalize(env.codex_home()).unwrap();
    let config_path = home.join("config.toml");
    let keys = [
        format!("{}:pre_tool_use:0:0", config_path.display()),
        format!("{}:permission_request:0:0", config_path.display()),
    ];
    for key in &keys {
        assert!(
            run.stdout.contains(key),
            "says what it wrote: {}",
            run.stdout
        );
    }
    assert!(
        run.stdout
            .contains("hook codex --timeout 300 (Codex's timeout: 330 s)"),
        "{}",
        run.stdout
    );
    let after = std::fs::read_to_string(&config).unwrap();
    assert!(
        after.starts_with(before.trim_end()),
        "the user's config is kept"
    );

    let listed = hooks_list(&env);
    for key in &keys {
        let mut found = Vec::new();
        entries_with_key(&listed, key, &mut found);
        assert_eq!(found.len(), 1, "{key} in {listed}");
        assert_eq!(found[0]["trustStatus"], "trusted", "{}", found[0]);
    }

    // Again: the same file, lev's block replaced rather than repeated.
    let again = install(
        &env,
        &[
            "--events",
            "pre-tool-use,permission-request",
            "--timeout",
            "300",
        ],
    );
    assert_eq!(again.code, 0, "{}", again.stderr);
    assert_eq!(std::fs::read_to_string(&config).unwrap(), after);
}

/// Install the PreToolUse hook (talking to `url`), then run `codex exec`.
fn codex_exec(env: &CodexEnv, url: &str) -> Running {
    let run = install(env, &["--url", url]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let mut command = env.command(&codex_bin());
    command
        .args([
            "exec",
            "--skip-git-repo-check",
            "--sandbox",
            "workspace-write",
            "make a file",
        ])
        .env("LEV_TOKEN", &env.served.worker);
    Running::spawn(command)
}

#[test]
fn codex_exec_hook_a_denial_blocks_the_command_with_the_feedback() {
    let env = CodexEnv::start(
        "hook-deny",
        None,
        vec![exec("call_h1", "touch hooked.txt"), say("blocked")],
    );
    let exec = codex_exec(&env, &env.served.url);
    let asked = env.pending();
    match &asked.request.kind {
        lev_protocol::InteractionKind::ToolApproval {
            tool_name,
            args_json,
            ..
        } => {
            assert_eq!(tool_name, "codex.exec");
            let args: Value = serde_json::from_str(args_json).unwrap();
            assert_eq!(args["argv"], json!(["touch", "hooked.txt"]));
        }
        other => panic!("{other:?}"),
    }
    env.respond(
        &asked,
        &InteractionResponse::deny_with_feedback(asked.id(), "not in this repo"),
    );
    let run = exec.wait();
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        !env.ws().join("hooked.txt").exists(),
        "the denied command ran"
    );
    let second = said(&env.model.input_of(1));
    assert!(
        second.contains("Command blocked by PreToolUse hook"),
        "{second}"
    );
    assert!(second.contains("Feedback: not in this repo"), "{second}");
}

#[test]
fn codex_exec_hook_an_approval_lets_the_command_run() {
    let env = CodexEnv::start(
        "hook-approve",
        None,
        vec![exec("call_h2", "touch hooked.txt"), say("made")],
    );
    let exec = codex_exec(&env, &env.served.url);
    let asked = env.pending();
    assert_eq!(
        asked.request.session_id.len(),
        36,
        "Codex's session: {}",
        asked.request.session_id
    );
    env.respond(
        &asked,
        &InteractionResponse::approval(asked.id(), true, ApprovalScope::Once),
    );
    let run = exec.wait();
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(env.ws().join("hooked.txt").exists(), "{}", run.stderr);
}

#[test]
fn codex_exec_hook_an_edit_rewrites_the_command() {
    let env = CodexEnv::start(
        "hook-edit",
        None,
        vec![exec("call_h3", "touch original.txt"), say("made")],
    );
    let exec = codex_exec(&env, &env.served.url);
    let asked = env.pending();
    let ws = env.ws().to_str().unwrap().to_owned();
    let edit = json!({"command": "touch edited.txt", "argv": ["touch", "edited.txt"], "cwd": ws});
    env.respond(
        &asked,
        &InteractionResponse {
            modified_args_json: Some(edit.to_string()),
            ..InteractionResponse::approval(asked.id(), true, ApprovalScope::Once)
        },
    );
    let run = exec.wait();
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(env.ws().join("edited.txt").exists(), "{}", run.stderr);
    assert!(!env.ws().join("original.txt").exists(), "the original ran");
}

#[test]
fn codex_exec_hook_with_lev_unreachable_blocks() {
    let env = CodexEnv::start(
        "hook-unreachable",
        None,
        vec![exec("call_h4", "touch never.txt"), say("blocked")],
    );
    let dead = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://127.0.0.1:{}", l.local_addr().unwrap().port())
    };
    let run = codex_exec(&env, &dead).wait();
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(!env.ws().join("never.txt").exists(), "ran with lev down");
    let second = said(&env.model.input_of(1));
    assert!(
        second.contains("Command blocked by PreToolUse hook: lev could not be reached"),
        "{second}"
    );
    assert!(second.contains("(the hook fails closed)"), "{second}");
    assert!(env.interactions().is_empty());
}

#[test]
fn codex_permission_request_hook_approves_without_asking_the_client() {
    // Under on-request Codex asks only about the escalated call; the
    // PermissionRequest hook answers it before any client is asked.
    let env = CodexEnv::start(
        "hook-permission",
        None,
        vec![
            escalated(
                "call_h5",
                "touch ../outside.txt",
                "must write beside the workspace",
            ),
            say("made"),
        ],
    );
    let run = install(
        &env,
        &["--url", &env.served.url, "--events", "permission-request"],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let codex = codex_bin();
    let mut command = env.lev(&[
        "codex",
        "run",
        "--codex",
        codex.to_str().unwrap(),
        "--approval-policy",
        "on-request",
        "make a file",
    ]);
    command.env("LEV_TOKEN", &env.served.worker);
    let running = Running::spawn(command);
    let asked = env.pending();
    assert_eq!(
        asked.request.reason.as_deref(),
        Some("must write beside the workspace")
    );
    env.respond(
        &asked,
        &InteractionResponse::approval(asked.id(), true, ApprovalScope::Once),
    );
    let run = running.wait();
    assert_eq!(run.code, 0, "{}", run.stderr);
    let outside = env.ws().parent().unwrap().join("outside.txt");
    assert!(outside.exists(), "{}", run.stderr);
    // One question, the hook's: Codex never sent lev codex run a request.
    assert_eq!(env.interactions().len(), 1);
    assert!(!run.stderr.contains("waits for a person"), "{}", run.stderr);
}
