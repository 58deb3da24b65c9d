//! The HTTP+JSON binding below `/a2a1x` (BR-1, BR-14, BR-15).

use std::sync::Arc;
use std::time::Duration;

use a2a_core::a2a1x::SendMessageRequest;
use a2a_core::execution_id::ExecutionId;
use axum::Router;
use axum::body::Body;
use axum::extract::{OriginalUri, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get, post};
use serde_json::{Value, json};

use super::Inner;
use super::error::{BridgeError, Kind};
use a2a_runtime::a2a1x::{list_query, params};

use super::jsonrpc::read_body;
use super::ops::{Ctx, caller};
use super::stream;

pub(crate) fn routes() -> Router<Arc<Inner>> {
    Router::new()
        .route("/a2a1x/message:send", post(send))
        .route("/a2a1x/message:stream", post(send_stream))
        .route("/a2a1x/tasks", get(list))
        .route("/a2a1x/tasks/{*rest}", get(task).post(task))
        .route("/a2a1x/{*rest}", any(not_found))
}

fn answer(status: StatusCode, v: &Value) -> Response {
    let mut resp = (status, serde_json::to_vec(v).unwrap_or_default()).into_response();
    resp.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    resp.headers_mut().insert("a2a-version", HeaderValue::from_static(a2a_core::a2a1x::PROTOCOL_VERSION));
    resp
}

fn error(e: &BridgeError) -> Response {
    let mut resp = answer(StatusCode::from_u16(e.http_status).unwrap_or(StatusCode::BAD_REQUEST), &e.http_body());
    // LIM-7, CONF-5: every `503` (a full body budget, the streams all taken) and `429` says when to come back.
    if matches!(e.http_status, 429 | 503) {
        resp.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    }
    resp
}

fn reply(outcome: Result<Value, BridgeError>) -> Response {
    match outcome {
        Ok(v) => answer(StatusCode::OK, &v),
        Err(e) => error(&e),
    }
}

fn target(uri: &OriginalUri) -> String {
    uri.0.path_and_query().map_or_else(|| uri.0.path().to_owned(), |p| p.as_str().to_owned())
}

async fn not_found() -> Response {
    error(&BridgeError::new(
        Kind::MethodNotFound,
        "no A2A 1.x operation at this path; see the Agent Card's HTTP+JSON interface (/a2a1x/message:send, \
         /a2a1x/message:stream, /a2a1x/tasks, /a2a1x/tasks/{id}, /a2a1x/tasks/{id}:cancel, /a2a1x/tasks/{id}:subscribe)",
    ))
}

/// `POST /a2a1x/message:send`.
async fn send(State(inner): State<Arc<Inner>>, uri: OriginalUri, headers: HeaderMap, body: Body) -> Response {
    let target = target(&uri);
    reply(
        async {
            let bytes = read_body(&inner, &headers, body).await?;
            let caller = caller(&inner, &headers)?;
            let req: SendMessageRequest = params("the SendMessageRequest", parse(&bytes)?)?;
            let ctx = Ctx { caller, headers: &headers, method: "POST", target: &target, body: &bytes };
            Ok(json!({"task": inner.send(ctx, &req).await?}))
        }
        .await,
    )
}

fn parse(bytes: &[u8]) -> Result<Value, BridgeError> {
    serde_json::from_slice(bytes)
        .map_err(|e| BridgeError::new(Kind::Parse, format!("the request body is not well-formed JSON: {e}")))
}

/// `POST /a2a1x/message:stream`.
async fn send_stream(State(inner): State<Arc<Inner>>, uri: OriginalUri, headers: HeaderMap, body: Body) -> Response {
    let target = target(&uri);
    let started = async {
        let bytes = read_body(&inner, &headers, body).await?;
        let caller = caller(&inner, &headers)?;
        let req: SendMessageRequest = params("the SendMessageRequest", parse(&bytes)?)?;
        let permit = stream::permit(&inner)?;
        let ctx = Ctx { caller, headers: &headers, method: "POST", target: &target, body: &bytes };
        let s = inner.start(ctx, &req).await?;
        let first = inner.read(&s.caller, &s.task_id, Duration::ZERO, None).await?;
        Ok::<_, BridgeError>(stream::events(inner.clone(), s.caller, first, permit))
    };
    match started.await {
        Ok(rx) => stream::sse(rx, |ev| json!(ev)),
        Err(e) => error(&e),
    }
}

