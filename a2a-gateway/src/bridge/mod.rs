//! The A2A 1.x bridge at the gateway (`spec/PROTOCOL.md` §20.10, BR-20..BR-26): the gateway's own signed Agent Card
//! (the union of its agents' skills, BR-20), and the 1.x operations on both bindings of §20.1, each forwarded to the
//! bridge (BR-1) of an agent behind the gateway:
//!
//! - `SendMessage` and `SendStreamingMessage` go to a healthy agent offering the message's skill (BR-7; for a message
//!   that names none, the skill an agent's bridge would choose over the gateway's card, BR-29; the agent chosen as a
//!   NEGOTIATE's agent is, GW-6, GW-7); the task id in the answer (the first event of a stream) is recorded as the
//!   execution's route before the answer is passed on (BR-21);
//! - `GetTask`, `CancelTask` and `SubscribeToTask` follow their task to that agent through the routes every gateway
//!   on one Redis shares (GW-2, BR-21); `ListTasks` pages through every agent (BR-23);
//! - streams pass through as they arrive, never buffered (BR-22); the edge checks of GW-10 apply (BR-24) and every
//!   refusal is an A2A 1.0 error with the reasons of BR-14;
//! - a NEGOTIATE through the gateway that asks for the bridge (`A2A-Bridges: a2a1x`) is answered with a `bridge_to`
//!   naming the gateway's bridge, never an agent's ([`negotiate_offer`], [`set_bridge_to`], BR-26).

mod card;
mod forward;
mod list;

use std::sync::Arc;
use std::time::{Duration, Instant};

use a2a_core::a2a1x::{ListTasksRequest, SendMessageRequest, TaskIdRequest, method, select};
use a2a_core::capability::{AuthRequirement, CapabilityDeclaration};
use a2a_core::error::{A2aError, ErrorCode};
use a2a_core::execution_id::ExecutionId;
use a2a_core::negotiation::AgreedSchema;
use a2a_runtime::a2a1x::error::{BridgeError, Kind as ErrKind};
use a2a_runtime::a2a1x::{self as bridge1x};
use axum::body::Body;
use bytes::Bytes;
use http::{HeaderMap, HeaderName, HeaderValue, Method, Request, Response, StatusCode, header};
use serde_json::{Value, json};

use crate::Inner;
use crate::audit::AuditRecord;
use crate::edge::Signed;
use crate::metrics::Step;

/// The bridge's state: the gateway, and its signed cards.
pub(crate) struct Bridge {
    gw: Arc<Inner>,
    cards: card::Cards,
}

/// Whether `path` is one of the bridge's: those of [`router`].
pub(crate) fn serves(path: &str) -> bool {
    path == a2a_core::a2a1x::AGENT_CARD_PATH || path == "/a2a1x" || path.starts_with("/a2a1x/")
}

/// The card and the 1.x endpoints of the gateway (BR-20), to mount before the gateway's own fallback.
pub(crate) fn router(gw: Arc<Inner>) -> axum::Router {
    let b = Arc::new(Bridge { gw, cards: card::Cards::default() });
    axum::Router::new()
        .route(a2a_core::a2a1x::AGENT_CARD_PATH, axum::routing::get(card::serve))
        .route("/a2a1x", axum::routing::any(serve))
        .route("/a2a1x/{*rest}", axum::routing::any(serve))
        .with_state(b)
}

/// The binding a request came on, which is how it is answered.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Binding {
    /// JSON-RPC 2.0, with the request's `id`.
    JsonRpc(Value),
    /// HTTP+JSON.
    HttpJson,
}

impl Binding {
    /// The answer to a refused request (BR-14): JSON-RPC errors are HTTP 200.
    fn error(&self, e: &BridgeError) -> Response<Body> {
        match self {
            Binding::JsonRpc(id) => json_response(StatusCode::OK, &bridge1x::envelope(id, Err(e.clone()))),
            Binding::HttpJson => {
                let status = StatusCode::from_u16(e.http_status).unwrap_or(StatusCode::BAD_REQUEST);
                let mut r = json_response(status, &e.http_body());
                if matches!(e.http_status, 429 | 503) {
                    r.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
                }
                r
            }
        }
    }

