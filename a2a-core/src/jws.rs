//! Compact JWS with ES256 only, and JWT registered-claim validation (`spec/PROTOCOL.md`, requirements `JWS-*`).
//!
//! [`encode`] writes `b64(header) "." b64(claims) "." b64(r || s)` where header and claims are serialised in RFC 8785
//! canonical form and `b64` is base64url without padding. [`decode`] is strict: one algorithm (`ES256`), no `crit`
//! extensions, no keys embedded in the token (`jwk`, `jku`, `x5u`, `x5c`), JSON objects without duplicate member names,
//! canonical base64url, a 64-byte signature. [`validate_registered_claims`] checks `exp`, `iat`, `nbf`, `iss` and `aud`
//! with a leeway, for A2A signatures and for OAuth2 bearer tokens alike.

use std::fmt;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::Serialize;
use serde::de::{self, Deserialize, DeserializeOwned, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

use crate::error::ErrorCode;
use crate::keys::{KeyError, SigningKey, VerifyingKey};

/// The longest token [`decode`] accepts, in bytes (8 KiB).
pub const MAX_TOKEN_LEN: usize = 8192;
/// The only algorithm accepted.
pub const ALG_ES256: &str = "ES256";
/// The default clock leeway for `exp`, `iat` and `nbf`, in seconds.
pub const DEFAULT_LEEWAY_SECS: u64 = 30;
/// Header parameters that would carry or point to a key: refused, keys come only from DID resolution.
pub const FORBIDDEN_HEADER_PARAMS: [&str; 4] = ["jwk", "jku", "x5u", "x5c"];

/// Why a token was refused or could not be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum JwsError {
    /// The token is longer than [`MAX_TOKEN_LEN`].
    #[error("the token is {len} bytes; at most {MAX_TOKEN_LEN} are accepted")]
    TooLong {
        /// Its length.
        len: usize,
    },
    /// The token does not have exactly three `.`-separated segments.
    #[error("a compact JWS has exactly 3 segments separated by '.', this one has {found}")]
    Segments {
        /// How many segments it has.
        found: usize,
    },
    /// A segment is not canonical base64url without padding.
    #[error("the {part} segment is not base64url without padding: {reason}")]
    Base64 {
        /// `header`, `payload` or `signature`.
        part: &'static str,
        /// What is wrong.
        reason: &'static str,
    },
    /// The header or payload is not a JSON object (or has duplicate member names).
    #[error("the {part} is not a JSON object: {reason}")]
    Json {
        /// `header` or `payload`.
        part: &'static str,
        /// What is wrong.
        reason: String,
    },
    /// `alg` is missing or is not `ES256`.
    #[error("{}: only ES256 (ECDSA P-256 with SHA-256) is accepted", match .alg { Some(a) => format!("alg {a}"), None => "alg is missing".to_owned() })]
    UnsupportedAlgorithm {
        /// The `alg` found, as JSON text (`None` if absent).
        alg: Option<String>,
    },
    /// The header has a parameter this implementation refuses (`crit`, `jwk`, `jku`, `x5u`, `x5c`) or a
    /// mistyped `kid`/`typ`.
    #[error("header parameter {name}: {reason}")]
    Header {
        /// The parameter.
        name: String,
        /// Why it is refused.
        reason: &'static str,
    },
    /// The claims do not have the shape the caller expects (see [`UnverifiedJws::claims_as`]).
    #[error("the claims do not have the expected shape: {0}")]
    Claims(String),
    /// The signature is not 64 bytes.
    #[error("the signature is {found} bytes; ES256 requires exactly 64 bytes (r || s, not DER)")]
    SignatureLength {
        /// Its length.
        found: usize,
    },
    /// The signature does not verify.
    #[error("the signature does not verify with the key")]
    SignatureInvalid,
    /// A registered claim is missing.
    #[error("claim {0} is required")]
    ClaimMissing(&'static str),
    /// A registered claim has the wrong type (NumericDate values must be integers).
    #[error("claim {claim} must be {expected}")]
    ClaimType {
        /// The claim.
        claim: &'static str,
        /// What it must be.
        expected: &'static str,
    },
    /// `exp` is before `iat`.
    #[error("exp ({exp}) is before iat ({iat})")]
    ExpBeforeIat {
        /// `exp`.
        exp: i64,
        /// `iat`.
        iat: i64,
    },
    /// The token expired: `now > exp + leeway`.
    #[error("expired: exp {exp} + leeway {leeway} s < now {now}")]
    Expired {
        /// `exp`.
        exp: i64,
        /// The receiver's clock.
        now: i64,
        /// The leeway applied.
        leeway: u64,
    },
    /// `iat` or `nbf` is in the future beyond the leeway.
    #[error("not yet valid: {claim} {value} > now {now} + leeway {leeway} s")]
    NotYetValid {
        /// `iat` or `nbf`.
        claim: &'static str,
        /// Its value.
        value: i64,
        /// The receiver's clock.
        now: i64,
        /// The leeway applied.
        leeway: u64,
    },
    /// `exp - iat` is longer than allowed.
    #[error("lifetime exp - iat = {lifetime} s exceeds the maximum of {max} s")]
    LifetimeExceeded {
        /// `exp - iat`.
        lifetime: i64,
        /// The maximum.
        max: u64,
    },
    /// `iss` is not the expected issuer.
    #[error("issuer {found:?} is not the expected {expected:?}")]
    IssuerMismatch {
        /// Expected.
        expected: String,
        /// Found.
        found: String,
    },
    /// `aud` does not contain the expected audience.
    #[error("audience {found} does not contain {expected:?}")]
    AudienceMismatch {
        /// Expected.
        expected: String,
        /// Found, as JSON text.
        found: String,
    },
    /// The header or claims could not be serialised, or signing failed.
    #[error("cannot encode: {0}")]
    Encode(String),
}

impl JwsError {
    /// The stable error code: the signature codes of the error table (a bearer-token validator maps them all to
    /// `auth_invalid` instead).
    pub fn code(&self) -> ErrorCode {
        match self {
            JwsError::UnsupportedAlgorithm { .. } => ErrorCode::UNSUPPORTED_ALGORITHM,
            JwsError::SignatureInvalid => ErrorCode::SIGNATURE_INVALID,
            JwsError::Expired { .. } => ErrorCode::SIGNATURE_EXPIRED,
            JwsError::NotYetValid { .. } => ErrorCode::SIGNATURE_NOT_YET_VALID,
            JwsError::LifetimeExceeded { .. } => ErrorCode::SIGNATURE_LIFETIME_EXCEEDED,
            JwsError::IssuerMismatch { .. } => ErrorCode::SENDER_MISMATCH,
            JwsError::AudienceMismatch { .. } => ErrorCode::AUDIENCE_MISMATCH,
            JwsError::Encode(_) => ErrorCode::INTERNAL_ERROR,
            JwsError::TooLong { .. }
            | JwsError::Segments { .. }
            | JwsError::Base64 { .. }
            | JwsError::Json { .. }
            | JwsError::Header { .. }
            | JwsError::Claims(_)
            | JwsError::SignatureLength { .. }
            | JwsError::ClaimMissing(_)
            | JwsError::ClaimType { .. }
            | JwsError::ExpBeforeIat { .. } => ErrorCode::SIGNATURE_MALFORMED,
        }
    }
}

// ---------------------------------------------------------------------------------------------------------------------
// base64url
// ---------------------------------------------------------------------------------------------------------------------

/// base64url without padding (RFC 4648 §5, RFC 7515 §2).
pub fn base64url_encode(bytes: impl AsRef<[u8]>) -> String {
    URL_SAFE_NO_PAD.encode(bytes)
}

/// Strict base64url decoding: alphabet `A-Z a-z 0-9 - _` only, no padding, no whitespace, and the unused low bits of
/// the last character must be zero (so every byte string has exactly one encoding).
pub fn base64url_decode(s: &str) -> Result<Vec<u8>, &'static str> {
    if s.contains('=') {
        return Err("padding '=' is not allowed");
    }
    if let Some(b) = s.bytes().find(|b| !(b.is_ascii_alphanumeric() || *b == b'-' || *b == b'_')) {
        return Err(match b {
            b'+' | b'/' => "'+' and '/' belong to standard base64, not base64url",
            _ => "character outside the base64url alphabet",
        });
    }
    URL_SAFE_NO_PAD.decode(s).map_err(|_| "impossible length or non-zero trailing bits")
}

