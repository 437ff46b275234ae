//! `lev run`, `lev grants`, `lev keys`, `lev policy` against a real
//! `lev serve`: the issue's "done when" as a process test.

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::spawned::Spawned;
use crate::support::{Run, Scratch, lev};

/// `lev serve` on port 0 with its own data dir (and policy), killed when dropped.
struct Server {
    _server: Spawned,
    url: String,
    admin: String,
    dir: Scratch,
}

impl Server {
    fn start(name: &str, policy: Option<&str>) -> Self {
        Self::start_with(name, policy, &[])
    }

    /// `lev serve` with `extra` arguments (such as `--tls-cert`).
    fn start_with(name: &str, policy: Option<&str>, extra: &[&std::ffi::OsStr]) -> Self {
        let dir = Scratch::new(name);
        std::fs::create_dir_all(dir.path("data")).unwrap();
        if let Some(policy) = policy {
            std::fs::write(dir.path("data").join("policy.toml"), policy).unwrap();
        }
        let server = Spawned::builder(env!("CARGO_BIN_EXE_lev"), dir.path("data"))
            .args(extra)
            .start()
            .unwrap();
        let url = server.url().to_owned();
        let admin = std::fs::read_to_string(dir.path("data").join("admin.token"))
            .unwrap()
            .trim()
            .to_owned();
        Self {
            _server: server,
            url,
            admin,
            dir,
        }
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_lev"));
        c.args(args)
            .env("LEV_URL", &self.url)
            .env("LEV_TOKEN", &self.admin)
            .env("HOME", self.dir.path("home"))
            .env_remove("LEV_DATA_DIR")
            .env_remove("NO_COLOR");
        c
    }

    /// `lev ARGS` as the admin, to completion.
    fn lev(&self, args: &[&str]) -> Run {
        let out = self.command(args).stdin(Stdio::null()).output().unwrap();
        Run {
            code: out.status.code().unwrap(),
            stdout: String::from_utf8(out.stdout).unwrap(),
            stderr: String::from_utf8(out.stderr).unwrap(),
        }
    }

    /// Start `lev run ARGS` in `cwd`; its stdout and stderr are collected.
    fn spawn_run(&self, args: &[&str], cwd: &std::path::Path, stdin: &[u8]) -> Running {
        let mut all = vec!["run"];
        all.extend_from_slice(args);
        let mut child = self
            .command(&all)
            .current_dir(cwd)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut input = child.stdin.take().unwrap();
        input.write_all(stdin).unwrap();
        drop(input);
        let mut out = child.stdout.take().unwrap();
        let stdout = std::thread::spawn(move || {
            let mut s = String::new();
            out.read_to_string(&mut s).unwrap();
            s
        });
        let stderr = lines_of(child.stderr.take().unwrap());
        Running {
            child,
            stdout: Some(stdout),
            stderr,
            seen: Vec::new(),
        }
    }

    /// Every interaction, newest first (a JSON array).
    fn interactions(&self) -> serde_json::Value {
        let r = self.lev(&["ls", "--all", "--json"]);
        assert_eq!(r.code, 0, "{}", r.stderr);
        r.json()
    }
}

fn lines_of(stream: impl std::io::Read + Send + 'static) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stream).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    rx
}

struct Running {
    child: Child,
    stdout: Option<std::thread::JoinHandle<String>>,
    stderr: mpsc::Receiver<String>,
    seen: Vec<String>,
}

impl Running {
    /// The interaction `lev run` waits on, from its line on stderr.
    fn interaction_id(&mut self) -> String {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = self
                .stderr
                .recv_timeout(left)
                .unwrap_or_else(|_| panic!("lev run did not wait; stderr: {:?}", self.seen));
            self.seen.push(line.clone());
            if let Some(rest) = line.split("waiting for approval of ").nth(1) {
                return rest.split_whitespace().next().unwrap().to_owned();
            }
        }
    }

    /// Wait for the exit: code, stdout, stderr.
    fn finish(mut self) -> Run {
        let deadline = Instant::now() + Duration::from_secs(30);
        let status = loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                break status;
            }
            assert!(Instant::now() < deadline, "lev run did not finish");
            std::thread::sleep(Duration::from_millis(20));
        };
        let stdout = self.stdout.take().unwrap().join().unwrap();
        while let Ok(line) = self.stderr.recv_timeout(Duration::from_secs(5)) {
            self.seen.push(line);
        }
        Run {
            code: status.code().unwrap(),
            stdout,
            stderr: self.seen.join("\n"),
        }
    }

    fn still_running(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }
}

