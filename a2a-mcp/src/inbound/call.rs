//! `tools/call`: the handshake of one capability (MCP-10..MCP-17).

use a2a_client::{Client, ClientError, ExecuteOptions, StreamEvent, StreamOptions, Wait};
use a2a_core::error::{A2aError, ErrorCode};
use a2a_core::negotiation::AgreedSchema;
use a2a_core::wire::{ExecutionStatus, ResultResponse};
use futures_util::StreamExt;
use rmcp::ErrorData as McpError;
#[allow(deprecated)]
use rmcp::model::{
    CallToolRequestParams, CallToolResult, ContentBlock, LoggingLevel, LoggingMessageNotificationParam,
    ProgressNotificationParam, ProgressToken,
};
use rmcp::service::RequestContext;
use rmcp::{Peer, RoleServer};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::errors::{a2a_error_of, tool_error};
use super::handler::Credentials;
use super::{Front, tools};

/// The longest progress message sent, in characters (a progress event's data is cut to it, MCP-14).
const MAX_PROGRESS_MESSAGE: usize = 1000;

/// Why a call ended without a result.
enum Failed {
    /// A refusal or failure, answered as a tool error (MCP-11).
    Tool(A2aError),
    /// The caller canceled (MCP-16): nobody reads the answer.
    Canceled,
}

impl From<ClientError> for Failed {
    fn from(e: ClientError) -> Self {
        Failed::Tool(a2a_error_of(&e))
    }
}

/// Runs `tools/call` (MCP-10): JSON-RPC errors for a call that names no tool of this caller or carries arguments
/// that are not an object (MCP-9); otherwise a tool result, `isError` for every refusal (MCP-11).
pub(crate) async fn run(
    front: &Front,
    request: CallToolRequestParams,
    creds: &Credentials,
    ctx: RequestContext<RoleServer>,
) -> Result<CallToolResult, McpError> {
    let name = request.name.as_ref();
    // MCP-9: a name that is not a capability name cannot be a tool; say so before asking the endpoint.
    if a2a_core::capability::validate_name(name).is_err() {
        return Err(McpError::invalid_params(
            format!("unknown tool {name:?}: tool names are capability names (^[a-z]+(_[a-z]+)+$); see tools/list"),
            None,
        ));
    }
    let decls = tools::offered_declarations(front, creds).await?;
    let Some(decl) = decls.into_iter().find(|d| d.name == name) else {
        return Err(McpError::invalid_params(
            format!("unknown tool {name:?}: this server offers no such tool to this caller; see tools/list"),
            None,
        ));
    };
    let args = Value::Object(request.arguments.unwrap_or_default());
    let url = tools::endpoint(front)?;
    let client = if creds.any() {
        Front::client(&front.cfg, Some((&url, creds)))
            .map_err(|e| McpError::invalid_request(format!("the request's credentials cannot be used: {e}"), None))?
    } else {
        front.client.clone()
    };
    let mut progress = ctx.meta.get_progress_token().map(|token| Progress { peer: ctx.peer.clone(), token, sent: 0 });
    // MCP-17: the call's response stream starts at once (a progress notification, or a debug log message without a
    // progress token), so that its keep-alives flow and a caller that closes the stream is noticed (MCP-16): at
    // 2026-07-28 `rmcp` sends the response head only with the first message. The log message is the one message a
    // server may send unasked (deprecated by SEP-2577, still in every revision this front speaks).
    #[allow(deprecated)]
    match progress.as_mut() {
        Some(p) => p.send(format!("negotiating {}", decl.name)).await,
        None => {
            let data = serde_json::json!({"capability": decl.name, "step": "negotiate"});
            let log = LoggingMessageNotificationParam::new(LoggingLevel::Debug, data);
            if let Err(e) = ctx.peer.notify_logging_message(log).await {
                tracing::debug!(error = %e, "mcp: the call's first message could not be sent");
            }
        }
    }
    let deadline = tokio::time::Instant::now() + front.cfg.call_timeout;
    let run = handshake(&client, &url, &decl.name, &decl.input_schema, args, progress, ctx.ct.clone(), deadline);
    match run.await {
        Ok(r) => Ok(success(r)),
        Err(Failed::Tool(a)) => Ok(tool_error(&a)),
        Err(Failed::Canceled) => {
            Ok(tool_error(&A2aError::with_message(ErrorCode::CANCELED, "the MCP request was cancelled")))
        }
    }
}

/// A successful result (MCP-10): the result as `structuredContent` (an object; another JSON value is wrapped as
/// `{"result": value}`, MCP-10) and as text.
fn success(r: ResultResponse) -> CallToolResult {
    let value = r.result.unwrap_or(Value::Null);
    let structured = match value {
        Value::Object(_) => value,
        other => serde_json::json!({ "result": other }),
    };
    let mut out = CallToolResult::success(vec![ContentBlock::text(structured.to_string())]);
    out.structured_content = Some(structured);
    out
}

/// Progress notifications of one request (MCP-14).
struct Progress {
    peer: Peer<RoleServer>,
    token: ProgressToken,
    sent: u32,
}

impl Progress {
    async fn send(&mut self, message: String) {
        self.sent += 1;
        let mut p = ProgressNotificationParam::new(self.token.clone(), f64::from(self.sent));
        let mut message = message;
        if message.chars().count() > MAX_PROGRESS_MESSAGE {
            message = message.chars().take(MAX_PROGRESS_MESSAGE).collect::<String>() + "…";
        }
        p.message = Some(message);
        if let Err(e) = self.peer.notify_progress(p).await {
            tracing::debug!(error = %e, "mcp: a progress notification could not be sent");
        }
    }
}

