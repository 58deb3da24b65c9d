//! did:web resolution over real HTTPS, with a certificate authority generated in the test (§9.1.5): an agent served
//! over TLS signs its responses, and the client resolves its DID document to verify them — with a cache, refusing
//! loopback addresses unless allowed (SSRF), and plain HTTP only for loopback when allowed.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use a2a_client::{Client, ClientConfig, ClientError, Identity, ResponseVerification};
use a2a_core::did::{Did, DidDocument};
use a2a_core::keys::SigningKey;
use a2a_server::AgentBuilder;
use axum::response::IntoResponse;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use serde_json::json;
use tokio::net::TcpListener;
use tower::ServiceExt;

use crate::common::{CALLER, TestAgent, decl};

/// A test certificate authority and a certificate for `localhost` it signed.
struct Pki {
    ca_pem: String,
    leaf: CertificateDer<'static>,
    leaf_key: PrivatePkcs8KeyDer<'static>,
}

fn pki() -> Pki {
    use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose};
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).expect("params");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params.distinguished_name.push(DnType::CommonName, "a2a-client test CA");
    ca_params.key_usages =
        vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign, KeyUsagePurpose::DigitalSignature];
    let ca_key = KeyPair::generate().expect("CA key");
    let ca_cert = ca_params.self_signed(&ca_key).expect("CA certificate");
    let issuer = Issuer::new(ca_params, ca_key);
    let leaf_params = CertificateParams::new(vec!["localhost".to_owned()]).expect("params");
    let leaf_key = KeyPair::generate().expect("leaf key");
    let leaf = leaf_params.signed_by(&leaf_key, &issuer).expect("leaf certificate");
    Pki {
        ca_pem: ca_cert.pem(),
        leaf: leaf.der().clone(),
        leaf_key: PrivatePkcs8KeyDer::from(leaf_key.serialize_der()),
    }
}

/// Serves `app` over TLS on a free loopback port; returns the port and the number of TCP connections accepted.
async fn serve_tls(app: axum::Router, pki: &Pki) -> (u16, Arc<AtomicUsize>) {
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("protocol versions")
        .with_no_client_auth()
        .with_single_cert(vec![pki.leaf.clone()], PrivateKeyDer::Pkcs8(pki.leaf_key.clone_key()))
        .expect("server config");
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let accepted = Arc::new(AtomicUsize::new(0));
    let count = accepted.clone();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            count.fetch_add(1, Ordering::SeqCst);
            let (acceptor, app) = (acceptor.clone(), app.clone());
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(tcp).await else { return };
                let service = hyper::service::service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
                    app.clone().oneshot(req.map(axum::body::Body::new))
                });
                let _ = hyper_util::server::conn::auto::Builder::new(hyper_util::rt::TokioExecutor::new())
                    .serve_connection(hyper_util::rt::TokioIo::new(tls), service)
                    .await;
            });
        }
    });
    (port, accepted)
}

/// A DID document route that counts its fetches.
fn did_route(doc: &DidDocument, fetches: Arc<AtomicUsize>) -> axum::Router {
    let doc = serde_json::to_value(doc).expect("doc");
    axum::Router::new().route(
        "/.well-known/did.json",
        axum::routing::get(move || {
            fetches.fetch_add(1, Ordering::SeqCst);
            let doc = doc.clone();
            async move { ([("cache-control", "max-age=300")], axum::Json(doc)) }
        }),
    )
}

/// Binds first, so that the agent's DID can name the port it will be served on.
async fn reserve() -> (TcpListener, u16) {
    let l = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = l.local_addr().expect("addr").port();
    (l, port)
}

fn client(config: ClientConfig) -> Client {
    Client::builder(Identity::unsigned(CALLER).expect("did")).config(config).build().expect("client")
}

fn https_config(ca: &str) -> ClientConfig {
    ClientConfig::default()
        .with_root_certificate(ca.as_bytes().to_vec())
        .with_did_resolution(false, true)
        .with_response_verification(ResponseVerification::Required)
}

/// An agent served over HTTPS at `https://localhost:PORT/a2a` with its DID document on the same origin; it signs
/// every response.
async fn https_agent(pki: &Pki) -> (String, Arc<AtomicUsize>) {
    let key = SigningKey::generate().expect("key");
    // The DID names the port, known once the TLS server is bound: serve a router that forwards to the agent, and
    // build the agent for the port the server got.
    let fetches = Arc::new(AtomicUsize::new(0));
    let slot: Arc<std::sync::OnceLock<axum::Router>> = Arc::new(std::sync::OnceLock::new());
    let s = slot.clone();
    let lazy = axum::Router::new().fallback(move |req: axum::extract::Request| {
        let s = s.clone();
        async move {
            match s.get() {
                Some(app) => app.clone().oneshot(req).await.unwrap_or_else(|e| match e {}),
                None => axum::http::StatusCode::SERVICE_UNAVAILABLE.into_response(),
            }
        }
    });
    let (port, _) = serve_tls(lazy, pki).await;
    let did = Did::for_host_port("localhost", Some(port), &[]).expect("did");
    let doc = DidDocument::generate(&did, &[("key-1", key.verifying_key().to_jwk())]);
    let agent = AgentBuilder::new(did.as_str())
        .capability(decl("read_status", json!({"type": "object"})), a2a_server::handler::builtin::echo())
        .sign_responses("key-1", key)
        .build()
        .expect("agent");
    let _ = slot.set(agent.router().merge(did_route(&doc, fetches.clone())));
    (format!("https://localhost:{port}/a2a"), fetches)
}

