//! GW-15 for streaming RESULT (§18, STR-7): the agent's `signature` field of the `result` event is verified as the
//! caller the gateway was and replaced by the gateway's own signature for its caller, event by event as the stream
//! passes (GW-14: never buffered beyond one line).
//!
//! The stream is passed on line by line, split as the event-stream interpretation splits it (CR, LF and CR LF end a
//! line: `a2a_core::sse::LineSplitter`), each line's bytes unchanged: complete lines are forwarded as soon as they
//! arrive; only a `signature:` line is held until the `data:` line after it, whose exact bytes it signs. A line longer than [`MAX_LINE`] without
//! its end, or a signature that does not verify, ends the stream there with an error (the caller sees a cut stream
//! and resumes or gives up; nothing after the forged signature passes).

use std::sync::Arc;

use a2a_core::headers as h;
use a2a_core::sse::{LineSplitter, Piece};
use bytes::{Bytes, BytesMut};
use futures_util::Stream;
use http::{HeaderMap, HeaderName, HeaderValue};
use http_body_util::BodyExt;

use crate::Inner;
use crate::edge::Forwarded;
use crate::upstream::UpstreamBody;

/// The longest line held while looking for its end (8 MiB, the bound of the answers the gateway reads whole).
pub(crate) const MAX_LINE: usize = 8 * 1024 * 1024;

/// Who signs what, for one stream.
pub(crate) struct StreamSigning {
    /// The agent's DID, the DID the request was forwarded as, and the request as sent to the agent.
    pub(crate) agent_did: String,
    pub(crate) as_did: String,
    pub(crate) agent_target: String,
    /// The caller's `A2A-Sender-ID` and the target of its request.
    pub(crate) caller: String,
    pub(crate) caller_target: String,
    /// The stream's `A2A-Execution-ID`.
    pub(crate) execution_id: String,
    /// Whether the gateway signs the `result` event for its caller. Not through a version translation, whose header
    /// names and `A2A-Version` the caller's STR-7 headers would be in: there the signature is only removed.
    pub(crate) sign: bool,
}

struct State {
    gw: Arc<Inner>,
    body: UpstreamBody,
    signing: StreamSigning,
    buf: BytesMut,
    lines: LineSplitter,
    held: Option<String>,
    /// The start of the current line was passed on already (so it is not a field line of its own).
    mid_line: bool,
    /// The last complete line was held back (a `signature:` line): the LF completing its CR LF is held with it.
    held_line: bool,
    /// An error to end the stream with, after what passed before it.
    failed: Option<std::io::Error>,
    done: bool,
}

fn cut(why: impl Into<String>) -> std::io::Error {
    std::io::Error::other(why.into())
}

/// The covered headers of a `result` event's signature (STR-7).
fn event_headers(version: &str, sender: &str, execution_id: &str) -> HeaderMap {
    let mut hm = HeaderMap::new();
    for (n, v) in [(h::A2A_VERSION, version), (h::A2A_SENDER_ID, sender), (h::A2A_EXECUTION_ID, execution_id)] {
        if let Ok(v) = HeaderValue::from_str(v) {
            hm.insert(HeaderName::from_static(n), v);
        }
    }
    hm
}

