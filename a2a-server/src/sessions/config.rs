//! `[sessions]` in the agent's TOML (§17): whether the agent serves sessions, how senders authenticate (SES-2),
//! the limits of §17.3–§17.8, the allow list and visibility (POL-1, POL-2), the sessions the agent hosts and the
//! spawn templates, each with its handler (SES-9). `a2a_server::app` turns it into the runtime
//! ([`crate::sessions::SessionSettings::from_config`], [`build_handler`]).
//!
//! Every value is checked when the file is read; a mistake is refused with the file, the line, the field and what
//! to write instead (e.g. `agent.toml:14:1: sessions.session[0].handler.timeout_ms = 0: give 1 to 600000 ms`).
//!
//! ```toml
//! [sessions]
//! auth_requirement = "did_auth"        # none | api_key | oauth2 | did_auth (default)
//! visibility = "agent"                 # self | tree | agent (default) | all
//! allow = ["did:web:*.corp.example.com#*"]
//!
//! [sessions.limits]
//! default_max_turns = 5                # at most max_turns_cap (at most 20)
//!
//! [[sessions.session]]
//! session_key = "bonus-desk"
//! label = "work assistant"
//! kind = "main"
//! summary = "Knows the boss's payroll, bonuses and performance reviews."
//! handler = { type = "command", argv = ["python3", "bonus.py"], timeout_ms = 30000 }
//!
//! [[sessions.session]]
//! session_key = "chat"
//! summary = "A general assistant backed by a chat model."
//! handler = { type = "openai", base_url = "https://api.openai.com", model = "gpt-4o-mini", api_key_env = "OPENAI_API_KEY" }
//!
//! [[sessions.spawn_template]]
//! name = "price-check"
//! handler = { type = "http", url = "http://127.0.0.1:9000/price" }
//!
//! [sessions.webhooks]                  # ANN-5: every event also POSTed, signed; see [`WebhookConfig`]
//! urls = ["https://hooks.example.com/a2a-events"]
//! timeout_ms = 5000
//! retries = 3
//! ```

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use a2a_core::capability::AuthRequirement;
use a2a_core::sessions::{
    AllowList, HandlerKind, MAX_ATTACHMENTS, MAX_TURNS_CAP, MAX_WAIT_MS, SessionKind, validate_session_key,
};
use serde::Deserialize;

use crate::sessions::SessionHandler;
pub use crate::sessions::Visibility;
use crate::sessions::handler::builtin::{CommandHandler, HttpHandler, OpenAiHandler};

/// Implements `Deserialize` for a type whose derived implementation is generated under `#[serde(remote = "Self")]`:
/// the derived one reads the value, then `validate` checks it, so that a bad value is refused with the position
/// the TOML parser knows.
macro_rules! checked_deserialize {
    ($t:ty) => {
        impl<'de> Deserialize<'de> for $t {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let value = <$t>::deserialize(d)?;
                value.validate().map_err(serde::de::Error::custom)?;
                Ok(value)
            }
        }
    };
}

/// Checks `value` is within `min..=max`, naming the field and the bounds otherwise.
fn within<T: PartialOrd + std::fmt::Display>(field: &str, value: T, min: T, max: T, unit: &str) -> Result<(), String> {
    if value < min || value > max {
        return Err(format!("{field} = {value}: give {min} to {max}{unit}"));
    }
    Ok(())
}

/// `[sessions]`.
#[derive(Debug, Clone, PartialEq, Deserialize, schemars::JsonSchema)]
#[schemars(rename = "SessionsConfig")]
#[serde(remote = "Self", deny_unknown_fields)]
pub struct SessionsConfig {
    /// Whether the agent serves §17 (default `true` when the section is present).
    #[serde(default = "yes")]
    pub enabled: bool,
    /// The one authentication requirement of all session endpoints (SES-2; default `did_auth`).
    #[serde(default = "default_auth")]
    pub auth_requirement: AuthRequirement,
    /// What a requester may list and read (POL-2; default `agent`).
    #[serde(default)]
    pub visibility: Visibility,
    /// Session-address globs that cross-agent traffic must match on both sides (POL-1; default empty: same-agent
    /// traffic only).
    #[serde(default)]
    pub allow: AllowList,
    /// The limits.
    #[serde(default)]
    pub limits: SessionLimits,
    /// The sessions this agent hosts (`[[sessions.session]]`).
    #[serde(default)]
    pub session: Vec<SessionEntry>,
    /// The handlers a spawned worker may get (`[[sessions.spawn_template]]`, SPN-1).
    #[serde(default)]
    pub spawn_template: Vec<SpawnTemplate>,
    /// Where every event of the channel is also posted (`[sessions.webhooks]`, ANN-5; default: nowhere).
    #[serde(default)]
    pub webhooks: WebhookConfig,
}

