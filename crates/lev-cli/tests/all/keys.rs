//! `lev keys generate`.

use std::os::unix::fs::PermissionsExt as _;

use lev_approval::{ApprovalPayload, SigningKeyPair, decode_base64, key_id, sign_payload};

use super::support::{Run, Scratch, lev};

fn mode(path: &std::path::Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

/// The key id and public key `lev keys generate` printed.
fn printed(run: &Run) -> (String, String) {
    let mut lines = run.stdout.lines();
    let kid = lines
        .next()
        .and_then(|l| l.strip_prefix("key id:"))
        .unwrap()
        .trim();
    let x = lines
        .next()
        .and_then(|l| l.strip_prefix("public key:"))
        .unwrap()
        .trim();
    assert_eq!(lines.next(), None, "{}", run.stdout);
    (kid.to_owned(), x.to_owned())
}

#[test]
fn generate_writes_a_private_key_file_with_mode_0600() {
    let dir = Scratch::new("keys");
    let out = dir.path("signing.jwk");
    let run = lev(["keys", "generate", "--out", out.to_str().unwrap()]);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(mode(&out), 0o600);

    let (kid, x) = printed(&run);
    let raw: [u8; 32] = decode_base64(&x).unwrap().try_into().unwrap();
    assert!(
        !x.contains(['+', '/', '=']),
        "base64url without padding: {x}"
    );
    assert_eq!(kid, key_id(&raw));
    assert_eq!(kid.len(), 16);

    let key = SigningKeyPair::from_private_jwk(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!(key.kid(), kid);
    assert_eq!(key.public_base64url(), x);
}

#[test]
fn generate_refuses_to_overwrite_without_force() {
    let dir = Scratch::new("keys-force");
    let out = dir.write("signing.jwk", "precious");
    std::fs::set_permissions(&out, std::fs::Permissions::from_mode(0o644)).unwrap();

    let run = lev(["keys", "generate", "--out", out.to_str().unwrap()]);
    assert_eq!(run.code, 1, "{run:?}");
    assert!(run.stdout.is_empty());
    assert!(
        run.stderr.starts_with("lev: writing ") && run.stderr.contains("refusing to overwrite"),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr.contains("\nhint: pass --force"),
        "{}",
        run.stderr
    );
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "precious");

    let run = lev([
        "keys",
        "generate",
        "--force",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(mode(&out), 0o600, "--force leaves the file 0600");
    let (kid, _) = printed(&run);
    let key = SigningKeyPair::from_private_jwk(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!(key.kid(), kid);
    let leftovers = std::fs::read_dir(dir.path("")).unwrap().count();
    assert_eq!(leftovers, 1, "no temporary file is left behind");
}

#[test]
fn a_generated_key_signs_what_lev_verify_accepts() {
    let dir = Scratch::new("keys-verify");
    let out = dir.path("signing.jwk");
    let run = lev(["keys", "generate", "--out", out.to_str().unwrap()]);
    assert_eq!(run.code, 0, "{run:?}");
    let (_, x) = printed(&run);
    let key = SigningKeyPair::from_private_jwk(&std::fs::read_to_string(&out).unwrap()).unwrap();
    verify_with_printed_and_file_key(&dir, &key, &x, &out);
}

/// One public key in 64 starts with `-` in base64url: `lev verify --key`
/// takes it as the value it is, not as a flag (it failed as "unexpected
/// argument '-X'" once in 64 runs of the test above).
#[test]
fn a_key_that_starts_with_a_hyphen_is_taken_as_a_key() {
    let dir = Scratch::new("keys-hyphen");
    let key = (0u8..=255)
        .map(|i| SigningKeyPair::from_seed(&[i; 32]))
        .find(|k| k.public_base64url().starts_with('-'))
        .expect("one seed in 256 gives a key starting with -");
    let x = key.public_base64url();
    let out = dir.write("signing.jwk", key.to_private_jwk().into_bytes());
    verify_with_printed_and_file_key(&dir, &key, &x, &out);
}

fn verify_with_printed_and_file_key(
    dir: &Scratch,
    key: &SigningKeyPair,
    x: &str,
    out: &std::path::Path,
) {
    let now = time::OffsetDateTime::now_utc();
    let payload = ApprovalPayload {
        v: 1,
        turn_id: "t-1".into(),
        request_id: "call-9".into(),
        tool_name: "fs.read".into(),
        args_json: r#"{"path":"README.md"}"#.into(),
        modified_args_json: String::new(),
        approved: true,
        approved_for_session: false,
        covered_capabilities: vec![],
        caller: "alice".into(),
        approver: "policy".into(),
        sandbox_mode: "read-only".into(),
        reason: String::new(),
        injected_context: String::new(),
        conversation_id: "c-9".into(),
        nonce: lev_approval::new_nonce().unwrap(),
        issued_at: now,
        expires_at: now + time::Duration::minutes(10),
        votes: None,
    };
    let envelope = dir.write(
        "envelope.json",
        serde_json::to_vec(&sign_payload(&payload, key).unwrap()).unwrap(),
    );
    let common = |key_arg: &str| {
        lev([
            "verify",
            envelope.to_str().unwrap(),
            "--key",
            key_arg,
            "--request-id",
            "call-9",
            "--tool",
            "fs.read",
            "--args",
            r#"{"path":"README.md"}"#,
        ])
    };
    // The printed public key, and the key file itself (its public half).
    for key_arg in [x, out.to_str().unwrap()] {
        let run = common(key_arg);
        assert_eq!(run.code, 0, "{key_arg}: {run:?}");
        assert_eq!(run.json()["signer_public_key"], x);
    }
}

/// `lev keys kek` makes a key-encryption key; `lev serve` given it stores
/// its signing keys sealed; a server given another key, or none, refuses to
/// start and says why, and the right key opens them again.
#[test]
fn signing_keys_are_sealed_with_the_key_encryption_key() {
    let dir = Scratch::new("kek");
    let (kek, other) = (dir.path("kek"), dir.path("other-kek"));
    for file in [&kek, &other] {
        let run = lev(["keys", "kek", "--out", file.to_str().unwrap()]);
        assert_eq!(run.code, 0, "{run:?}");
        assert_eq!(mode(file), 0o600);
        let text = std::fs::read_to_string(file).unwrap();
        assert_eq!(decode_base64(text.trim()).unwrap().len(), 32);
    }
    let again = lev(["keys", "kek", "--out", kek.to_str().unwrap()]);
    assert_ne!(
        again.code, 0,
        "an existing key is not replaced without --force"
    );

    let data = dir.path("data");
    let serve = |kek: Option<&std::path::Path>| {
        let mut builder = crate::spawned::Spawned::builder(env!("CARGO_BIN_EXE_lev"), &data);
        if let Some(kek) = kek {
            builder = builder.arg("--key-encryption-key-file").arg(kek);
        }
        builder.start()
    };
    let first = serve(Some(&kek)).unwrap();
    let jwks = lev(["keys", "--json", "--url", first.url()]).json();
    let kid = jwks["keys"][0]["kid"].as_str().unwrap().to_owned();
    drop(first);
    let stored = std::fs::read_to_string(data.join("keys").join(format!("{kid}.json"))).unwrap();
    assert!(stored.starts_with("sealed:v1:"), "{stored}");
    assert!(!stored.contains("\"d\""), "no private key in the clear");

    let refused = serve(Some(&other)).unwrap_err().to_string();
    assert!(
        refused.contains("does not open with this key-encryption key")
            && refused.contains("same --key-encryption-key-file"),
        "{refused}"
    );
    let refused = serve(None).unwrap_err().to_string();
    assert!(refused.contains("--key-encryption-key-file"), "{refused}");

    let back = serve(Some(&kek)).unwrap();
    let jwks = lev(["keys", "--json", "--url", back.url()]).json();
    assert_eq!(jwks["keys"][0]["kid"], kid.as_str(), "the same key signs");
}
