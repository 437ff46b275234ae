//! `lev verify` accepts envelopes made by an independent signer: Python's
//! `cryptography` package with its own DSSE code (`tests/python/sign_envelope.py`),
//! a payload written by Python's JSON encoder (sorted keys, other whitespace,
//! `+00:00` times).
//!
//! The interpreter is `$LEV_TEST_PYTHON`, else `.venv/bin/python` at the
//! repository root (made by `scripts/python-env.sh`). Without one the test
//! fails: an independent check that silently does not run checks nothing.

use std::path::PathBuf;
use std::process::{Command, Stdio};

use serde_json::{Value, json};

use super::support::{Run, Scratch, lev, repo_root};

const SETUP: &str = "run scripts/python-env.sh (it makes .venv with the pinned packages), or set LEV_TEST_PYTHON to a python3 that has `cryptography`";

fn python() -> PathBuf {
    let candidate = std::env::var_os("LEV_TEST_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join(".venv/bin/python"));
    assert!(
        candidate.exists(),
        "no Python interpreter for the independent signer at {}\nhint: {SETUP}",
        candidate.display()
    );
    candidate
}

/// Sign `request` (see the script's doc) with the Python signer.
fn python_sign(request: &Value) -> Value {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/python/sign_envelope.py");
    let mut child = Command::new(python())
        .arg(&script)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start the Python signer: {e}\nhint: {SETUP}"));
    serde_json::to_writer(child.stdin.take().unwrap(), request).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "the Python signer failed: {}\nhint: {SETUP}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

const SEED_HEX: &str = "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60";
const ARGS: &str = r#"{"argv":["cargo","test","--workspace"],"cwd":"/srv/app"}"#;
const NOW: &str = "2026-03-01T09:05:00Z";

fn payload(approved: bool) -> Value {
    json!({
        "v": 1,
        "turn_id": "t-3",
        "request_id": "toolu_01",
        "tool_name": "shell",
        "args_json": ARGS,
        "modified_args_json": "",
        "approved": approved,
        "approved_for_session": false,
        "covered_capabilities": ["proc-exec"],
        "caller": "carol",
        "approver": "dave",
        "sandbox_mode": "workspace-write",
        "reason": if approved { "" } else { "not today" },
        "injected_context": "",
        "conversation_id": "conv-3",
        "nonce": "3q2-796tvu_erb7v3q2-7w",
        "issued_at": "2026-03-01T09:00:00+00:00",
        "expires_at": "2026-03-01T09:10:00+00:00",
    })
}

fn verify(signed: &Value) -> Run {
    let dir = Scratch::new("python");
    let envelope = dir.write("envelope.json", signed["envelope"].to_string());
    lev([
        "verify",
        envelope.to_str().unwrap(),
        "--key",
        signed["public_key"].as_str().unwrap(),
        "--request-id",
        "toolu_01",
        "--tool",
        "shell",
        "--args",
        ARGS,
        "--conversation",
        "conv-3",
        "--caller",
        "carol",
        "--sandbox-mode",
        "workspace-write",
        "--at",
        NOW,
    ])
}

#[test]
fn a_python_signed_grant_is_authorized() {
    for encoding in ["standard", "urlsafe_nopad"] {
        let signed = python_sign(&json!({
            "seed_hex": SEED_HEX,
            "payload": payload(true),
            "encoding": encoding,
        }));
        let run = verify(&signed);
        assert_eq!(run.code, 0, "{encoding}: {run:?}");
        let out = run.json();
        assert_eq!(out["signer_public_key"], signed["public_key"]);
        assert_eq!(out["effective_args_json"], ARGS);
        // The key id is computed independently on both sides.
        let x = signed["public_key"].as_str().unwrap();
        let raw: [u8; 32] = lev_approval::decode_base64(x).unwrap().try_into().unwrap();
        assert_eq!(signed["keyid"], lev_approval::key_id(&raw));
    }
}

#[test]
fn a_python_signed_envelope_tampered_after_signing_is_refused() {
    let signed = python_sign(&json!({
        "seed_hex": SEED_HEX,
        "payload": payload(true),
        "tamper": true,
    }));
    let run = verify(&signed);
    assert_eq!(run.code, 1, "{run:?}");
    assert!(run.stderr.contains("bad signature"), "{}", run.stderr);
    assert!(run.stdout.is_empty());
}

#[test]
fn a_python_signed_denial_is_not_authorized() {
    let signed = python_sign(&json!({
        "seed_hex": SEED_HEX,
        "payload": payload(false),
    }));
    let run = verify(&signed);
    assert_eq!(run.code, 3, "{run:?}");
    assert_eq!(run.stdout, "", "exit 3 prints nothing to run");
    assert!(run.stderr.contains("denied: not today"), "{}", run.stderr);
}

#[test]
fn a_python_signature_under_another_payload_type_is_refused() {
    let signed = python_sign(&json!({
        "seed_hex": SEED_HEX,
        "payload": payload(true),
        "payload_type": "application/json",
    }));
    let run = verify(&signed);
    assert_eq!(run.code, 1, "{run:?}");
    assert!(
        run.stderr.contains("expected payload type"),
        "{}",
        run.stderr
    );
}