/// CANCELs an execution when dropped armed (MCP-16): the call was cancelled, timed out, or its future dropped.
struct CancelGuard {
    client: Client,
    url: String,
    execution_id: String,
    armed: bool,
}

impl Drop for CancelGuard {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let (client, url, id) = (self.client.clone(), self.url.clone(), self.execution_id.clone());
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(async move {
                match client.cancel(&url, &id).await {
                    Ok(r) => tracing::info!(execution_id = %id, status = %r.status, "mcp: execution canceled"),
                    Err(e) => tracing::debug!(execution_id = %id, error = %e, "mcp: CANCEL failed"),
                }
            });
        }
    }
}

/// NEGOTIATE (the tool's schema as the proposal, MCP-12), the arguments checked against the agreed schema (MCP-13),
/// EXECUTE, CONFIRM, RESULT (streamed as progress when asked, MCP-14), CANCEL on cancellation or deadline (MCP-15,
/// MCP-16).
#[allow(clippy::too_many_arguments)]
async fn handshake(
    client: &Client,
    url: &str,
    capability: &str,
    schema: &Value,
    args: Value,
    mut progress: Option<Progress>,
    ct: CancellationToken,
    deadline: tokio::time::Instant,
) -> Result<ResultResponse, Failed> {
    let steps = async {
        let negotiation = client.negotiate(url, capability, Some(schema.clone())).await?;
        // MCP-13: a tightened agreement is honoured: the arguments must match the agreed schema, checked here so that
        // the caller gets every error at once, as the agent would list them (payload_invalid).
        let agreed = AgreedSchema::compile(negotiation.agreed_schema()).map_err(|e| {
            Failed::Tool(A2aError::with_message(ErrorCode::INTERNAL_ERROR, format!("the agreed schema: {e}")))
        })?;
        if let Err(errors) = agreed.validate(&args) {
            let mut message = format!("the arguments do not match the agreed schema of {capability}");
            if negotiation.response.tightened {
                message.push_str(" (the agent tightened the tool's schema; see details.agreed_schema)");
            }
            return Err(Failed::Tool(A2aError::with_message(ErrorCode::PAYLOAD_INVALID, message).details(
                serde_json::json!({
                    "errors": errors.iter().map(|e| serde_json::json!({"path": e.path, "message": e.message})).collect::<Vec<_>>(),
                    "agreed_schema": negotiation.agreed_schema(),
                }),
            )));
        }
        let execution = client.execute(&negotiation, &args, &ExecuteOptions::default()).await?;
        Ok::<_, Failed>(execution)
    };
    let execution = tokio::select! {
        biased;
        () = ct.cancelled() => return Err(Failed::Canceled),
        () = tokio::time::sleep_until(deadline) => return Err(timed_out(deadline)),
        e = steps => e?,
    };
    // From CONFIRM on, the work may run: a call that ends without its result cancels it (MCP-16).
    let mut guard = CancelGuard {
        client: client.clone(),
        url: url.to_owned(),
        execution_id: execution.id().to_owned(),
        armed: true,
    };
    let result = tokio::select! {
        biased;
        () = ct.cancelled() => return Err(Failed::Canceled),
        () = tokio::time::sleep_until(deadline) => return Err(timed_out(deadline)),
        r = wait(client, url, &execution, progress.as_mut(), deadline) => r,
    };
    let r = result?;
    guard.armed = false;
    match r.status {
        ExecutionStatus::Succeeded => Ok(r),
        status => {
            let mut a = match &r.error {
                Some(e) => A2aError::with_message(e.code.clone(), e.message.clone()),
                None => A2aError::with_message(
                    ErrorCode::HANDLER_FAILED,
                    format!("the execution ended {status} without an error object"),
                ),
            };
            a.details = r.error.as_ref().and_then(|e| e.details.clone());
            Err(Failed::Tool(a))
        }
    }
}

/// CONFIRM, then RESULT until terminal: streamed, one progress notification per event, when the caller asked for
/// progress (MCP-14); otherwise a long-poll.
async fn wait(
    client: &Client,
    url: &str,
    execution: &a2a_client::Execution,
    progress: Option<&mut Progress>,
    deadline: tokio::time::Instant,
) -> Result<ResultResponse, Failed> {
    client.confirm(execution).await?;
    let left = deadline.saturating_duration_since(tokio::time::Instant::now());
    let Some(progress) = progress else {
        return Ok(client.result(url, execution.id(), Wait::For(left)).await?);
    };
    let mut events = client.stream_result(url, execution.id(), StreamOptions::default().max_duration(left)).await?;
    while let Some(ev) = events.next().await {
        match ev? {
            StreamEvent::Result { result, .. } => return Ok(result),
            StreamEvent::Progress { data, .. } => {
                let text = match data {
                    Value::String(s) => s,
                    other => other.to_string(),
                };
                progress.send(text).await;
            }
            StreamEvent::Status { status, attempt, .. } => progress.send(format!("{status} (attempt {attempt})")).await,
            StreamEvent::Truncated { error, .. } => progress.send(format!("{}: {}", error.code, error.message)).await,
        }
    }
    Err(Failed::Tool(A2aError::with_message(
        ErrorCode::AGENT_UNAVAILABLE,
        "the result stream ended without the result; read the execution again",
    )))
}

/// The call's deadline passed (MCP-15).
fn timed_out(_deadline: tokio::time::Instant) -> Failed {
    Failed::Tool(A2aError::with_message(
        ErrorCode::TIMED_OUT,
        "the tool call did not finish within the MCP front's call timeout (mcp.call_timeout_ms); an execution \
         already confirmed was canceled",
    ))
}
