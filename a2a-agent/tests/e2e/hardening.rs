//! Raw-socket probes of the agent's HTTP/1.1 front and its memory bounds: every error has the JSON body of §12
//! (ERR-4), including the answers to heads hyper would refuse itself (LIM-9); bodies draw on a budget (LIM-7);
//! connections are capped (LIM-8).

use std::sync::Arc;
use std::sync::atomic::AtomicUsize;
use std::time::Duration;

use proptest::prelude::*;
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::common::{SENDER, TestAgent, free_port, standard, test_limits};

/// Sends `bytes` on a new connection and reads until the agent closes it (or 5 s pass): the raw answer.
async fn raw(addr: &str, bytes: &[u8]) -> Vec<u8> {
    raw_then(addr, bytes, false).await
}

/// [`raw`], closing the sending side after `bytes` when `half_close` (the agent answers, then closes).
async fn raw_then(addr: &str, bytes: &[u8], half_close: bool) -> Vec<u8> {
    let mut s = TcpStream::connect(addr).await.expect("connect");
    // The peer may close before it has read everything (it answered the head): a failed write is not the test's.
    let _ = s.write_all(bytes).await;
    if half_close {
        let _ = s.shutdown().await;
    }
    let mut got = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), s.read_to_end(&mut got)).await;
    got
}

/// The status and the JSON body of the first answer in `got`; panics with the answer when the body is not an
/// `ErrorBody`.
fn error_answer(got: &[u8]) -> (u16, Value) {
    let text = String::from_utf8_lossy(got);
    let status: u16 = text.get(9..12).and_then(|s| s.parse().ok()).unwrap_or_else(|| panic!("no status: {text:?}"));
    let (head, rest) = text.split_once("\r\n\r\n").unwrap_or_else(|| panic!("no head: {text:?}"));
    let len: usize = head
        .lines()
        .find_map(|l| l.to_ascii_lowercase().strip_prefix("content-length:").map(|v| v.trim().to_owned()))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no content-length: {text:?}"));
    assert!(head.to_ascii_lowercase().contains("content-type: application/json"), "{text:?}");
    let body: Value = serde_json::from_str(&rest[..len.min(rest.len())])
        .unwrap_or_else(|e| panic!("the body is not JSON ({e}): {text:?}"));
    assert!(body["error"]["code"].is_string(), "not an ErrorBody: {text:?}");
    (status, body)
}

fn addr(t: &TestAgent) -> String {
    t.base.trim_start_matches("http://").to_owned()
}

fn head(extra: &str) -> String {
    format!(
        "POST /a2a/negotiate HTTP/1.1\r\nHost: x\r\nA2A-Version: 0.3\r\nA2A-Sender-ID: {SENDER}\r\n\
         Content-Type: application/json\r\n{extra}\r\n"
    )
}

async fn agent() -> TestAgent {
    TestAgent::start(standard(Arc::new(AtomicUsize::new(0))).limits(test_limits())).await
}

/// The binary's router (`a2a_agent::app::app_router`: the agent, a JSON `404` everywhere else) on a free port: its
/// address and the agent (dropping it does not stop the server; the test process ends it).
async fn binary_router() -> String {
    let agent = standard(Arc::new(AtomicUsize::new(0))).limits(test_limits()).build().expect("agent");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr").to_string();
    let app = a2a_agent::app::app_router(&agent, None);
    let limits = agent.engine().limits().clone();
    tokio::spawn(async move {
        let _keep = agent;
        let _ = a2a_server::serve::serve(listener, app, &limits, std::future::pending(), Duration::ZERO).await;
    });
    addr
}

