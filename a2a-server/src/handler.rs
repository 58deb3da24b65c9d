//! What a capability runs: the [`Handler`] trait, its [`ExecutionContext`] and its [`HandlerError`].
//!
//! A handler is called once an execution is confirmed (`spec/PROTOCOL.md` §8.2) with the payload already validated
//! against the agreed schema. It returns a JSON result or a failure. It must stop when its context's cancellation
//! token fires (the execution timed out or was canceled); its result is discarded then anyway (ST-2).
//!
//! Any `async` closure `Fn(ExecutionContext, Value) -> Future<Output = Result<Value, HandlerError>>` is a handler:
//!
//! ```
//! use a2a_server::handler::{ExecutionContext, HandlerError};
//! use serde_json::{json, Value};
//!
//! let add = |_ctx: ExecutionContext, payload: Value| async move {
//!     let a = payload["a"].as_f64().ok_or_else(|| HandlerError::new("`a` must be a number"))?;
//!     let b = payload["b"].as_f64().ok_or_else(|| HandlerError::new("`b` must be a number"))?;
//!     Ok(json!({"sum": a + b}))
//! };
//! # let _ = a2a_server::handler::boxed(add);
//! ```

/// Ready-made handlers: a program per execution, an HTTP service, an echo.
pub mod builtin;
/// The `mcp` handler: a tool of an MCP server as a capability (§21.9).
pub mod mcp;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use serde_json::Value;
use tokio_util::sync::CancellationToken;

/// Everything a handler may need to know about the execution it runs.
#[derive(Debug, Clone)]
pub struct ExecutionContext {
    /// The caller's DID (verified when the capability is `did_auth`, see [`ExecutionContext::sender_verified`]).
    pub sender: String,
    /// Whether `sender` was proven by a signature.
    pub sender_verified: bool,
    /// The capability being run.
    pub capability: String,
    /// The negotiation the execution belongs to.
    pub negotiation_id: String,
    /// The execution id: use it to make external effects idempotent (an execution may be re-run after a crash).
    pub execution_id: String,
    /// When the execution times out.
    pub deadline: SystemTime,
    /// Fires when the execution times out or is canceled.
    pub cancel: CancellationToken,
    /// The W3C `traceparent` of this execution's trace, to forward on outgoing calls.
    pub traceparent: Option<String>,
    /// Where the handler emits progress for streaming callers (`spec/PROTOCOL.md` §18): `ctx.events.emit(json)`.
    /// Does nothing on an agent that does not stream.
    pub events: crate::streaming::EventSink,
}

impl ExecutionContext {
    /// Time left before the deadline (zero once it has passed).
    pub fn remaining(&self) -> Duration {
        self.deadline.duration_since(SystemTime::now()).unwrap_or(Duration::ZERO)
    }
}

/// A failure reported by a handler; the execution becomes `failed` with code `handler_failed`.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{message}")]
pub struct HandlerError {
    /// A message for the caller.
    pub message: String,
    /// Machine-readable details for the caller.
    pub details: Option<Value>,
    /// The error code recorded instead of `handler_failed` (composites: `step_failed`, §19).
    pub(crate) code: Option<a2a_core::error::ErrorCode>,
}

impl HandlerError {
    /// A failure with a message.
    pub fn new(message: impl Into<String>) -> Self {
        HandlerError { message: message.into(), details: None, code: None }
    }

    /// Adds details.
    #[must_use]
    pub fn with_details(mut self, details: Value) -> Self {
        self.details = Some(details);
        self
    }

    /// Records this code instead of `handler_failed`.
    #[must_use]
    pub(crate) fn with_code(mut self, code: a2a_core::error::ErrorCode) -> Self {
        self.code = Some(code);
        self
    }
}

/// The future a handler returns.
pub type HandlerFuture = Pin<Box<dyn Future<Output = Result<Value, HandlerError>> + Send + 'static>>;

/// The business logic of one capability.
pub trait Handler: Send + Sync + 'static {
    /// Runs one execution.
    fn call(&self, ctx: ExecutionContext, payload: Value) -> HandlerFuture;
}

impl<F, Fut> Handler for F
where
    F: Fn(ExecutionContext, Value) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<Value, HandlerError>> + Send + 'static,
{
    fn call(&self, ctx: ExecutionContext, payload: Value) -> HandlerFuture {
        Box::pin((self)(ctx, payload))
    }
}

/// A shared, type-erased handler.
pub type BoxHandler = Arc<dyn Handler>;

/// Erases a handler's type.
pub fn boxed(h: impl Handler) -> BoxHandler {
    Arc::new(h)
}
