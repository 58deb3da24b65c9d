//! Streaming results (`spec/PROTOCOL.md` §18) over real loopback HTTP: ordered events, the final event equal to the
//! plain RESULT, a connection dropped by the client mid-stream and resumed with `Last-Event-ID` (on the same agent, and
//! on a second agent process-alike on the same Redis and Redis Cluster), the limits, heartbeats, signatures, and
//! callers and agents that do not stream.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use a2a_core::integrity::{self, MessageParts};
use a2a_core::keys::SigningKey;
use a2a_server::AgentBuilder;
use a2a_server::handler::{ExecutionContext, HandlerError};
use a2a_server::store::RedisStore;
use a2a_server::store::redis::{AgentScope, RedisConfig};
use a2a_server::streaming::{EmitError, EventLimits, RedisEventLog, StreamConfig};
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::common::{SENDER, TestAgent, decl};
use crate::redis_support::{shared_cluster, shared_server, unique_prefix};

const AGENT: &str = "did:web:agent.example.com";

fn words_schema() -> Value {
    json!({"type": "object", "properties": {"text": {"type": "string"}, "delay_ms": {"type": "number", "multipleOf": 1}}, "required": ["text"]})
}

fn many_schema() -> Value {
    json!({"type": "object", "properties": {"n": {"type": "number", "multipleOf": 1}, "bytes": {"type": "number", "multipleOf": 1}}, "required": ["n"]})
}

/// An agent with `count_words` (one progress event per word, `delay_ms` apart), `emit_many` (`n` events of about
/// `bytes` bytes; reports how many emits failed) and `wait_quietly` (sleeps `delay_ms`, emits nothing).
fn streaming_agent(cfg: StreamConfig) -> AgentBuilder {
    AgentBuilder::new(AGENT)
        .streaming(cfg)
        .capability(decl("count_words", words_schema()), |ctx: ExecutionContext, p: Value| async move {
            let delay = Duration::from_millis(p["delay_ms"].as_u64().unwrap_or(0));
            let text = p["text"].as_str().unwrap_or_default().to_owned();
            for (i, w) in text.split_whitespace().enumerate() {
                if i > 0 {
                    tokio::time::sleep(delay).await;
                }
                ctx.events.emit(json!({"index": i, "word": w})).await.map_err(|e| HandlerError::new(e.to_string()))?;
            }
            Ok(json!({"words": text.split_whitespace().count()}))
        })
        .capability(decl("emit_many", many_schema()), |ctx: ExecutionContext, p: Value| async move {
            let pad = "x".repeat(p["bytes"].as_u64().unwrap_or(1) as usize);
            let (mut kept, mut refused) = (0, 0);
            for i in 0..p["n"].as_u64().unwrap_or(0) {
                match ctx.events.emit(json!({"i": i, "pad": pad})).await {
                    Ok(()) => kept += 1,
                    Err(EmitError::LimitExceeded) => refused += 1,
                    Err(e) => return Err(HandlerError::new(e.to_string())),
                }
            }
            Ok(json!({"kept": kept, "refused": refused}))
        })
        .capability(decl("wait_quietly", words_schema()), |_ctx: ExecutionContext, p: Value| async move {
            tokio::time::sleep(Duration::from_millis(p["delay_ms"].as_u64().unwrap_or(0))).await;
            Ok(json!({"wait_quietly": true}))
        })
}

fn fast() -> StreamConfig {
    StreamConfig { enabled: true, poll_ms: 20, ..Default::default() }
}

/// One SSE event as received (a comment line is an event of type `:`).
#[derive(Debug, Clone, PartialEq)]
struct Ev {
    id: u64,
    event: String,
    data: String,
    signature: Option<String>,
}

/// A raw SSE reader over a real connection; dropping it closes the connection (a client-side drop).
struct Sse {
    resp: reqwest::Response,
    buf: String,
}

