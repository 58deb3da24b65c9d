//! The gateway's added latency and throughput, side by side with nginx, in one run with one client.
//!
//! Run with: `cargo bench -p a2a-tests --bench proxy` (options: `-- --iterations 2000 --concurrency 32
//! --seconds 5 [--rounds 10] [--only gateway | --only direct,nginx,gateway]`; needs `nginx` on the PATH, `apt-get install nginx`; on a shared VM: `chrt -f 10 <bench binary>`).
//!
//! Paths (client: reqwest with keep-alive, its own runtime; agent: the a2a-server router on its own runtime; the
//! gateway on one worker thread of its own, `Gateway::serve_workers`, as the binary serves; nginx as a child process
//! with one worker and `proxy_pass` to an upstream with `keepalive`):
//! - `direct`: client → agent;
//! - `nginx`: client → nginx → agent;
//! - `gateway`: client → gateway → agent, routing on, signature checks off (`edge.verify_signatures = false`);
//! - `direct_signed` / `gateway_signed`: every request signed by the client (the gateway verifies it as the
//!   audience, re-signs for the agent, the agent verifies the gateway's signature);
//! - `hyper_floor`: a proxy with no protocol logic on the gateway's HTTP machinery (hyper's HTTP/1.1 server, the
//!   gateway's [`a2a_gateway::upstream::Upstream`]): the cost of that machinery alone;
//! - `tokio_floor`: a proxy with no HTTP library at all (httparse over Tokio sockets, bytes forwarded as received):
//!   the floor of any proxy on Tokio on this machine.
//!
//! One iteration is EXECUTE + CONFIRM + RESULT (long-poll) under a negotiation made once through the same path:
//! three requests, each routed by the gateway (negotiation header, execution id in the body, in the path).

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

#[cfg(feature = "mimalloc")]
#[global_allocator]
static GLOBAL: a2a_server::ShippedAllocator = a2a_server::ShippedAllocator;

const CLIENT: &str = "did:web:bench-client.example.com";
const AGENT: &str = "did:web:bench-agent.example.com";
const GATEWAY: &str = "did:web:bench-gateway.example.com";

fn now() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64)
}

#[derive(Clone)]
struct Client {
    http: reqwest::Client,
    origin: String,
    key: Option<(SigningKey, &'static str)>,
}

impl Client {
    async fn send(&self, method: &str, path: &str, extra: &[(&str, &str)], body: Option<&Value>) -> (u16, Value) {
        let bytes = body.map(|b| serde_json::to_vec(b).expect("json")).unwrap_or_default();
        let mut headers: Vec<(&str, &str)> = vec![("a2a-version", "0.3"), ("a2a-sender-id", CLIENT)];
        headers.extend_from_slice(extra);
        let mut rb = self
            .http
            .request(reqwest::Method::from_bytes(method.as_bytes()).expect("method"), format!("{}{path}", self.origin));
        if let Some((key, aud)) = &self.key {
            let coverage = if bytes.is_empty() { Coverage::HeaderOnly } else { Coverage::PayloadHash };
            let parts = MessageParts { method, target: path, headers: &headers, body: &bytes, status: None };
            let token = integrity::sign(key, "key-1", CLIENT, aud, coverage, &parts, now(), 60).expect("sign");
            rb = rb.header("a2a-signature", token);
        }
        for (k, v) in &headers {
            rb = rb.header(*k, *v);
        }
        if !bytes.is_empty() {
            rb = rb.header("content-type", "application/json").body(bytes);
        }
        let r = rb.send().await.expect("send");
        let status = r.status().as_u16();
        let b = r.bytes().await.expect("body");
        (status, serde_json::from_slice(&b).unwrap_or(Value::Null))
    }

    async fn negotiate(&self, cap: &str) -> String {
        let (s, v) = self
            .send(
                "POST",
                "/a2a/negotiate",
                &[],
                Some(&json!({"target_capability": cap, "proposed_schema": {"type": "object"}})),
            )
            .await;
        assert_eq!(s, 200, "{v}");
        v["negotiation_id"].as_str().expect("id").to_owned()
    }

