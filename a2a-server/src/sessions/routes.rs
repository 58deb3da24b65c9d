//! The HTTP face of §17: every endpoint of the table in §17.1, mounted below `/a2a` when sessions are enabled,
//! with the §3 headers, §9.5 signatures under the sessions' `auth_requirement` (SES-1, SES-2) and `ErrorBody`
//! errors with the §17 codes.

use std::sync::Arc;
use std::time::Duration;

use a2a_core::error::{A2aError, ErrorCode};
use a2a_core::sessions::{self as s, RunReply, SendRequest, SendStatus, SessionRegistration, SpawnRequest, WaitChain};
use axum::Router;
use axum::body::Body;
use axum::extract::{OriginalUri, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::json;

use super::Sessions;
use super::history::HistoryQuery;
use super::policy::Requester;
use super::registry::ListQuery;
use super::runs::{Incoming, Until};
use crate::engine::Caller;
use crate::router::{
    ApiError, AppState, caller, endpoint_options, header_str, json_response, not_allowed_get, not_allowed_post,
    options_get, options_post, parse_json, read_body, signed_parts,
};

type ApiResult = Result<Response, ApiError>;

/// The §17 routes.
pub(crate) fn routes() -> Router<Arc<AppState>> {
    Router::new()
        .route("/a2a/sessions", get(list).post(register).options(options_get_post).fallback(not_allowed_get_post))
        .route("/a2a/sessions/send", post(send).options(options_post).fallback(not_allowed_post))
        .route("/a2a/sessions/spawn", post(spawn).options(options_post).fallback(not_allowed_post))
        .route(
            "/a2a/sessions/{key}",
            get(get_one).delete(end).options(options_get_delete).fallback(not_allowed_get_delete),
        )
        .route("/a2a/sessions/{key}/history", get(history).options(options_get).fallback(not_allowed_get))
        .route("/a2a/sessions/{key}/inbox", get(inbox).options(options_get).fallback(not_allowed_get))
        .route("/a2a/runs/{id}", get(run).options(options_get).fallback(not_allowed_get))
        .route("/a2a/runs/{id}/reply", post(reply).options(options_post).fallback(not_allowed_post))
        .route("/a2a/events", get(events).options(options_get).fallback(not_allowed_get))
}

/// `OPTIONS /a2a/sessions` (DISC-13).
async fn options_get_post(State(state): State<Arc<AppState>>, headers: HeaderMap) -> Result<Response, ApiError> {
    endpoint_options(state, headers, "GET, POST, OPTIONS").await
}

/// `OPTIONS /a2a/sessions/{key}` (DISC-13).
async fn options_get_delete(State(state): State<Arc<AppState>>, headers: HeaderMap) -> Result<Response, ApiError> {
    endpoint_options(state, headers, "GET, DELETE, OPTIONS").await
}

async fn not_allowed_get_post() -> ApiError {
    ApiError {
        err: Box::new(A2aError::with_message(
            ErrorCode::METHOD_NOT_ALLOWED,
            "this endpoint accepts GET (list) and POST (register)",
        )),
        www_authenticate: None,
        allow: Some("GET, POST, OPTIONS"),
    }
}

async fn not_allowed_get_delete() -> ApiError {
    ApiError {
        err: Box::new(A2aError::with_message(
            ErrorCode::METHOD_NOT_ALLOWED,
            "this endpoint accepts GET (read) and DELETE (end)",
        )),
        www_authenticate: None,
        allow: Some("GET, DELETE, OPTIONS"),
    }
}

fn sessions_of(state: &AppState) -> Result<Arc<Sessions>, ApiError> {
    state.sessions.clone().ok_or_else(|| {
        ApiError::from(A2aError::with_message(ErrorCode::NOT_FOUND, "this agent does not serve sessions (§17)"))
    })
}

/// The prelude of every §17 request: version and sender (§3), gateway forwarding, and the sessions'
/// `auth_requirement` (SES-2), the signature binding the body when there is one (AUTH-5).
async fn authenticate(
    state: &AppState,
    method: &str,
    uri: &OriginalUri,
    headers: &HeaderMap,
    body: Option<&[u8]>,
) -> Result<(Arc<Sessions>, Caller), ApiError> {
    let sessions = sessions_of(state)?;
    let mut caller = caller(headers)?;
    let bytes = body.unwrap_or(b"");
    let parts = signed_parts(method, uri, headers, bytes);
    state.auth.forwarded(&state.engine, &parts, &mut caller, body.is_some()).await?;
    let requirement = sessions.settings.auth_requirement;
    if body.is_some() {
        state.auth.check_with_body_coverage(&state.engine, requirement, &parts, &mut caller).await?;
    } else {
        state.auth.check(&state.engine, requirement, &parts, &mut caller).await?;
    }
    Ok((sessions, caller))
}

/// The query parameters, percent-decoded.
fn query(uri: &OriginalUri) -> Vec<(String, String)> {
    form_urlencoded::parse(uri.0.query().unwrap_or("").as_bytes()).into_owned().collect()
}

fn param<'a>(q: &'a [(String, String)], name: &str) -> Option<&'a str> {
    q.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
}

