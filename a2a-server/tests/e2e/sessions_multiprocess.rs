//! Sessions across two real `a2a-server` processes on one real Redis (MISSION §5): a session registered through
//! one is listed and answered through the other, a run started on one is awaited on the other (woken by pub/sub),
//! and a ping-pong between two sessions hosted by the two processes' agent runs over the shared store.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::common::TempDir;
use crate::redis_support::{RedisServer, unique_prefix};

const DID: &str = "did:web:localhost%3A8080";
const CALLER: &str = "did:web:caller.example.com";

fn config(dir: &TempDir, redis_url: &str, prefix: &str) -> std::path::PathBuf {
    dir.write(
        "agent.toml",
        &format!(
            r#"
[agent]
did = "{DID}"

[store]
redis_url = "{redis_url}"
key_prefix = "{prefix}"

[sessions]
auth_requirement = "none"
visibility = "all"
allow = ["did:web:caller.example.com#*", "did:web:localhost*#*"]

[[sessions.session]]
session_key = "desk"
label = "work assistant"
kind = "main"
summary = "Answers from a program, one second late."
handler = {{ type = "command", argv = ["sh", "-c", "cat >/dev/null; sleep 1; echo 'The bonus is 5000.'"], timeout_ms = 10000 }}
"#
        ),
    )
}

struct Server {
    child: Child,
    base: String,
}

impl Server {
    fn start(config: &std::path::Path) -> Server {
        let mut child = Command::new(env!("CARGO_BIN_EXE_a2a-server"))
            .arg("--config")
            .arg(config)
            .arg("--listen")
            .arg("127.0.0.1:0")
            .env("RUST_LOG", "warn")
            .env_remove("REDIS_URL")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start a2a-server");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut lines = BufReader::new(stdout).lines();
            while let Some(Ok(line)) = lines.next() {
                if let Some(url) = line.split(" serving ").nth(1) {
                    let _ = tx.send(url.trim_end_matches("/a2a").to_owned());
                }
            }
        });
        let base = rx.recv_timeout(Duration::from_secs(60)).expect("the server printed its address");
        Server { child, base }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn call(http: &reqwest::Client, rb: reqwest::RequestBuilder, sender: &str) -> (StatusCode, Value) {
    let _ = http;
    let resp = rb.header("A2A-Version", "0.3").header("A2A-Sender-ID", sender).send().await.expect("request");
    let status = resp.status();
    (status, resp.json::<Value>().await.unwrap_or(Value::Null))
}

#[tokio::test]
async fn sessions_two_processes_on_one_redis_share_sessions_runs_and_inboxes() {
    let redis = RedisServer::start();
    let dir = TempDir::new("sessions-mp");
    let cfg = config(&dir, &redis.url(), &unique_prefix("sessions-mp"));
    let (p1, p2) = (Server::start(&cfg), Server::start(&cfg));
    let http = reqwest::Client::builder().timeout(Duration::from_secs(30)).build().expect("client");

    // The features of both list sessions.
    let (_, caps) = call(&http, http.get(format!("{}/a2a/capabilities", p2.base)), CALLER).await;
    assert!(caps["features"].as_array().expect("features").iter().any(|f| f == "sessions"), "{caps}");

    // A run started on p1 without waiting is awaited on p2 and ends ok there: the reply written by p1 wakes p2.
    let (s, sent) = call(
        &http,
        http.post(format!("{}/a2a/sessions/send", p1.base))
            .json(&json!({"target": "desk", "text": "Bonus?", "announce": false})),
        CALLER,
    )
    .await;
    assert_eq!((s, sent["status"].as_str()), (StatusCode::ACCEPTED, Some("accepted")), "{sent}");
    let seg = a2a_core::execution_id::ExecutionId::parse(sent["run_id"].as_str().expect("run_id"))
        .expect("id")
        .to_path_segment();
    let started = std::time::Instant::now();
    let (s, run) = call(&http, http.get(format!("{}/a2a/runs/{seg}?wait_ms=15000", p2.base)), CALLER).await;
    assert_eq!(s, StatusCode::OK, "{run}");
    assert_eq!((run["status"].as_str(), run["reply"].as_str()), (Some("ok"), Some("The bonus is 5000.")), "{run}");
    assert!(started.elapsed() < Duration::from_secs(10), "woken, not timed out: {:?}", started.elapsed());
    // Its transcript is readable from either process.
    let (_, h) = call(&http, http.get(format!("{}/a2a/sessions/desk/history", p2.base)), CALLER).await;
    assert_eq!(h["messages"].as_array().map(Vec::len), Some(2), "{h}");

    // An inbox session registered through p2 is listed by p1; a send through p1 waits while its owner reads the
    // inbox and answers through p2.
    let owner = "did:web:plugin.example.com";
    let (s, reg) = call(
        &http,
        http.post(format!("{}/a2a/sessions", p2.base))
            .json(&json!({"session_key": "phone", "summary": "the boss's phone, polling", "label": "phone"})),
        owner,
    )
    .await;
    assert_eq!(s, StatusCode::CREATED, "{reg}");
    let (_, list) = call(&http, http.get(format!("{}/a2a/sessions?search=phone", p1.base)), CALLER).await;
    assert_eq!(list["total"], 1, "{list}");
    let (h2, b2) = (http.clone(), p2.base.clone());
    let answering = tokio::spawn(async move {
        let (_, inbox) = call(&h2, h2.get(format!("{b2}/a2a/sessions/phone/inbox?wait_ms=15000")), owner).await;
        let id = inbox["deliveries"][0]["run_id"].as_str().expect("a delivery").to_owned();
        let seg = a2a_core::execution_id::ExecutionId::parse(&id).expect("id").to_path_segment();
        let (s, _) =
            call(&h2, h2.post(format!("{b2}/a2a/runs/{seg}/reply")).json(&json!({"reply": "Seen it."})), owner).await;
        assert_eq!(s, StatusCode::OK);
    });
    let (_, asked) = call(
        &http,
        http.post(format!("{}/a2a/sessions/send", p1.base))
            .json(&json!({"target": "phone", "text": "Did you see the bonus?", "wait_ms": 15000, "announce": false})),
        CALLER,
    )
    .await;
    assert_eq!((asked["status"].as_str(), asked["reply"].as_str()), (Some("ok"), Some("Seen it.")), "{asked}");
    answering.await.expect("answered");

    // The announce channel is shared too: an event published by p1 is read on p2 by id.
    let (_, done) = call(&http, http.get(format!("{}/a2a/runs/{seg}?until=done&wait_ms=15000", p1.base)), CALLER).await;
    assert_eq!(done["state"], "done", "{done}");
    let resp = http
        .get(format!("{}/a2a/events", p2.base))
        .header("A2A-Version", "0.3")
        .header("A2A-Sender-ID", CALLER)
        .header("Last-Event-ID", "0")
        .send()
        .await
        .expect("events");
    let mut resp = resp;
    let chunk = tokio::time::timeout(Duration::from_secs(10), resp.chunk())
        .await
        .expect("an event")
        .expect("read")
        .expect("bytes");
    let text = String::from_utf8_lossy(&chunk);
    assert!(text.contains("event: run"), "{text}");
}
