//! One suite for the sessions stores (§17), run against the memory store and a real Redis: `a` and `b` are two
//! store instances on the same Redis, as two processes have them (the same store for memory).

use std::sync::Arc;
use std::time::Duration;

use a2a_core::sessions::{
    AnnounceOutcome, AnnounceStatus, Delivery, HandlerKind, Provenance, Role, Run, RunReply, RunState, SendRequest,
    SendStatus, Session, SessionKind, SourceTool, Step,
};
use a2a_server::sessions::store::redis::RedisSessionStore;
use a2a_server::sessions::store::{InboxItem, RunRecord, SessionRecord, StoredMessage, waits_on};
use a2a_server::sessions::{MemorySessionStore, SessionStore};
use a2a_server::store::redis::{AgentScope, RedisConfig};
use a2a_server::store::{RedisStore, now_ms};
use serde_json::json;

use crate::redis_support::{shared_server, unique_prefix};

const AGENT: &str = "did:web:agent.example.com";

pub fn redis_pair(name: &str) -> (Arc<dyn SessionStore>, Arc<dyn SessionStore>) {
    let cfg = RedisConfig::new(shared_server().url()).with_key_prefix(unique_prefix(name));
    let scope = AgentScope { did: AGENT.into(), retention: Duration::from_secs(60), max_received: 1000 };
    let one = |cfg: &RedisConfig| -> Arc<dyn SessionStore> {
        let r = RedisStore::connect(cfg.clone(), scope.clone()).expect("connect");
        RedisSessionStore::new(r, cfg)
    };
    (one(&cfg), one(&cfg))
}

fn memory_pair() -> (Arc<dyn SessionStore>, Arc<dyn SessionStore>) {
    let s: Arc<dyn SessionStore> = Arc::new(MemorySessionStore::new());
    (s.clone(), s)
}

fn session(key: &str) -> SessionRecord {
    let now = now_ms();
    SessionRecord {
        session: Session {
            address: format!("{AGENT}#{key}").parse().expect("address"),
            session_key: key.into(),
            agent: AGENT.into(),
            endpoint: None,
            label: Some("l".into()),
            kind: SessionKind::Main,
            summary: "a session".into(),
            handler: HandlerKind::Inbox,
            owner: Some("did:web:owner.example.com".into()),
            created_at: "2026-12-01T00:00:00Z".into(),
            updated_at: "2026-12-01T00:00:00Z".into(),
            ended_at: None,
            parent: None,
            depth: 0,
        },
        updated_ms: now,
        spawn: None,
    }
}

fn run(id: &str) -> RunRecord {
    let req: SendRequest = serde_json::from_value(json!({"target": "desk", "text": "hi"})).expect("request");
    RunRecord {
        run: Run {
            run_id: id.into(),
            target: format!("{AGENT}#desk"),
            from: "did:web:caller.example.com".into(),
            status: SendStatus::Accepted,
            reply: None,
            error: None,
            state: RunState::Queued,
            turns: vec![],
            ended_by: None,
            announce: AnnounceOutcome { status: AnnounceStatus::Pending, event_id: None, text: None },
            created_at: "2026-12-01T00:00:00Z".into(),
            updated_at: "2026-12-01T00:00:00Z".into(),
            deadline: "2026-12-01T00:01:00Z".into(),
        },
        sender: "did:web:caller.example.com".into(),
        target_owner: AGENT.into(),
        request: req,
        hop: 1,
        deadline_ms: now_ms() + 60_000,
        wait_chain: String::new(),
        done_ms: None,
    }
}

