//! The checks of `lev bench chaos` after each restart: every write the
//! ledger holds is there exactly once, through the API and in the audit log,
//! and the audit chain verifies.

use std::collections::{HashMap, HashSet};

use anyhow::{Context as _, bail};
use lev_approval::{TrustedKeys, verify};
use lev_client::Client;
use lev_protocol::api::{AuditEntry, AuditPage, GateRequest, GateResponse, TaskStatus};

use super::ledger::Ledger;

/// Check what was acknowledged since `from` (indices into the ledger's
/// lists; maps are checked whole): returns the new `from`.
pub(super) async fn check(
    admin: &Client,
    worker: &Client,
    keys: &TrustedKeys,
    ledger: &mut Ledger,
    from: [usize; 6],
) -> anyhow::Result<[usize; 6]> {
    if let Some(wrong) = &ledger.wrong {
        bail!("{wrong}");
    }
    let [
        created_from,
        spent_from,
        granted_from,
        gated_from,
        results_from,
        spawned_from,
    ] = from;
    let created = &ledger.created[created_from..];
    let gated = &ledger.gated[gated_from..];
    let results = &ledger.results[results_from..];
    interactions_kept(admin, created, &ledger.answered).await?;
    nonces_kept(worker, &ledger.spent[spent_from..]).await?;
    decisions_kept(worker, keys, gated).await?;
    grants_kept(admin, &ledger.granted[granted_from..]).await?;
    tasks_kept(admin, results, &ledger.spawned[spawned_from..]).await?;
    // One answer per interaction, one result per task, and one chain.
    let audit = admin.audit_all().await?;
    lev_approval::audit::verify_chain(&audit.page.items, &audit.head, keys, None)
        .map_err(|e| anyhow::anyhow!("the audit chain does not verify: {e}"))?;
    answered_once(&audit)?;
    logged_once(&audit, created, gated)?;
    results_once(&audit, results)?;
    ledger.checked += ledger.created.len() - created_from + ledger.spent.len() - spent_from
        + ledger.granted.len()
        - granted_from
        + ledger.gated.len()
        - gated_from
        + ledger.results.len()
        - results_from
        + ledger.spawned.len()
        - spawned_from;
    Ok([
        ledger.created.len(),
        ledger.spent.len(),
        ledger.granted.len(),
        ledger.gated.len(),
        ledger.results.len(),
        ledger.spawned.len(),
    ])
}

/// Every acknowledged create is there, with its acknowledged answer.
async fn interactions_kept(
    admin: &Client,
    created: &[String],
    answered: &HashMap<String, String>,
) -> anyhow::Result<()> {
    for id in created {
        let view = admin
            .get_interaction(id)
            .await
            .with_context(|| format!("acknowledged create {id} is lost"))?;
        if let Some(value) = answered.get(id) {
            let got = view.response.as_ref().and_then(|r| r.value.as_deref());
            if got != Some(value.as_str()) {
                bail!("acknowledged answer to {id} is lost: found {got:?}, expected {value:?}");
            }
        }
    }
    Ok(())
}

/// Every nonce acknowledged spent stays spent.
async fn nonces_kept(worker: &Client, spent: &[String]) -> anyhow::Result<()> {
    for nonce in spent {
        match worker.consume_nonce(nonce).await {
            Err(e) if e.code() == Some("nonce_spent") => {}
            Ok(()) => bail!("nonce {nonce} was acknowledged spent, and spent again"),
            Err(e) => bail!("nonce {nonce}: {e}"),
        }
    }
    Ok(())
}

/// Every acknowledged decision is recorded: the same call under its
/// request id gets the same signed decision back.
async fn decisions_kept(
    worker: &Client,
    keys: &TrustedKeys,
    gated: &[(GateRequest, String)],
) -> anyhow::Result<()> {
    for (call, nonce) in gated {
        let request_id = &call.request_id;
        match worker.gate(call).await? {
            GateResponse::Allow { approval } => {
                let payload = verify(&approval, keys, time::OffsetDateTime::now_utc())?.payload;
                if &payload.nonce != nonce {
                    bail!(
                        "gate {request_id}: decided twice (nonce {} then {nonce})",
                        payload.nonce
                    );
                }
            }
            other => bail!("gate {request_id}: the recorded allow became {other:?}"),
        }
    }
    Ok(())
}