checked_deserialize!(SessionsConfig);

fn yes() -> bool {
    true
}

fn default_auth() -> AuthRequirement {
    AuthRequirement::DidAuth
}

impl Default for SessionsConfig {
    fn default() -> Self {
        SessionsConfig {
            enabled: true,
            auth_requirement: default_auth(),
            visibility: Visibility::default(),
            allow: AllowList::default(),
            limits: SessionLimits::default(),
            session: Vec::new(),
            spawn_template: Vec::new(),
            webhooks: WebhookConfig::default(),
        }
    }
}

impl SessionsConfig {
    fn validate(&self) -> Result<(), String> {
        for (i, p) in self.allow.0.iter().enumerate() {
            if p.trim().is_empty() || p.len() > 512 {
                return Err(format!(
                    "sessions.allow[{i}] = {p:?}: a pattern is 1 to 512 characters, e.g. \"did:web:*.example.com#*\""
                ));
            }
            if !p.contains('#') {
                return Err(format!(
                    "sessions.allow[{i}] = {p:?}: patterns match session addresses {{agent DID}}#{{session key}}; \
                     add the session part, e.g. \"{p}#*\""
                ));
            }
        }
        let mut keys = BTreeSet::new();
        for (i, s) in self.session.iter().enumerate() {
            if !keys.insert(s.session_key.as_str()) {
                return Err(format!(
                    "sessions.session[{i}].session_key = {:?} is used twice; session keys are unique within an agent",
                    s.session_key
                ));
            }
        }
        let mut names = BTreeSet::new();
        for (i, t) in self.spawn_template.iter().enumerate() {
            if !names.insert(t.name.as_str()) {
                return Err(format!("sessions.spawn_template[{i}].name = {:?} is used twice", t.name));
            }
        }
        Ok(())
    }

    /// The hosted session `key`, if configured.
    pub fn session(&self, key: &str) -> Option<&SessionEntry> {
        self.session.iter().find(|s| s.session_key == key)
    }

    /// The spawn template a spawn asks for (SPN-1): the one named, or the first configured when none is named.
    pub fn spawn_template(&self, name: Option<&str>) -> Option<&SpawnTemplate> {
        match name {
            Some(n) => self.spawn_template.iter().find(|t| t.name == n),
            None => self.spawn_template.first(),
        }
    }

    /// Makes the relative paths of command handlers (a program given as a path with a `/`, and `cwd`) relative to
    /// `base`, the directory of the configuration file, as for capability handlers.
    pub fn resolve_paths(&mut self, base: &Path) {
        let handlers = self
            .session
            .iter_mut()
            .map(|s| &mut s.handler)
            .chain(self.spawn_template.iter_mut().map(|t| &mut t.handler));
        for handler in handlers {
            if let HandlerConfig::Command(c) = handler {
                c.resolve_paths(base);
            }
        }
    }
}

