//! The protocol logic of an agent, without HTTP: NEGOTIATE, EXECUTE, CONFIRM, RESULT, CANCEL and FALLBACK
//! (`spec/PROTOCOL.md` §6–§11). The router (`crate::router`) parses requests, authenticates, and calls in here.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use a2a_core::capability::CapabilityDeclaration;
use a2a_core::did::Did;
use a2a_core::error::{A2aError, ErrorCode, ErrorObject};
use a2a_core::execution_id::ExecutionId;
use a2a_core::negotiation::{self, AgreedSchema};
use a2a_core::schema_rules;
use a2a_core::wire::{
    ConfirmResponse, ExecuteResponse, ExecutionStatus, FallbackOption, FallbackRelation, FallbackSource,
    NegotiateRequest, NegotiateResponse, ResultResponse,
};
use futures_util::FutureExt;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::handler::{BoxHandler, ExecutionContext};
use crate::limits::Limits;
use crate::metrics::Metrics;
use crate::registry::Registry;
use crate::store::{
    Admitted, Created, ExecutionRecord, IdempotencyClaim, NegotiationRecord, Store, StoreError, Transition,
    TransitionOutcome, WorkItem, now_ms, timestamp,
};

/// A capability as served: its declaration, its handler, and its compiled output schema.
pub struct Capability {
    /// The declaration.
    pub decl: CapabilityDeclaration,
    pub(crate) handler: BoxHandler,
    pub(crate) output: Option<AgreedSchema>,
    /// The pipeline, when the capability is a composite (§19).
    pub(crate) composite: Option<Arc<crate::compose::Composite>>,
}

/// The outcome of the schema work of NEGOTIATE for one proposal.
struct Agreed {
    /// Shared by every negotiation stored with it (LIM-6).
    schema: Arc<Value>,
    /// [`schema_digest`] of `schema`: the key of its compiled form.
    digest: String,
    changes: Vec<a2a_core::wire::SchemaChange>,
    compiled: Arc<AgreedSchema>,
}

fn hex(bytes: &[u8]) -> String {
    data_encoding::HEXLOWER.encode(bytes)
}

/// The key of an agreed schema's compiled form: 128 bits of SHA-256 of its canonical JSON, in hex. Equal schemas
/// have equal digests, so every negotiation that agreed a schema shares one compiled copy.
fn schema_digest(schema: &Value) -> String {
    let mut h = Sha256::new();
    h.update(a2a_core::canonical::to_canonical_vec(schema));
    hex(&h.finalize()[..16])
}

/// The `429 quota_exceeded` answer of a refused insert (LIM-4, LIM-5): the quota by its configuration key, its value,
/// and `retry_after_s` (the router's `Retry-After`).
pub(crate) fn quota_error(q: &crate::store::QuotaExceeded, what: &str) -> A2aError {
    let retry_after_s = q.retry_after_ms.div_ceil(1000).max(1);
    A2aError::with_message(
        ErrorCode::QUOTA_EXCEEDED,
        format!(
            "{what}: this agent's limit `{}` ({}) is reached for you; retry after {retry_after_s} s",
            q.quota, q.limit
        ),
    )
    .details(json!({"quota": q.quota, "limit": q.limit, "retry_after_s": retry_after_s}))
}

/// How [`Engine::find_execution`] reads the record (the store method it calls).
#[derive(Clone, Copy)]
enum Read {
    /// [`Store::get_execution`].
    Current,
    /// [`Store::get_execution_for_update`].
    ForUpdate,
    /// [`Store::get_execution_for_wait`].
    ForWait,
}

/// Who is calling, as established by the router (headers and authentication).
#[derive(Debug, Clone)]
pub struct Caller {
    /// `A2A-Sender-ID`.
    pub sender: String,
    /// Whether a signature proved it.
    pub verified: bool,
    /// `A2A-Region` of the request.
    pub region: Option<String>,
    /// `traceparent` of the request.
    pub traceparent: Option<String>,
    /// The trusted gateway that forwarded the request on behalf of `sender` (GW-9), when it came through one.
    pub via_gateway: Option<String>,
}

/// The engine of one agent.
pub struct Engine {
    pub(crate) did: String,
    pub(crate) caps: Vec<Arc<Capability>>,
    by_name: HashMap<String, usize>,
    pub(crate) store: Arc<dyn Store>,
    pub(crate) registry: Arc<dyn Registry>,
    /// Where one record per request goes.
    pub(crate) audit: Arc<dyn crate::store::audit::AuditLog>,
    pub(crate) limits: Limits,
    pub(crate) metrics: Arc<Metrics>,
    schemas: moka::sync::Cache<String, Arc<AgreedSchema>>,
    agreements: moka::sync::Cache<String, Arc<Agreed>>,
    /// Slots of the workers of this process: a worker claims work only with a free slot.
    permits: Arc<Semaphore>,
    /// Slots of CONF-5: executions accepted here and not yet seen finishing (see [`Engine::confirm`]).
    admission: Arc<Semaphore>,
    admitted: Mutex<HashMap<String, OwnedSemaphorePermit>>,
    running: Mutex<HashMap<String, CancellationToken>>,
    /// Stops the worker loops (on drain, and when the engine is dropped).
    workers_stop: CancellationToken,
    workers_started: std::sync::atomic::AtomicBool,
    /// Set when draining: CONFIRM refuses new work.
    draining: std::sync::atomic::AtomicBool,
    /// Fires when the grace period of a drain is over: handlers still running are told to stop.
    pub(crate) shutdown: CancellationToken,
    tasks: tokio_util::task::TaskTracker,
    /// Streaming results (§18), when the agent streams.
    streaming: std::sync::OnceLock<Arc<crate::streaming::Streaming>>,
    /// Request bodies being received, all routes together (LIM-7).
    pub(crate) body_budget: Arc<crate::body::BodyBudget>,
}

fn store_err(e: StoreError) -> A2aError {
    tracing::warn!(error = %e, "state store failed");
    A2aError::with_message(ErrorCode::STORE_UNAVAILABLE, format!("{e}; retry later"))
}

fn random_token(prefix: &str) -> Result<String, A2aError> {
    const ALPHABET: &[u8; 32] = b"abcdefghijklmnopqrstuvwxyz234567";
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes)
        .map_err(|e| A2aError::with_message(ErrorCode::INTERNAL_ERROR, format!("no randomness: {e}")))?;
    let mut out = String::with_capacity(prefix.len() + 26);
    out.push_str(prefix);
    let mut acc: u32 = 0;
    let mut bits = 0;
    for b in bytes {
        acc = (acc << 8) | u32::from(b);
        bits += 8;
        while bits >= 5 {
            bits -= 5;
            out.push(char::from(ALPHABET[((acc >> bits) & 31) as usize]));
        }
    }
    if bits > 0 {
        out.push(char::from(ALPHABET[((acc << (5 - bits)) & 31) as usize]));
    }
    Ok(out)
}

