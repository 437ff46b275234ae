//! `lev verify` over lev-approval's committed vectors, and its ways of taking input.

use std::ffi::OsString;
use std::path::PathBuf;

use serde_json::{Value, json};

use super::support::{Run, Scratch, lev, lev_with_stdin, repo_root};

const REGENERATE: &str = "cargo run -p lev-approval --example gen_vectors";

fn vectors() -> Vec<(String, Value)> {
    let dir = repo_root().join("crates/lev-approval/tests/vectors");
    let mut out: Vec<(String, Value)> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| {
            panic!(
                "{}: {e}\nhint: regenerate with `{REGENERATE}`",
                dir.display()
            )
        })
        .map(|entry| entry.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .map(|p| {
            let name = p.file_stem().unwrap().to_string_lossy().into_owned();
            let text = std::fs::read_to_string(&p).unwrap();
            (name, serde_json::from_str(&text).unwrap())
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    assert!(
        out.len() >= 30,
        "found {} vectors in {}",
        out.len(),
        dir.display()
    );
    out
}

fn vector(name: &str) -> Value {
    vectors()
        .into_iter()
        .find(|(n, _)| n == name)
        .unwrap_or_else(|| panic!("no vector {name}"))
        .1
}

fn str_of<'a>(v: &'a Value, pointer: &str) -> &'a str {
    v.pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or_else(|| panic!("vector has no string at {pointer}"))
}

/// `lev verify` arguments for `vector`: the envelope and args written to
/// files, one key as text or several as a JWKS file.
fn verify_args(dir: &Scratch, vector: &Value) -> Vec<OsString> {
    let envelope = dir.write(
        "envelope.json",
        serde_json::to_vec_pretty(&vector["envelope"]).unwrap(),
    );
    let args_file = dir.write("args.json", str_of(vector, "/call/args_json"));
    let keys: Vec<&str> = vector["trusted_keys"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k.as_str().unwrap())
        .collect();
    let key = if let [one] = keys.as_slice() {
        OsString::from(*one)
    } else {
        let jwks = json!({ "keys": keys.iter().map(|x| json!({"kty": "OKP", "crv": "Ed25519", "x": x})).collect::<Vec<_>>() });
        dir.write("keys.json", jwks.to_string()).into()
    };
    let mut args: Vec<OsString> = vec![
        "verify".into(),
        envelope.into(),
        "--key".into(),
        key,
        "--request-id".into(),
        str_of(vector, "/call/request_id").into(),
        "--tool".into(),
        str_of(vector, "/call/tool").into(),
        "--args-file".into(),
        args_file.into(),
        "--at".into(),
        str_of(vector, "/now").into(),
    ];
    for (flag, field) in [
        ("--conversation", "conversation"),
        ("--caller", "caller"),
        ("--sandbox-mode", "sandbox_mode"),
    ] {
        if let Some(value) = vector
            .pointer(&format!("/context/{field}"))
            .and_then(Value::as_str)
        {
            args.push(flag.into());
            args.push(value.into());
        }
    }
    if let (Some(needed), Some(people)) = (vector.get("require_votes"), vector.get("people_keys")) {
        let people = dir.write("people.json", people.to_string());
        args.push("--require-votes".into());
        args.push(needed.to_string().into());
        args.push("--people-keys".into());
        args.push(people.into());
    }
    args
}

/// What stderr must mention for each class of invalid envelope.
fn stderr_mentions(class: &str) -> &'static str {
    match class {
        "malformed" => "malformed envelope",
        "payload_type" => "expected payload type",
        "untrusted_key" => "no signature by a trusted key",
        "bad_signature" => "bad signature",
        "payload" => "invalid payload",
        "version" => "expected payload version 1 (no votes) or 2 (votes)",
        "expired" => "expired at",
        "not_yet_valid" => "issued in the future",
        "weak_key" => "weak (small-order) public key",
        other => panic!("no stderr expectation for error class {other}"),
    }
}

