//! The request path: one linear pipeline per request — classify, limits, version, sender, rate, body, route, edge
//! security, forward, learn routes, answer — then metrics and the audit record.
//!
//! It works on requests as the gateway's own HTTP/1.1 reads them ([`crate::h1`]): the head's fields in place in the
//! buffer they arrived in, looked up by name, the forwarded request written as bytes (the caller's fields copied
//! through, minus the connection's own, plus what the gateway sets). HTTP/2 requests and requests mounted through
//! [`crate::Gateway::router`] are converted to that form at the edge ([`handle_http`]); there is one request path.
//!
//! The gateway reads only what it routes on: the bodies of NEGOTIATE, CONFIRM, CANCEL and FALLBACK (parsed strictly,
//! as an agent parses them, so that a malformed message is refused at the edge with the agent's code and
//! `details.member`), EXECUTE's `A2A-Negotiation-ID` and `Idempotency-Key` headers, RESULT's path. Request bodies are
//! forwarded as the bytes received (never re-serialised) and answers stream back from the agent, except those the
//! gateway must read (NEGOTIATE's answer, for the negotiation's lifetime and its `bridge_to`, which is the gateway's
//! own, BR-26; error answers, for their code; translated answers; signed answers, GW-15: the agent's `A2A-Signature`
//! is verified as the caller the gateway was, removed, and the gateway signs the answer for its caller in [`handle`],
//! last, after every other change). A streaming RESULT passes line by line, its `result` event's signature verified
//! and replaced ([`crate::sse_sign`]).

use std::sync::Arc;
use std::time::{Duration, Instant};

use a2a_core::capability::AuthRequirement;
use a2a_core::error::{A2aError, ErrorCode};
use a2a_core::execution_id::ExecutionId;
use a2a_core::headers as h;
use a2a_core::request::parse_json;
use a2a_core::wire::{ExecutionRef, FallbackRequest, FallbackResponse, NegotiateRequest};
use a2a_runtime::body::BodyError;
use axum::body::Body;
use bytes::Bytes;
use http::{HeaderMap, Method, Request, Response};
use serde::Deserialize;
use serde_json::json;

use crate::Inner;
use crate::agents::{Agent, AgentInfo};
use crate::audit::AuditRecord;
use crate::edge::{Forwarded, Signed};
use crate::h1::head::{Headers, RequestHead};
use crate::h1::server::{Incoming, Reply, ReplyBody};
use crate::metrics::Step;
use crate::routes::{Kind, Route};
use crate::upstream::UpstreamError;
use crate::version::Compiled;
use tracing::Instrument as _;

/// What is known about a request, for metrics and the audit record.
#[derive(Default)]
struct Ctx {
    step: Option<Step>,
    sender: Option<Arc<str>>,
    verified: bool,
    capability: Option<Arc<str>>,
    negotiation_id: Option<String>,
    execution_id: Option<String>,
    agent: Option<Arc<Agent>>,
    translation: Option<Arc<Compiled>>,
    /// The error code of the answer, when it is an error.
    code: Option<String>,
    /// Whether the request reached an agent.
    forwarded: bool,
    /// EXECUTE's idempotency route id (sender and `Idempotency-Key`), recorded when the execution is created.
    idempotency: Option<String>,
    /// NEGOTIATE's `bridge_to`, the gateway's own (BR-26): set in the answer in place of the agent's, if any.
    bridge_to: Option<a2a_core::wire::BridgeTo>,
    /// The final body of an agent's answer that carried a signature the gateway verified and removed (GW-15): the
    /// gateway signs the answer for its caller once every header is set ([`handle`]).
    resign: Option<Bytes>,
    /// The execution's status a plain RESULT answered, for the audit record.
    execution_status: Option<String>,
}

/// An error answered by the gateway itself.
struct Refusal {
    err: Box<A2aError>,
    allow: Option<&'static str>,
    www_authenticate: Option<&'static str>,
}

impl Ctx {
    /// The id a routed step names (EXECUTE: its negotiation; CONFIRM, CANCEL, RESULT: its execution).
    fn named_id(&self) -> &str {
        match self.step {
            Some(Step::Execute) => self.negotiation_id.as_deref(),
            _ => self.execution_id.as_deref(),
        }
        .unwrap_or("")
    }
}

impl From<A2aError> for Refusal {
    fn from(err: A2aError) -> Self {
        let www = (err.code == ErrorCode::AUTH_REQUIRED
            && err.details.as_ref().is_some_and(|d| d["auth_requirement"] == "oauth2"))
        .then_some("Bearer realm=\"a2a\"");
        Refusal { err: Box::new(err), allow: None, www_authenticate: www }
    }
}

const JSON: Bytes = Bytes::from_static(b"application/json");

fn json_reply(status: u16, body: Vec<u8>) -> Reply {
    let mut headers = Headers::new();
    headers.append("content-type", JSON);
    Reply { status, headers, body: ReplyBody::Full(Bytes::from(body)) }
}

fn empty_reply(status: u16, headers: Headers) -> Reply {
    Reply { status, headers, body: ReplyBody::Empty }
}

impl Refusal {
    fn into_reply(self) -> Reply {
        let r = self.err.render(self.allow, self.www_authenticate);
        let mut headers = Headers::new();
        for (name, value) in r.headers {
            let value = match value {
                std::borrow::Cow::Borrowed(v) => Bytes::from_static(v.as_bytes()),
                std::borrow::Cow::Owned(v) => Bytes::from(v),
            };
            headers.append(name, value);
        }
        Reply { status: r.status, headers, body: ReplyBody::Full(Bytes::from(r.body)) }
    }
}

fn method_not_allowed(allow: &'static str) -> Refusal {
    Refusal {
        err: Box::new(A2aError::with_message(ErrorCode::METHOD_NOT_ALLOWED, format!("this endpoint accepts {allow}"))),
        allow: Some(allow),
        www_authenticate: None,
    }
}