fn work_dir(s: &Server) -> PathBuf {
    let dir = s.dir.path("work");
    std::fs::create_dir_all(&dir).unwrap();
    dir.canonicalize().unwrap()
}

#[test]
fn lev_run_waits_and_runs_the_edited_command() {
    let s = Server::start("run-edit", None);
    let cwd = work_dir(&s);
    let mut run = s.spawn_run(&["--session", "shell-1", "--", "echo", "hello"], &cwd, b"");
    let id = run.interaction_id();
    std::thread::sleep(Duration::from_millis(300));
    assert!(run.still_running(), "lev run waits for a decision");
    // The gate's call is exactly the compact {"argv","cwd"}.
    let listed = s.interactions();
    let kind = &listed[0]["request"]["kind"];
    let cwd_text = cwd.to_str().unwrap();
    assert_eq!(
        kind["args_json"],
        serde_json::json!({"argv": ["echo", "hello"], "cwd": cwd_text}).to_string()
    );
    assert_eq!(kind["tool_name"], "shell");
    assert_eq!(kind["sandbox_mode"], "workspace-write");
    assert_eq!(listed[0]["request"]["session_id"], "shell-1");
    assert_eq!(listed[0]["request"]["conversation_id"], "shell-1");
    let edit = serde_json::json!({"argv": ["echo", "edited"], "cwd": cwd_text}).to_string();
    let r = s.lev(&["respond", &id, "--approve", "--edit-args", &edit]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let done = run.finish();
    assert_eq!(done.code, 0, "{}", done.stderr);
    assert_eq!(done.stdout, "edited\n", "stderr: {}", done.stderr);
    assert!(
        done.stderr.contains("edited the command"),
        "{}",
        done.stderr
    );
    // An edit without cwd runs where lev run was started.
    let mut run = s.spawn_run(&["--session", "shell-1", "--", "echo", "x"], &cwd, b"");
    let id = run.interaction_id();
    let r = s.lev(&[
        "respond",
        &id,
        "--approve",
        "--edit-args",
        r#"{"argv":["pwd"]}"#,
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let done = run.finish();
    assert_eq!(done.stdout.trim(), cwd_text, "{}", done.stderr);
}

#[test]
fn lev_run_denied_exits_126_with_the_feedback() {
    let s = Server::start("run-deny", None);
    let cwd = work_dir(&s);
    let mut run = s.spawn_run(&["--", "echo", "hello"], &cwd, b"");
    let id = run.interaction_id();
    let r = s.lev(&["respond", &id, "--deny", "--feedback", "use ls"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let done = run.finish();
    assert_eq!(done.code, 126, "{}", done.stderr);
    assert_eq!(done.stdout, "", "nothing ran");
    assert!(done.stderr.contains("Feedback: use ls"), "{}", done.stderr);
    // Nobody decides in time: 124, and the question is gone.
    let run = s.spawn_run(&["--timeout", "1", "--", "echo", "late"], &cwd, b"");
    let done = run.finish();
    assert_eq!(done.code, 124, "{}", done.stderr);
    assert_eq!(done.stdout, "");
}

#[test]
fn a_session_grant_stops_the_second_identical_run_from_asking() {
    let s = Server::start("run-grant", None);
    let cwd = work_dir(&s);
    // Both runs are children of this process: the same default session.
    let mut run = s.spawn_run(&["--", "echo", "hello"], &cwd, b"");
    let id = run.interaction_id();
    let r = s.lev(&["respond", &id, "--approve", "--scope", "session"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let done = run.finish();
    assert_eq!(
        (done.code, done.stdout.as_str()),
        (0, "hello\n"),
        "{}",
        done.stderr
    );
    let asked = s.interactions().as_array().unwrap().len();
    let run = s.spawn_run(&["--", "echo", "hello"], &cwd, b"");
    let done = run.finish();
    assert_eq!(
        (done.code, done.stdout.as_str()),
        (0, "hello\n"),
        "{}",
        done.stderr
    );
    assert!(!done.stderr.contains("waiting"), "{}", done.stderr);
    assert_eq!(
        s.interactions().as_array().unwrap().len(),
        asked,
        "nobody was asked"
    );
    // Another session asks again; revoking the grant makes this one ask too.
    let grants = s.lev(&["grants", "--json"]).json();
    let grant = grants[0]["id"].as_str().unwrap().to_owned();
    assert_eq!(grants[0]["scope"], "session");
    assert_eq!(grants[0]["tool_name"], "shell");
    assert_eq!(
        grants[0]["covered_capabilities"],
        serde_json::json!(["proc-exec"])
    );
    let listed = s.lev(&["grants"]);
    assert!(listed.stdout.contains(&grant), "{}", listed.stdout);
    let mut other = s.spawn_run(
        &["--session", "elsewhere", "--", "echo", "hello"],
        &cwd,
        b"",
    );
    let other_id = other.interaction_id();
    s.lev(&["respond", &other_id, "--deny"]);
    assert_eq!(other.finish().code, 126);
    let r = s.lev(&["grants", "revoke", &grant]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(s.lev(&["grants", "revoke", &grant]).code, 1);
    let mut run = s.spawn_run(&["--", "echo", "hello"], &cwd, b"");
    let id = run.interaction_id();
    s.lev(&["respond", &id, "--deny"]);
    assert_eq!(run.finish().code, 126);
}

const ALLOW_ECHO_DENY_RM: &str = r#"
[sandbox_modes]
"workspace-write" = ["fs-read", "fs-write", "proc-exec"]

[[rule]]
tool = "shell"
args = { "/argv/0" = "^rm$" }
decision = "deny"
reason = "no rm from agents"
"#;

#[test]
fn lev_run_passes_stdio_and_the_exit_code_through() {
    let s = Server::start("run-policy", Some(ALLOW_ECHO_DENY_RM));
    let cwd = work_dir(&s);
    // Allowed by the policy (nothing missing): runs at once.
    let done = s
        .spawn_run(&["--", "cat"], &cwd, b"piped through\n")
        .finish();
    assert_eq!(done.code, 0, "{}", done.stderr);
    assert_eq!(done.stdout, "piped through\n");
    let done = s
        .spawn_run(
            &["--", "sh", "-c", "echo out; echo err >&2; exit 7"],
            &cwd,
            b"",
        )
        .finish();
    assert_eq!(done.code, 7, "{}", done.stderr);
    assert_eq!(done.stdout, "out\n");
    assert!(done.stderr.contains("err"), "{}", done.stderr);
    // Denied by a rule: 126 and the reason.
    let done = s.spawn_run(&["--", "rm", "-rf", "x"], &cwd, b"").finish();
    assert_eq!(done.code, 126, "{}", done.stderr);
    assert!(done.stderr.contains("no rm from agents"), "{}", done.stderr);
    // A program that does not exist: 127.
    let done = s
        .spawn_run(&["--", "no-such-program-xyz"], &cwd, b"")
        .finish();
    assert_eq!(done.code, 127, "{}", done.stderr);
    // Every allow is in the audit log with what decided it.
    let audit = s.lev(&["audit", "--json"]);
    assert_eq!(audit.code, 0, "{}", audit.stderr);
    assert!(audit.stdout.contains("gate.allowed"), "{}", audit.stdout);
    assert!(audit.stdout.contains("gate.denied"), "{}", audit.stdout);
}

#[test]
fn lev_policy_prints_the_example_and_checks_files() {
    let scratch = Scratch::new("policy");
    let example = lev(["policy", "example"]);
    assert_eq!(example.code, 0, "{}", example.stderr);
    assert!(example.stdout.contains("[[rule]]"));
    let file = scratch.write("example.toml", &example.stdout);
    let check = lev([
        std::ffi::OsStr::new("policy"),
        "check".as_ref(),
        file.as_os_str(),
    ]);
    assert_eq!(check.code, 0, "{}", check.stderr);
    assert!(check.stdout.contains("ok"), "{}", check.stdout);
    let bad = scratch.write(
        "bad.toml",
        "[[rule]]\ntool = \"x\"\n\ndecision = \"perhaps\"\n",
    );
    let check = lev([
        std::ffi::OsStr::new("policy"),
        "check".as_ref(),
        bad.as_os_str(),
    ]);
    assert_eq!(check.code, 1);
    assert!(check.stderr.contains("line 4"), "{}", check.stderr);
    // lev serve refuses to start with it, naming the line.
    let out = Command::new(env!("CARGO_BIN_EXE_lev"))
        .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(scratch.path("data"))
        .arg("--policy")
        .arg(&bad)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(
        stderr.contains("line 4") && stderr.contains("bad.toml"),
        "{stderr}"
    );
}

/// Issue 28: `env rm`, `sudo rm`, `exec rm`, `command rm`, `git  push` and
/// `git -C . push` pass deny rules over a command's words under `default =
/// "allow"`. `lev policy check` warns of each such rule on stderr, naming
/// its line (exit 0; `--strict` exits 1), and says nothing under `default =
/// "ask"`.
#[test]
fn lev_policy_check_warns_of_rules_that_wrappers_walk_around() {
    let scratch = Scratch::new("policy-wrappers");
    let check = |name: &str, text: &str, strict: bool| {
        let file = scratch.write(name, text);
        let mut args = vec![
            std::ffi::OsString::from("policy"),
            "check".into(),
            file.into_os_string(),
        ];
        if strict {
            args.push("--strict".into());
        }
        lev(args)
    };
    for (i, (tool, args, walked)) in [
        (
            "shell",
            r#"{ "/argv/0" = "^(.*/)?(rm|dd|mkfs)$" }"#,
            r#"["env","rm"]"#,
        ),
        (
            "shell",
            r#"{ "/argv/0" = "^(.*/)?git$", "/argv/1" = "^push$" }"#,
            r#"["git","-C",".","push"]"#,
        ),
        ("Bash", r#"{ "/command" = "git push" }"#, r#""git  push""#),
        ("Bash", r#"{ "/command" = "^rm " }"#, r#""env rm ""#),
    ]
    .into_iter()
    .enumerate()
    {
        let policy = format!(
            "default = \"allow\"\n\n[[rule]]\ntool = \"{tool}\"\nargs = {args}\n\
             decision = \"deny\"\nreason = \"no\"\n"
        );
        let run = check(&format!("allow-{i}.toml"), &policy, false);
        assert_eq!(run.code, 0, "{}", run.stderr);
        assert!(
            run.stderr
                .contains("warning: line 3: this deny rule is walked around"),
            "{args}: {}",
            run.stderr
        );
        assert!(run.stderr.contains(walked), "{args}: {}", run.stderr);
        assert!(
            run.stderr.contains(r#"set default = "ask""#),
            "{}",
            run.stderr
        );
        assert!(run.stdout.contains("ok"), "{}", run.stdout);
        let strict = check(&format!("allow-{i}.toml"), &policy, true);
        assert_eq!(strict.code, 1, "{}", strict.stderr);
        assert!(strict.stderr.contains("(--strict)"), "{}", strict.stderr);
        // Under default = "ask" a wrapped call asks a person: nothing to say.
        let asking = check(
            &format!("ask-{i}.toml"),
            &policy.replace("default = \"allow\"", "default = \"ask\""),
            true,
        );
        assert_eq!(asking.code, 0, "{args}: {}", asking.stderr);
        assert_eq!(asking.stderr, "", "{args}");
    }
}

/// Every policy the docs show (README, docs/, examples/policy.toml, `lev
/// policy example`) passes `lev policy check --strict`: none is walked
/// around by a wrapper, none lets `/bin/rm` slip past, each sets a default.
#[test]
fn every_policy_in_the_docs_passes_a_strict_check() {
    let scratch = Scratch::new("policy-docs");
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut docs = vec![root.join("README.md"), root.join("python/README.md")];
    let mut dirs = vec![root.join("docs")];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "md") {
                docs.push(path);
            }
        }
    }
    let mut policies = vec![(
        "examples/policy.toml".to_owned(),
        std::fs::read_to_string(root.join("examples/policy.toml")).unwrap(),
    )];
    policies.push((
        "lev policy example".into(),
        lev(["policy", "example"]).stdout,
    ));
    for doc in &docs {
        let Ok(text) = std::fs::read_to_string(doc) else {
            continue;
        };
        let mut rest = text.as_str();
        while let Some(start) = rest.find("```toml\n") {
            let body = &rest[start + 8..];
            let end = body.find("```").unwrap();
            if body[..end].contains("[[rule]]") {
                policies.push((doc.display().to_string(), body[..end].to_owned()));
            }
            rest = &body[end..];
        }
    }
    assert!(policies.len() >= 4, "{policies:?}");
    for (i, (from, text)) in policies.iter().enumerate() {
        let file = scratch.write(&format!("doc-{i}.toml"), text);
        let run = lev([
            std::ffi::OsStr::new("policy"),
            "check".as_ref(),
            file.as_os_str(),
            "--strict".as_ref(),
        ]);
        assert_eq!(run.code, 0, "{from}: {}\n{text}", run.stderr);
        assert_eq!(run.stderr, "", "{from}");
    }
}

#[test]
fn lev_keys_lists_rotates_and_removes() {
    let s = Server::start("keys", None);
    let listed = s.lev(&["keys"]);
    assert_eq!(listed.code, 0, "{}", listed.stderr);
    let first = listed.stdout.split_whitespace().next().unwrap().to_owned();
    assert!(listed.stdout.contains("signs"), "{}", listed.stdout);
    let rotated = s.lev(&["keys", "rotate"]);
    assert_eq!(rotated.code, 0, "{}", rotated.stderr);
    let jwks = s.lev(&["keys", "--json"]).json();
    let keys = jwks["keys"].as_array().unwrap();
    assert_eq!(keys.len(), 2);
    let active = keys[0]["kid"].as_str().unwrap().to_owned();
    assert_ne!(active, first);
    assert_eq!(keys[1]["kid"], first.as_str());
    let refused = s.lev(&["keys", "remove", &active]);
    assert_eq!(refused.code, 1);
    assert!(
        refused.stderr.contains("rotate first"),
        "{}",
        refused.stderr
    );
    let removed = s.lev(&["keys", "remove", &first]);
    assert_eq!(removed.code, 0, "{}", removed.stderr);
    assert_eq!(
        s.lev(&["keys", "--json"]).json()["keys"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
}

/// The SDK's gate helper against the real server: a replayed decision is
/// refused at the nonce, a decision under keys it does not trust is refused
/// at the signature, and a refusal carries the text for the model.
#[test]
fn the_sdk_gate_helper_refuses_replays_and_untrusted_keys() {
    use lev_client::gate::{GateError, GateOutcome, Gatekeeper, RefusalKind, ToolCall};
    let s = Server::start("sdk-gate", Some(ALLOW_ECHO_DENY_RM));
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let client = lev_client::Client::new(&s.url, Some(s.admin.clone())).unwrap();
        let gatekeeper = Gatekeeper::pinned(client.clone()).await.unwrap();
        let call = ToolCall {
            conversation_id: "c-1".into(),
            sandbox_mode: "workspace-write".into(),
            ..ToolCall::new("s-1", "call-1", "shell", r#"{"argv":["echo","hi"]}"#)
        };
        let GateOutcome::Run(approved) = gatekeeper.decide(&call).await.unwrap() else {
            panic!("the policy allows echo");
        };
        assert_eq!(approved.args_json(), r#"{"argv":["echo","hi"]}"#);
        assert_eq!(approved.verified().payload.approver, "policy");
        assert_eq!(approved.tool_result_text("hi\n"), "hi\n");
        // The same call again: the gate replays the same decision, whose
        // nonce is spent.
        let err = gatekeeper.decide(&call).await.unwrap_err();
        assert!(matches!(err, GateError::NonceSpent), "{err}");
        // Keys it does not trust: nothing runs.
        let stranger = lev_approval::SigningKeyPair::from_seed(&[7; 32]);
        let keys = lev_approval::TrustedKeys::parse(&stranger.public_base64url()).unwrap();
        let untrusting = Gatekeeper::new(client.clone(), keys);
        let other = ToolCall {
            request_id: "call-2".into(),
            ..call.clone()
        };
        let err = untrusting.decide(&other).await.unwrap_err();
        assert!(matches!(err, GateError::Unverified(_)), "{err}");
        // A rule's deny: the model reads why.
        let rm = ToolCall {
            request_id: "call-3".into(),
            args_json: r#"{"argv":["rm","x"]}"#.into(),
            ..call.clone()
        };
        let GateOutcome::Refused(refusal) = gatekeeper.decide(&rm).await.unwrap() else {
            panic!("the policy denies rm");
        };
        assert_eq!(refusal.kind, RefusalKind::Policy);
        assert!(
            refusal.text.contains("no rm from agents"),
            "{}",
            refusal.text
        );
    });
}

/// The TLS fixture shared with lev-server's tests: a self-signed certificate
/// for localhost and 127.0.0.1.
fn tls_fixture(name: &str) -> PathBuf {
    crate::support::repo_root()
        .join("crates/lev-server/tests/fixtures/tls")
        .join(name)
}

/// `lev serve --tls-cert/--tls-key`, reached over https:// by the real `lev`:
/// with `--ca-cert` (or `LEV_CA_CERT`) it works, without it the certificate
/// is refused with a message that says so.
#[test]
fn client_commands_speak_https_with_a_given_ca() {
    let cert = tls_fixture("cert.pem");
    let key = tls_fixture("key.pem");
    let s = Server::start_with(
        "tls-ls",
        Some(ALLOW_ECHO_DENY_RM),
        &[
            "--tls-cert".as_ref(),
            cert.as_os_str(),
            "--tls-key".as_ref(),
            key.as_os_str(),
        ],
    );
    assert!(s.url.starts_with("https://127.0.0.1:"), "{}", s.url);
    let ca = cert.to_str().unwrap();

    let r = s.lev(&["ls", "--url", &s.url, "--ca-cert", ca, "--json"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.json().is_array(), "{}", r.stdout);

    let r = s.lev(&["ls", "--url", &s.url]);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(
        r.stderr.contains("certificate") && r.stderr.contains("--ca-cert"),
        "expected a certificate error naming --ca-cert: {}",
        r.stderr
    );

    let r = s
        .command(&["ls", "--json"])
        .env("LEV_CA_CERT", &cert)
        .output()
        .unwrap();
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));

    // lev run over https, its keys pinned from a JWKS file: runs.
    let cwd = work_dir(&s);
    let jwks = s.lev(&["keys", "--json", "--ca-cert", ca]);
    assert_eq!(jwks.code, 0, "{}", jwks.stderr);
    let jwks_file = s.dir.write("server.jwks", &jwks.stdout);
    let run = s.spawn_run(
        &[
            "--ca-cert",
            ca,
            "--key",
            jwks_file.to_str().unwrap(),
            "--",
            "echo",
            "over tls",
        ],
        &cwd,
        b"",
    );
    let done = run.finish();
    assert_eq!(done.code, 0, "{}", done.stderr);
    assert_eq!(done.stdout, "over tls\n");
}

/// `lev run --key` (or `LEV_TRUSTED_KEYS`) pins the signing keys: an
/// approval signed by any other key is refused and nothing runs.
#[test]
fn lev_run_with_pinned_keys_refuses_an_approval_by_another_key() {
    let s = Server::start("run-pinned", Some(ALLOW_ECHO_DENY_RM));
    let cwd = work_dir(&s);
    let stranger = lev_approval::SigningKeyPair::from_seed(&[7; 32]);
    let wrong = s.dir.write(
        "wrong.jwks",
        serde_json::json!({ "keys": [stranger.public_jwk()] }).to_string(),
    );
    let marker = cwd.join("ran");
    let touch = ["--", "touch", marker.to_str().unwrap()];

    let mut args = vec!["--key", wrong.to_str().unwrap()];
    args.extend_from_slice(&touch);
    let done = s.spawn_run(&args, &cwd, b"").finish();
    assert_eq!(done.code, 1, "{}", done.stderr);
    assert!(
        done.stderr.contains("no signature by a trusted key"),
        "{}",
        done.stderr
    );
    assert!(!marker.exists(), "the command ran under an untrusted key");

    let mut all = vec!["run"];
    all.extend_from_slice(&touch);
    let out = s
        .command(&all)
        .current_dir(&cwd)
        .env("LEV_TRUSTED_KEYS", stranger.public_base64url())
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!marker.exists(), "the command ran under an untrusted key");

    // The server's own key, pinned: it runs.
    let jwks = s.lev(&["keys", "--json"]);
    assert_eq!(jwks.code, 0, "{}", jwks.stderr);
    let right = s.dir.write("right.jwks", &jwks.stdout);
    let mut args = vec!["--key", right.to_str().unwrap()];
    args.extend_from_slice(&touch);
    let done = s.spawn_run(&args, &cwd, b"").finish();
    assert_eq!(done.code, 0, "{}", done.stderr);
    assert!(marker.exists(), "the approved command ran");

    let help = s.lev(&["run", "--help"]);
    assert!(
        help.stdout
            .contains("the signing keys come from the server"),
        "{}",
        help.stdout
    );
}

/// A token never travels in clear beyond loopback: plain http:// to another
/// host is refused before anything is sent, unless --insecure-http.
#[test]
fn plain_http_beyond_loopback_is_refused() {
    let r = crate::support::lev([
        "ls",
        "--url",
        "http://lev.example.com:7420",
        "--token",
        "secret",
    ]);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(
        r.stderr.contains("not loopback") && r.stderr.contains("--insecure-http"),
        "{}",
        r.stderr
    );
}