/// `[sessions.limits]`: every bound of §17, each with the default this implementation documents.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[schemars(rename = "SessionLimits")]
#[serde(remote = "Self", deny_unknown_fields, default)]
pub struct SessionLimits {
    /// Ping-pong turns when a send names none (PP-3; default 5).
    pub default_max_turns: u32,
    /// The most ping-pong turns a send may ask for (PP-3; default and at most 20).
    pub max_turns_cap: u32,
    /// The longest a send or a run read is held (SND-3; default and at most 600 000 ms).
    pub max_wait_ms: u64,
    /// A target's time for its round-one reply when the send names none (default 60 000 ms).
    pub default_run_timeout_ms: u64,
    /// The most `run_timeout_ms` a send may ask for (default 600 000 ms).
    pub max_run_timeout_ms: u64,
    /// Attachments per send (SND-2; default and at most 8).
    pub max_attachments: usize,
    /// Decoded bytes per attachment (SND-2; default 256 KiB, at most 16 MiB).
    pub max_attachment_bytes: usize,
    /// History messages when a read names no `limit` (HIS-2; default 50).
    pub history_default_limit: usize,
    /// The largest history `limit` (HIS-2; default and at most 1000).
    pub history_max_limit: usize,
    /// The byte budget of a history answer (HIS-2; default and at most 80 KiB, at least 1 KiB).
    pub history_max_bytes: usize,
    /// Messages a transcript keeps, dropping the oldest (HIS-5; default 1000, at most 100 000).
    pub max_transcript_messages: usize,
    /// Sends in one chain of handlers (POL-4; default 8, at most 32).
    pub max_hops: u32,
    /// Depth of a spawned worker's parent chain (SPN-2; default 5, at most 32).
    pub max_spawn_depth: u32,
    /// Live children of one parent (SPN-2; default 5, at most 100).
    pub max_children: usize,
    /// Spawned runs in progress at the agent (SPN-2; default 8, at most 1000).
    pub max_spawn_concurrency: usize,
    /// A worker's time when the spawn names none (SPN-2; default 300 000 ms).
    pub default_spawn_timeout_ms: u64,
    /// The most time a worker may be given; a spawn asking `0` gets this (SPN-2; default 600 000 ms).
    pub max_spawn_timeout_ms: u64,
    /// Events kept for reconnecting readers of `/a2a/events` (ANN-4; default 10 000, at most 1 000 000).
    pub event_buffer: usize,
    /// Deliveries answered by one inbox read (SES-5; default and at most 32).
    pub inbox_batch: usize,
    /// How long a `done` run stays readable (SND-10; default 3 600 000 ms, one hour).
    pub run_retention_ms: u64,
    /// Sessions registered at the agent, hosted and inbox (default 10 000, at most 1 000 000).
    pub max_sessions: usize,
}

checked_deserialize!(SessionLimits);

/// The longest run or worker time a configuration may allow: one day.
const MAX_CONFIGURED_TIMEOUT_MS: u64 = 24 * 60 * 60 * 1000;

impl Default for SessionLimits {
    fn default() -> Self {
        SessionLimits {
            default_max_turns: a2a_core::sessions::DEFAULT_MAX_TURNS,
            max_turns_cap: MAX_TURNS_CAP,
            max_wait_ms: MAX_WAIT_MS,
            default_run_timeout_ms: a2a_core::sessions::DEFAULT_RUN_TIMEOUT_MS,
            max_run_timeout_ms: 600_000,
            max_attachments: MAX_ATTACHMENTS,
            max_attachment_bytes: 256 * 1024,
            history_default_limit: a2a_core::sessions::HISTORY_DEFAULT_LIMIT,
            history_max_limit: a2a_core::sessions::HISTORY_MAX_LIMIT,
            history_max_bytes: a2a_core::sessions::HISTORY_MAX_BYTES,
            max_transcript_messages: 1000,
            max_hops: 8,
            max_spawn_depth: 5,
            max_children: 5,
            max_spawn_concurrency: 8,
            default_spawn_timeout_ms: 300_000,
            max_spawn_timeout_ms: 600_000,
            event_buffer: 10_000,
            inbox_batch: 32,
            run_retention_ms: 3_600_000,
            max_sessions: 10_000,
        }
    }
}

