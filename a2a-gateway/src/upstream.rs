//! The connections to agents: a keep-alive pool of HTTP/1.1 connections per agent, bounded connect and answer times,
//! and errors that say whether the request reached the agent at all (so that NEGOTIATE can be retried elsewhere).
//!
//! A connection is driven by the request that uses it, in that request's task: sending the request and reading the
//! answer's head polls the connection, and so does every poll of the answer's body ([`UpstreamBody`]) until its last
//! byte, when the connection goes back to the pool. There is no connection task per agent connection and no channel
//! hand-off between tasks for each request and body, which is what a proxy's per-request cost is made of on
//! loopback (`docs/BENCHMARKS.md`, "a2a-gateway").
//!
//! An idle connection is not polled while it waits in the pool. One the agent closed meanwhile is found when it is
//! taken out (polled once: it has ended, or is not ready for a request) and dropped; a request that a reused
//! connection could not even send (it closed at that very moment) is sent again once on a new connection, which is
//! safe since nothing reached the agent. At most `pool_max_idle` connections wait per agent, each at most 90 s.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::uri::{Authority, PathAndQuery};
use http::{HeaderValue, Request, Response, Uri, header};
use http_body_util::{BodyExt, Full};
use hyper::body::{Body, Frame, Incoming, SizeHint};
use hyper::client::conn::http1::{Connection, SendRequest};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

/// How long a connection may wait unused in the pool.
const IDLE_TIMEOUT: Duration = Duration::from_secs(90);
/// TCP keep-alive probes on agent connections.
const TCP_KEEPALIVE: Duration = Duration::from_secs(60);

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

/// One HTTP/1.1 connection to an agent: the half that sends requests and the half that does the I/O.
struct Conn {
    sender: SendRequest<Full<Bytes>>,
    io: Connection<TokioIo<TcpStream>, Full<Bytes>>,
    /// The I/O half has completed (the connection ended); it is never polled again.
    ended: bool,
}

impl Conn {
    /// Does the connection's pending I/O. Errors reach the request or body waiting on them.
    fn drive(&mut self, cx: &mut Context<'_>) {
        if !self.ended && Pin::new(&mut self.io).poll(cx).is_ready() {
            self.ended = true;
        }
    }

    /// Whether another request can be sent now (after driving the connection once).
    fn ready(&mut self, cx: &mut Context<'_>) -> bool {
        self.drive(cx);
        !self.ended && self.sender.is_ready()
    }

    /// Sends `req` and drives the connection until the answer's head is read. `Failed::NotSent`: the request was not
    /// sent (the connection had closed), so it may be sent on another.
    async fn send(&mut self, req: Request<Full<Bytes>>) -> Result<Response<Incoming>, Failed> {
        let mut answer = std::pin::pin!(self.sender.try_send_request(req));
        std::future::poll_fn(|cx| {
            self.drive(cx);
            match answer.as_mut().poll(cx) {
                Poll::Ready(Ok(resp)) => Poll::Ready(Ok(resp)),
                Poll::Ready(Err(mut e)) => Poll::Ready(Err(match e.take_message() {
                    Some(req) => Failed::NotSent(Box::new(req), a2a_core::error::with_causes(&e.into_error())),
                    None => Failed::Sent(a2a_core::error::with_causes(&e.into_error())),
                })),
                Poll::Pending if self.ended => {
                    Poll::Ready(Err(Failed::Sent("the connection to the agent ended before its answer".to_owned())))
                }
                Poll::Pending => Poll::Pending,
            }
        })
        .await
    }
}

/// Why [`Conn::send`] failed.
enum Failed {
    /// Nothing was sent; the request is given back.
    NotSent(Box<Request<Full<Bytes>>>, String),
    /// The request (or part of it) was sent.
    Sent(String),
}

/// A connection waiting in the pool.
struct Idle {
    conn: Conn,
    since: Instant,
}

/// The idle connections, by agent (`host:port`).
struct Pool {
    idle: Mutex<HashMap<Authority, Vec<Idle>>>,
    max_idle: usize,
    connect_timeout: Duration,
    /// Connections opened so far.
    opened: AtomicU64,
}

impl Pool {
    /// A ready idle connection to `authority` (the most recently used first), dropping those that ended or expired.
    fn checkout(&self, authority: &Authority, cx: &mut Context<'_>) -> Option<Conn> {
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        let list = idle.get_mut(authority)?;
        let now = Instant::now();
        list.retain(|i| now.duration_since(i.since) < IDLE_TIMEOUT);
        while let Some(mut i) = list.pop() {
            if i.conn.ready(cx) {
                return Some(i.conn);
            }
        }
        None
    }

    /// Puts a connection whose last answer was read whole back, if it can take another request.
    fn checkin(&self, authority: Authority, mut conn: Conn) {
        if !conn.ready(&mut Context::from_waker(std::task::Waker::noop())) || self.max_idle == 0 {
            return;
        }
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        let list = idle.entry(authority).or_default();
        if list.len() >= self.max_idle {
            list.remove(0);
        }
        list.push(Idle { conn, since: Instant::now() });
    }

