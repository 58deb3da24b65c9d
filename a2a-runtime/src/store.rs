//! State of an agent: negotiations, executions, idempotency keys, replay nonces and the work queue, behind three role
//! traits ([`Executions`], [`WorkQueue`], [`ReplayMemory`]) that [`Store`] gathers; the capability registry
//! ([`crate::registry`]) and the audit stream ([`audit`]) beside it.
//!
//! [`Store`] is implemented by the embedded [`MemoryStore`] (the default, no set-up) and by [`RedisStore`] (selected
//! by `REDIS_URL` or `[store] redis_url`), with which many processes share one state and behave as one agent. Both pass
//! one shared test suite (`a2a-agent/tests/e2e/store_suite.rs`).
//!
//! The state machine of an execution (`spec/PROTOCOL.md` §8.1) is applied by [`ExecutionRecord::apply`], the one
//! place that decides whether a transition is allowed; a store only makes it atomic (the memory store under a lock;
//! Redis checks it on the record the caller has and writes only the stage's own fields, with native guards that
//! refuse it when the stored state moved on: see [`redis`]).
//!
//! ## The work queue
//!
//! CONFIRM's [`Transition::Accept`] queues the execution in the same atomic step (CONF-1); with a free worker slot,
//! [`WorkQueue::accept_and_claim`] also claims queued work for this process in that step. Workers in any process
//! serving the capability take work with [`WorkQueue::claim_work`], keep their claim alive with [`WorkQueue::touch_work`]
//! while the handler runs, and record the outcome and release the work in one atomic step with
//! [`WorkQueue::complete_work`] (a handler that finished before its worker recorded `running` records both at once,
//! [`Transition::Ran`]). Work held by a worker that stopped touching it (its process died) is handed to another
//! worker after the visibility timeout (ST-5: at least once; the first terminal state still wins, ST-2).

use std::sync::Arc;
use std::time::Duration;

use a2a_core::error::ErrorObject;
use a2a_core::wire::ExecutionStatus;
use serde::{Deserialize, Serialize};
use serde_json::Value;

pub mod audit;
pub mod memory;
pub mod redis;
mod section;

pub use memory::MemoryStore;
pub use redis::RedisStore;
pub use section::StoreSection;

/// How long one claim of work waits for work; bounds how late a worker notices that it is told to stop.
pub const CLAIM_WAIT: std::time::Duration = std::time::Duration::from_secs(1);

/// Milliseconds since the Unix epoch, the time unit of stored records.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

/// Formats a stored time (ms since the epoch) as the protocol's RFC 3339 timestamp.
pub fn timestamp(ms: u64) -> String {
    a2a_core::wire::format_timestamp(std::time::UNIX_EPOCH + Duration::from_millis(ms))
}

/// Serde for an `Arc<Value>` (serde's `rc` feature is not enabled in the workspace): the value itself.
mod shared_value {
    use std::sync::Arc;

    use serde::{Deserialize, Deserializer, Serialize, Serializer};
    use serde_json::Value;

    pub(super) fn serialize<S: Serializer>(v: &Arc<Value>, s: S) -> Result<S::Ok, S::Error> {
        v.as_ref().serialize(s)
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Arc<Value>, D::Error> {
        Value::deserialize(d).map(Arc::new)
    }
}

/// A store refused an insert because a bound would be exceeded (LIM-4, LIM-5): the router answers
/// `429 quota_exceeded` with `Retry-After` and the quota named.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuotaExceeded {
    /// The limit, by its configuration key (`max_negotiations`, `max_received_per_sender`, `max_nonces`,
    /// `max_nonces_per_sender`).
    pub quota: &'static str,
    /// Its value.
    pub limit: u64,
    /// How long until the insert may succeed, in milliseconds (an estimate; at least 1 s is announced).
    pub retry_after_ms: u64,
}

/// What [`Executions::admit_negotiation`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Admitted {
    /// Stored.
    Stored,
    /// Stored in place of the sender's own negotiation closest to expiry: the sender held its quota
    /// (`max_negotiations_per_sender`), or the store its bound (LIM-4). Never another sender's.
    Replaced,
    /// Not stored: the store is at its bound and the sender holds no negotiation to replace.
    Refused(QuotaExceeded),
}

