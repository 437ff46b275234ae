//! The tool-call gate (SPEC section 6) and the signed decisions it and the
//! people answering it make (SPEC section 5).
//!
//! - [`decide`]: `POST /v1/gate`. The decision itself is lev-approval's pure
//!   [`decide`](lev_approval::policy::decide); this module validates the call,
//!   reads the grants that may cover it, signs, and has the store commit the
//!   decision, its audit entry, the interaction it opens and its idempotency
//!   record in one transaction.
//! - [`answer`]: a person's answer to a tool approval: self-approval, the
//!   edited call checked against the policy again, the grant it records, the
//!   signed decision.
//! - [`load_policy`]: the policy file, or the built-in ask-everything policy.
//!
//! # Invariants
//! - The approver written into a signature is the token's name, `policy`, or
//!   the approver of the grant that decided: never a name the client sends.
//! - Every allow and deny is in the audit log with what decided it (the
//!   policy's source and rule line, or the grant).
//! - A gate call's envelope is bound to the gate's `request_id`, also when a
//!   person decides it later through the interaction it opened.

pub mod answer;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use lev_approval::policy::{GateCall, GateVerdict, Policy, Risk, RuleDecision, decide as verdict};
use lev_approval::{
    ApprovalPayload, ArgsMatcher, GrantRule, PAYLOAD_VERSION, PAYLOAD_VERSION_VOTES, PayloadVote,
    new_nonce, sign_payload,
};
use lev_protocol::api::{GateRequest, GateResponse, Grant};
use lev_protocol::validate::{
    check_args_json, check_capabilities, check_id, check_reason, check_tool_name,
};
use lev_protocol::{Envelope, GateNote, InteractionKind, InteractionRequest};
use lev_store::{AuditRecord, GateCallRecord, GateRecordOutcome, NewGateDecision, NewInteraction};
use serde_json::{Map, Value, json};
use time::OffsetDateTime;

use crate::auth::Principal;
use crate::error::{ApiError, ApiResult};
use crate::state::AppState;

/// The policy file's name in the data dir, used when `--policy` is not given.
pub const POLICY_FILE: &str = "policy.toml";

/// The policy in force: `explicit` (`--policy`), else `policy.toml` in the
/// data dir when there is one; `None` means the built-in policy.
///
/// # Errors
/// A message naming the file and the line of the mistake, or why the file
/// cannot be read.
pub fn load_policy(
    explicit: Option<&Path>,
    data_dir: &Path,
) -> Result<Option<(Policy, String)>, String> {
    let path: PathBuf = match explicit {
        Some(p) => p.to_path_buf(),
        None => {
            let p = data_dir.join(POLICY_FILE);
            if !p.exists() {
                return Ok(None);
            }
            p
        }
    };
    let shown = path.display().to_string();
    let text = lev_io::files::read_text(&path, lev_io::files::limit::CONFIG)
        .map_err(|e| format!("--policy {e}"))?;
    let policy = Policy::parse(&text).map_err(|e| format!("policy {shown}: {e}"))?;
    Ok(Some((policy, shown)))
}

/// The fields of a decision to sign; every other payload field is filled here.
#[derive(Debug)]
pub(crate) struct Decision<'a> {
    pub request_id: &'a str,
    pub turn_id: &'a str,
    pub tool_name: &'a str,
    pub args_json: &'a str,
    pub modified_args_json: &'a str,
    pub approved: bool,
    pub approved_for_session: bool,
    pub covered: &'a BTreeSet<String>,
    pub caller: &'a str,
    pub approver: &'a str,
    pub sandbox_mode: &'a str,
    pub reason: &'a str,
    pub injected_context: &'a str,
    pub conversation_id: &'a str,
    /// The votes that made the decision, for a payload of version 2; `None`
    /// for one person's unsigned decision (version 1).
    pub votes: Option<Vec<PayloadVote>>,
}

