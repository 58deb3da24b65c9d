//! One request of the protocol: headers, signature, timeout, bounded body, `A2A-Version` check, error body, response
//! signature, and retries of the steps that are safe to repeat (CLI-3, CLI-4, CLI-5, INT-10).

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use a2a_core::error::{A2aError, ErrorBody, ErrorCode};
use a2a_core::headers as h;
use a2a_core::integrity::{self, Coverage, MessageParts};
use bytes::Bytes;
use reqwest::Method;
use reqwest::header::HeaderMap;

use crate::backoff::Backoff;
use crate::client::Inner;
use crate::config::ResponseVerification;
use crate::endpoint::Endpoint;
use crate::error::{ClientError, Step};

/// A request to send.
pub(crate) struct Request<'a> {
    pub(crate) step: Step,
    pub(crate) endpoint: &'a Endpoint,
    pub(crate) method: Method,
    /// The path below the endpoint: `""`, `/negotiate`, `/result/<segment>`.
    pub(crate) tail: String,
    pub(crate) query: Option<String>,
    /// Extra headers (lower-case names).
    pub(crate) headers: Vec<(&'static str, String)>,
    pub(crate) body: Option<Vec<u8>>,
    /// Sign the request (the identity must have a key).
    pub(crate) sign: bool,
    /// The agent's DID: the audience of a signature, and the signer expected on a signed response.
    pub(crate) agent: Option<String>,
    /// The time allowed for this request (before the deadline cuts it).
    pub(crate) timeout: Duration,
    /// Retry transient failures.
    pub(crate) retry: bool,
    /// Send the credentials configured for the endpoint's origin.
    pub(crate) credentials: bool,
    /// A `200 text/event-stream` answer is returned unread in [`Response::stream`] (§18).
    pub(crate) accept_stream: bool,
}

impl<'a> Request<'a> {
    pub(crate) fn new(step: Step, endpoint: &'a Endpoint, method: Method, tail: impl Into<String>) -> Self {
        Request {
            step,
            endpoint,
            method,
            tail: tail.into(),
            query: None,
            headers: Vec::new(),
            body: None,
            sign: false,
            agent: None,
            timeout: Duration::from_secs(10),
            retry: step.is_idempotent(),
            credentials: false,
            accept_stream: false,
        }
    }

    pub(crate) fn json(mut self, value: &serde_json::Value) -> Self {
        // Canonical form (JCS-20): the payload_hash digest is then also the digest of the raw body.
        self.body = Some(a2a_core::canonical::to_canonical_vec(value));
        self
    }
}

/// An answer with a success status.
#[derive(Debug)]
pub(crate) struct Response {
    pub(crate) status: u16,
    pub(crate) headers: HeaderMap,
    pub(crate) body: Bytes,
    pub(crate) url: String,
    /// The unread body of a `text/event-stream` answer (requests with `accept_stream`).
    pub(crate) stream: Option<reqwest::Response>,
}

impl Response {
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    pub(crate) fn json<T: serde::de::DeserializeOwned>(&self, step: Step) -> Result<T, ClientError> {
        serde_json::from_slice(&self.body).map_err(|e| ClientError::Protocol {
            step,
            url: self.url.clone(),
            reason: format!("the {} answer is not the expected JSON message: {e}", self.status),
        })
    }
}

/// The overall deadline of a call.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Deadline {
    pub(crate) at: Instant,
    pub(crate) total: Duration,
}

impl Deadline {
    pub(crate) fn after(total: Duration) -> Self {
        Deadline { at: Instant::now() + total, total }
    }

    pub(crate) fn remaining(&self) -> Duration {
        self.at.saturating_duration_since(Instant::now())
    }

    pub(crate) fn exceeded(&self, step: Step) -> ClientError {
        ClientError::DeadlineExceeded { step, deadline: self.total, execution_id: None, last_status: None }
    }
}

fn unix_now() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64)
}

/// The chain of causes of a transport error, e.g. "error sending request: ... : Connection refused (os error 111)".
fn describe(e: &reqwest::Error) -> String {
    a2a_core::error::with_causes(e)
}

fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let v = headers.get(reqwest::header::RETRY_AFTER)?.to_str().ok()?;
    v.trim().parse::<u64>().ok().map(Duration::from_secs)
}

/// A request ready to go.
struct Prepared {
    rb: reqwest::RequestBuilder,
    target: String,
    url: String,
    timeout: Duration,
    cut_by_deadline: bool,
}

