//! The agent of `a2a-server --config FILE`, running: the configuration in force is swapped in whole when `SIGHUP`
//! reloads the file (OPS-4). What holds state is kept across a reload — the state store (an in-memory store holds
//! the executions in flight), the Redis connection, the event log, the sessions — and everything else (capabilities,
//! limits, auth keys, CORS, the bridge, the admin token) is rebuilt from the new file. The agent it replaces stops
//! taking work and finishes the executions it runs; their results are in the kept store, served by the new agent.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use arc_swap::ArcSwap;
use axum::Router;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

use crate::Agent;
use crate::app::{Kept, build_agent, config_routers, load_config, prepare_config};
use crate::config::Config;
use crate::registry::RegistryEntry;
use crate::reload::{Signal, Signals, changed_keys, keep_running};

/// The settings of an agent's configuration that only a restart changes (OPS-4): a reload logs a change to one of
/// them as needing a restart and keeps the running value. The listeners, the identity and the keys, the state
/// store and what lives in it (the in-memory store's bounds and retention, the event log, the sessions), and the
/// connection-level limits of the listener.
pub(crate) const RESTART_ONLY: &[&str] = &[
    "agent.did",
    "agent.listen",
    "agent.endpoint",
    "agent.key_file",
    "agent.key_id",
    "admin.listen",
    "store",
    "streaming",
    "sessions",
    "limits.max_connections",
    "limits.max_header_bytes",
    "limits.max_headers",
    "limits.header_read_timeout_ms",
    "limits.shutdown_grace_ms",
    "limits.max_negotiations",
    "limits.max_negotiations_per_sender",
    "limits.max_received_executions",
    "limits.max_received_per_sender",
    "limits.max_nonces",
    "limits.max_nonces_per_sender",
    "limits.result_retention_ms",
    "mcp",
];

/// The configuration in force.
struct Current {
    agent: Agent,
    /// The callers' listener's routes.
    app: Router,
    /// The admin listener's routes.
    admin: Router,
    /// The configuration text it was built from (with the running values of [`RESTART_ONLY`] settings).
    text: String,
    registry_ttl: Duration,
    registers: bool,
    /// The MCP servers of its `mcp` handlers (§21.9), closed when the agent stops (MCP-40).
    mcp_servers: Vec<Arc<a2a_server::handler::mcp::McpServer>>,
}

/// The heartbeat announcing the capabilities in force in the shared registry.
struct Heartbeat {
    stop: CancellationToken,
    task: tokio::task::JoinHandle<()>,
}

/// A running agent whose configuration can be reloaded.
struct Live {
    path: PathBuf,
    trusted_gateways: Vec<String>,
    current: ArcSwap<Current>,
    kept: Kept,
    endpoint: String,
    /// Agents replaced by a reload, still finishing their executions.
    retired: Mutex<Vec<Agent>>,
    heartbeat: tokio::sync::Mutex<Option<Heartbeat>>,
    /// One reload at a time.
    reloading: tokio::sync::Mutex<()>,
    /// The MCP front at `/mcp` (spec §21), when served; kept across reloads (`mcp` needs a restart).
    mcp: Option<Arc<a2a_mcp::inbound::Front>>,
}

impl Live {
    /// The callers' listener's router: the probes (OPS-2), then whatever the configuration in force serves.
    fn router(self: &Arc<Self>) -> Router {
        let live = self.clone();
        let mut probes = crate::app::probe_router(self.kept.store.clone());
        if let Some(front) = &self.mcp {
            // MCP-1: `/mcp`, before whatever the configuration in force serves.
            probes = probes.route_service(a2a_mcp::inbound::PATH, front.service());
        }
        probes.fallback_service(tower::service_fn(move |req: axum::extract::Request| {
            let app = live.current.load().app.clone();
            async move { app.oneshot(req).await }
        }))
    }

    /// The admin listener's router (OPS-1), following the configuration in force.
    fn admin_router(self: &Arc<Self>) -> Router {
        let live = self.clone();
        Router::new().fallback_service(tower::service_fn(move |req: axum::extract::Request| {
            let admin = live.current.load().admin.clone();
            async move { admin.oneshot(req).await }
        }))
    }

