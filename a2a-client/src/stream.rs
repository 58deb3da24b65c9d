//! Streamed RESULT (`spec/PROTOCOL.md` §18): an [`EventStream`] of typed events — status, progress, the final result —
//! that resumes by itself after a dropped connection (`Last-Event-ID`, bounded attempts with backoff) and never yields
//! an event twice (STR-13).
//!
//! ```no_run
//! use a2a_client::{Client, Identity, StreamOptions, StreamEvent};
//! use futures_util::StreamExt;
//!
//! # async fn run(execution_id: &str) -> Result<(), a2a_client::ClientError> {
//! let client = Client::builder(Identity::unsigned("did:web:caller.example.com")?).build()?;
//! let mut events = client.stream_result("http://127.0.0.1:8080/a2a", execution_id, StreamOptions::default()).await?;
//! while let Some(event) = events.next().await {
//!     match event? {
//!         StreamEvent::Progress { data, .. } => println!("progress: {data}"),
//!         StreamEvent::Result { result, .. } => println!("done: {:?}", result.status),
//!         other => println!("{other:?}"),
//!     }
//! }
//! # Ok(()) }
//! ```

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use a2a_core::error::ErrorObject;
use a2a_core::execution_id::ExecutionId;
use a2a_core::headers as h;
use a2a_core::integrity::MessageParts;
use a2a_core::wire::{ExecutionStatus, ResultResponse};
use futures_util::Stream;
use reqwest::Method;
use serde_json::Value;

use crate::client::{Client, Wait};
use crate::endpoint::Endpoint;
use crate::error::{ClientError, Step};

/// How an [`EventStream`] reads and resumes.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct StreamOptions {
    /// Reconnections in a row without a new event before the stream gives up (a new event resets the count).
    pub max_reconnects: u32,
    /// The first wait before a reconnection; doubled after each failed one, up to 5 s.
    pub reconnect_backoff: Duration,
    /// A connection that brings nothing (not even a heartbeat) for this long is dropped and resumed.
    pub idle_timeout: Duration,
    /// The stream gives up after this long in all (a deadline error).
    pub max_duration: Duration,
    /// Start after this event id (0: from the first event).
    pub last_event_id: u64,
    /// The largest event accepted, in bytes.
    pub max_event_bytes: usize,
}

impl Default for StreamOptions {
    fn default() -> Self {
        StreamOptions {
            max_reconnects: 5,
            reconnect_backoff: Duration::from_millis(100),
            idle_timeout: Duration::from_secs(45),
            max_duration: Duration::from_secs(3600),
            last_event_id: 0,
            max_event_bytes: 4 * 1024 * 1024,
        }
    }
}

impl StreamOptions {
    /// Sets [`StreamOptions::max_reconnects`].
    #[must_use]
    pub fn max_reconnects(mut self, n: u32) -> Self {
        self.max_reconnects = n;
        self
    }

    /// Sets [`StreamOptions::reconnect_backoff`].
    #[must_use]
    pub fn reconnect_backoff(mut self, d: Duration) -> Self {
        self.reconnect_backoff = d;
        self
    }

    /// Sets [`StreamOptions::idle_timeout`].
    #[must_use]
    pub fn idle_timeout(mut self, d: Duration) -> Self {
        self.idle_timeout = d;
        self
    }

    /// Sets [`StreamOptions::max_duration`].
    #[must_use]
    pub fn max_duration(mut self, d: Duration) -> Self {
        self.max_duration = d;
        self
    }

    /// Sets [`StreamOptions::last_event_id`] (resume a stream read earlier).
    #[must_use]
    pub fn last_event_id(mut self, id: u64) -> Self {
        self.last_event_id = id;
        self
    }
}

/// One event of a streamed execution (§18.2).
#[derive(Debug, Clone, PartialEq)]
pub enum StreamEvent {
    /// A worker started the handler.
    Status {
        /// The event id.
        id: u64,
        /// The new status (`running`).
        status: ExecutionStatus,
        /// Which run of the handler (more than 1 after a take-over from a lost worker).
        attempt: u32,
        /// When.
        at: String,
    },
    /// Progress or partial output of the handler.
    Progress {
        /// The event id.
        id: u64,
        /// What the handler emitted.
        data: Value,
    },
    /// The agent stopped keeping progress: the stream passed its limits (STR-8). The result still follows.
    Truncated {
        /// The event id.
        id: u64,
        /// `stream_limit_exceeded` and the limits.
        error: ErrorObject,
    },
    /// The final result: the same as a plain RESULT (STR-6). The last event.
    Result {
        /// The event id (0 when the agent does not stream and the result came from a plain RESULT).
        id: u64,
        /// The result.
        result: ResultResponse,
        /// Whether its signature was checked (STR-7).
        verified: bool,
    },
}