impl SessionLimits {
    fn validate(&self) -> Result<(), String> {
        let l = |f: &str| format!("sessions.limits.{f}");
        within(&l("max_turns_cap"), self.max_turns_cap, 0, MAX_TURNS_CAP, " turns (PP-3)")?;
        within(
            &l("default_max_turns"),
            self.default_max_turns,
            0,
            self.max_turns_cap,
            " turns (at most max_turns_cap)",
        )?;
        within(&l("max_wait_ms"), self.max_wait_ms, 1, MAX_WAIT_MS, " ms (SND-3)")?;
        within(&l("max_run_timeout_ms"), self.max_run_timeout_ms, 1, MAX_CONFIGURED_TIMEOUT_MS, " ms")?;
        within(
            &l("default_run_timeout_ms"),
            self.default_run_timeout_ms,
            1,
            self.max_run_timeout_ms,
            " ms (at most max_run_timeout_ms)",
        )?;
        within(&l("max_attachments"), self.max_attachments, 0, MAX_ATTACHMENTS, " (SND-2)")?;
        within(&l("max_attachment_bytes"), self.max_attachment_bytes, 1, 16 * 1024 * 1024, " bytes")?;
        within(&l("history_max_limit"), self.history_max_limit, 1, a2a_core::sessions::HISTORY_MAX_LIMIT, " (HIS-2)")?;
        within(
            &l("history_default_limit"),
            self.history_default_limit,
            1,
            self.history_max_limit,
            " (at most history_max_limit)",
        )?;
        within(
            &l("history_max_bytes"),
            self.history_max_bytes,
            1024,
            a2a_core::sessions::HISTORY_MAX_BYTES,
            " bytes (HIS-2)",
        )?;
        within(&l("max_transcript_messages"), self.max_transcript_messages, 1, 100_000, " messages (HIS-5)")?;
        within(&l("max_hops"), self.max_hops, 1, 32, " (POL-4)")?;
        within(&l("max_spawn_depth"), self.max_spawn_depth, 1, 32, " (SPN-2)")?;
        within(&l("max_children"), self.max_children, 1, 100, " (SPN-2)")?;
        within(&l("max_spawn_concurrency"), self.max_spawn_concurrency, 1, 1000, " (SPN-2)")?;
        within(&l("max_spawn_timeout_ms"), self.max_spawn_timeout_ms, 1, MAX_CONFIGURED_TIMEOUT_MS, " ms")?;
        within(
            &l("default_spawn_timeout_ms"),
            self.default_spawn_timeout_ms,
            1,
            self.max_spawn_timeout_ms,
            " ms (at most max_spawn_timeout_ms)",
        )?;
        within(&l("event_buffer"), self.event_buffer, 1, 1_000_000, " events (ANN-4)")?;
        within(&l("inbox_batch"), self.inbox_batch, 1, 32, " deliveries (SES-5)")?;
        within(&l("run_retention_ms"), self.run_retention_ms, 1_000, MAX_CONFIGURED_TIMEOUT_MS, " ms")?;
        within(&l("max_sessions"), self.max_sessions, 1, 1_000_000, " sessions")?;
        Ok(())
    }
}

/// The most webhooks an agent may post to.
pub const MAX_WEBHOOKS: usize = 16;

/// `[sessions.webhooks]` (ANN-5): the URLs every event of the agent's channel (`announce`, `run`, `spawn`) is also
/// POSTed to, as a signed [`a2a_core::sessions::WebhookEvent`], with a bounded time per post, retries with doubling
/// backoff, and a bounded queue per webhook whose oldest post is dropped when it is full (counted and logged).
///
/// ```toml
/// [sessions.webhooks]
/// urls = ["https://hooks.example.com/a2a-events"]
/// timeout_ms = 5000          # per post (default 5 000, at most 60 000)
/// retries = 3                # after the first try (default 3, at most 10)
/// backoff_ms = 500           # before the first retry, doubled after each (default 500, at most 60 000)
/// queue_capacity = 1000      # posts waiting per webhook (default 1 000, at most 100 000)
/// audience = "did:web:hooks.example.com"   # the signatures' aud (default: the agent's own DID)
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[schemars(rename = "WebhookConfig")]
#[serde(remote = "Self", deny_unknown_fields, default)]
pub struct WebhookConfig {
    /// The `http` or `https` URLs to post to (at most [`MAX_WEBHOOKS`]; none by default).
    pub urls: Vec<String>,
    /// The time one post may take, connecting included (default 5 000 ms, 1 to 60 000).
    pub timeout_ms: u64,
    /// How many times a failed post is tried again (default 3, at most 10).
    pub retries: u32,
    /// The wait before the first retry, doubled before each next one (default 500 ms, 1 to 60 000).
    pub backoff_ms: u64,
    /// Posts waiting per webhook; when it is full the oldest is dropped (default 1 000, 1 to 100 000).
    pub queue_capacity: usize,
    /// The DID the posts are signed for (`aud`); default the agent's own DID.
    pub audience: Option<String>,
}

checked_deserialize!(WebhookConfig);

impl Default for WebhookConfig {
    fn default() -> Self {
        WebhookConfig {
            urls: Vec::new(),
            timeout_ms: 5_000,
            retries: 3,
            backoff_ms: 500,
            queue_capacity: 1_000,
            audience: None,
        }
    }
}

impl WebhookConfig {
    /// Posts to `urls`, with the defaults.
    pub fn new(urls: impl IntoIterator<Item = impl Into<String>>) -> Self {
        WebhookConfig { urls: urls.into_iter().map(Into::into).collect(), ..WebhookConfig::default() }
    }

