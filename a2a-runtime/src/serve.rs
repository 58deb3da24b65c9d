//! Serving a router over TCP with the connection-level limits of `spec/PROTOCOL.md` §13 (header read timeout, hard
//! header cap) and graceful shutdown.
//!
//! Each connection is first sniffed, within the header read timeout, to tell HTTP/2 (its preface) from HTTP/1.1; a
//! client that connects and sends nothing, or stalls in the middle of its first bytes, is disconnected when the
//! timeout passes. After that hyper's own `header_read_timeout` bounds every request head.
//!
//! HTTP/1.1 heads are checked by [`crate::head_guard`] before hyper reads them (ERR-4: a malformed head is answered
//! with the JSON error body), and at most `limits.max_connections` connections are open at once (LIM-8).
//!
//! The `a2a-server` binary serves with [`serve_threads`]: one single-threaded runtime per CPU, each accepting on the
//! one listener, so that a connection's memory is taken and given back on one thread (LIM-7).

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use http::{Request, Response};
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tower::{Service, ServiceExt};

use crate::limits::Limits;

const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// A stream that first yields bytes already read from it (a connection sniffed or partly read before it is handed
/// to hyper).
pub struct Prefixed {
    prefix: Vec<u8>,
    pos: usize,
    inner: TcpStream,
}

impl Prefixed {
    /// `inner`, whose first bytes `prefix` were already read from it.
    pub fn new(prefix: Vec<u8>, inner: TcpStream) -> Prefixed {
        Prefixed { prefix, pos: 0, inner }
    }
}

impl AsyncRead for Prefixed {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        if self.pos < self.prefix.len() {
            let n = (self.prefix.len() - self.pos).min(buf.remaining());
            let start = self.pos;
            buf.put_slice(&self.prefix[start..start + n]);
            self.pos += n;
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for Prefixed {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
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

/// Reads until the bytes either differ from the HTTP/2 preface (HTTP/1) or are the whole preface (HTTP/2).
/// `None` when the client closes or the time runs out first.
async fn sniff(stream: &mut TcpStream, limit: Duration) -> Option<(Vec<u8>, bool)> {
    let read = async {
        let mut buf = Vec::with_capacity(H2_PREFACE.len());
        let mut chunk = [0u8; 24];
        loop {
            let want = H2_PREFACE.len() - buf.len();
            let n = stream.read(&mut chunk[..want]).await.ok()?;
            if n == 0 {
                return None;
            }
            buf.extend_from_slice(&chunk[..n]);
            if !H2_PREFACE.starts_with(&buf) {
                return Some((buf, false));
            }
            if buf.len() == H2_PREFACE.len() {
                return Some((buf, true));
            }
        }
    };
    tokio::time::timeout(limit, read).await.ok().flatten()
}

/// Serves `app` on `listener` until `shutdown` completes, then stops accepting connections and waits up to `grace`
/// for open connections to finish their requests. Handlers can extract the peer's address as
/// `axum::extract::ConnectInfo<SocketAddr>`.
///
/// Headers above the router's JSON-answered limits but below twice `max_header_bytes` still reach the router (which
/// answers `431` as JSON); anything larger is refused by the HTTP layer itself, so memory stays bounded.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    limits: &Limits,
    shutdown: impl Future<Output = ()> + Send,
    grace: Duration,
) -> std::io::Result<()> {
    serve_router(listener, app, limits, shutdown, grace, Slots::new(connection_limit(limits.max_connections))).await
}

/// [`serve`] with connection slots that may be shared with other serving loops.
async fn serve_router(
    listener: TcpListener,
    app: Router,
    limits: &Limits,
    shutdown: impl Future<Output = ()> + Send,
    grace: Duration,
    slots: Slots,
) -> std::io::Result<()> {
    let per_connection = move |peer: SocketAddr| {
        let app = app.clone();
        tower::service_fn(move |mut req: Request<Body>| {
            req.extensions_mut().insert(axum::extract::ConnectInfo(peer));
            app.clone().oneshot(req)
        })
    };
    serve_slots(listener, per_connection, limits, shutdown, grace, slots).await
}

/// The connections a process may hold open at once (LIM-8), shared by all its serving loops.
#[derive(Clone)]
struct Slots {
    free: Arc<tokio::sync::Semaphore>,
    max: usize,
}

impl Slots {
    fn new(max: usize) -> Slots {
        Slots { free: Arc::new(tokio::sync::Semaphore::new(max)), max }
    }
}

/// The serving threads of [`serve_threads`] after their loops ended: their runtimes keep running what requests
/// started (executions confirmed, streams' background writes) until this is dropped, so that the caller can drain
/// the agent first.
#[must_use = "dropping it at once stops what requests started before the agent is drained"]
pub struct ServingThreads {
    _release: tokio_util::sync::DropGuard,
}

/// [`serve`] on `threads` threads (`0`: one per CPU), each running its own single-threaded runtime that accepts on
/// `listener` and serves the connections it accepted from start to end, as the gateway's workers do (GW-23): the
/// memory a connection takes is allocated and given back on one thread, so the allocator returns it to the system
/// once the connection closes (LIM-7). The connection limit (LIM-8) is the process's, shared by the threads; the
/// header read timeout, the head guard (ERR-4), HTTP/2 and the graceful shutdown are [`serve`]'s.
///
/// `shutdown` runs on the calling runtime (signals are handled there). When it completes, every thread stops
/// accepting and lets its connections finish within `grace`; this then returns, and the threads keep running the
/// tasks requests started until the returned [`ServingThreads`] is dropped.
///
/// An error when a thread cannot be started, or when one stops before `shutdown` (the others are then stopped).
pub async fn serve_threads(
    listener: TcpListener,
    app: Router,
    limits: &Limits,
    shutdown: impl Future<Output = ()> + Send,
    grace: Duration,
    threads: usize,
) -> std::io::Result<ServingThreads> {
    let threads = if threads == 0 {
        std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get)
    } else {
        threads
    };
    let listener = listener.into_std()?;
    let slots = Slots::new(connection_limit(limits.max_connections));
    let stop = tokio_util::sync::CancellationToken::new();
    let release = tokio_util::sync::CancellationToken::new();
    // However this returns (a thread that could not be started included), the threads already started stop.
    let _stop_all = stop.clone().drop_guard();
    let release_all = release.clone().drop_guard();
    let mut ended = Vec::with_capacity(threads);
    for i in 0..threads {
        let (listener, app, limits, slots) = (listener.try_clone()?, app.clone(), limits.clone(), slots.clone());
        let (stop, release) = (stop.clone(), release.clone());
        let (tx, rx) = tokio::sync::oneshot::channel::<std::io::Result<()>>();
        std::thread::Builder::new().name(format!("a2a-serve-{i}")).spawn(move || {
            // Every driver: a request may start a handler's process or wait on a timer.
            let rt = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
                Ok(rt) => rt,
                Err(e) => {
                    let _ = tx.send(Err(e));
                    return;
                }
            };
            rt.block_on(async move {
                let served = match TcpListener::from_std(listener) {
                    Ok(listener) => serve_router(listener, app, &limits, stop.cancelled_owned(), grace, slots).await,
                    Err(e) => Err(e),
                };
                let _ = tx.send(served);
                release.cancelled().await;
            });
        })?;
        ended.push(rx);
    }
    drop(listener);
    join_threads(ended, shutdown, &stop, "serving thread").await.map(|()| ServingThreads { _release: release_all })
}

