//! What the `a2a-server` binary does, as library functions (so that tests run it in-process): serve the demo agent or
//! an agent described by a configuration file, with logs, metrics, the DID document and graceful shutdown.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use a2a_core::did::{Did, DidDocument};
use a2a_core::keys::{SigningKey, VerifyingKey};
use a2a_core::resolver::{HttpResolver, ResolverOptions};
use axum::Router;
use serde_json::Value;
use tokio::net::TcpListener;

use crate::config::Config;
use crate::registry::{MemoryRegistry, RedisRegistry};
use crate::store::RedisStore;
use crate::store::redis::AgentScope;
pub use a2a_runtime::app::{LogFormat, did_document_response, document_path, fatal, init_tracing};

/// How the binary's composites reach other agents (CMP-10): the client, with the agent's DID and, when it signs, its
/// key.
pub fn remote_agents() -> a2a_server::RemoteAgentsFactory {
    Arc::new(|did: &str, key: Option<(&str, &SigningKey)>| a2a_client::RemoteClient::for_agent(did, key))
}

use crate::{Agent, AgentBuilder, ApiKey, CorsPolicy, OAuth2, demo, serve};

async fn bind(listen: &str) -> Result<TcpListener, String> {
    TcpListener::bind(listen).await.map_err(|e| {
        format!("cannot listen on {listen}: {e}; choose another address with --listen (port 0 picks a free port)")
    })
}

fn base_url(listener: &TcpListener) -> Result<(String, u16), String> {
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    let host = if addr.ip().is_unspecified() { "127.0.0.1".to_owned() } else { addr.ip().to_string() };
    let host = if host.contains(':') { format!("[{host}]") } else { host };
    Ok((format!("http://{host}:{}", addr.port()), addr.port()))
}

/// The router the binary serves: the agent and the DID document when there is one (served as
/// `application/did+json`, readable from a browser and cacheable for 5 minutes: DID-16); every other path is
/// `404 not_found` as JSON (ERR-4). `/metrics` is not in it (OPS-1): see [`admin_router`].
pub fn app_router(agent: &Agent, did_document: Option<(String, Value)>) -> Router {
    let mut app = agent.router().fallback(not_found);
    if let Some((path, doc)) = did_document {
        let body = bytes::Bytes::from(serde_json::to_vec(&doc).unwrap_or_default());
        app = app.route(
            &path,
            axum::routing::get(move || {
                let body = body.clone();
                async move { did_document_response(body) }
            }),
        );
    }
    app
}

/// `404 not_found` as JSON, for every path the binary does not serve (ERR-4).
async fn not_found() -> axum::response::Response {
    json_error(a2a_core::error::A2aError::with_message(
        a2a_core::error::ErrorCode::NOT_FOUND,
        "nothing is served at this path; the A2A endpoint is /a2a",
    ))
}

fn json_error(e: a2a_core::error::A2aError) -> axum::response::Response {
    use axum::response::IntoResponse;
    let status = axum::http::StatusCode::from_u16(e.http_status()).unwrap_or(axum::http::StatusCode::BAD_REQUEST);
    let body = serde_json::to_vec(&e.to_body()).unwrap_or_default();
    (status, [(axum::http::header::CONTENT_TYPE, "application/json")], body).into_response()
}

/// The operator surface (OPS-1): `/metrics`, behind `Authorization: Bearer <token>` when `token` is given
/// (compared in constant time; `401 auth_required` without the header, `401 auth_invalid` with another token).
pub fn admin_router(agent: &Agent, token: Option<String>) -> Router {
    let metrics = agent.metrics_router();
    let Some(token) = token else { return metrics };
    let token = Arc::new(token.into_bytes());
    metrics.layer(axum::middleware::from_fn(move |req: axum::extract::Request, next: axum::middleware::Next| {
        let token = token.clone();
        async move {
            use a2a_core::error::{A2aError, ErrorCode};
            use subtle::ConstantTimeEq;
            let given = req
                .headers()
                .get(axum::http::header::AUTHORIZATION)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.strip_prefix("Bearer "));
            match given {
                None => json_error(A2aError::with_message(
                    ErrorCode::AUTH_REQUIRED,
                    "/metrics requires Authorization: Bearer <the token of [admin] token_env>",
                )),
                Some(g) if bool::from(g.as_bytes().ct_eq(&token)) => next.run(req).await,
                Some(_) => json_error(A2aError::with_message(ErrorCode::AUTH_INVALID, "the admin token is not valid")),
            }
        }
    }))
}

