//! The agent's HTTP/1.1 front (ERR-4, LIM-9): every request head is checked before hyper parses it, so that a
//! malformed request is answered with the JSON error body of §12 instead of hyper's empty-bodied `400`/`414`/`431`.
//!
//! [`HeadGuard`] sits between the connection and hyper. It follows the connection's framing (heads, then bodies by
//! `Content-Length` or chunked coding) and holds each head back until it is whole; a head this module accepts is
//! released to hyper unchanged, a head it refuses never reaches hyper: the guard tells hyper the connection ended,
//! and when hyper closes it (after any answer it is still writing for an earlier request) the guard writes the JSON
//! error and closes. The checks are a superset of hyper's own (httparse's grammar, the target as a URI, one
//! `Content-Length` value, a `Transfer-Encoding` of exactly `chunked` on HTTP/1.1 and never with `Content-Length`,
//! the head's size and field count), so hyper never has a reason left to answer a head itself.
//!
//! Why here and not in hyper: hyper writes its own answers to parse errors with no body and no hook to change them;
//! a second HTTP/1.1 server (the gateway's) would duplicate all of hyper's connection handling. The guard adds one
//! copy of each byte and a parse of each head.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use a2a_core::error::{A2aError, ErrorCode};
use bytes::{Buf, BytesMut};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// The bounds a head is checked against.
#[derive(Debug, Clone, Copy)]
pub struct HeadLimits {
    /// Largest head (request line and fields), in bytes: `431 headers_too_large` above.
    pub max_head_bytes: usize,
    /// Most header fields: `431 headers_too_large` above.
    pub max_fields: usize,
}

/// Why a head was refused: the JSON error to answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// The error code (`invalid_request` or `headers_too_large`).
    pub code: ErrorCode,
    /// What is wrong, for people.
    pub message: String,
}

impl Refusal {
    fn bad(message: impl Into<String>) -> Refusal {
        Refusal { code: ErrorCode::INVALID_REQUEST, message: message.into() }
    }

    fn too_large(limits: HeadLimits) -> Refusal {
        Refusal {
            code: ErrorCode::HEADERS_TOO_LARGE,
            message: format!(
                "the request head is over {} bytes or {} header fields (limits.max_header_bytes, limits.max_headers)",
                limits.max_head_bytes, limits.max_fields
            ),
        }
    }

    /// The whole HTTP/1.1 answer: status, JSON `ErrorBody`, `Connection: close`.
    pub fn response(&self) -> Vec<u8> {
        let err = A2aError::with_message(self.code.clone(), self.message.clone());
        let status = err.http_status();
        let reason = http::StatusCode::from_u16(status).ok().and_then(|s| s.canonical_reason()).unwrap_or("Error");
        let body = serde_json::to_vec(&err.to_body()).unwrap_or_else(|_| b"{}".to_vec());
        let mut out = format!(
            "HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
            body.len()
        )
        .into_bytes();
        out.extend_from_slice(&body);
        out
    }
}

/// How the message whose head was accepted carries its body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// This many bytes.
    Length(u64),
    /// Chunked coding.
    Chunked,
}

/// Checks one head. `Ok(None)`: not whole yet; `Ok(Some((head_len, framing)))`: accepted, its first `head_len`
/// bytes are the head; `Err`: refused.
pub fn check_head(buf: &[u8], limits: HeadLimits) -> Result<Option<(usize, Framing)>, Refusal> {
    let mut fields = vec![httparse::EMPTY_HEADER; limits.max_fields];
    let mut req = httparse::Request::new(&mut fields);
    let len = match req.parse(buf) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) if buf.len() > limits.max_head_bytes => return Err(Refusal::too_large(limits)),
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(httparse::Error::TooManyHeaders) => return Err(Refusal::too_large(limits)),
        Err(e) => return Err(Refusal::bad(format!("the request head is malformed: {e} (RFC 9112)"))),
    };
    if len > limits.max_head_bytes {
        return Err(Refusal::too_large(limits));
    }
    let target = req.path.unwrap_or("");
    if http::Uri::try_from(target).is_err() {
        return Err(Refusal::bad("the request target is not a valid URI (RFC 9112 §3.2)"));
    }
    let http10 = req.version == Some(0);
    let mut length: Option<u64> = None;
    let mut te: Option<Vec<String>> = None;
    for h in req.headers.iter() {
        if h.name.eq_ignore_ascii_case("content-length") {
            let v = std::str::from_utf8(h.value).map_err(|_| Refusal::bad("Content-Length is not a number"))?;
            for part in v.split(',') {
                let part = part.trim_matches([' ', '\t']);
                if part.is_empty() || part.len() > 19 || !part.bytes().all(|b| b.is_ascii_digit()) {
                    return Err(Refusal::bad(format!("Content-Length {v:?} is not a number (RFC 9110 §8.6)")));
                }
                let n: u64 = part.parse().map_err(|_| Refusal::bad("Content-Length is not a number"))?;
                if length.is_some_and(|l| l != n) {
                    return Err(Refusal::bad("the request has two different Content-Length values (RFC 9112 §6.3)"));
                }
                length = Some(n);
            }
        } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
            let v = std::str::from_utf8(h.value).map_err(|_| Refusal::bad("Transfer-Encoding is malformed"))?;
            let codings = te.get_or_insert_with(Vec::new);
            codings.extend(v.split(',').map(|c| c.trim_matches([' ', '\t']).to_ascii_lowercase()));
        }
    }
    let framing = match te {
        None => Framing::Length(length.unwrap_or(0)),
        Some(_) if http10 => return Err(Refusal::bad("an HTTP/1.0 request cannot use Transfer-Encoding")),
        Some(_) if length.is_some() => {
            return Err(Refusal::bad(
                "the request has both Transfer-Encoding and Content-Length; send one (RFC 9112 §6.1)",
            ));
        }
        Some(c) if c.len() == 1 && c[0] == "chunked" => Framing::Chunked,
        Some(c) => {
            return Err(Refusal::bad(format!(
                "Transfer-Encoding {:?} is not supported: send `chunked` alone or Content-Length",
                c.join(", ")
            )));
        }
    };
    Ok(Some((len, framing)))
}

