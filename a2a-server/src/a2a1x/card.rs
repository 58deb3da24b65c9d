//! The A2A 1.0 Agent Card (BR-3, BR-4) and its signature (BR-5).

use std::sync::Arc;

use a2a_core::a2a1x::{self, BINDING_HTTP_JSON, BINDING_JSONRPC, PROTOCOL_VERSION};
use a2a_core::capability::{AuthRequirement, CapabilityDeclaration};
use a2a_core::keys::SigningKey;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use serde_json::{Map, Value, json};

use super::Inner;
use crate::engine::{Capability, Engine};

/// Most origins whose signed card is kept (the card names its origin, BR-3).
const MAX_CACHED_CARDS: usize = 16;

/// The capabilities a 1.x caller can meet: all but `did_auth` ones (BR-4).
pub(crate) fn skills(engine: &Engine) -> Vec<&Arc<Capability>> {
    engine.caps.iter().filter(|c| c.decl.auth_requirement != AuthRequirement::DidAuth).collect()
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

/// The unsigned card for `origin`.
pub(crate) fn card(inner: &Inner, origin: &str) -> Value {
    let engine = &inner.app.engine;
    let name = inner.app.agent_name.clone().unwrap_or_else(|| engine.did.clone());
    render_card(&CardSource {
        name: &name,
        did: &engine.did,
        origin,
        capabilities: engine.caps.iter().map(|c| &c.decl).collect(),
        chooses_by_schema: true,
        default_skill: inner.opts.default_skill.as_deref(),
    })
}

/// The card for `origin`, signed when the bridge has a key (BR-5), as bytes; cached per origin.
pub(crate) fn card_bytes(inner: &Inner, origin: &str) -> Bytes {
    if let Some(b) = inner.cards.lock().unwrap_or_else(std::sync::PoisonError::into_inner).get(origin) {
        return b.clone();
    }
    let mut card = card(inner, origin);
    if let Some((key_id, key)) = &inner.opts.signing_key {
        sign_card_with(&mut card, &inner.app.engine.did, key_id, key);
    }
    let bytes = Bytes::from(serde_json::to_vec(&card).unwrap_or_default());
    let mut cards = inner.cards.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if cards.len() >= MAX_CACHED_CARDS {
        cards.clear();
    }
    cards.insert(origin.to_owned(), bytes.clone());
    bytes
}

/// `GET /.well-known/agent-card.json` (BR-3).
pub(crate) async fn serve(State(inner): State<Arc<Inner>>, headers: HeaderMap) -> Response {
    let body = card_bytes(&inner, &inner.origin(&headers));
    let mut resp = (StatusCode::OK, body).into_response();
    let h = resp.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    h.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, HeaderValue::from_static("*"));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("max-age=300"));
    h.insert("a2a-version", HeaderValue::from_static(PROTOCOL_VERSION));
    resp
}