/// ERR-4, LIM-9: the heads hyper refused with an empty body are answered with the JSON error body.
#[tokio::test]
async fn malformed_heads_are_answered_with_the_json_error_body() {
    let t = agent().await;
    let a = addr(&t);
    let many: String = (0..200).map(|i| format!("X-F{i}: v\r\n")).collect();
    let probes: Vec<(&str, Vec<u8>, u16, &str)> = vec![
        (
            "two different Content-Lengths",
            format!("{}{{}}", head("Content-Length: 2\r\nContent-Length: 3\r\n")).into_bytes(),
            400,
            "invalid_request",
        ),
        ("200 header fields", head(&many).into_bytes(), 431, "headers_too_large"),
        (
            "a 100 KB URI",
            format!("GET /a2a/capabilities?{} HTTP/1.1\r\nHost: x\r\n\r\n", "q".repeat(100_000)).into_bytes(),
            431,
            "headers_too_large",
        ),
        (
            "Transfer-Encoding: chunked, identity",
            format!("{}0\r\n\r\n", head("Transfer-Encoding: chunked, identity\r\n")).into_bytes(),
            400,
            "invalid_request",
        ),
        ("obs-fold", head("X-Folded: a\r\n  b\r\nContent-Length: 0\r\n").into_bytes(), 400, "invalid_request"),
        (
            "a space before the colon",
            head("X-Spaced : a\r\nContent-Length: 0\r\n").into_bytes(),
            400,
            "invalid_request",
        ),
        (
            "Transfer-Encoding with Content-Length",
            format!("{}0\r\n\r\n", head("Transfer-Encoding: chunked\r\nContent-Length: 5\r\n")).into_bytes(),
            400,
            "invalid_request",
        ),
        ("HTTP/2.0 in the request line", b"GET / HTTP/2.0\r\nHost: x\r\n\r\n".to_vec(), 400, "invalid_request"),
    ];
    for (what, bytes, status, code) in probes {
        let got = raw(&a, &bytes).await;
        assert!(!got.is_empty(), "{what}: no answer");
        let (s, body) = error_answer(&got);
        assert_eq!((s, body["error"]["code"].as_str().unwrap_or("")), (status, code), "{what}: {body}");
    }
    // The agent still serves.
    assert_eq!(t.get("/a2a/capabilities").await.status, reqwest::StatusCode::OK);
}

/// A refused head after a served request on the same connection: the first answer is whole, then the JSON error.
#[tokio::test]
async fn a_refused_head_after_a_kept_alive_request_follows_its_answer() {
    let t = agent().await;
    let mut bytes = b"GET /a2a/capabilities HTTP/1.1\r\nHost: x\r\nA2A-Version: 0.3\r\n\r\n".to_vec();
    bytes.extend_from_slice(b"GET /a2a/capabilities HTTP/1.1\r\nHost: x\r\nBad Name: 1\r\n\r\n");
    let got = raw(&addr(&t), &bytes).await;
    let text = String::from_utf8_lossy(&got);
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    let second = text.find("HTTP/1.1 400").unwrap_or_else(|| panic!("no 400 after the 200: {text}"));
    let (status, _) = error_answer(&got[second..]);
    assert_eq!(status, 400);
}

/// Pipelined requests with chunked and sized bodies are followed to the next head (nothing valid is refused).
#[tokio::test]
async fn pipelined_requests_with_chunked_and_sized_bodies_are_all_served() {
    let t = agent().await;
    let body = r#"{"target_capability":"no_such","proposed_schema":{"type":"object"}}"#;
    let mut bytes = format!("{}{body}", head(&format!("Content-Length: {}\r\n", body.len()))).into_bytes();
    bytes.extend_from_slice(head("Transfer-Encoding: chunked\r\n").as_bytes());
    for c in body.as_bytes().chunks(7) {
        bytes.extend_from_slice(format!("{:x};ext=1\r\n", c.len()).as_bytes());
        bytes.extend_from_slice(c);
        bytes.extend_from_slice(b"\r\n");
    }
    bytes.extend_from_slice(b"0\r\nX-Trailer: 1\r\n\r\n");
    bytes.extend_from_slice(
        b"GET /a2a/capabilities HTTP/1.1\r\nHost: x\r\nA2A-Version: 0.3\r\nConnection: close\r\n\r\n",
    );
    let got = raw(&addr(&t), &bytes).await;
    let text = String::from_utf8_lossy(&got);
    assert_eq!(text.matches("HTTP/1.1 404").count(), 2, "{text}");
    assert_eq!(text.matches("HTTP/1.1 200").count(), 1, "{text}");
    assert!(!text.contains("HTTP/1.1 400"), "{text}");
}

