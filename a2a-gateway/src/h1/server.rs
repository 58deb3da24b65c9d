//! The gateway's HTTP/1.1 connections: read a head, delimit and read the body within the limits, hand the request to
//! the proxy ([`crate::proxy::handle`]) or, for paths the proxy does not serve natively, to the gateway's HTTP service,
//! and write the answer — one write of head and body when the body is in hand, the body streamed as it comes
//! otherwise (chunked to HTTP/1.1 callers when its length is not known).
//!
//! Limits (spec §13, the gateway's `[limits]`): a head must arrive within `header_read_timeout_ms` (from the
//! connection's start, or from the head's first byte on a kept-alive connection, which waits for its next request up
//! to `keepalive_timeout_ms`) and may be at most twice `max_header_bytes` and
//! `max_headers` (the proxy answers `431` as JSON over the configured limits; heads beyond twice them are refused
//! here, also as JSON, and the connection closed); a body is at most `max_body_bytes` and must arrive within
//! `body_read_timeout_ms`. A body over the limit is read out and dropped, bounded, before the `413`
//! ([`a2a_runtime::body`]'s lingering read). Requests on one connection are served in order (pipelining allowed).

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use a2a_core::error::{A2aError, ErrorCode};
use a2a_runtime::body::{BodyBudget, BodyCharge, BodyError, DRAIN_MAX_BYTES, DRAIN_MAX_TIME};
use axum::body::Body;
use bytes::{Bytes, BytesMut};
use http::Request;
use http_body_util::BodyExt;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;
use tower::{Service, ServiceExt};

use super::body::{Chunked, Decoded, Framing, FramingError, LAST_CHUNK, encode_chunk, request_framing};
use super::head::{HeadError, Headers, MAX_FIELDS, RequestHead, parse_request};
use crate::Inner;
use crate::upstream::UpstreamBody;

/// An answer to write.
pub(crate) struct Reply {
    /// The status code.
    pub(crate) status: u16,
    /// The fields (without framing or connection fields: the writer sets those).
    pub(crate) headers: Headers,
    /// The body.
    pub(crate) body: ReplyBody,
}

/// The body of a [`Reply`].
pub(crate) enum ReplyBody {
    /// None.
    Empty,
    /// In hand.
    Full(Bytes),
    /// An agent's answer passing through as it is read.
    Upstream(UpstreamBody),
    /// Any other body (the gateway's HTTP service, a re-signed event stream).
    Stream(Body),
}

impl Reply {
    /// A JSON error answered by the connection itself (before the proxy saw the request).
    pub(crate) fn error(err: &A2aError) -> Reply {
        let mut headers = Headers::new();
        headers.append("content-type", Bytes::from_static(b"application/json"));
        headers.append("a2a-version", Bytes::from_static(a2a_core::PROTOCOL_VERSION.as_bytes()));
        Reply {
            status: err.http_status(),
            headers,
            body: ReplyBody::Full(serde_json::to_vec(&err.to_body()).map(Bytes::from).unwrap_or_default()),
        }
    }

    /// An `http::Response` as a reply.
    pub(crate) fn from_response(resp: http::Response<Body>) -> Reply {
        let (parts, body) = resp.into_parts();
        let mut headers = Headers::from_header_map(&parts.headers);
        super::strip_hop_by_hop(&mut headers);
        let body = match http_body::Body::size_hint(&body).exact() {
            Some(0) => ReplyBody::Empty,
            _ => ReplyBody::Stream(body),
        };
        Reply { status: parts.status.as_u16(), headers, body }
    }

    /// The reply as an `http::Response` (the HTTP/2 path).
    pub(crate) fn into_response(mut self) -> http::Response<Body> {
        super::strip_hop_by_hop(&mut self.headers);
        let body = match self.body {
            ReplyBody::Empty => Body::empty(),
            ReplyBody::Full(b) => Body::from(b),
            ReplyBody::Upstream(u) => Body::new(u),
            ReplyBody::Stream(b) => b,
        };
        let mut r = http::Response::new(body);
        *r.status_mut() = http::StatusCode::from_u16(self.status).unwrap_or(http::StatusCode::BAD_GATEWAY);
        *r.headers_mut() = self.headers.to_header_map();
        r
    }
}

/// A request read by the connection: its head, and its body or why the body could not be read.
pub(crate) struct Incoming {
    /// The head.
    pub(crate) head: RequestHead,
    /// The body (empty when there is none).
    pub(crate) body: Result<Bytes, BodyError>,
}

