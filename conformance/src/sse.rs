//! Server-Sent Events (WHATWG HTML, "Server-sent events") read incrementally from a response, for the streamed RESULT
//! (§18) and the sessions' event channel (§17.6). An event is parsed as its bytes arrive, in a bounded buffer, and each
//! read has a time limit, so that an agent that streams forever, never ends an event or sends nothing cannot hold the
//! suite or its memory. The bytes are read with the workspace's Server-Sent Events decoder ([`a2a_core::sse`]).

use std::time::{Duration, Instant};

use a2a_core::sse;
use serde_json::Value;

use crate::http::{Req, Resp};

/// The longest event (or comment) the suite accepts before it gives up on the stream.
pub const MAX_EVENT_BYTES: usize = 1024 * 1024;

/// How much of the raw stream is kept for the report.
const MAX_RECORDED_BYTES: usize = 256 * 1024;

/// One dispatched event.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Event {
    /// The `id` field, when the event has one.
    pub id: Option<String>,
    /// The `event` field (`message` when absent, as a browser's `EventSource` would say).
    pub event: String,
    /// The `data` lines, joined with line feeds.
    pub data: String,
    /// How many `data` lines the event had.
    pub data_lines: usize,
    /// Every other field (`signature`, ...), in order.
    pub other: Vec<(String, String)>,
}

impl Event {
    /// The id as a decimal integer, when it is one.
    pub fn id_number(&self) -> Option<u64> {
        let id = self.id.as_deref()?;
        (!id.is_empty() && id.len() <= 20 && id.bytes().all(|b| b.is_ascii_digit())).then(|| id.parse().ok())?
    }

    /// The data as JSON, when it is JSON.
    pub fn json(&self) -> Option<Value> {
        serde_json::from_str(&self.data).ok()
    }

    /// A short description for assertions: `id 3 progress {"data":...}`.
    pub fn summary(&self) -> String {
        let data: String = self.data.chars().take(120).collect();
        let more = if self.data.chars().count() > 120 { "..." } else { "" };
        format!("id {} {} {data}{more}", self.id.as_deref().unwrap_or("(none)"), self.event)
    }
}

/// What a stream yields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Item {
    /// An event.
    Event(Event),
    /// A comment line (`: keep-alive`), without its colon and the one blank after it.
    Comment(String),
}

/// An open response read as Server-Sent Events.
pub struct Stream {
    head: Resp,
    resp: Option<reqwest::Response>,
    buf: Vec<u8>,
    raw: Vec<u8>,
    decoder: sse::Decoder,
    ended: bool,
    opened: Instant,
}

/// Sends a request (already signed) and returns its response once the head has arrived, without reading the body.
/// `timeout` bounds the wait for the head, `total` the whole exchange (each read also has its own limit).
pub async fn open(client: &reqwest::Client, req: &Req, timeout: Duration, total: Duration) -> Result<Stream, String> {
    let method = reqwest::Method::from_bytes(req.method.as_bytes()).map_err(|e| format!("bad method: {e}"))?;
    let mut rb = client.request(method, &req.url).timeout(total);
    for (name, value) in &req.headers {
        rb = rb.header(name.as_str(), value.as_str());
    }
    if let Some(body) = &req.body {
        rb = rb.body(body.clone());
    }
    let opened = Instant::now();
    let resp = tokio::time::timeout(req.timeout.unwrap_or(timeout), rb.send())
        .await
        .map_err(|_| format!("no response head within {} s", req.timeout.unwrap_or(timeout).as_secs()))?
        .map_err(|e| crate::http::describe(&e))?;
    let head = Resp {
        status: resp.status().as_u16(),
        version: format!("{:?}", resp.version()),
        headers: resp
            .headers()
            .iter()
            .map(|(n, v)| (n.as_str().to_owned(), String::from_utf8_lossy(v.as_bytes()).into_owned()))
            .collect(),
        body: Vec::new(),
        elapsed: opened.elapsed(),
    };
    Ok(Stream {
        head,
        resp: Some(resp),
        buf: Vec::new(),
        raw: Vec::new(),
        decoder: sse::Decoder::new(MAX_EVENT_BYTES),
        ended: false,
        opened,
    })
}

impl Stream {
    /// The response head (status and headers; no body).
    pub fn head(&self) -> &Resp {
        &self.head
    }

    /// Whether the response is a stream: `200` with `Content-Type: text/event-stream`.
    pub fn is_event_stream(&self) -> bool {
        self.head.status == 200 && mime(&self.head) == "text/event-stream"
    }

    /// Whether the agent ended the response.
    pub fn ended(&self) -> bool {
        self.ended
    }

    /// The response as read so far: the head, and the bytes of the body received (at most 256 KiB of them).
    pub fn resp(&self) -> Resp {
        Resp { body: self.raw.clone(), elapsed: self.opened.elapsed(), ..self.head.clone() }
    }

    /// Reads the rest of a response that is not a stream (an error body), within `timeout` and 1 MiB.
    pub async fn read_plain(&mut self, timeout: Duration) -> Resp {
        let deadline = Instant::now() + timeout;
        while !self.ended && self.buf.len() < MAX_EVENT_BYTES {
            if self.fill(deadline).await.is_err() {
                break;
            }
        }
        Resp { body: std::mem::take(&mut self.buf), elapsed: self.opened.elapsed(), ..self.head.clone() }
    }

