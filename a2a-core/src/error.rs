//! The error table of the protocol (`spec/PROTOCOL.md` §12): every error has a stable code, an HTTP status and a
//! default human message, declared once, here.
//!
//! An error on the wire is the JSON object [`ErrorBody`]:
//!
//! ```json
//! {"error": {"code": "unknown_negotiation", "message": "...", "details": {}}, "fallback_options": []}
//! ```
//!
//! Codes are open: a peer may send a code this table does not know; [`ErrorCode`] keeps it as a string.

use std::borrow::Cow;
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::wire::FallbackOption;

/// Where an error code is used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// Sent as an HTTP error response with this status.
    Http(u16),
    /// Appears only inside the `error` of a terminal execution read through RESULT (the RESULT call itself succeeds).
    Execution,
}

/// A stable, machine-readable error code such as `unknown_negotiation`.
///
/// The associated constants are the codes defined by the specification; [`ErrorCode::kind`] and
/// [`ErrorCode::default_message`] read the table. Unknown codes received from a peer are kept as they are.
#[derive(Clone, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(transparent)]
pub struct ErrorCode(pub Cow<'static, str>);

impl ErrorCode {
    /// Builds a code from a static string (for codes the table defines use the constants).
    pub const fn new(code: &'static str) -> Self {
        ErrorCode(Cow::Borrowed(code))
    }

    /// The code as a string.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The table entry of this code, if the specification defines it.
    pub fn entry(&self) -> Option<&'static TableEntry> {
        TABLE.iter().find(|e| e.code == self.as_str())
    }

    /// Where the code is used; an unknown code is treated as an HTTP 500.
    pub fn kind(&self) -> ErrorKind {
        self.entry().map_or(ErrorKind::Http(500), |e| e.kind)
    }

    /// The HTTP status to answer with: the table's, or 500 for an execution-only or unknown code.
    pub fn http_status(&self) -> u16 {
        match self.kind() {
            ErrorKind::Http(s) => s,
            ErrorKind::Execution => 500,
        }
    }

    /// The default human message of the code.
    pub fn default_message(&self) -> &'static str {
        self.entry().map_or("unknown error", |e| e.message)
    }
}

impl fmt::Debug for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ErrorCode({})", self.0)
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// One row of the error table.
#[derive(Debug)]
pub struct TableEntry {
    /// The stable code.
    pub code: &'static str,
    /// Where it is used and with which HTTP status.
    pub kind: ErrorKind,
    /// The default human message; responses may give a more specific one.
    pub message: &'static str,
}