/// What the connections need from the gateway.
#[derive(Clone)]
pub(crate) struct Served {
    /// The configuration in force (OPS-4): each request is served by the one in force when its head is read.
    pub(crate) current: Arc<arc_swap::ArcSwap<Inner>>,
    /// The HTTP service for everything the proxy does not serve natively (HTTP/2, the bridge, admin paths).
    pub(crate) http: crate::HttpService,
}

/// Limits of a connection, from `[limits]`.
#[derive(Clone, Copy)]
struct ConnLimits {
    head_timeout: Duration,
    /// Longest wait for the next request on a kept-alive connection; zero: none is kept alive.
    keepalive: Duration,
    body_timeout: Duration,
    max_head_bytes: usize,
    max_fields: usize,
    max_body: usize,
    write_timeout: Duration,
}

impl ConnLimits {
    fn of(gw: &Inner) -> ConnLimits {
        let l = &gw.limits;
        ConnLimits {
            head_timeout: Duration::from_millis(l.header_read_timeout_ms),
            keepalive: Duration::from_millis(l.keepalive_timeout_ms),
            body_timeout: Duration::from_millis(l.body_read_timeout_ms),
            max_head_bytes: (l.max_header_bytes * 2).max(8192),
            max_fields: (l.max_headers * 2).clamp(8, MAX_FIELDS),
            max_body: l.max_body_bytes,
            write_timeout: Duration::from_millis(l.answer_write_timeout_ms),
        }
    }
}

const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// Serves `listener` until `shutdown`, then lets requests in flight finish for up to `grace`.
pub(crate) async fn serve(
    listener: TcpListener,
    served: Served,
    shutdown: impl std::future::Future<Output = ()> + Send,
    grace: Duration,
) -> std::io::Result<()> {
    let stop = CancellationToken::new();
    let tracker = tokio_util::task::TaskTracker::new();
    tokio::pin!(shutdown);
    // GW-23: memory freed after a burst goes back to the system even when the thread then idles.
    let tick = tokio::spawn(a2a_runtime::allocator::ticker());
    loop {
        // GW-23: a connection is accepted only with a permit; at the cap, new connections wait in the backlog.
        let connections = served.current.load().connections.clone();
        let permit = tokio::select! {
            p = connections.acquire() => p,
            () = shutdown.as_mut() => break,
        };
        let Some((stream, peer)) = a2a_runtime::serve::accept(&listener, shutdown.as_mut()).await else { break };
        let served = served.clone();
        let stop = stop.clone();
        tracker.spawn(async move {
            connection(stream, peer, served, stop).await;
            drop(permit);
        });
    }
    drop(listener);
    tick.abort();
    stop.cancel();
    tracker.close();
    if tokio::time::timeout(grace, tracker.wait()).await.is_err() {
        tracing::warn!("some connections were still open after the grace period");
    }
    Ok(())
}

/// Why reading a head stopped.
enum HeadRead {
    Head(RequestHead),
    /// The connection ended, timed out or the gateway is stopping, between requests: close quietly.
    Closed,
    /// The bytes are not a request the gateway takes: answer and close.
    Refused(A2aError),
    /// The bytes are HTTP/2's preface.
    H2,
}

