//! The connections to agents: HTTP/1.1 over a keep-alive pool of TCP connections per agent, written and read by the
//! gateway itself (httparse for the answer's head, [`crate::h1::body`] for its framing), with bounded connect and
//! answer times and errors that say whether the request reached the agent at all (so that NEGOTIATE can be retried
//! elsewhere).
//!
//! A request goes out as one write of its head and body; the answer's head is parsed in the connection's buffer. An
//! answer whose body is already in that buffer (the usual small JSON answer) is complete at once and its connection
//! goes straight back to the pool; a longer or streamed one is read as it is polled ([`UpstreamBody`]), and its
//! connection goes back after the last byte (a body dropped before its end closes the connection instead).
//!
//! An idle connection is not read while it waits in the pool. One the agent closed meanwhile is found when it is
//! taken out (readable with nothing to read: it ended) and dropped; a request that a reused connection could not
//! write is written once more on a new connection, which is safe since nothing reached the agent. At most
//! `max_idle` connections wait per agent (per worker thread, [`set_pool_partition`]), each at most `idle_timeout`
//! ([`PoolLimits`]: best below the agents' own idle timeout). A request on a pooled connection that the agent closed
//! as it arrived is sent again on a new one when it is safe to repeat ([`Upstream::send_raw`]).

use std::collections::{HashMap, VecDeque};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use http::{Request, Response};
use http_body_util::{BodyExt, Full};
use hyper::body::{Body, Frame, SizeHint};
use prometheus_client::metrics::counter::Counter;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

use crate::h1::body::{Chunked, Decoded, Framing, response_framing};
use crate::h1::head::{ResponseHead, parse_response};

/// How many connections wait unused in the pool, and for how long.
#[derive(Debug, Clone, Copy)]
pub struct PoolLimits {
    /// Idle connections kept per agent and pool partition ([`set_pool_partition`]); 0 keeps none.
    pub max_idle: usize,
    /// Longest a connection waits unused; 0 keeps none.
    pub idle_timeout: Duration,
}

/// The default of `limits.pool_idle_timeout_ms`: below the idle timeouts of a2a-server (10 s), Node.js and uvicorn (5 s).
pub const DEFAULT_POOL_IDLE_TIMEOUT: Duration = Duration::from_secs(4);

impl PoolLimits {
    /// `max_idle` connections, each for [`DEFAULT_POOL_IDLE_TIMEOUT`] at most.
    pub fn with_max_idle(max_idle: usize) -> PoolLimits {
        PoolLimits { max_idle, idle_timeout: DEFAULT_POOL_IDLE_TIMEOUT }
    }
}

/// TCP keep-alive probes on agent connections.
const TCP_KEEPALIVE: Duration = Duration::from_secs(60);
/// Largest answer head read from an agent.
const MAX_ANSWER_HEAD: usize = 64 * 1024;

/// Why an agent could not be reached.
#[derive(Debug, thiserror::Error)]
pub enum UpstreamError {
    /// No connection could be made: the request was not sent (safe to try another agent).
    #[error("cannot connect to the agent: {0}")]
    Connect(String),
    /// The agent did not start answering in time.
    #[error("the agent did not answer within {0} ms")]
    Timeout(u64),
    /// The connection failed after the request was sent, or the answer was not HTTP.
    #[error("the exchange with the agent failed: {0}")]
    Protocol(String),
}

impl UpstreamError {
    /// The metric label.
    pub fn reason(&self) -> &'static str {
        match self {
            UpstreamError::Connect(_) => "connect",
            UpstreamError::Timeout(_) => "timeout",
            UpstreamError::Protocol(_) => "protocol",
        }
    }
}

/// One connection to an agent, the bytes read from it and not used yet, and the deadline of its exchange.
struct Conn {
    stream: TcpStream,
    buf: BytesMut,
    deadline: crate::h1::Deadline,
}

