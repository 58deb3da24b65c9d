//! The SDK's [`EventStream`] (`spec/PROTOCOL.md` §18, STR-13) against real agents: typed events in order, the result
//! equal to a plain RESULT, automatic resumption after connections cut mid-stream by a TCP proxy the test controls
//! (nothing lost, nothing twice), the bounded reconnects, and agents that do not stream. Also `a2a call --stream`.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use a2a_client::{ClientError, StreamEvent, StreamOptions, Wait};
use a2a_core::wire::ExecutionStatus;
use a2a_server::AgentBuilder;
use a2a_server::handler::{ExecutionContext, HandlerError};
use a2a_server::streaming::StreamConfig;
use futures_util::StreamExt;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::common::{TestAgent, client, decl};

const AGENT: &str = "did:web:agent.example.com";

fn words_schema() -> Value {
    json!({"type": "object", "properties": {"text": {"type": "string"}, "delay_ms": {"type": "number", "multipleOf": 1}}, "required": ["text"]})
}

fn words_agent(streaming: bool) -> AgentBuilder {
    let b = AgentBuilder::new(AGENT).capability(
        decl("count_words", words_schema()),
        |ctx: ExecutionContext, p: Value| async move {
            let delay = Duration::from_millis(p["delay_ms"].as_u64().unwrap_or(0));
            let text = p["text"].as_str().unwrap_or_default().to_owned();
            for (i, w) in text.split_whitespace().enumerate() {
                if i > 0 {
                    tokio::time::sleep(delay).await;
                }
                ctx.events.emit(json!({"word": w})).await.map_err(|e| HandlerError::new(e.to_string()))?;
            }
            Ok(json!({"words": text.split_whitespace().count()}))
        },
    );
    if streaming { b.streaming(StreamConfig { enabled: true, poll_ms: 20, ..Default::default() }) } else { b }
}

/// A TCP proxy in front of `upstream` that cuts the connection carrying a stream request after `cut_after` bytes of
/// its answer, for the first `cuts` such connections.
struct CuttingProxy {
    url: String,
    cuts_done: Arc<AtomicUsize>,
}

impl CuttingProxy {
    async fn start(upstream: &str, cut_after: usize, cuts: usize) -> CuttingProxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let up: std::net::SocketAddr =
            upstream.trim_start_matches("http://").trim_end_matches("/a2a").parse().expect("upstream address");
        let cuts_done = Arc::new(AtomicUsize::new(0));
        let done = cuts_done.clone();
        tokio::spawn(async move {
            loop {
                let Ok((client, _)) = listener.accept().await else { return };
                let done = done.clone();
                tokio::spawn(async move {
                    let Ok(server) = TcpStream::connect(up).await else { return };
                    let (mut cr, mut cw) = client.into_split();
                    let (mut sr, mut sw) = server.into_split();
                    let streaming = Arc::new(std::sync::atomic::AtomicBool::new(false));
                    let seen = streaming.clone();
                    let upward = tokio::spawn(async move {
                        let mut buf = vec![0u8; 16 * 1024];
                        loop {
                            let n = match cr.read(&mut buf).await {
                                Ok(0) | Err(_) => return,
                                Ok(n) => n,
                            };
                            if String::from_utf8_lossy(&buf[..n]).to_ascii_lowercase().contains("a2a-stream: true") {
                                seen.store(true, Ordering::SeqCst);
                            }
                            if sw.write_all(&buf[..n]).await.is_err() {
                                return;
                            }
                        }
                    });
                    let mut buf = vec![0u8; 16 * 1024];
                    let mut sent_on_stream = 0usize;
                    loop {
                        let n = match sr.read(&mut buf).await {
                            Ok(0) | Err(_) => break,
                            Ok(n) => n,
                        };
                        let mut n = n;
                        let cutting = streaming.load(Ordering::SeqCst) && done.load(Ordering::SeqCst) < cuts;
                        if cutting && sent_on_stream + n >= cut_after {
                            n = cut_after.saturating_sub(sent_on_stream);
                            let _ = cw.write_all(&buf[..n]).await;
                            done.fetch_add(1, Ordering::SeqCst);
                            break; // drops both halves: the client sees the connection die mid-stream
                        }
                        if streaming.load(Ordering::SeqCst) {
                            sent_on_stream += n;
                        }
                        if cw.write_all(&buf[..n]).await.is_err() {
                            break;
                        }
                    }
                    upward.abort();
                });
            }
        });
        CuttingProxy { url: format!("http://{addr}/a2a"), cuts_done }
    }
}

async fn start_execution(url: &str, text: &str, delay_ms: u64) -> String {
    let c = client();
    let n = c.negotiate(url, "count_words", None).await.expect("negotiate");
    let e = c.execute(&n, &json!({"text": text, "delay_ms": delay_ms}), &Default::default()).await.expect("execute");
    c.confirm(&e).await.expect("confirm");
    e.id().to_owned()
}

