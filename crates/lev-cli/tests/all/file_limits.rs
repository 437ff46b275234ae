//! Every file lev reads from a path it was given (and standard input where
//! it reads it whole) is read under a limit for its kind: `/dev/zero`, a FIFO
//! or a huge sparse file is refused with an error naming the file, the limit
//! and what was found, in a process whose memory stays small. Each run is
//! under `ulimit -v` (1.5 GiB of address space): reading `/dev/zero` whole
//! would fail the allocation long before the limit's error.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::client_env::LevServer;
use crate::support::{Run, Scratch};

/// Address space a run may have, in KiB.
const ADDRESS_SPACE_KIB: u64 = 1536 * 1024;

/// `lev ARGS` under the memory cap, with `stdin` from that file (else
/// nothing), `env` added and no LEV_* variables of the caller.
fn capped(args: &[&str], stdin: Option<&Path>, env: &[(&str, &str)], home: &Path) -> Run {
    let mut command = Command::new("sh");
    command
        .arg("-c")
        .arg(format!(
            "ulimit -v {ADDRESS_SPACE_KIB} && exec \"$0\" \"$@\""
        ))
        .arg(env!("CARGO_BIN_EXE_lev"))
        .args(args)
        .env("HOME", home)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for var in [
        "LEV_URL",
        "LEV_TOKEN",
        "LEV_DATA_DIR",
        "LEV_PERSON_KEY",
        "XDG_DATA_HOME",
        "XDG_CONFIG_HOME",
    ] {
        command.env_remove(var);
    }
    command.envs(env.iter().copied());
    command.stdin(match stdin {
        Some(path) => Stdio::from(std::fs::File::open(path).unwrap()),
        None => Stdio::null(),
    });
    let out = command.output().unwrap();
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// A sparse file of `len` bytes (no disk used).
fn sparse(dir: &Scratch, name: &str, len: u64) -> PathBuf {
    let path = dir.path(name);
    std::fs::File::create(&path).unwrap().set_len(len).unwrap();
    path
}

/// The run failed with `code`, naming `file` and the limit, and not for
/// want of memory.
fn refused(what: &str, run: &Run, code: i32, file: &str, limit: &str) {
    assert_eq!(run.code, code, "{what}: {run:?}");
    assert!(
        run.stderr.contains(file) && run.stderr.contains(&format!("expected at most {limit}")),
        "{what}: expected an error naming {file} and {limit}, found: {}",
        run.stderr
    );
    assert!(
        !run.stderr.contains("memory allocation"),
        "{what}: {}",
        run.stderr
    );
}

const GIB: u64 = 1024 * 1024 * 1024;

/// One refused read: the command, its stdin, and what the error must say.
struct Case {
    what: &'static str,
    args: Vec<String>,
    stdin: Option<&'static str>,
    code: i32,
    file: String,
    limit: &'static str,
}

fn case(
    what: &'static str,
    args: &[&str],
    stdin: Option<&'static str>,
    code: i32,
    file: &str,
    limit: &'static str,
) -> Case {
    Case {
        what,
        args: args.iter().map(|a| (*a).to_owned()).collect(),
        stdin,
        code,
        file: file.to_owned(),
        limit,
    }
}

#[test]
fn client_commands_refuse_files_past_their_limit() {
    let dir = Scratch::new("file-limits");
    let home = dir.path("home");
    std::fs::create_dir_all(&home).unwrap();
    let big = sparse(&dir, "big.bin", 3 * GIB);
    let big = big.to_str().unwrap();
    let zero = "/dev/zero";
    let key = lev_approval::SigningKeyPair::from_seed(&[7; 32]).public_base64url();
    let args_ok = dir.write("args.json", "{}");
    let args_ok = args_ok.to_str().unwrap();
    let env_ok = dir.write("envelope.json", "{}");
    let env_ok = env_ok.to_str().unwrap();
    let verify = |envelope: &str, keys: &str, args_file: &str, more: &[&str]| -> Vec<String> {
        let mut v = vec![
            "verify",
            envelope,
            "--key",
            keys,
            "--request-id",
            "r",
            "--tool",
            "t",
            "--args-file",
            args_file,
        ];
        v.extend_from_slice(more);
        v.into_iter().map(str::to_owned).collect()
    };
    let at_nothing = ["--url", "http://127.0.0.1:9", "--token", "x"];
    let with = |args: &[&str]| -> Vec<String> {
        args.iter()
            .chain(at_nothing.iter())
            .map(|a| (*a).to_owned())
            .collect()
    };
    let at_zero = format!("@{zero}");
    let see_big = format!("see @{big}");
    let mut cases = vec![
        // lev verify: the envelope, the args, the keys, from a device, a
        // sparse file or standard input.
        Case {
            args: verify(zero, &key, args_ok, &[]),
            ..case("verify envelope /dev/zero", &[], None, 1, zero, "4 MiB")
        },
        Case {
            args: verify(big, &key, args_ok, &[]),
            ..case("verify envelope sparse", &[], None, 1, big, "4 MiB")
        },
        Case {
            args: verify(env_ok, &key, zero, &[]),
            ..case("verify args /dev/zero", &[], None, 1, zero, "1 MiB")
        },
        Case {
            args: verify("-", &key, args_ok, &[]),
            ..case(
                "verify envelope stdin",
                &[],
                Some(zero),
                1,
                "standard input",
                "4 MiB",
            )
        },
        Case {
            args: verify(env_ok, &key, "-", &[]),
            ..case(
                "verify args stdin",
                &[],
                Some(zero),
                1,
                "standard input",
                "1 MiB",
            )
        },
        Case {
            args: verify(
                env_ok,
                &key,
                args_ok,
                &["--require-votes", "1", "--people-keys", zero],
            ),
            ..case("verify --people-keys", &[], None, 1, zero, "1 MiB")
        },
        Case {
            args: verify(env_ok, big, args_ok, &[]),
            ..case("verify --key sparse", &[], None, 1, big, "1 MiB")
        },
        // A policy to check.
        case(
            "policy check",
            &["policy", "check", zero],
            None,
            1,
            zero,
            "1 MiB",
        ),
    ];
    // A hook event on standard input: a blocking error (exit 2).
    for agent in ["claude-code", "codex"] {
        cases.push(Case {
            args: with(&["hook", agent]),
            ..case("hook stdin", &[], Some(zero), 2, "standard input", "1 MiB")
        });
    }
    cases.extend([
        // The CA to trust.
        case(
            "--ca-cert",
            &[
                "ls",
                "--url",
                "https://127.0.0.1:9",
                "--token",
                "x",
                "--ca-cert",
                zero,
            ],
            None,
            1,
            zero,
            "4 MiB",
        ),
        // A person's signing key.
        Case {
            args: with(&["key", "init", "--person-key", zero]),
            ..case("key init --person-key", &[], None, 1, zero, "64 KiB")
        },
        // An edit of the args, from a file.
        Case {
            args: with(&["respond", "ir_x", "--approve", "--edit-args", &at_zero]),
            ..case("respond --edit-args @file", &[], None, 1, zero, "1 MiB")
        },
        // Attachments past one part's limit: --attach, and @path in the text.
        Case {
            args: with(&["respond", "ir_x", "--text", "logs", "--attach", big]),
            ..case("respond --attach sparse", &[], None, 1, big, "10 MiB")
        },
        Case {
            args: with(&["respond", "ir_x", "--text", &see_big]),
            ..case("respond --text @path sparse", &[], None, 1, big, "10 MiB")
        },
        // A webhook's secret.
        Case {
            args: with(&[
                "webhook",
                "add",
                "http://127.0.0.1:9/",
                "--secret-file",
                zero,
            ]),
            ..case("webhook add --secret-file", &[], None, 1, zero, "64 KiB")
        },
    ]);
    for c in &cases {
        let args: Vec<&str> = c.args.iter().map(String::as_str).collect();
        let run = capped(&args, c.stdin.map(Path::new), &[], &home);
        refused(c.what, &run, c.code, &c.file, c.limit);
    }

    // The local admin token, when no token is given.
    let data = dir.path("data");
    std::fs::create_dir_all(&data).unwrap();
    sparse(&dir, "data/admin.token", 3 * GIB);
    let run = capped(
        &[
            "ls",
            "--url",
            "http://127.0.0.1:9",
            "--data-dir",
            data.to_str().unwrap(),
        ],
        None,
        &[],
        &home,
    );
    refused("admin.token", &run, 1, "admin.token", "64 KiB");

    // Codex's config.toml, which install-hooks edits.
    let codex = dir.path("codex");
    std::fs::create_dir_all(&codex).unwrap();
    sparse(&dir, "codex/config.toml", 3 * GIB);
    let run = capped(
        &[
            "codex",
            "install-hooks",
            "--codex-home",
            codex.to_str().unwrap(),
        ],
        None,
        &[],
        &home,
    );
    refused("codex config.toml", &run, 1, "config.toml", "1 MiB");
}

#[test]
fn audit_head_past_its_limit_is_refused() {
    let server = LevServer::start("file-limits-audit");
    let home = server.dir.path("home");
    std::fs::create_dir_all(&home).unwrap();
    let run = capped(
        &[
            "audit",
            "--verify",
            "--head",
            "/dev/zero",
            "--url",
            &server.url,
            "--token",
            &server.admin,
        ],
        None,
        &[],
        &home,
    );
    refused("audit --head", &run, 1, "/dev/zero", "64 KiB");
}

#[test]
fn the_server_refuses_files_past_their_limit_at_start() {
    let dir = Scratch::new("file-limits-serve");
    let home = dir.path("home");
    std::fs::create_dir_all(&home).unwrap();
    let big = sparse(&dir, "big.pem", 3 * GIB);
    let big = big.to_str().unwrap();
    let data = dir.path("data");
    let data = data.to_str().unwrap();
    let cases: [(&str, Vec<&str>, &str, &str); 5] = [
        (
            "--policy",
            vec!["--policy", "/dev/zero"],
            "/dev/zero",
            "1 MiB",
        ),
        (
            "--key-encryption-key-file",
            vec!["--key-encryption-key-file", "/dev/zero"],
            "/dev/zero",
            "64 KiB",
        ),
        (
            "--slack-config",
            vec!["--slack-config", "/dev/zero"],
            "/dev/zero",
            "1 MiB",
        ),
        (
            "--tls-cert",
            vec!["--tls-cert", "/dev/zero", "--tls-key", "/dev/zero"],
            "/dev/zero",
            "4 MiB",
        ),
        (
            "--tls-cert sparse",
            vec!["--tls-cert", big, "--tls-key", big],
            big,
            "4 MiB",
        ),
    ];
    for (what, flags, file, limit) in cases {
        let mut args = vec!["serve", "--listen", "127.0.0.1:0", "--data-dir", data];
        args.extend(flags);
        let run = capped(&args, None, &[], &home);
        refused(what, &run, 1, file, limit);
    }
}
