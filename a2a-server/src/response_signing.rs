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
pub(crate) struct ResponseSigner {
    pub(crate) key_id: String,
    pub(crate) key: SigningKey,
}

/// The request a response answers, as a signature names it.
pub(crate) struct Answered {
    pub(crate) method: String,
    pub(crate) target: String,
    pub(crate) requester: Option<String>,
}

/// Signs `resp` (after every A2A header is set); an unsigned response is returned when the requester is not a valid
/// DID (there is no audience to sign for) or signing fails (logged).
pub(crate) async fn sign(signer: &ResponseSigner, agent_did: &str, answered: Answered, resp: Response) -> Response {
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
    let coverage = if bytes.is_empty() { Coverage::HeaderOnly } else { Coverage::FullPayload };
    let now = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64);
    let sig = {
        let headers: Vec<(&str, &str)> =
            parts.headers.iter().filter_map(|(k, v)| v.to_str().ok().map(|v| (k.as_str(), v))).collect();
        let mp = MessageParts {
            method: &answered.method,
            target: &answered.target,
            headers: &headers,
            body: &bytes,
            status: Some(parts.status.as_u16()),
        };
        integrity::sign(&signer.key, &signer.key_id, agent_did, &aud, coverage, &mp, now, 60)
    };
    match sig.map(|s| HeaderValue::from_str(&s)) {
        Ok(Ok(v)) => {
            parts.headers.insert(HeaderName::from_static(h::A2A_SIGNATURE), v);
        }
        Ok(Err(e)) => tracing::warn!(error = %e, "the response signature is not a header value"),
        Err(e) => tracing::warn!(error = %e, "cannot sign the response"),
    }
    Response::from_parts(parts, Body::from(bytes))
}
