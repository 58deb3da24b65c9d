//! Sessions and agent-to-agent conversations (`spec/PROTOCOL.md` §17) over real loopback HTTP: the registry, every
//! send outcome, ping-pong termination rules, the four reply x announce modes with the SSE channel, history
//! bounds, spawn limits, policy denials and wait cycles (directly and through a third agent).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use a2a_core::capability::AuthRequirement;
use a2a_core::sessions::{Delivery, HistoryMessage, RunReply, SessionKind, Step};
use a2a_server::sessions::store::{Event, EventsAfter, InboxItem, RunRecord, SessionRecord, StoreError, StoredMessage};
use a2a_server::sessions::{
    HandlerFailure, HostedSession, MemorySessionStore, SessionSettings, SessionStore, SessionsBuilder, Visibility,
    current_wait_chain,
};
use a2a_server::{Agent, AgentBuilder};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use tokio::net::TcpListener;

use crate::common::Answer;

/// A running agent serving sessions.
pub struct Ses {
    pub base: String,
    pub did: String,
    pub agent: Agent,
    pub http: reqwest::Client,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
}

impl Drop for Ses {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
    }
}

/// Open settings for tests: no signatures required, every session visible, loopback agents allowed.
pub fn open_settings() -> SessionSettings {
    let mut s = SessionSettings::default();
    s.auth_requirement = AuthRequirement::None;
    s.visibility = Visibility::All;
    s.allow_list =
        a2a_core::sessions::AllowList(vec!["did:web:localhost*".into(), "did:web:caller.example.com#*".into()]);
    s
}

impl Ses {
    /// Binds a port, names the agent `did:web:localhost%3A<port>`, and serves the sessions `f` builds.
    pub async fn start(f: impl FnOnce(&str) -> SessionsBuilder) -> Ses {
        Self::start_with(f, |b| b).await
    }

    /// [`Ses::start`] with more of the agent configured by `agent`.
    pub async fn start_with(
        f: impl FnOnce(&str) -> SessionsBuilder,
        agent: impl FnOnce(AgentBuilder) -> AgentBuilder,
    ) -> Ses {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let base = format!("http://127.0.0.1:{port}");
        let did = format!("did:web:localhost%3A{port}");
        let sessions = f(&did).endpoint(format!("{base}/a2a"));
        let agent = agent(AgentBuilder::new(did.clone()).sessions(sessions)).build().expect("agent builds");
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let app = agent.router().merge(agent.metrics_router());
        let limits = agent.engine().limits().clone();
        tokio::spawn(async move {
            let shutdown = async {
                let _ = rx.await;
            };
            let _ = a2a_server::serve::serve(listener, app, &limits, shutdown, Duration::from_secs(1)).await;
        });
        let http = reqwest::Client::builder().timeout(Duration::from_secs(30)).build().expect("client");
        Ses { base, did, agent, http, shutdown: Some(tx) }
    }

    pub fn req(&self, method: Method, path: &str, sender: &str) -> reqwest::RequestBuilder {
        self.http
            .request(method, format!("{}{path}", self.base))
            .header("A2A-Version", "0.3")
            .header("A2A-Sender-ID", sender)
    }

    pub async fn answer(rb: reqwest::RequestBuilder) -> Answer {
        let resp = rb.send().await.expect("request");
        let status = resp.status();
        let headers = resp.headers().clone();
        let bytes = resp.bytes().await.expect("body");
        let body = if bytes.is_empty() { Value::Null } else { serde_json::from_slice(&bytes).expect("JSON body") };
        Answer { status, headers, body }
    }

    pub async fn post_as(&self, sender: &str, path: &str, body: Value) -> Answer {
        Self::answer(self.req(Method::POST, path, sender).json(&body)).await
    }

    pub async fn get_as(&self, sender: &str, path: &str) -> Answer {
        Self::answer(self.req(Method::GET, path, sender)).await
    }

    /// A send from the test client (a caller agent's session `from`).
    pub async fn send(&self, body: Value) -> Answer {
        self.post_as(CALLER, "/a2a/sessions/send", body).await
    }

    /// `GET /a2a/runs/{id}` until the run is done.
    pub async fn done(&self, sender: &str, run_id: &str) -> Value {
        let seg = a2a_core::execution_id::ExecutionId::parse(run_id).expect("run id").to_path_segment();
        let a = self.get_as(sender, &format!("/a2a/runs/{seg}?wait_ms=20000&until=done")).await;
        assert_eq!(a.status, StatusCode::OK, "{}", a.body);
        assert_eq!(a.body["state"], "done", "{}", a.body);
        a.body
    }
}

/// The test client's DID (a caller agent that is not served).
pub const CALLER: &str = "did:web:caller.example.com";

fn reply(text: &'static str) -> impl Fn(Delivery) -> std::future::Ready<Result<String, HandlerFailure>> + Send + Sync {
    move |_d: Delivery| std::future::ready(Ok(text.to_owned()))
}

fn echo() -> impl Fn(Delivery) -> std::future::Ready<Result<String, HandlerFailure>> + Send + Sync {
    |d: Delivery| std::future::ready(Ok(format!("echo: {}", d.text)))
}

fn desk(key: &str) -> HostedSession {
    HostedSession::new(key, format!("the {key} session of the tests")).label(key.to_owned())
}

