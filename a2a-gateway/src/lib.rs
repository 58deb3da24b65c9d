//! # a2a-gateway
//!
//! The proxy operators put in front of many A2A agents (`spec/PROTOCOL.md` §15). To its callers it is one
//! agent — DISCOVER answers the union of its agents' capabilities under the gateway's DID — and to its agents it is a
//! caller:
//!
//! - **routing by capability**: NEGOTIATE goes to a healthy agent offering `target_capability` (power of two choices
//!   on requests in flight, outlier ejection after consecutive failures); EXECUTE, CONFIRM, RESULT and CANCEL follow
//!   their negotiation or execution to the same agent (GW-2), through routes shared by every gateway on one Redis;
//! - **edge security**: signatures verified once, as the audience (GW-3), a 25 s clock-skew bound (GW-4), replay
//!   memory, each capability's `auth_requirement`, the cross-domain did_auth policy, a rate per sender, body and
//!   header limits, unknown `/a2a*` paths answered (and counted) without reaching an agent; verified requests are
//!   re-signed by the gateway, naming the caller in `A2A-Forwarded-Sender` for agents that trust the gateway (GW-8,
//!   GW-9);
//! - **audit log** (JSON lines and/or a Redis stream), **metrics** (`/metrics`), **FALLBACK** aggregated over every
//!   agent, and **version isolation** through explicit translation tables (GW-11..GW-13).
//!
//! ```no_run
//! # async fn run() -> Result<(), String> {
//! let cfg = a2a_gateway::config::Config::parse(
//!     r#"
//!     [gateway]
//!     did = "did:web:gateway.example.com"
//!     [edge]
//!     verify_signatures = false
//!     [[agents]]
//!     url = "http://127.0.0.1:9001/a2a"
//!     "#,
//!     std::path::Path::new("gateway.toml"),
//! )
//! .map_err(|e| e.to_string())?;
//! let gateway = a2a_gateway::Gateway::from_config(&cfg, std::path::Path::new("."), Default::default())?;
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:8443").await.map_err(|e| e.to_string())?;
//! gateway.serve(listener, std::future::pending()).await.map_err(|e| e.to_string())?;
//! # Ok(()) }
//! ```

pub mod admin;
pub mod agents;
pub mod app;
pub mod audit;
mod bridge;
pub mod config;
pub mod console;
pub mod discover;
pub mod edge;
pub mod h1;
pub mod metrics;
mod proxy;
pub mod routes;
mod sse_sign;
pub mod upstream;
pub mod version;

use std::convert::Infallible;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use a2a_core::did::{Did, DidDocument};
use a2a_core::keys::SigningKey;
use a2a_core::resolver::{DidResolver, HttpResolver, ResolverOptions};
use a2a_runtime::registry::{RedisRegistry, Registry};
use a2a_runtime::store::redis::AgentScope;
use a2a_runtime::store::{MemoryStore, RedisStore, Store};
use axum::body::Body;
use http::Request;

use crate::agents::{Agents, Endpoint};
use crate::audit::AuditSinks;
use crate::config::{Config, LimitsSection};
use crate::edge::{Edge, Identity};
use crate::metrics::Metrics;
use crate::routes::{MemoryRoutes, RedisRoutes, Routes};
use crate::upstream::Upstream;
use crate::version::Versions;

/// What a program embedding the gateway may give instead of configuration.
#[derive(Default)]
#[non_exhaustive]
pub struct Options {
    /// Resolves callers' DIDs (default: did:web over HTTPS; loopback over HTTP when `edge.allow_http_loopback_dids`).
    pub resolver: Option<Arc<dyn DidResolver>>,
    /// The gateway's key (default: `gateway.key_file`).
    pub key: Option<SigningKey>,
}

impl Options {
    /// Sets the resolver.
    #[must_use]
    pub fn with_resolver(mut self, r: Arc<dyn DidResolver>) -> Self {
        self.resolver = Some(r);
        self
    }

    /// Sets the key.
    #[must_use]
    pub fn with_key(mut self, k: SigningKey) -> Self {
        self.key = Some(k);
        self
    }
}