/// The steps, by method and path. `Err` for unknown paths (`None`) and wrong methods (`Some(allow)`).
fn classify(method: &Method, path: &str, headers: &Headers) -> Result<Step, Option<&'static str>> {
    let post = |s| match *method {
        Method::POST => Ok(s),
        Method::OPTIONS => Ok(Step::Preflight),
        _ => Err(Some("POST, OPTIONS")),
    };
    match path {
        "/a2a" | "/a2a/" => {
            if *method == Method::OPTIONS {
                Ok(Step::Discover)
            } else {
                Err(Some("OPTIONS"))
            }
        }
        // GW-20: HEAD is answered as GET without the body wherever GET is served (RFC 9110 §9.3.2).
        "/a2a/capabilities" => match *method {
            Method::GET | Method::HEAD => Ok(Step::Capabilities),
            Method::OPTIONS => Ok(Step::Preflight),
            _ => Err(Some("GET, HEAD, OPTIONS")),
        },
        "/a2a/negotiate" => post(Step::Negotiate),
        "/a2a/execute" => post(Step::Execute),
        "/a2a/confirm" => post(Step::Confirm),
        "/a2a/cancel" => post(Step::Cancel),
        "/a2a/fallback" => post(Step::Fallback),
        p if p.strip_prefix("/a2a/result/").is_some_and(|s| !s.is_empty() && !s.contains('/')) => match *method {
            Method::GET | Method::HEAD => Ok(Step::Result),
            Method::OPTIONS => Ok(Step::Preflight),
            _ => Err(Some("GET, HEAD, OPTIONS")),
        },
        p if p.starts_with("/a2a/")
            && *method == Method::OPTIONS
            && headers.contains("access-control-request-method") =>
        {
            Ok(Step::Preflight)
        }
        _ => Err(None),
    }
}

/// A field as text; `invalid_header` when it is not visible ASCII.
fn header_str<'a>(headers: &'a Headers, name: &'static str) -> Result<Option<&'a str>, A2aError> {
    match headers.get_str(name) {
        None => Ok(None),
        Some(Ok(v)) => Ok(Some(v)),
        Some(Err(())) => {
            Err(A2aError::with_message(ErrorCode::INVALID_HEADER, format!("header {name} is not visible ASCII"))
                .details(json!({"header": name})))
        }
    }
}

#[derive(Deserialize)]
struct NegotiationAnswer {
    #[serde(default)]
    expires_at: Option<String>,
}

#[derive(Deserialize)]
struct ErrorAnswer {
    error: ErrorCodeOnly,
}

#[derive(Deserialize)]
struct ErrorCodeOnly {
    code: String,
}

/// A POST's body as the connection read it, once its `Content-Type` is JSON.
fn json_body(headers: &Headers, body: Result<Bytes, BodyError>) -> Result<Bytes, A2aError> {
    let ct = header_str(headers, "content-type")?.unwrap_or("");
    let mime = ct.split(';').next().unwrap_or("").trim();
    if !mime.eq_ignore_ascii_case("application/json") {
        return Err(A2aError::with_message(
            ErrorCode::UNSUPPORTED_MEDIA_TYPE,
            format!("the body must be sent with `Content-Type: application/json` (got {ct:?})"),
        ));
    }
    body.map_err(BodyError::into_a2a)
}

/// Removes the fields of one connection from a `HeaderMap` ([`crate::h1::HOP_BY_HOP`] and those `Connection` names),
/// for the A2A 1.x bridge, which forwards with http types.
pub(crate) fn strip_hop_by_hop(hm: &mut HeaderMap) {
    let named: Vec<http::HeaderName> = hm
        .get_all(http::header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|t| http::HeaderName::from_bytes(t.trim().as_bytes()).ok())
        .collect();
    for n in crate::h1::HOP_BY_HOP {
        hm.remove(n);
    }
    for n in named {
        hm.remove(n);
    }
}

/// Serves one request that arrived as http types (HTTP/2, [`crate::Gateway::router`], paths the HTTP/1.1 loop does
/// not serve natively): the admin endpoints, or the request path after converting the request to its form.
pub(crate) async fn handle_http(gw: Arc<Inner>, req: Request<Body>) -> Response<Body> {
    let (parts, body) = req.into_parts();
    // OPS-2, OPS-3: the probes, open, before the admin surface and the protocol (not counted, not rate limited).
    if a2a_runtime::health::is_probe(parts.uri.path()) {
        return a2a_runtime::health::answer(&parts.method, parts.uri.path(), crate::readiness(&gw)).await;
    }
    if crate::console::serves(parts.uri.path()) {
        return crate::console::handle(gw, parts, body).await;
    }
    if let Some(r) = crate::admin::handle(&gw, &parts).await {
        return r;
    }
    let target = parts.uri.path_and_query().cloned().unwrap_or_else(|| http::uri::PathAndQuery::from_static("/"));
    let head = RequestHead::new(parts.method.clone(), target, Headers::from_header_map(&parts.headers));
    let timeout = Duration::from_millis(gw.limits.body_read_timeout_ms);
    // GW-23: the body counts in the process's budget as it arrives (past it: `503 overloaded`, `Retry-After`), and
    // until the request is answered, as on the HTTP/1.1 path (once: a body that path read is counted there).
    let budget = gw.body_budget.clone();
    let budget = budget.for_request(&parts.extensions);
    let read = a2a_runtime::body::read_held(&parts.headers, body, gw.limits.max_body_bytes, timeout, budget).await;
    let (body, _held) = match read {
        Ok((bytes, charge)) => (Ok(bytes), Some(charge)),
        Err(e) => (Err(e), None),
    };
    handle(gw, Incoming { head, body }).await.into_response()
}