async fn suite(a: Arc<dyn SessionStore>, b: Arc<dyn SessionStore>) {
    // Sessions.
    a.put_session(&session("s1")).await.expect("put");
    let got = b.get_session(&format!("{AGENT}#s1")).await.expect("get").expect("there");
    assert_eq!(got.session.session_key, "s1");
    assert_eq!(b.list_sessions(10).await.expect("list").len(), 1);
    b.delete_session(&format!("{AGENT}#s1")).await.expect("delete");
    assert!(a.get_session(&format!("{AGENT}#s1")).await.expect("get").is_none());

    // A run written by b wakes a waiter on a, without polling.
    let mut changes = a.changes();
    changes.borrow_and_update();
    let writer = b.clone();
    let w = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let mut r = run("r1");
        r.run.status = SendStatus::Ok;
        writer.put_run(&r, 60_000).await.expect("put run");
    });
    tokio::time::timeout(Duration::from_secs(5), changes.changed()).await.expect("woken").expect("open");
    w.await.expect("writer");
    let mut got = None;
    for _ in 0..50 {
        got = a.get_run("r1").await.expect("get run");
        if got.is_some() {
            break;
        }
        let _ = tokio::time::timeout(Duration::from_millis(100), changes.changed()).await;
    }
    assert_eq!(got.expect("run").run.status, SendStatus::Ok);
    assert!(a.get_run("nope").await.expect("get").is_none());

    // Answers: the first one wins.
    let ans = RunReply { reply: Some("yes".into()), error: None };
    assert!(a.put_answer("r1/message/0", &ans, 10_000).await.expect("answer"));
    assert!(!b.put_answer("r1/message/0", &ans, 10_000).await.expect("answer again"));
    assert_eq!(b.get_answer("r1/message/0").await.expect("get").and_then(|a| a.reply).as_deref(), Some("yes"));

    // Inbox: priority first, then oldest; expired ones dropped.
    let addr = format!("{AGENT}#inbox");
    let delivery = |id: &str| Delivery {
        run_id: id.into(),
        session: addr.clone(),
        step: Step::Message,
        text: "t".into(),
        instruction: None,
        provenance: Provenance::new("did:web:caller.example.com", None, SourceTool::SessionsSend, 1, id),
        turn: None,
        context: vec![],
        attachments: vec![],
        metadata: Default::default(),
        max_tokens: None,
        original: None,
        round_one: None,
        last: None,
    };
    let now = now_ms();
    for (id, prio, queued, until) in [
        ("low", 1, now, now + 60_000),
        ("high", 9, now + 5, now + 60_000),
        ("old", 1, now - 5, now + 60_000),
        ("gone", 9, now, now - 1),
    ] {
        a.push_inbox(&addr, &InboxItem { delivery: delivery(id), priority: prio, queued_ms: queued, until_ms: until })
            .await
            .expect("push");
    }
    let order: Vec<String> = b.inbox(&addr, 10).await.expect("inbox").into_iter().map(|i| i.delivery.run_id).collect();
    assert_eq!(order, vec!["high", "old", "low"]);
    b.remove_inbox(&addr, "high").await.expect("remove");
    assert_eq!(a.inbox(&addr, 1).await.expect("inbox").len(), 1);

    // Transcripts keep the newest, with increasing seq.
    for i in 0..5 {
        let m = StoredMessage { role: Role::User, text: format!("m{i}"), run_id: None, provenance: None };
        let seq = a.append_message(&addr, &m, 3).await.expect("append");
        assert_eq!(seq, i + 1);
    }
    let ms = b.recent_messages(&addr, 10, true).await.expect("messages");
    assert_eq!(ms.iter().map(|m| m.seq).collect::<Vec<_>>(), vec![3, 4, 5]);
    assert_eq!(ms[2].text, "m4");
    b.delete_messages(&addr).await.expect("delete");
    assert!(a.recent_messages(&addr, 10, false).await.expect("messages").is_empty());

    // Events: increasing ids, buffer bound, gap.
    let mut ids = Vec::new();
    for i in 0..4 {
        ids.push(a.publish("run", &addr, json!({"i": i}), 3).await.expect("publish").id);
    }
    assert!(ids.windows(2).all(|w| w[0] < w[1]));
    let all = b.events_after(Some(0), 60_000).await.expect("events");
    assert!(all.gap, "the first event fell out of the buffer");
    assert_eq!(all.events.iter().map(|e| e.id).collect::<Vec<_>>(), ids[1..].to_vec());
    let later = b.events_after(Some(ids[2]), 60_000).await.expect("events");
    assert!(!later.gap);
    assert_eq!(later.events.iter().map(|e| e.data["i"].as_i64()).collect::<Vec<_>>(), vec![Some(3)]);

    // Wait edges.
    a.add_wait_edge("x#a", "y#b", "t1", now_ms() + 10_000).await.expect("edge");
    b.add_wait_edge("y#b", "z#c", "t2", now_ms() + 10_000).await.expect("edge");
    a.add_wait_edge("z#c", "q#d", "t3", now_ms() - 1).await.expect("expired edge");
    let edges = b.wait_edges().await.expect("edges");
    assert_eq!(edges.len(), 2, "{edges:?}");
    assert_eq!(waits_on(&edges, "x#a", "z#c"), Some(vec!["x#a".into(), "y#b".into(), "z#c".into()]));
    assert_eq!(waits_on(&edges, "z#c", "x#a"), None);
    a.remove_wait_edge("x#a", "y#b", "t1").await.expect("remove");
    assert_eq!(b.wait_edges().await.expect("edges").len(), 1);
}