/// Where the guard is in the connection's byte stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Collecting a head.
    Head,
    /// In a body of this many more bytes.
    Length(u64),
    /// In a chunked body.
    Chunk(Chunk),
    /// Framing the guard cannot follow (a malformed chunked body): hyper refuses it, fails the body (the router
    /// answers `400` as JSON) and closes; the guard passes the bytes on.
    Through,
    /// A head was refused: nothing more is read.
    Refused,
}

/// The chunked decoder's states (RFC 9112 §7.1), as hyper's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Chunk {
    Size { size: u64, digits: bool },
    SizeLws { size: u64 },
    Ext { size: u64 },
    SizeLf { size: u64 },
    Data(u64),
    DataCr,
    DataLf,
    TrailerStart,
    TrailerLine,
    TrailerLf,
    EndLf,
}

/// A connection with its request heads checked before hyper reads them (see the module documentation).
pub struct HeadGuard<S> {
    inner: S,
    limits: HeadLimits,
    state: State,
    /// The head being collected.
    head: BytesMut,
    /// Checked bytes not yet read by hyper.
    ready: BytesMut,
    /// The answer to a refused head, written when hyper closes the connection.
    answer: Option<(Vec<u8>, usize)>,
}

impl<S> HeadGuard<S> {
    /// Guards `inner`.
    pub fn new(inner: S, limits: HeadLimits) -> HeadGuard<S> {
        HeadGuard { inner, limits, state: State::Head, head: BytesMut::new(), ready: BytesMut::new(), answer: None }
    }

    /// Whether a head was refused on this connection.
    pub fn refused(&self) -> bool {
        self.state == State::Refused
    }

    /// Follows `data` (just read) through the framing: checked bytes go to `ready`.
    fn feed(&mut self, mut data: &[u8]) {
        while !data.is_empty() {
            match self.state {
                State::Refused => return,
                State::Through => {
                    self.ready.extend_from_slice(data);
                    return;
                }
                State::Head => {
                    let before = self.head.len();
                    self.head.extend_from_slice(data);
                    // A head ends with a line feed: bytes without one cannot complete it (no parse of the whole
                    // head again for each byte of a slow client), only take it past the limit.
                    if !data.contains(&b'\n') && self.head.len() <= self.limits.max_head_bytes {
                        return;
                    }
                    match check_head(&self.head, self.limits) {
                        Ok(None) => return,
                        Ok(Some((len, framing))) => {
                            let used = len - before;
                            self.ready.extend_from_slice(&self.head[..len]);
                            self.head.clear();
                            self.head = BytesMut::new();
                            data = &data[used..];
                            self.state = match framing {
                                Framing::Length(0) => State::Head,
                                Framing::Length(n) => State::Length(n),
                                Framing::Chunked => State::Chunk(Chunk::Size { size: 0, digits: false }),
                            };
                        }
                        Err(refusal) => {
                            tracing::debug!(code = %refusal.code.as_str(), message = %refusal.message, "request head refused");
                            self.answer = Some((refusal.response(), 0));
                            self.head = BytesMut::new();
                            self.state = State::Refused;
                            return;
                        }
                    }
                }
                State::Length(n) => {
                    let take = (n.min(data.len() as u64)) as usize;
                    self.ready.extend_from_slice(&data[..take]);
                    data = &data[take..];
                    self.state = if n == take as u64 { State::Head } else { State::Length(n - take as u64) };
                }
                State::Chunk(Chunk::Data(n)) => {
                    let take = (n.min(data.len() as u64)) as usize;
                    self.ready.extend_from_slice(&data[..take]);
                    data = &data[take..];
                    self.state =
                        State::Chunk(if n == take as u64 { Chunk::DataCr } else { Chunk::Data(n - take as u64) });
                }
                State::Chunk(c) => {
                    let b = data[0];
                    self.ready.extend_from_slice(&data[..1]);
                    data = &data[1..];
                    self.state = match step(c, b) {
                        Some(Chunk::EndLf) if b == b'\n' => State::Head,
                        Some(next) => State::Chunk(next),
                        None => State::Through,
                    };
                }
            }
        }
    }
}

