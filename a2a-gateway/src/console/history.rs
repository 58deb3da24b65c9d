//! The console's golden metrics: a small ring of samples of the gateway's own metrics (its `/metrics` exposition,
//! read every `admin.console_sample_ms`), and the windows between them — request rate, error rate by code, latency
//! quantiles, signature and clock-skew rejections, fallback answers, per agent and per capability. No Prometheus is
//! needed to look; the numbers are those `/metrics` serves.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Mutex;

use serde_json::{Map, Value, json};

/// Cumulative histogram buckets: upper bound (seconds, `f64::INFINITY` last) → count.
type Buckets = BTreeMap<OrderedF64, f64>;

/// An `f64` ordered by `total_cmp` (bucket bounds).
#[derive(Debug, Clone, Copy, PartialEq)]
struct OrderedF64(f64);
impl Eq for OrderedF64 {}
impl PartialOrd for OrderedF64 {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for OrderedF64 {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0.total_cmp(&other.0)
    }
}

/// One reading of the metrics, cumulative since the start.
#[derive(Debug, Clone, Default)]
pub(crate) struct Sample {
    /// When it was read (ms since the epoch).
    t_ms: u64,
    /// `a2a_gateway_requests_total` by (agent, outcome), over every step.
    requests: BTreeMap<(String, String), f64>,
    /// `a2a_gateway_request_duration_seconds` buckets by agent, over every step.
    agent_latency: BTreeMap<String, Buckets>,
    /// `a2a_gateway_capability_request_duration_seconds` buckets by capability, over every step.
    capability_latency: BTreeMap<String, Buckets>,
    /// `a2a_gateway_signature_rejections_total`, by code.
    signature_rejections: BTreeMap<String, f64>,
    /// `a2a_gateway_clock_skew_rejections_total`.
    clock_skew_rejections: f64,
    /// `a2a_gateway_fallback_answers_total`, by reason.
    fallback_answers: BTreeMap<String, f64>,
}

/// The labels of a sample line, `key="value"` pairs with `\\`, `\"` and `\n` escapes.
fn labels(s: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut rest = s;
    while let Some((key, after)) = rest.split_once("=\"") {
        let mut value = String::new();
        let mut chars = after.char_indices();
        let mut end = after.len();
        while let Some((i, c)) = chars.next() {
            match c {
                '\\' => match chars.next() {
                    Some((_, 'n')) => value.push('\n'),
                    Some((_, c)) => value.push(c),
                    None => {}
                },
                '"' => {
                    end = i + 1;
                    break;
                }
                c => value.push(c),
            }
        }
        out.insert(key.trim_start_matches(',').trim().to_owned(), value);
        rest = &after[end..];
    }
    out
}

impl Sample {
    /// Reads a sample from the Prometheus text exposition (what `/metrics` serves).
    pub(crate) fn parse(text: &str, t_ms: u64) -> Sample {
        let mut s = Sample { t_ms, ..Sample::default() };
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            let Some((series, value)) = line.rsplit_once(' ') else { continue };
            let Ok(value) = value.parse::<f64>() else { continue };
            let (name, rest) = series.split_once('{').unwrap_or((series, ""));
            let l = labels(rest.trim_end_matches('}'));
            let get = |k: &str| l.get(k).cloned().unwrap_or_default();
            let le =
                || l.get("le").map(|v| if v == "+Inf" { f64::INFINITY } else { v.parse().unwrap_or(f64::INFINITY) });
            match name {
                "a2a_gateway_requests_total" => {
                    *s.requests.entry((get("agent"), get("outcome"))).or_default() += value;
                }
                "a2a_gateway_request_duration_seconds_bucket" => {
                    if let Some(le) = le() {
                        *s.agent_latency.entry(get("agent")).or_default().entry(OrderedF64(le)).or_default() += value;
                    }
                }
                "a2a_gateway_capability_request_duration_seconds_bucket" => {
                    if let Some(le) = le() {
                        *s.capability_latency
                            .entry(get("capability"))
                            .or_default()
                            .entry(OrderedF64(le))
                            .or_default() += value;
                    }
                }
                "a2a_gateway_signature_rejections_total" => {
                    *s.signature_rejections.entry(get("reason")).or_default() += value;
                }
                "a2a_gateway_clock_skew_rejections_total" => s.clock_skew_rejections += value,
                "a2a_gateway_fallback_answers_total" => {
                    *s.fallback_answers.entry(get("reason")).or_default() += value;
                }
                _ => {}
            }
        }
        s
    }

    fn total_requests(&self) -> f64 {
        self.requests.values().sum()
    }
}

