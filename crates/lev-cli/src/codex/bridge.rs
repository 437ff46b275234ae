//! The bridge between one Codex app-server connection and lev's gate, shared
//! by `lev codex run` (lev's own app-server on stdio) and `lev codex attach`
//! (the terminal UI's shared app-server socket).
//!
//! Every approval request Codex sends is mapped ([`super::approval`]), gated
//! through [`gatekeep::settle`] (the gate, a person, the signed decision
//! verified against pinned keys, its nonce spent), and answered:
//!
//! | lev's decision | Codex's answer |
//! | --- | --- |
//! | approve | `accept` |
//! | approve for the session | `acceptForSession` (and lev's session grant) |
//! | approve always | `acceptForSession` (and lev's always grant); Codex's own prefix rule only with `--codex-rules` |
//! | approve with injected context | `turn/steer` with the context, then the accept |
//! | approve with an edit | `turn/steer` with the exact edited call, then `decline`; the re-issued call that matches the signed edit exactly is accepted at once (a one-shot approval) |
//! | deny, a policy rule's deny | `turn/steer` with the feedback, context or reason, then `decline` |
//! | nobody decided in time, cancelled, lev unreachable or silent past the call's deadline | `cancel` (the turn ends) |
//! | a decision that does not verify, a refusal | `decline`, with the reason steered to the model |
//!
//! When someone else answers first (the person in Codex's terminal UI, or an
//! interrupt), Codex says `serverRequest/resolved`: lev stops waiting, reads
//! what became of the item (how `item/completed` says it ended; else the
//! thread's history, which keeps no item of a turn the answer interrupted),
//! and records it on its own question (answered with the UI's decision when
//! the token may answer, else cancelled).

use std::collections::{HashMap, HashSet};
use std::io::Write as _;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use lev_approval::TrustedKeys;
use lev_client::Client;
use lev_client::gate::{ApprovedCall, GateOutcome, Refusal, RefusalKind};
use lev_client::render::{INTERNAL_CLOSE, INTERNAL_OPEN};
use lev_protocol::api::GateResponse;
use lev_protocol::{ApprovalScope, InteractionResponse};
use serde_json::{Value, json};
use time::OffsetDateTime;

use super::approval::{self, Ask, Kind, Mapping, Reply};
use super::rpc::{Incoming, Peer};
use crate::gatekeep::{self, GateCall, GateError, Settled};
use crate::term;

/// How the bridge decides.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The person the agent acts for, when the token is not bound to one.
    pub caller: Option<String>,
    /// Who sees the question, in order.
    pub route: Option<Vec<String>>,
    /// How long a person has to decide.
    pub timeout: Duration,
    /// On an "always" approval, also give Codex its proposed prefix rule.
    pub codex_rules: bool,
    /// Print the agent's progress (commands, output, messages), not only
    /// lev's decisions.
    pub progress: bool,
    /// The sandbox mode of a thread the bridge was not told about.
    pub default_sandbox: String,
}

/// What the caller of [`Bridge::handle`] should know.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// Nothing for the caller.
    None,
    /// A turn ended.
    TurnCompleted {
        /// Its thread.
        thread: String,
        /// The turn.
        turn: String,
        /// `completed`, `interrupted` or `failed`.
        status: String,
        /// Why it failed, when it did.
        error: Option<String>,
    },
    /// A thread showed activity (attach resumes threads it does not follow).
    ThreadSeen(String),
}

/// One Codex connection's approvals, answered through lev.
#[derive(Debug, Clone)]
pub struct Bridge {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    peer: Peer,
    client: Client,
    keys: TrustedKeys,
    settings: Settings,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    /// Thread id -> its sandbox mode (lev's sandbox_mode for its calls).
    threads: HashMap<String, String>,
    /// File-change item id -> its `changes`, from `item/started`.
    changes: HashMap<String, Value>,
    /// Edited calls the model was told to make, approved once each.
    one_shots: Vec<OneShot>,
    /// Codex's requests lev is deciding, by request id (its JSON text).
    pending: HashMap<String, Pending>,
    /// Why lev could not be reached, when it could not.
    unreachable: Option<String>,
    /// lev itself is interrupting the turn: what Codex resolves now was
    /// nobody's decision.
    interrupting: bool,
    /// Records of what someone else decided, still being written.
    recording: Vec<tokio::task::JoinHandle<()>>,
    /// Items someone else answered, whose end lev waits to read.
    awaited: HashSet<String>,
    /// How those items ended (`item/completed`'s status): a turn the answer
    /// interrupted keeps no record of them in its history.
    ended: HashMap<String, String>,
}