fn bad_param(name: &str, why: String) -> A2aError {
    A2aError::with_message(ErrorCode::INVALID_REQUEST, why).details(json!({"parameter": name}))
}

fn num<T: std::str::FromStr>(q: &[(String, String)], name: &str) -> Result<Option<T>, A2aError> {
    match param(q, name) {
        None => Ok(None),
        Some(v) => v
            .parse()
            .map(Some)
            .map_err(|_| bad_param(name, format!("{name} must be a non-negative decimal integer, got {v:?}"))),
    }
}

fn flag(q: &[(String, String)], name: &str) -> Result<bool, A2aError> {
    match param(q, name) {
        None | Some("false") => Ok(false),
        Some("true" | "") => Ok(true),
        Some(v) => Err(bad_param(name, format!("{name} must be true or false, got {v:?}"))),
    }
}

/// The requester: the sender and, with `from`, its session.
fn requester(caller: &Caller, from: Option<&str>) -> Result<Requester, A2aError> {
    if let Some(f) = from {
        s::validate_session_key(f).map_err(|e| bad_param("from", e.to_string()))?;
    }
    Ok(Requester { did: caller.sender.clone(), session: from.map(str::to_owned) })
}

/// The path segment before `/{suffix}` (or the last one), percent-decoded.
fn segment(uri: &OriginalUri, from_end: usize) -> String {
    let seg = uri.0.path().rsplit('/').nth(from_end).unwrap_or("");
    percent_encoding::percent_decode_str(seg).decode_utf8_lossy().into_owned()
}

/// A run id from a path segment (as an execution id, §8.5).
fn run_id(uri: &OriginalUri, from_end: usize) -> Result<String, A2aError> {
    let raw = uri.0.path().rsplit('/').nth(from_end).unwrap_or("");
    a2a_core::execution_id::ExecutionId::from_path_segment(raw).map(|id| id.to_string()).map_err(|e| {
        A2aError::with_message(ErrorCode::UNKNOWN_RUN, format!("{raw:?} is not a run id: {e}"))
            .details(json!({"run_id": raw}))
    })
}

/// `POST /a2a/sessions` (SES-4).
async fn register(State(state): State<Arc<AppState>>, uri: OriginalUri, headers: HeaderMap, body: Body) -> ApiResult {
    let bytes = read_body(&state, &headers, body).await?;
    let (sessions, caller) = authenticate(&state, "POST", &uri, &headers, Some(&bytes)).await?;
    let reg: SessionRegistration = parse_json(&bytes)?;
    let (session, created) = sessions.register(&caller.sender, reg).await?;
    Ok(json_response(if created { StatusCode::CREATED } else { StatusCode::OK }, &session))
}

