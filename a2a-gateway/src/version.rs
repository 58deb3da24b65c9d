//! Version isolation (`spec/PROTOCOL.md` GW-5, GW-11..GW-13): the gateway speaks the agents' version
//! (0.3) to its agents and may accept callers on other versions through an explicit translation table.
//!
//! A translation names the caller's version, the agents' version, and two rename tables: header names and top-level
//! JSON member names (of request bodies, response bodies and the `error` object). Requests are renamed from the
//! caller's names to the agents' names and get `A2A-Version` of the agents; responses are renamed back and announce
//! the caller's version. A version with no translation is refused with `400 unsupported_version` listing every
//! version the gateway accepts. Requests in the agents' own version are forwarded untouched (no re-serialisation).
//!
//! ```toml
//! [[translations]]
//! caller_version = "0.9"          # a hypothetical version whose callers say A2A-Sender and "capability"
//! agent_version = "0.3"
//! headers = { "a2a-sender" = "a2a-sender-id" }
//! fields = { "capability" = "target_capability" }
//! ```

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use a2a_core::error::{A2aError, ErrorCode};
use a2a_core::headers::{self as h, Version};
use bytes::Bytes;
use http::{HeaderName, HeaderValue};

use crate::h1::head::{Fields, Headers};
use serde::Deserialize;
use serde_json::{Map, Value, json};

/// One `[[translations]]` entry.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Translation {
    /// The version callers speak, `major.minor`.
    pub caller_version: String,
    /// The version the agents speak; this implementation's agents speak `0.3`.
    #[serde(default = "agent_version")]
    pub agent_version: String,
    /// Header renames: the caller's header name → the agents' header name.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// JSON member renames: the caller's member name → the agents' member name.
    #[serde(default)]
    pub fields: BTreeMap<String, String>,
}

fn agent_version() -> String {
    a2a_core::PROTOCOL_VERSION.to_owned()
}

impl Translation {
    /// Checks the entry: versions parse, the agents' version is the one this gateway forwards, names are valid and
    /// each table is one-to-one (so that responses can be renamed back).
    pub fn validate(&self) -> Result<(), String> {
        let caller = h::parse_version(&self.caller_version).map_err(|e| format!("caller_version: {e}"))?;
        let agent = h::parse_version(&self.agent_version).map_err(|e| format!("agent_version: {e}"))?;
        if agent != Version::V0_3 {
            return Err(format!(
                "agent_version {agent}: this gateway forwards to agents speaking {} only",
                a2a_core::PROTOCOL_VERSION
            ));
        }
        if caller == agent {
            return Err(format!("caller_version {caller} is the agents' own version; it needs no translation"));
        }
        let mut seen = std::collections::BTreeSet::new();
        for (from, to) in &self.headers {
            for n in [from, to] {
                if HeaderName::from_bytes(n.as_bytes()).map(|h| h.as_str() != n).unwrap_or(true) {
                    return Err(format!("headers: {n:?} is not a lower-case HTTP header name"));
                }
            }
            if from == h::A2A_VERSION || to == h::A2A_VERSION {
                return Err("headers: A2A-Version is set by the translation itself; do not rename it".into());
            }
            if !seen.insert(to) {
                return Err(format!("headers: two caller headers are renamed to {to:?}"));
            }
        }
        let mut seen = std::collections::BTreeSet::new();
        for (from, to) in &self.fields {
            if from.is_empty() || to.is_empty() {
                return Err("fields: member names must not be empty".into());
            }
            if !seen.insert(to) {
                return Err(format!("fields: two caller members are renamed to {to:?}"));
            }
        }
        Ok(())
    }
}

/// A translation ready to apply.
#[derive(Debug)]
pub struct Compiled {
    /// The callers' version.
    pub version: Version,
    version_value: HeaderValue,
    /// Header renames, caller's name → agents' name (lowercase).
    headers: Vec<(String, String)>,
    fields: Vec<(String, String)>,
}

fn rename_headers<'a>(map: &mut Headers, pairs: impl Iterator<Item = (&'a str, &'a str)>) {
    let mut moved = Vec::new();
    for (from, to) in pairs {
        let values: Vec<Bytes> = map.get_all(from).map(Bytes::copy_from_slice).collect();
        if !values.is_empty() {
            map.remove(from);
            moved.push((to, values));
        }
    }
    for (to, values) in moved {
        map.remove(to);
        for v in values {
            map.append_owned(to, v);
        }
    }
}

