//! The operator's endpoints, beside the protocol's: `GET /metrics` (Prometheus), `GET /gateway/audit` (query the
//! audit log by `sender`, `negotiation`, `execution`, `limit`), `GET /gateway/agents` (who can do what, their health
//! and metric labels), and the gateway's DID document. The first three are closed by default (GW-22): they exist only
//! when `[admin] token_env` or `token_file` names a token, and then require `Authorization: Bearer <token>`.

use std::sync::Arc;
use std::time::Instant;

use a2a_core::error::{A2aError, ErrorCode};
use axum::body::Body;
use http::{HeaderValue, Method, Response, StatusCode, header};
use serde_json::json;
use subtle::ConstantTimeEq;

use crate::Inner;
use crate::audit::AuditParams;

fn json(status: StatusCode, v: &serde_json::Value) -> Response<Body> {
    let mut r = Response::new(Body::from(serde_json::to_vec(v).unwrap_or_default()));
    *r.status_mut() = status;
    r.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    r
}

fn error(e: A2aError) -> Response<Body> {
    let status = StatusCode::from_u16(e.http_status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    json(status, &serde_json::to_value(e.to_body()).unwrap_or_default())
}

/// Whether the request carries the admin token; never when none is configured (GW-22: closed by default).
fn authorized(gw: &Inner, parts: &http::request::Parts) -> bool {
    let Some(expected) = &gw.admin_token else { return false };
    let given = parts
        .headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or("");
    let digest: [u8; 32] = <sha2::Sha256 as sha2::Digest>::digest(given.as_bytes()).into();
    bool::from(digest.ct_eq(expected))
}

/// Answers the admin endpoints; `None` for every other path.
pub(crate) async fn handle(gw: &Arc<Inner>, parts: &http::request::Parts) -> Option<Response<Body>> {
    let path = parts.uri.path();
    if let Some((doc_path, doc)) = &gw.did_document
        && path == doc_path
        && (parts.method == Method::GET || parts.method == Method::HEAD)
    {
        return Some(a2a_runtime::app::did_document_response(doc.clone()));
    }
    if path != "/metrics" && !path.starts_with("/gateway/") {
        return None;
    }
    if gw.admin_token.is_none() {
        // GW-22: without a token the operator surface does not exist on the callers' listener.
        return Some(error(A2aError::with_message(
            ErrorCode::NOT_FOUND,
            "no endpoint at this path (the admin endpoints are off: set [admin] token_env or token_file)",
        )));
    }
    if parts.method != Method::GET && parts.method != Method::HEAD {
        let mut r =
            error(A2aError::with_message(ErrorCode::METHOD_NOT_ALLOWED, "the admin endpoints accept GET and HEAD"));
        r.headers_mut().insert(header::ALLOW, HeaderValue::from_static("GET, HEAD"));
        return Some(r);
    }
    if !authorized(gw, parts) {
        let mut r = error(A2aError::with_message(
            ErrorCode::AUTH_INVALID,
            "the admin endpoints require Authorization: Bearer <the token of [admin] token_env>",
        ));
        r.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer realm=\"a2a-gateway\""));
        return Some(r);
    }
    Some(match path {
        "/metrics" => {
            if let Some(log) = &gw.audit {
                gw.metrics.set_audit_dropped(log.dropped());
            }
            let mut r = Response::new(Body::from(gw.metrics.encode()));
            r.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/openmetrics-text; version=1.0.0; charset=utf-8"),
            );
            r
        }
        "/gateway/audit" => {
            let q = match axum::extract::Query::<AuditParams>::try_from_uri(&parts.uri) {
                Ok(q) => q.0,
                Err(e) => {
                    return Some(error(A2aError::with_message(
                        ErrorCode::INVALID_REQUEST,
                        format!("query parameters: sender, negotiation, execution, limit ({e})"),
                    )));
                }
            };
            let Some(log) = &gw.audit else {
                return Some(error(A2aError::with_message(
                    ErrorCode::NOT_FOUND,
                    "the audit log is off: set [audit] file or a Redis [store]",
                )));
            };
            match crate::audit::query(log.as_ref(), &q).await {
                Ok(records) => json(StatusCode::OK, &json!({"records": records})),
                Err(e) => error(A2aError::with_message(ErrorCode::STORE_UNAVAILABLE, e.to_string())),
            }
        }
        "/gateway/agents" => {
            let now = Instant::now();
            let mut list = Vec::new();
            for a in gw.agents.listed().iter() {
                let info = gw.agents.info(a).await;
                list.push(json!({
                    "label": a.label,
                    "endpoint": a.endpoint.url,
                    "did": info.as_ref().ok().map(|i| i.did.clone()),
                    "healthy": a.healthy(now),
                    "in_flight": a.in_flight(),
                    "capabilities": info.as_ref().map(|i| i.doc.capabilities.iter().map(|c| json!({
                        "name": c.name, "auth_requirement": c.auth_requirement})).collect::<Vec<_>>()).unwrap_or_default(),
                    "error": info.as_ref().err().map(|e| e.to_string()),
                }));
            }
            let (hits, misses) = gw.metrics.cache_counts();
            json(StatusCode::OK, &json!({"agents": list, "discover_cache": {"hits": hits, "misses": misses}}))
        }
        _ => error(A2aError::with_message(
            ErrorCode::NOT_FOUND,
            "admin endpoints: /metrics, /gateway/audit, /gateway/agents",
        )),
    })
}
