//! The gate's policy (SPEC section 6): sandbox modes and the capabilities they
//! grant, tools and the capabilities they need, and ordered rules that allow,
//! deny or ask.
//!
//! [`Policy::parse`] reads the TOML file and reports the line of any mistake;
//! [`decide`] is the gate's decision as a pure function of the policy, the call
//! and the grants on record.

use std::collections::{BTreeMap, BTreeSet};

use regex::Regex;
use serde::Deserialize;
use serde_json::Value;
use toml::Spanned;

use crate::glob::ToolGlob;
use crate::grant::{ArgsMatcher, GrantMatch, GrantRule, shortfall};

mod wrappers;

/// The example policy shipped with lev (`lev policy example`).
pub const EXAMPLE_POLICY: &str = include_str!("example_policy.toml");

/// A mistake in a policy file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {message}")]
pub struct PolicyError {
    /// 1-based line of the mistake.
    pub line: usize,
    /// What is wrong.
    pub message: String,
}

/// What a rule decides.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RuleDecision {
    /// Allow, signed with approver `policy`.
    Allow,
    /// Deny with the rule's reason.
    Deny,
    /// Ask a person (or a grant), even when nothing is missing.
    Ask,
}

/// How risky a rule marks the calls it matches (`risk = "high"`): a
/// person deciding a call a `high` rule stopped is told so.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Risk {
    /// Nothing said.
    #[default]
    Normal,
    /// Marked high risk by the policy.
    High,
}

impl Risk {
    /// `normal` or `high`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Normal => "normal",
            Self::High => "high",
        }
    }
}

/// The `ask` rule that stopped a call for a person.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AskingRule {
    /// The line it starts on in the policy file.
    pub line: usize,
    /// Its tool glob, as written.
    pub tool: String,
    /// Its reason, as written.
    pub reason: String,
    /// Its risk.
    pub risk: Risk,
    /// `remind_after_s`: notify again while it waits this long, and every
    /// such interval after.
    pub remind_after_s: Option<u64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPolicy {
    #[serde(default = "default_true")]
    self_approval: bool,
    #[serde(default)]
    groups: BTreeMap<String, Spanned<Vec<String>>>,
    #[serde(default)]
    default: Option<RuleDecision>,
    #[serde(default)]
    sandbox_modes: BTreeMap<String, Spanned<Vec<String>>>,
    #[serde(default)]
    tool: Vec<Spanned<RawTool>>,
    #[serde(default)]
    rule: Vec<Spanned<RawRule>>,
}

