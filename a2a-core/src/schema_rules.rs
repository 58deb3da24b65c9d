//! The schema rules of NEGOTIATE (`spec/PROTOCOL.md` §6.2). Being written (issue 2).

use serde_json::Value;

/// One violation of the schema rules.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct Violation {
    /// The rule broken (stable identifier).
    pub rule: String,
    /// JSON Pointer into the schema.
    pub path: String,
    /// A message for people.
    pub message: String,
}

/// Checks a schema against the rules; returns every violation.
pub fn check(_schema: &Value) -> Vec<Violation> {
    Vec::new()
}
