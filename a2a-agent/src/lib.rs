//! # a2a-agent
//!
//! The `a2a-server` binary as library functions (so that tests run it in-process): an agent served from a TOML
//! configuration ([`config`], [`app::run_config`], reloaded in place by [`live`]), the demo agent ([`demo`],
//! [`app::run_demo`]) and the sessions demo ([`sessions_demo`]). The agent itself is the `a2a-server` library; its
//! composites reach other agents with the `a2a-client` library (CMP-10), wired here.

pub mod app;
pub mod config;
pub mod config_reference;
pub mod console;
pub mod demo;
mod live;
pub mod mcp;
pub mod sessions_demo;

// The agent library, under the paths these modules were written with.
use a2a_server::{
    Agent, AgentBuilder, ApiKey, BuildError, CorsPolicy, OAuth2, a2a1x, compose, handler, health, limits, registry,
    reload, serve, sessions, store, streaming,
};