/// The gateway's HTTP service (http types in and out), boxed.
pub(crate) type HttpService = tower::util::BoxCloneSyncService<Request<Body>, http::Response<Body>, Infallible>;

/// The shared state of the request path.
pub(crate) struct Inner {
    pub(crate) did: String,
    /// The DID as the bytes of a header value (shared, never copied).
    pub(crate) did_bytes: bytes::Bytes,
    pub(crate) name: Option<String>,
    pub(crate) agents: Arc<Agents>,
    pub(crate) routes: Arc<dyn Routes>,
    pub(crate) edge: Edge,
    pub(crate) audit: Option<Arc<dyn a2a_runtime::store::audit::AuditLog>>,
    pub(crate) metrics: Arc<Metrics>,
    pub(crate) upstream: Upstream,
    pub(crate) versions: Versions,
    pub(crate) limits: LimitsSection,
    pub(crate) registry: Option<Arc<dyn Registry>>,
    pub(crate) did_document: Option<(String, bytes::Bytes)>,
    pub(crate) admin_token: Option<[u8; 32]>,
    pub(crate) instance: String,
    /// Whether the gateway serves the A2A 1.x bridge (`gateway.bridge`, §20.10).
    pub(crate) bridge: bool,
    /// Where the bridge sends a message that names no skill when not exactly one skill accepts it (`[bridge]
    /// default_skill`, BR-29).
    pub(crate) default_skill: Option<String>,
    /// `true` once the capability registry was read the first time (at once when there is none).
    registry_read: tokio::sync::watch::Receiver<bool>,
    /// Request body bytes held at once, over every connection (GW-23, `limits.max_buffered_body_bytes`).
    pub(crate) body_budget: Arc<a2a_runtime::body::BodyBudget>,
    /// Caller connections open at once (GW-23, `limits.max_connections`), shared by every worker.
    pub(crate) connections: Arc<h1::server::ConnectionCap>,
    /// The Redis store, when there is one (its `PING` is part of readiness, OPS-2).
    pub(crate) redis: Option<Arc<RedisStore>>,
    /// The operator console's settings in force (`admin.console*`).
    pub(crate) console: console::Settings,
    /// What the next reload keeps (OPS-4).
    kept: Kept,
}

/// What a reloaded configuration keeps of the running gateway (OPS-4): its identity, the agents and their health,
/// routes, replay memory, registry, audit log, metrics, the agent connections and the process-wide budgets. The
/// settings these are made from are [`app::RESTART_ONLY`].
#[derive(Clone)]
struct Kept {
    did: String,
    did_document: Option<(String, bytes::Bytes)>,
    agents: Arc<Agents>,
    routes: Arc<dyn Routes>,
    replay: Arc<dyn Store>,
    registry: Option<Arc<dyn Registry>>,
    redis: Option<Arc<RedisStore>>,
    audit: Option<Arc<dyn a2a_runtime::store::audit::AuditLog>>,
    metrics: Arc<Metrics>,
    upstream: Upstream,
    identity: Identity,
    resolver: Arc<dyn DidResolver>,
    instance: String,
    registry_read: tokio::sync::watch::Receiver<bool>,
    body_budget: Arc<a2a_runtime::body::BodyBudget>,
    connections: Arc<h1::server::ConnectionCap>,
    /// The audit log's file, reopened on `SIGHUP` and `SIGUSR1` (OPS-5).
    audit_file: Option<std::path::PathBuf>,
    /// The operator console's metric samples and traffic tap.
    console: Arc<console::Console>,
    /// The MCP front at `/mcp` (spec §21), unless `mcp.enabled = false`.
    mcp: Option<Arc<a2a_mcp::inbound::Front>>,
}

/// The A2A 1.x bridge's router of one configuration in force.
type BridgeOf = (Arc<Inner>, axum::Router);

/// Routes, replay memory, registry and the Redis store (when there is one).
type SharedState = (Arc<dyn Routes>, Arc<dyn Store>, Option<Arc<dyn Registry>>, Option<Arc<RedisStore>>);

