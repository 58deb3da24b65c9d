//! Serving a router over TCP with the connection-level limits of `spec/PROTOCOL.md` §13 (header read timeout, hard
//! header cap) and graceful shutdown.

use std::future::Future;
use std::net::SocketAddr;
use std::time::Duration;

use axum::Router;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use tokio::net::TcpListener;
use tower::ServiceExt;

use crate::limits::Limits;

/// Serves `app` on `listener` until `shutdown` completes, then stops accepting connections and waits up to `grace`
/// for open connections to finish their requests.
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
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout())
        .max_buf_size((limits.max_header_bytes * 2).max(8192) + limits.max_body_bytes.min(64 * 1024))
        .max_headers(limits.max_headers * 2);
    builder.http2().timer(TokioTimer::new()).max_header_list_size((limits.max_header_bytes * 2) as u32);
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    tokio::pin!(shutdown);
    loop {
        let (stream, peer): (tokio::net::TcpStream, SocketAddr) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    // Out of file descriptors and the like: log, back off briefly, keep serving.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let _ = stream.set_nodelay(true);
        let app = app.clone();
        let service = hyper::service::service_fn(move |req: hyper::Request<Incoming>| {
            let mut req = req.map(axum::body::Body::new);
            req.extensions_mut().insert(axum::extract::ConnectInfo(peer));
            app.clone().oneshot(req)
        });
        let conn = builder.serve_connection_with_upgrades(TokioIo::new(stream), service).into_owned();
        let conn = graceful.watch(conn);
        tokio::spawn(async move {
            if let Err(e) = conn.await {
                tracing::debug!(error = %e, %peer, "connection ended with an error");
            }
        });
    }
    drop(listener);
    if tokio::time::timeout(grace, graceful.shutdown()).await.is_err() {
        tracing::warn!("some connections were still open after the grace period");
    }
    Ok(())
}