/// What [`ReplayMemory::admit_jti`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Nonce {
    /// Not seen before; remembered.
    Fresh,
    /// Seen before: a replay.
    Replay,
    /// Not remembered (and the request must be refused): the issuer or the store is at its bound (LIM-5).
    Refused(QuotaExceeded),
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
    /// The agreed schema; shared by every negotiation that agreed the same schema (one copy in memory, LIM-6).
    #[serde(with = "shared_value")]
    pub agreed_schema: Arc<Value>,
    /// A digest of the canonical agreed schema (hex), under which a process keeps its compiled form once for every
    /// negotiation that agreed it; absent in records of older versions (the digest is then computed when needed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schema_digest: Option<String>,
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
    /// The `Idempotency-Key` the execution was created with.
    #[serde(default)]
    pub idempotency_key: Option<String>,
    /// Whether CONFIRM's caller was proven by a signature.
    #[serde(default)]
    pub sender_verified: bool,
    /// The `traceparent` of the CONFIRM.
    #[serde(default)]
    pub traceparent: Option<String>,
    /// Revision: incremented by every applied transition (`Ran` counts two).
    #[serde(default)]
    pub rev: u64,
}

/// A change of state of an execution.
#[derive(Debug, Clone, PartialEq)]
pub enum Transition {
    /// CONFIRM: `received -> accepted`; sets the deadline and queues the work.
    Accept {
        /// Now.
        now_ms: u64,
        /// Whether the confirming caller's identity was proven by a signature (passed to the handler).
        sender_verified: bool,
        /// The W3C `traceparent` of the CONFIRM, continued by the worker.
        traceparent: Option<String>,
    },
    /// A worker starts the handler: `accepted -> running`; with `rerun`, also `running -> running` (a worker
    /// takes over an execution whose previous worker was lost, ST-5).
    Start {
        /// Now.
        now_ms: u64,
        /// Whether this is a re-run of work taken over from a lost worker.
        rerun: bool,
    },
    /// A worker that ran the handler to its end before it recorded the start: [`Transition::Start`] and
    /// [`Transition::Finish`] in one step (the record passes through `running`, `attempts` counts the run). A worker
    /// records the start on its own only for a handler that is still running after a short delay, so that a fast
    /// execution costs a shared store one write instead of two.
    Ran {
        /// Now.
        now_ms: u64,
        /// Whether this was a re-run of work taken over from a lost worker.
        rerun: bool,
        /// `succeeded`, `failed` or `timed_out`.
        status: ExecutionStatus,
        /// The result (succeeded).
        result: Option<Value>,
        /// The failure (other terminal states).
        error: Option<ErrorObject>,
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
            Transition::Finish { status, .. } | Transition::Ran { status, .. } => *status,
        }
    }
}

impl ExecutionRecord {
    /// Applies a transition if the state machine allows it (`spec/PROTOCOL.md` ST-1, ST-2); returns whether it did.
    /// `retention_ms` is how long a terminal record is kept.
    pub fn apply(&mut self, t: &Transition, retention_ms: u64) -> bool {
        if let Transition::Ran { now_ms, rerun, status, result, error } = t {
            // `Start` (from `accepted`, or from `running` when re-run) then `Finish` (to where `running` may move).
            let startable =
                self.status == ExecutionStatus::Accepted || (*rerun && self.status == ExecutionStatus::Running);
            if !startable || !ExecutionStatus::Running.can_move_to(*status) {
                return false;
            }
            self.attempts = self.attempts.saturating_add(1);
            self.result = result.clone();
            self.error = error.clone();
            self.updated_at_ms = *now_ms;
            self.retain_until_ms = now_ms.saturating_add(retention_ms);
            self.status = *status;
            self.rev = self.rev.wrapping_add(2);
            return true;
        }
        let target = t.target();
        let rerun = matches!(t, Transition::Start { rerun: true, .. }) && self.status == ExecutionStatus::Running;
        if !rerun && !target.is_terminal() && target == self.status {
            return false;
        }
        if !rerun && !self.status.can_move_to(target) {
            return false;
        }
        match t {
            Transition::Accept { now_ms, sender_verified, traceparent } => {
                self.confirmed = true;
                self.sender_verified = *sender_verified;
                self.traceparent = traceparent.clone();
                self.deadline_ms = Some(now_ms.saturating_add(self.timeout_ms));
                self.updated_at_ms = *now_ms;
                self.retain_until_ms = now_ms.saturating_add(self.timeout_ms).saturating_add(retention_ms);
            }
            Transition::Start { now_ms, .. } => {
                self.attempts = self.attempts.saturating_add(1);
                self.updated_at_ms = *now_ms;
            }
            Transition::Ran { .. } => return false,
            Transition::Finish { now_ms, result, error, .. } => {
                self.result = result.clone();
                self.error = error.clone();
                self.updated_at_ms = *now_ms;
                self.retain_until_ms = now_ms.saturating_add(retention_ms);
            }
        }
        self.status = target;
        self.rev = self.rev.wrapping_add(1);
        true
    }
}

