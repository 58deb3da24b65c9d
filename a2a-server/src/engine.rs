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
    Created, ExecutionRecord, IdempotencyClaim, NegotiationRecord, Store, StoreError, Transition, TransitionOutcome,
    now_ms, timestamp,
};

/// A capability as served: its declaration, its handler, and its compiled output schema.
pub struct Capability {
    /// The declaration.
    pub decl: CapabilityDeclaration,
    pub(crate) handler: BoxHandler,
    pub(crate) output: Option<AgreedSchema>,
}

/// The outcome of the schema work of NEGOTIATE for one proposal.
struct Agreed {
    schema: Value,
    changes: Vec<a2a_core::wire::SchemaChange>,
    compiled: Arc<AgreedSchema>,
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
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
}

/// The engine of one agent.
pub struct Engine {
    pub(crate) did: String,
    pub(crate) caps: Vec<Arc<Capability>>,
    by_name: HashMap<String, usize>,
    pub(crate) store: Arc<dyn Store>,
    pub(crate) registry: Arc<dyn Registry>,
    pub(crate) limits: Limits,
    pub(crate) metrics: Arc<Metrics>,
    schemas: moka::sync::Cache<String, Arc<AgreedSchema>>,
    agreements: moka::sync::Cache<String, Arc<Agreed>>,
    permits: Arc<Semaphore>,
    running: Mutex<HashMap<String, CancellationToken>>,
    /// Set when draining: CONFIRM refuses new work.
    draining: std::sync::atomic::AtomicBool,
    /// Fires when the grace period of a drain is over: handlers still running are told to stop.
    pub(crate) shutdown: CancellationToken,
    tasks: tokio_util::task::TaskTracker,
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
            schemas: moka::sync::Cache::builder()
                .max_capacity(limits.max_compiled_schemas)
                .time_to_idle(Duration::from_secs(600))
                .build(),
            agreements: moka::sync::Cache::builder().max_capacity(1024).time_to_idle(Duration::from_secs(600)).build(),
            permits: Arc::new(Semaphore::new(limits.max_concurrent_executions)),
            limits,
            metrics,
            running: Mutex::new(HashMap::new()),
            draining: std::sync::atomic::AtomicBool::new(false),
            shutdown: CancellationToken::new(),
            tasks: tokio_util::task::TaskTracker::new(),
        }
    }

    /// The limits the engine enforces.
    pub fn limits(&self) -> &Limits {
        &self.limits
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
        let now = now_ms();
        let rec = NegotiationRecord {
            id: random_token("n_")?,
            sender: caller.sender.clone(),
            capability: cap.decl.name.clone(),
            agreed_schema: agreed.schema.clone(),
            timeout_ms,
            confirm_window_ms: self.limits.confirm_window_ms,
            created_at_ms: now,
            expires_at_ms: now.saturating_add(self.limits.negotiation_ttl_ms),
        };
        self.schemas.insert(rec.id.clone(), agreed.compiled.clone());
        let resp = NegotiateResponse {
            negotiation_id: rec.id.clone(),
            target_capability: rec.capability.clone(),
            agreed_schema: rec.agreed_schema.clone(),
            tightened: !agreed.changes.is_empty(),
            changes: agreed.changes.clone(),
            timeout_ms,
            confirm_window_ms: rec.confirm_window_ms,
            auth_requirement: cap.decl.auth_requirement,
            expires_at: timestamp(rec.expires_at_ms),
        };
        self.store.put_negotiation(rec).await.map_err(store_err)?;
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
            schema: agreement.agreed_schema,
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
        let unknown = || {
            A2aError::with_message(
                ErrorCode::UNKNOWN_NEGOTIATION,
                format!(
                    "no negotiation {id:?} for sender {} (unknown, expired or not yours); NEGOTIATE again",
                    caller.sender
                ),
            )
        };
        let neg = self.store.get_negotiation(id).await.map_err(store_err)?.ok_or_else(unknown)?;
        if neg.sender != caller.sender {
            return Err(unknown());
        }
        let cap = self.require_capability(&neg.capability).await?;
        Ok((neg, cap))
    }

    fn agreed_schema(&self, neg: &NegotiationRecord) -> Result<Arc<AgreedSchema>, A2aError> {
        if let Some(s) = self.schemas.get(&neg.id) {
            return Ok(s);
        }
        let compiled = AgreedSchema::compile(&neg.agreed_schema).map_err(|e| {
            A2aError::with_message(ErrorCode::INTERNAL_ERROR, format!("stored schema does not compile: {e}"))
        })?;
        let compiled = Arc::new(compiled);
        self.schemas.insert(neg.id.clone(), compiled.clone());
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
        let id = ExecutionId::generate(&sender)
            .map_err(|e| A2aError::with_message(ErrorCode::INTERNAL_ERROR, e.to_string()))?
            .to_string();
        let now = now_ms();
        let confirm_by = now.saturating_add(neg.confirm_window_ms);
        let claim = idempotency_key.map(|key| {
            let mut h = Sha256::new();
            h.update(neg.id.as_bytes());
            h.update(b"\n");
            h.update(a2a_core::canonical::to_canonical_vec(&payload));
            IdempotencyClaim { sender: caller.sender.clone(), key: key.to_owned(), fingerprint: hex(&h.finalize()) }
        });
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
        }
    }

    /// Finds the caller's execution (CONF-4, RES-1), applying lazy expiry: an unconfirmed execution past its confirm
    /// window is canceled, a confirmed one past its deadline is timed out.
    pub async fn execution_for(&self, caller: &Caller, id: &str) -> Result<ExecutionRecord, A2aError> {
        let unknown = || {
            A2aError::with_message(
                ErrorCode::UNKNOWN_EXECUTION,
                format!("no execution {id:?} for sender {} (unknown, expired or not yours)", caller.sender),
            )
        };
        let rec = self.store.get_execution(id).await.map_err(store_err)?.ok_or_else(unknown)?;
        if rec.sender != caller.sender {
            return Err(unknown());
        }
        self.expire_if_due(rec).await
    }

    async fn expire_if_due(&self, rec: ExecutionRecord) -> Result<ExecutionRecord, A2aError> {
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
        self.finish(&rec.id, status, None, Some(ErrorObject { code, message, details: None })).await.map(|o| o.0)
    }

    /// Writes a terminal state; returns the record as it ends up (the first terminal state wins) and whether this
    /// call wrote it.
    async fn finish(
        &self,
        id: &str,
        status: ExecutionStatus,
        result: Option<Value>,
        error: Option<ErrorObject>,
    ) -> Result<(ExecutionRecord, bool), A2aError> {
        let t = Transition::Finish { now_ms: now_ms(), status, result, error };
        match self.store.transition(id, t).await.map_err(store_err)? {
            TransitionOutcome::Applied(r) => {
                self.metrics.execution_finished(&r.capability, r.status);
                if let Some(token) = self.lock_running().remove(id) {
                    token.cancel();
                }
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

    /// CONFIRM (§8.2). Returns the response and whether this call accepted the execution (202) or it was already
    /// confirmed (200).
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
        if self.draining.load(std::sync::atomic::Ordering::Acquire) {
            return Err(A2aError::with_message(
                ErrorCode::OVERLOADED,
                "the agent is shutting down; retry on another instance",
            )
            .details(json!({"retry_after_s": 1})));
        }
        let Ok(permit) = self.permits.clone().try_acquire_owned() else {
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
        match self.store.transition(&rec.id, Transition::Accept { now_ms: now_ms() }).await.map_err(store_err)? {
            TransitionOutcome::Applied(r) => {
                self.spawn_worker(*r, permit, caller);
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

    fn spawn_worker(self: &Arc<Self>, rec: ExecutionRecord, permit: OwnedSemaphorePermit, caller: &Caller) {
        let engine = self.clone();
        let span = tracing::info_span!("execution", execution_id = %rec.id, negotiation_id = %rec.negotiation_id,
            sender_id = %rec.sender, capability = %rec.capability);
        let verified = caller.verified;
        let traceparent = caller.traceparent.clone();
        self.tasks.spawn(
            async move {
                let _permit = permit;
                engine.metrics.in_flight(1);
                engine.clone().run(rec, verified, traceparent).await;
                engine.metrics.in_flight(-1);
            }
            .instrument(span),
        );
    }

    async fn run(self: Arc<Self>, rec: ExecutionRecord, verified: bool, traceparent: Option<String>) {
        let Some(cap) = self.capability(&rec.capability).cloned() else {
            let _ = self
                .finish(
                    &rec.id,
                    ExecutionStatus::Failed,
                    None,
                    Some(ErrorObject {
                        code: ErrorCode::HANDLER_FAILED,
                        message: format!("capability `{}` is no longer served", rec.capability),
                        details: None,
                    }),
                )
                .await;
            return;
        };
        let token = self.shutdown.child_token();
        self.lock_running().insert(rec.id.clone(), token.clone());
        let rec = match self.store.transition(&rec.id, Transition::Start { now_ms: now_ms() }).await {
            Ok(TransitionOutcome::Applied(r)) => *r,
            Ok(_) => {
                self.lock_running().remove(&rec.id);
                return;
            }
            Err(e) => {
                tracing::warn!(error = %e, "could not start the execution");
                self.lock_running().remove(&rec.id);
                return;
            }
        };
        let deadline_ms = rec.deadline_ms.unwrap_or_else(|| now_ms().saturating_add(rec.timeout_ms));
        let ctx = ExecutionContext {
            sender: rec.sender.clone(),
            sender_verified: verified,
            capability: rec.capability.clone(),
            negotiation_id: rec.negotiation_id.clone(),
            execution_id: rec.id.clone(),
            deadline: system_time(deadline_ms),
            cancel: token.clone(),
            traceparent,
        };
        let remaining = Duration::from_millis(deadline_ms.saturating_sub(now_ms()));
        // A panic in the handler becomes a failure, not a lost execution.
        let handler = std::panic::AssertUnwindSafe(cap.handler.call(ctx, rec.payload.clone())).catch_unwind();
        let outcome = tokio::select! {
            joined = handler => Some(joined),
            () = tokio::time::sleep(remaining) => None,
            () = token.cancelled() => {
                // Dropping the handler's future stops it. Canceled (CANCEL wrote the state) or shutting down (the state stays running; a restart or
                // another worker times it out).
                self.lock_running().remove(&rec.id);
                return;
            }
        };
        let (status, result, error) = match outcome {
            None => {
                token.cancel();
                (
                    ExecutionStatus::TimedOut,
                    None,
                    Some(ErrorObject {
                        code: ErrorCode::TIMED_OUT,
                        message: format!("the execution did not finish within its timeout of {} ms", rec.timeout_ms),
                        details: None,
                    }),
                )
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
                Some(ErrorObject { code: ErrorCode::HANDLER_FAILED, message: e.message, details: e.details }),
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
        if let Err(e) = self.finish(&rec.id, status, result, error).await {
            tracing::warn!(error = %e, "could not record the outcome");
        }
        self.lock_running().remove(&rec.id);
    }

    /// RESULT (§8.3), with long-poll: waits up to `wait` for a terminal state.
    pub async fn result(&self, rec: ExecutionRecord, wait: Duration) -> Result<ResultResponse, A2aError> {
        let wait = wait.min(Duration::from_millis(self.limits.max_wait_ms));
        let until = now_ms().saturating_add(wait.as_millis() as u64);
        let mut rec = rec;
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
        let (rec, wrote) = self.finish(&rec.id, ExecutionStatus::Canceled, None, Some(error)).await?;
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

    /// Stops accepting work and waits up to `grace` for executions in flight to finish.
    pub async fn drain(&self, grace: Duration) -> bool {
        self.draining.store(true, std::sync::atomic::Ordering::Release);
        self.tasks.close();
        let drained = tokio::time::timeout(grace, self.tasks.wait()).await.is_ok();
        if !drained {
            self.shutdown.cancel();
        }
        drained
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
