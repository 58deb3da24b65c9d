//! The agent's own operator console at `/console` (`docs/console.md`): a smaller page than the gateway's, for one
//! agent — its identity and capabilities (each declaration, its `auth_requirement`, region restriction and schemas),
//! its recent traffic from its audit log, and its golden metrics drawn from its own `/metrics`. Off by default; on
//! with `[admin] console = true` or `a2a-server --console`.
//!
//! It is served exactly where `/metrics` is (OPS-1): on the admin listener (`[admin] listen`), and on the agent's
//! own listener only when `[admin] token_env` names a token. With a token every console request needs it — as
//! `Authorization: Bearer <token>`, or as the login cookie a browser gets from the login form or from opening
//! `/console?token=<token>` once ([`auth`]); without one (the admin listener, meant for loopback) it is open as
//! `/metrics` is there.
//!
//! It shares with the gateway's console ([`a2a_runtime::console_try`]) the "Try it" panel — sent through this
//! console's backend to the agent in-process (`POST /console/api/try`), since the console may be served on another
//! listener than the agent — the keys an operator uploads to sign with, and the Sessions view, read here as the agent
//! itself through the same code its §17 endpoints run (`GET /a2a/sessions`, `/history`, `/a2a/events`).

pub use a2a_runtime::console_auth as auth;
pub use a2a_runtime::console_auth::{CSP, secure_headers};

use std::sync::atomic::{AtomicBool, Ordering};

use a2a_core::error::{A2aError, ErrorCode};
use axum::Router;
use axum::body::Body;
use axum::extract::Request;
use axum::http::{HeaderValue, Method, Response, StatusCode, header};
use serde_json::{Value, json};

use crate::Agent;

const PAGE: &str = include_str!("console/assets/agent.html");
const SCRIPT: &str = include_str!("console/assets/agent.js");
const STYLE: &str = a2a_runtime::console_auth::STYLE;

/// Every path the agent's console answers: what a test walks unauthenticated.
pub const ROUTES: &[(&str, &str)] = &[
    ("GET", "/console"),
    ("POST", "/console/login"),
    ("POST", "/console/logout"),
    ("GET", "/console/assets/dom.js"),
    ("GET", "/console/assets/agent.js"),
    ("GET", "/console/assets/agent.css"),
    ("GET", "/console/api/agent"),
    ("GET", "/console/api/audit"),
    ("GET", "/console/api/metrics"),
    ("GET", "/console/assets/try.js"),
    ("GET", "/console/assets/sessions.js"),
    ("POST", "/console/api/try"),
    ("GET", "/console/api/sessions"),
    ("GET", "/console/api/sessions/history"),
    ("GET", "/console/api/sessions/events"),
    ("GET", "/console/api/signer"),
    ("POST", "/console/api/signer"),
    ("DELETE", "/console/api/signer"),
    ("POST", "/console/api/sign"),
];

/// How long a login lasts (12 h).
const SESSION_S: u64 = 43_200;
/// The largest login form read.
const MAX_FORM_BYTES: usize = 8 * 1024;

static FLAG: AtomicBool = AtomicBool::new(false);

/// Turns the console on for every configuration this process loads (`a2a-server --console`), as `[admin] console =
/// true` does for one file.
pub fn enable_from_command_line() {
    FLAG.store(true, Ordering::Relaxed);
}

/// Whether `--console` was given.
pub fn enabled_by_command_line() -> bool {
    FLAG.load(Ordering::Relaxed)
}

fn respond(status: StatusCode, content_type: &'static str, body: impl Into<Body>) -> Response<Body> {
    let mut r = Response::new(body.into());
    *r.status_mut() = status;
    secure_headers(r.headers_mut(), content_type, CSP);
    r
}

fn json_response(status: StatusCode, v: &Value) -> Response<Body> {
    respond(status, "application/json", serde_json::to_vec(v).unwrap_or_default())
}

