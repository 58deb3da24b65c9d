//! Liveness and readiness probes (OPS-2, OPS-3), shared by the agent and the gateway.
//!
//! - `GET /healthz` answers `200 {"status":"ok"}` while the process serves at all (liveness);
//! - `GET /readyz` answers `200 {"status":"ready"}` when the process can do its work, otherwise `503
//!   {"status":"not_ready","reason":"<stable code>","detail":"<text>"}` with `Retry-After` (readiness).
//!
//! Both answer `HEAD` too, need no token and reveal nothing about callers or their work (OPS-2); they are not
//! protocol requests: not rate limited, not audited, not counted in the protocol's metrics (OPS-3).

use std::time::Duration;

use a2a_core::error::{A2aError, ErrorCode};
use axum::body::Body;
use http::{HeaderValue, Method, Response, StatusCode, header};

use crate::store::Store;

/// The liveness path.
pub const HEALTHZ: &str = "/healthz";
/// The readiness path.
pub const READYZ: &str = "/readyz";
/// How long readiness waits for the store's `PING` before it calls the store unreachable.
pub const STORE_PING_TIMEOUT: Duration = Duration::from_millis(1000);
/// The `Retry-After` (seconds) of a `503 not_ready`.
pub const RETRY_AFTER_S: u32 = 1;

/// Why a process is not ready: a stable `reason` code (OPS-2) and a text for people.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotReady {
    /// Stable code: `store_unreachable`, `registry_not_read`, `no_agent`, `no_healthy_agent`.
    pub reason: &'static str,
    /// What is wrong, for the operator.
    pub detail: String,
}

/// Reason code: the state store does not answer `PING` within [`STORE_PING_TIMEOUT`].
pub const STORE_UNREACHABLE: &str = "store_unreachable";
/// Reason code (gateway): the capability registry was not read yet.
pub const REGISTRY_NOT_READ: &str = "registry_not_read";
/// Reason code (gateway): no agent is configured nor registered.
pub const NO_AGENT: &str = "no_agent";
/// Reason code (gateway): every agent is ejected by outlier detection.
pub const NO_HEALTHY_AGENT: &str = "no_healthy_agent";

/// Whether `path` is one of the probes.
pub fn is_probe(path: &str) -> bool {
    path == HEALTHZ || path == READYZ
}

/// The store's readiness: `PING` answered within [`STORE_PING_TIMEOUT`] (an in-memory store always is).
pub async fn store_ready(store: &dyn Store) -> Result<(), NotReady> {
    match tokio::time::timeout(STORE_PING_TIMEOUT, store.ping()).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err(NotReady { reason: STORE_UNREACHABLE, detail: format!("the state store failed: {e}") }),
        Err(_) => Err(NotReady {
            reason: STORE_UNREACHABLE,
            detail: format!("the state store did not answer PING within {} ms", STORE_PING_TIMEOUT.as_millis()),
        }),
    }
}

fn json(status: StatusCode, body: &serde_json::Value) -> Response<Body> {
    let mut r = Response::new(Body::from(serde_json::to_vec(body).unwrap_or_default()));
    *r.status_mut() = status;
    let h = r.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    r
}

/// `405 method_not_allowed` (JSON, ERR-4) for a probe asked with another method than GET or HEAD.
fn wrong_method() -> Response<Body> {
    let e = A2aError::with_message(ErrorCode::METHOD_NOT_ALLOWED, "the probes accept GET and HEAD");
    let status = StatusCode::from_u16(e.http_status()).unwrap_or(StatusCode::METHOD_NOT_ALLOWED);
    let mut r = json(status, &serde_json::to_value(e.to_body()).unwrap_or_default());
    r.headers_mut().insert(header::ALLOW, HeaderValue::from_static("GET, HEAD"));
    r
}

/// The answer to a probe: `path` is [`HEALTHZ`] or [`READYZ`]; `ready` is asked only for [`READYZ`] (the one place
/// per binary that decides readiness).
pub async fn answer<F>(method: &Method, path: &str, ready: F) -> Response<Body>
where
    F: std::future::Future<Output = Result<(), NotReady>>,
{
    if method != Method::GET && method != Method::HEAD {
        return wrong_method();
    }
    if path == HEALTHZ {
        return json(StatusCode::OK, &serde_json::json!({"status": "ok"}));
    }
    match ready.await {
        Ok(()) => json(StatusCode::OK, &serde_json::json!({"status": "ready"})),
        Err(n) => {
            let mut r = json(
                StatusCode::SERVICE_UNAVAILABLE,
                &serde_json::json!({"status": "not_ready", "reason": n.reason, "detail": n.detail}),
            );
            r.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(RETRY_AFTER_S));
            r
        }
    }
}
