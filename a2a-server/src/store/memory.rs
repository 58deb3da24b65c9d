//! The embedded in-memory store: the default, nothing to set up. State lives in this process only; its work queue is
//! the same abstraction as the shared stores' (claims, touches, a visibility timeout), held in memory.

use std::collections::{HashMap, VecDeque};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use a2a_core::wire::ExecutionStatus;
use tokio::sync::{Notify, watch};

use super::{
    Created, ExecutionRecord, IdempotencyClaim, NegotiationRecord, Store, StoreError, Transition, TransitionOutcome,
    WorkItem, now_ms,
};

/// Limits of the in-memory store.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct MemoryLimits {
    /// Negotiations kept at most; beyond it the one expiring soonest is dropped.
    pub max_negotiations: usize,
    /// Executions waiting for CONFIRM at most; beyond it EXECUTE gets `overloaded`.
    pub max_received: usize,
    /// How long a terminal execution is kept.
    pub retention: Duration,
    /// Replay nonces kept at most (the oldest are dropped first; keep it above the request rate times 330 s).
    pub max_nonces: usize,
    /// How long claimed work may go untouched before it is handed to another worker.
    pub visibility_timeout: Duration,
}

impl Default for MemoryLimits {
    fn default() -> Self {
        MemoryLimits {
            max_negotiations: 100_000,
            max_received: 10_000,
            retention: Duration::from_secs(3600),
            max_nonces: 1_000_000,
            visibility_timeout: Duration::from_secs(30),
        }
    }
}

struct Entry {
    rec: ExecutionRecord,
    tx: watch::Sender<ExecutionStatus>,
}

#[derive(Default)]
struct Inner {
    negotiations: HashMap<String, NegotiationRecord>,
    executions: HashMap<String, Entry>,
    /// (sender, key) -> (execution id, fingerprint)
    idempotency: HashMap<(String, String), (String, String)>,
    /// (issuer, jti) -> until
    nonces: HashMap<(String, String), u64>,
    received: usize,
    inserts: u64,
    /// Queued work: (sequence, execution id, deliveries so far).
    ready: VecDeque<(u64, String, u64)>,
    /// Claimed work: sequence -> (execution id, deliveries, lease end).
    held: HashMap<u64, (String, u64, u64)>,
    seq: u64,
}

/// The embedded store. Cheap operations under one mutex; expired entries are purged as it goes.
pub struct MemoryStore {
    inner: Mutex<Inner>,
    limits: MemoryLimits,
    work: Notify,
}

impl Default for MemoryStore {
    fn default() -> Self {
        Self::new(MemoryLimits::default())
    }
}

