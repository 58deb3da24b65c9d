//! The client and its steps: DISCOVER, capabilities, NEGOTIATE, EXECUTE, CONFIRM, RESULT, CANCEL, FALLBACK.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime};

use a2a_core::capability::AuthRequirement;
use a2a_core::execution_id::ExecutionId;
use a2a_core::headers as h;
use a2a_core::resolver::{DidResolver, HttpResolver, ResolverOptions};
use a2a_core::wire::{
    CapabilitiesDocument, ConfirmResponse, ExecuteResponse, ExecutionRef, FallbackRequest, FallbackResponse,
    NegotiateRequest, NegotiateResponse, ResultResponse,
};
use reqwest::Method;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::config::{ClientConfig, SigningMode};
use crate::endpoint::Endpoint;
use crate::error::{ClientError, Step};
use crate::identity::Identity;
use crate::transport::{Deadline, Request};
use crate::types::{Capabilities, Discovery, Execution, Negotiation};

/// Credentials for the agents of one origin (`scheme://host:port`): sent only to that origin (§10).
#[derive(Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Credentials {
    /// `A2A-Api-Key`, for `api_key` capabilities.
    pub api_key: Option<String>,
    /// `Authorization: Bearer`, for `oauth2` capabilities.
    pub bearer_token: Option<String>,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials")
            .field("api_key", &self.api_key.as_ref().map(|_| "***"))
            .field("bearer_token", &self.bearer_token.as_ref().map(|_| "***"))
            .finish()
    }
}

/// Hit and miss counts of the client's caches.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// DISCOVER answers served from the cache.
    pub discover_hits: u64,
    /// DISCOVER requests sent.
    pub discover_misses: u64,
    /// Agreed schemas served from the cache.
    pub negotiation_hits: u64,
    /// Lookups by `call` that found no fresh agreed schema (and so negotiated).
    pub negotiation_misses: u64,
}

#[derive(Default)]
struct Counters {
    discover_hits: AtomicU64,
    discover_misses: AtomicU64,
    negotiation_hits: AtomicU64,
    negotiation_misses: AtomicU64,
}

struct NegotiationExpiry;

impl moka::Expiry<String, Arc<Negotiation>> for NegotiationExpiry {
    fn expire_after_create(&self, _key: &String, value: &Arc<Negotiation>, _created_at: Instant) -> Option<Duration> {
        Some(value.valid_for)
    }
}

/// The shared state behind a [`Client`].
pub(crate) struct Inner {
    pub(crate) http: reqwest::Client,
    pub(crate) identity: Identity,
    pub(crate) config: ClientConfig,
    pub(crate) credentials: HashMap<String, Credentials>,
    pub(crate) resolver: Arc<dyn DidResolver>,
    discoveries: moka::future::Cache<String, Arc<Discovery>>,
    capabilities: moka::future::Cache<String, Arc<Capabilities>>,
    negotiations: moka::future::Cache<String, Arc<Negotiation>>,
    counters: Counters,
}

/// The A2A client: an identity, an HTTP connection pool, caches (DISCOVER, capabilities, agreed schemas) and the
/// steps of the protocol. Cheap to clone; share one per service.
///
/// ```no_run
/// use a2a_client::{Client, Identity};
/// use serde_json::json;
///
/// # async fn run() -> Result<(), a2a_client::ClientError> {
/// let client = Client::builder(Identity::unsigned("did:web:caller.example.com")?).build()?;
/// let outcome = client
///     .call("https://agent.example.com/a2a", "submit_report", json!({"title": "Lift 3", "timestamp": "2026-11-29T21:00:00Z"}))
///     .await?;
/// println!("{}", outcome.result);
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Client {
    pub(crate) inner: Arc<Inner>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client").field("identity", &self.inner.identity).finish_non_exhaustive()
    }
}

/// Builds a [`Client`].
#[must_use]
pub struct ClientBuilder {
    identity: Identity,
    config: ClientConfig,
    credentials: HashMap<String, Credentials>,
    resolver: Option<Arc<dyn DidResolver>>,
}

impl ClientBuilder {
    /// The configuration (default: [`ClientConfig::default`]).
    pub fn config(mut self, config: ClientConfig) -> Self {
        self.config = config;
        self
    }

