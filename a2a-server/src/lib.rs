//! # a2a-server
//!
//! The agent side of the A2A semantic-handshake protocol 0.3 (`spec/PROTOCOL.md`): declare capabilities, implement
//! a handler per capability, and serve DISCOVER, NEGOTIATE, EXECUTE, CONFIRM, RESULT, CANCEL and FALLBACK as an axum
//! [`Router`](axum::Router) you can mount in your own application.
//!
//! ```no_run
//! use a2a_core::capability::{AuthRequirement, CapabilityDeclaration};
//! use a2a_server::{AgentBuilder, handler::ExecutionContext};
//! use serde_json::{json, Value};
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let summarize = CapabilityDeclaration {
//!     name: "generate_brief_summary".into(),
//!     description: "Summarise a text in at most 100 words.".into(),
//!     auth_requirement: AuthRequirement::None,
//!     sub_capabilities: vec![],
//!     region_restriction: vec![],
//!     input_schema: json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}),
//!     output_schema: None,
//!     estimated_cost: Some(0.02),
//!     estimated_latency_ms: Some(120),
//!     fallback_for: vec!["generate_summary".into()],
//! };
//! let agent = AgentBuilder::new("did:web:localhost%3A8080")
//!     .capability(summarize, |_ctx: ExecutionContext, payload: Value| async move {
//!         let text = payload["text"].as_str().unwrap_or_default();
//!         Ok(json!({"summary": text.split_whitespace().take(100).collect::<Vec<_>>().join(" ")}))
//!     })
//!     .build()?;
//! let app = axum::Router::new().merge(agent.router());
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:8080").await?;
//! axum::serve(listener, app).await?;
//! # Ok(()) }
//! ```
//!
//! ## Features
//!
//! - `sessions` (default): sessions and agent-to-agent conversations (§17) — the `sessions` module, its routes
//!   below `/a2a/sessions`, `/a2a/runs` and `/a2a/events`, `AgentBuilder::sessions` and `Agent::sessions`. Without it
//!   an agent serves the handshake alone, as one built without `AgentBuilder::sessions` does (no `sessions` in
//!   `features`; `404 not_found` below `/a2a/sessions`).
//! - `mimalloc` (default): `ShippedAllocator`, the allocator of the `a2a-server` binary and of the benches.

/// The global allocator the `a2a-server` binary installs, and the benches with it so that they measure what ships
/// (feature `mimalloc`, on by default). A library user chooses their own: nothing here installs it.
#[cfg(feature = "mimalloc")]
pub use a2a_runtime::ShippedAllocator;

pub mod a2a1x;
// The runtime the agent shares with the gateway, at the paths this crate has always had them.
use a2a_runtime::response_signing;
pub use a2a_runtime::{RESPONSE_SIGNATURE_LIFETIME_S, response_signature, response_signature_of};
pub use a2a_runtime::{
    allocator, body, head_guard, health, limits, registry, reload, serve, store, telemetry, trace_context,
};
pub mod auth;
pub mod compose;
pub mod engine;
pub mod handler;
pub mod metrics;
mod router;
#[cfg(feature = "sessions")]
pub mod sessions;
mod shares;
pub mod streaming;

use std::sync::Arc;
use std::time::Duration;

use a2a_core::capability::{self, CapabilityDeclaration};
use a2a_core::did::Did;
use a2a_core::negotiation::AgreedSchema;
use a2a_core::resolver::DidResolver;
use axum::http::HeaderValue;

pub use auth::{ApiKey, OAuth2};
pub use engine::Engine;
pub use limits::Limits;
pub use router::{CorsPolicy, parse_json, sender_id, sender_id_value};

use crate::engine::Capability;
use crate::handler::{BoxHandler, Handler};
use crate::metrics::Metrics;
use crate::registry::{MemoryRegistry, Registry};
use crate::store::{MemoryStore, Store};

/// Why an agent could not be built.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    /// The agent's DID is not a valid did:web DID.
    #[error("the agent's DID {did:?} is invalid: {reason}")]
    Did {
        /// The DID.
        did: String,
        /// Why.
        reason: String,
    },
    /// A capability declaration is invalid.
    #[error(transparent)]
    Capability(#[from] capability::CapabilityError),
    /// The streaming configuration is invalid.
    #[error("streaming: {reason}")]
    Streaming {
        /// Why.
        reason: String,
    },
    /// A composite capability's declaration is invalid (§19).
    #[error(transparent)]
    Composite(#[from] compose::DeclarationError),
    /// The sessions configuration is invalid.
    #[error("sessions: {reason}")]
    Sessions {
        /// Why.
        reason: String,
    },
    /// A declared output schema does not compile.
    #[error("capability {name:?}: output_schema does not compile: {reason}")]
    OutputSchema {
        /// The capability.
        name: String,
        /// Why.
        reason: String,
    },
}

/// Builds an [`Agent`].
#[must_use]
pub struct AgentBuilder {
    did: String,
    name: Option<String>,
    caps: Vec<(CapabilityDeclaration, BoxHandler)>,
    composites: Vec<(CapabilityDeclaration, compose::Pipeline)>,
    remote_agents: Option<RemoteAgentsSource>,
    store: Option<Arc<dyn Store>>,
    registry: Option<Arc<dyn Registry>>,
    audit: Option<Arc<dyn store::audit::AuditLog>>,
    limits: Limits,
    auth: auth::Auth,
    cors: CorsPolicy,
    response_signer: Option<response_signing::ResponseSigner>,
    streaming: Option<(streaming::StreamConfig, Option<Arc<dyn streaming::EventLog>>)>,
    #[cfg(feature = "sessions")]
    sessions: Option<SessionsSource>,
}

/// Makes the [`a2a_core::remote::RemoteAgents`] of an agent from its DID and its signing key (`key_id`, key), if
/// it has one; `Err` says why it cannot.
pub type RemoteAgentsFactory = Arc<
    dyn Fn(&str, Option<(&str, &a2a_core::keys::SigningKey)>) -> Result<Arc<dyn a2a_core::remote::RemoteAgents>, String>
        + Send
        + Sync,
>;

/// How composites reach other agents: given, or made when the agent is built.
enum RemoteAgentsSource {
    Given(Arc<dyn a2a_core::remote::RemoteAgents>),
    Make(RemoteAgentsFactory),
}

/// Where an agent's sessions come from: built with the agent, or already running (kept across a reload, OPS-4).
#[cfg(feature = "sessions")]
enum SessionsSource {
    Build(Box<sessions::SessionsBuilder>),
    Running(Arc<sessions::Sessions>),
}

/// Executions whose events the default in-memory event log keeps at most (the ones kept shortest go first).
pub const MEMORY_EVENT_LOGS: usize = 100_000;

impl AgentBuilder {
    /// An agent identified by this did:web DID.
    pub fn new(did: impl Into<String>) -> Self {
        AgentBuilder {
            did: did.into(),
            name: None,
            caps: Vec::new(),
            composites: Vec::new(),
            remote_agents: None,
            store: None,
            registry: None,
            audit: None,
            limits: Limits::default(),
            auth: auth::Auth::default(),
            cors: CorsPolicy::default(),
            response_signer: None,
            streaming: None,
            #[cfg(feature = "sessions")]
            sessions: None,
        }
    }

    /// Streams results (`spec/PROTOCOL.md` §18) with these limits: the agent lists `streaming` in `features`, and
    /// RESULT with `A2A-Stream: true` answers Server-Sent Events. Events are kept in memory unless
    /// [`AgentBuilder::event_log`] gives a shared log (e.g. [`streaming::RedisEventLog`] beside a Redis store).
    pub fn streaming(mut self, config: streaming::StreamConfig) -> Self {
        let log = self.streaming.take().and_then(|(_, l)| l);
        self.streaming = Some((config, log));
        self
    }

    /// The event log of streamed executions (turns streaming on with default limits if it is not on yet).
    pub fn event_log(mut self, log: Arc<dyn streaming::EventLog>) -> Self {
        let config = self.streaming.take().map(|(c, _)| c).unwrap_or_default();
        self.streaming = Some((config, Some(log)));
        self
    }

    /// Serves sessions and agent-to-agent conversations (§17) with these sessions and settings; `sessions` is then
    /// listed in `features`.
    #[cfg(feature = "sessions")]
    pub fn sessions(mut self, sessions: sessions::SessionsBuilder) -> Self {
        self.sessions = Some(SessionsSource::Build(Box::new(sessions)));
        self
    }

    /// Serves these sessions, already running (another agent's, [`Agent::sessions`]): a configuration reloaded in
    /// place keeps its sessions and their conversations (OPS-4); `sessions` is then listed in `features`.
    #[cfg(feature = "sessions")]
    pub fn running_sessions(mut self, sessions: Arc<sessions::Sessions>) -> Self {
        self.sessions = Some(SessionsSource::Running(sessions));
        self
    }

    /// A display name for the capabilities document.
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// Adds a capability and its handler.
    pub fn capability(mut self, decl: CapabilityDeclaration, handler: impl Handler) -> Self {
        self.caps.push((decl, handler::boxed(handler)));
        self
    }

    /// Adds a capability with an already boxed handler.
    pub fn capability_boxed(mut self, decl: CapabilityDeclaration, handler: BoxHandler) -> Self {
        self.caps.push((decl, handler));
        self
    }

    /// Adds a composite capability (§19): `decl` is its declaration (without `output_schema`: its result has the
    /// shape of CMP-11), `pipeline` its steps. Its steps are checked when the agent is built.
    pub fn composite(mut self, decl: CapabilityDeclaration, pipeline: compose::Pipeline) -> Self {
        self.composites.push((decl, pipeline));
        self
    }

    /// How composites' steps reach other agents (CMP-10), e.g. an `a2a_client::RemoteClient`. Without it a remote
    /// step fails `agent_unavailable`.
    pub fn remote_agents(mut self, agents: Arc<dyn a2a_core::remote::RemoteAgents>) -> Self {
        self.remote_agents = Some(RemoteAgentsSource::Given(agents));
        self
    }

    /// How composites' steps reach other agents, made when the agent is built from its DID and the key of
    /// [`AgentBuilder::sign_responses`] (`None`: unsigned), e.g. `a2a_client::RemoteClient::for_agent`.
    pub fn remote_agents_from(mut self, make: RemoteAgentsFactory) -> Self {
        self.remote_agents = Some(RemoteAgentsSource::Make(make));
        self
    }

    /// The state store (default: a new [`MemoryStore`]).
    pub fn store(mut self, store: Arc<dyn Store>) -> Self {
        self.store = Some(store);
        self
    }

    /// The capability registry used for fallback options (default: an empty in-memory one).
    pub fn registry(mut self, registry: Arc<dyn Registry>) -> Self {
        self.registry = Some(registry);
        self
    }

    /// The audit log, one record per request (default: the newest 10,000 in memory).
    pub fn audit(mut self, audit: Arc<dyn store::audit::AuditLog>) -> Self {
        self.audit = Some(audit);
        self
    }

    /// The limits.
    pub fn limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// Accepts an API key for `api_key` capabilities.
    pub fn api_key(mut self, key: ApiKey) -> Self {
        self.auth.api_keys.push(key);
        self
    }

    /// Checks `oauth2` bearer tokens with this issuer.
    pub fn oauth2(mut self, oauth2: OAuth2) -> Self {
        self.auth.oauth2 = Some(oauth2);
        self
    }

    /// Resolves senders' DIDs for `did_auth` with this resolver.
    pub fn resolver(mut self, resolver: Arc<dyn DidResolver>) -> Self {
        self.auth.resolver = Some(resolver);
        self
    }

    /// Domains whose agents are internal (AUTH-7); with `require_did_auth` set, every other caller must sign.
    pub fn internal_domains(mut self, domains: Vec<String>, require_did_auth: bool) -> Self {
        self.auth.internal_domains = domains;
        self.auth.require_did_auth_cross_domain = require_did_auth;
        self
    }

    /// Signs every response with this key (INT-10), published in the agent's DID document as `<did>#<key_id>`;
    /// callers verify the signatures with the document. Responses to a request without a valid `A2A-Sender-ID` are
    /// not signed (they have no audience).
    pub fn sign_responses(mut self, key_id: impl Into<String>, key: a2a_core::keys::SigningKey) -> Self {
        self.response_signer = Some(response_signing::ResponseSigner { key_id: key_id.into(), key });
        self
    }

    /// DIDs of gateways whose signed requests may name the original caller in `A2A-Forwarded-Sender` (GW-9): the
    /// agent then scopes negotiations and executions to that caller, as if it had called directly. A caller's own
    /// signature whose `aud` is one of these gateways (forwarded unchanged by a transparent gateway) is accepted
    /// too (GW-18).
    pub fn trusted_gateways(mut self, dids: Vec<String>) -> Self {
        self.auth.trusted_gateways = dids;
        self
    }

    /// Which browser origins may call (default: any).
    pub fn cors(mut self, cors: CorsPolicy) -> Self {
        self.cors = cors;
        self
    }

    /// Checks everything and builds the agent. Must be called inside a Tokio runtime.
    pub fn build(self) -> Result<Agent, BuildError> {
        Did::parse(&self.did).map_err(|e| BuildError::Did { did: self.did.clone(), reason: e.to_string() })?;
        if let Some(s) = &self.response_signer
            && !a2a_core::integrity::is_valid_key_id(&s.key_id)
        {
            return Err(BuildError::Did {
                did: self.did.clone(),
                reason: format!("the response signing key id {:?} is not 1-128 of A-Z a-z 0-9 . _ ~ -", s.key_id),
            });
        }
        let mut decls: Vec<CapabilityDeclaration> = self.caps.iter().map(|(d, _)| d.clone()).collect();
        decls.extend(self.composites.iter().map(|(d, _)| d.clone()));
        capability::validate_all(&decls)?;
        let composites = self.build_composites()?;
        let mut caps = Vec::with_capacity(self.caps.len() + composites.len());
        for (decl, handler) in self.caps {
            let output = match &decl.output_schema {
                None => None,
                Some(s) => Some(
                    AgreedSchema::compile(s)
                        .map_err(|e| BuildError::OutputSchema { name: decl.name.clone(), reason: e.to_string() })?,
                ),
            };
            caps.push(Capability { decl, handler, output, composite: None });
        }
        let has_composites = !composites.is_empty();
        for (decl, composite) in composites {
            let handler = Arc::new(compose::run::CompositeHandler(composite.clone()));
            caps.push(Capability { decl, handler, output: None, composite: Some(composite) });
        }
        let metrics = Arc::new(Metrics::new(decls.iter().map(|d| d.name.clone()).collect()));
        let store = self.store.unwrap_or_else(|| {
            let mut l = store::memory::MemoryLimits::default();
            l.max_negotiations = self.limits.max_negotiations;
            l.max_negotiations_per_sender = self.limits.max_negotiations_per_sender;
            l.max_received = self.limits.max_received_executions;
            l.max_received_per_sender = self.limits.max_received_per_sender;
            l.max_nonces = self.limits.max_nonces;
            l.max_nonces_per_sender = self.limits.max_nonces_per_sender;
            l.retention = Duration::from_millis(self.limits.result_retention_ms);
            Arc::new(MemoryStore::new(l))
        });
        let registry = self.registry.unwrap_or_else(|| Arc::new(MemoryRegistry::default()));
        let audit = self.audit.unwrap_or_else(|| Arc::new(store::audit::MemoryAudit::new(10_000)));
        let engine = Arc::new(Engine::new(self.did.clone(), caps, store, registry, audit, self.limits, metrics));
        let mut features = vec!["long_poll", "cancel", "idempotency"];
        if let Some((config, log)) = self.streaming {
            config.validate().map_err(|reason| BuildError::Streaming { reason })?;
            let limits = streaming::EventLimits { max_events: config.max_events, max_bytes: config.max_bytes };
            let log = log.unwrap_or_else(|| Arc::new(streaming::MemoryEventLog::new(limits, MEMORY_EVENT_LOGS)));
            engine.set_streaming(Arc::new(streaming::Streaming::new(config, log)));
            features.push(streaming::FEATURE);
        }
        engine.start_workers();
        let mut auth = self.auth;
        auth.did = self.did.clone();
        if has_composites {
            features.push("composite");
        }
        #[cfg(feature = "sessions")]
        let sessions = match self.sessions {
            None => None,
            Some(SessionsSource::Build(b)) => {
                let signer = self.response_signer.as_ref().map(|s| (s.key_id.clone(), s.key.clone()));
                Some((*b).build(&self.did, signer).map_err(|reason| BuildError::Sessions { reason })?)
            }
            Some(SessionsSource::Running(s)) => Some(s),
        };
        #[cfg(feature = "sessions")]
        if sessions.is_some() {
            features.push("sessions");
        }
        let agent_name = self.name.clone();
        // SES-2: the one auth_requirement of the session endpoints is shown in the capabilities document.
        #[cfg(feature = "sessions")]
        let sessions_info =
            sessions.as_ref().map(|s| a2a_core::wire::SessionsInfo { auth_requirement: s.settings().auth_requirement });
        #[cfg(not(feature = "sessions"))]
        let sessions_info = None;
        let (discover_headers, capabilities_json) =
            router::discover_parts(&engine, self.name, &features, sessions_info);
        let sender_header = HeaderValue::from_str(&self.did)
            .map_err(|e| BuildError::Did { did: self.did.clone(), reason: e.to_string() })?;
        // LIM-14, LIM-15: each sender's share of the requests served at once.
        let shares = Arc::new(shares::Shares::new(
            engine.limits.max_in_progress_per_sender,
            engine.limits.max_queued_per_sender,
            Duration::from_millis(engine.limits.sender_queue_timeout_ms),
        ));
        let state = Arc::new(router::AppState {
            engine,
            auth,
            capabilities_json,
            discover_headers,
            cors: self.cors,
            sender_header,
            response_signer: self.response_signer,
            agent_name,
            bridge: std::sync::OnceLock::new(),
            #[cfg(feature = "sessions")]
            sessions,
            shares,
        });
        Ok(Agent { state })
    }
}

impl AgentBuilder {
    /// Checks the composites (CMP-2 to CMP-7) and builds their runners.
    fn build_composites(&self) -> Result<Vec<(CapabilityDeclaration, Arc<compose::Composite>)>, BuildError> {
        if self.composites.is_empty() {
            return Ok(Vec::new());
        }
        let bad = |capability: &str, path: &str, message: String| compose::DeclarationError {
            capability: capability.to_owned(),
            path: path.to_owned(),
            message,
        };
        let local = compose::LocalRunner::new(&self.caps).map_err(|m| bad("", "/input_schema", m))?;
        let local: Arc<dyn compose::StepRunner> = Arc::new(local);
        let agents = match &self.remote_agents {
            None => None,
            Some(RemoteAgentsSource::Given(a)) => Some(a.clone()),
            Some(RemoteAgentsSource::Make(make)) => {
                let key = self.response_signer.as_ref().map(|s| (s.key_id.as_str(), &s.key));
                Some(make(&self.did, key).map_err(|reason| BuildError::Did { did: self.did.clone(), reason })?)
            }
        };
        let remote = Arc::new(compose::RemoteRunner::new(agents));
        let info = |name: &str| {
            if let Some((d, _)) = self.caps.iter().find(|(d, _)| d.name == name) {
                return Some(compose::plan::LocalInfo {
                    input_schema: d.input_schema.clone(),
                    output_schema: d.output_schema.clone(),
                    auth: d.auth_requirement,
                    composite: false,
                });
            }
            self.composites.iter().find(|(d, _)| d.name == name).map(|(d, _)| compose::plan::LocalInfo {
                input_schema: d.input_schema.clone(),
                output_schema: None,
                auth: d.auth_requirement,
                composite: true,
            })
        };
        let mut out = Vec::with_capacity(self.composites.len());
        for (decl, pipeline) in &self.composites {
            if decl.output_schema.is_some() {
                return Err(bad(
                    &decl.name,
                    "/output_schema",
                    "a composite declares no output_schema: its result is {\"output\", \"steps\"} (CMP-11)".into(),
                )
                .into());
            }
            let steps = compose::plan::validate(decl, pipeline, &info)?;
            let schemas = compose::plan::known_schemas(&steps, &info);
            let composite = compose::Composite::new(
                decl.name.clone(),
                pipeline.clone(),
                steps,
                schemas,
                local.clone(),
                remote.clone(),
                Duration::from_millis(self.limits.result_retention_ms),
            );
            out.push((decl.clone(), Arc::new(composite)));
        }
        Ok(out)
    }
}

/// A built agent: mount [`Agent::router`] and serve it.
#[derive(Clone)]
pub struct Agent {
    state: Arc<router::AppState>,
}

impl Agent {
    /// The protocol's routes under `/a2a`. Nest it to serve below a prefix:
    /// `Router::new().nest("/agents/reports", agent.router())`.
    pub fn router(&self) -> axum::Router {
        router::build(self.state.clone())
    }

    /// `GET /metrics` in the Prometheus text format.
    pub fn metrics_router(&self) -> axum::Router {
        let engine = self.state.engine.clone();
        #[cfg(feature = "sessions")]
        let sessions = self.state.sessions.clone();
        axum::Router::new().route(
            "/metrics",
            axum::routing::get(move || {
                let engine = engine.clone();
                #[cfg(feature = "sessions")]
                if let Some(s) = &sessions {
                    engine.metrics.set_webhook_stats(&s.webhook_stats());
                }
                async move {
                    (
                        [(
                            axum::http::header::CONTENT_TYPE,
                            "application/openmetrics-text; version=1.0.0; charset=utf-8",
                        )],
                        engine.metrics.encode(),
                    )
                }
            }),
        )
    }

    /// The engine (protocol logic without HTTP).
    pub fn engine(&self) -> &Arc<Engine> {
        &self.state.engine
    }

    /// The composite capability with this name (§19), to run or inspect its pipeline.
    pub fn composite(&self, name: &str) -> Option<&Arc<compose::Composite>> {
        self.state.engine.capability(name).and_then(|c| c.composite.as_ref())
    }

    /// The sessions runtime, when sessions are enabled (§17).
    #[cfg(feature = "sessions")]
    pub fn sessions(&self) -> Option<&Arc<sessions::Sessions>> {
        self.state.sessions.as_ref()
    }

    /// The agent's DID.
    pub fn did(&self) -> &str {
        &self.state.engine.did
    }

    /// Stops confirming new work and waits up to `grace` for executions in flight; returns whether all finished.
    pub async fn drain(&self, grace: Duration) -> bool {
        self.state.engine.drain(grace).await
    }
}