/// One byte of `alphabet`-ish noise or a valid head's byte, for the property test.
fn mutated_head() -> impl Strategy<Value = Vec<u8>> {
    let base = head("Content-Length: 2\r\nX-A: b\r\n").into_bytes();
    let len = base.len();
    let edits = proptest::collection::vec(
        (
            0..len,
            prop_oneof![
                Just(b'\r'),
                Just(b'\n'),
                Just(b' '),
                Just(b':'),
                Just(b','),
                Just(b'\t'),
                Just(0u8),
                Just(0x7f),
                any::<u8>()
            ],
            0..3u8,
        ),
        1..6,
    );
    (Just(base), edits).prop_map(|(mut b, edits)| {
        for (at, byte, op) in edits {
            let at = at.min(b.len());
            match op {
                0 => b.insert(at, byte),
                1 if at < b.len() => b[at] = byte,
                _ if at < b.len() => {
                    b.remove(at);
                }
                _ => b.push(byte),
            }
        }
        b.extend_from_slice(b"{}");
        b
    })
}

/// ERR-4 as a property: whatever a mutated head becomes, an error answer (4xx/5xx) has the JSON error body.
/// 300 heads from a fixed seed (each run the same) against one agent.
#[tokio::test]
async fn a_mutated_head_never_gets_an_empty_error_body() {
    use proptest::strategy::ValueTree;
    let a = binary_router().await;
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let strategy = mutated_head();
    let mut errors = 0;
    for _ in 0..300 {
        let bytes = strategy.new_tree(&mut runner).expect("a case").current();
        let got = raw_then(&a, &bytes, true).await;
        if got.len() >= 12 && got.starts_with(b"HTTP/1.") && (got[9] == b'4' || got[9] == b'5') {
            errors += 1;
            let text = String::from_utf8_lossy(&bytes).into_owned();
            let r = std::panic::catch_unwind(|| error_answer(&got));
            assert!(r.is_ok(), "the head {text:?} got an error without the JSON body");
        }
    }
    assert!(errors > 50, "the mutations should produce refused heads ({errors} did)");
}

fn limited(change: impl FnOnce(&mut a2a_server::Limits)) -> a2a_server::AgentBuilder {
    let mut l = test_limits();
    change(&mut l);
    standard(Arc::new(AtomicUsize::new(0))).limits(l)
}

/// LIM-7: a body stalled after 3 KiB holds 3 KiB of the budget (not its declared 16 KiB); a second body that would
/// take the budget past its 4 KiB is refused `503 overloaded` with `Retry-After`; once the stalled connection
/// closes, the budget is whole again.
#[tokio::test]
async fn bodies_past_the_buffered_body_budget_are_refused_503_overloaded_until_it_is_given_back() {
    let t = TestAgent::start(limited(|l| {
        l.max_body_bytes = 64 * 1024;
        l.max_buffered_body_bytes = 4096;
    }))
    .await;
    let a = addr(&t);
    let mut stalled = TcpStream::connect(&a).await.expect("connect");
    stalled.write_all(head("Content-Length: 16384\r\n").as_bytes()).await.expect("head");
    stalled.write_all(&[b' '; 3072]).await.expect("3 KiB");
    // The agent has read the 3 KiB once a small body still fits beside them.
    let small = format!("{}{{}}", head("Content-Length: 2\r\nConnection: close\r\n"));
    let until = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let got = raw(&a, small.as_bytes()).await;
        // `{}` is not a NEGOTIATE message: 400 when the body was read.
        assert!(got.starts_with(b"HTTP/1.1 400"), "{}", String::from_utf8_lossy(&got));
        let big = format!("{}{}", head("Content-Length: 2048\r\nConnection: close\r\n"), " ".repeat(2048));
        let got = raw(&a, big.as_bytes()).await;
        if got.starts_with(b"HTTP/1.1 503") {
            let (_, body) = error_answer(&got);
            assert_eq!(body["error"]["code"], "overloaded", "{body}");
            assert!(String::from_utf8_lossy(&got).to_ascii_lowercase().contains("retry-after: 1"));
            break;
        }
        assert!(std::time::Instant::now() < until, "never refused: {}", String::from_utf8_lossy(&got));
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    drop(stalled);
    let until = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let big = format!("{}{}", head("Content-Length: 2048\r\nConnection: close\r\n"), " ".repeat(2048));
        let got = raw(&a, big.as_bytes()).await;
        if got.starts_with(b"HTTP/1.1 400") {
            break;
        }
        assert!(std::time::Instant::now() < until, "the budget was not given back: {}", String::from_utf8_lossy(&got));
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(t.agent.engine().limits().max_buffered_body_bytes, 4096);
}