    /// A successful answer.
    fn ok(&self, v: Value) -> Response<Body> {
        match self {
            Binding::JsonRpc(id) => json_response(StatusCode::OK, &bridge1x::envelope(id, Ok(v))),
            Binding::HttpJson => json_response(StatusCode::OK, &v),
        }
    }

    /// The `result` of an agent's answer in this binding: the JSON-RPC `result`, or the HTTP+JSON body.
    fn result_of<'a>(&self, v: &'a Value) -> Option<&'a Value> {
        match self {
            Binding::JsonRpc(_) => v.get("result"),
            Binding::HttpJson => Some(v),
        }
    }
}

fn json_response(status: StatusCode, v: &Value) -> Response<Body> {
    let mut r = Response::new(Body::from(serde_json::to_vec(v).unwrap_or_default()));
    *r.status_mut() = status;
    r.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    r
}

/// An error of the handshake (§12) as a 1.x error (BR-14).
fn from_a2a(e: A2aError) -> BridgeError {
    BridgeError::from(e)
}

/// What a request is about, for metrics and the audit record.
#[derive(Default)]
pub(crate) struct Ctx {
    sender: Option<String>,
    capability: Option<String>,
    task_id: Option<String>,
    agent: Option<Arc<crate::agents::Agent>>,
    /// The §12 code (or the A2A reason) of a refusal.
    code: Option<String>,
}

/// What the caller asks for, once its binding is read.
enum Op {
    /// `SendMessage` (`stream: false`) or `SendStreamingMessage`.
    Send { req: SendMessageRequest, stream: bool },
    /// `GetTask`, `CancelTask`, `SubscribeToTask`: forwarded as they are to the task's agent.
    Task { id: String },
    /// `ListTasks`.
    List { req: ListTasksRequest },
}

/// Serves one 1.x request.
async fn serve(axum::extract::State(b): axum::extract::State<Arc<Bridge>>, req: Request<Body>) -> Response<Body> {
    let started = Instant::now();
    let cors = req.headers().contains_key(header::ORIGIN);
    let mut ctx = Ctx::default();
    let mut binding = Binding::HttpJson;
    let mut resp = match process(&b, &mut ctx, &mut binding, req).await {
        Ok(r) => r,
        Err(e) => {
            let code = e.code.as_ref().map_or_else(|| format!("{:?}", e.kind), |c| c.as_str().to_owned());
            if ctx.agent.is_none() {
                b.gw.metrics.rejected(&code);
            }
            ctx.code = Some(code);
            binding.error(&e)
        }
    };
    let hs = resp.headers_mut();
    hs.insert(HeaderName::from_static("a2a-version"), HeaderValue::from_static(a2a_core::a2a1x::PROTOCOL_VERSION));
    if cors && !hs.contains_key(header::ACCESS_CONTROL_ALLOW_ORIGIN) {
        hs.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, HeaderValue::from_static("*"));
    }
    let gw = &b.gw;
    let outcome = match &ctx.code {
        None if resp.status().is_success() => "ok",
        None => "other",
        Some(c) => crate::metrics::bounded(c),
    };
    let agent_label = ctx.agent.as_ref().map_or("none", |a| a.label.as_str());
    let elapsed = started.elapsed();
    gw.metrics.request(Step::Other, agent_label, outcome, elapsed.as_secs_f64());
    if let Some(audit) = &gw.audit {
        audit.record(AuditRecord {
            time_ms: a2a_runtime::store::now_ms(),
            sender_id: ctx.sender.unwrap_or_default(),
            capability: ctx.capability,
            negotiation_id: None,
            execution_id: ctx.task_id,
            agent: ctx.agent.map(|a| a.endpoint.url.clone()).unwrap_or_default(),
            step: "a2a1x".to_owned(),
            outcome: ctx.code.unwrap_or_else(|| outcome.to_owned()),
            latency_us: elapsed.as_micros() as u64,
            verified: false,
            status: Some(resp.status().as_u16()),
            gateway: Some(gw.instance.clone()),
            execution_status: None,
            trace_id: None,
        });
    }
    resp
}

