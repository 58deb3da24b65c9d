//! The event channel (`GET /a2a/events`, ANN-3, ANN-4) as an async [`Stream`]: events read with the workspace's
//! Server-Sent Events codec ([`a2a_core::sse`]), and a
//! follower that reconnects with `Last-Event-ID` after a dropped connection, so that no event is missed or seen
//! twice.

use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use a2a_core::sessions::Run;
use a2a_core::sse;
use futures_util::Stream;
use reqwest::Method;
use serde_json::Value;

use super::Sessions;
use crate::backoff::Backoff;
use crate::error::{ClientError, Step};

/// One event of the channel (ANN-3).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// The event id (increasing), when the agent gave one.
    pub id: Option<String>,
    /// The event type: `announce`, `run`, `spawn`, `gap`, ... (`message` when none was given).
    pub event: String,
    /// The data, as sent (one line of JSON for the protocol's events).
    pub data: String,
}

impl Event {
    /// The data as JSON, when it is JSON.
    pub fn json(&self) -> Option<Value> {
        serde_json::from_str(&self.data).ok()
    }

    /// The run of a `run` event (its `Run` when it reached `done`).
    pub fn run(&self) -> Option<Run> {
        (self.event == "run").then(|| serde_json::from_str(&self.data).ok()).flatten()
    }
}

/// How to follow the channel.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct EventsOptions {
    /// Only the events of this session (`?session=KEY`).
    pub session: Option<String>,
    /// Start after this event id (`Last-Event-ID`): the events still in the agent's buffer after it.
    pub last_event_id: Option<String>,
    /// Give up after this many failed reconnects in a row (default 10).
    pub max_reconnects: u32,
    /// A connection silent this long is taken as dropped (default 45 s: the agent sends a comment at least every
    /// 15 s, ANN-4).
    pub idle_timeout: Duration,
    /// The largest event accepted, in bytes (default 1 MiB); a larger one ends the stream with an error.
    pub max_event_bytes: usize,
}

impl Default for EventsOptions {
    fn default() -> Self {
        EventsOptions {
            session: None,
            last_event_id: None,
            max_reconnects: 10,
            idle_timeout: Duration::from_secs(45),
            max_event_bytes: 1024 * 1024,
        }
    }
}

impl EventsOptions {
    /// Only the events of session `key`.
    #[must_use]
    pub fn session(mut self, key: impl Into<String>) -> Self {
        self.session = Some(key.into());
        self
    }

    /// Start after event `id`.
    #[must_use]
    pub fn after(mut self, id: impl Into<String>) -> Self {
        self.last_event_id = Some(id.into());
        self
    }
}

/// The channel's events from the workspace's one Server-Sent Events decoder ([`a2a_core::sse`]), with the id of the
/// last event carried over to events that have none (as a browser's `lastEventId`).
#[derive(Debug)]
pub(crate) struct SseParser {
    decoder: sse::Decoder,
    id: Option<String>,
}

impl SseParser {
    /// A parser that refuses an event or a line larger than `max` bytes.
    pub(crate) fn new(max: usize) -> Self {
        SseParser { decoder: sse::Decoder::new(max), id: None }
    }

    /// Feeds bytes; an event or a line larger than the limit is an error.
    pub(crate) fn feed(&mut self, bytes: &[u8]) -> Result<(), String> {
        self.decoder.feed(bytes).map_err(|e| e.to_string())
    }

    /// The next complete event.
    pub(crate) fn next(&mut self) -> Option<Event> {
        let e = self.decoder.next_event()?;
        if e.id.is_some() {
            self.id.clone_from(&e.id);
        }
        let event = e.kind().to_owned();
        Some(Event { id: self.id.clone(), event, data: e.data })
    }

    /// Forgets a partly received event (its connection dropped); complete events stay.
    pub(crate) fn drop_partial(&mut self) {
        self.decoder.finish();
    }
}

