//! # a2a-mcp
//!
//! The Model Context Protocol bridge of the A2A semantic-handshake protocol 0.3 (`spec/PROTOCOL.md` §21).
//!
//! - `inbound` (feature `inbound`): the capabilities of an agent or a gateway as MCP tools at `/mcp` (§21.1–§21.8).
//! - `outbound` (feature `outbound`): an MCP server's tools as capabilities, for the agent's `mcp` handler (§21.9).

#[cfg(feature = "inbound")]
pub mod inbound;
#[cfg(feature = "outbound")]
pub mod outbound;