/// Sign a decision with the active key: a fresh nonce, `issued_at` now,
/// `expires_at` after `--approval-ttl`. Returns the envelope and its nonce
/// (for the audit log).
pub(crate) fn sign(state: &AppState, d: &Decision<'_>) -> ApiResult<(Envelope, String)> {
    let now = OffsetDateTime::now_utc();
    let ttl = time::Duration::try_from(state.settings().approval_ttl)
        .map_err(|e| ApiError::Internal(format!("approval ttl: {e}")))?;
    let payload = ApprovalPayload {
        v: if d.votes.is_some() {
            PAYLOAD_VERSION_VOTES
        } else {
            PAYLOAD_VERSION
        },
        turn_id: d.turn_id.to_owned(),
        request_id: d.request_id.to_owned(),
        tool_name: d.tool_name.to_owned(),
        args_json: d.args_json.to_owned(),
        modified_args_json: d.modified_args_json.to_owned(),
        approved: d.approved,
        approved_for_session: d.approved_for_session,
        // A BTreeSet iterates sorted: the payload's list is sorted.
        covered_capabilities: d.covered.iter().cloned().collect(),
        caller: d.caller.to_owned(),
        approver: d.approver.to_owned(),
        sandbox_mode: d.sandbox_mode.to_owned(),
        reason: d.reason.to_owned(),
        injected_context: d.injected_context.to_owned(),
        conversation_id: d.conversation_id.to_owned(),
        nonce: new_nonce().map_err(|e| ApiError::Internal(format!("no randomness: {e}")))?,
        issued_at: now,
        expires_at: now.checked_add(ttl).ok_or_else(|| {
            ApiError::Internal("approval ttl: the expiry time is out of range".into())
        })?,
        votes: d.votes.clone(),
    };
    Ok((
        sign_payload(&payload, &state.keys().active())
            .map_err(|e| ApiError::Internal(format!("the approval cannot be written: {e}")))?,
        payload.nonce,
    ))
}

/// Spend `nonce` for `principal`, once: only a worker that may act for the
/// caller and in the session of the approval that carries it (SPEC section
/// 12), so a worker that learns another's approval cannot spend (nor burn)
/// it. A nonce no stored approval carries (signed before lev noted whose
/// nonces are whose, or not lev's) is spent as before.
///
/// # Errors
/// 403 `caller_mismatch` or `session_scope`, the nonce unspent; the
/// store's.
pub async fn spend_nonce(
    state: &AppState,
    principal: &Principal,
    nonce: &str,
) -> ApiResult<lev_store::NonceOutcome> {
    if let Some(owner) = state.store().nonce_owner(nonce).await? {
        let not_yours = |e: ApiError| match e {
            ApiError::Forbidden { code, message } => ApiError::Forbidden {
                code,
                message: format!(
                    "this approval is for caller {:?} in session {:?}, and this token may not \
                     spend it ({message}); the nonce stays unspent",
                    owner.caller, owner.session_id
                ),
            },
            other => other,
        };
        principal
            .check_owns(Some(owner.caller.as_str()))
            .map_err(not_yours)?;
        principal
            .check_session(&owner.session_id)
            .map_err(not_yours)?;
    }
    Ok(state.store().consume_nonce(nonce, &principal.name).await?)
}

/// The conversation a session grant is keyed on: the call's conversation,
/// or its session when the call names none (so a grant never leaks across
/// sessions through an empty conversation).
pub(crate) fn grant_conversation<'a>(conversation_id: &'a str, session_id: &'a str) -> &'a str {
    if conversation_id.is_empty() {
        session_id
    } else {
        conversation_id
    }
}

/// A stored grant as a rule the pure decision can match; `None` for one whose
/// patterns no longer compile (they were checked when it was made).
pub(crate) fn grant_rule(g: &Grant) -> Option<GrantRule> {
    let args = match &g.grant_args {
        Some(patterns) => Some(ArgsMatcher::compile(patterns).ok()?),
        None => None,
    };
    Some(GrantRule {
        caller: g.caller.clone(),
        conversation_id: g.conversation_id.clone(),
        sandbox_mode: g.sandbox_mode.clone(),
        tool_name: g.tool_name.clone(),
        covered_capabilities: g.covered_capabilities.iter().cloned().collect(),
        args,
    })
}

