//! The Linux Foundation Agent2Agent (A2A) protocol 1.0, as far as the bridge of `spec/PROTOCOL.md` §20 needs it: the
//! JSON (ProtoJSON) forms of its messages, tasks and cards, the JSON-RPC method names, and Agent Card signatures
//! (BR-5, BR-6): an ES256 JWS whose detached payload is the RFC 8785 canonical card.
//!
//! Member names are A2A 1.0's (camelCase); unknown members are ignored when reading, as A2A's SDKs do.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::canonical;
use crate::jws::{base64url_decode, base64url_encode};
use crate::keys::{SigningKey, VerifyingKey};

pub mod select;

/// The A2A protocol version the bridge speaks (BR-2).
pub const PROTOCOL_VERSION: &str = "1.0";
/// Where an A2A agent publishes its card (BR-3).
pub const AGENT_CARD_PATH: &str = "/.well-known/agent-card.json";
/// The JSON-RPC binding's name in `supportedInterfaces`.
pub const BINDING_JSONRPC: &str = "JSONRPC";
/// The HTTP+JSON binding's name in `supportedInterfaces`.
pub const BINDING_HTTP_JSON: &str = "HTTP+JSON";
/// The `@type` of a `google.rpc.ErrorInfo` in error details (BR-14).
pub const ERROR_INFO_TYPE: &str = "type.googleapis.com/google.rpc.ErrorInfo";
/// The name of this protocol's bridge binding in `A2A-Bridges` and `bridge_to.binding` (BR-17).
pub const BRIDGE_BINDING: &str = "a2a1x";

/// JSON-RPC method names of A2A 1.0.
pub mod method {
    /// Send a message, answered with a task or a message.
    pub const SEND_MESSAGE: &str = "SendMessage";
    /// Send a message, answered with a stream of events.
    pub const SEND_STREAMING_MESSAGE: &str = "SendStreamingMessage";
    /// Read a task.
    pub const GET_TASK: &str = "GetTask";
    /// List tasks.
    pub const LIST_TASKS: &str = "ListTasks";
    /// Cancel a task.
    pub const CANCEL_TASK: &str = "CancelTask";
    /// Stream the events of an existing task.
    pub const SUBSCRIBE_TO_TASK: &str = "SubscribeToTask";
}

/// The state of a task.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum TaskState {
    /// Not set.
    #[serde(rename = "TASK_STATE_UNSPECIFIED")]
    Unspecified,
    /// Received, not started.
    #[serde(rename = "TASK_STATE_SUBMITTED")]
    Submitted,
    /// Running.
    #[serde(rename = "TASK_STATE_WORKING")]
    Working,
    /// Finished with a result.
    #[serde(rename = "TASK_STATE_COMPLETED")]
    Completed,
    /// Finished with an error.
    #[serde(rename = "TASK_STATE_FAILED")]
    Failed,
    /// Canceled.
    #[serde(rename = "TASK_STATE_CANCELED")]
    Canceled,
    /// The agent waits for more input.
    #[serde(rename = "TASK_STATE_INPUT_REQUIRED")]
    InputRequired,
    /// The agent refused the task.
    #[serde(rename = "TASK_STATE_REJECTED")]
    Rejected,
    /// The agent waits for authentication.
    #[serde(rename = "TASK_STATE_AUTH_REQUIRED")]
    AuthRequired,
}

impl TaskState {
    /// Whether no further state follows.
    pub fn is_terminal(self) -> bool {
        matches!(self, TaskState::Completed | TaskState::Failed | TaskState::Canceled | TaskState::Rejected)
    }

    /// The enum name, as on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            TaskState::Unspecified => "TASK_STATE_UNSPECIFIED",
            TaskState::Submitted => "TASK_STATE_SUBMITTED",
            TaskState::Working => "TASK_STATE_WORKING",
            TaskState::Completed => "TASK_STATE_COMPLETED",
            TaskState::Failed => "TASK_STATE_FAILED",
            TaskState::Canceled => "TASK_STATE_CANCELED",
            TaskState::InputRequired => "TASK_STATE_INPUT_REQUIRED",
            TaskState::Rejected => "TASK_STATE_REJECTED",
            TaskState::AuthRequired => "TASK_STATE_AUTH_REQUIRED",
        }
    }
}

