//! Which skill an A2A 1.x message goes to, and the payload it becomes (`spec/PROTOCOL.md` §20.3: BR-7, BR-8, BR-27,
//! BR-28). One implementation for an agent's bridge and a gateway's (BR-29), so that a message is routed the same way
//! wherever it arrives.

use serde_json::{Map, Value, json};

use super::{Message, SendMessageRequest};
use crate::negotiation::AgreedSchema;

/// What a message carries (BR-8).
#[derive(Debug, Clone, PartialEq)]
pub enum Content {
    /// One data part, a JSON object: the payload.
    Data(Value),
    /// One text part and no data part.
    Text(String),
}

/// Why a message's parts cannot make a payload (BR-8, BR-9).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ContentError {
    /// A file part (`raw` or `url`): A2A's `ContentTypeNotSupportedError` (`-32005`).
    File(String),
    /// Any other refusal: `-32602` (invalid params). The message says what to send instead.
    Params(String),
}

/// The limits on a message's parts (BR-9).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PartLimits {
    /// The most parts of one message.
    pub max_parts: usize,
    /// The most bytes of UTF-8 in one `text` part.
    pub max_text_bytes: usize,
}

impl PartLimits {
    /// No limit: for a party that passes the message on to one that applies its own (a gateway, BR-29).
    pub const NONE: PartLimits = PartLimits { max_parts: usize::MAX, max_text_bytes: usize::MAX };
}

/// BR-8, BR-9: what a message carries: one JSON object, or one text.
pub fn content_of(msg: &Message, limits: PartLimits) -> Result<Content, ContentError> {
    if msg.parts.len() > limits.max_parts {
        return Err(ContentError::Params(format!(
            "the message has {} parts; at most {} are accepted (max_parts)",
            msg.parts.len(),
            limits.max_parts
        )));
    }
    let mut data = Vec::new();
    let mut texts = Vec::new();
    for (i, p) in msg.parts.iter().enumerate() {
        if p.raw.is_some() || p.url.is_some() {
            return Err(ContentError::File(format!(
                "part {i} is a file (raw or url); this agent takes JSON data parts (or one text part)"
            )));
        }
        if let Some(t) = &p.text {
            if t.len() > limits.max_text_bytes {
                return Err(ContentError::Params(format!(
                    "part {i} has {} bytes of text; at most {} are accepted (max_text_bytes)",
                    t.len(),
                    limits.max_text_bytes
                )));
            }
            texts.push(t);
        }
        if let Some(d) = &p.data {
            data.push(d);
        }
    }
    match (data.as_slice(), texts.as_slice()) {
        ([d], _) if d.is_object() => Ok(Content::Data((*d).clone())),
        ([_], _) => Err(ContentError::Params("the data part must be a JSON object (the skill's payload)".into())),
        ([], [t]) => Ok(Content::Text((*t).clone())),
        ([], []) => Err(ContentError::Params(
            "the message has no data part; send the payload as one data part (or one text part)".into(),
        )),
        ([], _) => Err(ContentError::Params(
            "the message has several text parts and no data part; send the payload as one data part".into(),
        )),
        _ => Err(ContentError::Params("the message has several data parts; send the payload as exactly one".into())),
    }
}

fn meta_skill(m: Option<&Map<String, Value>>) -> Option<&str> {
    m.and_then(|m| m.get("skill")).and_then(Value::as_str)
}

/// BR-7: the skill a message names: the message's `metadata.skill`, else the request's.
pub fn named_skill(req: &SendMessageRequest) -> Option<&str> {
    meta_skill(req.message.metadata.as_ref()).or_else(|| meta_skill(req.metadata.as_ref()))
}

/// A skill a message may go to.
#[derive(Debug, Clone, Copy)]
pub struct Skill<'a> {
    /// The skill's name (its capability's).
    pub name: &'a str,
    /// Its input schema (§4.1).
    pub input_schema: &'a Value,
    /// The input schema compiled; `None` when it does not compile, and then the skill accepts nothing.
    pub compiled: Option<&'a AgreedSchema>,
}

impl Skill<'_> {
    fn accepts(&self, payload: &Value) -> bool {
        self.compiled.is_some_and(|s| s.is_valid(payload))
    }
}