/// A running gateway (its background tasks stop when it is dropped).
#[derive(Clone)]
pub struct Gateway {
    /// The configuration in force, swapped whole by [`Gateway::reload`] (OPS-4).
    current: Arc<arc_swap::ArcSwap<Inner>>,
    /// What every configuration shares.
    kept: Arc<Kept>,
    _tasks: Arc<tokio_util::sync::DropGuard>,
}

impl Gateway {
    /// Builds a gateway from its configuration (`base`: the directory relative paths are read from). Must be called
    /// inside a Tokio runtime; starts the registry reader and the audit writer.
    pub fn from_config(cfg: &Config, base: &Path, opts: Options) -> Result<Gateway, String> {
        cfg.validate()?;
        let did = Did::parse(&cfg.gateway.did).map_err(|e| format!("gateway.did: {e}"))?;
        let key = match (opts.key, &cfg.gateway.key_file) {
            (Some(k), _) => Some(k),
            (None, Some(f)) => {
                let f = base.join(f);
                let pem = std::fs::read_to_string(&f).map_err(|e| format!("gateway.key_file {}: {e}", f.display()))?;
                Some(SigningKey::from_pem(&pem).map_err(|e| format!("gateway.key_file {}: {e}", f.display()))?)
            }
            (None, None) => None,
        };
        let did_document = match &key {
            None => None,
            Some(k) => {
                let doc = DidDocument::try_generate(&did, &[(cfg.gateway.key_id.clone(), k.verifying_key().to_jwk())])
                    .map_err(|e| format!("gateway.key_id {:?}: {e}", cfg.gateway.key_id))?;
                Some((
                    a2a_runtime::app::document_path(&did),
                    serde_json::to_vec(&doc).map_err(|e| e.to_string())?.into(),
                ))
            }
        };
        let resolver: Arc<dyn DidResolver> = match opts.resolver {
            Some(r) => r,
            None => Arc::new(
                HttpResolver::new(if cfg.edge.allow_http_loopback_dids {
                    ResolverOptions::loopback()
                } else {
                    ResolverOptions::default()
                })
                .map_err(|e| e.to_string())?,
            ),
        };
        let metrics = Arc::new(Metrics::new());
        let l = &cfg.limits;
        let upstream = Upstream::counted(
            Duration::from_millis(l.connect_timeout_ms),
            Duration::from_millis(l.agent_timeout_ms),
            upstream::PoolLimits {
                max_idle: l.pool_max_idle_per_agent,
                idle_timeout: Duration::from_millis(l.pool_idle_timeout_ms),
            },
            metrics.upstream_replays.clone(),
        );
        let agents = Arc::new(Agents::new(
            l.max_agents,
            cfg.balancing.clone(),
            &cfg.discover_cache,
            upstream.clone(),
            metrics.clone(),
            Duration::from_millis(l.connect_timeout_ms.max(1000) * 2),
        ));
        for (i, a) in cfg.agents.iter().enumerate() {
            let ep = Endpoint::parse(&a.url).map_err(|e| format!("agents[{i}].url: {e}"))?;
            agents.add(ep, true, true).ok_or_else(|| format!("agents[{i}]: more agents than limits.max_agents"))?;
        }
        let redis = cfg.store.redis(|k| std::env::var(k).ok());
        let (routes, replay, registry, redis_store): SharedState = match redis {
            Some(rc) => {
                rc.validate()?;
                let scope = AgentScope {
                    did: did.to_string(),
                    retention: Duration::from_millis(l.result_retention_ms),
                    max_received: 1,
                };
                let store = RedisStore::connect(rc, scope).map_err(|e| format!("store: {e}"))?;
                (
                    Arc::new(RedisRoutes::new(store.clone(), l.max_routes)),
                    store.clone(),
                    Some(Arc::new(RedisRegistry::new(store.clone(), Vec::new())) as Arc<dyn Registry>),
                    Some(store),
                )
            }
            None => (
                Arc::new(MemoryRoutes::new(l.max_routes)),
                Arc::new(MemoryStore::new(a2a_runtime::store::memory::MemoryLimits::default())),
                None,
                None,
            ),
        };
        let audit = crate::audit::open(
            AuditSinks {
                file: cfg.audit.file.as_ref().map(|f| base.join(f)),
                redis: redis_store.clone().filter(|_| cfg.audit.redis_stream).map(|s| (s, cfg.audit.stream_max_len)),
            },
            cfg.audit.queue,
        )?;
        let identity = Identity { did: did.to_string(), key, key_id: cfg.gateway.key_id.clone() };
        let reads_registry = cfg.registry.enabled && registry.is_some();
        let (registry_read_tx, registry_read) = tokio::sync::watch::channel(!reads_registry);
        let console_keeps_records = audit.is_none();
        // MCP-1: `/mcp` is served unless the configuration turns it off; it calls this gateway's own `/a2a` over
        // loopback once a listener is bound (`serve`).
        let mcp = match cfg.mcp.serves(true) {
            false => None,
            true => {
                let fc = cfg.mcp.front_config(did.as_ref(), base)?;
                let name = cfg.gateway.name.clone().unwrap_or_else(|| "a2a-gateway".to_owned());
                Some(a2a_mcp::inbound::Front::new(fc.with_name(name))?)
            }
        };
        let kept = Kept {
            did: did.to_string(),
            did_document,
            agents: agents.clone(),
            routes,
            replay,
            registry: registry.clone(),
            redis: redis_store,
            audit,
            metrics,
            upstream,
            identity,
            resolver,
            instance: crate::metrics::instance_id(),
            registry_read,
            body_budget: a2a_runtime::body::BodyBudget::new(cfg.limits.max_buffered_body_bytes),
            connections: Arc::new(h1::server::ConnectionCap::new(cfg.limits.connection_cap())),
            audit_file: cfg.audit.file.as_ref().map(|f| base.join(f)),
            console: Arc::new(console::Console::new(
                cfg.admin.console_samples,
                cfg.admin.console_records,
                console_keeps_records,
            )),
            mcp,
        };
        let inner = Arc::new(assemble(cfg, base, kept.clone())?);
        let stop = tokio_util::sync::CancellationToken::new();
        tokio::spawn(sample_metrics(
            kept.console.history.clone(),
            kept.metrics.clone(),
            Duration::from_millis(cfg.admin.console_sample_ms),
            stop.clone(),
        ));
        if let Some(registry) = registry.filter(|_| cfg.registry.enabled) {
            tokio::spawn(read_registry(
                registry,
                agents,
                Duration::from_millis(cfg.registry.poll_ms.max(50)),
                stop.clone(),
                registry_read_tx,
            ));
        }
        Ok(Gateway {
            current: Arc::new(arc_swap::ArcSwap::new(inner)),
            kept: Arc::new(kept),
            _tasks: Arc::new(stop.drop_guard()),
        })
    }