/// Serves one request.
pub(crate) async fn handle(gw: Arc<Inner>, req: Incoming) -> Reply {
    let started = Instant::now();
    let Incoming { mut head, body } = req;
    // OPS-6: one span per request, a child of the caller's trace; the agent gets the span's own context as its
    // `traceparent` (not covered by signatures, INT-4), so that its spans are children of the gateway's.
    let classified = classify(&head.method, head.path(), &head.headers);
    let named = *classified.as_ref().unwrap_or(&Step::Other);
    let span = tracing::info_span!(
        "a2a_gateway_request",
        otel.name = named.gateway_span_name(),
        step = named.as_str(),
        trace_id = tracing::field::Empty,
    );
    let trace = a2a_runtime::telemetry::join(&span, head.headers.get_str("traceparent").and_then(Result::ok));
    span.record("trace_id", trace.trace_id.as_str());
    head.headers.insert("traceparent", Bytes::from(trace.header()));
    let origin = head.headers.contains("origin");
    // What signing the gateway's answer needs of the request (GW-15): its request line and the caller's
    // `A2A-Sender-ID` (the audience, also on steps that do not check it). Kept only when the gateway signs.
    let signing = gw.edge.has_key().then(|| {
        let requester = head.headers.get_str(h::A2A_SENDER_ID).and_then(Result::ok).map(|s| s.trim().to_owned());
        (head.method.clone(), head.target().to_owned(), requester)
    });
    let mut ctx = Ctx::default();
    let mut refused = false;
    let mut reply = match process(&gw, &mut ctx, classified, head, body).instrument(span.clone()).await {
        Ok(r) => r,
        Err(refusal) => {
            refused = true;
            ctx.code = Some(refusal.err.code.as_str().to_owned());
            if !ctx.forwarded {
                gw.metrics.rejected(refusal.err.code.as_str());
            }
            if ctx.step == Some(Step::Negotiate) {
                gw.metrics.negotiation_failed(refusal.err.code.as_str());
            }
            if refusal.err.fallback_options.is_some() {
                gw.metrics.fallback(crate::metrics::bounded(refusal.err.code.as_str()));
            }
            refusal.into_reply()
        }
    };
    let hs = &mut reply.headers;
    hs.insert(h::A2A_SENDER_ID, gw.did_bytes.clone());
    match &ctx.translation {
        Some(t) => t.response_headers(hs),
        None => hs.insert(h::A2A_VERSION, Bytes::from_static(a2a_core::PROTOCOL_VERSION.as_bytes())),
    }
    if origin && !hs.contains("access-control-allow-origin") {
        hs.append("access-control-allow-origin", Bytes::from_static(b"*"));
        hs.append("access-control-expose-headers", Bytes::from_static(h::CORS_EXPOSE_HEADERS.as_bytes()));
    }
    if let Some((method, target, requester)) = signing {
        // The gateway's own answers (DISCOVER, capabilities, FALLBACK, its refusals) are signed as an agent signs
        // its answers (GW-15); they are in memory. An agent's unsigned answer stays so.
        let own = ctx.resign.is_none() && (refused || !ctx.forwarded);
        if own && requester.as_deref().is_some_and(|r| a2a_core::did::Did::check(r).is_ok()) {
            ctx.resign = match &reply.body {
                ReplyBody::Full(b) => Some(b.clone()),
                ReplyBody::Empty => Some(Bytes::new()),
                _ => None,
            };
        }
        // The one place that signs an answer (GW-15), last, over its final headers and body: an agent's signature
        // was verified and removed in `answer`; the gateway signs for its caller, or the answer goes unsigned.
        if let (Some(body), Some(caller)) = (ctx.resign.take(), ctx.sender.as_deref().or(requester.as_deref()))
            && let Some(sig) =
                gw.edge.sign_answer(caller, method.as_str(), &target, reply.status, &reply.headers, &body)
        {
            reply.headers.insert_value(h::A2A_SIGNATURE, &sig);
        }
    }
    let step = ctx.step.unwrap_or(Step::Other);
    let handles = ctx.agent.as_ref().filter(|_| ctx.forwarded).map_or(gw.metrics.none(), |a| &a.metrics);
    let outcome = match &ctx.code {
        None if (200..300).contains(&reply.status) => "ok",
        None => "other",
        Some(c) => crate::metrics::bounded(c),
    };
    let elapsed = started.elapsed();
    gw.metrics.request_with(handles, step, outcome, elapsed.as_secs_f64());
    if let Some(capability) = ctx.capability.as_deref().filter(|_| ctx.forwarded) {
        gw.metrics.capability_request(capability, step, elapsed.as_secs_f64());
    }
    if gw.audit.is_some() || crate::console::tapping(&gw) {
        let record = AuditRecord {
            time_ms: a2a_runtime::store::now_ms(),
            sender_id: ctx.sender.map(|s| s.to_string()).unwrap_or_default(),
            capability: ctx.capability.map(|c| c.to_string()),
            negotiation_id: ctx.negotiation_id,
            execution_id: ctx.execution_id,
            agent: ctx.agent.filter(|_| ctx.forwarded).map(|a| a.endpoint.url.clone()).unwrap_or_default(),
            step: step.as_str().to_owned(),
            outcome: ctx.code.unwrap_or_else(|| outcome.to_owned()),
            latency_us: elapsed.as_micros() as u64,
            verified: ctx.verified,
            status: Some(reply.status),
            gateway: Some(gw.instance.clone()),
            execution_status: ctx.execution_status,
            trace_id: Some(trace.trace_id),
        };
        // The operator console's live traffic (and its records when there is no audit log).
        gw.kept.console.traffic.tap(&record);
        if let Some(audit) = &gw.audit {
            audit.record(record);
        }
    }
    reply
}

