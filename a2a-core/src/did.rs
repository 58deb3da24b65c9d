//! did:web identities (`spec/PROTOCOL.md` §9.1): DID syntax, the mapping from a DID to the URL of its DID document,
//! DID URLs (key ids) and DID documents.
//!
//! Only the `web` method is supported in protocol 0.3. Nothing here performs I/O: a resolver fetches the document at
//! [`Did::document_url`] (checking every address it connects to with [`is_public_address`]), hands the bytes to
//! [`DidDocument::parse`], keeps the document for [`cache_lifetime`], and asks [`DidDocument::find_signing_jwk`] for the
//! key named by a signature's `kid`.
//!
//! ```
//! use a2a_core::did::{Did, ResolveOptions};
//!
//! let did = Did::parse("did:web:example.com%3A8443:user:alice").expect("valid");
//! assert_eq!(did.host(), "example.com");
//! assert_eq!(did.port(), Some(8443));
//! let url = did.document_url(&ResolveOptions::default()).expect("maps to a URL");
//! assert_eq!(url.as_str(), "https://example.com:8443/user/alice/did.json");
//! ```

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::str::FromStr;
use std::time::Duration;

use base64::Engine as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

use crate::error::ErrorCode;

/// The longest DID accepted, in bytes.
pub const MAX_DID_LEN: usize = 512;
/// The longest did:web host accepted, in bytes (the DNS limit).
pub const MAX_HOST_LEN: usize = 253;
/// The longest DNS label accepted, in bytes.
pub const MAX_LABEL_LEN: usize = 63;
/// The longest DID URL fragment (key id) accepted, in bytes.
pub const MAX_FRAGMENT_LEN: usize = 128;
/// The largest DID document accepted, in bytes.
pub const MAX_DOCUMENT_BYTES: usize = 64 * 1024;
/// The most verification methods a DID document may declare (and the most entries of each verification relationship).
pub const MAX_VERIFICATION_METHODS: usize = 64;
/// The longest time a resolver may keep a DID document.
pub const MAX_CACHE_TTL: Duration = Duration::from_secs(3600);
/// How long a resolver keeps a DID document served without `Cache-Control`.
pub const DEFAULT_CACHE_TTL: Duration = Duration::from_secs(300);
/// The JSON-LD context of DID documents (W3C DID v1.0).
pub const DID_CONTEXT_V1: &str = "https://www.w3.org/ns/did/v1";
/// The JSON-LD context of the `JsonWebKey2020` verification method type.
pub const JWS_2020_CONTEXT: &str = "https://w3id.org/security/suites/jws-2020/v1";
/// The verification method type [`DidDocument::generate`] writes.
pub const JSON_WEB_KEY_2020: &str = "JsonWebKey2020";
/// The verification method types whose `publicKeyJwk` may sign A2A messages.
pub const SIGNING_METHOD_TYPES: &[&str] = &["JsonWebKey2020", "JsonWebKey", "EcdsaSecp256r1VerificationKey2019"];

const PREFIX: &str = "did:web:";

/// What is wrong with a DID, a DID URL, a DID document or a key in it; [`DidErrorKind::reason`] is the stable name.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DidErrorKind {
    /// The text does not start with `did:` followed by a method and a method-specific id.
    NotADid,
    /// The method name is not lower-case letters and digits.
    InvalidMethod,
    /// A DID method other than `web`.
    UnsupportedMethod,
    /// The DID is longer than [`MAX_DID_LEN`] bytes.
    TooLong,
    /// `did:web:` with no host.
    EmptyHost,
    /// The host contains upper-case letters.
    UppercaseHost,
    /// The host contains non-ASCII characters (internationalized names must be written in punycode).
    NonAsciiHost,
    /// The host is not a DNS name of LDH labels.
    InvalidHost,
    /// The host is an IP address literal (or a numeric form a URL parser reads as one).
    IpAddressHost,
    /// The port separator is written `%3a`; it must be `%3A`.
    LowercasePercentEscape,
    /// The port is not a decimal number in 1..=65535 without leading zeros.
    InvalidPort,
    /// A percent-escape other than the port separator `%3A`.
    InvalidPercentEscape,
    /// A path segment is empty, `.`, `..`, or contains characters outside `A-Z a-z 0-9 . - _`.
    InvalidPathSegment,
    /// A DID URL has no fragment, or a fragment outside 1-128 characters of `A-Z a-z 0-9 . _ ~ -`.
    InvalidFragment,
    /// The DID document is larger than [`MAX_DOCUMENT_BYTES`].
    DocumentTooLarge,
    /// The DID document is not JSON, not an object, or a member has the wrong shape.
    InvalidDocument,
    /// The document's `id` is not the DID that was resolved.
    DocumentIdMismatch,
    /// More than [`MAX_VERIFICATION_METHODS`] verification methods or relationship entries.
    TooManyMethods,
    /// A verification method's `id` is not `<did>#<fragment>` or `#<fragment>`, or appears twice.
    InvalidMethodId,
    /// The key id does not name a verification method of the document.
    UnknownKey,
    /// The method exists but is listed in neither `assertionMethod` nor `authentication`.
    KeyNotAuthorized,
    /// The method type or the key is not an ECDSA P-256 JSON Web Key.
    UnsupportedKeyType,
    /// The JWK claims P-256 but is malformed: bad coordinates, a point off the curve, a private part, a wrong `use`.
    InvalidJwk,
}

impl DidErrorKind {
    /// The stable reason string (used by the test vectors and in logs).
    pub fn reason(self) -> &'static str {
        match self {
            Self::NotADid => "not_a_did",
            Self::InvalidMethod => "invalid_method",
            Self::UnsupportedMethod => "unsupported_method",
            Self::TooLong => "too_long",
            Self::EmptyHost => "empty_host",
            Self::UppercaseHost => "uppercase_host",
            Self::NonAsciiHost => "non_ascii_host",
            Self::InvalidHost => "invalid_host",
            Self::IpAddressHost => "ip_address_host",
            Self::LowercasePercentEscape => "lowercase_percent_escape",
            Self::InvalidPort => "invalid_port",
            Self::InvalidPercentEscape => "invalid_percent_escape",
            Self::InvalidPathSegment => "invalid_path_segment",
            Self::InvalidFragment => "invalid_fragment",
            Self::DocumentTooLarge => "document_too_large",
            Self::InvalidDocument => "invalid_document",
            Self::DocumentIdMismatch => "document_id_mismatch",
            Self::TooManyMethods => "too_many_methods",
            Self::InvalidMethodId => "invalid_method_id",
            Self::UnknownKey => "unknown_key",
            Self::KeyNotAuthorized => "key_not_authorized",
            Self::UnsupportedKeyType => "unsupported_key_type",
            Self::InvalidJwk => "invalid_jwk",
        }
    }

    /// The protocol error code: `invalid_sender` for syntax, `did_resolution_failed` for documents, `unknown_key` for
    /// keys that cannot sign, `unsupported_key_type` for keys that are not P-256.
    pub fn code(self) -> ErrorCode {
        match self {
            Self::DocumentTooLarge
            | Self::InvalidDocument
            | Self::DocumentIdMismatch
            | Self::TooManyMethods
            | Self::InvalidMethodId => ErrorCode::DID_RESOLUTION_FAILED,
            Self::UnknownKey | Self::KeyNotAuthorized => ErrorCode::UNKNOWN_KEY,
            Self::UnsupportedKeyType | Self::InvalidJwk => ErrorCode::UNSUPPORTED_KEY_TYPE,
            _ => ErrorCode::INVALID_SENDER,
        }
    }
}

