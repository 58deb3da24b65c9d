//! Refusals and failures as MCP tool errors (MCP-11..MCP-13), rendered by the project's one error renderer
//! ([`A2aError::to_body`]): the tool error's `structuredContent` is the §12 `ErrorBody`.

use a2a_client::ClientError;
use a2a_core::error::{A2aError, ErrorCode};
use rmcp::model::{CallToolResult, ContentBlock};
use serde_json::Value;

/// The §12 error a client failure stands for (MCP-11): the agent's own error when it answered one (details and
/// fallback options included), the execution's when it ended without a result, and otherwise the table's code for
/// what happened on the way (`agent_unavailable`, `agent_timeout`, `timed_out`, ...).
pub(crate) fn a2a_error_of(e: &ClientError) -> A2aError {
    if let Some(a) = e.agent_error() {
        let mut a = a.clone();
        if a.fallback_options.is_none() && !e.fallback_options().is_empty() {
            a.fallback_options = Some(e.fallback_options().to_vec());
        }
        return a;
    }
    let code = match e {
        ClientError::ExecutionFailed { error, .. } => {
            let mut a = A2aError::with_message(error.code.clone(), error.message.clone());
            a.details = error.details.clone();
            return a;
        }
        ClientError::CapabilityNotOffered { .. } | ClientError::NoMatchingCapability { .. } => {
            ErrorCode::NO_MATCHING_CAPABILITY
        }
        ClientError::Unreachable { .. } | ClientError::Protocol { .. } | ClientError::UnsupportedVersion { .. } => {
            ErrorCode::AGENT_UNAVAILABLE
        }
        ClientError::Timeout { .. } => ErrorCode::AGENT_TIMEOUT,
        ClientError::DeadlineExceeded { .. } => ErrorCode::TIMED_OUT,
        ClientError::ResponseNotVerified { code, .. } => code.clone(),
        ClientError::TooLarge { .. } => ErrorCode::PAYLOAD_TOO_LARGE,
        ClientError::InvalidInput { .. } => ErrorCode::INVALID_REQUEST,
        _ => ErrorCode::INTERNAL_ERROR,
    };
    let mut a = A2aError::with_message(code, e.to_string());
    if !e.fallback_options().is_empty() {
        a.fallback_options = Some(e.fallback_options().to_vec());
    }
    a
}

/// The §12 body of a client failure, as JSON.
pub(crate) fn body_of(e: &ClientError) -> Value {
    body(&a2a_error_of(e))
}

/// The §12 body of an error, as JSON (capability-mismatch codes always carry `fallback_options`, ERR-1).
pub(crate) fn body(a: &A2aError) -> Value {
    let mut b = a.to_body();
    let mismatch = [ErrorCode::NO_MATCHING_CAPABILITY, ErrorCode::SCHEMA_INCOMPATIBLE, ErrorCode::REGION_RESTRICTED];
    if b.fallback_options.is_none() && mismatch.contains(&b.error.code) {
        b.fallback_options = Some(Vec::new());
    }
    serde_json::to_value(b).unwrap_or(Value::Null)
}

/// A tool error (MCP-11): `isError: true`, the §12 body as `structuredContent`, and a text for people and models —
/// the code, the message, and the fallback options when there are some.
pub(crate) fn tool_error(a: &A2aError) -> CallToolResult {
    let mut text = format!("{}: {}", a.code, a.message);
    if let Some(options) = a.fallback_options.as_ref().filter(|o| !o.is_empty()) {
        let names: Vec<String> = options
            .iter()
            .map(|o| {
                serde_json::to_value(o).ok().and_then(|v| v.get("capability").cloned()).map_or_else(
                    || "an alternative".to_owned(),
                    |c| c.as_str().map_or_else(|| c.to_string(), str::to_owned),
                )
            })
            .collect();
        text.push_str(&format!(" (fallback options: {})", names.join(", ")));
    }
    let mut r = CallToolResult::error(vec![ContentBlock::text(text)]);
    r.structured_content = Some(body(a));
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tool_error_carries_the_error_body_and_the_code_in_its_text() {
        let a = A2aError::with_message(ErrorCode::PAYLOAD_INVALID, "title is missing")
            .details(serde_json::json!({"errors": []}));
        let r = tool_error(&a);
        assert_eq!(r.is_error, Some(true));
        let body = r.structured_content.expect("structured");
        assert_eq!(body["error"]["code"], "payload_invalid");
        assert_eq!(body["error"]["details"]["errors"], serde_json::json!([]));
        let text = serde_json::to_value(&r.content[0]).expect("json");
        assert!(text["text"].as_str().expect("text").starts_with("payload_invalid: "));
    }

    #[test]
    fn a_mismatch_always_lists_its_fallback_options() {
        let body = body(&A2aError::new(ErrorCode::NO_MATCHING_CAPABILITY));
        assert_eq!(body["fallback_options"], serde_json::json!([]));
    }
}
