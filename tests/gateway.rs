//! Integration tests of the gateway: real agents (the a2a-server library), real gateways, real Redis, over loopback.
//! One test binary (this file and its modules) keeps link time down.

#![allow(unreachable_pub)] // test helpers are shared between the modules of this one binary

#[path = "gateway/bridge.rs"]
mod bridge;
#[path = "gateway/common.rs"]
mod common;
#[path = "gateway/console.rs"]
mod console;
#[path = "gateway/demo.rs"]
mod demo;
#[path = "gateway/h1.rs"]
mod h1;
#[path = "gateway/h1_diff.rs"]
mod h1_diff;
#[path = "gateway/h1_fuzz.rs"]
mod h1_fuzz;
#[path = "gateway/h1_props.rs"]
mod h1_props;
#[path = "gateway/mcp.rs"]
mod mcp;
#[path = "gateway/operations.rs"]
mod operations;
// The redis-server harness of a2a-server's tests, used as is.
#[path = "gateway/otel.rs"]
mod otel;
#[allow(dead_code)]
#[path = "../a2a-agent/tests/e2e/redis_support.rs"]
mod redis_support;
#[path = "gateway/routing.rs"]
mod routing;
#[path = "gateway/security.rs"]
mod security;
#[path = "gateway/shared.rs"]
mod shared;
#[path = "gateway/signing.rs"]
mod signing;
#[path = "gateway/upstream.rs"]
mod upstream;
