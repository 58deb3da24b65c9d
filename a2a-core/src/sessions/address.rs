//! Session keys and addresses (§17.1).

use super::*;

/// Why a session key, address or wait chain is invalid.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct SessionError(pub String);

/// Checks a session key: 1–128 characters of `A-Z a-z 0-9 . _ ~ -` (§17.1).
pub fn validate_session_key(key: &str) -> Result<(), SessionError> {
    if key.is_empty() || key.len() > 128 {
        return Err(SessionError(format!("a session key is 1 to 128 characters (got {})", key.len())));
    }
    if let Some(c) = key.chars().find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '~' | '-'))) {
        return Err(SessionError(format!("session key {key:?} contains {c:?}; use letters, digits and . _ ~ - only")));
    }
    Ok(())
}

/// A session's address across agents: `{agent DID}#{session key}` (§17.1).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SessionAddress {
    agent: String,
    key: String,
}

impl SessionAddress {
    /// The address of session `key` at `agent`.
    pub fn new(agent: &Did, key: &str) -> Result<SessionAddress, SessionError> {
        validate_session_key(key)?;
        Ok(SessionAddress { agent: agent.to_string(), key: key.to_owned() })
    }

    /// The agent's DID.
    pub fn agent(&self) -> &str {
        &self.agent
    }

    /// The session key.
    pub fn key(&self) -> &str {
        &self.key
    }
}

impl FromStr for SessionAddress {
    type Err = SessionError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (agent, key) = s.rsplit_once('#').ok_or_else(|| {
            SessionError(format!("{s:?} is not a session address: write {{agent DID}}#{{session key}}"))
        })?;
        let did = Did::parse(agent).map_err(|e| SessionError(format!("{s:?}: the agent is not a did:web DID: {e}")))?;
        SessionAddress::new(&did, key).map_err(|e| SessionError(format!("{s:?}: {}", e.0)))
    }
}

impl fmt::Display for SessionAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}#{}", self.agent, self.key)
    }
}

impl Serialize for SessionAddress {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for SessionAddress {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

impl schemars::JsonSchema for SessionAddress {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "SessionAddress".into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "description": "A session address: {agent DID}#{session key}",
            "pattern": "^did:web:[^#]+#[A-Za-z0-9._~-]{1,128}$"
        })
    }
}
