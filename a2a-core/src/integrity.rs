//! `message_integrity`: signed requests and responses (`spec/PROTOCOL.md`, requirements `INT-*`).
//!
//! A signed message carries `A2A-Signature: <compact JWS>`, an ES256 token with the protected header
//! `{"alg":"ES256","kid":"<sender DID>#<key id>","typ":"a2a-sig+jwt"}` and the claims [`SignatureClaims`]: who signs
//! (`iss`), for whom (`aud`), when (`iat`, `exp`, optional `nbf`), a unique `jti`, the method (`htm`), the request target
//! (`htu`), for a response its status (`sts`), and `message_integrity`: the covered headers with their exact values and,
//! depending on the [`Coverage`], the SHA-256 of the body.
//!
//! Signing is [`sign`]. Verification is split in two so that the caller can resolve the sender's key (DID resolution,
//! asynchronous, elsewhere) in between: [`prepare`] runs the checks that need no key (steps 1–6), and
//! [`PendingVerification::finish`] verifies the signature and the coverage (steps 7–8). The order is fixed, so the error
//! code for a given input is deterministic:
//!
//! | step | check | error code |
//! |---|---|---|
//! | 1 | compact JWS syntax; `alg` is `ES256` | `signature_malformed`; `unsupported_algorithm` |
//! | 2 | `typ` is `a2a-sig+jwt`; `kid` is `<DID>#<key id>` | `signature_malformed` |
//! | 3 | claims present and well typed; `hash` is `sha256`; `key_id` is the `kid` fragment | `signature_malformed` |
//! | 4 | `iss` = `A2A-Sender-ID` = DID of `kid` | `sender_mismatch` |
//! | 5 | `aud` = the receiver's DID | `audience_mismatch` |
//! | 6 | `exp`+30 ≥ now; `iat`, `nbf` ≤ now+30; `exp`−`iat` ≤ 300 | `signature_expired`, `signature_not_yet_valid`, `signature_lifetime_exceeded` |
//! | 7 | ECDSA P-256 signature | `signature_invalid` |
//! | 8 | `htm`, `htu`, `sts`, headers, body | `integrity_mismatch` |
//!
//! Replay protection (remembering `jti` until `exp` + 30 s) is stateful and belongs to the receiver; [`VerifiedMessage`]
//! exposes `iss`, `jti` and `exp` for it.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use sha2::{Digest as _, Sha256};

use crate::error::ErrorCode;
use crate::jws::{self, JwsError, JwsHeader};
use crate::keys::{KeyError, SigningKey, VerifyingKey};

/// Clock leeway for `exp`, `iat` and `nbf`, in seconds.
pub const LEEWAY_SECS: u64 = 30;
/// The longest lifetime `exp - iat` a signature may have, in seconds.
pub const MAX_LIFETIME_SECS: u64 = 300;
/// The `typ` of an A2A signature's protected header.
pub const TYP: &str = "a2a-sig+jwt";
/// The only `message_integrity.hash` defined.
pub const HASH_SHA256: &str = "sha256";
/// The longest key id (the `kid` fragment), in characters.
pub const MAX_KEY_ID_LEN: usize = 128;
/// Bounds of the `jti` length, in characters.
pub const JTI_LEN: std::ops::RangeInclusive<usize> = 16..=128;
/// The headers that every signature must cover.
pub const REQUIRED_HEADERS: [&str; 2] = [crate::headers::A2A_VERSION, crate::headers::A2A_SENDER_ID];

/// What the signature covers besides method, target and the covered headers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Coverage {
    /// Method, target and headers only; the body is not covered.
    HeaderOnly,
    /// Adds `body` = base64url(SHA-256(RFC 8785 canonical form of the body parsed as JSON)): survives re-serialisation.
    PayloadHash,
    /// Adds `body` = base64url(SHA-256(the raw body bytes exactly as sent)): any body, including empty or non-JSON.
    FullPayload,
}

impl Coverage {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Coverage::HeaderOnly => "header_only",
            Coverage::PayloadHash => "payload_hash",
            Coverage::FullPayload => "full_payload",
        }
    }
}

impl fmt::Display for Coverage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The hash algorithm of `message_integrity` (only `sha256` is defined).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
pub enum HashAlgorithm {
    /// SHA-256.
    #[serde(rename = "sha256")]
    Sha256,
}

/// The `message_integrity` claim.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MessageIntegrity {
    /// Always `sha256`.
    pub hash: HashAlgorithm,
    /// The key id: the fragment of the header's `kid` (e.g. `key-2024-q3-primary`).
    pub key_id: String,
    /// What is covered.
    pub coverage: Coverage,
    /// Every covered header of the message (lower-case name → exact value, surrounding blanks trimmed).
    #[serde(deserialize_with = "unique_string_map")]
    pub headers: BTreeMap<String, String>,
    /// base64url(SHA-256(...)) of the body per `coverage`; absent for `header_only`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<String>,
}

/// Deserialises a JSON object of strings, refusing a member name that appears twice.
fn unique_string_map<'de, D: serde::Deserializer<'de>>(d: D) -> Result<BTreeMap<String, String>, D::Error> {
    struct V;
    impl<'de> serde::de::Visitor<'de> for V {
        type Value = BTreeMap<String, String>;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("an object of strings")
        }
        fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            let mut out = BTreeMap::new();
            while let Some((k, v)) = map.next_entry::<String, String>()? {
                if out.contains_key(&k) {
                    return Err(serde::de::Error::custom(format!("duplicate header {k:?}")));
                }
                out.insert(k, v);
            }
            Ok(out)
        }
    }
    d.deserialize_map(V)
}

