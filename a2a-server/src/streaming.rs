//! Streaming results (`spec/PROTOCOL.md` §18): the events of an execution — status changes, progress emitted by the
//! handler, and the final result — kept in an [`EventLog`] behind the store and served as Server-Sent Events by
//! `GET /a2a/result/{id}` with `A2A-Stream: true`.
//!
//! Enable it with [`crate::AgentBuilder::streaming`] (or `[streaming] enabled = true` in the configuration file); the
//! agent then lists `streaming` in `features`. A handler emits progress with
//! [`ctx.events.emit(json)`](EventSink::emit):
//!
//! ```
//! use a2a_server::handler::{ExecutionContext, HandlerError};
//! use serde_json::{json, Value};
//!
//! let words = |ctx: ExecutionContext, payload: Value| async move {
//!     let text = payload["text"].as_str().unwrap_or_default().to_owned();
//!     for (i, w) in text.split_whitespace().enumerate() {
//!         // An emit past the stream's limits fails (STR-8); the result still reaches the caller.
//!         let _ = ctx.events.emit(json!({"index": i, "word": w})).await;
//!     }
//!     Ok::<_, HandlerError>(json!({"words": text.split_whitespace().count()}))
//! };
//! # let _ = a2a_server::handler::boxed(words);
//! ```
//!
//! ## Ids, exactly once, any process
//!
//! Every event of an execution gets the next integer id from the log in one atomic step (STR-4): the memory log under
//! a lock, the Redis log in one Lua script over a stream and a hash that share the execution's hash tag
//! ([`redis`]). The final `result` event *seals* the log: it is appended once (whoever writes it first — the
//! process that recorded the terminal state, or a stream that finds the execution terminal without one), and nothing
//! is appended after it. Its data is the plain RESULT body of the terminal record, which never changes (ST-2), so
//! every writer appends the same bytes. A stream resumed with `Last-Event-ID` on any process reads the same events.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use a2a_core::wire::ExecutionStatus;
use serde::Deserialize;
use serde_json::json;
use tokio::sync::Semaphore;

use crate::store::{ExecutionRecord, StoreError, now_ms, timestamp};

pub mod memory;
pub mod redis;
pub(crate) mod sse;

pub use memory::MemoryEventLog;
pub use redis::RedisEventLog;

/// The request header that asks RESULT for a stream (STR-1).
pub const A2A_STREAM: &str = "a2a-stream";

/// The feature an agent that streams lists in `features` (§5.3).
pub const FEATURE: &str = "streaming";

/// The limits and timing of streams (`[streaming]` of the configuration file). Every member is optional there.
#[derive(Debug, Clone, PartialEq, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct StreamConfig {
    /// Whether the agent streams (the configuration file's switch; the builder's [`crate::AgentBuilder::streaming`]
    /// enables it whatever this says).
    pub enabled: bool,
    /// Progress events kept per execution at most (STR-8).
    pub max_events: u64,
    /// Bytes of progress event data kept per execution at most (STR-8).
    pub max_bytes: u64,
    /// A comment line is sent after this many milliseconds without an event (STR-9).
    pub heartbeat_ms: u64,
    /// Streams served at once by this process at most (STR-10).
    pub max_streams: usize,
    /// How often a quiet stream looks for events written by another process, in milliseconds (events written by
    /// this process wake it at once).
    pub poll_ms: u64,
}

impl Default for StreamConfig {
    fn default() -> Self {
        StreamConfig {
            enabled: false,
            max_events: 1_000,
            max_bytes: 1024 * 1024,
            heartbeat_ms: 15_000,
            max_streams: 256,
            poll_ms: 100,
        }
    }
}

impl StreamConfig {
    /// Checks the values; the message names the member.
    pub fn validate(&self) -> Result<(), String> {
        if self.max_events == 0 || self.max_bytes == 0 {
            return Err("streaming.max_events and streaming.max_bytes must be at least 1".into());
        }
        if self.heartbeat_ms == 0 || self.poll_ms == 0 {
            return Err("streaming.heartbeat_ms and streaming.poll_ms must be at least 1".into());
        }
        if self.max_streams == 0 {
            return Err("streaming.max_streams must be at least 1".into());
        }
        Ok(())
    }
}

/// The type of an event (§18.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventKind {
    /// A status change (a worker started the handler).
    Status,
    /// Progress or partial output emitted by the handler.
    Progress,
    /// The first progress event over a limit (STR-8).
    Truncated,
    /// The final result: the plain RESULT body (STR-6).
    Result,
}

impl EventKind {
    /// The SSE `event` name.
    pub fn as_str(self) -> &'static str {
        match self {
            EventKind::Status => "status",
            EventKind::Progress => "progress",
            EventKind::Truncated => "truncated",
            EventKind::Result => "result",
        }
    }

    /// The kind named `s`.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "status" => EventKind::Status,
            "progress" => EventKind::Progress,
            "truncated" => EventKind::Truncated,
            "result" => EventKind::Result,
            _ => return None,
        })
    }
}

