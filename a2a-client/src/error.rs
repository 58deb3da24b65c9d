//! The client's typed errors: every one says which step failed, what happened and what to try
//! (`spec/PROTOCOL.md` CLI-4). Nothing in the client panics on any input from the network.

use std::fmt;
use std::time::Duration;

use a2a_core::error::{A2aError, ErrorCode, ErrorObject};
use a2a_core::wire::{ExecutionStatus, FallbackOption};

/// A step of the protocol, as the client runs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Step {
    /// `OPTIONS /a2a`.
    Discover,
    /// `GET /a2a/capabilities`.
    Capabilities,
    /// `POST /a2a/negotiate`.
    Negotiate,
    /// `POST /a2a/execute`.
    Execute,
    /// `POST /a2a/confirm`.
    Confirm,
    /// `GET /a2a/result/{execution_id}`.
    Result,
    /// `POST /a2a/cancel`.
    Cancel,
    /// `POST /a2a/fallback`.
    Fallback,
    /// Resolving an agent's DID to verify a signed response.
    ResolveDid,
    /// `POST /a2a/sessions` (§17.2).
    SessionRegister,
    /// `GET /a2a/sessions` (§17.2).
    SessionList,
    /// `GET /a2a/sessions/{key}`.
    SessionRead,
    /// `DELETE /a2a/sessions/{key}`.
    SessionEnd,
    /// `POST /a2a/sessions/send` (§17.3).
    SessionSend,
    /// `GET /a2a/runs/{run_id}` (SND-10).
    RunRead,
    /// `GET /a2a/sessions/{key}/history` (§17.7).
    SessionHistory,
    /// `POST /a2a/sessions/spawn` (§17.8).
    SessionSpawn,
    /// `GET /a2a/sessions/{key}/inbox` (SES-5).
    SessionInbox,
    /// `POST /a2a/runs/{run_id}/reply` (SES-5).
    RunReply,
    /// `GET /a2a/events` (§17.6).
    Events,
}