/// Why a body could not be read.
enum ReadFailure {
    TimedOut,
    Failed(ClientError),
}

/// CLI-5: the answer must come from an agent of our version.
fn check_version(req: &Request<'_>, url: &str, status: u16, headers: &HeaderMap) -> Result<(), ClientError> {
    match headers.get(h::A2A_VERSION).and_then(|v| v.to_str().ok()) {
        None => Err(ClientError::Protocol {
            step: req.step,
            url: url.to_owned(),
            reason: format!("it answered {status} without an A2A-Version header: this is not an A2A endpoint"),
        }),
        Some(v) => match h::parse_version(v) {
            Ok(ver) if ver == h::Version::V0_3 => Ok(()),
            _ => Err(ClientError::UnsupportedVersion { url: req.endpoint.to_string(), version: v.trim().to_owned() }),
        },
    }
}

/// The error of an answer with an error status: its `ErrorBody`, or a protocol error when it has none.
fn error_of(step: Step, url: &str, status: u16, body: &[u8]) -> ClientError {
    match serde_json::from_slice::<ErrorBody>(body) {
        Ok(b) => ClientError::Agent { step, status, error: Box::new(A2aError::from(b)) },
        Err(e) => ClientError::Protocol {
            step,
            url: url.to_owned(),
            reason: format!("it answered {status} with a body that is not an A2A error ({e})"),
        },
    }
}

impl Inner {
    /// Sends a request, retrying transient failures of safe steps with backoff (100 ms doubling, or `Retry-After`)
    /// within the deadline; every attempt is signed afresh (INT-5).
    pub(crate) async fn send(&self, req: &Request<'_>, deadline: Option<Deadline>) -> Result<Response, ClientError> {
        let mut backoff = Backoff::new(crate::backoff::INITIAL, crate::backoff::DEFAULT_CAP);
        let mut attempt = 0;
        loop {
            let (err, after) = match self.send_once(req, deadline).await {
                Ok(r) => return Ok(r),
                Err(e) => e,
            };
            if !(req.retry && attempt < self.config.max_retries && err.is_transient()) {
                return Err(err);
            }
            let wait = match after {
                Some(a) if a > self.config.max_retry_after => return Err(err),
                Some(a) => a,
                None => backoff.next().unwrap_or(crate::backoff::INITIAL),
            };
            if let Some(d) = deadline
                && d.remaining() <= wait
            {
                return Err(err);
            }
            tracing::debug!(step = %req.step, attempt, error = %err, wait_ms = wait.as_millis() as u64, "retrying");
            tokio::time::sleep(wait).await;
            attempt += 1;
        }
    }

    /// The headers of a request (version, sender, extra headers, credentials, content type, signature) and the
    /// request builder carrying them; `whole_timeout` bounds the whole exchange, body included (not for streams).
    fn prepare(
        &self,
        req: &Request<'_>,
        deadline: Option<Deadline>,
        whole_timeout: bool,
    ) -> Result<Prepared, ClientError> {
        let step = req.step;
        let target = req.endpoint.target(&req.tail, req.query.as_deref());
        let url = req.endpoint.url_of(&target);
        let (timeout, cut_by_deadline) = match deadline {
            Some(d) if d.remaining() < req.timeout => (d.remaining(), true),
            _ => (req.timeout, false),
        };
        if timeout.is_zero() {
            return Err(
                deadline.map_or_else(|| ClientError::Timeout { step, url, after: timeout }, |d| d.exceeded(step))
            );
        }
        let mut headers: Vec<(&str, String)> = vec![
            (h::A2A_VERSION, a2a_core::PROTOCOL_VERSION.to_owned()),
            (h::A2A_SENDER_ID, self.identity.did().to_owned()),
        ];
        headers.extend(req.headers.iter().map(|(k, v)| (*k, v.clone())));
        if req.credentials
            && let Some(c) = self.credentials.get(&req.endpoint.origin())
        {
            if let Some(k) = &c.api_key {
                headers.push((h::A2A_API_KEY, k.clone()));
            }
            if let Some(t) = &c.bearer_token {
                headers.push(("authorization", format!("Bearer {t}")));
            }
        }
        if req.body.is_some() {
            headers.push(("content-type", "application/json".to_owned()));
        }
        let body = req.body.as_deref().unwrap_or_default();
        if req.sign {
            let sig = self.sign(req, &target, &headers, body)?;
            headers.push((h::A2A_SIGNATURE, sig));
        }
        let mut rb = self.http.request(req.method.clone(), &url);
        if whole_timeout {
            rb = rb.timeout(timeout);
        }
        for (k, v) in &headers {
            rb = rb.header(*k, v);
        }
        if let Some(b) = &req.body {
            rb = rb.body(b.clone());
        }
        Ok(Prepared { rb, target, url, timeout, cut_by_deadline })
    }

