//! Every check of the suite, and the protocol steps the checks share (NEGOTIATE, EXECUTE, CONFIRM, RESULT as
//! preparatory steps whose failure blocks a check rather than failing it).

use std::time::{Duration, Instant};

use a2a_core::execution_id::ExecutionId;
use serde_json::{Value, json};

use crate::check::{Check, Stop, Trial};
use crate::ctx::CapPlan;
use crate::http::{Req, Resp};

mod auth;
mod bridge;
mod cors;
mod discover;
mod execute;
mod executions;
mod fallback;
mod gateway;
mod headers;
mod ids;
mod invariants;
mod mcp;
mod negotiate;
mod producer;
mod quotas;
mod resolver;
mod schema;
mod sessions;
mod signature;
mod slow;
mod streaming;
mod transport;

pub use signature::python_dumps;

/// Every check, in the order they run (checks that read the whole transcript last).
pub fn all() -> Vec<Check> {
    let mut v = Vec::new();
    v.extend(discover::checks());
    v.extend(cors::checks());
    v.extend(headers::checks());
    v.extend(transport::checks());
    v.extend(negotiate::checks());
    v.extend(schema::checks());
    v.extend(execute::checks());
    v.extend(executions::checks());
    v.extend(fallback::checks());
    v.extend(auth::checks());
    v.extend(signature::checks());
    v.extend(resolver::checks());
    v.extend(gateway::checks());
    v.extend(sessions::checks());
    v.extend(streaming::checks());
    v.extend(bridge::checks());
    v.extend(mcp::checks());
    v.extend(ids::checks());
    v.extend(slow::checks());
    v.extend(producer::checks());
    v.extend(quotas::checks());
    v.extend(invariants::checks());
    v
}

/// The `applies` text of checks that always apply.
pub fn applies_always() -> &'static str {
    applies::ALWAYS
}

/// A capability name no agent offers (valid, so that only its absence is wrong).
pub(crate) const MISSING_CAPABILITY: &str = "probe_missing_capability";

/// When a check applies.
pub(crate) mod applies {
    /// Always.
    pub(crate) const ALWAYS: &str = "always";
    /// Needs a capability the suite can drive.
    pub(crate) const MAIN: &str =
        "the agent advertises a capability the suite can drive (auth none, or credentials given)";
    /// Needs the `cancel` feature.
    pub(crate) const CANCEL: &str = "the agent lists \"cancel\" in features";
    /// Needs the `long_poll` feature.
    pub(crate) const LONG_POLL: &str = "the agent lists \"long_poll\" in features";
    /// Needs the `idempotency` feature.
    pub(crate) const IDEMPOTENCY: &str = "the agent lists \"idempotency\" in features";
    /// Needs a region-restricted capability.
    pub(crate) const REGION: &str = "the agent advertises a region-restricted capability the suite can authenticate to";
    /// Needs a `did_auth` capability.
    pub(crate) const DID_AUTH: &str = "the agent advertises a did_auth capability";
    /// Needs a `did_auth` capability and a caller identity.
    pub(crate) const SIGNED: &str = "the agent advertises a did_auth capability and the run has a caller identity (--identity/--did or --serve-did)";
    /// Needs `--serve-did`.
    pub(crate) const SERVED: &str =
        "the agent advertises a did_auth capability and resolves the suite's own DIDs (--serve-did)";
    /// Needs an `api_key` capability.
    pub(crate) const API_KEY: &str = "the agent advertises an api_key capability";
    /// Needs an `oauth2` capability.
    pub(crate) const OAUTH2: &str = "the agent advertises an oauth2 capability";
}

/// The plan's main capability, or skip.
pub(crate) fn main_plan(t: &Trial<'_>) -> Result<CapPlan, Stop> {
    let plan = t.ctx.plan.main.clone().map_err(Stop::Skip)?;
    t.uses(&plan);
    Ok(plan)
}

/// The plan's slow capability (ST-2, ST-3), or skip with the reason the suite has none.
pub(crate) fn slow_plan(t: &Trial<'_>) -> Result<CapPlan, Stop> {
    let plan = t.ctx.plan.slow.clone().map_err(Stop::Skip)?;
    t.uses(&plan);
    Ok(plan)
}