/// LIM-6: a long transcript and a long inbox read by pages give the right slices, on every store; on Redis a read
/// gets only its page from Redis, whatever the length (`entries_read`).
async fn long_sessions_read_by_pages(a: Arc<dyn SessionStore>, redis: Option<Arc<RedisSessionStore>>) {
    let read = || redis.as_ref().map_or(0, |r| r.entries_read());
    let addr = format!("{AGENT}#long");
    let tool = |i: u64| i % 3 == 2;
    let mut reads = Vec::new();
    let mut appended = 0u64;
    for len in [300u64, 3_000] {
        while appended < len {
            let role = if tool(appended) { Role::Tool } else { Role::User };
            let m = StoredMessage { role, text: format!("m{appended}"), run_id: None, provenance: None };
            a.append_message(&addr, &m, 5_000).await.expect("append");
            appended += 1;
        }
        for (max, tools) in [(11usize, true), (11, false), (51, false)] {
            let before = read();
            let page = a.recent_messages(&addr, max, tools).await.expect("page");
            reads.push(read() - before);
            let want: Vec<String> = (0..len)
                .rev()
                .filter(|i| tools || !tool(*i))
                .take(max)
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
                .map(|i| format!("m{i}"))
                .collect();
            assert_eq!(page.iter().map(|m| m.text.clone()).collect::<Vec<_>>(), want, "{len} messages, page {max}");
            assert!(page.windows(2).all(|w| w[0].seq < w[1].seq));
            assert_eq!(page.last().map(|m| m.seq), Some(want_seq(len, tools)));
        }
    }
    // Inbox: 2,000 deliveries, a page of 32 in order; expired ones never answered.
    let inbox = format!("{AGENT}#longinbox");
    let now = now_ms();
    for i in 0..2_000u64 {
        let id = format!("r{i:04}");
        let delivery = Delivery {
            run_id: id.clone(),
            session: inbox.clone(),
            step: Step::Message,
            text: "t".into(),
            instruction: None,
            provenance: Provenance::new("did:web:caller.example.com", None, SourceTool::SessionsSend, 1, &id),
            turn: None,
            context: vec![],
            attachments: vec![],
            metadata: Default::default(),
            max_tokens: None,
            original: None,
            round_one: None,
            last: None,
        };
        let until = if i % 10 == 0 { now - 1 } else { now + 600_000 };
        let item = InboxItem { delivery, priority: (i % 4) as u8, queued_ms: now - i, until_ms: until };
        a.push_inbox(&inbox, &item).await.expect("push");
    }
    let first = a.inbox(&inbox, 32).await.expect("inbox");
    let before = read();
    let page = a.inbox(&inbox, 32).await.expect("inbox");
    let inbox_read = read() - before;
    assert_eq!(page, first);
    // Priority 3 first (i % 4 == 3; none of them expired), oldest first (the highest i).
    let want: Vec<String> =
        (0..2_000u64).rev().filter(|i| i % 4 == 3 && i % 10 != 0).take(32).map(|i| format!("r{i:04}")).collect();
    assert_eq!(page.iter().map(|d| d.delivery.run_id.clone()).collect::<Vec<_>>(), want);
    assert!(a.inbox_item(&inbox, "r0010").await.expect("item").is_none(), "expired");
    assert_eq!(a.inbox_item(&inbox, "r0011").await.expect("item").map(|d| d.priority), Some(3));
    if redis.is_some() {
        assert_eq!(&reads[..3], &reads[3..], "a page read gets as much with 300 as with 3,000 messages held");
        assert_eq!(reads[..3], [11, 11, 51], "a page read gets its page only");
        assert_eq!(inbox_read, 32, "an inbox read gets its page only");
    }
}

