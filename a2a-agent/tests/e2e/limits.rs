//! The limits of `spec/PROTOCOL.md` §13 as configured in [`a2a_server::Limits`], over real connections: slow
//! clients, result retention, received executions, header and body sizes, long-poll and timeout bounds.

use std::sync::Arc;
use std::sync::atomic::AtomicUsize;
use std::time::{Duration, Instant};

use a2a_server::Limits;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::common::{SENDER, TestAgent, report_schema, standard, test_limits};

fn with_limits(change: impl FnOnce(&mut Limits)) -> a2a_server::AgentBuilder {
    let mut l = test_limits();
    change(&mut l);
    standard(Arc::new(AtomicUsize::new(0))).limits(l)
}

fn report() -> Value {
    json!({"title": "Broken pump", "timestamp": "2026-11-29T21:00:00Z"})
}

fn slow_schema() -> Value {
    json!({"type": "object", "properties": {"ms": {"type": "number"}}, "required": ["ms"]})
}

/// The `header_read_timeout_ms` of the slow-client tests.
const HEADER_READ_TIMEOUT: Duration = Duration::from_millis(300);

/// How long after [`HEADER_READ_TIMEOUT`] a slow client may still be connected on a loaded machine: the timeout
/// works (the client is disconnected, not never) when it is closed within ten times the timeout.
const CLOSED_WITHIN: Duration = Duration::from_millis(3_000);

/// Sends `bytes` on a new connection, then waits (up to `patience`) for the server to close it; returns what the
/// server sent and how long it took to close, counted from before the connect (so never less than the server's
/// timeout), or `None` if it kept the connection open.
async fn stall(addr: &str, bytes: &[u8], patience: Duration) -> Option<(Vec<u8>, Duration)> {
    let started = Instant::now();
    let mut s = TcpStream::connect(addr).await.expect("connect");
    s.write_all(bytes).await.expect("write");
    let mut got = Vec::new();
    match tokio::time::timeout(patience, s.read_to_end(&mut got)).await {
        Ok(_) => Some((got, started.elapsed())),
        Err(_) => None,
    }
}

#[tokio::test]
async fn client_stalling_in_its_request_head_is_disconnected_after_header_read_timeout_while_others_are_served() {
    // A longer timeout here than in the other slow-client tests: the others are answered while the slow clients
    // still hold their connections, which a loaded machine must manage within it.
    let timeout = Duration::from_secs(2);
    let t = Arc::new(TestAgent::start(with_limits(|l| l.header_read_timeout_ms = timeout.as_millis() as u64)).await);
    let addr = t.base.trim_start_matches("http://").to_owned();
    let heads: [(&str, String); 2] = [
        ("half a request line", "GET /a2a/capabil".to_owned()),
        ("partial headers", format!("POST /a2a/negotiate HTTP/1.1\r\nHost: {addr}\r\nA2A-Version: 0.3\r\nA2A-Sen")),
    ];
    let mut slow = Vec::new();
    for (what, head) in heads {
        let addr = addr.clone();
        slow.push((what, tokio::spawn(async move { stall(&addr, head.as_bytes(), timeout * 8).await })));
    }
    // Meanwhile the agent answers others: the slow clients are still connected when the answers are in.
    for _ in 0..5 {
        let a = t.get("/a2a/capabilities").await;
        assert_eq!(a.status, StatusCode::OK);
    }
    for (what, task) in &slow {
        assert!(!task.is_finished(), "{what}: the others were answered only after the slow client was disconnected");
    }
    for (what, task) in slow {
        let closed = task.await.expect("task");
        let (got, after) =
            closed.unwrap_or_else(|| panic!("{what}: the connection was still open after {:?}", timeout * 8));
        assert!(after >= timeout && after < timeout * 5, "{what}: closed after {after:?}, the timeout is {timeout:?}");
        // Nothing, or an HTTP error status: never a response to the unfinished request.
        assert!(got.is_empty() || got.starts_with(b"HTTP/1.1 4"), "{what}: {:?}", String::from_utf8_lossy(&got));
    }
}

