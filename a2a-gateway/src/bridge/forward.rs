//! Forwarding a 1.x request to an agent's bridge, and its answer back: the task's route recorded from the answer (a
//! stream's first event) before it is passed on, streams passed through as they arrive (BR-21, BR-22).

use std::sync::Arc;
use std::time::Duration;

use crate::upstream::UpstreamBody;
use a2a_core::error::{A2aError, ErrorCode};
use a2a_core::headers as h;
use a2a_core::sse;
use a2a_runtime::a2a1x::error::{BridgeError, Kind as ErrKind};
use axum::body::Body;
use bytes::{Bytes, BytesMut};
use futures_util::StreamExt;
use http::{HeaderMap, HeaderValue, Method, Request, Response, header};
use http_body_util::{BodyExt, Full};
use serde_json::Value;

use super::Binding;
use crate::Inner;
use crate::agents::{Agent, AgentInfo, Endpoint};
use crate::proxy::strip_hop_by_hop;
use crate::routes::{Kind, Route};
use crate::upstream::UpstreamError;

/// Longest answer the gateway reads whole (a `SendMessage` task, a `ListTasks` page).
const MAX_ANSWER_BYTES: usize = 8 * 1024 * 1024;
/// Longest first event of a stream (the task as it started).
const MAX_FIRST_EVENT_BYTES: usize = 1024 * 1024;

/// One 1.x request, as it is forwarded.
pub(crate) struct Call<'a> {
    pub(crate) gw: &'a Inner,
    pub(crate) binding: &'a Binding,
    pub(crate) headers: &'a HeaderMap,
    pub(crate) method: &'a Method,
    /// The path and query, sent as they came (the agent's bridge serves the same paths, BR-1).
    pub(crate) target: &'a str,
    pub(crate) sender: &'a str,
}

fn unavailable(agent: &Agent, why: impl std::fmt::Display) -> BridgeError {
    BridgeError::from(A2aError::with_message(
        ErrorCode::AGENT_UNAVAILABLE,
        format!("the agent {} could not be reached: {why}", agent.label),
    ))
}

fn store_unavailable(e: a2a_runtime::store::StoreError) -> BridgeError {
    BridgeError::from(A2aError::with_message(
        ErrorCode::STORE_UNAVAILABLE,
        format!("the routing state is unavailable: {e}"),
    ))
}

/// The route id of a message id: a sender's resent message goes where the first went (BR-11, BR-21).
pub(crate) fn idempotency_id(sender: &str, message_id: &str) -> String {
    format!("{sender} a2a1x {message_id}")
}

/// The agent holding task `id` (GW-2): `TaskNotFoundError` when the gateways have no route for it.
pub(crate) async fn task_route(gw: &Inner, id: &str) -> Result<(Arc<Agent>, Route), BridgeError> {
    let unknown = || {
        BridgeError::from(A2aError::with_message(
            ErrorCode::UNKNOWN_EXECUTION,
            format!("no task {id:?} through this gateway (unknown or expired)"),
        ))
    };
    let r = gw.routes.get(Kind::Execution, id).await.map_err(store_unavailable)?.ok_or_else(unknown)?;
    let agent = match gw.agents.get(&r.agent) {
        Some(a) => a,
        // Another gateway on the same Redis sent it to an agent this one has not seen yet.
        None => {
            let ep = Endpoint::parse(&r.agent).map_err(|_| unknown())?;
            gw.agents.add(ep, false, false).ok_or_else(|| {
                BridgeError::from(A2aError::with_message(ErrorCode::AGENT_UNAVAILABLE, "too many agents known"))
            })?
        }
    };
    Ok((agent, r))
}

