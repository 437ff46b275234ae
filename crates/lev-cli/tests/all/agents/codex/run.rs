//! `lev codex run` with the real Codex CLI and the fake model: every
//! approval request goes through lev's gate, a person answers through lev's
//! API, and what Codex then does (the command runs, or not; what the model
//! reads next) is checked.

use lev_client::Client;
use lev_protocol::{
    ApprovalScope, Interaction, InteractionKind, InteractionResponse, InteractionStatus,
};
use serde_json::{Value, json};

use super::fake_model::{escalated, exec, fail, patch, said, say};
use super::harness::CodexEnv;
use crate::agents::served::block_on;

/// The tool and args of a tool approval.
fn call(interaction: &Interaction) -> (String, Value) {
    match &interaction.request.kind {
        InteractionKind::ToolApproval {
            tool_name,
            args_json,
            ..
        } => (tool_name.clone(), serde_json::from_str(args_json).unwrap()),
        other => panic!("not a tool approval: {other:?}"),
    }
}

/// The sandbox mode lev's policy judged a tool approval under.
fn sandbox_of(interaction: &Interaction) -> &str {
    match &interaction.request.kind {
        InteractionKind::ToolApproval { sandbox_mode, .. } => sandbox_mode,
        other => panic!("not a tool approval: {other:?}"),
    }
}

fn approve(i: &Interaction, scope: ApprovalScope) -> InteractionResponse {
    InteractionResponse::approval(i.id(), true, scope)
}

#[test]
fn codex_run_an_approved_command_runs_and_the_model_reads_its_output() {
    let env = CodexEnv::start(
        "approve",
        None,
        vec![exec("call_a1", "touch made.txt"), say("I made it.")],
    );
    let run = env.spawn_run("make a file", &[]);
    let asked = env.pending();
    // A command that runs in the thread's sandbox is judged under it.
    assert_eq!(sandbox_of(&asked), "workspace-write");
    let (tool, args) = call(&asked);
    assert_eq!(tool, "codex.exec");
    let ws = env.ws().to_str().unwrap().to_owned();
    assert_eq!(
        args,
        json!({"command": "touch made.txt", "argv": ["touch", "made.txt"], "cwd": ws})
    );
    // Session = the Codex thread, request id = the item (the model's call id).
    assert_eq!(
        asked.request.session_id.len(),
        36,
        "a Codex thread id: {}",
        asked.request.session_id
    );
    assert_eq!(
        asked.request.conversation_id.as_deref(),
        Some(asked.request.session_id.as_str())
    );
    assert_eq!(
        asked
            .request
            .vote_binding
            .as_ref()
            .map(|b| b.request_id.as_str()),
        Some("call_a1"),
        "the gate's request id: {:?}",
        asked.request.vote_binding
    );
    assert!(
        !env.ws().join("made.txt").exists(),
        "ran before anyone approved"
    );

    env.respond(&asked, &approve(&asked, ApprovalScope::Once));
    let run = run.wait();
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(env.ws().join("made.txt").exists(), "{}", run.stderr);
    assert!(
        run.stdout.contains("I made it."),
        "the agent's message on stdout: {}",
        run.stdout
    );
    assert!(
        run.stderr.contains("approved by pat -> accept"),
        "{}",
        run.stderr
    );
    // The agent's progress around lev's decision: the command (the inner
    // one, not the shell wrapper) when Codex starts the item, which it does
    // before asking, and how it ended.
    let lines: Vec<&str> = run.stderr.lines().skip(1).collect();
    assert_eq!(
        lines.first(),
        Some(&"codex: $ touch made.txt"),
        "{}",
        run.stderr
    );
    assert!(lines[1].contains("waits for a person"), "{}", run.stderr);
    assert!(
        lines[2].ends_with("approved by pat -> accept"),
        "{}",
        run.stderr
    );
    assert_eq!(lines[3], "codex:   (completed, exit 0)", "{}", run.stderr);
    let second = said(&env.model.input_of(1));
    assert!(second.contains("Process exited with code 0"), "{second}");
    // The decision on record is signed, bound to the gate's request id: the
    // Codex item id, which is the model's call id.
    let view = block_on(env.served.approver.get_interaction(asked.id())).unwrap();
    let envelope = view.approval.expect("a signed approval");
    let payload: Value =
        serde_json::from_slice(&lev_approval::decode_base64(&envelope.payload).unwrap()).unwrap();
    assert_eq!(payload["request_id"], "call_a1", "{payload}");
    // ...and the audit log has the gate call under that id.
    let admin = Client::new(&env.served.url, Some(env.served.admin.clone())).unwrap();
    let audit = block_on(admin.audit_all()).unwrap().page.items;
    let gated: Vec<&Value> = audit
        .iter()
        .filter(|e| e.action == "gate.asked")
        .map(|e| &e.data)
        .collect();
    assert_eq!(gated.len(), 1, "{audit:?}");
    assert_eq!(gated[0]["request_id"], "call_a1", "{}", gated[0]);
    assert_eq!(gated[0]["session_id"], json!(asked.request.session_id));
}