async fn process(
    gw: &Arc<Inner>,
    ctx: &mut Ctx,
    classified: Result<Step, Option<&'static str>>,
    mut head: RequestHead,
    body: Result<Bytes, BodyError>,
) -> Result<Reply, Refusal> {
    let step = match classified {
        Ok(s) => s,
        Err(Some(allow)) => return Err(method_not_allowed(allow)),
        Err(None) => {
            let path = head.path();
            if path.starts_with("/a2a") {
                gw.metrics.probe();
                tracing::debug!(path = %path, method = %head.method, "probe of an unknown A2A path answered at the edge");
            }
            return Err(A2aError::with_message(
                ErrorCode::NOT_FOUND,
                "no A2A endpoint at this path; the endpoints are OPTIONS /a2a, GET /a2a/capabilities, POST \
                 /a2a/negotiate, /a2a/execute, /a2a/confirm, /a2a/cancel, /a2a/fallback and GET \
                 /a2a/result/{execution_id}",
            )
            .into());
        }
    };
    ctx.step = Some(step);
    let header_bytes = head.received_size;
    if head.headers.len() > gw.limits.max_headers || header_bytes > gw.limits.max_header_bytes {
        return Err(A2aError::with_message(
            ErrorCode::HEADERS_TOO_LARGE,
            format!(
                "the request has {} headers and {header_bytes} bytes of headers; the limits are {} headers and {} bytes",
                head.headers.len(),
                gw.limits.max_headers,
                gw.limits.max_header_bytes
            ),
        )
        .details(json!({"max_headers": gw.limits.max_headers, "max_header_bytes": gw.limits.max_header_bytes}))
        .into());
    }
    match step {
        Step::Discover => {
            ctx.translation = gw.versions.resolve(&head.headers, false).ok().flatten();
            let (decls, infos) = crate::discover::union(&gw.agents).await;
            let hs = Headers::from_header_map(&crate::discover::discover_headers(&decls, &infos));
            return Ok(empty_reply(204, hs));
        }
        Step::Preflight => {
            let mut hs = Headers::new();
            hs.append("access-control-allow-methods", Bytes::from_static(h::CORS_ALLOW_METHODS.as_bytes()));
            hs.append("access-control-allow-headers", Bytes::from_static(h::CORS_ALLOW_HEADERS.as_bytes()));
            hs.append("access-control-max-age", Bytes::from_static(b"300"));
            // DISC-13: on an endpoint's path, `Allow` lists its methods (the list of its 405, ERR-3).
            if let Err(Some(allow)) = classify(&Method::DELETE, head.path(), &head.headers) {
                hs.append("allow", Bytes::from_static(allow.as_bytes()));
            }
            return Ok(empty_reply(204, hs));
        }
        Step::Capabilities => {
            ctx.translation = gw.versions.resolve(&head.headers, false)?;
            let (decls, infos) = crate::discover::union(&gw.agents).await;
            let doc =
                crate::discover::document(&gw.did, gw.name.clone(), decls, &infos, gw.limits.max_body_bytes as u64);
            let body = serde_json::to_vec(&doc).unwrap_or_default();
            let body = match &ctx.translation {
                Some(t) => t.response_body(Bytes::from(body)).to_vec(),
                None => body,
            };
            return Ok(json_reply(200, body));
        }
        _ => {}
    }
    // Every other step names its sender and speaks a version the gateway accepts (HDR-3..HDR-6).
    let translation = gw.versions.resolve(&head.headers, true)?;
    if let Some(t) = &translation {
        t.request_headers(&mut head.headers);
    }
    ctx.translation = translation.clone();
    // The sender, checked as an agent checks it (HDR-6, DID-11).
    let sender = sender_id(head.headers.get(h::A2A_SENDER_ID))?;
    ctx.sender = Some(sender.clone());
    let sender = &*sender;
    gw.edge.rate_limit(sender)?;
    let mut body = if head.method == Method::POST { json_body(&head.headers, body)? } else { Bytes::new() };
    if let Some(t) = translation.as_ref().filter(|t| t.renames_fields()) {
        body = t.request_body(body);
    }
    // GW-20: HEAD is served as GET (the connection writes the answer without its body): verified as the caller
    // signed it, forwarded as GET.
    let caller_method = head.method.clone();
    if head.method == Method::HEAD {
        head.method = Method::GET;
    }
    let target = head.target();

    // Edge security that does not depend on where the request goes: signature and clock (GW-3, GW-4), replay, the
    // cross-domain policy (AUTH-7). Before any route is read, so that a step naming an id is refused the same way
    // whether the id exists or not (GW-21).
    let signed = gw.edge.verify(caller_method.as_str(), target, &head.headers, &body).await?;
    if signed == Signed::No {
        gw.edge.check_date(&head.headers)?;
    }
    ctx.verified = matches!(signed, Signed::Verified(_));
    gw.edge.authorize(sender, signed, None, &head.headers, !body.is_empty())?;

    // Where the request goes, and what it is about.
    let mut candidates: Vec<(Arc<Agent>, Arc<AgentInfo>)> = Vec::new();
    let mut routed: Option<(Arc<Agent>, Route)> = None;
    match step {
        Step::Negotiate => {
            let cap = parse_json::<NegotiateRequest>(&body)?.target_capability;
            ctx.capability = Some(cap.as_str().into());
            candidates = gw.agents.offering(&cap).await;
            if candidates.is_empty() {
                let options = crate::discover::fallback_options(&gw.agents, gw.registry.as_ref(), &cap, None).await;
                return Err(A2aError::with_message(
                    ErrorCode::NO_MATCHING_CAPABILITY,
                    format!("no agent behind this gateway offers {cap:?}; see fallback_options"),
                )
                .details(json!({"capability": cap}))
                .fallback(options)
                .into());
            }
            ctx.bridge_to = crate::bridge::negotiate_offer(gw, &head.headers, &cap).await;
        }
        Step::Execute => {
            let id = header_str(&head.headers, h::A2A_NEGOTIATION_ID)?
                .ok_or_else(|| A2aError::new(ErrorCode::NEGOTIATION_REQUIRED))?;
            let id = h::parse_token("A2A-Negotiation-ID", id).map_err(|e| {
                A2aError::with_message(ErrorCode::INVALID_HEADER, e.to_string())
                    .details(json!({"header": "A2A-Negotiation-ID"}))
            })?;
            ctx.negotiation_id = Some(id.to_owned());
            let (agent, r) = route(gw, Kind::Negotiation, id, sender).await?;
            if let Some(key) = idempotency_key(&head.headers)? {
                let key = idempotency_id(sender, key);
                let used = gw.routes.get(Kind::Idempotency, &key).await.map_err(unavailable)?;
                ctx.idempotency = Some(key);
                // The key names an execution at another agent, so another negotiation (EXE-7): the agent holding
                // this negotiation cannot know it, the gateway answers for the deployment.
                if used.is_some_and(|u| *u.agent != *agent.endpoint.url) {
                    return Err(A2aError::with_message(
                        ErrorCode::IDEMPOTENCY_CONFLICT,
                        "this Idempotency-Key was already used by this sender with another negotiation",
                    )
                    .into());
                }
            }
            routed = Some((agent, r));
        }
        Step::Confirm | Step::Cancel => {
            let id = parse_json::<ExecutionRef>(&body)?.execution_id;
            ctx.execution_id = Some(id.clone());
            routed = Some(route(gw, Kind::Execution, &id, sender).await?);
        }
        Step::Result => {
            let segment = head.path().rsplit('/').next().unwrap_or("");
            // A segment with nothing to decode is the id itself; one this gateway routed is known valid (it came
            // from its agent's EXECUTE answer) and needs no parse. Any other is parsed, for a precise refusal.
            let held = if segment.contains('%') { None } else { held_route(gw, Kind::Execution, segment, sender) };
            routed = Some(match held {
                Some(r) => {
                    ctx.execution_id = Some(segment.to_owned());
                    r
                }
                None => {
                    let id = ExecutionId::from_path_segment(segment).map_err(|e| {
                        A2aError::with_message(
                            ErrorCode::UNKNOWN_EXECUTION,
                            format!("{segment:?} is not an execution id: {e}"),
                        )
                    })?;
                    ctx.execution_id = Some(id.as_str().to_owned());
                    route(gw, Kind::Execution, id.as_str(), sender).await?
                }
            });
        }
        Step::Fallback => {
            let req: FallbackRequest = parse_json(&body)?;
            ctx.capability = Some(req.target_capability.as_str().into());
        }
        _ => {}
    }
    if let Some((_, r)) = &routed {
        ctx.capability = Some(r.capability.clone());
    }

    // The capability's requirement (GW-10). The routed agent's DISCOVER answer, read once: for its requirement here and for the forward below.
    let routed_info = match &routed {
        Some((agent, _)) => Some(gw.agents.info(agent).await),
        None => None,
    };
    let requirement: Option<AuthRequirement> = match (&routed, candidates.first()) {
        (Some((_, r)), _) => match &routed_info {
            Some(Ok(info)) => info.capability(&r.capability).map(|d| d.auth_requirement),
            // The agent cannot be asked what it requires: demand the most, so nothing unauthenticated gets through.
            _ => Some(AuthRequirement::DidAuth).filter(|_| gw.edge.cfg.verify_signatures),
        },
        (None, Some((_, info))) => {
            ctx.capability.as_deref().and_then(|c| info.capability(c)).map(|d| d.auth_requirement)
        }
        (None, None) => None,
    };
    if let Err(e) = gw.edge.authorize(sender, signed, requirement, &head.headers, !body.is_empty()) {
        // GW-21 (AUTH-1): a step naming an id that exists is refused as one naming an id that does not, so that a
        // refusal never tells a caller which ids are real.
        tracing::debug!(error = %e, "a refusal of a step naming a routed id answered as an unknown id (GW-21)");
        return Err(match &routed {
            Some(_) => unknown_id(routed_kind(step), ctx.named_id()),
            None => e.into(),
        });
    }

    if step == Step::Fallback {
        let cap = ctx.capability.as_deref().unwrap_or_default().to_owned();
        let options = crate::discover::fallback_options(&gw.agents, gw.registry.as_ref(), &cap, None).await;
        gw.metrics.fallback("fallback_request");
        let resp = FallbackResponse { requested_capability: cap, fallback_options: options };
        let body = Bytes::from(serde_json::to_vec(&resp).unwrap_or_default());
        let body = match &translation {
            Some(t) => t.response_body(body),
            None => body,
        };
        return Ok(json_reply(200, body.to_vec()));
    }

    // Forward. NEGOTIATE may be retried on another agent when no connection could be made (nothing was sent).
    let mut tried: Vec<Arc<Agent>> = Vec::new();
    loop {
        let (agent, info) = match &routed {
            Some((agent, _)) => (agent.clone(), routed_info.clone().and_then(Result::ok)),
            None => {
                let region = header_str(&head.headers, h::A2A_REGION).ok().flatten().map(str::trim);
                let cap = ctx.capability.as_deref().unwrap_or("");
                let Some((a, i)) = gw.agents.choose(&candidates, cap, region, &tried) else {
                    return Err(A2aError::with_message(
                        ErrorCode::AGENT_UNAVAILABLE,
                        format!("no agent offering {cap:?} could be reached"),
                    )
                    .into());
                };
                (a, Some(i))
            }
        };
        ctx.agent = Some(agent.clone());
        let agent_target = agent.endpoint.target(target);
        let message = build_request(gw, &agent, info.as_deref(), &head, &agent_target, sender, signed, &body)?;
        ctx.forwarded = true;
        let guard = agent.start(&gw.metrics);
        // Sent again when the pooled connection it went on ends unanswered (an agent's idle close crossing it), for
        // the steps the protocol makes safe to repeat: NEGOTIATE (NEG-8), EXECUTE (work starts only on CONFIRM;
        // exactly once with an `Idempotency-Key`, EXE-7), CONFIRM (CONF-2), RESULT. Not CANCEL (CAN-2).
        let repeatable = matches!(step, Step::Negotiate | Step::Execute | Step::Confirm | Step::Result);
        let sent = gw.upstream.send_raw(agent.endpoint.authority(), &message, gw.upstream.timeout(), repeatable).await;
        drop(guard);
        match sent {
            Ok(answer) => {
                let status = answer.head.status;
                if matches!(status, 500 | 502 | 503 | 504) {
                    gw.agents.failure(&agent, "5xx answer");
                } else {
                    gw.agents.success(&agent);
                }
                // GW-15: the DID the request was forwarded as is the audience of the agent's signature.
                let as_did = if matches!(signed, Signed::Verified(_)) { gw.did.as_str() } else { sender };
                let fwd = info.as_deref().map(|i| Forwarded {
                    agent_did: &i.did,
                    as_did,
                    method: head.method.as_str(),
                    target: &agent_target,
                });
                return self::answer(gw, ctx, &agent, info.as_deref(), fwd, target, answer).await;
            }
            Err(e) => {
                gw.metrics.upstream_error(e.reason());
                gw.agents.failure(&agent, e.reason());
                tracing::warn!(agent = %agent.label, endpoint = %agent.endpoint.url, error = %e, step = step.as_str(),
                    "agent unreachable");
                let retry = step == Step::Negotiate && matches!(e, UpstreamError::Connect(_)) && tried.len() < 3;
                if retry {
                    tried.push(agent);
                    ctx.forwarded = false;
                    continue;
                }
                let err = match e {
                    UpstreamError::Timeout(ms) => A2aError::with_message(
                        ErrorCode::AGENT_TIMEOUT,
                        format!("the agent did not answer within {ms} ms"),
                    ),
                    other => A2aError::with_message(ErrorCode::AGENT_UNAVAILABLE, other.to_string()),
                };
                return Err(err.into());
            }
        }
    }
}