// ---------------------------------------------------------------------------------------------------------------------
// Strict JSON: objects with duplicate member names are refused (RFC 7515 §5.2 allows either refusing or taking the
// last; refusing removes any ambiguity between implementations).
// ---------------------------------------------------------------------------------------------------------------------

struct StrictValue(Value);

impl<'de> Deserialize<'de> for StrictValue {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(StrictVisitor).map(StrictValue)
    }
}

struct StrictVisitor;

impl<'de> Visitor<'de> for StrictVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Value, E> {
        serde_json::Number::from_f64(v).map(Value::Number).ok_or_else(|| E::custom("non-finite number"))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }
    fn visit_string<E: de::Error>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }
    fn visit_unit<E: de::Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_none<E: de::Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut out = Vec::new();
        while let Some(StrictValue(v)) = seq.next_element()? {
            out.push(v);
        }
        Ok(Value::Array(out))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut out = Map::new();
        while let Some(k) = map.next_key::<String>()? {
            if out.contains_key(&k) {
                return Err(de::Error::custom(format!("duplicate member name {k:?}")));
            }
            let StrictValue(v) = map.next_value()?;
            out.insert(k, v);
        }
        Ok(Value::Object(out))
    }
}

/// Parses a JSON object, refusing duplicate member names at any depth.
pub fn parse_json_object_strict(bytes: &[u8]) -> Result<Map<String, Value>, String> {
    match serde_json::from_slice::<StrictValue>(bytes) {
        Ok(StrictValue(Value::Object(m))) => Ok(m),
        Ok(_) => Err("not an object".to_owned()),
        Err(e) => Err(e.to_string()),
    }
}