#[test]
fn codex_run_an_approval_with_injected_context_runs_and_the_model_reads_the_context() {
    let env = CodexEnv::start(
        "inject",
        None,
        vec![exec("call_j1", "touch made.txt"), say("Noted.")],
    );
    let run = env.spawn_run("make a file", &[]);
    let asked = env.pending();
    env.respond(
        &asked,
        &InteractionResponse {
            injected_context: Some("the release is frozen until Monday".into()),
            ..approve(&asked, ApprovalScope::Once)
        },
    );
    let run = run.wait();
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(env.ws().join("made.txt").exists(), "{}", run.stderr);
    assert!(
        run.stderr.contains("approved by pat -> accept"),
        "{}",
        run.stderr
    );
    // One turn: the model's next request has the command's output and the
    // approver's context, marked as lev's internal context.
    assert_eq!(env.model.requests().len(), 2);
    let second = said(&env.model.input_of(1));
    assert!(second.contains("Process exited with code 0"), "{second}");
    assert!(
        second.contains("the release is frozen until Monday"),
        "{second}"
    );
    assert!(
        second.contains(lev_client::render::INTERNAL_OPEN),
        "marked as internal context: {second}"
    );
}

#[test]
fn codex_run_a_failed_turn_exits_1_with_the_models_error() {
    let env = CodexEnv::start("failed", None, vec![fail("fake: this request was refused")]);
    let run = env.spawn_run("make a file", &[]).wait();
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(
        run.stderr
            .contains("lev: the turn failed: fake: this request was refused"),
        "{}",
        run.stderr
    );
    assert!(env.interactions().is_empty());
}

#[test]
fn codex_run_a_session_approval_covers_the_next_call_through_levs_grant() {
    let env = CodexEnv::start(
        "session",
        None,
        vec![
            exec("call_s1", "touch a.txt"),
            exec("call_s2", "touch b.txt"),
            say("Both made."),
        ],
    );
    let run = env.spawn_run("make two files", &[]);
    let asked = env.pending();
    env.respond(&asked, &approve(&asked, ApprovalScope::Session));
    let run = run.wait();
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        env.ws().join("a.txt").exists() && env.ws().join("b.txt").exists(),
        "{}",
        run.stderr
    );
    // One question: the second call was allowed by lev's session grant.
    assert_eq!(env.interactions().len(), 1, "{:?}", env.interactions());
    assert!(
        run.stderr.contains("(session grant) -> acceptForSession"),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr
            .contains("`touch b.txt`: allowed by pat's grant -> accept"),
        "{}",
        run.stderr
    );
    let grants = block_on(env.served.approver.grants()).unwrap();
    assert!(
        grants.iter().any(|g| g.tool_name == "codex.exec"
            && g.conversation_id.as_deref() == Some(asked.request.session_id.as_str())),
        "{grants:?}"
    );
}

