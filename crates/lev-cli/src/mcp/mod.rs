//! `lev mcp`: an MCP server on stdio, built on rmcp (SPEC section 10).
//!
//! # Protocol eras
//! rmcp serves both: a client that opens with `initialize` (2025-11-25 and
//! older) gets the handshake-era session; a client that sends
//! `server/discover` and then requests carrying
//! `io.modelcontextprotocol/protocolVersion` and `.../clientCapabilities`
//! in their `_meta` (2026-07-28) is served per request, statelessly. rmcp
//! answers `server/discover` with the versions below, our capabilities
//! (tools) and server info, `ttlMs` and `cacheScope`. An unknown method gets a
//! JSON-RPC error (`-32601`); what rmcp alone would close the connection on
//! (a notification before any lifecycle started) is dropped by
//! [`opening::Opening`].
//!
//! # Blocking tools and cancellation
//! Both tools block inside `tools/call` until the answer comes: no
//! elicitation, which agents in non-interactive mode cancel. Each call is a
//! task of its own, so calls run side by side. A `notifications/cancelled`
//! for a call in flight cancels its pending interaction on the server; so
//! does the client going away (stdin closed) for every call still waiting.

pub mod args;
pub mod opening;
pub mod proxy;
pub mod tools;

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use lev_approval::TrustedKeys;
use lev_client::Client;
use lev_protocol::claude_code::{
    APPROVAL_PROMPT_TOOL, ASK_HUMAN_TOOL, PermissionPromptResult, Verdict,
};
use lev_protocol::{InteractionKind, InteractionRequest};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, CustomRequest,
    CustomResult, ErrorCode, Implementation, ListToolsResult, PaginatedRequestParams,
    ProtocolVersion, ServerCapabilities, ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::transport::IntoTransport as _;
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler, ServiceExt as _};
use serde_json::Value;

use crate::deadline::Deadline;
use crate::gatekeep::{self, GateCall};

/// The longest a cancel of a question nobody waits for may take.
const CANCEL_WITHIN: Duration = Duration::from_secs(5);

/// What `lev mcp`'s requests carry, and how long they wait.
#[derive(Debug, Clone)]
pub struct Config {
    /// The lev server, with the worker's token.
    pub client: Client,
    /// The session of every request.
    pub session: String,
    /// The conversation of every request.
    pub conversation: String,
    /// The caller, when the token is not bound to one.
    pub caller: Option<String>,
    /// The sandbox mode of every gate call.
    pub sandbox_mode: String,
    /// Who sees the questions, in order (`operator`, `human`).
    pub route: Option<Vec<String>>,
    /// How long a tool call waits for an answer.
    pub timeout: Duration,
    /// Keys given with `--key`: only they may sign a decision. `None`: the
    /// server's, fetched at the first approval and pinned.
    pub pinned: Option<TrustedKeys>,
}

/// Serve MCP on stdin and stdout until the client closes stdin.
///
/// # Errors
/// When the transport fails before any lifecycle started.
pub async fn serve(config: Config) -> anyhow::Result<()> {
    let server = LevMcp {
        inner: Arc::new(Inner {
            config,
            in_flight: Mutex::new(HashMap::new()),
            next_call: AtomicU64::new(0),
            keys: tokio::sync::OnceCell::new(),
        }),
    };
    let transport = opening::Opening::new(
        (tokio::io::stdin(), tokio::io::stdout()).into_transport(),
        server.supported_protocol_versions(),
    );
    let running = server
        .clone()
        .serve(transport)
        .await
        .map_err(|e| anyhow::anyhow!("mcp: {e}"))?;
    let _ = running.waiting().await;
    // The client is gone: nobody waits for the questions still pending.
    server.inner.cancel_all().await;
    Ok(())
}

