//! `ListTasks` at the gateway (BR-23): the caller's tasks at each agent in turn (each agent's newest first), paged
//! with a token that names the agent and the agent's own token.

use std::sync::Arc;

use a2a_core::a2a1x::{ListTasksRequest, ListTasksResponse};
use a2a_core::capability::AuthRequirement;
use a2a_core::jws::{base64url_decode, base64url_encode};
use a2a_runtime::a2a1x::ANONYMOUS_SENDER;
use a2a_runtime::a2a1x::error::BridgeError;
use axum::body::Body;
use bytes::Bytes;
use http::{Method, Response, StatusCode};
use serde_json::{Value, json};

use super::Binding;
use super::forward::{Call, read_whole, send_raw};
use crate::Inner;
use crate::agents::Agent;

/// Default and largest page (BR-9).
const DEFAULT_PAGE: u32 = 50;
const MAX_PAGE: u32 = 100;

/// The agents that serve 1.x skills, in the gateway's order.
async fn bridge_agents(gw: &Inner) -> Vec<Arc<Agent>> {
    let mut out = Vec::new();
    for a in gw.agents.listed().iter() {
        if let Ok(info) = gw.agents.info(a).await
            && info.doc.capabilities.iter().any(|d| d.auth_requirement != AuthRequirement::DidAuth)
        {
            out.push(a.clone());
        }
    }
    out
}

fn encode_token(agent: &Agent, token: &str) -> String {
    base64url_encode(format!("{}\n{token}", agent.endpoint.url))
}

/// The position of the agent a token names, and the agent's own token.
fn decode_token(token: &str, agents: &[Arc<Agent>]) -> Result<(usize, Option<String>), BridgeError> {
    let bad = || BridgeError::params(format!("pageToken {token:?} is not one this gateway gave (or its agent left)"));
    let raw = base64url_decode(token).map_err(|_| bad())?;
    let text = String::from_utf8(raw).map_err(|_| bad())?;
    let (url, inner) = text.split_once('\n').ok_or_else(bad)?;
    let i = agents.iter().position(|a| a.endpoint.url == url).ok_or_else(bad)?;
    Ok((i, Some(inner.to_owned()).filter(|t| !t.is_empty())))
}

/// What one agent answered: its page, or its refusal to pass on as it is.
enum Page {
    Tasks(ListTasksResponse),
    Refused(Response<Body>),
}

/// Asks `agent` for `size` of the caller's tasks from `token`, in the caller's binding.
async fn ask(
    call: &Call<'_>,
    agent: &Arc<Agent>,
    req: &ListTasksRequest,
    size: u32,
    token: Option<String>,
) -> Result<Page, BridgeError> {
    let sub = ListTasksRequest {
        context_id: req.context_id.clone(),
        status: req.status,
        page_size: Some(size),
        page_token: token,
    };
    let (method, target, body) = match call.binding {
        Binding::JsonRpc(id) => {
            let body =
                json!({"jsonrpc": "2.0", "id": id, "method": a2a_core::a2a1x::method::LIST_TASKS, "params": sub});
            (Method::POST, call.target.to_owned(), Bytes::from(serde_json::to_vec(&body).unwrap_or_default()))
        }
        Binding::HttpJson => {
            let mut q = url::form_urlencoded::Serializer::new(String::new());
            if let Some(c) = &sub.context_id {
                q.append_pair("contextId", c);
            }
            if let Some(s) = sub.status {
                q.append_pair("status", s.as_str());
            }
            q.append_pair("pageSize", &size.to_string());
            if let Some(t) = &sub.page_token {
                q.append_pair("pageToken", t);
            }
            (Method::GET, format!("/a2a1x/tasks?{}", q.finish()), Bytes::new())
        }
    };
    let resp = send_raw(call, agent, &method, &target, body).await.map_err(|e| {
        BridgeError::from(a2a_core::error::A2aError::with_message(
            a2a_core::error::ErrorCode::AGENT_UNAVAILABLE,
            format!("the agent {} could not be reached: {e}", agent.label),
        ))
    })?;
    let status = resp.status();
    let (parts, body) = resp.into_parts();
    let bytes = read_whole(call.gw, agent, body).await?;
    let v: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    let page = call.binding.result_of(&v).filter(|_| status == StatusCode::OK && v.get("error").is_none());
    match page.and_then(|p| serde_json::from_value::<ListTasksResponse>(p.clone()).ok()) {
        Some(p) => Ok(Page::Tasks(p)),
        None => {
            let mut r = Response::from_parts(parts, Body::from(bytes));
            r.headers_mut().remove(http::header::CONTENT_LENGTH);
            r.headers_mut().remove(http::header::TRANSFER_ENCODING);
            Ok(Page::Refused(r))
        }
    }
}

/// `ListTasks` (BR-23): the page, or the first agent's refusal as it answered it.
pub(crate) async fn list(call: &Call<'_>, req: &ListTasksRequest) -> Result<Response<Body>, BridgeError> {
    let page = req.page_size.filter(|p| *p > 0).unwrap_or(DEFAULT_PAGE);
    if page > MAX_PAGE {
        return Err(BridgeError::params(format!("pageSize {page} is above the maximum of {MAX_PAGE}")));
    }
    if call.sender == ANONYMOUS_SENDER && req.context_id.as_deref().is_none_or(str::is_empty) {
        return Err(BridgeError::params(
            "an anonymous caller lists its tasks by contextId; give contextId, or send A2A-Sender-ID with your DID",
        ));
    }
    let agents = bridge_agents(call.gw).await;
    let (start, mut token) = match req.page_token.as_deref().filter(|t| !t.is_empty()) {
        None => (0, None),
        Some(t) => decode_token(t, &agents)?,
    };
    let mut tasks = Vec::new();
    let (mut total, mut next) = (0u32, String::new());
    for agent in agents.iter().skip(start) {
        let filled = tasks.len() >= page as usize || !next.is_empty();
        // Once the page is full, an agent is asked only whether it has tasks (for totalSize and the next token).
        let size = if filled { 1 } else { page - tasks.len() as u32 };
        let got = match ask(call, agent, req, size, token.take()).await? {
            Page::Tasks(p) => p,
            Page::Refused(r) => return Ok(r),
        };
        total = total.saturating_add(got.total_size);
        if filled {
            if next.is_empty() && got.total_size > 0 {
                next = encode_token(agent, "");
            }
            continue;
        }
        tasks.extend(got.tasks);
        if !got.next_page_token.is_empty() {
            next = encode_token(agent, &got.next_page_token);
        }
    }
    let out = ListTasksResponse { tasks, next_page_token: next, page_size: page, total_size: total };
    Ok(call.binding.ok(serde_json::to_value(&out).unwrap_or_default()))
}
