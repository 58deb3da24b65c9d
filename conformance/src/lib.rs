#![doc = include_str!("../README.md")]

pub mod check;
pub mod checks;
pub mod cli;
pub mod coverage;
pub mod ctx;
pub mod didhost;
pub mod http;
pub mod identity;
pub mod mutation;
pub mod payload;
pub mod render;
pub mod report;
pub mod sse;

use std::sync::Arc;
use std::time::Instant;

use a2a_core::capability::CapabilityDeclaration;
use serde_json::Value;

pub use ctx::Options;
pub use report::{Level, Report, Status};

use crate::check::{Check, Trial};
use crate::ctx::{Ctx, Discovery};
use crate::didhost::DidHost;

/// Why a run could not be made at all (as opposed to an agent failing checks).
#[derive(Debug)]
pub enum RunError {
    /// The options are unusable (a bad URL, an unreadable key, a port in use).
    Usage(String),
    /// The agent did not answer DISCOVER at all.
    Unreachable(String),
}

impl std::fmt::Display for RunError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RunError::Usage(m) => f.write_str(m),
            RunError::Unreachable(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for RunError {}

/// Progress of a run, for a display: `(index, total, check id, outcome once finished)`.
pub type Progress = Arc<dyn Fn(usize, usize, &str, Option<Status>) + Send + Sync>;

/// The checks a run with these options would run, in order.
pub fn selected_checks(level: Level, only: Option<&str>) -> Vec<Check> {
    checks::all().into_iter().filter(|c| c.level <= level && check::selected(c, only)).collect()
}

/// Runs the suite against `opts.target` and returns the report.
pub async fn run(opts: Options, progress: Option<Progress>) -> Result<Report, RunError> {
    let started = Instant::now();
    let started_at = a2a_core::wire::format_timestamp(std::time::SystemTime::now());
    let endpoint = ctx::endpoint_of(&opts.target).map_err(RunError::Usage)?;
    let client = reqwest::Client::builder()
        .http1_only()
        // A fresh connection per request: checks send requests an agent may answer early and then close the
        // connection on (oversize bodies and headers); a pooled connection the agent has closed would fail the
        // next, unrelated, check.
        .pool_max_idle_per_host(0)
        .redirect(reqwest::redirect::Policy::none())
        .timeout(opts.timeout)
        .build()
        .map_err(|e| RunError::Usage(format!("cannot build the HTTP client: {e}")))?;
    let didhost = match &opts.serve_did {
        Some(addr) => Some(DidHost::start(addr).await.map_err(RunError::Usage)?),
        None => None,
    };
    let identity = match (&opts.identity, &didhost) {
        (Some(id), _) => Some(Arc::new(id.clone())),
        (None, Some(h)) => Some(h.primary.clone()),
        (None, None) => None,
    };
    let mut ctx = Ctx::new(opts.clone(), client, endpoint.clone(), identity.clone(), didhost);
    let disc = discover(&ctx).await?;
    ctx.set_discovery(disc);
    let checks = selected_checks(opts.level, opts.only.as_deref());
    let (first, last): (Vec<&Check>, Vec<&Check>) = checks.iter().partition(|c| !c.after_all);
    let total = checks.len();
    let mut reports = Vec::with_capacity(total);
    for (i, check) in first.into_iter().chain(last).enumerate() {
        if let Some(p) = &progress {
            p(i, total, check.id, None);
        }
        let t0 = Instant::now();
        let mut trial = Trial::new(&ctx, check.id);
        let outcome = (check.run)(&mut trial).await;
        let report = trial.finish(check, outcome, t0);
        if let Some(p) = &progress {
            p(i, total, check.id, Some(report.status));
        }
        reports.push(report);
    }
    let order: Vec<&str> = checks.iter().map(|c| c.id).collect();
    reports.sort_by_key(|r| order.iter().position(|id| *id == r.id));
    let run = report::RunInfo {
        suite: "a2a-conformance".into(),
        suite_version: env!("CARGO_PKG_VERSION").into(),
        protocol_version: a2a_core::PROTOCOL_VERSION.into(),
        target: opts.target.clone(),
        endpoint,
        agent_did: ctx.disc.agent_did.clone(),
        capabilities: ctx.disc.names.clone(),
        features: ctx.disc.features.clone(),
        level: opts.level,
        only: opts.only.clone(),
        caller_did: identity.map(|i| i.did.clone()),
        started_at,
        duration_ms: started.elapsed().as_millis() as u64,
    };
    Ok(Report::new(run, reports))
}

/// DISCOVER and `GET /a2a/capabilities`, read leniently: whatever is wrong with them is for the checks to report.
async fn discover(ctx: &Ctx) -> Result<Discovery, RunError> {
    let mut req = ctx.request("OPTIONS", "");
    let discover = ctx.send("discovery", &mut req).await.map_err(|e| {
        RunError::Unreachable(format!("{} did not answer DISCOVER (OPTIONS {}): {e}", ctx.opts.target, ctx.endpoint))
    })?;
    let mut req = ctx.request("GET", "/capabilities");
    let capabilities = ctx.send("discovery", &mut req).await.ok();
    let doc = capabilities.as_ref().filter(|r| r.status == 200).and_then(|r| r.json());
    let decls: Vec<CapabilityDeclaration> = doc
        .as_ref()
        .and_then(|d| d["capabilities"].as_array())
        .map(|a| a.iter().filter_map(|c| serde_json::from_value(c.clone()).ok()).collect())
        .unwrap_or_default();
    let names = discover
        .header(a2a_core::headers::A2A_CAPABILITIES)
        .and_then(|v| serde_json::from_str::<Vec<String>>(v).ok())
        .unwrap_or_else(|| decls.iter().map(|d| d.name.clone()).collect());
    let agent_did = discover
        .header(a2a_core::headers::A2A_SENDER_ID)
        .map(|s| s.trim().to_owned())
        .or_else(|| doc.as_ref().and_then(|d| d["agent"]["id"].as_str().map(str::to_owned)));
    let features = doc
        .as_ref()
        .and_then(|d| d["features"].as_array())
        .map(|a| a.iter().filter_map(Value::as_str).map(str::to_owned).collect())
        .unwrap_or_default();
    let limits = doc.as_ref().and_then(|d| serde_json::from_value(d["limits"].clone()).ok());
    Ok(Discovery { discover: Some(discover), capabilities, agent_did, names, doc, decls, features, limits })
}
