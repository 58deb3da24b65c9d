//! The audit log (seed §4.1): one record per request — time, sender, capability, negotiation, execution, agent, step,
//! outcome, latency — appended to a JSON-lines file and/or a Redis stream (`<prefix>:gw:audit`, shared by the
//! gateways on one Redis), and queried by sender, negotiation or execution (`GET /gateway/audit`,
//! `a2a-gateway audit`).
//!
//! Records are handed to a writer task through a bounded queue, so that the request path never waits on a disk or on
//! Redis; when the writer falls behind, records are dropped and counted (`a2a_gateway_audit_dropped_total`).

use std::io::{BufRead, Write};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use a2a_server::store::{RedisStore, StoreError};
use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;

use crate::metrics::Metrics;

/// One request, as audited.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AuditRecord {
    /// When the request was answered (RFC 3339, UTC).
    pub time: String,
    /// The gateway instance that answered.
    pub gateway: String,
    /// The step (`negotiate`, `execute`, …, `other`).
    pub step: String,
    /// `A2A-Sender-ID` of the request (the verified DID when it was signed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sender_id: Option<String>,
    /// Whether a signature proved the sender.
    #[serde(default)]
    pub verified: bool,
    /// The capability the request was about.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capability: Option<String>,
    /// The negotiation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub negotiation_id: Option<String>,
    /// The execution.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub execution_id: Option<String>,
    /// The agent's endpoint the request went to (absent when answered at the edge).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// `ok` or the error code.
    pub outcome: String,
    /// The HTTP status returned to the caller.
    pub status: u16,
    /// Time to answer, in microseconds.
    pub latency_us: u64,
}

/// What to look for.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuditQuery {
    /// Records of this sender.
    #[serde(default)]
    pub sender: Option<String>,
    /// Records of this negotiation.
    #[serde(default)]
    pub negotiation: Option<String>,
    /// Records of this execution.
    #[serde(default)]
    pub execution: Option<String>,
    /// Most records returned (newest last); default 100, at most 10 000.
    #[serde(default)]
    pub limit: Option<usize>,
}

impl AuditQuery {
    fn matches(&self, r: &AuditRecord) -> bool {
        self.sender.as_ref().is_none_or(|s| r.sender_id.as_ref() == Some(s))
            && self.negotiation.as_ref().is_none_or(|n| r.negotiation_id.as_ref() == Some(n))
            && self.execution.as_ref().is_none_or(|x| r.execution_id.as_ref() == Some(x))
    }

    fn limit(&self) -> usize {
        self.limit.unwrap_or(100).clamp(1, 10_000)
    }
}

/// Where records go and come from.
#[derive(Clone)]
pub struct AuditSinks {
    /// The JSON-lines file.
    pub file: Option<PathBuf>,
    /// The Redis stream, with its bound.
    pub redis: Option<(Arc<RedisStore>, u64)>,
}

fn stream_key(store: &RedisStore) -> String {
    format!("{}:gw:audit", store.key_prefix())
}

/// The handle the request path uses.
pub struct Audit {
    tx: Option<mpsc::Sender<AuditRecord>>,
    sinks: AuditSinks,
    metrics: Arc<Metrics>,
    max_scan: usize,
}

impl Audit {
    /// Starts the writer (when there is a sink). Must be called inside a Tokio runtime.
    pub fn start(sinks: AuditSinks, queue: usize, max_scan: usize, metrics: Arc<Metrics>) -> Result<Self, String> {
        if let Some(f) = &sinks.file {
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(f)
                .map_err(|e| format!("audit.file {}: {e}", f.display()))?;
        }
        let tx = if sinks.file.is_some() || sinks.redis.is_some() {
            let (tx, rx) = mpsc::channel(queue.max(1));
            tokio::spawn(writer(rx, sinks.clone()));
            Some(tx)
        } else {
            None
        };
        Ok(Audit { tx, sinks, metrics, max_scan })
    }

    /// Whether records are kept anywhere.
    pub fn enabled(&self) -> bool {
        self.tx.is_some()
    }

