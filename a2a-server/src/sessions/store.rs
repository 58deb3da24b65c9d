//! Where the state of sessions lives (§17): sessions, runs, inbox deliveries and their answers, transcripts, the
//! event buffer and the wait edges (POL-6), behind one [`SessionStore`] trait, implemented in this process's memory
//! ([`memory`]: [`MemorySessionStore`]) and on Redis ([`redis`]: [`RedisSessionStore`]).
//!
//! Waiting never sleeps on a timer: every store has a change signal ([`SessionStore::changes`]) that is bumped on
//! each write (by pub/sub for Redis, so that a write in another process wakes this one); waiters re-read on a bump.

use std::collections::HashMap;

use a2a_core::sessions::{
    Cleanup, Delivery, HistoryMessage, Provenance, Role, Run, RunReply, SendRequest, Session, WaitChain,
};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::sync::watch;

pub mod memory;
pub mod redis;

pub use crate::store::StoreError;
pub use memory::MemorySessionStore;
pub use redis::RedisSessionStore;

/// A session as stored: the listed [`Session`] plus what the agent needs to serve it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionRecord {
    /// The session as listed.
    pub session: Session,
    /// Last refresh, in ms since the epoch (SES-6).
    pub updated_ms: u64,
    /// For a spawned worker: how it was spawned (§17.8).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spawn: Option<SpawnInfo>,
}

/// How a worker session was spawned (SPN-1).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SpawnInfo {
    /// The template whose handler answers it.
    pub template: String,
    /// What happens to it afterwards.
    pub cleanup: Cleanup,
    /// Whether its outcome is announced back.
    pub announce: bool,
}

/// A run as stored: the [`Run`] plus who may read it and what it was asked.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunRecord {
    /// The run as answered by `GET /a2a/runs/{id}`.
    pub run: Run,
    /// The requester's DID (may read the run).
    pub sender: String,
    /// The target's owner (may read the run): the agent for a hosted session, the registering DID for an inbox one.
    pub target_owner: String,
    /// The request.
    pub request: SendRequest,
    /// The delivery's hop (POL-4).
    pub hop: u32,
    /// The round-one deadline, in ms since the epoch.
    pub deadline_ms: u64,
    /// The wait chain the delivery was made under (POL-5), as a header value.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub wait_chain: String,
    /// When the run reached `done`, in ms since the epoch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub done_ms: Option<u64>,
}

/// A delivery waiting in an inbox session's inbox (SES-5).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InboxItem {
    /// The delivery.
    pub delivery: Delivery,
    /// Higher first (SND-12).
    pub priority: u8,
    /// When it was queued, in ms since the epoch.
    pub queued_ms: u64,
    /// Until when it may be answered (the run's deadline).
    pub until_ms: u64,
}

/// A transcript message before it is bounded and redacted for a reader (HIS-1).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoredMessage {
    /// Who.
    pub role: Role,
    /// The text as received.
    pub text: String,
    /// The run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
    /// Where it came from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provenance: Option<Provenance>,
}

impl StoredMessage {
    /// The history message with this sequence number and time (text as stored; bounds apply later).
    pub fn at(self, seq: u64, at: String) -> HistoryMessage {
        HistoryMessage {
            seq,
            at,
            role: self.role,
            text: self.text,
            run_id: self.run_id,
            provenance: self.provenance,
            truncated: false,
            original_chars: None,
        }
    }
}

/// An event of the agent's channel (ANN-3).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Event {
    /// Increasing.
    pub id: u64,
    /// `announce`, `run` or `spawn`.
    pub event: String,
    /// The session it is about (its address).
    pub session: String,
    /// One line of JSON.
    pub data: Value,
    /// When, in ms since the epoch.
    pub at_ms: u64,
}

/// What an event read found (ANN-4).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct EventsAfter {
    /// The asked id is older than the buffer: events were lost in between.
    pub gap: bool,
    /// The events after the asked id, oldest first.
    pub events: Vec<Event>,
}