/// An invalid DID, DID URL, DID document or key: a kind with a stable reason and a message for people.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct DidError {
    kind: DidErrorKind,
    message: String,
}

impl DidError {
    fn new(kind: DidErrorKind, message: impl Into<String>) -> Self {
        DidError { kind, message: message.into() }
    }

    /// What kind of error.
    pub fn kind(&self) -> DidErrorKind {
        self.kind
    }

    /// The stable reason string, e.g. `uppercase_host`.
    pub fn reason(&self) -> &'static str {
        self.kind.reason()
    }

    /// The protocol error code (see [`DidErrorKind::code`]).
    pub fn code(&self) -> ErrorCode {
        self.kind.code()
    }

    /// The message for people: what is wrong and how to fix it.
    pub fn message(&self) -> &str {
        &self.message
    }
}

/// Quotes untrusted text for a message: escaped, and cut after 80 characters.
fn quote(s: &str) -> String {
    const MAX: usize = 80;
    match s.char_indices().nth(MAX) {
        Some((i, _)) => format!("{:?}...", s.get(..i).unwrap_or_default()),
        None => format!("{s:?}"),
    }
}

/// A validated did:web DID, such as `did:web:example.com`, `did:web:localhost%3A8080` or
/// `did:web:example.com:user:alice`.
///
/// Equality is byte equality of the DID string (which is canonical: hosts are lower case, the port has no leading zero).
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Did {
    s: String,
    host: String,
    port: Option<u16>,
    path: Vec<String>,
}

/// How to map a DID to the URL of its document.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ResolveOptions {
    /// Use plain `http://` for loopback hosts (`localhost` and `*.localhost`); for tests and local development only.
    /// Other hosts always use `https://`.
    pub allow_http_loopback: bool,
}

impl ResolveOptions {
    /// Options that use `http://` for loopback hosts.
    pub const fn with_http_loopback() -> Self {
        ResolveOptions { allow_http_loopback: true }
    }
}

impl Did {
    /// Parses and validates a did:web DID (`spec/PROTOCOL.md` §9.1.1, DID-1 to DID-8).
    pub fn parse(s: &str) -> Result<Did, DidError> {
        let (host, port, segments) = Self::split(s)?;
        let path = segments.map(|p| p.split(':').map(str::to_owned).collect()).unwrap_or_default();
        Ok(Did { s: s.to_owned(), host: host.to_owned(), port, path })
    }

    /// Checks that `s` is a valid did:web DID, with the errors of [`Did::parse`], without building a [`Did`] (no
    /// allocation: for a hot path that only needs the verdict, e.g. a sender id checked on every request).
    pub fn check(s: &str) -> Result<(), DidError> {
        Self::split(s).map(|_| ())
    }

    /// Validates `s`: its host, port and path segments (`None` without any), borrowed from `s`.
    fn split(s: &str) -> Result<(&str, Option<u16>, Option<&str>), DidError> {
        use DidErrorKind as K;
        if s.len() > MAX_DID_LEN {
            return Err(DidError::new(
                K::TooLong,
                format!("a DID is at most {MAX_DID_LEN} bytes; this one has {}", s.len()),
            ));
        }
        let Some(rest) = s.strip_prefix("did:") else {
            return Err(DidError::new(
                K::NotADid,
                format!(
                    "{} is not a DID: a DID starts with `did:` (lower case), e.g. did:web:agent.example.com",
                    quote(s)
                ),
            ));
        };
        let Some((method, msid)) = rest.split_once(':') else {
            return Err(DidError::new(
                K::NotADid,
                format!(
                    "{} is not a DID: it needs a method and a method-specific id, e.g. did:web:agent.example.com",
                    quote(s)
                ),
            ));
        };
        if method.is_empty() || !method.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit()) {
            return Err(DidError::new(
                K::InvalidMethod,
                format!("DID method {} is not valid: method names are lower-case letters and digits", quote(method)),
            ));
        }
        if method != "web" {
            return Err(DidError::new(
                K::UnsupportedMethod,
                format!("DID method `{method}` is not supported: A2A 0.3 identifies agents with did:web DIDs only"),
            ));
        }
        let (authority, segments) = match msid.split_once(':') {
            None => (msid, None),
            Some((a, rest)) => (a, Some(rest)),
        };
        let (host, port) = match authority.split_once('%') {
            None => (authority, None),
            Some((host, escaped)) => (host, Some(escaped)),
        };
        // The escape is checked first: `example%2Ecom` is an escape problem, not a single-label host.
        let port = match port {
            None => None,
            Some(escaped) => Some(parse_port(escaped)?),
        };
        check_host(host)?;
        for seg in segments.into_iter().flat_map(|p| p.split(':')) {
            check_path_segment(seg)?;
        }
        Ok((host, port, segments))
    }

    /// Builds the DID of an agent listening on `host` and `port` (e.g. `localhost`, `Some(8080)` gives
    /// `did:web:localhost%3A8080`), with optional path segments. The host is lower-cased; it must be a DNS name, not an
    /// IP address.
    pub fn for_host_port(host: &str, port: Option<u16>, path: &[&str]) -> Result<Did, DidError> {
        if host.parse::<IpAddr>().is_ok() || host.starts_with('[') {
            return Err(DidError::new(
                DidErrorKind::IpAddressHost,
                format!("{} is an IP address; a did:web DID needs the agent's DNS name (e.g. localhost)", quote(host)),
            ));
        }
        let mut s = format!("{PREFIX}{}", host.to_ascii_lowercase());
        if let Some(p) = port {
            s.push_str(&format!("%3A{p}"));
        }
        for seg in path {
            s.push(':');
            s.push_str(seg);
        }
        Did::parse(&s)
    }

    /// The DID as a string.
    pub fn as_str(&self) -> &str {
        &self.s
    }

    /// The host, e.g. `example.com`.
    pub fn host(&self) -> &str {
        &self.host
    }

    /// The port, when the DID names one (`%3A8443`).
    pub fn port(&self) -> Option<u16> {
        self.port
    }

    /// The path segments after the host (`did:web:example.com:user:alice` has `["user", "alice"]`).
    pub fn path_segments(&self) -> &[String] {
        &self.path
    }

    /// Whether the host is `localhost` or ends with `.localhost` (RFC 6761 loopback names).
    pub fn is_loopback(&self) -> bool {
        self.host == "localhost" || self.host.ends_with(".localhost")
    }

    /// The URL of the DID document (§9.1.2, DID-12 and DID-13): `https://<host>[:<port>]/.well-known/did.json` without path
    /// segments, `https://<host>[:<port>]/<seg>/.../did.json` with them; `http://` only for loopback hosts and only when
    /// `opts.allow_http_loopback` is set.
    pub fn document_url(&self, opts: &ResolveOptions) -> Result<url::Url, DidError> {
        let scheme = if opts.allow_http_loopback && self.is_loopback() { "http" } else { "https" };
        let mut s = format!("{scheme}://{}", self.host);
        if let Some(p) = self.port {
            s.push_str(&format!(":{p}"));
        }
        if self.path.is_empty() {
            s.push_str("/.well-known/did.json");
        } else {
            for seg in &self.path {
                s.push('/');
                s.push_str(seg);
            }
            s.push_str("/did.json");
        }
        url::Url::parse(&s).map_err(|e| {
            DidError::new(DidErrorKind::InvalidHost, format!("{} does not map to a URL: {e}", quote(&self.s)))
        })
    }
}

