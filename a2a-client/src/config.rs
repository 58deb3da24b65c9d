//! The client's configuration. Every limit is explicit and has a default that suits a service (CLI-4).

use std::time::Duration;

use a2a_core::integrity::Coverage;

/// When the client signs its requests (`A2A-Signature`, §9.5).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SigningMode {
    /// Never sign (an identity without a key is always in this mode).
    Never,
    /// Sign the requests about a capability that declares `did_auth`, and any request an agent refused with
    /// `signature_required` or `did_auth_required` (repeated once, signed). The default when the identity has a key.
    Auto,
    /// Sign every request except DISCOVER and the capabilities document.
    Always,
}

/// What the client does with signed responses (INT-10).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResponseVerification {
    /// Ignore `A2A-Signature` on responses.
    Off,
    /// Verify a response that carries `A2A-Signature` and refuse it if it does not verify (the default).
    IfSigned,
    /// Refuse every response that is not signed by the agent.
    Required,
}

/// How the client resolves agents' DIDs to verify signed responses (§9.1.5; `a2a_core::resolver::HttpResolver`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct DidResolution {
    /// Resolve `did:web:localhost...` DIDs over plain HTTP (DID-13: tests and local development only).
    pub allow_http_loopback: bool,
    /// Allow DID documents on private, loopback and link-local addresses (DID-29: never in production).
    pub allow_private_addresses: bool,
}

/// The client's configuration; `ClientConfig::default()` is what a service should start from.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ClientConfig {
    /// The longest any single request may take (a RESULT long-poll adds its `wait_ms`). Default 10 s.
    pub step_timeout: Duration,
    /// The longest a TCP/TLS connection may take to open. Default 3 s.
    pub connect_timeout: Duration,
    /// The default overall deadline of [`crate::Client::call`]. Default 60 s.
    pub call_deadline: Duration,
    /// Retries of a safe step after a transient failure (connection refused, timeout, 429, 502-504). Default 2.
    pub max_retries: u32,
    /// The longest `Retry-After` the client honours before giving up. Default 10 s.
    pub max_retry_after: Duration,
    /// How long a DISCOVER answer (and capabilities document) is cached (CLI-1, DISC-4). Default 5 min.
    pub discover_ttl: Duration,
    /// How many agents' DISCOVER answers are cached (least recently used evicted first). Default 1 024.
    pub discover_capacity: u64,
    /// How many agreed schemas are cached until their negotiation expires. Default 4 096.
    pub negotiation_capacity: u64,
    /// The cap of the RESULT polling backoff when the agent offers no long-poll (CLI-2). Default 1.6 s.
    pub poll_cap: Duration,
    /// The largest response body read, in bytes. Default 16 MiB.
    pub max_response_bytes: usize,
    /// When requests are signed. Default [`SigningMode::Auto`].
    pub signing: SigningMode,
    /// The coverage of signed requests that have a body (`payload_hash` by default; requests without a body are
    /// signed `header_only`).
    pub body_coverage: Coverage,
    /// The lifetime of a request signature, in seconds (1-300). Default 60.
    pub signature_lifetime_secs: u32,
    /// What to do with signed responses. Default [`ResponseVerification::IfSigned`].
    pub response_verification: ResponseVerification,
    /// How agents' DIDs are resolved.
    pub did_resolution: DidResolution,
    /// The caller's region, sent as `A2A-Region` on NEGOTIATE and EXECUTE (CAP-13).
    pub region: Option<String>,
    /// Extra trusted root certificates (PEM), for agents and DID documents served with a private CA.
    pub extra_roots_pem: Vec<Vec<u8>>,
}

impl Default for ClientConfig {
    fn default() -> Self {
        ClientConfig {
            step_timeout: Duration::from_secs(10),
            connect_timeout: Duration::from_secs(3),
            call_deadline: Duration::from_secs(60),
            max_retries: 2,
            max_retry_after: Duration::from_secs(10),
            discover_ttl: Duration::from_secs(300),
            discover_capacity: 1024,
            negotiation_capacity: 4096,
            poll_cap: crate::backoff::DEFAULT_CAP,
            max_response_bytes: 16 * 1024 * 1024,
            signing: SigningMode::Auto,
            body_coverage: Coverage::PayloadHash,
            signature_lifetime_secs: 60,
            response_verification: ResponseVerification::IfSigned,
            did_resolution: DidResolution::default(),
            region: None,
            extra_roots_pem: Vec::new(),
        }
    }
}

impl ClientConfig {
    /// Sets the per-request timeout.
    #[must_use]
    pub fn with_step_timeout(mut self, d: Duration) -> Self {
        self.step_timeout = d;
        self
    }

    /// Sets the default overall deadline of a call.
    #[must_use]
    pub fn with_call_deadline(mut self, d: Duration) -> Self {
        self.call_deadline = d;
        self
    }

    /// Sets the number of retries of safe steps.
    #[must_use]
    pub fn with_max_retries(mut self, n: u32) -> Self {
        self.max_retries = n;
        self
    }

    /// Sets the DISCOVER cache lifetime.
    #[must_use]
    pub fn with_discover_ttl(mut self, d: Duration) -> Self {
        self.discover_ttl = d;
        self
    }

    /// Sets when requests are signed.
    #[must_use]
    pub fn with_signing(mut self, mode: SigningMode) -> Self {
        self.signing = mode;
        self
    }

    /// Sets the coverage of signed requests with a body.
    #[must_use]
    pub fn with_body_coverage(mut self, coverage: Coverage) -> Self {
        self.body_coverage = coverage;
        self
    }

    /// Sets what happens with signed responses.
    #[must_use]
    pub fn with_response_verification(mut self, v: ResponseVerification) -> Self {
        self.response_verification = v;
        self
    }

    /// Sets how agents' DIDs are resolved.
    #[must_use]
    pub fn with_did_resolution(mut self, allow_http_loopback: bool, allow_private_addresses: bool) -> Self {
        self.did_resolution = DidResolution { allow_http_loopback, allow_private_addresses };
        self
    }

    /// Sets the caller's region (`A2A-Region`).
    #[must_use]
    pub fn with_region(mut self, region: impl Into<String>) -> Self {
        self.region = Some(region.into());
        self
    }

    /// Trusts another root certificate (PEM).
    #[must_use]
    pub fn with_root_certificate(mut self, pem: impl Into<Vec<u8>>) -> Self {
        self.extra_roots_pem.push(pem.into());
        self
    }

    /// Sets the RESULT polling cap.
    #[must_use]
    pub fn with_poll_cap(mut self, d: Duration) -> Self {
        self.poll_cap = d;
        self
    }
}
