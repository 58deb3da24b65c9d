//! Every limit of an agent, explicit and configurable (`spec/PROTOCOL.md` §13).

use std::time::Duration;

use a2a_core::wire::AgentLimits;
use serde::Deserialize;

/// The limits of an agent. Defaults are those of `spec/PROTOCOL.md` §13.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
#[non_exhaustive]
pub struct Limits {
    /// Largest request body, in bytes (`413 payload_too_large` above).
    pub max_body_bytes: usize,
    /// Largest total size of the request headers, in bytes (`431 headers_too_large` above).
    pub max_header_bytes: usize,
    /// Most request headers (`431 headers_too_large` above).
    pub max_headers: usize,
    /// Time to receive the request headers before the connection is closed, in milliseconds.
    pub header_read_timeout_ms: u64,
    /// Time to receive the request body (`408 request_timeout` after), in milliseconds.
    pub body_read_timeout_ms: u64,
    /// Executions accepted or running at once (`503 overloaded` above).
    pub max_concurrent_executions: usize,
    /// Executions received and not yet confirmed (`503 overloaded` above).
    pub max_received_executions: usize,
    /// Negotiations kept.
    pub max_negotiations: usize,
    /// How long a negotiation lives, in milliseconds.
    pub negotiation_ttl_ms: u64,
    /// Longest `wait_ms` honoured by RESULT, in milliseconds.
    pub max_wait_ms: u64,
    /// Largest `timeout_ms` a negotiation may agree, in milliseconds.
    pub max_timeout_ms: u64,
    /// `timeout_ms` when the caller gives none, in milliseconds.
    pub default_timeout_ms: u64,
    /// How long an execution waits for CONFIRM, in milliseconds.
    pub confirm_window_ms: u64,
    /// How long a terminal execution stays readable, in milliseconds.
    pub result_retention_ms: u64,
    /// Compiled agreed schemas kept in memory.
    pub max_compiled_schemas: u64,
    /// Time given to executions in flight to finish on shutdown, in milliseconds.
    pub shutdown_grace_ms: u64,
    /// Negotiations kept per sender (LIM-4): past it a sender's new negotiation replaces its own closest to expiry.
    pub max_negotiations_per_sender: usize,
    /// Executions received and not yet confirmed per sender (LIM-5: `429 quota_exceeded` above).
    pub max_received_per_sender: usize,
    /// Replay nonces of signed requests kept (LIM-5: `429 quota_exceeded` above; a nonce lives up to 330 s).
    pub max_nonces: usize,
    /// Replay nonces kept per signer (LIM-5: `429 quota_exceeded` above).
    pub max_nonces_per_sender: usize,
    /// Bytes of request bodies held while they are received, all requests together (LIM-7): a body that would
    /// go past it is refused `503 overloaded` with `Retry-After`.
    pub max_buffered_body_bytes: usize,
    /// Connections open at once (LIM-8); at the limit the agent stops accepting (new connections wait in the
    /// listen backlog) and logs it. Lowered to three quarters of the process's file descriptor limit when that is
    /// smaller.
    pub max_connections: usize,
    /// Requests of one sender (`A2A-Sender-ID`) served at once, NEGOTIATE, EXECUTE, CONFIRM, RESULT, CANCEL and
    /// FALLBACK together (LIM-14); past it a request waits in the sender's own queue. At least 1 (0 counts as 1).
    pub max_in_progress_per_sender: usize,
    /// Requests of one sender waiting for a slot of its share (LIM-15: `429 quota_exceeded` above; 0 refuses a
    /// request past the share at once instead of queueing it).
    pub max_queued_per_sender: usize,
    /// Longest time a request waits in its sender's queue, in milliseconds (LIM-15: `429 quota_exceeded` after).
    pub sender_queue_timeout_ms: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_body_bytes: 1024 * 1024,
            max_header_bytes: 16 * 1024,
            max_headers: 64,
            header_read_timeout_ms: 10_000,
            body_read_timeout_ms: 30_000,
            max_concurrent_executions: 64,
            max_received_executions: 10_000,
            max_negotiations: 100_000,
            negotiation_ttl_ms: 3_600_000,
            max_wait_ms: 30_000,
            max_timeout_ms: 300_000,
            default_timeout_ms: 30_000,
            confirm_window_ms: 60_000,
            result_retention_ms: 3_600_000,
            max_compiled_schemas: 10_000,
            shutdown_grace_ms: 10_000,
            max_negotiations_per_sender: 1_000,
            max_received_per_sender: 1_000,
            max_nonces: 1_000_000,
            max_nonces_per_sender: 100_000,
            max_buffered_body_bytes: 64 * 1024 * 1024,
            max_connections: 4096,
            max_in_progress_per_sender: 2,
            max_queued_per_sender: 64,
            sender_queue_timeout_ms: 5_000,
        }
    }
}

impl Limits {
    /// The limits announced in the capabilities document (DISC-11).
    pub fn announced(&self) -> AgentLimits {
        AgentLimits {
            max_body_bytes: self.max_body_bytes as u64,
            max_wait_ms: self.max_wait_ms,
            max_timeout_ms: self.max_timeout_ms,
            confirm_window_ms: self.confirm_window_ms,
            max_negotiations_per_sender: Some(self.max_negotiations_per_sender as u64),
            max_received_per_sender: Some(self.max_received_per_sender as u64),
            max_nonces_per_sender: Some(self.max_nonces_per_sender as u64),
            max_in_progress_per_sender: Some(self.max_in_progress_per_sender as u64),
            max_queued_per_sender: Some(self.max_queued_per_sender as u64),
            sender_queue_timeout_ms: Some(self.sender_queue_timeout_ms),
        }
    }

    /// The header read timeout.
    pub fn header_read_timeout(&self) -> Duration {
        Duration::from_millis(self.header_read_timeout_ms)
    }

    /// The body read timeout.
    pub fn body_read_timeout(&self) -> Duration {
        Duration::from_millis(self.body_read_timeout_ms)
    }
}