/// Who wrote a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Role {
    /// Not set.
    #[serde(rename = "ROLE_UNSPECIFIED")]
    Unspecified,
    /// The caller.
    #[serde(rename = "ROLE_USER")]
    User,
    /// The agent.
    #[serde(rename = "ROLE_AGENT")]
    Agent,
}

/// One part of a message or artifact: text, structured data, or a file (`raw` bytes or a `url`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Part {
    /// Text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// Structured data (any JSON value).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
    /// File bytes, base64.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw: Option<String>,
    /// A file by URL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// A file name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filename: Option<String>,
    /// The media type of the part.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub media_type: Option<String>,
    /// Free metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Map<String, Value>>,
}

impl Part {
    /// A text part.
    pub fn text(text: impl Into<String>) -> Self {
        Part { text: Some(text.into()), ..Part::default() }
    }

    /// A data part.
    pub fn data(data: Value) -> Self {
        Part { data: Some(data), ..Part::default() }
    }
}

/// A message of a conversation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Message {
    /// The message's id, chosen by its writer.
    pub message_id: String,
    /// The conversation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_id: Option<String>,
    /// The task the message continues.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_id: Option<String>,
    /// Who wrote it.
    pub role: Role,
    /// Its parts.
    #[serde(default)]
    pub parts: Vec<Part>,
    /// Free metadata (the bridge reads `skill`, BR-7).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Map<String, Value>>,
}

/// A task's status.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskStatus {
    /// The state.
    pub state: TaskState,
    /// A message from the agent about the state (for example the error).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<Message>,
    /// When the state was reached (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timestamp: Option<String>,
}

/// An output of a task.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Artifact {
    /// The artifact's id within its task.
    pub artifact_id: String,
    /// A name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Its parts.
    #[serde(default)]
    pub parts: Vec<Part>,
}

/// A task.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Task {
    /// The task's id.
    pub id: String,
    /// The conversation it belongs to.
    #[serde(default)]
    pub context_id: String,
    /// Its status.
    pub status: TaskStatus,
    /// Its outputs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub artifacts: Vec<Artifact>,
    /// The messages of the task.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub history: Vec<Message>,
    /// Free metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Map<String, Value>>,
}

/// A change of a task's status, in a stream.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskStatusUpdateEvent {
    /// The task.
    pub task_id: String,
    /// Its conversation.
    #[serde(default)]
    pub context_id: String,
    /// The new status.
    pub status: TaskStatus,
}

/// A new or extended artifact, in a stream.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskArtifactUpdateEvent {
    /// The task.
    pub task_id: String,
    /// Its conversation.
    #[serde(default)]
    pub context_id: String,
    /// The artifact.
    pub artifact: Artifact,
    /// Whether the parts extend an artifact already sent.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub append: bool,
    /// Whether this is the artifact's last chunk.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub last_chunk: bool,
}

/// One event of a stream (`StreamResponse`, a oneof).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum StreamResponse {
    /// The task as it is.
    Task(Task),
    /// A message (agents that answer without a task).
    Message(Message),
    /// A status change.
    StatusUpdate(TaskStatusUpdateEvent),
    /// An artifact.
    ArtifactUpdate(TaskArtifactUpdateEvent),
}

/// The answer to `SendMessage` (a oneof).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum SendMessageResponse {
    /// A task.
    Task(Task),
    /// A direct message.
    Message(Message),
}

/// How the caller wants a message handled.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SendMessageConfiguration {
    /// Output media types the caller accepts.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub accepted_output_modes: Vec<String>,
    /// How many history messages to return.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub history_length: Option<u32>,
    /// Answer at once instead of waiting for a terminal state.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub return_immediately: bool,
}

/// `SendMessage` / `SendStreamingMessage` parameters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SendMessageRequest {
    /// The message.
    pub message: Message,
    /// How to handle it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub configuration: Option<SendMessageConfiguration>,
    /// Free metadata (the bridge reads `skill`, BR-7).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Map<String, Value>>,
}

/// `GetTask`, `CancelTask` and `SubscribeToTask` parameters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskIdRequest {
    /// The task.
    pub id: String,
    /// How many history messages to return (`GetTask`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub history_length: Option<u32>,
}

/// `ListTasks` parameters.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListTasksRequest {
    /// Only tasks of this conversation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_id: Option<String>,
    /// Only tasks in this state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<TaskState>,
    /// At most this many tasks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub page_size: Option<u32>,
    /// Where the previous page ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub page_token: Option<String>,
}