    /// Checks every value (also done when the TOML is read).
    pub fn validate(&self) -> Result<(), String> {
        if self.urls.len() > MAX_WEBHOOKS {
            return Err(format!("sessions.webhooks.urls has {} URLs: give at most {MAX_WEBHOOKS}", self.urls.len()));
        }
        let mut seen = BTreeSet::new();
        for (i, u) in self.urls.iter().enumerate() {
            check_url(&format!("sessions.webhooks.urls[{i}]"), u)?;
            if !seen.insert(u.as_str()) {
                return Err(format!("sessions.webhooks.urls[{i}] = {u:?} is listed twice"));
            }
        }
        within("sessions.webhooks.timeout_ms", self.timeout_ms, 1, 60_000, " ms")?;
        within("sessions.webhooks.retries", self.retries, 0, 10, "")?;
        within("sessions.webhooks.backoff_ms", self.backoff_ms, 1, 60_000, " ms")?;
        within("sessions.webhooks.queue_capacity", self.queue_capacity, 1, 100_000, " posts")?;
        if let Some(a) = &self.audience {
            a2a_core::did::Did::parse(a).map_err(|e| {
                format!(
                    "sessions.webhooks.audience = {a:?} is not a DID ({e}); write e.g. \"did:web:hooks.example.com\""
                )
            })?;
        }
        Ok(())
    }
}

/// One `[[sessions.session]]`: a session the agent hosts.
#[derive(Debug, Clone, PartialEq, Deserialize, schemars::JsonSchema)]
#[schemars(rename = "SessionEntry")]
#[serde(remote = "Self", deny_unknown_fields)]
pub struct SessionEntry {
    /// Its key (§17.1: 1–128 characters of `A-Z a-z 0-9 . _ ~ -`).
    pub session_key: String,
    /// A label to find it by (1–512 characters).
    #[serde(default)]
    pub label: Option<String>,
    /// Its kind (default `other`; `spawn` is for workers made by spawn).
    #[serde(default = "default_kind")]
    pub kind: SessionKind,
    /// What it is about (5–2000 characters, as SES-4).
    pub summary: String,
    /// What answers its deliveries.
    pub handler: HandlerConfig,
}

checked_deserialize!(SessionEntry);

fn default_kind() -> SessionKind {
    SessionKind::Other
}

fn check_label(label: Option<&str>, what: &str) -> Result<(), String> {
    if let Some(l) = label {
        let n = l.chars().count();
        if n == 0 || n > 512 {
            return Err(format!("{what}.label is {n} characters: give 1 to 512, or leave it out"));
        }
    }
    Ok(())
}

impl SessionEntry {
    fn validate(&self) -> Result<(), String> {
        let key = &self.session_key;
        validate_session_key(key).map_err(|e| format!("sessions.session.session_key: {e}"))?;
        check_label(self.label.as_deref(), &format!("session {key:?}"))?;
        let n = self.summary.chars().count();
        if !(5..=2000).contains(&n) {
            return Err(format!(
                "session {key:?}: summary is {n} characters: give 5 to 2000, saying what the session knows or does"
            ));
        }
        if self.kind == SessionKind::Spawn {
            return Err(format!(
                "session {key:?}: kind = \"spawn\" is for workers that sessions_spawn makes; configure a \
                 [[sessions.spawn_template]] instead, or use another kind"
            ));
        }
        Ok(())
    }
}

/// One `[[sessions.spawn_template]]`: a handler a spawned worker session may get (SPN-1).
#[derive(Debug, Clone, PartialEq, Deserialize, schemars::JsonSchema)]
#[schemars(rename = "SpawnTemplate")]
#[serde(remote = "Self", deny_unknown_fields)]
pub struct SpawnTemplate {
    /// The name a spawn's `template` gives (the characters of a session key).
    pub name: String,
    /// A summary the worker session is listed with.
    #[serde(default)]
    pub summary: Option<String>,
    /// What does the worker's task.
    pub handler: HandlerConfig,
}

checked_deserialize!(SpawnTemplate);

impl SpawnTemplate {
    fn validate(&self) -> Result<(), String> {
        validate_session_key(&self.name).map_err(|e| format!("sessions.spawn_template.name: {e}"))?;
        if matches!(self.handler, HandlerConfig::Inbox) {
            return Err(format!(
                "spawn template {:?}: handler type \"inbox\" cannot do a spawned task; use command, http or openai",
                self.name
            ));
        }
        if let Some(s) = &self.summary {
            let n = s.chars().count();
            if !(5..=2000).contains(&n) {
                return Err(format!("spawn template {:?}: summary is {n} characters: give 5 to 2000", self.name));
            }
        }
        Ok(())
    }
}

