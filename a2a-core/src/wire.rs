//! The messages of the protocol (`spec/PROTOCOL.md` §5–§10) as serde types.
//!
//! Field names are the wire names. Request types reject unknown fields (a typo is an error the caller should see);
//! response types accept unknown fields so that a newer agent can add some without breaking older clients.
//! The JSON Schemas in `spec/schemas/` are generated from these types (see `a2a-core/tests/schemas.rs`).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::capability::{AuthRequirement, CapabilityDeclaration};
use crate::error::ErrorObject;

/// The state of an execution (`spec/PROTOCOL.md` §8.1).
///
/// `received -> accepted -> running -> succeeded | failed | timed_out | canceled`; an execution never moves backwards and
/// its first terminal state is final.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ExecutionStatus {
    /// EXECUTE stored the validated payload; nothing runs until CONFIRM.
    Received,
    /// CONFIRM queued the work.
    Accepted,
    /// A worker is running the handler.
    Running,
    /// The handler returned a result.
    Succeeded,
    /// The handler reported a failure (or its result broke the output schema).
    Failed,
    /// The deadline passed before the handler finished.
    TimedOut,
    /// The execution was canceled, or never confirmed within its confirm window.
    Canceled,
}

impl ExecutionStatus {
    /// Whether the state is final.
    pub fn is_terminal(self) -> bool {
        matches!(self, Self::Succeeded | Self::Failed | Self::TimedOut | Self::Canceled)
    }

    /// The position of the state in the order of the state machine; terminal states share the last rank.
    pub fn rank(self) -> u8 {
        match self {
            Self::Received => 0,
            Self::Accepted => 1,
            Self::Running => 2,
            _ => 3,
        }
    }

    /// Whether the state machine allows moving from `self` to `next`.
    pub fn can_move_to(self, next: ExecutionStatus) -> bool {
        match (self, next) {
            (s, _) if s.is_terminal() => false,
            // Cancel is allowed from every non-terminal state.
            (_, Self::Canceled) => true,
            (Self::Received, Self::Accepted) => true,
            (Self::Accepted, Self::Running) => true,
            // Timing out can happen while queued or running.
            (Self::Accepted | Self::Running, Self::TimedOut) => true,
            (Self::Running, Self::Succeeded | Self::Failed) => true,
            _ => false,
        }
    }

    /// The wire name, e.g. `timed_out`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Received => "received",
            Self::Accepted => "accepted",
            Self::Running => "running",
            Self::Succeeded => "succeeded",
            Self::Failed => "failed",
            Self::TimedOut => "timed_out",
            Self::Canceled => "canceled",
        }
    }
}

impl std::fmt::Display for ExecutionStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Who the agent is, in [`CapabilitiesDocument`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct AgentInfo {
    /// The agent's DID, the same as its `A2A-Sender-ID`.
    pub id: String,
    /// A display name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

/// Limits an agent announces so that clients can stay inside them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct AgentLimits {
    /// The largest request body accepted, in bytes.
    pub max_body_bytes: u64,
    /// The longest `wait_ms` honoured by RESULT (0 when long-poll is not offered).
    pub max_wait_ms: u64,
    /// The largest `timeout_ms` a negotiation may agree.
    pub max_timeout_ms: u64,
    /// How long an execution may stay `received` before it must be confirmed.
    pub confirm_window_ms: u64,
    /// Negotiations kept per sender (LIM-4): past it, a sender's new negotiation replaces its own closest to expiry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_negotiations_per_sender: Option<u64>,
    /// Executions per sender waiting for CONFIRM (LIM-5): past it EXECUTE answers `429 quota_exceeded`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_received_per_sender: Option<u64>,
    /// Replay nonces kept per signer, one per signed request for its lifetime plus 30 s (LIM-5): past it a signed
    /// request answers `429 quota_exceeded`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_nonces_per_sender: Option<u64>,
    /// Requests of one sender served at once (LIM-14): past it a sender's request waits in that sender's own queue.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_in_progress_per_sender: Option<u64>,
    /// Requests of one sender that may wait for its share (LIM-15): past it a request answers `429 quota_exceeded`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_queued_per_sender: Option<u64>,
    /// How long a request may wait for its sender's share, in milliseconds (LIM-15): past it the request answers
    /// `429 quota_exceeded`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sender_queue_timeout_ms: Option<u64>,
}

/// `GET /a2a/capabilities`: the full declarations (`spec/PROTOCOL.md` §5.3).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CapabilitiesDocument {
    /// The protocol version, `0.3`.
    pub a2a_version: String,
    /// The agent.
    pub agent: AgentInfo,
    /// Every capability the agent offers, in the order of `A2A-Capabilities`.
    pub capabilities: Vec<CapabilityDeclaration>,
    /// Optional protocol features the agent supports: `long_poll`, `cancel`, `idempotency`, `sessions`, `streaming`,
    /// `composite` (DISC-10).
    #[serde(default)]
    pub features: Vec<String>,
    /// The agent's limits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<AgentLimits>,
    /// How the session endpoints authenticate, when the agent lists `sessions` in `features` (SES-2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sessions: Option<SessionsInfo>,
}