/// BR-8, BR-28: the payload of `content` for `skill`: a data part as it is; a text `{"text": <text>}` when the
/// skill's schema accepts that, else `{<member>: <text>}` when the schema requires exactly one member and that
/// member's `type` is `string`, else `{"text": <text>}` (which EXECUTE then refuses).
pub fn payload_for(content: &Content, skill: &Skill<'_>) -> Value {
    match content {
        Content::Data(v) => v.clone(),
        Content::Text(t) => {
            let plain = json!({"text": t});
            if skill.accepts(&plain) {
                return plain;
            }
            let input = skill.input_schema;
            match input["required"].as_array().map(Vec::as_slice) {
                Some([Value::String(member)]) if input["properties"][member.as_str()]["type"] == "string" => {
                    json!({ member.as_str(): t })
                }
                _ => plain,
            }
        }
    }
}

/// BR-7, BR-27: the skill of a message that names none, as an index into `skills` (the card's skills, in order): the
/// only skill; else the only skill whose input schema accepts the message's payload (BR-28); else `default_skill`
/// when it is one of `skills`; else a refusal (`-32602`) that says how many skills accept the message, how to name
/// one, and lists every skill with the members its input schema requires.
pub fn select(content: &Content, skills: &[Skill<'_>], default_skill: Option<&str>) -> Result<usize, String> {
    if skills.len() == 1 {
        return Ok(0);
    }
    let accepting: Vec<usize> =
        (0..skills.len()).filter(|&i| skills[i].accepts(&payload_for(content, &skills[i]))).collect();
    let default = default_skill.and_then(|d| skills.iter().position(|s| s.name == d));
    match (accepting.as_slice(), default) {
        ([one], _) => Ok(*one),
        (_, Some(d)) => Ok(d),
        (several, None) => {
            let fits = if several.is_empty() {
                "none of them accepts this message".to_owned()
            } else {
                format!(
                    "{} of them accept this message ({})",
                    several.len(),
                    several.iter().map(|&i| skills[i].name).collect::<Vec<_>>().join(", ")
                )
            };
            Err(format!(
                "this message names no skill and there are several; {fits}. Name the skill in message.metadata.skill \
                 (e.g. \"metadata\": {{\"skill\": \"{}\"}}) and send its payload as one data part. The skills, with \
                 the members they require: {}",
                skills.first().map_or("", |s| s.name),
                summary(skills)
            ))
        }
    }
}

/// Each skill with the members its input schema requires: `submit_report (title, timestamp); echo_message (message)`.
pub fn summary(skills: &[Skill<'_>]) -> String {
    skills
        .iter()
        .map(|s| {
            let required: Vec<&str> = s.input_schema["required"]
                .as_array()
                .map(|r| r.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            format!("{} ({})", s.name, required.join(", "))
        })
        .collect::<Vec<_>>()
        .join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn compiled(v: &Value) -> AgreedSchema {
        AgreedSchema::compile(v).expect("schema")
    }

    #[test]
    fn a_text_goes_to_the_one_skill_that_accepts_it_else_the_default_else_a_refusal_listing_the_skills() {
        let echo = json!({"type": "object", "properties": {"message": {"type": "string"}}, "required": ["message"]});
        let report = json!({"type": "object", "properties": {"title": {"type": "string"}, "n": {"type": "number"}},
                            "required": ["title", "n"]});
        let (ce, cr) = (compiled(&echo), compiled(&report));
        let skills = [
            Skill { name: "submit_report", input_schema: &report, compiled: Some(&cr) },
            Skill { name: "echo_message", input_schema: &echo, compiled: Some(&ce) },
        ];
        let text = Content::Text("hello".into());
        assert_eq!(select(&text, &skills, None), Ok(1));
        assert_eq!(payload_for(&text, &skills[1]), json!({"message": "hello"}));
        let data = Content::Data(json!({"other": 1}));
        assert_eq!(select(&data, &skills, Some("echo_message")), Ok(1));
        let refusal = select(&data, &skills, None).expect_err("no skill accepts it");
        assert!(refusal.contains("none of them accepts"), "{refusal}");
        assert!(refusal.contains("submit_report (title, n); echo_message (message)"), "{refusal}");
        // A default that is not among the skills is no default.
        assert!(select(&data, &skills, Some("gone")).is_err());
        assert_eq!(select(&data, &skills[..1], None), Ok(0));
    }
}