/// LIM-8: at `max_connections` the agent stops accepting; a waiting connection is served once one closes.
#[tokio::test]
async fn connections_past_max_connections_wait_until_one_closes() {
    let t = TestAgent::start(limited(|l| l.max_connections = 2)).await;
    let a = addr(&t);
    let mut held = Vec::new();
    for _ in 0..2 {
        let mut s = TcpStream::connect(&a).await.expect("connect");
        s.write_all(b"GET /a2a/capabilities HTTP/1.1\r\nHost: x\r\nA2A-Version: 0.3\r\n\r\n").await.expect("write");
        let mut buf = [0u8; 12];
        s.read_exact(&mut buf).await.expect("answered while under the limit");
        held.push(s);
    }
    let mut third = TcpStream::connect(&a).await.expect("connect (the backlog takes it)");
    third
        .write_all(b"GET /a2a/capabilities HTTP/1.1\r\nHost: x\r\nA2A-Version: 0.3\r\nConnection: close\r\n\r\n")
        .await
        .expect("write");
    let mut buf = [0u8; 12];
    let early = tokio::time::timeout(Duration::from_millis(700), third.read_exact(&mut buf)).await;
    assert!(early.is_err(), "a third connection was served beside two held ones: {:?}", String::from_utf8_lossy(&buf));
    drop(held.pop());
    tokio::time::timeout(Duration::from_secs(10), third.read_exact(&mut buf))
        .await
        .expect("served once a connection closed")
        .expect("read");
    assert_eq!(&buf, b"HTTP/1.1 200");
}