impl Conn {
    /// Whether the connection can take a request: the agent has not closed it and sent nothing unasked.
    fn usable(&mut self) -> bool {
        if !self.buf.is_empty() {
            return false;
        }
        let mut cx = Context::from_waker(std::task::Waker::noop());
        match self.stream.poll_read_ready(&mut cx) {
            // Nothing arrived since the last answer: open.
            Poll::Pending => true,
            // Readable: either stale readiness (nothing to read, open) or the agent's close (or stray bytes).
            Poll::Ready(Ok(())) => {
                let mut probe = [0u8; 1];
                matches!(self.stream.try_read(&mut probe), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock)
            }
            Poll::Ready(Err(_)) => false,
        }
    }

    /// Reads more bytes into the buffer: `Ok(0)` when the agent closed the connection.
    fn poll_fill(&mut self, cx: &mut Context<'_>) -> Poll<std::io::Result<usize>> {
        poll_fill(&mut self.stream, &mut self.buf, cx)
    }
}

/// Reads more bytes from `stream` into `buf`: `Ok(0)` when the peer closed the connection.
///
/// Through `AsyncRead`, whose short read clears the socket's read readiness: a connection whose answer was read whole
/// then goes back to the pool known to be drained, and [`Conn::usable`] takes it without a probing `recv`.
fn poll_fill(stream: &mut TcpStream, buf: &mut BytesMut, cx: &mut Context<'_>) -> Poll<std::io::Result<usize>> {
    if buf.capacity() - buf.len() < 4096 {
        buf.reserve(16 * 1024);
    }
    tokio_util::io::poll_read_buf(Pin::new(stream), cx, buf)
}

/// A connection waiting in the pool.
struct Idle {
    conn: Conn,
    since: Instant,
}

