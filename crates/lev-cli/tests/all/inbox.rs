//! `lev ls`, `lev show` and `lev respond` in every form, against a real server.

use lev_protocol::{ApprovalScope, InteractionStatus};

use crate::client_env::{LevServer, assert_code, block_on, choice, lev_env, shell, text};

#[test]
fn ls_and_show_list_and_detail_pending_questions() {
    let server = LevServer::start("ls");
    let run = server.lev(&["ls"]);
    assert_code(&run, 0);
    assert_eq!(run.stdout.trim(), "nothing pending");
    assert_eq!(server.lev(&["ls", "--json"]).json(), serde_json::json!([]));

    let a = server.create("s-a", text("Which branch?"));
    let b = server.create("s-b", shell(r#"["git","push"]"#));
    let c = server.create("s-b", choice("Which db?", &["SQLite", "PostgreSQL"]));

    let run = server.lev(&["ls"]);
    assert_code(&run, 0);
    let lines: Vec<&str> = run.stdout.lines().collect();
    assert!(lines[0].starts_with("ID"), "{}", run.stdout);
    assert_eq!(lines.len(), 4, "{}", run.stdout);
    // Newest first.
    assert!(
        lines[1].starts_with(c.id()) && lines[3].starts_with(a.id()),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout.contains(r#"shell {"argv":["git","push"]}"#),
        "{}",
        run.stdout
    );
    assert!(run.stdout.contains("Which db? [SQLite | PostgreSQL]"));

    let json = server.lev(&["ls", "--session", "s-b", "--json"]).json();
    let ids: Vec<&str> = json
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["request"]["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, [c.id(), b.id()]);

    let run = server.lev(&["show", b.id()]);
    assert_code(&run, 0);
    for want in [
        "tool_approval",
        "pending",
        "shell",
        "workspace-write",
        "proc-exec",
        "\"git\"",
        "--approve",
    ] {
        assert!(run.stdout.contains(want), "{want} missing:\n{}", run.stdout);
    }
    let run = server.lev(&["show", c.id()]);
    assert!(run.stdout.contains("[1] SQLite") && run.stdout.contains("[2] PostgreSQL"));
    let json = server.lev(&["show", a.id(), "--json"]).json();
    assert_eq!(json["request"]["kind"]["prompt"], "Which branch?");
    assert_eq!(json["response"], serde_json::Value::Null);

    // Answered ones leave the default listing, and --all shows them.
    assert_code(&server.lev(&["respond", a.id(), "--text", "main"]), 0);
    let run = server.lev(&["ls"]);
    assert!(!run.stdout.contains(a.id()));
    let run = server.lev(&["ls", "--all"]);
    assert!(run.stdout.contains("STATUS") && run.stdout.contains(a.id()));
    assert!(run.stdout.contains("answered"));
    let run = server.lev(&["ls", "--status", "answered", "--json"]);
    assert_eq!(run.json().as_array().unwrap().len(), 1);

    let run = server.lev(&["show", "ir_nope"]);
    assert_code(&run, 1);
    assert!(
        run.stderr.starts_with("lev: show ir_nope: "),
        "{}",
        run.stderr
    );
    assert!(run.stderr.contains("404"), "{}", run.stderr);
}

#[test]
fn respond_in_every_form() {
    let server = LevServer::start("respond");
    let client = server.client();
    let get = |id: &str| block_on(client.get_interaction(id)).unwrap();

    // --text with --attach and an @path in the text.
    let q = server.create("r", text("Send the notes"));
    let notes = server.dir.write("notes.md", "# Notes\n- one\n");
    let log = server.dir.write("build.log", "ok\n");
    let at = format!("see @{} please", notes.display());
    let run = server.lev(&[
        "respond",
        q.id(),
        "--text",
        &at,
        "--attach",
        log.to_str().unwrap(),
    ]);
    assert_code(&run, 0);
    assert!(
        run.stdout.starts_with(&format!("answered {}", q.id())),
        "{}",
        run.stdout
    );
    let view = get(q.id());
    let response = view.response.unwrap();
    assert_eq!(response.value.as_deref(), Some(at.as_str()));
    let names: Vec<&str> = response.parts.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["notes.md", "build.log"]);
    assert_eq!(response.parts[0].media_type, "text/markdown");
    assert_eq!(response.parts[0].size, 14);
    let blob = block_on(client.blob(&response.parts[0].sha256)).unwrap();
    assert_eq!(blob.bytes, b"# Notes\n- one\n");

    // An @word that names no file stays text; one with a / must be a file.
    let q = server.create("r", text("who?"));
    assert_code(&server.lev(&["respond", q.id(), "--text", "ask @alice"]), 0);
    assert!(get(q.id()).response.unwrap().parts.is_empty());
    let q = server.create("r", text("file?"));
    let run = server.lev(&["respond", q.id(), "--text", "@/no/such/file.txt"]);
    assert_code(&run, 1);
    assert!(
        run.stderr
            .contains("expected @/no/such/file.txt to name a file"),
        "{}",
        run.stderr
    );
    assert_eq!(get(q.id()).request.status, InteractionStatus::Pending);

    // --choice: one numbering, from 1, in `lev show`, `--choice` and the
    // summary; the wire's index stays 0-based.
    let q = server.create("r", choice("db?", &["SQLite", "PostgreSQL"]));
    let shown = server.lev(&["show", q.id()]);
    assert!(
        shown.stdout.contains("[1] SQLite") && shown.stdout.contains("[2] PostgreSQL"),
        "{}",
        shown.stdout
    );
    let run = server.lev(&["respond", q.id(), "--choice", "0"]);
    assert_code(&run, 2);
    let run = server.lev(&["respond", q.id(), "--choice", "2"]);
    assert_code(&run, 0);
    assert!(
        run.stdout.contains("choice 2: PostgreSQL"),
        "{}",
        run.stdout
    );
    assert_eq!(get(q.id()).response.unwrap().choice_index, Some(1));
    let shown = server.lev(&["show", q.id()]);
    assert!(
        shown.stdout.contains("choice [2] PostgreSQL"),
        "{}",
        shown.stdout
    );

    // --approve with scope, edited args (inline and @FILE), injected context, reason.
    let q = server.create("r", shell(r#"["ls"]"#));
    let run = server.lev(&[
        "respond",
        q.id(),
        "--approve",
        "--scope",
        "session",
        "--edit-args",
        r#"{"argv":["ls","-la"]}"#,
        "--inject",
        "the repo is read-only",
        "--reason",
        "looks fine",
    ]);
    assert_code(&run, 0);
    assert!(
        run.stdout.contains("approved (session), args edited"),
        "{}",
        run.stdout
    );
    assert!(run.stdout.contains("(signed)"));
    let view = get(q.id());
    assert!(view.approval.is_some());
    let r = view.response.unwrap();
    assert_eq!(r.approved, Some(true));
    assert_eq!(r.scope, Some(ApprovalScope::Session));
    assert_eq!(
        r.modified_args_json.as_deref(),
        Some(r#"{"argv":["ls","-la"]}"#)
    );
    assert_eq!(r.injected_context.as_deref(), Some("the repo is read-only"));
    assert_eq!(r.reason.as_deref(), Some("looks fine"));

    let q = server.create("r", shell(r#"["ls"]"#));
    let args_file = server.dir.write("args.json", r#"{"argv":["ls","-1"]}"#);
    let edit = format!("@{}", args_file.display());
    assert_code(
        &server.lev(&["respond", q.id(), "--approve", "--edit-args", &edit]),
        0,
    );
    let r = get(q.id()).response.unwrap();
    assert_eq!(
        r.modified_args_json.as_deref(),
        Some(r#"{"argv":["ls","-1"]}"#)
    );
    assert_eq!(r.scope, Some(ApprovalScope::Once));

    let q = server.create("r", shell(r#"["ls"]"#));
    let run = server.lev(&["respond", q.id(), "--approve", "--edit-args", "{not json"]);
    assert_code(&run, 1);
    assert!(
        run.stderr
            .contains("--edit-args: expected JSON text, found"),
        "{}",
        run.stderr
    );

    // --deny, plain and with feedback; blank feedback is the plain deny.
    assert_code(&server.lev(&["respond", q.id(), "--deny"]), 0);
    let r = get(q.id()).response.unwrap();
    assert_eq!((r.approved, r.feedback.as_deref()), (Some(false), None));
    let q = server.create("r", shell(r#"["ls"]"#));
    let run = server.lev(&[
        "respond",
        q.id(),
        "--deny",
        "--feedback",
        "  use git status  ",
    ]);
    assert_code(&run, 0);
    assert!(
        run.stdout.contains("denied: use git status"),
        "{}",
        run.stdout
    );
    assert_eq!(
        get(q.id()).response.unwrap().feedback.as_deref(),
        Some("use git status")
    );
    let q = server.create("r", shell(r#"["ls"]"#));
    assert_code(
        &server.lev(&["respond", q.id(), "--deny", "--feedback", "   "]),
        0,
    );
    assert_eq!(get(q.id()).response.unwrap().deny_feedback(), None);

    // The first answer won: the second is refused, naming the winner.
    let run = server.lev(&["respond", q.id(), "--approve"]);
    assert_code(&run, 1);
    assert!(
        run.stderr
            .contains("already answered, the first answer won: denied"),
        "{}",
        run.stderr
    );

    // --json prints the stored answer.
    let q = server.create("r", text("json?"));
    let json = server
        .lev(&["respond", q.id(), "--text", "yes", "--json"])
        .json();
    assert_eq!(json["response"]["value"], "yes");

    // An answer that does not fit the question is refused before it is
    // sent, saying what fits (more in newcomer.rs).
    let q = server.create("r", text("a question"));
    let run = server.lev(&["respond", q.id(), "--approve"]);
    assert_code(&run, 2);
    assert!(run.stderr.contains("--text TEXT"), "{}", run.stderr);
}

#[test]
fn respond_usage_errors_exit_2() {
    for args in [
        &["respond", "ir_x"][..],
        &["respond", "ir_x", "--feedback", "x", "--approve"],
        &["respond", "ir_x", "--text", "a", "--approve"],
        &["respond", "ir_x", "--approve", "--deny"],
        &["respond", "ir_x", "--attach", "f", "--choice", "1"],
        &["respond", "ir_x", "--deny", "--scope", "session"],
        &["respond", "ir_x", "--approve", "--scope", "forever"],
    ] {
        let run = lev_env(args, &[("LEV_TOKEN", "x")], b"");
        assert_eq!(run.code, 2, "{args:?}: {}", run.stderr);
    }
}

#[test]
fn token_from_the_data_dir_and_connection_errors() {
    let server = LevServer::start("token-file");
    let data_dir = server.data_dir();
    // No LEV_TOKEN: the admin.token of --data-dir, or of LEV_DATA_DIR.
    let run = lev_env(
        &[
            "ls",
            "--url",
            &server.url,
            "--data-dir",
            data_dir.to_str().unwrap(),
        ],
        &[],
        b"",
    );
    assert_code(&run, 0);
    let run = lev_env(
        &["ls"],
        &[
            ("LEV_URL", &server.url),
            ("LEV_DATA_DIR", data_dir.to_str().unwrap()),
        ],
        b"",
    );
    assert_code(&run, 0);
    // Nor in $XDG_DATA_HOME/lev when that is where it is.
    let xdg = server.dir.path("xdg");
    std::fs::create_dir_all(xdg.join("lev")).unwrap();
    std::fs::copy(data_dir.join("admin.token"), xdg.join("lev/admin.token")).unwrap();
    let run = lev_env(
        &["ls"],
        &[
            ("LEV_URL", &server.url),
            ("XDG_DATA_HOME", xdg.to_str().unwrap()),
        ],
        b"",
    );
    assert_code(&run, 0);

    // No token anywhere.
    let run = lev_env(&["ls", "--url", &server.url], &[], b"");
    assert_code(&run, 1);
    assert!(run.stderr.starts_with("lev: no token: "), "{}", run.stderr);
    assert!(run.stderr.contains("\nhint: "), "{}", run.stderr);

    // A bad token, a bad URL, nobody listening.
    let run = lev_env(
        &["ls"],
        &[("LEV_URL", &server.url), ("LEV_TOKEN", "lev_wrong")],
        b"",
    );
    assert_code(&run, 1);
    assert!(run.stderr.contains("401"), "{}", run.stderr);
    let run = lev_env(&["ls", "--url", "localhost:7420", "--token", "x"], &[], b"");
    assert_code(&run, 1);
    assert!(
        run.stderr.contains("expected a URL starting with http://"),
        "{}",
        run.stderr
    );
    let run = lev_env(
        &["ls", "--url", "http://127.0.0.1:9", "--token", "x"],
        &[],
        b"",
    );
    assert_code(&run, 1);
    assert!(
        run.stderr
            .contains("could not connect to the lev server at http://127.0.0.1:9"),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr.contains("hint: is `lev serve` running?"),
        "{}",
        run.stderr
    );
}