macro_rules! error_table {
    ($( $(#[$doc:meta])* $konst:ident = $code:literal, $kind:expr, $msg:literal; )*) => {
        impl ErrorCode {
            $( $(#[$doc])* pub const $konst: ErrorCode = ErrorCode::new($code); )*
        }
        /// The whole table, in specification order.
        pub static TABLE: &[TableEntry] = &[
            $( TableEntry { code: $code, kind: $kind, message: $msg }, )*
        ];
    };
}

use ErrorKind::{Execution, Http};

error_table! {
    // --- the request itself ---
    /// The `A2A-Version` request header is missing.
    VERSION_REQUIRED = "version_required", Http(400),
        "the A2A-Version header is missing; send `A2A-Version: 0.3`";
    /// The `A2A-Version` request header names a version this agent does not speak.
    UNSUPPORTED_VERSION = "unsupported_version", Http(400),
        "this agent does not speak the requested protocol version; see details.supported_versions";
    /// The `A2A-Sender-ID` request header is missing.
    SENDER_REQUIRED = "sender_required", Http(400),
        "the A2A-Sender-ID header is missing; send the caller's DID (e.g. did:web:agent.example.com)";
    /// The `A2A-Sender-ID` request header is not a valid did:web DID.
    INVALID_SENDER = "invalid_sender", Http(400),
        "the A2A-Sender-ID header is not a valid did:web DID";
    /// An A2A header other than version and sender is malformed.
    INVALID_HEADER = "invalid_header", Http(400),
        "an A2A header is malformed; see details.header";
    /// The body is not well-formed JSON.
    INVALID_JSON = "invalid_json", Http(400),
        "the request body is not well-formed JSON";
    /// The body is JSON but not the message the endpoint expects.
    INVALID_REQUEST = "invalid_request", Http(400),
        "the request body does not have the shape this endpoint expects; see details";
    /// The body is not `application/json`.
    UNSUPPORTED_MEDIA_TYPE = "unsupported_media_type", Http(415),
        "the request body must be sent with `Content-Type: application/json`";
    /// The body is larger than the agent accepts.
    PAYLOAD_TOO_LARGE = "payload_too_large", Http(413),
        "the request body is larger than this agent accepts; see details.limit_bytes";
    /// The request headers are larger or more numerous than the agent accepts.
    HEADERS_TOO_LARGE = "headers_too_large", Http(431),
        "the request headers are too large or too many";
    /// The client was too slow sending the request.
    REQUEST_TIMEOUT = "request_timeout", Http(408),
        "the request was not received in time";
    /// No endpoint at this path.
    NOT_FOUND = "not_found", Http(404),
        "no A2A endpoint at this path";
    /// The endpoint exists but not for this method.
    METHOD_NOT_ALLOWED = "method_not_allowed", Http(405),
        "this endpoint does not accept this HTTP method; see the Allow header";

    // --- capabilities and negotiation ---
    /// The agent does not offer the requested capability; `fallback_options` says what it can do instead.
    NO_MATCHING_CAPABILITY = "no_matching_capability", Http(404),
        "this agent does not offer the requested capability; see fallback_options";
    /// The capability is restricted to regions the caller is not in.
    REGION_RESTRICTED = "region_restricted", Http(403),
        "the capability is restricted to other regions; send A2A-Region with an allowed region";
    /// The proposed schema breaks the schema rules of NEGOTIATE.
    SCHEMA_RULE_VIOLATION = "schema_rule_violation", Http(422),
        "the proposed schema breaks the schema rules; see details.violations";
    /// The proposed schema cannot be reconciled with what the capability needs.
    SCHEMA_INCOMPATIBLE = "schema_incompatible", Http(409),
        "the proposed schema conflicts with what the capability requires; see details.conflicts";
    /// The caller asked for its proposal unchanged (`strict`), but the agent must tighten it.
    TIGHTENING_REFUSED = "tightening_refused", Http(409),
        "the agent must tighten the proposal but the request was strict; see details.counter_proposal";
    /// EXECUTE without an `A2A-Negotiation-ID` header.
    NEGOTIATION_REQUIRED = "negotiation_required", Http(400),
        "the A2A-Negotiation-ID header is missing; NEGOTIATE first";
    /// The negotiation is unknown, expired, or belongs to another sender.
    UNKNOWN_NEGOTIATION = "unknown_negotiation", Http(404),
        "no such negotiation (unknown, expired or not yours); NEGOTIATE again";
    /// The EXECUTE payload does not match the agreed schema.
    PAYLOAD_INVALID = "payload_invalid", Http(422),
        "the payload does not match the agreed schema; see details.errors";
    /// An idempotency key was reused with a different negotiation or payload.
    IDEMPOTENCY_CONFLICT = "idempotency_conflict", Http(409),
        "this Idempotency-Key was already used for a different request";

    // --- executions ---
    /// The execution is unknown, expired, or belongs to another sender.
    UNKNOWN_EXECUTION = "unknown_execution", Http(404),
        "no such execution (unknown, expired or not yours)";
    /// The execution is in a state that does not allow this step.
    INVALID_STATE = "invalid_state", Http(409),
        "the execution is in a state that does not allow this step; see details.status";

    // --- sessions and conversations (§17) ---
    /// The session is unknown, stale, ended, or not visible to the sender.
    UNKNOWN_SESSION = "unknown_session", Http(404),
        "no such session (unknown, stale, ended or not visible to you); list sessions with GET /a2a/sessions";
    /// The run is unknown, expired, or not the sender's.
    UNKNOWN_RUN = "unknown_run", Http(404),
        "no such run (unknown, expired or not yours)";
    /// The session key is held by another owner or names a hosted session.
    SESSION_CONFLICT = "session_conflict", Http(409),
        "this session key is already registered by another owner; choose another key";
    /// A target label names more than one visible session.
    AMBIGUOUS_LABEL = "ambiguous_label", Http(409),
        "the label names more than one session; send to a session key (see details.candidates)";
    /// A waiting send would close a cycle of sessions waiting on each other.
    WAIT_CYCLE = "wait_cycle", Http(409),
        "this send would wait on a session that is already waiting on this chain (see details.cycle); send without waiting (wait_ms 0)";
    /// A chain of sends made while handling deliveries is too long.
    HOP_LIMIT = "hop_limit", Http(409),
        "too many sends in this chain of deliveries (A2A-Hop); answer without sending on";
    /// A spawn would exceed a limit.
    SPAWN_LIMIT = "spawn_limit", Http(429),
        "a spawn limit is reached (see details.limit); wait for workers to finish";

    // --- composite capabilities (§19) ---
    /// A step of a composite cannot run with the input its pipeline gives it (NEGOTIATE, CMP-8).
    COMPOSITE_UNSATISFIABLE = "composite_unsatisfiable", Http(409),
        "a step of this composite capability cannot run with the input its pipeline gives it; see details.step and details.reason";

    // --- authentication and policy ---
    /// The capability requires credentials that were not sent.
    AUTH_REQUIRED = "auth_required", Http(401),
        "this capability requires authentication; see details.auth_requirement";
    /// The credentials sent are not valid.
    AUTH_INVALID = "auth_invalid", Http(401),
        "the credentials are not valid";
    /// Policy requires `did_auth` for this caller (e.g. a cross-domain call).
    DID_AUTH_REQUIRED = "did_auth_required", Http(403),
        "calls from outside this agent's internal domains must be signed (did_auth)";
    /// Policy forbids this call.
    FORBIDDEN = "forbidden", Http(403),
        "the policy of this agent forbids this call";

    // --- message integrity ---
    /// The capability requires a signed request and there is no `A2A-Signature`.
    SIGNATURE_REQUIRED = "signature_required", Http(401),
        "this request must carry an A2A-Signature (did_auth)";
    /// `A2A-Signature` is not a well-formed compact JWS with the required claims.
    SIGNATURE_MALFORMED = "signature_malformed", Http(401),
        "the A2A-Signature header is not a well-formed ES256 compact JWS with the required claims";
    /// The JWS `alg` is not `ES256`.
    UNSUPPORTED_ALGORITHM = "unsupported_algorithm", Http(401),
        "only ES256 (ECDSA P-256 with SHA-256) signatures are accepted";
    /// The signing key is not an ECDSA P-256 key.
    UNSUPPORTED_KEY_TYPE = "unsupported_key_type", Http(401),
        "the key is not an ECDSA P-256 key; only P-256 (secp256r1) is accepted";
    /// The `kid` does not name a verification method of the sender's DID document.
    UNKNOWN_KEY = "unknown_key", Http(401),
        "the key id is not a verification method of the sender's DID document";
    /// The sender's DID document could not be resolved.
    DID_RESOLUTION_FAILED = "did_resolution_failed", Http(401),
        "the sender's DID document could not be resolved";
    /// `iss`, the `kid`'s DID and `A2A-Sender-ID` do not agree.
    SENDER_MISMATCH = "sender_mismatch", Http(401),
        "the signature's issuer, key id and A2A-Sender-ID do not name the same DID";
    /// `aud` is not this agent.
    AUDIENCE_MISMATCH = "audience_mismatch", Http(401),
        "the signature is addressed to another agent (aud)";
    /// The ECDSA signature does not verify.
    SIGNATURE_INVALID = "signature_invalid", Http(401),
        "the signature does not verify with the sender's key";
    /// The signed method, path, headers or body do not match the request.
    INTEGRITY_MISMATCH = "integrity_mismatch", Http(401),
        "the request does not match what was signed; see details.mismatch";
    /// `exp` is more than 30 s in the past.
    SIGNATURE_EXPIRED = "signature_expired", Http(401),
        "the signature has expired (exp, with 30 s of tolerance)";
    /// `iat` or `nbf` is more than 30 s in the future.
    SIGNATURE_NOT_YET_VALID = "signature_not_yet_valid", Http(401),
        "the signature is not valid yet (iat or nbf in the future beyond 30 s); check the sender's clock";
    /// `exp - iat` is longer than allowed.
    SIGNATURE_LIFETIME_EXCEEDED = "signature_lifetime_exceeded", Http(401),
        "the signature's lifetime (exp - iat) exceeds 300 s";
    /// The `jti` of this signed request was seen before.
    REPLAYED_REQUEST = "replayed_request", Http(401),
        "this signed request was already received (replay); sign every request afresh";
    /// The request's time is too far from the receiver's clock (gateway policy).
    CLOCK_SKEW = "clock_skew", Http(401),
        "the request's time is too far from this receiver's clock; synchronise the sender's clock (NTP)";

    // --- operations ---
    /// Too many requests from this sender.
    RATE_LIMITED = "rate_limited", Http(429),
        "too many requests; retry after the Retry-After delay";
    /// The sender holds its share of a bounded resource of the agent (negotiations, executions waiting for CONFIRM,
    /// replay nonces; LIM-4, LIM-5).
    QUOTA_EXCEEDED = "quota_exceeded", Http(429),
        "you hold your share of this agent's state (see details.quota and details.limit); retry after the Retry-After delay";
    /// The agent is at its concurrency limit.
    OVERLOADED = "overloaded", Http(503),
        "the agent is at its limit of concurrent executions; retry after the Retry-After delay";
    /// The state store is unreachable.
    STORE_UNAVAILABLE = "store_unavailable", Http(503),
        "the agent's state store is unavailable; retry later";
    /// A gateway could not reach the agent.
    AGENT_UNAVAILABLE = "agent_unavailable", Http(502),
        "the gateway could not reach an agent for this request";
    /// A gateway timed out waiting for the agent.
    AGENT_TIMEOUT = "agent_timeout", Http(504),
        "the agent did not answer the gateway in time";
    /// An unexpected failure inside the agent.
    INTERNAL_ERROR = "internal_error", Http(500),
        "internal error";
    /// The request uses an HTTP feature the receiver does not implement (a transfer coding other than chunked).
    NOT_IMPLEMENTED = "not_implemented", Http(501),
        "the request uses an HTTP feature this receiver does not implement (e.g. a transfer coding other than chunked)";

    // --- failures of an execution, read through RESULT ---
    /// The handler reported a failure.
    HANDLER_FAILED = "handler_failed", Execution,
        "the capability's handler failed; see the message";
    /// The execution ran past its deadline.
    TIMED_OUT = "timed_out", Execution,
        "the execution did not finish before its deadline (timeout_ms)";
    /// The execution was canceled.
    CANCELED = "canceled", Execution,
        "the execution was canceled";
    /// The execution was never confirmed and its confirm window elapsed.
    CONFIRM_WINDOW_ELAPSED = "confirm_window_elapsed", Execution,
        "the execution was not confirmed within its confirm window and never ran";
    /// The session a run was waiting on ended.
    SESSION_ENDED = "session_ended", Execution,
        "the target session ended before it replied";
    /// A step of a composite failed, timed out or was canceled (CMP-11).
    STEP_FAILED = "step_failed", Execution,
        "a step of the composite capability failed; see details.failed_step and details.steps";
    /// The handler's result does not match the capability's declared output schema.
    OUTPUT_INVALID = "output_invalid", Execution,
        "the handler's result does not match the capability's output schema";
    /// A streamed execution emitted more progress than its stream may keep (§18, STR-8).
    STREAM_LIMIT_EXCEEDED = "stream_limit_exceeded", Execution,
        "the execution's stream reached its event or byte limit; later progress was dropped, the result still follows";
}

/// The JSON body of every error response.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ErrorBody {
    /// The error.
    pub error: ErrorObject,
    /// Alternatives the caller may use instead; present on every capability-mismatch error
    /// (`no_matching_capability`, `schema_incompatible`, `region_restricted`), possibly empty.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fallback_options: Option<Vec<FallbackOption>>,
}

/// The `error` member of an [`ErrorBody`], also used for a failed execution.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ErrorObject {
    /// The stable code.
    pub code: ErrorCode,
    /// A message for people: what happened and what to do next.
    pub message: String,
    /// Machine-readable details; their shape depends on the code (see the specification).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub details: Option<serde_json::Value>,
}

/// An error with everything needed to answer it: code, message, details and fallback options.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{}: {}", .code, .message)]
pub struct A2aError {
    /// The stable code.
    pub code: ErrorCode,
    /// A message for people.
    pub message: String,
    /// Machine-readable details.
    pub details: Option<serde_json::Value>,
    /// Fallback options for capability mismatches.
    pub fallback_options: Option<Vec<FallbackOption>>,
}

impl A2aError {
    /// An error with the code's default message.
    pub fn new(code: ErrorCode) -> Self {
        let message = code.default_message().to_owned();
        A2aError { code, message, details: None, fallback_options: None }
    }

    /// An error with a specific message.
    pub fn with_message(code: ErrorCode, message: impl Into<String>) -> Self {
        A2aError { code, message: message.into(), details: None, fallback_options: None }
    }

    /// Adds machine-readable details.
    #[must_use]
    pub fn details(mut self, details: serde_json::Value) -> Self {
        self.details = Some(details);
        self
    }

    /// Adds fallback options.
    #[must_use]
    pub fn fallback(mut self, options: Vec<FallbackOption>) -> Self {
        self.fallback_options = Some(options);
        self
    }

    /// The HTTP status to answer with.
    pub fn http_status(&self) -> u16 {
        self.code.http_status()
    }

    /// The wire body.
    pub fn to_body(&self) -> ErrorBody {
        ErrorBody {
            error: ErrorObject {
                code: self.code.clone(),
                message: self.message.clone(),
                details: self.details.clone(),
            },
            fallback_options: self.fallback_options.clone(),
        }
    }
}

impl From<ErrorBody> for A2aError {
    fn from(b: ErrorBody) -> Self {
        A2aError {
            code: b.error.code,
            message: b.error.message,
            details: b.error.details,
            fallback_options: b.fallback_options,
        }
    }
}

/// An error answer as it goes on the wire, rendered the same way at the agent and the gateway
/// ([`A2aError::render`]): the status and JSON body of ERR-1 and the header fields ERR-3 asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RenderedError {
    /// The HTTP status (the code's, ERR-1).
    pub status: u16,
    /// The [`ErrorBody`] as JSON.
    pub body: Vec<u8>,
    /// The header fields, lower-case names: `content-type`, then `retry-after`, `allow` and `www-authenticate` when
    /// they apply.
    pub headers: Vec<(&'static str, Cow<'static, str>)>,
}

impl A2aError {
    /// This error as an answer (ERR-1, ERR-3): its status and [`ErrorBody`]; `Retry-After` from
    /// `details.retry_after_s` when the details carry it, else 1 s on every `429` and `503`; `Allow` (the methods a
    /// `405` names) and `WWW-Authenticate` (an `oauth2` challenge, §16) as given.
    pub fn render(&self, allow: Option<&'static str>, www_authenticate: Option<&'static str>) -> RenderedError {
        let status = self.http_status();
        let body = serde_json::to_vec(&self.to_body()).unwrap_or_else(|_| b"{}".to_vec());
        let mut headers = vec![("content-type", Cow::Borrowed("application/json"))];
        let retry = self.details.as_ref().and_then(|d| d.get("retry_after_s")).and_then(serde_json::Value::as_u64);
        if let Some(s) = retry.or(matches!(status, 429 | 503).then_some(1)) {
            headers.push(("retry-after", Cow::Owned(s.to_string())));
        }
        if let Some(a) = allow {
            headers.push(("allow", Cow::Borrowed(a)));
        }
        if let Some(w) = www_authenticate {
            headers.push(("www-authenticate", Cow::Borrowed(w)));
        }
        RenderedError { status, body, headers }
    }
}

/// An error and its causes, `: `-separated (`error sending request: connection refused`), each cause left out when
/// the text so far already says it: HTTP clients' own messages often hide the cause that tells the user what to do.
pub fn with_causes(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        let text = c.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        cause = c.source();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_unique_lower_snake_case_and_have_messages() {
        let mut seen = std::collections::HashSet::new();
        for e in TABLE {
            assert!(seen.insert(e.code), "duplicate code {}", e.code);
            assert!(e.code.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'), "{}", e.code);
            assert!(!e.message.is_empty());
            if let ErrorKind::Http(s) = e.kind {
                assert!((400..600).contains(&s), "{} has status {s}", e.code);
            }
        }
    }

    #[test]
    fn unknown_code_round_trips_and_maps_to_500() {
        let body: ErrorBody = serde_json::from_str(r#"{"error":{"code":"brand_new","message":"x"}}"#).expect("parses");
        assert_eq!(body.error.code.as_str(), "brand_new");
        assert_eq!(body.error.code.http_status(), 500);
    }

    #[test]
    fn render_sets_the_err3_headers() {
        let r = A2aError::new(ErrorCode::OVERLOADED).render(None, None);
        assert_eq!(r.status, 503);
        assert_eq!(r.headers, vec![("content-type", "application/json".into()), ("retry-after", "1".into())]);
        let body: ErrorBody = serde_json::from_slice(&r.body).expect("an ErrorBody");
        assert_eq!(body.error.code, ErrorCode::OVERLOADED);

        let r =
            A2aError::new(ErrorCode::RATE_LIMITED).details(serde_json::json!({"retry_after_s": 7})).render(None, None);
        assert_eq!(r.headers[1], ("retry-after", "7".into()));

        let r = A2aError::new(ErrorCode::METHOD_NOT_ALLOWED).render(Some("POST, OPTIONS"), None);
        assert_eq!(r.status, 405);
        assert_eq!(r.headers, vec![("content-type", "application/json".into()), ("allow", "POST, OPTIONS".into())]);

        let r = A2aError::new(ErrorCode::AUTH_REQUIRED).render(None, Some("Bearer realm=\"a2a\""));
        assert_eq!(r.status, 401);
        assert_eq!(r.headers[1], ("www-authenticate", "Bearer realm=\"a2a\"".into()));
        assert_eq!(r.headers.len(), 2);
    }

    #[test]
    fn constants_read_the_table() {
        assert_eq!(ErrorCode::UNKNOWN_NEGOTIATION.http_status(), 404);
        assert_eq!(ErrorCode::PAYLOAD_TOO_LARGE.http_status(), 413);
        assert_eq!(ErrorCode::TIMED_OUT.kind(), ErrorKind::Execution);
    }
}
