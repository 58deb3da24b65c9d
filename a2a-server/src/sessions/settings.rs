//! The explicit, configurable limits and policy of an agent's sessions (§17): every bound of the section in one
//! place, with the defaults the specification names for this implementation.

use std::time::Duration;

use a2a_core::capability::AuthRequirement;
use a2a_core::sessions::{self as s, AllowList};
use serde::{Deserialize, Serialize};

use super::config::SessionLimits;

/// Which sessions a requester can see and read (POL-2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, schemars::JsonSchema)]
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
    /// Every bound of §17 (`[sessions.limits]`: turns, waits, attachments, history, hops, spawns, events, inbox
    /// batches, run retention, sessions), with its documented default.
    pub limits: SessionLimits,
    /// A session not refreshed for this long is stale (SES-6; default 24 h).
    pub stale_after: Duration,
    /// How long events are kept (ANN-4; default 24 h).
    pub event_retention: Duration,
    /// The longest a stream stays silent before a comment line (ANN-4; default 15 s).
    pub keepalive: Duration,
    /// Where every event is also posted (ANN-5; default: nowhere).
    pub webhooks: super::config::WebhookConfig,
}

impl Default for SessionSettings {
    fn default() -> Self {
        SessionSettings {
            auth_requirement: AuthRequirement::DidAuth,
            allow_list: AllowList::default(),
            visibility: Visibility::Agent,
            limits: SessionLimits::default(),
            stale_after: Duration::from_millis(s::STALE_AFTER_MS),
            event_retention: Duration::from_secs(24 * 3_600),
            keepalive: Duration::from_secs(15),
            webhooks: super::config::WebhookConfig::default(),
        }
    }
}

impl SessionSettings {
    /// The ping-pong turns of a send that asked for `asked` (PP-3): the default when absent, never above the cap.
    pub fn turns(&self, asked: Option<u32>) -> u32 {
        asked.unwrap_or(self.limits.default_max_turns).min(self.limits.max_turns_cap.min(s::MAX_TURNS_CAP))
    }
}

impl SessionSettings {
    /// The settings a `[sessions]` section describes (its limits already validated).
    pub fn from_config(c: &super::config::SessionsConfig) -> SessionSettings {
        SessionSettings {
            auth_requirement: c.auth_requirement,
            allow_list: c.allow.clone(),
            visibility: c.visibility,
            limits: c.limits.clone(),
            webhooks: c.webhooks.clone(),
            ..SessionSettings::default()
        }
    }
}
