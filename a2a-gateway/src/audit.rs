//! The audit log (§15): one record per request — time, sender, capability, negotiation, execution, agent, step,
//! outcome, latency — written through a2a-server's [`AuditLog`] (the one way agents and gateways write and query
//! audit records): a JSON-lines file and/or the Redis stream `<prefix>:audit` shared by every gateway and agent on
//! one Redis. Queried by sender, negotiation or execution (`GET /gateway/audit`, `a2a-gateway audit`).
//!
//! Recording never waits on a disk or on Redis: the logs hand records to background writers through bounded queues;
//! records that do not fit are dropped and counted (`a2a_gateway_audit_dropped`).

use std::path::PathBuf;
use std::sync::Arc;

use a2a_runtime::store::RedisStore;
use a2a_runtime::store::audit::{AuditLog, AuditQuery, Fanout, FileAudit, RedisAudit};
use serde::Deserialize;

pub use a2a_runtime::store::audit::AuditRecord;

/// The query parameters of `GET /gateway/audit` and the options of `a2a-gateway audit`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuditParams {
    /// Records of this sender.
    #[serde(default)]
    pub sender: Option<String>,
    /// Records of this negotiation.
    #[serde(default)]
    pub negotiation: Option<String>,
    /// Records of this execution.
    #[serde(default)]
    pub execution: Option<String>,
    /// Most records returned (the newest); default 100, at most 10 000.
    #[serde(default)]
    pub limit: Option<usize>,
}

impl AuditParams {
    /// The query of the shared audit log.
    pub fn query(&self) -> AuditQuery {
        AuditQuery {
            sender_id: self.sender.clone(),
            negotiation_id: self.negotiation.clone(),
            execution_id: self.execution.clone(),
            limit: self.limit.unwrap_or(100).clamp(1, 10_000),
        }
    }
}

/// Where records go and come from.
pub struct AuditSinks {
    /// The JSON-lines file.
    pub file: Option<PathBuf>,
    /// The Redis stream, with its bound (`XADD MAXLEN ~`).
    pub redis: Option<(Arc<RedisStore>, u64)>,
}

/// The audit log of these sinks (`None` when there is none). The Redis stream, shared by the deployment, is the
/// one queried when both are set. Must be called inside a Tokio runtime (it starts the writers).
pub fn open(sinks: AuditSinks, queue: usize) -> Result<Option<Arc<dyn AuditLog>>, String> {
    let mut logs: Vec<Arc<dyn AuditLog>> = Vec::new();
    if let Some((store, max_len)) = sinks.redis {
        logs.push(RedisAudit::new(store, max_len));
    }
    if let Some(f) = sinks.file {
        logs.push(FileAudit::new(f, queue).map_err(|e| format!("audit.file: {e}"))?);
    }
    Ok(match logs.len() {
        0 => None,
        1 => logs.pop(),
        _ => Some(Arc::new(Fanout(logs))),
    })
}

/// The records matching `p`, oldest first.
pub async fn query(log: &dyn AuditLog, p: &AuditParams) -> Result<Vec<AuditRecord>, a2a_runtime::store::StoreError> {
    let mut records = log.query(&p.query()).await?;
    records.reverse();
    Ok(records)
}