/// One unit of queued work: an accepted execution to run, as claimed by a worker.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkItem {
    /// The execution.
    pub execution_id: String,
    /// Its capability.
    pub capability: String,
    /// How many times the work was handed to a worker (1 the first time; more after a take-over).
    pub deliveries: u64,
    /// The record as it was when queued, when the store carries it (saves a read).
    pub snapshot: Option<ExecutionRecord>,
    /// The store's handle of the claim.
    pub receipt: String,
}

/// What [`Executions::create_execution`] did.
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
    /// The sender has its quota of executions waiting for CONFIRM (`max_received_per_sender`, LIM-5).
    Refused(QuotaExceeded),
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

/// What [`Executions::transition`] did.
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

/// Negotiations and executions: stored, read, moved through the state machine (§8.1) and waited on. Every method is
/// atomic with respect to the others, and to those of the store's other roles.
#[async_trait::async_trait]
pub trait Executions: Send + Sync + 'static {
    /// Stores a negotiation until its `expires_at_ms`.
    async fn put_negotiation(&self, rec: NegotiationRecord) -> Result<(), StoreError>;
    /// [`Executions::put_negotiation`] under the per-sender bounds of LIM-4: a store that keeps them answers whether it
    /// stored the negotiation, replaced one of the sender's own, or refused. Default: stores it.
    async fn admit_negotiation(&self, rec: NegotiationRecord) -> Result<Admitted, StoreError> {
        self.put_negotiation(rec).await.map(|()| Admitted::Stored)
    }
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
    /// Whether an execution with this id may hold this idempotency claim. A sharded store needs an execution and its
    /// claim in one shard; EXECUTE generates ids until one fits (a handful of tries). Default: any.
    fn id_fits(&self, _id: &str, _claim: Option<&IdempotencyClaim>) -> bool {
        true
    }
    /// Applies a transition atomically (see [`ExecutionRecord::apply`]). `seen` is the record as the caller last read
    /// it, if it has one: a shared store then needs no read before its atomic write (which decides on the stored
    /// state if `seen` is stale). An applied [`Transition::Accept`] queues the execution in the same atomic step.
    async fn transition(
        &self,
        id: &str,
        t: Transition,
        seen: Option<&ExecutionRecord>,
    ) -> Result<TransitionOutcome, StoreError>;
    /// Reads an execution for a transition that follows at once (CONFIRM). The store may answer from the record this
    /// process created: it may be stale, which the transition's atomic write detects (it then decides on the stored
    /// record), but the fields fixed at creation (sender, capability, negotiation, payload, confirm window) are
    /// exact. Default: [`Executions::get_execution`].
    async fn get_execution_for_update(&self, id: &str) -> Result<Option<ExecutionRecord>, StoreError> {
        self.get_execution(id).await
    }
    /// Reads an execution for a long-poll that follows at once (RESULT with a wait): the record is only the start of
    /// [`Executions::wait_change`], whose answer always comes from a read of the store or from a terminal (final) record,
    /// so the store may answer from the record this process last wrote. It may be stale (another process changed the
    /// execution since); the fields fixed at creation (sender, capability, negotiation, payload, confirm window) are
    /// exact. Default: [`Executions::get_execution`].
    async fn get_execution_for_wait(&self, id: &str) -> Result<Option<ExecutionRecord>, StoreError> {
        self.get_execution(id).await
    }
    /// Waits until the execution's status differs from `seen` (a store may wake only for terminal states), or
    /// `timeout` passes; returns the record then.
    async fn wait_change(
        &self,
        id: &str,
        seen: ExecutionStatus,
        timeout: Duration,
    ) -> Result<Option<ExecutionRecord>, StoreError>;
    /// Waits up to `timeout` for a signal that the execution reached a terminal state; returns whether one came. It
    /// reads the record only when a signal may have been missed (a shared store's subscription was lost and made
    /// again meanwhile). A signal that came shortly before the call counts too (the execution is already terminal):
    /// CONFIRM starts waiting only after its accept, and a fast worker of another process may have finished the work
    /// by then.
    /// A worker uses it to stop a handler whose execution was canceled or timed out by another process; CONFIRM, to
    /// hold its admission slot (CONF-5) until the execution it accepted is seen finishing, wherever it ran.
    async fn terminal_signal(&self, id: &str, timeout: Duration) -> bool;
}