/// The state of sessions. Every method is atomic with respect to the others.
#[async_trait::async_trait]
pub trait SessionStore: Send + Sync + 'static {
    /// A signal bumped after every write, here or (for a shared store) in another process.
    fn changes(&self) -> watch::Receiver<u64>;

    /// Stores a session, replacing the one at its address.
    async fn put_session(&self, rec: &SessionRecord) -> Result<(), StoreError>;
    /// The session at `address`.
    async fn get_session(&self, address: &str) -> Result<Option<SessionRecord>, StoreError>;
    /// Every stored session (ended ones included), at most `max`.
    async fn list_sessions(&self, max: usize) -> Result<Vec<SessionRecord>, StoreError>;
    /// Removes a session.
    async fn delete_session(&self, address: &str) -> Result<(), StoreError>;

    /// Stores a run, replacing it; kept for `retention_ms` after `done_ms`, or until its deadline plus that.
    async fn put_run(&self, rec: &RunRecord, retention_ms: u64) -> Result<(), StoreError>;
    /// The run `id`.
    async fn get_run(&self, id: &str) -> Result<Option<RunRecord>, StoreError>;
    /// Records the answer to an inbox delivery; `false` when the run already has one.
    async fn put_answer(&self, run_id: &str, answer: &RunReply, ttl_ms: u64) -> Result<bool, StoreError>;
    /// The answer to an inbox delivery.
    async fn get_answer(&self, run_id: &str) -> Result<Option<RunReply>, StoreError>;

    /// Queues a delivery in a session's inbox.
    async fn push_inbox(&self, session: &str, item: &InboxItem) -> Result<(), StoreError>;
    /// The first `max` deliveries waiting, higher priority first, then oldest first; expired ones are dropped
    /// (LIM-6: a shared store reads only the page, never the whole inbox).
    async fn inbox(&self, session: &str, max: usize) -> Result<Vec<InboxItem>, StoreError>;
    /// The delivery of run `run_id` waiting in a session's inbox, unless expired.
    async fn inbox_item(&self, session: &str, run_id: &str) -> Result<Option<InboxItem>, StoreError>;
    /// Removes a delivery from an inbox.
    async fn remove_inbox(&self, session: &str, run_id: &str) -> Result<(), StoreError>;

    /// Appends a message to a transcript, keeping the newest `keep`; returns its sequence number.
    async fn append_message(&self, session: &str, msg: &StoredMessage, keep: usize) -> Result<u64, StoreError>;
    /// The newest `max` messages of a transcript (without `tool` messages unless `include_tools`), oldest first
    /// (LIM-6: a shared store reads only those, never the whole transcript).
    async fn recent_messages(
        &self,
        session: &str,
        max: usize,
        include_tools: bool,
    ) -> Result<Vec<HistoryMessage>, StoreError>;
    /// Deletes a transcript.
    async fn delete_messages(&self, session: &str) -> Result<(), StoreError>;

    /// Publishes an event, keeping the newest `keep`; returns it with its id.
    async fn publish(&self, event: &str, session: &str, data: Value, keep: usize) -> Result<Event, StoreError>;
    /// The events after `after` (all when `None`), dropping those older than `max_age_ms`.
    async fn events_after(&self, after: Option<u64>, max_age_ms: u64) -> Result<EventsAfter, StoreError>;

    /// Records that `from` waits on `to` until `until_ms` (POL-6); `token` tells this wait from another one.
    async fn add_wait_edge(&self, from: &str, to: &str, token: &str, until_ms: u64) -> Result<(), StoreError>;
    /// Removes a wait edge.
    async fn remove_wait_edge(&self, from: &str, to: &str, token: &str) -> Result<(), StoreError>;
    /// Every live wait edge `(from, to)`.
    async fn wait_edges(&self) -> Result<Vec<(String, String)>, StoreError>;
}

/// Whether `from` already waits, directly or through others, on `to` (POL-6), given the live edges; the path when so.
pub fn waits_on(edges: &[(String, String)], from: &str, to: &str) -> Option<Vec<String>> {
    let mut next: HashMap<&str, Vec<&str>> = HashMap::new();
    for (a, b) in edges {
        next.entry(a.as_str()).or_default().push(b.as_str());
    }
    let mut seen = std::collections::HashSet::new();
    let mut stack: Vec<Vec<&str>> = vec![vec![from]];
    while let Some(path) = stack.pop() {
        let last = *path.last().unwrap_or(&from);
        if last == to && path.len() > 1 {
            return Some(path.iter().map(|s| (*s).to_owned()).collect());
        }
        if !seen.insert(last) {
            continue;
        }
        for n in next.get(last).into_iter().flatten() {
            let mut p = path.clone();
            p.push(n);
            stack.push(p);
        }
    }
    None
}

/// The wait chain header a run was delivered under.
pub fn chain_of(rec: &RunRecord) -> WaitChain {
    WaitChain::parse(&rec.wait_chain).unwrap_or_default()
}

/// An RFC 3339 time from ms since the epoch.
pub fn rfc3339(ms: u64) -> String {
    crate::store::timestamp(ms)
}

/// Orders inbox deliveries: higher priority first, then oldest first (SND-12).
pub fn sort_inbox(items: &mut [InboxItem]) {
    items.sort_by(|a, b| b.priority.cmp(&a.priority).then(a.queued_ms.cmp(&b.queued_ms)));
}