impl StreamEvent {
    /// The event id.
    pub fn id(&self) -> u64 {
        match self {
            StreamEvent::Status { id, .. }
            | StreamEvent::Progress { id, .. }
            | StreamEvent::Truncated { id, .. }
            | StreamEvent::Result { id, .. } => *id,
        }
    }
}

/// The events of one execution, as an async [`Stream`]; ends after [`StreamEvent::Result`].
pub struct EventStream {
    inner: Pin<Box<dyn Stream<Item = Result<StreamEvent, ClientError>> + Send>>,
    last: Arc<AtomicU64>,
    reconnects: Arc<AtomicU64>,
}

impl std::fmt::Debug for EventStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventStream").field("last_event_id", &self.last_event_id()).finish()
    }
}

impl EventStream {
    /// The id of the last event yielded (to resume later with [`StreamOptions::last_event_id`]).
    pub fn last_event_id(&self) -> u64 {
        self.last.load(Ordering::Relaxed)
    }

    /// How many times the stream was resumed after a dropped connection.
    pub fn reconnects(&self) -> u64 {
        self.reconnects.load(Ordering::Relaxed)
    }
}

impl Stream for EventStream {
    type Item = Result<StreamEvent, ClientError>;
    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.inner.as_mut().poll_next(cx)
    }
}

/// One SSE event as parsed, before typing.
#[derive(Default)]
struct RawEvent {
    id: Option<String>,
    event: Option<String>,
    data: Option<String>,
    signature: Option<String>,
}

struct Reader {
    client: Client,
    ep: Endpoint,
    agent: String,
    id: ExecutionId,
    opts: StreamOptions,
    plain: bool,
    started: std::time::Instant,
    resp: Option<reqwest::Response>,
    buf: Vec<u8>,
    pending: VecDeque<StreamEvent>,
    done: bool,
    failures: u32,
    backoff: Duration,
    last: Arc<AtomicU64>,
    reconnects: Arc<AtomicU64>,
}

impl Client {
    /// Streams RESULT of an execution (§18): at an agent that lists `streaming`, its events as they happen, resumed
    /// after a drop; at another, one [`StreamEvent::Result`] read with a plain (long-poll) RESULT (STR-3).
    pub async fn stream_result(
        &self,
        url: &str,
        execution_id: &str,
        opts: StreamOptions,
    ) -> Result<EventStream, ClientError> {
        let ep = Endpoint::parse(url)?;
        let id = ExecutionId::parse(execution_id)
            .map_err(|e| ClientError::invalid(format!("{execution_id:?} is not an execution id: {e}")))?;
        let d = self.discover_at(&ep, None, false).await?;
        let caps = self.capabilities_at(&ep, &d, None, false).await?;
        let last = Arc::new(AtomicU64::new(opts.last_event_id));
        let reconnects = Arc::new(AtomicU64::new(0));
        let reader = Reader {
            client: self.clone(),
            ep,
            agent: d.agent.clone(),
            id,
            plain: !caps.has_feature("streaming"),
            started: std::time::Instant::now(),
            resp: None,
            buf: Vec::new(),
            pending: VecDeque::new(),
            done: false,
            failures: 0,
            backoff: opts.reconnect_backoff,
            opts,
            last: last.clone(),
            reconnects: reconnects.clone(),
        };
        let inner = futures_util::stream::unfold(reader, |mut r| async move { r.next().await.map(|e| (e, r)) });
        Ok(EventStream { inner: Box::pin(inner), last, reconnects })
    }
}

impl Reader {
    fn remaining(&self) -> Duration {
        self.opts.max_duration.saturating_sub(self.started.elapsed())
    }

    fn deadline_error(&self) -> ClientError {
        ClientError::DeadlineExceeded {
            step: Step::Result,
            deadline: self.opts.max_duration,
            execution_id: Some(self.id.to_string()),
            last_status: None,
        }
    }

