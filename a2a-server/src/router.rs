//! The HTTP face of an agent: an axum [`Router`] serving every endpoint of `spec/PROTOCOL.md` under `/a2a`.
//!
//! Everything that can go wrong is answered with the protocol's JSON error (ERR-4): malformed headers and bodies,
//! oversize input, unknown paths and wrong methods included. Every response carries `A2A-Version` and the agent's
//! `A2A-Sender-ID` (HDR-2, HDR-7), and CORS headers when the request came from a browser (DISC-6).

use std::sync::Arc;
use std::time::{Duration, Instant};

use a2a_core::error::{A2aError, ErrorCode};
use a2a_core::execution_id::ExecutionId;
use a2a_core::headers::{self as h, Version};
pub use a2a_core::request::{parse_json, sender_id_value};
use a2a_core::wire::{CapabilitiesDocument, ExecutionRef, FallbackRequest, FallbackResponse, NegotiateRequest};
use axum::Router;
use axum::body::Body;
use axum::extract::{OriginalUri, Request, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get, post};
use bytes::Bytes;
use serde_json::json;
use tracing::Instrument;

use crate::auth::{Auth, SignedParts};
use crate::engine::{Caller, Engine};
use crate::metrics::Step;

/// Shared state of the router.
pub(crate) struct AppState {
    pub(crate) engine: Arc<Engine>,
    pub(crate) auth: Auth,
    pub(crate) capabilities_json: Bytes,
    pub(crate) discover_headers: HeaderMap,
    pub(crate) cors: CorsPolicy,
    pub(crate) sender_header: HeaderValue,
    pub(crate) response_signer: Option<crate::response_signing::ResponseSigner>,
    /// The agent's display name (for the A2A 1.x card, §20).
    pub(crate) agent_name: Option<String>,
    /// Set when an A2A 1.x bridge serves this agent: NEGOTIATE then offers `bridge_to` (BR-17).
    pub(crate) bridge: std::sync::OnceLock<crate::a2a1x::Announce>,
    #[cfg(feature = "sessions")]
    pub(crate) sessions: Option<Arc<crate::sessions::Sessions>>,
    /// Each sender's share of the handshake requests served at once (LIM-14, LIM-15).
    pub(crate) shares: Arc<crate::shares::Shares>,
}

/// Which browser origins may call the agent (DISC-6, DISC-7).
#[derive(Debug, Clone, Default)]
pub enum CorsPolicy {
    /// Every origin (`Access-Control-Allow-Origin: *`).
    #[default]
    Any,
    /// Only these origins (`https://app.example.com`), echoed back with `Vary: Origin`.
    List(Vec<String>),
}

/// An error answered as the protocol's JSON body.
#[derive(Debug)]
pub(crate) struct ApiError {
    pub(crate) err: Box<A2aError>,
    pub(crate) www_authenticate: Option<&'static str>,
    pub(crate) allow: Option<&'static str>,
}

impl From<A2aError> for ApiError {
    fn from(err: A2aError) -> Self {
        ApiError { err: Box::new(err), www_authenticate: None, allow: None }
    }
}

/// The error code of a response, for metrics.
#[derive(Clone)]
struct Outcome(ErrorCode);

/// The capability (and negotiation) a response is about, for the audit record.
#[derive(Clone)]
struct AuditTag {
    capability: String,
    negotiation: Option<String>,
    /// The execution's status a RESULT (or CANCEL) answered.
    status: Option<String>,
}

fn tag_capability(resp: &mut Response, name: &str) {
    resp.extensions_mut().insert(AuditTag { capability: name.to_owned(), negotiation: None, status: None });
}

fn tag_execution(resp: &mut Response, r: &a2a_core::wire::ResultResponse) {
    resp.extensions_mut().insert(AuditTag {
        capability: r.capability.clone(),
        negotiation: Some(r.negotiation_id.clone()),
        status: Some(r.status.as_str().to_owned()),
    });
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let r = self.err.render(self.allow, self.www_authenticate);
        let mut resp =
            (StatusCode::from_u16(r.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR), r.body).into_response();
        for (name, value) in r.headers {
            let value = match value {
                std::borrow::Cow::Borrowed(v) => HeaderValue::from_static(v),
                std::borrow::Cow::Owned(v) => match HeaderValue::try_from(v) {
                    Ok(v) => v,
                    Err(_) => continue,
                },
            };
            resp.headers_mut().insert(HeaderName::from_static(name), value);
        }
        resp.extensions_mut().insert(Outcome(self.err.code.clone()));
        resp
    }
}

type ApiResult = Result<Response, ApiError>;

pub(crate) fn json_response(status: StatusCode, value: &impl serde::Serialize) -> Response {
    match serde_json::to_vec(value) {
        Ok(body) => {
            (status, [(header::CONTENT_TYPE, HeaderValue::from_static("application/json"))], body).into_response()
        }
        Err(e) => ApiError::from(A2aError::with_message(ErrorCode::INTERNAL_ERROR, e.to_string())).into_response(),
    }
}