#[derive(Debug, Clone)]
struct OneShot {
    thread: String,
    tool: String,
    args: serde_json::Map<String, Value>,
    expires_at: OffsetDateTime,
    approver: String,
    interaction: Option<String>,
}

#[derive(Debug)]
struct Pending {
    /// The gate call, once mapped.
    call: Option<GateCall>,
    /// The request's item and turn, to read what became of it.
    item: Option<String>,
    turn: Option<String>,
    thread: Option<String>,
    shown: String,
    /// The question a person answers, once the gate asked.
    interaction: Option<String>,
    /// lev is answering Codex (so a `serverRequest/resolved` is its own).
    answered: bool,
    task: Option<tokio::task::AbortHandle>,
}

impl Bridge {
    /// A bridge answering on `peer`, deciding through `client` with `keys`.
    pub fn new(peer: Peer, client: Client, keys: TrustedKeys, settings: Settings) -> Self {
        Self {
            inner: Arc::new(Inner {
                peer,
                client,
                keys,
                settings,
                state: Mutex::default(),
            }),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.inner
            .state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Follow thread `id`, whose calls run under `sandbox` with Codex's
    /// approval `policy` (lev judges them as [`gated_sandbox`] says).
    pub fn add_thread(&self, id: &str, sandbox: &str, policy: &str) {
        self.state()
            .threads
            .insert(id.to_owned(), gated_sandbox(sandbox, policy));
    }

    /// Whether thread `id` is followed.
    pub fn follows(&self, id: &str) -> bool {
        self.state().threads.contains_key(id)
    }

    /// lev is interrupting the turn (Ctrl-C): the requests Codex resolves
    /// now are cancelled in lev, not recorded as someone's decision.
    pub fn interrupting(&self) {
        self.state().interrupting = true;
    }

    /// Why lev could not be reached while deciding, if it could not.
    pub fn unreachable(&self) -> Option<String> {
        self.state().unreachable.clone()
    }

    /// Handle one message from Codex (responses are the peer's).
    pub fn handle(&self, message: Incoming) -> Event {
        match message {
            Incoming::Request { id, method, params } => {
                self.request(id, method, params);
                Event::None
            }
            Incoming::Notification { method, params } => self.notification(&method, &params),
            Incoming::Response { id, outcome } => {
                self.inner.peer.resolve(&id, outcome);
                Event::None
            }
        }
    }

    fn request(&self, id: Value, method: String, params: Value) {
        let key = id.to_string();
        self.state().pending.insert(
            key.clone(),
            Pending {
                call: None,
                item: params
                    .get("itemId")
                    .and_then(Value::as_str)
                    .map(str::to_owned),
                turn: params
                    .get("turnId")
                    .and_then(Value::as_str)
                    .map(str::to_owned),
                thread: params
                    .get("threadId")
                    .and_then(Value::as_str)
                    .map(str::to_owned),
                shown: method.clone(),
                interaction: None,
                answered: false,
                task: None,
            },
        );
        let bridge = self.clone();
        let task = tokio::spawn(async move {
            bridge.answer(&id, &method, &params).await;
            bridge.state().pending.remove(&id.to_string());
        });
        if let Some(pending) = self.state().pending.get_mut(&key) {
            pending.task = Some(task.abort_handle());
        }
    }

    /// Decide one request and answer it.
    async fn answer(&self, id: &Value, method: &str, params: &Value) {
        let mapping = {
            let state = self.state();
            approval::map_request(method, params, |item| state.changes.get(item).cloned())
        };
        let ask = match mapping {
            Mapping::Ask(ask) => *ask,
            Mapping::Unmappable(u) => return self.decline_unmappable(id, method, u).await,
        };
        if let Some(shot) = self.take_one_shot(&ask) {
            say(&format!(
                "{} `{}`: the call {} approved as an edit{} -> accept",
                ask.tool,
                term::one_line(&ask.shown),
                shot.approver,
                shot.interaction
                    .map(|i| format!(" ({i})"))
                    .unwrap_or_default()
            ));
            self.mark_answered(id);
            self.inner.peer.reply(id, Reply::Accept.to_json(&ask.kind));
            return;
        }
        let call = self.gate_call(&ask);
        if let Some(pending) = self.state().pending.get_mut(&id.to_string()) {
            pending.call = Some(call.clone());
            pending.shown = format!("{} `{}`", ask.tool, term::one_line(&ask.shown));
        }
        let key = id.to_string();
        let settled = gatekeep::settle(&self.inner.client, &self.inner.keys, &call, |iid| {
            say(&format!(
                "{} `{}` waits for a person: lev respond {} --approve | --deny",
                ask.tool,
                term::one_line(&ask.shown),
                term::one_line(iid)
            ));
            if let Some(pending) = self.state().pending.get_mut(&key) {
                pending.interaction = Some(iid.to_owned());
            }
        })
        .await;
        let (reply, steer, line) = self.reply_for(&ask, settled);
        if !self.mark_answered(id) {
            // Someone else answered while lev decided (see `resolved`).
            return;
        }
        say(&format!(
            "{} `{}`: {line} -> {}",
            ask.tool,
            term::one_line(&ask.shown),
            reply.word()
        ));
        if let (Some(text), Some(turn)) = (steer, &ask.turn) {
            self.steer(&ask.thread, turn, &text).await;
        }
        self.inner.peer.reply(id, reply.to_json(&ask.kind));
    }

    /// Mark `id` as answered by lev; false when it was resolved elsewhere.
    fn mark_answered(&self, id: &Value) -> bool {
        match self.state().pending.get_mut(&id.to_string()) {
            Some(pending) => {
                pending.answered = true;
                true
            }
            None => false,
        }
    }

    /// Decline a request lev cannot gate, the model told why when it names
    /// its turn; a method lev does not know at all gets a JSON-RPC error.
    async fn decline_unmappable(&self, id: &Value, method: &str, u: approval::Unmappable) {
        say(&format!(
            "declined a Codex request lev cannot gate ({method}): {}",
            u.why
        ));
        self.mark_answered(id);
        if let (Some(thread), Some(turn)) = (&u.thread, &u.turn) {
            self.steer(
                thread,
                turn,
                &format!("lev declined this request: {}. Nothing was run.", u.why),
            )
            .await;
        }
        match u.reply {
            Some(reply) => self.inner.peer.reply(id, reply),
            None => self.inner.peer.reply_error(
                id,
                -32601,
                &format!("lev does not answer {method}: {}", u.why),
            ),
        }
    }

    /// The gate call of `ask`: in its thread's sandbox mode, or none when it
    /// runs outside the sandbox.
    fn gate_call(&self, ask: &Ask) -> GateCall {
        let sandbox = if ask.outside_sandbox {
            UNSANDBOXED.to_owned()
        } else {
            self.state()
                .threads
                .get(&ask.thread)
                .cloned()
                .unwrap_or_else(|| self.inner.settings.default_sandbox.clone())
        };
        GateCall {
            session: ask.thread.clone(),
            conversation: ask.thread.clone(),
            caller: self.inner.settings.caller.clone(),
            sandbox_mode: sandbox,
            request_id: Some(gate_request_id(&ask.item)),
            tool_name: ask.tool.clone(),
            input: ask.args.clone(),
            route: self.inner.settings.route.clone(),
            timeout: self.inner.settings.timeout,
            reason: ask.reason.clone(),
            required_capabilities: ask.capabilities.clone(),
        }
    }

    /// The answer to `ask`, the text steered to the model first (if any),
    /// and what the terminal says.
    fn reply_for(
        &self,
        ask: &Ask,
        settled: Result<Settled, GateError>,
    ) -> (Reply, Option<String>, String) {
        let (outcome, interaction) = match settled {
            Err(e) => return self.reply_unsettled(e),
            Ok(Settled::PolicyDenied { reason }) => return reply_policy_denied(ask, &reason),
            Ok(Settled::Outcome {
                outcome,
                interaction,
            }) => (outcome, interaction),
        };
        match outcome {
            GateOutcome::Run(approved) => self.reply_approved(ask, &approved, interaction),
            GateOutcome::Refused(refusal) => reply_refused(refusal),
        }
    }

    /// No decision: lev unreachable or silent past the call's deadline (the
    /// turn is cancelled, and noted), or any other failure (declined).
    fn reply_unsettled(&self, e: GateError) -> (Reply, Option<String>, String) {
        match e {
            GateError::Unreachable(e) => {
                let why = format!(
                    "lev could not be reached: {}",
                    gatekeep::first_line(&e.to_string())
                );
                self.state().unreachable = Some(why.clone());
                (Reply::Cancel, None, format!("{why}; nothing runs"))
            }
            // A server that accepts and never answers (or trickles, or stalls)
            // is as good as unreachable once the call's deadline passed.
            GateError::Deadline(missed) => {
                self.state().unreachable = Some(missed.clone());
                (Reply::Cancel, None, format!("{missed}; nothing runs"))
            }
            e => {
                let why = gatekeep::first_line(&e.to_string()).to_owned();
                (
                    Reply::Decline,
                    Some(format!(
                        "lev did not approve this call: {why}. It was not run."
                    )),
                    why,
                )
            }
        }
    }

    /// An approved call (verified, nonce spent): accepted in the scope
    /// approved, or, when the approver edited it, declined with the model
    /// told to make the edited call.
    fn reply_approved(
        &self,
        ask: &Ask,
        approved: &ApprovedCall,
        interaction: Option<String>,
    ) -> (Reply, Option<String>, String) {
        let payload = &approved.verified().payload;
        let approver = payload.approver.clone();
        let by = match approver.as_str() {
            "policy" => "allowed by lev's policy".to_owned(),
            who if approved.answer().is_none() => format!("allowed by {who}'s grant"),
            who => format!("approved by {}", term::one_line(who)),
        };
        let context = approved
            .injected_context()
            .map(|c| format!("{INTERNAL_OPEN}\n{c}\n{INTERNAL_CLOSE}"));
        if approved.was_edited() {
            return self.reply_edited(ask, approved, interaction, &by, context);
        }
        let response = approved.answer().and_then(|a| a.response());
        let scope = response.and_then(|r| r.scope);
        let narrowed = response.is_some_and(|r| r.grant_args.is_some());
        let reply = reply_for_scope(scope, narrowed, ask, self.inner.settings.codex_rules);
        let line = match scope {
            Some(s) if s.is_grant_scope() => format!("{by} ({} grant)", s.as_str()),
            _ => by,
        };
        (reply, context, line)
    }

    /// A call the approver edited: declined, the model told the exact
    /// edited call, which is then accepted once (a one-shot approval) when
    /// the edit is exact.
    fn reply_edited(
        &self,
        ask: &Ask,
        approved: &ApprovedCall,
        interaction: Option<String>,
        by: &str,
        context: Option<String>,
    ) -> (Reply, Option<String>, String) {
        let payload = &approved.verified().payload;
        match approval::edit_of(ask, &payload.modified_args_json) {
            Ok(edit) => {
                let mut text = format!(
                    "The approver in lev changed this call before approving it, so it was not run as you wrote it. {}\n{}",
                    edit.instruction,
                    if edit.exact {
                        "That call is approved as written; any other call asks again."
                    } else {
                        "It will be asked about again."
                    }
                );
                if let Some(context) = &context {
                    text = format!("{context}\n\n{text}");
                }
                if edit.exact {
                    self.state().one_shots.push(OneShot {
                        thread: ask.thread.clone(),
                        tool: ask.tool.clone(),
                        args: edit.expected.clone(),
                        expires_at: payload.expires_at,
                        approver: payload.approver.clone(),
                        interaction,
                    });
                }
                (
                    Reply::Decline,
                    Some(text),
                    format!("{by}, edited; the model is told to make the edited call"),
                )
            }
            Err(why) => (
                Reply::Decline,
                Some(format!(
                    "The approver in lev edited this call, but the edit cannot be used ({why}); nothing was run."
                )),
                format!("{by}, with an edit lev cannot use: {why}"),
            ),
        }
    }

    fn take_one_shot(&self, ask: &Ask) -> Option<OneShot> {
        let mut state = self.state();
        let now = OffsetDateTime::now_utc();
        state.one_shots.retain(|s| s.expires_at > now);
        let at = state
            .one_shots
            .iter()
            .position(|s| s.thread == ask.thread && s.tool == ask.tool && s.args == ask.args)?;
        Some(state.one_shots.remove(at))
    }

    /// Put `text` before the model in the running turn; a failure is said,
    /// never fatal (the answer that follows still stands).
    async fn steer(&self, thread: &str, turn: &str, text: &str) {
        let params = json!({
            "threadId": thread,
            "expectedTurnId": turn,
            "input": [{"type": "text", "text": text}],
        });
        if let Err(e) = self.inner.peer.request("turn/steer", params).await {
            say(&format!("could not tell the model: {e}"));
        }
    }

    fn notification(&self, method: &str, params: &Value) -> Event {
        let progress = self.inner.settings.progress;
        let thread = params
            .get("threadId")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        match method {
            "item/started" => {
                let item = params.get("item").unwrap_or(&Value::Null);
                let id = item.get("id").and_then(Value::as_str).unwrap_or_default();
                match item.get("type").and_then(Value::as_str) {
                    Some("fileChange") => {
                        let changes = item.get("changes").cloned().unwrap_or(Value::Null);
                        self.state().changes.insert(id.to_owned(), changes);
                    }
                    Some("commandExecution") if progress => {
                        let command = item
                            .get("command")
                            .and_then(Value::as_str)
                            .unwrap_or_default();
                        let shown = super::shell::ShellCommand::from_codex(command).command;
                        codex_says(&format!("$ {}", term::one_line(&shown)));
                    }
                    _ => {}
                }
                Event::None
            }
            "item/completed" => {
                let item = params.get("item").unwrap_or(&Value::Null);
                if progress {
                    show_completed(item);
                }
                if let (Some(id), Some(status)) = (
                    item.get("id").and_then(Value::as_str),
                    item.get("status").and_then(Value::as_str),
                ) {
                    let mut state = self.state();
                    let awaited = state.awaited.contains(id)
                        || state
                            .pending
                            .values()
                            .any(|p| p.item.as_deref() == Some(id));
                    if awaited {
                        state.ended.insert(id.to_owned(), status.to_owned());
                    }
                }
                if item.get("type").and_then(Value::as_str) == Some("fileChange") {
                    let id = item.get("id").and_then(Value::as_str).unwrap_or_default();
                    self.state().changes.remove(id);
                }
                Event::None
            }
            "serverRequest/resolved" => {
                if let Some(id) = params.get("requestId") {
                    self.resolved(id);
                }
                Event::None
            }
            "error" if progress => {
                let message = params
                    .pointer("/error/message")
                    .and_then(Value::as_str)
                    .unwrap_or("(no message)");
                codex_says(&format!("error: {}", term::one_line(message)));
                Event::None
            }
            "turn/completed" => {
                let turn = params.get("turn").unwrap_or(&Value::Null);
                Event::TurnCompleted {
                    thread,
                    turn: turn
                        .get("id")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_owned(),
                    status: turn
                        .get("status")
                        .and_then(Value::as_str)
                        .unwrap_or("unknown")
                        .to_owned(),
                    error: turn
                        .pointer("/error/message")
                        .and_then(Value::as_str)
                        .map(str::to_owned),
                }
            }
            "thread/started" => params
                .pointer("/thread/id")
                .and_then(Value::as_str)
                .map_or(Event::None, |t| Event::ThreadSeen(t.to_owned())),
            "thread/status/changed" | "turn/started" if !thread.is_empty() => {
                Event::ThreadSeen(thread)
            }
            _ => Event::None,
        }
    }

    /// Codex resolved request `id`: when lev had not answered it, someone
    /// else did (the terminal UI, an interrupt). Stop deciding, and record
    /// what became of it on lev's question.
    fn resolved(&self, id: &Value) {
        let pending = {
            let mut state = self.state();
            match state.pending.get(&id.to_string()) {
                Some(p) if !p.answered => state.pending.remove(&id.to_string()),
                _ => None,
            }
        };
        let Some(pending) = pending else { return };
        if let Some(task) = &pending.task {
            task.abort();
        }
        let bridge = self.clone();
        let interrupting = self.state().interrupting;
        let task = if interrupting {
            tokio::spawn(async move { bridge.withdraw(pending).await })
        } else {
            if let Some(item) = &pending.item {
                self.state().awaited.insert(item.clone());
            }
            say(&format!("{}: answered in Codex first", pending.shown));
            tokio::spawn(async move { bridge.record(pending).await })
        };
        self.state().recording.push(task);
    }

    /// The question of a request the turn's interrupt ended: cancelled.
    async fn withdraw(&self, pending: Pending) {
        if let Some(id) = self.interaction_of(&pending).await {
            let _ = self.inner.client.cancel(&id).await;
            say(&format!(
                "{}: the turn was interrupted; cancelled {}",
                pending.shown,
                term::one_line(&id)
            ));
        }
    }

    /// lev's question for a request, also when the gate call was in flight.
    async fn interaction_of(&self, pending: &Pending) -> Option<String> {
        match (&pending.interaction, &pending.call) {
            (Some(id), _) => Some(id.clone()),
            // Aborted while the gate call was in flight: the same call again
            // names the same question (the gate is idempotent).
            (None, Some(call)) => match self.inner.client.gate(&call.gate_request()).await {
                Ok(GateResponse::Ask { interaction_id }) => Some(interaction_id),
                _ => None,
            },
            (None, None) => None,
        }
    }

    /// Record on lev's question what Codex's other client decided.
    async fn record(&self, pending: Pending) {
        let outcome = self.item_outcome(&pending).await;
        let interaction = self.interaction_of(&pending).await;
        let Some(interaction) = interaction else {
            say(&format!("{}: {}", pending.shown, outcome.describe()));
            return;
        };
        let recorded = match outcome {
            ItemOutcome::Ran | ItemOutcome::Declined => {
                let approved = outcome == ItemOutcome::Ran;
                let response = InteractionResponse {
                    reason: Some(format!("decided in Codex: {}", outcome.describe())),
                    ..InteractionResponse::approval(&interaction, approved, ApprovalScope::Once)
                };
                self.inner
                    .client
                    .respond(&interaction, &response)
                    .await
                    .is_ok()
            }
            ItemOutcome::Unknown => false,
        };
        if !recorded {
            let _ = self.inner.client.cancel(&interaction).await;
        }
        say(&format!(
            "{}: {}; lev's question {} {}",
            pending.shown,
            outcome.describe(),
            term::one_line(&interaction),
            if recorded {
                "records it"
            } else {
                "is cancelled"
            }
        ));
    }

    /// What became of the request's item: how Codex said it ended
    /// (`item/completed`), else read back from the thread's history.
    async fn item_outcome(&self, pending: &Pending) -> ItemOutcome {
        let (Some(thread), Some(item)) = (&pending.thread, &pending.item) else {
            return ItemOutcome::Unknown;
        };
        let outcome = self
            .item_outcome_of(thread, item, pending.turn.as_deref())
            .await;
        let mut state = self.state();
        state.awaited.remove(item);
        state.ended.remove(item);
        outcome
    }

    async fn item_outcome_of(&self, thread: &str, item: &str, turn: Option<&str>) -> ItemOutcome {
        let outcome_of = |status: &str| match status {
            "completed" | "failed" => Some(ItemOutcome::Ran),
            "declined" => Some(ItemOutcome::Declined),
            _ => None,
        };
        for _ in 0..40 {
            let ended = self.state().ended.get(item).cloned();
            if let Some(outcome) = ended.as_deref().and_then(outcome_of) {
                return outcome;
            }
            let mut params = json!({"threadId": thread, "sortDirection": "desc", "limit": 100});
            if let Some(turn) = turn {
                params["turnId"] = json!(turn);
            }
            if let Ok(page) = self.inner.peer.request("thread/items/list", params).await {
                let status = page
                    .get("data")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter_map(|e| e.get("item"))
                    .find(|i| i.get("id").and_then(Value::as_str) == Some(item))
                    .and_then(|i| i.get("status").and_then(Value::as_str).map(str::to_owned));
                if let Some(outcome) = status.as_deref().and_then(outcome_of) {
                    return outcome;
                }
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        ItemOutcome::Unknown
    }

    /// Stop deciding: cancel every question still open, since nobody waits
    /// for its answer any more.
    pub async fn shutdown(&self) {
        // Let the records of what was decided elsewhere be written first.
        let recording: Vec<_> = self.state().recording.drain(..).collect();
        for task in recording {
            let _ = tokio::time::timeout(Duration::from_secs(15), task).await;
        }
        let pending: Vec<Pending> = self.state().pending.drain().map(|(_, p)| p).collect();
        for p in pending {
            if let Some(task) = &p.task {
                task.abort();
            }
            if let Some(id) = &p.interaction {
                let _ = self.inner.client.cancel(id).await;
                say(&format!("cancelled {}", term::one_line(id)));
            }
        }
    }
}

/// What happened to an item someone else answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ItemOutcome {
    /// Accepted: it ran.
    Ran,
    /// Declined.
    Declined,
    /// Not known (the turn was interrupted, or Codex did not say).
    Unknown,
}

impl ItemOutcome {
    fn describe(self) -> &'static str {
        match self {
            Self::Ran => "accepted, the call ran",
            Self::Declined => "declined, the call did not run",
            Self::Unknown => "not run (interrupted, or Codex did not say)",
        }
    }
}

/// The gate's request id for a Codex item: the item id when it is a valid
/// lev identifier, else a hash of it.
pub fn gate_request_id(item: &str) -> String {
    let valid = !item.is_empty()
        && item.len() <= 128
        && item
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | ':' | '-'));
    if valid {
        item.to_owned()
    } else {
        format!("codex-{}", super::short_hash(item))
    }
}

