//! Running a composite (CMP-10 to CMP-16): one execution for the caller, one sub-execution per step.
//!
//! The composite's handler runs the pipeline in a task of its own, so that when the composite is canceled or times
//! out (the engine stops waiting for the handler) the step in progress is still told to stop: a local step through
//! its cancellation token, a remote step with CANCEL at its agent (CMP-14).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use a2a_core::capability::CapabilityDeclaration;
use a2a_core::error::{A2aError, ErrorCode, ErrorObject};
use a2a_core::negotiation::AgreedSchema;
use a2a_core::remote::{RemoteAgents, RemoteCall};
use a2a_core::wire::ExecutionStatus;
use futures_util::FutureExt;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::plan::{self, Location, PlannedStep, StepSchemas, Target};
use super::{Pipeline, StepReport, StepStatus};
use crate::handler::{BoxHandler, ExecutionContext, Handler, HandlerError, HandlerFuture};

/// One step to run, as handed to a [`StepRunner`].
#[derive(Debug, Clone)]
pub struct StepCall {
    /// The composite's execution (its sender, ids, trace).
    pub composite: ExecutionContext,
    /// The step's id.
    pub step_id: String,
    /// The capability, where, and how its input was built.
    pub target: Target,
    /// The step's input.
    pub input: Value,
    /// The step's time limit (the earlier of its own `timeout_ms` and the composite's deadline).
    pub deadline: Instant,
    /// The `timeout_ms` to ask for the sub-execution.
    pub timeout_ms: Option<u64>,
    /// A key unique to this step of this composite execution: a re-run uses the same (CMP-16).
    pub idempotency_key: String,
}

/// A step that succeeded.
#[derive(Debug, Clone, PartialEq)]
pub struct StepDone {
    /// Its output.
    pub output: Value,
    /// The sub-execution at a remote agent.
    pub execution_id: Option<String>,
}

/// A step that did not succeed.
#[derive(Debug, Clone, PartialEq)]
pub struct StepFault {
    /// `failed`, `timed_out` or `canceled`.
    pub status: StepStatus,
    /// Why.
    pub error: ErrorObject,
    /// The sub-execution at a remote agent, when one was created.
    pub execution_id: Option<String>,
}

impl StepFault {
    fn new(status: StepStatus, code: ErrorCode, message: impl Into<String>) -> Self {
        StepFault { status, error: ErrorObject { code, message: message.into(), details: None }, execution_id: None }
    }
}

/// Runs one step: stops at `call.deadline` (`timed_out`) or when `cancel` fires (`canceled`).
#[async_trait::async_trait]
pub trait StepRunner: Send + Sync + 'static {
    /// Runs the step to its end.
    async fn run(&self, call: StepCall, cancel: CancellationToken) -> Result<StepDone, StepFault>;
}

/// A capability of this agent, as a step runs it.
struct LocalCapability {
    handler: BoxHandler,
    input: AgreedSchema,
    output: Option<AgreedSchema>,
}

/// Runs steps with this agent's own handlers (CMP-10): the input is validated against the capability's input schema
/// and the output against its output schema, as the engine would.
pub struct LocalRunner {
    caps: HashMap<String, LocalCapability>,
}

impl LocalRunner {
    /// A runner over these capabilities and handlers (their schemas must compile).
    pub fn new(caps: &[(CapabilityDeclaration, BoxHandler)]) -> Result<LocalRunner, String> {
        let mut out = HashMap::new();
        for (decl, handler) in caps {
            let input = AgreedSchema::compile(&decl.input_schema)
                .map_err(|e| format!("capability {:?}: input_schema does not compile: {e}", decl.name))?;
            let output = match &decl.output_schema {
                None => None,
                Some(s) => Some(
                    AgreedSchema::compile(s)
                        .map_err(|e| format!("capability {:?}: output_schema does not compile: {e}", decl.name))?,
                ),
            };
            out.insert(decl.name.clone(), LocalCapability { handler: handler.clone(), input, output });
        }
        Ok(LocalRunner { caps: out })
    }
}

