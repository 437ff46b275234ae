//! Slack, against a fake of its Web API on loopback (nothing reaches
//! Slack): interactions posted with Block Kit, 429 `Retry-After` honoured,
//! signed clicks and modal submissions as Slack documents them, and every
//! hostile request (forged, stale, replayed, unmapped user, revoked token,
//! a click on a decided interaction) refused with nothing changed.

use lev_protocol::{InteractionKind, InteractionResponse, InteractionStatus};
use serde_json::{Value, json};
use std::sync::Arc;

use crate::client_env::{LevServer, assert_code, block_on};
use crate::receiver::{Receiver, Request};

const SECRET: &str = "8f742231b10e8888abcd99yyyzzz85a5";

/// Slack's Web API: `ok` answers, a channel and ts for posts, and one 429
/// (Retry-After: 1) for the first post.
fn fake_slack() -> Receiver {
    Receiver::start(Arc::new(|req: &Request, before: &[Request]| {
        let method = req.path.rsplit('/').next().unwrap_or_default().to_owned();
        let first_post = method == "chat.postMessage"
            && !before.iter().any(|r| r.path.ends_with("chat.postMessage"));
        if first_post {
            return (
                429,
                vec![("retry-after".into(), "1".into())],
                br#"{"ok":false,"error":"ratelimited"}"#.to_vec(),
            );
        }
        let n = before.len();
        let body = match method.as_str() {
            "chat.postMessage" => {
                json!({"ok": true, "channel": "C0APPROVE", "ts": format!("1700000000.{n:06}")})
            }
            _ => json!({"ok": true}),
        };
        (200, vec![], body.to_string().into_bytes())
    }))
}

struct Setup {
    server: LevServer,
    slack: Receiver,
}

fn setup(name: &str) -> Setup {
    setup_with(name, &[])
}

fn setup_with(name: &str, extra: &[&str]) -> Setup {
    let slack = fake_slack();
    let dir = crate::support::Scratch::new(name);
    std::fs::write(dir.path("bot.token"), "xoxb-test-token\n").unwrap();
    std::fs::write(dir.path("signing.secret"), format!("{SECRET}\n")).unwrap();
    let config = format!(
        "bot_token_file = \"bot.token\"\nsigning_secret_file = \"signing.secret\"\n\
         channel = \"C0APPROVE\"\napi_url = \"{}\"\n\n[users]\nU0ALICE = \"alice\"\n\
         U0BOB = \"bob\"\n",
        slack.url("/api/")
    );
    std::fs::write(dir.path("slack.toml"), config).unwrap();
    let config_path = dir.path("slack.toml");
    let mut args = vec![
        "--slack-config",
        config_path.to_str().unwrap(),
        "--webhook-retry",
        "200ms,2s,1h",
        // The fake Slack listens on loopback.
        "--webhook-allow",
        "127.0.0.0/8",
    ];
    args.extend_from_slice(extra);
    let server = LevServer::start_with(name, &args);
    std::mem::forget(dir);
    for who in ["alice", "bob"] {
        assert_code(
            &server.lev(&["token", "create", who, "--role", "approver"]),
            0,
        );
    }
    Setup { server, slack }
}

fn calls(slack: &Receiver, method: &str) -> Vec<Request> {
    slack
        .requests()
        .into_iter()
        .filter(|r| r.path.ends_with(method) && r.status == 200)
        .collect()
}

fn wait_calls(slack: &Receiver, method: &str, n: usize) -> Vec<Request> {
    slack.wait_for(&format!("{n} {method}"), |all| {
        all.iter()
            .filter(|r| r.path.ends_with(method) && r.status == 200)
            .count()
            >= n
    });
    calls(slack, method)
}

fn now() -> i64 {
    time::OffsetDateTime::now_utc().unix_timestamp()
}