// ---------------------------------------------------------------------------------------------------------------------
// Encoding
// ---------------------------------------------------------------------------------------------------------------------

/// The protected header of a token this crate writes: `alg` is always `ES256`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct JwsHeader {
    /// `kid`: which key signed (for A2A, a DID URL `did:web:...#key-id`).
    pub kid: Option<String>,
    /// `typ`: the media type of the token (for A2A signatures, `a2a-sig+jwt`).
    pub typ: Option<String>,
}

impl JwsHeader {
    fn to_value(&self) -> Value {
        let mut m = Map::new();
        m.insert("alg".to_owned(), Value::String(ALG_ES256.to_owned()));
        if let Some(k) = &self.kid {
            m.insert("kid".to_owned(), Value::String(k.clone()));
        }
        if let Some(t) = &self.typ {
            m.insert("typ".to_owned(), Value::String(t.clone()));
        }
        Value::Object(m)
    }
}

/// Signs `claims` (which must serialise to a JSON object) into a compact JWS:
/// `b64(JCS(header)) "." b64(JCS(claims)) "." b64(ES256(signing input))`.
pub fn encode(header: &JwsHeader, claims: &impl Serialize, key: &SigningKey) -> Result<String, JwsError> {
    let claims = serde_json::to_value(claims).map_err(|e| JwsError::Encode(e.to_string()))?;
    if !claims.is_object() {
        return Err(JwsError::Encode("the claims must serialise to a JSON object".to_owned()));
    }
    let mut token = base64url_encode(crate::canonical::to_canonical_vec(&header.to_value()));
    token.push('.');
    token.push_str(&base64url_encode(crate::canonical::to_canonical_vec(&claims)));
    let sig = key.sign(token.as_bytes()).map_err(|e| JwsError::Encode(e.to_string()))?;
    token.push('.');
    token.push_str(&base64url_encode(sig));
    Ok(token)
}

// ---------------------------------------------------------------------------------------------------------------------
// Decoding
// ---------------------------------------------------------------------------------------------------------------------

/// A token that passed [`decode`] (claims as a JSON object) or [`decode_typed`] (claims as `C`): well-formed,
/// ES256, not yet verified.
#[derive(Debug, Clone)]
pub struct UnverifiedJws<C = Map<String, Value>> {
    header: Map<String, Value>,
    claims: C,
    signing_input_len: usize,
    token: String,
    signature: [u8; 64],
}

