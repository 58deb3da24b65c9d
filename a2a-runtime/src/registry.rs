//! The capability registry (§11): which agents offer which capabilities. It feeds FALLBACK
//! (`spec/PROTOCOL.md` §11) and takes no part in the handshake itself.
//!
//! Entries from configuration are static. Entries a process registers for itself carry an expiry and are refreshed
//! by a heartbeat ([`heartbeat`]); a process that dies stops refreshing and its entries disappear after the TTL.
//! [`MemoryRegistry`] keeps entries in this process; [`RedisRegistry`] shares them between every process on one
//! Redis.

use std::sync::{Arc, RwLock};
use std::time::Duration;

use a2a_core::capability::CapabilityDeclaration;
use serde::{Deserialize, Serialize};

use crate::store::StoreError;

/// One capability offered by one agent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RegistryEntry {
    /// The agent's DID.
    pub agent: String,
    /// The agent's A2A endpoint, e.g. `https://b.example.com/a2a`.
    #[serde(default)]
    pub endpoint: Option<String>,
    /// The declaration.
    pub capability: CapabilityDeclaration,
    /// When the entry was last refreshed (ms since the epoch).
    #[serde(default)]
    pub updated_at_ms: u64,
    /// When the entry lapses unless refreshed (ms since the epoch); `None` for static entries.
    #[serde(default)]
    pub expires_at_ms: Option<u64>,
}

impl RegistryEntry {
    fn live(&self, now: u64) -> bool {
        self.expires_at_ms.is_none_or(|e| e > now)
    }

    fn same_slot(&self, other: &RegistryEntry) -> bool {
        self.agent == other.agent && self.capability.name == other.capability.name && self.endpoint == other.endpoint
    }

    fn field(&self) -> String {
        format!("{}|{}|{}", self.agent, self.capability.name, self.endpoint.as_deref().unwrap_or(""))
    }
}

/// Whether an entry is relevant to `capability` (see [`Registry::related`]), given the entries that name it as a
/// parent.
fn relevant(entries: &[RegistryEntry], capability: &str) -> Vec<RegistryEntry> {
    let parents: Vec<&CapabilityDeclaration> = entries
        .iter()
        .map(|e| &e.capability)
        .filter(|c| c.name == capability && !c.sub_capabilities.is_empty())
        .collect();
    entries
        .iter()
        .filter(|e| {
            let c = &e.capability;
            c.name == capability
                || c.fallback_for.iter().any(|f| f == capability)
                || parents.iter().any(|p| p.sub_capabilities.contains(&c.name))
        })
        .cloned()
        .collect()
}

/// A source of registry entries.
#[async_trait::async_trait]
pub trait Registry: Send + Sync + 'static {
    /// Every live entry that is relevant to `capability`: entries offering it, entries declaring `fallback_for` it,
    /// and entries whose declaration lists sub-capabilities of it (or, when it names a parent, the entries of those
    /// sub-capabilities). Returning more is allowed; the caller filters.
    async fn related(&self, capability: &str) -> Result<Vec<RegistryEntry>, StoreError>;

    /// Adds or refreshes entries (one per agent, capability and endpoint).
    async fn register(&self, entries: Vec<RegistryEntry>) -> Result<(), StoreError>;

    /// Every live entry.
    async fn list(&self) -> Result<Vec<RegistryEntry>, StoreError>;

    /// Removes an agent's entries at one endpoint (a process shutting down).
    async fn deregister(&self, agent: &str, endpoint: Option<&str>) -> Result<(), StoreError>;
}

/// A registry held in memory, filled from configuration or by [`Registry::register`].
#[derive(Default)]
pub struct MemoryRegistry {
    entries: RwLock<Vec<RegistryEntry>>,
}

impl MemoryRegistry {
    /// A registry holding these entries.
    pub fn new(entries: Vec<RegistryEntry>) -> Self {
        MemoryRegistry { entries: RwLock::new(entries) }
    }
}

#[async_trait::async_trait]
impl Registry for MemoryRegistry {
    async fn related(&self, capability: &str) -> Result<Vec<RegistryEntry>, StoreError> {
        Ok(relevant(&self.list().await?, capability))
    }

    async fn register(&self, new: Vec<RegistryEntry>) -> Result<(), StoreError> {
        let now = crate::store::now_ms();
        let mut entries = self.entries.write().unwrap_or_else(std::sync::PoisonError::into_inner);
        entries.retain(|e| e.live(now));
        for n in new {
            if let Some(e) = entries.iter_mut().find(|e| e.same_slot(&n)) {
                *e = n;
            } else {
                entries.push(n);
            }
        }
        Ok(())
    }

    async fn list(&self) -> Result<Vec<RegistryEntry>, StoreError> {
        let now = crate::store::now_ms();
        let entries = self.entries.read().unwrap_or_else(std::sync::PoisonError::into_inner);
        Ok(entries.iter().filter(|e| e.live(now)).cloned().collect())
    }

    async fn deregister(&self, agent: &str, endpoint: Option<&str>) -> Result<(), StoreError> {
        let mut entries = self.entries.write().unwrap_or_else(std::sync::PoisonError::into_inner);
        entries.retain(|e| !(e.agent == agent && e.endpoint.as_deref() == endpoint));
        Ok(())
    }
}