/// The endpoints of §20.1 below `/a2a1x`, by method and path.
enum Endpoint {
    JsonRpc,
    Send { stream: bool },
    List,
    Task { segment: String },
}

fn classify(method: &Method, path: &str) -> Result<Endpoint, BridgeError> {
    let wrong = |allow: &str| {
        let mut e = BridgeError::new(ErrKind::MethodNotFound, format!("this endpoint accepts {allow}"));
        e.code = Some(ErrorCode::METHOD_NOT_ALLOWED);
        e.http_status = 405;
        e
    };
    let post = |ep| if *method == Method::POST { Ok(ep) } else { Err(wrong("POST")) };
    match path {
        "/a2a1x/jsonrpc" => post(Endpoint::JsonRpc),
        "/a2a1x/message:send" => post(Endpoint::Send { stream: false }),
        "/a2a1x/message:stream" => post(Endpoint::Send { stream: true }),
        "/a2a1x/tasks" if *method == Method::GET => Ok(Endpoint::List),
        "/a2a1x/tasks" => Err(wrong("GET")),
        p => match p.strip_prefix("/a2a1x/tasks/").filter(|s| !s.is_empty() && !s.contains('/')) {
            Some(s) => Ok(Endpoint::Task { segment: s.to_owned() }),
            None => Err(BridgeError::new(
                ErrKind::MethodNotFound,
                "no A2A 1.x operation at this path; see the gateway's Agent Card (/.well-known/agent-card.json): \
                 /a2a1x/jsonrpc, /a2a1x/message:send, /a2a1x/message:stream, /a2a1x/tasks, /a2a1x/tasks/{id}, \
                 /a2a1x/tasks/{id}:cancel, /a2a1x/tasks/{id}:subscribe",
            )),
        },
    }
}

async fn process(
    b: &Bridge,
    ctx: &mut Ctx,
    binding: &mut Binding,
    req: Request<Body>,
) -> Result<Response<Body>, BridgeError> {
    let gw = &b.gw;
    let (parts, body) = req.into_parts();
    let endpoint = classify(&parts.method, parts.uri.path()).inspect_err(|e| {
        if e.http_status == 404 {
            gw.metrics.probe();
            tracing::debug!(path = %parts.uri.path(), method = %parts.method, "probe of an unknown A2A 1.x path answered at the edge");
        }
    })?;
    if let Endpoint::JsonRpc = endpoint {
        // Errors before the request's id is read are answered with `id: null` (BR-14).
        *binding = Binding::JsonRpc(Value::Null);
    }
    let headers = &parts.headers;
    // GW-23: the body counts in the process's budget as it arrives (past it: `503 overloaded`, `Retry-After`), and
    // until the request is answered, as on the proxy's paths (once: a body the HTTP/1.1 loop read is counted there).
    let budget = gw.body_budget.for_request(&parts.extensions);
    let (bytes, _held) = if parts.method == Method::POST {
        let timeout = Duration::from_millis(gw.limits.body_read_timeout_ms);
        let (bytes, held) =
            bridge1x::read_body_within(headers, body, gw.limits.max_body_bytes, timeout, budget).await?;
        (bytes, Some(held))
    } else {
        (Bytes::new(), None)
    };
    let op = match endpoint {
        Endpoint::JsonRpc => {
            let r = bridge1x::parse_rpc(&bytes).map_err(|(id, e)| {
                *binding = Binding::JsonRpc(id);
                e
            })?;
            *binding = Binding::JsonRpc(r.id.clone());
            edge(gw, ctx, headers)?;
            rpc_op(r)?
        }
        Endpoint::Send { stream } => {
            edge(gw, ctx, headers)?;
            let v: Value = serde_json::from_slice(&bytes).map_err(|e| {
                BridgeError::new(ErrKind::Parse, format!("the request body is not well-formed JSON: {e}"))
            })?;
            Op::Send { req: bridge1x::params("the SendMessageRequest", v)?, stream }
        }
        Endpoint::List => {
            edge(gw, ctx, headers)?;
            Op::List { req: bridge1x::list_query(parts.uri.query().unwrap_or(""))? }
        }
        Endpoint::Task { segment } => {
            edge(gw, ctx, headers)?;
            task_op(&parts.method, &segment)?
        }
    };
    let sender = ctx.sender.clone().unwrap_or_default();
    let target = parts.uri.path_and_query().map_or_else(|| parts.uri.path().to_owned(), |p| p.as_str().to_owned());
    let call = forward::Call { gw, binding, headers, method: &parts.method, target: &target, sender: &sender };
    match op {
        Op::Send { req, stream } => send(b, ctx, &call, &req, stream, bytes).await,
        Op::Task { id } => {
            ctx.task_id = Some(id.clone());
            let (agent, route) = forward::task_route(gw, &id).await?;
            ctx.capability = Some(route.capability.to_string());
            let requirement = match gw.agents.info(&agent).await {
                Ok(info) => info.capability(&route.capability).map(|d| d.auth_requirement),
                Err(_) => None,
            };
            gw.edge.authorize(&sender, Signed::No, requirement, headers, false).map_err(from_a2a)?;
            ctx.agent = Some(agent.clone());
            let resp = forward::send_once(&call, &agent, bytes).await?;
            forward::pass_through(&agent, resp)
        }
        Op::List { req } => list::list(&call, &req).await,
    }
}