/// Builds the router. The routes live under `/a2a`; nest the router to serve them below a prefix.
pub(crate) fn build(state: Arc<AppState>) -> Router {
    let preflight = || any(preflight);
    #[cfg(feature = "sessions")]
    let base = if state.sessions.is_some() { crate::sessions::routes::routes() } else { Router::new() };
    #[cfg(not(feature = "sessions"))]
    let base = Router::new();
    base.route("/a2a", any(discover))
        .route("/a2a/capabilities", get(capabilities).options(options_get).fallback(not_allowed_get))
        .route("/a2a/negotiate", post(negotiate).options(options_post).fallback(not_allowed_post))
        .route("/a2a/execute", post(execute).options(options_post).fallback(not_allowed_post))
        .route("/a2a/confirm", post(confirm).options(options_post).fallback(not_allowed_post))
        .route("/a2a/result/{id}", get(result).options(options_get).fallback(not_allowed_get))
        .route("/a2a/cancel", post(cancel).options(options_post).fallback(not_allowed_post))
        .route("/a2a/fallback", post(fallback).options(options_post).fallback(not_allowed_post))
        .route("/a2a/{*rest}", preflight())
        .layer(axum::middleware::from_fn_with_state(state.clone(), a2a_layer))
        .with_state(state)
}

fn step_of(method: &Method, path: &str) -> Step {
    let tail = path.rsplit_once("/a2a").map_or(path, |(_, t)| t);
    match (method, tail) {
        (&Method::OPTIONS, "") => Step::Discover,
        (&Method::GET, "/capabilities") => Step::Capabilities,
        (&Method::POST, "/negotiate") => Step::Negotiate,
        (&Method::POST, "/execute") => Step::Execute,
        (&Method::POST, "/confirm") => Step::Confirm,
        (&Method::GET, t) if t.starts_with("/result/") => Step::Result,
        (&Method::POST, "/cancel") => Step::Cancel,
        (&Method::POST, "/fallback") => Step::Fallback,
        _ => Step::Other,
    }
}

/// The layer around every route: header limits, the A2A and CORS response headers, metrics.
async fn a2a_layer(State(state): State<Arc<AppState>>, req: Request, next: Next) -> Response {
    let started = Instant::now();
    let step = step_of(req.method(), req.uri().path());
    let mut req = req;
    let span = {
        let hv = |name: &str| req.headers().get(name).and_then(|v| v.to_str().ok()).unwrap_or("");
        tracing::info_span!(
            "a2a_request",
            otel.name = step.span_name(),
            step = step.as_str(),
            sender_id = hv(h::A2A_SENDER_ID),
            negotiation_id = hv(h::A2A_NEGOTIATION_ID),
            execution_id = tracing::field::Empty,
            trace_id = tracing::field::Empty,
        )
    };
    // OPS-6: the request's span continues the caller's trace; what this agent passes on (to its handlers, in
    // `caller`) is the span's own context, put in place of the caller's `traceparent`.
    let trace = crate::telemetry::join(&span, req.headers().get("traceparent").and_then(|v| v.to_str().ok()));
    span.record("trace_id", trace.trace_id.as_str());
    if let Ok(v) = HeaderValue::from_str(&trace.header()) {
        req.headers_mut().insert(HeaderName::from_static("traceparent"), v);
    }
    let sender = req.headers().get(h::A2A_SENDER_ID).and_then(|v| v.to_str().ok()).unwrap_or("").trim().to_owned();
    let request_negotiation = req.headers().get(h::A2A_NEGOTIATION_ID).and_then(|v| v.to_str().ok()).map(str::to_owned);
    let resp = a2a_layer_inner(&state, step, req, next).instrument(span.clone()).await;
    if step != Step::Other {
        let rh = |name: &str| resp.headers().get(name).and_then(|v| v.to_str().ok()).map(str::to_owned);
        state.engine.audit.record(crate::store::audit::AuditRecord {
            time_ms: crate::store::now_ms(),
            sender_id: sender,
            capability: resp.extensions().get::<AuditTag>().map(|c| c.capability.clone()),
            negotiation_id: rh(h::A2A_NEGOTIATION_ID)
                .or_else(|| resp.extensions().get::<AuditTag>().and_then(|c| c.negotiation.clone()))
                .or(request_negotiation),
            execution_id: rh(h::A2A_EXECUTION_ID),
            agent: state.engine.did.clone(),
            step: step.as_str().to_owned(),
            outcome: resp.extensions().get::<Outcome>().map_or_else(|| "ok".to_owned(), |o| o.0.as_str().to_owned()),
            latency_us: started.elapsed().as_micros() as u64,
            execution_status: resp.extensions().get::<AuditTag>().and_then(|c| c.status.clone()),
            trace_id: Some(trace.trace_id),
            ..Default::default()
        });
    }
    if span.is_disabled() {
        return resp;
    }
    let status = resp.status().as_u16();
    let rh = |name: &str| resp.headers().get(name).and_then(|v| v.to_str().ok()).unwrap_or("").to_owned();
    let (exe, neg) = (rh(h::A2A_EXECUTION_ID), rh(h::A2A_NEGOTIATION_ID));
    span.record("execution_id", exe.as_str());
    if !neg.is_empty() {
        span.record("negotiation_id", neg.as_str());
    }
    let latency_us = started.elapsed().as_micros() as u64;
    span.in_scope(|| {
        if status >= 500 {
            tracing::warn!(status, latency_us, "request answered");
        } else if status >= 400 {
            tracing::info!(status, latency_us, "request answered");
        } else {
            tracing::debug!(status, latency_us, "request answered");
        }
    });
    resp
}