/// The answer to `ListTasks`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListTasksResponse {
    /// The tasks of this page.
    #[serde(default)]
    pub tasks: Vec<Task>,
    /// The token of the next page; empty on the last.
    #[serde(default)]
    pub next_page_token: String,
    /// The page size used.
    #[serde(default)]
    pub page_size: u32,
    /// How many tasks match in all.
    #[serde(default)]
    pub total_size: u32,
}

/// Why a card's signature was not accepted (BR-6).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CardSignatureError {
    /// The card has no `signatures`.
    #[error("the Agent Card is not signed (it has no `signatures`)")]
    Unsigned,
    /// A signature entry is not well-formed.
    #[error("signature {index} of the Agent Card is malformed: {reason}")]
    Malformed {
        /// Its position.
        index: usize,
        /// Why.
        reason: String,
    },
    /// No signature verified.
    #[error("no signature of the Agent Card verifies: {reasons}")]
    Invalid {
        /// Why each failed.
        reasons: String,
    },
}

/// Removes empty strings, arrays and objects recursively, as A2A verifiers do before canonicalising (BR-6); a
/// container that becomes empty is removed too. `None` when the whole value is empty.
pub fn drop_empty(value: &Value) -> Option<Value> {
    match value {
        Value::String(s) if s.is_empty() => None,
        Value::Array(items) => {
            let kept: Vec<Value> = items.iter().filter_map(drop_empty).collect();
            (!kept.is_empty()).then_some(Value::Array(kept))
        }
        Value::Object(members) => {
            let kept: Map<String, Value> =
                members.iter().filter_map(|(k, v)| drop_empty(v).map(|v| (k.clone(), v))).collect();
            (!kept.is_empty()).then_some(Value::Object(kept))
        }
        other => Some(other.clone()),
    }
}

/// The bytes a card signature covers: the RFC 8785 canonical form of the card without `signatures`, empty members
/// dropped (BR-5, BR-6).
pub fn card_signing_payload(card: &Value) -> Vec<u8> {
    let mut card = card.clone();
    if let Some(obj) = card.as_object_mut() {
        obj.remove("signatures");
    }
    canonical::to_canonical_vec(&drop_empty(&card).unwrap_or_else(|| Value::Object(Map::new())))
}

/// Signs `card` (BR-5): returns the `AgentCardSignature` object `{"protected", "signature"}` for `kid`
/// (`<did>#<key id>`).
pub fn sign_card(card: &Value, kid: &str, key: &SigningKey) -> Result<Value, crate::keys::KeyError> {
    let header = serde_json::json!({"alg": "ES256", "kid": kid, "typ": "JOSE"});
    let protected = base64url_encode(canonical::to_canonical_vec(&header));
    let input = format!("{protected}.{}", base64url_encode(card_signing_payload(card)));
    let sig = key.sign(input.as_bytes())?;
    Ok(serde_json::json!({"protected": protected, "signature": base64url_encode(sig)}))
}

/// A signature of a card, its protected header read.
#[derive(Debug, Clone)]
pub struct CardSignature {
    /// Its position in `signatures`.
    pub index: usize,
    /// The protected header.
    pub header: Map<String, Value>,
    /// `kid` of the header.
    pub kid: Option<String>,
    protected: String,
    signature: Vec<u8>,
}

/// Reads the signatures of `card` (without verifying them).
pub fn card_signatures(card: &Value) -> Result<Vec<CardSignature>, CardSignatureError> {
    let Some(list) = card.get("signatures").and_then(Value::as_array).filter(|l| !l.is_empty()) else {
        return Err(CardSignatureError::Unsigned);
    };
    let mut out = Vec::with_capacity(list.len());
    for (index, s) in list.iter().enumerate() {
        let malformed = |reason: &str| CardSignatureError::Malformed { index, reason: reason.to_owned() };
        let protected = s.get("protected").and_then(Value::as_str).ok_or_else(|| malformed("no `protected`"))?;
        let signature = s.get("signature").and_then(Value::as_str).ok_or_else(|| malformed("no `signature`"))?;
        let header_bytes = base64url_decode(protected).map_err(|e| malformed(&format!("`protected`: {e}")))?;
        let header: Map<String, Value> =
            serde_json::from_slice(&header_bytes).map_err(|e| malformed(&format!("`protected` is not JSON: {e}")))?;
        let signature = base64url_decode(signature).map_err(|e| malformed(&format!("`signature`: {e}")))?;
        let kid = header.get("kid").and_then(Value::as_str).map(str::to_owned);
        out.push(CardSignature { index, header, kid, protected: protected.to_owned(), signature });
    }
    Ok(out)
}