impl Sse {
    async fn open(t: &TestAgent, exe: &str, last: Option<&str>) -> Sse {
        let resp = stream_request(t, exe, last).send().await.expect("stream request");
        assert_eq!(resp.status(), StatusCode::OK);
        let ct = resp.headers().get("content-type").and_then(|v| v.to_str().ok()).unwrap_or("").to_owned();
        assert_eq!(ct, "text/event-stream");
        assert_eq!(resp.headers().get("a2a-stream").and_then(|v| v.to_str().ok()), Some("true"));
        assert_eq!(resp.headers().get("a2a-execution-id").and_then(|v| v.to_str().ok()), Some(exe));
        assert_eq!(resp.headers().get("a2a-version").and_then(|v| v.to_str().ok()), Some("0.3"));
        Sse { resp, buf: String::new() }
    }

    /// The next event or comment; `None` when the agent ended the stream.
    async fn next(&mut self) -> Option<Ev> {
        loop {
            if let Some(end) = self.buf.find("\n\n") {
                let block: String = self.buf.drain(..end + 2).collect();
                let mut ev = Ev { id: 0, event: String::new(), data: String::new(), signature: None };
                for line in block.lines().filter(|l| !l.is_empty()) {
                    if line.starts_with(':') {
                        ev.event = ":".into();
                        continue;
                    }
                    let (k, v) = line.split_once(": ").unwrap_or((line, ""));
                    match k {
                        "id" => ev.id = v.parse().expect("decimal id"),
                        "event" => ev.event = v.to_owned(),
                        "data" => ev.data = v.to_owned(),
                        "signature" => ev.signature = Some(v.to_owned()),
                        other => panic!("unexpected SSE field {other:?}"),
                    }
                }
                return Some(ev);
            }
            let chunk = tokio::time::timeout(Duration::from_secs(20), self.resp.chunk())
                .await
                .expect("the stream goes on (or ends) within 20 s")
                .expect("the stream reads");
            self.buf.push_str(std::str::from_utf8(&chunk?).expect("UTF-8"));
        }
    }

    /// Events (comments skipped) until `n` of them, or the end.
    async fn take(&mut self, n: usize) -> Vec<Ev> {
        let mut out = Vec::new();
        while out.len() < n {
            match self.next().await {
                Some(e) if e.event == ":" => {}
                Some(e) => out.push(e),
                None => break,
            }
        }
        out
    }

    /// Every event until the end of the stream.
    async fn rest(&mut self) -> Vec<Ev> {
        self.take(usize::MAX).await
    }
}

fn stream_request(t: &TestAgent, exe: &str, last: Option<&str>) -> reqwest::RequestBuilder {
    let seg = a2a_core::execution_id::ExecutionId::parse(exe).expect("id").to_path_segment();
    let mut rb = t.req(reqwest::Method::GET, &format!("/a2a/result/{seg}")).header("A2A-Stream", "true");
    if let Some(l) = last {
        rb = rb.header("Last-Event-ID", l);
    }
    rb
}

/// NEGOTIATE (with the capability's schema), EXECUTE and CONFIRM; returns the execution id.
async fn started(t: &TestAgent, capability: &str, schema: Value, payload: Value) -> String {
    let neg = t.negotiated(capability, schema).await;
    let exe = t.executed(&neg, payload).await;
    let c = t.confirm(&exe).await;
    assert_eq!(c.status, StatusCode::ACCEPTED, "{}", c.body);
    exe
}

/// The plain RESULT body, as bytes, once the execution is terminal.
async fn plain_result(t: &TestAgent, exe: &str) -> String {
    let seg = a2a_core::execution_id::ExecutionId::parse(exe).expect("id").to_path_segment();
    let resp = t.req(reqwest::Method::GET, &format!("/a2a/result/{seg}?wait_ms=10000")).send().await.expect("result");
    assert_eq!(resp.headers().get("content-type").and_then(|v| v.to_str().ok()), Some("application/json"));
    resp.text().await.expect("body")
}

/// STR-4, STR-6: ids 1, 2, 3, ...; `status running` first, the words in order, `result` last and only there.
fn check_complete(events: &[Ev], words: &[&str]) {
    let ids: Vec<u64> = events.iter().map(|e| e.id).collect();
    assert_eq!(ids, (1..=events.len() as u64).collect::<Vec<_>>(), "consecutive ids from 1, none twice");
    assert_eq!(events[0].event, "status");
    let status: Value = serde_json::from_str(&events[0].data).expect("json");
    assert_eq!(status["status"], "running");
    assert_eq!(status["attempt"], 1);
    let got: Vec<String> = events
        .iter()
        .filter(|e| e.event == "progress")
        .map(|e| {
            serde_json::from_str::<Value>(&e.data).expect("json")["data"]["word"].as_str().unwrap_or("").to_owned()
        })
        .collect();
    assert_eq!(got, words, "every word, in order, once");
    assert_eq!(events.iter().filter(|e| e.event == "result").count(), 1);
    assert_eq!(events.last().map(|e| e.event.as_str()), Some("result"));
}