    /// Sends `A2A-Api-Key: key` to the agents at `url`'s origin.
    pub fn api_key(mut self, url: &str, key: impl Into<String>) -> Result<Self, ClientError> {
        let origin = Endpoint::parse(url)?.origin();
        self.credentials.entry(origin).or_default().api_key = Some(key.into());
        Ok(self)
    }

    /// Sends `Authorization: Bearer token` to the agents at `url`'s origin.
    pub fn bearer_token(mut self, url: &str, token: impl Into<String>) -> Result<Self, ClientError> {
        let origin = Endpoint::parse(url)?.origin();
        self.credentials.entry(origin).or_default().bearer_token = Some(token.into());
        Ok(self)
    }

    /// Verifies signed responses with this resolver instead of the did:web resolver over HTTPS.
    pub fn resolver(mut self, resolver: Arc<dyn DidResolver>) -> Self {
        self.resolver = Some(resolver);
        self
    }

    /// Builds the client.
    pub fn build(self) -> Result<Client, ClientError> {
        let c = &self.config;
        if !(1..=a2a_core::integrity::MAX_LIFETIME_SECS as u32).contains(&c.signature_lifetime_secs) {
            return Err(ClientError::invalid("signature_lifetime_secs must be 1-300"));
        }
        if let Some(r) = &c.region {
            h::parse_region(r).map_err(|e| ClientError::invalid(format!("region: {e}")))?;
        }
        let mut http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(c.connect_timeout)
            .pool_idle_timeout(Duration::from_secs(60))
            .user_agent(concat!("a2a-client/", env!("CARGO_PKG_VERSION")));
        for pem in &c.extra_roots_pem {
            let cert = reqwest::Certificate::from_pem(pem)
                .map_err(|e| ClientError::invalid(format!("a root certificate is not valid PEM: {e}")))?;
            http = http.tls_certs_merge([cert]);
        }
        let http = http.build().map_err(|e| ClientError::invalid(format!("cannot build the HTTP client: {e}")))?;
        let resolver: Arc<dyn DidResolver> = match self.resolver {
            Some(r) => r,
            None => {
                let mut o = ResolverOptions::default();
                o.allow_http_loopback = c.did_resolution.allow_http_loopback;
                o.allow_private_addresses = c.did_resolution.allow_private_addresses;
                o.extra_roots_pem = c.extra_roots_pem.clone();
                Arc::new(HttpResolver::new(o).map_err(|e| ClientError::invalid(e.message))?)
            }
        };
        let lru = moka::policy::EvictionPolicy::lru;
        let inner = Inner {
            http,
            identity: self.identity,
            credentials: self.credentials,
            resolver,
            discoveries: moka::future::Cache::builder()
                .max_capacity(c.discover_capacity)
                .time_to_live(c.discover_ttl)
                .eviction_policy(lru())
                .build(),
            capabilities: moka::future::Cache::builder()
                .max_capacity(c.discover_capacity)
                .time_to_live(c.discover_ttl)
                .eviction_policy(lru())
                .build(),
            negotiations: moka::future::Cache::builder()
                .max_capacity(c.negotiation_capacity)
                .expire_after(NegotiationExpiry)
                .eviction_policy(lru())
                .build(),
            counters: Counters::default(),
            config: self.config,
        };
        Ok(Client { inner: Arc::new(inner) })
    }
}

/// Options of EXECUTE.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ExecuteOptions {
    /// The `Idempotency-Key` (EXE-7); by default a fresh random one, so that a retried EXECUTE cannot create a
    /// second execution at an agent that lists `idempotency`.
    pub idempotency_key: Option<String>,
}

impl ExecuteOptions {
    /// Uses this idempotency key.
    #[must_use]
    pub fn idempotency_key(mut self, key: impl Into<String>) -> Self {
        self.idempotency_key = Some(key.into());
        self
    }
}

/// How long RESULT waits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wait {
    /// Answer at once with the current state.
    No,
    /// Until the execution is terminal or this much time has passed (long-poll when offered, else backoff).
    For(Duration),
}

/// A fresh random token of 128 bits, base64url (an idempotency key).
pub(crate) fn random_token() -> Result<String, ClientError> {
    let mut b = [0u8; 16];
    getrandom::fill(&mut b).map_err(|e| ClientError::invalid(format!("the random source failed: {e}")))?;
    Ok(a2a_core::jws::base64url_encode(b))
}

