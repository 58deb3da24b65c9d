//! `--serve-did`: the suite publishes its own did:web documents on a loopback port, so that an agent that resolves
//! `did:web:localhost...` DIDs over plain HTTP (spec DID-13: allowed only for loopback and only when configured) can
//! verify the suite's signatures without any set-up.
//!
//! DIDs are `did:web:localhost%3A<port>:run-<hex>` (the primary caller), `...:run-<hex>:second` (a second caller)
//! and `...:run-<hex>:fault:<case>`: documents that are wrong in one way each (an RSA key, a key in `keyAgreement`
//! only, an `id` that names another DID, a redirect, ...), for the DID-* checks of an agent's resolver; and
//! `did:web:localhost%3A<port>` itself (the root caller, served from `/.well-known/did.json`, DID-12).
//! `did:web:127.0.0.1...` cannot be used: DID-4 refuses IP-address hosts.
//!
//! Every run publishes fresh keys under fresh names: `run-<hex>` and the key ids `key-<hex>` are random per run, and
//! the root document (whose name cannot change) is served with `Cache-Control: no-store`. An agent that caches DID
//! documents (DID-27) therefore never holds a document of an earlier run under a name this run signs with, even when
//! `--serve-did` names the same port run after run.
//!
//! Every request the host receives is logged, so that checks can see whether and where the agent fetched a document
//! (DID-12, DID-27, DID-30), and whether it fetched something it must never fetch (the `/canary/` paths of SCH-14 and
//! NEG-41). The host speaks plain HTTP only; a connection that opens with a TLS handshake record is counted and closed,
//! so that a resolver that tries `https` first and then falls back to `http` is seen (DID-13).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use a2a_core::did::{Did, DidDocument};
use axum::Router;
use axum::body::Body;
use axum::http::{Request, Response, StatusCode};
use serde_json::{Value, json};
use tokio::net::TcpListener;

use crate::identity::Identity;

/// One request the host received.
#[derive(Debug, Clone)]
pub struct Hit {
    /// The request path.
    pub path: String,
    /// When (since the host started).
    pub at: std::time::Instant,
}

/// What the host answers on a path.
#[derive(Debug, Clone)]
struct Served {
    status: u16,
    headers: Vec<(&'static str, String)>,
    body: Vec<u8>,
}

impl Served {
    fn json(doc: &Value) -> Served {
        Served::json_cached(doc, "max-age=300")
    }

