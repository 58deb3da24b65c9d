//! The audit stream: one record per request (time, sender, capability, negotiation, execution, agent, step,
//! outcome, latency), bounded in length and queryable by sender, negotiation or execution.
//!
//! [`MemoryAudit`] keeps the newest records in this process; [`FileAudit`] appends them to a JSON-lines file;
//! [`RedisAudit`] appends them to one Redis stream (`<prefix>:audit`, `XADD MAXLEN ~`) shared by every process
//! (servers and gateways); [`Fanout`] writes to several. Agents and `a2a-gateway` write and query records only
//! through [`AuditLog`]. Recording never delays or
//! fails a request: records are handed to a background writer that sends them in batches (one round trip per batch;
//! a record waits at most [`RedisAudit::LINGER`] for its batch), and records that cannot be written are counted as
//! dropped.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::sync::{mpsc, oneshot};

use super::{RedisStore, StoreError};

/// One request, as audited.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditRecord {
    /// When the request was answered (ms since the epoch).
    pub time_ms: u64,
    /// `A2A-Sender-ID` of the request (empty when absent).
    pub sender_id: String,
    /// The capability, when the step names one.
    #[serde(default)]
    pub capability: Option<String>,
    /// The negotiation, when known.
    #[serde(default)]
    pub negotiation_id: Option<String>,
    /// The execution, when known.
    #[serde(default)]
    pub execution_id: Option<String>,
    /// The agent that answered: its DID at an agent; at a gateway, the endpoint URL of the agent the request was
    /// forwarded to (empty when the gateway answered itself).
    pub agent: String,
    /// The protocol step (`negotiate`, `execute`, ...).
    pub step: String,
    /// `ok` or the error code.
    pub outcome: String,
    /// Time to answer, in microseconds.
    pub latency_us: u64,
    /// Whether a signature proved the sender (recorded by gateways, which verify at the edge).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub verified: bool,
    /// The HTTP status returned to the caller (recorded by gateways).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    /// The gateway instance that answered (absent in an agent's records).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gateway: Option<String>,
    /// The execution's `status` (`accepted`, `running`, `succeeded`, `failed`, ...) a plain RESULT answered,
    /// recorded by agents and gateways (an agent records CANCEL's too); absent for other steps and for streamed
    /// RESULTs, whose status changes as they run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub execution_status: Option<String>,
    /// The W3C trace id of the request (its `traceparent`'s, or the one this process started; OPS-6), to find its
    /// spans and log lines.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace_id: Option<String>,
}

/// Which records [`AuditLog::query`] returns.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuditQuery {
    /// Only this sender's.
    pub sender_id: Option<String>,
    /// Only this negotiation's.
    pub negotiation_id: Option<String>,
    /// Only this execution's.
    pub execution_id: Option<String>,
    /// At most this many (newest first); 0 means 100.
    pub limit: usize,
}

impl AuditQuery {
    fn matches(&self, r: &AuditRecord) -> bool {
        self.sender_id.as_ref().is_none_or(|s| *s == r.sender_id)
            && self.negotiation_id.as_ref().is_none_or(|n| r.negotiation_id.as_ref() == Some(n))
            && self.execution_id.as_ref().is_none_or(|e| r.execution_id.as_ref() == Some(e))
    }

    fn limit(&self) -> usize {
        if self.limit == 0 { 100 } else { self.limit }
    }
}

/// Where audit records go.
#[async_trait::async_trait]
pub trait AuditLog: Send + Sync + 'static {
    /// Records a request; never blocks and never fails the request.
    fn record(&self, rec: AuditRecord);

    /// The newest records matching `q`, newest first.
    async fn query(&self, q: &AuditQuery) -> Result<Vec<AuditRecord>, StoreError>;

    /// Waits until every record handed over so far is written.
    async fn flush(&self) -> Result<(), StoreError> {
        Ok(())
    }

    /// Records that could not be written (the backend was down or the buffer full).
    fn dropped(&self) -> u64 {
        0
    }

    /// Reopens the log's file, if it writes one (OPS-5): after log rotation moved it away, records written from now
    /// on go to a new file at the configured path. Records handed over before are written to the old one.
    async fn reopen(&self) -> Result<(), StoreError> {
        Ok(())
    }
}