async fn read_head(
    stream: &mut TcpStream,
    buf: &mut BytesMut,
    limits: ConnLimits,
    mut stopped: std::pin::Pin<&mut tokio_util::sync::WaitForCancellationFuture<'_>>,
    first: bool,
    deadline: &mut super::Deadline,
) -> HeadRead {
    // Between requests the connection may stay idle for the keep-alive time; a head, once it starts, has the header
    // read time (as has a new connection's first one).
    let mut idle = !first && blank(buf);
    deadline.set(tokio::time::Instant::now() + if idle { limits.keepalive } else { limits.head_timeout });
    loop {
        if !buf.is_empty() {
            let n = buf.len().min(H2_PREFACE.len());
            if first && buf[..n] == H2_PREFACE[..n] {
                // HTTP/2 with prior knowledge (its preface, maybe with frames after it), or the start of it.
                if n == H2_PREFACE.len() {
                    return HeadRead::H2;
                }
            } else {
                match parse_request(buf, limits.max_fields) {
                    Ok(Some(p)) => {
                        if p.len > limits.max_head_bytes {
                            return HeadRead::Refused(too_large_head(limits));
                        }
                        let len = p.len;
                        return match p.bind(buf.split_to(len).freeze()) {
                            Ok(h) => HeadRead::Head(h),
                            Err(HeadError::Malformed(m)) => HeadRead::Refused(A2aError::with_message(
                                ErrorCode::INVALID_REQUEST,
                                format!("the request is not HTTP/1.1: {m}"),
                            )),
                            Err(HeadError::TooManyHeaders) => HeadRead::Refused(too_large_head(limits)),
                        };
                    }
                    Ok(None) if buf.len() > limits.max_head_bytes => {
                        return HeadRead::Refused(too_large_head(limits));
                    }
                    Ok(None) => {}
                    Err(HeadError::TooManyHeaders) => return HeadRead::Refused(too_large_head(limits)),
                    Err(HeadError::Malformed(m)) => {
                        return HeadRead::Refused(A2aError::with_message(
                            ErrorCode::INVALID_REQUEST,
                            format!("the request is not HTTP/1.1: {m}"),
                        ));
                    }
                }
            }
        }
        if idle && !blank(buf) {
            // A head started and needs more bytes: the header read time applies from here. (A head that came whole
            // in one read never moves the deadline, so its timer is not reset once per request.)
            idle = false;
            deadline.set(tokio::time::Instant::now() + limits.head_timeout);
        }
        if buf.capacity() - buf.len() < 2048 {
            buf.reserve(8 * 1024);
        }
        let read = tokio::select! {
            biased;
            r = stream.read_buf(buf) => r,
            () = deadline.passed() => return HeadRead::Closed,
            // Stopping: a connection waiting between requests closes; one in the middle of a head finishes it.
            () = stopped.as_mut(), if blank(buf) => return HeadRead::Closed,
        };
        match read {
            Ok(n) if n > 0 => {}
            _ => return HeadRead::Closed,
        }
    }
}

/// Whether `buf` holds no part of a head yet: nothing, or only the empty lines a client may send between requests
/// (RFC 9112 §2.2; the parser skips them).
fn blank(buf: &[u8]) -> bool {
    buf.iter().all(|&b| b == b'\r' || b == b'\n')
}

fn too_large_head(limits: ConnLimits) -> A2aError {
    A2aError::with_message(
        ErrorCode::HEADERS_TOO_LARGE,
        format!("the request head is over {} bytes or {} fields", limits.max_head_bytes, limits.max_fields),
    )
}

/// The cap on caller connections open at once (GW-23, `limits.max_connections`).
pub(crate) struct ConnectionCap {
    permits: Arc<tokio::sync::Semaphore>,
    cap: usize,
    /// When the cap was last logged (seconds since the Unix epoch), so that it is logged at most every 10 s.
    logged: std::sync::atomic::AtomicU64,
}

impl ConnectionCap {
    pub(crate) fn new(cap: usize) -> Self {
        ConnectionCap {
            permits: Arc::new(tokio::sync::Semaphore::new(cap)),
            cap,
            logged: std::sync::atomic::AtomicU64::new(0),
        }
    }

    /// A permit for one connection; waits (and logs, at most every 10 s) at the cap.
    async fn acquire(&self) -> tokio::sync::OwnedSemaphorePermit {
        if let Ok(p) = self.permits.clone().try_acquire_owned() {
            return p;
        }
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
        let last = self.logged.load(std::sync::atomic::Ordering::Relaxed);
        if now >= last + 10
            && self
                .logged
                .compare_exchange(last, now, std::sync::atomic::Ordering::Relaxed, std::sync::atomic::Ordering::Relaxed)
                .is_ok()
        {
            tracing::warn!(
                max_connections = self.cap,
                "connection limit reached (limits.max_connections): new connections wait in the listen backlog \
                 until one closes"
            );
        }
        match self.permits.clone().acquire_owned().await {
            Ok(p) => p,
            // The semaphore is never closed.
            Err(_) => std::future::pending().await,
        }
    }
}

/// The most room made in a body's buffer before one read (GW-23).
const BODY_READ_STEP: usize = 64 * 1024;

/// How much room to make in a body's buffer before a read, holding `held` bytes with `left` still to come (GW-23: a
/// buffer grows with the bytes received, never to a declared length at once): as much as it holds (so it at most
/// doubles), at least 4 KiB, at most [`BODY_READ_STEP`] and never more than is to come.
fn read_step(held: usize, left: usize) -> usize {
    held.clamp(4 * 1024, BODY_READ_STEP).min(left)
}