thread_local! {
    /// The pool partition of this thread's connections ([`set_pool_partition`]).
    static PARTITION: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// Keeps the agent connections this thread opens in partition `index` of every pool, apart from other threads'.
///
/// A connection belongs to the event loop it was opened on: used from another thread, each of its reads and writes
/// would be woken through that loop. A thread that runs its own event loop (a gateway worker, `gateway.workers`) sets
/// its own index once at its start; all other threads share partition 0, which suits a multi-threaded runtime, whose
/// threads share one event loop.
pub fn set_pool_partition(index: usize) {
    PARTITION.with(|p| p.set(index));
}

fn partition() -> usize {
    PARTITION.with(std::cell::Cell::get)
}

/// The idle connections, by agent (`host:port`) and partition ([`set_pool_partition`]).
struct Pool {
    /// Per agent and partition, oldest first.
    idle: Mutex<HashMap<Arc<str>, Vec<VecDeque<Idle>>, foldhash::fast::RandomState>>,
    max_idle: usize,
    idle_timeout: Duration,
    connect_timeout: Duration,
    /// Connections opened so far.
    opened: AtomicU64,
    /// Requests sent again after their pooled connection ended unanswered ([`Upstream::send_raw`]).
    replayed: Counter,
}

impl Pool {
    /// A usable idle connection to `authority` (the most recently used first), dropping those that ended or expired.
    fn checkout(&self, authority: &str) -> Option<Conn> {
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        let list = idle.get_mut(authority)?.get_mut(partition())?;
        let now = Instant::now();
        while let Some(mut i) = list.pop_back() {
            if now.duration_since(i.since) >= self.idle_timeout {
                // The newest has waited too long: so have all the others.
                list.clear();
                return None;
            }
            if i.conn.usable() {
                return Some(i.conn);
            }
        }
        None
    }

    /// Puts a connection whose last answer was read whole back.
    fn checkin(&self, authority: &Arc<str>, conn: Conn) {
        if self.max_idle == 0 || self.idle_timeout.is_zero() || !conn.buf.is_empty() {
            return;
        }
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        let lists = match idle.get_mut(&**authority) {
            Some(l) => l,
            None => idle.entry(authority.clone()).or_default(),
        };
        let p = partition();
        if lists.len() <= p {
            lists.resize_with(p + 1, VecDeque::new);
        }
        let list = &mut lists[p];
        let now = Instant::now();
        while list.len() >= self.max_idle
            || list.front().is_some_and(|i| now.duration_since(i.since) >= self.idle_timeout)
        {
            list.pop_front();
        }
        list.push_back(Idle { conn, since: now });
    }

    /// A new connection to `authority`, within the connect timeout.
    async fn connect(&self, authority: &str) -> Result<Conn, UpstreamError> {
        let stream = tokio::time::timeout(self.connect_timeout, TcpStream::connect(host_port(authority)?))
            .await
            .map_err(|_| {
                UpstreamError::Connect(format!(
                    "no connection to {authority} within {} ms",
                    self.connect_timeout.as_millis()
                ))
            })?
            .map_err(|e| UpstreamError::Connect(format!("{authority}: {}", a2a_core::error::with_causes(&e))))?;
        let _ = stream.set_nodelay(true);
        let _ =
            socket2::SockRef::from(&stream).set_tcp_keepalive(&socket2::TcpKeepalive::new().with_time(TCP_KEEPALIVE));
        self.opened.fetch_add(1, Ordering::Relaxed);
        Ok(Conn { stream, buf: BytesMut::with_capacity(16 * 1024), deadline: crate::h1::Deadline::new() })
    }
}

/// `host:port` (or `[v6]:port`) as `TcpStream::connect` takes it.
fn host_port(authority: &str) -> Result<(&str, u16), UpstreamError> {
    let (host, port) = match authority.rsplit_once(':') {
        Some((h, p)) if !p.contains(']') => {
            (h, p.parse::<u16>().map_err(|_| UpstreamError::Connect(format!("{authority}: invalid port")))?)
        }
        _ => (authority, 80),
    };
    Ok((host.trim_start_matches('[').trim_end_matches(']'), port))
}

/// An agent's answer: its head as received and its body.
pub struct Answer {
    /// Status and fields.
    pub head: ResponseHead,
    /// The body.
    pub body: UpstreamBody,
}

/// A pooled HTTP/1.1 client to the agents.
#[derive(Clone)]
pub struct Upstream {
    pool: Arc<Pool>,
    timeout: Duration,
}

impl Upstream {
    /// A client whose connections are kept alive (`pool_max_idle` per agent and pool partition, for the default
    /// idle time of [`PoolLimits::with_max_idle`]) and made within `connect_timeout`.
    pub fn new(connect_timeout: Duration, timeout: Duration, pool_max_idle: usize) -> Self {
        Upstream::counted(connect_timeout, timeout, PoolLimits::with_max_idle(pool_max_idle), Counter::default())
    }

    /// [`Upstream::new`] with the pool's limits, counting the requests it sends again ([`Upstream::send_raw`]) in
    /// `replays` (the gateway's `upstream_replays` metric).
    pub fn counted(connect_timeout: Duration, timeout: Duration, pool: PoolLimits, replays: Counter) -> Self {
        let pool = Pool {
            idle: Mutex::new(HashMap::with_hasher(foldhash::fast::RandomState::default())),
            max_idle: pool.max_idle,
            idle_timeout: pool.idle_timeout,
            connect_timeout,
            opened: AtomicU64::new(0),
            replayed: replays,
        };
        Upstream { pool: Arc::new(pool), timeout }
    }

    /// Connections to agents opened so far (a measure of how well the pool keeps them).
    pub fn connections_opened(&self) -> u64 {
        self.pool.opened.load(Ordering::Relaxed)
    }

    /// The time an agent has to start answering.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Sends `message` (a whole HTTP/1.1 request: head with `Host` and framing, then body) to `authority`
    /// (`host:port`) and reads the answer's head within `limit`; the body then streams.
    ///
    /// A pooled connection may be closed by the agent (its idle timeout) while the request is on its way: it then
    /// ends, or is reset, before any byte of an answer. When `repeatable` (the request is safe to send twice: the
    /// caller knows its semantics), such a request is sent again, once, on a new connection; otherwise that is a
    /// [`UpstreamError::Protocol`], as any connection that ends before its answer.
    pub async fn send_raw(
        &self,
        authority: &Arc<str>,
        message: &[u8],
        limit: Duration,
        repeatable: bool,
    ) -> Result<Answer, UpstreamError> {
        let at = tokio::time::Instant::now() + limit;
        let timeout = || UpstreamError::Timeout(limit.as_millis() as u64);
        // A pooled connection first; one that could not even take the request, or (`repeatable`) that ended before
        // any answer, is replaced by a new one, once.
        let mut fresh = false;
        loop {
            let pooled = if fresh { None } else { self.pool.checkout(authority) };
            let reused = pooled.is_some();
            let mut conn = match pooled {
                Some(c) => c,
                // Boxed: a new connection is rare, and its state would otherwise be part of every request's future.
                None => match tokio::time::timeout_at(at, Box::pin(self.pool.connect(authority))).await {
                    Ok(c) => c?,
                    Err(_) => return Err(timeout()),
                },
            };
            // The connection's own timer, armed once per connection and moved: no timer per request.
            conn.deadline.set(at);
            let Conn { stream, deadline, .. } = &mut conn;
            let written = tokio::select! {
                biased;
                w = stream.write_all(message) => w,
                () = deadline.passed() => return Err(timeout()),
            };
            if let Err(e) = written {
                if reused {
                    fresh = true;
                    continue;
                }
                return Err(UpstreamError::Protocol(format!("writing the request: {e}")));
            }
            return match read_answer(conn, self.pool.clone(), authority, limit).await {
                Err(Unanswered::Nothing(_)) if reused && repeatable => {
                    self.pool.replayed.inc();
                    fresh = true;
                    continue;
                }
                Err(Unanswered::Nothing(e) | Unanswered::Failed(e)) => Err(e),
                Ok(answer) => Ok(answer),
            };
        }
    }

    /// Requests sent again on a new connection because the pooled one they were sent on ended before answering.
    pub fn requests_replayed(&self) -> u64 {
        self.pool.replayed.get()
    }

    /// Sends a request (its URI absolute: `http://host:port/path`); the answer's head within the time limit (the body
    /// then streams).
    pub async fn send(&self, req: Request<Full<Bytes>>) -> Result<Response<UpstreamBody>, UpstreamError> {
        self.send_within(req, self.timeout).await
    }

    /// Sends a request with its own time limit.
    pub async fn send_within(
        &self,
        req: Request<Full<Bytes>>,
        limit: Duration,
    ) -> Result<Response<UpstreamBody>, UpstreamError> {
        let repeatable = matches!(*req.method(), http::Method::GET | http::Method::HEAD | http::Method::OPTIONS);
        let (authority, message) = serialize(req).await?;
        let answer = self.send_raw(&authority, &message, limit, repeatable).await?;
        let mut resp = Response::new(answer.body);
        *resp.status_mut() = http::StatusCode::from_u16(answer.head.status)
            .map_err(|_| UpstreamError::Protocol(format!("status {} is not HTTP", answer.head.status)))?;
        *resp.headers_mut() = answer.head.headers.to_header_map();
        Ok(resp)
    }

    /// Sends a request and reads the whole answer (at most `max` bytes of body), for the gateway's own calls.
    pub async fn fetch(
        &self,
        req: Request<Full<Bytes>>,
        limit: Duration,
        max: usize,
    ) -> Result<(http::response::Parts, Bytes), UpstreamError> {
        let resp = self.send_within(req, limit).await?;
        let (parts, body) = resp.into_parts();
        let body = tokio::time::timeout(limit, http_body_util::Limited::new(body, max).collect())
            .await
            .map_err(|_| UpstreamError::Timeout(limit.as_millis() as u64))?
            .map_err(|e| UpstreamError::Protocol(e.to_string()))?
            .to_bytes();
        Ok((parts, body))
    }
}

/// Writes an `http::Request` with an absolute `http://` URI as an HTTP/1.1 message in origin form, with `Host`.
async fn serialize(req: Request<Full<Bytes>>) -> Result<(Arc<str>, Vec<u8>), UpstreamError> {
    let (parts, body) = req.into_parts();
    let uri = &parts.uri;
    if uri.scheme_str() != Some("http") {
        return Err(UpstreamError::Connect(format!("{uri}: agents are reached over http://")));
    }
    let authority = uri
        .authority()
        .map(|a| a.as_str().to_owned())
        .ok_or_else(|| UpstreamError::Connect(format!("{uri}: the URI names no host")))?;
    let target = uri.path_and_query().map_or("/", |p| p.as_str());
    let body = body.collect().await.map(|c| c.to_bytes()).unwrap_or_default();
    let mut out = Vec::with_capacity(256 + body.len());
    crate::h1::write_request_line(&mut out, parts.method.as_str(), target);
    out.extend_from_slice(b"host: ");
    out.extend_from_slice(authority.as_bytes());
    out.extend_from_slice(b"\r\n");
    for (n, v) in &parts.headers {
        if crate::h1::is_framing_or_hop(n.as_str().as_bytes()) {
            continue;
        }
        out.extend_from_slice(n.as_str().as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(v.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    crate::h1::write_content_length(&mut out, body.len(), parts.method == http::Method::GET);
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(&body);
    Ok((authority.into(), out))
}

/// Why an exchange gave no answer.
enum Unanswered {
    /// The connection ended, or was reset, before any byte of an answer.
    Nothing(UpstreamError),
    /// Any other failure.
    Failed(UpstreamError),
}

impl From<UpstreamError> for Unanswered {
    fn from(e: UpstreamError) -> Self {
        Unanswered::Failed(e)
    }
}

/// Reads the answer's head (skipping interim `1xx` answers) and sets up its body.
async fn read_answer(
    mut conn: Conn,
    pool: Arc<Pool>,
    authority: &Arc<str>,
    limit: Duration,
) -> Result<Answer, Unanswered> {
    // Whether any byte of an answer arrived (an interim `1xx` counts).
    let mut received = false;
    loop {
        let parsed = loop {
            if !conn.buf.is_empty() {
                match parse_response(&conn.buf) {
                    Ok(Some(p)) => break p,
                    Ok(None) => {}
                    Err(e) => return Err(UpstreamError::Protocol(format!("the answer is not HTTP/1.1: {e:?}")).into()),
                }
                if conn.buf.len() > MAX_ANSWER_HEAD {
                    return Err(UpstreamError::Protocol("the answer's head is over 64 KiB".into()).into());
                }
            }
            let filled = {
                let Conn { stream, buf, deadline } = &mut conn;
                let mut deadline = std::pin::pin!(deadline.passed());
                std::future::poll_fn(|cx| {
                    if let Poll::Ready(r) = poll_fill(stream, buf, cx) {
                        return Poll::Ready(Some(r));
                    }
                    deadline.as_mut().poll(cx).map(|()| None)
                })
                .await
            };
            let Some(filled) = filled else {
                return Err(UpstreamError::Timeout(limit.as_millis() as u64).into());
            };
            let unanswered = |e| if received { Unanswered::Failed(e) } else { Unanswered::Nothing(e) };
            match filled {
                Ok(0) => {
                    return Err(unanswered(UpstreamError::Protocol(
                        "the connection to the agent ended before its answer".to_owned(),
                    )));
                }
                Ok(_) => received = true,
                Err(e) => return Err(unanswered(UpstreamError::Protocol(format!("reading the answer: {e}")))),
            }
        };
        let len = parsed.len;
        let head = parsed.bind(conn.buf.split_to(len).freeze());
        let (status, version) = (head.status, head.version);
        if (100..200).contains(&status) && status != 101 {
            continue;
        }
        if status == 101 {
            return Err(UpstreamError::Protocol("the agent switched protocols".into()).into());
        }
        let framing = response_framing(status, &head.headers)
            .map_err(|e| UpstreamError::Protocol(format!("the answer's framing: {e:?}")))?;
        // A connection the agent says it will close, or an HTTP/1.0 one, is not reused.
        let keep = version == 1
            && !head
                .headers
                .get_all("connection")
                .any(|v| v.split(|&b| b == b',').any(|t| t.trim_ascii().eq_ignore_ascii_case(b"close")));
        let pool = keep.then(|| (pool, authority.clone()));
        let body = UpstreamBody::new(framing, conn, pool);
        return Ok(Answer { head, body });
    }
}

enum Kind {
    /// The whole body, in hand (taken by the first poll).
    Full(Option<Bytes>),
    /// Bytes of a `Content-Length` body left to read.
    Length(u64),
    Chunked(Chunked),
    /// Until the agent closes the connection.
    Close,
    Done,
}

/// An agent's answer body. Polling it reads the connection it arrives on; once it is read whole, the connection goes
/// back to the pool (a body dropped before its end closes the connection instead).
pub struct UpstreamBody {
    kind: Kind,
    conn: Option<Conn>,
    pool: Option<(Arc<Pool>, Arc<str>)>,
    /// The length announced by `Content-Length`, if any.
    length: Option<u64>,
}

impl UpstreamBody {
    fn new(framing: Framing, mut conn: Conn, pool: Option<(Arc<Pool>, Arc<str>)>) -> UpstreamBody {
        let mut body = UpstreamBody { kind: Kind::Done, conn: None, pool, length: None };
        match framing {
            Framing::Empty => {
                body.length = Some(0);
                body.conn = Some(conn);
                body.release();
            }
            Framing::Length(n) if conn.buf.len() as u64 >= n => {
                body.length = Some(n);
                body.kind = Kind::Full(Some(conn.buf.split_to(n as usize).freeze()));
                body.conn = Some(conn);
                body.release();
            }
            Framing::Length(n) => {
                body.length = Some(n);
                body.kind = Kind::Length(n);
                body.conn = Some(conn);
            }
            Framing::Chunked => {
                body.kind = Kind::Chunked(Chunked::default());
                body.conn = Some(conn);
            }
            Framing::Close => {
                body.pool = None;
                body.kind = Kind::Close;
                body.conn = Some(conn);
            }
        }
        body
    }

    /// A body that is already whole (an answer the gateway read and changed).
    pub fn full(bytes: Bytes) -> UpstreamBody {
        let length = Some(bytes.len() as u64);
        UpstreamBody { kind: Kind::Full(Some(bytes)), conn: None, pool: None, length }
    }

    /// The whole body, when it is already in hand and not taken yet (no read needed).
    pub fn whole(&self) -> Option<&Bytes> {
        match &self.kind {
            Kind::Full(Some(b)) => Some(b),
            _ => None,
        }
    }

    /// Takes the whole body when it is in hand.
    pub fn take_whole(&mut self) -> Option<Bytes> {
        match &mut self.kind {
            Kind::Full(b) => {
                let b = b.take();
                self.kind = Kind::Done;
                b
            }
            Kind::Done => Some(Bytes::new()),
            _ => None,
        }
    }

    /// The body's length when the agent announced it.
    pub fn length(&self) -> Option<u64> {
        self.length
    }

    /// Gives the connection back to the pool (the answer was read whole).
    fn release(&mut self) {
        if let (Some(conn), Some((pool, authority))) = (self.conn.take(), self.pool.take()) {
            pool.checkin(&authority, conn);
        }
    }

    /// The next piece of the body; `None` at its end.
    pub fn poll_data(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<Bytes, std::io::Error>>> {
        loop {
            let Some(conn) = self.conn.as_mut() else {
                return match &mut self.kind {
                    Kind::Full(b) => {
                        let b = b.take();
                        self.kind = Kind::Done;
                        Poll::Ready(b.filter(|b| !b.is_empty()).map(Ok))
                    }
                    _ => Poll::Ready(None),
                };
            };
            match &mut self.kind {
                Kind::Full(b) => {
                    let b = b.take();
                    self.kind = Kind::Done;
                    return Poll::Ready(b.filter(|b| !b.is_empty()).map(Ok));
                }
                Kind::Done => return Poll::Ready(None),
                Kind::Length(left) => {
                    if !conn.buf.is_empty() {
                        let n = (conn.buf.len() as u64).min(*left);
                        *left -= n;
                        let data = conn.buf.split_to(n as usize).freeze();
                        if *left == 0 {
                            self.kind = Kind::Done;
                            self.release();
                        }
                        return Poll::Ready(Some(Ok(data)));
                    }
                }
                Kind::Chunked(dec) => match dec.decode(&mut conn.buf) {
                    Ok(Decoded::Data(d)) => return Poll::Ready(Some(Ok(d))),
                    Ok(Decoded::End) => {
                        self.kind = Kind::Done;
                        self.release();
                        return Poll::Ready(None);
                    }
                    Ok(Decoded::NeedMore) => {}
                    Err(e) => {
                        self.conn = None;
                        self.kind = Kind::Done;
                        return Poll::Ready(Some(Err(std::io::Error::other(format!("the agent's answer: {}", e.0)))));
                    }
                },
                Kind::Close => {
                    if !conn.buf.is_empty() {
                        let data = conn.buf.split().freeze();
                        return Poll::Ready(Some(Ok(data)));
                    }
                }
            }
            match conn.poll_fill(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Ok(0)) => {
                    let close = matches!(self.kind, Kind::Close);
                    self.conn = None;
                    self.kind = Kind::Done;
                    if close {
                        return Poll::Ready(None);
                    }
                    return Poll::Ready(Some(Err(std::io::Error::new(
                        std::io::ErrorKind::UnexpectedEof,
                        "the agent's answer was cut short",
                    ))));
                }
                Poll::Ready(Ok(_)) => {}
                Poll::Ready(Err(e)) => {
                    self.conn = None;
                    self.kind = Kind::Done;
                    return Poll::Ready(Some(Err(e)));
                }
            }
        }
    }

    /// [`UpstreamBody::poll_data`] as a future.
    pub async fn data(&mut self) -> Option<Result<Bytes, std::io::Error>> {
        std::future::poll_fn(|cx| self.poll_data(cx)).await
    }

    /// Reads the whole body, at most `max` bytes.
    pub async fn read_whole(mut self, max: usize) -> Result<Bytes, std::io::Error> {
        if let Some(b) = self.take_whole() {
            return Ok(b);
        }
        let mut out = BytesMut::new();
        while let Some(d) = self.data().await {
            let d = d?;
            if out.len() + d.len() > max {
                return Err(std::io::Error::other(format!("the agent's answer is over {max} bytes")));
            }
            out.extend_from_slice(&d);
        }
        Ok(out.freeze())
    }
}

impl Body for UpstreamBody {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        self.poll_data(cx).map(|o| o.map(|r| r.map(Frame::data)))
    }

    fn is_end_stream(&self) -> bool {
        matches!(self.kind, Kind::Done | Kind::Full(None))
    }

    fn size_hint(&self) -> SizeHint {
        match (&self.kind, self.length) {
            (Kind::Full(Some(b)), _) => SizeHint::with_exact(b.len() as u64),
            (Kind::Length(left), _) => SizeHint::with_exact(*left),
            (Kind::Done | Kind::Full(None), _) => SizeHint::with_exact(0),
            _ => SizeHint::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncWriteExt;

    /// An answer read whole leaves its connection known to be drained: taking it from the pool costs no probing `recv`
    /// (the probe is what a connection whose read readiness is still set pays).
    #[tokio::test]
    async fn a_connection_whose_answer_was_read_whole_is_taken_without_a_probe() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let stream = TcpStream::connect(listener.local_addr().expect("addr")).await.expect("connect");
        let (mut agent, _) = listener.accept().await.expect("accept");
        let mut conn = Conn { stream, buf: BytesMut::new(), deadline: crate::h1::Deadline::new() };
        agent.write_all(b"HTTP/1.1 204 No Content\r\n\r\n").await.expect("write");
        let n = std::future::poll_fn(|cx| conn.poll_fill(cx)).await.expect("read");
        assert_eq!(n, 27);
        conn.buf.clear();
        let mut cx = Context::from_waker(std::task::Waker::noop());
        assert!(conn.stream.poll_read_ready(&mut cx).is_pending(), "a short read clears the read readiness");
        assert!(conn.usable());
        // The agent's close is seen (readiness set by the close, then the probe reads its end).
        drop(agent);
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!conn.usable(), "a connection the agent closed is not usable");
    }

    /// Connections a worker thread put back are that worker's: another partition opens its own.
    #[tokio::test]
    async fn each_partition_takes_back_only_its_own_connections() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let authority: Arc<str> = listener.local_addr().expect("addr").to_string().into();
        let pool = Pool {
            idle: Mutex::new(HashMap::default()),
            max_idle: 4,
            idle_timeout: Duration::from_secs(4),
            connect_timeout: Duration::from_secs(1),
            opened: AtomicU64::new(0),
            replayed: Counter::default(),
        };
        set_pool_partition(3);
        let conn = pool.connect(&authority).await.expect("connect");
        pool.checkin(&authority, conn);
        set_pool_partition(0);
        assert!(pool.checkout(&authority).is_none(), "partition 0 does not take partition 3's connection");
        set_pool_partition(3);
        assert!(pool.checkout(&authority).is_some(), "partition 3 takes its own back");
        set_pool_partition(0);
    }
}
