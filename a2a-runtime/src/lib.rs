//! # a2a-runtime
//!
//! What the agent (`a2a-server`) and the gateway (`a2a-gateway`) both run on, so that neither compiles the other:
//! the state store (in memory or on Redis / Redis Cluster) with its work queue and replay memory, the audit stream,
//! the capability registry, the bounded body reader, the accept loop with its guards and graceful shutdown, the
//! health probes, reload by signal, OpenTelemetry request spans, and the allocator's housekeeping.
//!
//! It holds no protocol step: those are `a2a-core` (wire types, error table, helpers) and the two applications.

/// The global allocator the `a2a-server` and `a2a-gateway` binaries install, and the benches with them so that they
/// measure what ships (feature `mimalloc`, on by default). A library user chooses their own: nothing here installs it.
#[cfg(feature = "mimalloc")]
pub use mimalloc::MiMalloc as ShippedAllocator;

pub mod a2a1x;
pub mod allocator;
pub mod app;
pub mod body;
pub mod config_reference;
pub mod console_auth;
pub mod console_try;
pub mod head_guard;
pub mod health;
pub mod limits;
pub mod registry;
pub mod reload;
pub mod response_signing;
pub mod serve;
pub mod store;
pub mod telemetry;
pub mod trace_context;

pub use limits::Limits;
pub use response_signing::{RESPONSE_SIGNATURE_LIFETIME_S, response_signature, response_signature_of};
