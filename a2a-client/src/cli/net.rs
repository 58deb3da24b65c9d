//! The commands that talk to an agent.

use std::io::Read;
use std::time::Duration;

use a2a_core::integrity::Coverage;
use a2a_core::wire::ExecutionStatus;
use serde_json::{Value, json};

use super::output::{Output, Spinner};
use super::{Command, CoverageArg, FallbackArg, Global, SignArg, VerifyArg, exit_code};
use crate::fallback::FallbackPolicy;
use crate::{
    CallOptions, Client, ClientConfig, ClientError, ExecuteOptions, Identity, Progress, ResponseVerification,
    SigningMode, Wait,
};

/// The DID used when none is given: a claim that names no one (`.invalid`, RFC 6761), for trying agents out.
pub(crate) const ANONYMOUS_DID: &str = "did:web:anonymous.invalid";

/// Reads `JSON`, `@FILE` or `@-` (stdin).
pub(crate) fn read_json_arg(what: &str, arg: &str) -> Result<Value, ClientError> {
    let text = if let Some(path) = arg.strip_prefix('@') {
        if path == "-" {
            let mut s = String::new();
            std::io::stdin()
                .read_to_string(&mut s)
                .map_err(|e| ClientError::invalid(format!("{what}: cannot read stdin: {e}")))?;
            s
        } else {
            std::fs::read_to_string(path)
                .map_err(|e| ClientError::invalid(format!("{what}: cannot read {path}: {e}")))?
        }
    } else {
        arg.to_owned()
    };
    serde_json::from_str(&text)
        .map_err(|e| ClientError::invalid(format!("{what} is not valid JSON: {e} (give JSON, @FILE, or @- for stdin)")))
}

fn build_client(g: &Global, url: &str) -> Result<Client, ClientError> {
    let did = g.did.as_deref().unwrap_or(ANONYMOUS_DID);
    let identity = match &g.key {
        Some(path) => Identity::from_pem_file(did, &g.key_id, path)?,
        None => Identity::unsigned(did)?,
    };
    if g.key.is_some() && g.did.is_none() {
        return Err(ClientError::invalid("--key needs --did: the DID whose document publishes the key"));
    }
    let mut config = ClientConfig::default().with_step_timeout(g.timeout);
    config.signing = match g.sign {
        SignArg::Never => SigningMode::Never,
        SignArg::Auto => SigningMode::Auto,
        SignArg::Always => SigningMode::Always,
    };
    config.body_coverage = match g.coverage {
        CoverageArg::HeaderOnly => Coverage::HeaderOnly,
        CoverageArg::PayloadHash => Coverage::PayloadHash,
        CoverageArg::FullPayload => Coverage::FullPayload,
    };
    config.response_verification = match g.verify {
        VerifyArg::Off => ResponseVerification::Off,
        VerifyArg::IfSigned => ResponseVerification::IfSigned,
        VerifyArg::Required => ResponseVerification::Required,
    };
    config = config.with_did_resolution(g.allow_http_loopback_dids, g.allow_private_dids);
    if let Some(r) = &g.region {
        config = config.with_region(r.clone());
    }
    for f in &g.ca_cert {
        let pem = std::fs::read(f).map_err(|e| ClientError::invalid(format!("--ca-cert {}: {e}", f.display())))?;
        config = config.with_root_certificate(pem);
    }
    let mut b = Client::builder(identity).config(config);
    if let Some(k) = &g.api_key {
        b = b.api_key(url, k.clone())?;
    }
    if let Some(t) = &g.bearer {
        b = b.bearer_token(url, t.clone())?;
    }
    b.build()
}

fn url_of(c: &Command) -> &str {
    match c {
        Command::Discover { url }
        | Command::Capabilities { url }
        | Command::Negotiate { url, .. }
        | Command::Call { url, .. }
        | Command::Result { url, .. }
        | Command::Cancel { url, .. }
        | Command::Fallback { url, .. } => url,
        Command::Session(s) => s.url(),
        _ => "",
    }
}

/// Runs a network command and returns the exit code.
pub(crate) async fn run(out: &Output, g: &Global, command: Command) -> i32 {
    let client = match build_client(g, url_of(&command)) {
        Ok(c) => c,
        Err(e) => {
            out.error(&e);
            return exit_code(&e);
        }
    };
    match execute(out, &client, command).await {
        Ok(code) => code,
        Err(e) => {
            out.error(&e);
            exit_code(&e)
        }
    }
}

