//! The console's traffic: the audit records of the requests this gateway answers, live (a broadcast to the open
//! event streams, written with the workspace's one SSE codec, `a2a_core::sse`), the recent ones (from the audit log,
//! or kept here when there is none), filtered by sender, capability, agent and outcome, and the timeline of one
//! execution (its negotiation, EXECUTE, CONFIRM, RESULT, CANCEL and FALLBACK records, with their durations and
//! whether a signature proved the sender).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use a2a_runtime::store::audit::{AuditQuery, AuditRecord};
use axum::body::Body;
use bytes::Bytes;
use http::{HeaderValue, Response, StatusCode, header};
use serde_json::{Value, json};
use tokio::sync::broadcast;

use crate::Inner;

/// How often an idle event stream gets a keep-alive comment.
const KEEP_ALIVE: Duration = Duration::from_secs(15);
/// The recent records an event stream starts with.
const BACKLOG: usize = 200;

/// The live audit records.
pub struct Traffic {
    tx: broadcast::Sender<Arc<AuditRecord>>,
    /// The newest records, kept when no audit log is configured.
    kept: Option<Mutex<VecDeque<AuditRecord>>>,
    max: usize,
}

impl Traffic {
    /// A tap whose streams may fall `max` records behind; keeps the newest `max` records itself when `keep`.
    pub fn new(max: usize, keep: bool) -> Traffic {
        let max = max.max(1);
        let (tx, _) = broadcast::channel(max);
        Traffic { tx, kept: keep.then(|| Mutex::new(VecDeque::new())), max }
    }

    /// Whether a record would be used: a stream is open, or records are kept here.
    pub fn wanted(&self) -> bool {
        self.kept.is_some() || self.tx.receiver_count() > 0
    }

    /// Hands a record to the open streams (and keeps it when there is no audit log).
    pub fn tap(&self, rec: &AuditRecord) {
        if self.tx.receiver_count() > 0 {
            let _ = self.tx.send(Arc::new(rec.clone()));
        }
        if let Some(kept) = &self.kept {
            let mut g = kept.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            if g.len() >= self.max {
                g.pop_front();
            }
            g.push_back(rec.clone());
        }
    }

    /// Open event streams.
    pub fn watchers(&self) -> usize {
        self.tx.receiver_count()
    }

    fn kept(&self, f: &Filter, limit: usize) -> Option<Vec<AuditRecord>> {
        let kept = self.kept.as_ref()?;
        let g = kept.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut v: Vec<AuditRecord> = g.iter().rev().filter(|r| f.matches(r)).take(limit).cloned().collect();
        v.reverse();
        Some(v)
    }
}

/// What the traffic view asks for: every field is optional and matched exactly (`agent` against the agent's URL or
/// its metric label).
#[derive(Debug, Clone, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Filter {
    #[serde(default)]
    sender: Option<String>,
    #[serde(default)]
    capability: Option<String>,
    #[serde(default)]
    agent: Option<String>,
    #[serde(default)]
    outcome: Option<String>,
    #[serde(default)]
    execution: Option<String>,
    #[serde(default)]
    negotiation: Option<String>,
    /// At most this many records (the newest; default 200, at most 10 000).
    #[serde(default)]
    limit: Option<usize>,
}

impl Filter {
    pub(crate) fn from_uri(uri: &http::Uri) -> Result<Filter, String> {
        let mut f = axum::extract::Query::<Filter>::try_from_uri(uri).map(|q| q.0).map_err(|e| {
            format!("query parameters: sender, capability, agent, outcome, execution, negotiation, limit ({e})")
        })?;
        for v in [&mut f.sender, &mut f.capability, &mut f.agent, &mut f.outcome, &mut f.execution, &mut f.negotiation]
        {
            if v.as_deref().is_some_and(str::is_empty) {
                *v = None;
            }
        }
        Ok(f)
    }

    fn limit(&self) -> usize {
        self.limit.unwrap_or(BACKLOG).clamp(1, 10_000)
    }

    fn matches(&self, r: &AuditRecord) -> bool {
        let is = |want: &Option<String>, got: Option<&str>| want.as_deref().is_none_or(|w| got == Some(w));
        is(&self.sender, Some(&r.sender_id))
            && is(&self.capability, r.capability.as_deref())
            && is(&self.outcome, Some(&r.outcome))
            && is(&self.execution, r.execution_id.as_deref())
            && is(&self.negotiation, r.negotiation_id.as_deref())
            && self.agent.as_deref().is_none_or(|a| r.agent == a)
    }

    /// The filter with `agent` given as a metric label turned into that agent's URL.
    fn resolved(mut self, gw: &Inner) -> Filter {
        if let Some(a) = &self.agent
            && let Some(agent) = gw.agents.listed().iter().find(|x| x.label == *a)
        {
            self.agent = Some(agent.endpoint.url.clone());
        }
        self
    }
}

/// A record as the console shows it: the audit record, with the metric label of its agent.
fn shown(gw: &Inner, r: &AuditRecord) -> Value {
    let mut v = serde_json::to_value(r).unwrap_or(Value::Null);
    let label = gw.agents.listed().iter().find(|a| a.endpoint.url == r.agent).map(|a| a.label.clone());
    v["agent_label"] = json!(label);
    v
}