/// A call a policy rule denied at the gate: declined, the model told the
/// rule's reason.
fn reply_policy_denied(ask: &Ask, reason: &str) -> (Reply, Option<String>, String) {
    let text = lev_protocol::claude_code::Decision::DeniedByPolicy {
        reason: reason.to_owned(),
    };
    let message = match text.verdict(&ask.tool, &Value::Null) {
        lev_protocol::claude_code::Verdict::Deny { message } => message,
        _ => format!("lev's policy denies the call to {}.", ask.tool),
    };
    (
        Reply::Decline,
        Some(message),
        format!("denied by lev's policy: {}", term::one_line(reason.trim())),
    )
}

/// A call a person (or a policy after asking) refused, or nobody decided.
fn reply_refused(refusal: Refusal) -> (Reply, Option<String>, String) {
    match refusal.kind {
        RefusalKind::Denied | RefusalKind::Policy => {
            let says_more = refusal.feedback.is_some()
                || refusal.text.starts_with(INTERNAL_OPEN)
                || refusal.kind == RefusalKind::Policy;
            let line = match &refusal.feedback {
                Some(f) => format!("denied with feedback: {}", term::one_line(f)),
                None => "denied".to_owned(),
            };
            (Reply::Decline, says_more.then_some(refusal.text), line)
        }
        RefusalKind::Expired | RefusalKind::TimedOut => {
            (Reply::Cancel, None, "nobody decided in time".to_owned())
        }
        RefusalKind::Cancelled => (Reply::Cancel, None, "the question was cancelled".to_owned()),
    }
}