impl MemoryStore {
    /// A store with these limits.
    pub fn new(limits: MemoryLimits) -> Self {
        MemoryStore { inner: Mutex::new(Inner::default()), limits, work: Notify::new() }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic while holding the lock cannot leave a record half-written (every update is a single assignment),
        // so a poisoned lock is safe to reuse.
        self.inner.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Drops everything that has expired. Runs on its own every few thousand writes; callable directly.
    pub fn purge_expired(&self) {
        let now = now_ms();
        let mut g = self.lock();
        purge(&mut g, now);
    }

    /// Counts of what the store holds: (negotiations, executions, nonces).
    pub fn sizes(&self) -> (usize, usize, usize) {
        let g = self.lock();
        (g.negotiations.len(), g.executions.len(), g.nonces.len())
    }

    fn apply(&self, g: &mut Inner, id: &str, t: &Transition) -> TransitionOutcome {
        let retention = self.limits.retention.as_millis() as u64;
        let Some(e) = g.executions.get_mut(id) else { return TransitionOutcome::NotFound };
        let before = e.rec.status;
        if !e.rec.apply(t, retention) {
            return TransitionOutcome::Refused(Box::new(e.rec.clone()));
        }
        let rec = e.rec.clone();
        e.tx.send_replace(rec.status);
        if before == ExecutionStatus::Received {
            g.received = g.received.saturating_sub(1);
        }
        if matches!(t, Transition::Accept { .. }) {
            g.seq += 1;
            let seq = g.seq;
            g.ready.push_back((seq, id.to_owned(), 0));
            self.work.notify_one();
        }
        TransitionOutcome::Applied(Box::new(rec))
    }

    /// Takes up to `max` items: expired claims first (taken over), then queued work.
    fn take(&self, g: &mut Inner, max: usize) -> Vec<WorkItem> {
        let now = now_ms();
        let lease = self.limits.visibility_timeout.as_millis() as u64;
        let expired: Vec<u64> = g.held.iter().filter(|(_, h)| h.2 <= now).map(|(s, _)| *s).collect();
        for seq in expired {
            if let Some((id, deliveries, _)) = g.held.remove(&seq) {
                g.ready.push_front((seq, id, deliveries));
            }
        }
        let mut out = Vec::new();
        while out.len() < max {
            let Some((seq, id, deliveries)) = g.ready.pop_front() else { break };
            // Work whose execution is gone (expired) is dropped.
            let Some(e) = g.executions.get(&id) else { continue };
            let deliveries = deliveries + 1;
            out.push(WorkItem {
                execution_id: id.clone(),
                capability: e.rec.capability.clone(),
                deliveries,
                snapshot: Some(e.rec.clone()),
                receipt: seq.to_string(),
            });
            g.held.insert(seq, (id, deliveries, now.saturating_add(lease)));
        }
        out
    }
}

fn purge(g: &mut Inner, now: u64) {
    g.negotiations.retain(|_, n| n.expires_at_ms > now);
    let mut dropped_received = 0;
    g.executions.retain(|_, e| {
        let keep = e.rec.retain_until_ms > now;
        if !keep && e.rec.status == ExecutionStatus::Received {
            dropped_received += 1;
        }
        keep
    });
    g.received = g.received.saturating_sub(dropped_received);
    let Inner { idempotency, executions, nonces, .. } = g;
    idempotency.retain(|_, (id, _)| executions.contains_key(id));
    nonces.retain(|_, until| *until > now);
}

fn maybe_purge(g: &mut Inner) {
    g.inserts = g.inserts.wrapping_add(1);
    if g.inserts.is_multiple_of(4096) {
        purge(g, now_ms());
    }
}

#[async_trait::async_trait]
impl Store for MemoryStore {
    async fn put_negotiation(&self, rec: NegotiationRecord) -> Result<(), StoreError> {
        let mut g = self.lock();
        maybe_purge(&mut g);
        if g.negotiations.len() >= self.limits.max_negotiations {
            purge(&mut g, now_ms());
            if g.negotiations.len() >= self.limits.max_negotiations {
                let oldest = g.negotiations.values().min_by_key(|n| n.expires_at_ms).map(|n| n.id.clone());
                if let Some(id) = oldest {
                    g.negotiations.remove(&id);
                }
            }
        }
        g.negotiations.insert(rec.id.clone(), rec);
        Ok(())
    }

    async fn get_negotiation(&self, id: &str) -> Result<Option<NegotiationRecord>, StoreError> {
        let g = self.lock();
        Ok(g.negotiations.get(id).filter(|n| n.expires_at_ms > now_ms()).cloned())
    }

    async fn create_execution(
        &self,
        rec: ExecutionRecord,
        idempotency: Option<IdempotencyClaim>,
    ) -> Result<Created, StoreError> {
        let mut g = self.lock();
        maybe_purge(&mut g);
        if let Some(claim) = &idempotency {
            let key = (claim.sender.clone(), claim.key.clone());
            if let Some((id, fp)) = g.idempotency.get(&key) {
                if *fp != claim.fingerprint {
                    return Ok(Created::Conflict);
                }
                if let Some(e) = g.executions.get(id) {
                    return Ok(Created::Existing(Box::new(e.rec.clone())));
                }
            }
        }
        if g.received >= self.limits.max_received {
            purge(&mut g, now_ms());
            if g.received >= self.limits.max_received {
                return Ok(Created::Full);
            }
        }
        let mut rec = rec;
        if let Some(claim) = idempotency {
            rec.idempotency_key = Some(claim.key.clone());
            g.idempotency.insert((claim.sender, claim.key), (rec.id.clone(), claim.fingerprint));
        }
        rec.rev = 1;
        g.received += 1;
        let (tx, _) = watch::channel(rec.status);
        g.executions.insert(rec.id.clone(), Entry { rec, tx });
        Ok(Created::New)
    }

    async fn get_execution(&self, id: &str) -> Result<Option<ExecutionRecord>, StoreError> {
        let now = now_ms();
        let g = self.lock();
        // A record past its retention is gone, whether or not a purge has run yet.
        Ok(g.executions.get(id).filter(|e| e.rec.retain_until_ms > now).map(|e| e.rec.clone()))
    }