#[tokio::test]
async fn an_agent_over_https_is_verified_with_its_did_document_fetched_once() {
    let pki = pki();
    let (url, fetches) = https_agent(&pki).await;
    let c = client(https_config(&pki.ca_pem));
    let o = c.call(&url, "read_status", json!({"n": 1})).await.expect("verified over HTTPS");
    assert_eq!(o.result, json!({"echo": {"n": 1}}));
    c.call(&url, "read_status", json!({"n": 2})).await.expect("again");
    // Every response of both calls was verified; the document was fetched once (DID-27 cache).
    assert_eq!(fetches.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn without_the_test_ca_the_agent_is_unreachable() {
    let pki = pki();
    let (url, _) = https_agent(&pki).await;
    let e = client(ClientConfig::default()).discover(&url).await.expect_err("untrusted certificate");
    assert!(matches!(&e, ClientError::Unreachable { .. }), "{e:?}");
    assert!(e.hint().contains("certificate"), "{}", e.hint());
}

#[tokio::test]
async fn a_did_document_on_a_loopback_address_is_refused_unless_allowed_without_connecting() {
    let pki = pki();
    let key = SigningKey::generate().expect("key");
    // The DID document over HTTPS on its own server, whose connections are counted.
    let fetches = Arc::new(AtomicUsize::new(0));
    let slot: Arc<std::sync::OnceLock<DidDocument>> = Arc::new(std::sync::OnceLock::new());
    let (s, f) = (slot.clone(), fetches.clone());
    let doc_app = axum::Router::new().route(
        "/.well-known/did.json",
        axum::routing::get(move || {
            f.fetch_add(1, Ordering::SeqCst);
            let doc = s.get().map(|d| serde_json::to_value(d).expect("doc")).unwrap_or_default();
            async move { axum::Json(doc) }
        }),
    );
    let (doc_port, accepted) = serve_tls(doc_app, &pki).await;
    let did = Did::for_host_port("localhost", Some(doc_port), &[]).expect("did");
    let _ = slot.set(DidDocument::generate(&did, &[("key-1", key.verifying_key().to_jwk())]));
    // The agent itself over plain HTTP, named by that DID.
    let t = TestAgent::start(
        AgentBuilder::new(did.as_str())
            .capability(decl("read_status", json!({"type": "object"})), a2a_server::handler::builtin::echo())
            .sign_responses("key-1", key),
    )
    .await;
    let mut strict = https_config(&pki.ca_pem);
    strict.did_resolution = Default::default();
    let e = client(strict).discover(&t.endpoint).await.expect_err("SSRF guard");
    assert_eq!(e.code(), "did_resolution_failed");
    assert!(e.to_string().contains("private, loopback or link-local"), "{e}");
    assert_eq!(accepted.load(Ordering::SeqCst), 0, "the resolver connected to a loopback address");
    client(https_config(&pki.ca_pem)).discover(&t.endpoint).await.expect("allowed explicitly");
    assert_eq!(fetches.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn plain_http_did_documents_are_used_only_for_loopback_when_allowed() {
    let key = SigningKey::generate().expect("key");
    let (listener, port) = reserve().await;
    let did = Did::for_host_port("localhost", Some(port), &[]).expect("did");
    let doc = DidDocument::generate(&did, &[("key-1", key.verifying_key().to_jwk())]);
    let agent = AgentBuilder::new(did.as_str())
        .capability(decl("read_status", json!({"type": "object"})), a2a_server::handler::builtin::echo())
        .sign_responses("key-1", key)
        .build()
        .expect("agent");
    let fetches = Arc::new(AtomicUsize::new(0));
    let app = agent.router().merge(did_route(&doc, fetches.clone()));
    let t = TestAgent::serve_on(listener, agent, app).await;
    let required = ClientConfig::default().with_response_verification(ResponseVerification::Required);
    // By default the document is fetched over HTTPS only (DID-13): this agent serves plain HTTP, so it fails.
    let e = client(required.clone()).discover(&t.endpoint).await.expect_err("https only");
    assert_eq!(e.code(), "did_resolution_failed");
    assert_eq!(fetches.load(Ordering::SeqCst), 0);
    let dev = client(required.with_did_resolution(true, false));
    dev.call(&t.endpoint, "read_status", json!({})).await.expect("loopback over HTTP when allowed");
    assert_eq!(fetches.load(Ordering::SeqCst), 1);
}