/// Whether `host` passes every check of [`check_host`], decided in one pass over its bytes: at most `MAX_HOST_LEN`
/// bytes of lower-case letters, digits, `-` and `.`; two labels or more (or `localhost`), none empty, longer than
/// `MAX_LABEL_LEN` or starting or ending with `-`; the last one starting with a letter. A punycode (`xn--`) label, or
/// anything else, takes the long way ([`check_host_in_full`], which also says what is wrong).
fn plainly_valid_host(host: &str) -> bool {
    let b = host.as_bytes();
    if b.is_empty() || b.len() > MAX_HOST_LEN {
        return false;
    }
    let mut labels = 0;
    for label in b.split(|&c| c == b'.') {
        labels += 1;
        let (Some(&first), Some(&last)) = (label.first(), label.last()) else { return false };
        if label.len() > MAX_LABEL_LEN
            || first == b'-'
            || last == b'-'
            || label.starts_with(b"xn--")
            || !label.iter().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        {
            return false;
        }
    }
    let last_label_starts_with_digit =
        b.rsplit(|&c| c == b'.').next().and_then(|l| l.first()).is_some_and(u8::is_ascii_digit);
    !last_label_starts_with_digit && (labels >= 2 || host == "localhost")
}

fn check_host(host: &str) -> Result<(), DidError> {
    if plainly_valid_host(host) {
        return Ok(());
    }
    check_host_in_full(host)
}

fn check_host_in_full(host: &str) -> Result<(), DidError> {
    use DidErrorKind as K;
    if host.is_empty() {
        return Err(DidError::new(
            K::EmptyHost,
            "did:web needs a host after `did:web:`, e.g. did:web:agent.example.com",
        ));
    }
    if !host.is_ascii() {
        let hint = match url::Host::parse(host) {
            Ok(url::Host::Domain(d)) if d.is_ascii() => format!(": use `{d}`"),
            _ => String::new(),
        };
        return Err(DidError::new(
            K::NonAsciiHost,
            format!("did:web host {} contains non-ASCII characters; write it in punycode (xn--...){hint}", quote(host)),
        ));
    }
    if host.starts_with('[') {
        return Err(DidError::new(
            K::IpAddressHost,
            format!("did:web host {} is an IP address literal; did:web needs a DNS name", quote(host)),
        ));
    }
    if let Some(c) = host.chars().find(|c| !(c.is_ascii_alphanumeric() || *c == '-' || *c == '.')) {
        return Err(DidError::new(
            K::InvalidHost,
            format!(
                "did:web host {} contains {c:?}; a host is labels of letters, digits and `-` separated by `.` (a port is written %3A<port>, a path :<segment>)",
                quote(host)
            ),
        ));
    }
    if host.bytes().any(|b| b.is_ascii_uppercase()) {
        return Err(DidError::new(
            K::UppercaseHost,
            format!("did:web host {} must be lower case: use `{}`", quote(host), host.to_ascii_lowercase()),
        ));
    }
    if host.len() > MAX_HOST_LEN {
        return Err(DidError::new(K::InvalidHost, format!("did:web host is longer than {MAX_HOST_LEN} bytes")));
    }
    let last = host.rsplit('.').next().unwrap_or_default();
    if last.bytes().next().is_some_and(|b| b.is_ascii_digit()) {
        return Err(DidError::new(
            K::IpAddressHost,
            format!(
                "did:web host {} is an IP address (or a numeric host read as one); did:web needs a DNS name whose last label starts with a letter",
                quote(host)
            ),
        ));
    }
    let mut labels = 0;
    for label in host.split('.') {
        labels += 1;
        if label.is_empty() {
            return Err(DidError::new(
                K::InvalidHost,
                format!("did:web host {} has an empty label (leading, trailing or double `.`)", quote(host)),
            ));
        }
        if label.len() > MAX_LABEL_LEN {
            return Err(DidError::new(
                K::InvalidHost,
                format!("did:web host {} has a label longer than {MAX_LABEL_LEN} bytes", quote(host)),
            ));
        }
        if label.starts_with('-') || label.ends_with('-') {
            return Err(DidError::new(
                K::InvalidHost,
                format!("did:web host {} has a label that starts or ends with `-`", quote(host)),
            ));
        }
    }
    if labels < 2 && host != "localhost" {
        return Err(DidError::new(
            K::InvalidHost,
            format!(
                "did:web host {} is a single label; use a fully qualified name (e.g. agent.example.com); only `localhost` may stand alone",
                quote(host)
            ),
        ));
    }
    // A URL parser applies IDNA to the host; it must leave it unchanged (this rejects malformed punycode labels).
    // UTS 46 maps lower-case ASCII letters, digits, `-` and `.` to themselves, so only an `xn--` label can change.
    if !host.split('.').any(|label| label.starts_with("xn--")) {
        return Ok(());
    }
    match url::Host::parse(host) {
        Ok(url::Host::Domain(d)) if d == host => Ok(()),
        _ => Err(DidError::new(
            K::InvalidHost,
            format!("did:web host {} is not a valid DNS name (malformed punycode label?)", quote(host)),
        )),
    }
}

