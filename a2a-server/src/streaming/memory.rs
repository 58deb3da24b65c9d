//! The in-process [`EventLog`] of the embedded store: one vector of events per execution under a lock, dropped at
//! the execution's retention; at most `max_logs` executions' logs (the ones kept shortest go first).
//!
//! ## Cost (LIM-6)
//!
//! The logs have an index ordered by retention (a `BTreeSet` of `(retain until, execution id)`): each write first
//! drops at most [`EXPIRE_STEP`] expired logs from its front, and a new log at the bound evicts the first of the
//! index (expired or kept shortest), so an append, a read and an eviction are `O(log n)` in the logs held, never a
//! walk of them under the lock. A read never returns a log past its retention, whether or not it was dropped yet.

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Notify;

use super::{Appended, EventKind, EventLimits, EventLog, StreamEvent};
use crate::store::memory::EXPIRE_STEP;
use crate::store::{StoreError, now_ms};

#[derive(Default)]
struct Log {
    events: Vec<StreamEvent>,
    progress: u64,
    bytes: u64,
    truncated: bool,
    sealed: bool,
    retain_until_ms: u64,
}

#[derive(Default)]
struct Logs {
    by_id: HashMap<Arc<str>, Log>,
    /// The logs by `retain_until_ms`.
    expiry: BTreeSet<(u64, Arc<str>)>,
}

impl Logs {
    fn remove_first(&mut self) -> bool {
        let Some((_, id)) = self.expiry.pop_first() else { return false };
        self.by_id.remove(&id);
        true
    }
}

/// The in-memory event log.
pub struct MemoryEventLog {
    limits: EventLimits,
    max_logs: usize,
    logs: Mutex<Logs>,
    wakers: super::Wakers,
    /// Entries of the retention index looked at by the writes so far (their expiry and evictions).
    visited: AtomicU64,
}