/// The edge of BR-24: header limits, version, sender (recorded in `ctx`), rate.
fn edge(gw: &Inner, ctx: &mut Ctx, headers: &HeaderMap) -> Result<(), BridgeError> {
    bridge1x::check_headers(headers, gw.limits.max_headers, gw.limits.max_header_bytes)?;
    bridge1x::check_version(headers)?;
    let sender = bridge1x::sender_of(headers)?;
    gw.edge.rate_limit(&sender).map_err(from_a2a)?;
    ctx.sender = Some(sender);
    Ok(())
}

/// The operation of a JSON-RPC request.
fn rpc_op(r: bridge1x::RpcRequest) -> Result<Op, BridgeError> {
    Ok(match r.method.as_str() {
        method::SEND_MESSAGE => Op::Send { req: bridge1x::params("SendMessage params", r.params)?, stream: false },
        method::SEND_STREAMING_MESSAGE => {
            Op::Send { req: bridge1x::params("SendStreamingMessage params", r.params)?, stream: true }
        }
        method::GET_TASK | method::CANCEL_TASK | method::SUBSCRIBE_TO_TASK => {
            let t: TaskIdRequest = bridge1x::params(&format!("{} params", r.method), r.params)?;
            Op::Task { id: t.id }
        }
        method::LIST_TASKS => Op::List { req: bridge1x::params("ListTasks params", r.params)? },
        m => return Err(bridge1x::method_error(m)),
    })
}

/// The operation of `/a2a1x/tasks/{segment}`: the id is read from the raw path as on RESULT (EID-12).
fn task_op(method: &Method, segment: &str) -> Result<Op, BridgeError> {
    let (seg, op) = if let Some(s) = segment.strip_suffix(":cancel") {
        (s, "cancel")
    } else if let Some(s) = segment.strip_suffix(":subscribe") {
        (s, "subscribe")
    } else {
        (segment, "get")
    };
    if !matches!((op, method), ("get", &Method::GET) | ("cancel", &Method::POST) | ("subscribe", _)) {
        return Err(BridgeError::new(
            ErrKind::MethodNotFound,
            format!(
                "{method} is not an operation on a task; GET /tasks/{{id}}, POST /tasks/{{id}}:cancel or \
                 /tasks/{{id}}:subscribe"
            ),
        ));
    }
    let id = ExecutionId::from_path_segment(seg).map_or_else(|_| seg.to_owned(), |i| i.as_str().to_owned());
    Ok(Op::Task { id })
}

/// The gateway's public origin, which its card (BR-20) and its `bridge_to` (BR-26) name: `http://` and the request's
/// `Host` (the gateway has no configured public URL).
pub(crate) fn origin(headers: &HeaderMap) -> String {
    bridge1x::origin_of(None, headers)
}