#[async_trait::async_trait]
impl StepRunner for LocalRunner {
    async fn run(&self, call: StepCall, cancel: CancellationToken) -> Result<StepDone, StepFault> {
        let Some(cap) = self.caps.get(&call.target.capability) else {
            return Err(StepFault::new(
                StepStatus::Failed,
                ErrorCode::NO_MATCHING_CAPABILITY,
                format!("this agent no longer offers `{}`", call.target.capability),
            ));
        };
        if let Err(errors) = cap.input.validate(&call.input) {
            let mut f = StepFault::new(
                StepStatus::Failed,
                ErrorCode::PAYLOAD_INVALID,
                format!("the input built for `{}` does not match its input schema", call.target.capability),
            );
            f.error.details = Some(json!({"errors": errors, "input": call.input}));
            return Err(f);
        }
        let token = cancel.child_token();
        let remaining = call.deadline.saturating_duration_since(Instant::now());
        let ctx = ExecutionContext {
            sender: call.composite.sender.clone(),
            sender_verified: call.composite.sender_verified,
            capability: call.target.capability.clone(),
            negotiation_id: call.composite.negotiation_id.clone(),
            execution_id: format!("{}.{}", call.composite.execution_id, call.step_id),
            deadline: std::time::SystemTime::now() + remaining,
            cancel: token.clone(),
            traceparent: call.composite.traceparent.clone(),
            // A local step's progress is the composite's progress (§18): it goes to the composite's stream.
            events: call.composite.events.clone(),
        };
        // The handler runs in a task of its own: when the step times out or is canceled it is told to stop (its
        // token) and finishes by itself, as the engine's handlers do.
        let handler = tokio::spawn(std::panic::AssertUnwindSafe(cap.handler.call(ctx, call.input)).catch_unwind());
        let outcome = tokio::select! {
            r = handler => r.unwrap_or_else(|e| Err(Box::new(e.to_string()))),
            () = tokio::time::sleep_until(call.deadline) => {
                token.cancel();
                return Err(StepFault::new(StepStatus::TimedOut, ErrorCode::TIMED_OUT,
                    format!("step `{}` did not finish within its time limit", call.step_id)));
            }
            () = cancel.cancelled() => {
                token.cancel();
                return Err(StepFault::new(StepStatus::Canceled, ErrorCode::CANCELED, "the composite was canceled"));
            }
        };
        match outcome {
            Ok(Ok(output)) => {
                if let Some(Err(errors)) = cap.output.as_ref().map(|s| s.validate(&output)) {
                    let mut f = StepFault::new(
                        StepStatus::Failed,
                        ErrorCode::OUTPUT_INVALID,
                        format!("the output of `{}` does not match its output schema", call.target.capability),
                    );
                    f.error.details = Some(json!({"errors": errors}));
                    return Err(f);
                }
                Ok(StepDone { output, execution_id: None })
            }
            Ok(Err(e)) => Err(StepFault {
                status: StepStatus::Failed,
                error: ErrorObject { code: ErrorCode::HANDLER_FAILED, message: e.message, details: e.details },
                execution_id: None,
            }),
            Err(_) => Err(StepFault::new(
                StepStatus::Failed,
                ErrorCode::HANDLER_FAILED,
                "the step's handler crashed (panicked); the agent's logs have the details",
            )),
        }
    }
}

/// Runs steps at other agents with the handshake (CMP-10): NEGOTIATE (kept while fresh), EXECUTE with the step's
/// idempotency key, CONFIRM, RESULT with long-poll, and CANCEL when the step is canceled or runs out of time. The
/// requests are made by this agent through its [`RemoteAgents`] (a client with its DID, signing with its key when it
/// has one: `a2a_client::RemoteClient`).
pub struct RemoteRunner {
    agents: Option<Arc<dyn RemoteAgents>>,
}

impl RemoteRunner {
    /// A runner that calls through `agents` (`None`: none was given, and a remote step fails saying so).
    pub fn new(agents: Option<Arc<dyn RemoteAgents>>) -> RemoteRunner {
        RemoteRunner { agents }
    }

    fn agents(&self) -> Result<&Arc<dyn RemoteAgents>, ErrorObject> {
        self.agents.as_ref().ok_or_else(|| ErrorObject {
            code: ErrorCode::AGENT_UNAVAILABLE,
            message: "this agent was built without a client for other agents (AgentBuilder::remote_agents)".into(),
            details: None,
        })
    }

    /// The declaration of `capability` at a remote agent, for the chain check of NEGOTIATE (CMP-8).
    pub async fn declaration(
        &self,
        endpoint: &str,
        did: Option<&str>,
        capability: &str,
    ) -> Result<Option<CapabilityDeclaration>, ErrorObject> {
        self.agents()?.declaration(endpoint, did, capability).await
    }
}

