//! `did_auth` with the real HTTP did:web resolver (`a2a_core::resolver::HttpResolver`) over loopback: callers'
//! DID documents are served by a small axum server on 127.0.0.1, and the callers are `did:web:localhost%3APORT...`.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use a2a_core::capability::AuthRequirement;
use a2a_core::did::{Did, DidDocument};
use a2a_core::integrity::{self, Coverage, MessageParts};
use a2a_core::keys::SigningKey;
use a2a_core::resolver::{HttpResolver, ResolverOptions};
use a2a_server::AgentBuilder;
use a2a_server::handler::ExecutionContext;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::common::{Answer, TestAgent, decl};

const AGENT: &str = "did:web:agent.example.com";

fn now() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).expect("clock").as_secs() as i64
}

/// How a document is served.
#[derive(Clone)]
struct Served {
    body: Vec<u8>,
    /// Sent in chunks without `Content-Length`.
    streamed: bool,
}

/// Serves DID documents by path on 127.0.0.1 and counts the connections and the requests.
struct DidServer {
    port: u16,
    docs: Arc<Mutex<HashMap<String, Served>>>,
    hits: Arc<Mutex<Vec<String>>>,
    connections: Arc<AtomicUsize>,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
}

impl Drop for DidServer {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
    }
}

impl DidServer {
    async fn start() -> DidServer {
        let docs: Arc<Mutex<HashMap<String, Served>>> = Arc::default();
        let hits: Arc<Mutex<Vec<String>>> = Arc::default();
        let (d, h) = (docs.clone(), hits.clone());
        let app = axum::Router::new().fallback(move |uri: axum::http::Uri| {
            let (docs, hits) = (d.clone(), h.clone());
            async move {
                hits.lock().expect("lock").push(uri.path().to_owned());
                let served = docs.lock().expect("lock").get(uri.path()).cloned();
                let json = [(axum::http::header::CONTENT_TYPE, "application/did+json")];
                match served {
                    None => (axum::http::StatusCode::NOT_FOUND, json, axum::body::Body::empty()),
                    Some(Served { body, streamed: false }) => {
                        (axum::http::StatusCode::OK, json, axum::body::Body::from(body))
                    }
                    Some(Served { body, streamed: true }) => {
                        let chunks: Vec<Result<Vec<u8>, std::io::Error>> =
                            body.chunks(4096).map(|c| Ok(c.to_vec())).collect();
                        let stream = futures_util::stream::iter(chunks);
                        (axum::http::StatusCode::OK, json, axum::body::Body::from_stream(stream))
                    }
                }
            }
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let connections = Arc::new(AtomicUsize::new(0));
        let counter = connections.clone();
        let listener = axum::serve::ListenerExt::tap_io(listener, move |_| {
            counter.fetch_add(1, Ordering::SeqCst);
        });
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(async move {
            let _ = axum::serve(listener, app)
                .with_graceful_shutdown(async {
                    let _ = rx.await;
                })
                .await;
        });
        DidServer { port, docs, hits, connections, shutdown: Some(tx) }
    }

    /// The DID of a caller whose document this server serves: `did:web:localhost%3APORT` plus `path` segments.
    fn did(&self, path: &[&str]) -> Did {
        Did::for_host_port("localhost", Some(self.port), path).expect("did")
    }

    /// Where did:web puts the document of `did`.
    fn path_of(did: &Did) -> String {
        let segs = did.path_segments();
        if segs.is_empty() { "/.well-known/did.json".into() } else { format!("/{}/did.json", segs.join("/")) }
    }

    fn serve(&self, did: &Did, body: Vec<u8>, streamed: bool) {
        self.docs.lock().expect("lock").insert(Self::path_of(did), Served { body, streamed });
    }

    /// Serves the document of `did` with `key` as `key-1`.
    fn publish(&self, did: &Did, key: &SigningKey) {
        let doc = DidDocument::generate(did, &[("key-1".to_owned(), key.verifying_key().to_jwk())]);
        self.serve(did, serde_json::to_vec(&doc).expect("json"), false);
    }

    fn hits(&self) -> usize {
        self.hits.lock().expect("lock").len()
    }
}

/// An agent with a `did_auth` capability that answers whether and as whom the sender was verified, resolving DIDs
/// with these options.
async fn agent(opts: ResolverOptions) -> TestAgent {
    let mut d = decl("sign_document", json!({"type": "object"}));
    d.auth_requirement = AuthRequirement::DidAuth;
    let resolver = HttpResolver::new(opts).expect("resolver");
    TestAgent::start(
        AgentBuilder::new(AGENT)
            .capability(d, |ctx: ExecutionContext, _p: Value| async move {
                Ok(json!({"verified": ctx.sender_verified, "sender": ctx.sender}))
            })
            .resolver(Arc::new(resolver)),
    )
    .await
}

/// A request from `sender` signed with `key` (as `key-1`, covering the body by hash).
async fn signed(
    t: &TestAgent,
    sender: &Did,
    key: &SigningKey,
    method: Method,
    path: &str,
    body: Option<Value>,
    extra: &[(&str, &str)],
) -> Answer {
    let bytes = body.as_ref().map(|b| serde_json::to_vec(b).expect("json")).unwrap_or_default();
    let mut headers: Vec<(&str, &str)> = vec![("a2a-version", "0.3"), ("a2a-sender-id", sender.as_str())];
    headers.extend_from_slice(extra);
    let parts = MessageParts { method: method.as_str(), target: path, headers: &headers, body: &bytes, status: None };
    let coverage = if body.is_some() { Coverage::PayloadHash } else { Coverage::HeaderOnly };
    let token = integrity::sign(key, "key-1", sender.as_str(), AGENT, coverage, &parts, now(), 60).expect("signature");
    let mut rb = t.http.request(method, t.url(path)).header("A2A-Signature", token);
    for (k, v) in &headers {
        rb = rb.header(*k, *v);
    }
    if body.is_some() {
        rb = rb.header("Content-Type", "application/json").body(bytes);
    }
    t.send(rb).await
}

async fn negotiate(t: &TestAgent, sender: &Did, key: &SigningKey) -> Answer {
    let body = json!({"target_capability": "sign_document", "proposed_schema": {"type": "object"}});
    signed(t, sender, key, Method::POST, "/a2a/negotiate", Some(body), &[]).await
}

#[tokio::test]
async fn signed_handshake_from_a_did_web_caller_is_verified_with_its_document_fetched_once() {
    let server = DidServer::start().await;
    let caller = server.did(&[]);
    let key = SigningKey::generate().expect("key");
    server.publish(&caller, &key);
    let t = agent(ResolverOptions::loopback()).await;
    let n = negotiate(&t, &caller, &key).await;
    assert_eq!(n.status, StatusCode::OK, "{}", n.body);
    let neg = n.body["negotiation_id"].as_str().expect("id").to_owned();
    let e =
        signed(&t, &caller, &key, Method::POST, "/a2a/execute", Some(json!({})), &[("a2a-negotiation-id", &neg)]).await;
    assert_eq!(e.status, StatusCode::CREATED, "{}", e.body);
    let exe = e.body["execution_id"].as_str().expect("id").to_owned();
    let c = signed(&t, &caller, &key, Method::POST, "/a2a/confirm", Some(json!({"execution_id": exe})), &[]).await;
    assert_eq!(c.status, StatusCode::ACCEPTED, "{}", c.body);
    let seg = a2a_core::execution_id::ExecutionId::parse(&exe).expect("id").to_path_segment();
    let r = signed(&t, &caller, &key, Method::GET, &format!("/a2a/result/{seg}?wait_ms=5000"), None, &[]).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(r.body["result"], json!({"verified": true, "sender": caller.as_str()}));
    for _ in 0..3 {
        assert_eq!(negotiate(&t, &caller, &key).await.status, StatusCode::OK);
    }
    assert_eq!(server.hits(), 1, "the document was fetched for every one of 7 signed requests, not once");
}

#[tokio::test]
async fn request_signed_with_a_key_that_is_not_in_the_document_is_refused_signature_invalid() {
    let server = DidServer::start().await;
    let caller = server.did(&["users", "alice"]);
    server.publish(&caller, &SigningKey::generate().expect("key"));
    let t = agent(ResolverOptions::loopback()).await;
    let a = negotiate(&t, &caller, &SigningKey::generate().expect("another key")).await;
    assert_eq!((a.status, a.code()), (StatusCode::UNAUTHORIZED, "signature_invalid"), "{}", a.body);
    assert_eq!(server.hits(), 1);
}

#[tokio::test]
async fn without_the_loopback_option_a_localhost_did_fails_to_resolve_and_its_server_is_never_asked() {
    let server = DidServer::start().await;
    let caller = server.did(&[]);
    let key = SigningKey::generate().expect("key");
    server.publish(&caller, &key);
    let t = agent(ResolverOptions::default()).await;
    let a = negotiate(&t, &caller, &key).await;
    assert_eq!((a.status, a.code()), (StatusCode::UNAUTHORIZED, "did_resolution_failed"), "{}", a.body);
    // Not even a connection (a TLS attempt at the plain-HTTP server would be one).
    assert_eq!(server.connections.load(Ordering::SeqCst), 0, "the resolver connected to a loopback address");
    assert_eq!(server.hits(), 0);
}

#[tokio::test]
async fn document_whose_id_is_another_did_is_refused() {
    let server = DidServer::start().await;
    let mallory = server.did(&["users", "mallory"]);
    let alice = server.did(&["users", "alice"]);
    let key = SigningKey::generate().expect("key");
    // Mallory's path serves a document that claims to be Alice's (with Mallory's key).
    let doc = DidDocument::generate(&alice, &[("key-1".to_owned(), key.verifying_key().to_jwk())]);
    server.serve(&mallory, serde_json::to_vec(&doc).expect("json"), false);
    let t = agent(ResolverOptions::loopback()).await;
    let a = negotiate(&t, &mallory, &key).await;
    assert_eq!((a.status, a.code()), (StatusCode::UNAUTHORIZED, "did_resolution_failed"), "{}", a.body);
    let message = a.body["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains(alice.as_str()), "{message}");
}

#[tokio::test]
async fn document_larger_than_the_limit_is_refused_with_or_without_content_length() {
    let server = DidServer::start().await;
    let key = SigningKey::generate().expect("key");
    let t = agent(ResolverOptions::loopback()).await;
    for (name, streamed) in [("sized", false), ("streamed", true)] {
        let caller = server.did(&["users", name]);
        // A valid document, padded past the 64 KiB limit.
        let mut doc =
            serde_json::to_value(DidDocument::generate(&caller, &[("key-1".to_owned(), key.verifying_key().to_jwk())]))
                .expect("json");
        doc["padding"] = json!("x".repeat(70 * 1024));
        server.serve(&caller, serde_json::to_vec(&doc).expect("json"), streamed);
        let a = negotiate(&t, &caller, &key).await;
        assert_eq!((a.status, a.code()), (StatusCode::UNAUTHORIZED, "did_resolution_failed"), "{name}: {}", a.body);
        let message = a.body["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains("larger than"), "{name}: {message}");
        // Served the same way without the padding, the document is accepted: the size was the reason.
        doc.as_object_mut().expect("object").remove("padding");
        server.serve(&caller, serde_json::to_vec(&doc).expect("json"), streamed);
        assert_eq!(negotiate(&t, &caller, &key).await.status, StatusCode::OK, "{name}");
    }
}

#[tokio::test]
async fn did_web_checks_report_the_first_failure_in_the_order_of_did_33() {
    let server = DidServer::start().await;
    let key = SigningKey::generate().expect("key");
    let t = agent(ResolverOptions::loopback()).await;
    // A DID with an upper-case host (DID-3) and a lower-case port escape (DID-7): the escape is read first, and
    // nothing is fetched for an invalid DID.
    let a = t
        .send(
            t.http
                .post(t.url("/a2a/negotiate"))
                .header("A2A-Version", "0.3")
                .header("A2A-Sender-ID", "did:web:LOCALHOST%3a8080")
                .json(&json!({"target_capability": "sign_document", "proposed_schema": {"type": "object"}})),
        )
        .await;
    assert_eq!((a.status, a.code()), (StatusCode::BAD_REQUEST, "invalid_sender"), "{}", a.body);
    let message = a.body["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("%3A"), "the port escape is not the failure reported: {message}");
    assert_eq!(server.hits(), 0, "a document was fetched for an invalid DID");
    // A document whose id is another DID's and which lacks the key asked for: the id (DID-19) is reported, not the
    // key (DID-24).
    let mallory = server.did(&["users", "mallory"]);
    let alice = server.did(&["users", "alice"]);
    let doc = DidDocument::generate(&alice, &[("key-9".to_owned(), key.verifying_key().to_jwk())]);
    server.serve(&mallory, serde_json::to_vec(&doc).expect("json"), false);
    let a = negotiate(&t, &mallory, &key).await;
    assert_eq!((a.status, a.code()), (StatusCode::UNAUTHORIZED, "did_resolution_failed"), "{}", a.body);
    assert!(a.body["error"]["message"].as_str().unwrap_or_default().contains(alice.as_str()), "{}", a.body);
    // The key exists but may not sign (DID-25) and is not P-256 (DID-26): not authorized is reported first.
    let bob = server.did(&["users", "bob"]);
    let method = json!({"id": format!("{bob}#key-1"), "type": "JsonWebKey2020", "controller": bob.as_str(),
                        "publicKeyJwk": {"kty": "RSA", "n": "AQAB", "e": "AQAB"}});
    let doc = json!({"id": bob.as_str(), "verificationMethod": [method], "keyAgreement": [format!("{bob}#key-1")]});
    server.serve(&bob, serde_json::to_vec(&doc).expect("json"), false);
    let a = negotiate(&t, &bob, &key).await;
    assert_eq!((a.status, a.code()), (StatusCode::UNAUTHORIZED, "unknown_key"), "{}", a.body);
    let message = a.body["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("neither assertionMethod nor authentication"), "{message}");
}