/// The claims of an `A2A-Signature` token.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SignatureClaims {
    /// The sender's DID; equals `A2A-Sender-ID` and the DID of `kid`.
    pub iss: String,
    /// The receiver's DID (for a request, the agent's `A2A-Sender-ID` learned from DISCOVER; for a response, the
    /// requester's DID).
    pub aud: String,
    /// Issued at (seconds since the Unix epoch).
    pub iat: i64,
    /// Expires at (seconds since the Unix epoch); `exp - iat` ≤ 300.
    pub exp: i64,
    /// Not before (seconds since the Unix epoch).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nbf: Option<i64>,
    /// A unique id of at least 128 random bits, base64url, 16 to 128 characters.
    pub jti: String,
    /// The HTTP method of the request, upper case (for a response, of the request it answers).
    pub htm: String,
    /// The request target exactly as sent on the request line (path and query), for a response that of its request.
    pub htu: String,
    /// Responses only: the HTTP status code.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sts: Option<u16>,
    /// What is covered and how.
    pub message_integrity: MessageIntegrity,
}

/// The parts of an HTTP message that a signature covers.
#[derive(Debug, Clone, Copy)]
pub struct MessageParts<'a> {
    /// The request method (`POST`); for a response, the method of the request it answers.
    pub method: &'a str,
    /// The request target as on the request line (`/a2a/result/x?wait_ms=100`); for a response, that of its request.
    pub target: &'a str,
    /// Every header of the message (any case); the covered ones are picked from these.
    pub headers: &'a [(&'a str, &'a str)],
    /// The body exactly as sent (empty if none).
    pub body: &'a [u8],
    /// For a response, its status code; `None` for a request.
    pub status: Option<u16>,
}

/// Which part of the message does not match what was signed.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Mismatch {
    /// `htm` differs from the method.
    Method {
        /// Signed.
        signed: String,
        /// Actual.
        actual: String,
    },
    /// `htu` differs from the request target.
    Target {
        /// Signed.
        signed: String,
        /// Actual.
        actual: String,
    },
    /// `sts` differs from the response status (or is present on a request / absent on a response).
    Status {
        /// Signed.
        signed: Option<u16>,
        /// Actual.
        actual: Option<u16>,
    },
    /// A covered header has another value than signed.
    HeaderValue {
        /// Lower-case name.
        name: String,
    },
    /// A signed header is absent from the message.
    HeaderMissing {
        /// Lower-case name.
        name: String,
    },
    /// A header that must be covered is present but was not signed.
    UnsignedHeader {
        /// Lower-case name.
        name: String,
    },
    /// A header that must be covered appears more than once.
    DuplicateHeader {
        /// Lower-case name.
        name: String,
    },
    /// The body digest differs (or the body is not JSON under `payload_hash`).
    Body,
}

impl Mismatch {
    /// `method`, `target`, `status`, `header` or `body` (the `details.mismatch` of the error response).
    pub fn part(&self) -> &'static str {
        match self {
            Mismatch::Method { .. } => "method",
            Mismatch::Target { .. } => "target",
            Mismatch::Status { .. } => "status",
            Mismatch::HeaderValue { .. }
            | Mismatch::HeaderMissing { .. }
            | Mismatch::UnsignedHeader { .. }
            | Mismatch::DuplicateHeader { .. } => "header",
            Mismatch::Body => "body",
        }
    }
}

impl fmt::Display for Mismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Mismatch::Method { signed, actual } => write!(f, "the method is {actual:?} but {signed:?} was signed"),
            Mismatch::Target { signed, actual } => write!(f, "the target is {actual:?} but {signed:?} was signed"),
            Mismatch::Status { signed, actual } => write!(f, "the status is {actual:?} but {signed:?} was signed"),
            Mismatch::HeaderValue { name } => write!(f, "header {name} does not have the signed value"),
            Mismatch::HeaderMissing { name } => write!(f, "signed header {name} is missing from the message"),
            Mismatch::UnsignedHeader { name } => write!(f, "header {name} is present but not signed"),
            Mismatch::DuplicateHeader { name } => write!(f, "header {name} appears more than once"),
            Mismatch::Body => f.write_str("the body does not match the signed digest"),
        }
    }
}

/// Why a message could not be signed or verified.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum IntegrityError {
    /// Step 1–3: not a well-formed A2A signature.
    #[error("malformed A2A-Signature: {0}")]
    Malformed(String),
    /// Step 1: `alg` is not `ES256`.
    #[error("{0}")]
    UnsupportedAlgorithm(String),
    /// Step 4: `iss`, the DID of `kid` and `A2A-Sender-ID` disagree.
    #[error("sender mismatch: {0}")]
    SenderMismatch(String),
    /// Step 5: `aud` is not the receiver.
    #[error("the signature is addressed to {found:?}, not to {expected:?}")]
    AudienceMismatch {
        /// The receiver's DID.
        expected: String,
        /// `aud`.
        found: String,
    },
    /// Step 6: expired.
    #[error("the signature expired: exp {exp} + {LEEWAY_SECS} s < now {now}")]
    Expired {
        /// `exp`.
        exp: i64,
        /// The receiver's clock.
        now: i64,
    },
    /// Step 6: `iat` or `nbf` in the future beyond the leeway.
    #[error("the signature is not valid yet: {claim} {value} > now {now} + {LEEWAY_SECS} s; check the sender's clock")]
    NotYetValid {
        /// `iat` or `nbf`.
        claim: &'static str,
        /// Its value.
        value: i64,
        /// The receiver's clock.
        now: i64,
    },
    /// Step 6: `exp - iat` too long.
    #[error("the signature's lifetime exp - iat = {lifetime} s exceeds {MAX_LIFETIME_SECS} s")]
    LifetimeExceeded {
        /// `exp - iat`.
        lifetime: i64,
    },
    /// The caller's key lookup found no key for `kid`.
    #[error("the key {kid} is not a verification method of the sender's DID document")]
    UnknownKey {
        /// The `kid`.
        kid: String,
    },
    /// The key found for `kid` cannot be used (not P-256, malformed).
    #[error("the sender's key cannot be used: {0}")]
    Key(KeyError),
    /// Step 7: the ECDSA signature does not verify.
    #[error("the signature does not verify with the sender's key")]
    SignatureInvalid,
    /// Step 8: the message does not match what was signed.
    #[error("the message does not match what was signed: {0}")]
    Mismatch(Mismatch),
    /// Signing refused its input (bad key id, DID, method, target, lifetime, missing headers, non-JSON body ...).
    #[error("cannot sign: {0}")]
    Unsignable(String),
    /// Step 8 under `payload_hash`: the body is not I-JSON, so it has no canonical form (JCS-11: `invalid_json`).
    #[error("the body is not well-formed JSON, so its payload_hash cannot be checked: {0}")]
    BodyNotJson(crate::canonical::CanonicalError),
}