/// `q`-quantile (seconds) of the observations counted by cumulative `buckets`, interpolated linearly inside the
/// bucket it falls in (as Prometheus' `histogram_quantile`); `None` without observations. An observation past the
/// last finite bound is reported at that bound.
fn quantile(q: f64, buckets: &Buckets) -> Option<f64> {
    let total = buckets.values().copied().fold(0.0, f64::max);
    if total <= 0.0 {
        return None;
    }
    let rank = q * total;
    let (mut lower, mut below) = (0.0, 0.0);
    for (le, count) in buckets {
        if *count >= rank {
            if le.0.is_infinite() {
                return Some(lower);
            }
            let inside = count - below;
            let frac = if inside > 0.0 { (rank - below) / inside } else { 1.0 };
            return Some(lower + (le.0 - lower) * frac);
        }
        lower = le.0;
        below = *count;
    }
    Some(lower)
}

fn delta_buckets(a: Option<&Buckets>, b: &Buckets) -> Buckets {
    b.iter().map(|(k, v)| (*k, (v - a.and_then(|a| a.get(k)).copied().unwrap_or(0.0)).max(0.0))).collect()
}

fn sum_buckets<'a>(all: impl Iterator<Item = &'a Buckets>) -> Buckets {
    let mut out = Buckets::new();
    for b in all {
        for (k, v) in b {
            *out.entry(*k).or_default() += v;
        }
    }
    out
}

fn ms(q: Option<f64>) -> Value {
    q.map_or(Value::Null, |s| json!((s * 1e6).round() / 1e3))
}

fn quantiles(b: &Buckets) -> (Value, Value, Value) {
    (ms(quantile(0.5, b)), ms(quantile(0.95, b)), ms(quantile(0.99, b)))
}

fn sum_delta(a: &BTreeMap<String, f64>, b: &BTreeMap<String, f64>) -> f64 {
    b.iter().map(|(k, v)| (v - a.get(k).copied().unwrap_or(0.0)).max(0.0)).sum()
}

