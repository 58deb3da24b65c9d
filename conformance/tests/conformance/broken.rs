//! The suite proves it can fail: deliberately broken agents, each the demo agent (the `a2a-server` library, real HTTP
//! on loopback) wrong in exactly one way on the wire, and for each the set of failed checks is exactly the expected
//! one. A middleware in front of the correct agent does the breaking; where the fault is "accepts what it must
//! refuse", the middleware re-signs with the caller's key or writes the execution to the agent's store, so that the
//! agent really accepts it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use a2a_core::execution_id::ExecutionId;
use a2a_core::integrity::{self, Coverage, MessageParts, SignatureClaims};
use a2a_core::jws;
use a2a_server::handler::ExecutionContext;
use a2a_server::store::{ExecutionRecord, Store};
use axum::body::Body;
use axum::extract::Request;
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use crate::common::{self, Caller, Running};

/// One fault each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// Error responses lack A2A-Version.
    ErrorsWithoutVersion,
    /// Preflights below /a2a lack Access-Control-Allow-Headers (a browser cannot send the A2A headers).
    PreflightWithoutAllowHeaders,
    /// NEGOTIATE accepts `nullable` (the agent drops it from the proposal instead of refusing it).
    AcceptsNullable,
    /// A repeated CONFIRM is answered as a first one and runs the work again.
    ConfirmRunsTwice,
    /// Expired signatures are accepted.
    AcceptsExpiredSignatures,
    /// A replayed signed request is accepted.
    NoReplayProtection,
    /// Unsigned requests to the did_auth capability are accepted.
    AcceptsUnsigned,
    /// Payloads that do not match the agreed schema are accepted.
    AcceptsInvalidPayloads,
    /// EXECUTE responses lack A2A-Execution-ID.
    NoExecutionHeader,
    /// Unknown paths get an HTML page.
    HtmlNotFound,
    /// Any A2A-Version is taken as 0.3.
    LenientVersion,
    /// idempotency is advertised but Idempotency-Key is ignored.
    IgnoresIdempotencyKey,
    /// limits.max_body_bytes announces less than the agent enforces.
    UnderstatesBodyLimit,
    /// The region restriction is not enforced.
    IgnoresRegion,
    /// A send whose wait ended while the run was still within its run timeout is reported `timeout` instead of
    /// `accepted` (OpenClaw #43095).
    FalseSessionTimeout,
    /// A reply to a run whose requester stopped waiting is acknowledged but dropped (OpenClaw #148296).
    DropsLateReply,
    /// A stream resumed with Last-Event-ID is replayed from its first event (STR-11).
    StreamResumesFromStart,
    /// The sessions' event channel ignores Last-Event-ID: a reconnecting client gets a fresh stream (ANN-4).
    EventsIgnoreLastEventId,
    /// A2A-Hop is ignored: every send counts as hop 1 (POL-4).
    IgnoresHop,
    /// The history shows the messages as they were sent, secrets included (HIS-4).
    NoRedaction,
    /// Streams are sent without Cache-Control: no-store (STR-1).
    StreamWithoutNoStore,
    /// An A2A-Stream value other than true or false is taken as false (STR-2).
    LenientStreamHeader,
    /// More than 8 attachments are accepted (the ninth and later are dropped) (SND-2).
    UnboundedAttachments,
    /// context_mode and context are ignored: every delivery comes without context (SND-11).
    IgnoresContext,
    /// run_timeout_ms is ignored: every run gets the default (SND-13).
    IgnoresRunTimeout,
    /// The reserved keys send and spawn are registered (under another name) (SES-11).
    RegistersReservedKeys,
    /// An announce step answered ANNOUNCE_SKIP is published anyway (ANN-2).
    PublishesSkippedAnnounce,
    /// The A2A 1.x bridge signs its card with a key that is not in the agent's DID document (BR-5, BR-6).
    CardSignedWithAnotherKey,
    /// The A2A 1.x bridge's GetTask answers another task than the one asked for (BR-13).
    GetTaskAnswersAnotherTask,
    /// The random suffix of an execution id is a counter (EID-5): unique, well-formed, and predictable.
    CounterExecutionIds,
    /// Location carries the execution id as it is, not percent-encoded as a path segment (EID-11, EXE-4).
    LocationNotEncoded,
    /// Responses are signed over a pretty-printed (non-canonical) header and claims (JWS-2, JCS-21); the signatures
    /// verify.
    NonCanonicalResponseSignatures,
    /// Deadlines are never enforced (ST-3): an execution past its deadline runs on and ends succeeded.
    IgnoresDeadlines,
    /// A late result overwrites `canceled` (ST-2): once the handler would have finished, RESULT shows succeeded.
    LateResultOverwritesCancel,
    /// Error responses lack `A2A-Sender-ID` (HDR-7).
    ErrorsWithoutSenderId,
    /// `405` responses lack `Allow` (ERR-3); the body still names the methods.
    MethodNotAllowedWithoutAllow,
    /// A `proposed_schema` that is not a JSON object is answered `400 invalid_request` as a malformed request (TR-7's
    /// reading) instead of `422 schema_rule_violation` at `""` (SCH-22, SCH-6).
    NonObjectSchemaIs400,
    /// DISCOVER (`OPTIONS /a2a`) is answered `200` instead of `204` (DISC-1).
    DiscoverAnswers200,
    /// RESULT of an id that does not parse is `400 invalid_request` instead of `404 unknown_execution` (EID-9).
    MalformedIdsAre400,
    /// CANCEL of a terminal execution is answered `200` with its status instead of `409 invalid_state` (CAN-2).
    CancelOfTerminalAccepted,
    /// RESULT of a failed, timed out or canceled execution has no `error` (ST-4).
    ResultWithoutError,
    /// A body with another Content-Type than JSON is read as JSON instead of refused with `415` (TR-5).
    ContentTypeIgnored,
    /// A request without `A2A-Sender-ID` is served as if a default sender had sent it (HDR-6).
    MissingSenderAccepted,
    /// A first CONFIRM is answered `200` instead of `202` (CONF-1).
    ConfirmAnswers200,
    /// CONFIRM of an unknown execution is `400 invalid_request` instead of `404 unknown_execution` (CONF-4).
    UnknownConfirmIs400,
    /// EXECUTE without `A2A-Negotiation-ID` is `404 unknown_negotiation` instead of `400 negotiation_required` (EXE-1).
    MissingNegotiationIdIs404,
    /// DISCOVER lacks `A2A-Capabilities` (DISC-2).
    DiscoverWithoutCapabilities,
    /// CANCEL is answered `202` with an empty object instead of `200` with the canceled `ResultResponse` (CAN-1).
    CancelAnswers202,
    /// Responses are signed with a key that is not in the agent's DID document (INT-10, KEY-8).
    ResponsesSignedWithAnotherKey,
    /// `=` padding is stripped from `A2A-Signature` before it is decoded, so a padded token is accepted (JWS-3).
    LenientTokenDecoding,
    /// A body that is not JSON is `400 invalid_request` instead of `400 invalid_json` (TR-7).
    InvalidJsonWrongCode,
    /// RESULT ignores `wait_ms`: it always answers at once (RES-2).
    IgnoresWaitMs,
    /// EXECUTE answers a `confirm_by` an hour later than `created_at` plus the confirm window (EXE-6).
    ConfirmByOffByAnHour,
    /// NEGOTIATE ignores the proposed `timeout_ms`: every negotiation gets the default (NEG-2).
    IgnoresProposedTimeout,
    /// CONFIRM of a canceled execution is answered `202 accepted` (CONF-3).
    ConfirmAfterCancelAccepted,
    /// Responses other than preflights lack `Access-Control-Allow-Origin` (DISC-6).
    CorsMissingOnResponses,
    /// DISCOVER without `A2A-Version` is refused `400 version_required` (HDR-3).
    DiscoverRequiresVersion,
    /// `capabilities` of `GET /a2a/capabilities` is in the reverse order of `A2A-Capabilities` (DISC-9).
    CapabilitiesReordered,
}

/// A broken agent, running.
pub struct Broken {
    pub running: Running,
    /// The caller identity whose key the middleware uses, for the signature faults.
    pub caller: Option<Caller>,
    /// Runs of the handler per execution id (ConfirmRunsTwice).
    pub runs: Arc<Mutex<HashMap<String, usize>>>,
}

type Runs = Arc<Mutex<HashMap<String, usize>>>;

async fn body_bytes(body: Body) -> Vec<u8> {
    axum::body::to_bytes(body, 64 * 1024 * 1024).await.map(|b| b.to_vec()).unwrap_or_default()
}

fn header<'a>(h: &'a HeaderMap, name: &str) -> Option<&'a str> {
    h.get(name).and_then(|v| v.to_str().ok())
}

