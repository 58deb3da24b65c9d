//! The agents behind the gateway: their endpoints, what they offer (their DISCOVER and capabilities answers, cached
//! for 5 minutes, DISC-4), their health (outlier ejection), and the choice of an agent for a NEGOTIATE
//! (`routeByCapability`, §15).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use a2a_core::capability::CapabilityDeclaration;
use a2a_core::headers as h;
use a2a_core::wire::CapabilitiesDocument;
use bytes::Bytes;
use http::{Method, Request, Uri};
use http_body_util::Full;

use crate::config::{BalancingSection, DiscoverCacheSection};
use crate::metrics::Metrics;
use crate::upstream::Upstream;

/// An agent's A2A endpoint, `http://host:port[/prefix]/a2a`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    /// The normalised URL, ending in `/a2a`.
    pub url: String,
    origin: String,
    /// `host:port`, shared with the connections to it.
    authority: Arc<str>,
    /// The path before `/a2a` (empty when the agent serves at the root).
    pub prefix: String,
}

impl Endpoint {
    /// Parses an endpoint URL; a URL whose path does not end in `/a2a` gets it appended (TR-2).
    pub fn parse(url: &str) -> Result<Endpoint, String> {
        let uri: Uri = url.trim().parse().map_err(|e| format!("{url:?} is not a URL: {e}"))?;
        match uri.scheme_str() {
            Some("http") => {}
            Some("https") => {
                return Err(format!(
                    "{url:?}: this gateway reaches agents over plain HTTP on a trusted network; terminate TLS in \
                     front of the agent or use its internal http:// address"
                ));
            }
            _ => return Err(format!("{url:?} must be an http:// URL")),
        }
        let authority = uri.authority().ok_or_else(|| format!("{url:?} has no host"))?;
        if uri.query().is_some() {
            return Err(format!("{url:?} must not have a query"));
        }
        let path = uri.path().trim_end_matches('/');
        let prefix = path.strip_suffix("/a2a").unwrap_or(path).to_owned();
        let origin = format!("http://{authority}");
        Ok(Endpoint { url: format!("{origin}{prefix}/a2a"), authority: authority.as_str().into(), origin, prefix })
    }

    /// The URI of `path_and_query` (which starts with `/a2a`) at this agent.
    pub fn uri(&self, path_and_query: &str) -> Result<Uri, http::Error> {
        let mut s = String::with_capacity(self.origin.len() + self.prefix.len() + path_and_query.len());
        s.push_str(&self.origin);
        s.push_str(&self.prefix);
        s.push_str(path_and_query);
        Ok(Uri::try_from(s)?)
    }

    /// `host:port` of the agent, as written in `Host` and used to connect.
    pub fn authority(&self) -> &Arc<str> {
        &self.authority
    }

    /// The request target the agent sees for `path_and_query` (for signatures, `htu`).
    pub fn target<'a>(&self, path_and_query: &'a str) -> std::borrow::Cow<'a, str> {
        if self.prefix.is_empty() {
            return std::borrow::Cow::Borrowed(path_and_query);
        }
        std::borrow::Cow::Owned(format!("{}{path_and_query}", self.prefix))
    }
}

/// What an agent offers, from its DISCOVER and `GET /a2a/capabilities` answers.
#[derive(Debug, Clone)]
pub struct AgentInfo {
    /// The agent's DID (its `A2A-Sender-ID`).
    pub did: String,
    /// Its capabilities document.
    pub doc: CapabilitiesDocument,
}

impl AgentInfo {
    /// The declaration of a capability, if the agent offers it.
    pub fn capability(&self, name: &str) -> Option<&CapabilityDeclaration> {
        self.doc.capabilities.iter().find(|c| c.name == name)
    }

    /// How long an execution at this agent may stay readable: confirm window + longest run + result retention.
    pub fn execution_lifetime(&self, retention_ms: u64, fallback_ms: u64) -> Duration {
        Duration::from_millis(
            self.doc.limits.as_ref().map_or(fallback_ms, |l| l.confirm_window_ms + l.max_timeout_ms + retention_ms),
        )
    }
}

#[derive(Debug, Default)]
struct Health {
    failures: u32,
    ejected_until: Option<Instant>,
    ejections: u32,
}