async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {},
        () = term => {},
    }
    tracing::info!("shutting down: no new connections, draining executions in flight");
}

async fn run(agent: Agent, listener: TcpListener, app: Router) -> Result<(), String> {
    let limits = agent.engine().limits().clone();
    let grace = Duration::from_millis(limits.shutdown_grace_ms);
    let shutdown = shutdown(agent.sessions().cloned());
    // LIM-7: one single-threaded runtime per CPU serves the connections; they keep running what requests started
    // until the agent is drained.
    let serving = serve::serve_threads(listener, app, &limits, shutdown, grace, 0).await.map_err(|e| e.to_string())?;
    if !agent.drain(grace).await {
        tracing::warn!("executions were still running after the grace period; they were told to stop");
    }
    drop(serving);
    Ok(())
}

/// The demo agent for a listener bound on `port`: its DID `did:web:localhost%3A<port>`, a fresh key, the demo
/// capabilities, a resolver of `did:web:localhost` DIDs over plain HTTP, and the router serving it all (what
/// `a2a-server --demo` serves; tests and the conformance suite run it in-process).
pub fn demo_app(port: u16) -> Result<(Agent, Router), String> {
    demo_app_trusting(port, Vec::new())
}

/// [`demo_app`] trusting these gateways (`a2a-server --demo --trusted-gateway DID`): their re-signed requests name
/// the caller (GW-9) and callers' signatures for them are accepted (GW-18), so that a verifying or transparent
/// gateway can front the demo with every capability working, `did_auth` included.
pub fn demo_app_trusting(port: u16, trusted_gateways: Vec<String>) -> Result<(Agent, Router), String> {
    for g in &trusted_gateways {
        Did::parse(g).map_err(|e| format!("--trusted-gateway {g}: {e}"))?;
    }
    let did = Did::for_host_port("localhost", Some(port), &[]).map_err(|e| e.to_string())?;
    let key = SigningKey::generate().map_err(|e| e.to_string())?;
    let doc = DidDocument::generate(&did, &[("key-1".to_owned(), key.verifying_key().to_jwk())]);
    let resolver = HttpResolver::new(ResolverOptions::loopback()).map_err(|e| e.to_string())?;
    let agent = demo::capabilities(
        AgentBuilder::new(did.to_string()).name("A2A demo agent").remote_agents_from(remote_agents()),
    )
    .resolver(Arc::new(resolver))
    .sessions(demo_sessions(&key))
    .trusted_gateways(trusted_gateways)
    .build()
    .map_err(|e| e.to_string())?;
    let doc_json = serde_json::to_value(&doc).map_err(|e| e.to_string())?;
    // The A2A 1.x bridge (§20), its card signed with the demo's key (BR-5).
    let bridge = crate::a2a1x::Bridge::new(
        &agent,
        crate::a2a1x::BridgeOptions {
            signing_key: Some(("key-1".to_owned(), key)),
            // BR-27: a generic A2A 1.x client's plain text message is echoed.
            default_skill: Some("echo_message".to_owned()),
            ..Default::default()
        },
    )
    .map_err(|e| e.to_string())?;
    let mut app = app_router(&agent, Some((document_path(&did), doc_json))).merge(bridge.router());
    // MCP-1: the demo serves `/mcp` (spec §21), its capabilities as MCP tools, calling its own `/a2a` over loopback.
    let front = a2a_mcp::inbound::McpSection::default()
        .front_config(did.as_ref(), Path::new("."))
        .and_then(|c| a2a_mcp::inbound::Front::new(c.with_name("a2a demo agent")))?;
    front.set_endpoint(&format!("http://127.0.0.1:{port}/a2a"));
    app = app.route_service(a2a_mcp::inbound::PATH, front.service());
    Ok((agent, app))
}