impl CardSignature {
    /// Verifies this signature over `card` with `key` (ES256 only).
    pub fn verify(&self, card: &Value, key: &VerifyingKey) -> Result<(), String> {
        match self.header.get("alg").and_then(Value::as_str) {
            Some("ES256") => {}
            other => return Err(format!("signature {}: alg {other:?} is not ES256", self.index)),
        }
        let input = format!("{}.{}", self.protected, base64url_encode(card_signing_payload(card)));
        key.verify(input.as_bytes(), &self.signature).map_err(|e| format!("signature {}: {e}", self.index))
    }
}

/// Whether the raw values of a request's `A2A-Bridges` (a comma-separated list of binding names, in any number of
/// headers) list `a2a1x` (BR-17).
pub fn bridge_asked_in<'a>(values: impl IntoIterator<Item = &'a [u8]>) -> bool {
    values
        .into_iter()
        .filter_map(|v| std::str::from_utf8(v).ok())
        .any(|v| v.split(',').any(|b| b.trim().eq_ignore_ascii_case(BRIDGE_BINDING)))
}

/// The `bridge_to` of BR-17 for the bridge served at `origin` (as the bridge's origin gives it): its JSON-RPC endpoint,
/// its Agent Card and the skill `capability`.
pub fn bridge_to_at(origin: &str, capability: &str) -> crate::wire::BridgeTo {
    crate::wire::BridgeTo {
        binding: BRIDGE_BINDING.to_owned(),
        protocol_version: PROTOCOL_VERSION.to_owned(),
        url: format!("{origin}/a2a1x/jsonrpc"),
        agent_card: Some(format!("{origin}{}", AGENT_CARD_PATH)),
        skill: capability.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_signed_card_verifies_and_a_changed_one_does_not() {
        let key = SigningKey::generate().expect("test value");
        let mut card = json!({"name": "x", "skills": [{"id": "echo", "tags": []}], "description": ""});
        let sig = sign_card(&card, "did:web:example.com#key-1", &key).expect("test value");
        card["signatures"] = json!([sig]);
        let sigs = card_signatures(&card).expect("test value");
        assert_eq!(sigs[0].kid.as_deref(), Some("did:web:example.com#key-1"));
        sigs[0].verify(&card, key.verifying_key()).expect("test value");
        // Empty members do not change the signed bytes (BR-4, BR-6) ...
        card["documentationUrl"] = json!("");
        sigs[0].verify(&card, key.verifying_key()).expect("test value");
        // ... anything else does.
        card["name"] = json!("y");
        assert!(sigs[0].verify(&card, key.verifying_key()).is_err());
        let other = SigningKey::generate().expect("test value");
        card["name"] = json!("x");
        assert!(sigs[0].verify(&card, other.verifying_key()).is_err());
    }

    #[test]
    fn an_unsigned_or_malformed_card_is_reported() {
        assert_eq!(card_signatures(&json!({"name": "x"})).expect_err("must fail"), CardSignatureError::Unsigned);
        let bad = json!({"signatures": [{"protected": "!!", "signature": "AA"}]});
        assert!(matches!(card_signatures(&bad), Err(CardSignatureError::Malformed { index: 0, .. })));
    }

    #[test]
    fn stream_events_use_the_oneof_member_names() {
        let ev = StreamResponse::StatusUpdate(TaskStatusUpdateEvent {
            task_id: "t".into(),
            context_id: "c".into(),
            status: TaskStatus { state: TaskState::Working, message: None, timestamp: None },
        });
        assert_eq!(
            serde_json::to_value(&ev).expect("test value"),
            json!({"statusUpdate": {"taskId": "t", "contextId": "c", "status": {"state": "TASK_STATE_WORKING"}}})
        );
        let back: StreamResponse = serde_json::from_value(json!({"task": {"id": "t", "contextId": "c",
            "status": {"state": "TASK_STATE_COMPLETED"}, "unknownMember": 1}}))
        .expect("test value");
        assert!(matches!(back, StreamResponse::Task(t) if t.status.state.is_terminal()));
    }
}
