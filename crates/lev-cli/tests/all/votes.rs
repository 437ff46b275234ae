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
        Self::start_with(POLICY)
    }

    fn start_with(policy: &str) -> Self {
        let files = Scratch::new("votes-policy");
        let policy = files.write("policy.toml", policy);
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

/// Gate a call the policy asks people about, as `worker`: its interaction.
fn gate(team: &Team, worker: &str, request_id: &str, tool: &str, args: &str) -> String {
    let client = lev_client::Client::new(&team.server.url, Some(worker.to_owned())).unwrap();
    let call = lev_protocol::api::GateRequest {
        session_id: "s-1".into(),
        conversation_id: "c-1".into(),
        turn_id: "t-1".into(),
        request_id: request_id.into(),
        caller: "erin".into(),
        tool_name: tool.into(),
        args_json: args.into(),
        sandbox_mode: "ci".into(),
        required_capabilities: vec![],
        timeout_s: Some(600),
        route: None,
        reason: None,
    };
    match crate::client_env::block_on(client.gate(&call)).unwrap() {
        lev_protocol::api::GateResponse::Ask { interaction_id } => interaction_id,
        other => panic!("expected ask, found {other:?}"),
    }
}

/// `lev verify ENVELOPE` of a call `request_id` of `tool` with `args`
/// against the server's keys, requiring `needed` signed votes under the
/// people's keys in `people` (none: no votes required), `--json`.
fn verify_call(
    team: &Team,
    envelope: &str,
    request_id: &str,
    tool: &str,
    args: &str,
    votes: Option<(&str, &str)>,
) -> crate::support::Run {
    let keys = team.server.lev(&["keys", "--json"]);
    assert_code(&keys, 0);
    let keys = write(team, "server-keys.json", &keys.stdout);
    let args = write(team, "verify-args.json", args);
    let mut argv = vec![
        "verify",
        envelope,
        "--key",
        &keys,
        "--request-id",
        request_id,
        "--tool",
        tool,
        "--args-file",
        &args,
        "--json",
    ];
    if let Some((needed, people)) = votes {
        argv.extend(["--require-votes", needed, "--people-keys", people]);
    }
    team.server.lev(&argv)
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

/// A decision the server signs with its own key, but with votes it made up
/// or took from elsewhere, passes `lev verify` without `--require-votes`
/// and is refused with it (exit 3, the vote named); the genuine decision
/// made of votes `lev respond` signed passes. Revoking a person's token
/// takes their keys, and with them their vote, from the people's keys.
#[test]
fn decisions_the_server_forges_are_refused_by_lev_verify() {
    use lev_approval::{
        ApprovalPayload, SigningKeyPair, VoteEnvelope, VotePayload, decode_base64, sha256_hex,
        sign_payload, sign_vote,
    };
    use lev_protocol::{Envelope, VoteBinding};

    let team = Team::start();
    let ann = team.token("ann", "approver");
    let bob = team.token("bob", "approver");
    let carol = team.token("carol", "approver");
    let worker = team.token("ci", "worker");
    for (token, key) in [(&ann, "ann.key"), (&bob, "bob.key"), (&carol, "carol.key")] {
        assert_code(&team.as_person(token, key, &["key", "init"]), 0);
    }
    let args = r#"{"env":"prod"}"#;
    let id = gate(&team, &worker, "call-1", "deploy", args);
    for (token, key) in [(&ann, "ann.key"), (&bob, "bob.key")] {
        let run = team.as_person(token, key, &["respond", &id, "--approve"]);
        assert_code(&run, 0);
    }
    let approval = team.server.lev(&["show", &id, "--approval"]);
    assert_code(&approval, 0);
    let genuine_file = write(&team, "genuine.json", &approval.stdout);
    let people = team.server.lev(&["key", "ls", "--json"]);
    let people_file = write(&team, "people.json", &people.stdout);
    let verify = |file: &str, needed: Option<&str>| {
        verify_call(
            &team,
            file,
            "call-1",
            "deploy",
            args,
            needed.map(|n| (n, people_file.as_str())),
        )
    };
    assert_code(&verify(&genuine_file, Some("2")), 0);

    // The server's own signing key, as it keeps it in its data dir.
    let keys_dir = team.server.data_dir().join("keys");
    let kid = std::fs::read_to_string(keys_dir.join("active")).unwrap();
    let server_key = SigningKeyPair::from_private_jwk(
        &std::fs::read_to_string(keys_dir.join(format!("{}.json", kid.trim()))).unwrap(),
    )
    .unwrap();
    let person_key = |file: &str| {
        SigningKeyPair::from_private_jwk(
            &std::fs::read_to_string(team.server.dir.path(file)).unwrap(),
        )
        .unwrap()
    };
    let envelope: Envelope = serde_json::from_str(&approval.stdout).unwrap();
    let genuine = ApprovalPayload::from_bytes(&decode_base64(&envelope.payload).unwrap()).unwrap();
    assert_eq!(genuine.v, 2);
    let votes = genuine.votes.clone().unwrap();
    assert_eq!(
        votes.iter().map(|v| v.voter.as_str()).collect::<Vec<_>>(),
        ["ann", "bob"]
    );
    let binding: VoteBinding = serde_json::from_value(
        team.server.lev(&["show", &id, "--json"]).json()["request"]["vote_binding"].clone(),
    )
    .unwrap();
    let vote = |binding: &VoteBinding| {
        VotePayload::for_call(binding, true, "once", "", "bob", votes[1].at)
    };
    let mut other_args = binding.clone();
    other_args.args_sha256 = sha256_hex(br#"{"env":"staging"}"#);
    let cases = [
        (
            "a vote for bob the server made up, under a key of its own",
            sign_vote(
                &vote(&binding),
                &SigningKeyPair::from_seed(&[9; 32]),
                "person:bob:1",
            ),
            "bob: the vote is not signed by a key registered to \"bob\" (1 registered)",
        ),
        (
            "bob's own key's vote for other args",
            sign_vote(&vote(&other_args), &person_key("bob.key"), "person:bob:1"),
            "bob: the vote is for args_sha256",
        ),
        (
            "a vote for bob signed by carol's registered key",
            sign_vote(&vote(&binding), &person_key("carol.key"), "person:carol:1"),
            "bob: the vote is not signed by a key registered to \"bob\"",
        ),
    ];
    for (i, (what, bob_vote, words)) in cases.into_iter().enumerate() {
        let mut forged = genuine.clone();
        let mut forged_votes = votes.clone();
        forged_votes[1].envelope = Some(VoteEnvelope::from(&bob_vote.unwrap()));
        forged.votes = Some(forged_votes);
        forged.nonce = lev_approval::new_nonce().unwrap();
        let text = serde_json::to_string(&sign_payload(&forged, &server_key).unwrap()).unwrap();
        let file = write(&team, &format!("forged-{i}.json"), &text);
        // Signed by the server's real key: a genuine approval otherwise.
        assert_code(&verify(&file, None), 0);
        let run = verify(&file, Some("2"));
        assert_eq!(run.code, 3, "{what}: {}\n{}", run.stdout, run.stderr);
        let verdict: Value = serde_json::from_str(&run.stdout).unwrap();
        assert_eq!(verdict["verdict"], "not_authorized", "{what}");
        assert_eq!(verdict["reason"], "votes", "{what}");
        for words in [
            "not by enough people's own signed votes",
            "1 distinct signed votes verify and bind this call, 2 needed",
            words,
        ] {
            assert!(
                run.stderr.contains(words),
                "{what}: {words:?} in {}",
                run.stderr
            );
        }
        // ann's genuine vote still counts: one is enough for --require-votes 1.
        assert_code(&verify(&file, Some("1")), 0);
    }

    // Revoking bob's token revokes his key: the refreshed people's keys no
    // longer hold it, and his genuine vote no longer counts.
    assert_code(&team.server.lev(&["token", "revoke", "bob"]), 0);
    let people = team.server.lev(&["key", "ls", "--json"]);
    assert!(!people.stdout.contains("person:bob:"), "{}", people.stdout);
    assert!(people.stdout.contains("person:ann:1"), "{}", people.stdout);
    let after = write(&team, "people-after.json", &people.stdout);
    let run = verify_call(
        &team,
        &genuine_file,
        "call-1",
        "deploy",
        args,
        Some(("2", &after)),
    );
    assert_eq!(run.code, 3, "{}\n{}", run.stdout, run.stderr);
    assert!(
        run.stderr.contains(
            "bob: the vote is not signed by a key registered to \"bob\" (they have registered none)"
        ),
        "{}",
        run.stderr
    );
    assert_code(
        &verify_call(
            &team,
            &genuine_file,
            "call-1",
            "deploy",
            args,
            Some(("1", &after)),
        ),
        0,
    );
}

/// One person's vote signed with their own key makes a decision of payload
/// version 2 carrying that one vote, which `lev verify --require-votes 1`
/// accepts; the same person's unsigned decision stays version 1, which it
/// refuses (and which verifies without `--require-votes`, as before).
#[test]
fn one_signed_vote_is_version_2_and_an_unsigned_decision_version_1() {
    use lev_approval::{ApprovalPayload, decode_base64};
    use lev_protocol::{APPROVAL_PAYLOAD_TYPE, APPROVAL_PAYLOAD_TYPE_V2, Envelope};

    let team = Team::start();
    let ann = team.token("ann", "approver");
    let worker = team.token("ci", "worker");
    assert_code(&team.as_person(&ann, "ann.key", &["key", "init"]), 0);
    let people = team.server.lev(&["key", "ls", "--json"]);
    let people = write(&team, "people.json", &people.stdout);
    let args = r#"{"path":"README.md"}"#;
    let decide = |request_id: &str, unsigned: bool| {
        let id = gate(&team, &worker, request_id, "read", args);
        let json = team.server.lev(&["show", &id, "--json"]).json();
        assert_eq!(json["request"]["approvals_needed"], 1, "{json}");
        let mut argv = vec!["respond", id.as_str(), "--approve"];
        if unsigned {
            argv.push("--unsigned");
        }
        let run = team.as_person(&ann, "ann.key", &argv);
        assert_code(&run, 0);
        assert!(run.stdout.starts_with("answered"), "{}", run.stdout);
        assert_eq!(
            run.stdout.contains("your vote signed with person:ann:1"),
            !unsigned,
            "{}",
            run.stdout
        );
        let approval = team.server.lev(&["show", &id, "--approval"]);
        assert_code(&approval, 0);
        let envelope: Envelope = serde_json::from_str(&approval.stdout).unwrap();
        let payload =
            ApprovalPayload::from_bytes(&decode_base64(&envelope.payload).unwrap()).unwrap();
        let file = write(&team, &format!("{request_id}.json"), &approval.stdout);
        (envelope, payload, file)
    };

    let (envelope, payload, file) = decide("read-signed", false);
    assert_eq!(envelope.payload_type, APPROVAL_PAYLOAD_TYPE_V2);
    assert_eq!(payload.v, 2);
    let votes = payload.votes.unwrap();
    assert_eq!(votes.len(), 1);
    assert_eq!((votes[0].voter.as_str(), votes[0].approved), ("ann", true));
    assert!(votes[0].envelope.is_some());
    assert_eq!(payload.approver, "ann");
    let run = verify_call(
        &team,
        &file,
        "read-signed",
        "read",
        args,
        Some(("1", &people)),
    );
    assert_code(&run, 0);
    let verified: Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(verified["votes"][0]["voter"], "ann", "{verified}");
    let run = verify_call(
        &team,
        &file,
        "read-signed",
        "read",
        args,
        Some(("2", &people)),
    );
    assert_eq!(run.code, 3, "{}", run.stderr);

    let (envelope, payload, file) = decide("read-unsigned", true);
    assert_eq!(envelope.payload_type, APPROVAL_PAYLOAD_TYPE);
    assert_eq!(payload.v, 1);
    assert!(payload.votes.is_none());
    assert!(
        !String::from_utf8(decode_base64(&envelope.payload).unwrap())
            .unwrap()
            .contains("\"votes\""),
        "a version 1 payload has no votes field"
    );
    assert_code(
        &verify_call(&team, &file, "read-unsigned", "read", args, None),
        0,
    );
    let run = verify_call(
        &team,
        &file,
        "read-unsigned",
        "read",
        args,
        Some(("1", &people)),
    );
    assert_eq!(run.code, 3, "{}", run.stderr);
    assert!(
        run.stderr
            .contains("0 distinct signed votes verify and bind this call, 1 needed"),
        "{}",
        run.stderr
    );
}

const ESCALATING: &str = r#"
default = "ask"

[groups]
oncall = ["ann", "bob"]
leads = ["dana"]

[[rule]]
tool = "deploy"
decision = "ask"
approvals = 2
approvers = ["group:oncall"]
escalate_after_s = 2
escalate_to = ["group:leads"]
"#;

/// An escalation crossed (SPEC section 13): before `escalate_after_s` the
/// lead may not vote and `lev show` counts down to it; after it, `lev show`
/// says since when and names the lead among who may still vote, the audit
/// log records it once, and the lead's vote decides.
#[test]
fn after_the_escalation_lev_show_says_so_and_the_leads_vote() {
    let team = Team::start_with(ESCALATING);
    let ann = team.token("ann", "approver");
    let dana = team.token("dana", "approver");
    let worker = team.token("ci", "worker");
    let id = gate(&team, &worker, "call-e", "deploy", r#"{"env":"prod"}"#);
    let run = team.as_person(&ann, "ann.key", &["respond", &id, "--approve"]);
    assert_code(&run, 0);
    assert!(
        run.stdout.contains("1 of 2 approvals; may still vote: bob"),
        "{}",
        run.stdout
    );
    let run = team.as_person(&dana, "dana.key", &["respond", &id, "--approve"]);
    assert_code(&run, 1);
    assert!(run.stderr.contains("vote_not_allowed"), "{}", run.stderr);
    assert!(run.stderr.contains("dana from "), "{}", run.stderr);

    let show = team.server.lev(&["show", &id]);
    assert_code(&show, 0);
    for words in [
        "votes         1 of 2 approvals",
        "ann          approve (once)  unsigned",
        "may vote      bob\n",
        "escalates     dana may vote too, in ",
    ] {
        assert!(show.stdout.contains(words), "{words:?} in\n{}", show.stdout);
    }

    // Past escalate_after_s: the server records the escalation once.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(15);
    loop {
        let audit = team.server.lev(&["audit"]);
        assert_code(&audit, 0);
        if audit.stdout.contains("interaction.escalated") {
            assert_eq!(audit.stdout.matches("interaction.escalated").count(), 1);
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no escalation recorded:\n{}",
            audit.stdout
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    let show = team.server.lev(&["show", &id]);
    assert_code(&show, 0);
    for words in [
        "votes         1 of 2 approvals",
        "may vote      bob, dana\n",
        "escalates     dana may vote too, since ",
    ] {
        assert!(show.stdout.contains(words), "{words:?} in\n{}", show.stdout);
    }
    assert!(
        !show.stdout.contains("may vote too, in "),
        "{}",
        show.stdout
    );
    let ls = team.server.lev(&["ls"]);
    assert!(
        ls.stdout.contains("[1/2 approvals] deploy"),
        "{}",
        ls.stdout
    );

    // The lead's vote now counts, and decides.
    let run = team.as_person(&dana, "dana.key", &["respond", &id, "--approve"]);
    assert_code(&run, 0);
    assert!(run.stdout.starts_with("answered"), "{}", run.stdout);
    let show = team.server.lev(&["show", &id]);
    for words in [
        "votes         2 of 2 approvals",
        "ann          approve (once)  unsigned",
        "dana         approve (once)  unsigned",
    ] {
        assert!(show.stdout.contains(words), "{words:?} in\n{}", show.stdout);
    }
    assert!(!show.stdout.contains("may vote "), "{}", show.stdout);
    assert!(!show.stdout.contains("escalates"), "{}", show.stdout);
    assert!(!team.server.lev(&["ls"]).stdout.contains(&id));
}
