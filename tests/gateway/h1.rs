//! The gateway's own HTTP/1.1 (`a2a_gateway::h1`), spoken to over raw TCP: keep-alive and pipelining, chunked
//! bodies, `Expect: 100-continue`, HTTP/1.0, refusals of ambiguous framing (request smuggling) and of oversize or
//! malformed heads, the header and body read timeouts, HTTP/2 with prior knowledge, and a graceful shutdown.

use std::time::{Duration, Instant};

use a2a_core::capability::AuthRequirement;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::common::*;

/// An answer read off the wire.
#[derive(Debug)]
struct Raw {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Raw {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }
    fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or(Value::Null)
    }
    fn code(&self) -> String {
        self.json()["error"]["code"].as_str().unwrap_or("").to_owned()
    }
}

/// A client connection that reads answers as they are framed (Content-Length, chunked, or until the close).
struct Conn {
    stream: TcpStream,
    buf: Vec<u8>,
}

impl Conn {
    async fn open(base: &str) -> Conn {
        let addr = base.trim_start_matches("http://");
        Conn { stream: TcpStream::connect(addr).await.expect("connect"), buf: Vec::new() }
    }

    async fn send(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).await.expect("write");
    }

    /// Reads more bytes; `false` at the end of the connection.
    async fn more(&mut self) -> bool {
        let mut chunk = [0u8; 8192];
        match tokio::time::timeout(Duration::from_secs(20), self.stream.read(&mut chunk)).await {
            Ok(Ok(0)) | Ok(Err(_)) => false,
            Ok(Ok(n)) => {
                self.buf.extend_from_slice(&chunk[..n]);
                true
            }
            Err(_) => panic!("no answer within 20 s"),
        }
    }

    /// The next answer (an interim `100 Continue` is an answer too).
    async fn answer(&mut self) -> Raw {
        let (status, headers, len) = loop {
            let mut hs = [httparse::EMPTY_HEADER; 64];
            let mut r = httparse::Response::new(&mut hs);
            if let Ok(httparse::Status::Complete(len)) = r.parse(&self.buf) {
                let headers: Vec<(String, String)> = r
                    .headers
                    .iter()
                    .map(|h| (h.name.to_owned(), String::from_utf8_lossy(h.value).into_owned()))
                    .collect();
                break (r.code.expect("status"), headers, len);
            }
            assert!(
                self.more().await,
                "the connection ended before an answer: {:?}",
                String::from_utf8_lossy(&self.buf)
            );
        };
        self.buf.drain(..len);
        let mut raw = Raw { status, headers, body: Vec::new() };
        if status < 200 || status == 204 || status == 304 {
            return raw;
        }
        if raw.header("transfer-encoding").is_some_and(|t| t.eq_ignore_ascii_case("chunked")) {
            loop {
                let line_end = loop {
                    if let Some(i) = self.buf.windows(2).position(|w| w == b"\r\n") {
                        break i;
                    }
                    assert!(self.more().await, "cut in a chunk size");
                };
                let size_text = String::from_utf8_lossy(&self.buf[..line_end]).into_owned();
                let size = usize::from_str_radix(size_text.split(';').next().unwrap_or("").trim(), 16).expect("hex");
                self.buf.drain(..line_end + 2);
                while self.buf.len() < size + 2 {
                    assert!(self.more().await, "cut in a chunk");
                }
                if size == 0 {
                    self.buf.drain(..2);
                    return raw;
                }
                raw.body.extend_from_slice(&self.buf[..size]);
                self.buf.drain(..size + 2);
            }
        }
        match raw.header("content-length").map(|v| v.trim().parse::<usize>().expect("length")) {
            Some(n) => {
                while self.buf.len() < n {
                    assert!(self.more().await, "cut in a body");
                }
                raw.body = self.buf.drain(..n).collect();
            }
            None => {
                while self.more().await {}
                raw.body = std::mem::take(&mut self.buf);
            }
        }
        raw
    }

    /// The answer to a `HEAD`: its head only, whatever length it announces.
    async fn answer_to_head(&mut self) -> Raw {
        loop {
            let mut hs = [httparse::EMPTY_HEADER; 64];
            let mut r = httparse::Response::new(&mut hs);
            if let Ok(httparse::Status::Complete(len)) = r.parse(&self.buf) {
                let headers = r
                    .headers
                    .iter()
                    .map(|h| (h.name.to_owned(), String::from_utf8_lossy(h.value).into_owned()))
                    .collect();
                let status = r.code.expect("status");
                self.buf.drain(..len);
                return Raw { status, headers, body: Vec::new() };
            }
            assert!(self.more().await, "the connection ended before an answer");
        }
    }

    /// Whether the gateway closes the connection (read returns its end) within `within`.
    async fn closed_within(&mut self, within: Duration) -> bool {
        let mut chunk = [0u8; 1024];
        matches!(tokio::time::timeout(within, self.stream.read(&mut chunk)).await, Ok(Ok(0)) | Ok(Err(_)))
    }
}

fn request(method: &str, target: &str, extra: &str, body: &str) -> Vec<u8> {
    let mut r =
        format!("{method} {target} HTTP/1.1\r\nHost: gw\r\nA2A-Version: 0.3\r\nA2A-Sender-ID: {CLIENT}\r\n{extra}");
    if !body.is_empty() {
        r.push_str(&format!("Content-Type: application/json\r\nContent-Length: {}\r\n", body.len()));
    }
    r.push_str("\r\n");
    r.push_str(body);
    r.into_bytes()
}

