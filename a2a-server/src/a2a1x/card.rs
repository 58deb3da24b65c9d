//! The A2A 1.0 Agent Card (BR-3, BR-4) and its signature (BR-5).

use std::sync::Arc;

use a2a_core::a2a1x::PROTOCOL_VERSION;
use a2a_core::capability::AuthRequirement;
use a2a_runtime::a2a1x::{CardSource, render_card, sign_card_with};
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use serde_json::Value;

use super::Inner;
use crate::engine::{Capability, Engine};

/// Most origins whose signed card is kept (the card names its origin, BR-3).
const MAX_CACHED_CARDS: usize = 16;

/// The capabilities a 1.x caller can meet: all but `did_auth` ones (BR-4).
pub(crate) fn skills(engine: &Engine) -> Vec<&Arc<Capability>> {
    engine.caps.iter().filter(|c| c.decl.auth_requirement != AuthRequirement::DidAuth).collect()
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