fn digest(v: &Value) -> String {
    a2a_core::jws::base64url_encode(Sha256::digest(a2a_core::canonical::to_canonical_vec(v)))
}

/// How long a negotiation may be used from now: until `expires_at` less a margin of a tenth of its lifetime (at most
/// 30 s), so that an EXECUTE never races the expiry; measured on our clock from the agent's `expires_at`.
fn negotiation_lifetime(resp: &NegotiateResponse) -> Duration {
    let Some(expires) = a2a_core::wire::parse_timestamp(&resp.expires_at) else { return Duration::ZERO };
    let left = expires.duration_since(SystemTime::now()).unwrap_or_default();
    left.saturating_sub((left / 10).min(Duration::from_secs(30)))
}

impl Client {
    /// A builder for a client with this identity.
    pub fn builder(identity: Identity) -> ClientBuilder {
        ClientBuilder { identity, config: ClientConfig::default(), credentials: HashMap::new(), resolver: None }
    }

    /// The client's identity.
    pub fn identity(&self) -> &Identity {
        &self.inner.identity
    }

    /// The configuration.
    pub fn config(&self) -> &ClientConfig {
        &self.inner.config
    }

    /// Hit and miss counts of the caches.
    pub fn cache_stats(&self) -> CacheStats {
        let c = &self.inner.counters;
        CacheStats {
            discover_hits: c.discover_hits.load(Ordering::Relaxed),
            discover_misses: c.discover_misses.load(Ordering::Relaxed),
            negotiation_hits: c.negotiation_hits.load(Ordering::Relaxed),
            negotiation_misses: c.negotiation_misses.load(Ordering::Relaxed),
        }
    }

    /// Forgets everything cached about an agent (DISCOVER, capabilities, agreed schemas).
    pub async fn forget(&self, url: &str) -> Result<(), ClientError> {
        let ep = Endpoint::parse(url)?;
        self.invalidate(&ep).await;
        Ok(())
    }

    pub(crate) async fn invalidate(&self, ep: &Endpoint) {
        self.inner.discoveries.invalidate(ep.as_str()).await;
        self.inner.capabilities.invalidate(ep.as_str()).await;
        let prefix = format!("{ep}\n");
        let _ = self.inner.negotiations.invalidate_entries_if(move |k, _| k.starts_with(&prefix));
    }