/// The sender, checked as an agent checks it ([`a2a_core::request::sender_id_value`]). A sender is usually the same from
/// one request to the next: the last few values that passed are remembered per thread, and the same bytes pass
/// again without the check (it is a pure function of them).
fn sender_id(value: Option<&[u8]>) -> Result<Arc<str>, A2aError> {
    type Passed = std::collections::VecDeque<(Box<[u8]>, Arc<str>)>;
    thread_local! {
        static PASSED: std::cell::RefCell<Passed> = const { std::cell::RefCell::new(std::collections::VecDeque::new()) };
    }
    if let Some(v) = value
        && let Some(known) = PASSED.with(|p| p.borrow().iter().find(|(k, _)| **k == *v).map(|(_, s)| s.clone()))
    {
        return Ok(known);
    }
    let sender: Arc<str> = a2a_core::request::sender_id_value(value)?.into();
    if let Some(v) = value {
        PASSED.with(|p| {
            let mut p = p.borrow_mut();
            if p.len() == 8 {
                p.pop_front();
            }
            p.push_back((v.into(), sender.clone()));
        });
    }
    Ok(sender)
}

fn unavailable(e: a2a_runtime::store::StoreError) -> Refusal {
    A2aError::with_message(ErrorCode::STORE_UNAVAILABLE, format!("the routing state is unavailable: {e}")).into()
}

