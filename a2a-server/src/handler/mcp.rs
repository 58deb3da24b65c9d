//! The `mcp` handler: a capability run by a tool of an MCP server (`spec/PROTOCOL.md` §21.9).
//!
//! [`McpToolHandler`] runs an execution as one `tools/call` on a shared [`McpServer`] connection and maps the
//! result (MCP-35: `structuredContent`, else the text parsed as JSON, else `{"text": ...}`; MCP-36: `isError` fails
//! the execution with the tool's message). When the execution is canceled or times out the call is abandoned, which
//! sends the server `notifications/cancelled` for it (MCP-37). [`stdio_command`] starts a stdio server as `command`
//! handlers start their programs: under `a2a-supervise`, with only the allow-listed environment (HDL-5), in a process
//! group of its own that is killed with the connection (MCP-40).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

pub use a2a_mcp::outbound::{
    ImportOptions, Imported, ImportedTool, McpServer, McpTransport, OutboundError, SkippedTool, StdioCommand,
    import_tools,
};
use serde_json::{Value, json};

use crate::handler::builtin::{GroupGuard, program_command, supervisor};
use crate::handler::{ExecutionContext, Handler, HandlerError, HandlerFuture};

/// Runs a capability as a `tools/call` of one tool of an MCP server.
#[derive(Debug, Clone)]
pub struct McpToolHandler {
    server: Arc<McpServer>,
    tool: String,
    timeout: Option<Duration>,
}

impl McpToolHandler {
    /// Calls `tool` on `server`.
    pub fn new(server: Arc<McpServer>, tool: impl Into<String>) -> Self {
        McpToolHandler { server, tool: tool.into(), timeout: None }
    }

    /// A time limit of its own (the execution's deadline applies anyway).
    #[must_use]
    pub fn with_timeout(mut self, timeout: Option<Duration>) -> Self {
        self.timeout = timeout;
        self
    }

    async fn run(&self, ctx: ExecutionContext, payload: Value) -> Result<Value, HandlerError> {
        // As for commands: the execution's deadline is the engine's (it drops this future, which abandons the call
        // and so cancels it, MCP-37); only an earlier limit of the handler's own is enforced here.
        let limit = self.timeout.filter(|t| *t < ctx.remaining());
        let own_timeout = async {
            match limit {
                Some(t) => tokio::time::sleep(t).await,
                None => std::future::pending().await,
            }
        };
        let call = self.server.call_tool(&self.tool, payload);
        // Losing the race drops `call`: MCP-37, `notifications/cancelled` goes to the server.
        let result = tokio::select! {
            r = call => r,
            () = ctx.cancel.cancelled() => {
                return Err(HandlerError::new(format!(
                    "the MCP tool `{}` was canceled (notifications/cancelled): the execution was canceled or timed out",
                    self.tool
                )));
            }
            () = own_timeout => {
                return Err(HandlerError::new(format!(
                    "the MCP tool `{}` did not answer within {} ms and was canceled (notifications/cancelled)",
                    self.tool,
                    limit.unwrap_or_default().as_millis()
                )));
            }
        };
        let result =
            result.map_err(|e| HandlerError::new(e.to_string()).with_details(json!({"mcp_tool": self.tool})))?;
        // MCP-35, MCP-36.
        a2a_mcp::outbound::tool_result(&self.tool, result).map_err(|f| {
            let mut details = json!({"mcp_tool": f.tool, "is_error": true});
            if let Some(s) = &f.structured {
                details["structured_content"] = s.clone();
            }
            HandlerError::new(f.to_string()).with_details(details)
        })
    }
}

impl Handler for McpToolHandler {
    fn call(&self, ctx: ExecutionContext, payload: Value) -> HandlerFuture {
        let this = self.clone();
        Box::pin(async move { this.run(ctx, payload).await })
    }
}

/// How a stdio MCP server is started (MCP-40): `program` with `args`, the allow-listed variables of the agent's
/// environment (HDL-5; `None`: the default list of `command` handlers) plus `env`, in `cwd`, under `a2a-supervise`
/// when it is found, in a process group of its own that is killed when the connection ends.
pub fn stdio_command(
    program: String,
    args: Vec<String>,
    env: BTreeMap<String, String>,
    env_allow: Option<Vec<String>>,
    cwd: Option<std::path::PathBuf>,
) -> StdioCommand {
    let display =
        std::iter::once(program.as_str()).chain(args.iter().map(String::as_str)).collect::<Vec<_>>().join(" ");
    let allow = env_allow.unwrap_or_else(|| crate::handler::builtin::DEFAULT_ENV_ALLOW.map(String::from).to_vec());
    let sup = supervisor();
    StdioCommand {
        command: Arc::new(move || {
            let mut cmd = program_command(&program, sup.as_deref(), &allow);
            cmd.args(&args).envs(&env);
            if let Some(dir) = &cwd {
                cmd.current_dir(dir);
            }
            cmd
        }),
        kill_group: Some(Arc::new(|pid| GroupGuard(Some(pid)).kill())),
        display,
    }
}
