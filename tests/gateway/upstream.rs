//! The gateway's agent connections (`a2a_gateway::upstream`) against a real HTTP/1.1 server on loopback that counts
//! the connections it accepts: reuse, a connection the agent closed, a body dropped half-read, time limits, refusals.

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use a2a_gateway::upstream::{PoolLimits, Upstream, UpstreamError};
use bytes::Bytes;
use http::{Request, Response};
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper_util::rt::TokioIo;

/// A server whose answers depend on the path: `/ok` (a small JSON), `/close` (`Connection: close`), `/slow` (500 ms),
/// `/stream` (chunked, 64 chunks of 1 KiB, 5 ms apart), `/empty` (204). Counts connections accepted.
struct Server {
    addr: std::net::SocketAddr,
    accepted: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

type Answer = Response<http_body_util::combinators::BoxBody<Bytes, Infallible>>;

async fn answer(req: Request<Incoming>) -> Result<Answer, Infallible> {
    let host = req.headers().get(http::header::HOST).and_then(|v| v.to_str().ok()).unwrap_or("").to_owned();
    let full = |s: &str| Full::new(Bytes::from(s.to_owned())).boxed();
    Ok(match req.uri().path() {
        "/close" => {
            Response::builder().header("connection", "close").body(full("{\"closed\":true}")).expect("response")
        }
        "/slow" => {
            tokio::time::sleep(Duration::from_millis(500)).await;
            Response::new(full("{\"slow\":true}"))
        }
        "/stream" => {
            let chunks = futures_util::stream::unfold(0, |i| async move {
                if i == 64 {
                    return None;
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
                Some((Ok::<_, Infallible>(Frame::data(Bytes::from(vec![b'x'; 1024]))), i + 1))
            });
            Response::new(StreamBody::new(chunks).boxed())
        }
        "/empty" => Response::builder().status(204).body(full("")).expect("response"),
        p => Response::new(full(&format!("{{\"path\":\"{p}\",\"host\":\"{host}\"}}"))),
    })
}

/// Accepts and serves connections; aborting it closes every connection (they live in its `JoinSet`).
async fn serve(listener: tokio::net::TcpListener, count: Arc<AtomicUsize>) {
    let mut connections = tokio::task::JoinSet::new();
    loop {
        let Ok((stream, _)) = listener.accept().await else { return };
        count.fetch_add(1, Ordering::SeqCst);
        connections.spawn(async move {
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), hyper::service::service_fn(answer))
                .await;
        });
        while connections.try_join_next().is_some() {}
    }
}

impl Server {
    async fn start() -> Server {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let accepted = Arc::new(AtomicUsize::new(0));
        let count = accepted.clone();
        let task = tokio::spawn(serve(listener, count));
        Server { addr, accepted, task }
    }

    fn get(&self, path: &str) -> Request<Full<Bytes>> {
        Request::get(format!("http://{}{path}", self.addr)).body(Full::new(Bytes::new())).expect("request")
    }