fn error(e: A2aError) -> Response<Body> {
    let status = StatusCode::from_u16(e.http_status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    json_response(status, &serde_json::to_value(e.to_body()).unwrap_or_default())
}

/// The largest request "Try it" sends through the console, and the largest answer it reads back.
const MAX_TRY_BYTES: usize = 4 * 1024 * 1024;
/// How long "Try it" waits for the agent's answer.
const TRY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// What every request of one console shares: the agent, its protocol router (for "Try it") and the uploaded keys.
#[derive(Clone)]
struct Shared {
    agent: Agent,
    app: Router,
    signers: std::sync::Arc<a2a_runtime::console_try::Signers>,
    /// The MCP servers of `mcp` handlers: what was imported and what was not, with the reason (MCP-33).
    mcp: std::sync::Arc<Value>,
}

/// The console's router for `agent`; with `token`, every request needs it (or a login made with it).
pub fn router(agent: &Agent, token: Option<String>) -> Router {
    router_with_mcp(agent, token, Value::Array(Vec::new()))
}

/// [`router`] of an agent with `mcp` handlers: `/console/api/agent` has `mcp`, the report of
/// `Config::mcp_report` (per `mcp` entry, its server, the tools imported and those skipped with the reason, MCP-33).
pub fn router_with_mcp(agent: &Agent, token: Option<String>, mcp: Value) -> Router {
    let shared = Shared {
        agent: agent.clone(),
        app: agent.router(),
        signers: std::sync::Arc::new(a2a_runtime::console_try::Signers::new()),
        mcp: std::sync::Arc::new(mcp),
    };
    let key = token.map(|t| auth::key_of(&t));
    let handler = move |req: Request| {
        let shared = shared.clone();
        async move { handle(&shared, key, req).await }
    };
    Router::new()
        .route("/console", axum::routing::any(handler.clone()))
        .route("/console/{*rest}", axum::routing::any(handler))
}

async fn handle(shared: &Shared, key: Option<[u8; 32]>, req: Request) -> Response<Body> {
    let agent = &shared.agent;
    let (parts, body) = req.into_parts();
    let path = parts.uri.path().to_owned();
    let secure = parts.headers.get("x-forwarded-proto").is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"https"));
    if let Some(key) = &key {
        if path == "/console/login" {
            if parts.method != Method::POST {
                return method_not_allowed("POST");
            }
            let form = match http_body_util::BodyExt::collect(http_body_util::Limited::new(body, MAX_FORM_BYTES)).await
            {
                Ok(b) => b.to_bytes(),
                Err(_) => {
                    return auth::login_page(
                        StatusCode::PAYLOAD_TOO_LARGE,
                        "a2a-server",
                        Some("The form is too large."),
                    );
                }
            };
            return match auth::form_token(&form) {
                Some(t) if auth::token_matches(key, &t) => {
                    auth::redirect("/console", Some(auth::cookie(key, SESSION_S, secure)))
                }
                _ => auth::login_page(StatusCode::UNAUTHORIZED, "a2a-server", Some("That is not the admin token.")),
            };
        }
        if path == "/console"
            && let Some(t) = auth::query_token(&parts.uri)
        {
            return if auth::token_matches(key, &t) {
                auth::redirect("/console", Some(auth::cookie(key, SESSION_S, secure)))
            } else {
                auth::login_page(StatusCode::UNAUTHORIZED, "a2a-server", Some("That is not the admin token."))
            };
        }
        if let Some(refused) = auth::refuse(key, &parts.headers, path == "/console", "a2a-server") {
            return refused;
        }
    } else if path == "/console/login" || path == "/console/logout" {
        // Nothing to log in to: the console is open where it is served (the admin listener).
        return auth::redirect("/console", None);
    }
    // The login a key uploaded for "Try it" is kept for: the browser's; on the open admin listener, the listener's.
    let login = match &key {
        Some(k) => auth::login_of(k, &parts.headers),
        None => Some(("admin-listener".to_owned(), crate::store::now_ms() / 1000 + SESSION_S)),
    };
    if path == "/console/logout" {
        if parts.method != Method::POST {
            return method_not_allowed("POST");
        }
        if let Some((id, _)) = &login {
            shared.signers.forget(id);
        }
        return auth::redirect("/console", Some(auth::clear_cookie(secure)));
    }
    if path == "/console/api/try" {
        return if parts.method == Method::POST { try_it(shared, body).await } else { method_not_allowed("POST") };
    }
    if let Some(r) =
        a2a_runtime::console_try::handle(&shared.signers, login, agent.did(), &parts.method, &path, body).await
    {
        return r;
    }
    if parts.method != Method::GET && parts.method != Method::HEAD {
        return method_not_allowed("GET, HEAD");
    }
    if let Some(js) = a2a_runtime::console_try::shared_script(&path) {
        return respond(StatusCode::OK, "text/javascript; charset=utf-8", js);
    }
    match path.as_str() {
        "/console" => respond(StatusCode::OK, "text/html; charset=utf-8", PAGE),
        "/console/assets/agent.js" => respond(StatusCode::OK, "text/javascript; charset=utf-8", SCRIPT),
        "/console/assets/agent.css" => respond(StatusCode::OK, "text/css; charset=utf-8", STYLE),
        "/console/api/agent" => {
            let engine = agent.engine();
            let caps: Vec<_> = engine.capabilities().iter().map(|c| c.decl.clone()).collect();
            json_response(
                StatusCode::OK,
                &json!({
                    "did": agent.did(),
                    "capabilities": caps,
                    "streaming": engine.streaming().is_some(),
                    "sessions": agent.sessions().is_some(),
                    "limits": {"max_body_bytes": engine.limits().max_body_bytes},
                    "mcp": *shared.mcp,
                }),
            )
        }
        "/console/api/audit" => {
            let limit = url::form_urlencoded::parse(parts.uri.query().unwrap_or("").as_bytes())
                .find(|(k, _)| k == "limit")
                .and_then(|(_, v)| v.parse::<usize>().ok())
                .unwrap_or(200)
                .clamp(1, 10_000);
            let q = crate::store::audit::AuditQuery { limit, ..Default::default() };
            match agent.engine().audit().query(&q).await {
                Ok(records) => json_response(StatusCode::OK, &json!({"records": records})),
                Err(e) => error(A2aError::with_message(ErrorCode::STORE_UNAVAILABLE, e.to_string())),
            }
        }
        "/console/api/metrics" => json_response(StatusCode::OK, &summary(&agent.engine().metrics().encode())),
        "/console/api/sessions" => sessions_list(agent).await,
        "/console/api/sessions/history" => sessions_history(agent, &parts.uri).await,
        "/console/api/sessions/events" => sessions_events(agent, &parts).await,
        _ => error(A2aError::with_message(ErrorCode::NOT_FOUND, "no console page or API at this path")),
    }
}