async fn a2a_layer_inner(state: &Arc<AppState>, step: Step, req: Request, next: Next) -> Response {
    let started = Instant::now();
    let origin = req.headers().get(header::ORIGIN).cloned();
    let answered = state.response_signer.as_ref().map(|_| crate::response_signing::Answered {
        method: req.method().as_str().to_owned(),
        target: req
            .extensions()
            .get::<OriginalUri>()
            .map_or(req.uri(), |o| &o.0)
            .path_and_query()
            .map_or_else(|| req.uri().path().to_owned(), |pq| pq.as_str().to_owned()),
        requester: req.headers().get(h::A2A_SENDER_ID).and_then(|v| v.to_str().ok()).map(|v| v.trim().to_owned()),
    });
    let limits = &state.engine.limits;
    let header_bytes: usize = req.headers().iter().map(|(k, v)| k.as_str().len() + v.len() + 4).sum();
    let mut resp = if req.headers().len() > limits.max_headers || header_bytes > limits.max_header_bytes {
        ApiError::from(
            A2aError::with_message(
                ErrorCode::HEADERS_TOO_LARGE,
                format!(
                    "the request has {} headers and {header_bytes} bytes of headers; the limits are {} headers and {} bytes",
                    req.headers().len(),
                    limits.max_headers,
                    limits.max_header_bytes
                ),
            )
            .details(json!({"max_headers": limits.max_headers, "max_header_bytes": limits.max_header_bytes})),
        )
        .into_response()
    } else if step.shared() {
        match sender_share(state, step, req).await {
            Ok((req, held)) => {
                let resp = next.run(req).await;
                held.give_back();
                resp
            }
            Err(refused) => refused,
        }
    } else {
        next.run(req).await
    };
    let headers = resp.headers_mut();
    headers.insert(HeaderName::from_static(h::A2A_VERSION), HeaderValue::from_static(a2a_core::PROTOCOL_VERSION));
    headers.insert(HeaderName::from_static(h::A2A_SENDER_ID), state.sender_header.clone());
    if let Some(origin) = origin {
        apply_cors(&state.cors, &origin, headers, false);
    }
    let outcome = resp.extensions().get::<Outcome>().map(|o| o.0.clone());
    let seconds = started.elapsed().as_secs_f64();
    state.engine.metrics.request(step, outcome.as_ref().map_or(Ok(()), Err), seconds);
    if let Some(tag) = resp.extensions().get::<AuditTag>() {
        state.engine.metrics.capability_request(&tag.capability, step, seconds);
    }
    match (&state.response_signer, answered) {
        (Some(signer), Some(answered)) => {
            crate::response_signing::sign(signer, &state.engine.did, answered, resp).await
        }
        _ => resp,
    }
}

/// LIM-14, LIM-15: a slot of the sender's share for a handshake request, held in its extensions
/// ([`crate::shares::HeldSlot`]) — at once, after waiting in the sender's queue, or `429 quota_exceeded` naming the
/// limit. A request without `A2A-Sender-ID` has no share (the handler refuses it at once, HDR-6).
async fn sender_share(
    state: &Arc<AppState>,
    step: Step,
    mut req: Request,
) -> Result<(Request, crate::shares::HeldSlot), Response> {
    let Some(sender) = req.headers().get(h::A2A_SENDER_ID) else {
        return Ok((req, crate::shares::HeldSlot(Default::default())));
    };
    let sender = String::from_utf8_lossy(sender.as_bytes());
    match state.shares.acquire(sender.trim()).await {
        Ok((slot, how)) => {
            if how == crate::shares::Admission::Queued {
                state.engine.metrics.quota_queued("max_in_progress_per_sender");
            }
            let held = crate::shares::HeldSlot(Arc::new(std::sync::Mutex::new(Some(slot))));
            req.extensions_mut().insert(held.clone());
            Ok((req, held))
        }
        Err(q) => {
            state.engine.metrics.quota(q.quota, false);
            let what = format!("{} refused", step.as_str());
            Err(ApiError::from(crate::engine::quota_error(&q, &what)).into_response())
        }
    }
}

