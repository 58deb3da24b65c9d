//! Capabilities as MCP tools (MCP-5..MCP-9, MCP-19, MCP-20).

use std::sync::Arc;

use a2a_core::capability::{AuthRequirement, CapabilityDeclaration};
use rmcp::ErrorData as McpError;
use rmcp::model::{JsonObject, Tool, ToolAnnotations};
use serde_json::Value;

use super::Front;
use super::handler::Credentials;

/// Whether a caller with `creds` may use a capability through a front that signs (`signs`) or not (MCP-19, MCP-20):
/// `none` always; `api_key` with an `A2A-Api-Key`; `oauth2` with a bearer token; `did_auth` when the front signs.
pub(crate) fn offered(decl: &CapabilityDeclaration, creds: &Credentials, signs: bool) -> bool {
    match decl.auth_requirement {
        AuthRequirement::None => true,
        AuthRequirement::ApiKey => creds.api_key.is_some(),
        AuthRequirement::Oauth2 => creds.bearer.is_some(),
        AuthRequirement::DidAuth => signs,
    }
}

/// The tool of a capability (MCP-5, MCP-6): its name, its description, its input schema (an object schema: a schema
/// that is not an object is `{"type": "object"}`, MCP-6), its read-only hint false and the auth requirement in
/// `_meta`.
pub(crate) fn tool_of(decl: &CapabilityDeclaration) -> Tool {
    let schema: JsonObject = match &decl.input_schema {
        Value::Object(o) => o.clone(),
        _ => serde_json::Map::from_iter([("type".to_owned(), Value::String("object".into()))]),
    };
    let mut description = decl.description.clone();
    if let Some(ms) = decl.estimated_latency_ms {
        description.push_str(&format!(" (usually about {ms} ms)"));
    }
    let mut annotations = ToolAnnotations::new();
    annotations.read_only_hint = Some(false);
    annotations.open_world_hint = Some(true);
    let meta = rmcp::model::MetaObject(serde_json::Map::from_iter([(
        "a2a/auth_requirement".to_owned(),
        serde_json::to_value(decl.auth_requirement).unwrap_or(Value::Null),
    )]));
    Tool::new_with_raw(decl.name.clone(), Some(description.into()), Arc::new(schema))
        .with_annotations(annotations)
        .with_meta(meta)
}

/// The capabilities the endpoint offers this caller, in the order of its capabilities document, at most
/// `max_tools` (MCP-7), each name once (MCP-8).
pub(crate) async fn offered_declarations(
    front: &Front,
    creds: &Credentials,
) -> Result<Vec<CapabilityDeclaration>, McpError> {
    let url = endpoint(front)?;
    let decls = front.declarations(&url).await.map_err(|e| {
        McpError::internal_error(
            format!("the A2A endpoint's capabilities could not be read: {e}"),
            Some(super::errors::body_of(&e)),
        )
    })?;
    let mut seen = std::collections::HashSet::new();
    let mut out = Vec::new();
    for d in decls.iter().cloned() {
        if !offered(&d, creds, front.signs()) || !seen.insert(d.name.clone()) {
            continue;
        }
        if out.len() == front.cfg.max_tools {
            tracing::warn!(max_tools = front.cfg.max_tools, capability = %d.name, "mcp: tools past mcp.max_tools are left out");
            break;
        }
        out.push(d);
    }
    Ok(out)
}

/// `tools/list` (MCP-5): one tool per offered capability.
pub(crate) async fn list(front: &Front, creds: &Credentials) -> Result<Vec<Tool>, McpError> {
    Ok(offered_declarations(front, creds).await?.iter().map(tool_of).collect())
}

/// The A2A endpoint, or the JSON-RPC error of a front that is not serving yet.
pub(crate) fn endpoint(front: &Front) -> Result<String, McpError> {
    front
        .endpoint()
        .ok_or_else(|| McpError::internal_error("the MCP front is not connected to its A2A endpoint yet; retry", None))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn decl(auth: AuthRequirement, schema: Value) -> CapabilityDeclaration {
        serde_json::from_value(json!({
            "name": "submit_report", "description": "Files a report.", "auth_requirement": auth,
            "input_schema": schema,
        }))
        .expect("declaration")
    }

    #[test]
    fn a_tool_carries_the_capabilitys_name_description_and_schema() {
        let schema = json!({"type": "object", "properties": {"title": {"type": "string"}}, "required": ["title"]});
        let t = tool_of(&decl(AuthRequirement::None, schema.clone()));
        assert_eq!(t.name, "submit_report");
        assert_eq!(t.description.as_deref(), Some("Files a report."));
        assert_eq!(Value::Object((*t.input_schema).clone()), schema);
    }

    #[test]
    fn oauth2_needs_a_bearer_and_did_auth_a_front_that_signs() {
        let none = Credentials::default();
        let bearer = Credentials { bearer: Some("t".into()), api_key: None };
        let o = decl(AuthRequirement::Oauth2, json!({"type": "object"}));
        assert!(!offered(&o, &none, true));
        assert!(offered(&o, &bearer, false));
        let d = decl(AuthRequirement::DidAuth, json!({"type": "object"}));
        assert!(!offered(&d, &bearer, false));
        assert!(offered(&d, &none, true));
        assert!(offered(&decl(AuthRequirement::None, json!({"type": "object"})), &none, false));
    }
}