#[test]
fn codex_run_a_denial_does_not_run_and_the_model_reads_the_feedback_in_the_same_turn() {
    let env = CodexEnv::start(
        "deny",
        None,
        vec![exec("call_d1", "touch denied.txt"), say("OK, I will not.")],
    );
    let run = env.spawn_run("make a file", &[]);
    let asked = env.pending();
    env.respond(
        &asked,
        &InteractionResponse {
            injected_context: Some("the CI owns that directory".into()),
            ..InteractionResponse::deny_with_feedback(asked.id(), "use the staging database")
        },
    );
    let run = run.wait();
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(!env.ws().join("denied.txt").exists());
    // Two requests, one turn: the model read the rejection, then lev's steer.
    assert_eq!(env.model.requests().len(), 2);
    let second = said(&env.model.input_of(1));
    assert!(second.contains("rejected by user"), "{second}");
    assert!(
        second.contains("Feedback: use the staging database"),
        "{second}"
    );
    assert!(second.contains("the CI owns that directory"), "{second}");
    assert!(
        run.stderr
            .contains("denied with feedback: use the staging database -> decline"),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr.contains("\ncodex:   (declined)\n"),
        "{}",
        run.stderr
    );
}

#[test]
fn codex_run_an_edited_command_is_steered_and_the_exact_reissue_runs_without_asking() {
    let env = CodexEnv::start(
        "edit",
        None,
        vec![
            exec("call_e1", "touch original.txt"),
            exec("call_e2", "touch edited.txt"),
            say("Done as asked."),
        ],
    );
    let run = env.spawn_run("make a file", &[]);
    let asked = env.pending();
    let ws = env.ws().to_str().unwrap().to_owned();
    let edit = json!({"command": "touch edited.txt", "argv": ["touch", "edited.txt"], "cwd": ws})
        .to_string();
    env.respond(
        &asked,
        &InteractionResponse {
            modified_args_json: Some(edit),
            ..approve(&asked, ApprovalScope::Once)
        },
    );
    let run = run.wait();
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(!env.ws().join("original.txt").exists(), "the original ran");
    assert!(env.ws().join("edited.txt").exists(), "{}", run.stderr);
    // The model was told the exact command, in the same turn...
    let second = said(&env.model.input_of(1));
    assert!(
        second.contains("Run exactly this command instead, in "),
        "{second}"
    );
    assert!(second.contains("\ntouch edited.txt\n"), "{second}");
    // ...and its re-issued call ran on the signed edit, asking nobody.
    assert_eq!(env.interactions().len(), 1, "{:?}", env.interactions());
    assert!(
        run.stderr
            .contains("`touch edited.txt`: the call pat approved as an edit"),
        "{}",
        run.stderr
    );
}

#[test]
fn codex_run_a_reissued_call_other_than_the_edit_asks_again() {
    let env = CodexEnv::start(
        "edit-other",
        None,
        vec![
            exec("call_o1", "touch original.txt"),
            exec("call_o2", "touch other.txt"),
            say("Stopped."),
        ],
    );
    let run = env.spawn_run("make a file", &[]);
    let asked = env.pending();
    let ws = env.ws().to_str().unwrap().to_owned();
    let edit = json!({"command": "touch edited.txt", "argv": ["touch", "edited.txt"], "cwd": ws})
        .to_string();
    env.respond(
        &asked,
        &InteractionResponse {
            modified_args_json: Some(edit),
            ..approve(&asked, ApprovalScope::Once)
        },
    );
    env.served.wait_status(
        &asked.request.session_id,
        asked.id(),
        InteractionStatus::Answered,
    );
    let again = env.pending();
    assert_ne!(again.id(), asked.id());
    assert_eq!(call(&again).1["command"], "touch other.txt");
    env.respond(
        &again,
        &InteractionResponse::approval(again.id(), false, ApprovalScope::Once),
    );
    let run = run.wait();
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(!env.ws().join("other.txt").exists() && !env.ws().join("original.txt").exists());
}

