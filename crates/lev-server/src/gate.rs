//! The tool-call gate (SPEC section 6).
//!
//! - [`decide`]: `POST /v1/gate`. The decision itself is lev-approval's pure
//!   [`decide`](lev_approval::policy::decide); this module validates the call,
//!   reads the grants that may cover it, and has the store commit the
//!   decision, its audit entry, the interaction it opens and its idempotency
//!   record in one transaction. The envelope is signed by the store's call of
//!   the gate's signer, after its repeat check: a repeated call signs
//!   nothing and answers with the envelope first recorded.
//! - [`load_policy`]: the policy file, or the built-in ask-everything policy.
//!
//! # Invariants
//! - The approver written into a signature is the token's name, `policy`, or
//!   the approver of the grant that decided: never a name the client sends.
//! - Every allow and deny is in the audit log with what decided it (the
//!   policy's source and rule line, or the grant).
//! - A gate call's envelope is bound to the gate's `request_id`, also when a
//!   person decides it later through the interaction it opened.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use lev_approval::policy::{
    AskingRule, GateCall, GateDecision, GateVerdict, Policy, QuorumRule, Risk, Rule, RuleDecision,
};
use lev_approval::{ArgsMatcher, GrantRule};
use lev_protocol::api::{GateRequest, GateResponse, Grant};
use lev_protocol::validate_gate::validate_gate_request;
use lev_protocol::{GateNote, InteractionKind, InteractionRequest};
use lev_store::{AuditRecord, GateRecordOutcome, NewGateDecision, NewInteraction};
use serde_json::{Map, Value, json};
use time::OffsetDateTime;

use crate::auth::Principal;
use crate::error::{ApiError, ApiResult};
use crate::signing::{Decision, grant_conversation, sign};
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

/// Validate a gate request (`lev_protocol::validate_gate`), the token's
/// right to the session first; returns the caller it acts for and the
/// parsed args.
fn validate(
    state: &AppState,
    principal: &Principal,
    req: &GateRequest,
) -> ApiResult<(String, Value)> {
    let named = (!req.caller.is_empty()).then_some(req.caller.as_str());
    let caller = principal.effective_caller(named)?.unwrap_or_default();
    lev_protocol::validate::check_id("session_id", &req.session_id)?;
    principal.check_session(&req.session_id)?;
    let args = validate_gate_request(req, &caller, &state.settings().limits)?;
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

/// A gate call being decided: what every verdict's part reads.
struct Gated<'a> {
    state: &'a AppState,
    req: &'a GateRequest,
    /// The caller the call acts for (the token's, or the one it named).
    caller: &'a str,
    /// The policy in force, read once per call.
    policy: &'a Policy,
    /// Where it came from, for the audit log.
    source: &'a str,
}

/// What one gate call records: its answer (signed only once the store
/// knows it will record it), its audit entry (action, actor, data) and the
/// interaction an ask opens.
struct Outcome {
    response: Answer,
    action: &'static str,
    actor: String,
    audit: Map<String, Value>,
    interaction: Option<NewInteraction>,
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
    agent: Option<crate::trace::Ctx>,
) -> ApiResult<GateResponse> {
    let started = std::time::SystemTime::now();
    let (caller, args) = validate(state, principal, &req)?;
    let settings = state.settings();
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
    let gated = Gated {
        state,
        req: &req,
        caller: &caller,
        policy: &settings.policy,
        source: &settings.policy_source,
    };
    let (decision, grants) = judge(&gated, &call).await?;
    let now = OffsetDateTime::now_utc();
    let audit = audit_of(&req, &caller, &requested);
    let outcome = match decision.verdict {
        GateVerdict::AllowByPolicy { ref shortfall, .. } => {
            allow_by_policy(&gated, &decision, shortfall, audit)?
        }
        GateVerdict::Deny { reason, .. } => deny(&gated, decision.rule, reason, audit)?,
        GateVerdict::AllowByGrant { grant, shortfall } => {
            let g = grants
                .get(grant)
                .ok_or_else(|| ApiError::Internal("a grant matched that is not loaded".into()))?;
            allow_by_grant(&gated, g, &shortfall, audit)?
        }
        GateVerdict::Ask { shortfall, rule } => {
            let asked = Asked {
                shortfall: &shortfall,
                note: rule,
                rule: decision.rule,
                quorum: decision.quorum,
            };
            ask(&gated, principal, &asked, audit, now)?
        }
    };
    let new = NewGateDecision {
        session_id: req.session_id.clone(),
        request_id: req.request_id.clone(),
        call: call_identity(&req, &caller, &requested),
        created_at: now,
        interaction: outcome.interaction,
        audit: AuditRecord {
            action: outcome.action.into(),
            actor: outcome.actor,
            data: Value::Object(outcome.audit),
        },
    };
    let sign = signer(&gated, outcome.response);
    let traced = Traced { agent, started };
    record_decision(state, &req.session_id, new, sign, traced).await
}

