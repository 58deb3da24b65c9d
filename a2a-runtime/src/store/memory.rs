//! The embedded in-memory store: the default, nothing to set up. State lives in this process only; its work queue is
//! the same abstraction as the shared stores' (claims, touches, a visibility timeout), held in memory.
//!
//! ## Cost (LIM-6)
//!
//! Every map has an index ordered by expiry (a `BTreeSet` of `(time, key)`): an insert, a lookup, an eviction and
//! the expiry of one entry are `O(log n)`, and each write first drops at most [`EXPIRE_STEP`] expired entries from
//! the front of each index, more than it adds, so expiry keeps up without ever walking a map under the lock. The
//! bounds of LIM-4 and LIM-5 are kept per sender ([`MemoryLimits`]): a sender's negotiations past its share replace
//! its own closest to expiry, never another sender's; its executions waiting for CONFIRM and its replay nonces past
//! its share are refused.
//!
//! A stored negotiation shares its agreed schema (an `Arc`, one copy for every negotiation that agreed it) and its
//! sender and capability names (interned), so that it costs a few hundred bytes (`docs/BENCHMARKS.md`).

use std::collections::{BTreeSet, HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use a2a_core::wire::ExecutionStatus;
use serde_json::Value;
use sha2::{Digest, Sha256};
use tokio::sync::{Notify, watch};

use super::{
    Admitted, Created, ExecutionRecord, Executions, IdempotencyClaim, NegotiationRecord, Nonce, QuotaExceeded,
    ReplayMemory, Store, StoreError, Transition, TransitionOutcome, WorkItem, WorkQueue, now_ms,
};

/// Limits of the in-memory store.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct MemoryLimits {
    /// Negotiations kept at most. At the bound a sender's new negotiation replaces its own closest to expiry; a
    /// sender that holds none is refused (`429 quota_exceeded`, LIM-4).
    pub max_negotiations: usize,
    /// Negotiations kept per sender at most; a sender's new negotiation past it replaces its own closest to expiry
    /// (LIM-4).
    pub max_negotiations_per_sender: usize,
    /// Executions waiting for CONFIRM at most; beyond it EXECUTE gets `overloaded`.
    pub max_received: usize,
    /// Executions waiting for CONFIRM per sender at most; beyond it the sender's EXECUTE gets `429 quota_exceeded`
    /// (LIM-5).
    pub max_received_per_sender: usize,
    /// How long a terminal execution is kept.
    pub retention: Duration,
    /// Replay nonces kept at most (keep it above the rate of signed requests times 330 s); beyond it a signed
    /// request is refused (`429 quota_exceeded`, LIM-5): a nonce is never forgotten before it expires.
    pub max_nonces: usize,
    /// Replay nonces kept per signer at most; beyond it the signer's signed requests are refused (LIM-5).
    pub max_nonces_per_sender: usize,
    /// How long claimed work may go untouched before it is handed to another worker.
    pub visibility_timeout: Duration,
}

impl Default for MemoryLimits {
    fn default() -> Self {
        MemoryLimits {
            max_negotiations: 100_000,
            max_negotiations_per_sender: 1_000,
            max_received: 10_000,
            max_received_per_sender: 1_000,
            retention: Duration::from_secs(3600),
            max_nonces: 1_000_000,
            max_nonces_per_sender: 100_000,
            visibility_timeout: Duration::from_secs(30),
        }
    }
}

/// Expired entries dropped from the front of each expiry index by one write (LIM-6). A write adds at most one entry
/// to an index, so expiry keeps up; a lookup never returns an expired entry whether or not it was dropped yet.
pub const EXPIRE_STEP: usize = 16;

/// Distinct capability names interned at most (names outside are stored as they come).
const MAX_INTERNED: usize = 1024;

/// A negotiation as held: the strings every negotiation of a sender or capability shares are shared.
struct Neg {
    sender: Arc<str>,
    capability: Arc<str>,
    schema: Arc<Value>,
    digest: Option<Box<str>>,
    timeout_ms: u64,
    confirm_window_ms: u64,
    created_at_ms: u64,
    expires_at_ms: u64,
}

struct Entry {
    rec: ExecutionRecord,
    tx: watch::Sender<ExecutionStatus>,
}