const TEXT: &str = "the lift on floor three is out of service until monday morning";

#[tokio::test]
async fn a_stream_has_ordered_events_and_ends_with_the_plain_result_body() {
    let t = TestAgent::start(streaming_agent(fast())).await;
    // STR-1 / DISC-10: the feature is listed.
    let caps = t.get("/a2a/capabilities").await;
    assert!(caps.body["features"].as_array().expect("features").contains(&json!("streaming")), "{}", caps.body);
    let exe = started(&t, "count_words", words_schema(), json!({"text": TEXT, "delay_ms": 10})).await;
    let mut s = Sse::open(&t, &exe, None).await;
    let events = s.rest().await;
    let words: Vec<&str> = TEXT.split_whitespace().collect();
    check_complete(&events, &words);
    // STR-6: the final event's data is byte for byte the plain RESULT body; the agent ended the stream after it.
    let plain = plain_result(&t, &exe).await;
    let last = events.last().expect("events");
    assert_eq!(last.data, plain);
    let body: Value = serde_json::from_str(&plain).expect("json");
    assert_eq!(body["status"], "succeeded");
    assert_eq!(body["result"], json!({"words": words.len()}));
    // A stream opened after the end replays the same events.
    let again = Sse::open(&t, &exe, None).await.rest().await;
    assert_eq!(again, events);
}

#[tokio::test]
async fn a_stream_opened_before_confirm_waits_for_the_work() {
    let t = TestAgent::start(streaming_agent(fast())).await;
    let neg = t.negotiated("count_words", words_schema()).await;
    let exe = t.executed(&neg, json!({"text": "one two three"})).await;
    let mut s = Sse::open(&t, &exe, None).await;
    let reader = tokio::spawn(async move { s.rest().await });
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(t.confirm(&exe).await.status, StatusCode::ACCEPTED);
    let events = reader.await.expect("reader");
    check_complete(&events, &["one", "two", "three"]);
}

/// Reads `k` events, drops the connection, resumes on `second` with `Last-Event-ID: k`, and checks that the two parts
/// make the whole stream (STR-11, STR-12).
async fn drop_and_resume(first: &TestAgent, second: &TestAgent, k: usize) {
    let words: Vec<String> = (0..12).map(|i| format!("w{i}")).collect();
    let text = words.join(" ");
    let exe = started(first, "count_words", words_schema(), json!({"text": text, "delay_ms": 40})).await;
    let mut s = Sse::open(first, &exe, None).await;
    let head = s.take(k).await;
    assert_eq!(head.len(), k);
    drop(s); // the client closes the TCP connection mid-stream
    tokio::time::sleep(Duration::from_millis(150)).await;
    let last = head.last().expect("some events").id.to_string();
    let tail = Sse::open(second, &exe, Some(&last)).await.rest().await;
    assert_eq!(tail.first().map(|e| e.id), Some(k as u64 + 1), "resumed right after the last event received");
    let all: Vec<Ev> = head.into_iter().chain(tail).collect();
    let refs: Vec<&str> = words.iter().map(String::as_str).collect();
    check_complete(&all, &refs);
    // STR-12: the dropped stream did not cancel the work.
    let plain = plain_result(second, &exe).await;
    assert_eq!(all.last().expect("events").data, plain);
    assert_eq!(serde_json::from_str::<Value>(&plain).expect("json")["status"], "succeeded");
}

#[tokio::test]
async fn a_stream_dropped_by_the_client_resumes_with_nothing_lost_or_repeated() {
    let t = TestAgent::start(streaming_agent(fast())).await;
    drop_and_resume(&t, &t, 4).await;
}