/// One agent behind the gateway.
#[derive(Debug)]
pub struct Agent {
    /// Where it is.
    pub endpoint: Endpoint,
    /// Its bounded metric label (`agent0`, `agent1`, …).
    pub label: String,
    /// Its metric handles (label `agent=<label>`).
    pub metrics: crate::metrics::LabelMetrics,
    /// Whether it is in rotation for new negotiations (configured, or currently in the registry).
    listed: AtomicBool,
    /// Whether `[[agents]]` names it (changes when a reload adds or removes it, OPS-4).
    from_config: AtomicBool,
    in_flight: AtomicUsize,
    health: Mutex<Health>,
    /// Its DISCOVER answer while its cache entry is fresh, held here so that a hit reads no cache (most requests).
    info: Mutex<Option<(Arc<AgentInfo>, Instant)>>,
}

impl Agent {
    /// Requests being forwarded to it.
    pub fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::Relaxed)
    }

    /// Whether it is in rotation (not ejected) at `now`.
    pub fn healthy(&self, now: Instant) -> bool {
        let h = self.health.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        h.ejected_until.is_none_or(|t| now >= t)
    }

    /// Whether `[[agents]]` names it (else it came from the capability registry).
    pub fn from_config(&self) -> bool {
        self.from_config.load(Ordering::Relaxed)
    }

    /// Whether it takes new negotiations.
    pub fn listed(&self) -> bool {
        self.listed.load(Ordering::Relaxed)
    }

    fn ejected_until(&self) -> Option<Instant> {
        self.health.lock().unwrap_or_else(std::sync::PoisonError::into_inner).ejected_until
    }

    /// Marks a request started; the guard marks it finished.
    pub fn start(self: &Arc<Self>, metrics: &Arc<Metrics>) -> InFlight {
        self.in_flight.fetch_add(1, Ordering::Relaxed);
        metrics.in_flight_with(&self.metrics, 1);
        InFlight { agent: self.clone(), metrics: metrics.clone() }
    }
}

/// A request in flight to an agent.
pub struct InFlight {
    agent: Arc<Agent>,
    metrics: Arc<Metrics>,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.agent.in_flight.fetch_sub(1, Ordering::Relaxed);
        self.metrics.in_flight_with(&self.agent.metrics, -1);
    }
}

#[derive(Clone)]
enum Cached {
    /// The answer, and when its cache entry expires.
    Ok(Arc<AgentInfo>, Instant),
    Failed(Arc<str>),
}

struct CacheExpiry {
    ttl: Duration,
    negative: Duration,
}

impl moka::Expiry<String, Cached> for CacheExpiry {
    fn expire_after_create(&self, _key: &String, value: &Cached, _at: Instant) -> Option<Duration> {
        Some(match value {
            Cached::Ok(..) => self.ttl,
            Cached::Failed(_) => self.negative,
        })
    }
}

/// Every agent the gateway knows, and the DISCOVER cache.
pub struct Agents {
    list: RwLock<Arc<Vec<Arc<Agent>>>>,
    by_url: RwLock<HashMap<String, Arc<Agent>>>,
    max: usize,
    balancing: BalancingSection,
    cache: moka::future::Cache<String, Cached>,
    upstream: Upstream,
    metrics: Arc<Metrics>,
    next: AtomicUsize,
    fetch_timeout: Duration,
    ttl: Duration,
}

impl Agents {
    /// An empty set.
    pub fn new(
        max: usize,
        balancing: BalancingSection,
        cache: &DiscoverCacheSection,
        upstream: Upstream,
        metrics: Arc<Metrics>,
        fetch_timeout: Duration,
    ) -> Self {
        Agents {
            list: RwLock::new(Arc::new(Vec::new())),
            by_url: RwLock::new(HashMap::new()),
            max,
            balancing,
            // LRU, not moka's default TinyLFU: TinyLFU refuses a new key while the cache is full of keys seen as
            // often, so past the bound a new agent's answer would not be kept and every DISCOVER would go upstream.
            cache: moka::future::Cache::builder()
                .max_capacity(cache.max_entries)
                .eviction_policy(moka::policy::EvictionPolicy::lru())
                .expire_after(CacheExpiry {
                    ttl: Duration::from_millis(cache.ttl_ms),
                    negative: Duration::from_millis(cache.negative_ttl_ms),
                })
                .build(),
            upstream,
            metrics,
            next: AtomicUsize::new(0),
            fetch_timeout,
            ttl: Duration::from_millis(cache.ttl_ms),
        }
    }

    /// The agents in rotation for new negotiations, in the order they were added.
    pub fn listed(&self) -> Arc<Vec<Arc<Agent>>> {
        self.list.read().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }

    /// The agent at this endpoint URL, if known.
    pub fn get(&self, url: &str) -> Option<Arc<Agent>> {
        self.by_url.read().unwrap_or_else(std::sync::PoisonError::into_inner).get(url).cloned()
    }

    /// Adds an agent (or finds it); `listed` puts it in rotation. `None` when `max` agents are known already.
    pub fn add(&self, endpoint: Endpoint, from_config: bool, listed: bool) -> Option<Arc<Agent>> {
        let mut map = self.by_url.write().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(a) = map.get(&endpoint.url) {
            let a = a.clone();
            drop(map);
            if listed && !a.listed.swap(true, Ordering::Relaxed) {
                self.relist();
            }
            return Some(a);
        }
        if map.len() >= self.max {
            tracing::warn!(endpoint = %endpoint.url, max = self.max, "too many agents; raise limits.max_agents");
            return None;
        }
        let label = format!("agent{}", map.len());
        let agent = Arc::new(Agent {
            metrics: crate::metrics::LabelMetrics::new(&label),
            info: Mutex::new(None),
            label,
            endpoint,
            listed: AtomicBool::new(listed),
            from_config: AtomicBool::new(from_config),
            in_flight: AtomicUsize::new(0),
            health: Mutex::new(Health::default()),
        });
        map.insert(agent.endpoint.url.clone(), agent.clone());
        drop(map);
        self.metrics.healthy(&agent.label);
        tracing::info!(agent = %agent.label, endpoint = %agent.endpoint.url, from_config, "agent added");
        self.relist();
        Some(agent)
    }

    /// Takes out of rotation the registry agents whose URL is not in `current` (their registration lapsed).
    pub fn retain_registered(&self, current: &std::collections::HashSet<String>) {
        let map = self.by_url.read().unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut changed = false;
        for a in map.values() {
            if !a.from_config.load(Ordering::Relaxed)
                && !current.contains(&a.endpoint.url)
                && a.listed.swap(false, Ordering::Relaxed)
            {
                tracing::info!(agent = %a.label, endpoint = %a.endpoint.url, "agent left the registry");
                changed = true;
            }
        }
        drop(map);
        if changed {
            self.relist();
        }
    }

    /// Makes `endpoints` the configured agents (a reloaded `[[agents]]`, OPS-4): new ones are added in rotation,
    /// configured ones no longer named leave it (their routes still lead to them, so that work in flight there
    /// finishes). Refused, with nothing changed, when the new agents would exceed `limits.max_agents`.
    pub fn configure(&self, endpoints: Vec<Endpoint>) -> Result<(), String> {
        let wanted: std::collections::HashSet<String> = endpoints.iter().map(|e| e.url.clone()).collect();
        {
            let map = self.by_url.read().unwrap_or_else(std::sync::PoisonError::into_inner);
            let new = wanted.iter().filter(|u| !map.contains_key(*u)).count();
            if map.len() + new > self.max {
                return Err(format!(
                    "{} agents known and {new} new ones: more than limits.max_agents ({})",
                    map.len(),
                    self.max
                ));
            }
            for a in map.values() {
                if a.from_config.load(Ordering::Relaxed) && !wanted.contains(&a.endpoint.url) {
                    a.from_config.store(false, Ordering::Relaxed);
                    a.listed.store(false, Ordering::Relaxed);
                    tracing::info!(agent = %a.label, endpoint = %a.endpoint.url, "agent no longer configured");
                }
            }
        }
        for ep in endpoints {
            if let Some(a) = self.add(ep, true, true) {
                a.from_config.store(true, Ordering::Relaxed);
            }
        }
        self.relist();
        Ok(())
    }

    fn relist(&self) {
        let map = self.by_url.read().unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut list: Vec<Arc<Agent>> = map.values().filter(|a| a.listed()).cloned().collect();
        drop(map);
        list.sort_by_key(|a| a.label[5..].parse::<usize>().unwrap_or(usize::MAX));
        *self.list.write().unwrap_or_else(std::sync::PoisonError::into_inner) = Arc::new(list);
    }

    /// Records a successful exchange: the agent's failure count is reset.
    pub fn success(&self, agent: &Agent) {
        let mut h = agent.health.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        h.failures = 0;
        if h.ejected_until.take().is_some() {
            drop(h);
            self.metrics.healthy(&agent.label);
            tracing::info!(agent = %agent.label, endpoint = %agent.endpoint.url, "agent answers again; back in rotation");
        }
    }

