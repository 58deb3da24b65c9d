//! Starting agents on loopback and talking to them.

use std::sync::Arc;
use std::time::Duration;

use a2a_core::capability::{AuthRequirement, CapabilityDeclaration};
use a2a_server::handler::{ExecutionContext, HandlerError};
use a2a_server::{Agent, AgentBuilder, Limits};
use reqwest::StatusCode;
use reqwest::header::HeaderMap;
use serde_json::{Value, json};
use tokio::net::TcpListener;

/// The sender the tests use.
pub const SENDER: &str = "did:web:caller.example.com";

/// A running agent.
pub struct TestAgent {
    pub base: String,
    pub agent: Agent,
    pub http: reqwest::Client,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
}

impl Drop for TestAgent {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
    }
}

/// An answer: status, headers, JSON body (`Value::Null` when there is none).
pub struct Answer {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Value,
}

impl Answer {
    /// The error code of an error answer.
    pub fn code(&self) -> &str {
        self.body["error"]["code"].as_str().unwrap_or("")
    }

    /// A header as a string.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

pub fn decl(name: &str, input_schema: Value) -> CapabilityDeclaration {
    CapabilityDeclaration {
        name: name.into(),
        description: format!("test capability {name}"),
        auth_requirement: AuthRequirement::None,
        sub_capabilities: vec![],
        region_restriction: vec![],
        input_schema,
        output_schema: None,
        estimated_cost: None,
        estimated_latency_ms: None,
        fallback_for: vec![],
    }
}

/// The report schema of the seed: title and timestamp required.
pub fn report_schema() -> Value {
    json!({"type": "object",
           "properties": {"title": {"type": "string"}, "timestamp": {"type": "string", "format": "date-time"}},
           "required": ["title", "timestamp"]})
}

/// A builder with the standard test capabilities: `submit_report` (echoes the payload), `run_slow_task` (sleeps
/// `ms`, counting its runs), `fail_on_purpose`, `crash_on_purpose`.
pub fn standard(runs: Arc<std::sync::atomic::AtomicUsize>) -> AgentBuilder {
    let slow =
        decl("run_slow_task", json!({"type": "object", "properties": {"ms": {"type": "number"}}, "required": ["ms"]}));
    AgentBuilder::new("did:web:agent.example.com")
        .capability(decl("submit_report", report_schema()), |_c: ExecutionContext, p: Value| async move {
            Ok(json!({"filed": p}))
        })
        .capability(slow, move |ctx: ExecutionContext, p: Value| {
            let runs = runs.clone();
            async move {
                runs.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let ms = p["ms"].as_f64().unwrap_or(0.0) as u64;
                tokio::select! {
                    () = tokio::time::sleep(Duration::from_millis(ms)) => Ok(json!({"slept_ms": ms})),
                    () = ctx.cancel.cancelled() => Err(HandlerError::new("stopped")),
                }
            }
        })
        .capability(decl("fail_on_purpose", json!({"type": "object"})), |_c: ExecutionContext, _p: Value| async move {
            Err(HandlerError::new("it failed on purpose").with_details(json!({"why": "test"})))
        })
        .capability(decl("crash_on_purpose", json!({"type": "object"})), |_c: ExecutionContext, _p: Value| async move {
            if true {
                panic!("crash on purpose");
            }
            Ok(json!({}))
        })
}

/// Fast limits for tests.
pub fn test_limits() -> Limits {
    let mut l = Limits::default();
    l.confirm_window_ms = 2_000;
    l
}

impl TestAgent {
    pub async fn start(builder: AgentBuilder) -> TestAgent {
        Self::start_built(builder.build().expect("agent builds")).await
    }