fn parse_port(escaped: &str) -> Result<u16, DidError> {
    use DidErrorKind as K;
    let digits = if let Some(d) = escaped.strip_prefix("3A") {
        d
    } else if escaped.starts_with("3a") {
        return Err(DidError::new(
            K::LowercasePercentEscape,
            "the port separator must be written `%3A` (upper-case hex), not `%3a`",
        ));
    } else {
        return Err(DidError::new(
            K::InvalidPercentEscape,
            format!(
                "did:web allows only one percent-escape, `%3A` before a port; found `%{}`",
                escaped.get(..2).unwrap_or(escaped)
            ),
        ));
    };
    let bad = || {
        DidError::new(
            K::InvalidPort,
            format!("port {} is not a number in 1..=65535 without leading zeros", quote(digits)),
        )
    };
    if digits.is_empty() || digits.len() > 5 || !digits.bytes().all(|b| b.is_ascii_digit()) || digits.starts_with('0') {
        return Err(bad());
    }
    match digits.parse::<u16>() {
        Ok(p) if p > 0 => Ok(p),
        _ => Err(bad()),
    }
}

fn check_path_segment(seg: &str) -> Result<(), DidError> {
    use DidErrorKind as K;
    if seg.is_empty() {
        return Err(DidError::new(
            K::InvalidPathSegment,
            "did:web path segments must not be empty (`::` or a trailing `:`)",
        ));
    }
    if seg.contains('%') {
        return Err(DidError::new(
            K::InvalidPercentEscape,
            format!(
                "did:web path segment {} contains a percent-escape; path segments are A-Z a-z 0-9 . - _",
                quote(seg)
            ),
        ));
    }
    if seg == "." || seg == ".." {
        return Err(DidError::new(K::InvalidPathSegment, format!("did:web path segment `{seg}` is not allowed")));
    }
    if let Some(c) = seg.chars().find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'))) {
        return Err(DidError::new(
            K::InvalidPathSegment,
            format!("did:web path segment {} contains {c:?}; path segments are A-Z a-z 0-9 . - _", quote(seg)),
        ));
    }
    Ok(())
}

/// Checks a DID URL fragment (a key id such as `key-1`): 1 to 128 characters of `A-Z a-z 0-9 . _ ~ -`.
pub fn validate_fragment(fragment: &str) -> Result<(), DidError> {
    let bad = |why: &str| {
        DidError::new(
            DidErrorKind::InvalidFragment,
            format!(
                "key id fragment {} {why}; fragments are 1-{MAX_FRAGMENT_LEN} characters of A-Z a-z 0-9 . _ ~ -",
                quote(fragment)
            ),
        )
    };
    if fragment.is_empty() {
        return Err(bad("is empty"));
    }
    if fragment.len() > MAX_FRAGMENT_LEN {
        return Err(bad("is too long"));
    }
    if !fragment.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'~' | b'-')) {
        return Err(bad("contains a character outside the allowed set"));
    }
    Ok(())
}

impl fmt::Display for Did {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.s)
    }
}

impl fmt::Debug for Did {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Did({:?})", self.s)
    }
}

impl FromStr for Did {
    type Err = DidError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Did::parse(s)
    }
}

impl AsRef<str> for Did {
    fn as_ref(&self) -> &str {
        &self.s
    }
}

impl Serialize for Did {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.s)
    }
}

impl<'de> Deserialize<'de> for Did {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Did::parse(&s).map_err(serde::de::Error::custom)
    }
}

/// A DID URL naming a key: `<did>#<fragment>`, e.g. `did:web:example.com#key-1`.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DidUrl {
    did: Did,
    fragment: String,
}

impl DidUrl {
    /// Parses `<did>#<fragment>`; the fragment is required (see [`validate_fragment`]). Paths and queries are not
    /// accepted.
    pub fn parse(s: &str) -> Result<DidUrl, DidError> {
        let Some((did, fragment)) = s.split_once('#') else {
            return Err(DidError::new(
                DidErrorKind::InvalidFragment,
                format!("{} names no key: a DID URL is <did>#<key-id>, e.g. did:web:example.com#key-1", quote(s)),
            ));
        };
        let did = Did::parse(did)?;
        DidUrl::new(did, fragment)
    }

    /// Builds a DID URL from a DID and a fragment.
    pub fn new(did: Did, fragment: &str) -> Result<DidUrl, DidError> {
        validate_fragment(fragment)?;
        Ok(DidUrl { did, fragment: fragment.to_owned() })
    }

    /// The DID.
    pub fn did(&self) -> &Did {
        &self.did
    }

    /// The fragment (the key id), without `#`.
    pub fn fragment(&self) -> &str {
        &self.fragment
    }
}

impl fmt::Display for DidUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}#{}", self.did, self.fragment)
    }
}

impl fmt::Debug for DidUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "DidUrl(\"{self}\")")
    }
}

impl FromStr for DidUrl {
    type Err = DidError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        DidUrl::parse(s)
    }
}

impl Serialize for DidUrl {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for DidUrl {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        DidUrl::parse(&s).map_err(serde::de::Error::custom)
    }
}

/// A verification method of a DID document.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VerificationMethod {
    /// `<did>#<fragment>` or `#<fragment>`.
    pub id: String,
    /// The method type, e.g. `JsonWebKey2020`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The DID that controls the key.
    pub controller: String,
    /// The public key as a JWK (RFC 7517), for JWK-based method types.
    #[serde(rename = "publicKeyJwk", default, skip_serializing_if = "Option::is_none")]
    pub public_key_jwk: Option<Value>,
}

impl VerificationMethod {
    /// The fragment of the method's id (after `#`), if the id has one.
    pub fn fragment(&self) -> Option<&str> {
        self.id.split_once('#').map(|(_, f)| f)
    }
}

/// An entry of a verification relationship (`authentication`, `assertionMethod`): a reference to a method by id, or a
/// method embedded in place.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum MethodRef {
    /// A reference: `<did>#<fragment>` or `#<fragment>`.
    Reference(String),
    /// An embedded verification method.
    Embedded(VerificationMethod),
}

/// A DID document (W3C DID v1.0, JSON representation), restricted to what A2A uses.
///
/// Use [`DidDocument::parse`] for documents fetched from the network: it enforces the size limits and checks that the
/// document is the one of the DID that was resolved. Members A2A does not use (`service`, `alsoKnownAs`, ...) are
/// ignored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DidDocument {
    /// JSON-LD contexts; [`DidDocument::generate`] writes [`DID_CONTEXT_V1`] and [`JWS_2020_CONTEXT`]. Consumers do not
    /// require it.
    #[serde(
        rename = "@context",
        default,
        deserialize_with = "one_or_many_values",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub context: Vec<Value>,
    /// The DID the document describes.
    pub id: Did,
    /// The verification methods.
    #[serde(rename = "verificationMethod", default, skip_serializing_if = "Vec::is_empty")]
    pub verification_method: Vec<VerificationMethod>,
    /// Methods that authenticate as the DID subject.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub authentication: Vec<MethodRef>,
    /// Methods that make assertions (sign messages) for the DID subject.
    #[serde(rename = "assertionMethod", default, skip_serializing_if = "Vec::is_empty")]
    pub assertion_method: Vec<MethodRef>,
}