/// The chunked decoder's next state after byte `b`; `None` when the coding is malformed. The end of the message
/// is `EndLf` returned for its final `\n`.
fn step(c: Chunk, b: u8) -> Option<Chunk> {
    let hex = |b: u8| (b as char).to_digit(16).map(u64::from);
    Some(match c {
        Chunk::Size { size, digits } => match b {
            _ if hex(b).is_some() => Chunk::Size { size: size.checked_mul(16)?.checked_add(hex(b)?)?, digits: true },
            b' ' | b'\t' if digits => Chunk::SizeLws { size },
            b';' if digits => Chunk::Ext { size },
            b'\r' if digits => Chunk::SizeLf { size },
            _ => return None,
        },
        Chunk::SizeLws { size } => match b {
            b' ' | b'\t' => Chunk::SizeLws { size },
            b';' => Chunk::Ext { size },
            b'\r' => Chunk::SizeLf { size },
            _ => return None,
        },
        Chunk::Ext { size } => match b {
            b'\r' => Chunk::SizeLf { size },
            b'\n' => return None,
            _ => Chunk::Ext { size },
        },
        Chunk::SizeLf { size } => match b {
            b'\n' if size == 0 => Chunk::TrailerStart,
            b'\n' => Chunk::Data(size),
            _ => return None,
        },
        Chunk::Data(n) => Chunk::Data(n),
        Chunk::DataCr if b == b'\r' => Chunk::DataLf,
        Chunk::DataLf if b == b'\n' => Chunk::Size { size: 0, digits: false },
        Chunk::DataCr | Chunk::DataLf => return None,
        Chunk::TrailerStart if b == b'\r' => Chunk::EndLf,
        Chunk::TrailerStart | Chunk::TrailerLine if b != b'\r' => Chunk::TrailerLine,
        Chunk::TrailerLine => Chunk::TrailerLf,
        Chunk::TrailerStart => return None,
        Chunk::TrailerLf if b == b'\n' => Chunk::TrailerStart,
        Chunk::TrailerLf => return None,
        Chunk::EndLf if b == b'\n' => Chunk::EndLf,
        Chunk::EndLf => return None,
    })
}

impl<S: AsyncRead + Unpin> AsyncRead for HeadGuard<S> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        loop {
            if !self.ready.is_empty() {
                let n = self.ready.len().min(buf.remaining());
                buf.put_slice(&self.ready[..n]);
                self.ready.advance(n);
                return Poll::Ready(Ok(()));
            }
            if self.state == State::Refused {
                // hyper sees the connection end between requests and closes it; the answer goes out then.
                return Poll::Ready(Ok(()));
            }
            let mut chunk = [0u8; 8192];
            let mut rb = ReadBuf::new(&mut chunk);
            std::task::ready!(Pin::new(&mut self.inner).poll_read(cx, &mut rb))?;
            let filled = rb.filled();
            if filled.is_empty() {
                // The peer closed: hand hyper what there is (an incomplete head is hyper's to report as closed).
                let rest = std::mem::take(&mut self.head);
                self.ready.extend_from_slice(&rest);
                if self.ready.is_empty() {
                    return Poll::Ready(Ok(()));
                }
                continue;
            }
            let data = filled.to_vec();
            self.feed(&data);
        }
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for HeadGuard<S> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = &mut *self;
        while let Some((answer, written)) = &mut this.answer {
            if *written >= answer.len() {
                this.answer = None;
                break;
            }
            let n = std::task::ready!(Pin::new(&mut this.inner).poll_write(cx, &answer[*written..]))?;
            if n == 0 {
                this.answer = None;
                break;
            }
            *written += n;
        }
        std::task::ready!(Pin::new(&mut this.inner).poll_flush(cx))?;
        Pin::new(&mut this.inner).poll_shutdown(cx)
    }
    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }
    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: HeadLimits = HeadLimits { max_head_bytes: 32 * 1024, max_fields: 128 };

    #[test]
    fn a_plain_head_is_accepted_with_its_framing() {
        let r = check_head(b"POST /a2a HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello", LIMITS);
        assert_eq!(r, Ok(Some((50, Framing::Length(5)))));
        let r = check_head(b"POST /a2a HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", LIMITS);
        assert_eq!(r.map(|o| o.map(|(_, f)| f)), Ok(Some(Framing::Chunked)));
        assert_eq!(check_head(b"GET /a2a HTTP/1.1\r\nHost: x\r\n", LIMITS), Ok(None));
    }

    #[test]
    fn the_chunked_framing_is_followed_to_the_next_head() {
        let mut g = HeadGuard::new(tokio::io::empty(), LIMITS);
        g.feed(b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5;x=y\r\nhello\r\n0\r\nT: 1\r\n\r\nGET / HTT");
        assert_eq!(g.state, State::Head);
        assert_eq!(&g.head[..], b"GET / HTT");
        g.feed(b"P/1.1\r\n\r\n");
        assert_eq!(g.state, State::Head);
        assert!(g.head.is_empty());
    }
}