impl State {
    /// Handles one complete line, `text` without its end and `line` with it, appending what passes to `out`.
    async fn line(&mut self, text: &[u8], line: &[u8], out: &mut BytesMut) -> Result<(), std::io::Error> {
        self.held_line = false;
        if std::mem::take(&mut self.mid_line) {
            out.extend_from_slice(line);
            return Ok(());
        }
        if let Some(v) = text.strip_prefix(b"signature:") {
            let v = std::str::from_utf8(v).map_err(|_| cut("the agent's event signature is not UTF-8"))?;
            self.held = Some(v.trim().to_owned());
            self.held_line = true;
            return Ok(());
        }
        if text.is_empty() {
            // An event ends: a signature without a data line is dropped.
            self.held = None;
        } else if let (Some(sig), Some(data)) = (self.held.take(), text.strip_prefix(b"data:")) {
            let data = data.strip_prefix(b" ").unwrap_or(data);
            let s = &self.signing;
            let fwd = Forwarded { agent_did: &s.agent_did, as_did: &s.as_did, method: "GET", target: &s.agent_target };
            let agent = event_headers(a2a_core::PROTOCOL_VERSION, &s.agent_did, &s.execution_id);
            if let Err(e) = self.gw.edge.verify_answer(sig.as_bytes(), &fwd, 200, &agent, data).await {
                self.gw.metrics.upstream_error("response_signature");
                tracing::warn!(error = %e, "the agent's result event signature does not verify; stream cut");
                return Err(cut(format!("the agent's result event signature does not verify: {}", e.message)));
            }
            let ours = event_headers(a2a_core::PROTOCOL_VERSION, &self.gw.did, &s.execution_id);
            let sig = s.sign.then(|| self.gw.edge.sign_answer(&s.caller, "GET", &s.caller_target, 200, &ours, data));
            if let Some(v) = sig.flatten() {
                out.extend_from_slice(b"signature: ");
                out.extend_from_slice(v.as_bytes());
                out.extend_from_slice(b"\n");
            }
        }
        out.extend_from_slice(line);
        Ok(())
    }

    /// The next chunk to pass on, `None` at the end.
    async fn next(&mut self) -> Option<Result<Bytes, std::io::Error>> {
        loop {
            if let Some(e) = self.failed.take() {
                self.done = true;
                return Some(Err(e));
            }
            if self.done {
                return None;
            }
            let mut out = BytesMut::new();
            while let Some(piece) = self.lines.next_piece(&self.buf) {
                let line = self.buf.split_to(piece.len());
                let Piece::Line { text, .. } = piece else {
                    // The LF of a CR LF split across chunks: it ends the line the CR ended, and goes where it went.
                    if !self.held_line {
                        out.extend_from_slice(&line);
                    }
                    continue;
                };
                if let Err(e) = self.line(&line[..text], &line, &mut out).await {
                    // The lines before it pass; the stream ends at the line that failed.
                    self.buf.clear();
                    if out.is_empty() {
                        self.done = true;
                        return Some(Err(e));
                    }
                    self.failed = Some(e);
                    return Some(Ok(out.freeze()));
                }
            }
            if self.buf.len() > MAX_LINE {
                self.done = true;
                return Some(Err(cut(format!("a line of the agent's stream is longer than {MAX_LINE} bytes"))));
            }
            // A partial line passes at once unless it may be a signature (held until its end).
            if !self.buf.is_empty()
                && self.held.is_none()
                && !b"signature:".starts_with(&self.buf[..self.buf.len().min(10)])
            {
                let b = self.buf.split();
                out.extend_from_slice(&b);
                self.lines.rescan();
                self.mid_line = true;
            }
            if !out.is_empty() {
                return Some(Ok(out.freeze()));
            }
            match self.body.frame().await {
                Some(Ok(frame)) => {
                    if let Ok(data) = frame.into_data() {
                        self.buf.extend_from_slice(&data);
                    }
                }
                Some(Err(e)) => {
                    self.done = true;
                    return Some(Err(cut(format!("the agent's stream broke: {e}"))));
                }
                None => {
                    self.done = true;
                    let rest = self.buf.split();
                    return (!rest.is_empty() && self.held.is_none()).then(|| Ok(rest.freeze()));
                }
            }
        }
    }
}

/// The agent's event stream with its `result` event's signature verified and replaced (GW-15).
pub(crate) fn resign(
    gw: Arc<Inner>,
    body: UpstreamBody,
    signing: StreamSigning,
) -> impl Stream<Item = Result<Bytes, std::io::Error>> + Send + 'static {
    let state = State {
        gw,
        body,
        signing,
        buf: BytesMut::new(),
        lines: LineSplitter::new(),
        held: None,
        mid_line: false,
        held_line: false,
        failed: None,
        done: false,
    };
    futures_util::stream::unfold(state, |mut s| async move { s.next().await.map(|item| (item, s)) })
}
