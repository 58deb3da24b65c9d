//! The handshake over loopback HTTP, side by side with a bare axum JSON echo, in one run.
//!
//! Run with: `cargo bench -p a2a-server --bench handshake` (options: `-- --iterations 2000 --concurrency 32
//! --store both|memory|redis`).
//!
//! Scenarios (client: reqwest with keep-alive; server: the agent's router on hyper, same process, its own runtime):
//! - `echo`: `POST /echo` of a small JSON body, answered by a bare axum handler — the baseline;
//! - `cold`: DISCOVER + NEGOTIATE + EXECUTE + CONFIRM + RESULT (long-poll) per call, nothing cached by the client;
//! - `warm`: EXECUTE + CONFIRM + RESULT (long-poll) under an existing negotiation;
//!
//! each without and with `did_auth` signatures (the client signs every request, the agent verifies every signature),
//! sequentially (latency percentiles) and with N concurrent clients (throughput). With `--store redis` or `both`
//! (the default), the warm and cold paths also run on an agent whose state is in Redis (`REDIS_URL`, or a
//! `redis-server` the bench starts on a free port), and the Redis round trips per execution are counted.
//! `a2a-server/benches/redis_own_cpu.sh <this binary>` runs it with redis-server on a CPU of its own (CPU 1) and the
//! client and agent on the other, as in a deployment where Redis is not inside the agents' CPU budget.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use a2a_core::capability::{AuthRequirement, CapabilityDeclaration};
use a2a_core::did::{Did, DidDocument};
use a2a_core::integrity::{self, Coverage, MessageParts};
use a2a_core::keys::SigningKey;
use a2a_core::resolver::StaticResolver;
use a2a_server::AgentBuilder;
use a2a_server::handler::ExecutionContext;
use serde_json::{Value, json};

/// The allocator of the `a2a-server` binary (see `a2a_server::ShippedAllocator`): the bench measures what ships.
#[cfg(feature = "mimalloc")]
#[global_allocator]
static GLOBAL: a2a_server::ShippedAllocator = a2a_server::ShippedAllocator;

const SENDER: &str = "did:web:bench-client.example.com";
const AGENT: &str = "did:web:bench-agent.example.com";

struct Client {
    http: reqwest::Client,
    /// `http://host:port`.
    origin: String,
    /// The path under which the agent is mounted (`/plain`, `/signed`).
    prefix: String,
    key: Option<SigningKey>,
}

fn now() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64)
}

impl Client {
    async fn send(
        &self,
        method: reqwest::Method,
        path: &str,
        extra: &[(&str, &str)],
        body: Option<&Value>,
    ) -> (u16, reqwest::header::HeaderMap, Vec<u8>) {
        let bytes = body.map(|b| serde_json::to_vec(b).expect("json")).unwrap_or_default();
        let mut headers: Vec<(&str, &str)> = vec![("a2a-version", "0.3"), ("a2a-sender-id", SENDER)];
        headers.extend_from_slice(extra);
        let target = format!("{}{path}", self.prefix);
        let mut rb = self.http.request(method.clone(), format!("{}{target}", self.origin));
        // DISCOVER is not signed: a caller signs the requests that name a capability.
        if let Some(key) = self.key.as_ref().filter(|_| method != reqwest::Method::OPTIONS) {
            let coverage = if body.is_some() { Coverage::PayloadHash } else { Coverage::HeaderOnly };
            let parts = MessageParts {
                method: method.as_str(),
                target: &target,
                headers: &headers,
                body: &bytes,
                status: None,
            };
            let sig = integrity::sign(key, "key-1", SENDER, AGENT, coverage, &parts, now(), 60).expect("sign");
            rb = rb.header("A2A-Signature", sig);
        }
        for (k, v) in &headers {
            rb = rb.header(*k, *v);
        }
        if body.is_some() {
            rb = rb.header("Content-Type", "application/json").body(bytes);
        }
        let resp = rb.send().await.expect("request");
        let status = resp.status().as_u16();
        let h = resp.headers().clone();
        (status, h, resp.bytes().await.expect("body").to_vec())
    }