/// Why reading a body stopped early.
enum Stop {
    Body(BodyError),
    /// The body would take the process past its budget (GW-23).
    Budget,
}

impl From<BodyError> for Stop {
    fn from(e: BodyError) -> Self {
        Stop::Body(e)
    }
}

/// Reads a body delimited by `framing`, within the limits; a body over the limit is read out (bounded) and dropped.
/// `false` in the second place when the connection cannot be used for another request after it. The bytes held are
/// counted in the process's budget (GW-23) as they arrive and until the returned charge is dropped; `Err` when the
/// body would take the process past the budget (answer `503 overloaded` and close).
async fn read_body<'b>(
    stream: &mut TcpStream,
    buf: &mut BytesMut,
    framing: Framing,
    limits: ConnLimits,
    budget: &'b BodyBudget,
) -> Result<(Result<Bytes, BodyError>, bool, BodyCharge<'b>), ()> {
    let mut charge = budget.charge();
    let (body, ok) = match framing {
        Framing::Empty | Framing::Close => (Ok(Bytes::new()), true),
        Framing::Length(n) if buf.len() as u64 >= n => (Ok(buf.split_to(n as usize).freeze()), true),
        Framing::Length(n) if n > limits.max_body as u64 => {
            if n <= limits.max_body as u64 + DRAIN_MAX_BYTES {
                let more = n.saturating_sub(buf.len() as u64);
                drain(stream, buf, more).await;
            }
            (Err(BodyError::TooLarge { limit: limits.max_body }), false)
        }
        Framing::Length(n) => {
            let read = async {
                while (buf.len() as u64) < n {
                    if !charge.hold(buf.len()) {
                        return Err(Stop::Budget);
                    }
                    if buf.capacity() == buf.len() {
                        buf.reserve(read_step(buf.len(), n as usize - buf.len()));
                    }
                    match stream.read_buf(buf).await {
                        Ok(0) => return Err(BodyError::Unreadable("the connection ended in the body".into()).into()),
                        Ok(_) => {}
                        Err(e) => return Err(BodyError::Unreadable(e.to_string()).into()),
                    }
                }
                if !charge.hold(n as usize) {
                    return Err(Stop::Budget);
                }
                Ok(buf.split_to(n as usize).freeze())
            };
            match tokio::time::timeout(limits.body_timeout, read).await {
                Ok(Ok(b)) => (Ok(b), true),
                Ok(Err(Stop::Budget)) => return Err(()),
                Ok(Err(Stop::Body(e))) => (Err(e), false),
                Err(_) => (Err(BodyError::Timeout { after: limits.body_timeout }), false),
            }
        }
        Framing::Chunked => {
            let mut dec = Chunked::default();
            let mut out = BytesMut::new();
            let read = async {
                loop {
                    match dec.decode(buf) {
                        Ok(Decoded::Data(d)) => {
                            if out.len() + d.len() > limits.max_body {
                                return Err(BodyError::TooLarge { limit: limits.max_body }.into());
                            }
                            if !charge.hold(out.len() + d.len() + buf.len()) {
                                return Err(Stop::Budget);
                            }
                            out.extend_from_slice(&d);
                        }
                        Ok(Decoded::End) => return Ok(()),
                        Ok(Decoded::NeedMore) => {
                            if !charge.hold(out.len() + buf.len()) {
                                return Err(Stop::Budget);
                            }
                            if buf.capacity() == buf.len() {
                                buf.reserve(read_step(out.len() + buf.len(), limits.max_body + 1024));
                            }
                            match stream.read_buf(buf).await {
                                Ok(0) => {
                                    return Err(BodyError::Unreadable("the connection ended in the body".into()).into());
                                }
                                Ok(_) => {}
                                Err(e) => return Err(BodyError::Unreadable(e.to_string()).into()),
                            }
                        }
                        Err(e) => return Err(BodyError::Unreadable(e.0.to_owned()).into()),
                    }
                }
            };
            match tokio::time::timeout(limits.body_timeout, read).await {
                Ok(Ok(())) => (Ok(out.freeze()), true),
                Ok(Err(Stop::Budget)) => return Err(()),
                Ok(Err(Stop::Body(e @ BodyError::TooLarge { .. }))) => {
                    drain(stream, buf, DRAIN_MAX_BYTES).await;
                    (Err(e), false)
                }
                Ok(Err(Stop::Body(e))) => (Err(e), false),
                Err(_) => (Err(BodyError::Timeout { after: limits.body_timeout }), false),
            }
        }
    };
    Ok((body, ok, charge))
}

