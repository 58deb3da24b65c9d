//! State of an agent: negotiations, executions, idempotency keys and replay nonces, behind one trait.
//!
//! [`Store`] is implemented by the embedded [`MemoryStore`] (the default, no set-up). The state machine of an
//! execution (`spec/PROTOCOL.md` §8.1) is applied by [`ExecutionRecord::apply`], the one place that decides whether a
//! transition is allowed; a store only makes the read-check-write atomic.

use std::time::Duration;

use a2a_core::error::ErrorObject;
use a2a_core::wire::ExecutionStatus;
use serde::{Deserialize, Serialize};
use serde_json::Value;

pub mod memory;

pub use memory::MemoryStore;

/// Milliseconds since the Unix epoch, the time unit of stored records.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

/// Formats a stored time (ms since the epoch) as the protocol's RFC 3339 timestamp.
pub fn timestamp(ms: u64) -> String {
    a2a_core::wire::format_timestamp(std::time::UNIX_EPOCH + Duration::from_millis(ms))
}

/// A negotiation as stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NegotiationRecord {
    /// The negotiation id.
    pub id: String,
    /// The sender that created it; only this sender may use it.
    pub sender: String,
    /// The capability agreed on.
    pub capability: String,
    /// The agreed schema.
    pub agreed_schema: Value,
    /// Run time of each execution.
    pub timeout_ms: u64,
    /// How long an execution waits for CONFIRM.
    pub confirm_window_ms: u64,
    /// Creation time.
    pub created_at_ms: u64,
    /// Expiry time; the record may be dropped after it.
    pub expires_at_ms: u64,
}

/// An execution as stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExecutionRecord {
    /// The execution id.
    pub id: String,
    /// Its negotiation.
    pub negotiation_id: String,
    /// The sender that created it; only this sender may see or drive it.
    pub sender: String,
    /// The capability it runs.
    pub capability: String,
    /// The validated payload.
    pub payload: Value,
    /// Current status.
    pub status: ExecutionStatus,
    /// Run time granted once accepted.
    pub timeout_ms: u64,
    /// Creation time.
    pub created_at_ms: u64,
    /// Last change.
    pub updated_at_ms: u64,
    /// CONFIRM must arrive before this time.
    pub confirm_by_ms: u64,
    /// Set on acceptance.
    #[serde(default)]
    pub deadline_ms: Option<u64>,
    /// Whether CONFIRM was accepted (distinguishes a cancel before confirmation).
    #[serde(default)]
    pub confirmed: bool,
    /// How many times a worker started it.
    #[serde(default)]
    pub attempts: u32,
    /// The result, when succeeded.
    #[serde(default)]
    pub result: Option<Value>,
    /// The failure, when failed, timed out or canceled.
    #[serde(default)]
    pub error: Option<ErrorObject>,
    /// The record may be dropped after this time.
    pub retain_until_ms: u64,
}

/// A change of state of an execution.
#[derive(Debug, Clone, PartialEq)]
pub enum Transition {
    /// CONFIRM: `received -> accepted`; sets the deadline.
    Accept {
        /// Now.
        now_ms: u64,
    },
    /// A worker starts the handler: `accepted -> running`.
    Start {
        /// Now.
        now_ms: u64,
    },
    /// A terminal state.
    Finish {
        /// Now.
        now_ms: u64,
        /// `succeeded`, `failed`, `timed_out` or `canceled`.
        status: ExecutionStatus,
        /// The result (succeeded).
        result: Option<Value>,
        /// The failure (other terminal states).
        error: Option<ErrorObject>,
    },
}

impl Transition {
    /// The status this transition moves to.
    pub fn target(&self) -> ExecutionStatus {
        match self {
            Transition::Accept { .. } => ExecutionStatus::Accepted,
            Transition::Start { .. } => ExecutionStatus::Running,
            Transition::Finish { status, .. } => *status,
        }
    }
}