    /// Swaps in the configuration `cfg` describes (OPS-4): agents, edge policy and rate limits, limits, the admin
    /// token, translations. What [`app::RESTART_ONLY`] lists keeps its running value (the caller logs a change to
    /// it). Requests in flight finish under the configuration they started with; connections stay open. An error
    /// leaves the running configuration in force.
    pub fn reload(&self, cfg: &Config, base: &Path) -> Result<(), String> {
        cfg.validate()?;
        let running = self.current.load_full();
        let next = assemble(cfg, base, running.kept.clone())?;
        let urls = cfg
            .agents
            .iter()
            .enumerate()
            .map(|(i, a)| Endpoint::parse(&a.url).map_err(|e| format!("agents[{i}].url: {e}")))
            .collect::<Result<Vec<_>, _>>()?;
        self.kept.agents.configure(urls)?;
        self.current.store(Arc::new(next));
        Ok(())
    }

    /// Reopens the audit log's file (OPS-5), after it was moved away by log rotation: records go to a new file at the
    /// configured path. `Ok(false)` when no audit file is configured.
    pub async fn reopen_logs(&self) -> Result<bool, String> {
        match (&self.kept.audit_file, &self.kept.audit) {
            (Some(_), Some(log)) => log.reopen().await.map(|()| true).map_err(|e| e.to_string()),
            _ => Ok(false),
        }
    }