/// LIM-7, LIM-8: `serve_threads` (what the binary serves with) serves on its own single-threaded runtimes, holds the
/// process's connection limit across all of them, lets a request in flight at the shutdown finish, and keeps running
/// what requests started until the caller releases it (after draining the agent).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serving_threads_share_the_connection_limit_and_keep_what_requests_started_until_released() {
    use axum::routing::{get, post};
    use std::sync::atomic::{AtomicBool, Ordering};
    let started = Arc::new(AtomicBool::new(false));
    let done = started.clone();
    let app = axum::Router::new()
        .route("/thread", get(|| async { std::thread::current().name().unwrap_or("").to_owned() }))
        .route(
            "/slow",
            get(|| async {
                tokio::time::sleep(Duration::from_millis(800)).await;
                "slow"
            }),
        )
        .route(
            "/start",
            post(move || {
                let done = done.clone();
                async move {
                    tokio::spawn(async move {
                        tokio::time::sleep(Duration::from_millis(1500)).await;
                        done.store(true, Ordering::Release);
                    });
                    "started"
                }
            }),
        );
    let mut limits = test_limits();
    limits.max_connections = 2;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let a = listener.local_addr().expect("addr").to_string();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let serving = tokio::spawn(async move {
        let shutdown = async {
            let _ = stopped.await;
        };
        a2a_server::serve::serve_threads(listener, app, &limits, shutdown, Duration::from_secs(5), 2).await
    });
    // Two connections held open (whichever threads accepted them): a third waits, on every thread.
    let ask = |path: &str, method: &str| format!("{method} {path} HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n");
    let mut held = Vec::new();
    for _ in 0..2 {
        let mut s = TcpStream::connect(&a).await.expect("connect");
        s.write_all(ask("/thread", "GET").as_bytes()).await.expect("write");
        let mut buf = [0u8; 512];
        let n = tokio::time::timeout(Duration::from_secs(10), s.read(&mut buf)).await.expect("answered").expect("read");
        let text = String::from_utf8_lossy(&buf[..n]);
        assert!(text.starts_with("HTTP/1.1 200") && text.contains("a2a-serve-"), "served on a serving thread: {text}");
        held.push(s);
    }
    let mut third = TcpStream::connect(&a).await.expect("connect (the backlog takes it)");
    third.write_all(ask("/thread", "GET").as_bytes()).await.expect("write");
    let mut buf = [0u8; 12];
    let early = tokio::time::timeout(Duration::from_millis(700), third.read_exact(&mut buf)).await;
    assert!(early.is_err(), "a third connection was served beside two held ones: {:?}", String::from_utf8_lossy(&buf));
    drop(held.pop());
    tokio::time::timeout(Duration::from_secs(10), third.read_exact(&mut buf))
        .await
        .expect("served once a connection closed")
        .expect("read");
    assert_eq!(&buf, b"HTTP/1.1 200");
    drop((held, third));
    // A request starts a task; another is in flight when the shutdown comes: it is answered, then serving ends.
    let got = raw(&a, ask("/start", "POST").replace("\r\n\r\n", "\r\nConnection: close\r\n\r\n").as_bytes()).await;
    assert!(got.starts_with(b"HTTP/1.1 200"), "{}", String::from_utf8_lossy(&got));
    let slow = tokio::spawn({
        let a = a.clone();
        async move { raw(&a, ask("/slow", "GET").replace("\r\n\r\n", "\r\nConnection: close\r\n\r\n").as_bytes()).await }
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    let _ = stop.send(());
    let threads = tokio::time::timeout(Duration::from_secs(10), serving)
        .await
        .expect("serving ends after the grace")
        .expect("task")
        .expect("served");
    let slow = slow.await.expect("task");
    assert!(
        slow.starts_with(b"HTTP/1.1 200"),
        "the request in flight was answered: {}",
        String::from_utf8_lossy(&slow)
    );
    assert!(TcpStream::connect(&a).await.is_err(), "no longer accepting");
    // The task the request started still runs on its serving thread until released.
    let until = std::time::Instant::now() + Duration::from_secs(10);
    while !started.load(Ordering::Acquire) {
        assert!(std::time::Instant::now() < until, "the task a request started was stopped before the release");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    drop(threads);
}

fn admin_config(dir: &crate::common::TempDir, admin: &str) -> std::path::PathBuf {
    dir.write(
        "agent.toml",
        &format!(
            r#"
[agent]
did = "did:web:agent.example.com"

{admin}

[[capabilities]]
name = "echo_message"
description = "echo"
auth_requirement = "none"
input_schema = {{ type = "object" }}
handler = {{ kind = "echo" }}
"#
        ),
    )
}

async fn get(url: &str, token: Option<&str>) -> (u16, String) {
    let mut rb = reqwest::Client::new().get(url);
    if let Some(t) = token {
        rb = rb.bearer_auth(t);
    }
    let r = rb.send().await.expect("request");
    (r.status().as_u16(), r.text().await.expect("text"))
}

/// OPS-1: `/metrics` is closed by default, served behind `[admin] token_env`'s token, or on `[admin] listen` only.
#[tokio::test]
async fn metrics_are_closed_by_default_and_open_only_with_the_admin_token_or_on_the_admin_listener() {
    use crate::server_process::ServerProcess;
    let dir = crate::common::TempDir::new("ops1-closed");
    let server = ServerProcess::start(&admin_config(&dir, ""));
    let (status, body) = get(&format!("{}/metrics", server.base), None).await;
    assert_eq!(status, 404, "{body}");
    assert!(body.contains("\"not_found\""), "{body}");
    drop(server);

    let dir = crate::common::TempDir::new("ops1-token");
    let server = ServerProcess::start_with_env(
        &admin_config(&dir, "[admin]\ntoken_env = \"A2A_TEST_ADMIN_TOKEN\""),
        &[("A2A_TEST_ADMIN_TOKEN", "operator-token-1")],
    );
    let url = format!("{}/metrics", server.base);
    let (status, body) = get(&url, None).await;
    assert_eq!(status, 401, "{body}");
    assert!(body.contains("\"auth_required\""), "{body}");
    let (status, body) = get(&url, Some("operator-token-2")).await;
    assert_eq!(status, 401, "{body}");
    assert!(body.contains("\"auth_invalid\""), "{body}");
    let (status, body) = get(&url, Some("operator-token-1")).await;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("a2a_"), "{body}");
    drop(server);

    let dir = crate::common::TempDir::new("ops1-listen");
    let port = free_port();
    let server = ServerProcess::start(&admin_config(&dir, &format!("[admin]\nlisten = \"127.0.0.1:{port}\"")));
    let (status, _) = get(&format!("{}/metrics", server.base), None).await;
    assert_eq!(status, 404, "the agent's own listener does not serve /metrics");
    let (status, body) = get(&format!("http://127.0.0.1:{port}/metrics"), None).await;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("a2a_"), "{body}");
}