fn one_or_many_values<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<Value>, D::Error> {
    Ok(match Value::deserialize(d)? {
        Value::Array(a) => a,
        other => vec![other],
    })
}

/// Splits a method id or reference into its fragment if it names a method of `did`: `#frag` or `<did>#frag`.
fn local_fragment<'a>(did: &Did, id: &'a str) -> Option<&'a str> {
    let (prefix, frag) = id.split_once('#')?;
    (prefix.is_empty() || prefix == did.as_str()).then_some(frag)
}

impl DidDocument {
    /// Writes the DID document of `did` with the given keys (`(key id, public JWK)`), as they are: every key becomes a
    /// `JsonWebKey2020` method `<did>#<key id>` controlled by `did`, referenced from both `authentication` and
    /// `assertionMethod` (DID-14). A key id may be given as `key-1`, `#key-1` or `<did>#key-1`.
    ///
    /// Nothing is checked, so that tests can publish keys that verifiers must refuse; an agent publishing its own
    /// document uses [`DidDocument::try_generate`].
    pub fn generate<K: AsRef<str>>(did: &Did, keys: &[(K, Value)]) -> DidDocument {
        let methods: Vec<VerificationMethod> = keys
            .iter()
            .map(|(key_id, jwk)| {
                let key_id = key_id.as_ref();
                let frag = key_id
                    .strip_prefix(did.as_str())
                    .and_then(|rest| rest.strip_prefix('#'))
                    .or_else(|| key_id.strip_prefix('#'))
                    .unwrap_or(key_id);
                VerificationMethod {
                    id: format!("{did}#{frag}"),
                    kind: JSON_WEB_KEY_2020.to_owned(),
                    controller: did.to_string(),
                    public_key_jwk: Some(jwk.clone()),
                }
            })
            .collect();
        let refs: Vec<MethodRef> = methods.iter().map(|m| MethodRef::Reference(m.id.clone())).collect();
        DidDocument {
            context: vec![Value::from(DID_CONTEXT_V1), Value::from(JWS_2020_CONTEXT)],
            id: did.clone(),
            verification_method: methods,
            authentication: refs.clone(),
            assertion_method: refs,
        }
    }

    /// [`DidDocument::generate`], after checking that every key id is a valid fragment of `did` given once
    /// (`invalid_fragment`, `unknown_key` for another DID's key id, `invalid_method_id` for a repeated one), that
    /// there are at most [`MAX_VERIFICATION_METHODS`] keys, and that every JWK is a public P-256 key
    /// ([`check_signing_jwk`]): the document an agent publishes is one that [`DidDocument::parse`] accepts and whose
    /// every key can sign.
    pub fn try_generate<K: AsRef<str>>(did: &Did, keys: &[(K, Value)]) -> Result<DidDocument, DidError> {
        if keys.len() > MAX_VERIFICATION_METHODS {
            return Err(DidError::new(
                DidErrorKind::TooManyMethods,
                format!("a DID document holds at most {MAX_VERIFICATION_METHODS} keys"),
            ));
        }
        let mut seen = std::collections::HashSet::new();
        for (key_id, jwk) in keys {
            let frag = fragment_of_key_id(did, key_id.as_ref())?;
            if !seen.insert(frag) {
                return Err(DidError::new(DidErrorKind::InvalidMethodId, format!("key id `{frag}` is given twice")));
            }
            check_signing_jwk(jwk)?;
        }
        Ok(DidDocument::generate(did, keys))
    }

    /// Parses a DID document fetched for `expected` (§9.1.3, DID-17 to DID-22): at most [`MAX_DOCUMENT_BYTES`], a JSON object
    /// whose `id` is exactly `expected`, at most [`MAX_VERIFICATION_METHODS`] methods and entries per relationship,
    /// method ids `<did>#<fragment>` or `#<fragment>` and unique.
    pub fn parse(bytes: &[u8], expected: &Did) -> Result<DidDocument, DidError> {
        use DidErrorKind as K;
        if bytes.len() > MAX_DOCUMENT_BYTES {
            return Err(DidError::new(
                K::DocumentTooLarge,
                format!("the DID document is {} bytes; at most {MAX_DOCUMENT_BYTES} are accepted", bytes.len()),
            ));
        }
        let value: Value = serde_json::from_slice(bytes)
            .map_err(|e| DidError::new(K::InvalidDocument, format!("the DID document is not JSON: {e}")))?;
        let Some(obj) = value.as_object() else {
            return Err(DidError::new(K::InvalidDocument, "the DID document is not a JSON object"));
        };
        let id = match obj.get("id") {
            Some(Value::String(id)) => id,
            Some(_) => return Err(DidError::new(K::InvalidDocument, "the DID document's `id` is not a string")),
            None => return Err(DidError::new(K::InvalidDocument, "the DID document has no `id`")),
        };
        if id != expected.as_str() {
            return Err(DidError::new(
                K::DocumentIdMismatch,
                format!(
                    "the DID document served for {expected} has id {}; a host can only serve the document of its own DID",
                    quote(id)
                ),
            ));
        }
        for (member, max) in [
            ("verificationMethod", MAX_VERIFICATION_METHODS),
            ("authentication", MAX_VERIFICATION_METHODS),
            ("assertionMethod", MAX_VERIFICATION_METHODS),
        ] {
            if let Some(Value::Array(a)) = obj.get(member)
                && a.len() > max
            {
                return Err(DidError::new(
                    K::TooManyMethods,
                    format!("`{member}` has {} entries; at most {max} are accepted", a.len()),
                ));
            }
        }
        let doc: DidDocument = serde_json::from_value(value)
            .map_err(|e| DidError::new(K::InvalidDocument, format!("the DID document is malformed: {e}")))?;
        doc.check_methods()?;
        Ok(doc)
    }

    fn check_methods(&self) -> Result<(), DidError> {
        let mut seen = std::collections::HashSet::new();
        for m in self.methods() {
            let bad = |why: String| {
                DidError::new(DidErrorKind::InvalidMethodId, format!("verification method id {} {why}", quote(&m.id)))
            };
            let Some(frag) = local_fragment(&self.id, &m.id) else {
                return Err(bad(format!("must be `{}#<key-id>` or `#<key-id>`", self.id)));
            };
            validate_fragment(frag).map_err(|e| bad(format!("has an invalid fragment: {e}")))?;
            if !seen.insert(frag) {
                return Err(bad("appears twice".to_owned()));
            }
        }
        if seen.len() > MAX_VERIFICATION_METHODS {
            return Err(DidError::new(
                DidErrorKind::TooManyMethods,
                format!(
                    "the DID document declares {} methods; at most {MAX_VERIFICATION_METHODS} are accepted",
                    seen.len()
                ),
            ));
        }
        Ok(())
    }