fn build(
    call: &Call<'_>,
    agent: &Agent,
    method: &Method,
    target: &str,
    body: Bytes,
) -> Result<Request<Full<Bytes>>, BridgeError> {
    let mut hm = call.headers.clone();
    strip_hop_by_hop(&mut hm);
    // A caller cannot claim to be forwarded (GW-8); 1.x requests carry no signature (BR-10).
    hm.remove(h::A2A_FORWARDED_SENDER);
    hm.remove(h::A2A_FORWARDED_VERIFIED);
    hm.remove(h::A2A_SIGNATURE);
    if !body.is_empty() {
        hm.insert(header::CONTENT_LENGTH, HeaderValue::from(body.len()));
    }
    let uri = agent.endpoint.uri(target).map_err(|e| {
        BridgeError::from(A2aError::with_message(ErrorCode::INTERNAL_ERROR, format!("bad upstream URI: {e}")))
    })?;
    let mut req = Request::new(Full::new(body));
    *req.method_mut() = method.clone();
    *req.uri_mut() = uri;
    *req.headers_mut() = hm;
    Ok(req)
}

/// Sends `method target` with `body` to `agent`, its health recorded (GW-7).
pub(crate) async fn send_raw(
    call: &Call<'_>,
    agent: &Arc<Agent>,
    method: &Method,
    target: &str,
    body: Bytes,
) -> Result<Response<UpstreamBody>, UpstreamError> {
    let req = match build(call, agent, method, target, body) {
        Ok(r) => r,
        Err(e) => return Err(UpstreamError::Protocol(e.message)),
    };
    let guard = agent.start(&call.gw.metrics);
    let sent = call.gw.upstream.send(req).await;
    drop(guard);
    match &sent {
        Ok(resp) if matches!(resp.status().as_u16(), 500 | 502 | 503 | 504) => {
            call.gw.agents.failure(agent, "5xx answer")
        }
        Ok(_) => call.gw.agents.success(agent),
        Err(e) => {
            call.gw.metrics.upstream_error(e.reason());
            call.gw.agents.failure(agent, e.reason());
            tracing::warn!(agent = %agent.label, endpoint = %agent.endpoint.url, error = %e, "agent unreachable (A2A 1.x)");
        }
    }
    sent
}

fn upstream_error(agent: &Agent, e: UpstreamError) -> BridgeError {
    match e {
        UpstreamError::Timeout(ms) => BridgeError::from(A2aError::with_message(
            ErrorCode::AGENT_TIMEOUT,
            format!("the agent {} did not answer within {ms} ms", agent.label),
        )),
        other => unavailable(agent, other),
    }
}

/// Sends the caller's request as it came to `agent`.
pub(crate) async fn send_once(
    call: &Call<'_>,
    agent: &Arc<Agent>,
    body: Bytes,
) -> Result<Response<UpstreamBody>, BridgeError> {
    send_raw(call, agent, call.method, call.target, body).await.map_err(|e| upstream_error(agent, e))
}

/// Sends a message to an agent offering `skill`: the one a resent message id went to, else one chosen as for
/// NEGOTIATE (GW-6, GW-7), another when no connection could be made (nothing was sent). The message id's route is
/// recorded before the message is sent, so that a resend reaches the same agent (BR-21).
pub(crate) async fn send_to_skill(
    call: &Call<'_>,
    skill: &str,
    candidates: &[(Arc<Agent>, Arc<AgentInfo>)],
    idempotency: &str,
    body: Bytes,
) -> Result<(Arc<Agent>, Response<UpstreamBody>), BridgeError> {
    let gw = call.gw;
    if candidates.is_empty() {
        let mut e = BridgeError::params(format!("no agent behind this gateway offers the skill {skill:?} now"));
        e.code = Some(ErrorCode::NO_MATCHING_CAPABILITY);
        return Err(e);
    }
    let before = gw.routes.get(Kind::Idempotency, idempotency).await.map_err(store_unavailable)?;
    let sticky = before.and_then(|r| candidates.iter().find(|(a, _)| *a.endpoint.url == *r.agent).cloned());
    let region = call.headers.get(h::A2A_REGION).and_then(|v| v.to_str().ok()).map(str::trim);
    let mut tried: Vec<Arc<Agent>> = Vec::new();
    loop {
        let chosen = match (&sticky, tried.is_empty()) {
            (Some(s), true) => Some(s.clone()),
            _ => gw.agents.choose(candidates, skill, region, &tried),
        };
        let Some((agent, info)) = chosen else {
            return Err(BridgeError::from(A2aError::with_message(
                ErrorCode::AGENT_UNAVAILABLE,
                format!("no agent offering {skill:?} could be reached"),
            )));
        };
        let route = Route { agent: agent.endpoint.url.as_str().into(), capability: skill.into(), owner: None };
        let ttl = lifetime(gw, Some(&info));
        gw.routes.put(Kind::Idempotency, idempotency, route, ttl).await.map_err(store_unavailable)?;
        match send_raw(call, &agent, call.method, call.target, body.clone()).await {
            Ok(resp) => return Ok((agent, resp)),
            Err(UpstreamError::Connect(_)) if tried.len() < 3 => tried.push(agent),
            Err(e) => return Err(upstream_error(&agent, e)),
        }
    }
}