/// Drops what `buf` holds and reads and drops up to `more` bytes the client still sends, for at most
/// [`DRAIN_MAX_TIME`] (the lingering read before a `413`, LIM-3).
async fn drain(stream: &mut TcpStream, buf: &mut BytesMut, more: u64) {
    buf.clear();
    let run = async {
        let mut seen = 0u64;
        while seen < more {
            buf.reserve(16 * 1024);
            match stream.read_buf(buf).await {
                Ok(0) | Err(_) => return,
                Ok(k) => seen += k as u64,
            }
            buf.clear();
        }
    };
    let _ = tokio::time::timeout(DRAIN_MAX_TIME, run).await;
}

/// Whether the caller wants the connection kept after this request (RFC 9112 §9.3).
fn keep_alive(head: &RequestHead) -> bool {
    let mut close = false;
    let mut keep = false;
    for v in head.headers.get_all("connection") {
        for t in v.split(|&b| b == b',') {
            let t = t.trim_ascii();
            close |= t.eq_ignore_ascii_case(b"close");
            keep |= t.eq_ignore_ascii_case(b"keep-alive");
        }
    }
    if head.version == 0 { keep && !close } else { !close }
}

/// Whether the proxy serves `path` natively (the protocol's endpoints); everything else goes to the HTTP service.
fn native(path: &str) -> bool {
    path == "/a2a" || path.starts_with("/a2a/")
}

async fn connection(mut stream: TcpStream, peer: SocketAddr, served: Served, stop: CancellationToken) {
    let limits = ConnLimits::of(&served.current.load());
    let mut buf = BytesMut::with_capacity(8 * 1024);
    // Made on the first answer: a connection that never gets one (a stalled caller) costs nothing here (GW-23).
    let mut out: Vec<u8> = Vec::new();
    let mut first = true;
    let mut deadline = super::Deadline::new();
    let mut write_deadline = super::Deadline::new();
    // One wait for the shutdown for the connection's life (registered once, not once per request).
    let stopped = stop.cancelled();
    tokio::pin!(stopped);
    loop {
        let head = match read_head(&mut stream, &mut buf, limits, stopped.as_mut(), first, &mut deadline).await {
            HeadRead::Head(h) => h,
            HeadRead::Closed => return,
            HeadRead::H2 => {
                let prefix = buf.split().freeze();
                serve_h2(stream, prefix, peer, served, stop.clone()).await;
                return;
            }
            HeadRead::Refused(e) => {
                let mut w = Writer {
                    stream: &mut stream,
                    buf: &mut out,
                    deadline: &mut write_deadline,
                    timeout: limits.write_timeout,
                };
                let _ = write_reply(&mut w, Reply::error(&e), 1, false, false).await;
                return;
            }
        };
        first = false;
        // The configuration in force for this request (OPS-4).
        let gw = served.current.load_full();
        let framing = match request_framing(&head.headers, head.version) {
            Ok(f) => f,
            Err(e) => {
                let err = match e {
                    FramingError::UnsupportedCoding(c) => A2aError::with_message(
                        ErrorCode::NOT_IMPLEMENTED,
                        format!(
                            "the transfer coding {c:?} is not supported; send the body with Content-Length or chunked"
                        ),
                    ),
                    FramingError::Invalid(m) => A2aError::with_message(
                        ErrorCode::INVALID_REQUEST,
                        format!("the request's framing is invalid: {m}"),
                    ),
                };
                let mut w = Writer {
                    stream: &mut stream,
                    buf: &mut out,
                    deadline: &mut write_deadline,
                    timeout: limits.write_timeout,
                };
                let _ = write_reply(&mut w, Reply::error(&err), head.version, false, false).await;
                return;
            }
        };
        // `Expect: 100-continue`: the client waits for a go-ahead before its body (or for the refusal of a body
        // declared over the limit, which is then not read).
        let expects = head.version == 1
            && head.headers.get("expect").is_some_and(|v| v.trim_ascii().eq_ignore_ascii_case(b"100-continue"));
        let mut keep = keep_alive(&head) && !limits.keepalive.is_zero();
        // The body's share of the budget (GW-23), held until the answer is written.
        let mut held = None;
        let body = if expects && matches!(framing, Framing::Length(n) if n > limits.max_body as u64) {
            keep = false;
            Err(BodyError::TooLarge { limit: limits.max_body })
        } else {
            let waiting = expects
                && match framing {
                    Framing::Length(n) => (buf.len() as u64) < n,
                    Framing::Chunked => buf.is_empty(),
                    Framing::Empty | Framing::Close => false,
                };
            if waiting && stream.write_all(b"HTTP/1.1 100 Continue\r\n\r\n").await.is_err() {
                return;
            }
            match read_body(&mut stream, &mut buf, framing, limits, &gw.body_budget).await {
                Ok((b, ok, charge)) => {
                    keep &= ok;
                    held = Some(charge);
                    b
                }
                Err(()) => {
                    // GW-23: past the process's budget: refused, not buffered; the rest of the body is not read.
                    let err = A2aError::with_message(
                        ErrorCode::OVERLOADED,
                        format!(
                            "the gateway holds its limit of request bodies ({} bytes, \
                             limits.max_buffered_body_bytes); retry after the Retry-After delay",
                            gw.limits.max_buffered_body_bytes
                        ),
                    );
                    let mut reply = Reply::error(&err);
                    reply.headers.append("retry-after", Bytes::from_static(b"1"));
                    let mut w = Writer {
                        stream: &mut stream,
                        buf: &mut out,
                        deadline: &mut write_deadline,
                        timeout: limits.write_timeout,
                    };
                    let _ = write_reply(&mut w, reply, head.version, false, false).await;
                    return;
                }
            }
        };
        let version = head.version;
        let head_req = head.method == http::Method::HEAD;
        let reply = if native(head.path()) {
            crate::proxy::handle(gw.clone(), Incoming { head, body }).await
        } else {
            // Boxed: the rarer path, whose state would otherwise weigh on every request's future.
            Box::pin(via_http(&served, head, body, peer)).await
        };
        keep &= !stop.is_cancelled();
        let mut w =
            Writer { stream: &mut stream, buf: &mut out, deadline: &mut write_deadline, timeout: limits.write_timeout };
        let written = write_reply(&mut w, reply, version, head_req, keep).await;
        drop(held);
        if !written || !keep {
            return;
        }
        // A large body's buffer is not kept for the connection's idle time (GW-23): a fresh small one instead.
        if buf.is_empty() && buf.capacity() > BODY_READ_STEP {
            buf = BytesMut::with_capacity(8 * 1024);
        }
    }
}