    async fn negotiate(&self) -> String {
        let (s, _, b) = self
            .send(
                reqwest::Method::POST,
                "/a2a/negotiate",
                &[],
                Some(&json!({"target_capability": "echo_message", "proposed_schema": schema()})),
            )
            .await;
        assert_eq!(s, 200, "{}", String::from_utf8_lossy(&b));
        let v: Value = serde_json::from_slice(&b).expect("json");
        v["negotiation_id"].as_str().expect("id").to_owned()
    }

    async fn warm(&self, neg: &str) {
        let payload = json!({"message": "hello", "n": 42, "tags": ["a", "b"]});
        let (s, _, b) =
            self.send(reqwest::Method::POST, "/a2a/execute", &[("a2a-negotiation-id", neg)], Some(&payload)).await;
        assert_eq!(s, 201, "{}", String::from_utf8_lossy(&b));
        let v: Value = serde_json::from_slice(&b).expect("json");
        let id = v["execution_id"].as_str().expect("id").to_owned();
        let (s, _, _) = self.send(reqwest::Method::POST, "/a2a/confirm", &[], Some(&json!({"execution_id": id}))).await;
        assert_eq!(s, 202);
        let seg = a2a_core::execution_id::ExecutionId::parse(&id).expect("id").to_path_segment();
        let (s, _, b) = self.send(reqwest::Method::GET, &format!("/a2a/result/{seg}?wait_ms=5000"), &[], None).await;
        assert_eq!(s, 200);
        let v: Value = serde_json::from_slice(&b).expect("json");
        assert_eq!(v["status"], json!("succeeded"), "{v}");
    }

    async fn cold(&self) {
        let (s, h, _) = self.send(reqwest::Method::OPTIONS, "/a2a", &[], None).await;
        assert_eq!(s, 204);
        assert!(h.get("a2a-capabilities").is_some());
        let neg = self.negotiate().await;
        self.warm(&neg).await;
    }

    async fn echo(&self) {
        let resp = self
            .http
            .post(format!("{}/echo", self.origin))
            .json(&json!({"message": "hello", "n": 42, "tags": ["a", "b"]}))
            .send()
            .await
            .expect("echo");
        assert_eq!(resp.status().as_u16(), 200);
        let _ = resp.bytes().await.expect("body");
    }
}

fn schema() -> Value {
    json!({"type": "object", "properties": {"message": {"type": "string"}, "n": {"type": "number"}, "tags": {"type": "array", "items": {"type": "string"}}}, "required": ["message"]})
}

#[derive(Clone, Copy, PartialEq)]
enum Scenario {
    Echo,
    Cold,
    Warm,
}

impl Scenario {
    fn name(self) -> &'static str {
        match self {
            Scenario::Echo => "bare axum JSON echo (baseline)",
            Scenario::Cold => "full cold handshake (DISCOVER+NEGOTIATE+EXECUTE+CONFIRM+RESULT)",
            Scenario::Warm => "warm path (EXECUTE+CONFIRM+RESULT long-poll)",
        }
    }
    fn requests(self) -> u64 {
        match self {
            Scenario::Echo => 1,
            Scenario::Cold => 5,
            Scenario::Warm => 3,
        }
    }
}

async fn one(c: &Client, s: Scenario, neg: &str) {
    match s {
        Scenario::Echo => c.echo().await,
        Scenario::Cold => c.cold().await,
        Scenario::Warm => c.warm(neg).await,
    }
}

fn pct(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn us(d: Duration) -> String {
    format!("{:.0} µs", d.as_secs_f64() * 1e6)
}

async fn sequential(c: &Client, s: Scenario, neg: &str, n: usize) -> (Duration, Duration, Duration) {
    for _ in 0..n / 10 {
        one(c, s, neg).await;
    }
    let mut times = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        one(c, s, neg).await;
        times.push(t.elapsed());
    }
    times.sort();
    (pct(&times, 0.5), pct(&times, 0.95), pct(&times, 0.99))
}

