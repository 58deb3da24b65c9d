//! The `openai` session handler (SES-9): an OpenAI-compatible `POST {base_url}/v1/chat/completions` per delivery.
//!
//! The messages are: a system message with the session's `system_prompt` (if configured), the step instruction
//! (PP-2, ANN-1, spawn) and the provenance line (POL-3: the text comes from an agent, not the user); the delivery's
//! context as earlier messages (`inter_session` and `tool` ones as user messages marked as such); and the text as
//! the user message — for an announce step preceded by the original request, the round-one reply and the last reply;
//! image attachments as `image_url` parts (data URLs). `max_tokens` is the smaller of the delivery's and the
//! configured one; `temperature` the configured one, or the delivery's `metadata.temperature` when it is a number
//! from 0 to 2. The reply is the first choice's message content.
//!
//! Failures are readable: a refused key (`401`/`403`), rate limits and quota (`429`, with `Retry-After`), server
//! errors (`5xx`), other refusals, and answers that are not a chat completion each say what happened and what to
//! check; a time-out is `TimedOut`.

use std::time::Duration;

use a2a_core::sessions::{ContextMessage, Delivery, Role};
use serde_json::{Value, json};

use super::{EXCERPT_CHARS, delivery_text, head, read_body_capped};
use crate::sessions::config::OpenAiConfig;
use crate::sessions::{HandlerFailure, SessionHandler};

/// Calls an OpenAI-compatible chat completions API per delivery (see the module documentation).
#[derive(Debug, Clone)]
pub struct OpenAiHandler {
    client: reqwest::Client,
    config: OpenAiConfig,
    endpoint: String,
    api_key: Option<String>,
}

impl OpenAiHandler {
    /// A handler for `config` (checked when the configuration was read), with the API key read from the variable
    /// it names, if any.
    pub fn new(config: OpenAiConfig, api_key: Option<String>) -> Result<Self, String> {
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .timeout(Duration::from_millis(config.timeout_ms))
            .build()
            .map_err(|e| format!("cannot build the HTTP client: {e}"))?;
        let endpoint = completions_url(&config.base_url);
        Ok(OpenAiHandler { client, config, endpoint, api_key })
    }

    /// The URL the handler POSTs to.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// The chat completion request for `delivery`.
    pub fn request_body(&self, delivery: &Delivery) -> Value {
        let mut messages = vec![json!({"role": "system", "content": self.system_message(delivery)})];
        messages.extend(delivery.context.iter().map(context_message));
        messages.push(json!({"role": "user", "content": user_content(delivery)}));
        let mut body = json!({"model": self.config.model, "messages": messages});
        let max_tokens = match (delivery.max_tokens, self.config.max_tokens) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        if let Some(n) = max_tokens {
            body["max_tokens"] = json!(n);
        }
        let asked = delivery.metadata.get("temperature").and_then(Value::as_f64).filter(|t| (0.0..=2.0).contains(t));
        if let Some(t) = asked.or(self.config.temperature) {
            body["temperature"] = json!(t);
        }
        body
    }

    fn system_message(&self, delivery: &Delivery) -> String {
        let mut parts: Vec<String> = Vec::new();
        if let Some(p) = &self.config.system_prompt {
            parts.push(p.clone());
        }
        if let Some(i) = &delivery.instruction {
            parts.push(i.clone());
        }
        parts.push(delivery.provenance.line());
        parts.join("\n\n")
    }

    fn refusal(&self, status: reqwest::StatusCode, retry_after: Option<String>, body: &[u8]) -> HandlerFailure {
        let said = api_error_message(body);
        let code = status.as_u16();
        let text = match code {
            401 | 403 => {
                let key = match &self.config.api_key_env {
                    Some(v) => format!("check the key in {v} (handler.api_key_env)"),
                    None => "this API needs a key: set handler.api_key_env".to_owned(),
                };
                format!("the chat API refused the API key ({status}): {said}; {key}")
            }
            429 => {
                let wait = retry_after.map_or_else(String::new, |s| format!("; it asks to retry after {s} s"));
                format!("the chat API is rate limiting or out of quota ({status}): {said}{wait}")
            }
            500..=599 => format!("the chat API failed ({status}): {said}; try again later"),
            404 => format!(
                "the chat API has no {} or no model {:?} ({status}): {said}; check handler.base_url and model",
                self.endpoint, self.config.model
            ),
            _ => format!("the chat API refused the request ({status}): {said}"),
        };
        HandlerFailure::Failed(text)
    }
}

/// `{base_url}/v1/chat/completions`, accepting a base URL that already ends in `/v1`.
fn completions_url(base: &str) -> String {
    let base = base.trim_end_matches('/');
    let base = base.strip_suffix("/v1").unwrap_or(base);
    format!("{base}/v1/chat/completions")
}