fn system_time(ms: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_millis(ms)
}

impl Engine {
    pub(crate) fn new(
        did: String,
        caps: Vec<Capability>,
        store: Arc<dyn Store>,
        registry: Arc<dyn Registry>,
        audit: Arc<dyn crate::store::audit::AuditLog>,
        limits: Limits,
        metrics: Arc<Metrics>,
    ) -> Self {
        let caps: Vec<Arc<Capability>> = caps.into_iter().map(Arc::new).collect();
        let by_name = caps.iter().enumerate().map(|(i, c)| (c.decl.name.clone(), i)).collect();
        Engine {
            did,
            by_name,
            caps,
            store,
            registry,
            audit,
            schemas: moka::sync::Cache::builder()
                .max_capacity(limits.max_compiled_schemas)
                .time_to_idle(Duration::from_secs(600))
                .build(),
            agreements: moka::sync::Cache::builder().max_capacity(1024).time_to_idle(Duration::from_secs(600)).build(),
            body_budget: crate::body::BodyBudget::new(limits.max_buffered_body_bytes),
            permits: Arc::new(Semaphore::new(limits.max_concurrent_executions)),
            admission: Arc::new(Semaphore::new(limits.max_concurrent_executions)),
            admitted: Mutex::new(HashMap::new()),
            workers_stop: CancellationToken::new(),
            workers_started: std::sync::atomic::AtomicBool::new(false),
            limits,
            metrics,
            running: Mutex::new(HashMap::new()),
            draining: std::sync::atomic::AtomicBool::new(false),
            shutdown: CancellationToken::new(),
            tasks: tokio_util::task::TaskTracker::new(),
            streaming: std::sync::OnceLock::new(),
        }
    }

    /// Streaming results (§18), when the agent streams.
    pub fn streaming(&self) -> Option<&Arc<crate::streaming::Streaming>> {
        self.streaming.get()
    }

    /// Turns streaming on (once, when the agent is built).
    pub(crate) fn set_streaming(&self, s: Arc<crate::streaming::Streaming>) {
        let _ = self.streaming.set(s);
    }

    /// The audit log (one record per request).
    pub fn audit(&self) -> &Arc<dyn crate::store::audit::AuditLog> {
        &self.audit
    }

    /// The state store.
    pub fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    /// The limits the engine enforces.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// The capability registry (other agents' capabilities, and this agent's own announced in it).
    pub fn registry(&self) -> &Arc<dyn Registry> {
        &self.registry
    }