#[tokio::test]
async fn sessions_registry_registers_lists_filters_and_ends() {
    let a = Ses::start(|_| {
        SessionsBuilder::new().settings(open_settings()).session(desk("bonus-desk").kind(SessionKind::Main), echo())
    })
    .await;
    // DISCOVER lists the feature.
    assert_eq!(a.agent.sessions().map(|s| s.did().to_owned()), Some(a.did.clone()));
    let caps = a.get_as(CALLER, "/a2a/capabilities").await;
    assert!(caps.body["features"].as_array().expect("features").iter().any(|f| f == "sessions"), "{}", caps.body);
    // The first heartbeat (SES-6) has written the hosted session, so that the inbox registered next is newer.
    let store = a.agent.sessions().expect("sessions").store().clone();
    let until = std::time::Instant::now() + Duration::from_secs(10);
    while store.get_session(&format!("{}#bonus-desk", a.did)).await.expect("store").is_none() {
        assert!(std::time::Instant::now() < until, "the hosted session was never written");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    tokio::time::sleep(Duration::from_millis(5)).await;
    let reg = json!({"session_key": "inbox-1", "label": "my inbox", "kind": "group", "summary": "an inbox session"});
    let r = a.post_as(CALLER, "/a2a/sessions", reg.clone()).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    assert_eq!(r.body["handler"], "inbox");
    assert_eq!(r.body["owner"], CALLER);
    let r = a.post_as(CALLER, "/a2a/sessions", reg.clone()).await;
    assert_eq!(r.status, StatusCode::OK, "a refresh: {}", r.body);
    let other = a.post_as("did:web:other.example.com", "/a2a/sessions", reg).await;
    assert_eq!((other.status, other.code()), (StatusCode::CONFLICT, "session_conflict"), "{}", other.body);
    let hosted = a
        .post_as(CALLER, "/a2a/sessions", json!({"session_key": "bonus-desk", "summary": "take over the hosted one"}))
        .await;
    assert_eq!(hosted.code(), "session_conflict", "{}", hosted.body);
    let short = a.post_as(CALLER, "/a2a/sessions", json!({"session_key": "x", "summary": "abc"})).await;
    assert_eq!(
        (short.status, short.body["error"]["details"]["member"].as_str()),
        (StatusCode::BAD_REQUEST, Some("summary"))
    );
    let unknown_member =
        a.post_as(CALLER, "/a2a/sessions", json!({"session_key": "x", "summary": "abcdef", "colour": 1})).await;
    assert_eq!(unknown_member.code(), "invalid_request", "{}", unknown_member.body);

    // Own sessions are left out unless asked for.
    let l = a.get_as(CALLER, "/a2a/sessions").await;
    let keys = |v: &Value| -> Vec<String> {
        v["sessions"]
            .as_array()
            .expect("sessions")
            .iter()
            .map(|s| s["session_key"].as_str().unwrap_or("").to_owned())
            .collect()
    };
    assert_eq!(keys(&l.body), vec!["bonus-desk"], "{}", l.body);
    let l = a.get_as(CALLER, "/a2a/sessions?include_self=true").await;
    assert_eq!(keys(&l.body), vec!["inbox-1", "bonus-desk"], "newest first: {}", l.body);
    for (q, want) in [
        ("kind=group", vec!["inbox-1"]),
        ("kind=main,group", vec!["inbox-1", "bonus-desk"]),
        ("label=my%20inbox", vec!["inbox-1"]),
        ("search=BONUS", vec!["bonus-desk"]),
        ("active_minutes=5", vec!["inbox-1", "bonus-desk"]),
        (&format!("agent={}", a.did.replace('%', "%25")), vec!["inbox-1", "bonus-desk"]),
        ("agent=did:web:nobody.example.com", vec![]),
        ("limit=1", vec!["inbox-1"]),
        ("limit=1&offset=1", vec!["bonus-desk"]),
    ] {
        let l = a.get_as(CALLER, &format!("/a2a/sessions?include_self=true&{q}")).await;
        assert_eq!(l.status, StatusCode::OK, "{q}: {}", l.body);
        assert_eq!(keys(&l.body), want, "{q}: {}", l.body);
    }
    let l = a.get_as(CALLER, "/a2a/sessions?include_self=true&limit=1").await;
    assert_eq!((l.body["total"].as_u64(), l.body["truncated"].as_bool()), (Some(2), Some(true)));
    let bad = a.get_as(CALLER, "/a2a/sessions?limit=500").await;
    assert_eq!(bad.code(), "invalid_request");
    let bad = a.get_as(CALLER, "/a2a/sessions?kind=robot").await;
    assert_eq!(bad.code(), "invalid_request");

    // Reading and ending: only the owner ends; then it is gone.
    let one = a.get_as(CALLER, "/a2a/sessions/inbox-1").await;
    assert_eq!(one.body["address"], format!("{}#inbox-1", a.did));
    let not_owner = Ses::answer(a.req(Method::DELETE, "/a2a/sessions/inbox-1", "did:web:other.example.com")).await;
    assert_eq!(not_owner.status, StatusCode::NOT_FOUND, "a stranger does not even see it: {}", not_owner.body);
    let ended = Ses::answer(a.req(Method::DELETE, "/a2a/sessions/inbox-1", CALLER)).await;
    assert_eq!(ended.status, StatusCode::OK, "{}", ended.body);
    assert!(ended.body["ended_at"].is_string());
    let gone = a.get_as(CALLER, "/a2a/sessions/inbox-1").await;
    assert_eq!((gone.status, gone.code()), (StatusCode::NOT_FOUND, "unknown_session"));
    let l = a.get_as(CALLER, "/a2a/sessions?include_self=true").await;
    assert_eq!(keys(&l.body), vec!["bonus-desk"]);
    // Missing headers are §3 errors.
    let r = Ses::answer(a.http.get(format!("{}/a2a/sessions", a.base)).header("A2A-Version", "0.3")).await;
    assert_eq!(r.code(), "sender_required");
}

#[tokio::test]
async fn sessions_stale_entries_are_hidden_and_cannot_be_sent_to() {
    let store: Arc<dyn SessionStore> = Arc::new(MemorySessionStore::new());
    let mut settings = open_settings();
    settings.stale_after = Duration::from_millis(300);
    let a = Ses::start(|_| SessionsBuilder::new().settings(settings).store(store.clone())).await;
    let r = a.post_as(CALLER, "/a2a/sessions", json!({"session_key": "quiet", "summary": "goes stale"})).await;
    assert_eq!(r.status, StatusCode::CREATED);
    tokio::time::sleep(Duration::from_millis(400)).await;
    let l = a.get_as(CALLER, "/a2a/sessions?include_self=true").await;
    assert_eq!(l.body["total"], 0, "{}", l.body);
    let s = a.send(json!({"target": "quiet", "text": "hello?"})).await;
    assert_eq!(s.code(), "unknown_session", "{}", s.body);
}

#[tokio::test]
async fn sessions_send_reports_each_outcome_exactly() {
    let a = Ses::start(|_| {
        SessionsBuilder::new()
            .settings(open_settings())
            .session(desk("echo"), echo())
            .session(desk("silent"), reply(" **NO_REPLY** "))
            .session(desk("broken"), |_d: Delivery| async {
                Err::<String, _>(HandlerFailure::Failed("the model is down".into()))
            })
            .session(desk("slow"), |d: Delivery| async move {
                tokio::time::sleep(Duration::from_millis(600)).await;
                Ok::<_, HandlerFailure>(format!("slow: {}", d.text))
            })
    })
    .await;
    let ok = a.send(json!({"target": "echo", "text": "bonus?", "wait_ms": 10000, "max_turns": 0})).await;
    assert_eq!((ok.status, ok.body["status"].as_str()), (StatusCode::OK, Some("ok")), "{}", ok.body);
    assert_eq!(ok.body["reply"], "echo: bonus?");
    assert_eq!(ok.body["target"], format!("{}#echo", a.did));
    // wait_ms 0 (the default): accepted at once, the run stored.
    let acc = a.send(json!({"target": "slow", "text": "later"})).await;
    assert_eq!((acc.status, acc.body["status"].as_str()), (StatusCode::ACCEPTED, Some("accepted")), "{}", acc.body);
    let run = a.done(CALLER, acc.body["run_id"].as_str().expect("run_id")).await;
    assert_eq!((run["status"].as_str(), run["reply"].as_str()), (Some("ok"), Some("slow: later")));
    let silent = a.send(json!({"target": "silent", "text": "anything?", "wait_ms": 10000})).await;
    assert_eq!(silent.body["status"], "no_reply", "{}", silent.body);
    let err = a.send(json!({"target": "broken", "text": "x", "wait_ms": 10000})).await;
    assert_eq!((err.status, err.body["status"].as_str()), (StatusCode::OK, Some("error")), "{}", err.body);
    assert_eq!(err.body["error"]["code"], "handler_failed");
    assert!(err.body["error"]["message"].as_str().unwrap_or("").contains("the model is down"));
    // The run timed out: no reply within run_timeout_ms.
    let t = a.send(json!({"target": "slow", "text": "x", "wait_ms": 10000, "run_timeout_ms": 100})).await;
    assert_eq!((t.status, t.body["status"].as_str()), (StatusCode::OK, Some("timeout")), "{}", t.body);
    assert_eq!(t.body["error"]["code"], "timed_out");
    // Forbidden: a session at another agent that is not on the allow list.
    let f = a
        .post_as(
            "did:web:stranger.example.com",
            "/a2a/sessions/send",
            json!({"target": "echo", "from": "main", "text": "x", "wait_ms": 1000}),
        )
        .await;
    assert_eq!((f.status, f.code()), (StatusCode::FORBIDDEN, "forbidden"), "{}", f.body);
    assert_eq!(f.body["error"]["details"]["side"], "requester");
    let unknown = a.send(json!({"target": "nobody", "text": "x"})).await;
    assert_eq!((unknown.status, unknown.code()), (StatusCode::NOT_FOUND, "unknown_session"));
}

#[tokio::test]
async fn sessions_a_wait_that_ends_first_is_accepted_never_timeout_and_the_late_reply_is_kept() {
    let a = Ses::start(|_| {
        SessionsBuilder::new().settings(open_settings()).session(desk("slow"), |d: Delivery| async move {
            tokio::time::sleep(Duration::from_millis(800)).await;
            Ok::<_, HandlerFailure>(format!("late: {}", d.text))
        })
    })
    .await;
    let s = a.send(json!({"target": "slow", "text": "q", "wait_ms": 100, "run_timeout_ms": 5000})).await;
    assert_eq!((s.status, s.body["status"].as_str()), (StatusCode::ACCEPTED, Some("accepted")), "{}", s.body);
    let id = s.body["run_id"].as_str().expect("run_id").to_owned();
    let seg = a2a_core::execution_id::ExecutionId::parse(&id).expect("id").to_path_segment();
    let r = a.get_as(CALLER, &format!("/a2a/runs/{seg}?wait_ms=5000")).await;
    assert_eq!((r.body["status"].as_str(), r.body["reply"].as_str()), (Some("ok"), Some("late: q")), "{}", r.body);
    // Only the requester or the target's owner reads a run.
    let other = a.get_as("did:web:other.example.com", &format!("/a2a/runs/{seg}")).await;
    assert_eq!((other.status, other.code()), (StatusCode::NOT_FOUND, "unknown_run"));
    let bad = a.get_as(CALLER, "/a2a/runs/not-a-run").await;
    assert_eq!(bad.code(), "unknown_run");
}

#[tokio::test]
async fn sessions_invalid_sends_are_refused_with_the_member() {
    let mut settings = open_settings();
    settings.limits.max_attachment_bytes = 16;
    let a = Ses::start(|_| SessionsBuilder::new().settings(settings).session(desk("echo"), echo())).await;
    for (body, member) in [
        (json!({"text": "x"}), "target"),
        (json!({"target": "echo", "text": ""}), "text"),
        (json!({"target": "echo", "text": "x".repeat(20_001)}), "text"),
        (json!({"target": "echo", "text": "x", "max_turns": 21}), "max_turns"),
        (json!({"target": "echo", "text": "x", "priority": 10}), "priority"),
        (json!({"target": "echo", "text": "x", "run_timeout_ms": 0}), "run_timeout_ms"),
        (json!({"target": "echo", "text": "x", "context_mode": "weird"}), "context_mode"),
        (json!({"target": "echo", "text": "x", "loud": true}), "loud"),
        (
            json!({"target": "echo", "text": "x", "attachments": [{"name": "a", "media_type": "image/png", "data": "%%%"}]}),
            "attachments[0].data",
        ),
        (
            json!({"target": "echo", "text": "x", "attachments": [{"name": "a", "media_type": "png", "data": ""}]}),
            "attachments[0].media_type",
        ),
    ] {
        let r = a.send(body.clone()).await;
        assert_eq!((r.status, r.code()), (StatusCode::BAD_REQUEST, "invalid_request"), "{body}: {}", r.body);
        assert_eq!(r.body["error"]["details"]["member"], member, "{body}: {}", r.body);
    }
    let big = a.send(json!({"target": "echo", "text": "x", "attachments": [{"name": "a.png", "media_type": "image/png", "data": "QUFBQUFBQUFBQUFBQUFBQUFBQUFB"}]})).await;
    assert_eq!((big.status, big.code()), (StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large"), "{}", big.body);
    assert_eq!(big.body["error"]["details"]["limit_bytes"], 16);
    let nine: Vec<Value> =
        (0..9).map(|i| json!({"name": format!("f{i}"), "media_type": "text/plain", "data": "QQ=="})).collect();
    let many = a.send(json!({"target": "echo", "text": "x", "attachments": nine})).await;
    assert_eq!(many.code(), "payload_too_large", "{}", many.body);
    let hop = Ses::answer(
        a.req(Method::POST, "/a2a/sessions/send", CALLER)
            .header("A2A-Hop", "9")
            .json(&json!({"target": "echo", "text": "x"})),
    )
    .await;
    assert_eq!((hop.status, hop.code()), (StatusCode::CONFLICT, "hop_limit"), "{}", hop.body);
    // Attachments within bounds reach the handler.
    let ok = a.send(json!({"target": "echo", "text": "x", "wait_ms": 5000, "attachments": [{"name": "a.txt", "media_type": "text/plain", "data": "QUJD"}]})).await;
    assert_eq!(ok.body["status"], "ok", "{}", ok.body);
}

/// Two agents: `main` at X asks `desk` at Y; both handlers given here. Returns (X, Y).
async fn pair(
    main: impl a2a_server::sessions::SessionHandler,
    desk_handler: impl a2a_server::sessions::SessionHandler,
) -> (Ses, Ses) {
    let x = Ses::start(|_| {
        SessionsBuilder::new()
            .settings(open_settings())
            .session(HostedSession::new("main", "the user's main assistant"), main)
    })
    .await;
    let y = Ses::start(|_| SessionsBuilder::new().settings(open_settings()).session(desk("desk"), desk_handler)).await;
    (x, y)
}

/// A send from X's `main` session to Y's `desk`, as X's agent would make it.
async fn ask(x: &Ses, y: &Ses, body: Value) -> Answer {
    let mut body = body;
    body["target"] = json!("desk");
    body["from"] = json!("main");
    body["from_endpoint"] = json!(format!("{}/a2a", x.base));
    y.post_as(&x.did, "/a2a/sessions/send", body).await
}

#[tokio::test]
async fn sessions_seed_000_no_reply_exchange_stops_after_round_one() {
    // Seed 000: two sessions that answer each other NO_REPLY looped. Here round one's NO_REPLY ends the run.
    let turns = Arc::new(AtomicUsize::new(0));
    let t = turns.clone();
    let (x, y) = pair(
        move |_d: Delivery| {
            t.fetch_add(1, Ordering::SeqCst);
            async { Ok::<_, HandlerFailure>("NO_REPLY".to_owned()) }
        },
        reply("NO_REPLY"),
    )
    .await;
    let s = ask(&x, &y, json!({"text": "Anything new?", "wait_ms": 10000})).await;
    assert_eq!(s.body["status"], "no_reply", "{}", s.body);
    let run = y.done(&x.did, s.body["run_id"].as_str().expect("run_id")).await;
    assert_eq!(run["turns"], json!([]), "{run}");
    assert_eq!(run["ended_by"], "skip_token");
    assert_eq!(run["announce"]["status"], "skipped", "{run}");
    assert_eq!(turns.load(Ordering::SeqCst), 0, "the requester was never asked for a turn");
    // And when round one says something, the requester's NO_REPLY in turn 1 ends it after one turn.
    let (x, y) = pair(reply("no_reply."), reply("The bonus is 5000.")).await;
    let s = ask(&x, &y, json!({"text": "Bonus?", "wait_ms": 10000, "announce": false})).await;
    assert_eq!(s.body["status"], "ok", "{}", s.body);
    let run = y.done(&x.did, s.body["run_id"].as_str().expect("run_id")).await;
    assert_eq!(run["turns"].as_array().map(Vec::len), Some(1), "{run}");
    assert_eq!(run["turns"][0]["session"], format!("{}#main", x.did));
    assert_eq!(run["ended_by"], "skip_token");
}

#[tokio::test]
async fn sessions_ping_pong_ends_on_each_rule() {
    // Distinct replies every time: the exchange runs to max_turns, alternating sides, each told its turn.
    let seen = Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let n = Arc::new(AtomicUsize::new(0));
    let (s1, n1) = (seen.clone(), n.clone());
    let (s2, n2) = (seen.clone(), n.clone());
    let (x, y) = pair(
        move |d: Delivery| {
            s1.lock().expect("lock").push(d.instruction.clone().unwrap_or_default());
            let i = n1.fetch_add(1, Ordering::SeqCst);
            async move { Ok::<_, HandlerFailure>(format!("main says {i}")) }
        },
        move |d: Delivery| {
            if d.step == Step::Reply {
                s2.lock().expect("lock").push(d.instruction.clone().unwrap_or_default());
            }
            let i = n2.fetch_add(1, Ordering::SeqCst);
            async move { Ok::<_, HandlerFailure>(format!("desk says {i}")) }
        },
    )
    .await;
    let s = ask(&x, &y, json!({"text": "chat", "wait_ms": 10000, "max_turns": 3, "announce": false})).await;
    let run = y.done(&x.did, s.body["run_id"].as_str().expect("run_id")).await;
    assert_eq!(run["ended_by"], "max_turns", "{run}");
    let sides: Vec<&str> =
        run["turns"].as_array().expect("turns").iter().map(|t| t["session"].as_str().unwrap_or("")).collect();
    assert_eq!(sides, vec![format!("{}#main", x.did), format!("{}#desk", y.did), format!("{}#main", x.did)]);
    let told = seen.lock().expect("lock").clone();
    assert_eq!(told.len(), 3, "{told:?}");
    assert!(
        told[0].contains("turn 1 of 3") && told[1].contains("turn 2 of 3") && told[2].contains("turn 3 of 3"),
        "{told:?}"
    );
    assert!(told.iter().all(|t| t.contains("REPLY_SKIP")), "each turn is told how to stop: {told:?}");
    // The default is 5 turns, and the cap 20.
    let s = ask(&x, &y, json!({"text": "chat", "wait_ms": 10000, "announce": false})).await;
    let run = y.done(&x.did, s.body["run_id"].as_str().expect("run_id")).await;
    assert_eq!((run["turns"].as_array().map(Vec::len), run["ended_by"].as_str()), (Some(5), Some("max_turns")));

    // An empty reply ends it.
    let (x, y) = pair(reply("   "), reply("round one")).await;
    let s = ask(&x, &y, json!({"text": "q", "wait_ms": 10000, "announce": false})).await;
    let run = y.done(&x.did, s.body["run_id"].as_str().expect("run_id")).await;
    assert_eq!(
        (run["ended_by"].as_str(), run["turns"].as_array().map(Vec::len)),
        (Some("empty_reply"), Some(1)),
        "{run}"
    );
    // Echoing the message it was given is a repeat.
    let (x, y) = pair(
        |d: Delivery| async move { Ok::<_, HandlerFailure>(format!("  {}  ", d.text.to_uppercase())) },
        reply("Same thing"),
    )
    .await;
    let s = ask(&x, &y, json!({"text": "q", "wait_ms": 10000, "announce": false})).await;
    let run = y.done(&x.did, s.body["run_id"].as_str().expect("run_id")).await;
    assert_eq!((run["ended_by"].as_str(), run["turns"].as_array().map(Vec::len)), (Some("repeat"), Some(1)), "{run}");
    // The target saying its previous reply again is a repeat too.
    let c = Arc::new(AtomicUsize::new(0));
    let (x, y) = pair(
        move |_d: Delivery| {
            let i = c.fetch_add(1, Ordering::SeqCst);
            async move { Ok::<_, HandlerFailure>(format!("question {i}")) }
        },
        reply("I told you: 5000."),
    )
    .await;
    let s = ask(&x, &y, json!({"text": "q", "wait_ms": 10000, "announce": false})).await;
    let run = y.done(&x.did, s.body["run_id"].as_str().expect("run_id")).await;
    assert_eq!((run["ended_by"].as_str(), run["turns"].as_array().map(Vec::len)), (Some("repeat"), Some(2)), "{run}");
    // No `from`: nobody to talk back to. An unreachable requester: not_reachable.
    let s = y.send(json!({"target": "desk", "text": "q", "wait_ms": 10000, "announce": false})).await;
    let run = y.done(CALLER, s.body["run_id"].as_str().expect("run_id")).await;
    assert_eq!(run["ended_by"], "reply_not_wanted", "{run}");
    let s = y
        .post_as(
            "did:web:localhost%3A1",
            "/a2a/sessions/send",
            json!({"target": "desk", "from": "main", "text": "q", "wait_ms": 10000, "announce": false}),
        )
        .await;
    let run = y.done("did:web:localhost%3A1", s.body["run_id"].as_str().expect("run_id")).await;
    assert_eq!(run["ended_by"], "not_reachable", "{run}");
    // A turn that fails ends the exchange with error; round one's outcome stands.
    let (x, y) =
        pair(|_d: Delivery| async { Err::<String, _>(HandlerFailure::Failed("no".into())) }, reply("round one")).await;
    let s = ask(&x, &y, json!({"text": "q", "wait_ms": 10000, "announce": false})).await;
    let run = y.done(&x.did, s.body["run_id"].as_str().expect("run_id")).await;
    assert_eq!((run["status"].as_str(), run["ended_by"].as_str()), (Some("ok"), Some("error")), "{run}");
}

/// Reads SSE events until `n` events with ids arrived (or 10 s passed).
/// The SSE events of a response, `(id, event, data)`, until `n` are read or 10 s pass.
pub async fn read_events(resp: &mut reqwest::Response, n: usize) -> Vec<(String, String, Value)> {
    read_events_to_end(resp, n).await.0
}

/// [`read_events`], and whether the stream ended (rather than `n` being read or the time passing).
pub async fn read_events_to_end(resp: &mut reqwest::Response, n: usize) -> (Vec<(String, String, Value)>, bool) {
    let mut buf = String::new();
    let mut out = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while out.len() < n {
        let chunk = match tokio::time::timeout_at(deadline, resp.chunk()).await {
            Err(_) => return (out, false),
            Ok(Ok(Some(c))) => c,
            Ok(_) => return (out, true),
        };
        buf.push_str(&String::from_utf8_lossy(&chunk));
        while let Some(i) = buf.find("\n\n") {
            let block: String = buf.drain(..i + 2).collect();
            let (mut id, mut ev, mut data) = (String::new(), String::new(), Value::Null);
            for line in block.lines() {
                if let Some(v) = line.strip_prefix("id: ") {
                    id = v.to_owned();
                } else if let Some(v) = line.strip_prefix("event: ") {
                    ev = v.to_owned();
                } else if let Some(v) = line.strip_prefix("data: ") {
                    data = serde_json::from_str(v).unwrap_or(Value::Null);
                }
            }
            if !ev.is_empty() {
                out.push((id, ev, data));
            }
        }
    }
    (out, false)
}

pub async fn stream(a: &Ses, sender: &str, query: &str, last: Option<&str>) -> reqwest::Response {
    let mut rb = a.req(Method::GET, &format!("/a2a/events{query}"), sender);
    if let Some(l) = last {
        rb = rb.header("Last-Event-ID", l);
    }
    let mut resp = rb.send().await.expect("events");
    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(resp.headers()["content-type"], "text/event-stream");
    if last.is_none() {
        // A fresh stream starts with a comment once it is live: what happens from now on follows.
        let first = resp.chunk().await.expect("chunk").expect("a first chunk");
        assert!(String::from_utf8_lossy(&first).starts_with(':'));
    }
    resp
}

#[tokio::test]
async fn sessions_the_four_modes_and_the_announce_channel() {
    let asked = Arc::new(std::sync::Mutex::new(Vec::<Delivery>::new()));
    let log = asked.clone();
    let (x, y) = pair(reply("REPLY_SKIP"), move |d: Delivery| {
        log.lock().expect("lock").push(d.clone());
        async move {
            Ok::<_, HandlerFailure>(match d.step {
                Step::Announce => format!("Told the boss: {}", d.round_one.unwrap_or_default()),
                _ => "The bonus is 5000.".to_owned(),
            })
        }
    })
    .await;
    let mut events = stream(&y, &x.did, "?session=desk", None).await;
    // collaboration: reply, ping-pong, announce
    let s = ask(&x, &y, json!({"text": "Bonus?", "wait_ms": 10000})).await;
    assert_eq!(s.body["status"], "ok");
    let run = y.done(&x.did, s.body["run_id"].as_str().expect("run_id")).await;
    assert_eq!(
        (run["ended_by"].as_str(), run["turns"].as_array().map(Vec::len)),
        (Some("skip_token"), Some(1)),
        "{run}"
    );
    assert_eq!(run["announce"]["status"], "published", "{run}");
    assert_eq!(run["announce"]["text"], "Told the boss: The bonus is 5000.");
    let got = read_events(&mut events, 2).await;
    assert_eq!(got[0].1, "announce", "{got:?}");
    assert_eq!(got[0].2["text"], "Told the boss: The bonus is 5000.");
    assert_eq!(got[0].2["provenance"]["is_user"], false);
    assert_eq!(got[0].0, run["announce"]["event_id"].as_str().unwrap_or(""));
    assert_eq!((got[1].1.as_str(), got[1].2["run_id"].as_str()), ("run", run["run_id"].as_str()));
    {
        let a = asked.lock().expect("lock");
        let ann = a.iter().find(|d| d.step == Step::Announce).expect("an announce step");
        assert_eq!(
            (ann.original.as_deref(), ann.round_one.as_deref(), ann.last.as_deref()),
            (Some("Bonus?"), Some("The bonus is 5000."), Some("REPLY_SKIP"))
        );
        assert!(ann.instruction.as_deref().unwrap_or("").contains("ANNOUNCE_SKIP"));
    }
    // task dispatch: accepted at once whatever the wait; the target works and announces; no ping-pong.
    let s = ask(&x, &y, json!({"text": "File it.", "reply": false, "wait_ms": 10000})).await;
    assert_eq!((s.status, s.body["status"].as_str()), (StatusCode::ACCEPTED, Some("accepted")));
    let run = y.done(&x.did, s.body["run_id"].as_str().expect("run_id")).await;
    assert_eq!(
        (run["ended_by"].as_str(), run["announce"]["status"].as_str()),
        (Some("reply_not_wanted"), Some("published")),
        "{run}"
    );
    assert_eq!(run["turns"], json!([]));
    // silent verification: reply and ping-pong, nothing published.
    let s = ask(&x, &y, json!({"text": "Check?", "announce": false, "wait_ms": 10000})).await;
    assert_eq!(s.body["status"], "ok");
    let run = y.done(&x.did, s.body["run_id"].as_str().expect("run_id")).await;
    assert_eq!(
        (run["announce"]["status"].as_str(), run["turns"].as_array().map(Vec::len)),
        (Some("not_requested"), Some(1)),
        "{run}"
    );
    // telemetry: accepted, processed, nothing else.
    let s = ask(&x, &y, json!({"text": "FYI", "announce": false, "reply": false})).await;
    assert_eq!(s.status, StatusCode::ACCEPTED);
    let run = y.done(&x.did, s.body["run_id"].as_str().expect("run_id")).await;
    assert_eq!(
        (run["status"].as_str(), run["announce"]["status"].as_str()),
        (Some("ok"), Some("not_requested")),
        "{run}"
    );
    // Events after the first: the task dispatch announce, then run events only.
    let got = read_events(&mut events, 4).await;
    let kinds: Vec<&str> = got.iter().map(|e| e.1.as_str()).collect();
    assert_eq!(kinds, vec!["announce", "run", "run", "run"], "{got:?}");
    // Resume: Last-Event-ID gives every later event, in order, without duplicates.
    let mut again = stream(&y, &x.did, "?session=desk", Some("0")).await;
    let all = read_events(&mut again, 6).await;
    let ids: Vec<u64> = all.iter().map(|e| e.0.parse().expect("id")).collect();
    assert_eq!(ids.len(), 6, "{all:?}");
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "{ids:?}");
    let mut tail = stream(&y, &x.did, "?session=desk", Some(&ids[3].to_string())).await;
    let rest = read_events(&mut tail, 2).await;
    assert_eq!(rest.iter().map(|e| e.0.parse::<u64>().expect("id")).collect::<Vec<_>>(), ids[4..].to_vec());
    // An ANNOUNCE_SKIP answer publishes nothing.
    let (x, y) = pair(reply("REPLY_SKIP"), |d: Delivery| async move {
        Ok::<_, HandlerFailure>(if d.step == Step::Announce { "`ANNOUNCE_SKIP`".into() } else { "fine".into() })
    })
    .await;
    let s = ask(&x, &y, json!({"text": "q", "wait_ms": 10000})).await;
    let run = y.done(&x.did, s.body["run_id"].as_str().expect("run_id")).await;
    assert_eq!(run["announce"]["status"], "skipped", "{run}");
}

#[tokio::test]
async fn sessions_event_buffer_gap_is_reported() {
    let mut settings = open_settings();
    settings.limits.event_buffer = 2;
    let a = Ses::start(|_| SessionsBuilder::new().settings(settings).session(desk("echo"), echo())).await;
    for i in 0..3 {
        let s = a.send(json!({"target": "echo", "text": format!("m{i}"), "announce": false})).await;
        a.done(CALLER, s.body["run_id"].as_str().expect("run_id")).await;
    }
    let mut resp = stream(&a, CALLER, "", Some("0")).await;
    let got = read_events(&mut resp, 3).await;
    assert_eq!(got[0].1, "gap", "{got:?}");
    assert_eq!(got[1..].iter().map(|e| e.0.as_str()).collect::<Vec<_>>(), vec!["2", "3"]);
}

#[tokio::test]
async fn sessions_history_is_bounded_flagged_and_redacted() {
    let a = Ses::start(|_| {
        SessionsBuilder::new().settings(open_settings()).session(desk("finance"), |d: Delivery| async move {
            Ok::<_, HandlerFailure>(if d.text == "long" { "y".repeat(5000) } else { format!("spent {}", d.text) })
        })
    })
    .await;
    let s = a.send(json!({"target": "finance", "text": "my password=hunter2, token: abc.def.ghi", "wait_ms": 5000, "announce": false})).await;
    assert_eq!(s.body["status"], "ok", "{}", s.body);
    let s = a.send(json!({"target": "finance", "text": "long", "wait_ms": 5000, "announce": false})).await;
    assert_eq!(s.body["status"], "ok");
    let h = a.get_as(CALLER, "/a2a/sessions/finance/history").await;
    assert_eq!(h.status, StatusCode::OK, "{}", h.body);
    let msgs = h.body["messages"].as_array().expect("messages");
    assert_eq!(msgs.len(), 4, "{}", h.body);
    assert_eq!((msgs[0]["role"].as_str(), msgs[1]["role"].as_str()), (Some("inter_session"), Some("assistant")));
    assert_eq!(msgs[0]["provenance"]["source_tool"], "sessions_send");
    assert_eq!(msgs[0]["provenance"]["is_user"], false);
    let first = msgs[0]["text"].as_str().unwrap_or("");
    assert!(!first.contains("hunter2") && first.contains("[REDACTED]"), "{first}");
    assert!(h.body["redacted"].as_u64().unwrap_or(0) >= 2, "{}", h.body);
    assert_eq!((msgs[3]["truncated"].as_bool(), msgs[3]["original_chars"].as_u64()), (Some(true), Some(5000)));
    assert_eq!(msgs[3]["text"].as_str().map(|t| t.chars().count()), Some(4000));
    assert_eq!((h.body["truncated"].as_bool(), h.body["bytes_capped"].as_bool()), (Some(false), Some(false)));
    let h = a.get_as(CALLER, "/a2a/sessions/finance/history?limit=2").await;
    assert_eq!((h.body["messages"].as_array().map(Vec::len), h.body["truncated"].as_bool()), (Some(2), Some(true)));
    assert_eq!(h.body["messages"][0]["seq"], 3, "newest last, the oldest left out: {}", h.body);
    let h = a.get_as(CALLER, "/a2a/sessions/finance/history?max_bytes=1000").await;
    assert_eq!(h.body["bytes_capped"], true, "{}", h.body);
    assert!(serde_json::to_vec(&h.body["messages"]).expect("json").len() <= 1000);
    for bad in ["limit=0", "limit=1001", "max_bytes=0", "include_tools=maybe"] {
        let r = a.get_as(CALLER, &format!("/a2a/sessions/finance/history?{bad}")).await;
        assert_eq!(r.code(), "invalid_request", "{bad}");
    }
    let r = a.get_as(CALLER, "/a2a/sessions/nobody/history").await;
    assert_eq!(r.code(), "unknown_session");
}

#[tokio::test]
async fn sessions_history_keeps_at_most_the_configured_messages_and_tools_are_optional() {
    let mut settings = open_settings();
    settings.limits.max_transcript_messages = 3;
    let store = Arc::new(MemorySessionStore::new());
    let a =
        Ses::start(|_| SessionsBuilder::new().settings(settings).store(store.clone()).session(desk("echo"), echo()))
            .await;
    for i in 0..3 {
        let s = a.send(json!({"target": "echo", "text": format!("m{i}"), "wait_ms": 5000, "announce": false})).await;
        assert_eq!(s.body["status"], "ok");
    }
    let addr = format!("{}#echo", a.did);
    let tool = a2a_server::sessions::store::StoredMessage {
        role: a2a_core::sessions::Role::Tool,
        text: "tool output".into(),
        run_id: None,
        provenance: None,
    };
    store.append_message(&addr, &tool, 3).await.expect("append");
    let h = a.get_as(CALLER, "/a2a/sessions/echo/history").await;
    let seqs: Vec<u64> =
        h.body["messages"].as_array().expect("m").iter().map(|m| m["seq"].as_u64().unwrap_or(0)).collect();
    assert_eq!(seqs, vec![5, 6], "the tool message (7) is left out and only 3 are kept: {}", h.body);
    let h = a.get_as(CALLER, "/a2a/sessions/echo/history?include_tools=true").await;
    assert_eq!(h.body["messages"].as_array().map(Vec::len), Some(3));
    assert_eq!(h.body["messages"][2]["role"], "tool");
}

#[tokio::test]
async fn sessions_spawn_runs_a_worker_announces_back_and_keeps_its_limits() {
    let mut settings = open_settings();
    settings.limits.max_children = 2;
    settings.limits.max_spawn_concurrency = 3;
    settings.limits.max_spawn_depth = 1;
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    let g = gate.clone();
    let a = Ses::start(move |_| {
        SessionsBuilder::new().settings(settings).spawn_template("price-check", move |d: Delivery| {
            let g = g.clone();
            async move {
                if d.text.contains("wait") {
                    let _permit = g.acquire().await;
                }
                if d.text.contains("quiet") {
                    return Ok::<_, HandlerFailure>("ANNOUNCE_SKIP".to_owned());
                }
                Ok::<_, HandlerFailure>(format!("price of {}: 42", d.text))
            }
        })
    })
    .await;
    let own = a
        .post_as(CALLER, "/a2a/sessions", json!({"session_key": "main", "summary": "the caller's main session"}))
        .await;
    assert_eq!(own.status, StatusCode::CREATED);
    let mut events = stream(&a, CALLER, "?session=main", None).await;
    let sp = a
        .post_as(
            CALLER,
            "/a2a/sessions/spawn",
            json!({"parent": "main", "task": "milk", "label": "price", "cleanup": "keep"}),
        )
        .await;
    assert_eq!((sp.status, sp.body["status"].as_str()), (StatusCode::ACCEPTED, Some("accepted")), "{}", sp.body);
    let child = sp.body["child_session_key"].as_str().expect("child").to_owned();
    let run = a.done(CALLER, sp.body["run_id"].as_str().expect("run_id")).await;
    assert_eq!(run["reply"], "price of milk: 42");
    let got = read_events(&mut events, 1).await;
    assert_eq!(
        (got[0].1.as_str(), got[0].2["child"].as_str()),
        ("spawn", Some(format!("{}#{child}", a.did).as_str())),
        "{got:?}"
    );
    assert_eq!(got[0].2["reply"], "price of milk: 42");
    // Delivered to the parent as an inter_session message with spawn provenance.
    let h = a.get_as(CALLER, "/a2a/sessions/main/history").await;
    let last = h.body["messages"].as_array().and_then(|m| m.last().cloned()).expect("a message");
    assert_eq!(
        (last["role"].as_str(), last["provenance"]["source_tool"].as_str()),
        (Some("inter_session"), Some("sessions_spawn"))
    );
    // The worker ended (before its run was shown done, SPN-4); `keep` kept its transcript and it is listed with
    // include_ended.
    let gone = a.get_as(CALLER, &format!("/a2a/sessions/{child}")).await;
    assert_eq!(gone.code(), "unknown_session");
    let h = a.get_as(CALLER, &format!("/a2a/sessions/{child}/history")).await;
    assert_eq!(h.body["messages"].as_array().map(Vec::len), Some(2), "{}", h.body);
    let l = a.get_as(CALLER, "/a2a/sessions?include_self=true&include_ended=true&kind=spawn").await;
    assert_eq!(l.body["total"], 1, "{}", l.body);
    // cleanup delete: transcript gone; a skip-token result announces nothing.
    let sp = a
        .post_as(CALLER, "/a2a/sessions/spawn", json!({"parent": "main", "task": "quiet one", "cleanup": "delete"}))
        .await;
    let child2 = sp.body["child_session_key"].as_str().expect("child").to_owned();
    a.done(CALLER, sp.body["run_id"].as_str().expect("run_id")).await;
    let h = a.get_as(CALLER, &format!("/a2a/sessions/{child2}/history")).await;
    assert_eq!(h.body["messages"], json!([]), "{}", h.body);
    let h = a.get_as(CALLER, "/a2a/sessions/main/history").await;
    assert_eq!(h.body["messages"].as_array().map(Vec::len), Some(1), "nothing announced back: {}", h.body);
    // Limits: children of one parent, depth, concurrency.
    let w1 = a.post_as(CALLER, "/a2a/sessions/spawn", json!({"parent": "main", "task": "wait 1"})).await;
    let w2 = a.post_as(CALLER, "/a2a/sessions/spawn", json!({"parent": "main", "task": "wait 2"})).await;
    assert_eq!((w1.status, w2.status), (StatusCode::ACCEPTED, StatusCode::ACCEPTED));
    let w3 = a.post_as(CALLER, "/a2a/sessions/spawn", json!({"parent": "main", "task": "wait 3"})).await;
    assert_eq!((w3.status, w3.code()), (StatusCode::TOO_MANY_REQUESTS, "spawn_limit"), "{}", w3.body);
    assert_eq!(w3.body["error"]["details"]["limit"], "children");
    let other = a.post_as(CALLER, "/a2a/sessions", json!({"session_key": "other", "summary": "another parent"})).await;
    assert_eq!(other.status, StatusCode::CREATED);
    let w4 = a.post_as(CALLER, "/a2a/sessions/spawn", json!({"parent": "other", "task": "wait 4"})).await;
    assert_eq!(w4.status, StatusCode::ACCEPTED);
    let w5 = a.post_as(CALLER, "/a2a/sessions/spawn", json!({"parent": "other", "task": "wait 5"})).await;
    assert_eq!(
        (w5.code(), w5.body["error"]["details"]["limit"].as_str()),
        ("spawn_limit", Some("concurrency")),
        "{}",
        w5.body
    );
    let child1 = w1.body["child_session_key"].as_str().expect("child").to_owned();
    let deep = a.post_as(CALLER, "/a2a/sessions/spawn", json!({"parent": child1, "task": "deeper"})).await;
    assert_eq!(
        (deep.code(), deep.body["error"]["details"]["limit"].as_str()),
        ("spawn_limit", Some("depth")),
        "{}",
        deep.body
    );
    gate.add_permits(10);
    for w in [&w1, &w2, &w4] {
        a.done(CALLER, w.body["run_id"].as_str().expect("run_id")).await;
    }
    let t = a.post_as(CALLER, "/a2a/sessions/spawn", json!({"parent": "main", "task": "x", "template": "nope"})).await;
    assert_eq!((t.code(), t.body["error"]["details"]["member"].as_str()), ("invalid_request", Some("template")));
    let t = a.post_as(CALLER, "/a2a/sessions/spawn", json!({"parent": "nope", "task": "x"})).await;
    assert_eq!(t.code(), "unknown_session");
}

#[tokio::test]
async fn sessions_a_worker_past_its_run_timeout_ends_timeout() {
    let a = Ses::start(|_| {
        SessionsBuilder::new().settings(open_settings()).spawn_template("slow", |_d: Delivery| async {
            tokio::time::sleep(Duration::from_secs(5)).await;
            Ok::<_, HandlerFailure>("too late".to_owned())
        })
    })
    .await;
    let own = a.post_as(CALLER, "/a2a/sessions", json!({"session_key": "main", "summary": "the caller's main"})).await;
    assert_eq!(own.status, StatusCode::CREATED);
    let sp =
        a.post_as(CALLER, "/a2a/sessions/spawn", json!({"parent": "main", "task": "x", "run_timeout_ms": 100})).await;
    let run = a.done(CALLER, sp.body["run_id"].as_str().expect("run_id")).await;
    assert_eq!(run["status"], "timeout", "{run}");
}

#[tokio::test]
async fn sessions_policy_allow_list_both_sides_and_visibility() {
    // The default allow list is empty: same-agent traffic only.
    let mut closed = open_settings();
    closed.allow_list = a2a_core::sessions::AllowList::default();
    closed.visibility = Visibility::Agent;
    let a = Ses::start(|_| {
        SessionsBuilder::new().settings(closed).session(desk("desk"), echo()).session(desk("peer"), echo())
    })
    .await;
    let f = a.send(json!({"target": "desk", "from": "main", "text": "x"})).await;
    assert_eq!((f.status, f.code()), (StatusCode::FORBIDDEN, "forbidden"), "{}", f.body);
    // Same agent: allowed.
    let ok = a
        .post_as(&a.did, "/a2a/sessions/send", json!({"target": "desk", "from": "peer", "text": "x", "wait_ms": 5000}))
        .await;
    assert_eq!(ok.body["status"], "ok", "{}", ok.body);
    // Visibility agent: another agent sees nothing, and the history is 404 as if it did not exist.
    let l = a.get_as(CALLER, "/a2a/sessions").await;
    assert_eq!(l.body["total"], 0, "{}", l.body);
    let h = a.get_as(CALLER, "/a2a/sessions/desk/history").await;
    assert_eq!(h.code(), "unknown_session");
    let l = a.get_as(&a.did, "/a2a/sessions?include_self=true").await;
    assert_eq!(l.body["total"], 2, "{}", l.body);

    // Only the target side on the list: refused, naming the side.
    let mut half = open_settings();
    half.allow_list = a2a_core::sessions::AllowList(vec!["did:web:localhost*#desk".into()]);
    let b = Ses::start(|_| {
        SessionsBuilder::new().settings(half).session(desk("desk"), echo()).session(desk("private"), echo())
    })
    .await;
    let f = b.send(json!({"target": "desk", "from": "main", "text": "x"})).await;
    assert_eq!((f.code(), f.body["error"]["details"]["side"].as_str()), ("forbidden", Some("requester")), "{}", f.body);
    let mut both = open_settings();
    both.allow_list =
        a2a_core::sessions::AllowList(vec!["did:web:localhost*#desk".into(), "did:web:caller.example.com#*".into()]);
    let c = Ses::start(|_| {
        SessionsBuilder::new().settings(both).session(desk("desk"), echo()).session(desk("private"), echo())
    })
    .await;
    let ok = c.send(json!({"target": "desk", "from": "main", "text": "x", "wait_ms": 5000})).await;
    assert_eq!(ok.body["status"], "ok", "{}", ok.body);
    let f = c.send(json!({"target": "private", "from": "main", "text": "x"})).await;
    assert_eq!((f.code(), f.body["error"]["details"]["side"].as_str()), ("forbidden", Some("target")), "{}", f.body);
    // Visibility all lists what the allow list permits.
    let l = c.get_as(CALLER, "/a2a/sessions?from=main").await;
    let keys: Vec<&str> =
        l.body["sessions"].as_array().expect("s").iter().map(|s| s["session_key"].as_str().unwrap_or("")).collect();
    assert_eq!(keys, vec!["desk"], "{}", l.body);

    // Visibility self and tree.
    let mut own = open_settings();
    own.visibility = Visibility::Own;
    let d = Ses::start(|_| SessionsBuilder::new().settings(own).session(desk("desk"), echo())).await;
    let r = d.post_as(CALLER, "/a2a/sessions", json!({"session_key": "mine", "summary": "my own inbox"})).await;
    assert_eq!(r.status, StatusCode::CREATED);
    let h = d.get_as(CALLER, "/a2a/sessions/desk/history?from=mine").await;
    assert_eq!(h.code(), "unknown_session", "{}", h.body);
    let h = d.get_as(CALLER, "/a2a/sessions/mine/history?from=mine").await;
    assert_eq!(h.status, StatusCode::OK, "{}", h.body);
    let mut tree = open_settings();
    tree.visibility = Visibility::Tree;
    let e = Ses::start(|_| SessionsBuilder::new().settings(tree).spawn_template("w", reply("done"))).await;
    e.post_as(CALLER, "/a2a/sessions", json!({"session_key": "root", "summary": "the root session"})).await;
    e.post_as(CALLER, "/a2a/sessions", json!({"session_key": "sibling", "summary": "another session"})).await;
    let sp = e.post_as(CALLER, "/a2a/sessions/spawn", json!({"parent": "root", "task": "t"})).await;
    let child = sp.body["child_session_key"].as_str().expect("child").to_owned();
    e.done(CALLER, sp.body["run_id"].as_str().expect("run_id")).await;
    let h = e.get_as(CALLER, &format!("/a2a/sessions/{child}/history?from=root")).await;
    assert_eq!(h.status, StatusCode::OK, "a spawned child is in the tree: {}", h.body);
    let h = e.get_as(CALLER, &format!("/a2a/sessions/{child}/history?from=sibling")).await;
    assert_eq!(h.code(), "unknown_session", "{}", h.body);
}

#[tokio::test]
async fn sessions_wait_cycles_are_refused_at_once() {
    // SND-4: waiting on itself.
    let a = Ses::start(|_| SessionsBuilder::new().settings(open_settings()).session(desk("desk"), echo())).await;
    let r = a
        .post_as(&a.did, "/a2a/sessions/send", json!({"target": "desk", "from": "desk", "text": "x", "wait_ms": 1000}))
        .await;
    assert_eq!((r.status, r.code()), (StatusCode::CONFLICT, "wait_cycle"), "{}", r.body);
    let r = a.post_as(&a.did, "/a2a/sessions/send", json!({"target": "desk", "from": "desk", "text": "x"})).await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "without a wait it is fine: {}", r.body);
    // POL-5: the target already in the chain.
    let chain = format!("{}#main, {}#desk", CALLER, a.did);
    let started = std::time::Instant::now();
    let r = Ses::answer(
        a.req(Method::POST, "/a2a/sessions/send", CALLER)
            .header("A2A-Wait-Chain", chain)
            .json(&json!({"target": "desk", "from": "other", "text": "x", "wait_ms": 30000})),
    )
    .await;
    assert_eq!((r.status, r.code()), (StatusCode::CONFLICT, "wait_cycle"), "{}", r.body);
    assert_eq!(r.body["error"]["details"]["cycle"][0], format!("{}#desk", a.did));
    assert!(started.elapsed() < Duration::from_secs(5), "refused at once");
    let r = Ses::answer(
        a.req(Method::POST, "/a2a/sessions/send", CALLER)
            .header("A2A-Wait-Chain", "not a chain")
            .json(&json!({"target": "desk", "text": "x"})),
    )
    .await;
    assert_eq!(r.code(), "invalid_header");

    // Through a third agent: A's handler waits on B, B's on C, C's on A. The handlers pass the chain on
    // (current_wait_chain), so C's send to A is refused at once, and each run ends with the refusal as its text.
    async fn ask_next(from: &str, endpoint: String, me: String) -> Result<String, HandlerFailure> {
        let chain = current_wait_chain().unwrap_or_default();
        let http = reqwest::Client::new();
        let resp = http.post(format!("{endpoint}/sessions/send"))
            .header("A2A-Version", "0.3").header("A2A-Sender-ID", me).header("A2A-Wait-Chain", chain)
            .json(&json!({"target": "desk", "from": from, "text": "what do you know?", "wait_ms": 20000, "max_turns": 0, "announce": false}))
            .send().await.map_err(|e| HandlerFailure::Failed(e.to_string()))?;
        let v: Value = resp.json().await.map_err(|e| HandlerFailure::Failed(e.to_string()))?;
        Ok(format!(
            "{} {}",
            v["status"].as_str().or(v["error"]["code"].as_str()).unwrap_or("?"),
            v["reply"].as_str().unwrap_or("")
        ))
    }
    let slot: Arc<std::sync::Mutex<Vec<(String, String)>>> = Arc::default();
    let mut agents = Vec::new();
    for i in 0..3 {
        let slot = slot.clone();
        let ag = Ses::start(move |did| {
            let did = did.to_owned();
            SessionsBuilder::new().settings(open_settings()).session(desk("desk"), move |_d: Delivery| {
                let slot = slot.clone();
                let did = did.clone();
                async move {
                    let next = slot.lock().expect("lock")[i].clone();
                    let _ = did;
                    ask_next("desk", next.1, next.0).await
                }
            })
        })
        .await;
        agents.push(ag);
    }
    {
        let mut s = slot.lock().expect("lock");
        // Each handler sends as its own agent (the requester), to the next agent's endpoint.
        for i in 0..3 {
            s.push((agents[i].did.clone(), format!("{}/a2a", agents[(i + 1) % 3].base)));
        }
    }
    let started = std::time::Instant::now();
    let r = agents[0].post_as(CALLER, "/a2a/sessions/send", json!({"target": "desk", "from": "user", "text": "start", "wait_ms": 20000, "max_turns": 0, "announce": false})).await;
    assert!(started.elapsed() < Duration::from_secs(10), "no time-out wait: {:?}", started.elapsed());
    assert_eq!(r.body["status"], "ok", "{}", r.body);
    // A -> B -> C -> A: C's send was refused with wait_cycle, which travelled back as text.
    assert!(r.body["reply"].as_str().unwrap_or("").contains("wait_cycle"), "{}", r.body);
}

#[tokio::test]
async fn sessions_wait_edges_in_a_shared_store_catch_cycles_without_the_header() {
    // POL-6: two agents on one store; the handlers do NOT pass the chain on.
    let store: Arc<dyn SessionStore> = Arc::new(MemorySessionStore::new());
    let targets: Arc<std::sync::Mutex<Vec<String>>> = Arc::default();
    let mut agents = Vec::new();
    for i in 0..2usize {
        let (store, targets) = (store.clone(), targets.clone());
        let ag = Ses::start(move |did| {
            let did = did.to_owned();
            SessionsBuilder::new().settings(open_settings()).store(store).session(desk("desk"), move |_d: Delivery| {
                let (targets, did) = (targets.clone(), did.clone());
                async move {
                    let endpoint = targets.lock().expect("lock")[1 - i].clone();
                    let v: Value = reqwest::Client::new().post(format!("{endpoint}/sessions/send"))
                        .header("A2A-Version", "0.3").header("A2A-Sender-ID", did)
                        .json(&json!({"target": "desk", "from": "desk", "text": "and you?", "wait_ms": 20000, "max_turns": 0, "announce": false}))
                        .send().await.map_err(|e| HandlerFailure::Failed(e.to_string()))?
                        .json().await.map_err(|e| HandlerFailure::Failed(e.to_string()))?;
                    Ok::<_, HandlerFailure>(v["status"].as_str().or(v["error"]["code"].as_str()).unwrap_or("?").to_owned())
                }
            })
        })
        .await;
        agents.push(ag);
    }
    *targets.lock().expect("lock") = agents.iter().map(|a| format!("{}/a2a", a.base)).collect();
    let started = std::time::Instant::now();
    // The test client (at agent 1's DID, session desk) waits on agent 0's desk, whose handler waits on agent 1's desk,
    // whose handler's send back to agent 0's desk closes the cycle.
    let r = agents[0].post_as(&agents[1].did, "/a2a/sessions/send", json!({"target": "desk", "from": "desk", "text": "go", "wait_ms": 20000, "max_turns": 0, "announce": false})).await;
    assert!(started.elapsed() < Duration::from_secs(10));
    assert_eq!(r.body["status"], "ok", "{}", r.body);
    assert_eq!(r.body["reply"], "wait_cycle", "{}", r.body);
}

#[tokio::test]
async fn sessions_inbox_sessions_are_answered_by_their_owner() {
    let a = Ses::start(|_| SessionsBuilder::new().settings(open_settings()).session(desk("main"), echo())).await;
    const OWNER: &str = "did:web:plugin.example.com";
    let r = a
        .post_as(
            OWNER,
            "/a2a/sessions",
            json!({"session_key": "opencode", "summary": "an OpenCode session", "label": "coder"}),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    let owner = OWNER.to_owned();
    let a2 = a.http.clone();
    let base = a.base.clone();
    let answering = tokio::spawn(async move {
        let inbox: Value = a2
            .get(format!("{base}/a2a/sessions/opencode/inbox?wait_ms=10000"))
            .header("A2A-Version", "0.3")
            .header("A2A-Sender-ID", &owner)
            .send()
            .await
            .expect("inbox")
            .json()
            .await
            .expect("json");
        let d = inbox["deliveries"][0].clone();
        assert_eq!(d["text"], "Review this diff", "{inbox}");
        assert_eq!(d["provenance"]["is_user"], false);
        let run_id = d["run_id"].as_str().expect("run_id").to_owned();
        let seg = a2a_core::execution_id::ExecutionId::parse(&run_id).expect("id").to_path_segment();
        // SES-5: another sender answering the run is told there is no such run, and the delivery stays.
        let other = a2
            .post(format!("{base}/a2a/runs/{seg}/reply"))
            .header("A2A-Version", "0.3")
            .header("A2A-Sender-ID", "did:web:someone-else.example.com")
            .json(&json!({"reply": "Not mine to answer."}))
            .send()
            .await
            .expect("reply by another");
        assert_eq!(other.status(), StatusCode::NOT_FOUND);
        let other: Value = other.json().await.expect("json");
        assert_eq!(other["error"]["code"], "unknown_run", "{other}");
        let r = a2
            .post(format!("{base}/a2a/runs/{seg}/reply"))
            .header("A2A-Version", "0.3")
            .header("A2A-Sender-ID", &owner)
            .json(&json!({"reply": "Looks good."}))
            .send()
            .await
            .expect("reply");
        assert_eq!(r.status(), StatusCode::OK);
    });
    let s =
        a.send(json!({"target_label": "coder", "text": "Review this diff", "wait_ms": 10000, "announce": false})).await;
    assert_eq!((s.body["status"].as_str(), s.body["reply"].as_str()), (Some("ok"), Some("Looks good.")), "{}", s.body);
    answering.await.expect("answered");
    // Others cannot read the inbox.
    let r = a.get_as(CALLER, "/a2a/sessions/opencode/inbox").await;
    assert_eq!(r.code(), "unknown_session");
    // Nobody answers: the run times out, and the delivery leaves the inbox.
    let s = a.send(json!({"target": "opencode", "text": "anyone?", "wait_ms": 10000, "run_timeout_ms": 200})).await;
    assert_eq!(s.body["status"], "timeout", "{}", s.body);
    let inbox = a.get_as(OWNER, "/a2a/sessions/opencode/inbox").await;
    assert_eq!(inbox.body["deliveries"], json!([]));
    // The session ends while a run waits on it: error session_ended.
    let pending = a.send(json!({"target": "opencode", "text": "still there?", "run_timeout_ms": 10000})).await;
    let ended = Ses::answer(a.req(Method::DELETE, "/a2a/sessions/opencode", OWNER)).await;
    assert_eq!(ended.status, StatusCode::OK);
    let run = a.done(CALLER, pending.body["run_id"].as_str().expect("run_id")).await;
    assert_eq!(
        (run["status"].as_str(), run["error"]["code"].as_str()),
        (Some("error"), Some("session_ended")),
        "{run}"
    );
    // Ambiguous labels.
    a.post_as(OWNER, "/a2a/sessions", json!({"session_key": "one", "summary": "first of two", "label": "twin"})).await;
    a.post_as(OWNER, "/a2a/sessions", json!({"session_key": "two", "summary": "second of two", "label": "twin"})).await;
    let r = a.send(json!({"target_label": "twin", "text": "which?"})).await;
    assert_eq!((r.status, r.code()), (StatusCode::CONFLICT, "ambiguous_label"), "{}", r.body);
    assert_eq!(r.body["error"]["details"]["candidates"].as_array().map(Vec::len), Some(2));
}

/// A request signed by `did` with `key` for `audience` (§9.5).
fn signed(
    a: &Ses,
    method: Method,
    path: &str,
    did: &str,
    key: &a2a_core::keys::SigningKey,
    body: Option<&Value>,
) -> reqwest::RequestBuilder {
    use a2a_core::integrity::{self, Coverage, MessageParts};
    let bytes = body.map(|b| serde_json::to_vec(b).expect("json")).unwrap_or_default();
    let headers = [("a2a-version", "0.3"), ("a2a-sender-id", did)];
    let parts = MessageParts { method: method.as_str(), target: path, headers: &headers, body: &bytes, status: None };
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("clock").as_secs() as i64;
    let coverage = if body.is_some() { Coverage::PayloadHash } else { Coverage::HeaderOnly };
    let sig = integrity::sign(key, "key-1", did, &a.did, coverage, &parts, now, 60).expect("sign");
    let mut rb = a.req(method, path, did).header("A2A-Signature", sig);
    if body.is_some() {
        rb = rb.header("Content-Type", "application/json").body(bytes);
    }
    rb
}

#[tokio::test]
async fn sessions_did_auth_agents_sign_their_ping_pong_turns() {
    use a2a_core::did::{Did, DidDocument};
    use a2a_core::keys::SigningKey;
    let resolver = Arc::new(a2a_core::resolver::StaticResolver::new());
    let (kx, ky) = (SigningKey::generate().expect("key"), SigningKey::generate().expect("key"));
    let mut settings = open_settings();
    settings.auth_requirement = AuthRequirement::DidAuth;
    let (r1, k1, s1) = (resolver.clone(), kx.clone(), settings.clone());
    let x = Ses::start_with(
        |_| {
            SessionsBuilder::new()
                .settings(s1)
                .session(HostedSession::new("main", "the main assistant"), reply("REPLY_SKIP"))
        },
        move |b| b.resolver(r1).sign_responses("key-1", k1),
    )
    .await;
    let (r2, k2) = (resolver.clone(), ky.clone());
    let y = Ses::start_with(
        |_| SessionsBuilder::new().settings(settings).session(desk("desk"), reply("The bonus is 5000.")),
        move |b| b.resolver(r2).sign_responses("key-1", k2),
    )
    .await;
    for (a, k) in [(&x, &kx), (&y, &ky)] {
        let did = Did::parse(&a.did).expect("did");
        resolver.insert(&did, DidDocument::generate(&did, &[("key-1".to_owned(), k.verifying_key().to_jwk())]));
    }
    let body = json!({"target": "desk", "from": "main", "from_endpoint": format!("{}/a2a", x.base), "text": "Bonus?",
                      "wait_ms": 10000, "announce": false});
    // Unsigned: refused under did_auth.
    let r = y.post_as(&x.did, "/a2a/sessions/send", body.clone()).await;
    assert_eq!((r.status, r.code()), (StatusCode::UNAUTHORIZED, "signature_required"), "{}", r.body);
    let r = Ses::answer(signed(&y, Method::POST, "/a2a/sessions/send", &x.did, &kx, Some(&body))).await;
    assert_eq!((r.status, r.body["status"].as_str()), (StatusCode::OK, Some("ok")), "{}", r.body);
    let seg = a2a_core::execution_id::ExecutionId::parse(r.body["run_id"].as_str().expect("run_id"))
        .expect("id")
        .to_path_segment();
    let path = format!("/a2a/runs/{seg}?wait_ms=10000&until=done");
    let run = Ses::answer(signed(&y, Method::GET, &path, &x.did, &kx, None)).await;
    assert_eq!(run.status, StatusCode::OK, "{}", run.body);
    // The turn reached X (which requires signatures too) and X's REPLY_SKIP ended the exchange.
    assert_eq!(
        (run.body["ended_by"].as_str(), run.body["turns"].as_array().map(Vec::len)),
        (Some("skip_token"), Some(1)),
        "{}",
        run.body
    );
    assert_eq!(run.body["turns"][0]["text"], "REPLY_SKIP");
}

/// A memory store whose first `put_session` waits until the test lets it go: it holds the heartbeat's first refresh
/// (made before the endpoint was known) in flight.
struct HeldFirstPut {
    inner: MemorySessionStore,
    entered: tokio::sync::Notify,
    release: tokio::sync::Notify,
    puts: AtomicUsize,
}

#[async_trait::async_trait]
impl SessionStore for HeldFirstPut {
    fn changes(&self) -> tokio::sync::watch::Receiver<u64> {
        self.inner.changes()
    }
    async fn put_session(&self, rec: &SessionRecord) -> Result<(), StoreError> {
        if self.puts.fetch_add(1, Ordering::SeqCst) == 0 {
            self.entered.notify_one();
            self.release.notified().await;
        }
        self.inner.put_session(rec).await
    }
    async fn get_session(&self, address: &str) -> Result<Option<SessionRecord>, StoreError> {
        self.inner.get_session(address).await
    }
    async fn list_sessions(&self, max: usize) -> Result<Vec<SessionRecord>, StoreError> {
        self.inner.list_sessions(max).await
    }
    async fn delete_session(&self, address: &str) -> Result<(), StoreError> {
        self.inner.delete_session(address).await
    }
    async fn put_run(&self, rec: &RunRecord, retention_ms: u64) -> Result<(), StoreError> {
        self.inner.put_run(rec, retention_ms).await
    }
    async fn get_run(&self, id: &str) -> Result<Option<RunRecord>, StoreError> {
        self.inner.get_run(id).await
    }
    async fn put_answer(&self, run_id: &str, answer: &RunReply, ttl_ms: u64) -> Result<bool, StoreError> {
        self.inner.put_answer(run_id, answer, ttl_ms).await
    }
    async fn get_answer(&self, run_id: &str) -> Result<Option<RunReply>, StoreError> {
        self.inner.get_answer(run_id).await
    }
    async fn push_inbox(&self, session: &str, item: &InboxItem) -> Result<(), StoreError> {
        self.inner.push_inbox(session, item).await
    }
    async fn inbox(&self, session: &str, max: usize) -> Result<Vec<InboxItem>, StoreError> {
        self.inner.inbox(session, max).await
    }
    async fn inbox_item(&self, session: &str, run_id: &str) -> Result<Option<InboxItem>, StoreError> {
        self.inner.inbox_item(session, run_id).await
    }
    async fn remove_inbox(&self, session: &str, run_id: &str) -> Result<(), StoreError> {
        self.inner.remove_inbox(session, run_id).await
    }
    async fn append_message(&self, session: &str, msg: &StoredMessage, keep: usize) -> Result<u64, StoreError> {
        self.inner.append_message(session, msg, keep).await
    }
    async fn recent_messages(
        &self,
        session: &str,
        max: usize,
        include_tools: bool,
    ) -> Result<Vec<HistoryMessage>, StoreError> {
        self.inner.recent_messages(session, max, include_tools).await
    }
    async fn delete_messages(&self, session: &str) -> Result<(), StoreError> {
        self.inner.delete_messages(session).await
    }
    async fn publish(&self, event: &str, session: &str, data: Value, keep: usize) -> Result<Event, StoreError> {
        self.inner.publish(event, session, data, keep).await
    }
    async fn events_after(&self, after: Option<u64>, max_age_ms: u64) -> Result<EventsAfter, StoreError> {
        self.inner.events_after(after, max_age_ms).await
    }
    async fn add_wait_edge(&self, from: &str, to: &str, token: &str, until_ms: u64) -> Result<(), StoreError> {
        self.inner.add_wait_edge(from, to, token, until_ms).await
    }
    async fn remove_wait_edge(&self, from: &str, to: &str, token: &str) -> Result<(), StoreError> {
        self.inner.remove_wait_edge(from, to, token).await
    }
    async fn wait_edges(&self) -> Result<Vec<(String, String)>, StoreError> {
        self.inner.wait_edges().await
    }
}

/// SES-6, PP-1: the heartbeat starts refreshing the hosted sessions when the agent is built, before a server knows
/// its port; the refresh made once the endpoint is set must win, or other processes find the session with no
/// endpoint and end ping-pong with `not_reachable` (seen in CI as a race between the two refreshes).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_a_refresh_without_the_endpoint_never_lands_after_the_one_with_it() {
    let store = Arc::new(HeldFirstPut {
        inner: MemorySessionStore::new(),
        entered: tokio::sync::Notify::new(),
        release: tokio::sync::Notify::new(),
        puts: AtomicUsize::new(0),
    });
    let did = "did:web:refresh.example.com";
    let sessions = SessionsBuilder::new().settings(open_settings()).store(store.clone()).session(desk("desk"), echo());
    let agent = AgentBuilder::new(did).sessions(sessions).build().expect("agent builds");
    let s = agent.sessions().expect("sessions").clone();
    // The heartbeat's first refresh read no endpoint and is held in its write.
    tokio::time::timeout(Duration::from_secs(10), store.entered.notified()).await.expect("the heartbeat refreshed");
    s.set_endpoint("http://127.0.0.1:9/a2a");
    let second = tokio::spawn({
        let s = s.clone();
        async move { s.refresh_hosted().await }
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    store.release.notify_one();
    tokio::time::timeout(Duration::from_secs(10), second).await.expect("the refresh ends").expect("no panic");
    let rec = store.get_session(&format!("{did}#desk")).await.expect("read").expect("the session is stored");
    assert_eq!(rec.session.endpoint.as_deref(), Some("http://127.0.0.1:9/a2a"), "{rec:?}");
}
