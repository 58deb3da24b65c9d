//! # a2a-mcp
//!
//! The Model Context Protocol bridge of the A2A semantic-handshake protocol 0.3 (`spec/PROTOCOL.md` §21).

#[cfg(feature = "inbound")]
pub mod inbound;