fn check(name: &str, vector: &Value, run: &Run) -> Result<(), String> {
    let expect = &vector["expect"];
    let fail = |what: String| {
        Err(format!(
            "{name}: {what}\n  exit {}\n  stdout: {}\n  stderr: {}",
            run.code, run.stdout, run.stderr
        ))
    };
    match str_of(expect, "/verdict") {
        "authorized" => {
            if run.code != 0 {
                return fail("expected exit 0".into());
            }
            if !run.stderr.is_empty() {
                return fail("expected nothing on stderr".into());
            }
            let out = run.json();
            if out["effective_args_json"] != expect["effective_args_json"] {
                return fail("wrong effective_args_json".into());
            }
            if out["request_id"] != vector["call"]["request_id"] || out["approved"] != true {
                return fail("stdout is not the verified approval".into());
            }
        }
        "not_authorized" => {
            if run.code != 3 {
                return fail("expected exit 3".into());
            }
            if !run.stdout.is_empty() {
                // A script that ignores the exit code must find nothing to run.
                return fail("expected nothing on stdout".into());
            }
            let reason = str_of(expect, "/reason");
            let mention = if reason == "denied" {
                "the call was denied".to_owned()
            } else if reason == "votes" {
                "not by enough people's own signed votes".to_owned()
            } else {
                format!("approval is for {reason} ")
            };
            if !run.stderr.starts_with("lev: ") || !run.stderr.contains(&mention) {
                return fail(format!("expected stderr to say {mention:?}"));
            }
        }
        "invalid" => {
            if run.code != 1 {
                return fail("expected exit 1".into());
            }
            if !run.stdout.is_empty() {
                return fail("expected nothing on stdout".into());
            }
            let mention = stderr_mentions(str_of(expect, "/error"));
            if !run.stderr.starts_with("lev: ") || !run.stderr.contains(mention) {
                return fail(format!("expected stderr to say {mention:?}"));
            }
        }
        other => return fail(format!("unknown verdict {other}")),
    }
    Ok(())
}

#[test]
fn every_vector_gives_its_exit_code_and_output() {
    let mut failures = Vec::new();
    let vectors = vectors();
    for (name, vector) in &vectors {
        let dir = Scratch::new(&format!("vector-{name}"));
        let run = lev(verify_args(&dir, vector));
        if let Err(e) = check(name, vector, &run) {
            failures.push(e);
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} vectors failed through `lev verify`:\n{}\nhint: the vectors are lev-approval's; if they are stale, regenerate with `{REGENERATE}`",
        failures.len(),
        vectors.len(),
        failures.join("\n\n")
    );
}

#[test]
fn a_denial_prints_its_reason() {
    let vector = vector("valid_denial");
    let dir = Scratch::new("denial");
    let run = lev(verify_args(&dir, &vector));
    assert_eq!(run.code, 3, "{run:?}");
    assert_eq!(run.stdout, "", "nothing to run on stdout");
    assert!(
        run.stderr.contains("denied: not on a shared runner"),
        "{}",
        run.stderr
    );
}

/// Exit 3 and 1 print no approval and no args on stdout, so a script that
/// ignores the exit code has nothing to run; `--json` prints only a verdict.
#[test]
fn exit_3_and_1_never_print_args_on_stdout() {
    for (name, code, verdict, field, value) in [
        ("valid_denial", 3, "not_authorized", "reason", "denied"),
        (
            "edit_presented_as_the_call",
            3,
            "not_authorized",
            "reason",
            "args_json",
        ),
        (
            "other_conversation",
            3,
            "not_authorized",
            "reason",
            "conversation_id",
        ),
        ("expired", 1, "invalid", "error", "expired"),
        ("untrusted_key", 1, "invalid", "error", "untrusted_key"),
    ] {
        let vector = vector(name);
        let dir = Scratch::new(&format!("quiet-{name}"));
        let args = verify_args(&dir, &vector);
        let run = lev(&args);
        assert_eq!(run.code, code, "{name}: {run:?}");
        assert_eq!(run.stdout, "", "{name}: stdout must be empty");
        assert!(run.stderr.starts_with("lev: "), "{name}: {run:?}");

        let mut json_args = args.clone();
        json_args.push("--json".into());
        let run = lev(&json_args);
        assert_eq!(run.code, code, "{name}: {run:?}");
        let out = run.json();
        assert_eq!(out["verdict"], verdict, "{name}: {out}");
        assert_eq!(out[field], value, "{name}: {out}");
        let text = run.stdout.to_string();
        assert!(
            !text.contains("argv") && out.get("effective_args_json").is_none(),
            "{name}: args on stdout: {text}"
        );
        assert!(run.stderr.starts_with("lev: "), "{name}: {run:?}");
    }
    // Exit 0 keeps printing the verified approval, --json or not.
    let vector = vector("edit_resolves_to_edit");
    let dir = Scratch::new("quiet-ok");
    let mut args = verify_args(&dir, &vector);
    args.push("--json".into());
    let run = lev(&args);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(
        run.json()["effective_args_json"],
        vector["expect"]["effective_args_json"]
    );
}

