//! What this process knows of executions without reading Redis: the record it created, the last record it wrote, and
//! the terminal (final, ST-2) records it wrote or read. One map under a lock, bounded in bytes and in age; cheaper per
//! operation than a general-purpose concurrent cache, and one entry per execution instead of one per cache.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::store::ExecutionRecord;

/// How a known record came to be known.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Known {
    /// Created here and not changed here since (CONFIRM checks its transition on it).
    Created,
    /// The last non-terminal record written here (a long-poll starts from it).
    Written,
    /// Terminal: final, served as the stored record.
    Final,
}

struct Entry {
    rec: Arc<ExecutionRecord>,
    known: Known,
    weight: u64,
    /// When the entry took its place in the eviction order (its age).
    at: Instant,
    /// Which of the entry's places in the eviction order is current.
    generation: u64,
}

#[derive(Default)]
struct Inner {
    map: HashMap<Arc<str>, Entry>,
    /// Ids in the order they took their place; an id whose generation changed since is skipped.
    order: VecDeque<(Arc<str>, u64)>,
    bytes: u64,
    generation: u64,
}

/// The records known here, by execution id; at most `max_bytes` (by `weight`) and none older than `ttl`.
pub(super) struct Local {
    inner: Mutex<Inner>,
    max_bytes: u64,
    ttl: Duration,
}

impl Local {
    pub(super) fn new(max_bytes: u64, ttl: Duration) -> Self {
        Local { inner: Mutex::new(Inner::default()), max_bytes, ttl }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Records what is known of `rec.id`. A final record stays final: a later non-final one is ignored. An entry keeps
    /// its age when it changes, except when it becomes final.
    pub(super) fn put(&self, rec: Arc<ExecutionRecord>, known: Known, weight: u32) {
        let weight = u64::from(weight);
        let now = Instant::now();
        let mut g = self.lock();
        g.generation += 1;
        let generation = g.generation;
        let ttl = self.ttl;
        let (requeue, old) = match g.map.get_mut(rec.id.as_str()) {
            Some(e) if e.at.elapsed() <= ttl => {
                if e.known == Known::Final {
                    return;
                }
                let requeue = known == Known::Final;
                let old = e.weight;
                e.rec = rec.clone();
                e.known = known;
                e.weight = weight;
                if requeue {
                    e.at = now;
                    e.generation = generation;
                }
                (requeue.then(|| rec.id.as_str().into()), Some(old))
            }
            _ => (None, None),
        };
        match old {
            Some(old) => {
                g.bytes = g.bytes - old + weight;
                if let Some(key) = requeue {
                    g.order.push_back((key, generation));
                }
            }
            None => {
                let key: Arc<str> = rec.id.as_str().into();
                if let Some(stale) = g.map.insert(key.clone(), Entry { rec, known, weight, at: now, generation }) {
                    g.bytes -= stale.weight;
                }
                g.bytes += weight;
                g.order.push_back((key, generation));
            }
        }
        self.trim(&mut g);
    }

    /// Drops entries older than the age bound, then the oldest until the bytes are within the bound.
    fn trim(&self, g: &mut Inner) {
        while let Some((key, generation)) = g.order.front() {
            let current = g.map.get(key).filter(|e| e.generation == *generation);
            let Some(e) = current else {
                g.order.pop_front();
                continue;
            };
            if g.bytes <= self.max_bytes && e.at.elapsed() <= self.ttl {
                break;
            }
            let weight = e.weight;
            let key = key.clone();
            g.order.pop_front();
            g.map.remove(&key);
            g.bytes -= weight;
        }
    }

    /// The record known of `id`, if it is not older than the age bound.
    pub(super) fn get(&self, id: &str) -> Option<(Arc<ExecutionRecord>, Known)> {
        let g = self.lock();
        g.map.get(id).filter(|e| e.at.elapsed() <= self.ttl).map(|e| (e.rec.clone(), e.known))
    }

    /// The final record of `id`, if one is known.
    pub(super) fn final_record(&self, id: &str) -> Option<Arc<ExecutionRecord>> {
        self.get(id).filter(|(_, k)| *k == Known::Final).map(|(r, _)| r)
    }

    /// Forgets a non-final record of `id` (a write here failed or was refused: what is stored is not known).
    pub(super) fn forget(&self, id: &str) {
        let mut g = self.lock();
        if let Some(e) = g.map.get(id).filter(|e| e.known != Known::Final) {
            let weight = e.weight;
            g.map.remove(id);
            g.bytes -= weight;
        }
    }
}

#[cfg(test)]
mod tests {
    use a2a_core::wire::ExecutionStatus;
    use serde_json::json;