async fn execute(out: &Output, client: &Client, command: Command) -> Result<i32, ClientError> {
    match command {
        Command::Discover { url } => {
            let d = client.discover(&url).await?;
            if out.json {
                out.json_doc(&json!({"endpoint": d.endpoint.as_str(), "agent": d.agent, "version": d.version,
                                     "capabilities": d.capabilities, "regions": d.regions}));
            } else {
                out.line(format!("agent         {}", d.agent));
                out.line(format!("endpoint      {}", d.endpoint));
                out.line(format!("version       {}", d.version));
                out.line(format!(
                    "capabilities  {}",
                    if d.capabilities.is_empty() { "(none)".to_owned() } else { d.capabilities.join(", ") }
                ));
                for (cap, regions) in &d.regions {
                    out.line(format!("region        {cap}: {}", regions.join(", ")));
                }
            }
            Ok(0)
        }
        Command::Capabilities { url } => {
            let c = client.capabilities(&url).await?;
            if out.json {
                out.json_doc(&serde_json::to_value(&c.document).unwrap_or_default());
                return Ok(0);
            }
            let doc = &c.document;
            out.line(format!(
                "agent     {}{}",
                doc.agent.id,
                doc.agent.name.as_ref().map(|n| format!(" ({n})")).unwrap_or_default()
            ));
            out.line(format!(
                "features  {}",
                if doc.features.is_empty() { "(none)".into() } else { doc.features.join(", ") }
            ));
            if let Some(l) = &doc.limits {
                out.line(format!(
                    "limits    body {} bytes, wait {} ms, timeout {} ms, confirm window {} ms",
                    l.max_body_bytes, l.max_wait_ms, l.max_timeout_ms, l.confirm_window_ms
                ));
            }
            for d in &doc.capabilities {
                out.line("");
                out.line(format!("{}  [{}]", d.name, d.auth_requirement.as_str()));
                out.line(format!("  {}", d.description));
                let mut facts = Vec::new();
                if let Some(c) = d.estimated_cost {
                    facts.push(format!("cost {c}"));
                }
                if let Some(l) = d.estimated_latency_ms {
                    facts.push(format!("~{l} ms"));
                }
                if !d.region_restriction.is_empty() {
                    facts.push(format!("regions {}", d.region_restriction.join(", ")));
                }
                if !d.fallback_for.is_empty() {
                    facts.push(format!("fallback for {}", d.fallback_for.join(", ")));
                }
                if !d.sub_capabilities.is_empty() {
                    facts.push(format!("made of {}", d.sub_capabilities.join(", ")));
                }
                if !facts.is_empty() {
                    out.line(format!("  {}", facts.join("; ")));
                }
                out.line(format!("  input: {}", serde_json::to_string(&d.input_schema).unwrap_or_default()));
            }
            Ok(0)
        }
        Command::Negotiate { url, capability, schema, strict, timeout_ms } => {
            let schema = schema.map(|s| read_json_arg("--schema", &s)).transpose()?;
            let n = client.negotiate_with(&url, &capability, schema, timeout_ms, strict).await?;
            if out.json {
                out.json_doc(&serde_json::to_value(&n.response).unwrap_or_default());
                return Ok(0);
            }
            let r = &n.response;
            out.line(format!("negotiation  {}", r.negotiation_id));
            out.line(format!("capability   {} [{}]", r.target_capability, r.auth_requirement.as_str()));
            out.line(format!("expires      {}", r.expires_at));
            out.line(format!("timeout      {} ms (confirm within {} ms)", r.timeout_ms, r.confirm_window_ms));
            out.line(format!("tightened    {}", if r.tightened { "yes" } else { "no" }));
            for c in &r.changes {
                out.line(format!("  {}: {}", c.path, c.message));
            }
            out.line("agreed schema:");
            out.line(serde_json::to_string_pretty(&r.agreed_schema).unwrap_or_default());
            Ok(0)
        }
        Command::Call {
            url,
            capability,
            data,
            schema,
            fallback,
            deadline,
            timeout_ms,
            idempotency_key,
            cancel_on_deadline,
            stream,
        } => {
            let payload = read_json_arg("--data", &data)?;
            if stream {
                let proposed = match schema {
                    Some(s) => Some(read_json_arg("--schema", &s)?),
                    None => None,
                };
                let neg = match timeout_ms {
                    Some(t) => client.negotiate_with(&url, &capability, proposed, Some(t), false).await?,
                    None => client.negotiate(&url, &capability, proposed).await?,
                };
                let mut eo = ExecuteOptions::default();
                if let Some(k) = idempotency_key {
                    eo = eo.idempotency_key(k);
                }
                let exe = client.execute(&neg, &payload, &eo).await?;
                client.confirm(&exe).await?;
                out.note(format!("streaming execution {}", exe.id()));
                return print_stream(out, client, &url, exe.id(), deadline, 0).await;
            }
            let mut opts = CallOptions::default().deadline(deadline).cancel_on_deadline(cancel_on_deadline);
            if let Some(s) = schema {
                opts = opts.proposed_schema(read_json_arg("--schema", &s)?);
            }
            if let Some(t) = timeout_ms {
                opts = opts.timeout_ms(t);
            }
            if let Some(k) = idempotency_key {
                opts = opts.idempotency_key(k);
            }
            opts = opts.fallback(match fallback {
                FallbackArg::TryOthers => FallbackPolicy::default(),
                FallbackArg::AcceptDegraded => FallbackPolicy::accept_degraded(),
                FallbackArg::Refuse => FallbackPolicy::refuse(),
            });
            let spinner = Spinner::start(out);
            let state = spinner.handle();
            opts = opts.on_progress(move |p| {
                let text = match p {
                    Progress::Step { step: crate::Step::Result, .. } => "waiting for the result".to_owned(),
                    Progress::Step { step, endpoint } => format!("{step} {endpoint}"),
                    Progress::Waiting { execution_id, status, .. } => format!("waiting for {execution_id}: {status}"),
                    Progress::Fallback { capability, endpoint, .. } => {
                        format!("falling back to {capability} at {endpoint}")
                    }
                };
                if let Ok(mut g) = state.lock() {
                    *g = text;
                }
            });
            spinner.set(format!("calling {capability}"));
            let r = client.call_with(&url, &capability, payload, &opts).await;
            spinner.finish().await;
            let o = r?;
            if out.json {
                out.json_doc(&json!({
                    "result": o.result,
                    "requested_capability": o.requested_capability,
                    "capability": o.capability,
                    "degraded": o.degraded,
                    "fallback": o.fallback,
                    "agent": o.agent,
                    "endpoint": o.endpoint.as_str(),
                    "execution_id": o.execution_id,
                    "negotiation_id": o.negotiation_id,
                    "tightened": o.tightened,
                    "trace": {
                        "total_ms": o.trace.total.as_millis() as u64,
                        "steps": o.trace.steps.iter().map(|(s, d)| json!({"step": s.as_str(), "ms": d.as_secs_f64() * 1000.0})).collect::<Vec<_>>(),
                        "attempts": o.trace.attempts,
                        "result_polls": o.trace.result_polls,
                    },
                }));
            } else {
                if o.degraded || o.fallback.is_some() {
                    out.note(format!(
                        "note: {} could not serve {}; the result comes from {}{} at {}",
                        o.trace.attempts.first().map(|a| a.split(' ').next().unwrap_or("")).unwrap_or(""),
                        o.requested_capability,
                        o.capability,
                        if o.degraded { " (degraded)" } else { "" },
                        o.endpoint
                    ));
                }
                out.line(serde_json::to_string_pretty(&o.result).unwrap_or_default());
                out.note(format!(
                    "{} by {} in {:.0} ms (execution {})",
                    o.capability,
                    o.agent,
                    o.trace.total.as_secs_f64() * 1000.0,
                    o.execution_id
                ));
            }
            Ok(0)
        }
        Command::Result { url, execution_id, stream: true, deadline, last_event_id, .. } => {
            print_stream(out, client, &url, &execution_id, deadline, last_event_id).await
        }
        Command::Result { url, execution_id, wait, deadline, .. } => {
            let spinner = if wait { Some(Spinner::start(out)) } else { None };
            if let Some(s) = &spinner {
                s.set(format!("waiting for {execution_id}"));
            }
            let r = client.result(&url, &execution_id, if wait { Wait::For(deadline) } else { Wait::No }).await;
            if let Some(s) = spinner {
                s.finish().await;
            }
            let r = r?;
            if out.json {
                out.json_doc(&serde_json::to_value(&r).unwrap_or_default());
            } else {
                out.line(format!("execution  {}", r.execution_id));
                out.line(format!("capability {}", r.capability));
                out.line(format!("status     {}", r.status));
                out.line(format!("updated    {}", r.updated_at));
                if let Some(res) = &r.result {
                    out.line(serde_json::to_string_pretty(res).unwrap_or_default());
                }
                if let Some(e) = &r.error {
                    out.line(format!("error      {}: {}", e.code, e.message));
                }
            }
            Ok(match r.status {
                ExecutionStatus::Succeeded => 0,
                s if s.is_terminal() => 1,
                // Still running: with --wait the deadline passed.
                _ if wait => {
                    out.note(format!("a2a: the execution is still {}; wait longer with --deadline", r.status));
                    4
                }
                _ => 0,
            })
        }
        Command::Cancel { url, execution_id } => {
            let r = client.cancel(&url, &execution_id).await?;
            if out.json {
                out.json_doc(&serde_json::to_value(&r).unwrap_or_default());
            } else {
                out.line(format!("execution  {}\nstatus     {}", r.execution_id, r.status));
            }
            Ok(0)
        }
        Command::Fallback { url, capability, reason } => {
            let f = client.fallback(&url, &capability, reason.as_deref()).await?;
            if out.json {
                out.json_doc(&serde_json::to_value(&f).unwrap_or_default());
                return Ok(0);
            }
            if f.fallback_options.is_empty() {
                out.line(format!("no alternative to {capability} is known"));
            }
            for o in &f.fallback_options {
                let rel =
                    o.relation.and_then(|r| serde_json::to_value(r).ok()).and_then(|v| v.as_str().map(str::to_owned));
                out.line(format!(
                    "{}  {}  {}{}{}",
                    o.capability,
                    rel.unwrap_or_default(),
                    o.endpoint.as_deref().or(o.agent.as_deref()).unwrap_or("(this agent)"),
                    o.estimated_cost.map(|c| format!("  cost {c}")).unwrap_or_default(),
                    o.estimated_latency_ms.map(|l| format!("  ~{l} ms")).unwrap_or_default(),
                ));
            }
            Ok(0)
        }
        Command::Session(s) => super::session::execute(out, client, s).await,
        Command::Keygen { .. } | Command::Key(_) | Command::Schema(_) | Command::Capability(_) | Command::A2a1x(_) => {
            Ok(2)
        }
    }
}