#[tokio::test]
async fn terminal_execution_is_readable_until_its_retention_ends_then_unknown_execution() {
    let retention = Duration::from_millis(3_000);
    let t = TestAgent::start(with_limits(|l| l.result_retention_ms = retention.as_millis() as u64)).await;
    let neg = t.negotiated("submit_report", report_schema()).await;
    let exe = t.executed(&neg, report()).await;
    assert_eq!(t.confirm(&exe).await.status, StatusCode::ACCEPTED);
    let r = t.result(&exe, 5_000).await;
    assert_eq!((r.status, &r.body["status"]), (StatusCode::OK, &json!("succeeded")), "{}", r.body);
    let done = Instant::now();
    // Still there within the retention...
    let again = t.result(&exe, 0).await;
    assert_eq!(again.status, StatusCode::OK, "{}", again.body);
    assert!(done.elapsed() < retention * 2 / 3, "too slow to check within the retention: {:?}", done.elapsed());
    // ... and gone after it, without waiting for a purge.
    tokio::time::sleep((done + retention + Duration::from_millis(500)).saturating_duration_since(Instant::now())).await;
    let gone = t.result(&exe, 0).await;
    assert_eq!((gone.status, gone.code()), (StatusCode::NOT_FOUND, "unknown_execution"), "{}", gone.body);
    let c = t.confirm(&exe).await;
    assert_eq!(c.code(), "unknown_execution", "{}", c.body);
}

#[tokio::test]
async fn execute_beyond_max_received_executions_is_503_overloaded_with_retry_after() {
    let t = TestAgent::start(with_limits(|l| l.max_received_executions = 2)).await;
    let neg = t.negotiated("submit_report", report_schema()).await;
    let first = t.executed(&neg, report()).await;
    t.executed(&neg, report()).await;
    let refused = t.execute(&neg, report()).await;
    assert_eq!((refused.status, refused.code()), (StatusCode::SERVICE_UNAVAILABLE, "overloaded"), "{}", refused.body);
    assert!(refused.header("retry-after").is_some_and(|v| v.parse::<u64>().is_ok()), "{:?}", refused.headers);
    assert!(refused.header("content-type").is_some_and(|c| c.starts_with("application/json")));
    // The limit counts executions waiting for CONFIRM: confirming one makes room.
    assert_eq!(t.confirm(&first).await.status, StatusCode::ACCEPTED);
    assert_eq!(t.execute(&neg, report()).await.status, StatusCode::CREATED);
}

#[tokio::test]
async fn one_header_value_of_20_kib_is_431_headers_too_large_as_json() {
    let t = TestAgent::start(with_limits(|_| {})).await;
    let a = t.send(t.req(Method::GET, "/a2a/capabilities").header("X-Trace-Baggage", "b".repeat(20 * 1024))).await;
    assert_eq!((a.status, a.code()), (StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE, "headers_too_large"), "{}", a.body);
    assert!(a.header("content-type").is_some_and(|c| c.starts_with("application/json")));
    assert_eq!(a.body["error"]["details"]["max_header_bytes"], json!(16 * 1024));
    // The connection is not poisoned: the next request on the same client works.
    assert_eq!(t.get("/a2a/capabilities").await.status, StatusCode::OK);
}

