//! The configurable session handlers of §17.10 (SES-9): a program ([`CommandHandler`]), an HTTP service
//! ([`HttpHandler`]) and an OpenAI-compatible chat API ([`OpenAiHandler`]) — agents without Rust.
//!
//! Each is built from its configuration ([`crate::sessions::config`]) and turns a [`Delivery`] into a reply text or
//! a [`HandlerFailure`] with readable text; every limit (time, output size, concurrency) is explicit and
//! configurable. What is shared lives here: the reply shape `{"reply": "..."}` (or `{"error": "..."}`), bounded
//! reads, and excerpts of what a failing program or service said.

pub mod command;
pub mod http;
pub mod openai;

pub use command::CommandHandler;
pub use http::HttpHandler;
pub use openai::OpenAiHandler;

use a2a_core::sessions::{Delivery, Step};
use serde::Deserialize;

use crate::sessions::HandlerFailure;

/// How many characters of a failing program's stderr or a service's error body a failure quotes.
pub const EXCERPT_CHARS: usize = 500;

/// The reply a program or a service writes (SES-9; the `RunReply` shape of SES-5): exactly one of `reply` and
/// `error`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ReplyBody {
    #[serde(default)]
    reply: Option<String>,
    #[serde(default)]
    error: Option<String>,
}

/// Reads `{"reply": "..."}` (the reply) or `{"error": "..."}` (a failure) from `body`; `None` when `body` is not a
/// JSON object with a `reply` or `error` member. `who` names the program or service in messages.
fn parse_reply_body(body: &str, who: &str) -> Option<Result<String, HandlerFailure>> {
    let value: serde_json::Value = serde_json::from_str(body.trim()).ok()?;
    let object = value.as_object()?;
    if !object.contains_key("reply") && !object.contains_key("error") {
        return None;
    }
    Some(match serde_json::from_value::<ReplyBody>(value) {
        Ok(ReplyBody { reply: Some(reply), error: None }) => Ok(reply),
        Ok(ReplyBody { reply: None, error: Some(error) }) => Err(HandlerFailure::Failed(format!("{who}: {error}"))),
        Ok(_) => Err(HandlerFailure::Failed(format!(
            "{who} answered both `reply` and `error` (or neither as a string); answer exactly one of \
             {{\"reply\": \"...\"}} and {{\"error\": \"...\"}}"
        ))),
        Err(e) => Err(HandlerFailure::Failed(format!(
            "{who} answered a reply object that is not {{\"reply\": \"<text>\"}} or {{\"error\": \"<text>\"}}: {e}"
        ))),
    })
}

/// The reply of a program's stdout (SES-9): `{"reply": "..."}`, or else the whole of it, trimmed.
fn reply_from_stdout(stdout: &str, who: &str) -> Result<String, HandlerFailure> {
    parse_reply_body(stdout, who).unwrap_or_else(|| Ok(stdout.trim().to_owned()))
}

/// The reply of an HTTP service's body (SES-9): it must be `{"reply": "..."}` (or `{"error": "..."}`).
fn reply_from_json(body: &[u8], who: &str) -> Result<String, HandlerFailure> {
    let text = std::str::from_utf8(body)
        .map_err(|_| HandlerFailure::Failed(format!("{who} answered a body that is not UTF-8")))?;
    parse_reply_body(text, who).unwrap_or_else(|| {
        Err(HandlerFailure::Failed(format!(
            "{who} answered {:?}, which is not {{\"reply\": \"<text>\"}}; make the service answer JSON with a \
             `reply` string",
            head(text.as_bytes(), EXCERPT_CHARS)
        )))
    })
}

/// The first `max` characters of `bytes` (lossy UTF-8, trimmed), with `...` when cut.
fn head(bytes: &[u8], max: usize) -> String {
    let s = String::from_utf8_lossy(bytes);
    let s = s.trim();
    match s.char_indices().nth(max) {
        Some((i, _)) => format!("{}...", &s[..i]),
        None => s.to_owned(),
    }
}

/// The last `max` characters of `bytes` (lossy UTF-8, trimmed), with `...` when cut.
fn tail(bytes: &[u8], max: usize) -> String {
    let s = String::from_utf8_lossy(bytes);
    let s = s.trim();
    let n = s.chars().count();
    if n <= max {
        return s.to_owned();
    }
    let start = s.char_indices().nth(n - max).map_or(0, |(i, _)| i);
    format!("...{}", &s[start..])
}