    /// The agent's metrics (what `/metrics` encodes).
    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }

    /// The capabilities, in declaration order.
    pub fn capabilities(&self) -> &[Arc<Capability>] {
        &self.caps
    }

    /// The capability with this name.
    pub fn capability(&self, name: &str) -> Option<&Arc<Capability>> {
        self.by_name.get(name).and_then(|i| self.caps.get(*i))
    }

    /// The capability or the `no_matching_capability` error with fallback options.
    pub async fn require_capability(&self, name: &str) -> Result<Arc<Capability>, A2aError> {
        match self.capability(name) {
            Some(c) => Ok(c.clone()),
            None => {
                let options = self.fallback_options(name).await;
                self.metrics.fallback_offered("no_matching_capability");
                Err(A2aError::with_message(
                    ErrorCode::NO_MATCHING_CAPABILITY,
                    format!(
                        "this agent does not offer `{name}`; it offers {}; see fallback_options for alternatives",
                        self.caps.iter().map(|c| format!("`{}`", c.decl.name)).collect::<Vec<_>>().join(", ")
                    ),
                )
                .details(json!({"capability": name}))
                .fallback(options))
            }
        }
    }

    /// Checks the capability's region restriction against the caller's `A2A-Region`.
    pub async fn check_region(&self, cap: &Capability, caller: &Caller) -> Result<(), A2aError> {
        let allowed = &cap.decl.region_restriction;
        if allowed.is_empty() || caller.region.as_ref().is_some_and(|r| allowed.contains(r)) {
            return Ok(());
        }
        let options = self.fallback_options(&cap.decl.name).await;
        self.metrics.fallback_offered("region_restricted");
        Err(A2aError::with_message(
            ErrorCode::REGION_RESTRICTED,
            format!(
                "`{}` is available only in {}; send `A2A-Region` with one of them{}",
                cap.decl.name,
                allowed.join(", "),
                caller.region.as_ref().map(|r| format!(" (the request said {r:?})")).unwrap_or_default()
            ),
        )
        .details(json!({"allowed_regions": allowed}))
        .fallback(options))
    }

    /// NEGOTIATE (§6), after the router has authenticated the caller for `cap`.
    pub async fn negotiate(
        &self,
        caller: &Caller,
        cap: &Capability,
        req: NegotiateRequest,
    ) -> Result<NegotiateResponse, A2aError> {
        self.check_region(cap, caller).await?;
        // NEG-2: an integer from 1 to 2^53 - 1 (the integers every JSON peer reads exactly).
        if req.timeout_ms.is_some_and(|t| t > (1u64 << 53) - 1) {
            return Err(A2aError::with_message(
                ErrorCode::INVALID_REQUEST,
                "timeout_ms must be at most 2^53 - 1 (9007199254740991) milliseconds",
            )
            .details(json!({"member": "timeout_ms"})));
        }
        let timeout_ms = req.timeout_ms.unwrap_or(self.limits.default_timeout_ms).min(self.limits.max_timeout_ms);
        if timeout_ms == 0 {
            return Err(A2aError::with_message(ErrorCode::INVALID_REQUEST, "timeout_ms must be at least 1")
                .details(json!({"member": "timeout_ms"})));
        }
        let agreed = self.agree(cap, &req.proposed_schema, req.strict).await?;
        if let Some(composite) = &cap.composite {
            // CMP-8: the pipeline must chain from the agreed schema, remote steps included.
            composite.check(&agreed.schema).await?;
        }
        let now = now_ms();
        let rec = NegotiationRecord {
            id: random_token("n_")?,
            sender: caller.sender.clone(),
            capability: cap.decl.name.clone(),
            agreed_schema: agreed.schema.clone(),
            schema_digest: Some(agreed.digest.clone()),
            timeout_ms,
            confirm_window_ms: self.limits.confirm_window_ms,
            created_at_ms: now,
            expires_at_ms: now.saturating_add(self.limits.negotiation_ttl_ms),
        };
        // One compiled copy per agreed schema, not per negotiation (LIM-6).
        if !self.schemas.contains_key(&agreed.digest) {
            self.schemas.insert(agreed.digest.clone(), agreed.compiled.clone());
        }
        let resp = NegotiateResponse {
            negotiation_id: rec.id.clone(),
            target_capability: rec.capability.clone(),
            agreed_schema: (*rec.agreed_schema).clone(),
            tightened: !agreed.changes.is_empty(),
            changes: agreed.changes.clone(),
            timeout_ms,
            confirm_window_ms: rec.confirm_window_ms,
            auth_requirement: cap.decl.auth_requirement,
            expires_at: timestamp(rec.expires_at_ms),
            bridge_to: None,
        };
        match self.store.admit_negotiation(rec).await.map_err(store_err)? {
            Admitted::Stored => {}
            Admitted::Replaced => self.metrics.quota("max_negotiations_per_sender", true),
            Admitted::Refused(q) => {
                self.metrics.quota(q.quota, false);
                return Err(quota_error(&q, "the negotiation was not stored"));
            }
        }
        Ok(resp)
    }

    /// The schema work of NEGOTIATE (§6.2, §6.3): rules, tightening, strictness, compilation. Successful outcomes are
    /// memoised per (capability, strict, canonical proposal), so that the same proposal from many callers is checked,
    /// tightened and compiled once.
    async fn agree(&self, cap: &Capability, proposed: &Value, strict: bool) -> Result<Arc<Agreed>, A2aError> {
        let mut h = Sha256::new();
        h.update(a2a_core::canonical::to_canonical_vec(proposed));
        let key = format!("{}|{strict}|{}", cap.decl.name, hex(&h.finalize()));
        if let Some(a) = self.agreements.get(&key) {
            return Ok(a);
        }
        let violations = schema_rules::check(proposed);
        if !violations.is_empty() {
            self.metrics.negotiation_failed("schema_rule_violation");
            let summary: Vec<String> =
                violations.iter().take(3).map(|v| format!("{} at {}", v.message, v.path)).collect();
            return Err(A2aError::with_message(
                ErrorCode::SCHEMA_RULE_VIOLATION,
                format!(
                    "the proposed schema breaks {} schema rule(s): {}{}",
                    violations.len(),
                    summary.join("; "),
                    if violations.len() > 3 { "; ..." } else { "" }
                ),
            )
            .details(json!({ "violations": violations })));
        }
        let agreement = match negotiation::tighten(proposed, &cap.decl.input_schema) {
            Ok(a) => a,
            Err(conflicts) => {
                self.metrics.negotiation_failed("schema_incompatible");
                let options = self.fallback_options(&cap.decl.name).await;
                self.metrics.fallback_offered("schema_incompatible");
                let first = conflicts.first().map(|c| format!("{} at {}", c.message, c.path)).unwrap_or_default();
                return Err(A2aError::with_message(
                    ErrorCode::SCHEMA_INCOMPATIBLE,
                    format!("the proposal conflicts with what `{}` requires: {first}", cap.decl.name),
                )
                .details(json!({ "conflicts": conflicts, "capability_schema": cap.decl.input_schema }))
                .fallback(options));
            }
        };
        if strict && !agreement.changes.is_empty() {
            self.metrics.negotiation_failed("tightening_refused");
            return Err(A2aError::with_message(
                ErrorCode::TIGHTENING_REFUSED,
                format!(
                    "`{}` needs {} change(s) to the proposal but the request was strict; resend counter_proposal",
                    cap.decl.name,
                    agreement.changes.len()
                ),
            )
            .details(json!({ "counter_proposal": agreement.agreed_schema, "changes": agreement.changes })));
        }
        let compiled = AgreedSchema::compile(&agreement.agreed_schema).map_err(|e| {
            A2aError::with_message(ErrorCode::SCHEMA_RULE_VIOLATION, format!("the agreed schema does not compile: {e}"))
        })?;
        let agreed = Arc::new(Agreed {
            digest: schema_digest(&agreement.agreed_schema),
            schema: Arc::new(agreement.agreed_schema),
            changes: agreement.changes,
            compiled: Arc::new(compiled),
        });
        self.agreements.insert(key, agreed.clone());
        Ok(agreed)
    }

    /// Finds the caller's negotiation and its capability (EXE-1).
    pub async fn negotiation_for(
        &self,
        caller: &Caller,
        id: &str,
    ) -> Result<(NegotiationRecord, Arc<Capability>), A2aError> {
        let unknown = || unknown_negotiation(caller, id);
        let neg = self.store.get_negotiation(id).await.map_err(store_err)?.ok_or_else(unknown)?;
        if neg.sender != caller.sender {
            return Err(unknown());
        }
        let cap = self.require_capability(&neg.capability).await?;
        Ok((neg, cap))
    }

    fn agreed_schema(&self, neg: &NegotiationRecord) -> Result<Arc<AgreedSchema>, A2aError> {
        let digest = match &neg.schema_digest {
            Some(d) => std::borrow::Cow::Borrowed(d.as_str()),
            None => std::borrow::Cow::Owned(schema_digest(&neg.agreed_schema)),
        };
        if let Some(s) = self.schemas.get(digest.as_ref()) {
            return Ok(s);
        }
        let compiled = AgreedSchema::compile(&neg.agreed_schema).map_err(|e| {
            A2aError::with_message(ErrorCode::INTERNAL_ERROR, format!("stored schema does not compile: {e}"))
        })?;
        let compiled = Arc::new(compiled);
        self.schemas.insert(digest.into_owned(), compiled.clone());
        Ok(compiled)
    }

    /// EXECUTE (§7). Returns the response and whether a new execution was created (201) or an idempotent replay
    /// answered (200).
    pub async fn execute(
        &self,
        caller: &Caller,
        neg: &NegotiationRecord,
        cap: &Capability,
        idempotency_key: Option<&str>,
        payload: Value,
    ) -> Result<(ExecuteResponse, bool), A2aError> {
        self.check_region(cap, caller).await?;
        if !payload.is_object() {
            return Err(A2aError::with_message(ErrorCode::PAYLOAD_INVALID, "the payload must be a JSON object")
                .details(json!({"errors": [{"path": "", "message": "not an object"}]})));
        }
        let schema = self.agreed_schema(neg)?;
        if let Err(errors) = schema.validate(&payload) {
            let first = errors.first().map(|e| format!("{} at {:?}", e.message, e.path)).unwrap_or_default();
            return Err(A2aError::with_message(
                ErrorCode::PAYLOAD_INVALID,
                format!("the payload does not match the agreed schema ({} error(s)): {first}", errors.len()),
            )
            .details(json!({ "errors": errors })));
        }
        let sender =
            Did::parse(&caller.sender).map_err(|e| A2aError::with_message(ErrorCode::INVALID_SENDER, e.to_string()))?;
        let claim = idempotency_key.map(|key| {
            let mut h = Sha256::new();
            h.update(neg.id.as_bytes());
            h.update(b"\n");
            h.update(a2a_core::canonical::to_canonical_vec(&payload));
            IdempotencyClaim { sender: caller.sender.clone(), key: key.to_owned(), fingerprint: hex(&h.finalize()) }
        });
        // A sharded store keeps an execution and its idempotency claim in one shard: draw ids until one fits.
        let mut id = String::new();
        for _ in 0..4096 {
            id = ExecutionId::generate(&sender)
                .map_err(|e| A2aError::with_message(ErrorCode::INTERNAL_ERROR, e.to_string()))?
                .to_string();
            if self.store.id_fits(&id, claim.as_ref()) {
                break;
            }
        }
        let now = now_ms();
        let confirm_by = now.saturating_add(neg.confirm_window_ms);
        let rec = ExecutionRecord {
            id,
            negotiation_id: neg.id.clone(),
            sender: caller.sender.clone(),
            capability: cap.decl.name.clone(),
            payload,
            status: ExecutionStatus::Received,
            timeout_ms: neg.timeout_ms,
            created_at_ms: now,
            updated_at_ms: now,
            confirm_by_ms: confirm_by,
            deadline_ms: None,
            confirmed: false,
            attempts: 0,
            result: None,
            error: None,
            retain_until_ms: confirm_by.saturating_add(self.limits.result_retention_ms),
            idempotency_key: None,
            sender_verified: false,
            traceparent: None,
            rev: 0,
        };
        let response = |r: &ExecutionRecord| ExecuteResponse {
            execution_id: r.id.clone(),
            negotiation_id: r.negotiation_id.clone(),
            status: r.status,
            created_at: timestamp(r.created_at_ms),
            confirm_by: timestamp(r.confirm_by_ms),
        };
        match self.store.create_execution(rec.clone(), claim).await.map_err(store_err)? {
            Created::New => Ok((response(&rec), true)),
            Created::Existing(existing) => Ok((response(&existing), false)),
            Created::Conflict => Err(A2aError::with_message(
                ErrorCode::IDEMPOTENCY_CONFLICT,
                "this Idempotency-Key was already used with another negotiation or payload; use a new key for a new request",
            )),
            Created::Full => Err(A2aError::with_message(
                ErrorCode::OVERLOADED,
                "too many executions are waiting for CONFIRM; confirm or let them expire, then retry",
            )
            .details(json!({"retry_after_s": 1}))),
            Created::Refused(q) => {
                self.metrics.quota(q.quota, false);
                Err(quota_error(&q, "the execution was not created"))
            }
        }
    }

    /// Finds the caller's execution (CONF-4, RES-1), applying lazy expiry: an unconfirmed execution past its confirm
    /// window is canceled, a confirmed one past its deadline is timed out.
    pub async fn execution_for(&self, caller: &Caller, id: &str) -> Result<ExecutionRecord, A2aError> {
        self.find_execution(caller, id, Read::Current).await
    }

    /// [`Engine::execution_for`] for CONFIRM, which transitions the record at once: the store may answer from what
    /// this process created (see [`Store::get_execution_for_update`]).
    pub async fn execution_for_update(&self, caller: &Caller, id: &str) -> Result<ExecutionRecord, A2aError> {
        self.find_execution(caller, id, Read::ForUpdate).await
    }

    /// [`Engine::execution_for`] for a RESULT that long-polls ([`Engine::result`] with a non-zero wait, whose answer
    /// always comes from a read the wait makes or from a terminal record): the store may answer from what this
    /// process last wrote (see [`Store::get_execution_for_wait`]).
    pub async fn execution_for_wait(&self, caller: &Caller, id: &str) -> Result<ExecutionRecord, A2aError> {
        self.find_execution(caller, id, Read::ForWait).await
    }

    async fn find_execution(&self, caller: &Caller, id: &str, read: Read) -> Result<ExecutionRecord, A2aError> {
        let unknown = || unknown_execution(caller, id);
        let rec = match read {
            Read::Current => self.store.get_execution(id).await,
            Read::ForUpdate => self.store.get_execution_for_update(id).await,
            Read::ForWait => self.store.get_execution_for_wait(id).await,
        }
        .map_err(store_err)?
        .ok_or_else(unknown)?;
        if rec.sender != caller.sender {
            return Err(unknown());
        }
        self.expire_if_due(rec).await
    }

    pub(crate) async fn expire_if_due(&self, rec: ExecutionRecord) -> Result<ExecutionRecord, A2aError> {
        let now = now_ms();
        let due = match rec.status {
            ExecutionStatus::Received if now >= rec.confirm_by_ms => Some((
                ExecutionStatus::Canceled,
                ErrorCode::CONFIRM_WINDOW_ELAPSED,
                "the execution was not confirmed within its confirm window and never ran".to_owned(),
            )),
            ExecutionStatus::Accepted | ExecutionStatus::Running if rec.deadline_ms.is_some_and(|d| now >= d) => {
                Some((
                    ExecutionStatus::TimedOut,
                    ErrorCode::TIMED_OUT,
                    format!("the execution did not finish within its timeout of {} ms", rec.timeout_ms),
                ))
            }
            _ => None,
        };
        let Some((status, code, message)) = due else { return Ok(rec) };
        self.finish(&rec.id, Some(&rec), status, None, Some(ErrorObject { code, message, details: None }))
            .await
            .map(|o| o.0)
    }

    /// Writes a terminal state; returns the record as it ends up (the first terminal state wins) and whether this
    /// call wrote it.
    async fn finish(
        &self,
        id: &str,
        seen: Option<&ExecutionRecord>,
        status: ExecutionStatus,
        result: Option<Value>,
        error: Option<ErrorObject>,
    ) -> Result<(ExecutionRecord, bool), A2aError> {
        let t = Transition::Finish { now_ms: now_ms(), status, result, error };
        match self.store.transition(id, t, seen).await.map_err(store_err)? {
            TransitionOutcome::Applied(r) => {
                self.finished_here(&r);
                Ok((*r, true))
            }
            TransitionOutcome::Refused(r) => Ok((*r, false)),
            TransitionOutcome::NotFound => {
                Err(A2aError::with_message(ErrorCode::UNKNOWN_EXECUTION, format!("no execution {id:?}")))
            }
        }
    }

    fn lock_running(&self) -> std::sync::MutexGuard<'_, HashMap<String, CancellationToken>> {
        self.running.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn lock_admitted(&self) -> std::sync::MutexGuard<'_, HashMap<String, OwnedSemaphorePermit>> {
        self.admitted.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// CONFIRM (§8.2). Returns the response and whether this call accepted the execution (202) or it was already
    /// confirmed (200).
    ///
    /// The work is queued in the store (CONF-1) and run by a worker of any process serving the capability. CONF-5's
    /// limit counts the executions this process accepted and has not seen finish: a slot is held until the execution
    /// is seen terminal (written here, or signalled by the store when another process wrote it) or its deadline passes.
    pub async fn confirm(
        self: &Arc<Self>,
        caller: &Caller,
        rec: ExecutionRecord,
    ) -> Result<(ConfirmResponse, bool), A2aError> {
        let already = |r: &ExecutionRecord| {
            if r.confirmed {
                Ok((ConfirmResponse { execution_id: r.id.clone(), status: r.status, already_confirmed: true }, false))
            } else {
                Err(A2aError::with_message(
                    ErrorCode::INVALID_STATE,
                    format!(
                        "execution {} is {} and was never confirmed{}; EXECUTE again",
                        r.id,
                        r.status,
                        r.error.as_ref().map(|e| format!(" ({})", e.code)).unwrap_or_default()
                    ),
                )
                .details(json!({"status": r.status})))
            }
        };
        if rec.status != ExecutionStatus::Received {
            return already(&rec);
        }
        self.start_workers();
        if self.draining.load(std::sync::atomic::Ordering::Acquire) {
            return Err(A2aError::with_message(
                ErrorCode::OVERLOADED,
                "the agent is shutting down; retry on another instance",
            )
            .details(json!({"retry_after_s": 1})));
        }
        let Ok(permit) = self.admission.clone().try_acquire_owned() else {
            return Err(A2aError::with_message(
                ErrorCode::OVERLOADED,
                format!(
                    "the agent runs {} executions at once, its limit; CONFIRM again after Retry-After (before {})",
                    self.limits.max_concurrent_executions,
                    timestamp(rec.confirm_by_ms)
                ),
            )
            .details(json!({"retry_after_s": 1})));
        };
        let t = Transition::Accept {
            now_ms: now_ms(),
            sender_verified: caller.verified,
            traceparent: caller.traceparent.clone(),
        };
        // With a free worker slot here, the accept also claims the work for this process's workers (one round trip
        // and one wake-up fewer for a shared store); a store may hand over other queued work instead (the oldest).
        let slot = self.permits.clone().try_acquire_owned().ok();
        let (outcome, claimed) = match &slot {
            Some(_) => self.store.accept_and_claim(&rec.id, t, Some(&rec)).await,
            None => self.store.transition(&rec.id, t, Some(&rec)).await.map(|o| (o, None)),
        }
        .map_err(store_err)?;
        if let (Some(item), Some(slot)) = (claimed, slot) {
            self.spawn_run(item, slot);
        }
        match outcome {
            TransitionOutcome::Applied(r) => {
                self.admit(&r, permit);
                Ok((
                    ConfirmResponse {
                        execution_id: rec.id,
                        status: ExecutionStatus::Accepted,
                        already_confirmed: false,
                    },
                    true,
                ))
            }
            TransitionOutcome::Refused(r) => already(&r),
            TransitionOutcome::NotFound => {
                Err(A2aError::with_message(ErrorCode::UNKNOWN_EXECUTION, format!("no execution {:?}", rec.id)))
            }
        }
    }

    /// Holds an admission slot for an accepted execution until it is seen finishing or its deadline passes.
    fn admit(self: &Arc<Self>, rec: &ExecutionRecord, permit: OwnedSemaphorePermit) {
        self.lock_admitted().insert(rec.id.clone(), permit);
        let weak = Arc::downgrade(self);
        let id = rec.id.clone();
        let store = self.store.clone();
        let remaining = Duration::from_millis(rec.deadline_ms.unwrap_or(0).saturating_sub(now_ms()));
        // Released when the execution is seen terminal (wherever it ran: the store signals it) or at its deadline.
        tokio::spawn(async move {
            let _ = store.terminal_signal(&id, remaining).await;
            if let Some(engine) = weak.upgrade() {
                engine.lock_admitted().remove(&id);
            }
        });
    }

    /// Starts the worker loops (one per queue partition of the store), once: by the builder when it runs inside a
    /// Tokio runtime, else at the first CONFIRM.
    pub(crate) fn start_workers(self: &Arc<Self>) {
        if tokio::runtime::Handle::try_current().is_err()
            || self.workers_started.swap(true, std::sync::atomic::Ordering::AcqRel)
        {
            return;
        }
        let names: Vec<String> = self.caps.iter().map(|c| c.decl.name.clone()).collect();
        for partition in 0..self.store.queue_partitions().max(1) {
            let weak = Arc::downgrade(self);
            let store = self.store.clone();
            let permits = self.permits.clone();
            let stop = self.workers_stop.clone();
            let names = names.clone();
            let span = tracing::info_span!("worker", partition);
            tokio::spawn(
                async move { worker_loop(weak, store, permits, stop, names, partition).await }.instrument(span),
            );
        }
    }

    /// Runs one claimed item of work in its own task, holding a worker slot.
    fn spawn_run(self: &Arc<Self>, item: WorkItem, slot: OwnedSemaphorePermit) {
        let span = tracing::info_span!("execution", execution_id = %item.execution_id,
            capability = %item.capability, deliveries = item.deliveries);
        let e = self.clone();
        self.tasks.spawn(
            async move {
                let _slot = slot;
                e.metrics.in_flight(1);
                e.clone().run(item).await;
                e.metrics.in_flight(-1);
            }
            .instrument(span),
        );
    }

    /// Runs one claimed item of work to its end.
    async fn run(self: Arc<Self>, mut item: WorkItem) {
        let store = self.store.clone();
        let rec = match item.snapshot.take() {
            Some(r) => Some(r),
            None => match store.get_execution(&item.execution_id).await {
                Ok(r) => r,
                Err(e) => {
                    // The claim stays; the work is taken over after the visibility timeout.
                    tracing::warn!(error = %e, "could not read claimed work");
                    return;
                }
            },
        };
        let Some(rec) = rec else {
            // The execution expired: drop the work.
            let _ = store.complete_work(&item, None, None).await;
            return;
        };
        let Some(cap) = self.capability(&rec.capability).cloned() else {
            let error = ErrorObject {
                code: ErrorCode::HANDLER_FAILED,
                message: format!("capability `{}` is no longer served", rec.capability),
                details: None,
            };
            self.complete(&item, ExecutionStatus::Failed, None, Some(error), &rec, None).await;
            return;
        };
        let deadline_ms = rec.deadline_ms.unwrap_or_else(|| now_ms().saturating_add(rec.timeout_ms));
        if rec.status.is_terminal() {
            let _ = store.complete_work(&item, None, None).await;
            return;
        }
        if now_ms() >= deadline_ms {
            self.complete(&item, ExecutionStatus::TimedOut, None, Some(timed_out_error(rec.timeout_ms)), &rec, None)
                .await;
            return;
        }
        let rerun = item.deliveries > 1 || rec.status == ExecutionStatus::Running;
        if rerun {
            tracing::info!(attempt = rec.attempts + 1, "re-running an execution taken over from a lost worker");
        }
        let token = self.shutdown.child_token();
        self.lock_running().insert(rec.id.clone(), token.clone());
        // §18: the `running` status event, and where the handler emits progress.
        let events = match self.streaming.get() {
            Some(s) => {
                s.started(&rec).await;
                s.sink(&rec)
            }
            None => crate::streaming::EventSink::disabled(),
        };
        let ctx = ExecutionContext {
            events: events.clone(),
            sender: rec.sender.clone(),
            sender_verified: rec.sender_verified,
            capability: rec.capability.clone(),
            negotiation_id: rec.negotiation_id.clone(),
            execution_id: rec.id.clone(),
            deadline: system_time(deadline_ms),
            cancel: token.clone(),
            traceparent: rec.traceparent.clone(),
        };
        let remaining = Duration::from_millis(deadline_ms.saturating_sub(now_ms()));
        // A panic in the handler becomes a failure, not a lost execution.
        let handler = std::panic::AssertUnwindSafe(cap.handler.call(ctx, rec.payload.clone())).catch_unwind();
        tokio::pin!(handler);
        let sleep = tokio::time::sleep(remaining);
        tokio::pin!(sleep);
        // `running` is recorded once the handler has run for START_DELAY; a handler done before that records its
        // start and its end in one write (`Transition::Ran`).
        let start_at = tokio::time::sleep(START_DELAY);
        tokio::pin!(start_at);
        let mut rec = rec;
        let mut started = false;
        // Heartbeat: renew the claim well within the visibility timeout.
        let beat = (store.visibility_timeout() / 3).max(Duration::from_millis(10));
        let mut heartbeat = tokio::time::interval_at(tokio::time::Instant::now() + beat, beat);
        // Another process may cancel or time out the execution: its terminal signal stops the handler (CAN-1, ST-3).
        let id = rec.id.clone();
        let signal = store.terminal_signal(&id, remaining + Duration::from_secs(1));
        tokio::pin!(signal);
        let mut signal_done = false;
        let outcome = loop {
            tokio::select! {
                biased;
                joined = &mut handler => break Some(joined),
                () = &mut sleep => break None,
                () = token.cancelled() => {
                    // Canceled or timed out here (the terminal state is written: release the work), or shutting
                    // down (the claim stays; another worker takes it over after the visibility timeout).
                    self.lock_running().remove(&rec.id);
                    if !self.shutdown.is_cancelled() {
                        let _ = store.complete_work(&item, None, None).await;
                    }
                    return;
                }
                () = &mut start_at, if !started => {
                    started = true;
                    let t = Transition::Start { now_ms: now_ms(), rerun };
                    match store.transition(&rec.id, t, Some(&rec)).await {
                        Ok(TransitionOutcome::Applied(r)) => rec = *r,
                        Ok(other) => {
                            // Canceled or timed out meanwhile, or expired: stop the handler and drop the work; or
                            // started by another worker: stop the handler, the claim lapses.
                            token.cancel();
                            self.lock_running().remove(&rec.id);
                            if !matches!(&other, TransitionOutcome::Refused(r) if !r.status.is_terminal()) {
                                let _ = store.complete_work(&item, None, None).await;
                            }
                            return;
                        }
                        // The finish records the start too; the claim stays until then.
                        Err(e) => {
                            started = false;
                            start_at.as_mut().reset(tokio::time::Instant::now() + beat);
                            tracing::warn!(error = %e, "could not record the start of the execution");
                        }
                    }
                }
                _ = heartbeat.tick() => {
                    if let Err(e) = store.touch_work(std::slice::from_ref(&item)).await {
                        tracing::warn!(error = %e, "could not renew the claim on running work");
                    }
                }
                signaled = &mut signal, if !signal_done => {
                    signal_done = true;
                    if signaled {
                        token.cancel();
                        self.lock_running().remove(&rec.id);
                        let _ = store.complete_work(&item, None, None).await;
                        return;
                    }
                }
            }
        };
        events.close();
        let (status, result, error) = match outcome {
            None => {
                token.cancel();
                (ExecutionStatus::TimedOut, None, Some(timed_out_error(rec.timeout_ms)))
            }
            Some(Ok(Ok(value))) => match cap.output.as_ref().map(|s| s.validate(&value)) {
                Some(Err(errors)) => (
                    ExecutionStatus::Failed,
                    None,
                    Some(ErrorObject {
                        code: ErrorCode::OUTPUT_INVALID,
                        message: "the handler's result does not match the capability's output_schema".into(),
                        details: Some(json!({ "errors": errors })),
                    }),
                ),
                _ => (ExecutionStatus::Succeeded, Some(value), None),
            },
            Some(Ok(Err(e))) => (
                ExecutionStatus::Failed,
                None,
                Some(ErrorObject {
                    code: e.code.unwrap_or(ErrorCode::HANDLER_FAILED),
                    message: e.message,
                    details: e.details,
                }),
            ),
            Some(Err(panic)) => {
                let what = panic
                    .downcast_ref::<&str>()
                    .map(|s| (*s).to_owned())
                    .or_else(|| panic.downcast_ref::<String>().cloned())
                    .unwrap_or_default();
                tracing::error!(panic = %what, "the handler panicked");
                (
                    ExecutionStatus::Failed,
                    None,
                    Some(ErrorObject {
                        code: ErrorCode::HANDLER_FAILED,
                        message: "the handler crashed (panicked); the agent's logs have the details".into(),
                        details: None,
                    }),
                )
            }
        };
        let ran = (!started).then_some(rerun);
        self.complete(&item, status, result, error, &rec, ran).await;
        self.lock_running().remove(&rec.id);
    }

    /// Records a worker's outcome and releases its work in one step; `ran` (with whether it was a re-run) when the
    /// handler ran and its start is not recorded yet. A store that is down is retried (with backoff) until the
    /// visibility timeout; after that the claim lapses and another worker re-runs the execution.
    async fn complete(
        &self,
        item: &WorkItem,
        status: ExecutionStatus,
        result: Option<Value>,
        error: Option<ErrorObject>,
        seen: &ExecutionRecord,
        ran: Option<bool>,
    ) {
        let give_up = tokio::time::Instant::now() + self.store.visibility_timeout();
        let mut backoff = Duration::from_millis(50);
        loop {
            let (now_ms, result, error) = (now_ms(), result.clone(), error.clone());
            let t = match ran {
                Some(rerun) => Transition::Ran { now_ms, rerun, status, result, error },
                None => Transition::Finish { now_ms, status, result, error },
            };
            match self.store.complete_work(item, Some(t), Some(seen)).await {
                Ok(Some(TransitionOutcome::Applied(r))) => {
                    self.finished_here(&r);
                    return;
                }
                Ok(_) => return,
                Err(e) if tokio::time::Instant::now() + backoff < give_up => {
                    tracing::warn!(error = %e, "could not record the outcome; retrying");
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(Duration::from_secs(2));
                }
                Err(e) => {
                    tracing::error!(error = %e, "could not record the outcome; the execution will be re-run");
                    return;
                }
            }
        }
    }

    /// Book-keeping once this process wrote a terminal state: metrics, the admission slot, a local handler.
    fn finished_here(&self, r: &ExecutionRecord) {
        self.metrics.execution_finished(&r.capability, r.status);
        self.lock_admitted().remove(&r.id);
        if let Some(token) = self.lock_running().remove(&r.id) {
            token.cancel();
        }
        if let Some(s) = self.streaming.get() {
            s.finished(r);
        }
    }

    /// RESULT (§8.3), with long-poll: waits up to `wait` for a terminal state.
    pub async fn result(&self, rec: ExecutionRecord, wait: Duration) -> Result<ResultResponse, A2aError> {
        self.long_poll(rec, wait, true).await
    }

    /// [`Engine::result`] for a record read by [`Engine::execution_for_wait`], which may be stale: the answer is
    /// never that record itself but one [`Store::wait_change`] returned, or a fresh read when no wait happened (the
    /// wait was capped to zero, or the agent is shutting down).
    pub async fn result_for_wait(&self, rec: ExecutionRecord, wait: Duration) -> Result<ResultResponse, A2aError> {
        self.long_poll(rec, wait, false).await
    }

    async fn long_poll(&self, rec: ExecutionRecord, wait: Duration, exact: bool) -> Result<ResultResponse, A2aError> {
        let wait = wait.min(Duration::from_millis(self.limits.max_wait_ms));
        let until = now_ms().saturating_add(wait.as_millis() as u64);
        let mut rec = rec;
        // Whether `rec` is what the store holds (or held when it was read); a terminal record is final (ST-2).
        let mut exact = exact || rec.status.is_terminal();
        while !rec.status.is_terminal() {
            let now = now_ms();
            if now >= until || self.shutdown.is_cancelled() {
                break;
            }
            // Wake up at the latest when the execution's own deadline or confirm window falls due.
            let due = match rec.status {
                ExecutionStatus::Received => rec.confirm_by_ms,
                _ => rec.deadline_ms.unwrap_or(u64::MAX),
            };
            let slice = Duration::from_millis(until.min(due.saturating_add(1)).saturating_sub(now).max(1));
            let seen = rec.status;
            rec = match self.store.wait_change(&rec.id, seen, slice).await.map_err(store_err)? {
                Some(r) => self.expire_if_due(r).await?,
                None => break,
            };
            exact = true;
        }
        if !exact && let Some(r) = self.store.get_execution(&rec.id).await.map_err(store_err)? {
            rec = self.expire_if_due(r).await?;
        }
        Ok(result_response(&rec))
    }

    /// CANCEL (§8.4).
    pub async fn cancel(&self, rec: ExecutionRecord) -> Result<ResultResponse, A2aError> {
        if rec.status.is_terminal() {
            return Err(A2aError::with_message(
                ErrorCode::INVALID_STATE,
                format!("execution {} is already {}; there is nothing to cancel", rec.id, rec.status),
            )
            .details(json!({"status": rec.status})));
        }
        let error = ErrorObject {
            code: ErrorCode::CANCELED,
            message: "the execution was canceled by its sender".into(),
            details: None,
        };
        let (rec, wrote) = self.finish(&rec.id, Some(&rec), ExecutionStatus::Canceled, None, Some(error)).await?;
        if !wrote {
            return Err(A2aError::with_message(
                ErrorCode::INVALID_STATE,
                format!("execution {} became {} before it could be canceled", rec.id, rec.status),
            )
            .details(json!({"status": rec.status})));
        }
        Ok(result_response(&rec))
    }

    /// The fallback options for a capability (§11, FB-2).
    pub async fn fallback_options(&self, capability: &str) -> Vec<FallbackOption> {
        let local = |c: &Capability, relation| FallbackOption {
            capability: c.decl.name.clone(),
            agent: None,
            endpoint: None,
            estimated_cost: c.decl.estimated_cost,
            estimated_latency_ms: c.decl.estimated_latency_ms,
            auth_requirement: Some(c.decl.auth_requirement),
            description: Some(c.decl.description.clone()),
            relation: Some(relation),
            source: Some(FallbackSource::Local),
        };
        let registry = match self.registry.related(capability).await {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!(error = %e, "capability registry unavailable; offering local options only");
                Vec::new()
            }
        };
        let parents_subs: Vec<String> = registry
            .iter()
            .filter(|e| e.capability.name == capability)
            .flat_map(|e| e.capability.sub_capabilities.iter().cloned())
            .collect();
        let remote = |e: &crate::registry::RegistryEntry, relation| FallbackOption {
            capability: e.capability.name.clone(),
            agent: Some(e.agent.clone()),
            endpoint: e.endpoint.clone(),
            estimated_cost: e.capability.estimated_cost,
            estimated_latency_ms: e.capability.estimated_latency_ms,
            auth_requirement: Some(e.capability.auth_requirement),
            description: Some(e.capability.description.clone()),
            relation: Some(relation),
            source: Some(FallbackSource::Registry),
        };
        let not_me = |e: &&crate::registry::RegistryEntry| e.agent != self.did;
        let mut same: Vec<FallbackOption> = registry
            .iter()
            .filter(not_me)
            .filter(|e| e.capability.name == capability)
            .map(|e| remote(e, FallbackRelation::Same))
            .collect();
        let mut degraded_local: Vec<FallbackOption> = self
            .caps
            .iter()
            .filter(|c| c.decl.fallback_for.iter().any(|f| f == capability))
            .map(|c| local(c, FallbackRelation::Degraded))
            .collect();
        let mut degraded_remote: Vec<FallbackOption> = registry
            .iter()
            .filter(not_me)
            .filter(|e| e.capability.fallback_for.iter().any(|f| f == capability))
            .map(|e| remote(e, FallbackRelation::Degraded))
            .collect();
        let mut subs: Vec<FallbackOption> = self
            .caps
            .iter()
            .filter(|c| parents_subs.contains(&c.decl.name))
            .map(|c| local(c, FallbackRelation::SubCapability))
            .chain(
                registry
                    .iter()
                    .filter(not_me)
                    .filter(|e| parents_subs.contains(&e.capability.name))
                    .map(|e| remote(e, FallbackRelation::SubCapability)),
            )
            .collect();
        for group in [&mut same, &mut degraded_local, &mut degraded_remote, &mut subs] {
            group.sort_by(|a, b| {
                let cost = |o: &FallbackOption| o.estimated_cost.unwrap_or(f64::INFINITY);
                let lat = |o: &FallbackOption| o.estimated_latency_ms.unwrap_or(u64::MAX);
                cost(a).total_cmp(&cost(b)).then(lat(a).cmp(&lat(b)))
            });
        }
        let mut out = same;
        out.extend(degraded_local);
        out.extend(degraded_remote);
        out.extend(subs);
        out
    }

    /// Stops accepting work and waits up to `grace` for executions in flight to finish. Work still queued stays
    /// queued: with a shared store another process runs it.
    pub async fn drain(&self, grace: Duration) -> bool {
        self.draining.store(true, std::sync::atomic::Ordering::Release);
        // Let the worker loops take what this process already accepted before they stop.
        tokio::task::yield_now().await;
        self.workers_stop.cancel();
        self.tasks.close();
        let drained = tokio::time::timeout(grace, self.tasks.wait()).await.is_ok();
        if !drained {
            self.shutdown.cancel();
        }
        drained
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        self.workers_stop.cancel();
    }
}

