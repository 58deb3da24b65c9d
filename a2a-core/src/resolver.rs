//! Resolving a sender's DID to the P-256 key that signed a message (`spec/PROTOCOL.md` §9.1).
//!
//! [`DidResolver`] is the trait servers, clients and gateways verify with; [`StaticResolver`] holds documents given
//! in configuration (or tests). With the `http-resolver` feature, [`HttpResolver`] fetches did:web documents over
//! HTTPS with a cache, refusing private, loopback and link-local addresses unless allowed (SSRF), following no
//! redirect, and bounding time and size.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use crate::did::{Did, DidDocument};
use crate::error::{A2aError, ErrorCode};
use crate::keys::VerifyingKey;

/// Resolves `(DID, key id)` to a verifying key.
#[async_trait::async_trait]
pub trait DidResolver: Send + Sync + 'static {
    /// The P-256 key `key_id` of `did`, usable for signatures (it must be an assertion or authentication method).
    /// Errors carry `did_resolution_failed`, `unknown_key` or `unsupported_key_type`.
    async fn resolve_key(&self, did: &str, key_id: &str) -> Result<VerifyingKey, A2aError>;
}

fn key_from_document(doc: &DidDocument, did: &str, key_id: &str) -> Result<VerifyingKey, A2aError> {
    let jwk = doc.find_signing_jwk(key_id).map_err(|e| A2aError::with_message(e.code(), e.to_string()))?;
    VerifyingKey::from_jwk(jwk).map_err(|e| A2aError::with_message(e.code(), format!("key {key_id:?} of {did}: {e}")))
}

/// DID documents known in advance: from configuration, or built in tests. Keys are parsed once and kept.
#[derive(Default)]
pub struct StaticResolver {
    docs: RwLock<HashMap<String, Arc<DidDocument>>>,
    keys: RwLock<HashMap<(String, String), VerifyingKey>>,
}

impl StaticResolver {
    /// An empty resolver.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds (or replaces) the document of a DID.
    pub fn insert(&self, did: &Did, doc: DidDocument) {
        self.docs.write().unwrap_or_else(std::sync::PoisonError::into_inner).insert(did.to_string(), Arc::new(doc));
        self.keys.write().unwrap_or_else(std::sync::PoisonError::into_inner).retain(|(d, _), _| d != did.as_str());
    }
}

#[async_trait::async_trait]
impl DidResolver for StaticResolver {
    async fn resolve_key(&self, did: &str, key_id: &str) -> Result<VerifyingKey, A2aError> {
        let cache_key = (did.to_owned(), key_id.to_owned());
        if let Some(k) = self.keys.read().unwrap_or_else(std::sync::PoisonError::into_inner).get(&cache_key) {
            return Ok(k.clone());
        }
        let doc = self.docs.read().unwrap_or_else(std::sync::PoisonError::into_inner).get(did).cloned();
        let doc = doc.ok_or_else(|| {
            A2aError::with_message(ErrorCode::DID_RESOLUTION_FAILED, format!("{did} is not a DID this agent knows"))
        })?;
        let key = key_from_document(&doc, did, key_id)?;
        self.keys.write().unwrap_or_else(std::sync::PoisonError::into_inner).insert(cache_key, key.clone());
        Ok(key)
    }
}

#[cfg(feature = "http-resolver")]
pub use http::{HttpResolver, ResolverOptions};

#[cfg(feature = "http-resolver")]
mod http {
    use std::net::SocketAddr;
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    use super::{DidResolver, key_from_document};
    use crate::did::{Did, DidDocument, ResolveOptions};
    use crate::error::{A2aError, ErrorCode};
    use crate::keys::VerifyingKey;