/// `--at` is strict RFC 3339 like the payload's times.
#[test]
fn at_is_strict_rfc3339() {
    let vector = vector("valid_grant");
    let dir = Scratch::new("at-strict");
    let run = lev(with_arg(
        verify_args(&dir, &vector),
        "--at",
        "2026-01-01 12:05:00Z",
    ));
    assert_eq!(run.code, 2, "{run:?}");
    assert!(run.stderr.contains("upper-case T"), "{}", run.stderr);
}

/// Replace the value after `flag` in `args`.
fn with_arg(mut args: Vec<OsString>, flag: &str, value: impl Into<OsString>) -> Vec<OsString> {
    let i = args.iter().position(|a| a == flag).unwrap();
    args[i + 1] = value.into();
    args
}

fn without_flag(mut args: Vec<OsString>, flag: &str) -> Vec<OsString> {
    let i = args.iter().position(|a| a == flag).unwrap();
    args.drain(i..i + 2);
    args
}

/// Replace the ENVELOPE argument.
fn with_envelope(mut args: Vec<OsString>, envelope: impl Into<OsString>) -> Vec<OsString> {
    let at = args.iter().position(|a| a == "verify").unwrap() + 1;
    args[at] = envelope.into();
    args
}

#[test]
fn envelope_from_stdin_and_inline_args() {
    let vector = vector("edit_resolves_to_edit");
    let dir = Scratch::new("stdin");
    let mut args = without_flag(
        with_envelope(verify_args(&dir, &vector), "-"),
        "--args-file",
    );
    args.push("--args".into());
    args.push(str_of(&vector, "/call/args_json").into());
    let run = lev_with_stdin(args, vector["envelope"].to_string().as_bytes());
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(
        run.json()["effective_args_json"],
        vector["expect"]["effective_args_json"]
    );
}

#[test]
fn key_as_a_jwks_file_or_a_jwk_file() {
    let vector = vector("valid_grant");
    let dir = Scratch::new("jwks");
    let x = str_of(&vector, "/trusted_keys/0");
    let jwk = json!({"kty": "OKP", "crv": "Ed25519", "x": x, "kid": "ignored", "alg": "EdDSA", "use": "sig"});
    for (file, text) in [
        ("jwks.json", json!({ "keys": [jwk.clone()] })),
        ("jwk.json", jwk.clone()),
    ] {
        let path = dir.write(file, text.to_string());
        let run = lev(with_arg(verify_args(&dir, &vector), "--key", path));
        assert_eq!(run.code, 0, "{file}: {run:?}");
    }
}

#[test]
fn a_trailing_newline_in_the_args_file_is_explained() {
    let vector = vector("valid_grant");
    let dir = Scratch::new("newline");
    let with_newline = dir.write(
        "args-nl.json",
        format!("{}\n", str_of(&vector, "/call/args_json")),
    );
    let run = lev(with_arg(
        verify_args(&dir, &vector),
        "--args-file",
        with_newline,
    ));
    assert_eq!(run.code, 3, "{run:?}");
    assert!(
        run.stderr.contains("\nhint: the args end with a newline"),
        "{}",
        run.stderr
    );
}

