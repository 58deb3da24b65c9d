//! End-to-end tests of `a2a-server` over real loopback HTTP, plus router tests without a socket.
//! One test binary (this file and its modules) keeps link time down.

#![allow(unreachable_pub)] // test helpers are shared between the modules of this one binary

mod common;

mod auth;
mod browser;
mod config;
mod demo;
mod errors;
mod handlers;
mod lifecycle;
mod limits;
mod multiprocess;
mod protocol;
mod redis_support;
mod resolve;
mod router;
mod session_handlers;
mod sessions;
mod sessions_multiprocess;
mod sessions_store;
mod store_suite;
