//! The one Server-Sent Events codec of the workspace (WHATWG HTML, "Server-sent events", §9.2.6 "Interpreting an
//! event stream"), sans I/O: a [`Decoder`] is fed bytes split anywhere and yields [`Item`]s; [`write_event`] and
//! [`write_comment`] render them. Used by the streamed RESULT (§18), the sessions' event channel (§17.6) and the
//! A2A 1.x bridge (§20), on the agent, the client, the gateway and the conformance suite alike.
//!
//! The decoder follows the interpretation rules: CR, LF and CR LF end a line (also a CR at the end of one chunk and
//! an LF at the start of the next), a leading byte order mark is skipped, lines starting with `:` are comments, a
//! field without a colon has an empty value, one space after the colon is removed, `data` lines are joined with LF,
//! a blank line dispatches the event only when it has data (an `id` still updates [`Decoder::last_event_id`] at the
//! blank line), an
//! `id` containing NUL is ignored, `retry` is taken only when it is all ASCII digits, and an event not ended by a
//! blank line when the stream ends is discarded. It is bounded: a line or an event longer than the limit given to
//! [`Decoder::new`] is an error, never an unbounded buffer.
//!
//! A relay that passes a stream on byte for byte (the gateway re-signing a streamed RESULT, GW-15) splits it into
//! lines with the decoder's own [`LineSplitter`], which gives each raw line's byte span.

use std::collections::VecDeque;

/// One dispatched event.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Event {
    /// The `id` field of this event's block, when it had one (see [`Decoder::last_event_id`] for the id a browser
    /// reports, which carries over from earlier events).
    pub id: Option<String>,
    /// The `event` field (the event type); `None` when absent or empty, which means `message`.
    pub event: Option<String>,
    /// The `data` lines, joined with LF.
    pub data: String,
    /// The `retry` field of this event's block, when it had a valid one (milliseconds).
    pub retry: Option<u64>,
    /// Every other field, in order (the interpretation ignores them; protocol extensions such as STR-7's
    /// `signature` read them).
    pub other: Vec<(String, String)>,
}

impl Event {
    /// An event with only data.
    pub fn data(data: impl Into<String>) -> Self {
        Event { data: data.into(), ..Event::default() }
    }

    /// The event type: the `event` field, `message` when it had none.
    pub fn kind(&self) -> &str {
        self.event.as_deref().unwrap_or("message")
    }

    /// How many `data` lines the event had (a dispatched event has at least one).
    pub fn data_lines(&self) -> usize {
        self.data.bytes().filter(|b| *b == b'\n').count() + 1
    }
}

/// What a stream yields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Item {
    /// A dispatched event.
    Event(Event),
    /// A comment line (`: keep-alive`), without its colon and the one space after it.
    Comment(String),
}

/// A line or an event longer than the decoder's limit.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{what} of the event stream is longer than {limit} bytes")]
pub struct TooLong {
    /// `a line` or `an event`.
    pub what: &'static str,
    /// The limit, in bytes.
    pub limit: usize,
}

const BOM: &[u8] = b"\xEF\xBB\xBF";

/// A Server-Sent Events decoder: [`Decoder::feed`] bytes, take [`Decoder::next_item`]s.
#[derive(Debug, Clone)]
pub struct Decoder {
    max: usize,
    buf: Vec<u8>,
    lines: LineSplitter,
    /// Whether the stream's start (and its byte order mark) is behind.
    started: bool,
    data: String,
    data_lines: usize,
    event: Option<String>,
    id: Option<String>,
    retry: Option<u64>,
    other: Vec<(String, String)>,
    /// Bytes of the lines of the event being built.
    event_bytes: usize,
    /// The last event id buffer (set by `id` fields) and the last event id string (set from it at each blank line).
    id_buffer: String,
    last_event_id: String,
    reconnection_time: Option<u64>,
    ready: VecDeque<Item>,
}

impl Decoder {
    /// A decoder that refuses a line or an event longer than `max` bytes.
    pub fn new(max: usize) -> Self {
        Decoder {
            max,
            buf: Vec::new(),
            lines: LineSplitter::default(),
            started: false,
            data: String::new(),
            data_lines: 0,
            event: None,
            id: None,
            retry: None,
            other: Vec::new(),
            event_bytes: 0,
            id_buffer: String::new(),
            last_event_id: String::new(),
            reconnection_time: None,
            ready: VecDeque::new(),
        }
    }

