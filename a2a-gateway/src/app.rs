//! What the `a2a-gateway` binary does, as library functions: serve a configuration, or query its audit log.

use std::path::Path;
use std::time::Duration;

use crate::audit::{AuditParams, AuditSinks};
use crate::config::Config;
use crate::{Gateway, Options};

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
    tracing::info!("shutting down: no new connections, finishing requests in flight");
}

/// The settings of the gateway's configuration that only a restart changes (OPS-4): a reload logs a change to one of
/// them as needing a restart and keeps the running value. The listener and its threads, the identity and key, the
/// shared store, the registry reader, the audit sinks, balancing and the DISCOVER cache (the agents' health and
/// answers live there), and the limits of what is kept across reloads (agents, routes, agent connections, the
/// process-wide budgets).
pub const RESTART_ONLY: &[&str] = &[
    "gateway.did",
    "gateway.listen",
    "gateway.workers",
    "gateway.key_file",
    "gateway.key_id",
    "store",
    "registry",
    "audit",
    "balancing",
    "discover_cache",
    "admin.console_sample_ms",
    "admin.console_samples",
    "admin.console_records",
    "limits.max_agents",
    "limits.max_routes",
    "limits.max_connections",
    "limits.max_buffered_body_bytes",
    "limits.connect_timeout_ms",
    "limits.agent_timeout_ms",
    "limits.pool_max_idle_per_agent",
    "limits.pool_idle_timeout_ms",
    "limits.result_retention_ms",
    "limits.shutdown_grace_ms",
    "mcp",
];

/// The configuration file in force and the text it was built from (with the running values of [`RESTART_ONLY`]).
struct Running {
    path: std::path::PathBuf,
    text: String,
}

impl Running {
    /// `SIGHUP` (OPS-4): reads the file again and swaps it in, or refuses it; then reopens the audit file (OPS-5).
    async fn reload(&mut self, gateway: &Gateway) {
        tracing::info!(config = %self.path.display(), "SIGHUP: reloading the configuration");
        match self.try_reload(gateway) {
            Ok(()) => tracing::info!(config = %self.path.display(), "configuration reloaded"),
            Err(e) => tracing::warn!("reload refused: {e}; the running configuration is kept"),
        }
        reopen(gateway, "SIGHUP").await;
    }

    fn try_reload(&mut self, gateway: &Gateway) -> Result<(), String> {
        let text = std::fs::read_to_string(&self.path)
            .map_err(|e| format!("{}: cannot read the configuration: {e}", self.path.display()))?;
        // Checked as written first, so that errors point into the file.
        let cfg = Config::parse(&text, &self.path).map_err(|e| e.to_string())?;
        let changed = a2a_runtime::reload::changed_keys(&self.text, &text, RESTART_ONLY);
        let (cfg, text) = if changed.is_empty() {
            (cfg, text)
        } else {
            for k in &changed {
                tracing::warn!(setting = k, "reload: {k} changed, which needs a restart; the running value is kept");
            }
            let kept = a2a_runtime::reload::keep_running(&self.text, &text, &changed)?;
            (Config::parse(&kept, &self.path).map_err(|e| e.to_string())?, kept)
        };
        let base = self.path.parent().unwrap_or(Path::new("."));
        gateway.reload(&cfg, base).map_err(|e| format!("{}: {e}", self.path.display()))?;
        self.text = text;
        Ok(())
    }
}

/// Reopens the audit file (OPS-5), logging what happened.
async fn reopen(gateway: &Gateway, signal: &str) {
    match gateway.reopen_logs().await {
        Ok(true) => tracing::info!(signal, "audit file reopened"),
        Ok(false) => tracing::debug!(signal, "no audit file to reopen"),
        Err(e) => tracing::error!(signal, error = %e, "cannot reopen the audit file; records go to the old one"),
    }
}