#[tokio::test]
async fn last_event_id_is_checked() {
    let t = TestAgent::start(streaming_agent(fast())).await;
    let exe = started(&t, "count_words", words_schema(), json!({"text": "a b"})).await;
    let all = Sse::open(&t, &exe, None).await.rest().await;
    let final_id = all.last().expect("events").id;
    assert_eq!(final_id, 4, "status, two words, result");
    // The id of the result: an empty stream that ends at once.
    let none = Sse::open(&t, &exe, Some(&final_id.to_string())).await.rest().await;
    assert!(none.is_empty(), "{none:?}");
    // Beyond the last event, or not a decimal integer: 400 invalid_header naming it.
    for bad in ["5", "x1", "-1", "1.0", "99999999999999999999999"] {
        let a = t.send(stream_request(&t, &exe, Some(bad))).await;
        assert_eq!(a.status, StatusCode::BAD_REQUEST, "{bad}: {}", a.body);
        assert_eq!(a.code(), "invalid_header");
        assert_eq!(a.body["error"]["details"]["header"], "Last-Event-ID");
    }
    // The same checks as RESULT before any stream: another sender's execution is unknown.
    let seg = a2a_core::execution_id::ExecutionId::parse(&exe).expect("id").to_path_segment();
    let other = t
        .send(
            t.http
                .get(t.url(&format!("/a2a/result/{seg}")))
                .header("A2A-Version", "0.3")
                .header("A2A-Sender-ID", "did:web:someone.else.example")
                .header("A2A-Stream", "true"),
        )
        .await;
    assert_eq!(other.status, StatusCode::NOT_FOUND);
    assert_eq!(other.code(), "unknown_execution");
}

#[tokio::test]
async fn progress_over_the_limits_is_replaced_by_one_truncated_event_and_the_result_still_arrives() {
    // STR-8, by count.
    let t = TestAgent::start(streaming_agent(StreamConfig { max_events: 3, ..fast() })).await;
    let exe = started(&t, "emit_many", many_schema(), json!({"n": 6})).await;
    let events = Sse::open(&t, &exe, None).await.rest().await;
    let kinds: Vec<&str> = events.iter().map(|e| e.event.as_str()).collect();
    assert_eq!(kinds, ["status", "progress", "progress", "progress", "truncated", "result"]);
    let truncated: Value = serde_json::from_str(&events[4].data).expect("json");
    assert_eq!(truncated["code"], "stream_limit_exceeded");
    assert_eq!(truncated["details"]["max_events"], 3);
    let result: Value = serde_json::from_str(&events[5].data).expect("json");
    assert_eq!(result["result"], json!({"kept": 3, "refused": 3}), "the handler is told");
    // By bytes: each event's data is 35 bytes; 100 bytes hold two.
    let t = TestAgent::start(streaming_agent(StreamConfig { max_bytes: 100, ..fast() })).await;
    let exe = started(&t, "emit_many", many_schema(), json!({"n": 5, "bytes": 10})).await;
    let events = Sse::open(&t, &exe, None).await.rest().await;
    let kinds: Vec<&str> = events.iter().map(|e| e.event.as_str()).collect();
    assert_eq!(kinds, ["status", "progress", "progress", "truncated", "result"]);
    assert_eq!(serde_json::from_str::<Value>(&events[4].data).expect("json")["result"]["kept"], 2);
}

#[tokio::test]
async fn a_quiet_stream_gets_heartbeats() {
    let t = TestAgent::start(streaming_agent(StreamConfig { heartbeat_ms: 100, ..fast() })).await;
    // 2 s of quiet from CONFIRM: the stream, opened after CONFIRM's answer, sees at least 3 heartbeats even when
    // opening it takes over a second on a loaded machine.
    let exe = started(&t, "wait_quietly", words_schema(), json!({"text": "", "delay_ms": 2000})).await;
    let mut s = Sse::open(&t, &exe, None).await;
    let mut comments = 0;
    let mut kinds = Vec::new();
    while let Some(e) = s.next().await {
        if e.event == ":" {
            comments += 1;
        } else {
            kinds.push(e.event);
        }
    }
    assert!(comments >= 3, "{comments} heartbeats in about 2 s at 100 ms");
    assert_eq!(kinds, ["status", "result"]);
}