    pub(crate) fn request<'a>(
        &self,
        step: Step,
        ep: &'a Endpoint,
        method: Method,
        tail: impl Into<String>,
    ) -> Request<'a> {
        let mut r = Request::new(step, ep, method, tail);
        r.timeout = self.inner.config.step_timeout;
        r
    }

    /// Whether to sign a request about a capability with this requirement.
    pub(crate) fn should_sign(&self, auth: Option<AuthRequirement>) -> bool {
        if !self.inner.identity.can_sign() {
            return false;
        }
        match self.inner.config.signing {
            SigningMode::Never => false,
            SigningMode::Always => true,
            SigningMode::Auto => auth == Some(AuthRequirement::DidAuth),
        }
    }

    /// Sends a request; under [`SigningMode::Auto`], an unsigned request refused with `signature_required` or
    /// `did_auth_required` is sent once more, signed (the refusal changed nothing at the agent: EXE-2, AUTH-1).
    pub(crate) async fn send(
        &self,
        mut req: Request<'_>,
        deadline: Option<Deadline>,
    ) -> Result<crate::transport::Response, ClientError> {
        match self.inner.send(&req, deadline).await {
            Err(ClientError::Agent { error, .. })
                if !req.sign
                    && self.inner.identity.can_sign()
                    && self.inner.config.signing == SigningMode::Auto
                    && req.agent.is_some()
                    && (error.code == a2a_core::error::ErrorCode::SIGNATURE_REQUIRED
                        || error.code == a2a_core::error::ErrorCode::DID_AUTH_REQUIRED) =>
            {
                req.sign = true;
                self.inner.send(&req, deadline).await
            }
            other => other,
        }
    }

    // --- DISCOVER -----------------------------------------------------------------------------------------------

    /// DISCOVER (`OPTIONS /a2a`, §5.1): who the agent is and what it offers. Always asks the agent, and refreshes the
    /// cache.
    pub async fn discover(&self, url: &str) -> Result<Discovery, ClientError> {
        let ep = Endpoint::parse(url)?;
        Ok((*self.discover_at(&ep, None, true).await?).clone())
    }

    pub(crate) async fn discover_at(
        &self,
        ep: &Endpoint,
        deadline: Option<Deadline>,
        fresh: bool,
    ) -> Result<Arc<Discovery>, ClientError> {
        if !fresh && let Some(d) = self.inner.discoveries.get(ep.as_str()).await {
            self.inner.counters.discover_hits.fetch_add(1, Ordering::Relaxed);
            return Ok(d);
        }
        self.inner.counters.discover_misses.fetch_add(1, Ordering::Relaxed);
        let resp = self.send(self.request(Step::Discover, ep, Method::OPTIONS, ""), deadline).await?;
        let bad = |reason: String| ClientError::Protocol { step: Step::Discover, url: ep.to_string(), reason };
        if resp.status != 204 && resp.status != 200 {
            return Err(bad(format!("DISCOVER answered {} (expected 204)", resp.status)));
        }
        let agent = resp
            .header(h::A2A_SENDER_ID)
            .ok_or_else(|| bad("the answer has no A2A-Sender-ID header".into()))?
            .trim()
            .to_owned();
        a2a_core::did::Did::parse(&agent)
            .map_err(|e| bad(format!("its A2A-Sender-ID {agent:?} is not a did:web DID: {e}")))?;
        let capabilities = h::parse_capabilities(
            resp.header(h::A2A_CAPABILITIES).ok_or_else(|| bad("the answer has no A2A-Capabilities header".into()))?,
        )
        .map_err(|e| bad(e.to_string()))?;
        let regions = match resp.header(h::A2A_REGION) {
            None => BTreeMap::new(),
            Some(v) => h::parse_region_map(v).map_err(|e| bad(e.to_string()))?,
        };
        let d = Arc::new(Discovery {
            endpoint: ep.clone(),
            agent,
            version: resp.header(h::A2A_VERSION).unwrap_or_default().trim().to_owned(),
            capabilities,
            regions,
            fetched_at: SystemTime::now(),
        });
        self.inner.discoveries.insert(ep.as_str().to_owned(), d.clone()).await;
        Ok(d)
    }

    // --- capabilities -------------------------------------------------------------------------------------------

    /// `GET /a2a/capabilities` (§5.3): the full declarations, features and limits. Always asks the agent, and
    /// refreshes the cache.
    pub async fn capabilities(&self, url: &str) -> Result<Capabilities, ClientError> {
        let ep = Endpoint::parse(url)?;
        let d = self.discover_at(&ep, None, false).await?;
        Ok((*self.capabilities_at(&ep, &d, None, true).await?).clone())
    }

    pub(crate) async fn capabilities_at(
        &self,
        ep: &Endpoint,
        discovery: &Discovery,
        deadline: Option<Deadline>,
        fresh: bool,
    ) -> Result<Arc<Capabilities>, ClientError> {
        if !fresh && let Some(c) = self.inner.capabilities.get(ep.as_str()).await {
            return Ok(c);
        }
        let mut req = self.request(Step::Capabilities, ep, Method::GET, "/capabilities");
        req.agent = Some(discovery.agent.clone());
        let resp = self.send(req, deadline).await?;
        let document: CapabilitiesDocument = resp.json(Step::Capabilities)?;
        if document.agent.id != discovery.agent {
            return Err(ClientError::Protocol {
                step: Step::Capabilities,
                url: ep.to_string(),
                reason: format!(
                    "the capabilities document is of {}, but DISCOVER named {}",
                    document.agent.id, discovery.agent
                ),
            });
        }
        let c = Arc::new(Capabilities { endpoint: ep.clone(), document });
        self.inner.capabilities.insert(ep.as_str().to_owned(), c.clone()).await;
        Ok(c)
    }

    // --- NEGOTIATE ----------------------------------------------------------------------------------------------

    /// NEGOTIATE (`POST /a2a/negotiate`, §6): proposes `proposed_schema` for `capability` (by default its declared
    /// `input_schema`) and returns the agreed contract. Always asks the agent; the answer is cached for
    /// [`Client::call`].
    pub async fn negotiate(
        &self,
        url: &str,
        capability: &str,
        proposed_schema: Option<Value>,
    ) -> Result<Negotiation, ClientError> {
        self.negotiate_with(url, capability, proposed_schema, None, false).await
    }

    /// [`Client::negotiate`] with a requested `timeout_ms` and strictness (`strict`: accept unchanged or refuse).
    pub async fn negotiate_with(
        &self,
        url: &str,
        capability: &str,
        proposed_schema: Option<Value>,
        timeout_ms: Option<u64>,
        strict: bool,
    ) -> Result<Negotiation, ClientError> {
        let ep = Endpoint::parse(url)?;
        let d = self.discover_at(&ep, None, false).await?;
        let caps = self.capabilities_at(&ep, &d, None, false).await?;
        let schema = self.schema_for(&caps, capability, proposed_schema)?;
        let n = self.negotiate_at(&ep, &d, &caps, capability, &schema, timeout_ms, strict, None).await?;
        Ok((*n).clone())
    }

    /// The schema to propose: the caller's, or the capability's declared `input_schema`.
    pub(crate) fn schema_for(
        &self,
        caps: &Capabilities,
        capability: &str,
        proposed: Option<Value>,
    ) -> Result<Value, ClientError> {
        match proposed {
            Some(s) => Ok(s),
            None => caps.declaration(capability).map(|d| d.input_schema.clone()).ok_or_else(|| {
                ClientError::CapabilityNotOffered {
                    capability: capability.to_owned(),
                    agent: caps.endpoint.to_string(),
                    offered: caps.document.capabilities.iter().map(|c| c.name.clone()).collect(),
                    fallback_options: Vec::new(),
                }
            }),
        }
    }

    pub(crate) fn negotiation_key(
        &self,
        ep: &Endpoint,
        capability: &str,
        schema: &Value,
        timeout_ms: Option<u64>,
        strict: bool,
    ) -> String {
        format!("{ep}\n{capability}\n{}\n{timeout_ms:?}\n{strict}", digest(schema))
    }

    /// A cached agreed schema for exactly this proposal, while it is fresh.
    pub(crate) async fn cached_negotiation(&self, key: &str) -> Option<Arc<Negotiation>> {
        let n = self.inner.negotiations.get(key).await.filter(|n| n.is_fresh());
        let counter =
            if n.is_some() { &self.inner.counters.negotiation_hits } else { &self.inner.counters.negotiation_misses };
        counter.fetch_add(1, Ordering::Relaxed);
        n
    }

    /// A cached agreed schema, without counting a hit or a miss.
    pub(crate) async fn inner_negotiation(&self, key: &str) -> Option<Arc<Negotiation>> {
        self.inner.negotiations.get(key).await.filter(|n| n.is_fresh())
    }

    pub(crate) async fn forget_negotiation(&self, key: &str) {
        self.inner.negotiations.invalidate(key).await;
    }

    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn negotiate_at(
        &self,
        ep: &Endpoint,
        discovery: &Discovery,
        caps: &Capabilities,
        capability: &str,
        schema: &Value,
        timeout_ms: Option<u64>,
        strict: bool,
        deadline: Option<Deadline>,
    ) -> Result<Arc<Negotiation>, ClientError> {
        let body = serde_json::to_value(NegotiateRequest {
            target_capability: capability.to_owned(),
            proposed_schema: schema.clone(),
            timeout_ms,
            strict,
        })
        .map_err(|e| ClientError::invalid(e.to_string()))?;
        let auth = caps.declaration(capability).map(|d| d.auth_requirement);
        let mut req = self.request(Step::Negotiate, ep, Method::POST, "/negotiate").json(&body);
        req.agent = Some(discovery.agent.clone());
        req.sign = self.should_sign(auth);
        req.credentials = true;
        if let Some(r) = &self.inner.config.region {
            req.headers.push((h::A2A_REGION, r.clone()));
        }
        let resp = self.send(req, deadline).await?;
        let response: NegotiateResponse = resp.json(Step::Negotiate)?;
        let n = Arc::new(Negotiation {
            endpoint: ep.clone(),
            agent: discovery.agent.clone(),
            valid_for: negotiation_lifetime(&response),
            response,
            received_at: Instant::now(),
        });
        let key = self.negotiation_key(ep, capability, schema, timeout_ms, strict);
        self.inner.negotiations.insert(key, n.clone()).await;
        Ok(n)
    }

    // --- EXECUTE ------------------------------------------------------------------------------------------------

    /// EXECUTE (`POST /a2a/execute`, §7): sends the payload under a negotiation. Nothing runs until
    /// [`Client::confirm`]. Retried after a transient failure only when the agent lists `idempotency` (CLI-3), with
    /// the same `Idempotency-Key`.
    pub async fn execute(
        &self,
        negotiation: &Negotiation,
        payload: &Value,
        opts: &ExecuteOptions,
    ) -> Result<Execution, ClientError> {
        let d = self.discover_at(&negotiation.endpoint, None, false).await?;
        let caps = self.capabilities_at(&negotiation.endpoint, &d, None, false).await?;
        self.execute_at(negotiation, &caps, payload, opts, None).await
    }

    pub(crate) async fn execute_at(
        &self,
        negotiation: &Negotiation,
        caps: &Capabilities,
        payload: &Value,
        opts: &ExecuteOptions,
        deadline: Option<Deadline>,
    ) -> Result<Execution, ClientError> {
        if !payload.is_object() {
            return Err(ClientError::invalid(format!(
                "the payload must be a JSON object (EXECUTE, §7); got {}",
                match payload {
                    Value::Array(_) => "an array",
                    Value::String(_) => "a string",
                    Value::Number(_) => "a number",
                    Value::Bool(_) => "a boolean",
                    _ => "null",
                }
            )));
        }
        let key = match &opts.idempotency_key {
            Some(k) => {
                Some(h::parse_token("Idempotency-Key", k).map_err(|e| ClientError::invalid(e.to_string()))?.to_owned())
            }
            None => Some(random_token()?),
        };
        let ep = &negotiation.endpoint;
        let mut req = self.request(Step::Execute, ep, Method::POST, "/execute").json(payload);
        req.agent = Some(negotiation.agent.clone());
        req.sign = self.should_sign(Some(negotiation.response.auth_requirement));
        req.credentials = true;
        req.headers.push((h::A2A_NEGOTIATION_ID, negotiation.id().to_owned()));
        if let Some(k) = &key {
            req.headers.push((h::IDEMPOTENCY_KEY, k.clone()));
        }
        if let Some(r) = &self.inner.config.region {
            req.headers.push((h::A2A_REGION, r.clone()));
        }
        req.retry = key.is_some() && caps.has_feature("idempotency");
        let resp = self.send(req, deadline).await?;
        let response: ExecuteResponse = resp.json(Step::Execute)?;
        Ok(Execution {
            endpoint: ep.clone(),
            agent: negotiation.agent.clone(),
            capability: negotiation.response.target_capability.clone(),
            replayed: resp.status == 200,
            response,
            idempotency_key: key,
        })
    }

    // --- CONFIRM ------------------------------------------------------------------------------------------------

    /// CONFIRM (`POST /a2a/confirm`, §8.2): starts the work; the agent answers at once. Safe to repeat (CONF-2): a
    /// transient failure, or `503 overloaded` (CONF-5), is retried.
    pub async fn confirm(&self, execution: &Execution) -> Result<ConfirmResponse, ClientError> {
        self.confirm_at(execution, None).await
    }

    pub(crate) async fn confirm_at(
        &self,
        execution: &Execution,
        deadline: Option<Deadline>,
    ) -> Result<ConfirmResponse, ClientError> {
        let auth = self
            .inner
            .capabilities
            .get(execution.endpoint.as_str())
            .await
            .and_then(|c| c.declaration(&execution.capability).map(|d| d.auth_requirement));
        let body = json!(ExecutionRef { execution_id: execution.id().to_owned() });
        let mut req = self.request(Step::Confirm, &execution.endpoint, Method::POST, "/confirm").json(&body);
        req.agent = Some(execution.agent.clone());
        req.sign = self.should_sign(auth);
        req.credentials = true;
        let resp = self.send(req, deadline).await?;
        resp.json(Step::Confirm)
    }

    // --- RESULT -------------------------------------------------------------------------------------------------

    /// RESULT (`GET /a2a/result/{execution_id}`, §8.3) of an execution created by this client's DID. With
    /// [`Wait::For`], waits until the execution is terminal or the time has passed: long-poll when the agent lists
    /// `long_poll`, otherwise polling with backoff 100 ms, 200 ms, 400 ms, ... capped (CLI-2). A terminal failure is
    /// returned as a [`ResultResponse`] too (its `status` and `error`); see [`ResultResponse::error`].
    pub async fn result(&self, url: &str, execution_id: &str, wait: Wait) -> Result<ResultResponse, ClientError> {
        let ep = Endpoint::parse(url)?;
        let id = ExecutionId::parse(execution_id)
            .map_err(|e| ClientError::invalid(format!("{execution_id:?} is not an execution id: {e}")))?;
        let d = self.discover_at(&ep, None, false).await?;
        let caps = self.capabilities_at(&ep, &d, None, false).await?;
        // The id does not name its capability: sign (AUTH-5, header_only) when the agent has any did_auth one.
        let auth = caps
            .document
            .capabilities
            .iter()
            .any(|c| c.auth_requirement == AuthRequirement::DidAuth)
            .then_some(AuthRequirement::DidAuth);
        match wait {
            Wait::No => self.result_once(&ep, &d.agent, &id, auth, None, None).await,
            Wait::For(t) => {
                let deadline = Deadline::after(t);
                match self.wait_result(&ep, &d.agent, &caps, &id, auth, deadline, None, &mut 0).await {
                    Err(ClientError::DeadlineExceeded { .. }) => {
                        self.result_once(&ep, &d.agent, &id, auth, None, None).await
                    }
                    other => other,
                }
            }
        }
    }

    pub(crate) async fn result_once(
        &self,
        ep: &Endpoint,
        agent: &str,
        id: &ExecutionId,
        auth: Option<AuthRequirement>,
        wait_ms: Option<u64>,
        deadline: Option<Deadline>,
    ) -> Result<ResultResponse, ClientError> {
        let mut req = self.request(Step::Result, ep, Method::GET, format!("/result/{}", id.to_path_segment()));
        req.agent = Some(agent.to_owned());
        req.credentials = true;
        // AUTH-1, AUTH-5: RESULT of a did_auth capability is signed (header_only) from the first request, when the
        // capability is known; a refusal to an unsigned one may be answered as an unknown id (GW-21).
        if self.should_sign(auth) {
            req.sign = true;
        }
        if let Some(w) = wait_ms {
            req.query = Some(format!("wait_ms={w}"));
            req.timeout += Duration::from_millis(w);
        }
        let resp = self.send(req, deadline).await?;
        let r: ResultResponse = resp.json(Step::Result)?;
        if r.execution_id != id.as_str() {
            return Err(ClientError::Protocol {
                step: Step::Result,
                url: resp.url.clone(),
                reason: format!("RESULT answered about execution {}, not {id}", r.execution_id),
            });
        }
        Ok(r)
    }

    /// Reads RESULT until the execution is terminal or the deadline passes.
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn wait_result(
        &self,
        ep: &Endpoint,
        agent: &str,
        caps: &Capabilities,
        id: &ExecutionId,
        auth: Option<AuthRequirement>,
        deadline: Deadline,
        progress: Option<&crate::types::ProgressFn>,
        polls: &mut u32,
    ) -> Result<ResultResponse, ClientError> {
        let long_poll = caps.has_feature("long_poll");
        let max_wait = caps.max_wait();
        let started = Instant::now();
        let mut backoff = crate::backoff::Backoff::new(crate::backoff::INITIAL, self.inner.config.poll_cap);
        let mut last = None;
        loop {
            let remaining = deadline.remaining();
            if remaining.is_zero() {
                return Err(ClientError::DeadlineExceeded {
                    step: Step::Result,
                    deadline: deadline.total,
                    execution_id: Some(id.to_string()),
                    last_status: last,
                });
            }
            // Long-poll for what is left of the deadline (bounded by the agent's max_wait_ms), minus a little so
            // that the agent's answer arrives before our deadline.
            let wait_ms = long_poll.then(|| {
                let budget = remaining.saturating_sub(Duration::from_millis(50)).min(max_wait);
                budget.as_millis() as u64
            });
            *polls += 1;
            let r = match self.result_once(ep, agent, id, auth, wait_ms.filter(|w| *w > 0), Some(deadline)).await {
                Ok(r) => r,
                Err(ClientError::DeadlineExceeded { .. }) => {
                    return Err(ClientError::DeadlineExceeded {
                        step: Step::Result,
                        deadline: deadline.total,
                        execution_id: Some(id.to_string()),
                        last_status: last,
                    });
                }
                Err(e) => return Err(e),
            };
            last = Some(r.status);
            if let Some(p) = progress {
                p(&crate::types::Progress::Waiting {
                    execution_id: id.to_string(),
                    status: r.status,
                    elapsed: started.elapsed(),
                });
            }
            if r.status.is_terminal() {
                return Ok(r);
            }
            if !long_poll || wait_ms == Some(0) {
                let pause = backoff.next().unwrap_or(crate::backoff::INITIAL).min(deadline.remaining());
                tokio::time::sleep(pause).await;
            }
        }
    }

    // --- CANCEL and FALLBACK ------------------------------------------------------------------------------------

    /// CANCEL (`POST /a2a/cancel`, §8.4), at agents that list `cancel`.
    pub async fn cancel(&self, url: &str, execution_id: &str) -> Result<ResultResponse, ClientError> {
        let ep = Endpoint::parse(url)?;
        let d = self.discover_at(&ep, None, false).await?;
        let body = json!(ExecutionRef { execution_id: execution_id.to_owned() });
        let mut req = self.request(Step::Cancel, &ep, Method::POST, "/cancel").json(&body);
        req.agent = Some(d.agent.clone());
        req.sign = self.inner.identity.can_sign() && self.inner.config.signing == SigningMode::Always;
        req.credentials = true;
        self.send(req, None).await?.json(Step::Cancel)
    }

    /// FALLBACK (`POST /a2a/fallback`, §11): what the agent suggests instead of `capability`.
    pub async fn fallback(
        &self,
        url: &str,
        capability: &str,
        reason: Option<&str>,
    ) -> Result<FallbackResponse, ClientError> {
        let ep = Endpoint::parse(url)?;
        let d = self.discover_at(&ep, None, false).await?;
        self.fallback_at(&ep, &d.agent, capability, reason, None).await
    }

    pub(crate) async fn fallback_at(
        &self,
        ep: &Endpoint,
        agent: &str,
        capability: &str,
        reason: Option<&str>,
        deadline: Option<Deadline>,
    ) -> Result<FallbackResponse, ClientError> {
        let body = serde_json::to_value(FallbackRequest {
            target_capability: capability.to_owned(),
            reason: reason.map(str::to_owned),
        })
        .map_err(|e| ClientError::invalid(e.to_string()))?;
        let mut req = self.request(Step::Fallback, ep, Method::POST, "/fallback").json(&body);
        req.agent = Some(agent.to_owned());
        req.sign = self.inner.identity.can_sign() && self.inner.config.signing == SigningMode::Always;
        self.send(req, deadline).await?.json(Step::Fallback)
    }
}

