//! # a2a-client
//!
//! The client side of the A2A semantic-handshake protocol 0.3 (`spec/PROTOCOL.md`): the SDK that services embed to
//! find agents, agree on a data contract, run work and get results, and (feature `cli`) the `a2a` command-line client
//! built on it.
//!
//! A [`Client`] has an [`Identity`] (a did:web DID and, to sign, its P-256 key). It runs each step on its own —
//! [`Client::discover`], [`Client::capabilities`], [`Client::negotiate`], [`Client::execute`], [`Client::confirm`],
//! [`Client::result`], [`Client::cancel`], [`Client::fallback`] — or the whole handshake in one [`Client::call`]:
//!
//! ```no_run
//! use a2a_client::{CallOptions, Client, ClientConfig, Identity, Peer};
//! use a2a_client::fallback::FallbackPolicy;
//! use serde_json::json;
//! use std::time::Duration;
//!
//! # async fn run() -> Result<(), a2a_client::ClientError> {
//! let identity = Identity::generate("did:web:caller.example.com", "key-1")?;
//! let client = Client::builder(identity).config(ClientConfig::default()).build()?;
//!
//! // At start: negotiate with the peers the service calls, so that the first call skips NEGOTIATE.
//! client.prewarm(&[Peer::new("https://reports.example.com/a2a", "submit_report")]).await;
//!
//! let opts = CallOptions::default().deadline(Duration::from_secs(20)).fallback(FallbackPolicy::accept_degraded());
//! match client.call_with("https://reports.example.com/a2a", "submit_report",
//!                        json!({"title": "Lift 3 out of service", "timestamp": "2026-11-29T21:00:00Z"}), &opts).await {
//!     Ok(outcome) => println!("{} (degraded: {})", outcome.result, outcome.degraded),
//!     Err(e) => eprintln!("{e}\nhint: {}", e.hint()),
//! }
//! # Ok(()) }
//! ```
//!
//! What the client does for you (`spec/PROTOCOL.md` §14):
//!
//! - **Caches** (CLI-1, CLI-6): DISCOVER answers and capabilities documents for 5 minutes (LRU, bounded); agreed
//!   schemas until their negotiation expires; [`Client::prewarm`] fills them at start.
//! - **Results** (CLI-2, CLI-7): long-poll when the agent lists `long_poll`, otherwise polling every 100 ms, 200 ms,
//!   400 ms, ... capped at 1.6 s, always within the call's deadline.
//! - **Timeouts and retries** (CLI-3, CLI-4, CLI-8): every request has a timeout and the call a deadline; only safe
//!   steps are retried (EXECUTE only with an `Idempotency-Key` at an agent that lists `idempotency`).
//! - **Fallback** (FB-4, CLI-9): on a capability mismatch, try other agents that the registry names, accept a degraded
//!   capability, or refuse with `no_matching_capability` — per [`fallback::FallbackPolicy`].
//! - **Integrity** (§9.5): requests signed in any coverage mode; signed responses verified with the agent's key,
//!   resolved over HTTPS (did:web) with a cache and SSRF protection.
//!
//! Sessions and agent-to-agent conversations (§17) — register, list, send and ask, await a run, history, spawn,
//! inbox and reply, and the event channel as a stream — are in `sessions`, through `Client::sessions` (feature
//! `sessions`, on by default; without it the client has the handshake alone).
//!
//! Every failure is a [`ClientError`] that names the step, what happened ([`ClientError::code`]) and what to try
//! ([`ClientError::hint`]); nothing panics on input from the network.

pub mod a2a1x;
pub mod backoff;
mod call;
#[cfg(feature = "cli")]
pub mod cli;
mod client;
mod config;
mod endpoint;
mod error;
pub mod fallback;
mod identity;
mod remote;
#[cfg(feature = "sessions")]
pub mod sessions;
pub mod stream;
mod transport;
mod types;

pub use call::CallOptions;
pub use client::{CacheStats, Client, ClientBuilder, Credentials, ExecuteOptions, Wait};
pub use config::{ClientConfig, DidResolution, ResponseVerification, SigningMode};
pub use endpoint::Endpoint;
pub use error::{ClientError, Step};
pub use identity::Identity;
pub use remote::RemoteClient;
pub use stream::{EventStream, StreamEvent, StreamOptions};
pub use types::{CallOutcome, CallTrace, Capabilities, Discovery, Execution, Negotiation, Peer, Progress, ProgressFn};

/// The protocol types the client returns, re-exported from `a2a-core`.
pub use a2a_core::wire;