    /// Every verification method: those of `verificationMethod`, then those embedded in `authentication` and
    /// `assertionMethod`.
    pub fn methods(&self) -> impl Iterator<Item = &VerificationMethod> {
        let embedded = self.authentication.iter().chain(&self.assertion_method).filter_map(|r| match r {
            MethodRef::Embedded(m) => Some(m),
            MethodRef::Reference(_) => None,
        });
        self.verification_method.iter().chain(embedded)
    }

    /// The verification method whose id has this fragment.
    pub fn method(&self, fragment: &str) -> Option<&VerificationMethod> {
        self.methods().find(|m| local_fragment(&self.id, &m.id) == Some(fragment))
    }

    /// Whether the method with this fragment is listed (by reference or embedded) in `assertionMethod` or
    /// `authentication`.
    pub fn may_sign(&self, fragment: &str) -> bool {
        self.authentication.iter().chain(&self.assertion_method).any(|r| {
            let id = match r {
                MethodRef::Reference(id) => id,
                MethodRef::Embedded(m) => &m.id,
            };
            local_fragment(&self.id, id) == Some(fragment)
        })
    }

    /// The public JWK that verifies signatures made with `key_id` (§9.1.4, DID-23 to DID-26). `key_id` is `<did>#<fragment>`
    /// (the DID must be this document's), `#<fragment>` or a bare `<fragment>`. The method must exist (`unknown_key`),
    /// be listed in `assertionMethod` or `authentication` (`key_not_authorized`), have one of the
    /// [`SIGNING_METHOD_TYPES`] with a `publicKeyJwk` (`unsupported_key_type`), and the JWK must be a public ECDSA
    /// P-256 key ([`check_signing_jwk`]).
    pub fn find_signing_jwk(&self, key_id: &str) -> Result<&Value, DidError> {
        use DidErrorKind as K;
        let frag = fragment_of_key_id(&self.id, key_id).map_err(|e| {
            DidError::new(K::UnknownKey, format!("key id {} is not a key of {}: {e}", quote(key_id), self.id))
        })?;
        let Some(method) = self.method(frag) else {
            return Err(DidError::new(
                K::UnknownKey,
                format!("the DID document of {} has no verification method `#{frag}`", self.id),
            ));
        };
        if !self.may_sign(frag) {
            return Err(DidError::new(
                K::KeyNotAuthorized,
                format!(
                    "verification method `#{frag}` of {} is listed in neither assertionMethod nor authentication, so it may not sign",
                    self.id
                ),
            ));
        }
        if !SIGNING_METHOD_TYPES.contains(&method.kind.as_str()) {
            return Err(DidError::new(
                K::UnsupportedKeyType,
                format!(
                    "verification method `#{frag}` has type {}; A2A requires an ECDSA P-256 key as JsonWebKey2020 (or JsonWebKey, EcdsaSecp256r1VerificationKey2019) with publicKeyJwk",
                    quote(&method.kind)
                ),
            ));
        }
        let Some(jwk) = &method.public_key_jwk else {
            return Err(DidError::new(
                K::UnsupportedKeyType,
                format!("verification method `#{frag}` has no publicKeyJwk; A2A requires the ECDSA P-256 key as a JWK"),
            ));
        };
        check_signing_jwk(jwk)?;
        Ok(jwk)
    }
}

/// The fragment named by a key id given as `<did>#<fragment>`, `#<fragment>` or `<fragment>`.
fn fragment_of_key_id<'a>(did: &Did, key_id: &'a str) -> Result<&'a str, DidError> {
    let frag = if key_id.starts_with("did:") {
        let Some((d, frag)) = key_id.split_once('#') else {
            return Err(DidError::new(
                DidErrorKind::InvalidFragment,
                format!("key id {} has no `#<key-id>`", quote(key_id)),
            ));
        };
        if d != did.as_str() {
            return Err(DidError::new(
                DidErrorKind::UnknownKey,
                format!("key id {} belongs to another DID than {did}", quote(key_id)),
            ));
        }
        frag
    } else {
        key_id.strip_prefix('#').unwrap_or(key_id)
    };
    validate_fragment(frag)?;
    Ok(frag)
}

/// Checks that a JWK is a public ECDSA P-256 key fit for ES256: `kty` `EC` and `crv` `P-256` (else
/// `unsupported_key_type`), `alg` absent or `ES256`, `use` absent or `sig`, no private member `d`, and `x`/`y` the
/// unpadded base64url encodings of 32 bytes each forming a point on the curve (else `invalid_jwk`).
pub fn check_signing_jwk(jwk: &Value) -> Result<(), DidError> {
    use DidErrorKind as K;
    let Some(obj) = jwk.as_object() else {
        return Err(DidError::new(K::InvalidJwk, "publicKeyJwk is not a JSON object"));
    };
    let member = |name: &str| obj.get(name).and_then(Value::as_str);
    match member("kty") {
        Some("EC") => {}
        Some(kty) => {
            return Err(DidError::new(
                K::UnsupportedKeyType,
                format!(
                    "the key has kty {}; A2A accepts only ECDSA P-256 keys (kty \"EC\", crv \"P-256\"){}",
                    quote(kty),
                    if kty == "RSA" { ": RSA keys are refused" } else { "" }
                ),
            ));
        }
        None => {
            return Err(DidError::new(
                K::InvalidJwk,
                "publicKeyJwk has no string `kty`; A2A requires kty \"EC\", crv \"P-256\"",
            ));
        }
    }
    match member("crv") {
        Some("P-256") => {}
        other => {
            return Err(DidError::new(
                K::UnsupportedKeyType,
                format!(
                    "the key's curve is {}; A2A accepts only P-256 (secp256r1, prime256v1)",
                    other.map_or_else(|| "missing".to_owned(), quote)
                ),
            ));
        }
    }
    if let Some(alg) = obj.get("alg")
        && alg.as_str() != Some("ES256")
    {
        return Err(DidError::new(
            K::UnsupportedKeyType,
            format!("the key's alg is {alg}; A2A signs with ES256 only (ECDSA P-256 with SHA-256)"),
        ));
    }
    if let Some(u) = obj.get("use")
        && u.as_str() != Some("sig")
    {
        return Err(DidError::new(K::InvalidJwk, format!("the key's use is {u}; a signing key has use \"sig\"")));
    }
    if obj.contains_key("d") {
        return Err(DidError::new(
            K::InvalidJwk,
            "publicKeyJwk contains the private key (`d`); that key is compromised: generate a new one and publish only x and y",
        ));
    }
    let coord = |name: &str| -> Result<Vec<u8>, DidError> {
        let bad = || {
            DidError::new(
                K::InvalidJwk,
                format!("the key's `{name}` is not the unpadded base64url encoding of 32 bytes"),
            )
        };
        let s = member(name).ok_or_else(bad)?;
        let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(s).map_err(|_| bad())?;
        if bytes.len() == 32 { Ok(bytes) } else { Err(bad()) }
    };
    let x = coord("x")?;
    let y = coord("y")?;
    let mut sec1 = Vec::with_capacity(65);
    sec1.push(0x04);
    sec1.extend_from_slice(&x);
    sec1.extend_from_slice(&y);
    p256::PublicKey::from_sec1_bytes(&sec1)
        .map_err(|_| DidError::new(K::InvalidJwk, "the key's x and y are not a point on the P-256 curve"))?;
    Ok(())
}