/// What a follower knows, shared with its [`EventStream`] handle.
#[derive(Debug, Default)]
struct Shared {
    last_event_id: Option<String>,
    reconnects: u32,
}

struct Follower {
    sessions: Sessions,
    opts: EventsOptions,
    resp: Option<reqwest::Response>,
    parser: SseParser,
    shared: Arc<Mutex<Shared>>,
    failures: u32,
    backoff: Backoff,
    done: bool,
}

/// The event channel of an agent, as a [`Stream`] of events; see [`Sessions::events`]. It ends only with an
/// error: the agent refused the stream, or could not be reached again after
/// [`EventsOptions::max_reconnects`] tries.
pub struct EventStream {
    inner: Pin<Box<dyn Stream<Item = Result<Event, ClientError>> + Send>>,
    shared: Arc<Mutex<Shared>>,
}

impl std::fmt::Debug for EventStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventStream").field("last_event_id", &self.last_event_id()).finish_non_exhaustive()
    }
}

impl EventStream {
    pub(crate) async fn open(sessions: Sessions, opts: EventsOptions) -> Result<EventStream, ClientError> {
        if let Some(s) = &opts.session {
            super::key_segment(s)?;
        }
        let shared = Arc::new(Mutex::new(Shared { last_event_id: opts.last_event_id.clone(), reconnects: 0 }));
        let parser = SseParser::new(opts.max_event_bytes);
        let mut f = Follower {
            sessions,
            opts,
            resp: None,
            parser,
            shared: shared.clone(),
            failures: 0,
            backoff: Backoff::default(),
            done: false,
        };
        // The first connection is made here, so that a refusal (unknown session, forbidden) is the caller's error.
        f.resp = Some(f.connect().await?);
        let inner = futures_util::stream::unfold(f, |mut f| async move {
            let item = f.next().await?;
            Some((item, f))
        });
        Ok(EventStream { inner: Box::pin(inner), shared })
    }

    /// The id of the last event received: where a new follower would resume.
    pub fn last_event_id(&self) -> Option<String> {
        self.shared.lock().ok().and_then(|s| s.last_event_id.clone())
    }

    /// How many times the follower reconnected after a dropped connection.
    pub fn reconnects(&self) -> u32 {
        self.shared.lock().map_or(0, |s| s.reconnects)
    }
}

impl Stream for EventStream {
    type Item = Result<Event, ClientError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.inner.as_mut().poll_next(cx)
    }
}

fn numeric(id: Option<&str>) -> Option<u64> {
    id.and_then(|s| s.trim().parse().ok())
}

impl Follower {
    async fn connect(&self) -> Result<reqwest::Response, ClientError> {
        let s = &self.sessions;
        let agent = s.agent().await?;
        let mut req = s.client.request(Step::Events, &s.endpoint, Method::GET, "/events");
        if let Some(k) = &self.opts.session {
            req.query = Some(url::form_urlencoded::Serializer::new(String::new()).append_pair("session", k).finish());
        }
        req.agent = Some(agent);
        req.sign = s.client.should_sign(Some(a2a_core::capability::AuthRequirement::DidAuth));
        req.credentials = true;
        req.headers.push(("accept", "text/event-stream".to_owned()));
        let last = self.shared.lock().ok().and_then(|g| g.last_event_id.clone());
        if let Some(id) = last {
            req.headers.push(("last-event-id", id));
        }
        let (resp, url) = s.client.inner.open_stream(&req).await?;
        let ct = resp.headers().get("content-type").and_then(|v| v.to_str().ok()).unwrap_or_default();
        if !ct.starts_with("text/event-stream") {
            return Err(ClientError::Protocol {
                step: Step::Events,
                url,
                reason: format!("the event channel answered with content type {ct:?}, not text/event-stream"),
            });
        }
        Ok(resp)
    }

