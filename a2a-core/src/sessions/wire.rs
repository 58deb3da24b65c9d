//! Wire types of the session endpoints (§17.2–§17.8).

use super::*;

/// The kind of a session (§17.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SessionKind {
    /// A main, user-facing session.
    Main,
    /// A group conversation.
    Group,
    /// A scheduled session.
    Cron,
    /// A session started by a hook.
    Hook,
    /// A node of a larger system.
    Node,
    /// A worker spawned for one task (§17.8).
    Spawn,
    /// Anything else.
    Other,
}

/// The most sessions one `GET /a2a/sessions` answers when the query names no `limit` (SES-8).
pub const LIST_DEFAULT_LIMIT: u32 = 100;
/// The largest `limit` of `GET /a2a/sessions` (SES-8).
pub const LIST_MAX_LIMIT: u32 = 200;

/// The filters of `GET /a2a/sessions` (SES-8), as a caller writes them ([`ListQuery::to_query`]) and an agent reads
/// them ([`ListQuery::parse`]); every one is optional.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ListQuery {
    /// Only these kinds (`kind=main,spawn`).
    pub kinds: Vec<SessionKind>,
    /// Only sessions with exactly this label.
    pub label: Option<String>,
    /// Only sessions of this agent (a DID).
    pub agent: Option<String>,
    /// Only sessions updated within this many minutes.
    pub active_minutes: Option<u64>,
    /// A case-insensitive substring of label, summary or key (an empty one is no filter).
    pub search: Option<String>,
    /// At most this many (1 to [`LIST_MAX_LIMIT`]; absent: [`LIST_DEFAULT_LIMIT`]).
    pub limit: Option<u32>,
    /// Skip this many (absent: 0).
    pub offset: Option<u32>,
    /// Also list the requester's own sessions.
    pub include_self: bool,
    /// Also list ended sessions (SPN-4).
    pub include_ended: bool,
}

/// A `GET /a2a/sessions` query parameter that is not valid (the agent answers `400 invalid_request` naming it).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ListQueryError {
    /// The parameter.
    pub parameter: &'static str,
    /// What is wrong with it.
    pub message: String,
}

impl ListQuery {
    /// The query string (`kind=main,spawn&label=...`), empty when no filter is set.
    pub fn to_query(&self) -> String {
        let mut q = url::form_urlencoded::Serializer::new(String::new());
        if !self.kinds.is_empty() {
            q.append_pair("kind", &self.kinds.iter().map(|k| k.as_str()).collect::<Vec<_>>().join(","));
        }
        for (name, value) in [("label", &self.label), ("agent", &self.agent)] {
            if let Some(v) = value {
                q.append_pair(name, v);
            }
        }
        if let Some(m) = self.active_minutes {
            q.append_pair("active_minutes", &m.to_string());
        }
        if let Some(s) = &self.search {
            q.append_pair("search", s);
        }
        for (name, value) in [("limit", self.limit), ("offset", self.offset)] {
            if let Some(v) = value {
                q.append_pair(name, &v.to_string());
            }
        }
        for (name, set) in [("include_self", self.include_self), ("include_ended", self.include_ended)] {
            if set {
                q.append_pair(name, "true");
            }
        }
        q.finish()
    }

    /// Reads the filters from decoded query pairs (the first of a repeated name counts; unknown names are ignored).
    /// Flags are `true` (or empty) and `false`; numbers are non-negative decimal integers.
    pub fn parse(pairs: &[(String, String)]) -> Result<ListQuery, ListQueryError> {
        let get = |name: &str| pairs.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str());
        let bad = |parameter: &'static str, message: String| ListQueryError { parameter, message };
        fn num<T: FromStr>(v: Option<&str>, name: &'static str) -> Result<Option<T>, ListQueryError> {
            v.map(|v| {
                v.parse().map_err(|_| ListQueryError {
                    parameter: name,
                    message: format!("{name} must be a non-negative decimal integer, got {v:?}"),
                })
            })
            .transpose()
        }
        let flag = |name: &'static str| match get(name) {
            None | Some("false") => Ok(false),
            Some("true" | "") => Ok(true),
            Some(v) => Err(bad(name, format!("{name} must be true or false, got {v:?}"))),
        };
        let mut kinds = Vec::new();
        for name in get("kind").unwrap_or("").split(',').map(str::trim).filter(|n| !n.is_empty()) {
            let kind: SessionKind = serde_json::from_value(Value::String(name.to_owned()))
                .map_err(|_| bad("kind", format!("unknown session kind {name:?}")))?;
            kinds.push(kind);
        }
        let limit: Option<u32> = num(get("limit"), "limit")?;
        if let Some(l) = limit.filter(|l| !(1..=LIST_MAX_LIMIT).contains(l)) {
            return Err(bad("limit", format!("limit is 1 to {LIST_MAX_LIMIT} (got {l})")));
        }
        Ok(ListQuery {
            kinds,
            label: get("label").map(str::to_owned),
            agent: get("agent").map(str::to_owned),
            active_minutes: num(get("active_minutes"), "active_minutes")?,
            search: get("search").filter(|s| !s.is_empty()).map(str::to_owned),
            limit,
            offset: num(get("offset"), "offset")?,
            include_self: flag("include_self")?,
            include_ended: flag("include_ended")?,
        })
    }
}