/// Re-signs (or signs) a request with the caller's key, as a broken agent's "verification" lets it through.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Resign {
    /// An expired but otherwise valid signature is renewed.
    Expired,
    /// Every valid signature gets a fresh jti (so that replays look new).
    FreshJti,
    /// Unsigned requests from the caller are signed.
    Unsigned,
}

fn resign(
    req: &mut Request<Body>,
    body: &[u8],
    caller: &a2a_conformance::identity::Identity,
    agent_did: &str,
    policy: Resign,
) {
    let now = a2a_conformance::identity::unix_now();
    let token = header(req.headers(), "a2a-signature").map(str::to_owned);
    let new = match (token, policy) {
        (None, Resign::Unsigned) => {
            if header(req.headers(), "a2a-sender-id") != Some(caller.did.as_str()) {
                return;
            }
            let target = req.uri().path_and_query().map_or("/", |p| p.as_str()).to_owned();
            let method = req.method().as_str().to_owned();
            let headers: Vec<(String, String)> = req
                .headers()
                .iter()
                .filter_map(|(n, v)| v.to_str().ok().map(|v| (n.as_str().to_owned(), v.to_owned())))
                .collect();
            let hs: Vec<(&str, &str)> = headers.iter().map(|(n, v)| (n.as_str(), v.as_str())).collect();
            let parts = MessageParts { method: &method, target: &target, headers: &hs, body, status: None };
            let coverage = if method == "GET" { Coverage::HeaderOnly } else { Coverage::PayloadHash };
            match integrity::sign(&caller.key, &caller.key_id, &caller.did, agent_did, coverage, &parts, now, 60) {
                Ok(t) => t,
                Err(_) => return,
            }
        }
        (Some(token), Resign::Expired | Resign::FreshJti) => {
            let Ok(jws) = jws::decode_typed::<SignatureClaims>(&token) else { return };
            if jws.kid() != Some(caller.kid().as_str()) || jws.verify(caller.key.verifying_key()).is_err() {
                return;
            }
            // Everything but the time (Expired) or the memory of jtis (FreshJti) is still checked: steps 1-5 and 7-8
            // of INT-6 with the caller's key, as the correct agent would.
            let target = req.uri().path_and_query().map_or("/", |p| p.as_str()).to_owned();
            let method = req.method().as_str().to_owned();
            let headers: Vec<(String, String)> = req
                .headers()
                .iter()
                .filter_map(|(n, v)| v.to_str().ok().map(|v| (n.as_str().to_owned(), v.to_owned())))
                .collect();
            let hs: Vec<(&str, &str)> = headers.iter().map(|(n, v)| (n.as_str(), v.as_str())).collect();
            let parts = MessageParts { method: &method, target: &target, headers: &hs, body, status: None };
            let at = if policy == Resign::Expired { jws.claims().iat } else { now };
            let checked = integrity::prepare(&token, &parts, agent_did, at)
                .and_then(|p| p.finish(caller.key.verifying_key(), &parts));
            if checked.is_err() {
                return;
            }
            let mut claims = jws.claims().clone();
            match policy {
                Resign::Expired if claims.exp + 30 < now => {
                    claims.iat = now;
                    claims.exp = now + 60;
                }
                Resign::FreshJti => claims.jti = integrity::new_jti().unwrap_or_default(),
                _ => return,
            }
            match integrity::sign_claims(&caller.key, &claims) {
                Ok(t) => t,
                Err(_) => return,
            }
        }
        _ => return,
    };
    if let Ok(v) = HeaderValue::from_str(&new) {
        req.headers_mut().insert("a2a-signature", v);
    }
}

/// Signs a request afresh with the caller's key (`payload_hash` over `body`), replacing its signature: a broken agent
/// that rewrites a request does so after its own checks, so the fault is in what it does, not in a signature.
fn sign_anew(req: &mut Request<Body>, body: &[u8], caller: &a2a_conformance::identity::Identity, agent_did: &str) {
    req.headers_mut().remove("a2a-signature");
    let target = req.uri().path_and_query().map_or("/", |p| p.as_str()).to_owned();
    let method = req.method().as_str().to_owned();
    let headers: Vec<(String, String)> = req
        .headers()
        .iter()
        .filter_map(|(n, v)| v.to_str().ok().map(|v| (n.as_str().to_owned(), v.to_owned())))
        .collect();
    let hs: Vec<(&str, &str)> = headers.iter().map(|(n, v)| (n.as_str(), v.as_str())).collect();
    let parts = MessageParts { method: &method, target: &target, headers: &hs, body, status: None };
    let now = a2a_conformance::identity::unix_now();
    if let Ok(t) =
        integrity::sign(&caller.key, &caller.key_id, &caller.did, agent_did, Coverage::PayloadHash, &parts, now, 60)
        && let Ok(v) = HeaderValue::from_str(&t)
    {
        req.headers_mut().insert("a2a-signature", v);
    }
}

/// The request with its JSON body rewritten by `edit` when `edit` changes it (and then signed anew); unchanged
/// otherwise (bodies that are not JSON included).
async fn edit_body(state: &State, req: Request<Body>, edit: impl FnOnce(&mut Value) -> bool) -> Request<Body> {
    let (mut parts, body) = req.into_parts();
    let bytes = body_bytes(body).await;
    let mut v = match serde_json::from_slice::<Value>(&bytes) {
        Ok(v) => v,
        Err(_) => return Request::from_parts(parts, Body::from(bytes)),
    };
    if !edit(&mut v) {
        return Request::from_parts(parts, Body::from(bytes));
    }
    let new = serde_json::to_vec(&v).unwrap_or_default();
    parts.headers.remove("content-length");
    let mut req = Request::from_parts(parts, Body::from(new.clone()));
    if let Some(caller) = &state.caller {
        sign_anew(&mut req, &new, caller, &state.agent_did);
    }
    req
}

fn strip_nullable(v: &mut Value) {
    match v {
        Value::Object(o) => {
            o.remove("nullable");
            o.values_mut().for_each(strip_nullable);
        }
        Value::Array(a) => a.iter_mut().for_each(strip_nullable),
        _ => {}
    }
}

/// The counting echo handler of the ConfirmRunsTwice agent.
fn counting_echo(runs: Runs) -> impl Fn(String, Value) -> Value + Clone + Send + Sync + 'static {
    move |id: String, payload: Value| {
        *runs.lock().unwrap_or_else(std::sync::PoisonError::into_inner).entry(id).or_insert(0) += 1;
        json!({"echo": payload})
    }
}

struct State {
    fault: Fault,
    agent_did: String,
    caller: Option<a2a_conformance::identity::Identity>,
    store: Arc<a2a_server::store::MemoryStore>,
    work: Option<Arc<dyn Fn(String, Value) -> Value + Send + Sync>>,
    /// Runs whose requester stopped waiting (DropsLateReply).
    waited_out: Mutex<std::collections::HashSet<String>>,
    /// The text sent in each run (NoRedaction).
    sent: Mutex<HashMap<String, String>>,
    /// Real suffix -> counter suffix of each execution id handed out (CounterExecutionIds).
    counters: Mutex<Vec<(String, String)>>,
    /// The slow executions (a payload with `seconds`): their run time, CONFIRM time and whether CANCEL canceled them
    /// (IgnoresDeadlines, LateResultOverwritesCancel).
    slow: Mutex<HashMap<String, SlowRun>>,
    /// The agent's key (NonCanonicalResponseSignatures).
    agent_key: Option<a2a_core::keys::SigningKey>,
    /// A key not in the agent's DID document (ResponsesSignedWithAnotherKey).
    other_key: Option<a2a_core::keys::SigningKey>,
}

/// A slow execution as the broken agent tracks it.
#[derive(Debug, Clone, Copy)]
struct SlowRun {
    seconds: f64,
    confirmed: Option<std::time::Instant>,
    canceled: bool,
}