/// Where a gate call's question joins the agent's trace.
struct Traced {
    /// The agent's `traceparent`, when it sent one.
    agent: Option<crate::trace::Ctx>,
    started: std::time::SystemTime,
}

/// A gate call's answer: given (an ask), or to be signed.
enum Answer {
    Given(GateResponse),
    /// Signed as approved (the nonce goes into the audit entry).
    Allow {
        for_session: bool,
        covered: BTreeSet<String>,
        approver: String,
        reason: String,
    },
    /// Signed as denied.
    Deny {
        reason: String,
    },
}

/// What signs `answer` when the store records it (never for a repeat).
fn signer(gated: &Gated<'_>, answer: Answer) -> lev_store::GateSigner {
    let (approved, for_session, covered, approver, reason) = match answer {
        Answer::Given(response) => return lev_store::decided(response),
        Answer::Allow {
            for_session,
            covered,
            approver,
            reason,
        } => (true, for_session, covered, approver, reason),
        Answer::Deny { reason } => (false, false, BTreeSet::new(), "policy".to_owned(), reason),
    };
    let state = gated.state.clone();
    let req = gated.req;
    let (request_id, turn_id, tool_name, args_json, sandbox_mode, conversation_id) = (
        req.request_id.clone(),
        req.turn_id.clone(),
        req.tool_name.clone(),
        req.args_json.clone(),
        req.sandbox_mode.clone(),
        req.conversation_id.clone(),
    );
    let caller = gated.caller.to_owned();
    Box::new(move |audit: &mut AuditRecord| {
        let (approval, nonce) = sign(
            &state,
            &Decision {
                request_id: &request_id,
                turn_id: &turn_id,
                tool_name: &tool_name,
                args_json: &args_json,
                modified_args_json: "",
                approved,
                approved_for_session: for_session,
                covered: &covered,
                caller: &caller,
                approver: &approver,
                sandbox_mode: &sandbox_mode,
                reason: &reason,
                injected_context: "",
                conversation_id: &conversation_id,
                votes: None,
            },
        )
        .map_err(|e| lev_store::StoreError::Database(format!("signing the decision: {e}")))?;
        if !approved {
            return Ok(GateResponse::Deny {
                reason,
                approval: Some(approval),
            });
        }
        if let Value::Object(data) = &mut audit.data {
            data.insert("nonce".into(), json!(nonce));
        }
        Ok(GateResponse::Allow { approval })
    })
}