/// `v` as JSON with the members of every object in the reverse of the order serde_json writes them, compact or with
/// a space after each `:` and `,` (`spaced`): the same JSON value, another serialisation (NEG-10, EXE-7: what an
/// agent compares is the value, not the bytes).
pub(crate) fn reversed_json(v: &Value, spaced: bool) -> String {
    let (colon, comma) = if spaced { (": ", ", ") } else { (":", ",") };
    match v {
        Value::Object(o) => {
            let members: Vec<String> = o
                .iter()
                .rev()
                .map(|(k, x)| format!("{}{colon}{}", Value::String(k.clone()), reversed_json(x, spaced)))
                .collect();
            format!("{{{}}}", members.join(comma))
        }
        Value::Array(a) => format!("[{}]", a.iter().map(|x| reversed_json(x, spaced)).collect::<Vec<_>>().join(comma)),
        other => other.to_string(),
    }
}

/// A NEGOTIATE body.
pub(crate) fn negotiate_body(capability: &str, schema: &Value) -> Value {
    json!({"target_capability": capability, "proposed_schema": schema})
}

/// A negotiation made in a preparatory step.
#[derive(Debug, Clone)]
pub(crate) struct Negotiated {
    /// `negotiation_id`.
    pub(crate) id: String,
    /// The response body.
    pub(crate) body: Value,
}

impl Negotiated {
    /// `agreed_schema`.
    pub(crate) fn agreed(&self) -> &Value {
        &self.body["agreed_schema"]
    }
}

/// An execution made in a preparatory step.
#[derive(Debug, Clone)]
pub(crate) struct Executed {
    /// `execution_id`.
    pub(crate) id: String,
    /// The response body.
    pub(crate) body: Value,
}

/// NEGOTIATE `schema` for the plan's capability, as a preparatory step.
pub(crate) async fn negotiate(t: &mut Trial<'_>, plan: &CapPlan, schema: &Value) -> Result<Negotiated, Stop> {
    negotiate_with(t, plan, negotiate_body(&plan.decl.name, schema)).await
}

/// NEGOTIATE with this body, as a preparatory step.
pub(crate) async fn negotiate_with(t: &mut Trial<'_>, plan: &CapPlan, body: Value) -> Result<Negotiated, Stop> {
    let req = t.ctx.for_cap(plan, "POST", "/negotiate").json(&body);
    let r = t.setup(format!("NEGOTIATE {} (preparation)", plan.decl.name), req).await?;
    let id = r.json().and_then(|b| b["negotiation_id"].as_str().map(str::to_owned));
    t.require(r.status == 200 && id.is_some(), "200 with a negotiation_id", r.summary())?;
    Ok(Negotiated { id: id.unwrap_or_default(), body: r.json().unwrap_or(Value::Null) })
}

/// An EXECUTE request.
pub(crate) fn execute_req(t: &Trial<'_>, plan: &CapPlan, negotiation: &str, payload: &Value) -> Req {
    t.ctx.for_cap(plan, "POST", "/execute").header("A2A-Negotiation-ID", negotiation).json(payload)
}

/// EXECUTE `payload`, as a preparatory step.
pub(crate) async fn execute(
    t: &mut Trial<'_>,
    plan: &CapPlan,
    negotiation: &str,
    payload: &Value,
) -> Result<Executed, Stop> {
    let req = execute_req(t, plan, negotiation, payload);
    let r = t.setup(format!("EXECUTE {} (preparation)", plan.decl.name), req).await?;
    let body = r.json().unwrap_or(Value::Null);
    let id = body["execution_id"].as_str().map(str::to_owned);
    t.require(r.status == 201 && id.is_some(), "201 with an execution_id", r.summary())?;
    Ok(Executed { id: id.unwrap_or_default(), body })
}

/// NEGOTIATE the capability's own schema and EXECUTE the plan's payload.
pub(crate) async fn executed(t: &mut Trial<'_>, plan: &CapPlan) -> Result<(Negotiated, Executed), Stop> {
    let neg = negotiate(t, plan, &plan.decl.input_schema).await?;
    let exe = execute(t, plan, &neg.id, &plan.payload).await?;
    Ok((neg, exe))
}

/// A CONFIRM (or CANCEL) request body for an execution.
pub(crate) fn execution_ref(id: &str) -> Value {
    json!({"execution_id": id})
}

/// CONFIRM as a preparatory step (a first CONFIRM: 202).
pub(crate) async fn confirm(t: &mut Trial<'_>, plan: &CapPlan, id: &str) -> Result<Resp, Stop> {
    let req = t.ctx.for_cap(plan, "POST", "/confirm").json(&execution_ref(id));
    let r = t.setup("CONFIRM (preparation)", req).await?;
    t.require(r.status == 202, "202 accepted", r.summary())?;
    Ok(r)
}