    fn accepted(&self) -> usize {
        self.accepted.load(Ordering::SeqCst)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn upstream() -> Upstream {
    Upstream::new(Duration::from_secs(2), Duration::from_secs(5), 8)
}

async fn text(up: &Upstream, req: Request<Full<Bytes>>) -> (u16, String) {
    let resp = up.send(req).await.expect("send");
    let status = resp.status().as_u16();
    let body = resp.into_body().collect().await.expect("body").to_bytes();
    (status, String::from_utf8(body.to_vec()).expect("utf-8"))
}

#[tokio::test]
async fn sequential_requests_reuse_one_connection_and_send_origin_form_with_host() {
    let server = Server::start().await;
    let up = upstream();
    for i in 0..50 {
        let (status, body) = text(&up, server.get(&format!("/ok/{i}?q=1"))).await;
        assert_eq!(status, 200);
        assert_eq!(body, format!("{{\"path\":\"/ok/{i}\",\"host\":\"{}\"}}", server.addr));
    }
    // Empty answers (204) and streamed chunked answers read to their end give the connection back too.
    assert_eq!(text(&up, server.get("/empty")).await, (204, String::new()));
    let (status, body) = text(&up, server.get("/stream")).await;
    assert_eq!((status, body.len()), (200, 64 * 1024));
    assert_eq!(text(&up, server.get("/ok")).await.0, 200);
    assert_eq!(server.accepted(), 1, "one connection for every sequential request");
    assert_eq!(up.connections_opened(), 1);
}

/// Sends `paths` at once, each in its own task, and asserts every answer is `200`.
async fn all_at_once(up: &Upstream, server: &Server, paths: &[String]) {
    let tasks: Vec<_> = paths
        .iter()
        .map(|p| {
            let (up, req) = (up.clone(), server.get(p));
            tokio::spawn(async move { text(&up, req).await })
        })
        .collect();
    for t in tasks {
        assert_eq!(t.await.expect("task").0, 200);
    }
}

#[tokio::test]
async fn concurrent_requests_open_one_connection_each_then_reuse_them() {
    let server = Server::start().await;
    let up = upstream();
    for _round in 0..5 {
        all_at_once(&up, &server, &(0..4).map(|i| format!("/ok/{i}")).collect::<Vec<_>>()).await;
    }
    assert!(server.accepted() <= 4, "at most one connection per concurrent request, kept: {}", server.accepted());
}

#[tokio::test]
async fn a_connection_the_agent_closed_is_not_reused() {
    let server = Server::start().await;
    let up = upstream();
    assert_eq!(text(&up, server.get("/close")).await, (200, "{\"closed\":true}".to_owned()));
    assert_eq!(text(&up, server.get("/ok")).await.0, 200);
    assert_eq!(server.accepted(), 2, "the closed connection was replaced");
    // An idle connection the agent drops while it waits in the pool (here: the whole server restarts on the same
    // port) is found when it is taken out, and the request goes on a new one.
    let port = server.addr.port();
    drop(server);
    // Time for the aborted connection tasks to close their sockets and the FIN to arrive.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await.expect("rebind");
    let accepted = Arc::new(AtomicUsize::new(0));
    let count = accepted.clone();
    let task = tokio::spawn(serve(listener, count));
    let req = Request::get(format!("http://127.0.0.1:{port}/ok")).body(Full::new(Bytes::new())).expect("request");
    assert_eq!(text(&up, req).await.0, 200, "the stale pooled connection was not used");
    assert_eq!(accepted.load(Ordering::SeqCst), 1);
    task.abort();
}

/// An agent that answers the first request of each connection and closes the connection on the second one, after
/// reading it and without answering: what an agent's idle timeout does when it closes a kept-alive connection as a
/// request arrives on it. Counts the connections it accepts and the requests it reads.
async fn closes_on_the_second_request() -> (String, Arc<AtomicUsize>, Arc<AtomicUsize>, tokio::task::JoinHandle<()>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let authority = listener.local_addr().expect("addr").to_string();
    let (accepted, requests) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let (a, r) = (accepted.clone(), requests.clone());
    let task = tokio::spawn(async move {
        loop {
            let Ok((mut stream, _)) = listener.accept().await else { return };
            a.fetch_add(1, Ordering::SeqCst);
            let r = r.clone();
            tokio::spawn(async move {
                let mut buf = Vec::new();
                for nth in 0.. {
                    // Requests without a body: a head ends the request.
                    while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                        let mut chunk = [0u8; 1024];
                        match stream.read(&mut chunk).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buf.extend_from_slice(&chunk[..n]),
                        }
                    }
                    buf.clear();
                    r.fetch_add(1, Ordering::SeqCst);
                    if nth == 1 {
                        return; // closed, unanswered
                    }
                    let answer = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok";
                    if stream.write_all(answer).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    (authority, accepted, requests, task)
}

#[tokio::test]
async fn a_repeatable_request_whose_pooled_connection_ends_unanswered_is_sent_again_once() {
    let (authority, accepted, requests, task) = closes_on_the_second_request().await;
    let authority: Arc<str> = authority.into();
    let replays = prometheus_client::metrics::counter::Counter::<u64>::default();
    let up = Upstream::counted(
        Duration::from_secs(2),
        Duration::from_secs(5),
        PoolLimits::with_max_idle(8),
        replays.clone(),
    );
    let message = format!("GET /a2a/result/x HTTP/1.1\r\nhost: {authority}\r\n\r\n").into_bytes();
    let limit = Duration::from_secs(5);
    let read = |a: a2a_gateway::upstream::Answer| async move {
        let status = a.head.status;
        (status, a.body.collect().await.expect("body").to_bytes())
    };
    // Connection 1 answers; its second request is closed unanswered and sent again on connection 2.
    let first = up.send_raw(&authority, &message, limit, true).await.expect("answered");
    assert_eq!(read(first).await, (200, Bytes::from_static(b"ok")));
    let again = up.send_raw(&authority, &message, limit, true).await.expect("sent again and answered");
    assert_eq!(read(again).await, (200, Bytes::from_static(b"ok")));
    assert_eq!((accepted.load(Ordering::SeqCst), requests.load(Ordering::SeqCst)), (2, 3));
    assert_eq!((up.requests_replayed(), replays.get()), (1, 1), "counted, in the metric too");
    // A request that is not safe to repeat is not sent again: the failure is the caller's to answer.
    match up.send_raw(&authority, &message, limit, false).await {
        Err(UpstreamError::Protocol(m)) => assert!(m.contains("ended before its answer"), "{m}"),
        Err(e) => panic!("not the connection's end: {e}"),
        Ok(a) => panic!("answered: {}", a.head.status),
    }
    assert_eq!((accepted.load(Ordering::SeqCst), requests.load(Ordering::SeqCst)), (2, 4));
    assert_eq!(up.requests_replayed(), 1);
    task.abort();
}

#[tokio::test]
async fn a_body_dropped_before_its_end_closes_its_connection() {
    let server = Server::start().await;
    let up = upstream();
    let resp = up.send(server.get("/stream")).await.expect("send");
    let mut body = resp.into_body();
    let first = body.frame().await.expect("frame").expect("ok");
    assert_eq!(first.into_data().expect("data").len(), 1024);
    drop(body);
    // The half-read connection cannot carry another request; the next one opens a new connection.
    assert_eq!(text(&up, server.get("/ok")).await.0, 200);
    assert_eq!(server.accepted(), 2);
    assert_eq!(text(&up, server.get("/ok")).await.0, 200);
    assert_eq!(server.accepted(), 2, "the new connection is kept");
}

#[tokio::test]
async fn time_limits_and_refusals_say_what_failed() {
    let server = Server::start().await;
    let up = upstream();
    match up.send_within(server.get("/slow"), Duration::from_millis(100)).await {
        Err(UpstreamError::Timeout(100)) => {}
        other => panic!("expected a timeout, got {:?}", other.map(|r| r.status())),
    }
    // The timed-out exchange's connection is not reused half-way through an answer.
    assert_eq!(text(&up, server.get("/ok")).await.0, 200);
    assert_eq!(server.accepted(), 2);
    // Nothing listening: a connect error (the request was not sent, so another agent may be tried).
    let closed = std::net::TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr");
    let req = Request::get(format!("http://{closed}/ok")).body(Full::new(Bytes::new())).expect("request");
    assert!(matches!(up.send(req).await, Err(UpstreamError::Connect(_))));
    // Only http:// agents.
    let req = Request::get("https://127.0.0.1:1/ok").body(Full::new(Bytes::new())).expect("request");
    assert!(matches!(up.send(req).await, Err(UpstreamError::Connect(_))));
}

#[tokio::test]
async fn the_pool_keeps_at_most_its_limit_of_idle_connections() {
    let server = Server::start().await;
    let up = Upstream::new(Duration::from_secs(2), Duration::from_secs(5), 2);
    all_at_once(&up, &server, &(0..6).map(|i| format!("/slow?{i}")).collect::<Vec<_>>()).await;
    assert_eq!(server.accepted(), 6, "six requests at once, six connections");
    // Two were kept: two more at once reuse them, a third at the same time needs a new one.
    all_at_once(&up, &server, &(0..3).map(|i| format!("/slow?again{i}")).collect::<Vec<_>>()).await;
    assert_eq!(server.accepted(), 7);
}

#[tokio::test]
async fn a_connection_idle_past_the_pool_s_idle_timeout_is_not_reused() {
    let server = Server::start().await;
    let limits = PoolLimits { max_idle: 8, idle_timeout: Duration::from_millis(300) };
    let up = Upstream::counted(Duration::from_secs(2), Duration::from_secs(5), limits, Default::default());
    assert_eq!(text(&up, server.get("/ok")).await.0, 200);
    assert_eq!(text(&up, server.get("/ok")).await.0, 200);
    assert_eq!(server.accepted(), 1, "reused within the idle time");
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(text(&up, server.get("/ok")).await.0, 200);
    assert_eq!(server.accepted(), 2, "idle longer than the pool keeps a connection: a new one");
    // An idle timeout of 0 keeps no connection.
    let none = PoolLimits { max_idle: 8, idle_timeout: Duration::ZERO };
    let up = Upstream::counted(Duration::from_secs(2), Duration::from_secs(5), none, Default::default());
    assert_eq!(text(&up, server.get("/ok")).await.0, 200);
    assert_eq!(text(&up, server.get("/ok")).await.0, 200);
    assert_eq!(server.accepted(), 4);
}