    /// Records a failed exchange (connection refused or reset, timeout, 5xx); ejects the agent after
    /// `consecutive_failures`, for `ejection_ms` doubled at each further ejection.
    pub fn failure(&self, agent: &Agent, why: &str) {
        let now = Instant::now();
        let mut h = agent.health.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        h.failures += 1;
        let due = h.failures >= self.balancing.consecutive_failures && h.ejected_until.is_none_or(|t| now >= t);
        if !due {
            return;
        }
        let factor = 1u64 << h.ejections.min(16);
        let ms = self.balancing.ejection_ms.saturating_mul(factor).min(self.balancing.max_ejection_ms);
        h.ejected_until = Some(now + Duration::from_millis(ms));
        h.ejections += 1;
        h.failures = 0;
        drop(h);
        self.metrics.ejected(&agent.label);
        tracing::warn!(agent = %agent.label, endpoint = %agent.endpoint.url, ejection_ms = ms, reason = why,
            "agent ejected (outlier detection): no new negotiations go to it until the ejection ends");
    }

    /// The agent's DISCOVER answer, from the cache or fetched (`OPTIONS /a2a` then `GET /a2a/capabilities`).
    pub async fn info(&self, agent: &Agent) -> Result<Arc<AgentInfo>, Arc<str>> {
        // A hit (every request but the first in five minutes) reads the cache; the miss, with its HTTP exchanges, is
        // boxed so that its state does not weigh on every request's future.
        {
            let held = agent.info.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            if let Some((i, until)) = held.as_ref()
                && Instant::now() < *until
            {
                self.metrics.cache(true);
                return Ok(i.clone());
            }
        }
        let cached = match self.cache.get(&agent.endpoint.url).await {
            Some(hit) => {
                self.metrics.cache(true);
                hit
            }
            None => Box::pin(self.info_miss(agent)).await,
        };
        match cached {
            Cached::Ok(i, until) => {
                *agent.info.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some((i.clone(), until));
                Ok(i)
            }
            Cached::Failed(e) => Err(e),
        }
    }

    /// Fetches an agent's DISCOVER answer into the cache (one fetch for concurrent callers).
    async fn info_miss(&self, agent: &Agent) -> Cached {
        let entry = self
            .cache
            .entry(agent.endpoint.url.clone())
            .or_insert_with(async {
                match self.fetch(&agent.endpoint).await {
                    Ok(info) => Cached::Ok(Arc::new(info), Instant::now() + self.ttl),
                    Err(e) => {
                        tracing::warn!(agent = %agent.label, endpoint = %agent.endpoint.url, error = %e,
                            "DISCOVER of the agent failed");
                        Cached::Failed(e.into())
                    }
                }
            })
            .await;
        self.metrics.cache(!entry.is_fresh());
        entry.into_value()
    }

    /// Drops an agent's cached answer (e.g. after it answered `no_matching_capability`, DISC-4).
    pub async fn forget(&self, agent: &Agent) {
        *agent.info.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = None;
        self.cache.invalidate(&agent.endpoint.url).await;
    }

    async fn fetch(&self, ep: &Endpoint) -> Result<AgentInfo, String> {
        let get = |method: Method, path: &str| -> Result<Request<Full<Bytes>>, String> {
            Request::builder()
                .method(method)
                .uri(ep.uri(path).map_err(|e| e.to_string())?)
                .header(h::A2A_VERSION, a2a_core::PROTOCOL_VERSION)
                .body(Full::new(Bytes::new()))
                .map_err(|e| e.to_string())
        };
        let (parts, _) = self
            .upstream
            .fetch(get(Method::OPTIONS, "/a2a")?, self.fetch_timeout, 64 * 1024)
            .await
            .map_err(|e| e.to_string())?;
        if parts.status.as_u16() != 204 && !parts.status.is_success() {
            return Err(format!("DISCOVER answered {}", parts.status));
        }
        let hv = |n: &str| parts.headers.get(n).and_then(|v| v.to_str().ok());
        let version = hv(h::A2A_VERSION).unwrap_or("");
        if h::parse_version(version).ok() != Some(h::Version::V0_3) {
            return Err(format!(
                "the agent speaks A2A {version:?}; this gateway forwards to {} agents only",
                a2a_core::PROTOCOL_VERSION
            ));
        }
        let did = hv(h::A2A_SENDER_ID).ok_or("DISCOVER has no A2A-Sender-ID")?.trim().to_owned();
        a2a_core::did::Did::parse(&did).map_err(|e| format!("the agent's A2A-Sender-ID {did:?}: {e}"))?;
        let names = h::parse_capabilities(hv(h::A2A_CAPABILITIES).unwrap_or("[]")).map_err(|e| e.to_string())?;
        let (parts, body) = self
            .upstream
            .fetch(get(Method::GET, "/a2a/capabilities")?, self.fetch_timeout, 4 * 1024 * 1024)
            .await
            .map_err(|e| e.to_string())?;
        if !parts.status.is_success() {
            return Err(format!("GET /a2a/capabilities answered {}", parts.status));
        }
        let mut doc: CapabilitiesDocument =
            serde_json::from_slice(&body).map_err(|e| format!("the capabilities document does not parse: {e}"))?;
        if doc.agent.id != did {
            return Err(format!("the capabilities document names {} but DISCOVER {did}", doc.agent.id));
        }
        // Only what DISCOVER announces is offered (CAP-16), each declaration checked (CAP-20).
        doc.capabilities.retain(|c| names.contains(&c.name) && c.validate().is_ok());
        Ok(AgentInfo { did, doc })
    }