fn check_opt_id(field: &str, value: &str) -> ApiResult<()> {
    if value.is_empty() {
        Ok(())
    } else {
        Ok(check_id(field, value)?)
    }
}

/// Validate a gate request (SPEC section 6, steps 0 and 1, and the rules of
/// sections 1 and 9); returns the caller it acts for and the parsed args.
fn validate(
    state: &AppState,
    principal: &Principal,
    req: &GateRequest,
) -> ApiResult<(String, Value)> {
    let named = (!req.caller.is_empty()).then_some(req.caller.as_str());
    let caller = principal.effective_caller(named)?.unwrap_or_default();
    check_id("session_id", &req.session_id)?;
    principal.check_session(&req.session_id)?;
    check_id("request_id", &req.request_id)?;
    check_opt_id("conversation_id", &req.conversation_id)?;
    check_opt_id("turn_id", &req.turn_id)?;
    check_opt_id("caller", &caller)?;
    check_opt_id("sandbox_mode", &req.sandbox_mode)?;
    check_tool_name("tool_name", &req.tool_name)?;
    check_args_json("args_json", &req.args_json, &state.settings().limits)?;
    check_capabilities("required_capabilities", &req.required_capabilities)?;
    check_reason("reason", req.reason.as_deref())?;
    if req.timeout_s == Some(0) {
        return Err(ApiError::Invalid(
            "timeout_s: expected at least 1 second, found 0".into(),
        ));
    }
    if let Some(route) = &req.route {
        if route.is_empty() || route.len() > 8 {
            return Err(ApiError::Invalid(format!(
                "route: expected 1 to 8 entries, found {}",
                route.len()
            )));
        }
        for (i, r) in route.iter().enumerate() {
            check_id(&format!("route[{i}]"), r)?;
        }
    }
    let args: Value = serde_json::from_str(&req.args_json)
        .map_err(|e| ApiError::Invalid(format!("args_json: expected JSON text, {e}")))?;
    Ok((caller, args))
}

/// The call as the idempotency record keeps it: the same key with another
/// of these is another call (409).
fn call_identity(req: &GateRequest, caller: &str, required: &BTreeSet<String>) -> Value {
    json!({
        "conversation_id": req.conversation_id,
        "turn_id": req.turn_id,
        "caller": caller,
        "tool_name": req.tool_name,
        "args_json": req.args_json,
        "sandbox_mode": req.sandbox_mode,
        "required_capabilities": required,
    })
}