    /// Feeds the next bytes of the stream. The items they complete wait in [`Decoder::next_item`]. An error leaves
    /// the decoder as it was before the line that went past the limit; the stream should be given up.
    pub fn feed(&mut self, bytes: &[u8]) -> Result<(), TooLong> {
        self.buf.extend_from_slice(bytes);
        if !self.started {
            if self.buf.len() < BOM.len() && BOM.starts_with(&self.buf) {
                return Ok(());
            }
            if self.buf.starts_with(BOM) {
                self.buf.drain(..BOM.len());
            }
            self.started = true;
        }
        let mut start = 0;
        loop {
            let before = self.lines.clone();
            let Some(piece) = self.lines.next_piece(&self.buf[start..]) else { break };
            if let Piece::Line { text, .. } = piece {
                let line = std::mem::take(&mut self.buf);
                let r = self.line(&line[start..start + text]);
                self.buf = line;
                if let Err(e) = r {
                    self.buf.drain(..start);
                    self.lines = before;
                    self.lines.rescan();
                    return Err(e);
                }
            }
            start += piece.len();
        }
        self.buf.drain(..start);
        if self.buf.len() > self.max {
            return Err(TooLong { what: "a line", limit: self.max });
        }
        Ok(())
    }

    /// Notes the end of the stream: an unfinished line and the event being built are discarded, as the
    /// interpretation says. The decoder can be fed a new stream afterwards (a reconnection); the last event id and
    /// the reconnection time stay.
    pub fn finish(&mut self) {
        self.buf.clear();
        self.lines = LineSplitter::default();
        self.started = false;
        self.id_buffer.clone_from(&self.last_event_id);
        self.reset_event();
    }

    /// The next item completed by what was fed.
    pub fn next_item(&mut self) -> Option<Item> {
        self.ready.pop_front()
    }

    /// The next event completed by what was fed (comments are skipped).
    pub fn next_event(&mut self) -> Option<Event> {
        while let Some(item) = self.ready.pop_front() {
            if let Item::Event(e) = item {
                return Some(e);
            }
        }
        None
    }

    /// The last event id: the value of the last valid `id` field of a block ended by a blank line (whether or not
    /// the block had data; empty before any), the `Last-Event-ID` of a reconnection. An `id` in an event cut off by
    /// the end of the stream does not count.
    pub fn last_event_id(&self) -> &str {
        &self.last_event_id
    }

    /// The reconnection time set by the last valid `retry` field (milliseconds).
    pub fn reconnection_time(&self) -> Option<u64> {
        self.reconnection_time
    }

    /// Bytes held: an unfinished line and the event being built.
    pub fn buffered(&self) -> usize {
        self.buf.len() + self.event_bytes
    }

    fn reset_event(&mut self) {
        self.data.clear();
        self.data_lines = 0;
        self.event = None;
        self.id = None;
        self.retry = None;
        self.other.clear();
        self.event_bytes = 0;
    }

    /// Processes one line, without its end.
    fn line(&mut self, line: &[u8]) -> Result<(), TooLong> {
        if line.len() > self.max {
            return Err(TooLong { what: "a line", limit: self.max });
        }
        if line.is_empty() {
            self.last_event_id.clone_from(&self.id_buffer);
            if self.data_lines > 0 {
                let e = Event {
                    id: self.id.take(),
                    event: self.event.take().filter(|t| !t.is_empty()),
                    data: std::mem::take(&mut self.data),
                    retry: self.retry.take(),
                    other: std::mem::take(&mut self.other),
                };
                self.ready.push_back(Item::Event(e));
            }
            self.reset_event();
            return Ok(());
        }
        let line = String::from_utf8_lossy(line);
        if let Some(comment) = line.strip_prefix(':') {
            self.ready.push_back(Item::Comment(comment.strip_prefix(' ').unwrap_or(comment).to_owned()));
            return Ok(());
        }
        if self.event_bytes + line.len() + 1 > self.max {
            return Err(TooLong { what: "an event", limit: self.max });
        }
        self.event_bytes += line.len() + 1;
        let (field, value) = match line.split_once(':') {
            Some((f, v)) => (f, v.strip_prefix(' ').unwrap_or(v)),
            None => (line.as_ref(), ""),
        };
        match field {
            "data" => {
                if self.data_lines > 0 {
                    self.data.push('\n');
                }
                self.data.push_str(value);
                self.data_lines += 1;
            }
            "event" => self.event = Some(value.to_owned()),
            "id" if !value.contains('\0') => {
                value.clone_into(&mut self.id_buffer);
                self.id = Some(value.to_owned());
            }
            "id" => {}
            "retry" => {
                if !value.is_empty()
                    && value.bytes().all(|b| b.is_ascii_digit())
                    && let Ok(ms) = value.parse()
                {
                    self.retry = Some(ms);
                    self.reconnection_time = Some(ms);
                }
            }
            other => self.other.push((other.to_owned(), value.to_owned())),
        }
        Ok(())
    }
}