    use super::*;

    fn rec(id: &str, status: ExecutionStatus) -> Arc<ExecutionRecord> {
        Arc::new(ExecutionRecord {
            id: id.into(),
            negotiation_id: "n".into(),
            sender: "s".into(),
            capability: "c".into(),
            payload: json!({}),
            status,
            timeout_ms: 1,
            created_at_ms: 0,
            updated_at_ms: 0,
            confirm_by_ms: 0,
            deadline_ms: None,
            confirmed: false,
            attempts: 0,
            result: None,
            error: None,
            retain_until_ms: 0,
            idempotency_key: None,
            sender_verified: false,
            traceparent: None,
            rev: 1,
        })
    }

    #[test]
    fn a_final_record_stays_final_and_is_not_forgotten() {
        let l = Local::new(1 << 20, Duration::from_secs(60));
        l.put(rec("a", ExecutionStatus::Received), Known::Created, 10);
        assert_eq!(l.get("a").map(|(_, k)| k), Some(Known::Created));
        l.put(rec("a", ExecutionStatus::Accepted), Known::Written, 10);
        assert_eq!(l.get("a").map(|(r, k)| (r.status, k)), Some((ExecutionStatus::Accepted, Known::Written)));
        assert!(l.final_record("a").is_none());
        l.put(rec("a", ExecutionStatus::Succeeded), Known::Final, 10);
        l.put(rec("a", ExecutionStatus::Running), Known::Written, 10);
        l.forget("a");
        assert_eq!(l.final_record("a").map(|r| r.status), Some(ExecutionStatus::Succeeded));
        l.put(rec("b", ExecutionStatus::Accepted), Known::Written, 10);
        l.forget("b");
        assert!(l.get("b").is_none());
        assert_eq!(l.lock().bytes, 10);
    }

    #[test]
    fn the_oldest_entries_go_first_when_the_bytes_are_over_the_bound() {
        let l = Local::new(100, Duration::from_secs(60));
        for i in 0..10 {
            l.put(rec(&format!("e{i}"), ExecutionStatus::Received), Known::Created, 20);
        }
        let kept: Vec<usize> = (0..10).filter(|i| l.get(&format!("e{i}")).is_some()).collect();
        assert_eq!(kept, vec![5, 6, 7, 8, 9]);
        // A record that became final takes a new place: it outlives the ones created after it.
        l.put(rec("e5", ExecutionStatus::Succeeded), Known::Final, 20);
        l.put(rec("x", ExecutionStatus::Received), Known::Created, 20);
        assert!(l.get("e6").is_none() && l.final_record("e5").is_some());
        let g = l.lock();
        assert_eq!(g.bytes, g.map.values().map(|e| e.weight).sum::<u64>());
        assert!(g.bytes <= 100);
    }

    #[test]
    fn entries_older_than_the_age_bound_are_gone() {
        let l = Local::new(1 << 20, Duration::from_millis(30));
        l.put(rec("a", ExecutionStatus::Received), Known::Created, 10);
        std::thread::sleep(Duration::from_millis(50));
        assert!(l.get("a").is_none());
        l.put(rec("b", ExecutionStatus::Received), Known::Created, 10);
        assert_eq!(l.lock().map.len(), 1, "the old entry was dropped when another came");
    }
}
