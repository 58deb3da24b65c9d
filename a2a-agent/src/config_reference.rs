//! The configuration reference of `agent.toml`: its JSON Schema and the Markdown page generated from it (the
//! renderer is [`a2a_runtime::config_reference`], shared with the gateway).

pub use a2a_runtime::config_reference::*;
use serde_json::Value;

/// The JSON Schema of `agent.toml` ([`crate::config::Config`]).
pub fn agent_schema() -> Value {
    serde_json::to_value(schemars::schema_for!(crate::config::Config)).unwrap_or(Value::Null)
}