/// What [`LineSplitter::next_piece`] found at the start of the bytes not consumed yet. Its bytes are the first
/// [`Piece::len`] of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Piece {
    /// A complete line: `len` raw bytes, its line end (CR, LF or CR LF) included; the first `text` of them are the
    /// line without its end.
    Line {
        /// The length of the line without its end.
        text: usize,
        /// The length of the line with its end.
        len: usize,
    },
    /// One LF completing the CR LF whose CR ended the line before, in an earlier chunk: part of that line's end,
    /// not a line of its own.
    LineEndRest,
}

impl Piece {
    /// How many bytes it spans.
    pub fn len(self) -> usize {
        match self {
            Piece::Line { len, .. } => len,
            Piece::LineEndRest => 1,
        }
    }

    /// Whether it spans no byte (never: a line has at least its line end).
    pub fn is_empty(self) -> bool {
        self.len() == 0
    }
}

/// Splits an event stream into its lines as the interpretation does — CR, LF and CR LF each end a line, also when
/// the CR ends one chunk and the LF starts the next — keeping each line's raw bytes, so that a relay can look at
/// the lines and pass the stream on unchanged. Sans I/O: the caller keeps the bytes not consumed yet.
///
/// Give [`LineSplitter::next_piece`] the bytes not consumed yet (the caller may append to them between calls) and
/// consume the piece it returns before the next call. A caller that consumes bytes of an unfinished line itself
/// (passing it on before its end) calls [`LineSplitter::rescan`].
#[derive(Debug, Clone, Default)]
pub struct LineSplitter {
    /// The last line ended with a CR that was the last byte given: an LF right after it belongs to that line end.
    after_cr: bool,
    /// How much of the bytes not consumed was searched for a line end already.
    scanned: usize,
}

impl LineSplitter {
    /// A splitter at the start of a stream.
    pub fn new() -> Self {
        LineSplitter::default()
    }

    /// The piece at the start of `unconsumed`, `None` while it holds no complete line.
    pub fn next_piece(&mut self, unconsumed: &[u8]) -> Option<Piece> {
        if let Some(&first) = unconsumed.first()
            && std::mem::take(&mut self.after_cr)
            && first == b'\n'
        {
            self.scanned = 0;
            return Some(Piece::LineEndRest);
        }
        let from = self.scanned.min(unconsumed.len());
        let Some(i) = unconsumed[from..].iter().position(|&b| b == b'\n' || b == b'\r').map(|i| from + i) else {
            self.scanned = unconsumed.len();
            return None;
        };
        self.scanned = 0;
        if unconsumed[i] == b'\r' {
            match unconsumed.get(i + 1) {
                Some(b'\n') => return Some(Piece::Line { text: i, len: i + 2 }),
                None => self.after_cr = true,
                Some(_) => {}
            }
        }
        Some(Piece::Line { text: i, len: i + 1 })
    }

    /// Notes that the caller consumed bytes of an unfinished line itself: the search for its end starts again.
    pub fn rescan(&mut self) {
        self.scanned = 0;
    }
}

/// Appends an event: `id`, `event`, the other fields in order, `retry`, then one `data` line per line of its data
/// (CR, LF and CR LF in the data split it), and the blank line that dispatches it. Fields are written as
/// `name: value`; a value that holds a line break would not survive and is cut at it.
pub fn write_event(out: &mut String, e: &Event) {
    fn field(out: &mut String, name: &str, value: &str) {
        out.push_str(name);
        out.push_str(": ");
        out.push_str(value.split(['\r', '\n']).next().unwrap_or(""));
        out.push('\n');
    }
    if let Some(id) = &e.id {
        field(out, "id", id);
    }
    if let Some(t) = &e.event {
        field(out, "event", t);
    }
    for (name, value) in &e.other {
        field(out, name, value);
    }
    if let Some(ms) = e.retry {
        field(out, "retry", &ms.to_string());
    }
    let data = e.data.replace("\r\n", "\n");
    for line in data.split(['\r', '\n']) {
        field(out, "data", line);
    }
    out.push('\n');
}

/// An event rendered by [`write_event`].
pub fn encode(e: &Event) -> String {
    let mut out = String::new();
    write_event(&mut out, e);
    out
}

/// Appends a comment line (`: text`) and a blank line, as a keep-alive is sent. A line break in `text` cuts it.
pub fn write_comment(out: &mut String, text: &str) {
    out.push_str(": ");
    out.push_str(text.split(['\r', '\n']).next().unwrap_or(""));
    out.push_str("\n\n");
}