fn context_message(m: &ContextMessage) -> Value {
    let (role, prefix) = match m.role {
        Role::User => ("user", ""),
        Role::Assistant => ("assistant", ""),
        Role::System => ("system", ""),
        Role::InterSession => ("user", "[Inter-session message] "),
        Role::Tool => ("user", "[Tool output] "),
    };
    json!({"role": role, "content": format!("{prefix}{}", m.text)})
}

/// The user message: plain text, or text and image parts when the delivery carries images.
fn user_content(delivery: &Delivery) -> Value {
    let mut text = delivery_text(delivery);
    let (images, files): (Vec<_>, Vec<_>) =
        delivery.attachments.iter().partition(|a| a.media_type.to_ascii_lowercase().starts_with("image/"));
    for f in &files {
        text.push_str(&format!("\n[Attached file {:?} ({}), not shown]", f.name, f.media_type));
    }
    if images.is_empty() {
        return Value::String(text);
    }
    let mut parts = vec![json!({"type": "text", "text": text})];
    parts.extend(images.iter().map(
        |i| json!({"type": "image_url", "image_url": {"url": format!("data:{};base64,{}", i.media_type, i.data)}}),
    ));
    Value::Array(parts)
}

/// The message of an OpenAI-style error body (`{"error": {"message": ...}}`), or the start of the body.
fn api_error_message(body: &[u8]) -> String {
    serde_json::from_slice::<Value>(body)
        .ok()
        .and_then(|v| {
            let e = v.get("error")?;
            e.get("message").and_then(Value::as_str).or_else(|| e.as_str()).map(str::to_owned)
        })
        .unwrap_or_else(|| {
            let h = head(body, EXCERPT_CHARS);
            if h.is_empty() { "no message".to_owned() } else { h }
        })
}

#[async_trait::async_trait]
impl SessionHandler for OpenAiHandler {
    async fn handle(&self, delivery: Delivery) -> Result<String, HandlerFailure> {
        let who = format!("POST {}", self.endpoint);
        let mut req = self.client.post(&self.endpoint).json(&self.request_body(&delivery));
        if let Some(k) = &self.api_key {
            req = req.bearer_auth(k);
        }
        let resp = req.send().await.map_err(|e| {
            if e.is_timeout() {
                HandlerFailure::TimedOut(format!(
                    "{who} did not answer within {} ms (handler timeout_ms)",
                    self.config.timeout_ms
                ))
            } else {
                HandlerFailure::Failed(format!("{who}: {}; check handler.base_url", a2a_core::error::with_causes(&e)))
            }
        })?;
        let status = resp.status();
        let retry_after =
            resp.headers().get(reqwest::header::RETRY_AFTER).and_then(|v| v.to_str().ok()).map(str::to_owned);
        let body = read_body_capped(resp, self.config.max_response_bytes, self.config.timeout_ms, &who).await?;
        if !status.is_success() {
            return Err(self.refusal(status, retry_after, &body));
        }
        let malformed = |why: &str| {
            HandlerFailure::Failed(format!(
                "{who} answered {status} but not a chat completion ({why}): {}",
                head(&body, EXCERPT_CHARS)
            ))
        };
        let value: Value = serde_json::from_slice(&body).map_err(|_| malformed("not JSON"))?;
        let choice = value.get("choices").and_then(Value::as_array).and_then(|c| c.first());
        let Some(choice) = choice else { return Err(malformed("no choices")) };
        match choice.pointer("/message/content") {
            Some(Value::String(s)) => Ok(s.clone()),
            // A refusal, or a tool call with no text: nothing to reply (the runtime treats it as an empty reply).
            Some(Value::Null) | None if choice.pointer("/message").is_some() => {
                match choice.pointer("/message/refusal").and_then(Value::as_str) {
                    Some(r) => Err(HandlerFailure::Failed(format!("the model refused: {r}"))),
                    None => Ok(String::new()),
                }
            }
            _ => Err(malformed("the first choice has no message content")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_endpoint_is_below_v1_whether_or_not_the_base_names_it() {
        assert_eq!(completions_url("http://h:1"), "http://h:1/v1/chat/completions");
        assert_eq!(completions_url("http://h:1/"), "http://h:1/v1/chat/completions");
        assert_eq!(completions_url("https://api.example.com/v1/"), "https://api.example.com/v1/chat/completions");
        assert_eq!(completions_url("http://h/proxy"), "http://h/proxy/v1/chat/completions");
    }

    #[test]
    fn an_api_error_is_quoted_by_its_message() {
        assert_eq!(api_error_message(br#"{"error":{"message":"Incorrect API key","type":"x"}}"#), "Incorrect API key");
        assert_eq!(api_error_message(b"upstream down"), "upstream down");
        assert_eq!(api_error_message(b""), "no message");
    }
}