/// The agent itself, as the console reads its sessions: what its own §17 endpoints would answer the agent's DID.
fn as_agent(agent: &Agent) -> crate::sessions::policy::Requester {
    crate::sessions::policy::Requester { did: agent.did().to_owned(), session: None }
}

fn no_sessions() -> Response<Body> {
    error(A2aError::with_message(ErrorCode::NOT_FOUND, "this agent does not serve sessions (§17)"))
}

/// `GET /console/api/sessions`: `GET /a2a/sessions?include_self=true` as the agent (SES-3, SES-8).
async fn sessions_list(agent: &Agent) -> Response<Body> {
    let Some(sessions) = agent.sessions() else {
        return json_response(StatusCode::OK, &json!({"as": "", "agents": []}));
    };
    let q = a2a_core::sessions::ListQuery { include_self: true, limit: Some(200), ..Default::default() };
    match sessions.list(&as_agent(agent), &q).await {
        Ok(list) => json_response(
            StatusCode::OK,
            &json!({"as": format!("the agent itself ({})", agent.did()),
                "agents": [{"label": "this agent", "did": agent.did(), "sessions": list.sessions,
                    "total": list.total, "truncated": list.truncated}]}),
        ),
        Err(e) => error(e),
    }
}

/// The `session` parameter of a query, checked as a session key.
fn session_param(uri: &axum::http::Uri) -> Result<String, Box<Response<Body>>> {
    let key = url::form_urlencoded::parse(uri.query().unwrap_or("").as_bytes())
        .find(|(k, _)| k == "session")
        .map(|(_, v)| v.into_owned())
        .unwrap_or_default();
    a2a_core::sessions::validate_session_key(&key).map_err(|e| {
        Box::new(error(
            A2aError::with_message(ErrorCode::INVALID_REQUEST, format!("session: {e}"))
                .details(json!({"parameter": "session"})),
        ))
    })?;
    Ok(key)
}

