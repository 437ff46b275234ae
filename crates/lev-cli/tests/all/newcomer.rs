//! What a newcomer runs into: output piped into `head`, usage errors, flags
//! that do not fit the question, error messages.

use std::process::{Command, Stdio};

use crate::client_env::{LevServer, assert_code, choice, shell, text};

/// Run `lev ARGS` against `server` with its stdout a pipe whose reading end
/// is already closed, as `lev ... | head -0` would leave it.
fn into_closed_pipe(server: &LevServer, args: &[&str]) -> (Option<i32>, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_lev"))
        .args(args)
        .env("LEV_URL", &server.url)
        .env("LEV_TOKEN", &server.admin)
        .env("RUST_BACKTRACE", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Close the reading end before lev has printed anything.
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Every command exits quietly when its reader has gone (`| head`).
#[test]
fn every_command_exits_quietly_into_a_closed_pipe() {
    let server = LevServer::start("epipe");
    let q = server.create("s-1", text("Which branch?"));
    server.create("s-1", choice("Which db?", &["SQLite", "PostgreSQL"]));
    server.create("s-1", shell(r#"["ls"]"#));
    let id = q.id().to_owned();
    for args in [
        vec!["ls", "--all"],
        vec!["ls", "--all", "--json"],
        vec!["show", &id],
        vec!["show", &id, "--json"],
        vec!["audit"],
        vec!["audit", "--json"],
        vec!["token", "ls"],
        vec!["keys"],
        vec!["grants"],
        vec!["policy", "example"],
        vec!["--help"],
        vec!["ls", "--help"],
    ] {
        let (code, stderr) = into_closed_pipe(&server, &args);
        assert_eq!(code, Some(0), "lev {args:?} into a closed pipe:\n{stderr}");
        assert!(
            !stderr.contains("panicked") && !stderr.contains("pipe"),
            "lev {args:?}:\n{stderr}"
        );
    }
}

/// `lev respond` refuses flags that do not fit the question's kind and says
/// what to type instead; nothing is answered.
#[test]
fn respond_says_what_fits_the_question() {
    let server = LevServer::start("misfit");
    let approval = server.create("s-1", shell(r#"["ls"]"#));
    let run = server.lev(&["respond", approval.id(), "--text", "hi"]);
    assert_code(&run, 2);
    assert!(
        run.stderr.contains("--approve or --deny") && run.stderr.contains("not --text"),
        "{}",
        run.stderr
    );
    // --scope with --text was silently dropped.
    let q = server.create("s-1", text("Which branch?"));
    let run = server.lev(&["respond", q.id(), "--text", "main", "--scope", "session"]);
    assert_code(&run, 2);
    assert!(run.stderr.contains("--scope"), "{}", run.stderr);
    let run = server.lev(&["respond", q.id(), "--approve"]);
    assert_code(&run, 2);
    assert!(run.stderr.contains("--text TEXT"), "{}", run.stderr);
    let c = server.create("s-1", choice("Which db?", &["SQLite", "PostgreSQL"]));
    let run = server.lev(&["respond", c.id(), "--text", "SQLite"]);
    assert_code(&run, 2);
    assert!(run.stderr.contains("--choice N (1 to 2"), "{}", run.stderr);
    let run = server.lev(&["respond", c.id(), "--choice", "3"]);
    assert_code(&run, 2);
    assert!(run.stderr.contains("numbered 1 to 2"), "{}", run.stderr);
    let run = server.lev(&["respond", approval.id(), "--approve", "--choice", "1"]);
    assert_code(&run, 2);
    assert!(run.stderr.contains("has no options"), "{}", run.stderr);
    for id in [approval.id(), q.id(), c.id()] {
        let shown = server.lev(&["show", id, "--json"]).json();
        assert_eq!(shown["request"]["status"], "pending", "{shown}");
    }
}

/// After a usage error, the usage line does not show the options that came
/// from the environment (LEV_URL, LEV_TOKEN) as if they were required.
#[test]
fn usage_lines_do_not_show_environment_options_as_required() {
    let server = LevServer::start("usage");
    for args in [
        &["respond"][..],
        &["show"],
        &["respond", "ir_x", "--choice", "1", "--scope", "once"],
        &["token", "create"],
    ] {
        let run = server.lev(args);
        assert_code(&run, 2);
        let usage = run
            .stderr
            .lines()
            .find(|l| l.starts_with("Usage:"))
            .unwrap_or_else(|| panic!("no usage line:\n{}", run.stderr));
        assert!(
            !usage.contains("--url") && !usage.contains("--token"),
            "lev {args:?}: {usage}"
        );
        assert!(usage.contains(&format!("lev {}", args[0])), "{usage}");
    }
}

/// `lev policy check` names a bad pattern's own line and says what is wrong
/// on one line, with no literal `\n`.
#[test]
fn policy_check_names_the_bad_patterns_line() {
    let dir = crate::support::Scratch::new("policy-regex");
    let file = dir.path("policy.toml");
    std::fs::write(
        &file,
        "default = \"ask\"\n\n[[rule]]\ntool = \"shell\"\ndecision = \"allow\"\n\n[rule.args]\n\"/argv/0\" = \"^git$\"\n\"/argv/1\" = \"^(status\"\n",
    )
    .unwrap();
    let run = crate::support::lev(["policy".as_ref(), "check".as_ref(), file.as_os_str()]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(!run.stderr.contains("\\n"), "{}", run.stderr);
    assert_eq!(run.stderr.lines().count(), 1, "{}", run.stderr);
    assert!(run.stderr.contains("line 9:"), "{}", run.stderr);
    assert!(
        run.stderr
            .contains(r#"unclosed group at character 2 of "^(status""#),
        "{}",
        run.stderr
    );
}

/// A port in use is said once.
#[test]
fn a_port_in_use_is_said_once() {
    let server = LevServer::start("port-a");
    let listen = server.url.trim_start_matches("http://").to_owned();
    let dir = crate::support::Scratch::new("port-b");
    let data = dir.path("data");
    let run = crate::support::lev([
        "serve".as_ref(),
        "--listen".as_ref(),
        listen.as_ref(),
        "--data-dir".as_ref(),
        data.as_os_str(),
    ]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert_eq!(
        run.stderr.matches("Address already in use").count(),
        1,
        "{}",
        run.stderr
    );
}

/// The README's "Offline verification" block works as pasted: gate, approve,
/// `lev show --approval > approval.json`, `lev verify` exit 0.
#[test]
fn readme_offline_verification_works_as_pasted() {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md")).unwrap();
    let section = &readme[readme.find("## Offline verification").unwrap()..];
    let start = section.find("```sh\n").unwrap() + "```sh\n".len();
    let block = &section[start..start + section[start..].find("```").unwrap()];
    assert!(
        block.contains("lev show ir_... --approval > approval.json"),
        "{block}"
    );
    let server = LevServer::start("readme-verify");
    let bin = crate::support::Scratch::new("readme-bin");
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_lev"), bin.path("lev")).unwrap();
    let work = crate::support::Scratch::new("readme-work");
    let sh = |script: &str| {
        let out = Command::new("sh")
            .arg("-ec")
            .arg(script)
            .current_dir(work.path(""))
            .env("PATH", format!("{}:/usr/bin:/bin", bin.path("").display()))
            .env("LEV_URL", &server.url)
            .env("LEV_TOKEN", &server.admin)
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    // The gate call alone first, for the id a person would read off its answer
    // (the same call again is the same interaction: request_id is idempotent).
    let gate = &block[..block.find("# ->").unwrap()];
    let (code, out, err) = sh(gate);
    assert_eq!(code, Some(0), "{gate}\n{out}\n{err}");
    let answer: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(answer["decision"], "ask", "{out}");
    let id = answer["interaction_id"].as_str().unwrap();
    let (code, out, err) = sh(&block.replace("ir_...", id));
    assert_eq!(code, Some(0), "{block}\n{out}\n{err}");
    assert!(out.contains("effective_args_json"), "{out}\n{err}");
    let envelope: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(work.path("approval.json")).unwrap())
            .unwrap();
    assert!(
        envelope["payload"].is_string() && envelope["signatures"].is_array(),
        "{envelope}"
    );
}

/// Approving the same call for the session twice keeps one grant, renewed.
#[test]
fn the_same_session_approval_twice_is_one_grant() {
    let server = LevServer::start("grant-twice");
    let client = server.client();
    let gate = |request_id: &str| lev_protocol::api::GateRequest {
        session_id: "s-1".into(),
        conversation_id: "c-1".into(),
        turn_id: "t-1".into(),
        request_id: request_id.into(),
        caller: "alice".into(),
        tool_name: "shell".into(),
        args_json: r#"{"argv":["ls"]}"#.into(),
        sandbox_mode: "read-only".into(),
        required_capabilities: vec!["proc-exec".into()],
        timeout_s: None,
        route: None,
        reason: None,
    };
    let ids: Vec<String> = ["call-1", "call-2"]
        .iter()
        .map(
            |r| match crate::client_env::block_on(client.gate(&gate(r))).unwrap() {
                lev_protocol::api::GateResponse::Ask { interaction_id } => interaction_id,
                other => panic!("expected an ask, found {other:?}"),
            },
        )
        .collect();
    for id in &ids {
        let run = server.lev(&["respond", id, "--approve", "--scope", "session"]);
        assert_code(&run, 0);
    }
    let grants = server.lev(&["grants", "--json"]).json();
    assert_eq!(grants.as_array().unwrap().len(), 1, "{grants:#}");
    assert_eq!(grants[0]["interaction_id"], ids[1].as_str(), "{grants:#}");
    let audit = server.lev(&["audit", "--json"]).stdout;
    assert!(audit.contains("grant.renewed"), "{audit}");

    // After an edit, the grant covers calls like the edited one, not any
    // call of shell.
    let mut bob = gate("call-3");
    bob.caller = "bob".into();
    let id = match crate::client_env::block_on(client.gate(&bob)).unwrap() {
        lev_protocol::api::GateResponse::Ask { interaction_id } => interaction_id,
        other => panic!("expected an ask, found {other:?}"),
    };
    let run = server.lev(&[
        "respond",
        &id,
        "--approve",
        "--scope",
        "session",
        "--edit-args",
        r#"{"argv":["ls","-l"]}"#,
    ]);
    assert_code(&run, 0);
    let grants = server.lev(&["grants", "--json"]).json();
    let grant = grants
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["caller"] == "bob")
        .unwrap();
    assert_eq!(
        grant["grant_args"],
        serde_json::json!({"/argv/0": "^ls$", "/argv/1": "^\\-l$"}),
        "{grant:#}"
    );
}