impl From<KeyError> for IntegrityError {
    fn from(e: KeyError) -> Self {
        IntegrityError::Key(e)
    }
}

impl IntegrityError {
    /// The stable error code of the protocol's error table.
    pub fn code(&self) -> ErrorCode {
        match self {
            IntegrityError::Malformed(_) => ErrorCode::SIGNATURE_MALFORMED,
            IntegrityError::UnsupportedAlgorithm(_) => ErrorCode::UNSUPPORTED_ALGORITHM,
            IntegrityError::SenderMismatch(_) => ErrorCode::SENDER_MISMATCH,
            IntegrityError::AudienceMismatch { .. } => ErrorCode::AUDIENCE_MISMATCH,
            IntegrityError::Expired { .. } => ErrorCode::SIGNATURE_EXPIRED,
            IntegrityError::NotYetValid { .. } => ErrorCode::SIGNATURE_NOT_YET_VALID,
            IntegrityError::LifetimeExceeded { .. } => ErrorCode::SIGNATURE_LIFETIME_EXCEEDED,
            IntegrityError::UnknownKey { .. } => ErrorCode::UNKNOWN_KEY,
            IntegrityError::Key(k) => k.code(),
            IntegrityError::SignatureInvalid => ErrorCode::SIGNATURE_INVALID,
            IntegrityError::Mismatch(_) => ErrorCode::INTEGRITY_MISMATCH,
            IntegrityError::Unsignable(_) => ErrorCode::INTERNAL_ERROR,
            IntegrityError::BodyNotJson(_) => ErrorCode::INVALID_JSON,
        }
    }

    /// A bounded label for metrics and logs.
    pub fn reason(&self) -> &'static str {
        match self {
            IntegrityError::Malformed(_) => "malformed",
            IntegrityError::UnsupportedAlgorithm(_) => "unsupported_algorithm",
            IntegrityError::SenderMismatch(_) => "sender_mismatch",
            IntegrityError::AudienceMismatch { .. } => "audience_mismatch",
            IntegrityError::Expired { .. } => "expired",
            IntegrityError::NotYetValid { .. } => "not_yet_valid",
            IntegrityError::LifetimeExceeded { .. } => "lifetime_exceeded",
            IntegrityError::UnknownKey { .. } => "unknown_key",
            IntegrityError::Key(k) => k.reason(),
            IntegrityError::SignatureInvalid => "signature_invalid",
            IntegrityError::Mismatch(m) => match m {
                Mismatch::Method { .. } => "mismatch_method",
                Mismatch::Target { .. } => "mismatch_target",
                Mismatch::Status { .. } => "mismatch_status",
                Mismatch::HeaderValue { .. } => "mismatch_header_value",
                Mismatch::HeaderMissing { .. } => "mismatch_header_missing",
                Mismatch::UnsignedHeader { .. } => "mismatch_unsigned_header",
                Mismatch::DuplicateHeader { .. } => "mismatch_duplicate_header",
                Mismatch::Body => "mismatch_body",
            },
            IntegrityError::Unsignable(_) => "unsignable",
            IntegrityError::BodyNotJson(_) => "body_not_json",
        }
    }

    /// Machine-readable details for the error response: `{"mismatch": "header", "header": "a2a-negotiation-id"}` for an
    /// integrity mismatch (INT-7), `{"reason": "duplicate_key", "offset": 13}` for a body without a canonical form
    /// (JCS-11, JCS-12), `{"reason": ...}` otherwise.
    pub fn details(&self) -> Value {
        match self {
            IntegrityError::BodyNotJson(e) => json!({"reason": e.reason.as_str(), "offset": e.offset}),
            IntegrityError::Mismatch(m) => match m {
                Mismatch::HeaderValue { name }
                | Mismatch::HeaderMissing { name }
                | Mismatch::UnsignedHeader { name }
                | Mismatch::DuplicateHeader { name } => json!({"mismatch": m.part(), "header": name}),
                _ => json!({"mismatch": m.part()}),
            },
            other => json!({"reason": other.reason()}),
        }
    }
}

fn malformed(msg: impl Into<String>) -> IntegrityError {
    IntegrityError::Malformed(msg.into())
}

fn unsignable(msg: impl Into<String>) -> IntegrityError {
    IntegrityError::Unsignable(msg.into())
}

// ---------------------------------------------------------------------------------------------------------------------
// Syntax helpers
// ---------------------------------------------------------------------------------------------------------------------

/// Whether `s` is a valid key id: 1 to 128 characters of `A-Z a-z 0-9 . _ ~ -`.
pub fn is_valid_key_id(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= MAX_KEY_ID_LEN
        && s.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'~' | b'-'))
}