/// The `bridge_to` a NEGOTIATE answer through the gateway carries (BR-26): the gateway's own bridge, when the gateway
/// serves it (`gateway.bridge`), the request (its headers as forwarded, after any version translation) lists `a2a1x`
/// in `A2A-Bridges` and `capability` is a skill of the gateway's card; `None` otherwise (and then the answer carries
/// no `bridge_to` at all).
pub(crate) async fn negotiate_offer(
    gw: &Inner,
    headers: &impl crate::h1::head::Fields,
    capability: &str,
) -> Option<a2a_core::wire::BridgeTo> {
    if !gw.bridge || !bridge1x::bridge_asked_in(headers.field_all("a2a-bridges")) {
        return None;
    }
    if !skills(gw).await.iter().any(|d| d.name == capability) {
        return None;
    }
    Some(bridge1x::bridge_to_at(&bridge1x::origin_of_host(None, headers.field("host")), capability))
}

/// An agent's NEGOTIATE success answer with its `bridge_to` replaced by `offer` (removed when `None`), re-serialised;
/// `None` when there is nothing to change (no `bridge_to` and none to offer: the agent's bytes are passed on
/// untouched) or the answer is not a JSON object (passed on as it is: the caller refuses it as it would the agent's).
pub(crate) fn set_bridge_to(body: &[u8], offer: Option<&a2a_core::wire::BridgeTo>) -> Option<Bytes> {
    let mut v: Value = serde_json::from_slice(body).ok()?;
    let o = v.as_object_mut()?;
    match offer {
        Some(b) => {
            o.insert("bridge_to".to_owned(), serde_json::to_value(b).ok()?);
        }
        None => {
            o.remove("bridge_to")?;
        }
    }
    serde_json::to_vec(&v).ok().map(Bytes::from)
}

/// The skills a 1.x caller can meet through the gateway (BR-4, BR-20): the union of the agents' capabilities but
/// the `did_auth` ones, in the order of the gateway's capabilities document.
async fn skills(gw: &Inner) -> Vec<CapabilityDeclaration> {
    let (decls, _) = crate::discover::union(&gw.agents).await;
    decls.into_iter().filter(|d| d.auth_requirement != AuthRequirement::DidAuth).collect()
}

/// BR-7, BR-29 at the gateway: the message's skill, and whether the gateway chose it and must name it to the agent,
/// which may have other skills. A message that names none is routed by [`select::select`] over the gateway's card,
/// as an agent's bridge routes it over its own (BR-27).
fn skill_of(
    req: &SendMessageRequest,
    skills: &[CapabilityDeclaration],
    default_skill: Option<&str>,
) -> Result<(String, bool), BridgeError> {
    let names = || skills.iter().map(|d| d.name.as_str()).collect::<Vec<_>>().join(", ");
    match select::named_skill(req) {
        Some(n) if skills.iter().any(|d| d.name == n) => Ok((n.to_owned(), false)),
        None => {
            // The agent applies its own limits to the parts (BR-9); the gateway only reads what they carry.
            let content = select::content_of(&req.message, select::PartLimits::NONE).map_err(|e| match e {
                select::ContentError::File(m) => BridgeError::new(ErrKind::ContentType, m),
                select::ContentError::Params(m) => BridgeError::params(m),
            })?;
            let compiled: Vec<Option<AgreedSchema>> =
                skills.iter().map(|d| AgreedSchema::compile(&d.input_schema).ok()).collect();
            let candidates: Vec<select::Skill<'_>> = skills
                .iter()
                .zip(&compiled)
                .map(|(d, c)| select::Skill { name: &d.name, input_schema: &d.input_schema, compiled: c.as_ref() })
                .collect();
            let i = select::select(&content, &candidates, default_skill).map_err(BridgeError::params)?;
            Ok((skills[i].name.clone(), true))
        }
        Some(n) => {
            let mut e = BridgeError::params(format!(
                "no agent behind this gateway has a skill {n:?} that A2A 1.x can call; the skills are: {}",
                names()
            ));
            e.code = Some(ErrorCode::NO_MATCHING_CAPABILITY);
            Err(e)
        }
    }
}