/// What answers a session's deliveries (`handler = {type = ...}`, SES-9).
#[derive(Debug, Clone, PartialEq, Deserialize, schemars::JsonSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum HandlerConfig {
    /// A program per delivery ([`CommandHandler`]).
    Command(CommandConfig),
    /// A JSON POST per delivery ([`HttpHandler`]).
    Http(HttpConfig),
    /// An OpenAI-compatible chat completion per delivery ([`OpenAiHandler`]).
    Openai(OpenAiConfig),
    /// No handler at the agent: the agent declares the session, and deliveries wait in its inbox for a program
    /// that reads and answers them (SES-5).
    Inbox,
}

impl HandlerConfig {
    /// Hosted (a handler runs at the agent) or inbox.
    pub fn kind(&self) -> HandlerKind {
        match self {
            HandlerConfig::Inbox => HandlerKind::Inbox,
            _ => HandlerKind::Hosted,
        }
    }

    /// The `type` as written.
    pub fn type_name(&self) -> &'static str {
        match self {
            HandlerConfig::Command(_) => "command",
            HandlerConfig::Http(_) => "http",
            HandlerConfig::Openai(_) => "openai",
            HandlerConfig::Inbox => "inbox",
        }
    }
}

/// What a command handler writes to the program's stdin.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum StdinFormat {
    /// The delivery as one JSON object (SES-9; the default).
    #[default]
    Delivery,
    /// Plain text: the provenance line, the step instruction and the message (POL-3), for wrapping a CLI agent
    /// that reads a prompt.
    Prompt,
}

/// `handler = {type = "command", ...}`: see [`CommandHandler`].
#[derive(Debug, Clone, PartialEq, Deserialize, schemars::JsonSchema)]
#[schemars(rename = "CommandConfig")]
#[serde(remote = "Self", deny_unknown_fields)]
pub struct CommandConfig {
    /// The program and its arguments; no shell is involved. A program with a `/` is relative to the configuration
    /// file's directory, one without is looked up on `PATH`.
    pub argv: Vec<String>,
    /// Working directory (relative to the configuration file's directory; default: the agent's).
    #[serde(default)]
    pub cwd: Option<PathBuf>,
    /// Environment variables set for the program.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Variables of the agent's own environment passed through (default `PATH`, `HOME`, `LANG`, `LC_ALL`, `TZ`,
    /// `TMPDIR`); nothing else of it is.
    #[serde(default = "default_env_allow")]
    pub env_allow: Vec<String>,
    /// What stdin carries (default `delivery`).
    #[serde(default)]
    pub stdin: StdinFormat,
    /// The program's time per delivery, including any wait for a free slot; past it the process group is killed
    /// (default 60 000 ms, at most 600 000).
    #[serde(default = "default_handler_timeout_ms")]
    pub timeout_ms: u64,
    /// The most stdout read; more kills the program and fails the delivery (default 1 MiB, at most 16 MiB).
    #[serde(default = "default_output_bytes")]
    pub max_output_bytes: usize,
    /// Programs of this handler running at once; further deliveries wait for a slot (default 4, at most 64).
    #[serde(default = "default_concurrency")]
    pub max_concurrency: usize,
}

checked_deserialize!(CommandConfig);

/// The longest a handler may be configured to take for one delivery (the longest wait, SND-3).
pub const MAX_HANDLER_TIMEOUT_MS: u64 = MAX_WAIT_MS;
/// The largest output or response a handler may be configured to accept.
pub const MAX_HANDLER_OUTPUT_BYTES: usize = 16 * 1024 * 1024;

fn default_env_allow() -> Vec<String> {
    ["PATH", "HOME", "LANG", "LC_ALL", "TZ", "TMPDIR"].map(String::from).to_vec()
}
fn default_handler_timeout_ms() -> u64 {
    60_000
}
fn default_output_bytes() -> usize {
    1024 * 1024
}
fn default_concurrency() -> usize {
    4
}