/// The MCP server handler.
#[derive(Debug, Clone)]
struct LevMcp {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    config: Config,
    /// Interactions created by calls still waiting, by call.
    in_flight: Mutex<HashMap<u64, String>>,
    next_call: AtomicU64,
    /// The server's keys, fetched at the first approval and pinned.
    keys: tokio::sync::OnceCell<TrustedKeys>,
}

impl Inner {
    fn interaction(&self, kind: InteractionKind) -> InteractionRequest {
        let mut request = InteractionRequest::new(self.config.session.clone(), kind);
        request.conversation_id = Some(self.config.conversation.clone());
        request.caller = self.config.caller.clone();
        request.route = self.config.route.clone();
        request.timeout_s = Some(self.config.timeout.as_secs().max(1));
        request
    }

    /// Cancel every question still waited for, all at once and for at most
    /// [`CANCEL_WITHIN`]: a lev that hangs does not keep `lev mcp` running.
    async fn cancel_all(&self) {
        let ids: Vec<String> = match self.in_flight.lock() {
            Ok(mut map) => map.drain().map(|(_, id)| id).collect(),
            Err(_) => Vec::new(),
        };
        let client = &self.config.client;
        let all = futures_util::future::join_all(ids.iter().map(|id| client.cancel(id)));
        let _ = tokio::time::timeout(CANCEL_WITHIN, all).await;
    }
}

/// One call's claim on the interaction it waits for: registered while it
/// waits, cancelled on the server when the call is cancelled.
#[derive(Debug)]
pub struct Pending {
    inner: Arc<Inner>,
    call: u64,
}

impl Pending {
    fn new(inner: &Arc<Inner>) -> Self {
        Self {
            inner: Arc::clone(inner),
            call: inner.next_call.fetch_add(1, Ordering::Relaxed),
        }
    }

    /// Record the interaction this call now waits for.
    pub fn waiting_for(&self, interaction_id: &str) {
        if let Ok(mut map) = self.inner.in_flight.lock() {
            map.insert(self.call, interaction_id.to_owned());
        }
    }

    fn take(&self) -> Option<String> {
        self.inner
            .in_flight
            .lock()
            .ok()
            .and_then(|mut map| map.remove(&self.call))
    }

    /// Cancel the interaction on the server, if there is one, for at most
    /// [`CANCEL_WITHIN`].
    async fn cancel(&self) {
        if let Some(id) = self.take() {
            let client = &self.inner.config.client;
            let _ = tokio::time::timeout(CANCEL_WITHIN, client.cancel(&id)).await;
        }
    }

    /// [`Self::cancel`] on a task of its own: after the deadline, a lev that
    /// did not answer must not hold the call's answer up any longer.
    fn cancel_in_background(&self) {
        if let Some(id) = self.take() {
            let client = self.inner.config.client.clone();
            tokio::spawn(async move {
                let _ = tokio::time::timeout(CANCEL_WITHIN, client.cancel(&id)).await;
            });
        }
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        let _ = self.take();
    }
}

impl ServerHandler for LevMcp {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(
                Implementation::new("lev", env!("CARGO_PKG_VERSION"))
                    .with_title("lev: ask a person, get tool calls approved"),
            )
            .with_instructions(
                "Use ask_human to ask a person when you need a decision or a fact only they have. \
Use approval_prompt before a tool call that needs a person's permission; run the tool only on \
{\"behavior\":\"allow\"}, with its updatedInput.",
            )
    }

    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        Cow::Borrowed(ProtocolVersion::KNOWN_VERSIONS)
    }

    async fn on_custom_request(
        &self,
        request: CustomRequest,
        _context: RequestContext<RoleServer>,
    ) -> Result<CustomResult, McpError> {
        Err(McpError::new(
            ErrorCode::METHOD_NOT_FOUND,
            format!(
                "method not found: {:?} (lev mcp serves tools: tools/list and tools/call)",
                request.method
            ),
            None,
        ))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        Ok(ListToolsResult::with_all_items(tools::all(
            self.inner.config.timeout,
        )))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let arguments = Value::Object(request.arguments.unwrap_or_default());
        let pending = Pending::new(&self.inner);
        let work = async {
            match request.name.as_ref() {
                APPROVAL_PROMPT_TOOL => Ok(self.approval_prompt(arguments, &pending).await),
                ASK_HUMAN_TOOL => Ok(self.ask_human(arguments, &pending).await),
                other => Err(McpError::invalid_params(
                    format!("unknown tool {other:?}: lev mcp has approval_prompt and ask_human"),
                    None,
                )),
            }
        };
        let ct = context.ct.clone();
        tokio::select! {
            result = work => result.map(CallToolResponse::from),
            () = ct.cancelled() => {
                pending.cancel().await;
                Err(McpError::internal_error("cancelled by the client", None))
            }
        }
    }
}

