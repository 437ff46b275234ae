//! `lev token create|ls|revoke`.

use crate::client_env::{LevServer, assert_code, lev_env};

#[test]
fn create_list_revoke() {
    let server = LevServer::start("tokens");

    let run = server.lev(&["token", "create", "alice", "--role", "approver"]);
    assert_code(&run, 0);
    let secret = run
        .stdout
        .lines()
        .find_map(|l| l.strip_prefix("secret (shown once): "))
        .expect("the secret")
        .to_owned();
    assert!(
        run.stdout
            .contains(&format!("dashboard login: {}/#token={secret}", server.url)),
        "{}",
        run.stdout
    );
    // The new token works for what its role allows.
    let run = lev_env(
        &["ls"],
        &[("LEV_URL", &server.url), ("LEV_TOKEN", &secret)],
        b"",
    );
    assert_code(&run, 0);

    // A worker bound to a caller: no login URL; --json for scripts.
    let json = server
        .lev(&[
            "token", "create", "ci-bot", "--role", "worker", "--caller", "bob", "--json",
        ])
        .json();
    assert_eq!(json["name"], "ci-bot");
    assert_eq!(json["role"], "worker");
    assert!(json["token"].as_str().unwrap().len() > 20);
    assert_eq!(json["login_url"], serde_json::Value::Null);
    let worker = json["token"].as_str().unwrap().to_owned();
    // A worker may not list interactions (approver route): 403.
    let run = lev_env(
        &["ls"],
        &[("LEV_URL", &server.url), ("LEV_TOKEN", &worker)],
        b"",
    );
    assert_code(&run, 1);
    assert!(run.stderr.contains("403"), "{}", run.stderr);

    let run = server.lev(&["token", "ls"]);
    assert_code(&run, 0);
    assert!(run.stdout.starts_with("NAME"), "{}", run.stdout);
    let alice = run
        .stdout
        .lines()
        .find(|l| l.starts_with("alice"))
        .expect("alice listed");
    assert!(alice.contains("approver"));
    let bot = run
        .stdout
        .lines()
        .find(|l| l.starts_with("ci-bot"))
        .expect("ci-bot listed");
    assert!(bot.contains("worker") && bot.contains("bob"));
    assert!(!run.stdout.contains(&secret), "secrets are never listed");
    let json = server.lev(&["token", "ls", "--json"]).json();
    let names: Vec<&str> = json
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"alice") && names.contains(&"ci-bot"),
        "{names:?}"
    );

    // A name in use; a bad name; a caller on a non-worker token.
    let run = server.lev(&["token", "create", "alice", "--role", "approver"]);
    assert_code(&run, 1);
    assert!(run.stderr.contains("409"), "{}", run.stderr);
    let run = server.lev(&["token", "create", "bad name", "--role", "worker"]);
    assert_code(&run, 1);
    assert!(run.stderr.contains("422"), "{}", run.stderr);
    let run = server.lev(&["token", "create", "x", "--role", "admin", "--caller", "bob"]);
    assert_code(&run, 1);
    let run = server.lev(&["token", "create", "x", "--role", "root"]);
    assert_code(&run, 2);

    // Revoked: it stops working, and it is gone from the list.
    let run = server.lev(&["token", "revoke", "alice"]);
    assert_code(&run, 0);
    assert_eq!(run.stdout.trim(), "revoked token alice");
    let run = lev_env(
        &["ls"],
        &[("LEV_URL", &server.url), ("LEV_TOKEN", &secret)],
        b"",
    );
    assert_code(&run, 1);
    assert!(run.stderr.contains("401"), "{}", run.stderr);
    assert!(!server.lev(&["token", "ls"]).stdout.contains("alice"));
    let run = server.lev(&["token", "revoke", "alice"]);
    assert_code(&run, 1);
    assert!(run.stderr.contains("404"), "{}", run.stderr);
}