impl SessionKind {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            SessionKind::Main => "main",
            SessionKind::Group => "group",
            SessionKind::Cron => "cron",
            SessionKind::Hook => "hook",
            SessionKind::Node => "node",
            SessionKind::Spawn => "spawn",
            SessionKind::Other => "other",
        }
    }
}

/// How a session's messages are handled (§17.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum HandlerKind {
    /// The agent runs a session handler.
    Hosted,
    /// Messages wait in an inbox that the session's owner reads (SES-5).
    Inbox,
}

/// A session as listed (SES-3).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Session {
    /// `{agent}#{session_key}`.
    pub address: SessionAddress,
    /// The key, unique within the agent.
    pub session_key: String,
    /// The hosting agent's DID.
    pub agent: String,
    /// The hosting agent's A2A endpoint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
    /// A label to find it by.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// Its kind.
    pub kind: SessionKind,
    /// What it is about.
    pub summary: String,
    /// Hosted or inbox.
    pub handler: HandlerKind,
    /// For an inbox session, the DID that registered it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// Creation time.
    pub created_at: String,
    /// Last refresh.
    pub updated_at: String,
    /// Set once ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_at: Option<String>,
    /// The session that spawned it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,
    /// The length of its parent chain (0 for a session nobody spawned).
    #[serde(default)]
    pub depth: u32,
}

/// `POST /a2a/sessions`: register or refresh an inbox session (SES-4).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SessionRegistration {
    /// The key.
    pub session_key: String,
    /// A label, 1–512 characters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// Its kind (default `other`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<SessionKind>,
    /// What it is about, 5–2000 characters.
    pub summary: String,
}

/// `GET /a2a/sessions` (SES-8).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SessionList {
    /// The sessions, newest `updated_at` first.
    pub sessions: Vec<Session>,
    /// How many matched before `limit`/`offset`.
    pub total: usize,
    /// Whether entries were left out to keep the body within 64 KiB.
    pub truncated: bool,
}

/// A file or an image carried by a send (SND-2).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Attachment {
    /// A file name.
    pub name: String,
    /// `type/subtype`; images are `image/*`.
    pub media_type: String,
    /// The bytes, base64 (RFC 4648 §4, padded).
    pub data: String,
}

/// A ping-pong hop's place in its run (PP-2).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TurnRef {
    /// The run the turn belongs to.
    pub run_id: String,
    /// The turn number, from 1.
    pub n: u32,
    /// The run's `max_turns`.
    pub of: u32,
}

/// What a target's handler is given besides the text (SND-11).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ContextMode {
    /// The message alone.
    #[default]
    None,
    /// The message and this run's exchange so far.
    Current,
    /// That and the requester's recent transcript (`context`).
    Full,
}

/// A message of a transcript, as carried in `context` and in history (HIS-1).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ContextMessage {
    /// `user`, `assistant`, `inter_session`, `tool` or `system`.
    pub role: Role,
    /// The text.
    pub text: String,
}

