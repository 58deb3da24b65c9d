//! `[store]` of the agent's and the gateway's configuration: where the state lives.

use std::time::Duration;

use serde::Deserialize;

/// `[store]`: the in-memory store unless a Redis URL is given here or in the environment (`REDIS_URL`).
///
/// ```toml
/// [store]
/// redis_url = "redis://127.0.0.1:6379"   # or several seed nodes with redis_cluster = true
/// visibility_timeout_ms = 30000
/// ```
#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StoreSection {
    /// `redis://host:port/db`; absent: `REDIS_URL` from the environment; neither: the in-memory store. Several
    /// comma-separated URLs name cluster nodes.
    #[serde(default)]
    pub redis_url: Option<String>,
    /// Whether the URLs are Redis Cluster nodes (implied by several URLs).
    #[serde(default)]
    pub redis_cluster: bool,
    /// First part of every key (default `a2a`).
    #[serde(default)]
    pub key_prefix: Option<String>,
    /// Shards of the execution keys (default 16; the same in every process).
    #[serde(default)]
    pub shards: Option<u16>,
    /// How long claimed work may go untouched before another worker takes it over (default 30000 ms).
    #[serde(default)]
    pub visibility_timeout_ms: Option<u64>,
    /// Deadline of one Redis operation (default 2000 ms): past it the request is `503 store_unavailable`.
    #[serde(default)]
    pub op_timeout_ms: Option<u64>,
    /// Deadline of connecting to Redis (default 1000 ms).
    #[serde(default)]
    pub connect_timeout_ms: Option<u64>,
    /// Bound of each work stream (default 1000000).
    #[serde(default)]
    pub max_queue_len: Option<u64>,
    /// Length of the shared audit stream, about (default 100000; `XADD MAXLEN ~`).
    #[serde(default)]
    pub audit_max_len: Option<u64>,
    /// Time after which a process's registry entries lapse unless its heartbeat refreshes them (default 30000 ms).
    #[serde(default)]
    pub registry_ttl_ms: Option<u64>,
}

impl StoreSection {
    /// The Redis configuration, if Redis is configured here or by `REDIS_URL` (`env` looks variables up).
    pub fn redis(&self, env: impl Fn(&str) -> Option<String>) -> Option<super::redis::RedisConfig> {
        let url = self.redis_url.clone().or_else(|| env("REDIS_URL").filter(|u| !u.trim().is_empty()))?;
        let mut c = super::redis::RedisConfig::new(url);
        c.cluster = self.redis_cluster || c.urls().len() > 1;
        if let Some(p) = &self.key_prefix {
            c.key_prefix = p.clone();
        }
        if let Some(v) = self.shards {
            c.shards = v;
        }
        if let Some(v) = self.visibility_timeout_ms {
            c.visibility_timeout_ms = v;
        }
        if let Some(v) = self.op_timeout_ms {
            c.op_timeout_ms = v;
        }
        if let Some(v) = self.connect_timeout_ms {
            c.connect_timeout_ms = v;
        }
        if let Some(v) = self.max_queue_len {
            c.max_queue_len = v;
        }
        Some(c)
    }

    /// The registry TTL.
    pub fn registry_ttl(&self) -> Duration {
        Duration::from_millis(self.registry_ttl_ms.unwrap_or(30_000))
    }
}
