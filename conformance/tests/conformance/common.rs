//! Agents on loopback and suite runs against them.

use std::sync::Arc;
use std::time::Duration;

use a2a_conformance::identity::Identity;
use a2a_conformance::{Options, Report, Status};
use a2a_core::did::{Did, DidDocument};
use a2a_server::store::MemoryStore;
use a2a_server::store::memory::MemoryLimits;
use a2a_server::{Agent, AgentBuilder};
use axum::Router;
use tokio::net::TcpListener;

/// A running agent; stops when dropped.
pub struct Running {
    pub base: String,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
    }
}

/// The demo agent's parts, built like `a2a_agent::app::demo_app` but with a store the test can reach.
pub struct DemoParts {
    pub agent: Agent,
    pub app: Router,
    pub store: Arc<MemoryStore>,
    /// The key of the agent's DID document (`key-1`), when the test built it.
    pub key: Option<a2a_core::keys::SigningKey>,
}

/// The demo agent (`a2a-server --demo`) for a listener on `port`.
pub fn demo_parts(port: u16) -> DemoParts {
    demo_parts_with(port, |b, _| a2a_agent::demo::capabilities(b))
}

/// An agent like the demo (DID, key, document, resolver, store) with the capabilities `caps` adds.
pub fn demo_parts_with(
    port: u16,
    caps: impl FnOnce(AgentBuilder, &a2a_core::keys::SigningKey) -> AgentBuilder,
) -> DemoParts {
    demo_parts_resolving(port, caps, None)
}

/// An agent like [`demo_parts_with`]'s that resolves callers' DIDs with `resolver` (the demo's when `None`).
pub fn demo_parts_resolving(
    port: u16,
    caps: impl FnOnce(AgentBuilder, &a2a_core::keys::SigningKey) -> AgentBuilder,
    resolver: Option<Arc<dyn a2a_core::resolver::DidResolver>>,
) -> DemoParts {
    let did = Did::for_host_port("localhost", Some(port), &[]).expect("did");
    let key = a2a_core::keys::SigningKey::generate().expect("key");
    let doc = DidDocument::generate(&did, &[("key-1".to_owned(), key.verifying_key().to_jwk())]);
    let store = Arc::new(MemoryStore::new(MemoryLimits::default()));
    let resolver = resolver.unwrap_or_else(|| {
        Arc::new(
            a2a_core::resolver::HttpResolver::new(a2a_core::resolver::ResolverOptions::loopback()).expect("resolver"),
        )
    });
    let agent = caps(AgentBuilder::new(did.to_string()).name("A2A demo agent"), &key)
        .store(store.clone())
        .resolver(resolver)
        .sessions(a2a_agent::app::demo_sessions(&key))
        .build()
        .expect("demo agent builds");
    let app = a2a_agent::app::app_router(
        &agent,
        Some(("/.well-known/did.json".into(), serde_json::to_value(&doc).expect("doc"))),
    );
    DemoParts { agent, app, store, key: Some(key) }
}

/// Binds a loopback listener.
pub async fn listener() -> (TcpListener, u16) {
    let l = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = l.local_addr().expect("addr").port();
    (l, port)
}

/// Serves `app` on `listener` with the agent's limits.
pub fn serve(listener: TcpListener, port: u16, parts: DemoParts, app: Router) -> Running {
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let limits = parts.agent.engine().limits().clone();
    tokio::spawn(async move {
        let shutdown = async {
            let _ = rx.await;
        };
        let _ = a2a_server::serve::serve(listener, app, &limits, shutdown, Duration::from_secs(1)).await;
    });
    Running { base: format!("http://127.0.0.1:{port}"), shutdown: Some(tx) }
}

