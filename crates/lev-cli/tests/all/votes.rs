//! Quorum and votes people sign with their own keys, from the command line
//! (SPEC section 13): `lev key init`, `lev respond` signing each vote, `lev
//! show` and `lev ls` showing the votes, `lev verify --require-votes`.

use serde_json::Value;

use crate::client_env::{LevServer, assert_code};
use crate::support::Scratch;

const POLICY: &str = r#"
default = "ask"

[groups]
oncall = ["ann", "bob", "carol"]
leads = ["dana"]

[[rule]]
tool = "deploy"
decision = "ask"
approvals = 2
approvers = ["group:oncall"]
escalate_after_s = 3600
escalate_to = ["group:leads"]
require_signed_votes = true

[[rule]]
tool = "ship"
decision = "ask"
approvals = 2
"#;

struct Team {
    server: LevServer,
    _files: Scratch,
}

impl Team {
    fn start() -> Self {
        let files = Scratch::new("votes-policy");
        let policy = files.write("policy.toml", POLICY);
        let server = LevServer::start_with("votes", &["--policy", policy.to_str().unwrap()]);
        Self {
            server,
            _files: files,
        }
    }

    fn token(&self, name: &str, role: &str) -> String {
        let run = self
            .server
            .lev(&["token", "create", name, "--role", role, "--json"]);
        assert_code(&run, 0);
        run.json()["token"].as_str().unwrap().to_owned()
    }

    /// `lev ARGS` as the holder of `token`, with `key` as their key file.
    fn as_person(&self, token: &str, key: &str, args: &[&str]) -> crate::support::Run {
        let key = self.server.dir.path(key);
        self.server.lev_with(
            args,
            &[
                ("LEV_TOKEN", token),
                ("LEV_PERSON_KEY", key.to_str().unwrap()),
            ],
            b"",
        )
    }
}

fn write(team: &Team, name: &str, text: &str) -> String {
    team.server
        .dir
        .write(name, text)
        .to_str()
        .unwrap()
        .to_owned()
}