impl<C> UnverifiedJws<C> {
    /// The protected header.
    pub fn header(&self) -> &Map<String, Value> {
        &self.header
    }

    /// `kid`, if present (a string, checked by [`decode`]).
    pub fn kid(&self) -> Option<&str> {
        self.header.get("kid").and_then(Value::as_str)
    }

    /// `typ`, if present (a string, checked by [`decode`]).
    pub fn typ(&self) -> Option<&str> {
        self.header.get("typ").and_then(Value::as_str)
    }

    /// The claims.
    pub fn claims(&self) -> &C {
        &self.claims
    }

    /// The claims, by value.
    pub fn into_claims(self) -> C {
        self.claims
    }

    /// The signing input `b64(header) "." b64(payload)` exactly as received.
    pub fn signing_input(&self) -> &str {
        self.token.get(..self.signing_input_len).unwrap_or("")
    }

    /// The signature `r || s`.
    pub fn signature(&self) -> &[u8; 64] {
        &self.signature
    }

    /// Verifies the signature over the signing input with `key`.
    pub fn verify(&self, key: &VerifyingKey) -> Result<(), JwsError> {
        key.verify(self.signing_input().as_bytes(), &self.signature).map_err(|e| match e {
            KeyError::SignatureLength { found } => JwsError::SignatureLength { found },
            _ => JwsError::SignatureInvalid,
        })
    }
}

impl UnverifiedJws {
    /// The claims deserialised into a type.
    pub fn claims_as<T: DeserializeOwned>(&self) -> Result<T, JwsError> {
        T::deserialize(&self.claims).map_err(|e| JwsError::Claims(e.to_string()))
    }
}

/// Decodes a compact JWS strictly (see the module documentation and `JWS-*` in the specification), without verifying
/// the signature. Checks, in this order: length; three segments; base64url of every segment; header is a JSON
/// object; `alg` is `ES256`; no `crit`, `jwk`, `jku`, `x5u`, `x5c`; `kid`/`typ` are strings when present; payload
/// is a JSON object; the signature is 64 bytes. No member name may appear twice in an object, at any depth.
pub fn decode(token: &str) -> Result<UnverifiedJws, JwsError> {
    decode_with(token, |bytes| {
        parse_json_object_strict(bytes).map_err(|reason| JwsError::Json { part: "payload", reason })
    })
}

/// Like [`decode`], but deserialises the claims straight into `C` (one pass, no intermediate JSON value): the fast
/// path for a known claim set. Duplicate member names are then refused only as far as `C`'s `Deserialize` refuses them
/// (serde's derive refuses duplicate fields of a struct; members that `C` ignores are not checked). A payload that is
/// not JSON or does not fit `C` is [`JwsError::Claims`].
pub fn decode_typed<C: DeserializeOwned>(token: &str) -> Result<UnverifiedJws<C>, JwsError> {
    decode_with(token, |bytes| serde_json::from_slice::<C>(bytes).map_err(|e| JwsError::Claims(e.to_string())))
}