#[async_trait::async_trait]
impl StepRunner for RemoteRunner {
    async fn run(&self, call: StepCall, cancel: CancellationToken) -> Result<StepDone, StepFault> {
        let Location::Remote { endpoint, .. } = &call.target.location else {
            return Err(StepFault::new(StepStatus::Failed, ErrorCode::INTERNAL_ERROR, "not a remote step"));
        };
        let fault = |error: ErrorObject, execution_id: Option<String>| StepFault {
            status: StepStatus::Failed,
            error,
            execution_id,
        };
        let agents = self.agents().map_err(|e| fault(e, None))?;
        let handshake = async {
            let remote = RemoteCall {
                endpoint,
                capability: &call.target.capability,
                input: &call.input,
                timeout_ms: call.timeout_ms,
                idempotency_key: &call.idempotency_key,
            };
            // Nothing runs at the other agent before CONFIRM (EXE-5): stopping here needs no CANCEL there.
            agents.execute(remote).await.map_err(|e| fault(e, None))
        };
        let exe = tokio::select! {
            r = handshake => r?,
            () = tokio::time::sleep_until(call.deadline) => {
                return Err(StepFault::new(StepStatus::TimedOut, ErrorCode::TIMED_OUT,
                    format!("step `{}` did not finish within its time limit", call.step_id)));
            }
            () = cancel.cancelled() => {
                return Err(StepFault::new(StepStatus::Canceled, ErrorCode::CANCELED, "the composite was canceled"));
            }
        };
        let id = exe.id().to_owned();
        let wait = async {
            exe.confirm().await.map_err(|e| fault(e, Some(id.clone())))?;
            loop {
                let left = call.deadline.saturating_duration_since(Instant::now()).max(Duration::from_millis(1));
                let r = agents
                    .result(endpoint, &id, left.min(Duration::from_secs(10)))
                    .await
                    .map_err(|e| fault(e, Some(id.clone())))?;
                if r.status.is_terminal() {
                    return Ok(r);
                }
            }
        };
        let stopped = tokio::select! {
            r = wait => Ok(r?),
            () = tokio::time::sleep_until(call.deadline) => Err(StepFault::new(StepStatus::TimedOut, ErrorCode::TIMED_OUT,
                    format!("step `{}` did not finish within its time limit", call.step_id))),
            () = cancel.cancelled() => Err(StepFault::new(StepStatus::Canceled, ErrorCode::CANCELED, "the composite was canceled")),
        };
        let r = match stopped {
            Ok(r) => r,
            Err(mut f) => {
                // CMP-14: the sub-execution is canceled at its agent too (best effort: it may have just finished).
                if let Err(e) = agents.cancel(endpoint, &id).await {
                    tracing::debug!(error = %e.message, "could not cancel a remote step");
                }
                f.execution_id = Some(id);
                return Err(f);
            }
        };
        let error = || {
            r.error.clone().unwrap_or(ErrorObject {
                code: ErrorCode::HANDLER_FAILED,
                message: format!("the step ended {}", r.status),
                details: None,
            })
        };
        match r.status {
            ExecutionStatus::Succeeded => {
                Ok(StepDone { output: r.result.clone().unwrap_or(Value::Null), execution_id: Some(id) })
            }
            ExecutionStatus::TimedOut => {
                Err(StepFault { status: StepStatus::TimedOut, error: error(), execution_id: Some(id) })
            }
            ExecutionStatus::Canceled => {
                Err(StepFault { status: StepStatus::Canceled, error: error(), execution_id: Some(id) })
            }
            _ => Err(fault(error(), Some(id))),
        }
    }
}

/// The reports of the steps of one composite execution that succeeded, by step id.
type Journal = Arc<Mutex<HashMap<String, StepReport>>>;

/// A composite capability as served: its checked pipeline and the runners of its steps.
pub struct Composite {
    name: String,
    pipeline: Pipeline,
    steps: Vec<PlannedStep>,
    local_schemas: Vec<StepSchemas>,
    local: Arc<dyn StepRunner>,
    remote: Arc<RemoteRunner>,
    /// The steps that succeeded, per composite execution, so that a re-run does not run them again (CMP-16).
    journal: moka::sync::Cache<String, Journal>,
}

impl std::fmt::Debug for Composite {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Composite").field("name", &self.name).field("steps", &self.steps).finish_non_exhaustive()
    }
}

