//! The cost of `Client::call` against the same handshake written by hand with reqwest, in one run.
//!
//! Run with: `cargo bench -p a2a-tests --bench call` (options: `-- --iterations 1000`).
//!
//! The agent (`a2a-server`, capability `echo_message`, in-memory store) runs in this process on its own runtime;
//! requests go over loopback HTTP with keep-alive. Scenarios, each sequential:
//! - `raw cold`: DISCOVER + NEGOTIATE + EXECUTE + CONFIRM + RESULT (long-poll), hand-written with reqwest;
//! - `call cold`: `Client::call` with its caches emptied before every call (`Client::forget`): the same five
//!   requests, plus `GET /a2a/capabilities`, with all the client's checks;
//! - `raw warm`: EXECUTE + CONFIRM + RESULT under one negotiation, hand-written;
//! - `call warm`: `Client::call` with DISCOVER, capabilities and the agreed schema cached.

use std::time::{Duration, Instant};

use a2a_client::{Client, Identity};
use a2a_core::capability::{AuthRequirement, CapabilityDeclaration};
use serde_json::{Value, json};

const SENDER: &str = "did:web:bench-client.example.com";

fn schema() -> Value {
    json!({"type": "object", "properties": {"message": {"type": "string"}, "n": {"type": "number"}}, "required": ["message"]})
}

fn payload() -> Value {
    json!({"message": "hello", "n": 42})
}

struct Raw {
    http: reqwest::Client,
    base: String,
}

impl Raw {
    async fn send(
        &self,
        method: reqwest::Method,
        path: &str,
        extra: &[(&str, &str)],
        body: Option<&Value>,
    ) -> (u16, Vec<u8>) {
        let mut rb = self
            .http
            .request(method, format!("{}{path}", self.base))
            .header("A2A-Version", "0.3")
            .header("A2A-Sender-ID", SENDER);
        for (k, v) in extra {
            rb = rb.header(*k, *v);
        }
        if let Some(b) = body {
            rb = rb.json(b);
        }
        let r = rb.send().await.expect("request");
        let s = r.status().as_u16();
        (s, r.bytes().await.expect("body").to_vec())
    }

    async fn negotiate(&self) -> String {
        let (s, b) = self
            .send(
                reqwest::Method::POST,
                "/a2a/negotiate",
                &[],
                Some(&json!({"target_capability": "echo_message", "proposed_schema": schema()})),
            )
            .await;
        assert_eq!(s, 200);
        serde_json::from_slice::<Value>(&b).expect("json")["negotiation_id"].as_str().expect("id").to_owned()
    }

    async fn warm(&self, neg: &str) {
        let (s, b) =
            self.send(reqwest::Method::POST, "/a2a/execute", &[("A2A-Negotiation-ID", neg)], Some(&payload())).await;
        assert_eq!(s, 201);
        let id = serde_json::from_slice::<Value>(&b).expect("json")["execution_id"].as_str().expect("id").to_owned();
        let (s, _) = self.send(reqwest::Method::POST, "/a2a/confirm", &[], Some(&json!({"execution_id": id}))).await;
        assert_eq!(s, 202);
        let seg = a2a_core::execution_id::ExecutionId::parse(&id).expect("id").to_path_segment();
        let (s, b) = self.send(reqwest::Method::GET, &format!("/a2a/result/{seg}?wait_ms=5000"), &[], None).await;
        assert_eq!(s, 200);
        assert_eq!(serde_json::from_slice::<Value>(&b).expect("json")["status"], "succeeded");
    }

    async fn cold(&self) {
        let (s, _) = self.send(reqwest::Method::OPTIONS, "/a2a", &[], None).await;
        assert_eq!(s, 204);
        let neg = self.negotiate().await;
        self.warm(&neg).await;
    }
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted.get(i).copied().unwrap_or_default()
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let iterations: usize = args
        .iter()
        .position(|a| a == "--iterations")
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(500);
    // The agent on its own runtime and thread.
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().expect("runtime");
        rt.block_on(async move {
            let decl = CapabilityDeclaration {
                name: "echo_message".into(),
                description: "echo".into(),
                auth_requirement: AuthRequirement::None,
                sub_capabilities: vec![],
                region_restriction: vec![],
                input_schema: schema(),
                output_schema: None,
                estimated_cost: None,
                estimated_latency_ms: None,
                fallback_for: vec![],
            };
            let agent = a2a_server::AgentBuilder::new("did:web:bench-agent.example.com")
                .capability(decl, a2a_server::handler::builtin::echo())
                .build()
                .expect("agent");
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
            let _ = tx.send(format!("http://{}", listener.local_addr().expect("addr")));
            let _ = axum::serve(listener, agent.router()).await;
        });
    });
    let base = rx.recv().expect("agent started");
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    rt.block_on(async move {
        let raw = Raw { http: reqwest::Client::new(), base: base.clone() };
        let client = Client::builder(Identity::unsigned(SENDER).expect("did")).build().expect("client");
        let url = format!("{base}/a2a");
        let warmup = iterations / 10 + 10;
        let neg = raw.negotiate().await;
        let mut results: Vec<(&str, Vec<Duration>)> = Vec::new();
        for scenario in ["raw cold", "call cold", "raw warm", "call warm"] {
            let mut times = Vec::with_capacity(iterations);
            for i in 0..warmup + iterations {
                if scenario == "call cold" {
                    client.forget(&url).await.expect("url");
                }
                let t = Instant::now();
                match scenario {
                    "raw cold" => raw.cold().await,
                    "raw warm" => raw.warm(&neg).await,
                    _ => {
                        client.call(&url, "echo_message", payload()).await.expect("call");
                    }
                }
                if i >= warmup {
                    times.push(t.elapsed());
                }
            }
            times.sort();
            results.push((scenario, times));
        }
        println!("{iterations} sequential calls per scenario (after {warmup} warm-up calls)");
        println!("| scenario | median | p95 | p99 |");
        println!("|---|---:|---:|---:|");
        for (name, t) in &results {
            println!(
                "| {name} | {:.0} µs | {:.0} µs | {:.0} µs |",
                percentile(t, 0.5).as_secs_f64() * 1e6,
                percentile(t, 0.95).as_secs_f64() * 1e6,
                percentile(t, 0.99).as_secs_f64() * 1e6
            );
        }
        let med = |n: &str| results.iter().find(|(s, _)| *s == n).map_or(Duration::ZERO, |(_, t)| percentile(t, 0.5));
        println!(
            "call cold / raw cold = {:.2}; call warm / raw warm = {:.2}; call warm / raw cold = {:.2}",
            med("call cold").as_secs_f64() / med("raw cold").as_secs_f64(),
            med("call warm").as_secs_f64() / med("raw warm").as_secs_f64(),
            med("call warm").as_secs_f64() / med("raw cold").as_secs_f64()
        );
    });
}
