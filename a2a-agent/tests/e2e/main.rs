//! End-to-end tests of `a2a-server` over real loopback HTTP, plus router tests without a socket.
//! One test binary (this file and its modules) keeps link time down.

#![allow(unreachable_pub)] // test helpers are shared between the modules of this one binary

mod common;

mod a2a1x;
mod a2a1x_sdk;
mod auth;
mod browser;
mod composite;
mod config;
mod config_check;
mod console;
mod demo;
mod errors;
mod handler_isolation;
mod handlers;
mod hardening;
mod lifecycle;
mod limits;
mod log_format;
mod malformed_json;
mod mcp;
mod mcp_outbound;
mod multiprocess;
mod operations;
mod packaging;
mod protocol;
mod readme;
mod redis_support;
mod resolve;
mod router;
mod server_process;
mod session_handlers;
mod sessions;
mod sessions_demo;
mod sessions_multiprocess;
mod sessions_store;
mod sessions_webhooks;
mod spec_decisions;
mod steady_state;
mod store_suite;
mod streaming;