/// What an approval of `ask` with `scope` is as Codex's answer. Codex's
/// own "for the session" is only as wide as lev's grant for a plain command
/// (Codex then stops asking about that exact command, which lev's grant
/// covers too). For anything else it would reach further than what lev
/// granted: a file change's session approval covers later patches to the
/// same files, a network approval the host for every command, and a grant
/// narrowed to some args only part of what Codex would stop asking about.
/// Those are accepted once, and lev's grant answers the next request.
/// `codex_rules`: whether an "always" may become Codex's permanent rule.
fn reply_for_scope(
    scope: Option<ApprovalScope>,
    narrowed: bool,
    ask: &Ask,
    codex_rules: bool,
) -> Reply {
    let whole_command = ask.tool == approval::EXEC && !narrowed;
    match (scope, &ask.kind) {
        (
            Some(ApprovalScope::Always),
            Kind::Command {
                amendment: Some(rule),
                ..
            },
        ) if codex_rules && whole_command => Reply::AcceptWithAmendment(rule.clone()),
        (Some(ApprovalScope::Session | ApprovalScope::Always), Kind::Command { .. })
            if whole_command =>
        {
            Reply::AcceptForSession
        }
        _ => Reply::Accept,
    }
}

/// The sandbox mode of a call that runs outside Codex's sandbox.
const UNSANDBOXED: &str = "danger-full-access";