/// The newest `max_len` records, in memory.
pub struct MemoryAudit {
    records: Mutex<VecDeque<AuditRecord>>,
    max_len: usize,
}

impl MemoryAudit {
    /// Keeps at most `max_len` records.
    pub fn new(max_len: usize) -> Self {
        MemoryAudit { records: Mutex::new(VecDeque::new()), max_len: max_len.max(1) }
    }
}

#[async_trait::async_trait]
impl AuditLog for MemoryAudit {
    fn record(&self, rec: AuditRecord) {
        let mut g = self.records.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if g.len() >= self.max_len {
            g.pop_front();
        }
        g.push_back(rec);
    }

    async fn query(&self, q: &AuditQuery) -> Result<Vec<AuditRecord>, StoreError> {
        let g = self.records.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        Ok(g.iter().rev().filter(|r| q.matches(r)).take(q.limit()).cloned().collect())
    }
}

/// Records appended to a JSON-lines file, one object per line, by a background writer (bounded queue: records that do
/// not fit are dropped and counted); queries read the file.
pub struct FileAudit {
    path: std::path::PathBuf,
    tx: mpsc::Sender<Msg>,
    dropped: Arc<AtomicU64>,
}

impl FileAudit {
    /// Appends to `path` (created if missing), with at most `queue` records waiting. Starts the writer (must be called
    /// inside a Tokio runtime). Fails when the file cannot be opened for appending.
    pub fn new(path: std::path::PathBuf, queue: usize) -> Result<Arc<Self>, StoreError> {
        let file = open_append(&path).map_err(|e| StoreError(format!("audit file {}: {e}", path.display())))?;
        let reopen_path = path.clone();
        let (tx, mut rx) = mpsc::channel::<Msg>(queue.max(1));
        let dropped = Arc::new(AtomicU64::new(0));
        let lost = dropped.clone();
        let shown = path.display().to_string();
        tokio::spawn(async move {
            use std::io::Write;
            let mut out = std::io::BufWriter::new(file);
            let mut batch = Vec::with_capacity(BATCH);
            while rx.recv_many(&mut batch, BATCH).await > 0 {
                let mut records = 0u64;
                for m in batch.drain(..) {
                    match m {
                        Msg::Record(r) => {
                            records += 1;
                            if let Ok(line) = serde_json::to_string(&r) {
                                let _ = writeln!(out, "{line}");
                            }
                        }
                        Msg::Flush(f) => {
                            let _ = out.flush();
                            let _ = f.send(());
                        }
                        Msg::Reopen(f) => {
                            let _ = out.flush();
                            let reopened = open_append(&reopen_path);
                            let answer = match reopened {
                                Ok(file) => {
                                    out = std::io::BufWriter::new(file);
                                    Ok(())
                                }
                                Err(e) => Err(format!("audit file {shown}: {e}")),
                            };
                            let _ = f.send(answer);
                        }
                    }
                }
                if let Err(e) = out.flush() {
                    lost.fetch_add(records, Ordering::Relaxed);
                    tracing::error!(file = %shown, error = %e, "cannot write the audit file");
                }
            }
        });
        Ok(Arc::new(FileAudit { path, tx, dropped }))
    }
}

#[async_trait::async_trait]
impl AuditLog for FileAudit {
    fn record(&self, rec: AuditRecord) {
        hand_over(&self.tx, &self.dropped, rec);
    }