/// A minimal DID syntax check (`did:<method>:<id>`, method `[a-z0-9]+`, no `#`, `?`, blanks or controls); the full
/// did:web rules live in [`crate::did`].
fn is_plausible_did(s: &str) -> bool {
    let Some(rest) = s.strip_prefix("did:") else { return false };
    let Some((method, id)) = rest.split_once(':') else { return false };
    !method.is_empty()
        && method.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
        && !id.is_empty()
        && s.len() <= 2048
        && !s.bytes().any(|b| b <= b' ' || b == 0x7f || b == b'#' || b == b'?')
}

/// Splits a `kid` `<DID>#<key id>` at its first `#`, checking both parts.
pub fn parse_kid(kid: &str) -> Result<(&str, &str), IntegrityError> {
    let (did, key_id) =
        kid.split_once('#').ok_or_else(|| malformed(format!("kid {kid:?} is not a DID URL <DID>#<key id>")))?;
    if !is_plausible_did(did) {
        return Err(malformed(format!("kid {kid:?}: {did:?} is not a DID")));
    }
    if !is_valid_key_id(key_id) {
        return Err(malformed(format!("kid {kid:?}: the key id must be 1-128 characters of A-Z a-z 0-9 . _ ~ -")));
    }
    Ok((did, key_id))
}

fn is_base64url(s: &str) -> bool {
    s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// Whether a header (lower-case name) must be covered: `a2a-*` except `a2a-signature`, and `idempotency-key`.
pub fn is_covered_header(lower_name: &str) -> bool {
    (lower_name.starts_with("a2a-") && lower_name != crate::headers::A2A_SIGNATURE)
        || lower_name == crate::headers::IDEMPOTENCY_KEY
}

/// The covered headers of a message: lower-case name → value with surrounding spaces and tabs trimmed.
/// A covered header that appears twice is an error.
pub fn covered_headers(headers: &[(&str, &str)]) -> Result<BTreeMap<String, String>, Mismatch> {
    let mut out = BTreeMap::new();
    for (name, value) in headers {
        let lower = name.to_ascii_lowercase();
        if !is_covered_header(&lower) {
            continue;
        }
        let v = value.trim_matches([' ', '\t']).to_owned();
        if out.contains_key(&lower) {
            return Err(Mismatch::DuplicateHeader { name: lower });
        }
        out.insert(lower, v);
    }
    Ok(out)
}

/// The `body` member for a coverage mode: `None` for `header_only`; base64url(SHA-256(JCS(body))) for
/// `payload_hash` (the body must be JSON); base64url(SHA-256(body)) for `full_payload`.
pub fn body_digest(coverage: Coverage, body: &[u8]) -> Result<Option<String>, crate::canonical::CanonicalError> {
    Ok(match coverage {
        Coverage::HeaderOnly => None,
        Coverage::PayloadHash => {
            let canonical = crate::canonical::canonicalize(body)?;
            Some(jws::base64url_encode(Sha256::digest(&canonical)))
        }
        Coverage::FullPayload => Some(jws::base64url_encode(Sha256::digest(body))),
    })
}

fn header_value<'a>(headers: &'a [(&'a str, &'a str)], lower_name: &str) -> Option<&'a str> {
    headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(lower_name)).map(|(_, v)| v.trim_matches([' ', '\t']))
}

// ---------------------------------------------------------------------------------------------------------------------
// Signing
// ---------------------------------------------------------------------------------------------------------------------

/// A fresh `jti`: 128 random bits, base64url (22 characters).
pub fn new_jti() -> Result<String, IntegrityError> {
    let mut b = [0u8; 16];
    getrandom::fill(&mut b).map_err(|_| unsignable("the random source failed"))?;
    Ok(jws::base64url_encode(b))
}

/// Builds the claims that [`sign`] signs, with a fresh `jti`; exposed so that callers (and the vector generator) can
/// inspect or adjust them before [`sign_claims`].
#[allow(clippy::too_many_arguments)]
pub fn build_claims(
    key_id: &str,
    issuer_did: &str,
    audience: &str,
    coverage: Coverage,
    parts: &MessageParts<'_>,
    now_secs: i64,
    lifetime_secs: u32,
) -> Result<SignatureClaims, IntegrityError> {
    if !is_valid_key_id(key_id) {
        return Err(unsignable(format!("key id {key_id:?} must be 1-128 characters of A-Z a-z 0-9 . _ ~ -")));
    }
    if !is_plausible_did(issuer_did) {
        return Err(unsignable(format!("issuer {issuer_did:?} is not a DID")));
    }
    if audience.is_empty() {
        return Err(unsignable("the audience (the receiver's DID) is empty"));
    }
    if lifetime_secs == 0 || u64::from(lifetime_secs) > MAX_LIFETIME_SECS {
        return Err(unsignable(format!("lifetime {lifetime_secs} s is not in 1..={MAX_LIFETIME_SECS}")));
    }
    if parts.method.is_empty() || parts.method.len() > 32 || !parts.method.bytes().all(|b| b.is_ascii_uppercase()) {
        return Err(unsignable(format!("method {:?} must be an upper-case HTTP method", parts.method)));
    }
    if !parts.target.starts_with('/') || parts.target.bytes().any(|b| b <= b' ' || b == 0x7f) {
        return Err(unsignable(format!("target {:?} must be the origin-form request target", parts.target)));
    }
    let headers = covered_headers(parts.headers).map_err(|m| unsignable(m.to_string()))?;
    for required in REQUIRED_HEADERS {
        if !headers.contains_key(required) {
            return Err(unsignable(format!("the message has no {required} header; it must be signed")));
        }
    }
    if headers.get(crate::headers::A2A_SENDER_ID).map(String::as_str) != Some(issuer_did) {
        return Err(unsignable(format!("A2A-Sender-ID must be the issuer {issuer_did:?}")));
    }
    let body = body_digest(coverage, parts.body)
        .map_err(|e| unsignable(format!("payload_hash needs a JSON body ({e}); use full_payload")))?;
    Ok(SignatureClaims {
        iss: issuer_did.to_owned(),
        aud: audience.to_owned(),
        iat: now_secs,
        exp: now_secs.saturating_add(i64::from(lifetime_secs)),
        nbf: None,
        jti: new_jti()?,
        htm: parts.method.to_owned(),
        htu: parts.target.to_owned(),
        sts: parts.status,
        message_integrity: MessageIntegrity {
            hash: HashAlgorithm::Sha256,
            key_id: key_id.to_owned(),
            coverage,
            headers,
            body,
        },
    })
}

