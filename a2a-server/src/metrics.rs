//! Prometheus metrics: the golden signals of an agent. Label values are bounded: steps, error codes from the table,
//! declared capability names, statuses and fixed reasons — never a DID, a negotiation or an execution id.

use std::sync::atomic::AtomicI64;

use a2a_core::error::{ErrorCode, TABLE};
use a2a_core::wire::ExecutionStatus;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

pub use a2a_core::step::Step;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StepOutcome {
    step: &'static str,
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StepLabel {
    step: &'static str,
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
struct Quota {
    /// The limit's configuration key (a fixed set, LIM-4, LIM-5, LIM-15).
    quota: &'static str,
    /// `refused`, `replaced` (a sender's negotiation replaced its own closest to expiry) or `queued` (a request
    /// waited for a slot of its sender's share, LIM-15).
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Finished {
    capability: String,
    status: &'static str,
}

#[cfg(feature = "sessions")]
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct WebhookOutcome {
    /// The webhook's index in `[sessions.webhooks] urls` (at most 16: bounded).
    webhook: String,
    outcome: &'static str,
}

/// The metrics of one agent.
pub struct Metrics {
    registry: Registry,
    requests: Family<StepOutcome, Counter>,
    latency: Family<StepLabel, Histogram>,
    capability_latency: Family<CapabilityStep, Histogram>,
    fallbacks: Family<Reason, Counter>,
    negotiation_failures: Family<Reason, Counter>,
    signature_failures: Family<Reason, Counter>,
    finished: Family<Finished, Counter>,
    quota: Family<Quota, Counter>,
    in_flight: Gauge<i64, AtomicI64>,
    #[cfg(feature = "sessions")]
    webhooks: Family<WebhookOutcome, Gauge<i64, AtomicI64>>,
    capabilities: Vec<String>,
}

/// Maps an error code onto a bounded label value: the table's code, or `other`.
fn bounded(code: &ErrorCode) -> &'static str {
    TABLE.iter().find(|e| e.code == code.as_str()).map_or("other", |e| e.code)
}

impl Metrics {
    /// Metrics for an agent that serves these capabilities (names outside the list are reported as `other`).
    pub fn new(capabilities: Vec<String>) -> Self {
        let mut registry = Registry::with_prefix("a2a");
        let requests = Family::<StepOutcome, Counter>::default();
        registry.register("requests", "Requests by protocol step and outcome (ok or the error code)", requests.clone());
        let latency = Family::<StepLabel, Histogram>::new_with_constructor(|| {
            Histogram::new([
                0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0, 30.0,
            ])
        });
        registry.register("request_duration_seconds", "Time to answer, by protocol step", latency.clone());
        let capability_latency = Family::<CapabilityStep, Histogram>::new_with_constructor(|| {
            Histogram::new([
                0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0, 30.0,
            ])
        });
        registry.register(
            "capability_request_duration_seconds",
            "Time to answer the steps that name a capability (OPS-6), by capability (a declared name, else other) and \
             step",
            capability_latency.clone(),
        );
        let fallbacks = Family::<Reason, Counter>::default();
        registry.register("fallback_offered", "Answers carrying fallback options, by reason", fallbacks.clone());
        let negotiation_failures = Family::<Reason, Counter>::default();
        registry.register("negotiation_failures", "NEGOTIATE refusals by reason", negotiation_failures.clone());
        let signature_failures = Family::<Reason, Counter>::default();
        registry.register("signature_failures", "Refused signatures by reason", signature_failures.clone());
        let finished = Family::<Finished, Counter>::default();
        registry.register("executions_finished", "Executions reaching a terminal state", finished.clone());
        let quota = Family::<Quota, Counter>::default();
        registry.register(
            "quota",
            "Requests held to a sender's share of the agent's state or of its requests in progress (LIM-4, LIM-5, \
             LIM-15), by limit and outcome: refused (429 quota_exceeded), replaced (a negotiation replaced the \
             sender's own closest to expiry) or queued (a request waited in its sender's queue)",
            quota.clone(),
        );
        let in_flight = Gauge::<i64, AtomicI64>::default();
        registry.register("executions_in_flight", "Executions accepted or running in this process", in_flight.clone());
        #[cfg(feature = "sessions")]
        let webhooks = {
            let webhooks = Family::<WebhookOutcome, Gauge<i64, AtomicI64>>::default();
            registry.register(
            "session_webhook_events",
            "Session events by webhook (its index in [sessions.webhooks] urls) and outcome since the start (ANN-5): \
             delivered, failed (given up), retried (tries after a failure), dropped (queue full); queued: waiting now",
            webhooks.clone(),
        );
            webhooks
        };
        // Every family is described from the start, with the zero series an operator's dashboards and alert rules
        // name (`deploy/prometheus/alerts.yaml`): a family without a series is not exposed at all.
        for step in Step::AGENT {
            let _ = requests.get_or_create(&StepOutcome { step: step.as_str(), outcome: "ok" });
            let _ = latency.get_or_create(&StepLabel { step: step.as_str() });
        }
        for capability in &capabilities {
            for status in [ExecutionStatus::Succeeded, ExecutionStatus::Failed] {
                let _ = finished.get_or_create(&Finished { capability: capability.clone(), status: status.as_str() });
            }
        }
        for q in [
            "max_negotiations",
            "max_received_per_sender",
            "max_nonces",
            "max_nonces_per_sender",
            "max_in_progress_per_sender",
            "max_queued_per_sender",
        ] {
            let _ = quota.get_or_create(&Quota { quota: q, outcome: "refused" });
        }
        let _ = signature_failures.get_or_create(&Reason { reason: "signature_invalid" });
        let _ = negotiation_failures.get_or_create(&Reason { reason: "schema_rule_violation" });
        Metrics {
            registry,
            requests,
            latency,
            capability_latency,
            fallbacks,
            negotiation_failures,
            signature_failures,
            finished,
            quota,
            in_flight,
            #[cfg(feature = "sessions")]
            webhooks,
            capabilities,
        }
    }

    /// Counts one answered request.
    pub fn request(&self, step: Step, outcome: Result<(), &ErrorCode>, seconds: f64) {
        let outcome = match outcome {
            Ok(()) => "ok",
            Err(code) => bounded(code),
        };
        self.requests.get_or_create(&StepOutcome { step: step.as_str(), outcome }).inc();
        self.latency.get_or_create(&StepLabel { step: step.as_str() }).observe(seconds);
    }

    /// Observes the time to answer a step that named `capability` (a name outside the declared ones is `other`).
    pub fn capability_request(&self, capability: &str, step: Step, seconds: f64) {
        let capability =
            if self.capabilities.iter().any(|c| c == capability) { capability.to_owned() } else { "other".to_owned() };
        self.capability_latency.get_or_create(&CapabilityStep { capability, step: step.as_str() }).observe(seconds);
    }

    /// Counts an answer that offered fallback options.
    pub fn fallback_offered(&self, reason: &'static str) {
        self.fallbacks.get_or_create(&Reason { reason }).inc();
    }

    /// Counts a refused NEGOTIATE.
    pub fn negotiation_failed(&self, reason: &'static str) {
        self.negotiation_failures.get_or_create(&Reason { reason }).inc();
    }

    /// Counts an insert held to a sender's share: `quota` is the limit's configuration key, `replaced` whether a
    /// negotiation replaced the sender's own (otherwise the insert was refused).
    pub fn quota(&self, quota: &'static str, replaced: bool) {
        let outcome = if replaced { "replaced" } else { "refused" };
        self.quota.get_or_create(&Quota { quota, outcome }).inc();
    }

    /// Counts a request that waited in its sender's queue for a slot of its share (LIM-15).
    pub fn quota_queued(&self, quota: &'static str) {
        self.quota.get_or_create(&Quota { quota, outcome: "queued" }).inc();
    }

    /// Counts a refused signature.
    pub fn signature_failed(&self, code: &ErrorCode) {
        self.signature_failures.get_or_create(&Reason { reason: bounded(code) }).inc();
    }

    /// Counts an execution reaching a terminal state.
    pub fn execution_finished(&self, capability: &str, status: ExecutionStatus) {
        let capability =
            if self.capabilities.iter().any(|c| c == capability) { capability.to_owned() } else { "other".to_owned() };
        self.finished.get_or_create(&Finished { capability, status: status.as_str() }).inc();
    }

    /// Sets the webhook counters of the sessions (read from them when the metrics are served).
    #[cfg(feature = "sessions")]
    pub fn set_webhook_stats(&self, stats: &[crate::sessions::WebhookStats]) {
        for (i, s) in stats.iter().enumerate() {
            let values = [
                ("delivered", s.delivered),
                ("failed", s.failed),
                ("retried", s.retried),
                ("dropped", s.dropped),
                ("queued", s.queued as u64),
            ];
            for (outcome, v) in values {
                let label = WebhookOutcome { webhook: i.to_string(), outcome };
                self.webhooks.get_or_create(&label).set(i64::try_from(v).unwrap_or(i64::MAX));
            }
        }
    }

    /// Adds to the executions in flight.
    pub fn in_flight(&self, delta: i64) {
        self.in_flight.inc_by(delta);
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