    async fn iteration(&self, neg: &str) {
        let (s, v) = self.send("POST", "/a2a/execute", &[("a2a-negotiation-id", neg)], Some(&json!({"n": 1}))).await;
        assert_eq!(s, 201, "{v}");
        let id = v["execution_id"].as_str().expect("id").to_owned();
        let (s, v) = self.send("POST", "/a2a/confirm", &[], Some(&json!({"execution_id": id}))).await;
        assert_eq!(s, 202, "{v}");
        let seg = a2a_core::execution_id::ExecutionId::parse(&id).expect("id").to_path_segment();
        let (s, v) = self.send("GET", &format!("/a2a/result/{seg}?wait_ms=5000"), &[], None).await;
        assert!(s == 200 && v["status"] == "succeeded", "{v}");
    }
}

/// A runtime whose threads are named (`perf report --comm gateway` separates the parts of one run).
fn runtime(name: &str, threads: usize) -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        .thread_name(name)
        .enable_all()
        .build()
        .expect("runtime")
}

fn arg(name: &str, default: u64) -> u64 {
    let args: Vec<String> = std::env::args().collect();
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// CPU time in ns of the threads of process `pid` whose name starts with `name` (all its threads when `None`): on CPU in all, from
/// `/proc/<pid>/task/<tid>/schedstat`, and in the kernel, from `stat`'s `stime` (clock ticks, 100 per second).
fn cpu_ns(pid: u32, name: Option<&str>) -> (u64, u64) {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else { return (0, 0) };
    tasks
        .filter_map(Result::ok)
        .filter(|t| name.is_none_or(|n| std::fs::read_to_string(t.path().join("comm")).is_ok_and(|c| c.starts_with(n))))
        .map(|t| {
            let total = std::fs::read_to_string(t.path().join("schedstat"))
                .ok()
                .and_then(|s| s.split_whitespace().next()?.parse::<u64>().ok())
                .unwrap_or(0);
            // Fields after the `(comm)`: state is the first, stime the 13th.
            let sys = std::fs::read_to_string(t.path().join("stat"))
                .ok()
                .and_then(|st| st.rsplit_once(')')?.1.split_whitespace().nth(12)?.parse::<u64>().ok())
                .unwrap_or(0);
            (total, sys * 10_000_000)
        })
        .fold((0, 0), |a, b| (a.0 + b.0, a.1 + b.1))
}

/// CPU time in ns (all, kernel) of the nginx master `pid` and its worker processes.
fn nginx_cpu_ns(master: u32) -> (u64, u64) {
    let children: Vec<u32> = std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/stat")).ok().is_some_and(|st| {
                // Fields after the `(comm)`: state, ppid, ...
                st.rsplit_once(')').and_then(|(_, rest)| rest.split_whitespace().nth(1)?.parse::<u32>().ok())
                    == Some(master)
            })
        })
        .collect();
    children.iter().map(|c| cpu_ns(*c, None)).fold(cpu_ns(master, None), |a, b| (a.0 + b.0, a.1 + b.1))
}

/// What one path measured over the rounds.
#[derive(Default)]
struct Measured {
    /// Latencies of the sequential iterations.
    lat: Vec<Duration>,
    /// Iterations done by the concurrent clients, and the time they took.
    done: u64,
    busy: Duration,
    /// The proxy's CPU time over the concurrent phases, in ns (all, kernel).
    cpu: Option<(u64, u64)>,
}

fn pct(sorted: &[Duration], p: f64) -> f64 {
    sorted[((sorted.len() as f64 - 1.0) * p) as usize].as_secs_f64() * 1e6
}

/// The length of the message at the start of `buf` (head + Content-Length body), once its head is complete.
type MessageLength = fn(&[u8]) -> Option<usize>;