/// `POST /v1/gate`: decide, sign, record; see the module docs.
///
/// # Errors
/// 403 for a bound token naming another caller, 413/422 for a bad call, 409
/// for another call under a used (session, request id), 429 when asking
/// would pass the session's pending limit.
pub async fn decide(
    state: &AppState,
    principal: &Principal,
    req: GateRequest,
) -> ApiResult<GateResponse> {
    let (caller, args) = validate(state, principal, &req)?;
    let policy = &state.settings().policy;
    let requested: BTreeSet<String> = req.required_capabilities.iter().cloned().collect();
    let requested_list: Vec<String> = requested.iter().cloned().collect();
    let call = GateCall {
        caller: &caller,
        conversation_id: grant_conversation(&req.conversation_id, &req.session_id),
        sandbox_mode: &req.sandbox_mode,
        tool_name: &req.tool_name,
        args: &args,
        required_capabilities: &requested_list,
    };
    // Rules and an empty shortfall decide without grants; read them only
    // when the call would otherwise ask.
    let mut grants: Vec<Grant> = Vec::new();
    let mut outcome = verdict(policy, &call, &[]);
    if let GateVerdict::Ask { .. } = outcome {
        grants = state
            .store()
            .grants_for(
                &caller,
                call.conversation_id,
                &req.sandbox_mode,
                &req.tool_name,
            )
            .await?;
        let rules: Vec<(usize, GrantRule)> = grants
            .iter()
            .enumerate()
            .filter_map(|(i, g)| grant_rule(g).map(|r| (i, r)))
            .collect();
        let only_rules: Vec<GrantRule> = rules.iter().map(|(_, r)| r.clone()).collect();
        outcome = match verdict(policy, &call, &only_rules) {
            GateVerdict::AllowByGrant { grant, shortfall } => GateVerdict::AllowByGrant {
                grant: rules.get(grant).map_or(grant, |(i, _)| *i),
                shortfall,
            },
            other => other,
        };
    }
    let now = OffsetDateTime::now_utc();
    let mut audit = Map::new();
    for (k, v) in [
        ("session_id", json!(req.session_id)),
        ("request_id", json!(req.request_id)),
        ("conversation_id", json!(req.conversation_id)),
        ("turn_id", json!(req.turn_id)),
        ("caller", json!(caller)),
        ("tool_name", json!(req.tool_name)),
        ("args_json", json!(req.args_json)),
        ("sandbox_mode", json!(req.sandbox_mode)),
        ("required_capabilities", json!(requested)),
    ] {
        audit.insert(k.to_owned(), v);
    }
    let source = state.settings().policy_source.clone();
    let rule_of = |line: Option<usize>| -> Value {
        let rule = line.and_then(|l| policy.rules().iter().find(|r| r.line == l));
        match rule {
            Some(r) => json!({"policy": source, "rule_line": r.line, "rule_tool": r.tool,
                               "rule_decision": decision_name(r.decision), "rule_reason": r.reason}),
            None => json!({"policy": source, "rule_line": null,
                            "why": format!("no rule matched; the policy's default is {}",
                                           decision_name(policy.default))}),
        }
    };
    let signed = |approved: bool,
                  for_session: bool,
                  covered: &BTreeSet<String>,
                  approver: &str,
                  reason: &str|
     -> ApiResult<(Envelope, String)> {
        sign(
            state,
            &Decision {
                request_id: &req.request_id,
                turn_id: &req.turn_id,
                tool_name: &req.tool_name,
                args_json: &req.args_json,
                modified_args_json: "",
                approved,
                approved_for_session: for_session,
                covered,
                caller: &caller,
                approver,
                sandbox_mode: &req.sandbox_mode,
                reason,
                injected_context: "",
                conversation_id: &req.conversation_id,
                votes: None,
            },
        )
    };
    let (decision, action, actor, interaction) = match outcome {
        GateVerdict::AllowByPolicy {
            shortfall,
            rule_line,
        } => {
            let reason = rule_line
                .and_then(|l| policy.rules().iter().find(|r| r.line == l))
                .map_or("", |r| r.reason.as_str());
            let (approval, nonce) = signed(true, false, &shortfall, "policy", reason)?;
            audit.insert("decided_by".into(), rule_of(rule_line));
            audit.insert("covered_capabilities".into(), json!(shortfall));
            audit.insert("nonce".into(), json!(nonce));
            (
                GateResponse::Allow { approval },
                "gate.allowed",
                "policy".to_owned(),
                None,
            )
        }
        GateVerdict::Deny { reason, rule_line } => {
            let (approval, _) = signed(false, false, &BTreeSet::new(), "policy", &reason)?;
            audit.insert("decided_by".into(), rule_of(Some(rule_line)));
            (
                GateResponse::Deny {
                    reason,
                    approval: Some(approval),
                },
                "gate.denied",
                "policy".to_owned(),
                None,
            )
        }
        GateVerdict::AllowByGrant { grant, shortfall } => {
            let g = grants
                .get(grant)
                .ok_or_else(|| ApiError::Internal("a grant matched that is not loaded".into()))?;
            let (approval, nonce) = signed(true, true, &shortfall, &g.approver, "")?;
            audit.insert(
                "decided_by".into(),
                json!({"policy": source, "grant_id": g.id, "grant_scope": g.scope.as_str(),
                       "grant_approver": g.approver, "grant_interaction_id": g.interaction_id}),
            );
            audit.insert("covered_capabilities".into(), json!(shortfall));
            audit.insert("nonce".into(), json!(nonce));
            (
                GateResponse::Allow { approval },
                "gate.allowed",
                g.approver.clone(),
                None,
            )
        }
        GateVerdict::Ask { shortfall, rule } => {
            let note = rule.as_ref().map(|r| GateNote {
                rule_line: u64::try_from(r.line).ok(),
                rule_tool: Some(r.tool.clone()),
                rule_reason: (!r.reason.is_empty()).then(|| r.reason.clone()),
                risk: (r.risk == Risk::High).then(|| r.risk.as_str().to_owned()),
                policy: Some(source.clone()),
                remind_after_s: r.remind_after_s,
            });
            let mut interaction =
                ask_interaction(state, &req, &caller, &shortfall, &principal.name, now)?;
            interaction.interaction.request.gate = note;
            let id = interaction.interaction.id().to_owned();
            let ask_rule = policy
                .first_matching_rule(&req.tool_name, &args)
                .filter(|r| r.decision == RuleDecision::Ask)
                .map(|r| r.line);
            audit.insert(
                "decided_by".into(),
                match ask_rule {
                    Some(_) => rule_of(ask_rule),
                    None => json!({"policy": source, "why": "capabilities missing, no grant covers them"}),
                },
            );
            audit.insert("missing_capabilities".into(), json!(shortfall));
            audit.insert("interaction_id".into(), json!(id));
            (
                GateResponse::Ask { interaction_id: id },
                "gate.asked",
                principal.name.clone(),
                Some(interaction),
            )
        }
    };
    let record = GateCallRecord {
        session_id: req.session_id.clone(),
        request_id: req.request_id.clone(),
        call: call_identity(&req, &caller, &requested),
        decision,
        created_at: now,
    };
    let outcome = state
        .store()
        .record_gate_decision(NewGateDecision {
            record,
            interaction,
            audit: AuditRecord {
                action: action.into(),
                actor,
                data: Value::Object(audit),
            },
        })
        .await?;
    match outcome {
        GateRecordOutcome::Recorded {
            record,
            interaction,
        } => {
            if let Some(view) = interaction {
                // Triage (`route: ["operator", ...]`) follows the committed event.
                crate::interactions::opened(state, &view.request);
            }
            Ok(record.decision)
        }
        GateRecordOutcome::Existing(record) => Ok(record.decision),
        GateRecordOutcome::Conflict(record) => Err(ApiError::Conflict {
            code: "id_conflict",
            message: format!(
                "request {} of session {} was gated before as another call; use a new request_id",
                record.request_id, record.session_id
            ),
        }),
        GateRecordOutcome::TooManyPending => Err(crate::interactions::too_many_pending(
            state,
            &req.session_id,
        )),
    }
}

