//! `GET /v1/stats`: the report over a window, computed from interactions as
//! any backend lists them ([`InteractionStore::list_interactions`], newest
//! first), so every backend gives the same numbers.

use std::collections::{BTreeMap, HashMap};

use lev_protocol::stats::{AnswererCount, Stats, StatsGroup};
use lev_protocol::{Interaction, InteractionStatus};
use time::OffsetDateTime;

use crate::{InteractionStore, ListFilter, Result};

/// The most interactions one report reads (newest first); past it the
/// report says `truncated`.
pub const MAX_READ: usize = 200_000;

/// How many answerers a group names.
const TOP: usize = 5;

/// The rule an interaction was asked by: `line N`, else `none`.
pub fn rule_of(interaction: &Interaction) -> String {
    match interaction.request.gate.as_ref().and_then(|g| g.rule_line) {
        Some(line) => format!("line {line}"),
        None => "none".to_owned(),
    }
}

/// The report over the interactions `store` holds created in `[from, to)`.
///
/// # Errors
/// The store's.
pub async fn by_listing<S: InteractionStore + ?Sized>(
    store: &S,
    from: OffsetDateTime,
    to: OffsetDateTime,
) -> Result<Stats> {
    let mut filter = ListFilter {
        status: None,
        session_id: None,
        limit: 500,
        before: None,
    };
    let mut window = Vec::new();
    let mut read = 0;
    let mut truncated = false;
    loop {
        let page = store.list_interactions(filter.clone()).await?;
        read += page.items.len();
        let mut older = 0;
        for view in &page.items {
            let at = view.request.created_at;
            if at < from {
                older += 1;
            } else if at < to {
                let approved = view.response.as_ref().and_then(|r| r.approved);
                window.push((view.request.clone(), approved));
            }
        }
        // Newest first: a page wholly before the window ends the walk.
        if older == page.items.len() {
            break;
        }
        match page.next_before {
            Some(_) if read >= MAX_READ => {
                truncated = true;
                break;
            }
            Some(before) => filter.before = Some(before),
            None => break,
        }
    }
    let mut stats = compute(&window, from, to);
    stats.truncated = truncated;
    Ok(stats)
}

#[derive(Default)]
struct Tally {
    group: StatsGroup,
    /// Tool approvals out of pending: what the rates are over.
    decided_tools: u64,
    seconds: Vec<f64>,
    answerers: HashMap<String, u64>,
}

impl Tally {
    fn add(&mut self, i: &Interaction, approved: Option<bool>) {
        let g = &mut self.group;
        g.asked += 1;
        if i.status != InteractionStatus::Pending
            && matches!(
                i.request.kind,
                lev_protocol::InteractionKind::ToolApproval { .. }
            )
        {
            self.decided_tools += 1;
        }
        match i.status {
            InteractionStatus::Pending => g.pending += 1,
            InteractionStatus::Expired => g.expired += 1,
            InteractionStatus::Cancelled => g.cancelled += 1,
            InteractionStatus::Answered => {
                match approved {
                    Some(true) => g.approved += 1,
                    Some(false) => g.denied += 1,
                    None => g.answered += 1,
                }
                if let Some(by) = &i.answered_by {
                    *self.answerers.entry(by.clone()).or_default() += 1;
                }
            }
        }
        if let Some(at) = i.answered_at
            && i.status != InteractionStatus::Pending
        {
            self.seconds
                .push((at - i.created_at).as_seconds_f64().max(0.0));
        }
    }

    fn finish(mut self) -> StatsGroup {
        let mut g = self.group;
        let decided = self.decided_tools;
        if decided > 0 {
            g.approval_rate = Some(g.approved as f64 / decided as f64);
            g.denial_rate = Some(g.denied as f64 / decided as f64);
        }
        self.seconds.sort_by(f64::total_cmp);
        g.p50_decision_s = percentile(&self.seconds, 0.50);
        g.p95_decision_s = percentile(&self.seconds, 0.95);
        let mut top: Vec<AnswererCount> = self
            .answerers
            .into_iter()
            .map(|(name, count)| AnswererCount { name, count })
            .collect();
        top.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.name.cmp(&b.name)));
        top.truncate(TOP);
        g.top_answerers = top;
        g
    }
}

/// Nearest-rank percentile of sorted values.
fn percentile(sorted: &[f64], p: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = ((sorted.len() as f64 * p).ceil() as usize).clamp(1, sorted.len());
    Some(sorted[rank - 1])
}

/// The report over `window` (the interactions created in `[from, to)`, each
/// with its answer's `approved`).
pub fn compute(
    window: &[(Interaction, Option<bool>)],
    from: OffsetDateTime,
    to: OffsetDateTime,
) -> Stats {
    let mut total = Tally::default();
    let mut groups: BTreeMap<(String, String), Tally> = BTreeMap::new();
    for (i, approved) in window {
        total.add(i, *approved);
        groups
            .entry((i.request.kind.type_name().to_owned(), rule_of(i)))
            .or_default()
            .add(i, *approved);
    }
    let mut total = total.finish();
    total.kind = "*".into();
    total.rule = "*".into();
    let mut groups: Vec<StatsGroup> = groups
        .into_iter()
        .map(|((kind, rule), tally)| {
            let mut g = tally.finish();
            g.kind = kind;
            g.rule = rule;
            g
        })
        .collect();
    groups.sort_by_key(|g| std::cmp::Reverse(g.asked));
    Stats {
        from,
        to,
        total,
        groups,
        truncated: false,
    }
}