/// Signs claims into an `A2A-Signature` value, with the header `{"alg":"ES256","kid":"<iss>#<key_id>","typ":"a2a-sig+jwt"}`.
pub fn sign_claims(key: &SigningKey, claims: &SignatureClaims) -> Result<String, IntegrityError> {
    let kid = format!("{}#{}", claims.iss, claims.message_integrity.key_id);
    parse_kid(&kid).map_err(|e| unsignable(e.to_string()))?;
    let header = JwsHeader { kid: Some(kid), typ: Some(TYP.to_owned()) };
    jws::encode(&header, claims, key).map_err(|e| unsignable(e.to_string()))
}

/// Signs a message: the value of its `A2A-Signature` header, valid from `now_secs` for `lifetime_secs` (1–300).
/// `parts.headers` must hold every header of the message (after all A2A headers are set); the covered ones are picked.
#[allow(clippy::too_many_arguments)]
pub fn sign(
    key: &SigningKey,
    key_id: &str,
    issuer_did: &str,
    audience: &str,
    coverage: Coverage,
    parts: &MessageParts<'_>,
    now_secs: i64,
    lifetime_secs: u32,
) -> Result<String, IntegrityError> {
    let claims = build_claims(key_id, issuer_did, audience, coverage, parts, now_secs, lifetime_secs)?;
    sign_claims(key, &claims)
}

// ---------------------------------------------------------------------------------------------------------------------
// Verification
// ---------------------------------------------------------------------------------------------------------------------

/// A signature that passed steps 1–6; the caller resolves the key for [`PendingVerification::kid`] and calls
/// [`PendingVerification::finish`].
#[derive(Debug, Clone)]
pub struct PendingVerification {
    jws: jws::UnverifiedJws<SignatureClaims>,
    kid: String,
    did_len: usize,
}

impl PendingVerification {
    /// The sender's DID (the `kid` before `#`).
    pub fn did(&self) -> &str {
        self.kid.get(..self.did_len).unwrap_or("")
    }

    /// The key id (the `kid` after `#`).
    pub fn key_id(&self) -> &str {
        self.kid.get(self.did_len + 1..).unwrap_or("")
    }

    /// The whole `kid`, a DID URL.
    pub fn kid(&self) -> &str {
        &self.kid
    }

    /// The (not yet verified) claims.
    pub fn claims(&self) -> &SignatureClaims {
        self.jws.claims()
    }

    /// Steps 7–8: verifies the ECDSA signature with the sender's key, then that the message matches what was signed.
    /// `parts` must be the same message that was given to [`prepare`].
    pub fn finish(self, key: &VerifyingKey, parts: &MessageParts<'_>) -> Result<VerifiedMessage, IntegrityError> {
        self.jws.verify(key).map_err(|_| IntegrityError::SignatureInvalid)?;
        check_coverage(self.jws.claims(), parts).map_err(IntegrityError::Mismatch)?;
        check_body(self.jws.claims(), parts)?;
        Ok(VerifiedMessage { claims: self.jws.into_claims(), kid: self.kid, did_len: self.did_len })
    }
}

/// A message whose signature verified and matches.
#[derive(Debug, Clone)]
pub struct VerifiedMessage {
    claims: SignatureClaims,
    kid: String,
    did_len: usize,
}

impl VerifiedMessage {
    /// The verified claims.
    pub fn claims(&self) -> &SignatureClaims {
        &self.claims
    }
    /// The sender's DID (`iss`).
    pub fn iss(&self) -> &str {
        &self.claims.iss
    }
    /// `jti`, for the receiver's replay cache (keyed by `iss` and `jti`).
    pub fn jti(&self) -> &str {
        &self.claims.jti
    }
    /// `exp`: the replay cache must keep the `jti` until `exp + LEEWAY_SECS`.
    pub fn exp(&self) -> i64 {
        self.claims.exp
    }
    /// What was covered.
    pub fn coverage(&self) -> Coverage {
        self.claims.message_integrity.coverage
    }
    /// The sender's DID (the `kid` before `#`).
    pub fn did(&self) -> &str {
        self.kid.get(..self.did_len).unwrap_or("")
    }
    /// The key id (the `kid` after `#`).
    pub fn key_id(&self) -> &str {
        self.kid.get(self.did_len + 1..).unwrap_or("")
    }
}

