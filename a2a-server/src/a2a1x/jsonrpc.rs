//! The JSON-RPC 2.0 binding: `POST /a2a1x/jsonrpc` (BR-1, BR-2, BR-14, BR-15).

use std::sync::Arc;

use a2a_core::a2a1x::{ListTasksRequest, SendMessageRequest, TaskIdRequest, method};
use a2a_core::error::ErrorCode;
use axum::body::Body;
use axum::extract::{OriginalUri, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::body::BodyError;

use super::Inner;
use super::error::{BridgeError, Kind};
use super::ops::{Ctx, caller};
use super::stream;

/// Reads a 1.x request body within the agent's `max_body_bytes` (BR-9), after checking its media type, drawing on
/// the agent's budget for bodies being received (LIM-7).
pub(crate) async fn read_body(inner: &Inner, headers: &HeaderMap, body: Body) -> Result<Bytes, BridgeError> {
    let limits = &inner.app.engine.limits;
    let budget = &inner.app.engine.body_budget;
    read_body_within(headers, body, limits.max_body_bytes, limits.body_read_timeout(), budget).await.map(|(b, _)| b)
}

/// Reads a 1.x request body of at most `max` bytes within `timeout`, after checking its media type
/// (`application/json` or `application/a2a+json`; BR-1, BR-9), drawing on `budget` as the bytes arrive (LIM-7;
/// past it: `503` with the code `overloaded`). The bytes stay counted until the returned charge is dropped.
pub async fn read_body_within<'b>(
    headers: &HeaderMap,
    body: Body,
    max: usize,
    timeout: std::time::Duration,
    budget: &'b crate::body::BodyBudget,
) -> Result<(Bytes, crate::body::BodyCharge<'b>), BridgeError> {
    let ct = headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("application/json");
    let mime = ct.split(';').next().unwrap_or("").trim();
    if !mime.eq_ignore_ascii_case("application/json") && !mime.eq_ignore_ascii_case("application/a2a+json") {
        let mut e = BridgeError::new(
            Kind::InvalidRequest,
            format!("send the request as application/json or application/a2a+json (got {ct:?})"),
        );
        e.code = Some(ErrorCode::UNSUPPORTED_MEDIA_TYPE);
        e.http_status = 415;
        return Err(e);
    }
    crate::body::read_held(headers, body, max, timeout, budget).await.map_err(|e| {
        let (code, status) = match &e {
            BodyError::TooLarge { .. } => (ErrorCode::PAYLOAD_TOO_LARGE, 413),
            BodyError::Timeout { .. } => (ErrorCode::REQUEST_TIMEOUT, 408),
            BodyError::Overloaded { .. } => {
                let mut out = BridgeError::new(Kind::Internal, e.to_string());
                out.code = Some(ErrorCode::OVERLOADED);
                out.http_status = 503;
                return out;
            }
            BodyError::Unreadable(_) => return BridgeError::new(Kind::InvalidRequest, e.to_string()),
        };
        let mut out = BridgeError::params(format!("{e} (max_body_bytes {max})"));
        out.code = Some(code);
        out.http_status = status;
        out
    })
}

/// Parses `params` as `T`, naming the member at fault.
pub fn params<T: DeserializeOwned>(what: &str, v: Value) -> Result<T, BridgeError> {
    serde_path_to_error::deserialize(v)
        .map_err(|e| BridgeError::params(format!("{what}: member `{}`: {}", e.path(), e.inner())))
}

/// The JSON-RPC 2.0 response to request `id`: its `result`, or its `error` (BR-14).
pub fn envelope(id: &Value, outcome: Result<Value, BridgeError>) -> Value {
    match outcome {
        Ok(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
        Err(e) => json!({"jsonrpc": "2.0", "id": id, "error": e.jsonrpc_error()}),
    }
}

fn json_answer(v: &Value) -> Response {
    let mut resp = (StatusCode::OK, serde_json::to_vec(v).unwrap_or_default()).into_response();
    resp.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    resp.headers_mut().insert("a2a-version", HeaderValue::from_static(a2a_core::a2a1x::PROTOCOL_VERSION));
    resp
}

/// The 1.0 method an A2A 0.3 method name became.
fn renamed(m: &str) -> Option<&'static str> {
    Some(match m {
        "message/send" => method::SEND_MESSAGE,
        "message/stream" => method::SEND_STREAMING_MESSAGE,
        "tasks/get" => method::GET_TASK,
        "tasks/list" => method::LIST_TASKS,
        "tasks/cancel" => method::CANCEL_TASK,
        "tasks/resubscribe" => method::SUBSCRIBE_TO_TASK,
        _ => return None,
    })
}

/// A JSON-RPC 2.0 request, its envelope read.
pub struct RpcRequest {
    /// Its `id` (`null` when absent or neither a string nor a number).
    pub id: Value,
    /// Its `method`.
    pub method: String,
    /// Its `params` (an empty object when absent).
    pub params: Value,
}