/// What one sender holds (LIM-4, LIM-5); dropped once it holds nothing.
#[derive(Default)]
struct SenderUse {
    /// Its negotiations by expiry.
    negotiations: BTreeSet<(u64, Arc<str>)>,
    /// Its executions waiting for CONFIRM within their window.
    received: usize,
    /// Its replay nonces.
    nonces: usize,
}

impl SenderUse {
    fn is_empty(&self) -> bool {
        self.negotiations.is_empty() && self.received == 0 && self.nonces == 0
    }
}

/// A replay nonce's key: 128 bits of SHA-256 of the issuer and the `jti`.
type NonceKey = [u8; 16];

#[derive(Default)]
struct Inner {
    negotiations: HashMap<Arc<str>, Neg>,
    /// Negotiations by expiry.
    negotiation_expiry: BTreeSet<(u64, Arc<str>)>,
    senders: HashMap<Arc<str>, SenderUse>,
    capabilities: HashSet<Arc<str>>,
    executions: HashMap<Arc<str>, Entry>,
    /// Executions by `retain_until_ms`.
    execution_expiry: BTreeSet<(u64, Arc<str>)>,
    /// Executions `received` whose confirm window is open, by `confirm_by_ms` (the `max_received` bounds).
    received: BTreeSet<(u64, Arc<str>)>,
    /// (sender, key) -> (execution id, fingerprint); dropped with its execution.
    idempotency: HashMap<(String, String), (Arc<str>, String)>,
    /// Nonce -> (until, issuer).
    nonces: HashMap<NonceKey, (u64, Arc<str>)>,
    nonce_expiry: BTreeSet<(u64, NonceKey)>,
    /// Queued work: (sequence, execution id, deliveries so far).
    ready: VecDeque<(u64, String, u64)>,
    /// Claimed work: sequence -> (execution id, deliveries, lease end).
    held: HashMap<u64, (String, u64, u64)>,
    seq: u64,
}

impl Inner {
    /// The sender's shared name; its entry is made if missing.
    fn sender_name(&mut self, sender: &str) -> Arc<str> {
        if let Some((k, _)) = self.senders.get_key_value(sender) {
            return k.clone();
        }
        let k: Arc<str> = Arc::from(sender);
        self.senders.insert(k.clone(), SenderUse::default());
        k
    }

    /// Drops the sender's entry once it holds nothing.
    fn release_sender(&mut self, sender: &str) {
        if self.senders.get(sender).is_some_and(SenderUse::is_empty) {
            self.senders.remove(sender);
        }
    }

    fn capability_name(&mut self, name: &str) -> Arc<str> {
        if let Some(k) = self.capabilities.get(name) {
            return k.clone();
        }
        let k: Arc<str> = Arc::from(name);
        if self.capabilities.len() < MAX_INTERNED {
            self.capabilities.insert(k.clone());
        }
        k
    }

    fn remove_negotiation(&mut self, id: &str) {
        let Some((id, n)) = self.negotiations.remove_entry(id) else { return };
        let key = (n.expires_at_ms, id);
        self.negotiation_expiry.remove(&key);
        if let Some(u) = self.senders.get_mut(&*n.sender) {
            u.negotiations.remove(&key);
        }
        self.release_sender(&n.sender);
    }

    /// Counts an execution out of `received` (CONFIRM, a cancel, its window elapsed, or dropped), once.
    fn leave_received(&mut self, confirm_by_ms: u64, id: &Arc<str>, sender: &str) {
        if self.received.remove(&(confirm_by_ms, id.clone())) {
            if let Some(u) = self.senders.get_mut(sender) {
                u.received = u.received.saturating_sub(1);
            }
            self.release_sender(sender);
        }
    }

    fn remove_execution(&mut self, id: &str) {
        let Some((id, e)) = self.executions.remove_entry(id) else { return };
        self.execution_expiry.remove(&(e.rec.retain_until_ms, id.clone()));
        self.leave_received(e.rec.confirm_by_ms, &id, &e.rec.sender);
        if let Some(key) = e.rec.idempotency_key {
            let k = (e.rec.sender, key);
            if self.idempotency.get(&k).is_some_and(|(owner, _)| *owner == id) {
                self.idempotency.remove(&k);
            }
        }
    }