    async fn send_once(
        &self,
        req: &Request<'_>,
        deadline: Option<Deadline>,
    ) -> Result<Response, (ClientError, Option<Duration>)> {
        let step = req.step;
        let Prepared { rb, target, url, timeout, cut_by_deadline } =
            self.prepare(req, deadline, true).map_err(|e| (e, None))?;
        let timed_out = |url: String| {
            if cut_by_deadline {
                deadline.map_or(ClientError::Timeout { step, url: url.clone(), after: timeout }, |d| d.exceeded(step))
            } else {
                ClientError::Timeout { step, url, after: timeout }
            }
        };
        let mut resp = match rb.send().await {
            Ok(r) => r,
            Err(e) if e.is_timeout() => return Err((timed_out(url), None)),
            Err(e) => return Err((ClientError::Unreachable { step, url, reason: describe(&e) }, None)),
        };
        let status = resp.status().as_u16();
        let resp_headers = resp.headers().clone();
        if req.accept_stream
            && status == 200
            && resp_headers
                .get(reqwest::header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .is_some_and(|v| v.trim().starts_with("text/event-stream"))
        {
            check_version(req, &url, status, &resp_headers).map_err(|e| (e, None))?;
            return Ok(Response { status, headers: resp_headers, body: Bytes::new(), url, stream: Some(resp) });
        }
        let body = match self.read_body(step, &url, &mut resp).await {
            Ok(b) => b,
            Err(ReadFailure::TimedOut) => return Err((timed_out(url), None)),
            Err(ReadFailure::Failed(e)) => return Err((e, None)),
        };
        check_version(req, &url, status, &resp_headers).map_err(|e| (e, None))?;
        self.verify_response(req, &target, status, &resp_headers, &body).await.map_err(|e| (e, None))?;
        if status >= 400 {
            return Err((error_of(step, &url, status, &body), retry_after(&resp_headers)));
        }
        Ok(Response { status, headers: resp_headers, body, url, stream: None })
    }

    /// Reads a whole body, at most `max_response_bytes`.
    async fn read_body(&self, step: Step, url: &str, resp: &mut reqwest::Response) -> Result<Bytes, ReadFailure> {
        let max = self.config.max_response_bytes;
        let too_large = || {
            ReadFailure::Failed(ClientError::Protocol {
                step,
                url: url.to_owned(),
                reason: format!("the response body is larger than {max} bytes (ClientConfig::max_response_bytes)"),
            })
        };
        if resp.content_length().is_some_and(|l| l > max as u64) {
            return Err(too_large());
        }
        let mut buf = Vec::new();
        loop {
            match resp.chunk().await {
                Ok(Some(chunk)) => {
                    if buf.len() + chunk.len() > max {
                        return Err(too_large());
                    }
                    buf.extend_from_slice(&chunk);
                }
                Ok(None) => break,
                Err(e) if e.is_timeout() => return Err(ReadFailure::TimedOut),
                Err(e) => {
                    return Err(ReadFailure::Failed(ClientError::Unreachable {
                        step,
                        url: url.to_owned(),
                        reason: describe(&e),
                    }));
                }
            }
        }
        Ok(Bytes::from(buf))
    }

    /// Opens a streaming response (Server-Sent Events): the headers are checked (`A2A-Version`, a success status,
    /// else the error body), and the body is left to the caller to read as it arrives. The request's timeout
    /// bounds the wait for the response headers only. A stream's body cannot be covered by a response signature,
    /// so none is verified. (The sessions' event channel, §17.6.)
    #[cfg(feature = "sessions")]
    pub(crate) async fn open_stream(&self, req: &Request<'_>) -> Result<(reqwest::Response, String), ClientError> {
        let step = req.step;
        let Prepared { rb, url, timeout, .. } = self.prepare(req, None, false)?;
        let mut resp = match tokio::time::timeout(timeout, rb.send()).await {
            Err(_) => return Err(ClientError::Timeout { step, url, after: timeout }),
            Ok(Err(e)) => return Err(ClientError::Unreachable { step, url, reason: describe(&e) }),
            Ok(Ok(r)) => r,
        };
        let status = resp.status().as_u16();
        let headers = resp.headers().clone();
        check_version(req, &url, status, &headers)?;
        if status >= 400 {
            let body = match tokio::time::timeout(timeout, self.read_body(step, &url, &mut resp)).await {
                Ok(Ok(b)) => b,
                Ok(Err(ReadFailure::Failed(e))) => return Err(e),
                Ok(Err(ReadFailure::TimedOut)) | Err(_) => {
                    return Err(ClientError::Timeout { step, url, after: timeout });
                }
            };
            return Err(error_of(step, &url, status, &body));
        }
        Ok((resp, url))
    }

    fn sign(
        &self,
        req: &Request<'_>,
        target: &str,
        headers: &[(&str, String)],
        body: &[u8],
    ) -> Result<String, ClientError> {
        let step = req.step;
        let (key_id, key) = self.identity.signer().ok_or_else(|| ClientError::Signing {
            step,
            reason: "the client's identity has no key; give it a P-256 key (Identity::new, --key)".into(),
        })?;
        let audience = req.agent.as_deref().ok_or_else(|| ClientError::Signing {
            step,
            reason: "the agent's DID is not known yet (DISCOVER first): it is the signature's audience".into(),
        })?;
        let coverage = if req.body.is_some() { self.config.body_coverage } else { Coverage::HeaderOnly };
        let pairs: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let parts = MessageParts { method: req.method.as_str(), target, headers: &pairs, body, status: None };
        integrity::sign(
            key,
            key_id,
            self.identity.did(),
            audience,
            coverage,
            &parts,
            unix_now(),
            self.config.signature_lifetime_secs,
        )
        .map_err(|e| ClientError::Signing { step, reason: e.to_string() })
    }

    /// INT-10: a signed response is verified with the agent's key, addressed to us, for this request and status.
    async fn verify_response(
        &self,
        req: &Request<'_>,
        target: &str,
        status: u16,
        headers: &HeaderMap,
        body: &[u8],
    ) -> Result<(), ClientError> {
        if self.config.response_verification == ResponseVerification::Off {
            return Ok(());
        }
        let sig = match headers.get(h::A2A_SIGNATURE) {
            None => None,
            Some(v) => Some(v.to_str().map_err(|_| ClientError::ResponseNotVerified {
                step: req.step,
                code: ErrorCode::SIGNATURE_MALFORMED,
                reason: "A2A-Signature is not ASCII".into(),
            })?),
        };
        let pairs: Vec<(&str, &str)> =
            headers.iter().filter_map(|(k, v)| v.to_str().ok().map(|v| (k.as_str(), v))).collect();
        let parts = MessageParts { method: req.method.as_str(), target, headers: &pairs, body, status: Some(status) };
        self.verify_signed(req.step, req.agent.as_deref(), sig, &parts).await
    }

    /// INT-10 for any signed answer (a response, or the final event of a stream, STR-7): `sig` is its `A2A-Signature`.
    pub(crate) async fn verify_signed(
        &self,
        step: Step,
        agent: Option<&str>,
        sig: Option<&str>,
        parts: &MessageParts<'_>,
    ) -> Result<(), ClientError> {
        let mode = self.config.response_verification;
        if mode == ResponseVerification::Off {
            return Ok(());
        }
        let fail = |code: ErrorCode, reason: String| ClientError::ResponseNotVerified { step, code, reason };
        let Some(sig) = sig else {
            if mode == ResponseVerification::Required {
                return Err(fail(
                    ErrorCode::SIGNATURE_REQUIRED,
                    "the response carries no A2A-Signature and signed responses are required".into(),
                ));
            }
            return Ok(());
        };
        let pending = integrity::prepare(sig, parts, self.identity.did(), unix_now())
            .map_err(|e| fail(e.code(), e.to_string()))?;
        if let Some(agent) = agent
            && pending.did() != agent
        {
            return Err(fail(
                ErrorCode::SENDER_MISMATCH,
                format!("the response is signed by {}, but the agent is {agent}", pending.did()),
            ));
        }
        let key = self
            .resolver
            .resolve_key(pending.did(), pending.key_id())
            .await
            .map_err(|e| fail(e.code.clone(), e.message.clone()))?;
        pending.finish(&key, parts).map_err(|e| fail(e.code(), e.to_string()))?;
        Ok(())
    }
}