/// EXECUTE's `Idempotency-Key`, when it has a valid one (an invalid one is for the agent to refuse).
fn idempotency_key(headers: &Headers) -> Result<Option<&str>, A2aError> {
    Ok(header_str(headers, h::IDEMPOTENCY_KEY)?.and_then(|k| h::parse_token("Idempotency-Key", k).ok()))
}

/// The route id of an idempotency key: keys are scoped to the sender (EXE-7).
fn idempotency_id(sender: &str, key: &str) -> String {
    format!("{sender} {key}")
}

/// The route of `id` when this process holds it, belongs to `sender` and its agent is known (no I/O); `None`
/// otherwise.
fn held_route(gw: &Inner, kind: Kind, id: &str, sender: &str) -> Option<(Arc<Agent>, Route)> {
    let r = gw.routes.get_held(kind, id).filter(|r| owned_by(r, sender))?;
    Some((gw.agents.get(&r.agent)?, r))
}

/// Whether a route may be used by `sender` (GW-21): its owner, or a route recorded without one.
fn owned_by(r: &Route, sender: &str) -> bool {
    r.owner.as_deref().is_none_or(|o| o == sender)
}

/// The kind of id a routed step names.
fn routed_kind(step: Step) -> Kind {
    if step == Step::Execute { Kind::Negotiation } else { Kind::Execution }
}

/// The refusal of a step naming an id the gateway does not route for its sender (GW-6, GW-21): the same bytes
/// whether the id is made up, expired, another sender's, or names something the request may not reach, so that no
/// answer tells a caller which ids exist.
fn unknown_id(kind: Kind, id: &str) -> Refusal {
    match kind {
        Kind::Negotiation => A2aError::with_message(
            ErrorCode::UNKNOWN_NEGOTIATION,
            format!("no negotiation {id:?} for this sender through this gateway (unknown, expired or not yours); NEGOTIATE again"),
        )
        .into(),
        Kind::Execution | Kind::Idempotency => A2aError::with_message(
            ErrorCode::UNKNOWN_EXECUTION,
            format!("no execution {id:?} for this sender through this gateway (unknown, expired or not yours)"),
        )
        .into(),
    }
}

async fn route(gw: &Inner, kind: Kind, id: &str, sender: &str) -> Result<(Arc<Agent>, Route), Refusal> {
    let unknown = || unknown_id(kind, id);
    let r = match gw.routes.get_held(kind, id) {
        Some(r) => r,
        None => gw.routes.get(kind, id).await.map_err(unavailable)?.ok_or_else(unknown)?,
    };
    if !owned_by(&r, sender) {
        tracing::debug!(id, owner = ?r.owner, sender, "a step names another sender's id (GW-21)");
        return Err(unknown());
    }
    let agent = match gw.agents.get(&r.agent) {
        Some(a) => a,
        // Another gateway on the same Redis sent it to an agent this one has not seen yet.
        None => {
            let ep = crate::agents::Endpoint::parse(&r.agent).map_err(|_| unknown())?;
            gw.agents.add(ep, false, false).ok_or_else(|| {
                Refusal::from(A2aError::with_message(ErrorCode::AGENT_UNAVAILABLE, "too many agents known"))
            })?
        }
    };
    Ok((agent, r))
}

