//! Integration tests of the gateway: real agents (the a2a-server library), real gateways, real Redis, over loopback.
//! One test binary (this file and its modules) keeps link time down.

#![allow(unreachable_pub)] // test helpers are shared between the modules of this one binary

#[path = "it/bridge.rs"]
mod bridge;
#[path = "it/common.rs"]
mod common;
#[path = "it/console.rs"]
mod console;
#[path = "it/demo.rs"]
mod demo;
#[path = "it/h1.rs"]
mod h1;
#[path = "it/h1_diff.rs"]
mod h1_diff;
#[path = "it/h1_fuzz.rs"]
mod h1_fuzz;
#[path = "it/h1_props.rs"]
mod h1_props;
#[path = "it/operations.rs"]
mod operations;
// The redis-server harness of a2a-server's tests, used as is.
#[path = "it/otel.rs"]
mod otel;
#[allow(dead_code)]
#[path = "../../a2a-server/tests/e2e/redis_support.rs"]
mod redis_support;
#[path = "it/routing.rs"]
mod routing;
#[path = "it/security.rs"]
mod security;
#[path = "it/shared.rs"]
mod shared;
#[path = "it/signing.rs"]
mod signing;
#[path = "it/upstream.rs"]
mod upstream;
