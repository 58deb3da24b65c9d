//! Signed responses (`spec/PROTOCOL.md` INT-10): when the agent is given a signing key, every response to a request
//! whose `A2A-Sender-ID` is a valid DID carries `A2A-Signature`, signed by the agent for that requester (`aud`), for
//! the request's method and target and the response's status. A response with a body is signed `full_payload` (its
//! exact bytes), one without `header_only`.

use std::time::{SystemTime, UNIX_EPOCH};

use a2a_core::did::Did;
use a2a_core::headers as h;
use a2a_core::integrity::{self, Coverage, MessageParts};
use a2a_core::keys::SigningKey;
use axum::body::Body;
use axum::http::{HeaderName, HeaderValue};
use axum::response::Response;
use http_body_util::BodyExt;

/// The agent's key for signing its responses.
pub struct ResponseSigner {
    /// The id of the key in the agent's DID document.
    pub key_id: String,
    /// The key.
    pub key: SigningKey,
}

/// The request a response answers, as a signature names it.
pub struct Answered {
    /// The request's method.
    pub method: String,
    /// The request's target (path and query).
    pub target: String,
    /// The request's `A2A-Sender-ID`, when it has one.
    pub requester: Option<String>,
}

/// Signs `resp` (after every A2A header is set); an unsigned response is returned when the requester is not a valid
/// DID (there is no audience to sign for) or signing fails (logged).
pub async fn sign(signer: &ResponseSigner, agent_did: &str, answered: Answered, resp: Response) -> Response {
    let Some(aud) = answered.requester.filter(|r| Did::parse(r).is_ok()) else { return resp };
    // A stream has no end to sign: its final event carries the signature instead (STR-7).
    if resp.headers().get(axum::http::header::CONTENT_TYPE).is_some_and(|v| v.as_bytes() == b"text/event-stream") {
        return resp;
    }
    let (mut parts, body) = resp.into_parts();
    let bytes = match body.collect().await {
        Ok(b) => b.to_bytes(),
        Err(e) => {
            tracing::warn!(error = %e, "cannot read the response body to sign it");
            return Response::from_parts(parts, Body::empty());
        }
    };
    let sig = response_signature(
        &signer.key,
        &signer.key_id,
        agent_did,
        &aud,
        (&answered.method, &answered.target),
        parts.status.as_u16(),
        &parts.headers,
        &bytes,
    );
    match sig.map(|s| HeaderValue::from_str(&s)) {
        Ok(Ok(v)) => {
            parts.headers.insert(HeaderName::from_static(h::A2A_SIGNATURE), v);
        }
        Ok(Err(e)) => tracing::warn!(error = %e, "the response signature is not a header value"),
        Err(e) => tracing::warn!(error = %e, "cannot sign the response"),
    }
    Response::from_parts(parts, Body::from(bytes))
}

/// The INT-10 `A2A-Signature` value of a response, signed by `signer_did` for the requester `aud`: `htm`/`htu` of the
/// request it answers (`answered`: method and target as on its request line), `sts` = `status`, the covered headers
/// picked from `headers` (every A2A header must already be set), `full_payload` coverage of `body` when it is not
/// empty, `header_only` otherwise; valid for 60 s. The one signing of responses, shared by agents and gateways
/// (GW-15).
#[allow(clippy::too_many_arguments)]
pub fn response_signature(
    key: &SigningKey,
    key_id: &str,
    signer_did: &str,
    aud: &str,
    answered: (&str, &str),
    status: u16,
    headers: &axum::http::HeaderMap,
    body: &[u8],
) -> Result<String, integrity::IntegrityError> {
    let headers: Vec<(&str, &str)> =
        headers.iter().filter_map(|(k, v)| v.to_str().ok().map(|v| (k.as_str(), v))).collect();
    response_signature_of(key, key_id, signer_did, aud, answered, status, &headers, body)
}

/// [`response_signature`] over the answer's fields as `(name, value)` pairs (for callers without a `HeaderMap`).
#[allow(clippy::too_many_arguments)]
pub fn response_signature_of(
    key: &SigningKey,
    key_id: &str,
    signer_did: &str,
    aud: &str,
    answered: (&str, &str),
    status: u16,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Result<String, integrity::IntegrityError> {
    let coverage = if body.is_empty() { Coverage::HeaderOnly } else { Coverage::FullPayload };
    let now = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64);
    let mp = MessageParts { method: answered.0, target: answered.1, headers, body, status: Some(status) };
    integrity::sign(key, key_id, signer_did, aud, coverage, &mp, now, RESPONSE_SIGNATURE_LIFETIME_S)
}

/// The lifetime of a response signature, in seconds (`exp` - `iat`).
pub const RESPONSE_SIGNATURE_LIFETIME_S: u32 = 60;