/// The request to the agent, as the bytes to write: the request line with the agent's target, `Host`, the caller's
/// fields (minus those of its connection; re-signed for the agent when the caller's signature was verified, GW-8),
/// the framing, the body as received.
#[allow(clippy::too_many_arguments)]
fn build_request(
    gw: &Inner,
    agent: &Agent,
    info: Option<&AgentInfo>,
    head: &RequestHead,
    agent_target: &str,
    sender: &str,
    signed: Signed,
    body: &Bytes,
) -> Result<Vec<u8>, Refusal> {
    let mut out = Vec::with_capacity(128 + head.headers.size() + body.len());
    crate::h1::write_request_line(&mut out, head.method.as_str(), agent_target);
    out.extend_from_slice(b"host: ");
    out.extend_from_slice(agent.endpoint.authority().as_bytes());
    out.extend_from_slice(b"\r\n");
    // A `Connection` that names other fields, or a request the gateway re-signs, is edited as a list; any other
    // request's fields are copied through as they came, minus the connection's own.
    let names_more = head.headers.contains("connection");
    if names_more || matches!(signed, Signed::Verified(_)) {
        let mut hs = head.headers.clone();
        crate::h1::strip_hop_by_hop(&mut hs);
        hs.remove(h::A2A_FORWARDED_SENDER);
        hs.remove(h::A2A_FORWARDED_VERIFIED);
        if let Signed::Verified(_) = signed {
            let Some(info) = info else {
                return Err(A2aError::with_message(
                    ErrorCode::AGENT_UNAVAILABLE,
                    "the agent's DID is unknown (its DISCOVER failed); cannot forward a verified request",
                )
                .into());
            };
            gw.edge.resign(&mut hs, sender, &info.did, head.method.as_str(), agent_target, body)?;
        }
        hs.write(&mut out);
    } else {
        head.headers.write_except(&mut out, &[h::A2A_FORWARDED_SENDER, h::A2A_FORWARDED_VERIFIED]);
    }
    crate::h1::write_content_length(&mut out, body.len(), head.method != Method::POST);
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(body);
    Ok(out)
}

/// Turns an agent's answer into the gateway's: learns routes, reads error codes, rewrites headers, translates.
#[allow(clippy::too_many_arguments)]
async fn answer(
    gw: &Arc<Inner>,
    ctx: &mut Ctx,
    agent: &Arc<Agent>,
    info: Option<&AgentInfo>,
    fwd: Option<Forwarded<'_>>,
    caller_target: &str,
    answer: crate::upstream::Answer,
) -> Result<Reply, Refusal> {
    let crate::upstream::Answer { head, body: incoming } = answer;
    let status = head.status;
    let mut headers = head.headers;
    // The connection's own fields are never written on (the writers skip them); fields `Connection` names are
    // removed here.
    if headers.contains("connection") {
        crate::h1::strip_hop_by_hop(&mut headers);
    }
    let step = ctx.step.unwrap_or(Step::Other);
    let text = |hs: &Headers, n: &str| hs.get_str(n).and_then(Result::ok).map(str::to_owned);
    // Answers the gateway reads whole: NEGOTIATE successes (lifetime), errors (code), translated bodies, signed
    // answers (GW-15: verified, then signed again by the gateway).
    let agent_sig = headers.take(h::A2A_SIGNATURE);
    let is_stream = headers.get("content-type").is_some_and(|v| v.starts_with(b"text/event-stream"));
    // With an audit log, a plain RESULT is read whole for the execution's status it records.
    let audited_result = gw.audit.is_some() && step == Step::Result && status == 200 && !is_stream;
    let must_read = (step == Step::Negotiate && (200..300).contains(&status))
        || audited_result
        || status >= 400
        || ctx.translation.as_ref().is_some_and(|t| t.renames_fields())
        || agent_sig.is_some();
    if !must_read {
        let stream = step == Step::Result && status == 200 && is_stream;
        if stream && let Some(caller) = ctx.sender.as_deref().map(str::to_owned) {
            // GW-15 for streams (STR-7): the `result` event's signature is verified and replaced as it passes.
            let signing = crate::sse_sign::StreamSigning {
                agent_did: fwd.as_ref().map_or_else(String::new, |f| f.agent_did.to_owned()),
                as_did: fwd.as_ref().map_or_else(String::new, |f| f.as_did.to_owned()),
                agent_target: fwd.as_ref().map_or_else(String::new, |f| f.target.to_owned()),
                caller,
                caller_target: caller_target.to_owned(),
                execution_id: text(&headers, h::A2A_EXECUTION_ID)
                    .or_else(|| ctx.execution_id.clone())
                    .unwrap_or_default(),
                sign: ctx.translation.is_none(),
            };
            let body = Body::from_stream(crate::sse_sign::resign(gw.clone(), incoming, signing));
            return finish(gw, ctx, agent, info, status, headers, ReplyBody::Stream(body)).await;
        }
        return finish(gw, ctx, agent, info, status, headers, ReplyBody::Upstream(incoming)).await;
    }
    let collected =
        tokio::time::timeout(Duration::from_millis(gw.limits.agent_timeout_ms), incoming.read_whole(8 * 1024 * 1024))
            .await;
    let mut bytes = match collected {
        Ok(Ok(b)) => b,
        _ => {
            gw.agents.failure(agent, "answer body");
            return Err(A2aError::with_message(ErrorCode::AGENT_UNAVAILABLE, "the agent's answer was cut short").into());
        }
    };
    // GW-15: an agent's signature is verified as the caller the gateway was, before anything of the answer is used;
    // one that does not verify makes the whole answer the agent's failure.
    if let Some(sig) = &agent_sig {
        let verdict = match &fwd {
            Some(fwd) => gw.edge.verify_answer(sig, fwd, status, &headers, &bytes).await,
            None => Err(A2aError::with_message(ErrorCode::AGENT_UNAVAILABLE, "the agent's DID is unknown")),
        };
        if let Err(e) = verdict {
            gw.metrics.upstream_error("response_signature");
            tracing::warn!(agent = %agent.label, endpoint = %agent.endpoint.url, error = %e, step = step.as_str(),
                "the agent's answer signature does not verify; answer withheld");
            return Err(A2aError::with_message(
                ErrorCode::AGENT_UNAVAILABLE,
                format!("the agent's answer is signed but its signature does not verify: {}", e.message),
            )
            .details(json!({
                "reason": "response_signature",
                "signature_error": e.code.as_str(),
                "signature_details": e.details,
            }))
            .into());
        }
    }
    if status >= 400 {
        if let Ok(e) = serde_json::from_slice::<ErrorAnswer>(&bytes) {
            // GW-21: the agent's own "not found" of the id, and (for a caller the gateway did not verify) its
            // authentication refusals of a step naming an id, are answered as the gateway answers an id it does not
            // route: byte for byte the same as for a made-up id.
            let names_id = matches!(step, Step::Execute | Step::Confirm | Step::Cancel | Step::Result);
            // Authentication refusals are the 401s and `did_auth_required`; a policy's 403 (`region_restricted`,
            // `forbidden`) is about the capability, not the caller's proof, and passes.
            let hides = matches!(e.error.code.as_str(), "unknown_negotiation" | "unknown_execution")
                || ((status == 401 || e.error.code == "did_auth_required") && !ctx.verified);
            if names_id && hides {
                // The caller is told only what a made-up id gets; the operator's log says what the agent answered.
                tracing::info!(step = step.as_str(), status, code = %e.error.code,
                    "agent refusal answered as an unknown id (GW-21)");
                return Err(unknown_id(routed_kind(step), ctx.named_id()));
            }
            ctx.code = Some(e.error.code.clone());
            if step == Step::Negotiate {
                gw.metrics.negotiation_failed(&e.error.code);
            }
            if e.error.code == "no_matching_capability" {
                // The agent no longer offers it (DISC-4): ask it again next time.
                gw.agents.forget(agent).await;
            }
            if matches!(e.error.code.as_str(), "no_matching_capability" | "region_restricted" | "schema_incompatible") {
                gw.metrics.fallback(crate::metrics::bounded(&e.error.code));
                bytes = merge_fallback(gw, ctx, agent, bytes).await;
            }
        } else {
            ctx.code = Some(format!("status_{status}"));
        }
    }
    if audited_result {
        #[derive(serde::Deserialize)]
        struct Status {
            status: String,
        }
        ctx.execution_status = serde_json::from_slice::<Status>(&bytes).ok().map(|s| s.status);
    }
    if step == Step::Negotiate && (200..300).contains(&status) {
        let id = text(&headers, h::A2A_NEGOTIATION_ID).ok_or_else(|| {
            Refusal::from(A2aError::with_message(
                ErrorCode::AGENT_UNAVAILABLE,
                "the agent's NEGOTIATE answer has no A2A-Negotiation-ID",
            ))
        })?;
        let ttl = serde_json::from_slice::<NegotiationAnswer>(&bytes)
            .ok()
            .and_then(|a| a.expires_at)
            .and_then(|t| a2a_core::wire::parse_timestamp(&t))
            .and_then(|t| t.duration_since(std::time::SystemTime::now()).ok())
            .unwrap_or(Duration::from_secs(3600));
        let route = Route {
            agent: agent.endpoint.url.as_str().into(),
            capability: ctx.capability.clone().unwrap_or_else(|| "".into()),
            owner: ctx.sender.clone(),
        };
        gw.routes.put(Kind::Negotiation, &id, route, ttl).await.map_err(unavailable)?;
        ctx.negotiation_id = Some(id);
        // The agent's `bridge_to` names the agent, which the caller must not call directly: the gateway's own, or
        // none (BR-26). Before any translation, which renames the members of the agents' version.
        if let Some(b) = crate::bridge::set_bridge_to(&bytes, ctx.bridge_to.as_ref()) {
            bytes = b;
        }
    }
    if let Some(t) = &ctx.translation {
        bytes = t.response_body(bytes);
    }
    let reply = finish(gw, ctx, agent, info, status, headers, ReplyBody::Full(bytes.clone())).await?;
    if agent_sig.is_some() {
        ctx.resign = Some(bytes);
    }
    Ok(reply)
}

