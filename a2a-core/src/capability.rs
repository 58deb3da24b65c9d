//! Capability declarations and their rules (`spec/PROTOCOL.md` §4).
//!
//! A capability name is a lower snake_case verb phrase of at least two words: `^[a-z]+(_[a-z]+)+$`
//! (`query_inventory`, `generate_brief_summary`). Every declaration states its `auth_requirement` explicitly.

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

use crate::schema_rules;

#[cfg(feature = "yaml")]
pub mod yaml;

/// How a caller must authenticate to use a capability (`spec/PROTOCOL.md` §4.3).
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
///
/// Deserialising accepts unknown members (TR-9: a newer agent may add some); [`parse_declaration`] refuses them, for
/// declarations a person writes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
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

/// Why a capability name or declaration is invalid; [`CapabilityError::reason`] is the stable name.
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
    /// A required field is absent.
    #[error("capability {name:?}: field `{field}` is required{hint}")]
    MissingField {
        /// The capability's name (empty when the name itself is missing).
        name: String,
        /// The field.
        field: &'static str,
        /// What to write, for people (starts with `; ` when not empty).
        hint: &'static str,
    },
    /// The declaration has a field the protocol does not define.
    #[error("capability {name:?}: unknown field `{field}`{suggestion}")]
    UnknownField {
        /// The capability's name.
        name: String,
        /// The field as written.
        field: String,
        /// A hint naming the closest known field (starts with `; ` when not empty).
        suggestion: String,
    },
    /// The input schema breaks the schema rules of NEGOTIATE.
    #[error("capability {name:?}: field `input_schema` breaks the schema rules: {}", describe_violations(violations))]
    InvalidInputSchema {
        /// The capability's name.
        name: String,
        /// Every violation found.
        violations: Vec<schema_rules::Violation>,
    },
}

fn describe_violations(violations: &[schema_rules::Violation]) -> String {
    let parts: Vec<String> = violations.iter().map(|v| format!("at {:?}: {}", v.path, v.message)).collect();
    parts.join("; ")
}

impl CapabilityError {
    /// The stable reason: `invalid_name`, `invalid_field`, `duplicate`, `missing_field`, `unknown_field` or
    /// `invalid_input_schema`.
    pub fn reason(&self) -> &'static str {
        match self {
            Self::InvalidName { .. } => "invalid_name",
            Self::InvalidField { .. } => "invalid_field",
            Self::Duplicate(_) => "duplicate",
            Self::MissingField { .. } => "missing_field",
            Self::UnknownField { .. } => "unknown_field",
            Self::InvalidInputSchema { .. } => "invalid_input_schema",
        }
    }

    /// The field the error is about (`name` for an invalid name; `None` for a duplicate).
    pub fn field(&self) -> Option<&str> {
        match self {
            Self::InvalidName { .. } => Some("name"),
            Self::InvalidField { field, .. } | Self::MissingField { field, .. } => Some(field),
            Self::UnknownField { field, .. } => Some(field),
            Self::InvalidInputSchema { .. } => Some("input_schema"),
            Self::Duplicate(_) => None,
        }
    }
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

/// The longest region name accepted, in bytes (the limit of the `A2A-Region` header).
pub const MAX_REGION_LEN: usize = 64;

/// Every field a declaration may have, in wire order.
pub const FIELDS: &[&str] = &[
    "name",
    "description",
    "auth_requirement",
    "sub_capabilities",
    "region_restriction",
    "input_schema",
    "output_schema",
    "estimated_cost",
    "estimated_latency_ms",
    "fallback_for",
];