    fn json_cached(doc: &Value, cache_control: &str) -> Served {
        Served {
            status: 200,
            headers: vec![
                ("content-type", "application/did+json".to_owned()),
                ("cache-control", cache_control.to_owned()),
                ("access-control-allow-origin", "*".to_owned()),
            ],
            body: serde_json::to_vec(doc).unwrap_or_default(),
        }
    }
}

/// The fault cases the host publishes, each with the requirement it probes and the error code an agent answers.
pub const FAULTS: &[(&str, &str)] = &[
    ("rsa", "an RSA key (kty RSA)"),
    ("private", "a P-256 JWK that carries its private part `d`"),
    ("offcurve", "a JWK whose x, y are not a point of P-256"),
    ("es384", "a P-256 JWK with alg ES384"),
    ("keyagreement", "a key listed only in keyAgreement"),
    ("mismatch", "a document whose id is another DID"),
    ("notjson", "a body that is not JSON"),
    ("huge", "a document larger than 65 536 bytes"),
    ("toomany", "65 verification methods"),
    ("badmethod", "a verification method without `type`"),
    ("missing", "404 Not Found"),
    ("redirect", "a 302 redirect to a valid document"),
    ("extras", "a valid document with members the protocol does not use (service, alsoKnownAs, controller)"),
    ("relative", "a valid document whose method ids are relative (#key-1)"),
];

/// The suite's DID host.
pub struct DidHost {
    /// The port on 127.0.0.1.
    pub port: u16,
    /// This run's name, `run-<hex>` (random per run): the path segment of every DID but the root one.
    pub run: String,
    /// The primary caller, `did:web:localhost%3A<port>:run-<hex>`.
    pub primary: Arc<Identity>,
    /// A second caller, `did:web:localhost%3A<port>:run-<hex>:second`.
    pub second: Arc<Identity>,
    /// The root caller, `did:web:localhost%3A<port>` (its document at `/.well-known/did.json`, `no-store`).
    pub root: Arc<Identity>,
    /// The identity of each fault case (a valid key, published wrongly).
    pub faults: HashMap<&'static str, Arc<Identity>>,
    hits: Arc<Mutex<Vec<Hit>>>,
    tls: Arc<std::sync::atomic::AtomicUsize>,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
}

/// A listener that counts and closes the connections whose first byte opens a TLS handshake record (0x16): the host
/// is plain HTTP, so such a connection is an `https` attempt (DID-13).
struct PlainOnly {
    inner: TcpListener,
    tls: Arc<std::sync::atomic::AtomicUsize>,
}

impl axum::serve::Listener for PlainOnly {
    type Io = tokio::net::TcpStream;
    type Addr = std::net::SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            let (stream, addr) = match self.inner.accept().await {
                Ok(c) => c,
                Err(_) => {
                    tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                    continue;
                }
            };
            let mut first = [0u8; 1];
            let peeked = tokio::time::timeout(std::time::Duration::from_secs(2), stream.peek(&mut first)).await;
            if matches!(peeked, Ok(Ok(1))) && first[0] == 0x16 {
                self.tls.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                continue;
            }
            return (stream, addr);
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        self.inner.local_addr()
    }
}

impl Drop for DidHost {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
    }
}

fn document_path(did: &Did) -> String {
    let segs = did.path_segments();
    if segs.is_empty() { "/.well-known/did.json".to_owned() } else { format!("/{}/did.json", segs.join("/")) }
}

fn doc_of(id: &Identity) -> Result<(Did, Value), String> {
    let did = Did::parse(&id.did).map_err(|e| e.to_string())?;
    let doc = DidDocument::generate(&did, &[(id.key_id.clone(), id.key.verifying_key().to_jwk())]);
    Ok((did.clone(), serde_json::to_value(&doc).map_err(|e| e.to_string())?))
}