    async fn next(&mut self) -> Option<Result<Event, ClientError>> {
        loop {
            if self.done {
                return None;
            }
            if let Some(ev) = self.parser.next() {
                let mut g = self.shared.lock().ok()?;
                // ANN-4: no duplicates, even from an agent that resends what we already have.
                if let (Some(new), Some(last)) = (numeric(ev.id.as_deref()), numeric(g.last_event_id.as_deref()))
                    && new <= last
                    && ev.event != "gap"
                {
                    continue;
                }
                if ev.id.is_some() {
                    g.last_event_id = ev.id.clone();
                }
                return Some(Ok(ev));
            }
            let Some(resp) = self.resp.as_mut() else {
                if self.failures > 0 {
                    tokio::time::sleep(self.backoff.next().unwrap_or(crate::backoff::INITIAL)).await;
                }
                match self.connect().await {
                    Ok(r) => {
                        self.resp = Some(r);
                        self.failures = 0;
                        self.backoff = Backoff::default();
                        if let Ok(mut g) = self.shared.lock() {
                            g.reconnects += 1;
                        }
                    }
                    Err(e) => {
                        self.failures += 1;
                        // A refusal will not change by retrying; an unreachable agent may come back.
                        if !e.is_transient() || self.failures > self.opts.max_reconnects {
                            self.done = true;
                            return Some(Err(e));
                        }
                    }
                }
                continue;
            };
            match tokio::time::timeout(self.opts.idle_timeout, resp.chunk()).await {
                Ok(Ok(Some(bytes))) => {
                    if let Err(why) = self.parser.feed(&bytes) {
                        self.done = true;
                        return Some(Err(ClientError::Protocol {
                            step: Step::Events,
                            url: self.sessions.endpoint.to_string(),
                            reason: why,
                        }));
                    }
                }
                // Closed, broken or silent: resume from the last event received.
                Ok(Ok(None)) | Ok(Err(_)) | Err(_) => {
                    self.resp = None;
                    self.parser.drop_partial();
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(chunks: &[&str]) -> Vec<Event> {
        let mut p = SseParser::new(1 << 20);
        for c in chunks {
            p.feed(c.as_bytes()).expect("within bounds");
        }
        std::iter::from_fn(|| p.next()).collect()
    }

    #[test]
    fn events_are_parsed_across_chunks_with_comments_and_crlf() {
        let evs = parse(&[
            ": keep-alive\n\nid: 1\nevent: announce\nda",
            "ta: {\"text\":\"bonus 5000\"}\r\n\r\n",
            "id: 2\nevent: run\ndata: {\"a\":1}\ndata: {\"b\":2}\n\n",
            "data: no id or type\n\n",
        ]);
        assert_eq!(evs.len(), 3, "{evs:?}");
        assert_eq!(
            evs[0],
            Event { id: Some("1".into()), event: "announce".into(), data: "{\"text\":\"bonus 5000\"}".into() }
        );
        assert_eq!(evs[0].json().expect("json")["text"], "bonus 5000");
        assert_eq!(evs[1].data, "{\"a\":1}\n{\"b\":2}");
        assert_eq!((evs[2].id.as_deref(), evs[2].event.as_str()), (Some("2"), "message"), "the id persists");
    }

    #[test]
    fn a_partial_event_is_dropped_with_its_connection() {
        let mut p = SseParser::new(1 << 20);
        p.feed(b"id: 5\nevent: announce\ndata: {\"x\"").expect("ok");
        p.drop_partial();
        p.feed(b"id: 6\nevent: run\ndata: {}\n\n").expect("ok");
        let e = p.next().expect("one event");
        assert_eq!((e.id.as_deref(), e.event.as_str(), e.data.as_str()), (Some("6"), "run", "{}"));
        assert!(p.next().is_none());
    }

    #[test]
    fn oversized_events_and_lines_are_refused() {
        let mut p = SseParser::new(50);
        assert!(p.feed(format!("data: {}\n", "x".repeat(100)).as_bytes()).is_err());
        let mut p = SseParser::new(50);
        assert!(p.feed("x".repeat(100).as_bytes()).is_err());
    }
}