/// Waits for `shutdown`, or for one of the serving threads whose ends `ended` reports to stop before it, then
/// cancels `stop` (every thread stops accepting) and waits for the threads. An error names the thread (`what` and
/// its index) that stopped before the shutdown; the others' errors are logged. Shared by [`serve_threads`] and the
/// gateway's workers.
pub async fn join_threads(
    mut ended: Vec<tokio::sync::oneshot::Receiver<io::Result<()>>>,
    shutdown: impl Future<Output = ()> + Send,
    stop: &tokio_util::sync::CancellationToken,
    what: &str,
) -> io::Result<()> {
    let early = if ended.is_empty() {
        shutdown.await;
        None
    } else {
        tokio::select! {
            () = shutdown => None,
            (r, i, _) = futures_util::future::select_all(ended.iter_mut()) => Some((i, r)),
        }
    };
    stop.cancel();
    let mut result = Ok(());
    if let Some((i, r)) = early {
        let e = match r {
            Ok(Err(e)) => e,
            _ => io::Error::other(format!("the {what} stopped")),
        };
        tracing::error!(thread = i, error = %e, "a {what} stopped before the shutdown; stopping the others");
        result = Err(io::Error::other(format!("{what} {i}: {e}")));
        ended.remove(i);
    }
    for rx in ended {
        if let Ok(Err(e)) = rx.await {
            tracing::warn!(error = %e, "a {what} ended with an error");
        }
    }
    result
}

/// The next connection on `listener` (with `TCP_NODELAY` set), or `None` once `shutdown` completes. A failed accept
/// (out of file descriptors and the like) is logged and retried after a short pause: a server keeps serving.
pub async fn accept(
    listener: &TcpListener,
    mut shutdown: Pin<&mut impl Future<Output = ()>>,
) -> Option<(TcpStream, SocketAddr)> {
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    let _ = stream.set_nodelay(true);
                    return Some((stream, peer));
                }
                Err(e) => {
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            },
            () = shutdown.as_mut() => return None,
        }
    }
}

