//! Plain HTTP: requests exactly as a check builds them (wrong headers, duplicate headers, bodies that are not JSON,
//! oversize bodies), and responses exactly as received. Nothing here fixes up a request.

use std::sync::Arc;
use std::time::{Duration, Instant};

use a2a_core::integrity::{Coverage, SignatureClaims};
use serde_json::Value;

use crate::identity::Identity;
use crate::report::{ReceivedResponse, SentRequest};

/// How much of a body a report keeps.
const EXCERPT: usize = 4096;

/// Changes a request after it was signed (to tamper with what the signature covers).
pub type AfterSign = Box<dyn FnOnce(&mut Req) + Send + Sync>;
/// Changes the claims before they are signed.
pub type EditClaims = Box<dyn FnOnce(&mut SignatureClaims) + Send + Sync>;
/// Writes the whole `A2A-Signature` value from the claims (for tokens `a2a-core` would refuse to write).
pub type MakeToken = Box<dyn FnOnce(&Identity, &SignatureClaims) -> String + Send + Sync>;

/// How to sign a request (`A2A-Signature`, spec §9.5), and how to spoil the signature on purpose.
pub struct Signing {
    /// Who signs.
    pub identity: Arc<Identity>,
    /// What the signature covers.
    pub coverage: Coverage,
    /// The audience; `None`: the agent's DID from DISCOVER.
    pub audience: Option<String>,
    /// Edits the claims before signing.
    pub edit_claims: Option<EditClaims>,
    /// Writes the token instead of `a2a-core`.
    pub make_token: Option<MakeToken>,
    /// Edits the request after signing.
    pub after: Option<AfterSign>,
}

impl Signing {
    /// A correct signature by `identity` with `coverage`.
    pub fn new(identity: Arc<Identity>, coverage: Coverage) -> Signing {
        Signing { identity, coverage, audience: None, edit_claims: None, make_token: None, after: None }
    }

    /// Edits the claims before they are signed.
    #[must_use]
    pub fn claims(mut self, f: impl FnOnce(&mut SignatureClaims) + Send + Sync + 'static) -> Signing {
        self.edit_claims = Some(Box::new(f));
        self
    }

    /// Writes the token with `f` (which gets the claims the suite would have signed).
    #[must_use]
    pub fn token(mut self, f: impl FnOnce(&Identity, &SignatureClaims) -> String + Send + Sync + 'static) -> Signing {
        self.make_token = Some(Box::new(f));
        self
    }

    /// Changes the request after it was signed.
    #[must_use]
    pub fn then(mut self, f: impl FnOnce(&mut Req) + Send + Sync + 'static) -> Signing {
        self.after = Some(Box::new(f));
        self
    }

    /// Addresses the signature to another audience.
    #[must_use]
    pub fn audience(mut self, aud: impl Into<String>) -> Signing {
        self.audience = Some(aud.into());
        self
    }
}

/// A request to send.
pub struct Req {
    /// The method (upper case).
    pub method: String,
    /// The full URL.
    pub url: String,
    /// Headers in order; a name may repeat.
    pub headers: Vec<(String, String)>,
    /// The body.
    pub body: Option<Vec<u8>>,
    /// Sign it before sending.
    pub signing: Option<Signing>,
    /// A longer time limit than the run's default (long-poll).
    pub timeout: Option<Duration>,
}

impl Req {
    /// A request with no headers.
    pub fn new(method: &str, url: impl Into<String>) -> Req {
        Req {
            method: method.to_owned(),
            url: url.into(),
            headers: Vec::new(),
            body: None,
            signing: None,
            timeout: None,
        }
    }

    /// Adds a header (another value for a name already present is a second header line).
    #[must_use]
    pub fn header(mut self, name: &str, value: impl Into<String>) -> Req {
        self.headers.push((name.to_ascii_lowercase(), value.into()));
        self
    }

    /// Sets a header, replacing every value it had.
    #[must_use]
    pub fn set(mut self, name: &str, value: impl Into<String>) -> Req {
        self.set_header(name, value);
        self
    }

    /// Sets a header in place, replacing every value it had.
    pub fn set_header(&mut self, name: &str, value: impl Into<String>) {
        let lower = name.to_ascii_lowercase();
        self.headers.retain(|(n, _)| *n != lower);
        self.headers.push((lower, value.into()));
    }

    /// Removes a header.
    #[must_use]
    pub fn without(mut self, name: &str) -> Req {
        let lower = name.to_ascii_lowercase();
        self.headers.retain(|(n, _)| *n != lower);
        self
    }

    /// A JSON body (compact), with `Content-Type: application/json`.
    #[must_use]
    pub fn json(self, body: &Value) -> Req {
        let bytes = serde_json::to_vec(body).unwrap_or_default();
        self.set("content-type", "application/json").body(bytes)
    }

    /// A raw body (the content type is left as it is).
    #[must_use]
    pub fn body(mut self, bytes: impl Into<Vec<u8>>) -> Req {
        self.body = Some(bytes.into());
        self
    }

    /// Signs the request when it is sent.
    #[must_use]
    pub fn signed(mut self, signing: Signing) -> Req {
        self.signing = Some(signing);
        self
    }

    /// A longer time limit for this request.
    #[must_use]
    pub fn timeout(mut self, t: Duration) -> Req {
        self.timeout = Some(t);
        self
    }

