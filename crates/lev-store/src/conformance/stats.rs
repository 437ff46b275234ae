//! The stats report (`GET /v1/stats`): counts per kind and rule over a
//! window, rates, decision times and answerers, as any backend stores them.

use lev_protocol::GateNote;
use time::{Duration, OffsetDateTime};

use super::Backend;
use super::fixtures::{answer, free_text_in, tool_approval};
use crate::{NewAnswer, NewInteraction, TransitionOutcome};

fn at(mut new: NewInteraction, created: OffsetDateTime, rule: Option<u64>) -> NewInteraction {
    new.interaction.created_at = created;
    if let Some(line) = rule {
        new.interaction.request.gate = Some(GateNote {
            rule_line: Some(line),
            ..GateNote::default()
        });
    }
    new
}

fn decision(id: &str, approved: bool, by: &str, when: OffsetDateTime) -> NewAnswer {
    let mut a = answer(id, "", by);
    a.response.value = None;
    a.response.approved = Some(approved);
    a.answered_at = when;
    a
}

pub async fn stats_count_a_window_per_kind_and_rule(b: &dyn Backend) {
    let store = b.open().await;
    let now = OffsetDateTime::now_utc().replace_millisecond(0).unwrap();
    let from = now - Duration::hours(1);
    let t0 = now - Duration::minutes(30);
    // Before the window: not counted.
    store
        .create_interaction(at(
            free_text_in("ir_old", "s"),
            from - Duration::minutes(5),
            None,
        ))
        .await
        .unwrap();
    for (id, rule) in [("ir_t1", 7), ("ir_t2", 7), ("ir_t3", 7), ("ir_t4", 7)] {
        store
            .create_interaction(at(tool_approval(id, "s"), t0, Some(rule)))
            .await
            .unwrap();
    }
    store
        .create_interaction(at(tool_approval("ir_t5", "s"), t0, None))
        .await
        .unwrap();
    for id in ["ir_f1", "ir_f2", "ir_f3"] {
        store
            .create_interaction(at(free_text_in(id, "s"), t0, None))
            .await
            .unwrap();
    }
    for (id, approved, by, after) in [
        ("ir_t1", true, "alice", 10),
        ("ir_t2", true, "alice", 20),
        ("ir_t3", false, "bob", 100),
    ] {
        let done = store
            .answer_interaction(decision(id, approved, by, t0 + Duration::seconds(after)))
            .await
            .unwrap();
        assert!(matches!(done, TransitionOutcome::Done(_)), "{id}");
    }
    let mut text = answer("ir_f1", "yes", "carol");
    text.answered_at = t0 + Duration::seconds(4);
    store.answer_interaction(text).await.unwrap();
    store.cancel_interaction("ir_f2", "worker").await.unwrap();

    let stats = store
        .interaction_stats(from, now + Duration::minutes(1))
        .await
        .unwrap();
    assert!(!stats.truncated);
    assert_eq!(stats.total.asked, 8);
    assert_eq!(stats.total.pending, 3);
    assert_eq!(stats.groups.len(), 3, "{:?}", stats.groups);
    let group = |kind: &str, rule: &str| {
        stats
            .groups
            .iter()
            .find(|g| g.kind == kind && g.rule == rule)
            .unwrap_or_else(|| panic!("no group {kind} {rule} in {:?}", stats.groups))
            .clone()
    };
    let tools = group("tool_approval", "line 7");
    assert_eq!(stats.groups[0], tools, "most asked first");
    assert_eq!(
        (tools.asked, tools.pending, tools.approved, tools.denied),
        (4, 1, 2, 1)
    );
    assert_eq!(tools.approval_rate, Some(2.0 / 3.0));
    assert_eq!(tools.denial_rate, Some(1.0 / 3.0));
    assert_eq!(tools.p50_decision_s, Some(20.0));
    assert_eq!(tools.p95_decision_s, Some(100.0));
    let top: Vec<(&str, u64)> = tools
        .top_answerers
        .iter()
        .map(|a| (a.name.as_str(), a.count))
        .collect();
    assert_eq!(top, [("alice", 2), ("bob", 1)]);
    let direct = group("tool_approval", "none");
    assert_eq!((direct.asked, direct.pending), (1, 1));
    assert_eq!(direct.approval_rate, None);
    assert_eq!(direct.p50_decision_s, None);
    let texts = group("free_text", "none");
    assert_eq!(
        (texts.asked, texts.pending, texts.answered, texts.cancelled),
        (3, 1, 1, 1)
    );
    assert_eq!(texts.p50_decision_s.map(|s| s >= 4.0), Some(true));
    assert_eq!(texts.approval_rate, None, "rates are of tool approvals");
    assert_eq!(stats.total.approval_rate, Some(2.0 / 3.0));
    assert_eq!(texts.top_answerers[0].name, "carol");

    // A window holding none of them.
    let empty = store
        .interaction_stats(from - Duration::hours(5), from - Duration::hours(4))
        .await
        .unwrap();
    assert_eq!(empty.total.asked, 0);
    assert!(empty.groups.is_empty());
}
