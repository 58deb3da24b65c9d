//! The A2A 1.x bridge's protocol pieces that the agent's bridge (`a2a_server::a2a1x`) and the gateway's (which
//! translates in front of many agents, BR-20) share: the JSON-RPC envelope, the error mapping ([`error`]), the
//! request checks (version, header limits, sender), the body reader, the `ListTasks` query and the Agent Card.

pub mod error;

use a2a_core::a2a1x::{
    self, BINDING_HTTP_JSON, BINDING_JSONRPC, ListTasksRequest, PROTOCOL_VERSION, TaskState, method,
};
use a2a_core::capability::{AuthRequirement, CapabilityDeclaration};
use a2a_core::did::Did;
use a2a_core::error::ErrorCode;
use a2a_core::headers as h;
use a2a_core::keys::SigningKey;
use axum::body::Body;
use axum::http::{HeaderMap, header};
use bytes::Bytes;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value, json};

use crate::body::BodyError;
use error::{BridgeError, Kind};

pub use a2a_core::a2a1x::{bridge_asked_in, bridge_to_at};

/// The anonymous sender of 1.x requests without `A2A-Sender-ID` (BR-10).
pub const ANONYMOUS_SENDER: &str = "did:web:a2a1x.anonymous.invalid";

/// The origin for a request: the configured URL, or `http://` and the `Host` header (`http://localhost` without).
pub fn origin_of(public_url: Option<&str>, headers: &HeaderMap) -> String {
    origin_of_host(public_url, headers.get(axum::http::header::HOST).map(axum::http::HeaderValue::as_bytes))
}

/// [`origin_of`] from the raw `Host` value (`None`: absent).
pub fn origin_of_host(public_url: Option<&str>, host: Option<&[u8]>) -> String {
    if let Some(u) = public_url {
        return u.to_owned();
    }
    let host = host
        .and_then(|v| std::str::from_utf8(v).ok())
        .filter(|h| !h.is_empty() && h.bytes().all(|b| b.is_ascii_alphanumeric() || b".-:[]".contains(&b)))
        .unwrap_or("localhost");
    format!("http://{host}")
}

/// Whether a request's `A2A-Bridges` (a comma-separated list of binding names, in any number of headers) lists
/// `a2a1x` (BR-17).
pub fn bridge_asked(headers: &HeaderMap) -> bool {
    bridge_asked_in(headers.get_all("a2a-bridges").iter().map(axum::http::HeaderValue::as_bytes))
}

/// Whether `did` is a valid did:web DID (for `A2A-Sender-ID` on 1.x requests).
fn is_did(did: &str) -> bool {
    Did::parse(did).is_ok()
}