/// `a2a-gateway --config FILE [--listen ADDR]`. `SIGHUP` reloads the file (OPS-4) and reopens the audit file,
/// `SIGUSR1` reopens the audit file (OPS-5).
pub async fn run(path: &Path, listen: Option<&str>) -> Result<(), String> {
    let text =
        std::fs::read_to_string(path).map_err(|e| format!("{}: cannot read the configuration: {e}", path.display()))?;
    let cfg = Config::parse(&text, path).map_err(|e| e.to_string())?;
    let base = path.parent().unwrap_or(Path::new("."));
    let gateway = Gateway::from_config(&cfg, base, Options::default())?;
    let listen = listen.or(cfg.gateway.listen.as_deref()).unwrap_or("127.0.0.1:8443");
    let listener = tokio::net::TcpListener::bind(listen).await.map_err(|e| {
        format!("cannot listen on {listen}: {e}; choose another address with --listen (port 0 picks a free port)")
    })?;
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    // Agents that registered themselves are routed to from the first request on.
    gateway.ready().await;
    println!(
        "a2a-gateway: {} serving http://{addr}/a2a in front of {} configured agents",
        gateway.did(),
        cfg.agents.len()
    );
    if gateway.mcp().is_some() {
        println!("a2a-gateway: MCP (Streamable HTTP) at http://{addr}/mcp");
    }
    // OPS-4, OPS-5: from here on SIGHUP and SIGUSR1 no longer end the process.
    let mut signals = a2a_runtime::reload::Signals::new();
    let mut running = Running { path: path.to_owned(), text };
    let reloader = gateway.clone();
    let signal_task = tokio::spawn(async move {
        loop {
            match signals.next().await {
                a2a_runtime::reload::Signal::Reload => running.reload(&reloader).await,
                a2a_runtime::reload::Signal::Reopen => reopen(&reloader, "SIGUSR1").await,
            }
        }
    });
    tracing::info!(did = %gateway.did(), %addr, workers = cfg.gateway.workers, "gateway listening");
    let listener = listener.into_std().map_err(|e| e.to_string())?;
    let served = gateway.serve_workers(listener, cfg.gateway.workers, shutdown_signal()).await;
    signal_task.abort();
    served.map_err(|e| e.to_string())
}

/// `a2a-gateway check --config FILE`: reads and checks a configuration as `run` would (the DID, the agents' URLs,
/// the key file, the Redis settings, the admin token's variable), without listening, connecting or opening the audit
/// file, and returns its warnings: settings under which the gateway can never route or log. An error is the one
/// `run` would stop with.
pub fn check(path: &Path) -> Result<Vec<String>, String> {
    let cfg = Config::load(path).map_err(|e| e.to_string())?;
    let base = path.parent().unwrap_or(Path::new("."));
    let at = |m: String| format!("{}: {m}", path.display());
    if let Some(f) = &cfg.gateway.key_file {
        let f = base.join(f);
        let pem = std::fs::read_to_string(&f).map_err(|e| at(format!("gateway.key_file {}: {e}", f.display())))?;
        a2a_core::keys::SigningKey::from_pem(&pem).map_err(|e| at(format!("gateway.key_file {}: {e}", f.display())))?;
    }
    let redis = cfg.store.redis(|k| std::env::var(k).ok());
    if let Some(r) = &redis {
        r.validate().map_err(|e| at(format!("store: {e}")))?;
    }
    if let Some(var) = &cfg.admin.token_env {
        std::env::var(var).map_err(|_| at(format!("admin.token_env: environment variable {var} is not set")))?;
    }
    let mut warnings = Vec::new();
    if cfg.agents.is_empty() && (redis.is_none() || !cfg.registry.enabled) {
        warnings.push(at("no [[agents]] and no capability registry to find agents in (it needs a Redis [store] and \
             registry.enabled): every request is refused"
            .into()));
    }
    if let Some(f) = &cfg.audit.file {
        let f = base.join(f);
        if !f.parent().is_some_and(|d| d.as_os_str().is_empty() || d.is_dir()) {
            warnings
                .push(at(format!("audit.file {}: its folder does not exist: the gateway cannot start", f.display())));
        }
    }
    if !cfg.edge.verify_signatures && cfg.edge.require_did_auth_cross_domain {
        warnings.push(at("edge.require_did_auth_cross_domain has no effect while edge.verify_signatures = false: \
                          the gateway checks no signature"
            .into()));
    }
    Ok(warnings)
}

/// `a2a-gateway audit --config FILE [--sender DID] [--negotiation ID] [--execution ID] [--limit N]`: prints the
/// matching records as JSON lines (oldest first).
pub async fn audit(path: &Path, q: AuditParams) -> Result<(), String> {
    let cfg = Config::load(path).map_err(|e| e.to_string())?;
    let base = path.parent().unwrap_or(Path::new("."));
    let redis = match cfg.store.redis(|k| std::env::var(k).ok()).filter(|_| cfg.audit.redis_stream) {
        None => None,
        Some(rc) => {
            let scope = a2a_runtime::store::redis::AgentScope {
                did: cfg.gateway.did.clone(),
                retention: Duration::from_secs(3600),
                max_received: 1,
            };
            Some((
                a2a_runtime::store::RedisStore::connect(rc, scope).map_err(|e| e.to_string())?,
                cfg.audit.stream_max_len,
            ))
        }
    };
    let sinks = AuditSinks { file: cfg.audit.file.as_ref().map(|f| base.join(f)), redis };
    let Some(log) = crate::audit::open(sinks, cfg.audit.queue)? else {
        return Err(format!("{}: the audit log is off: set [audit] file or a Redis [store]", path.display()));
    };
    let records = crate::audit::query(log.as_ref(), &q).await.map_err(|e| e.to_string())?;
    for r in records {
        println!("{}", serde_json::to_string(&r).map_err(|e| e.to_string())?);
    }
    Ok(())
}