fn apply_cors(policy: &CorsPolicy, origin: &HeaderValue, headers: &mut HeaderMap, preflight: bool) {
    let allow = match policy {
        CorsPolicy::Any => Some(HeaderValue::from_static("*")),
        CorsPolicy::List(list) => {
            headers.append(header::VARY, HeaderValue::from_static("Origin"));
            origin.to_str().ok().filter(|o| list.iter().any(|l| l == o)).map(|_| origin.clone())
        }
    };
    let Some(allow) = allow else { return };
    headers.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, allow);
    headers.insert(header::ACCESS_CONTROL_EXPOSE_HEADERS, HeaderValue::from_static(h::CORS_EXPOSE_HEADERS));
    if preflight {
        headers.insert(header::ACCESS_CONTROL_ALLOW_METHODS, HeaderValue::from_static(h::CORS_ALLOW_METHODS));
        headers.insert(header::ACCESS_CONTROL_ALLOW_HEADERS, HeaderValue::from_static(h::CORS_ALLOW_HEADERS));
        headers.insert(header::ACCESS_CONTROL_MAX_AGE, HeaderValue::from_static("300"));
    }
}

/// `OPTIONS /a2a` (DISCOVER, DISC-1) — and any other method on `/a2a`, answered 405.
async fn discover(State(state): State<Arc<AppState>>, method: Method) -> ApiResult {
    if method != Method::OPTIONS {
        return Err(ApiError {
            err: Box::new(A2aError::with_message(
                ErrorCode::METHOD_NOT_ALLOWED,
                "DISCOVER is `OPTIONS /a2a`; the other endpoints are below /a2a (see spec/PROTOCOL.md §2)",
            )),
            www_authenticate: None,
            allow: Some("OPTIONS"),
        });
    }
    let mut resp = StatusCode::NO_CONTENT.into_response();
    resp.headers_mut().extend(state.discover_headers.clone());
    Ok(resp)
}

/// A CORS preflight on any path below the endpoint (DISC-5). Other requests to unknown paths, `OPTIONS` without
/// `Access-Control-Request-Method` included (DISC-13), get `404 not_found`.
async fn preflight(State(state): State<Arc<AppState>>, method: Method, headers: HeaderMap) -> ApiResult {
    if method == Method::OPTIONS && headers.contains_key(header::ACCESS_CONTROL_REQUEST_METHOD) {
        return preflight_handler(State(state), headers).await;
    }
    Err(A2aError::with_message(
        ErrorCode::NOT_FOUND,
        "no A2A endpoint at this path; the endpoints are OPTIONS /a2a, GET /a2a/capabilities, POST /a2a/negotiate, \
         /a2a/execute, /a2a/confirm, /a2a/cancel, /a2a/fallback and GET /a2a/result/{execution_id}",
    )
    .into())
}

pub(crate) async fn preflight_handler(State(state): State<Arc<AppState>>, headers: HeaderMap) -> ApiResult {
    let mut resp = StatusCode::NO_CONTENT.into_response();
    if let Some(origin) = headers.get(header::ORIGIN) {
        apply_cors(&state.cors, origin, resp.headers_mut(), true);
    }
    Ok(resp)
}

/// `OPTIONS` on an endpoint below `/a2a` (DISC-13): `204` with `Allow: allow` (the list its `405` carries, ERR-3),
/// preflight or not, plus the CORS headers when the request carries `Origin` (DISC-5, DISC-6).
pub(crate) async fn endpoint_options(state: Arc<AppState>, headers: HeaderMap, allow: &'static str) -> ApiResult {
    let mut resp = preflight_handler(State(state), headers).await?;
    resp.headers_mut().insert(header::ALLOW, HeaderValue::from_static(allow));
    Ok(resp)
}

/// [`endpoint_options`] for an endpoint that accepts GET.
pub(crate) async fn options_get(State(state): State<Arc<AppState>>, headers: HeaderMap) -> ApiResult {
    endpoint_options(state, headers, "GET, OPTIONS").await
}

/// [`endpoint_options`] for an endpoint that accepts POST.
pub(crate) async fn options_post(State(state): State<Arc<AppState>>, headers: HeaderMap) -> ApiResult {
    endpoint_options(state, headers, "POST, OPTIONS").await
}

pub(crate) async fn not_allowed_get() -> ApiError {
    ApiError {
        err: Box::new(A2aError::with_message(ErrorCode::METHOD_NOT_ALLOWED, "this endpoint accepts GET (and OPTIONS)")),
        www_authenticate: None,
        allow: Some("GET, OPTIONS"),
    }
}

pub(crate) async fn not_allowed_post() -> ApiError {
    ApiError {
        err: Box::new(A2aError::with_message(
            ErrorCode::METHOD_NOT_ALLOWED,
            "this endpoint accepts POST (and OPTIONS)",
        )),
        www_authenticate: None,
        allow: Some("POST, OPTIONS"),
    }
}

/// `GET /a2a/capabilities` (DISC-8).
async fn capabilities(State(state): State<Arc<AppState>>, headers: HeaderMap) -> ApiResult {
    check_version(&headers, false)?;
    Ok((
        StatusCode::OK,
        [(header::CONTENT_TYPE, HeaderValue::from_static("application/json"))],
        state.capabilities_json.clone(),
    )
        .into_response())
}