/// Serves `app` on `listener` (a front of another server: a proxy) as [`serve`] does with `limits`, or, without
/// limits, with axum's own server (hyper's reading of a request's framing, without the agent's head guard).
pub fn serve_front(listener: TcpListener, port: u16, limits: Option<a2a_server::Limits>, app: Router) -> Running {
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(async move {
        let shutdown = async {
            let _ = rx.await;
        };
        match limits {
            Some(limits) => {
                let _ = a2a_server::serve::serve(listener, app, &limits, shutdown, Duration::from_secs(1)).await;
            }
            None => {
                let _ = axum::serve(listener, app).with_graceful_shutdown(shutdown).await;
            }
        }
    });
    Running { base: format!("http://127.0.0.1:{port}"), shutdown: Some(tx) }
}

/// The demo agent, running.
pub async fn demo() -> Running {
    let (l, port) = listener().await;
    let parts = demo_parts(port);
    let app = parts.app.clone();
    serve(l, port, parts, app)
}

/// The agent's router with the A2A 1.x bridge (§20) merged in, as `a2a_server::a2a1x` documents it; its card is
/// signed under `key-1` with `key`.
pub fn bridged(parts: &DemoParts, key: a2a_core::keys::SigningKey) -> Router {
    let options = a2a_server::a2a1x::BridgeOptions {
        signing_key: Some(("key-1".to_owned(), key)),
        ..a2a_server::a2a1x::BridgeOptions::default()
    };
    let bridge = a2a_server::a2a1x::Bridge::new(&parts.agent, options).expect("bridge");
    parts.app.clone().merge(bridge.router())
}

/// The demo agent serving the bridge, its card signed with the agent's own key.
pub async fn bridged_demo() -> Running {
    let (l, port) = listener().await;
    let parts = demo_parts(port);
    let app = bridged(&parts, parts.key.clone().expect("the agent's key"));
    serve(l, port, parts, app)
}

/// A caller identity whose DID document the test serves (for broken agents that need the caller's key).
pub struct Caller {
    pub identity: Identity,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
}

impl Drop for Caller {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
    }
}

/// A caller `did:web:localhost%3A<port>` with a fresh key and its document served on that port.
pub async fn caller() -> Caller {
    let (l, port) = listener().await;
    let did = format!("did:web:localhost%3A{port}");
    let identity = Identity::generate(&did, "key-1").expect("identity");
    let parsed = Did::parse(&did).expect("did");
    let doc = DidDocument::generate(&parsed, &[("key-1".to_owned(), identity.key.verifying_key().to_jwk())]);
    let doc = serde_json::to_value(&doc).expect("doc");
    let app = Router::new().route(
        "/.well-known/did.json",
        axum::routing::get(move || {
            let doc = doc.clone();
            async move { axum::Json(doc) }
        }),
    );
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(async move {
        let _ = axum::serve(l, app)
            .with_graceful_shutdown(async {
                let _ = rx.await;
            })
            .await;
    });
    Caller { identity, shutdown: Some(tx) }
}

/// Options for a run against `base`: every level, the demo's API key, and `--serve-did` unless an identity is given.
pub fn options(base: &str, identity: Option<&Identity>) -> Options {
    let mut o = Options::new(base);
    o.api_key = Some(a2a_agent::demo::DEMO_API_KEY.to_owned());
    o.timeout = Duration::from_secs(60);
    match identity {
        Some(id) => o.identity = Some(id.clone()),
        None => o.serve_did = Some("127.0.0.1:0".into()),
    }
    o
}

/// Runs the suite.
pub async fn run(opts: Options) -> Report {
    a2a_conformance::run(opts, None).await.expect("the suite runs")
}

/// The ids of the failed checks, sorted.
pub fn failed(report: &Report) -> Vec<String> {
    let mut v: Vec<String> = report.ids_with(Status::Fail).into_iter().map(str::to_owned).collect();
    v.sort();
    v
}

/// A description of the failures, for assertion messages.
pub fn explain(report: &Report) -> String {
    report
        .checks
        .iter()
        .filter(|c| c.status == Status::Fail || c.status == Status::Blocked)
        .map(|c| format!("{} {}: {}", c.status.as_str(), c.id, c.message.as_deref().unwrap_or("")))
        .collect::<Vec<_>>()
        .join("\n")
}
