//! The whole handshake in one call, with caches, deadline, result waiting and fallback; and pre-warming.

use std::sync::Arc;
use std::time::{Duration, Instant};

use a2a_core::error::{ErrorCode, ErrorObject};
use a2a_core::execution_id::ExecutionId;
use a2a_core::wire::{ExecutionStatus, FallbackOption};
use serde_json::Value;

use crate::client::{Client, ExecuteOptions};
use crate::endpoint::Endpoint;
use crate::error::{ClientError, Step};
use crate::fallback::{FallbackPolicy, attempt_key, choose};
use crate::transport::Deadline;
use crate::types::{CallOutcome, CallTrace, Negotiation, Peer, Progress, ProgressFn};

/// Options of [`Client::call_with`].
#[derive(Clone, Default)]
#[non_exhaustive]
pub struct CallOptions {
    /// The overall deadline (default: [`crate::ClientConfig::call_deadline`], 60 s).
    pub deadline: Option<Duration>,
    /// The schema to propose (default: the capability's declared `input_schema`).
    pub proposed_schema: Option<Value>,
    /// The run time to ask for (`timeout_ms` of NEGOTIATE; default: the agent's).
    pub timeout_ms: Option<u64>,
    /// What to do when the agent cannot serve the capability (default: try other agents, never degrade).
    pub fallback: FallbackPolicy,
    /// The `Idempotency-Key` of EXECUTE (default: a fresh random one).
    pub idempotency_key: Option<String>,
    /// Called as the call progresses (steps, status while waiting, fallback).
    pub progress: Option<ProgressFn>,
    /// CANCEL the execution when the deadline passes while it runs (agents listing `cancel`). Default: leave it
    /// running; the error names it so that its result can be read later.
    pub cancel_on_deadline: bool,
}

impl std::fmt::Debug for CallOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CallOptions")
            .field("deadline", &self.deadline)
            .field("proposed_schema", &self.proposed_schema)
            .field("timeout_ms", &self.timeout_ms)
            .field("fallback", &self.fallback)
            .field("idempotency_key", &self.idempotency_key)
            .field("progress", &self.progress.is_some())
            .field("cancel_on_deadline", &self.cancel_on_deadline)
            .finish()
    }
}

impl CallOptions {
    /// Sets the overall deadline.
    #[must_use]
    pub fn deadline(mut self, d: Duration) -> Self {
        self.deadline = Some(d);
        self
    }

    /// Proposes this schema.
    #[must_use]
    pub fn proposed_schema(mut self, schema: Value) -> Self {
        self.proposed_schema = Some(schema);
        self
    }

    /// Asks for this run time.
    #[must_use]
    pub fn timeout_ms(mut self, ms: u64) -> Self {
        self.timeout_ms = Some(ms);
        self
    }

    /// Sets the fallback policy.
    #[must_use]
    pub fn fallback(mut self, policy: FallbackPolicy) -> Self {
        self.fallback = policy;
        self
    }

    /// Uses this idempotency key.
    #[must_use]
    pub fn idempotency_key(mut self, key: impl Into<String>) -> Self {
        self.idempotency_key = Some(key.into());
        self
    }

    /// Reports progress to `f`.
    #[must_use]
    pub fn on_progress(mut self, f: impl Fn(&Progress) + Send + Sync + 'static) -> Self {
        self.progress = Some(Arc::new(f));
        self
    }

    /// Cancels the execution when the deadline passes.
    #[must_use]
    pub fn cancel_on_deadline(mut self, yes: bool) -> Self {
        self.cancel_on_deadline = yes;
        self
    }
}

/// Adds the execution to a deadline error raised after EXECUTE.
fn with_execution(e: ClientError, id: &str, status: Option<ExecutionStatus>) -> ClientError {
    match e {
        ClientError::DeadlineExceeded { step, deadline, execution_id: None, .. } => {
            ClientError::DeadlineExceeded { step, deadline, execution_id: Some(id.to_owned()), last_status: status }
        }
        other => other,
    }
}

