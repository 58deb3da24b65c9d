//! The report of a run: what was checked, against which requirement, what was sent, expected and observed.
//!
//! The JSON form (`--format json`) is described by `spec/schemas/conformance_report.schema.json`, generated from these
//! types (`cargo test -p a2a-conformance --test conformance`, refresh with `UPDATE_SCHEMAS=1`).

use serde::{Deserialize, Serialize};

/// The strength of a requirement (RFC 2119, as `spec/PROTOCOL.md` writes it). `MUST NOT` and `SHOULD NOT` are the
/// same strengths as `MUST` and `SHOULD`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "UPPERCASE")]
pub enum Level {
    /// An absolute requirement: a failure makes the agent non-conformant (and the exit status non-zero).
    Must,
    /// A recommendation: a failure is reported but does not make the agent non-conformant.
    Should,
    /// An option: checked only for what the agent chose to do (doing it wrongly is a failure).
    May,
}

impl Level {
    /// `MUST`, `SHOULD` or `MAY`.
    pub fn as_str(self) -> &'static str {
        match self {
            Level::Must => "MUST",
            Level::Should => "SHOULD",
            Level::May => "MAY",
        }
    }
}

impl std::fmt::Display for Level {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The outcome of one check.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Every expectation held.
    Pass,
    /// At least one expectation did not hold: `message` and the failed assertion say which.
    Fail,
    /// Not applicable to this agent (it does not advertise the capability or feature, or the run lacks what the
    /// check needs, such as a caller identity); `message` says why.
    Skip,
    /// A step the check depends on did not behave (another check reports that failure); the check could not be
    /// carried out. `message` names the step.
    Blocked,
}

impl Status {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Pass => "pass",
            Status::Fail => "fail",
            Status::Skip => "skip",
            Status::Blocked => "blocked",
        }
    }
}

/// A request the suite sent, as sent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SentRequest {
    /// The method, e.g. `POST`.
    pub method: String,
    /// The full URL.
    pub url: String,
    /// Every header, in the order sent (names in lower case).
    pub headers: Vec<(String, String)>,
    /// The body as text (UTF-8, lossy), cut at 4 KiB.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<String>,
    /// The body's length in bytes.
    pub body_bytes: usize,
    /// Whether `body` was cut.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub body_truncated: bool,
}

/// The response the suite received.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ReceivedResponse {
    /// The HTTP status code.
    pub status: u16,
    /// The HTTP version, e.g. `HTTP/1.1`.
    pub version: String,
    /// Every header (names in lower case).
    pub headers: Vec<(String, String)>,
    /// The body as text (UTF-8, lossy), cut at 4 KiB.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<String>,
    /// The body's length in bytes.
    pub body_bytes: usize,
    /// Whether `body` was cut.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub body_truncated: bool,
    /// Time from sending the request to reading the whole response, in milliseconds.
    pub elapsed_ms: u64,
}

/// One expectation and what was observed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Assertion {
    /// What the specification demands, e.g. `status 400 and error.code "version_required"`.
    pub expected: String,
    /// What the agent did.
    pub observed: String,
    /// Whether it held.
    pub ok: bool,
}

/// One step of a check: usually an exchange (request and response) and the expectations about it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Step {
    /// What the step does, e.g. `NEGOTIATE without A2A-Version`.
    pub title: String,
    /// True for a preparatory step (e.g. the NEGOTIATE before an EXECUTE check): its failure blocks the check instead
    /// of failing it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub setup: bool,
    /// The request sent, when the step sent one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request: Option<SentRequest>,
    /// The response received.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response: Option<ReceivedResponse>,
    /// Why no response was received (connection refused, reset, timeout).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transport_error: Option<String>,
    /// The expectations checked on this step.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub assertions: Vec<Assertion>,
}

/// The result of one check.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CheckReport {
    /// The check's stable id, e.g. `discover/status-204`.
    pub id: String,
    /// The requirement ids of `spec/PROTOCOL.md` the check verifies, e.g. `["DISC-1"]`.
    pub requirements: Vec<String>,
    /// The level of the check (the strongest of its requirements).
    pub level: Level,
    /// What the check verifies.
    pub title: String,
    /// When the check applies, e.g. `always` or `the agent lists "cancel" in features`.
    pub applies: String,
    /// The outcome.
    pub status: Status,
    /// For `fail`: the first expectation that did not hold; for `skip` and `blocked`: why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// The capabilities of the agent the check drove, and why each was chosen (empty for checks that drive none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub capabilities: Vec<CapabilityUse>,
    /// Every step, in order.
    pub steps: Vec<Step>,
    /// How long the check took, in milliseconds.
    pub duration_ms: u64,
}