#[test]
fn votes_signed_on_the_command_line_verify_offline() {
    let team = Team::start();
    let ann = team.token("ann", "approver");
    let bob = team.token("bob", "approver");
    let carol = team.token("carol", "approver");
    let dana = team.token("dana", "approver");
    let worker = team.token("ci", "worker");

    // lev key init: a key file of mode 0600, its public half registered
    // under the token's name; run again, the same key.
    let run = team.as_person(&ann, "ann.key", &["key", "init"]);
    assert_code(&run, 0);
    assert!(
        run.stdout.contains("as person:ann:1 for ann"),
        "{}",
        run.stdout
    );
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(team.server.dir.path("ann.key"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }
    let again = team.as_person(&ann, "ann.key", &["key", "init"]);
    assert_code(&again, 0);
    assert!(
        again
            .stdout
            .starts_with("registered your key as person:ann:1"),
        "{}",
        again.stdout
    );
    assert_code(&team.as_person(&bob, "bob.key", &["key", "init"]), 0);
    // A worker token registers nothing.
    let run = team.as_person(&worker, "w.key", &["key", "init"]);
    assert_code(&run, 1);
    assert!(run.stderr.contains("403"), "{}", run.stderr);
    let listed = team.server.lev(&["key", "ls"]);
    assert!(listed.stdout.contains("person:ann:1") && listed.stdout.contains("person:bob:1"));

    // A deploy the policy asks two of oncall about.
    let client = lev_client::Client::new(&team.server.url, Some(worker.clone())).unwrap();
    let call = lev_protocol::api::GateRequest {
        session_id: "s-1".into(),
        conversation_id: "c-1".into(),
        turn_id: "t-1".into(),
        request_id: "call-1".into(),
        caller: "erin".into(),
        tool_name: "deploy".into(),
        args_json: r#"{"env":"prod"}"#.into(),
        sandbox_mode: "ci".into(),
        required_capabilities: vec![],
        timeout_s: Some(600),
        route: None,
        reason: None,
    };
    let id = match crate::client_env::block_on(client.gate(&call)).unwrap() {
        lev_protocol::api::GateResponse::Ask { interaction_id } => interaction_id,
        other => panic!("expected ask, found {other:?}"),
    };

    // carol has no key: her unsigned vote is refused, nothing recorded.
    let run = team.as_person(&carol, "carol.key", &["respond", &id, "--approve"]);
    assert_code(&run, 1);
    assert!(
        run.stderr.contains("signed_vote_required"),
        "{}",
        run.stderr
    );
    // dana is a lead: not before the escalation.
    let run = team.as_person(
        &dana,
        "dana.key",
        &["respond", &id, "--approve", "--unsigned"],
    );
    assert_code(&run, 1);
    assert!(run.stderr.contains("vote_not_allowed"), "{}", run.stderr);
    // ann's signed vote: recorded, one of two.
    let run = team.as_person(&ann, "ann.key", &["respond", &id, "--approve"]);
    assert_code(&run, 0);
    assert!(run.stdout.starts_with("voted"), "{}", run.stdout);
    assert!(
        run.stdout.contains("signed with person:ann:1"),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout
            .contains("1 of 2 approvals; may still vote: bob, carol"),
        "{}",
        run.stdout
    );
    let run = team.as_person(&ann, "ann.key", &["respond", &id, "--approve"]);
    assert_code(&run, 1);
    assert!(run.stderr.contains("already_voted"), "{}", run.stderr);

    let show = team.server.lev(&["show", &id]);
    assert_code(&show, 0);
    for words in [
        "votes         1 of 2 approvals, each signed by the voter's own key",
        "ann          approve (once)  signed",
        "may vote      bob, carol",
        "escalates     dana may vote too, in",
    ] {
        assert!(show.stdout.contains(words), "{words:?} in\n{}", show.stdout);
    }
    let ls = team.server.lev(&["ls"]);
    assert!(
        ls.stdout.contains("[1/2 approvals] deploy"),
        "{}",
        ls.stdout
    );
    let json = team.server.lev(&["show", &id, "--json"]).json();
    assert_eq!(json["request"]["approvals_needed"], 2);
    assert_eq!(json["request"]["votes"][0]["voter"], "ann");
    assert_eq!(json["request"]["vote_binding"]["request_id"], "call-1");

    // bob's signed vote decides.
    let run = team.as_person(&bob, "bob.key", &["respond", &id, "--approve"]);
    assert_code(&run, 0);
    assert!(run.stdout.starts_with("answered"), "{}", run.stdout);

    // Offline: two people's own signed votes bind this call; three do not.
    let approval = team.server.lev(&["show", &id, "--approval"]);
    assert_code(&approval, 0);
    let envelope = write(&team, "approval.json", &approval.stdout);
    let args = write(&team, "args.json", r#"{"env":"prod"}"#);
    let keys = team.server.lev(&["keys", "--json"]);
    let keys = write(&team, "keys.json", &keys.stdout);
    let people = team.server.lev(&["key", "ls", "--json"]);
    let people_file = write(&team, "people.json", &people.stdout);
    let verify = |needed: &str, people: &str| {
        team.server.lev(&[
            "verify",
            &envelope,
            "--key",
            &keys,
            "--request-id",
            "call-1",
            "--tool",
            "deploy",
            "--args-file",
            &args,
            "--require-votes",
            needed,
            "--people-keys",
            people,
            "--json",
        ])
    };
    let ok = verify("2", &people_file);
    assert_code(&ok, 0);
    let verified: Value = serde_json::from_str(&ok.stdout).unwrap();
    assert_eq!(verified["votes"].as_array().unwrap().len(), 2);
    let short = verify("3", &people_file);
    assert_code(&short, 3);
    let verdict: Value = serde_json::from_str(&short.stdout).unwrap();
    assert_eq!(verdict["reason"], "votes");
    assert!(
        short.stderr.contains("2 distinct signed votes"),
        "{}",
        short.stderr
    );
    // Without --people-keys, --require-votes is a usage error.
    let usage = team.server.lev(&[
        "verify",
        &envelope,
        "--key",
        &keys,
        "--request-id",
        "call-1",
        "--tool",
        "deploy",
        "--args-file",
        &args,
        "--require-votes",
        "2",
    ]);
    assert_code(&usage, 2);

    // A key revoked: bob may not revoke ann's; ann may. Then her vote no
    // longer counts offline.
    let run = team.as_person(&bob, "bob.key", &["key", "revoke", "person:ann:1"]);
    assert_code(&run, 1);
    assert!(run.stderr.contains("403"), "{}", run.stderr);
    assert_code(
        &team.as_person(&ann, "ann.key", &["key", "revoke", "person:ann:1"]),
        0,
    );
    let people = team.server.lev(&["key", "ls", "--json"]);
    let after = write(&team, "people-after.json", &people.stdout);
    assert_code(&verify("2", &after), 3);
    assert_code(&verify("1", &after), 0);
}

#[test]
fn a_key_file_others_can_read_is_refused() {
    let team = Team::start();
    let ann = team.token("ann", "approver");
    assert_code(&team.as_person(&ann, "ann.key", &["key", "init"]), 0);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let path = team.server.dir.path("ann.key");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let run = team.as_person(&ann, "ann.key", &["key", "init"]);
        assert_code(&run, 1);
        assert!(
            run.stderr.contains("mode 0644") && run.stderr.contains("chmod 600"),
            "{}",
            run.stderr
        );
    }
    // Garbage where the key should be.
    team.server.dir.write("bad.key", "not a key");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(
            team.server.dir.path("bad.key"),
            std::fs::Permissions::from_mode(0o600),
        )
        .unwrap();
    }
    let run = team.as_person(&ann, "bad.key", &["key", "init"]);
    assert_code(&run, 1);
    assert!(run.stderr.contains("not a signing key"), "{}", run.stderr);
}