impl Client {
    /// The whole handshake with the default options: DISCOVER (cached 5 min), capabilities (cached), NEGOTIATE
    /// (agreed schema cached until it expires), EXECUTE (with an idempotency key), CONFIRM, RESULT (long-poll or
    /// backoff), within the default deadline; other agents are tried when this one cannot serve the capability.
    ///
    /// A failed, timed-out or canceled execution is [`ClientError::ExecutionFailed`].
    pub async fn call(&self, url: &str, capability: &str, payload: Value) -> Result<CallOutcome, ClientError> {
        self.call_with(url, capability, payload, &CallOptions::default()).await
    }

    /// [`Client::call`] with options.
    pub async fn call_with(
        &self,
        url: &str,
        capability: &str,
        payload: Value,
        opts: &CallOptions,
    ) -> Result<CallOutcome, ClientError> {
        let started = Instant::now();
        let first = Endpoint::parse(url)?;
        a2a_core::capability::validate_name(capability).map_err(|e| ClientError::invalid(e.to_string()))?;
        let deadline = Deadline::after(opts.deadline.unwrap_or(self.inner.config.call_deadline));
        let mut trace = CallTrace::default();
        let mut current = (first, capability.to_owned(), false, None::<FallbackOption>);
        let mut tried: Vec<String> = Vec::new();
        // Options offered along the way, newest last, with the agent that offered them.
        let mut offered: Vec<(Endpoint, Vec<FallbackOption>)> = Vec::new();
        let mut first_error: Option<ClientError> = None;
        loop {
            let (ep, cap, degraded, option) = current.clone();
            tried.push(attempt_key(&ep, &cap));
            trace.attempts.push(attempt_key(&ep, &cap));
            // The caller's proposal fits the capability it named; a degraded capability is proposed its own schema.
            let proposed = if cap == capability { opts.proposed_schema.clone() } else { None };
            match self.attempt(&ep, &cap, proposed, &payload, opts, deadline, &mut trace).await {
                Ok(mut outcome) => {
                    outcome.requested_capability = capability.to_owned();
                    outcome.degraded = degraded;
                    outcome.fallback = option;
                    trace.total = started.elapsed();
                    outcome.trace = trace;
                    return Ok(outcome);
                }
                Err(e) => {
                    let mismatch = e.is_capability_mismatch();
                    // An alternative that cannot be used (down, not an agent, another version): try the next one.
                    let unusable_alternative = tried.len() > 1
                        && (e.is_transient()
                            || matches!(e, ClientError::Protocol { .. } | ClientError::UnsupportedVersion { .. }));
                    if !mismatch && !unusable_alternative {
                        return Err(e);
                    }
                    tracing::debug!(endpoint = %ep, capability = %cap, error = %e, "trying a fallback option");
                    if mismatch {
                        offered.push((ep.clone(), e.fallback_options().to_vec()));
                    }
                    let reason = e.to_string();
                    first_error.get_or_insert(e);
                    if tried.len() >= opts.fallback.max_attempts.max(1) {
                        break;
                    }
                    let next = offered
                        .iter()
                        .rev()
                        .find_map(|(at, options)| choose(&opts.fallback, options, at, capability, &tried));
                    let Some(choice) = next else { break };
                    if let Some(p) = &opts.progress {
                        p(&Progress::Fallback {
                            capability: choice.capability.clone(),
                            endpoint: choice.endpoint.to_string(),
                            reason,
                        });
                    }
                    current = (choice.endpoint, choice.capability, choice.degraded, Some(choice.option));
                }
            }
        }
        let cause = first_error.unwrap_or_else(|| ClientError::invalid("no attempt was made"));
        let mut fallback_options: Vec<FallbackOption> = Vec::new();
        for o in offered.into_iter().flat_map(|(_, o)| o) {
            if !fallback_options.contains(&o) {
                fallback_options.push(o);
            }
        }
        Err(ClientError::NoMatchingCapability {
            capability: capability.to_owned(),
            cause: Box::new(cause),
            tried,
            fallback_options,
        })
    }