fn decode_with<C>(
    token: &str,
    parse_claims: impl FnOnce(&[u8]) -> Result<C, JwsError>,
) -> Result<UnverifiedJws<C>, JwsError> {
    if token.len() > MAX_TOKEN_LEN {
        return Err(JwsError::TooLong { len: token.len() });
    }
    let mut segments = token.split('.');
    let (Some(h), Some(p), Some(s), None) = (segments.next(), segments.next(), segments.next(), segments.next()) else {
        return Err(JwsError::Segments { found: token.split('.').count() });
    };
    let header_bytes = base64url_decode(h).map_err(|reason| JwsError::Base64 { part: "header", reason })?;
    let payload_bytes = base64url_decode(p).map_err(|reason| JwsError::Base64 { part: "payload", reason })?;
    let sig_bytes = base64url_decode(s).map_err(|reason| JwsError::Base64 { part: "signature", reason })?;

    let header = parse_json_object_strict(&header_bytes).map_err(|reason| JwsError::Json { part: "header", reason })?;
    match header.get("alg") {
        Some(Value::String(a)) if a == ALG_ES256 => {}
        Some(other) => return Err(JwsError::UnsupportedAlgorithm { alg: Some(other.to_string()) }),
        None => return Err(JwsError::UnsupportedAlgorithm { alg: None }),
    }
    if header.contains_key("crit") {
        return Err(JwsError::Header {
            name: "crit".to_owned(),
            reason: "no JWS extension is understood, so a token with crit is refused",
        });
    }
    if let Some(name) = FORBIDDEN_HEADER_PARAMS.iter().find(|n| header.contains_key(**n)) {
        return Err(JwsError::Header {
            name: (*name).to_owned(),
            reason: "keys are never taken from the token; they come from the sender's DID document",
        });
    }
    for name in ["kid", "typ"] {
        if header.get(name).is_some_and(|v| !v.is_string()) {
            return Err(JwsError::Header { name: name.to_owned(), reason: "must be a string" });
        }
    }
    let claims = parse_claims(&payload_bytes)?;
    let signature: [u8; 64] =
        sig_bytes.as_slice().try_into().map_err(|_| JwsError::SignatureLength { found: sig_bytes.len() })?;
    Ok(UnverifiedJws { header, claims, signing_input_len: h.len() + 1 + p.len(), token: token.to_owned(), signature })
}

// ---------------------------------------------------------------------------------------------------------------------
// Registered claims
// ---------------------------------------------------------------------------------------------------------------------

/// What [`validate_registered_claims`] expects of a token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Expectations<'a> {
    /// `iss` must equal this, when given.
    pub issuer: Option<&'a str>,
    /// `aud` (a string, or an array of strings) must contain this, when given.
    pub audience: Option<&'a str>,
    /// Clock leeway in seconds for `exp`, `iat`, `nbf` (default 30).
    pub leeway_secs: u64,
    /// `exp - iat` must not exceed this, when given (then `iat` is required).
    pub max_lifetime_secs: Option<u64>,
}

impl Default for Expectations<'_> {
    fn default() -> Self {
        Expectations { issuer: None, audience: None, leeway_secs: DEFAULT_LEEWAY_SECS, max_lifetime_secs: None }
    }
}

/// The time claims of a validated token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimeClaims {
    /// `exp`.
    pub exp: i64,
    /// `iat`, if present.
    pub iat: Option<i64>,
    /// `nbf`, if present.
    pub nbf: Option<i64>,
}

fn numeric_date(claims: &Map<String, Value>, name: &'static str) -> Result<Option<i64>, JwsError> {
    match claims.get(name) {
        None => Ok(None),
        Some(Value::Number(n)) => n
            .as_i64()
            .map(Some)
            .ok_or(JwsError::ClaimType { claim: name, expected: "an integer NumericDate (seconds, within i64)" }),
        Some(_) => Err(JwsError::ClaimType { claim: name, expected: "an integer NumericDate (seconds, within i64)" }),
    }
}

/// The time rules of `JWS-5` on already-typed claims, in this order: `now > exp + leeway` (expired); `iat > now +
/// leeway`, then `nbf > now + leeway` (not yet valid); `exp - iat > max_lifetime` (lifetime exceeded; `iat` is
/// required when a maximum is given). Arithmetic is exact (no overflow) for every `i64`.
pub fn check_times(t: TimeClaims, now_secs: i64, leeway: u64, max_lifetime_secs: Option<u64>) -> Result<(), JwsError> {
    let (now, lw) = (i128::from(now_secs), i128::from(leeway));
    if now > i128::from(t.exp) + lw {
        return Err(JwsError::Expired { exp: t.exp, now: now_secs, leeway });
    }
    for (claim, value) in [("iat", t.iat), ("nbf", t.nbf)] {
        if let Some(v) = value
            && i128::from(v) > now + lw
        {
            return Err(JwsError::NotYetValid { claim, value: v, now: now_secs, leeway });
        }
    }
    if let Some(max) = max_lifetime_secs {
        let iat = t.iat.ok_or(JwsError::ClaimMissing("iat"))?;
        let lifetime = i128::from(t.exp) - i128::from(iat);
        if lifetime > i128::from(max) {
            return Err(JwsError::LifetimeExceeded { lifetime: i64::try_from(lifetime).unwrap_or(i64::MAX), max });
        }
    }
    Ok(())
}