impl ExecutionRecord {
    /// Applies a transition if the state machine allows it (`spec/PROTOCOL.md` ST-1, ST-2); returns whether it did.
    /// `retention_ms` is how long a terminal record is kept.
    pub fn apply(&mut self, t: &Transition, retention_ms: u64) -> bool {
        let target = t.target();
        if !target.is_terminal() && target == self.status {
            return false;
        }
        if !self.status.can_move_to(target) {
            return false;
        }
        match t {
            Transition::Accept { now_ms } => {
                self.confirmed = true;
                self.deadline_ms = Some(now_ms.saturating_add(self.timeout_ms));
                self.updated_at_ms = *now_ms;
                self.retain_until_ms = now_ms.saturating_add(self.timeout_ms).saturating_add(retention_ms);
            }
            Transition::Start { now_ms } => {
                self.attempts = self.attempts.saturating_add(1);
                self.updated_at_ms = *now_ms;
            }
            Transition::Finish { now_ms, result, error, .. } => {
                self.result = result.clone();
                self.error = error.clone();
                self.updated_at_ms = *now_ms;
                self.retain_until_ms = now_ms.saturating_add(retention_ms);
            }
        }
        self.status = target;
        true
    }
}

/// What [`Store::create_execution`] did.
#[derive(Debug, Clone, PartialEq)]
pub enum Created {
    /// The execution was stored.
    New,
    /// The idempotency key was already used for an equal request: the existing execution.
    Existing(Box<ExecutionRecord>),
    /// The idempotency key was already used for a different request.
    Conflict,
    /// Too many executions are waiting for CONFIRM.
    Full,
}

/// An idempotency key claimed by an EXECUTE.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdempotencyClaim {
    /// The sender (keys are scoped to it).
    pub sender: String,
    /// The key.
    pub key: String,
    /// A digest of the negotiation id and the canonical payload: equal requests have equal fingerprints.
    pub fingerprint: String,
}

/// What [`Store::transition`] did.
#[derive(Debug, Clone, PartialEq)]
pub enum TransitionOutcome {
    /// Applied; the record after the change.
    Applied(Box<ExecutionRecord>),
    /// Not allowed from the current state; the record as it is.
    Refused(Box<ExecutionRecord>),
    /// No such execution.
    NotFound,
}

/// The store could not be reached or failed.
#[derive(Debug, Clone, thiserror::Error)]
#[error("state store unavailable: {0}")]
pub struct StoreError(pub String);

/// The state of an agent. Every method is atomic with respect to the others.
#[async_trait::async_trait]
pub trait Store: Send + Sync + 'static {
    /// Stores a negotiation until its `expires_at_ms`.
    async fn put_negotiation(&self, rec: NegotiationRecord) -> Result<(), StoreError>;

    /// Reads a negotiation that has not expired.
    async fn get_negotiation(&self, id: &str) -> Result<Option<NegotiationRecord>, StoreError>;

    /// Stores a new execution (status `received`), claiming the idempotency key if one is given.
    async fn create_execution(
        &self,
        rec: ExecutionRecord,
        idempotency: Option<IdempotencyClaim>,
    ) -> Result<Created, StoreError>;

    /// Reads an execution that has not been dropped.
    async fn get_execution(&self, id: &str) -> Result<Option<ExecutionRecord>, StoreError>;

    /// Applies a transition atomically (see [`ExecutionRecord::apply`]).
    async fn transition(&self, id: &str, t: Transition) -> Result<TransitionOutcome, StoreError>;

    /// Waits until the execution's status differs from `seen`, or `timeout` passes; returns the record then.
    async fn wait_change(
        &self,
        id: &str,
        seen: ExecutionStatus,
        timeout: Duration,
    ) -> Result<Option<ExecutionRecord>, StoreError>;

    /// Records the `jti` of a signed request from `issuer` until `until_ms`; returns false when it was already seen
    /// (a replay).
    async fn remember_jti(&self, issuer: &str, jti: &str, until_ms: u64) -> Result<bool, StoreError>;
}