fn is_env_name(name: &str) -> bool {
    !name.is_empty()
        && !name.starts_with(|c: char| c.is_ascii_digit())
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

impl CommandConfig {
    /// A program run with these arguments and the defaults.
    pub fn new(argv: impl IntoIterator<Item = impl Into<String>>) -> Self {
        CommandConfig {
            argv: argv.into_iter().map(Into::into).collect(),
            cwd: None,
            env: BTreeMap::new(),
            env_allow: default_env_allow(),
            stdin: StdinFormat::default(),
            timeout_ms: default_handler_timeout_ms(),
            max_output_bytes: default_output_bytes(),
            max_concurrency: default_concurrency(),
        }
    }

    fn validate(&self) -> Result<(), String> {
        match self.argv.first() {
            None => {
                return Err(
                    "handler.argv is empty: give the program and its arguments, e.g. [\"python3\", \"bot.py\"]".into(),
                );
            }
            Some(p) if p.trim().is_empty() => return Err("handler.argv[0] is empty: name the program".into()),
            Some(_) => {}
        }
        for name in self.env.keys().chain(&self.env_allow) {
            if !is_env_name(name) {
                return Err(format!(
                    "handler environment variable {name:?} is not a valid name: use letters, digits and _"
                ));
            }
        }
        if let Some(name) = self.env.keys().find(|k| k.starts_with("A2A_")) {
            return Err(format!("handler.env.{name}: A2A_* variables are set by the agent for each delivery"));
        }
        within("handler.timeout_ms", self.timeout_ms, 1, MAX_HANDLER_TIMEOUT_MS, " ms")?;
        within("handler.max_output_bytes", self.max_output_bytes, 1, MAX_HANDLER_OUTPUT_BYTES, " bytes")?;
        within("handler.max_concurrency", self.max_concurrency, 1, 64, "")?;
        Ok(())
    }

    fn resolve_paths(&mut self, base: &Path) {
        if let Some(program) = self.argv.first_mut() {
            let p = Path::new(program.as_str());
            if p.is_relative() && program.contains('/') {
                *program = base.join(p).display().to_string();
            }
        }
        if let Some(cwd) = &mut self.cwd
            && cwd.is_relative()
        {
            *cwd = base.join(&*cwd);
        }
    }
}

/// `handler = {type = "http", ...}`: see [`HttpHandler`].
#[derive(Debug, Clone, PartialEq, Deserialize, schemars::JsonSchema)]
#[schemars(rename = "HttpConfig")]
#[serde(remote = "Self", deny_unknown_fields)]
pub struct HttpConfig {
    /// Where the delivery is POSTed (`http` or `https`).
    pub url: String,
    /// An environment variable holding a bearer token sent as `Authorization: Bearer ...`.
    #[serde(default)]
    pub bearer_token_env: Option<String>,
    /// Extra request headers.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// The time per delivery (default 60 000 ms, at most 600 000).
    #[serde(default = "default_handler_timeout_ms")]
    pub timeout_ms: u64,
    /// The largest answer accepted (default 1 MiB, at most 16 MiB).
    #[serde(default = "default_output_bytes")]
    pub max_response_bytes: usize,
}

checked_deserialize!(HttpConfig);

fn check_url(field: &str, url: &str) -> Result<(), String> {
    let parsed = url::Url::parse(url)
        .map_err(|e| format!("{field} = {url:?} is not a URL ({e}); write e.g. \"http://127.0.0.1:9000/reply\""))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(format!("{field} = {url:?}: use an http:// or https:// URL"));
    }
    Ok(())
}

impl HttpConfig {
    /// POST to `url`, with the defaults.
    pub fn new(url: impl Into<String>) -> Self {
        HttpConfig {
            url: url.into(),
            bearer_token_env: None,
            headers: BTreeMap::new(),
            timeout_ms: default_handler_timeout_ms(),
            max_response_bytes: default_output_bytes(),
        }
    }

    fn validate(&self) -> Result<(), String> {
        check_url("handler.url", &self.url)?;
        if let Some(name) = &self.bearer_token_env
            && !is_env_name(name)
        {
            return Err(format!("handler.bearer_token_env = {name:?} is not an environment variable name"));
        }
        for (k, v) in &self.headers {
            if http::HeaderName::from_bytes(k.as_bytes()).is_err() || http::HeaderValue::from_str(v).is_err() {
                return Err(format!("handler.headers.{k}: not a valid HTTP header name and value"));
            }
        }
        within("handler.timeout_ms", self.timeout_ms, 1, MAX_HANDLER_TIMEOUT_MS, " ms")?;
        within("handler.max_response_bytes", self.max_response_bytes, 1, MAX_HANDLER_OUTPUT_BYTES, " bytes")?;
        Ok(())
    }
}