async fn finish(
    gw: &Inner,
    ctx: &mut Ctx,
    agent: &Arc<Agent>,
    info: Option<&AgentInfo>,
    status: u16,
    mut headers: Headers,
    body: ReplyBody,
) -> Result<Reply, Refusal> {
    if ctx.step == Some(Step::Execute)
        && (200..300).contains(&status)
        && let Some(Ok(id)) = headers.get_str(h::A2A_EXECUTION_ID)
    {
        let ttl = info.map_or(Duration::from_millis(gw.limits.execution_route_ttl_ms), |i| {
            i.execution_lifetime(gw.limits.result_retention_ms, gw.limits.execution_route_ttl_ms)
        });
        let route = Route {
            agent: agent.endpoint.url.as_str().into(),
            capability: ctx.capability.clone().unwrap_or_else(|| "".into()),
            owner: ctx.sender.clone(),
        };
        if let Some(key) = &ctx.idempotency {
            gw.routes.put(Kind::Idempotency, key, route.clone(), ttl).await.map_err(unavailable)?;
        }
        gw.routes.put(Kind::Execution, id, route, ttl).await.map_err(unavailable)?;
        ctx.execution_id = Some(id.to_owned());
    }
    // `Location` is relative to the agent's mount point; the gateway serves at the root.
    if !agent.endpoint.prefix.is_empty()
        && let Some(Ok(loc)) = headers.get_str("location")
        && let Some(rest) = loc.strip_prefix(agent.endpoint.prefix.as_str())
    {
        let rest = Bytes::copy_from_slice(rest.as_bytes());
        headers.insert("location", rest);
    }
    Ok(Reply { status, headers, body })
}

/// Adds the gateway-wide options to an agent's capability-mismatch error (FB-3), after the agent's own.
async fn merge_fallback(gw: &Inner, ctx: &Ctx, agent: &Arc<Agent>, bytes: Bytes) -> Bytes {
    let Ok(mut v) = serde_json::from_slice::<serde_json::Value>(&bytes) else { return bytes };
    let cap = ctx.capability.as_deref().unwrap_or_default().to_owned();
    let ours = crate::discover::fallback_options(&gw.agents, gw.registry.as_ref(), &cap, Some(agent)).await;
    let list = v.as_object_mut().map(|o| o.entry("fallback_options").or_insert_with(|| json!([])));
    if let Some(serde_json::Value::Array(list)) = list {
        for o in ours {
            let dup = list.iter().any(|x| x["capability"] == o.capability.as_str() && x.get("agent").is_none());
            if !dup && let Ok(j) = serde_json::to_value(&o) {
                list.push(j);
            }
        }
    }
    serde_json::to_vec(&v).map(Bytes::from).unwrap_or(bytes)
}
