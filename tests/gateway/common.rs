//! Real agents (the `a2a-server` library, each on its own Tokio runtime so that it can be killed), real gateways, a
//! signing client, all over loopback HTTP.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use a2a_core::capability::{AuthRequirement, CapabilityDeclaration};
use a2a_core::did::{Did, DidDocument};
use a2a_core::integrity::{self, Coverage, MessageParts};
use a2a_core::keys::SigningKey;
use a2a_core::resolver::StaticResolver;
use a2a_gateway::Gateway;
use a2a_server::AgentBuilder;
use a2a_server::handler::ExecutionContext;
use serde_json::{Value, json};

pub const CLIENT: &str = "did:web:client.example.com";
pub const GATEWAY: &str = "did:web:gateway.example.com";
pub const KEY_ID: &str = "key-1";
/// The admin token of every test gateway's `admin.token` file: a gateway configured with
/// `[admin]\ntoken_file = "admin.token"` serves its admin endpoints to callers that send it (GW-22).
pub const ADMIN_TOKEN: &str = "test-admin-token-0123456789";

/// The workspace's scratch directory and free port (the redis harness uses them too).
pub use a2a_test_support::{TempDir, free_port};

pub fn now() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64)
}

/// Keys and DID documents of the test world: the client, the gateway, and an impostor key.
pub struct World {
    pub client_key: SigningKey,
    pub gateway_key: SigningKey,
    pub impostor_key: SigningKey,
    /// Knows the client and the gateway (given to agents and gateways).
    pub resolver: Arc<StaticResolver>,
}

impl World {
    pub fn new() -> World {
        let client_key = SigningKey::generate().expect("key");
        let gateway_key = SigningKey::generate().expect("key");
        let resolver = Arc::new(StaticResolver::new());
        for (did, key) in [(CLIENT, &client_key), (GATEWAY, &gateway_key)] {
            let did = Did::parse(did).expect("did");
            resolver.insert(&did, DidDocument::generate(&did, &[(KEY_ID.to_owned(), key.verifying_key().to_jwk())]));
        }
        World { client_key, gateway_key, impostor_key: SigningKey::generate().expect("key"), resolver }
    }
}

pub fn decl(name: &str, auth: AuthRequirement) -> CapabilityDeclaration {
    CapabilityDeclaration {
        name: name.into(),
        description: format!("test capability {name}"),
        auth_requirement: auth,
        sub_capabilities: vec![],
        region_restriction: vec![],
        input_schema: json!({"type": "object", "properties": {"title": {"type": "string"}}, "required": ["title"]}),
        output_schema: None,
        estimated_cost: None,
        estimated_latency_ms: None,
        fallback_for: vec![],
    }
}

/// An agent serving on its own runtime; [`TestAgent::kill`] drops that runtime (listener and connections close at
/// once, as when a process dies).
pub struct TestAgent {
    pub url: String,
    pub did: String,
    stop: Option<std::sync::mpsc::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl TestAgent {
    /// Starts an agent whose capabilities each echo `{"agent": <did>, "payload": ...}`.
    pub fn start(name: &str, caps: Vec<CapabilityDeclaration>, world: &World) -> TestAgent {
        Self::start_with(name, caps, world, |b| b)
    }

    /// As [`TestAgent::start`], with the builder adjusted by `configure` (e.g. `sign_responses`).
    pub fn start_with(
        name: &str,
        caps: Vec<CapabilityDeclaration>,
        world: &World,
        configure: impl FnOnce(AgentBuilder) -> AgentBuilder + Send + 'static,
    ) -> TestAgent {
        let did = format!("did:web:{name}.example.com");
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        listener.set_nonblocking(true).expect("nonblocking");
        let url = format!("http://{}/a2a", listener.local_addr().expect("addr"));
        let (stop_tx, stop_rx) = std::sync::mpsc::channel::<()>();
        let (ready_tx, ready_rx) = std::sync::mpsc::channel::<()>();
        let resolver = world.resolver.clone();
        let agent_did = did.clone();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().expect("rt");
            rt.spawn(async move {
                let mut b = AgentBuilder::new(agent_did.clone())
                    .resolver(resolver)
                    .trusted_gateways(vec![GATEWAY.to_owned()])
                    .api_key(a2a_server::ApiKey::new("secret-key"));
                for c in caps {
                    let d = agent_did.clone();
                    b = b.capability(c, move |ctx: ExecutionContext, payload: Value| {
                        let d = d.clone();
                        async move { Ok(json!({"agent": d, "execution": ctx.execution_id, "payload": payload})) }
                    });
                }
                let agent = configure(b).build().expect("agent");
                let app = agent.router().merge(agent.metrics_router());
                let listener = tokio::net::TcpListener::from_std(listener).expect("listener");
                let limits = agent.engine().limits().clone();
                let _ = ready_tx.send(());
                let _ = a2a_server::serve::serve(listener, app, &limits, std::future::pending(), Duration::ZERO).await;
            });
            let _ = stop_rx.recv();
            rt.shutdown_background();
        });
        ready_rx.recv_timeout(Duration::from_secs(30)).expect("agent ready");
        TestAgent { url, did, stop: Some(stop_tx), thread: Some(thread) }
    }

    /// Kills the agent: its runtime is dropped with everything on it.
    pub fn kill(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }

    /// How many protocol requests (any step) the agent has answered, from its own `/metrics`.
    pub async fn requests(&self, http: &reqwest::Client) -> f64 {
        let base = self.url.trim_end_matches("/a2a");
        let text = http.get(format!("{base}/metrics")).send().await.expect("metrics").text().await.expect("text");
        a2a_gateway::metrics::sample_sum(&text, "a2a_requests_total", &[])
    }

    /// Requests of one step.
    pub async fn step_requests(&self, http: &reqwest::Client, step: &str) -> f64 {
        let base = self.url.trim_end_matches("/a2a");
        let text = http.get(format!("{base}/metrics")).send().await.expect("metrics").text().await.expect("text");
        a2a_gateway::metrics::sample_sum(&text, "a2a_requests_total", &[("step", step)])
    }
}