/// How long a resolver keeps a DID document, from the response's `Cache-Control` (DID-27): `no-store` or `no-cache`
/// give zero; otherwise `max-age`, capped at [`MAX_CACHE_TTL`]; without a usable `max-age`, [`DEFAULT_CACHE_TTL`].
pub fn cache_lifetime(cache_control: Option<&str>) -> Duration {
    let Some(cc) = cache_control else {
        return DEFAULT_CACHE_TTL;
    };
    let mut max_age = None;
    for directive in cc.split(',') {
        let directive = directive.trim();
        let (name, value) = match directive.split_once('=') {
            Some((n, v)) => (n.trim(), Some(v.trim().trim_matches('"'))),
            None => (directive, None),
        };
        if name.eq_ignore_ascii_case("no-store") || name.eq_ignore_ascii_case("no-cache") {
            return Duration::ZERO;
        }
        if name.eq_ignore_ascii_case("max-age") && max_age.is_none() {
            max_age = value
                .filter(|v| !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()))
                // Digits beyond u64 mean "very long": saturate, the cap applies anyway.
                .map(|v| v.parse::<u64>().unwrap_or(u64::MAX));
        }
    }
    max_age.map_or(DEFAULT_CACHE_TTL, |s| Duration::from_secs(s).min(MAX_CACHE_TTL))
}

/// Whether a resolver may connect to `ip` without being configured otherwise (DID-29): false for unspecified,
/// loopback, private (RFC 1918, RFC 4193), shared (RFC 6598), link-local, documentation, benchmarking, multicast,
/// broadcast and reserved addresses, and for IPv6 addresses that embed such an IPv4 address (IPv4-mapped,
/// IPv4-compatible, NAT64 `64:ff9b::/96`, 6to4 `2002::/16`).
pub fn is_public_address(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => is_public_v4(v4),
        IpAddr::V6(v6) => is_public_v6(v6),
    }
}

fn is_public_v4(ip: Ipv4Addr) -> bool {
    let [a, b, c, _] = ip.octets();
    !(a == 0 // "this network"
        || a == 10
        || (a == 100 && (64..128).contains(&b)) // shared address space (RFC 6598)
        || a == 127
        || (a == 169 && b == 254)
        || (a == 172 && (16..32).contains(&b))
        || (a == 192 && b == 0 && c == 0) // IETF protocol assignments
        || (a == 192 && b == 0 && c == 2) // TEST-NET-1
        || (a == 192 && b == 88 && c == 99) // 6to4 relay anycast (deprecated)
        || (a == 192 && b == 168)
        || (a == 198 && (b == 18 || b == 19)) // benchmarking
        || (a == 198 && b == 51 && c == 100) // TEST-NET-2
        || (a == 203 && b == 0 && c == 113) // TEST-NET-3
        || a >= 224) // multicast, reserved, broadcast
}

