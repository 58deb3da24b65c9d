//! The connection to one MCP server: connect (with a bounded wait at start, MCP-38), list its tools, call one,
//! reconnect after the connection is lost (MCP-39), and end a child process with the agent (MCP-40).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{CallToolRequestParams, CallToolResult, Tool};
use rmcp::service::{NotificationContext, RunningService};
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{ClientHandler, Peer, RoleClient, ServiceError, ServiceExt};
use serde_json::Value;
use tokio::io::AsyncBufReadExt;

/// How one connection attempt may take at most (the MCP `initialize` handshake included).
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(10);
/// The pause between two connection attempts during the wait at start.
const RETRY_EVERY: Duration = Duration::from_millis(250);

/// Kills the process group led by a child, given its process id.
pub type KillGroup = Arc<dyn Fn(u32) + Send + Sync>;

/// Starts the child process of a stdio MCP server.
#[derive(Clone)]
pub struct StdioCommand {
    /// Makes the command, once per (re)start: program, arguments, environment and working directory set, in a
    /// process group of its own when `kill_group` is given. Its standard streams are set by the connection.
    pub command: Arc<dyn Fn() -> tokio::process::Command + Send + Sync>,
    /// Kills the process group led by the child of this process id (what the child started dies with it); called
    /// when the connection is dropped or lost.
    pub kill_group: Option<KillGroup>,
    /// The command line, for messages (`python3 server.py`).
    pub display: String,
}

impl std::fmt::Debug for StdioCommand {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StdioCommand").field("display", &self.display).finish_non_exhaustive()
    }
}

/// Where an MCP server is.
#[derive(Debug, Clone)]
pub enum McpTransport {
    /// Streamable HTTP at this URL, with these extra request headers.
    Http {
        /// The MCP endpoint (`http://127.0.0.1:8000/mcp`).
        url: String,
        /// Extra headers on every request (an API key of the server).
        headers: Vec<(String, String)>,
    },
    /// A child process speaking MCP on its standard input and output (its stderr goes to the agent's log).
    Stdio(StdioCommand),
}

impl McpTransport {
    /// The server, for messages: its URL or its command line.
    pub fn display(&self) -> &str {
        match self {
            McpTransport::Http { url, .. } => url,
            McpTransport::Stdio(c) => &c.display,
        }
    }
}

/// Why talking to an MCP server failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OutboundError {
    /// The server could not be reached, or did not complete the MCP handshake (MCP-38).
    #[error("cannot connect to the MCP server {server}: {reason}")]
    Connect {
        /// The server's URL or command line.
        server: String,
        /// What went wrong.
        reason: String,
    },
    /// The connection failed during a request (it is re-established for the next one, MCP-39).
    #[error("the connection to the MCP server {server} failed during {method}: {reason}")]
    Transport {
        /// The server's URL or command line.
        server: String,
        /// The MCP method (`tools/call`).
        method: &'static str,
        /// What went wrong.
        reason: String,
    },
    /// The server answered the request with a JSON-RPC error.
    #[error("the MCP server {server} refused {method}: {reason}")]
    Refused {
        /// The server's URL or command line.
        server: String,
        /// The MCP method.
        method: &'static str,
        /// The error it answered.
        reason: String,
    },
}

/// The client side of the connection: logs `notifications/tools/list_changed` (MCP-41).
#[derive(Debug, Clone)]
struct Notices {
    server: String,
}

impl ClientHandler for Notices {
    fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) -> impl Future<Output = ()> + Send + '_ {
        // MCP-41: the capabilities are what the tools were at start (or at the last reload).
        tracing::warn!(
            server = %self.server,
            "the MCP server's tools changed (notifications/tools/list_changed); the agent's capabilities change \
             when it is reloaded (SIGHUP) or restarted"
        );
        std::future::ready(())
    }
}

/// One live connection; dropping it closes the connection and kills a child's process group.
struct Connection {
    service: RunningService<RoleClient, Notices>,
    child: Option<(u32, KillGroup)>,
}

impl Drop for Connection {
    fn drop(&mut self) {
        // MCP-40: the child (and what it started) ends with the connection, now rather than when the runtime gets
        // to it.
        self.service.cancellation_token().cancel();
        if let Some((pid, kill)) = self.child.take() {
            kill(pid);
        }
    }
}

/// An MCP server the agent is a client of: one connection shared by every execution, re-established when lost.
pub struct McpServer {
    transport: McpTransport,
    live: tokio::sync::Mutex<Option<Connection>>,
}

impl std::fmt::Debug for McpServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpServer").field("server", &self.transport.display()).finish_non_exhaustive()
    }
}

impl McpServer {
    /// Connects, trying again every 250 ms for at most `wait` (MCP-38): an agent started together with its MCP
    /// server (a compose file, a test) does not lose the race; a server still unreachable after `wait` is an error
    /// that names it.
    pub async fn connect(transport: McpTransport, wait: Duration) -> Result<Arc<Self>, OutboundError> {
        let deadline = tokio::time::Instant::now() + wait;
        let connection = loop {
            match open(&transport).await {
                Ok(c) => break c,
                Err(e) if tokio::time::Instant::now() + RETRY_EVERY >= deadline => return Err(e),
                Err(e) => {
                    tracing::debug!(error = %e, "MCP server not reachable yet; trying again");
                    tokio::time::sleep(RETRY_EVERY).await;
                }
            }
        };
        Ok(Arc::new(McpServer { transport, live: tokio::sync::Mutex::new(Some(connection)) }))
    }

    /// The server's URL or command line.
    pub fn display(&self) -> &str {
        self.transport.display()
    }