    async fn query(&self, q: &AuditQuery) -> Result<Vec<AuditRecord>, StoreError> {
        use std::io::BufRead;
        let path = self.path.clone();
        let q = q.clone();
        let read = move || -> Result<Vec<AuditRecord>, StoreError> {
            let err = |e: std::io::Error| StoreError(format!("audit file {}: {e}", path.display()));
            let file = match std::fs::File::open(&path) {
                Ok(f) => f,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
                Err(e) => return Err(err(e)),
            };
            // The newest `limit` matches, kept in a ring while the file is read oldest first.
            let mut ring = VecDeque::with_capacity(q.limit());
            for line in std::io::BufReader::new(file).lines() {
                if let Ok(r) = serde_json::from_str::<AuditRecord>(&line.map_err(err)?)
                    && q.matches(&r)
                {
                    if ring.len() == q.limit() {
                        ring.pop_front();
                    }
                    ring.push_back(r);
                }
            }
            Ok(ring.into_iter().rev().collect())
        };
        tokio::task::spawn_blocking(read).await.map_err(|e| StoreError(format!("audit query: {e}")))?
    }

    async fn flush(&self) -> Result<(), StoreError> {
        flush_writer(&self.tx).await
    }

    fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    async fn reopen(&self) -> Result<(), StoreError> {
        let (done, answer) = oneshot::channel();
        self.tx.send(Msg::Reopen(done)).await.map_err(|_| StoreError("audit writer stopped".into()))?;
        answer.await.map_err(|_| StoreError("audit writer stopped".into()))?.map_err(StoreError)
    }
}

/// Opens `path` for appending, created if missing.
fn open_append(path: &std::path::Path) -> std::io::Result<std::fs::File> {
    std::fs::OpenOptions::new().create(true).append(true).open(path)
}

/// Writes every record to each log; queries the first (list the shared one first).
pub struct Fanout(pub Vec<Arc<dyn AuditLog>>);

#[async_trait::async_trait]
impl AuditLog for Fanout {
    fn record(&self, rec: AuditRecord) {
        for log in &self.0 {
            log.record(rec.clone());
        }
    }

    async fn query(&self, q: &AuditQuery) -> Result<Vec<AuditRecord>, StoreError> {
        match self.0.first() {
            Some(log) => log.query(q).await,
            None => Ok(Vec::new()),
        }
    }

    async fn flush(&self) -> Result<(), StoreError> {
        for log in &self.0 {
            log.flush().await?;
        }
        Ok(())
    }

    fn dropped(&self) -> u64 {
        self.0.iter().map(|l| l.dropped()).sum()
    }

    async fn reopen(&self) -> Result<(), StoreError> {
        for log in &self.0 {
            log.reopen().await?;
        }
        Ok(())
    }
}

/// Hands a record to a writer; counts it as dropped when the writer's queue is full.
fn hand_over(tx: &mpsc::Sender<Msg>, dropped: &AtomicU64, rec: AuditRecord) {
    if tx.try_send(Msg::Record(Box::new(rec))).is_err() {
        dropped.fetch_add(1, Ordering::Relaxed);
    }
}

/// Waits until a writer has written every record handed to it before.
async fn flush_writer(tx: &mpsc::Sender<Msg>) -> Result<(), StoreError> {
    let (done, rx) = oneshot::channel();
    tx.send(Msg::Flush(done)).await.map_err(|_| StoreError("audit writer stopped".into()))?;
    rx.await.map_err(|_| StoreError("audit writer stopped".into()))
}

enum Msg {
    Record(Box<AuditRecord>),
    Flush(oneshot::Sender<()>),
    /// Reopen the file (OPS-5); the answer says whether it could be.
    Reopen(oneshot::Sender<Result<(), String>>),
}

/// The audit stream on Redis, shared by every process.
pub struct RedisAudit {
    store: Arc<RedisStore>,
    key: String,
    max_len: u64,
    tx: mpsc::Sender<Msg>,
    dropped: Arc<AtomicU64>,
}

/// Records buffered for the writer at most; beyond it records are dropped (and counted).
const BUFFER: usize = 65_536;

/// Records sent in one round trip at most.
const BATCH: usize = 256;

impl RedisAudit {
    /// How long a record waits for others to share its round trip.
    pub const LINGER: Duration = Duration::from_millis(20);

