//! The console's Sessions view (§17) for the agents behind the gateway. The gateway does not route §17 (it lists no
//! `sessions` feature), so the console reads each agent's own session endpoints — `GET /a2a/sessions`,
//! `GET /a2a/sessions/{key}/history` and `GET /a2a/events` (SES-3, HIS-1, ANN-3) — as the gateway: `A2A-Sender-ID`
//! the gateway's DID, signed with its key when it has one (INT-1..INT-10, audience the agent's DID). It therefore
//! shows exactly what each agent's policy (SES-2, POL-1, POL-2) lets the gateway's DID see, and needs no credential
//! the gateway does not already hold.

use std::time::Duration;

use a2a_core::headers as h;
use a2a_core::integrity::{self, Coverage, MessageParts};
use axum::body::Body;
use bytes::Bytes;
use http::{Request, Response, StatusCode, header};
use http_body_util::Full;
use serde_json::{Value, json};

use crate::Inner;
use crate::agents::Agent;

/// How long the console waits for an agent's answer (the head of an event stream).
const TIMEOUT: Duration = Duration::from_secs(5);
/// The largest answer read from an agent (a list is at most 64 KiB, SES-8; a history 80 KiB, HIS-2).
const MAX_ANSWER_BYTES: usize = 512 * 1024;
/// The signatures' lifetime, seconds.
const LIFETIME_S: u32 = 60;

fn unix_now() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64)
}

/// A `GET` of `path_and_query` (below `/a2a`) at `agent` as the gateway, with `extra` headers.
fn request(
    gw: &Inner,
    agent: &Agent,
    did: &str,
    path_and_query: &str,
    extra: &[(&str, String)],
) -> Result<Request<Full<Bytes>>, String> {
    let uri = agent.endpoint.uri(path_and_query).map_err(|e| e.to_string())?;
    let mut headers: Vec<(&str, String)> = vec![
        (h::A2A_VERSION, a2a_core::PROTOCOL_VERSION.to_owned()),
        (h::A2A_SENDER_ID, gw.did.clone()),
        ("accept", "application/json, text/event-stream".to_owned()),
    ];
    headers.extend(extra.iter().cloned());
    let identity = &gw.kept.identity;
    if let Some(key) = &identity.key {
        let target = agent.endpoint.target(path_and_query).into_owned();
        let pairs: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let parts = MessageParts { method: "GET", target: &target, headers: &pairs, body: b"", status: None };
        let token = integrity::sign(
            key,
            &identity.key_id,
            &identity.did,
            did,
            Coverage::HeaderOnly,
            &parts,
            unix_now(),
            LIFETIME_S,
        )
        .map_err(|e| format!("cannot sign: {e}"))?;
        headers.push((h::A2A_SIGNATURE, token));
    }
    let mut b = Request::builder().method("GET").uri(uri);
    for (k, v) in &headers {
        b = b.header(*k, v);
    }
    b.body(Full::new(Bytes::new())).map_err(|e| e.to_string())
}

/// Who the console reads the agents as (shown on the page).
fn reader(gw: &Inner) -> String {
    let how = if gw.kept.identity.key.is_some() { "signed with its key" } else { "unsigned: it has no key" };
    format!("the gateway {} ({how})", gw.did)
}

/// `GET /console/api/sessions`: the sessions of every agent that lists `sessions` in its features.
pub(crate) async fn list(gw: &Inner) -> Value {
    let mut out = Vec::new();
    for a in gw.agents.listed().iter() {
        let Ok(info) = gw.agents.info(a).await else { continue };
        if !info.doc.features.iter().any(|f| f == "sessions") {
            continue;
        }
        let entry = match fetch(gw, a, &info.did, "/a2a/sessions?include_self=true&limit=200", &[]).await {
            Ok((200, v)) => json!({"label": a.label, "did": info.did, "endpoint": a.endpoint.url,
                "sessions": v["sessions"], "total": v["total"], "truncated": v["truncated"]}),
            Ok((status, v)) => json!({"label": a.label, "did": info.did, "endpoint": a.endpoint.url, "sessions": [],
                "error": format!("{status} {}", error_text(&v))}),
            Err(e) => {
                json!({"label": a.label, "did": info.did, "endpoint": a.endpoint.url, "sessions": [], "error": e})
            }
        };
        out.push(entry);
    }
    json!({"as": reader(gw), "agents": out})
}

fn error_text(v: &Value) -> String {
    match (v["error"]["code"].as_str(), v["error"]["message"].as_str()) {
        (Some(c), Some(m)) => format!("{c}: {m}"),
        _ => v.to_string(),
    }
}

