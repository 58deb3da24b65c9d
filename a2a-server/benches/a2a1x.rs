//! A2A 1.x `SendMessage` (spec §20): this agent's bridge vs an agent built with the official Python SDK (`a2a-sdk`),
//! same machine, same client, one run.
//!
//! Run with: `A2A_SDK_PYTHON=/path/to/venv/bin/python cargo bench -p a2a-server --bench a2a1x` (options:
//! `-- --iterations 2000 --sdk-iterations 500 --warmup 50`); for isolation on a noisy VM run the built binary under
//! `chrt -f 10`.
//!
//! Both agents serve an echo skill (`echo_message` here, `echo` there) that answers the message's data part. The client (reqwest, keep-alive, one
//! connection) sends `SendMessage` over JSON-RPC with one data part, sequentially, and checks every answer is a
//! completed task. Our agent runs in this process on its own 2-thread runtime (the same code as `a2a-server`, with
//! the in-memory store); the SDK agent is `tests/fixtures/a2a1x/sdk_agent.py` on uvicorn, its own process.

use std::time::{Duration, Instant};

use a2a_core::capability::{AuthRequirement, CapabilityDeclaration};
use a2a_server::AgentBuilder;
use a2a_server::a2a1x::{Bridge, BridgeOptions};
use a2a_server::handler::ExecutionContext;
use serde_json::{Value, json};

/// The allocator of the `a2a-server` binary (see `a2a_server::ShippedAllocator`): the bench measures what ships.
#[cfg(feature = "mimalloc")]
#[global_allocator]
static GLOBAL: a2a_server::ShippedAllocator = a2a_server::ShippedAllocator;

struct Args {
    iterations: usize,
    sdk_iterations: usize,
    warmup: usize,
}

fn args() -> Args {
    let mut a = Args { iterations: 2000, sdk_iterations: 500, warmup: 50 };
    let argv: Vec<String> = std::env::args().collect();
    let mut i = 1;
    while i < argv.len() {
        let v = argv.get(i + 1).and_then(|v| v.parse().ok());
        match (argv[i].as_str(), v) {
            ("--iterations", Some(n)) => a.iterations = n,
            ("--sdk-iterations", Some(n)) => a.sdk_iterations = n,
            ("--warmup", Some(n)) => a.warmup = n,
            _ => {
                i += 1;
                continue;
            }
        }
        i += 2;
    }
    a
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).expect("free port")
}

fn our_agent() -> std::net::SocketAddr {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("rt");
        rt.block_on(async move {
            let decl = CapabilityDeclaration {
                name: "echo_message".into(),
                description: "Answers the payload.".into(),
                auth_requirement: AuthRequirement::None,
                sub_capabilities: vec![],
                region_restriction: vec![],
                input_schema: json!({"type": "object"}),
                output_schema: None,
                estimated_cost: None,
                estimated_latency_ms: None,
                fallback_for: vec![],
            };
            let agent = AgentBuilder::new("did:web:bench-agent.example.com")
                .capability(decl, |_c: ExecutionContext, p: Value| async move { Ok(p) })
                .build()
                .expect("agent");
            let bridge = Bridge::new(&agent, BridgeOptions::default()).expect("bridge");
            let app = agent.router().merge(bridge.router());
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
            tx.send(listener.local_addr().expect("addr")).expect("send addr");
            let limits = agent.engine().limits().clone();
            let _ =
                a2a_server::serve::serve(listener, app, &limits, std::future::pending(), Duration::from_secs(1)).await;
        });
    });
    rx.recv().expect("our agent starts")
}

struct Sdk(std::process::Child);

impl Drop for Sdk {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn sdk_agent(python: &str, port: u16) -> Sdk {
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/a2a1x/sdk_agent.py");
    let child = std::process::Command::new(python)
        .arg(script)
        .arg(port.to_string())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::inherit())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start the SDK agent with {python}: {e}"));
    Sdk(child)
}

async fn wait_ready(http: &reqwest::Client, base: &str) {
    for _ in 0..600 {
        if http.get(format!("{base}/.well-known/agent-card.json")).send().await.is_ok_and(|r| r.status() == 200) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{base} did not serve its card within 60 s");
}

struct Stats {
    median_us: f64,
    p95_us: f64,
    rps: f64,
}

async fn run(http: &reqwest::Client, url: &str, skill: &str, n: usize, warmup: usize) -> Stats {
    let mut lat = Vec::with_capacity(n);
    let mut total = Duration::ZERO;
    for i in 0..(warmup + n) {
        let body = json!({"jsonrpc": "2.0", "id": i, "method": "SendMessage", "params": {"message": {
            "messageId": format!("bench-{i}-{}", std::process::id()), "role": "ROLE_USER",
            "parts": [{"data": {"text": "Lift 3 out of service", "n": i}}], "metadata": {"skill": skill}}}});
        let started = Instant::now();
        let resp = http.post(url).header("A2A-Version", "1.0").json(&body).send().await.expect("request");
        let v: Value = resp.json().await.expect("JSON answer");
        let took = started.elapsed();
        assert_eq!(v["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED", "{v}");
        if i >= warmup {
            lat.push(took.as_secs_f64() * 1e6);
            total += took;
        }
    }
    lat.sort_by(f64::total_cmp);
    let pct = |p: f64| lat[((lat.len() as f64 - 1.0) * p).round() as usize];
    Stats { median_us: pct(0.5), p95_us: pct(0.95), rps: n as f64 / total.as_secs_f64() }
}

fn main() {
    let a = args();
    let Some(python) = std::env::var("A2A_SDK_PYTHON").ok().filter(|p| !p.is_empty()) else {
        eprintln!(
            "set A2A_SDK_PYTHON to a Python with a2a-sdk[http-server]==1.3.0 and uvicorn (bash .ci/run makes one)"
        );
        std::process::exit(2);
    };
    let ours = our_agent();
    let port = free_port();
    let _sdk = sdk_agent(&python, port);
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("rt");
    rt.block_on(async {
        let http = reqwest::Client::builder().pool_max_idle_per_host(1).build().expect("client");
        let our_base = format!("http://{ours}");
        let sdk_base = format!("http://127.0.0.1:{port}");
        wait_ready(&http, &our_base).await;
        wait_ready(&http, &sdk_base).await;
        let us = run(&http, &format!("{our_base}/a2a1x/jsonrpc"), "echo_message", a.iterations, a.warmup).await;
        let sdk = run(&http, &format!("{sdk_base}/"), "echo", a.sdk_iterations, a.warmup).await;
        println!("A2A 1.x SendMessage (JSON-RPC, echo skill), sequential, one keep-alive connection");
        println!("| agent | requests | median | p95 | requests/s |");
        println!("|---|---|---|---|---|");
        for (name, n, s) in
            [("a2a-server bridge", a.iterations, &us), ("a2a-sdk 1.3.0 (uvicorn)", a.sdk_iterations, &sdk)]
        {
            println!("| {name} | {n} | {:.0} µs | {:.0} µs | {:.0} |", s.median_us, s.p95_us, s.rps);
        }
        println!(
            "ratio: {:.1}x the SDK's throughput, median latency {:.1}x lower",
            us.rps / sdk.rps,
            sdk.median_us / us.median_us
        );
    });
}