/// Serves a request through the gateway's HTTP service (the bridge, admin paths, unknown paths).
async fn via_http(served: &Served, head: RequestHead, body: Result<Bytes, BodyError>, peer: SocketAddr) -> Reply {
    // The service reads the body itself and answers a body it cannot read in its own way (the bridge in JSON-RPC):
    // it is handed what it would have seen. A body over the limit arrives as a declared length over the limit
    // (read out already); a body that failed as a body whose reading fails.
    let mut headers = head.headers.to_header_map();
    let body = match body {
        Ok(b) => Body::from(b),
        Err(BodyError::TooLarge { limit }) => {
            headers.insert(http::header::CONTENT_LENGTH, http::HeaderValue::from(limit as u64 + 1));
            headers.remove(http::header::TRANSFER_ENCODING);
            Body::empty()
        }
        Err(e) => {
            let failed =
                futures_util::stream::once(async move { Err::<Bytes, _>(std::io::Error::other(e.to_string())) });
            Body::from_stream(failed)
        }
    };
    let mut req = Request::new(body);
    *req.method_mut() = head.method.clone();
    *req.uri_mut() = http::Uri::from(head.path_and_query().clone());
    *req.version_mut() = if head.version == 0 { http::Version::HTTP_10 } else { http::Version::HTTP_11 };
    *req.headers_mut() = headers;
    req.extensions_mut().insert(axum::extract::ConnectInfo(peer));
    // GW-23: the body was read here and stays counted in the budget until the answer is written: not counted again.
    req.extensions_mut().insert(a2a_runtime::body::Counted);
    let resp = match served.http.clone().oneshot(req).await {
        Ok(r) => r,
        Err(never) => match never {},
    };
    Reply::from_response(resp)
}