/// `POST /a2a/sessions/send` (§17.3).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SendRequest {
    /// The target's session key at this agent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    /// Alternatively, the label of exactly one visible session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_label: Option<String>,
    /// The message, 1–20 000 characters.
    pub text: String,
    /// The requester's session key at the sender's agent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    /// Where the requester's agent serves §17, for ping-pong turns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from_endpoint: Option<String>,
    /// Whether the requester wants the reply (default `true`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply: Option<bool>,
    /// Whether the target is asked to announce (default `true`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub announce: Option<bool>,
    /// How long to hold the request for the round-one reply (default 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait_ms: Option<u64>,
    /// How long the target has for its round-one reply (default 60 000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_timeout_ms: Option<u64>,
    /// Ping-pong turns after round one (0–20; default the agent's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_turns: Option<u32>,
    /// Files and images.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub attachments: Vec<Attachment>,
    /// Structured data for the handler and the transcript.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub metadata: BTreeMap<String, Value>,
    /// 0–9, higher first (default 5).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<u8>,
    /// What the handler is given besides the text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_mode: Option<ContextMode>,
    /// With `full`: the requester's recent transcript.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub context: Vec<ContextMessage>,
    /// Carried on every hop and in provenance.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace_id: Option<String>,
    /// A token budget the handler is told to respect.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
    /// Set only on ping-pong hops.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn: Option<TurnRef>,
}

/// What a send or a run reports (SND-7).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SendStatus {
    /// Stored and queued or running; no reply yet (never reported as `timeout`, SND-8).
    Accepted,
    /// The target replied.
    Ok,
    /// The target processed the message and had nothing to say.
    NoReply,
    /// The run timed out: no reply within `run_timeout_ms`.
    Timeout,
    /// The handler failed or the session ended.
    Error,
    /// Policy refused the send.
    Forbidden,
}

impl SendStatus {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            SendStatus::Accepted => "accepted",
            SendStatus::Ok => "ok",
            SendStatus::NoReply => "no_reply",
            SendStatus::Timeout => "timeout",
            SendStatus::Error => "error",
            SendStatus::Forbidden => "forbidden",
        }
    }

    /// Whether the round-one outcome is known (anything but `accepted`).
    pub fn is_final(self) -> bool {
        self != SendStatus::Accepted
    }
}

/// The answer to a send (SND-7).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SendResponse {
    /// The run (absent only when nothing was stored, e.g. `forbidden`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
    /// What happened.
    pub status: SendStatus,
    /// The target's reply, with `ok`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply: Option<String>,
    /// Why, with `error`, `timeout` and `forbidden`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorObject>,
    /// The target's address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
}

/// Where a run is (SND-10).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RunState {
    /// Waiting for the target session.
    Queued,
    /// Round one is running.
    Running,
    /// The sessions are exchanging turns.
    PingPong,
    /// The target is deciding whether to announce.
    Announcing,
    /// Nothing more will happen.
    Done,
}

/// One ping-pong turn of a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Turn {
    /// The turn number, from 1.
    pub n: u32,
    /// The run's `max_turns`.
    pub of: u32,
    /// The address of the session that replied in this turn.
    pub session: String,
    /// Its reply.
    pub text: String,
    /// When.
    pub at: String,
}

/// What the announce step did (ANN-2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum AnnounceStatus {
    /// The send asked for no announce.
    NotRequested,
    /// Not run yet.
    Pending,
    /// Published to the channel.
    Published,
    /// The target chose silence (a skip token or nothing).
    Skipped,
    /// The step failed.
    Failed,
}

/// The announce outcome of a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct AnnounceOutcome {
    /// What happened.
    pub status: AnnounceStatus,
    /// The event id, when published.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event_id: Option<String>,
    /// The published text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
}

/// A run (SND-10).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Run {
    /// The run id.
    pub run_id: String,
    /// The target's address.
    pub target: String,
    /// The requester's address, or its DID when it named no session.
    pub from: String,
    /// The round-one outcome.
    pub status: SendStatus,
    /// The round-one reply.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply: Option<String>,
    /// Why, with `error` and `timeout`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorObject>,
    /// Where the run is.
    pub state: RunState,
    /// The ping-pong turns so far.
    #[serde(default)]
    pub turns: Vec<Turn>,
    /// Why the exchange ended, once it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_by: Option<EndedBy>,
    /// The announce step.
    pub announce: AnnounceOutcome,
    /// Creation time.
    pub created_at: String,
    /// Last change.
    pub updated_at: String,
    /// The round-one deadline.
    pub deadline: String,
}

/// The role of a transcript message (HIS-1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// From the session's own user.
    User,
    /// The session's replies.
    Assistant,
    /// Delivered by §17 (sends, turns, spawns).
    InterSession,
    /// A tool call or its result.
    Tool,
    /// A system message.
    System,
}