/// `configured`, lowered to three quarters of the soft limit of open files (LIM-8) so that the listener never runs
/// out of descriptors before the limit (the rest is for the store, handlers and logs); logged when lowered.
pub fn connection_limit(configured: usize) -> usize {
    #[cfg(unix)]
    {
        let nofile = rustix::process::getrlimit(rustix::process::Resource::Nofile).current;
        if let Some(n) = nofile.and_then(|n| usize::try_from(n).ok()) {
            let usable = (n / 4 * 3).max(16);
            if usable < configured {
                tracing::warn!(
                    configured,
                    open_files_limit = n,
                    max_connections = usable,
                    "limits.max_connections is above three quarters of the open-files limit (ulimit -n); lowered"
                );
                return usable;
            }
        }
    }
    configured.max(1)
}

/// [`serve`] for any service (one made per connection by `per_connection`, given the peer's address): the same
/// connection limits, HTTP/1.1 and HTTP/2, graceful shutdown, without a router in between (the gateway's proxy path
/// uses it).
pub async fn serve_with<M, S>(
    listener: TcpListener,
    per_connection: M,
    limits: &Limits,
    shutdown: impl Future<Output = ()> + Send,
    grace: Duration,
) -> std::io::Result<()>
where
    M: Fn(SocketAddr) -> S,
    S: Service<Request<Body>, Response = Response<Body>, Error = Infallible> + Clone + Send + 'static,
    S::Future: Send + 'static,
{
    serve_slots(listener, per_connection, limits, shutdown, grace, Slots::new(connection_limit(limits.max_connections)))
        .await
}

/// [`serve_with`] drawing on `slots`.
async fn serve_slots<M, S>(
    listener: TcpListener,
    per_connection: M,
    limits: &Limits,
    shutdown: impl Future<Output = ()> + Send,
    grace: Duration,
    slots: Slots,
) -> std::io::Result<()>
where
    M: Fn(SocketAddr) -> S,
    S: Service<Request<Body>, Response = Response<Body>, Error = Infallible> + Clone + Send + 'static,
    S::Future: Send + 'static,
{
    let mut http1 = hyper::server::conn::http1::Builder::new();
    http1
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout())
        // The head guard ends the stream at a refused head: the answers to the requests before it are still
        // written, then the guard's JSON error (ERR-4).
        .half_close(true)
        // Above what the head guard lets through, so that hyper never refuses a head itself (ERR-4).
        .max_buf_size((limits.max_header_bytes * 2).max(8192) + limits.max_body_bytes.min(64 * 1024))
        .max_headers(limits.max_headers * 2 + 1);
    let mut http2 = hyper::server::conn::http2::Builder::new(TokioExecutor::new());
    http2.timer(TokioTimer::new()).max_header_list_size((limits.max_header_bytes * 2) as u32);
    let header_timeout = limits.header_read_timeout();
    let head_limits = crate::head_guard::HeadLimits {
        max_head_bytes: (limits.max_header_bytes * 2).max(8192),
        max_fields: limits.max_headers * 2,
    };
    let Slots { free: slots, max: max_connections } = slots;
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    // LIM-7: memory freed after a burst goes back to the system even when the serving threads then idle.
    let tick = tokio::spawn(crate::allocator::ticker());
    tokio::pin!(shutdown);
    loop {
        // LIM-8: at the limit, stop accepting; new connections wait in the listen backlog until one closes.
        let slot = match slots.clone().try_acquire_owned() {
            Ok(s) => s,
            Err(_) => {
                tracing::warn!(
                    max_connections,
                    "connection limit reached (limits.max_connections): not accepting until a connection closes"
                );
                tokio::select! {
                    s = slots.clone().acquire_owned() => match s { Ok(s) => s, Err(_) => break },
                    () = shutdown.as_mut() => break,
                }
            }
        };
        let Some((mut stream, peer)) = accept(&listener, shutdown.as_mut()).await else { break };
        let svc = per_connection(peer);
        let service =
            hyper::service::service_fn(move |req: hyper::Request<Incoming>| svc.clone().oneshot(req.map(Body::new)));
        let (http1, http2) = (http1.clone(), http2.clone());
        let watcher = graceful.watcher();
        tokio::spawn(async move {
            let _slot = slot;
            let Some((prefix, is_h2)) = sniff(&mut stream, header_timeout).await else {
                tracing::debug!(%peer, "connection closed before a request started (or the header read timeout passed)");
                return;
            };
            let io = Prefixed { prefix, pos: 0, inner: stream };
            let result = if is_h2 {
                watcher.watch(http2.serve_connection(TokioIo::new(io), service)).await
            } else {
                let io = TokioIo::new(crate::head_guard::HeadGuard::new(io, head_limits));
                watcher.watch(http1.serve_connection(io, service)).await
            };
            if let Err(e) = result {
                tracing::debug!(error = %e, %peer, "connection ended with an error");
            }
        });
    }
    drop(listener);
    tick.abort();
    if tokio::time::timeout(grace, graceful.shutdown()).await.is_err() {
        tracing::warn!("some connections were still open after the grace period");
    }
    Ok(())
}