/// The policy's decision on `call`, read once, with the grants that may
/// cover it read only when they may decide (rules and an empty shortfall
/// decide without them). An allow by a grant indexes the grants returned.
async fn judge<'p>(
    gated: &Gated<'p>,
    call: &GateCall<'_>,
) -> ApiResult<(GateDecision<'p>, Vec<Grant>)> {
    let decision = lev_approval::policy::decide(gated.policy, call, &[]);
    if !decision.grants_may_decide() {
        return Ok((decision, Vec::new()));
    }
    let grants = gated
        .state
        .store()
        .grants_for(
            gated.caller,
            call.conversation_id,
            &gated.req.sandbox_mode,
            &gated.req.tool_name,
        )
        .await?;
    let rules: Vec<(usize, GrantRule)> = grants
        .iter()
        .enumerate()
        .filter_map(|(i, g)| grant_rule(g).map(|r| (i, r)))
        .collect();
    let only_rules: Vec<GrantRule> = rules.iter().map(|(_, r)| r.clone()).collect();
    let mut decision = decision.with_grants(call, &only_rules);
    if let GateVerdict::AllowByGrant { grant, .. } = &mut decision.verdict {
        *grant = rules.get(*grant).map_or(*grant, |(i, _)| *i);
    }
    Ok((decision, grants))
}

/// The audit entry's fields every gate call has.
fn audit_of(req: &GateRequest, caller: &str, requested: &BTreeSet<String>) -> Map<String, Value> {
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
    audit
}

/// The audit log's `decided_by` for a decision by `rule`, or by the
/// policy's default when no rule matched.
fn decided_by(gated: &Gated<'_>, rule: Option<&Rule>) -> Value {
    match rule {
        Some(r) => json!({"policy": gated.source, "rule_line": r.line, "rule_tool": r.tool,
                           "rule_decision": decision_name(r.decision), "rule_reason": r.reason}),
        None => json!({"policy": gated.source, "rule_line": null,
                        "why": format!("no rule matched; the policy's default is {}",
                                       decision_name(gated.policy.default))}),
    }
}

/// Allowed by a rule, or by the policy's default with nothing missing.
fn allow_by_policy(
    gated: &Gated<'_>,
    decision: &GateDecision<'_>,
    shortfall: &BTreeSet<String>,
    mut audit: Map<String, Value>,
) -> ApiResult<Outcome> {
    audit.insert("decided_by".into(), decided_by(gated, decision.rule));
    audit.insert("covered_capabilities".into(), json!(shortfall));
    Ok(Outcome {
        response: Answer::Allow {
            for_session: false,
            covered: shortfall.clone(),
            approver: "policy".to_owned(),
            reason: decision.reason().to_owned(),
        },
        action: "gate.allowed",
        actor: "policy".to_owned(),
        audit,
        interaction: None,
    })
}

/// Denied by a rule, or by the policy's default.
fn deny(
    gated: &Gated<'_>,
    rule: Option<&Rule>,
    reason: String,
    mut audit: Map<String, Value>,
) -> ApiResult<Outcome> {
    audit.insert("decided_by".into(), decided_by(gated, rule));
    Ok(Outcome {
        response: Answer::Deny { reason },
        action: "gate.denied",
        actor: "policy".to_owned(),
        audit,
        interaction: None,
    })
}

/// Allowed by grant `g`, signed with its approver.
fn allow_by_grant(
    gated: &Gated<'_>,
    g: &Grant,
    shortfall: &BTreeSet<String>,
    mut audit: Map<String, Value>,
) -> ApiResult<Outcome> {
    audit.insert(
        "decided_by".into(),
        json!({"policy": gated.source, "grant_id": g.id, "grant_scope": g.scope.as_str(),
               "grant_approver": g.approver, "grant_interaction_id": g.interaction_id}),
    );
    audit.insert("covered_capabilities".into(), json!(shortfall));
    Ok(Outcome {
        response: Answer::Allow {
            for_session: true,
            covered: shortfall.clone(),
            approver: g.approver.clone(),
            reason: String::new(),
        },
        action: "gate.allowed",
        actor: g.approver.clone(),
        audit,
        interaction: None,
    })
}

