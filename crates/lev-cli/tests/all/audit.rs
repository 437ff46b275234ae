//! `lev audit` and `lev audit --verify`: a forged entry and a cut-off tail
//! are found, the latter only against a head saved earlier.

use lev_protocol::InteractionResponse;

use crate::client_env::{LevServer, assert_code, block_on, text};

/// Some audited history: creates and answers.
fn history(server: &LevServer, n: usize) {
    let client = server.client();
    for i in 0..n {
        let q = server.create("audit", text(&format!("question {i}")));
        block_on(client.respond(q.id(), &InteractionResponse::text(q.id(), "ok"))).unwrap();
    }
}

fn sql(server: &LevServer, statements: &str) {
    let db = rusqlite::Connection::open(server.db()).unwrap();
    db.busy_timeout(std::time::Duration::from_secs(10)).unwrap();
    db.execute_batch(statements).unwrap();
}

#[test]
fn audit_lists_and_verifies_and_finds_a_forged_entry() {
    let server = LevServer::start("audit-forge");
    history(&server, 3);

    let run = server.lev(&["audit"]);
    assert_code(&run, 0);
    assert!(run.stdout.contains("interaction.created"), "{}", run.stdout);
    assert!(
        run.stdout.contains("interaction.answered"),
        "{}",
        run.stdout
    );
    assert!(run.stdout.contains("head: entry "), "{}", run.stdout);
    let json = server.lev(&["audit", "--json"]).json();
    let entries = json["items"].as_array().unwrap();
    assert!(entries.len() >= 6, "{json}");
    assert_eq!(json["head"]["seq"], entries.last().unwrap()["seq"]);
    let after = server.lev(&["audit", "--after", "2", "--json"]).json();
    assert_eq!(after["items"][0]["seq"], 3);

    let run = server.lev(&["audit", "--verify"]);
    assert_code(&run, 0);
    assert!(
        run.stdout.starts_with("audit log whole: "),
        "{}",
        run.stdout
    );
    let json = server.lev(&["audit", "--verify", "--json"]).json();
    assert_eq!(json["ok"], true);

    // Someone with the database file rewrites who answered entry 2.
    sql(
        &server,
        "DROP TRIGGER audit_no_update; DROP TRIGGER audit_no_delete;
         UPDATE audit SET actor = 'mallory' WHERE seq = 2;",
    );
    let run = server.lev(&["audit", "--verify"]);
    assert_code(&run, 1);
    assert_eq!(run.stdout, "");
    assert!(
        run.stderr
            .starts_with("lev: audit log is not whole: entry 2: hash does not match its contents"),
        "{}",
        run.stderr
    );

    // Usage: --head and --save-head go with --verify.
    assert_code(&server.lev(&["audit", "--head", "x"]), 2);
}

#[test]
fn a_cut_off_tail_shows_against_a_saved_head() {
    let server = LevServer::start("audit-cut");
    history(&server, 3);
    let head_file = server.dir.path("head.json");
    let head = head_file.to_str().unwrap();
    let run = server.lev(&["audit", "--verify", "--save-head", head]);
    assert_code(&run, 0);
    let saved: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&head_file).unwrap()).unwrap();
    let saved_seq = saved["seq"].as_u64().unwrap();
    assert!(saved["signature"]["signatures"].is_array());

    history(&server, 2);
    let run = server.lev(&["audit", "--verify", "--head", head]);
    assert_code(&run, 0);
    assert!(
        run.stdout
            .contains(&format!("extends the saved head at entry {saved_seq}"))
    );

    // Cut the log back to before the saved head while the server is down;
    // the restarted server signs the shorter chain's head.
    let mut server = server;
    server.stop();
    sql(
        &server,
        &format!(
            "DROP TRIGGER audit_no_update; DROP TRIGGER audit_no_delete;
             DELETE FROM audit WHERE seq >= {};",
            saved_seq - 1
        ),
    );
    let server = server.restart();
    let run = server.lev(&["audit", "--verify"]);
    assert_code(&run, 0);
    let run = server.lev(&["audit", "--verify", "--head", head]);
    assert_code(&run, 1);
    assert!(
        run.stderr
            .contains(&format!("the saved head (entry {saved_seq}, hash")),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr.contains("cut off or rewritten"),
        "{}",
        run.stderr
    );

    // A head file that is not one.
    let junk = server.dir.write("junk.json", "{}");
    let run = server.lev(&["audit", "--verify", "--head", junk.to_str().unwrap()]);
    assert_code(&run, 1);
    assert!(
        run.stderr.contains("expected a head saved by --save-head"),
        "{}",
        run.stderr
    );
}