    /// The peer of the live connection, reconnecting first when there is none or it is closed (MCP-39).
    async fn peer(&self) -> Result<Peer<RoleClient>, OutboundError> {
        let mut live = self.live.lock().await;
        if let Some(c) = live.as_ref()
            && !c.service.is_closed()
            && !c.service.peer().is_transport_closed()
        {
            return Ok(c.service.peer().clone());
        }
        if live.take().is_some() {
            tracing::warn!(server = %self.display(), "the connection to the MCP server was lost; reconnecting");
        }
        let c = open(&self.transport).await?;
        tracing::info!(server = %self.display(), "connected to the MCP server");
        let peer = c.service.peer().clone();
        *live = Some(c);
        Ok(peer)
    }

    /// Drops the live connection after a transport failure, so that the next request reconnects (MCP-39).
    async fn lost(&self) {
        if let Some(c) = self.live.lock().await.take() {
            drop(c);
            tracing::warn!(server = %self.display(), "the connection to the MCP server failed; the next request reconnects");
        }
    }

    fn error(&self, method: &'static str, e: ServiceError) -> OutboundError {
        let server = self.display().to_owned();
        match e {
            ServiceError::McpError(e) => OutboundError::Refused { server, method, reason: e.to_string() },
            other => OutboundError::Transport { server, method, reason: other.to_string() },
        }
    }

    /// Every tool the server lists (`tools/list`, all pages).
    pub async fn list_tools(&self) -> Result<Vec<Tool>, OutboundError> {
        let peer = self.peer().await?;
        match peer.list_all_tools().await {
            Ok(t) => Ok(t),
            Err(e) => {
                let refused = matches!(e, ServiceError::McpError(_));
                if !refused {
                    self.lost().await;
                }
                Err(self.error("tools/list", e))
            }
        }
    }

    /// One `tools/call` (MCP-35). Dropping the future before the answer sends `notifications/cancelled` for the
    /// request (MCP-37). A call is not retried on another connection: the tool may have acted already.
    pub async fn call_tool(&self, tool: &str, arguments: Value) -> Result<CallToolResult, OutboundError> {
        let peer = self.peer().await?;
        let mut params = CallToolRequestParams::new(tool.to_owned());
        params.arguments = match arguments {
            Value::Object(m) => Some(m),
            Value::Null => None,
            other => {
                return Err(OutboundError::Refused {
                    server: self.display().to_owned(),
                    method: "tools/call",
                    reason: format!("tool arguments must be a JSON object, not {other}"),
                });
            }
        };
        match peer.call_tool(params).await {
            Ok(r) => Ok(r),
            Err(e) => {
                if !matches!(e, ServiceError::McpError(_)) {
                    self.lost().await;
                }
                Err(self.error("tools/call", e))
            }
        }
    }

    /// Closes the connection (a child process is killed, MCP-40).
    pub async fn close(&self) {
        if let Some(mut c) = self.live.lock().await.take() {
            let _ = c.service.close_with_timeout(Duration::from_secs(2)).await;
        }
    }
}

/// Opens one connection: starts the child or reaches the URL, and completes the MCP handshake within
/// [`ATTEMPT_TIMEOUT`].
async fn open(transport: &McpTransport) -> Result<Connection, OutboundError> {
    let server = transport.display().to_owned();
    let failed = |reason: String| OutboundError::Connect { server: server.clone(), reason };
    let notices = Notices { server: server.clone() };
    match transport {
        McpTransport::Http { url, headers } => {
            let mut map = HashMap::new();
            for (k, v) in headers {
                let name = http::HeaderName::try_from(k.as_str()).map_err(|e| failed(format!("header {k:?}: {e}")))?;
                let value =
                    http::HeaderValue::try_from(v.as_str()).map_err(|e| failed(format!("header {k:?}: {e}")))?;
                map.insert(name, value);
            }
            let config =
                rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig::with_uri(url.as_str())
                    .custom_headers(map);
            let t = StreamableHttpClientTransport::from_config(config);
            let service = handshake(notices.serve(t)).await.map_err(failed)?;
            Ok(Connection { service, child: None })
        }
        McpTransport::Stdio(cmd) => {
            let (proc, stderr) = TokioChildProcess::builder((cmd.command)())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .map_err(|e| failed(format!("cannot start it: {e}")))?;
            let pid = proc.id();
            if let Some(stderr) = stderr {
                // The child's stderr is the operator's: it goes to the agent's log, line by line.
                let server = server.clone();
                tokio::spawn(async move {
                    let mut lines = tokio::io::BufReader::new(stderr).lines();
                    while let Ok(Some(line)) = lines.next_line().await {
                        tracing::info!(server = %server, "MCP server stderr: {line}");
                    }
                });
            }
            let child = pid.zip(cmd.kill_group.clone());
            let kill_on_failure = child.clone();
            let service = handshake(notices.serve(proc)).await.map_err(|e| {
                if let Some((pid, kill)) = &kill_on_failure {
                    kill(*pid);
                }
                failed(e)
            })?;
            Ok(Connection { service, child })
        }
    }
}

/// The MCP handshake of one attempt, within [`ATTEMPT_TIMEOUT`]; the error with its causes.
async fn handshake<T, E: std::error::Error>(f: impl Future<Output = Result<T, E>>) -> Result<T, String> {
    match tokio::time::timeout(ATTEMPT_TIMEOUT, f).await {
        Ok(r) => r.map_err(|e| a2a_core::error::with_causes(&e)),
        Err(_) => Err(format!("no answer to `initialize` within {} s", ATTEMPT_TIMEOUT.as_secs())),
    }
}
