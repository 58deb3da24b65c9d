//! The in-process test agent (feature `agent`): an `a2a_server::Agent` served on a free loopback port, the standard
//! test capabilities, and the protocol requests the tests make to it.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use a2a_core::capability::{AuthRequirement, CapabilityDeclaration};
use a2a_server::handler::{ExecutionContext, HandlerError};
use a2a_server::{Agent, AgentBuilder};
use reqwest::StatusCode;
use reqwest::header::HeaderMap;
use serde_json::{Value, json};
use tokio::net::TcpListener;

/// The caller's DID in the tests (`A2A-Sender-ID`).
pub const SENDER: &str = "did:web:caller.example.com";

/// A declaration of the capability `name` (no auth, no restrictions) taking `input_schema`.
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

/// The report schema of the protocol's running example: title and timestamp required.
pub fn report_schema() -> Value {
    json!({"type": "object",
           "properties": {"title": {"type": "string"}, "timestamp": {"type": "string", "format": "date-time"}},
           "required": ["title", "timestamp"]})
}

/// An agent `did` with the standard test capabilities, in this order: `submit_report` (echoes the payload as
/// `{"filed": ...}`), `run_slow_task` (sleeps `ms`, counting its runs in `runs`, stops when cancelled),
/// `fail_on_purpose` (a handler error with details).
pub fn standard(did: &str, runs: Arc<AtomicUsize>) -> AgentBuilder {
    let slow =
        decl("run_slow_task", json!({"type": "object", "properties": {"ms": {"type": "number"}}, "required": ["ms"]}));
    AgentBuilder::new(did)
        .capability(decl("submit_report", report_schema()), |_c: ExecutionContext, p: Value| async move {
            Ok(json!({"filed": p}))
        })
        .capability(slow, move |ctx: ExecutionContext, p: Value| {
            let runs = runs.clone();
            async move {
                runs.fetch_add(1, Ordering::SeqCst);
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
}

/// An answer: status, headers, JSON body (`Value::Null` when there is none).
pub struct Answer {
    /// The status.
    pub status: StatusCode,
    /// The headers.
    pub headers: HeaderMap,
    /// The JSON body.
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

/// A running agent on a loopback port of this process; it stops when dropped.
pub struct TestAgent {
    /// `http://127.0.0.1:PORT`.
    pub base: String,
    /// `http://127.0.0.1:PORT/a2a`: where a client is pointed.
    pub endpoint: String,
    /// The agent served.
    pub agent: Agent,
    /// A client with a 30 s timeout.
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

impl TestAgent {
    /// Builds the agent and serves its router and its `/metrics`.
    pub async fn start(builder: AgentBuilder) -> TestAgent {
        Self::start_built(builder.build().expect("agent builds")).await
    }

    /// Serves an already built agent (e.g. one built from a configuration file): its router and its `/metrics`.
    pub async fn start_built(agent: Agent) -> TestAgent {
        let app = agent.router().merge(agent.metrics_router());
        Self::serve(agent, app).await
    }

    /// Serves `app` (the agent's router, possibly wrapped) on a free loopback port.
    pub async fn serve(agent: Agent, app: axum::Router) -> TestAgent {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        Self::serve_on(listener, agent, app).await
    }

    /// Serves `app` on `listener`, with the agent's limits, the way the binary does (`a2a_server::serve`).
    pub async fn serve_on(listener: TcpListener, agent: Agent, app: axum::Router) -> TestAgent {
        let base = format!("http://{}", listener.local_addr().expect("addr"));
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let limits = agent.engine().limits().clone();
        tokio::spawn(async move {
            let shutdown = async {
                let _ = rx.await;
            };
            let _ = a2a_server::serve::serve(listener, app, &limits, shutdown, Duration::from_secs(1)).await;
        });
        let http = reqwest::Client::builder().timeout(Duration::from_secs(30)).build().expect("client");
        TestAgent { endpoint: format!("{base}/a2a"), base, agent, http, shutdown: Some(tx) }
    }

    /// The URL of `path` on it.
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

    /// A request with the protocol headers (`A2A-Version`, `A2A-Sender-ID: SENDER`).
    pub fn req(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        self.http.request(method, self.url(path)).header("A2A-Version", "0.3").header("A2A-Sender-ID", SENDER)
    }

    /// Sends `rb`; the answer.
    pub async fn send(&self, rb: reqwest::RequestBuilder) -> Answer {
        Self::answer(rb.send().await.expect("request")).await
    }

    /// POSTs `body` to `path` with the protocol headers.
    pub async fn post(&self, path: &str, body: Value) -> Answer {
        self.send(self.req(reqwest::Method::POST, path).json(&body)).await
    }

    /// GETs `path` with the protocol headers.
    pub async fn get(&self, path: &str) -> Answer {
        self.send(self.req(reqwest::Method::GET, path)).await
    }

    /// NEGOTIATE `capability` proposing `schema`.
    pub async fn negotiate(&self, capability: &str, schema: Value) -> Answer {
        self.post("/a2a/negotiate", json!({"target_capability": capability, "proposed_schema": schema})).await
    }

    /// NEGOTIATE, which must succeed; the negotiation id.
    pub async fn negotiated(&self, capability: &str, schema: Value) -> String {
        let a = self.negotiate(capability, schema).await;
        assert_eq!(a.status, StatusCode::OK, "{}", a.body);
        a.body["negotiation_id"].as_str().expect("negotiation_id").to_owned()
    }

    /// EXECUTE `payload` under `negotiation`.
    pub async fn execute(&self, negotiation: &str, payload: Value) -> Answer {
        self.send(
            self.req(reqwest::Method::POST, "/a2a/execute").header("A2A-Negotiation-ID", negotiation).json(&payload),
        )
        .await
    }

    /// EXECUTE, which must be accepted; the execution id.
    pub async fn executed(&self, negotiation: &str, payload: Value) -> String {
        let a = self.execute(negotiation, payload).await;
        assert_eq!(a.status, StatusCode::CREATED, "{}", a.body);
        a.body["execution_id"].as_str().expect("execution_id").to_owned()
    }

    /// CONFIRM `execution`.
    pub async fn confirm(&self, execution: &str) -> Answer {
        self.post("/a2a/confirm", json!({"execution_id": execution})).await
    }

    /// RESULT of `execution`, long-polling at most `wait_ms`.
    pub async fn result(&self, execution: &str, wait_ms: u64) -> Answer {
        let seg = a2a_core::execution_id::ExecutionId::parse(execution).expect("id").to_path_segment();
        self.get(&format!("/a2a/result/{seg}?wait_ms={wait_ms}")).await
    }

    /// The whole handshake for `capability` with `payload`; the final RESULT body.
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