impl Step {
    /// The step's name in messages: `DISCOVER`, `NEGOTIATE`, ...
    pub fn as_str(self) -> &'static str {
        match self {
            Step::Discover => "DISCOVER",
            Step::Capabilities => "CAPABILITIES",
            Step::Negotiate => "NEGOTIATE",
            Step::Execute => "EXECUTE",
            Step::Confirm => "CONFIRM",
            Step::Result => "RESULT",
            Step::Cancel => "CANCEL",
            Step::Fallback => "FALLBACK",
            Step::ResolveDid => "DID resolution",
            Step::SessionRegister => "SESSION REGISTER",
            Step::SessionList => "SESSION LIST",
            Step::SessionRead => "SESSION READ",
            Step::SessionEnd => "SESSION END",
            Step::SessionSend => "SESSION SEND",
            Step::RunRead => "RUN",
            Step::SessionHistory => "HISTORY",
            Step::SessionSpawn => "SPAWN",
            Step::SessionInbox => "INBOX",
            Step::RunReply => "RUN REPLY",
            Step::Events => "EVENTS",
        }
    }

    /// Whether the step may be repeated without changing anything at the agent (CLI-3). EXECUTE is safe only with
    /// an `Idempotency-Key` at an agent that lists `idempotency`, which the client decides per request.
    /// Of the session steps (§17), a send, a spawn, a reply and the end of a session each change the agent's state
    /// once and are never repeated by the client.
    pub fn is_idempotent(self) -> bool {
        !matches!(self, Step::Execute | Step::SessionSend | Step::SessionSpawn | Step::RunReply | Step::SessionEnd)
    }
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Everything that can go wrong in the client.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum ClientError {
    /// An argument given to the client is invalid (a URL, a DID, a key, a payload).
    #[error("{what}")]
    InvalidInput {
        /// What is wrong.
        what: String,
    },
    /// The agent could not be reached: the connection was refused, the name does not resolve, TLS failed.
    #[error("{step}: cannot reach {url}: {reason}")]
    Unreachable {
        /// The step.
        step: Step,
        /// The URL.
        url: String,
        /// The transport's explanation.
        reason: String,
    },
    /// One step took longer than its timeout.
    #[error("{step}: {url} did not answer within {after:?}")]
    Timeout {
        /// The step.
        step: Step,
        /// The URL.
        url: String,
        /// The timeout.
        after: Duration,
    },
    /// The call's overall deadline passed.
    #[error("{step}: the deadline of {deadline:?} passed{}", execution_note(execution_id.as_deref(), *last_status))]
    DeadlineExceeded {
        /// The step in progress.
        step: Step,
        /// The deadline.
        deadline: Duration,
        /// The execution, when it was already created (it may still finish: read it later).
        execution_id: Option<String>,
        /// Its last status seen.
        last_status: Option<ExecutionStatus>,
    },
    /// The agent answered with a protocol error (`{"error": {code, message, details}}`).
    #[error("{step}: the agent answered {status} {}: {}", error.code, error.message)]
    Agent {
        /// The step.
        step: Step,
        /// The HTTP status.
        status: u16,
        /// The error, with its details and fallback options.
        error: Box<A2aError>,
    },
    /// The answer is not a valid A2A response (not JSON, a missing member, a missing `A2A-Version`).
    #[error("{step}: {url} did not answer as an A2A 0.3 agent: {reason}")]
    Protocol {
        /// The step.
        step: Step,
        /// The URL.
        url: String,
        /// What is wrong with the answer.
        reason: String,
    },
    /// The agent speaks another protocol version (CLI-5).
    #[error("{url} speaks A2A version {version}; this client speaks {}", a2a_core::PROTOCOL_VERSION)]
    UnsupportedVersion {
        /// The agent's endpoint.
        url: String,
        /// The version it announced.
        version: String,
    },
    /// The agent does not list the capability in DISCOVER (CAP-16).
    #[error("{agent} does not offer {capability:?} (it offers {})", list(offered))]
    CapabilityNotOffered {
        /// The capability asked for.
        capability: String,
        /// The agent's endpoint.
        agent: String,
        /// What it offers.
        offered: Vec<String>,
        /// What it suggests instead (FALLBACK, §11).
        fallback_options: Vec<FallbackOption>,
    },
    /// No agent could serve the capability and the fallback policy allowed nothing else (FB-4).
    #[error("no_matching_capability: no agent could serve {capability:?} ({cause}){}", tried_note(tried))]
    NoMatchingCapability {
        /// The capability asked for.
        capability: String,
        /// Why the first agent could not serve it.
        cause: Box<ClientError>,
        /// Every `endpoint capability` tried, in order.
        tried: Vec<String>,
        /// Every option offered along the way.
        fallback_options: Vec<FallbackOption>,
    },
    /// The execution ended without a result: `failed`, `timed_out` or `canceled`.
    #[error("execution {execution_id} {status}: {}: {}", error.code, error.message)]
    ExecutionFailed {
        /// The execution.
        execution_id: String,
        /// Its terminal status.
        status: ExecutionStatus,
        /// Why.
        error: Box<ErrorObject>,
    },
    /// A signed response did not verify, or an unsigned one arrived where signatures are required.
    #[error("{step}: the response's signature is not acceptable: {code}: {reason}")]
    ResponseNotVerified {
        /// The step.
        step: Step,
        /// The protocol code of the failure (`signature_invalid`, `did_resolution_failed`, ...).
        code: ErrorCode,
        /// What failed.
        reason: String,
    },
    /// A message is over one of its bounds, found before anything was sent (SND-2: attachments, the body).
    #[error("{what} is {actual} bytes, over the limit of {limit} bytes")]
    TooLarge {
        /// What is too large (`attachment "payslip.png"`, `the send request body`).
        what: String,
        /// The limit, in bytes.
        limit: u64,
        /// The size found, in bytes.
        actual: u64,
    },
    /// The client could not sign a request.
    #[error("cannot sign the {step} request: {reason}")]
    Signing {
        /// The step.
        step: Step,
        /// Why.
        reason: String,
    },
}