fn negotiate_body() -> String {
    json!({"target_capability": "submit_report", "proposed_schema": {"type": "object", "properties": {"title": {"type": "string"}}, "required": ["title"]}}).to_string()
}

async fn setup(extra: &str) -> (World, TestAgent, TestGateway) {
    let world = World::new();
    let agent = TestAgent::start("agent-h1", vec![decl("submit_report", AuthRequirement::None)], &world);
    let gw = TestGateway::start(&[&agent], &world, extra).await;
    (world, agent, gw)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pipelined_requests_on_one_kept_alive_connection_are_answered_in_order() {
    let (_w, _agent, gw) = setup("").await;
    let mut c = Conn::open(&gw.base).await;
    let mut all = request("OPTIONS", "/a2a", "", "");
    all.extend(request("GET", "/a2a/capabilities", "", ""));
    all.extend(request("POST", "/a2a/negotiate", "", &negotiate_body()));
    all.extend(request("GET", "/a2a/nowhere", "", ""));
    c.send(&all).await;
    let d = c.answer().await;
    assert_eq!(d.status, 204);
    assert_eq!(d.header("a2a-sender-id"), Some(GATEWAY));
    assert!(d.header("date").is_some(), "every answer has a Date");
    let caps = c.answer().await;
    assert_eq!(caps.status, 200);
    assert_eq!(caps.json()["agent"]["id"], GATEWAY);
    let n = c.answer().await;
    assert_eq!(n.status, 200, "{:?}", n.json());
    assert!(n.json()["negotiation_id"].is_string());
    assert_eq!(n.header("a2a-negotiation-id"), n.json()["negotiation_id"].as_str());
    let probe = c.answer().await;
    assert_eq!((probe.status, probe.code().as_str()), (404, "not_found"));
    // Still open.
    c.send(&request("OPTIONS", "/a2a", "", "")).await;
    assert_eq!(c.answer().await.status, 204);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chunked_body_is_decoded_and_forwarded_whole() {
    let (_w, _agent, gw) = setup("").await;
    let mut c = Conn::open(&gw.base).await;
    let body = negotiate_body();
    let (a, b) = body.split_at(7);
    let chunked = format!("{:x};ext=1\r\n{a}\r\n{:x}\r\n{b}\r\n0\r\nX-Trailer: t\r\n\r\n", a.len(), b.len());
    let mut r =
        request("POST", "/a2a/negotiate", "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n", "");
    r.extend_from_slice(chunked.as_bytes());
    // Sent in small pieces: the decoder must not depend on how the bytes arrive.
    for piece in r.chunks(5) {
        c.send(piece).await;
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let n = c.answer().await;
    assert_eq!(n.status, 200, "{:?}", n.json());
    let neg = n.json()["negotiation_id"].as_str().expect("id").to_owned();
    let payload = json!({"title": "chunked ✓"}).to_string();
    let chunked = format!("{:x}\r\n{payload}\r\n0\r\n\r\n", payload.len());
    let mut r = request(
        "POST",
        "/a2a/execute",
        &format!("A2A-Negotiation-ID: {neg}\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n"),
        "",
    );
    r.extend_from_slice(chunked.as_bytes());
    c.send(&r).await;
    let e = c.answer().await;
    assert_eq!(e.status, 201, "{:?}", e.json());
    let id = e.json()["execution_id"].as_str().expect("id").to_owned();
    c.send(&request("POST", "/a2a/confirm", "", &json!({"execution_id": id}).to_string())).await;
    assert_eq!(c.answer().await.status, 202);
    let seg = a2a_core::execution_id::ExecutionId::parse(&id).expect("id").to_path_segment();
    c.send(&request("GET", &format!("/a2a/result/{seg}?wait_ms=10000"), "", "")).await;
    let r = c.answer().await;
    assert_eq!(r.json()["result"]["payload"]["title"], "chunked ✓", "{:?}", r.json());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expect_continue_gets_a_go_ahead_and_a_body_declared_over_the_limit_gets_413_without_one() {
    let (_w, _agent, gw) = setup("[limits]\nmax_body_bytes = 4096\n").await;
    let mut c = Conn::open(&gw.base).await;
    let body = negotiate_body();
    let head = format!(
        "POST /a2a/negotiate HTTP/1.1\r\nHost: gw\r\nA2A-Version: 0.3\r\nA2A-Sender-ID: {CLIENT}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nExpect: 100-continue\r\n\r\n",
        body.len()
    );
    c.send(head.as_bytes()).await;
    let go = c.answer().await;
    assert_eq!(go.status, 100, "the go-ahead comes before the body is sent");
    c.send(body.as_bytes()).await;
    assert_eq!(c.answer().await.status, 200);

    let mut c = Conn::open(&gw.base).await;
    let head = format!(
        "POST /a2a/negotiate HTTP/1.1\r\nHost: gw\r\nA2A-Version: 0.3\r\nA2A-Sender-ID: {CLIENT}\r\nContent-Type: application/json\r\nContent-Length: 100000\r\nExpect: 100-continue\r\n\r\n"
    );
    c.send(head.as_bytes()).await;
    let refused = c.answer().await;
    assert_eq!((refused.status, refused.code().as_str()), (413, "payload_too_large"));
    assert_eq!(refused.json()["error"]["details"]["limit_bytes"], 4096);
    assert!(c.closed_within(Duration::from_secs(5)).await, "the body was never sent: the connection ends");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ambiguous_framing_is_refused_at_the_edge_and_the_connection_closed() {
    let (_w, agent, gw) = setup("").await;
    let http = reqwest::Client::new();
    let before = agent.requests(&http).await;
    let body = negotiate_body();
    let cases = [
        // Request smuggling: which length would the next hop use?
        format!("Content-Length: {}\r\nTransfer-Encoding: chunked\r\n", body.len()),
        format!("Content-Length: {}\r\nContent-Length: {}\r\n", body.len(), body.len() + 1),
        "Content-Length: -1\r\n".to_owned(),
        "Content-Length: 0x10\r\n".to_owned(),
        "Transfer-Encoding: chunked, chunked\r\n".to_owned(),
        // GW-20: a Transfer-Encoding that names nothing, beside a Content-Length: neither may be read as absent.
        format!("Transfer-Encoding: \r\nContent-Length: {}\r\n", body.len()),
        format!("Transfer-Encoding: ,\r\nContent-Length: {}\r\n", body.len()),
        format!("Transfer-Encoding: , ,\r\nContent-Length: {}\r\n", body.len()),
        "Transfer-Encoding: chunked, gzip\r\n".to_owned(),
    ];
    for framing in &cases {
        let mut c = Conn::open(&gw.base).await;
        let head = format!(
            "POST /a2a/negotiate HTTP/1.1\r\nHost: gw\r\nA2A-Version: 0.3\r\nA2A-Sender-ID: {CLIENT}\r\nContent-Type: application/json\r\n{framing}\r\n{body}"
        );
        c.send(head.as_bytes()).await;
        let a = c.answer().await;
        assert_eq!((a.status, a.code().as_str()), (400, "invalid_request"), "{framing:?}: {:?}", a.json());
        assert_eq!(a.header("connection"), Some("close"), "{framing:?}");
        assert!(c.closed_within(Duration::from_secs(5)).await, "{framing:?}: the connection ends");
    }
    // HTTP/1.0 has no chunked coding.
    let mut c = Conn::open(&gw.base).await;
    c.send(b"POST /a2a/negotiate HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n").await;
    assert_eq!(c.answer().await.status, 400);
    assert_eq!(agent.requests(&http).await, before, "none reached the agent");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn heads_beyond_the_limits_and_heads_that_are_not_http_are_refused_as_json() {
    let (_w, _agent, gw) = setup("[limits]\nmax_header_bytes = 4096\nmax_headers = 16\n").await;
    // Over the configured limits (but under twice them): the proxy's 431 with the limits.
    let mut c = Conn::open(&gw.base).await;
    let extra: String = (0..20).map(|i| format!("X-Extra-{i}: {i}\r\n")).collect();
    c.send(&request("OPTIONS", "/a2a", &extra, "")).await;
    let a = c.answer().await;
    assert_eq!((a.status, a.code().as_str()), (431, "headers_too_large"), "{:?}", a.json());
    assert_eq!(a.json()["error"]["details"]["max_headers"], 16);
    // Far over (twice the limits): refused by the connection, which then closes.
    for extra in [format!("X-Big: {}\r\n", "a".repeat(9000)), (0..40).map(|i| format!("X-{i}: {i}\r\n")).collect()] {
        let mut c = Conn::open(&gw.base).await;
        c.send(&request("OPTIONS", "/a2a", &extra, "")).await;
        let a = c.answer().await;
        assert_eq!((a.status, a.code().as_str()), (431, "headers_too_large"));
        assert!(c.closed_within(Duration::from_secs(5)).await);
    }
    for garbage in [
        &b"GARBAGE\r\n\r\n"[..],
        b"CONNECT gw.example:443 HTTP/1.1\r\nHost: x\r\n\r\n",
        b"GET /a2a HTTP/1.1\r\nBad Name: x\r\n\r\n",
    ] {
        let mut c = Conn::open(&gw.base).await;
        c.send(garbage).await;
        let a = c.answer().await;
        assert_eq!((a.status, a.code().as_str()), (400, "invalid_request"), "{:?}", String::from_utf8_lossy(garbage));
        assert!(a.json()["error"]["message"].as_str().is_some_and(|m| m.contains("HTTP/1.1")));
        assert!(c.closed_within(Duration::from_secs(5)).await);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_head_is_cut_at_the_header_timeout_and_a_slow_body_gets_408() {
    let (_w, _agent, gw) =
        setup("[limits]\nheader_read_timeout_ms = 300\nbody_read_timeout_ms = 300\nkeepalive_timeout_ms = 1500\n")
            .await;
    // Slowloris: half a head, then nothing.
    let mut c = Conn::open(&gw.base).await;
    c.send(b"OPTIONS /a2a HTTP/1.1\r\nHost: gw\r\n").await;
    let t = Instant::now();
    assert!(c.closed_within(Duration::from_secs(10)).await, "the connection is closed");
    assert!(t.elapsed() >= Duration::from_millis(250), "not before the timeout: {:?}", t.elapsed());
    // A kept-alive connection waits for its next request for the keep-alive time (1.5 s), not the header time:
    // a request sent after 0.6 s idle is served, and the connection is closed once idle for the keep-alive time.
    let mut c = Conn::open(&gw.base).await;
    c.send(&request("OPTIONS", "/a2a", "", "")).await;
    assert_eq!(c.answer().await.status, 204);
    // An empty line between requests (RFC 9112 §2.2) is not the start of a head: the keep-alive time still applies.
    c.send(b"\r\n").await;
    tokio::time::sleep(Duration::from_millis(600)).await;
    c.send(&request("OPTIONS", "/a2a", "", "")).await;
    assert_eq!(c.answer().await.status, 204, "still open after twice the header time idle");
    let t = Instant::now();
    assert!(c.closed_within(Duration::from_secs(10)).await, "idle connections are closed");
    // (Well above the 0.3 s header time; the clock started as the answer was written, before `t`.)
    assert!(t.elapsed() >= Duration::from_millis(1000), "at the keep-alive time: {:?}", t.elapsed());
    // Once a head starts on a kept-alive connection, the header time applies again.
    let mut c = Conn::open(&gw.base).await;
    c.send(&request("OPTIONS", "/a2a", "", "")).await;
    assert_eq!(c.answer().await.status, 204);
    c.send(b"OPTIONS /a2a HTTP/1.1\r\nHost: gw\r\n").await;
    let t = Instant::now();
    assert!(c.closed_within(Duration::from_secs(10)).await, "a slow head is cut");
    assert!(
        t.elapsed() < Duration::from_millis(1400),
        "at the header time, not the keep-alive time: {:?}",
        t.elapsed()
    );
    // A body that stops halfway.
    let mut c = Conn::open(&gw.base).await;
    c.send(
        format!("POST /a2a/negotiate HTTP/1.1\r\nHost: gw\r\nA2A-Version: 0.3\r\nA2A-Sender-ID: {CLIENT}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{{\"target").as_bytes(),
    )
    .await;
    let a = c.answer().await;
    assert_eq!((a.status, a.code().as_str()), (408, "request_timeout"), "{:?}", a.json());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_keepalive_timeout_of_zero_closes_each_connection_after_its_answer() {
    let (_w, _agent, gw) = setup("[limits]\nkeepalive_timeout_ms = 0\n").await;
    let mut c = Conn::open(&gw.base).await;
    c.send(&request("OPTIONS", "/a2a", "", "")).await;
    let a = c.answer().await;
    assert_eq!((a.status, a.header("connection")), (204, Some("close")));
    assert!(c.closed_within(Duration::from_secs(5)).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_1_0_callers_get_their_connection_closed_unless_they_ask_to_keep_it() {
    let (_w, _agent, gw) = setup("").await;
    let mut c = Conn::open(&gw.base).await;
    c.send(format!("OPTIONS /a2a HTTP/1.0\r\nA2A-Version: 0.3\r\nA2A-Sender-ID: {CLIENT}\r\n\r\n").as_bytes()).await;
    let a = c.answer().await;
    assert_eq!(a.status, 204);
    assert_eq!(a.header("connection"), Some("close"));
    assert!(c.closed_within(Duration::from_secs(5)).await);
    let mut c = Conn::open(&gw.base).await;
    let keep = format!(
        "OPTIONS /a2a HTTP/1.0\r\nConnection: keep-alive\r\nA2A-Version: 0.3\r\nA2A-Sender-ID: {CLIENT}\r\n\r\n"
    );
    c.send(keep.as_bytes()).await;
    assert_eq!(c.answer().await.status, 204);
    c.send(keep.as_bytes()).await;
    assert_eq!(c.answer().await.status, 204, "kept alive as asked");
    // `Connection: close` from an HTTP/1.1 caller.
    let mut c = Conn::open(&gw.base).await;
    c.send(&request("OPTIONS", "/a2a", "Connection: close\r\n", "")).await;
    let a = c.answer().await;
    assert_eq!(a.header("connection"), Some("close"));
    assert!(c.closed_within(Duration::from_secs(5)).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http2_with_prior_knowledge_is_served_by_the_same_request_path() {
    let (_w, _agent, gw) = setup("").await;
    let stream = TcpStream::connect(gw.base.trim_start_matches("http://")).await.expect("connect");
    let (mut send, conn) = hyper::client::conn::http2::handshake(
        hyper_util::rt::TokioExecutor::new(),
        hyper_util::rt::TokioIo::new(stream),
    )
    .await
    .expect("h2 handshake");
    tokio::spawn(conn);
    let req = |method: &str, path: &str, body: String| {
        let mut b = http::Request::builder()
            .method(method)
            .uri(format!("{}{path}", gw.base))
            .header("a2a-version", "0.3")
            .header("a2a-sender-id", CLIENT);
        if !body.is_empty() {
            b = b.header("content-type", "application/json");
        }
        b.body(http_body_util::Full::new(bytes::Bytes::from(body))).expect("request")
    };
    let d = send.send_request(req("OPTIONS", "/a2a", String::new())).await.expect("discover");
    assert_eq!(d.status(), 204);
    assert_eq!(d.headers()["a2a-sender-id"], GATEWAY);
    assert_eq!(d.version(), http::Version::HTTP_2);
    let n = send.send_request(req("POST", "/a2a/negotiate", negotiate_body())).await.expect("negotiate");
    assert_eq!(n.status(), 200);
    use http_body_util::BodyExt;
    let body = n.into_body().collect().await.expect("body").to_bytes();
    let v: Value = serde_json::from_slice(&body).expect("json");
    assert!(v["negotiation_id"].is_string(), "{v}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shutdown_closes_idle_connections_and_lets_the_request_in_flight_finish() {
    let (_w, _agent, mut gw) = setup("").await;
    let c = Caller::new(&gw.base);
    let n = c
        .send("POST", "/a2a/negotiate", &[], Some(&serde_json::from_str(&negotiate_body()).expect("json")), Sign::No)
        .await;
    let neg = n.body["negotiation_id"].as_str().expect("id").to_owned();
    let e =
        c.send("POST", "/a2a/execute", &[("a2a-negotiation-id", &neg)], Some(&json!({"title": "t"})), Sign::No).await;
    let id = e.body["execution_id"].as_str().expect("id").to_owned();
    let seg = a2a_core::execution_id::ExecutionId::parse(&id).expect("id").to_path_segment();
    let mut idle = Conn::open(&gw.base).await;
    idle.send(&request("OPTIONS", "/a2a", "", "")).await;
    assert_eq!(idle.answer().await.status, 204);
    // Unconfirmed, so the long-poll waits its whole second.
    let mut busy = Conn::open(&gw.base).await;
    busy.send(&request("GET", &format!("/a2a/result/{seg}?wait_ms=1000"), "", "")).await;
    // Stopped only once the long-poll is being forwarded: the connection was accepted before the shutdown began.
    let until = tokio::time::Instant::now() + Duration::from_secs(10);
    while gw.metric("a2a_gateway_agent_in_flight", &[]) < 1.0 {
        assert!(tokio::time::Instant::now() < until, "the long-poll never reached the agent");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    gw.stop();
    assert!(idle.closed_within(Duration::from_secs(5)).await, "an idle connection is closed at once");
    let a = busy.answer().await;
    assert_eq!(a.status, 200, "the request in flight is answered");
    assert_eq!(a.json()["status"], "received");
    assert_eq!(a.header("connection"), Some("close"));
    assert!(TcpStream::connect(gw.base.trim_start_matches("http://")).await.is_err(), "no new connections");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn absolute_form_targets_are_served_and_head_answers_carry_no_body() {
    let (_w, _agent, gw) = setup("").await;
    let mut c = Conn::open(&gw.base).await;
    c.send(&request("OPTIONS", "http://gw.example/a2a", "", "")).await;
    let d = c.answer().await;
    assert_eq!(d.status, 204, "absolute form (RFC 9112 §3.2.2) is the path it names");
    assert!(d.header("a2a-capabilities").is_some());
    // A HEAD of a path answered by the gateway's HTTP service: the head only, and the connection stays usable.
    c.send(b"HEAD /metrics HTTP/1.1\r\nHost: gw\r\n\r\n").await;
    let h = c.answer_to_head().await;
    assert_eq!(h.status, 404, "the admin endpoints are off without a token (GW-22)");
    assert!(h.body.is_empty());
    c.send(&request("OPTIONS", "/a2a", "", "")).await;
    assert_eq!(c.answer().await.status, 204, "nothing of a body was left on the connection");
}

/// Sends `raw` on a new connection and reads one answer; asserts the connection then ends.
async fn refused_and_closed(gw: &TestGateway, raw: &[u8]) -> Raw {
    let mut c = Conn::open(&gw.base).await;
    c.send(raw).await;
    let a = c.answer().await;
    assert_eq!(a.header("connection"), Some("close"), "{:?}", String::from_utf8_lossy(raw));
    assert!(c.closed_within(Duration::from_secs(5)).await, "{:?}: the connection ends", String::from_utf8_lossy(raw));
    a
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chunk_size_lines_end_in_crlf_and_hold_no_control_bytes() {
    let (_w, agent, gw) = setup("").await;
    let http = reqwest::Client::new();
    let before = agent.requests(&http).await;
    let body = negotiate_body();
    let n = body.len();
    // GW-20 (RFC 9112 §7.1): each of these is read one way by a lenient parser and another way by a strict one.
    let cases = [
        format!("{n:x}\n{body}\r\n0\r\n\r\n"),
        format!("{n:x}\r\n{body}\r\n0\n\r\n"),
        format!("{n:x};a=b\n{body}\r\n0\r\n\r\n"),
        format!("{n:x};a=\x01\r\n{body}\r\n0\r\n\r\n"),
        format!("{n:x};a\x7f\r\n{body}\r\n0\r\n\r\n"),
        format!("{n:x};a=\"b\rc\"\r\n{body}\r\n0\r\n\r\n"),
        format!("\r\n{n:x}\r\n{body}\r\n0\r\n\r\n"),
        format!("{n:x}\r\n{body}\r\n\r\n"),
        format!("{n:x}\r\n{body}\r\n0\r\nX-T: a\nb\r\n\r\n"),
    ];
    for chunks in &cases {
        let mut r =
            request("POST", "/a2a/negotiate", "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n", "");
        r.extend_from_slice(chunks.as_bytes());
        let a = refused_and_closed(&gw, &r).await;
        assert_eq!(a.status, 400, "{chunks:?}: {:?}", a.json());
        assert!(!a.code().is_empty(), "{chunks:?}: a JSON error");
    }
    assert_eq!(agent.requests(&http).await, before, "none reached the agent");
    // The same body, well framed, with an extension and whitespace before it, passes.
    let mut c = Conn::open(&gw.base).await;
    let mut r =
        request("POST", "/a2a/negotiate", "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n", "");
    r.extend_from_slice(format!("{n:x} ;a=\"b c\"\r\n{body}\r\n0\r\n\r\n").as_bytes());
    c.send(&r).await;
    assert_eq!(c.answer().await.status, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unsupported_transfer_coding_is_501_and_an_absolute_target_takes_only_its_path() {
    let (_w, agent, gw) = setup("").await;
    let http = reqwest::Client::new();
    let before = agent.requests(&http).await;
    let r =
        request("POST", "/a2a/negotiate", "Content-Type: application/json\r\nTransfer-Encoding: gzip, chunked\r\n", "");
    let a = refused_and_closed(&gw, &r).await;
    assert_eq!((a.status, a.code().as_str()), (501, "not_implemented"), "{:?}", a.json());
    assert_eq!(agent.requests(&http).await, before);
    // GW-20: the path of an absolute-form target ends its authority; a `/` in the query is not one.
    for target in [
        "http://evil.example?x=/a2a/capabilities",
        "http://evil.example#/a2a/capabilities",
        "http://evil.example:80?/a2a/capabilities",
    ] {
        let mut c = Conn::open(&gw.base).await;
        c.send(&request("GET", target, "", "")).await;
        let a = c.answer().await;
        assert_eq!((a.status, a.code().as_str()), (404, "not_found"), "{target}: {:?}", a.json());
    }
    let mut c = Conn::open(&gw.base).await;
    c.send(&request("GET", "http://gw.example/a2a/capabilities?x=/y", "", "")).await;
    assert_eq!(c.answer().await.status, 200, "an absolute target with a path is that path");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn head_is_answered_as_get_without_a_body_wherever_get_is_served() {
    let (_w, _agent, gw) = setup("").await;
    let mut c = Conn::open(&gw.base).await;
    c.send(&request("GET", "/a2a/capabilities", "", "")).await;
    let get = c.answer().await;
    assert_eq!(get.status, 200);
    c.send(&request("HEAD", "/a2a/capabilities", "", "")).await;
    let head = c.answer_to_head().await;
    assert_eq!(head.status, 200, "GW-20: HEAD where GET is served");
    assert_eq!(head.header("content-length"), Some(get.body.len().to_string().as_str()));
    assert_eq!(head.header("content-type"), get.header("content-type"));
    // A RESULT: forwarded to the agent as GET, its answer's head only.
    c.send(&request("POST", "/a2a/negotiate", "", &negotiate_body())).await;
    let neg = c.answer().await.json()["negotiation_id"].as_str().expect("id").to_owned();
    c.send(&request(
        "POST",
        "/a2a/execute",
        &format!("A2A-Negotiation-ID: {neg}\r\n"),
        &json!({"title": "h"}).to_string(),
    ))
    .await;
    let id = c.answer().await.json()["execution_id"].as_str().expect("id").to_owned();
    let seg = a2a_core::execution_id::ExecutionId::parse(&id).expect("id").to_path_segment();
    c.send(&request("GET", &format!("/a2a/result/{seg}"), "", "")).await;
    let get = c.answer().await;
    assert_eq!(get.status, 200, "{:?}", get.json());
    c.send(&request("HEAD", &format!("/a2a/result/{seg}"), "", "")).await;
    let head = c.answer_to_head().await;
    assert_eq!(head.status, 200);
    assert_eq!(head.header("content-length"), Some(get.body.len().to_string().as_str()));
    // Nothing of a body was left on the connection.
    c.send(&request("OPTIONS", "/a2a", "", "")).await;
    assert_eq!(c.answer().await.status, 204);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bodies_past_the_process_budget_are_refused_503_and_the_budget_comes_back() {
    let (_w, _agent, gw) =
        setup("[limits]\nmax_body_bytes = 32768\nmax_buffered_body_bytes = 65536\nbody_read_timeout_ms = 20000\n")
            .await;
    // Two callers declare 30,000 bytes, send 25,000 and stall: 50,000 of the 65,536 bytes are held.
    let stalled_head = |len: usize| {
        format!(
            "POST /a2a/negotiate HTTP/1.1\r\nHost: gw\r\nA2A-Version: 0.3\r\nA2A-Sender-ID: {CLIENT}\r\nContent-Type: application/json\r\nContent-Length: {len}\r\n\r\n"
        )
    };
    let mut stalled = Vec::new();
    for _ in 0..2 {
        let mut c = Conn::open(&gw.base).await;
        c.send(stalled_head(30_000).as_bytes()).await;
        c.send(&vec![b' '; 25_000]).await;
        stalled.push(c);
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    // A third body that would take the total past the budget: refused, not buffered, with Retry-After (GW-23).
    let mut c = Conn::open(&gw.base).await;
    c.send(stalled_head(30_000).as_bytes()).await;
    c.send(&vec![b' '; 25_000]).await;
    let a = c.answer().await;
    assert_eq!((a.status, a.code().as_str()), (503, "overloaded"), "{:?}", a.json());
    assert_eq!(a.header("retry-after"), Some("1"));
    assert!(c.closed_within(Duration::from_secs(5)).await);
    // A small body still fits, and is served.
    let mut c = Conn::open(&gw.base).await;
    c.send(&request("POST", "/a2a/negotiate", "", &negotiate_body())).await;
    assert_eq!(c.answer().await.status, 200);
    // The stalled callers leave: their share comes back, and a large body is served again.
    drop(stalled);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut c = Conn::open(&gw.base).await;
    let mut big = serde_json::from_str::<Value>(&negotiate_body()).expect("json");
    big["pad"] = json!("x".repeat(30_000));
    c.send(&request("POST", "/a2a/negotiate", "", &big.to_string())).await;
    let a = c.answer().await;
    assert_ne!(a.status, 503, "{:?}", a.json());
}

/// An HTTP/2 connection (prior knowledge) to `base`.
async fn h2(base: &str) -> hyper::client::conn::http2::SendRequest<H2Body> {
    let stream = TcpStream::connect(base.trim_start_matches("http://")).await.expect("connect");
    let (send, conn) = hyper::client::conn::http2::handshake(
        hyper_util::rt::TokioExecutor::new(),
        hyper_util::rt::TokioIo::new(stream),
    )
    .await
    .expect("h2 handshake");
    tokio::spawn(conn);
    send
}

/// A request body sent as the test feeds it (ended when the sender is dropped).
type H2Body = http_body_util::StreamBody<
    futures_util::stream::BoxStream<'static, Result<hyper::body::Frame<bytes::Bytes>, std::convert::Infallible>>,
>;

/// A NEGOTIATE over HTTP/2 whose body is what is sent on the returned sender.
fn h2_negotiate(base: &str) -> (http::Request<H2Body>, tokio::sync::mpsc::UnboundedSender<bytes::Bytes>) {
    h2_post(base, "/a2a/negotiate")
}

/// A POST of JSON to `path` over HTTP/2 whose body is what is sent on the returned sender.
fn h2_post(base: &str, path: &str) -> (http::Request<H2Body>, tokio::sync::mpsc::UnboundedSender<bytes::Bytes>) {
    use futures_util::StreamExt;
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel::<bytes::Bytes>();
    let frames = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|b| (Ok(hyper::body::Frame::data(b)), rx))
    })
    .boxed();
    let req = http::Request::builder()
        .method("POST")
        .uri(format!("{base}{path}"))
        .header("a2a-version", "0.3")
        .header("a2a-sender-id", CLIENT)
        .header("content-type", "application/json")
        .body(http_body_util::StreamBody::new(frames))
        .expect("request");
    (req, tx)
}

/// A NEGOTIATE over HTTP/2 (a connection of its own) that sends 25,000 bytes of its body and stalls until the sender
/// is dropped; the task ends with the answer's status.
async fn stall(
    base: &str,
) -> (tokio::sync::mpsc::UnboundedSender<bytes::Bytes>, tokio::task::JoinHandle<Result<u16, hyper::Error>>) {
    stall_at(base, "/a2a/negotiate").await
}

/// [`stall`] for a POST to `path`.
async fn stall_at(
    base: &str,
    path: &str,
) -> (tokio::sync::mpsc::UnboundedSender<bytes::Bytes>, tokio::task::JoinHandle<Result<u16, hyper::Error>>) {
    let mut send = h2(base).await;
    let (req, tx) = h2_post(base, path);
    tx.send(bytes::Bytes::from(vec![b' '; 25_000])).expect("feed");
    (tx, tokio::spawn(async move { send.send_request(req).await.map(|r| r.status().as_u16()) }))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http2_bodies_count_in_the_process_budget_are_refused_503_past_it_and_given_back() {
    // The stalled bodies must outlive the test's polling however loaded the machine: a long body read time.
    let (_w, _agent, gw) =
        setup("[limits]\nmax_body_bytes = 32768\nmax_buffered_body_bytes = 65536\nbody_read_timeout_ms = 120000\n")
            .await;
    // GW-23 over HTTP/2: two callers send 25,000 bytes of a body and stall (each on its own connection).
    let mut stalled = vec![stall(&gw.base).await, stall(&gw.base).await];
    // A third body of 25,000 bytes is refused once the two are held (polled: the stalled bytes arrive when they do).
    // A stalled body that arrived after a probe's was the one refused: it is sent again.
    let until = Instant::now() + Duration::from_secs(30);
    let refused = loop {
        for s in &mut stalled {
            if s.1.is_finished() {
                *s = stall(&gw.base).await;
            }
        }
        let mut send = h2(&gw.base).await;
        let (req, tx) = h2_negotiate(&gw.base);
        tx.send(bytes::Bytes::from(vec![b' '; 25_000])).expect("feed");
        drop(tx);
        let r = send.send_request(req).await.expect("answer");
        if r.status() == 503 {
            break r;
        }
        assert!(Instant::now() < until, "HTTP/2 bodies are not counted in the budget: {} past it", r.status());
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(refused.headers().get("retry-after").map(|v| v.as_bytes()), Some(&b"1"[..]), "{refused:?}");
    use http_body_util::BodyExt;
    let body = refused.into_body().collect().await.expect("body").to_bytes();
    let v: Value = serde_json::from_slice(&body).expect("json");
    assert_eq!(v["error"]["code"], "overloaded", "{v}");
    // The stalled bodies end (answered, whatever the answer): their share comes back, and a large body fits again.
    for (tx, answer) in stalled {
        drop(tx);
        let status = tokio::time::timeout(Duration::from_secs(30), answer).await.expect("answered").expect("task");
        assert_ne!(status.expect("answer"), 503);
    }
    let mut send = h2(&gw.base).await;
    let (req, tx) = h2_negotiate(&gw.base);
    let mut big = serde_json::from_str::<Value>(&negotiate_body()).expect("json");
    big["pad"] = json!("x".repeat(30_000));
    tx.send(bytes::Bytes::from(big.to_string())).expect("feed");
    drop(tx);
    let r = send.send_request(req).await.expect("answer");
    assert_ne!(r.status(), 503, "the stalled bodies' share did not come back");
}

/// GW-23 on the A2A 1.x bridge: its bodies count in the one budget of the process (over HTTP/2, where the bridge
/// reads them itself), are refused `503 overloaded` with `Retry-After` past it, and give their share back once
/// answered; a body the HTTP/1.1 loop read is counted once, not again by the bridge.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bridge_bodies_count_in_the_process_budget_once_and_are_refused_503_past_it() {
    const SEND: &str = "/a2a1x/message:send";
    // The stalled bodies must outlive the test's polling however loaded the machine: a long body read time.
    let (_w, _agent, gw) =
        setup("[limits]\nmax_body_bytes = 32768\nmax_buffered_body_bytes = 65536\nbody_read_timeout_ms = 120000\n")
            .await;
    // Two A2A 1.x callers send 25,000 bytes of a body and stall (each on its own connection): 50,000 bytes held.
    let mut stalled = vec![stall_at(&gw.base, SEND).await, stall_at(&gw.base, SEND).await];
    // A third body of 25,000 bytes is refused once the two are held (polled: the stalled bytes arrive when they do).
    let until = Instant::now() + Duration::from_secs(30);
    let refused = loop {
        for s in &mut stalled {
            if s.1.is_finished() {
                *s = stall_at(&gw.base, SEND).await;
            }
        }
        let mut send = h2(&gw.base).await;
        let (req, tx) = h2_post(&gw.base, SEND);
        tx.send(bytes::Bytes::from(vec![b' '; 25_000])).expect("feed");
        drop(tx);
        let r = send.send_request(req).await.expect("answer");
        if r.status() == 503 {
            break r;
        }
        assert!(Instant::now() < until, "the bridge's bodies are not counted in the budget: {} past it", r.status());
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(refused.headers().get("retry-after").map(|v| v.as_bytes()), Some(&b"1"[..]), "{refused:?}");
    use http_body_util::BodyExt;
    let body = refused.into_body().collect().await.expect("body").to_bytes();
    let v: Value = serde_json::from_slice(&body).expect("json");
    assert_eq!(v["error"]["details"][0]["metadata"]["code"], "overloaded", "{v}");
    // The stalled bodies end (answered: spaces are no A2A 1.x request, 400): their share comes back, and a large
    // body is read again.
    for (tx, answer) in stalled {
        drop(tx);
        let status = tokio::time::timeout(Duration::from_secs(30), answer).await.expect("answered").expect("task");
        assert_eq!(status.expect("answer"), 400);
    }
    let mut send = h2(&gw.base).await;
    let (req, tx) = h2_post(&gw.base, SEND);
    tx.send(bytes::Bytes::from(vec![b' '; 30_000])).expect("feed");
    drop(tx);
    let r = send.send_request(req).await.expect("answer");
    assert_eq!(r.status(), 400, "the stalled bodies' share did not come back");
    // Over HTTP/1.1 the gateway's loop reads the body (and counts it) before the bridge sees it: 30,000 bytes
    // of a budget of 40,000 are counted once, not twice.
    let (_w, _agent, gw) = setup("[limits]\nmax_body_bytes = 32768\nmax_buffered_body_bytes = 40000\n").await;
    let mut c = Conn::open(&gw.base).await;
    let body = " ".repeat(30_000);
    c.send(
        format!(
            "POST {SEND} HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\nContent-Length: 30000\r\n\r\n{body}"
        )
        .as_bytes(),
    )
    .await;
    let a = c.answer().await;
    assert_eq!(a.status, 400, "counted twice: {:?}", a.json());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_past_the_cap_wait_until_one_closes() {
    let (_w, _agent, gw) = setup("[limits]\nmax_connections = 3\n").await;
    let mut open = Vec::new();
    for _ in 0..3 {
        let mut c = Conn::open(&gw.base).await;
        c.send(&request("OPTIONS", "/a2a", "", "")).await;
        assert_eq!(c.answer().await.status, 204);
        open.push(c);
    }
    // A fourth connection is not accepted (it waits in the backlog): its request gets no answer yet.
    let mut fourth = Conn::open(&gw.base).await;
    fourth.send(&request("OPTIONS", "/a2a", "", "")).await;
    let mut chunk = [0u8; 64];
    let early = tokio::time::timeout(Duration::from_millis(500), fourth.stream.read(&mut chunk)).await;
    assert!(early.is_err(), "GW-23: no answer past the connection cap");
    // One closes: the fourth is accepted and answered.
    drop(open.pop());
    assert_eq!(fourth.answer().await.status, 204);
}