    /// A copy of the request as it stands (method, URL, headers, body), without the pending signing: after
    /// [`crate::identity::apply_signing`] this is the exact signed request, to send again (replay checks).
    pub fn copy(&self) -> Req {
        Req {
            method: self.method.clone(),
            url: self.url.clone(),
            headers: self.headers.clone(),
            body: self.body.clone(),
            signing: None,
            timeout: self.timeout,
        }
    }

    /// The first value of a header.
    pub fn header_value(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }

    /// The request target as it goes on the request line: path and query.
    pub fn target(&self) -> String {
        match url::Url::parse(&self.url) {
            Ok(u) => match u.query() {
                Some(q) => format!("{}?{q}", u.path()),
                None => u.path().to_owned(),
            },
            Err(_) => self.url.clone(),
        }
    }

    /// The record of the request for a report.
    pub fn record(&self) -> SentRequest {
        let (body, body_bytes, body_truncated) = excerpt(self.body.as_deref());
        SentRequest {
            method: self.method.clone(),
            url: self.url.clone(),
            headers: self.headers.clone(),
            body,
            body_bytes,
            body_truncated,
        }
    }
}

/// A response as received.
#[derive(Debug, Clone)]
pub struct Resp {
    /// The status code.
    pub status: u16,
    /// `HTTP/1.1`, `HTTP/2.0`, ...
    pub version: String,
    /// Headers (names in lower case), in order.
    pub headers: Vec<(String, String)>,
    /// The body.
    pub body: Vec<u8>,
    /// Time to the whole response.
    pub elapsed: Duration,
}

impl Resp {
    /// The first value of a header (case-insensitive name).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }

    /// Every value of a header.
    pub fn header_all(&self, name: &str) -> Vec<&str> {
        self.headers.iter().filter(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str()).collect()
    }

    /// The body as JSON, if it is JSON.
    pub fn json(&self) -> Option<Value> {
        serde_json::from_slice(&self.body).ok()
    }

    /// `error.code` of an error body.
    pub fn error_code(&self) -> Option<String> {
        self.json().and_then(|v| v.pointer("/error/code").and_then(Value::as_str).map(str::to_owned))
    }

    /// `error.details` of an error body.
    pub fn error_details(&self) -> Value {
        self.json().and_then(|v| v.pointer("/error/details").cloned()).unwrap_or(Value::Null)
    }

    /// A one-line description for assertions: `404 unknown_negotiation`, `200 {"negotiation_id":...}`.
    pub fn summary(&self) -> String {
        match self.error_code() {
            Some(code) => format!("{} {code}", self.status),
            None if self.body.is_empty() => format!("{} (no body)", self.status),
            None => {
                let text = String::from_utf8_lossy(&self.body);
                let cut: String = text.chars().take(160).collect();
                let more = if text.chars().count() > 160 { "..." } else { "" };
                format!("{} {cut}{more}", self.status)
            }
        }
    }

    /// The record of the response for a report.
    pub fn record(&self) -> ReceivedResponse {
        let (body, body_bytes, body_truncated) = excerpt(Some(&self.body));
        ReceivedResponse {
            status: self.status,
            version: self.version.clone(),
            headers: self.headers.clone(),
            body,
            body_bytes,
            body_truncated,
            elapsed_ms: self.elapsed.as_millis() as u64,
        }
    }
}

fn excerpt(body: Option<&[u8]>) -> (Option<String>, usize, bool) {
    match body {
        None => (None, 0, false),
        Some([]) => (None, 0, false),
        Some(b) => {
            let cut = &b[..b.len().min(EXCERPT)];
            (Some(String::from_utf8_lossy(cut).into_owned()), b.len(), b.len() > EXCERPT)
        }
    }
}

/// Sends a request (already signed) and reads the whole response, within `timeout`.
pub async fn send(client: &reqwest::Client, req: &Req, timeout: Duration) -> Result<Resp, String> {
    let method = reqwest::Method::from_bytes(req.method.as_bytes()).map_err(|e| format!("bad method: {e}"))?;
    let mut rb = client.request(method, &req.url).timeout(req.timeout.unwrap_or(timeout));
    for (name, value) in &req.headers {
        let name = reqwest::header::HeaderName::from_bytes(name.as_bytes())
            .map_err(|e| format!("header name {name:?} cannot be sent: {e}"))?;
        let value = reqwest::header::HeaderValue::from_bytes(value.as_bytes())
            .map_err(|e| format!("header value {value:?} cannot be sent: {e}"))?;
        rb = rb.header(name, value);
    }
    if let Some(body) = &req.body {
        rb = rb.body(body.clone());
    }
    let started = Instant::now();
    let resp = rb.send().await.map_err(|e| describe(&e))?;
    let status = resp.status().as_u16();
    let version = format!("{:?}", resp.version());
    let headers = resp
        .headers()
        .iter()
        .map(|(n, v)| (n.as_str().to_owned(), String::from_utf8_lossy(v.as_bytes()).into_owned()))
        .collect();
    let body = resp.bytes().await.map_err(|e| format!("reading the body: {}", describe(&e)))?.to_vec();
    Ok(Resp { status, version, headers, body, elapsed: started.elapsed() })
}

/// An error with its causes (reqwest's own message is often just "error sending request").
pub(crate) fn describe(e: &reqwest::Error) -> String {
    let s = a2a_core::error::with_causes(e);
    if e.is_timeout() { format!("{s} (timed out)") } else { s }
}