    /// Options of [`HttpResolver`].
    #[derive(Debug, Clone)]
    #[non_exhaustive]
    pub struct ResolverOptions {
        /// Resolve `did:web:localhost...` over plain HTTP to loopback addresses (tests, local development).
        pub allow_http_loopback: bool,
        /// Allow private, loopback and link-local addresses for every host (never in production).
        pub allow_private_addresses: bool,
        /// Time allowed for one fetch.
        pub timeout: Duration,
        /// Largest DID document accepted.
        pub max_document_bytes: usize,
        /// How long a document is cached (at most one hour, DID-*).
        pub cache_ttl: Duration,
        /// Documents cached at most.
        pub cache_capacity: u64,
        /// Extra trusted root certificates (PEM), e.g. a test certificate authority.
        pub extra_roots_pem: Vec<Vec<u8>>,
    }

    impl Default for ResolverOptions {
        fn default() -> Self {
            ResolverOptions {
                allow_http_loopback: false,
                allow_private_addresses: false,
                timeout: Duration::from_secs(5),
                max_document_bytes: 64 * 1024,
                cache_ttl: Duration::from_secs(3600),
                cache_capacity: 10_000,
                extra_roots_pem: Vec::new(),
            }
        }
    }

    impl ResolverOptions {
        /// Options for tests and local development: plain HTTP to `localhost` DIDs.
        pub fn loopback() -> Self {
            ResolverOptions { allow_http_loopback: true, ..Self::default() }
        }
    }

    #[derive(Clone)]
    struct Cached {
        doc: Arc<DidDocument>,
        fetched: Instant,
        /// From the response's `Cache-Control` (DID-27), at most one hour.
        ttl: Duration,
    }

    impl Cached {
        fn fresh(&self) -> bool {
            self.fetched.elapsed() < self.ttl
        }
    }

    /// A did:web resolver over HTTPS with a cache; see the module documentation.
    pub struct HttpResolver {
        client: reqwest::Client,
        opts: ResolverOptions,
        docs: moka::future::Cache<String, Cached>,
        keys: moka::sync::Cache<String, (VerifyingKey, Instant, Duration)>,
    }

    fn is_loopback_host(host: &str) -> bool {
        host == "localhost" || host.ends_with(".localhost")
    }

    /// The DNS step of the HTTP client: resolves, then drops every address the options do not allow, so that the
    /// connection is made only to an allowed address (no DNS-rebinding window between check and use).
    struct GuardedDns {
        allow_private: bool,
        allow_loopback_names: bool,
    }