fn content_length(hs: &[httparse::Header<'_>]) -> usize {
    hs.iter()
        .find(|h| h.name.eq_ignore_ascii_case("content-length"))
        .and_then(|h| std::str::from_utf8(h.value).ok()?.trim().parse().ok())
        .unwrap_or(0)
}

fn request_length(buf: &[u8]) -> Option<usize> {
    let mut hs = [httparse::EMPTY_HEADER; 64];
    let mut req = httparse::Request::new(&mut hs);
    match req.parse(buf) {
        Ok(httparse::Status::Complete(n)) => Some(n + content_length(req.headers)),
        _ => None,
    }
}

fn response_length(buf: &[u8]) -> Option<usize> {
    let mut hs = [httparse::EMPTY_HEADER; 64];
    let mut resp = httparse::Response::new(&mut hs);
    match resp.parse(buf) {
        Ok(httparse::Status::Complete(n)) => Some(n + content_length(resp.headers)),
        _ => None,
    }
}

/// Reads one whole message from `from` into `buf` and writes it, as received, to `to`. `false` when either ends.
async fn pass_one(
    from: &mut tokio::net::TcpStream,
    buf: &mut bytes::BytesMut,
    length: MessageLength,
    to: &mut tokio::net::TcpStream,
) -> bool {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let total = loop {
        if let Some(n) = length(buf) {
            break n;
        }
        if from.read_buf(buf).await.unwrap_or(0) == 0 {
            return false;
        }
    };
    while buf.len() < total {
        if from.read_buf(buf).await.unwrap_or(0) == 0 {
            return false;
        }
    }
    let message = buf.split_to(total);
    to.write_all(&message).await.is_ok()
}

/// `tokio_floor`: the floor of any proxy on Tokio, to compare the others with. It parses the head with httparse,
/// forwards head and body as received, parses the answer's head and forwards it as received: Content-Length bodies
/// only, one agent, one agent connection per caller connection, no protocol logic, no header rewriting.
async fn floor_conn(mut down: tokio::net::TcpStream, agent: std::net::SocketAddr) {
    let _ = down.set_nodelay(true);
    let mut up = tokio::net::TcpStream::connect(agent).await.expect("agent");
    let _ = up.set_nodelay(true);
    let mut buf = bytes::BytesMut::with_capacity(16 * 1024);
    let mut ubuf = bytes::BytesMut::with_capacity(16 * 1024);
    while pass_one(&mut down, &mut buf, request_length, &mut up).await
        && pass_one(&mut up, &mut ubuf, response_length, &mut down).await
    {}
}

fn main() {
    let iterations = arg("--iterations", 2000) as usize;
    let concurrency = arg("--concurrency", 32) as usize;
    let seconds = arg("--seconds", 5);
    let client_key = SigningKey::generate().expect("key");
    let gateway_key = SigningKey::generate().expect("key");
    let resolver = Arc::new(StaticResolver::new());
    for (did, key) in [(CLIENT, &client_key), (GATEWAY, &gateway_key)] {
        let d = Did::parse(did).expect("did");
        resolver.insert(&d, DidDocument::generate(&d, &[("key-1".to_owned(), key.verifying_key().to_jwk())]));
    }

    // The agent.
    let agent_rt = runtime("agent", 1);
    let agent_addr = agent_rt.block_on(async {
        let cap = |name: &str, auth| CapabilityDeclaration {
            name: name.into(),
            description: "echo".into(),
            auth_requirement: auth,
            sub_capabilities: vec![],
            region_restriction: vec![],
            input_schema: json!({"type": "object"}),
            output_schema: None,
            estimated_cost: None,
            estimated_latency_ms: None,
            fallback_for: vec![],
        };
        let echo = |_c: ExecutionContext, p: Value| async move { Ok(json!({"echo": p})) };
        let agent = AgentBuilder::new(AGENT)
            .resolver(resolver.clone())
            .trusted_gateways(vec![GATEWAY.to_owned()])
            .capability(cap("echo_message", AuthRequirement::None), echo)
            .capability(cap("sign_message", AuthRequirement::DidAuth), echo)
            .build()
            .expect("agent");
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let limits = agent.engine().limits().clone();
        tokio::spawn(async move {
            let _ = a2a_server::serve::serve(listener, agent.router(), &limits, std::future::pending(), Duration::ZERO)
                .await;
        });
        addr
    });

    // nginx.
    let dir = std::env::temp_dir().join(format!("a2a-bench-nginx-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let nginx_port = std::net::TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port();
    let conf = format!(
        "daemon off;\nworker_processes 1;\npid {d}/nginx.pid;\nerror_log {d}/error.log warn;\nevents {{ worker_connections 4096; }}\n\
         http {{\n  access_log off;\n  client_body_temp_path {d}/body;\n  proxy_temp_path {d}/proxy;\n  fastcgi_temp_path {d}/fcgi;\n  uwsgi_temp_path {d}/uwsgi;\n  scgi_temp_path {d}/scgi;\n\
           upstream agent {{ server {agent_addr}; keepalive 64; }}\n  server {{\n    listen 127.0.0.1:{nginx_port};\n    location / {{\n      proxy_pass http://agent;\n      proxy_http_version 1.1;\n      proxy_set_header Connection \"\";\n    }}\n  }}\n}}\n",
        d = dir.display()
    );
    std::fs::write(dir.join("nginx.conf"), conf).expect("conf");
    let mut nginx = std::process::Command::new("nginx")
        .args(["-c", &dir.join("nginx.conf").display().to_string(), "-p", &dir.display().to_string()])
        .spawn()
        .expect("nginx (apt-get install nginx)");

    // Gateways: transparent (signature checks off) and verifying.
    // The floors' runtime (and the gateways' background work): a current-thread runtime driven by one thread named
    // `gateway`, as the gateway's own workers are.
    let gw_rt: tokio::runtime::Handle = {
        let rt: &'static tokio::runtime::Runtime =
            Box::leak(Box::new(tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime")));
        std::thread::Builder::new()
            .name("gateway".into())
            .spawn(move || rt.block_on(std::future::pending::<()>()))
            .expect("thread");
        rt.handle().clone()
    };
    let start_gateway = |verify: bool| {
        let text = format!(
            "[gateway]\ndid = \"{GATEWAY}\"\n{}\n[edge]\nverify_signatures = {verify}\n[[agents]]\nurl = \"http://{agent_addr}/a2a\"\n",
            if verify { "key_file = \"unused.pem\"" } else { "" }
        );
        let cfg = a2a_gateway::config::Config::parse(&text, std::path::Path::new("bench.toml")).expect("config");
        gw_rt.block_on(async {
            let g = a2a_gateway::Gateway::from_config(
                &cfg,
                std::path::Path::new("."),
                a2a_gateway::Options::default().with_resolver(resolver.clone()).with_key(gateway_key.clone()),
            )
            .expect("gateway");
            // Served as the binary serves it, on worker threads of its own (`a2a-gw-0`): one, as nginx has one
            // worker process here.
            let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
            let addr = listener.local_addr().expect("addr");
            tokio::spawn(async move {
                let _ = g.serve_workers(listener, 1, std::future::pending()).await;
            });
            addr
        })
    };
    let gw_plain = start_gateway(false);
    // The two floors, on the gateway's runtime (so that their CPU is counted as the gateway's).
    let hyper_addr = gw_rt.block_on(async {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let up = a2a_gateway::upstream::Upstream::new(Duration::from_secs(1), Duration::from_secs(10), 64);
        tokio::spawn(async move {
            while let Ok((s, _)) = listener.accept().await {
                let _ = s.set_nodelay(true);
                let up = up.clone();
                let svc = hyper::service::service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
                    let up = up.clone();
                    async move {
                        use http_body_util::BodyExt;
                        let (parts, body) = req.into_parts();
                        let body = body.collect().await.map(|c| c.to_bytes()).unwrap_or_default();
                        let mut hm = parts.headers.clone();
                        hm.remove("host");
                        let uri: http::Uri =
                            format!("http://{agent_addr}{}", parts.uri.path_and_query().map_or("/", |p| p.as_str()))
                                .parse()
                                .expect("uri");
                        let mut r = http::Request::new(http_body_util::Full::new(body));
                        *r.method_mut() = parts.method;
                        *r.uri_mut() = uri;
                        *r.headers_mut() = hm;
                        up.send(r).await.map_err(|e| e.to_string())
                    }
                });
                tokio::spawn(async move {
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(hyper_util::rt::TokioIo::new(s), svc)
                        .await;
                });
            }
        });
        addr
    });
    let floor_addr = gw_rt.block_on(async {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        tokio::spawn(async move {
            while let Ok((s, _)) = listener.accept().await {
                tokio::spawn(floor_conn(s, agent_addr));
            }
        });
        addr
    });
    let gw_signed = start_gateway(true);

    let client_rt = runtime("client", 1);
    let http = reqwest::Client::builder().pool_max_idle_per_host(256).build().expect("client");
    let paths: Vec<(&str, Client, &str)> = vec![
        ("direct", Client { http: http.clone(), origin: format!("http://{agent_addr}"), key: None }, "echo_message"),
        (
            "nginx",
            Client { http: http.clone(), origin: format!("http://127.0.0.1:{nginx_port}"), key: None },
            "echo_message",
        ),
        ("gateway", Client { http: http.clone(), origin: format!("http://{gw_plain}"), key: None }, "echo_message"),
        (
            "hyper_floor",
            Client { http: http.clone(), origin: format!("http://{hyper_addr}"), key: None },
            "echo_message",
        ),
        (
            "tokio_floor",
            Client { http: http.clone(), origin: format!("http://{floor_addr}"), key: None },
            "echo_message",
        ),
        (
            "direct_signed",
            Client {
                http: http.clone(),
                origin: format!("http://{agent_addr}"),
                key: Some((client_key.clone(), AGENT)),
            },
            "sign_message",
        ),
        (
            "gateway_signed",
            Client {
                http: http.clone(),
                origin: format!("http://{gw_signed}"),
                key: Some((client_key.clone(), GATEWAY)),
            },
            "sign_message",
        ),
    ];
    // Wait for nginx.
    let until = Instant::now() + Duration::from_secs(10);
    while std::net::TcpStream::connect(("127.0.0.1", nginx_port)).is_err() {
        assert!(Instant::now() < until, "nginx did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
    println!(
        "iterations {iterations}, concurrency {concurrency}, {seconds} s, in {} rounds; one iteration = EXECUTE + \
         CONFIRM + RESULT",
        arg("--rounds", 1).max(1)
    );
    println!(
        "{:<16} {:>10} {:>10} {:>10} {:>10} {:>14} {:>22}",
        "path", "p50 us", "p90 us", "p95 us", "p99 us", "iterations/s", "proxy CPU us/req (of which kernel)"
    );
    // The CPU the proxy of a path spends during its throughput phase, per HTTP request (3 per iteration).
    let me = std::process::id();
    let nginx_pid = nginx.id();
    let proxy_cpu = move |name: &str| -> Option<(u64, u64)> {
        match name {
            "nginx" => Some(nginx_cpu_ns(nginx_pid)),
            "gateway" | "gateway_signed" => Some(cpu_ns(me, Some("a2a-gw-"))),
            "tokio_floor" | "hyper_floor" => Some(cpu_ns(me, Some("gateway"))),
            _ => None,
        }
    };
    // `--only gateway` runs one path (for a profile of that path alone); `--only direct,nginx,gateway` several.
    let only: Option<String> = {
        let args: Vec<String> = std::env::args().collect();
        args.iter().position(|a| a == "--only").and_then(|i| args.get(i + 1)).cloned()
    };
    let chosen: Vec<_> =
        paths.iter().filter(|p| only.as_deref().is_none_or(|o| o.split(',').any(|x| x == p.0))).collect();
    // `--rounds R` splits each path's iterations and seconds into R slices, the paths taking turns slice by slice
    // (in alternating order), so that a VM whose speed drifts during the run weighs on every path alike.
    let rounds = arg("--rounds", 1).max(1) as usize;
    // Each path negotiates and warms up just before its first slice: a keep-alive connection left idle while the
    // other paths run could outlive the server's idle timeout (10 s) and be closed as the client reuses it.
    let mut negs: Vec<Option<String>> = vec![None; chosen.len()];
    let mut acc: Vec<Measured> = chosen.iter().map(|_| Measured::default()).collect();
    for round in 0..rounds {
        let order: Vec<usize> =
            if round % 2 == 0 { (0..chosen.len()).collect() } else { (0..chosen.len()).rev().collect() };
        let round_iterations = (iterations / rounds).max(1);
        let round_time = Duration::from_secs_f64(seconds as f64 / rounds as f64);
        for i in order {
            let (name, client, cap) = chosen[i];
            let neg = negs[i].get_or_insert_with(|| {
                client_rt.block_on(async {
                    let neg = client.negotiate(cap).await;
                    for _ in 0..200 {
                        client.iteration(&neg).await;
                    }
                    neg
                })
            });
            let neg = &*neg;
            let m = &mut acc[i];
            client_rt.block_on(async {
                for _ in 0..round_iterations {
                    let t = Instant::now();
                    client.iteration(neg).await;
                    m.lat.push(t.elapsed());
                }
                let stop = Instant::now() + round_time;
                let mut tasks = Vec::new();
                for _ in 0..concurrency {
                    let c = (*client).clone();
                    let neg = neg.clone();
                    tasks.push(tokio::spawn(async move {
                        let mut n = 0u64;
                        while Instant::now() < stop {
                            c.iteration(&neg).await;
                            n += 1;
                        }
                        n
                    }));
                }
                let t = Instant::now();
                let cpu_before = proxy_cpu(name);
                for task in tasks {
                    m.done += task.await.expect("task");
                }
                m.busy += t.elapsed();
                if let (Some(after), Some(before)) = (proxy_cpu(name), cpu_before) {
                    let cpu = m.cpu.get_or_insert((0, 0));
                    cpu.0 += after.0.saturating_sub(before.0);
                    cpu.1 += after.1.saturating_sub(before.1);
                }
            });
        }
    }
    let mut rows = Vec::new();
    for ((name, _, _), m) in chosen.iter().zip(acc.iter_mut()) {
        m.lat.sort();
        let lat = &m.lat;
        let (p50, p90, p95, p99) = (pct(lat, 0.5), pct(lat, 0.9), pct(lat, 0.95), pct(lat, 0.99));
        let rate = m.done as f64 / m.busy.as_secs_f64();
        let per = |ns: u64| ns as f64 / 1e3 / (3 * m.done) as f64;
        let cpu = m.cpu.map(|(all, sys)| (per(all), per(sys)));
        let cpu_text = cpu.map_or_else(|| "-".to_owned(), |(c, k)| format!("{c:.1} ({k:.1} sys)"));
        println!("{name:<16} {p50:>10.0} {p90:>10.0} {p95:>10.0} {p99:>10.0} {rate:>14.0} {cpu_text:>22}");
        rows.push((*name, p50, rate, cpu.map(|c| c.0)));
    }
    let get = |n: &str| rows.iter().find(|r| r.0 == n).map_or((0.0, 0.0), |r| (r.1, r.2));
    let cpu_of = |n: &str| rows.iter().find(|r| r.0 == n).and_then(|r| r.3).unwrap_or(0.0);
    let (d, dr) = get("direct");
    let (n, nr) = get("nginx");
    let (g, gr) = get("gateway");
    let (ds, _) = get("direct_signed");
    let (gs, gsr) = get("gateway_signed");
    println!(
        "added p50 per iteration: nginx {:.0} us, gateway {:.0} us (gateway/nginx {:.2}); throughput gateway/nginx {:.2}",
        n - d,
        g - d,
        (g - d) / (n - d),
        gr / nr
    );
    println!(
        "proxy CPU per request: nginx {:.1} us, gateway {:.1} us (gateway/nginx {:.2})",
        cpu_of("nginx"),
        cpu_of("gateway"),
        cpu_of("gateway") / cpu_of("nginx")
    );
    println!(
        "signature checks at the gateway: +{:.0} us p50 per iteration over the unsigned gateway ({:.0} us per request), \
         throughput {:.0} vs {:.0} it/s; direct signed {:.0} us; direct unsigned rate {:.0}",
        gs - g,
        (gs - g) / 3.0,
        gsr,
        gr,
        ds,
        dr
    );
    // `nginx -s stop` ends the workers too (a SIGKILL of the master would leave them holding the bench's stdout).
    let stopped = std::process::Command::new("nginx")
        .args(["-c", &dir.join("nginx.conf").display().to_string(), "-p", &dir.display().to_string(), "-s", "stop"])
        .status()
        .is_ok_and(|s| s.success());
    if !stopped {
        let _ = nginx.kill();
    }
    let _ = nginx.wait();
    let _ = std::fs::remove_dir_all(&dir);
}