    /// The next event or comment, waiting at most `timeout` for it. `Ok(None)`: the agent ended the response (an
    /// event it had not finished is dropped, as a browser drops it). `Err`: no item in time, a transport error, or an
    /// event longer than [`MAX_EVENT_BYTES`].
    pub async fn next(&mut self, timeout: Duration) -> Result<Option<Item>, String> {
        let deadline = Instant::now() + timeout;
        loop {
            let fed = std::mem::take(&mut self.buf);
            self.decoder.feed(&fed).map_err(|e| e.to_string())?;
            if let Some(item) = self.decoder.next_item() {
                return Ok(Some(item_of(item)));
            }
            if self.ended {
                self.decoder.finish();
                return Ok(None);
            }
            self.fill(deadline).await?;
        }
    }

    /// The next event (comments are skipped), as [`Stream::next`].
    pub async fn next_event(&mut self, timeout: Duration) -> Result<Option<Event>, String> {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.next(left).await? {
                Some(Item::Event(e)) => return Ok(Some(e)),
                Some(Item::Comment(_)) => {}
                None => return Ok(None),
            }
        }
    }

    /// Every event until the agent ends the response, at most `max` of them, within `timeout` overall.
    pub async fn events_to_end(&mut self, max: usize, timeout: Duration) -> Result<Vec<Event>, (Vec<Event>, String)> {
        let deadline = Instant::now() + timeout;
        let mut out = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.next_event(left).await {
                Ok(Some(e)) if out.len() < max => out.push(e),
                Ok(Some(_)) => return Err((out, format!("more than {max} events"))),
                Ok(None) => return Ok(out),
                Err(e) => return Err((out, e)),
            }
        }
    }

    /// Reads more bytes, or notes the end.
    async fn fill(&mut self, deadline: Instant) -> Result<(), String> {
        let Some(resp) = self.resp.as_mut() else {
            self.ended = true;
            return Ok(());
        };
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, resp.chunk()).await {
            Err(_) => Err(format!("nothing more within {} ms", left.as_millis())),
            Ok(Err(e)) => {
                self.ended = true;
                self.resp = None;
                Err(format!("reading the stream: {}", crate::http::describe(&e)))
            }
            Ok(Ok(None)) => {
                self.ended = true;
                self.resp = None;
                Ok(())
            }
            Ok(Ok(Some(chunk))) => {
                let room = MAX_RECORDED_BYTES.saturating_sub(self.raw.len());
                self.raw.extend_from_slice(&chunk[..chunk.len().min(room)]);
                self.buf.extend_from_slice(&chunk);
                Ok(())
            }
        }
    }
}

/// The suite's view of a decoded item: the event type spelled out (`message` when absent), the data lines counted.
fn item_of(item: sse::Item) -> Item {
    match item {
        sse::Item::Comment(c) => Item::Comment(c),
        sse::Item::Event(e) => Item::Event(Event {
            event: e.kind().to_owned(),
            data_lines: e.data_lines(),
            id: e.id,
            data: e.data,
            other: e.other,
        }),
    }
}

/// The media type of a response, lower case, without parameters.
pub fn mime(r: &Resp) -> String {
    r.header("content-type").unwrap_or("").split(';').next().unwrap_or("").trim().to_ascii_lowercase()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(bytes: &[u8]) -> Vec<Item> {
        let mut d = sse::Decoder::new(MAX_EVENT_BYTES);
        d.feed(bytes).expect("within the limit");
        d.finish();
        std::iter::from_fn(|| d.next_item()).map(item_of).collect()
    }

    #[test]
    fn events_comments_and_line_ends() {
        let items = parse(b": connected\n\nid: 1\nevent: status\ndata: {\"a\":1}\n\nid:2\r\ndata: x\r\ndata: y\r\n\r\nid: 3\rdata: z\r\rid: 4\ndata: cut");
        assert_eq!(items[0], Item::Comment("connected".into()));
        let Item::Event(e) = &items[1] else { panic!("{items:?}") };
        assert_eq!((e.id_number(), e.event.as_str(), e.json()), (Some(1), "status", Some(serde_json::json!({"a": 1}))));
        let Item::Event(e) = &items[2] else { panic!("{items:?}") };
        assert_eq!(
            (e.id.as_deref(), e.event.as_str(), e.data.as_str(), e.data_lines),
            (Some("2"), "message", "x\ny", 2)
        );
        let Item::Event(e) = &items[3] else { panic!("{items:?}") };
        assert_eq!((e.id_number(), e.data.as_str()), (Some(3), "z"));
        assert_eq!(items.len(), 4, "an unfinished event is dropped: {items:?}");
    }

    #[test]
    fn ids_that_are_not_decimal_are_not_numbers() {
        for id in ["", "-1", "1.5", "abc", "99999999999999999999999"] {
            let e = Event { id: Some(id.into()), ..Event::default() };
            assert_eq!(e.id_number(), None, "{id}");
        }
    }
}
