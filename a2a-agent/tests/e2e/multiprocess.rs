//! Many processes, one agent: real `a2a-server` binaries on one real Redis. The steps of one handshake
//! go to different processes; a process killed with SIGKILL in the middle of executions loses none of them; the
//! soak test drives 10,000 executions through two processes and kills one midway. Also: Redis stopped and started
//! again under an agent (503 `store_unavailable`, then recovery without a restart).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use a2a_server::store::RedisStore;
use a2a_server::store::redis::{AgentScope, RedisConfig};
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::common::{SENDER, TempDir, TestAgent, report_schema, standard, test_limits};
use crate::redis_support::{RedisServer, unique_prefix};
use crate::server_process::ServerProcess as Server;

const DID: &str = "did:web:localhost%3A8080";

/// A configuration for the processes: an echo capability and a slow program, on this Redis.
fn config(dir: &TempDir, redis_url: &str, prefix: &str) -> std::path::PathBuf {
    dir.write(
        "agent.toml",
        &format!(
            r#"
[agent]
did = "{DID}"

[limits]
max_concurrent_executions = 256

[store]
redis_url = "{redis_url}"
key_prefix = "{prefix}"
visibility_timeout_ms = 1500
registry_ttl_ms = 3000

[[capabilities]]
name = "echo_message"
description = "echo"
auth_requirement = "none"
input_schema = {{ type = "object", properties = {{ message = {{ type = "string" }} }}, required = ["message"] }}
handler = {{ kind = "echo" }}

[[capabilities]]
name = "run_slow_task"
description = "sleeps, then echoes"
auth_requirement = "none"
input_schema = {{ type = "object", properties = {{ n = {{ type = "number" }} }}, required = ["n"] }}
handler = {{ kind = "command", program = "sh", args = ["-c", "sleep 1; cat"] }}
"#
        ),
    )
}

struct Client {
    http: reqwest::Client,
}

impl Client {
    fn new() -> Client {
        Client { http: reqwest::Client::builder().timeout(Duration::from_secs(30)).build().expect("client") }
    }

    async fn send(&self, rb: reqwest::RequestBuilder) -> Result<(StatusCode, Value), reqwest::Error> {
        let resp = rb.header("A2A-Version", "0.3").header("A2A-Sender-ID", SENDER).send().await?;
        let status = resp.status();
        let body = resp.json::<Value>().await.unwrap_or(Value::Null);
        Ok((status, body))
    }

    async fn negotiate(&self, base: &str, capability: &str, schema: Value) -> Result<String, String> {
        let (s, b) = self
            .send(
                self.http
                    .post(format!("{base}/a2a/negotiate"))
                    .json(&json!({"target_capability": capability, "proposed_schema": schema})),
            )
            .await
            .map_err(|e| e.to_string())?;
        if s != StatusCode::OK {
            return Err(format!("{s} {b}"));
        }
        Ok(b["negotiation_id"].as_str().unwrap_or_default().to_owned())
    }

    async fn execute(&self, base: &str, neg: &str, payload: &Value) -> Result<String, String> {
        let (s, b) = self
            .send(self.http.post(format!("{base}/a2a/execute")).header("A2A-Negotiation-ID", neg).json(payload))
            .await
            .map_err(|e| e.to_string())?;
        if s != StatusCode::CREATED {
            return Err(format!("{s} {b}"));
        }
        Ok(b["execution_id"].as_str().unwrap_or_default().to_owned())
    }

    /// CONFIRM; Ok when the execution is confirmed (202, or 200 already confirmed).
    async fn confirm(&self, base: &str, id: &str) -> Result<StatusCode, String> {
        let (s, b) = self
            .send(self.http.post(format!("{base}/a2a/confirm")).json(&json!({"execution_id": id})))
            .await
            .map_err(|e| e.to_string())?;
        if s == StatusCode::ACCEPTED || (s == StatusCode::OK && b["already_confirmed"] == json!(true)) {
            Ok(s)
        } else {
            Err(format!("{s} {b}"))
        }
    }

