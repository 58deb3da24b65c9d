//! Reading a request the same way at the agent and at the gateway: its sender (HDR-6) and its JSON message (TR-7).

use serde::de::DeserializeOwned;
use serde_json::json;

use crate::did::Did;
use crate::error::{A2aError, ErrorCode};

/// `A2A-Sender-ID` from its raw value (`None`: absent), trimmed and checked to be a did:web DID (HDR-6):
/// `sender_required` when absent, `invalid_sender` otherwise.
pub fn sender_id_value(value: Option<&[u8]>) -> Result<&str, A2aError> {
    // A sender that is not visible ASCII cannot be a did:web DID (DID-6: hosts are written in punycode): HDR-6 and
    // DID-11 answer it invalid_sender, not invalid_header.
    let sender = match value {
        None => return Err(A2aError::new(ErrorCode::SENDER_REQUIRED)),
        Some(v) => std::str::from_utf8(v)
            .ok()
            .filter(|s| s.bytes().all(|b| b == b'\t' || (32..127).contains(&b)))
            .ok_or_else(|| {
                A2aError::with_message(
                    ErrorCode::INVALID_SENDER,
                    format!(
                        "A2A-Sender-ID {:?} is not a valid did:web DID: it has non-ASCII characters; write the host in \
                         punycode (xn--...)",
                        String::from_utf8_lossy(v)
                    ),
                )
            })?,
    };
    let sender = sender.trim();
    Did::check(sender).map_err(|e| {
        A2aError::with_message(
            ErrorCode::INVALID_SENDER,
            format!("A2A-Sender-ID {sender:?} is not a valid did:web DID: {e}"),
        )
    })?;
    Ok(sender)
}

/// Parses a JSON request message: syntax errors are `invalid_json`, shape errors `invalid_request` whose
/// `details.member` names the offending member (TR-7).
pub fn parse_json<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, A2aError> {
    // A well-formed message (the usual case) is read without tracking the path; a refused one is read again with it,
    // for the member the error names. Reading has no side effects, so the second reading fails the same way.
    if let Ok(value) = serde_json::from_slice(bytes) {
        return Ok(value);
    }
    // TR-7: a body that is not well-formed JSON is `invalid_json` whatever the message expects. The typed reading
    // stops at the first member of the wrong shape (`{"target_capability":1` is a type error before it is a
    // truncation), so well-formedness is checked first, on its own.
    if let Err(e) = serde_json::from_slice::<serde::de::IgnoredAny>(bytes) {
        return Err(json_error(".", &e));
    }
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let value: T = serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let path = e.path().to_string();
        json_error(&path, &e.into_inner())
    })?;
    // Trailing data after the message is a syntax error, as serde_json::from_slice reports it.
    de.end().map_err(|e| json_error(".", &e))?;
    Ok(value)
}

/// The protocol error for a serde_json error at `path` (`.` is the root).
fn json_error(path: &str, e: &serde_json::Error) -> A2aError {
    use serde_json::error::Category;
    match e.classify() {
        Category::Syntax | Category::Eof | Category::Io => {
            A2aError::with_message(ErrorCode::INVALID_JSON, format!("the request body is not well-formed JSON: {e}"))
                .details(json!({"line": e.line(), "column": e.column()}))
        }
        Category::Data => {
            // A missing or unknown member is reported at its parent; the serde message names it in backticks.
            let text = e.to_string();
            let named = text
                .split('`')
                .nth(1)
                .filter(|_| text.starts_with("missing field") || text.starts_with("unknown field"));
            let member = match (path, named) {
                (".", Some(n)) => n.to_owned(),
                // An unknown member's path already ends with its name.
                (p, Some(n)) if p == n || p.ends_with(&format!(".{n}")) => p.to_owned(),
                (p, Some(n)) => format!("{p}.{n}"),
                (p, None) => p.to_owned(),
            };
            A2aError::with_message(
                ErrorCode::INVALID_REQUEST,
                format!("the request body is not the expected message: member `{member}`: {e}"),
            )
            .details(json!({"member": member, "line": e.line(), "column": e.column()}))
        }
    }
}