fn timed_out_error(timeout_ms: u64) -> ErrorObject {
    ErrorObject {
        code: ErrorCode::TIMED_OUT,
        message: format!("the execution did not finish within its timeout of {timeout_ms} ms"),
        details: None,
    }
}

/// How long a handler runs before its worker records `running` (a handler done sooner records start and end in
/// one write, [`Transition::Ran`]).
const START_DELAY: Duration = Duration::from_millis(10);

/// Most items one worker loop claims at once.
const CLAIM_BATCH: usize = 32;

pub(crate) use crate::store::CLAIM_WAIT;

/// One worker loop: with free worker slots, claims work of one queue partition and runs each item in its own task.
/// Holds the engine only weakly, so that dropping the agent stops it.
async fn worker_loop(
    engine: std::sync::Weak<Engine>,
    store: Arc<dyn Store>,
    permits: Arc<Semaphore>,
    stop: CancellationToken,
    capabilities: Vec<String>,
    partition: usize,
) {
    let mut backoff = Duration::from_millis(100);
    let mut prepared = false;
    while !stop.is_cancelled() {
        if !prepared {
            match store.prepare_queue(&capabilities).await {
                Ok(()) => prepared = true,
                Err(e) => {
                    tracing::warn!(error = %e, "work queue unavailable; retrying");
                    tokio::select! { () = stop.cancelled() => return, () = tokio::time::sleep(backoff) => {} }
                    backoff = (backoff * 2).min(Duration::from_secs(5));
                    continue;
                }
            }
        }
        let first = tokio::select! {
            () = stop.cancelled() => return,
            p = permits.clone().acquire_owned() => match p { Ok(p) => p, Err(_) => return },
        };
        let mut slots = vec![first];
        while slots.len() < CLAIM_BATCH {
            match permits.clone().try_acquire_owned() {
                Ok(p) => slots.push(p),
                Err(_) => break,
            }
        }
        let claimed = tokio::select! {
            () = stop.cancelled() => return,
            r = store.claim_work(partition, slots.len(), CLAIM_WAIT) => r,
        };
        let items = match claimed {
            Ok(items) => {
                backoff = Duration::from_millis(100);
                items
            }
            Err(e) => {
                tracing::warn!(error = %e, "could not claim work; retrying");
                // A store that lost its queue (e.g. a restarted Redis) needs it prepared again.
                prepared = false;
                drop(slots);
                tokio::select! { () = stop.cancelled() => return, () = tokio::time::sleep(backoff) => {} }
                backoff = (backoff * 2).min(Duration::from_secs(5));
                continue;
            }
        };
        let Some(engine) = engine.upgrade() else { return };
        for item in items {
            let Some(slot) = slots.pop() else { break };
            engine.spawn_run(item, slot);
        }
    }
}