/// Steps 1–6 of verification (everything that needs no key). `header_value` is the `A2A-Signature` value;
/// `expected_audience` is the receiver's own DID; `now_secs` the receiver's clock.
pub fn prepare(
    header_value: &str,
    parts: &MessageParts<'_>,
    expected_audience: &str,
    now_secs: i64,
) -> Result<PendingVerification, IntegrityError> {
    // 1. JWS syntax and alg (and a single A2A-Signature header).
    if parts.headers.iter().filter(|(n, _)| n.eq_ignore_ascii_case(crate::headers::A2A_SIGNATURE)).count() > 1 {
        return Err(malformed("the message carries more than one A2A-Signature header"));
    }
    let token = jws::decode_typed::<SignatureClaims>(header_value.trim_matches([' ', '\t'])).map_err(|e| match e {
        JwsError::UnsupportedAlgorithm { .. } => IntegrityError::UnsupportedAlgorithm(e.to_string()),
        other => malformed(other.to_string()),
    })?;
    // 2. typ and kid.
    match token.typ() {
        Some(TYP) => {}
        Some(other) => return Err(malformed(format!("typ is {other:?}; an A2A signature has typ {TYP:?}"))),
        None => return Err(malformed(format!("typ is missing; an A2A signature has typ {TYP:?}"))),
    }
    let kid = token.kid().ok_or_else(|| malformed("kid is missing"))?.to_owned();
    let (kid_did, kid_key) = parse_kid(&kid)?;
    let did_len = kid_did.len();
    // 3. Claims.
    let claims = token.claims();
    check_claims_shape(claims, kid_key)?;
    // 4. Sender.
    let sender = header_value_of(parts, crate::headers::A2A_SENDER_ID)
        .ok_or_else(|| IntegrityError::SenderMismatch("the message has no A2A-Sender-ID header".to_owned()))?;
    if claims.iss != sender {
        return Err(IntegrityError::SenderMismatch(format!("iss {:?} but A2A-Sender-ID {sender:?}", claims.iss)));
    }
    if claims.iss != kid_did {
        return Err(IntegrityError::SenderMismatch(format!("iss {:?} but kid names {kid_did:?}", claims.iss)));
    }
    // 5. Audience.
    if claims.aud != expected_audience {
        return Err(IntegrityError::AudienceMismatch {
            expected: expected_audience.to_owned(),
            found: claims.aud.clone(),
        });
    }
    // 6. Time.
    let times = jws::TimeClaims { exp: claims.exp, iat: Some(claims.iat), nbf: claims.nbf };
    jws::check_times(times, now_secs, LEEWAY_SECS, Some(MAX_LIFETIME_SECS)).map_err(|e| match e {
        JwsError::Expired { exp, now, .. } => IntegrityError::Expired { exp, now },
        JwsError::NotYetValid { claim, value, now, .. } => IntegrityError::NotYetValid { claim, value, now },
        JwsError::LifetimeExceeded { lifetime, .. } => IntegrityError::LifetimeExceeded { lifetime },
        other => malformed(other.to_string()),
    })?;
    Ok(PendingVerification { jws: token, kid, did_len })
}

fn header_value_of<'a>(parts: &MessageParts<'a>, lower_name: &str) -> Option<&'a str> {
    header_value(parts.headers, lower_name)
}

fn check_claims_shape(c: &SignatureClaims, kid_key: &str) -> Result<(), IntegrityError> {
    let mi = &c.message_integrity;
    if mi.key_id != kid_key {
        return Err(malformed(format!("message_integrity.key_id {:?} is not the kid's key id {kid_key:?}", mi.key_id)));
    }
    if !JTI_LEN.contains(&c.jti.len()) || !is_base64url(&c.jti) {
        return Err(malformed("jti must be 16-128 base64url characters"));
    }
    if c.htm.is_empty() || c.htu.is_empty() {
        return Err(malformed("htm and htu must not be empty"));
    }
    if c.exp < c.iat {
        return Err(malformed(format!("exp {} is before iat {}", c.exp, c.iat)));
    }
    for name in mi.headers.keys() {
        if name.bytes().any(|b| b.is_ascii_uppercase()) || !is_covered_header(name) {
            return Err(malformed(format!(
                "message_integrity.headers lists {name:?}; only lower-case a2a-* (not a2a-signature) and \
                 idempotency-key are covered"
            )));
        }
    }
    for required in REQUIRED_HEADERS {
        if !mi.headers.contains_key(required) {
            return Err(malformed(format!("message_integrity.headers must cover {required}")));
        }
    }
    match (mi.coverage, &mi.body) {
        (Coverage::HeaderOnly, None) => {}
        (Coverage::HeaderOnly, Some(_)) => return Err(malformed("body must be absent under header_only")),
        (_, None) => return Err(malformed(format!("body is required under {}", mi.coverage))),
        (_, Some(b)) => {
            if b.len() != 43 || jws::base64url_decode(b).map(|d| d.len()) != Ok(32) {
                return Err(malformed("body must be the base64url of a 32-byte SHA-256 digest"));
            }
        }
    }
    Ok(())
}

fn check_coverage(c: &SignatureClaims, parts: &MessageParts<'_>) -> Result<(), Mismatch> {
    if c.htm != parts.method {
        return Err(Mismatch::Method { signed: c.htm.clone(), actual: parts.method.to_owned() });
    }
    if c.htu != parts.target {
        return Err(Mismatch::Target { signed: c.htu.clone(), actual: parts.target.to_owned() });
    }
    if c.sts != parts.status {
        return Err(Mismatch::Status { signed: c.sts, actual: parts.status });
    }
    let actual = covered_headers(parts.headers)?;
    let signed = &c.message_integrity.headers;
    for (name, value) in signed {
        match actual.get(name) {
            None => return Err(Mismatch::HeaderMissing { name: name.clone() }),
            Some(v) if v != value => return Err(Mismatch::HeaderValue { name: name.clone() }),
            Some(_) => {}
        }
    }
    if let Some(name) = actual.keys().find(|n| !signed.contains_key(*n)) {
        return Err(Mismatch::UnsignedHeader { name: name.clone() });
    }
    Ok(())
}