/// The user-facing text of a delivery for a handler that is given plain text: the message, and for an announce step
/// the original request, the round-one reply and the last reply it carries (ANN-1).
pub fn delivery_text(delivery: &Delivery) -> String {
    let mut out = String::new();
    for (label, value) in [
        ("Original request", &delivery.original),
        ("Round-one reply", &delivery.round_one),
        ("Last reply", &delivery.last),
    ] {
        if let Some(v) = value {
            out.push_str(label);
            out.push_str(": ");
            out.push_str(v);
            out.push('\n');
        }
    }
    if !out.is_empty() && !delivery.text.is_empty() {
        out.push('\n');
    }
    out.push_str(&delivery.text);
    out
}

/// The wire name of a step (`A2A_STEP`, `A2A-Step`).
fn step_name(step: Step) -> &'static str {
    match step {
        Step::Message => "message",
        Step::Reply => "reply",
        Step::Announce => "announce",
        Step::Spawn => "spawn",
    }
}

/// Reads an HTTP response body, refusing one over `max` bytes (its `Content-Length` first, then as it streams);
/// the client's `timeout_ms` passing while it streams is a time-out.
async fn read_body_capped(
    mut resp: reqwest::Response,
    max: usize,
    timeout_ms: u64,
    who: &str,
) -> Result<Vec<u8>, HandlerFailure> {
    let too_big = || {
        HandlerFailure::Failed(format!(
            "{who} answered more than {max} bytes; raise the handler's max_response_bytes or make the answer shorter"
        ))
    };
    if resp.content_length().is_some_and(|n| n > max as u64) {
        return Err(too_big());
    }
    let mut body = Vec::new();
    loop {
        match resp.chunk().await {
            Ok(Some(chunk)) => {
                if body.len() + chunk.len() > max {
                    return Err(too_big());
                }
                body.extend_from_slice(&chunk);
            }
            Ok(None) => return Ok(body),
            Err(e) if e.is_timeout() => {
                return Err(HandlerFailure::TimedOut(format!(
                    "{who} did not finish its answer within {timeout_ms} ms (handler timeout_ms)"
                )));
            }
            Err(e) => {
                return Err(HandlerFailure::Failed(format!(
                    "{who}: reading the answer failed: {}",
                    a2a_core::error::with_causes(&e)
                )));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stdout_reply_is_the_reply_member_or_the_whole_trimmed_text() {
        assert_eq!(reply_from_stdout("{\"reply\": \"5000\"}\n", "p"), Ok("5000".into()));
        assert_eq!(reply_from_stdout("  The bonus is 5000.\n", "p"), Ok("The bonus is 5000.".into()));
        // JSON that is not a reply object is plain text.
        assert_eq!(reply_from_stdout("{\"bonus\": 5000}", "p"), Ok("{\"bonus\": 5000}".into()));
        assert_eq!(
            reply_from_stdout("{\"error\": \"no payroll\"}", "p"),
            Err(HandlerFailure::Failed("p: no payroll".into()))
        );
        assert!(
            matches!(reply_from_stdout("{\"reply\": 5}", "p"), Err(HandlerFailure::Failed(m)) if m.contains("not"))
        );
        assert!(matches!(
            reply_from_stdout("{\"reply\": \"a\", \"error\": \"b\"}", "p"),
            Err(HandlerFailure::Failed(_))
        ));
    }

    #[test]
    fn json_reply_must_be_a_reply_object() {
        assert_eq!(reply_from_json(b"{\"reply\":\"ok\"}", "s"), Ok("ok".into()));
        assert!(matches!(reply_from_json(b"plain", "s"), Err(HandlerFailure::Failed(m)) if m.contains("plain")));
        assert!(matches!(reply_from_json(b"\xff", "s"), Err(HandlerFailure::Failed(m)) if m.contains("UTF-8")));
    }

    #[test]
    fn excerpts_cut_on_character_boundaries() {
        assert_eq!(head("ééé".as_bytes(), 2), "éé...");
        assert_eq!(tail("ééé".as_bytes(), 2), "...éé");
        assert_eq!(tail(b" short ", 10), "short");
    }
}