impl CapabilityDeclaration {
    /// Checks the declaration (CAP-3, CAP-5, CAP-10, CAP-14, CAP-17 to CAP-19): the name and every sub-capability and `fallback_for` name, a non-empty
    /// description, unique sub-capabilities that do not include the capability itself, region names of 1-64 letters,
    /// digits, `-` and `_`, a finite non-negative cost, and an input schema that follows the schema rules.
    pub fn validate(&self) -> Result<(), CapabilityError> {
        validate_name(&self.name)?;
        let field = |field, reason: String| CapabilityError::InvalidField { name: self.name.clone(), field, reason };
        if self.description.trim().is_empty() {
            return Err(field("description", "must not be empty".into()));
        }
        for (i, sub) in self.sub_capabilities.iter().enumerate() {
            validate_name(sub).map_err(|e| field("sub_capabilities", e.to_string()))?;
            if *sub == self.name {
                return Err(field("sub_capabilities", "must not contain the capability itself".into()));
            }
            if self.sub_capabilities.iter().take(i).any(|s| s == sub) {
                return Err(field("sub_capabilities", format!("lists {sub:?} twice")));
            }
        }
        for f in &self.fallback_for {
            validate_name(f).map_err(|e| field("fallback_for", e.to_string()))?;
            if *f == self.name {
                return Err(field("fallback_for", "must not contain the capability itself".into()));
            }
        }
        for r in &self.region_restriction {
            if r.is_empty()
                || r.len() > MAX_REGION_LEN
                || !r.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
            {
                return Err(field(
                    "region_restriction",
                    format!("{r:?} is not a region name (1-64 letters, digits, `-`, `_`, e.g. \"eu-west-1\")"),
                ));
            }
        }
        if let Some(c) = self.estimated_cost
            && !(c.is_finite() && c >= 0.0)
        {
            return Err(field("estimated_cost", "must be a finite number >= 0".into()));
        }
        if !self.input_schema.is_object() {
            return Err(field("input_schema", "must be a JSON Schema object".into()));
        }
        if let Some(out) = &self.output_schema
            && !out.is_object()
        {
            return Err(field("output_schema", "must be a JSON Schema object".into()));
        }
        let violations = schema_rules::check(&self.input_schema);
        if !violations.is_empty() {
            return Err(CapabilityError::InvalidInputSchema { name: self.name.clone(), violations });
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

/// The Levenshtein distance of two short ASCII strings (for "did you mean" hints).
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = Vec::with_capacity(b.len() + 1);
        cur.push(i + 1);
        for (j, cb) in b.iter().enumerate() {
            let sub = prev.get(j).copied().unwrap_or(usize::MAX).saturating_add(usize::from(ca != *cb));
            let del = prev.get(j + 1).copied().unwrap_or(usize::MAX).saturating_add(1);
            let ins = cur.get(j).copied().unwrap_or(usize::MAX).saturating_add(1);
            cur.push(sub.min(del).min(ins));
        }
        prev = cur;
    }
    prev.last().copied().unwrap_or(0)
}

fn suggest_field(unknown: &str) -> String {
    let lower = unknown.to_ascii_lowercase().replace('-', "_");
    let best = FIELDS
        .iter()
        .map(|f| (f, if f.starts_with(lower.as_str()) && lower.len() >= 4 { 0 } else { edit_distance(&lower, f) }))
        .min_by_key(|(_, d)| *d);
    match best {
        Some((f, d)) if d <= 3 => format!("; did you mean `{f}`?"),
        _ => format!("; the fields are {}", FIELDS.join(", ")),
    }
}

/// Reads one capability declaration from JSON (CAP-20): every problem is reported against its field (a missing field,
/// an unknown field, a value of the wrong type) and the result is then checked with [`CapabilityDeclaration::validate`].
pub fn parse_declaration(value: &Value) -> Result<CapabilityDeclaration, CapabilityError> {
    let Some(obj) = value.as_object() else {
        return Err(CapabilityError::InvalidField {
            name: String::new(),
            field: "declaration",
            reason: "must be a JSON object".into(),
        });
    };
    let name = match obj.get("name") {
        None => {
            return Err(CapabilityError::MissingField {
                name: String::new(),
                field: "name",
                hint: "; e.g. \"query_inventory\"",
            });
        }
        Some(Value::String(n)) => n.clone(),
        Some(_) => {
            return Err(CapabilityError::InvalidField {
                name: String::new(),
                field: "name",
                reason: "must be a string".into(),
            });
        }
    };
    validate_name(&name)?;
    let invalid =
        |field, reason: &str| CapabilityError::InvalidField { name: name.clone(), field, reason: reason.into() };
    if let Some(unknown) = obj.keys().find(|k| !FIELDS.contains(&k.as_str())) {
        return Err(CapabilityError::UnknownField {
            name: name.clone(),
            field: unknown.clone(),
            suggestion: suggest_field(unknown),
        });
    }
    for (field, hint) in [
        ("description", "; say what the capability does, for people and tools"),
        ("auth_requirement", "; use \"none\" if the capability needs no authentication"),
    ] {
        if !obj.contains_key(field) {
            return Err(CapabilityError::MissingField { name: name.clone(), field, hint });
        }
    }
    for (field, v) in obj {
        let field = FIELDS.iter().copied().find(|f| f == field).unwrap_or("declaration");
        let ok = match field {
            "description" => v.is_string(),
            "auth_requirement" => {
                if !matches!(v.as_str(), Some("none" | "api_key" | "oauth2" | "did_auth")) {
                    return Err(invalid(
                        field,
                        &format!("must be one of \"none\", \"api_key\", \"oauth2\", \"did_auth\"; got {v}"),
                    ));
                }
                true
            }
            "sub_capabilities" | "fallback_for" => v.as_array().is_some_and(|a| a.iter().all(Value::is_string)),
            "region_restriction" => v.is_string() || v.as_array().is_some_and(|a| a.iter().all(Value::is_string)),
            "input_schema" => v.is_object(),
            "output_schema" => v.is_object() || v.is_null(),
            "estimated_cost" => v.is_number() || v.is_null(),
            "estimated_latency_ms" => v.is_u64() || v.is_null(),
            _ => true,
        };
        if !ok {
            let expected = match field {
                "description" => "must be a string",
                "sub_capabilities" | "fallback_for" => "must be an array of capability names",
                "region_restriction" => "must be a region name or an array of region names",
                "input_schema" | "output_schema" => "must be a JSON Schema object",
                "estimated_cost" => "must be a number (US dollars per execution)",
                "estimated_latency_ms" => "must be a non-negative integer (milliseconds)",
                _ => "has the wrong type",
            };
            return Err(invalid(field, expected));
        }
    }
    let decl: CapabilityDeclaration = serde_json::from_value(value.clone())
        .map_err(|e| invalid("declaration", &format!("does not have the shape of a declaration: {e}")))?;
    decl.validate()?;
    Ok(decl)
}

/// Reads a list of declarations from a JSON array: each with [`parse_declaration`], then names must be unique.
pub fn parse_declarations(value: &Value) -> Result<Vec<CapabilityDeclaration>, CapabilityError> {
    let Some(items) = value.as_array() else {
        return Err(CapabilityError::InvalidField {
            name: String::new(),
            field: "declaration",
            reason: "a list of declarations must be a JSON array".into(),
        });
    };
    let decls = items.iter().map(parse_declaration).collect::<Result<Vec<_>, _>>()?;
    validate_all(&decls)?;
    Ok(decls)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn missing_auth_requirement_is_refused_telling_to_write_none() {
        let e = parse_declaration(&json!({"name": "query_status", "description": "Status of an order"}))
            .expect_err("refused");
        assert_eq!(e.reason(), "missing_field");
        assert_eq!(e.field(), Some("auth_requirement"));
        assert!(e.to_string().contains("use \"none\" if the capability needs no authentication"), "{e}");
    }

    #[test]
    fn unknown_field_is_refused_with_the_closest_field_named() {
        let e = parse_declaration(
            &json!({"name": "query_status", "description": "x", "auth_requirement": "none", "estimated_latency": 5}),
        )
        .expect_err("refused");
        assert_eq!(e.reason(), "unknown_field");
        assert!(e.to_string().contains("did you mean `estimated_latency_ms`?"), "{e}");
    }

    #[test]
    fn seed_yaml_example_parses_with_region_as_list() {
        let d = parse_declaration(&json!({
            "name": "process_payment",
            "description": "Charge user's card on file; requires PCI-DSS compliant environment",
            "auth_requirement": "oauth2",
            "region_restriction": "eu-west-1"
        }))
        .expect("valid");
        assert_eq!(d.region_restriction, vec!["eu-west-1".to_owned()]);
        assert_eq!(d.auth_requirement, AuthRequirement::Oauth2);
        assert_eq!(d.input_schema, default_input_schema());
    }

    #[test]
    fn wrong_type_is_reported_against_its_field() {
        let e = parse_declaration(
            &json!({"name": "query_status", "description": "x", "auth_requirement": "none", "estimated_latency_ms": -1}),
        )
        .expect_err("refused");
        assert_eq!((e.reason(), e.field()), ("invalid_field", Some("estimated_latency_ms")));
    }
}
