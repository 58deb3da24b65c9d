//! Header names of the protocol and parsers for their values (`spec/PROTOCOL.md` §3).
//!
//! Header names are case-insensitive on the wire; the constants are lower case, as HTTP/2 sends them.
//! Every parser accepts any input without panicking and answers a [`HeaderError`] naming the header.

use std::collections::BTreeMap;

use crate::capability;

/// `A2A-Version`: the protocol version, on every request and response.
pub const A2A_VERSION: &str = "a2a-version";
/// `A2A-Sender-ID`: the DID of whoever sent the message.
pub const A2A_SENDER_ID: &str = "a2a-sender-id";
/// `A2A-Capabilities`: DISCOVER's compact JSON array of capability names.
pub const A2A_CAPABILITIES: &str = "a2a-capabilities";
/// `A2A-Region`: region restrictions (DISCOVER, responses) or the caller's region (requests).
pub const A2A_REGION: &str = "a2a-region";
/// `A2A-Negotiation-ID`: the negotiation an EXECUTE belongs to.
pub const A2A_NEGOTIATION_ID: &str = "a2a-negotiation-id";
/// `A2A-Execution-ID`: the execution a response is about.
pub const A2A_EXECUTION_ID: &str = "a2a-execution-id";
/// `A2A-Signature`: the ES256 compact JWS carrying `message_integrity`.
pub const A2A_SIGNATURE: &str = "a2a-signature";
/// `A2A-Api-Key`: the API key for `api_key` capabilities.
pub const A2A_API_KEY: &str = "a2a-api-key";
/// `Idempotency-Key`: makes a retried EXECUTE return the same execution.
pub const IDEMPOTENCY_KEY: &str = "idempotency-key";
/// `A2A-Forwarded-Sender`: on a request a gateway forwards and signs with its own key (GW-8), the DID of the caller
/// the gateway received it from. An agent honours it only on a request signed by a gateway it trusts (GW-9).
pub const A2A_FORWARDED_SENDER: &str = "a2a-forwarded-sender";
/// `A2A-Forwarded-Verified`: `true` when the gateway verified the forwarded sender's own signature, else `false`
/// (GW-8).
pub const A2A_FORWARDED_VERIFIED: &str = "a2a-forwarded-verified";

/// The request headers a browser must be allowed to send (`Access-Control-Allow-Headers`).
pub const CORS_ALLOW_HEADERS: &str = "A2A-Version, A2A-Sender-ID, A2A-Negotiation-ID, A2A-Execution-ID, A2A-Signature, \
A2A-Api-Key, A2A-Region, Idempotency-Key, Authorization, Content-Type, traceparent, tracestate";
/// The response headers a browser script may read (`Access-Control-Expose-Headers`).
pub const CORS_EXPOSE_HEADERS: &str = "A2A-Version, A2A-Sender-ID, A2A-Capabilities, A2A-Region, A2A-Negotiation-ID, \
A2A-Execution-ID, A2A-Signature, Location, Retry-After, WWW-Authenticate";
/// The methods of the protocol's endpoints (`Access-Control-Allow-Methods`).
pub const CORS_ALLOW_METHODS: &str = "OPTIONS, POST, GET";

/// The longest id (negotiation id, idempotency key) accepted in a header, in bytes.
pub const MAX_ID_LEN: usize = 128;
/// The most capability names accepted in `A2A-Capabilities`.
pub const MAX_CAPABILITIES: usize = 1024;

/// A header value that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("header {header}: {reason}")]
pub struct HeaderError {
    /// The header's name.
    pub header: &'static str,
    /// What is wrong with the value.
    pub reason: String,
}

fn err(header: &'static str, reason: impl Into<String>) -> HeaderError {
    HeaderError { header, reason: reason.into() }
}

/// A protocol version `major.minor`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Version {
    /// Major number.
    pub major: u16,
    /// Minor number.
    pub minor: u16,
}

impl Version {
    /// Version 0.3, the one this crate implements.
    pub const V0_3: Version = Version { major: 0, minor: 3 };
}