/// The demo's sessions (§17): inbox sessions only, under `did_auth` (the default), with an allow list that admits every
/// address (POL-1), so that any signed caller — a conformance suite, a person with the `a2a` CLI — can register an
/// inbox session and send to it (SES-4, SES-5).
pub fn demo_sessions(key: &SigningKey) -> crate::sessions::SessionsBuilder {
    let mut settings = crate::sessions::SessionSettings::default();
    settings.allow_list = a2a_core::sessions::AllowList(vec!["*".to_owned()]);
    crate::sessions::SessionsBuilder::new().settings(settings).signing_key("key-1", key.clone())
}

/// `a2a-server --demo [--trusted-gateway DID]...`.
pub async fn run_demo(listen: Option<&str>, trusted_gateways: &[String]) -> Result<(), String> {
    let listener = bind(listen.unwrap_or("127.0.0.1:8080")).await?;
    let (base, port) = base_url(&listener)?;
    let (agent, mut app) = demo_app_trusting(port, trusted_gateways.to_vec())?;
    // OPS-4: SIGHUP does not end the demo (it has no file to re-read); listened to before the banner says it serves.
    let signals = crate::reload::Signals::new();
    // OPS-1: the demo shows its metrics only on a loopback listener.
    if listener.local_addr().map(|a| a.ip().is_loopback()).unwrap_or(false) {
        app = app.merge(admin_router(&agent, None));
        // `--console`: the operator console beside them (OPS-1).
        if crate::console::enabled_by_command_line() {
            app = app.merge(crate::console::router(&agent, None));
        }
    }
    for g in trusted_gateways {
        println!("Trusts the gateway {g} (its re-signed requests name their caller, GW-9; GW-18)");
    }
    let did = agent.did().to_owned();
    println!("{}", demo::banner(&did, &base));
    if std::env::var("REDIS_URL").is_ok_and(|u| !u.trim().is_empty()) {
        // The demo is one process with a fresh identity: it keeps its state in memory, whatever REDIS_URL says.
        println!("{}", demo::REDIS_URL_IGNORED);
        tracing::warn!("{}", demo::REDIS_URL_IGNORED);
    }
    app = app.merge(probe_router(agent.engine().store().clone()));
    crate::reload::log_and_carry_on(signals, "the demo agent");
    tracing::info!(did = %did, endpoint = %format!("{base}/a2a"), "demo agent listening");
    run(agent, listener, app).await
}

/// `a2a-server --config FILE [--trusted-gateway DID]...`: the gateways given are trusted in addition to the file's
/// `auth.trusted_gateways`. `SIGHUP` reloads the file in place (OPS-4, see [`crate::live`]).
pub async fn run_config(path: &Path, listen: Option<&str>, trusted_gateways: &[String]) -> Result<(), String> {
    crate::live::run(path, listen, trusted_gateways).await
}

/// Reads a configuration file as `a2a-server --config` does: logs its warnings and adds the command line's
/// `--trusted-gateway` DIDs to `auth.trusted_gateways`.
pub(crate) fn load_config(path: &Path, trusted_gateways: &[String]) -> Result<(Config, String), String> {
    let (cfg, text) = Config::load(path).map_err(|e| e.to_string())?;
    prepare_config(cfg, text, path, trusted_gateways)
}

/// [`load_config`] for a text already read (`path` names it in messages).
pub(crate) fn prepare_config(
    mut cfg: Config,
    text: String,
    path: &Path,
    trusted_gateways: &[String],
) -> Result<(Config, String), String> {
    for w in cfg.warnings(&text, path) {
        tracing::warn!("{w}");
    }
    for g in trusted_gateways {
        Did::parse(g).map_err(|e| format!("--trusted-gateway {g}: {e}"))?;
        if !cfg.auth.trusted_gateways.contains(g) {
            cfg.auth.trusted_gateways.push(g.clone());
        }
    }
    Ok((cfg, text))
}