/// A registry on Redis, shared by every process: a hash of entries (field `agent|capability|endpoint`) and a sorted
/// set of their expiry times, under the hash tag `{<prefix>:registry}`. Lapsed entries are hidden at once and deleted
/// by the next write. Static entries (from configuration) are kept in memory in front of it.
pub struct RedisRegistry {
    store: Arc<crate::store::RedisStore>,
    hash: String,
    expiry: String,
    statics: Vec<RegistryEntry>,
}

/// Entries whose expiry is this far in the future count as static in the expiry set.
const NEVER: u64 = u64::MAX / 4;

impl RedisRegistry {
    /// A registry on the store's Redis, with static entries in front of it.
    pub fn new(store: Arc<crate::store::RedisStore>, statics: Vec<RegistryEntry>) -> Self {
        let prefix = store.key_prefix().to_owned();
        RedisRegistry {
            store,
            hash: format!("{{{prefix}:registry}}:entries"),
            expiry: format!("{{{prefix}:registry}}:expiry"),
            statics,
        }
    }
}

const REGISTER_LUA: &str = r"
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', ARGV[1])
local i = 2
while i < #ARGV do
  redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1])
  redis.call('ZADD', KEYS[2], ARGV[i + 2], ARGV[i])
  i = i + 3
end
local stale = redis.call('HKEYS', KEYS[1])
for _, f in ipairs(stale) do
  if not redis.call('ZSCORE', KEYS[2], f) then redis.call('HDEL', KEYS[1], f) end
end
return 1
";

#[async_trait::async_trait]
impl Registry for RedisRegistry {
    async fn related(&self, capability: &str) -> Result<Vec<RegistryEntry>, StoreError> {
        Ok(relevant(&self.list().await?, capability))
    }

    async fn register(&self, entries: Vec<RegistryEntry>) -> Result<(), StoreError> {
        let script = redis::Script::new(REGISTER_LUA);
        let mut inv = script.prepare_invoke();
        inv.key(&self.hash).key(&self.expiry).arg(crate::store::now_ms());
        for e in &entries {
            let json = serde_json::to_string(e).map_err(|e| StoreError(e.to_string()))?;
            inv.arg(e.field()).arg(json).arg(e.expires_at_ms.unwrap_or(NEVER));
        }
        self.store.invoke::<i64>("register", inv).await.map(|_| ())
    }

    async fn list(&self) -> Result<Vec<RegistryEntry>, StoreError> {
        let now = crate::store::now_ms();
        let all: Vec<String> = self.store.command("registry", redis::cmd("HVALS").arg(&self.hash).clone()).await?;
        let mut out: Vec<RegistryEntry> = self.statics.clone();
        for json in all {
            match serde_json::from_str::<RegistryEntry>(&json) {
                Ok(e) if e.live(now) => out.push(e),
                Ok(_) => {}
                Err(e) => tracing::warn!(error = %e, "unreadable registry entry skipped"),
            }
        }
        Ok(out)
    }

    async fn deregister(&self, agent: &str, endpoint: Option<&str>) -> Result<(), StoreError> {
        let now = crate::store::now_ms();
        let fields: Vec<String> = self
            .list()
            .await?
            .into_iter()
            .filter(|e| e.agent == agent && e.endpoint.as_deref() == endpoint && e.live(now))
            .map(|e| e.field())
            .collect();
        if fields.is_empty() {
            return Ok(());
        }
        let mut p = redis::pipe();
        p.cmd("HDEL").arg(&self.hash).arg(&fields).ignore();
        p.cmd("ZREM").arg(&self.expiry).arg(&fields).ignore();
        self.store.pipeline("deregister", p).await
    }
}

/// Registers `entries` now, before it returns (a process that says it serves is already in the registry), then every
/// `ttl / 3` with an expiry of `ttl` in the task it returns, until `stop` fires; then that task deregisters them.
/// Failures (a registry that is down) are logged and retried at the next beat.
pub async fn start_heartbeat(
    registry: Arc<dyn Registry>,
    entries: Vec<RegistryEntry>,
    ttl: Duration,
    stop: tokio_util::sync::CancellationToken,
) -> tokio::task::JoinHandle<()> {
    let beat = (ttl / 3).max(Duration::from_millis(10));
    register_fresh(registry.as_ref(), &entries, ttl).await;
    tokio::spawn(async move {
        loop {
            tokio::select! {
                () = stop.cancelled() => break,
                () = tokio::time::sleep(beat) => {}
            }
            register_fresh(registry.as_ref(), &entries, ttl).await;
        }
        let mut seen = std::collections::BTreeSet::new();
        for e in &entries {
            if seen.insert((e.agent.clone(), e.endpoint.clone())) {
                let _ = registry.deregister(&e.agent, e.endpoint.as_deref()).await;
            }
        }
    })
}

/// One beat: `entries` registered as updated now, expiring after `ttl`.
async fn register_fresh(registry: &dyn Registry, entries: &[RegistryEntry], ttl: Duration) {
    let now = crate::store::now_ms();
    let fresh: Vec<RegistryEntry> = entries
        .iter()
        .cloned()
        .map(|mut e| {
            e.updated_at_ms = now;
            e.expires_at_ms = Some(now.saturating_add(ttl.as_millis() as u64));
            e
        })
        .collect();
    if let Err(e) = registry.register(fresh).await {
        tracing::warn!(error = %e, "could not refresh this agent's registry entries");
    }
}