/// How long an execution at the agent stays readable (GW-6).
fn lifetime(gw: &Inner, info: Option<&AgentInfo>) -> Duration {
    info.map_or(Duration::from_millis(gw.limits.execution_route_ttl_ms), |i| {
        i.execution_lifetime(gw.limits.result_retention_ms, gw.limits.execution_route_ttl_ms)
    })
}

/// BR-1: an agent's bridge answers `A2A-Version: 1.0`; anything else is not a bridge (an agent without one).
fn check_bridge(agent: &Agent, resp: &Response<UpstreamBody>) -> Result<(), BridgeError> {
    let v = resp.headers().get(h::A2A_VERSION).and_then(|v| v.to_str().ok()).unwrap_or("");
    if v == a2a_core::a2a1x::PROTOCOL_VERSION {
        return Ok(());
    }
    Err(unavailable(
        agent,
        format!(
            "it does not serve the A2A 1.x bridge (it answered {} with A2A-Version {v:?}); serve the bridge on the \
             agent (a2a_server::a2a1x::Bridge) or take it out of this gateway",
            resp.status()
        ),
    ))
}

fn head(resp: &Response<UpstreamBody>) -> http::response::Builder {
    let mut b = Response::builder().status(resp.status());
    for (k, v) in resp.headers() {
        if !crate::h1::is_framing_or_hop(k.as_str().as_bytes()) {
            b = b.header(k, v);
        }
    }
    b
}

fn built(b: http::response::Builder, body: Body) -> Result<Response<Body>, BridgeError> {
    b.body(body).map_err(|e| BridgeError::new(ErrKind::Internal, format!("cannot build the answer: {e}")))
}

/// The agent's answer as it comes (a task read, a cancel, a resubscribed stream).
pub(crate) fn pass_through(agent: &Agent, resp: Response<UpstreamBody>) -> Result<Response<Body>, BridgeError> {
    check_bridge(agent, &resp)?;
    let b = head(&resp);
    built(b, Body::new(resp.into_body()))
}

/// Reads a whole answer of at most [`MAX_ANSWER_BYTES`].
pub(crate) async fn read_whole(gw: &Inner, agent: &Agent, body: UpstreamBody) -> Result<Bytes, BridgeError> {
    let limit = Duration::from_millis(gw.limits.agent_timeout_ms);
    match tokio::time::timeout(limit, http_body_util::Limited::new(body, MAX_ANSWER_BYTES).collect()).await {
        Ok(Ok(c)) => Ok(c.to_bytes()),
        _ => {
            gw.agents.failure(agent, "answer body");
            Err(unavailable(agent, "its answer was cut short"))
        }
    }
}

