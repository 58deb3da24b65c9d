//! Prometheus metrics of the gateway (`GET /metrics`): the golden signals per step and per agent (traffic, errors,
//! latency, saturation), fallback answers, negotiation failures, edge rejections (signatures, clock skew, replays,
//! limits, probes) and the DISCOVER cache hit rate.
//!
//! Label values are bounded: steps are a fixed set, outcomes are codes of the error table (or `ok`, `other`), agents
//! are labelled by the index the gateway gave them (`agent0`, `agent1`, … at most `limits.max_agents`; the mapping to
//! URLs and DIDs is served at `GET /gateway/agents`) — never a sender, a negotiation or an execution id.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

use a2a_core::error::TABLE;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

pub use a2a_core::step::Step;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Labels {
    step: &'static str,
    agent: String,
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StepAgent {
    step: &'static str,
    agent: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CapabilityStep {
    capability: String,
    step: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Reason {
    reason: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct AgentLabel {
    agent: String,
}

/// The metrics of one `agent` label value, resolved once: the request path counts with them directly instead of
/// looking the label set up in its family (hashing and a lock) on every request. Created empty; each handle is
/// resolved the first time it is used, so that the exposition shows only series that happened.
#[derive(Debug)]
pub struct LabelMetrics {
    label: String,
    ok: [OnceLock<Counter>; Step::COUNT],
    latency: [OnceLock<Histogram>; Step::COUNT],
    in_flight: OnceLock<Gauge<i64, AtomicI64>>,
}

impl LabelMetrics {
    /// The handles of `label` (none resolved yet).
    pub fn new(label: &str) -> Self {
        LabelMetrics {
            label: label.to_owned(),
            ok: std::array::from_fn(|_| OnceLock::new()),
            latency: std::array::from_fn(|_| OnceLock::new()),
            in_flight: OnceLock::new(),
        }
    }

    /// The label value.
    pub fn label(&self) -> &str {
        &self.label
    }
}

/// Maps an error code onto a bounded label value: the table's code, or `other`.
pub fn bounded(code: &str) -> &'static str {
    TABLE.iter().find(|e| e.code == code).map_or("other", |e| e.code)
}

/// The gateway's metrics.
pub struct Metrics {
    registry: Registry,
    requests: Family<Labels, Counter>,
    latency: Family<StepAgent, Histogram>,
    capability_latency: Family<CapabilityStep, Histogram>,
    in_flight: Family<AgentLabel, Gauge<i64, AtomicI64>>,
    rejections: Family<Reason, Counter>,
    signature_rejections: Family<Reason, Counter>,
    clock_skew: Counter,
    probes: Counter,
    fallbacks: Family<Reason, Counter>,
    negotiation_failures: Family<Reason, Counter>,
    ejections: Family<AgentLabel, Counter>,
    healthy: Family<AgentLabel, Gauge<i64, AtomicI64>>,
    cache_hits: Counter,
    cache_misses: Counter,
    cache_ratio: Gauge<f64, AtomicU64>,
    audit_dropped: Gauge<i64, AtomicI64>,
    upstream_errors: Family<Reason, Counter>,
    /// Requests the agent-connection pool sent again ([`crate::upstream::Upstream::counted`]).
    pub(crate) upstream_replays: Counter,
    /// The handles of requests answered at the edge (`agent="none"`).
    none: LabelMetrics,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// Empty metrics, registered under the prefix `a2a_gateway`.
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("a2a_gateway");
        let requests = Family::<Labels, Counter>::default();
        registry.register(
            "requests",
            "Requests by step, agent (`none` when answered at the edge) and outcome (ok or the error code)",
            requests.clone(),
        );
        let latency = Family::<StepAgent, Histogram>::new_with_constructor(|| {
            Histogram::new([
                0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0, 30.0,
            ])
        });
        registry.register("request_duration_seconds", "Time to answer, by step and agent", latency.clone());
        let capability_latency = Family::<CapabilityStep, Histogram>::new_with_constructor(|| {
            Histogram::new([
                0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0, 30.0,
            ])
        });
        registry.register(
            "capability_request_duration_seconds",
            "Time to answer the forwarded steps that name a capability (OPS-6), by capability (one an agent declared) \
             and step",
            capability_latency.clone(),
        );
        let in_flight = Family::<AgentLabel, Gauge<i64, AtomicI64>>::default();
        registry.register("agent_in_flight", "Requests being forwarded to each agent (saturation)", in_flight.clone());
        let rejections = Family::<Reason, Counter>::default();
        registry.register(
            "edge_rejections",
            "Requests refused at the edge (never forwarded), by error code",
            rejections.clone(),
        );
        let signature_rejections = Family::<Reason, Counter>::default();
        registry.register(
            "signature_rejections",
            "Signatures refused at the edge, by error code",
            signature_rejections.clone(),
        );
        let clock_skew = Counter::default();
        registry.register(
            "clock_skew_rejections",
            "Requests refused because their time is too far from the gateway's clock (GW-4)",
            clock_skew.clone(),
        );
        let probes = Counter::default();
        registry.register(
            "probes",
            "Requests for unknown /a2a* paths, answered without reaching an agent",
            probes.clone(),
        );
        let fallbacks = Family::<Reason, Counter>::default();
        registry.register("fallback_answers", "Answers carrying fallback options, by reason", fallbacks.clone());
        let negotiation_failures = Family::<Reason, Counter>::default();
        registry.register("negotiation_failures", "NEGOTIATE refusals, by error code", negotiation_failures.clone());
        let ejections = Family::<AgentLabel, Counter>::default();
        registry.register("agent_ejections", "Times an agent was taken out of rotation", ejections.clone());
        let healthy = Family::<AgentLabel, Gauge<i64, AtomicI64>>::default();
        registry.register("agent_healthy", "1 when the agent is in rotation, 0 when ejected", healthy.clone());
        let cache_hits = Counter::default();
        registry.register("discover_cache_hits", "Agent DISCOVER answers served from the cache", cache_hits.clone());
        let cache_misses = Counter::default();
        registry.register(
            "discover_cache_misses",
            "Agent DISCOVER answers fetched from the agent",
            cache_misses.clone(),
        );
        let cache_ratio = Gauge::<f64, AtomicU64>::default();
        registry.register(
            "discover_cache_hit_ratio",
            "hits / (hits + misses) of the DISCOVER cache",
            cache_ratio.clone(),
        );
        let audit_dropped = Gauge::<i64, AtomicI64>::default();
        registry.register(
            "audit_dropped",
            "Audit records dropped since the start (the writer fell behind or its backend was down)",
            audit_dropped.clone(),
        );
        let upstream_errors = Family::<Reason, Counter>::default();
        registry.register("upstream_errors", "Failures to reach an agent, by kind", upstream_errors.clone());
        let upstream_replays = Counter::default();
        registry.register(
            "upstream_replays",
            "Requests sent again on a new connection because the kept-alive one they went on ended unanswered",
            upstream_replays.clone(),
        );
        // Every family is described from the start, with the zero series an operator's dashboards and alert rules
        // name (`deploy/prometheus/alerts.yaml`): a family without a series is not exposed at all. `agent="none"`
        // are the requests answered at the edge; an agent's series start when it is configured (`Agents`).
        for step in Step::ALL {
            let _ = requests.get_or_create(&Labels { step: step.as_str(), agent: "none".to_owned(), outcome: "ok" });
            let _ = latency.get_or_create(&StepAgent { step: step.as_str(), agent: "none".to_owned() });
        }
        Metrics {
            registry,
            requests,
            latency,
            capability_latency,
            in_flight,
            rejections,
            signature_rejections,
            clock_skew,
            probes,
            fallbacks,
            negotiation_failures,
            ejections,
            healthy,
            cache_hits,
            cache_misses,
            cache_ratio,
            audit_dropped,
            upstream_errors,
            upstream_replays,
            none: LabelMetrics::new("none"),
        }
    }

    /// The handles of requests answered at the edge (`agent="none"`).
    pub fn none(&self) -> &LabelMetrics {
        &self.none
    }

    /// Counts one answered request with the handles of its agent label ([`Metrics::request`] without the lookups for
    /// the usual outcome).
    pub fn request_with(&self, handles: &LabelMetrics, step: Step, outcome: &'static str, seconds: f64) {
        let i = step as usize;
        if outcome == "ok" {
            handles.ok[i]
                .get_or_init(|| {
                    self.requests
                        .get_or_create(&Labels { step: step.as_str(), agent: handles.label.clone(), outcome })
                        .clone()
                })
                .inc();
        } else {
            self.requests.get_or_create(&Labels { step: step.as_str(), agent: handles.label.clone(), outcome }).inc();
        }
        handles.latency[i]
            .get_or_init(|| {
                self.latency.get_or_create(&StepAgent { step: step.as_str(), agent: handles.label.clone() }).clone()
            })
            .observe(seconds);
    }

    /// Adds to the requests in flight of the agent with these handles.
    pub fn in_flight_with(&self, handles: &LabelMetrics, delta: i64) {
        handles
            .in_flight
            .get_or_init(|| self.in_flight.get_or_create(&AgentLabel { agent: handles.label.clone() }).clone())
            .inc_by(delta);
    }

    /// Observes the time to answer a forwarded step that named `capability`. Call it only for requests forwarded to
    /// an agent: they go to agents that declare the capability, so the label values are bounded by what the agents
    /// declare.
    pub fn capability_request(&self, capability: &str, step: Step, seconds: f64) {
        let label = CapabilityStep { capability: capability.to_owned(), step: step.as_str() };
        self.capability_latency.get_or_create(&label).observe(seconds);
    }

    /// Counts one answered request.
    pub fn request(&self, step: Step, agent: &str, outcome: &'static str, seconds: f64) {
        self.requests.get_or_create(&Labels { step: step.as_str(), agent: agent.to_owned(), outcome }).inc();
        self.latency.get_or_create(&StepAgent { step: step.as_str(), agent: agent.to_owned() }).observe(seconds);
    }

    /// Adds to an agent's requests in flight.
    pub fn in_flight(&self, agent: &str, delta: i64) {
        self.in_flight.get_or_create(&AgentLabel { agent: agent.to_owned() }).inc_by(delta);
    }

    /// Counts a request refused at the edge.
    pub fn rejected(&self, code: &str) {
        let reason = bounded(code);
        self.rejections.get_or_create(&Reason { reason }).inc();
        if reason == "clock_skew" {
            self.clock_skew.inc();
        }
    }

    /// Counts a refused signature.
    pub fn signature_rejected(&self, code: &str) {
        self.signature_rejections.get_or_create(&Reason { reason: bounded(code) }).inc();
    }

    /// Counts a probe of an unknown path.
    pub fn probe(&self) {
        self.probes.inc();
    }

    /// Counts an answer with fallback options.
    pub fn fallback(&self, reason: &'static str) {
        self.fallbacks.get_or_create(&Reason { reason }).inc();
    }

    /// Counts a refused NEGOTIATE.
    pub fn negotiation_failed(&self, code: &str) {
        self.negotiation_failures.get_or_create(&Reason { reason: bounded(code) }).inc();
    }

    /// Counts an ejection and updates the health gauge.
    pub fn ejected(&self, agent: &str) {
        self.ejections.get_or_create(&AgentLabel { agent: agent.to_owned() }).inc();
        self.healthy.get_or_create(&AgentLabel { agent: agent.to_owned() }).set(0);
    }

    /// Marks an agent in rotation.
    pub fn healthy(&self, agent: &str) {
        self.healthy.get_or_create(&AgentLabel { agent: agent.to_owned() }).set(1);
    }

    /// Counts a DISCOVER cache access.
    pub fn cache(&self, hit: bool) {
        if hit {
            self.cache_hits.inc();
        } else {
            self.cache_misses.inc();
        }
        let (h, m) = (self.cache_hits.get() as f64, self.cache_misses.get() as f64);
        self.cache_ratio.set(if h + m > 0.0 { h / (h + m) } else { 0.0 });
    }

    /// The DISCOVER cache's hits and misses so far.
    pub fn cache_counts(&self) -> (u64, u64) {
        (self.cache_hits.get(), self.cache_misses.get())
    }

    /// Sets the number of audit records dropped so far (read from the audit log when metrics are served).
    pub fn set_audit_dropped(&self, n: u64) {
        self.audit_dropped.set(i64::try_from(n).unwrap_or(i64::MAX));
    }

    /// Counts a failure to reach an agent (`connect`, `timeout`, `protocol`).
    pub fn upstream_error(&self, reason: &'static str) {
        self.upstream_errors.get_or_create(&Reason { reason }).inc();
    }

    /// The Prometheus text exposition.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        if prometheus_client::encoding::text::encode(&mut out, &self.registry).is_err() {
            out.clear();
        }
        out
    }
}

/// Reads a counter's value from a Prometheus text exposition: the sum of every sample of `name` whose labels
/// contain all of `labels` (`key="value"` pairs). For tests and tools.
pub fn sample_sum(text: &str, name: &str, labels: &[(&str, &str)]) -> f64 {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let (series, value) = l.rsplit_once(' ')?;
            let (metric, rest) = series.split_once('{').unwrap_or((series, ""));
            if metric != name {
                return None;
            }
            if !labels.iter().all(|(k, v)| rest.contains(&format!("{k}=\"{v}\""))) {
                return None;
            }
            value.parse::<f64>().ok()
        })
        .sum()
}

/// A process-unique counter used to label gateway instances in audit records.
pub(crate) fn instance_id() -> String {
    static N: AtomicU64 = AtomicU64::new(0);
    let mut b = [0u8; 4];
    let _ = getrandom::fill(&mut b);
    format!(
        "{}-{:02x}{:02x}{:02x}{:02x}-{}",
        std::process::id(),
        b[0],
        b[1],
        b[2],
        b[3],
        N.fetch_add(1, Ordering::Relaxed)
    )
}
