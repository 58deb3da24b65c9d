//! The gateway's Agent Card (BR-20): the card of a2a-server's bridge (BR-3, BR-4) made of the union of the agents'
//! capabilities, under the gateway's DID and name, its interfaces at the gateway, signed with the gateway's key
//! (BR-5).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use a2a_runtime::a2a1x::{CardSource, render_card, sign_card_with};
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;

use super::Bridge;

/// Most origins whose signed card is kept (the card names its origin, BR-3).
const MAX_CACHED_CARDS: usize = 16;

/// Signed cards by origin, each with the unsigned card it signs: a card is signed again only when the union of the
/// agents' capabilities changed (an unauthenticated endpoint must not cost a signature per request).
#[derive(Default)]
pub(crate) struct Cards(Mutex<HashMap<String, (Vec<u8>, Bytes)>>);

/// The gateway's card for `origin`, as bytes.
async fn card_bytes(b: &Bridge, origin: &str) -> Bytes {
    let gw = &b.gw;
    let (decls, _) = crate::discover::union(&gw.agents).await;
    let name = gw.name.clone().unwrap_or_else(|| gw.did.clone());
    let mut card = render_card(&CardSource {
        name: &name,
        did: &gw.did,
        origin,
        capabilities: decls.iter().collect(),
        chooses_by_schema: true,
        default_skill: gw.default_skill.as_deref().filter(|d| decls.iter().any(|c| c.name == *d)),
    });
    let unsigned = serde_json::to_vec(&card).unwrap_or_default();
    let mut cards = b.cards.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some((u, signed)) = cards.get(origin)
        && *u == unsigned
    {
        return signed.clone();
    }
    drop(cards);
    let id = &gw.edge.identity;
    if let Some(key) = &id.key {
        sign_card_with(&mut card, &gw.did, &id.key_id, key);
    }
    let bytes = Bytes::from(serde_json::to_vec(&card).unwrap_or_default());
    cards = b.cards.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if cards.len() >= MAX_CACHED_CARDS {
        cards.clear();
    }
    cards.insert(origin.to_owned(), (unsigned, bytes.clone()));
    bytes
}

/// `GET /.well-known/agent-card.json` at the gateway (BR-3, BR-20).
pub(crate) async fn serve(State(b): State<Arc<Bridge>>, headers: HeaderMap) -> Response {
    let body = card_bytes(&b, &super::origin(&headers)).await;
    let mut resp = (StatusCode::OK, body).into_response();
    let h = resp.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    h.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, HeaderValue::from_static("*"));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("max-age=300"));
    h.insert("a2a-version", HeaderValue::from_static(a2a_core::a2a1x::PROTOCOL_VERSION));
    resp
}
