//! The load of `lev bench chaos`: each worker's rounds (a question and its
//! answer, an allowed call and its nonce spent, now and then a sub-agent and
//! a session grant), and the spawn session's operator. Every acknowledged
//! write goes into the ledger.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::{Context as _, bail};
use lev_approval::{TrustedKeys, verify};
use lev_client::Client;
use lev_client::operator::{
    Ask, Hook, HookDecision, OperatorHandler, Session, SpawnOrder, SpawnOutcome, post_worker_result,
};
use lev_protocol::api::{GateRequest, GateResponse};
use lev_protocol::{
    ApprovalScope, InteractionKind, InteractionRequest, InteractionResponse, WorkerResult,
};

use super::ledger::{Shared, ledger, unacknowledged};

/// A pause after a request the server did not acknowledge (it is down).
const BACK_OFF: Duration = Duration::from_millis(20);

fn gate_call(session: &str, tool: &str, n: usize, w: usize) -> GateRequest {
    let (args, caps) = if tool == "deploy" {
        (
            format!(r#"{{"service":"svc-{w}","build":{n}}}"#),
            vec!["net".to_owned()],
        )
    } else {
        (
            format!(r#"{{"path":"/srv/data/file-{n}.txt"}}"#),
            vec!["fs-read".to_owned()],
        )
    };
    GateRequest {
        session_id: session.to_owned(),
        conversation_id: session.to_owned(),
        turn_id: format!("t-{n}"),
        request_id: format!("{session}-{tool}-{n}"),
        caller: "chaos".into(),
        tool_name: tool.into(),
        args_json: args,
        sandbox_mode: "read-only".into(),
        required_capabilities: caps,
        timeout_s: Some(3600),
        route: None,
        reason: None,
    }
}

/// The session whose operator runs the chaos run's spawns.
pub(super) fn spawn_session(tag: u32) -> String {
    format!("chaos-spawn-{tag}")
}

/// The operator of the spawn session: lets every spawn run, and runs it as
/// a sub-agent would, posting the task's result over HTTP with the task's
/// token (recorded once acknowledged); the spawn's own result is that one.
#[derive(Debug)]
pub(super) struct ChaosOperator {
    pub(super) client: Client,
    pub(super) shared: Shared,
}

impl OperatorHandler for ChaosOperator {
    async fn ask(&self, ask: Ask) -> serde_json::Value {
        serde_json::json!({"echo": ask.question})
    }

    async fn hook_before(&self, _hook: Hook) -> HookDecision {
        HookDecision::Allow
    }

    async fn spawn(&self, order: SpawnOrder) -> SpawnOutcome {
        let value = serde_json::json!({"ran": order.spawn, "task": order.task_id});
        let result = WorkerResult {
            task_id: order.task_id.clone(),
            value: value.clone(),
            ok: true,
            error: None,
            output_tail: Some(format!("sub-agent of {}", order.task_id)),
        };
        match post_worker_result(&order.sub_agent(&self.client), &result).await {
            Ok(_) => ledger(&self.shared).results.push((order.task_id, value)),
            // Re-sent after a reconnect: the first post was acknowledged.
            Err(e) if e.code() == Some("task_finished") => {}
            Err(e) if unacknowledged(&e) => {}
            Err(e) => {
                let mut l = ledger(&self.shared);
                l.wrong
                    .get_or_insert(format!("worker result of {}: {e}", order.task_id));
            }
        }
        SpawnOutcome::deferred()
    }
}

/// One worker's loop, until `stop`: returns at the first wrong answer.
#[allow(clippy::too_many_arguments)]
pub(super) async fn work(
    w: usize,
    epoch: String,
    worker: Client,
    approver: Client,
    spawner: Session,
    keys: TrustedKeys,
    shared: Shared,
    stop: Arc<AtomicBool>,
) -> anyhow::Result<()> {
    let me = Worker {
        w,
        session: format!("chaos-{epoch}-{w}"),
        epoch: epoch.replace('-', "_"),
        worker,
        approver,
        spawner,
        keys,
        shared,
    };
    let mut n = 0usize;
    while !stop.load(Ordering::Relaxed) {
        n += 1;
        if me.round(n).await? == Ack::No {
            tokio::time::sleep(BACK_OFF).await;
        }
    }
    Ok(())
}

/// Whether the server acknowledged a write: `No` when it went away (or is
/// going away), and the round stops there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ack {
    Yes,
    No,
}

/// The same `?` for a step of a round: a wrong answer fails the run; a
/// write not acknowledged ends the round.
macro_rules! step {
    ($e:expr) => {
        if $e == Ack::No {
            return Ok(Ack::No);
        }
    };
}

/// One worker and what it works with.
struct Worker {
    w: usize,
    /// Its session (`chaos-TAG-KILL-W`).
    session: String,
    /// The round of kills, as an id part (`TAG_KILL`).
    epoch: String,
    worker: Client,
    approver: Client,
    spawner: Session,
    keys: TrustedKeys,
    shared: Shared,
}

impl Worker {
    /// Round `n`: a question and its answer, a call a rule allows and its
    /// nonce spent; now and then a sub-agent, and a deploy approved for the
    /// session.
    async fn round(&self, n: usize) -> anyhow::Result<Ack> {
        step!(self.question(n).await?);
        step!(self.allowed_call(n).await?);
        if n % 4 == 2 {
            step!(self.spawn(n).await?);
        }
        if n % 8 == 1 {
            step!(self.deploy_for_session(n).await?);
        }
        Ok(Ack::Yes)
    }

    /// A question, and its answer.
    async fn question(&self, n: usize) -> anyhow::Result<Ack> {
        let (w, epoch, shared) = (self.w, &self.epoch, &self.shared);
        let id = format!("ir_chaos_{epoch}_{w}_{n}");
        let mut q = InteractionRequest::new(
            self.session.clone(),
            InteractionKind::FreeText {
                prompt: format!("question {n}"),
            },
        );
        q.id = Some(id.clone());
        match self.worker.create_interaction(&q).await {
            Ok(_) => ledger(shared).created.push(id.clone()),
            Err(e) if unacknowledged(&e) => return Ok(Ack::No),
            Err(e) => bail!("create {id}: {e}"),
        }
        let value = format!("answer {epoch}/{w}/{n}");
        match self
            .approver
            .respond(&id, &InteractionResponse::text(id.clone(), value.clone()))
            .await
        {
            Ok(_) => {
                ledger(shared).answered.insert(id.clone(), value);
            }
            Err(e) if unacknowledged(&e) => return Ok(Ack::No),
            Err(e) => bail!("respond {id}: {e}"),
        }
        Ok(Ack::Yes)
    }

    /// A call a rule allows: a signed decision, and its nonce spent.
    async fn allowed_call(&self, n: usize) -> anyhow::Result<Ack> {
        let call = gate_call(&self.session, "fs.read", n, self.w);
        let nonce = match self.worker.gate(&call).await {
            Ok(GateResponse::Allow { approval }) => {
                let verified = verify(&approval, &self.keys, time::OffsetDateTime::now_utc())
                    .with_context(|| format!("gate {}: the approval", call.request_id))?;
                let nonce = verified.payload.nonce;
                ledger(&self.shared)
                    .gated
                    .push((call.clone(), nonce.clone()));
                nonce
            }
            Ok(other) => bail!("gate {}: expected allow, found {other:?}", call.request_id),
            Err(e) if unacknowledged(&e) => return Ok(Ack::No),
            Err(e) => bail!("gate {}: {e}", call.request_id),
        };
        match self.worker.consume_nonce(&nonce).await {
            Ok(()) => ledger(&self.shared).spent.push(nonce),
            Err(e) if unacknowledged(&e) => return Ok(Ack::No),
            Err(e) => bail!("consume {nonce}: {e}"),
        }
        Ok(Ack::Yes)
    }

    /// A sub-agent, spawned through the session's operator.
    async fn spawn(&self, n: usize) -> anyhow::Result<Ack> {
        let order = serde_json::json!({"worker": self.w, "n": n, "epoch": self.epoch});
        match self
            .spawner
            .spawn(order, Some(Duration::from_secs(5)))
            .await
        {
            Ok(done) if done.ok => ledger(&self.shared)
                .spawned
                .push((done.task_id, done.value)),
            Ok(done) => bail!("spawn {}: failed: {:?}", done.task_id, done.error),
            Err(e) if unacknowledged(&e) => return Ok(Ack::No),
            // The operator has not reconnected since the restart, or its
            // connection went with the server that held the spawn.
            Err(e) if matches!(e.code(), Some("timeout" | "spawn_failed")) => {}
            Err(e) => bail!("spawn: {e}"),
        }
        Ok(Ack::Yes)
    }

    /// A deploy that asks, approved for the session: a grant.
    async fn deploy_for_session(&self, n: usize) -> anyhow::Result<Ack> {
        let call = gate_call(&self.session, "deploy", n, self.w);
        match self.worker.gate(&call).await {
            Ok(GateResponse::Ask { interaction_id }) => {
                let approve = InteractionResponse::approval(
                    interaction_id.clone(),
                    true,
                    ApprovalScope::Session,
                );
                match self.approver.respond(&interaction_id, &approve).await {
                    Ok(_) => ledger(&self.shared).granted.push(self.session.clone()),
                    Err(e) if unacknowledged(&e) => return Ok(Ack::No),
                    Err(e) if e.code() == Some("already_answered") => {}
                    Err(e) => bail!("approve {interaction_id}: {e}"),
                }
            }
            // A grant from an earlier round covers it.
            Ok(GateResponse::Allow { .. }) => {}
            Ok(other) => bail!("gate {}: found {other:?}", call.request_id),
            Err(e) if unacknowledged(&e) => return Ok(Ack::No),
            Err(e) => bail!("gate {}: {e}", call.request_id),
        }
        Ok(Ack::Yes)
    }
}