/// The routers of an agent built from a configuration: what the callers' listener serves (the agent, its DID
/// document, the A2A 1.x bridge, `/metrics` behind the admin token) and what the admin listener serves (OPS-1).
pub(crate) fn config_routers(
    agent: &Agent,
    did_doc: Option<(String, Value)>,
    cfg: &Config,
    text: &str,
    path: &Path,
) -> Result<(Router, Router), String> {
    let mut app = app_router(agent, did_doc);
    if let Some(bridge) = bridge_from_config(cfg, text, path, agent)? {
        app = app.merge(bridge);
    }
    // OPS-1: /metrics only where `[admin]` says.
    let token = match &cfg.admin.token_env {
        None => None,
        Some(var) => match std::env::var(var) {
            Ok(t) if !t.trim().is_empty() => Some(t.trim().to_owned()),
            _ => return Err(format!("{}: admin.token_env: environment variable {var} is not set", path.display())),
        },
    };
    if token.is_some() {
        app = app.merge(admin_router(agent, token.clone()));
    }
    let mut admin = admin_router(agent, token.clone());
    // The operator console, where /metrics is (OPS-1).
    if cfg.admin.console || crate::console::enabled_by_command_line() {
        let console = crate::console::router_with_mcp(agent, token.clone(), cfg.mcp_report());
        if token.is_some() {
            app = app.merge(console.clone());
        }
        admin = admin.merge(console);
    }
    let admin = admin.fallback(not_found);
    Ok((app, admin))
}

/// Whether `a2a-server --mcp` was given: `/mcp` is served whatever `[mcp] enabled` says.
static MCP_FLAG: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// `a2a-server --mcp`: serve `/mcp` (spec §21) even when the configuration does not turn it on.
pub fn enable_mcp_from_command_line() {
    MCP_FLAG.store(true, std::sync::atomic::Ordering::Relaxed);
}

/// The MCP front of a configuration (MCP-1): `[mcp] enabled = true` or `--mcp`; `None` when `/mcp` is not served.
pub(crate) fn mcp_front(cfg: &Config, path: &Path) -> Result<Option<Arc<a2a_mcp::inbound::Front>>, String> {
    let on = cfg.mcp.serves(false) || MCP_FLAG.load(std::sync::atomic::Ordering::Relaxed);
    if !on {
        return Ok(None);
    }
    let base = path.parent().unwrap_or(Path::new("."));
    let at = |e: String| format!("{}: {e}", path.display());
    let fc = cfg.mcp.front_config(&cfg.agent.did, base).map_err(at)?;
    let name = cfg.agent.name.clone().unwrap_or_else(|| cfg.agent.did.clone());
    Ok(Some(a2a_mcp::inbound::Front::new(fc.with_name(name)).map_err(at)?))
}

/// Binds the listener of `listen` (the error says how to choose another address).
pub(crate) async fn bind_listener(listen: &str) -> Result<TcpListener, String> {
    bind(listen).await
}

/// `http://host:port` of a listener, and its port.
pub(crate) fn listener_base(listener: &TcpListener) -> Result<(String, u16), String> {
    base_url(listener)
}

/// The probes `/healthz` and `/readyz` (OPS-2) of an agent whose state lives in `store`: ready when the store
/// answers its `PING` (an in-memory store always does). Outside the agent's routes: not counted, not rate limited
/// (OPS-3).
pub fn probe_router(store: Arc<dyn crate::store::Store>) -> Router {
    use crate::health;
    let probe = move |req: axum::extract::Request| {
        let store = store.clone();
        async move {
            let (method, path) = (req.method().clone(), req.uri().path().to_owned());
            health::answer(&method, &path, async move { health::store_ready(store.as_ref()).await }).await
        }
    };
    Router::new()
        .route(health::HEALTHZ, axum::routing::any(probe.clone()))
        .route(health::READYZ, axum::routing::any(probe))
}

/// Waits for the shutdown signal, then ends the sessions' event streams (ANN-4) so that they do not hold up the drain.
pub(crate) async fn shutdown(sessions: Option<Arc<crate::sessions::Sessions>>) {
    shutdown_signal().await;
    if let Some(s) = sessions {
        s.close_streams();
    }
}