fn is_public_v6(ip: Ipv6Addr) -> bool {
    let seg = ip.segments();
    let embedded_v4 = |hi: u16, lo: u16| Ipv4Addr::from((u32::from(hi) << 16) | u32::from(lo));
    match seg {
        // ::, ::1 and the deprecated IPv4-compatible ::a.b.c.d
        [0, 0, 0, 0, 0, 0, _, _] => false,
        // IPv4-mapped ::ffff:a.b.c.d
        [0, 0, 0, 0, 0, 0xffff, hi, lo] => is_public_v4(embedded_v4(hi, lo)),
        // NAT64 64:ff9b::a.b.c.d
        [0x64, 0xff9b, 0, 0, 0, 0, hi, lo] => is_public_v4(embedded_v4(hi, lo)),
        // 6to4 2002:a.b.c.d::/48
        [0x2002, hi, lo, ..] => is_public_v4(embedded_v4(hi, lo)),
        [s0, s1, ..] => {
            // Only global unicast 2000::/3 is public, minus the special-purpose blocks inside it.
            (s0 & 0xe000) == 0x2000
                && !(s0 == 0x2001 && s1 < 0x0200) // 2001::/23 IETF protocol assignments (Teredo, ORCHID, ...)
                && !(s0 == 0x2001 && s1 == 0x0db8) // documentation
                && s0 != 0x3fff // documentation (RFC 9637, 3fff::/20)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        /// The one-pass check of a host never accepts what the full check refuses.
        #[test]
        fn the_fast_host_check_agrees_with_the_full_one(host in "[a-z0-9.-]{0,40}|[a-zA-Z0-9.%_ -]{0,20}|xn--[a-z0-9-]{0,10}\\.[a-z]{2,3}") {
            if plainly_valid_host(&host) {
                proptest::prop_assert!(check_host_in_full(&host).is_ok(), "{host:?}");
            }
        }
    }

    #[test]
    fn plain_hosts_take_the_fast_check() {
        for h in ["agent.example.com", "localhost", "a-b.c1.example", "x.y"] {
            assert!(plainly_valid_host(h), "{h}");
            assert!(check_host_in_full(h).is_ok(), "{h}");
        }
        for h in ["", "example", "1.2.3.4", "a..b", "-a.b", "a-.b", "A.b", "xn--abc.com", "a.1b", "a_b.c"] {
            assert!(!plainly_valid_host(h), "{h}");
        }
    }

    fn reason(s: &str) -> &'static str {
        Did::parse(s).err().map_or("ok", |e| e.reason())
    }

    #[test]
    fn did_key_is_refused_naming_the_method() {
        let e = Did::parse("did:key:z6MkhaXgBZDvotDkL5257faiztiGiC2QtKLGpbnnEGta2doK").expect_err("refused");
        assert_eq!(e.reason(), "unsupported_method");
        assert!(e.message().contains("`key`"), "{}", e.message());
        assert_eq!(e.code(), ErrorCode::INVALID_SENDER);
    }

    #[test]
    fn uppercase_host_is_refused_with_lower_case_suggestion() {
        let e = Did::parse("did:web:Example.COM").expect_err("refused");
        assert_eq!(e.reason(), "uppercase_host");
        assert!(e.message().contains("`example.com`"), "{}", e.message());
    }

    #[test]
    fn unicode_host_is_refused_with_punycode_suggestion() {
        let e = Did::parse("did:web:bücher.example").expect_err("refused");
        assert_eq!(e.reason(), "non_ascii_host");
        assert!(e.message().contains("xn--bcher-kva.example"), "{}", e.message());
        assert!(Did::parse("did:web:xn--bcher-kva.example").is_ok());
    }

    #[test]
    fn numeric_hosts_a_url_parser_reads_as_ipv4_are_refused() {
        for s in ["did:web:127.0.0.1", "did:web:2130706433", "did:web:0x7f.1", "did:web:10.0.0.1%3A80", "did:web:[::1]"]
        {
            assert_eq!(reason(s), "ip_address_host", "{s}");
        }
        assert_eq!(reason("did:web:1.2.example.com"), "ok");
    }

    #[test]
    fn lower_case_port_escape_is_refused_with_message() {
        let e = Did::parse("did:web:example.com%3a8443").expect_err("refused");
        assert_eq!(e.reason(), "lowercase_percent_escape");
        assert!(e.message().contains("%3A"));
    }

    #[test]
    fn document_url_uses_http_only_for_loopback_when_allowed() {
        let local = Did::parse("did:web:localhost%3A8080").expect("valid");
        let sub = Did::parse("did:web:agent-b.localhost%3A9000:x").expect("valid");
        let remote = Did::parse("did:web:example.com%3A8080").expect("valid");
        let http = ResolveOptions::with_http_loopback();
        let https = ResolveOptions::default();
        let url = |d: &Did, o| d.document_url(o).map(|u| u.to_string()).expect("url");
        assert_eq!(url(&local, &http), "http://localhost:8080/.well-known/did.json");
        assert_eq!(url(&local, &https), "https://localhost:8080/.well-known/did.json");
        assert_eq!(url(&sub, &http), "http://agent-b.localhost:9000/x/did.json");
        assert_eq!(url(&remote, &http), "https://example.com:8080/.well-known/did.json");
    }

    #[test]
    fn for_host_port_builds_the_listen_address_did() {
        let d = Did::for_host_port("LocalHost", Some(8080), &[]).expect("valid");
        assert_eq!(d.as_str(), "did:web:localhost%3A8080");
        let d = Did::for_host_port("example.com", None, &["user", "alice"]).expect("valid");
        assert_eq!(d.as_str(), "did:web:example.com:user:alice");
        assert_eq!(Did::for_host_port("0.0.0.0", Some(80), &[]).map_err(|e| e.reason()), Err("ip_address_host"));
    }

    #[test]
    fn did_serde_round_trips_and_rejects_invalid() {
        let d: Did = serde_json::from_str("\"did:web:example.com\"").expect("valid");
        assert_eq!(serde_json::to_string(&d).expect("serializes"), "\"did:web:example.com\"");
        assert!(serde_json::from_str::<Did>("\"did:web:EXAMPLE.com\"").is_err());
        let u: DidUrl = serde_json::from_str("\"did:web:example.com#key-1\"").expect("valid");
        assert_eq!(u.fragment(), "key-1");
        assert_eq!(u.to_string(), "did:web:example.com#key-1");
    }

    #[test]
    fn generate_publishes_any_key_but_try_generate_refuses_non_p256() {
        let did = Did::parse("did:web:agent-a.example.com").expect("valid");
        let p384 = serde_json::json!({"kty": "EC", "crv": "P-384",
            "x": "w9BWO9P3EOroU-Adz40vchVFrLjWdbGPn5pFNAHf7CCwU9DKH14BAPqlQ8OeRGW2",
            "y": "UhIA-GaXwYsHlwevsZXCxfh-fhpbD1QU0xbNaj837T03jFRt_yrvDDXiNS2tL5U6"});
        let doc = DidDocument::generate(&did, &[("#key-384", p384.clone())]);
        assert_eq!(doc.verification_method.first().map(|m| m.id.as_str()), Some("did:web:agent-a.example.com#key-384"));
        // The published P-384 key is found but refused for signing.
        let e = doc.find_signing_jwk("key-384").expect_err("refused");
        assert_eq!((e.reason(), e.code()), ("unsupported_key_type", ErrorCode::UNSUPPORTED_KEY_TYPE));
        let e = DidDocument::try_generate(&did, &[("key-384", p384)]).expect_err("refused");
        assert_eq!(e.reason(), "unsupported_key_type");
    }

    #[test]
    fn cache_lifetime_is_capped_at_one_hour_and_honours_no_store() {
        assert_eq!(cache_lifetime(None), DEFAULT_CACHE_TTL);
        assert_eq!(cache_lifetime(Some("public, max-age=600")), Duration::from_secs(600));
        assert_eq!(cache_lifetime(Some("max-age=86400")), MAX_CACHE_TTL);
        assert_eq!(cache_lifetime(Some("max-age=99999999999999999999999")), MAX_CACHE_TTL);
        assert_eq!(cache_lifetime(Some("max-age=60, no-store")), Duration::ZERO);
        assert_eq!(cache_lifetime(Some("No-Cache")), Duration::ZERO);
        assert_eq!(cache_lifetime(Some("max-age=abc")), DEFAULT_CACHE_TTL);
        assert_eq!(cache_lifetime(Some("max-age=\"120\"")), Duration::from_secs(120));
    }

    #[test]
    fn private_loopback_and_link_local_addresses_are_not_public() {
        for a in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "172.31.255.255",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "224.0.0.1",
            "255.255.255.255",
            "::1",
            "::",
            "fe80::1",
            "fc00::1",
            "fd12:3456::1",
            "ff02::1",
            "::ffff:127.0.0.1",
            "::ffff:10.0.0.1",
            "64:ff9b::a00:1",
            "2002:a00:1::1",
            "2001:db8::1",
            "::127.0.0.1",
        ] {
            let ip: IpAddr = a.parse().expect("address");
            assert!(!is_public_address(ip), "{a} treated as public");
        }
        for a in ["93.184.216.34", "8.8.8.8", "172.32.0.1", "2606:4700::1111", "::ffff:8.8.8.8", "2a00:1450::1"] {
            let ip: IpAddr = a.parse().expect("address");
            assert!(is_public_address(ip), "{a} treated as private");
        }
    }
}