/// The RESULT view of a stored execution (ST-4: `result` only when succeeded, `error` only when failed).
pub fn result_response(r: &ExecutionRecord) -> ResultResponse {
    ResultResponse {
        execution_id: r.id.clone(),
        negotiation_id: r.negotiation_id.clone(),
        capability: r.capability.clone(),
        status: r.status,
        created_at: timestamp(r.created_at_ms),
        updated_at: timestamp(r.updated_at_ms),
        deadline: r.deadline_ms.map(timestamp),
        result: if r.status == ExecutionStatus::Succeeded { r.result.clone() } else { None },
        error: if matches!(r.status, ExecutionStatus::Failed | ExecutionStatus::TimedOut | ExecutionStatus::Canceled) {
            r.error.clone()
        } else {
            None
        },
    }
}

/// The answer to a step naming a negotiation `id` the caller cannot use: whether it does not exist, has expired, is
/// another sender's, or the request's credentials were refused (AUTH-10), the same answer.
pub(crate) fn unknown_negotiation(caller: &Caller, id: &str) -> A2aError {
    A2aError::with_message(
        ErrorCode::UNKNOWN_NEGOTIATION,
        format!("no negotiation {id:?} for sender {} (unknown, expired or not yours); NEGOTIATE again", caller.sender),
    )
}

/// [`unknown_negotiation`] for an execution `id`.
pub(crate) fn unknown_execution(caller: &Caller, id: &str) -> A2aError {
    A2aError::with_message(
        ErrorCode::UNKNOWN_EXECUTION,
        format!("no execution {id:?} for sender {} (unknown, expired or not yours)", caller.sender),
    )
}