/// One kept event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamEvent {
    /// Its id: 1 for the first event of the execution, one more for each next one (STR-4).
    pub id: u64,
    /// Its type.
    pub kind: EventKind,
    /// Its data: one line of compact JSON.
    pub data: String,
}

/// What [`EventLog::append`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Appended {
    /// Appended with this id.
    Ok(u64),
    /// Over a limit: a `truncated` event was appended with this id instead (STR-8).
    Truncated(u64),
    /// Over a limit that was already reported: nothing appended.
    Dropped,
    /// The log already has its final event: nothing appended.
    Sealed,
}

/// Per-execution bounds of the progress events a log keeps (STR-8).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EventLimits {
    /// Progress events at most.
    pub max_events: u64,
    /// Bytes of progress data at most.
    pub max_bytes: u64,
}

impl EventLimits {
    /// The data of the `truncated` event.
    pub fn truncated_data(&self) -> String {
        json!({
            "code": a2a_core::error::ErrorCode::STREAM_LIMIT_EXCEEDED.as_str(),
            "message": format!(
                "the execution emitted more than {} progress events or {} bytes of them; later progress is dropped, \
                 the result still follows",
                self.max_events, self.max_bytes
            ),
            "details": {"max_events": self.max_events, "max_bytes": self.max_bytes},
        })
        .to_string()
    }
}

/// The kept events of executions, shared by every process of an agent (STR-5). Every method is atomic with respect
/// to the others for one execution.
#[async_trait::async_trait]
pub trait EventLog: Send + Sync + 'static {
    /// Appends a `status` or `progress` event (progress counts toward the limits), kept until `retain_until_ms`.
    async fn append(
        &self,
        execution_id: &str,
        kind: EventKind,
        data: &str,
        retain_until_ms: u64,
    ) -> Result<Appended, StoreError>;

    /// Appends the final `result` event unless the log has one, and seals the log; returns the final event's id.
    async fn finish(&self, execution_id: &str, data: &str, retain_until_ms: u64) -> Result<u64, StoreError>;

    /// Up to `max` events with ids greater than `after`, in order.
    async fn read(&self, execution_id: &str, after: u64, max: usize) -> Result<Vec<StreamEvent>, StoreError>;

    /// The id of the last event (0 when there is none).
    async fn last_id(&self, execution_id: &str) -> Result<u64, StoreError>;

    /// Waits up to `timeout` for an event after `after` (a log may return earlier; the caller reads again).
    async fn wait(&self, execution_id: &str, after: u64, timeout: Duration);
}

/// Why [`EventSink::emit`] did not keep an event.
#[derive(Debug, Clone, thiserror::Error)]
pub enum EmitError {
    /// The execution's stream reached its limits (STR-8); later progress is dropped.
    #[error("the stream of this execution reached its limit of progress events or bytes; later progress is dropped")]
    LimitExceeded,
    /// The execution already has its final event (it is terminal).
    #[error("the execution is over: its stream has its final event")]
    Closed,
    /// The value is not JSON-serialisable.
    #[error("the progress value is not JSON: {0}")]
    Json(String),
    /// The event store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Where a handler emits progress (`ctx.events`). On an agent that does not stream, [`EventSink::emit`] does nothing
/// and succeeds.
#[derive(Clone, Default)]
pub struct EventSink {
    inner: Option<Arc<SinkInner>>,
}

struct SinkInner {
    log: Arc<dyn EventLog>,
    execution_id: String,
    retain_until_ms: u64,
    closed: AtomicBool,
}

impl fmt::Debug for EventSink {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.inner {
            None => f.write_str("EventSink(disabled)"),
            Some(i) => write!(f, "EventSink({})", i.execution_id),
        }
    }
}

impl EventSink {
    /// A sink that keeps nothing (the agent does not stream).
    pub fn disabled() -> Self {
        EventSink { inner: None }
    }

    /// Whether events emitted here reach streams.
    pub fn is_enabled(&self) -> bool {
        self.inner.is_some()
    }

    /// Emits a `progress` event whose data is `{"data": value}`. Fails when the stream's limits are reached (the
    /// handler may go on: its result is delivered anyway), after the execution ended, or when the store fails.
    pub async fn emit(&self, value: impl serde::Serialize) -> Result<(), EmitError> {
        let Some(inner) = &self.inner else { return Ok(()) };
        if inner.closed.load(Ordering::Acquire) {
            return Err(EmitError::Closed);
        }
        let value = serde_json::to_value(value).map_err(|e| EmitError::Json(e.to_string()))?;
        let data = json!({ "data": value }).to_string();
        match inner.log.append(&inner.execution_id, EventKind::Progress, &data, inner.retain_until_ms).await? {
            Appended::Ok(_) => Ok(()),
            Appended::Truncated(_) | Appended::Dropped => Err(EmitError::LimitExceeded),
            Appended::Sealed => {
                inner.closed.store(true, Ordering::Release);
                Err(EmitError::Closed)
            }
        }
    }