pub(crate) fn header_str<'a>(headers: &'a HeaderMap, name: &'static str) -> Result<Option<&'a str>, A2aError> {
    match headers.get(name) {
        None => Ok(None),
        Some(v) => v.to_str().map(Some).map_err(|_| {
            A2aError::with_message(ErrorCode::INVALID_HEADER, format!("header {name} is not visible ASCII"))
                .details(json!({"header": name}))
        }),
    }
}

/// HDR-3..5: `A2A-Version` present (unless optional) and `0.3`.
fn check_version(headers: &HeaderMap, required: bool) -> Result<(), A2aError> {
    let unsupported = |got: &str| {
        A2aError::with_message(
            ErrorCode::UNSUPPORTED_VERSION,
            format!("this agent speaks A2A {}; the request asked for {got:?}", a2a_core::PROTOCOL_VERSION),
        )
        .details(json!({"supported_versions": [a2a_core::PROTOCOL_VERSION]}))
    };
    match header_str(headers, h::A2A_VERSION).map_err(|_| unsupported("(not ASCII)"))? {
        None if required => Err(A2aError::new(ErrorCode::VERSION_REQUIRED)),
        None => Ok(()),
        Some(v) => match h::parse_version(v) {
            Ok(Version::V0_3) => Ok(()),
            _ => Err(unsupported(v)),
        },
    }
}

/// `A2A-Sender-ID`, trimmed and checked to be a did:web DID (HDR-6): `sender_required` when absent,
/// `invalid_sender` otherwise. The gateway reads senders with it too.
pub fn sender_id(headers: &HeaderMap) -> Result<&str, A2aError> {
    sender_id_value(headers.get(h::A2A_SENDER_ID).map(HeaderValue::as_bytes))
}

/// The common prelude of every step with a sender: version, sender (HDR-6), region and trace headers.
pub(crate) fn caller(headers: &HeaderMap) -> Result<Caller, A2aError> {
    check_version(headers, true)?;
    let sender = sender_id(headers)?;
    let region = match header_str(headers, h::A2A_REGION)? {
        None => None,
        Some(r) => Some(
            h::parse_region(r)
                .map_err(|e| {
                    A2aError::with_message(ErrorCode::INVALID_HEADER, e.to_string())
                        .details(json!({"header": "A2A-Region"}))
                })?
                .to_owned(),
        ),
    };
    // The request layer has put this agent's own context in `traceparent` (OPS-6): it is passed on as it is.
    let incoming = header_str(headers, "traceparent").ok().flatten();
    let traceparent = Some(match incoming.and_then(crate::trace_context::TraceParent::parse) {
        Some(ours) => ours.header(),
        None => crate::trace_context::continue_from(None).header(),
    });
    Ok(Caller { sender: sender.to_owned(), verified: false, region, traceparent, via_gateway: None })
}

/// Reads a request body within the size and time limits (LIM-1), after checking its content type (TR-5).
pub(crate) async fn read_body(state: &AppState, headers: &HeaderMap, body: Body) -> Result<Bytes, A2aError> {
    let ct = header_str(headers, header::CONTENT_TYPE.as_str())?.unwrap_or("");
    let mime = ct.split(';').next().unwrap_or("").trim();
    if !mime.eq_ignore_ascii_case("application/json") {
        return Err(A2aError::with_message(
            ErrorCode::UNSUPPORTED_MEDIA_TYPE,
            format!("the body must be sent with `Content-Type: application/json` (got {ct:?})"),
        ));
    }
    let limits = &state.engine.limits;
    crate::body::read_within(
        headers,
        body,
        limits.max_body_bytes,
        limits.body_read_timeout(),
        &state.engine.body_budget,
    )
    .await
    .map_err(crate::body::BodyError::into_a2a)
}

pub(crate) fn signed_parts<'a>(
    method: &'a str,
    uri: &'a OriginalUri,
    headers: &'a HeaderMap,
    body: &'a [u8],
) -> SignedParts<'a> {
    SignedParts { method, target: uri.0.path_and_query().map_or("/", |p| p.as_str()), headers, body }
}

/// `POST /a2a/negotiate` (§6).
async fn negotiate(State(state): State<Arc<AppState>>, uri: OriginalUri, headers: HeaderMap, body: Body) -> ApiResult {
    let mut caller = caller(&headers)?;
    let bytes = read_body(&state, &headers, body).await?;
    state.auth.forwarded(&state.engine, &signed_parts("POST", &uri, &headers, &bytes), &mut caller, true).await?;
    let req: NegotiateRequest = parse_json(&bytes)?;
    let cap = state.engine.require_capability(&req.target_capability).await?;
    state
        .auth
        .check_with_body_coverage(
            &state.engine,
            cap.decl.auth_requirement,
            &signed_parts("POST", &uri, &headers, &bytes),
            &mut caller,
        )
        .await?;
    let mut resp = state.engine.negotiate(&caller, &cap, req).await?;
    resp.bridge_to = crate::a2a1x::bridge_to(&state, &headers, &cap.decl.name);
    let mut r = json_response(StatusCode::OK, &resp);
    tag_capability(&mut r, &cap.decl.name);
    if let Ok(v) = HeaderValue::from_str(&resp.negotiation_id) {
        r.headers_mut().insert(HeaderName::from_static(h::A2A_NEGOTIATION_ID), v);
    }
    region_header(&mut r, &cap.decl.region_restriction);
    Ok(r)
}