/// The sessions of a `[sessions]` section (§17): hosted sessions with their `command`, `http` or `openai` handlers,
/// inbox sessions, spawn templates, the limits and policy, the shared store when the agent has Redis, and the agent's
/// key for signing its ping-pong turns.
fn sessions_from_config(
    cfg: &Config,
    sc: &crate::sessions::config::SessionsConfig,
    shared: Option<&(Arc<RedisStore>, crate::store::redis::RedisConfig)>,
    key: Option<&SigningKey>,
    at: &dyn Fn(&[crate::config::Step<'_>]) -> String,
) -> Result<crate::sessions::SessionsBuilder, String> {
    use crate::config::Step::{Index, Key};
    use crate::sessions::config::{HandlerConfig, build_handler};
    use crate::sessions::{HostedSession, SessionSettings, SessionsBuilder};
    let mut sb = SessionsBuilder::new().settings(SessionSettings::from_config(sc));
    for (i, e) in sc.session.iter().enumerate() {
        let hosted = HostedSession {
            key: e.session_key.clone(),
            label: e.label.clone(),
            kind: e.kind,
            summary: e.summary.clone(),
        };
        sb = if matches!(e.handler, HandlerConfig::Inbox) {
            sb.inbox_session(hosted)
        } else {
            let handler = build_handler(&e.handler).map_err(|err| {
                format!(
                    "{}: sessions.session[{i}].handler: {err}",
                    at(&[Key("sessions"), Key("session"), Index(i), Key("handler")])
                )
            })?;
            sb.session_boxed(hosted, handler)
        };
    }
    for (i, t) in sc.spawn_template.iter().enumerate() {
        let handler = build_handler(&t.handler).map_err(|err| {
            format!(
                "{}: sessions.spawn_template[{i}].handler: {err}",
                at(&[Key("sessions"), Key("spawn_template"), Index(i), Key("handler")])
            )
        })?;
        sb = sb.spawn_template_boxed(t.name.clone(), handler);
    }
    if let Some((store, redis_cfg)) = shared {
        sb = sb.store(crate::sessions::store::redis::RedisSessionStore::new(store.clone(), redis_cfg));
    }
    if let Some(e) = &cfg.agent.endpoint {
        sb = sb.endpoint(e.clone());
    }
    if let Some(k) = key {
        sb = sb.signing_key(cfg.agent.key_id.clone(), k.clone());
    }
    Ok(sb)
}

/// `a2a-server check --config F`: reads and builds the agent `path` describes as `run_config` would, without
/// listening or connecting to anything, and returns the configuration's warnings ([`Config::warnings`]); an error
/// is the one `run_config` would stop with.
///
/// An `mcp` handler's server is the exception (§21.9): `check` connects to it to list its tools, and the tools that
/// cannot be imported are among the warnings, each with the reason (MCP-33).
pub async fn check_config(path: &Path) -> Result<Vec<String>, String> {
    let (mut cfg, text) = Config::load(path).map_err(|e| e.to_string())?;
    cfg.connect_mcp(&text, path).await.map_err(|e| e.to_string())?;
    let (agent, _) = build_from_config(&cfg, &text, path)?;
    bridge_from_config(&cfg, &text, path, &agent)?;
    let mut warnings = cfg.warnings(&text, path);
    warnings.extend(cfg.mcp_warnings(&text, path));
    for s in cfg.mcp_servers() {
        s.close().await;
    }
    Ok(warnings)
}

/// The agent's key (`agent.key_file`, relative to the configuration file), if one is configured.
fn load_key(cfg: &Config, text: &str, path: &Path) -> Result<Option<SigningKey>, String> {
    use crate::config::Step::Key;
    let Some(kf) = &cfg.agent.key_file else { return Ok(None) };
    let here = crate::config::position(path, text, &[Key("agent"), Key("key_file")]);
    let kf = path.parent().unwrap_or(Path::new(".")).join(kf);
    let pem = std::fs::read_to_string(&kf).map_err(|e| format!("{here}: agent.key_file: {}: {e}", kf.display()))?;
    let key = SigningKey::from_pem(&pem).map_err(|e| format!("{here}: agent.key_file: {}: {e}", kf.display()))?;
    Ok(Some(key))
}

/// The keys of `[[agent.published_keys]]` (`(key id, public JWK)`), listed in the DID document beside the agent's own
/// (DID-14). Each is read from a public or a private PEM; an id that repeats another is refused.
fn published_keys(cfg: &Config, text: &str, path: &Path) -> Result<Vec<(String, serde_json::Value)>, String> {
    use crate::config::Step::{Index, Key};
    let mut out = Vec::with_capacity(cfg.agent.published_keys.len());
    let mut ids = vec![cfg.agent.key_id.as_str()];
    for (i, k) in cfg.agent.published_keys.iter().enumerate() {
        let here =
            |field| crate::config::position(path, text, &[Key("agent"), Key("published_keys"), Index(i), Key(field)]);
        if ids.contains(&k.key_id.as_str()) {
            return Err(format!(
                "{}: agent.published_keys[{i}].key_id {:?} is already the id of another key of the document",
                here("key_id"),
                k.key_id
            ));
        }
        ids.push(&k.key_id);
        let file = path.parent().unwrap_or(Path::new(".")).join(&k.key_file);
        let pem = std::fs::read_to_string(&file).map_err(|e| {
            format!("{}: agent.published_keys[{i}].key_file: {}: {e}", here("key_file"), file.display())
        })?;
        let public = match SigningKey::from_pem(&pem) {
            Ok(private) => private.verifying_key().clone(),
            Err(_) => a2a_core::keys::VerifyingKey::from_pem(&pem).map_err(|e| {
                format!(
                    "{}: agent.published_keys[{i}].key_file: {}: not a P-256 public or private key PEM: {e}",
                    here("key_file"),
                    file.display()
                )
            })?,
        };
        out.push((k.key_id.clone(), public.to_jwk()));
    }
    Ok(out)
}

/// The A2A 1.x bridge of a `[bridge]` section with `enabled = true` (§20), its card signed with the agent's key.
pub fn bridge_from_config(cfg: &Config, text: &str, path: &Path, agent: &Agent) -> Result<Option<Router>, String> {
    use crate::config::Step::Key;
    if !cfg.bridge.enabled {
        return Ok(None);
    }
    let opts = crate::a2a1x::BridgeOptions {
        public_url: cfg.bridge.public_url.clone(),
        signing_key: load_key(cfg, text, path)?.map(|k| (cfg.agent.key_id.clone(), k)),
        default_skill: cfg.bridge.default_skill.clone(),
        ..Default::default()
    };
    let at = if cfg.bridge.default_skill.is_some() {
        vec![Key("bridge"), Key("default_skill")]
    } else {
        vec![Key("bridge")]
    };
    let bridge = crate::a2a1x::Bridge::new(agent, opts)
        .map_err(|e| format!("{}: bridge: {e}", crate::config::position(path, text, &at)))?;
    Ok(Some(bridge.router()))
}

/// Builds the agent a configuration describes; also returns its DID document (path, JSON) when a key is configured.
/// Errors name the file, the line and column, and the field (`agent.toml:12:1: auth.api_keys[0].key_env: ...`).
pub fn build_from_config(cfg: &Config, text: &str, path: &Path) -> Result<(Agent, Option<(String, Value)>), String> {
    build_agent(cfg, text, path, None).map(|(agent, doc, _)| (agent, doc))
}

/// What a configuration reloaded in place keeps of the running agent (OPS-4): its state store (an in-memory store
/// holds the executions in flight), its Redis connection, its event log and its sessions.
#[derive(Clone)]
pub(crate) struct Kept {
    pub(crate) store: Arc<dyn crate::store::Store>,
    redis: Option<(Arc<RedisStore>, crate::store::redis::RedisConfig)>,
    event_log: Option<Arc<dyn crate::streaming::EventLog>>,
    pub(crate) sessions: Option<Arc<crate::sessions::Sessions>>,
}

/// An agent built from a configuration: the agent, its DID document (path, JSON) and what a reload keeps of it.
pub(crate) type Built = (Agent, Option<(String, Value)>, Kept);

/// [`build_from_config`], keeping what `keep` holds instead of making it anew; also returns what the next reload keeps.
pub(crate) fn build_agent(cfg: &Config, text: &str, path: &Path, keep: Option<&Kept>) -> Result<Built, String> {
    use crate::config::Step::{Index, Key};
    let at = |steps: &[crate::config::Step<'_>]| crate::config::position(path, text, steps);
    let did = Did::parse(&cfg.agent.did).map_err(|e| format!("{}: agent.did: {e}", at(&[Key("agent"), Key("did")])))?;
    let base = path.parent().unwrap_or(Path::new("."));
    let mut builder = AgentBuilder::new(did.to_string()).limits(cfg.limits.clone()).remote_agents_from(remote_agents());
    if cfg.streaming.enabled {
        builder = builder.streaming(cfg.streaming.clone());
    }
    if let Some(name) = &cfg.agent.name {
        builder = builder.name(name.clone());
    }
    for cap in cfg.capabilities(text, path).map_err(|e| e.to_string())? {
        builder = builder.capability_boxed(cap.declaration, cap.handler);
    }
    for (decl, pipeline) in cfg.composites(text, path).map_err(|e| e.to_string())? {
        builder = builder.composite(decl, pipeline);
    }
    for (i, k) in cfg.auth.api_keys.iter().enumerate() {
        let entry = [Key("auth"), Key("api_keys"), Index(i)];
        let key = match (&k.key, &k.key_env) {
            (Some(key), None) => key.clone(),
            (None, Some(var)) => std::env::var(var).map_err(|_| {
                format!(
                    "{}: auth.api_keys[{i}].key_env: environment variable {var} is not set",
                    at(&[Key("auth"), Key("api_keys"), Index(i), Key("key_env")])
                )
            })?,
            _ => {
                return Err(format!("{}: auth.api_keys[{i}]: give exactly one of `key` and `key_env`", at(&entry)));
            }
        };
        if key.trim().is_empty() {
            let field = if k.key.is_some() { "key" } else { "key_env" };
            return Err(format!(
                "{}: auth.api_keys[{i}].{field}: the API key is empty",
                at(&[Key("auth"), Key("api_keys"), Index(i), Key(field)])
            ));
        }
        builder = builder.api_key(ApiKey::new(&key).for_senders(k.senders.clone()));
    }
    if let Some(o) = &cfg.auth.oauth2 {
        let mut keys = Vec::new();
        for (i, jwk) in o.keys.iter().enumerate() {
            keys.push(VerifyingKey::from_jwk(jwk).map_err(|e| {
                format!("{}: auth.oauth2.keys[{i}]: {e}", at(&[Key("auth"), Key("oauth2"), Key("keys"), Index(i)]))
            })?);
        }
        for (i, f) in o.key_files.iter().enumerate() {
            let f = base.join(f);
            let here = at(&[Key("auth"), Key("oauth2"), Key("key_files"), Index(i)]);
            let pem = std::fs::read_to_string(&f)
                .map_err(|e| format!("{here}: auth.oauth2.key_files[{i}]: {}: {e}", f.display()))?;
            keys.push(
                VerifyingKey::from_pem(&pem)
                    .map_err(|e| format!("{here}: auth.oauth2.key_files[{i}]: {}: {e}", f.display()))?,
            );
        }
        if keys.is_empty() {
            return Err(format!(
                "{}: auth.oauth2: give the issuer's keys in `keys` (JWK) or `key_files` (PEM)",
                at(&[Key("auth"), Key("oauth2")])
            ));
        }
        builder = builder.oauth2(OAuth2 {
            issuer: o.issuer.clone(),
            audience: o.audience.clone(),
            keys,
            required_scopes: o.required_scopes.clone().into_iter().collect(),
        });
    }
    builder = builder.internal_domains(cfg.auth.internal_domains.clone(), cfg.auth.require_did_auth_cross_domain);
    for (i, g) in cfg.auth.trusted_gateways.iter().enumerate() {
        Did::parse(g).map_err(|e| {
            format!("{}: auth.trusted_gateways[{i}]: {e}", at(&[Key("auth"), Key("trusted_gateways"), Index(i)]))
        })?;
    }
    builder = builder.trusted_gateways(cfg.auth.trusted_gateways.clone());
    let resolver = HttpResolver::new(if cfg.auth.allow_http_loopback_dids {
        ResolverOptions::loopback()
    } else {
        ResolverOptions::default()
    })
    .map_err(|e| e.to_string())?;
    builder = builder.resolver(Arc::new(resolver));
    let origins = &cfg.cors.allowed_origins;
    if !origins.is_empty() && !origins.iter().any(|o| o == "*") {
        builder = builder.cors(CorsPolicy::List(origins.clone()));
    }
    for (i, entry) in cfg.registry.iter().enumerate() {
        entry.capability.validate().map_err(|e| {
            format!(
                "{}: registry[{i}].capability: {e}",
                at(&[Key("registry"), Index(i), Key("capability"), Key("name")])
            )
        })?;
    }
    let mut shared = None;
    if let Some(redis) = cfg.store.redis(|k| std::env::var(k).ok()) {
        redis.validate().map_err(|e| format!("{}: {e}", at(&[Key("store")])))?;
        let scope = AgentScope {
            did: did.to_string(),
            retention: Duration::from_millis(cfg.limits.result_retention_ms),
            max_received: cfg.limits.max_received_executions,
        };
        let (store, redis_cfg) = match keep.and_then(|k| k.redis.clone()) {
            Some(kept) => kept,
            None => {
                let redis_cfg = redis.clone();
                let store = RedisStore::connect(redis, scope).map_err(|e| format!("{}: {e}", at(&[Key("store")])))?;
                store.set_sender_quotas(
                    cfg.limits.max_negotiations_per_sender,
                    cfg.limits.max_nonces_per_sender,
                    cfg.limits.max_received_per_sender,
                );
                (store, redis_cfg)
            }
        };
        if cfg.streaming.enabled {
            let limits = crate::streaming::EventLimits {
                max_events: cfg.streaming.max_events,
                max_bytes: cfg.streaming.max_bytes,
            };
            let poll = Duration::from_millis(cfg.streaming.poll_ms.max(1));
            builder = builder.event_log(Arc::new(crate::streaming::RedisEventLog::new(store.clone(), limits, poll)));
        }
        shared = Some((store.clone(), redis_cfg));
        builder = builder.store(store.clone()).registry(Arc::new(RedisRegistry::new(store, cfg.registry.clone())));
    } else {
        if !cfg.registry.is_empty() {
            builder = builder.registry(Arc::new(MemoryRegistry::new(cfg.registry.clone())));
        }
        if let Some(k) = keep {
            builder = builder.store(k.store.clone());
            if let Some(log) = k.event_log.clone().filter(|_| cfg.streaming.enabled) {
                builder = builder.event_log(log);
            }
        }
    }
    // The key is checked before the agent is built, so that a bad key is reported as such.
    let key = load_key(cfg, text, path)?;
    if let Some(running) = keep.and_then(|k| k.sessions.clone()) {
        builder = builder.running_sessions(running);
    } else if let Some(sc) = cfg.sessions.as_ref().filter(|s| s.enabled) {
        builder = builder.sessions(sessions_from_config(cfg, sc, shared.as_ref(), key.as_ref(), &at)?);
    }
    let agent = builder.build().map_err(|e| {
        // Point at the capability the error is about (the second one of a duplicate name).
        let name = match &e {
            crate::BuildError::Capability(a2a_core::capability::CapabilityError::Duplicate(n))
            | crate::BuildError::OutputSchema { name: n, .. } => Some(n.as_str()),
            _ => None,
        };
        let index = name.and_then(|n| {
            let mut same = cfg
                .capabilities
                .iter()
                .enumerate()
                .filter(|(_, c)| c.get_ref().declaration.get("name").and_then(Value::as_str) == Some(n));
            let first = same.next().map(|(i, _)| i);
            same.next().map(|(i, _)| i).or(first)
        });
        match (index, &e) {
            (Some(i), crate::BuildError::OutputSchema { .. }) => {
                format!("{}: capabilities[{i}]: {e}", at(&[Key("capabilities"), Index(i), Key("output_schema")]))
            }
            (Some(i), _) => format!("{}: capabilities[{i}]: {e}", at(&[Key("capabilities"), Index(i), Key("name")])),
            (None, _) => format!("{}: {e}", path.display()),
        }
    })?;
    let doc = match key {
        None if !cfg.agent.published_keys.is_empty() => {
            return Err(format!(
                "{}: agent.published_keys: the DID document is served only with agent.key_file; set it, or remove \
                 published_keys",
                at(&[Key("agent"), Key("published_keys")])
            ));
        }
        None => None,
        Some(key) => {
            let mut keys = vec![(cfg.agent.key_id.clone(), key.verifying_key().to_jwk())];
            keys.extend(published_keys(cfg, text, path)?);
            let doc = DidDocument::try_generate(&did, &keys).map_err(|e| {
                format!("{}: agent.key_id {:?}: {e}", at(&[Key("agent"), Key("key_id")]), cfg.agent.key_id)
            })?;
            Some((document_path(&did), serde_json::to_value(&doc).map_err(|e| e.to_string())?))
        }
    };
    let kept = Kept {
        store: agent.engine().store().clone(),
        redis: shared,
        event_log: agent.engine().streaming().map(|s| s.log().clone()),
        sessions: agent.sessions().cloned(),
    };
    Ok((agent, doc, kept))
}