/// Serves an HTTP/2 connection (its preface already read) with hyper and the gateway's HTTP service.
async fn serve_h2(stream: TcpStream, prefix: Bytes, peer: SocketAddr, served: Served, stop: CancellationToken) {
    let limits = ConnLimits::of(&served.current.load());
    let io = hyper_util::rt::TokioIo::new(a2a_runtime::serve::Prefixed::new(prefix.to_vec(), stream));
    let svc = served.http.clone();
    let service = hyper::service::service_fn(move |mut req: hyper::Request<hyper::body::Incoming>| {
        req.extensions_mut().insert(axum::extract::ConnectInfo(peer));
        svc.clone().oneshot(req.map(Body::new))
    });
    let mut builder = hyper::server::conn::http2::Builder::new(hyper_util::rt::TokioExecutor::new());
    builder.timer(hyper_util::rt::TokioTimer::new()).max_header_list_size(limits.max_head_bytes as u32);
    let conn = builder.serve_connection(io, service);
    tokio::pin!(conn);
    tokio::select! {
        r = conn.as_mut() => {
            if let Err(e) = r {
                tracing::debug!(error = %e, %peer, "HTTP/2 connection ended with an error");
            }
            return;
        }
        () = stop.cancelled() => {}
    }
    conn.as_mut().graceful_shutdown();
    let _ = conn.await;
}

/// The writing side of a connection: its stream, a buffer, and the time each write may take.
struct Writer<'a> {
    stream: &'a mut TcpStream,
    buf: &'a mut Vec<u8>,
    /// Armed only when a write has to wait (a write the socket takes at once never polls it).
    deadline: &'a mut super::Deadline,
    timeout: Duration,
}

impl Writer<'_> {
    /// Writes the buffer within the write timeout; `false` when the caller did not take it (or the write failed).
    async fn flush(&mut self) -> bool {
        self.deadline.set(tokio::time::Instant::now() + self.timeout);
        let Writer { stream, buf, deadline, .. } = self;
        tokio::select! {
            biased;
            r = stream.write_all(buf) => r.is_ok(),
            () = deadline.passed() => false,
        }
    }
}

/// A body written as it comes.
enum Source {
    Upstream(UpstreamBody),
    Stream(Body),
}

impl Source {
    fn length(&self) -> Option<u64> {
        match self {
            Source::Upstream(u) => u.length(),
            Source::Stream(b) => http_body::Body::size_hint(b).exact(),
        }
    }

    /// The next piece; `Err` when the body failed.
    async fn next(&mut self) -> Option<Result<Bytes, ()>> {
        loop {
            let d = match self {
                Source::Upstream(u) => u.data().await?.map_err(|_| ()),
                Source::Stream(b) => match b.frame().await? {
                    Ok(f) => match f.into_data() {
                        Ok(d) => Ok(d),
                        Err(_) => continue,
                    },
                    Err(_) => Err(()),
                },
            };
            if d.as_ref().is_ok_and(Bytes::is_empty) {
                continue;
            }
            return Some(d);
        }
    }
}