/// The work queue (CONF-1, ST-5): confirmed executions waiting for a worker, claimed, kept alive and completed.
#[async_trait::async_trait]
pub trait WorkQueue: Executions {
    /// CONFIRM with a free worker slot in this process: [`Executions::transition`] with a [`Transition::Accept`] that, in
    /// the same atomic step, also claims for this process's workers the oldest unclaimed item of the execution's queue
    /// (usually the work just queued), as [`WorkQueue::claim_work`] would. Saves the workers a read of the queue. Default:
    /// no claim.
    async fn accept_and_claim(
        &self,
        id: &str,
        t: Transition,
        seen: Option<&ExecutionRecord>,
    ) -> Result<(TransitionOutcome, Option<WorkItem>), StoreError> {
        Ok((self.transition(id, t, seen).await?, None))
    }
    /// How many independent queue partitions workers should read (one worker loop each). Default 1.
    fn queue_partitions(&self) -> usize {
        1
    }
    /// Prepares the queue for workers of these capabilities (e.g. creates consumer groups). Idempotent.
    async fn prepare_queue(&self, capabilities: &[String]) -> Result<(), StoreError>;
    /// Claims up to `max` items of work of `partition`, waiting up to `wait` for one; also takes over work whose
    /// worker stopped touching it for the visibility timeout.
    async fn claim_work(&self, partition: usize, max: usize, wait: Duration) -> Result<Vec<WorkItem>, StoreError>;
    /// Renews the claim on work in progress (a heartbeat; call it well within the visibility timeout).
    async fn touch_work(&self, items: &[WorkItem]) -> Result<(), StoreError>;
    /// Atomically applies `t` (when given, as [`Executions::transition`]) and releases the work, unless the transition
    /// was refused while the execution is not terminal (the work then stays claimed). `None` when `t` is `None`.
    async fn complete_work(
        &self,
        item: &WorkItem,
        t: Option<Transition>,
        seen: Option<&ExecutionRecord>,
    ) -> Result<Option<TransitionOutcome>, StoreError>;
    /// The visibility timeout: how long claimed work may go untouched before another worker takes it over.
    fn visibility_timeout(&self) -> Duration;
}

/// The replay memory (LIM-5): the `jti`s of signed requests already seen, until they expire.
#[async_trait::async_trait]
pub trait ReplayMemory: Send + Sync + 'static {
    /// Records the `jti` of a signed request from `issuer` until `until_ms`; returns false when it was already seen
    /// (a replay).
    async fn remember_jti(&self, issuer: &str, jti: &str, until_ms: u64) -> Result<bool, StoreError>;
    /// [`ReplayMemory::remember_jti`] under the bounds of LIM-5: a store that keeps them may refuse to remember a nonce (and
    /// the request is then refused). Default: [`ReplayMemory::remember_jti`].
    async fn admit_jti(&self, issuer: &str, jti: &str, until_ms: u64) -> Result<Nonce, StoreError> {
        Ok(if self.remember_jti(issuer, jti, until_ms).await? { Nonce::Fresh } else { Nonce::Replay })
    }
}

/// The state of an agent: its [`Executions`], its [`WorkQueue`] and its [`ReplayMemory`], on one backend.
#[async_trait::async_trait]
pub trait Store: Executions + WorkQueue + ReplayMemory {
    /// Checks that the store answers.
    async fn ping(&self) -> Result<(), StoreError> {
        Ok(())
    }
}