fn rename_members(obj: &mut Map<String, Value>, pairs: &[(&str, &str)]) {
    let mut moved = Vec::new();
    for (from, to) in pairs {
        if let Some(v) = obj.remove(*from) {
            moved.push(((*to).to_owned(), v));
        }
    }
    for (k, v) in moved {
        obj.insert(k, v);
    }
}

impl Compiled {
    fn new(t: &Translation) -> Result<Self, String> {
        t.validate()?;
        let version = h::parse_version(&t.caller_version).map_err(|e| e.to_string())?;
        let pair = |a: &String, b: &String| -> Result<(String, String), String> {
            let a = HeaderName::from_bytes(a.as_bytes()).map_err(|e| e.to_string())?;
            let b = HeaderName::from_bytes(b.as_bytes()).map_err(|e| e.to_string())?;
            Ok((a.as_str().to_owned(), b.as_str().to_owned()))
        };
        Ok(Compiled {
            version,
            version_value: HeaderValue::from_str(&version.to_string()).map_err(|e| e.to_string())?,
            headers: t.headers.iter().map(|(a, b)| pair(a, b)).collect::<Result<_, _>>()?,
            fields: t.fields.iter().map(|(a, b)| (a.clone(), b.clone())).collect(),
        })
    }

    /// Whether bodies are changed (else they pass untouched).
    pub fn renames_fields(&self) -> bool {
        !self.fields.is_empty()
    }

    /// Caller → agent: renames headers and sets the agents' `A2A-Version`.
    pub fn request_headers(&self, map: &mut Headers) {
        rename_headers(map, self.headers.iter().map(|(a, b)| (a.as_str(), b.as_str())));
        map.insert(h::A2A_VERSION, Bytes::from_static(a2a_core::PROTOCOL_VERSION.as_bytes()));
    }

    /// Agent → caller: renames headers back and announces the caller's version (GW-5).
    pub fn response_headers(&self, map: &mut Headers) {
        rename_headers(map, self.headers.iter().map(|(a, b)| (b.as_str(), a.as_str())));
        map.insert_value(h::A2A_VERSION, &self.version_value);
    }

    /// Caller → agent: renames the top-level members of a JSON object body. A body that is not a JSON object is
    /// passed unchanged (the agent answers it as it would any malformed body).
    pub fn request_body(&self, body: Bytes) -> Bytes {
        let pairs: Vec<(&str, &str)> = self.fields.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect();
        self.rewrite(body, &pairs)
    }

    /// Agent → caller: renames the members back, at the top level and inside `error`.
    pub fn response_body(&self, body: Bytes) -> Bytes {
        let pairs: Vec<(&str, &str)> = self.fields.iter().map(|(a, b)| (b.as_str(), a.as_str())).collect();
        self.rewrite(body, &pairs)
    }

    fn rewrite(&self, body: Bytes, pairs: &[(&str, &str)]) -> Bytes {
        if pairs.is_empty() || body.is_empty() {
            return body;
        }
        let Ok(Value::Object(mut obj)) = serde_json::from_slice::<Value>(&body) else { return body };
        rename_members(&mut obj, pairs);
        if let Some(Value::Object(err)) = obj.get_mut("error") {
            rename_members(err, pairs);
        }
        serde_json::to_vec(&Value::Object(obj)).map(Bytes::from).unwrap_or(body)
    }
}

/// The versions the gateway accepts from callers.
#[derive(Debug, Default)]
pub struct Versions {
    translations: HashMap<Version, Arc<Compiled>>,
    supported: Vec<String>,
}

impl Versions {
    /// The agents' version and these translations.
    pub fn new(translations: &[Translation]) -> Result<Self, String> {
        let mut map = HashMap::new();
        let mut supported = vec![a2a_core::PROTOCOL_VERSION.to_owned()];
        for (i, t) in translations.iter().enumerate() {
            let c = Compiled::new(t).map_err(|e| format!("translations[{i}]: {e}"))?;
            supported.push(c.version.to_string());
            map.insert(c.version, Arc::new(c));
        }
        Ok(Versions { translations: map, supported })
    }

    /// Every version callers may speak, the agents' first.
    pub fn supported(&self) -> &[String] {
        &self.supported
    }