#[tokio::test]
async fn chunked_body_larger_than_max_body_bytes_is_413_payload_too_large_as_json() {
    let t = TestAgent::start(with_limits(|l| l.max_body_bytes = 1024)).await;
    let addr = t.base.trim_start_matches("http://").to_owned();
    let mut s = TcpStream::connect(&addr).await.expect("connect");
    let mut request = format!(
        "POST /a2a/negotiate HTTP/1.1\r\nHost: {addr}\r\nA2A-Version: 0.3\r\nA2A-Sender-ID: {SENDER}\r\n\
         Content-Type: application/json\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
    )
    .into_bytes();
    // 8 chunks of 512 bytes: 4 KiB, no Content-Length.
    let body = format!(
        "{{\"target_capability\":\"submit_report\",\"proposed_schema\":{{\"type\":\"object\",\"description\":\"{}\"}}}}",
        "x".repeat(4000)
    );
    for chunk in body.as_bytes().chunks(512) {
        request.extend_from_slice(format!("{:x}\r\n", chunk.len()).as_bytes());
        request.extend_from_slice(chunk);
        request.extend_from_slice(b"\r\n");
    }
    request.extend_from_slice(b"0\r\n\r\n");
    s.write_all(&request).await.expect("write");
    let mut got = Vec::new();
    tokio::time::timeout(Duration::from_secs(5), s.read_to_end(&mut got)).await.expect("an answer within 5 s").ok();
    let text = String::from_utf8_lossy(&got);
    assert!(text.starts_with("HTTP/1.1 413"), "{text}");
    assert!(text.to_ascii_lowercase().contains("content-type: application/json"), "{text}");
    let json_start = text.find("\r\n\r\n").map(|i| i + 4).expect("a body");
    let body: Value = serde_json::from_str(text[json_start..].trim()).unwrap_or_else(|e| panic!("{e}: {text}"));
    assert_eq!(body["error"]["code"], json!("payload_too_large"), "{text}");
    assert_eq!(body["error"]["details"]["limit_bytes"], json!(1024));
}