/// Validates the registered claims of a JWT, in this order: types (`exp` required, `exp`/`iat`/`nbf` integers,
/// `iat` required when a maximum lifetime is set, `exp >= iat`); `iss`; `aud`; `now > exp + leeway` (expired);
/// `iat > now + leeway`, then `nbf > now + leeway` (not yet valid); `exp - iat > max_lifetime` (lifetime exceeded).
pub fn validate_registered_claims(
    claims: &Map<String, Value>,
    now_secs: i64,
    expect: Expectations<'_>,
) -> Result<TimeClaims, JwsError> {
    let exp = numeric_date(claims, "exp")?.ok_or(JwsError::ClaimMissing("exp"))?;
    let iat = numeric_date(claims, "iat")?;
    let nbf = numeric_date(claims, "nbf")?;
    if expect.max_lifetime_secs.is_some() && iat.is_none() {
        return Err(JwsError::ClaimMissing("iat"));
    }
    if let Some(iat) = iat
        && exp < iat
    {
        return Err(JwsError::ExpBeforeIat { exp, iat });
    }
    if let Some(want) = expect.issuer {
        match claims.get("iss") {
            Some(Value::String(s)) if s == want => {}
            Some(Value::String(s)) => {
                return Err(JwsError::IssuerMismatch { expected: want.to_owned(), found: s.clone() });
            }
            Some(_) => return Err(JwsError::ClaimType { claim: "iss", expected: "a string" }),
            None => return Err(JwsError::ClaimMissing("iss")),
        }
    }
    if let Some(want) = expect.audience {
        let ok = match claims.get("aud") {
            Some(Value::String(s)) => s == want,
            Some(Value::Array(a)) => {
                if !a.iter().all(Value::is_string) {
                    return Err(JwsError::ClaimType { claim: "aud", expected: "a string or an array of strings" });
                }
                a.iter().any(|v| v.as_str() == Some(want))
            }
            Some(_) => return Err(JwsError::ClaimType { claim: "aud", expected: "a string or an array of strings" }),
            None => return Err(JwsError::ClaimMissing("aud")),
        };
        if !ok {
            let found = claims.get("aud").map(Value::to_string).unwrap_or_default();
            return Err(JwsError::AudienceMismatch { expected: want.to_owned(), found });
        }
    }
    check_times(TimeClaims { exp, iat, nbf }, now_secs, expect.leeway_secs, expect.max_lifetime_secs)?;
    Ok(TimeClaims { exp, iat, nbf })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn key() -> SigningKey {
        SigningKey::generate().expect("generate")
    }

    fn b64json(v: &Value) -> String {
        base64url_encode(v.to_string())
    }

    #[test]
    fn encoded_token_decodes_and_verifies() {
        let k = key();
        let t = encode(&JwsHeader { kid: Some("k1".into()), typ: None }, &json!({"b":1,"a":"x"}), &k).expect("encode");
        let d = decode(&t).expect("decode");
        assert_eq!(d.kid(), Some("k1"));
        assert_eq!(d.claims().get("a"), Some(&json!("x")));
        assert_eq!(d.verify(k.verifying_key()), Ok(()));
        assert_eq!(d.verify(key().verifying_key()), Err(JwsError::SignatureInvalid));
        // The payload is the canonical form: sorted members, no whitespace.
        let payload = t.split('.').nth(1).expect("payload");
        assert_eq!(base64url_decode(payload).expect("b64"), br#"{"a":"x","b":1}"#);
    }

    #[test]
    fn alg_none_hs256_and_missing_alg_are_unsupported_algorithm() {
        let p = b64json(&json!({"exp":1}));
        for h in [json!({"alg":"none"}), json!({"alg":"HS256"}), json!({"typ":"JWT"}), json!({"alg":["ES256"]})] {
            let t = format!("{}.{p}.", b64json(&h));
            let e = decode(&t).expect_err("refused");
            assert_eq!(e.code(), ErrorCode::UNSUPPORTED_ALGORITHM, "{h}");
        }
    }

    #[test]
    fn duplicate_member_names_are_malformed() {
        let h = base64url_encode(r#"{"alg":"ES256","alg":"none"}"#);
        let e = decode(&format!("{h}.{}.{}", b64json(&json!({})), base64url_encode([0u8; 64]))).expect_err("refused");
        assert!(matches!(e, JwsError::Json { part: "header", .. }), "{e}");
        assert!(parse_json_object_strict(br#"{"a":{"b":1,"b":2}}"#).is_err());
    }

    #[test]
    fn non_canonical_base64_trailing_bits_are_refused() {
        // "QQ" is the canonical encoding of "A"; "QR" has non-zero unused bits.
        assert_eq!(base64url_decode("QQ").expect("ok"), b"A");
        assert!(base64url_decode("QR").is_err());
        assert!(base64url_decode("QQ==").is_err());
        assert!(base64url_decode("a+b/").is_err());
    }

    #[test]
    fn registered_claims_boundaries_hold_at_leeway() {
        let now = 1_000_000;
        let exp = Expectations { max_lifetime_secs: Some(300), ..Default::default() };
        let c = |v: Value| v.as_object().cloned().expect("object");
        assert!(validate_registered_claims(&c(json!({"iat": now - 90, "exp": now - 30})), now, exp).is_ok());
        assert!(matches!(
            validate_registered_claims(&c(json!({"iat": now - 91, "exp": now - 31})), now, exp),
            Err(JwsError::Expired { .. })
        ));
        assert!(validate_registered_claims(&c(json!({"iat": now + 30, "exp": now + 60})), now, exp).is_ok());
        assert!(matches!(
            validate_registered_claims(&c(json!({"iat": now + 31, "exp": now + 60})), now, exp),
            Err(JwsError::NotYetValid { claim: "iat", .. })
        ));
        assert!(matches!(
            validate_registered_claims(&c(json!({"iat": now, "exp": now + 301})), now, exp),
            Err(JwsError::LifetimeExceeded { lifetime: 301, .. })
        ));
        assert!(matches!(
            validate_registered_claims(&c(json!({"iat": now, "exp": 1.5e6})), now, exp),
            Err(JwsError::ClaimType { claim: "exp", .. })
        ));
        assert!(matches!(
            validate_registered_claims(&c(json!({"iat": now, "exp": now - 1})), now, exp),
            Err(JwsError::ExpBeforeIat { .. })
        ));
        assert!(matches!(
            validate_registered_claims(&c(json!({"iat": now})), now, exp),
            Err(JwsError::ClaimMissing("exp"))
        ));
        // Extreme values do not overflow.
        assert!(validate_registered_claims(&c(json!({"exp": i64::MAX, "nbf": i64::MIN})), i64::MIN, exp).is_err());
        assert!(validate_registered_claims(&c(json!({"exp": i64::MAX})), i64::MAX, Expectations::default()).is_ok());
    }

    #[test]
    fn audience_may_be_a_string_or_an_array_and_must_match() {
        let c = |v: Value| v.as_object().cloned().expect("object");
        let e = Expectations { audience: Some("a"), issuer: Some("i"), ..Default::default() };
        assert!(validate_registered_claims(&c(json!({"exp":10,"iss":"i","aud":"a"})), 0, e).is_ok());
        assert!(validate_registered_claims(&c(json!({"exp":10,"iss":"i","aud":["b","a"]})), 0, e).is_ok());
        assert!(matches!(
            validate_registered_claims(&c(json!({"exp":10,"iss":"i","aud":["b"]})), 0, e),
            Err(JwsError::AudienceMismatch { .. })
        ));
        assert!(matches!(
            validate_registered_claims(&c(json!({"exp":10,"iss":"j","aud":"a"})), 0, e),
            Err(JwsError::IssuerMismatch { .. })
        ));
    }

    #[test]
    fn oversized_token_is_refused_before_parsing() {
        let e = decode(&"a".repeat(MAX_TOKEN_LEN + 1)).expect_err("refused");
        assert_eq!(e, JwsError::TooLong { len: MAX_TOKEN_LEN + 1 });
    }
}