    /// The stream `<prefix>:audit` on the store's Redis, trimmed to about `max_len` records. Starts the writer (must
    /// be called inside a Tokio runtime).
    pub fn new(store: Arc<RedisStore>, max_len: u64) -> Arc<Self> {
        let key = format!("{}:audit", store.key_prefix());
        let (tx, rx) = mpsc::channel(BUFFER);
        let dropped = Arc::new(AtomicU64::new(0));
        tokio::spawn(writer(store.clone(), key.clone(), max_len.max(1), rx, dropped.clone()));
        Arc::new(RedisAudit { store, key, max_len: max_len.max(1), tx, dropped })
    }
}

async fn writer(
    store: Arc<RedisStore>,
    key: String,
    max_len: u64,
    mut rx: mpsc::Receiver<Msg>,
    dropped: Arc<AtomicU64>,
) {
    while let Some(first) = rx.recv().await {
        let mut batch = Vec::new();
        let mut flushes = Vec::new();
        let push = |m: Msg, batch: &mut Vec<AuditRecord>, flushes: &mut Vec<oneshot::Sender<()>>| match m {
            Msg::Record(r) => batch.push(*r),
            Msg::Flush(f) => flushes.push(f),
            // A stream has no file to reopen.
            Msg::Reopen(f) => {
                let _ = f.send(Ok(()));
            }
        };
        push(first, &mut batch, &mut flushes);
        let linger = tokio::time::sleep(RedisAudit::LINGER);
        tokio::pin!(linger);
        while batch.len() < BATCH {
            tokio::select! {
                m = rx.recv() => match m {
                    Some(m) => push(m, &mut batch, &mut flushes),
                    None => break,
                },
                () = &mut linger => break,
            }
            if !flushes.is_empty() {
                break;
            }
        }
        if !batch.is_empty() {
            let mut p = redis::pipe();
            for r in &batch {
                let json = serde_json::to_string(r).unwrap_or_default();
                p.cmd("XADD").arg(&key).arg("MAXLEN").arg("~").arg(max_len).arg("*").arg("r").arg(json).ignore();
            }
            if let Err(e) = store.pipeline("audit", p).await {
                dropped.fetch_add(batch.len() as u64, Ordering::Relaxed);
                tracing::warn!(error = %e, records = batch.len(), "audit records dropped");
            }
        }
        for f in flushes {
            let _ = f.send(());
        }
    }
}

#[async_trait::async_trait]
impl AuditLog for RedisAudit {
    fn record(&self, rec: AuditRecord) {
        hand_over(&self.tx, &self.dropped, rec);
    }

    async fn query(&self, q: &AuditQuery) -> Result<Vec<AuditRecord>, StoreError> {
        // Newest first, in pages, until enough matched or the whole (bounded) stream was read.
        let mut out = Vec::new();
        let mut end = "+".to_owned();
        let mut scanned: u64 = 0;
        while out.len() < q.limit() && scanned <= self.max_len.saturating_mul(2) {
            let page: redis::streams::StreamRangeReply = self
                .store
                .command(
                    "audit query",
                    redis::cmd("XREVRANGE").arg(&self.key).arg(&end).arg("-").arg("COUNT").arg(500).clone(),
                )
                .await?;
            let n = page.ids.len();
            for e in &page.ids {
                let json: Option<String> = e.get("r");
                if let Some(r) = json.and_then(|j| serde_json::from_str::<AuditRecord>(&j).ok())
                    && q.matches(&r)
                    && out.len() < q.limit()
                {
                    out.push(r);
                }
            }
            let Some(last) = page.ids.last() else { break };
            if n < 500 {
                break;
            }
            // Continue strictly before the last id read.
            end = format!("({}", last.id);
            scanned += n as u64;
        }
        Ok(out)
    }

    async fn flush(&self) -> Result<(), StoreError> {
        flush_writer(&self.tx).await
    }

    fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }
}