/// The sandbox mode lev's policy judges a Codex call under (besides a
/// call that asks to run outside it, [`Ask::outside_sandbox`]). A call Codex
/// asks about under `on-request` (or `on-failure`) is one the model asked to
/// run outside the sandbox, so it is judged as running with full access,
/// whatever the thread's sandbox.
pub fn gated_sandbox(sandbox: &str, policy: &str) -> String {
    if matches!(policy, "on-request" | "on-failure") {
        UNSANDBOXED.to_owned()
    } else {
        sandbox.to_owned()
    }
}

/// A line of lev's on stderr.
pub fn say(text: &str) {
    let _ = writeln!(std::io::stderr().lock(), "lev: {text}");
}

/// A line of Codex's progress on stderr.
fn codex_says(text: &str) {
    let _ = writeln!(std::io::stderr().lock(), "codex: {text}");
}

fn show_completed(item: &Value) {
    let status = item
        .get("status")
        .and_then(Value::as_str)
        .unwrap_or_default();
    match item.get("type").and_then(Value::as_str) {
        Some("agentMessage") => {
            let text = item.get("text").and_then(Value::as_str).unwrap_or_default();
            let _ = writeln!(std::io::stdout().lock(), "{}", term::multi_line(text));
        }
        Some("commandExecution") => {
            let output = item
                .get("aggregatedOutput")
                .and_then(Value::as_str)
                .unwrap_or_default();
            for line in output
                .lines()
                .rev()
                .take(20)
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
            {
                codex_says(&format!("  {}", term::one_line(line)));
            }
            match item.get("exitCode").and_then(Value::as_i64) {
                Some(code) => codex_says(&format!("  ({status}, exit {code})")),
                None => codex_says(&format!("  ({status})")),
            }
        }
        Some("fileChange") => {
            let files: Vec<String> = item
                .get("changes")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|c| c.get("path").and_then(Value::as_str))
                .map(term::one_line)
                .collect();
            codex_says(&format!("edit {} ({status})", files.join(", ")));
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_ids_are_lev_identifiers() {
        assert_eq!(gate_request_id("call_abc-1"), "call_abc-1");
        assert_eq!(gate_request_id("call_1:0c9d-e"), "call_1:0c9d-e");
        let hashed = gate_request_id("call with spaces/and slashes");
        assert!(
            hashed.starts_with("codex-") && hashed.len() == 6 + 16,
            "{hashed}"
        );
        assert_eq!(hashed, gate_request_id("call with spaces/and slashes"));
        assert!(gate_request_id(&"x".repeat(200)).starts_with("codex-"));
    }

    fn asked(method: &str, params: &Value, changes: Option<Value>) -> Ask {
        match approval::map_request(method, params, |_| changes.clone()) {
            Mapping::Ask(ask) => *ask,
            Mapping::Unmappable(u) => panic!("{}", u.why),
        }
    }

    #[test]
    fn codex_stops_asking_for_the_session_only_where_lev_grant_is_as_wide() {
        let command = json!({
            "threadId": "th", "turnId": "tu", "itemId": "i", "command": "/bin/bash -lc 'cargo test'",
            "cwd": "/ws",
            "availableDecisions": ["accept", {"acceptWithExecpolicyAmendment": {"execpolicy_amendment": ["cargo", "test"]}}]
        });
        let exec = asked("item/commandExecution/requestApproval", &command, None);
        let mut network = command.clone();
        network["networkApprovalContext"] = json!({"host": "example.com", "protocol": "https"});
        let network = asked("item/commandExecution/requestApproval", &network, None);
        let patch = asked(
            "item/fileChange/requestApproval",
            &json!({"threadId": "th", "turnId": "tu", "itemId": "p"}),
            Some(json!([{"path": "/ws/a", "kind": {"type": "add"}, "diff": "x"}])),
        );
        let session = Some(ApprovalScope::Session);
        let always = Some(ApprovalScope::Always);
        assert_eq!(
            reply_for_scope(session, false, &exec, false),
            Reply::AcceptForSession
        );
        assert_eq!(
            reply_for_scope(always, false, &exec, true),
            Reply::AcceptWithAmendment(vec!["cargo".into(), "test".into()])
        );
        assert_eq!(
            reply_for_scope(always, false, &exec, false),
            Reply::AcceptForSession
        );
        // A grant narrowed to some args: once.
        assert_eq!(reply_for_scope(session, true, &exec, false), Reply::Accept);
        assert_eq!(reply_for_scope(always, true, &exec, true), Reply::Accept);
        // A file change or network access: once, whatever lev granted.
        for other in [&network, &patch] {
            for scope in [session, always] {
                assert_eq!(
                    reply_for_scope(scope, false, other, true),
                    Reply::Accept,
                    "{}",
                    other.tool
                );
            }
        }
        assert_eq!(reply_for_scope(None, false, &exec, true), Reply::Accept);
    }

    #[test]
    fn what_codex_asks_under_on_request_is_judged_as_running_unsandboxed() {
        assert_eq!(
            gated_sandbox("workspace-write", "untrusted"),
            "workspace-write"
        );
        assert_eq!(
            gated_sandbox("read-only", "on-request"),
            "danger-full-access"
        );
        assert_eq!(
            gated_sandbox("workspace-write", "on-failure"),
            "danger-full-access"
        );
    }
}