    /// Queues a record; drops (and counts) it when the writer is behind.
    pub fn record(&self, r: AuditRecord) {
        if let Some(tx) = &self.tx
            && tx.try_send(r).is_err()
        {
            self.metrics.audit_dropped();
        }
    }

    /// The newest records matching `q` (oldest first), from the Redis stream when there is one, else the file.
    pub async fn query(&self, q: &AuditQuery) -> Result<Vec<AuditRecord>, StoreError> {
        query(&self.sinks, q, self.max_scan).await
    }
}

/// Reads records (see [`Audit::query`]); usable without a running gateway (the `a2a-gateway audit` command).
pub async fn query(sinks: &AuditSinks, q: &AuditQuery, max_scan: usize) -> Result<Vec<AuditRecord>, StoreError> {
    let limit = q.limit();
    let mut out = Vec::new();
    if let Some((store, _)) = &sinks.redis {
        let key = stream_key(store);
        let mut end = "+".to_owned();
        let mut scanned = 0usize;
        'pages: while scanned < max_scan && out.len() < limit {
            let page: Vec<(String, Vec<(String, String)>)> = store
                .command(
                    "audit query",
                    redis::cmd("XREVRANGE").arg(&key).arg(&end).arg("-").arg("COUNT").arg(1000).clone(),
                )
                .await?;
            if page.is_empty() {
                break;
            }
            for (id, fields) in &page {
                scanned += 1;
                if let Some((_, json)) = fields.iter().find(|(k, _)| k == "r")
                    && let Ok(r) = serde_json::from_str::<AuditRecord>(json)
                    && q.matches(&r)
                {
                    out.push(r);
                    if out.len() >= limit {
                        break 'pages;
                    }
                }
                end = format!("({id}");
            }
        }
        out.reverse();
        return Ok(out);
    }
    if let Some(path) = &sinks.file {
        let file = match std::fs::File::open(path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(out),
            Err(e) => return Err(StoreError(format!("audit file {}: {e}", path.display()))),
        };
        let mut ring = std::collections::VecDeque::with_capacity(limit);
        for line in std::io::BufReader::new(file).lines() {
            let line = line.map_err(|e| StoreError(format!("audit file {}: {e}", path.display())))?;
            if let Ok(r) = serde_json::from_str::<AuditRecord>(&line)
                && q.matches(&r)
            {
                if ring.len() == limit {
                    ring.pop_front();
                }
                ring.push_back(r);
            }
        }
        out.extend(ring);
    }
    Ok(out)
}

async fn writer(mut rx: mpsc::Receiver<AuditRecord>, sinks: AuditSinks) {
    let mut file = sinks.file.as_ref().and_then(|p| {
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(p)
            .map_err(|e| tracing::error!(file = %p.display(), error = %e, "cannot open the audit file"))
            .ok()
            .map(std::io::BufWriter::new)
    });
    let mut batch = Vec::with_capacity(256);
    while rx.recv_many(&mut batch, 256).await > 0 {
        if let Some(f) = file.as_mut() {
            for r in &batch {
                if let Ok(line) = serde_json::to_string(r) {
                    let _ = writeln!(f, "{line}");
                }
            }
            if let Err(e) = f.flush() {
                tracing::error!(error = %e, "cannot write the audit file");
            }
        }
        if let Some((store, max_len)) = &sinks.redis {
            let key = stream_key(store);
            let mut p = redis::pipe();
            for r in &batch {
                if let Ok(json) = serde_json::to_string(r) {
                    p.cmd("XADD").arg(&key).arg("MAXLEN").arg("~").arg(*max_len).arg("*").arg("r").arg(json).ignore();
                }
            }
            // A Redis that is down loses these records (counted in the log); the file, when set, still has them.
            let mut tries = 0;
            while let Err(e) = store.pipeline("audit", p.clone()).await {
                tries += 1;
                if tries >= 3 {
                    tracing::error!(error = %e, records = batch.len(), "audit records could not be written to Redis");
                    break;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
        batch.clear();
    }
}