/// The seq of the newest message kept of `len` (every third, from the third, a tool message).
fn want_seq(len: u64, tools: bool) -> u64 {
    (0..len).rev().find(|i| tools || i % 3 != 2).map_or(0, |i| i + 1)
}

#[tokio::test]
async fn long_sessions_read_by_pages_memory() {
    long_sessions_read_by_pages(memory_pair().0, None).await;
}

#[tokio::test]
async fn long_sessions_read_by_pages_redis() {
    let cfg = RedisConfig::new(shared_server().url()).with_key_prefix(unique_prefix("longsess"));
    let scope = AgentScope { did: AGENT.into(), retention: Duration::from_secs(60), max_received: 1000 };
    let store = RedisSessionStore::new(RedisStore::connect(cfg.clone(), scope).expect("connect"), &cfg);
    long_sessions_read_by_pages(store.clone(), Some(store)).await;
}

#[tokio::test]
async fn sessions_store_memory() {
    let (a, b) = memory_pair();
    suite(a, b).await;
}

#[tokio::test]
async fn sessions_store_redis() {
    let (a, b) = redis_pair("sessions-store");
    suite(a, b).await;
}

/// The one reconnecting subscriber (`store::redis::subscribe`) under the sessions store: a write through one
/// instance wakes the other over pub/sub; after Redis is killed and started again, the subscriber comes back by
/// itself, wakes every waiter once (a write may have been missed meanwhile), and later writes wake them again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_store_redis_subscriber_survives_a_redis_restart() {
    let mut redis = crate::redis_support::RedisServer::start();
    let cfg = RedisConfig::new(redis.url()).with_key_prefix(unique_prefix("sessions-sub"));
    let scope = AgentScope { did: AGENT.into(), retention: Duration::from_secs(60), max_received: 1000 };
    let one = || -> Arc<dyn SessionStore> {
        RedisSessionStore::new(RedisStore::connect(cfg.clone(), scope.clone()).expect("connect"), &cfg)
    };
    let (a, b) = (one(), one());
    let mut changes = a.changes();
    // Let the subscription be made (it bumps once when it is), then see a write of `b` wake `a`.
    tokio::time::sleep(Duration::from_millis(500)).await;
    changes.borrow_and_update();
    b.put_session(&session("desk")).await.expect("put");
    tokio::time::timeout(Duration::from_secs(5), changes.changed()).await.expect("woken by b's write").expect("open");
    changes.borrow_and_update();

    redis.restart();
    tokio::time::timeout(Duration::from_secs(15), changes.changed())
        .await
        .expect("woken once the subscription is back")
        .expect("open");
    changes.borrow_and_update();
    // A write through `b` (retried while its connection comes back) wakes `a` over the new subscription.
    let until = std::time::Instant::now() + Duration::from_secs(15);
    while b.put_session(&session("desk")).await.is_err() {
        assert!(std::time::Instant::now() < until, "b cannot write after the restart");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::timeout(Duration::from_secs(5), changes.changed())
        .await
        .expect("woken after the restart")
        .expect("open");
    assert!(a.get_session(&session("desk").session.address.to_string()).await.expect("get").is_some());
}