// Here rather than behind the `sessions` feature: every build reads the capabilities document of an agent that serves
// sessions. (Its doc comment is the schema's description.)
/// `sessions` in the `CapabilitiesDocument` of an agent that serves §17 (SES-2).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SessionsInfo {
    /// The one authentication requirement of every session endpoint (§4.3).
    pub auth_requirement: AuthRequirement,
}

/// `POST /a2a/negotiate` request (`spec/PROTOCOL.md` §6).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NegotiateRequest {
    /// The capability to use.
    pub target_capability: String,
    /// The JSON Schema of the payloads the caller proposes to send; it must follow the schema rules (§6.2).
    pub proposed_schema: Value,
    /// The run time the caller asks for each execution, in milliseconds (the agent may lower it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    /// When true, the agent must accept the proposal unchanged or answer `tightening_refused`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub strict: bool,
}

/// What kind of change tightening made to a proposal (`spec/PROTOCOL.md` §6.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SchemaChangeKind {
    /// A property the capability needs was added.
    AddedProperty,
    /// A property was made required.
    AddedRequired,
    /// A property's type was narrowed (e.g. `["string","null"]` to `"string"`).
    NarrowedType,
    /// A constraint keyword was added or made stricter (minimum, maxLength, enum, format, pattern, ...).
    TightenedConstraint,
    /// `additionalProperties: false` was set.
    ClosedAdditionalProperties,
}

/// One change tightening made, so that the caller can see why the agreed schema differs from its proposal.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SchemaChange {
    /// JSON Pointer (RFC 6901) into the agreed schema.
    pub path: String,
    /// The kind of change.
    pub kind: SchemaChangeKind,
    /// A message for people.
    pub message: String,
}

/// `POST /a2a/negotiate` response.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct NegotiateResponse {
    /// The id to send as `A2A-Negotiation-ID` on EXECUTE.
    pub negotiation_id: String,
    /// The capability agreed on.
    pub target_capability: String,
    /// The schema every EXECUTE payload of this negotiation must match.
    pub agreed_schema: Value,
    /// Whether the agreed schema differs from the proposal.
    pub tightened: bool,
    /// The changes tightening made (empty when `tightened` is false).
    #[serde(default)]
    pub changes: Vec<SchemaChange>,
    /// The run time of each execution, in milliseconds.
    pub timeout_ms: u64,
    /// How long an execution may stay `received` before CONFIRM, in milliseconds.
    pub confirm_window_ms: u64,
    /// The capability's authentication requirement, which every EXECUTE must meet.
    pub auth_requirement: AuthRequirement,
    /// When the negotiation expires (RFC 3339, UTC).
    pub expires_at: String,
    /// Another binding the caller may use for this capability (BR-17), offered when the caller announced it in `A2A-Bridges`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bridge_to: Option<BridgeTo>,
}

/// A bridge to another binding, offered by NEGOTIATE (`spec/PROTOCOL.md` §20.7, BR-17).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct BridgeTo {
    /// The binding: `a2a1x` (Agent2Agent 1.x, JSON-RPC).
    pub binding: String,
    /// The version of the other protocol (`1.0`).
    pub protocol_version: String,
    /// Where the binding is served.
    pub url: String,
    /// The Agent Card's URL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_card: Option<String>,
    /// The skill to name (`message.metadata.skill`).
    pub skill: String,
}

/// `POST /a2a/execute` response (the body of the request is the business payload itself).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ExecuteResponse {
    /// The execution's id.
    pub execution_id: String,
    /// The negotiation it belongs to.
    pub negotiation_id: String,
    /// Always `received`: nothing runs until CONFIRM.
    pub status: ExecutionStatus,
    /// When the execution was received (RFC 3339, UTC).
    pub created_at: String,
    /// CONFIRM must arrive before this time (RFC 3339, UTC), or the execution is canceled with `confirm_window_elapsed`.
    pub confirm_by: String,
}