/// `GET /a2a/sessions` (SES-3, SES-8).
async fn list(State(state): State<Arc<AppState>>, uri: OriginalUri, headers: HeaderMap) -> ApiResult {
    let (sessions, caller) = authenticate(&state, "GET", &uri, &headers, None).await?;
    let q = query(&uri);
    let lq = ListQuery::parse(&q).map_err(|e| bad_param(e.parameter, e.message))?;
    let who = requester(&caller, param(&q, "from"))?;
    Ok(json_response(StatusCode::OK, &sessions.list(&who, &lq).await?))
}

/// `GET /a2a/sessions/{key}` (SES-3).
async fn get_one(State(state): State<Arc<AppState>>, uri: OriginalUri, headers: HeaderMap) -> ApiResult {
    let (sessions, caller) = authenticate(&state, "GET", &uri, &headers, None).await?;
    let q = query(&uri);
    let who = requester(&caller, param(&q, "from"))?;
    Ok(json_response(StatusCode::OK, &sessions.get(&who, &segment(&uri, 0)).await?))
}

/// `DELETE /a2a/sessions/{key}` (SES-7).
async fn end(State(state): State<Arc<AppState>>, uri: OriginalUri, headers: HeaderMap) -> ApiResult {
    let (sessions, caller) = authenticate(&state, "DELETE", &uri, &headers, None).await?;
    let who = requester(&caller, None)?;
    Ok(json_response(StatusCode::OK, &sessions.end(&who, &segment(&uri, 0)).await?))
}

/// `POST /a2a/sessions/send` (§17.3, §17.4).
async fn send(State(state): State<Arc<AppState>>, uri: OriginalUri, headers: HeaderMap, body: Body) -> ApiResult {
    let bytes = read_body(&state, &headers, body).await?;
    let (sessions, caller) = authenticate(&state, "POST", &uri, &headers, Some(&bytes)).await?;
    let req: SendRequest = parse_json(&bytes)?;
    let inc = incoming(&sessions, &caller, &headers, req.from.clone())?;
    let answer = sessions.send(inc, req).await?;
    let status = match answer.status {
        SendStatus::Accepted => StatusCode::ACCEPTED,
        SendStatus::Forbidden => StatusCode::FORBIDDEN,
        _ => StatusCode::OK,
    };
    Ok(json_response(status, &answer))
}

/// The sender, hop and wait chain of a send (POL-4, POL-5).
fn incoming(
    sessions: &Sessions,
    caller: &Caller,
    headers: &HeaderMap,
    from: Option<String>,
) -> Result<Incoming, ApiError> {
    let hop = sessions.hop(header_str(headers, s::HOP_HEADER)?)?;
    let chain = match header_str(headers, s::WAIT_CHAIN_HEADER)? {
        None => WaitChain::new(),
        Some(v) => WaitChain::parse(v).map_err(|e| {
            A2aError::with_message(ErrorCode::INVALID_HEADER, format!("{}: {e}", s::WAIT_CHAIN_HEADER))
                .details(json!({"header": s::WAIT_CHAIN_HEADER}))
        })?,
    };
    let trace_id = caller
        .traceparent
        .as_deref()
        .and_then(crate::trace_context::TraceParent::parse)
        .filter(|_| headers.contains_key("traceparent"))
        .map(|t| t.trace_id);
    Ok(Incoming { requester: Requester { did: caller.sender.clone(), session: from }, hop, chain, trace_id })
}

/// `POST /a2a/sessions/spawn` (SPN-1).
async fn spawn(State(state): State<Arc<AppState>>, uri: OriginalUri, headers: HeaderMap, body: Body) -> ApiResult {
    let bytes = read_body(&state, &headers, body).await?;
    let (sessions, caller) = authenticate(&state, "POST", &uri, &headers, Some(&bytes)).await?;
    let req: SpawnRequest = parse_json(&bytes)?;
    let inc = incoming(&sessions, &caller, &headers, Some(req.parent.clone()))?;
    Ok(json_response(StatusCode::ACCEPTED, &sessions.spawn(inc, req).await?))
}