/// `GET /a2a1x/tasks`.
async fn list(State(inner): State<Arc<Inner>>, uri: OriginalUri, headers: HeaderMap) -> Response {
    let target = target(&uri);
    reply(
        async {
            let caller = caller(&inner, &headers)?;
            let req = list_query(uri.0.query().unwrap_or(""))?;
            let ctx = Ctx { caller, headers: &headers, method: "GET", target: &target, body: b"" };
            Ok(json!(inner.list(ctx, &req).await?))
        }
        .await,
    )
}

/// `GET /a2a1x/tasks/{id}`, `POST /a2a1x/tasks/{id}:cancel`, `GET|POST /a2a1x/tasks/{id}:subscribe`. The id is read
/// from the raw path as on RESULT (EID-12): task ids contain `:`, and `%` when the sender's DID has a port.
async fn task(
    State(inner): State<Arc<Inner>>,
    method: Method,
    uri: OriginalUri,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let target = target(&uri);
    let raw = uri.0.path().rsplit_once("/tasks/").map_or("", |(_, r)| r).to_owned();
    let (segment, op) = if let Some(s) = raw.strip_suffix(":cancel") {
        (s, "cancel")
    } else if let Some(s) = raw.strip_suffix(":subscribe") {
        (s, "subscribe")
    } else {
        (raw.as_str(), "get")
    };
    let id = ExecutionId::from_path_segment(segment).map_or_else(|_| segment.to_owned(), |i| i.as_ref().to_owned());
    let outcome = async {
        let bytes = if method == Method::POST { read_body(&inner, &headers, body).await? } else { Default::default() };
        let caller = caller(&inner, &headers)?;
        let mut ctx = Ctx { caller, headers: &headers, method: method.as_str_static(), target: &target, body: &bytes };
        match (op, &method) {
            ("get", &Method::GET) => {
                let history = url::form_urlencoded::parse(uri.0.query().unwrap_or("").as_bytes())
                    .find(|(k, _)| k == "historyLength")
                    .and_then(|(_, v)| v.parse().ok());
                Ok(Out::Json(json!(inner.get(ctx, &id, history).await?)))
            }
            ("cancel", &Method::POST) => Ok(Out::Json(json!(inner.cancel(ctx, &id).await?))),
            ("subscribe", _) => {
                let permit = stream::permit(&inner)?;
                inner.authorized(&mut ctx, &id).await?;
                let first = inner.read(&ctx.caller, &id, Duration::ZERO, None).await?;
                Ok(Out::Stream(stream::events(inner.clone(), ctx.caller, first, permit)))
            }
            _ => Err(BridgeError::new(
                Kind::MethodNotFound,
                format!("{method} is not an operation on a task; GET /tasks/{{id}}, POST /tasks/{{id}}:cancel or /tasks/{{id}}:subscribe"),
            )),
        }
    }
    .await;
    match outcome {
        Ok(Out::Stream(rx)) => stream::sse(rx, |ev| json!(ev)),
        Ok(Out::Json(v)) => answer(StatusCode::OK, &v),
        Err(e) => error(&e),
    }
}

/// What a task operation answers.
enum Out {
    Json(Value),
    Stream(tokio::sync::mpsc::Receiver<a2a_core::a2a1x::StreamResponse>),
}

trait MethodStr {
    fn as_str_static(&self) -> &'static str;
}

impl MethodStr for Method {
    fn as_str_static(&self) -> &'static str {
        if self == Method::POST { "POST" } else { "GET" }
    }
}