    async fn next(&mut self) -> Option<Result<StreamEvent, ClientError>> {
        loop {
            if let Some(e) = self.pending.pop_front() {
                return Some(Ok(e));
            }
            if self.done {
                return None;
            }
            if self.remaining().is_zero() {
                self.done = true;
                return Some(Err(self.deadline_error()));
            }
            if self.plain {
                self.done = true;
                let r = self.client.result(self.ep.as_str(), self.id.as_str(), Wait::For(self.remaining())).await;
                return Some(r.map(|result| StreamEvent::Result { id: 0, result, verified: false }));
            }
            if self.resp.is_none() {
                match self.open().await {
                    Ok(resp) => self.resp = resp,
                    Err(e) if e.is_transient() => {
                        if let Err(e) = self.dropped(e).await {
                            self.done = true;
                            return Some(Err(e));
                        }
                        continue;
                    }
                    Err(e) => {
                        self.done = true;
                        return Some(Err(e));
                    }
                }
            }
            let idle = self.opts.idle_timeout.min(self.remaining());
            let chunk = match self.resp.as_mut() {
                Some(resp) => tokio::time::timeout(idle, resp.chunk()).await,
                None => continue,
            };
            let why = match chunk {
                Ok(Ok(Some(bytes))) => {
                    self.buf.extend_from_slice(&bytes);
                    if let Err(e) = self.parse().await {
                        self.done = true;
                        return Some(Err(e));
                    }
                    continue;
                }
                Ok(Ok(None)) => "the agent ended the stream before the result".to_owned(),
                Ok(Err(e)) => format!("the stream broke: {e}"),
                Err(_) => format!("nothing arrived for {} ms", idle.as_millis()),
            };
            self.resp = None;
            self.buf.clear();
            let url = self.ep.url_of(&self.target());
            if let Err(e) = self.dropped(ClientError::Unreachable { step: Step::Result, url, reason: why }).await {
                self.done = true;
                return Some(Err(e));
            }
        }
    }