impl LevMcp {
    async fn approval_prompt(&self, arguments: Value, pending: &Pending) -> CallToolResult {
        let input = match args::approval_prompt(arguments) {
            Ok(input) => input,
            Err(e) => return CallToolResult::error(vec![ContentBlock::text(e)]),
        };
        let config = &self.inner.config;
        let call = GateCall {
            session: config.session.clone(),
            conversation: config.conversation.clone(),
            caller: config.caller.clone(),
            sandbox_mode: config.sandbox_mode.clone(),
            request_id: input.tool_use_id.clone(),
            tool_name: input.tool_name.clone(),
            input: input.input.clone(),
            route: config.route.clone(),
            timeout: config.timeout,
            reason: None,
            required_capabilities: Vec::new(),
        };
        // One deadline for the whole call, the keys included: a lev that
        // hangs or trickles is a deny by then, not a call held for ever.
        let deadline = Deadline::from_now(config.timeout);
        // Not pinned yet (lev unreachable): `verdict` tries again itself, and
        // the next call tries to pin them again.
        let keys = match &config.pinned {
            Some(keys) => Some(keys),
            None => deadline
                .run(
                    self.inner
                        .keys
                        .get_or_try_init(|| gatekeep::pinned_keys(&config.client)),
                )
                .await
                .and_then(Result::ok),
        };
        let verdict = gatekeep::verdict(&config.client, keys, &call, deadline, |id| {
            pending.waiting_for(id);
        })
        .await;
        if matches!(verdict, Verdict::Defer { .. }) {
            // Nobody waits for its question any more.
            pending.cancel_in_background();
        }
        let result = PermissionPromptResult::from_verdict(&input.tool_name, &verdict);
        CallToolResult::success(vec![ContentBlock::text(result.to_json_text())])
    }

    async fn ask_human(&self, arguments: Value, pending: &Pending) -> CallToolResult {
        let kind = match args::ask_human(arguments) {
            Ok(kind) => kind,
            Err(e) => return CallToolResult::error(vec![ContentBlock::text(e)]),
        };
        let client = &self.inner.config.client;
        let request = self.inner.interaction(kind);
        let deadline = Deadline::from_now(self.inner.config.timeout);
        let asked = deadline.run(async {
            let interaction = client.create_interaction(&request).await?;
            pending.waiting_for(interaction.id());
            client
                .wait_for_answer(interaction.id(), Some(self.inner.config.timeout))
                .await
        });
        let answer = match asked.await {
            Some(Ok(answer)) => answer,
            Some(Err(e)) => {
                pending.cancel().await;
                return lev_error("ask_human", &e);
            }
            None => {
                pending.cancel_in_background();
                return CallToolResult::error(vec![ContentBlock::text(format!(
                    "ask_human: lev did not answer within {} s; nobody answered the question",
                    deadline.secs()
                ))]);
            }
        };
        if answer.is_unanswered() {
            // Nobody waits any more: take the question off people's lists.
            pending.cancel().await;
        }
        CallToolResult::success(vec![ContentBlock::text(answer.tool_result_text(None, &[]))])
    }
}

fn lev_error(tool: &str, error: &lev_client::Error) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(format!("{tool}: lev: {error}"))])
}