    #[allow(clippy::too_many_arguments)]
    async fn attempt(
        &self,
        ep: &Endpoint,
        capability: &str,
        proposed: Option<Value>,
        payload: &Value,
        opts: &CallOptions,
        deadline: Deadline,
        trace: &mut CallTrace,
    ) -> Result<CallOutcome, ClientError> {
        let progress = |step: Step| {
            if let Some(p) = &opts.progress {
                p(&Progress::Step { step, endpoint: ep.to_string() });
            }
        };
        // DISCOVER and the capabilities document, from the cache when fresh (CLI-1).
        progress(Step::Discover);
        let t = Instant::now();
        let before = self.cache_stats().discover_hits;
        let mut discovery = self.discover_at(ep, Some(deadline), false).await?;
        trace.discover_cached = self.cache_stats().discover_hits > before;
        if !discovery.offers(capability) && trace.discover_cached {
            // A cached answer may be stale (DISC-4): ask again before concluding.
            discovery = self.discover_at(ep, Some(deadline), true).await?;
            trace.discover_cached = false;
        }
        if !discovery.offers(capability) {
            trace.add(Step::Discover, t.elapsed());
            // CAP-16: never NEGOTIATE what the agent does not list; ask it what it offers instead (§11).
            let options = match self.fallback_at(ep, &discovery.agent, capability, None, Some(deadline)).await {
                Ok(f) => f.fallback_options,
                Err(e) => {
                    tracing::debug!(error = %e, "FALLBACK failed");
                    Vec::new()
                }
            };
            return Err(ClientError::CapabilityNotOffered {
                capability: capability.to_owned(),
                agent: ep.to_string(),
                offered: discovery.capabilities.clone(),
                fallback_options: options,
            });
        }
        let mut caps = self.capabilities_at(ep, &discovery, Some(deadline), false).await?;
        if caps.declaration(capability).is_none() {
            caps = self.capabilities_at(ep, &discovery, Some(deadline), true).await?;
        }
        trace.add(Step::Discover, t.elapsed());

        // NEGOTIATE, or the agreed schema cached for exactly this proposal (CLI-1, CLI-6).
        progress(Step::Negotiate);
        let t = Instant::now();
        let schema = self.schema_for(&caps, capability, proposed)?;
        let key = self.negotiation_key(ep, capability, &schema, opts.timeout_ms, false);
        let negotiate = || async {
            match self
                .negotiate_at(ep, &discovery, &caps, capability, &schema, opts.timeout_ms, false, Some(deadline))
                .await
            {
                Err(e) if e.agent_error().is_some_and(|a| a.code == ErrorCode::NO_MATCHING_CAPABILITY) => {
                    // DISC-4: what DISCOVER said is out of date.
                    self.invalidate(ep).await;
                    Err(e)
                }
                other => other,
            }
        };
        let mut negotiation: Arc<Negotiation> = match self.cached_negotiation(&key).await {
            Some(n) => {
                trace.negotiation_cached = true;
                n
            }
            None => negotiate().await?,
        };
        trace.add(Step::Negotiate, t.elapsed());

        // EXECUTE; a cached negotiation the agent no longer knows is negotiated again, once.
        progress(Step::Execute);
        let t = Instant::now();
        let exec_opts = ExecuteOptions { idempotency_key: opts.idempotency_key.clone() };
        let execution = match self.execute_at(&negotiation, &caps, payload, &exec_opts, Some(deadline)).await {
            Err(e)
                if trace.negotiation_cached
                    && e.agent_error().is_some_and(|a| a.code == ErrorCode::UNKNOWN_NEGOTIATION) =>
            {
                self.forget_negotiation(&key).await;
                trace.negotiation_cached = false;
                let t2 = Instant::now();
                negotiation = negotiate().await?;
                trace.add(Step::Negotiate, t2.elapsed());
                self.execute_at(&negotiation, &caps, payload, &exec_opts, Some(deadline)).await?
            }
            other => other?,
        };
        trace.add(Step::Execute, t.elapsed());
        let id_str = execution.id().to_owned();

        // CONFIRM: safe to repeat (CONF-2).
        progress(Step::Confirm);
        let t = Instant::now();
        let confirmed =
            self.confirm_at(&execution, Some(deadline)).await.map_err(|e| with_execution(e, &id_str, None))?;
        trace.add(Step::Confirm, t.elapsed());

        // RESULT: long-poll or backoff, until terminal or the deadline.
        progress(Step::Result);
        let t = Instant::now();
        let id = ExecutionId::parse(&id_str).map_err(|e| ClientError::Protocol {
            step: Step::Execute,
            url: ep.to_string(),
            reason: format!("EXECUTE answered an invalid execution_id {id_str:?}: {e}"),
        })?;
        let waited = self
            .wait_result(
                ep,
                &negotiation.agent,
                &caps,
                &id,
                Some(negotiation.response.auth_requirement),
                deadline,
                opts.progress.as_ref(),
                &mut trace.result_polls,
            )
            .await;
        trace.add(Step::Result, t.elapsed());
        let r = match waited {
            Ok(r) => r,
            Err(e @ ClientError::DeadlineExceeded { .. }) => {
                if opts.cancel_on_deadline && caps.has_feature("cancel") {
                    let c = self.clone();
                    let (url, id) = (ep.to_string(), id_str.clone());
                    // Best effort, bounded by the step timeout; the caller is not kept waiting.
                    tokio::spawn(async move {
                        if let Err(e) = c.cancel(&url, &id).await {
                            tracing::debug!(error = %e, "CANCEL after the deadline failed");
                        }
                    });
                }
                return Err(with_execution(e, &id_str, Some(confirmed.status)));
            }
            Err(e) => return Err(e),
        };
        match r.status {
            ExecutionStatus::Succeeded => Ok(CallOutcome {
                result: r.result.clone().unwrap_or(Value::Null),
                requested_capability: capability.to_owned(),
                capability: capability.to_owned(),
                endpoint: ep.clone(),
                agent: negotiation.agent.clone(),
                execution_id: id_str,
                negotiation_id: negotiation.id().to_owned(),
                tightened: negotiation.response.tightened,
                degraded: false,
                fallback: None,
                response: r,
                trace: CallTrace::default(),
            }),
            status => Err(ClientError::ExecutionFailed {
                execution_id: id_str,
                status,
                error: Box::new(r.error.clone().unwrap_or(ErrorObject {
                    code: ErrorCode::HANDLER_FAILED,
                    message: format!("the execution ended {status} without an error object"),
                    details: None,
                })),
            }),
        }
    }