/// `POST /a2a/confirm` and `POST /a2a/cancel` request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExecutionRef {
    /// The execution.
    pub execution_id: String,
}

/// `POST /a2a/confirm` response.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ConfirmResponse {
    /// The execution.
    pub execution_id: String,
    /// `accepted` on the first CONFIRM; on a repeated CONFIRM, the execution's current status.
    pub status: ExecutionStatus,
    /// True when the execution had already been confirmed (nothing new was started).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub already_confirmed: bool,
}

/// `GET /a2a/result/{execution_id}` response, also the answer of `POST /a2a/cancel`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ResultResponse {
    /// The execution.
    pub execution_id: String,
    /// The negotiation it belongs to.
    pub negotiation_id: String,
    /// The capability it runs.
    pub capability: String,
    /// Its current status.
    pub status: ExecutionStatus,
    /// When it was received (RFC 3339, UTC).
    pub created_at: String,
    /// When its status last changed (RFC 3339, UTC).
    pub updated_at: String,
    /// The time by which it must finish, set when it is accepted (RFC 3339, UTC).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline: Option<String>,
    /// The handler's result; present exactly when `status` is `succeeded`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<Value>,
    /// What went wrong; present exactly when `status` is `failed`, `timed_out` or `canceled`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorObject>,
}

/// `POST /a2a/fallback` request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FallbackRequest {
    /// The capability the caller wanted.
    pub target_capability: String,
    /// Why the caller is asking (free text, for logs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// How a fallback option relates to the capability asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum FallbackRelation {
    /// The same capability, offered by another agent.
    Same,
    /// A degraded capability that declares `fallback_for` the one asked for.
    Degraded,
    /// A sub-capability of the one asked for.
    SubCapability,
}

/// Where a fallback option was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum FallbackSource {
    /// This agent's own declarations.
    Local,
    /// The capability registry (other agents).
    Registry,
}

/// One alternative to a capability the agent cannot serve (§11, FB-1).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct FallbackOption {
    /// The capability to use instead.
    pub capability: String,
    /// The agent offering it (its DID); absent means the agent that answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// The base URL of that agent's A2A endpoints (e.g. `https://b.example.com/a2a`), when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
    /// Estimated cost of one execution.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub estimated_cost: Option<f64>,
    /// Estimated latency of one execution, in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub estimated_latency_ms: Option<u64>,
    /// The option's authentication requirement.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth_requirement: Option<AuthRequirement>,
    /// The option's description.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// How it relates to the capability asked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub relation: Option<FallbackRelation>,
    /// Where it was found.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<FallbackSource>,
}

/// `POST /a2a/fallback` response.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct FallbackResponse {
    /// The capability asked for.
    pub requested_capability: String,
    /// The alternatives, best first (possibly empty).
    pub fallback_options: Vec<FallbackOption>,
}

/// Formats a time as RFC 3339 in UTC with millisecond precision, the form every timestamp of the protocol uses.
pub fn format_timestamp(t: std::time::SystemTime) -> String {
    let dt = time::OffsetDateTime::from(t);
    let ms = dt.millisecond();
    let dt = dt.replace_nanosecond(u32::from(ms) * 1_000_000).unwrap_or(dt);
    dt.format(&time::format_description::well_known::Rfc3339).unwrap_or_else(|_| "1970-01-01T00:00:00Z".to_owned())
}

/// Parses an RFC 3339 timestamp.
pub fn parse_timestamp(s: &str) -> Option<std::time::SystemTime> {
    time::OffsetDateTime::parse(s, &time::format_description::well_known::Rfc3339).ok().map(Into::into)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_machine_never_moves_backwards_or_out_of_terminal() {
        use ExecutionStatus::*;
        let all = [Received, Accepted, Running, Succeeded, Failed, TimedOut, Canceled];
        for a in all {
            for b in all {
                if a.can_move_to(b) {
                    assert!(b.rank() > a.rank(), "{a} -> {b} moves backwards");
                    assert!(!a.is_terminal());
                }
            }
        }
        assert!(Received.can_move_to(Accepted));
        assert!(!Received.can_move_to(Running));
        assert!(!Succeeded.can_move_to(Failed));
    }

    #[test]
    fn timestamps_round_trip() {
        let now = std::time::SystemTime::now();
        let s = format_timestamp(now);
        assert!(s.ends_with('Z'), "{s}");
        let back = parse_timestamp(&s).expect("parses");
        let diff = now.duration_since(back).unwrap_or_default();
        assert!(diff.as_millis() < 2);
    }
}