async fn concurrent(c: Arc<Client>, s: Scenario, neg: Arc<String>, clients: usize, duration: Duration) -> f64 {
    let deadline = Instant::now() + duration;
    let started = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..clients {
        let c = c.clone();
        let neg = neg.clone();
        tasks.push(tokio::spawn(async move {
            let mut done = 0u64;
            while Instant::now() < deadline {
                one(&c, s, &neg).await;
                done += 1;
            }
            done
        }));
    }
    let mut total = 0;
    for t in tasks {
        total += t.await.expect("task");
    }
    (total * s.requests()) as f64 / started.elapsed().as_secs_f64()
}

fn arg(name: &str, default: usize) -> usize {
    let args: Vec<String> = std::env::args().collect();
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// A `redis-server` the bench started; killed on drop.
struct OwnRedis(Option<std::process::Child>);

impl Drop for OwnRedis {
    fn drop(&mut self) {
        if let Some(c) = self.0.as_mut() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn redis_url() -> (String, OwnRedis) {
    if let Ok(url) = std::env::var("REDIS_URL") {
        return (url, OwnRedis(None));
    }
    let port = std::net::TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port();
    let child = std::process::Command::new("redis-server")
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("redis-server (apt-get install redis-server, or set REDIS_URL)");
    let until = Instant::now() + Duration::from_secs(10);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < until, "redis-server did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
    (format!("redis://127.0.0.1:{port}"), OwnRedis(Some(child)))
}

fn main() {
    let iterations = arg("--iterations", 2000);
    let clients = arg("--concurrency", 32);
    let seconds = arg("--seconds", 5);
    // The server: its own two-worker runtime, like a standalone agent on this 2-core machine.
    let server_rt =
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
    let store_mode = std::env::args().skip_while(|a| a != "--store").nth(1).unwrap_or_else(|| "both".into());
    let with_redis = store_mode == "redis" || store_mode == "both";
    let with_memory = store_mode == "memory" || store_mode == "both";
    let (url, _own_redis) = if with_redis { redis_url() } else { (String::new(), OwnRedis(None)) };
    let client_key = SigningKey::generate().expect("key");
    let (base, _guard, redis_store) = server_rt.block_on(async {
        let did = Did::parse(SENDER).expect("did");
        let resolver = StaticResolver::new();
        resolver.insert(&did, DidDocument::generate(&did, &[("key-1", client_key.verifying_key().to_jwk())]));
        let decl = |auth| CapabilityDeclaration {
            name: "echo_message".into(),
            description: "echo".into(),
            auth_requirement: auth,
            sub_capabilities: vec![],
            region_restriction: vec![],
            input_schema: schema(),
            output_schema: None,
            estimated_cost: None,
            estimated_latency_ms: None,
            fallback_for: vec![],
        };
        let mut limits = a2a_server::Limits::default();
        limits.max_concurrent_executions = 1024;
        let plain = AgentBuilder::new(AGENT)
            .limits(limits.clone())
            .capability(decl(AuthRequirement::None), |_c: ExecutionContext, p: Value| async move { Ok(p) })
            .build()
            .expect("agent");
        let signed = AgentBuilder::new(AGENT)
            .limits(limits.clone())
            .capability(decl(AuthRequirement::DidAuth), |_c: ExecutionContext, p: Value| async move { Ok(p) })
            .resolver(Arc::new(resolver))
            .build()
            .expect("agent");
        let mut app = axum::Router::new()
            .route("/echo", axum::routing::post(|axum::Json(v): axum::Json<Value>| async move { axum::Json(v) }))
            .nest("/plain", plain.router())
            .nest("/signed", signed.router());
        let mut redis_store = None;
        if with_redis {
            let store = a2a_server::store::RedisStore::connect(
                a2a_server::store::redis::RedisConfig::new(url.clone())
                    .with_key_prefix(format!("bench{}", std::process::id())),
                a2a_server::store::redis::AgentScope {
                    did: AGENT.into(),
                    retention: Duration::from_secs(600),
                    max_received: limits.max_received_executions,
                },
            )
            .expect("redis store");
            let redis_agent = AgentBuilder::new(AGENT)
                .limits(limits.clone())
                .store(store.clone())
                .capability(decl(AuthRequirement::None), |_c: ExecutionContext, p: Value| async move { Ok(p) })
                .build()
                .expect("agent");
            app = app.nest("/redis", redis_agent.router());
            redis_store = Some(store);
        }
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let base = format!("http://{}", listener.local_addr().expect("addr"));
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(async move {
            let shutdown = async {
                let _ = rx.await;
            };
            let _ = a2a_server::serve::serve(listener, app, &limits, shutdown, Duration::from_secs(1)).await;
        });
        (base, tx, redis_store)
    });
    let client_rt =
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
    client_rt.block_on(async {
        let http = reqwest::Client::builder().pool_max_idle_per_host(256).build().expect("client");
        let client = |prefix: &str, key: Option<SigningKey>| {
            Arc::new(Client { http: http.clone(), origin: base.clone(), prefix: prefix.to_owned(), key })
        };
        let plain = client("/plain", None);
        let signed = client("/signed", Some(client_key.clone()));
        let echo = client("", None);
        let on_redis = client("/redis", None);
        let plain_neg = Arc::new(plain.negotiate().await);
        let signed_neg = Arc::new(signed.negotiate().await);
        let redis_neg = Arc::new(if with_redis { on_redis.negotiate().await } else { String::new() });
        println!("iterations {iterations} (sequential), {clients} concurrent clients for {seconds} s\n");
        println!("| scenario | store | signatures | p50 | p95 | p99 | HTTP requests/s at {clients} clients |");
        println!("|---|---|---|---:|---:|---:|---:|");
        type Run<'a> = (Scenario, &'a Arc<Client>, &'a Arc<String>, &'a str, &'a str);
        let mut runs: Vec<Run<'_>> = vec![(Scenario::Echo, &echo, &plain_neg, "—", "—")];
        if with_memory {
            runs.push((Scenario::Warm, &plain, &plain_neg, "off", "memory"));
        }
        if with_redis {
            runs.push((Scenario::Warm, &on_redis, &redis_neg, "off", "redis"));
        }
        if with_memory {
            runs.extend([
                (Scenario::Warm, &signed, &signed_neg, "on", "memory"),
                (Scenario::Cold, &plain, &plain_neg, "off", "memory"),
            ]);
        }
        if with_redis {
            runs.push((Scenario::Cold, &on_redis, &redis_neg, "off", "redis"));
        }
        if with_memory {
            runs.push((Scenario::Cold, &signed, &signed_neg, "on", "memory"));
        }
        let only = std::env::args().skip_while(|a| a != "--only").nth(1);
        for (s, c, neg, sig, store) in runs {
            if only.as_deref().is_some_and(|o| {
                o != format!(
                    "{}-{sig}",
                    match s {
                        Scenario::Echo => "echo",
                        Scenario::Cold => "cold",
                        Scenario::Warm => "warm",
                    }
                )
            }) {
                continue;
            }
            let (p50, p95, p99) = sequential(c, s, neg, iterations).await;
            let rps = concurrent(c.clone(), s, neg.clone(), clients, Duration::from_secs(seconds as u64)).await;
            println!("| {} | {store} | {sig} | {} | {} | {} | {rps:.0} |", s.name(), us(p50), us(p95), us(p99));
        }
        if let Some(store) = redis_store.as_ref().filter(|_| with_redis) {
            // Round trips per warm execution: counted by the store, over sequential calls after the warm-up.
            let n = 1000u64;
            tokio::time::sleep(Duration::from_millis(300)).await;
            let before = store.round_trips();
            for _ in 0..n {
                on_redis.warm(&redis_neg).await;
            }
            tokio::time::sleep(Duration::from_millis(300)).await;
            let idle_before = store.round_trips();
            tokio::time::sleep(Duration::from_millis(1000)).await;
            let idle = store.round_trips() - idle_before;
            let per = (idle_before - before) as f64 / n as f64;
            println!("\nRedis round trips per warm execution (EXECUTE+CONFIRM+RESULT and the worker), sequential, {n} calls: {per:.2} (idle background: {idle} per second)");
        }
    });
    drop(client_rt);
    drop(server_rt);
}