    /// Readiness (OPS-2), decided here for the gateway: its Redis store answers `PING` (when it has one), the
    /// capability registry was read once (when it reads one), and at least one agent is in rotation and not ejected.
    pub async fn readiness(&self) -> Result<(), a2a_runtime::health::NotReady> {
        readiness(&self.current.load_full()).await
    }
}

/// Readiness of the gateway in force (OPS-2); see [`Gateway::readiness`].
pub(crate) async fn readiness(gw: &Inner) -> Result<(), a2a_runtime::health::NotReady> {
    use a2a_runtime::health::{NO_AGENT, NO_HEALTHY_AGENT, NotReady, REGISTRY_NOT_READ, store_ready};
    if let Some(redis) = &gw.redis {
        store_ready(redis.as_ref()).await?;
    }
    if !*gw.kept.registry_read.borrow() {
        return Err(NotReady { reason: REGISTRY_NOT_READ, detail: "the capability registry was not read yet".into() });
    }
    let listed = gw.agents.listed();
    if listed.is_empty() {
        return Err(NotReady {
            reason: NO_AGENT,
            detail: "no agent is configured ([[agents]]) or registered in the capability registry".into(),
        });
    }
    let now = std::time::Instant::now();
    if !listed.iter().any(|a| a.healthy(now)) {
        return Err(NotReady {
            reason: NO_HEALTHY_AGENT,
            detail: format!("all {} agents are ejected by outlier detection", listed.len()),
        });
    }
    Ok(())
}

/// The request path's state for configuration `cfg` over what the running gateway keeps.
fn assemble(cfg: &Config, base: &Path, kept: Kept) -> Result<Inner, String> {
    let token = match (&cfg.admin.token_env, &cfg.admin.token_file) {
        (Some(var), _) => Some((
            std::env::var(var).map_err(|_| format!("admin.token_env: environment variable {var} is not set"))?,
            format!("admin.token_env: {var}"),
        )),
        (None, Some(f)) => {
            let f = base.join(f);
            let text = std::fs::read_to_string(&f).map_err(|e| format!("admin.token_file {}: {e}", f.display()))?;
            Some((text.lines().next().unwrap_or("").to_owned(), format!("admin.token_file {}", f.display())))
        }
        (None, None) => None,
    };
    let admin_token = match token {
        None => None,
        Some((t, what)) => {
            if t.trim().is_empty() {
                return Err(format!("{what} is empty"));
            }
            Some(<sha2::Sha256 as sha2::Digest>::digest(t.trim().as_bytes()).into())
        }
    };
    let edge = Edge::new(
        cfg.edge.clone(),
        kept.identity.clone(),
        kept.resolver.clone(),
        kept.replay.clone(),
        kept.metrics.clone(),
    );
    Ok(Inner {
        did: kept.did.clone(),
        did_bytes: bytes::Bytes::from(kept.did.clone()),
        name: cfg.gateway.name.clone(),
        agents: kept.agents.clone(),
        routes: kept.routes.clone(),
        edge,
        audit: kept.audit.clone(),
        metrics: kept.metrics.clone(),
        upstream: kept.upstream.clone(),
        versions: Versions::new(&cfg.translations)?,
        limits: cfg.limits.clone(),
        registry: kept.registry.clone(),
        did_document: kept.did_document.clone(),
        admin_token,
        instance: kept.instance.clone(),
        bridge: cfg.gateway.bridge,
        default_skill: cfg.bridge.default_skill.clone(),
        registry_read: kept.registry_read.clone(),
        body_budget: kept.body_budget.clone(),
        connections: kept.connections.clone(),
        redis: kept.redis.clone(),
        console: console::Settings { enabled: cfg.admin.console, session_s: cfg.admin.console_session_s },
        kept,
    })
}

impl Gateway {
    /// The configuration in force.
    fn inner(&self) -> Arc<Inner> {
        self.current.load_full()
    }

    /// The gateway as an axum router (every path is the gateway's: mount it at the root).
    pub fn router(&self) -> axum::Router {
        axum::Router::new().fallback_service(self.http_service())
    }