fn idempotency_key(execution_id: &str, step: &str, fallback: bool) -> String {
    let digest = a2a_core::jws::base64url_encode(Sha256::digest(execution_id.as_bytes()));
    format!("cmp.{}.{step}.{}", &digest[..22], if fallback { "f" } else { "p" })
}

impl Composite {
    /// A composite over checked steps.
    pub(crate) fn new(
        name: String,
        pipeline: Pipeline,
        steps: Vec<PlannedStep>,
        local_schemas: Vec<StepSchemas>,
        local: Arc<dyn StepRunner>,
        remote: Arc<RemoteRunner>,
        retention: Duration,
    ) -> Composite {
        Composite {
            name,
            pipeline,
            steps,
            local_schemas,
            local,
            remote,
            journal: moka::sync::Cache::builder().max_capacity(10_000).time_to_live(retention).build(),
        }
    }

    /// The pipeline as declared (published as the `composite` member, CMP-1).
    pub fn pipeline(&self) -> &Pipeline {
        &self.pipeline
    }

    /// NEGOTIATE's check of the pipeline (CMP-8): the remote steps' declarations are fetched (through the client's
    /// cache) and the whole chain is checked from the agreed input schema.
    pub async fn check(&self, agreed_schema: &Value) -> Result<(), A2aError> {
        let mut schemas = self.local_schemas.clone();
        for (i, step) in self.steps.iter().enumerate() {
            let targets = [(Some(&step.target), false), (step.fallback.as_ref(), true)];
            for (target, is_fallback) in targets {
                let Some(target) = target else { continue };
                let Location::Remote { endpoint, did } = &target.location else { continue };
                let unsatisfiable = |reason: String, code: ErrorCode| {
                    A2aError::with_message(
                        code,
                        format!("composite `{}` cannot run: step `{}` ({} at {endpoint}): {reason}", self.name, step.id, target.capability),
                    )
                    .details(json!({"step": step.id, "capability": target.capability, "agent": target.location.label(), "reason": reason}))
                };
                let decl = match self.remote.declaration(endpoint, did.as_deref(), &target.capability).await {
                    Ok(Some(d)) => d,
                    Ok(None) => {
                        return Err(unsatisfiable(
                            "the agent does not offer this capability".into(),
                            ErrorCode::COMPOSITE_UNSATISFIABLE,
                        ));
                    }
                    Err(e) => {
                        return Err(unsatisfiable(
                            format!("its declaration could not be read: {}", e.message),
                            ErrorCode::AGENT_UNAVAILABLE,
                        ));
                    }
                };
                let s = &mut schemas[i];
                if is_fallback {
                    s.fallback_input = Some(decl.input_schema);
                    s.fallback_output = decl.output_schema;
                } else {
                    s.input = Some(decl.input_schema);
                    s.output = decl.output_schema;
                }
            }
        }
        plan::check_chain(agreed_schema, &self.steps, &schemas).map_err(|e| {
            A2aError::with_message(
                ErrorCode::COMPOSITE_UNSATISFIABLE,
                format!("composite `{}` cannot run with this input: {e}", self.name),
            )
            .details(json!({"step": e.step, "capability": e.capability, "agent": e.agent, "member": e.member,
                            "source": e.taken_from, "reason": e.reason}))
        })
    }

    fn runner(&self, t: &Target) -> Arc<dyn StepRunner> {
        match t.location {
            Location::Local => self.local.clone(),
            Location::Remote { .. } => self.remote.clone(),
        }
    }

    async fn attempt(
        &self,
        ctx: &ExecutionContext,
        step: &PlannedStep,
        target: &Target,
        input: Value,
        fallback: bool,
    ) -> Result<StepDone, StepFault> {
        let composite_deadline = Instant::now() + ctx.remaining();
        let deadline = match step.timeout_ms {
            Some(t) => composite_deadline.min(Instant::now() + Duration::from_millis(t)),
            None => composite_deadline,
        };
        let call = StepCall {
            composite: ctx.clone(),
            step_id: step.id.clone(),
            target: target.clone(),
            input,
            deadline,
            timeout_ms: step.timeout_ms,
            idempotency_key: idempotency_key(&ctx.execution_id, &step.id, fallback),
        };
        self.runner(target).run(call, ctx.cancel.clone()).await
    }