impl std::fmt::Display for Version {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

/// Parses `A2A-Version`: `major.minor`, decimal digits without leading zeros (surrounding blanks ignored).
pub fn parse_version(value: &str) -> Result<Version, HeaderError> {
    let v = value.trim_matches([' ', '\t']);
    let (maj, min) = v
        .split_once('.')
        .ok_or_else(|| err("A2A-Version", format!("{v:?} is not of the form major.minor (e.g. 0.3)")))?;
    let num = |s: &str| -> Option<u16> {
        if s.is_empty() || s.len() > 5 || !s.bytes().all(|b| b.is_ascii_digit()) || (s.len() > 1 && s.starts_with('0'))
        {
            return None;
        }
        s.parse().ok()
    };
    match (num(maj), num(min)) {
        (Some(major), Some(minor)) => Ok(Version { major, minor }),
        _ => Err(err("A2A-Version", format!("{v:?} is not of the form major.minor (e.g. 0.3)"))),
    }
}

/// Formats `A2A-Capabilities`: a compact JSON array of names.
pub fn format_capabilities<S: AsRef<str>>(names: &[S]) -> String {
    let names: Vec<&str> = names.iter().map(AsRef::as_ref).collect();
    serde_json::to_string(&names).unwrap_or_else(|_| "[]".to_owned())
}

/// Parses `A2A-Capabilities`: a JSON array of valid capability names (at most [`MAX_CAPABILITIES`], no duplicates).
pub fn parse_capabilities(value: &str) -> Result<Vec<String>, HeaderError> {
    const H: &str = "A2A-Capabilities";
    let names: Vec<String> =
        serde_json::from_str(value).map_err(|e| err(H, format!("not a JSON array of strings: {e}")))?;
    if names.len() > MAX_CAPABILITIES {
        return Err(err(H, format!("more than {MAX_CAPABILITIES} names")));
    }
    let mut seen = std::collections::HashSet::new();
    for n in &names {
        capability::validate_name(n).map_err(|e| err(H, e.to_string()))?;
        if !seen.insert(n.as_str()) {
            return Err(err(H, format!("{n:?} is listed twice")));
        }
    }
    Ok(names)
}

/// Formats DISCOVER's `A2A-Region`: a compact JSON object from capability name to its allowed regions.
pub fn format_region_map(map: &BTreeMap<String, Vec<String>>) -> String {
    serde_json::to_string(map).unwrap_or_else(|_| "{}".to_owned())
}

/// Parses DISCOVER's `A2A-Region`.
pub fn parse_region_map(value: &str) -> Result<BTreeMap<String, Vec<String>>, HeaderError> {
    const H: &str = "A2A-Region";
    let map: BTreeMap<String, Vec<String>> = serde_json::from_str(value)
        .map_err(|e| err(H, format!("not a JSON object from capability name to a list of regions: {e}")))?;
    for (name, regions) in &map {
        capability::validate_name(name).map_err(|e| err(H, e.to_string()))?;
        for r in regions {
            parse_region(r)?;
        }
    }
    Ok(map)
}

/// Parses a single region name (`A2A-Region` on a request, or one region in a response): letters, digits, `-`, `_`.
pub fn parse_region(value: &str) -> Result<&str, HeaderError> {
    let v = value.trim_matches([' ', '\t']);
    if v.is_empty() || v.len() > 64 || !v.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_') {
        return Err(err("A2A-Region", format!("{v:?} is not a region name (1-64 letters, digits, `-`, `_`)")));
    }
    Ok(v)
}

/// Parses an opaque id carried in a header (`A2A-Negotiation-ID`, `Idempotency-Key`):
/// 1 to [`MAX_ID_LEN`] characters of `A-Z a-z 0-9 . _ ~ -` (the URL-unreserved set).
pub fn parse_token<'a>(header: &'static str, value: &'a str) -> Result<&'a str, HeaderError> {
    let v = value.trim_matches([' ', '\t']);
    if v.is_empty() {
        return Err(err(header, "is empty"));
    }
    if v.len() > MAX_ID_LEN {
        return Err(err(header, format!("is longer than {MAX_ID_LEN} bytes")));
    }
    if !v.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'~' | b'-')) {
        return Err(err(header, "contains characters outside A-Z a-z 0-9 . _ ~ -"));
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_parses_strictly() {
        assert_eq!(parse_version("0.3"), Ok(Version::V0_3));
        assert_eq!(parse_version(" 0.3\t"), Ok(Version::V0_3));
        assert_eq!(parse_version("1.12").map(|v| v.to_string()), Ok("1.12".to_owned()));
        for bad in ["", "0", "0.", ".3", "00.3", "0.03", "v0.3", "0.3.1", "0.3 beta", "99999999.1", "０.３"] {
            assert!(parse_version(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn capabilities_round_trip_and_reject_bad_names() {
        let s = format_capabilities(&["query_status", "submit_report"]);
        assert_eq!(s, r#"["query_status","submit_report"]"#);
        assert_eq!(parse_capabilities(&s).expect("parses"), vec!["query_status", "submit_report"]);
        for bad in [r#"["Query_status"]"#, r#"["a_b","a_b"]"#, "query_status", r#"[1]"#, r#"{"a":1}"#] {
            assert!(parse_capabilities(bad).is_err(), "{bad} accepted");
        }
        assert_eq!(parse_capabilities("[]").expect("empty list"), Vec::<String>::new());
    }

    #[test]
    fn region_map_round_trips() {
        let mut m = BTreeMap::new();
        m.insert("process_payment".to_owned(), vec!["eu-west-1".to_owned()]);
        let s = format_region_map(&m);
        assert_eq!(s, r#"{"process_payment":["eu-west-1"]}"#);
        assert_eq!(parse_region_map(&s).expect("parses"), m);
        assert!(parse_region_map(r#"{"process_payment":["eu west"]}"#).is_err());
    }

    #[test]
    fn tokens_are_bounded_and_restricted() {
        assert_eq!(parse_token("Idempotency-Key", " abc-123_~. "), Ok("abc-123_~."));
        assert!(parse_token("Idempotency-Key", "").is_err());
        assert!(parse_token("Idempotency-Key", "a b").is_err());
        assert!(parse_token("Idempotency-Key", &"a".repeat(129)).is_err());
    }
}