fn check_body(c: &SignatureClaims, parts: &MessageParts<'_>) -> Result<(), IntegrityError> {
    let digest = body_digest(c.message_integrity.coverage, parts.body).map_err(IntegrityError::BodyNotJson)?;
    if digest != c.message_integrity.body {
        return Err(IntegrityError::Mismatch(Mismatch::Body));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALICE: &str = "did:web:client.example.com";
    const AGENT: &str = "did:web:agent.example.com";
    const NOW: i64 = 1_767_225_600;

    fn headers() -> Vec<(&'static str, &'static str)> {
        vec![
            ("A2A-Version", "0.3"),
            ("A2A-Sender-ID", ALICE),
            ("A2A-Negotiation-ID", "neg_1"),
            ("Content-Type", "application/json"),
        ]
    }

    fn parts<'a>(h: &'a [(&'a str, &'a str)], body: &'a [u8]) -> MessageParts<'a> {
        MessageParts { method: "POST", target: "/a2a/execute", headers: h, body, status: None }
    }

    fn roundtrip(
        coverage: Coverage,
        signed: &MessageParts<'_>,
        received: &MessageParts<'_>,
    ) -> Result<(), IntegrityError> {
        let k = SigningKey::generate().expect("key");
        let sig = sign(&k, "key-1", ALICE, AGENT, coverage, signed, NOW, 60).expect("sign");
        let p = prepare(&sig, received, AGENT, NOW)?;
        assert_eq!((p.did(), p.key_id()), (ALICE, "key-1"));
        p.finish(k.verifying_key(), received).map(|v| assert_eq!(v.coverage(), coverage))
    }

    #[test]
    fn every_coverage_mode_verifies_its_own_signature() {
        let h = headers();
        let body = br#"{"b": 1, "a": [true]}"#;
        for c in [Coverage::HeaderOnly, Coverage::PayloadHash, Coverage::FullPayload] {
            assert_eq!(roundtrip(c, &parts(&h, body), &parts(&h, body)), Ok(()), "{c}");
        }
    }

    #[test]
    fn reserialised_body_passes_payload_hash_but_fails_full_payload() {
        let h = headers();
        let (a, b) = (br#"{"b": 1, "a": [true]}"#.as_slice(), br#"{"a":[true],"b":1}"#.as_slice());
        assert_eq!(roundtrip(Coverage::PayloadHash, &parts(&h, a), &parts(&h, b)), Ok(()));
        assert_eq!(
            roundtrip(Coverage::FullPayload, &parts(&h, a), &parts(&h, b)),
            Err(IntegrityError::Mismatch(Mismatch::Body))
        );
        // header_only does not cover the body at all.
        assert_eq!(roundtrip(Coverage::HeaderOnly, &parts(&h, a), &parts(&h, b"other")), Ok(()));
    }

    #[test]
    fn unsigned_a2a_header_is_an_integrity_mismatch() {
        let h = headers();
        let mut h2 = headers();
        h2.push(("a2a-region", "eu-west-1"));
        let e = roundtrip(Coverage::HeaderOnly, &parts(&h, b""), &parts(&h2, b"")).expect_err("refused");
        assert_eq!(e, IntegrityError::Mismatch(Mismatch::UnsignedHeader { name: "a2a-region".into() }));
        assert_eq!(e.details(), json!({"mismatch": "header", "header": "a2a-region"}));
        assert_eq!(e.code(), ErrorCode::INTEGRITY_MISMATCH);
    }

    #[test]
    fn header_case_and_blanks_do_not_matter_but_values_do() {
        let h = headers();
        let h2 = vec![
            ("a2a-version", " 0.3\t"),
            ("a2a-sender-id", ALICE),
            ("a2a-negotiation-id", "neg_1"),
            ("content-type", "text/plain"),
        ];
        assert_eq!(roundtrip(Coverage::HeaderOnly, &parts(&h, b""), &parts(&h2, b"")), Ok(()));
        let h3 = vec![("a2a-version", "0.3"), ("a2a-sender-id", ALICE), ("a2a-negotiation-id", "neg_2")];
        assert_eq!(
            roundtrip(Coverage::HeaderOnly, &parts(&h, b""), &parts(&h3, b"")),
            Err(IntegrityError::Mismatch(Mismatch::HeaderValue { name: "a2a-negotiation-id".into() }))
        );
    }

    #[test]
    fn payload_hash_of_non_json_body_is_unsignable() {
        let k = SigningKey::generate().expect("key");
        let h = headers();
        let e = sign(&k, "key-1", ALICE, AGENT, Coverage::PayloadHash, &parts(&h, b"not json"), NOW, 60);
        assert!(matches!(e, Err(IntegrityError::Unsignable(_))));
        assert!(sign(&k, "key-1", ALICE, AGENT, Coverage::FullPayload, &parts(&h, b"not json"), NOW, 60).is_ok());
    }

    #[test]
    fn signing_refuses_bad_inputs() {
        let k = SigningKey::generate().expect("key");
        let h = headers();
        let p = parts(&h, b"{}");
        assert!(sign(&k, "bad key id", ALICE, AGENT, Coverage::PayloadHash, &p, NOW, 60).is_err());
        assert!(sign(&k, "k", "not-a-did", AGENT, Coverage::PayloadHash, &p, NOW, 60).is_err());
        assert!(sign(&k, "k", ALICE, AGENT, Coverage::PayloadHash, &p, NOW, 301).is_err());
        assert!(sign(&k, "k", "did:web:other.example", AGENT, Coverage::PayloadHash, &p, NOW, 60).is_err());
        let lower = MessageParts { method: "post", ..p };
        assert!(sign(&k, "k", ALICE, AGENT, Coverage::PayloadHash, &lower, NOW, 60).is_err());
        let no_version = [("A2A-Sender-ID", ALICE)];
        assert!(sign(&k, "k", ALICE, AGENT, Coverage::HeaderOnly, &parts(&no_version, b""), NOW, 60).is_err());
    }

    #[test]
    fn response_signature_binds_the_status() {
        let k = SigningKey::generate().expect("key");
        let h = [("A2A-Version", "0.3"), ("A2A-Sender-ID", AGENT)];
        let resp = MessageParts { method: "GET", target: "/a2a/result/x", headers: &h, body: b"{}", status: Some(200) };
        let sig = sign(&k, "k", AGENT, ALICE, Coverage::PayloadHash, &resp, NOW, 60).expect("sign");
        let ok = prepare(&sig, &resp, ALICE, NOW).expect("prepare").finish(k.verifying_key(), &resp);
        assert!(ok.is_ok());
        let other = MessageParts { status: Some(404), ..resp };
        let e = prepare(&sig, &other, ALICE, NOW).expect("prepare").finish(k.verifying_key(), &other);
        assert!(matches!(e, Err(IntegrityError::Mismatch(Mismatch::Status { .. }))));
        let as_request = MessageParts { status: None, ..resp };
        let e = prepare(&sig, &as_request, ALICE, NOW).expect("prepare").finish(k.verifying_key(), &as_request);
        assert!(matches!(e, Err(IntegrityError::Mismatch(Mismatch::Status { .. }))));
    }

    #[test]
    fn two_signature_headers_are_malformed() {
        let k = SigningKey::generate().expect("key");
        let h = headers();
        let sig = sign(&k, "key-1", ALICE, AGENT, Coverage::HeaderOnly, &parts(&h, b""), NOW, 60).expect("sign");
        let mut h2: Vec<(&str, &str)> = headers();
        h2.push(("A2A-Signature", &sig));
        h2.push(("a2a-signature", &sig));
        let e = prepare(&sig, &parts(&h2, b""), AGENT, NOW).expect_err("refused");
        assert_eq!(e.code(), ErrorCode::SIGNATURE_MALFORMED);
        h2.pop();
        assert!(prepare(&sig, &parts(&h2, b""), AGENT, NOW).is_ok());
    }

    #[test]
    fn duplicate_covered_header_name_in_claims_is_malformed() {
        let k = SigningKey::generate().expect("key");
        let h = headers();
        let p = parts(&h, b"");
        let claims = build_claims("key-1", ALICE, AGENT, Coverage::HeaderOnly, &p, NOW, 60).expect("claims");
        let text = String::from_utf8(crate::canonical::to_canonical_vec(&serde_json::to_value(&claims).expect("json")))
            .expect("utf8")
            .replace(r#""a2a-version":"0.3""#, r#""a2a-version":"0.3","a2a-version":"0.4""#);
        let header = r#"{"alg":"ES256","kid":"did:web:client.example.com#key-1","typ":"a2a-sig+jwt"}"#;
        let input = format!("{}.{}", jws::base64url_encode(header), jws::base64url_encode(&text));
        let sig = k.sign(input.as_bytes()).expect("sign");
        let token = format!("{input}.{}", jws::base64url_encode(sig));
        let e = prepare(&token, &p, AGENT, NOW).expect_err("refused");
        assert_eq!(e.code(), ErrorCode::SIGNATURE_MALFORMED, "{e}");
        assert!(e.to_string().contains("duplicate"), "{e}");
    }

    #[test]
    fn jti_is_128_bits_of_base64url_and_fresh_each_time() {
        let a = new_jti().expect("jti");
        let b = new_jti().expect("jti");
        assert_eq!(a.len(), 22);
        assert!(is_base64url(&a));
        assert_ne!(a, b);
    }

    proptest::proptest! {
        #[test]
        fn prepare_never_panics_on_arbitrary_header_values(v in ".{0,300}", seg in "[A-Za-z0-9_-]{0,200}") {
            let h = headers();
            let p = parts(&h, b"{}");
            let _ = prepare(&v, &p, AGENT, NOW);
            let _ = prepare(&format!("{seg}.{seg}.{seg}"), &p, AGENT, NOW);
        }

        #[test]
        fn prepare_never_panics_on_arbitrary_claims(claims in ".{0,200}") {
            let h = headers();
            let p = parts(&h, b"{}");
            let header = jws::base64url_encode(r#"{"alg":"ES256","kid":"did:web:client.example.com#k","typ":"a2a-sig+jwt"}"#);
            let token = format!("{header}.{}.{}", jws::base64url_encode(claims), jws::base64url_encode([7u8; 64]));
            let _ = prepare(&token, &p, AGENT, NOW);
        }

        #[test]
        fn key_parsers_never_panic_on_arbitrary_text(text in ".{0,400}") {
            let pem = format!("-----BEGIN PUBLIC KEY-----\n{text}\n-----END PUBLIC KEY-----\n");
            let _ = crate::keys::inspect_pem(&pem);
            let _ = crate::keys::inspect_pem(&text);
            if let Ok(v) = serde_json::from_str::<Value>(&text) {
                let _ = VerifyingKey::from_jwk(&v);
                let _ = SigningKey::from_jwk(&v);
            }
        }
    }

    #[test]
    fn claims_schema_names_the_coverage_modes() {
        let schema = serde_json::to_string(&schemars::schema_for!(SignatureClaims)).expect("schema");
        for mode in ["header_only", "payload_hash", "full_payload", "sha256"] {
            assert!(schema.contains(mode), "{mode} missing from schema");
        }
    }
}
