//! The in-process [`EventLog`] of the embedded store: one vector of events per execution under a lock, dropped at
//! the execution's retention; at most `max_logs` executions' logs (the ones kept shortest go first).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Notify;

use super::{Appended, EventKind, EventLimits, EventLog, StreamEvent};
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

/// The in-memory event log.
pub struct MemoryEventLog {
    limits: EventLimits,
    max_logs: usize,
    logs: Mutex<HashMap<String, Log>>,
    wakers: super::Wakers,
}

impl MemoryEventLog {
    /// A log with these per-execution limits, keeping the events of at most `max_logs` executions.
    pub fn new(limits: EventLimits, max_logs: usize) -> Self {
        MemoryEventLog {
            limits,
            max_logs: max_logs.max(1),
            logs: Mutex::new(HashMap::new()),
            wakers: Default::default(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Log>> {
        self.logs.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Runs `f` on the execution's log, creating it (and making room for it) when absent.
    fn with_log<T>(&self, id: &str, retain_until_ms: u64, f: impl FnOnce(&mut Log) -> T) -> T {
        let out = {
            let mut logs = self.lock();
            if !logs.contains_key(id) && logs.len() >= self.max_logs {
                let now = now_ms();
                logs.retain(|_, l| l.retain_until_ms > now);
                if logs.len() >= self.max_logs
                    && let Some(victim) = logs.iter().min_by_key(|(_, l)| l.retain_until_ms).map(|(k, _)| k.clone())
                {
                    logs.remove(&victim);
                }
            }
            let log = logs.entry(id.to_owned()).or_default();
            log.retain_until_ms = log.retain_until_ms.max(retain_until_ms);
            f(log)
        };
        self.wakers.wake(id);
        out
    }

    /// Executions whose logs are kept (for tests of the bound).
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether no log is kept.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
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
        let Some(log) = logs.get(execution_id).filter(|l| l.retain_until_ms > now_ms()) else { return Ok(Vec::new()) };
        let start = usize::try_from(after).unwrap_or(usize::MAX).min(log.events.len());
        Ok(log.events[start..].iter().take(max).cloned().collect())
    }

    async fn last_id(&self, execution_id: &str) -> Result<u64, StoreError> {
        Ok(self.lock().get(execution_id).filter(|l| l.retain_until_ms > now_ms()).map_or(0, |l| l.events.len() as u64))
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
