//! The explicit, configurable limits and policy of an agent's sessions (§17): every bound of the section in one
//! place, with the defaults the specification names for this implementation.

use std::time::Duration;

use a2a_core::capability::AuthRequirement;
use a2a_core::sessions::{self as s, AllowList};
use serde::{Deserialize, Serialize};

/// Which sessions a requester can see and read (POL-2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Visibility {
    /// The requester's own session only.
    #[serde(rename = "self")]
    Own,
    /// The requester's session and the sessions it spawned, transitively.
    Tree,
    /// Every session of the requester's agent.
    #[default]
    Agent,
    /// Every session the allow list permits.
    All,
}

/// The limits and policy of the sessions of one agent.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct SessionSettings {
    /// The authentication every session endpoint requires (SES-2; default `did_auth`).
    pub auth_requirement: AuthRequirement,
    /// Who may message whom across agents (POL-1; default empty: same-agent traffic only).
    pub allow_list: AllowList,
    /// What `GET /a2a/sessions` shows and whose history can be read (POL-2; default `agent`).
    pub visibility: Visibility,
    /// Ping-pong turns when a send names none (PP-3; default 5).
    pub default_max_turns: u32,
    /// The hard cap on ping-pong turns (PP-3; default and at most 20).
    pub max_turns_cap: u32,
    /// Longest wait of a send or a run read (SND-3; default 600 000 ms).
    pub max_wait_ms: u64,
    /// `run_timeout_ms` when a send names none (§17.3; default 60 000 ms).
    pub default_run_timeout_ms: u64,
    /// Longest `run_timeout_ms` a send may ask for (SND-13; default 600 000 ms).
    pub max_run_timeout_ms: u64,
    /// Attachments per send (SND-2; default and at most 8).
    pub max_attachments: usize,
    /// Largest decoded attachment (SND-2; default 256 KiB).
    pub max_attachment_bytes: usize,
    /// Most sends in a chain (POL-4; default 8).
    pub max_hops: u32,
    /// Messages kept per transcript (HIS-5; default 1000).
    pub max_transcript_messages: usize,
    /// History messages when a read names no `limit` (HIS-2; default 50).
    pub history_default_limit: usize,
    /// The largest history `limit` (HIS-2; default and at most 1000).
    pub history_max_limit: usize,
    /// The byte budget of a history answer (HIS-2; default and at most 80 KiB).
    pub history_max_bytes: usize,
    /// A session not refreshed for this long is stale (SES-6; default 24 h).
    pub stale_after: Duration,
    /// How long a `done` run stays readable (SND-10; default 1 h).
    pub run_retention: Duration,
    /// Events kept for `Last-Event-ID` resumes (ANN-4; default 10 000).
    pub event_buffer: usize,
    /// How long events are kept (ANN-4; default 24 h).
    pub event_retention: Duration,
    /// The longest a stream stays silent before a comment line (ANN-4; default 15 s).
    pub keepalive: Duration,
    /// Deliveries answered by one inbox read (SES-5; default 32).
    pub inbox_batch: usize,
    /// Deepest parent chain of a spawned worker (SPN-2; default 5).
    pub max_spawn_depth: u32,
    /// Live workers of one parent (SPN-2; default 5).
    pub max_children: usize,
    /// Spawned runs in progress at the agent (SPN-2; default 8).
    pub max_spawn_concurrency: usize,
    /// A worker's run timeout when the spawn names none (SPN-2; default 300 000 ms).
    pub default_spawn_timeout_ms: u64,
    /// The longest a worker may run (`run_timeout_ms: 0` means this; default 600 000 ms).
    pub max_spawn_timeout_ms: u64,
    /// Sessions registered at the agent, hosted and inbox (SES-10; default 10 000).
    pub max_sessions: usize,
    /// Where every event is also posted (ANN-5; default: nowhere).
    pub webhooks: super::config::WebhookConfig,
}

impl Default for SessionSettings {
    fn default() -> Self {
        SessionSettings {
            auth_requirement: AuthRequirement::DidAuth,
            allow_list: AllowList::default(),
            visibility: Visibility::Agent,
            default_max_turns: s::DEFAULT_MAX_TURNS,
            max_turns_cap: s::MAX_TURNS_CAP,
            max_wait_ms: s::MAX_WAIT_MS,
            default_run_timeout_ms: s::DEFAULT_RUN_TIMEOUT_MS,
            max_run_timeout_ms: 600_000,
            max_attachments: s::MAX_ATTACHMENTS,
            max_attachment_bytes: 256 * 1024,
            max_hops: 8,
            max_transcript_messages: 1_000,
            history_default_limit: s::HISTORY_DEFAULT_LIMIT,
            history_max_limit: s::HISTORY_MAX_LIMIT,
            history_max_bytes: s::HISTORY_MAX_BYTES,
            stale_after: Duration::from_millis(s::STALE_AFTER_MS),
            run_retention: Duration::from_secs(3_600),
            event_buffer: 10_000,
            event_retention: Duration::from_secs(24 * 3_600),
            keepalive: Duration::from_secs(15),
            inbox_batch: 32,
            max_spawn_depth: 5,
            max_children: 5,
            max_spawn_concurrency: 8,
            default_spawn_timeout_ms: 300_000,
            max_spawn_timeout_ms: 600_000,
            max_sessions: 10_000,
            webhooks: super::config::WebhookConfig::default(),
        }
    }
}

impl SessionSettings {
    /// The ping-pong turns of a send that asked for `asked` (PP-3): the default when absent, never above the cap.
    pub fn turns(&self, asked: Option<u32>) -> u32 {
        asked.unwrap_or(self.default_max_turns).min(self.max_turns_cap.min(s::MAX_TURNS_CAP))
    }
}

impl SessionSettings {
    /// The settings a `[sessions]` section describes (its limits already validated).
    pub fn from_config(c: &super::config::SessionsConfig) -> SessionSettings {
        let l = &c.limits;
        SessionSettings {
            auth_requirement: c.auth_requirement,
            allow_list: c.allow.clone(),
            visibility: match c.visibility {
                super::config::Visibility::Own => Visibility::Own,
                super::config::Visibility::Tree => Visibility::Tree,
                super::config::Visibility::Agent => Visibility::Agent,
                super::config::Visibility::All => Visibility::All,
            },
            default_max_turns: l.default_max_turns,
            max_turns_cap: l.max_turns_cap,
            max_wait_ms: l.max_wait_ms,
            default_run_timeout_ms: l.default_run_timeout_ms,
            max_run_timeout_ms: l.max_run_timeout_ms,
            max_attachments: l.max_attachments,
            max_attachment_bytes: l.max_attachment_bytes,
            max_transcript_messages: l.max_transcript_messages,
            history_default_limit: l.history_default_limit,
            history_max_limit: l.history_max_limit,
            history_max_bytes: l.history_max_bytes,
            max_hops: l.max_hops,
            max_spawn_depth: l.max_spawn_depth,
            max_children: l.max_children,
            max_spawn_concurrency: l.max_spawn_concurrency,
            default_spawn_timeout_ms: l.default_spawn_timeout_ms,
            max_spawn_timeout_ms: l.max_spawn_timeout_ms,
            event_buffer: l.event_buffer,
            inbox_batch: l.inbox_batch,
            run_retention: Duration::from_millis(l.run_retention_ms),
            max_sessions: l.max_sessions,
            webhooks: c.webhooks.clone(),
            ..SessionSettings::default()
        }
    }
}
