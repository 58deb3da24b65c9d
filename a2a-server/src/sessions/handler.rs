//! The session handler: what turns a delivered message into a reply (SES-9).
//!
//! A handler is given a [`Delivery`] (the step, the text, its provenance, the turn, the context) and answers with
//! the reply text, or fails. The agent turns a failure into the run's outcome (`error` or `timeout`, §17.4) with the
//! handler's readable text; a handler never needs to panic to report a problem.
//!
//! Implementations: Rust code (any `Fn(Delivery) -> impl Future<Output = Result<String, HandlerFailure>>`), and
//! the configurable `command`, `http` and `openai` handlers of §17.10.

/// The configurable session handlers of §17.10: a program, an HTTP service, an OpenAI-compatible chat API.
pub mod builtin;

use std::future::Future;

use a2a_core::sessions::Delivery;

/// Why a handler gave no reply.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HandlerFailure {
    /// The handler failed; the text says why (becomes the run's `error` outcome).
    #[error("{0}")]
    Failed(String),
    /// The handler ran out of time (becomes the run's `timeout` outcome).
    #[error("timed out: {0}")]
    TimedOut(String),
}

/// Turns a delivery into a reply text (SES-9).
#[async_trait::async_trait]
pub trait SessionHandler: Send + Sync + 'static {
    /// Handles one delivery: the reply text, or why there is none.
    async fn handle(&self, delivery: Delivery) -> Result<String, HandlerFailure>;
}

#[async_trait::async_trait]
impl<F, Fut> SessionHandler for F
where
    F: Fn(Delivery) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<String, HandlerFailure>> + Send + 'static,
{
    async fn handle(&self, delivery: Delivery) -> Result<String, HandlerFailure> {
        self(delivery).await
    }
}
