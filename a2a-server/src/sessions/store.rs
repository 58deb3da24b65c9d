//! Where the state of sessions lives (§17): sessions, runs, inbox deliveries and their answers, transcripts, the
//! event buffer and the wait edges (POL-6), behind one [`SessionStore`] trait with an embedded memory implementation
//! ([`MemorySessionStore`]).
//!
//! Waiting never sleeps on a timer: every store has a change signal ([`SessionStore::changes`]) that is bumped on
//! each write (by pub/sub for Redis, so that a write in another process wakes this one); waiters re-read on a bump.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Mutex;

use a2a_core::sessions::{
    Cleanup, Delivery, HistoryMessage, Provenance, Role, Run, RunReply, SendRequest, Session, WaitChain,
};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::sync::watch;

pub use crate::store::StoreError;
use crate::store::now_ms;

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

#[derive(Default)]
struct Inner {
    sessions: BTreeMap<String, SessionRecord>,
    runs: HashMap<String, (RunRecord, u64)>,
    answers: HashMap<String, (RunReply, u64)>,
    inboxes: HashMap<String, Vec<InboxItem>>,
    transcripts: HashMap<String, (u64, VecDeque<HistoryMessage>)>,
    events: VecDeque<Event>,
    next_event: u64,
    edges: HashMap<(String, String, String), u64>,
}

/// The embedded store: everything in this process's memory.
pub struct MemorySessionStore {
    inner: Mutex<Inner>,
    tx: watch::Sender<u64>,
}

impl Default for MemorySessionStore {
    fn default() -> Self {
        MemorySessionStore { inner: Mutex::new(Inner { next_event: 1, ..Inner::default() }), tx: watch::channel(0).0 }
    }
}

impl MemorySessionStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    fn write<T>(&self, f: impl FnOnce(&mut Inner) -> T) -> T {
        let out = {
            let mut g = self.inner.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            f(&mut g)
        };
        self.tx.send_modify(|v| *v = v.wrapping_add(1));
        out
    }

    fn read<T>(&self, f: impl FnOnce(&mut Inner) -> T) -> T {
        let mut g = self.inner.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        f(&mut g)
    }
}

/// An RFC 3339 time from ms since the epoch.
pub fn rfc3339(ms: u64) -> String {
    crate::store::timestamp(ms)
}

#[async_trait::async_trait]
impl SessionStore for MemorySessionStore {
    fn changes(&self) -> watch::Receiver<u64> {
        self.tx.subscribe()
    }

    async fn put_session(&self, rec: &SessionRecord) -> Result<(), StoreError> {
        self.write(|i| i.sessions.insert(rec.session.address.to_string(), rec.clone()));
        Ok(())
    }

    async fn get_session(&self, address: &str) -> Result<Option<SessionRecord>, StoreError> {
        Ok(self.read(|i| i.sessions.get(address).cloned()))
    }

    async fn list_sessions(&self, max: usize) -> Result<Vec<SessionRecord>, StoreError> {
        Ok(self.read(|i| i.sessions.values().take(max).cloned().collect()))
    }

    async fn delete_session(&self, address: &str) -> Result<(), StoreError> {
        self.write(|i| i.sessions.remove(address));
        Ok(())
    }

    async fn put_run(&self, rec: &RunRecord, retention_ms: u64) -> Result<(), StoreError> {
        let now = now_ms();
        let until = rec.done_ms.unwrap_or(rec.deadline_ms.max(now)).saturating_add(retention_ms);
        self.write(|i| {
            i.runs.retain(|_, (_, u)| *u > now);
            i.runs.insert(rec.run.run_id.clone(), (rec.clone(), until));
        });
        Ok(())
    }

    async fn get_run(&self, id: &str) -> Result<Option<RunRecord>, StoreError> {
        let now = now_ms();
        Ok(self.read(|i| i.runs.get(id).filter(|(_, u)| *u > now).map(|(r, _)| r.clone())))
    }

    async fn put_answer(&self, run_id: &str, answer: &RunReply, ttl_ms: u64) -> Result<bool, StoreError> {
        let now = now_ms();
        Ok(self.write(|i| {
            i.answers.retain(|_, (_, u)| *u > now);
            if i.answers.contains_key(run_id) {
                return false;
            }
            i.answers.insert(run_id.to_owned(), (answer.clone(), now.saturating_add(ttl_ms)));
            true
        }))
    }

    async fn get_answer(&self, run_id: &str) -> Result<Option<RunReply>, StoreError> {
        Ok(self.read(|i| i.answers.get(run_id).map(|(a, _)| a.clone())))
    }