fn default_true() -> bool {
    true
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTool {
    name: String,
    #[serde(default)]
    requires: Vec<String>,
    #[serde(default)]
    approvals: Option<Spanned<u32>>,
    #[serde(default)]
    approvers: Option<Spanned<Vec<String>>>,
    #[serde(default)]
    escalate_after_s: Option<Spanned<u64>>,
    #[serde(default)]
    escalate_to: Option<Spanned<Vec<String>>>,
    #[serde(default)]
    require_signed_votes: Option<Spanned<bool>>,
}

/// The quorum keys a rule or a `[[tool]]` entry may carry (SPEC section 13),
/// each with where its value is written, so that a mistake names its line.
struct RawQuorum {
    approvals: Option<Spanned<u32>>,
    approvers: Option<Spanned<Vec<String>>>,
    escalate_after_s: Option<Spanned<u64>>,
    escalate_to: Option<Spanned<Vec<String>>>,
    require_signed_votes: Option<Spanned<bool>>,
}

/// The quorum keys of a `[[tool]]` entry or a `[[rule]]`.
macro_rules! raw_quorum {
    ($raw:expr) => {
        RawQuorum {
            approvals: $raw.approvals.clone(),
            approvers: $raw.approvers.clone(),
            escalate_after_s: $raw.escalate_after_s.clone(),
            escalate_to: $raw.escalate_to.clone(),
            require_signed_votes: $raw.require_signed_votes.clone(),
        }
    };
}

impl RawQuorum {
    fn is_set(&self) -> bool {
        self.first_span().is_some()
    }

    /// Where the first quorum key in the file is written, if any is.
    fn first_span(&self) -> Option<std::ops::Range<usize>> {
        [
            self.approvals.as_ref().map(Spanned::span),
            self.approvers.as_ref().map(Spanned::span),
            self.escalate_after_s.as_ref().map(Spanned::span),
            self.escalate_to.as_ref().map(Spanned::span),
            self.require_signed_votes.as_ref().map(Spanned::span),
        ]
        .into_iter()
        .flatten()
        .min_by_key(|s| s.start)
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRule {
    tool: String,
    #[serde(default)]
    args: BTreeMap<String, Spanned<String>>,
    decision: RuleDecision,
    #[serde(default)]
    reason: String,
    #[serde(default)]
    risk: Risk,
    #[serde(default)]
    remind_after_s: Option<u64>,
    #[serde(default)]
    approvals: Option<Spanned<u32>>,
    #[serde(default)]
    approvers: Option<Spanned<Vec<String>>>,
    #[serde(default)]
    escalate_after_s: Option<Spanned<u64>>,
    #[serde(default)]
    escalate_to: Option<Spanned<Vec<String>>>,
    #[serde(default)]
    require_signed_votes: Option<Spanned<bool>>,
}

/// A tool's needs.
#[derive(Debug, Clone)]
struct ToolNeeds {
    glob: ToolGlob,
    requires: Vec<String>,
    quorum: Option<QuorumRule>,
}

/// How many people must approve the calls a rule (or `[[tool]]` entry)
/// asks about, and who may vote: `group:` names already expanded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuorumRule {
    /// Distinct people who must approve (1 or more).
    pub approvals: u32,
    /// Token names who may vote, sorted; empty: any approver.
    pub approvers: Vec<String>,
    /// After this many seconds `escalate_to` may vote too, and are notified.
    pub escalate_after_s: Option<u64>,
    /// Who may vote once escalated, sorted.
    pub escalate_to: Vec<String>,
    /// Every vote must be signed by the voter's own key.
    pub require_signed_votes: bool,
    /// The line the rule or entry starts on.
    pub line: usize,
}

impl QuorumRule {
    /// Whether a grant may stand in for this decision: not when more than
    /// one person must approve, nor when votes must be signed.
    pub fn grants_may_decide(&self) -> bool {
        self.approvals <= 1 && !self.require_signed_votes
    }
}

/// One ordered rule.
#[derive(Debug, Clone)]
pub struct Rule {
    /// The rule's tool glob, as written.
    pub tool: String,
    glob: ToolGlob,
    args: ArgsMatcher,
    /// What it decides.
    pub decision: RuleDecision,
    /// Why (shown on a deny, recorded in the audit log).
    pub reason: String,
    /// The line it starts on, for the audit log.
    pub line: usize,
    /// How risky it marks what it matches.
    pub risk: Risk,
    /// For an ask: remind the approvers after this many seconds of waiting,
    /// and every such interval after (`remind_after_s`).
    pub remind_after_s: Option<u64>,
    /// The args patterns as written (pointer -> regex), for warnings.
    patterns: BTreeMap<String, String>,
    /// For an ask: how many must approve and who may vote, when the rule says.
    pub quorum: Option<QuorumRule>,
}

/// A parsed policy.
#[derive(Debug, Clone)]
pub struct Policy {
    /// `false`: nobody approves a call whose caller is themselves.
    pub self_approval: bool,
    /// What happens to a call that no rule matches (`default = ...`):
    /// `Ask` asks even when nothing is missing, `Deny` refuses, and `Allow`
    /// (also when the file says nothing) allows a call that lacks nothing and
    /// asks for one that lacks something (SPEC section 6, step 4).
    pub default: RuleDecision,
    /// Whether the file set `default` itself.
    default_set: bool,
    sandbox_modes: BTreeMap<String, BTreeSet<String>>,
    tools: Vec<ToolNeeds>,
    rules: Vec<Rule>,
    /// Names that read alike or like lev's own ([`name_warnings`]).
    name_warnings: Vec<String>,
}

impl Policy {
    /// The shortest `remind_after_s` of any rule, if any has one.
    #[must_use]
    pub fn shortest_reminder(&self) -> Option<u64> {
        self.rules.iter().filter_map(|r| r.remind_after_s).min()
    }

    /// The shortest `escalate_after_s` of any rule or `[[tool]]` entry.
    #[must_use]
    pub fn shortest_escalation(&self) -> Option<u64> {
        self.rules
            .iter()
            .filter_map(|r| r.quorum.as_ref())
            .chain(self.tools.iter().filter_map(|t| t.quorum.as_ref()))
            .filter_map(|q| q.escalate_after_s)
            .min()
    }
}

/// Names in `[groups]`, `approvers` and `escalate_to` that mislead: two
/// group names, or two people in one list, that read alike
/// (`lev_protocol::ids::fold_name`) but are told apart exactly; and people
/// named like lev's own names (`policy`, `Policy`, `person:x`...), which no
/// token may be made with, so they never vote. Warnings, not errors: a
/// policy that loaded before keeps loading.
fn name_warnings(
    groups: &BTreeMap<String, Vec<String>>,
    group_lines: &BTreeMap<String, usize>,
    quorums: &[&QuorumRule],
) -> Vec<String> {
    use lev_protocol::ids::{fold_name, is_reserved_token_name};
    let mut out = Vec::new();
    let alike = |names: &mut dyn Iterator<Item = &String>| -> Vec<(String, String)> {
        let mut seen: BTreeMap<String, &String> = BTreeMap::new();
        let mut pairs = Vec::new();
        for n in names {
            match seen.get(&fold_name(n)) {
                Some(first) if *first != n => pairs.push(((*first).clone(), n.clone())),
                Some(_) => {}
                None => {
                    seen.insert(fold_name(n), n);
                }
            }
        }
        pairs
    };
    for (a, b) in alike(&mut groups.keys()) {
        out.push(format!(
            "line {}: groups {a:?} and {b:?} read alike (names are compared ignoring case and \
             . _ : -), yet group:{a} and group:{b} are two groups; rename one",
            group_lines.get(&b).copied().unwrap_or_default()
        ));
    }
    let reserved = |line: usize, what: &str, names: &[String], out: &mut Vec<String>| {
        for n in names.iter().filter(|n| is_reserved_token_name(n)) {
            out.push(format!(
                "line {line}: {what} names {n:?}, which reads like a name lev writes itself: no \
                 token may be made with it, so it never votes"
            ));
        }
        for (a, b) in alike(&mut names.iter()) {
            out.push(format!(
                "line {line}: {what} names {a:?} and {b:?}, which read alike but are two tokens; \
                 a person holding one cannot vote as the other"
            ));
        }
    };
    for (name, members) in groups {
        let line = group_lines.get(name).copied().unwrap_or_default();
        reserved(line, &format!("group {name}"), members, &mut out);
    }
    for q in quorums {
        let mut voters = q.approvers.clone();
        voters.extend(q.escalate_to.iter().cloned());
        voters.sort();
        voters.dedup();
        reserved(q.line, "the quorum", &voters, &mut out);
    }
    out.sort();
    out.dedup();
    out
}

impl Default for Policy {
    /// The policy in force without a file: one rule `tool = "*"`,
    /// `decision = "ask"`.
    fn default() -> Self {
        Self {
            self_approval: true,
            default: RuleDecision::Ask,
            default_set: true,
            sandbox_modes: BTreeMap::new(),
            tools: Vec::new(),
            name_warnings: Vec::new(),
            rules: vec![Rule {
                tool: "*".into(),
                glob: ToolGlob::any(),
                args: ArgsMatcher::default(),
                decision: RuleDecision::Ask,
                reason: "no policy file: every call asks".into(),
                line: 0,
                risk: Risk::Normal,
                remind_after_s: None,
                patterns: BTreeMap::new(),
                quorum: None,
            }],
        }
    }
}

fn line_of(text: &str, offset: usize) -> usize {
    text.get(..offset.min(text.len()))
        .map_or(1, |t| t.matches('\n').count() + 1)
}

fn patterns_of(args: &BTreeMap<String, Spanned<String>>) -> BTreeMap<String, String> {
    args.iter()
        .map(|(pointer, pattern)| (pointer.clone(), pattern.get_ref().clone()))
        .collect()
}

/// Reading a policy file's parts, in file order: `[groups]` first, which
/// the quorums of `[[tool]]` entries and rules expand.
struct Parser<'a> {
    text: &'a str,
    /// Each group's members, sorted and deduplicated.
    groups: BTreeMap<String, Vec<String>>,
}

impl Parser<'_> {
    /// A mistake at `span`, named by its line.
    fn at(&self, span: std::ops::Range<usize>, message: String) -> PolicyError {
        PolicyError {
            line: line_of(self.text, span.start),
            message,
        }
    }

    fn check_caps(
        &self,
        caps: &[String],
        span: std::ops::Range<usize>,
        allow_star: bool,
    ) -> Result<(), PolicyError> {
        match caps
            .iter()
            .find(|c| !(lev_protocol::ids::is_valid_capability(c) || (allow_star && *c == "*")))
        {
            Some(bad) => Err(self.at(
                span,
                format!("expected kebab-case capability names such as \"fs-write\", found {bad:?}"),
            )),
            None => Ok(()),
        }
    }

    /// `[groups]`, kept in `self.groups`; the line each is written on.
    fn read_groups(
        &mut self,
        raw: &BTreeMap<String, Spanned<Vec<String>>>,
    ) -> Result<BTreeMap<String, usize>, PolicyError> {
        let mut group_lines: BTreeMap<String, usize> = BTreeMap::new();
        for (name, members) in raw {
            group_lines.insert(name.clone(), line_of(self.text, members.span().start));
            let span = members.span();
            if !lev_protocol::ids::is_valid_id(name) || name.contains(':') {
                return Err(self.at(
                    span,
                    format!(
                        "groups: expected a group name of letters, digits, '.', '_' or '-', found {name:?}"
                    ),
                ));
            }
            for m in members.get_ref() {
                if !lev_protocol::ids::is_valid_id(m) {
                    return Err(self.at(
                        span,
                        format!("groups.{name}: expected approver token names, found {m:?}"),
                    ));
                }
            }
            let mut list = members.get_ref().clone();
            list.sort();
            list.dedup();
            self.groups.insert(name.clone(), list);
        }
        Ok(group_lines)
    }

    /// A `[[tool]]` entry.
    fn tool(&self, t: Spanned<RawTool>) -> Result<ToolNeeds, PolicyError> {
        let span = t.span();
        let t = t.into_inner();
        self.check_caps(&t.requires, span.clone(), false)?;
        let quorum = self.quorum(&raw_quorum!(t), span.clone(), "tool")?;
        let glob =
            ToolGlob::new(&t.name).map_err(|e| self.at(span, format!("tool name glob: {e}")))?;
        Ok(ToolNeeds {
            glob,
            requires: t.requires,
            quorum,
        })
    }

    /// A `[[rule]]`.
    fn rule(&self, r: Spanned<RawRule>) -> Result<Rule, PolicyError> {
        let span = r.span();
        let line = line_of(self.text, span.start);
        let r = r.into_inner();
        if let Some(s) = r.remind_after_s {
            if !(1..=7 * 24 * 3600).contains(&s) {
                return Err(self.at(
                    span.clone(),
                    format!("remind_after_s: expected 1 to 604800 seconds, found {s}"),
                ));
            }
            if r.decision != RuleDecision::Ask {
                return Err(self.at(
                    span.clone(),
                    "remind_after_s: only an ask rule waits for people to be reminded".into(),
                ));
            }
        }
        let raw_q = raw_quorum!(r);
        if let Some(first) = raw_q.first_span()
            && r.decision != RuleDecision::Ask
        {
            return Err(self.at(
                first,
                "approvals, approvers, escalate_after_s, escalate_to and require_signed_votes \
                 go on an ask rule only: an allow or deny rule asks nobody"
                    .into(),
            ));
        }
        let quorum = self.quorum(&raw_q, span.clone(), "call")?;
        let glob =
            ToolGlob::new(&r.tool).map_err(|e| self.at(span.clone(), format!("tool glob: {e}")))?;
        // A bad pattern names its own line, not the rule's.
        let args = ArgsMatcher::compile(&patterns_of(&r.args)).map_err(|e| {
            let span = r.args.get(&e.pointer).map_or(span, Spanned::span);
            self.at(span, format!("args: {e}"))
        })?;
        Ok(Rule {
            tool: r.tool,
            glob,
            args,
            decision: r.decision,
            reason: r.reason,
            line,
            risk: r.risk,
            remind_after_s: r.remind_after_s,
            patterns: patterns_of(&r.args),
            quorum,
        })
    }

    /// The quorum of a rule or `[[tool]]` entry written at `span`, if it
    /// has one. A quorum's mistake names the line of the key it is about
    /// (the value's span); the rule's own line is kept for the audit log.
    fn quorum(
        &self,
        q: &RawQuorum,
        span: std::ops::Range<usize>,
        what: &str,
    ) -> Result<Option<QuorumRule>, PolicyError> {
        if !q.is_set() {
            return Ok(None);
        }
        let key_span = |s: Option<std::ops::Range<usize>>| s.unwrap_or_else(|| span.clone());
        let approvals_span = key_span(q.approvals.as_ref().map(Spanned::span));
        let approvers_span = key_span(q.approvers.as_ref().map(Spanned::span));
        let after_span = key_span(q.escalate_after_s.as_ref().map(Spanned::span));
        let to_span = key_span(q.escalate_to.as_ref().map(Spanned::span));
        let approvals = q.approvals.as_ref().map_or(1, |a| *a.get_ref());
        if !(1..=64).contains(&approvals) {
            return Err(self.at(
                approvals_span,
                format!("approvals: expected 1 to 64 distinct people, found {approvals}"),
            ));
        }
        let approvers = self.expand(
            "approvers",
            q.approvers.as_ref().map_or(&[][..], |a| a.get_ref()),
            &approvers_span,
        )?;
        if q.approvers.is_some() && approvers.is_empty() {
            return Err(self.at(
                approvers_span,
                format!("approvers: names nobody, so nobody could approve this {what}"),
            ));
        }
        let escalate_to = self.expand(
            "escalate_to",
            q.escalate_to.as_ref().map_or(&[][..], |a| a.get_ref()),
            &to_span,
        )?;
        let escalate_after_s = q.escalate_after_s.as_ref().map(|s| *s.get_ref());
        self.check_escalation(
            escalate_after_s,
            q.escalate_to.is_some(),
            &escalate_to,
            after_span,
            to_span,
        )?;
        self.check_enough_voters(approvals, &approvers, &escalate_to, approvals_span)?;
        Ok(Some(QuorumRule {
            approvals,
            approvers,
            escalate_after_s,
            escalate_to,
            require_signed_votes: q
                .require_signed_votes
                .as_ref()
                .is_some_and(|r| *r.get_ref()),
            line: line_of(self.text, span.start),
        }))
    }

    /// `approvers` or `escalate_to`: token names, and `group:NAME` replaced
    /// by the group's members; sorted, deduplicated.
    fn expand(
        &self,
        key: &str,
        names: &[String],
        key_span: &std::ops::Range<usize>,
    ) -> Result<Vec<String>, PolicyError> {
        let mut out = Vec::new();
        for n in names {
            if let Some(group) = n.strip_prefix("group:") {
                match self.groups.get(group) {
                    Some(members) => out.extend(members.iter().cloned()),
                    None => {
                        return Err(self.at(
                            key_span.clone(),
                            format!("{key}: unknown group {group:?} (define it under [groups])"),
                        ));
                    }
                }
            } else if lev_protocol::ids::is_valid_id(n) && !n.starts_with("person:") {
                out.push(n.clone());
            } else {
                return Err(self.at(
                    key_span.clone(),
                    format!("{key}: expected approver token names or \"group:NAME\", found {n:?}"),
                ));
            }
        }
        out.sort();
        out.dedup();
        Ok(out)
    }

    /// `escalate_after_s` and `escalate_to` go together, in range, naming
    /// somebody.
    fn check_escalation(
        &self,
        escalate_after_s: Option<u64>,
        escalate_to_set: bool,
        escalate_to: &[String],
        after_span: std::ops::Range<usize>,
        to_span: std::ops::Range<usize>,
    ) -> Result<(), PolicyError> {
        match (escalate_after_s, escalate_to_set) {
            (Some(s), true) if !(1..=7 * 24 * 3600).contains(&s) => Err(self.at(
                after_span,
                format!("escalate_after_s: expected 1 to 604800 seconds, found {s}"),
            )),
            (Some(_), true) if escalate_to.is_empty() => {
                Err(self.at(to_span, "escalate_to: names nobody to escalate to".into()))
            }
            (None, true) => Err(self.at(
                to_span,
                "escalate_to needs escalate_after_s: the seconds after which they may vote too"
                    .into(),
            )),
            (Some(_), false) => Err(self.at(
                after_span,
                "escalate_after_s needs escalate_to: the people it escalates to".into(),
            )),
            (Some(_), true) | (None, false) => Ok(()),
        }
    }

    /// With named approvers, enough of them (and of those escalated to)
    /// that `approvals` can ever be reached.
    fn check_enough_voters(
        &self,
        approvals: u32,
        approvers: &[String],
        escalate_to: &[String],
        approvals_span: std::ops::Range<usize>,
    ) -> Result<(), PolicyError> {
        if approvers.is_empty() {
            return Ok(());
        }
        let mut voters: BTreeSet<&String> = approvers.iter().collect();
        voters.extend(escalate_to.iter());
        if usize::try_from(approvals).unwrap_or(usize::MAX) > voters.len() {
            return Err(self.at(
                approvals_span,
                format!(
                    "approvals = {approvals}, but only {} may vote ({}): no decision could ever pass",
                    if voters.len() == 1 {
                        "1 person".to_owned()
                    } else {
                        format!("{} people", voters.len())
                    },
                    voters
                        .iter()
                        .map(|v| v.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            ));
        }
        Ok(())
    }
}

impl Policy {
    /// Parse a policy file.
    ///
    /// # Errors
    /// A [`PolicyError`] naming the line: TOML syntax, an unknown key, a bad
    /// decision, a capability that is not kebab-case, a bad glob or regex.
    pub fn parse(text: &str) -> Result<Self, PolicyError> {
        let raw: RawPolicy = toml::from_str(text).map_err(|e| PolicyError {
            line: e.span().map_or(1, |s| line_of(text, s.start)),
            message: e.message().trim().to_owned(),
        })?;
        let mut parser = Parser {
            text,
            groups: BTreeMap::new(),
        };
        let group_lines = parser.read_groups(&raw.groups)?;
        let mut sandbox_modes = BTreeMap::new();
        for (mode, caps) in raw.sandbox_modes {
            parser.check_caps(caps.get_ref(), caps.span(), true)?;
            sandbox_modes.insert(mode, caps.into_inner().into_iter().collect());
        }
        let tools = raw
            .tool
            .into_iter()
            .map(|t| parser.tool(t))
            .collect::<Result<Vec<_>, _>>()?;
        let rules = raw
            .rule
            .into_iter()
            .map(|r| parser.rule(r))
            .collect::<Result<Vec<_>, _>>()?;
        let mut quorums: Vec<&QuorumRule> =
            rules.iter().filter_map(|r| r.quorum.as_ref()).collect();
        quorums.extend(tools.iter().filter_map(|t| t.quorum.as_ref()));
        let name_warnings = name_warnings(&parser.groups, &group_lines, &quorums);
        Ok(Self {
            self_approval: raw.self_approval,
            default: raw.default.unwrap_or(RuleDecision::Allow),
            default_set: raw.default.is_some(),
            sandbox_modes,
            tools,
            rules,
            name_warnings,
        })
    }

    /// The capabilities `mode` grants (`"*"` for all); an unknown mode grants nothing.
    pub fn granted(&self, mode: &str) -> BTreeSet<String> {
        self.sandbox_modes.get(mode).cloned().unwrap_or_default()
    }

    /// What a call of `tool` needs: the request's own capabilities plus the
    /// policy's for that tool.
    pub fn required(&self, tool: &str, requested: &[String]) -> BTreeSet<String> {
        let mut all: BTreeSet<String> = requested.iter().cloned().collect();
        for t in self.tools.iter().filter(|t| t.glob.is_match(tool)) {
            all.extend(t.requires.iter().cloned());
        }
        all
    }

    /// What a person should know about this policy before trusting it: a
    /// missing `default`, command patterns that a path prefix bypasses
    /// (`^(rm|dd)$` on `/argv/0` does not match `/bin/rm`), deny or ask
    /// rules that a wrapper walks around into an allow (`env rm`, `sudo rm`,
    /// `git -C . push`, `git  push` under `default = "allow"`: see
    /// [`wrappers`]), and names that read alike or like lev's own. Each
    /// names the rule's line.
    pub fn warnings(&self) -> Vec<String> {
        let mut out = self.name_warnings.clone();
        if !self.default_set {
            out.push(
                "no top-level `default`: a call that no rule matches is allowed whenever its \
                 sandbox mode grants what it needs; set default = \"ask\" (or \"deny\") to \
                 decide such calls explicitly"
                    .to_owned(),
            );
        }
        // Not for an allow rule: one that misses `/usr/bin/cargo` leaves it to
        // the default, while matching any directory would allow a `./cargo`
        // the model wrote.
        for rule in self
            .rules
            .iter()
            .filter(|r| r.decision != RuleDecision::Allow)
        {
            for (pointer, pattern) in rule.patterns.iter().filter(|(p, _)| names_a_command(p)) {
                if let Some(word) = path_prefix_bypass(pattern) {
                    out.push(format!(
                        "line {}: the pattern {pattern:?} on {pointer:?} matches {word:?} but not \
                         \"/usr/bin/{word}\": a command named by its path escapes this {} rule; \
                         match the base name, e.g. {:?}",
                        rule.line,
                        match rule.decision {
                            RuleDecision::Allow => "allow",
                            RuleDecision::Deny => "deny",
                            RuleDecision::Ask => "ask",
                        },
                        base_name_pattern(pattern)
                    ));
                }
            }
        }
        out.extend(wrappers::wrapper_warnings(self));
        out
    }

    /// The ordered rules.
    pub fn rules(&self) -> &[Rule] {
        &self.rules
    }

    /// The first rule that matches the tool and all of its args patterns.
    pub fn first_matching_rule(&self, tool: &str, args: &Value) -> Option<&Rule> {
        self.rules
            .iter()
            .find(|r| r.glob.is_match(tool) && r.args.matches(args))
    }

    /// How many must approve a call of `tool` with `args` that asks, and who
    /// may vote: the matching ask rule's quorum when it says, else the first
    /// `[[tool]]` entry for the tool that says; `None`: one approver, anyone.
    pub fn quorum_for(&self, tool: &str, args: &Value) -> Option<&QuorumRule> {
        self.quorum_of(self.first_matching_rule(tool, args), tool)
    }

    /// [`Policy::quorum_for`] of a call of `tool` whose first matching rule
    /// (found already) is `rule`.
    pub fn quorum_of<'p>(&'p self, rule: Option<&'p Rule>, tool: &str) -> Option<&'p QuorumRule> {
        if let Some(q) = rule.and_then(|r| r.quorum.as_ref()) {
            return Some(q);
        }
        self.tools
            .iter()
            .filter(|t| t.glob.is_match(tool))
            .find_map(|t| t.quorum.as_ref())
    }

    /// Whether a deny rule matches (the check an edited call passes again).
    pub fn denies(&self, tool: &str, args: &Value) -> Option<&Rule> {
        self.first_matching_rule(tool, args)
            .filter(|r| r.decision == RuleDecision::Deny)
    }
}

/// Whether a JSON pointer names the program a call runs: an argv's first
/// element, or a field called like one.
fn names_a_command(pointer: &str) -> bool {
    let last = pointer.rsplit('/').next().unwrap_or("");
    last == "0"
        || matches!(
            last.to_ascii_lowercase().as_str(),
            "command" | "cmd" | "program" | "executable" | "exe" | "bin" | "binary"
        )
}

/// `pattern` made to match behind any directory: `^(rm|dd)$` becomes
/// `^(.*/)?(rm|dd)$`.
fn base_name_pattern(pattern: &str) -> String {
    let body = pattern.strip_prefix('^').unwrap_or(pattern);
    if body.starts_with('(') && body.ends_with(")$") {
        format!("^(.*/)?{body}")
    } else {
        let inner = body.strip_suffix('$').unwrap_or(body);
        format!("^(.*/)?(?:{inner})$")
    }
}

/// A word that `pattern` matches alone but not behind a directory: the
/// words tried are the pattern's own runs of letters, digits, `.`, `_` and
/// `-` (so the cost is linear in the pattern's length, times one match each).
fn path_prefix_bypass(pattern: &str) -> Option<String> {
    let re = Regex::new(pattern).ok()?;
    pattern
        .split(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
        .filter(|w| w.len() >= 2 && w.chars().any(|c| c.is_ascii_alphabetic()))
        .find(|w| re.is_match(w) && !re.is_match(&format!("/usr/bin/{w}")))
        .map(str::to_owned)
}

/// A tool call as the gate sees it.
#[derive(Debug, Clone, Copy)]
pub struct GateCall<'a> {
    /// Whom the call acts for.
    pub caller: &'a str,
    /// Its conversation.
    pub conversation_id: &'a str,
    /// Its sandbox mode.
    pub sandbox_mode: &'a str,
    /// The tool.
    pub tool_name: &'a str,
    /// The args, parsed.
    pub args: &'a Value,
    /// The request's own required capabilities.
    pub required_capabilities: &'a [String],
}

/// The gate's decision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GateVerdict {
    /// Allowed by a rule (`rule_line` is `None` when no rule matched and
    /// nothing was missing). Signed with approver `policy`, covering `shortfall`.
    AllowByPolicy {
        /// The shortfall the allow covers.
        shortfall: BTreeSet<String>,
        /// The deciding rule's line, if a rule decided.
        rule_line: Option<usize>,
    },
    /// Denied by a rule.
    Deny {
        /// The rule's reason.
        reason: String,
        /// The rule's line.
        rule_line: usize,
    },
    /// Allowed by the grant at this index.
    AllowByGrant {
        /// Index into the grants passed to [`decide`].
        grant: usize,
        /// The shortfall it covered.
        shortfall: BTreeSet<String>,
    },
    /// A person must decide; `shortfall` is the interaction's `missing_capabilities`.
    Ask {
        /// What the call lacks.
        shortfall: BTreeSet<String>,
        /// The `ask` rule that stopped it, if a rule did (not the policy's
        /// default, nor the shortfall alone).
        rule: Option<AskingRule>,
    },
}

/// The gate's decision, complete: the verdict and what in the policy made
/// it, so that nobody consults the policy again for the same call.
#[derive(Debug, Clone)]
pub struct GateDecision<'p> {
    /// What was decided.
    pub verdict: GateVerdict,
    /// The first rule that matched the call, whatever it decides; `None`
    /// when none did (the policy's default decided).
    pub rule: Option<&'p Rule>,
    /// For a call that asks: how many must approve it and who may vote
    /// ([`Policy::quorum_for`]); `None` for one approver, anyone, and for a
    /// call decided without a person.
    pub quorum: Option<&'p QuorumRule>,
}