    /// The gateway's HTTP service, for what its own HTTP/1.1 does not serve natively (HTTP/2, the A2A 1.x bridge's
    /// paths when served, the admin paths): the bridge's paths go to its router, every other request to the proxy.
    /// Each request is served by the configuration in force when it arrives (OPS-4).
    fn http_service(&self) -> HttpService {
        let current = self.current.clone();
        // The bridge's router of the configuration in force, made again after a reload.
        let bridge_cache: Arc<std::sync::Mutex<Option<BridgeOf>>> = Arc::default();
        h1::server::boxed(tower::service_fn(move |req: Request<Body>| {
            let inner = current.load_full();
            // MCP-1: the MCP front at `/mcp`.
            let mcp = inner.kept.mcp.clone().filter(|_| req.uri().path() == a2a_mcp::inbound::PATH);
            let bridge = (inner.bridge && crate::bridge::serves(req.uri().path())).then(|| {
                let mut cache = bridge_cache.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                match cache.as_ref() {
                    Some((of, r)) if Arc::ptr_eq(of, &inner) => r.clone(),
                    _ => {
                        // The A2A 1.x card and endpoints (spec §20.10); a bridge path it does not match still ends
                        // at the proxy.
                        let fallback = inner.clone();
                        let r = crate::bridge::router(inner.clone()).fallback(move |req: Request<Body>| {
                            let inner = fallback.clone();
                            async move { proxy::handle_http(inner, req).await }
                        });
                        *cache = Some((inner.clone(), r.clone()));
                        r
                    }
                }
            });
            async move {
                if let Some(front) = mcp {
                    return Ok(front.handle(req).await);
                }
                Ok::<_, Infallible>(match bridge {
                    Some(b) => tower::ServiceExt::oneshot(b, req).await?,
                    None => proxy::handle_http(inner, req).await,
                })
            }
        }))
    }

    /// The connection-level limits handed to [`a2a_runtime::serve::serve`].
    pub fn serve_limits(&self) -> a2a_runtime::Limits {
        let mut l = a2a_runtime::Limits::default();
        let inner = self.inner();
        l.max_body_bytes = inner.limits.max_body_bytes;
        l.max_header_bytes = inner.limits.max_header_bytes;
        l.max_headers = inner.limits.max_headers;
        l.header_read_timeout_ms = inner.limits.header_read_timeout_ms;
        l.body_read_timeout_ms = inner.limits.body_read_timeout_ms;
        l
    }

    /// Serves on `listener` until `shutdown` completes, then lets requests in flight finish (`shutdown_grace_ms`).
    /// HTTP/1.1 is served by the gateway's own connection loop ([`h1`]), HTTP/2 by hyper.
    pub async fn serve(
        &self,
        listener: tokio::net::TcpListener,
        shutdown: impl std::future::Future<Output = ()> + Send,
    ) -> std::io::Result<()> {
        let grace = Duration::from_millis(self.inner().limits.shutdown_grace_ms);
        if let (Some(front), Ok(addr)) = (&self.kept.mcp, listener.local_addr()) {
            front.set_endpoint(&a2a_mcp::inbound::Front::loopback_endpoint(addr));
        }
        let served = h1::server::Served { current: self.current.clone(), http: self.http_service() };
        h1::server::serve(listener, served, shutdown, grace).await
    }

