//! Real agents (`a2a-server`) on loopback, and clients that talk to them.

use std::sync::Arc;
use std::sync::atomic::AtomicUsize;
use std::time::Duration;

use a2a_client::{Client, ClientConfig, Identity};
use a2a_core::capability::{AuthRequirement, CapabilityDeclaration};
use a2a_server::handler::{ExecutionContext, HandlerError};
use a2a_server::{Agent, AgentBuilder};
use serde_json::{Value, json};
use tokio::net::TcpListener;

/// The client's DID in the tests.
pub const CALLER: &str = "did:web:caller.example.com";

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

/// The seed's report schema: title and timestamp required.
pub fn report_schema() -> Value {
    json!({"type": "object",
           "properties": {"title": {"type": "string"}, "timestamp": {"type": "string", "format": "date-time"}},
           "required": ["title", "timestamp"]})
}

/// An agent with `submit_report` (echoes), `run_slow_task` (sleeps `ms`, counting runs), `fail_on_purpose`.
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
}

/// A running agent; stops when dropped.
pub struct TestAgent {
    pub url: String,
    pub agent: Agent,
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
    pub async fn start(builder: AgentBuilder) -> TestAgent {
        let agent = builder.build().expect("agent builds");
        let app = agent.router();
        Self::serve(agent, app).await
    }

    /// Serves `app` (the agent's router, possibly wrapped) on a free loopback port.
    pub async fn serve(agent: Agent, app: axum::Router) -> TestAgent {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        Self::serve_on(listener, agent, app).await
    }

    pub async fn serve_on(listener: TcpListener, agent: Agent, app: axum::Router) -> TestAgent {
        let url = format!("http://{}/a2a", listener.local_addr().expect("addr"));
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let limits = agent.engine().limits().clone();
        tokio::spawn(async move {
            let shutdown = async {
                let _ = rx.await;
            };
            let _ = a2a_server::serve::serve(listener, app, &limits, shutdown, Duration::from_secs(1)).await;
        });
        TestAgent { url, agent, shutdown: Some(tx) }
    }
}

/// A client with the test caller's unsigned identity and generous timeouts.
pub fn client() -> Client {
    client_with(ClientConfig::default())
}

pub fn client_with(config: ClientConfig) -> Client {
    Client::builder(Identity::unsigned(CALLER).expect("did")).config(config).build().expect("client")
}

/// A URL where nothing listens (a port that was free a moment ago).
pub fn dead_url() -> String {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = l.local_addr().expect("addr").port();
    drop(l);
    format!("http://127.0.0.1:{port}/a2a")
}

pub fn runs() -> Arc<AtomicUsize> {
    Arc::new(AtomicUsize::new(0))
}

/// A fresh directory under the system temp dir, removed on drop.
pub struct TempDir(pub std::path::PathBuf);

impl TempDir {
    pub fn new(prefix: &str) -> TempDir {
        static N: AtomicUsize = AtomicUsize::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
        let dir = std::env::temp_dir().join(format!("a2a-client-{prefix}-{}-{n}-{nanos}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("create temp dir");
        TempDir(dir)
    }

    pub fn write(&self, name: &str, contents: &str) -> std::path::PathBuf {
        let p = self.0.join(name);
        std::fs::write(&p, contents).expect("write");
        p
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