impl DidHost {
    /// Starts the host on `addr` (a loopback address such as `127.0.0.1:0`; port 0 picks a free port).
    pub async fn start(addr: &str) -> Result<DidHost, String> {
        let listener =
            TcpListener::bind(addr).await.map_err(|e| format!("--serve-did: cannot listen on {addr}: {e}"))?;
        let local = listener.local_addr().map_err(|e| e.to_string())?;
        if !local.ip().is_loopback() {
            return Err(format!("--serve-did must name a loopback address (did:web:localhost), not {local}"));
        }
        let port = local.port();
        // `localhost` may resolve to ::1 first; serve there too when the port is free.
        let v6 = TcpListener::bind(("::1", port)).await.ok();
        let mut nonce = [0u8; 4];
        getrandom::fill(&mut nonce).map_err(|e| format!("--serve-did: no random bytes: {e}"))?;
        let hex: String = nonce.iter().map(|b| format!("{b:02x}")).collect();
        let run = format!("run-{hex}");
        let key_id = format!("key-{hex}");
        let root_did = format!("did:web:localhost%3A{port}");
        let base = format!("{root_did}:{run}");
        let primary = Arc::new(Identity::generate(&base, &key_id)?);
        let second = Arc::new(Identity::generate(&format!("{base}:second"), &key_id)?);
        let root = Arc::new(Identity::generate(&root_did, &key_id)?);
        let mut served: HashMap<String, Served> = HashMap::new();
        for id in [&primary, &second] {
            let (did, doc) = doc_of(id)?;
            served.insert(document_path(&did), Served::json(&doc));
        }
        let (did, doc) = doc_of(&root)?;
        served.insert(document_path(&did), Served::json_cached(&doc, "no-store"));
        let redirect_target = format!("/{run}/fault/redirect-target/did.json");
        let mut faults = HashMap::new();
        for (name, _) in FAULTS {
            let id = Arc::new(Identity::generate(&format!("{base}:fault:{name}"), &key_id)?);
            let (did, doc) = doc_of(&id)?;
            let path = document_path(&did);
            served.insert(path.clone(), fault_document(name, &id, &did, doc, &redirect_target));
            if *name == "redirect" {
                // The redirect target holds a valid document; an agent that follows the redirect fetches it.
                let (_, valid) = doc_of(&id)?;
                served.insert(redirect_target.clone(), Served::json(&valid));
            }
            faults.insert(*name, id);
        }
        let hits = Arc::new(Mutex::new(Vec::new()));
        let tls = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let served = Arc::new(served);
        let app = {
            let hits = hits.clone();
            Router::new().fallback(move |req: Request<Body>| {
                let hits = hits.clone();
                let served = served.clone();
                async move {
                    let path = req.uri().path().to_owned();
                    hits.lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner)
                        .push(Hit { path: path.clone(), at: std::time::Instant::now() });
                    let mut resp = Response::builder();
                    match served.get(&path) {
                        Some(s) => {
                            resp = resp.status(StatusCode::from_u16(s.status).unwrap_or(StatusCode::OK));
                            for (k, v) in &s.headers {
                                resp = resp.header(*k, v.as_str());
                            }
                            resp.body(Body::from(s.body.clone()))
                        }
                        None => resp.status(StatusCode::NOT_FOUND).body(Body::from("not found")),
                    }
                    .unwrap_or_else(|_| Response::new(Body::empty()))
                }
            })
        };
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let (tx6, rx6) = tokio::sync::oneshot::channel::<()>();
        let app6 = app.clone();
        let (tls4, tls6) = (tls.clone(), tls.clone());
        tokio::spawn(async move {
            let _ = axum::serve(PlainOnly { inner: listener, tls: tls4 }, app)
                .with_graceful_shutdown(async {
                    let _ = rx.await;
                    let _ = tx6.send(());
                })
                .await;
        });
        if let Some(l6) = v6 {
            tokio::spawn(async move {
                let _ = axum::serve(PlainOnly { inner: l6, tls: tls6 }, app6)
                    .with_graceful_shutdown(async {
                        let _ = rx6.await;
                    })
                    .await;
            });
        }
        Ok(DidHost { port, run, primary, second, root, faults, hits, tls, shutdown: Some(tx) })
    }

    /// The requests received on `path`.
    pub fn hits(&self, path: &str) -> usize {
        self.hits.lock().unwrap_or_else(std::sync::PoisonError::into_inner).iter().filter(|h| h.path == path).count()
    }

    /// The connections that opened with a TLS handshake (an `https` attempt on the plain-HTTP host, DID-13).
    pub fn tls_attempts(&self) -> usize {
        self.tls.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// The requests received on any path starting with `prefix`.
    pub fn hits_under(&self, prefix: &str) -> Vec<String> {
        self.hits
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .iter()
            .filter(|h| h.path.starts_with(prefix))
            .map(|h| h.path.clone())
            .collect()
    }

    /// The path where the document of `did` is served (DID-12).
    pub fn path_of(did: &str) -> String {
        Did::parse(did).map(|d| document_path(&d)).unwrap_or_default()
    }

    /// The path the `redirect` fault case redirects to.
    pub fn redirect_target(&self) -> String {
        format!("/{}/fault/redirect-target/did.json", self.run)
    }

    /// A URL on the host that must never be fetched (a canary): `http://127.0.0.1:<port>/canary/<tag>`.
    pub fn canary_url(&self, tag: &str) -> String {
        format!("http://127.0.0.1:{}/canary/{tag}", self.port)
    }
}

