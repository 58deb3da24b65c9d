//! The embedded in-memory store: the default, nothing to set up. State lives in this process only.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use a2a_core::wire::ExecutionStatus;
use tokio::sync::watch;

use super::{
    Created, ExecutionRecord, IdempotencyClaim, NegotiationRecord, Store, StoreError, Transition, TransitionOutcome,
    now_ms,
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
}

impl Default for MemoryLimits {
    fn default() -> Self {
        MemoryLimits {
            max_negotiations: 100_000,
            max_received: 10_000,
            retention: Duration::from_secs(3600),
            max_nonces: 1_000_000,
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
}

/// The embedded store. Cheap operations under one mutex; expired entries are purged as it goes.
pub struct MemoryStore {
    inner: Mutex<Inner>,
    limits: MemoryLimits,
}

impl Default for MemoryStore {
    fn default() -> Self {
        Self::new(MemoryLimits::default())
    }
}

impl MemoryStore {
    /// A store with these limits.
    pub fn new(limits: MemoryLimits) -> Self {
        MemoryStore { inner: Mutex::new(Inner::default()), limits }
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
        if let Some(claim) = idempotency {
            g.idempotency.insert((claim.sender, claim.key), (rec.id.clone(), claim.fingerprint));
        }
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

    async fn transition(&self, id: &str, t: Transition) -> Result<TransitionOutcome, StoreError> {
        let retention = self.limits.retention.as_millis() as u64;
        let mut g = self.lock();
        let Some(e) = g.executions.get_mut(id) else { return Ok(TransitionOutcome::NotFound) };
        let before = e.rec.status;
        if !e.rec.apply(&t, retention) {
            return Ok(TransitionOutcome::Refused(Box::new(e.rec.clone())));
        }
        let rec = e.rec.clone();
        e.tx.send_replace(rec.status);
        if before == ExecutionStatus::Received {
            g.received = g.received.saturating_sub(1);
        }
        Ok(TransitionOutcome::Applied(Box::new(rec)))
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
}