/// Writes `reply` to a request of HTTP/1.`version` (`head_req`: a `HEAD` request, answered without a body); `false`
/// when the connection cannot be used again (an error, a caller that did not take the answer in time, or a body
/// delimited by the close).
async fn write_reply(w: &mut Writer<'_>, reply: Reply, version: u8, head_req: bool, keep: bool) -> bool {
    let out = &mut *w.buf;
    out.clear();
    let status = reply.status;
    out.extend_from_slice(b"HTTP/1.1 ");
    write_decimal(out, u64::from(status));
    out.push(b' ');
    out.extend_from_slice(
        http::StatusCode::from_u16(status).ok().and_then(|s| s.canonical_reason()).unwrap_or("Unknown").as_bytes(),
    );
    out.extend_from_slice(b"\r\n");
    reply.headers.write_except(out, &[]);
    if !reply.headers.contains("date") {
        out.extend_from_slice(b"date: ");
        date::write(out);
        out.extend_from_slice(b"\r\n");
    }
    let bodiless = (100..200).contains(&status) || status == 204 || status == 304;
    let mut body = reply.body;
    if bodiless {
        body = ReplyBody::Empty;
    }
    // A body in hand goes out with the head in one write.
    if let ReplyBody::Upstream(u) = &mut body
        && let Some(b) = u.take_whole()
    {
        body = if b.is_empty() { ReplyBody::Empty } else { ReplyBody::Full(b) };
    }
    let mut source = match body {
        ReplyBody::Empty | ReplyBody::Full(_) => {
            let data = match body {
                ReplyBody::Full(b) => b,
                _ => Bytes::new(),
            };
            if !bodiless {
                super::write_content_length(out, data.len(), false);
            }
            if !keep {
                out.extend_from_slice(b"connection: close\r\n");
            }
            out.extend_from_slice(b"\r\n");
            if !head_req {
                out.extend_from_slice(&data);
            }
            return w.flush().await && keep;
        }
        ReplyBody::Upstream(u) => Source::Upstream(u),
        ReplyBody::Stream(b) => Source::Stream(b),
    };
    let length = source.length();
    let chunked = length.is_none() && version == 1 && !head_req;
    let keep = keep && (length.is_some() || chunked || head_req);
    match length {
        Some(n) => {
            out.extend_from_slice(b"content-length: ");
            write_decimal(out, n);
            out.extend_from_slice(b"\r\n");
        }
        None if chunked => out.extend_from_slice(b"transfer-encoding: chunked\r\n"),
        None => {}
    }
    if !keep {
        out.extend_from_slice(b"connection: close\r\n");
    }
    out.extend_from_slice(b"\r\n");
    if !w.flush().await {
        return false;
    }
    if head_req {
        return keep;
    }
    let mut sent = 0u64;
    while let Some(d) = source.next().await {
        let Ok(d) = d else { return false };
        sent += d.len() as u64;
        w.buf.clear();
        if chunked {
            encode_chunk(w.buf, &d);
        } else {
            w.buf.extend_from_slice(&d);
        }
        if !w.flush().await {
            return false;
        }
    }
    if chunked {
        w.buf.clear();
        w.buf.extend_from_slice(LAST_CHUNK);
        return w.flush().await && keep;
    }
    length.is_none_or(|n| n == sent) && keep
}

/// Writes `n` in decimal.
pub(crate) fn write_decimal(out: &mut Vec<u8>, n: u64) {
    out.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
}

/// The `Date` of answers, formatted once a second per thread.
mod date {
    use std::cell::RefCell;
    use std::time::{SystemTime, UNIX_EPOCH};

    thread_local! {
        static CACHED: RefCell<(u64, Vec<u8>)> = const { RefCell::new((0, Vec::new())) };
    }

    /// Appends the current time as an HTTP date.
    pub(super) fn write(out: &mut Vec<u8>) {
        let now = SystemTime::now();
        let secs = now.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
        CACHED.with(|c| {
            let mut c = c.borrow_mut();
            if c.0 != secs || c.1.is_empty() {
                c.1 = httpdate::fmt_http_date(now).into_bytes();
                c.0 = secs;
            }
            out.extend_from_slice(&c.1);
        });
    }
}

/// A service for [`Served::http`]: the gateway's HTTP service made into a cloneable boxed one.
pub(crate) fn boxed<S>(s: S) -> crate::HttpService
where
    S: Service<Request<Body>, Response = http::Response<Body>, Error = Infallible> + Clone + Send + Sync + 'static,
    S::Future: Send + 'static,
{
    tower::util::BoxCloneSyncService::new(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_caller_that_stops_reading_is_given_up_after_the_write_timeout() {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        // The caller connects and never reads.
        let _caller = TcpStream::connect(addr).await.expect("connect");
        let (mut stream, _) = listener.accept().await.expect("accept");
        let mut buf = vec![b'x'; 64 * 1024 * 1024];
        let mut deadline = super::super::Deadline::new();
        let mut w =
            Writer { stream: &mut stream, buf: &mut buf, deadline: &mut deadline, timeout: Duration::from_millis(200) };
        let t = tokio::time::Instant::now();
        let written = tokio::time::timeout(Duration::from_secs(20), w.flush()).await.expect("bounded");
        assert!(!written, "64 MiB cannot fit in the socket buffers of a caller that does not read");
        assert!(t.elapsed() >= Duration::from_millis(200));
    }

    #[tokio::test]
    async fn a_write_the_socket_takes_at_once_arms_no_timer() {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let _caller = TcpStream::connect(addr).await.expect("connect");
        let (mut stream, _) = listener.accept().await.expect("accept");
        let mut buf = b"HTTP/1.1 204 No Content\r\n\r\n".to_vec();
        let mut deadline = super::super::Deadline::new();
        let mut w =
            Writer { stream: &mut stream, buf: &mut buf, deadline: &mut deadline, timeout: Duration::from_secs(1) };
        assert!(w.flush().await);
        assert!(deadline.is_unarmed(), "the deadline's timer is made only when a write waits");
    }
}