fn form(payload: &Value) -> String {
    let mut out = String::from("payload=");
    for b in payload.to_string().bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// POST a form body to the interactivity URL with these headers.
fn post(server: &LevServer, body: &str, ts: &str, signature: &str) -> (u16, String) {
    let url = format!("{}/v1/integrations/slack/interactions", server.url);
    block_on(async {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let r = reqwest::Client::builder()
            .no_proxy()
            .build()
            .unwrap()
            .post(url)
            .header("content-type", "application/x-www-form-urlencoded")
            .header("x-slack-request-timestamp", ts)
            .header("x-slack-signature", signature)
            .body(body.to_owned())
            .send()
            .await
            .unwrap();
        (r.status().as_u16(), r.text().await.unwrap())
    })
}

/// POST signed as Slack signs.
fn signed(server: &LevServer, payload: &Value) -> (u16, String, String, String) {
    let body = form(payload);
    let ts = now().to_string();
    let sig = lev_slack::sign(SECRET.as_bytes(), &ts, body.as_bytes());
    let (status, text) = post(server, &body, &ts, &sig);
    (status, text, ts, sig)
}

fn click(user: &str, action: &str, id: &str) -> Value {
    json!({
        "type": "block_actions",
        "user": {"id": user, "username": user.to_lowercase(), "team_id": "T0TEAM"},
        "api_app_id": "A0APP",
        "token": "legacy-verification-token",
        "container": {"type": "message", "message_ts": "1700000000.000001",
                      "channel_id": "C0APPROVE", "is_ephemeral": false},
        "trigger_id": "13345224609.738474920.8088930838d88f008e0",
        "team": {"id": "T0TEAM", "domain": "example"},
        "channel": {"id": "C0APPROVE", "name": "approvals"},
        "message": {"type": "message", "ts": "1700000000.000001", "text": "lev"},
        "response_url": "https://hooks.slack.com/actions/T0TEAM/1/abc",
        "actions": [{"action_id": action, "block_id": "lev_actions", "value": id,
                     "type": "button", "action_ts": "1700000001.1"}]
    })
}

fn tool(args: &str) -> InteractionKind {
    InteractionKind::ToolApproval {
        tool_name: "shell".into(),
        args_json: args.into(),
        missing_capabilities: vec!["exec".into()],
        sandbox_mode: "workspace-write".into(),
        options: vec![],
    }
}

fn status(server: &LevServer, id: &str) -> (InteractionStatus, Value) {
    let view = block_on(server.client().get_interaction(id)).unwrap();
    (view.request.status, serde_json::to_value(&view).unwrap())
}

#[test]
fn approvals_from_slack_and_every_hostile_request_refused() {
    let Setup { server, slack } = setup("slack");
    let q = server.create("s-slack", tool(r#"{"argv":["deploy","<!channel> *now*"]}"#));
    let id = q.id().to_owned();

    // Posted after one 429, no sooner than its Retry-After.
    let posts = wait_calls(&slack, "chat.postMessage", 1);
    let all = slack.requests();
    let limited = all
        .iter()
        .position(|r| r.status == 429)
        .expect("the 429 was hit");
    assert!(
        all[limited].path.ends_with("chat.postMessage"),
        "{:?}",
        all[limited]
    );
    let posted = &posts[0];
    assert_eq!(
        posted.header("authorization"),
        Some("Bearer xoxb-test-token")
    );
    let body = posted.json();
    assert_eq!(body["channel"], "C0APPROVE");
    let text = body["blocks"].to_string();
    assert!(text.contains("&lt;!channel&gt;"), "escaped: {text}");
    assert!(!text.contains("<!channel>"), "{text}");
    let buttons: Vec<&Value> = body["blocks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|b| b["type"] == "actions")
        .flat_map(|b| b["elements"].as_array().unwrap())
        .collect();
    let ids: Vec<&str> = buttons
        .iter()
        .map(|b| b["action_id"].as_str().unwrap())
        .collect();
    for want in ["approve_once", "approve_session", "deny", "deny_feedback"] {
        assert!(ids.contains(&want), "{ids:?}");
    }
    assert!(buttons.iter().all(|b| b["value"] == id.as_str()));
    // The delivery log shows the 429 and the retry.
    let log = server
        .lev(&["webhook", "deliveries", "wh_slack", "--json"])
        .json();
    let first = log
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["event"] == "interaction.created")
        .unwrap();
    let statuses: Vec<Value> = first["attempts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["status"].clone())
        .collect();
    assert_eq!(statuses, [json!(429), json!(200)]);
    let gap = time::OffsetDateTime::parse(
        first["attempts"][1]["at"].as_str().unwrap(),
        &time::format_description::well_known::Rfc3339,
    )
    .unwrap()
        - time::OffsetDateTime::parse(
            first["attempts"][0]["at"].as_str().unwrap(),
            &time::format_description::well_known::Rfc3339,
        )
        .unwrap();
    assert!(
        gap >= time::Duration::milliseconds(900),
        "Retry-After honoured: {gap}"
    );

    // Forged, stale, unsigned: 401, nothing changes.
    let body = form(&click("U0ALICE", "approve_once", &id));
    let ts = now().to_string();
    let forged = lev_slack::sign(b"not the secret", &ts, body.as_bytes());
    assert_eq!(post(&server, &body, &ts, &forged).0, 401);
    let old = (now() - 600).to_string();
    let stale = lev_slack::sign(SECRET.as_bytes(), &old, body.as_bytes());
    let (code, text) = post(&server, &body, &old, &stale);
    assert_eq!(code, 401, "{text}");
    assert!(text.contains("error"), "a JSON error body: {text}");
    let sig = lev_slack::sign(SECRET.as_bytes(), &ts, body.as_bytes());
    let tampered = body.replace("approve_once", "approve_session");
    assert_eq!(post(&server, &tampered, &ts, &sig).0, 401);
    assert_eq!(post(&server, "payload=%7B%7D", "", "").0, 401);
    assert_eq!(status(&server, &id).0, InteractionStatus::Pending);

    // An unmapped user: told so, nothing decided.
    let (code, ..) = signed(&server, &click("U0EVE", "approve_once", &id));
    assert_eq!(code, 200);
    let eph = wait_calls(&slack, "chat.postEphemeral", 1);
    assert_eq!(eph[0].json()["user"], "U0EVE");
    assert!(
        eph[0].json()["text"]
            .as_str()
            .unwrap()
            .contains("not a lev approver")
    );
    assert_eq!(status(&server, &id).0, InteractionStatus::Pending);

    // A revoked person's token: refused.
    assert_code(&server.lev(&["token", "revoke", "bob"]), 0);
    let (code, ..) = signed(&server, &click("U0BOB", "approve_once", &id));
    assert_eq!(code, 200);
    let eph = wait_calls(&slack, "chat.postEphemeral", 2);
    assert!(eph[1].json()["text"].as_str().unwrap().contains("revoked"));
    assert_eq!(status(&server, &id).0, InteractionStatus::Pending);

    // Alice approves for the session: her decision, signed with her name.
    let (code, text, ts, sig) = signed(&server, &click("U0ALICE", "approve_session", &id));
    assert_eq!(code, 200, "{text}");
    let (st, view) = status(&server, &id);
    assert_eq!(st, InteractionStatus::Answered);
    assert_eq!(view["request"]["answered_by"], "alice");
    assert_eq!(view["response"]["scope"], "session");
    assert!(view["approval"].is_object(), "a signed decision: {view}");
    // The message is updated to say so.
    let updates = wait_calls(&slack, "chat.update", 1);
    let update = updates[0].json();
    assert_eq!(update["channel"], "C0APPROVE");
    assert!(
        update["ts"].as_str().unwrap().starts_with("1700000000."),
        "the posted message's ts: {update}"
    );
    let blocks = update["blocks"].to_string();
    assert!(blocks.contains("alice"), "{blocks}");
    assert!(
        !update["blocks"]
            .as_array()
            .unwrap()
            .iter()
            .any(|b| b["type"] == "actions" && b["block_id"] == "lev_actions"),
        "no buttons once decided: {blocks}"
    );

    // The same signed request again: a replay, refused.
    let body = form(&click("U0ALICE", "approve_session", &id));
    let (code, text) = post(&server, &body, &ts, &sig);
    assert_eq!(code, 401, "{text}");
    assert!(text.contains("replay"), "{text}");

    // A fresh click on the decided interaction: told, nothing changes.
    let (code, ..) = signed(&server, &click("U0ALICE", "deny", &id));
    assert_eq!(code, 200);
    let eph = wait_calls(&slack, "chat.postEphemeral", 3);
    assert!(
        eph[2].json()["text"]
            .as_str()
            .unwrap()
            .contains("Already decided"),
        "{:?}",
        eph[2].json()
    );
    let (_, after) = status(&server, &id);
    assert_eq!(after["response"], view["response"]);

    // The audit log names alice.
    let audit = server.lev(&["audit", "--json"]);
    assert!(audit.stdout.contains("\"alice\""), "{}", audit.stdout);
}

#[test]
fn deny_with_feedback_through_a_modal_and_updates_from_other_channels() {
    let Setup { server, slack } = setup("slack-modal");
    let q = server.create("s-modal", tool(r#"{"argv":["rm","-rf","build"]}"#));
    let id = q.id().to_owned();
    wait_calls(&slack, "chat.postMessage", 1);

    let (code, ..) = signed(&server, &click("U0ALICE", "deny_feedback", &id));
    assert_eq!(code, 200);
    let opens = wait_calls(&slack, "views.open", 1);
    let open = opens[0].json();
    assert_eq!(
        open["trigger_id"],
        "13345224609.738474920.8088930838d88f008e0"
    );
    assert_eq!(open["view"]["callback_id"], "lev_deny_feedback");
    assert_eq!(open["view"]["private_metadata"], id.as_str());
    assert_eq!(status(&server, &id).0, InteractionStatus::Pending);

    let submission = json!({
        "type": "view_submission",
        "team": {"id": "T0TEAM", "domain": "example"},
        "user": {"id": "U0ALICE", "username": "alice", "team_id": "T0TEAM"},
        "api_app_id": "A0APP",
        "trigger_id": "12466734323.1395872398",
        "view": {
            "id": "V0MODAL", "type": "modal", "callback_id": "lev_deny_feedback",
            "private_metadata": id,
            "state": {"values": {"feedback": {"text": {
                "type": "plain_text_input", "value": "use the staging cluster"}}}}
        }
    });
    // An unmapped user's submission shows an error in the modal.
    let mut eve = submission.clone();
    eve["user"]["id"] = json!("U0EVE");
    let (code, text, ..) = signed(&server, &eve);
    assert_eq!(code, 200);
    let answer: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(answer["response_action"], "errors");
    assert_eq!(status(&server, &id).0, InteractionStatus::Pending);

    let (code, text, ..) = signed(&server, &submission);
    assert_eq!(code, 200, "{text}");
    assert!(text.is_empty(), "an empty 200 closes the modal: {text}");
    let (st, view) = status(&server, &id);
    assert_eq!(st, InteractionStatus::Answered);
    assert_eq!(view["response"]["approved"], false);
    assert_eq!(view["response"]["feedback"], "use the staging cluster");
    assert_eq!(view["request"]["answered_by"], "alice");
    let updates = wait_calls(&slack, "chat.update", 1);
    assert!(
        updates[0].json()["blocks"]
            .to_string()
            .contains("use the staging cluster")
    );

    // Decided elsewhere (the CLI): the Slack message is updated too.
    let other = server.create("s-modal", tool(r#"{"argv":["ls"]}"#));
    wait_calls(&slack, "chat.postMessage", 2);
    block_on(server.client().respond(
        other.id(),
        &InteractionResponse::approval(other.id(), true, lev_protocol::ApprovalScope::Once),
    ))
    .unwrap();
    let updates = wait_calls(&slack, "chat.update", 2);
    assert!(updates[1].json()["blocks"].to_string().contains("admin"));
}

#[test]
fn a_pending_interaction_is_reminded_in_its_thread() {
    let Setup { server, slack } = setup_with("slack-remind", &["--remind-after", "1s"]);
    let q = server.create("s-remind", tool(r#"{"argv":["make","release"]}"#));
    wait_calls(&slack, "chat.postMessage", 1);
    let all = slack.wait_for("a reminder in the thread", |all| {
        all.iter()
            .any(|r| r.status == 200 && r.json().get("thread_ts").is_some())
    });
    let reply = all
        .iter()
        .find(|r| r.status == 200 && r.json().get("thread_ts").is_some())
        .unwrap()
        .json();
    assert_eq!(reply["channel"], "C0APPROVE");
    assert!(
        reply["thread_ts"]
            .as_str()
            .unwrap()
            .starts_with("1700000000.")
    );
    assert!(
        reply["text"].as_str().unwrap().contains("Still waiting"),
        "{reply}"
    );
    assert!(reply["text"].as_str().unwrap().contains(q.id()));
}

#[test]
fn a_bad_slack_config_stops_the_server_with_the_field_named() {
    let dir = crate::support::Scratch::new("slack-bad");
    let cases: &[(&str, &str)] = &[
        (
            "channel = \"C1\"\nsigning_secret_file = \"s\"\n",
            "bot_token_file",
        ),
        (
            "bot_token_file = \"missing.token\"\nsigning_secret_file = \"s\"\nchannel = \"C1\"\n",
            "missing.token",
        ),
        (
            "bot_token_file = \"s\"\nsigning_secret_file = \"s\"\nchannel = \"C1\"\napi_url = \"ftp://x\"\n",
            "api_url",
        ),
    ];
    std::fs::write(dir.path("s"), "secret\n").unwrap();
    for (i, (text, field)) in cases.iter().enumerate() {
        let file = dir.path(&format!("slack{i}.toml"));
        std::fs::write(&file, text).unwrap();
        let run = crate::support::lev([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--data-dir",
            dir.path(&format!("data{i}")).to_str().unwrap(),
            "--slack-config",
            file.to_str().unwrap(),
        ]);
        assert_ne!(run.code, 0);
        assert!(
            run.stderr.contains("--slack-config") && run.stderr.contains(field),
            "expected {field}:\n{}",
            run.stderr
        );
        assert!(
            !dir.path(&format!("data{i}")).join("lev.db").exists(),
            "nothing made before the config is checked"
        );
    }
}

/// Quorum from Slack (SPEC section 13): each mapped person's click is their
/// vote; the message shows the tally and offers no session grant; the
/// second approval decides; the escalation is said in the thread.
#[test]
fn votes_from_slack_wait_for_the_quorum() {
    let dir = crate::support::Scratch::new("slack-quorum-policy");
    let policy = dir.write(
        "policy.toml",
        "default = \"ask\"\n[[tool]]\nname = \"shell\"\napprovals = 2\napprovers = [\"alice\", \"bob\"]\nescalate_after_s = 1\nescalate_to = [\"carol\"]\n",
    );
    let Setup { server, slack } =
        setup_with("slack-quorum", &["--policy", policy.to_str().unwrap()]);
    let q = server.create("s-quorum", tool(r#"{"argv":["make","deploy"]}"#));
    let posted = wait_calls(&slack, "chat.postMessage", 1)[0].json();
    let buttons: Vec<String> = posted["blocks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|b| b["type"] == "actions")
        .flat_map(|b| b["elements"].as_array().unwrap().clone())
        .map(|e| e["action_id"].as_str().unwrap().to_owned())
        .collect();
    assert!(
        !buttons.iter().any(|a| a == "approve_session"),
        "{buttons:?}"
    );
    assert!(posted.to_string().contains("0 of 2"), "{posted}");

    // alice's click is one vote of two: she is told, nothing is decided.
    let (code, _, _, _) = signed(&server, &click("U0ALICE", "approve_once", q.id()));
    assert_eq!(code, 200);
    let eph = wait_calls(&slack, "chat.postEphemeral", 1);
    let told = eph[0].json()["text"].as_str().unwrap().to_owned();
    assert!(told.contains("Your vote is in: 1 of 2"), "{told}");
    let (st, view) = status(&server, q.id());
    assert_eq!(st, InteractionStatus::Pending);
    assert_eq!(view["request"]["votes"][0]["voter"], "alice");
    // The message is updated with the tally.
    let updated = slack.wait_for("the message updated with alice's vote", |all| {
        all.iter()
            .any(|r| r.path.ends_with("chat.update") && r.json().to_string().contains("1 of 2"))
    });
    assert!(
        updated
            .iter()
            .any(|r| r.json().to_string().contains("alice approved"))
    );
    // alice again (another click, not a replay): one vote each.
    let mut again = click("U0ALICE", "approve_once", q.id());
    again["actions"][0]["action_ts"] = json!("1700000002.2");
    signed(&server, &again);
    let eph = wait_calls(&slack, "chat.postEphemeral", 2);
    let told = eph[1].json()["text"].as_str().unwrap().to_owned();
    assert!(told.contains("voted on this call already"), "{told}");
    // The escalation after a second is said in the thread.
    slack.wait_for("the escalation in the thread", |all| {
        all.iter().any(|r| {
            r.status == 200
                && r.json().get("thread_ts").is_some()
                && r.json()["text"]
                    .as_str()
                    .is_some_and(|t| t.contains("Escalated: carol"))
        })
    });
    // bob's click decides.
    signed(&server, &click("U0BOB", "approve_once", q.id()));
    let decided = block_on(server.client().wait(q.id(), 10)).unwrap();
    assert_eq!(decided.status, InteractionStatus::Answered);
    assert_eq!(decided.answered_by.as_deref(), Some("bob"));
    let approval = decided.approval.unwrap();
    assert_eq!(
        approval.payload_type,
        lev_protocol::APPROVAL_PAYLOAD_TYPE_V2
    );
}

/// Issue 28: the replay guard remembered the header as written, so the same
/// signature with its hex in upper case (or mixed) was taken again; and it
/// lived in one process's memory, so a restart (or another replica) took
/// the replay. Now it remembers the signature's bytes in the store.
#[test]
fn a_replay_is_refused_in_any_spelling_and_after_a_restart() {
    let Setup {
        server,
        slack: _slack,
    } = setup("slack-replay-spelling");
    let q = server.create("s-replay", tool(r#"{"argv":["ls"]}"#));
    // A click that changes nothing ("Open in lev" is a link).
    let payload = click("U0ALICE", "open", q.id());
    let (code, text, ts, sig) = signed(&server, &payload);
    assert_eq!(code, 200, "{text}");
    let body = form(&payload);
    let hex = sig.strip_prefix("v0=").unwrap();
    let mixed: String = hex
        .chars()
        .enumerate()
        .map(|(i, c)| {
            if i % 2 == 0 {
                c.to_ascii_uppercase()
            } else {
                c
            }
        })
        .collect();
    for spelling in [
        format!("v0={}", hex.to_ascii_uppercase()),
        format!("v0={mixed}"),
        sig.clone(),
    ] {
        let (code, text) = post(&server, &body, &ts, &spelling);
        assert_eq!(code, 401, "{spelling}: {text}");
        assert!(text.contains("replay"), "{spelling}: {text}");
    }
    // Remembered by the store, not by the process.
    let server = server.restart();
    let (code, text) = post(
        &server,
        &body,
        &ts,
        &format!("v0={}", hex.to_ascii_uppercase()),
    );
    assert_eq!(code, 401, "after a restart: {text}");
    assert!(text.contains("replay"), "{text}");
    // A new request (another second, so another signature) is taken.
    std::thread::sleep(std::time::Duration::from_millis(1100));
    let (code, text, ..) = signed(&server, &click("U0ALICE", "open", q.id()));
    assert_eq!(code, 200, "{text}");
}