    fn remove_nonce(&mut self, key: &NonceKey) {
        let Some((until, issuer)) = self.nonces.remove(key) else { return };
        self.nonce_expiry.remove(&(until, *key));
        if let Some(u) = self.senders.get_mut(&*issuer) {
            u.nonces = u.nonces.saturating_sub(1);
        }
        self.release_sender(&issuer);
    }

    /// Drops up to `budget` expired entries from the front of each expiry index (LIM-6).
    fn expire(&mut self, now: u64, budget: usize) {
        for _ in 0..budget {
            match self.negotiation_expiry.first() {
                Some((at, id)) if *at <= now => {
                    let id = id.clone();
                    self.remove_negotiation(&id);
                }
                _ => break,
            }
        }
        for _ in 0..budget {
            match self.execution_expiry.first() {
                Some((at, id)) if *at <= now => {
                    let id = id.clone();
                    self.remove_execution(&id);
                }
                _ => break,
            }
        }
        for _ in 0..budget {
            match self.received.first() {
                Some((at, id)) if *at <= now => {
                    let (at, id) = (*at, id.clone());
                    let sender = self.executions.get(&id).map(|e| e.rec.sender.clone());
                    match sender {
                        Some(sender) => self.leave_received(at, &id, &sender),
                        None => {
                            self.received.remove(&(at, id));
                        }
                    }
                }
                _ => break,
            }
        }
        for _ in 0..budget {
            match self.nonce_expiry.first() {
                Some((at, key)) if *at <= now => {
                    let key = *key;
                    self.remove_nonce(&key);
                }
                _ => break,
            }
        }
    }
}

fn nonce_key(issuer: &str, jti: &str) -> NonceKey {
    let mut h = Sha256::new();
    h.update(issuer.as_bytes());
    h.update([0u8]);
    h.update(jti.as_bytes());
    let d = h.finalize();
    let mut k = [0u8; 16];
    k.copy_from_slice(&d[..16]);
    k
}