/// A message of a history answer (HIS-1).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct HistoryMessage {
    /// Position in the transcript, increasing.
    pub seq: u64,
    /// When.
    pub at: String,
    /// Who.
    pub role: Role,
    /// The text (redacted, and cut to 4000 characters).
    pub text: String,
    /// The run it belongs to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
    /// Where it came from, for `inter_session` messages.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provenance: Option<Provenance>,
    /// Whether `text` was cut.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub truncated: bool,
    /// The length of the text before it was cut, in characters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub original_chars: Option<usize>,
}

/// `GET /a2a/sessions/{key}/history` (HIS-1).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct History {
    /// The session's address.
    pub session: String,
    /// The messages, oldest first.
    pub messages: Vec<HistoryMessage>,
    /// Older messages were left out because of `limit`.
    pub truncated: bool,
    /// Older messages were left out because of `max_bytes`.
    pub bytes_capped: bool,
    /// How many secrets were redacted.
    pub redacted: usize,
}

/// What to do with a worker session when its task is done (SPN-4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Cleanup {
    /// End it and delete its transcript.
    Delete,
    /// End it and keep its transcript.
    #[default]
    Keep,
}

/// `POST /a2a/sessions/spawn` (SPN-1).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SpawnRequest {
    /// The sender's session that the worker reports back to.
    pub parent: String,
    /// The task.
    pub task: String,
    /// A label for the worker.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// Which of the agent's spawn templates to use.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template: Option<String>,
    /// How long the worker may take (default 300 000; 0 means the agent's maximum).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_timeout_ms: Option<u64>,
    /// What to do with the worker afterwards.
    #[serde(default)]
    pub cleanup: Cleanup,
    /// Whether to announce back (default `true`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub announce: Option<bool>,
}

/// The answer to a spawn (SPN-1).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SpawnResponse {
    /// The worker's run.
    pub run_id: String,
    /// The worker session's key.
    pub child_session_key: String,
    /// `accepted`.
    pub status: SendStatus,
}

/// What a session handler is given (SES-9).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Delivery {
    /// The run.
    pub run_id: String,
    /// The receiving session's address.
    pub session: String,
    /// The step asked for.
    pub step: Step,
    /// The message.
    pub text: String,
    /// The instruction for the step (PP-2, ANN-1), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instruction: Option<String>,
    /// Where it comes from.
    pub provenance: Provenance,
    /// The turn, for `reply` steps.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn: Option<TurnRef>,
    /// Earlier messages, by `context_mode`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub context: Vec<ContextMessage>,
    /// Attachments.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub attachments: Vec<Attachment>,
    /// Metadata.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub metadata: BTreeMap<String, Value>,
    /// The token budget.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
    /// For `announce`: the original request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub original: Option<String>,
    /// For `announce`: the round-one reply.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub round_one: Option<String>,
    /// For `announce`: the last reply of the exchange.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last: Option<String>,
}

impl Delivery {
    /// The text a plain-text handler (a program, a chat API) is given: the provenance line, the instruction, then
    /// the message (POL-3).
    pub fn as_prompt(&self) -> String {
        let mut out = self.provenance.line();
        if let Some(i) = &self.instruction {
            out.push('\n');
            out.push_str(i);
        }
        out.push_str("\n\n");
        out.push_str(&self.text);
        out
    }
}

/// `GET /a2a/sessions/{key}/inbox` (SES-5).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Inbox {
    /// The deliveries waiting, oldest first.
    pub deliveries: Vec<Delivery>,
}

/// `POST /a2a/runs/{run_id}/reply` (SES-5): exactly one of `reply` and `error`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RunReply {
    /// The reply text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply: Option<String>,
    /// A failure, as readable text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// `sessions` in the `CapabilitiesDocument` (SES-2); it lives in [`crate::wire`], which every build has.
pub use crate::wire::SessionsInfo;

/// The body of a webhook post (ANN-5): one event of the agent's channel, as `GET /a2a/events` carries it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct WebhookEvent {
    /// The agent's DID (the post's `A2A-Sender-ID`).
    pub agent: String,
    /// The event id, as in the stream (also the `A2A-Event-ID` header).
    pub id: u64,
    /// `announce`, `run` or `spawn` (ANN-3).
    pub event: String,
    /// The address of the session the event is about.
    pub session: String,
    /// The event's data, as in the stream.
    pub data: Value,
    /// When it was published (RFC 3339).
    pub at: String,
}