/// What an ask is made of: the decision's parts a person's interaction
/// carries.
struct Asked<'a> {
    shortfall: &'a BTreeSet<String>,
    /// The ask rule that stopped the call (a file's rule), for the note.
    note: Option<AskingRule>,
    /// The rule that matched, if any.
    rule: Option<&'a Rule>,
    /// How many must approve, and who may vote.
    quorum: Option<&'a QuorumRule>,
}

/// A person must decide: the `tool_approval` interaction it opens.
fn ask(
    gated: &Gated<'_>,
    principal: &Principal,
    asked: &Asked<'_>,
    mut audit: Map<String, Value>,
    now: OffsetDateTime,
) -> ApiResult<Outcome> {
    let note = asked.note.as_ref().map(|r| GateNote {
        rule_line: u64::try_from(r.line).ok(),
        rule_tool: Some(r.tool.clone()),
        rule_reason: (!r.reason.is_empty()).then(|| r.reason.clone()),
        risk: (r.risk == Risk::High).then(|| r.risk.as_str().to_owned()),
        policy: Some(gated.source.to_owned()),
        remind_after_s: r.remind_after_s,
    });
    let mut interaction = ask_interaction(gated, asked, &principal.name, now)?;
    interaction.interaction.request.gate = note;
    let id = interaction.interaction.id().to_owned();
    let ask_rule = asked.rule.filter(|r| r.decision == RuleDecision::Ask);
    audit.insert(
        "decided_by".into(),
        match ask_rule {
            Some(_) => decided_by(gated, ask_rule),
            None => {
                json!({"policy": gated.source, "why": "capabilities missing, no grant covers them"})
            }
        },
    );
    audit.insert("missing_capabilities".into(), json!(asked.shortfall));
    audit.insert("interaction_id".into(), json!(id));
    Ok(Outcome {
        response: Answer::Given(GateResponse::Ask { interaction_id: id }),
        action: "gate.asked",
        actor: principal.name.clone(),
        audit,
        interaction: Some(interaction),
    })
}

/// Have the store commit the decision, its audit entry, the interaction it
/// opens and its idempotency record in one transaction; a repeat of the
/// same call answers as the first did.
async fn record_decision(
    state: &AppState,
    session_id: &str,
    new: NewGateDecision,
    sign: lev_store::GateSigner,
    traced: Traced,
) -> ApiResult<GateResponse> {
    let recorded = state.store().record_gate_decision(new, sign).await?;
    match recorded {
        GateRecordOutcome::Recorded {
            record,
            interaction,
        } => {
            if let Some(view) = interaction {
                // The question's trace starts here, once (a repeat of the
                // call opens nothing).
                state.tracer().created(
                    view.request.id(),
                    traced.agent,
                    traced.started,
                    &view.request,
                );
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
        GateRecordOutcome::TooManyPending => {
            Err(crate::interactions::too_many_pending(state, session_id))
        }
    }
}

fn decision_name(d: RuleDecision) -> &'static str {
    match d {
        RuleDecision::Allow => "allow",
        RuleDecision::Deny => "deny",
        RuleDecision::Ask => "ask",
    }
}

/// The `tool_approval` interaction a gate call opens when it asks, under
/// the quorum the decision found.
fn ask_interaction(
    gated: &Gated<'_>,
    asked: &Asked<'_>,
    actor: &str,
    now: OffsetDateTime,
) -> ApiResult<NewInteraction> {
    let (req, caller) = (gated.req, gated.caller);
    let some = |s: &str| (!s.is_empty()).then(|| s.to_owned());
    let mut request = InteractionRequest::new(
        req.session_id.clone(),
        InteractionKind::ToolApproval {
            tool_name: req.tool_name.clone(),
            args_json: req.args_json.clone(),
            missing_capabilities: asked.shortfall.iter().cloned().collect(),
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
    crate::interactions::prepare_under(
        gated.state,
        request,
        actor,
        now,
        Some(&req.request_id),
        asked.quorum,
    )
}