#[test]
fn codex_run_a_file_change_shows_its_diff_and_is_applied_only_when_approved() {
    let denied = "*** Begin Patch\n*** Add File: denied.txt\n+not wanted\n*** End Patch\n";
    let approved =
        "*** Begin Patch\n*** Add File: approved.txt\n+hello from the patch\n*** End Patch\n";
    let env = CodexEnv::start(
        "patch",
        None,
        vec![
            patch("call_p1", denied),
            patch("call_p2", approved),
            say("Patched."),
        ],
    );
    let run = env.spawn_run("edit files", &[]);
    let first = env.pending();
    let (tool, args) = call(&first);
    assert_eq!(tool, "codex.apply_patch");
    let path = env.ws().join("denied.txt").to_str().unwrap().to_owned();
    assert_eq!(args["files"], json!([path]));
    assert_eq!(args["changes"][0]["path"], json!(path));
    assert_eq!(
        args["changes"][0]["diff"],
        json!("not wanted\n"),
        "the diff as Codex shows it: {args}"
    );
    env.respond(
        &first,
        &InteractionResponse::approval(first.id(), false, ApprovalScope::Once),
    );
    env.served.wait_status(
        &first.request.session_id,
        first.id(),
        InteractionStatus::Answered,
    );
    let second = env.pending();
    assert_eq!(
        call(&second).1["changes"][0]["diff"],
        json!("hello from the patch\n")
    );
    assert!(
        !env.ws().join("approved.txt").exists(),
        "applied before the approval"
    );
    env.respond(&second, &approve(&second, ApprovalScope::Once));
    let run = run.wait();
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(!env.ws().join("denied.txt").exists());
    assert_eq!(
        std::fs::read_to_string(env.ws().join("approved.txt")).unwrap(),
        "hello from the patch\n"
    );
    assert!(said(&env.model.input_of(1)).contains("patch rejected by user"));
}

#[test]
fn codex_run_a_cancelled_question_cancels_the_turn() {
    let env = CodexEnv::start(
        "cancel",
        None,
        vec![exec("call_c1", "touch never.txt"), say("unreachable")],
    );
    let run = env.spawn_run("make a file", &[]);
    let asked = env.pending();
    let worker = Client::new(&env.served.url, Some(env.served.worker.clone())).unwrap();
    block_on(worker.cancel(asked.id())).unwrap();
    let run = run.wait();
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(!env.ws().join("never.txt").exists());
    assert!(
        run.stderr.contains("the question was cancelled -> cancel"),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr.contains("lev: the turn was cancelled"),
        "{}",
        run.stderr
    );
    assert_eq!(
        env.model.requests().len(),
        1,
        "the model was called after the cancel"
    );
}

#[test]
fn codex_run_nobody_deciding_in_time_cancels_the_turn() {
    let env = CodexEnv::start(
        "timeout",
        None,
        vec![exec("call_t1", "touch never.txt"), say("unreachable")],
    );
    let run = env.spawn_run("make a file", &["--timeout", "1"]).wait();
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(!env.ws().join("never.txt").exists());
    assert!(
        run.stderr.contains("nobody decided in time -> cancel"),
        "{}",
        run.stderr
    );
}

#[test]
fn codex_run_with_lev_unreachable_runs_nothing() {
    let env = CodexEnv::start(
        "unreachable",
        None,
        vec![exec("call_u1", "touch never.txt"), say("unreachable")],
    );
    // Keys pinned from the running server; then an address where nobody listens.
    let jwks = block_on(env.served.approver.keys()).unwrap();
    let keys = env
        .scratch
        .write("jwks.json", serde_json::to_string(&jwks).unwrap());
    let dead = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://127.0.0.1:{}", l.local_addr().unwrap().port())
    };
    let codex = super::harness::codex_bin();
    let mut command = env.lev(&[
        "codex",
        "run",
        "--codex",
        codex.to_str().unwrap(),
        "--key",
        keys.to_str().unwrap(),
        "make a file",
    ]);
    command.env("LEV_URL", &dead);
    let run = super::harness::Running::spawn(command).wait();
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(!env.ws().join("never.txt").exists());
    assert!(
        run.stderr.contains("lev could not be reached"),
        "{}",
        run.stderr
    );
    assert_eq!(env.model.requests().len(), 1);
}

