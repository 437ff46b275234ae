//! Votes and the escalation in the real browser (SPEC section 13): the
//! dashboard of a lead (in `escalate_to`) shows the tally, who voted, who
//! may still vote and when the escalation opens; refuses the lead's vote
//! before it with the server's reason; and, once the time has passed,
//! says since when, counts the lead among who may still vote, and takes
//! the lead's vote, which decides.

use std::sync::Arc;

use lev_approval::policy::Policy;
use lev_approval::verify;
use lev_protocol::Envelope;
use lev_server::Settings;
use reqwest::StatusCode;
use serde_json::{Value, json};
use time::OffsetDateTime;

use super::browser_support::Browser;
use crate::support::TestServer;

/// Long enough for the page to be read and a vote refused before it.
const ESCALATE_AFTER_S: i64 = 10;

fn policy() -> String {
    format!(
        r#"
default = "ask"

[groups]
oncall = ["ann", "bob", "carol"]
leads = ["dana"]

[[rule]]
tool = "deploy"
decision = "ask"
approvals = 2
approvers = ["group:oncall"]
escalate_after_s = {ESCALATE_AFTER_S}
escalate_to = ["group:leads"]
"#
    )
}

/// The text of `css` as the page holds it (`textContent`: not upper-cased
/// by the labels' style), spaces collapsed.
async fn content(b: &Browser, css: &str) -> String {
    b.wait_css(css).await;
    let text = b
        .js_with(
            "return document.querySelector(arguments[0]).textContent;",
            vec![json!(css)],
        )
        .await;
    text.as_str()
        .unwrap_or_default()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_shows_the_votes_and_the_escalation_before_and_after_it() {
    let s = TestServer::start_with(Settings {
        policy: Arc::new(Policy::parse(&policy()).unwrap()),
        policy_source: "escalation.toml".into(),
        ..Settings::default()
    })
    .await;
    let worker = s.token("agent-1", "worker", None).await;
    let ann = s.token("ann", "approver", None).await;
    let dana = s.token("dana", "approver", None).await;
    let b = Browser::start().await;
    b.goto(&format!("{}/#token={dana}", s.url)).await;
    b.wait_text("#me-name", "dana").await;

    let (status, gated) = s
        .post(
            "/v1/gate",
            &worker,
            &json!({"session_id": "s-deploy", "conversation_id": "c-1", "request_id": "deploy-1",
                    "caller": "erin", "tool_name": "deploy", "args_json": r#"{"env":"prod"}"#,
                    "sandbox_mode": "prod"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{gated}");
    let id = gated["interaction_id"].as_str().unwrap().to_owned();
    let (status, r) = s
        .respond(
            &ann,
            &id,
            &json!({"request_id": id, "approved": true, "scope": "once"}),
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{r}");
    let (_, view) = s.get(&format!("/v1/interactions/{id}"), &s.admin).await;
    let created = OffsetDateTime::parse(
        view["request"]["created_at"].as_str().unwrap(),
        &time::format_description::well_known::Rfc3339,
    )
    .unwrap();
    let escalates_ms =
        (created.unix_timestamp_nanos() / 1_000_000) as i64 + ESCALATE_AFTER_S * 1000;

    // Before the escalation: the tally, ann's vote, who may still vote (not
    // ann, not yet dana), and when dana may vote too.
    let item = format!("#inbox-list li.item[data-id='{id}']");
    let votes = format!("#detail article.detail[data-id='{id}'] .votes");
    b.wait_css(&item).await;
    b.click(&item).await;
    b.wait_text(&format!("{votes} .vote-count"), "1 of 2 approvals")
        .await;
    let ann_vote = content(&b, &format!("{votes} .vote-list li[data-voter='ann']")).await;
    assert!(
        ann_vote.contains("ann") && ann_vote.contains("approved") && ann_vote.contains("unsigned"),
        "{ann_vote}"
    );
    assert_eq!(b.count(&format!("{votes} .vote-list li")).await, 1);
    let may = content(&b, &format!("{votes} .may-vote")).await;
    assert_eq!(may, "May still vote bob, carol");
    let escalates = content(&b, &format!("{votes} .escalates")).await;
    assert_eq!(escalates, "Escalates dana may vote too in a moment");
    let shown = b
        .js(&format!(
            "return Date.parse(document.querySelector(\"{votes} .escalates time\").getAttribute('datetime'));"
        ))
        .await;
    assert_eq!(shown.as_i64(), Some(escalates_ms), "the escalation's time");
    assert_eq!(b.count(&format!("{votes} .you-voted")).await, 0);
    b.screenshot("votes-before-escalation").await;

    // dana's vote before the escalation: refused with the server's reason,
    // nothing recorded.
    let detail = format!("#detail article.detail[data-id='{id}']");
    b.click(&format!("{detail} .approve-btn")).await;
    b.wait_text(
        &format!("{detail} .form-error"),
        "may not vote on this call",
    )
    .await;
    let error = b.text(&format!("{detail} .form-error")).await;
    assert!(error.contains("and dana from "), "{error}");
    let (_, now) = s.get(&format!("/v1/interactions/{id}"), &s.admin).await;
    assert_eq!(
        now["request"]["votes"].as_array().unwrap().len(),
        1,
        "{now}"
    );
    assert_eq!(now["request"]["status"], "pending");

    // After it: the page says since when, and dana may vote.
    let left = escalates_ms - (OffsetDateTime::now_utc().unix_timestamp_nanos() / 1_000_000) as i64;
    assert!(
        left > 0,
        "the escalation came before the page was read: raise ESCALATE_AFTER_S"
    );
    b.wait_until(
        "the page to say the escalation is open",
        &format!(
            "(document.querySelector(\"{votes} .escalates\") || {{textContent: ''}}).textContent.includes('(since')"
        ),
    )
    .await;
    let escalates = content(&b, &format!("{votes} .escalates")).await;
    assert_eq!(escalates, "Escalates dana may vote too (since just now)");
    let may = content(&b, &format!("{votes} .may-vote")).await;
    assert_eq!(may, "May still vote bob, carol, dana");
    assert_eq!(
        content(&b, &format!("{votes} .vote-count")).await,
        "1 of 2 approvals"
    );
    b.screenshot("votes-after-escalation").await;

    // dana's vote now decides.
    b.click(&format!("{detail} .approve-btn")).await;
    let (status, w) = s
        .get(&format!("/v1/interactions/{id}/wait?timeout_s=10"), &worker)
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(w["status"], "answered", "{w}");
    let approval: Envelope = serde_json::from_value(w["approval"].clone()).unwrap();
    let decision = verify(
        &approval,
        &s.trusted_keys().await,
        OffsetDateTime::now_utc(),
    )
    .unwrap();
    assert!(decision.authorizes_call("deploy-1", "deploy", r#"{"env":"prod"}"#));
    assert_eq!(decision.payload.approver, "dana");
    let voters: Vec<String> = decision
        .payload
        .votes
        .unwrap()
        .into_iter()
        .map(|v| v.voter)
        .collect();
    assert_eq!(voters, ["ann", "dana"]);
    let _: Value = w;
}
