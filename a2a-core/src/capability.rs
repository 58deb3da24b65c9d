//! Capability declarations and their rules (`spec/PROTOCOL.md` §4).
//!
//! A capability name is a lower snake_case verb phrase of at least two words: `^[a-z]+(_[a-z]+)+$`
//! (`query_inventory`, `generate_brief_summary`). Every declaration states its `auth_requirement` explicitly.

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

use crate::schema_rules;

/// How a caller must authenticate to use a capability (`spec/PROTOCOL.md` §4.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum AuthRequirement {
    /// Anyone may call.
    None,
    /// An API key in the `A2A-Api-Key` header.
    ApiKey,
    /// An OAuth 2.0 bearer token (a JWT) in `Authorization: Bearer`.
    Oauth2,
    /// A request signed by the sender's DID key (`A2A-Signature`).
    DidAuth,
}

impl AuthRequirement {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::None => "none",
            Self::ApiKey => "api_key",
            Self::Oauth2 => "oauth2",
            Self::DidAuth => "did_auth",
        }
    }
}

/// A capability declaration (`spec/PROTOCOL.md` §4.1).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CapabilityDeclaration {
    /// The name, `^[a-z]+(_[a-z]+)+$`.
    pub name: String,
    /// What the capability does; read by people and by tools.
    pub description: String,
    /// How callers must authenticate; always explicit, `none` included.
    pub auth_requirement: AuthRequirement,
    /// Names of the finer capabilities this one is made of.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sub_capabilities: Vec<String>,
    /// Regions where the capability may be used (one region or a list); surfaces as the `A2A-Region` header.
    #[serde(default, skip_serializing_if = "Vec::is_empty", deserialize_with = "one_or_many")]
    #[schemars(with = "Option<OneOrMany>")]
    pub region_restriction: Vec<String>,
    /// The JSON Schema of the input the capability requires; it follows the schema rules (§6.2).
    /// Absent means `{"type": "object"}`: any object.
    #[serde(default = "default_input_schema")]
    pub input_schema: Value,
    /// The JSON Schema of the result, when the agent promises one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<Value>,
    /// Estimated cost of one execution (in US dollars unless the description says otherwise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub estimated_cost: Option<f64>,
    /// Estimated latency of one execution, in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub estimated_latency_ms: Option<u64>,
    /// Capabilities this one can stand in for, in a degraded way (offered as fallback options for them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fallback_for: Vec<String>,
}

#[derive(schemars::JsonSchema)]
#[serde(untagged)]
#[allow(dead_code)]
enum OneOrMany {
    One(String),
    Many(Vec<String>),
}

fn one_or_many<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Either {
        One(String),
        Many(Vec<String>),
    }
    Ok(match Either::deserialize(d)? {
        Either::One(s) => vec![s],
        Either::Many(v) => v,
    })
}

/// The input schema assumed when a declaration has none: any JSON object.
pub fn default_input_schema() -> Value {
    serde_json::json!({"type": "object"})
}

/// Why a capability name or declaration is invalid.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CapabilityError {
    /// The name does not match `^[a-z]+(_[a-z]+)+$`.
    #[error(
        "capability name {name:?} is invalid: {reason}; names are lower snake_case verb phrases of two or more words, `^[a-z]+(_[a-z]+)+$`, e.g. `query_inventory`"
    )]
    InvalidName {
        /// The name.
        name: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// A field of the declaration is invalid.
    #[error("capability {name:?}: field `{field}` {reason}")]
    InvalidField {
        /// The capability's name.
        name: String,
        /// The field.
        field: &'static str,
        /// What is wrong.
        reason: String,
    },
    /// Two declarations have the same name.
    #[error("capability {0:?} is declared twice")]
    Duplicate(String),
}

/// The longest capability name accepted, in bytes.
pub const MAX_NAME_LEN: usize = 64;

/// Checks a capability name against `^[a-z]+(_[a-z]+)+$` (and at most [`MAX_NAME_LEN`] bytes).
pub fn validate_name(name: &str) -> Result<(), CapabilityError> {
    let fail = |reason| Err(CapabilityError::InvalidName { name: name.to_owned(), reason });
    if name.is_empty() {
        return fail("it is empty");
    }
    if name.len() > MAX_NAME_LEN {
        return fail("it is longer than 64 bytes");
    }
    if let Some(c) = name.chars().find(|c| !(c.is_ascii_lowercase() || *c == '_')) {
        return if c.is_ascii_uppercase() {
            fail("it contains an upper-case letter")
        } else if c == '-' {
            fail("it contains a hyphen; use `_`")
        } else if c.is_ascii_digit() {
            fail("it contains a digit")
        } else {
            fail("it contains a character other than a-z and `_`")
        };
    }
    if name.starts_with('_') || name.ends_with('_') {
        return fail("it starts or ends with `_`");
    }
    if name.contains("__") {
        return fail("it contains an empty word (`__`)");
    }
    if !name.contains('_') {
        return fail("it is a single word; name the action and its object, e.g. `query_inventory`");
    }
    Ok(())
}

/// Whether `name` matches `^[a-z]+(_[a-z]+)+$`.
pub fn is_valid_name(name: &str) -> bool {
    validate_name(name).is_ok()
}

impl CapabilityDeclaration {
    /// Checks the declaration: the name and every sub-capability and `fallback_for` name, a non-empty description,
    /// non-empty region names, a finite non-negative cost, and an input schema that follows the schema rules.
    pub fn validate(&self) -> Result<(), CapabilityError> {
        validate_name(&self.name)?;
        let field = |field, reason: String| CapabilityError::InvalidField { name: self.name.clone(), field, reason };
        if self.description.trim().is_empty() {
            return Err(field("description", "must not be empty".into()));
        }
        for sub in &self.sub_capabilities {
            validate_name(sub).map_err(|e| field("sub_capabilities", e.to_string()))?;
            if *sub == self.name {
                return Err(field("sub_capabilities", "must not contain the capability itself".into()));
            }
        }
        for f in &self.fallback_for {
            validate_name(f).map_err(|e| field("fallback_for", e.to_string()))?;
        }
        for r in &self.region_restriction {
            if r.is_empty() || !r.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_') {
                return Err(field(
                    "region_restriction",
                    format!("{r:?} is not a region name (letters, digits, `-`, `_`)"),
                ));
            }
        }
        if let Some(c) = self.estimated_cost {
            if !(c.is_finite() && c >= 0.0) {
                return Err(field("estimated_cost", "must be a finite number >= 0".into()));
            }
        }
        let violations = schema_rules::check(&self.input_schema);
        if let Some(v) = violations.first() {
            return Err(field("input_schema", format!("breaks the schema rules at {}: {}", v.path, v.message)));
        }
        Ok(())
    }
}

/// Validates a list of declarations: each one, and that names are unique.
pub fn validate_all(decls: &[CapabilityDeclaration]) -> Result<(), CapabilityError> {
    let mut seen = std::collections::HashSet::new();
    for d in decls {
        d.validate()?;
        if !seen.insert(d.name.as_str()) {
            return Err(CapabilityError::Duplicate(d.name.clone()));
        }
    }
    Ok(())
}