impl MemoryEventLog {
    /// A log with these per-execution limits, keeping the events of at most `max_logs` executions.
    pub fn new(limits: EventLimits, max_logs: usize) -> Self {
        MemoryEventLog {
            limits,
            max_logs: max_logs.max(1),
            logs: Mutex::new(Logs::default()),
            wakers: Default::default(),
            visited: AtomicU64::new(0),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Logs> {
        self.logs.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Runs `f` on the execution's log, creating it (and making room for it) when absent.
    fn with_log<T>(&self, id: &str, retain_until_ms: u64, f: impl FnOnce(&mut Log) -> T) -> T {
        let out = {
            let now = now_ms();
            let mut g = self.lock();
            // LIM-6: a few expired logs from the front of the index, more than a write adds.
            let mut visited = 0u64;
            for _ in 0..EXPIRE_STEP {
                match g.expiry.first() {
                    Some((at, _)) if *at <= now => {
                        g.remove_first();
                        visited += 1;
                    }
                    _ => break,
                }
            }
            let fresh = !g.by_id.contains_key(id);
            if fresh && g.by_id.len() >= self.max_logs && g.remove_first() {
                // At the bound: the log kept shortest (or expired) makes room.
                visited += 1;
            }
            self.visited.fetch_add(visited, Ordering::Relaxed);
            let Logs { by_id, expiry } = &mut *g;
            let key: Arc<str> = by_id.get_key_value(id).map_or_else(|| Arc::from(id), |(k, _)| k.clone());
            let log = by_id.entry(key.clone()).or_default();
            let until = log.retain_until_ms.max(retain_until_ms);
            if fresh || until != log.retain_until_ms {
                expiry.remove(&(log.retain_until_ms, key.clone()));
                expiry.insert((until, key));
                log.retain_until_ms = until;
            }
            f(log)
        };
        self.wakers.wake(id);
        out
    }

    /// Executions whose logs are kept (for tests of the bound).
    pub fn len(&self) -> usize {
        self.lock().by_id.len()
    }

    /// Whether no log is kept.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Entries of the retention index the writes looked at so far, to expire or evict them (LIM-6: at most
    /// [`EXPIRE_STEP`] + 1 per write, whatever the number of logs held).
    pub fn visited(&self) -> u64 {
        self.visited.load(Ordering::Relaxed)
    }
}

fn push(log: &mut Log, kind: EventKind, data: &str) -> u64 {
    let id = log.events.len() as u64 + 1;
    log.events.push(StreamEvent { id, kind, data: data.to_owned() });
    id
}

#[async_trait::async_trait]
impl EventLog for MemoryEventLog {
    async fn append(
        &self,
        execution_id: &str,
        kind: EventKind,
        data: &str,
        retain_until_ms: u64,
    ) -> Result<Appended, StoreError> {
        let limits = self.limits;
        Ok(self.with_log(execution_id, retain_until_ms, |log| {
            if log.sealed {
                return Appended::Sealed;
            }
            if kind == EventKind::Progress {
                if log.truncated {
                    return Appended::Dropped;
                }
                let len = data.len() as u64;
                if log.progress + 1 > limits.max_events || log.bytes + len > limits.max_bytes {
                    log.truncated = true;
                    return Appended::Truncated(push(log, EventKind::Truncated, &limits.truncated_data()));
                }
                log.progress += 1;
                log.bytes += len;
            }
            Appended::Ok(push(log, kind, data))
        }))
    }

    async fn finish(&self, execution_id: &str, data: &str, retain_until_ms: u64) -> Result<u64, StoreError> {
        Ok(self.with_log(execution_id, retain_until_ms, |log| {
            if log.sealed {
                return log.events.len() as u64;
            }
            log.sealed = true;
            push(log, EventKind::Result, data)
        }))
    }

    async fn read(&self, execution_id: &str, after: u64, max: usize) -> Result<Vec<StreamEvent>, StoreError> {
        let logs = self.lock();
        let Some(log) = logs.by_id.get(execution_id).filter(|l| l.retain_until_ms > now_ms()) else {
            return Ok(Vec::new());
        };
        let start = usize::try_from(after).unwrap_or(usize::MAX).min(log.events.len());
        Ok(log.events[start..].iter().take(max).cloned().collect())
    }

    async fn last_id(&self, execution_id: &str) -> Result<u64, StoreError> {
        Ok(self
            .lock()
            .by_id
            .get(execution_id)
            .filter(|l| l.retain_until_ms > now_ms())
            .map_or(0, |l| l.events.len() as u64))
    }

    async fn wait(&self, execution_id: &str, after: u64, timeout: Duration) {
        let notify: Arc<Notify> = self.wakers.register(execution_id);
        let notified = notify.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        if self.last_id(execution_id).await.unwrap_or(0) > after {
            return;
        }
        let _ = tokio::time::timeout(timeout, notified).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: EventLimits = EventLimits { max_events: 10, max_bytes: 1000 };

    async fn status(log: &MemoryEventLog, id: &str, until: u64) {
        let appended = log.append(id, EventKind::Status, "{}", until).await.expect("append");
        assert!(matches!(appended, Appended::Ok(_)), "{id}: {appended:?}");
    }

    /// LIM-6: filled three times past its bound, the log keeps `max_logs` executions, the newest; a log past its
    /// retention is never read and is dropped by the writes that follow, a few per write.
    #[tokio::test]
    async fn filled_past_its_bound_it_keeps_the_newest_and_drops_the_expired() {
        let log = MemoryEventLog::new(LIMITS, 1_000);
        let until = now_ms() + 3_600_000;
        for i in 0..3_000u64 {
            status(&log, &format!("x{i}"), until + i).await;
            assert!(log.len() <= 1_000, "the bound holds at {i}");
        }
        assert_eq!(log.len(), 1_000);
        for i in [0u64, 1_999] {
            assert!(log.read(&format!("x{i}"), 0, 10).await.expect("read").is_empty(), "x{i} was evicted");
        }
        for i in [2_000u64, 2_999] {
            assert_eq!(log.read(&format!("x{i}"), 0, 10).await.expect("read").len(), 1, "x{i} is kept");
        }
        // Expired logs: never read, dropped EXPIRE_STEP per write.
        let log = MemoryEventLog::new(LIMITS, 1_000);
        let soon = now_ms() + 2_000;
        for i in 0..100 {
            status(&log, &format!("old{i}"), soon).await;
        }
        assert_eq!(log.len(), 100, "held until they expire");
        while now_ms() <= soon {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert!(log.read("old99", 0, 10).await.expect("read").is_empty(), "an expired log is never read");
        assert_eq!(log.last_id("old99").await.expect("last"), 0);
        let held = log.len();
        status(&log, "new", until).await;
        assert_eq!(log.len(), held + 1 - EXPIRE_STEP, "one write dropped EXPIRE_STEP expired logs");
        for i in 0..10 {
            status(&log, &format!("new{i}"), until).await;
        }
        assert_eq!(log.len(), 11, "the writes that followed dropped the rest");
    }

    /// LIM-6: the work of a write (entries of the retention index it looks at) does not grow with the logs held:
    /// at most EXPIRE_STEP + 1 per write, at the bound, with a thousand or a hundred thousand held.
    #[tokio::test]
    async fn the_work_of_a_write_at_the_bound_does_not_grow_with_the_logs_held() {
        let mut per_write = Vec::new();
        for held in [1_000usize, 100_000] {
            let log = MemoryEventLog::new(LIMITS, held);
            let until = now_ms() + 3_600_000;
            for i in 0..held {
                status(&log, &format!("x{i}"), until).await;
            }
            assert_eq!(log.len(), held);
            let before = log.visited();
            for i in 0..1_000 {
                // A new execution's log at the bound (evicts one), and another event on a held one.
                status(&log, &format!("y{i}"), until).await;
                status(&log, &format!("y{i}"), until).await;
            }
            assert_eq!(log.len(), held, "the bound holds");
            let visited = log.visited() - before;
            assert!(visited <= 2_000 * (EXPIRE_STEP as u64 + 1), "{visited} entries looked at by 2,000 writes");
            per_write.push(visited);
        }
        assert_eq!(per_write[0], per_write[1], "the same work with 1,000 and 100,000 logs held");
    }
}