/// Prints the events of a streamed RESULT as they arrive (§18); the exit code follows the final status.
async fn print_stream(
    out: &Output,
    client: &Client,
    url: &str,
    execution_id: &str,
    deadline: Duration,
    last_event_id: u64,
) -> Result<i32, ClientError> {
    use futures_util::StreamExt;
    let opts = crate::StreamOptions::default().max_duration(deadline).last_event_id(last_event_id);
    let mut events = client.stream_result(url, execution_id, opts).await?;
    while let Some(event) = events.next().await {
        let event = event?;
        let line = match &event {
            crate::StreamEvent::Status { id, status, attempt, at } => {
                json!({"id": id, "event": "status", "status": status, "attempt": attempt, "at": at})
            }
            crate::StreamEvent::Progress { id, data } => json!({"id": id, "event": "progress", "data": data}),
            crate::StreamEvent::Truncated { id, error } => json!({"id": id, "event": "truncated", "error": error}),
            crate::StreamEvent::Result { id, result, verified } => {
                json!({"id": id, "event": "result", "result": result, "verified": verified})
            }
        };
        let code = match &event {
            crate::StreamEvent::Result { result, .. } => {
                Some(if result.status == ExecutionStatus::Succeeded { 0 } else { 1 })
            }
            _ => None,
        };
        if out.json {
            out.line(line.to_string());
        } else {
            print_event(out, &event);
        }
        if let Some(code) = code {
            return Ok(code);
        }
    }
    Ok(1)
}

/// One streamed event for people.
fn print_event(out: &Output, event: &crate::StreamEvent) {
    match event {
        crate::StreamEvent::Status { id, status, attempt, .. } => {
            out.line(format!("[{id}] status {status} (attempt {attempt})"));
        }
        crate::StreamEvent::Progress { id, data } => out.line(format!("[{id}] {data}")),
        crate::StreamEvent::Truncated { id, error } => out.line(format!("[{id}] truncated: {}", error.message)),
        crate::StreamEvent::Result { id, result, .. } => {
            out.line(format!("[{id}] {} ", result.status));
            if let Some(res) = &result.result {
                out.line(serde_json::to_string_pretty(res).unwrap_or_default());
            }
            if let Some(e) = &result.error {
                out.line(format!("error      {}: {}", e.code, e.message));
            }
        }
    }
}