#[test]
fn unreadable_inputs_are_errors() {
    let vector = vector("valid_grant");
    let dir = Scratch::new("unreadable");
    let args = verify_args(&dir, &vector);

    let missing: PathBuf = dir.path("missing.json");
    let run = lev(with_envelope(args.clone(), &missing));
    assert_eq!(run.code, 1, "{run:?}");
    assert!(
        run.stderr.starts_with("lev: reading the envelope: "),
        "{}",
        run.stderr
    );
    assert!(run.stdout.is_empty());

    let run = lev(with_arg(
        with_envelope(args.clone(), "-"),
        "--args-file",
        "-",
    ));
    assert_eq!(run.code, 1, "{run:?}");
    assert!(
        run.stderr
            .contains("cannot both be read from standard input"),
        "{}",
        run.stderr
    );

    let run = lev(with_arg(
        args.clone(),
        "--key",
        dir.path("no/such/keys.json"),
    ));
    assert_eq!(run.code, 1, "{run:?}");
    assert!(
        run.stderr.contains("no file at that path"),
        "{}",
        run.stderr
    );

    let run = lev(with_arg(args.clone(), "--key", "not-a-key"));
    assert_eq!(run.code, 1, "{run:?}");
    assert!(
        run.stderr.starts_with("lev: --key: expected"),
        "{}",
        run.stderr
    );

    let run = lev(with_arg(args.clone(), "--args-file", missing));
    assert_eq!(run.code, 1, "{run:?}");
    assert!(
        run.stderr.starts_with("lev: reading --args-file: "),
        "{}",
        run.stderr
    );
}

#[test]
fn usage_errors_exit_2() {
    let vector = vector("valid_grant");
    let dir = Scratch::new("usage");
    let args = verify_args(&dir, &vector);
    for bad in [
        without_flag(args.clone(), "--args-file"),
        without_flag(args.clone(), "--key"),
        without_flag(args.clone(), "--tool"),
        with_arg(args.clone(), "--at", "yesterday"),
    ] {
        let run = lev(&bad);
        assert_eq!(run.code, 2, "{bad:?}: {run:?}");
        assert!(run.stdout.is_empty());
    }
    let mut both = args;
    both.push("--args".into());
    both.push("{}".into());
    assert_eq!(lev(both).code, 2);
}

#[test]
fn agent_text_on_stderr_cannot_drive_the_terminal() {
    let vector = vector("valid_grant");
    let dir = Scratch::new("control");
    let run = lev(with_arg(
        verify_args(&dir, &vector),
        "--request-id",
        "call-1\x1b[2J\rforged",
    ));
    assert_eq!(run.code, 3, "{run:?}");
    assert!(
        !run.stderr.contains('\x1b') && !run.stderr.contains('\r'),
        "{:?}",
        run.stderr
    );
    assert!(run.stderr.contains("\\u{1b}[2J"), "{}", run.stderr);
}

/// The vote envelope vectors through `lev verify`: the decision carrying
/// the vote gives its verdict with `--require-votes` (as every vector
/// does), the denial of version 2 says why, and a vote envelope on its own
/// is never taken for an approval (another payload type: exit 1).
#[test]
fn vote_envelopes_on_their_own_are_no_approval() {
    let mut seen = 0;
    for (name, vector) in vectors() {
        let Some(vote) = vector.get("vote") else {
            continue;
        };
        seen += 1;
        let dir = Scratch::new(&format!("vote-{name}"));
        let run = lev(verify_args(&dir, &vector));
        check(&name, &vector, &run).unwrap_or_else(|e| panic!("{e}"));

        let mut alone = vector.clone();
        alone["envelope"] = vote["envelope"].clone();
        let run = lev(verify_args(&dir, &alone));
        assert_eq!(run.code, 1, "{name}: {run:?}");
        assert_eq!(run.stdout, "", "{name}");
        assert!(
            run.stderr.contains("expected payload type")
                && run
                    .stderr
                    .contains("application/vnd.lev.vote+json; version=1"),
            "{name}: {}",
            run.stderr
        );
    }
    assert!(seen >= 3, "only {seen} vote envelope vectors");

    let vector = vector("v2_denial");
    let dir = Scratch::new("v2-denial");
    let mut args = verify_args(&dir, &vector);
    let run = lev(&args);
    assert_eq!(run.code, 3, "{run:?}");
    assert!(
        run.stderr.contains("denied: not on a shared runner"),
        "{}",
        run.stderr
    );
    args.push("--json".into());
    let out = lev(&args).json();
    assert_eq!(out["verdict"], "not_authorized", "{out}");
    assert_eq!(out["reason"], "denied", "{out}");
}
