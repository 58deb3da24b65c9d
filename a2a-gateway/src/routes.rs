//! Where a negotiation or an execution lives (GW-2): `negotiation_id → agent` is recorded when NEGOTIATE succeeds,
//! `execution_id → agent` when EXECUTE does, each for the lifetime of what it names. EXECUTE, CONFIRM, RESULT and
//! CANCEL are sent where their route points; `(sender, Idempotency-Key) → agent` is recorded with the execution.
//!
//! [`MemoryRoutes`] keeps routes in this process (the embedded default). [`RedisRoutes`] shares them between every
//! gateway on one Redis (string keys `<prefix>:gw:n:<id>` and `<prefix>:gw:x:<id>` with `PX` expiry, written before
//! the answer is returned, so that the caller's next step may go to any gateway), with a local cache in front:
//! a route never changes once written, so a cached one is always right until it expires.

use std::sync::Arc;
use std::time::{Duration, Instant};

use a2a_server::store::{RedisStore, StoreError, now_ms};

/// What a route names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    /// A negotiation id.
    Negotiation,
    /// An execution id.
    Execution,
    /// A sender's `Idempotency-Key` (`<sender> <key>`), recorded with its execution: the key reused with a
    /// negotiation at another agent is a conflict the gateway sees and no agent can (EXE-7, GW-6).
    Idempotency,
}

impl Kind {
    fn tag(self) -> &'static str {
        match self {
            Kind::Negotiation => "n",
            Kind::Execution => "x",
            Kind::Idempotency => "k",
        }
    }
}

/// Where a negotiation or execution lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    /// The agent's endpoint URL.
    pub agent: Arc<str>,
    /// The capability it is about.
    pub capability: Arc<str>,
}

impl Route {
    fn encode(&self, expires_at_ms: u64) -> String {
        format!("{}\n{}\n{expires_at_ms}", self.agent, self.capability)
    }

    fn decode(s: &str) -> Option<(Route, u64)> {
        let mut it = s.splitn(3, '\n');
        let agent = it.next()?;
        let capability = it.next()?;
        let exp = it.next()?.parse().ok()?;
        Some((Route { agent: agent.into(), capability: capability.into() }, exp))
    }
}

/// A store of routes.
#[async_trait::async_trait]
pub trait Routes: Send + Sync + 'static {
    /// Records a route for `ttl`.
    async fn put(&self, kind: Kind, id: &str, route: Route, ttl: Duration) -> Result<(), StoreError>;
    /// The route of an id, if recorded and not expired.
    async fn get(&self, kind: Kind, id: &str) -> Result<Option<Route>, StoreError>;
}

#[derive(Clone)]
struct Entry {
    route: Route,
    until: Instant,
}

struct EntryExpiry;

impl moka::Expiry<(Kind, Box<str>), Entry> for EntryExpiry {
    fn expire_after_create(&self, _k: &(Kind, Box<str>), v: &Entry, at: Instant) -> Option<Duration> {
        Some(v.until.saturating_duration_since(at))
    }
}

/// Routes held in this process, at most `max` (least recently used dropped first).
pub struct MemoryRoutes {
    cache: moka::sync::Cache<(Kind, Box<str>), Entry>,
}

impl MemoryRoutes {
    /// A store holding at most `max` routes.
    pub fn new(max: u64) -> Self {
        MemoryRoutes { cache: moka::sync::Cache::builder().max_capacity(max).expire_after(EntryExpiry).build() }
    }

    fn put_local(&self, kind: Kind, id: &str, route: Route, ttl: Duration) {
        self.cache.insert((kind, id.into()), Entry { route, until: Instant::now() + ttl });
    }

    fn get_local(&self, kind: Kind, id: &str) -> Option<Route> {
        let e = self.cache.get(&(kind, id.into()))?;
        (e.until > Instant::now()).then_some(e.route)
    }
}

#[async_trait::async_trait]
impl Routes for MemoryRoutes {
    async fn put(&self, kind: Kind, id: &str, route: Route, ttl: Duration) -> Result<(), StoreError> {
        self.put_local(kind, id, route, ttl);
        Ok(())
    }

    async fn get(&self, kind: Kind, id: &str) -> Result<Option<Route>, StoreError> {
        Ok(self.get_local(kind, id))
    }
}

/// Routes on Redis, shared by every gateway using the same key prefix, with a local cache.
pub struct RedisRoutes {
    store: Arc<RedisStore>,
    prefix: String,
    local: MemoryRoutes,
}

impl RedisRoutes {
    /// Routes on the store's Redis, caching at most `max_local` in this process.
    pub fn new(store: Arc<RedisStore>, max_local: u64) -> Self {
        let prefix = format!("{}:gw", store.key_prefix());
        RedisRoutes { store, prefix, local: MemoryRoutes::new(max_local) }
    }

    fn key(&self, kind: Kind, id: &str) -> String {
        format!("{}:{}:{id}", self.prefix, kind.tag())
    }
}

#[async_trait::async_trait]
impl Routes for RedisRoutes {
    async fn put(&self, kind: Kind, id: &str, route: Route, ttl: Duration) -> Result<(), StoreError> {
        let ms = ttl.as_millis().max(1) as u64;
        let value = route.encode(now_ms() + ms);
        self.store
            .command::<()>("route put", redis::cmd("SET").arg(self.key(kind, id)).arg(value).arg("PX").arg(ms).clone())
            .await?;
        self.local.put_local(kind, id, route, ttl);
        Ok(())
    }

    async fn get(&self, kind: Kind, id: &str) -> Result<Option<Route>, StoreError> {
        if let Some(r) = self.local.get_local(kind, id) {
            return Ok(Some(r));
        }
        let v: Option<String> =
            self.store.command("route get", redis::cmd("GET").arg(self.key(kind, id)).clone()).await?;
        let Some((route, exp)) = v.as_deref().and_then(Route::decode) else { return Ok(None) };
        let now = now_ms();
        if exp <= now {
            return Ok(None);
        }
        self.local.put_local(kind, id, route.clone(), Duration::from_millis(exp - now));
        Ok(Some(route))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_round_trip_their_encoding() {
        let r = Route { agent: "http://127.0.0.1:1/a2a".into(), capability: "submit_report".into() };
        assert_eq!(Route::decode(&r.encode(42)), Some((r, 42)));
        assert_eq!(Route::decode("garbage"), None);
    }

    #[tokio::test]
    async fn memory_routes_expire() {
        let m = MemoryRoutes::new(10);
        let r = Route { agent: "a".into(), capability: "b".into() };
        m.put(Kind::Negotiation, "n1", r.clone(), Duration::from_millis(30)).await.expect("put");
        assert_eq!(m.get(Kind::Negotiation, "n1").await.expect("get"), Some(r));
        assert_eq!(m.get(Kind::Execution, "n1").await.expect("get"), None);
        tokio::time::sleep(Duration::from_millis(60)).await;
        assert_eq!(m.get(Kind::Negotiation, "n1").await.expect("get"), None);
    }
}