    async fn transition(
        &self,
        id: &str,
        t: Transition,
        _seen: Option<&ExecutionRecord>,
    ) -> Result<TransitionOutcome, StoreError> {
        let mut g = self.lock();
        Ok(self.apply(&mut g, id, &t))
    }

    async fn wait_change(
        &self,
        id: &str,
        seen: ExecutionStatus,
        timeout: Duration,
    ) -> Result<Option<ExecutionRecord>, StoreError> {
        let mut rx = {
            let g = self.lock();
            let Some(e) = g.executions.get(id) else { return Ok(None) };
            if e.rec.status != seen {
                return Ok(Some(e.rec.clone()));
            }
            e.tx.subscribe()
        };
        // The receiver was created under the lock with the current status marked as seen, so a change made after
        // the lock was released is never missed.
        let _ = tokio::time::timeout(timeout, rx.wait_for(|s| *s != seen)).await;
        self.get_execution(id).await
    }

    async fn remember_jti(&self, issuer: &str, jti: &str, until_ms: u64) -> Result<bool, StoreError> {
        let now = now_ms();
        let mut g = self.lock();
        let key = (issuer.to_owned(), jti.to_owned());
        if g.nonces.get(&key).is_some_and(|until| *until > now) {
            return Ok(false);
        }
        if g.nonces.len() >= self.limits.max_nonces {
            g.nonces.retain(|_, until| *until > now);
            if g.nonces.len() >= self.limits.max_nonces {
                // Refusing every signed request would be worse than forgetting the nonce closest to expiry.
                let soonest = g.nonces.iter().min_by_key(|(_, u)| **u).map(|(k, _)| k.clone());
                if let Some(k) = soonest {
                    g.nonces.remove(&k);
                }
            }
        }
        g.nonces.insert(key, until_ms);
        Ok(true)
    }

    async fn terminal_signal(&self, id: &str, timeout: Duration) -> bool {
        let mut rx = {
            let g = self.lock();
            let Some(e) = g.executions.get(id) else { return false };
            e.tx.subscribe()
        };
        matches!(tokio::time::timeout(timeout, rx.wait_for(|s| s.is_terminal())).await, Ok(Ok(_)))
    }

    async fn prepare_queue(&self, _capabilities: &[String]) -> Result<(), StoreError> {
        Ok(())
    }

    async fn claim_work(&self, _partition: usize, max: usize, wait: Duration) -> Result<Vec<WorkItem>, StoreError> {
        let until = tokio::time::Instant::now() + wait;
        loop {
            let notified = self.work.notified();
            {
                let mut g = self.lock();
                let items = self.take(&mut g, max.max(1));
                if !items.is_empty() {
                    // Leave the wake-up for another worker when work remains.
                    if !g.ready.is_empty() {
                        self.work.notify_one();
                    }
                    return Ok(items);
                }
            }
            // Wake at the latest when the earliest claim could be taken over.
            let next_expiry = {
                let g = self.lock();
                g.held.values().map(|h| h.2).min()
            };
            let mut deadline = until;
            if let Some(ms) = next_expiry {
                let d = tokio::time::Instant::now() + Duration::from_millis(ms.saturating_sub(now_ms()) + 1);
                deadline = deadline.min(d);
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() && tokio::time::Instant::now() >= until {
                let mut g = self.lock();
                return Ok(self.take(&mut g, max.max(1)));
            }
        }
    }

    async fn touch_work(&self, items: &[WorkItem]) -> Result<(), StoreError> {
        let lease_end = now_ms().saturating_add(self.limits.visibility_timeout.as_millis() as u64);
        let mut g = self.lock();
        for item in items {
            if let Some(h) = item.receipt.parse::<u64>().ok().and_then(|seq| g.held.get_mut(&seq)) {
                h.2 = lease_end;
            }
        }
        Ok(())
    }

    async fn complete_work(
        &self,
        item: &WorkItem,
        t: Option<Transition>,
        _seen: Option<&ExecutionRecord>,
    ) -> Result<Option<TransitionOutcome>, StoreError> {
        let mut g = self.lock();
        let outcome = t.map(|t| self.apply(&mut g, &item.execution_id, &t));
        let release = match &outcome {
            Some(TransitionOutcome::Refused(r)) => r.status.is_terminal(),
            _ => true,
        };
        if release && let Ok(seq) = item.receipt.parse::<u64>() {
            g.held.remove(&seq);
        }
        Ok(outcome)
    }

    fn visibility_timeout(&self) -> Duration {
        self.limits.visibility_timeout
    }
}