/// `handler = {type = "openai", ...}`: see [`OpenAiHandler`].
#[derive(Debug, Clone, PartialEq, Deserialize, schemars::JsonSchema)]
#[schemars(rename = "OpenAiConfig")]
#[serde(remote = "Self", deny_unknown_fields)]
pub struct OpenAiConfig {
    /// The API's base URL; the handler POSTs to `{base_url}/v1/chat/completions` (a trailing `/v1` is accepted).
    pub base_url: String,
    /// The model.
    pub model: String,
    /// An environment variable holding the API key (sent as a bearer token); none for a local server.
    #[serde(default)]
    pub api_key_env: Option<String>,
    /// The session's own standing instructions, put first in the system message.
    #[serde(default)]
    pub system_prompt: Option<String>,
    /// Sampling temperature (0–2); a delivery's `metadata.temperature` in that range overrides it.
    #[serde(default)]
    pub temperature: Option<f64>,
    /// The most tokens of a reply; a delivery's smaller `max_tokens` wins.
    #[serde(default)]
    pub max_tokens: Option<u32>,
    /// The time per delivery (default 60 000 ms, at most 600 000).
    #[serde(default = "default_handler_timeout_ms")]
    pub timeout_ms: u64,
    /// The largest answer accepted (default 1 MiB, at most 16 MiB).
    #[serde(default = "default_output_bytes")]
    pub max_response_bytes: usize,
}

checked_deserialize!(OpenAiConfig);

impl OpenAiConfig {
    /// `model` at `base_url`, with the defaults.
    pub fn new(base_url: impl Into<String>, model: impl Into<String>) -> Self {
        OpenAiConfig {
            base_url: base_url.into(),
            model: model.into(),
            api_key_env: None,
            system_prompt: None,
            temperature: None,
            max_tokens: None,
            timeout_ms: default_handler_timeout_ms(),
            max_response_bytes: default_output_bytes(),
        }
    }

    fn validate(&self) -> Result<(), String> {
        check_url("handler.base_url", &self.base_url)?;
        if self.model.trim().is_empty() {
            return Err("handler.model is empty: name the model, e.g. \"gpt-4o-mini\"".into());
        }
        if let Some(name) = &self.api_key_env
            && !is_env_name(name)
        {
            return Err(format!("handler.api_key_env = {name:?} is not an environment variable name"));
        }
        if let Some(t) = self.temperature
            && !(0.0..=2.0).contains(&t)
        {
            return Err(format!("handler.temperature = {t}: give 0 to 2"));
        }
        if self.max_tokens == Some(0) {
            return Err("handler.max_tokens = 0: give a positive number, or leave it out".into());
        }
        within("handler.timeout_ms", self.timeout_ms, 1, MAX_HANDLER_TIMEOUT_MS, " ms")?;
        within("handler.max_response_bytes", self.max_response_bytes, 1, MAX_HANDLER_OUTPUT_BYTES, " bytes")?;
        Ok(())
    }
}

/// Why a handler could not be built from its configuration.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct HandlerBuildError(pub String);

/// Builds the handler a configuration describes, reading secrets (`api_key_env`, `bearer_token_env`) from the
/// process environment. An `inbox` session has no handler to build (the runtime queues its deliveries, SES-5) and is
/// refused: check [`HandlerConfig::kind`] first.
pub fn build_handler(config: &HandlerConfig) -> Result<Arc<dyn SessionHandler>, HandlerBuildError> {
    build_handler_with_env(config, &|name| std::env::var(name).ok())
}

/// [`build_handler`] with the environment looked up through `env`.
pub fn build_handler_with_env(
    config: &HandlerConfig,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Arc<dyn SessionHandler>, HandlerBuildError> {
    let secret = |field: &str, name: &Option<String>| -> Result<Option<String>, HandlerBuildError> {
        let Some(name) = name else { return Ok(None) };
        match env(name).filter(|v| !v.trim().is_empty()) {
            Some(v) => Ok(Some(v)),
            None => Err(HandlerBuildError(format!(
                "handler.{field} names the environment variable {name}, which is not set (or empty); export it \
                 before starting the agent, or remove {field}"
            ))),
        }
    };
    Ok(match config {
        HandlerConfig::Command(c) => Arc::new(CommandHandler::new(c.clone())),
        HandlerConfig::Http(c) => {
            let token = secret("bearer_token_env", &c.bearer_token_env)?;
            Arc::new(HttpHandler::new(c.clone(), token).map_err(HandlerBuildError)?)
        }
        HandlerConfig::Openai(c) => {
            let key = secret("api_key_env", &c.api_key_env)?;
            Arc::new(OpenAiHandler::new(c.clone(), key).map_err(HandlerBuildError)?)
        }
        HandlerConfig::Inbox => {
            return Err(HandlerBuildError(
                "an inbox session has no handler at the agent: its owner reads GET /a2a/sessions/{key}/inbox".into(),
            ));
        }
    })
}
