//! What the steps return.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use a2a_core::wire::{
    CapabilitiesDocument, ExecuteResponse, ExecutionStatus, FallbackOption, NegotiateResponse, ResultResponse,
};
use serde_json::Value;

use crate::endpoint::Endpoint;
use crate::error::Step;

/// What DISCOVER (`OPTIONS /a2a`) told about an agent (§5.1).
#[derive(Debug, Clone, PartialEq)]
pub struct Discovery {
    /// The endpoint asked.
    pub endpoint: Endpoint,
    /// The agent's DID (`A2A-Sender-ID`).
    pub agent: String,
    /// The protocol version it speaks (`A2A-Version`, always `0.3` here: others are refused, CLI-5).
    pub version: String,
    /// The capabilities it offers (`A2A-Capabilities`), in its order.
    pub capabilities: Vec<String>,
    /// Region restrictions per capability (`A2A-Region`).
    pub regions: BTreeMap<String, Vec<String>>,
    /// When the answer was received.
    pub fetched_at: SystemTime,
}

impl Discovery {
    /// Whether the agent offers `capability`.
    pub fn offers(&self, capability: &str) -> bool {
        self.capabilities.iter().any(|c| c == capability)
    }
}

/// An agent's full declarations (`GET /a2a/capabilities`, §5.3) and where they came from.
#[derive(Debug, Clone, PartialEq)]
pub struct Capabilities {
    /// The endpoint asked.
    pub endpoint: Endpoint,
    /// The document.
    pub document: CapabilitiesDocument,
}

impl Capabilities {
    /// Whether the agent lists an optional feature (`long_poll`, `cancel`, `idempotency`; DISC-10).
    pub fn has_feature(&self, feature: &str) -> bool {
        self.document.features.iter().any(|f| f == feature)
    }

    /// The declaration of a capability.
    pub fn declaration(&self, capability: &str) -> Option<&a2a_core::capability::CapabilityDeclaration> {
        self.document.capabilities.iter().find(|c| c.name == capability)
    }

    /// The longest `wait_ms` the agent honours (30 s when it does not say).
    pub fn max_wait(&self) -> Duration {
        Duration::from_millis(self.document.limits.as_ref().map_or(30_000, |l| l.max_wait_ms))
    }
}

/// An agreed data contract (`POST /a2a/negotiate`, §6).
#[derive(Debug, Clone, PartialEq)]
pub struct Negotiation {
    /// The agent's endpoint.
    pub endpoint: Endpoint,
    /// The agent's DID.
    pub agent: String,
    /// The agent's answer: id, agreed schema, changes, timeouts, expiry.
    pub response: NegotiateResponse,
    /// When the client received it (the expiry is measured from here, without trusting the clocks to agree).
    pub received_at: Instant,
    /// How long it stays usable, from `received_at` (from `expires_at`, less a safety margin).
    pub valid_for: Duration,
}

impl Negotiation {
    /// The negotiation id.
    pub fn id(&self) -> &str {
        &self.response.negotiation_id
    }

    /// The agreed schema every payload must match.
    pub fn agreed_schema(&self) -> &Value {
        &self.response.agreed_schema
    }

    /// Whether it can still be used.
    pub fn is_fresh(&self) -> bool {
        self.received_at.elapsed() < self.valid_for
    }
}

/// An execution created by EXECUTE (§7).
#[derive(Debug, Clone, PartialEq)]
pub struct Execution {
    /// The agent's endpoint.
    pub endpoint: Endpoint,
    /// The agent's DID.
    pub agent: String,
    /// The capability it runs.
    pub capability: String,
    /// The agent's answer (id, status, `confirm_by`).
    pub response: ExecuteResponse,
    /// The `Idempotency-Key` sent, if any.
    pub idempotency_key: Option<String>,
    /// Whether the answer was an existing execution (`200`, a repeated EXECUTE, EXE-7).
    pub replayed: bool,
}

impl Execution {
    /// The execution id.
    pub fn id(&self) -> &str {
        &self.response.execution_id
    }
}

/// The result of a whole handshake ([`crate::Client::call`]).
#[derive(Debug, Clone, PartialEq)]
pub struct CallOutcome {
    /// The handler's result.
    pub result: Value,
    /// The capability asked for.
    pub requested_capability: String,
    /// The capability that ran: another one when a degraded fallback was accepted.
    pub capability: String,
    /// The endpoint of the agent that ran it.
    pub endpoint: Endpoint,
    /// Its DID.
    pub agent: String,
    /// The execution.
    pub execution_id: String,
    /// The negotiation used.
    pub negotiation_id: String,
    /// Whether the agent tightened the proposed schema.
    pub tightened: bool,
    /// Whether the result comes from a degraded capability (FB-4: never silently).
    pub degraded: bool,
    /// The fallback option taken, when the first agent could not serve the capability.
    pub fallback: Option<FallbackOption>,
    /// The final RESULT.
    pub response: ResultResponse,
    /// How the call went: per step, cache hits, attempts.
    pub trace: CallTrace,
}

/// How a call went, for logs and for tuning.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CallTrace {
    /// Time spent per step (summed over attempts).
    pub steps: Vec<(Step, Duration)>,
    /// Whether DISCOVER (and the capabilities document) came from the cache.
    pub discover_cached: bool,
    /// Whether the negotiation came from the cache.
    pub negotiation_cached: bool,
    /// Every agent and capability tried, `endpoint capability`, in order; the last one answered.
    pub attempts: Vec<String>,
    /// RESULT requests made.
    pub result_polls: u32,
    /// The whole call.
    pub total: Duration,
}

impl CallTrace {
    pub(crate) fn add(&mut self, step: Step, d: Duration) {
        match self.steps.iter_mut().find(|(s, _)| *s == step) {
            Some((_, t)) => *t += d,
            None => self.steps.push((step, d)),
        }
    }
}

/// A known peer to negotiate with ahead of time ([`crate::Client::prewarm`], CLI-1).
#[derive(Debug, Clone, PartialEq)]
pub struct Peer {
    /// The agent's URL.
    pub url: String,
    /// The capability the service will call.
    pub capability: String,
    /// The schema to propose; by default the capability's own `input_schema` (the same default as `call`).
    pub proposed_schema: Option<Value>,
}

impl Peer {
    /// A peer whose capability will be called with its own input schema.
    pub fn new(url: impl Into<String>, capability: impl Into<String>) -> Self {
        Peer { url: url.into(), capability: capability.into(), proposed_schema: None }
    }

    /// Proposes this schema instead.
    #[must_use]
    pub fn with_schema(mut self, schema: Value) -> Self {
        self.proposed_schema = Some(schema);
        self
    }
}

/// What the client is doing, for progress displays ([`crate::CallOptions::on_progress`]).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Progress {
    /// A step starts.
    Step {
        /// The step.
        step: Step,
        /// The agent.
        endpoint: String,
    },
    /// The client is waiting for an execution.
    Waiting {
        /// The execution.
        execution_id: String,
        /// Its last status.
        status: ExecutionStatus,
        /// Time since CONFIRM.
        elapsed: Duration,
    },
    /// The first agent could not serve the capability; the client tries an option.
    Fallback {
        /// The option's capability.
        capability: String,
        /// The option's endpoint.
        endpoint: String,
        /// Why the previous attempt failed.
        reason: String,
    },
}

/// A progress callback.
pub type ProgressFn = Arc<dyn Fn(&Progress) + Send + Sync>;
