//! The embedded [`SessionStore`]: everything in this process's memory, under one lock; every write bumps the change
//! signal.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Mutex;

use a2a_core::sessions::{HistoryMessage, Role, RunReply};
use serde_json::Value;
use tokio::sync::watch;

use super::{
    Event, EventsAfter, InboxItem, RunRecord, SessionRecord, SessionStore, StoreError, StoredMessage, rfc3339,
    sort_inbox,
};
use crate::store::now_ms;

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