/// The Rust SDK's verifier requires people's signed votes per tool: an
/// approval that carries them runs, one decided by unsigned votes does not.
#[test]
fn the_sdk_requires_signed_votes_per_tool() {
    use lev_approval::{PeopleKeys, TrustedKeys};
    use lev_client::gate::{GateError, GateOutcome, Gatekeeper, ToolCall};

    let team = Team::start();
    let ann = team.token("ann", "approver");
    let bob = team.token("bob", "approver");
    let worker = team.token("ci", "worker");
    assert_code(&team.as_person(&ann, "ann.key", &["key", "init"]), 0);
    assert_code(&team.as_person(&bob, "bob.key", &["key", "init"]), 0);
    let client = lev_client::Client::new(&team.server.url, Some(worker)).unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let (keys, people) = rt.block_on(async {
        let keys = client.keys().await.unwrap();
        let people = client.people_keys().await.unwrap();
        (
            TrustedKeys::parse(&serde_json::to_string(&keys).unwrap()).unwrap(),
            PeopleKeys::from_jwks(&people).unwrap(),
        )
    });
    let gatekeeper = Gatekeeper::new(client.clone(), keys)
        .require_signed_votes("deploy", 2, people)
        // Each rule keeps its own people's keys: this one's (none) must not
        // replace the first rule's.
        .require_signed_votes("sh*", 2, PeopleKeys::default());

    // Two people vote on the pending call while the gatekeeper waits.
    let vote_all = |tool: &str, signed: bool| {
        let call = ToolCall::new("s-sdk", format!("{tool}-1"), tool, r#"{"v":1}"#);
        let submitted = rt.block_on(gatekeeper.submit(&call)).unwrap();
        let id = match submitted.response() {
            lev_protocol::api::GateResponse::Ask { interaction_id } => interaction_id.clone(),
            other => panic!("expected ask, found {other:?}"),
        };
        for (token, key) in [(&ann, "ann.key"), (&bob, "bob.key")] {
            let mut args = vec!["respond", id.as_str(), "--approve"];
            if !signed {
                args.push("--unsigned");
            }
            assert_code(&team.as_person(token, key, &args), 0);
        }
        rt.block_on(gatekeeper.settle(&call, submitted))
    };
    match vote_all("deploy", true) {
        Ok(GateOutcome::Run(approved)) => {
            assert_eq!(approved.args_json(), r#"{"v":1}"#);
            assert_eq!(approved.verified().payload.votes.as_ref().unwrap().len(), 2);
        }
        other => panic!("expected to run, found {other:?}"),
    }
    match vote_all("ship", false) {
        Err(GateError::NotEnoughVotes { tool, why }) => {
            assert_eq!(tool, "ship");
            assert_eq!((why.found, why.needed), (0, 2));
        }
        other => panic!("expected NotEnoughVotes, found {other:?}"),
    }
}

/// A policy whose quorum cannot work stops `lev serve` (and `lev policy
/// check`) with the line of the key at fault named (not only the rule's
/// header); nothing starts.
#[test]
fn a_bad_quorum_stops_the_server_with_its_line() {
    let dir = Scratch::new("votes-bad-policy");
    for (text, line, words) in [
        (
            "default = \"ask\"\n\n[[rule]]\ntool = \"deploy\"\ndecision = \"ask\"\napprovers = [\"group:ops\"]\n",
            6,
            "approvers: unknown group \"ops\"",
        ),
        (
            "[groups]\nops = [\"ann\"]\n\n[[rule]]\ntool = \"deploy\"\ndecision = \"ask\"\napprovals = 2\napprovers = [\"group:ops\"]\n",
            7,
            "approvals = 2, but only 1 person may vote",
        ),
        (
            "[[rule]]\ntool = \"deploy\"\ndecision = \"ask\"\nescalate_to = [\"dana\"]\n",
            4,
            "escalate_to needs escalate_after_s",
        ),
        (
            "[[rule]]\ntool = \"deploy\"\ndecision = \"ask\"\nescalate_after_s = 0\nescalate_to = [\"dana\"]\n",
            4,
            "escalate_after_s: expected 1 to 604800 seconds, found 0",
        ),
        (
            "[[rule]]\ntool = \"deploy\"\ndecision = \"allow\"\nreason = \"ok\"\nrequire_signed_votes = true\n",
            5,
            "go on an ask rule only",
        ),
        (
            "[[tool]]\nname = \"deploy\"\nrequires = [\"net\"]\napprovals = 0\n",
            4,
            "approvals: expected 1 to 64 distinct people, found 0",
        ),
    ] {
        let file = dir.write("policy.toml", text);
        let check = crate::support::lev(["policy".as_ref(), "check".as_ref(), file.as_os_str()]);
        assert_eq!(check.code, 1, "{}", check.stderr);
        assert!(
            check.stderr.contains(&format!("line {line}:")),
            "{}",
            check.stderr
        );
        assert!(check.stderr.contains(words), "{}", check.stderr);
        let data = dir.path("data");
        let serve = crate::support::lev([
            "serve".as_ref(),
            "--listen".as_ref(),
            "127.0.0.1:0".as_ref(),
            "--data-dir".as_ref(),
            data.as_os_str(),
            "--policy".as_ref(),
            file.as_os_str(),
        ]);
        assert_eq!(serve.code, 1, "{}", serve.stderr);
        assert!(
            serve.stderr.contains(&format!("line {line}:")),
            "{}",
            serve.stderr
        );
        assert!(serve.stderr.contains(words), "{}", serve.stderr);
    }
}
