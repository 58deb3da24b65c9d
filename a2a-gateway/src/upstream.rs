//! The connections to agents: one hyper client with a keep-alive pool per agent, bounded connect and answer times,
//! and errors that say whether the request reached the agent at all (so that NEGOTIATE can be retried elsewhere).

use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioTimer};

/// Why an agent could not be reached.
#[derive(Debug, thiserror::Error)]
pub enum UpstreamError {
    /// No connection could be made: the request was not sent (safe to try another agent).
    #[error("cannot connect to the agent: {0}")]
    Connect(String),
    /// The agent did not start answering in time.
    #[error("the agent did not answer within {0} ms")]
    Timeout(u64),
    /// The connection failed after the request was sent, or the answer was not HTTP.
    #[error("the exchange with the agent failed: {0}")]
    Protocol(String),
}

impl UpstreamError {
    /// The metric label.
    pub fn reason(&self) -> &'static str {
        match self {
            UpstreamError::Connect(_) => "connect",
            UpstreamError::Timeout(_) => "timeout",
            UpstreamError::Protocol(_) => "protocol",
        }
    }
}

/// A pooled HTTP/1.1 client to the agents.
#[derive(Clone)]
pub struct Upstream {
    client: Client<HttpConnector, Full<Bytes>>,
    timeout: Duration,
}

impl Upstream {
    /// A client whose connections are kept alive (`pool_max_idle` per agent) and made within `connect_timeout`.
    pub fn new(connect_timeout: Duration, timeout: Duration, pool_max_idle: usize) -> Self {
        let mut connector = HttpConnector::new();
        connector.set_nodelay(true);
        connector.set_connect_timeout(Some(connect_timeout));
        connector.set_keepalive(Some(Duration::from_secs(60)));
        let client = Client::builder(TokioExecutor::new())
            .pool_timer(TokioTimer::new())
            .pool_idle_timeout(Duration::from_secs(90))
            .pool_max_idle_per_host(pool_max_idle)
            .build(connector);
        Upstream { client, timeout }
    }

    /// Sends a request; the answer's head within the time limit (the body then streams).
    pub async fn send(&self, req: Request<Full<Bytes>>) -> Result<Response<Incoming>, UpstreamError> {
        self.send_within(req, self.timeout).await
    }

    /// Sends a request with its own time limit.
    pub async fn send_within(
        &self,
        req: Request<Full<Bytes>>,
        limit: Duration,
    ) -> Result<Response<Incoming>, UpstreamError> {
        match tokio::time::timeout(limit, self.client.request(req)).await {
            Err(_) => Err(UpstreamError::Timeout(limit.as_millis() as u64)),
            Ok(Err(e)) if e.is_connect() => Err(UpstreamError::Connect(a2a_core::error::with_causes(&e))),
            Ok(Err(e)) => Err(UpstreamError::Protocol(a2a_core::error::with_causes(&e))),
            Ok(Ok(r)) => Ok(r),
        }
    }

    /// Sends a request and reads the whole answer (at most `max` bytes of body), for the gateway's own calls.
    pub async fn fetch(
        &self,
        req: Request<Full<Bytes>>,
        limit: Duration,
        max: usize,
    ) -> Result<(http::response::Parts, Bytes), UpstreamError> {
        let resp = self.send_within(req, limit).await?;
        let (parts, body) = resp.into_parts();
        let body = tokio::time::timeout(limit, http_body_util::Limited::new(body, max).collect())
            .await
            .map_err(|_| UpstreamError::Timeout(limit.as_millis() as u64))?
            .map_err(|e| UpstreamError::Protocol(e.to_string()))?
            .to_bytes();
        Ok((parts, body))
    }
}