    /// Reads `A2A-Version` (HDR-3..HDR-5): `Ok(None)` for the agents' version (or an absent header where it is
    /// optional), `Ok(Some(t))` for a translated one, else `version_required` / `unsupported_version`.
    pub fn resolve(&self, headers: &impl Fields, required: bool) -> Result<Option<Arc<Compiled>>, A2aError> {
        let raw = headers.field(h::A2A_VERSION);
        if raw == Some(a2a_core::PROTOCOL_VERSION.as_bytes()) {
            return Ok(None);
        }
        let Some(v) = raw.map(|v| crate::h1::head::visible_ascii(v).ok_or(())) else {
            return if required { Err(A2aError::new(ErrorCode::VERSION_REQUIRED)) } else { Ok(None) };
        };
        let text = v.unwrap_or("(not ASCII)");
        match h::parse_version(text) {
            Ok(Version::V0_3) => Ok(None),
            Ok(other) if self.translations.contains_key(&other) => Ok(self.translations.get(&other).cloned()),
            _ => Err(A2aError::with_message(
                ErrorCode::UNSUPPORTED_VERSION,
                format!(
                    "this gateway speaks A2A {} and translates none other than those listed; the request asked \
                     for {text:?}",
                    self.supported.join(", ")
                ),
            )
            .details(json!({"supported_versions": self.supported}))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderMap;

    fn t() -> Translation {
        Translation {
            caller_version: "0.9".into(),
            agent_version: "0.3".into(),
            headers: [("a2a-sender".to_owned(), "a2a-sender-id".to_owned())].into(),
            fields: [("capability".to_owned(), "target_capability".to_owned())].into(),
        }
    }

    #[test]
    fn translation_renames_both_ways() {
        let v = Versions::new(&[t()]).expect("valid");
        let mut hm = HeaderMap::new();
        hm.insert("a2a-version", HeaderValue::from_static("0.9"));
        hm.insert("a2a-sender", HeaderValue::from_static("did:web:a.example.com"));
        let c = v.resolve(&hm, true).expect("accepted").expect("translated");
        let mut hs = Headers::from_header_map(&hm);
        c.request_headers(&mut hs);
        assert_eq!(hs.get("a2a-sender-id"), Some(&b"did:web:a.example.com"[..]));
        assert_eq!(hs.get("a2a-version"), Some(&b"0.3"[..]));
        assert!(hs.get("a2a-sender").is_none());
        let body = c.request_body(Bytes::from_static(br#"{"capability":"submit_report","proposed_schema":{}}"#));
        let parsed: Value = serde_json::from_slice(&body).expect("json");
        assert_eq!(parsed["target_capability"], "submit_report");
        let back = c.response_body(Bytes::from_static(br#"{"target_capability":"x","error":{"target_capability":1}}"#));
        let parsed: Value = serde_json::from_slice(&back).expect("json");
        assert_eq!(parsed["capability"], "x");
        assert_eq!(parsed["error"]["capability"], 1);
        let mut rh = Headers::new();
        rh.append("a2a-sender-id", Bytes::from_static(b"did:web:gw.example.com"));
        c.response_headers(&mut rh);
        assert_eq!(rh.get("a2a-version"), Some(&b"0.9"[..]));
        assert!(rh.get("a2a-sender").is_some());
    }

    #[test]
    fn untranslated_versions_are_refused_with_the_supported_list() {
        let v = Versions::new(&[t()]).expect("valid");
        let mut hm = HeaderMap::new();
        hm.insert("a2a-version", HeaderValue::from_static("0.4"));
        let e = v.resolve(&hm, true).expect_err("refused");
        assert_eq!(e.code, ErrorCode::UNSUPPORTED_VERSION);
        assert_eq!(e.details.expect("details")["supported_versions"], json!(["0.3", "0.9"]));
        assert!(v.resolve(&HeaderMap::new(), true).is_err());
        assert!(v.resolve(&HeaderMap::new(), false).expect("optional").is_none());
    }

    #[test]
    fn bad_tables_are_refused() {
        let mut bad = t();
        bad.agent_version = "0.9".into();
        assert!(bad.validate().is_err());
        let mut bad = t();
        bad.caller_version = "0.3".into();
        assert!(bad.validate().is_err());
        let mut bad = t();
        bad.headers.insert("A2A-Sender".into(), "x-y".into());
        assert!(bad.validate().is_err());
        let mut bad = t();
        bad.fields.insert("other".into(), "target_capability".into());
        assert!(bad.validate().is_err());
    }
}