/// The RESULT path of an execution (the id as one path segment, EID-11).
pub(crate) fn result_path(id: &str) -> String {
    let seg = ExecutionId::parse(id).map(|e| e.to_path_segment()).unwrap_or_else(|_| id.replace('%', "%25"));
    format!("/result/{seg}")
}

/// A RESULT request, with `wait_ms` when given.
pub(crate) fn result_req(t: &Trial<'_>, plan: &CapPlan, id: &str, wait_ms: Option<u64>) -> Req {
    let path = match wait_ms {
        Some(w) => format!("{}?wait_ms={w}", result_path(id)),
        None => result_path(id),
    };
    let req = t.ctx.for_cap(plan, "GET", &path);
    match wait_ms {
        Some(w) => req.timeout(t.ctx.opts.timeout + Duration::from_millis(w)),
        None => req,
    }
}

/// Reads RESULT until the execution is terminal (long-poll when the agent offers it, else polling with backoff,
/// CLI-2), as preparatory steps; returns every status seen and the last body.
pub(crate) async fn wait_terminal(t: &mut Trial<'_>, plan: &CapPlan, id: &str) -> Result<(Vec<String>, Value), Stop> {
    let started = Instant::now();
    let long_poll = t.ctx.disc.has_feature("long_poll");
    let max_wait = t.ctx.disc.limits.as_ref().map_or(10_000, |l| l.max_wait_ms.clamp(1, 10_000));
    let mut delay = Duration::from_millis(100);
    let mut seen = Vec::new();
    loop {
        let wait = long_poll.then_some(max_wait);
        let r = t.setup("RESULT (waiting for a terminal state)", result_req(t, plan, id, wait)).await?;
        let body = r.json().unwrap_or(Value::Null);
        t.require(r.status == 200 && body["status"].is_string(), "200 with a status", r.summary())?;
        let status = body["status"].as_str().unwrap_or("").to_owned();
        seen.push(status.clone());
        if matches!(status.as_str(), "succeeded" | "failed" | "timed_out" | "canceled") {
            return Ok((seen, body));
        }
        if started.elapsed() > t.ctx.opts.result_timeout {
            return Err(Stop::Blocked(format!(
                "the execution was still {status} after {} s (--result-timeout)",
                t.ctx.opts.result_timeout.as_secs()
            )));
        }
        if !long_poll {
            tokio::time::sleep(delay).await;
            delay = (delay * 2).min(Duration::from_millis(1600));
        }
    }
}

/// A terminal status?
pub(crate) fn is_terminal(status: &str) -> bool {
    matches!(status, "succeeded" | "failed" | "timed_out" | "canceled")
}

/// The rank of a status in the state machine (ST-1).
pub(crate) fn rank(status: &str) -> u8 {
    match status {
        "received" => 0,
        "accepted" => 1,
        "running" => 2,
        _ => 3,
    }
}

/// Comparison of JSON values as the protocol compares them: by their RFC 8785 canonical forms (`1` equals `1.0`,
/// member order does not matter).
pub(crate) fn same_json(a: &Value, b: &Value) -> bool {
    a2a_core::canonical::to_canonical_vec(a) == a2a_core::canonical::to_canonical_vec(b)
}

/// A compact rendering of a JSON value for assertions.
pub(crate) fn show(v: &Value) -> String {
    let s = String::from_utf8_lossy(&a2a_core::canonical::to_canonical_vec(v)).into_owned();
    if s.chars().count() > 600 { format!("{}...", s.chars().take(600).collect::<String>()) } else { s }
}

/// Whether a list header (`A, B, C`) contains every name of `needed` (case-insensitive); `*` counts for every name
/// except `authorization` (Fetch: the wildcard never covers it).
pub(crate) fn list_covers(header: Option<&str>, needed: &str) -> Vec<String> {
    let have: Vec<String> =
        header.unwrap_or("").split(',').map(|s| s.trim().to_ascii_lowercase()).filter(|s| !s.is_empty()).collect();
    let star = have.iter().any(|h| h == "*");
    needed
        .split(',')
        .map(|s| s.trim().to_ascii_lowercase())
        .filter(|n| !n.is_empty())
        .filter(|n| !(have.contains(n) || (star && n != "authorization")))
        .collect()
}