#[test]
fn codex_run_policy_rules_read_the_inner_argv() {
    let policy = r#"
[[rule]]
tool = "codex.exec"
args = { "/argv/0" = "^rm$" }
decision = "deny"
reason = "agents never delete files"

[[rule]]
tool = "codex.exec"
args = { "/argv/0" = "^touch$" }
decision = "allow"
"#;
    let env = CodexEnv::start(
        "policy",
        Some(policy),
        vec![
            exec("call_r1", "rm -f keep.txt"),
            exec("call_r2", "touch ok.txt"),
            exec("call_r3", "touch x.txt && rm -f keep.txt"),
            say("done"),
        ],
    );
    std::fs::write(env.ws().join("keep.txt"), "keep").unwrap();
    let run = env.spawn_run("clean up", &[]);
    // The compound third call reads as `bash -c ...`: neither rule matches it,
    // so a person is asked.
    let asked = env.pending();
    assert_eq!(
        call(&asked).1["argv"],
        json!(["bash", "-c", "touch x.txt && rm -f keep.txt"])
    );
    env.respond(
        &asked,
        &InteractionResponse::approval(asked.id(), false, ApprovalScope::Once),
    );
    let run = run.wait();
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(env.ws().join("keep.txt").exists(), "rm ran");
    assert!(env.ws().join("ok.txt").exists(), "{}", run.stderr);
    assert!(!env.ws().join("x.txt").exists());
    let after_rm = said(&env.model.input_of(1));
    assert!(after_rm.contains("agents never delete files"), "{after_rm}");
    assert!(
        run.stderr
            .contains("denied by lev's policy: agents never delete files -> decline"),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr
            .contains("`touch ok.txt`: allowed by lev's policy -> accept"),
        "{}",
        run.stderr
    );
}

#[test]
fn codex_run_an_always_approval_gives_codex_its_prefix_rule_only_with_codex_rules() {
    for with_rules in [false, true] {
        let env = CodexEnv::start(
            "always",
            None,
            vec![
                escalated("call_w1", "touch ../always.txt", "needs always.txt"),
                say("done"),
            ],
        );
        let flags: &[&str] = if with_rules { &["--codex-rules"] } else { &[] };
        let run = env.spawn_run("make a file", flags);
        let asked = env.pending();
        // The model asked to run it outside the sandbox: lev's policy
        // judges it with full access.
        assert_eq!(sandbox_of(&asked), "danger-full-access");
        env.respond(&asked, &approve(&asked, ApprovalScope::Always));
        let run = run.wait();
        assert_eq!(run.code, 0, "{}", run.stderr);
        let rules = std::fs::read_to_string(env.codex_home().join("rules/default.rules"))
            .unwrap_or_default();
        if with_rules {
            assert!(
                run.stderr
                    .contains("(always grant) -> acceptWithExecpolicyAmendment"),
                "{}",
                run.stderr
            );
            assert!(
                rules.contains("prefix_rule(pattern=[\"touch\""),
                "Codex wrote its rule: {rules:?}"
            );
        } else {
            assert!(
                run.stderr.contains("(always grant) -> acceptForSession"),
                "{}",
                run.stderr
            );
            assert_eq!(rules, "", "no Codex rule without --codex-rules");
        }
        let grants = block_on(env.served.approver.grants()).unwrap();
        assert!(
            grants
                .iter()
                .any(|g| g.scope == ApprovalScope::Always && g.tool_name == "codex.exec"),
            "{grants:?}"
        );
    }
}

#[test]
fn codex_run_ctrl_c_interrupts_the_turn_and_cancels_the_question() {
    let env = CodexEnv::start(
        "interrupt",
        None,
        vec![exec("call_i1", "touch never.txt"), say("unreachable")],
    );
    let run = env.spawn_run("make a file", &[]);
    let asked = env.pending();
    run.interrupt();
    let run = run.wait();
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(!env.ws().join("never.txt").exists());
    assert!(
        run.stderr.contains("interrupting the turn (Ctrl-C)"),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr.contains("lev: the turn was cancelled"),
        "{}",
        run.stderr
    );
    env.served.wait_status(
        &asked.request.session_id,
        asked.id(),
        InteractionStatus::Cancelled,
    );
}