    async fn result(&self, base: &str, id: &str, wait_ms: u64) -> Result<Value, String> {
        let seg = a2a_core::execution_id::ExecutionId::parse(id).expect("id").to_path_segment();
        let (s, b) = self
            .send(self.http.get(format!("{base}/a2a/result/{seg}?wait_ms={wait_ms}")))
            .await
            .map_err(|e| e.to_string())?;
        if s != StatusCode::OK {
            return Err(format!("{s} {b}"));
        }
        Ok(b)
    }

    /// Waits until the execution is terminal (long-poll, repeated); its RESULT body.
    async fn terminal(&self, base: &str, id: &str, patience: Duration) -> Value {
        let until = Instant::now() + patience;
        loop {
            let r = self.result(base, id, 5_000).await;
            if let Ok(b) = &r
                && b["status"].as_str().is_some_and(|s| !matches!(s, "received" | "accepted" | "running"))
            {
                return b.clone();
            }
            assert!(Instant::now() < until, "execution {id} is not terminal in time: {r:?}");
        }
    }
}

fn echo_schema() -> Value {
    json!({"type": "object", "properties": {"message": {"type": "string"}}, "required": ["message"]})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn negotiate_on_one_process_execute_on_another_confirm_on_the_first_read_from_the_second() {
    let redis = RedisServer::start();
    let dir = TempDir::new("multi");
    let cfg = config(&dir, &redis.url(), &unique_prefix("multi"));
    let (a, b) = (Server::start(&cfg), Server::start(&cfg));
    let c = Client::new();
    for i in 0..5 {
        let neg = c.negotiate(&a.base, "echo_message", echo_schema()).await.expect("negotiate on A");
        let payload = json!({"message": format!("hello {i}")});
        let exe = c.execute(&b.base, &neg, &payload).await.expect("execute on B");
        assert_eq!(c.confirm(&a.base, &exe).await.expect("confirm on A"), StatusCode::ACCEPTED);
        // CONF-2 across processes: a second CONFIRM on the other process starts nothing.
        assert_eq!(c.confirm(&b.base, &exe).await.expect("confirm on B"), StatusCode::OK);
        let r = c.terminal(&b.base, &exe, Duration::from_secs(30)).await;
        assert_eq!(r["status"], json!("succeeded"), "{r}");
        assert_eq!(r["result"], json!({"echo": payload}), "{r}");
    }
    // The shared registry holds the entries of both processes, refreshed by their heartbeats.
    let until = Instant::now() + Duration::from_secs(20);
    loop {
        let prefix_keys = redis.cli(&["--scan", "--pattern", "*:registry}:entries"]).unwrap_or_default();
        let key = prefix_keys.lines().next().unwrap_or("").to_owned();
        let n: usize = redis.cli(&["HLEN", &key]).and_then(|s| s.trim().parse().ok()).unwrap_or(0);
        if n == 4 {
            break;
        }
        assert!(Instant::now() < until, "expected 2 capabilities x 2 processes in the registry, found {n}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_killed_with_sigkill_mid_execution_loses_none_of_its_executions() {
    let redis = RedisServer::start();
    let dir = TempDir::new("kill");
    let cfg = config(&dir, &redis.url(), &unique_prefix("kill"));
    let mut a = Server::start(&cfg);
    let c = Client::new();
    // Only A runs at first: every execution is claimed by A's workers.
    let neg = c
        .negotiate(
            &a.base,
            "run_slow_task",
            json!({"type": "object", "properties": {"n": {"type": "number"}}, "required": ["n"]}),
        )
        .await
        .expect("negotiate");
    let mut ids = Vec::new();
    for n in 0..20 {
        let exe = c.execute(&a.base, &neg, &json!({"n": n})).await.expect("execute");
        c.confirm(&a.base, &exe).await.expect("confirm");
        ids.push((n, exe));
    }
    // Wait until A is running them, then kill it.
    let until = Instant::now() + Duration::from_secs(20);
    while c.result(&a.base, &ids[19].1, 0).await.map(|b| b["status"].clone()) != Ok(json!("running")) {
        assert!(Instant::now() < until, "A never started the work");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    a.kill();
    let b = Server::start(&cfg);
    for (n, exe) in &ids {
        let r = c.terminal(&b.base, exe, Duration::from_secs(60)).await;
        assert_eq!(r["status"], json!("succeeded"), "{r}");
        assert_eq!(r["result"], json!({"n": n}), "{r}");
    }
}

/// The soak test: `SOAK_N` (default 10,000) executions by 32 clients across two processes; the first process is
/// killed (SIGKILL) midway. Every confirmed execution reaches exactly one terminal result, `succeeded` with its own
/// payload echoed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn soak_ten_thousand_executions_across_two_processes_one_killed_midway() {
    /// Whether a refused step may be tried again: no answer (the process killed midway) or `503` (CONF-5
    /// `overloaded`, `store_unavailable`: both say "retry later").
    fn retryable(e: &str) -> bool {
        !e.as_bytes().first().is_some_and(u8::is_ascii_digit) || e.starts_with("503 ")
    }
    /// The pause before try `k` (1, 2, ...): 50 ms, doubling, at most the 1 s of the agents' Retry-After.
    fn pause(k: usize) -> Duration {
        Duration::from_millis((25u64 << k.min(6)).min(1000))
    }
    let total: usize = std::env::var("SOAK_N").ok().and_then(|v| v.parse().ok()).unwrap_or(10_000);
    let clients = 32;
    let redis = RedisServer::start();
    let dir = TempDir::new("soak");
    let cfg = config(&dir, &redis.url(), &unique_prefix("soak"));
    let mut a = Server::start(&cfg);
    let b = Server::start(&cfg);
    let (a_base, b_base) = (a.base.clone(), b.base.clone());
    let a_dead = Arc::new(AtomicBool::new(false));
    let next = Arc::new(AtomicUsize::new(0));
    let confirmed = Arc::new(std::sync::Mutex::new(Vec::<(usize, String)>::new()));
    let started = Instant::now();
    let mut tasks = Vec::new();
    for t in 0..clients {
        let (a_base, b_base) = (a_base.clone(), b_base.clone());
        let (a_dead, next, confirmed) = (a_dead.clone(), next.clone(), confirmed.clone());
        tasks.push(tokio::spawn(async move {
            let c = Client::new();
            // Each step on one process or the other; after A's death, everything on B.
            let pick = |k: usize| {
                if k.is_multiple_of(2) && !a_dead.load(Ordering::SeqCst) { a_base.clone() } else { b_base.clone() }
            };
            let mut neg = String::new();
            loop {
                let i = next.fetch_add(1, Ordering::SeqCst);
                if i >= total {
                    return;
                }
                let payload = json!({"message": format!("soak {i}")});
                // A refused or lost step is tried again after a pause (on the other process, when it alternates):
                // a loaded machine may answer 503 for a while (CONF-5 `overloaded`, `store_unavailable`), and
                // Retry-After asks for a pause. Patience is counted in time, not tries, and a refusal that
                // retrying cannot mend (any other status) fails at once.
                let give_up = Instant::now() + Duration::from_secs(120);
                let mut refusals: Vec<String> = Vec::new();
                for attempt in 0usize.. {
                    if attempt > 0 {
                        assert!(
                            Instant::now() < give_up,
                            "execution {i} could not be run in 120 s; the last refusals: {:#?}",
                            &refusals[refusals.len().saturating_sub(5)..]
                        );
                        tokio::time::sleep(pause(attempt)).await;
                    }
                    if neg.is_empty() {
                        match c.negotiate(&pick(t + attempt), "echo_message", echo_schema()).await {
                            Ok(n) => neg = n,
                            Err(e) => {
                                refusals.push(format!("negotiate: {e}"));
                                continue;
                            }
                        }
                    }
                    let exe = match c.execute(&pick(t + i + 1 + attempt), &neg, &payload).await {
                        Ok(exe) => exe,
                        Err(e) => {
                            assert!(retryable(&e), "EXECUTE {i} refused: {e}");
                            refusals.push(format!("execute: {e}"));
                            continue;
                        }
                    };
                    // A CONFIRM whose answer was lost is sent again (to the other process): CONF-2 makes it safe.
                    // It is confirmed within its confirm window (60 s), however loaded the machine.
                    let window = Instant::now() + Duration::from_secs(50);
                    let mut errs: Vec<String> = Vec::new();
                    for k in 0usize.. {
                        match c.confirm(&pick(t + i + k + attempt), &exe).await {
                            Ok(_) => break,
                            Err(e) => {
                                assert!(retryable(&e), "CONFIRM of {exe} refused: {e}");
                                errs.push(e);
                            }
                        }
                        assert!(
                            Instant::now() < window,
                            "execution {exe} could not be confirmed in 50 s ({} tries); the last refusals: {:#?}",
                            errs.len(),
                            &errs[errs.len().saturating_sub(5)..]
                        );
                        tokio::time::sleep(pause(k + 1)).await;
                    }
                    confirmed.lock().expect("lock").push((i, exe.clone()));
                    // Long-poll on the other process, sometimes.
                    if i % 4 == 0 {
                        let _ = c.result(&pick(t + i + attempt + 1), &exe, 2_000).await;
                    }
                    break;
                }
            }
        }));
    }
    // Kill A midway.
    while next.load(Ordering::SeqCst) < total / 2 && !tasks.iter().all(|t| t.is_finished()) {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    a_dead.store(true, Ordering::SeqCst);
    a.kill();
    for t in tasks {
        t.await.expect("client task");
    }
    let confirmed = std::mem::take(&mut *confirmed.lock().expect("lock"));
    assert_eq!(confirmed.len(), total, "every execution was confirmed");
    // Every confirmed execution reaches exactly one terminal state, succeeded with its own payload.
    let c = Arc::new(Client::new());
    let chunks: Vec<Vec<(usize, String)>> = confirmed.chunks(total.div_ceil(clients)).map(<[_]>::to_vec).collect();
    let mut checks = Vec::new();
    for chunk in chunks {
        let (c, base) = (c.clone(), b_base.clone());
        checks.push(tokio::spawn(async move {
            for (i, exe) in chunk {
                let r = c.terminal(&base, &exe, Duration::from_secs(120)).await;
                assert_eq!(r["status"], json!("succeeded"), "{r}");
                assert_eq!(r["result"]["echo"]["message"], json!(format!("soak {i}")), "{r}");
            }
        }));
    }
    for ch in checks {
        ch.await.expect("check task");
    }
    eprintln!("soak: {total} executions in {:?} across 2 processes, one killed midway", started.elapsed());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_stopped_is_503_store_unavailable_within_the_deadline_and_the_agent_recovers_when_it_is_back() {
    let mut redis = RedisServer::start();
    let cfg = RedisConfig::new(redis.url())
        .with_key_prefix(unique_prefix("fault"))
        .with_op_timeout(Duration::from_millis(500));
    let store = RedisStore::connect(
        cfg,
        AgentScope {
            did: "did:web:agent.example.com".into(),
            retention: Duration::from_secs(3600),
            max_received: 1000,
        },
    )
    .expect("connect");
    let t = TestAgent::start(standard(Arc::new(AtomicUsize::new(0))).limits(test_limits()).store(store)).await;
    let body =
        t.run("submit_report", report_schema(), json!({"title": "t", "timestamp": "2026-11-29T21:00:00Z"})).await;
    assert_eq!(body["status"], json!("succeeded"), "{body}");
    let neg = t.negotiated("submit_report", report_schema()).await;
    let exe = t.executed(&neg, json!({"title": "before", "timestamp": "2026-11-29T21:00:00Z"})).await;

    redis.stop();
    for _ in 0..3 {
        let started = Instant::now();
        let a = t.negotiate("submit_report", report_schema()).await;
        assert_eq!((a.status, a.code()), (StatusCode::SERVICE_UNAVAILABLE, "store_unavailable"), "{}", a.body);
        assert!(a.header("retry-after").is_some());
        assert!(started.elapsed() < Duration::from_secs(10), "the request hung past its deadline");
        let c = t.confirm(&exe).await;
        assert_eq!((c.status, c.code()), (StatusCode::SERVICE_UNAVAILABLE, "store_unavailable"), "{}", c.body);
        let r = t.result(&exe, 1000).await;
        assert_eq!(r.code(), "store_unavailable", "{}", r.body);
    }
    // DISCOVER needs no store.
    let d = t.send(t.http.request(reqwest::Method::OPTIONS, t.url("/a2a"))).await;
    assert_eq!(d.status, StatusCode::NO_CONTENT);

    // Redis is back (empty: it kept nothing); the agent recovers by itself.
    redis.restart();
    let until = Instant::now() + Duration::from_secs(30);
    loop {
        let a = t.negotiate("submit_report", report_schema()).await;
        if a.status == StatusCode::OK {
            break;
        }
        assert!(Instant::now() < until, "the agent did not recover: {}", a.body);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // The work queue is re-created too: a new execution runs to its end.
    let until = Instant::now() + Duration::from_secs(30);
    loop {
        let body = t
            .run("submit_report", report_schema(), json!({"title": "after", "timestamp": "2026-11-29T21:00:00Z"}))
            .await;
        if body["status"] == json!("succeeded") {
            break;
        }
        assert!(Instant::now() < until, "work does not run after the restart: {body}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_on_a_redis_cluster_runs_the_handshake_and_shares_it_with_a_second_instance() {
    let cluster = crate::redis_support::shared_cluster();
    let prefix = unique_prefix("cluster-agent");
    let store = |prefix: &str| {
        RedisStore::connect(
            RedisConfig::new(cluster.urls()).with_cluster(true).with_key_prefix(prefix),
            AgentScope {
                did: "did:web:agent.example.com".into(),
                retention: Duration::from_secs(3600),
                max_received: 1000,
            },
        )
        .expect("connect")
    };
    let runs = Arc::new(AtomicUsize::new(0));
    let one = TestAgent::start(standard(runs.clone()).limits(test_limits()).store(store(&prefix))).await;
    let two = TestAgent::start(standard(runs.clone()).limits(test_limits()).store(store(&prefix))).await;
    for i in 0..10 {
        let neg = one.negotiated("submit_report", report_schema()).await;
        let exe = two.executed(&neg, json!({"title": format!("r{i}"), "timestamp": "2026-11-29T21:00:00Z"})).await;
        assert_eq!(one.confirm(&exe).await.status, StatusCode::ACCEPTED);
        let r = two.result(&exe, 10_000).await;
        assert_eq!(r.body["status"], json!("succeeded"), "{}", r.body);
        assert_eq!(r.body["result"]["filed"]["title"], json!(format!("r{i}")));
        // One audit record per request, with the step's identifiers.
        one.agent.engine().audit().flush().await.expect("flush");
        let q = a2a_server::store::audit::AuditQuery { execution_id: Some(exe.clone()), ..Default::default() };
        let steps: Vec<String> =
            one.agent.engine().audit().query(&q).await.expect("audit").into_iter().map(|r| r.step).collect();
        assert_eq!(steps, vec!["confirm"], "the in-memory audit of process one");
    }
}