/// The answer to a message (BR-21): the task id read from it (a stream's first event) and its route recorded, then
/// the answer passed on — a stream as it arrives.
pub(crate) async fn answer_send(
    call: &Call<'_>,
    agent: &Arc<Agent>,
    skill: &str,
    stream: bool,
    resp: Response<UpstreamBody>,
) -> Result<(Response<Body>, Option<String>), BridgeError> {
    check_bridge(agent, &resp)?;
    let gw = call.gw;
    let is_sse = resp
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|ct| ct.split(';').next().is_some_and(|m| m.trim().eq_ignore_ascii_case("text/event-stream")));
    let b = head(&resp);
    let body = resp.into_body();
    if stream && is_sse {
        let limit = Duration::from_millis(gw.limits.agent_timeout_ms);
        let (first, data, rest) = first_event(body, MAX_FIRST_EVENT_BYTES, limit)
            .await
            .map_err(|why| unavailable(agent, format!("its stream broke before the first event: {why}")))?;
        let id = data.as_ref().and_then(|d| task_id(call.binding, d));
        if let Some(id) = &id {
            record(call, agent, skill, id).await?;
        }
        let first = first.freeze();
        let chained = futures_util::stream::once(async move { Ok::<Bytes, std::io::Error>(first) })
            .chain(rest.into_data_stream());
        return Ok((built(b, Body::from_stream(chained))?, id));
    }
    let bytes = read_whole(gw, agent, body).await?;
    let id = serde_json::from_slice::<Value>(&bytes).ok().and_then(|v| task_id(call.binding, &v));
    if let Some(id) = &id {
        record(call, agent, skill, id).await?;
    }
    Ok((built(b, Body::from(bytes))?, id))
}

/// The task id of an answer to a message (`{"task": Task}`, in the binding's envelope).
fn task_id(binding: &Binding, v: &Value) -> Option<String> {
    binding.result_of(v)?.get("task")?.get("id")?.as_str().map(str::to_owned)
}

/// Records where task `id` lives, for the execution's lifetime (GW-6).
async fn record(call: &Call<'_>, agent: &Arc<Agent>, skill: &str, id: &str) -> Result<(), BridgeError> {
    let gw = call.gw;
    let info = gw.agents.info(agent).await.ok();
    let route = Route { agent: agent.endpoint.url.as_str().into(), capability: skill.into(), owner: None };
    gw.routes.put(Kind::Execution, id, route, lifetime(gw, info.as_deref())).await.map_err(store_unavailable)
}

/// Reads a stream up to the end of its first event (at most `max` bytes, within `limit`): the bytes read, the
/// event's `data` as JSON, and the rest of the stream, which is not read. The events are read with the workspace's
/// Server-Sent Events decoder ([`a2a_core::sse`]); the bytes pass on as they came.
async fn first_event(
    mut body: UpstreamBody,
    max: usize,
    limit: Duration,
) -> Result<(BytesMut, Option<Value>, UpstreamBody), String> {
    let deadline = tokio::time::Instant::now() + limit;
    let mut buf = BytesMut::new();
    let mut decoder = sse::Decoder::new(max);
    loop {
        match decoder.next_item() {
            Some(sse::Item::Event(event)) => return Ok((buf, serde_json::from_str(&event.data).ok(), body)),
            // A comment first (a keep-alive): the stream is passed on without a task id.
            Some(sse::Item::Comment(_)) => return Ok((buf, None, body)),
            None => {}
        }
        if buf.len() > max {
            return Err(format!("its first event is longer than {max} bytes"));
        }
        match tokio::time::timeout_at(deadline, body.frame()).await {
            Err(_) => return Err(format!("no event within {} ms", limit.as_millis())),
            // Ended before its first event: an unfinished event is not one.
            Ok(None) => return Ok((buf, None, body)),
            Ok(Some(Err(e))) => return Err(e.to_string()),
            Ok(Some(Ok(frame))) => {
                if let Ok(d) = frame.into_data() {
                    buf.extend_from_slice(&d);
                    decoder.feed(&d).map_err(|_| format!("its first event is longer than {max} bytes"))?;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_task_id_is_read_from_the_first_event() {
        let v: Value = serde_json::from_str("{\"result\": {\"task\": {\"id\": \"t1\"}}}").expect("json");
        assert_eq!(task_id(&Binding::JsonRpc(Value::Null), &v).as_deref(), Some("t1"));
        assert_eq!(task_id(&Binding::HttpJson, &v), None);
    }
}