fn region_header(resp: &mut Response, regions: &[String]) {
    if !regions.is_empty()
        && let Ok(v) = HeaderValue::from_str(&regions.join(", "))
    {
        resp.headers_mut().insert(HeaderName::from_static(h::A2A_REGION), v);
    }
}

/// The path prefix under which the router is nested (empty when it is not), for `Location`.
fn mount_prefix(original: &OriginalUri) -> &str {
    let path = original.0.path();
    path.rfind("/a2a/").map_or("", |i| &path[..i])
}

/// `POST /a2a/execute` (§7).
async fn execute(State(state): State<Arc<AppState>>, uri: OriginalUri, headers: HeaderMap, body: Body) -> ApiResult {
    let mut caller = caller(&headers)?;
    let neg_id =
        header_str(&headers, h::A2A_NEGOTIATION_ID)?.ok_or_else(|| A2aError::new(ErrorCode::NEGOTIATION_REQUIRED))?;
    let neg_id = h::parse_token("A2A-Negotiation-ID", neg_id).map_err(|e| {
        A2aError::with_message(ErrorCode::INVALID_HEADER, e.to_string())
            .details(json!({"header": "A2A-Negotiation-ID"}))
    })?;
    let idem = match header_str(&headers, h::IDEMPOTENCY_KEY)? {
        None => None,
        Some(k) => Some(h::parse_token("Idempotency-Key", k).map_err(|e| {
            A2aError::with_message(ErrorCode::INVALID_HEADER, e.to_string())
                .details(json!({"header": "Idempotency-Key"}))
        })?),
    };
    // Through a trusted gateway the sender is established first (GW-9), so the body is read before the lookup.
    let (early, body) = if headers.contains_key(h::A2A_FORWARDED_SENDER) {
        let bytes = read_body(&state, &headers, body).await?;
        state.auth.forwarded(&state.engine, &signed_parts("POST", &uri, &headers, &bytes), &mut caller, true).await?;
        (Some(bytes), None)
    } else {
        (None, Some(body))
    };
    state.auth.before_lookup(&signed_parts("POST", &uri, &headers, b""), &caller)?;
    let (neg, cap) = state.engine.negotiation_for(&caller, neg_id).await?;
    let bytes = match (early, body) {
        (Some(b), _) => b,
        (None, Some(body)) => read_body(&state, &headers, body).await?,
        (None, None) => Bytes::new(),
    };
    state
        .auth
        .check_with_body_coverage(
            &state.engine,
            cap.decl.auth_requirement,
            &signed_parts("POST", &uri, &headers, &bytes),
            &mut caller,
        )
        .await
        .map_err(|e| crate::auth::as_unknown(e, || crate::engine::unknown_negotiation(&caller, neg_id)))?;
    let payload: serde_json::Value = parse_json(&bytes)?;
    let (resp, created) = state.engine.execute(&caller, &neg, &cap, idem, payload).await?;
    let mut r = json_response(if created { StatusCode::CREATED } else { StatusCode::OK }, &resp);
    tag_capability(&mut r, &cap.decl.name);
    let location = format!(
        "{}/a2a/result/{}",
        mount_prefix(&uri),
        ExecutionId::parse(&resp.execution_id).map(|e| e.to_path_segment()).unwrap_or_default()
    );
    let hs = r.headers_mut();
    if let Ok(v) = HeaderValue::from_str(&location) {
        hs.insert(header::LOCATION, v);
    }
    if let Ok(v) = HeaderValue::from_str(&resp.execution_id) {
        hs.insert(HeaderName::from_static(h::A2A_EXECUTION_ID), v);
    }
    if let Ok(v) = HeaderValue::from_str(&resp.negotiation_id) {
        hs.insert(HeaderName::from_static(h::A2A_NEGOTIATION_ID), v);
    }
    region_header(&mut r, &cap.decl.region_restriction);
    Ok(r)
}

fn execution_header(resp: &mut Response, id: &str) {
    if let Ok(v) = HeaderValue::from_str(id) {
        resp.headers_mut().insert(HeaderName::from_static(h::A2A_EXECUTION_ID), v);
    }
}

/// What the record [`authorized_execution`] reads is for (which engine read it uses).
#[derive(Clone, Copy, PartialEq)]
enum ReadFor {
    /// Answering with it: [`crate::engine::Engine::execution_for`].
    Answer,
    /// A transition that follows at once: [`crate::engine::Engine::execution_for_update`].
    Update,
    /// A long-poll that follows at once: [`crate::engine::Engine::execution_for_wait`].
    Wait,
}