/// `GET /a2a/sessions/{key}/history` (HIS-1).
async fn history(State(state): State<Arc<AppState>>, uri: OriginalUri, headers: HeaderMap) -> ApiResult {
    let (sessions, caller) = authenticate(&state, "GET", &uri, &headers, None).await?;
    let q = query(&uri);
    let hq = HistoryQuery::checked(
        &sessions.settings,
        num(&q, "limit")?,
        num(&q, "max_bytes")?,
        flag(&q, "include_tools")?,
    )?;
    let who = requester(&caller, param(&q, "from"))?;
    Ok(json_response(StatusCode::OK, &sessions.history(&who, &segment(&uri, 1), &hq).await?))
}

/// `GET /a2a/sessions/{key}/inbox` (SES-5).
async fn inbox(State(state): State<Arc<AppState>>, uri: OriginalUri, headers: HeaderMap) -> ApiResult {
    let (sessions, caller) = authenticate(&state, "GET", &uri, &headers, None).await?;
    let q = query(&uri);
    let wait = Duration::from_millis(num(&q, "wait_ms")?.unwrap_or(0));
    let deliveries = sessions.inbox(&caller.sender, &segment(&uri, 1), wait).await?;
    Ok(json_response(StatusCode::OK, &a2a_core::sessions::Inbox { deliveries }))
}

/// `GET /a2a/runs/{id}` (SND-10).
async fn run(State(state): State<Arc<AppState>>, uri: OriginalUri, headers: HeaderMap) -> ApiResult {
    let (sessions, caller) = authenticate(&state, "GET", &uri, &headers, None).await?;
    let q = query(&uri);
    let wait = Duration::from_millis(num(&q, "wait_ms")?.unwrap_or(0));
    let until = match param(&q, "until") {
        None | Some("reply") => Until::Reply,
        Some("done") => Until::Done,
        Some(v) => return Err(bad_param("until", format!("until is `reply` or `done`, got {v:?}")).into()),
    };
    let id = run_id(&uri, 0)?;
    Ok(json_response(StatusCode::OK, &sessions.read_run(&caller.sender, &id, wait, until).await?))
}

/// `POST /a2a/runs/{id}/reply` (SES-5).
async fn reply(State(state): State<Arc<AppState>>, uri: OriginalUri, headers: HeaderMap, body: Body) -> ApiResult {
    let bytes = read_body(&state, &headers, body).await?;
    let (sessions, caller) = authenticate(&state, "POST", &uri, &headers, Some(&bytes)).await?;
    let answer: RunReply = parse_json(&bytes)?;
    let id = run_id(&uri, 1)?;
    Ok(json_response(StatusCode::OK, &sessions.reply_to(&caller.sender, &id, answer).await?))
}

/// `GET /a2a/events` (ANN-3, ANN-4).
async fn events(State(state): State<Arc<AppState>>, uri: OriginalUri, headers: HeaderMap) -> ApiResult {
    let (sessions, caller) = authenticate(&state, "GET", &uri, &headers, None).await?;
    let q = query(&uri);
    let who = requester(&caller, param(&q, "from"))?;
    let session = match param(&q, "session") {
        None => None,
        Some(key) => {
            // The session must be one the requester may see (ended ones too: their last events still matter).
            let address = sessions.address(key).map_err(|_| super::registry::unknown(key))?.to_string();
            let rec = sessions.lookup(&address).await?.ok_or_else(|| super::registry::unknown(key))?;
            if !sessions.visible(&who, &rec).await {
                return Err(super::registry::unknown(key).into());
            }
            Some(address)
        }
    };
    let last = match header_str(&headers, "last-event-id")? {
        None => None,
        Some(v) => Some(v.trim().parse::<u64>().map_err(|_| {
            A2aError::with_message(ErrorCode::INVALID_HEADER, format!("Last-Event-ID must be an event id, got {v:?}"))
                .details(json!({"header": "Last-Event-ID"}))
        })?),
    };
    let stream = sessions.event_stream(who, session, last);
    let mut resp = Body::from_stream(stream).into_response();
    let h = resp.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    Ok(resp)
}