/// The window from sample `a` to sample `b`: rates per second, quantiles in milliseconds.
fn window(a: &Sample, b: &Sample) -> Value {
    let secs = (b.t_ms.saturating_sub(a.t_ms) as f64 / 1000.0).max(0.001);
    let mut errors: BTreeMap<String, f64> = BTreeMap::new();
    let mut total = 0.0;
    let mut agents: BTreeMap<String, (f64, f64)> = BTreeMap::new();
    for ((agent, outcome), v) in &b.requests {
        let d = (v - a.requests.get(&(agent.clone(), outcome.clone())).copied().unwrap_or(0.0)).max(0.0);
        total += d;
        let e = agents.entry(agent.clone()).or_default();
        e.0 += d;
        if outcome != "ok" {
            e.1 += d;
            if d > 0.0 {
                *errors.entry(outcome.clone()).or_default() += d;
            }
        }
    }
    let error_total: f64 = errors.values().sum();
    let all = delta_buckets(Some(&sum_buckets(a.agent_latency.values())), &sum_buckets(b.agent_latency.values()));
    let (p50, p95, p99) = quantiles(&all);
    let mut per_agent = Map::new();
    for (agent, (n, e)) in &agents {
        let d = b.agent_latency.get(agent).map(|bb| delta_buckets(a.agent_latency.get(agent), bb)).unwrap_or_default();
        let (p50, p95, p99) = quantiles(&d);
        per_agent.insert(
            agent.clone(),
            json!({"requests": n, "rate": n / secs, "errors": e, "error_rate": e / secs, "p50": p50, "p95": p95, "p99": p99}),
        );
    }
    let mut per_capability = Map::new();
    for (cap, bb) in &b.capability_latency {
        let d = delta_buckets(a.capability_latency.get(cap), bb);
        let n = d.values().copied().fold(0.0, f64::max);
        let (p50, p95, p99) = quantiles(&d);
        per_capability
            .insert(cap.clone(), json!({"requests": n, "rate": n / secs, "p50": p50, "p95": p95, "p99": p99}));
    }
    json!({
        "t": b.t_ms,
        "seconds": secs,
        "requests": total,
        "rate": total / secs,
        "error_rate": error_total / secs,
        "errors": errors,
        "p50": p50, "p95": p95, "p99": p99,
        "signature_rejections": sum_delta(&a.signature_rejections, &b.signature_rejections),
        "clock_skew_rejections": (b.clock_skew_rejections - a.clock_skew_rejections).max(0.0),
        "fallback_answers": sum_delta(&a.fallback_answers, &b.fallback_answers),
        "agents": per_agent,
        "capabilities": per_capability,
    })
}

/// The samples of the last minutes, at most a fixed number.
pub struct MetricHistory {
    samples: Mutex<VecDeque<Sample>>,
    max: usize,
}

impl MetricHistory {
    /// Keeps at most `max` samples (at least 2).
    pub fn new(max: usize) -> Self {
        MetricHistory { samples: Mutex::new(VecDeque::new()), max: max.max(2) }
    }

    /// Records a sample of `exposition` (the `/metrics` text) taken now.
    pub fn record(&self, exposition: &str) {
        let s = Sample::parse(exposition, a2a_runtime::store::now_ms());
        let mut g = self.samples.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if g.len() >= self.max {
            g.pop_front();
        }
        g.push_back(s);
    }

    /// How many samples are held.
    pub fn len(&self) -> usize {
        self.samples.lock().unwrap_or_else(std::sync::PoisonError::into_inner).len()
    }