/// Finds the caller's execution and authenticates the caller for its capability; a refusal of the credentials is
/// answered as an unknown id (AUTH-10).
async fn authorized_execution(
    state: &AppState,
    caller: &mut Caller,
    id: &str,
    parts: &SignedParts<'_>,
    body_coverage: bool,
    read: ReadFor,
) -> Result<crate::store::ExecutionRecord, ApiError> {
    state.auth.before_lookup(parts, caller)?;
    let rec = match read {
        ReadFor::Answer => state.engine.execution_for(caller, id).await?,
        ReadFor::Update => state.engine.execution_for_update(caller, id).await?,
        ReadFor::Wait => state.engine.execution_for_wait(caller, id).await?,
    };
    let requirement = state
        .engine
        .capability(&rec.capability)
        .map_or(a2a_core::capability::AuthRequirement::None, |c| c.decl.auth_requirement);
    let checked = if body_coverage {
        state.auth.check_with_body_coverage(&state.engine, requirement, parts, caller).await
    } else {
        state.auth.check(&state.engine, requirement, parts, caller).await
    };
    checked.map_err(|e| crate::auth::as_unknown(e, || crate::engine::unknown_execution(caller, id)))?;
    Ok(rec)
}

/// `POST /a2a/confirm` (§8.2).
async fn confirm(State(state): State<Arc<AppState>>, uri: OriginalUri, headers: HeaderMap, body: Body) -> ApiResult {
    let mut caller = caller(&headers)?;
    let bytes = read_body(&state, &headers, body).await?;
    state.auth.forwarded(&state.engine, &signed_parts("POST", &uri, &headers, &bytes), &mut caller, true).await?;
    let req: ExecutionRef = parse_json(&bytes)?;
    let rec = authorized_execution(
        &state,
        &mut caller,
        &req.execution_id,
        &signed_parts("POST", &uri, &headers, &bytes),
        true,
        ReadFor::Update,
    )
    .await?;
    let tag =
        AuditTag { capability: rec.capability.clone(), negotiation: Some(rec.negotiation_id.clone()), status: None };
    let (resp, first) = state.engine.confirm(&caller, rec).await?;
    let mut r = json_response(if first { StatusCode::ACCEPTED } else { StatusCode::OK }, &resp);
    r.extensions_mut().insert(tag);
    execution_header(&mut r, &resp.execution_id);
    Ok(r)
}

/// `GET /a2a/result/{execution_id}` (§8.3).
async fn result(
    State(state): State<Arc<AppState>>,
    uri: OriginalUri,
    headers: HeaderMap,
    held: Option<axum::Extension<crate::shares::HeldSlot>>,
) -> ApiResult {
    let mut caller = caller(&headers)?;
    let segment = uri.0.path().rsplit('/').next().unwrap_or("");
    let id = ExecutionId::from_path_segment(segment).map_err(|e| {
        A2aError::with_message(ErrorCode::UNKNOWN_EXECUTION, format!("{segment:?} is not an execution id: {e}"))
    })?;
    let mut wait = Duration::ZERO;
    for pair in uri.0.query().unwrap_or("").split('&').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        if k == "wait_ms" {
            let ms: u64 = v.parse().map_err(|_| {
                A2aError::with_message(
                    ErrorCode::INVALID_REQUEST,
                    format!("wait_ms must be a decimal integer of milliseconds, got {v:?}"),
                )
                .details(json!({"parameter": "wait_ms"}))
            })?;
            wait = Duration::from_millis(ms);
        }
    }
    state.auth.forwarded(&state.engine, &signed_parts("GET", &uri, &headers, b""), &mut caller, false).await?;
    // A long-poll (not a stream, which starts from the record it is given) may start from what this process last
    // wrote: the wait ends with a read of the store or a terminal record (`Engine::result`).
    let may_stream = state.engine.streaming().is_some() && headers.contains_key(crate::streaming::A2A_STREAM);
    let read = if wait.is_zero() || may_stream { ReadFor::Answer } else { ReadFor::Wait };
    let rec =
        authorized_execution(&state, &mut caller, id.as_ref(), &signed_parts("GET", &uri, &headers, b""), false, read)
            .await?;
    // §18: with `A2A-Stream: true` at an agent that streams, the events of the execution (STR-1).
    if let Some(streaming) = state.engine.streaming().cloned()
        && crate::streaming::wants_stream(&headers)?
    {
        let tag = AuditTag {
            capability: rec.capability.clone(),
            negotiation: Some(rec.negotiation_id.clone()),
            status: None,
        };
        let target = uri.0.path_and_query().map_or_else(|| uri.0.path().to_owned(), |pq| pq.as_str().to_owned());
        let mut r = crate::streaming::sse::respond(&state, &streaming, rec, &headers, target, caller.sender).await?;
        r.extensions_mut().insert(tag);
        return Ok(r);
    }
    // LIM-16: a long-poll waits without working; the sender's slot serves its other requests meanwhile.
    if !wait.is_zero()
        && let Some(axum::Extension(held)) = &held
    {
        held.give_back();
    }
    let resp = if read == ReadFor::Wait {
        state.engine.result_for_wait(rec, wait).await?
    } else {
        state.engine.result(rec, wait).await?
    };
    let mut r = json_response(StatusCode::OK, &resp);
    tag_execution(&mut r, &resp);
    execution_header(&mut r, &resp.execution_id);
    Ok(r)
}

