//! Outbound: an MCP server's tools as capabilities (`spec/PROTOCOL.md` §21.9, MCP-30..MCP-41).
//!
//! An agent whose capability handler is an MCP server connects to it as an MCP client ([`McpServer`], over
//! Streamable HTTP or a child process's standard streams), lists its tools and imports each one as a capability
//! ([`import::import_tools`]): the tool's `inputSchema` becomes the capability's `input_schema` when it follows the
//! schema rules (§6.2), and a tool that cannot be imported is reported with the reason ([`import::SkippedTool`]),
//! never silently dropped (MCP-33). An execution is one `tools/call` ([`McpServer::call_tool`]); its result is
//! mapped by [`result::tool_result`] (MCP-35, MCP-36). Dropping the call's future — the execution timed out or was
//! canceled — sends `notifications/cancelled` for the request (MCP-37).
//!
//! This side needs no A2A client: the agent library (`a2a-server`) uses it through its `mcp` handler.

mod client;
pub mod import;
pub mod result;

pub use client::{KillGroup, McpServer, McpTransport, OutboundError, StdioCommand};
pub use import::{ImportOptions, Imported, ImportedTool, SkippedTool, import_tools};
pub use result::{ToolFailure, tool_result};