impl GateDecision<'_> {
    /// Why, as signed and audited: a deny's reason, the deciding rule's
    /// reason for an allow by a rule, an ask rule's reason; empty for a
    /// grant, and for an allow or an ask by the policy's default.
    #[must_use]
    pub fn reason(&self) -> &str {
        match &self.verdict {
            GateVerdict::Deny { reason, .. } => reason,
            GateVerdict::AllowByGrant { .. } => "",
            GateVerdict::AllowByPolicy { .. } | GateVerdict::Ask { .. } => {
                self.rule.map_or("", |r| r.reason.as_str())
            }
        }
    }

    /// Whether grants may still decide the call: it asks, and its quorum
    /// (if any) lets a grant stand in for a person.
    #[must_use]
    pub fn grants_may_decide(&self) -> bool {
        matches!(self.verdict, GateVerdict::Ask { .. })
            && self.quorum.is_none_or(QuorumRule::grants_may_decide)
    }

    /// SPEC section 6, step 6, on a decision made without grants: the first
    /// of `grants` covering the call's shortfall allows it, when grants may
    /// decide ([`GateDecision::grants_may_decide`]). The policy is not read
    /// again.
    #[must_use]
    pub fn with_grants(mut self, call: &GateCall<'_>, grants: &[GrantRule]) -> Self {
        if !self.grants_may_decide() {
            return self;
        }
        let GateVerdict::Ask { shortfall, .. } = &self.verdict else {
            return self;
        };
        let facts = GrantMatch {
            caller: call.caller,
            conversation_id: call.conversation_id,
            sandbox_mode: call.sandbox_mode,
            tool_name: call.tool_name,
            shortfall,
            args: call.args,
        };
        if let Some(grant) = grants.iter().position(|g| g.covers(&facts)) {
            let shortfall = shortfall.clone();
            self.verdict = GateVerdict::AllowByGrant { grant, shortfall };
            self.quorum = None;
        }
        self
    }
}