    /// Whether no sample is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// What the console draws: the totals of `exposition` (read now: the same numbers `/metrics` serves at this
    /// moment) and the windows between the samples held, the last one ending now. `agents` maps agent labels to
    /// their URLs.
    pub fn report(&self, exposition: &str, agents: Map<String, Value>) -> Value {
        let now = Sample::parse(exposition, a2a_runtime::store::now_ms());
        let held: Vec<Sample> =
            self.samples.lock().unwrap_or_else(std::sync::PoisonError::into_inner).iter().cloned().collect();
        let mut windows: Vec<Value> = held.windows(2).map(|w| window(&w[0], &w[1])).collect();
        if let Some(last) = held.last()
            && now.t_ms >= last.t_ms + 100
        {
            windows.push(window(last, &now));
        }
        let mut by_agent = Map::new();
        for ((agent, outcome), v) in &now.requests {
            let e = by_agent.entry(agent.clone()).or_insert_with(|| json!({"requests": 0.0, "errors": 0.0}));
            e["requests"] = json!(e["requests"].as_f64().unwrap_or(0.0) + v);
            if outcome != "ok" {
                e["errors"] = json!(e["errors"].as_f64().unwrap_or(0.0) + v);
            }
        }
        let mut errors: BTreeMap<&str, f64> = BTreeMap::new();
        for ((_, outcome), v) in &now.requests {
            if outcome != "ok" && *v > 0.0 {
                *errors.entry(outcome).or_default() += v;
            }
        }
        let by_capability: Map<String, Value> = now
            .capability_latency
            .iter()
            .map(|(c, b)| (c.clone(), json!(b.values().copied().fold(0.0, f64::max))))
            .collect();
        let all = sum_buckets(now.agent_latency.values());
        let (p50, p95, p99) = quantiles(&all);
        json!({
            "agents": agents,
            "totals": {
                "requests": now.total_requests(),
                "errors": errors,
                "by_agent": by_agent,
                "by_capability": by_capability,
                "signature_rejections": now.signature_rejections.values().sum::<f64>(),
                "clock_skew_rejections": now.clock_skew_rejections,
                "fallback_answers": now.fallback_answers.values().sum::<f64>(),
                "p50": p50, "p95": p95, "p99": p99,
            },
            "windows": windows,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = r#"# HELP a2a_gateway_requests Requests
a2a_gateway_requests_total{step="negotiate",agent="agent0",outcome="ok"} 8
a2a_gateway_requests_total{step="execute",agent="agent0",outcome="invalid_payload"} 2
a2a_gateway_requests_total{step="discover",agent="none",outcome="ok"} 5
a2a_gateway_request_duration_seconds_bucket{le="0.001",step="negotiate",agent="agent0"} 4
a2a_gateway_request_duration_seconds_bucket{le="0.01",step="negotiate",agent="agent0"} 8
a2a_gateway_request_duration_seconds_bucket{le="+Inf",step="negotiate",agent="agent0"} 10
a2a_gateway_capability_request_duration_seconds_bucket{le="0.01",capability="a \"b\"",step="negotiate"} 3
a2a_gateway_capability_request_duration_seconds_bucket{le="+Inf",capability="a \"b\"",step="negotiate"} 3
a2a_gateway_signature_rejections_total{reason="signature_invalid"} 1
a2a_gateway_clock_skew_rejections_total 2
a2a_gateway_fallback_answers_total{reason="capability_unavailable"} 3
"#;

    #[test]
    fn a_sample_reads_the_exposition_and_quantiles_interpolate() {
        let s = Sample::parse(TEXT, 1000);
        assert_eq!(s.total_requests(), 15.0);
        assert_eq!(s.requests.get(&("agent0".into(), "invalid_payload".into())), Some(&2.0));
        assert_eq!(s.capability_latency.keys().collect::<Vec<_>>(), vec!["a \"b\""]);
        assert_eq!(s.clock_skew_rejections, 2.0);
        let b = &s.agent_latency["agent0"];
        // 10 observations: the 5th is the first of the (0.001, 0.01] bucket's four.
        let p50 = quantile(0.5, b).expect("p50");
        assert!((p50 - (0.001 + 0.009 * 0.25)).abs() < 1e-12, "{p50}");
        // The 99th falls past the last finite bound: reported at it.
        assert_eq!(quantile(0.99, b), Some(0.01));
        assert_eq!(quantile(0.5, &Buckets::new()), None);
    }

    #[test]
    fn windows_are_the_differences_between_samples() {
        let h = MetricHistory::new(3);
        let zero = Sample { t_ms: 0, ..Sample::default() };
        let later = Sample::parse(TEXT, 2000);
        let w = window(&zero, &later);
        assert_eq!(w["requests"], json!(15.0));
        assert_eq!(w["rate"], json!(7.5));
        assert_eq!(w["errors"]["invalid_payload"], json!(2.0));
        assert_eq!(w["signature_rejections"], json!(1.0));
        assert_eq!(w["fallback_answers"], json!(3.0));
        assert_eq!(w["agents"]["agent0"]["errors"], json!(2.0));
        for _ in 0..5 {
            h.record(TEXT);
        }
        assert_eq!(h.len(), 3, "the ring keeps its bound");
        let r = h.report(TEXT, Map::new());
        assert_eq!(r["totals"]["requests"], json!(15.0));
        assert_eq!(r["totals"]["by_agent"]["agent0"]["errors"], json!(2.0));
    }
}