/// `GET /console/api/sessions/history?session=KEY`: `GET /a2a/sessions/{key}/history` as the agent (HIS-1).
async fn sessions_history(agent: &Agent, uri: &axum::http::Uri) -> Response<Body> {
    let Some(sessions) = agent.sessions() else { return no_sessions() };
    let key = match session_param(uri) {
        Ok(k) => k,
        Err(r) => return *r,
    };
    let q = crate::sessions::history::HistoryQuery::default();
    match sessions.history(&as_agent(agent), &key, &q).await {
        Ok(h) => json_response(StatusCode::OK, &serde_json::to_value(h).unwrap_or_default()),
        Err(e) => error(e),
    }
}

/// `GET /console/api/sessions/events?session=KEY`: `GET /a2a/events?session=KEY` as the agent (ANN-3), from the start
/// of its buffer (ANN-6) or after the browser's `Last-Event-ID` (ANN-4).
async fn sessions_events(agent: &Agent, parts: &axum::http::request::Parts) -> Response<Body> {
    let Some(sessions) = agent.sessions() else { return no_sessions() };
    let key = match session_param(&parts.uri) {
        Ok(k) => k,
        Err(r) => return *r,
    };
    let last = parts.headers.get("last-event-id").and_then(|v| v.to_str().ok()).and_then(|v| v.trim().parse().ok());
    let address = format!("{}#{key}", agent.did());
    let stream = sessions.event_stream(as_agent(agent), Some(address), Some(last.unwrap_or(0)));
    let mut r = Response::new(Body::from_stream(stream));
    secure_headers(r.headers_mut(), "text/event-stream", CSP);
    r
}

/// `POST /console/api/try` `{"method", "path", "headers", "body"}`: the request sent to the agent's own protocol
/// router in-process, answered `{"status", "headers": [[name, value]], "body"}` (the page shows them raw).
async fn try_it(shared: &Shared, body: Body) -> Response<Body> {
    let bytes = match http_body_util::BodyExt::collect(http_body_util::Limited::new(body, MAX_TRY_BYTES)).await {
        Ok(b) => b.to_bytes(),
        Err(_) => return error(A2aError::with_message(ErrorCode::PAYLOAD_TOO_LARGE, "the request is too large")),
    };
    let bad = |member: &str, m: &str| {
        error(A2aError::with_message(ErrorCode::INVALID_REQUEST, m.to_owned()).details(json!({"member": member})))
    };
    let Ok(v) = serde_json::from_slice::<Value>(&bytes) else { return bad("body", "the body must be a JSON object") };
    let method = v["method"].as_str().unwrap_or("");
    let Ok(method) = method.parse::<Method>() else { return bad("method", "method: an HTTP method") };
    let path = v["path"].as_str().unwrap_or("");
    if !path.starts_with("/a2a") || path.parse::<axum::http::Uri>().is_err() {
        return bad("path", "path: a request target of the agent's A2A endpoint (/a2a/...)");
    }
    let mut req = axum::http::Request::builder().method(method).uri(path);
    for (k, val) in v["headers"].as_object().into_iter().flatten() {
        if let Some(val) = val.as_str() {
            req = req.header(k.as_str(), val);
        }
    }
    let body = match &v["body"] {
        Value::String(s) => Body::from(s.clone()),
        _ => Body::empty(),
    };
    let Ok(req) = req.body(body) else { return bad("headers", "headers: names and values must be valid HTTP") };
    let answer = tokio::time::timeout(TRY_TIMEOUT, async {
        let resp = tower::ServiceExt::oneshot(shared.app.clone(), req).await.map_err(|e| e.to_string())?;
        let (parts, body) = resp.into_parts();
        let bytes = http_body_util::BodyExt::collect(http_body_util::Limited::new(body, MAX_TRY_BYTES))
            .await
            .map_err(|e| e.to_string())?
            .to_bytes();
        Ok::<_, String>((parts, bytes))
    })
    .await;
    match answer {
        Ok(Ok((parts, bytes))) => json_response(
            StatusCode::OK,
            &json!({
                "status": parts.status.as_u16(),
                "headers": parts.headers.iter()
                    .map(|(k, v)| json!([k.as_str(), String::from_utf8_lossy(v.as_bytes())]))
                    .collect::<Vec<_>>(),
                "body": String::from_utf8_lossy(&bytes),
            }),
        ),
        Ok(Err(e)) => error(A2aError::with_message(ErrorCode::INTERNAL_ERROR, e)),
        Err(_) => error(A2aError::with_message(ErrorCode::AGENT_TIMEOUT, "the agent did not answer within 30 s")),
    }
}