fn decision_name(d: RuleDecision) -> &'static str {
    match d {
        RuleDecision::Allow => "allow",
        RuleDecision::Deny => "deny",
        RuleDecision::Ask => "ask",
    }
}

/// The `tool_approval` interaction a gate call opens when it asks.
fn ask_interaction(
    state: &AppState,
    req: &GateRequest,
    caller: &str,
    shortfall: &BTreeSet<String>,
    actor: &str,
    now: OffsetDateTime,
) -> ApiResult<NewInteraction> {
    let some = |s: &str| (!s.is_empty()).then(|| s.to_owned());
    let mut request = InteractionRequest::new(
        req.session_id.clone(),
        InteractionKind::ToolApproval {
            tool_name: req.tool_name.clone(),
            args_json: req.args_json.clone(),
            missing_capabilities: shortfall.iter().cloned().collect(),
            sandbox_mode: req.sandbox_mode.clone(),
            options: Vec::new(),
        },
    );
    request.conversation_id = some(&req.conversation_id);
    request.turn_id = some(&req.turn_id);
    request.caller = some(caller);
    request.timeout_s = req.timeout_s;
    request.route = req.route.clone();
    request.reason = req.reason.clone();
    crate::interactions::prepare(state, request, actor, now, Some(&req.request_id))
}