async fn fetch(gw: &Inner, a: &Agent, did: &str, path: &str, extra: &[(&str, String)]) -> Result<(u16, Value), String> {
    let req = request(gw, a, did, path, extra)?;
    let (parts, body) = gw.kept.upstream.fetch(req, TIMEOUT, MAX_ANSWER_BYTES).await.map_err(|e| e.to_string())?;
    let v = serde_json::from_slice(&body).map_err(|e| format!("the agent's answer is not JSON: {e}"))?;
    Ok((parts.status.as_u16(), v))
}

/// The agent and session a request names (`agent=<label>&session=<key>`).
async fn target(gw: &Inner, uri: &http::Uri) -> Result<(std::sync::Arc<Agent>, String, String), Response<Body>> {
    let q: Vec<(String, String)> =
        url::form_urlencoded::parse(uri.query().unwrap_or("").as_bytes()).into_owned().collect();
    let get = |k: &str| q.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone()).unwrap_or_default();
    let (label, key) = (get("agent"), get("session"));
    let bad = |m: String, p: &str| {
        super::error(
            a2a_core::error::A2aError::with_message(a2a_core::error::ErrorCode::INVALID_REQUEST, m)
                .details(json!({"parameter": p})),
        )
    };
    if let Err(e) = a2a_core::sessions::validate_session_key(&key) {
        return Err(bad(format!("session: {e}"), "session"));
    }
    let Some(agent) = gw.agents.listed().iter().find(|a| a.label == label).cloned() else {
        return Err(bad(format!("agent: no agent {label:?} behind this gateway"), "agent"));
    };
    let did = match gw.agents.info(&agent).await {
        Ok(i) => i.did.clone(),
        Err(e) => {
            return Err(super::error(a2a_core::error::A2aError::with_message(
                a2a_core::error::ErrorCode::AGENT_UNAVAILABLE,
                format!("agent {label}: {e}"),
            )));
        }
    };
    Ok((agent, did, key))
}

/// `GET /console/api/sessions/history?agent=&session=`: the agent's answer to `GET /a2a/sessions/{key}/history`.
pub(crate) async fn history(gw: &Inner, uri: &http::Uri) -> Response<Body> {
    let (agent, did, key) = match target(gw, uri).await {
        Ok(t) => t,
        Err(r) => return r,
    };
    match fetch(gw, &agent, &did, &format!("/a2a/sessions/{key}/history?limit=200"), &[]).await {
        Ok((status, v)) => super::json_response(StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_GATEWAY), &v),
        Err(e) => {
            super::error(a2a_core::error::A2aError::with_message(a2a_core::error::ErrorCode::AGENT_UNAVAILABLE, e))
        }
    }
}

/// `GET /console/api/sessions/events?agent=&session=`: the agent's `GET /a2a/events?session=KEY`, passed through as
/// it arrives, from the start of its buffer (`Last-Event-ID: 0`, ANN-6) or after the browser's `Last-Event-ID`.
pub(crate) async fn events(gw: &Inner, parts: &http::request::Parts) -> Response<Body> {
    let (agent, did, key) = match target(gw, &parts.uri).await {
        Ok(t) => t,
        Err(r) => return r,
    };
    let last = parts
        .headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .filter(|v| v.trim().parse::<u64>().is_ok())
        .unwrap_or("0")
        .trim()
        .to_owned();
    let req = match request(gw, &agent, &did, &format!("/a2a/events?session={key}"), &[("last-event-id", last)]) {
        Ok(r) => r,
        Err(e) => {
            return super::error(a2a_core::error::A2aError::with_message(
                a2a_core::error::ErrorCode::INTERNAL_ERROR,
                e,
            ));
        }
    };
    let resp = match gw.kept.upstream.send_within(req, TIMEOUT).await {
        Ok(r) => r,
        Err(e) => {
            return super::error(a2a_core::error::A2aError::with_message(
                a2a_core::error::ErrorCode::AGENT_UNAVAILABLE,
                e.to_string(),
            ));
        }
    };
    let status = resp.status();
    let sse = resp.headers().get(header::CONTENT_TYPE).is_some_and(|v| v.as_bytes().starts_with(b"text/event-stream"));
    let mut out = Response::new(Body::new(resp.into_body()));
    *out.status_mut() = status;
    let ct = if sse { "text/event-stream" } else { "application/json" };
    super::headers(&mut out, ct, super::CSP);
    out
}