#[tokio::test]
async fn streams_beyond_max_streams_are_refused_with_overloaded() {
    let t = TestAgent::start(streaming_agent(StreamConfig { max_streams: 1, ..fast() })).await;
    // The work lasts long enough that the first stream is still open when the second is asked for.
    let exe = started(&t, "wait_quietly", words_schema(), json!({"text": "", "delay_ms": 3000})).await;
    let first = Sse::open(&t, &exe, None).await;
    let a = t.send(stream_request(&t, &exe, None)).await;
    assert_eq!(a.status, StatusCode::SERVICE_UNAVAILABLE, "{}", a.body);
    assert_eq!(a.code(), "overloaded");
    assert!(a.header("retry-after").is_some());
    // A plain RESULT is not a stream and is served.
    assert_eq!(t.result(&exe, 0).await.status, StatusCode::OK);
    drop(first);
    // The agent notices the closed connection and frees its slot (how soon depends on the machine's load).
    let until = std::time::Instant::now() + Duration::from_secs(20);
    let again = loop {
        let resp = stream_request(&t, &exe, None).send().await.expect("request");
        if resp.status() != StatusCode::SERVICE_UNAVAILABLE {
            assert_eq!(resp.status(), StatusCode::OK);
            break Sse { resp, buf: String::new() }.rest().await;
        }
        assert!(std::time::Instant::now() < until, "the slot of the closed stream was not freed in 20 s");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(again.last().map(|e| e.event.as_str()), Some("result"));
}

#[tokio::test]
async fn callers_and_agents_that_do_not_stream_are_unaffected() {
    let t = TestAgent::start(streaming_agent(fast())).await;
    let exe = started(&t, "count_words", words_schema(), json!({"text": "a b c"})).await;
    // A plain RESULT, and `A2A-Stream: false`, are the JSON RESULT.
    let r = t.result(&exe, 5000).await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(r.header("content-type"), Some("application/json"));
    assert_eq!(r.body["status"], "succeeded");
    let seg = a2a_core::execution_id::ExecutionId::parse(&exe).expect("id").to_path_segment();
    let f = t.send(t.req(reqwest::Method::GET, &format!("/a2a/result/{seg}")).header("A2A-Stream", " FALSE ")).await;
    assert_eq!(f.body, r.body);
    // STR-2: anything else is invalid_header.
    let bad = t.send(t.req(reqwest::Method::GET, &format!("/a2a/result/{seg}")).header("A2A-Stream", "yes")).await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST);
    assert_eq!(bad.code(), "invalid_header");
    assert_eq!(bad.body["error"]["details"]["header"], "A2A-Stream");

    // STR-3: an agent without streaming ignores the header and answers the plain RESULT; `emit` does nothing there.
    let plain_agent = TestAgent::start(AgentBuilder::new(AGENT).capability(
        decl("count_words", words_schema()),
        |ctx: ExecutionContext, p: Value| async move {
            assert!(!ctx.events.is_enabled());
            ctx.events.emit(json!({"ignored": true})).await.map_err(|e| HandlerError::new(e.to_string()))?;
            Ok(json!({"text": p["text"]}))
        },
    ))
    .await;
    let caps = plain_agent.get("/a2a/capabilities").await;
    assert!(!caps.body["features"].as_array().expect("features").contains(&json!("streaming")));
    let exe = started(&plain_agent, "count_words", words_schema(), json!({"text": "a"})).await;
    let _ = plain_agent.result(&exe, 5000).await;
    let a = plain_agent.send(stream_request(&plain_agent, &exe, None)).await;
    assert_eq!(a.status, StatusCode::OK);
    assert_eq!(a.header("content-type"), Some("application/json"));
    assert_eq!(a.body["result"], json!({"text": "a"}));
}