    /// Serves an already built agent (e.g. one built from a configuration file).
    pub async fn start_built(agent: Agent) -> TestAgent {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let base = format!("http://{}", listener.local_addr().expect("addr"));
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
        TestAgent { base, agent, http, shutdown: Some(tx) }
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    async fn answer(resp: reqwest::Response) -> Answer {
        let status = resp.status();
        let headers = resp.headers().clone();
        let bytes = resp.bytes().await.expect("body");
        let body = if bytes.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(&bytes)
                .unwrap_or_else(|e| panic!("not JSON ({e}): {:?}", String::from_utf8_lossy(&bytes)))
        };
        Answer { status, headers, body }
    }

    /// A request with the protocol headers.
    pub fn req(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        self.http.request(method, self.url(path)).header("A2A-Version", "0.3").header("A2A-Sender-ID", SENDER)
    }

    pub async fn send(&self, rb: reqwest::RequestBuilder) -> Answer {
        Self::answer(rb.send().await.expect("request")).await
    }

    pub async fn post(&self, path: &str, body: Value) -> Answer {
        self.send(self.req(reqwest::Method::POST, path).json(&body)).await
    }

    pub async fn get(&self, path: &str) -> Answer {
        self.send(self.req(reqwest::Method::GET, path)).await
    }

    pub async fn negotiate(&self, capability: &str, schema: Value) -> Answer {
        self.post("/a2a/negotiate", json!({"target_capability": capability, "proposed_schema": schema})).await
    }

    /// NEGOTIATE with the capability's own schema; returns the negotiation id.
    pub async fn negotiated(&self, capability: &str, schema: Value) -> String {
        let a = self.negotiate(capability, schema).await;
        assert_eq!(a.status, StatusCode::OK, "{}", a.body);
        a.body["negotiation_id"].as_str().expect("negotiation_id").to_owned()
    }

    pub async fn execute(&self, negotiation: &str, payload: Value) -> Answer {
        self.send(
            self.req(reqwest::Method::POST, "/a2a/execute").header("A2A-Negotiation-ID", negotiation).json(&payload),
        )
        .await
    }

    /// EXECUTE; returns the execution id.
    pub async fn executed(&self, negotiation: &str, payload: Value) -> String {
        let a = self.execute(negotiation, payload).await;
        assert_eq!(a.status, StatusCode::CREATED, "{}", a.body);
        a.body["execution_id"].as_str().expect("execution_id").to_owned()
    }

    pub async fn confirm(&self, execution: &str) -> Answer {
        self.post("/a2a/confirm", json!({"execution_id": execution})).await
    }

    pub async fn result(&self, execution: &str, wait_ms: u64) -> Answer {
        let seg = a2a_core::execution_id::ExecutionId::parse(execution).expect("id").to_path_segment();
        self.get(&format!("/a2a/result/{seg}?wait_ms={wait_ms}")).await
    }

    /// The whole handshake for `capability` with `payload`; returns the final RESULT body.
    pub async fn run(&self, capability: &str, schema: Value, payload: Value) -> Value {
        let neg = self.negotiated(capability, schema).await;
        let exe = self.executed(&neg, payload).await;
        let c = self.confirm(&exe).await;
        assert_eq!(c.status, StatusCode::ACCEPTED, "{}", c.body);
        let r = self.result(&exe, 10_000).await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.body);
        r.body
    }
}

/// A fresh directory under the system temp dir, removed on drop.
pub struct TempDir(pub std::path::PathBuf);

impl TempDir {
    pub fn new(prefix: &str) -> TempDir {
        static COUNTER: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
        let dir = std::env::temp_dir().join(format!("a2a-{prefix}-{}-{n}-{nanos}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("create temp dir");
        TempDir(dir)
    }

    /// Writes a file in the directory and returns its path.
    pub fn write(&self, name: &str, contents: &str) -> std::path::PathBuf {
        let path = self.0.join(name);
        std::fs::write(&path, contents).expect("write file");
        path
    }

    pub fn path(&self, name: &str) -> std::path::PathBuf {
        self.0.join(name)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A test key of `spec/vectors/keys/`.
pub fn vector_key(name: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../spec/vectors/keys").join(name)
}

/// A port that was free a moment ago (for processes that must be told their port up front).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port()
}