    /// Refuses later emits (the handler returned).
    pub(crate) fn close(&self) {
        if let Some(i) = &self.inner {
            i.closed.store(true, Ordering::Release);
        }
    }
}

/// The streaming part of an engine: configuration, event log, stream slots.
pub struct Streaming {
    pub(crate) config: StreamConfig,
    pub(crate) log: Arc<dyn EventLog>,
    pub(crate) streams: Arc<Semaphore>,
}

impl Streaming {
    /// Streaming with this configuration over this log.
    pub fn new(config: StreamConfig, log: Arc<dyn EventLog>) -> Self {
        let streams = Arc::new(Semaphore::new(config.max_streams));
        Streaming { config, log, streams }
    }

    /// The configuration.
    pub fn config(&self) -> &StreamConfig {
        &self.config
    }

    /// The event log.
    pub fn log(&self) -> &Arc<dyn EventLog> {
        &self.log
    }

    /// A worker started the handler (a `status` event); failures are logged, the execution goes on.
    pub(crate) async fn started(&self, rec: &ExecutionRecord) {
        // Called as the handler starts, before the worker records `running` (that write is deferred for fast
        // handlers, `Transition::Ran`): the event says what that write will say.
        let data = json!({"status": ExecutionStatus::Running, "attempt": rec.attempts + 1, "at": timestamp(now_ms())})
            .to_string();
        if let Err(e) = self.log.append(&rec.id, EventKind::Status, &data, rec.retain_until_ms).await {
            tracing::warn!(error = %e, "could not record the execution's status event");
        }
    }

    /// The sink of the handler of a running execution.
    pub(crate) fn sink(&self, rec: &ExecutionRecord) -> EventSink {
        EventSink {
            inner: Some(Arc::new(SinkInner {
                log: self.log.clone(),
                execution_id: rec.id.clone(),
                retain_until_ms: rec.retain_until_ms,
                closed: AtomicBool::new(false),
            })),
        }
    }

    /// Appends the final event of a terminal execution (idempotent); returns its id.
    pub(crate) async fn ensure_final(&self, rec: &ExecutionRecord) -> Result<u64, StoreError> {
        self.log.finish(&rec.id, &final_data(rec), rec.retain_until_ms.max(now_ms())).await
    }

    /// This process wrote a terminal state: append the final event in the background.
    pub(crate) fn finished(self: &Arc<Self>, rec: &ExecutionRecord) {
        if tokio::runtime::Handle::try_current().is_err() {
            return;
        }
        let me = self.clone();
        let rec = rec.clone();
        tokio::spawn(async move {
            if let Err(e) = me.ensure_final(&rec).await {
                // A stream that finds the execution terminal appends it then (STR-6).
                tracing::warn!(error = %e, execution_id = %rec.id, "could not record the final stream event");
            }
        });
    }
}

/// The data of the final event: exactly the body of the plain RESULT of the terminal record (STR-6).
pub fn final_data(rec: &ExecutionRecord) -> String {
    serde_json::to_string(&crate::engine::result_response(rec)).unwrap_or_default()
}

/// STR-2: whether a request asks for a stream. `Err` names the malformed header.
pub fn wants_stream(headers: &axum::http::HeaderMap) -> Result<bool, a2a_core::error::A2aError> {
    use a2a_core::error::{A2aError, ErrorCode};
    let Some(v) = headers.get(A2A_STREAM) else { return Ok(false) };
    let s = v.to_str().unwrap_or("").trim_matches([' ', '\t']);
    if s.eq_ignore_ascii_case("true") {
        Ok(true)
    } else if s.eq_ignore_ascii_case("false") {
        Ok(false)
    } else {
        Err(A2aError::with_message(
            ErrorCode::INVALID_HEADER,
            format!("A2A-Stream must be `true` or `false` (got {:?})", String::from_utf8_lossy(v.as_bytes())),
        )
        .details(json!({"header": "A2A-Stream"})))
    }
}

/// Wakes local waiters of an execution's log when an event is appended in this process.
#[derive(Default)]
pub(crate) struct Wakers {
    map: std::sync::Mutex<std::collections::HashMap<String, std::sync::Weak<tokio::sync::Notify>>>,
}

impl Wakers {
    pub(crate) fn register(&self, id: &str) -> Arc<tokio::sync::Notify> {
        let mut map = self.map.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(n) = map.get(id).and_then(std::sync::Weak::upgrade) {
            return n;
        }
        if map.len() > 1024 && map.len().is_power_of_two() {
            map.retain(|_, w| w.strong_count() > 0);
        }
        let n = Arc::new(tokio::sync::Notify::new());
        map.insert(id.to_owned(), Arc::downgrade(&n));
        n
    }

    pub(crate) fn wake(&self, id: &str) {
        let n = {
            let mut map = self.map.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            let n = map.get(id).and_then(std::sync::Weak::upgrade);
            if n.is_none() {
                map.remove(id);
            }
            n
        };
        if let Some(n) = n {
            n.notify_waiters();
        }
    }
}