    async fn push_inbox(&self, session: &str, item: &InboxItem) -> Result<(), StoreError> {
        self.write(|i| i.inboxes.entry(session.to_owned()).or_default().push(item.clone()));
        Ok(())
    }

    async fn inbox(&self, session: &str, max: usize) -> Result<Vec<InboxItem>, StoreError> {
        let now = now_ms();
        Ok(self.read(|i| {
            let Some(items) = i.inboxes.get_mut(session) else { return Vec::new() };
            items.retain(|d| d.until_ms > now);
            let mut out = items.clone();
            sort_inbox(&mut out);
            out.truncate(max);
            out
        }))
    }

    async fn inbox_item(&self, session: &str, run_id: &str) -> Result<Option<InboxItem>, StoreError> {
        let now = now_ms();
        Ok(self.read(|i| {
            i.inboxes.get(session)?.iter().find(|d| d.delivery.run_id == run_id && d.until_ms > now).cloned()
        }))
    }

    async fn remove_inbox(&self, session: &str, run_id: &str) -> Result<(), StoreError> {
        self.write(|i| {
            if let Some(items) = i.inboxes.get_mut(session) {
                items.retain(|d| d.delivery.run_id != run_id);
            }
        });
        Ok(())
    }

    async fn append_message(&self, session: &str, msg: &StoredMessage, keep: usize) -> Result<u64, StoreError> {
        let at = rfc3339(now_ms());
        Ok(self.write(|i| {
            let (seq, list) = i.transcripts.entry(session.to_owned()).or_default();
            *seq += 1;
            list.push_back(msg.clone().at(*seq, at));
            while list.len() > keep.max(1) {
                list.pop_front();
            }
            *seq
        }))
    }

    async fn recent_messages(
        &self,
        session: &str,
        max: usize,
        include_tools: bool,
    ) -> Result<Vec<HistoryMessage>, StoreError> {
        Ok(self.read(|i| {
            let Some((_, list)) = i.transcripts.get(session) else { return Vec::new() };
            let mut out: Vec<HistoryMessage> =
                list.iter().rev().filter(|m| include_tools || m.role != Role::Tool).take(max).cloned().collect();
            out.reverse();
            out
        }))
    }

    async fn delete_messages(&self, session: &str) -> Result<(), StoreError> {
        self.write(|i| i.transcripts.remove(session));
        Ok(())
    }

    async fn publish(&self, event: &str, session: &str, data: Value, keep: usize) -> Result<Event, StoreError> {
        Ok(self.write(|i| {
            let e =
                Event { id: i.next_event, event: event.to_owned(), session: session.to_owned(), data, at_ms: now_ms() };
            i.next_event += 1;
            i.events.push_back(e.clone());
            while i.events.len() > keep.max(1) {
                i.events.pop_front();
            }
            e
        }))
    }

    async fn events_after(&self, after: Option<u64>, max_age_ms: u64) -> Result<EventsAfter, StoreError> {
        let oldest_kept = now_ms().saturating_sub(max_age_ms);
        Ok(self.read(|i| {
            while i.events.front().is_some_and(|e| e.at_ms < oldest_kept) {
                i.events.pop_front();
            }
            let first = i.events.front().map_or(i.next_event, |e| e.id);
            let after_id = after.unwrap_or(0);
            EventsAfter {
                gap: after.is_some() && after_id.saturating_add(1) < first,
                events: i.events.iter().filter(|e| e.id > after_id).cloned().collect(),
            }
        }))
    }

    async fn add_wait_edge(&self, from: &str, to: &str, token: &str, until_ms: u64) -> Result<(), StoreError> {
        self.write(|i| i.edges.insert((from.to_owned(), to.to_owned(), token.to_owned()), until_ms));
        Ok(())
    }

    async fn remove_wait_edge(&self, from: &str, to: &str, token: &str) -> Result<(), StoreError> {
        self.write(|i| i.edges.remove(&(from.to_owned(), to.to_owned(), token.to_owned())));
        Ok(())
    }

    async fn wait_edges(&self) -> Result<Vec<(String, String)>, StoreError> {
        let now = now_ms();
        Ok(self.read(|i| {
            i.edges.retain(|_, u| *u > now);
            i.edges.keys().map(|(a, b, _)| (a.clone(), b.clone())).collect()
        }))
    }
}

/// Orders inbox deliveries: higher priority first, then oldest first (SND-12).
pub fn sort_inbox(items: &mut [InboxItem]) {
    items.sort_by(|a, b| b.priority.cmp(&a.priority).then(a.queued_ms.cmp(&b.queued_ms)));
}