impl SlowRun {
    /// Whether the handler would have finished by now.
    fn finished(&self) -> bool {
        self.confirmed.is_some_and(|c| c.elapsed().as_secs_f64() >= self.seconds)
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// `text` with every `from` suffix replaced by its `to` (CounterExecutionIds).
fn swap_suffixes(text: &str, pairs: &[(String, String)], to_fake: bool) -> String {
    let mut out = text.to_owned();
    for (real, fake) in pairs {
        let (from, to) = if to_fake { (real, fake) } else { (fake, real) };
        if out.contains(from.as_str()) {
            out = out.replace(from.as_str(), to);
        }
    }
    out
}

/// The agent whose execution id suffixes are a counter: it hands out `sender_time_<counter>` ids and maps them back
/// to its real ones on every request (unsigned requests only: a signed one cannot be rewritten).
async fn counter_ids(state: Arc<State>, req: Request<Body>, next: Next) -> Response {
    let signed = req.headers().contains_key("a2a-signature");
    let is_execute = req.method() == Method::POST && req.uri().path() == "/a2a/execute";
    let (mut parts, body) = req.into_parts();
    let mut bytes = body_bytes(body).await;
    if !signed {
        let pairs = lock(&state.counters).clone();
        let uri = swap_suffixes(&parts.uri.to_string(), &pairs, false);
        if let Ok(u) = uri.parse::<axum::http::Uri>() {
            // The agent reads the id from the URI as received (OriginalUri), which the router keeps.
            parts.extensions.insert(axum::extract::OriginalUri(u.clone()));
            parts.uri = u;
        }
        if let Ok(text) = std::str::from_utf8(&bytes) {
            bytes = swap_suffixes(text, &pairs, false).into_bytes();
        }
        parts.headers.remove("content-length");
    }
    let resp = next.run(Request::from_parts(parts, Body::from(bytes))).await;
    if signed {
        return resp;
    }
    let (mut parts, body) = resp.into_parts();
    if is_execute && let Some(id) = header(&parts.headers, "a2a-execution-id").and_then(|i| ExecutionId::parse(i).ok())
    {
        let mut counters = lock(&state.counters);
        if !counters.iter().any(|(r, _)| r == id.suffix()) {
            let n = 1_000_000u128 + counters.len() as u128;
            let fake = ExecutionId::from_parts(id.sender(), id.timestamp_ns(), n.to_be_bytes());
            counters.push((id.suffix().to_owned(), fake.suffix().to_owned()));
        }
    }
    let pairs = lock(&state.counters).clone();
    let names: Vec<HeaderName> = parts.headers.keys().cloned().collect();
    for name in names {
        if let Some(v) = parts.headers.get(&name).and_then(|v| v.to_str().ok()).map(str::to_owned) {
            let new = swap_suffixes(&v, &pairs, true);
            if new != v
                && let Ok(hv) = HeaderValue::from_str(&new)
            {
                parts.headers.insert(name, hv);
            }
        }
    }
    parts.headers.remove("content-length");
    // Streams are rewritten frame by frame (an SSE event, and so an id, is written whole).
    let body = http_body_util::BodyExt::map_frame(body, move |frame| {
        frame.map_data(|d| match std::str::from_utf8(&d) {
            Ok(text) => bytes::Bytes::from(swap_suffixes(text, &pairs, true)),
            Err(_) => d,
        })
    });
    Response::from_parts(parts, Body::new(body))
}

/// Re-signs a response's signature over pretty-printed JSON (NonCanonicalResponseSignatures).
fn pretty_resign(token: &str, key: &a2a_core::keys::SigningKey) -> Option<String> {
    let mut segs = token.split('.');
    let header: Value = serde_json::from_slice(&jws::base64url_decode(segs.next()?).ok()?).ok()?;
    let claims: Value = serde_json::from_slice(&jws::base64url_decode(segs.next()?).ok()?).ok()?;
    Some(a2a_conformance::identity::raw_token(
        key,
        &serde_json::to_vec_pretty(&header).ok()?,
        &serde_json::to_vec_pretty(&claims).ok()?,
    ))
}

/// Tracks slow executions and rewrites their RESULT as an agent that ignores deadlines, or lets a late result
/// overwrite a CANCEL, would answer (IgnoresDeadlines, LateResultOverwritesCancel).
async fn slow_runs(state: Arc<State>, req: Request<Body>, next: Next) -> Response {
    let path = req.uri().path().to_owned();
    let method = req.method().clone();
    let (parts, body) = req.into_parts();
    let bytes = body_bytes(body).await;
    let sent: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    let resp = next.run(Request::from_parts(parts, Body::from(bytes))).await;
    let is_stream = header(resp.headers(), "content-type") == Some("text/event-stream");
    if is_stream
        || !matches!(path.as_str(), "/a2a/execute" | "/a2a/confirm" | "/a2a/cancel")
            && !path.starts_with("/a2a/result/")
    {
        return resp;
    }
    let (mut parts, body) = resp.into_parts();
    let rbytes = body_bytes(body).await;
    let mut v: Value = serde_json::from_slice(&rbytes).unwrap_or(Value::Null);
    let id = v["execution_id"].as_str().unwrap_or("").to_owned();
    let mut slow = lock(&state.slow);
    match (method.as_str(), path.as_str()) {
        ("POST", "/a2a/execute") => {
            if let Some(seconds) = sent["seconds"].as_f64().filter(|s| *s > 0.0)
                && !id.is_empty()
            {
                slow.insert(id, SlowRun { seconds, confirmed: None, canceled: false });
            }
            return Response::from_parts(parts, Body::from(rbytes));
        }
        ("POST", "/a2a/confirm") => {
            if parts.status == StatusCode::ACCEPTED
                && let Some(run) = slow.get_mut(&id)
            {
                run.confirmed = Some(std::time::Instant::now());
            }
            return Response::from_parts(parts, Body::from(rbytes));
        }
        ("POST", "/a2a/cancel") => {
            if v["status"] == "canceled"
                && let Some(run) = slow.get_mut(&id)
            {
                run.canceled = true;
            }
            return Response::from_parts(parts, Body::from(rbytes));
        }
        _ => {}
    }
    let Some(run) = slow.get(&id).copied() else { return Response::from_parts(parts, Body::from(rbytes)) };
    drop(slow);
    let rewrite = match state.fault {
        Fault::IgnoresDeadlines => v["status"] == "timed_out",
        _ => v["status"] == "canceled" && run.canceled && run.finished(),
    };
    if !rewrite {
        return Response::from_parts(parts, Body::from(rbytes));
    }
    if let Some(o) = v.as_object_mut() {
        o.remove("error");
        if run.finished() {
            o.insert("status".into(), json!("succeeded"));
            o.insert("result".into(), json!({"slept_seconds": run.seconds}));
        } else {
            o.insert("status".into(), json!("running"));
        }
    }
    parts.headers.remove("content-length");
    Response::from_parts(parts, Body::from(serde_json::to_vec(&v).unwrap_or_default()))
}

async fn breaker(state: Arc<State>, req: Request<Body>, next: Next) -> Response {
    let path = req.uri().path().to_owned();
    let method = req.method().clone();
    match state.fault {
        Fault::ErrorsWithoutVersion => {
            let mut resp = next.run(req).await;
            if resp.status().as_u16() >= 400 {
                resp.headers_mut().remove("a2a-version");
            }
            resp
        }
        Fault::PreflightWithoutAllowHeaders => {
            let mut resp = next.run(req).await;
            if method == Method::OPTIONS && path != "/a2a" {
                resp.headers_mut().remove("access-control-allow-headers");
            }
            resp
        }
        Fault::AcceptsNullable if method == Method::POST && path == "/a2a/negotiate" => {
            let (parts, body) = req.into_parts();
            let mut bytes = body_bytes(body).await;
            if let Ok(mut v) = serde_json::from_slice::<Value>(&bytes)
                && let Some(schema) = v.get_mut("proposed_schema")
            {
                let before = schema.clone();
                strip_nullable(schema);
                if *schema != before {
                    bytes = serde_json::to_vec(&v).unwrap_or(bytes);
                }
            }
            let mut parts = parts;
            parts.headers.remove("content-length");
            next.run(Request::from_parts(parts, Body::from(bytes))).await
        }
        Fault::ConfirmRunsTwice if method == Method::POST && path == "/a2a/confirm" => {
            let resp = next.run(req).await;
            let (parts, body) = resp.into_parts();
            let bytes = body_bytes(body).await;
            let v: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
            if parts.status == StatusCode::OK && v["already_confirmed"] == true {
                let id = v["execution_id"].as_str().unwrap_or("").to_owned();
                if let (Ok(Some(rec)), Some(work)) = (state.store.get_execution(&id).await, state.work.clone()) {
                    // The work runs again, as for a first CONFIRM.
                    tokio::spawn(async move {
                        work(rec.id, rec.payload);
                    });
                }
                let mut out = Response::from_parts(
                    parts,
                    Body::from(
                        serde_json::to_vec(&json!({"execution_id": id, "status": "accepted"})).unwrap_or_default(),
                    ),
                );
                *out.status_mut() = StatusCode::ACCEPTED;
                out.headers_mut().remove("content-length");
                return out;
            }
            Response::from_parts(parts, Body::from(bytes))
        }
        Fault::AcceptsExpiredSignatures | Fault::NoReplayProtection | Fault::AcceptsUnsigned => {
            let policy = match state.fault {
                Fault::AcceptsExpiredSignatures => Resign::Expired,
                Fault::NoReplayProtection => Resign::FreshJti,
                _ => Resign::Unsigned,
            };
            let (parts, body) = req.into_parts();
            let bytes = body_bytes(body).await;
            let mut req = Request::from_parts(parts, Body::from(bytes.clone()));
            if let Some(caller) = &state.caller {
                resign(&mut req, &bytes, caller, &state.agent_did, policy);
            }
            next.run(req).await
        }
        Fault::AcceptsInvalidPayloads if method == Method::POST && path == "/a2a/execute" => {
            let (parts, body) = req.into_parts();
            let bytes = body_bytes(body).await;
            let headers = parts.headers.clone();
            let resp = next.run(Request::from_parts(parts, Body::from(bytes.clone()))).await;
            let (rparts, rbody) = resp.into_parts();
            let rbytes = body_bytes(rbody).await;
            let code = serde_json::from_slice::<Value>(&rbytes)
                .ok()
                .and_then(|v| v["error"]["code"].as_str().map(str::to_owned));
            if code.as_deref() == Some("payload_invalid")
                && let Some(r) = accept_anyway(&state, &headers, &bytes).await
            {
                return r;
            }
            Response::from_parts(rparts, Body::from(rbytes))
        }
        Fault::NoExecutionHeader if method == Method::POST && path == "/a2a/execute" => {
            let mut resp = next.run(req).await;
            resp.headers_mut().remove("a2a-execution-id");
            resp
        }
        Fault::HtmlNotFound => {
            let resp = next.run(req).await;
            if header(resp.headers(), "content-type") == Some("text/event-stream") {
                // A stream is not an error page (and may never end).
                return resp;
            }
            let (mut parts, body) = resp.into_parts();
            let bytes = body_bytes(body).await;
            let code = serde_json::from_slice::<Value>(&bytes)
                .ok()
                .and_then(|v| v["error"]["code"].as_str().map(str::to_owned));
            if code.as_deref() == Some("not_found") {
                parts.headers.insert("content-type", HeaderValue::from_static("text/html"));
                parts.headers.remove("content-length");
                return Response::from_parts(parts, Body::from("<html><body><h1>404 Not Found</h1></body></html>"));
            }
            Response::from_parts(parts, Body::from(bytes))
        }
        Fault::LenientVersion => {
            let mut req = req;
            if req.headers().contains_key("a2a-version") {
                req.headers_mut().insert("a2a-version", HeaderValue::from_static("0.3"));
            }
            next.run(req).await
        }
        Fault::IgnoresIdempotencyKey if path == "/a2a/execute" => {
            let mut req = req;
            req.headers_mut().remove("idempotency-key");
            next.run(req).await
        }
        Fault::UnderstatesBodyLimit if method == Method::GET && path == "/a2a/capabilities" => {
            let resp = next.run(req).await;
            let (mut parts, body) = resp.into_parts();
            let mut v: Value = serde_json::from_slice(&body_bytes(body).await).unwrap_or(Value::Null);
            v["limits"]["max_body_bytes"] = json!(65_536);
            parts.headers.remove("content-length");
            Response::from_parts(parts, Body::from(serde_json::to_vec(&v).unwrap_or_default()))
        }
        Fault::IgnoresRegion => {
            let mut req = req;
            if !req.headers().contains_key("a2a-region") && !req.headers().contains_key("a2a-signature") {
                req.headers_mut().insert(HeaderName::from_static("a2a-region"), HeaderValue::from_static("eu-west-1"));
            }
            next.run(req).await
        }
        Fault::FalseSessionTimeout | Fault::DropsLateReply
            if method == Method::POST && path == "/a2a/sessions/send" =>
        {
            let (parts, body) = req.into_parts();
            let bytes = body_bytes(body).await;
            let sent: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
            let waited = sent["wait_ms"].as_u64().unwrap_or(0) > 0 && sent["reply"] != false;
            let resp = next.run(Request::from_parts(parts, Body::from(bytes))).await;
            let (mut rparts, rbody) = resp.into_parts();
            let mut v: Value = serde_json::from_slice(&body_bytes(rbody).await).unwrap_or(Value::Null);
            if waited && v["status"] == "accepted" {
                if state.fault == Fault::FalseSessionTimeout {
                    v["status"] = json!("timeout");
                    rparts.status = StatusCode::OK;
                } else if let Some(id) = v["run_id"].as_str() {
                    state.waited_out.lock().unwrap_or_else(std::sync::PoisonError::into_inner).insert(id.to_owned());
                }
            }
            rparts.headers.remove("content-length");
            Response::from_parts(rparts, Body::from(serde_json::to_vec(&v).unwrap_or_default()))
        }
        Fault::DropsLateReply
            if method == Method::POST && path.starts_with("/a2a/runs/") && path.ends_with("/reply") =>
        {
            let id = path.trim_start_matches("/a2a/runs/").trim_end_matches("/reply").to_owned();
            let id = percent_decode(&id);
            let dropped = state.waited_out.lock().unwrap_or_else(std::sync::PoisonError::into_inner).contains(&id);
            if dropped {
                let mut out =
                    axum::Json(json!({"run_id": id, "status": "accepted", "state": "running"})).into_response();
                out.headers_mut().insert("a2a-version", HeaderValue::from_static("0.3"));
                if let Ok(did) = HeaderValue::from_str(&state.agent_did) {
                    out.headers_mut().insert("a2a-sender-id", did);
                }
                return out;
            }
            next.run(req).await
        }
        Fault::StreamWithoutNoStore if method == Method::GET && path.starts_with("/a2a/result/") => {
            let mut resp = next.run(req).await;
            if header(resp.headers(), "content-type") == Some("text/event-stream") {
                resp.headers_mut().remove("cache-control");
            }
            resp
        }
        Fault::LenientStreamHeader if method == Method::GET && path.starts_with("/a2a/result/") => {
            let mut req = req;
            let v = header(req.headers(), "a2a-stream").map(|v| v.trim().to_ascii_lowercase());
            if v.is_some_and(|v| v != "true" && v != "false") {
                req.headers_mut().remove("a2a-stream");
            }
            next.run(req).await
        }
        Fault::UnboundedAttachments | Fault::IgnoresContext | Fault::IgnoresRunTimeout
            if method == Method::POST && path == "/a2a/sessions/send" =>
        {
            let fault = state.fault;
            let req = edit_body(&state, req, |v| match fault {
                Fault::UnboundedAttachments => match v.get_mut("attachments").and_then(Value::as_array_mut) {
                    Some(a) if a.len() > 8 => {
                        a.truncate(8);
                        true
                    }
                    _ => false,
                },
                Fault::IgnoresContext => v.as_object_mut().is_some_and(|o| {
                    let had = o.remove("context").is_some();
                    o.remove("context_mode").is_some() || had
                }),
                _ => v.as_object_mut().is_some_and(|o| o.remove("run_timeout_ms").is_some()),
            })
            .await;
            next.run(req).await
        }
        Fault::RegistersReservedKeys if method == Method::POST && path == "/a2a/sessions" => {
            let req = edit_body(&state, req, |v| match v["session_key"].as_str() {
                Some(k @ ("send" | "spawn")) => {
                    v["session_key"] = json!(format!("{k}-registered"));
                    true
                }
                _ => false,
            })
            .await;
            next.run(req).await
        }
        Fault::PublishesSkippedAnnounce
            if method == Method::POST && path.starts_with("/a2a/runs/") && path.ends_with("/reply") =>
        {
            let req = edit_body(&state, req, |v| {
                let skip = v["reply"] == "ANNOUNCE_SKIP";
                if skip {
                    v["reply"] = json!("ANNOUNCE_SKIP was answered, published anyway");
                }
                skip
            })
            .await;
            next.run(req).await
        }
        Fault::StreamResumesFromStart if method == Method::GET && path.starts_with("/a2a/result/") => {
            let mut req = req;
            req.headers_mut().remove("last-event-id");
            next.run(req).await
        }
        Fault::EventsIgnoreLastEventId if method == Method::GET && path == "/a2a/events" => {
            let mut req = req;
            req.headers_mut().remove("last-event-id");
            next.run(req).await
        }
        Fault::IgnoresHop if path == "/a2a/sessions/send" => {
            let mut req = req;
            req.headers_mut().remove("a2a-hop");
            next.run(req).await
        }
        Fault::NoRedaction if method == Method::POST && path == "/a2a/sessions/send" => {
            let (parts, body) = req.into_parts();
            let bytes = body_bytes(body).await;
            let text = serde_json::from_slice::<Value>(&bytes).ok().and_then(|v| v["text"].as_str().map(str::to_owned));
            let resp = next.run(Request::from_parts(parts, Body::from(bytes))).await;
            let (rparts, rbody) = resp.into_parts();
            let rbytes = body_bytes(rbody).await;
            let run =
                serde_json::from_slice::<Value>(&rbytes).ok().and_then(|v| v["run_id"].as_str().map(str::to_owned));
            if let (Some(run), Some(text)) = (run, text) {
                state.sent.lock().unwrap_or_else(std::sync::PoisonError::into_inner).insert(run, text);
            }
            Response::from_parts(rparts, Body::from(rbytes))
        }
        Fault::NoRedaction if method == Method::GET && path.ends_with("/history") => {
            let resp = next.run(req).await;
            let (mut parts, body) = resp.into_parts();
            let mut v: Value = serde_json::from_slice(&body_bytes(body).await).unwrap_or(Value::Null);
            let sent = state.sent.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone();
            if let Some(messages) = v.get_mut("messages").and_then(Value::as_array_mut) {
                for m in messages.iter_mut().filter(|m| m["role"] == "inter_session") {
                    if let Some(text) = m["run_id"].as_str().and_then(|r| sent.get(r)) {
                        m["text"] = json!(text);
                    }
                }
                v["redacted"] = json!(0);
            }
            parts.headers.remove("content-length");
            Response::from_parts(parts, Body::from(serde_json::to_vec(&v).unwrap_or_default()))
        }
        Fault::GetTaskAnswersAnotherTask if method == Method::POST && path == "/a2a1x/jsonrpc" => {
            let (parts, body) = req.into_parts();
            let bytes = body_bytes(body).await;
            let get_task = serde_json::from_slice::<Value>(&bytes).is_ok_and(|v| v["method"] == "GetTask");
            let resp = next.run(Request::from_parts(parts, Body::from(bytes))).await;
            if !get_task {
                return resp;
            }
            let (mut parts, body) = resp.into_parts();
            let bytes = body_bytes(body).await;
            let mut v: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
            let Some(id) = v["result"]["id"].as_str().map(str::to_owned) else {
                return Response::from_parts(parts, Body::from(bytes));
            };
            v["result"]["id"] = json!(format!("{id}0"));
            parts.headers.remove("content-length");
            Response::from_parts(parts, Body::from(serde_json::to_vec(&v).unwrap_or_default()))
        }
        Fault::CounterExecutionIds => counter_ids(state.clone(), req, next).await,
        Fault::LocationNotEncoded if method == Method::POST && path == "/a2a/execute" => {
            let mut resp = next.run(req).await;
            let raw = header(resp.headers(), "a2a-execution-id").map(|id| format!("/a2a/result/{id}"));
            if resp.headers().contains_key("location")
                && let Some(v) = raw.and_then(|l| HeaderValue::from_str(&l).ok())
            {
                resp.headers_mut().insert("location", v);
            }
            resp
        }
        Fault::NonCanonicalResponseSignatures => {
            let mut resp = next.run(req).await;
            let token = header(resp.headers(), "a2a-signature").map(str::to_owned);
            if let (Some(token), Some(key)) = (token, &state.agent_key)
                && let Some(v) = pretty_resign(&token, key).and_then(|t| HeaderValue::from_str(&t).ok())
            {
                resp.headers_mut().insert("a2a-signature", v);
            }
            resp
        }
        Fault::IgnoresDeadlines | Fault::LateResultOverwritesCancel => slow_runs(state.clone(), req, next).await,
        Fault::MethodNotAllowedWithoutAllow => {
            let mut resp = next.run(req).await;
            if resp.status() == StatusCode::METHOD_NOT_ALLOWED {
                resp.headers_mut().remove("allow");
            }
            resp
        }
        Fault::NonObjectSchemaIs400 if method == Method::POST && path == "/a2a/negotiate" => {
            let (parts, body) = req.into_parts();
            let bytes = body_bytes(body).await;
            let proposed = serde_json::from_slice::<Value>(&bytes).ok().and_then(|v| v.get("proposed_schema").cloned());
            if proposed.is_some_and(|p| !p.is_object()) {
                let body = json!({"error": {"code": "invalid_request", "message": "proposed_schema must be an object",
                                            "details": {"member": "proposed_schema"}}});
                let mut out = (StatusCode::BAD_REQUEST, axum::Json(body)).into_response();
                out.headers_mut().insert("a2a-version", HeaderValue::from_static("0.3"));
                if let Ok(did) = HeaderValue::from_str(&state.agent_did) {
                    out.headers_mut().insert("a2a-sender-id", did);
                }
                return out;
            }
            next.run(Request::from_parts(parts, Body::from(bytes))).await
        }
        Fault::ErrorsWithoutSenderId => {
            let mut resp = next.run(req).await;
            if resp.status().as_u16() >= 400 {
                resp.headers_mut().remove("a2a-sender-id");
            }
            resp
        }
        Fault::DiscoverAnswers200
            if method == Method::OPTIONS
                && path == "/a2a"
                && !req.headers().contains_key("access-control-request-method") =>
        {
            let mut resp = next.run(req).await;
            if resp.status() == StatusCode::NO_CONTENT {
                *resp.status_mut() = StatusCode::OK;
            }
            resp
        }
        Fault::MalformedIdsAre400 if method == Method::GET && path.starts_with("/a2a/result/") => {
            let seg = path.trim_start_matches("/a2a/result/").to_owned();
            let resp = next.run(req).await;
            let malformed = ExecutionId::parse(&seg).is_err() && ExecutionId::from_path_segment(&seg).is_err();
            if resp.status() != StatusCode::NOT_FOUND || !malformed {
                return resp;
            }
            let (mut parts, _) = resp.into_parts();
            parts.status = StatusCode::BAD_REQUEST;
            parts.headers.remove("content-length");
            let body = json!({"error": {"code": "invalid_request", "message": "the execution id does not parse"}});
            Response::from_parts(parts, Body::from(serde_json::to_vec(&body).unwrap_or_default()))
        }
        Fault::CancelOfTerminalAccepted if method == Method::POST && path == "/a2a/cancel" => {
            let (parts, body) = req.into_parts();
            let sent = body_bytes(body).await;
            let asked =
                serde_json::from_slice::<Value>(&sent).ok().and_then(|v| v["execution_id"].as_str().map(str::to_owned));
            let resp = next.run(Request::from_parts(parts, Body::from(sent))).await;
            let (mut parts, body) = resp.into_parts();
            let bytes = body_bytes(body).await;
            let v: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
            if parts.status != StatusCode::CONFLICT || v["error"]["code"] != "invalid_state" {
                return Response::from_parts(parts, Body::from(bytes));
            }
            let id = asked;
            parts.status = StatusCode::OK;
            parts.headers.remove("content-length");
            let body = json!({"execution_id": id, "status": v["error"]["details"]["status"]});
            Response::from_parts(parts, Body::from(serde_json::to_vec(&body).unwrap_or_default()))
        }
        Fault::ResultWithoutError if method == Method::GET && path.starts_with("/a2a/result/") => {
            let resp = next.run(req).await;
            if header(resp.headers(), "content-type") == Some("text/event-stream") {
                return resp;
            }
            let (mut parts, body) = resp.into_parts();
            let bytes = body_bytes(body).await;
            let mut v: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
            let ended_badly = matches!(v["status"].as_str(), Some("failed" | "timed_out" | "canceled"));
            if !ended_badly {
                return Response::from_parts(parts, Body::from(bytes));
            }
            if let Some(o) = v.as_object_mut() {
                o.remove("error");
            }
            parts.headers.remove("content-length");
            Response::from_parts(parts, Body::from(serde_json::to_vec(&v).unwrap_or_default()))
        }
        Fault::ContentTypeIgnored if method == Method::POST => {
            let mut req = req;
            let json = header(req.headers(), "content-type").is_some_and(|c| c.starts_with("application/json"));
            if !json {
                req.headers_mut().insert("content-type", HeaderValue::from_static("application/json"));
            }
            next.run(req).await
        }
        Fault::ConfirmAnswers200 if method == Method::POST && path == "/a2a/confirm" => {
            let mut resp = next.run(req).await;
            if resp.status() == StatusCode::ACCEPTED {
                *resp.status_mut() = StatusCode::OK;
            }
            resp
        }
        Fault::UnknownConfirmIs400 | Fault::MissingNegotiationIdIs404 | Fault::InvalidJsonWrongCode
            if method == Method::POST =>
        {
            let fault = state.fault;
            let resp = next.run(req).await;
            let (mut parts, body) = resp.into_parts();
            let bytes = body_bytes(body).await;
            let code = serde_json::from_slice::<Value>(&bytes)
                .ok()
                .and_then(|v| v["error"]["code"].as_str().map(str::to_owned))
                .unwrap_or_default();
            let new = match (fault, code.as_str()) {
                (Fault::UnknownConfirmIs400, "unknown_execution") if path == "/a2a/confirm" => {
                    Some((StatusCode::BAD_REQUEST, "invalid_request"))
                }
                (Fault::MissingNegotiationIdIs404, "negotiation_required") => {
                    Some((StatusCode::NOT_FOUND, "unknown_negotiation"))
                }
                (Fault::InvalidJsonWrongCode, "invalid_json") => Some((StatusCode::BAD_REQUEST, "invalid_request")),
                _ => None,
            };
            let Some((status, code)) = new else { return Response::from_parts(parts, Body::from(bytes)) };
            parts.status = status;
            parts.headers.remove("content-length");
            let body = json!({"error": {"code": code, "message": "refused"}});
            Response::from_parts(parts, Body::from(serde_json::to_vec(&body).unwrap_or_default()))
        }
        Fault::DiscoverWithoutCapabilities if method == Method::OPTIONS && path == "/a2a" => {
            let mut resp = next.run(req).await;
            resp.headers_mut().remove("a2a-capabilities");
            resp
        }
        Fault::CancelAnswers202 if method == Method::POST && path == "/a2a/cancel" => {
            let resp = next.run(req).await;
            if resp.status() != StatusCode::OK {
                return resp;
            }
            let (mut parts, _) = resp.into_parts();
            parts.status = StatusCode::ACCEPTED;
            parts.headers.remove("content-length");
            Response::from_parts(parts, Body::from("{}"))
        }
        Fault::ResponsesSignedWithAnotherKey => {
            let mut resp = next.run(req).await;
            let token = header(resp.headers(), "a2a-signature").map(str::to_owned);
            if let (Some(token), Some(key)) = (token, &state.other_key)
                && let Ok(jws) = jws::decode_typed::<SignatureClaims>(&token)
                && let Ok(t) = integrity::sign_claims(key, jws.claims())
                && let Ok(v) = HeaderValue::from_str(&t)
            {
                resp.headers_mut().insert("a2a-signature", v);
            }
            resp
        }
        Fault::LenientTokenDecoding => {
            let mut req = req;
            let token = header(req.headers(), "a2a-signature").map(|t| t.trim_end_matches('=').to_owned());
            if let Some(v) = token.and_then(|t| HeaderValue::from_str(&t).ok()) {
                req.headers_mut().insert("a2a-signature", v);
            }
            next.run(req).await
        }
        Fault::IgnoresWaitMs if method == Method::GET && path.starts_with("/a2a/result/") => {
            let (mut parts, body) = req.into_parts();
            if parts.uri.query().is_some_and(|q| q.contains("wait_ms"))
                && let Ok(u) = parts.uri.path().parse::<axum::http::Uri>()
            {
                parts.extensions.insert(axum::extract::OriginalUri(u.clone()));
                parts.uri = u;
            }
            next.run(Request::from_parts(parts, body)).await
        }
        Fault::ConfirmByOffByAnHour if method == Method::POST && path == "/a2a/execute" => {
            let resp = next.run(req).await;
            let (mut parts, body) = resp.into_parts();
            let bytes = body_bytes(body).await;
            let mut v: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
            let later = v["confirm_by"]
                .as_str()
                .and_then(a2a_core::wire::parse_timestamp)
                .map(|t| a2a_core::wire::format_timestamp(t + std::time::Duration::from_secs(3600)));
            let Some(later) = later else { return Response::from_parts(parts, Body::from(bytes)) };
            v["confirm_by"] = json!(later);
            parts.headers.remove("content-length");
            Response::from_parts(parts, Body::from(serde_json::to_vec(&v).unwrap_or_default()))
        }
        Fault::IgnoresProposedTimeout
            if method == Method::POST && path == "/a2a/negotiate" && !req.headers().contains_key("a2a-signature") =>
        {
            let req =
                edit_body(&state, req, |v| v.as_object_mut().is_some_and(|o| o.remove("timeout_ms").is_some())).await;
            next.run(req).await
        }
        Fault::ConfirmAfterCancelAccepted if method == Method::POST && path == "/a2a/confirm" => {
            let resp = next.run(req).await;
            let (mut parts, body) = resp.into_parts();
            let bytes = body_bytes(body).await;
            let v: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
            if parts.status != StatusCode::CONFLICT || v["error"]["details"]["status"] != "canceled" {
                return Response::from_parts(parts, Body::from(bytes));
            }
            parts.status = StatusCode::ACCEPTED;
            parts.headers.remove("content-length");
            let id = v["error"]["details"]["execution_id"].clone();
            let body = json!({"execution_id": id, "status": "accepted"});
            Response::from_parts(parts, Body::from(serde_json::to_vec(&body).unwrap_or_default()))
        }
        Fault::CorsMissingOnResponses if method != Method::OPTIONS => {
            let mut resp = next.run(req).await;
            resp.headers_mut().remove("access-control-allow-origin");
            resp
        }
        Fault::DiscoverRequiresVersion
            if method == Method::OPTIONS
                && path == "/a2a"
                && !req.headers().contains_key("a2a-version")
                && !req.headers().contains_key("access-control-request-method") =>
        {
            let body = json!({"error": {"code": "version_required", "message": "A2A-Version is required"}});
            let mut out = (StatusCode::BAD_REQUEST, axum::Json(body)).into_response();
            out.headers_mut().insert("a2a-version", HeaderValue::from_static("0.3"));
            if let Ok(did) = HeaderValue::from_str(&state.agent_did) {
                out.headers_mut().insert("a2a-sender-id", did);
            }
            out
        }
        Fault::CapabilitiesReordered if method == Method::GET && path == "/a2a/capabilities" => {
            let resp = next.run(req).await;
            let (mut parts, body) = resp.into_parts();
            let mut v: Value = serde_json::from_slice(&body_bytes(body).await).unwrap_or(Value::Null);
            if let Some(c) = v.get_mut("capabilities").and_then(Value::as_array_mut) {
                c.reverse();
            }
            parts.headers.remove("content-length");
            Response::from_parts(parts, Body::from(serde_json::to_vec(&v).unwrap_or_default()))
        }
        Fault::MissingSenderAccepted => {
            let mut req = req;
            if !req.headers().contains_key("a2a-sender-id") {
                req.headers_mut().insert("a2a-sender-id", HeaderValue::from_static("did:web:conformance.example"));
            }
            next.run(req).await
        }
        _ => next.run(req).await,
    }
}

fn percent_decode(s: &str) -> String {
    percent_encoding::percent_decode_str(s).decode_utf8_lossy().into_owned()
}

/// Stores the execution the agent refused, and answers as if it had been accepted.
async fn accept_anyway(state: &State, headers: &HeaderMap, body: &[u8]) -> Option<Response> {
    let sender = header(headers, "a2a-sender-id")?.trim().to_owned();
    let neg = state.store.get_negotiation(header(headers, "a2a-negotiation-id")?.trim()).await.ok()??;
    let did = a2a_core::did::Did::parse(&sender).ok()?;
    let id = ExecutionId::generate(&did).ok()?;
    let now = a2a_server::store::now_ms();
    let rec = ExecutionRecord {
        id: id.to_string(),
        negotiation_id: neg.id.clone(),
        sender,
        capability: neg.capability.clone(),
        payload: serde_json::from_slice(body).unwrap_or(Value::Null),
        status: a2a_core::wire::ExecutionStatus::Received,
        timeout_ms: neg.timeout_ms,
        created_at_ms: now,
        updated_at_ms: now,
        confirm_by_ms: now + neg.confirm_window_ms,
        deadline_ms: None,
        confirmed: false,
        attempts: 0,
        result: None,
        error: None,
        retain_until_ms: now + neg.confirm_window_ms + 3_600_000,
        idempotency_key: None,
        sender_verified: false,
        traceparent: None,
        rev: 0,
    };
    state.store.create_execution(rec, None).await.ok()?;
    let body = json!({"execution_id": id.to_string(), "negotiation_id": neg.id, "status": "received",
                      "created_at": a2a_server::store::timestamp(now), "confirm_by": a2a_server::store::timestamp(now + neg.confirm_window_ms)});
    let mut resp = (StatusCode::CREATED, axum::Json(body)).into_response();
    let h = resp.headers_mut();
    for (k, v) in [
        ("a2a-version", "0.3".to_owned()),
        ("a2a-sender-id", state.agent_did.clone()),
        ("a2a-execution-id", id.to_string()),
        ("a2a-negotiation-id", neg.id),
        ("location", format!("/a2a/result/{}", id.to_path_segment())),
    ] {
        if let Ok(v) = HeaderValue::from_str(&v) {
            h.insert(HeaderName::from_static(k), v);
        }
    }
    Some(resp)
}

/// Starts the agent with `fault`.
pub async fn start(fault: Fault) -> Broken {
    let (l, port) = common::listener().await;
    let runs: Runs = Arc::new(Mutex::new(HashMap::new()));
    let needs_caller = matches!(
        fault,
        Fault::AcceptsExpiredSignatures
            | Fault::NoReplayProtection
            | Fault::AcceptsUnsigned
            | Fault::UnboundedAttachments
            | Fault::IgnoresContext
            | Fault::IgnoresRunTimeout
            | Fault::RegistersReservedKeys
            | Fault::PublishesSkippedAnnounce
    );
    let caller = if needs_caller { Some(common::caller().await) } else { None };
    let mut work: Option<Arc<dyn Fn(String, Value) -> Value + Send + Sync>> = None;
    let parts = if fault == Fault::ConfirmRunsTwice {
        // An agent whose only capability counts its runs, so that the test sees the work run twice.
        let echo = counting_echo(runs.clone());
        work = Some(Arc::new(echo.clone()));
        common::demo_parts_with(port, move |b, _| {
            let decl = a2a_core::capability::CapabilityDeclaration {
                name: "echo_message".into(),
                description: "Returns the payload it is given, counting its runs.".into(),
                auth_requirement: a2a_core::capability::AuthRequirement::None,
                sub_capabilities: vec![],
                region_restriction: vec![],
                input_schema: json!({"type": "object", "properties": {"message": {"type": "string"}}, "required": ["message"]}),
                output_schema: None,
                estimated_cost: None,
                estimated_latency_ms: None,
                fallback_for: vec![],
            };
            b.capability(decl, move |ctx: ExecutionContext, p: Value| {
                let echo = echo.clone();
                async move { Ok(echo(ctx.execution_id.clone(), p)) }
            })
        })
    } else if matches!(fault, Fault::NonCanonicalResponseSignatures | Fault::ResponsesSignedWithAnotherKey) {
        // The demo agent signing its responses (INT-10), as a2a-server does with sign_responses.
        common::demo_parts_with(port, |b, key| a2a_agent::demo::capabilities(b).sign_responses("key-1", key.clone()))
    } else {
        common::demo_parts(port)
    };
    let state = Arc::new(State {
        fault,
        agent_did: parts.agent.did().to_owned(),
        caller: caller.as_ref().map(|c| c.identity.clone()),
        store: parts.store.clone(),
        work,
        waited_out: Mutex::new(Default::default()),
        sent: Mutex::new(HashMap::new()),
        counters: Mutex::new(Vec::new()),
        slow: Mutex::new(HashMap::new()),
        agent_key: parts.key.clone(),
        other_key: a2a_core::keys::SigningKey::generate().ok(),
    });
    let app = match fault {
        Fault::CardSignedWithAnotherKey => {
            common::bridged(&parts, a2a_core::keys::SigningKey::generate().expect("key"))
        }
        Fault::GetTaskAnswersAnotherTask => common::bridged(&parts, parts.key.clone().expect("the agent's key")),
        // axum's method router adds `Allow` to a 405 outside any layer of its routes: the breaker must wrap the
        // whole router to take it away.
        Fault::MethodNotAllowedWithoutAllow => axum::Router::new().fallback_service(parts.app.clone()),
        _ => parts.app.clone(),
    };
    let app =
        app.layer(axum::middleware::from_fn(move |req: Request<Body>, next: Next| breaker(state.clone(), req, next)));
    let running = common::serve(l, port, parts, app);
    Broken { running, caller, runs }
}

/// Every broken agent and exactly the checks that catch it (the mutation table, `a2a_conformance::mutation`, maps
/// requirements to these).
pub const CAUGHT: &[(Fault, &[&str])] = &[
    (Fault::ErrorsWithoutVersion, &["responses/a2a-version"]),
    (Fault::PreflightWithoutAllowHeaders, &["cors/preflight"]),
    (Fault::AcceptsNullable, &["schema-rules/nullable", "schema-rules/worked-example"]),
    (Fault::ConfirmRunsTwice, &["confirm/again", "confirm/concurrent"]),
    (Fault::AcceptsExpiredSignatures, &["signature/expired"]),
    (Fault::NoReplayProtection, &["signature/replay"]),
    (Fault::AcceptsUnsigned, &["did-auth/unsigned-refused", "sessions/auth-requirement"]),
    (
        Fault::AcceptsInvalidPayloads,
        &[
            "execute/formats-asserted",
            "execute/idempotency-after-validation",
            "execute/payload-invalid",
            "schema-rules/no-fetch",
        ],
    ),
    (Fault::NoExecutionHeader, &["execute/happy-path"]),
    (
        Fault::HtmlNotFound,
        &["cors/options-below-endpoint", "errors/unknown-path", "responses/error-bodies", "responses/json"],
    ),
    (Fault::LenientVersion, &["version/syntax", "version/unsupported"]),
    (
        Fault::IgnoresIdempotencyKey,
        &["execute/idempotency", "execute/idempotency-after-validation", "headers/malformed-idempotency-key"],
    ),
    (Fault::UnderstatesBodyLimit, &["limits/oversize-body"]),
    (Fault::IgnoresRegion, &["execute/auth-before-payload", "negotiate/region-order", "region/enforced"]),
    (Fault::FalseSessionTimeout, &["sessions/wait-is-not-timeout"]),
    (Fault::DropsLateReply, &["sessions/wait-is-not-timeout"]),
    (Fault::StreamResumesFromStart, &["streaming/last-event-id", "streaming/resume-after-drop"]),
    (Fault::EventsIgnoreLastEventId, &["sessions/events-resume"]),
    (Fault::IgnoresHop, &["sessions/provenance-and-hops"]),
    (Fault::NoRedaction, &["sessions/history-redacted"]),
    (Fault::StreamWithoutNoStore, &["streaming/events"]),
    (Fault::LenientStreamHeader, &["streaming/header-values"]),
    (Fault::UnboundedAttachments, &["sessions/attachment-bounds"]),
    (Fault::IgnoresContext, &["sessions/context-mode"]),
    (Fault::IgnoresRunTimeout, &["sessions/run-deadline"]),
    (Fault::RegistersReservedKeys, &["sessions/from-and-reserved-keys"]),
    (Fault::PublishesSkippedAnnounce, &["sessions/announce"]),
    (Fault::CardSignedWithAnotherKey, &["bridge/agent-card"]),
    (Fault::GetTaskAnswersAnotherTask, &["bridge/send-message"]),
    (Fault::CounterExecutionIds, &["execute/id-randomness"]),
    (Fault::LocationNotEncoded, &["execute/location-encoded"]),
    (Fault::NonCanonicalResponseSignatures, &["responses/signatures-canonical"]),
    (Fault::IgnoresDeadlines, &["result/deadline-enforced"]),
    (Fault::LateResultOverwritesCancel, &["cancel/late-result"]),
    (Fault::ErrorsWithoutSenderId, &["responses/a2a-sender-id"]),
    (Fault::MethodNotAllowedWithoutAllow, &["errors/method-not-allowed", "responses/required-headers"]),
    (Fault::NonObjectSchemaIs400, &["schema-rules/non-object-proposal", "schema-rules/root"]),
    (Fault::DiscoverAnswers200, &["discover/any-version", "discover/status-204", "limits/still-alive"]),
    (Fault::MalformedIdsAre400, &["result/malformed-ids"]),
    (Fault::CancelOfTerminalAccepted, &["cancel/final-state", "cancel/terminal", "responses/result-shape"]),
    (Fault::ResultWithoutError, &["cancel/late-result", "responses/result-shape", "result/deadline-enforced"]),
    (Fault::ContentTypeIgnored, &["transport/content-type"]),
    (Fault::MissingSenderAccepted, &["sender/missing"]),
    (
        Fault::ConfirmAnswers200,
        &["confirm/concurrent", "confirm/first", "did-auth/handshake", "execute/no-work-before-confirm"],
    ),
    (Fault::UnknownConfirmIs400, &["confirm/unknown", "result/malformed-ids"]),
    (Fault::MissingNegotiationIdIs404, &["execute/no-negotiation"]),
    (Fault::DiscoverWithoutCapabilities, &["cors/preflight", "discover/capability-names", "discover/headers"]),
    (Fault::CancelAnswers202, &["cancel/late-result", "cancel/received"]),
    (Fault::ResponsesSignedWithAnotherKey, &["responses/signatures"]),
    (Fault::LenientTokenDecoding, &["signature/malformed"]),
    (
        Fault::InvalidJsonWrongCode,
        &[
            "execute/invalid-json",
            "signature/duplicate-member",
            "signature/non-json-body",
            "signature/non-json-reason",
            "transport/invalid-json",
        ],
    ),
    (Fault::IgnoresWaitMs, &["result/long-poll"]),
    (Fault::ConfirmByOffByAnHour, &["execute/confirm-window"]),
    (Fault::IgnoresProposedTimeout, &["negotiate/timeout"]),
    (Fault::ConfirmAfterCancelAccepted, &["cancel/confirm-after-cancel"]),
    (Fault::CorsMissingOnResponses, &["cors/actual-responses", "identity/agent-document-headers"]),
    (Fault::DiscoverRequiresVersion, &["discover/status-204"]),
    (Fault::CapabilitiesReordered, &["capabilities/order", "discover/capability-names"]),
];

/// The checks that catch `fault`, as [`CAUGHT`] lists them.
pub fn expected(fault: Fault) -> &'static [&'static str] {
    CAUGHT.iter().find(|(f, _)| *f == fault).map_or(&[], |(_, c)| c)
}

/// Runs the suite against the agent with `fault` and checks that exactly the checks of [`CAUGHT`] fail.
async fn caught(fault: Fault) -> Broken {
    let expected = expected(fault);
    assert!(!expected.is_empty(), "{fault:?} is not in CAUGHT");
    caught_by(fault, expected).await
}

/// Runs the suite against the agent with `fault` and checks that exactly `expected` fail.
async fn caught_by(fault: Fault, expected: &[&str]) -> Broken {
    let agent = start(fault).await;
    let opts = common::options(&agent.running.base, agent.caller.as_ref().map(|c| &c.identity));
    let report = common::run(opts).await;
    let mut want: Vec<String> = expected.iter().map(|s| (*s).to_owned()).collect();
    want.sort();
    assert_eq!(
        common::failed(&report),
        want,
        "{fault:?} must be caught by exactly these checks:\n{}",
        common::explain(&report)
    );
    agent
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_unbroken_agent_fails_no_check() {
    let agent = common::demo().await;
    let report = common::run(common::options(&agent.base, None)).await;
    assert_eq!(common::failed(&report), Vec::<String>::new(), "{}", common::explain(&report));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn error_responses_without_a2a_version_are_caught() {
    caught(Fault::ErrorsWithoutVersion).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn preflights_without_allow_headers_are_caught() {
    caught(Fault::PreflightWithoutAllowHeaders).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn accepting_nullable_schemas_is_caught() {
    caught(Fault::AcceptsNullable).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn running_the_work_again_on_a_second_confirm_is_caught() {
    let agent = caught(Fault::ConfirmRunsTwice).await;
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let runs = agent.runs.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone();
    assert!(runs.values().any(|n| *n >= 2), "the broken agent really ran an execution twice: {runs:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn accepting_expired_signatures_is_caught() {
    caught(Fault::AcceptsExpiredSignatures).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn accepting_replays_is_caught() {
    caught(Fault::NoReplayProtection).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn accepting_unsigned_requests_to_a_did_auth_capability_is_caught() {
    caught(Fault::AcceptsUnsigned).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn accepting_payloads_that_break_the_agreed_schema_is_caught() {
    caught(Fault::AcceptsInvalidPayloads).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_execution_header_is_caught() {
    caught(Fault::NoExecutionHeader).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn html_error_pages_are_caught() {
    caught(Fault::HtmlNotFound).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn accepting_any_version_is_caught() {
    caught(Fault::LenientVersion).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn advertising_idempotency_without_honouring_it_is_caught() {
    caught(Fault::IgnoresIdempotencyKey).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn announcing_a_body_limit_that_is_not_enforced_is_caught() {
    caught(Fault::UnderstatesBodyLimit).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn not_enforcing_a_region_restriction_is_caught() {
    caught(Fault::IgnoresRegion).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_false_timeout_for_a_delivered_message_is_caught() {
    caught(Fault::FalseSessionTimeout).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_a_late_reply_is_caught() {
    caught(Fault::DropsLateReply).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resumed_stream_replayed_from_the_start_is_caught() {
    caught(Fault::StreamResumesFromStart).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_channel_that_ignores_last_event_id_is_caught() {
    caught(Fault::EventsIgnoreLastEventId).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ignoring_a2a_hop_is_caught() {
    caught(Fault::IgnoresHop).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_history_that_shows_secrets_is_caught() {
    caught(Fault::NoRedaction).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_without_no_store_is_caught() {
    caught(Fault::StreamWithoutNoStore).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lenient_a2a_stream_header_is_caught() {
    caught(Fault::LenientStreamHeader).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn accepting_more_than_eight_attachments_is_caught() {
    caught(Fault::UnboundedAttachments).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ignoring_context_mode_is_caught() {
    caught(Fault::IgnoresContext).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ignoring_run_timeout_ms_is_caught() {
    caught(Fault::IgnoresRunTimeout).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn registering_the_reserved_keys_is_caught() {
    caught(Fault::RegistersReservedKeys).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn publishing_a_skipped_announce_is_caught() {
    caught(Fault::PublishesSkippedAnnounce).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_card_signed_with_another_key_is_caught() {
    caught(Fault::CardSignedWithAnotherKey).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_task_answering_another_task_is_caught() {
    caught(Fault::GetTaskAnswersAnotherTask).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn execution_ids_with_a_counter_for_a_suffix_are_caught() {
    caught(Fault::CounterExecutionIds).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_location_that_does_not_encode_the_id_is_caught() {
    caught(Fault::LocationNotEncoded).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn responses_signed_over_non_canonical_json_are_caught() {
    caught(Fault::NonCanonicalResponseSignatures).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deadlines_that_are_never_enforced_are_caught() {
    caught(Fault::IgnoresDeadlines).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_result_overwriting_canceled_is_caught() {
    caught(Fault::LateResultOverwritesCancel).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_without_a2a_sender_id_are_caught() {
    caught(Fault::ErrorsWithoutSenderId).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn method_not_allowed_without_allow_is_caught() {
    caught(Fault::MethodNotAllowedWithoutAllow).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_non_object_proposed_schema_answered_400_is_caught() {
    caught(Fault::NonObjectSchemaIs400).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn discover_answered_200_is_caught() {
    caught(Fault::DiscoverAnswers200).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_ids_answered_400_are_caught() {
    caught(Fault::MalformedIdsAre400).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_of_a_terminal_execution_accepted_is_caught() {
    caught(Fault::CancelOfTerminalAccepted).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_result_without_error_for_a_failed_execution_is_caught() {
    // The checks in CAUGHT always read a failed, timed-out or canceled result. On a loaded machine other checks may
    // too (a 2 s handler of `result/timeout` or `cancel/*` that reaches its deadline before the check's request): they
    // catch the same fault, so they may fail beside them, never instead of them.
    const MAY_ALSO_READ_A_FAILED_RESULT: &[&str] = &[
        "cancel/final-state",
        "cancel/received",
        "cancel/terminal",
        "result/deadline",
        "result/happy-path",
        "result/long-poll",
        "result/terminal-stays-readable",
        "result/timeout",
    ];
    let fault = Fault::ResultWithoutError;
    let agent = start(fault).await;
    let opts = common::options(&agent.running.base, agent.caller.as_ref().map(|c| &c.identity));
    let report = common::run(opts).await;
    let failed = common::failed(&report);
    for want in expected(fault) {
        assert!(failed.iter().any(|f| f == want), "{fault:?} was not caught by {want}:\n{}", common::explain(&report));
    }
    for f in &failed {
        assert!(
            expected(fault).contains(&f.as_str()) || MAY_ALSO_READ_A_FAILED_RESULT.contains(&f.as_str()),
            "{fault:?} made {f} fail, which does not read results:\n{}",
            common::explain(&report)
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_of_another_content_type_read_as_json_is_caught() {
    caught(Fault::ContentTypeIgnored).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_without_a_sender_served_is_caught() {
    caught(Fault::MissingSenderAccepted).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_first_confirm_answered_200_is_caught() {
    caught(Fault::ConfirmAnswers200).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn confirm_of_an_unknown_execution_answered_400_is_caught() {
    caught(Fault::UnknownConfirmIs400).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn execute_without_a_negotiation_id_answered_404_is_caught() {
    caught(Fault::MissingNegotiationIdIs404).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn discover_without_a2a_capabilities_is_caught() {
    caught(Fault::DiscoverWithoutCapabilities).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_answered_202_is_caught() {
    caught(Fault::CancelAnswers202).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn responses_signed_with_a_key_not_in_the_document_are_caught() {
    caught(Fault::ResponsesSignedWithAnotherKey).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_padded_token_accepted_is_caught() {
    caught(Fault::LenientTokenDecoding).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_json_answered_with_another_code_is_caught() {
    caught(Fault::InvalidJsonWrongCode).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ignoring_wait_ms_is_caught() {
    caught(Fault::IgnoresWaitMs).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_confirm_by_is_caught() {
    caught(Fault::ConfirmByOffByAnHour).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ignoring_a_proposed_timeout_is_caught() {
    caught(Fault::IgnoresProposedTimeout).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn confirm_after_cancel_accepted_is_caught() {
    caught(Fault::ConfirmAfterCancelAccepted).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn responses_without_allow_origin_are_caught() {
    caught(Fault::CorsMissingOnResponses).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn discover_requiring_a_version_is_caught() {
    caught(Fault::DiscoverRequiresVersion).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn capabilities_in_another_order_are_caught() {
    caught(Fault::CapabilitiesReordered).await;
}
