//! Webhook announce (ANN-5) against real HTTP receivers on loopback: every event of the channel is posted, signed
//! as a response (`payload_hash`, `sts` 200) and checked here with `a2a_core::integrity`; a receiver that fails is
//! retried with backoff and given up on, one that never answers times out, and neither holds up a run; a full queue
//! drops its oldest posts and counts them. Also SES-2: `sessions.auth_requirement` in the capabilities document,
//! and the requirement enforced.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use a2a_core::capability::AuthRequirement;
use a2a_core::integrity::{self, Coverage, IntegrityError, MessageParts};
use a2a_core::keys::SigningKey;
use a2a_core::sessions::{Delivery, Step, WebhookEvent};
use a2a_server::sessions::config::WebhookConfig;
use a2a_server::sessions::{HandlerFailure, HostedSession, SessionSettings, SessionsBuilder, WebhookStats};
use axum::body::Bytes;
use axum::http::{HeaderMap, StatusCode};
use reqwest::Method;
use serde_json::json;
use tokio::net::TcpListener;

use crate::sessions::{CALLER, Ses, open_settings};

/// One post a receiver got: its headers and exact body.
#[derive(Clone)]
struct Post {
    headers: Vec<(String, String)>,
    body: Bytes,
}

impl Post {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }
}

/// A real HTTP receiver on loopback: answers `status` to every POST on `/hooks/a2a` and keeps what it got.
struct Receiver {
    url: String,
    posts: Arc<Mutex<Vec<Post>>>,
    _stop: tokio::sync::oneshot::Sender<()>,
}

impl Receiver {
    async fn start(status: StatusCode) -> Receiver {
        let posts = Arc::new(Mutex::new(Vec::new()));
        let kept = posts.clone();
        let app = axum::Router::new().route(
            "/hooks/a2a",
            axum::routing::post(move |headers: HeaderMap, body: Bytes| {
                let kept = kept.clone();
                async move {
                    let headers = headers
                        .iter()
                        .filter_map(|(k, v)| v.to_str().ok().map(|v| (k.as_str().to_owned(), v.to_owned())))
                        .collect();
                    kept.lock().expect("lock").push(Post { headers, body });
                    status
                }
            }),
        );
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let url = format!("http://{}/hooks/a2a?tenant=t1", listener.local_addr().expect("addr"));
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(async move {
            let _ = axum::serve(listener, app)
                .with_graceful_shutdown(async {
                    let _ = rx.await;
                })
                .await;
        });
        Receiver { url, posts, _stop: tx }
    }

    fn posts(&self) -> Vec<Post> {
        self.posts.lock().expect("lock").clone()
    }
}

/// A receiver that accepts connections and never answers (counting them).
async fn silent_receiver() -> (String, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("http://{}/silent", listener.local_addr().expect("addr"));
    let accepted = Arc::new(AtomicUsize::new(0));
    let n = accepted.clone();
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((sock, _)) = listener.accept().await {
            n.fetch_add(1, Ordering::SeqCst);
            held.push(sock);
        }
    });
    (url, accepted)
}