    /// Announces the capabilities in force in the shared registry (replacing the previous heartbeat).
    async fn restart_heartbeat(&self) {
        let mut slot = self.heartbeat.lock().await;
        if let Some(old) = slot.take() {
            old.stop.cancel();
            let _ = tokio::time::timeout(Duration::from_secs(2), old.task).await;
        }
        let current = self.current.load_full();
        if !current.registers {
            return;
        }
        let engine = current.agent.engine();
        let entries = engine
            .capabilities()
            .iter()
            .map(|c| RegistryEntry {
                agent: current.agent.did().to_owned(),
                endpoint: Some(self.endpoint.clone()),
                capability: c.decl.clone(),
                updated_at_ms: 0,
                expires_at_ms: None,
            })
            .collect();
        let stop = CancellationToken::new();
        let task =
            crate::registry::start_heartbeat(engine.registry().clone(), entries, current.registry_ttl, stop.clone())
                .await;
        *slot = Some(Heartbeat { stop, task });
    }

    /// `SIGHUP` (OPS-4): reads the file again and swaps the agent it describes in, or refuses it.
    async fn reload(self: &Arc<Self>) {
        let _one = self.reloading.lock().await;
        tracing::info!(config = %self.path.display(), "SIGHUP: reloading the configuration");
        match self.try_reload().await {
            Ok(()) => tracing::info!(config = %self.path.display(), "configuration reloaded"),
            Err(e) => tracing::warn!("reload refused: {e}; the running configuration is kept"),
        }
        // OPS-5: the agent writes no log file of its own (its log is stderr, its audit in memory or Redis).
    }

    async fn try_reload(self: &Arc<Self>) -> Result<(), String> {
        let (cfg, text) = load_config(&self.path, &self.trusted_gateways)?;
        let running = self.current.load().text.clone();
        let changed = changed_keys(&running, &text, RESTART_ONLY);
        let (mut cfg, text) = if changed.is_empty() {
            (cfg, text)
        } else {
            for k in &changed {
                tracing::warn!(setting = k, "reload: {k} changed, which needs a restart; the running value is kept");
            }
            let kept = keep_running(&running, &text, &changed)?;
            let cfg = Config::parse(&kept, &self.path).map_err(|e| e.to_string())?;
            prepare_config(cfg, kept, &self.path, &self.trusted_gateways)?
        };
        // §21.9: the MCP servers are connected anew and their tools imported again (MCP-41).
        cfg.connect_mcp(&text, &self.path).await.map_err(|e| e.to_string())?;
        let (agent, did_doc, _) = build_agent(&cfg, &text, &self.path, Some(&self.kept))?;
        let (app, admin) = config_routers(&agent, did_doc, &cfg, &text, &self.path)?;
        let registers = self.current.load().registers;
        let mcp_servers = cfg.mcp_servers();
        let next = Current { agent, app, admin, text, registry_ttl: cfg.store.registry_ttl(), registers, mcp_servers };
        let old = self.current.swap(Arc::new(next));
        self.restart_heartbeat().await;
        // The replaced agent confirms no new work and finishes what it runs (within its longest execution timeout).
        let retired = old.agent.clone();
        let patience = Duration::from_millis(
            retired.engine().limits().max_timeout_ms.saturating_add(retired.engine().limits().confirm_window_ms),
        ) + Duration::from_secs(5);
        self.retired.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(retired.clone());
        let live = self.clone();
        tokio::spawn(async move {
            if !retired.drain(patience).await {
                tracing::warn!("executions of the replaced configuration were still running; they were told to stop");
            }
            let mut list = live.retired.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            list.retain(|a| !Arc::ptr_eq(a.engine(), retired.engine()));
        });
        Ok(())
    }
}