/// `POST /a2a/cancel` (§8.4).
async fn cancel(State(state): State<Arc<AppState>>, uri: OriginalUri, headers: HeaderMap, body: Body) -> ApiResult {
    let mut caller = caller(&headers)?;
    let bytes = read_body(&state, &headers, body).await?;
    state.auth.forwarded(&state.engine, &signed_parts("POST", &uri, &headers, &bytes), &mut caller, true).await?;
    let req: ExecutionRef = parse_json(&bytes)?;
    let rec = authorized_execution(
        &state,
        &mut caller,
        &req.execution_id,
        &signed_parts("POST", &uri, &headers, &bytes),
        true,
        ReadFor::Answer,
    )
    .await?;
    let resp = state.engine.cancel(rec).await?;
    let mut r = json_response(StatusCode::OK, &resp);
    tag_execution(&mut r, &resp);
    execution_header(&mut r, &resp.execution_id);
    Ok(r)
}

/// `POST /a2a/fallback` (§11).
async fn fallback(State(state): State<Arc<AppState>>, uri: OriginalUri, headers: HeaderMap, body: Body) -> ApiResult {
    let mut caller = caller(&headers)?;
    let bytes = read_body(&state, &headers, body).await?;
    state.auth.forwarded(&state.engine, &signed_parts("POST", &uri, &headers, &bytes), &mut caller, true).await?;
    let req: FallbackRequest = parse_json(&bytes)?;
    state.auth.verify_if_signed(&state.engine, &signed_parts("POST", &uri, &headers, &bytes), &mut caller).await?;
    let options = state.engine.fallback_options(&req.target_capability).await;
    state.engine.metrics.fallback_offered("fallback_request");
    Ok(json_response(
        StatusCode::OK,
        &FallbackResponse { requested_capability: req.target_capability, fallback_options: options },
    ))
}

/// Pre-computes the DISCOVER headers (DISC-2) and the capabilities document (DISC-8).
pub(crate) fn discover_parts(
    engine: &Engine,
    name: Option<String>,
    features: &[&str],
    sessions: Option<a2a_core::wire::SessionsInfo>,
) -> (HeaderMap, Bytes) {
    let mut hm = HeaderMap::new();
    let names: Vec<&str> = engine.caps.iter().map(|c| c.decl.name.as_str()).collect();
    if let Ok(v) = HeaderValue::from_str(&h::format_capabilities(&names)) {
        hm.insert(HeaderName::from_static(h::A2A_CAPABILITIES), v);
    }
    let regions: std::collections::BTreeMap<String, Vec<String>> = engine
        .caps
        .iter()
        .filter(|c| !c.decl.region_restriction.is_empty())
        .map(|c| (c.decl.name.clone(), c.decl.region_restriction.clone()))
        .collect();
    if !regions.is_empty()
        && let Ok(v) = HeaderValue::from_str(&h::format_region_map(&regions))
    {
        hm.insert(HeaderName::from_static(h::A2A_REGION), v);
    }
    hm.insert(header::ACCESS_CONTROL_ALLOW_METHODS, HeaderValue::from_static(h::CORS_ALLOW_METHODS));
    hm.insert(header::ACCESS_CONTROL_ALLOW_HEADERS, HeaderValue::from_static(h::CORS_ALLOW_HEADERS));
    hm.insert(header::ACCESS_CONTROL_MAX_AGE, HeaderValue::from_static("300"));
    let doc = CapabilitiesDocument {
        a2a_version: a2a_core::PROTOCOL_VERSION.to_owned(),
        agent: a2a_core::wire::AgentInfo { id: engine.did.clone(), name },
        capabilities: engine.caps.iter().map(|c| c.decl.clone()).collect(),
        features: features.iter().map(|f| (*f).to_owned()).collect(),
        limits: Some(engine.limits.announced()),
        sessions,
    };
    let mut doc = serde_json::to_value(&doc).unwrap_or_default();
    // CMP-1: a composite's declaration carries its pipeline as the `composite` member.
    if let Some(list) = doc.get_mut("capabilities").and_then(serde_json::Value::as_array_mut) {
        for (decl, cap) in list.iter_mut().zip(&engine.caps) {
            if let (Some(obj), Some(c)) = (decl.as_object_mut(), &cap.composite) {
                obj.insert("composite".into(), serde_json::to_value(c.pipeline()).unwrap_or_default());
            }
        }
    }
    (hm, Bytes::from(serde_json::to_vec(&doc).unwrap_or_default()))
}