fn fault_document(name: &str, id: &Identity, did: &Did, mut doc: Value, redirect_target: &str) -> Served {
    let jwk = id.key.verifying_key().to_jwk();
    let set_jwk = |doc: &mut Value, jwk: Value| {
        if let Some(m) = doc.pointer_mut("/verificationMethod/0") {
            m["publicKeyJwk"] = jwk;
        }
    };
    match name {
        "rsa" => set_jwk(
            &mut doc,
            json!({"kty": "RSA", "e": "AQAB",
                   "n": "sXchDaQebHnPiGvyDOAT4saGEUetSyo9MKLOoWFsueri23bOdgWp4Dy1WlUzewbgBHod5pcM9H95GQRV3JDXboIRROSBigeC5yjU1hGzHHyXss8UDprecbAYxknTcQkhslANGRUZmdTOQ5qTRsLAt6BTYuyvVRdhS8exSZEy_c4gs_7svlJJQ4H9_NxsiIoLwAEk7-Q3UXERGYw_75IDrGA84-lA_-Ct4eTlXHBIY2EaV7t7LjJaynVJCpkv4LKjTTAumiGUIuQhrNhZLuF_RJLqHpM2kgWFLU7-VTdL1VbC2tejvcI2BlMkEpk1BzBZI0KQB0GaDWFLN-aEAw3vRw"}),
        ),
        "private" => {
            let mut j = id.key.to_jwk();
            j["kty"] = json!("EC");
            set_jwk(&mut doc, j);
        }
        "offcurve" => {
            let mut j = jwk;
            // Flip the low bit of y: (x, y') is not on the curve.
            if let Some(y) = j["y"].as_str().and_then(|y| a2a_core::jws::base64url_decode(y).ok()) {
                let mut y = y;
                if let Some(last) = y.last_mut() {
                    *last ^= 1;
                }
                j["y"] = json!(a2a_core::jws::base64url_encode(y));
            }
            set_jwk(&mut doc, j);
        }
        "es384" => {
            let mut j = jwk;
            j["alg"] = json!("ES384");
            set_jwk(&mut doc, j);
        }
        "keyagreement" => {
            let kid = format!("{did}#{}", id.key_id);
            doc["authentication"] = json!([]);
            doc["assertionMethod"] = json!([]);
            doc["keyAgreement"] = json!([kid]);
        }
        "mismatch" => doc["id"] = json!("did:web:bank.example.com"),
        "notjson" => {
            return Served {
                status: 200,
                headers: vec![("content-type", "application/did+json".to_owned())],
                body: b"this is not a DID document".to_vec(),
            };
        }
        "huge" => doc["padding"] = json!("x".repeat(70_000)),
        "toomany" => {
            let mut methods = vec![doc["verificationMethod"][0].clone()];
            for i in 0..64 {
                methods.push(json!({"id": format!("{did}#extra-{i}"), "type": "JsonWebKey2020",
                                    "controller": did.to_string(), "publicKeyJwk": jwk}));
            }
            doc["verificationMethod"] = json!(methods);
        }
        "badmethod" => {
            if let Some(m) = doc.pointer_mut("/verificationMethod/0").and_then(Value::as_object_mut) {
                m.remove("type");
            }
        }
        "missing" => {
            return Served {
                status: 404,
                headers: vec![("content-type", "text/plain".to_owned())],
                body: b"not found".to_vec(),
            };
        }
        "redirect" => {
            return Served { status: 302, headers: vec![("location", redirect_target.to_owned())], body: Vec::new() };
        }
        "extras" => {
            doc["service"] = json!([{"id": format!("{did}#a2a"), "type": "A2AEndpoint", "serviceEndpoint": "https://example.com/a2a"}]);
            doc["alsoKnownAs"] = json!(["https://example.com"]);
            doc["controller"] = json!(did.to_string());
        }
        "relative" => {
            let rel = format!("#{}", id.key_id);
            doc["verificationMethod"][0]["id"] = json!(rel);
            doc["authentication"] = json!([rel]);
            doc["assertionMethod"] = json!([rel]);
        }
        _ => {}
    }
    Served::json(&doc)
}