    /// Runs the pipeline for one execution of the composite (CMP-10 to CMP-16).
    pub async fn run(&self, ctx: ExecutionContext, payload: Value) -> Result<Value, HandlerError> {
        let journal = self.journal.get_with(ctx.execution_id.clone(), || Arc::new(Mutex::new(HashMap::new())));
        let mut doc = json!({"input": payload, "steps": {}});
        let mut previous = doc["input"].clone();
        let mut reports: Vec<StepReport> = Vec::with_capacity(self.steps.len());
        for (i, step) in self.steps.iter().enumerate() {
            let done = journal.lock().map(|j| j.get(&step.id).cloned()).unwrap_or_default();
            if let Some(done) = done {
                // CMP-16: finished in an earlier run of this execution.
                let out = done.output.clone().unwrap_or(Value::Null);
                doc["steps"][&step.id] = out.clone();
                previous = out;
                reports.push(done);
                continue;
            }
            let started = Instant::now();
            let input = match &step.target.input {
                Some(m) => plan::apply_mapping(m, &doc),
                None => previous.clone(),
            };
            let mut report = StepReport {
                id: step.id.clone(),
                capability: step.target.capability.clone(),
                agent: step.target.location.label(),
                status: StepStatus::Succeeded,
                output: None,
                error: None,
                execution_id: None,
                fallback_used: false,
                primary_error: None,
                duration_ms: 0,
            };
            let mut outcome = self.attempt(&ctx, step, &step.target, input.clone(), false).await;
            if let (Err(fault), Some(fb)) = (&outcome, &step.fallback)
                && fault.status != StepStatus::Canceled
                && !ctx.cancel.is_cancelled()
            {
                // CMP-12: the step's fallback runs instead.
                report.fallback_used = true;
                report.primary_error = Some(fault.error.clone());
                report.capability = fb.capability.clone();
                report.agent = fb.location.label();
                let fb_input = match &fb.input {
                    Some(m) => plan::apply_mapping(m, &doc),
                    None => input,
                };
                outcome = self.attempt(&ctx, step, fb, fb_input, true).await;
            }
            report.duration_ms = started.elapsed().as_millis() as u64;
            match outcome {
                Ok(done) => {
                    report.output = Some(done.output.clone());
                    report.execution_id = done.execution_id;
                    if let Ok(mut j) = journal.lock() {
                        j.insert(step.id.clone(), report.clone());
                    }
                    doc["steps"][&step.id] = done.output.clone();
                    previous = done.output;
                    reports.push(report);
                }
                Err(fault) => {
                    report.status = fault.status;
                    report.error = Some(fault.error.clone());
                    report.execution_id = fault.execution_id;
                    reports.push(report);
                    for later in &self.steps[i + 1..] {
                        reports.push(StepReport {
                            id: later.id.clone(),
                            capability: later.target.capability.clone(),
                            agent: later.target.location.label(),
                            status: StepStatus::Skipped,
                            output: None,
                            error: None,
                            execution_id: None,
                            fallback_used: false,
                            primary_error: None,
                            duration_ms: 0,
                        });
                    }
                    // CMP-11: the composite fails at the first failed step, with what every step did.
                    let what = match fault.status {
                        StepStatus::TimedOut => "timed out",
                        StepStatus::Canceled => "was canceled",
                        _ => "failed",
                    };
                    return Err(HandlerError::new(format!(
                        "step `{}` ({}) {what}: {}",
                        step.id, step.target.capability, fault.error.message
                    ))
                    .with_code(ErrorCode::STEP_FAILED)
                    .with_details(json!({"failed_step": step.id, "steps": reports})));
                }
            }
        }
        let output = match &self.pipeline.output {
            Some(m) => plan::apply_mapping(m, &doc),
            None => previous,
        };
        Ok(json!({"output": output, "steps": reports}))
    }
}

/// The handler of a composite: runs the pipeline in a task of its own (see the module's documentation).
pub(crate) struct CompositeHandler(pub(crate) Arc<Composite>);

impl Handler for CompositeHandler {
    fn call(&self, ctx: ExecutionContext, payload: Value) -> HandlerFuture {
        let composite = self.0.clone();
        Box::pin(async move {
            tokio::spawn(async move { composite.run(ctx, payload).await })
                .await
                .unwrap_or_else(|e| Err(HandlerError::new(format!("the pipeline crashed: {e}"))))
        })
    }
}