fn list(names: &[String]) -> String {
    if names.is_empty() { "nothing".to_owned() } else { names.join(", ") }
}

fn execution_note(id: Option<&str>, status: Option<ExecutionStatus>) -> String {
    match (id, status) {
        (Some(id), Some(s)) => format!(" while execution {id} was {s}"),
        (Some(id), None) => format!(" while execution {id} was in progress"),
        _ => String::new(),
    }
}

fn tried_note(tried: &[String]) -> String {
    if tried.len() <= 1 { String::new() } else { format!("; tried {}", tried.join(", then ")) }
}

impl ClientError {
    pub(crate) fn invalid(what: impl Into<String>) -> Self {
        ClientError::InvalidInput { what: what.into() }
    }

    /// A stable, machine-readable code: the agent's error code for [`ClientError::Agent`] (`payload_invalid`, ...),
    /// the execution's (`handler_failed`, `timed_out`, ...) for [`ClientError::ExecutionFailed`], otherwise one of
    /// `invalid_input`, `unreachable`, `timeout`, `deadline_exceeded`, `protocol_error`, `unsupported_version`,
    /// `no_matching_capability`, the signature code, `signing_failed`.
    pub fn code(&self) -> &str {
        match self {
            ClientError::InvalidInput { .. } => "invalid_input",
            ClientError::Unreachable { .. } => "unreachable",
            ClientError::Timeout { .. } => "timeout",
            ClientError::DeadlineExceeded { .. } => "deadline_exceeded",
            ClientError::Agent { error, .. } => error.code.as_str(),
            ClientError::Protocol { .. } => "protocol_error",
            ClientError::UnsupportedVersion { .. } => "unsupported_version",
            ClientError::CapabilityNotOffered { .. } | ClientError::NoMatchingCapability { .. } => {
                "no_matching_capability"
            }
            ClientError::ExecutionFailed { error, .. } => error.code.as_str(),
            ClientError::ResponseNotVerified { code, .. } => code.as_str(),
            ClientError::Signing { .. } => "signing_failed",
            ClientError::TooLarge { .. } => "payload_too_large",
        }
    }

    /// The step that failed, when there is one.
    pub fn step(&self) -> Option<Step> {
        match self {
            ClientError::Unreachable { step, .. }
            | ClientError::Timeout { step, .. }
            | ClientError::DeadlineExceeded { step, .. }
            | ClientError::Agent { step, .. }
            | ClientError::Protocol { step, .. }
            | ClientError::ResponseNotVerified { step, .. }
            | ClientError::Signing { step, .. } => Some(*step),
            ClientError::UnsupportedVersion { .. } | ClientError::CapabilityNotOffered { .. } => Some(Step::Discover),
            ClientError::ExecutionFailed { .. } => Some(Step::Result),
            ClientError::NoMatchingCapability { cause, .. } => cause.step(),
            ClientError::InvalidInput { .. } | ClientError::TooLarge { .. } => None,
        }
    }

    /// The agent's protocol error, for [`ClientError::Agent`].
    pub fn agent_error(&self) -> Option<&A2aError> {
        match self {
            ClientError::Agent { error, .. } => Some(error),
            ClientError::NoMatchingCapability { cause, .. } => cause.agent_error(),
            _ => None,
        }
    }

    /// The fallback options the agent offered with this error (§11), possibly none.
    pub fn fallback_options(&self) -> &[FallbackOption] {
        match self {
            ClientError::Agent { error, .. } => error.fallback_options.as_deref().unwrap_or(&[]),
            ClientError::CapabilityNotOffered { fallback_options, .. }
            | ClientError::NoMatchingCapability { fallback_options, .. } => fallback_options,
            _ => &[],
        }
    }

    /// Whether the failure is a capability mismatch that FALLBACK can answer: `no_matching_capability`,
    /// `region_restricted`, `schema_incompatible` (FB-3), or a capability missing from DISCOVER.
    pub fn is_capability_mismatch(&self) -> bool {
        match self {
            ClientError::CapabilityNotOffered { .. } => true,
            ClientError::Agent { error, .. } => {
                [ErrorCode::NO_MATCHING_CAPABILITY, ErrorCode::REGION_RESTRICTED, ErrorCode::SCHEMA_INCOMPATIBLE]
                    .contains(&error.code)
            }
            _ => false,
        }
    }