/// LIM-3: a client still writing a body the agent refused as too large finishes writing, then reads the `413` and a
/// clean end of stream (no reset) — the agent read and dropped the rest before closing.
#[tokio::test]
async fn oversize_body_is_read_out_before_the_close_so_a_slow_writer_reads_its_413() {
    let t = TestAgent::start(with_limits(|l| l.max_body_bytes = 1024)).await;
    let addr = t.base.trim_start_matches("http://").to_owned();
    let mut s = TcpStream::connect(&addr).await.expect("connect");
    let body = vec![b'x'; 256 * 1024];
    let head = format!(
        "POST /a2a/fallback HTTP/1.1\r\nHost: {addr}\r\nA2A-Version: 0.3\r\nA2A-Sender-ID: {SENDER}\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    s.write_all(head.as_bytes()).await.expect("write the head");
    // The body in 16 KiB pieces with pauses: the agent has decided long before the last piece arrives.
    for piece in body.chunks(16 * 1024) {
        tokio::time::sleep(Duration::from_millis(10)).await;
        s.write_all(piece).await.expect("every piece of the body is accepted (no reset)");
    }
    let mut got = Vec::new();
    tokio::time::timeout(Duration::from_secs(5), s.read_to_end(&mut got))
        .await
        .expect("an answer within 5 s")
        .expect("a clean end of stream, not a reset");
    let text = String::from_utf8_lossy(&got);
    assert!(text.starts_with("HTTP/1.1 413"), "{text}");
    assert!(text.contains("payload_too_large"), "{text}");
}

/// LIM-3 is bounded: a declared body more than 8 MiB past the limit is refused at once, without reading it.
#[tokio::test]
async fn a_declared_body_far_over_the_limit_is_refused_without_reading_it() {
    let t = TestAgent::start(with_limits(|l| l.max_body_bytes = 1024)).await;
    let addr = t.base.trim_start_matches("http://").to_owned();
    let mut s = TcpStream::connect(&addr).await.expect("connect");
    let head = format!(
        "POST /a2a/fallback HTTP/1.1\r\nHost: {addr}\r\nA2A-Version: 0.3\r\nA2A-Sender-ID: {SENDER}\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        1024 + a2a_server::body::DRAIN_MAX_BYTES + 1
    );
    s.write_all(head.as_bytes()).await.expect("write the head");
    let started = Instant::now();
    let mut got = vec![0u8; 4096];
    let n = tokio::time::timeout(Duration::from_secs(5), s.read(&mut got)).await.expect("an answer").expect("read");
    let text = String::from_utf8_lossy(&got[..n]);
    assert!(text.starts_with("HTTP/1.1 413"), "{text}");
    assert!(started.elapsed() < a2a_server::body::DRAIN_MAX_TIME, "{:?}", started.elapsed());
}

#[tokio::test]
async fn wait_ms_above_max_wait_ms_is_lowered_to_max_wait_ms() {
    let t = TestAgent::start(with_limits(|l| l.max_wait_ms = 300)).await;
    let neg = t.negotiated("run_slow_task", slow_schema()).await;
    // The handler outlasts any wait here: the answer is the lowered long-poll's, with the execution still running.
    let exe = t.executed(&neg, json!({"ms": 30_000})).await;
    assert_eq!(t.confirm(&exe).await.status, StatusCode::ACCEPTED);
    let started = Instant::now();
    let r = t.result(&exe, 60_000).await;
    let took = started.elapsed();
    assert_eq!(r.body["status"], json!("running"), "{}", r.body);
    // Lowered to 300 ms: at least that (less the agent's millisecond clock), and far from the 60 s asked for (10 s:
    // ample on a loaded machine).
    assert!(took >= Duration::from_millis(290) && took < Duration::from_secs(10), "took {took:?}");
    t.post("/a2a/cancel", json!({"execution_id": exe})).await;
}

#[tokio::test]
async fn negotiate_with_timeout_ms_zero_is_400_invalid_request_and_above_the_maximum_is_lowered() {
    let t = TestAgent::start(with_limits(|l| l.max_timeout_ms = 60_000)).await;
    let body =
        |ms: u64| json!({"target_capability": "submit_report", "proposed_schema": report_schema(), "timeout_ms": ms});
    let zero = t.post("/a2a/negotiate", body(0)).await;
    assert_eq!((zero.status, zero.code()), (StatusCode::BAD_REQUEST, "invalid_request"), "{}", zero.body);
    assert_eq!(zero.body["error"]["details"]["member"], json!("timeout_ms"));
    let huge = t.post("/a2a/negotiate", body(10_000_000)).await;
    assert_eq!(huge.status, StatusCode::OK, "{}", huge.body);
    assert_eq!(huge.body["timeout_ms"], json!(60_000));
}

#[tokio::test]
async fn client_sending_nothing_or_only_the_first_byte_of_post_is_disconnected_after_header_read_timeout() {
    let t = TestAgent::start(with_limits(|l| l.header_read_timeout_ms = HEADER_READ_TIMEOUT.as_millis() as u64)).await;
    let addr = t.base.trim_start_matches("http://").to_owned();
    for (what, head) in [("no byte at all", ""), ("the first byte of POST", "P")] {
        let closed = stall(&addr, head.as_bytes(), CLOSED_WITHIN * 3).await;
        let (_, after) = closed.unwrap_or_else(|| panic!("{what}: still open after {:?}", CLOSED_WITHIN * 3));
        assert!(after >= HEADER_READ_TIMEOUT && after < CLOSED_WITHIN, "{what}: closed after {after:?}");
    }
}

#[tokio::test]
async fn idle_keep_alive_connection_is_closed_after_header_read_timeout() {
    let t = TestAgent::start(with_limits(|l| l.header_read_timeout_ms = HEADER_READ_TIMEOUT.as_millis() as u64)).await;
    let addr = t.base.trim_start_matches("http://").to_owned();
    let request = format!("GET /a2a/capabilities HTTP/1.1\r\nHost: {addr}\r\nA2A-Version: 0.3\r\n\r\n");
    // One complete request on a keep-alive connection, then silence: the connection must not stay open for ever.
    let closed = stall(&addr, request.as_bytes(), CLOSED_WITHIN * 3).await;
    let (got, after) = closed.expect("an idle keep-alive connection was still open long after the timeout");
    assert!(String::from_utf8_lossy(&got).starts_with("HTTP/1.1 200"), "{}", String::from_utf8_lossy(&got));
    assert!(after < CLOSED_WITHIN, "closed only after {after:?}");
}