    /// Pre-warms known peers (CLI-1): for each, DISCOVER, read the capabilities and NEGOTIATE, all
    /// concurrently, so that the first real [`Client::call`] of each finds its agreed schema in the cache. Returns,
    /// per peer in order, its negotiation or why it could not be made (a failure does not stop the others).
    pub async fn prewarm(&self, peers: &[Peer]) -> Vec<Result<Negotiation, ClientError>> {
        let tasks = peers.iter().map(|p| async move {
            let ep = Endpoint::parse(&p.url)?;
            let d = self.discover_at(&ep, None, false).await?;
            if !d.offers(&p.capability) {
                return Err(ClientError::CapabilityNotOffered {
                    capability: p.capability.clone(),
                    agent: ep.to_string(),
                    offered: d.capabilities.clone(),
                    fallback_options: Vec::new(),
                });
            }
            let caps = self.capabilities_at(&ep, &d, None, false).await?;
            let schema = self.schema_for(&caps, &p.capability, p.proposed_schema.clone())?;
            let key = self.negotiation_key(&ep, &p.capability, &schema, None, false);
            if let Some(n) = self.inner_negotiation(&key).await {
                return Ok((*n).clone());
            }
            let n = self.negotiate_at(&ep, &d, &caps, &p.capability, &schema, None, false, None).await?;
            Ok((*n).clone())
        });
        futures_util::future::join_all(tasks).await
    }
}