fn method_not_allowed(allow: &'static str) -> Response<Body> {
    let mut r = error(A2aError::with_message(ErrorCode::METHOD_NOT_ALLOWED, format!("this path accepts {allow}")));
    r.headers_mut().insert(header::ALLOW, HeaderValue::from_static(allow));
    r
}

/// What the agent's console draws from its `/metrics` exposition: requests by step and outcome, the latency
/// histogram over every step (cumulative buckets, seconds), signature failures, fallbacks offered, executions in
/// flight. The page keeps its own ring of these readings to draw rates.
pub fn summary(exposition: &str) -> Value {
    let mut requests: Vec<Value> = Vec::new();
    let mut buckets: std::collections::BTreeMap<String, f64> = std::collections::BTreeMap::new();
    let (mut signature, mut fallback, mut in_flight) = (0.0, 0.0, 0.0);
    for line in exposition.lines().filter(|l| !l.starts_with('#')) {
        let Some((series, value)) = line.rsplit_once(' ') else { continue };
        let Ok(value) = value.parse::<f64>() else { continue };
        let (name, labels) = series.split_once('{').unwrap_or((series, ""));
        let label = |k: &str| {
            let start = labels.find(&format!("{k}=\""))? + k.len() + 2;
            labels[start..].split('"').next().map(str::to_owned)
        };
        match name {
            "a2a_requests_total" => {
                requests.push(json!({"step": label("step"), "outcome": label("outcome"), "value": value}));
            }
            "a2a_request_duration_seconds_bucket" => {
                *buckets.entry(label("le").unwrap_or_default()).or_default() += value;
            }
            "a2a_signature_failures_total" => signature += value,
            "a2a_fallback_offered_total" => fallback += value,
            "a2a_executions_in_flight" => in_flight += value,
            _ => {}
        }
    }
    let mut latency: Vec<(f64, f64)> = buckets
        .into_iter()
        .map(|(le, n)| (if le == "+Inf" { f64::INFINITY } else { le.parse().unwrap_or(f64::INFINITY) }, n))
        .collect();
    latency.sort_by(|a, b| a.0.total_cmp(&b.0));
    json!({
        "requests": requests,
        "latency_buckets": latency.iter().map(|(le, n)| json!([if le.is_finite() { json!(le) } else { json!("+Inf") }, n])).collect::<Vec<_>>(),
        "signature_failures": signature,
        "fallback_offered": fallback,
        "executions_in_flight": in_flight,
        "at_ms": crate::store::now_ms(),
    })
}