/// Reads the envelope of a JSON-RPC 2.0 request (BR-9, BR-14): not JSON is `-32700`, a batch or not a 2.0 request
/// `-32600`, `params` that is not an object `-32602`; the error comes with the `id` to answer it with.
pub fn parse_rpc(bytes: &[u8]) -> Result<RpcRequest, (Value, BridgeError)> {
    let req: Value = serde_json::from_slice(bytes).map_err(|e| {
        (Value::Null, BridgeError::new(Kind::Parse, format!("the request body is not well-formed JSON: {e}")))
    })?;
    let id = req.get("id").filter(|i| i.is_string() || i.is_number()).cloned().unwrap_or(Value::Null);
    let method = match (&req, req.get("jsonrpc"), req.get("method").and_then(Value::as_str)) {
        (Value::Array(_), _, _) => {
            let e = BridgeError::new(Kind::InvalidRequest, "batches are not served; send one request per HTTP request");
            return Err((Value::Null, e));
        }
        (_, Some(Value::String(v)), Some(m)) if v == "2.0" => m.to_owned(),
        _ => {
            let e = BridgeError::new(
                Kind::InvalidRequest,
                "not a JSON-RPC 2.0 request: send {\"jsonrpc\": \"2.0\", \"id\": ..., \"method\": ..., \"params\": {...}}",
            );
            return Err((id, e));
        }
    };
    let params = match req.get("params") {
        None | Some(Value::Null) => json!({}),
        Some(p @ Value::Object(_)) => p.clone(),
        Some(_) => return Err((id, BridgeError::params("params must be an object"))),
    };
    Ok(RpcRequest { id, method, params })
}

/// The error for a method the bridge does not serve (BR-2): push notifications are `-32003`, an A2A 0.3 method
/// name is `-32601` naming the 1.0 method, any other name `-32601` listing the methods.
pub fn method_error(m: &str) -> BridgeError {
    if m.contains("PushNotificationConfig") {
        return BridgeError::new(
            Kind::PushNotSupported,
            "this agent does not send push notifications; stream with SendStreamingMessage or poll with GetTask",
        );
    }
    BridgeError::new(
        Kind::MethodNotFound,
        match renamed(m) {
            Some(new) => format!("{m:?} is an A2A 0.3 method name; this endpoint speaks A2A 1.0: call {new:?}"),
            None => format!(
                "no method {m:?}; the methods are SendMessage, SendStreamingMessage, GetTask, ListTasks, CancelTask and SubscribeToTask"
            ),
        },
    )
}

/// `POST /a2a1x/jsonrpc`.
pub(crate) async fn serve(
    State(inner): State<Arc<Inner>>,
    uri: OriginalUri,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let bytes = match read_body(&inner, &headers, body).await {
        Ok(b) => b,
        Err(e) => return json_answer(&envelope(&Value::Null, Err(e))),
    };
    let RpcRequest { id, method, params: p } = match parse_rpc(&bytes) {
        Ok(r) => r,
        Err((id, e)) => return json_answer(&envelope(&id, Err(e))),
    };
    let target = uri.0.path_and_query().map_or("/a2a1x/jsonrpc", |p| p.as_str()).to_owned();
    let caller = match caller(&inner, &headers) {
        Ok(c) => c,
        Err(e) => return json_answer(&envelope(&id, Err(e))),
    };
    let ctx = Ctx { caller, headers: &headers, method: "POST", target: &target, body: &bytes };
    let outcome = match method.as_str() {
        method::SEND_MESSAGE => match params::<SendMessageRequest>("SendMessage params", p) {
            Ok(req) => inner.send(ctx, &req).await.map(|t| json!({"task": t})),
            Err(e) => Err(e),
        },
        method::SEND_STREAMING_MESSAGE => {
            let req = match params::<SendMessageRequest>("SendStreamingMessage params", p) {
                Ok(r) => r,
                Err(e) => return json_answer(&envelope(&id, Err(e))),
            };
            let started = async {
                let permit = stream::permit(&inner)?;
                let s = inner.start(ctx, &req).await?;
                let first = inner.read(&s.caller, &s.task_id, std::time::Duration::ZERO, None).await?;
                Ok::<_, BridgeError>(stream::events(inner.clone(), s.caller, first, permit))
            };
            return match started.await {
                Ok(rx) => stream::sse(rx, move |ev| json!({"jsonrpc": "2.0", "id": id, "result": ev})),
                Err(e) => json_answer(&envelope(&id, Err(e))),
            };
        }
        method::SUBSCRIBE_TO_TASK => {
            let req = match params::<TaskIdRequest>("SubscribeToTask params", p) {
                Ok(r) => r,
                Err(e) => return json_answer(&envelope(&id, Err(e))),
            };
            let mut ctx = ctx;
            let started = async {
                let permit = stream::permit(&inner)?;
                inner.authorized(&mut ctx, &req.id).await?;
                let first = inner.read(&ctx.caller, &req.id, std::time::Duration::ZERO, None).await?;
                Ok::<_, BridgeError>(stream::events(inner.clone(), ctx.caller, first, permit))
            };
            return match started.await {
                Ok(rx) => stream::sse(rx, move |ev| json!({"jsonrpc": "2.0", "id": id, "result": ev})),
                Err(e) => json_answer(&envelope(&id, Err(e))),
            };
        }
        method::GET_TASK => match params::<TaskIdRequest>("GetTask params", p) {
            Ok(req) => inner.get(ctx, &req.id, req.history_length).await.map(|t| json!(t)),
            Err(e) => Err(e),
        },
        method::CANCEL_TASK => match params::<TaskIdRequest>("CancelTask params", p) {
            Ok(req) => inner.cancel(ctx, &req.id).await.map(|t| json!(t)),
            Err(e) => Err(e),
        },
        method::LIST_TASKS => match params::<ListTasksRequest>("ListTasks params", p) {
            Ok(req) => inner.list(ctx, &req).await.map(|l| json!(l)),
            Err(e) => Err(e),
        },
        m => Err(method_error(m)),
    };
    json_answer(&envelope(&id, outcome))
}