    impl reqwest::dns::Resolve for GuardedDns {
        fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
            let host = name.as_str().to_owned();
            let allow_private = self.allow_private;
            let allow_loopback = self.allow_loopback_names && is_loopback_host(&host);
            Box::pin(async move {
                let addrs: Vec<SocketAddr> = tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
                let allowed: Vec<SocketAddr> = addrs
                    .into_iter()
                    .filter(|a| {
                        allow_private
                            || (allow_loopback && a.ip().is_loopback())
                            || crate::did::is_public_address(a.ip())
                    })
                    .collect();
                if allowed.is_empty() {
                    return Err(format!("{host} resolves only to private, loopback or link-local addresses, which DID resolution refuses").into());
                }
                let it: reqwest::dns::Addrs = Box::new(allowed.into_iter());
                Ok(it)
            })
        }
    }

    /// A transport error with its causes ("error sending request: ...: <host> resolves only to private ... addresses").
    fn describe(e: &reqwest::Error) -> String {
        crate::error::with_causes(e)
    }

    fn failed(did: &str, why: impl std::fmt::Display) -> A2aError {
        A2aError::with_message(ErrorCode::DID_RESOLUTION_FAILED, format!("cannot resolve {did}: {why}"))
    }

    impl HttpResolver {
        /// A resolver with these options.
        pub fn new(opts: ResolverOptions) -> Result<Self, A2aError> {
            let mut builder = reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .timeout(opts.timeout)
                .no_proxy()
                .dns_resolver(Arc::new(GuardedDns {
                    allow_private: opts.allow_private_addresses,
                    allow_loopback_names: opts.allow_http_loopback,
                }));
            for pem in &opts.extra_roots_pem {
                let cert = reqwest::Certificate::from_pem(pem).map_err(|e| {
                    A2aError::with_message(ErrorCode::INTERNAL_ERROR, format!("bad root certificate: {e}"))
                })?;
                builder = builder.tls_certs_merge([cert]);
            }
            let client = builder.build().map_err(|e| {
                A2aError::with_message(ErrorCode::INTERNAL_ERROR, format!("cannot build the HTTP client: {e}"))
            })?;
            let ttl = opts.cache_ttl.min(Duration::from_secs(3600));
            Ok(HttpResolver {
                client,
                docs: moka::future::Cache::builder().max_capacity(opts.cache_capacity).time_to_live(ttl).build(),
                keys: moka::sync::Cache::builder().max_capacity(opts.cache_capacity).time_to_live(ttl).build(),
                opts,
            })
        }

        /// Fetches and parses the DID document of `did`, bypassing the cache.
        pub async fn fetch(&self, did: &Did) -> Result<DidDocument, A2aError> {
            self.fetch_with_ttl(did).await.map(|(doc, _)| doc)
        }

        async fn fetch_with_ttl(&self, did: &Did) -> Result<(DidDocument, Duration), A2aError> {
            let ds = did.to_string();
            let url = did
                .document_url(&ResolveOptions { allow_http_loopback: self.opts.allow_http_loopback })
                .map_err(|e| failed(&ds, e))?;
            let mut resp = self
                .client
                .get(url.clone())
                .header("accept", "application/did+json, application/json")
                .send()
                .await
                .map_err(|e| failed(&ds, format!("GET {url}: {}", describe(&e))))?;
            if !resp.status().is_success() {
                return Err(failed(&ds, format!("GET {url} answered {}", resp.status())));
            }
            let ttl = crate::did::cache_lifetime(
                resp.headers().get(reqwest::header::CACHE_CONTROL).and_then(|v| v.to_str().ok()),
            )
            .min(self.opts.cache_ttl);
            let max = self.opts.max_document_bytes;
            if resp.content_length().is_some_and(|l| l > max as u64) {
                return Err(failed(&ds, format!("the document is larger than {max} bytes")));
            }
            let mut body = Vec::new();
            while let Some(chunk) = resp.chunk().await.map_err(|e| failed(&ds, e))? {
                if body.len() + chunk.len() > max {
                    return Err(failed(&ds, format!("the document is larger than {max} bytes")));
                }
                body.extend_from_slice(&chunk);
            }
            let doc = DidDocument::parse(&body, did).map_err(|e| failed(&ds, e))?;
            Ok((doc, ttl))
        }

        async fn document(&self, did: &Did, fresh: bool) -> Result<Cached, A2aError> {
            let key = did.to_string();
            if !fresh && let Some(c) = self.docs.get(&key).await.filter(Cached::fresh) {
                return Ok(c);
            }
            let (doc, ttl) = self.fetch_with_ttl(did).await?;
            let cached = Cached { doc: Arc::new(doc), fetched: Instant::now(), ttl };
            if !ttl.is_zero() {
                self.docs.insert(key, cached.clone()).await;
            }
            Ok(cached)
        }
    }

    #[async_trait::async_trait]
    impl DidResolver for HttpResolver {
        async fn resolve_key(&self, did: &str, key_id: &str) -> Result<VerifyingKey, A2aError> {
            let cache_key = format!("{did}#{key_id}");
            if let Some((k, at, ttl)) = self.keys.get(&cache_key)
                && at.elapsed() < ttl
            {
                return Ok(k);
            }
            let parsed = Did::parse(did).map_err(|e| failed(did, e))?;
            let cached = self.document(&parsed, false).await?;
            let (key, from) = match key_from_document(&cached.doc, did, key_id) {
                // A key rotated since the document was cached: fetch once more, at most every 30 s.
                Err(e) if e.code == ErrorCode::UNKNOWN_KEY && cached.fetched.elapsed() > Duration::from_secs(30) => {
                    let fresh = self.document(&parsed, true).await?;
                    (key_from_document(&fresh.doc, did, key_id)?, fresh)
                }
                other => (other?, cached),
            };
            if !from.ttl.is_zero() {
                self.keys.insert(cache_key, (key.clone(), from.fetched, from.ttl));
            }
            Ok(key)
        }
    }
}