/// The embedded store. Cheap operations under one mutex; expired entries are dropped a few at a time as it goes.
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

    /// The store's limits.
    pub fn limits(&self) -> &MemoryLimits {
        &self.limits
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic while holding the lock cannot leave a record half-written (every update is a single assignment),
        // so a poisoned lock is safe to reuse.
        self.inner.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Drops everything that has expired (a walk of the expired entries only; the writes do it a few at a time).
    pub fn purge_expired(&self) {
        let now = now_ms();
        let mut g = self.lock();
        g.expire(now, usize::MAX);
    }

    /// Counts of what the store holds: (negotiations, executions, nonces).
    pub fn sizes(&self) -> (usize, usize, usize) {
        let g = self.lock();
        (g.negotiations.len(), g.executions.len(), g.nonces.len())
    }

    /// Counts of what one sender holds: (negotiations, executions waiting for CONFIRM, nonces).
    pub fn sender_sizes(&self, sender: &str) -> (usize, usize, usize) {
        let g = self.lock();
        g.senders.get(sender).map_or((0, 0, 0), |u| (u.negotiations.len(), u.received, u.nonces))
    }

    fn apply(&self, g: &mut Inner, id: &str, t: &Transition) -> TransitionOutcome {
        let retention = self.limits.retention.as_millis() as u64;
        let Some((key, e)) = g.executions.get_key_value(id) else { return TransitionOutcome::NotFound };
        let key = key.clone();
        let (before, until_before, confirm_by) = (e.rec.status, e.rec.retain_until_ms, e.rec.confirm_by_ms);
        let Some(e) = g.executions.get_mut(id) else { return TransitionOutcome::NotFound };
        if !e.rec.apply(t, retention) {
            return TransitionOutcome::Refused(Box::new(e.rec.clone()));
        }
        let rec = e.rec.clone();
        e.tx.send_replace(rec.status);
        if rec.retain_until_ms != until_before {
            g.execution_expiry.remove(&(until_before, key.clone()));
            g.execution_expiry.insert((rec.retain_until_ms, key.clone()));
        }
        if before == ExecutionStatus::Received {
            g.leave_received(confirm_by, &key, &rec.sender);
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
        // `held` is bounded by the workers' slots (at most `max_concurrent_executions` per process).
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
            let Some(e) = g.executions.get(id.as_str()) else { continue };
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

#[async_trait::async_trait]
impl Executions for MemoryStore {
    async fn put_negotiation(&self, rec: NegotiationRecord) -> Result<(), StoreError> {
        match self.admit_negotiation(rec).await? {
            Admitted::Stored | Admitted::Replaced => Ok(()),
            Admitted::Refused(q) => {
                Err(StoreError(format!("the store holds its {} ({}) negotiations", q.quota, q.limit)))
            }
        }
    }
    async fn admit_negotiation(&self, rec: NegotiationRecord) -> Result<Admitted, StoreError> {
        let now = now_ms();
        let mut g = self.lock();
        g.expire(now, EXPIRE_STEP);
        let mut admitted = Admitted::Stored;
        let held = g.senders.get(rec.sender.as_str()).map_or(0, |u| u.negotiations.len());
        let full = g.negotiations.len() >= self.limits.max_negotiations;
        if held >= self.limits.max_negotiations_per_sender.max(1) || full {
            // LIM-4: the sender's own negotiation closest to expiry makes room, never another sender's.
            let own = g.senders.get(rec.sender.as_str()).and_then(|u| u.negotiations.first()).map(|(_, id)| id.clone());
            match own {
                Some(id) => {
                    g.remove_negotiation(&id);
                    admitted = Admitted::Replaced;
                }
                None => {
                    let soonest = g.negotiation_expiry.first().map_or(1000, |(at, _)| at.saturating_sub(now));
                    return Ok(Admitted::Refused(QuotaExceeded {
                        quota: "max_negotiations",
                        limit: self.limits.max_negotiations as u64,
                        retry_after_ms: soonest.max(1000),
                    }));
                }
            }
        }
        if g.negotiations.contains_key(rec.id.as_str()) {
            g.remove_negotiation(&rec.id);
        }
        let sender = g.sender_name(&rec.sender);
        let capability = g.capability_name(&rec.capability);
        let id: Arc<str> = Arc::from(rec.id);
        let key = (rec.expires_at_ms, id.clone());
        g.negotiation_expiry.insert(key.clone());
        if let Some(u) = g.senders.get_mut(&*sender) {
            u.negotiations.insert(key);
        }
        let neg = Neg {
            sender,
            capability,
            schema: rec.agreed_schema,
            digest: rec.schema_digest.map(String::into_boxed_str),
            timeout_ms: rec.timeout_ms,
            confirm_window_ms: rec.confirm_window_ms,
            created_at_ms: rec.created_at_ms,
            expires_at_ms: rec.expires_at_ms,
        };
        g.negotiations.insert(id, neg);
        Ok(admitted)
    }
    async fn get_negotiation(&self, id: &str) -> Result<Option<NegotiationRecord>, StoreError> {
        let now = now_ms();
        let g = self.lock();
        Ok(g.negotiations.get_key_value(id).filter(|(_, n)| n.expires_at_ms > now).map(|(id, n)| NegotiationRecord {
            id: id.to_string(),
            sender: n.sender.to_string(),
            capability: n.capability.to_string(),
            agreed_schema: n.schema.clone(),
            schema_digest: n.digest.as_deref().map(str::to_owned),
            timeout_ms: n.timeout_ms,
            confirm_window_ms: n.confirm_window_ms,
            created_at_ms: n.created_at_ms,
            expires_at_ms: n.expires_at_ms,
        }))
    }
    async fn create_execution(
        &self,
        rec: ExecutionRecord,
        idempotency: Option<IdempotencyClaim>,
    ) -> Result<Created, StoreError> {
        let now = now_ms();
        let mut g = self.lock();
        g.expire(now, EXPIRE_STEP);
        if let Some(claim) = &idempotency {
            let key = (claim.sender.clone(), claim.key.clone());
            if let Some((id, fp)) = g.idempotency.get(&key) {
                if *fp != claim.fingerprint {
                    return Ok(Created::Conflict);
                }
                if let Some(e) = g.executions.get(id).filter(|e| e.rec.retain_until_ms > now) {
                    return Ok(Created::Existing(Box::new(e.rec.clone())));
                }
            }
        }
        let waiting = g.senders.get(rec.sender.as_str()).map_or(0, |u| u.received);
        if waiting >= self.limits.max_received_per_sender.max(1) {
            // LIM-5: a sender's executions leave `received` on CONFIRM, CANCEL or when their window elapses.
            return Ok(Created::Refused(QuotaExceeded {
                quota: "max_received_per_sender",
                limit: self.limits.max_received_per_sender as u64,
                retry_after_ms: 1000,
            }));
        }
        if g.received.len() >= self.limits.max_received {
            return Ok(Created::Full);
        }
        let mut rec = rec;
        let id: Arc<str> = Arc::from(rec.id.as_str());
        if let Some(claim) = idempotency {
            // A key whose execution is gone (expired) is claimed afresh.
            if let Some((old, _)) = g.idempotency.get(&(claim.sender.clone(), claim.key.clone())).cloned() {
                g.remove_execution(&old);
            }
            rec.idempotency_key = Some(claim.key.clone());
            g.idempotency.insert((claim.sender, claim.key), (id.clone(), claim.fingerprint));
        }
        rec.rev = 1;
        let sender = g.sender_name(&rec.sender);
        if let Some(u) = g.senders.get_mut(&*sender) {
            u.received += 1;
        }
        g.received.insert((rec.confirm_by_ms, id.clone()));
        g.execution_expiry.insert((rec.retain_until_ms, id.clone()));
        let (tx, _) = watch::channel(rec.status);
        g.executions.insert(id, Entry { rec, tx });
        Ok(Created::New)
    }
    async fn get_execution(&self, id: &str) -> Result<Option<ExecutionRecord>, StoreError> {
        let now = now_ms();
        let g = self.lock();
        // A record past its retention is gone, whether or not it was dropped yet.
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
    async fn terminal_signal(&self, id: &str, timeout: Duration) -> bool {
        let mut rx = {
            let g = self.lock();
            let Some(e) = g.executions.get(id) else { return false };
            e.tx.subscribe()
        };
        matches!(tokio::time::timeout(timeout, rx.wait_for(|s| s.is_terminal())).await, Ok(Ok(_)))
    }
}

#[async_trait::async_trait]
impl WorkQueue for MemoryStore {
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

#[async_trait::async_trait]
impl ReplayMemory for MemoryStore {
    async fn remember_jti(&self, issuer: &str, jti: &str, until_ms: u64) -> Result<bool, StoreError> {
        match self.admit_jti(issuer, jti, until_ms).await? {
            Nonce::Fresh => Ok(true),
            Nonce::Replay => Ok(false),
            Nonce::Refused(q) => {
                Err(StoreError(format!("the replay memory holds its {} ({}) nonces", q.quota, q.limit)))
            }
        }
    }
    async fn admit_jti(&self, issuer: &str, jti: &str, until_ms: u64) -> Result<Nonce, StoreError> {
        let now = now_ms();
        let key = nonce_key(issuer, jti);
        let mut g = self.lock();
        g.expire(now, EXPIRE_STEP);
        match g.nonces.get(&key) {
            Some((until, _)) if *until > now => return Ok(Nonce::Replay),
            Some(_) => g.remove_nonce(&key),
            None => {}
        }
        // LIM-5: a nonce is never forgotten before it expires (that would let its request be replayed); past a bound
        // the signed request is refused instead.
        let held = g.senders.get(issuer).map_or(0, |u| u.nonces);
        let refused = if held >= self.limits.max_nonces_per_sender.max(1) {
            Some(("max_nonces_per_sender", self.limits.max_nonces_per_sender))
        } else if g.nonces.len() >= self.limits.max_nonces.max(1) {
            Some(("max_nonces", self.limits.max_nonces))
        } else {
            None
        };
        if let Some((quota, limit)) = refused {
            return Ok(Nonce::Refused(QuotaExceeded { quota, limit: limit as u64, retry_after_ms: 1000 }));
        }
        let issuer = g.sender_name(issuer);
        if let Some(u) = g.senders.get_mut(&*issuer) {
            u.nonces += 1;
        }
        g.nonce_expiry.insert((until_ms, key));
        g.nonces.insert(key, (until_ms, issuer));
        Ok(Nonce::Fresh)
    }
}

#[async_trait::async_trait]
impl Store for MemoryStore {}