    /// A connection failed or dropped: wait and let the loop reconnect, or give up after `max_reconnects`.
    async fn dropped(&mut self, e: ClientError) -> Result<(), ClientError> {
        self.failures += 1;
        if self.failures > self.opts.max_reconnects {
            return Err(e);
        }
        tracing::debug!(error = %e, attempt = self.failures, "stream dropped; resuming");
        let wait = self.backoff.min(self.remaining());
        self.backoff = (self.backoff * 2).min(Duration::from_secs(5));
        tokio::time::sleep(wait).await;
        self.reconnects.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    fn target(&self) -> String {
        self.ep.target(&format!("/result/{}", self.id.to_path_segment()), None)
    }

    /// Opens (or resumes) the stream; `None` when the agent answered a plain RESULT instead (STR-3): the reader then
    /// reads RESULT the plain way.
    async fn open(&mut self) -> Result<Option<reqwest::Response>, ClientError> {
        let mut req =
            self.client.request(Step::Result, &self.ep, Method::GET, format!("/result/{}", self.id.to_path_segment()));
        req.agent = Some(self.agent.clone());
        req.credentials = true;
        req.retry = false;
        req.accept_stream = true;
        req.timeout = self.remaining();
        req.headers.push((crate::stream::A2A_STREAM, "true".to_owned()));
        let last = self.last.load(Ordering::Relaxed);
        if last > 0 {
            req.headers.push(("last-event-id", last.to_string()));
        }
        if self.client.inner.identity.can_sign() && self.client.inner.config.signing == crate::SigningMode::Always {
            req.sign = true;
        }
        let resp = self.client.send(req, None).await?;
        if resp.stream.is_none() {
            self.plain = true;
        }
        Ok(resp.stream)
    }

    /// Takes the complete events out of the buffer.
    async fn parse(&mut self) -> Result<(), ClientError> {
        loop {
            let text_end = find_block_end(&self.buf);
            let Some((end, sep)) = text_end else {
                if self.buf.len() > self.opts.max_event_bytes {
                    return Err(self.protocol(format!(
                        "an event is larger than {} bytes (StreamOptions::max_event_bytes)",
                        self.opts.max_event_bytes
                    )));
                }
                return Ok(());
            };
            let block: Vec<u8> = self.buf.drain(..end + sep).take(end).collect();
            let block = String::from_utf8(block).map_err(|_| self.protocol("an event is not UTF-8".into()))?;
            let mut raw = RawEvent::default();
            for line in block.lines() {
                if line.starts_with(':') {
                    continue; // a comment: the heartbeat (STR-9)
                }
                let (field, value) = line.split_once(':').unwrap_or((line, ""));
                let value = value.strip_prefix(' ').unwrap_or(value);
                match field {
                    "id" => raw.id = Some(value.to_owned()),
                    "event" => raw.event = Some(value.to_owned()),
                    "signature" => raw.signature = Some(value.to_owned()),
                    "data" => match &mut raw.data {
                        Some(d) => {
                            d.push('\n');
                            d.push_str(value);
                        }
                        None => raw.data = Some(value.to_owned()),
                    },
                    _ => {}
                }
            }
            if raw.data.is_none() && raw.id.is_none() {
                continue;
            }
            self.dispatch(raw).await?;
        }
    }

    fn protocol(&self, reason: String) -> ClientError {
        ClientError::Protocol { step: Step::Result, url: self.ep.url_of(&self.target()), reason }
    }

    async fn dispatch(&mut self, raw: RawEvent) -> Result<(), ClientError> {
        let id: u64 = raw
            .id
            .as_deref()
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| self.protocol("an event has no decimal id (STR-4)".into()))?;
        // STR-13: an event already seen (before a reconnection) is not yielded again.
        if id <= self.last.load(Ordering::Relaxed) {
            return Ok(());
        }
        let data = raw.data.unwrap_or_default();
        let json = || -> Result<Value, ClientError> {
            serde_json::from_str(&data).map_err(|e| self.protocol(format!("event {id}'s data is not JSON: {e}")))
        };
        let event = match raw.event.as_deref().unwrap_or("message") {
            "status" => {
                let v = json()?;
                StreamEvent::Status {
                    id,
                    status: serde_json::from_value(v["status"].clone())
                        .map_err(|e| self.protocol(format!("status event {id}: {e}")))?,
                    attempt: v["attempt"].as_u64().unwrap_or(1) as u32,
                    at: v["at"].as_str().unwrap_or_default().to_owned(),
                }
            }
            "progress" => StreamEvent::Progress { id, data: json()?.get("data").cloned().unwrap_or(Value::Null) },
            "truncated" => StreamEvent::Truncated {
                id,
                error: serde_json::from_value(json()?)
                    .map_err(|e| self.protocol(format!("truncated event {id}: {e}")))?,
            },
            "result" => {
                let result: ResultResponse = serde_json::from_str(&data)
                    .map_err(|e| self.protocol(format!("the result event is not a RESULT body: {e}")))?;
                if result.execution_id != self.id.as_str() {
                    return Err(self.protocol(format!("the stream's result is about {}", result.execution_id)));
                }
                let verified = self.verify(raw.signature.as_deref(), &data).await?;
                self.done = true;
                self.resp = None;
                StreamEvent::Result { id, result, verified }
            }
            // Unknown event types are skipped (a later version may add some).
            _ => {
                self.last.store(id, Ordering::Relaxed);
                return Ok(());
            }
        };
        self.last.store(id, Ordering::Relaxed);
        self.failures = 0;
        self.backoff = self.opts.reconnect_backoff;
        self.pending.push_back(event);
        Ok(())
    }

    /// STR-7: the final event's signature, checked as a plain RESULT's (CLI-10).
    async fn verify(&self, sig: Option<&str>, data: &str) -> Result<bool, ClientError> {
        let target = self.target();
        let id = self.id.to_string();
        let headers = [
            (h::A2A_VERSION, a2a_core::PROTOCOL_VERSION),
            (h::A2A_SENDER_ID, self.agent.as_str()),
            (h::A2A_EXECUTION_ID, id.as_str()),
        ];
        let parts = MessageParts {
            method: "GET",
            target: &target,
            headers: &headers,
            body: data.as_bytes(),
            status: Some(200),
        };
        self.client.inner.verify_signed(Step::Result, Some(&self.agent), sig, &parts).await?;
        Ok(sig.is_some() && self.client.inner.config.response_verification != crate::ResponseVerification::Off)
    }
}

/// The end of the first complete event in `buf` (a blank line) and the length of its separator.
fn find_block_end(buf: &[u8]) -> Option<(usize, usize)> {
    let mut i = 0;
    while i + 1 < buf.len() {
        if buf[i] == b'\n' && buf[i + 1] == b'\n' {
            return Some((i, 2));
        }
        if buf[i] == b'\r' && buf[i + 1] == b'\n' && buf.get(i + 2) == Some(&b'\r') && buf.get(i + 3) == Some(&b'\n') {
            return Some((i, 4));
        }
        i += 1;
    }
    None
}

/// The request header that asks for a stream.
pub const A2A_STREAM: &str = "a2a-stream";
