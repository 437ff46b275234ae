//! `GET /v1/stats` and `lev stats`: how human review performed over a time
//! window, per kind and policy rule.

use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

/// The report over the interactions created in `[from, to)`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Stats {
    /// The window's start (inclusive).
    #[serde(with = "time::serde::rfc3339")]
    pub from: OffsetDateTime,
    /// The window's end (exclusive).
    #[serde(with = "time::serde::rfc3339")]
    pub to: OffsetDateTime,
    /// Every interaction of the window together.
    pub total: StatsGroup,
    /// One row per (kind, rule), most asked first.
    pub groups: Vec<StatsGroup>,
    /// Whether the window held more interactions than one report reads
    /// (the most recent ones were counted).
    #[serde(default)]
    pub truncated: bool,
}

/// The counts of one kind and rule (or of everything, for the total).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct StatsGroup {
    /// The interaction kind (`tool_approval`, `free_text`, ...); `*` in the
    /// total.
    pub kind: String,
    /// The policy rule that asked (`line N` of the policy file), `none` when
    /// asked directly; `*` in the total.
    pub rule: String,
    /// Interactions created.
    pub asked: u64,
    /// Still pending.
    pub pending: u64,
    /// Tool approvals approved.
    pub approved: u64,
    /// Tool approvals denied (by a person, an operator, or a timeout's
    /// `deny` as an answer).
    pub denied: u64,
    /// Other kinds answered.
    pub answered: u64,
    /// Expired (`on_timeout: deny`).
    pub expired: u64,
    /// Cancelled (by the worker, or a timeout's `cancel`).
    pub cancelled: u64,
    /// `approved` over the tool approvals decided (approved, denied,
    /// expired or cancelled); absent when there is none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval_rate: Option<f64>,
    /// `denied` over the tool approvals decided.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub denial_rate: Option<f64>,
    /// Median seconds from creation to decision, of the decided.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p50_decision_s: Option<f64>,
    /// 95th percentile seconds from creation to decision.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p95_decision_s: Option<f64>,
    /// Who answered most (approved, denied or answered), most first, at
    /// most five.
    #[serde(default)]
    pub top_answerers: Vec<AnswererCount>,
}

/// One answerer and how many they answered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AnswererCount {
    /// The token's name (or `timeout`, an operator's name).
    pub name: String,
    /// How many.
    pub count: u64,
}