#[tokio::test]
async fn the_result_event_of_a_signing_agent_is_signed_like_the_plain_result() {
    let key = SigningKey::generate().expect("key");
    let t = TestAgent::start(streaming_agent(fast()).sign_responses("key-1", key.clone())).await;
    let exe = started(&t, "count_words", words_schema(), json!({"text": "signed words"})).await;
    let seg = a2a_core::execution_id::ExecutionId::parse(&exe).expect("id").to_path_segment();
    let mut s = Sse::open(&t, &exe, None).await;
    assert!(s.resp.headers().get("a2a-signature").is_none(), "the stream itself is not signed (STR-7)");
    let events = s.rest().await;
    let last = events.last().expect("events");
    assert!(events[..events.len() - 1].iter().all(|e| e.signature.is_none()));
    let sig = last.signature.as_deref().expect("the result event is signed");
    let target = format!("/a2a/result/{seg}");
    let headers = [("a2a-version", "0.3"), ("a2a-sender-id", AGENT), ("a2a-execution-id", exe.as_str())];
    let parts = MessageParts {
        method: "GET",
        target: &target,
        headers: &headers,
        body: last.data.as_bytes(),
        status: Some(200),
    };
    let now = SystemTime::now().duration_since(UNIX_EPOCH).expect("clock").as_secs() as i64;
    let pending = integrity::prepare(sig, &parts, SENDER, now).expect("addressed to the requester");
    assert_eq!(pending.did(), AGENT);
    let v = pending.finish(key.verifying_key(), &parts).expect("verifies");
    assert_eq!(v.coverage(), integrity::Coverage::FullPayload);
    // Other bytes do not verify.
    let tampered = last.data.replace("succeeded", "failed");
    let bad = MessageParts { body: tampered.as_bytes(), ..parts };
    let pending = integrity::prepare(sig, &bad, SENDER, now).expect("well formed");
    assert!(pending.finish(key.verifying_key(), &bad).is_err());
}

/// An agent on Redis: its own connections, event log and local wake-ups, as a separate process has.
fn redis_agent(url: String, cluster: bool, prefix: &str) -> AgentBuilder {
    let store = RedisStore::connect(
        RedisConfig::new(url).with_cluster(cluster).with_key_prefix(prefix),
        AgentScope { did: AGENT.into(), retention: Duration::from_secs(3600), max_received: 1000 },
    )
    .expect("connect");
    let cfg = fast();
    let log = RedisEventLog::new(
        store.clone(),
        EventLimits { max_events: cfg.max_events, max_bytes: cfg.max_bytes },
        Duration::from_millis(cfg.poll_ms),
    );
    streaming_agent(cfg).store(store).event_log(Arc::new(log))
}

#[tokio::test]
async fn a_stream_dropped_on_one_process_resumes_on_another_on_the_same_redis() {
    let url = shared_server().url();
    let prefix = unique_prefix("stream");
    let a = TestAgent::start(redis_agent(url.clone(), false, &prefix)).await;
    let b = TestAgent::start(redis_agent(url, false, &prefix)).await;
    drop_and_resume(&a, &b, 3).await;
    // And the other way round, resuming where the execution runs.
    drop_and_resume(&b, &a, 6).await;
}

#[tokio::test]
async fn a_stream_resumes_across_processes_on_redis_cluster() {
    let prefix = unique_prefix("stream-cluster");
    let a = TestAgent::start(redis_agent(shared_cluster().urls(), true, &prefix)).await;
    let b = TestAgent::start(redis_agent(shared_cluster().urls(), true, &prefix)).await;
    drop_and_resume(&a, &b, 5).await;
}

#[tokio::test]
async fn redis_limits_match_the_memory_log() {
    let url = shared_server().url();
    let prefix = unique_prefix("stream-limits");
    let store = RedisStore::connect(
        RedisConfig::new(url).with_key_prefix(&prefix),
        AgentScope { did: AGENT.into(), retention: Duration::from_secs(3600), max_received: 1000 },
    )
    .expect("connect");
    let log =
        RedisEventLog::new(store.clone(), EventLimits { max_events: 3, max_bytes: 1 << 20 }, Duration::from_millis(20));
    let t = TestAgent::start(
        streaming_agent(StreamConfig { max_events: 3, ..fast() }).store(store).event_log(Arc::new(log)),
    )
    .await;
    let exe = started(&t, "emit_many", many_schema(), json!({"n": 6})).await;
    let events = Sse::open(&t, &exe, None).await.rest().await;
    let kinds: Vec<&str> = events.iter().map(|e| e.event.as_str()).collect();
    assert_eq!(kinds, ["status", "progress", "progress", "progress", "truncated", "result"]);
    assert_eq!(
        serde_json::from_str::<Value>(&events[5].data).expect("json")["result"],
        json!({"kept": 3, "refused": 3})
    );
}