/// Waits until `f` holds for the stats of the agent's webhooks.
async fn until_stats(a: &Ses, what: &str, f: impl Fn(&[WebhookStats]) -> bool) -> Vec<WebhookStats> {
    let until = Instant::now() + Duration::from_secs(20);
    loop {
        let stats = a.agent.sessions().expect("sessions").webhook_stats();
        if f(&stats) {
            return stats;
        }
        assert!(Instant::now() < until, "{what}: {stats:?}");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// Checks a post's signature as its receiver would (INT-6, INT-10): for `audience`, by `key`, as a response to
/// `POST {path}` with status 200.
fn verify(post: &Post, path: &str, audience: &str, key: &SigningKey) -> Result<Coverage, IntegrityError> {
    let sig = post.header("a2a-signature").expect("the post is signed");
    let headers: Vec<(&str, &str)> = post.headers.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let parts = MessageParts { method: "POST", target: path, headers: &headers, body: &post.body, status: Some(200) };
    let now = SystemTime::now().duration_since(UNIX_EPOCH).expect("clock").as_secs() as i64;
    let pending = integrity::prepare(sig, &parts, audience, now)?;
    Ok(pending.finish(key.verifying_key(), &parts)?.coverage())
}

fn announcing_desk() -> impl Fn(Delivery) -> std::future::Ready<Result<String, HandlerFailure>> + Send + Sync {
    |d: Delivery| {
        std::future::ready(Ok(match d.step {
            Step::Announce => "Told the boss: the bonus is 5000.".to_owned(),
            _ => "The bonus is 5000.".to_owned(),
        }))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_webhooks_get_every_event_signed_and_failing_ones_hold_up_nothing() {
    let good = Receiver::start(StatusCode::NO_CONTENT).await;
    let failing = Receiver::start(StatusCode::SERVICE_UNAVAILABLE).await;
    let refusing = Receiver::start(StatusCode::FORBIDDEN).await;
    let (silent, silent_hits) = silent_receiver().await;
    let key = SigningKey::generate().expect("key");
    let audience = "did:web:hooks.example.com";
    let mut hooks = WebhookConfig::new([&good.url, &failing.url, &refusing.url, &silent]);
    (hooks.timeout_ms, hooks.retries, hooks.backoff_ms) = (300, 2, 50);
    hooks.audience = Some(audience.to_owned());
    let mut settings = open_settings();
    settings.webhooks = hooks;
    let k = key.clone();
    let a = Ses::start_with(
        |_| {
            SessionsBuilder::new()
                .settings(settings)
                .session(HostedSession::new("desk", "the bonus desk"), announcing_desk())
        },
        move |b| b.sign_responses("key-1", k),
    )
    .await;

    // Collaboration mode with a receiver that never answers: the run is done at once all the same.
    let started = Instant::now();
    let s = a.send(json!({"target": "desk", "text": "Bonus?", "wait_ms": 10000})).await;
    assert_eq!(s.body["status"], "ok", "{}", s.body);
    let run = a.done(CALLER, s.body["run_id"].as_str().expect("run_id")).await;
    assert!(started.elapsed() < Duration::from_secs(2), "a webhook held up the run: {:?}", started.elapsed());
    assert_eq!(run["announce"]["status"], "published", "{run}");

    // The good receiver gets both events (announce, then run), each signed for the audience.
    until_stats(&a, "the good receiver has both events", |s| s[0].delivered == 2).await;
    let posts = good.posts();
    assert_eq!(posts.len(), 2);
    let events: Vec<WebhookEvent> =
        posts.iter().map(|p| serde_json::from_slice(&p.body).expect("a WebhookEvent")).collect();
    assert_eq!(events.iter().map(|e| e.event.as_str()).collect::<Vec<_>>(), vec!["announce", "run"]);
    assert_eq!(events[0].id.to_string(), run["announce"]["event_id"].as_str().unwrap_or(""), "the stream's id");
    assert_eq!(events[0].data["text"], "Told the boss: the bonus is 5000.");
    assert_eq!(events[1].data["run_id"], run["run_id"]);
    assert!(events[0].id < events[1].id);
    for (p, e) in posts.iter().zip(&events) {
        assert_eq!(e.agent, a.did);
        assert_eq!(e.session, format!("{}#desk", a.did));
        assert_eq!(p.header("a2a-sender-id"), Some(a.did.as_str()));
        assert_eq!(p.header("a2a-version"), Some("0.3"));
        assert_eq!(p.header("a2a-event-id"), Some(e.id.to_string().as_str()));
        assert_eq!(p.header("content-type"), Some("application/json"));
        assert_eq!(verify(p, "/hooks/a2a?tenant=t1", audience, &key).expect("verifies"), Coverage::PayloadHash);
    }
    // The checks can fail: another audience, another path, a changed body, a changed event id, another key.
    let p = &posts[0];
    assert!(matches!(verify(p, "/hooks/a2a?tenant=t1", &a.did, &key), Err(IntegrityError::AudienceMismatch { .. })));
    assert!(matches!(verify(p, "/hooks/other", audience, &key), Err(IntegrityError::Mismatch(_))));
    let mut changed = p.clone();
    changed.body = Bytes::from(String::from_utf8_lossy(&p.body).replace("5000", "9000"));
    assert!(matches!(verify(&changed, "/hooks/a2a?tenant=t1", audience, &key), Err(IntegrityError::Mismatch(_))));
    let mut reordered = p.clone();
    let value: serde_json::Value = serde_json::from_slice(&p.body).expect("json");
    reordered.body = Bytes::from(serde_json::to_vec_pretty(&value).expect("json"));
    assert!(verify(&reordered, "/hooks/a2a?tenant=t1", audience, &key).is_ok(), "payload_hash survives re-encoding");
    let mut renumbered = p.clone();
    for (k, v) in &mut renumbered.headers {
        if k == "a2a-event-id" {
            *v = "999".into();
        }
    }
    assert!(matches!(verify(&renumbered, "/hooks/a2a?tenant=t1", audience, &key), Err(IntegrityError::Mismatch(_))));
    let other = SigningKey::generate().expect("key");
    assert!(matches!(verify(p, "/hooks/a2a?tenant=t1", audience, &other), Err(IntegrityError::SignatureInvalid)));

    // The 503 receiver is tried 1 + 2 times per event, then given up on; the 403 one once; the silent one times
    // out each try. Every try is signed afresh and carries the same event id.
    let stats = until_stats(&a, "the failing webhooks are given up on", |s| {
        s[1].failed == 2 && s[2].failed == 2 && s[3].failed == 2
    })
    .await;
    assert_eq!((stats[1].delivered, stats[1].retried, stats[1].dropped, stats[1].queued), (0, 4, 0, 0), "{stats:?}");
    assert_eq!((stats[2].retried, refusing.posts().len()), (0, 2), "a 403 is not retried: {stats:?}");
    assert_eq!(stats[3].retried, 4, "{stats:?}");
    assert_eq!(silent_hits.load(Ordering::SeqCst), 6, "every try of the silent webhook reached it");
    let tries = failing.posts();
    assert_eq!(tries.len(), 6);
    let first_event: Vec<&Post> =
        tries.iter().filter(|p| p.header("a2a-event-id") == Some(&*events[0].id.to_string())).collect();
    assert_eq!(first_event.len(), 3, "three tries of the first event");
    assert_ne!(first_event[0].header("a2a-signature"), first_event[1].header("a2a-signature"), "signed afresh");
    for p in &tries {
        verify(p, "/hooks/a2a?tenant=t1", audience, &key).expect("each try verifies");
    }
    assert_eq!(
        stats[0],
        WebhookStats { url: good.url.clone(), delivered: 2, failed: 0, retried: 0, dropped: 0, queued: 0 }
    );
    // The same counters on /metrics, labelled by the webhook's index in the configuration.
    let text = a.http.get(format!("{}/metrics", a.base)).send().await.expect("metrics").text().await.expect("text");
    for (webhook, outcome, value) in
        [("0", "delivered", 2), ("1", "failed", 2), ("1", "retried", 4), ("3", "retried", 4)]
    {
        let line = format!("a2a_session_webhook_events{{webhook=\"{webhook}\",outcome=\"{outcome}\"}} {value}");
        assert!(text.lines().any(|l| l == line), "no {line:?} in:\n{text}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_webhook_queue_is_bounded_and_drops_its_oldest_posts() {
    let (silent, hits) = silent_receiver().await;
    let mut hooks = WebhookConfig::new([&silent]);
    (hooks.timeout_ms, hooks.retries, hooks.queue_capacity) = (1_500, 0, 2);
    let mut settings = open_settings();
    settings.webhooks = hooks;
    let a = Ses::start(|_| {
        SessionsBuilder::new()
            .settings(settings)
            .session(HostedSession::new("desk", "the bonus desk"), announcing_desk())
    })
    .await;
    // Telemetry mode: each send publishes one `run` event; six of them while the first post hangs.
    let mut runs = Vec::new();
    for i in 0..6 {
        let s = a.send(json!({"target": "desk", "text": format!("FYI {i}"), "reply": false, "announce": false})).await;
        assert_eq!(s.status, reqwest::StatusCode::ACCEPTED, "{}", s.body);
        runs.push(s.body["run_id"].as_str().expect("run_id").to_owned());
    }
    for r in &runs {
        a.done(CALLER, r).await;
    }
    // One post in flight, two waiting, three dropped (the oldest of those queued behind the first).
    let stats = until_stats(&a, "three dropped", |s| s[0].dropped == 3).await;
    assert_eq!((stats[0].queued, stats[0].delivered), (2, 0), "{stats:?}");
    // The queue drains as the posts time out; nothing more is dropped.
    let stats = until_stats(&a, "the rest given up on", |s| s[0].failed == 3).await;
    assert_eq!((stats[0].dropped, stats[0].queued), (3, 0), "{stats:?}");
    assert_eq!(hits.load(Ordering::SeqCst), 3);
}

#[test]
fn sessions_webhook_config_is_read_and_its_mistakes_are_refused() {
    let parse = |t: &str| {
        a2a_agent::config::Config::parse(
            &format!("[agent]\ndid = \"did:web:agent.example.com\"\n\n{t}"),
            std::path::Path::new("agent.toml"),
        )
        .map_err(|e| e.to_string())
    };
    let cfg = parse(
        "[sessions.webhooks]\nurls = [\"https://hooks.example.com/a\", \"http://127.0.0.1:9000/b\"]\ntimeout_ms = 2000\n\
         retries = 5\nbackoff_ms = 100\nqueue_capacity = 50\naudience = \"did:web:hooks.example.com\"\n",
    )
    .expect("parses");
    let w = cfg.sessions.expect("sessions").webhooks;
    assert_eq!(w.urls.len(), 2);
    assert_eq!((w.timeout_ms, w.retries, w.backoff_ms, w.queue_capacity), (2000, 5, 100, 50));
    assert_eq!(w.audience.as_deref(), Some("did:web:hooks.example.com"));
    let d = parse("[sessions]\n").expect("parses").sessions.expect("sessions").webhooks;
    assert_eq!(d, WebhookConfig::default());
    assert!(d.urls.is_empty());
    assert_eq!((d.timeout_ms, d.retries, d.backoff_ms, d.queue_capacity), (5000, 3, 500, 1000));
    let cases: &[(&str, &[&str])] = &[
        ("urls = [\"ftp://x/y\"]", &["sessions.webhooks.urls[0]", "http://"]),
        ("urls = [\"not a url\"]", &["not a URL"]),
        ("urls = [\"http://a/x\", \"http://a/x\"]", &["urls[1]", "listed twice"]),
        ("timeout_ms = 0", &["timeout_ms = 0", "1 to 60000"]),
        ("retries = 11", &["retries = 11", "0 to 10"]),
        ("queue_capacity = 0", &["queue_capacity = 0"]),
        ("audience = \"hooks.example.com\"", &["audience", "not a DID"]),
        ("url = \"http://a/x\"", &["unknown field `url`", "urls"]),
    ];
    for (body, wanted) in cases {
        let e = parse(&format!("[sessions.webhooks]\n{body}\n")).expect_err(body);
        for w in *wanted {
            assert!(e.contains(w), "{body}: {e:?} does not say {w:?}");
        }
        assert!(e.contains("agent.toml:"), "{body}: {e}");
    }
}

#[tokio::test]
async fn sessions_auth_requirement_is_in_the_capabilities_document_and_enforced() {
    // SES-2 under did_auth (the default): shown, and an unsigned request is refused.
    let a = Ses::start(|_| {
        SessionsBuilder::new()
            .settings(SessionSettings::default())
            .session(HostedSession::new("desk", "the desk"), announcing_desk())
    })
    .await;
    let caps = a.get_as(CALLER, "/a2a/capabilities").await;
    assert_eq!(caps.body["sessions"], json!({"auth_requirement": "did_auth"}), "{}", caps.body);
    let doc: a2a_core::wire::CapabilitiesDocument = serde_json::from_value(caps.body.clone()).expect("a document");
    assert_eq!(doc.sessions.map(|s| s.auth_requirement), Some(AuthRequirement::DidAuth));
    let list = a.get_as(CALLER, "/a2a/sessions").await;
    assert_eq!(list.status, reqwest::StatusCode::UNAUTHORIZED, "{}", list.body);
    assert_eq!(list.body["error"]["details"]["auth_requirement"], "did_auth", "{}", list.body);
    let send = a.send(json!({"target": "desk", "text": "Bonus?"})).await;
    assert_eq!(send.status, reqwest::StatusCode::UNAUTHORIZED, "{}", send.body);
    // Under none: shown as such, and the same requests are served.
    let b = Ses::start(|_| {
        SessionsBuilder::new()
            .settings(open_settings())
            .session(HostedSession::new("desk", "the desk"), announcing_desk())
    })
    .await;
    let caps = b.get_as(CALLER, "/a2a/capabilities").await;
    assert_eq!(caps.body["sessions"], json!({"auth_requirement": "none"}), "{}", caps.body);
    assert_eq!(b.get_as(CALLER, "/a2a/sessions").await.status, reqwest::StatusCode::OK);
    // An agent without sessions has no `sessions` member.
    let t = crate::common::TestAgent::start(a2a_server::AgentBuilder::new("did:web:plain.example.com")).await;
    let caps = Ses::answer(t.http.request(Method::GET, t.url("/a2a/capabilities")).header("A2A-Version", "0.3")).await;
    assert!(caps.body.get("sessions").is_none(), "{}", caps.body);
}