impl Drop for TestAgent {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A gateway serving on the test's runtime.
pub struct TestGateway {
    pub base: String,
    pub gateway: Gateway,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    served: Option<tokio::task::JoinHandle<std::io::Result<()>>>,
    pub dir: TempDir,
}

impl TestGateway {
    /// A gateway in front of `agents`, configured by `extra` TOML (sections after `[gateway]` and the agents).
    pub async fn start(agents: &[&TestAgent], world: &World, extra: &str) -> TestGateway {
        Self::start_keyed(agents, world, extra, true).await
    }

    /// As [`TestGateway::start`]; without a key (`keyed = false`) the gateway cannot re-sign, so `extra` must set
    /// `edge.verify_signatures = false`.
    pub async fn start_keyed(agents: &[&TestAgent], world: &World, extra: &str, keyed: bool) -> TestGateway {
        Self::start_served(agents, world, extra, keyed, None).await
    }

    /// As [`TestGateway::start`], served as the binary serves it: on `workers` threads of their own
    /// ([`Gateway::serve_workers`]).
    pub async fn start_workers(agents: &[&TestAgent], world: &World, extra: &str, workers: usize) -> TestGateway {
        Self::start_served(agents, world, extra, true, Some(workers)).await
    }

    async fn start_served(
        agents: &[&TestAgent],
        world: &World,
        extra: &str,
        keyed: bool,
        workers: Option<usize>,
    ) -> TestGateway {
        let dir = TempDir::new("gw");
        let mut text = format!("[gateway]\ndid = \"{GATEWAY}\"\nkey_id = \"{KEY_ID}\"\n");
        for a in agents {
            text.push_str(&format!("[[agents]]\nurl = \"{}\"\n", a.url));
        }
        text.push_str(extra);
        let path = dir.0.join("gateway.toml");
        std::fs::write(&path, &text).expect("write config");
        std::fs::write(dir.0.join("admin.token"), format!("{ADMIN_TOKEN}\n")).expect("write admin token");
        // The key is given directly (Options) rather than as a file; verify_signatures needs gateway.key_file in the
        // file, so the tests write one too.
        let pem = world.gateway_key.to_pkcs8_pem().expect("pem");
        std::fs::write(dir.0.join("gateway.pem"), pem.as_bytes()).expect("write key");
        let text =
            if keyed { text.replacen("[gateway]\n", "[gateway]\nkey_file = \"gateway.pem\"\n", 1) } else { text };
        std::fs::write(&path, &text).expect("write config");
        let cfg = a2a_gateway::config::Config::parse(&text, &path).expect("config");
        let mut opts = a2a_gateway::Options::default().with_resolver(world.resolver.clone());
        if keyed {
            opts = opts.with_key(world.gateway_key.clone());
        }
        let gateway = Gateway::from_config(&cfg, &dir.0, opts).expect("gateway");
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let base = format!("http://{}", listener.local_addr().expect("addr"));
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let g = gateway.clone();
        let stopped = async {
            let _ = rx.await;
        };
        let served = match workers {
            None => tokio::spawn(async move { g.serve(listener, stopped).await }),
            Some(n) => {
                let listener = listener.into_std().expect("std listener");
                tokio::spawn(async move { g.serve_workers(listener, n, stopped).await })
            }
        };
        TestGateway { base, gateway, stop: Some(tx), served: Some(served), dir }
    }

    /// Stops the gateway ([`TestGateway::stop`]) and waits until it has stopped serving, at most `within`.
    pub async fn stopped(&mut self, within: std::time::Duration) -> std::io::Result<()> {
        self.stop();
        let served = self.served.take().expect("still serving");
        tokio::time::timeout(within, served).await.expect("stopped in time").expect("serving task")
    }

    /// Starts the gateway's graceful shutdown (it stops accepting, lets requests in flight finish).
    pub fn stop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
    }

    pub fn metric(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        a2a_gateway::metrics::sample_sum(&self.gateway.metrics().encode(), name, labels)
    }
}

/// An answer.
pub struct Answer {
    pub status: u16,
    pub headers: reqwest::header::HeaderMap,
    pub body: Value,
}