    /// Whether a later attempt of the same step may succeed without any change (the agent was down, slow, overloaded).
    pub fn is_transient(&self) -> bool {
        match self {
            ClientError::Unreachable { .. } | ClientError::Timeout { .. } => true,
            ClientError::Agent { status, error, .. } => {
                matches!(status, 429 | 502 | 503 | 504)
                    || [ErrorCode::OVERLOADED, ErrorCode::RATE_LIMITED, ErrorCode::STORE_UNAVAILABLE]
                        .contains(&error.code)
            }
            _ => false,
        }
    }

    /// What to try next, for people.
    pub fn hint(&self) -> String {
        match self {
            ClientError::InvalidInput { .. } => "check the argument and try again".into(),
            ClientError::Unreachable { url, .. } => format!(
                "check that the agent is running and that {url} is its A2A endpoint (an http(s) URL ending in /a2a); \
                 for a certificate error, pass the CA that signed the agent's certificate"
            ),
            ClientError::Timeout { .. } => {
                "the agent is slow or the network is stalled: raise the step timeout, or try again later".into()
            }
            ClientError::DeadlineExceeded { execution_id: Some(id), .. } => format!(
                "the work may still finish: read it later with `a2a result URL {id} --wait` (SDK: Client::result), \
                 or give the call a longer deadline"
            ),
            ClientError::DeadlineExceeded { .. } => "give the call a longer deadline, or try again later".into(),
            ClientError::Agent { error, .. } => agent_hint(error),
            ClientError::Protocol { .. } => {
                "check the URL: it must be the agent's A2A endpoint (e.g. https://agent.example.com/a2a)".into()
            }
            ClientError::UnsupportedVersion { .. } => format!(
                "use a client for that version, or reach the agent through a gateway that translates to {}",
                a2a_core::PROTOCOL_VERSION
            ),
            ClientError::CapabilityNotOffered { fallback_options, .. }
            | ClientError::NoMatchingCapability { fallback_options, .. } => {
                if fallback_options.is_empty() {
                    "no alternative was offered: look for another agent that declares the capability".into()
                } else {
                    format!(
                        "the agent offered {}: choose one (CLI: --fallback accept-degraded or try-others; SDK: FallbackPolicy)",
                        describe_options(fallback_options)
                    )
                }
            }
            ClientError::ExecutionFailed { status: ExecutionStatus::TimedOut, .. } => {
                "the work did not finish within the negotiated timeout_ms: negotiate a longer timeout_ms".into()
            }
            ClientError::ExecutionFailed { .. } => {
                "the agent ran the work and it failed: see the message; fix the input or contact the agent's operator"
                    .into()
            }
            ClientError::ResponseNotVerified { code, .. } if *code == ErrorCode::DID_RESOLUTION_FAILED => {
                "the agent's DID document could not be fetched: check its did:web host, or allow loopback/private \
                 addresses for local development"
                    .into()
            }
            ClientError::ResponseNotVerified { .. } => {
                "the response may have been tampered with or comes from another agent: do not trust it".into()
            }
            ClientError::Signing { .. } => "check the client's DID, key id and P-256 key".into(),
            ClientError::TooLarge { limit, .. } => format!(
                "make it smaller than {limit} bytes: send a smaller file, fewer attachments, or a link to the data"
            ),
        }
    }
}

fn describe_options(options: &[FallbackOption]) -> String {
    let parts: Vec<String> = options
        .iter()
        .take(5)
        .map(|o| {
            let rel = o.relation.map_or("", |r| match r {
                a2a_core::wire::FallbackRelation::Same => " (same, another agent)",
                a2a_core::wire::FallbackRelation::Degraded => " (degraded)",
                a2a_core::wire::FallbackRelation::SubCapability => " (sub-capability)",
            });
            match &o.agent {
                Some(a) => format!("{}{rel} at {a}", o.capability),
                None => format!("{}{rel}", o.capability),
            }
        })
        .collect();
    parts.join(", ")
}