/// Every acknowledged session grant is there, once.
async fn grants_kept(admin: &Client, granted: &[String]) -> anyhow::Result<()> {
    let grants = admin.grants().await?;
    let mut sessions: HashMap<&str, usize> = HashMap::new();
    for grant in grants.iter().filter(|g| g.tool_name == "deploy") {
        if let Some(conversation) = grant.conversation_id.as_deref() {
            *sessions.entry(conversation).or_default() += 1;
        }
    }
    for session in granted {
        match sessions.get(session.as_str()) {
            Some(1) => {}
            None => bail!("the acknowledged session grant of {session} is lost"),
            Some(n) => bail!("the session {session} holds {n} grants for one key"),
        }
    }
    Ok(())
}

/// Every acknowledged result is the task's, and every acknowledged spawn
/// finished with the result it returned.
async fn tasks_kept(
    admin: &Client,
    results: &[(String, serde_json::Value)],
    spawned: &[(String, serde_json::Value)],
) -> anyhow::Result<()> {
    for (task_id, value) in results {
        let task = admin
            .get_task(task_id)
            .await
            .with_context(|| format!("the task of acknowledged result {task_id} is lost"))?;
        if posted_value(&task) != Some(value) {
            bail!(
                "the acknowledged result of {task_id} is lost: found {:?}",
                task.last_result
            );
        }
    }
    for (task_id, value) in spawned {
        let task = admin
            .get_task(task_id)
            .await
            .with_context(|| format!("acknowledged spawn {task_id} is lost"))?;
        if task.status != TaskStatus::Succeeded || posted_value(&task) != Some(value) {
            bail!(
                "acknowledged spawn {task_id} is {:?} with {:?}, expected succeeded with {value}",
                task.status,
                task.last_result
            );
        }
    }
    Ok(())
}

/// The `value` of the result a task's sub-agent posted.
fn posted_value(task: &lev_protocol::api::Task) -> Option<&serde_json::Value> {
    task.last_result.as_ref().and_then(|r| r.get("value"))
}

/// No interaction answered twice in the audit log.
fn answered_once(audit: &AuditPage) -> anyhow::Result<()> {
    let mut answered = HashSet::new();
    for entry in &audit.page.items {
        if entry.action != "interaction.answered" {
            continue;
        }
        let id = entry
            .data
            .get("id")
            .and_then(|v| v.as_str())
            .unwrap_or_default();
        if !answered.insert(id.to_owned()) {
            bail!("{id} was answered twice (audit entry {})", entry.seq);
        }
    }
    Ok(())
}

/// Each acknowledged create and gate decision is in the log exactly once.
fn logged_once(
    audit: &AuditPage,
    created: &[String],
    gated: &[(GateRequest, String)],
) -> anyhow::Result<()> {
    let mut creates: HashMap<&str, usize> = HashMap::new();
    let mut decided: HashMap<&str, usize> = HashMap::new();
    for entry in &audit.page.items {
        let field = |name: &str| entry.data.get(name).and_then(|v| v.as_str());
        match entry.action.as_str() {
            "interaction.created" => {
                *creates.entry(field("id").unwrap_or_default()).or_default() += 1
            }
            "gate.allowed" => {
                *decided
                    .entry(field("nonce").unwrap_or_default())
                    .or_default() += 1
            }
            _ => {}
        }
    }
    for id in created {
        let times = creates.get(id.as_str()).copied().unwrap_or(0);
        if times != 1 {
            bail!("acknowledged create {id} is in the audit log {times} times");
        }
    }
    for (call, nonce) in gated {
        let times = decided.get(nonce.as_str()).copied().unwrap_or(0);
        if times != 1 {
            bail!(
                "the acknowledged decision of gate {} (nonce {nonce}) is in the audit log {times} times",
                call.request_id
            );
        }
    }
    Ok(())
}

/// No task took two results, and every acknowledged result is in the log.
fn results_once(audit: &AuditPage, results: &[(String, serde_json::Value)]) -> anyhow::Result<()> {
    let mut resulted = HashSet::new();
    let task_results = audit
        .page
        .items
        .iter()
        .filter(|e| e.action == "task.result");
    for entry in task_results {
        let id = task_of(entry);
        if !resulted.insert(id.to_owned()) {
            bail!("task {id} took two results (audit entry {})", entry.seq);
        }
    }
    for (task_id, _) in results {
        if !resulted.contains(task_id) {
            bail!("the acknowledged result of {task_id} is not in the audit log");
        }
    }
    Ok(())
}

/// The task a `task.result` entry is about.
fn task_of(entry: &AuditEntry) -> &str {
    entry
        .data
        .get("task_id")
        .or_else(|| entry.data.get("id"))
        .and_then(|v| v.as_str())
        .unwrap_or_default()
}