/// Names `skill` in the request's `metadata.skill` (the JSON-RPC `params`, or the HTTP+JSON body).
fn name_skill(binding: &Binding, body: &[u8], skill: &str) -> Result<Bytes, BridgeError> {
    let mut v: Value = serde_json::from_slice(body)
        .map_err(|e| BridgeError::new(ErrKind::Parse, format!("the request body is not well-formed JSON: {e}")))?;
    let req = match binding {
        Binding::JsonRpc(_) => &mut v["params"],
        Binding::HttpJson => &mut v,
    };
    if !req.get("metadata").is_some_and(Value::is_object) {
        req["metadata"] = json!({});
    }
    req["metadata"]["skill"] = json!(skill);
    Ok(Bytes::from(serde_json::to_vec(&v).unwrap_or_default()))
}

/// `SendMessage` / `SendStreamingMessage` (BR-21): the agent is chosen by skill, the task's route recorded.
async fn send(
    b: &Bridge,
    ctx: &mut Ctx,
    call: &forward::Call<'_>,
    req: &SendMessageRequest,
    stream: bool,
    mut body: Bytes,
) -> Result<Response<Body>, BridgeError> {
    let gw = &b.gw;
    let skills = skills(gw).await;
    let (skill, implied) = skill_of(req, &skills, gw.default_skill.as_deref())?;
    ctx.capability = Some(skill.clone());
    if implied {
        body = name_skill(call.binding, &body, &skill)?;
    }
    let mut candidates = gw.agents.offering(&skill).await;
    candidates.retain(|(_, i)| i.capability(&skill).is_some_and(|d| d.auth_requirement != AuthRequirement::DidAuth));
    let requirement = candidates.first().and_then(|(_, i)| i.capability(&skill)).map(|d| d.auth_requirement);
    gw.edge.authorize(call.sender, Signed::No, requirement, call.headers, true).map_err(from_a2a)?;
    let idempotency = forward::idempotency_id(call.sender, &req.message.message_id);
    let (agent, resp) = forward::send_to_skill(call, &skill, &candidates, &idempotency, body).await?;
    ctx.agent = Some(agent.clone());
    let (resp, task_id) = forward::answer_send(call, &agent, &skill, stream, resp).await?;
    ctx.task_id = task_id;
    Ok(resp)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn offer() -> a2a_core::wire::BridgeTo {
        bridge1x::bridge_to_at("http://gw.example:8443", "submit_report")
    }

    #[test]
    fn set_bridge_to_replaces_removes_or_leaves_the_answer() {
        let agents = br#"{"negotiation_id":"n_1","bridge_to":{"binding":"a2a1x","protocol_version":"1.0","url":"http://10.0.0.5:9001/a2a1x/jsonrpc","skill":"submit_report"}}"#;
        let v: Value = serde_json::from_slice(&set_bridge_to(agents, Some(&offer())).expect("replaced")).expect("json");
        assert_eq!(v["bridge_to"]["url"], "http://gw.example:8443/a2a1x/jsonrpc");
        assert_eq!(v["bridge_to"]["agent_card"], "http://gw.example:8443/.well-known/agent-card.json");
        assert_eq!(v["negotiation_id"], "n_1");
        let v: Value = serde_json::from_slice(&set_bridge_to(agents, None).expect("removed")).expect("json");
        assert_eq!(v, json!({"negotiation_id": "n_1"}));
        // Nothing to change: the agent's bytes stay as they are.
        assert!(set_bridge_to(br#"{"negotiation_id":"n_1"}"#, None).is_none());
        // Escaped member names are the same member.
        let escaped = br#"{"negotiation_id":"n_1","bridge\u005fto":{}}"#;
        let v: Value = serde_json::from_slice(&set_bridge_to(escaped, None).expect("removed")).expect("json");
        assert_eq!(v, json!({"negotiation_id": "n_1"}));
        let v: Value =
            serde_json::from_slice(&set_bridge_to(br#"{"negotiation_id":"n_1"}"#, Some(&offer())).expect("added"))
                .expect("json");
        assert_eq!(v["bridge_to"]["skill"], "submit_report");
        // Not a JSON object: passed on as it is.
        assert!(set_bridge_to(b"not json", Some(&offer())).is_none());
        assert!(set_bridge_to(b"[1]", None).is_none());
    }
}