fn agent_hint(error: &A2aError) -> String {
    let c = &error.code;
    let s = |x: &str| x.to_owned();
    if *c == ErrorCode::PAYLOAD_INVALID {
        s("the payload does not match the agreed schema: fix the members named in details.errors")
    } else if *c == ErrorCode::SCHEMA_RULE_VIOLATION {
        s("fix the proposed schema as details.violations says (`a2a schema fix FILE` converts `nullable`)")
    } else if *c == ErrorCode::SCHEMA_INCOMPATIBLE {
        s("the proposal conflicts with what the capability requires (details.conflicts): propose a compatible schema")
    } else if *c == ErrorCode::TIGHTENING_REFUSED {
        s("the agent needs a stricter schema: negotiate again with details.counter_proposal, or without strict")
    } else if *c == ErrorCode::AUTH_REQUIRED || *c == ErrorCode::AUTH_INVALID {
        s("the capability needs credentials: give an API key (--api-key) or a bearer token (--bearer) for this agent")
    } else if *c == ErrorCode::SIGNATURE_REQUIRED || *c == ErrorCode::DID_AUTH_REQUIRED {
        s("the agent wants signed requests: give the client a DID and its P-256 key (--did, --key)")
    } else if c.as_str().starts_with("signature_")
        || *c == ErrorCode::UNKNOWN_KEY
        || *c == ErrorCode::DID_RESOLUTION_FAILED
    {
        s(
            "the agent could not verify the client's signature: check that the DID document at the client's did:web URL lists its key, and the clock",
        )
    } else if *c == ErrorCode::REGION_RESTRICTED {
        s(
            "the capability is restricted to details.allowed_regions: send an allowed region (--region), or use a fallback option",
        )
    } else if *c == ErrorCode::NO_MATCHING_CAPABILITY {
        s("the agent does not offer this capability: see the fallback options")
    } else if *c == ErrorCode::UNKNOWN_EXECUTION {
        s("the execution is unknown, expired or was created by another sender: check the id and the sender DID")
    } else if *c == ErrorCode::UNKNOWN_NEGOTIATION {
        s("the negotiation expired or is unknown: negotiate again")
    } else if *c == ErrorCode::OVERLOADED || *c == ErrorCode::RATE_LIMITED {
        s("the agent is busy: try again after the Retry-After delay")
    } else if *c == ErrorCode::UNKNOWN_SESSION {
        s("no such session is visible to you: list them with `a2a session list URL` (stale or ended ones are hidden)")
    } else if *c == ErrorCode::UNKNOWN_RUN {
        s("the run is unknown, expired or not yours: check the run id and the sender DID")
    } else if *c == ErrorCode::SESSION_CONFLICT {
        s("another owner holds this session key, or it names a hosted session: register another key")
    } else if *c == ErrorCode::AMBIGUOUS_LABEL {
        s("the label names several sessions: send to one of details.candidates by its session key")
    } else if *c == ErrorCode::WAIT_CYCLE {
        s(
            "the target is already waiting on this chain (details.cycle): send without waiting (--wait 0) or reply instead",
        )
    } else if *c == ErrorCode::HOP_LIMIT {
        s("the chain of sends is too long: answer the delivery without sending on")
    } else if *c == ErrorCode::SPAWN_LIMIT {
        s("a spawn limit is reached (details.limit): wait for running workers to finish")
    } else if *c == ErrorCode::FORBIDDEN {
        s("the agent's session policy refuses this: ask its operator to allow your session address")
    } else if *c == ErrorCode::PAYLOAD_TOO_LARGE {
        s("the message is over the agent's limit (details.limit_bytes): send less")
    } else if *c == ErrorCode::UNSUPPORTED_VERSION {
        s("the agent speaks another protocol version")
    } else {
        format!("see the agent's message (error code {c})")
    }
}