impl Answer {
    pub fn code(&self) -> &str {
        self.body["error"]["code"].as_str().unwrap_or("")
    }
    pub fn header(&self, n: &str) -> Option<&str> {
        self.headers.get(n).and_then(|v| v.to_str().ok())
    }
}

/// How a request is signed.
#[derive(Clone, Copy)]
pub enum Sign<'a> {
    No,
    /// Signed by `key` as the client, for `aud`, at `iat` offset by `skew` seconds.
    With {
        key: &'a SigningKey,
        aud: &'a str,
        skew: i64,
        lifetime: u32,
    },
}

/// A caller talking to one base URL.
pub struct Caller {
    pub http: reqwest::Client,
    pub base: String,
    pub sender: String,
}

impl Caller {
    pub fn new(base: &str) -> Caller {
        Caller { http: reqwest::Client::new(), base: base.to_owned(), sender: CLIENT.to_owned() }
    }

    /// Sends a request: `A2A-Version: 0.3`, `A2A-Sender-ID`, the extra headers, a JSON body; signs it if asked (the
    /// last token made is returned in `last_token` for replays).
    pub async fn send(
        &self,
        method: &str,
        path: &str,
        extra: &[(&str, &str)],
        body: Option<&Value>,
        sign: Sign<'_>,
    ) -> Answer {
        let (a, _) =
            self.send_raw(method, path, extra, body.map(|b| serde_json::to_vec(b).expect("json")), sign, None).await;
        a
    }

    /// As [`Caller::send`] with raw body bytes and an optional signature to reuse; returns the signature used.
    pub async fn send_raw(
        &self,
        method: &str,
        path: &str,
        extra: &[(&str, &str)],
        body: Option<Vec<u8>>,
        sign: Sign<'_>,
        reuse: Option<String>,
    ) -> (Answer, Option<String>) {
        let bytes = body.unwrap_or_default();
        let mut headers: Vec<(&str, &str)> = vec![("a2a-version", "0.3"), ("a2a-sender-id", self.sender.as_str())];
        headers.extend_from_slice(extra);
        let token = match (reuse, sign) {
            (Some(t), _) => Some(t),
            (None, Sign::No) => None,
            (None, Sign::With { key, aud, skew, lifetime }) => {
                let coverage = if bytes.is_empty() { Coverage::HeaderOnly } else { Coverage::PayloadHash };
                let parts = MessageParts { method, target: path, headers: &headers, body: &bytes, status: None };
                // Sign as the client DID even with another key (forgery) or another sender header (mismatch).
                let iss = headers.iter().find(|(k, _)| *k == "a2a-sender-id").map(|(_, v)| *v).unwrap_or(CLIENT);
                let claims = integrity::build_claims(KEY_ID, iss, aud, coverage, &parts, now() + skew, lifetime)
                    .expect("claims");
                Some(integrity::sign_claims(key, &claims).expect("sign"))
            }
        };
        let m = reqwest::Method::from_bytes(method.as_bytes()).expect("method");
        let mut rb = self.http.request(m, format!("{}{path}", self.base));
        for (k, v) in &headers {
            rb = rb.header(*k, *v);
        }
        if let Some(t) = &token {
            rb = rb.header("a2a-signature", t);
        }
        if !bytes.is_empty() {
            rb = rb.header("content-type", "application/json").body(bytes);
        }
        let resp = rb.timeout(Duration::from_secs(60)).send().await.expect("request");
        let status = resp.status().as_u16();
        let headers = resp.headers().clone();
        let text = resp.bytes().await.expect("body");
        let body = if text.is_empty() { Value::Null } else { serde_json::from_slice(&text).unwrap_or(Value::Null) };
        (Answer { status, headers, body }, token)
    }

    /// NEGOTIATE, EXECUTE, CONFIRM and RESULT (long-poll) of `capability`; the final RESULT.
    pub async fn handshake(&self, capability: &str, sign: Sign<'_>) -> Answer {
        let n = self
            .send(
                "POST",
                "/a2a/negotiate",
                &[],
                Some(&json!({"target_capability": capability, "proposed_schema": {"type": "object", "properties": {"title": {"type": "string"}}, "required": ["title"]}})),
                sign,
            )
            .await;
        assert_eq!(n.status, 200, "negotiate: {}", n.body);
        let neg = n.body["negotiation_id"].as_str().expect("negotiation id").to_owned();
        let e = self
            .send("POST", "/a2a/execute", &[("a2a-negotiation-id", &neg)], Some(&json!({"title": "t"})), sign)
            .await;
        assert_eq!(e.status, 201, "execute: {}", e.body);
        let id = e.body["execution_id"].as_str().expect("execution id").to_owned();
        let c = self.send("POST", "/a2a/confirm", &[], Some(&json!({"execution_id": id})), sign).await;
        assert_eq!(c.status, 202, "confirm: {}", c.body);
        let seg = a2a_core::execution_id::ExecutionId::parse(&id).expect("id").to_path_segment();
        let r = self.send("GET", &format!("/a2a/result/{seg}?wait_ms=20000"), &[], None, sign).await;
        assert_eq!(r.status, 200, "result: {}", r.body);
        r
    }
}