async fn collect(mut s: a2a_client::EventStream) -> Vec<StreamEvent> {
    let mut out = Vec::new();
    while let Some(e) = s.next().await {
        out.push(e.expect("event"));
    }
    out
}

fn words_of(events: &[StreamEvent]) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::Progress { data, .. } => data["word"].as_str().map(str::to_owned),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn an_event_stream_yields_typed_events_in_order_and_the_plain_result() {
    let t = TestAgent::start(words_agent(true)).await;
    let exe = start_execution(&t.endpoint, "alpha beta gamma delta", 10).await;
    let events =
        collect(client().stream_result(&t.endpoint, &exe, StreamOptions::default()).await.expect("stream")).await;
    let ids: Vec<u64> = events.iter().map(StreamEvent::id).collect();
    assert_eq!(ids, [1, 2, 3, 4, 5, 6]);
    assert!(matches!(events[0], StreamEvent::Status { status: ExecutionStatus::Running, attempt: 1, .. }));
    assert_eq!(words_of(&events), ["alpha", "beta", "gamma", "delta"]);
    let StreamEvent::Result { result, .. } = events.last().expect("events") else { panic!("ends with the result") };
    let plain = client().result(&t.endpoint, &exe, Wait::No).await.expect("result");
    assert_eq!(result, &plain);
    assert_eq!(result.result, Some(json!({"words": 4})));
}

#[tokio::test]
async fn an_event_stream_resumes_by_itself_after_cut_connections_with_nothing_lost_or_twice() {
    let t = TestAgent::start(words_agent(true)).await;
    // Each cut lands in the middle of the stream (after the headers and a few events).
    let proxy = CuttingProxy::start(&t.endpoint, 420, 3).await;
    let words: Vec<String> = (0..15).map(|i| format!("word{i}")).collect();
    let exe = start_execution(&t.endpoint, &words.join(" "), 30).await;
    let s = client()
        .stream_result(&proxy.url, &exe, StreamOptions::default().reconnect_backoff(Duration::from_millis(20)))
        .await
        .expect("stream");
    let mut s = s;
    let mut events = Vec::new();
    while let Some(e) = s.next().await {
        events.push(e.expect("event"));
    }
    assert_eq!(proxy.cuts_done.load(Ordering::SeqCst), 3, "the proxy cut three connections");
    assert!(s.reconnects() >= 3, "{} reconnects", s.reconnects());
    let ids: Vec<u64> = events.iter().map(StreamEvent::id).collect();
    assert_eq!(ids, (1..=17).collect::<Vec<_>>(), "every event once, in order");
    assert_eq!(words_of(&events), words);
    assert!(matches!(events.last(), Some(StreamEvent::Result { .. })));
    assert_eq!(s.last_event_id(), 17);
}

#[tokio::test]
async fn an_event_stream_gives_up_after_its_reconnects() {
    let t = TestAgent::start(words_agent(true)).await;
    let proxy = CuttingProxy::start(&t.endpoint, 200, 1000).await;
    let exe = start_execution(&t.endpoint, "a b c d e f g h", 200).await;
    let opts = StreamOptions::default().max_reconnects(2).reconnect_backoff(Duration::from_millis(10));
    let mut s = client().stream_result(&proxy.url, &exe, opts).await.expect("stream");
    let mut last = None;
    while let Some(e) = s.next().await {
        last = Some(e);
    }
    match last {
        Some(Err(ClientError::Unreachable { .. })) => {}
        other => panic!("expected the stream to give up: {other:?}"),
    }
}

#[tokio::test]
async fn an_event_stream_from_an_agent_without_streaming_is_its_plain_result() {
    let t = TestAgent::start(words_agent(false)).await;
    let exe = start_execution(&t.endpoint, "just words", 0).await;
    let events =
        collect(client().stream_result(&t.endpoint, &exe, StreamOptions::default()).await.expect("stream")).await;
    assert_eq!(events.len(), 1);
    let StreamEvent::Result { id: 0, result, .. } = &events[0] else { panic!("{events:?}") };
    assert_eq!(result.status, ExecutionStatus::Succeeded);
}

#[tokio::test]
async fn the_cli_streams_a_call() {
    let t = TestAgent::start(words_agent(true)).await;
    let out = tokio::process::Command::new(a2a_test_support::bin("a2a"))
        .args([
            "call",
            &t.endpoint,
            "count_words",
            "--data",
            r#"{"text":"one two three","delay_ms":5}"#,
            "--stream",
            "--json",
        ])
        .env("A2A_DID", "did:web:caller.example.com")
        .output()
        .await
        .expect("run a2a");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    let lines: Vec<Value> = stdout.lines().map(|l| serde_json::from_str(l).expect("a JSON line")).collect();
    let kinds: Vec<&str> = lines.iter().map(|l| l["event"].as_str().unwrap_or("")).collect();
    assert_eq!(kinds, ["status", "progress", "progress", "progress", "result"]);
    assert_eq!(lines[4]["result"]["result"], json!({"words": 3}));
}
