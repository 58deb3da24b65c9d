//! Composite capabilities (`spec/PROTOCOL.md` §19): a capability whose work is a pipeline of atomic capabilities of
//! this agent or of other agents, planned and run by this agent as one execution for the caller.
//!
//! - [`Pipeline`] is the declaration (the `composite` member of the capability's declaration, CMP-1 to CMP-6),
//!   checked when the agent is built ([`plan::validate`]);
//! - [`plan`] checks that the schemas chain: every step's input schema is satisfied by what its mapping takes from
//!   the composite's input and the earlier steps' outputs (CMP-7), at build time for what is known locally and at
//!   NEGOTIATE with the remote steps' declarations (CMP-8);
//! - [`run`] runs the pipeline when the composite's execution is confirmed, one sub-execution per step through a
//!   [`run::StepRunner`]: the local runner calls this agent's own handlers, the remote runner performs the
//!   handshake with the agent that owns the step (CMP-10 to CMP-16).
//!
//! ```
//! use a2a_server::compose::Pipeline;
//! use serde_json::json;
//!
//! let pipeline: Pipeline = serde_json::from_value(json!({
//!     "steps": [
//!         {"id": "summarize", "capability": "generate_brief_summary", "input": {"text": "/input/text"}},
//!         {"id": "file", "capability": "submit_report",
//!          "input": {"title": "/steps/summarize/summary", "timestamp": "/input/timestamp"}}
//!     ]
//! })).unwrap();
//! assert_eq!(pipeline.steps.len(), 2);
//! ```

use std::collections::BTreeMap;

use a2a_core::error::ErrorObject;
use serde::{Deserialize, Serialize};
use serde_json::Value;

pub mod plan;
pub mod run;

pub use plan::{ChainError, DeclarationError};
pub use run::{Composite, LocalRunner, RemoteRunner, StepRunner};

/// The most steps a pipeline may have (CMP-2).
pub const MAX_STEPS: usize = 32;

/// The pipeline of a composite capability: the `composite` member of its declaration (CMP-1).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Pipeline {
    /// The steps, run in order (CMP-2).
    pub steps: Vec<Step>,
    /// How the composite's result is built from its input and the steps' outputs; absent: the last step's output
    /// (CMP-5).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<Mapping>,
}

/// One step of a pipeline (CMP-2, CMP-3).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Step {
    /// The step's id, unique in the pipeline, `^[a-z][a-z0-9_]{0,63}$`; mappings name its output
    /// `/steps/<id>`.
    pub id: String,
    /// The atomic capability the step runs.
    pub capability: String,
    /// The agent that owns the capability: its A2A endpoint URL or its did:web DID; absent: this agent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// How the step's input is built; absent: the previous step's output (the composite's input for the first
    /// step), whole (CMP-4).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input: Option<Mapping>,
    /// The step's own time limit, in milliseconds (CMP-13); absent: what is left of the composite's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    /// What runs instead when the step fails or times out (CMP-12).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fallback: Option<Fallback>,
}

/// The stand-in of a step that failed (CMP-12).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Fallback {
    /// The atomic capability to run instead.
    pub capability: String,
    /// Its agent (as [`Step::agent`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// Its input (as [`Step::input`]); absent: the same input as the step's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input: Option<Mapping>,
}

/// An input mapping: each member of the object to build, from where it is taken (CMP-4).
pub type Mapping = BTreeMap<String, Source>;

/// Where one member of a mapped object comes from (CMP-4).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Source {
    /// A JSON Pointer (RFC 6901) into the pipeline document `{"input": ..., "steps": {"<id>": <output>, ...}}`,
    /// starting with `/input` or `/steps/<id>`.
    Pointer(String),
    /// A literal value.
    Const(ConstSource),
}

/// A literal value of a mapping: `{"const": <value>}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConstSource {
    /// The value.
    #[serde(rename = "const")]
    pub value: Value,
}

/// The status of one step in a composite's report (CMP-11).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StepStatus {
    /// The step returned an output.
    Succeeded,
    /// The step failed.
    Failed,
    /// The step did not finish within its time limit.
    TimedOut,
    /// The step was canceled (the composite was canceled or timed out).
    Canceled,
    /// The step did not run because an earlier step failed.
    Skipped,
}

/// What happened to one step: an element of `steps` in a composite's result or error details (CMP-11).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepReport {
    /// The step's id.
    pub id: String,
    /// The capability that ran (the fallback's when [`StepReport::fallback_used`]).
    pub capability: String,
    /// The agent that ran it, when not this agent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// The outcome.
    pub status: StepStatus,
    /// The output, when succeeded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<Value>,
    /// The failure, when failed, timed out or canceled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorObject>,
    /// The sub-execution at the step's agent, for a remote step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub execution_id: Option<String>,
    /// Whether the step's fallback ran (the step itself failed with [`StepReport::primary_error`]).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub fallback_used: bool,
    /// The failure of the step itself, when its fallback ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub primary_error: Option<ErrorObject>,
    /// How long the step took, in milliseconds (0 when skipped).
    pub duration_ms: u64,
}