/// SPEC section 6, steps 2 to 6: the gate's decision, with the rule that
/// matched and the quorum of a call that asks, each found once.
pub fn decide<'p>(
    policy: &'p Policy,
    call: &GateCall<'_>,
    grants: &[GrantRule],
) -> GateDecision<'p> {
    let required = policy.required(call.tool_name, call.required_capabilities);
    let missing = shortfall(
        required.iter().map(String::as_str),
        &policy.granted(call.sandbox_mode),
    );
    let rule = policy.first_matching_rule(call.tool_name, call.args);
    let decided = |verdict| GateDecision {
        verdict,
        rule,
        quorum: None,
    };
    let mut asking = None;
    match rule {
        Some(rule) if rule.decision == RuleDecision::Deny => {
            return decided(GateVerdict::Deny {
                reason: rule.reason.clone(),
                rule_line: rule.line,
            });
        }
        Some(rule) if rule.decision == RuleDecision::Allow => {
            return decided(GateVerdict::AllowByPolicy {
                shortfall: missing,
                rule_line: Some(rule.line),
            });
        }
        Some(rule) => {
            // An ask rule; the built-in ask-everything policy's rule (line
            // 0) is no rule of a file.
            asking = (rule.line > 0).then(|| AskingRule {
                line: rule.line,
                tool: rule.tool.clone(),
                reason: rule.reason.clone(),
                risk: rule.risk,
                remind_after_s: rule.remind_after_s,
            });
        }
        None => match policy.default {
            RuleDecision::Deny => {
                return decided(GateVerdict::Deny {
                    reason: "no policy rule matches this call, and the policy's default is deny"
                        .into(),
                    rule_line: 0,
                });
            }
            RuleDecision::Allow if missing.is_empty() => {
                return decided(GateVerdict::AllowByPolicy {
                    shortfall: missing,
                    rule_line: None,
                });
            }
            RuleDecision::Allow | RuleDecision::Ask => {}
        },
    }
    // Each call whose quorum needs more than one approval or signed votes
    // needs its own votes: no grant stands in for them.
    GateDecision {
        verdict: GateVerdict::Ask {
            shortfall: missing,
            rule: asking,
        },
        rule,
        quorum: policy.quorum_of(rule, call.tool_name),
    }
    .with_grants(call, grants)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn call<'a>(tool: &'a str, args: &'a Value, mode: &'a str, req: &'a [String]) -> GateCall<'a> {
        GateCall {
            caller: "alice",
            conversation_id: "c1",
            sandbox_mode: mode,
            tool_name: tool,
            args,
            required_capabilities: req,
        }
    }

    #[test]
    fn the_default_decides_calls_no_rule_matches() {
        let args = json!({"argv": ["rm", "-rf", "/"]});
        let modes = "[sandbox_modes]\n\"full\" = [\"*\"]\n";
        let verdict = |default: &str| {
            let p = Policy::parse(&format!("{default}\n{modes}")).unwrap();
            decide(&p, &call("Bash", &args, "full", &[]), &[]).verdict
        };
        // Without `default`, SPEC step 4: nothing missing, allowed (and warned about).
        assert!(matches!(verdict(""), GateVerdict::AllowByPolicy { .. }));
        assert!(!Policy::parse(modes).unwrap().warnings().is_empty());
        assert!(matches!(
            verdict("default = \"ask\""),
            GateVerdict::Ask { .. }
        ));
        assert!(matches!(
            verdict("default = \"deny\""),
            GateVerdict::Deny { .. }
        ));
        assert!(matches!(
            verdict("default = \"allow\""),
            GateVerdict::AllowByPolicy { .. }
        ));
        assert!(Policy::parse("default = \"maybe\"").is_err());
    }

    #[test]
    fn the_example_denies_commands_named_by_their_path_and_warns_of_none() {
        let p = Policy::parse(EXAMPLE_POLICY).unwrap();
        assert_eq!(p.warnings(), Vec::<String>::new());
        for argv0 in ["rm", "/bin/rm", "/usr/bin/rm", "./dd", "mkfs"] {
            let args = json!({"argv": [argv0, "-rf", "/"]});
            assert!(
                matches!(
                    decide(&p, &call("shell", &args, "danger-full-access", &[]), &[]).verdict,
                    GateVerdict::Deny { .. }
                ),
                "{argv0}"
            );
        }
        // A Bash call that no rule matches asks: the example's default.
        let bash = json!({"command": "rm -rf /"});
        assert!(matches!(
            decide(&p, &call("Bash", &bash, "danger-full-access", &[]), &[]).verdict,
            GateVerdict::Ask { .. }
        ));
    }

    #[test]
    fn names_that_read_alike_or_like_levs_own_are_warned_about() {
        let text = "default = \"ask\"\n\n[groups]\nops = [\"ann\", \"Ann\"]\nOPS = [\"bob\"]\n\n\
                    [[rule]]\ntool = \"x\"\ndecision = \"ask\"\napprovers = [\"group:ops\", \"Policy\"]\n";
        let warnings = Policy::parse(text).unwrap().warnings();
        let all = warnings.join("\n");
        assert!(
            all.contains("groups \"OPS\" and \"ops\" read alike"),
            "{all}"
        );
        assert!(all.contains("group ops names \"Ann\" and \"ann\""), "{all}");
        assert!(all.contains("line 7: the quorum names \"Policy\""), "{all}");
        let fine = "default = \"ask\"\n[groups]\nops = [\"ann\", \"bob\"]\n";
        assert!(Policy::parse(fine).unwrap().warnings().is_empty());
    }

    #[test]
    fn a_rule_that_a_path_prefix_bypasses_is_warned_about() {
        let text = "default = \"ask\"\n[[rule]]\ntool = \"shell\"\nargs = { \"/argv/0\" = \"^(rm|dd|mkfs)$\" }\ndecision = \"deny\"\n";
        let warnings = Policy::parse(text).unwrap().warnings();
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(warnings[0].starts_with("line 2:"), "{}", warnings[0]);
        assert!(warnings[0].contains("/usr/bin/rm"), "{}", warnings[0]);
        assert!(
            warnings[0].contains(r#""^(.*/)?(rm|dd|mkfs)$""#),
            "{}",
            warnings[0]
        );
        let fixed = text.replace("^(rm|dd|mkfs)$", "^(.*/)?(rm|dd|mkfs)$");
        assert!(Policy::parse(&fixed).unwrap().warnings().is_empty());
    }

    /// An allow rule anchored on a bare program name is the safe way round
    /// (`/tmp/x/cargo` asks): it is not told to match any directory.
    #[test]
    fn an_allow_rule_on_a_bare_name_is_not_told_to_widen() {
        let text = "default = \"ask\"\n[[rule]]\ntool = \"shell\"\nargs = { \"/argv/0\" = \"^(cargo|npm)$\" }\ndecision = \"allow\"\n";
        assert_eq!(
            Policy::parse(text).unwrap().warnings(),
            Vec::<String>::new()
        );
    }

    #[test]
    fn the_example_policy_parses_and_decides() {
        let p = Policy::parse(EXAMPLE_POLICY).unwrap();
        let rm = json!({"argv": ["rm", "-rf", "/"], "cwd": "/"});
        assert!(matches!(
            decide(&p, &call("shell", &rm, "workspace-write", &[]), &[]).verdict,
            GateVerdict::Deny { .. }
        ));
        let ls = json!({"argv": ["ls"], "cwd": "/"});
        assert_eq!(
            decide(&p, &call("shell", &ls, "workspace-write", &[]), &[]).verdict,
            GateVerdict::Ask {
                shortfall: BTreeSet::from(["proc-exec".to_owned()]),
                rule: None,
            }
        );
        // Nothing missing, but no rule matches: the example's default asks.
        assert_eq!(
            decide(&p, &call("shell", &ls, "danger-full-access", &[]), &[]).verdict,
            GateVerdict::Ask {
                shortfall: BTreeSet::new(),
                rule: None,
            }
        );
        assert!(matches!(
            decide(&p, &call("fs.read", &json!({}), "read-only", &[]), &[]).verdict,
            GateVerdict::AllowByPolicy {
                rule_line: Some(_),
                ..
            }
        ));
    }

    #[test]
    fn an_ask_rule_is_named_with_its_risk() {
        let text = "[[rule]]\ntool = \"deploy\"\ndecision = \"ask\"\nreason = \"production\"\nrisk = \"high\"\n\n[[rule]]\ntool = \"lint\"\ndecision = \"ask\"\n";
        let p = Policy::parse(text).unwrap();
        let GateVerdict::Ask { rule, .. } =
            decide(&p, &call("deploy", &json!({}), "", &[]), &[]).verdict
        else {
            panic!("asks")
        };
        assert_eq!(
            rule,
            Some(AskingRule {
                line: 1,
                tool: "deploy".into(),
                reason: "production".into(),
                risk: Risk::High,
                remind_after_s: None,
            })
        );
        let GateVerdict::Ask { rule, .. } =
            decide(&p, &call("lint", &json!({}), "", &[]), &[]).verdict
        else {
            panic!("asks")
        };
        assert_eq!(rule.map(|r| (r.line, r.risk)), Some((7, Risk::Normal)));
        let err = Policy::parse("[[rule]]\ntool = \"x\"\ndecision = \"ask\"\nrisk = \"extreme\"\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("extreme"), "{err}");
    }

    #[test]
    fn default_policy_asks_even_without_shortfall() {
        let p = Policy::default();
        assert_eq!(
            decide(&p, &call("anything", &json!({}), "", &[]), &[]).verdict,
            GateVerdict::Ask {
                shortfall: BTreeSet::new(),
                rule: None,
            }
        );
    }

    #[test]
    fn grants_cover_only_their_shortfall() {
        let p = Policy::parse("[[tool]]\nname = \"shell\"\nrequires = [\"proc-exec\"]\n").unwrap();
        let grant = GrantRule {
            caller: "alice".into(),
            conversation_id: Some("c1".into()),
            sandbox_mode: "m".into(),
            tool_name: "shell".into(),
            covered_capabilities: BTreeSet::from(["proc-exec".to_owned()]),
            args: None,
        };
        let args = json!({});
        assert!(matches!(
            decide(
                &p,
                &call("shell", &args, "m", &[]),
                std::slice::from_ref(&grant)
            )
            .verdict,
            GateVerdict::AllowByGrant { grant: 0, .. }
        ));
        let net = ["net".to_owned()];
        assert!(matches!(
            decide(
                &p,
                &call("shell", &args, "m", &net),
                std::slice::from_ref(&grant)
            )
            .verdict,
            GateVerdict::Ask { .. }
        ));
    }

    #[test]
    fn errors_name_the_line() {
        let cases = [
            (
                "self_approval = true\n[[rule]]\ntool = \"x\"\ndecision = \"maybe\"\n",
                4,
            ),
            ("\n\n[[rule]]\ntool = \"x\"\ndecison = \"allow\"\n", 5),
            ("[sandbox_modes]\n\"ro\" = [\"FS_READ\"]\n", 2),
            (
                "[[rule]]\ntool = \"x\"\ndecision = \"deny\"\n\n[[rule]]\ntool = \"y\"\nargs = { \"/a\" = \"(\" }\ndecision = \"deny\"\n",
                7,
            ),
            ("this is not toml", 1),
        ];
        for (text, line) in cases {
            let err = Policy::parse(text).unwrap_err();
            assert_eq!(err.line, line, "{text:?}: {err}");
        }
    }
}