/// A capability a check drove.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CapabilityUse {
    /// The capability's name.
    pub name: String,
    /// Why the suite drove this one: named by an option (`--capability`, `--slow-capability`), or how the suite
    /// chose it from the agent's declarations.
    pub why: String,
}

/// Counts of outcomes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Counts {
    /// Checks that passed.
    pub pass: usize,
    /// Checks that failed.
    pub fail: usize,
    /// Checks that did not apply.
    pub skip: usize,
    /// Checks that could not be carried out.
    pub blocked: usize,
}

impl Counts {
    /// Adds one outcome.
    pub fn add(&mut self, s: Status) {
        match s {
            Status::Pass => self.pass += 1,
            Status::Fail => self.fail += 1,
            Status::Skip => self.skip += 1,
            Status::Blocked => self.blocked += 1,
        }
    }

    /// All checks counted.
    pub fn total(&self) -> usize {
        self.pass + self.fail + self.skip + self.blocked
    }
}

/// Outcome counts, overall and per level.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Summary {
    /// Every check run.
    pub all: Counts,
    /// `MUST` checks.
    #[serde(rename = "MUST")]
    pub must: Counts,
    /// `SHOULD` checks.
    #[serde(rename = "SHOULD")]
    pub should: Counts,
    /// `MAY` checks.
    #[serde(rename = "MAY")]
    pub may: Counts,
}

/// The compliance level the agent reached in this run (see `conformance/README.md`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Compliance {
    /// At least one `MUST` check failed: the agent does not conform.
    None,
    /// Every `MUST` check that applied passed.
    Must,
    /// Every `MUST` and `SHOULD` check that applied passed.
    Should,
    /// Every check that applied passed, `MAY` included (the optional behaviour the agent chose is right).
    Full,
}

/// Who ran what against which agent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RunInfo {
    /// `a2a-conformance`.
    pub suite: String,
    /// The suite's version.
    pub suite_version: String,
    /// The protocol version checked, `0.3`.
    pub protocol_version: String,
    /// The URL given with `--target`.
    pub target: String,
    /// The A2A endpoint derived from it (TR-2: `/a2a` appended when missing).
    pub endpoint: String,
    /// The agent's DID, from DISCOVER (`A2A-Sender-ID`), when it answered one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_did: Option<String>,
    /// The capabilities the agent advertised (`A2A-Capabilities`, else the capabilities document).
    pub capabilities: Vec<String>,
    /// The optional features the agent listed.
    pub features: Vec<String>,
    /// The highest level checked: `MUST` (only MUST checks), `SHOULD` or `MAY` (every check).
    pub level: Level,
    /// The `--only` pattern, when given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub only: Option<String>,
    /// The DID the suite signed as, when it had an identity (`--identity`/`--did`, or `--serve-did`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub caller_did: Option<String>,
    /// When the run started (RFC 3339, UTC).
    pub started_at: String,
    /// How long the run took, in milliseconds.
    pub duration_ms: u64,
}

/// The whole report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Report {
    /// What was run.
    pub run: RunInfo,
    /// Counts of outcomes.
    pub summary: Summary,
    /// The level reached.
    pub compliance: Compliance,
    /// Every check run, in order.
    pub checks: Vec<CheckReport>,
}

impl Report {
    /// Builds the summary and compliance level from the checks.
    pub fn new(run: RunInfo, checks: Vec<CheckReport>) -> Report {
        let mut summary = Summary::default();
        for c in &checks {
            summary.all.add(c.status);
            match c.level {
                Level::Must => summary.must.add(c.status),
                Level::Should => summary.should.add(c.status),
                Level::May => summary.may.add(c.status),
            }
        }
        let compliance = if summary.must.fail > 0 {
            Compliance::None
        } else if summary.should.fail > 0 || run.level == Level::Must {
            Compliance::Must
        } else if summary.may.fail > 0 || run.level == Level::Should {
            Compliance::Should
        } else {
            Compliance::Full
        };
        Report { run, summary, compliance, checks }
    }

    /// Whether a `MUST` check failed (the run's exit status is then 1).
    pub fn must_failed(&self) -> bool {
        self.summary.must.fail > 0
    }

    /// The ids of the checks with this status.
    pub fn ids_with(&self, status: Status) -> Vec<&str> {
        self.checks.iter().filter(|c| c.status == status).map(|c| c.id.as_str()).collect()
    }
}