/// The newest records matching `f`, oldest first: from the audit log (queried by sender, negotiation or execution,
/// then filtered), or those kept here.
pub(crate) async fn history(gw: &Inner, f: &Filter) -> Result<Vec<Value>, String> {
    let f = f.clone().resolved(gw);
    let limit = f.limit();
    let records = match &gw.audit {
        Some(log) => {
            // The log answers the indexed fields; the others are filtered here, over a larger read.
            let q = AuditQuery {
                sender_id: f.sender.clone(),
                negotiation_id: f.negotiation.clone(),
                execution_id: f.execution.clone(),
                limit: if f.capability.is_some() || f.agent.is_some() || f.outcome.is_some() {
                    (limit * 10).min(10_000)
                } else {
                    limit
                },
            };
            let mut v: Vec<AuditRecord> = log
                .query(&q)
                .await
                .map_err(|e| e.to_string())?
                .into_iter()
                .filter(|r| f.matches(r))
                .take(limit)
                .collect();
            v.reverse();
            v
        }
        None => gw.kept.console.traffic.kept(&f, limit).unwrap_or_default(),
    };
    Ok(records.iter().map(|r| shown(gw, r)).collect())
}

/// The timeline of execution `id`: its records and those of its negotiation, oldest first, each with its start
/// (answer time less latency), duration and signature verdict.
pub(crate) async fn timeline(gw: &Inner, id: &str) -> Result<Value, String> {
    let by_execution = Filter { execution: Some(id.to_owned()), limit: Some(1000), ..Filter::default() };
    let mut records = history(gw, &by_execution).await?;
    let negotiation = records.iter().find_map(|r| r["negotiation_id"].as_str().map(str::to_owned));
    if let Some(n) = &negotiation {
        let by_negotiation = Filter { negotiation: Some(n.clone()), limit: Some(1000), ..Filter::default() };
        for r in history(gw, &by_negotiation).await? {
            if r["execution_id"].as_str() != Some(id) {
                records.push(r);
            }
        }
    }
    let mut steps: Vec<Value> = records
        .into_iter()
        .map(|mut r| {
            let end = r["time_ms"].as_u64().unwrap_or(0);
            let us = r["latency_us"].as_u64().unwrap_or(0);
            r["start_ms"] = json!(end.saturating_sub(us / 1000));
            r["duration_ms"] = json!(us as f64 / 1000.0);
            r["signature"] = json!(if r["verified"].as_bool().unwrap_or(false) { "verified" } else { "unsigned" });
            r
        })
        .collect();
    steps.sort_by_key(|r| (r["start_ms"].as_u64().unwrap_or(0), r["time_ms"].as_u64().unwrap_or(0)));
    Ok(json!({"execution_id": id, "negotiation_id": negotiation, "steps": steps}))
}

/// The event stream of the traffic view: `event: record` for each of the newest matching records, then for each
/// new one as it is answered; `event: lagged` (data: how many were missed) when the stream fell behind.
pub(crate) async fn stream(gw: &Arc<Inner>, f: Filter) -> Response<Body> {
    let f = f.resolved(gw);
    // Subscribed before the backlog is read: a record answered in between is sent twice rather than never.
    let rx = gw.kept.console.traffic.tx.subscribe();
    let backlog = history(gw, &f).await.unwrap_or_default();
    let mut first = String::new();
    a2a_core::sse::write_comment(&mut first, "a2a-gateway console traffic");
    for r in backlog {
        first.push_str(&String::from_utf8_lossy(&super::sse_bytes("record", None, r.to_string())));
    }
    let state = (gw.clone(), rx, f, Some(Bytes::from(first)));
    let events = futures_util::stream::unfold(state, |(gw, mut rx, f, first)| async move {
        if let Some(b) = first {
            return Some((Ok::<_, std::convert::Infallible>(b), (gw, rx, f, None)));
        }
        loop {
            let item = tokio::time::timeout(KEEP_ALIVE, rx.recv()).await;
            let bytes = match item {
                Err(_) => {
                    let mut s = String::new();
                    a2a_core::sse::write_comment(&mut s, "keep-alive");
                    Bytes::from(s)
                }
                Ok(Ok(r)) if f.matches(&r) => super::sse_bytes("record", None, shown(&gw, &r).to_string()),
                Ok(Ok(_)) => continue,
                Ok(Err(broadcast::error::RecvError::Lagged(n))) => super::sse_bytes("lagged", None, n.to_string()),
                Ok(Err(broadcast::error::RecvError::Closed)) => return None,
            };
            return Some((Ok(bytes), (gw, rx, f, None)));
        }
    });
    let mut r = Response::new(Body::from_stream(events));
    *r.status_mut() = StatusCode::OK;
    super::headers(&mut r, "text/event-stream", super::CSP);
    r.headers_mut().insert(header::HeaderName::from_static("x-accel-buffering"), HeaderValue::from_static("no"));
    r
}