/// BR-2: `A2A-Version` absent or `1.0` (a patch part ignored).
pub fn check_version(headers: &HeaderMap) -> Result<(), BridgeError> {
    let Some(v) = headers.get(h::A2A_VERSION) else { return Ok(()) };
    let v = v.to_str().unwrap_or("").trim();
    let mut it = v.split('.');
    let ok = matches!((it.next(), it.next()), (Some("1"), Some("0")))
        && it.next().is_none_or(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
        && it.next().is_none();
    if ok {
        Ok(())
    } else {
        Err(BridgeError::new(
            Kind::Version,
            format!(
                "this endpoint speaks A2A {}; the request asked for A2A-Version {v:?} (the native protocol {} is served at /a2a)",
                PROTOCOL_VERSION,
                a2a_core::PROTOCOL_VERSION
            ),
        ))
    }
}

/// The header limits of §13 on a 1.x request (`431`, `headers_too_large`).
pub fn check_headers(headers: &HeaderMap, max_headers: usize, max_header_bytes: usize) -> Result<(), BridgeError> {
    let bytes: usize = headers.iter().map(|(k, v)| k.as_str().len() + v.len() + 4).sum();
    if headers.len() > max_headers || bytes > max_header_bytes {
        let mut e = BridgeError::params(format!(
            "the request has {} headers and {bytes} bytes of headers; the limits are {max_headers} headers and \
             {max_header_bytes} bytes",
            headers.len(),
        ));
        e.code = Some(ErrorCode::HEADERS_TOO_LARGE);
        e.http_status = 431;
        return Err(e);
    }
    Ok(())
}

/// BR-10: the sender of a 1.x request: `A2A-Sender-ID` when it is a did:web DID, else the anonymous sender.
pub fn sender_of(headers: &HeaderMap) -> Result<String, BridgeError> {
    match headers.get(h::A2A_SENDER_ID).and_then(|v| v.to_str().ok()).map(str::trim) {
        None => Ok(ANONYMOUS_SENDER.to_owned()),
        Some(s) if is_did(s) => Ok(s.to_owned()),
        Some(s) => {
            let mut e = BridgeError::new(
                Kind::InvalidRequest,
                format!("A2A-Sender-ID {s:?} is not a valid did:web DID; send a DID or omit the header"),
            );
            e.code = Some(ErrorCode::INVALID_SENDER);
            Err(e)
        }
    }
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

/// The `ListTasksRequest` of `GET /a2a1x/tasks?...` (`contextId`, `status`, `pageSize`, `pageToken`; other
/// parameters are ignored).
pub fn list_query(query: &str) -> Result<ListTasksRequest, BridgeError> {
    let mut req = ListTasksRequest::default();
    for (k, v) in url::form_urlencoded::parse(query.as_bytes()) {
        let number =
            || v.parse::<u32>().map_err(|_| BridgeError::params(format!("{k} must be a non-negative integer")));
        match k.as_ref() {
            "contextId" => req.context_id = Some(v.to_string()),
            "pageToken" => req.page_token = Some(v.to_string()),
            "pageSize" => req.page_size = Some(number()?),
            "status" => {
                req.status = Some(
                    serde_json::from_value::<TaskState>(json!(v))
                        .map_err(|_| BridgeError::params(format!("status {v:?} is not a TaskState name")))?,
                );
            }
            _ => {}
        }
    }
    Ok(req)
}

fn skill(d: &CapabilityDeclaration) -> Value {
    let mut tags = vec![json!("a2a-handshake"), json!(format!("auth:{}", d.auth_requirement.as_str()))];
    tags.extend(d.region_restriction.iter().map(|r| json!(format!("region:{r}"))));
    let mut s = Map::new();
    s.insert("id".into(), json!(d.name));
    s.insert("name".into(), json!(d.name));
    if !d.description.is_empty() {
        s.insert("description".into(), json!(d.description));
    }
    s.insert("tags".into(), Value::Array(tags));
    s.insert("inputModes".into(), json!(["application/json"]));
    s.insert("outputModes".into(), json!(["application/json"]));
    Value::Object(s)
}

/// What an Agent Card is made of (BR-3): an agent's, or a gateway's in front of many agents (BR-20).
pub struct CardSource<'a> {
    /// The card's `name` (the DID when there is no name).
    pub name: &'a str,
    /// The DID named by the handshake extension.
    pub did: &'a str,
    /// The origin the interfaces are at (`https://agent.example.com`).
    pub origin: &'a str,
    /// The capabilities, in order; those a 1.x caller cannot meet (`did_auth`, BR-4) are left out of the card.
    pub capabilities: Vec<&'a CapabilityDeclaration>,
    /// Whether a message that names no skill goes to the only skill whose input schema accepts it (BR-27, an
    /// agent's bridge); the card then says so, with the default skill if there is one.
    pub chooses_by_schema: bool,
    /// The skill a message that names none goes to otherwise (BR-27).
    pub default_skill: Option<&'a str>,
}

/// The unsigned A2A 1.0 Agent Card of `src` (BR-3, BR-4).
pub fn render_card(src: &CardSource<'_>) -> Value {
    let skills: Vec<&CapabilityDeclaration> =
        src.capabilities.iter().copied().filter(|d| d.auth_requirement != AuthRequirement::DidAuth).collect();
    let origin = src.origin;
    let mut schemes = Map::new();
    if skills.iter().any(|d| d.auth_requirement == AuthRequirement::ApiKey) {
        schemes.insert("apiKey".into(), json!({"apiKeySecurityScheme": {"location": "header", "name": "A2A-Api-Key"}}));
    }
    if skills.iter().any(|d| d.auth_requirement == AuthRequirement::Oauth2) {
        schemes.insert("bearer".into(), json!({"httpAuthSecurityScheme": {"scheme": "Bearer", "bearerFormat": "JWT"}}));
    }
    let mut card = json!({
        "name": src.name,
        "description": format!(
            "An agent of the A2A semantic-handshake protocol {} ({}), bridged to A2A {PROTOCOL_VERSION}: every task \
             runs through its schema-checked NEGOTIATE / EXECUTE / CONFIRM / RESULT.",
            a2a_core::PROTOCOL_VERSION, src.did),
        "version": env!("CARGO_PKG_VERSION"),
        "supportedInterfaces": [
            {"url": format!("{origin}/a2a1x/jsonrpc"), "protocolBinding": BINDING_JSONRPC, "protocolVersion": PROTOCOL_VERSION},
            {"url": format!("{origin}/a2a1x"), "protocolBinding": BINDING_HTTP_JSON, "protocolVersion": PROTOCOL_VERSION},
        ],
        "capabilities": {
            "streaming": true,
            "extensions": [{
                "uri": format!("urn:a2a-handshake:{}", a2a_core::PROTOCOL_VERSION),
                "description": "This agent also speaks the A2A semantic-handshake protocol (DID identity, signed messages, schema negotiation) at params.endpoint.",
                "params": {"did": src.did, "endpoint": format!("{origin}/a2a"),
                           "capabilities": format!("{origin}/a2a/capabilities")},
            }],
        },
        "defaultInputModes": ["application/json", "text/plain"],
        "defaultOutputModes": ["application/json"],
        "skills": skills.iter().map(|d| skill(d)).collect::<Vec<_>>(),
    });
    if !schemes.is_empty() {
        card["securitySchemes"] = Value::Object(schemes);
    }
    // BR-27: how a message that names no skill is routed, in words (for people and chat UIs) and in the handshake
    // extension's params (for programs).
    if src.chooses_by_schema && skills.len() > 1 {
        let mut how = " A message names its skill in metadata.skill (the message's or the request's). Without one it \
                       goes to the only skill whose input schema accepts its payload (one data part; or one text part, \
                       as {\"text\": ...} or as the one string member a skill requires)"
            .to_owned();
        let mut order = vec![json!("metadata.skill"), json!("input_schema")];
        match src.default_skill {
            Some(d) => {
                how.push_str(&format!(", else to the default skill {d}."));
                order.push(json!("default_skill"));
                card["capabilities"]["extensions"][0]["params"]["default_skill"] = json!(d);
            }
            None => how.push_str("; otherwise it is refused with the list of skills."),
        }
        if let Some(d) = card["description"].as_str().map(|d| format!("{d}{how}")) {
            card["description"] = json!(d);
        }
        card["capabilities"]["extensions"][0]["params"]["skill_selection"] = Value::Array(order);
    }
    card
}

/// Signs `card` in place with `key`, the key `key_id` of `did`'s document (BR-5); a card that cannot be signed is
/// left unsigned, with a warning.
pub fn sign_card_with(card: &mut Value, did: &str, key_id: &str, key: &SigningKey) {
    match a2a1x::sign_card(card, &format!("{did}#{key_id}"), key) {
        Ok(sig) => card["signatures"] = json!([sig]),
        Err(e) => tracing::warn!(error = %e, "cannot sign the Agent Card; serving it unsigned"),
    }
}