#[cfg(test)]
mod cache_bound_tests {
    use super::*;

    /// The DISCOVER cache filled past `discover_capacity`: it holds at most the bound, and the newest entries are
    /// kept (LRU, so a burst of new agents replaces the least recently used, never the one just asked).
    #[tokio::test]
    async fn the_discover_cache_filled_past_its_bound_stays_within_it_and_keeps_the_newest() {
        let key = a2a_core::keys::SigningKey::generate().expect("key");
        let identity = Identity::new("did:web:client.example", "k1", key).expect("identity");
        let config = ClientConfig { discover_capacity: 16, negotiation_capacity: 16, ..ClientConfig::default() };
        let client = Client::builder(identity)
            .config(config)
            .resolver(Arc::new(a2a_core::resolver::StaticResolver::new()))
            .build()
            .expect("client");
        let cache = &client.inner.discoveries;
        let mut last = Vec::new();
        for i in 0..500 {
            let ep = Endpoint::parse(&format!("https://a{i}.example/a2a")).expect("endpoint");
            let d = Discovery {
                endpoint: ep.clone(),
                agent: format!("did:web:a{i}.example"),
                version: "0.3".into(),
                capabilities: vec!["echo".into()],
                regions: BTreeMap::new(),
                fetched_at: std::time::SystemTime::now(),
            };
            cache.insert(ep.as_str().to_owned(), Arc::new(d)).await;
            cache.run_pending_tasks().await;
            if i >= 496 {
                last.push(ep);
            }
        }
        cache.run_pending_tasks().await;
        assert!(cache.entry_count() <= 16, "{} discoveries held, bound 16", cache.entry_count());
        for ep in &last {
            let d = cache.get(ep.as_str()).await.expect("one of the newest discoveries is kept");
            assert_eq!(d.endpoint.as_str(), ep.as_str());
        }
    }
}
