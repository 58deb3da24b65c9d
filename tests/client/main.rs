//! Integration tests of `a2a-client` against real `a2a-server` agents over loopback HTTP (and HTTPS), and of the `a2a`
//! binary run as a subprocess. One test binary (this file and its modules) keeps link time down.

#![allow(unreachable_pub)] // helpers shared between the modules of this one binary

mod common;

mod a2a1x;
mod cli;
mod did_https;
mod fallback;
mod sdk;
mod sessions;
mod signing;
mod stream;