/// `a2a-server --config FILE`: serves the agent the file describes until `SIGTERM` or Ctrl-C; `SIGHUP` reloads the
/// file (OPS-4), `SIGUSR1` is the log reopening signal (OPS-5; the agent has no log file of its own).
pub(crate) async fn run(path: &Path, listen: Option<&str>, trusted_gateways: &[String]) -> Result<(), String> {
    let (mut cfg, text) = load_config(path, trusted_gateways)?;
    // §21.9: connect to the MCP servers of `mcp` handlers and import their tools, or do not start (MCP-38).
    cfg.connect_mcp(&text, path).await.map_err(|e| e.to_string())?;
    let (agent, did_doc, kept) = build_agent(&cfg, &text, path, None)?;
    let listen = listen.or(cfg.agent.listen.as_deref()).unwrap_or("127.0.0.1:8080");
    let listener: TcpListener = crate::app::bind_listener(listen).await?;
    let (base, _) = crate::app::listener_base(&listener)?;
    let (app, admin) = config_routers(&agent, did_doc, &cfg, &text, path)?;
    let endpoint = cfg.agent.endpoint.clone().unwrap_or_else(|| format!("{base}/a2a"));
    let mcp = crate::app::mcp_front(&cfg, path)?;
    if let (Some(front), Ok(addr)) = (&mcp, listener.local_addr()) {
        // MCP-1: the front calls this agent's own `/a2a` over loopback.
        front.set_endpoint(&a2a_mcp::inbound::Front::loopback_endpoint(addr));
    }
    let registers = cfg.store.redis(|k| std::env::var(k).ok()).is_some();
    let mcp_servers = cfg.mcp_servers();
    let current = Current {
        agent: agent.clone(),
        app,
        admin,
        text,
        registry_ttl: cfg.store.registry_ttl(),
        registers,
        mcp_servers,
    };
    let live = Arc::new(Live {
        path: path.to_owned(),
        trusted_gateways: trusted_gateways.to_vec(),
        current: ArcSwap::from_pointee(current),
        kept,
        endpoint: endpoint.clone(),
        retired: Mutex::new(Vec::new()),
        heartbeat: tokio::sync::Mutex::new(None),
        reloading: tokio::sync::Mutex::new(()),
        mcp: mcp.clone(),
    });
    let admin_stop = CancellationToken::new();
    if let Some(admin_listen) = &cfg.admin.listen {
        let admin_listener = crate::app::bind_listener(admin_listen).await?;
        let admin_app = live.admin_router();
        let limits = agent.engine().limits().clone();
        let stop = admin_stop.clone();
        tracing::info!(address = %admin_listen, "serving /metrics on the admin listener");
        tokio::spawn(async move {
            let _ =
                crate::serve::serve(admin_listener, admin_app, &limits, stop.cancelled_owned(), Duration::ZERO).await;
        });
    }
    let _admin_stop = admin_stop.drop_guard();
    tracing::info!(did = %agent.did(), endpoint = %endpoint, "agent listening");
    if let Err(e) = agent.engine().store().ping().await {
        tracing::warn!(error = %e, "the state store does not answer yet; requests that need it get 503 until it does");
    }
    // With a shared store, announce this process's capabilities in the shared registry, refreshed by a heartbeat.
    live.restart_heartbeat().await;
    if let Some(sessions) = agent.sessions() {
        if sessions.endpoint().is_none() {
            sessions.set_endpoint(endpoint.clone());
        }
        sessions.refresh_hosted().await;
    }
    // OPS-4, OPS-5: from here on SIGHUP and SIGUSR1 no longer end the process.
    let mut signals = Signals::new();
    let reloader = live.clone();
    let signal_task = tokio::spawn(async move {
        loop {
            match signals.next().await {
                Signal::Reload => reloader.reload().await,
                Signal::Reopen => {
                    tracing::info!(
                        "SIGUSR1: the agent writes no log file of its own (its log is stderr); nothing to reopen"
                    )
                }
            }
        }
    });
    println!("a2a-server: {} serving {base}/a2a", agent.did());
    if mcp.is_some() {
        println!("a2a-server: MCP (Streamable HTTP) at {base}/mcp");
    }
    drop(agent);
    let limits = live.current.load().agent.engine().limits().clone();
    let grace = Duration::from_millis(limits.shutdown_grace_ms);
    let sessions = live.kept.sessions.clone();
    // LIM-7: one single-threaded runtime per CPU serves the connections; they keep running what requests started
    // until the agents are drained below.
    let served =
        crate::serve::serve_threads(listener, live.router(), &limits, crate::app::shutdown(sessions.clone()), grace, 0)
            .await
            .map_err(|e| e.to_string());
    signal_task.abort();
    // Drain the agent in force and those a reload replaced, together.
    let mut agents = vec![live.current.load().agent.clone()];
    agents.extend(live.retired.lock().unwrap_or_else(std::sync::PoisonError::into_inner).iter().cloned());
    let drained = futures_util::future::join_all(agents.iter().map(|a| a.drain(grace))).await;
    if drained.iter().any(|d| !d) {
        tracing::warn!("executions were still running after the grace period; they were told to stop");
    }
    if let Some(s) = sessions {
        s.shutdown().await;
    }
    // MCP-40: the MCP servers' connections end with the agent (a stdio server's process group is killed).
    for server in &live.current.load().mcp_servers {
        server.close().await;
    }
    if let Some(h) = live.heartbeat.lock().await.take() {
        h.stop.cancel();
        let _ = tokio::time::timeout(Duration::from_secs(2), h.task).await;
    }
    served.map(drop)
}