    /// A new connection to `authority`, within the connect timeout.
    async fn connect(&self, authority: &Authority) -> Result<Conn, UpstreamError> {
        let host = authority.host().trim_start_matches('[').trim_end_matches(']');
        let port = authority.port_u16().unwrap_or(80);
        let stream = tokio::time::timeout(self.connect_timeout, TcpStream::connect((host, port)))
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
        let (sender, io) = hyper::client::conn::http1::Builder::new()
            .handshake(TokioIo::new(stream))
            .await
            .map_err(|e| UpstreamError::Connect(a2a_core::error::with_causes(&e)))?;
        self.opened.fetch_add(1, Ordering::Relaxed);
        Ok(Conn { sender, io, ended: false })
    }
}

/// A pooled HTTP/1.1 client to the agents.
#[derive(Clone)]
pub struct Upstream {
    pool: Arc<Pool>,
    timeout: Duration,
}

impl Upstream {
    /// A client whose connections are kept alive (`pool_max_idle` per agent) and made within `connect_timeout`.
    pub fn new(connect_timeout: Duration, timeout: Duration, pool_max_idle: usize) -> Self {
        let pool = Pool {
            idle: Mutex::new(HashMap::new()),
            max_idle: pool_max_idle,
            connect_timeout,
            opened: AtomicU64::new(0),
        };
        Upstream { pool: Arc::new(pool), timeout }
    }

    /// Connections to agents opened so far (a measure of how well the pool keeps them).
    pub fn connections_opened(&self) -> u64 {
        self.pool.opened.load(Ordering::Relaxed)
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
        match tokio::time::timeout(limit, self.exchange(req)).await {
            Err(_) => Err(UpstreamError::Timeout(limit.as_millis() as u64)),
            Ok(r) => r,
        }
    }

    async fn exchange(&self, mut req: Request<Full<Bytes>>) -> Result<Response<UpstreamBody>, UpstreamError> {
        let authority = origin_form(&mut req)?;
        // A pooled connection first; one that could not even send the request is replaced by a new one, once.
        let mut fresh = false;
        loop {
            let pooled = if fresh {
                None
            } else {
                std::future::poll_fn(|cx| Poll::Ready(self.pool.checkout(&authority, cx))).await
            };
            let reused = pooled.is_some();
            let mut conn = match pooled {
                Some(c) => c,
                // Boxed: a new connection is rare, and its state would otherwise be part of every request's future.
                None => Box::pin(self.pool.connect(&authority)).await?,
            };
            match conn.send(req).await {
                Ok(resp) => {
                    let pool = Some((self.pool.clone(), authority));
                    return Ok(resp.map(|incoming| UpstreamBody { incoming, conn: Some(conn), pool, ended: false }));
                }
                Err(Failed::NotSent(r, _)) if reused => {
                    req = *r;
                    fresh = true;
                }
                Err(Failed::NotSent(_, e)) => return Err(UpstreamError::Connect(e)),
                Err(Failed::Sent(e)) => return Err(UpstreamError::Protocol(e)),
            }
        }
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

/// Turns an absolute request URI into origin form (what HTTP/1.1 sends to an origin server), sets `Host`, and gives
/// the authority the connection is for.
fn origin_form(req: &mut Request<Full<Bytes>>) -> Result<Authority, UpstreamError> {
    let uri = req.uri();
    if uri.scheme_str() != Some("http") {
        return Err(UpstreamError::Connect(format!("{uri}: agents are reached over http://")));
    }
    let authority =
        uri.authority().cloned().ok_or_else(|| UpstreamError::Connect(format!("{uri}: the URI names no host")))?;
    let path = uri.path_and_query().cloned().unwrap_or_else(|| PathAndQuery::from_static("/"));
    let host =
        HeaderValue::from_str(authority.as_str()).map_err(|e| UpstreamError::Connect(format!("{authority}: {e}")))?;
    req.headers_mut().insert(header::HOST, host);
    *req.uri_mut() = Uri::from(path);
    Ok(authority)
}

/// An agent's answer body. Polling it drives the connection it arrives on; once it is read whole, the connection goes
/// back to the pool (a body dropped before its end closes the connection instead).
pub struct UpstreamBody {
    incoming: Incoming,
    conn: Option<Conn>,
    pool: Option<(Arc<Pool>, Authority)>,
    /// The body has ended (its last frame was read).
    ended: bool,
}

impl UpstreamBody {
    /// Gives the connection back to the pool when the answer has been read whole.
    fn release(&mut self) {
        if (self.ended || self.incoming.is_end_stream())
            && let (Some(conn), Some((pool, authority))) = (self.conn.take(), self.pool.take())
        {
            pool.checkin(authority, conn);
        }
    }
}

impl Body for UpstreamBody {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        let this = &mut *self;
        if let Some(conn) = &mut this.conn {
            conn.drive(cx);
        }
        let frame = Pin::new(&mut this.incoming).poll_frame(cx);
        match &frame {
            Poll::Ready(None) => {
                this.ended = true;
                this.release();
            }
            Poll::Ready(Some(Ok(_))) => this.release(),
            Poll::Ready(Some(Err(_))) => this.conn = None,
            Poll::Pending => {}
        }
        frame
    }

    fn is_end_stream(&self) -> bool {
        self.incoming.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.incoming.size_hint()
    }
}

impl Drop for UpstreamBody {
    fn drop(&mut self) {
        self.release();
    }
}
