//! Sessions and agent-to-agent conversations (`spec/PROTOCOL.md` §17): the registry, send and runs, ping-pong,
//! announce, history, spawn and policy, served below the agent's A2A endpoint when sessions are enabled.
//!
//! The wire types and the pure rules (skip tokens, addresses, allow lists, wait chains, redaction, provenance) live
//! in [`a2a_core::sessions`]; this module holds what needs a runtime: state, HTTP, handlers.

pub mod config;
pub mod handler;
pub mod handlers;

pub use handler::{HandlerFailure, SessionHandler};