    /// Serves `listener` on `workers` threads (`0`: one per CPU) until `shutdown` completes, as nginx's worker
    /// processes do: each thread runs its own single-threaded event loop, accepts on the one listener and keeps its own
    /// agent connections ([`upstream::set_pool_partition`]), so that a request is served start to end on one thread,
    /// with no hand-over between threads. Then each finishes its requests in flight, as [`Gateway::serve`] does.
    /// The gateway's other work (the registry reader, the audit writer, Redis) stays on the calling runtime.
    ///
    /// An error when a thread cannot be started, or when one stops before `shutdown` (the others are then stopped).
    pub async fn serve_workers(
        &self,
        listener: std::net::TcpListener,
        workers: usize,
        shutdown: impl std::future::Future<Output = ()> + Send,
    ) -> std::io::Result<()> {
        let workers = if workers == 0 {
            std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get)
        } else {
            workers
        };
        listener.set_nonblocking(true)?;
        let stop = tokio_util::sync::CancellationToken::new();
        // However this returns (a thread that could not be started included), the workers already started stop.
        let _stop_all = stop.clone().drop_guard();
        let mut ended = Vec::with_capacity(workers);
        for i in 0..workers {
            let (listener, gateway, stop) = (listener.try_clone()?, self.clone(), stop.clone());
            let (tx, rx) = tokio::sync::oneshot::channel::<std::io::Result<()>>();
            std::thread::Builder::new().name(format!("a2a-gw-{i}")).spawn(move || {
                upstream::set_pool_partition(i + 1);
                // Sockets and timers only: a worker handles no signals and waits for no child process, and the
                // signal and process drivers would be polled at every turn of its loop.
                let served =
                    tokio::runtime::Builder::new_current_thread().enable_io().enable_time().build().and_then(|rt| {
                        rt.block_on(async {
                            let listener = tokio::net::TcpListener::from_std(listener)?;
                            gateway.serve(listener, stop.cancelled_owned()).await
                        })
                    });
                let _ = tx.send(served);
            })?;
            ended.push(rx);
        }
        drop(listener);
        a2a_runtime::serve::join_threads(ended, shutdown, &stop, "gateway worker").await
    }

    /// Waits until the gateway has read the capability registry once (whether or not the read succeeded), so that a
    /// gateway that says it serves already routes to the agents that registered themselves. At once without a
    /// registry.
    pub async fn ready(&self) {
        let mut read = self.inner().registry_read.clone();
        // An error only when the reader is gone (the gateway is being dropped): nothing more to wait for.
        let _ = read.wait_for(|done| *done).await;
    }

    /// The gateway's DID.
    pub fn did(&self) -> &str {
        &self.kept.did
    }

    /// The gateway's DID document (path, JSON bytes), when it has a key.
    pub fn did_document(&self) -> Option<&(String, bytes::Bytes)> {
        self.kept.did_document.as_ref()
    }

    /// The metrics.
    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.kept.metrics
    }

    /// The agents.
    pub fn agents(&self) -> &Arc<Agents> {
        &self.kept.agents
    }

    /// The MCP front at `/mcp` (spec §21), when served.
    pub fn mcp(&self) -> Option<&Arc<a2a_mcp::inbound::Front>> {
        self.kept.mcp.as_ref()
    }

    /// The audit log, when one is configured.
    pub fn audit(&self) -> Option<&Arc<dyn a2a_runtime::store::audit::AuditLog>> {
        self.kept.audit.as_ref()
    }
}

/// Samples the metrics for the operator console's charts every `every`, until `stop`.
async fn sample_metrics(
    history: Arc<console::MetricHistory>,
    metrics: Arc<Metrics>,
    every: Duration,
    stop: tokio_util::sync::CancellationToken,
) {
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            _ = tick.tick() => history.record(&metrics.encode()),
        }
    }
}

/// Keeps the agents in step with the capability registry: agents that registered an endpoint are added, those whose
/// registration lapsed are taken out of rotation.
async fn read_registry(
    registry: Arc<dyn Registry>,
    agents: Arc<Agents>,
    every: Duration,
    stop: tokio_util::sync::CancellationToken,
    read_once: tokio::sync::watch::Sender<bool>,
) {
    loop {
        match registry.list().await {
            Ok(entries) => {
                let mut current = std::collections::HashSet::new();
                for e in entries {
                    let Some(url) = e.endpoint else { continue };
                    match Endpoint::parse(&url) {
                        Ok(ep) => {
                            current.insert(ep.url.clone());
                            agents.add(ep, false, true);
                        }
                        Err(err) => tracing::debug!(endpoint = %url, error = %err, "registry entry not usable"),
                    }
                }
                agents.retain_registered(&current);
            }
            Err(e) => tracing::warn!(error = %e, "cannot read the capability registry; keeping the agents known"),
        }
        read_once.send_replace(true);
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(every) => {}
        }
    }
}