    /// The agents that offer `capability` and take new negotiations, with their declarations.
    pub async fn offering(&self, capability: &str) -> Vec<(Arc<Agent>, Arc<AgentInfo>)> {
        let mut out = Vec::new();
        for a in self.listed().iter() {
            if let Ok(info) = self.info(a).await
                && info.capability(capability).is_some()
            {
                out.push((a.clone(), info));
            }
        }
        out
    }

    /// Chooses among candidates: those not ejected and, for a restricted capability, in the caller's region when
    /// one is; then the less loaded of two taken in turn (power of two choices). When every candidate is ejected,
    /// the one whose ejection ends first is tried (an ejection is a guess; a request still finds out).
    pub fn choose(
        &self,
        candidates: &[(Arc<Agent>, Arc<AgentInfo>)],
        capability: &str,
        region: Option<&str>,
        exclude: &[Arc<Agent>],
    ) -> Option<(Arc<Agent>, Arc<AgentInfo>)> {
        let now = Instant::now();
        let open: Vec<&(Arc<Agent>, Arc<AgentInfo>)> =
            candidates.iter().filter(|(a, _)| !exclude.iter().any(|x| Arc::ptr_eq(x, a))).collect();
        let in_region: Vec<&(Arc<Agent>, Arc<AgentInfo>)> = match region {
            Some(r) => open
                .iter()
                .copied()
                .filter(|(_, i)| {
                    i.capability(capability)
                        .is_none_or(|d| d.region_restriction.is_empty() || d.region_restriction.iter().any(|x| x == r))
                })
                .collect(),
            None => Vec::new(),
        };
        let pool = if in_region.is_empty() { open } else { in_region };
        let healthy: Vec<&(Arc<Agent>, Arc<AgentInfo>)> =
            pool.iter().copied().filter(|(a, _)| a.healthy(now)).collect();
        if healthy.is_empty() {
            return pool.into_iter().min_by_key(|(a, _)| a.ejected_until()).cloned();
        }
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let first = healthy[n % healthy.len()];
        let second = healthy[(n + 1) % healthy.len()];
        Some(if second.0.in_flight() < first.0.in_flight() { second.clone() } else { first.clone() })
    }
}

#[cfg(test)]
mod cache_bound_tests {
    use super::*;

    /// The DISCOVER cache filled past `discover_cache.max_entries`: it holds at most the bound, and the newest
    /// entries are kept (a burst of new keys must not leave the cache refusing every new agent's answer).
    #[tokio::test]
    async fn the_discover_cache_filled_past_its_bound_stays_within_it_and_keeps_the_newest() {
        let section = DiscoverCacheSection { max_entries: 32, ..DiscoverCacheSection::default() };
        let agents = Agents::new(
            4,
            BalancingSection::default(),
            &section,
            Upstream::new(Duration::from_secs(1), Duration::from_secs(1), 1),
            Arc::new(Metrics::new()),
            Duration::from_secs(1),
        );
        let total = 1_000;
        for i in 0..total {
            agents.cache.insert(format!("k{i}"), Cached::Failed(Arc::from(format!("e{i}")))).await;
            agents.cache.run_pending_tasks().await;
        }
        assert!(agents.cache.entry_count() <= 32, "{} entries held, bound 32", agents.cache.entry_count());
        for i in total - 4..total {
            let kept = agents.cache.get(&format!("k{i}")).await;
            assert!(matches!(kept, Some(Cached::Failed(e)) if *e == *format!("e{i}")), "the newest entry {i} is kept");
        }
    }
}
