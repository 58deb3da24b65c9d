//! What a `tools/call` result becomes (MCP-35, MCP-36).

use rmcp::model::{CallToolResult, ContentBlock};
use serde_json::{Value, json};

/// The longest tool error message kept for the caller, in bytes.
pub const MAX_ERROR_TEXT: usize = 2048;

/// A tool that answered `isError: true` (MCP-36).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("the MCP tool `{tool}` reported an error: {message}")]
pub struct ToolFailure {
    /// The tool's MCP name.
    pub tool: String,
    /// Its text content, joined (cut at [`MAX_ERROR_TEXT`] bytes).
    pub message: String,
    /// Its `structuredContent`, if any.
    pub structured: Option<Value>,
}

fn joined_text(content: &[ContentBlock]) -> Option<String> {
    let texts: Vec<&str> = content.iter().filter_map(|c| c.as_text().map(|t| t.text.as_str())).collect();
    (!texts.is_empty()).then(|| texts.join("\n"))
}

fn cut(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_owned();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &s[..end])
}

/// The execution's result for a `tools/call` result of `tool` (MCP-35): its `structuredContent` when present;
/// else, when all of its content is text, that text (blocks joined with `\n`) parsed as JSON when it is JSON, and
/// `{"text": ...}` when it is not; else `{"content": [...]}`, the content blocks as MCP writes them. `isError: true`
/// is a [`ToolFailure`] (MCP-36).
pub fn tool_result(tool: &str, result: CallToolResult) -> Result<Value, ToolFailure> {
    if result.is_error == Some(true) {
        let message = joined_text(&result.content).unwrap_or_else(|| "no message".to_owned());
        return Err(ToolFailure {
            tool: tool.to_owned(),
            message: cut(message.trim(), MAX_ERROR_TEXT),
            structured: result.structured_content,
        });
    }
    if let Some(v) = result.structured_content {
        return Ok(v);
    }
    let all_text = result.content.iter().all(|c| c.as_text().is_some());
    match joined_text(&result.content) {
        Some(text) if all_text => Ok(serde_json::from_str::<Value>(&text).unwrap_or_else(|_| json!({ "text": text }))),
        _ => Ok(json!({ "content": serde_json::to_value(&result.content).unwrap_or(Value::Null) })),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::TextContent;

    fn text(t: &str) -> ContentBlock {
        ContentBlock::Text(TextContent::new(t))
    }

    fn result(content: Vec<ContentBlock>, structured: Option<Value>, is_error: Option<bool>) -> CallToolResult {
        let mut r: CallToolResult = serde_json::from_value(json!({"content": []})).expect("empty result");
        r.content = content;
        r.structured_content = structured;
        r.is_error = is_error;
        r
    }

    #[test]
    fn structured_content_wins_over_text() {
        let r = result(vec![text("{\"x\":1}")], Some(json!({"sum": 3})), None);
        assert_eq!(tool_result("t", r), Ok(json!({"sum": 3})));
    }

    #[test]
    fn json_text_is_parsed_and_plain_text_is_wrapped() {
        assert_eq!(tool_result("t", result(vec![text("[1,2]")], None, Some(false))), Ok(json!([1, 2])));
        assert_eq!(tool_result("t", result(vec![text("hello")], None, None)), Ok(json!({"text": "hello"})));
        assert_eq!(tool_result("t", result(vec![text("a"), text("b")], None, None)), Ok(json!({"text": "a\nb"})));
    }

    #[test]
    fn is_error_is_a_failure_carrying_the_text() {
        let e = tool_result("div", result(vec![text("division by zero")], None, Some(true))).expect_err("fails");
        assert_eq!(e.message, "division by zero");
        assert!(e.to_string().contains("`div`"), "{e}");
    }
}
