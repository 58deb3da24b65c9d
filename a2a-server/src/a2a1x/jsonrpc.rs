//! The JSON-RPC 2.0 binding: `POST /a2a1x/jsonrpc` (BR-1, BR-2, BR-14, BR-15).

use std::sync::Arc;

use a2a_core::a2a1x::{ListTasksRequest, SendMessageRequest, TaskIdRequest, method};
use axum::body::Body;
use axum::extract::{OriginalUri, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use serde_json::{Value, json};

use a2a_runtime::a2a1x::{RpcRequest, envelope, method_error, params, parse_rpc, read_body_within};

use super::Inner;
use super::error::BridgeError;
use super::ops::{Ctx, caller};
use super::stream;

/// Reads a 1.x request body within the agent's `max_body_bytes` (BR-9), after checking its media type, drawing on
/// the agent's budget for bodies being received (LIM-7).
pub(crate) async fn read_body(inner: &Inner, headers: &HeaderMap, body: Body) -> Result<Bytes, BridgeError> {
    let limits = &inner.app.engine.limits;
    let budget = &inner.app.engine.body_budget;
    read_body_within(headers, body, limits.max_body_bytes, limits.body_read_timeout(), budget).await.map(|(b, _)| b)
}

fn json_answer(v: &Value) -> Response {
    let mut resp = (StatusCode::OK, serde_json::to_vec(v).unwrap_or_default()).into_response();
    resp.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    resp.headers_mut().insert("a2a-version", HeaderValue::from_static(a2a_core::a2a1x::PROTOCOL_VERSION));
    resp
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
